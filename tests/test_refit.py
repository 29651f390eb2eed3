"""Differentiable ridge refit at a fixed support: values, gradients (check_grads), jit/vmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jaxselect as js


def data(seed=0, n=40, d=5, T=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 3, d) + 4.0
    Y = X @ rng.normal(size=(d, T)) + rng.normal(size=(n, T)) + 1.0
    return X, Y


def test_refit_matches_closed_form():
    X, Y = data()
    support = np.array([True, False, True, True, False])
    l2 = 0.1
    coef, b = js.ridge_refit(X, Y, support, l2=l2)
    Xs = X[:, support]
    mu, sd = Xs.mean(0), Xs.std(0)
    Z = (Xs - mu) / sd
    w = np.linalg.solve(Z.T @ Z / 40 + l2 * np.eye(3), Z.T @ (Y - Y.mean(0)) / 40)
    expected = np.zeros((5, 2))
    expected[support] = w / sd[:, None]
    np.testing.assert_allclose(coef, expected, rtol=1e-10)
    np.testing.assert_allclose(b, Y.mean(0) - mu @ expected[support], rtol=1e-10)


def test_refit_matches_selection_path_model():
    """The refit on a path's support reproduces the path's model when groups are singletons."""
    X, Y = data(1)
    path = js.cs_fr(js.prepare(X, Y, l2=0.05))
    support = np.isin(np.arange(5), np.asarray(path.order)[:3])
    coef, b = js.ridge_refit(X, Y, support, l2=0.05)
    np.testing.assert_allclose(coef, path.coef[2], rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(b, path.intercept[2], rtol=1e-8)


def test_gradients_wrt_X_Y_l2():
    X, Y = data(2, n=15, d=4, T=1)
    support = jnp.asarray([True, True, False, True])

    def loss(X, Y, l2):
        coef, b = js.ridge_refit(X, Y, support, l2=l2)
        return jnp.sum((X @ coef + b[None, :]) ** 2) + jnp.sum(coef**2)

    check_grads(loss, (jnp.asarray(X), jnp.asarray(Y), jnp.asarray(0.3)), order=1, modes=["rev", "fwd"])


def test_tune_l2_by_gradient_descent_reduces_validation_loss():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 12))
    y = X[:, :3] @ np.array([1.0, -1.0, 0.5]) + rng.normal(scale=2.0, size=60)
    Xt, yt, Xv, yv = X[:30], y[:30], X[30:], y[30:]

    def val_loss(log_l2):
        coef, b = js.ridge_refit(Xt, yt, l2=jnp.exp(log_l2))
        return jnp.mean((Xv @ coef + b - yv) ** 2)

    grad = jax.jit(jax.value_and_grad(val_loss))
    log_l2 = jnp.asarray(np.log(1e-3))
    first, _ = grad(log_l2)
    for _ in range(60):
        value, g = grad(log_l2)
        log_l2 = log_l2 - 0.5 * g
    assert float(value) < float(first)


def test_vmap_over_supports_and_validation():
    X, Y = data(4)
    supports = jnp.asarray(np.tril(np.ones((5, 5), bool)))
    coefs, _ = jax.vmap(lambda s: js.ridge_refit(X, Y, s, l2=0.1))(supports)
    for k in range(5):
        np.testing.assert_allclose(coefs[k], js.ridge_refit(X, Y, np.asarray(supports[k]), l2=0.1)[0], rtol=1e-10)
    with pytest.raises(ValueError, match="l2 must be > 0"):
        js.ridge_refit(X, Y, l2=0.0)
    with pytest.raises(ValueError, match="support"):
        js.ridge_refit(X, Y, np.ones(3, bool))
    with pytest.raises(TypeError, match="boolean"):
        js.ridge_refit(X, Y, np.ones(5))


def test_rls_refit_matches_greedy_rls_and_is_differentiable():
    X, Y = data(5, n=30, d=8, T=2)
    res = js.greedy_rls(X, Y, 3, l2=0.7, bias=2.0)
    coef, b = js.rls_refit(X, Y, res.selected, l2=0.7, bias=2.0)
    np.testing.assert_allclose(coef, res.coef, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(b, res.intercept, rtol=1e-8, atol=1e-10)
    sel = res.selected

    def loss(X, Y, l2, bias):
        c, b = js.rls_refit(X, Y, sel, l2=l2, bias=bias)
        return jnp.sum((X @ c + b[None, :] - Y) ** 2)

    check_grads(loss, (jnp.asarray(X), jnp.asarray(Y), jnp.asarray(0.7), jnp.asarray(2.0)), order=1, modes=["rev"])
    with pytest.raises(ValueError, match="l2 must be > 0"):
        js.rls_refit(X, Y, sel, l2=0.0)


def test_glm_refit_matches_sklearn_and_is_differentiable():
    linear_model = pytest.importorskip("sklearn.linear_model")
    rng = np.random.default_rng(6)
    X = rng.normal(size=(80, 4)) * 2 + 1
    y = (X[:, 0] - X[:, 2] + rng.normal(size=80) > 1).astype(int)
    sup = np.array([True, False, True, True])
    Xs = X[:, sup]
    mu, sd = Xs.mean(0), Xs.std(0)
    coef, b = js.glm_refit(X, y, sup, l2=0.1)
    ref = linear_model.LogisticRegression(C=1 / (0.1 * 80), tol=1e-12, max_iter=10_000).fit((Xs - mu) / sd, y)
    np.testing.assert_allclose(np.asarray(coef)[sup] * sd, ref.coef_[0], rtol=1e-6)
    np.testing.assert_allclose(float(b) + mu @ np.asarray(coef)[sup], ref.intercept_[0], rtol=1e-6)
    assert np.all(np.asarray(coef)[~sup] == 0)
    yc = np.digitize(X[:, 1] + X[:, 3], [-0.5, 2.0])
    coef2, _ = js.glm_refit(X, yc, sup, loss="softmax", l2=0.1)
    ref2 = linear_model.LogisticRegression(C=1 / (0.1 * 80), tol=1e-12, max_iter=10_000).fit((Xs - mu) / sd, yc)
    np.testing.assert_allclose(np.asarray(coef2)[sup] * sd[:, None], ref2.coef_.T, atol=1e-6)

    def loss(X, l2):
        c, b = js.glm_refit(X, y, sup, l2=l2)
        return jnp.sum(c**2) + b

    check_grads(loss, (jnp.asarray(X), jnp.asarray(0.1)), order=1, modes=["rev"])
    with pytest.raises(ValueError, match="\\[0, 1\\]"):
        js.glm_refit(X, y + 1, sup)
    with pytest.raises(ValueError, match="loss"):
        js.glm_refit(X, y, sup, loss="probit")
