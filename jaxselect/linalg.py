"""Small pure linear-algebra kernels shared by the solvers (all jit-able, fixed shapes).

* :func:`gather_groups` / :func:`scatter_groups` move between feature axis (D,) and the padded group
  table (J, s_max) of :class:`jaxselect.Groups`.
* :func:`apply_block_diag` multiplies by a block-diagonal matrix given as per-group blocks, in
  O(R·D·s_max) instead of the O(R·D²) of a dense product.
* :func:`floored_cholesky` factors a symmetric block whose pivots may be lost to rounding (a unit
  numerically dependent on the ones before it): such pivots are dropped, never turned into NaN.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["gather_groups", "scatter_groups", "apply_block_diag", "floored_cholesky", "pivot_rtol"]


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


def pivot_rtol(dtype) -> float:
    """Relative pivot threshold of :func:`floored_cholesky`: √ε of ``dtype`` (3.5e-4 in float32).

    The same relative level as :func:`jaxselect.prepare`'s default ``rank_tol``: a pivot below
    ``√ε · A_jj`` means the unit explains less than √ε of its own variance beyond what came before
    it, which rounding in the moments (a few hundred ε in float32 after whitening) can fake.
    """
    return float(np.sqrt(np.finfo(dtype).eps))


_UNROLL_MAX = 8


def floored_cholesky(A: jax.Array, mask: jax.Array, floor: jax.Array):
    """Cholesky factor of the ``mask`` block of A, dropping pivots at or below ``floor``.

    Column by column (left-looking), the pivot ``d_j = A_jj − Σ_i L_ji²`` is kept when
    ``d_j > floor_j``; otherwise coordinate j is *dropped*: its row and column of L become those of
    the identity and it takes no part in later columns, i.e. L factors A restricted to the kept
    coordinates (in their order). Padded coordinates (``mask`` False) are identity too. So the
    result is finite whatever rounding did to A (a negative pivot of an exactly fitting prefix, a
    duplicated column): ``L`` is lower triangular with a positive diagonal.

    Args:
      A: (s, s) symmetric; only the ``mask`` block is read.
      mask: (s,) bool, the real coordinates.
      floor: (s,) or () pivot thresholds (≥ 0), e.g. ``pivot_rtol(dtype) · diag(A_original)``.

    Returns:
      ``(L, keep)``: L (s, s); keep (s,) bool, the coordinates kept (``mask & ~dropped``).
      Jit-able and ``vmap``-able; O(s³).
    """
    s = A.shape[-1]
    dtype = A.dtype
    eye = jnp.eye(s, dtype=dtype)
    A = jnp.where(mask[:, None] & mask[None, :], A, eye)
    floor = jnp.broadcast_to(jnp.asarray(floor, dtype), (s,))
    rows = jnp.arange(s, dtype=jnp.int32)

    def column(j, carry):
        L, keep = carry
        Lj = jax.lax.dynamic_index_in_dim(L, j, axis=0, keepdims=False)  # row j: its columns < j
        v = jax.lax.dynamic_index_in_dim(A, j, axis=1, keepdims=False) - L @ Lj
        piv = jax.lax.dynamic_index_in_dim(v, j, keepdims=False)
        m_j = jax.lax.dynamic_index_in_dim(mask, j, keepdims=False)
        ok = m_j & (piv > jax.lax.dynamic_index_in_dim(floor, j, keepdims=False))
        root = jnp.sqrt(jnp.where(ok, piv, jnp.ones((), dtype)))
        below = (rows > j) & ok
        col = jnp.where(below, v / root, jnp.zeros((), dtype)) + jnp.where(rows == j, root, jnp.zeros((), dtype))
        L = jax.lax.dynamic_update_index_in_dim(L, col, j, axis=1)
        keep = jax.lax.dynamic_update_index_in_dim(keep, ok | ~m_j, j, axis=0)
        return L, keep

    carry = (jnp.zeros((s, s), dtype), jnp.ones((s,), bool))
    if s <= _UNROLL_MAX:
        for j in range(s):
            carry = column(j, carry)
    else:
        carry = jax.lax.fori_loop(0, s, column, carry)
    L, keep = carry
    dropped = ~keep
    L = jnp.where(dropped[:, None] | dropped[None, :], eye, L)  # a dropped row/column is the identity's
    return L, keep & mask
