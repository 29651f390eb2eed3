"""gram=False that scales in D: slot-space paths, reachable slot capacities, lean default steps.

A ``gram=False`` problem never forms the D×D Gram; its sequencing paths are stored over the P
feature slots a path can fill (``SelectionPath.features``), P following the number of steps and
the live coordinates of the groups. Checked against the Gram mode (independent code: the D×D
Cholesky rows come from C instead of the design), dense on demand, and through every consumer.
"""

import importlib

import jax
import numpy as np
import pytest
import reference as ref

import jaxselect as js
from jaxselect import solver as driver
from jaxselect._static import canonical
from jaxselect.sequencing import engine
from jaxselect.sequencing import rules as seq
from jaxselect.sequencing.criteria import lean_steps, raw_slot_capacity, slot_capacity


prepare_mod = importlib.import_module("jaxselect.sequencing.prepare")  # the module (js.prepare is the function)


def grouped(n=48, T=2, seed=0):
    """12 features in 5 groups (sizes 3, 3, 2, 2, 2) with a constant column, a collinear pair, T targets."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 12)) * rng.uniform(0.5, 3.0, 12) + 2.0
    X[:, 4] = 7.0  # constant: inert, takes no slot
    X[:, 7] = X[:, 6] + 1e-3 * rng.normal(size=n)  # nearly collinear inside a group (whitening)
    Y = X[:, [0, 5, 9]] @ rng.normal(size=(3, T)) + 0.3 * rng.normal(size=(n, T))
    ids = np.array([0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 4, 4])
    return X, Y, js.Groups.from_ids(ids, [1.0, 2.5, 0.7, 1.3, 2.0])


def test_slot_paths_equal_gram_paths(dtype):
    X, Y, groups = grouped()
    X, Y = X.astype(dtype), Y.astype(dtype)
    a = js.prepare(X, Y, groups, gram=True)
    b = js.prepare(X, Y, groups, gram=False)
    rtol = ref.rtol_for(dtype, 1e-7, 2e-3)
    # One solver per dtype: the slot machinery is shared by every rule (tests/test_sequencing.py
    # compares cs_omp, cs_fr and doubling in both modes too).
    for solver in (js.cs_fr,):
        pa, pb = solver(a), solver(b)
        assert pa.is_dense and not pb.is_dense
        assert pb.coef.dtype == np.dtype(dtype) and pb.features.dtype == np.int32
        assert pa.order.tolist() == pb.order.tolist()
        np.testing.assert_allclose(pb.objective, pa.objective, rtol=rtol)
        np.testing.assert_array_equal(pb.cum_cost, pa.cum_cost)
        scale = float(np.abs(np.asarray(pa.coef)).max())
        dense = pb.dense()
        assert dense.is_dense and dense.coef.shape == pa.coef.shape
        np.testing.assert_allclose(dense.coef, pa.coef, atol=rtol * scale)
        np.testing.assert_allclose(pb.intercept, pa.intercept, rtol=rtol, atol=rtol * scale)
        # Slot layout: selected groups' features in selection order, the last slot empty (= D).
        feats = np.asarray(pb.features)
        assert feats[-1] == X.shape[1] and pb.n_features == X.shape[1]
        expected = np.concatenate([np.flatnonzero(np.asarray(groups.ids) == g) for g in pa.order.tolist()])
        np.testing.assert_array_equal(feats[: expected.size], expected)
        # Every consumer takes the slot form: predictions (all prefixes, at a budget), curves.
        ya, yb = js.predict(pa, X), js.predict(pb, X)
        np.testing.assert_allclose(yb, ya, rtol=rtol, atol=rtol * float(np.abs(Y).max()))
        budget = float(np.asarray(pa.cum_cost)[1])
        np.testing.assert_allclose(js.predict(pb, X, budget), js.predict(pa, X, budget), rtol=rtol, atol=rtol * 10)
        ca, cb = js.objective_curve(pa, X, Y), js.objective_curve(pb, X, Y)
        np.testing.assert_allclose(cb.value, ca.value, atol=rtol)
        np.testing.assert_allclose(np.asarray(pb.step_coef(2)), np.asarray(pa.coef)[2], atol=rtol * scale)
    with pytest.raises(ValueError, match="columns but the path was trained on 12"):
        js.predict(pb, X[:, :11])


def test_raw_design_keeps_x_and_equals_the_gram_mode():
    """gram=False: ``Problem.Z`` is a design operator over X itself (standardisation, whitening and
    weights implicit) and forms the chosen columns on the fly; only large offsets fall back to a
    centred copy. float32, where the on-the-fly centring matters most (float64 runs the same code)."""
    dtype = np.float32
    rng = np.random.default_rng(5)
    X = (rng.normal(size=(40, 16)) * rng.uniform(0.8, 2.0, 16) + rng.uniform(-4, 4, 16)).astype(dtype)
    X[:, 5] = 3.0  # constant
    y = (X[:, [1, 9, 12]] @ np.array([1.0, -2.0, 1.5]) + 0.2 * rng.normal(size=40)).astype(dtype)
    rtol = ref.rtol_for(dtype, 1e-7, 2e-3)
    pa = js.cs_fr(js.prepare(X, y, gram=True), k=8)
    scale = float(np.abs(np.asarray(pa.coef)).max())
    lean = js.prepare(X, y, gram=False)
    assert isinstance(lean.Z, js.design.DenseDesign) and lean.weights is None
    np.testing.assert_array_equal(np.asarray(lean.Z.X), X)  # X itself, not a standardised copy
    design, _ = js.whiten_design(X)
    np.testing.assert_allclose(prepare_mod.problem_design(lean), design.Z, rtol=rtol, atol=rtol)
    pb = js.cs_fr(lean, k=8)
    assert pb.order.tolist() == pa.order.tolist()
    np.testing.assert_allclose(pb.dense().coef, pa.coef, atol=10 * rtol * scale)
    np.testing.assert_allclose(pb.objective, pa.objective, rtol=rtol)
    # The standardised copy (compared with the Gram mode in the tests above) where raw X is not exact enough.
    Xo = X.copy()
    Xo[:, 3] += 1e3  # mean² ≫ 100 · variance
    centred = js.prepare(Xo, y, gram=False).Z
    np.testing.assert_allclose(np.asarray(centred.X), Xo - Xo.mean(axis=0), atol=1e-3)
    np.testing.assert_array_equal(np.asarray(centred.mean), 0.0)
    # weights stay beside X (no √w-scaled copy): the problem keeps them and X itself
    wt = np.linspace(0.5, 1.5, 40).astype(dtype)
    weighted = js.prepare(X, y, gram=False, sample_weight=wt)
    np.testing.assert_array_equal(np.asarray(weighted.Z.X), X)
    np.testing.assert_allclose(np.asarray(weighted.weights), wt)


def test_slot_path_agrees_with_a_naive_ridge_refit_per_prefix(x64):
    """Independent reference: a numpy ridge fit on each prefix's standardised features, mapped to raw
    space (without whitening, which changes the basis that l2 penalises)."""
    X, Y, groups = grouped(T=1)
    path = js.cs_fr(js.prepare(X, Y, groups, gram=False, whiten=False, l2=1e-3))
    ids = np.asarray(groups.ids)
    order = np.asarray(path.order)
    for j in range(3):
        feats = np.flatnonzero(np.isin(ids, order[: j + 1]))
        feats = feats[np.ptp(X[:, feats], axis=0) > 0]
        Xs, ys = ref.standardize(X[:, feats], Y)
        w = np.linalg.solve(Xs.T @ Xs / len(X) + 1e-3 * np.eye(feats.size), Xs.T @ ys / len(X))
        coef = w[:, 0] * Y[:, 0].std() / X[:, feats].std(axis=0)
        dense = np.asarray(path.step_coef(j))[:, 0]
        np.testing.assert_allclose(dense[feats], coef, rtol=1e-8, atol=1e-10)
        assert np.all(dense[np.setdiff1d(np.arange(12), feats)] == 0)


def test_slot_capacity_follows_steps_and_reachable_groups():
    X, Y, groups = grouped()
    b = js.prepare(X, Y, groups, gram=False)
    g = b.groups
    # Live sizes: group 1 has a constant column (2 live of 3); group 2 whitens 2 collinear columns.
    full = slot_capacity(g.mask, 2, 12)
    reach = slot_capacity(g.mask, 2, 12, index=g.index, live=b.live)
    assert full == 3 + 3 + 3 and reach <= full
    assert (
        reach
        == int(np.sort((np.asarray(g.mask) & np.asarray(b.live)[np.minimum(g.index, 11)]).sum(1))[::-1][:2].sum()) + 3
    )
    assert raw_slot_capacity(g.mask, 2, 12, index=g.index, live=b.live) == 3 + 3 + 1
    # A group of constant columns only is unreachable: its slots are never counted.
    Xc = X.copy()
    Xc[:, :3] = 1.0
    c = js.prepare(Xc, Y, groups, gram=False)
    assert raw_slot_capacity(c.groups.mask, 5, 12, index=c.groups.index, live=c.live) == 9 + 1
    assert js.cs_omp(c).order.tolist()[-1] == -1  # group 0 is never taken


def test_default_steps_and_state_stay_o_of_n_p_plus_p_d():
    """D = 400 singletons, n = 24: the default path has min(n, D) steps (not D), the solver holds
    P×D factor rows with P = steps + 1, the path m×P×T slot coefficients; the compiled program's
    buffers are bounded by a few copies of n·D + P·D numbers (the Gram mode's would be ~3·D²)."""
    rng = np.random.default_rng(3)
    n, d = 24, 400
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = X[:, [3, 50, 200]].sum(axis=1) + 0.1 * rng.normal(size=n).astype(np.float32)
    lean = js.prepare(X, y, gram=False)
    steps = engine._steps(lean, None)
    assert steps == n == lean_steps(lean.groups.mask, n, d)
    P, R = engine._capacities(lean, steps)
    assert (P, R) == (steps + 1, steps + 1)
    path = js.cs_fr(lean)
    assert path.order.shape == (steps,) and path.coef.shape == (steps, R, 1) and path.features.shape == (R,)
    state = jax.eval_shape(lambda p: engine.sequencing_init(p, seq.fr_rule, capacity=P), lean)
    assert state.K.shape == (P, d) and state.U.shape == (P, P)
    params = seq.rule_params(lean)
    solver = canonical(engine.sequencing_solver(seq.fr_rule, capacity=P, raw_capacity=R))
    stats = driver._program.lower(solver, lean, (params,), n_steps=steps).compile()
    stats = stats.memory_analysis()
    if stats is None:  # pragma: no cover - backends without memory statistics
        pytest.skip("no compiled memory statistics on this backend")
    bound = 4 * 4 * (n * d + P * d + P * P + steps * R + 64 * d)
    assert stats.temp_size_in_bytes + stats.output_size_in_bytes <= bound
    assert 4 * 3 * d * d > bound  # what the Gram mode's state and path would hold at least


def test_consumers_take_slot_paths(monkeypatch):
    """Estimators and cross-validation pick gram=False on wide data ("auto"); force it on small data."""
    from jaxselect.model_selection import _path_scores
    from jaxselect.sklearn import GroupSequencingRegressor

    X, Y, groups = grouped()
    a = js.prepare(X, Y, groups, gram=True)
    pa = js.cs_fr(a)
    pb = js.cs_fr(js.prepare(X, Y, groups, gram=False))
    # cross_validate_path scores every prefix of a (vmapped, traced) path on held-out rows.
    w = np.random.default_rng(0).uniform(0, 1, len(X)).astype(np.float32)
    Xf, Yf = X.astype(np.float32), Y.astype(np.float32)
    score = jax.jit(lambda p: _path_scores(p, Xf, Yf, w, score="r2"))
    np.testing.assert_allclose(score(pb), score(pa), rtol=2e-3, atol=2e-4)
    monkeypatch.setattr(prepare_mod, "GRAM_AUTO_MAX_FEATURES", 8)  # "auto" now means gram=False here
    est = GroupSequencingRegressor("fr", groups=np.asarray(groups.ids), costs=np.asarray(groups.costs), budget=4.0)
    est.fit(X, Y)
    assert not est.path_.is_dense
    j = int(np.sum(np.asarray(pa.cum_cost) <= 4.0))
    np.testing.assert_allclose(est.coef_, np.asarray(pa.coef)[j - 1].T, rtol=2e-3, atol=1e-4)


def test_dense_form_inside_jit_and_validation():
    X, Y, groups = grouped()
    b = js.prepare(X.astype(np.float32), Y.astype(np.float32), groups, gram=False)
    path = js.cs_fr(b)
    dense = jax.jit(lambda p: p.dense(12).coef)(path)
    np.testing.assert_array_equal(dense, path.dense().coef)
    cols = np.asarray(path.columns(X.astype(np.float32)))
    assert cols.shape == (X.shape[0], path.features.shape[0]) and np.all(cols[:, -1] == 0)
    with pytest.raises(ValueError, match="pass n_features"):
        jax.jit(lambda p: p.dense().coef)(path)


def _weighted_reference_moments(X, y, w, l2):
    """Independent numpy (float64) rows of ``C = X̃ᵀWX̃/Σw + λI`` and ``b0`` of standardised X, y
    (no whitening; constant columns zero with unit diagonal)."""
    X, y, w = (np.asarray(a, np.float64) for a in (X, y, w))
    sw = w.sum()
    mu = w @ X / sw
    sd = np.sqrt(w @ (X - mu) ** 2 / sw)
    live = X.max(axis=0) > X.min(axis=0)
    Xs = np.where(live, (X - mu) / np.where(live, sd, 1.0), 0.0)
    yc = y - w @ y / sw
    ys = yc / np.sqrt(w @ yc**2 / sw)
    C = Xs.T @ (Xs * w[:, None]) / sw + np.diag(np.where(live, l2, 1.0))
    return C, Xs.T @ (w * ys) / sw


def test_lazy_gram_rows_match_an_independent_reference_with_weights():
    """The operator's lazy Gram rows (group_rows, c_rows, c_matvec) and b0 of a weighted, grouped,
    unwhitened gram=False problem equal numpy's weighted standardised moments; Z keeps X itself."""
    X, Y, groups = grouped(T=1)
    X, y = X.astype(np.float32), Y[:, 0].astype(np.float32)
    w = np.random.default_rng(3).uniform(0.2, 2.0, X.shape[0]).astype(np.float32)
    lean = js.prepare(X, y, groups, sample_weight=w, gram=False, whiten=False, l2=1e-3)
    np.testing.assert_array_equal(np.asarray(lean.Z.X), X)
    C, b0 = _weighted_reference_moments(X, y, w, 1e-3)
    np.testing.assert_allclose(np.asarray(lean.b0)[:, 0], b0, atol=2e-5)
    g = lean.groups
    rows = np.asarray(engine.group_rows(lean, np.arange(g.n_groups, dtype=np.int32)))  # (J, s, D)
    for h in range(g.n_groups):
        real = np.asarray(g.mask)[h]
        idx = np.asarray(g.index)[h][real]
        np.testing.assert_allclose(rows[h][real], C[idx], atol=2e-5)
        np.testing.assert_array_equal(rows[h][~real], 0.0)
        np.testing.assert_allclose(np.asarray(engine.c_rows(lean, g.index[h], g.mask[h]))[real], C[idx], atol=2e-5)
    v = np.random.default_rng(4).normal(size=(12, 2)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(engine.c_matvec(lean, v)), C @ v, atol=5e-5)


@pytest.mark.parametrize("cache_columns", [1, 64])
def test_lazy_gram_equals_gram_mode_for_every_solver(monkeypatch, cache_columns):
    """gram=False equals gram=True (same order, objectives, raw coefficients) for OMP, FR, Doubling,
    a fixed order and the group lasso, with weights and whitened groups; ``cache_columns`` 1 computes
    each group's rows when chosen, 64 ahead of need (ColumnCache refills)."""
    monkeypatch.setattr(engine, "CACHE_COLUMNS", cache_columns)
    X, Y, groups = grouped(T=2)
    X, Y = X.astype(np.float32), Y.astype(np.float32)
    w = np.random.default_rng(5).uniform(0.3, 1.7, X.shape[0]).astype(np.float32)
    for sw in (None, w):
        a = js.prepare(X, Y, groups, sample_weight=sw, gram=True, l2=1e-3)
        b = js.prepare(X, Y, groups, sample_weight=sw, gram=False, l2=1e-3)
        k = groups.n_groups
        for solver in (js.cs_omp, js.cs_fr, js.doubling):
            pa, pb = solver(a, k=k), solver(b, k=k)
            assert pb.order.tolist() == pa.order.tolist()
            np.testing.assert_allclose(pb.objective, pa.objective, rtol=1e-4, atol=1e-5)
            scale = float(np.abs(np.asarray(pa.coef)).max())
            np.testing.assert_allclose(pb.dense().coef, pa.coef, atol=2e-3 * scale)
        order = np.array([3, 0, 2], np.int32)
        fa, fb = js.fixed_order_path(a, order), js.fixed_order_path(b, order)
        np.testing.assert_allclose(fb.objective, fa.objective, rtol=1e-4, atol=1e-5)
        la, lb = js.group_lasso_path(a, n_lambdas=6), js.group_lasso_path(b, n_lambdas=6)
        assert lb.order.tolist() == la.order.tolist()
