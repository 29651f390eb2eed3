"""FSA on sparse X: every sparse format gives the dense answer, without densifying X.

The sparse design (:class:`jaxselect.design.SparseDesign`) is one more implementation of the
design-operator protocol; ``fsa`` runs on it with no solver change. The reference is the same call
on ``X.toarray()``: same support, coefficients within float32 tolerance. A problem whose dense form
would take more than 50 GB runs within a small memory budget.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from jax.experimental import sparse as jsparse

import jaxselect as js

pytestmark = pytest.mark.usefixtures("cheap_compiles")

N, M = 300, 120


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.exponential(size=(N, M)) * (rng.uniform(size=(N, M)) < 0.15)
    X[:, 3] = 0.0  # an empty column: constant, never selected
    X[:, [5, 10, 20]] += rng.normal(size=(N, 3)) * (rng.uniform(size=(N, 3)) < 0.5)
    X = X.astype(np.float32)
    score = X[:, 5] * 2.0 - X[:, 10] * 3.0 + X[:, 20] * 2.5
    labels = (score + 0.3 * rng.normal(size=N) > np.median(score)).astype(np.float32)
    return X, score.astype(np.float32), labels


FORMATS = {
    "csr": sp.csr_matrix,
    "csc": sp.csc_matrix,
    "coo_array": sp.coo_array,
    "bcoo": lambda X: jsparse.BCOO.fromdense(X),
}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("loss", ["squared", "logistic", "lorenz", "huber_hinge"])
def test_sparse_equals_dense(fmt, loss):
    X, score, labels = _data()
    y = score if loss == "squared" else labels
    dense = js.fsa(X, y, 6, loss=loss, n_iter=80, l2=0.01)
    sparse = js.fsa(FORMATS[fmt](X), y, 6, loss=loss, n_iter=80, l2=0.01)
    np.testing.assert_array_equal(np.asarray(sparse.support), np.asarray(dense.support))
    assert {5, 10, 20} <= set(np.asarray(sparse.support).tolist())
    np.testing.assert_allclose(np.asarray(sparse.coef), np.asarray(dense.coef), rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(float(sparse.intercept), float(dense.intercept), rtol=2e-3, atol=2e-3)
    assert int(sparse.status) == int(dense.status) == 0
    # prediction from sparse rows equals prediction from dense rows
    np.testing.assert_allclose(
        np.asarray(js.predict(sparse, FORMATS[fmt](X))), np.asarray(js.predict(dense, X)), rtol=1e-3, atol=1e-3
    )


def test_sparse_ranking_and_weights():
    X, score, labels = _data(1)
    rng = np.random.default_rng(2)
    ij = rng.integers(0, N, (500, 2))
    pairs = np.c_[ij, (score[ij[:, 0]] > score[ij[:, 1]]).astype(np.float32)]
    a = js.fsa(X, None, 4, loss="ranking", pairs=pairs, n_iter=60, l2=0.01)
    b = js.fsa(sp.csr_matrix(X), None, 4, loss="ranking", pairs=pairs, n_iter=60, l2=0.01)
    np.testing.assert_array_equal(np.asarray(a.support), np.asarray(b.support))
    np.testing.assert_allclose(np.asarray(a.coef), np.asarray(b.coef), rtol=2e-3, atol=2e-3)
    # integer weights on sparse rows equal repeated rows
    w = rng.integers(0, 3, N).astype(np.float32)
    rep = np.repeat(np.arange(N), w.astype(int))
    weighted = js.fsa(sp.csr_matrix(X), labels, 5, loss="logistic", n_iter=60, l2=0.01, sample_weight=w)
    repeated = js.fsa(sp.csr_matrix(X[rep]), labels[rep], 5, loss="logistic", n_iter=60, l2=0.01)
    np.testing.assert_array_equal(np.asarray(weighted.support), np.asarray(repeated.support))
    np.testing.assert_allclose(np.asarray(weighted.coef), np.asarray(repeated.coef), rtol=3e-3, atol=3e-3)


def test_piecewise_linear_refuses_sparse():
    X, _, labels = _data()
    with pytest.raises(ValueError, match=r"bins=None"):
        js.fsa(sp.csr_matrix(X), labels, 3, loss="logistic", bins=4)


def test_more_than_50_gb_dense_runs_sparse():
    """N = 200 000, M = 70 000: 56 GB as dense float32; 10 entries per row (2·10⁶ stored)."""
    n, m, per_row = 200_000, 70_000, 10
    rng = np.random.default_rng(0)
    cols = rng.integers(0, m, (n, per_row)).astype(np.int32)
    cols[:, 0] = rng.integers(0, 4, n)  # columns 0..3 are popular and carry the signal
    data = rng.uniform(0.5, 1.5, (n, per_row)).astype(np.float32)
    X = sp.csr_matrix((data.ravel(), cols.ravel(), np.arange(0, n * per_row + 1, per_row)), shape=(n, m))
    X.sum_duplicates()
    dense_gb = n * m * 4 / 1e9
    assert dense_gb > 50
    x = X[:, :4].toarray()
    y = (x @ np.array([2.0, -2.0, 1.5, -1.5]) + 0.1 * rng.normal(size=n) > 0).astype(np.float32)
    res = js.fsa(X, y, 4, loss="logistic", n_iter=30, l2=1e-3)
    assert sorted(np.asarray(res.support).tolist()) == [0, 1, 2, 3]
    assert int(res.status) == 0
