"""Every estimator of jaxselect.sklearn passes scikit-learn's estimator checks.

The check instances use cheap settings (k = 1, few iterations) so that the whole file stays fast;
each check that cannot apply is listed in ``EXPECTED_FAILED`` with its reason.
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
    GroupSequencingRegressorCV(cv=2),
    GroupSequencingClassifier(),
    FSARegressor(k=1, n_iter=20),
    FSARegressorCV(ks=(1, 2), cv=2, n_iter=20),
    FSAClassifier(k=1, n_iter=20),
    GreedyRLSRegressor(k=1),
    DWSMClassifier(n_iter=4, states_per_example=4, random_state=0),
]

EXPECTED_FAILED = {}


pytestmark = pytest.mark.usefixtures("cheap_compiles")  # see tests/conftest.py


def expected_failed_checks(estimator):
    return EXPECTED_FAILED.get(type(estimator).__name__, {})


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
