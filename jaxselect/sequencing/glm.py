"""Cost-sensitive group OMP for generalised linear models (Hu et al., Appendix B, Algorithm 3).

Hu, Grubb, Bagnell & Hebert, "Efficient Feature Group Sequencing for Anytime Linear Prediction".
With Z the standardised, group-whitened design (n, D), coefficients W (D, T), an unpenalised
intercept b (T,) and a smooth per-example loss ℓ, the regularised GLM risk is (eq. 21)

    r(W, b) = (1/n) Σ_i ℓ(Wᵀz_i + b, y_i) + (λ/2) ‖W‖_F²,

and its gradient w.r.t. W (eq. 22, with ``G_i = ∂ℓ/∂s`` at the scores s_i = Wᵀz_i + b)

    ∇_W r = (1/n) Σ_i z_i G_iᵀ + λ W = Zᵀ G / n + λ W.

Algorithm 3: starting from the intercept-only model, step j computes ∇_W r at the current model
(unselected groups have W_g = 0), picks ``argmax_g ‖(∇_W r)_g‖_F² / c(g)`` among the remaining
groups with at least one live coordinate — on whitened groups the whitened gradient norm of
Algorithm 1, scored by the shared :func:`~jaxselect.sequencing.criteria.omp_scores` — and refits the GLM
on the features of the selected groups with the library's damped Newton solver
(:func:`jaxselect.newton.glm_newton`, warm-started). The losses (``ℓ(s, y)`` for one example, s and
y in R^T) are those of :func:`jaxselect.losses.glm_loss`: ``"logistic"`` (T independent binary
outputs), ``"softmax"`` (multinomial over T = C classes), ``"squared"`` (then Algorithm 3 is
Algorithm 1 up to the scaling of Y), or a smooth, convex, separable callable.

Implementation: the selected features occupy a fixed number P of "slots" (the features of the k
largest groups, :func:`~jaxselect.sequencing.criteria.slot_capacity`); empty slots are zero columns that
the solver does not move, so shapes stay static. One jitted ``lax.scan`` of k + 1 iterations runs
the path: iteration 0 fits the intercept-only model, iteration j ≥ 1 is one :func:`glm_omp_step`
(select, add, refit), so a single traced Newton solver serves every step.

Advanced API (blackjax style): :func:`glm_problem` validates the data once into a
:class:`GLMProblem` (arrays only); :func:`glm_omp_init` gives the fitted intercept-only
:class:`GLMOMPState`; ``state = glm_omp_step(problem, state)`` selects, adds and refits one group
(``state.info``: its :class:`GLMStepInfo`); :func:`glm_omp_run` is the jitted scan of steps, emitting
``state.info`` per step, that :func:`glm_omp` calls.
"""

from __future__ import annotations

import dataclasses
import warnings
from functools import partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect._budget import kahan_add
from jaxselect._progress import check_progress, progress_bar, run_in_chunks
from jaxselect._repr import short_repr
from jaxselect._static import canonical
from jaxselect._validation import (
    as_binary_labels,
    as_hyper,
    as_labels,
    as_targets,
    check_choice,
    check_float,
    check_int,
    host_array,
    is_traced,
)
from jaxselect.design import DenseDesign, densify_sparse
from jaxselect.sequencing.criteria import OMP_CRITERIA, omp_scores, selectable_groups, slot_capacity
from jaxselect.groups import Groups
from jaxselect.losses import GLM_LOSSES, GLMLoss, glm_loss
from jaxselect.newton import NEWTON_SOLVERS, choose_solver, default_tol, glm_newton
from jaxselect.path import SelectionPath, link_code
from jaxselect.sequencing.prepare import Transform, design_columns, to_raw_coef, whiten_design
from jaxselect.sharding import any_mesh
from jaxselect.status import NONFINITE, NOT_CONVERGED

__all__ = [
    "glm_omp",
    "GLMInfo",
    "GLM_LOSSES",
    "GLMProblem",
    "GLMConfig",
    "GLMOMPState",
    "GLMStepInfo",
    "glm_problem",
    "glm_omp_init",
    "glm_omp_step",
    "glm_omp_run",
]

CRITERIA = OMP_CRITERIA


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class GLMConfig:
    """Static options of a GLM problem (a pytree without leaves), fixed by :func:`glm_problem`.

    Attributes:
      loss: "logistic", "softmax", "squared" or the canonical instance of a loss callable.
      newton_solver: "auto", "cholesky" or "cg"; "auto" is resolved per run from the static slot
        capacity (:func:`jaxselect.newton.choose_solver`).
    """

    loss: str | Callable = "logistic"
    newton_solver: str = "auto"


class GLMInfo(NamedTuple):
    """Solver diagnostics of :func:`glm_omp` (``path.info``), one entry per step.

    Attributes:
      n_iter: (m,) int32 Newton iterations of the refit after step j.
      grad_norm: (m,) max |∇r| over the active coefficients and the intercept after the refit.
      converged: (m,) bool, the refit met its tolerance (``max|∇r| ≤ tol·σ``, see
        :mod:`jaxselect.newton`).
      loss: (m,) regularised risk r(W_j, b_j) (eq. 21) after the refit.
      null_loss: () risk of the intercept-only model.
      status: (m,) int32 status flags of each refit (NOT_CONVERGED, NONFINITE).

    >>> import numpy as np, jaxselect as js
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(100, 3)); y = (X[:, 1] > 0).astype(int)
    >>> info = js.glm_omp(X, y).info
    >>> info.converged.tolist(), bool(info.loss[0] < info.null_loss)
    ([True, True, True], True)
    """

    n_iter: jax.Array
    grad_norm: jax.Array
    converged: jax.Array
    loss: jax.Array
    null_loss: jax.Array
    status: jax.Array

    __repr__ = short_repr


class GLMProblem(NamedTuple):
    """A validated GLM selection problem (arrays only; build it with :func:`glm_problem`).

    Attributes:
      Z: the standardised, group-whitened design (n, D) as a
        :class:`~jaxselect.design.DesignOperator` (zero columns on inert coordinates); the solver
        reads it through ``take(idx).materialize()`` and ``rmv`` only.
      Y: (n, T) targets in the loss's coding (0/1 for logistic, one-hot for softmax).
      live: (D,) bool, False on inert coordinates (constant columns, dropped directions).
      metric_white, metric_std: (J, s, s) the OMP criterion metrics (as in :class:`jaxselect.Problem`).
      groups: the :class:`Groups` partition and costs.
      transform: :class:`jaxselect.Transform` from problem coordinates to raw coefficients.
      l2: () λ; tol: () Newton tolerance (relative to σ); max_iter: () int32 Newton cap per refit.
      criterion: () int32 index into ``("whiten", "no_whiten", "single")``.
      cost_sensitive: () bool, divide the criterion by c(g).
      sample_weight: None, or (n,) relative row weights ``n·w/Σw`` (mean 1): the risk's mean loss
        is then the weighted mean ``Σ w_i ℓ_i / Σw``.
      config: the static :class:`GLMConfig` (loss and Newton solver).
    """

    Z: DenseDesign
    Y: jax.Array
    live: jax.Array
    metric_white: jax.Array
    metric_std: jax.Array
    groups: Groups
    transform: Transform
    l2: jax.Array
    tol: jax.Array
    max_iter: jax.Array
    criterion: jax.Array
    cost_sensitive: jax.Array
    sample_weight: jax.Array | None = None
    config: GLMConfig = GLMConfig()

    __repr__ = short_repr


class GLMOMPState(NamedTuple):
    """Scan carry of GLM OMP (fixed shapes; P = slot capacity).

    Attributes:
      V: (P, T) coefficients of the slots; b: (T,) intercept.
      slot_feature: (P,) int32 feature of each slot, D when empty.
      selected: (J,) bool; count: () int32 filled slots.
      cum_cost: () cost of the selected groups (compensated sum), cost_carry: () its compensation.
      loss: () regularised risk r at (V, b); grad_norm: () max|∇r| there; n_iter: () Newton
        iterations of the last refit.
      step: () int32 steps taken; status: () int32 OR of the refits' status flags.
      info: :class:`GLMStepInfo` of the latest step; after :func:`glm_omp_init` that of iteration 0
        (the intercept-only fit: group −1, cost +inf, W = 0).
    """

    V: jax.Array
    b: jax.Array
    slot_feature: jax.Array
    selected: jax.Array
    count: jax.Array
    cum_cost: jax.Array
    cost_carry: jax.Array
    loss: jax.Array
    grad_norm: jax.Array
    n_iter: jax.Array
    step: jax.Array
    status: jax.Array
    info: GLMStepInfo

    __repr__ = short_repr


class GLMStepInfo(NamedTuple):
    """Diagnostics of one :func:`glm_omp_step`, kept as ``GLMOMPState.info`` (group −1 and cost
    +inf for an empty step and for the intercept-only fit of :func:`glm_omp_init`)."""

    group: jax.Array
    cum_cost: jax.Array
    W: jax.Array  # (D, T) problem-space coefficients after the step
    b: jax.Array  # (T,)
    loss: jax.Array
    grad_norm: jax.Array
    n_iter: jax.Array
    status: jax.Array  # () int32 status of this step's refit

    __repr__ = short_repr


# ---------------------------------------------------------------------------------------------
# Validation at the Python boundary.


def _check_loss(loss):
    """A built-in loss name, or the canonical instance of a callable (so equal lambdas share a compile)."""
    if isinstance(loss, str):
        check_choice(loss, "loss", GLM_LOSSES)
        return loss
    if not callable(loss):
        raise TypeError(f"loss must be one of {GLM_LOSSES} or a callable(scores, Y); got {loss!r}")
    return canonical(loss)


def _link_name(loss) -> str:
    return loss if loss in ("logistic", "softmax") else "identity"


def _binary_columns(Y, n: int, dtype):
    """Logistic labels: (n,) / (n, 1) or (n, T) columns, each {0, 1}, {−1, +1} or bool → 0/1 (n, T)."""
    if not isinstance(Y, jax.Array) and not is_traced(Y):
        Y = np.asarray(Y)
    if Y.ndim == 2 and Y.shape[1] > 1:
        if Y.shape[0] != n:
            raise ValueError(f"Y has {Y.shape[0]} rows but X has {n}; they must match")
        cols = [as_binary_labels(Y[:, t], n, f"Y[:, {t}]", dtype=dtype) for t in range(Y.shape[1])]
        return jnp.stack(cols, axis=1)
    if Y.ndim not in (1, 2):
        raise ValueError(f"Y must be (n,) or (n, T) binary labels; got shape {tuple(Y.shape)}")
    return as_binary_labels(Y, n, "Y", dtype=dtype)[:, None]


def _glm_targets(loss, Y, n: int, dtype, n_classes):
    """Validate Y for the loss; returns Y (n, T) in the loss's coding."""
    if loss == "softmax":
        labels, C = as_labels(Y, n, "Y", n_classes=n_classes)
        if C < 2:
            raise ValueError("softmax needs at least 2 classes; Y has only class 0")
        if not is_traced(labels):
            missing = np.setdiff1d(np.arange(C), host_array(labels))  # gathered when rows span processes
            if missing.size:
                raise ValueError(
                    f"class(es) {missing[:10].tolist()} never occur in Y: their unpenalised intercepts would "
                    "diverge; relabel the classes 0..C-1 consecutively"
                )
        # from the global labels when they span processes: the one-hot stays row-sharded
        return jax.nn.one_hot(jnp.asarray(labels), C, dtype=dtype)
    if loss == "logistic":
        return _binary_columns(Y, n, dtype)
    return as_targets(Y, n, "Y", dtype=dtype)[0]


def _weighted_loss(parts: GLMLoss, rel) -> GLMLoss:
    """Per-example value, gradient and Hessian times the relative weights ``rel`` (n,) (mean 1)."""
    return GLMLoss(
        lambda S, Y: rel * parts.value(S, Y),
        lambda S, Y: rel[:, None] * parts.grad(S, Y),
        lambda S, Y: rel[:, None, None] * parts.hess(S, Y),
    )


def _loss_parts(problem: GLMProblem) -> GLMLoss:
    parts = glm_loss(problem.config.loss)
    return parts if problem.sample_weight is None else _weighted_loss(parts, problem.sample_weight)


def _check_callable(loss, n: int, T: int, dtype, weighted: bool = False) -> None:
    S = jax.ShapeDtypeStruct((n, T), dtype)
    try:
        out = jax.eval_shape(loss, S, S)
    except Exception as exc:  # noqa: BLE001 - re-raised with context
        raise ValueError(f"the loss callable failed on (n, T) = ({n}, {T}) scores and targets: {exc}") from exc
    if not hasattr(out, "shape") or out.shape not in ((n,), ()):
        raise ValueError(
            f"the loss callable must return per-example losses of shape ({n},) or a scalar mean; "
            f"got {getattr(out, 'shape', type(out).__name__)}"
        )
    if weighted and out.shape != (n,):
        raise ValueError(
            f"with sample_weight the loss callable must return per-example losses of shape ({n},), not a "
            "scalar mean (the weights multiply each example's loss)"
        )


@any_mesh
def glm_problem(
    X,
    Y,
    groups=None,
    *,
    loss="logistic",
    l2=1e-3,
    criterion: str = "whiten",
    cost_sensitive: bool = True,
    whiten: bool = True,
    tol=None,
    max_iter: int = 50,
    n_classes=None,
    constant_columns: str = "inert",
    rank_tol=None,
    sample_weight=None,
    newton_solver: str = "auto",
) -> GLMProblem:
    """Validate and standardise the data of :func:`glm_omp` into a :class:`GLMProblem`.

    Takes the arguments of :func:`glm_omp` (see there) except ``k`` and ``progress``. The loss and
    the Newton solver are stored in the problem's static :class:`GLMConfig`, so
    :func:`glm_omp_init`, :func:`glm_omp_step` and :func:`glm_omp_run` take only the problem.
    """
    X = densify_sparse(  # its problem holds the whitened design dense: sparse X only when n·D is small
        X, "glm_omp", "the whitened design", "jaxselect.fsa with loss='logistic' (FSAClassifier)"
    )
    loss = _check_loss(loss)
    if newton_solver not in NEWTON_SOLVERS:
        raise ValueError(f"newton_solver must be one of {NEWTON_SOLVERS}; got {newton_solver!r}")
    check_choice(criterion, "criterion", CRITERIA)
    max_iter = check_int(max_iter, "max_iter", low=1)
    if n_classes is not None:
        n_classes = check_int(n_classes, "n_classes", low=2)
    design, groups = whiten_design(
        X, groups, whiten=whiten, constant_columns=constant_columns, rank_tol=rank_tol, sample_weight=sample_weight
    )
    Z = DenseDesign.raw(design.Z)  # the standardised, group-whitened design as an operator
    n, D = Z.shape
    dtype = Z.dtype
    l2 = as_hyper(l2, "l2", dtype, low=0.0)
    Yt = _glm_targets(loss, Y, n, dtype, n_classes)
    T = Yt.shape[1]
    if callable(loss):
        _check_callable(loss, n, T, dtype, weighted=sample_weight is not None)
    rel = None
    if sample_weight is not None:  # validated by whiten_design
        w = jnp.asarray(sample_weight).astype(dtype)
        rel = w * (jnp.asarray(n, dtype) / jnp.sum(w))
    tol = check_float(default_tol(dtype) if tol is None else tol, "tol", low=0.0, strict_low=True)
    transform = Transform(
        design.x_mean,
        design.x_scale,
        jnp.zeros((T,), dtype),
        jnp.ones((T,), dtype),
        design.basis,
        groups.index,
        groups.mask,
    )
    return GLMProblem(
        Z,
        Yt,
        design.live,
        design.metric_white,
        design.metric_std,
        groups,
        transform,
        l2,
        jnp.asarray(tol, dtype),
        jnp.asarray(max_iter, jnp.int32),
        jnp.asarray(CRITERIA.index(criterion), jnp.int32),
        jnp.asarray(bool(cost_sensitive)),
        rel,
        GLMConfig(loss, newton_solver),
    )


# ---------------------------------------------------------------------------------------------
# init / step / run.


def _empty_state(problem: GLMProblem, capacity: int) -> GLMOMPState:
    n, D = problem.Z.shape
    T = problem.Y.shape[1]
    dtype = problem.Z.dtype
    zero = jnp.zeros((), dtype)
    return GLMOMPState(
        V=jnp.zeros((capacity, T), dtype),
        b=jnp.zeros((T,), dtype),
        slot_feature=jnp.full((capacity,), D, jnp.int32),
        selected=jnp.zeros((problem.groups.n_groups,), bool),
        count=jnp.zeros((), jnp.int32),
        cum_cost=zero,
        cost_carry=zero,
        loss=jnp.full((), jnp.inf, dtype),
        grad_norm=jnp.full((), jnp.inf, dtype),
        n_iter=jnp.zeros((), jnp.int32),
        step=jnp.zeros((), jnp.int32),
        status=jnp.zeros((), jnp.int32),
        info=GLMStepInfo(  # no step yet: replaced by the intercept-only fit's info in glm_omp_init
            group=jnp.full((), -1, jnp.int32),
            cum_cost=jnp.full((), jnp.inf, dtype),
            W=jnp.zeros((D, T), dtype),
            b=jnp.zeros((T,), dtype),
            loss=jnp.full((), jnp.inf, dtype),
            grad_norm=jnp.full((), jnp.inf, dtype),
            n_iter=jnp.zeros((), jnp.int32),
            status=jnp.zeros((), jnp.int32),
        ),
    )


def _slot_coef(problem: GLMProblem, state: GLMOMPState) -> jax.Array:
    D = problem.Z.shape[1]
    return jnp.zeros((D, state.V.shape[1]), state.V.dtype).at[state.slot_feature].set(state.V, mode="drop")


def _advance(problem: GLMProblem, state: GLMOMPState, add_group):
    """Select a group (when ``add_group``, a traced bool), add it, and refit by damped Newton."""
    parts = _loss_parts(problem)
    loss = problem.config.loss
    # "auto" resolves from static shapes: (P + 1)·T unknowns
    newton_solver = choose_solver(problem.config.newton_solver, (state.V.shape[0] + 1) * problem.Y.shape[1])
    Z, Y = problem.Z, problem.Y
    n, D = Z.shape
    dtype = Z.dtype
    groups = problem.groups
    index, mask, costs = groups.index, groups.mask, groups.costs
    # eq. 22 at the current model (unselected groups have W_g = 0) and the OMP criterion
    Zs = design_columns(Z, state.slot_feature, state.slot_feature < D)
    G = parts.grad(Zs @ state.V + state.b[None, :], Y)
    grad_full = Z.rmv(G.T).T / jnp.asarray(n, dtype) + problem.l2 * _slot_coef(problem, state)
    denom = jnp.where(problem.cost_sensitive, costs, jnp.ones_like(costs))
    scores = omp_scores(grad_full, problem.metric_white, problem.metric_std, index, mask, problem.criterion) / denom
    allowed = ~state.selected & selectable_groups(groups.index, groups.mask, problem.live)
    h = jnp.argmax(jnp.where(allowed, scores, -jnp.inf)).astype(jnp.int32)
    take = add_group & jnp.any(allowed)
    new_slots = jnp.where(take & mask[h], index[h], D).astype(jnp.int32)
    slot_feature = jax.lax.dynamic_update_slice(state.slot_feature, new_slots, (state.count,))
    Zs = design_columns(Z, slot_feature, slot_feature < D)
    active = jnp.take(problem.live, slot_feature, mode="fill", fill_value=False)
    res = glm_newton(
        Zs,
        Y,
        state.V,
        state.b,
        active,
        problem.l2,
        parts,
        tol=problem.tol,
        max_iter=problem.max_iter,
        solver=newton_solver,
        softmax=loss == "softmax",
    )
    cost = jnp.where(take, costs[h].astype(dtype), jnp.zeros((), dtype))
    cum_cost, cost_carry = kahan_add(state.cum_cost, state.cost_carry, cost)
    chosen = take & (jnp.arange(state.selected.shape[0], dtype=jnp.int32) == h)
    new = GLMOMPState(
        V=res.V,
        b=res.b,
        slot_feature=slot_feature,
        selected=state.selected | chosen,
        count=state.count + jnp.where(take, mask[h].sum(dtype=jnp.int32), 0),
        cum_cost=cum_cost,
        cost_carry=cost_carry,
        loss=res.info.loss,
        grad_norm=res.info.grad_norm,
        n_iter=res.info.n_iter,
        step=state.step,
        status=state.status | res.info.status,
        info=state.info,  # replaced below
    )
    proceed = take | ~add_group  # an empty step (nothing left to select) keeps the model
    new = jax.tree.map(partial(jnp.where, proceed), new, state)
    new = new._replace(step=state.step + add_group.astype(jnp.int32))
    inf = jnp.full((), jnp.inf, dtype)
    step_status = jnp.where(proceed, res.info.status, 0).astype(jnp.int32)
    info = GLMStepInfo(
        jnp.where(take, h, -1).astype(jnp.int32),
        jnp.where(take, new.cum_cost, inf),
        _slot_coef(problem, new),
        new.b,
        new.loss,
        new.grad_norm,
        jnp.where(proceed, new.n_iter, 0).astype(jnp.int32),
        step_status,
    )
    return new._replace(info=info)


def glm_omp_init(problem: GLMProblem, capacity: int | None = None) -> GLMOMPState:
    """The fitted intercept-only model: no slots filled, ``b`` minimising r with W = 0.

    Args:
      problem: from :func:`glm_problem` (its static config holds the loss and the Newton solver).
      capacity: static number of feature slots P (at least the features of the groups you will add
        plus the largest group size; default: room for every group,
        :func:`~jaxselect.sequencing.criteria.slot_capacity`).
    """
    if capacity is None:
        capacity = slot_capacity(problem.groups.mask, problem.groups.n_groups, problem.Z.shape[1])
    return _advance(problem, _empty_state(problem, capacity), jnp.zeros((), bool))


def glm_omp_step(problem: GLMProblem, state: GLMOMPState) -> GLMOMPState:
    """One step of Algorithm 3: score every remaining group at the current model, add the best, refit.

    Pure and jit-able (the loss and the Newton solver are the problem's static config). When no
    selectable group is left the step is empty: the state is unchanged (except ``step`` and
    ``info``) and the info's group is −1.

    Returns:
      The new :class:`GLMOMPState`; ``state.info`` is this step's :class:`GLMStepInfo`.
    """
    return _advance(problem, state, jnp.ones((), bool))


@partial(jax.jit, static_argnames=("capacity",))
def _glm_start(problem: GLMProblem, *, capacity: int):
    """Iteration 0: the intercept-only fit, ``(state, null loss, null intercept)``."""
    state = _advance(problem, _empty_state(problem, capacity), jnp.zeros((), bool))
    return state, state.info.loss, state.info.b


@partial(jax.jit, static_argnames=("length",))
def _glm_advance(problem: GLMProblem, state: GLMOMPState, *, length: int):
    """``length`` steps in one ``lax.scan``: ``(state, stacked GLMStepInfo)`` (``state.info`` per step)."""

    def body(st, _):
        st = glm_omp_step(problem, st)
        return st, st.info

    return jax.lax.scan(body, state, length=length)


@jax.jit
def _glm_finish(problem: GLMProblem, state: GLMOMPState, out: GLMStepInfo, null_f, null_b) -> SelectionPath:
    coef, offset = to_raw_coef(problem.transform, out.W)
    safe = jnp.where(null_f > 0, null_f, jnp.ones_like(null_f))
    objective = jnp.where(null_f > 0, 1.0 - out.loss / safe, -out.loss)
    finite = jnp.all(jnp.isfinite(coef)) & jnp.all(jnp.isfinite(out.b)) & jnp.all(jnp.isfinite(out.loss))
    status = state.status | jnp.where(finite, 0, NONFINITE).astype(jnp.int32)
    converged = (out.status & (NOT_CONVERGED | NONFINITE)) == 0
    return SelectionPath(
        order=out.group,
        cum_cost=out.cum_cost,
        objective=objective,
        coef=coef,
        intercept=offset + out.b,
        null_intercept=null_b,
        status=status,
        link=link_code(_link_name(problem.config.loss)),
        info=GLMInfo(out.n_iter, out.grad_norm, converged, out.loss, null_f, out.status),
    )


@partial(jax.jit, static_argnames=("k", "capacity"))
def _glm_run(problem: GLMProblem, *, k, capacity):
    state, null_f, null_b = _glm_start(problem, capacity=capacity)
    state, out = _glm_advance(problem, state, length=k)
    return _glm_finish(problem, state, out, null_f, null_b)


def glm_omp_run(problem: GLMProblem, *, k=None, progress: bool = False) -> SelectionPath:
    """Run k steps of GLM OMP in one jitted ``lax.scan``; returns the :class:`SelectionPath` (its
    ``info`` is the :class:`GLMInfo`).

    Args:
      problem: from :func:`glm_problem`.
      k, progress: as in :func:`glm_omp`.
    """
    if not isinstance(problem, GLMProblem):
        raise TypeError(f"expected a GLMProblem from glm_problem(X, Y, groups, ...); got {type(problem).__name__}")
    steps, capacity = _glm_steps(problem, k)
    if not check_progress(progress):
        return _glm_run(problem, k=steps, capacity=capacity)
    bar = progress_bar(total=steps, desc="glm_omp")
    state, null_f, null_b = _glm_start(problem, capacity=capacity)
    state, out = run_in_chunks(lambda st, n: _glm_advance(problem, st, length=n), state, steps, "glm_omp", bar)
    return _glm_finish(problem, state, out, null_f, null_b)


def _glm_steps(problem: GLMProblem, k):
    """(steps, slot capacity) of a run of ``k`` steps (default all J, clipped to J)."""
    J = problem.groups.n_groups
    steps = J if k is None else min(check_int(k, "k", low=1), J)
    return steps, slot_capacity(problem.groups.mask, steps, problem.Z.shape[1])


@any_mesh
def glm_omp(
    X,
    Y,
    groups=None,
    *,
    loss="logistic",
    l2=1e-3,
    k=None,
    criterion: str = "whiten",
    cost_sensitive: bool = True,
    whiten: bool = True,
    tol=None,
    max_iter: int = 50,
    n_classes=None,
    constant_columns: str = "inert",
    rank_tol=None,
    return_info=None,
    newton_solver: str = "auto",
    sample_weight=None,
    progress: bool = False,
) -> SelectionPath:
    """Cost-sensitive group OMP for GLMs (Hu et al., Algorithm 3): an anytime classifier.

    At step j the gradient ``∇_W r = Zᵀ G / n + λ W`` (eq. 22) of the regularised risk (eq. 21) is
    taken at the current model, the remaining group maximising ``‖(∇_W r)_g‖_F² / c(g)`` is added,
    and the GLM is refitted on the selected features (warm-started damped Newton,
    :mod:`jaxselect.newton`).

    Runs inside a user's ``jax.jit`` with traced X and Y (value checks are then skipped; softmax
    needs ``n_classes``). The number of groups and the slot capacity are static: they are read from
    ``groups``, which should be concrete (a :class:`Groups` passed *into* the jitted function as an
    argument is traced, and the capacity then falls back to k times the largest group size).

    Args:
      X: (n, D) raw features (a row-sharded jax.Array stays sharded). A sparse X (``scipy.sparse``,
        BCOO/BCSR) is densified when ``n·D`` is at most
        :data:`jaxselect.design.sparse.SPARSE_DENSIFY_LIMIT` (the problem holds the whitened design
        dense), and refused above, with :func:`~jaxselect.fsa` (``loss="logistic"``) named.
      Y: ``"logistic"``: (n,) or (n, 1) binary labels, or (n, T) with T binary label columns sharing
        the groups — each column {0, 1}, {−1, +1} or bool; ``"softmax"``: (n,) or (n, 1) classes
        0..C−1 (bool = 0/1; every class must occur); ``"squared"`` / callable: (n,) or (n, T) real
        targets.
      groups: None (singletons, unit costs), (D,) group ids, or a :class:`Groups` with costs.
      loss: "logistic", "softmax", "squared" or a callable ``loss(scores (n, T), Y (n, T))``
        returning (n,) per-example losses (or their mean); smooth, convex, separable. A callable is
        a static argument: an equal function (e.g. the same lambda built afresh) is not recompiled.
      l2: λ ≥ 0: the risk is the mean loss + (λ/2)‖W‖² on the coefficients of the standardised,
        group-whitened features (the intercept is not penalised) — the library's one ``l2``.
        sklearn's ``LogisticRegression(C=…)`` on the same columns is ``λ = 1/(C·n)``. May be traced.
      k: number of groups to sequence (default None: all J; clipped to J).
      criterion: "whiten" (Alg. 3 on whitened groups), "no_whiten" (gradient w.r.t. the merely
        standardised features) or "single" (its best single feature), as in :func:`cs_omp`.
      cost_sensitive: divide the criterion by c(g) (False: cost-blind G-OMP).
      whiten: group-whiten the design (the penalty then acts on whitened coefficients).
      tol: each refit stops when ``max|∇r| ≤ tol·σ`` (σ = max(1, spread of the loss gradient at zero
        scores): 1 for labels, the target scale for the squared loss); default 1e-7 in float64,
        1e-4 in float32.
      max_iter: Newton iterations per refit; a refit that stops there (or stalls) before ``tol``
        sets the NOT_CONVERGED flag of ``path.status``.
      n_classes: softmax only: number of classes C (default max label + 1; required when Y is traced).
      constant_columns: "inert" (default): constant columns (max == min) are never selected and get
        coefficient 0 (a group made only of them is never selected); "raise": a ValueError names them.
      rank_tol: relative eigenvalue threshold of the whitening, as in :func:`jaxselect.prepare`.
      return_info: deprecated (the path always carries its :class:`GLMInfo` as ``path.info``);
        ``True`` still returns ``(path, path.info)`` with a DeprecationWarning.
      newton_solver: how each Newton step is solved. "cholesky" forms the ((P+1)·T)² Hessian
        (O(n·P²·T²) per iteration, exact); "cg" uses preconditioned conjugate gradients on
        Hessian-vector products (O(n·P·T) each, inexact-Newton tolerance); "auto" picks "cg"
        when (P+1)·T > 256 (wide problems), else "cholesky". P is the number of feature slots
        (the features of the k largest groups plus the largest group size).
      sample_weight: None or (n,) row weights ``w ≥ 0`` (at least 2 positive): the risk's mean
        loss becomes ``Σ_i w_i ℓ_i / Σw`` and the standardisation and whitening use weighted
        moments (as :func:`jaxselect.prepare`), so integer weights equal repeated rows and rows of
        weight 0 are absent — the weights of :func:`jaxselect.shard_rows` give the unpadded
        result. scikit-learn's ``LogisticRegression(C=…).fit(..., sample_weight=w)`` on the same
        columns is ``λ = 1/(C·Σw)``. A callable loss must then return per-example losses.
      progress: show a ``tqdm`` progress bar over the steps (needs the optional ``tqdm``, the
        ``[progress]`` extra); the steps then run in a few compiled chunks. Default False: one
        compiled program.

    Returns:
      A :class:`SelectionPath` of m = min(k, J) prefixes: raw-space ``coef`` (m, D, T) and
      ``intercept`` (m, T) of the linear scores (T = C classes for softmax), ``objective`` = the
      fraction ``1 − r(W_j)/r(W_0)`` of the intercept-only model's regularised risk removed,
      ``null_intercept`` the intercept-only scores, ``link`` the inverse link (logistic, softmax, or
      identity for the squared and callable losses), ``status`` the OR of the refits' flags
      (:func:`jaxselect.raise_for_status`), ``info`` the per-step Newton diagnostics
      (:class:`GLMInfo`). Steps after the last selectable group are empty (order −1).
      :func:`glm_predict` gives probabilities
      at a budget (:func:`jaxselect.predict` gives the scores).

    Raises:
      ValueError: labels that do not fit the loss (non-binary or a single class for "logistic",
        non-integer or missing classes for "softmax"), an unknown loss or criterion, a callable
        loss returning the wrong shape, NaN/Inf in X or y, groups that do not match X, bad
        ``l2``/``k``/``tol``/``max_iter``.
      TypeError: non-numeric inputs.

    >>> import numpy as np, jaxselect as js
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(200, 4))
    >>> y = (X[:, 2] - X[:, 0] + 0.1 * rng.normal(size=200) > 0).astype(int)
    >>> path = js.glm_omp(X, y, js.Groups.from_ids([0, 1, 2, 3], [1.0, 1.0, 1.0, 1.0]))
    >>> sorted(path.order.tolist()[:2]), int(path.status)
    ([0, 2], 0)
    """
    problem = glm_problem(
        X,
        Y,
        groups,
        loss=loss,
        l2=l2,
        criterion=criterion,
        cost_sensitive=cost_sensitive,
        whiten=whiten,
        tol=tol,
        max_iter=max_iter,
        n_classes=n_classes,
        constant_columns=constant_columns,
        rank_tol=rank_tol,
        sample_weight=sample_weight,
        newton_solver=newton_solver,
    )
    path = glm_omp_run(problem, k=k, progress=progress)
    if return_info is not None:
        warnings.warn(
            "glm_omp(return_info=...) is deprecated: the path always carries its GLMInfo as path.info "
            "(use path = glm_omp(...); path.info)",
            DeprecationWarning,
            stacklevel=2,
        )
        if return_info:
            return path, path.info
    return path
