"""Out-of-core preparation: the moments of data that arrive in row chunks.

The moment-based solvers (CS-G-OMP, CS-G-FR, Doubling, the group lasso) only need the column
means, the centred ``XᵀX`` and ``XᵀY`` of the data: :func:`prepare_from_batches` accumulates them
in one pass over any iterable of row chunks (a generator over a ``np.memmap``, files, a data
loader), holding one chunk at a time, and returns the same :class:`~jaxselect.Problem` as
:func:`~jaxselect.prepare` on the concatenated data (to rounding).
"""

from __future__ import annotations

import numpy as np

from jaxselect._validation import float_dtype_for
from jaxselect.moments import MomentAccumulator
from jaxselect.prepare import Problem, problem_from_moments

__all__ = ["prepare_from_batches"]


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

    Every chunk is shifted by the first chunk's column means before its Gram is taken (host BLAS
    ``syrk``) and added to a float64 accumulator, so a single pass is exact algebra and large
    offsets cost no precision as long as the first chunk's means are of the data's order (a second
    centred pass is never needed). The checks of :func:`prepare` run per chunk and name it.

    Args:
      batches: an iterable of ``(X_chunk, Y_chunk)`` or ``(X_chunk, Y_chunk, w_chunk)``: X_chunk
        (m, D), Y_chunk (m,) or (m, T), w_chunk (m,) non-negative row weights. Chunks may have any
        number of rows (also 0); numpy, memmap or jax arrays.
      groups, l2, whiten, constant_columns, rank_tol: as in :func:`prepare` (the Gram is always
        formed: D×D must fit in memory).
      progress: show a progress bar over the chunks (needs ``tqdm``).

    Returns:
      The :class:`~jaxselect.Problem` of the concatenated data.

    Raises:
      ValueError: a malformed chunk, mismatched widths, NaN/Inf (naming the chunk), no rows, and
        everything :func:`prepare` raises. TypeError: a chunk that is not a tuple of arrays.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(1000, 5)); y = X[:, 1] - X[:, 3]
    >>> chunks = ((X[i:i + 300], y[i:i + 300]) for i in range(0, 1000, 300))
    >>> sorted(js.cs_omp(js.prepare_from_batches(chunks)).order.tolist()[:2])
    [1, 3]
    """
    iterator = iter(batches)
    if progress:
        try:
            from tqdm.auto import tqdm
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise ImportError("progress=True needs tqdm: pip install tqdm") from err
        iterator = tqdm(iterator, unit="chunk", desc="prepare_from_batches")
    acc = None
    for i, batch in enumerate(iterator):
        X, Y, w = _unpack(batch, i)
        if acc is None:
            acc = MomentAccumulator(float_dtype_for(X.dtype))
        acc.add(X, Y, w, what=f"batch {i} (rows {acc.n_rows}–{acc.n_rows + X.shape[0] - 1})")
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
    if X.ndim != 2:
        raise ValueError(f"X in batch {i} must be 2-D (rows, features); got shape {X.shape}")
    if Y.ndim not in (1, 2):
        raise ValueError(f"Y in batch {i} must be 1-D (rows,) or 2-D (rows, T); got shape {Y.shape}")
    if Y.shape[0] != X.shape[0]:
        raise ValueError(f"batch {i}: Y has {Y.shape[0]} rows but X has {X.shape[0]}; they must match")
    if w is not None:
        if w.shape != (X.shape[0],):
            raise ValueError(f"batch {i}: sample_weight must have shape ({X.shape[0]},); got {w.shape}")
        if not np.isfinite(w).all() or (w < 0).any():
            raise ValueError(f"batch {i}: sample_weight must be finite and non-negative")
    return X, (Y[:, None] if Y.ndim == 1 else Y), w
