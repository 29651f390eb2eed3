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


@pytest.mark.parametrize("name", list(MARGIN))
def test_margin_losses_match_closed_form_and_label_conventions(name):
    fn = MARGIN[name]
    expected, _ = ref.margin_loss(name, YPM * S)
    val01 = fn(jnp.asarray(S), jnp.asarray(Y01))
    valpm = fn(jnp.asarray(S), jnp.asarray(YPM))
    np.testing.assert_allclose(val01, expected.mean(), rtol=1e-12)
    np.testing.assert_allclose(valpm, expected.mean(), rtol=1e-12)


def test_squared_and_ranking_closed_form():
    np.testing.assert_allclose(L.squared_loss(jnp.asarray(S), jnp.asarray(YREG)), 0.5 * np.mean((S - YREG) ** 2))
    d = S[IJ[:, 0]] - S[IJ[:, 1]]
    expected = np.mean(np.log1p(np.exp(d)) - R * d)
    np.testing.assert_allclose(L.ranking_loss(jnp.asarray(S), (jnp.asarray(IJ), jnp.asarray(R))), expected, rtol=1e-12)


@pytest.mark.parametrize("name", ["squared", "logistic", "huber_hinge", "lorenz", "ranking"])
def test_gradient_matches_closed_form_and_finite_differences(name):
    if name == "squared":
        fn, kw, y = L.squared_loss, dict(y=YREG), jnp.asarray(YREG)
    elif name == "ranking":
        fn, kw, y = L.ranking_loss, dict(pairs=(IJ, R)), (jnp.asarray(IJ), jnp.asarray(R))
    else:
        fn, kw, y = MARGIN[name], dict(y=YPM), jnp.asarray(Y01)
    g = jax.grad(fn)(jnp.asarray(S), y)
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
            vals = L.huber_hinge_margin(m, h)
            ders = jax.vmap(jax.grad(lambda x: L.huber_hinge_margin(x, h)))(m)
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


@pytest.mark.parametrize("name", ["squared", "logistic", "huber_hinge", "lorenz"])
def test_curvature_bounds_second_derivative(name):
    fn = {"squared": lambda m: 0.5 * (m - 1.0) ** 2, "logistic": L.logistic_margin,
          "huber_hinge": L.huber_hinge_margin, "lorenz": L.lorenz_margin}[name]
    m = jnp.linspace(-6.0, 6.0, 2001)
    second = jax.vmap(jax.grad(jax.grad(fn)))(m)
    bound = L.curvature(name)
    assert float(jnp.max(jnp.abs(second))) <= bound + 1e-9
    assert float(jnp.max(jnp.abs(second))) >= 0.9 * bound  # the bound is tight


def test_float32_in_float32_out_and_jit_vmap():
    s32 = jnp.asarray(S, jnp.float32)
    for fn, y in [(L.squared_loss, jnp.asarray(YREG, jnp.float32)), (L.logistic_loss, jnp.asarray(Y01)),
                  (L.lorenz_loss, jnp.asarray(YPM)), (L.huber_hinge_loss, jnp.asarray(Y01))]:
        assert fn(s32, y).dtype == jnp.float32
        assert jax.jit(fn)(s32, y).dtype == jnp.float32
    batched = jax.vmap(L.logistic_loss, in_axes=(0, None))(jnp.stack([s32, -s32]), jnp.asarray(Y01))
    assert batched.shape == (2,)
    assert L.ranking_loss(s32, (jnp.asarray(IJ), jnp.asarray(R, jnp.float32))).dtype == jnp.float32
