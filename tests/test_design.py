"""The data layer: the one standardisation rule, the front door, and the design-operator protocol.

Every implementation of the protocol must give the dense answer: the shared conformance test
builds the standardised design explicitly in float64 numpy and compares each operation of each
storage kind with it. A new storage kind (sparse, streamed) adds one entry to ``OPERATORS``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxselect as js
from jaxselect.design import DenseDesign, DesignOperator, HostDesign, TransposedDesign, as_data, column_summary

N, D = 37, 6  # odd n: row blocks of the host operator do not divide it


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = (rng.normal(size=(N, D)) * [1.0, 1e-3, 1e3, 0.0, 5.0, 1.0] + [0.0, 0.0, 0.0, 3.0, 1e2, -7.0]).astype(np.float32)
    w = rng.uniform(0.5, 2.0, size=N).astype(np.float32)
    w[:4] = 0.0
    X[0, 3] = 99.0  # column 3 is constant over the rows of positive weight only
    return X, w


def _reference(X, w):
    """float64: weighted mean, population scale, live mask and the standardised design."""
    X64 = X.astype(np.float64)
    ww = np.ones(len(X)) if w is None else w.astype(np.float64)
    pos = ww > 0
    mean = ww @ X64 / ww.sum()
    var = ww @ (X64 - mean) ** 2 / ww.sum()
    live = X64[pos].max(0) > X64[pos].min(0)
    factor = np.where(live, 1.0 / np.sqrt(np.where(live, var, 1.0)), 0.0)
    return mean, np.where(live, np.sqrt(var), 1.0), live, (X64 - mean) * factor


def _host(X, s):
    return HostDesign.from_summary(X, s)


def _memmap(X, s, tmp_path):
    path = tmp_path / "X.f32"
    mm = np.memmap(path, dtype=np.float32, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    return HostDesign.from_summary(np.memmap(path, dtype=np.float32, mode="r", shape=X.shape), s)


OPERATORS = {
    "dense-device": lambda X, s, tmp: DenseDesign.from_summary(jnp.asarray(X), s),
    "dense-transposed": lambda X, s, tmp: TransposedDesign.from_summary(jnp.asarray(np.ascontiguousarray(X.T)), s),
    "host-numpy": lambda X, s, tmp: _host(X, s),
    "host-memmap": _memmap,
}


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_column_summary_is_the_weighted_rule(weighted):
    X, w = _data()
    w = w if weighted else None
    s = column_summary(X, w)
    mean, scale, live, _ = _reference(X, w)
    np.testing.assert_array_equal(np.asarray(s.live), live)
    np.testing.assert_allclose(np.asarray(s.mean), mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(s.scale), scale, rtol=1e-5)
    assert float(s.n_samples) == pytest.approx(N if w is None else float(w.sum()))
    assert s.mean.dtype == jnp.float32 and s.live.dtype == jnp.bool_


def test_integer_weights_equal_repeated_rows():
    X, _ = _data()
    reps = np.arange(N) % 3
    a = column_summary(X, reps.astype(np.float32))
    b = column_summary(np.repeat(X, reps, axis=0))
    for x, y in zip(a, b):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-5)


def test_summary_from_moments_matches_column_summary():
    from jaxselect.design.moments import moments_host

    X, w = _data()
    m = moments_host(X, np.zeros((N, 1), np.float32), w, np.float32)
    a = js.design.summary_from_moments(m)
    b = column_summary(X, w)
    np.testing.assert_array_equal(np.asarray(a.live), np.asarray(b.live))
    np.testing.assert_allclose(np.asarray(a.mean), np.asarray(b.mean), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(a.scale), np.asarray(b.scale), rtol=1e-4)


@pytest.mark.parametrize("kind", sorted(OPERATORS))
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_every_operator_gives_the_dense_answer(kind, weighted, tmp_path):
    X, w = _data()
    w = w if weighted else None
    s = column_summary(X, w)
    op = OPERATORS[kind](X, s, tmp_path)
    assert isinstance(op, DesignOperator)
    _, _, _, Xs = _reference(X, w)
    ww = np.ones(N) if w is None else w.astype(np.float64)
    rng = np.random.default_rng(1)
    v, V = rng.normal(size=D), rng.normal(size=(D, 3))
    u, U = rng.normal(size=N), rng.normal(size=(2, N))
    f32 = np.float32
    tol = dict(rtol=2e-4, atol=2e-4)
    assert op.shape == (N, D)
    np.testing.assert_allclose(np.asarray(op.materialize()), Xs, **tol)
    np.testing.assert_allclose(np.asarray(op.mv(v.astype(f32))), Xs @ v, **tol)
    np.testing.assert_allclose(np.asarray(op.mv(V.astype(f32))), Xs @ V, **tol)
    np.testing.assert_allclose(np.asarray(op.rmv(u.astype(f32))), u @ Xs, **tol)
    np.testing.assert_allclose(np.asarray(op.rmv(U.astype(f32))), U @ Xs, **tol)
    wj = None if w is None else (jnp.asarray(w) if kind.startswith("dense") else w)
    gram = (Xs * ww[:, None]).T @ Xs / ww.sum()
    np.testing.assert_allclose(np.asarray(op.gram(wj)), gram, **tol)
    idx = np.array([4, 0, 2])
    np.testing.assert_allclose(np.asarray(op.gram_columns(idx, wj)), gram[:, idx], **tol)
    np.testing.assert_allclose(np.asarray(op.take(idx).materialize()), Xs[:, idx], **tol)
    blocks = list(op.row_blocks(10))
    assert [start for start, _ in blocks] == [0, 10, 20, 30]
    stacked = np.concatenate([np.asarray(b.materialize()) for _, b in blocks])
    np.testing.assert_allclose(stacked, Xs, **tol)
    # FSA's compaction (a fused and a row-blocked gather: 37 rows = 4 blocks of 8 + a tail of 5)
    # and its row subsample
    cols = np.array([0, 2, 4], np.int32)
    for block in (0, 8):
        small = op.compact(cols, block)
        assert isinstance(small, DesignOperator) and small.shape == (N, 3)
        np.testing.assert_allclose(np.asarray(small.materialize()), Xs[:, cols], **tol)
        np.testing.assert_allclose(np.asarray(small.mv(v[:3].astype(f32))), Xs[:, cols] @ v[:3], **tol)
        np.testing.assert_allclose(np.asarray(small.rmv(u.astype(f32))), u @ Xs[:, cols], **tol)
        np.testing.assert_allclose(np.asarray(small.compact(np.array([2, 0], np.int32)).materialize()), Xs[:, [4, 0]], **tol)
    sub = op.subsample_rows(3)
    assert sub.shape == (13, D)
    np.testing.assert_allclose(np.asarray(sub.materialize()), Xs[::3], **tol)


def test_dense_design_is_a_pytree_under_jit_and_vmap():
    X, _ = _data()
    op = DenseDesign.from_summary(jnp.asarray(X), column_summary(X))
    V = jnp.asarray(np.random.default_rng(2).normal(size=(4, D)), jnp.float32)
    eager = jnp.stack([op.mv(v) for v in V])
    np.testing.assert_allclose(np.asarray(jax.jit(lambda o, v: o.mv(v))(op, V[0])), np.asarray(eager)[0], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(jax.vmap(op.mv)(V)), np.asarray(eager), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_transposed_storage_summary_and_jit(weighted):
    """The transposed operator summarises its stored columns (the rows of Xᵀ) as the dense one does,
    and its compaction runs inside ``jit`` with traced column indices."""
    X, w = _data()
    wj = None if not weighted else jnp.asarray(w)
    a = TransposedDesign.raw(jnp.asarray(np.ascontiguousarray(X.T))).summarize(wj)
    b = DenseDesign.raw(jnp.asarray(X)).summarize(wj)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6, atol=1e-6)
    op = TransposedDesign.raw(jnp.asarray(np.ascontiguousarray(X.T))).standardized(a[0])
    small = jax.jit(lambda o, c: o.compact(c))(op, jnp.asarray([5, 1], jnp.int32))
    np.testing.assert_allclose(np.asarray(small.materialize()), _reference(X, w if weighted else None)[3][:, [5, 1]], rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_host_storage_summary_equals_the_device_summary(weighted):
    """as_data(storage="host") keeps X on the host (a memmap stays a memmap) and its host summary
    pass gives the device pass's summary; with_moments gives the same summary from the moments kernel."""
    X, w = _data()
    w = w if weighted else None
    host = as_data(X, X[:, 0], sample_weight=w, storage="host")
    device = as_data(X, X[:, 0], sample_weight=w)
    moments = as_data(X, X[:, 0], sample_weight=w, storage="host", with_moments=True)
    assert isinstance(host.design, HostDesign) and host.design.X is X and host.moments is None
    assert moments.moments is not None
    for other in (device, moments):
        np.testing.assert_array_equal(np.asarray(host.summary.live), np.asarray(other.summary.live))
        np.testing.assert_allclose(np.asarray(host.summary.mean), np.asarray(other.summary.mean), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(host.summary.scale), np.asarray(other.summary.scale), rtol=1e-4)
    bad = X.copy()
    bad[5, 1] = np.inf
    with pytest.raises(ValueError, match=r"row\(s\) \[5\]"):
        as_data(bad, None, targets=None, storage="host")


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_a_small_x_is_summarised_on_the_host_without_compiling(sparse, weighted):
    """The front door summarises a small concrete X on the host (no summary program for a new
    shape); its summary is the compiled pass's (summary_and_extremes / the sparse design's) and the
    independent float64 reference's, and a non-finite entry is still named."""
    import scipy.sparse as sp
    from compile_count import count_compiles

    from jaxselect.design import SparseDesign
    from jaxselect.design.summary import summary_and_extremes

    X, w = _data()
    end = 13 if sparse else 11  # a shape no other test uses (the dense case's references compile for its own)
    X, w = np.vstack([X, 1.5 * X[4:end]]), np.concatenate([w, w[4:end]])
    w = w.astype(np.float64) if weighted else None  # numpy's default dtype: converted on the host too
    Xin = sp.csr_matrix(X) if sparse else X
    with count_compiles() as compiles:
        data = as_data(Xin, None, sample_weight=w, targets=None)
        jax.block_until_ready(data.summary)
    assert compiles[0] == 0, f"the summary of a small X compiled {compiles[0]} programs"
    if sparse:
        compiled = SparseDesign.raw(Xin).summarize(None if w is None else jnp.asarray(w))[0]
    else:
        compiled = summary_and_extremes(jnp.asarray(X), None if w is None else jnp.asarray(w))[0]
    mean, scale, live, _ = _reference(X, w)
    for s in (data.summary, compiled):
        np.testing.assert_array_equal(np.asarray(s.live), live)
        np.testing.assert_allclose(np.asarray(s.mean), mean, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(s.scale), scale, rtol=1e-4)
    assert isinstance(data.summary.mean, jax.Array) and data.summary.mean.dtype == jnp.float32
    bad = X.copy()
    bad[7, 2] = np.nan
    with pytest.raises(ValueError, match=r"row\(s\) \[7\]"):
        as_data(sp.csr_matrix(bad) if sparse else bad, None, targets=None)


def test_host_operator_to_device_is_the_same_design():
    X, w = _data()
    s = column_summary(X, w)
    host = HostDesign.from_summary(X, s)
    dev = host.to_device()
    np.testing.assert_allclose(np.asarray(dev.materialize()), host.materialize(), rtol=1e-6, atol=1e-6)


def test_as_data_front_door():
    X, w = _data()
    data = as_data(X, X[:, 0] + 1.0, sample_weight=w, groups=[0, 0, 1, 1, 2, 2])
    assert data.design.shape == (N, D) and data.Y.shape == (N, 1) and data.y_1d
    assert data.groups.n_groups == 3
    np.testing.assert_array_equal(np.asarray(data.summary.live), [True, True, True, False, True, True])
    assert data.weights.dtype == jnp.float32
    labels = as_data(X, np.arange(N) % 3, targets="labels")
    assert labels.n_classes == 3 and labels.Y.dtype == np.int32
    binary = as_data(X, np.where(np.arange(N) % 2, 1, -1), targets="binary")
    assert sorted(np.unique(np.asarray(binary.Y)).tolist()) == [0.0, 1.0]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(X=np.ones(5)), "2-D"),
        (dict(X=np.array([["a", "b"], ["c", "d"]])), "numeric"),
        (dict(X=np.full((4, 2), np.nan)), "NaN"),
        (dict(X=np.ones((4, 2))), "every column of X is constant"),
        (dict(X=np.c_[np.arange(4.0), np.ones(4)], constant_columns="raise"), r"constant column\(s\) \[1\]"),
        (dict(X=np.eye(4), Y=np.ones(3)), "rows"),
        (dict(X=np.eye(4), sample_weight=[1, 0, 0, 0]), "at least 2 positive"),
        (dict(X=np.eye(4), sample_weight=[1, -1, 1, 1]), "non-negative"),
        (dict(X=np.eye(4), Y=[0, 1, 2, 1], targets="binary"), "binary"),
        (dict(X=np.eye(4), groups=[0, 0, 1]), "group"),
        (dict(X=np.eye(4), targets="nonsense"), "targets must be one of"),
        (dict(X=np.eye(4) * 1e38), "too large"),
        (dict(X=np.eye(4) * 1e20, scale="squares"), "too large"),
    ],
)
def test_as_data_errors_say_what_to_fix(kwargs, match):
    X = kwargs.pop("X")
    Y = kwargs.pop("Y", None)
    kwargs.setdefault("targets", None if Y is None else "regression")
    with pytest.raises((ValueError, TypeError), match=match):
        as_data(X, Y, **kwargs)


def test_as_data_traced_checks_shapes_only():
    X, _ = _data()

    @jax.jit
    def f(X):
        return as_data(X, targets=None).summary.scale

    np.testing.assert_allclose(np.asarray(f(jnp.asarray(X))), np.asarray(column_summary(X).scale), rtol=1e-6)


@pytest.mark.parametrize("kind", ["numpy", "jax", "host", "sparse"])
def test_nonfinite_error_names_the_first_rows_and_columns(kind):
    """One wording everywhere: "X contains NaN or Inf in row(s) [...] and column(s) [...]"."""
    import scipy.sparse as sp

    X = np.random.default_rng(0).normal(size=(30, 6)).astype(np.float32)
    X[4, 1], X[9, 5] = np.nan, np.inf
    y = X[:, 0].copy()
    Xin = {"numpy": X, "jax": jnp.asarray(X), "host": X, "sparse": sp.csr_matrix(X)}[kind]
    storage = "host" if kind == "host" else "device"
    with pytest.raises(ValueError, match=r"X contains NaN or Inf in row\(s\) \[4, 9\] and column\(s\) \[1, 5\]; remove"):
        js.as_data(Xin, y, storage=storage)
    Y = np.stack([y, y], axis=1)
    Y[7, 1] = np.nan
    X[4, 1], X[9, 5] = 0.0, 0.0
    with pytest.raises(ValueError, match=r"Y contains NaN or Inf in row\(s\) \[7\] and column\(s\) \[1\]"):
        js.as_data(X, Y)
