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
the solver does not move, so shapes stay static. The path is a :class:`~jaxselect.Solver`
(:func:`glm_omp_solver`): its init fits the intercept-only model, each step is one
:func:`glm_omp_step` (select, add, refit), so a single traced Newton solver serves every step.

Advanced API: :func:`glm_prepare` (the GLM counterpart of :func:`jaxselect.prepare`; older name
:func:`glm_problem`) validates the data once into a :class:`GLMProblem` (arrays only; one compiled
program); :func:`glm_omp_run` runs the solver on it (one compiled program, the library's driver);
:func:`glm_omp` fuses the two into one program. :func:`glm_omp_init` gives the fitted
intercept-only :class:`GLMOMPState`; ``state = glm_omp_step(problem, state)`` selects, adds and
refits one group (``state.info``: its :class:`GLMStepInfo`). The Newton refit's options are one
:class:`NewtonOptions` record.
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
from jaxselect._progress import check_progress
from jaxselect._repr import short_repr
from jaxselect._static import canonical
from jaxselect._validation import (
    as_binary_labels,
    as_labels,
    as_targets,
    check_choice,
    check_float,
    check_int,
    host_array,
    host_hyper,
    is_traced,
)
from jaxselect.design import DenseDesign, as_data, densify_sparse
from jaxselect.design.moments import check_scales
from jaxselect.groups import Groups
from jaxselect.losses import GLM_LOSSES, GLMLoss, glm_loss
from jaxselect.newton import NEWTON_SOLVERS, choose_solver, default_tol, glm_newton
from jaxselect.path import SelectionPath, link_code
from jaxselect.programs import jit
from jaxselect.sequencing.criteria import OMP_CRITERIA, omp_scores, selectable_groups, slot_capacity
from jaxselect.sequencing.engine import clip_steps
from jaxselect.sequencing.prepare import Transform, design_columns, to_raw_coef
from jaxselect.sequencing.prepare import design_arrays as _design
from jaxselect.sequencing.prepare import design_scale_vectors as _design_scale_vectors
from jaxselect.sequencing.prepare import rank_tolerance as _rank_tol
from jaxselect.sharding import any_mesh
from jaxselect.solver import Solver, SolverTraits, iterate, run
from jaxselect.status import NONFINITE, NOT_CONVERGED

__all__ = [
    "glm_omp",
    "glm_prepare",
    "glm_omp_solver",
    "NewtonOptions",
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


class NewtonOptions(NamedTuple):
    """The damped Newton refit of every GLM OMP step (:mod:`jaxselect.newton`), as one option record.

    Attributes:
      tol: each refit stops when ``max|∇r| ≤ tol·σ`` (σ = max(1, spread of the loss gradient at
        zero scores): 1 for labels, the target scale for the squared loss); None: 1e-7 in float64,
        1e-4 in float32.
      max_iter: Newton iterations per refit; a refit that stops there (or stalls) before ``tol``
        sets the NOT_CONVERGED flag of ``path.status``.
      solver: how each Newton step is solved. "cholesky" forms the ((P+1)·T)² Hessian
        (O(n·P²·T²) per iteration, exact); "cg" uses preconditioned conjugate gradients on
        Hessian-vector products (O(n·P·T) each, inexact-Newton tolerance); "auto" picks "cg"
        when (P+1)·T > 256 (wide problems), else "cholesky". P is the number of feature slots
        (the features of the k largest groups plus the largest group size).

    >>> import jaxselect as js
    >>> js.NewtonOptions(tol=1e-6, max_iter=100)
    NewtonOptions(tol=1e-06, max_iter=100, solver='auto')
    """

    tol: float | None = None
    max_iter: int = 50
    solver: str = "auto"


_NEWTON_KEYWORDS = {"tol": "tol", "max_iter": "max_iter", "newton_solver": "solver"}


def _newton_options(newton, deprecated: dict, fn: str) -> NewtonOptions:
    """The :class:`NewtonOptions` of a call: ``newton`` (None: the defaults) with the deprecated loose
    keywords ``tol``, ``max_iter`` and ``newton_solver`` folded in (each with a DeprecationWarning);
    any other keyword in ``deprecated`` is a TypeError, as Python's own."""
    if newton is None:
        newton = NewtonOptions()
    elif not isinstance(newton, NewtonOptions):
        raise TypeError(f"newton must be a jaxselect.NewtonOptions(tol=..., max_iter=..., solver=...); got {newton!r}")
    for name in deprecated:
        if name not in _NEWTON_KEYWORDS:
            raise TypeError(f"{fn}() got an unexpected keyword argument {name!r}")
    for old, field in _NEWTON_KEYWORDS.items():
        if old in deprecated:
            warnings.warn(
                f"{fn}({old}=...) is deprecated: pass newton=jaxselect.NewtonOptions({field}=...) "
                "(the damped Newton refit's options as one record)",
                DeprecationWarning,
                stacklevel=5,  # user -> any_mesh wrapper -> glm_omp -> here
            )
            newton = newton._replace(**{field: deprecated[old]})
    return newton


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
      null_loss, null_intercept: () risk and (T,) intercept of the intercept-only model (set by
        :func:`glm_omp_init`; None before).
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
    null_loss: jax.Array | None = None
    null_intercept: jax.Array | None = None

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
        # host labels stack on the host (an eager jnp.stack would compile a program)
        return np.stack([np.asarray(c) for c in cols], axis=1) if isinstance(Y, np.ndarray) else jnp.stack(cols, axis=1)
    if Y.ndim not in (1, 2):
        raise ValueError(f"Y must be (n,) or (n, T) binary labels; got shape {tuple(Y.shape)}")
    labels = as_binary_labels(Y, n, "Y", dtype=dtype)
    # host labels are reshaped on the host (an eager reshape of a device array compiles a program)
    return np.asarray(labels)[:, None] if isinstance(Y, np.ndarray) else labels[:, None]


def _glm_targets(loss, Y, n: int, dtype, n_classes):
    """Validate Y for the loss; returns ``(Y, C)``: Y (n, T) in the loss's coding, or for softmax the
    (n,) int32 labels and the number of classes C (one-hot coded inside the compiled program)."""
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
        return labels, C
    if loss == "logistic":
        return _binary_columns(Y, n, dtype), None
    return as_targets(Y, n, "Y", dtype=dtype)[0], None


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


class _GLMInputs(NamedTuple):
    """What the boundary hands to the compiled build of a :class:`GLMProblem` (a pytree)."""

    X: jax.Array
    weights: jax.Array | None
    summary: object
    groups: Groups
    Y: jax.Array  # (n, T) targets in the loss's coding, or (n,) int32 labels for softmax
    l2: jax.Array
    tol: jax.Array
    max_iter: jax.Array
    criterion: jax.Array
    cost_sensitive: jax.Array


class _GLMStatic(NamedTuple):
    """The static options of the build (hashable; part of the compiled program's key)."""

    loss: object
    newton_solver: str
    whiten: bool
    rank_tol: float
    n_classes: int | None  # softmax: the one-hot width; None otherwise


def _glm_inputs(
    X, Y, groups, *, loss, l2, criterion, cost_sensitive, whiten, newton: NewtonOptions, n_classes,
    constant_columns, rank_tol, sample_weight,
):
    """Every check of :func:`glm_prepare` on the host (the front door's column summary is the only
    program run here); returns the build's inputs and static options."""
    X = densify_sparse(  # its problem holds the whitened design dense: sparse X only when n·D is small
        X, "glm_omp", "the whitened design", "jaxselect.fsa with loss='logistic' (FSAClassifier)"
    )
    loss = _check_loss(loss)
    if newton.solver not in NEWTON_SOLVERS:
        raise ValueError(f"newton_solver must be one of {NEWTON_SOLVERS}; got {newton.solver!r}")
    check_choice(criterion, "criterion", CRITERIA)
    max_iter = check_int(newton.max_iter, "max_iter", low=1)
    if n_classes is not None:
        n_classes = check_int(n_classes, "n_classes", low=2)
    data = as_data(
        X, None, sample_weight=sample_weight, groups="singletons" if groups is None else groups,
        targets=None, constant_columns=constant_columns, scale="values",
    )
    n = data.design.shape[0]
    dtype = data.design.dtype
    rank_tol = _rank_tol(rank_tol, dtype)
    l2 = host_hyper(l2, "l2", dtype, low=0.0)
    Yt, C = _glm_targets(loss, Y, n, dtype, n_classes)
    T = C if C is not None else Yt.shape[1]
    if callable(loss):
        _check_callable(loss, n, T, dtype, weighted=sample_weight is not None)
    tol = check_float(default_tol(dtype) if newton.tol is None else newton.tol, "tol", low=0.0, strict_low=True)
    inputs = _GLMInputs(
        data.X,
        data.weights,
        data.summary,
        data.groups,
        Yt,
        l2,
        np.asarray(tol, dtype),
        np.asarray(max_iter, np.int32),
        np.asarray(CRITERIA.index(criterion), np.int32),
        np.asarray(bool(cost_sensitive)),
    )
    return inputs, _GLMStatic(loss, newton.solver, bool(whiten), rank_tol, C)


def _build(inputs: _GLMInputs, static: _GLMStatic):
    """The :class:`GLMProblem` (traced) and the design's scale-check vectors (checked on the host)."""
    design = _design(
        inputs.X, inputs.weights, inputs.groups, inputs.summary, whiten=static.whiten, rank_tol=static.rank_tol
    )
    Z = DenseDesign.raw(design.Z)  # the standardised, group-whitened design as an operator
    n = Z.shape[0]
    dtype = Z.dtype
    if static.n_classes is not None:
        Yt = jax.nn.one_hot(jnp.asarray(inputs.Y), static.n_classes, dtype=dtype)
    else:
        Yt = jnp.asarray(inputs.Y, dtype)
    T = Yt.shape[1]
    rel = None
    if inputs.weights is not None:  # validated by the front door
        w = jnp.asarray(inputs.weights).astype(dtype)
        rel = w * (jnp.asarray(n, dtype) / jnp.sum(w))
    transform = Transform(
        design.x_mean,
        design.x_scale,
        jnp.zeros((T,), dtype),
        jnp.ones((T,), dtype),
        design.basis,
        inputs.groups.index,
        inputs.groups.mask,
    )
    problem = GLMProblem(
        Z,
        Yt,
        design.live,
        design.metric_white,
        design.metric_std,
        inputs.groups,
        transform,
        jnp.asarray(inputs.l2, dtype),
        jnp.asarray(inputs.tol, dtype),
        jnp.asarray(inputs.max_iter, jnp.int32),
        jnp.asarray(inputs.criterion, jnp.int32),
        jnp.asarray(inputs.cost_sensitive, bool),
        rel,
        GLMConfig(static.loss, static.newton_solver),
    )
    return problem, _design_scale_vectors(inputs.summary)


def _check_design_scales(scales) -> None:
    """The scale checks of the build's design (skipped inside a user's jit)."""
    if any(is_traced(a) for a in jax.tree.leaves(scales)):
        return
    check_scales(*(None if a is None else np.asarray(a) for a in scales))


@partial(jit, static_argnames=("static",))
def _build_program(inputs: _GLMInputs, *, static: _GLMStatic):
    return _build(inputs, static)


@any_mesh
def glm_prepare(
    X,
    Y,
    groups=None,
    *,
    loss="logistic",
    l2=1e-3,
    criterion: str = "whiten",
    cost_sensitive: bool = True,
    whiten: bool = True,
    newton: NewtonOptions | None = None,
    n_classes=None,
    constant_columns: str = "inert",
    rank_tol=None,
    sample_weight=None,
    **deprecated,
) -> GLMProblem:
    """Validate, standardise and group-whiten the data of :func:`glm_omp` into a :class:`GLMProblem`.

    The GLM counterpart of :func:`jaxselect.prepare`: ``glm_omp(X, Y, groups, k, ...)`` equals
    ``glm_omp_run(glm_prepare(X, Y, groups, ...), k)`` (which it fuses into one compiled program).
    Takes the arguments of :func:`glm_omp` (see there) except ``k`` and ``progress``; the loss and
    the Newton solver are stored in the problem's static :class:`GLMConfig`, so
    :func:`glm_omp_init`, :func:`glm_omp_step` and :func:`glm_omp_run` take only the problem. One
    compiled program besides the front door's column summary. ``tol``, ``max_iter`` and
    ``newton_solver`` are deprecated spellings of ``newton=NewtonOptions(tol=..., max_iter=...,
    solver=...)`` (a DeprecationWarning each).

    >>> import numpy as np, jaxselect as js
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(100, 3)); y = (X[:, 1] > 0).astype(int)
    >>> problem = js.glm_prepare(X, y)
    >>> js.glm_omp_run(problem, 1).order.tolist()
    [1]
    """
    newton = _newton_options(newton, deprecated, "glm_prepare")
    inputs, static = _glm_inputs(
        X, Y, groups, loss=loss, l2=l2, criterion=criterion, cost_sensitive=cost_sensitive, whiten=whiten,
        newton=newton, n_classes=n_classes, constant_columns=constant_columns, rank_tol=rank_tol,
        sample_weight=sample_weight,
    )
    problem, scales = _build_program(inputs, static=static)
    _check_design_scales(scales)
    return problem


#: The older name of :func:`glm_prepare` (the same function).
glm_problem = glm_prepare


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
        null_loss=state.null_loss,
        null_intercept=state.null_intercept,
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
    state = _advance(problem, _empty_state(problem, capacity), jnp.zeros((), bool))
    return state._replace(null_loss=state.info.loss, null_intercept=state.info.b)


def glm_omp_step(problem: GLMProblem, state: GLMOMPState) -> GLMOMPState:
    """One step of Algorithm 3: score every remaining group at the current model, add the best, refit.

    Pure and jit-able (the loss and the Newton solver are the problem's static config). When no
    selectable group is left the step is empty: the state is unchanged (except ``step`` and
    ``info``) and the info's group is −1.

    Returns:
      The new :class:`GLMOMPState`; ``state.info`` is this step's :class:`GLMStepInfo`.
    """
    return _advance(problem, state, jnp.ones((), bool))


def _glm_finish(problem: GLMProblem, state: GLMOMPState, out: GLMStepInfo) -> SelectionPath:
    """The :class:`SelectionPath` of a finished run from its stacked :class:`GLMStepInfo`."""
    null_f, null_b = state.null_loss, state.null_intercept
    coef, offset = to_raw_coef(problem.transform, out.W)
    # SelectionPath.objective: 1 − L(G_j)/L(∅), the fraction of the null risk removed (0 when L(∅) ≤ 0)
    safe = jnp.where(null_f > 0, null_f, jnp.ones_like(null_f))
    objective = jnp.where(null_f > 0, 1.0 - out.loss / safe, jnp.zeros_like(out.loss))
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


def glm_omp_solver(capacity: int) -> Solver:
    """GLM OMP (Algorithm 3) as a :class:`~jaxselect.Solver` with ``capacity`` feature slots (static).

    ``init(problem)`` is :func:`glm_omp_init` (the fitted intercept-only model), ``step`` is
    :func:`glm_omp_step`, ``finish`` stacks the steps' :class:`GLMStepInfo` into the
    :class:`SelectionPath` (``info`` its :class:`GLMInfo`). The loss and the Newton solver are the
    problem's static :class:`GLMConfig`.
    """
    capacity = int(capacity)

    def init(problem):
        return glm_omp_init(problem, capacity)

    return Solver(init, glm_omp_step, _glm_finish, SolverTraits("glm_omp", stacks_info=True))


def glm_omp_run(problem: GLMProblem, k=None, *, progress: bool = False) -> SelectionPath:
    """Run k steps of GLM OMP on a :class:`GLMProblem` in one compiled program (the library's driver,
    :func:`jaxselect.solver.run`); returns the :class:`SelectionPath` (its ``info`` is the
    :class:`GLMInfo`).

    Args:
      problem: from :func:`glm_prepare`.
      k, progress: as in :func:`glm_omp`.

    >>> import numpy as np, jaxselect as js
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(100, 3)); y = (X[:, 2] > 0).astype(int)
    >>> problem = js.glm_prepare(X, y)           # validate, standardise, whiten: once
    >>> js.glm_omp_run(problem, 2).order.tolist()[0], js.glm_omp_run(problem).n_steps
    (2, 3)
    """
    if not isinstance(problem, GLMProblem):
        raise TypeError(f"expected a GLMProblem from glm_prepare(X, Y, groups, ...); got {type(problem).__name__}")
    steps, capacity = _glm_steps(problem.groups, problem.Z.shape[1], k, problem.live, "glm_omp_run")
    return run(glm_omp_solver(capacity), problem, n_steps=steps, progress=progress)


@partial(jit, static_argnames=("static", "capacity", "n_steps"))
def _glm_fit(inputs: _GLMInputs, *, static: _GLMStatic, capacity: int, n_steps: int):
    """:func:`glm_omp` in one program: the problem's build, the solver's steps and its finish."""
    problem, scales = _build(inputs, static)
    solver = glm_omp_solver(capacity)
    state, infos = iterate(solver, problem, solver.init(problem), n_steps)
    return solver.finish(problem, state, infos), scales


def _glm_steps(groups: Groups, n_features: int, k, live, who: str):
    """(steps, slot capacity) of a run of ``k`` steps (default all J; above the usable groups: the
    library's one rule, a ``UserWarning`` and every usable group kept)."""
    steps = groups.n_groups if k is None else clip_steps(k, groups, live, who)
    return steps, slot_capacity(groups.mask, steps, n_features)


@any_mesh
def glm_omp(
    X,
    Y,
    groups=None,
    k=None,
    *,
    loss="logistic",
    l2=1e-3,
    criterion: str = "whiten",
    cost_sensitive: bool = True,
    whiten: bool = True,
    newton: NewtonOptions | None = None,
    n_classes=None,
    constant_columns: str = "inert",
    rank_tol=None,
    sample_weight=None,
    progress: bool = False,
    **deprecated,
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
      k: number of groups to sequence (default None: all J; above the usable groups, a ``UserWarning``
        and every usable group kept); positional or keyword.
      loss: "logistic", "softmax", "squared" or a callable ``loss(scores (n, T), Y (n, T))``
        returning (n,) per-example losses (or their mean); smooth, convex, separable. A callable is
        a static argument: an equal function (e.g. the same lambda built afresh) is not recompiled.
      l2: λ ≥ 0: the risk is the mean loss + (λ/2)‖W‖² on the coefficients of the standardised,
        group-whitened features (the intercept is not penalised) — the library's one ``l2``.
        sklearn's ``LogisticRegression(C=…)`` on the same columns is ``λ = 1/(C·n)``. May be traced.
      criterion: "whiten" (Alg. 3 on whitened groups), "no_whiten" (gradient w.r.t. the merely
        standardised features) or "single" (its best single feature), as in :func:`cs_omp`.
      cost_sensitive: divide the criterion by c(g) (False: cost-blind G-OMP).
      whiten: group-whiten the design (the penalty then acts on whitened coefficients).
      newton: the damped Newton refit's options, a :class:`NewtonOptions` (``tol``, ``max_iter``,
        ``solver``; default ``NewtonOptions()``). The loose keywords ``tol``, ``max_iter`` and
        ``newton_solver`` still work for one release, with a DeprecationWarning.
      n_classes: softmax only: number of classes C (default max label + 1; required when Y is traced).
      constant_columns: "inert" (default): constant columns (max == min) are never selected and get
        coefficient 0 (a group made only of them is never selected); "raise": a ValueError names them.
      rank_tol: relative eigenvalue threshold of the whitening, as in :func:`jaxselect.prepare`.
      sample_weight: None or (n,) row weights ``w ≥ 0`` (at least 2 positive): the risk's mean
        loss becomes ``Σ_i w_i ℓ_i / Σw`` and the standardisation and whitening use weighted
        moments (as :func:`jaxselect.prepare`), so integer weights equal repeated rows and rows of
        weight 0 are absent — the weights of :func:`jaxselect.shard_rows` give the unpadded
        result. scikit-learn's ``LogisticRegression(C=…).fit(..., sample_weight=w)`` on the same
        columns is ``λ = 1/(C·Σw)``. A callable loss must then return per-example losses.
      progress: show a ``tqdm`` progress bar over the steps (needs the optional ``tqdm``, the
        ``[progress]`` extra); the steps then run in a few compiled chunks. Default False: one
        compiled program (the problem's build and every step; besides it, the front door's
        column summary).
      **deprecated: ``tol``, ``max_iter``, ``newton_solver`` (use ``newton``) and ``return_info``
        (the path always carries its :class:`GLMInfo` as ``path.info``; ``True`` still returns
        ``(path, path.info)``), each with a DeprecationWarning.

    Returns:
      A :class:`SelectionPath` of m = min(k, J) prefixes: raw-space ``coef`` (m, D, T) and
      ``intercept`` (m, T) of the linear scores (T = C classes for softmax), ``objective`` = the
      fraction ``1 − r(W_j)/r(W_0)`` of the intercept-only model's regularised risk removed
      (:class:`~jaxselect.SelectionPath`'s one definition),
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
    return_info = deprecated.pop("return_info", None)
    newton = _newton_options(newton, deprecated, "glm_omp")
    inputs, static = _glm_inputs(
        X, Y, groups, loss=loss, l2=l2, criterion=criterion, cost_sensitive=cost_sensitive, whiten=whiten,
        newton=newton, n_classes=n_classes, constant_columns=constant_columns, rank_tol=rank_tol,
        sample_weight=sample_weight,
    )
    steps, capacity = _glm_steps(inputs.groups, inputs.X.shape[1], k, inputs.summary.live, "glm_omp")
    if check_progress(progress):  # the build, then the steps in chunks with a bar between them
        problem, scales = _build_program(inputs, static=static)
        _check_design_scales(scales)
        path = run(glm_omp_solver(capacity), problem, n_steps=steps, progress=True)
    else:
        path, scales = _glm_fit(inputs, static=static, capacity=capacity, n_steps=steps)
        _check_design_scales(scales)
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
