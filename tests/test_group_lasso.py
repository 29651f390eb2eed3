"""Cost-weighted group lasso path ("Sparse"): KKT at every λ, a numpy proximal-gradient oracle, skglm."""

import jax
import numpy as np
import pytest

import jaxselect as js
from jaxselect.sequencing.group_lasso import group_lasso, group_lasso_lambda_max, group_lasso_path

import reference as ref

grouped_problem = ref.grouped_problem


def moments(problem):
    return np.asarray(problem.C, np.float64), np.asarray(problem.b0, np.float64)


def kkt_violation(C, b0, w, ids, weights, lam):
    """Numpy KKT residual of ½wᵀCw − tr(b0ᵀw) + λ Σ a_g ‖w_g‖_F, per group."""
    r = b0 - C @ w
    out = []
    for g in range(len(weights)):
        rows = ids == g
        wg, rg = w[rows], r[rows]
        nw = np.linalg.norm(wg)
        if nw > 0:
            out.append(np.linalg.norm(rg - lam * weights[g] * wg / nw))
        else:
            out.append(max(0.0, np.linalg.norm(rg) - lam * weights[g]))
    return np.asarray(out)


def proximal_gradient(C, b0, ids, weights, lam, iters=20000):
    """Slow, independent oracle: plain ISTA with step 1/‖C‖₂ from zero."""
    step = 1.0 / np.linalg.eigvalsh(C).max()
    w = np.zeros_like(b0)
    for _ in range(iters):
        z = w - step * (C @ w - b0)
        for g in range(len(weights)):
            rows = ids == g
            nz = np.linalg.norm(z[rows])
            z[rows] *= max(0.0, 1.0 - step * lam * weights[g] / nz) if nz > 0 else 0.0
        w = z
    return w


N_LAMBDAS = 8  # one grid size everywhere: the compiled solver is shared between tests


@pytest.mark.parametrize("whiten,T", [(True, 1), (False, 1), (True, 2)])
def test_kkt_at_every_lambda(whiten, T, x64):
    X, Y, ids, costs = grouped_problem(0, T=T)
    problem = js.prepare(X, Y, js.Groups.from_ids(ids, costs), l2=1e-3, whiten=whiten)
    path = group_lasso_path(problem, n_lambdas=N_LAMBDAS)
    fit = path.info
    assert bool(fit.converged.all())
    C, b0 = moments(problem)
    lmax = group_lasso_lambda_max(problem)
    coef, lambdas = np.asarray(fit.coef), np.asarray(fit.lambdas)
    np.testing.assert_allclose(lambdas[0], lmax)
    np.testing.assert_allclose(fit.weights, costs)
    assert float(np.abs(coef[0]).max()) == 0.0  # w = 0 at λ_max
    for k, lam in enumerate(lambdas):
        v = kkt_violation(C, b0, coef[k], ids, costs, lam)
        assert v.max() <= 1e-7 * lmax, (k, v)
    # the SelectionPath is the ridge refit of the order of entry
    order = np.asarray(fit.order)
    np.testing.assert_array_equal(path.order, order)
    refit = js.fixed_order_path(problem, order)
    np.testing.assert_allclose(path.coef, refit.coef)
    entry = np.asarray(fit.entry)
    taken = order[order >= 0]
    assert np.all(np.diff(entry[taken]) >= 0)  # ordered by first λ index with w_g ≠ 0


@pytest.mark.parametrize("cost_weighted", [True, False])
def test_matches_proximal_gradient_oracle(cost_weighted, x64):
    X, Y, ids, costs = grouped_problem(1)
    problem = js.prepare(X, Y, js.Groups.from_ids(ids, costs), l2=0.0)
    weights = costs if cost_weighted else np.ones_like(costs)
    lmax = group_lasso_lambda_max(problem, cost_weighted=cost_weighted)
    lambdas = lmax * np.geomspace(1.0, 0.02, N_LAMBDAS)
    fit = group_lasso(problem, lambdas, cost_weighted=cost_weighted)
    C, b0 = moments(problem)
    for k in (2, 5, 7):
        ref = proximal_gradient(C, b0, ids, weights, lambdas[k], iters=5000)
        np.testing.assert_allclose(np.asarray(fit.coef)[k], ref, atol=1e-6)
    # raw-space models predict like the problem-space ones
    Z = np.asarray(js.whiten_design(X, js.Groups.from_ids(ids, costs))[0].Z)
    ys = (Y - Y.mean()) / Y.std()
    pred_raw = X @ np.asarray(fit.raw_coef)[1, :, 0] + float(np.asarray(fit.raw_intercept)[1, 0])
    np.testing.assert_allclose(pred_raw, Y.mean() + Y.std() * (Z @ np.asarray(fit.coef)[1, :, 0]), atol=1e-8)
    assert np.corrcoef(pred_raw, ys)[0, 1] > 0


def test_matches_celer_weighted_group_lasso(x64):
    celer = pytest.importorskip("celer")  # same estimator as skglm.GroupLasso, without numba's compile time
    X, Y, ids, costs = grouped_problem(2)
    groups = js.Groups.from_ids(ids, costs)
    problem = js.prepare(X, Y, groups, l2=0.0)
    path = group_lasso_path(problem, n_lambdas=N_LAMBDAS, lambda_min_ratio=0.01)
    fit = path.info
    Z = np.asarray(js.whiten_design(X, groups)[0].Z)
    ys = (Y - Y.mean()) / Y.std()
    members = [np.flatnonzero(ids == g).tolist() for g in range(len(costs))]
    for k in (2, 5, 7):
        est = celer.GroupLasso(
            members,
            alpha=float(np.asarray(fit.lambdas)[k]),
            weights=costs,
            fit_intercept=False,
            tol=1e-12,
            max_iter=1000,
        ).fit(Z, ys)
        # whiten_design and prepare orient every whitened axis alike (one rule, robust to ties):
        # the coefficients themselves agree, not only each group's norm
        ours = np.asarray(fit.coef)[k, :, 0]
        np.testing.assert_allclose(ours, est.coef_, atol=1e-7)
        raw = X @ np.asarray(fit.raw_coef)[k, :, 0] + float(np.asarray(fit.raw_intercept)[k, 0])
        fitted = (raw - Y.mean()) / Y.std()
        np.testing.assert_allclose(fitted, Z @ est.coef_, atol=1e-6)


def test_float32():
    X, Y, ids, costs = grouped_problem(3)
    with jax.enable_x64():
        reference = group_lasso_path(js.prepare(X, Y, js.Groups.from_ids(ids, costs)), n_lambdas=N_LAMBDAS)
        reference = (reference, reference.info)
    problem = js.prepare(X.astype(np.float32), Y.astype(np.float32), js.Groups.from_ids(ids, costs, dtype=np.float32))
    path = group_lasso_path(problem, n_lambdas=N_LAMBDAS)
    fit = path.info
    assert fit.coef.dtype == np.float32 and path.coef.dtype == np.float32
    assert bool(fit.converged.all()) and int(fit.status) == 0 and int(path.status) == 0
    np.testing.assert_array_equal(fit.order, reference[1].order)
    # one orientation rule in either precision: problem coordinates agree too
    np.testing.assert_allclose(fit.raw_coef, reference[1].raw_coef, atol=1e-4)
    np.testing.assert_allclose(fit.coef, reference[1].coef, atol=1e-4)
    np.testing.assert_allclose(path.objective, reference[0].objective, atol=1e-4)


def test_jit_and_eager_agree(x64):
    X, Y, ids, costs = grouped_problem(3, n=30, sizes=(2, 1))
    problem = js.prepare(X, Y, js.Groups.from_ids(ids, costs))
    lambdas = group_lasso_lambda_max(problem) * np.array([0.6, 0.2, 0.05])
    jitted = group_lasso(problem, lambdas)
    with jax.disable_jit():  # eager mode dispatches every block update op by op: a tiny problem
        eager = group_lasso(problem, lambdas)
    np.testing.assert_allclose(eager.coef, jitted.coef, atol=1e-12)
    np.testing.assert_array_equal(eager.n_iter, jitted.n_iter)
    np.testing.assert_array_equal(eager.order, jitted.order)


def test_degenerate_and_never_entering_groups():
    rng = np.random.default_rng(4)
    n = 80
    a, b, c = rng.normal(size=(3, n))
    # group 0: a and its duplicate; group 1: a constant column and noise; group 2: c (irrelevant).
    X = np.column_stack([a, 3 * a - 1, np.ones(n), b, c])
    y = 2 * a + 0.1 * rng.normal(size=n)
    problem = js.prepare(X, y, js.Groups.from_ids([0, 0, 1, 1, 2], [1.0, 1.0, 1.0]))  # constant column: inert
    path = group_lasso_path(problem, n_lambdas=6, lambda_min_ratio=0.5)
    fit = path.info
    # only group 0 enters at λ ≥ λ_max/2; the others stay off the path
    assert fit.order.tolist() == [0, -1, -1]
    assert path.order.tolist() == [0, -1, -1]
    assert np.isinf(np.asarray(path.cum_cost)[1:]).all()
    assert bool(np.isfinite(np.asarray(fit.raw_coef)).all())
    assert float(np.abs(np.asarray(fit.raw_coef)[:, 2]).max()) == 0.0
    curve = js.objective_curve(path, X, y)
    assert curve.cost.tolist() == [0.0, 1.0] and curve.value[1] > 0.9


def test_bad_input_rejected():
    X, Y, ids, costs = grouped_problem(5)
    problem = js.prepare(X, Y, js.Groups.from_ids(ids, costs))
    with pytest.raises(TypeError, match="Problem"):
        group_lasso_path((X, Y))
    with pytest.raises(ValueError, match="strictly decreasing"):
        group_lasso(problem, [0.1, 0.2])
    with pytest.raises(ValueError, match="> 0"):
        group_lasso(problem, [0.1, 0.0])
    with pytest.raises(ValueError, match="weights must be finite and > 0"):
        group_lasso(problem, [0.1], weights=np.r_[0.0, np.ones(len(costs) - 1)])
    with pytest.raises(ValueError, match="one entry per group"):
        group_lasso(problem, [0.1], weights=np.ones(2))
    with pytest.raises(ValueError, match="n_lambdas"):
        group_lasso_path(problem, n_lambdas=1)
    with pytest.raises(ValueError, match="lambda_min_ratio"):
        group_lasso_path(problem, lambda_min_ratio=1.0)



def test_gram_false_problems_are_accepted():
    """gram="auto" switches to gram=False at large D; the group lasso then works from the design
    (rows of C and C·w formed from Z) and gives the Gram solution — forced here on small data."""
    X, Y, ids, costs = grouped_problem(4)
    X, Y = X.astype(np.float32), Y.astype(np.float32)
    # grouped (whitened through the basis) and singletons: Problem.Z is the operator over X itself
    for groups in (js.Groups.from_ids(ids, costs, dtype=np.float32), None):
        dense = js.prepare(X, Y, groups)
        lean = js.prepare(X, Y, groups, gram=False)
        assert lean.C is None and dense.C is not None
        np.testing.assert_array_equal(np.asarray(lean.Z.X), X)
        path = group_lasso_path(dense, n_lambdas=N_LAMBDAS)
        lean_path = group_lasso_path(lean, n_lambdas=N_LAMBDAS)
        assert lean_path.order.tolist() == path.order.tolist() and int(lean_path.status) == 0
        np.testing.assert_allclose(lean_path.info.raw_coef, path.info.raw_coef, rtol=2e-3, atol=2e-4)
        np.testing.assert_allclose(lean_path.info.coef, path.info.coef, rtol=2e-3, atol=2e-4)  # one orientation
        np.testing.assert_allclose(lean_path.dense().coef, path.coef, rtol=2e-3, atol=2e-4)
        assert group_lasso_lambda_max(lean) == pytest.approx(group_lasso_lambda_max(dense), rel=1e-5)


def test_return_fit_is_deprecated_but_still_works():
    X, Y, ids, costs = grouped_problem(5)
    problem = js.prepare(X, Y, js.Groups.from_ids(ids, costs))
    path = group_lasso_path(problem, n_lambdas=6, lambda_min_ratio=0.5)
    assert isinstance(path.info, js.GroupLassoFit)
    with pytest.warns(DeprecationWarning, match="path.info"):
        old, fit = group_lasso_path(problem, n_lambdas=6, lambda_min_ratio=0.5, return_fit=True)
    np.testing.assert_array_equal(old.coef, path.coef)
    np.testing.assert_array_equal(fit.coef, path.info.coef)


def test_iteration_cap_sets_status():
    """Hitting max_iter is reported (NOT_CONVERGED), on the fit and on the path — never silently."""
    X, Y, ids, costs = grouped_problem(6)
    problem = js.prepare(X, Y, js.Groups.from_ids(ids, costs), l2=0.0)
    path = group_lasso_path(problem, n_lambdas=N_LAMBDAS, max_iter=1, tol=1e-12)
    fit = path.info
    assert not bool(fit.converged.all())
    assert int(fit.status) & js.status.NOT_CONVERGED and int(path.status) & js.status.NOT_CONVERGED
    with pytest.raises(js.SolverError, match="iteration cap"):
        js.raise_for_status(fit)
    assert "GroupLassoFit(lambdas=float32[8]" in repr(fit)


def test_advanced_api_steps_equal_the_driver(x64):
    """group_lasso_init / group_lasso_step driven by hand reach the driver's solution at one λ."""
    from jaxselect.sequencing.group_lasso import group_lasso_init, group_lasso_step

    X, Y, ids, costs = grouped_problem(7)
    problem = js.prepare(X, Y, js.Groups.from_ids(ids, costs), l2=1e-3)
    lam = 0.3 * group_lasso_lambda_max(problem)
    fit = group_lasso(problem, [lam], tol=1e-10)
    weights = problem.groups.costs
    step = jax.jit(group_lasso_step)
    state = group_lasso_init(problem, lam, weights)
    # before any step, info describes the starting coef (0): its KKT violation, no active group
    assert float(state.info.kkt) == float(state.kkt) > 0 and int(state.info.n_active) == 0
    while float(state.kkt) > 1e-10 * group_lasso_lambda_max(problem):
        state = step(problem, state)  # the state only; the step's GroupLassoStepInfo is state.info
        info = state.info
        assert float(info.kkt) == float(state.kkt) and 0 < int(info.n_active) <= problem.n_groups
    np.testing.assert_allclose(state.coef, np.asarray(fit.coef)[0], atol=1e-9)
    assert int(state.n_iter) == int(np.asarray(fit.n_iter)[0])
    assert "GroupLassoState(coef=float64[" in repr(state)
