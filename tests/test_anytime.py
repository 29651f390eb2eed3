"""Anytime prediction, objective curves, α-stopping, timeliness and the oracle; property tests."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxselect as js
from jaxselect.sequencing import anytime


def small_problem(seed=0, n=70, T=1):
    rng = np.random.default_rng(seed)
    ids = np.array([0, 0, 1, 2, 2, 3, 4])
    X = rng.normal(size=(n, 7)) + rng.normal(size=7) * 4
    Y = X[:, [0, 2, 5]] @ rng.normal(size=(3, T)) + 0.5 * rng.normal(size=(n, T))
    costs = rng.uniform(0.5, 3.0, 5)
    return X, (Y[:, 0] if T == 1 else Y), ids, costs


def test_predict_all_prefixes_shapes():
    X, Y, ids, costs = small_problem(T=2)
    path = js.cs_fr(js.prepare(X, Y, js.Groups.from_ids(ids, costs)))
    assert js.predict(path, X).shape == (5, 70, 2)
    assert js.predict(path, X, budget=2.0).shape == (70, 2)
    with pytest.raises(ValueError, match="columns"):
        js.predict(path, X[:, :3])
    with pytest.raises(TypeError, match="SelectionPath"):
        js.predict("path", X)
    with pytest.raises(ValueError, match="budget must be finite"):
        js.predict(path, X, budget=np.nan)
    with pytest.raises(ValueError, match="budget must be a scalar"):
        js.predict(path, X, budget=jnp.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="target column"):
        js.objective_curve(path, X, Y[:, :1])


def test_objective_curve_metrics():
    X, y, ids, costs = small_problem(1)
    path = js.cs_omp(js.prepare(X[:50], y[:50], js.Groups.from_ids(ids, costs)))
    curve = js.objective_curve(path, X[50:], y[50:])
    assert curve.cost[0] == 0.0 and curve.value.shape == (6,)
    pred = np.asarray(js.predict(path, X[50:]))
    null = float(np.asarray(path.null_intercept)[0])
    expected = 1 - np.sum((y[50:] - pred) ** 2, axis=1) / np.sum((y[50:] - null) ** 2)
    np.testing.assert_allclose(curve.value[1:], expected, rtol=1e-10)
    r2 = js.objective_curve(path, X[50:], y[50:], metric="r2").value
    sst = np.sum((y[50:] - y[50:].mean()) ** 2)
    np.testing.assert_allclose(r2[1:], 1 - np.sum((y[50:] - pred) ** 2, axis=1) / sst, rtol=1e-10)
    mae = js.objective_curve(path, X[50:], y[50:], metric=lambda Y, P: -np.abs(Y - P).mean()).value
    np.testing.assert_allclose(mae[1:], -np.abs(y[50:] - pred).mean(axis=1), rtol=1e-10)
    with pytest.raises(ValueError, match="metric"):
        js.objective_curve(path, X, y, metric="auc")


def test_accuracy_metric():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(100, 4))
    y = (X[:, 1] > 0).astype(float)
    path = js.cs_omp(js.prepare(X, y))
    acc = js.objective_curve(path, X, y, metric="accuracy").value
    assert acc[0] == pytest.approx(np.mean(y == float(y.mean() > 0.5)))  # intercept-only model
    assert acc[1] > 0.85
    # the same labels coded ±1 (or any two values) give the same accuracies: the path is linear in y
    pm = js.cs_omp(js.prepare(X, 2 * y - 1))
    np.testing.assert_allclose(js.objective_curve(pm, X, 2 * y - 1, metric="accuracy").value, acc)
    other = js.cs_omp(js.prepare(X, 3 * y + 5))
    np.testing.assert_allclose(js.objective_curve(other, X, 3 * y + 5, metric="accuracy").value, acc)
    with pytest.raises(ValueError, match="binary labels"):
        js.objective_curve(path, X, X[:, 0], metric="accuracy")


def test_timeliness_hand_computed():
    curve = js.Curve(np.array([0.0, 1.0, 3.0]), np.array([0.0, 0.5, 1.0]), np.array([0, 1]))
    # linear: area = 0.5*1*0.5 + 2*(0.5+1)/2 = 1.75 over 3*1
    assert js.timeliness(curve) == pytest.approx(1.75 / 3)
    # step: 0 on [0,1), 0.5 on [1,3) → 1.0 / 3
    assert js.timeliness(curve, interpolation="step") == pytest.approx(1.0 / 3)
    # stop inside a segment interpolates: B=2 → value 0.75; area 0.25 + (0.5+0.75)/2 = 0.875
    assert js.timeliness(curve, stop_cost=2.0) == pytest.approx(0.875 / 2)
    # a common reference rescales
    assert js.timeliness(curve, reference=2.0) == pytest.approx(1.75 / 6)
    # beyond the last point the curve is held flat
    assert js.timeliness(curve, stop_cost=4.0) == pytest.approx((1.75 + 1.0) / 4)
    with pytest.raises(ValueError, match="interpolation"):
        js.timeliness(curve, interpolation="cubic")


def test_alpha_stopping_and_plateau_rule():
    # 95 % at cost 1, 96 % needs cost 5 of total 10 (> 20 %): plateau at alpha 0.95
    curve = js.Curve(np.array([0.0, 1.0, 5.0, 10.0]), np.array([0.0, 0.955, 0.97, 1.0]), np.arange(3))
    assert js.alpha_stopping_cost(curve, 0.95) == 1.0
    assert js.alpha_stopping_cost(curve, 0.96) == 5.0
    assert js.plateau_alpha(curve) == pytest.approx(0.95)
    smooth = js.Curve(np.arange(11.0), np.linspace(0, 1, 11), np.arange(10))
    assert js.plateau_alpha(smooth) == 1.0


def test_oracle_reorders_by_gain_per_cost():
    curve = js.Curve(np.array([0.0, 4.0, 5.0, 7.0]), np.array([0.0, 0.4, 0.9, 1.0]), np.array([7, 8, 9]))
    oracle = js.oracle_curve(curve)
    # rates: 0.1, 0.5, 0.05 → order 8, 7, 9
    assert oracle.order.tolist() == [8, 7, 9]
    np.testing.assert_allclose(oracle.cost, [0, 1, 5, 7])
    np.testing.assert_allclose(oracle.value, [0, 0.5, 0.9, 1.0])
    assert js.timeliness(oracle) >= js.timeliness(curve)


def test_train_curve_and_paths_accept_path():
    X, y, ids, costs = small_problem(3)
    path = js.cs_omp(js.prepare(X, y, js.Groups.from_ids(ids, costs)))
    curve = js.train_curve(path)
    np.testing.assert_allclose(curve.value[1:], path.objective)
    assert js.timeliness(path) == pytest.approx(js.timeliness(curve))


def within(cum_cost, budget):
    """The library's budget rule: prefixes with cum_cost ≤ B up to 8 float32 epsilons of B."""
    return int(np.sum(np.asarray(cum_cost) <= budget + 8 * np.finfo(np.float32).eps * abs(budget)))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), budget=st.floats(0.0, 20.0), solver=st.sampled_from(["omp", "fr", "doubling"]))
def test_invariants(seed, budget, solver):
    """Objective non-decreasing; cum_cost = running sum of chosen costs; at budget B the model uses
    only features of groups that fit in B and every group appears exactly once."""
    X, y, ids, costs = small_problem(seed % 7)
    costs = np.random.default_rng(seed).uniform(0.5, 5.0, 5)
    problem = js.prepare(X, y, js.Groups.from_ids(ids, costs))
    path = {"omp": js.cs_omp, "fr": js.cs_fr, "doubling": js.doubling}[solver](problem)
    order = path.order.tolist()
    assert sorted(order) == list(range(5))
    assert np.all(np.diff(np.asarray(path.objective)) >= -1e-5)
    np.testing.assert_allclose(path.cum_cost, np.cumsum(costs[order]), rtol=1e-6)
    k = within(path.cum_cost, budget)
    allowed = np.isin(ids, order[:k])
    if k:
        coef = np.asarray(path.coef)[k - 1]
        assert np.all(coef[~allowed] == 0.0)
        assert float(np.asarray(path.cum_cost)[k - 1]) <= budget * (1 + 1e-6)
    # predict at B equals the explicit prefix model
    pred = np.asarray(js.predict(path, X, budget=budget))
    if k:
        expected = X @ np.asarray(path.coef)[k - 1][:, 0] + float(np.asarray(path.intercept)[k - 1, 0])
    else:
        expected = np.full(len(y), float(np.asarray(path.null_intercept)[0]))
    np.testing.assert_allclose(pred, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


def test_float32_budget_equal_to_a_prefix_cost_selects_it():
    """The reported case: float32 sum 24.310001 > float32(24.31) used to drop the last group."""
    X, y, ids, _ = small_problem(4, n=80)
    X = np.concatenate([X[:, :6], X[:, 6:]], axis=1)
    costs = np.array([1.76, 6.5, 2.68, 8.17, 2.84, 2.36])
    ids6 = np.array([0, 1, 2, 3, 4, 5, 5])
    path = js.cs_omp(js.prepare(X.astype(np.float32), y.astype(np.float32), js.Groups.from_ids(ids6, costs)))
    assert path.cum_cost.dtype == jnp.float32
    full = np.asarray(js.predict(path, X, budget=24.31))
    np.testing.assert_allclose(full, np.asarray(js.predict(path, X))[-1], rtol=1e-5)
    below = np.asarray(js.predict(path, X, budget=24.30))
    np.testing.assert_allclose(below, np.asarray(js.predict(path, X))[-2], rtol=1e-5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cents=st.lists(st.integers(1, 999), min_size=5, max_size=5), j=st.integers(1, 5))
def test_float32_two_decimal_budgets(cents, j):
    """Random two-decimal costs (float32): the budget written as the decimal sum of the first j costs
    buys exactly j groups — about 18 % of such cost vectors failed before compensated sums and the
    relative tolerance."""
    costs = np.asarray(cents) / 100.0
    X, y, ids, _ = small_problem(5)
    path = js.fixed_order_path(js.prepare(X, y, js.Groups.from_ids(ids, costs)), [0, 1, 2, 3, 4])
    budget = round(sum(cents[:j]) / 100.0, 2)
    every = np.asarray(js.predict(path, X))
    pred = np.asarray(js.predict(path, X, budget=budget))
    assert anytime.budget_steps(path.cum_cost, jnp.float32(budget)) == j
    np.testing.assert_allclose(pred, every[j - 1], rtol=1e-5, atol=1e-5)
    if j < 5:  # one cent less than the next prefix does not buy it
        nxt = round(sum(cents[: j + 1]) / 100.0 - 0.01, 2)
        assert anytime.budget_steps(path.cum_cost, jnp.float32(nxt)) == j


def test_predict_under_jit_with_traced_budget():
    X, y, ids, costs = small_problem(6)
    path = js.cs_fr(js.prepare(X, y, js.Groups.from_ids(ids, costs)))
    budgets = jnp.asarray([0.1, 2.0, 100.0], jnp.float32)
    batched = jax.jit(jax.vmap(lambda b: js.predict(path, X, budget=b)))(budgets)
    for b, row in zip(np.asarray(budgets), np.asarray(batched)):
        np.testing.assert_allclose(row, js.predict(path, X, budget=float(b)), rtol=1e-6)
