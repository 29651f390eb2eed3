"""Losses of jaxselect.losses against closed forms, finite differences and curvature bounds."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxselect import losses as L

import reference_fsa as ref

RNG = np.random.default_rng(0)
S = RNG.normal(scale=2.0, size=40)
Y01 = (RNG.random(40) > 0.5).astype(np.int32)
YPM = 2 * Y01 - 1
YREG = RNG.normal(size=40)
IJ = RNG.integers(0, 40, size=(30, 2)).astype(np.int32)
R = RNG.random(30)

MARGIN = {"logistic": L.logistic_loss, "huber_hinge": L.huber_hinge_loss, "lorenz": L.lorenz_loss}


def _rtol(dtype):
    return 1e-6 if dtype == np.float32 else 1e-12


@pytest.fixture(params=[np.float32, np.float64], ids=["float32", "float64"])
def dtype(request):
    """Both precisions: float32 (the default) and float64 (x64 switched on for the test)."""
    if request.param == np.float64:
        request.getfixturevalue("x64")
    return request.param


@pytest.mark.parametrize("name", list(MARGIN))
def test_margin_losses_match_closed_form_and_label_conventions(name, dtype):
    fn = MARGIN[name]
    expected, _ = ref.margin_loss(name, YPM * S.astype(dtype))
    s = jnp.asarray(S, dtype)
    val01 = fn(s, jnp.asarray(Y01))
    valpm = fn(s, jnp.asarray(YPM))
    assert val01.dtype == dtype
    np.testing.assert_allclose(val01, expected.mean(), rtol=_rtol(dtype))
    np.testing.assert_allclose(valpm, expected.mean(), rtol=_rtol(dtype))


def test_squared_and_ranking_closed_form(dtype):
    s = jnp.asarray(S, dtype)
    np.testing.assert_allclose(
        L.squared_loss(s, jnp.asarray(YREG, dtype)), 0.5 * np.mean((S - YREG) ** 2), rtol=_rtol(dtype)
    )
    d = S[IJ[:, 0]] - S[IJ[:, 1]]
    expected = np.mean(np.log1p(np.exp(d)) - R * d)
    np.testing.assert_allclose(L.ranking_loss(s, (jnp.asarray(IJ), jnp.asarray(R, dtype))), expected, rtol=_rtol(dtype))


@pytest.mark.parametrize("name", ["squared", "logistic", "huber_hinge", "lorenz", "ranking"])
def test_gradient_matches_closed_form_and_finite_differences(name, x64):
    if name == "squared":
        fn, kw, y = L.squared_loss, dict(y=YREG), jnp.asarray(YREG)
    elif name == "ranking":
        fn, kw, y = L.ranking_loss, dict(pairs=(IJ, R)), (jnp.asarray(IJ), jnp.asarray(R))
    else:
        fn, kw, y = MARGIN[name], dict(y=YPM), jnp.asarray(Y01)
    g = np.asarray(jax.grad(fn)(jnp.asarray(S), y))
    _, g_ref = ref.loss_and_grad(name, S, **kw)
    np.testing.assert_allclose(g, g_ref, rtol=1e-9, atol=1e-12)
    # central finite differences along a few random directions
    fj = jax.jit(fn)
    f = lambda s: float(fj(jnp.asarray(s), y))  # noqa: E731
    for v in RNG.normal(size=(3, S.size)):
        eps = 1e-6
        fd = (f(S + eps * v) - f(S - eps * v)) / (2 * eps)
        np.testing.assert_allclose(fd, float(g @ v), rtol=1e-5, atol=1e-9)


def test_huber_hinge_is_c1_at_the_joints_and_h_is_exposed():
    for h in (0.1, 0.5):
        for joint in (1 - h, 1 + h):
            m = jnp.asarray([joint - 1e-9, joint + 1e-9])
            vals = np.asarray(L.huber_hinge_margin(m, h))
            ders = np.asarray(jax.vmap(jax.grad(lambda x: L.huber_hinge_margin(x, h)))(m))
            np.testing.assert_allclose(vals[0], vals[1], atol=1e-8)
            np.testing.assert_allclose(ders[0], ders[1], atol=1e-7)
    assert float(L.huber_hinge_loss(jnp.asarray([1.0]), jnp.asarray([1]), h=0.5)) == pytest.approx(0.25 / 2.0)


def test_lorenz_zero_beyond_one_and_smooth_at_one():
    m = jnp.linspace(1.0, 5.0, 9)
    assert np.all(np.asarray(L.lorenz_margin(m)) == 0)
    d = jax.vmap(jax.grad(L.lorenz_margin))(jnp.asarray([1 - 1e-9, 1.0, 1 + 1e-9]))
    np.testing.assert_allclose(d, 0.0, atol=1e-8)
    # logarithmic growth: robust to far-misclassified points
    assert float(L.lorenz_margin(jnp.asarray(-100.0))) < 10


def test_logistic_margin_is_softplus_with_one_exponential_and_exact_derivatives(dtype):
    """The logistic margin loss has jax.nn.softplus's values bit for bit, and its own derivative
    rule (σ from the value's e^{−|m|}): first and second derivatives against the closed forms,
    at 0 (where a |m| in the rule would lose the curvature) and at huge margins (no overflow)."""
    edges = [0.0, -0.0, 1e-30, -1e-30, 40.0, -40.0, 700.0, -700.0, 1e30, -1e30]
    m = jnp.asarray(np.concatenate([RNG.normal(scale=8.0, size=200), edges]), dtype)
    np.testing.assert_array_equal(np.asarray(L.logistic_margin(m)), np.asarray(jax.nn.softplus(-m)))
    jitted = jax.jit(lambda v: jax.nn.softplus(-v))
    np.testing.assert_array_equal(np.asarray(jax.jit(L.logistic_margin)(m)), np.asarray(jitted(m)))
    sigma = np.asarray(jax.nn.sigmoid(np.asarray(m, np.float64)))  # σ(m); ℓ'(m) = −σ(−m) = σ(m) − 1
    tol = {"rtol": 10 * _rtol(dtype), "atol": 10 * np.finfo(dtype).eps}
    first = np.asarray(jax.vmap(jax.grad(L.logistic_margin))(m), np.float64)
    np.testing.assert_allclose(first, sigma - 1.0, **tol)
    second = np.asarray(jax.vmap(jax.hessian(L.logistic_margin))(m), np.float64)
    np.testing.assert_allclose(second, sigma * (1.0 - sigma), **tol)
    assert float(jax.hessian(L.logistic_margin)(jnp.asarray(0.0, dtype))) == 0.25
    forward = jax.jvp(lambda v: jax.jvp(L.logistic_margin, (v,), (jnp.ones_like(v),))[0], (m,), (jnp.ones_like(m),))[1]
    np.testing.assert_allclose(np.asarray(forward, np.float64), sigma - 1.0, **tol)
    assert np.isnan(float(L.logistic_margin(jnp.asarray(np.nan, dtype))))


@pytest.mark.parametrize("name", ["squared", "logistic", "huber_hinge", "lorenz"])
def test_curvature_bounds_second_derivative(name):
    fn = {
        "squared": lambda m: 0.5 * (m - 1.0) ** 2,
        "logistic": L.logistic_margin,
        "huber_hinge": L.huber_hinge_margin,
        "lorenz": L.lorenz_margin,
    }[name]
    m = jnp.linspace(-6.0, 6.0, 2001)
    second = np.asarray(jax.vmap(jax.grad(jax.grad(fn)))(m))
    bound = L.curvature(name)
    assert float(np.max(np.abs(second))) <= bound + 1e-9
    assert float(np.max(np.abs(second))) >= 0.9 * bound  # the bound is tight


def test_float32_in_float32_out_and_jit_vmap():
    s32 = jnp.asarray(S, jnp.float32)
    for fn, y in [
        (L.squared_loss, jnp.asarray(YREG, jnp.float32)),
        (L.logistic_loss, jnp.asarray(Y01)),
        (L.lorenz_loss, jnp.asarray(YPM)),
        (L.huber_hinge_loss, jnp.asarray(Y01)),
    ]:
        assert fn(s32, y).dtype == jnp.float32
        assert jax.jit(fn)(s32, y).dtype == jnp.float32
    batched = jax.vmap(L.logistic_loss, in_axes=(0, None))(jnp.stack([s32, -s32]), jnp.asarray(Y01))
    assert batched.shape == (2,)
    assert L.ranking_loss(s32, (jnp.asarray(IJ), jnp.asarray(R, jnp.float32))).dtype == jnp.float32


# --------------------------------------------------------------------------------------------- per-example GLM losses


def _glm_data(name, n=40, T=3, seed=5):
    rng = np.random.default_rng(seed)
    S = rng.normal(scale=2.0, size=(n, T))
    if name == "softmax":
        Y = np.eye(T)[rng.integers(0, T, n)]  # one-hot rows
    elif name == "logistic":
        Y = rng.integers(0, 2, (n, T)).astype(float)
    else:
        Y = rng.normal(size=(n, T))
    return jnp.asarray(S), jnp.asarray(Y)


def _log_cosh(S, Y):
    return jnp.sum(jnp.logaddexp(S - Y, Y - S) - jnp.log(2.0), axis=1)


@pytest.mark.parametrize("name", ["logistic", "softmax", "squared", "callable"])
def test_glm_loss_derivatives_match_finite_differences(name, x64):
    """Per-example score gradients and Hessians (used by the Newton refits) against differences."""
    S, Y = _glm_data(name)
    parts = L.glm_loss(_log_cosh if name == "callable" else name)
    value, grad, hess = (np.asarray(f(S, Y)) for f in parts)
    assert value.shape == (40,) and grad.shape == (40, 3) and hess.shape == (40, 3, 3)
    eps = 1e-6
    S_np = np.asarray(S)
    for k in range(3):
        e = np.zeros_like(S_np)
        e[:, k] = eps
        Sp, Sm = jnp.asarray(S_np + e), jnp.asarray(S_np - e)
        fd_value = (np.asarray(parts.value(Sp, Y)) - np.asarray(parts.value(Sm, Y))) / (2 * eps)
        np.testing.assert_allclose(grad[:, k], fd_value, atol=1e-7)
        fd_grad = (np.asarray(parts.grad(Sp, Y)) - np.asarray(parts.grad(Sm, Y))) / (2 * eps)
        np.testing.assert_allclose(hess[:, :, k], fd_grad, atol=1e-7)
    np.testing.assert_allclose(hess, np.swapaxes(hess, 1, 2), atol=1e-12)  # symmetric
    assert np.all(np.linalg.eigvalsh(hess) >= -1e-12)  # convex


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_glm_loss_agrees_with_the_mean_losses(dtype, request):
    """One loss module: the GLM parts are the per-example terms of the FSA mean losses."""
    if dtype == np.float64:
        request.getfixturevalue("x64")
    s_np, y01_np, yreg_np = (a.astype(dtype)[:, None] for a in (S, Y01, YREG))
    s, y01, yreg = jnp.asarray(s_np), jnp.asarray(y01_np), jnp.asarray(yreg_np)
    logistic = L.glm_loss("logistic")
    np.testing.assert_allclose(
        np.mean(np.asarray(logistic.value(s, y01))),
        L.logistic_loss(jnp.asarray(s_np[:, 0]), jnp.asarray(YPM)),
        rtol=1e-6 if dtype == np.float32 else 1e-12,
    )
    np.testing.assert_allclose(
        np.mean(np.asarray(L.glm_loss("squared").value(s, yreg))),
        L.squared_loss(jnp.asarray(s_np[:, 0]), jnp.asarray(yreg_np[:, 0])),
        rtol=1e-6 if dtype == np.float32 else 1e-12,
    )
    # softmax with two classes is the logistic loss of the score difference
    two = jnp.asarray(np.concatenate([np.zeros_like(s_np), s_np], axis=1))
    onehot = jnp.asarray(np.concatenate([1 - y01_np, y01_np], axis=1))
    np.testing.assert_allclose(
        L.glm_loss("softmax").value(two, onehot), logistic.value(s, y01), rtol=1e-5 if dtype == np.float32 else 1e-12
    )
    for name in L.GLM_LOSSES:
        parts = L.glm_loss(name)
        out = [f(two, onehot if name != "squared" else two) for f in parts]
        assert all(o.dtype == dtype for o in out)


def test_glm_loss_callables_and_validation():
    S, Y = _glm_data("logistic")
    S, Y = S.astype(jnp.float32), Y.astype(jnp.float32)
    builtin = L.glm_loss("logistic")

    def mean_logistic(S, Y):  # a scalar mean is accepted and spread over the examples
        return jnp.mean(jnp.sum(jax.nn.softplus(S) - Y * S, axis=1))

    mine = L.glm_loss(mean_logistic)
    mean_mine, mean_builtin = (np.mean(np.asarray(p.value(S, Y))) for p in (mine, builtin))
    np.testing.assert_allclose(mean_mine, mean_builtin, rtol=1e-6)
    np.testing.assert_allclose(mine.grad(S, Y), builtin.grad(S, Y), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mine.hess(S, Y), builtin.hess(S, Y), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="loss must be one of"):
        L.glm_loss("hinge")
