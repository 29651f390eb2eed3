"""Sharded-vs-unsharded cases (run by test_sharding.py with 4 fake CPU devices; not collected alone).

Each case runs a solver on row-sharded inputs and on plain single-device inputs, asserts identical
orders / values to tolerance, and inspects the compiled HLO of the sharded solve to check that X is
never all-gathered (the row reductions must be partial sums plus all-reduce).
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxselect as js

N_DEV = 4
pytestmark = pytest.mark.skipif(jax.device_count() < N_DEV, reason="needs XLA_FLAGS=--xla_force_host_platform_device_count=4")


def full_row_gathers(fn, *args, n):
    """HLO lines of the compiled, sharded ``fn(*args)`` that all-gather an array with n rows."""
    text = jax.jit(fn).lower(*args).compile().as_text()
    return [line for line in text.splitlines() if "all-gather" in line and re.search(rf"\[{n}[,\]]", line)]


def regression_data(n=96, d=12, T=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) + rng.normal(size=d) * 3
    Y = X[:, [1, 4, 7]] @ rng.normal(size=(3, T)) + 0.5 * rng.normal(size=(n, T))
    return X, Y


@pytest.mark.parametrize("gram", [True, False])
def test_sequencing_sharded(gram):
    X, Y = regression_data()
    groups = js.Groups.from_ids(np.arange(12) // 2, np.linspace(1, 3, 6))
    mesh = js.data_mesh()
    Xs, Ys = js.shard_rows(X, mesh), js.shard_rows(Y, mesh)
    assert len(Xs.sharding.device_set) == N_DEV
    for solver in (js.cs_omp, js.cs_fr, js.doubling):
        a = solver(js.prepare(X, Y, groups, gram=gram))
        b = solver(js.prepare(Xs, Ys, groups, gram=gram))
        assert a.order.tolist() == b.order.tolist()
        np.testing.assert_allclose(a.coef, b.coef, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(a.objective, b.objective, rtol=1e-10)

    def solve(X, Y):
        return js.cs_fr(js.prepare(X, Y, groups, gram=gram)).coef

    assert full_row_gathers(solve, Xs, Ys, n=X.shape[0]) == []


def test_ridge_refit_sharded():
    X, Y = regression_data(seed=1)
    Xs, Ys = js.shard_rows(X), js.shard_rows(Y)
    support = np.arange(12) % 3 == 0
    a = js.ridge_refit(X, Y, support, l2=0.1)
    b = js.ridge_refit(Xs, Ys, support, l2=0.1)
    np.testing.assert_allclose(a[0], b[0], rtol=1e-9)
    assert full_row_gathers(lambda X, Y: js.ridge_refit(X, Y, support, l2=0.1), Xs, Ys, n=96) == []
    g = jax.grad(lambda X: jnp.sum(js.ridge_refit(X, Y, support, l2=0.1)[0]))
    np.testing.assert_allclose(g(jnp.asarray(X)), g(Xs), rtol=1e-8, atol=1e-12)


def test_shard_rows_validation():
    with pytest.raises(ValueError, match="evenly"):
        js.shard_rows(np.zeros((10, 3)))
    with pytest.raises(ValueError, match="no axis"):
        js.shard_rows(np.zeros((8, 3)), js.data_mesh(), axis="model")
