"""How FSA scales the columns of a linear design: the ``scale`` option of :func:`~jaxselect.fsa`.

FSA ranks features by ``|β_j|`` on scaled columns, and its ridge ``(l2/2)‖β‖²`` acts on those
coefficients, so the column scale decides which features compete on equal terms.

* ``"auto"`` (default): ``"sparse"``'s factor on *indicator* columns — those whose non-zero
  entries all hold one value (0/1 flags, one-hot codes, words seen once per document) — and
  ``"std"`` on every other column (real values, counts). On a dense real X (no column with zeros
  and a single non-zero value) it is exactly ``"std"``; on click logs and binary bags of words it
  is ``"sparse"``. A streamed X (memmap, batches, column source) is scaled by ``"std"``.
* ``"std"``: every column centred and divided by its standard deviation σ_j (unit
  variance). On a binary indicator seen in a fraction p of the rows, σ = √(p(1 − p)): a column
  seen in ten rows of 10⁵ is multiplied by ~100 on those rows, competes with common columns on
  equal terms, and its coefficient is barely touched by the ridge — on click-log or bag-of-words
  data FSA then keeps, and overfits, rare columns.
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

__all__ = ["SCALES", "check_scale_rule", "column_fill", "has_indicator_columns", "indicator_columns", "rescale_design"]

#: The column-scaling rules of :func:`~jaxselect.fsa` (see the module docstring).
SCALES = ("auto", "std", "sparse")


def check_scale_rule(scale) -> str:
    """``scale`` validated: one of :data:`SCALES`."""
    if not isinstance(scale, str) or scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}; got {scale!r}")
    return scale


@jax.jit
def _fill_sparse(op: SparseDesign, w):
    stored = op.data != 0  # padding entries are zeros
    we = stored.astype(op.dtype) if w is None else jnp.where(stored, w[op.rows], jnp.zeros((), op.dtype))
    per_slot = jax.ops.segment_sum(we, op.cols, num_segments=op.n_slots)
    per_col = per_slot if op.alias is None else per_slot[op.alias]
    total = jnp.asarray(op.n_rows, op.dtype) if w is None else jnp.sum(w)
    return per_col / total


@jax.jit
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


@jax.jit
def _indicator_sparse(op: SparseDesign, w):
    stored = op.data != 0
    if w is not None:
        stored = stored & (w[op.rows] > 0)
    big = jnp.asarray(jnp.inf, op.dtype)
    hi = jax.ops.segment_max(jnp.where(stored, op.data, -big), op.cols, num_segments=op.n_slots)
    lo = jax.ops.segment_min(jnp.where(stored, op.data, big), op.cols, num_segments=op.n_slots)
    flag = hi == lo
    return flag if op.alias is None else flag[op.alias]


@jax.jit
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


@functools.partial(jax.jit, static_argnames="auto")
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
