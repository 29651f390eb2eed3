"""A constant target, as scikit-learn's OrthogonalMatchingPursuit treats it: a warning and the empty
model (no feature selected, coefficients 0, intercept = the target mean); jaxselect adds the status
flag DEGENERATE (8) on the path, in Gram and ``gram=False`` mode, for every sequencing solver."""

import warnings

import numpy as np
import pytest

import jaxselect as js

linear_model = pytest.importorskip("sklearn.linear_model")


def _sklearn_omp(X, y):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = linear_model.OrthogonalMatchingPursuit(n_nonzero_coefs=2).fit(X, y)
    return est, caught


@pytest.mark.parametrize("gram", [True, False])
def test_constant_target_gives_the_empty_model_like_sklearn_omp(gram):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 5)).astype(np.float32)
    y = np.full(60, 3.25, np.float32)
    est, caught = _sklearn_omp(X, y)
    assert caught and np.all(est.coef_ == 0)  # scikit-learn warns and selects nothing
    with pytest.warns(UserWarning, match="constant"):
        problem = js.prepare(X, y, gram=gram)
    for solve in (js.cs_omp, js.cs_fr, js.doubling):
        path = solve(problem)
        assert path.order.tolist() == [-1] * path.n_steps, solve.__name__
        assert int(path.status) == js.DEGENERATE and "degenerate" in js.status_message(path.status)
        assert np.all(np.isinf(np.asarray(path.cum_cost)))
        np.testing.assert_array_equal(np.asarray(path.dense().coef), 0.0)
        np.testing.assert_allclose(np.asarray(path.intercept)[:, 0], est.intercept_, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(path.null_intercept), [est.intercept_], rtol=1e-6)
        pred = np.asarray(js.predict(path, X, budget=10.0))
        np.testing.assert_allclose(pred, est.predict(X), rtol=1e-6)
        with pytest.raises(js.SolverError, match="degenerate"):
            js.raise_for_status(path)


def test_one_constant_target_of_two_is_left_out_of_the_fit():
    """Multi-target (a shared support): the constant column gets coefficient 0 and its mean, the other
    target is fitted as on its own; the path is not degenerate."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 4))
    y = X[:, 2] - 0.5 * X[:, 0] + 0.01 * rng.normal(size=80)
    Y = np.stack([y, np.full(80, -2.0)], axis=1)
    with pytest.warns(UserWarning, match=r"column\(s\) \[1\]"):
        path = js.cs_omp(js.prepare(X, Y))
    single = js.cs_omp(js.prepare(X, y))
    assert int(path.status) == 0 and path.order.tolist() == single.order.tolist()
    np.testing.assert_array_equal(np.asarray(path.coef)[:, :, 1], 0.0)
    np.testing.assert_allclose(np.asarray(path.intercept)[:, 1], -2.0)
    np.testing.assert_allclose(np.asarray(path.coef)[:, :, 0], np.asarray(single.coef)[:, :, 0], rtol=1e-5, atol=1e-6)
