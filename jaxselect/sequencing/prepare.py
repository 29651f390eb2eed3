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
from jaxselect._validation import (
    as_hyper,
    check_constant_mode,
    check_float,
    float_dtype_for,
    host_array,
    is_traced,
)
from jaxselect.design import ColumnSummary, as_data, check_moments, summary_from_moments
from jaxselect.design.boundary import host_matrix
from jaxselect.design.sparse import is_sparse
from jaxselect.design.operators import DenseDesign
from jaxselect.groups import Groups, as_groups
from jaxselect.linalg import apply_block_diag, gather_groups
from jaxselect.design.moments import Moments, check_scales, host_kernel_applies, scale_vectors, xla_moments
from jaxselect.programs import jit
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
      Z: the design when ``C`` is None (``gram=False``), else None: a
        :class:`~jaxselect.design.DesignOperator` (a :class:`~jaxselect.design.DenseDesign` for
        dense X) of the *standardised* features ``X̃`` (n, D); the problem coordinates are
        ``X̃ B`` with ``B`` the block-diagonal whitening basis (``transform.basis``). Solvers touch
        it only through the operator (:func:`~jaxselect.sequencing.engine.c_rows`,
        :func:`~jaxselect.sequencing.engine.c_matvec`): X itself is kept, never centred, scaled or copied
        (except a centred copy when column offsets are large against their spread, mean² > 100 ×
        variance, where implicit centring would lose precision).
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
      weights: None, or (n,) the row weights of a ``gram=False`` problem with ``sample_weight``
        (the moments are ``X̃ᵀWX̃/Σw``).

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
    weights: jax.Array | None = None
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

    The moments come from :mod:`jaxselect.design.moments`: for a numpy X on a CPU backend, host BLAS
    (``syrk``) over row chunks of X with no device copy of X; for a ``jax.Array`` (row-sharded or
    not), on an accelerator or inside a user's ``jit``, XLA. Both give the same result to rounding.

    Args:
      X: (n, D) raw features (numpy or jax; a row-sharded jax.Array stays sharded), or a sparse
        matrix (``scipy.sparse`` or ``jax.experimental.sparse``), never densified: the problem then
        keeps it as a :class:`~jaxselect.design.SparseDesign` (``gram=False``).
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
      gram: form the D×D Gram matrix (True), or keep the design as a lazy operator and compute
        the Gram columns ``X̃ᵀX̃[:, h]`` of each chosen group when it is chosen — one ``u @ X``
        product, O(n·D·s), per step (False). "auto" forms the Gram when D ≤ 4096 (at most 64 MiB in
        float32; the solvers that revisit C — FR's Schur updates, the group lasso — need it) and is
        lazy above, where D×D stops fitting comfortably, and always lazy for a sparse X (which
        ``gram=True`` refuses). ``prepare`` does not know ``k``: a greedy
        run of k ≪ D/2 steps is faster lazy (k passes over X against the Gram's D/2), so pass
        ``gram=False`` for it (e.g. ``cs_omp`` at k = 100 of D = 2 000 runs at a fraction of the
        full-Gram time). With False, ``Problem.Z`` is a design operator over X itself (one device
        copy of a numpy X, none of a ``jax.Array``; standardisation, whitening and weights applied
        implicitly), and the sequencing solvers return slot-space paths
        (:class:`~jaxselect.SelectionPath`) with a lean default ``k``.
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
    if gram is not False and not is_sparse(X) and host_kernel_applies(X, Y, sample_weight):
        X = host_matrix(X, "X")  # validated (not copied) before its shape is read
        if gram is True or X.shape[1] <= GRAM_AUTO_MAX_FEATURES:
            return _prepare_on_host(X, Y, groups, sample_weight, l2, whiten, constant_columns, rank_tol, progress)
    if gram is not True and isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == float_dtype_for(X.dtype):
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
    Y, w, summary, groups = data.Y, data.weights, data.summary, data.groups
    dtype, d = data.design.dtype, data.design.shape[1]
    rank_tol = _rank_tol(rank_tol, dtype)
    l2 = as_hyper(l2, "l2", dtype, low=0.0)
    raw_gram = _moderate_offsets(summary)
    dense = not data.design.sparse  # the device front door gives a dense or a sparse operator
    if gram is True and not dense:
        raise ValueError(
            "gram=True forms the D×D Gram from a dense X; with sparse X use gram=False or 'auto' (the lazy Gram "
            "columns of each chosen group, one sparse product per step: every sequencing solver runs on it)"
        )
    use_gram = dense and (d <= GRAM_AUTO_MAX_FEATURES if gram == "auto" else bool(gram))
    if use_gram:  # the moments, their scale vectors and the problem: one program, checked after it
        problem, scales = _gram_problem(
            data.X, Y, w, summary, groups, l2, centre=not raw_gram, whiten=bool(whiten), rank_tol=rank_tol
        )
        bar.update()
        scales = _concrete(lambda: scales)
        if scales is not None:
            check_scales(*scales)
        bar.update()
        return problem
    # The boundary's design operator over X itself (no copy), or — dense X only — over a centred
    # copy where large offsets would cost implicit centring its precision (the raw-Gram rule);
    # joined outside jit (a jitted function returning its input would copy it).
    design = data.design
    if not raw_gram and dense:
        design = _centred_design(data.X, summary)
    problem, scales = _prepare_lazy(design, Y, w, groups, l2, summary, whiten=bool(whiten), rank_tol=rank_tol)
    problem = problem._replace(Z=design)
    bar.update()
    scales = _concrete(lambda: scales)  # formed by the same program: checked on the host now
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
    """The :class:`Problem` of data given only by its :class:`~jaxselect.design.moments.Moments` (with the Gram).

    :func:`prepare` and :func:`prepare_from_batches` end here: the constant-column rule and the
    scale checks run on the moments, then standardising and whitening happen in D×D space.

    Args:
      moments: a :class:`~jaxselect.Moments` with its Gram (e.g. from
        ``jaxselect.design.moments.MomentAccumulator``).
      groups, l2, whiten, constant_columns, rank_tol: as in :func:`prepare`.

    Returns:
      A :class:`Problem` in Gram mode.

    Raises:
      ValueError: moments without a Gram, groups that do not match D, ``constant_columns="raise"``
        with constant columns, or columns/targets whose spread the compute dtype cannot represent.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = 2 * X[:, 1] + 1
    >>> from jaxselect.design.moments import MomentAccumulator
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
    # every floating field in the compute dtype (a float64 accumulator must not leak into b0): host
    # fields are cast on the host, device fields inside the program (an eager cast compiles one)
    moments = jax.tree.map(lambda a: _host_cast(a, dtype), moments)
    return _from_moments(moments, groups, l2, whiten=bool(whiten), rank_tol=rank_tol, dtype=np.dtype(dtype))


def _host_cast(a, dtype):
    """A host moment field in the compute dtype (floating) or as it is; device and traced fields pass."""
    if isinstance(a, jax.Array) or is_traced(a):
        return a
    a = np.asarray(a)
    return a.astype(dtype) if np.issubdtype(a.dtype, np.floating) else a


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
    (False inside a user's jit/vmap, where the data cannot be inspected: the centred copy is safe).
    Evaluated on the host from the summary's D numbers (eager jnp would compile a program per op)."""
    if any(is_traced(a) for a in (summary.mean, summary.scale, summary.live)):
        return False
    mean, scale, live = (host_array(a) for a in (summary.mean, summary.scale, summary.live))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = np.max(np.where(live, (mean / scale) ** 2, np.zeros_like(mean)), initial=0.0)
    return bool(ratio <= RAW_GRAM_MAX_OFFSET_RATIO)


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


#: entries within this fraction of a direction's largest magnitude tie for its orientation
ORIENTATION_TIE = 1e-3


def orient(evecs: jax.Array) -> jax.Array:
    """The one orientation rule of eigen-directions (the columns of ``evecs`` (..., s, s)): the
    first entry whose magnitude is within :data:`ORIENTATION_TIE` of the column's largest is made
    positive. Robust to ties — a standardised 2-column group's directions are ``(1, ±1)/√2``
    exactly, where "the largest entry" is decided by rounding — so :func:`prepare`,
    :func:`whiten_design` and the streamed path give the same coordinates whichever kernel formed
    the moments."""
    mag = jnp.abs(evecs)
    near = mag >= (1.0 - ORIENTATION_TIE) * jnp.max(mag, axis=-2, keepdims=True)
    first = jnp.argmax(near, axis=-2)  # the first entry of the near-largest ones
    pivot = jnp.take_along_axis(evecs, first[..., None, :], axis=-2)
    return evecs * jnp.where(pivot < 0, -1.0, 1.0).astype(evecs.dtype)


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
    evecs = orient(evecs)
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


@partial(jit, static_argnames=("whiten", "rank_tol"))
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


@jit
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


@partial(jit, static_argnames=("whiten", "rank_tol", "dtype"))
def _from_moments(m: Moments, groups: Groups, l2, *, whiten: bool, rank_tol: float, dtype=None) -> Problem:
    """Standardise and group-whiten moments into a :class:`Problem`, all in D×D space (``dtype``:
    every floating field cast to it first)."""
    if dtype is not None:
        m = jax.tree.map(lambda a: a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a, m)
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


@partial(jit, static_argnames=("centre", "whiten", "rank_tol"))
def _gram_problem(X, Y, w, summary, groups: Groups, l2, *, centre: bool, whiten: bool, rank_tol: float):
    """The device Gram path of :func:`prepare` in one program: :func:`xla_moments`, the scale-check
    vectors (:func:`scale_vectors`, checked on the host after the program) and :func:`_from_moments`."""
    moments = xla_moments(X, Y, w, summary, centre=centre)
    return _from_moments(moments, groups, l2, whiten=whiten, rank_tol=rank_tol), scale_vectors(moments)


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


@jit
def _centred_design(X, summary: ColumnSummary) -> DenseDesign:
    """The operator over a centred copy of X (large column offsets: implicit centring would cancel)."""
    return DenseDesign(X - summary.mean[None, :], jnp.zeros_like(summary.mean), summary.factor)


def design_columns(design, idx: jax.Array, real: jax.Array) -> jax.Array:
    """The dense standardised columns ``X̃[:, idx]`` (n, s) of a design operator, zero where ``real``
    is False (padding of a group's index row): ``design.take(idx).materialize()``, only s columns."""
    safe = jnp.where(real, idx, jnp.zeros_like(idx))
    cols = design.take(safe).materialize()
    return jnp.where(real[None, :], cols, jnp.zeros_like(cols))


def _weighted(cols: jax.Array, w) -> jax.Array:
    return cols if w is None else cols * w[:, None].astype(cols.dtype)


#: Columns gathered at once when the per-group moments of a lazy problem are formed (lax.map batches).
GROUP_BLOCK_COLUMNS = 256


def _group_moments(design, w, groups: Groups, nf) -> jax.Array:
    """(J, s, s) per-group moments ``X̃_gᵀWX̃_g/Σw`` of the standardised design, O(n·D·s) work and
    O(n·s) memory per group (a ``lax.map`` over groups, a few groups gathered at a time)."""
    index, mask = groups.index, groups.mask
    s_max = index.shape[1]

    def one(args):
        idx, real = args
        cols = design_columns(design, idx, real)
        return jax.lax.dot_general(_weighted(cols, w), cols, (((0,), (0,)), ((), ()))) / nf

    return jax.lax.map(one, (index, mask), batch_size=max(1, GROUP_BLOCK_COLUMNS // s_max))


@partial(jit, static_argnames=("whiten", "rank_tol"))
def _prepare_lazy(design, Y, w, groups: Groups, l2, summary: ColumnSummary, *, whiten: bool, rank_tol: float) -> Problem:
    """gram=False: the :class:`Problem` of a design operator (its ``Z`` joins outside jit) and the
    scale-check vectors of :func:`_design_scale_vectors` (checked on the host after the program).

    Everything is asked of the operator: ``b0 = Bᵀ X̃ᵀ W Ys / Σw`` is one ``rmv``, the per-group
    moments (whitening bases and diagonal blocks) come from each group's own columns; no (n, D)
    temporary. With singleton groups the standardised columns have unit variance by construction.
    """
    dtype = design.dtype
    index, mask = groups.index, groups.mask
    J, s_max = index.shape
    nf = summary.n_samples
    eye_s = jnp.broadcast_to(jnp.eye(s_max, dtype=dtype)[None, :, :], (J, s_max, s_max))
    pad2 = mask[:, :, None] & mask[:, None, :]
    if w is None:
        y_mean = jnp.mean(Y, axis=0)
        y_scale, u = _target_scale(Y, Y - y_mean[None, :], nf, None)
    else:  # u = W Ys: the √w-scaled standardised targets of _target_scale times √w
        y_mean = (w @ Y) / nf
        root = jnp.sqrt(w)[:, None]
        y_scale, Ys = _target_scale(Y, (Y - y_mean[None, :]) * root, nf, w)
        u = Ys * root
    if s_max == 1:  # a standardised column's variance: 1, or 0 when constant
        G_blocks = jnp.take(summary.live.astype(dtype), index[:, 0], mode="fill", fill_value=0).reshape((J, 1, 1))
    else:
        G_blocks = _group_moments(design, w, groups, nf)
    bases = _group_bases(G_blocks, groups, summary.live, whiten=whiten, rank_tol=rank_tol)
    live = bases.live
    b0t = apply_block_diag(design.rmv(u.T) / nf, bases.basis, index, mask)  # (T, D): one u @ X
    inert_diag = jnp.where(live, l2, jnp.ones_like(summary.mean))
    diag_blocks = jnp.einsum("jab,jac,jcd->jbd", bases.basis, G_blocks, bases.basis)  # Bᵀ G B per group
    diag_blocks = diag_blocks + eye_s * jnp.take(inert_diag, index, mode="fill", fill_value=1)[:, None, :]
    diag_blocks = jnp.where(pad2, diag_blocks, eye_s)
    transform = Transform(summary.mean, summary.scale, y_mean, y_scale, bases.basis, index, mask)
    scales = _design_scale_vectors(summary, Y, w, y_scale)  # the scale checks' vectors, same program
    problem = Problem(
        None,
        None,  # the design joins outside jit (see _prepare_on_device)
        b0t.T,
        diag_blocks,
        bases.metric_white,
        bases.metric_std,
        live,
        groups,
        transform,
        l2,
        nf,
        w,
        _status(b0t, diag_blocks),
    )
    return problem, scales


def problem_design(problem: Problem) -> jax.Array:
    """The (n, D) design of a ``gram=False`` problem in problem coordinates, ``√w ⊙ X̃ B``
    (materialised: for small problems and tests)."""
    Z = problem.Z.materialize()
    if problem.weights is not None:
        Z = Z * jnp.sqrt(problem.weights)[:, None].astype(Z.dtype)
    tr = problem.transform
    return apply_block_diag(Z, tr.basis, tr.index, tr.mask)


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


# the builders GLM OMP shares with prepare (the family's other modules import these names)
design_arrays = _design
design_scale_vectors = _design_scale_vectors
rank_tolerance = _rank_tol
