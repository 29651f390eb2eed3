"""One library: conventions that hold across every family (issue 11).

* every solver runs inside a user's ``jax.jit`` with traced data;
* a second call with equal-but-new arguments compiles nothing;
* every result carries ``status`` and ``js.raise_for_status`` works on it; reprs are short;
* anytime results compose: greedy RLS results go through ``predict``/``objective_curve``/...
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxselect as js
from jaxselect.rls.selection import rls_predict
from compile_count import count_compiles


def regression_data(seed=0, n=61, d=8):
    rng = np.random.default_rng(seed)
    X = (rng.normal(size=(n, d)) * rng.uniform(0.5, 3.0, d) + 2.0).astype(np.float32)
    y = (X[:, 1] - 2 * X[:, 5] + 0.3 * rng.normal(size=n)).astype(np.float32)
    return X, y


IDS = np.array([0, 0, 1, 2, 2, 3, 4, 4])
COSTS = [1.0, 2.0, 0.5, 1.5, 3.0]


def sequencing_call(X, y):
    problem = js.prepare(X, y, js.Groups.from_ids(IDS, COSTS))
    return {
        "omp": js.cs_omp(problem),
        "fr": js.cs_fr(problem),
        "doubling": js.doubling(problem),
        "fixed": js.fixed_order_path(problem, [2, 0, -1]),
    }


def test_sequencing_inside_user_jit_equals_eager():
    X, y = regression_data()
    jitted = jax.jit(sequencing_call)(X, y)
    eager = sequencing_call(X, y)
    for name in eager:
        assert jitted[name].order.tolist() == eager[name].order.tolist(), name
        np.testing.assert_allclose(jitted[name].coef, eager[name].coef, rtol=1e-4, atol=1e-5)


def refit_calls(X, y):
    support = np.arange(X.shape[1]) < 3
    labels = (y > np.median(y)).astype(np.int32)
    js.ridge_refit(X, y, support, l2=1e-3)
    js.glm_refit(X, labels, support, l2=1e-2)
    js.rls_refit(X, y, np.array([0, 2]), l2=1e-2)


def test_second_call_with_equal_new_arguments_compiles_nothing():
    X, y = regression_data(1)
    sequencing_call(X, y)  # warm up
    problem = js.prepare(X, y, js.Groups.from_ids(IDS, COSTS))
    path = js.cs_fr(problem)
    js.predict(path, X, budget=2.0)
    js.objective_curve(path, X, y)
    js.group_lasso_path(problem, n_lambdas=5)
    refit_calls(X, y)
    with count_compiles() as compiles:
        X2, y2 = regression_data(1)  # fresh numpy arrays, same shapes
        out = sequencing_call(X2.copy(), y2.copy())
        js.predict(out["fr"], X2.copy(), budget=3.0)
        js.objective_curve(out["fr"], X2.copy(), y2.copy())
        js.group_lasso_path(js.prepare(X2, y2, js.Groups.from_ids(IDS, COSTS)), n_lambdas=5)
        refit_calls(X2.copy(), y2.copy())
    assert compiles[0] == 0


def test_results_have_status_and_short_repr():
    X, y = regression_data(2)
    problem = js.prepare(X, y, js.Groups.from_ids(IDS, COSTS))
    path = js.group_lasso_path(problem, n_lambdas=5)
    fit = path.info
    for result in (js.cs_omp(problem), path, fit):
        assert result.status.dtype == jnp.int32
        assert js.raise_for_status(result) is result or int(result.status) != 0
        text = repr(result)
        assert len(text) < 700 and "status=" in text, text
    assert len(repr(problem)) < 1500 and "Problem(C=float32[8, 8]" in repr(problem)
    assert problem.status.dtype == jnp.int32 and js.raise_for_status(problem) is problem
    with pytest.raises(TypeError, match="status"):
        js.raise_for_status(problem.groups)
    assert js.status_message(0) == "ok"
    assert "non-finite" in js.status_message(1) and "iteration cap" in js.status_message(5)


def test_status_of_a_batched_result_raises_on_any_entry():
    X, y = regression_data(3)
    path = js.cs_omp(js.prepare(X, y))
    batched = path._replace(status=jnp.asarray([0, 2, 0], jnp.int32))
    with pytest.raises(js.SolverError, match="ill-conditioned") as info:
        js.raise_for_status(batched)
    assert info.value.status == 2


def test_group_lasso_path_inside_user_jit():
    X, y = regression_data(4)
    groups = js.Groups.from_ids(IDS, COSTS)

    def run(X, y):
        return js.group_lasso_path(js.prepare(X, y, groups), n_lambdas=6)

    eager, jitted = run(X, y), jax.jit(run)(X, y)
    assert eager.order.tolist() == jitted.order.tolist()
    np.testing.assert_allclose(eager.coef, jitted.coef, rtol=1e-4, atol=1e-5)


def test_refit_gradient_is_finite_with_a_constant_column():
    """The shared standardisation never takes √0: d/dX of a refit stays finite on constant columns."""
    X, y = regression_data(5)
    X[:, 3] = 2.0
    grad = jax.grad(lambda X: jnp.sum(js.ridge_refit(X, y)[0]))(jnp.asarray(X))
    assert bool(np.isfinite(np.asarray(grad)).all())
    np.testing.assert_array_equal(np.asarray(js.ridge_refit(X, y)[0])[3], 0.0)


def test_fresh_equal_optimizer_and_lambda_loss_do_not_recompile():
    optax = pytest.importorskip("optax")
    X, y = regression_data(6)

    def run():
        return js.fsa(
            X.copy(), y.copy(), 2, n_iter=30, optimizer=optax.sgd(0.05), loss=lambda s, t: 0.5 * jnp.mean((s - t) ** 2)
        )

    first = run()
    with count_compiles() as compiles:
        second = run()
    assert compiles[0] == 0
    np.testing.assert_array_equal(first.support, second.support)


def test_greedy_rls_result_composes_with_the_anytime_toolkit():
    X, y = regression_data(7)
    res = js.greedy_rls(X, y, 3, l2=1e-2)
    path = js.as_path(res)
    for step in (1, 2, 3):
        np.testing.assert_allclose(
            js.predict(res, X, budget=float(step)), rls_predict(res, X, step=step), rtol=1e-5, atol=1e-5
        )
    curve = js.objective_curve(res, X, y)
    assert curve.cost.tolist() == [0.0, 1.0, 2.0, 3.0] and curve.value[-1] > 0.9
    assert 0.0 < js.timeliness(curve) <= 1.0 and js.oracle_curve(curve).cost[-1] == 3.0
    assert js.timeliness(res) == pytest.approx(js.timeliness(js.train_curve(path)))
