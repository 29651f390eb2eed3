"""Ports of skglm's group-lasso tests (``skglm/tests/test_group.py``) onto ``js.group_lasso``.

skglm checks its weighted group lasso against a reference solver (celer), the KKT conditions at
the solution, that ``alpha_max`` gives the zero solution, groups of different sizes given as
non-contiguous index lists, weights, and that singleton groups give the Lasso. The same cases here,
with numbers from scikit-learn (``Lasso``, ``ElasticNet``, ``MultiTaskLasso``), celer, and a small
numpy block coordinate descent. jaxselect's group lasso differs on purpose in ways each test states:

* it is solved on the prepared problem: columns standardised, targets standardised, and, by
  default, each group whitened (``Z_gᵀZ_g/n = I``), so the penalty is ``λ Σ a_g ‖Z_g w_g‖/√n``
  on the standardised features — the raw-space model does not depend on the whitening basis;
* the default weights are the group costs (``cost_weighted=True``); weights must be finite and > 0
  (skglm allows 0 = unpenalised and inf = excluded);
* the problem's ``l2`` adds ``(l2/2)‖w‖²`` (an elastic net);
* several targets are a multi-task group lasso (Frobenius norm of each group's block).
"""

import numpy as np
import pytest
from sklearn.linear_model import ElasticNet, Lasso, MultiTaskLasso

import jaxselect as js

N = 60
IDS = np.array([2, 0, 3, 1, 3, 2, 1, 3, 3, 2, 3])  # groups of sizes 1, 2, 3, 5, not contiguous
COSTS = np.array([1.0, 2.5, 0.7, 1.8])
J, D = 4, len(IDS)
MEMBERS = [np.flatnonzero(IDS == g).tolist() for g in range(J)]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    latent = rng.normal(size=(N, J))
    X = rng.normal(size=(N, D)) + 1.2 * latent[:, IDS]  # correlated columns inside each group
    X = X * rng.uniform(0.5, 3.0, D) + rng.normal(scale=3.0, size=D)
    coef = np.zeros(D)
    coef[MEMBERS[0]] = 1.5
    coef[MEMBERS[3][:2]] = [-1.0, 0.7]
    Y = np.column_stack([X @ coef, X @ np.roll(coef, 3)]) + rng.normal(size=(N, 2))
    return X, Y


def _standardise(A):
    centred = A - A.mean(axis=0)
    return centred / centred.std(axis=0)


def _cholesky_whitening(Xs):
    """Per group, the upper factor R_g with Xs_gᵀXs_g/n = R_gᵀR_g; Z_g = Xs_g R_g⁻¹ is whitened.

    A different basis from jaxselect's eigen-whitening: the two differ by a rotation per group."""
    R = [np.linalg.cholesky(Xs[:, m].T @ Xs[:, m] / N).T for m in MEMBERS]
    Z = np.zeros_like(Xs)
    for m, Rg in zip(MEMBERS, R):
        Z[:, m] = np.linalg.solve(Rg.T, Xs[:, m].T).T
    return Z, R


def _bcd_whitened(Z, ys, lam, weights, sweeps=3000):
    """Exact block coordinate descent for (1/2n)‖ys − Zu‖² + λ Σ a_g ‖u_g‖ with Z_gᵀZ_g/n = I."""
    u = np.zeros(Z.shape[1])
    for _ in range(sweeps):
        for g, m in enumerate(MEMBERS):
            r = Z[:, m].T @ (ys - Z @ u) / N + u[m]
            norm = np.linalg.norm(r)
            u[m] = 0.0 if norm <= lam * weights[g] else (1.0 - lam * weights[g] / norm) * r
    return u


def _f32(*arrays):
    return [np.asarray(a, np.float32) for a in arrays]


def _raw_from_standardised(v, X, y):
    """Raw coefficients and intercept of a model v on standardised columns predicting standardised y."""
    coef = v * y.std() / X.std(axis=0)
    return coef, y.mean() - X.mean(axis=0) @ coef


@pytest.mark.parametrize("whiten", [True, False])
def test_lambda_max_gives_the_zero_solution(data, whiten):
    # skglm's test_alpha_max: at alpha_max the solution is 0, just below it is not. jaxselect:
    # λ_max = max_g ‖b0_g‖/a_g with the gradient norm in the group's metric (whitened: the norm of
    # Xs_gᵀys/n in (Xs_gᵀXs_g/n)⁻¹), computed here from the data.
    X, Y = data
    y = Y[:, 0]
    Xs, ys = _standardise(X), _standardise(y)
    norms = []
    for m in MEMBERS:
        b = Xs[:, m].T @ ys / N
        metric = np.linalg.inv(Xs[:, m].T @ Xs[:, m] / N) if whiten else np.eye(len(m))
        norms.append(np.sqrt(b @ metric @ b))
    expected = np.max(np.array(norms) / COSTS)
    problem = js.prepare(*_f32(X, y), js.Groups.from_ids(IDS, COSTS), l2=0.0, whiten=whiten)
    lam_max = js.group_lasso_lambda_max(problem)
    assert lam_max == pytest.approx(expected, rel=2e-5)
    fit = js.group_lasso(problem, [lam_max * 1.001, lam_max * 0.98, lam_max * 0.5])
    assert int(fit.status) == 0 and bool(np.all(fit.converged))
    assert np.all(np.asarray(fit.raw_coef)[0] == 0.0)
    assert float(np.asarray(fit.raw_intercept)[0, 0]) == pytest.approx(y.mean(), rel=2e-6)
    first = int(np.argmax(np.array(norms) / COSTS))
    assert set(np.flatnonzero(np.asarray(fit.raw_coef)[1, :, 0]).tolist()) == set(MEMBERS[first])
    assert int(np.asarray(fit.order)[0]) == first and int(np.asarray(fit.entry)[first]) == 1


def test_whitened_solution_matches_a_reference_in_another_basis(data):
    # skglm's test_vs_celer_grouplasso with groups of different sizes and weights, on jaxselect's
    # default (group-whitened) problem: the reference whitens with Cholesky factors instead of
    # eigenvectors and solves by exact block coordinate descent; raw-space models agree.
    X, Y = data
    y = Y[:, 0]
    Xs, ys = _standardise(X), _standardise(y)
    Z, R = _cholesky_whitening(Xs)
    weights = np.array([0.8, 1.3, 2.0, 0.6])
    problem = js.prepare(*_f32(X, y), IDS, l2=0.0)
    lam_max = js.group_lasso_lambda_max(problem, weights=weights)
    lambdas = lam_max * np.array([0.6, 0.3, 0.05])
    fit = js.group_lasso(problem, lambdas, weights=weights)
    assert bool(np.all(fit.converged))
    for i, lam in enumerate(fit.lambdas.tolist()):
        u = _bcd_whitened(Z, ys, lam, weights)
        v = np.zeros(D)
        for m, Rg in zip(MEMBERS, R):
            v[m] = np.linalg.solve(Rg, u[m])
        coef, intercept = _raw_from_standardised(v, X, y)
        scale = np.abs(coef).max()
        np.testing.assert_allclose(np.asarray(fit.raw_coef)[i, :, 0], coef, atol=4e-5 * scale)
        assert float(np.asarray(fit.raw_intercept)[i, 0]) == pytest.approx(intercept, abs=4e-5 * np.abs(y).max())
        active = [g for g, m in enumerate(MEMBERS) if np.any(u[m] != 0)]
        assert sorted(np.flatnonzero(np.asarray(fit.entry) <= i).tolist()) == active


def test_kkt_conditions_at_the_solution(data):
    # skglm checks the optimality conditions of its solution. Here they are computed from the data
    # and jaxselect's raw-space coefficients only: in Cholesky-whitened coordinates u_g = R_g v_g
    # the gradient r = Zᵀ(ys − Zu)/n satisfies r_g = λ a_g u_g/‖u_g‖ on active groups and
    # ‖r_g‖ ≤ λ a_g on the others (a rotation per group changes neither).
    X, Y = data
    y = Y[:, 0]
    Xs, ys = _standardise(X), _standardise(y)
    Z, R = _cholesky_whitening(Xs)
    problem = js.prepare(*_f32(X, y), js.Groups.from_ids(IDS, COSTS), l2=0.0)
    lam_max = js.group_lasso_lambda_max(problem)
    fit = js.group_lasso(problem, lam_max * np.array([0.6, 0.3, 0.05]), tol=1e-6)
    n_active = []
    for i, lam in enumerate(fit.lambdas.tolist()):
        v = np.asarray(fit.raw_coef, np.float64)[i, :, 0] * X.std(axis=0) / y.std()
        u = np.zeros(D)
        for m, Rg in zip(MEMBERS, R):
            u[m] = Rg @ v[m]
        r = Z.T @ (ys - Z @ u) / N
        active = 0
        for g, m in enumerate(MEMBERS):
            norm = np.linalg.norm(u[m])
            if norm > 0:
                active += 1
                np.testing.assert_allclose(r[m], lam * COSTS[g] * u[m] / norm, atol=4e-5 * lam_max)
            else:
                assert np.linalg.norm(r[m]) <= lam * COSTS[g] + 4e-5 * lam_max
        n_active.append(active)
    assert n_active[0] < n_active[-1]  # both branches of the conditions are exercised
    # the default weights are the costs
    by_costs = js.group_lasso(problem, fit.lambdas, weights=COSTS, tol=1e-6)
    np.testing.assert_allclose(by_costs.raw_coef, fit.raw_coef, rtol=1e-6, atol=1e-7)


def test_matches_celer_on_standardised_groups(data):
    # skglm's test_vs_celer_grouplasso: celer's GroupLasso with index-list groups and weights. With
    # whiten=False jaxselect's coordinates are the standardised features, celer's design here.
    celer = pytest.importorskip("celer")
    X, Y = data
    y = Y[:, 0]
    Xs, ys = _standardise(X), _standardise(y)
    problem = js.prepare(*_f32(X, y), js.Groups.from_ids(IDS, COSTS), l2=0.0, whiten=False)
    lam_max = js.group_lasso_lambda_max(problem)
    fit = js.group_lasso(problem, lam_max * np.array([0.6, 0.3, 0.05]), tol=1e-6)
    for i, lam in enumerate(fit.lambdas.tolist()):
        est = celer.GroupLasso(MEMBERS, alpha=lam, weights=COSTS, fit_intercept=False, tol=1e-12, max_iter=1000)
        est.fit(Xs, ys)
        coef, intercept = _raw_from_standardised(est.coef_, X, y)
        np.testing.assert_allclose(np.asarray(fit.raw_coef)[i, :, 0], coef, atol=1e-4 * np.abs(coef).max())
        assert float(np.asarray(fit.raw_intercept)[i, 0]) == pytest.approx(intercept, abs=1e-4 * np.abs(y).max())


def test_singleton_groups_are_the_lasso_and_l2_the_elastic_net(data):
    # skglm's test_equivalence_lasso: groups of size one give the Lasso. jaxselect's l2 adds a
    # ridge: (l2/2)‖w‖² + λ‖w‖₁ is ElasticNet(alpha = λ + l2, l1_ratio = λ / (λ + l2)).
    X, Y = data
    y = Y[:, 0]
    Xs, ys = _standardise(X), _standardise(y)
    for l2 in (0.0, 0.1):
        problem = js.prepare(*_f32(X, y), l2=l2)
        lam_max = js.group_lasso_lambda_max(problem, cost_weighted=False)
        assert lam_max == pytest.approx(np.abs(Xs.T @ ys / N).max(), rel=2e-5)
        fit = js.group_lasso(problem, lam_max * np.array([0.6, 0.3, 0.05]), cost_weighted=False, tol=1e-6)
        for i, lam in enumerate(fit.lambdas.tolist()):
            if l2 == 0.0:
                est = Lasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=100_000)
            else:
                ratio = lam / (lam + l2)
                est = ElasticNet(alpha=lam + l2, l1_ratio=ratio, fit_intercept=False, tol=1e-12, max_iter=100_000)
            coef, _ = _raw_from_standardised(est.fit(Xs, ys).coef_, X, y)
            np.testing.assert_allclose(np.asarray(fit.raw_coef)[i, :, 0], coef, atol=1e-4 * np.abs(coef).max())


def test_several_targets_are_the_multi_task_lasso(data):
    # Several targets: the Frobenius norm of each group's (s_g, T) block. With singleton groups this
    # is scikit-learn's MultiTaskLasso on the standardised columns and standardised targets.
    X, Y = data
    Xs, Ys = _standardise(X), _standardise(Y)
    problem = js.prepare(*_f32(X, Y), l2=0.0)
    lam_max = js.group_lasso_lambda_max(problem, cost_weighted=False)
    assert lam_max == pytest.approx(np.linalg.norm(Xs.T @ Ys / N, axis=1).max(), rel=2e-5)
    fit = js.group_lasso(problem, lam_max * np.array([0.6, 0.3, 0.05]), cost_weighted=False, tol=1e-6)
    for i, lam in enumerate(fit.lambdas.tolist()):
        est = MultiTaskLasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(Xs, Ys)
        coef = est.coef_.T * Y.std(axis=0) / X.std(axis=0)[:, None]  # (D, T) raw
        np.testing.assert_allclose(np.asarray(fit.raw_coef)[i], coef, atol=1e-4 * np.abs(coef).max())
        rows = np.flatnonzero(np.abs(coef).sum(axis=1) > 1e-8)  # whole rows enter together
        assert set(np.flatnonzero(np.abs(np.asarray(fit.raw_coef)[i]).sum(axis=1)).tolist()) == set(rows.tolist())


def test_weights(data):
    # skglm's weighted penalties: weights scale each group's penalty. jaxselect: a common factor on
    # the weights only rescales λ (λ_max scales by its inverse, the solutions stay); weights must be
    # finite and > 0 (skglm's weight 0 = unpenalised and inf = excluded are rejected).
    X, Y = data
    problem = js.prepare(*_f32(X, Y[:, 0]), IDS, l2=0.0)
    weights = np.array([0.8, 1.3, 2.0, 0.6])
    lam_max = js.group_lasso_lambda_max(problem, weights=weights)
    assert js.group_lasso_lambda_max(problem, weights=4.0 * weights) == pytest.approx(lam_max / 4.0, rel=1e-6)
    lambdas = lam_max * np.array([0.6, 0.3, 0.05])
    fit = js.group_lasso(problem, lambdas, weights=weights)
    scaled = js.group_lasso(problem, lambdas / 4.0, weights=4.0 * weights)
    np.testing.assert_allclose(scaled.raw_coef, fit.raw_coef, atol=2e-6 * float(np.abs(fit.raw_coef).max()))
    # a heavier weight delays a group's entry
    heavy = weights.copy()
    first = int(np.asarray(fit.order)[0])
    heavy[first] *= 50.0
    later = js.group_lasso(problem, lambdas, weights=heavy)
    assert int(np.asarray(later.entry)[first]) > int(np.asarray(fit.entry)[first])
    for bad in (np.array([0.0, 1.0, 1.0, 1.0]), np.array([np.inf, 1.0, 1.0, 1.0]), np.ones(3)):
        with pytest.raises(ValueError, match="weights"):
            js.group_lasso(problem, lambdas, weights=bad)


def test_group_partitions_are_checked(data):
    # skglm's test_check_group_compatible: a partition that does not cover the features, or with
    # an empty group, is rejected; so are costs that are not finite and > 0 (jaxselect's groups
    # carry the costs that weight the penalty by default).
    X, Y = data
    X32, y32 = _f32(X, Y[:, 0])
    with pytest.raises(ValueError):
        js.prepare(X32, y32, IDS[:-1])  # one id short
    with pytest.raises(ValueError):
        js.Groups.from_ids([0, 0, 2, 2])  # group 1 is empty
    with pytest.raises(ValueError):
        js.Groups.from_ids(IDS, [1.0, 0.0, 1.0, 1.0])
    with pytest.raises(ValueError):
        js.Groups.from_ids(IDS, [1.0, 1.0, 1.0])  # one cost per group
