"""Tests for multi-target greedy RLS against a naive refit-every-candidate hat-matrix oracle."""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reference_rls as ref
from jaxselect.greedy.rls import (
    RLSResult,
    _greedy_rls_run,
    greedy_rls,
    rls_predict,
    rls_predict_path,
    rls_raise_for_status,
)


def _problem(n=40, d=15, T=3, seed=0, noise=0.5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    W = rng.normal(size=(4, T))
    Y = X[:, [1 % d, 4 % d, 7 % d, 11 % d]] @ W + noise * rng.normal(size=(n, T)) + 1.0
    return X, Y


def _assert_path_is_greedy(X, Y, res, l2, bias, rtol=1e-9):
    """Along the solver's own path, each pick is an oracle minimiser and its LOO value matches.

    Robust to exact ties (duplicated columns), where any minimiser is a correct greedy pick.
    """
    sel = [int(i) for i in np.asarray(res.selected)]
    assert len(set(sel)) == len(sel), "a feature was selected twice"
    loo = np.asarray(res.loo_error, dtype=np.float64)
    for t, b in enumerate(sel):
        scores = ref.candidate_scores(X, Y, sel[:t], l2, bias)
        np.testing.assert_allclose(loo[t], scores[b], rtol=rtol)
        assert scores[b] <= scores.min() * (1 + rtol) + 1e-300


# ----------------------------------------------------------------------------------------------
# exactness against the naive wrapper


@pytest.mark.parametrize("T, bias", [(1, 0.0), (1, 1.5), (3, 0.0), (3, 1.5)])
def test_same_picks_and_loo_as_naive_refit(T, bias):
    X, Y = _problem(T=T, seed=T)
    l2 = 0.7
    res = greedy_rls(X, Y, 6, l2=l2, bias=bias)
    S, loo = ref.greedy_rls_naive(X, Y, 6, l2, bias)
    assert np.asarray(res.selected).tolist() == S
    np.testing.assert_allclose(np.asarray(res.loo_error), loo, rtol=1e-10)
    assert int(res.status) == 0
    assert res.selected.dtype == jnp.int32


def test_no_jit_matches_jit_and_oracle():
    """Eager execution (T = 2: screening, exact re-check and the deferred updates) equals jit."""
    X, Y = _problem(n=12, d=6, T=2, seed=5)
    a = greedy_rls(X, Y, 3, l2=0.3, bias=1.0)
    with jax.disable_jit():
        b = greedy_rls(X, Y, 3, l2=0.3, bias=1.0)
    np.testing.assert_array_equal(a.selected, b.selected)
    for x, y in zip(a, b):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-10, atol=1e-12)
    S, loo = ref.greedy_rls_naive(X, Y, 3, 0.3, 1.0)
    assert np.asarray(b.selected).tolist() == S
    np.testing.assert_allclose(np.asarray(b.loo_error), loo, rtol=1e-10)


@pytest.mark.parametrize("bias", [0.0, 2.0])
def test_coefficients_of_every_prefix_are_ridge_refits(bias):
    X, Y = _problem(T=3, seed=2)
    l2 = 0.5
    res = greedy_rls(X, Y, 6, l2=l2, bias=bias)
    sel = np.asarray(res.selected).tolist()
    assert res.coef_path.shape == (6, 6, 3) and res.intercept_path.shape == (6, 3)
    for t in range(6):
        W, b = ref.ridge_fit(X, Y, sel[: t + 1], l2, bias)
        np.testing.assert_allclose(np.asarray(res.coef_path[t, : t + 1]), W, rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(np.asarray(res.coef_path[t, t + 1 :]), 0.0)
        np.testing.assert_allclose(np.asarray(res.intercept_path[t]), b, rtol=1e-9, atol=1e-12)
    dense = np.zeros((X.shape[1], 3))
    dense[sel] = np.asarray(res.coef_path[-1])
    np.testing.assert_allclose(np.asarray(res.coef), dense)
    np.testing.assert_allclose(np.asarray(res.intercept), np.asarray(res.intercept_path[-1]))


def test_bias_semantics_match_rlscore_constant_feature():
    """bias > 0 = a regularised constant column √bias; its effect is the intercept bias·1ᵀA."""
    X, Y = _problem(T=3, seed=3)
    Y = Y + 5.0  # a large offset makes the intercept matter
    res0 = greedy_rls(X, Y, 6, l2=1.0, bias=0.0)
    np.testing.assert_array_equal(np.asarray(res0.intercept_path), 0.0)
    res = greedy_rls(X, Y, 6, l2=1.0, bias=4.0)
    sel = np.asarray(res.selected).tolist()
    W, b = ref.ridge_fit(X, Y, sel, 1.0, 4.0)
    Z = ref.design(X, sel, 4.0)
    np.testing.assert_allclose(np.asarray(rls_predict(res, X)), Z @ np.linalg.solve(
        Z.T @ Z + np.eye(Z.shape[1]), Z.T @ Y), rtol=1e-9)
    np.testing.assert_allclose(np.asarray(res.intercept), b, rtol=1e-9)
    # With the intercept the LOO error on offset targets is far lower than without.
    assert float(res.loo_error[-1]) < 0.5 * float(res0.loo_error[-1])


def test_predict_and_predict_path():
    X, Y = _problem(T=3, seed=4)
    Xte, _ = _problem(n=9, T=3, seed=40)
    res = greedy_rls(X, Y, 6, l2=0.5, bias=1.0)
    P = np.asarray(rls_predict_path(res, Xte))
    assert P.shape == (6, 9, 3)
    sel = np.asarray(res.selected).tolist()
    for t in range(6):
        W, b = ref.ridge_fit(X, Y, sel[: t + 1], 0.5, 1.0)
        expect = Xte[:, sel[: t + 1]] @ W + b
        np.testing.assert_allclose(P[t], expect, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(np.asarray(rls_predict(res, Xte, step=t + 1)), expect, rtol=1e-9)
    np.testing.assert_allclose(np.asarray(rls_predict(res, Xte)), P[-1], rtol=1e-12)
    dense = np.asarray(Xte @ res.coef + res.intercept[None, :])
    np.testing.assert_allclose(dense, P[-1], rtol=1e-9)


def test_one_dimensional_y_drops_target_axis_and_matches_2d():
    X, Y = _problem(T=1, seed=6)
    r1 = greedy_rls(X, Y[:, 0], 6, l2=0.8, bias=1.0)
    r2 = greedy_rls(X, Y, 6, l2=0.8, bias=1.0)
    assert r1.coef.shape == (15,) and r1.intercept.shape == ()
    assert r1.coef_path.shape == (6, 6) and r1.intercept_path.shape == (6,)
    np.testing.assert_array_equal(r1.selected, r2.selected)
    np.testing.assert_allclose(np.asarray(r1.coef), np.asarray(r2.coef[:, 0]))
    p1 = rls_predict(r1, X)
    assert p1.shape == (40,)
    np.testing.assert_allclose(np.asarray(p1), np.asarray(rls_predict(r2, X)[:, 0]), rtol=1e-12)
    assert rls_predict_path(r1, X).shape == (6, 40)


def test_same_picks_as_rlscore_if_installed():
    """Optional: RLScore's own GreedyRLS (its PyPI release does not build on current Python)."""
    rlscore_learner = pytest.importorskip("rlscore.learner")
    X, Y = _problem(T=3, seed=21)
    for bias in (0.0, 1.0):
        theirs = rlscore_learner.GreedyRLS(X, Y, 6, regparam=0.7, bias=bias)
        ours = greedy_rls(X, Y, 6, l2=0.7, bias=bias)
        assert np.asarray(ours.selected).tolist() == list(theirs.selected)
        np.testing.assert_allclose(
            np.asarray(ours.loo_error), np.asarray(theirs.performances), rtol=1e-8
        )


# ----------------------------------------------------------------------------------------------
# precision, chunking, screening


def test_float32_default_close_to_float64():
    X, Y = _problem(T=3, seed=7)
    r64 = greedy_rls(X, Y, 6, l2=0.5, bias=1.0)
    r32 = greedy_rls(X.astype(np.float32), Y.astype(np.float32), 6, l2=0.5, bias=1.0)
    assert r32.loo_error.dtype == jnp.float32 and r32.coef.dtype == jnp.float32
    assert r64.loo_error.dtype == jnp.float64
    np.testing.assert_array_equal(r32.selected, r64.selected)
    loo32, loo64 = np.asarray(r32.loo_error, np.float64), np.asarray(r64.loo_error)
    np.testing.assert_allclose(loo32, loo64, rtol=2e-5)
    coef32, coef64 = np.asarray(r32.coef, np.float64), np.asarray(r64.coef)
    np.testing.assert_allclose(coef32, coef64, rtol=1e-3, atol=1e-4)


def test_float32_cancellation_small_residuals():
    """Nearly noiseless targets and a small l2: LOO drops by orders of magnitude in a few steps.

    The float32 LOO values must still track float64 (relative), and the float32 picks must be
    greedy-optimal in exact arithmetic up to float32 accuracy.
    """
    rng = np.random.default_rng(8)
    n, d, T = 40, 15, 3
    X = rng.normal(size=(n, d))
    Y = X[:, [2, 9, 13]] @ rng.normal(size=(3, T)) + 1e-3 * rng.normal(size=(n, T))
    k = 6
    r64 = greedy_rls(X, Y, k, l2=1e-3)
    r32 = greedy_rls(X.astype(np.float32), Y.astype(np.float32), k, l2=1e-3)
    loo64 = np.asarray(r64.loo_error)
    assert loo64[2] < 1e-4 * loo64[0]  # the regime where g − u⊙C and A − u(xᵀA) cancel
    np.testing.assert_array_equal(np.asarray(r32.selected)[:3], np.asarray(r64.selected)[:3])
    np.testing.assert_allclose(np.asarray(r32.loo_error, np.float64)[:3], loo64[:3], rtol=2e-2)
    # Later picks compete at the noise floor: check them against the oracle, not against r64.
    sel = np.asarray(r32.selected).tolist()
    for t in range(3, k):
        scores = ref.candidate_scores(X, Y, sel[:t], 1e-3, 0.0)
        assert scores[sel[t]] <= scores.min() * (1 + 1e-2)


@pytest.mark.parametrize("T, chunk", [(1, 1), (1, 7), (3, 4), (3, 15)])
def test_chunked_equals_unchunked(T, chunk):
    X, Y = _problem(T=T, seed=9)
    full = greedy_rls(X, Y, 6, l2=0.4, bias=1.0, chunk_size=None)
    part = greedy_rls(X, Y, 6, l2=0.4, bias=1.0, chunk_size=chunk)
    np.testing.assert_array_equal(full.selected, part.selected)
    np.testing.assert_allclose(np.asarray(part.loo_error), np.asarray(full.loo_error), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(part.coef), np.asarray(full.coef), rtol=1e-12)


def test_chunked_float32_equals_unchunked():
    X, Y = _problem(T=3, seed=10)
    X, Y = X.astype(np.float32), Y.astype(np.float32)
    full = greedy_rls(X, Y, 6)
    part = greedy_rls(X, Y, 6, chunk_size=5)
    np.testing.assert_array_equal(full.selected, part.selected)
    np.testing.assert_allclose(np.asarray(part.loo_error), np.asarray(full.loo_error), rtol=1e-6)


@pytest.mark.parametrize("n_recheck", [0, 1, 8])
def test_screening_then_exact_recheck(n_recheck):
    X, Y = _problem(T=3, seed=11)
    res = greedy_rls(X, Y, 6, l2=0.9, n_recheck=n_recheck)
    S, loo = ref.greedy_rls_naive(X, Y, 6, 0.9, 0.0)
    assert np.asarray(res.selected).tolist() == S
    np.testing.assert_allclose(np.asarray(res.loo_error), loo, rtol=1e-9)


# ----------------------------------------------------------------------------------------------
# degenerate data


def test_zero_and_constant_columns():
    X, Y = _problem(T=3, seed=12)
    X[:, 0] = 0.0  # adding it changes nothing: its LOO equals the current model's
    X[:, 5] = 3.0  # a constant column acts like an (extra) intercept
    res = greedy_rls(X, Y, 6, l2=0.6)
    _assert_path_is_greedy(X, Y, res, 0.6, 0.0)
    assert 5 in np.asarray(res.selected).tolist()  # targets have mean 1: the constant helps
    # The zero column's score is exactly the LOO error of the model before the step.
    assert not np.isnan(np.asarray(res.loo_error)).any()
    Z = ref.design(X, [], 0.0)
    assert Z.shape == (40, 0)
    e0 = ref.ridge_loo_mse(Z, Y, 0.6)
    np.testing.assert_allclose(ref.candidate_scores(X, Y, [], 0.6, 0.0)[0], e0)


def test_duplicated_columns_and_k_equals_d():
    X, Y = _problem(n=30, d=8, T=2, seed=13)
    X = np.concatenate([X, X[:, [1, 4]]], axis=1)  # features 8, 9 duplicate 1, 4
    res = greedy_rls(X, Y, X.shape[1], l2=0.5, bias=1.0)
    sel = np.asarray(res.selected).tolist()
    assert sorted(sel) == list(range(X.shape[1]))  # k == d: every feature exactly once
    _assert_path_is_greedy(X, Y, res, 0.5, 1.0, rtol=1e-8)
    # Between exact duplicates the lower index is taken first (ties go to the lowest index).
    assert sel.index(1) < sel.index(8) and sel.index(4) < sel.index(9)


def test_all_zero_design_keeps_loo_of_empty_model():
    X = np.zeros((10, 3))
    Y = np.random.default_rng(14).normal(size=(10, 2))
    res = greedy_rls(X, Y, 3, l2=2.0, bias=0.0)
    assert np.asarray(res.selected).tolist() == [0, 1, 2]
    # G = I/λ throughout, so the LOO residual is y itself.
    np.testing.assert_allclose(np.asarray(res.loo_error), np.mean(Y**2))
    np.testing.assert_array_equal(np.asarray(res.coef), 0.0)


def test_breakdown_is_flagged_not_silent():
    """float32 with l2 = 1e-30: 1/λ ≈ 1e30 overflows C⊙C, so the updates lose all precision.

    That must show as status 1 (and NaN LOO values), never as plausible numbers with status 0.
    """
    rng = np.random.default_rng(15)
    X = rng.normal(size=(4, 8)).astype(np.float32)
    Y = rng.normal(size=(4,)).astype(np.float32)
    res = greedy_rls(X, Y, 8, l2=1e-30)
    assert sorted(np.asarray(res.selected).tolist()) == list(range(8))  # still a permutation
    assert int(res.status) == 1
    assert np.isnan(np.asarray(res.loo_error)).any()
    with pytest.raises(FloatingPointError, match="increase l2"):
        rls_raise_for_status(res)
    ok = greedy_rls(X, Y, 8, l2=1.0)
    assert int(ok.status) == 0 and rls_raise_for_status(ok) is ok


# ----------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(k=16), ValueError, "exceeds the number of features"),
        (dict(k=0), ValueError, "k must be >= 1"),
        (dict(k=2.0), TypeError, "k must be an integer"),
        (dict(l2=0.0), ValueError, "l2 must be >"),
        (dict(l2=-1.0), ValueError, "l2 must be >"),
        (dict(l2=float("nan")), ValueError, "l2 must be finite"),
        (dict(bias=-0.1), ValueError, "bias must be >="),
        (dict(chunk_size=0), ValueError, "chunk_size must be >= 1"),
        (dict(n_recheck=-1), ValueError, "n_recheck must be >= 0"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    X, Y = _problem()
    args = dict(k=3)
    args.update(kwargs)
    k = args.pop("k")
    with pytest.raises(exc, match=match):
        greedy_rls(X, Y, k, **args)


def test_bad_arrays():
    X, Y = _problem()
    Xn = X.copy()
    Xn[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or Inf"):
        greedy_rls(Xn, Y, 3)
    Yi = Y.copy()
    Yi[0, 0] = np.inf
    with pytest.raises(ValueError, match="NaN or Inf"):
        greedy_rls(X, Yi, 3)
    with pytest.raises(ValueError, match="rows"):
        greedy_rls(X, Y[:-1], 3)
    with pytest.raises(ValueError, match="2-D"):
        greedy_rls(X[:, 0], Y, 1)
    with pytest.raises(ValueError, match="1-D"):
        greedy_rls(X, Y[:, :, None], 1)
    with pytest.raises(TypeError, match="numeric"):
        greedy_rls(np.array([["a", "b"], ["c", "d"]]), np.zeros(2), 1)
    res = greedy_rls(X, Y, 6)
    with pytest.raises(ValueError, match="columns"):
        rls_predict(res, X[:, :5])
    with pytest.raises(ValueError, match="step must be <= 6"):
        rls_predict(res, X, step=7)
    with pytest.raises(TypeError, match="RLSResult"):
        rls_predict_path((1, 2), X)


# ----------------------------------------------------------------------------------------------
# JAX plumbing


def test_eval_shape_and_jax_array_input():
    X, Y = _problem(T=3)
    Xj, Yj = jnp.asarray(X), jnp.asarray(Y)
    res = greedy_rls(Xj, Yj, 6)
    assert isinstance(res, RLSResult)
    ref_res = greedy_rls(X, Y, 6)
    np.testing.assert_array_equal(res.selected, ref_res.selected)
    # Validation needs concrete values, so shape inference goes through the jitted core.
    one = jnp.ones((), Xj.dtype)
    shapes = jax.eval_shape(
        lambda x, y: _greedy_rls_run(x, y, one, one, k=6, chunk=15, n_recheck=8), Xj, Yj
    )
    assert shapes.coef_path.shape == (6, 6, 3) and shapes.selected.shape == (6,)


def test_row_sharded_input_matches_unsharded():
    """Run in a fresh process with 4 fake CPU devices: rows of X/Y split over a mesh."""
    code = textwrap.dedent(
        """
        import os
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
        import jax
        jax.config.update("jax_enable_x64", True)
        import numpy as np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        from jaxselect.greedy.rls import greedy_rls
        rng = np.random.default_rng(0)
        X = rng.normal(size=(64, 20))
        Y = X[:, [2, 5]] @ rng.normal(size=(2, 3)) + rng.normal(size=(64, 3))
        mesh = Mesh(np.array(jax.devices()), ("rows",))
        Xs = jax.device_put(X, NamedSharding(mesh, P("rows", None)))
        Ys = jax.device_put(Y, NamedSharding(mesh, P("rows", None)))
        assert len(Xs.sharding.device_set) == 4
        a = greedy_rls(Xs, Ys, 6, l2=0.5, bias=1.0)
        b = greedy_rls(X, Y, 6, l2=0.5, bias=1.0)
        np.testing.assert_array_equal(np.asarray(a.selected), np.asarray(b.selected))
        np.testing.assert_allclose(np.asarray(a.loo_error), np.asarray(b.loo_error), rtol=1e-10)
        np.testing.assert_allclose(np.asarray(a.coef), np.asarray(b.coef), rtol=1e-9, atol=1e-12)
        print("ok")
        """
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("ok")


@settings(max_examples=6, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    T=st.integers(1, 3),
    l2=st.sampled_from([0.05, 1.0, 20.0]),
    bias=st.sampled_from([0.0, 1.0]),
)
def test_property_greedy_and_loo_nonnegative(seed, T, l2, bias):
    rng = np.random.default_rng(seed)
    n, d = 12, 6
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 3.0, size=d)
    Y = rng.normal(size=(n, T))
    res = greedy_rls(X, Y, 4, l2=l2, bias=bias)
    assert (np.asarray(res.loo_error) >= 0).all()
    _assert_path_is_greedy(X, Y, res, l2, bias, rtol=1e-8)
