"""Every estimator of jaxselect.sklearn has the defaults of the functional API it wraps.

For each estimator, every ``__init__`` parameter is compared (``inspect.signature`` of both sides)
with the keyword of the same meaning of the solver functions it calls. A parameter named
differently is mapped in ``RENAMED``; a parameter the functions do not have (or have without a
default) is listed with its reason in ``ESTIMATOR_ONLY``; a default that differs on purpose is
listed, with both values and the reason, in ``DIFFERENT_ON_PURPOSE``. The lists are checked too,
so that none of them can hide a mismatch or go stale.
"""

import inspect

import pytest

pytest.importorskip("sklearn")

import jaxselect as js
from jaxselect.sklearn import (
    DWSMClassifier,
    FSAClassifier,
    FSARegressor,
    FSARegressorCV,
    GreedyRLSRegressor,
    GroupSequencingClassifier,
    GroupSequencingRegressor,
    GroupSequencingRegressorCV,
)

# The functions each estimator's fit calls: a parameter is compared with every one of them that
# has a keyword of its (mapped) name.
SOLVERS = {
    GroupSequencingRegressor: (js.prepare, js.cs_omp, js.cs_fr, js.doubling),
    GroupSequencingRegressorCV: (js.cross_validate_path, js.prepare, js.cs_omp, js.cs_fr, js.doubling),
    GroupSequencingClassifier: (js.glm_omp,),
    # fsa's option records: the estimators' flat bins/smoothness, l1/refine and huber_h fill them
    FSARegressor: (js.fsa, js.anneal.PiecewiseLinear, js.anneal.Polish, js.losses.HuberHinge),
    FSAClassifier: (js.fsa, js.anneal.PiecewiseLinear, js.anneal.Polish, js.losses.HuberHinge),
    FSARegressorCV: (js.cross_validate_fsa, js.fsa, js.anneal.Polish, js.losses.HuberHinge),
    GreedyRLSRegressor: (js.greedy_rls,),
    DWSMClassifier: (js.dwsm_fit,),
}

# Estimator parameter -> functional keyword, where the names differ.
RENAMED = {
    "cv": "folds",  # scikit-learn's name for the splitter (CV estimators); cross_validate_*'s `folds`
    "scoring": "score",  # scikit-learn's name for the held-out score; cross_validate_*'s `score`
    "random_state": "key",  # scikit-learn's seed; dwsm_fit's first argument, a jax.random key
    "huber_h": "h",  # the huberized hinge's width: js.losses.HuberHinge(h), fsa's loss record
}

# Parameters with no functional keyword that has a default, and why.
_REQUIRED = "a required argument of the function (no default there); the estimator needs one"
_COSTS = "replaces the costs of `groups` (the functions take costs inside a js.Groups)"
_BUDGET = "the prefix that predict/transform use; js.predict's `budget` has no default"
_PL = "None: linear learners; else fsa's learner=js.anneal.PiecewiseLinear(bins, smoothness) (bins required there)"
ESTIMATOR_ONLY = {
    GroupSequencingRegressor: {
        "method": "chooses the solver function (cs_omp, cs_fr or doubling)",
        "costs": _COSTS,
        "budget": _BUDGET,
    },
    GroupSequencingRegressorCV: {
        "costs": _COSTS,
        "rule": "which CVResult field picks the budget: `best` or `best_1se`",
    },
    GroupSequencingClassifier: {
        "costs": _COSTS,
        "budget": _BUDGET,
        "tol": "glm_omp(newton=js.NewtonOptions(tol=...)): a field of the Newton options record",
        "max_iter": "glm_omp(newton=js.NewtonOptions(max_iter=...)): a field of the Newton options record",
    },
    FSARegressor: {"k": _REQUIRED, "bins": _PL},
    FSAClassifier: {"k": _REQUIRED, "bins": _PL},
    FSARegressorCV: {"ks": _REQUIRED, "rule": "which CVResult field picks k: `best` or `best_1se`"},
    GreedyRLSRegressor: {"k": _REQUIRED},
    DWSMClassifier: {
        "costs": _COSTS,
        "random_state": _REQUIRED + " (dwsm_fit's `key`)",
        "fill_value": "the value transform gives the entries a datum did not acquire",
        "states_per_example": "dwsm_fit(rcpi=RCPIOptions(states_per_example=10)): a field of the RCPI options record",
        "alpha": "dwsm_fit(rcpi=RCPIOptions(alpha=0.7)): a field of the RCPI options record",
        "l2": "dwsm_fit(rcpi=RCPIOptions(l2=0.01)): a field of the RCPI options record",
        "gamma": "dwsm_fit(mdp=MDPOptions(gamma=None)): a field of the MDP options record",
        "cost_matrix": "dwsm_fit(mdp=MDPOptions(cost_matrix=None)): a field of the MDP options record",
    },
}

# (estimator, parameter): (estimator default, function default, reason).
DIFFERENT_ON_PURPOSE = {
    (FSAClassifier, "loss"): ("logistic", "squared", "a classifier needs a classification loss"),
    (FSARegressorCV, "scoring"): ("r2", None, "cross_validate_fsa's None means 'r2' for the squared loss"),
}


def _params(fn):
    return {name: p for name, p in inspect.signature(fn).parameters.items() if name != "self"}


def _same(a, b) -> bool:
    """Equal defaults: numbers by value (1e-3 == 0.001), anything else also of the same type."""
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers):
        return isinstance(a, bool) == isinstance(b, bool) and a == b
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("estimator", list(SOLVERS), ids=lambda e: e.__name__)
def test_estimator_defaults_equal_the_functional_defaults(estimator):
    only = ESTIMATOR_ONLY.get(estimator, {})
    compared = 0
    for name, param in _params(estimator.__init__).items():
        keyword = RENAMED.get(name, name)
        matches = [(fn, _params(fn)[keyword]) for fn in SOLVERS[estimator] if keyword in _params(fn)]
        with_default = [(fn, p) for fn, p in matches if p.default is not inspect.Parameter.empty]
        if name in only:
            # the list must stay true: no function keyword with a default may hide behind it
            assert not with_default, (
                f"{estimator.__name__}.{name} is listed as estimator-only, but "
                f"{[fn.__name__ for fn, _ in with_default]} take `{keyword}` with a default: compare it"
            )
            continue
        assert with_default, (
            f"{estimator.__name__}.{name} matches no keyword with a default of "
            f"{[fn.__name__ for fn in SOLVERS[estimator]]}: map it in RENAMED or list it in ESTIMATOR_ONLY"
        )
        for fn, p in with_default:
            compared += 1
            if (estimator, name) in DIFFERENT_ON_PURPOSE:
                ours, theirs, _ = DIFFERENT_ON_PURPOSE[(estimator, name)]
                assert _same(param.default, ours) and _same(p.default, theirs), (estimator, name, fn)
                continue
            assert _same(param.default, p.default), (
                f"{estimator.__name__}({name}={param.default!r}) but {fn.__name__}({keyword}={p.default!r})"
            )
    assert compared >= 2  # every estimator mirrors some solver keywords
    # every listed name is a parameter of the estimator (no stale entries)
    assert set(only) <= set(_params(estimator.__init__))
    assert {n for (e, n) in DIFFERENT_ON_PURPOSE if e is estimator} <= set(_params(estimator.__init__))


def test_the_comparison_catches_a_mismatch(monkeypatch):
    """The rule above fails on a default that differs (GreedyRLSRegressor's bias was 1.0 in 0.3.0)."""

    class Drifted(GreedyRLSRegressor):
        def __init__(self, k=10, *, l2=1e-3, bias=1.0):
            super().__init__(k, l2=l2, bias=bias)

    monkeypatch.setitem(SOLVERS, Drifted, (js.greedy_rls,))
    monkeypatch.setitem(ESTIMATOR_ONLY, Drifted, {"k": _REQUIRED})
    with pytest.raises(AssertionError, match=r"Drifted\(bias=1.0\) but greedy_rls\(bias=0.0\)"):
        test_estimator_defaults_equal_the_functional_defaults(Drifted)
