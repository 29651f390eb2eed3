"""Greedy feature(-group) selection.

* :mod:`jaxselect.greedy.sequencing` — CS-G-OMP (and variants), CS-G-FR, Doubling (Hu et al.);
* :mod:`jaxselect.greedy.glm` — GLM / multi-output cost-sensitive group OMP (Hu et al., Alg. 3);
* :mod:`jaxselect.greedy.rls` — multi-target greedy RLS by leave-one-out error (Airola, Pahikkala et al.).
"""

from jaxselect.greedy.glm import GLM_LOSSES, GLMInfo, glm_accuracy, glm_omp, glm_predict
from jaxselect.greedy.rls import (
    RLS_STATUS_MESSAGES,
    RLSResult,
    greedy_rls,
    rls_predict,
    rls_predict_path,
    rls_raise_for_status,
)
from jaxselect.greedy.sequencing import cs_fr, cs_omp, doubling, fixed_order_path

__all__ = [
    "cs_omp",
    "cs_fr",
    "doubling",
    "fixed_order_path",
    "glm_omp",
    "glm_predict",
    "glm_accuracy",
    "GLMInfo",
    "GLM_LOSSES",
    "greedy_rls",
    "RLSResult",
    "rls_predict",
    "rls_predict_path",
    "rls_raise_for_status",
    "RLS_STATUS_MESSAGES",
]
