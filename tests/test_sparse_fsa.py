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
from jaxselect.anneal import fsa_prepare
import reference_fsa as ref


N, M = 300, 120
#: the dense defaults on a sparse X (no L1 polish, no refinement), to compare the two storages
PLAIN = js.anneal.Polish(l1=None, refine=0)


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
    sparse = js.fsa(FORMATS[fmt](X), y, 6, loss=loss, n_iter=80, l2=0.01, polish=PLAIN)
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
    b = js.fsa(sp.csr_matrix(X), None, 4, loss="ranking", pairs=pairs, n_iter=60, l2=0.01, polish=PLAIN)
    np.testing.assert_array_equal(np.asarray(a.support), np.asarray(b.support))
    np.testing.assert_allclose(np.asarray(a.coef), np.asarray(b.coef), rtol=2e-3, atol=2e-3)
    # integer weights on sparse rows equal repeated rows
    w = rng.integers(0, 3, N).astype(np.float32)
    rep = np.repeat(np.arange(N), w.astype(int))
    weighted = js.fsa(sp.csr_matrix(X), labels, 5, loss="logistic", n_iter=60, l2=0.01, sample_weight=w, polish=PLAIN)
    repeated = js.fsa(sp.csr_matrix(X[rep]), labels[rep], 5, loss="logistic", n_iter=60, l2=0.01, polish=PLAIN)
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


# -- the column scale rule (scale="sparse": unit variance per non-zero entry) ----------------------
def _rescaled(X, w=None):
    """numpy float64 reference of scale="sparse": ``(X − μ)·√f/σ`` (0 on constant columns)."""
    X = np.asarray(X, np.float64)
    w = np.ones(X.shape[0]) if w is None else np.asarray(w, np.float64)
    mean = w @ X / w.sum()
    var = w @ (X - mean) ** 2 / w.sum()
    fill = w @ (X != 0) / w.sum()
    pos = X[w > 0]
    live = (pos.max(0) > pos.min(0)) & (var > 0)
    factor = np.where(live, np.sqrt(fill) / np.sqrt(np.where(live, var, 1.0)), 0.0)
    return (X - mean) * factor, mean, factor, fill


def _indicators(seed=0, n=400, m=60):
    """Binary indicator columns of very different popularity (and a few real-valued ones)."""
    rng = np.random.default_rng(seed)
    p = np.geomspace(0.6, 0.01, m)
    X = (rng.uniform(size=(n, m)) < p).astype(np.float32)
    X[:, :3] = rng.lognormal(size=(n, 3)).astype(np.float32)  # dense real columns
    y = X[:, [0, 4, 9, 30]] @ np.array([1.0, 2.0, -2.0, 3.0]) + 0.3 * rng.normal(size=n)
    return X, y.astype(np.float32)


@pytest.mark.parametrize("weighted", [False, True])
def test_column_fill_and_rescaled_design_match_numpy(weighted):
    from jaxselect.anneal.scaling import column_fill, rescale_design

    X, _ = _indicators()
    w = np.random.default_rng(1).integers(0, 3, X.shape[0]).astype(np.float32) if weighted else None
    Z, _, factor, fill = _rescaled(X, w)
    for Xin in (X, sp.csr_matrix(X)):
        data = js.as_data(Xin, targets=None, sample_weight=w, constant_columns="inert")
        np.testing.assert_allclose(np.asarray(column_fill(data.design, data.weights)), fill, rtol=1e-6, atol=1e-7)
        op = rescale_design(data.design, data.weights, "sparse")
        np.testing.assert_allclose(np.asarray(op.factor), factor, rtol=2e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(op.materialize()), Z, rtol=1e-4, atol=1e-4)
        assert rescale_design(data.design, data.weights, "std") is data.design


def test_scale_sparse_schedule_matches_a_numpy_fsa():
    """Algorithm 1 (fixed step, squared loss, ridge) on the explicitly rescaled dense columns."""
    X, y = _indicators(2)
    n, m = X.shape
    k, n_iter, mu, lr, l2 = 4, 40, 50.0, 0.5, 0.02
    Z, mean, factor, _ = _rescaled(X)
    sched = ref.schedule(m, k, n_iter, mu)
    beta, b, active = np.zeros(m), 0.0, factor > 0
    for e in range(n_iter):
        u = (Z @ beta + b - y) / n
        g = np.where(active, Z.T @ u + l2 * beta, 0.0)
        beta, b = beta - lr * g, b - lr * u.sum()
        order = np.argsort(-np.where(active, beta**2, -1.0), kind="stable")
        keep = np.zeros(m, bool)
        keep[order[: sched[e]]] = True
        active &= keep
        beta[~active] = 0
    support = np.flatnonzero(active)
    raw = beta[support] * factor[support]
    for Xin in (X, sp.csr_matrix(X)):
        res = js.fsa(Xin, y, k, loss="squared", n_iter=n_iter, mu=mu, lr=lr, l2=l2, polish=False, scale="sparse")
        np.testing.assert_array_equal(np.asarray(res.support), support)
        np.testing.assert_allclose(np.asarray(res.coef), raw, rtol=2e-3, atol=2e-4)
        np.testing.assert_allclose(float(res.intercept), b - mean[support] @ raw, rtol=2e-3, atol=2e-4)
    std = js.fsa(X, y, k, loss="squared", n_iter=n_iter, mu=mu, lr=lr, l2=l2, polish=False, scale="std")
    assert not np.allclose(np.asarray(std.coef), raw, rtol=2e-3, atol=2e-4)  # the rule matters here


def test_scale_sparse_polish_is_the_ridge_on_the_rescaled_support():
    X, y = _indicators(3)
    l2 = 0.3  # large: the ridge acts on the rescaled coefficients
    res = js.fsa(sp.csr_matrix(X), y, 4, loss="squared", n_iter=60, l2=l2, scale="sparse")
    S = np.asarray(res.support)
    Z, mean, factor, _ = _rescaled(X)
    A = Z[:, S]
    c = np.linalg.solve(A.T @ A / len(A) + l2 * np.eye(len(S)), A.T @ (y - y.mean()) / len(A))
    raw = c * factor[S]
    np.testing.assert_allclose(np.asarray(res.coef), raw, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(float(res.intercept), y.mean() - mean[S] @ raw, rtol=1e-3, atol=1e-4)


def test_scale_sparse_is_std_without_zeros_and_sparse_equals_dense():
    rng = np.random.default_rng(4)
    G = rng.normal(size=(200, 30)).astype(np.float32)
    labels = (G[:, 2] - G[:, 7] + 0.5 * rng.normal(size=200) > 0).astype(np.float32)
    a = js.fsa(G, labels, 3, loss="logistic", n_iter=50, l2=0.01)
    b = js.fsa(G, labels, 3, loss="logistic", n_iter=50, l2=0.01, scale="sparse")
    np.testing.assert_array_equal(np.asarray(a.support), np.asarray(b.support))
    np.testing.assert_allclose(np.asarray(a.coef), np.asarray(b.coef), rtol=1e-5, atol=1e-6)
    X, y = _indicators(5)
    lab = (y > np.median(y)).astype(np.float32)
    d = js.fsa(X, lab, 5, loss="logistic", n_iter=50, l2=1e-3, scale="sparse")
    s = js.fsa(sp.csr_matrix(X), lab, 5, loss="logistic", n_iter=50, l2=1e-3, scale="sparse", polish=PLAIN)
    np.testing.assert_array_equal(np.asarray(s.support), np.asarray(d.support))
    np.testing.assert_allclose(np.asarray(s.coef), np.asarray(d.coef), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("scale", ["unit", None, 1])
def test_bad_scale_rule(scale):
    X, y = _indicators()
    with pytest.raises(ValueError, match="scale must be one of"):
        js.fsa(X, y, 3, scale=scale)


def test_sparse_supports_are_polished_by_default_at_any_size():
    """polish=None polishes a sparse design whose dense support would exceed the budget (the
    operator path never densifies it); a dense design that large keeps the schedule's iterate."""
    import importlib

    fsa_module = importlib.import_module("jaxselect.anneal.fsa")
    n, width = 10**7, 8192  # 320 GB of dense float32 support columns
    assert n * width * 4 > fsa_module.POLISH_DENSE_BYTES
    assert fsa_module._default_polish(None, n, width, np.float32, True) is True
    assert fsa_module._default_polish(None, n, width, np.float32, False) is False
    assert fsa_module._default_polish(False, n, width, np.float32, True) is False


def test_first_stage_subsample_is_taken_outside_the_run_and_gives_the_dense_answer():
    """Above 2 048 rows a short first stage estimates its step on every ⌈N/1024⌉-th row: for sparse X
    that subsample is made before the compiled run, with only its own rows' entries, and FSA still
    equals the dense run (whose subsample is X[::stride] inside the program)."""
    from jaxselect.anneal.run import RunPlan, subsample_design

    rng = np.random.default_rng(3)
    n, m = 2_600, 400
    X = (rng.exponential(size=(n, m)) * (rng.uniform(size=(n, m)) < 0.05)).astype(np.float32)
    score = X[:, 7] * 3.0 - X[:, 11] * 2.0 + X[:, 19] * 2.0
    y = (score + 0.2 * rng.normal(size=n) > np.median(score)).astype(np.float32)
    Xs = sp.csr_matrix(X)
    problem = fsa_prepare(Xs, y, loss="logistic")
    plan = RunPlan((m,), 16, "power", False)
    sub = subsample_design(problem, plan)
    stride = -(-n // 1024)
    assert sub is not None and sub.shape == (-(-n // stride), m)
    assert sub.nnz < problem.design.nnz // 2  # the other rows' entries are gone
    np.testing.assert_allclose(np.asarray(sub.materialize()), np.asarray(problem.design.materialize())[::stride], atol=1e-5)
    assert subsample_design(problem, plan._replace(step_mode="fixed")) is None
    dense = js.fsa(X, y, 5, loss="logistic", n_iter=20, mu=300.0, l2=0.01)
    sparse = js.fsa(Xs, y, 5, loss="logistic", n_iter=20, mu=300.0, l2=0.01, polish=PLAIN)
    np.testing.assert_array_equal(np.asarray(sparse.support), np.asarray(dense.support))
    np.testing.assert_allclose(np.asarray(sparse.step_size), np.asarray(dense.step_size), rtol=1e-3)
    np.testing.assert_allclose(np.asarray(sparse.coef), np.asarray(dense.coef), rtol=2e-3, atol=2e-3)


def test_operator_polish_on_the_compacted_support_equals_the_dense_polish():
    """The polish through the support's own entries (forced with dense_bytes=0) reaches the dense
    polish's fit; fsa drops its reference to X's full entries before it."""
    from jaxselect.anneal.polish import polish, polish_problem

    X, _, labels = _data(2)
    Xs = sp.csr_matrix(X)
    res = js.fsa(Xs, labels, 6, loss="logistic", n_iter=60, l2=0.01, polish=False)
    problem = fsa_prepare(Xs, labels, loss="logistic", l2=0.01)
    cols = np.asarray(res.support, np.int32)
    target, compacted = polish_problem(problem, cols, dense_bytes=0)
    assert compacted and target.design.shape == (N, 6) and target.design.nnz < problem.design.nnz
    import jax.numpy as jnp

    start = jnp.zeros((6, 1), jnp.float32)
    args = (jnp.asarray(cols), start, jnp.zeros((), jnp.float32), jnp.ones((6,), bool), jnp.float32(1e-6), jnp.int32(200))
    op = polish(problem, *args, dense_bytes=0)
    dense = polish(problem, *args, dense_bytes=1 << 40)
    np.testing.assert_allclose(np.asarray(op.coef), np.asarray(dense.coef), rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(float(op.objective), float(dense.objective), rtol=1e-5)
