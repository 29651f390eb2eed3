"""One iteration of FSA (Algorithm 1 of Barbu et al.) behind the library's solver protocol.

``fsa_init(problem, k, *, n_iter, mu, lr) -> FSAState`` and ``fsa_step(problem, state) -> FSAState``:
the loss, the optimizer and the other static options live in the problem's static
:class:`FSAConfig` (set once by :func:`~jaxselect.anneal.fsa_prepare`, never re-passed per step);
the priors ``l2``/``smoothness`` are (traceable) fields of the problem; the schedule M_e of eq. (3),
the iteration counter and the optimizer state (which holds the step η of the built-in rule) live in
the state. A step is a gradient step on

    F(c, b) = mean-loss(A c + b) + (l2/2) ‖c‖² + smoothness Σ_j ‖D₂ c_j‖²

through ``config.optimizer`` (an optax ``GradientTransformation``; by default
:func:`~jaxselect.anneal.gradient_descent`, eq. 2), then keep the ``M_e`` active variables with
the largest ‖c_j‖ (ties → lower index; a variable that left never returns).
:func:`~jaxselect.anneal.fsa` runs the same iteration (:func:`advance`) on compacted stages.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import losses as _losses
from .._repr import short_repr
from .._validation import as_hyper, check_float, check_int
from .design import FSADesign, gradient, n_params, scores
from .piecewise import smoothness_penalty
from .schedule import annealing_schedule
from .stepsize import WeightedTarget, power_iteration
from .update import gradient_descent

__all__ = ["FSAConfig", "FSAProblem", "FSAState", "fsa_init", "fsa_step", "advance"]

#: FSA's built-in losses and its classification ones (read off :data:`jaxselect.losses.LOSS_KINDS`)
LOSSES = _losses.loss_names(fsa=True)
CLASSIFICATION_LOSSES = _losses.loss_names(fsa=True, classification=True)
# power iterations of the default step's first (cold) estimate
_POWER_COLD = 12
# _DEFAULT_STEP_NOTE: for the three classification losses the default step uses the logistic
# curvature 1/4. It is the exact Lipschitz bound for the logistic loss (Theorem 2.1); the
# huberized hinge (bound 1/(2h) = 5) and Lorenz (bound 2) losses have the same bounded gradient
# |ℓ'| ≤ 1 and their large curvature lives only in a narrow band of margins, so their exact bound
# gives 20x / 8x smaller steps that converge too slowly for the schedule (the paper even uses a
# larger step, η = 1 for them); with 1/4 they recover the paper's Table II/III rows.


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class FSAConfig:
    """Static options of an FSA problem (hashable: part of a compiled program's cache key).

    Attributes:
      loss: the loss name of :func:`~jaxselect.fsa` or the user's callable.
      loss_fn: the callable ``loss(scores, target)`` the step differentiates (weighted mean for a
        :class:`~jaxselect.anneal.stepsize.WeightedTarget`).
      curvature: κ of the default step's Hessian bound (None: the exact score-space Hessian at 0).
      optimizer: the optax ``GradientTransformation`` of the update (default
        :func:`~jaxselect.anneal.gradient_descent`, whose state holds the step η).
      huber_h: h of the huberized hinge loss.
    """

    loss: Any
    loss_fn: Callable
    curvature: float | None
    optimizer: Any
    huber_h: float = 0.1

    @property
    def default_update(self) -> bool:
        """True when the update is plain gradient descent with its step held in the state."""
        return self.optimizer is gradient_descent()


class FSAProblem(NamedTuple):
    """Validated FSA data and options (:func:`~jaxselect.anneal.fsa_prepare`).

    Attributes:
      design: a :class:`~jaxselect.design.DesignOperator` over the standardized X (N, M) (the
        front door's :class:`~jaxselect.design.DenseDesign`: X with its column means and factors,
        0 on constant columns; any storage with the protocol's methods) or
        :class:`~jaxselect.anneal.design.PLDesign` (piecewise-linear encoding).
      target: what the loss takes: (N,) float targets (squared), (N,) float 0/1 labels
        (classification), ``(ij (P, 2) int32, r (P,))`` (ranking), the ``y`` given with a
        callable loss, or a :class:`~jaxselect.anneal.stepsize.WeightedTarget` of one of these.
      live: (M,) bool, False on constant columns (max == min), which are never selected.
      grid: :class:`~jaxselect.anneal.PLGrid` of the M features (None for linear learners).
      config: :class:`FSAConfig`, the static options (a pytree without leaves).
      l2: () ridge weight (mean loss + (l2/2)‖c‖²); may be traced.
      smoothness: () weight of the second-order prior of eq. (13); may be traced.
    """

    design: FSADesign
    target: Any
    live: jax.Array
    grid: Any
    config: FSAConfig
    l2: jax.Array
    smoothness: jax.Array


FSAProblem.__repr__ = short_repr


class FSAState(NamedTuple):
    """The carry of Algorithm 1 (:func:`fsa_init`, :func:`fsa_step`).

    Attributes:
      coef: (W, P) coefficients of the standardized (or centered PL) design, zero off ``active``.
      intercept: () intercept (standardized space: the mean score of the design is 0).
      active: (W,) bool, the variables kept so far.
      opt_state: the state of ``problem.config.optimizer`` (for the default rule a
        :class:`~jaxselect.anneal.StepState` holding the step η).
      iteration: () int32, the number of steps taken.
      schedule: (n_iter,) int32, M_e of eq. (3); step e keeps ``schedule[min(e, n_iter − 1)]``.
      objective: () F at the state the last step started from (NaN before the first step).
    """

    coef: jax.Array
    intercept: jax.Array
    active: jax.Array
    opt_state: Any
    iteration: jax.Array
    schedule: jax.Array
    objective: jax.Array


FSAState.__repr__ = short_repr


class Params(NamedTuple):
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


def check_loss(loss) -> None:
    """A loss name of :data:`LOSSES` or a callable, else ValueError."""
    if not callable(loss) and (not isinstance(loss, str) or loss not in LOSSES):
        raise ValueError(f"loss must be one of {LOSSES} or a callable loss(scores, y); got {loss!r}")


def resolve_loss(loss, huber_h: float, weighted: bool = False):
    """``(loss_fn, curvature)``: a canonical callable (stable across calls) and the κ of the
    default step (None: the exact score-space Hessian at zero, see :mod:`.stepsize`). ``weighted``:
    the loss of a :class:`WeightedTarget` (built-in losses only)."""
    from .._static import canonical

    check_loss(loss)
    if weighted:
        if callable(loss):
            raise ValueError(
                "sample_weight needs a built-in loss name; a callable loss(scores, y) returns a mean that "
                "cannot be weighted — put the weights inside your callable instead"
            )
        loss_fn = _weighted_loss(loss, float(huber_h) if loss == "huber_hinge" else 0.0)
        curvature = None if loss == "ranking" else resolve_loss(loss, huber_h)[1]
        return loss_fn, curvature
    if callable(loss):
        return canonical(loss), None  # a fresh-but-equal lambda reuses the compiled run
    if loss == "squared":
        return _losses.squared_loss, 1.0
    if loss in CLASSIFICATION_LOSSES:
        fn = {"logistic": _losses.logistic_loss, "lorenz": _losses.lorenz_loss}.get(loss) or _huber(float(huber_h))
        return fn, _losses.curvature("logistic")  # see _DEFAULT_STEP_NOTE
    return _losses.ranking_loss, None


def check_optimizer(optimizer):
    if optimizer is not None and not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
        raise TypeError(f"optimizer must be an optax.GradientTransformation; got {type(optimizer).__name__}")


def make_config(loss, huber_h: float, optimizer, weighted: bool) -> FSAConfig:
    """The :class:`FSAConfig` of validated options (``optimizer`` None: the built-in rule)."""
    from .._static import canonical

    check_optimizer(optimizer)
    loss_fn, curvature = resolve_loss(loss, huber_h, weighted=weighted)
    optimizer = gradient_descent() if optimizer is None else canonical(optimizer)  # equal optimizers: one program
    key = loss if isinstance(loss, str) else loss_fn
    return FSAConfig(key, loss_fn, curvature, optimizer, float(huber_h))


# --------------------------------------------------------------------------- oracles
def prior(coef, l2, smooth):
    return 0.5 * l2 * jnp.sum(coef * coef) + smooth * smoothness_penalty(coef)


def direct_oracle(design: FSADesign, target, loss_fn):
    """(value, coef-gradient, intercept-gradient) of the mean loss by passes over the data."""

    def oracle(coef, intercept):
        dtype = coef.dtype
        s = scores(design, coef) + intercept
        val, u = jax.value_and_grad(lambda s: jnp.asarray(loss_fn(s, target), dtype))(s)
        return val, gradient(design, u), jnp.sum(u)

    return oracle


class MomentOracle(NamedTuple):
    """Moment-space oracle for the squared loss on a standardized linear design (a pytree).

    With ``G = AᵀA/N`` (``design.gram``), ``c = Aᵀy/N`` (A centered), ``ȳ = mean y``,
    ``v = mean (y − ȳ)²``: ``½ mean (A β + b − y)² = ½ (βᵀGβ − 2cᵀβ + v + (b − ȳ)²)``, gradient
    ``(Gβ − c, b − ȳ)`` — the same iterates as :func:`direct_oracle` in exact arithmetic, at O(W²)
    per iteration after one O(N W²) Gram product (:func:`moment_oracle`). Used for the long narrow
    stages at the end of the schedule.
    """

    gram: jax.Array
    cross: jax.Array
    ybar: jax.Array
    vy: jax.Array

    def __call__(self, coef, intercept):
        beta = coef[:, 0]
        gb = self.gram @ beta
        delta = intercept - self.ybar
        val = 0.5 * (jnp.dot(beta, gb) - 2.0 * jnp.dot(self.cross, beta) + self.vy + delta * delta)
        return val, (gb - self.cross)[:, None], delta


def moment_oracle(design, y) -> MomentOracle:
    """The :class:`MomentOracle` of a linear design operator and the squared loss's target.
    Weighted: the moments of ``diag(rel)`` (``rel`` has mean 1, so ``Σ rel = N``)."""
    rel = None
    if isinstance(y, WeightedTarget):
        y, rel = y.value, y.rel.astype(y.value.dtype)
    n = jnp.asarray(y.shape[0], y.dtype)
    ybar = jnp.mean(y) if rel is None else jnp.mean(rel * y)
    yc = y - ybar
    gram = design.gram(rel)
    cross = design.rmv(yc if rel is None else rel * yc) / n
    vy = jnp.mean(yc * yc) if rel is None else jnp.mean(rel * yc * yc)
    return MomentOracle(gram, cross, ybar, vy)


#: the moment oracle under its former name
gram_oracle = moment_oracle


def keep_largest(coef, active, n_keep):
    """Keep the ``n_keep`` active variables with the largest ‖coef_j‖ (ties → lower index first)."""
    width = active.shape[0]

    def prune(active):
        score = jnp.where(active, jnp.sum(coef * coef, axis=1), -jnp.ones((), coef.dtype))
        order = jnp.argsort(-score, stable=True)
        rank = jnp.zeros((width,), jnp.int32).at[order].set(jnp.arange(width, dtype=jnp.int32))
        return (rank < n_keep) & active  # a killed (or inert) variable never comes back

    # most iterations keep every active variable (the schedule drops below the active count at a
    # few of them): the sort only runs where it prunes
    return jax.lax.cond(jnp.sum(active, dtype=jnp.int32) > n_keep, prune, lambda a: a, active)


def advance(oracle, problem: FSAProblem, state: FSAState) -> FSAState:
    """One iteration of Algorithm 1 with a given value/gradient oracle (see :func:`fsa_step`)."""
    dtype = state.coef.dtype
    n_sched = state.schedule.shape[0]
    n_keep = jnp.take(state.schedule, jnp.minimum(state.iteration, n_sched - 1))
    mask = state.active[:, None].astype(dtype)
    val, g_coef, g_icpt = oracle(state.coef, state.intercept)
    pval, pgrad = jax.value_and_grad(prior)(state.coef, problem.l2.astype(dtype), problem.smoothness.astype(dtype))
    g_coef = (g_coef + pgrad) * mask
    params = Params(state.coef, state.intercept)
    updates, opt_state = problem.config.optimizer.update(Params(g_coef, g_icpt), state.opt_state, params)
    coef = (state.coef + jnp.asarray(updates[0]).astype(dtype)) * mask
    intercept = state.intercept + jnp.asarray(updates[1]).astype(dtype)
    active = keep_largest(coef, state.active, n_keep)
    coef = coef * active[:, None].astype(dtype)
    return FSAState(coef, intercept, active, opt_state, state.iteration + 1, state.schedule, val + pval)


def design_shape(design: FSADesign):
    """``(P, dtype)`` of a design's coefficients."""
    return n_params(design), design.dtype


def default_step(problem: FSAProblem, v_coef, v_icpt, n_power, lam=None):
    """The scale-free step ``1/L`` of :mod:`.stepsize` by ``n_power`` power iterations from
    ``(v_coef, v_icpt)``; returns ``(step, lam, v_coef, v_icpt)`` (the step is not differentiated)."""
    cfg = problem.config
    dtype = v_coef.dtype
    design, target = jax.lax.stop_gradient((problem.design, problem.target))
    lam, v_coef, v_icpt = power_iteration(
        design, target, v_coef, v_icpt, loss_fn=cfg.loss_fn, curvature=cfg.curvature, n_power=n_power, lam=lam
    )
    extra = problem.l2.astype(dtype) + jnp.asarray(32.0, dtype) * problem.smoothness.astype(dtype)
    return jax.lax.stop_gradient(1.0 / (lam + extra)), lam, v_coef, v_icpt


def start_vector(m: int, p: int, dtype):
    """The power iteration's (fixed, seeded) start vector ``1 + N(0, 1)`` of shape (m, p)."""
    return 1.0 + jax.random.normal(jax.random.PRNGKey(0), (m, p), dtype)


# --------------------------------------------------------------------------- the protocol
def fsa_init(problem: FSAProblem, k: int, *, n_iter: int = 500, mu: float = 300.0, lr=None) -> FSAState:
    """The state of Algorithm 1 before its first iteration: β = 0, b = 0, every non-constant column
    active, the schedule M_e of eq. (3), and ``optimizer.init`` of the problem's optimizer.

    Args:
      problem: :class:`FSAProblem` from :func:`~jaxselect.anneal.fsa_prepare`.
      k: the number of features kept at the end (1 ≤ k ≤ M).
      n_iter: N_iter ≥ 1, the length of the schedule.
      mu: annealing rate μ ≥ 0 of eq. (3).
      lr: the gradient step η > 0 of the built-in rule (may be traced). Default: ``1/L`` of the
        full problem by power iteration (:mod:`.stepsize`). Not allowed with an optax optimizer
        (which holds its own learning rate).

    Returns:
      :class:`FSAState`. Pure in ``problem`` and ``lr``: ``jax.jit(fsa_init, static_argnums=1,
      static_argnames=("n_iter", "mu"))`` works.
    """
    m = problem.live.shape[0]
    k = check_int(k, "k", low=1, high=m)
    n_iter = check_int(n_iter, "n_iter", low=1)
    mu = check_float(mu, "mu", low=0.0)
    schedule = jnp.asarray(annealing_schedule(m, k, n_iter, mu).astype(np.int32))
    return _init_state(problem, schedule, lr)


def _init_state(problem: FSAProblem, schedule, lr) -> FSAState:
    cfg = problem.config
    p, dtype = design_shape(problem.design)
    m = problem.live.shape[0]
    coef = jnp.zeros((m, p), dtype)
    intercept = jnp.zeros((), dtype)
    opt_state = cfg.optimizer.init(Params(coef, intercept))
    if lr is not None and not cfg.default_update:
        raise ValueError("give either lr (plain gradient descent) or an optax optimizer, not both")
    if cfg.default_update:
        if lr is None:
            step = default_step(problem, start_vector(m, p, dtype), jnp.ones((), dtype), _POWER_COLD)[0]
        else:
            step = as_hyper(lr, "lr", dtype, low=0.0, strict_low=True)
        opt_state = opt_state._replace(step=step)
    zero = jnp.zeros((), jnp.int32)
    return FSAState(
        coef, intercept, jnp.asarray(problem.live).astype(bool), opt_state, zero, schedule, jnp.full((), jnp.nan, dtype)
    )


def fsa_step(problem: FSAProblem, state: FSAState) -> FSAState:
    """One iteration of Algorithm 1: an update of F, then keep the ``M_e`` largest.

    ``(c, b) ← (c, b) + optimizer.update(∇F)`` on the active variables (by default
    ``c ← c − η ∇_c F``, eq. 2, with η in ``state.opt_state.step``), then only the
    ``schedule[iteration]`` active variables with the largest ‖c_j‖ stay active (ties → lower
    index; a variable that left never returns), the others are set to 0.
    ``F = mean-loss + (l2/2)‖c‖² + smoothness·Σ‖D₂c_j‖²`` as in :func:`~jaxselect.fsa`; every
    option comes from ``problem`` (its static :class:`FSAConfig`, its ``l2``/``smoothness``) and
    ``state``. Pure and jit-able: ``n_iter`` steps (a ``lax.fori_loop``) run FSA on the full
    width; :func:`~jaxselect.fsa` gives the same iterates on a compacted problem.

    Args:
      problem: :class:`FSAProblem` from :func:`~jaxselect.anneal.fsa_prepare`.
      state: :class:`FSAState` (from :func:`fsa_init` or the previous step).

    Returns:
      The next :class:`FSAState`; its ``objective`` is F at the state the step started from.

    >>> import numpy as np, jax
    >>> from jaxselect.anneal import fsa_init, fsa_prepare, fsa_step
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((100, 8)); y = X[:, 2] - X[:, 5]
    >>> problem = fsa_prepare(X, y)
    >>> state = fsa_init(problem, 2, n_iter=50, mu=10.0, lr=0.5)
    >>> state = jax.jit(lambda p, s: jax.lax.fori_loop(0, 50, lambda i, s: fsa_step(p, s), s))(problem, state)
    >>> np.flatnonzero(state.active).tolist(), int(state.iteration)
    ([2, 5], 50)
    """
    oracle = direct_oracle(problem.design, problem.target, problem.config.loss_fn)
    return advance(oracle, problem, state)
