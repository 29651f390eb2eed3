"""js.predict: one front door for every fitted result, one width/NaN/budget rule, deprecated aliases.

References are computed independently in numpy from the results' fields (or, for the group lasso,
from least squares at a tiny λ); the deprecated aliases must warn and give what js.predict gives.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxselect as js
from jaxselect.status import ILL_CONDITIONED, NONFINITE, NOT_CONVERGED

N, D = 80, 6


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = (rng.normal(size=(N, D)) + rng.normal(size=D)).astype(np.float32)
    y = (1.5 * X[:, 1] - 2.0 * X[:, 4] + 0.5 + 0.1 * rng.normal(size=N)).astype(np.float32)
    return X, y


@pytest.fixture(scope="module")
def fitted():
    """One result of every predictable type, fitted once for the module (small: compile-bound)."""
    X, y = _data()
    labels = (y > np.median(y)).astype(int)
    ids = np.array([0, 0, 1, 2, 3, 3])
    costs = np.array([1.0, 2.0, 0.5, 1.5])
    return {
        "X": X,
        "y": y,
        "labels": labels,
        "path": js.cs_omp(js.prepare(X, y, js.Groups.from_ids(ids, costs))),
        "glm": js.glm_omp(X, labels),
        "rls": js.greedy_rls(X, y, 3, l2=1e-2, bias=1.0),
        "fsa": js.fsa(X, y, 2, n_iter=30),
        "lasso": js.group_lasso(js.prepare(X, y, l2=0.0), [1.0, 1e-7]),
        "dwsm": js.dwsm_fit(jax.random.key(0), X, labels, lam=0.05, n_iter=2, states_per_example=2),
    }


def _steps_within(cum_cost, budget):
    return int(np.sum(np.asarray(cum_cost, np.float64) <= budget * (1 + 1e-6)))


# ------------------------------------------------------------------------------ dispatch, by type
def test_paths_at_a_budget_match_a_numpy_reference(fitted):
    X, path = fitted["X"], fitted["path"]
    coef, icpt = np.asarray(path.coef, np.float64), np.asarray(path.intercept, np.float64)
    for budget in (0.0, 0.4, 1.0, 2.5, 4.0, 100.0):
        j = _steps_within(path.cum_cost, budget)
        ref = X @ coef[j - 1, :, 0] + icpt[j - 1, 0] if j else np.full(N, float(np.asarray(path.null_intercept)[0]))
        np.testing.assert_allclose(js.predict(path, X, budget=budget), ref, rtol=1e-4, atol=1e-4)
    every = np.asarray(js.predict(path, X))
    assert every.shape == (path.n_steps, N)
    np.testing.assert_allclose(every, np.einsum("md,jd->jm", X, coef[..., 0]) + icpt[:, :1], rtol=1e-4, atol=1e-4)


def test_glm_paths_give_scores_and_with_link_probabilities(fitted):
    X, glm = fitted["X"], fitted["glm"]
    j = _steps_within(glm.cum_cost, 2.0)
    scores = X @ np.asarray(glm.coef, np.float64)[j - 1, :, 0] + float(np.asarray(glm.intercept)[j - 1, 0])
    np.testing.assert_allclose(js.predict(glm, X, budget=2.0), scores, rtol=1e-4, atol=1e-4)  # as in 0.3
    np.testing.assert_allclose(js.predict(glm, X, 2.0, link=True), 1 / (1 + np.exp(-scores)), rtol=1e-4, atol=1e-5)
    # identity-link paths: link=True changes nothing
    np.testing.assert_array_equal(js.predict(fitted["path"], X, 1.0, link=True), js.predict(fitted["path"], X, 1.0))


def test_greedy_rls_budget_is_a_feature_count(fitted):
    X, res = fitted["X"], fitted["rls"]
    sel, coef_path, intercept_path = np.asarray(res.selected), np.asarray(res.coef_path), np.asarray(res.intercept_path)
    for t in (1, 2, 3):
        ref = X[:, sel[:t]] @ coef_path[t - 1, :t].astype(np.float64) + float(intercept_path[t - 1])
        np.testing.assert_allclose(js.predict(res, X, budget=t), ref, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(js.predict(res, X, budget=t + 0.9), ref, rtol=1e-4, atol=1e-4)  # ⌊B⌋ features
    np.testing.assert_allclose(js.predict(res, X, budget=0.5), np.full(N, float(res.null_intercept)), rtol=1e-6)
    assert js.predict(res, X).shape == (3, N)


def test_fsa_scores_and_training_width(fitted):
    X, res = fitted["X"], fitted["fsa"]
    assert res.n_features == D
    ref = X[:, np.asarray(res.support)] @ np.asarray(res.coef, np.float64) + float(res.intercept)
    np.testing.assert_allclose(js.predict(res, X), ref, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match=f"trained on {D}"):  # 0.3 accepted any X wider than the support
        js.predict(res, X[:, : int(np.max(np.asarray(res.support))) + 1])


def test_group_lasso_fit_predicts_each_lambda(fitted):
    X, y, fit = fitted["X"], fitted["y"], fitted["lasso"]
    pred = np.asarray(js.predict(fit, X))
    assert pred.shape == (2, N)
    A = np.column_stack([X.astype(np.float64), np.ones(N)])
    ols = A @ np.linalg.lstsq(A, y.astype(np.float64), rcond=None)[0]
    np.testing.assert_allclose(pred[1], ols, atol=2e-3)  # λ → 0: least squares in raw space
    assert np.std(pred[0]) < np.std(pred[1])  # a larger λ shrinks


def test_dwsm_policy_gives_labels_and_acquired_features(fitted):
    from jaxselect.dwsm import dwsm_predict  # the implementation (not the deprecated alias)

    X, pol = fitted["X"], fitted["dwsm"]
    labels, acquired = js.predict(pol, X)
    ref_labels, ref_acquired = dwsm_predict(pol, X)
    assert labels.shape == (N,) and acquired.shape == (N, D) and acquired.dtype == bool
    np.testing.assert_array_equal(labels, ref_labels)
    np.testing.assert_array_equal(acquired, ref_acquired)


def test_results_without_a_model_or_of_unknown_type_are_type_errors(fitted):
    cv = js.cross_validate_path(fitted["X"], fitted["y"], folds=3)
    with pytest.raises(TypeError, match="CVResult holds cross-validated scores.*refit"):
        js.predict(cv, fitted["X"])
    for bad in (None, "path", {"status": 0}, fitted["X"]):
        with pytest.raises(TypeError, match="predict takes a SelectionPath"):
            js.predict(bad, fitted["X"])


# ------------------------------------------------------------------------------ one rule for all
@pytest.mark.parametrize("which", ["path", "glm", "rls", "fsa", "lasso", "dwsm"])
def test_one_width_rule_and_finite_X(fitted, which):
    X, result = fitted["X"], fitted[which]
    for width in (D - 1, D + 1):
        Xw = np.zeros((4, width), np.float32)
        with pytest.raises(ValueError, match=rf"X has {width} (columns|features)\b.* {D}\b"):
            js.predict(result, Xw)
    for bad in (np.nan, np.inf):
        Xb = X[:5].copy()
        Xb[2, 3] = bad
        with pytest.raises(ValueError, match="NaN|Inf"):
            js.predict(result, Xb)


@pytest.mark.parametrize("which", ["path", "glm", "rls"])
def test_budgets_must_be_finite_and_non_negative(fitted, which):
    X, result = fitted["X"], fitted[which]
    for bad in (-1.0, -1e-9, np.float32(-2.0), jnp.float32(-0.5), np.array(-3.0)):
        with pytest.raises(ValueError, match="budget must be >= 0"):
            js.predict(result, X, budget=bad)
    for bad in (np.nan, np.inf, jnp.float32(np.nan)):
        with pytest.raises(ValueError, match="budget must be finite"):
            js.predict(result, X, budget=bad)
    with pytest.raises(TypeError, match="budget must be a real number"):
        js.predict(result, X, budget=jnp.array(True))
    # a concrete jax scalar budget means what the float means
    np.testing.assert_array_equal(js.predict(result, X, budget=jnp.float32(2.0)), js.predict(result, X, budget=2.0))
    # traced: only the shape is checked; below 0 it is the intercept-only model
    traced = jax.jit(lambda B: js.predict(result, X, budget=B))(jnp.float32(-1.0))
    np.testing.assert_allclose(traced, js.predict(result, X, budget=0.0))


@pytest.mark.parametrize("which", ["fsa", "lasso", "dwsm"])
def test_results_without_a_budget_reject_one(fitted, which):
    for budget in (1.0, 0.0, -1.0):
        with pytest.raises(ValueError, match="budget must be None"):
            js.predict(fitted[which], fitted["X"], budget=budget)


@pytest.mark.parametrize("which", ["fsa", "dwsm"])
def test_link_needs_a_result_with_a_link(fitted, which):
    with pytest.raises(ValueError, match="link=True is not available"):
        js.predict(fitted[which], fitted["X"], link=True)


def test_predict_runs_inside_jit(fitted):
    X, path, res = fitted["X"], fitted["path"], fitted["fsa"]
    f = jax.jit(lambda p, X, B: js.predict(p, X, budget=B))
    np.testing.assert_allclose(f(path, X, jnp.float32(2.5)), js.predict(path, X, budget=2.5), rtol=1e-6)
    g = jax.jit(lambda r, X: js.predict(r, X))
    np.testing.assert_allclose(g(res, X), js.predict(res, X), rtol=1e-6)
    with pytest.raises(ValueError, match=f"trained on {D}"):  # n_features stays concrete through a jit boundary
        js.predict(jax.jit(lambda r: r)(res), X[:, :-1])


# ------------------------------------------------------------------------------ deprecated aliases
ALIASES = {
    "fsa_predict": (lambda f: (f["fsa"], f["X"]), {}, lambda f: js.predict(f["fsa"], f["X"])),
    "glm_predict": (
        lambda f: (f["glm"], f["X"]),
        {"budget": 2.0},
        lambda f: js.predict(f["glm"], f["X"], budget=2.0, link=True),
    ),
    "rls_predict": (lambda f: (f["rls"], f["X"]), {"step": 2}, lambda f: js.predict(f["rls"], f["X"], budget=2)),
    "rls_predict_path": (lambda f: (f["rls"], f["X"]), {}, lambda f: js.predict(f["rls"], f["X"])),
    "dwsm_predict": (lambda f: (f["dwsm"], f["X"]), {}, lambda f: js.predict(f["dwsm"], f["X"])),
}


@pytest.mark.parametrize("name", sorted(ALIASES))
def test_deprecated_aliases_warn_and_agree(fitted, name):
    args, kwargs, replacement = ALIASES[name]
    with pytest.warns(DeprecationWarning, match=rf"jaxselect\.{name} is deprecated.*use jaxselect\.predict") as rec:
        old = getattr(js, name)(*args(fitted), **kwargs)
    assert rec[0].filename == __file__  # the warning points at the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the replacement itself does not warn
        new = replacement(fitted)
    for a, b in zip(jax.tree.leaves(old), jax.tree.leaves(new)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


def test_library_code_does_not_use_the_deprecated_names(fitted):
    from jaxselect.sklearn import FSARegressor

    X, y = fitted["X"], fitted["y"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        js.objective_curve(fitted["rls"], X, y)
        js.glm_accuracy(fitted["glm"], X, fitted["labels"])
        FSARegressor(k=2, n_iter=30).fit(X, y).predict(X)


# ------------------------------------------------------------------------------ Curve.status
def test_curve_status_is_the_paths_status_plus_nonfinite(fitted):
    X, y, path = fitted["X"], fitted["y"], fitted["path"]
    assert js.objective_curve(path, X, y).status == 0 and js.train_curve(path).status == 0
    flagged = path._replace(status=jnp.asarray(ILL_CONDITIONED | NOT_CONVERGED, jnp.int32))
    curve = js.objective_curve(flagged, X, y)
    assert curve.status == ILL_CONDITIONED | NOT_CONVERGED
    assert js.train_curve(flagged).status == ILL_CONDITIONED | NOT_CONVERGED
    assert js.oracle_curve(curve).status == curve.status
    with pytest.raises(js.SolverError):
        js.raise_for_status(curve)
    hand = js.Curve(np.array([0.0, 1.0]), np.array([0.0, 0.5]), np.array([3]))
    assert hand.status == 0 and js.timeliness(hand) == pytest.approx(0.5)
    assert js.Curve(np.array([0.0, np.inf]), np.array([0.0, 0.5]), np.array([3])).status == NONFINITE
    assert js.Curve(np.array([0.0, 1.0]), np.array([0.0, np.nan]), np.array([3]), status=4).status == 4 | NONFINITE


# ------------------------------------------------------------------------------ registration
def test_a_new_result_type_registers_a_predictor(fitted):
    """js.predict is a single-dispatch function: a new result type plugs in with predict.register,
    and its predictor gets X validated once (a float jax.Array in the result's dtype, or scipy CSR)."""
    from typing import NamedTuple

    import scipy.sparse as sp

    class Toy(NamedTuple):  # a linear model on every column
        coef: jax.Array
        intercept: jax.Array

    seen = []

    @js.predict.register(Toy)
    def _(result, X, budget, link):
        seen.append("csr" if sp.issparse(X) and X.format == "csr" else type(X))
        if sp.issparse(X):
            return jnp.asarray(X @ np.asarray(result.coef)) + result.intercept
        return X @ result.coef + result.intercept

    X = fitted["X"]  # (the toy stays registered: a local class, harmless to the other tests)
    toy = Toy(jnp.arange(D, dtype=jnp.float32), jnp.float32(0.5))
    assert js.predict.dispatch(Toy) is _ and Toy in js.predict.registry
    ref = X.astype(np.float64) @ np.arange(D) + 0.5
    np.testing.assert_allclose(js.predict(toy, X), ref, rtol=1e-5)
    np.testing.assert_allclose(js.predict(toy, sp.csc_matrix(X)), ref, rtol=1e-5)
    assert issubclass(seen[0], jax.Array) and seen[1] == "csr"
    Xb = X.copy()
    Xb[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN|Inf"):  # checked before the predictor runs
        js.predict(toy, Xb)
    assert len(seen) == 2
