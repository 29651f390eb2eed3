"""Greedy feature(-group) selection: cost-sensitive group sequencing (and more greedy solvers)."""

from jaxselect.greedy.sequencing import cs_fr, cs_omp, doubling, fixed_order_path

__all__ = ["cs_omp", "cs_fr", "doubling", "fixed_order_path"]
