"""Shape buckets: pad a design to one of a few sizes, so that nearby shapes share compiled programs.

XLA compiles one program per input shape. Cross-validation folds, ``GridSearchCV`` and a notebook's
next dataset each bring a new (n, D) — and a fresh compile of every program of the fit. Padding
rows and columns up to a *bucket* (eight sizes per octave: at most 12.5 % more work) makes nearby
shapes the same shape:

* padded rows are zero rows of **weight 0**: every solver with row weights gives a weight-0 row the
  meaning "removed" (the means, scales and losses are weighted), so the fit is the unpadded one;
* padded columns are zero columns: constant, hence inert — never selected, coefficient 0 — and
  dropped again from the fitted model.

Only inputs whose padded copy is small are padded (at most :data:`MAX_PADDED_BYTES`, where
compiling is most of a fit; a larger X is fitted as it is). The scikit-learn estimators pad their
fits through :func:`pad_design` (rows; greedy RLS's also columns) and their compiled predictions
through :func:`bucket_rows`; ``JAXSELECT_SHAPE_BUCKETS=0`` turns it off.

>>> [bucket(n) for n in (1, 30, 33, 100, 960, 1200, 5000)]
[32, 32, 36, 104, 960, 1280, 5120]
"""

from __future__ import annotations

import os

import numpy as np

from jaxselect._validation import check_int
from jaxselect.design.sparse import is_sparse

__all__ = [
    "BUCKETS_PER_OCTAVE",
    "MAX_PADDED_BYTES",
    "MIN_BUCKET",
    "bucket",
    "bucket_rows",
    "buckets_enabled",
    "pad_columns",
    "pad_design",
    "pad_rows",
]

#: sizes per doubling: a bucket is at most 1 + 1/BUCKETS_PER_OCTAVE times the size it holds
BUCKETS_PER_OCTAVE = 8
#: the smallest bucket (smaller sizes share it)
MIN_BUCKET = 32
#: a dense X is padded only when its padded copy takes at most this many bytes
MAX_PADDED_BYTES = 64 << 20


def buckets_enabled() -> bool:
    """Whether the estimators pad to shape buckets (``JAXSELECT_SHAPE_BUCKETS=0`` turns it off).

    >>> buckets_enabled() in (True, False)
    True
    """
    return os.environ.get("JAXSELECT_SHAPE_BUCKETS", "1") not in ("0", "false", "False")


def bucket(size: int) -> int:
    """The bucket of ``size`` ≥ 1: the smallest ``m·2^e`` ≥ size with m in 8..15 (eight sizes per
    octave, at least :data:`MIN_BUCKET`)."""
    size = check_int(size, "size", low=1)
    if size <= MIN_BUCKET:
        return MIN_BUCKET
    step = 1 << max(0, (size - 1).bit_length() - 1 - BUCKETS_PER_OCTAVE.bit_length() + 1)
    return -(-size // step) * step


def pad_rows(X, n_rows: int):
    """X (n, D) with ``n_rows − n`` zero rows appended (dense numpy or ``scipy.sparse`` CSR; a
    sparse X stays sparse, its new rows empty)."""
    n = X.shape[0]
    if n_rows == n:
        return X
    if is_sparse(X):
        import scipy.sparse as sp

        X = sp.csr_matrix(X)
        indptr = np.concatenate([X.indptr, np.full(n_rows - n, X.indptr[-1], X.indptr.dtype)])
        return sp.csr_matrix((X.data, X.indices, indptr), shape=(n_rows, X.shape[1]))
    out = np.zeros((n_rows,) + X.shape[1:], X.dtype)
    out[:n] = X
    return out


def bucket_rows(X):
    """A dense numpy X (n, ...) with zero rows appended up to the bucket of n — for a computation
    whose rows are independent (a prediction: the caller keeps the first n rows of its result).
    X itself when buckets are off, n is a bucket, X is not a numpy array, or the padded copy would
    exceed :data:`MAX_PADDED_BYTES`.

    >>> import numpy as np
    >>> bucket_rows(np.ones((33, 4), np.float32)).shape
    (36, 4)
    """
    if not buckets_enabled() or type(X) is not np.ndarray or X.ndim < 1 or X.shape[0] < 1:
        return X
    n_to = bucket(X.shape[0])
    if n_to * (X.nbytes // X.shape[0]) > MAX_PADDED_BYTES:
        return X
    return pad_rows(X, n_to)


def pad_columns(X, n_columns: int):
    """X (n, D) with ``n_columns − D`` zero columns appended (dense numpy or ``scipy.sparse`` CSR)."""
    d = X.shape[1]
    if n_columns == d:
        return X
    if is_sparse(X):
        import scipy.sparse as sp

        X = sp.csr_matrix(X)
        return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_columns))
    out = np.zeros((X.shape[0], n_columns), X.dtype)
    out[:, :d] = X
    return out


def pad_design(X, y, sample_weight=None, *, columns: bool = True):
    """``(X, y, sample_weight)`` padded to the buckets of X's shape: zero rows of weight 0 (their
    targets a copy of the first row's, so every label or target check still holds) and zero
    columns. A sparse X's stored entries are a shape too: its count is padded to its bucket with
    entries of value 1 in added rows — rows of weight 0, which no weighted fit reads. Returned unchanged when buckets are off, the shape is already a bucket, or X is not
    an in-memory numpy array / ``scipy.sparse`` matrix or its padded copy (a dense X's, a sparse
    X's stored entries and their column indices) would exceed :data:`MAX_PADDED_BYTES`. Weights are given (ones for the real rows) only when rows are added.
    ``columns=False`` pads the rows (and a sparse X's stored entries) only: for a solver whose
    result depends on the number of columns (FSA's annealing schedule counts them).

    >>> import numpy as np
    >>> Xp, yp, wp = pad_design(np.ones((30, 5), np.float32), np.arange(30.0))
    >>> Xp.shape, yp[-3:].tolist(), float(wp.sum())
    ((32, 32), [29.0, 0.0, 0.0], 30.0)
    """
    sparse = is_sparse(X) and type(X).__module__.startswith("scipy.sparse")
    if not buckets_enabled() or not (sparse or (type(X) is np.ndarray and X.ndim == 2)):
        return X, y, sample_weight
    n, d = X.shape
    n_to, d_to = bucket(n), (bucket(d) if columns else d)
    if sparse and X.nnz * (X.dtype.itemsize + 4) > MAX_PADDED_BYTES:
        return X, y, sample_weight  # a padded copy of this many entries costs more than a compile
    if sparse:
        X, n_to = _pad_sparse(X, n_to, d_to)
    elif (n_to, d_to) == (n, d) or n_to * d_to * X.dtype.itemsize > MAX_PADDED_BYTES:
        return X, y, sample_weight
    else:
        X = pad_columns(pad_rows(X, n_to), d_to)
    if n_to > n:
        y = np.asarray(y)
        y = np.concatenate([y, np.repeat(y[:1], n_to - n, axis=0)])
        w = np.ones(n, X.dtype) if sample_weight is None else np.asarray(sample_weight)
        sample_weight = np.concatenate([w, np.zeros(n_to - n, w.dtype)])
    return X, y, sample_weight


def _pad_sparse(X, n_to: int, d_to: int):
    """(CSR X padded to ``d_to`` columns and its row count's bucket, its stored entries padded to
    their bucket by ones in the added rows, and that row count). The added rows are sized for the
    largest filler a bucket of stored entries can need (an eighth of it), so the row count is a
    function of the three buckets, not of the exact count of stored entries."""
    import scipy.sparse as sp

    X = sp.csr_matrix(X)
    n, nnz = X.shape[0], X.nnz
    nnz_to = bucket(nnz) if nnz else 0
    extra = nnz_to - nnz
    rows = bucket(max(n_to, n + -(-nnz_to // (BUCKETS_PER_OCTAVE * d_to)) + 1)) if nnz else n_to
    per_row = np.minimum(np.maximum(extra - d_to * np.arange(rows - n), 0), d_to)
    filler_cols = np.concatenate([np.arange(c, dtype=X.indices.dtype) for c in per_row]) if rows > n else X.indices[:0]
    indptr = np.concatenate([X.indptr, X.indptr[-1] + np.cumsum(per_row).astype(X.indptr.dtype)])
    data = np.concatenate([X.data, np.ones(extra, X.dtype)])
    indices = np.concatenate([X.indices, filler_cols])
    return sp.csr_matrix((data, indices, indptr), shape=(rows, d_to)), rows
