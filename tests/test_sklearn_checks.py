"""Every estimator of jaxselect.sklearn, constructed with its defaults, passes scikit-learn's checks.

``ESTIMATORS`` holds default-constructed instances (``check_estimator(Est())`` as a user would run
it); the checks fit them on tiny data, with XLA's cheapest compile settings (``cheap_compiles``).
A check that cannot apply to an estimator is listed in ``EXPECTED_FAILED`` with the reason.
"""

import pytest

pytest.importorskip("sklearn")

from sklearn.utils.estimator_checks import parametrize_with_checks

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

ESTIMATORS = [
    GroupSequencingRegressor(),
    GroupSequencingRegressorCV(),
    GroupSequencingClassifier(),
    FSARegressor(),
    FSARegressorCV(),
    FSAClassifier(),
    GreedyRLSRegressor(),
    DWSMClassifier(),
]

EXPECTED_FAILED = {
    "GreedyRLSRegressor": {
        "check_sample_weight_equivalence_on_dense_data": (
            "greedy RLS selects by leave-one-out error: leaving out one copy of a repeated row keeps its "
            "other copies in the model, so repeated rows change the selection criterion (integer weights "
            "give the repeated rows' ridge model at a given support, and weight-0 rows are removed rows: "
            "tests/test_sklearn.py)"
        ),
    },
    "DWSMClassifier": {
        "check_sample_weight_equivalence_on_dense_data": (
            "RCPI samples rollout states at random per row: a row repeated w times draws w independent "
            "sets, a row of weight w one set counted w times, equal in expectation only (rows of weight 0 "
            "and uniform weights: tests/test_sklearn.py)"
        ),
    },
}


pytestmark = pytest.mark.usefixtures("cheap_compiles")  # see tests/conftest.py


def expected_failed_checks(estimator):
    return EXPECTED_FAILED.get(type(estimator).__name__, {})


def test_estimators_are_default_constructed():
    """The claim of this module: no estimator above is configured."""
    for est in ESTIMATORS:
        assert repr(est) == f"{type(est).__name__}()", repr(est)


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
