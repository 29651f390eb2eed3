"""The moments engine behind prepare: host and XLA kernels against the plain float64 formulas."""

import itertools
import os
import sys
import tracemalloc
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxselect as js
from jaxselect.design import moments as moments_mod
from jaxselect.design import column_summary as _column_summary
from jaxselect.design.moments import xla_moments as _xla_moments


def reference_moments(X, Y, w=None):
    """Weighted means, centred Gram and cross moments, in float64 numpy (the plain formulas)."""
    X, Y = np.asarray(X, np.float64), np.asarray(Y, np.float64).reshape(len(X), -1)
    w = np.ones(len(X)) if w is None else np.asarray(w, np.float64)
    n = w.sum()
    mu, nu = w @ X / n, w @ Y / n
    Xc, Yc = X - mu, Y - nu
    return (
        n,
        mu,
        (Xc * w[:, None]).T @ Xc / n,
        nu,
        w @ (Yc * Yc) / n,
        (Xc * w[:, None]).T @ Yc / n,
    )


def data(n=403, d=7, t=2, offset=0.0, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.linspace(0.5, 3.0, d) + offset
    X[:, 2] = 4.0  # a constant column
    Y = X[:, :2] @ np.ones((2, t)) + rng.normal(size=(n, t))
    return X, Y


@pytest.fixture
def small_chunks(monkeypatch):
    """Force many host chunks (and a ragged last one) on small data."""
    monkeypatch.setattr(moments_mod, "HOST_CHUNK_BYTES", 64)
    monkeypatch.setattr(moments_mod, "HOST_CHUNK_MIN_ROWS", 50)


def assert_moments(m, ref, rtol):
    n, mu, G, nu, v, B = ref
    scale = np.sqrt(np.maximum(np.diagonal(G), 1e-30))
    np.testing.assert_allclose(float(m.n_samples), n, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(m.x_mean), mu, rtol=rtol, atol=rtol * (1 + np.abs(mu).max()))
    np.testing.assert_allclose(np.asarray(m.gram), G, atol=rtol * np.outer(scale, scale).max() * 10)
    np.testing.assert_allclose(np.asarray(m.y_mean), nu, rtol=rtol, atol=rtol * (1 + np.abs(nu).max()))
    np.testing.assert_allclose(np.asarray(m.y_var), v, rtol=10 * rtol)
    np.testing.assert_allclose(np.asarray(m.cross), B, atol=10 * rtol * scale.max() * np.sqrt(v).max())


@pytest.mark.parametrize("offset", [0.0, 1e3], ids=["centred", "offset"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_host_kernel_equals_plain_formulas(small_chunks, dtype, offset, weighted):
    X, Y = data(offset=offset)
    w = np.random.default_rng(3).uniform(0.0, 2.0, len(X)) if weighted else None
    if weighted:
        w[::7] = 0.0
    Xd = X.astype(dtype)  # the data the engine sees, in the compute dtype
    m = moments_mod.moments_host(Xd, Y.astype(dtype), w, dtype)
    assert np.asarray(m.gram).dtype == dtype
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    assert_moments(m, reference_moments(Xd, Y.astype(dtype), w), rtol)
    live = ~np.asarray(m.constant)
    assert live.tolist() == [True, True, False, True, True, True, True]


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("centre", [False, True], ids=["raw-gram", "centred-copy"])
def test_xla_kernel_equals_plain_formulas(dtype, weighted, centre):
    X, Y = data()
    w = np.random.default_rng(3).uniform(0.0, 2.0, len(X)) if weighted else None
    Xj, Yj = jnp.asarray(X, dtype), jnp.asarray(Y, dtype)
    wj = None if w is None else jnp.asarray(w, dtype)
    m = _xla_moments(Xj, Yj, wj, _column_summary(Xj, wj), centre=centre)
    rtol = 1e-12 if dtype == np.float64 else 2e-5
    assert_moments(m, reference_moments(np.asarray(Xj), np.asarray(Yj), w), rtol)


def test_host_and_xla_prepare_agree_and_offsets_cost_no_precision(small_chunks):
    """float32 with a large offset: the host kernel's shifted pass is at least as accurate as XLA's."""
    X, Y = data(offset=1e4)
    X32, Y32 = X.astype(np.float32), Y.astype(np.float32)
    with jax.enable_x64():
        truth = js.prepare(X32.astype(np.float64), Y32.astype(np.float64), l2=1e-6)
        truth_C, truth_b0 = np.asarray(truth.C), np.asarray(truth.b0)
    host = js.prepare(X32, Y32, l2=1e-6)
    xla = js.prepare(jnp.asarray(X32), jnp.asarray(Y32), l2=1e-6)
    err_host = np.abs(np.asarray(host.C) - truth_C).max()
    err_xla = np.abs(np.asarray(xla.C) - truth_C).max()
    assert err_host <= max(err_xla, 1e-5)
    assert np.abs(np.asarray(host.b0) - truth_b0).max() < 1e-4
    assert js.cs_omp(host).order.tolist() == js.cs_omp(xla).order.tolist()


def test_integer_weights_equal_repeated_rows_and_zero_weights_equal_dropped_rows(
    small_chunks,
):
    X, Y = data(n=120, t=1)
    w = np.random.default_rng(5).integers(0, 4, len(X))
    groups = js.Groups.from_ids(np.arange(7) // 2, [1.0, 2.0, 1.5, 1.0])
    repeated = js.prepare(np.repeat(X, w, 0), np.repeat(Y, w, 0), groups, l2=1e-4)
    for Xin, Yin, win, gram in (
        (X, Y, w, True),  # host kernel
        (
            jnp.asarray(X, jnp.float32),
            jnp.asarray(Y, jnp.float32),
            jnp.asarray(w, jnp.float32),
            True,
        ),  # XLA
        (
            jnp.asarray(X, jnp.float32),
            jnp.asarray(Y, jnp.float32),
            jnp.asarray(w, jnp.float32),
            False,
        ),  # design
    ):
        weighted = js.prepare(Xin, Yin, groups, sample_weight=win, l2=1e-4, gram=gram)
        assert float(weighted.n_samples) == w.sum()
        a, b = js.cs_fr(weighted), js.cs_fr(repeated)
        assert a.order.tolist() == b.order.tolist()
        np.testing.assert_allclose(a.objective, b.objective, rtol=1e-4)
        np.testing.assert_allclose(a.dense().coef, b.coef, rtol=2e-3, atol=2e-4)  # gram=False: a slot path
        np.testing.assert_allclose(a.intercept, b.intercept, rtol=2e-3, atol=2e-4)


def test_weighted_full_prefix_equals_sklearn_weighted_least_squares():
    from sklearn.linear_model import LinearRegression

    X, Y = data(n=200, t=1, seed=2)
    X = np.delete(X, 2, axis=1)
    w = np.random.default_rng(7).uniform(0.1, 3.0, len(X))
    with jax.enable_x64():
        path = js.cs_omp(js.prepare(X, Y[:, 0], sample_weight=w, l2=0.0))
        ref = LinearRegression().fit(X, Y[:, 0], sample_weight=w)
        np.testing.assert_allclose(np.asarray(path.coef)[-1, :, 0], ref.coef_, rtol=1e-8)
        np.testing.assert_allclose(float(np.asarray(path.intercept)[-1, 0]), ref.intercept_, rtol=1e-8)


def test_prepare_from_batches_equals_prepare(small_chunks):
    X, Y = data(offset=50.0)
    groups = js.Groups.from_ids(np.arange(7) // 3, [1.0, 2.0, 3.0])
    w = np.random.default_rng(1).uniform(0, 2, len(X))
    whole = js.prepare(X, Y, groups, sample_weight=w)
    sizes = [0, 100, 1, 150, 152]
    starts = np.cumsum([0] + sizes)
    batches = [(X[a:b], Y[a:b], w[a:b]) for a, b in itertools.pairwise(starts)]
    chunked = js.prepare_from_batches(iter(batches), groups)
    for a, b in zip(jax.tree.leaves(whole), jax.tree.leaves(chunked)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=2e-5)
    memmap_like = ((X[i : i + 64], Y[i : i + 64, 0]) for i in range(0, len(X), 64))
    assert (
        js.cs_fr(js.prepare_from_batches(memmap_like)).order.tolist() == js.cs_fr(js.prepare(X, Y[:, 0])).order.tolist()
    )


def test_prepare_from_batches_names_the_bad_chunk():
    X, Y = data(n=300)
    bad = X.copy()
    bad[250, 4] = np.nan
    with pytest.raises(ValueError, match=r"NaN or Inf in row\(s\) \[\d+.*column\(s\) \[\d+.*, batch 2 \(rows 200–299\)"):
        js.prepare_from_batches((bad[i : i + 100], Y[i : i + 100]) for i in range(0, 300, 100))
    with pytest.raises(ValueError, match="batch 1 has 6 columns; earlier rows had 7|X in batch 1"):
        js.prepare_from_batches([(X[:100], Y[:100]), (X[100:200, :6], Y[100:200])])
    with pytest.raises(ValueError, match="batches is empty"):
        js.prepare_from_batches([])
    with pytest.raises(TypeError, match="batch 0 must be a tuple"):
        js.prepare_from_batches([X])
    with pytest.raises(ValueError, match="Y has 99 rows but X has 100"):
        js.prepare_from_batches([(X[:100], Y[:99])])


@pytest.mark.parametrize("kernel", ["host", "xla"])
def test_nonfinite_and_scale_errors_from_both_kernels(small_chunks, kernel):
    as_input = (lambda a: a) if kernel == "host" else (lambda a: jnp.asarray(a, jnp.float32))
    X, Y = data(n=200, t=1)
    for value in (np.nan, np.inf, -np.inf):
        bad = X.copy()
        bad[170, 5] = value
        with pytest.raises(ValueError, match="X contains NaN or Inf"):
            js.prepare(as_input(bad), as_input(Y))
    bad_y = Y.copy()
    bad_y[3, 0] = np.nan
    with pytest.raises(ValueError, match="Y contains NaN or Inf|X or Y contains NaN"):
        js.prepare(as_input(X), as_input(bad_y))
    with pytest.raises(ValueError, match="too large"):
        js.prepare(as_input(X * 1e30), as_input(Y))
    with pytest.raises(ValueError, match="vary too little"):
        js.prepare(as_input(X * 1e-21), as_input(Y))
    with pytest.raises(ValueError, match="of Y vary too little"):
        js.prepare(as_input(X), as_input(Y * 1e-30))
    with pytest.raises(ValueError, match="Y has entries too large"):
        js.prepare(as_input(X), as_input(Y * 1e20))
    with pytest.warns(UserWarning, match="are constant"):  # the empty model, status DEGENERATE
        js.prepare(as_input(X), as_input(np.ones_like(Y)))
    with pytest.raises(ValueError, match="non-negative"):
        js.prepare(as_input(X), as_input(Y), sample_weight=-np.ones(200))
    with pytest.raises(ValueError, match=r"shape \(200,\)"):
        js.prepare(as_input(X), as_input(Y), sample_weight=np.ones(199))
    with pytest.raises(ValueError, match="at least 2 positive"):
        js.prepare(as_input(X), as_input(Y), sample_weight=np.eye(200)[0])


def test_traced_input_keeps_the_xla_path_and_matches_host():
    X, Y = data(t=1)
    host = js.prepare(X, Y)
    traced = jax.jit(lambda X, Y: js.prepare(X, Y))(X.astype(np.float32), Y.astype(np.float32))
    np.testing.assert_allclose(np.asarray(traced.C), np.asarray(host.C), atol=2e-5)
    np.testing.assert_allclose(np.asarray(traced.b0), np.asarray(host.b0), atol=2e-5)
    # a numpy X closed over by a user's jit is concrete: the host kernel runs at trace time
    l2s = jnp.asarray([1e-4, 1e-2], jnp.float32)
    C = np.asarray(jax.vmap(lambda l2: js.prepare(X, Y, l2=l2).C)(l2s))
    np.testing.assert_allclose(
        C[1] - C[0],
        np.diag(np.where(np.asarray(host.live), 0.0099, 0.0)),
        atol=1e-6,
    )


def test_host_kernel_streams_without_copying_x(monkeypatch):
    """numpy X on the CPU backend: the host memory the engine allocates is a chunk, not a copy of X."""
    monkeypatch.setattr(moments_mod, "HOST_CHUNK_BYTES", 1 << 20)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20_000, 100)).astype(np.float32)  # 8 MB
    y = X[:, 0] + rng.normal(size=20_000).astype(np.float32)
    js.prepare(X, y)  # compile first
    tracemalloc.start()
    js.prepare(X, y)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < X.nbytes / 2, f"peak {peak / 2**20:.1f} MiB for an X of {X.nbytes / 2**20:.1f} MiB"


def test_host_constant_rule_is_exact_max_equals_min(small_chunks):
    """Constant columns shift to exact zeros (float64 input computed in float32, weights, a column
    constant only over the rows of positive weight); a column varying below what float32 squares
    hold is not taken for constant but named."""
    X, Y = data(n=200, t=1)
    X[:, 3] = 0.1  # not a float32 number: rounded once, then constant
    X[:, 5] = 1.0
    X[::50, 5] = 2.0
    w = np.ones(200)
    w[::50] = 0.0
    m = moments_mod.moments_host(X, Y, w, np.float32)
    assert np.asarray(m.constant).tolist() == [False, False, True, True, False, True, False]
    assert np.all(np.diagonal(np.asarray(m.gram))[[2, 3, 5]] == 0)
    m_xla = js.prepare(
        jnp.asarray(X, jnp.float32), jnp.asarray(Y, jnp.float32), sample_weight=jnp.asarray(w, jnp.float32)
    )
    assert np.asarray(js.prepare(X, Y, sample_weight=w).live).tolist() == np.asarray(m_xla.live).tolist()
    tiny = X.copy()
    tiny[:, 4] = 0.0
    tiny[7, 4] = 1e-30  # a normal float32, but its square underflows
    with pytest.raises(ValueError, match=r"column\(s\) \[4\] vary too little"):
        js.prepare(tiny, Y)


def test_streamed_checks_are_read_off_each_chunks_gram(small_chunks):
    """NaN/Inf, overflow and the exact constant rule come from each chunk's AᵀA, with no pass of
    their own: a column constant in the first batch only varies, one constant throughout is
    inert, one varying below what float32 squares hold (in a later batch only) is named, not taken
    for constant; a NaN in a row of weight 0 still counts; the errors name the batch."""
    X, Y = data(n=403, t=1)
    X[:100, 0] = 7.0
    X[:, 6] = 0.0
    X[333, 6] = 1e-30

    def batches(A, B, w=None):
        return [(A[i : i + 100], B[i : i + 100]) + (() if w is None else (w[i : i + 100],)) for i in range(0, 403, 100)]

    with pytest.raises(ValueError, match=r"column\(s\) \[6\] vary too little"):
        js.prepare_from_batches(batches(X, Y))
    X[333, 6] = 0.0
    streamed, whole = js.prepare_from_batches(batches(X, Y)), js.prepare(X, Y)
    assert np.asarray(streamed.live).tolist() == np.asarray(whole.live).tolist()
    assert np.asarray(streamed.live).tolist() == [True, True, False, True, True, True, False]
    bad = X.copy()
    bad[250, 1] = np.inf
    with pytest.raises(ValueError, match=r"X contains NaN or Inf in row\(s\) .*, batch 2 \(rows 200–299\)"):
        js.prepare_from_batches(batches(bad, Y))
    bad_y = Y.copy()
    bad_y[120, 0] = -np.inf
    with pytest.raises(ValueError, match=r"Y contains NaN or Inf in row\(s\) .*, batch 1"):
        js.prepare_from_batches(batches(X, bad_y))
    w = np.ones(403)
    w[310] = 0.0
    bad = X.copy()
    bad[310, 3] = np.nan
    with pytest.raises(ValueError, match=r"NaN or Inf in row\(s\) .*, batch 3"):
        js.prepare_from_batches(batches(bad, Y, w))
    with pytest.raises(ValueError, match="too large"):
        js.prepare_from_batches(batches(X * 1e30, Y))


@pytest.mark.parametrize("dtype_in, t", [(np.float32, 2), (np.float64, 2), (np.float64, 9)])
def test_host_kernel_one_chunk_equals_plain_formulas(dtype_in, t):
    """One chunk of float32 or float64 rows, computed in float64, weights with zeros: the moments
    read off the augmented Gram (or, for many targets, t > max(8, D/8), with XᵀY by GEMM) are the
    plain formulas."""
    X, Y = data(n=1500, t=t, offset=30.0)
    w = np.random.default_rng(2).uniform(0, 2, len(X))
    w[::7] = 0.0
    m = moments_mod.moments_host(X.astype(dtype_in), Y, w, np.float64)
    assert_moments(m, reference_moments(X.astype(dtype_in), Y, w), 1e-10)
    assert np.asarray(m.constant).tolist() == [False, False, True] + [False] * 4
    Y[700, t - 1] = np.inf
    with pytest.raises(ValueError, match="Y contains NaN or Inf"):
        moments_mod.moments_host(X, Y, w, np.float64)


def _statm_rss() -> int:
    """Current resident set size in bytes (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_row_batches_of_a_memmap_are_views_and_equal_prepare(tmp_path):
    X, Y = data(n=1000, offset=20.0)
    X[517, 3] = 1e4  # an outlier in the middle of a block
    path = tmp_path / "x.f32"
    mm = np.memmap(path, dtype=np.float32, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    del mm
    Xm = np.memmap(path, dtype=np.float32, mode="r", shape=X.shape)
    Y32 = Y.astype(np.float32)
    batches = js.row_batches(Xm, Y32, batch_rows=300)
    assert len(batches) == 4
    blocks = list(batches)
    assert [b[0].shape[0] for b in blocks] == [300, 300, 300, 100]
    assert all(np.shares_memory(b[0], Xm) and np.shares_memory(b[1], Y32) for b in blocks)  # views, no copies
    streamed = js.prepare_from_batches(batches)  # iterable again
    whole = js.prepare(np.asarray(Xm), Y32)
    for a, b in zip(jax.tree.leaves(whole), jax.tree.leaves(streamed)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=2e-5)
    w = np.linspace(0.0, 2.0, len(X))
    weighted = js.prepare_from_batches(js.row_batches(Xm, Y32[:, 0], w, batch_rows=128))
    np.testing.assert_allclose(weighted.b0, js.prepare(np.asarray(Xm), Y32[:, 0], sample_weight=w).b0, atol=2e-5)


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc")
def test_row_batches_hand_memmap_pages_back(tmp_path):
    """64 MiB on disk read in 4 MiB blocks: resident memory grows by about a block, not the file."""
    n, d = 1 << 15, 512
    path = tmp_path / "big.f32"
    mm = np.memmap(path, dtype=np.float32, mode="w+", shape=(n, d))
    mm[:] = 1.0
    mm.flush()
    del mm
    Xm = np.memmap(path, dtype=np.float32, mode="r", shape=(n, d))
    y = np.zeros(n, np.float32)

    def grown(release):
        before = _statm_rss()
        peak = 0
        for Xb, _ in js.row_batches(Xm, y, batch_rows=2048, release=release):
            peak = max(peak, _statm_rss() - before + int(Xb.sum() * 0))  # touch every page of the block
        return peak

    assert grown(True) < 24 << 20
    assert grown(False) > 48 << 20  # the control: without release the whole file stays resident


def test_row_batches_and_progress_validation(monkeypatch):
    X, Y = data(n=300)
    with pytest.raises(ValueError, match="X must be 2-D"):
        js.row_batches(X[:, 0], Y)
    with pytest.raises(ValueError, match="Y has 299 rows but X has 300"):
        js.row_batches(X, Y[:299])
    with pytest.raises(ValueError, match="batch_rows must be >= 1"):
        js.row_batches(X, Y, batch_rows=0)
    with pytest.raises(TypeError, match="batch_rows must be an integer"):
        js.row_batches(X, Y, batch_rows=2.5)
    with pytest.raises(ValueError, match=r"sample_weight must have shape \(300,\)"):
        js.row_batches(X, Y, np.ones(3))
    bad = X.copy()
    bad[170, 1] = np.inf
    with pytest.raises(ValueError, match=r"NaN or Inf in row\(s\) .*, batch 17 \(rows 170–179\)"):
        js.prepare_from_batches(js.row_batches(bad, Y, batch_rows=10))
    with pytest.raises(TypeError, match="batches must be an iterable"):
        js.prepare_from_batches(3)
    with pytest.raises(TypeError, match="progress must be True or False"):
        js.prepare_from_batches(js.row_batches(X, Y), progress="yes")
    # progress=True without tqdm: a clear ImportError; with it: a bar over the chunks, with the total.
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    with pytest.raises(ImportError, match="progress=True needs tqdm"):
        js.prepare_from_batches(js.row_batches(X, Y), progress=True)
    seen = {}

    def fake_tqdm(iterable, total=None, **kwargs):
        seen["total"] = total
        for item in iterable:
            seen["n"] = seen.get("n", 0) + 1
            yield item

    monkeypatch.setitem(sys.modules, "tqdm.auto", types.SimpleNamespace(tqdm=fake_tqdm))
    js.prepare_from_batches(js.row_batches(X, Y, batch_rows=100), progress=True)
    assert seen == {"total": 3, "n": 3}
