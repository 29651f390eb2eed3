"""Piecewise-linear (PL) learners and their priors (FSA paper §2.5.1, eqs. 12–16).

A PL learner on feature j has B bins on a uniform grid over the feature's training range
``[x_min, x_max]``, bin length ``b = (x_max − x_min) / B``. A value x (clipped to the range) has
bin index ``j(x) = ⌊(x − x_min)/b⌋ ∈ {0, …, B−1}`` and relative position
``α(x) = (x − x_min)/b − j(x) ∈ [0, 1]``, and the learner returns

    f_β(x) = β_{j(x)} (1 − α(x)) + β_{j(x)+1} α(x) = u(x)ᵀ β,   β ∈ R^{B+1}.

Only ``(j(x), α(x))`` is stored per entry — an (N, M) integer array and an (N, M) float array —
never the dense N × M × (B+1) basis expansion; gradients scatter back through ``jax.grad``.

The model is additive, eq. (12): ``f(x) = Σ_j f_{β_j}(x_j)``. Here each response is *centered* on
the training data, ``f_j(x) = (u(x) − ū_j)ᵀ β_j`` with ``ū_j = mean_n u(x_nj)``: since the basis
is a partition of unity, this removes the constant direction that every feature shares with the
intercept (which stays separate and unpenalised) and keeps the step size scale-free.

Priors: the shrinkage prior ``λ ‖β_j‖²`` (eqs. 13, 16; :func:`~jaxselect.anneal.fsa` writes it
``(l2/2) ‖β_j‖²`` on the mean loss) and the second-order smoothness prior of
eq. (13), ``c Σ_{k=1}^{B−1} (β_{j,k+1} + β_{j,k−1} − 2 β_{j,k})²``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = [
    "PLGrid",
    "pl_grid",
    "pl_encode",
    "pl_scores",
    "pl_response",
    "pl_basis_mean",
    "smoothness_penalty",
]


class PLGrid(NamedTuple):
    """Uniform grid of a set of PL learners.

    Attributes:
      x_min: (M,) left end of each feature's training range.
      bin_width: (M,) bin length ``b`` (1 for constant features, which then sit in bin 0).
    """

    x_min: jax.Array
    bin_width: jax.Array


def index_dtype(bins: int):
    """Smallest signed integer dtype that holds bin indices 0..bins−1."""
    if bins <= 127:
        return jnp.int8
    if bins <= 32767:
        return jnp.int16
    return jnp.int32


def pl_grid(X: jax.Array, bins: int, w: jax.Array | None = None) -> PLGrid:
    """The uniform grid over each column's range.

    Args:
      X: (N, M) training data.
      bins: B ≥ 1.

    Returns:
      :class:`PLGrid` with (M,) arrays.

    >>> g = pl_grid(jnp.array([[0.0], [2.0]]), 4)
    >>> float(g.bin_width[0])
    0.5
    """
    if w is None:
        lo = jnp.min(X, axis=0)
        hi = jnp.max(X, axis=0)
    else:  # the range of the rows with positive weight
        pos = (w > 0)[:, None]
        lo = jnp.min(jnp.where(pos, X, jnp.inf), axis=0)
        hi = jnp.max(jnp.where(pos, X, -jnp.inf), axis=0)
    width = (hi - lo) / jnp.asarray(bins, X.dtype)
    width = jnp.where(width > 0, width, jnp.ones_like(width))
    return PLGrid(lo, width)


def pl_encode(X: jax.Array, grid: PLGrid, bins: int) -> tuple[jax.Array, jax.Array]:
    """Bin index and in-bin weight of every entry (values outside the grid are clipped).

    Args:
      X: (N, M) data.
      grid: :class:`PLGrid` of the M columns.
      bins: B.

    Returns:
      ``(idx, alpha)``: idx (N, M) in the smallest integer dtype holding 0..B−1, alpha (N, M) in
      X's dtype, with ``x ≈ x_min + (idx + alpha)·b``.

    >>> g = PLGrid(jnp.array([0.0]), jnp.array([0.5]))
    >>> idx, a = pl_encode(jnp.array([[0.75], [9.0]]), g, 4)
    >>> idx[:, 0].tolist(), a[:, 0].tolist()
    ([1, 3], [0.5, 1.0])
    """
    t = (X - grid.x_min[None, :]) / grid.bin_width[None, :]
    t = jnp.clip(t, 0.0, float(bins))
    j = jnp.clip(jnp.floor(t), 0.0, float(bins - 1))
    alpha = t - j
    return j.astype(index_dtype(bins)), alpha


def _gather_pair(idx: jax.Array, coef: jax.Array) -> tuple[jax.Array, jax.Array]:
    """coef[j, idx[n, j]] and coef[j, idx[n, j] + 1] for all n, j: two (N, W) arrays."""
    width, p = coef.shape
    base = jnp.arange(width, dtype=jnp.int32) * jnp.int32(p)
    flat = idx.astype(jnp.int32) + base[None, :]
    c = coef.reshape(-1)
    return jnp.take(c, flat, mode="clip"), jnp.take(c, flat + 1, mode="clip")


def pl_scores(idx: jax.Array, alpha: jax.Array, basis_mean: jax.Array, coef: jax.Array) -> jax.Array:
    """Additive centered PL response ``f(x_n) = Σ_j (u(x_nj) − ū_j)ᵀ β_j`` (eq. 12, 15).

    Args:
      idx: (N, W) bin indices.
      alpha: (N, W) in-bin weights.
      basis_mean: (W, B+1) ū_j (zeros for an uncentered response).
      coef: (W, B+1) coefficients β_j.

    Returns:
      (N,) scores.
    """
    lo, hi = _gather_pair(idx, coef)
    per_entry = lo + alpha * (hi - lo)
    return jnp.sum(per_entry, axis=1) - jnp.sum(basis_mean * coef)


def pl_basis_mean(idx: jax.Array, alpha: jax.Array, bins: int, w: jax.Array | None = None) -> jax.Array:
    """ū_j = mean_n u(x_nj) (weighted mean with row weights ``w``): (W, B+1), each row sums to 1
    (computed by one scatter via vjp)."""
    n, width = idx.shape
    zeros = jnp.zeros((width, bins + 1), alpha.dtype)
    mean0 = jnp.zeros_like(zeros)
    _, vjp = jax.vjp(lambda c: pl_scores(idx, alpha, mean0, c), zeros)
    (g,) = vjp(jnp.full((n,), 1.0 / n, alpha.dtype) if w is None else w.astype(alpha.dtype) / jnp.sum(w))
    return g


def pl_response(coef: jax.Array, x: jax.Array, x_min, bin_width, basis_mean=None) -> jax.Array:
    """Evaluate one feature's learned PL response at points x (clipped to the grid).

    Args:
      coef: (B+1,) coefficients of the feature.
      x: (n,) points.
      x_min, bin_width: the feature's grid (scalars).
      basis_mean: optional (B+1,) ū_j; when given the centered response (as used in the
        model) is returned.

    Returns:
      (n,) values ``(u(x) − ū)ᵀ β``.

    >>> float(pl_response(jnp.array([0.0, 1.0, 4.0]), jnp.array([1.5]), 0.0, 1.0)[0])
    2.5
    """
    coef = jnp.asarray(coef)
    x = jnp.asarray(x).astype(coef.dtype)
    bins = coef.shape[0] - 1
    grid = PLGrid(jnp.reshape(jnp.asarray(x_min, x.dtype), (1,)), jnp.reshape(jnp.asarray(bin_width, x.dtype), (1,)))
    idx, alpha = pl_encode(x[:, None], grid, bins)
    mean = jnp.zeros((1, bins + 1), coef.dtype) if basis_mean is None else basis_mean[None, :]
    lo, hi = _gather_pair(idx, coef[None, :])
    return (lo + alpha * (hi - lo))[:, 0] - jnp.sum(mean[0] * coef)


def smoothness_penalty(coef: jax.Array) -> jax.Array:
    """Second-order smoothness prior of eq. (13) without its weight c.

    ``Σ_j Σ_{k=1}^{B−1} (β_{j,k+1} + β_{j,k−1} − 2 β_{j,k})²`` for coef of shape (W, B+1); zero
    when B < 2. Its Hessian is ``2 D₂ᵀD₂`` with ``λ_max(D₂ᵀD₂) ≤ 16``.

    >>> float(smoothness_penalty(jnp.array([[0.0, 1.0, 0.0]])))  # (0 + 0 - 2)^2
    4.0
    """
    if coef.shape[1] < 3:
        return jnp.zeros((), coef.dtype)
    d2 = coef[:, 2:] + coef[:, :-2] - 2.0 * coef[:, 1:-1]
    return jnp.sum(d2 * d2)
