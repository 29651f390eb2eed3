"""The sequencing family on sparse X: ``prepare`` keeps a SparseDesign (lazy Gram columns), and
every solver gives the dense answer without densifying X.

The reference is ``prepare(X.toarray(), ..., gram=True)``: the same order, objectives within
float32 tolerance and the same raw coefficients. A problem whose dense form would take more
than 50 GB runs through ``cs_omp`` within a small memory budget.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from jax.experimental import sparse as jsparse

import jaxselect as js
from jaxselect.design import SparseDesign


FORMATS = {
    "csr": sp.csr_matrix,
    "csc_array": sp.csc_array,
    "coo": sp.coo_matrix,
    "bcsr": lambda X: jsparse.BCSR.fromdense(X),
}


def _data(seed=0, n=240, d=30, T=1):
    rng = np.random.default_rng(seed)
    X = rng.exponential(size=(n, d)) * (rng.uniform(size=(n, d)) < 0.3)
    X[:, 4] = 0.0  # empty column: inert
    X[:, 7] = X[:, 6]  # duplicated feature
    W = np.zeros((d, T))
    W[[1, 6, 12, 20], :] = rng.normal(size=(4, T)) * 3
    Y = X @ W + 0.2 * rng.normal(size=(n, T))
    return X.astype(np.float32), (Y[:, 0] if T == 1 else Y).astype(np.float32)


def _same_path(pa, pb):
    assert pb.order.tolist() == pa.order.tolist()
    np.testing.assert_allclose(pb.objective, pa.objective, rtol=1e-4, atol=1e-5)
    scale = float(np.abs(np.asarray(pa.coef)).max())
    coef_b = pb.dense().coef if hasattr(pb, "dense") else pb.coef
    np.testing.assert_allclose(coef_b, pa.coef, atol=2e-3 * scale)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_solver_on_sparse_equals_dense(fmt):
    X, y = _data()
    dense = js.prepare(X, y, gram=True, l2=1e-3)
    sparse = js.prepare(FORMATS[fmt](X), y, l2=1e-3)  # gram="auto": lazy for sparse X
    assert isinstance(sparse.Z, SparseDesign) and sparse.C is None
    for solver in (js.cs_omp, js.cs_fr, js.doubling):
        _same_path(solver(dense, k=6), solver(sparse, k=6))
    la, lb = js.group_lasso_path(dense, n_lambdas=5), js.group_lasso_path(sparse, n_lambdas=5)
    assert lb.order.tolist() == la.order.tolist()


def test_groups_weights_and_targets_on_sparse():
    X, Y = _data(1, T=2)
    ids = np.repeat(np.arange(10), 3)
    groups = js.Groups.from_ids(ids, costs=np.linspace(0.5, 2.0, 10))
    w = np.random.default_rng(2).uniform(0.2, 2.0, X.shape[0]).astype(np.float32)
    for whiten in (True, False):
        dense = js.prepare(X, Y, groups, sample_weight=w, gram=True, whiten=whiten, l2=1e-3)
        sparse = js.prepare(sp.csr_matrix(X), Y, groups, sample_weight=w, whiten=whiten, l2=1e-3)
        _same_path(js.cs_omp(dense, k=5), js.cs_omp(sparse, k=5))
        _same_path(js.cs_fr(dense, k=5), js.cs_fr(sparse, k=5))


def test_gram_true_refuses_sparse():
    X, y = _data()
    with pytest.raises(ValueError, match="gram=False"):
        js.prepare(sp.csr_matrix(X), y, gram=True)


def test_more_than_50_gb_dense_runs_sparse():
    """N = 200 000, D = 70 000 (56 GB as dense float32), 10 entries per row: cs_omp finds the signal."""
    n, d, per_row = 200_000, 70_000, 10
    rng = np.random.default_rng(0)
    cols = rng.integers(0, d, (n, per_row)).astype(np.int32)
    cols[:, 0] = rng.integers(0, 4, n)
    data = rng.uniform(0.5, 1.5, (n, per_row)).astype(np.float32)
    X = sp.csr_matrix((data.ravel(), cols.ravel(), np.arange(0, n * per_row + 1, per_row)), shape=(n, d))
    X.sum_duplicates()
    assert n * d * 4 / 1e9 > 50
    y = (X[:, :4] @ np.array([2.0, -2.0, 1.5, -1.5]) + 0.05 * rng.normal(size=n)).astype(np.float32)
    path = js.cs_omp(js.prepare(X, y), k=4)
    assert sorted(path.order.tolist()) == [0, 1, 2, 3]
