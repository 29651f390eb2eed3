"""FSA's L1 polish (``js.fsa(..., l1=λ)``; :mod:`jaxselect.anneal.owlqn`): OWL-QN on the final support.

Checked against an independent reference — scipy's L-BFGS-B on the split form c = u − v,
u, v ≥ 0, whose minimiser is the L1 solution — on a dense design (float64, the dense polish) and a
sparse one (float32, the compacted operator path), with exact zeros where the reference is 0; the
solver alone against the soft-threshold closed form; the derivative with respect to λ against
finite differences; l1 = 0 is no l1; and the validation of the option.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize as so
import scipy.sparse as sp

import jaxselect as js
from jaxselect.anneal.owlqn import owlqn, pseudo_gradient


N, M, K = 300, 24, 8


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, M)) * rng.uniform(0.5, 2.0, M) + rng.normal(size=M)
    lin = X[:, [3, 11, 17]] @ np.array([2.0, 1.0, -1.0])
    return X, (lin + rng.logistic(size=N) > 0).astype(np.int32)


def _margin(loss, m):
    """(ℓ(m), ℓ'(m)) of the margin losses, numpy."""
    if loss == "logistic":
        return np.logaddexp(0.0, -m), -1.0 / (1.0 + np.exp(m))
    d = np.minimum(m - 1.0, 0.0)
    return np.log1p(d * d), 2.0 * d / (1.0 + d * d)


def _reference(A, y, loss, l2, lam, c0, b0):
    """argmin mean ℓ(y±(A c + b)) + (l2/2)‖c‖² + λ‖c‖₁ by L-BFGS-B on c = u − v (u, v ≥ 0)."""
    k = A.shape[1]
    sign = np.where(y > 0, 1.0, -1.0)

    def f(w):
        u, v, b = w[:k], w[k:2 * k], w[-1]
        c = u - v
        value, slope = _margin(loss, sign * (A @ c + b))
        gs = sign * slope / len(y)
        gc = A.T @ gs + l2 * c
        return value.mean() + 0.5 * l2 * c @ c + lam * (u + v).sum(), np.concatenate([gc + lam, lam - gc, [gs.sum()]])

    w0 = np.concatenate([np.maximum(c0, 0), np.maximum(-c0, 0), [b0]])
    bounds = [(0, None)] * (2 * k) + [(None, None)]
    out = so.minimize(f, w0, jac=True, method="L-BFGS-B", bounds=bounds,
                      options=dict(ftol=1e-15, gtol=1e-12, maxiter=10_000))
    return out.x[:k] - out.x[k:2 * k]


def _standardized(X, support, scale):
    """The support's columns as FSA scales them (unweighted) and the factor raw → standardized."""
    Z = np.asarray(X.toarray() if sp.issparse(X) else X, np.float64)[:, support]
    factor = Z.std(0)
    if scale == "sparse":
        factor = factor / np.sqrt(np.mean(Z != 0, axis=0))
    return (Z - Z.mean(0)) / factor, factor


@pytest.mark.parametrize("loss", ["logistic", "lorenz"])
def test_l1_polish_equals_the_split_reference(x64, loss):
    X, y = _problem(1)
    kw = dict(loss=loss, n_iter=60, l2=1e-3, tol=1e-10, max_iter=1000)
    ridge = js.fsa(X, y, K, **kw)
    lam = 0.03
    fit = js.fsa(X, y, K, l1=lam, **kw)
    assert int(fit.status) == 0
    assert fit.support.tolist() == ridge.support.tolist()  # the selection does not change
    A, factor = _standardized(X, np.asarray(fit.support), "std")
    start = np.asarray(ridge.coef) * factor  # the reference starts from the ridge polish, not from ours
    ref = _reference(A, y, loss, 1e-3, lam, start, 0.0)
    coef = np.asarray(fit.coef) * factor
    np.testing.assert_allclose(coef, ref, atol=1e-6)
    assert np.array_equal(coef == 0, np.abs(ref) < 1e-8) and 0 < np.sum(coef == 0) < K  # exact zeros


def test_l1_polish_on_the_operator_path(monkeypatch):
    """A sparse support polished through its compacted entries (preconditioned OWL-QN, float32)."""
    polish_module = sys.modules["jaxselect.anneal.polish"]
    rng = np.random.default_rng(2)
    X = (rng.uniform(size=(400, 60)) < np.geomspace(0.6, 0.02, 60)).astype(np.float32)
    score = X[:, [0, 4, 9, 30]] @ np.array([1.0, 2.0, -2.0, 3.0]) + 0.3 * rng.normal(size=400)
    y = (score > np.median(score)).astype(np.int32)
    kw = dict(loss="logistic", n_iter=40, l2=1e-3, scale="sparse", l1=0.01, max_iter=500)
    dense = js.fsa(sp.csr_matrix(X), y, 10, **kw)
    monkeypatch.setattr(polish_module, "DENSE_SUPPORT_BYTES", 0)
    operator = js.fsa(sp.csr_matrix(X), y, 10, **kw)
    assert int(operator.status) == int(dense.status) == 0
    A, factor = _standardized(X, np.asarray(operator.support), "sparse")
    ref = _reference(A, y, "logistic", 1e-3, 0.01, np.zeros(10), 0.0)
    for fit in (operator, dense):
        np.testing.assert_allclose(np.asarray(fit.coef, np.float64) * factor, ref, atol=2e-3)
    assert np.sum(np.abs(ref) < 1e-8) > 0 and np.array_equal(np.asarray(operator.coef) == 0, np.abs(ref) < 1e-8)


def test_owlqn_is_the_soft_threshold():
    """½‖z − a‖² + Σ λ_j|z_j| has the closed form sign(a)·max(|a| − λ, 0); λ = 0 moves freely."""
    a = jnp.asarray([3.0, -0.5, 0.2, -2.0, 1.0])
    lam = jnp.asarray([1.0, 1.0, 1.0, 0.5, 0.0])
    z, it, status = owlqn(jax.value_and_grad(lambda z: 0.5 * jnp.sum((z - a) ** 2)), jnp.ones(5, bool), lam,
                          jnp.asarray([-1.0, 1.0, 0.0, 0.0, -4.0]), 1e-6, 100)
    z = np.asarray(z)
    np.testing.assert_allclose(z, [2.0, 0.0, 0.0, -1.5, 1.0], atol=1e-6)
    assert int(status) == 0 and float(z[1]) == float(z[2]) == 0.0 and int(it) > 0
    pg = pseudo_gradient(jnp.asarray([0.0, 0.0, 0.0, 1.0]), jnp.asarray([2.0, -2.0, 0.5, 0.5]), jnp.ones(4))
    np.testing.assert_allclose(pg, [1.0, -1.0, 0.0, 1.5])


def test_l1_derivative_matches_finite_differences(x64):
    X, y = _problem(3)
    weights = jnp.arange(1.0, K + 1.0)

    def f(lam):
        return jnp.sum(js.fsa(X, y, K, loss="logistic", n_iter=60, l2=1e-3, l1=lam, tol=1e-12, max_iter=1000).coef * weights)

    lam, eps = 0.02, 1e-6
    fd = (float(f(lam + eps)) - float(f(lam - eps))) / (2 * eps)
    np.testing.assert_allclose(float(jax.grad(f)(jnp.asarray(lam))), fd, rtol=1e-4)


def test_l1_zero_is_no_l1():
    X, y = _problem(4)
    a = js.fsa(X.astype(np.float32), y, K, loss="logistic", n_iter=40)
    b = js.fsa(X.astype(np.float32), y, K, loss="logistic", n_iter=40, l1=0.0)
    np.testing.assert_array_equal(np.asarray(a.coef), np.asarray(b.coef))


@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        (dict(l1=-0.1), ValueError, "l1"),
        (dict(l1="a"), TypeError, "l1"),
        (dict(l1=[0.1, 0.2]), TypeError, "l1"),
        (dict(l1=0.1, polish=False), ValueError, "polish=True"),
        (dict(l1=0.1, bins=4), ValueError, "linear learners"),
    ],
)
def test_bad_l1(kwargs, err, match):
    X, y = _problem()
    with pytest.raises(err, match=match):
        js.fsa(X.astype(np.float32), y, K, loss="logistic", **kwargs)


def test_l1_polish_of_a_streamed_x_equals_in_memory():
    """A numpy X above ``max_memory`` streams its schedule; its L1 polish is the in-memory one."""
    X, y = _problem(5)
    X = X.astype(np.float32)
    kw = dict(loss="logistic", n_iter=40, l2=1e-3, l1=0.02)
    memory = js.fsa(X, y, K, max_memory=None, **kw)
    streamed = js.fsa(X, y, K, max_memory=X.nbytes // 8, **kw)
    assert streamed.support.tolist() == memory.support.tolist()
    assert int(streamed.status) == int(memory.status) == 0 and np.sum(np.asarray(memory.coef) == 0) > 0
    np.testing.assert_allclose(np.asarray(streamed.coef), np.asarray(memory.coef), rtol=2e-3, atol=2e-4)
