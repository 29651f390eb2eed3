"""Feature Selection with Annealing (Barbu, She, Ding & Gramajo): schedule, solver, PL learners."""

from .fsa import FSA_STATUS, FSAResult, check_fsa_result, fsa, fsa_predict
from .piecewise import PLGrid, pl_basis_mean, pl_encode, pl_grid, pl_response, pl_scores, smoothness_penalty
from .schedule import Stage, annealing_schedule, plan_stages, schedule_area

__all__ = [
    "fsa",
    "fsa_predict",
    "FSAResult",
    "FSA_STATUS",
    "check_fsa_result",
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
