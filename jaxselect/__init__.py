"""jaxselect: JIT-compiled functional JAX feature selection under budgets.

Data model → solvers → evaluation:

* :class:`Groups`, :func:`prepare` → :class:`Problem` (standardised, group-whitened moments);
* sequencing solvers :func:`cs_omp`, :func:`cs_fr`, :func:`doubling` → :class:`SelectionPath`;
* anytime evaluation: :func:`predict`, :func:`objective_curve`, :func:`timeliness`,
  :func:`oracle_curve`, :func:`alpha_stopping_cost`, :func:`plateau_alpha`;
* one status convention: every result has ``status`` (0 = fine), :func:`raise_for_status`.
"""

from jaxselect import datasets, losses
from jaxselect.anytime import (
    Curve,
    as_path,
    alpha_stopping_cost,
    objective_curve,
    oracle_curve,
    plateau_alpha,
    predict,
    timeliness,
    train_curve,
)
from jaxselect.anneal import FSAResult, annealing_schedule, fsa, fsa_predict
from jaxselect.baselines import GroupLassoFit, group_lasso, group_lasso_lambda_max, group_lasso_path
from jaxselect.greedy import (
    GLMInfo,
    RLSResult,
    cs_fr,
    cs_omp,
    doubling,
    fixed_order_path,
    glm_accuracy,
    glm_omp,
    glm_predict,
    greedy_rls,
    rls_predict,
    rls_predict_path,
    rls_to_path,
)
from jaxselect.groups import Groups
from jaxselect.path import SelectionPath
from jaxselect.moments import Moments
from jaxselect.prepare import Design, Problem, Transform, prepare, problem_from_moments, whiten_design
from jaxselect.refit import glm_refit, ridge_refit, rls_refit
from jaxselect.sequential import (
    DWSMPolicy,
    DWSMReport,
    DWSMTrace,
    dwsm_evaluate,
    dwsm_fit,
    dwsm_predict,
    dwsm_trace,
)
from jaxselect.sharding import data_mesh, row_sharding, shard_rows
from jaxselect.streaming import prepare_from_batches
from jaxselect.status import (
    ILL_CONDITIONED,
    NONFINITE,
    NOT_CONVERGED,
    STATUS_MESSAGES,
    SolverError,
    raise_for_status,
    status_message,
)

__version__ = "0.2.0"

__all__ = [
    "raise_for_status",
    "status_message",
    "STATUS_MESSAGES",
    "NONFINITE",
    "ILL_CONDITIONED",
    "NOT_CONVERGED",
    "SolverError",
    "Groups",
    "Problem",
    "Transform",
    "prepare",
    "prepare_from_batches",
    "problem_from_moments",
    "Moments",
    "Design",
    "whiten_design",
    "SelectionPath",
    "cs_omp",
    "cs_fr",
    "doubling",
    "fixed_order_path",
    "glm_omp",
    "glm_predict",
    "glm_accuracy",
    "GLMInfo",
    "group_lasso_path",
    "group_lasso",
    "group_lasso_lambda_max",
    "GroupLassoFit",
    "ridge_refit",
    "rls_refit",
    "glm_refit",
    "greedy_rls",
    "RLSResult",
    "rls_predict",
    "rls_predict_path",
    "rls_to_path",
    "fsa",
    "fsa_predict",
    "FSAResult",
    "annealing_schedule",
    "dwsm_fit",
    "dwsm_predict",
    "dwsm_trace",
    "dwsm_evaluate",
    "DWSMPolicy",
    "DWSMTrace",
    "DWSMReport",
    "Curve",
    "as_path",
    "predict",
    "objective_curve",
    "train_curve",
    "alpha_stopping_cost",
    "plateau_alpha",
    "timeliness",
    "oracle_curve",
    "datasets",
    "losses",
    "data_mesh",
    "row_sharding",
    "shard_rows",
]
