"""Sharded-vs-unsharded cases (run by test_sharding.py with 4 fake CPU devices; not collected alone).

Each case runs a public solver on row-sharded inputs and on plain single-device inputs and asserts
identical orders / labels and values to tolerance. test_sharding.py inspects the HLO dumped while
these run for all-gathers of the (N, ·) inputs.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxselect as js

N = 104  # rows; keep in sync with test_sharding.N_ROWS
N_DEV = 4
pytestmark = pytest.mark.skipif(jax.device_count() < N_DEV, reason="needs XLA_FLAGS=--xla_force_host_platform_device_count=4")


def regression_data(d=12, T=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, d)) + rng.normal(size=d) * 3
    Y = X[:, [1, 4, 7]] @ rng.normal(size=(3, T)) + 0.5 * rng.normal(size=(N, T))
    return X, Y


def close(a, b, rtol=2e-4, atol=1e-5):
    """float32 (the default): row sums split over devices round differently than on one device."""
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def test_shard_rows_places_rows_on_every_device():
    X, _ = regression_data()
    Xs = js.shard_rows(X)
    assert len(Xs.sharding.device_set) == N_DEV
    assert {s.data.shape for s in Xs.addressable_shards} == {(N // N_DEV, 12)}
    with pytest.raises(ValueError, match="evenly"):
        js.shard_rows(np.zeros((10, 3)))
    with pytest.raises(ValueError, match="no axis"):
        js.shard_rows(np.zeros((8, 3)), js.data_mesh(), axis="model")


@pytest.mark.parametrize(
    "gram, offset", [(True, 0.0), (True, 1e4), (False, 0.0)], ids=["gram-raw", "gram-centred-copy", "gram-free"]
)
def test_sequencing(gram, offset):
    """Both Gram branches of prepare (XᵀX − nμμᵀ for small offsets, the centred copy for large)."""
    X, Y = regression_data()
    X = X + offset
    groups = js.Groups.from_ids(np.arange(12) // 2, np.linspace(1, 3, 6))
    Xs, Ys = js.shard_rows(X), js.shard_rows(Y)
    X, Y = jnp.asarray(X), jnp.asarray(Y)  # the same (XLA) moments kernel on one device; numpy X
    # takes the host kernel, compared with XLA in test_moments.py
    for solver in (js.cs_omp, js.cs_fr, js.doubling):
        a = solver(js.prepare(X, Y, groups, gram=gram))
        b = solver(js.prepare(Xs, Ys, groups, gram=gram))
        assert a.order.tolist() == b.order.tolist()
        close(a, b)


def test_group_lasso_path():
    X, Y = regression_data(seed=1)
    groups = js.Groups.from_ids(np.arange(12) // 3, [1.0, 2.0, 1.0, 3.0])
    a = js.group_lasso_path(js.prepare(jnp.asarray(X), jnp.asarray(Y), groups), n_lambdas=8)
    b = js.group_lasso_path(js.prepare(js.shard_rows(X), js.shard_rows(Y), groups), n_lambdas=8)
    assert a.order.tolist() == b.order.tolist()
    close(a, b, rtol=2e-3, atol=2e-4)  # float32 BCD stops anywhere within its KKT tolerance (1e-5·λ_max)


@pytest.mark.parametrize("loss, solver", [("logistic", "auto"), ("softmax", "cholesky"), ("softmax", "cg")])
def test_glm_omp(loss, solver):
    X, Y = regression_data(seed=2)
    y = (Y[:, 0] > np.median(Y[:, 0])).astype(int) if loss == "logistic" else np.digitize(Y[:, 0], np.quantile(Y[:, 0], [0.33, 0.66]))
    groups = np.arange(12) // 2
    # float64: the Newton refits stop anywhere within their tolerance, so in float32 a reordered
    # (sharded) reduction moves the models by up to ~tol; float64 makes the comparison sharp.
    with jax.enable_x64():
        a = js.glm_omp(X, y, groups, loss=loss, k=4, newton_solver=solver)
        b = js.glm_omp(js.shard_rows(X), y, groups, loss=loss, k=4, newton_solver=solver)
        assert a.coef.dtype == np.float64 and int(a.status) == int(b.status) == 0
        assert a.order.tolist() == b.order.tolist()
        close(a, b, rtol=1e-6, atol=1e-8)


def test_greedy_rls():
    X, Y = regression_data(seed=3)
    a = js.greedy_rls(X, Y, 5, l2=0.5 / N, bias=1.0)  # RLScore regparam 0.5
    b = js.greedy_rls(js.shard_rows(X), js.shard_rows(Y), 5, l2=0.5 / N, bias=1.0)
    assert a.selected.tolist() == b.selected.tolist()
    close(a, b, rtol=1e-4, atol=1e-4)  # float32: row sums split over devices round differently


def test_dwsm():
    X, _ = regression_data(seed=4)
    X = X[:, :5]
    y = (X[:, 0] + 0.3 * X[:, 1] > np.median(X[:, 0] + 0.3 * X[:, 1])).astype(int)
    kw = dict(lam=0.05, n_iter=2, states_per_example=2)
    a = js.dwsm_fit(jax.random.key(0), X, y, **kw)
    b = js.dwsm_fit(jax.random.key(0), js.shard_rows(X), y, **kw)
    close(a.theta, b.theta)
    la, za = js.dwsm_predict(a, X)
    lb, zb = js.dwsm_predict(b, js.shard_rows(X))
    np.testing.assert_array_equal(np.asarray(la), np.asarray(lb))
    np.testing.assert_array_equal(np.asarray(za), np.asarray(zb))


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_fsa(loss):
    rng = np.random.default_rng(6)
    X = rng.standard_normal((N, 16))
    y = X[:, 4] - 2 * X[:, 11] + 0.1 * rng.standard_normal(N)
    if loss == "logistic":
        y = (y > 0).astype(float)
    a = js.fsa(X, y, 2, loss=loss, n_iter=20)
    b = js.fsa(js.shard_rows(X), js.shard_rows(y), 2, loss=loss, n_iter=20)
    assert a.support.tolist() == b.support.tolist() == [4, 11]
    close(a.coef, b.coef)
    close(js.fsa_predict(a, X), js.fsa_predict(b, js.shard_rows(X)))


def test_refits_and_their_gradients():
    X, Y = regression_data(seed=5)
    Xs, Ys = js.shard_rows(X), js.shard_rows(Y)
    support = np.arange(12) % 3 == 0
    close(js.ridge_refit(X, Y, support, l2=0.1), js.ridge_refit(Xs, Ys, support, l2=0.1))
    g = jax.grad(lambda X: jnp.sum(js.ridge_refit(X, Y, support, l2=0.1)[0]))
    close(g(jnp.asarray(X)), g(Xs))
    sel = np.array([1, 4, 7])
    close(js.rls_refit(X, Y, sel, l2=0.5, bias=1.0), js.rls_refit(Xs, Ys, sel, l2=0.5, bias=1.0))
