"""The two FSA designs as linear operators on the per-feature coefficients (no intercept).

* :class:`LinearDesign` — standardized linear learners without copying X: with column means m
  and inverse scales d (0 for constant columns, the library's rule
  :func:`jaxselect.design.column_summary`: a column is constant iff max == min), ``A c = X (d ⊙ c) − mᵀ(d ⊙ c)`` and
  ``Aᵀ u = d ⊙ (uᵀX − (Σu) m)``. Reductions over rows are written ``u @ X`` so they stay a
  single matmul that XLA can shard over rows.
* :class:`LinearDesignT` — the same operator on a *compacted* copy stored transposed, Xᵀ (W, N):
  gathering kept columns of a row-major X straight into a (W, N) array is one fused pass with a
  single output buffer (gathering into (N, W) makes XLA build a column-major temporary and copy
  it, twice the memory), later compactions gather contiguous rows, and both products
  ``w @ Xᵀ`` and ``Xᵀ @ u`` are fast row-major forms.
* :class:`PLDesign` — centered piecewise-linear learners (see :mod:`.piecewise`), transpose by
  ``jax.vjp`` (a scatter-add of two entries per (row, feature)).

Coefficients are always (W, P): P = 1 for linear, P = B + 1 for PL. :func:`take_columns` gathers
the kept features between compacted stages.
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Union

import jax
import jax.numpy as jnp

from .piecewise import pl_scores

__all__ = [
    "LinearDesign",
    "LinearDesignT",
    "PLDesign",
    "FSADesign",
    "matvec",
    "rmatvec",
    "take_columns",
    "take_rows",
    "n_rows",
]


class LinearDesign(NamedTuple):
    """Raw X with the standardization kept aside. X (N, W), mean (W,), inv_scale (W,)."""

    X: jax.Array
    mean: jax.Array
    inv_scale: jax.Array


class LinearDesignT(NamedTuple):
    """Compacted linear design stored transposed. Xt (W, N), mean (W,), inv_scale (W,)."""

    Xt: jax.Array
    mean: jax.Array
    inv_scale: jax.Array


class PLDesign(NamedTuple):
    """PL entries. idx (N, W) int, alpha (N, W) float, basis_mean (W, B+1)."""

    idx: jax.Array
    alpha: jax.Array
    basis_mean: jax.Array


#: Any of the three FSA designs (named apart from :class:`jaxselect.Design`, the sequencing solvers' design).
FSADesign = Union[LinearDesign, LinearDesignT, PLDesign]


def n_rows(design: FSADesign) -> int:
    if isinstance(design, LinearDesign):
        return design.X.shape[0]
    if isinstance(design, LinearDesignT):
        return design.Xt.shape[1]
    return design.idx.shape[0]


def matvec(design: FSADesign, coef: jax.Array) -> jax.Array:
    """Scores without intercept, ``A c``: (W, P) -> (N,)."""
    if isinstance(design, LinearDesign):
        w = coef[:, 0] * design.inv_scale
        return design.X @ w - jnp.dot(design.mean, w)
    if isinstance(design, LinearDesignT):
        w = coef[:, 0] * design.inv_scale
        return w @ design.Xt - jnp.dot(design.mean, w)
    return pl_scores(design.idx, design.alpha, design.basis_mean, coef)


def rmatvec(design: FSADesign, u: jax.Array) -> jax.Array:
    """Transpose ``Aᵀ u``: (N,) -> (W, P)."""
    if isinstance(design, LinearDesign):
        g = (u @ design.X - jnp.sum(u) * design.mean) * design.inv_scale
        return g[:, None]
    if isinstance(design, LinearDesignT):
        g = (design.Xt @ u - jnp.sum(u) * design.mean) * design.inv_scale
        return g[:, None]
    zeros = jnp.zeros(design.basis_mean.shape, u.dtype)
    _, vjp = jax.vjp(lambda c: matvec(design, c), zeros)
    return vjp(u)[0]


def take_columns(design: FSADesign, cols: jax.Array, block: int = 0) -> FSADesign:
    """Keep features ``cols`` (int (W',), ascending, in range) of the design (linear -> transposed copy).

    The gathers clip their (always valid) indices instead of filling out-of-range ones: a fill
    adds a select over the gathered copy, a second buffer as large as the copy inside a compiled run.
    ``block`` > 0 gathers a row-major X into its transposed copy ``block`` rows at a time (a
    ``fori_loop``): on the CPU the fused gather-transpose reads X with a stride of M floats per
    element and is about 5× slower than the blocked one, which reads cache-resident row blocks.
    Use 0 for row-sharded X (the blocks would cross shards).
    """
    take = functools.partial(jnp.take, mode="clip")
    if isinstance(design, LinearDesign):
        return LinearDesignT(
            _gather_transposed(design.X, cols, block), take(design.mean, cols), take(design.inv_scale, cols)
        )
    if isinstance(design, LinearDesignT):
        return LinearDesignT(take(design.Xt, cols, axis=0), take(design.mean, cols), take(design.inv_scale, cols))
    return PLDesign(
        take(design.idx, cols, axis=1),
        take(design.alpha, cols, axis=1),
        take(design.basis_mean, cols, axis=0),
    )


def _gather_transposed(X, cols, block: int):
    """``X[:, cols].T`` (W, N), in row blocks of ``block`` (0: one fused gather)."""
    n = X.shape[0]
    if block <= 0 or n < 2 * block:
        return jnp.take(X, cols, axis=1, mode="clip").T
    n_blocks = n // block

    def body(i, out):
        rows = jax.lax.dynamic_slice_in_dim(X, i * block, block, 0)
        return jax.lax.dynamic_update_slice_in_dim(out, jnp.take(rows, cols, axis=1, mode="clip").T, i * block, 1)

    out = jax.lax.fori_loop(0, n_blocks, body, jnp.zeros((cols.shape[0], n), X.dtype))
    if n_blocks * block < n:
        tail = jnp.take(X[n_blocks * block :], cols, axis=1, mode="clip").T
        out = jax.lax.dynamic_update_slice_in_dim(out, tail, n_blocks * block, 1)
    return out


def take_rows(design: FSADesign, stride: int) -> FSADesign:
    """Every ``stride``-th row (a static strided slice), e.g. for a cheap spectral estimate."""
    if isinstance(design, LinearDesign):
        return LinearDesign(design.X[::stride], design.mean, design.inv_scale)
    if isinstance(design, LinearDesignT):
        return LinearDesignT(design.Xt[:, ::stride], design.mean, design.inv_scale)
    return PLDesign(design.idx[::stride], design.alpha[::stride], design.basis_mean)
