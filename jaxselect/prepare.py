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

from jaxselect._progress import check_progress, progress_bar
from jaxselect._repr import short_repr
from jaxselect._validation import as_hyper, check_constant_mode, check_float, float_dtype_for, host_value, is_traced
from jaxselect.design import ColumnSummary, as_data, check_moments, summary_from_moments
from jaxselect.design.boundary import host_matrix
from jaxselect.design.operators import on_one_device
from jaxselect.groups import Groups, as_groups
from jaxselect.linalg import apply_block_diag, gather_groups
from jaxselect.moments import Moments, check_scales, host_kernel_applies, scale_vectors, xla_moments
from jaxselect.sharding import any_mesh
from jaxselect.status import NONFINITE, OK

__all__ = ["Design", "Problem", "Transform", "prepare", "to_raw_coef", "whiten_design"]

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

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = 2 * X[:, 1] + 1
    >>> t = js.prepare(X, y).transform      # Problem.transform
    >>> t.x_mean.shape, t.y_mean.shape, t.basis.shape
    ((3,), (1,), (3, 1, 1))
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
      Z: (n, D) the design when ``C`` is None (gram=False), else None: in problem coordinates, or
        — when ``z_affine`` is set — the raw X itself (no copy of X's size is made).
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
      status: () int32, :data:`~jaxselect.NONFINITE` when the moments hold NaN/Inf (possible only
        for data traced inside a user's ``jit``, where the boundary cannot check values), else 0.
      z_affine: None, or (2, D) ``[shift, scale]`` when ``Z`` holds raw X: the problem coordinates
        are ``(X − shift) · scale`` (scale 0 on inert columns). :func:`prepare` keeps raw X for
        ``gram=False`` with singleton groups, no sample weights and moderate offsets (mean² ≤ 100 ×
        variance); solvers then form the few standardised columns they need on the fly.

    Built by :func:`prepare`, :func:`prepare_from_batches` or :func:`problem_from_moments`; read by
    every sequencing solver (:func:`~jaxselect.cs_omp`, :func:`~jaxselect.cs_fr`,
    :func:`~jaxselect.doubling`, :func:`~jaxselect.group_lasso_path`, ...). A pytree: it passes
    through ``jax.jit`` and ``jax.vmap`` (e.g. over ``l2``).

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = 2 * X[:, 1] + 1
    >>> problem = js.prepare(X, y, l2=1e-3)
    >>> problem.C.shape, problem.b0.shape, float(problem.n_samples)
    ((3, 3), (3, 1), 100.0)
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
    z_affine: jax.Array | None = None
    status: jax.Array | None = None

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


@any_mesh
def prepare(
    X,
    Y,
    groups=None,
    *,
    sample_weight=None,
    l2: float = 1e-5,
    whiten: bool = True,
    gram: bool | str = "auto",
    constant_columns: str = "inert",
    rank_tol: float | None = None,
    progress: bool = False,
) -> Problem:
    """Standardise (and group-whiten) X, standardise Y and form the moments C and b0.

    The moments come from :mod:`jaxselect.moments`: for a numpy X on a CPU backend, host BLAS
    (``syrk``) over row chunks of X with no device copy of X; for a ``jax.Array`` (row-sharded or
    not), on an accelerator or inside a user's ``jit``, XLA. Both give the same result to rounding.

    Args:
      X: (n, D) raw features (numpy or jax; a row-sharded jax.Array stays sharded).
      Y: (n,) or (n, T) raw targets.
      groups: None (every feature its own group, unit costs), a (D,) array of group ids, or a
        :class:`Groups` carrying costs.
      sample_weight: None, or (n,) non-negative finite row weights: every moment becomes a
        weighted mean (``XᵀWX/Σw``, ...), so integer weights equal repeated rows and rows of weight
        0 are absent (padding, cross-validation folds). At least 2 rows need a positive weight.
      l2: ridge constant λ ≥ 0 in ``C = XᵀX/n + λI`` — the library's one ``l2``: the mean
        squared loss ``(1/2n)‖Y − Zw‖² + (λ/2)‖w‖²`` on standardised, group-whitened coordinates
        (sklearn ``Ridge(alpha)`` on standardised columns is λ = alpha/n, n = Σw with weights). A
        Python float or a traced scalar: ``jax.vmap`` / ``jax.grad`` over ``l2`` work.
      whiten: group-whiten (Hu et al. Alg. 1 assumes whitened groups); False only standardises.
      gram: form the D×D Gram matrix (True), or keep the design and compute the rows a solver needs
        on the fly, O(n·D) per selected feature (False, for D too large for D×D). "auto" forms it
        when D ≤ 4096. With False the problem keeps X itself when the groups are single features,
        there are no weights and offsets are moderate (``Problem.z_affine``; one device copy of a
        numpy X, none of a ``jax.Array``), else a standardised copy; the sequencing solvers then
        return slot-space paths (:class:`~jaxselect.SelectionPath`) with a lean default ``k``.
      constant_columns: "inert" (default): constant columns (max == min) become inert features
        that are never selected and get coefficient 0; "raise": a ValueError names them. A group
        made only of constant columns is never selected. X with every column constant raises.
      rank_tol: relative eigenvalue threshold of the whitening (default sqrt(machine epsilon)).
      progress: show a progress bar (optional ``tqdm``; ``pip install jaxselect[progress]``): the
        rows of the host moments pass, or the phases (checks, moments, problem) of the XLA path.

    Returns:
      A :class:`Problem`.

    Raises:
      ValueError: NaN/Inf in X or Y, X or Y too large or too small for the
        compute dtype's second moments, bad weights, every column of X constant.

    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(50, 6)); y = X[:, 0] - 2 * X[:, 3]
    >>> problem = prepare(X, y, Groups.from_ids([0, 0, 1, 1, 2, 2], costs=[1.0, 2.0, 1.0]))
    >>> problem.C.shape, problem.b0.shape
    ((6, 6), (6, 1))
    """
    check_constant_mode(constant_columns)
    progress = check_progress(progress)
    if gram not in (True, False, "auto"):
        raise ValueError(f"gram must be True, False or 'auto'; got {gram!r}")
    if gram is not False and host_kernel_applies(X, Y, sample_weight):
        X = host_matrix(X, "X")  # validated (not copied) before its shape is read
        if gram is True or X.shape[1] <= GRAM_AUTO_MAX_FEATURES:
            return _prepare_on_host(X, Y, groups, sample_weight, l2, whiten, constant_columns, rank_tol, progress)
    if gram is False and isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == float_dtype_for(X.dtype):
        X = jax.device_put(X)  # one device copy of a large X (jnp.asarray would stage a second)
    with progress_bar(enabled=progress, total=3, unit="phase", desc="prepare") as bar:
        problem = _prepare_on_device(X, Y, groups, sample_weight, l2, whiten, gram, constant_columns, rank_tol, bar)
    return problem


def _prepare_on_host(X, Y, groups, sample_weight, l2, whiten, constant_columns, rank_tol, progress) -> Problem:
    """The host path of :func:`prepare`: the data layer's host moments pass, then D×D algebra."""
    data = as_data(
        X, Y, sample_weight=sample_weight, groups=groups, constant_columns=constant_columns, storage="host",
        with_moments=True, progress=progress,
    )
    return problem_from_moments(
        data.moments,
        data.groups,
        l2=l2,
        whiten=whiten,
        constant_columns=constant_columns,
        rank_tol=rank_tol,
    )


def _prepare_on_device(X, Y, groups, sample_weight, l2, whiten, gram, constant_columns, rank_tol, bar) -> Problem:
    """The XLA path of :func:`prepare`: device, sharded and traced inputs, accelerators, gram=False."""
    data = as_data(
        X, Y, sample_weight=sample_weight, groups="singletons" if groups is None else groups,
        constant_columns=constant_columns, scale="values",
    )
    bar.update()
    X, Y, w, summary, groups = data.X, data.Y, data.weights, data.summary, data.groups
    rank_tol = _rank_tol(rank_tol, X.dtype)
    l2 = as_hyper(l2, "l2", X.dtype, low=0.0)
    raw_gram = _moderate_offsets(summary)
    use_gram = X.shape[1] <= GRAM_AUTO_MAX_FEATURES if gram == "auto" else bool(gram)
    if use_gram:
        moments = xla_moments(X, Y, w, summary, centre=not raw_gram)
        scales = _concrete(lambda: scale_vectors(moments))
        bar.update()
        if scales is not None:
            check_scales(*scales)
        problem = _from_moments(moments, groups, l2, whiten=bool(whiten), rank_tol=rank_tol)
        bar.update()
        return problem
    # Raw X as the design (memory O(n·D) once, not twice) where that is exact enough: singleton
    # groups (whitening is a per-column scale), no weights, moderate offsets (the raw-Gram rule).
    if raw_gram and w is None and groups.mask.shape[1] == 1 and on_one_device(X):
        # X joins the problem outside jit: a jitted function returning its input would copy it.
        problem = _prepare_raw_design(X, Y, groups, l2, summary, whiten=bool(whiten), rank_tol=rank_tol)._replace(Z=X)
    else:
        problem = _prepare_design(X, Y, w, groups, l2, summary, whiten=bool(whiten), rank_tol=rank_tol)
    bar.update()
    scales = _concrete(lambda: _design_scale_vectors(summary, Y, w, problem.transform.y_scale))
    if scales is not None:
        check_scales(*scales)
    bar.update()
    return problem


def problem_from_moments(
    moments: Moments,
    groups=None,
    *,
    l2: float = 1e-5,
    whiten: bool = True,
    constant_columns: str = "inert",
    rank_tol: float | None = None,
) -> Problem:
    """The :class:`Problem` of data given only by its :class:`~jaxselect.moments.Moments` (with the Gram).

    :func:`prepare` and :func:`prepare_from_batches` end here: the constant-column rule and the
    scale checks run on the moments, then standardising and whitening happen in D×D space.

    Args:
      moments: a :class:`~jaxselect.Moments` with its Gram (e.g. from
        ``jaxselect.moments.MomentAccumulator``).
      groups, l2, whiten, constant_columns, rank_tol: as in :func:`prepare`.

    Returns:
      A :class:`Problem` in Gram mode.

    Raises:
      ValueError: moments without a Gram, groups that do not match D, ``constant_columns="raise"``
        with constant columns, or columns/targets whose spread the compute dtype cannot represent.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = 2 * X[:, 1] + 1
    >>> from jaxselect.moments import MomentAccumulator
    >>> acc = MomentAccumulator(np.float32)
    >>> acc.add(X[:50], y[:50, None]); acc.add(X[50:], y[50:, None])   # two row chunks
    >>> js.cs_fr(js.problem_from_moments(acc.finish())).order.tolist()
    [1, 2, 0]
    """
    check_constant_mode(constant_columns)
    if moments.gram is None:
        raise ValueError("problem_from_moments needs moments with the Gram matrix (gram=True)")
    dtype = np.dtype(np.asarray(moments.x_mean).dtype) if not is_traced(moments.x_mean) else moments.x_mean.dtype
    groups = as_groups(groups, moments.x_mean.shape[0], dtype=dtype)
    rank_tol = _rank_tol(rank_tol, dtype)
    l2 = as_hyper(l2, "l2", dtype, low=0.0)
    if not is_traced(moments):
        check_moments(moments, constant_columns)
    # every floating field in the compute dtype (a float64 accumulator must not leak into b0)
    moments = jax.tree.map(lambda a: jnp.asarray(a, dtype) if jnp.issubdtype(jnp.asarray(a).dtype, jnp.floating) else jnp.asarray(a), moments)
    return _from_moments(moments, groups, l2, whiten=bool(whiten), rank_tol=rank_tol)


def _concrete(fn):
    """``fn()``'s pytree as numpy arrays, or None when it depends on traced values (inside a user's jit)."""
    try:
        return jax.tree.map(np.asarray, fn())
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
        return None


def _rank_tol(rank_tol, dtype) -> float:
    if rank_tol is None:
        rank_tol = float(np.sqrt(np.finfo(dtype).eps))
    return check_float(rank_tol, "rank_tol", low=0.0, high=1.0)


# Largest squared offset-to-spread ratio (mean² / variance, over non-constant columns) for which
# the Gram path skips the centring copy and forms ``XᵀX − n·μμᵀ``: the rank-one correction costs a
# relative error of about eps·(1 + μ²/σ²) on the centred moments (≤ ~1e-5 in float32), below the
# GEMM's own accumulation error; beyond it the centred copy of X is formed.
RAW_GRAM_MAX_OFFSET_RATIO = 100.0


def _moderate_offsets(summary: ColumnSummary) -> bool:
    """The raw-Gram rule: every live column has mean² ≤ :data:`RAW_GRAM_MAX_OFFSET_RATIO` × variance
    (False inside a user's jit/vmap, where the data cannot be inspected: the centred copy is safe)."""
    ratio = host_value(
        lambda: jnp.max(jnp.where(summary.live, (summary.mean / summary.scale) ** 2, jnp.zeros_like(summary.mean)))
    )
    return ratio is not None and float(ratio) <= RAW_GRAM_MAX_OFFSET_RATIO


class Design(NamedTuple):
    """A standardised, optionally group-whitened design (see :func:`whiten_design`).

    Attributes:
      Z: (n, D) design in problem coordinates (zero columns on inert coordinates).
      x_mean, x_scale: (D,) raw feature means and standard deviations (1 where constant).
      basis: (J, s_max, s_max) per-group map from problem coordinates to standardised features.
      metric_white, metric_std: (J, s_max, s_max) gradient metrics, as in :class:`Problem`.
      live: (D,) bool, False on inert coordinates.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> design, groups = js.whiten_design(X, [0, 0, 1])
    >>> design.Z.shape, design.basis.shape
    ((100, 3), (2, 2, 2))
    """

    __repr__ = short_repr

    Z: jax.Array
    x_mean: jax.Array
    x_scale: jax.Array
    basis: jax.Array
    metric_white: jax.Array
    metric_std: jax.Array
    live: jax.Array


@any_mesh
def whiten_design(
    X,
    groups=None,
    *,
    sample_weight=None,
    whiten: bool = True,
    constant_columns: str = "inert",
    rank_tol=None,
):
    """Standardise X and group-whiten it, for solvers that work on the design rather than moments.

    Same coordinates and checks as :func:`prepare`; with ``sample_weight`` the means, scales and
    whitening use weighted moments (the rows of Z themselves are not scaled). Returns
    ``(design, groups)`` with ``design`` a :class:`Design` and ``groups`` the validated :class:`Groups`.

    Args:
      X: (n, D) raw features, n ≥ 2.
      groups, sample_weight, whiten, constant_columns, rank_tol: as in :func:`prepare`.

    Raises:
      ValueError / TypeError: as :func:`prepare` (shapes, NaN/Inf, groups, weights, scales).

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = 2 * X[:, 1] + 1
    >>> design, groups = js.whiten_design(X, [0, 0, 1])    # features 0 and 1 form one group
    >>> groups.n_groups, design.Z.shape
    (2, (100, 3))
    """
    data = as_data(
        X, None, sample_weight=sample_weight, groups="singletons" if groups is None else groups,
        targets=None, constant_columns=constant_columns, scale="values",
    )
    rank_tol = _rank_tol(rank_tol, data.X.dtype)
    design = _design(data.X, data.weights, data.groups, data.summary, whiten=bool(whiten), rank_tol=rank_tol)
    scales = _concrete(lambda: _design_scale_vectors(data.summary))
    if scales is not None:
        check_scales(*scales)
    return design, data.groups


class _Bases(NamedTuple):
    basis: jax.Array
    metric_white: jax.Array
    metric_std: jax.Array
    live: jax.Array


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
    # one orientation per direction (its largest entry positive), whichever kernel formed the
    # moments: prepare, whiten_design and the streamed path give the same coordinates
    pivot = jnp.take_along_axis(evecs, jnp.argmax(jnp.abs(evecs), axis=1)[:, None, :], axis=1)
    evecs = evecs * jnp.where(pivot < 0, -1.0, 1.0).astype(evecs.dtype)
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
def _design(X, w, groups: Groups, summary: ColumnSummary, *, whiten: bool, rank_tol: float) -> Design:
    nf = summary.n_samples
    nonconstant = summary.live
    x_mean, x_scale = summary.mean, summary.scale  # the one standardisation, from the boundary's pass
    Xs = (X - x_mean[None, :]) * summary.factor[None, :]  # standardised; constant columns are exactly zero
    # Per-group second moments of the standardised features (J, s, s): O(n·D·s).
    Xw = Xs if w is None else Xs * jnp.sqrt(w)[:, None]
    Xg = gather_groups(Xw, groups.index, groups.mask, axis=1)  # (n, J, s)
    G_blocks = jnp.einsum("nja,njb->jab", Xg, Xg) / nf
    bases = _group_bases(G_blocks, groups, nonconstant, whiten=whiten, rank_tol=rank_tol)
    Z = apply_block_diag(Xs, bases.basis, groups.index, groups.mask) if whiten else Xs
    return Design(
        Z,
        x_mean,
        x_scale,
        bases.basis,
        bases.metric_white,
        bases.metric_std,
        bases.live,
    )


@jax.jit
def _design_scale_vectors(summary: ColumnSummary, Y=None, w=None, y_scale=None):
    """Scale-check vectors of a design path, (n, constant, x_var, y_constant, y_var): the variance
    is the standardisation scale² on non-constant columns (Y entries None without Y)."""
    constant = ~summary.live
    x_var = jnp.where(constant, jnp.ones_like(summary.scale), summary.scale**2)
    y_constant = y_var = None
    if Y is not None:
        pos = jnp.ones((Y.shape[0], 1), bool) if w is None else (w > 0)[:, None]
        y_constant = ~(jnp.max(jnp.where(pos, Y, -jnp.inf), axis=0) > jnp.min(jnp.where(pos, Y, jnp.inf), axis=0))
        y_var = y_scale**2
    return summary.n_samples, constant, x_var, y_constant, y_var


def _status(*arrays) -> jax.Array:
    """:data:`~jaxselect.NONFINITE` when any of ``arrays`` holds NaN/Inf, else 0 (int32)."""
    finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in arrays]))
    return jnp.where(finite, OK, NONFINITE).astype(jnp.int32)


@partial(jax.jit, static_argnames=("whiten", "rank_tol"))
def _from_moments(m: Moments, groups: Groups, l2, *, whiten: bool, rank_tol: float) -> Problem:
    """Standardise and group-whiten moments into a :class:`Problem`, all in D×D space."""
    d = m.x_mean.shape[0]
    dtype = m.x_mean.dtype
    nonconstant = ~m.constant
    index, mask = groups.index, groups.mask
    J, s_max = index.shape
    eye_s = jnp.broadcast_to(jnp.eye(s_max, dtype=dtype)[None, :, :], (J, s_max, s_max))
    pad2 = mask[:, :, None] & mask[:, None, :]
    y_scale = jnp.where(m.y_constant, jnp.ones_like(m.y_var), jnp.sqrt(m.y_var))  # constant Y: a zero column
    standard = summary_from_moments(m)  # the one standardisation rule, on the moments
    x_scale, col_w = standard.scale, standard.factor
    G = m.gram * col_w[:, None] * col_w[None, :]
    rows = jnp.take(G, index, axis=0, mode="fill", fill_value=0)  # (J, s, D)
    G_blocks = jnp.take_along_axis(rows, jnp.minimum(index, d - 1)[:, None, :], axis=2)
    bases = _group_bases(G_blocks, groups, nonconstant, whiten=whiten, rank_tol=rank_tol)
    live = bases.live
    b0t = (m.cross / y_scale[None, :]).T * col_w[None, :]  # (T, D)
    b0t = jnp.where(m.y_constant[:, None], jnp.zeros_like(b0t), b0t)
    if whiten:
        G = apply_block_diag(G, bases.basis, index, mask)
        G = apply_block_diag(G.T, bases.basis, index, mask)
        b0t = apply_block_diag(b0t, bases.basis, index, mask)
    inert_diag = jnp.where(live, l2, jnp.ones_like(m.x_mean))
    C = jnp.where(live[:, None] & live[None, :], G, jnp.zeros_like(G)) + jnp.diag(inert_diag)
    C = 0.5 * (C + C.T)
    # Diagonal blocks C_gg taken from the same moments the solvers use.
    rows = jnp.take(C, index, axis=0, mode="fill", fill_value=0)
    diag_blocks = jnp.take_along_axis(rows, jnp.minimum(index, d - 1)[:, None, :], axis=2)
    diag_blocks = jnp.where(pad2, diag_blocks, eye_s)
    transform = Transform(m.x_mean, x_scale, m.y_mean, y_scale, bases.basis, index, mask)
    return Problem(
        C,
        None,
        b0t.T,
        diag_blocks,
        bases.metric_white,
        bases.metric_std,
        live,
        groups,
        transform,
        l2,
        jnp.asarray(m.n_samples, dtype),
        None,
        _status(C, b0t),
    )


def _target_scale(Y, Yc, nf, w):
    """(y_scale (T,), Ys (n, T)): standardised centred targets; a constant target (max == min over the
    rows with positive weight) gets scale 1 and a zero column, so every solver sees b0 = 0 for it."""
    pos = jnp.ones((Y.shape[0], 1), bool) if w is None else (w > 0)[:, None]
    hi = jnp.max(jnp.where(pos, Y, -jnp.inf), axis=0)
    lo = jnp.min(jnp.where(pos, Y, jnp.inf), axis=0)
    constant = ~(hi > lo)
    y_scale = jnp.sqrt(jnp.sum(Yc * Yc, axis=0) / nf)
    y_scale = jnp.where(constant, jnp.ones_like(y_scale), y_scale)
    Ys = jnp.where(constant[None, :], jnp.zeros_like(Yc), Yc / y_scale[None, :])
    return y_scale, Ys


@partial(jax.jit, static_argnames=("whiten", "rank_tol"))
def _prepare_design(X, Y, w, groups: Groups, l2, summary: ColumnSummary, *, whiten: bool, rank_tol: float) -> Problem:
    """gram=False: keep the design Z (rows scaled by √w) instead of forming C."""
    dtype = X.dtype
    index, mask = groups.index, groups.mask
    J, s_max = index.shape
    nf = summary.n_samples
    eye_s = jnp.broadcast_to(jnp.eye(s_max, dtype=dtype)[None, :, :], (J, s_max, s_max))
    pad2 = mask[:, :, None] & mask[:, None, :]
    if w is None:
        y_mean = jnp.mean(Y, axis=0)
        Yc = Y - y_mean[None, :]
    else:
        y_mean = (w @ Y) / nf
        Yc = (Y - y_mean[None, :]) * jnp.sqrt(w)[:, None]
    y_scale, Ys = _target_scale(Y, Yc, nf, w)
    design = _design(X, w, groups, summary, whiten=whiten, rank_tol=rank_tol)
    Z = design.Z if w is None else design.Z * jnp.sqrt(w)[:, None]
    live = design.live
    inert_diag = jnp.where(live, l2, jnp.ones_like(design.x_mean))
    b0 = (Ys.T @ Z).T / nf  # (Yᵀ Z)ᵀ: no X.T @ u
    Zg = gather_groups(Z, index, mask, axis=1)  # (n, J, s)
    diag_blocks = jnp.einsum("nja,njb->jab", Zg, Zg) / nf
    diag_blocks = diag_blocks + eye_s * jnp.take(inert_diag, index, mode="fill", fill_value=1)[:, None, :]
    diag_blocks = jnp.where(pad2, diag_blocks, eye_s)
    transform = Transform(design.x_mean, design.x_scale, y_mean, y_scale, design.basis, index, mask)
    return Problem(
        None,
        Z,
        b0,
        diag_blocks,
        design.metric_white,
        design.metric_std,
        live,
        groups,
        transform,
        l2,
        nf,
        None,
        _status(b0, diag_blocks),
    )


@partial(jax.jit, static_argnames=("whiten", "rank_tol"))
def _prepare_raw_design(X, Y, groups: Groups, l2, summary: ColumnSummary, *, whiten: bool, rank_tol: float) -> Problem:
    """gram=False with singleton groups and no weights: the problem keeps X itself (``z_affine``).

    Every quantity is a column reduction or a thin product with X: no (n, D) temporary. The
    problem coordinates are ``Z = (X − μ) · c`` with ``c`` = 1/σ times the (1×1) whitening basis,
    0 on inert columns.
    """
    dtype = X.dtype
    index, mask = groups.index, groups.mask
    J = index.shape[0]
    d = X.shape[1]
    nf = summary.n_samples
    nonconstant = summary.live
    x_mean, x_scale, col_w = summary.mean, summary.scale, summary.factor  # from the boundary's pass
    std_var = summary.live.astype(dtype)  # variance of the standardised columns (1, or 0 if constant)
    G_blocks = jnp.take(std_var, index[:, 0], mode="fill", fill_value=0).reshape((J, 1, 1))
    bases = _group_bases(G_blocks, groups, nonconstant, whiten=whiten, rank_tol=rank_tol)
    live = bases.live
    basis = jnp.zeros((d,), dtype).at[index[:, 0]].set(jnp.where(mask[:, 0], bases.basis[:, 0, 0], 0), mode="drop")
    c = jnp.where(live, col_w * basis, jnp.zeros_like(col_w))
    y_mean = jnp.mean(Y, axis=0)
    Yc = Y - y_mean[None, :]
    y_scale, Ys = _target_scale(Y, Yc, nf, None)
    # b0 = Zᵀ Ys / n = c ⊙ ((X − μ)ᵀ Ys) / n, as (Ysᵀ X − (Ysᵀ1) μᵀ)ᵀ (Σ Ys ≈ 0; subtracted exactly).
    cross = Ys.T @ X - jnp.sum(Ys, axis=0)[:, None] * x_mean[None, :]  # (T, D)
    b0 = (cross * c[None, :]).T / nf
    inert_diag = jnp.where(live, l2, jnp.ones_like(x_mean))
    z_var = std_var * jnp.where(live, basis * basis, jnp.zeros_like(basis))
    diag_blocks = (jnp.take(z_var + inert_diag, index[:, 0], mode="fill", fill_value=1)).reshape((J, 1, 1))
    diag_blocks = jnp.where(mask[:, :, None], diag_blocks, jnp.ones_like(diag_blocks))
    transform = Transform(x_mean, x_scale, y_mean, y_scale, bases.basis, index, mask)
    return Problem(
        None,
        None,  # raw X joins outside jit (see prepare)
        b0,
        diag_blocks,
        bases.metric_white,
        bases.metric_std,
        live,
        groups,
        transform,
        l2,
        nf,
        jnp.stack([x_mean, c]),
        _status(b0, diag_blocks),
    )


def problem_design(problem: Problem) -> jax.Array:
    """The (n, D) design of a ``gram=False`` problem in problem coordinates (materialised)."""
    if problem.z_affine is None:
        return problem.Z
    return (problem.Z - problem.z_affine[0][None, :]) * problem.z_affine[1][None, :]


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
