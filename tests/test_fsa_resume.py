"""Checkpoints of streamed FSA: an interrupted run resumed from its checkpoint gives the
uninterrupted result; a checkpoint of another problem is refused."""

import numpy as np
import pytest

import jaxselect as js
from jaxselect.design import stream as dstream

N, M, K, IT = 1200, 160, 4, 40


@pytest.fixture(autouse=True)
def _small_blocks(monkeypatch):
    monkeypatch.setattr(dstream, "STREAM_BLOCK_BYTES", 400 * M * 4)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((N, M)).astype(np.float32)
    y = (2 * X[:, 7] - X[:, 90] + X[:, 130] + 0.5 * X[:, 31] + 0.3 * rng.standard_normal(N) > 0).astype(np.int32)
    return X, y


class _Flaky:
    """A batch callable that counts its passes and raises on pass ``fail_at`` (None: never)."""

    def __init__(self, X, y, fail_at=None):
        self.X, self.y, self.fail_at, self.calls = X, y, fail_at, 0

    def __call__(self):
        self.calls += 1
        if self.fail_at is not None and self.calls == self.fail_at:
            raise RuntimeError("the disk went away")
        return ((self.X[a : a + 300], self.y[a : a + 300]) for a in range(0, N, 300))


def test_resume_equals_uninterrupted(data, tmp_path):
    X, y = data
    budget = 2 * N * 5 * 4  # stages 0 and 1 (widths 160, 40) stream, the rest runs in memory
    whole = _Flaky(X, y)
    ref = js.fsa(whole, None, K, loss="logistic", n_iter=IT, max_memory=budget)
    path = tmp_path / "fsa.ckpt"
    flaky = _Flaky(X, y, fail_at=whole.calls - 2)  # fails in stage 1: some stage boundaries are written
    with pytest.raises(RuntimeError, match="disk went away"):
        js.fsa(flaky, None, K, loss="logistic", n_iter=IT, max_memory=budget, checkpoint=path)
    assert path.exists()
    stage = int(np.load(path)["stage"])
    assert stage >= 1
    again = _Flaky(X, y)
    got = js.fsa(again, None, K, loss="logistic", n_iter=IT, max_memory=budget, checkpoint=path)
    assert again.calls < whole.calls  # the finished stages were not run again
    assert got.support.tolist() == ref.support.tolist()
    np.testing.assert_array_equal(np.asarray(got.loss_path), np.asarray(ref.loss_path))
    np.testing.assert_array_equal(np.asarray(got.step_size), np.asarray(ref.step_size))
    np.testing.assert_allclose(np.asarray(got.coef), np.asarray(ref.coef), rtol=1e-6)


def test_every_stage_streamed_resume(data, tmp_path):
    X, y = data
    ref = js.fsa(X, y, K, loss="logistic", n_iter=IT, max_memory=1000, polish=False)
    path = tmp_path / "ckpt.npz"
    with pytest.raises(RuntimeError):
        js.fsa(_Flaky(X, y, fail_at=IT), None, K, loss="logistic", n_iter=IT, max_memory=1000, polish=False,
               checkpoint=path)
    got = js.fsa(_Flaky(X, y), None, K, loss="logistic", n_iter=IT, max_memory=1000, polish=False, checkpoint=path)
    assert got.support.tolist() == ref.support.tolist()
    np.testing.assert_allclose(np.asarray(got.coef), np.asarray(ref.coef), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got.loss_path), np.asarray(ref.loss_path), rtol=1e-5)


def test_checkpoint_of_another_problem_is_refused(data, tmp_path):
    X, y = data
    path = tmp_path / "ckpt"
    js.fsa(_Flaky(X, y), None, K, loss="logistic", n_iter=IT, max_memory=1000, polish=False, checkpoint=path)
    with pytest.raises(ValueError, match="written for a different problem"):
        js.fsa(_Flaky(X, y), None, K + 1, loss="logistic", n_iter=IT, max_memory=1000, checkpoint=path)
    (tmp_path / "junk").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot be read"):
        js.fsa(_Flaky(X, y), None, K, loss="logistic", n_iter=IT, max_memory=1000, checkpoint=tmp_path / "junk")
