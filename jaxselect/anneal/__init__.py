"""Feature Selection with Annealing (Barbu, She, Ding & Gramajo): schedule, solver, PL learners.

:func:`fsa` is the solver; :class:`FSAProblem` / :func:`fsa_prepare`, :class:`FSAState` /
:func:`fsa_init` and :func:`fsa_step` (one iteration of Algorithm 1, pure and jit-able) are the
advanced API it is built on.
"""

from .fsa import (
    FSAInfo,
    FSAProblem,
    FSAResult,
    FSAState,
    fsa,
    fsa_init,
    fsa_predict,
    fsa_prepare,
    fsa_step,
)
from .piecewise import PLGrid, pl_basis_mean, pl_encode, pl_grid, pl_response, pl_scores, smoothness_penalty
from .schedule import Stage, annealing_schedule, plan_stages, schedule_area

__all__ = [
    "fsa",
    "fsa_predict",
    "FSAResult",
    "FSAProblem",
    "FSAState",
    "FSAInfo",
    "fsa_prepare",
    "fsa_init",
    "fsa_step",
    "annealing_schedule",
    "plan_stages",
    "schedule_area",
    "Stage",
    "PLGrid",
    "pl_grid",
    "pl_encode",
    "pl_scores",
    "pl_response",
    "pl_basis_mean",
    "smoothness_penalty",
]
