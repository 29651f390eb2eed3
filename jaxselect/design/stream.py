"""Re-readable sources of X: data that do not sit in memory as one array.

A solver that streams (FSA's streamed phase, :mod:`jaxselect.anneal.stream`) reads X only through
:class:`StreamSource`: ``shape`` (N, M), ``dtype`` and ``passes(cols)``, one pass over the rows
that yields ``(row_start, X_block[:, cols], y_block or None)`` one row block at a time. Three
adapters (:func:`as_stream_source` picks one):

* :class:`ArraySource` — an ``np.memmap`` or any row-sliceable array-like with ``shape``,
  ``dtype`` and ``X[a:b]`` (h5py, zarr): reads row blocks, then the columns;
* :class:`BatchSource` — a callable returning a fresh iterator of ``(X_rows, y_rows)`` batches on
  every call (``y_rows`` may be None); every batch is validated (2-D, the first batch's width,
  finite, targets present or absent on every batch) and every pass must yield the rows of the
  first (errors name the batch and its rows);
* :class:`ColumnSource` — a column-addressable object with ``shape``, ``dtype``,
  ``block(rows, cols)`` (``rows`` a slice, ``cols`` an int array) and optionally
  ``targets(rows)`` (e.g. :class:`jaxselect.datasets.EquicorrelatedSource`); its optional fused
  products ``matvec_block``/``rmatvec_block`` are exposed as :attr:`ColumnSource.fused`, its fused
  ``gradient_block`` as :attr:`ColumnSource.gradient`.

:func:`stream_summary` is the first pass: the :class:`~jaxselect.design.ColumnSummary` under the
library's one standardisation rule (block statistics merged in float64, so it equals the
in-memory summary to rounding), the extremes, the NaN/Inf check naming the block, the targets a
source carries, and optionally every ``stride``-th row (FSA's cheap first spectral estimate).
"""

from __future__ import annotations

from typing import Iterator, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect._validation import MIN_ROWS, float_dtype_for, is_traced
from jaxselect.design.summary import standardize
from jaxselect.design.sparse import is_sparse
from jaxselect.programs import jit

__all__ = [
    "ArraySource",
    "BatchSource",
    "ColumnSource",
    "STREAM_BLOCK_BYTES",
    "StreamSource",
    "as_stream_source",
    "stream_kind",
    "is_stream_input",
    "stream_summary",
    "subsample_rows",
]

#: Bytes of stored X per row block of a pass (full rows for an array source).
STREAM_BLOCK_BYTES = 1 << 25


@runtime_checkable
class StreamSource(Protocol):
    """What a streaming solver asks of X (see the module docstring)."""

    @property
    def shape(self) -> tuple[int, int]: ...

    @property
    def dtype(self): ...

    def passes(self, cols=None) -> Iterator: ...


def _rows_per_block(width: int, itemsize: int, rows: int | None = None) -> int:
    if rows is not None:
        return max(1, int(rows))
    return max(8, STREAM_BLOCK_BYTES // max(1, width * itemsize))


def _check_numeric(dtype, name: str) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold numbers; got dtype {dtype}")
    return float_dtype_for(dtype)


class ArraySource:
    """Row blocks of an ``np.memmap``, a numpy array or a row-sliceable array-like (h5py, zarr).

    Each block reads ``X[a:b]`` (full rows: the storage is row-major), then takes the columns
    asked for. No target (pass ``y`` to the solver).
    """

    #: no fused products or gradient (see :class:`ColumnSource`); targets never come in the batches
    fused = gradient = summary = batch_targets = False

    def host_array(self, dtype) -> bool:
        """A pass may run on host BLAS: X is a numpy array or memmap already in ``dtype``."""
        return isinstance(self.X, np.ndarray) and self.X.dtype == dtype and self.X.ndim == 2

    def __init__(self, X, rows: int | None = None):
        shape = tuple(int(s) for s in X.shape)
        if len(shape) != 2:
            raise ValueError(f"X must be 2-D (N, M); got shape {shape}")
        self.X = X
        self.shape = shape
        self.dtype = _check_numeric(X.dtype, "X")
        self.rows = _rows_per_block(shape[1], np.dtype(X.dtype).itemsize, rows)
        self.has_targets = False

    def __repr__(self) -> str:
        return f"ArraySource(shape={self.shape}, storage={type(self.X).__name__})"

    def passes(self, cols=None):
        n, m = self.shape
        if cols is not None and len(cols) == m:  # ascending distinct columns: all of them, no gather
            cols = None
        for start in range(0, n, self.rows):
            block = np.asarray(self.X[start : start + self.rows])
            if cols is not None:
                block = block[:, cols]
            yield start, block.astype(self.dtype, copy=False), None


class BatchSource:
    """Batches from a callable that returns a fresh iterator of ``(X_rows, y_rows)`` each call.

    N is learnt on the first pass; later passes must yield the same rows (checked per pass).
    """

    fused = gradient = summary = False
    rows = None  # block rows: the batches' own

    @property
    def batch_targets(self) -> bool:
        """The batches carry the targets (a ``y`` given beside them is ambiguous)."""
        return bool(self.has_targets)

    def host_array(self, dtype) -> bool:
        return False

    def __init__(self, fn):
        if not callable(fn):
            raise TypeError("a batch source must be a callable returning an iterator of (X_rows, y_rows)")
        self.fn = fn
        self.n = None  # rows, learnt on the first pass
        self.width = None
        self.dtype = None
        self.has_targets = None
        self.n_passes = 0
        self._first()

    def __repr__(self) -> str:
        return f"BatchSource(shape={self.shape}, fn={getattr(self.fn, '__name__', type(self.fn).__name__)})"

    @property
    def shape(self):
        return (self.n, self.width)

    def _iterator(self):
        it = self.fn()
        try:
            return iter(it)
        except TypeError:
            raise TypeError(
                f"the batch source returned {type(it).__name__}, not an iterator: it must return a fresh "
                "iterator of (X_rows, y_rows) batches on every call (e.g. a generator function)"
            ) from None

    def _first(self):
        """Read the first batch for the width, the dtype and whether targets come with X."""
        for b, (_, X, y) in enumerate(self._raw()):
            self.width, self.dtype, self.has_targets = X.shape[1], _check_numeric(X.dtype, "X"), y is not None
            return
        raise ValueError("the batch source yielded no batches: it must return the same non-empty batches on every call")

    def _raw(self):
        for b, item in enumerate(self._iterator()):
            if not isinstance(item, tuple) or len(item) != 2:
                raise TypeError(f"batch {b} is {type(item).__name__}: each batch must be a tuple (X_rows, y_rows) (y_rows may be None)")
            X, y = item
            X = X if isinstance(X, jax.Array) else np.asarray(X)
            if X.ndim != 2:
                raise ValueError(f"batch {b} has X of shape {tuple(X.shape)}: each batch's X must be 2-D (rows, M)")
            yield b, X, y

    def passes(self, cols=None):
        start = 0
        self.n_passes += 1
        for b, X, y in self._raw():
            rows = X.shape[0]
            where = f"batch {b} (rows {start}–{start + rows - 1})"
            if X.shape[1] != self.width:
                raise ValueError(f"{where} has {X.shape[1]} columns but the first batch had {self.width}: every batch must have the same width")
            if (y is not None) != self.has_targets:
                has = "carries targets" if y is not None else "carries no targets (y_rows is None)"
                raise ValueError(f"{where} {has} but the first batch did not: every batch must carry y_rows or none")
            if y is not None:
                y = np.asarray(y)
                if y.ndim == 2 and y.shape[1] == 1:
                    y = y[:, 0]
                if y.shape != (rows,):
                    raise ValueError(f"{where} has y_rows of shape {y.shape}; expected ({rows},), one target per row")
            if self.n is not None and start + rows > self.n:
                raise ValueError(self._count_error(start + rows, more=True))
            if self.n is None and not np.isfinite(np.asarray(X, np.float64)).all():  # first pass: every value
                raise ValueError(f"{where} has NaN or Inf in X; remove or impute them before fitting")
            block = X[:, cols] if cols is not None else X
            yield start, (block if isinstance(block, jax.Array) else np.asarray(block)).astype(self.dtype, copy=False), y
            start += rows
        if self.n is None:
            if start < MIN_ROWS:
                raise ValueError(f"the batch source yielded {start} rows; FSA needs at least {MIN_ROWS}")
            self.n = start
        elif start != self.n:
            raise ValueError(self._count_error(start, more=False))

    def _count_error(self, rows, more: bool) -> str:
        got = f"at least {rows}" if more else str(rows)
        return (
            f"the source yielded {got} rows on pass {self.n_passes} but {self.n} on pass 1: the callable "
            "must return the same batches each time"
        )


class ColumnSource:
    """A column-addressable source: ``block(rows, cols)`` for any row slice × column subset.

    Attributes:
      fused: True when the source also has ``matvec_block(row_start, n_rows, cols, v)`` and
        ``rmatvec_block(row_start, n_rows, cols, u)``, which generate or read the entries inside
        the product (never storing the block).
      gradient: True when it also has the fused ``gradient_block(row_start, n_rows, cols, v, fn)``
        (scores, per-row weights ``fn`` and gradient in one pass; ``fn`` a
        :class:`jax.tree_util.Partial`), which the streamed FSA then calls instead of the two products.
      summary: True when it also has ``summary_block(row_start, n_rows, cols, weights)`` returning
        ``(min, max, Σw, mean, Σw(x − mean)²)`` per column over the rows of positive weight (as
        :meth:`jaxselect.datasets.EquicorrelatedSource.summary_block`): :func:`stream_summary`
        then never materialises a block.
    """

    def __init__(self, src, rows: int | None = None):
        shape = tuple(int(s) for s in src.shape)
        if len(shape) != 2:
            raise ValueError(f"a column source must have a 2-D shape (N, M); got {shape}")
        self.src = src
        self.shape = shape
        self.dtype = _check_numeric(getattr(src, "dtype", np.float32), "X")
        self.rows = rows
        self.has_targets = callable(getattr(src, "targets", None))
        self.fused = callable(getattr(src, "matvec_block", None)) and callable(getattr(src, "rmatvec_block", None))
        self.gradient = callable(getattr(src, "gradient_block", None))
        self.summary = callable(getattr(src, "summary_block", None))

    def __repr__(self) -> str:
        return f"ColumnSource(shape={self.shape}, source={type(self.src).__name__})"

    batch_targets = False

    def host_array(self, dtype) -> bool:
        return False

    def block_rows(self, width: int) -> int:
        return _rows_per_block(width, self.dtype.itemsize, self.rows)

    def passes(self, cols=None):
        n, m = self.shape
        idx = np.arange(m, dtype=np.int32) if cols is None else np.asarray(cols, np.int32)
        rows = self.block_rows(idx.shape[0])
        for start in range(0, n, rows):
            sl = slice(start, min(n, start + rows))
            block = self.src.block(sl, idx)
            y = np.asarray(self.src.targets(sl)) if self.has_targets else None
            yield start, block, y


def is_stream_input(X) -> bool:
    """True for inputs only a streaming solver takes: a memmap, a row-sliceable array-like that is
    not an array, a batch callable, or a column source (anything with ``block``)."""
    if isinstance(X, (np.memmap, ArraySource, BatchSource, ColumnSource)):
        return True
    if isinstance(X, (np.ndarray, jax.Array)) or is_traced(X):
        return False
    if is_sparse(X) or hasattr(X, "toarray") or hasattr(X, "tocsr"):  # scipy.sparse, BCOO/BCSR: the sparse path
        return False
    if callable(getattr(X, "block", None)) and hasattr(X, "shape"):
        return True
    if callable(X):
        return True
    if not (hasattr(X, "shape") and hasattr(X, "dtype") and hasattr(X, "__getitem__")):
        return False
    try:  # a numpy dtype (h5py, zarr); tensors of other libraries take the in-memory path
        np.dtype(X.dtype)
    except TypeError:
        return False
    return len(X.shape) == 2


def stream_kind(X) -> str | None:
    """How a solver that can stream may read X: ``"source"`` (it only streams: a batch callable, a
    column source, a row-sliceable array-like), ``"memmap"`` (an ``np.memmap``: streamed, or read
    whole when the solver's options need X in memory), ``"array"`` (a plain 2-D float numpy array:
    in memory, or streamed from the host array above a memory budget), or None (in memory only)."""
    if is_stream_input(X):
        return "memmap" if isinstance(X, np.memmap) else "source"
    if type(X) is np.ndarray and X.ndim == 2 and X.dtype.kind == "f" and X.shape[0] >= 2:
        return "array"
    return None


def as_stream_source(X, rows: int | None = None):
    """The :class:`StreamSource` adapter of X (see :func:`is_stream_input`); a numpy array gives
    an :class:`ArraySource` too."""
    if isinstance(X, (ArraySource, BatchSource, ColumnSource)):
        return X
    if isinstance(X, np.ndarray):
        return ArraySource(X, rows)
    if callable(getattr(X, "block", None)) and hasattr(X, "shape"):
        return ColumnSource(X, rows)
    if callable(X):
        return BatchSource(X)
    if hasattr(X, "shape") and hasattr(X, "dtype") and hasattr(X, "__getitem__"):
        return ArraySource(X, rows)
    raise TypeError(
        f"X of type {type(X).__name__} is not an array, a memmap, a row-sliceable array-like, a batch "
        "callable or a column source with block(rows, cols)"
    )


# --------------------------------------------------------------------------- the summary pass
@jit
def _block_stats(X, w):
    """(min, max over w > 0, Σw, block mean, Σ w (x − mean)², all finite) of one row block."""
    pos = (w > 0)[:, None]
    lo = jnp.min(jnp.where(pos, X, jnp.inf), axis=0)
    hi = jnp.max(jnp.where(pos, X, -jnp.inf), axis=0)
    total = jnp.sum(w)
    safe = jnp.where(total > 0, total, jnp.ones_like(total))
    mean = (w @ X) / safe
    c = X - mean[None, :]
    m2 = w @ (c * c)
    return lo, hi, total, mean, m2, jnp.isfinite(X).all()


def stream_summary(source, sample_weight=None, stride: int | None = None, where: str = "X"):
    """The first pass over a source: ``(summary, col_min, col_max, y, sub)``.

    Args:
      source: a :class:`StreamSource`.
      sample_weight: None or (N,) validated row weights (numpy).
      stride: keep every ``stride``-th row (rows 0, stride, …) as ``sub``; None keeps none.
      where: the array's name in error messages.

    Returns:
      The :class:`~jaxselect.design.ColumnSummary` (numpy, X's compute dtype) of the library's
      rule (weighted means and variances, extremes and the constant rule over rows of positive
      weight), the (M,) extremes, the (N,) targets the source carries (None when it carries
      none), and the (⌈N/stride⌉, M) subsample (None without ``stride``).

    Raises:
      ValueError: NaN/Inf in X, naming the block and its rows.
    """
    if getattr(source, "summary", False):
        return _fused_summary(source, sample_weight, stride, where)
    dtype = source.dtype
    acc = _SummaryMerge(source.shape[1])
    ys, subs = [], []
    n = 0
    for b, (start, X, y) in enumerate(source.passes(None)):
        rows = X.shape[0]
        if rows == 0:
            continue
        w = _block_weights(sample_weight, start, rows, dtype, b, where)
        nominal = max(rows, getattr(source, "rows", None) or rows)  # pad the short last block: one compile
        Xp = jnp.asarray(X, dtype)
        if nominal > rows:
            Xp, w = jnp.pad(Xp, ((0, nominal - rows), (0, 0))), np.pad(w, (0, nominal - rows))
        *stats, finite = (np.asarray(a) for a in _block_stats(Xp, jnp.asarray(w)))
        if not finite:
            raise _non_finite(where, b, start, rows)
        acc.add(*stats)
        if y is not None:
            ys.append(np.asarray(y))
        if stride is not None:
            first = (-start) % stride
            subs.append(np.asarray(X[first::stride], dtype))
        n = start + rows
    y = np.concatenate(ys) if ys else None
    sub = np.concatenate(subs, axis=0) if stride is not None else None
    return (*acc.result(n, dtype, sample_weight, where), y, sub)


#: rows × columns per call of a source's fused ``summary_block`` (a tile of the kernel then holds
#: ≥ 32 rows: with all 10⁵ columns of the FSA paper's Figure 1 a tile held 2 rows, and updating
#: the five (M,) accumulators per tile ran the pass 5× slower)
FUSED_SUMMARY_ROWS, FUSED_SUMMARY_COLUMNS = 1 << 16, 1 << 13


def _fused_summary(source, sample_weight, stride, where):
    """:func:`stream_summary` of a :class:`ColumnSource` with a fused ``summary_block``: the
    statistics of each row block computed as its entries are generated or read (none stored), the
    targets and the subsample asked for directly."""
    n, m = source.shape
    dtype = source.dtype
    src = source.src
    rows = int(source.rows or min(n, FUSED_SUMMARY_ROWS))
    cols = np.arange(m, dtype=np.int32)
    acc = _SummaryMerge(m)
    for b, start in enumerate(range(0, n, rows)):
        live = min(rows, n - start)
        w = np.pad(_block_weights(sample_weight, start, live, dtype, b, where), (0, rows - live))
        parts = [src.summary_block(start, rows, cols[a : a + FUSED_SUMMARY_COLUMNS], w)
                 for a in range(0, m, FUSED_SUMMARY_COLUMNS)]
        lo, hi, total, mean, m2 = ([np.asarray(p[i]) for p in parts] for i in range(5))
        stats = [np.concatenate(lo), np.concatenate(hi), total[0], np.concatenate(mean), np.concatenate(m2)]
        if not all(np.isfinite(a).all() for a in stats[2:]):  # a NaN or Inf entry reaches the sums
            raise _non_finite(where, b, start, live)
        acc.add(*stats)
    y = np.asarray(src.targets(slice(0, n))) if source.has_targets else None
    sub = np.asarray(src.block(slice(0, n, stride), cols), dtype) if stride is not None else None
    return (*acc.result(n, dtype, sample_weight, where), y, sub)


def _block_weights(sample_weight, start, rows, dtype, b, where):
    """(rows,) weights of the rows of block ``b`` (ones without ``sample_weight``)."""
    if sample_weight is None:
        return np.ones(rows, dtype)
    w = np.asarray(sample_weight[start : start + rows], dtype)
    if w.shape[0] != rows:
        raise ValueError(
            f"sample_weight has {len(sample_weight)} entries but {where} has more rows (block {b} covers rows "
            f"{start}–{start + rows - 1}): give one weight per row"
        )
    return w


def _non_finite(where, b, start, rows):
    return ValueError(f"{where} contains NaN or Inf in block {b} (rows {start}–{start + rows - 1}); remove or impute them")


class _SummaryMerge:
    """Block statistics merged on the host in float64 (Chan et al.'s pairwise update of mean, M2)."""

    def __init__(self, m: int):
        self.lo, self.hi = np.full(m, np.inf), np.full(m, -np.inf)
        self.mean, self.m2, self.wsum = np.zeros(m), np.zeros(m), 0.0

    def add(self, blo, bhi, bw, bmean, bm2):
        np.minimum(self.lo, blo, out=self.lo)
        np.maximum(self.hi, bhi, out=self.hi)
        bw = float(bw)
        if bw > 0:
            total = self.wsum + bw
            delta = bmean.astype(np.float64) - self.mean
            self.mean += delta * (bw / total)
            self.m2 += bm2.astype(np.float64) + delta * delta * (self.wsum * bw / total)
            self.wsum = total

    def result(self, n, dtype, sample_weight, where):
        """``(summary, lo, hi)`` after the last block of a pass over ``n`` rows."""
        if n < MIN_ROWS:
            raise ValueError(f"{where} has {n} rows; at least {MIN_ROWS} are needed")
        if sample_weight is not None and len(sample_weight) != n:
            raise ValueError(
                f"sample_weight has {len(sample_weight)} entries but {where} has {n} rows: give one weight per row"
            )
        var = self.m2 / self.wsum
        summary = standardize(self.mean.astype(dtype), var.astype(dtype), self.hi > self.lo,
                              np.asarray(self.wsum, dtype), xp=np)
        return summary, self.lo.astype(dtype), self.hi.astype(dtype)


def subsample_rows(source, stride: int):
    """(⌈N/stride⌉, M) every ``stride``-th row of a source (rows 0, stride, …), in one pass."""
    parts = [np.asarray(X[(-start) % stride :: stride], source.dtype) for start, X, _ in source.passes(None)]
    return np.concatenate(parts, axis=0)

