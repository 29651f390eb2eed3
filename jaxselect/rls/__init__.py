"""Multi-target greedy RLS: forward selection by leave-one-out error in linear time (Pahikkala,
Airola et al.; Naula et al.). :mod:`~jaxselect.rls.selection` holds the solver."""

from jaxselect.rls.selection import (
    RLSConfig,
    RLSInfo,
    RLSProblem,
    RLSResult,
    RLSState,
    greedy_rls,
    rls_init,
    rls_predict,
    rls_predict_path,
    rls_problem,
    rls_solver,
    rls_step,
    rls_to_path,
)

__all__ = [
    "greedy_rls",
    "RLSResult",
    "rls_predict",
    "rls_predict_path",
    "rls_to_path",
    "RLSState",
    "RLSInfo",
    "RLSProblem",
    "RLSConfig",
    "rls_problem",
    "rls_init",
    "rls_step",
    "rls_solver",
]

# js.predict: register this family's result type (RLSResult) with the single-dispatch predict
from jaxselect.rls import predictor as _predictor  # noqa: E402, F401
