"""Tests for multi-target greedy RLS against a naive refit-every-candidate hat-matrix oracle.

The suite runs in float32 (the default path, no x64); float64 cases switch x64 on locally
(``dtype`` parametrisations enter ``jax.enable_x64()`` for float64). ``l2`` is the library's
penalty on the mean loss: RLScore's regparam r on n samples is ``l2 = r / n`` (the oracle converts).
"""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxselect as js
import reference_rls as ref
from compile_count import count_compiles
from jaxselect.rls import RLSInfo, RLSState, rls_init, rls_problem, rls_step
from jaxselect.rls.selection import (
    RLSResult,
    _solve,
    greedy_rls,
    rls_predict,
    rls_predict_path,
    rls_to_path,
)
from jaxselect.status import ILL_CONDITIONED, NONFINITE

N = 40  # rows of the default problem; l2 values below are RLScore regparams divided by N
DTYPES = [np.float32, np.float64]


def _problem(n=N, d=15, T=3, seed=0, noise=0.5, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    W = rng.normal(size=(4, T))
    Y = X[:, [1 % d, 4 % d, 7 % d, 11 % d]] @ W + noise * rng.normal(size=(n, T)) + 1.0
    return X.astype(dtype), Y.astype(dtype)


def _precision(dtype):
    """float64 cases run with x64 switched on locally; float32 is the default path."""
    return jax.enable_x64() if np.dtype(dtype) == np.float64 else contextlib.nullcontext()


def _tol(dtype, tight=1e-10, loose=1e-4):
    return tight if np.dtype(dtype) == np.float64 else loose


def _assert_path_is_greedy(X, Y, res, l2, bias, rtol=1e-9):
    """Along the solver's own path, each pick is an oracle minimiser and its LOO value matches.

    Robust to exact ties (duplicated columns), where any minimiser is a correct greedy pick.
    """
    sel = [int(i) for i in np.asarray(res.selected)]
    assert len(set(sel)) == len(sel), "a feature was selected twice"
    loo = np.asarray(res.loo_error, dtype=np.float64)
    for t, b in enumerate(sel):
        scores = ref.candidate_scores(X, Y, sel[:t], l2, bias)
        assert np.isfinite(scores[b]), f"step {t} picked a taken or constant column {b}"
        np.testing.assert_allclose(loo[t], scores[b], rtol=rtol)
        assert scores[b] <= scores.min() * (1 + rtol) + 1e-300


# ----------------------------------------------------------------------------------------------
# exactness against the naive wrapper


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("T, bias", [(1, 0.0), (1, 1.5), (3, 0.0), (3, 1.5)])
def test_same_picks_and_loo_as_naive_refit(T, bias, dtype):
    X, Y = _problem(T=T, seed=T, dtype=dtype)
    l2 = 0.7 / N
    with _precision(dtype):
        res = greedy_rls(X, Y, 6, l2=l2, bias=bias)
    assert res.loo_error.dtype == dtype and res.coef.dtype == dtype
    assert res.selected.dtype == jnp.int32 and int(res.status) == 0
    S, loo = ref.greedy_rls_naive(X, Y, 6, l2, bias)
    assert np.asarray(res.selected).tolist() == S
    np.testing.assert_allclose(np.asarray(res.loo_error, np.float64), loo, rtol=_tol(dtype, 1e-10, 2e-5))


def test_disable_jit_matches_jit_and_oracle():
    """Eager execution (T = 2: screening, exact re-check and the deferred updates) equals jit."""
    X, Y = _problem(n=12, d=6, T=2, seed=5, dtype=np.float32)
    l2 = 0.3 / 12
    a = greedy_rls(X, Y, 2, l2=l2, bias=1.0)
    with jax.disable_jit():
        b = greedy_rls(X, Y, 2, l2=l2, bias=1.0)
    np.testing.assert_array_equal(a.selected, b.selected)
    for x, y in zip(a, b):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=2e-5, atol=1e-6)
    S, loo = ref.greedy_rls_naive(X, Y, 2, l2, 1.0)
    assert np.asarray(b.selected).tolist() == S
    np.testing.assert_allclose(np.asarray(b.loo_error, np.float64), loo, rtol=2e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [0.0, 2.0])
def test_coefficients_of_every_prefix_are_ridge_refits(bias, dtype):
    X, Y = _problem(T=3, seed=2, dtype=dtype)
    l2 = 0.5 / N
    with _precision(dtype):
        res = jax.tree.map(np.asarray, greedy_rls(X, Y, 6, l2=l2, bias=bias))
    sel = res.selected.tolist()
    assert res.coef_path.shape == (6, 6, 3) and res.intercept_path.shape == (6, 3)
    rtol, atol = _tol(dtype, 1e-9, 1e-4), _tol(dtype, 1e-12, 1e-5)
    for t in range(6):
        W, b = ref.ridge_fit(X, Y, sel[: t + 1], l2, bias)
        np.testing.assert_allclose(np.asarray(res.coef_path[t, : t + 1], np.float64), W, rtol=rtol, atol=atol)
        np.testing.assert_array_equal(np.asarray(res.coef_path[t, t + 1 :]), 0.0)
        np.testing.assert_allclose(np.asarray(res.intercept_path[t], np.float64), b, rtol=rtol, atol=atol)
    dense = np.zeros((X.shape[1], 3))
    dense[sel] = np.asarray(res.coef_path[-1])
    np.testing.assert_array_equal(np.asarray(res.coef), dense.astype(dtype))
    np.testing.assert_array_equal(np.asarray(res.intercept), np.asarray(res.intercept_path[-1]))


def test_l2_is_the_mean_loss_penalty(x64):
    """w minimises (1/2n)‖Y − X_S w‖² + (l2/2)‖w‖²: gradient zero at the returned prefix models."""
    X, Y = _problem(T=2, seed=30)
    l2 = 0.05
    res = greedy_rls(X, Y, 4, l2=l2)
    sel = np.asarray(res.selected)
    coef_path = np.asarray(res.coef_path)
    for t in range(4):
        Z, W = X[:, sel[: t + 1]], coef_path[t, : t + 1]
        grad = -Z.T @ (Y - Z @ W) / N + l2 * W
        np.testing.assert_allclose(grad, 0.0, atol=1e-12)


def test_bias_semantics_match_rlscore_constant_feature(x64):
    """bias > 0 = a regularised constant column √bias; its effect is the intercept bias·1ᵀA."""
    X, Y = _problem(T=3, seed=3)
    Y = Y + 5.0  # a large offset makes the intercept matter
    l2 = 1.0 / N
    res0 = greedy_rls(X, Y, 6, l2=l2, bias=0.0)
    np.testing.assert_array_equal(np.asarray(res0.intercept_path), 0.0)
    np.testing.assert_array_equal(np.asarray(res0.null_intercept), 0.0)
    np.testing.assert_allclose(float(res0.null_loo_error), np.mean(Y**2), rtol=1e-12)
    res = greedy_rls(X, Y, 6, l2=l2, bias=4.0)
    sel = np.asarray(res.selected).tolist()
    W, b = ref.ridge_fit(X, Y, sel, l2, 4.0)
    Z = ref.design(X, sel, 4.0)
    np.testing.assert_allclose(
        np.asarray(rls_predict(res, X)), Z @ np.linalg.solve(Z.T @ Z + N * l2 * np.eye(Z.shape[1]), Z.T @ Y), rtol=1e-9
    )
    np.testing.assert_allclose(np.asarray(res.intercept), b, rtol=1e-9)
    # The feature-less model: ridge on the bias column alone, intercept bias·mean(Y)/(bias + l2).
    np.testing.assert_allclose(np.asarray(res.null_intercept), 4.0 * Y.mean(0) / (4.0 + l2), rtol=1e-12)
    np.testing.assert_allclose(float(res.null_loo_error), ref.ridge_loo_mse(ref.design(X, [], 4.0), Y, l2), rtol=1e-10)
    # With the intercept the LOO error on offset targets is far lower than without.
    assert float(np.asarray(res.loo_error)[-1]) < 0.5 * float(np.asarray(res0.loo_error)[-1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_predict_and_predict_path(dtype):
    X, Y = _problem(T=3, seed=4, dtype=dtype)
    Xte, _ = _problem(n=9, T=3, seed=40, dtype=dtype)
    l2 = 0.5 / N
    with _precision(dtype):
        res = greedy_rls(X, Y, 6, l2=l2, bias=1.0)
        P = np.asarray(rls_predict_path(res, Xte))
        steps = [np.asarray(rls_predict(res, Xte, step=t + 1)) for t in range(6)]
        last = np.asarray(rls_predict(res, Xte))
        dense = Xte @ np.asarray(res.coef) + np.asarray(res.intercept)[None, :]
    assert P.shape == (6, 9, 3) and P.dtype == dtype
    sel = np.asarray(res.selected).tolist()
    rtol, atol = _tol(dtype, 1e-9, 1e-4), _tol(dtype, 1e-12, 1e-4)
    for t in range(6):
        W, b = ref.ridge_fit(X, Y, sel[: t + 1], l2, 1.0)
        expect = Xte[:, sel[: t + 1]].astype(np.float64) @ W + b
        np.testing.assert_allclose(P[t], expect, rtol=rtol, atol=atol)
        np.testing.assert_allclose(steps[t], P[t], rtol=_tol(dtype, 1e-12, 1e-5), atol=_tol(dtype, 1e-14, 1e-5))
    np.testing.assert_allclose(last, P[-1], rtol=_tol(dtype, 1e-12, 1e-5), atol=_tol(dtype, 1e-14, 1e-5))
    np.testing.assert_allclose(dense, P[-1], rtol=_tol(dtype, 1e-9, 1e-5), atol=_tol(dtype, 1e-12, 1e-5))


def test_one_dimensional_y_drops_target_axis_and_matches_2d():
    X, Y = _problem(T=1, seed=6, dtype=np.float32)
    r1 = greedy_rls(X, Y[:, 0], 6, l2=0.02, bias=1.0)
    r2 = greedy_rls(X, Y, 6, l2=0.02, bias=1.0)
    assert r1.coef.shape == (15,) and r1.intercept.shape == () and r1.null_intercept.shape == ()
    assert r1.coef_path.shape == (6, 6) and r1.intercept_path.shape == (6,)
    assert r2.null_intercept.shape == (1,)
    np.testing.assert_array_equal(r1.selected, r2.selected)
    np.testing.assert_allclose(np.asarray(r1.coef), np.asarray(r2.coef)[:, 0])
    p1 = rls_predict(r1, X)
    assert p1.shape == (40,)
    np.testing.assert_allclose(np.asarray(p1), np.asarray(rls_predict(r2, X))[:, 0], rtol=1e-6)
    assert rls_predict_path(r1, X).shape == (6, 40)
    assert rls_predict(r1, X[:1]).shape == (1,)  # predictions accept a single row


def test_same_picks_as_rlscore_algorithm(x64):
    """RLScore's GreedyRLS (dual Sherman–Morrison updates, Pahikkala et al. 2010) as an in-repo oracle:
    its PyPI release does not build on current Python, so ``reference_rls.greedy_rls_dual`` is the
    algorithm written from the paper, independent of the naive refit and of the library's code."""
    X, Y = _problem(T=3, seed=21)
    X[:, 5] = 2.0  # a constant column: never a candidate
    for bias in (0.0, 1.0):
        theirs, performances = ref.greedy_rls_dual(X, Y, 6, 0.7 / N, bias)  # regparam 0.7 = n·l2
        naive, _ = ref.greedy_rls_naive(X, Y, 6, 0.7 / N, bias)
        assert theirs == naive  # the two oracles agree with each other
        ours = greedy_rls(X, Y, 6, l2=0.7 / N, bias=bias)
        assert np.asarray(ours.selected).tolist() == theirs and 5 not in theirs
        np.testing.assert_allclose(np.asarray(ours.loo_error), performances, rtol=1e-8)


# ----------------------------------------------------------------------------------------------
# anytime composition: rls_to_path


@pytest.mark.parametrize("T, bias", [(1, 0.0), (3, 2.0)])
def test_to_path_predictions_equal_rls_predictions(T, bias):
    X, Y = _problem(T=T, seed=50, dtype=np.float32)
    y = Y[:, 0] if T == 1 else Y  # T = 1 as a 1-D y
    Xte, _ = _problem(n=7, T=T, seed=51, dtype=np.float32)
    res = greedy_rls(X, y, 5, l2=0.01, bias=bias)
    path = rls_to_path(res)
    assert isinstance(path, js.SelectionPath)
    assert path.coef.shape == (5, 15, T) and path.intercept.shape == (5, T) and path.null_intercept.shape == (T,)
    np.testing.assert_array_equal(np.asarray(path.order), np.asarray(res.selected))
    np.testing.assert_array_equal(np.asarray(path.cum_cost), np.arange(1, 6, dtype=np.float32))
    assert path.cum_cost.dtype == jnp.float32 and path.coef.dtype == jnp.float32
    assert int(path.status) == int(res.status) == 0
    assert int(path.link) == js.path.LINKS.index("identity")
    loo = np.asarray(res.loo_error, np.float64)
    np.testing.assert_allclose(np.asarray(path.objective), 1 - loo / float(res.null_loo_error), rtol=1e-5)
    assert np.all(np.asarray(path.objective) > 0)  # every prefix beats the feature-less model here
    # Every prefix: SelectionPath predictions equal rls_predict_path.
    Pp = np.einsum("md,jdt->jmt", Xte, np.asarray(path.coef)) + np.asarray(path.intercept)[:, None, :]
    Pr = np.asarray(rls_predict_path(res, Xte)).reshape(5, 7, T)
    np.testing.assert_allclose(Pp, Pr, rtol=1e-5, atol=1e-5)
    # At budget b (a count: unit costs) js.predict uses the first b features, as rls_predict(step=b).
    for b in range(1, 6):
        np.testing.assert_allclose(
            np.asarray(js.predict(path, Xte, budget=b)), np.asarray(rls_predict(res, Xte, step=b)), rtol=1e-5, atol=1e-5
        )
    # Below the first unit: the feature-less model (0 without bias, the bias-only ridge with it).
    null = np.asarray(js.predict(path, Xte, budget=0.5)).reshape(7, T)
    np.testing.assert_allclose(null, np.broadcast_to(np.asarray(res.null_intercept).reshape(1, T), (7, T)), rtol=1e-6)
    if bias == 0.0:
        np.testing.assert_array_equal(null, 0.0)
    else:
        mean = Y.mean(0).astype(np.float64)
        np.testing.assert_allclose(null[0], bias * mean / (bias + 0.01), rtol=1e-4)


def test_to_path_is_traceable_and_keeps_status():
    X, Y = _problem(T=2, seed=52, dtype=np.float32)
    res = greedy_rls(X, Y, 3, l2=0.01)
    a = rls_to_path(res)
    b = jax.jit(rls_to_path)(res)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    bad = rls_to_path(res._replace(status=jnp.int32(ILL_CONDITIONED)))
    with pytest.raises(js.SolverError, match="ill-conditioned"):
        js.raise_for_status(bad)
    with pytest.raises(TypeError, match="RLSResult"):
        rls_to_path(a)


# ----------------------------------------------------------------------------------------------
# precision, chunking, screening


def test_float32_default_close_to_float64():
    X, Y = _problem(T=3, seed=7)
    with jax.enable_x64():
        r64 = greedy_rls(X, Y, 6, l2=0.5 / N, bias=1.0)
    r32 = greedy_rls(X, Y, 6, l2=0.5 / N, bias=1.0)  # float64 numpy input: float32 without x64
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
    k, l2 = 6, 1e-3 / n
    with jax.enable_x64():
        r64 = greedy_rls(X, Y, k, l2=l2)
    r32 = greedy_rls(X.astype(np.float32), Y.astype(np.float32), k, l2=l2)
    loo64 = np.asarray(r64.loo_error)
    assert loo64[2] < 1e-4 * loo64[0]  # the regime where g − u⊙C and A − u(xᵀA) cancel
    np.testing.assert_array_equal(np.asarray(r32.selected)[:3], np.asarray(r64.selected)[:3])
    np.testing.assert_allclose(np.asarray(r32.loo_error, np.float64)[:3], loo64[:3], rtol=2e-2)
    # Later picks compete at the noise floor: check them against the oracle, not against r64.
    sel = np.asarray(r32.selected).tolist()
    for t in range(3, k):
        scores = ref.candidate_scores(X, Y, sel[:t], l2, 0.0)
        assert scores[sel[t]] <= scores.min() * (1 + 1e-2)


@pytest.mark.parametrize("T, chunk", [(1, 1), (1, 7), (3, 4), (3, 15)])
def test_chunked_equals_unchunked(T, chunk, x64):
    X, Y = _problem(T=T, seed=9)
    full = greedy_rls(X, Y, 6, l2=0.01, bias=1.0, chunk_size=None)
    part = greedy_rls(X, Y, 6, l2=0.01, bias=1.0, chunk_size=chunk)
    np.testing.assert_array_equal(full.selected, part.selected)
    np.testing.assert_allclose(np.asarray(part.loo_error), np.asarray(full.loo_error), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(part.coef), np.asarray(full.coef), rtol=1e-12)


def test_chunked_float32_equals_unchunked():
    X, Y = _problem(T=3, seed=10, dtype=np.float32)
    full = greedy_rls(X, Y, 6, l2=1.0 / N)
    part = greedy_rls(X, Y, 6, l2=1.0 / N, chunk_size=5)
    np.testing.assert_array_equal(full.selected, part.selected)
    np.testing.assert_allclose(np.asarray(part.loo_error), np.asarray(full.loo_error), rtol=1e-6)


@pytest.mark.parametrize("n_recheck", [0, 1, 8])
def test_screening_then_exact_recheck(n_recheck, x64):
    X, Y = _problem(T=3, seed=11)
    res = greedy_rls(X, Y, 6, l2=0.9 / N, n_recheck=n_recheck)
    S, loo = ref.greedy_rls_naive(X, Y, 6, 0.9 / N, 0.0)
    assert np.asarray(res.selected).tolist() == S
    np.testing.assert_allclose(np.asarray(res.loo_error), loo, rtol=1e-9)


# ----------------------------------------------------------------------------------------------
# constant columns and degenerate data


@pytest.mark.parametrize("dtype", DTYPES)
def test_constant_columns_are_never_selected(dtype):
    X, Y = _problem(T=3, seed=12, dtype=dtype)
    X[:, 0] = 0.0  # an all-zero column
    X[:, 5] = 3.0  # a constant column would act like an (extra) intercept: inert instead
    l2 = 0.6 / N
    with _precision(dtype):
        res = greedy_rls(X, Y, 13, l2=l2)  # every non-constant column
    sel = np.asarray(res.selected).tolist()
    assert sorted(sel) == [i for i in range(15) if i not in (0, 5)]
    assert np.asarray(res.coef)[[0, 5]].tolist() == [[0.0] * 3] * 2
    _assert_path_is_greedy(X, Y, res, l2, 0.0, rtol=_tol(dtype, 1e-9, 1e-4))
    # k above the 13 non-constant columns: a UserWarning, all 13 kept (issue 37: the one k rule)
    with pytest.warns(UserWarning, match=r"greedy_rls: k=14 is larger than the number of usable features of X \(13; "):
        with _precision(dtype):
            clipped = greedy_rls(X, Y, 14, l2=l2)
    assert np.asarray(clipped.selected).tolist() == sel
    np.testing.assert_array_equal(np.asarray(clipped.coef), np.asarray(res.coef))
    with pytest.raises(ValueError, match=r"constant column\(s\) \[0, 5\]"):
        greedy_rls(X, Y, 3, l2=l2, constant_columns="raise")
    with pytest.raises(ValueError, match="constant_columns"):
        greedy_rls(X, Y, 3, constant_columns="drop")


def test_all_constant_design_raises():
    X = np.zeros((10, 3), np.float32)
    X[:, 1] = 2.0
    Y = np.random.default_rng(14).normal(size=(10, 2))
    with pytest.raises(ValueError, match="every column of X is constant"):  # the front door's rule
        greedy_rls(X, Y, 1)


def test_duplicated_columns_and_k_equals_d(x64):
    X, Y = _problem(n=30, d=8, T=2, seed=13)
    X = np.concatenate([X, X[:, [1, 4]]], axis=1)  # features 8, 9 duplicate 1, 4
    res = greedy_rls(X, Y, X.shape[1], l2=0.5 / 30, bias=1.0)
    sel = np.asarray(res.selected).tolist()
    assert sorted(sel) == list(range(X.shape[1]))  # k == d: every feature exactly once
    _assert_path_is_greedy(X, Y, res, 0.5 / 30, 1.0, rtol=1e-8)
    # Between exact duplicates the lower index is taken first (ties go to the lowest index).
    assert sel.index(1) < sel.index(8) and sel.index(4) < sel.index(9)


def test_breakdown_is_flagged_not_silent():
    """float32 with a tiny l2: 1/(n·l2) ≈ 1e30 makes the rank-one updates lose all precision.

    That must show as a non-zero status (never plausible numbers with status 0); with 1/(n·l2)
    beyond the float32 range the state overflows and NONFINITE is set as well.
    """
    rng = np.random.default_rng(15)
    X = rng.normal(size=(4, 8)).astype(np.float32)
    Y = rng.normal(size=(4,)).astype(np.float32)
    res = greedy_rls(X, Y, 8, l2=2.5e-31)
    assert sorted(np.asarray(res.selected).tolist()) == list(range(8))  # still a permutation
    assert int(res.status) == ILL_CONDITIONED
    assert np.isnan(np.asarray(res.loo_error)).any()
    with pytest.raises(js.SolverError, match="ill-conditioned") as info:
        js.raise_for_status(res)
    assert info.value.status == ILL_CONDITIONED
    over = greedy_rls(X, Y, 8, l2=1e-38)
    assert int(over.status) == ILL_CONDITIONED | NONFINITE
    with pytest.raises(js.SolverError, match="non-finite"):
        js.raise_for_status(over)
    ok = greedy_rls(X, Y, 8, l2=0.25)
    assert int(ok.status) == 0 and js.raise_for_status(ok) is ok


def test_short_repr():
    X, Y = _problem(T=2, dtype=np.float32)
    text = repr(greedy_rls(X, Y, 3, l2=0.01))
    assert text.startswith("RLSResult(selected=int32[3], loo_error=float32[3], coef=float32[15, 2]")
    assert "status=0" in text and len(text) < 400


# ----------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(k=0), ValueError, "k must be >= 1"),
        (dict(k=2.0), TypeError, "k must be an integer"),
        (dict(l2=0.0), ValueError, "l2 must be >"),
        (dict(l2=-1.0), ValueError, "l2 must be >"),
        (dict(l2=float("nan")), ValueError, "l2 must be finite"),
        (dict(l2=np.ones(2)), TypeError, "l2 must be a real scalar"),
        (dict(bias=-0.1), ValueError, "bias must be >="),
        (dict(chunk_size=0), ValueError, "chunk_size must be >= 1"),
        (dict(n_recheck=-1), ValueError, "n_recheck must be >= 0"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    X, Y = _problem(dtype=np.float32)
    args = dict(k=3)
    args.update(kwargs)
    k = args.pop("k")
    with pytest.raises(exc, match=match):
        greedy_rls(X, Y, k, **args)


def test_bad_arrays():
    X, Y = _problem(dtype=np.float32)
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
    with pytest.raises(ValueError, match=r"2-D.*reshape\(1, -1\) for a single sample"):
        greedy_rls(X[:, 0], Y, 1)
    with pytest.raises(ValueError, match="at least 2 rows"):
        greedy_rls(X[:1], Y[:1], 1)
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
# JAX plumbing: user's jit, vmap over l2, no recompilation, advanced API


def test_inside_user_jit_and_no_recompilation():
    X, Y = _problem(T=2, seed=16, dtype=np.float32)
    eager = greedy_rls(X, Y, 4, l2=0.01, bias=1.0)

    @jax.jit
    def fit(X, Y):  # k static by closure, X and Y traced
        return greedy_rls(X, Y, 4, l2=0.01, bias=1.0)

    traced = fit(X, Y)
    np.testing.assert_array_equal(np.asarray(traced.selected), np.asarray(eager.selected))
    for a, b in zip(traced, eager):  # the eager call's program compiles the library's quick way
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
    with count_compiles() as compiles:
        again = fit(X.copy(), Y.copy())  # fresh, equal arrays
        eager2 = greedy_rls(X.copy(), Y.copy(), 4, l2=0.01, bias=1.0)
    assert compiles[0] == 0
    np.testing.assert_array_equal(np.asarray(again.selected), np.asarray(eager2.selected))


def test_vmap_over_traced_l2():
    X, Y = _problem(T=2, seed=17, dtype=np.float32)
    grid = jnp.asarray([0.003, 0.03, 3.0], jnp.float32)
    batched = jax.vmap(lambda l2: greedy_rls(X, Y, 3, l2=l2))(grid)
    for i, l2 in enumerate(grid.tolist()):
        one = greedy_rls(X, Y, 3, l2=l2)
        np.testing.assert_array_equal(np.asarray(batched.selected)[i], np.asarray(one.selected))
        np.testing.assert_allclose(np.asarray(batched.loo_error)[i], np.asarray(one.loo_error), rtol=1e-5)


def test_traced_data_with_too_few_selectable_columns_selects_nothing():
    """Under a user's jit k cannot be checked against the constant columns: the extra steps are
    no-ops (selected −1, model unchanged), and predictions / paths handle them."""
    X, Y = _problem(d=6, T=2, seed=18, dtype=np.float32)
    X[:, [1, 3]] = 1.5  # 4 selectable columns
    res = jax.jit(lambda X, Y: greedy_rls(X, Y, 6, l2=0.01))(X, Y)
    sel = np.asarray(res.selected)
    assert sorted(sel[:4].tolist()) == [0, 2, 4, 5] and sel[4:].tolist() == [-1, -1]
    coef_path, loo = np.asarray(res.coef_path), np.asarray(res.loo_error)
    np.testing.assert_array_equal(coef_path[4:, 4:], 0.0)
    np.testing.assert_array_equal(coef_path[5], coef_path[3])
    np.testing.assert_allclose(loo[4:], float(loo[3]), rtol=1e-6)
    assert int(res.status) == 0
    np.testing.assert_array_equal(np.asarray(res.coef)[[1, 3]], 0.0)
    P = np.asarray(rls_predict_path(res, X))
    np.testing.assert_allclose(P[5], P[3], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(rls_predict(res, X, step=6)), P[3], rtol=1e-5, atol=1e-6)
    path = rls_to_path(res)
    assert np.isinf(np.asarray(path.cum_cost)[4:]).all()
    np.testing.assert_allclose(np.asarray(js.predict(path, X, budget=6)), P[3], rtol=1e-5, atol=1e-5)
    coef, b = js.rls_refit(X, Y, res.selected, l2=0.01)  # −1 entries are ignored by the refit
    np.testing.assert_allclose(np.asarray(coef), np.asarray(res.coef), rtol=1e-4, atol=1e-5)


def test_eval_shape_and_jax_array_input():
    X, Y = _problem(T=3, dtype=np.float32)
    Xj, Yj = jnp.asarray(X), jnp.asarray(Y)
    res = greedy_rls(Xj, Yj, 6)
    assert isinstance(res, RLSResult)
    ref_res = greedy_rls(X, Y, 6)
    np.testing.assert_array_equal(res.selected, ref_res.selected)
    shapes = jax.eval_shape(lambda x, y: greedy_rls(x, y, 6), Xj, Yj)
    assert shapes.coef_path.shape == (6, 6, 3) and shapes.selected.shape == (6,)
    one = jnp.ones((), Xj.dtype)
    core = jax.eval_shape(
        lambda x, y: _solve(x, y, jnp.ones(15, bool), one, one, k=6, chunk=15, n_recheck=8), Xj, Yj
    )
    assert core.null_intercept.shape == (3,) and core.status.dtype == jnp.int32


@pytest.mark.parametrize("T", [1, 3])
def test_advanced_api_init_step_scan_equals_driver(T):
    X, Y = _problem(T=T, seed=19, dtype=np.float32)
    res = greedy_rls(X, Y, 5, l2=0.02, bias=1.0, chunk_size=4)

    @jax.jit
    def run(X, Y):
        problem = rls_problem(X, Y, l2=0.02, bias=1.0, chunk_size=4)
        state = rls_init(problem, 5)

        def body(s, _):
            s = rls_step(problem, s)  # the state only; the step's RLSInfo is s.info
            return s, s.info

        return state, jax.lax.scan(body, state, length=5)

    start, (state, info) = run(X, Y)
    assert isinstance(state, RLSState) and isinstance(info, RLSInfo) and isinstance(state.info, RLSInfo)
    # before any step, info is the null model (selected −1, its LOO error and intercept, zero coef)
    assert int(start.info.selected) == -1 and not np.any(np.asarray(start.info.coef))
    np.testing.assert_allclose(np.asarray(start.info.loo_error), np.asarray(res.null_loo_error), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(start.info.intercept), np.asarray(res.null_intercept), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(state.info.selected), np.asarray(info.selected)[-1])
    assert state.CT.shape == (16, N) and int(state.step) == 5
    np.testing.assert_array_equal(np.asarray(info.selected), np.asarray(res.selected))
    # Same algorithm, separately compiled (fusion may round differently in float32).
    np.testing.assert_allclose(np.asarray(info.loo_error), np.asarray(res.loo_error), rtol=1e-5)
    np.testing.assert_allclose(
        np.asarray(info.coef).reshape(res.coef_path.shape), np.asarray(res.coef_path), rtol=2e-5, atol=1e-6
    )
    other = rls_problem(X, Y, l2=0.02, bias=1.0, chunk_size=5)
    assert other.config.chunk == 5 and other.config.n_recheck == 8
    with pytest.raises(ValueError, match="not a multiple"):
        rls_step(other, state)


@settings(max_examples=6, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    T=st.integers(1, 3),
    regparam=st.sampled_from([0.05, 1.0, 20.0]),
    bias=st.sampled_from([0.0, 1.0]),
)
def test_property_greedy_and_loo_nonnegative(seed, T, regparam, bias):
    rng = np.random.default_rng(seed)
    n, d = 12, 6
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 3.0, size=d)
    Y = rng.normal(size=(n, T))
    l2 = regparam / n
    with jax.enable_x64():
        res = greedy_rls(X, Y, 4, l2=l2, bias=bias)
    assert (np.asarray(res.loo_error) >= 0).all()
    _assert_path_is_greedy(X, Y, res, l2, bias, rtol=1e-8)


def test_progress_bar_gives_the_same_result(monkeypatch):
    pytest.importorskip("tqdm")
    from jaxselect import _progress

    monkeypatch.setattr(_progress, "N_UPDATES", 2)
    X, Y = _problem(T=2, seed=23, dtype=np.float32)
    res = greedy_rls(X, Y, 5, l2=0.02)
    updates = []
    monkeypatch.setattr(_progress, "progress_bar", lambda total, desc: _Bar(updates))  # the driver's bar
    chunked = greedy_rls(X, Y, 5, l2=0.02, progress=True)
    assert updates == [3, 2]
    np.testing.assert_array_equal(chunked.selected, res.selected)
    np.testing.assert_allclose(chunked.coef_path, res.coef_path, rtol=1e-6, atol=1e-7)
    assert int(chunked.status) == int(res.status)


class _Bar:
    """A stand-in for tqdm that records the updates."""

    def __init__(self, updates):
        self.updates = updates

    def update(self, n):
        self.updates.append(n)

    def close(self):
        pass


def test_rls_solver_run_by_the_one_driver():
    """greedy RLS is a js.Solver: run(rls_solver(k, ...), rls_problem(...)) is greedy_rls's result
    (2-D target axis), a factory called twice with equal options compiles nothing new, and the
    solver's traits say it stacks its per-step infos (the path)."""
    from jaxselect.rls import rls_solver
    from jaxselect.solver import Solver, run

    X, Y = _problem(T=2, seed=29, dtype=np.float32)
    res = greedy_rls(X, Y, 4, l2=0.02, bias=1.0, chunk_size=5)
    problem = rls_problem(X, Y, l2=0.02, bias=1.0, chunk_size=5)
    solver = rls_solver(4, chunk_size=problem.config.chunk)
    assert isinstance(solver, Solver) and solver.traits.stacks_info and solver.traits.name == "greedy_rls"
    out = run(solver, problem, n_steps=4)
    assert isinstance(out, RLSResult)
    np.testing.assert_array_equal(out.selected, res.selected)
    np.testing.assert_allclose(out.coef_path, res.coef_path, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(out.null_loo_error, res.null_loo_error, rtol=1e-6)
    with count_compiles() as compiles:
        again = run(rls_solver(4, chunk_size=problem.config.chunk), problem, n_steps=4)
        jax.block_until_ready(again)
    assert compiles[0] == 0
    with pytest.raises(ValueError, match="chunk_size"):
        rls_solver(4, chunk_size=0)
