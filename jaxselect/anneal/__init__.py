"""Feature Selection with Annealing (Barbu, She, Ding & Gramajo): schedule, solver, PL learners.

:func:`fsa` is the solver, one compiled run of the whole schedule, polish and survivors
(:func:`fsa_solver`: FSA as a :class:`jaxselect.Solver`, run stage by stage by the library's driver;
its options in the records :class:`Polish`, :class:`Execution`, :class:`PiecewiseLinear`). The
step it is built on: :func:`fsa_prepare` builds an :class:`FSAProblem` (data, priors and the static
:class:`FSAConfig`), :func:`fsa_init` gives the :class:`FSAState` and :func:`fsa_step` (one
iteration of Algorithm 1, pure and jit-able) advances it. :func:`gradient_descent` is the default
update rule as an optax ``GradientTransformation``.
"""

from .fsa import FSAResult, fsa, fsa_predict, fsa_prepare
from .options import Execution, PiecewiseLinear, Polish
from .defaults import FSA_PAPER
from .solver import FSACarry, FSAStage, fsa_solver
from .piecewise import PLGrid, pl_basis_mean, pl_encode, pl_grid, pl_response, pl_scores, smoothness_penalty
from .schedule import Stage, annealing_schedule, k_bucket, plan_stages, schedule_area, stage_widths
from .step import FSAConfig, FSAProblem, FSAState, fsa_init, fsa_step
from .update import StepState, gradient_descent

__all__ = [
    "fsa",
    "fsa_predict",
    "FSA_PAPER",
    "FSAResult",
    "Polish",
    "Execution",
    "PiecewiseLinear",
    "fsa_solver",
    "FSACarry",
    "FSAStage",
    "FSAProblem",
    "FSAConfig",
    "FSAState",
    "fsa_prepare",
    "fsa_init",
    "fsa_step",
    "gradient_descent",
    "StepState",
    "annealing_schedule",
    "plan_stages",
    "stage_widths",
    "k_bucket",
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

# js.predict: register this family's result type (FSAResult) with the single-dispatch predict
from jaxselect.anneal import predictor as _predictor  # noqa: E402, F401
