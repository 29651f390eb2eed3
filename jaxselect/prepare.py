"""Standardise, group-whiten and form the moments of a regression problem (Hu et al. §2).

``prepare`` turns raw data into the :class:`Problem` pytree every sequencing solver works on:

* features are centred and scaled to unit variance, targets centred and scaled per target
  (the paper's "normalised" X and Y);
* with ``whiten=True`` each group is whitened: with ``X_gᵀX_g/n = V Λ Vᵀ`` the group's columns are
  replaced by ``X_g V Λ^{-1/2}`` on the directions whose eigenvalue exceeds ``rank_tol·max(Λ)``;
  dropped directions (rank-deficient groups, duplicated columns) become inert zero columns, so
  shapes stay static;
* the moments ``C = XᵀX/n + λI`` (D×D) and ``b0 = XᵀY/n`` (D×T) are formed with one Gram
  product (or, in ``gram=False`` mode for very large D, C is never formed and solvers compute the
  rows they need from the design);
* a :class:`Transform` maps solver-space coefficients back to raw feature space with an intercept.

Coordinates: the solver works on D "problem coordinates", one per feature slot. For group g the
slot ``index[g, a]`` holds whitened direction a (ordered by decreasing eigenvalue), or the
standardised feature itself when ``whiten=False``. Inert slots (constant columns, dropped
directions) have ``live = False``; their row and column of C are those of the identity, so they
never change a fit.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect._repr import short_repr
from jaxselect._validation import (
    MIN_ROWS,
    as_float_matrix,
    as_hyper,
    as_targets,
    check_constant_mode,
    check_float,
    host_value,
)
from jaxselect.groups import Groups, as_groups
from jaxselect.linalg import apply_block_diag, gather_groups

__all__ = ["Problem", "Transform", "Design", "prepare", "whiten_design", "to_raw_coef"]

GRAM_AUTO_MAX_FEATURES = 4096


class Transform(NamedTuple):
    """Maps problem-space coefficients to raw feature space.

    Raw model: ``y = intercept + X_raw @ coef`` with, per group g,
    ``coef_g = (basis_g @ w_g) / x_scale_g · y_scale`` and
    ``intercept = y_mean − x_mean · coef``.

    Attributes:
      x_mean, x_scale: (D,) feature means and standard deviations (1 where a column is constant).
      y_mean, y_scale: (T,) target means and standard deviations.
      basis: (J, s_max, s_max) per-group map from problem coordinates to standardised features
        (``V Λ^{-1/2}`` on kept directions when whitened, the identity otherwise).
      index, mask: the group table (J, s_max).
    """

    x_mean: jax.Array
    x_scale: jax.Array
    y_mean: jax.Array
    y_scale: jax.Array
    basis: jax.Array
    index: jax.Array
    mask: jax.Array

    __repr__ = short_repr


class Problem(NamedTuple):
    """A prepared regression problem in moment space (a pytree of arrays).

    Attributes:
      C: (D, D) regularised covariance ``XᵀX/n + λI`` in problem coordinates, or None in
        ``gram=False`` mode.
      Z: (n, D) the design in problem coordinates when ``C`` is None (gram=False), else None.
      b0: (D, T) cross moments ``XᵀY/n`` in problem coordinates.
      diag_blocks: (J, s_max, s_max) the diagonal blocks ``C_gg`` (identity on padding).
      metric_white: (J, s_max, s_max) ``A_g`` with ``‖A_g b_g‖² = b_gᵀ (X_gᵀX_g/n)⁺ b_g`` (the
        whitened gradient norm of the paper's Alg. 1, in standardised-feature terms).
      metric_std: (J, s_max, s_max) ``B_g`` with ``B_g b_g`` = the gradient w.r.t. the standardised
        (not whitened) features of group g.
      live: (D,) bool, False on inert coordinates.
      groups: the :class:`Groups` partition and costs.
      transform: :class:`Transform` back to raw space.
      l2: () the ridge constant λ.
      n_samples: () number of training rows, as a float.
    """

    C: jax.Array | None
    Z: jax.Array | None
    b0: jax.Array
    diag_blocks: jax.Array
    metric_white: jax.Array
    metric_std: jax.Array
    live: jax.Array
    groups: Groups
    transform: Transform
    l2: jax.Array
    n_samples: jax.Array

    __repr__ = short_repr

    @property
    def n_features(self) -> int:
        return self.b0.shape[0]

    @property
    def n_targets(self) -> int:
        return self.b0.shape[1]

    @property
    def n_groups(self) -> int:
        return self.groups.n_groups


def check_problem(problem, *, need_gram: bool = False) -> None:
    """TypeError unless ``problem`` is a :class:`Problem`; with ``need_gram``, ValueError for gram=False."""
    if not isinstance(problem, Problem):
        raise TypeError(f"expected a Problem from jaxselect.prepare(X, Y, groups); got {type(problem).__name__}")
    if need_gram and problem.C is None:
        raise ValueError(
            "this solver works on the Gram matrix; prepare the problem with gram=True "
            "(gram=False problems keep only the design)"
        )


def prepare(
    X,
    Y,
    groups=None,
    *,
    l2: float = 1e-5,
    whiten: bool = True,
    gram: bool | str = "auto",
    constant_columns: str = "inert",
    rank_tol: float | None = None,
) -> Problem:
    """Standardise (and group-whiten) X, standardise Y and form the moments C and b0.

    Args:
      X: (n, D) raw features (numpy or jax; a row-sharded jax.Array stays sharded).
      Y: (n,) or (n, T) raw targets.
      groups: None (every feature its own group, unit costs), a (D,) array of group ids, or a
        :class:`Groups` carrying costs.
      l2: ridge constant λ ≥ 0 in ``C = XᵀX/n + λI`` — the library's one ``l2``: the mean
        squared loss ``(1/2n)‖Y − Zw‖² + (λ/2)‖w‖²`` on standardised, group-whitened coordinates
        (sklearn ``Ridge(alpha)`` on standardised columns is λ = alpha/n). A Python float or a
        traced scalar: ``jax.vmap`` / ``jax.grad`` over ``l2`` work.
      whiten: group-whiten (Hu et al. Alg. 1 assumes whitened groups); False only standardises.
      gram: form the D×D Gram matrix (True), or keep the design and compute the rows a solver needs
        on the fly, O(n·D) per selected feature (False, for D too large for D×D). "auto" forms it
        when D ≤ 4096.
      constant_columns: "inert" (default): constant columns (max == min) become inert features
        that are never selected and get coefficient 0; "raise": a ValueError names them. A group
        made only of constant columns is never selected. X with every column constant raises.
      rank_tol: relative eigenvalue threshold of the whitening (default sqrt(machine epsilon)).

    Returns:
      A :class:`Problem`.

    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(50, 6)); y = X[:, 0] - 2 * X[:, 3]
    >>> problem = prepare(X, y, Groups.from_ids([0, 0, 1, 1, 2, 2], costs=[1.0, 2.0, 1.0]))
    >>> problem.C.shape, problem.b0.shape
    ((6, 6), (6, 1))
    """
    X, groups, rank_tol, summary, raw_gram = _check_design(X, groups, constant_columns, rank_tol)
    n, d = X.shape
    Y, _ = as_targets(Y, n, "Y", dtype=X.dtype)
    l2 = as_hyper(l2, "l2", X.dtype, low=0.0)
    if gram not in (True, False, "auto"):
        raise ValueError(f"gram must be True, False or 'auto'; got {gram!r}")
    use_gram = d <= GRAM_AUTO_MAX_FEATURES if gram == "auto" else bool(gram)
    y_constant = host_value(lambda: jnp.max(Y, axis=0) == jnp.min(Y, axis=0))
    if y_constant is not None and y_constant.any():
        raise ValueError(f"target column(s) {np.flatnonzero(y_constant).tolist()} of Y are constant")
    return _prepare(
        X,
        Y,
        groups,
        l2,
        summary,
        whiten=bool(whiten),
        use_gram=use_gram,
        raw_gram=bool(raw_gram),
        rank_tol=rank_tol,
    )


# Largest squared offset-to-spread ratio (mean² / variance, over non-constant columns) for which
# the Gram path skips the centring copy and forms ``XᵀX − n·μμᵀ``: the rank-one correction costs a
# relative error of about eps·(1 + μ²/σ²) on the centred moments (≤ ~1e-5 in float32), below the
# GEMM's own accumulation error; beyond it the centred copy of X is formed.
RAW_GRAM_MAX_OFFSET_RATIO = 100.0


class _Summary(NamedTuple):
    """Per-column statistics of X from one fused pass (all (D,))."""

    col_max: jax.Array
    col_min: jax.Array
    col_sum: jax.Array
    col_sumsq: jax.Array


def _check_design(X, groups, constant_columns: str, rank_tol):
    """Validate X (one fused pass: finiteness, constant columns, first two moments), groups, rank_tol.

    Returns ``(X, groups, rank_tol, summary, raw_gram)``: ``summary`` is a :class:`_Summary` and
    ``raw_gram`` says whether the centred Gram may be formed without centring X first (False
    inside a user's jit/vmap, where the data cannot be inspected).
    """
    check_constant_mode(constant_columns)
    X = as_float_matrix(X, "X", min_rows=MIN_ROWS, check_finite=False)
    groups = as_groups(groups, X.shape[1], dtype=X.dtype)
    if rank_tol is None:
        rank_tol = float(np.sqrt(np.finfo(X.dtype).eps))
    rank_tol = check_float(rank_tol, "rank_tol", low=0.0, high=1.0)
    summary = _column_summary(X)
    verdict = host_value(lambda: _verdict(summary, jnp.asarray(X.shape[0], X.dtype)))
    if verdict is None:  # inside a user's jit/vmap: value checks cannot run; constant columns stay inert
        return X, groups, rank_tol, summary, False
    nonfinite, overflow, offset_ratio = (float(v) for v in verdict)
    if nonfinite:
        raise ValueError("X contains NaN or Inf; remove or impute those entries first")
    if overflow:
        raise ValueError(
            f"X has entries too large for {X.dtype} second moments (sums of squares overflow); "
            "rescale X (or use float64 with jax_enable_x64)"
        )
    constant = ~np.asarray(summary.col_max > summary.col_min)
    if constant.all():
        raise ValueError("every column of X is constant; there is nothing to select")
    if constant.any() and constant_columns == "raise":
        cols = np.flatnonzero(constant)
        raise ValueError(
            f"X has constant column(s) {cols[:10].tolist()} and constant_columns='raise'; remove them, "
            "or use the default constant_columns='inert' (they are then never selected)"
        )
    return X, groups, rank_tol, summary, offset_ratio <= RAW_GRAM_MAX_OFFSET_RATIO


@jax.jit
def _column_summary(X) -> _Summary:
    """Column max, min, sum and sum of squares of X in one fused pass."""
    return _Summary(jnp.max(X, axis=0), jnp.min(X, axis=0), jnp.sum(X, axis=0), jnp.sum(X * X, axis=0))


@jax.jit
def _verdict(summary: _Summary, n):
    """(has NaN/Inf, sums of squares overflow, max mean²/variance over non-constant columns).

    XLA's max/min reductions may skip NaNs, but a NaN always poisons the column sum.
    """
    finite_extremes = jnp.isfinite(summary.col_max) & jnp.isfinite(summary.col_min)
    nonfinite = jnp.any(~finite_extremes | jnp.isnan(summary.col_sum))
    overflow = jnp.any(~jnp.isfinite(summary.col_sumsq) | ~jnp.isfinite(summary.col_sum))
    mean = summary.col_sum / n
    var = jnp.maximum(summary.col_sumsq / n - mean * mean, 0.0)
    nonconstant = summary.col_max > summary.col_min
    tiny = jnp.finfo(var.dtype).tiny
    ratio = jnp.where(nonconstant, mean * mean / jnp.maximum(var, tiny), jnp.zeros_like(var))
    return jnp.stack([nonfinite.astype(var.dtype), overflow.astype(var.dtype), jnp.max(ratio)])


class Design(NamedTuple):
    """A standardised, optionally group-whitened design (see :func:`whiten_design`).

    Attributes:
      Z: (n, D) design in problem coordinates (zero columns on inert coordinates).
      x_mean, x_scale: (D,) raw feature means and standard deviations (1 where constant).
      basis: (J, s_max, s_max) per-group map from problem coordinates to standardised features.
      metric_white, metric_std: (J, s_max, s_max) gradient metrics, as in :class:`Problem`.
      live: (D,) bool, False on inert coordinates.
    """

    __repr__ = short_repr

    Z: jax.Array
    x_mean: jax.Array
    x_scale: jax.Array
    basis: jax.Array
    metric_white: jax.Array
    metric_std: jax.Array
    live: jax.Array


def whiten_design(X, groups=None, *, whiten: bool = True, constant_columns: str = "inert", rank_tol=None):
    """Standardise X and group-whiten it, for solvers that work on the design rather than moments.

    Same coordinates and checks as :func:`prepare` (which uses it). Returns ``(design, groups)``
    with ``design`` a :class:`Design` and ``groups`` the validated :class:`Groups`.
    """
    X, groups, rank_tol, summary, _ = _check_design(X, groups, constant_columns, rank_tol)
    return _design(X, groups, summary, whiten=bool(whiten), rank_tol=rank_tol), groups


class _Bases(NamedTuple):
    basis: jax.Array
    metric_white: jax.Array
    metric_std: jax.Array
    live: jax.Array


def _scales(x_sd, nonconstant):
    x_scale = jnp.where(nonconstant & (x_sd > 0), x_sd, jnp.ones_like(x_sd))
    col_w = jnp.where(nonconstant, 1.0 / x_scale, jnp.zeros_like(x_scale))
    return x_scale, col_w


def _group_bases(G_blocks, groups: Groups, nonconstant, *, whiten: bool, rank_tol: float) -> _Bases:
    """Whitening bases and gradient metrics from the per-group moments of standardised features.

    ``G_blocks`` (J, s, s) holds ``X_gᵀX_g/n``. With ``V Λ Vᵀ`` its eigen-decomposition (decreasing
    eigenvalues), directions with ``λ > rank_tol·max(λ)`` are kept.
    """
    index, mask = groups.index, groups.mask
    J, s_max = index.shape
    d = groups.ids.shape[0]
    eye_s = jnp.broadcast_to(jnp.eye(s_max, dtype=G_blocks.dtype)[None, :, :], (J, s_max, s_max))
    pad2 = mask[:, :, None] & mask[:, None, :]
    zeros_blocks = jnp.zeros_like(G_blocks)
    # Padding gets eigenvalue -1 so its eigenvectors never mix with real directions.
    G_blocks_p = jnp.where(pad2, G_blocks, zeros_blocks) - jnp.where(mask[:, :, None], zeros_blocks, eye_s)
    evals, evecs = jnp.linalg.eigh(G_blocks_p)
    evals, evecs = evals[:, ::-1], evecs[:, :, ::-1]  # decreasing; padding last
    top = jnp.max(evals, axis=1, keepdims=True)
    keep = (evals > rank_tol * top) & mask
    safe = jnp.where(keep, evals, jnp.ones_like(evals))
    zero = jnp.zeros_like(evals)
    identity_real = jnp.where(mask[:, :, None], eye_s, zeros_blocks)
    if whiten:
        basis = evecs * jnp.where(keep, 1.0 / jnp.sqrt(safe), zero)[:, None, :]
        live_table = keep
        metric_white = identity_real
        metric_std = evecs * jnp.where(keep, jnp.sqrt(safe), zero)[:, None, :]
    else:
        basis = identity_real
        live_table = mask & jnp.take(nonconstant, index, mode="fill", fill_value=False)
        metric_white = jnp.swapaxes(evecs * jnp.where(keep, 1.0 / jnp.sqrt(safe), zero)[:, None, :], 1, 2)
        metric_std = identity_real
    live = jnp.zeros(d, bool).at[index.reshape(-1)].set(live_table.reshape(-1), mode="drop")
    return _Bases(basis, metric_white, metric_std, live)


@partial(jax.jit, static_argnames=("whiten", "rank_tol"))
def _design(X, groups: Groups, summary: _Summary, *, whiten: bool, rank_tol: float) -> Design:
    n = X.shape[0]
    nf = jnp.asarray(n, X.dtype)
    nonconstant = summary.col_max > summary.col_min
    x_mean = summary.col_sum / nf  # the means come from the validation pass
    Xc = X - x_mean[None, :]
    x_scale, col_w = _scales(jnp.sqrt(jnp.mean(Xc * Xc, axis=0)), nonconstant)
    Xs = Xc * col_w[None, :]  # standardised; constant columns are exactly zero
    # Per-group second moments of the standardised features (J, s, s): O(n·D·s).
    Xg = gather_groups(Xs, groups.index, groups.mask, axis=1)  # (n, J, s)
    G_blocks = jnp.einsum("nja,njb->jab", Xg, Xg) / nf
    bases = _group_bases(G_blocks, groups, nonconstant, whiten=whiten, rank_tol=rank_tol)
    Z = apply_block_diag(Xs, bases.basis, groups.index, groups.mask) if whiten else Xs
    return Design(Z, x_mean, x_scale, bases.basis, bases.metric_white, bases.metric_std, bases.live)


@partial(jax.jit, static_argnames=("whiten", "use_gram", "raw_gram", "rank_tol"))
def _prepare(
    X, Y, groups: Groups, l2, summary: _Summary, *, whiten: bool, use_gram: bool, raw_gram: bool, rank_tol: float
) -> Problem:
    n, d = X.shape
    nonconstant = summary.col_max > summary.col_min
    dtype = X.dtype
    index, mask = groups.index, groups.mask
    J, s_max = index.shape
    nf = jnp.asarray(n, dtype)
    y_mean = jnp.mean(Y, axis=0)
    y_scale = jnp.sqrt(jnp.mean((Y - y_mean[None, :]) ** 2, axis=0))
    Ys = (Y - y_mean[None, :]) / y_scale[None, :]
    eye_s = jnp.broadcast_to(jnp.eye(s_max, dtype=dtype)[None, :, :], (J, s_max, s_max))
    pad2 = mask[:, :, None] & mask[:, None, :]

    if use_gram:
        # The summary pass gave the means; one GEMM gives the centred Gram, one GEMV-like pass XᵀY;
        # scaling, whitening and the diagonal blocks then happen in D×D space.
        x_mean = summary.col_sum / nf
        if raw_gram:  # offsets small against spreads: XᵀX − n·μμᵀ, no centred copy of X
            G = jax.lax.dot_general(X, X, (((0,), (0,)), ((), ()))) / nf - jnp.outer(x_mean, x_mean)
            b0t = Ys.T @ X - jnp.sum(Ys, axis=0)[:, None] * x_mean[None, :]
        else:
            Xc = X - x_mean[None, :]
            G = jax.lax.dot_general(Xc, Xc, (((0,), (0,)), ((), ()))) / nf
            b0t = Ys.T @ Xc
        x_scale, col_w = _scales(jnp.sqrt(jnp.maximum(jnp.diagonal(G), 0.0)), nonconstant)
        G = G * col_w[:, None] * col_w[None, :]
        rows = jnp.take(G, index, axis=0, mode="fill", fill_value=0)  # (J, s, D)
        G_blocks = jnp.take_along_axis(rows, jnp.minimum(index, d - 1)[:, None, :], axis=2)
        bases = _group_bases(G_blocks, groups, nonconstant, whiten=whiten, rank_tol=rank_tol)
        live = bases.live
        b0t = b0t * col_w[None, :] / nf  # (T, D), written as u @ X
        if whiten:
            G = apply_block_diag(G, bases.basis, index, mask)
            G = apply_block_diag(G.T, bases.basis, index, mask)
            b0t = apply_block_diag(b0t, bases.basis, index, mask)
        inert_diag = jnp.where(live, l2, jnp.ones_like(x_mean))
        C = jnp.where(live[:, None] & live[None, :], G, jnp.zeros_like(G)) + jnp.diag(inert_diag)
        C = 0.5 * (C + C.T)
        b0 = b0t.T
        # Diagonal blocks C_gg taken from the same moments the solvers use.
        rows = jnp.take(C, index, axis=0, mode="fill", fill_value=0)
        diag_blocks = jnp.take_along_axis(rows, jnp.minimum(index, d - 1)[:, None, :], axis=2)
        Z_out = None
    else:
        design = _design(X, groups, summary, whiten=whiten, rank_tol=rank_tol)
        x_mean, x_scale, live = design.x_mean, design.x_scale, design.live
        bases = _Bases(design.basis, design.metric_white, design.metric_std, live)
        Z_out = design.Z
        C = None
        inert_diag = jnp.where(live, l2, jnp.ones_like(x_mean))
        b0 = (Ys.T @ Z_out).T / nf  # (Yᵀ Z)ᵀ: no X.T @ u
        Zg = gather_groups(Z_out, index, mask, axis=1)  # (n, J, s)
        diag_blocks = jnp.einsum("nja,njb->jab", Zg, Zg) / nf
        diag_blocks = diag_blocks + eye_s * jnp.take(inert_diag, index, mode="fill", fill_value=1)[:, None, :]
    diag_blocks = jnp.where(pad2, diag_blocks, eye_s)
    transform = Transform(x_mean, x_scale, y_mean, y_scale, bases.basis, index, mask)
    return Problem(C, Z_out, b0, diag_blocks, bases.metric_white, bases.metric_std, live, groups, transform, l2, nf)


def to_raw_coef(transform: Transform, w: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Map problem-space coefficients w (..., D, T) to raw ``(coef (..., D, T), intercept (..., T))``."""
    lead = w.shape[:-2]
    d, t = w.shape[-2:]
    w2 = jnp.moveaxis(w.reshape((-1, d, t)), 1, 2).reshape((-1, d))  # (B·T, D)
    std = apply_block_diag(w2, jnp.swapaxes(transform.basis, 1, 2), transform.index, transform.mask)
    std = jnp.moveaxis(std.reshape((-1, t, d)), 1, 2).reshape(lead + (d, t))
    scale = (transform.y_scale[None, :] / transform.x_scale[:, None]).reshape((1,) * len(lead) + (d, t))
    coef = std * scale
    offset = jnp.einsum("d,...dt->...t", transform.x_mean, coef)
    intercept = transform.y_mean.reshape((1,) * len(lead) + (t,)) - offset
    return coef, intercept
