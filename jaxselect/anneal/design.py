"""FSA's designs: any linear design operator, or the piecewise-linear learners' :class:`PLDesign`.

FSA touches its data only through methods, so any storage of X that implements the
:class:`~jaxselect.design.DesignOperator` protocol (dense on one device or row-sharded, its
transposed compacted copy :class:`~jaxselect.design.TransposedDesign`, sparse, ...) plugs in
with no change here:

* ``design.mv(c)`` / ``design.rmv(u)`` — scores ``Ã c`` and the transpose ``u Ã`` (linear learners
  on standardized columns, the standardisation applied implicitly: X is never copied);
* ``design.compact(cols, block)`` — the kept columns between stages, as the cheapest operator for
  repeated products (a dense X gives its transposed copy, gathered in row blocks);
* ``design.subsample_rows(stride)`` — every ``stride``-th row, for a cheap spectral estimate;
* ``design.shape`` — (N, W).

:class:`PLDesign` — centered piecewise-linear learners (see :mod:`.piecewise`) — is FSA's own (it
is not a view of X) and has the same methods, with (W, B+1) coefficient blocks; its transpose is
``jax.vjp`` (a scatter-add of two entries per (row, feature)).

Coefficients are always (W, P): P = 1 for linear learners, P = B + 1 for PL. :func:`scores` and
:func:`gradient` are the two products on them.
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Union

import jax
import jax.numpy as jnp

from ..design import DesignOperator
from .piecewise import pl_scores

__all__ = ["PLDesign", "FSADesign", "scores", "gradient", "n_params"]


class PLDesign(NamedTuple):
    """PL entries. idx (N, W) int, alpha (N, W) float, basis_mean (W, B+1)."""

    idx: jax.Array
    alpha: jax.Array
    basis_mean: jax.Array

    #: a dense encoding (the design operators' capability, see :mod:`jaxselect.design.operators`)
    sparse = False

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.idx.shape)

    @property
    def dtype(self):
        return self.alpha.dtype

    def mv(self, coef: jax.Array) -> jax.Array:
        """Scores ``Σ_j (u(x_j) − ū_j)ᵀ c_j``: (W, B+1) -> (N,)."""
        return pl_scores(self.idx, self.alpha, self.basis_mean, coef)

    def rmv(self, u: jax.Array) -> jax.Array:
        """The transpose: (N,) -> (W, B+1)."""
        _, vjp = jax.vjp(self.mv, jnp.zeros(self.basis_mean.shape, u.dtype))
        return vjp(u)[0]

    def compact(self, cols: jax.Array, block: int = 0) -> "PLDesign":
        """Features ``cols`` (W',) (clipped gathers: the indices are always valid)."""
        take = functools.partial(jnp.take, mode="clip")
        return PLDesign(take(self.idx, cols, axis=1), take(self.alpha, cols, axis=1), take(self.basis_mean, cols, axis=0))

    def subsample_rows(self, stride: int) -> "PLDesign":
        return PLDesign(self.idx[:: int(stride)], self.alpha[:: int(stride)], self.basis_mean)


#: FSA's design: a linear :class:`~jaxselect.design.DesignOperator` or PL learners (named apart
#: from :class:`jaxselect.Design`, the sequencing solvers' design).
FSADesign = Union[DesignOperator, PLDesign]


def n_params(design: FSADesign) -> int:
    """P, the coefficients per feature: B + 1 for PL learners, 1 for a linear design."""
    return design.basis_mean.shape[1] if isinstance(design, PLDesign) else 1


def scores(design: FSADesign, coef: jax.Array) -> jax.Array:
    """Scores without intercept, ``A c``: (W, P) -> (N,)."""
    return design.mv(coef if n_params(design) > 1 else coef[:, 0])


def gradient(design: FSADesign, u: jax.Array) -> jax.Array:
    """Transpose ``Aᵀ u``: (N,) -> (W, P)."""
    g = design.rmv(u)
    return g if n_params(design) > 1 else g[:, None]
