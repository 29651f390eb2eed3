"""Differentiable refits at a fixed support (ridge, RLS, GLM): values, gradients (check_grads), jit/vmap.

float64 oracles use the ``x64`` fixture; the float32 default path is tested alongside.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jaxselect as js
from compile_count import count_compiles


def data(seed=0, n=40, d=5, T=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 3, d) + 4.0
    Y = X @ rng.normal(size=(d, T)) + rng.normal(size=(n, T)) + 1.0
    return X, Y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_refit_matches_closed_form(dtype, request):
    if dtype == np.float64:
        request.getfixturevalue("x64")
    X, Y = data()
    support = np.array([True, False, True, True, False])
    l2 = 0.1
    coef, b = js.ridge_refit(X.astype(dtype), Y.astype(dtype), support, l2=l2)
    assert coef.dtype == dtype
    Xs = X[:, support]
    mu, sd = Xs.mean(0), Xs.std(0)
    Z = (Xs - mu) / sd
    w = np.linalg.solve(Z.T @ Z / 40 + l2 * np.eye(3), Z.T @ (Y - Y.mean(0)) / 40)
    expected = np.zeros((5, 2))
    expected[support] = w / sd[:, None]
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(coef, expected, rtol=rtol, atol=rtol * np.abs(expected).max())
    np.testing.assert_allclose(b, Y.mean(0) - mu @ expected[support], rtol=rtol)


def test_ridge_refit_constant_columns_are_inert():
    """The shared standardisation rule: a constant column (max == min) gets coefficient 0, even in the support."""
    X, Y = data(8)
    X[:, 2] = 7.0
    coef, b = js.ridge_refit(X, Y, l2=0.1)
    assert float(np.abs(np.asarray(coef)[2]).max()) == 0.0
    ref, ref_b = js.ridge_refit(np.delete(X, 2, axis=1), Y, l2=0.1)
    np.testing.assert_allclose(np.delete(np.asarray(coef), 2, axis=0), ref, rtol=1e-5)
    np.testing.assert_allclose(b, ref_b, rtol=1e-5)


def test_refit_matches_selection_path_model(x64):
    """The refit on a path's support reproduces the path's model when groups are singletons."""
    X, Y = data(1)
    path = js.cs_fr(js.prepare(X, Y, l2=0.05))
    support = np.isin(np.arange(5), np.asarray(path.order)[:3])
    coef, b = js.ridge_refit(X, Y, support, l2=0.05)
    np.testing.assert_allclose(coef, np.asarray(path.coef)[2], rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(b, np.asarray(path.intercept)[2], rtol=1e-8)


def test_gradients_wrt_X_Y_l2(x64):
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
        np.testing.assert_allclose(
            coefs[k], js.ridge_refit(X, Y, np.asarray(supports[k]), l2=0.1)[0], rtol=1e-5, atol=1e-6
        )
    with pytest.raises(ValueError, match="l2 must be > 0"):
        js.ridge_refit(X, Y, l2=0.0)
    with pytest.raises(ValueError, match="support"):
        js.ridge_refit(X, Y, np.ones(3, bool))
    with pytest.raises(TypeError, match="boolean"):
        js.ridge_refit(X, Y, np.ones(5))


def test_rls_refit_matches_greedy_rls_and_is_differentiable(x64):
    X, Y = data(5, n=30, d=8, T=2)
    l2 = 0.7 / 30  # RLScore regparam 0.7 on n = 30 rows
    res = js.greedy_rls(X, Y, 3, l2=l2, bias=2.0)
    coef, b = js.rls_refit(X, Y, res.selected, l2=l2, bias=2.0)
    np.testing.assert_allclose(coef, res.coef, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(b, res.intercept, rtol=1e-8, atol=1e-10)
    sel = res.selected
    # The library's l2: w minimises (1/2n)‖Y − Z w‖² + (l2/2)‖w‖² with Z = [X_S, √bias·1].
    Z = np.concatenate([X[:, np.asarray(sel)], np.full((30, 1), np.sqrt(2.0))], axis=1)
    w = np.concatenate([np.asarray(coef)[np.asarray(sel)], np.asarray(b)[None, :] / np.sqrt(2.0)])
    np.testing.assert_allclose(-Z.T @ (Y - Z @ w) / 30 + l2 * w, 0.0, atol=1e-10)

    def loss(X, Y, l2, bias):
        c, b = js.rls_refit(X, Y, sel, l2=l2, bias=bias)
        return jnp.sum((X @ c + b[None, :] - Y) ** 2)

    check_grads(loss, (jnp.asarray(X), jnp.asarray(Y), jnp.asarray(l2), jnp.asarray(2.0)), order=1, modes=["rev"])
    with pytest.raises(ValueError, match="l2 must be > 0"):
        js.rls_refit(X, Y, sel, l2=0.0)
    with pytest.raises(ValueError, match="bias must be >= 0"):
        js.rls_refit(X, Y, sel, bias=-1.0)
    with pytest.raises(ValueError, match=r"indices in \[0, 8\)"):
        js.rls_refit(X, Y, np.array([1, 8]))
    with pytest.raises(ValueError, match="at least 2 rows"):
        js.rls_refit(X[:1], Y[:1], sel)


def test_rls_refit_float32_matches_greedy_rls_and_ignores_minus_one():
    X, Y = data(7, n=30, d=8, T=2)
    X, Y = X.astype(np.float32), Y.astype(np.float32)
    res = js.greedy_rls(X, Y[:, 0], 4, l2=0.01, bias=1.0)
    coef, b = js.rls_refit(X, Y[:, 0], res.selected, l2=0.01, bias=1.0)
    assert coef.dtype == jnp.float32 and coef.shape == (8,) and b.shape == ()
    # Rank-one dual updates vs one Cholesky solve on uncentred columns (mean 4): float32 rounding.
    np.testing.assert_allclose(coef, res.coef, rtol=5e-4, atol=1e-5)
    np.testing.assert_allclose(b, res.intercept, rtol=5e-4)
    # −1 (a greedy step that found nothing, under a user's jit) is ignored; so is a traced support.
    padded = np.concatenate([np.asarray(res.selected), [-1]]).astype(np.int32)
    coef2, b2 = jax.jit(lambda s: js.rls_refit(X, Y[:, 0], s, l2=0.01, bias=1.0))(padded)
    # (float32 rounding: the user's jit compiles with XLA's defaults, the call the library's quick way)
    np.testing.assert_allclose(coef2, coef, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(b2, b, rtol=1e-4, atol=1e-6)
    # l2 may be traced: vmap over a grid equals one call per value.
    grid = jnp.asarray([0.01, 0.1], jnp.float32)
    coefs, _ = jax.vmap(lambda l2: js.rls_refit(X, Y, res.selected, l2=l2))(grid)
    np.testing.assert_allclose(coefs[1], js.rls_refit(X, Y, res.selected, l2=0.1)[0], rtol=1e-5, atol=1e-6)


def _glm_data(seed=6, n=80):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)) * 2 + 1
    y = (X[:, 0] - X[:, 2] + rng.normal(size=n) > 1).astype(int)
    return X, y, np.array([True, False, True, True])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_glm_refit_matches_sklearn(dtype, request):
    if dtype == np.float64:
        request.getfixturevalue("x64")
    linear_model = pytest.importorskip("sklearn.linear_model")
    X, y, sup = _glm_data()
    Xs = X[:, sup]
    mu, sd = Xs.mean(0), Xs.std(0)
    C = 1 / (0.1 * 80)  # l2 = 1/(C·n)
    tol = 2e-4 if dtype == np.float32 else 1e-6
    coef, b, status, info = js.glm_refit(X.astype(dtype), y, sup, l2=0.1)
    assert int(status) == int(info.status)
    assert coef.dtype == dtype and int(info.status) == 0
    assert 1 <= int(info.n_iter) <= 8  # the damped Newton stops at its tolerance (float32 included)
    ref = linear_model.LogisticRegression(C=C, tol=1e-12, max_iter=10_000).fit((Xs - mu) / sd, y)
    np.testing.assert_allclose(np.asarray(coef)[sup] * sd, ref.coef_[0], rtol=tol, atol=tol)
    np.testing.assert_allclose(float(b) + mu @ np.asarray(coef)[sup], ref.intercept_[0], rtol=tol, atol=tol)
    assert np.all(np.asarray(coef)[~sup] == 0)
    yc = np.digitize(X[:, 1] + X[:, 3], [-0.5, 2.0])
    coef2, b2, _, info2 = js.glm_refit(X.astype(dtype), yc, sup, loss="softmax", l2=0.1)
    assert int(info2.status) == 0 and abs(float(np.sum(np.asarray(b2) + mu @ np.asarray(coef2)[sup]))) < 10 * tol
    ref2 = linear_model.LogisticRegression(C=C, tol=1e-12, max_iter=10_000).fit((Xs - mu) / sd, yc)
    np.testing.assert_allclose(np.asarray(coef2)[sup] * sd[:, None], ref2.coef_.T, atol=tol)


def test_glm_refit_is_differentiable(x64):
    X, y, sup = _glm_data()

    def loss(X, l2):
        fit = js.glm_refit(X, y, sup, l2=l2)
        return jnp.sum(fit.coef**2) + fit.intercept

    check_grads(loss, (jnp.asarray(X), jnp.asarray(0.1)), order=1, modes=["rev", "fwd"])
    yc = np.digitize(X[:, 1] + X[:, 3], [-0.5, 2.0])

    def soft(X, l2):
        c, b = js.glm_refit(X, yc, sup, loss="softmax", l2=l2)[:2]
        return jnp.sum(c**2) + jnp.sum(b * jnp.arange(3.0))

    check_grads(soft, (jnp.asarray(X), jnp.asarray(0.1)), order=1, modes=["rev"])
    # soft labels in [0, 1] are differentiable too
    p = jnp.asarray(np.clip(0.5 + 0.1 * X[:, 0], 0.05, 0.95))
    check_grads(lambda p: jnp.sum(js.glm_refit(X, p, sup, l2=0.1)[0]), (p,), order=1, modes=["rev"])


def test_glm_refit_equals_the_last_glm_omp_prefix():
    """glm_refit and glm_omp share the loss, the l2 and the Newton solver: on unwhitened singletons the
    full path's last model is the refit on every column."""
    X, y, _ = _glm_data(9, n=120)
    path = js.glm_omp(X, y, l2=0.05, whiten=False, tol=1e-6)
    coef, b = js.glm_refit(X, y, l2=0.05, tol=1e-6)[:2]
    np.testing.assert_allclose(np.asarray(path.coef)[-1, :, 0], coef, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(path.intercept)[-1, 0], b, rtol=1e-4, atol=1e-5)


def test_glm_refit_labels_status_jit_and_compiles():
    X, y, sup = _glm_data()
    ref = js.glm_refit(X, y, sup, l2=0.1)
    for labels in (2 * y - 1, y.astype(bool), y[:, None]):  # {−1, +1}, bool, (n, 1)
        np.testing.assert_array_equal(js.glm_refit(X, labels, sup, l2=0.1)[0], ref[0])
    # traced labels, support and l2 inside a user's jit; softmax then needs n_classes
    fit = jax.jit(lambda X, y, s, l2: js.glm_refit(X, y, s, l2=l2))
    np.testing.assert_allclose(fit(X.astype(np.float32), 2 * y - 1, sup, 0.1)[0], ref[0], rtol=1e-5, atol=1e-6)
    yc = np.digitize(X[:, 1] + X[:, 3], [-0.5, 2.0])
    with pytest.raises(ValueError, match="n_classes"):
        jax.jit(lambda y: js.glm_refit(X, y, sup, loss="softmax"))(yc)
    soft = jax.jit(lambda y: js.glm_refit(X, y, sup, loss="softmax", n_classes=3))(yc)
    # float32 Newton stops anywhere within its tolerance: traced and concrete labels agree to it
    np.testing.assert_allclose(soft[0], js.glm_refit(X, yc, sup, loss="softmax")[0], rtol=1e-3, atol=1e-5)
    # jitted = eager
    with jax.disable_jit():
        eager = js.glm_refit(X[:30], y[:30], sup, l2=0.1)
    np.testing.assert_allclose(eager[0], js.glm_refit(X[:30], y[:30], sup, l2=0.1)[0], rtol=1e-5, atol=1e-6)
    # hitting max_iter before tol is reported, never silent
    capped = js.glm_refit(X, y, sup, l2=1e-4, max_iter=1)
    info = capped.info
    assert int(info.status) & js.status.NOT_CONVERGED and int(info.n_iter) == 1
    assert int(capped.status) == int(info.status)
    with pytest.raises(js.SolverError):
        js.raise_for_status(capped)
    # a second call with fresh arrays compiles nothing
    with count_compiles() as compiles:
        jax.block_until_ready(js.glm_refit(np.array(X), np.array(y), np.array(sup), l2=0.2))
    assert compiles[0] == 0


def test_glm_refit_return_info_is_deprecated_but_still_works():
    X, y, sup = _glm_data()
    fit = js.glm_refit(X, y, sup, l2=0.1)
    assert isinstance(fit, js.GLMRefitResult) and "status=0" in repr(fit)
    with pytest.warns(DeprecationWarning, match="GLMRefitResult"):
        coef, b, info = js.glm_refit(X, y, sup, l2=0.1, return_info=True)
    np.testing.assert_array_equal(coef, fit.coef)
    assert float(b) == float(fit.intercept) and int(info.n_iter) == int(fit.info.n_iter)
    with pytest.warns(DeprecationWarning):
        assert len(js.glm_refit(X, y, sup, l2=0.1, return_info=False)) == 2


def test_glm_refit_optax_optimizer_reaches_the_newton_solution(x64):
    """An optax optimizer (L-BFGS with its zoom line search) minimises the same risk: it reaches the
    Newton solution, and gradients through it (implicit differentiation) are the Newton ones."""
    optax = pytest.importorskip("optax")
    X, y, sup = _glm_data()
    newton = js.glm_refit(X, y, sup, l2=0.1, tol=1e-10)
    lbfgs = optax.lbfgs()
    fit = js.glm_refit(X, y, sup, l2=0.1, optimizer=lbfgs, max_iter=200, tol=1e-10)
    assert int(fit.status) == 0 and 1 < int(fit.info.n_iter) < 200
    np.testing.assert_allclose(fit.coef, newton.coef, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(fit.intercept, newton.intercept, rtol=1e-6, atol=1e-8)
    yc = np.digitize(X[:, 1] + X[:, 3], [-0.5, 2.0])
    soft = js.glm_refit(X, yc, sup, loss="softmax", l2=0.1, optimizer=lbfgs, max_iter=300, tol=1e-10)
    assert int(soft.status) == 0
    ref = js.glm_refit(X, yc, sup, loss="softmax", l2=0.1, tol=1e-10)
    np.testing.assert_allclose(soft.coef, ref.coef, rtol=1e-6, atol=1e-8)
    grad = jax.grad(lambda l2, s: jnp.sum(js.glm_refit(X, y, sup, l2=l2, optimizer=s, max_iter=200).coef), argnums=0)
    np.testing.assert_allclose(grad(0.1, lbfgs), grad(0.1, "newton"), rtol=1e-5)
    with count_compiles() as compiles:  # a fresh, equal transformation reuses the compiled solve
        jax.block_until_ready(js.glm_refit(X, y, sup, l2=0.1, optimizer=optax.lbfgs(), max_iter=200, tol=1e-10))
    assert compiles[0] == 0
    # a plain first-order transformation stops at its cap and says so
    slow = js.glm_refit(X, y, sup, l2=0.1, optimizer=optax.sgd(1e-3), max_iter=3)
    assert int(slow.status) & js.status.NOT_CONVERGED and int(slow.info.n_iter) == 3
    with pytest.raises(ValueError, match="optimizer"):
        js.glm_refit(X, y, sup, optimizer="bfgs")
    with pytest.raises(TypeError, match="optimizer"):
        js.glm_refit(X, y, sup, optimizer=object())
    # the old keyword solver= still works for one release, with a DeprecationWarning naming optimizer=
    with pytest.warns(DeprecationWarning, match=r"glm_refit\(solver=\.\.\.\) is deprecated: pass optimizer=") as rec:
        old = js.glm_refit(X, y, sup, l2=0.1, solver=lbfgs, max_iter=200, tol=1e-10)
    assert rec[0].filename == __file__  # the warning points at the caller's line
    np.testing.assert_array_equal(old.coef, fit.coef)
    np.testing.assert_array_equal(old.intercept, fit.intercept)


def test_glm_refit_validation():
    X, y, sup = _glm_data()
    with pytest.raises(ValueError, match="\\[0, 1\\]"):
        js.glm_refit(X, y + 1, sup)
    with pytest.raises(ValueError, match="single value"):
        js.glm_refit(X, np.ones_like(y), sup)
    with pytest.raises(ValueError, match="loss"):
        js.glm_refit(X, y, sup, loss="probit")
    with pytest.raises(ValueError, match="l2 must be > 0"):
        js.glm_refit(X, y, sup, l2=0.0)
    with pytest.raises(ValueError, match="at least 2 classes"):
        js.glm_refit(X, np.zeros_like(y), sup, loss="softmax")
    with pytest.raises(ValueError, match="support"):
        js.glm_refit(X, y, np.ones(3, bool))
    with pytest.raises(ValueError, match="at least 2 rows"):
        js.glm_refit(X[:1], y[:1])
