"""jaxselect: JIT-compiled functional JAX feature selection under budgets.

Data model → solvers → evaluation:

* :class:`Groups`, :func:`prepare` → :class:`Problem` (standardised, group-whitened moments);
* sequencing solvers :func:`cs_omp`, :func:`cs_fr`, :func:`doubling` → :class:`SelectionPath`;
* prediction from any result: :func:`predict` (paths, greedy RLS, FSA, group lasso, DWSM);
* anytime evaluation: :func:`objective_curve`, :func:`timeliness`,
  :func:`oracle_curve`, :func:`alpha_stopping_cost`, :func:`plateau_alpha`;
* one status convention: every result has ``status`` (0 = fine), :func:`raise_for_status`.
"""

from jaxselect import datasets, design, losses
from jaxselect.anneal import FSA_PAPER, Execution, FSAResult, PiecewiseLinear, Polish, annealing_schedule, fsa
from jaxselect.sequencing.anytime import (
    Curve,
    alpha_stopping_cost,
    as_path,
    objective_curve,
    oracle_curve,
    plateau_alpha,
    timeliness,
    train_curve,
)
from jaxselect.design import ColumnSummary, Data, as_data
from jaxselect.sequencing.group_lasso import (
    GroupLassoFit,
    group_lasso,
    group_lasso_lambda_max,
    group_lasso_path,
)
from jaxselect.rls import RLSResult, greedy_rls, rls_to_path
from jaxselect.sequencing import (
    GLMInfo,
    NewtonOptions,
    cs_fr,
    cs_omp,
    doubling,
    fixed_order_path,
    glm_omp,
    glm_omp_run,
    glm_prepare,
)
from jaxselect.sequencing.glm_eval import glm_accuracy
from jaxselect.groups import Groups
from jaxselect.model_selection import CVResult, cross_validate_fsa, cross_validate_path
from jaxselect.design.moments import Moments
from jaxselect.path import SelectionPath
from jaxselect.prediction import (  # predict dispatches on the result; the others are deprecated aliases
    dwsm_predict,
    fsa_predict,
    glm_predict,
    predict,
    rls_predict,
    rls_predict_path,
)
from jaxselect.sequencing.prepare import (
    Design,
    Problem,
    Transform,
    prepare,
    problem_from_moments,
    whiten_design,
)
from jaxselect.refit import GLMRefitResult, glm_refit, ridge_refit, rls_refit
from jaxselect.dwsm import (
    DWSMPolicy,
    DWSMReport,
    DWSMTrace,
    dwsm_evaluate,
    dwsm_fit,
    dwsm_trace,
)
from jaxselect.sharding import data_mesh, row_sharding, shard_rows
from jaxselect.programs import (
    clear_compiled,
    enable_persistent_cache,
    disable_persistent_cache,
    max_program_maps,
    max_programs,
    set_max_program_maps,
    set_max_programs,
)
from jaxselect.solver import Solver, SolverTraits
from jaxselect.status import (
    DEGENERATE,
    ILL_CONDITIONED,
    NONFINITE,
    NOT_CONVERGED,
    STATUS_MESSAGES,
    SolverError,
    raise_for_status,
    status_message,
)
from jaxselect.sequencing.streaming import prepare_from_batches, row_batches

__version__ = "0.4.0.dev0"

__all__ = [
    "ILL_CONDITIONED",
    "DEGENERATE",
    "NONFINITE",
    "NOT_CONVERGED",
    "STATUS_MESSAGES",
    "CVResult",
    "ColumnSummary",
    "Data",
    "Curve",
    "DWSMPolicy",
    "DWSMReport",
    "DWSMTrace",
    "Design",
    "Execution",
    "FSA_PAPER",
    "FSAResult",
    "GLMInfo",
    "NewtonOptions",
    "GroupLassoFit",
    "Groups",
    "Moments",
    "PiecewiseLinear",
    "Polish",
    "Problem",
    "RLSResult",
    "SelectionPath",
    "Solver",
    "SolverError",
    "SolverTraits",
    "Transform",
    "alpha_stopping_cost",
    "annealing_schedule",
    "as_data",
    "as_path",
    "clear_compiled",
    "cross_validate_fsa",
    "cross_validate_path",
    "cs_fr",
    "cs_omp",
    "data_mesh",
    "datasets",
    "design",
    "doubling",
    "disable_persistent_cache",
    "enable_persistent_cache",
    "dwsm_evaluate",
    "dwsm_fit",
    "dwsm_predict",
    "dwsm_trace",
    "fixed_order_path",
    "fsa",
    "fsa_predict",
    "glm_accuracy",
    "glm_omp",
    "glm_omp_run",
    "glm_prepare",
    "glm_predict",
    "glm_refit",
    "GLMRefitResult",
    "greedy_rls",
    "group_lasso",
    "group_lasso_lambda_max",
    "group_lasso_path",
    "losses",
    "max_program_maps",
    "max_programs",
    "objective_curve",
    "oracle_curve",
    "plateau_alpha",
    "predict",
    "prepare",
    "prepare_from_batches",
    "problem_from_moments",
    "raise_for_status",
    "ridge_refit",
    "rls_predict",
    "rls_predict_path",
    "rls_refit",
    "rls_to_path",
    "row_batches",
    "row_sharding",
    "set_max_program_maps",
    "set_max_programs",
    "shard_rows",
    "status_message",
    "timeliness",
    "train_curve",
    "whiten_design",
]
