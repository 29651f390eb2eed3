"""Feature Selection with Annealing (FSA), run on a shrinking problem.

Barbu, She, Ding & Gramajo, "Feature Selection with Annealing for Computer Vision and Big Data
Learning" — Algorithm 1: from β = 0, alternate a gradient step ``β ← β − η ∇L(β)`` (eq. 2) and
"keep only the M_e variables with the highest |β_j|" with the schedule of eq. (3), so that k
variables are left at the end. Losses: squared (4), logistic (6), huberized hinge (7), Lorenz (8),
pairwise ranking (9) (see :mod:`jaxselect.losses`), with the shrinkage prior ``s‖β‖²`` and, for the
piecewise-linear learners of §2.5.1 (eqs. 12, 15), the second-order smoothness prior of eq. (13);
the selection criterion of a multi-parameter feature is the norm of its coefficient vector.

Implementation (DESIGN.md §5). The objective is mean-normalised, with the library's ``l2``
convention (mean loss + (l2/2)·‖coefficients‖²),

    F(c, b) = mean-loss(A c + b) + (l2/2) ‖c‖² + smoothness Σ_j ‖D₂ c_j‖²,

with ``A`` the standardized linear design (columns centered and scaled to unit variance, without
copying X) or the centered PL design, and b an intercept that is never penalised nor removed.
Constant columns (max == min, the library's one rule) are inert: they start inactive, are never
selected and keep coefficient 0.

Advanced API (blackjax style): :func:`fsa_prepare` validates and standardizes the data into an
:class:`FSAProblem`, :func:`fsa_init` gives the :class:`FSAState` at β = 0, and :func:`fsa_step`
is one iteration of Algorithm 1 (a gradient step, then keep-the-M_e-largest), a pure jit-able
function. :func:`fsa` is the driver built on the same step: it runs the schedule in *stages of
static width*: inside a stage a ``lax.scan`` of the step carries an active mask; between stages
the kept columns are gathered into a smaller array (when the kept count halves, and when it
reaches k; drops of fewer than 32 columns are not worth a stage), so the total work is about the
schedule's area (Table I) instead of ``M·N_iter``. Each stage is one jitted call cached by width;
nothing leaves the device between stages (the gather indices are the first ``width`` active
positions, found by a stable sort). Compacted linear designs are stored transposed (see
:mod:`.design`); for the squared loss the long narrow stages iterate in moment space
(``G = AᵀA/N``, same iterates, O(W²) per iteration).

Ties in ``|β_j|`` are broken towards the lower feature index (stable sort); kept columns stay in
ascending index order, so the result does not depend on compaction: driving :func:`fsa_step` on
the full width gives the iterates of :func:`fsa`.

Differentiability: the returned ``coef``/``intercept``/``loss_path`` are differentiable with
respect to X, y, ``l2`` (and anything a callable loss closes over) through the unrolled
iterations, with the support treated as fixed — the support itself is piecewise constant in the
data (zero derivative almost everywhere). ``fsa`` can be called inside ``jax.jit``/``jax.grad``/
``jax.vmap``: value checks (NaN, labels, pair ranges, constant columns) are then skipped because
they need concrete values.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import losses as _losses
from .._repr import short_repr
from .._static import canonical
from .._validation import (
    MIN_ROWS,
    as_binary_labels,
    as_float_matrix,
    as_hyper,
    as_vector_target,
    check_constant_mode,
    check_float,
    check_finite_output,
    check_int,
    check_result_type,
    check_scale,
    column_standardization,
    host_value,
    is_traced,
    raise_on_constant,
)
from ..status import NONFINITE, OK, status_message
from ..prepare import as_sample_weight
from ..refit import weighted_standardization
from ..sharding import any_mesh
from .design import FSADesign, LinearDesign, LinearDesignT, PLDesign, matvec, rmatvec, take_columns, take_rows
from .piecewise import PLGrid, pl_basis_mean, pl_encode, pl_grid, pl_scores, smoothness_penalty
from .schedule import annealing_schedule, plan_stages
from .stepsize import WeightedTarget, power_iteration

__all__ = [
    "FSAResult",
    "FSAProblem",
    "FSAState",
    "FSAInfo",
    "fsa",
    "fsa_predict",
    "fsa_prepare",
    "fsa_init",
    "fsa_step",
]

LOSSES = ("squared", "logistic", "huber_hinge", "lorenz", "ranking")
_CLASSIFICATION = ("logistic", "huber_hinge", "lorenz")

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
      status: () int32, 0 = ok, else the flags of :mod:`jaxselect.status` (``NONFINITE`` = 1:
        non-finite loss or coefficients); ``js.raise_for_status(result)`` raises on it.
      x_min, bin_width: (k,) PL grid of the selected features (None for linear learners).
      basis_mean: (k, B+1) centering ū_j of the PL responses (None for linear learners).
      n_features: int, M, the number of columns of the training X (predictions need X of that
        width; None on a result built by hand).

    >>> import numpy as np, jaxselect as js
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 50)); y = X[:, 3] - 2 * X[:, 7]
    >>> res = js.fsa(X, y, 2, n_iter=100)       # an FSAResult
    >>> res.support.tolist(), res.coef.shape, res.loss_path.shape, int(res.status)
    ([3, 7], (2,), (100,), 0)
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
    n_features: Any = None


FSAResult.__repr__ = short_repr


class FSAProblem(NamedTuple):
    """Validated FSA data (:func:`fsa_prepare`): the standardized design and the loss target.

    Attributes:
      design: :class:`~jaxselect.anneal.design.LinearDesign` (raw X (N, M) with column means and
        inverse standard deviations, 0 on constant columns) or
        :class:`~jaxselect.anneal.design.PLDesign` (piecewise-linear encoding).
      target: what the loss takes: (N,) float targets (squared), (N,) float 0/1 labels
        (classification), ``(ij (P, 2) int32, r (P,))`` (ranking), or the ``y`` given with a
        callable loss.
      live: (M,) bool, False on constant columns (max == min), which are never selected.
      grid: :class:`~jaxselect.anneal.PLGrid` of the M features (None for linear learners).
    """

    design: FSADesign
    target: Any
    live: jax.Array
    grid: Any = None


FSAProblem.__repr__ = short_repr


class FSAState(NamedTuple):
    """The carry of Algorithm 1 (:func:`fsa_init`, :func:`fsa_step`).

    Attributes:
      coef: (W, P) coefficients of the standardized (or centered PL) design, zero off ``active``.
      intercept: () intercept (standardized space: the mean score of the design is 0).
      active: (W,) bool, the variables kept so far.
      opt_state: the optax state of ``optimizer`` (None for plain gradient steps).
    """

    coef: jax.Array
    intercept: jax.Array
    active: jax.Array
    opt_state: Any = None


FSAState.__repr__ = short_repr


class FSAInfo(NamedTuple):
    """Diagnostics of one :func:`fsa_step`: ``objective`` () is F at the state the step started from."""

    objective: jax.Array


FSAInfo.__repr__ = short_repr


class _Params(NamedTuple):
    """What an optax optimizer sees (its state is initialised on this structure)."""

    coef: jax.Array  # (W, P)
    intercept: jax.Array  # ()


# --------------------------------------------------------------------------- losses
@functools.lru_cache(maxsize=64)
def _huber(h: float) -> Callable:
    def huber_hinge(scores, y):
        return _losses.huber_hinge_loss(scores, y, h)

    return huber_hinge


@functools.lru_cache(maxsize=64)
def _weighted_loss(name: str, h: float) -> Callable:
    """The weighted mean of a built-in loss, ``mean(rel · ℓ)``, on a :class:`WeightedTarget`.

    The per-example (per-pair for ranking) terms are those of :mod:`jaxselect.losses`; with
    ``rel`` the relative weights (mean 1) this is ``Σ w ℓ / Σ w``.
    """
    if name == "ranking":

        def weighted_ranking(scores, target):
            (ij, r), rel = target
            d = jnp.take(scores, ij[:, 0]) - jnp.take(scores, ij[:, 1])
            terms = jax.nn.softplus(d) - jnp.asarray(r, scores.dtype) * d
            return jnp.mean(rel.astype(scores.dtype) * terms)

        return weighted_ranking

    def per_example(scores, y):
        if name == "squared":
            r = jnp.asarray(y, scores.dtype) - scores
            return 0.5 * r * r
        m = _losses.signed_labels(y, scores.dtype) * scores
        if name == "logistic":
            return _losses.logistic_margin(m)
        if name == "lorenz":
            return _losses.lorenz_margin(m)
        return _losses.huber_hinge_margin(m, h)

    def weighted(scores, target):
        return jnp.mean(target.rel.astype(scores.dtype) * per_example(scores, target.value))

    return weighted


def _check_loss(loss) -> None:
    if not callable(loss) and (not isinstance(loss, str) or loss not in LOSSES):
        raise ValueError(f"loss must be one of {LOSSES} or a callable loss(scores, y); got {loss!r}")


def _resolve_loss(loss, huber_h: float, weighted: bool = False):
    """``(loss_fn, curvature)``: a canonical callable (a static jit argument) and the κ of the
    default step (None: the exact score-space Hessian at zero, see :mod:`.stepsize`). ``weighted``:
    the loss of a :class:`WeightedTarget` (built-in losses only)."""
    _check_loss(loss)
    if weighted:
        if callable(loss):
            raise ValueError(
                "sample_weight needs a built-in loss name; a callable loss(scores, y) returns a mean that "
                "cannot be weighted — put the weights inside your callable instead"
            )
        loss_fn = _weighted_loss(loss, float(huber_h) if loss == "huber_hinge" else 0.0)
        curvature = None if loss == "ranking" else _resolve_loss(loss, huber_h)[1]
        return loss_fn, curvature
    if callable(loss):
        return canonical(loss), None  # a fresh-but-equal lambda reuses the compiled stages
    if loss == "squared":
        return _losses.squared_loss, 1.0
    if loss in _CLASSIFICATION:
        fn = {"logistic": _losses.logistic_loss, "lorenz": _losses.lorenz_loss}.get(loss) or _huber(float(huber_h))
        return fn, _losses.curvature("logistic")  # see _DEFAULT_STEP_NOTE
    return _losses.ranking_loss, None


# --------------------------------------------------------------------------- one iteration
def _prior(coef, l2, smooth):
    return 0.5 * l2 * jnp.sum(coef * coef) + smooth * smoothness_penalty(coef)


def _direct_oracle(design: FSADesign, target, loss_fn):
    """(value, coef-gradient, intercept-gradient) of the mean loss by passes over the data."""

    def oracle(coef, intercept):
        dtype = coef.dtype
        scores = matvec(design, coef) + intercept
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
    rel = None
    if isinstance(y, WeightedTarget):  # weighted moments: rel has mean 1, so mean(rel·…) = Σw…/Σw
        y, rel = y.value, y.rel.astype(y.value.dtype)
    if isinstance(design, LinearDesignT):
        xct = design.Xt - design.mean[:, None]  # (W, N), centered
    else:
        xct = (design.X - design.mean[None, :]).T
    n = xct.shape[1]
    ybar = jnp.mean(y) if rel is None else jnp.mean(rel * y)
    yc = y - ybar
    xw = xct if rel is None else xct * rel[None, :]
    gram = (xw @ xct.T) * (design.inv_scale[:, None] * design.inv_scale[None, :]) / n
    cross = (xw @ yc) * design.inv_scale / n
    vy = jnp.mean(yc * yc) if rel is None else jnp.mean(rel * yc * yc)

    def oracle(coef, intercept):
        beta = coef[:, 0]
        gb = gram @ beta
        delta = intercept - ybar
        val = 0.5 * (jnp.dot(beta, gb) - 2.0 * jnp.dot(cross, beta) + vy + delta * delta)
        return val, (gb - cross)[:, None], delta

    return oracle


def _keep_largest(coef, active, n_keep):
    """Keep the ``n_keep`` active variables with the largest ‖coef_j‖ (ties → lower index first)."""
    width = active.shape[0]
    score = jnp.where(active, jnp.sum(coef * coef, axis=1), -jnp.ones((), coef.dtype))
    order = jnp.argsort(-score, stable=True)
    rank = jnp.zeros((width,), jnp.int32).at[order].set(jnp.arange(width, dtype=jnp.int32))
    return (rank < n_keep) & active  # a killed (or inert) variable never comes back


def _step(oracle, state: FSAState, n_keep, lr, l2, smooth, optimizer):
    """One iteration of Algorithm 1 with a given value/gradient oracle (see :func:`fsa_step`)."""
    dtype = state.coef.dtype
    mask = state.active[:, None].astype(dtype)
    val, g_coef, g_icpt = oracle(state.coef, state.intercept)
    pval, pgrad = jax.value_and_grad(_prior)(state.coef, l2, smooth)
    g_coef = (g_coef + pgrad) * mask
    opt_state = state.opt_state
    if optimizer is None:  # static configuration: plain gradient descent, eq. (2)
        coef = state.coef - lr * g_coef
        intercept = state.intercept - lr * g_icpt
    else:
        updates, opt_state = optimizer.update(_Params(g_coef, g_icpt), opt_state, _Params(state.coef, state.intercept))
        coef = state.coef + jnp.asarray(updates[0]).astype(dtype)
        intercept = state.intercept + jnp.asarray(updates[1]).astype(dtype)
    coef = coef * mask
    active = _keep_largest(coef, state.active, n_keep)
    coef = coef * active[:, None].astype(dtype)
    return FSAState(coef, intercept, active, opt_state), FSAInfo(val + pval)


# --------------------------------------------------------------------------- compacted stages
class _Carry(NamedTuple):
    """State handed from one compacted stage to the next (all on device)."""

    state: FSAState
    cols: jax.Array  # (W,) int32 original feature index of each column
    v_coef: jax.Array  # (W, P) power-iteration vector (warm start)
    v_icpt: jax.Array  # ()
    lam: jax.Array  # () latest estimate of the Lipschitz bound (valid for all later, narrower stages)


@functools.partial(jax.jit, static_argnames=("width", "loss_fn", "optimizer", "curvature", "power", "gram"))
def _run_stage(
    design,
    target,
    carry: _Carry,
    kept,
    lr,
    l2,
    smooth,
    extra_curv,
    *,
    width,
    loss_fn,
    optimizer,
    curvature,
    power,
    gram,
):
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
    if width < carry.state.active.shape[0]:
        keep = _first_true(carry.state.active, width)
        design = compacted = take_columns(design, keep)
        st = carry.state
        carry = _Carry(
            FSAState(
                jnp.take(st.coef, keep, axis=0),
                st.intercept,
                jnp.take(st.active, keep),
                _gather_rows(st.opt_state, keep, st.active.shape[0]),
            ),
            jnp.take(carry.cols, keep),
            jnp.take(carry.v_coef, keep, axis=0),
            carry.v_icpt,
            carry.lam,
        )
    v_coef, v_icpt, lam = carry.v_coef, carry.v_icpt, carry.lam
    dtype = carry.state.coef.dtype
    if optimizer is not None:
        step = jnp.full((), jnp.nan, dtype)
    elif power is None:
        step = jnp.asarray(lr, dtype)
    else:
        if power[0] == "rows":
            sub = take_rows(design, power[2])
            sub_target = target
            if isinstance(target, WeightedTarget):  # the subsample's weights, again of mean 1
                rel = target.rel[:: power[2]]
                sub_target = WeightedTarget(None, rel * (rel.shape[0] / jnp.sum(rel)))
            lam, v_coef, v_icpt = power_iteration(
                sub, sub_target, v_coef, v_icpt, loss_fn=loss_fn, curvature=curvature, n_power=power[1]
            )
        elif power[0] == "full":
            lam, v_coef, v_icpt = power_iteration(
                design, target, v_coef, v_icpt, loss_fn=loss_fn, curvature=curvature, n_power=power[1]
            )
        step = jax.lax.stop_gradient(1.0 / (lam + extra_curv))
    oracle = _gram_oracle(design, target) if gram else _direct_oracle(design, target, loss_fn)
    lr_step = None if optimizer is not None else step

    def body(state, m_e):
        state, info = _step(oracle, state, m_e, lr_step, l2, smooth, optimizer)
        return state, info.objective

    state, objective = jax.lax.scan(body, carry.state, kept)
    return compacted, _Carry(state, carry.cols, v_coef, v_icpt, lam), objective, step


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
    st = carry.state
    keep = _first_true(st.active, k)
    coef = jnp.take(st.coef, keep, axis=0)
    support = jnp.take(carry.cols, keep)
    loss_path = jnp.concatenate(objectives)
    finite = jnp.isfinite(loss_path).all() & jnp.isfinite(coef).all() & jnp.isfinite(st.intercept)
    status = jnp.where(finite, OK, NONFINITE).astype(jnp.int32)
    sel = take_columns(design, keep)
    if linear:
        raw = coef[:, 0] * sel.inv_scale
        return support, raw, st.intercept - jnp.dot(sel.mean, raw), loss_path, jnp.stack(steps), status, None
    return support, coef, st.intercept, loss_path, jnp.stack(steps), status, sel.basis_mean


def _first_true(mask, size):
    """Ascending positions of the first ``size`` True entries of ``mask``; when fewer are True, the
    lowest False positions fill up (a stable sort, then ascending order)."""
    return jnp.sort(jnp.argsort(jnp.logical_not(mask), stable=True)[:size]).astype(jnp.int32)


def _gather_rows(tree, cols, width):
    """Gather rows ``cols`` of every leaf of ``tree`` whose leading dimension is ``width``."""

    def take(leaf):
        if hasattr(leaf, "ndim") and leaf.ndim >= 1 and leaf.shape[0] == width:
            return jnp.take(leaf, cols, axis=0)
        return leaf

    return jax.tree.map(take, tree)


# --------------------------------------------------------------------------- validation
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
            raise ValueError(
                f"pair indices must lie in [0, {n - 1}] (rows of X); got range [{ij_np.min()}, {ij_np.max()}]"
            )
        if not np.isfinite(r_np).all() or r_np.min() < 0 or r_np.max() > 1:
            raise ValueError("pair targets r_ij must lie in [0, 1]")
    return jnp.asarray(ij).astype(jnp.int32), jnp.asarray(r).astype(dtype)


def _check_target(y, n, dtype, loss, pairs):
    """The loss target: (n,) float targets, (n,) 0/1 float labels, pairs, or y for a callable."""
    if callable(loss):
        return jax.tree.map(jnp.asarray, y)
    if loss == "squared":
        if y is None:
            raise ValueError(f"loss='squared' needs regression targets y of shape ({n},) or ({n}, 1)")
        return as_vector_target(y, n, "y", dtype=dtype)
    if loss in _CLASSIFICATION:
        if y is None:
            raise ValueError(f"loss={loss!r} needs binary labels y in {{0, 1}}, {{-1, +1}} or bool")
        y = y if isinstance(y, jax.Array) else np.asarray(y)
        if y.dtype == bool:  # as_binary_labels compares y > 0: no bool/int promotion under strict dtypes
            y = y.astype(np.int32)
        return as_binary_labels(y, n, "y", dtype=dtype)
    return _check_pairs(pairs, n, dtype)


def _validate_options(X_shape, k, n_iter, mu, lr, optimizer, bins, smoothness, huber_h):
    n, m = X_shape
    k = check_int(k, "k", low=1)
    if k > m:
        raise ValueError(f"k={k} is larger than the number of features M={m}; choose 1 <= k <= {m}")
    n_iter = check_int(n_iter, "n_iter", low=1)
    mu = check_float(mu, "mu", low=0.0)
    if lr is not None:
        lr = check_float(lr, "lr", low=0.0, strict_low=True)
        if optimizer is not None:
            raise ValueError("give either lr (plain gradient descent) or an optax optimizer, not both")
    smoothness = check_float(smoothness, "smoothness", low=0.0)
    huber_h = check_float(huber_h, "huber_h", low=0.0, strict_low=True)
    _check_optimizer(optimizer)
    if bins is not None:
        bins = check_int(bins, "bins", low=1)
    elif smoothness > 0:
        raise ValueError("smoothness (eq. 13) applies to piecewise-linear learners: also pass bins=B")
    return k, n_iter, mu, lr, smoothness, bins, huber_h


def _check_optimizer(optimizer):
    if optimizer is not None and not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
        raise TypeError(f"optimizer must be an optax.GradientTransformation; got {type(optimizer).__name__}")


def _check_k_live(live, k: int) -> None:
    """k must not exceed the number of non-constant columns (checked when the data is concrete)."""
    values = host_value(lambda: live)
    if values is None:
        return  # traced X: see fsa's docstring (the support is then padded with constant columns)
    n_live = int(values.sum())
    if k > n_live:
        raise ValueError(
            f"k={k} is larger than the number of non-constant columns of X ({n_live} of {values.size}); "
            f"constant columns (max == min) carry no information and are never selected: choose k <= {n_live}"
        )


# --------------------------------------------------------------------------- preparation
@jax.jit
def _linear_moments(X, w=None):
    """Column means, inverse standard deviations (0 on constant columns) and the live mask
    (weighted moments, and constancy on the rows of positive weight, with row weights ``w``)."""
    mean, scale, live = column_standardization(X) if w is None else weighted_standardization(X, w)
    return mean, jnp.where(live, 1.0 / scale, jnp.zeros_like(scale)), live


@functools.partial(jax.jit, static_argnames="bins")
def _prepare_pl(X, bins, w=None):
    grid = pl_grid(X, bins, w)
    idx, alpha = pl_encode(X, grid, bins)
    live = column_standardization(X)[2] if w is None else weighted_standardization(X, w)[2]
    return PLDesign(idx, alpha, pl_basis_mean(idx, alpha, bins, w)), grid, live


def _weight_target(target, w, loss):
    """The :class:`WeightedTarget` of row weights ``w`` (ranking: pair weights ``w_i·w_j``)."""
    if loss != "ranking":
        return WeightedTarget(target, w * (jnp.asarray(w.shape[0], w.dtype) / jnp.sum(w)))
    ij, r = target
    pw = jnp.take(w, ij[:, 0]) * jnp.take(w, ij[:, 1])
    total = host_value(lambda: jnp.sum(pw))
    if total is not None and not total > 0:
        raise ValueError("sample_weight: every ranking pair has a row of weight 0; give some pairs positive weight")
    return WeightedTarget(target, pw * (jnp.asarray(pw.shape[0], w.dtype) / jnp.sum(pw)))


def _prepare(Xj, y, loss, bins, pairs, constant_columns, w=None) -> FSAProblem:
    target = _check_target(y, Xj.shape[0], Xj.dtype, loss, pairs)
    if w is not None:
        target = _weight_target(target, w, loss)
    if bins is None:
        # built outside jit: returning X from a jitted function would copy it (1x X more memory)
        mean, inv_scale, live = _linear_moments(Xj, w)
        design, grid = LinearDesign(Xj, mean, inv_scale), None
    else:
        design, grid, live = _prepare_pl(Xj, bins, w)
    raise_on_constant(live, constant_columns)
    return FSAProblem(design, target, live, grid)


def _sample_weight(sample_weight, Xj, loss):
    """Validated row weights in X's dtype (None without), checked before any work."""
    w = as_sample_weight(sample_weight, Xj.shape[0])
    if w is None:
        return None
    if callable(loss):
        _resolve_loss(loss, 0.1, weighted=True)  # raises: callables cannot be weighted
    return jnp.asarray(w).astype(Xj.dtype)


def _design_shape(design: FSADesign):
    """``(P, dtype)`` of a design's coefficients."""
    if isinstance(design, PLDesign):
        return design.basis_mean.shape[1], design.alpha.dtype
    return 1, design.mean.dtype


# --------------------------------------------------------------------------- advanced API
@any_mesh
def fsa_prepare(
    X,
    y=None,
    *,
    loss: str | Callable = "squared",
    bins: int | None = None,
    pairs=None,
    constant_columns: str = "inert",
    sample_weight=None,
) -> FSAProblem:
    """Validate the data and build the FSA design (advanced API; :func:`fsa` does this itself).

    Args:
      X: (N, M) features, N ≥ 2 (numpy or a row-sharded ``jax.Array``; never copied for linear
        learners).
      y: as in :func:`fsa` (targets (N,) or (N, 1); binary labels {0, 1}, {−1, +1} or bool;
        None for ``"ranking"``; anything a callable loss takes).
      loss: a loss name of :func:`fsa` or a callable ``loss(scores, y)``; it decides how ``y`` is
        checked.
      bins: B for piecewise-linear learners (None: linear learners on standardized columns).
      pairs: the ranking pairs (see :func:`fsa`).
      constant_columns: ``"inert"`` (default: constant columns are never selected) or ``"raise"``.
      sample_weight: None or (N,) row weights (see :func:`fsa`); the target is then a
        :class:`~jaxselect.anneal.stepsize.WeightedTarget` and :func:`fsa_step` uses the weighted loss.

    Returns:
      :class:`FSAProblem`.
    """
    Xj = as_float_matrix(X, "X", min_rows=MIN_ROWS, scale="values")  # one pass: NaN/Inf and scale
    _check_loss(loss)
    check_constant_mode(constant_columns)
    if bins is not None:
        bins = check_int(bins, "bins", low=1)
    w = _sample_weight(sample_weight, Xj, loss)
    return _prepare(Xj, y, loss, bins, pairs, constant_columns, w)


def fsa_init(problem: FSAProblem, *, optimizer=None) -> FSAState:
    """The state of Algorithm 1 before its first iteration: β = 0, b = 0, every non-constant
    column active (and ``optimizer.init`` on the coefficients when an optax optimizer is used)."""
    _check_optimizer(optimizer)
    p, dtype = _design_shape(problem.design)
    width = problem.live.shape[0]
    coef = jnp.zeros((width, p), dtype)
    intercept = jnp.zeros((), dtype)
    opt_state = None if optimizer is None else optimizer.init(_Params(coef, intercept))
    return FSAState(coef, intercept, jnp.asarray(problem.live).astype(bool), opt_state)


def fsa_step(
    problem: FSAProblem,
    state: FSAState,
    n_keep,
    *,
    loss: str | Callable = "squared",
    lr=None,
    l2=0.0,
    smoothness=0.0,
    optimizer=None,
    huber_h: float = 0.1,
) -> tuple[FSAState, FSAInfo]:
    """One iteration of Algorithm 1: a gradient step on F, then keep the ``n_keep`` largest.

    ``c ← c − lr·∇_c F`` and ``b ← b − lr·∂_b F`` on the active variables (eq. 2; or one update of
    an optax ``optimizer``), then only the ``n_keep`` active variables with the largest ‖c_j‖ stay
    active (ties → lower index; a variable that left never returns), the others are set to 0.
    ``F = mean-loss + (l2/2)‖c‖² + smoothness·Σ‖D₂c_j‖²`` as in :func:`fsa`. Pure and jit-able
    (``loss``, ``optimizer`` and ``huber_h`` are static; ``n_keep``, ``lr``, ``l2`` may be traced):
    ``lax.scan`` it over :func:`~jaxselect.anneal.annealing_schedule` to run FSA on the full width
    (:func:`fsa` gives the same iterates on a compacted problem).

    Args:
      problem: :class:`FSAProblem` from :func:`fsa_prepare`.
      state: :class:`FSAState` (from :func:`fsa_init` or the previous step).
      n_keep: M_e, the number of variables kept after this iteration.
      loss: the loss name or callable used in :func:`fsa_prepare`.
      lr: the gradient step (required unless ``optimizer`` is given; :func:`fsa`'s
        ``result.step_size`` holds its scale-free default 1/L).
      l2, smoothness: prior weights, as in :func:`fsa`.
      optimizer: an optax ``GradientTransformation`` (its state lives in ``state.opt_state``).
      huber_h: h of the huberized hinge loss.

    Returns:
      ``(state, info)``: the new :class:`FSAState` and :class:`FSAInfo` (F before the step).

    >>> import numpy as np, jax
    >>> from jaxselect.anneal import annealing_schedule, fsa_init, fsa_prepare, fsa_step
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((100, 8)); y = X[:, 2] - X[:, 5]
    >>> problem = fsa_prepare(X, y)
    >>> def run(problem, schedule):
    ...     step = lambda s, m: fsa_step(problem, s, m, lr=0.5)
    ...     return jax.lax.scan(step, fsa_init(problem), schedule)
    >>> state, info = jax.jit(run)(problem, annealing_schedule(8, 2, 50, 10.0))
    >>> np.flatnonzero(state.active).tolist()
    [2, 5]
    """
    if (lr is None) == (optimizer is None):
        raise ValueError("fsa_step needs exactly one of lr (a gradient step) or optimizer")
    _check_optimizer(optimizer)
    loss_fn, _ = _resolve_loss(loss, huber_h, weighted=isinstance(problem.target, WeightedTarget))
    dtype = state.coef.dtype
    oracle = _direct_oracle(problem.design, problem.target, loss_fn)
    lr = None if lr is None else jnp.asarray(lr, dtype)
    return _step(
        oracle,
        state,
        jnp.asarray(n_keep).astype(jnp.int32),
        lr,
        jnp.asarray(l2, dtype),
        jnp.asarray(smoothness, dtype),
        optimizer,
    )


# --------------------------------------------------------------------------- public API
@any_mesh
def fsa(
    X,
    y,
    k: int,
    *,
    loss: str | Callable = "squared",
    n_iter: int = 500,
    mu: float = 300.0,
    lr: float | None = None,
    l2=0.0,
    optimizer=None,
    bins: int | None = None,
    smoothness: float = 0.0,
    pairs=None,
    huber_h: float = 0.1,
    constant_columns: str = "inert",
    sample_weight=None,
) -> FSAResult:
    """Feature Selection with Annealing (Barbu et al., Algorithm 1 with schedule (3)).

    Minimises ``F = mean-loss(f(x_i)) + (l2/2)‖β‖² (+ smoothness·eq. 13)`` subject to ``‖β‖₀ ≤ k``
    by gradient steps interleaved with keep-the-M_e-largest, on a problem that is compacted as it
    shrinks (see module docstring). Features are standardized internally (linear learners; β
    is on the standardized features) and the coefficients are returned in raw feature space.

    Args:
      X: (N, M) features, N ≥ 2; a numpy array or a (row-sharded) ``jax.Array``.
      y: (N,) or (N, 1) regression targets (``"squared"``); binary labels in {0, 1}, {−1, +1} or
        bool, (N,) or (N, 1) (classification losses); ignored for ``"ranking"`` (may be None);
        or anything a callable loss accepts.
      k: number of features to select, 1 ≤ k ≤ the number of non-constant columns.
      loss: ``"squared"`` (½·mean, eq. 4/10), ``"logistic"`` (6), ``"huber_hinge"`` (7),
        ``"lorenz"`` (8), ``"ranking"`` (9), or a callable ``loss(scores (N,), y) -> scalar``
        differentiated with ``jax.grad`` (a smooth jnp function; a fresh but equal lambda reuses
        the compiled stages).
      n_iter: N_iter, number of iterations (≥ 1).
      mu: annealing rate μ ≥ 0 of eq. (3).
      lr: gradient step η (> 0). Default: ``1/L`` per compacted stage, L the gradient's Lipschitz
        bound from power iteration (scale-free; see :mod:`.stepsize`; the three classification
        losses use the logistic curvature 1/4, see ``_DEFAULT_STEP_NOTE``).
      l2: ridge weight (≥ 0; may be traced, e.g. ``jax.vmap`` over it): the prior is
        ``(l2/2)‖β‖²`` on the mean loss, the library's one ``l2`` convention. The paper's prior
        ``s‖β‖²`` on its losses summed over the N examples (squared loss as ½Σ, eq. 10) is
        ``l2 = 2s/N``; with eq. (4)'s unhalved Σ(y − xᵀβ)² it is ``l2 = s/N``.
      optimizer: an optax ``GradientTransformation`` used instead of plain gradient descent (its
        state is compacted with the coefficients). A fresh but equal optimizer on each call
        (``optax.sgd(0.1)``) does not recompile.
      bins: B ≥ 1 to use piecewise-linear learners with B + 1 coefficients per feature.
      smoothness: weight c of the second-order prior of eq. (13) (needs ``bins``).
      pairs: for ``"ranking"``: (P, 3) rows (i, j, r_ij) with r_ij ∈ [0, 1], or a tuple
        ``(ij (P, 2) int, r (P,))``.
      huber_h: h of the huberized hinge loss (default 0.1 as in the authors' code).
      constant_columns: ``"inert"`` (default: a column with max == min is never selected and
        never counted) or ``"raise"`` (ValueError naming them; skipped for traced X).
      sample_weight: None or (N,) row weights ``w ≥ 0`` (at least 2 positive): the mean loss
        becomes the weighted mean ``Σ_i w_i ℓ_i / Σw`` and the standardisation (linear learners)
        or the PL grid and centring use the rows' weights (range and constancy over the rows with
        ``w > 0``), so integer weights equal repeated rows and weight-0 rows are absent — the
        weights of :func:`jaxselect.shard_rows` give the unpadded result. ``"ranking"``: pair
        (i, j) gets weight ``w_i·w_j`` (a pair with a padding row is absent). Built-in losses only
        (a callable loss cannot be weighted: weight inside it).

    Returns:
      :class:`FSAResult`. A non-zero ``status`` (non-finite values: the step was too large) also
      gives a ``RuntimeWarning`` when the call is not traced; ``js.raise_for_status`` raises.

    Raises:
      ValueError / TypeError: on bad input (shapes, fewer than 2 rows, NaN/Inf, k outside
        [1, M] or above the number of non-constant columns, unknown loss, labels not binary for a
        classification loss, pairs out of range, bins < 1, mu < 0, n_iter < 1, l2 < 0, ...).

    Inside a user's ``jax.jit`` (traced X, y): value checks are skipped. In particular a k above
    the number of non-constant columns cannot be detected; the support is then padded with
    constant columns, whose coefficient is 0. Classification labels are then read as ``y > 0``.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 50)); y = X[:, 3] - 2 * X[:, 7]
    >>> res = fsa(X, y, 2, n_iter=100)
    >>> res.support.tolist()
    [3, 7]
    """
    Xj = as_float_matrix(X, "X", min_rows=MIN_ROWS, check_finite=False)  # checked with the scale below
    n, m = Xj.shape
    dtype = Xj.dtype
    _check_loss(loss)
    k, n_iter, mu, lr, smoothness, bins, huber_h = _validate_options(
        (n, m), k, n_iter, mu, lr, optimizer, bins, smoothness, huber_h
    )
    l2 = as_hyper(l2, "l2", dtype, low=0.0)
    check_constant_mode(constant_columns)
    optimizer = None if optimizer is None else canonical(optimizer)  # equal optimizers share stages
    w = _sample_weight(sample_weight, Xj, loss)
    loss_fn, curvature = _resolve_loss(loss, huber_h, weighted=w is not None)
    gram = bins is None and (loss_fn is _losses.squared_loss or (w is not None and loss == "squared"))
    # the moment-space (Gram) oracle of the last stages squares raw centred columns
    check_scale(Xj, "X", squares=gram, unchecked=X)  # one pass over X: NaN/Inf and scale
    problem = _prepare(Xj, y, loss, bins, pairs, constant_columns, w)
    if loss == "squared":  # the loss squares the residuals: y's squares must stay finite
        y_values = problem.target if w is None else problem.target.value
        check_scale(y_values[:, None], "y", squares=True)
    _check_k_live(problem.live, k)
    design, target, grid = problem.design, problem.target, problem.grid
    p, _ = _design_shape(design)

    schedule = annealing_schedule(m, k, n_iter, mu)
    carry = _Carry(
        fsa_init(problem, optimizer=optimizer),
        jnp.arange(m, dtype=jnp.int32),
        1.0 + jax.random.normal(jax.random.PRNGKey(0), (m, p), dtype),
        jnp.ones((), dtype),
        jnp.zeros((), dtype),
    )
    smooth = jnp.asarray(smoothness, dtype)
    scalars = (jnp.asarray(0.0 if lr is None else lr, dtype), l2, smooth, l2 + jnp.asarray(32.0, dtype) * smooth)
    objectives, steps = [], []
    for i, st in enumerate(plan_stages(m, schedule, min_drop=_MIN_DROP)):
        kept = jnp.asarray(schedule[st.start : st.start + st.length], jnp.int32)
        power = (
            None if (lr is not None or optimizer is not None) else _power_plan(i, st.length, n, curvature is not None)
        )
        compacted, carry, obj, step = _run_stage(
            design,
            target,
            carry,
            kept,
            *scalars,
            width=st.width,
            loss_fn=loss_fn,
            optimizer=optimizer,
            curvature=curvature,
            power=power,
            gram=gram and st.width < st.length,
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
        n_features=m,
    )
    if not is_traced(result.status):
        code = int(result.status)
        if code != OK:
            warnings.warn(f"fsa: {status_message(code)}", RuntimeWarning, stacklevel=2)
    return result


@any_mesh
def fsa_predict(result: FSAResult, X) -> jax.Array:
    """Scores of a fitted FSA model: regression values, classification or ranking scores.

    ``f(x) = Σ_{j∈support} β_j x_j + b`` for linear learners, ``Σ_j (u(x_j) − ū_j)ᵀ β_j + b`` for
    PL learners (values outside a feature's training range are clipped to it). For classification
    the predicted class is ``+1`` where the score is > 0. Works inside ``jax.jit`` (traced X and
    result).

    Args:
      result: :class:`FSAResult` from :func:`fsa`.
      X: (n, M) data with the same M columns as in training (one row is fine).

    Returns:
      (n,) scores.

    >>> import numpy as np
    >>> X = np.random.default_rng(1).standard_normal((100, 5)); y = 2 * X[:, 1] + 1
    >>> res = fsa(X, y, 1, n_iter=100)
    >>> bool(np.allclose(fsa_predict(res, X), y, atol=1e-2))
    True
    """
    check_result_type(result, FSAResult, "result", "jaxselect.fsa")
    Xj = as_float_matrix(X, "X")
    width = result.n_features  # None (built by hand), an int, or a 0-d array after a jit boundary
    width = None if width is None or is_traced(width) or np.ndim(width) else int(width)
    if width is not None and Xj.shape[1] != width:
        raise ValueError(f"X has {Xj.shape[1]} columns but the model was trained on {width}; pass X with {width}")
    if width is None and not is_traced(result.support) and Xj.shape[1] <= int(jnp.max(result.support)):
        raise ValueError(f"X has {Xj.shape[1]} columns but the model uses feature {int(jnp.max(result.support))}")
    Xs = jnp.take(Xj, result.support, axis=1)
    if result.x_min is None:
        scores = Xs @ result.coef.astype(Xs.dtype) + result.intercept.astype(Xs.dtype)
        return check_finite_output(scores, Xs, "fsa_predict")
    bins = result.coef.shape[1] - 1
    idx, alpha = pl_encode(Xs, PLGrid(result.x_min.astype(Xs.dtype), result.bin_width.astype(Xs.dtype)), bins)
    scores = pl_scores(
        idx, alpha, result.basis_mean.astype(Xs.dtype), result.coef.astype(Xs.dtype)
    ) + result.intercept.astype(Xs.dtype)
    return check_finite_output(scores, Xs, "fsa_predict")
