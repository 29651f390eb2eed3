"""Small pure linear-algebra kernels shared by the solvers (all jit-able, fixed shapes).

* :func:`gather_groups` / :func:`scatter_groups` move between feature axis (D,) and the padded group
  table (J, s_max) of :class:`jaxselect.Groups`.
* :func:`apply_block_diag` multiplies by a block-diagonal matrix given as per-group blocks, in
  O(R·D·s_max) instead of the O(R·D²) of a dense product.
* :func:`ridge_solve` solves (A + l2 I) x = b by Cholesky.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["gather_groups", "scatter_groups", "apply_block_diag", "ridge_solve"]


def gather_groups(values: jax.Array, index: jax.Array, mask: jax.Array, axis: int = -1) -> jax.Array:
    """Take ``values`` along ``axis`` (length D) into a (..., J, s_max, ...) table, padding with 0.

    Args:
      values: array with a feature axis of length D at ``axis``.
      index: (J, s_max) feature indices, padded with D.
      mask: (J, s_max) bool, True on real entries.
    """
    axis = axis % values.ndim
    out = jnp.take(values, index, axis=axis, mode="fill", fill_value=0)
    shape = [1] * out.ndim
    shape[axis], shape[axis + 1] = mask.shape
    return jnp.where(mask.reshape(shape), out, jnp.zeros((), out.dtype))


def scatter_groups(table: jax.Array, index: jax.Array, n_features: int, axis: int = -2) -> jax.Array:
    """Inverse of :func:`gather_groups`: (..., J, s_max, ...) at ``axis``,``axis+1`` → (..., D, ...).

    Padded entries (index D) are dropped.
    """
    axis = axis % table.ndim
    moved = jnp.moveaxis(table, (axis, axis + 1), (0, 1))
    flat = moved.reshape((-1,) + moved.shape[2:])
    out = jnp.zeros((n_features,) + moved.shape[2:], table.dtype)
    out = out.at[index.reshape(-1)].set(flat, mode="drop")
    return jnp.moveaxis(out, 0, axis)


def apply_block_diag(M: jax.Array, blocks: jax.Array, index: jax.Array, mask: jax.Array) -> jax.Array:
    """Right-multiply ``M`` (R, D) by the block-diagonal matrix with blocks (J, s_max, s_max).

    ``out[:, index[g, b]] = Σ_a M[:, index[g, a]] · blocks[g, a, b]`` — O(R·D·s_max).
    """
    Mg = gather_groups(M, index, mask, axis=-1)  # (R, J, s)
    out = jnp.einsum("rja,jab->rjb", Mg, blocks)
    return scatter_groups(out, index, M.shape[-1], axis=-2)


def ridge_solve(A: jax.Array, b: jax.Array, l2=0.0) -> jax.Array:
    """Solve (A + l2·I) x = b for symmetric positive definite A (d, d), b (d,) or (d, T)."""
    d = A.shape[0]
    L = jnp.linalg.cholesky(A + l2 * jnp.eye(d, dtype=A.dtype))
    return jax.scipy.linalg.cho_solve((L, True), b)
