"""Out-of-core preparation: the moments of data that arrive in row chunks.

The moment-based solvers (CS-G-OMP, CS-G-FR, Doubling, the group lasso) only need the column
means, the centred ``XᵀX`` and ``XᵀY`` of the data: :func:`prepare_from_batches` accumulates them
in one pass over any iterable of row chunks (a generator over a ``np.memmap``, files, a data
loader), holding one chunk at a time, and returns the same :class:`~jaxselect.Problem` as
:func:`~jaxselect.prepare` on the concatenated data (to rounding). :func:`row_batches` cuts an
array that is too big for memory (a ``np.memmap``) into such chunks: views, never copies, and the
pages of a memmap already read are handed back to the OS, so resident memory stays one chunk.
"""

from __future__ import annotations

import itertools

import numpy as np

from jaxselect._progress import check_progress, progress_bar
from jaxselect._validation import check_int, float_dtype_for
from jaxselect.design.moments import MomentAccumulator, chunk_rows
from jaxselect.design.pages import PageReleaser
from jaxselect.sequencing.prepare import Problem, problem_from_moments

__all__ = ["RowBatches", "prepare_from_batches", "row_batches"]

#: Target size of one X chunk of :func:`row_batches` (32 MiB: 16 384 rows of float32 at D = 500).
BATCH_BYTES = 1 << 25


def prepare_from_batches(
    batches,
    groups=None,
    *,
    l2: float = 1e-5,
    whiten: bool = True,
    constant_columns: str = "inert",
    rank_tol: float | None = None,
    progress: bool = False,
) -> Problem:
    """:func:`~jaxselect.prepare` on data given as row chunks, in one pass and one chunk of memory.

    **One pass, always.** Every chunk is shifted by the first chunk's column means (a constant
    column by its value) before its Gram is taken (host BLAS ``syrk``) and added to a float64
    accumulator; the centred moments follow exactly as ``G = S/n − δδᵀ`` with δ the (small) mean of
    the shifted rows. So no second, centred pass is ever taken: large offsets cost no precision as
    long as the first chunk's means are of the data's order — which fails only when the first chunk
    is unrepresentative by many orders of magnitude (e.g. a column that is 0 in the first chunk
    and about 1e6 ± 1 afterwards in float32); shuffle the chunks or put a typical chunk first then.
    Each row is read once: shifted into a cache-sized buffer ``[X − s | Y − t | 1]`` whose one
    ``syrk`` gives the Gram, ``XᵀY``, the column sums and the targets' sums of squares together.
    The checks cost no further pass: NaN/Inf and the constant-column rule (exact: constant iff
    max == min) are read off that Gram's diagonal, and only a chunk that fails is scanned again to
    name what is wrong.

    The checks of :func:`prepare` run per chunk and name it: NaN/Inf ("X contains NaN or Inf in
    batch 17 (rows 170000–179999)"), mismatched widths, bad shapes or dtypes, negative weights;
    an empty iterable or fewer than 2 rows in all raise too.

    Args:
      batches: an iterable of ``(X_chunk, Y_chunk)`` or ``(X_chunk, Y_chunk, w_chunk)``: X_chunk
        (m, D), Y_chunk (m,) or (m, T), w_chunk (m,) non-negative row weights. Chunks may have any
        number of rows (also 0); numpy, memmap or jax arrays. A generator, :func:`row_batches`, a
        list, a data loader (``grain``, ``tf.data`` ``as_numpy_iterator()``, a torch
        ``DataLoader`` yielding pairs) — anything iterable, read once.
      groups, l2, whiten, constant_columns, rank_tol: as in :func:`prepare` (the Gram is always
        formed: D×D must fit in memory; for D too large for that see ``prepare(gram=False)``).
      progress: show a progress bar over the chunks (off by default; needs ``tqdm``, e.g.
        ``pip install jaxselect[progress]``; an ImportError says so when it is missing). The bar
        knows the total when ``batches`` has a ``len`` (:func:`row_batches` has).

    Returns:
      The :class:`~jaxselect.Problem` of the concatenated data.

    Raises:
      ValueError: a malformed chunk, mismatched widths, NaN/Inf (naming the chunk), no rows, and
        everything :func:`prepare` raises. TypeError: ``batches`` not iterable, a chunk that is
        not a tuple of numeric arrays, a non-bool ``progress``. ImportError: ``progress=True``
        without ``tqdm``.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(1000, 5)); y = X[:, 1] - X[:, 3]
    >>> chunks = ((X[i:i + 300], y[i:i + 300]) for i in range(0, 1000, 300))
    >>> sorted(js.cs_omp(js.prepare_from_batches(chunks)).order.tolist()[:2])
    [1, 3]
    """
    progress = check_progress(progress)
    try:
        iterator = iter(batches)
    except TypeError:
        raise TypeError(
            f"batches must be an iterable of (X_chunk, Y_chunk) pairs (e.g. js.row_batches(X, Y)); got "
            f"{type(batches).__name__}"
        ) from None
    if progress:
        total = len(batches) if hasattr(batches, "__len__") else None
        iterator = progress_bar(iterator, enabled=True, total=total, unit="chunk", desc="prepare_from_batches")
    acc = None
    for i, batch in enumerate(iterator):
        X, Y, w = _unpack(batch, i)
        if acc is None:
            acc = MomentAccumulator(float_dtype_for(X.dtype))
            step = chunk_rows(X.shape[1], acc.dtype.itemsize)
        what = f"batch {i} (rows {acc.n_rows}–{acc.n_rows + X.shape[0] - 1})"
        # Large batches go through the accumulator in cache-sized pieces (the host kernel's chunk):
        # each piece's shifted copy stays in cache for the Gram, as in prepare.
        pieces = max(1, -(-X.shape[0] // step))  # near-equal pieces: no small remainder piece
        bounds = np.linspace(0, X.shape[0], pieces + 1).astype(int)
        for start, stop in itertools.pairwise(bounds):
            acc.add(X[start:stop], Y[start:stop], None if w is None else w[start:stop], what=what)
    if acc is None:
        raise ValueError("batches is empty; it must yield at least one (X_chunk, Y_chunk) pair")
    if acc.n_rows < 2:
        raise ValueError(f"X needs at least 2 rows; the batches held {acc.n_rows}")
    moments = acc.finish()
    return problem_from_moments(
        moments,
        groups,
        l2=l2,
        whiten=whiten,
        constant_columns=constant_columns,
        rank_tol=rank_tol,
    )


def _check_rows(X, Y, w, batch: int | None = None) -> None:
    """Shapes of X (rows, D), Y (rows,) or (rows, T) and w (rows,) or None; ``batch`` names the batch."""
    at, pre = ("", "") if batch is None else (f" in batch {batch}", f"batch {batch}: ")
    if X.ndim != 2:
        raise ValueError(f"X{at} must be 2-D (rows, features); got shape {X.shape}")
    if Y.ndim not in (1, 2):
        raise ValueError(f"Y{at} must be 1-D (rows,) or 2-D (rows, T); got shape {Y.shape}")
    if Y.shape[0] != X.shape[0]:
        raise ValueError(f"{pre}Y has {Y.shape[0]} rows but X has {X.shape[0]}; they must match")
    if w is not None and tuple(w.shape) != (X.shape[0],):
        raise ValueError(f"{pre}sample_weight must have shape ({X.shape[0]},); got {tuple(w.shape)}")


def _unpack(batch, i: int):
    if not isinstance(batch, (tuple, list)) or len(batch) not in (2, 3):
        raise TypeError(
            f"batch {i} must be a tuple (X_chunk, Y_chunk) or (X_chunk, Y_chunk, w_chunk); got {type(batch).__name__}"
        )
    X, Y = np.asarray(batch[0]), np.asarray(batch[1])
    w = None if len(batch) == 2 or batch[2] is None else np.asarray(batch[2])
    for name, a in (("X", X), ("Y", Y)) + ((("sample_weight", w),) if w is not None else ()):
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise TypeError(f"{name} in batch {i} must be numeric; got dtype {a.dtype}")
    _check_rows(X, Y, w, batch=i)
    if w is not None and (not np.isfinite(w).all() or (w < 0).any()):
        raise ValueError(f"batch {i}: sample_weight must be finite and non-negative")
    return X, (Y[:, None] if Y.ndim == 1 else Y), w


class RowBatches:
    """Row blocks of in-memory or memory-mapped arrays (see :func:`row_batches`); iterable, with ``len``."""

    def __init__(self, arrays, batch_rows: int, release: bool):
        self.arrays = arrays
        self.batch_rows = batch_rows
        self.release = release
        self.n_rows = arrays[0].shape[0]

    def __len__(self) -> int:
        return (self.n_rows + self.batch_rows - 1) // self.batch_rows

    def __iter__(self):
        n, step = self.n_rows, self.batch_rows
        pagers = [PageReleaser(a) if self.release else None for a in self.arrays]
        for start in range(0, n, step):
            stop = min(n, start + step)
            yield tuple(None if a is None else a[start:stop] for a in self.arrays)
            for pager in pagers:  # the consumer is done with rows < stop: drop their pages
                if pager is not None:
                    pager.release(start, stop)

    def __repr__(self) -> str:
        return f"RowBatches(n_rows={self.n_rows}, batch_rows={self.batch_rows}, batches={len(self)})"


def row_batches(X, Y, sample_weight=None, *, batch_rows: int | None = None, release: bool = True) -> RowBatches:
    """Cut (X, Y[, sample_weight]) into consecutive row blocks for :func:`prepare_from_batches`.

    Yields ``(X[i:j], Y[i:j])`` (or with ``sample_weight[i:j]``): numpy views, never copies, so an
    ``np.memmap`` far larger than memory is read one block at a time. With ``release`` (default)
    the pages of a memmap that the consumer has finished with are returned to the OS
    (``madvise(MADV_DONTNEED)``; they stay in the page cache), so the process's resident memory
    stays about one block instead of growing to the whole file. Other arrays are only sliced.

    Args:
      X: (n, D) array or ``np.memmap``.
      Y: (n,) or (n, T) array or memmap.
      sample_weight: None or (n,) row weights.
      batch_rows: rows per block (default: about 32 MiB of X, a multiple of the host kernel's chunk).
      release: hand the pages of memmapped inputs back after each block.

    Returns:
      A :class:`RowBatches`: iterable (again and again), with ``len`` = number of blocks.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(1000, 5)); y = X[:, 1] - X[:, 3]
    >>> batches = js.row_batches(X, y, batch_rows=300)
    >>> len(batches), [b[0].shape[0] for b in batches]
    (4, [300, 300, 300, 100])
    >>> sorted(js.cs_fr(js.prepare_from_batches(batches)).order.tolist()[:2])
    [1, 3]
    """
    arrays = []
    for name, a in (("X", X), ("Y", Y), ("sample_weight", sample_weight)):
        if a is None and name == "sample_weight":
            arrays.append(None)
            continue
        if not hasattr(a, "shape") or not hasattr(a, "__getitem__"):
            a = np.asarray(a)
        if a.dtype == object or np.dtype(a.dtype).kind not in "biuf":
            raise TypeError(f"{name} must be a numeric array; got dtype {a.dtype}")
        arrays.append(a)
    X, Y, w = arrays
    _check_rows(X, Y, w)
    if batch_rows is None:  # a multiple of the host kernel's chunk (~32 MiB of X)
        chunk = chunk_rows(X.shape[1], float_dtype_for(np.dtype(X.dtype)).itemsize)
        batch_rows = chunk * max(1, BATCH_BYTES // max(1, chunk * X.shape[1] * np.dtype(X.dtype).itemsize))
    else:
        batch_rows = check_int(batch_rows, "batch_rows", low=1)
    if not isinstance(release, (bool, np.bool_)):
        raise TypeError(f"release must be True or False; got {release!r}")
    return RowBatches((X, Y) if w is None else (X, Y, w), int(batch_rows), bool(release))
