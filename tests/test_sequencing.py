"""CS-G-OMP, CS-G-FR and Doubling against brute-force numpy oracles and the paper's theorems."""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxselect as js
import reference as ref


L2 = 1e-3


grouped_problem = ref.grouped_problem


def oracle_inputs(X, Y, ids, whiten=True):
    Xs, Ys = ref.standardize(np.asarray(X, np.float64), np.asarray(Y, np.float64))
    Z = ref.whiten(Xs, ids) if whiten else Xs
    return Xs, Ys, Z


@pytest.mark.parametrize("seed,T", [(0, 1), (1, 2), (2, 3)])
def test_fr_matches_bruteforce(seed, T, dtype):
    X, Y, ids, costs = grouped_problem(seed, T=T)
    _, Ys, Z = oracle_inputs(X, Y, ids)
    problem = js.prepare(X.astype(dtype), Y.astype(dtype), js.Groups.from_ids(ids, costs), l2=L2)
    path = js.cs_fr(problem)
    assert path.coef.dtype == dtype
    assert path.order.tolist() == ref.forward_regression(Z, Ys, ids, costs, L2)
    assert int(path.status) == 0
    # the objective is the exact explained-variance fraction 2F/T of every prefix
    feats, expected = [], []
    for g in path.order.tolist():
        feats += list(np.flatnonzero(ids == g))
        expected.append(2 * ref.explained_variance(Z, Ys, feats, L2) / Ys.shape[1])
    np.testing.assert_allclose(path.objective, expected, rtol=ref.rtol_for(dtype, 1e-6, 1e-4))
    np.testing.assert_allclose(path.cum_cost, np.cumsum(costs[path.order]), rtol=ref.rtol_for(dtype, 1e-12, 1e-6))


@pytest.mark.parametrize("criterion", ["whiten", "no_whiten", "single"])
@pytest.mark.parametrize("seed,T", [(3, 1), (4, 2)])
def test_omp_matches_naive(criterion, seed, T, dtype):
    X, Y, ids, costs = grouped_problem(seed, T=T)
    Xs, Ys, Z = oracle_inputs(X, Y, ids)
    problem = js.prepare(X.astype(dtype), Y.astype(dtype), js.Groups.from_ids(ids, costs), l2=L2)
    path = js.cs_omp(problem, criterion=criterion)
    assert path.order.tolist() == ref.omp(Xs, Z, Ys, ids, costs, L2, criterion)


def test_cost_blind_omp_and_fr():
    X, Y, ids, costs = grouped_problem(5, T=2)
    Xs, Ys, Z = oracle_inputs(X, Y, ids)
    problem = js.prepare(X, Y, js.Groups.from_ids(ids, costs), l2=L2)
    assert js.cs_omp(problem, cost_sensitive=False).order.tolist() == ref.omp(
        Xs, Z, Ys, ids, costs, L2, "whiten", cost_sensitive=False
    )
    assert js.cs_fr(problem, cost_sensitive=False).order.tolist() == ref.forward_regression(
        Z, Ys, ids, costs, L2, cost_sensitive=False
    )


def test_unwhitened_problem_uses_whitened_criterion_correctly():
    """criterion='whiten' on a whiten=False problem is b_gᵀ(X_gᵀX_g/n)⁻¹b_g: same order as whitened."""
    X, Y, ids, costs = grouped_problem(6)
    groups = js.Groups.from_ids(ids, costs)
    a = js.cs_omp(js.prepare(X, Y, groups, l2=1e-9, whiten=True))
    b = js.cs_omp(js.prepare(X, Y, groups, l2=1e-9, whiten=False))
    assert a.order.tolist() == b.order.tolist()


@pytest.mark.parametrize("seed", [7, 8])
def test_doubling_matches_bruteforce(seed, x64):
    X, Y, ids, costs = grouped_problem(seed, sizes=(1, 2, 1, 3, 1, 2, 1))
    costs = np.array([1.0, 6.0, 2.0, 30.0, 1.5, 3.0, 9.0])
    _, Ys, Z = oracle_inputs(X, Y, ids)
    problem = js.prepare(X, Y, js.Groups.from_ids(ids, costs), l2=L2)
    for c_min in (None, 2.5):
        path = js.doubling(problem, c_min=c_min)
        expected = ref.doubling(Z, Ys, ids, costs, L2, costs.min() if c_min is None else c_min)
        assert path.order.tolist() == expected
    # the cap: every pick costs at most the total so far, unless nothing remaining fits
    order = js.doubling(problem).order.tolist()
    total = 0.0
    for j, g in enumerate(order):
        remaining = [h for h in range(len(costs)) if h not in order[:j]]
        cap = costs.min() if j == 0 else total
        assert costs[g] <= max(cap, min(costs[h] for h in remaining)) + 1e-12
        total += costs[g]


def test_singletons_unit_costs_match_sklearn_omp(x64):
    linear_model = pytest.importorskip("sklearn.linear_model")
    rng = np.random.default_rng(9)
    X = rng.normal(size=(80, 15)) * rng.uniform(0.5, 3, 15) + 3.0
    y = X[:, [1, 4, 7, 11]] @ np.array([3.0, -2.0, 1.5, 1.0]) + 0.5 * rng.normal(size=80)
    path = js.cs_omp(js.prepare(X, y, l2=1e-12), k=8)
    Xs, ys = ref.standardize(X, y)
    coefs = linear_model.orthogonal_mp(Xs, ys[:, 0], n_nonzero_coefs=8, return_path=True)
    order = []
    for k in range(coefs.shape[1]):
        new = [j for j in np.flatnonzero(coefs[:, k]) if j not in order]
        order += new
    assert path.order.tolist() == order


def test_gram_free_mode_equals_gram_mode(dtype):
    X, Y, ids, costs = grouped_problem(10, T=2)
    X, Y = X.astype(dtype), Y.astype(dtype)
    groups = js.Groups.from_ids(ids, costs)
    a = js.prepare(X, Y, groups, l2=L2, gram=True)
    b = js.prepare(X, Y, groups, l2=L2, gram=False)
    assert b.C is None and b.Z is not None
    for solver in (js.cs_omp, js.cs_fr, js.doubling):
        pa, pb = solver(a), solver(b)
        assert pa.order.tolist() == pb.order.tolist()
        np.testing.assert_allclose(pa.objective, pb.objective, rtol=ref.rtol_for(dtype, 1e-8, 1e-4))
        scale = float(np.abs(np.asarray(pa.coef)).max())
        assert pa.is_dense and not pb.is_dense  # gram=False: slot-space path (tests/test_lean.py)
        np.testing.assert_allclose(
            pa.coef, pb.dense().coef, rtol=ref.rtol_for(dtype, 1e-6, 1e-3), atol=ref.rtol_for(dtype, 1e-9, 1e-4) * scale
        )


def subset_gamma(Z, l2):
    """γ = (λ* + λ)/(1 + λ) with λ* the smallest eigenvalue of ZᵀZ/n over live columns."""
    live = np.any(Z != 0, axis=0)
    Zl = Z[:, live]
    lam_star = np.linalg.eigvalsh(Zl.T @ Zl / Z.shape[0]).min()
    return (lam_star + l2) / (1 + l2)


@pytest.mark.parametrize("solver", ["omp", "fr"])
def test_theorem_3_2_against_best_subsets(solver, x64):
    """F(G_⟨B⟩) > (1 − e^{−γB/K}) F(S_⟨K⟩) at every selection budget B, for all subsets of cost ≤ K."""
    X, Y, ids, costs = grouped_problem(11, n=200, sizes=(1, 2, 1, 2, 1, 1))
    _, Ys, Z = oracle_inputs(X, Y, ids)
    l2 = 0.05
    problem = js.prepare(X, Y, js.Groups.from_ids(ids, costs), l2=l2)
    path = js.cs_omp(problem) if solver == "omp" else js.cs_fr(problem)
    gamma = subset_gamma(Z, l2)
    F_path = np.asarray(path.objective) / 2.0  # F = objective · T / 2 with T = 1
    for K in np.linspace(costs.min(), costs.sum(), 7):
        opt = ref.best_subset_value(Z, Ys, ids, costs, l2, K)
        for B, F_B in zip(np.asarray(path.cum_cost), F_path):
            assert F_B >= (1 - np.exp(-gamma * B / K)) * opt - 1e-9


def test_theorem_4_3_doubling_bicriteria(x64):
    """F(G_⌊B⌋) > (1 − e^{−γ²/(1+γ)}) F(S_⌊B/4⌋) for every budget B > c_min (doubling-capable costs)."""
    X, Y, ids, costs = grouped_problem(12, n=200, sizes=(1, 1, 2, 1, 1, 2, 1))
    costs = np.array([1.0, 1.0, 2.0, 3.0, 4.0, 8.0, 12.0])
    _, Ys, Z = oracle_inputs(X, Y, ids)
    l2 = 0.05
    path = js.doubling(js.prepare(X, Y, js.Groups.from_ids(ids, costs), l2=l2))
    gamma = subset_gamma(Z, l2)
    factor = 1 - np.exp(-(gamma**2) / (1 + gamma))
    cum = np.asarray(path.cum_cost)
    F_path = np.asarray(path.objective) / 2.0
    for B in np.linspace(1.01, cum[-1], 25):
        k = np.sum(cum <= B)
        F_B = F_path[k - 1] if k else 0.0
        assert F_B >= factor * ref.best_subset_value(Z, Ys, ids, costs, l2, B / 4) - 1e-9


def test_eager_and_jitted_agree():
    """The jitted solver equals the same maths run op by op under jax.disable_jit() (float32)."""
    dtype = np.float32
    X, Y, ids, costs = grouped_problem(13, T=2)
    X, Y = X.astype(dtype), Y.astype(dtype)
    expected = js.cs_fr(js.prepare(X, Y, js.Groups.from_ids(ids, costs), l2=L2), k=2)
    with jax.disable_jit():
        got = js.cs_fr(js.prepare(X, Y, js.Groups.from_ids(ids, costs), l2=L2), k=2)
    assert got.order.tolist() == expected.order.tolist()
    scale = float(np.abs(np.asarray(expected.coef)).max())
    np.testing.assert_allclose(
        got.coef, expected.coef, rtol=ref.rtol_for(dtype, 1e-7, 1e-4), atol=ref.rtol_for(dtype, 1e-10, 1e-5) * scale
    )


def test_float32_default_and_float32_matches_float64():
    X, Y, ids, costs = grouped_problem(14)
    p32 = js.cs_fr(js.prepare(X, Y, js.Groups.from_ids(ids, costs), l2=L2))  # float64 numpy in, x64 off
    with jax.enable_x64():
        p64 = js.cs_fr(js.prepare(X, Y, js.Groups.from_ids(ids, costs), l2=L2))
    assert p32.coef.dtype == jnp.float32 and p64.coef.dtype == jnp.float64
    assert p32.order.tolist() == p64.order.tolist()
    np.testing.assert_allclose(p32.objective, p64.objective, rtol=1e-4)
    np.testing.assert_allclose(p32.coef, p64.coef, rtol=2e-3, atol=2e-4)


def test_fixed_order_path_refits_each_prefix(x64):
    X, Y, ids, costs = grouped_problem(15, T=2)
    _, Ys, Z = oracle_inputs(X, Y, ids)
    problem = js.prepare(X, Y, js.Groups.from_ids(ids, costs), l2=L2)
    path = js.fixed_order_path(problem, [3, 0, 5, -1, -1])
    assert path.order.tolist() == [3, 0, 5, -1, -1]
    assert np.isinf(np.asarray(path.cum_cost)[3:]).all()
    feats = list(np.flatnonzero(ids == 3)) + list(np.flatnonzero(ids == 0))
    np.testing.assert_allclose(np.asarray(path.objective)[1], ref.explained_variance(Z, Ys, feats, L2), rtol=1e-6)
    # same path as cs_fr when given cs_fr's order
    fr = js.cs_fr(problem)
    again = js.fixed_order_path(problem, np.asarray(fr.order))
    np.testing.assert_allclose(again.coef, fr.coef, rtol=1e-8, atol=1e-10)
    with pytest.raises(ValueError, match="repeat"):
        js.fixed_order_path(problem, [1, 1])
    with pytest.raises(ValueError, match="−1"):
        js.fixed_order_path(problem, [1, -1, 2])


def test_k_clipped_and_validated():
    X, Y, ids, costs = grouped_problem(16)
    problem = js.prepare(X, Y, js.Groups.from_ids(ids, costs))
    with pytest.warns(UserWarning, match=r"cs_omp: k=100 is larger than the number of usable groups of X \(6;"):
        assert js.cs_omp(problem, k=100).n_steps == 6
    assert js.cs_omp(problem, k=2).n_steps == 2
    with pytest.raises(ValueError, match="k must be"):
        js.cs_fr(problem, k=0)
    with pytest.raises(ValueError, match="criterion"):
        js.cs_omp(problem, criterion="whitened")
    with pytest.raises(TypeError, match="Problem"):
        js.cs_omp(X)
    with pytest.raises(ValueError, match="c_min"):
        js.doubling(problem, c_min=0.0)


def test_rank_deficient_groups_and_duplicates(dtype):
    """Duplicated columns and a rank-deficient group: whitening drops the null directions."""
    X, Y, ids, costs = grouped_problem(17)
    X = X.copy()
    X[:, 2] = 3.0 * X[:, 1] - 7.0  # group 1 becomes rank-deficient
    X = np.concatenate([X, X[:, :1]], axis=1)  # duplicate column 0 as its own group
    ids = np.concatenate([ids, [ids.max() + 1]])
    costs = np.concatenate([costs, [1.0]])
    _, Ys, Z = oracle_inputs(X, Y, ids)
    problem = js.prepare(X.astype(dtype), Y.astype(dtype), js.Groups.from_ids(ids, costs), l2=L2)
    path = js.cs_fr(problem)
    assert np.all(np.isfinite(np.asarray(path.coef)))
    assert path.order.tolist() == ref.forward_regression(Z, Ys, ids, costs, L2)


def test_vmap_over_problems_and_cost_vectors(x64):
    """vmap over folds (prepare + solver) and over cost vectors equals solving each one separately."""
    rng = np.random.default_rng(18)
    X = rng.normal(size=(3, 50, 6))
    Y = X[..., 1] - 2 * X[..., 4] + 0.3 * rng.normal(size=(3, 50))
    groups = js.Groups.from_ids([0, 0, 1, 2, 2, 3], [1.0, 2.0, 1.5, 0.5])
    batched = jax.jit(jax.vmap(lambda X, y: js.cs_fr(js.prepare(X, y, groups, l2=L2))))(X, Y)
    b_order, b_coef = np.asarray(batched.order), np.asarray(batched.coef)
    for f in range(3):
        single = js.cs_fr(js.prepare(X[f], Y[f], groups, l2=L2))
        assert b_order[f].tolist() == single.order.tolist()
        np.testing.assert_allclose(b_coef[f], single.coef, rtol=1e-8, atol=1e-12)
    costs = jnp.asarray([[1.0, 2.0, 1.5, 0.5], [5.0, 1.0, 1.0, 9.0]])
    problem = js.prepare(X[0], Y[0], groups, l2=L2)
    orders = jax.vmap(lambda c: js.cs_omp(problem._replace(groups=problem.groups._replace(costs=c))).order)(costs)
    for c, o in zip(np.asarray(costs), np.asarray(orders)):
        expected = js.cs_omp(js.prepare(X[0], Y[0], js.Groups.from_ids([0, 0, 1, 2, 2, 3], c), l2=L2)).order
        assert o.tolist() == expected.tolist()


def test_constant_columns_inert_and_never_selected(dtype):
    """Default constant_columns='inert': a constant-only group is never taken; its steps stay empty."""
    rng = np.random.default_rng(19)
    X = rng.normal(size=(61, 5)).astype(dtype)  # odd n
    X[:, 2] = 4.0  # group 1 = {2} is constant
    y = X[:, 0] - X[:, 4]
    groups = js.Groups.from_ids([0, 0, 1, 2, 3], [1.0, 2.0, 0.1, 1.0])
    problem = js.prepare(X, y, groups)
    for solver in (js.cs_omp, js.cs_fr, js.doubling):
        path = solver(problem)
        order = path.order.tolist()
        assert 1 not in order and order[-1] == -1 and sorted(order[:-1]) == [0, 2, 3]
        assert np.isinf(np.asarray(path.cum_cost)[-1]) and np.all(np.asarray(path.coef)[:, 2] == 0)
        np.testing.assert_allclose(js.predict(path, X, budget=10.0), y, atol=1e-2)
    with pytest.raises(ValueError, match=r"constant column\(s\) \[2\].*constant_columns='raise'"):
        js.prepare(X, y, groups, constant_columns="raise")


def test_floored_pivot_sets_status(x64):
    """A group numerically dependent on the selection (duplicate, l2 = 0) is flagged, not silent."""
    rng = np.random.default_rng(20)
    X = rng.normal(size=(40, 3))
    X = np.concatenate([X, X[:, :1]], axis=1)  # feature 3 duplicates feature 0, its own group
    y = X[:, 0] + X[:, 1] + 0.1 * rng.normal(size=40)
    path = js.fixed_order_path(js.prepare(X, y, l2=0.0), [0, 3])
    assert int(path.status) & js.status.ILL_CONDITIONED
    assert np.all(np.isfinite(np.asarray(path.coef)))
    with pytest.raises(js.SolverError, match="ill-conditioned"):
        js.raise_for_status(path)
    assert int(js.cs_fr(js.prepare(X[:, :3], y)).status) == 0


def test_custom_rule_through_the_advanced_api():
    """sequencing_init/step/run with a user rule: 'cheapest remaining group first' is a valid sequencer."""
    from jaxselect.sequencing import fixed_order_rule, rule_params, sequencing_run

    X, Y, ids, costs = grouped_problem(21)
    problem = js.prepare(X, Y, js.Groups.from_ids(ids, costs), l2=L2)
    path = sequencing_run(problem, cheapest_first, rule_params(problem))
    assert path.order.tolist() == np.argsort(costs, kind="stable").tolist()
    again = sequencing_run(problem, fixed_order_rule, rule_params(problem, order=path.order))
    np.testing.assert_allclose(again.coef, path.coef)


def test_init_step_protocol_reproduces_the_driver():
    """sequencing_init(problem, rule, params) fixes the rule; sequencing_step(problem, state) takes
    nothing else and returns the state only (its info field holds the step's StepInfo): k jitted
    steps by hand give the driver's order, costs, objective and models."""
    from jaxselect.sequencing import SequencingState, StepInfo, fr_rule, rule_params, sequencing_init, sequencing_step
    from jaxselect.sequencing.prepare import to_raw_coef

    X, Y, ids, costs = grouped_problem(23)
    problem = js.prepare(X, Y, js.Groups.from_ids(ids, costs), l2=L2)
    path = js.cs_fr(problem, k=4)
    state = sequencing_init(problem, fr_rule, rule_params(problem))
    assert state.config.rule is fr_rule and state.schur.shape[0] == problem.n_groups
    # no step yet: group −1, cost +inf, objective F(∅) = 0, zero model of the step's shape
    assert int(state.info.group) == -1 and np.isinf(float(state.info.cum_cost))
    assert float(state.info.objective) == 0.0 and state.info.w.shape == problem.b0.shape
    assert not np.any(np.asarray(state.info.w))
    step = jax.jit(sequencing_step)
    groups, objective, ws = [], [], []
    for _ in range(4):
        state = step(problem, state)
        assert isinstance(state, SequencingState) and isinstance(state.info, StepInfo)
        groups.append(int(state.info.group))
        objective.append(float(state.info.objective))
        ws.append(np.asarray(state.info.w))
    assert groups == path.order.tolist() and int(state.step) == 4
    np.testing.assert_allclose(objective, path.objective, rtol=1e-5)
    coef, _ = to_raw_coef(problem.transform, jnp.asarray(np.stack(ws)))
    np.testing.assert_allclose(coef, path.dense().coef, rtol=1e-4, atol=1e-5)


def cheapest_first(problem, state, params):
    costs = jnp.where(state.selected, jnp.inf, problem.groups.costs)
    return jnp.argmin(costs).astype(jnp.int32), ~jnp.all(state.selected)


def test_vmap_over_l2_prepare_and_fr():
    """l2 may be traced: vmap over a grid of l2 through prepare + cs_fr equals the per-l2 solves."""
    X, Y, ids, costs = grouped_problem(22)
    groups = js.Groups.from_ids(ids, costs)
    grid = jnp.asarray([1e-4, 1e-2, 1.0], jnp.float32)
    batched = jax.vmap(lambda l2: js.cs_fr(js.prepare(X, Y, groups, l2=l2)).objective)(grid)
    for l2, row in zip(np.asarray(grid), np.asarray(batched)):
        np.testing.assert_allclose(row, js.cs_fr(js.prepare(X, Y, groups, l2=float(l2))).objective, rtol=1e-5)


def test_progress_bar_runs_the_same_steps_in_chunks(monkeypatch):
    """progress=True: the scan runs in compiled chunks with a tqdm bar between them — the same path;
    without tqdm a clear ImportError names the [progress] extra; the default path is untouched."""
    pytest.importorskip("tqdm")
    from jaxselect import _progress

    X, Y, ids, costs = grouped_problem(24)
    problem = js.prepare(X, Y, js.Groups.from_ids(ids, costs), l2=L2)
    updates = []

    class Bar:
        def update(self, n):
            updates.append(n)

        def close(self):
            updates.append("closed")

    monkeypatch.setattr(_progress, "N_UPDATES", 3)
    monkeypatch.setattr(_progress, "progress_bar", lambda total, desc: Bar())
    for solve in (js.cs_omp, js.cs_fr, js.doubling):
        updates.clear()
        path, bar_path = solve(problem), solve(problem, progress=True)
        J = problem.n_groups
        assert updates[-1] == "closed" and sum(updates[:-1]) == J and len(updates) - 1 == 3
        assert bar_path.order.tolist() == path.order.tolist()
        np.testing.assert_allclose(bar_path.coef, path.coef, rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(bar_path.cum_cost, path.cum_cost)
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # tqdm not installed
    with pytest.raises(ImportError, match=r"jaxselect\[progress\]"):
        js.cs_omp(problem, progress=True)
    with pytest.raises(TypeError, match="progress"):
        js.cs_omp(problem, progress=1)


def test_rules_are_static_records_and_k_follows_the_problem():
    """A rule's capabilities are fields of its Rule record (no function attributes); a plain rule
    function still works, and one carrying the old needs_schur attribute warns and still gets the
    Schur complements. k is positional-or-keyword right after the problem."""
    from jaxselect.sequencing import Rule, as_rule, doubling_rule, fr_rule, omp_rule, sequencing_init
    from jaxselect.sequencing.rules import _fr_select

    assert isinstance(fr_rule, Rule) and fr_rule.needs_schur and doubling_rule.needs_schur
    assert not omp_rule.needs_schur and omp_rule.name == "cs_omp"
    X, Y, ids, costs = grouped_problem(25)
    problem = js.prepare(X, Y, js.Groups.from_ids(ids, costs), l2=L2)
    for solve in (js.cs_omp, js.cs_fr, js.doubling):
        a, b = solve(problem, 3), solve(problem, k=3)
        assert a.order.tolist() == b.order.tolist() and a.n_steps == 3
        np.testing.assert_array_equal(a.coef, b.coef)

    def old_style(problem, state, params):
        return _fr_select(problem, state, params)

    old_style.needs_schur = True
    with pytest.warns(DeprecationWarning, match="Rule"):
        rule = as_rule(old_style)
    assert rule.needs_schur and rule.name == "old_style"
    assert sequencing_init(problem, Rule(_fr_select, needs_schur=True)).schur.shape[0] == problem.n_groups
    assert sequencing_init(problem, cheapest_first).schur.shape[0] == 0  # a plain function: no Schur
    with pytest.warns(DeprecationWarning):
        path = sequencing_run_of(problem, old_style)
    np.testing.assert_array_equal(path.order, js.cs_fr(problem).order)


def sequencing_run_of(problem, rule):
    from jaxselect.sequencing import rule_params, sequencing_run

    return sequencing_run(problem, rule, rule_params(problem))
