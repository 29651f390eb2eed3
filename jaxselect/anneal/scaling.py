"""How FSA scales the columns of a linear design: the ``scale`` option of :func:`~jaxselect.fsa`.

FSA ranks features by ``|β_j|`` on scaled columns, and its ridge ``(l2/2)‖β‖²`` acts on those
coefficients, so the column scale decides which features compete on equal terms.

* ``"std"`` (default): every column centred and divided by its standard deviation σ_j (unit
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

import jax
import jax.numpy as jnp

from ..design import SparseDesign

__all__ = ["SCALES", "check_scale_rule", "column_fill", "rescale_design"]

#: The column-scaling rules of :func:`~jaxselect.fsa` (see the module docstring).
SCALES = ("std", "sparse")


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


def column_fill(design, weights=None):
    """(D,) the fraction of rows (weighted by ``weights`` (n,), if given) where each column of the
    design's stored X is non-zero; a :class:`~jaxselect.design.SparseDesign` counts its stored
    non-zero entries, a dense design its non-zero values."""
    if design.sparse:
        return _fill_sparse(design, weights)
    if hasattr(design, "X"):
        return _fill_dense(design.X, weights)
    raise TypeError(
        f"scale='sparse' needs the design on the device (a DenseDesign or SparseDesign); got {type(design).__name__}"
    )


def rescale_design(design, weights, scale: str):
    """The design with the column scale ``scale`` (:data:`SCALES`): unchanged for ``"std"``; for
    ``"sparse"`` the factors ``live/σ`` multiplied by ``√f`` (:func:`column_fill`)."""
    if scale == "std":
        return design
    fill = column_fill(design, weights)
    root = jnp.sqrt(jnp.maximum(fill, jnp.zeros((), fill.dtype)))
    return design._replace(factor=design.factor * root.astype(design.factor.dtype))
