"""Datum-wise sparse classification (Dulac-Arnold, Denoyer, Preux & Gallinari, Mach. Learn. 2012).

A classifier that, for every datum, sequentially chooses which features (or groups) to acquire and
when to classify: an MDP whose return is minus the datum-wise loss (paper eq. 2/4, Table 1), a
linear block-vector policy (§3.3) learned by Rollout Classification Policy Iteration (§3.4), and the
hard-budget, cost-sensitive, grouped and relational variants (§4, Table 2). Units (features or
groups) and their costs come from a :class:`~jaxselect.Groups`; ``budget`` is a cumulative cost.

Advanced API (blackjax style): :func:`rcpi_problem`, :func:`rcpi_init` and :func:`rcpi_step`
(one policy iteration) with :class:`RCPIState`, :func:`rcpi_evaluate` (an iterate's training
datum-wise loss); :func:`dwsm_fit` is their jitted driver, which returns the best iterate.
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
from .policy import DWSMPolicy, DWSMTrace, dwsm_predict, dwsm_trace
from .rcpi import (
    AVERAGE_MIXTURE,
    STOCHASTIC_MIXTURE,
    MixtureRule,
    RCPIInfo,
    RCPIProblem,
    RCPIState,
    dwsm_fit,
    initial_policy,
    rcpi_evaluate,
    rcpi_init,
    rcpi_problem,
    rcpi_step,
    trajectory_states,
)

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
    "RCPIProblem",
    "RCPIState",
    "RCPIInfo",
    "rcpi_problem",
    "rcpi_init",
    "rcpi_step",
    "rcpi_evaluate",
    "initial_policy",
    "trajectory_states",
    "MixtureRule",
    "STOCHASTIC_MIXTURE",
    "AVERAGE_MIXTURE",
]
