"""Datum-wise sparse classification (Dulac-Arnold, Denoyer, Preux & Gallinari, Mach. Learn. 2012).

A classifier that, for every datum, sequentially chooses which features (or groups) to acquire and
when to classify: an MDP whose return is minus the datum-wise loss (paper eq. 2/4, Table 1), a
linear block-vector policy (§3.3) learned by Rollout Classification Policy Iteration (§3.4), and the
hard-budget, cost-sensitive, grouped and relational variants (§4, Table 2). Units (features or
groups) and their costs come from a :class:`~jaxselect.Groups`; ``budget`` is a cumulative cost.

Solver protocol (the library's): :func:`rcpi_problem` (data and every option, once) ->
:func:`rcpi_init` ``(problem, key, n_iter) -> state`` -> :func:`rcpi_step` ``(problem, state) ->
state`` (one policy iteration; :class:`RCPIState` carries the key) -> :func:`rcpi_run`, the
compiled loop that returns the best iterate as a :class:`DWSMPolicy`; :func:`rcpi_evaluate` gives
an iterate's training datum-wise loss. :func:`dwsm_fit` validates the user's input and runs them.

Modules: ``mdp`` (the MDP and its variants), ``policy`` (the linear policy, inference), ``problem``
(:class:`RCPIProblem`, its static :class:`RCPIConfig`, boundary checks), ``states`` (sampled
states), ``rollouts`` (Q estimates), ``policy_fit`` (ridge fit per action, α-mixture), ``rcpi``
(init / step / run), ``fit`` (``dwsm_fit``), ``progress`` (callbacks), ``metrics``.
"""

from .mdp import DWSMSpec, make_spec
from .metrics import (
    DWSMReport,
    accuracy,
    average_cost,
    class_usage,
    dwsm_evaluate,
    feature_usage,
    mean_sparsity,
)
from .fit import dwsm_fit
from .policy import DWSMPolicy, DWSMTrace, dwsm_predict, dwsm_trace
from .policy_fit import AVERAGE_MIXTURE, STOCHASTIC_MIXTURE, MixtureRule
from .problem import MDPOptions, RCPIConfig, RCPIOptions, RCPIProblem, rcpi_config, rcpi_problem
from .rcpi import (
    RCPIInfo,
    RCPIRun,
    RCPIState,
    RCPIStepInfo,
    initial_policy,
    rcpi_evaluate,
    rcpi_init,
    rcpi_run,
    rcpi_solver,
    rcpi_step,
)
from .states import trajectory_states

__all__ = [
    "dwsm_fit",
    "dwsm_predict",
    "dwsm_trace",
    "dwsm_evaluate",
    "DWSMPolicy",
    "DWSMTrace",
    "DWSMReport",
    "DWSMSpec",
    "make_spec",
    "accuracy",
    "mean_sparsity",
    "average_cost",
    "feature_usage",
    "class_usage",
    "RCPIOptions",
    "MDPOptions",
    "RCPIProblem",
    "RCPIConfig",
    "RCPIRun",
    "RCPIStepInfo",
    "rcpi_solver",
    "rcpi_config",
    "RCPIState",
    "RCPIInfo",
    "rcpi_problem",
    "rcpi_init",
    "rcpi_step",
    "rcpi_run",
    "rcpi_evaluate",
    "initial_policy",
    "trajectory_states",
    "MixtureRule",
    "STOCHASTIC_MIXTURE",
    "AVERAGE_MIXTURE",
]

# js.predict: register this family's result type (DWSMPolicy) with the single-dispatch predict
from jaxselect.dwsm import predictor as _predictor  # noqa: E402, F401
