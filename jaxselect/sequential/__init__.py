"""Datum-wise sparse classification (Dulac-Arnold, Denoyer, Preux & Gallinari, Mach. Learn. 2012).

A classifier that, for every datum, sequentially chooses which features (or groups) to acquire and
when to classify: an MDP whose return is minus the datum-wise loss (paper eq. 2/4, Table 1), a
linear block-vector policy (§3.3) learned by Rollout Classification Policy Iteration (§3.4), and the
hard-budget, cost-sensitive, grouped and relational variants (§4, Table 2).
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
from .rcpi import dwsm_fit

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
]
