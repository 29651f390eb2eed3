"""FSA on streamed X (memmaps, batch callables, column sources) equals FSA on the array in memory.

Small problems (N ≤ 3000, M ≤ 300) with a tiny ``max_memory`` force the streamed phase: every
stage streams, or the first stages stream and the rest runs in memory after the hand-over.
"""

import numpy as np
import pytest

import jaxselect as js
from jaxselect.design import column_summary
from jaxselect.design import stream as dstream

N, M, K = 1500, 160, 4
TRUE = [3, 50, 77, 120]


@pytest.fixture(autouse=True)
def _small_blocks(monkeypatch):
    """About 5 row blocks per pass (the default blocks would hold these problems whole)."""
    monkeypatch.setattr(dstream, "STREAM_BLOCK_BYTES", 320 * M * 4)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, M)).astype(np.float32)
    X[:, 5] = 2.0  # a constant column: inert
    X[:, 9] *= 50.0  # a large scale: the standardisation matters
    beta = np.zeros(M)
    beta[TRUE] = [2.0, -1.5, 1.0, 0.8]
    score = X @ beta + 0.3 * rng.standard_normal(N)
    labels = (score > 0).astype(np.int32)
    w = rng.uniform(0.0, 2.0, N).astype(np.float32)
    return X, score.astype(np.float32), labels, w


def _same(a, b, rtol=1e-4):
    assert a.support.tolist() == b.support.tolist()
    scale = max(1.0, float(np.max(np.abs(np.asarray(a.coef)))))
    np.testing.assert_allclose(np.asarray(b.coef), np.asarray(a.coef), atol=rtol * scale)
    np.testing.assert_allclose(float(b.intercept), float(a.intercept), atol=rtol * scale)
    np.testing.assert_allclose(np.asarray(b.loss_path), np.asarray(a.loss_path), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(b.step_size), np.asarray(a.step_size), rtol=1e-4)
    assert int(b.status) == int(a.status)


def _batches(X, y, rows=400):
    def batches():
        for a in range(0, X.shape[0], rows):
            yield X[a : a + rows], None if y is None else y[a : a + rows]

    return batches


class _Columns:
    """A minimal column-addressable source over an array (block(rows, cols) and targets(rows))."""

    def __init__(self, X, y=None):
        self.X, self.y = X, y
        self.shape, self.dtype = X.shape, X.dtype
        self.calls = 0
        if y is not None:
            self.targets = lambda rows: self.y[rows]

    def block(self, rows, cols):
        self.calls += 1
        return self.X[rows][:, cols]


IT = 40
MID = 2 * N * 40 * 4  # a budget that streams the first stages and hands over to memory


@pytest.fixture(scope="module")
def ref(data):
    """The in-memory runs the streamed ones are compared with (shared: one compile per config)."""
    X, score, labels, w = data
    return {
        "logistic": js.fsa(X, labels, K, loss="logistic", n_iter=IT),
        "weighted": js.fsa(X, labels, K, loss="logistic", n_iter=IT, sample_weight=w),
        "squared": js.fsa(X, score, K, n_iter=IT),
    }


def test_memmap_streamed_equals_in_memory(data, ref, tmp_path):
    X, _, labels, _ = data
    np.save(tmp_path / "X.npy", X)
    Xm = np.load(tmp_path / "X.npy", mmap_mode="r")
    assert ref["logistic"].support.tolist() == TRUE
    for budget in (1000, MID):  # every stage streamed; hand-over after the first stages
        _same(ref["logistic"], js.fsa(Xm, labels, K, loss="logistic", n_iter=IT, max_memory=budget))
    unpolished = js.fsa(X, labels, K, loss="logistic", n_iter=IT, polish=False)
    _same(unpolished, js.fsa(Xm, labels, K, loss="logistic", n_iter=IT, max_memory=MID, polish=False))


def test_memmap_that_fits_is_gathered_once(data, ref, tmp_path):
    X, score, _, _ = data
    np.save(tmp_path / "X.npy", X)
    Xm = np.load(tmp_path / "X.npy", mmap_mode="r")
    _same(ref["squared"], js.fsa(Xm, score, K, n_iter=IT, max_memory=None))


def test_batch_callable_with_separate_y(data, ref):
    X, score, _, _ = data
    late = 2 * N * 5 * 4  # stages 0 and 1 stream, the hand-over is at stage 2
    _same(ref["squared"], js.fsa(_batches(X, None), score, K, n_iter=IT, max_memory=late))


def test_batch_callable_carries_targets(data, ref):
    X, _, labels, w = data
    got = js.fsa(_batches(X, labels), None, K, loss="logistic", n_iter=IT, sample_weight=w, max_memory=1000)
    _same(ref["weighted"], got)


def test_column_source(data, ref):
    X, _, labels, w = data
    src = _Columns(X, labels)
    got = js.fsa(src, None, K, loss="logistic", n_iter=IT, sample_weight=w, max_memory=MID)
    _same(ref["weighted"], got)
    assert src.calls > 0


def test_equicorrelated_source():
    src = js.datasets.equicorrelated(N, M, n_informative=4, seed=3)
    X, y = src.materialize(), src.targets()
    ref = js.fsa(X, y, 4, loss="lorenz", n_iter=IT)
    got = js.fsa(src, None, 4, loss="lorenz", n_iter=IT, max_memory=MID)
    _same(ref, got, rtol=3e-4)
    assert set(got.support.tolist()) == set(src.true_features.tolist())
    # the fused products over several row blocks (the last one overhangs N: masked)
    blocks = js.fsa(dstream.ColumnSource(src, rows=400), None, 4, loss="lorenz", n_iter=IT, max_memory=MID)
    _same(ref, blocks, rtol=3e-4)


class _Counted:
    """An equicorrelated source whose fused kernels count their calls (``gradient=False``: without
    ``gradient_block``, as a source that has only the two products)."""

    def __init__(self, src, gradient=True):
        self.src, self.shape, self.dtype = src, src.shape, src.dtype
        self.calls = {"block": 0, "matvec_block": 0, "rmatvec_block": 0, "gradient_block": 0}
        self.columns = []  # the number of columns of each call
        if gradient:
            self.gradient_block = self._counted("gradient_block")
        self.matvec_block = self._counted("matvec_block")
        self.rmatvec_block = self._counted("rmatvec_block")
        self.block = self._counted("block")
        self.targets = src.targets

    def _counted(self, name):
        def call(*args):
            self.calls[name] += 1
            if name != "block":
                self.columns.append(len(args[2]))
            return getattr(self.src, name)(*args)

        return call


def _gradient_compiles():
    from jaxselect import sources

    return sum(sources._jitted("gradient", o)._cache_size() for o in (False, True))


def test_streamed_phase_calls_the_fused_gradient_kernel():
    src = js.datasets.equicorrelated(N, M, n_informative=4, seed=3)
    ref = js.fsa(src.materialize(), src.targets(), 4, loss="lorenz", n_iter=IT)
    fused, plain = _Counted(src), _Counted(src, gradient=False)
    before = _gradient_compiles()
    got = js.fsa(fused, None, 4, loss="lorenz", n_iter=IT, max_memory=1000)  # every stage streamed
    compiled = _gradient_compiles() - before
    unfused = js.fsa(plain, None, 4, loss="lorenz", n_iter=IT, max_memory=1000)
    # every streamed pass (iterations and power iterations) is one gradient_block call per block
    assert fused.calls["gradient_block"] > IT and fused.calls["matvec_block"] == fused.calls["rmatvec_block"] == 0
    assert plain.calls["gradient_block"] == 0 and plain.calls["matvec_block"] == plain.calls["rmatvec_block"] > 0
    _same(unfused, got, rtol=1e-5)
    _same(ref, got, rtol=3e-4)
    # inside a stage the passes compute only the active columns (padded to a bucket): fewer entries
    from jaxselect.anneal import schedule, stream

    widths = schedule.stage_widths(M, 4, 32)
    assert set(fused.columns) - set(widths), "no pass restricted to the active columns"
    assert set(fused.columns) <= {stream.column_bucket(c) for c in range(1, M + 1)}
    # one kernel per column count (stage widths and buckets), not one per iteration ...
    assert stream.memory_stage(widths, N, 4, 1000) == len(widths)
    assert 0 < compiled <= 2 * len(set(fused.columns)) < IT
    # ... and a second call, with new data in the same shapes, compiles none
    again = _Counted(src)
    before = _gradient_compiles()
    _same(got, js.fsa(again, None, 4, loss="lorenz", n_iter=IT, max_memory=1000), rtol=0)
    assert _gradient_compiles() == before and again.calls["gradient_block"] == fused.calls["gradient_block"]


def test_in_memory_numpy_over_budget_streams_with_progress(data, capsys):
    pytest.importorskip("tqdm")
    X, _, labels, _ = data
    # the bar changes nothing: the same streamed run without it
    ref = js.fsa(X, labels, K, loss="logistic", n_iter=IT, lr=2.0, max_memory=MID)  # a fixed step
    _same(ref, js.fsa(X, labels, K, loss="logistic", n_iter=IT, lr=2.0, max_memory=MID, progress=True))
    err = capsys.readouterr().err
    assert "100%" in err and "col" in err and "phase=" in err


class _Bar:
    """A tqdm stand-in that records its updates."""

    def __init__(self, total=None, **kw):
        self.total, self.n, self.updates = total, 0, []

    def update(self, n=1):
        self.updates.append(int(n))
        self.n += int(n)

    def set_postfix(self, **kw):
        pass

    def close(self):
        pass


@pytest.mark.parametrize("streamed", [False, True], ids=["memory", "streamed"])
def test_progress_counts_follow_the_work(data, monkeypatch, streamed):
    """Issue 37: the bar counts columns × iterations, one tick per iteration (the streamed ones from
    the host, the compiled ones from the program), no jump to the end and no false start."""
    import importlib

    fsa_module = importlib.import_module("jaxselect.anneal.fsa")

    bars = []
    def fake(**kw):
        bar = _Bar(**kw)
        if kw.get("enabled", True):
            bars.append(bar)
        return bar

    monkeypatch.setattr(fsa_module, "progress_bar", fake)
    X, _, labels, _ = data
    options = {"max_memory": MID} if streamed else {}
    got = js.fsa(X, labels, K, loss="logistic", n_iter=IT, lr=2.0, progress=True, **options)
    assert got.support.tolist() == js.fsa(X, labels, K, loss="logistic", n_iter=IT, lr=2.0, **options).support.tolist()
    (bar,) = bars
    ticks = [u for u in bar.updates if u]
    # one tick per iteration, each the width of its stage (M first, the k-bucket last), summing to the total
    assert len(ticks) == IT and ticks[0] == M and max(ticks) == M and min(ticks) >= K
    assert bar.n == bar.total == sum(ticks) and ticks == sorted(ticks, reverse=True)


def test_summary_pass_equals_column_summary(data):
    X, _, _, w = data
    for weights in (None, w):
        summary, lo, hi, _, sub = dstream.stream_summary(dstream.ArraySource(X, rows=256), weights, stride=7)
        ref = column_summary(X, weights)
        np.testing.assert_allclose(summary.mean, np.asarray(ref.mean), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(summary.scale, np.asarray(ref.scale), rtol=1e-5)
        assert summary.live.tolist() == np.asarray(ref.live).tolist()
        np.testing.assert_array_equal(sub, X[::7])
    np.testing.assert_array_equal(lo, X.min(axis=0))
    np.testing.assert_array_equal(hi, X.max(axis=0))


def test_fused_summary_pass_equals_column_summary(data):
    """A source with ``summary_block`` (the counter-based generator): the summary pass equals the
    in-memory summary, with the row blocks' weights (a last block past N), extremes, targets and
    the stride subsample; a non-finite entry is named by its block."""
    _, _, _, w = data
    src = js.datasets.equicorrelated(N, M, n_informative=4, seed=5)
    X = src.materialize()
    fused = dstream.ColumnSource(src, rows=512)  # 3 blocks, the last one past N
    assert fused.summary
    for weights in (None, w):
        summary, lo, hi, y, sub = dstream.stream_summary(fused, weights, stride=7)
        ref = column_summary(X, weights)
        np.testing.assert_allclose(summary.mean, np.asarray(ref.mean), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(summary.scale, np.asarray(ref.scale), rtol=1e-5)
        assert summary.live.tolist() == np.asarray(ref.live).tolist()
        np.testing.assert_array_equal(sub, X[::7])
        np.testing.assert_array_equal(y, src.targets())
    np.testing.assert_array_equal(lo, X.min(axis=0))
    np.testing.assert_array_equal(hi, X.max(axis=0))

    class Broken:  # the same source, one NaN entry in row 700 (block 1)
        shape, dtype = src.shape, src.dtype

        def block(self, rows, cols):
            return src.block(rows, cols)

        def summary_block(self, row_start, n_rows, cols, weights=None):
            lo, hi, total, mean, m2 = src.summary_block(row_start, n_rows, cols, weights)
            return lo, hi, total, mean.at[3].set(np.nan) if row_start <= 700 < row_start + n_rows else mean, m2

    with pytest.raises(ValueError, match=r"NaN or Inf in block 1 \(rows 512–1023\)"):
        dstream.stream_summary(dstream.ColumnSource(Broken(), rows=512))


# --------------------------------------------------------------------------- bad sources
def _bad(X, y, change):
    def batches():
        for b, a in enumerate(range(0, X.shape[0], 500)):
            xb, yb = X[a : a + 500].copy(), y[a : a + 500]
            yield change(b, xb, yb)

    return batches


def test_batch_width_change(data):
    X, _, labels, _ = data
    src = _bad(X, labels, lambda b, x, y: (x[:, :-1] if b == 2 else x, y))
    with pytest.raises(ValueError, match=r"batch 2 \(rows 1000–1499\) has 159 columns but the first batch had 160"):
        js.fsa(src, None, K, loss="logistic", n_iter=20)


def test_batch_nan(data):
    X, _, labels, _ = data

    def change(b, x, y):
        if b == 1:
            x[3, 4] = np.nan
        return x, y

    with pytest.raises(ValueError, match=r"batch 1 \(rows 500–999\) has NaN"):
        js.fsa(_bad(X, labels, change), None, K, loss="logistic", n_iter=20)


def test_batches_end_early_on_a_later_pass(data):
    X, _, labels, _ = data
    calls = []

    def batches():
        calls.append(1)
        stop = N if len(calls) < 3 else N - 500
        for a in range(0, stop, 500):
            yield X[a : a + 500], labels[a : a + 500]

    with pytest.raises(ValueError, match=r"yielded 1000 rows on pass \d+ but 1500 on pass 1: the callable must return the same"):
        js.fsa(batches, None, K, loss="logistic", n_iter=20, max_memory=1000)


def test_batch_targets_mismatch(data):
    X, _, labels, _ = data
    with pytest.raises(ValueError, match="y was given and the batches carry targets"):
        js.fsa(_batches(X, labels), labels, K, loss="logistic", n_iter=20)
    src = _bad(X, labels, lambda b, x, y: (x, None if b == 1 else y))
    with pytest.raises(ValueError, match=r"batch 1 \(rows 500–999\) carries no targets"):
        js.fsa(src, None, K, loss="logistic", n_iter=20)
    with pytest.raises(ValueError, match="needs y"):
        js.fsa(_batches(X, None), None, K, loss="logistic", n_iter=20)


def test_streaming_refuses_ranking_and_callables(data):
    X, score, _, _ = data
    with pytest.raises(ValueError, match="mean of per-row terms"):
        js.fsa(_batches(X, score), None, K, loss="ranking", pairs=np.array([[0, 1, 1.0]]))
    with pytest.raises(ValueError, match="mean of per-row terms"):
        js.fsa(_batches(X, score), None, K, loss=lambda s, y: ((s - y) ** 2).mean())
    with pytest.raises(ValueError, match="max_memory"):
        js.fsa(X, score, K, max_memory="lots")


def _options(fsa_module, loss="logistic"):
    """The validated options record of ``js.fsa(X, y, K, loss=loss, n_iter=IT)`` on a dense X (its
    ``"auto"`` defaults resolved: no L1 polish, no refinement)."""
    return fsa_module.fsa_options(
        K, None, loss=loss, n_iter=IT, mu=300.0, lr=None, optimizer=None, learner=None,
        constant_columns="inert", scale="std", polish=js.anneal.Polish(l1=None, refine=0), execution=None,
        deprecated={},
    )[0]


def test_lean_numpy_runs_first_stages_from_the_host_array(data, ref, monkeypatch):
    import sys

    fsa_module = sys.modules["jaxselect.anneal.fsa"]  # the module (jaxselect.anneal.fsa is the function)
    X, _, labels, _ = data
    raw = np.empty(X.size + 16, np.float32)
    offset = (16 - raw.ctypes.data % 64) % 64 // 4
    Xu = raw[offset : offset + X.size].reshape(X.shape)  # not 64-byte aligned: jax would copy it
    Xu[:] = X
    assert Xu.ctypes.data % 64 != 0
    monkeypatch.setattr(fsa_module, "LEAN_BYTES", 0)
    assert fsa_module._stream_input(Xu, K, 1 << 40, _options(fsa_module))[1]
    _same(ref["logistic"], js.fsa(Xu, labels, K, loss="logistic", n_iter=IT))


def test_accelerators_copy_x_and_count_their_own_memory(data, monkeypatch):
    """On a GPU/TPU backend the lean host-BLAS mode is not taken (X goes to the device anyway),
    and ``max_memory="auto"`` is a quarter of the smaller of host RAM and the device's free memory."""
    import sys

    import jax

    fsa_module = sys.modules["jaxselect.anneal.fsa"]
    stream_module = sys.modules["jaxselect.anneal.stream"]
    X = data[0]
    raw = np.empty(X.size + 16, np.float32)
    offset = (16 - raw.ctypes.data % 64) % 64 // 4
    Xu = raw[offset : offset + X.size].reshape(X.shape)
    Xu[:] = X
    monkeypatch.setattr(fsa_module, "LEAN_BYTES", 0)
    assert fsa_module._stream_input(Xu, K, 1 << 40, _options(fsa_module))[1]  # CPU: lean
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert fsa_module._stream_input(Xu, K, 1 << 40, _options(fsa_module)) == (None, False)

    assert stream_module._host_available() > 0
    assert stream_module._device_available() is None  # the CPU backend: the host's memory only
    host = 1 << 34
    monkeypatch.setattr(stream_module, "_host_available", lambda: host)
    monkeypatch.setattr(stream_module, "_device_available", lambda: host // 8)
    assert stream_module.check_max_memory("auto") == int(host // 8 * stream_module.AUTO_FRACTION)
    monkeypatch.setattr(stream_module, "_device_available", lambda: host * 8)
    assert stream_module.check_max_memory("auto") == int(host * stream_module.AUTO_FRACTION)


def test_sklearn_estimators_take_a_memmap(data, tmp_path):
    from jaxselect.sklearn import FSAClassifier

    X, _, labels, _ = data
    np.save(tmp_path / "X.npy", X)
    Xm = np.load(tmp_path / "X.npy", mmap_mode="r")
    a = FSAClassifier(k=K, n_iter=IT).fit(X, labels)
    b = FSAClassifier(k=K, n_iter=IT).fit(Xm, labels)
    assert b.get_support(indices=True).tolist() == a.get_support(indices=True).tolist() == TRUE
    np.testing.assert_allclose(b.coef_, a.coef_, rtol=1e-4, atol=1e-5)
    assert b.n_features_in_ == M
    np.testing.assert_array_equal(b.predict(X[:50]), a.predict(X[:50]))
