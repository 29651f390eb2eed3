"""Checkpoints of FSA's streamed phase: the state at a stage boundary, written with ``np.savez``.

A checkpoint holds what the streamed phase needs to go on from the start of a stage as if it had
never stopped: the coefficients, intercept and active set at the end of the previous stage (before
its compaction), the original column of each coefficient, the iteration counter, the objective of
every iteration so far, each earlier stage's step, the power-iteration vector and estimate, and a
*fingerprint* of the problem (shapes, options, the column summary, the targets and weights): a
checkpoint written for another problem is refused with a clear error instead of being resumed.
Writes are atomic (a temporary file, then ``os.replace``), so an interrupted write leaves the
previous checkpoint intact.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np

__all__ = ["fingerprint", "load_checkpoint", "save_checkpoint", "CHECKPOINT_VERSION"]

#: Format version stored in every checkpoint (a file of another version is refused).
CHECKPOINT_VERSION = 1


def fingerprint(options: dict, arrays: dict) -> str:
    """A hex digest of ``options`` (a dict of plain values, by their ``repr``) and of the bytes of
    ``arrays`` (numpy arrays or None)."""
    h = hashlib.sha256()
    for key in sorted(options):
        h.update(f"{key}={options[key]!r};".encode())
    for key in sorted(arrays):
        a = arrays[key]
        h.update(key.encode())
        if a is not None:
            a = np.ascontiguousarray(a)
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
    return h.hexdigest()


def save_checkpoint(path, fp: str, **arrays) -> None:
    """Write ``arrays`` and the fingerprint ``fp`` to ``path`` (atomically; ``np.savez`` format)."""
    path = os.fspath(path)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        np.savez(f, _fingerprint=np.asarray(fp), _version=np.asarray(CHECKPOINT_VERSION), **arrays)
    os.replace(tmp, path)


def load_checkpoint(path, fp: str) -> dict | None:
    """The arrays of the checkpoint at ``path``; None when there is no file.

    Raises:
      ValueError: the file was written for another problem or options (its fingerprint differs),
        or by another format version, or is not a checkpoint.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            data = {key: f[key] for key in f.files}
    except (OSError, ValueError) as err:
        raise ValueError(f"checkpoint {path!r} cannot be read as an FSA checkpoint ({err}); delete it or pass another path") from err
    if "_fingerprint" not in data or int(data.get("_version", -1)) != CHECKPOINT_VERSION:
        raise ValueError(f"{path!r} is not an FSA checkpoint of this version; delete it or pass another path")
    if str(data["_fingerprint"]) != fp:
        raise ValueError(
            f"checkpoint {path!r} was written for a different problem (other data, shape, k, n_iter, mu, lr, "
            "l2, loss or sample weights): resuming it would not give this call's result; delete it or pass "
            "another checkpoint path"
        )
    return data
