"""Cumulative costs and budgets: one summation and one comparison rule for every solver.

Costs are summed with compensation (Kahan), so a cumulative cost is the correctly rounded sum of
the costs; a budget B admits a cumulative cost c when ``c ≤ B·(1 + 32ε)`` (ε the dtype's machine
epsilon), so a budget written in decimal that equals a prefix's cost (24.31 = 1.76 + 6.5 + …) buys
that prefix in float32 even though each cost was rounded on its own.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["BUDGET_RTOL_EPS", "budget_rtol", "kahan_add", "within_budget"]

#: Relative budget tolerance in machine epsilons of the cost dtype.
BUDGET_RTOL_EPS = 32


def budget_rtol(dtype) -> float:
    """The relative tolerance of budget comparisons in ``dtype`` (32 machine epsilons)."""
    return BUDGET_RTOL_EPS * float(jnp.finfo(dtype).eps)


def kahan_add(total: jax.Array, carry: jax.Array, value: jax.Array):
    """Compensated summation: returns ``(total + value, new carry)`` with the rounding error kept."""
    y = value - carry
    t = total + y
    return t, (t - total) - y


def within_budget(cost: jax.Array, budget: jax.Array) -> jax.Array:
    """``cost ≤ budget`` up to the relative tolerance :func:`budget_rtol` (broadcasts; budget ≥ 0)."""
    budget = jnp.asarray(budget, cost.dtype)
    return cost <= budget * jnp.asarray(1.0 + budget_rtol(cost.dtype), cost.dtype)
