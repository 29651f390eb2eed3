"""The column summary: the library's one standardisation rule.

Every family standardises the columns of X the same way. With row weights ``w`` (1 by default)
and ``n = Σ w``:

    mean_j  = Σ_i w_i x_ij / n
    var_j   = Σ_i w_i (x_ij − mean_j)² / n
    live_j  = (max_j > min_j) and var_j > 0      (max/min over the rows with w_i > 0)
    scale_j = √var_j on live columns, 1 on inert ones

A column is *constant* (inert) when its maximum equals its minimum — exactly, so no rounding-level
tolerance decides it; inert columns are never selected and get coefficient 0 in every solver. The
standardised design is ``X̃ = (X − 1 meanᵀ) · diag(factor)`` with ``factor = live / scale``.

:func:`column_summary` computes the summary from the rows (one fused pass; each column is rescaled
by a power of two near its half-range before squaring, so squares neither overflow nor underflow);
:func:`summary_from_moments` reads the same numbers off precomputed :class:`~jaxselect.Moments`
(the host BLAS kernel of :func:`jaxselect.prepare`); :func:`standardize` is the rule itself.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect._compat import is_tracer
from jaxselect._repr import short_repr
from jaxselect.programs import jit

__all__ = ["ColumnSummary", "column_summary", "standardize", "summary_and_extremes", "summary_from_moments"]


class ColumnSummary(NamedTuple):
    """Per-column statistics of X under the one standardisation rule (all (D,) but ``n_samples``).

    Attributes:
      mean: (D,) weighted column means.
      scale: (D,) weighted standard deviations (population, ``Σw`` in the denominator), 1 on inert
        columns.
      live: (D,) bool, False on constant columns (max == min over the rows of positive weight).
      n_samples: () ``Σ w`` (the number of rows without weights), in X's dtype.

    >>> import numpy as np, jaxselect as js
    >>> s = js.design.column_summary(np.array([[1.0, 5.0], [3.0, 5.0]], np.float32))
    >>> s.mean.tolist(), s.scale.tolist(), s.live.tolist()
    ([2.0, 5.0], [1.0, 1.0], [True, False])
    """

    mean: jax.Array
    scale: jax.Array
    live: jax.Array
    n_samples: jax.Array

    __repr__ = short_repr

    @property
    def factor(self) -> jax.Array:
        """(D,) ``live / scale``: multiplies a centred column into its standardised one (0 if inert)."""
        if isinstance(self.scale, np.ndarray):  # a host summary stays on the host
            return np.where(self.live, 1.0 / self.scale, np.zeros_like(self.scale)).astype(self.scale.dtype)
        if not is_tracer(self.scale) and not is_tracer(self.live) and _fully_addressable(self.scale, self.live):
            # concrete device values (the boundary's summary): D numbers through the host, no compiled op
            scale, live = np.asarray(self.scale), np.asarray(self.live)
            factor = np.where(live, 1.0 / scale, np.zeros_like(scale)).astype(scale.dtype)
            if len(self.scale.sharding.device_set) > 1:  # replicated over a mesh: keep that placement
                return jax.device_put(factor, self.scale.sharding)
            return jax.device_put(factor)  # one device: uncommitted, as jnp's result would be
        return jnp.where(self.live, 1.0 / self.scale, jnp.zeros_like(self.scale)).astype(self.scale.dtype)


def _fully_addressable(*arrays) -> bool:
    return all(getattr(a, "is_fully_addressable", True) for a in arrays)


def standardize(mean, var, nonconstant, n_samples, *, xp=jnp) -> ColumnSummary:
    """The rule: ``live = nonconstant & (var > 0)``, ``scale = √var`` on live columns, else 1.

    ``sqrt`` only of positive variances, so a constant column never gives a NaN gradient. ``xp``:
    ``jax.numpy`` (default) or ``numpy`` (host summaries, also inside a user's ``jit``).
    """
    live = nonconstant & (var > 0)
    scale = xp.sqrt(xp.where(live, var, xp.ones_like(var)))
    return ColumnSummary(mean, scale, live, n_samples)


def _power_of_two(col_max, col_min):
    """A power of two near each column's half-range (1 for constant columns); a constant: gradients
    flow through the rescaled formula as through the plain one."""
    half = jax.lax.stop_gradient(0.5 * col_max - 0.5 * col_min)
    exponent = jnp.frexp(jnp.where(half > 0, half, jnp.ones_like(half)))[1]
    return jnp.ldexp(jnp.ones_like(half), exponent)


def _weighted_pass(X, w):
    """(col_min, col_max, mean_n, var_n, p, n): one fused pass of the rule (extremes over w > 0)."""
    if w is None:
        nf = jnp.asarray(X.shape[0], X.dtype)
        col_max, col_min = jnp.max(X, axis=0), jnp.min(X, axis=0)
        p = _power_of_two(col_max, col_min)
        Xn = X / p[None, :]
        mean_n = jnp.sum(Xn, axis=0) / nf
        centred = Xn - mean_n[None, :]
        var_n = jnp.sum(centred * centred, axis=0) / nf
    else:
        pos = (w > 0)[:, None]
        col_max = jnp.max(jnp.where(pos, X, -jnp.inf), axis=0)
        col_min = jnp.min(jnp.where(pos, X, jnp.inf), axis=0)
        p = _power_of_two(col_max, col_min)
        Xn = X / p[None, :]
        nf = jnp.sum(w)
        mean_n = (w @ Xn) / nf  # w @ X, never X.T @ w (slow on XLA's CPU backend)
        centred = Xn - mean_n[None, :]
        var_n = (w @ (centred * centred)) / nf
    return col_min, col_max, mean_n, var_n, p, nf


def _row_block_fold(X, rows: int | None, fn, init):
    """Fold ``fn(carry, block, valid)`` over (rows, D) row blocks of X in a ``fori_loop`` (the last
    block overlaps the previous one and masks the rows already seen): no temporary of X's size."""
    n = X.shape[0]
    if rows is None:  # about 8 MiB of X per block
        rows = max(8, (8 << 20) // max(1, X.shape[1] * X.dtype.itemsize))
    rows = min(rows, n)

    def body(i, carry):
        first = i * rows
        start = jnp.minimum(first, n - rows)
        block = jax.lax.dynamic_slice_in_dim(X, start, rows, axis=0)
        valid = ((start + jnp.arange(rows)) >= first)[:, None]
        return fn(carry, block, valid)

    return jax.lax.fori_loop(0, -(-n // rows), body, init)


def _blocked_pass(X, rows=None):
    """:func:`_weighted_pass` without weights, over row blocks (three folds: extremes, mean,
    centred squares) — for a large X, where XLA's CPU runtime may stage an (n, D) temporary for a
    plain column reduction."""
    d, dtype = X.shape[1], X.dtype
    nf = jnp.asarray(X.shape[0], dtype)
    zero = jnp.zeros((d,), dtype)

    def extremes(carry, block, valid):
        mx, mn = carry
        return (
            jnp.maximum(mx, jnp.max(jnp.where(valid, block, -jnp.inf), axis=0)),
            jnp.minimum(mn, jnp.min(jnp.where(valid, block, jnp.inf), axis=0)),
        )

    col_max, col_min = _row_block_fold(X, rows, extremes, (jnp.full((d,), -jnp.inf, dtype), jnp.full((d,), jnp.inf, dtype)))
    p = _power_of_two(col_max, col_min)

    def total(acc, block, valid):
        return acc + jnp.sum(jnp.where(valid, block / p[None, :], jnp.zeros_like(block)), axis=0)

    mean_n = _row_block_fold(X, rows, total, zero) / nf

    def squares(acc, block, valid):
        c = block / p[None, :] - mean_n[None, :]
        return acc + jnp.sum(jnp.where(valid, c * c, jnp.zeros_like(c)), axis=0)

    var_n = _row_block_fold(X, rows, squares, zero) / nf
    return col_min, col_max, mean_n, var_n, p, nf


def _finish(col_min, col_max, mean_n, var_n, p, nf) -> ColumnSummary:
    s = standardize(mean_n * p, var_n, col_max > col_min, nf)
    return s._replace(scale=s.scale * jnp.where(s.live, p, jnp.ones_like(p)))


@partial(jit, static_argnames=("blocked",))
def summary_and_extremes(X, w=None, *, blocked: bool = False):
    """``(summary, col_min, col_max)``: the :class:`ColumnSummary` and the column extremes (over
    the rows of positive weight) from the same pass, for the boundary's NaN/Inf and scale checks
    (a NaN or Inf anywhere, weight-0 rows included, makes the mean non-finite). ``blocked``: over
    row blocks (unweighted), for a large X on one device."""
    parts = _blocked_pass(X) if blocked else _weighted_pass(X, w)
    return _finish(*parts), parts[0], parts[1]


@jit
def column_summary(X, w=None) -> ColumnSummary:
    """The :class:`ColumnSummary` of X (n, D), optionally with row weights ``w`` (n,).

    Moments are taken of ``X / p`` with ``p`` a power of two near each column's half-range: an exact
    rescaling (the same rounding as on X), so a 1e30 column does not overflow and a 1e-20 column does
    not underflow in float32. Differentiable in X and w (the constant rule and ``p`` are piecewise
    constant).
    """
    return _finish(*_weighted_pass(X, w))


def summary_from_moments(moments, *, xp=jnp) -> ColumnSummary:
    """The :class:`ColumnSummary` of data given by its :class:`~jaxselect.Moments` (with the Gram);
    ``xp=numpy`` keeps host moments on the host."""
    mean = xp.asarray(moments.x_mean)
    var = xp.maximum(xp.diagonal(xp.asarray(moments.gram)), 0.0).astype(mean.dtype)
    n = xp.asarray(moments.n_samples, dtype=mean.dtype)
    return standardize(mean, var, ~xp.asarray(moments.constant), n, xp=xp)
