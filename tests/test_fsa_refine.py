"""FSA's refinement rounds (``js.fsa(..., refine=R)``; :mod:`jaxselect.anneal.refine`).

Checked against an independent float64 reference of one GraSP round (gradient over all columns,
the union of the support and the 2W largest, scipy L-BFGS fits on the union and on its k
largest, acceptance when F is lower), on a problem whose second true column is marginally masked
(uncorrelated with the labels on its own, so the schedule drops it); a round that finds nothing
returns the unrefined result exactly; sparse equals dense, jitted equals eager; the option's
validation.
"""

import jax
import numpy as np
import pytest
import scipy.optimize as so
import scipy.sparse as sp

import jaxselect as js
from jaxselect.anneal import k_bucket


N, M, K = 400, 40, 2
L2 = 1e-3


def _masked(seed=0):
    """x1 = z, x0 = z + 0.5 e; labels from 3·(x0 − x1) = 1.5 e: x1 alone is uncorrelated with them."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, M))
    z, e = rng.standard_normal(N), rng.standard_normal(N)
    X[:, 0], X[:, 1] = z + 0.5 * e, z
    logit = 3.0 * (X[:, 0] - X[:, 1])
    return X, (logit + rng.logistic(size=N) > 0).astype(np.int32)


def _fit(A, y, cols):
    """argmin over (c, b) of mean logistic(A[:, cols] c + b) + (L2/2)‖c‖² (scipy, float64): (c, b, F)."""
    Z = A[:, cols]
    s = np.where(y > 0, 1.0, -1.0)

    def f(w):
        c, b = w[:-1], w[-1]
        m = s * (Z @ c + b)
        gs = -s / (1.0 + np.exp(m)) / len(y)
        return np.logaddexp(0.0, -m).mean() + 0.5 * L2 * c @ c, np.concatenate([Z.T @ gs + L2 * c, [gs.sum()]])

    out = so.minimize(f, np.zeros(len(cols) + 1), jac=True, method="L-BFGS-B",
                      options=dict(ftol=1e-15, gtol=1e-12, maxiter=10_000))
    return out.x[:-1], out.x[-1], out.fun


def _grasp_round(A, y, support, k):
    """One round of gradient support pursuit from ``support`` (the module docstring's steps)."""
    support = list(support)
    c, b, F = _fit(A, y, support)
    p = 1.0 / (1.0 + np.exp(-(A[:, support] @ c + b)))
    g = np.abs(A.T @ (p - y) / len(y))
    g[support] = -np.inf
    n_add = min(2 * k_bucket(k, A.shape[1]), A.shape[1])
    union = support + [int(j) for j in np.argsort(-g, kind="stable")[:n_add] if np.isfinite(g[j])]
    cu, _, _ = _fit(A, y, union)
    new = [union[i] for i in np.argsort(-np.abs(cu), kind="stable")[:k]]
    c_new, _, F_new = _fit(A, y, new)
    if set(new) != set(support) and F_new < F:
        return new, c_new, F_new, F
    return support, c, F, F


def _standardized(X):
    return (X - X.mean(0)) / X.std(0)


def test_refine_recovers_a_masked_column_as_the_reference(x64):
    X, y = _masked()
    kw = dict(loss="logistic", n_iter=30, l2=L2, tol=1e-10, max_iter=1000)
    plain = js.fsa(X, y, K, **kw)
    assert 1 not in plain.support.tolist()  # the schedule drops the masked column
    refined = js.fsa(X, y, K, refine=1, **kw)
    A = _standardized(X)
    support, c_ref, F_new, F_old = _grasp_round(A, y, plain.support.tolist(), K)
    assert sorted(refined.support.tolist()) == sorted(support) == [0, 1]
    assert F_new < F_old
    order = [support.index(j) for j in refined.support.tolist()]
    np.testing.assert_allclose(np.asarray(refined.coef) * X.std(0)[refined.support], c_ref[order], rtol=1e-6, atol=1e-8)
    assert int(refined.status) == 0
    # the raw-space model predicts as the reference's
    raw = js.predict(refined, X)
    ref_scores = A[:, support] @ c_ref
    np.testing.assert_allclose(np.asarray(raw) - np.mean(np.asarray(raw)), ref_scores - ref_scores.mean(), atol=1e-6)


def test_a_round_without_gain_returns_the_unrefined_fit():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((300, 30)).astype(np.float32)
    y = (X[:, 3] - 2 * X[:, 7] + 0.3 * rng.standard_normal(300) > 0).astype(np.int32)
    plain = js.fsa(X, y, 2, loss="logistic", n_iter=40)
    for rounds in (1, 3):
        refined = js.fsa(X, y, 2, loss="logistic", n_iter=40, refine=rounds)
        assert refined.support.tolist() == plain.support.tolist()
        # the same fit, run as separate programs (the schedule, then the polish) instead of one: rounding
        np.testing.assert_allclose(np.asarray(refined.coef), np.asarray(plain.coef), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(refined.intercept), np.asarray(plain.intercept), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_sparse_refine_equals_dense(fmt):
    X, y = _masked(2)
    X = X.astype(np.float32)
    kw = dict(loss="logistic", n_iter=30, l2=L2, refine=2, l1=None)
    dense = js.fsa(X, y, K, **kw)
    sparse = js.fsa(sp.csr_matrix(X) if fmt == "csr" else sp.csc_matrix(X), y, K, **kw)
    assert sorted(dense.support.tolist()) == sorted(sparse.support.tolist()) == [0, 1]
    order = np.argsort(np.asarray(dense.support)), np.argsort(np.asarray(sparse.support))
    np.testing.assert_allclose(np.asarray(sparse.coef)[order[1]], np.asarray(dense.coef)[order[0]], rtol=2e-3)


def test_sparse_refine_on_the_operator_path(monkeypatch):
    """Union and support compacted to their own entries (X's full entries dropped before the union fit)."""
    import sys

    polish_module = sys.modules["jaxselect.anneal.polish"]
    X, y = _masked(3)
    X = X.astype(np.float32)
    kw = dict(loss="logistic", n_iter=30, l2=L2, refine=1, max_iter=500)
    dense = js.fsa(sp.csr_matrix(X), y, K, **kw)
    monkeypatch.setattr(polish_module, "DENSE_SUPPORT_BYTES", 0)
    operator = js.fsa(sp.csr_matrix(X), y, K, **kw)
    assert sorted(operator.support.tolist()) == sorted(dense.support.tolist()) == [0, 1]
    order = np.argsort(np.asarray(dense.support)), np.argsort(np.asarray(operator.support))
    np.testing.assert_allclose(np.asarray(operator.coef)[order[1]], np.asarray(dense.coef)[order[0]], rtol=2e-3)


def test_refine_inside_jit_equals_eager():
    X, y = _masked(4)
    X = X.astype(np.float32)
    eager = js.fsa(X, y, K, loss="logistic", n_iter=30, l2=L2, refine=1)
    run = jax.jit(lambda X, y: js.fsa(X, y, K, loss="logistic", n_iter=30, l2=L2, refine=1))
    traced = run(X, y)
    assert traced.support.tolist() == eager.support.tolist()
    np.testing.assert_allclose(np.asarray(traced.coef), np.asarray(eager.coef), rtol=1e-4)


def _penalised(X, y, fit, lam):
    """mean logistic + (L2/2)‖c‖² + λ‖c‖₁ of a fit, c its standardized coefficients (float64)."""
    support = np.asarray(fit.support)
    c = np.asarray(fit.coef, np.float64) * X.std(0)[support]
    s = np.where(y > 0, 1.0, -1.0)
    scores = np.asarray(js.predict(fit, X), np.float64)
    return np.logaddexp(0.0, -s * scores).mean() + 0.5 * L2 * c @ c + lam * np.abs(c).sum()


def test_refine_with_l1_compares_the_penalised_objective():
    X, y = _masked(5)
    X = X.astype(np.float32)
    lam = 0.05
    plain = js.fsa(X, y, 4, loss="logistic", n_iter=30, l2=L2, l1=lam)
    lasso = js.fsa(X, y, 4, loss="logistic", n_iter=30, l2=L2, refine=1, l1=lam)
    assert {0, 1} <= set(lasso.support.tolist()) and 1 not in plain.support.tolist()
    assert np.sum(np.asarray(lasso.coef) == 0) > 0 and int(lasso.status) == 0
    assert _penalised(X, y, lasso, lam) < _penalised(X, y, plain, lam) - 1e-3


@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        (dict(refine=-1), ValueError, "refine"),
        (dict(refine=1.5), TypeError, "refine"),
        (dict(refine=1, polish=False), ValueError, "polish=True"),
        (dict(refine=1, bins=4), ValueError, "linear learners"),
    ],
)
def test_bad_refine(kwargs, err, match):
    X, y = _masked()
    with pytest.raises(err, match=match):
        js.fsa(X.astype(np.float32), y, K, loss="logistic", **kwargs)


def test_refine_of_a_streamed_x_is_refused(tmp_path):
    X, y = _masked()
    path = tmp_path / "X.f32"
    mm = np.memmap(path, dtype=np.float32, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    with pytest.raises(ValueError, match="refine needs X in memory"):
        js.fsa(np.memmap(path, dtype=np.float32, mode="r", shape=X.shape), y, K, loss="logistic", refine=1)
    with pytest.raises(ValueError, match="max_memory=None"):
        js.fsa(X.astype(np.float32), y, K, loss="logistic", refine=1, max_memory=1000)


def test_estimators_pass_refine_l1_and_scale():
    pytest.importorskip("sklearn")
    from jaxselect.sklearn import FSAClassifier

    X, y = _masked(6)
    X = X.astype(np.float32)
    clf = FSAClassifier(k=K, n_iter=30, l2=L2, refine=1).fit(X, y)
    direct = js.fsa(X, y, K, loss="logistic", n_iter=30, l2=L2, refine=1)
    assert clf.get_support(indices=True).tolist() == sorted(direct.support.tolist()) == [0, 1]
    lasso = FSAClassifier(k=4, n_iter=30, l2=L2, l1=0.05, scale="sparse", refine=0).fit(sp.csr_matrix(X), y)
    ref = js.fsa(sp.csr_matrix(X), y, 4, loss="logistic", n_iter=30, l2=L2, l1=0.05, scale="sparse", refine=0)
    np.testing.assert_allclose(lasso.coef_[np.asarray(ref.support)], np.asarray(ref.coef), rtol=1e-5)


def test_row_sharded_sparse_refine_on_the_operator_path(monkeypatch):
    """A ``js.shard_rows`` sparse X: union and supports compacted per device block, the unsharded answer."""
    import sys

    monkeypatch.setattr(sys.modules["jaxselect.anneal.polish"], "DENSE_SUPPORT_BYTES", 0)
    X, y = _masked(7)
    Xc = sp.csr_matrix(X.astype(np.float32))
    Xs, ys, w = js.shard_rows(Xc, y)
    kw = dict(loss="logistic", n_iter=30, l2=L2, refine=1, max_iter=500)
    sharded = js.fsa(Xs, ys, K, sample_weight=w, **kw)
    plain = js.fsa(Xc, y, K, **kw)
    assert sorted(sharded.support.tolist()) == sorted(plain.support.tolist()) == [0, 1]
    order = np.argsort(np.asarray(plain.support)), np.argsort(np.asarray(sharded.support))
    np.testing.assert_allclose(np.asarray(sharded.coef)[order[1]], np.asarray(plain.coef)[order[0]], rtol=2e-3)
