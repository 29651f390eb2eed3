"""Sparse design operators give the dense answer, and bad sparse input gets a clear error.

The reference is the standardised design built explicitly in float64 numpy from ``X.toarray()``
(the rule of :mod:`jaxselect.design.summary`); every format (scipy CSR/CSC/COO, arrays and
matrices, duplicates, jax BCOO/BCSR) goes through ``as_data`` and must reproduce it.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from jax.experimental import sparse as jsparse

import jaxselect as js
from jaxselect.design import DesignOperator, HostSparseDesign, SparseDesign, as_data, as_sparse_csr


N, D = 37, 8


def _dense():
    """(N, D) float32 with: a fully stored column with one implicit zero (1), a constant stored
    column (3), an empty column (5), a column stored only in the weight-0 rows (6)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D)) * (rng.uniform(size=(N, D)) < 0.3)
    X[:, 1] = rng.uniform(1.0, 2.0, size=N)
    X[10, 1] = 0.0
    X[:, 3] = 2.5
    X[:, 5] = 0.0
    X[:, 6] = 0.0
    X[:3, 6] = [1.0, -2.0, 3.0]
    X[:, 7] *= 1e3
    return X.astype(np.float32)


def _weights():
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=N).astype(np.float32)
    w[:4] = 0.0
    return w


def _reference(X, w):
    X64 = X.astype(np.float64)
    ww = np.ones(len(X)) if w is None else w.astype(np.float64)
    pos = ww > 0
    mean = ww @ X64 / ww.sum()
    var = ww @ (X64 - mean) ** 2 / ww.sum()
    lo, hi = X64[pos].min(0), X64[pos].max(0)
    live = hi > lo
    factor = np.where(live, 1.0 / np.sqrt(np.where(live, var, 1.0)), 0.0)
    return mean, np.where(live, np.sqrt(var), 1.0), live, (X64 - mean) * factor, lo, hi


def _with_duplicates(X):
    """COO whose entries are split in two halves that add up (the documented rule: duplicates sum)."""
    c = sp.coo_matrix(X)
    r = np.concatenate([c.row, c.row])
    k = np.concatenate([c.col, c.col])
    half = (c.data / 2).astype(np.float32)
    return sp.coo_matrix((np.concatenate([half, c.data - half]), (r, k)), shape=X.shape)


def _bcoo_padded(X):
    """BCOO with an out-of-range padding entry (as jax's own sparse ops produce)."""
    r, c = np.nonzero(X)
    idx = np.stack([np.append(r, N), np.append(c, D)], axis=1).astype(np.int32)
    return jsparse.BCOO((jnp.asarray(np.append(X[r, c], 1.0).astype(np.float32)), jnp.asarray(idx)), shape=X.shape)


def _bcsr(X):
    c = sp.csr_matrix(X)
    return jsparse.BCSR((jnp.asarray(c.data), jnp.asarray(c.indices), jnp.asarray(c.indptr)), shape=X.shape)


FORMATS = {
    "csr": sp.csr_matrix,
    "csc": sp.csc_matrix,
    "coo": sp.coo_matrix,
    "csr_array-f64": lambda X: sp.csr_array(X.astype(np.float64)),
    "coo-int64-duplicates": lambda X: _with_duplicates(X),
    "bcoo": _bcoo_padded,
    "bcsr": _bcsr,
}


@pytest.mark.parametrize("storage", ["device", "host"])
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_gives_the_dense_answer(fmt, storage):
    X = _dense()
    w = _weights()
    for weights in (None, w):
        data = as_data(FORMATS[fmt](X), targets=None, sample_weight=weights, storage=storage)
        op = data.design
        assert isinstance(op, SparseDesign if storage == "device" else HostSparseDesign)
        assert isinstance(op, DesignOperator) and op.shape == (N, D) and op.dtype == np.float32
        mean, scale, live, Xs, _, _ = _reference(X, weights)
        np.testing.assert_array_equal(np.asarray(data.summary.live), live)
        np.testing.assert_allclose(np.asarray(data.summary.mean), mean, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(data.summary.scale), scale, rtol=1e-5)
        np.testing.assert_allclose(np.asarray(op.materialize()), Xs, rtol=2e-4, atol=2e-4)


def _check_methods(op, X, w):
    _, _, _, Xs, _, _ = _reference(X, None if w is None else np.asarray(w))
    ww = np.ones(N) if w is None else np.asarray(w, np.float64)
    rng = np.random.default_rng(2)
    f32 = np.float32
    v, V = rng.normal(size=D).astype(f32), rng.normal(size=(D, 3)).astype(f32)
    u, U = rng.normal(size=N).astype(f32), rng.normal(size=(2, N)).astype(f32)
    tol = dict(rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(np.asarray(op.mv(v)), Xs @ v, **tol)
    np.testing.assert_allclose(np.asarray(op.mv(V)), Xs @ V, **tol)
    np.testing.assert_allclose(np.asarray(op.rmv(u)), u @ Xs, **tol)
    np.testing.assert_allclose(np.asarray(op.rmv(U)), U @ Xs, **tol)
    gram = (Xs * ww[:, None]).T @ Xs / ww.sum()
    np.testing.assert_allclose(np.asarray(op.gram(w)), gram, **tol)
    idx = np.array([4, 0, 7, 2])
    np.testing.assert_allclose(np.asarray(op.gram_columns(idx, w)), gram[:, idx], **tol)
    for sub in (op.take(idx), op.compact(idx)):
        assert sub.shape == (N, idx.size)
        np.testing.assert_allclose(np.asarray(sub.materialize()), Xs[:, idx], **tol)
        np.testing.assert_allclose(np.asarray(sub.mv(v[:4])), Xs[:, idx] @ v[:4], **tol)
        np.testing.assert_allclose(np.asarray(sub.rmv(U)), U @ Xs[:, idx], **tol)
    assert op.compact(idx).nnz < op.nnz  # compaction drops the other columns' entries
    for sub in (op.take(idx), op.compact(idx)):  # the summary of the stored columns, dropped entries aside
        summary, lo, hi = sub.summarize(w)
        _, scale, live, _, ref_lo, ref_hi = _reference(X[:, idx], None if w is None else np.asarray(w))
        np.testing.assert_array_equal(np.asarray(summary.live), live)
        np.testing.assert_allclose(np.asarray(lo), ref_lo, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(hi), ref_hi, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(summary.scale), scale, rtol=1e-5)
    sub = op.subsample_rows(3)
    assert sub.shape == (len(range(0, N, 3)), D)
    np.testing.assert_allclose(np.asarray(sub.materialize()), Xs[::3], **tol)
    np.testing.assert_allclose(np.asarray(sub.rmv(u[::3])), u[::3] @ Xs[::3], **tol)
    blocks = list(op.row_blocks(20))
    assert [start for start, _ in blocks] == [0, 20]
    np.testing.assert_allclose(np.concatenate([np.asarray(b.materialize()) for _, b in blocks]), Xs, **tol)
    np.testing.assert_allclose(np.concatenate([np.asarray(b.mv(v)) for _, b in blocks]), Xs @ v, **tol)


@pytest.mark.parametrize("storage", ["device", "host"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_every_method_gives_the_dense_answer(storage, weighted):
    X = _dense()
    w = _weights() if weighted else None
    data = as_data(sp.csr_matrix(X), targets=None, sample_weight=w, storage=storage)
    _check_methods(data.design, X, data.weights)


@pytest.mark.parametrize("storage", ["device", "host"])
def test_summarize_counts_implicit_zeros(storage):
    """Extremes over the rows that count, implicit zeros included: column 1 reaches 0 only through
    its one missing entry; an empty column is constant at 0; column 6 is live only unweighted."""
    X = _dense()
    for w in (None, _weights()):
        csr = as_sparse_csr(sp.csr_matrix(X))
        raw = SparseDesign.raw(csr) if storage == "device" else HostSparseDesign.raw(csr)
        summary, lo, hi = raw.summarize(None if w is None else (jnp.asarray(w) if storage == "device" else w))
        _, _, live, _, ref_lo, ref_hi = _reference(X, w)
        np.testing.assert_allclose(np.asarray(lo), ref_lo, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(hi), ref_hi, rtol=1e-6)
        np.testing.assert_array_equal(np.asarray(summary.live), live)
        lo, hi = np.asarray(lo), np.asarray(hi)
        assert float(lo[1]) == 0.0 and float(hi[5]) == float(lo[5]) == 0.0
    assert not live[6] and _reference(X, None)[2][6]


def test_variance_has_no_cancellation():
    """A column 1e4 + small noise, stored densely: E[x²] − m² in float32 would lose every digit."""
    rng = np.random.default_rng(3)
    X = np.zeros((N, 2), np.float32)
    X[:, 0] = 1e4 + rng.normal(size=N).astype(np.float32) * 1e-2
    X[::3, 1] = 1.0
    data = as_data(sp.csr_matrix(X), targets=None)
    ref = X.astype(np.float64).std(axis=0)
    dense = js.design.column_summary(X).scale
    np.testing.assert_allclose(np.asarray(data.summary.scale), np.asarray(dense), rtol=1e-3)
    np.testing.assert_allclose(np.asarray(data.summary.scale), ref, rtol=5e-3)
    host = as_data(sp.csr_matrix(X), targets=None, storage="host").summary.scale  # float64 on the host
    np.testing.assert_allclose(host, ref, rtol=1e-5)


def test_sparse_design_under_jit_and_to_device():
    X = _dense()
    w = jnp.asarray(_weights())
    dev = as_data(sp.csr_matrix(X), targets=None, sample_weight=w).design
    host = as_data(sp.csr_matrix(X), targets=None, sample_weight=np.asarray(w), storage="host").design
    idx = jnp.array([4, 0, 7])
    v = jnp.asarray(np.random.default_rng(4).normal(size=D), jnp.float32)
    u = jnp.asarray(np.random.default_rng(5).normal(size=N), jnp.float32)

    def products(op, v, u, idx, w):
        sub = op.subsample_rows(2)
        return (op.mv(v), op.rmv(u), op.take(idx).mv(v[:3]), op.gram_columns(idx, w), op.compact(idx).rmv(u),
                sub.mv(v), sub.rmv(u[::2]))

    jitted = jax.jit(products)(dev, v, u, idx, w)
    for a, b in zip(jitted, products(dev, v, u, idx, w)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)
    moved = host.to_device()
    assert isinstance(moved, SparseDesign)
    np.testing.assert_allclose(np.asarray(moved.materialize()), host.materialize(), rtol=1e-6, atol=1e-6)
    summary = jax.jit(lambda o, w: o.summarize(w)[0])(SparseDesign.raw(as_sparse_csr(sp.csr_matrix(X))), w)
    mean, scale = _reference(X, _weights())[:2]
    np.testing.assert_allclose(np.asarray(summary.scale), scale, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(summary.mean), mean, rtol=1e-5, atol=1e-6)


def test_shard_pads_rows_and_entries():
    X = _dense()
    op = as_data(sp.csr_matrix(X), targets=None).design
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("data",))
    sharded, w = op.shard(mesh)
    assert sharded.shape[0] == w.shape[0] >= N and float(np.asarray(w).sum()) == N
    assert (np.diff(np.asarray(sharded.rows)) >= 0).all()
    v = jnp.asarray(np.random.default_rng(6).normal(size=D), jnp.float32)
    np.testing.assert_allclose(np.asarray(sharded.mv(v))[:N], np.asarray(op.mv(v)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("storage", ["device", "host"])
def test_take_repeated_and_nested_columns(storage):
    """A repeated index is the same column twice (as dense ``take``), eager and under jit, and a
    take of a take composes; this is what padded group index rows ask for."""
    X = _dense()
    op = as_data(sp.csr_matrix(X), targets=None, storage=storage).design
    Xs = _reference(X, None)[3]
    idx, inner = np.array([4, 0, 4, 7, 0]), np.array([2, 2, 0, 3])
    v = np.random.default_rng(7).normal(size=idx.size).astype(np.float32)
    u = np.random.default_rng(8).normal(size=(2, N)).astype(np.float32)
    tol = dict(rtol=2e-4, atol=2e-4)
    takes = [op.take(idx)]
    if storage == "device":
        takes.append(jax.jit(lambda o, i: o.take(i))(op, jnp.asarray(idx)))
    for sub in takes:
        np.testing.assert_allclose(np.asarray(sub.materialize()), Xs[:, idx], **tol)
        np.testing.assert_allclose(np.asarray(sub.mv(v)), Xs[:, idx] @ v, **tol)
        np.testing.assert_allclose(np.asarray(sub.rmv(u)), u @ Xs[:, idx], **tol)
        np.testing.assert_allclose(np.asarray(sub.take(inner).materialize()), Xs[:, idx[inner]], **tol)
        np.testing.assert_allclose(np.asarray(sub.summarize()[2]), X[:, idx].max(0), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(op.gram_columns(idx)), (Xs.T @ Xs / N)[:, idx], **tol)


def test_take_is_lazy_and_compact_keeps_only_the_named_entries():
    """``take`` names columns without touching the entries (traced compaction is O(D)); a concrete
    ``compact`` (unsorted, repeated, nested) holds exactly the kept columns' entries."""
    X = _dense()
    op = as_data(sp.csr_matrix(X), targets=None).design
    Xs = _reference(X, None)[3]
    sub = op.take(np.array([5, 1]))
    assert sub.n_slots == op.shape[1] and np.array_equal(np.asarray(sub.cols), np.asarray(op.cols))
    idx, inner = np.array([6, 2, 6, 0]), np.array([3, 0, 0])
    tol = dict(rtol=2e-4, atol=2e-4)
    v = np.random.default_rng(3).normal(size=idx.size).astype(np.float32)
    u = np.random.default_rng(4).normal(size=N).astype(np.float32)
    for small, cols in ((op.compact(idx), idx), (op.compact(idx).compact(inner), idx[inner]), (op.compact([3, 1]), [3, 1])):
        assert small.nnz == int(np.count_nonzero(X[:, np.unique(cols)]))
        np.testing.assert_allclose(np.asarray(small.materialize()), Xs[:, cols], **tol)
        np.testing.assert_allclose(np.asarray(small.mv(v[: len(cols)])), Xs[:, cols] @ v[: len(cols)], **tol)
        np.testing.assert_allclose(np.asarray(small.rmv(u)), u @ Xs[:, cols], **tol)
        np.testing.assert_allclose(np.asarray(small.summarize()[0].mean), X[:, cols].mean(0), rtol=1e-5, atol=1e-6)


def test_canonical_form_and_input_untouched():
    X = _dense()
    dup = sp.csr_matrix(_with_duplicates(X))  # CSR with repeated (row, col) entries, unsorted
    dup.has_canonical_format = False
    before = (dup.data.copy(), dup.indices.copy(), dup.indptr.copy())
    csr = as_sparse_csr(dup)
    assert csr.has_canonical_format and csr.indices.dtype == np.int32 and csr.indptr.dtype == np.int32
    assert csr.dtype == np.float32 and csr.nnz == np.count_nonzero(X)
    np.testing.assert_allclose(csr.toarray(), X, rtol=1e-6, atol=1e-7)
    for a, b in zip(before, (dup.data, dup.indices, dup.indptr)):
        np.testing.assert_array_equal(a, b)
    plain = sp.csr_matrix(X)
    assert np.shares_memory(as_sparse_csr(plain).data, plain.data)  # canonical float32 CSR: no copy
    ints = sp.csr_matrix((X != 0).astype(np.int64))
    assert as_sparse_csr(ints).dtype == np.float32  # integer values: the default float, as dense


def test_as_data_sparse_with_targets_and_empty_rows():
    X = _dense()
    X[7] = 0.0  # an empty row is fine
    y = np.arange(N) % 2
    data = as_data(sp.csr_matrix(X), y, targets="binary")
    assert data.Y.shape == (N,) and data.design.shape == (N, D)
    with pytest.raises(TypeError, match="sparse X yet.*toarray"):
        data.X


BAD = [
    (lambda X: sp.csr_matrix(np.where(np.arange(N)[:, None] == 2, np.nan, X)), {}, ValueError, r"NaN or Inf in row\(s\) \[2\]"),
    (lambda X: sp.csr_matrix(X.astype(np.float64) * 1e40), {}, ValueError, "beyond the range"),
    (lambda X: sp.csr_matrix(np.eye(4) * 1e38), {}, ValueError, "too large"),
    (lambda X: sp.csr_matrix(X), dict(Y=np.ones(N - 1)), ValueError, "rows"),
    (lambda X: sp.csr_matrix(X[:1]), {}, ValueError, "at least 2 rows"),
    (lambda X: sp.csr_matrix(X.astype(np.complex64)), {}, TypeError, "numeric array; got dtype complex64"),
    (lambda X: sp.csr_matrix((N, D), dtype=np.float32), {}, ValueError, "every column of X is constant"),
    (lambda X: sp.csr_matrix(X), dict(constant_columns="raise"), ValueError, r"constant column\(s\) \[3, 5\]"),
    (lambda X: sp.coo_matrix(([1.0], ([0], [2**31])), shape=(3, 2**31 + 1)), {}, ValueError, "int32"),
    (lambda X: sp.csr_matrix(X), dict(with_moments=True, storage="host"), ValueError, "with_moments"),
    (lambda X: jsparse.BCOO((jnp.ones((2, 1)), jnp.zeros((2, 1, 2), jnp.int32)), shape=(2, 3, 4)), {}, ValueError, "batch"),
]


@pytest.mark.parametrize("make, kwargs, error, match", BAD, ids=lambda x: getattr(x, "__name__", None))
def test_bad_sparse_input_says_what_to_fix(make, kwargs, error, match):
    X = _dense()
    Y = kwargs.pop("Y", None)
    kwargs.setdefault("targets", None if Y is None else "regression")
    with pytest.raises(error, match=match):
        as_data(make(X), Y, **kwargs)


def test_dense_only_functions_name_the_sparse_route():
    from jaxselect._validation import as_float_matrix

    with pytest.raises(TypeError, match="sparse matrix.*toarray"):
        as_float_matrix(sp.csr_matrix(_dense()))


def test_traced_sparse_input_is_refused():
    b = _bcoo_padded(_dense())
    with pytest.raises(TypeError, match="traced"):
        jax.jit(lambda b: as_data(b, targets=None).summary.mean)(b)


def test_package_exports():
    assert js.design.SparseDesign is SparseDesign and js.design.HostSparseDesign is HostSparseDesign


_SHARDED = """
import numpy as np, scipy.sparse as sp, jax, jax.numpy as jnp, jaxselect as js
assert jax.device_count() == 4
X = sp.random(37, 9, density=0.3, format="csr", random_state=2, dtype=np.float32)
op = js.as_data(X, targets=None).design
mesh = jax.sharding.Mesh(np.array(jax.devices()), ("data",))
sh, w = op.shard(mesh)
assert len(sh.data.sharding.device_set) == 4 and sh.shape == (40, 9) and float(w.sum()) == 37
assert (np.diff(np.asarray(sh.rows)) >= 0).all()  # padding keeps the rows sorted
rng = np.random.default_rng(0)
v = jnp.asarray(rng.normal(size=9), jnp.float32)
u = np.zeros(40, np.float32); u[:37] = rng.normal(size=37)
mv = jax.jit(lambda o, v: o.mv(v))(sh, v)
rmv = jax.jit(lambda o, u: o.rmv(u))(sh, jax.device_put(u, sh.data.sharding))
np.testing.assert_allclose(np.asarray(mv)[:37], np.asarray(op.mv(v)), rtol=1e-5, atol=1e-5)
np.testing.assert_allclose(np.asarray(rmv), np.asarray(op.rmv(jnp.asarray(u[:37]))), rtol=1e-5, atol=1e-5)
np.testing.assert_allclose(np.asarray(sh.summarize(w)[0].scale), np.asarray(op.summarize()[0].scale), rtol=1e-5)
print("sharded ok")
"""


def test_shard_over_four_devices_gives_the_unsharded_products():
    """Rows split over 4 (fake CPU) devices: products and the weighted summary equal one device's."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root, JAX_DISABLE_MOST_OPTIMIZATIONS="true")
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()
    proc = subprocess.run([sys.executable, "-c", _SHARDED], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "sharded ok" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_products_in_entry_blocks_equal_one_pass(monkeypatch):
    """Above two blocks of entries the products add block by block into the accumulator: the
    additions happen in the same order, so the results are bitwise those of one pass; take shares
    the entries (no copy) and compact(pad=True) pads to the bucket with inert zeros."""
    import jaxselect.design.sparse as S

    rng = np.random.default_rng(4)
    X = sp.random(400, 90, density=0.2, format="csr", random_state=4, dtype=np.float32)
    op = SparseDesign.from_csr(X, mean=rng.random(90).astype(np.float32), factor=rng.random(90).astype(np.float32))
    v = jnp.asarray(rng.normal(size=90), jnp.float32)
    u = jnp.asarray(rng.normal(size=400), jnp.float32)
    V, U = jnp.asarray(rng.normal(size=(90, 3)), jnp.float32), jnp.asarray(rng.normal(size=(3, 400)), jnp.float32)
    idx = jnp.asarray([5, 1, 1, 60], jnp.int32)

    def products():
        sub = op.take(idx)
        return [op.mv(v), op.rmv(u), op.mv(V), op.rmv(U), sub.mv(v[:4]), sub.rmv(u)]

    one = products()
    monkeypatch.setattr(S, "PRODUCT_BLOCK", 1000)  # nnz 7 200 (bucket 8 192): 8 blocks and no tail
    S._mv.clear_cache(), S._rmv.clear_cache()
    assert op.nnz > 2 * S.PRODUCT_BLOCK
    for a, b in zip(one, products()):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    monkeypatch.setattr(S, "PRODUCT_BLOCK", 1 << 20)
    S._mv.clear_cache(), S._rmv.clear_cache()
    assert op.take(idx).data is op.data  # a concrete take does not copy the entries
    small, padded = op.compact(idx), op.compact(idx, pad=True)
    assert padded.nnz == S.nnz_bucket(small.nnz) >= small.nnz
    np.testing.assert_array_equal(np.asarray(padded.materialize()), np.asarray(small.materialize()))
    np.testing.assert_allclose(np.asarray(padded.materialize()), np.asarray(op.materialize())[:, np.asarray(idx)], atol=1e-6)
