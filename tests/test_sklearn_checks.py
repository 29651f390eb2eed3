"""Every estimator of jaxselect.sklearn passes scikit-learn's estimator checks.

The check instances use cheap settings (k = 1, few iterations) so that the whole file stays fast;
each check that cannot apply is listed in ``EXPECTED_FAILED`` with its reason.
"""

import jax
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


@pytest.fixture(autouse=True, scope="module")
def _cheap_compiles():
    """Compile with XLA's cheapest optimisation settings in this module.

    The checks fit each estimator on ~15 small shapes, once or twice each: compiling dominates
    (about 3x the time of the default optimisation), running the programs takes milliseconds.
    The settings change how XLA optimises, not what is computed; ``tests/conftest.py`` drops the
    compiled programs after the module, so no other test runs them.
    """
    saved = (jax.config.values["jax_disable_most_optimizations"], jax.config.values["jax_exec_time_optimization_effort"])
    jax.config.update("jax_disable_most_optimizations", True)
    jax.config.update("jax_exec_time_optimization_effort", -1.0)
    yield
    jax.config.update("jax_disable_most_optimizations", saved[0])
    jax.config.update("jax_exec_time_optimization_effort", saved[1])


def expected_failed_checks(estimator):
    return EXPECTED_FAILED.get(type(estimator).__name__, {})


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
