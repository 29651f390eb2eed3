"""How FSA scales the columns of a linear design: the ``scale`` option of :func:`~jaxselect.fsa`.

FSA ranks features by ``|β_j|`` on scaled columns, and its ridge ``(l2/2)‖β‖²`` acts on those
coefficients, so the column scale decides which features compete on equal terms.

* ``"auto"`` (default): ``"sparse"``'s factor on *indicator* columns — those whose non-zero
  entries all hold one value (0/1 flags, one-hot codes, words seen once per document) — and
  ``"std"`` on every other column (real values, counts). On a dense real X (no column with zeros
  and a single non-zero value) it is exactly ``"std"``; on click logs and binary bags of words it
  is ``"sparse"``; on sparse count data (raw word counts, :func:`is_count_data`) it is
  ``"log1p"``. A streamed X (memmap, batches, column source) is scaled by ``"std"``.
* ``"std"``: every column centred and divided by its standard deviation σ_j (unit
  variance). On a binary indicator seen in a fraction p of the rows, σ = √(p(1 − p)): a column
  seen in ten rows of 10⁵ is multiplied by ~100 on those rows, competes with common columns on
  equal terms, and its coefficient is barely touched by the ridge — on click-log or bag-of-words
  data FSA then keeps, and overfits, rare columns.
* ``"log1p"``: every value x replaced by ``sign(x)·log(1 + |x|)`` — ``log(1 + x)`` on counts, the
  sublinear term frequency of ``TfidfVectorizer(sublinear_tf=True)`` — then ``"std"``. A pure
  per-entry map that keeps zeros (a sparse X's stored values only; never densified); the result
  records it (``FSAResult.transform``) and every prediction applies it to the new X.
  ``"auto"`` picks it on *count data* (:func:`is_count_data`: a sparse X in memory whose stored
  values are non-negative whole numbers, at least half of them in columns that are not
  indicators — raw bags of words), where :func:`~jaxselect.fsa`'s ``l2="auto"`` adds a ridge.
* ``"sparse"``: centred and divided by ``σ_j / √f_j``, f_j the (weighted) fraction of rows where
  the column is non-zero — unit variance *per non-zero entry*. On a column without zeros (f = 1,
  any dense X) this is exactly ``"std"``; on a 0/1 indicator the scale is √(1 − p) ≈ 1, so the
  column keeps its raw 0/1 values and the ridge and the ranking weigh a coefficient by how many
  rows carry it (as an L1 or L2 penalty on raw indicators does).

Both keep centring implicit (a sparse X is never densified) and both return coefficients in the
raw feature space; inert (constant) columns stay inert.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from ..design import SparseDesign
from ..programs import jit

__all__ = [
    "LOG1P",
    "SCALES",
    "apply_transform",
    "check_scale_rule",
    "column_fill",
    "has_indicator_columns",
    "indicator_columns",
    "is_count_data",
    "log1p_values",
    "rescale_design",
    "result_transform",
]

#: The column-scaling rules of :func:`~jaxselect.fsa` (see the module docstring).
SCALES = ("auto", "std", "sparse", "log1p")
#: The value map of ``scale="log1p"``, as ``FSAResult.transform`` records it.
LOG1P = "log1p"


def check_scale_rule(scale) -> str:
    """``scale`` validated: one of :data:`SCALES`."""
    if not isinstance(scale, str) or scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}; got {scale!r}")
    return scale


@jit
def _fill_sparse(op: SparseDesign, w):
    stored = op.data != 0  # padding entries are zeros
    we = stored.astype(op.dtype) if w is None else jnp.where(stored, w[op.rows], jnp.zeros((), op.dtype))
    per_slot = jax.ops.segment_sum(we, op.cols, num_segments=op.n_slots)
    per_col = per_slot if op.alias is None else per_slot[op.alias]
    total = jnp.asarray(op.n_rows, op.dtype) if w is None else jnp.sum(w)
    return per_col / total


@jit
def _fill_dense(X, w):
    nz = (X != 0).astype(X.dtype)
    if w is None:
        return jnp.mean(nz, axis=0)
    return (w @ nz) / jnp.sum(w)  # w @ X, never X.T @ w (slow on XLA's CPU backend)


def _per_column(design, weights, on_sparse, on_dense):
    """``on_sparse(design, weights)`` or ``on_dense(design.X, weights)``; TypeError for a design
    that is not on the device (the column rules read its stored X)."""
    if design.sparse:
        return on_sparse(design, weights)
    if hasattr(design, "X"):
        return on_dense(design.X, weights)
    raise TypeError(
        f"scale='auto'/'sparse' needs the design on the device (a DenseDesign or SparseDesign); got "
        f"{type(design).__name__}"
    )


def column_fill(design, weights=None):
    """(D,) the fraction of rows (weighted by ``weights`` (n,), if given) where each column of the
    design's stored X is non-zero; a :class:`~jaxselect.design.SparseDesign` counts its stored
    non-zero entries, a dense design its non-zero values."""
    return _per_column(design, weights, _fill_sparse, _fill_dense)


@jit
def _indicator_sparse(op: SparseDesign, w):
    stored = op.data != 0
    if w is not None:
        stored = stored & (w[op.rows] > 0)
    big = jnp.asarray(jnp.inf, op.dtype)
    hi = jax.ops.segment_max(jnp.where(stored, op.data, -big), op.cols, num_segments=op.n_slots)
    lo = jax.ops.segment_min(jnp.where(stored, op.data, big), op.cols, num_segments=op.n_slots)
    flag = hi == lo
    return flag if op.alias is None else flag[op.alias]


@jit
def _indicator_dense(X, w):
    stored = X != 0
    if w is not None:
        stored = stored & (w[:, None] > 0)
    big = jnp.asarray(jnp.inf, X.dtype)
    return jnp.max(jnp.where(stored, X, -big), axis=0) == jnp.min(jnp.where(stored, X, big), axis=0)


def indicator_columns(design, weights=None):
    """(D,) bool: the columns of the design's stored X whose non-zero entries (on rows of positive
    weight) all hold one value — 0/1 flags and the like (``scale="auto"``'s indicators)."""
    return _per_column(design, weights, _indicator_sparse, _indicator_dense)


def has_indicator_columns(X, weights=None, block_bytes: int = 1 << 24) -> bool:
    """True when a dense host X (N, M) has a column with zeros whose non-zero entries (on the rows
    of positive ``weights``, if given) all hold one value — where ``scale="auto"`` differs from
    ``"std"``. Column blocks of about ``block_bytes``: no full-size temporary."""
    import numpy as np

    X = np.asarray(X)
    rows = None if weights is None else np.asarray(weights) > 0
    step = max(1, block_bytes // max(1, X.shape[0] * X.itemsize))
    for j in range(0, X.shape[1], step):
        B = X[:, j : j + step] if rows is None else X[rows, j : j + step]
        stored = B != 0
        hi = np.where(stored, B, -np.inf).max(axis=0, initial=-np.inf)
        lo = np.where(stored, B, np.inf).min(axis=0, initial=np.inf)
        if np.any((hi == lo) & ~stored.all(axis=0)):
            return True
    return False


@functools.partial(jit, static_argnames="auto")
def _indicator_factor(design, weights, auto: bool):
    fill = column_fill(design, weights)
    root = jnp.sqrt(jnp.maximum(fill, jnp.zeros((), fill.dtype)))
    if auto:
        root = jnp.where(indicator_columns(design, weights), root, jnp.ones((), root.dtype))
    return design.factor * root.astype(design.factor.dtype)


def rescale_design(design, weights, scale: str):
    """The design with the column scale ``scale`` (:data:`SCALES`): unchanged for ``"std"``; for
    ``"sparse"`` the factors ``live/σ`` multiplied by ``√f`` (:func:`column_fill`); for ``"auto"``
    multiplied by ``√f`` on the :func:`indicator_columns` only."""
    if scale == "std":
        return design
    return design._replace(factor=_indicator_factor(design, weights, scale == "auto"))


# --------------------------------------------------------------------------- count data and log1p
def _host_csr(X):
    """The scipy CSR of a concrete sparse X (duplicates summed; stored zeros kept: the caller skips
    them); None where X is not one (a traced or streamed X, a dense X)."""
    import scipy.sparse as sp

    from .._validation import is_traced
    from ..design import is_sparse

    if not is_sparse(X) or is_traced(X):
        return None
    if sp.issparse(X):
        csr = sp.csr_matrix(X)
    else:  # a concrete BCOO/BCSR: its entries on the host
        from ..design.sparse import as_sparse_csr

        try:
            csr = as_sparse_csr(X)
        except (TypeError, ValueError):
            return None  # the front door raises with its message
    if not csr.has_canonical_format:
        csr = csr.copy()
        csr.sum_duplicates()
    return csr


def _not_counts(csr, keep, block: int = 1 << 20) -> bool:
    """Whether a stored value of ``csr`` on a row of ``keep`` (None: every row) is negative,
    fractional or NaN; blocks of ``block`` values (no full-size temporary), stopping at the first
    such value on a kept row (real-valued data: in the first block)."""
    import numpy as np

    data = csr.data
    for start in range(0, data.size, block):
        part = data[start : start + block]
        bad = ~(part >= 0) if part.dtype.kind != "f" else ~(part >= 0) | (np.floor(part) != part)
        if not bad.any():
            continue
        if keep is None:
            return True
        rows = np.searchsorted(csr.indptr, start + np.flatnonzero(bad), side="right") - 1
        if keep[rows].any():
            return True
    return False


def is_count_data(X, weights=None) -> bool:
    """True when X is *count data*, where ``scale="auto"`` is ``"log1p"``: a sparse X in memory
    (``scipy.sparse``, a concrete BCOO/BCSR) whose stored values on the rows of positive
    ``weights`` (host weights; device weights: every row) are non-negative whole numbers, not all
    0/1, with at least half of them in columns that are not indicators (columns whose non-zero
    values differ: a word counted 1 in one document and 3 in another).

    Not count data: dense X (its integer columns are more often codes, ranks or ages than counts);
    0/1 indicators (click logs, binary bags of words, ``make_url_like``); any negative or fractional
    stored value (real-valued, TF-IDF or row-normalised features); a few count columns among many
    indicators. X is read in blocks, without a copy, until the first value that rules it out (0/1
    data: their maximum); only count data take a column-ordered copy for the last rule. Nothing
    compiled."""
    import numpy as np

    csr = _host_csr(X)
    if csr is None or csr.data.size == 0 or csr.data.dtype.kind not in "biuf" or not csr.data.max() > 1:
        return False  # (every value in [0, 1] on every row: on the weighted rows too)
    keep = None
    if isinstance(weights, np.ndarray) and weights.shape == (csr.shape[0],) and not (weights > 0).all():
        keep = weights > 0
    if _not_counts(csr, keep):
        return False
    if keep is not None:
        csr = csr[keep]
        if csr.data.size == 0 or not csr.data.max() > 1:
            return False
    csc = csr.tocsc(copy=True)
    csc.eliminate_zeros()
    per_col = np.diff(csc.indptr)
    filled = per_col > 0
    starts = csc.indptr[:-1][filled]
    varied = np.maximum.reduceat(csc.data, starts) != np.minimum.reduceat(csc.data, starts)
    return 2 * int(per_col[filled][varied].sum()) >= csc.nnz


def _signed_log1p(values, xp):
    """``sign(x)·log(1 + |x|)``: ``log1p(x)`` bit for bit on x ≥ 0, finite and odd on x < 0."""
    return xp.copysign(xp.log1p(xp.abs(values)), values)


def log1p_values(X, name: str = "X"):
    """X with every value x replaced by ``sign(x)·log(1 + |x|)`` (``scale="log1p"``), in the dtype
    the library computes in: a sparse X (scipy.sparse, BCOO/BCSR) as a new canonical scipy CSR
    (its stored values mapped, never densified), a numpy array as a new array, a ``jax.Array``
    (traced too) by ``jnp``. The user's X is never modified.

    Raises:
      TypeError: a streamed X (memmap, batches, a column source), which would be read whole.
    """
    import numpy as np
    import scipy.sparse as sp

    from .._validation import float_dtype_for, is_traced
    from ..design import is_sparse
    from ..design.sparse import as_sparse_csr
    from ..design.stream import stream_kind

    if is_sparse(X):
        if is_traced(X):
            raise TypeError(
                f"scale='log1p' maps the stored values of a sparse {name} on the host: pass a concrete {name}"
            )
        csr = as_sparse_csr(X, name)
        return sp.csr_matrix((_signed_log1p(csr.data, np), csr.indices, csr.indptr), shape=csr.shape)
    if stream_kind(X) in ("source", "memmap"):
        raise TypeError(
            f"scale='log1p' maps every value of {name} in memory, and this {name} ({type(X).__name__}) streams: "
            "load it (a numpy array or a scipy.sparse matrix), or pass scale='std'"
        )
    if isinstance(X, jax.Array) or is_traced(X):
        dtype = float_dtype_for(X.dtype)
        return _signed_log1p(jnp.asarray(X, dtype), jnp)
    values = np.asarray(X)
    if values.dtype.kind not in "biuf":
        raise TypeError(
            f"scale='log1p' maps the values of {name}: pass a numeric array or a sparse matrix; got {type(X).__name__}"
        )
    return _signed_log1p(values.astype(float_dtype_for(values.dtype)), np)


def result_transform(result):
    """The value map a fitted result was trained on (``FSAResult.transform``): None or ``"log1p"``
    (a result built by hand or before the field: None; a result through ``np.asarray``: its str)."""
    transform = getattr(result, "transform", None)
    if transform is None:
        return None
    transform = str(transform.item() if hasattr(transform, "item") else transform)
    if transform != LOG1P:
        raise ValueError(f"FSAResult.transform must be None or {LOG1P!r}; got {transform!r}")
    return transform


def apply_transform(X, transform):
    """X (numpy, ``jax.Array``, scipy.sparse) through ``transform`` (None: X itself), keeping its
    type and float dtype (integer X gives float64; a jax X the default float) — the map a
    prediction applies to the columns it reads."""
    if transform is None:
        return X
    import numpy as np
    import scipy.sparse as sp

    if sp.issparse(X):
        dtype = X.dtype if X.dtype.kind == "f" else np.float64  # (integer counts: float values)
        out = X.astype(dtype, copy=True)
        out.data = _signed_log1p(out.data, np).astype(dtype, copy=False)
        return out
    if isinstance(X, jax.Array):
        return _signed_log1p(X if jnp.issubdtype(X.dtype, jnp.floating) else X.astype(float), jnp)
    X = np.asarray(X)
    dtype = X.dtype if X.dtype.kind == "f" else np.float64
    return _signed_log1p(X.astype(dtype, copy=False), np)
