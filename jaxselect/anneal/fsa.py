"""Feature Selection with Annealing (FSA), run on a shrinking problem.

Barbu, She, Ding & Gramajo, "Feature Selection with Annealing for Computer Vision and Big Data
Learning" — Algorithm 1: from β = 0, alternate a gradient step ``β ← β − η ∇L(β)`` (eq. 2) and
"keep only the M_e variables with the highest |β_j|" with the schedule of eq. (3), so that k
variables are left at the end. Losses: squared (4), logistic (6), huberized hinge (7), Lorenz (8),
pairwise ranking (9) (see :mod:`jaxselect.losses`), with the shrinkage prior ``s‖β‖²`` and, for the
piecewise-linear learners of §2.5.1 (eqs. 12, 15), the second-order smoothness prior of eq. (13);
the selection criterion of a multi-parameter feature is the norm of its coefficient vector.

Implementation (DESIGN.md §5). The objective is mean-normalised,

    F(c, b) = mean-loss(A c + b) + l2 ‖c‖² + smoothness Σ_j ‖D₂ c_j‖²,

with ``A`` the standardized linear design (columns centered and scaled to unit variance, without
copying X) or the centered PL design, and b an intercept that is never penalised nor removed.
The schedule runs in *stages of static width*: inside a stage a ``lax.scan`` carries an active
mask; between stages the kept columns are gathered into a smaller array (when the kept count
halves, and when it reaches k; drops of fewer than 32 columns are not worth a stage), so the
total work is about the schedule's area (Table I) instead of ``M·N_iter``. Each stage is one jitted call cached by width; nothing leaves the device between
stages (the gather indices are the first ``width`` active positions, found by a stable sort).
Compacted linear designs are stored transposed (see :mod:`.design`); for the squared loss the long
narrow stages iterate in moment space (``G = AᵀA/N``, same iterates, O(W²) per iteration).

Ties in ``|β_j|`` are broken towards the lower feature index (stable sort); kept columns stay in
ascending index order, so the result does not depend on compaction.

Differentiability: the returned ``coef``/``intercept``/``loss_path`` are differentiable with
respect to X, y (and anything a callable loss closes over) through the unrolled iterations, with
the support treated as fixed — the support itself is piecewise constant in the data (zero
derivative almost everywhere). ``fsa`` can be called inside ``jax.jit``/``jax.grad``: value checks
(NaN, labels, pair ranges) are then skipped because they need concrete values.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import losses as _losses
from .._validation import as_float_matrix, check_float, check_int, is_traced
from .design import Design, LinearDesign, LinearDesignT, PLDesign, matvec, rmatvec, take_columns, take_rows
from .piecewise import PLGrid, pl_basis_mean, pl_encode, pl_grid, pl_scores, smoothness_penalty
from .schedule import annealing_schedule, plan_stages
from .stepsize import power_iteration

__all__ = ["FSAResult", "fsa", "fsa_predict", "FSA_STATUS", "check_fsa_result"]

LOSSES = ("squared", "logistic", "huber_hinge", "lorenz", "ranking")
_CLASSIFICATION = ("logistic", "huber_hinge", "lorenz")

FSA_STATUS = {0: "ok", 1: "non-finite loss or coefficients (step too large? pass a smaller lr)"}

# default step: power iterations for the first (cold) and later (warm-started) estimates, at most
# half the stage's own iterations; the first estimate of a short wide stage uses a row subsample
_POWER_COLD = 12
_POWER_WARM = 6
_SUBSAMPLE_ROWS = 1024
# compaction that drops fewer columns than this is skipped (tiny problems: compile > savings)
_MIN_DROP = 32
# _DEFAULT_STEP_NOTE: for the three classification losses the default step uses the logistic
# curvature 1/4. It is the exact Lipschitz bound for the logistic loss (Theorem 2.1); the
# huberized hinge (bound 1/(2h) = 5) and Lorenz (bound 2) losses have the same bounded gradient
# |ℓ'| ≤ 1 and their large curvature lives only in a narrow band of margins, so their exact bound
# gives 20x / 8x smaller steps that converge too slowly for the schedule (the paper even uses a
# larger step, η = 1 for them); with 1/4 they recover the paper's Table II/III rows.


class FSAResult(NamedTuple):
    """What :func:`fsa` returns.

    Attributes:
      support: (k,) int32 selected feature indices, ascending.
      coef: (k,) raw-space coefficients (linear learners), or (k, B+1) PL coefficients.
      intercept: () intercept (raw space).
      loss_path: (n_iter,) objective F at the start of each iteration (loss + priors).
      n_kept: (n_iter,) int32 schedule M_e of eq. (3) (variables kept after iteration e).
      step_size: (n_stages,) gradient step used in each compacted stage (NaN with an optimizer).
      status: () int32, 0 = ok, 1 = non-finite values (see ``FSA_STATUS``).
      x_min, bin_width: (k,) PL grid of the selected features (None for linear learners).
      basis_mean: (k, B+1) centering ū_j of the PL responses (None for linear learners).
    """

    support: jax.Array
    coef: jax.Array
    intercept: jax.Array
    loss_path: jax.Array
    n_kept: jax.Array
    step_size: jax.Array
    status: jax.Array
    x_min: Any = None
    bin_width: Any = None
    basis_mean: Any = None


class _Params(NamedTuple):
    coef: jax.Array  # (W, P)
    intercept: jax.Array  # ()


# --------------------------------------------------------------------------- losses
@functools.lru_cache(maxsize=64)
def _huber(h: float) -> Callable:
    def huber_hinge(scores, y):
        return _losses.huber_hinge_loss(scores, y, h)

    return huber_hinge


def _builtin_loss(name: str, h: float) -> Callable:
    return {
        "squared": _losses.squared_loss,
        "logistic": _losses.logistic_loss,
        "lorenz": _losses.lorenz_loss,
        "ranking": _losses.ranking_loss,
    }.get(name) or _huber(h)


# --------------------------------------------------------------------------- one stage
def _prior(coef, l2, smooth):
    return l2 * jnp.sum(coef * coef) + smooth * smoothness_penalty(coef)


def _direct_oracle(design: Design, target, loss_fn):
    """(value, coef-gradient, intercept-gradient) of the mean loss by passes over the data."""
    def oracle(params):
        dtype = params.coef.dtype
        scores = matvec(design, params.coef) + params.intercept
        val, u = jax.value_and_grad(lambda s: jnp.asarray(loss_fn(s, target), dtype))(scores)
        return val, rmatvec(design, u), jnp.sum(u)

    return oracle


def _gram_oracle(design, y):
    """Moment-space oracle for the squared loss on a standardized linear design.

    With ``G = AᵀA/N``, ``c = Aᵀy/N`` (A centered), ``ȳ = mean y``, ``v = mean (y − ȳ)²``:
    ``½ mean (A β + b − y)² = ½ (βᵀGβ − 2cᵀβ + v + (b − ȳ)²)``, gradient ``(Gβ − c, b − ȳ)`` —
    the same iterates as :func:`_direct_oracle` in exact arithmetic, at O(W²) per iteration after
    one O(N W²) Gram product. Used for the long narrow stages at the end of the schedule.
    """
    if isinstance(design, LinearDesignT):
        xct = design.Xt - design.mean[:, None]  # (W, N), centered
    else:
        xct = (design.X - design.mean[None, :]).T
    n = xct.shape[1]
    ybar = jnp.mean(y)
    yc = y - ybar
    gram = (xct @ xct.T) * (design.inv_scale[:, None] * design.inv_scale[None, :]) / n
    cross = (xct @ yc) * design.inv_scale / n
    vy = jnp.mean(yc * yc)

    def oracle(params):
        beta = params.coef[:, 0]
        gb = gram @ beta
        delta = params.intercept - ybar
        val = 0.5 * (jnp.dot(beta, gb) - 2.0 * jnp.dot(cross, beta) + vy + delta * delta)
        return val, (gb - cross)[:, None], delta

    return oracle


def _scan_stage(oracle, params: _Params, opt_state, active, kept, lr, l2, smooth, optimizer):
    """``len(kept)`` FSA iterations at a static width (masked inside the stage).

    Returns ``(params, opt_state, active, objective (len(kept),))``.
    """
    width = active.shape[0]
    dtype = params.coef.dtype
    ranks = jnp.arange(width, dtype=jnp.int32)

    def body(carry, m_e):
        params, opt_state, active = carry
        mask = active[:, None].astype(dtype)
        val, g_coef, g_icpt = oracle(params)
        pval, pgrad = jax.value_and_grad(_prior)(params.coef, l2, smooth)
        grads = _Params((g_coef + pgrad) * mask, g_icpt)
        if optimizer is None:
            new = _Params(params.coef - lr * grads.coef, params.intercept - lr * grads.intercept)
        else:
            updates, opt_state = optimizer.update(grads, opt_state, params)
            new = _Params(*jax.tree.map(lambda p, d: p + d.astype(p.dtype), tuple(params), tuple(updates)))
        coef = new.coef * mask
        # keep the m_e largest group norms among the active features; ties -> lower index first
        score = jnp.where(active, jnp.sum(coef * coef, axis=1), -jnp.ones((), dtype))
        order = jnp.argsort(-score, stable=True)
        rank = jnp.zeros((width,), jnp.int32).at[order].set(ranks)
        active = rank < m_e
        coef = coef * active[:, None].astype(dtype)
        return (_Params(coef, new.intercept), opt_state, active), val + pval

    (params, opt_state, active), objective = jax.lax.scan(body, (params, opt_state, active), kept)
    return params, opt_state, active, objective


class _Carry(NamedTuple):
    """State handed from one compacted stage to the next (all on device)."""

    params: _Params
    opt_state: Any
    active: jax.Array  # (W,) bool
    cols: jax.Array  # (W,) int32 original feature index of each column
    v_coef: jax.Array  # (W, P) power-iteration vector (warm start)
    v_icpt: jax.Array  # ()
    lam: jax.Array  # () latest estimate of the Lipschitz bound (valid for all later, narrower stages)


@functools.partial(
    jax.jit, static_argnames=("width", "loss_fn", "optimizer", "curvature", "power", "gram")
)
def _run_stage(design, target, carry: _Carry, kept, lr, l2, smooth, extra_curv, *, width, loss_fn, optimizer, curvature, power, gram):
    """One compiled stage: gather the kept columns (if the width shrinks), set the step, iterate.

    ``power`` is ``None`` (a given lr or an optimizer), ``("reuse",)`` (keep the previous stage's
    Lipschitz estimate, valid because the problem only shrinks), ``("full", n)`` (n power
    iterations, warm-started) or ``("rows", n, stride)`` (n power iterations on every
    ``stride``-th row: the cheap first estimate at full width). ``gram`` selects the moment-space
    oracle for the squared loss.

    Returns ``(design or None, carry, objective (len(kept),), step)``; the design is returned only
    when it was compacted.
    """
    compacted = None
    if width < carry.active.shape[0]:
        keep = _first_true(carry.active, width)
        design = compacted = take_columns(design, keep)
        params = _Params(jnp.take(carry.params.coef, keep, axis=0), carry.params.intercept)
        carry = _Carry(
            params,
            _gather_rows(carry.opt_state, keep, carry.active.shape[0]),
            jnp.ones((width,), bool),
            jnp.take(carry.cols, keep),
            jnp.take(carry.v_coef, keep, axis=0),
            carry.v_icpt,
            carry.lam,
        )
    v_coef, v_icpt, lam = carry.v_coef, carry.v_icpt, carry.lam
    dtype = carry.params.coef.dtype
    if optimizer is not None:
        step = jnp.full((), jnp.nan, dtype)
    elif power is None:
        step = jnp.asarray(lr, dtype)
    else:
        if power[0] == "rows":
            sub = take_rows(design, power[2])
            lam, v_coef, v_icpt = power_iteration(
                sub, target, v_coef, v_icpt, loss_fn=loss_fn, curvature=curvature, n_power=power[1]
            )
        elif power[0] == "full":
            lam, v_coef, v_icpt = power_iteration(
                design, target, v_coef, v_icpt, loss_fn=loss_fn, curvature=curvature, n_power=power[1]
            )
        step = jax.lax.stop_gradient(1.0 / (lam + extra_curv))
    oracle = _gram_oracle(design, target) if gram else _direct_oracle(design, target, loss_fn)
    params, opt_state, active, objective = _scan_stage(
        oracle, carry.params, carry.opt_state, carry.active, kept, step, l2, smooth, optimizer
    )
    return compacted, _Carry(params, opt_state, active, carry.cols, v_coef, v_icpt, lam), objective, step


def _power_plan(stage_index: int, length: int, n_rows: int, can_subsample: bool):
    """Static choice of how a stage gets its default step (see :func:`_run_stage`)."""
    if stage_index > 0:
        n = min(_POWER_WARM, length // 2)
        return ("full", n) if n >= 2 else ("reuse",)
    n = min(_POWER_COLD, length // 2)
    if n >= _POWER_WARM or not can_subsample or n_rows <= 2 * _SUBSAMPLE_ROWS:
        return ("full", max(n, _POWER_WARM))
    stride = -(-n_rows // _SUBSAMPLE_ROWS)
    return ("rows", _POWER_COLD, stride)


@functools.partial(jax.jit, static_argnames=("k", "linear"))
def _finish(design, carry: _Carry, objectives, steps, *, k, linear):
    """Extract the k survivors, map linear coefficients back to raw feature space, set status."""
    keep = _first_true(carry.active, k)
    coef = jnp.take(carry.params.coef, keep, axis=0)
    support = jnp.take(carry.cols, keep)
    loss_path = jnp.concatenate(objectives)
    finite = jnp.isfinite(loss_path).all() & jnp.isfinite(coef).all() & jnp.isfinite(carry.params.intercept)
    status = jnp.where(finite, 0, 1).astype(jnp.int32)
    sel = take_columns(design, keep)
    if linear:
        raw = coef[:, 0] * sel.inv_scale
        return support, raw, carry.params.intercept - jnp.dot(sel.mean, raw), loss_path, jnp.stack(steps), status, None
    return support, coef, carry.params.intercept, loss_path, jnp.stack(steps), status, sel.basis_mean


def _first_true(mask, size):
    """Ascending indices of the first ``size`` True entries of ``mask`` (a stable sort)."""
    return jnp.argsort(jnp.logical_not(mask), stable=True)[:size].astype(jnp.int32)


def _gather_rows(tree, cols, width):
    """Gather rows ``cols`` of every leaf of ``tree`` whose leading dimension is ``width``."""

    def take(leaf):
        if hasattr(leaf, "ndim") and leaf.ndim >= 1 and leaf.shape[0] == width:
            return jnp.take(leaf, cols, axis=0)
        return leaf

    return jax.tree.map(take, tree)


# --------------------------------------------------------------------------- validation
def _as_matrix(X):
    return as_float_matrix(X, "X")  # traced X (inside a user's jit/grad): shape and dtype checks only


def _as_vector(y, n, missing: str, non_numeric: str):
    """y as a numeric (n,) array (numpy or jax); ``missing`` / ``non_numeric`` are the error texts."""
    if y is None:
        raise ValueError(missing)
    if not isinstance(y, jax.Array):
        y = np.asarray(y)
        if y.dtype == object or y.dtype.kind not in "biuf":
            raise TypeError(f"{non_numeric}; got dtype {y.dtype}")
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must have shape ({n},) to match X; got {tuple(y.shape)}")
    return y


def _check_regression_target(y, n, dtype):
    y = _as_vector(y, n, "loss='squared' needs targets y of shape (n,)", "y must be numeric")
    if not is_traced(y) and not bool(jnp.isfinite(jnp.asarray(y, dtype)).all()):
        raise ValueError("y contains NaN or Inf")
    return jnp.asarray(y, dtype)


def _check_labels(y, n, dtype, loss):
    y = _as_vector(
        y, n,
        f"loss={loss!r} needs class labels y of shape (n,) in {{0, 1}} or {{-1, +1}}",
        "y must hold numeric labels in {0, 1} or {-1, +1}",
    )
    if not is_traced(y):
        vals = set(np.unique(np.asarray(y)).tolist())
        if not (vals <= {0, 1} or vals <= {-1, 1}):
            shown = sorted(vals)[:6]
            raise ValueError(
                f"loss={loss!r} needs binary labels in {{0, 1}} or {{-1, +1}}; got values {shown}"
                + (" (use loss='squared' for regression targets)" if len(vals) > 2 else "")
            )
        if len(vals) < 2:
            raise ValueError(f"y has a single class {sorted(vals)}; classification needs both classes")
    return _losses.signed_labels(y, dtype)


def _check_pairs(pairs, n, dtype):
    if pairs is None:
        raise ValueError("loss='ranking' needs pairs: a (P, 3) array of rows (i, j, r_ij) or a tuple (ij, r)")
    if isinstance(pairs, tuple) and len(pairs) == 2:
        ij, r = pairs
    else:
        arr = pairs if isinstance(pairs, jax.Array) else np.asarray(pairs)
        if arr.ndim != 2 or arr.shape[1] != 3:
            raise ValueError(f"pairs must be a (P, 3) array of rows (i, j, r_ij); got shape {tuple(arr.shape)}")
        ij, r = arr[:, :2], arr[:, 2]
    if not is_traced((ij, r)):
        ij_np, r_np = np.asarray(ij), np.asarray(r, dtype=np.float64)
        if ij_np.ndim != 2 or ij_np.shape[1] != 2 or r_np.shape != (ij_np.shape[0],):
            raise ValueError(f"pairs: ij must be (P, 2) and r (P,); got {ij_np.shape} and {r_np.shape}")
        if ij_np.shape[0] < 1:
            raise ValueError("pairs is empty; give at least one (i, j, r_ij)")
        if not np.isfinite(ij_np.astype(np.float64)).all() or np.any(ij_np != np.round(ij_np)):
            raise ValueError("pair indices i, j must be whole numbers")
        if ij_np.min() < 0 or ij_np.max() >= n:
            raise ValueError(f"pair indices must lie in [0, {n - 1}] (rows of X); got range [{ij_np.min()}, {ij_np.max()}]")
        if not np.isfinite(r_np).all() or r_np.min() < 0 or r_np.max() > 1:
            raise ValueError("pair targets r_ij must lie in [0, 1]")
    return jnp.asarray(ij).astype(jnp.int32), jnp.asarray(r).astype(dtype)


def _validate_options(X_shape, k, loss, n_iter, mu, lr, l2, optimizer, bins, smoothness, huber_h):
    n, m = X_shape
    k = check_int(k, "k", low=1)
    if k > m:
        raise ValueError(f"k={k} is larger than the number of features M={m}; choose 1 <= k <= {m}")
    if not callable(loss):
        if not isinstance(loss, str) or loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES} or a callable loss(scores, y); got {loss!r}")
    n_iter = check_int(n_iter, "n_iter", low=1)
    mu = check_float(mu, "mu", low=0.0)
    if lr is not None:
        lr = check_float(lr, "lr", low=0.0, strict_low=True)
        if optimizer is not None:
            raise ValueError("give either lr (plain gradient descent) or an optax optimizer, not both")
    l2 = check_float(l2, "l2", low=0.0)
    smoothness = check_float(smoothness, "smoothness", low=0.0)
    huber_h = check_float(huber_h, "huber_h", low=0.0, strict_low=True)
    if optimizer is not None and not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
        raise TypeError(f"optimizer must be an optax.GradientTransformation; got {type(optimizer).__name__}")
    if bins is not None:
        bins = check_int(bins, "bins", low=1)
    elif smoothness > 0:
        raise ValueError("smoothness (eq. 13) applies to piecewise-linear learners: also pass bins=B")
    return k, n_iter, mu, lr, l2, smoothness, bins, huber_h


# --------------------------------------------------------------------------- preparation
@jax.jit
def _column_moments(X):
    """Column means and inverse standard deviations (0 for constant columns).

    The mean is a vector-matrix product (one fast pass, sharded over rows); the variance is the
    two-pass ``mean((x − m)²)``. A column is constant when its std is below a rounding-level
    multiple of |mean|.
    """
    n = X.shape[0]
    mean = jnp.ones((n,), X.dtype) @ X / n
    var = jnp.mean(jnp.square(X - mean[None, :]), axis=0)
    std = jnp.sqrt(var)
    eps = jnp.finfo(X.dtype).eps * max(1e3, 10.0 * n**0.5)
    tol = eps * jnp.abs(mean) + jnp.finfo(X.dtype).tiny
    inv = jnp.where(std > tol, 1.0 / jnp.where(std > tol, std, jnp.ones_like(std)), jnp.zeros_like(std))
    return mean, inv


def _prepare_linear(X):
    # built outside jit: returning X from a jitted function would copy it (1x X more memory)
    return LinearDesign(X, *_column_moments(X))


@functools.partial(jax.jit, static_argnames="bins")
def _prepare_pl(X, bins):
    grid = pl_grid(X, bins)
    idx, alpha = pl_encode(X, grid, bins)
    return PLDesign(idx, alpha, pl_basis_mean(idx, alpha, bins)), grid


# --------------------------------------------------------------------------- public API
def fsa(
    X,
    y,
    k: int,
    *,
    loss: str | Callable = "squared",
    n_iter: int = 500,
    mu: float = 300.0,
    lr: float | None = None,
    l2: float = 0.0,
    optimizer=None,
    bins: int | None = None,
    smoothness: float = 0.0,
    pairs=None,
    huber_h: float = 0.1,
) -> FSAResult:
    """Feature Selection with Annealing (Barbu et al., Algorithm 1 with schedule (3)).

    Minimises ``mean-loss(f(x_i)) + l2‖β‖² (+ smoothness·eq. 13)`` subject to ``‖β‖₀ ≤ k`` by
    gradient steps interleaved with keep-the-M_e-largest, on a problem that is compacted as it
    shrinks (see module docstring). Features are standardized internally (linear learners) and
    the coefficients are returned in raw feature space.

    Args:
      X: (N, M) design; a numpy array or a (row-sharded) ``jax.Array``.
      y: (N,) regression targets (``"squared"``), labels in {0, 1} or {−1, +1} (classification
        losses), ignored for ``"ranking"`` (may be None), or anything a callable loss accepts.
      k: number of features to select, 1 ≤ k ≤ M.
      loss: ``"squared"`` (eq. 4), ``"logistic"`` (6), ``"huber_hinge"`` (7), ``"lorenz"`` (8),
        ``"ranking"`` (9), or a callable ``loss(scores (N,), y) -> scalar`` differentiated with
        ``jax.grad`` (it must be a smooth jnp function; use a module-level function so that the
        compiled stages are reused between calls).
      n_iter: N_iter, number of iterations (≥ 1).
      mu: annealing rate μ ≥ 0 of eq. (3).
      lr: gradient step η (> 0). Default: ``1/L`` per compacted stage, L the gradient's Lipschitz
        bound from power iteration (scale-free; see :mod:`.stepsize`; the three classification
        losses use the logistic curvature 1/4, see ``_DEFAULT_STEP_NOTE``).
      l2: shrinkage prior weight s (≥ 0) on ``‖β‖²`` (mean-loss scale: s/N of the paper's sums).
      optimizer: an optax ``GradientTransformation`` used instead of plain gradient descent (its
        state is compacted with the coefficients).
      bins: B ≥ 1 to use piecewise-linear learners with B + 1 coefficients per feature.
      smoothness: weight c of the second-order prior of eq. (13) (needs ``bins``).
      pairs: for ``"ranking"``: (P, 3) rows (i, j, r_ij) with r_ij ∈ [0, 1], or a tuple
        ``(ij (P, 2) int, r (P,))``.
      huber_h: h of the huberized hinge loss (default 0.1 as in the authors' code).

    Returns:
      :class:`FSAResult`.

    Raises:
      ValueError / TypeError: on bad input (shapes, NaN/Inf, k outside [1, M], unknown loss,
        labels not binary for a classification loss, pairs out of range, bins < 1, mu < 0,
        n_iter < 1, ...).

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 50)); y = X[:, 3] - 2 * X[:, 7]
    >>> res = fsa(X, y, 2, n_iter=100)
    >>> res.support.tolist()
    [3, 7]
    """
    Xj = _as_matrix(X)
    n, m = Xj.shape
    k, n_iter, mu, lr, l2, smoothness, bins, huber_h = _validate_options(
        (n, m), k, loss, n_iter, mu, lr, l2, optimizer, bins, smoothness, huber_h
    )
    dtype = Xj.dtype
    curvature = None
    if callable(loss):
        loss_fn = loss
        target = jax.tree.map(jnp.asarray, y)
    elif loss == "squared":
        loss_fn, target, curvature = _losses.squared_loss, _check_regression_target(y, n, dtype), 1.0
    elif loss in _CLASSIFICATION:
        loss_fn, target = _builtin_loss(loss, huber_h), _check_labels(y, n, dtype, loss)
        curvature = _losses.curvature("logistic")  # see _DEFAULT_STEP_NOTE
    else:
        loss_fn, target = _losses.ranking_loss, _check_pairs(pairs, n, dtype)

    if bins is None:
        design, grid = _prepare_linear(Xj), None
    else:
        design, grid = _prepare_pl(Xj, bins)
    p = 1 if bins is None else bins + 1

    gram = bins is None and loss_fn is _losses.squared_loss
    schedule = annealing_schedule(m, k, n_iter, mu)
    v_coef = (1.0 + jax.random.normal(jax.random.PRNGKey(0), (m, p), dtype))
    params = _Params(jnp.zeros((m, p), dtype), jnp.zeros((), dtype))
    carry = _Carry(
        params,
        None if optimizer is None else optimizer.init(params),
        jnp.ones((m,), bool),
        jnp.arange(m, dtype=jnp.int32),
        v_coef,
        jnp.ones((), dtype),
        jnp.zeros((), dtype),
    )
    scalars = [jnp.asarray(v, dtype) for v in (0.0 if lr is None else lr, l2, smoothness, 2.0 * l2 + 32.0 * smoothness)]
    objectives, steps = [], []
    for i, st in enumerate(plan_stages(m, schedule, min_drop=_MIN_DROP)):
        kept = jnp.asarray(schedule[st.start : st.start + st.length], jnp.int32)
        power = None if (lr is not None or optimizer is not None) else _power_plan(i, st.length, n, curvature is not None)
        compacted, carry, obj, step = _run_stage(
            design, target, carry, kept, *scalars, width=st.width, loss_fn=loss_fn, optimizer=optimizer,
            curvature=curvature, power=power, gram=gram and st.width < st.length,
        )
        design = design if compacted is None else compacted
        objectives.append(obj)
        steps.append(step)

    support, coef, intercept, loss_path, step_size, status, basis_mean = _finish(
        design, carry, tuple(objectives), tuple(steps), k=k, linear=bins is None
    )
    result = FSAResult(
        support=support,
        coef=coef,
        intercept=intercept,
        loss_path=loss_path,
        n_kept=jnp.asarray(schedule, jnp.int32),
        step_size=step_size,
        status=status,
        x_min=None if bins is None else jnp.take(grid.x_min, support),
        bin_width=None if bins is None else jnp.take(grid.bin_width, support),
        basis_mean=basis_mean,
    )
    if not is_traced(result.status) and int(result.status) != 0:
        warnings.warn(f"fsa: {FSA_STATUS[int(result.status)]}", RuntimeWarning, stacklevel=2)
    return result


def check_fsa_result(result: FSAResult) -> FSAResult:
    """Raise ``FloatingPointError`` if ``result.status`` is not 0 (for eager callers)."""
    code = int(result.status)
    if code != 0:
        raise FloatingPointError(f"fsa failed: {FSA_STATUS.get(code, code)}")
    return result


def fsa_predict(result: FSAResult, X) -> jax.Array:
    """Scores of a fitted FSA model: regression values, classification or ranking scores.

    ``f(x) = Σ_{j∈support} β_j x_j + b`` for linear learners, ``Σ_j (u(x_j) − ū_j)ᵀ β_j + b`` for
    PL learners (values outside a feature's training range are clipped to it). For classification
    the predicted class is ``+1`` where the score is > 0.

    Args:
      result: :class:`FSAResult` from :func:`fsa`.
      X: (n, M) data with the same M columns as in training.

    Returns:
      (n,) scores.

    >>> import numpy as np
    >>> X = np.random.default_rng(1).standard_normal((100, 5)); y = 2 * X[:, 1] + 1
    >>> res = fsa(X, y, 1, n_iter=100)
    >>> bool(np.allclose(fsa_predict(res, X), y, atol=1e-2))
    True
    """
    Xj = _as_matrix(X)
    if not is_traced(result.support) and Xj.shape[1] <= int(jnp.max(result.support)):
        raise ValueError(f"X has {Xj.shape[1]} columns but the model uses feature {int(jnp.max(result.support))}")
    Xs = jnp.take(Xj, result.support, axis=1)
    if result.x_min is None:
        return Xs @ result.coef.astype(Xs.dtype) + result.intercept.astype(Xs.dtype)
    bins = result.coef.shape[1] - 1
    idx, alpha = pl_encode(Xs, PLGrid(result.x_min.astype(Xs.dtype), result.bin_width.astype(Xs.dtype)), bins)
    return pl_scores(idx, alpha, result.basis_mean.astype(Xs.dtype), result.coef.astype(Xs.dtype)) + result.intercept.astype(Xs.dtype)
