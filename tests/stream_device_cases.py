"""Streamed FSA with rows split over 4 fake CPU devices (run by test_fsa_stream_devices.py; not
collected alone: it needs ``XLA_FLAGS=--xla_force_host_platform_device_count=4`` before jax loads).

Each case runs ``js.fsa(source, ..., mesh=js.data_mesh())`` and the same call on one device and
asserts the same support and, to float32 rounding, the same coefficients, loss path and steps; the
counted sources check that every device got its part of every block.
"""

import jax
import numpy as np
import pytest

import jaxselect as js
from jaxselect.anneal import Execution
from jaxselect.design import stream as dstream
from jaxselect.design import streamed as sstream

N, M, K, IT = 1501, 160, 4, 40  # N odd: the parts of a block are padded and masked
N_DEV = 4
pytestmark = pytest.mark.skipif(
    jax.device_count() < N_DEV, reason="needs XLA_FLAGS=--xla_force_host_platform_device_count=4"
)


def _same(a, b):
    assert a.support.tolist() == b.support.tolist()
    scale = max(1.0, float(np.max(np.abs(np.asarray(a.coef)))))
    np.testing.assert_allclose(np.asarray(b.coef), np.asarray(a.coef), atol=1e-4 * scale)
    np.testing.assert_allclose(float(b.intercept), float(a.intercept), atol=1e-4 * scale)
    np.testing.assert_allclose(np.asarray(b.loss_path), np.asarray(a.loss_path), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(b.step_size), np.asarray(a.step_size), rtol=1e-4)
    assert int(b.status) == int(a.status)


class _Placed:
    """An equicorrelated source recording the device of the coefficients of every call that forms
    a part's scores (``gradient_block``, else ``matvec_block``)."""

    def __init__(self, src, gradient=True):
        self.src, self.shape, self.dtype, self.targets = src, src.shape, src.dtype, src.targets
        self.block = src.block
        self.devices = []
        if gradient:
            self.gradient_block = self._recorded(src.gradient_block)
        self.matvec_block = self._recorded(src.matvec_block)
        self.rmatvec_block = src.rmatvec_block

    def _recorded(self, method):
        def call(row_start, n_rows, cols, v, *rest):
            self.devices.append(next(iter(v.devices())))
            return method(row_start, n_rows, cols, v, *rest)

        return call


@pytest.mark.parametrize("gradient", [True, False], ids=["gradient_block", "matvec_rmatvec"])
def test_fused_source_rows_split_over_devices(gradient):
    src = js.datasets.equicorrelated(N, M, n_informative=K, seed=3)
    one = js.fsa(src, None, K, loss="lorenz", n_iter=IT, execution=Execution(max_memory=1000))
    placed = _Placed(src, gradient)
    mesh = js.data_mesh()
    got = js.fsa(placed, None, K, loss="lorenz", n_iter=IT, execution=Execution(max_memory=1000, mesh=mesh))
    _same(one, got)
    # every pass: one part per device, in mesh order (N = 1501 rows → 4 parts of 376 rows)
    assert len(placed.devices) > IT and len(placed.devices) % N_DEV == 0
    assert placed.devices[:N_DEV] == list(mesh.devices.flat)
    assert set(placed.devices) == set(jax.devices())


def test_memmap_and_batches_rows_split_over_devices(tmp_path, monkeypatch):
    monkeypatch.setattr(dstream, "STREAM_BLOCK_BYTES", 320 * M * 4)  # several blocks per pass
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, M)).astype(np.float32)
    y = (X[:, 3] - X[:, 50] + 0.5 * X[:, 77] + 0.3 * rng.standard_normal(N) > 0).astype(np.int32)
    w = rng.uniform(0.0, 2.0, N).astype(np.float32)
    np.save(tmp_path / "X.npy", X)
    Xm = np.load(tmp_path / "X.npy", mmap_mode="r")
    mid = 2 * N * 40 * 4  # stream the first stages, then hand over to memory
    mesh = jax.make_mesh((N_DEV,), ("data",))  # JAX's default (Explicit axes): the devices count
    one = js.fsa(Xm, y, K, loss="logistic", n_iter=IT, sample_weight=w, execution=Execution(max_memory=mid))
    placed = []
    block_pass = sstream._block_pass

    def recorded(X, *args, **kw):
        placed.append(next(iter(X.devices())))
        return block_pass(X, *args, **kw)

    monkeypatch.setattr(sstream, "_block_pass", recorded)
    on_mesh = Execution(max_memory=mid, mesh=mesh)
    _same(one, js.fsa(Xm, y, K, loss="logistic", n_iter=IT, sample_weight=w, execution=on_mesh))
    assert placed[:N_DEV] == list(mesh.devices.flat) and set(placed) == set(jax.devices())

    def batches():
        for a in range(0, N, 400):
            yield X[a : a + 400], y[a : a + 400]

    _same(one, js.fsa(batches, None, K, loss="logistic", n_iter=IT, sample_weight=w, execution=on_mesh))


def test_mesh_errors():
    X = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    with pytest.raises(ValueError, match="this X runs in memory: place its rows with js.shard_rows"):
        js.fsa(X, X[:, 0], 2, execution=Execution(mesh=js.data_mesh()))
    with pytest.raises(TypeError, match="mesh must be a jax.sharding.Mesh"):
        js.fsa(X, X[:, 0], 2, execution=Execution(mesh=jax.devices()))
