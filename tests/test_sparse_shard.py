"""Sparse rows split over devices (``js.shard_rows`` on sparse X, ``SparseDesign.shard``): the
row-sharded design is the unsharded one — products, Gram columns, the front door's summary, and the
``fsa`` / ``prepare(gram=False)`` + ``cs_omp`` answers — and its products run per device.

One device in this process; 4 (fake CPU) devices in a subprocess (XLA_FLAGS must be set before jax
is imported). Several processes: ``tests/test_multiprocess.py``.
"""

import os
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from jax.experimental import sparse as jsparse

import jaxselect as js
from jaxselect.design import ShardedSparseDesign, SparseDesign, as_data

N, D = 37, 9


def _sparse(seed=2):
    X = sp.random(N, D, density=0.35, format="csr", random_state=seed, dtype=np.float32)
    X = X.tolil()
    X[:, 5] = 0.0  # an empty column: constant, inert
    return X.tocsr()


def _weighted_reference(A, w):
    """Weighted column means and standard deviations (float64 numpy: the slow reference)."""
    A, w = A.astype(np.float64), w.astype(np.float64)
    mean = w @ A / w.sum()
    return mean, np.sqrt(w @ (A - mean) ** 2 / w.sum())


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "bcoo"])
def test_shard_rows_takes_sparse_x(fmt):
    X = _sparse()
    y = np.arange(N, dtype=np.float32)
    Xin = jsparse.BCOO.fromdense(X.toarray()) if fmt == "bcoo" else X.asformat(fmt)
    Xs, ys, w = js.shard_rows(Xin, y)
    assert isinstance(Xs, ShardedSparseDesign) and Xs.shape == (N, D) and Xs.axis == "data"
    np.testing.assert_array_equal(np.asarray(ys), y)
    np.testing.assert_array_equal(np.asarray(w), np.ones(N, np.float32))
    np.testing.assert_array_equal(np.asarray(Xs.materialize()), X.toarray())  # raw: X itself
    assert type(js.shard_rows(Xin)) is ShardedSparseDesign  # one array: the design alone


def test_front_door_standardises_a_sparse_design_with_the_weights():
    X = _sparse()
    sw = np.random.default_rng(0).uniform(0.5, 2.0, N).astype(np.float32)
    Xs, sws, w = js.shard_rows(X, sw)
    data = as_data(Xs, targets=None, sample_weight=sws * w)
    mean, std = _weighted_reference(X.toarray(), sw)
    live = std > 0
    assert data.summary.live.tolist() == live.tolist() and not live[5]
    np.testing.assert_allclose(np.asarray(data.summary.mean), mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(data.summary.scale)[live], std[live], rtol=1e-5)
    ref = as_data(X, targets=None, sample_weight=sw).design
    v = np.random.default_rng(1).normal(size=D).astype(np.float32)
    np.testing.assert_allclose(np.asarray(data.design.mv(v)), np.asarray(ref.mv(v)), rtol=1e-5, atol=1e-5)


def test_bad_sharded_sparse_input_says_what_to_fix():
    X = _sparse()
    with pytest.raises(ValueError, match="has 36 rows but X has 37"):
        js.shard_rows(X, np.zeros(N - 1))
    Xs, w = js.shard_rows(X, weights=True)
    with pytest.raises(ValueError, match="already row-sharded"):
        Xs.shard()
    bad = Xs._replace(data=Xs.data.at[0].set(jnp.nan))
    with pytest.raises(ValueError, match="NaN or Inf among its entries"):
        as_data(bad, targets=None)
    with pytest.raises(ValueError, match="at least 2 rows"):
        as_data(SparseDesign.from_csr(js.design.as_sparse_csr(X[:1])), targets=None, min_rows=2)


_FOUR_DEVICES = r"""
import numpy as np, scipy.sparse as sp, jax, jax.numpy as jnp, jaxselect as js
from jaxselect.design import ShardedSparseDesign
assert jax.device_count() == 4
rng = np.random.default_rng(3)
X = sp.random(37, 30, density=0.25, format="lil", random_state=3, dtype=np.float32)
X[:20, 0] = 0.0          # column 0: empty in the first two devices' rows, live over all rows
X[20:, 0] = rng.normal(size=(17, 1)).astype(np.float32) + 1.0
X[:, 7] = 0.0            # an empty column
X = X.tocsr(); X.eliminate_zeros()
y = (2 * X[:, 0].toarray().ravel() - 3 * X[:, 4].toarray().ravel() + 0.05 * rng.normal(size=37)).astype(np.float32)
sw = rng.uniform(0.5, 2.0, 37).astype(np.float32)
tol = dict(rtol=2e-4, atol=2e-5)

mesh = jax.make_mesh((4,), ("data",))     # Explicit axes (JAX's default)
Xs, ys, sws, w = js.shard_rows(X, y, sw, mesh=mesh)
assert isinstance(Xs, ShardedSparseDesign) and Xs.shape == (40, 30) and float(w.sum()) == 37
assert len(Xs.data.sharding.device_set) == 4 and Xs.nnz % 4 == 0
for shard in Xs.rows.addressable_shards:       # each device holds the entries of its own 10 rows
    i = shard.index[0].start // (Xs.nnz // 4)
    r = np.asarray(shard.data)
    assert r.min() >= 10 * i and r.max() < 10 * (i + 1) and (np.diff(r) >= 0).all()
try:
    js.shard_rows(X, mesh=mesh)   # one array, 37 rows over 4 devices: needs weights=True
    raise AssertionError("uneven rows without weights were accepted")
except ValueError as e:
    assert "weights=True to pad to 40 rows" in str(e), e
weights = sws * w
d1 = js.as_data(Xs, targets=None, sample_weight=weights)
d0 = js.as_data(X, targets=None, sample_weight=sw)
assert d1.summary.live.tolist() == d0.summary.live.tolist() and d1.summary.live[0] and not d1.summary.live[7]
for a, b in zip(d1.summary[:2], d0.summary[:2]):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), **tol)
op, ref = d1.design, d0.design
v = rng.normal(size=30).astype(np.float32)
u = np.zeros(40, np.float32); u[:37] = rng.normal(size=37)
idx = jnp.array([0, 4, 4, 9])
np.testing.assert_allclose(np.asarray(op.mv(v))[:37], np.asarray(ref.mv(v)), **tol)
np.testing.assert_allclose(np.asarray(op.rmv(u)), np.asarray(ref.rmv(u[:37])), **tol)
np.testing.assert_allclose(np.asarray(op.rmv(np.stack([u, 2 * u]))), np.asarray(ref.rmv(np.stack([u[:37], 2 * u[:37]]))), **tol)
np.testing.assert_allclose(np.asarray(op.materialize())[:37], np.asarray(ref.materialize()), **tol)
np.testing.assert_allclose(np.asarray(op.gram_columns(idx, weights)), np.asarray(ref.gram_columns(idx, d0.weights)), **tol)
# reverse mode through the per-device products (shard_map, psum): the unsharded gradients
g1 = jax.grad(lambda u: jnp.sum(op.rmv(u) ** 2))(jnp.asarray(u))
g0 = jax.grad(lambda u: jnp.sum(ref.rmv(u) ** 2))(jnp.asarray(u[:37]))
np.testing.assert_allclose(np.asarray(g1)[:37], np.asarray(g0), rtol=2e-4, atol=2e-4)
h1 = jax.grad(lambda v: jnp.sum(op.mv(v)[:37] ** 2))(jnp.asarray(v))
np.testing.assert_allclose(np.asarray(h1), np.asarray(jax.grad(lambda v: jnp.sum(ref.mv(v) ** 2))(jnp.asarray(v))), rtol=2e-4, atol=2e-4)
# the products run per device: X v without any collective, u X with one all-reduce and no all-gather
mv_hlo = jax.jit(lambda o, v: o.mv(v)).lower(op, v).compile().as_text()
rmv_hlo = jax.jit(lambda o, u: o.rmv(u)).lower(op, jnp.asarray(u)).compile().as_text()
assert "all-gather" not in mv_hlo and "all-reduce" not in mv_hlo, mv_hlo[-2000:]
assert "all-gather" not in rmv_hlo and "all-reduce" in rmv_hlo, rmv_hlo[-2000:]
# compact with concrete arrays: each device's block shrinks to the kept columns' entries
c = op.compact(jnp.array([0, 4, 9]))
assert isinstance(c, ShardedSparseDesign) and c.nnz < op.nnz and len(c.data.sharding.device_set) == 4
np.testing.assert_allclose(np.asarray(c.mv(v[:3])), np.asarray(op.take(jnp.array([0, 4, 9])).mv(v[:3])), **tol)
# SparseDesign.shard of the standardised single-device design: the same products
sh, w2 = ref.shard(js.data_mesh())
np.testing.assert_allclose(np.asarray(sh.mv(v))[:37], np.asarray(ref.mv(v)), **tol)
np.testing.assert_allclose(np.asarray(w2), np.asarray(w))
# the solvers: the single-device answer
f1 = js.fsa(Xs, ys, 2, n_iter=30, l2=1e-3, sample_weight=weights)
f0 = js.fsa(X, y, 2, n_iter=30, l2=1e-3, sample_weight=sw)
assert f1.support.tolist() == f0.support.tolist() and 0 in f0.support.tolist(), (f1.support, f0.support)
np.testing.assert_allclose(np.asarray(f1.coef), np.asarray(f0.coef), rtol=2e-3, atol=2e-4)
r1 = js.fsa(Xs, ys, 2, n_iter=30, l2=1e-3, sample_weight=weights, refine=1)
r0 = js.fsa(X, y, 2, n_iter=30, l2=1e-3, sample_weight=sw, refine=1)
assert sorted(r1.support.tolist()) == sorted(r0.support.tolist()), (r1.support, r0.support)
np.testing.assert_allclose(np.sort(np.asarray(r1.coef)), np.sort(np.asarray(r0.coef)), rtol=2e-3, atol=2e-4)
p1 = js.cs_omp(js.prepare(Xs, ys, gram=False, sample_weight=weights), k=3)
p0 = js.cs_omp(js.prepare(X, y, gram=False, sample_weight=sw), k=3)
assert p1.order.tolist() == p0.order.tolist() and 0 in p0.order.tolist(), (p1.order, p0.order)
np.testing.assert_allclose(np.asarray(p1.coef), np.asarray(p0.coef), rtol=2e-3, atol=2e-4)
print("sparse shard ok")
"""


def test_four_devices_give_the_unsharded_design_and_answers():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, JAX_DISABLE_MOST_OPTIMIZATIONS="true")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()
    proc = subprocess.run([sys.executable, "-c", _FOUR_DEVICES], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "sparse shard ok" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_sharded_design_takes_the_operator_polish_and_keeps_the_step_subsample_in_the_run():
    """The polish of a large support compacts with ``pad=True`` (a sharded design's blocks are
    already padded) and reaches the unsharded polish; the first stage's step subsample of a
    sharded design is not made outside the run."""
    from jaxselect.anneal import fsa_prepare
    from jaxselect.anneal.polish import polish
    from jaxselect.anneal.run import RunPlan, subsample_design

    X = _sparse()
    y = (np.asarray(X.sum(axis=1)).ravel() > np.median(np.asarray(X.sum(axis=1)))).astype(np.float32)
    Xs, ys, w = js.shard_rows(X, y)
    sharded = fsa_prepare(Xs, ys, loss="logistic", l2=0.1, sample_weight=w)
    plain = fsa_prepare(X, y, loss="logistic", l2=0.1)
    assert subsample_design(sharded, RunPlan((D,), 16, "power", False)) is None
    cols = jnp.asarray([0, 2, 4], jnp.int32)
    args = (cols, jnp.zeros((3, 1), jnp.float32), jnp.zeros((), jnp.float32), jnp.ones((3,), bool),
            jnp.float32(1e-6), jnp.int32(200))
    a, b = polish(sharded, *args, dense_bytes=0), polish(plain, *args, dense_bytes=0)
    np.testing.assert_allclose(np.asarray(a.coef), np.asarray(b.coef), rtol=2e-3, atol=2e-3)
