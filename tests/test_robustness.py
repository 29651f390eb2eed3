"""Robustness at the float32 default (issue 17): the issue's nine reproducers as regression tests.

The rule (also checked by ``tests/test_fuzz.py``): a call raises a ValueError/TypeError naming the
argument at fault, or returns finite values, or returns a non-zero ``status``. Where a fix makes
the call work, the test checks the numbers against an independent answer (an exact fit, the
unscaled problem, a float64 computation).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxselect as js
from jaxselect.linalg import floored_cholesky


def _finite(*arrays):
    return all(bool(np.all(np.isfinite(np.asarray(a)))) for a in arrays)


# ------------------------------------------------------------------ 1. exact fits in the sequencing solvers


def test_exact_fit_prefix_stays_finite():
    """Issue reproducer 1: a prefix that fits y exactly (n = 3, groups of 2) gave NaN in float32."""
    g = np.random.default_rng(2)
    X3 = g.normal(size=(3, 4))
    y3 = g.normal(size=3)
    p = js.prepare(X3, y3, [0, 0, 1, 1])
    for solver in (js.cs_omp, js.cs_fr, js.doubling):
        path = solver(p)
        assert _finite(path.objective, path.coef, path.intercept)
        # two centred rows of dof: the first group already interpolates y; the second adds nothing
        assert np.all(np.asarray(path.objective) <= 1.0 + 1e-4)
        pred = js.predict(path, X3, budget=10.0)
        np.testing.assert_allclose(pred, y3, atol=1e-3 * np.abs(y3).max())


def test_exact_fits_over_seeds_are_finite_and_flagged():
    """5–15 % of seeds hit the exact-fit case; none may give NaN, a dependent group is flagged."""
    flagged = 0
    for seed in range(30):
        g = np.random.default_rng(seed)
        X, y = g.normal(size=(3, 4)), g.normal(size=3)
        path = js.cs_fr(js.prepare(X, y, [0, 0, 1, 1]))
        assert _finite(path.objective, path.coef), seed
        flagged += bool(int(path.status) & js.ILL_CONDITIONED)
        np.testing.assert_allclose(js.predict(path, X, budget=10.0), y, atol=1e-3 * np.abs(y).max())
    assert flagged > 0  # the second group is numerically dependent on the first in some seeds


def test_floored_cholesky_matches_cholesky_and_drops_dependent_pivots():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(5, 5))
    A = A @ A.T + 0.5 * np.eye(5)
    L, keep = floored_cholesky(jnp.asarray(A, jnp.float32), jnp.ones(5, bool), jnp.float32(1e-6))
    np.testing.assert_allclose(L, np.linalg.cholesky(A), rtol=1e-4, atol=1e-5)
    assert bool(keep.all())
    # coordinate 2 = coordinate 0 + coordinate 1: its pivot is 0 up to rounding (here slightly negative)
    B = rng.normal(size=(4, 6))
    B[2] = B[0] + B[1]
    S = B @ B.T
    S[2, 2] -= 1e-6
    mask = jnp.asarray([True, True, True, True, False])
    S5 = np.eye(5)
    S5[:4, :4] = S
    L, keep = floored_cholesky(
        jnp.asarray(S5, jnp.float32), mask, jnp.float32(1e-4) * jnp.asarray(np.diag(S5), jnp.float32)
    )
    assert keep.tolist() == [True, True, False, True, False]
    kept = [0, 1, 3]
    np.testing.assert_allclose(np.asarray(L)[np.ix_(kept, kept)], np.linalg.cholesky(S[np.ix_(kept, kept)]), rtol=1e-3)
    np.testing.assert_array_equal(np.asarray(L)[2], np.eye(5)[2])
    np.testing.assert_array_equal(np.asarray(L)[:, 2], np.eye(5)[:, 2])


# ------------------------------------------------------------------ 2. group lasso and the costs' scale


def test_group_lasso_invariant_to_a_common_cost_factor():
    """Issue reproducer 2: convergence and the answer must not depend on a common factor c on the costs."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 20))
    y = X[:, :4] @ np.ones(4) + 0.5 * rng.normal(size=100)
    ids = np.repeat(np.arange(5), 4)
    fits = {}
    for c in (1.0, 100.0, 300.0, 1000.0, 1e-5):
        path = js.group_lasso_path(js.prepare(X, y, js.Groups.from_ids(ids, np.full(5, c))), n_lambdas=20)
        fit = path.info
        assert bool(fit.converged.all()) and int(fit.status) == 0 and int(path.status) == 0, c
        fits[c] = (path, fit)
    ref_path, ref_fit = fits[1.0]
    for c, (path, fit) in fits.items():
        np.testing.assert_array_equal(fit.entry, ref_fit.entry)
        np.testing.assert_array_equal(path.order, ref_path.order)
        np.testing.assert_allclose(fit.raw_coef, ref_fit.raw_coef, atol=1e-5)
        np.testing.assert_allclose(np.asarray(fit.lambdas) * c, ref_fit.lambdas, rtol=1e-5)


# ------------------------------------------------------------------ 3. validated in the dtype the solver uses


def test_costs_checked_in_the_compute_dtype():
    """Issue reproducer 3: costs that underflow/overflow float32 were stored as 0 / inf."""
    with pytest.raises(ValueError, match=r"costs must be >= .*group 0"):
        js.Groups.from_ids([0, 1, 2], [1e-46, 1.0, 1.0])
    with pytest.raises(ValueError, match="costs are too large for float32"):
        js.Groups.from_ids([0, 1, 2], [1.0, 1.0, 1e39])
    with pytest.raises(ValueError, match="costs are too large for float32"):  # the cumulative cost would overflow
        js.Groups.from_ids([0, 1, 2], [3e38, 3e38, 3e38])
    with jax.enable_x64():  # float64 Groups, used with float32 data: checked again when cast
        g64 = js.Groups.from_ids([0, 1], [1.0, 1e39])
    X = np.random.default_rng(0).normal(size=(10, 2)).astype(np.float32)
    with pytest.raises(ValueError, match="costs are too large for float32"):
        js.prepare(X, X[:, 0] + X[:, 1], g64)
    # large but representable costs: cum_cost stays finite, +inf marks only untaken steps
    X3 = np.random.default_rng(1).normal(size=(20, 3))
    path = js.cs_omp(js.prepare(X3, X3[:, 0], js.Groups.from_ids([0, 1, 2], [2e37, 2e37, 2e37])))
    np.testing.assert_allclose(path.cum_cost, [2e37, 4e37, 6e37], rtol=1e-6)


def test_hyper_parameters_checked_in_the_compute_dtype():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = (X[:, 0] > 0).astype(int)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match=r"l2=1e\+39 is too large for float32"):
        js.prepare(X, X[:, 0], l2=1e39)
    with pytest.raises(ValueError, match=r"lam=1e\+39 is too large"):
        js.dwsm_fit(key, X, y, lam=1e39, n_iter=1)
    with pytest.raises(ValueError, match=r"gamma=1e\+39 is too large"):
        js.dwsm_fit(key, X, y, gamma=1e39, related=np.eye(3, dtype=bool), n_iter=1)
    with pytest.raises(ValueError, match=r"l2=1e-46 underflows float32 to 0"):
        js.dwsm_fit(key, X, y, l2=1e-46, n_iter=1)
    with pytest.raises(ValueError, match=r"cost_matrix.*too large for float32.*divide cost_matrix, lam and gamma"):
        js.dwsm_fit(key, X, y, cost_matrix=np.array([[0.0, 1e39], [1.0, 0.0]]), n_iter=1)
    with pytest.raises(ValueError, match=r"(lam|gamma) × total unit cost"):  # each finite, the reward is not
        js.dwsm_fit(key, X, y, lam=1e36, groups=js.Groups.from_ids([0, 1, 2], [1e3, 1e3, 1e3]), n_iter=1)
    with pytest.raises(ValueError, match=r"l2=1e-46 underflows"):
        js.ridge_refit(X, X[:, 0], l2=1e-46)


# ------------------------------------------------------------------ 4./5. the scale of Y and X in prepare


def _scaled_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 20))
    y = X[:, :4] @ np.ones(4) + 0.5 * rng.normal(size=100)
    return X, y


def _rule_prepare(X, y, name):
    """prepare either raises a ValueError naming ``name`` or gives a finite problem and paths."""
    try:
        problem = js.prepare(X, y)
    except ValueError as exc:
        assert name in str(exc)
        return None
    path = js.cs_omp(problem)
    assert _finite(path.objective, path.coef) or int(path.status) != 0
    return path


@pytest.mark.parametrize("factor", [1e20, 1e-30])
def test_target_scale_in_prepare(factor):
    """Issue reproducer 4: prepare(X, y·1e20) gave NaN coefficients, y·1e-30 a NaN objective."""
    X, y = _scaled_data()
    path = _rule_prepare(X, y * factor, "Y")
    if path is not None:  # a moments engine that rescales instead of raising: the same selection
        np.testing.assert_array_equal(path.order, js.cs_omp(js.prepare(X, y)).order)


def test_tiny_x_is_not_taken_for_constant():
    """Issue reproducer 5: X·1e-20 was silently all-constant in prepare, ridge_refit and fsa."""
    X, y = _scaled_data()
    f = 2.0**-66  # ≈ 1.4e-20, a power of two: the standardised problem is exactly the unscaled one
    _rule_prepare(X * f, y, "X")
    coef, b = js.ridge_refit(X * f, y)
    ref_coef, ref_b = js.ridge_refit(X, y)
    np.testing.assert_allclose(np.asarray(coef) * f, ref_coef, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b, ref_b, rtol=1e-5)
    ref = js.fsa(X, y, 4, n_iter=50)
    try:  # FSA's moment-space stages square raw columns: a clear error, or the unscaled answer
        res = js.fsa(X * f, y, 4, n_iter=50)
    except ValueError as exc:
        assert "X column(s)" in str(exc) and "multiply X by a constant" in str(exc)
    else:
        assert int(res.status) == 0 and res.support.tolist() == ref.support.tolist()
        np.testing.assert_allclose(np.asarray(res.coef) * f, ref.coef, rtol=1e-4)
    assert ref.support.tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match=r"X column\(s\) .* vary by as little as"):  # below float32's range
        js.ridge_refit(X * 1e-36, y)


# ------------------------------------------------------------------ 6. huge columns outside prepare


def test_huge_column_in_ridge_refit_and_dwsm():
    """Issue reproducer 6: a 1e30 column gave scale inf and a model at chance."""
    X, y = _scaled_data()
    big = 2.0**100  # ≈ 1.3e30
    Xb = X.copy()
    Xb[:, 0] *= big
    coef, b = js.ridge_refit(Xb, y)
    ref_coef, ref_b = js.ridge_refit(X, y)
    np.testing.assert_allclose(b, ref_b, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(coef[0]) * big, ref_coef[0], rtol=1e-5)
    np.testing.assert_allclose(coef[1:], ref_coef[1:], rtol=1e-5, atol=1e-6)
    rng = np.random.default_rng(1)
    Xc = rng.normal(size=(40, 3))
    yc = (Xc[:, 0] > 0).astype(int)
    Xcb = Xc.copy()
    Xcb[:, 0] *= big
    key = jax.random.key(0)
    pol = js.dwsm_fit(key, Xcb, yc, n_iter=2, states_per_example=2)
    ref = js.dwsm_fit(key, Xc, yc, n_iter=2, states_per_example=2)
    assert int(pol.status) == 0 and _finite(pol.theta, pol.scale)
    np.testing.assert_allclose(np.asarray(pol.scale)[0] / big, ref.scale[0], rtol=1e-6)
    labels, _ = js.predict(pol, Xcb)
    ref_labels, _ = js.predict(ref, Xc)
    np.testing.assert_array_equal(labels, ref_labels)
    assert float(np.mean(np.asarray(labels) == yc)) > 0.8


# ------------------------------------------------------------------ 7. evaluation


def test_evaluation_precision_and_degenerate_curves():
    """Issue reproducer 7: objective_curve in float32, R² of a constant Y, unvalidated curves."""
    X, y = _scaled_data()
    path = js.cs_omp(js.prepare(X, y))
    curve = js.objective_curve(path, X, y * 1e20)
    preds = np.asarray(js.predict(path, X), np.float64)
    taken = np.asarray(path.order) >= 0
    Yb = y * 1e20
    base = np.sum((Yb - float(np.asarray(path.null_intercept)[0])) ** 2)
    expected = [1.0 - np.sum((Yb - p) ** 2) / base for p in preds[taken]]
    assert _finite(curve.value)
    np.testing.assert_allclose(curve.value[1:], expected, rtol=1e-12)
    with pytest.raises(ValueError, match="metric='r2' is undefined for a constant held-out Y"):
        js.objective_curve(path, X, np.ones(len(y)), metric="r2")
    C = js.Curve
    with pytest.raises(ValueError, match="no point with a positive cost"):
        js.timeliness(C(np.array([0.0]), np.array([0.0]), np.array([], int)))
    with pytest.raises(ValueError, match="same length >= 1"):
        js.timeliness(C(np.array([]), np.array([]), np.array([], int)))
    with pytest.raises(ValueError, match="NaN or Inf"):
        js.timeliness(C(np.array([0.0, 1.0]), np.array([0.0, np.nan]), np.array([0])))
    with pytest.raises(ValueError, match="non-decreasing"):
        js.oracle_curve(C(np.array([0.0, 2.0, 1.0]), np.array([0.0, 0.5, 1.0]), np.array([0, 1])))
    with pytest.raises(ValueError, match="final value is negative"):
        js.alpha_stopping_cost(C(np.array([0.0, 1.0]), np.array([0.0, -0.2]), np.array([0])), 0.9)
    # a zero-cost step with zero gain sorts without NaN
    oc = js.oracle_curve(C(np.array([0.0, 0.0, 1.0]), np.array([0.0, 0.0, 0.7]), np.array([0, 1])))
    assert _finite(oc.cost, oc.value)


# ------------------------------------------------------------------ 8./9. errors that name the problem


def test_errors_name_the_argument():
    """Issue reproducers 8 and 9: every bad value is a ValueError/TypeError naming the argument."""
    X, y = _scaled_data()
    path = js.cs_omp(js.prepare(X, y))
    with pytest.raises(ValueError, match="budget must be a scalar cost"):
        js.predict(path, X, budget=jnp.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="Y has 2 target column"):
        js.objective_curve(path, X, np.ones((len(y), 2)))
    with pytest.raises(TypeError, match="l2 must be a real scalar"):
        js.ridge_refit(X, y, l2=np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="support must be a boolean mask"):
        js.ridge_refit(X, y, np.array([True] * 20, dtype=object))
    with pytest.raises(ValueError, match=r"group ids .* got id 1000000000000"):  # was a MemoryError (7 TiB)
        js.Groups.from_ids([0, 10**12])
    with pytest.raises(TypeError, match="predict takes a SelectionPath.*got NoneType"):  # was an AttributeError
        js.predict(None, X)
    with pytest.raises(ValueError, match="X has values up to 4e\\+39, beyond the range of float32"):
        js.ridge_refit(np.full((4, 2), 1e39) * np.arange(1, 5)[:, None], np.arange(4.0))
    with pytest.raises(ValueError, match=r"y must use the labels 0..C-1 .* classes \[2, 3, 4"):  # no 8 GB arange
        js.dwsm_fit(jax.random.key(0), X[:6, :2], np.array([0, 1, 0, 1, 0, 10**9]), n_iter=1)
    # a budget beyond every float: no budget, no OverflowError
    rng = np.random.default_rng(1)
    Xc = rng.normal(size=(40, 3))
    pol = js.dwsm_fit(jax.random.key(0), Xc, (Xc[:, 0] > 0).astype(int), n_iter=2, states_per_example=2, budget=2**40)
    assert int(pol.status) == 0


@pytest.mark.parametrize("X", [None, 3.0])
def test_prepare_rejects_a_0d_X(X):
    """A 0-d X is named (the host-kernel dispatch validates X before reading its shape)."""
    with pytest.raises((TypeError, ValueError), match=r"\bX\b"):
        js.prepare(X, np.ones(3))


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_one_bad_entry_in_a_large_x_is_found(value):
    """XLA's max/min reductions of a large array may skip NaNs: the fused NaN/Inf + scale pass must
    still find one bad entry in the middle of a 3 000 × 700 X, for every solver that uses it."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 700)).astype(np.float32)
    y = X[:, 0].copy()
    X[1500, 350] = value
    labels = (y > 0).astype(int)
    calls = {
        "fsa": lambda: js.fsa(X, y, 2, n_iter=5),
        "greedy_rls": lambda: js.greedy_rls(X, y, 2),
        "ridge_refit": lambda: js.ridge_refit(X, y),
        "rls_refit": lambda: js.rls_refit(X, y, np.array([0])),
        "glm_refit": lambda: js.glm_refit(X, labels),
        "dwsm_fit": lambda: js.dwsm_fit(jax.random.key(0), X, labels, n_iter=1),
        "prepare": lambda: js.prepare(X, y),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match="NaN or Inf"):
            call()
