"""FSA's last step: the fit on the final support, run to a tolerance (the "polish").

The annealing schedule of :func:`~jaxselect.fsa` ends with the k survivors and the last
fixed-step gradient iterate, which is not the minimiser of the objective on that support (a
logistic fit may sit at two thirds of its converged coefficients). :func:`polish` starts from
that iterate and minimises the same objective on the same support,

    F(c, b) = mean-loss(A_S c + b) + (l2/2) ‖c‖² + smoothness Σ_j ‖D₂ c_j‖²,

with A_S the final support's standardized columns (linear learners) or centred PL responses, the
same loss, sample weights and priors, until ``max|∇F| ≤ tol·σ`` (σ the scale of
:mod:`jaxselect.newton`: 1 for labels, the target spread for the squared loss) or ``max_iter``
iterations. The support does not change.

With ``l1 = λ > 0`` (linear learners) the polish minimises ``F(c, b) + λ‖c‖₁`` instead — the
L1 (lasso) shrinkage of the final support, warm-started from the schedule's iterate — by OWL-QN
(:mod:`.owlqn`; on the operator path in the preconditioned coordinates, where the penalty is
``Σ_j (λ/s_j)|z_j|``); coefficients may end exactly 0 inside the support, and the stopping rule
is ``max|◇(F + λ‖c‖₁)| ≤ min(tol·σ, λ/2)`` on the minimum-norm subgradient ◇ (the bound λ/2
resolves the penalty: from a converged ridge start, ``tol·σ`` alone may already hold when λ is
of the order of the tolerance, as ``λ ≈ 1/(C·N)`` is on large N).

Solvers. Linear learners with a pointwise built-in loss go through a Levenberg–Marquardt-damped
Newton solve (Cholesky steps, the damping down to 1e-9 of the curvature after accepted steps, so a
Newton step on a determined support and a step in the range of the rows on an underdetermined
one), or above 255 coefficients the library's damped Newton solver with CG steps
(:func:`jaxselect.newton.glm_newton`, Armijo backtracking): squared
and logistic are C², the huberized hinge is C¹ with a piecewise constant (generalised) second
derivative ≥ 0, and the Lorenz loss is C¹ and non-convex — its negative curvature (margins below
0) is clipped to 0, so the step solves a positive semi-definite model (a modified Newton step,
still a descent direction with the line search). The ranking loss (pairs, not pointwise),
piecewise-linear learners (B + 1 coefficients per feature and the smoothness prior) and callable
losses use L-BFGS (``optax.lbfgs``, zoom line search) on the same F; an ``l1`` polish uses OWL-QN
for every loss.

The polished point never has a larger F than the start: a solve that ends at a larger or
non-finite F returns the start with NOT_CONVERGED. Derivatives of the result with respect to the
data and ``l2`` come from the implicit function theorem (``jax.lax.custom_root``: one linear solve
with the Hessian on the support — with ``l1``, on its non-zero coefficients, the zeros held), not
from the iterations.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from .._repr import short_repr
from ..losses import loss_names, GLMLoss, huber_hinge_margin, logistic_margin, lorenz_margin, signed_labels
from ..newton import choose_solver, glm_newton, gradient_scale
from ..design import SparseDesign
from ..design.sparse import pad_entries, square_sums
from .._validation import is_traced
from ..status import NONFINITE, NOT_CONVERGED
from .design import PLDesign
from .owlqn import owlqn
from .step import FSAProblem, prior
from .stepsize import WeightedTarget
from ..programs import jit

__all__ = [
    "DENSE_SUPPORT_BYTES", "PolishResult", "polish", "polish_prepared", "polish_problem", "polish_tol", "support_design", "POLISH_MAX_ITER", "NEWTON_LOSSES",
]

#: Default cap on the polish's iterations (Newton steps, or L-BFGS updates).
POLISH_MAX_ITER = 100
#: Losses whose polish is the damped Newton solver on linear learners (the others use L-BFGS).
NEWTON_LOSSES = loss_names(fsa=True, pointwise=True)
_MARGINS = {"logistic": logistic_margin, "lorenz": lorenz_margin}


def polish_tol(dtype) -> float:
    """Default gradient tolerance of the polish (relative to σ): 1e-5 in float32, 1e-9 in float64.

    Tighter than :func:`jaxselect.newton.default_tol` (1e-4 / 1e-7, the refits' default): at 1e-4
    a weakly curved logistic fit still sits ~1 % from its minimiser, and the few extra Newton
    steps (quadratic convergence) cost little next to the schedule; float32 Newton reached 1e-7
    on 2·10⁵-row logistic, Lorenz and huberized-hinge problems.
    """
    return 1e-9 if jnp.dtype(dtype) == jnp.float64 else 1e-5


class PolishResult(NamedTuple):
    """What :func:`polish` returns (at the width W of the columns it was given).

    Attributes:
      coef: (W, P) coefficients of the standardized (or centred PL) design, 0 off ``active``.
      intercept: () intercept (standardized space).
      n_iter: () int32 accepted Newton steps, or L-BFGS updates.
      converged: () bool, ``max|∇F| ≤ tol·σ`` at the returned point.
      status: () int32 flags of :mod:`jaxselect.status`: 0, NOT_CONVERGED (4: the cap was reached,
        the solve stalled, or it ended above the start's F and the start was kept) or NONFINITE (1).
      objective: () F at the returned point; start_objective: () F at the start.
    """

    coef: jax.Array
    intercept: jax.Array
    n_iter: jax.Array
    converged: jax.Array
    status: jax.Array
    objective: jax.Array
    start_objective: jax.Array


PolishResult.__repr__ = short_repr


# --------------------------------------------------------------------------- the support's design
#: A sparse design's support is polished densely (damped Newton on the (N, W) standardized
#: columns) when those columns fit in this many bytes, else through the operator (preconditioned
#: L-BFGS on the compacted sparse columns: memory O(their entries + N + W), see :func:`polish`).
DENSE_SUPPORT_BYTES = 1 << 29


def support_design(design, cols, compacted: bool = False):
    """The columns ``cols`` (W,) of an FSA design, for the polish: a dense standardized (N, W)
    array for linear learners (centred, scaled, 0 on constant columns), the
    :class:`~jaxselect.anneal.design.PLDesign` of those features for PL learners; with
    ``compacted`` the design is already the support (the compacted
    :class:`~jaxselect.design.SparseDesign` of :func:`polish`'s operator path) and is returned as is.

    The one place where the polish reads the FSA problem's design.
    """
    if isinstance(design, PLDesign):
        return design.compact(cols)
    if compacted:
        return design  # compacted by polish(): column i is cols[i]
    return design.take(cols).materialize()


def _scores(design_s, coef, operator: bool):
    """Scores on the support: a PL design's, the compacted operator's (``operator``), or the dense
    support columns' (:func:`support_design`)."""
    if isinstance(design_s, PLDesign):
        return design_s.mv(coef)
    if operator:
        return design_s.mv(coef[:, 0])
    return design_s @ coef[:, 0]


def _column_curvature(op: SparseDesign, rel, l2):
    """(W,) ``Σ_i r_i Z_ij² / N + l2`` of the standardized sparse columns Z (r the relative row
    weights, 1 without weights): the diagonal preconditioner of the operator polish (floored, so a
    cancelled or inert column gets 1)."""
    n = op.n_rows
    r = jnp.ones((n,), op.dtype) if rel is None else rel.astype(op.dtype)
    raw = op._replace(mean=jnp.zeros_like(op.mean), factor=jnp.ones_like(op.factor))
    s1 = raw.rmv(r)  # Σ r x
    s2 = square_sums(op, r)  # Σ r x², blockwise
    total = jnp.sum(r)
    second = (s2 - 2.0 * op.mean * s1 + total * op.mean * op.mean) * op.factor * op.factor / jnp.asarray(n, op.dtype)
    tiny = jnp.asarray(jnp.finfo(op.dtype).eps, op.dtype)
    return jnp.where(second > tiny, second, jnp.ones_like(second)) + l2


# --------------------------------------------------------------------------- losses
def _pointwise(name: str, h: float, rel) -> GLMLoss:
    """The per-example value, score gradient and (non-negative) curvature of a built-in loss, on
    (N, 1) scores and labels/targets; ``rel`` (N,) relative weights of mean 1, or None."""
    if name == "squared":
        parts = GLMLoss(
            lambda S, Y: 0.5 * jnp.sum((S - Y) ** 2, axis=1),
            lambda S, Y: S - Y,
            lambda S, Y: jnp.ones(S.shape + (1,), S.dtype),
        )
    else:
        margin = _MARGINS.get(name) or functools.partial(huber_hinge_margin, h=h)
        d1 = jax.grad(lambda m: jnp.sum(margin(m)))  # elementwise ℓ'

        def value(S, Y):
            return margin(signed_labels(Y, S.dtype) * S)[:, 0]

        def grad(S, Y):
            sign = signed_labels(Y, S.dtype)
            return sign * d1(sign * S)

        def hess(S, Y):
            m = signed_labels(Y, S.dtype) * S
            curv = jax.jvp(d1, (m,), (jnp.ones_like(m),))[1]
            return jnp.maximum(curv, jnp.zeros_like(curv))[:, :, None]  # Lorenz: clip negative curvature

        parts = GLMLoss(value, grad, hess)
    if rel is None:
        return parts
    return GLMLoss(
        lambda S, Y: rel * parts.value(S, Y),
        lambda S, Y: rel[:, None] * parts.grad(S, Y),
        lambda S, Y: rel[:, None, None] * parts.hess(S, Y),
    )


def _gradient_scale(loss_fn, target, n: int, dtype):
    """σ = max(1, RMS spread of the per-example score gradient ``N ∂F/∂s_i`` at zero scores) —
    :func:`jaxselect.newton.gradient_scale` for any loss (1 for labels, the target spread for
    the squared loss)."""
    g0 = jax.grad(lambda s: jnp.asarray(loss_fn(s, target), dtype))(jnp.zeros((n,), dtype))
    g0 = g0 * jnp.asarray(n, dtype)
    spread = g0 - jnp.mean(g0)
    return jnp.maximum(jnp.ones((), dtype), jnp.sqrt(jnp.mean(spread * spread)))


# --------------------------------------------------------------------------- solvers
def _newton(problem: FSAProblem, Z, coef, intercept, active, tol, max_iter):
    cfg = problem.config
    target = problem.target
    rel = None
    if isinstance(target, WeightedTarget):
        target, rel = target.value, target.rel.astype(Z.dtype)
    parts = _pointwise(cfg.loss, cfg.huber_h, rel)
    Y = jnp.asarray(target).astype(Z.dtype)[:, None]
    width = Z.shape[1]
    l2 = problem.l2.astype(Z.dtype)
    solver = choose_solver("auto", width + 1)

    if solver != "cholesky":  # wide supports: CG steps, no (W+1)² matrix
        res = glm_newton(Z, Y, coef, intercept[None], active, l2, parts, tol=tol, max_iter=max_iter, solver=solver)
        return res.V, res.b[0], res.info.n_iter, res.info.status
    # one Levenberg–Marquardt-damped Newton solve for every support that fits a Cholesky factor:
    # on a determined support its damping falls to 1e-9 of the curvature within a few accepted
    # steps (a Newton step in all but rounding), on an underdetermined one it keeps the steps in
    # the range of the rows; one loop instead of the undamped solver, a rank test and both
    # branches (a third of FSA's first-call compile, issue 35)
    return _lm_newton(Z, Y, coef, intercept, active, l2, parts, tol, max_iter)


#: Levenberg–Marquardt damping of the polish: the first μ, its floor and ceiling (relative to the
#: largest diagonal entry of the Hessian); a refused step multiplies μ by _LM_UP, an accepted one
#: divides it by _LM_DOWN
_LM_START, _LM_FLOOR, _LM_CEIL, _LM_UP, _LM_DOWN = 1e-6, 1e-9, 1e6, 10.0, 10.0


def _lm_newton(Z, Y, coef, intercept, active, l2, parts: GLMLoss, tol, max_iter):
    """Levenberg–Marquardt-damped Newton on ``F(c, b) = mean ℓ(Zc + b) + (l2/2)‖c_active‖²``
    (one score column), from ``(coef (W, 1), intercept)``; ``(c, b, n_iter, status)``.

    Each step solves ``(H + μ·d·I) s = −g`` (d the largest diagonal entry of H, the moving
    coordinates only) by Cholesky and is accepted when F decreases — or, near the optimum where the
    decrease falls below F's rounding, when F rises by at most ``16·eps·|F|`` while ``max|g|``
    decreases (as :func:`jaxselect.newton.glm_newton`); μ ← μ/10 after an accepted step (down to
    10⁻⁹), μ ← 10μ after a refused one (a refusal at μ = 10⁶ stops: stalled at round-off).
    The damping keeps each step in the range of the data: on an underdetermined support (fewer
    distinct rows than columns, ``l2 = 0``) H is singular and the undamped step's component along
    its null space is rounding noise divided by the jitter, so the fits of weighted rows and of the
    same rows repeated landed on different minimisers; the damped steps move from the same start
    to the same one (scikit-learn's ``check_sample_weight_equivalence``, issue 37)."""
    n, width = Z.shape
    dtype = Z.dtype
    nf = jnp.asarray(n, dtype)
    m = width + 1
    eps = jnp.finfo(dtype).eps
    free = jnp.concatenate([active, jnp.ones((1,), bool)])
    pen = jnp.concatenate([active.astype(dtype), jnp.zeros((1,), dtype)])
    A = jnp.concatenate([Z, jnp.ones((n, 1), dtype)], axis=1)  # (n, W+1)
    gtol = tol * gradient_scale(Y, parts)

    def f_g(theta):
        s = A @ theta
        f = jnp.mean(parts.value(s[:, None], Y)) + 0.5 * l2 * jnp.sum(pen * theta * theta)
        u = parts.grad(s[:, None], Y)[:, 0]
        g = jnp.where(free, (u @ A) / nf + l2 * pen * theta, jnp.zeros((), dtype))
        return f, g, jnp.max(jnp.abs(g))

    def hessian(theta):
        h = parts.hess((A @ theta)[:, None], Y)[:, 0, 0]  # (n,) curvature ≥ 0 (Lorenz: clipped)
        H = (A * (h / nf)[:, None]).T @ A + jnp.diag(l2 * pen)
        H = jnp.where(free[:, None] & free[None, :], H, jnp.zeros((), dtype))
        return 0.5 * (H + H.T) + jnp.diag(jnp.where(free, jnp.zeros((), dtype), jnp.ones((), dtype)))

    class Carry(NamedTuple):
        theta: jax.Array
        f: jax.Array
        g: jax.Array
        gmax: jax.Array
        mu: jax.Array
        it: jax.Array
        stalled: jax.Array

    def cond(c):
        return (c.it < max_iter) & (c.gmax > gtol) & ~c.stalled & jnp.isfinite(c.f)

    def body(c):
        H = hessian(c.theta)
        d = jnp.maximum(jnp.max(jnp.where(free, jnp.diagonal(H), jnp.zeros((), dtype))), jnp.finfo(dtype).tiny)
        L = jnp.linalg.cholesky(H + (c.mu * d) * jnp.eye(m, dtype=dtype))
        step = jnp.where(free, -jax.scipy.linalg.cho_solve((L, True), c.g), jnp.zeros((), dtype))
        f1, g1, gmax1 = f_g(c.theta + step)
        decrease = f1 < c.f
        rounding = (f1 <= c.f + 16 * eps * jnp.abs(c.f)) & (gmax1 < c.gmax)
        ok = jnp.isfinite(f1) & jnp.isfinite(gmax1) & jnp.all(jnp.isfinite(step)) & (decrease | rounding)
        keep = lambda new, old: jnp.where(ok, new, old)  # noqa: E731
        mu = jnp.where(ok, jnp.maximum(c.mu / _LM_DOWN, _LM_FLOOR), c.mu * _LM_UP)
        stalled = ~ok & (c.mu >= _LM_CEIL)
        return Carry(keep(c.theta + step, c.theta), keep(f1, c.f), keep(g1, c.g), keep(gmax1, c.gmax),
                     jnp.minimum(mu, _LM_CEIL).astype(dtype), c.it + ok.astype(jnp.int32), stalled)

    theta0 = jnp.concatenate([coef[:, 0] * active.astype(dtype), intercept[None]])
    f0, g0, gmax0 = f_g(theta0)
    init = Carry(theta0, f0, g0, gmax0, jnp.asarray(_LM_START, dtype), jnp.zeros((), jnp.int32), jnp.zeros((), bool))
    c = jax.lax.while_loop(cond, body, init)
    finite = jnp.isfinite(c.f) & jnp.isfinite(c.gmax)
    status = jnp.where(finite, jnp.where(c.gmax <= gtol, 0, NOT_CONVERGED), NONFINITE).astype(jnp.int32)
    return c.theta[:width, None], c.theta[width], c.it, status


def _lbfgs(objective, free, theta0, gtol, max_iter, metric=None):
    """L-BFGS (optax, zoom line search) on ``objective(θ)`` over the ``free`` coordinates until
    ``max|metric ⊙ ∇| ≤ gtol`` (``metric`` (P,) positive, default 1: the gradient in the original
    variables when θ is a rescaling of them), ``max_iter`` updates, or a non-finite value.
    Returns ``(θ, n_iter, status)``."""
    solver = optax.lbfgs()
    metric = jnp.ones_like(theta0) if metric is None else metric

    def gnorm(g):
        return jnp.max(jnp.abs(metric * g))

    def value_and_grad(theta):
        f, g = jax.value_and_grad(objective)(theta)
        return f, jnp.where(free, g, jnp.zeros_like(g))

    def cond(c):
        _, _, _, gmax, it, f = c
        return (it < max_iter) & (gmax > gtol) & jnp.isfinite(gmax) & jnp.isfinite(f)

    def body(c):
        theta, state, g, _, it, f = c
        with jax.numpy_dtype_promotion("standard"):  # third-party code (optax's counters)
            updates, state = solver.update(g, state, theta, value=f, grad=g, value_fn=objective)
        theta = theta + jnp.where(free, updates, jnp.zeros_like(updates)).astype(theta.dtype)
        f, g = value_and_grad(theta)
        return theta, state, g, gnorm(g), it + 1, f

    with jax.numpy_dtype_promotion("standard"):
        state0 = solver.init(theta0)
    f0, g0 = value_and_grad(theta0)
    init = (theta0, state0, g0, gnorm(g0), jnp.zeros((), jnp.int32), f0)
    theta, _, _, gmax, it, f = jax.lax.while_loop(cond, body, init)
    finite = jnp.isfinite(f) & jnp.isfinite(gmax)
    status = jnp.where(finite, jnp.where(gmax <= gtol, 0, NOT_CONVERGED), NONFINITE)
    return theta, it, status.astype(jnp.int32)


# --------------------------------------------------------------------------- the polish
def polish(problem: FSAProblem, cols, coef, intercept, active, tol, max_iter, *, dense_bytes=None, l1=None) -> PolishResult:
    """Minimise FSA's objective on a fixed support, from the schedule's last iterate.

    Pure; the solve is jitted and compiles once per shape (N, M, W, P; for the operator path the
    k-bucket of the support's stored entries) and static options of ``problem`` (loss, weighting,
    learner kind): ``tol``, ``max_iter``, ``l2`` and ``smoothness`` are data.

    A sparse design (:class:`~jaxselect.design.SparseDesign`, concrete) whose dense support
    columns (N × W) exceed ``dense_bytes`` is polished through the operator: the support is
    compacted to its own stored entries (padded to :func:`~jaxselect.design.sparse.nnz_bucket`)
    and F minimised by L-BFGS on the coefficients rescaled by the columns' curvature
    ``√(Σ_i r_i Z_ij²/N + l2)`` (a diagonal preconditioner; the stopping rule stays
    ``max|∇F| ≤ tol·σ`` in the original coefficients). Memory: the support's entries, O(N + W)
    vectors and L-BFGS's history, never the dense (N, W) columns.

    Args:
      problem: the :class:`~jaxselect.anneal.FSAProblem` at full width M (its design, target,
        weights, loss and priors).
      cols: (W,) int32 the original column index of each of the W coefficients.
      coef: (W, P) start, 0 off ``active`` (the schedule's last iterate at width W).
      intercept: () start intercept.
      active: (W,) bool the support: only these coefficients (and the intercept) move.
      tol: () gradient tolerance relative to σ (:func:`jaxselect.newton.default_tol`).
      max_iter: () int32 cap on the iterations.
      dense_bytes: the dense-support budget of a sparse design (default
        :data:`DENSE_SUPPORT_BYTES`; 0 always takes the operator path).
      l1: None, or () λ ≥ 0 of the L1 polish ``F + λ‖c‖₁`` (linear learners; see the module
        docstring); ``objective`` and ``start_objective`` then include λ‖c‖₁.

    Returns:
      :class:`PolishResult`.
    """
    target, compacted = polish_problem(problem, cols, dense_bytes=dense_bytes)
    return polish_prepared(target, cols, coef, intercept, active, tol, max_iter, compacted, l1)


def polish_problem(problem: FSAProblem, cols, *, dense_bytes=None):
    """``(problem, compacted)``: the problem :func:`polish` solves — ``problem`` itself, or, for a
    concrete :class:`~jaxselect.design.SparseDesign` whose dense support columns exceed
    ``dense_bytes``, the problem on the support's own stored entries (``compacted`` True). It no
    longer refers to the full design, so a caller that drops its own references to that design
    before :func:`polish_prepared` frees X's entries during the polish."""
    design = problem.design
    if not is_traced(cols) and compacts_support(design, int(cols.shape[0]), dense_bytes):
        support = pad_entries(design.compact(cols, pad=True))
        return problem._replace(design=support), True
    return problem, False


def compacts_support(design, width: int, dense_bytes=None) -> bool:
    """The polish of a support of ``width`` columns runs on the support's own stored entries
    (:func:`polish_problem`): a concrete sparse design whose dense support columns exceed
    ``dense_bytes`` (default :data:`DENSE_SUPPORT_BYTES`)."""
    limit = DENSE_SUPPORT_BYTES if dense_bytes is None else int(dense_bytes)
    return (
        design.sparse and not is_traced(design)
        and design.n_rows * width * design.dtype.itemsize > limit
    )


def polish_prepared(problem: FSAProblem, cols, coef, intercept, active, tol, max_iter, compacted: bool,
                    l1=None, *, differentiable: bool = True) -> PolishResult:
    """:func:`polish` on the ``(problem, compacted)`` of :func:`polish_problem`. With
    ``differentiable=False`` (inputs that nothing differentiates: a call on concrete values) the
    solve is traced without ``jax.lax.custom_root``'s tangent rule (tracing it is a third of a first
    call's polish); the result is the same."""
    return _polish(problem, cols, coef, intercept, active, tol, max_iter, bool(compacted), l1,
                   differentiable=bool(differentiable))


@functools.partial(jit, static_argnames=("compacted", "differentiable"))
def _polish(problem: FSAProblem, cols, coef, intercept, active, tol, max_iter, compacted: bool, l1,
            differentiable: bool = True) -> PolishResult:
    dtype = coef.dtype
    width, p = coef.shape
    design_s = support_design(problem.design, cols, compacted)
    loss_fn = problem.config.loss_fn
    l2, smooth = problem.l2.astype(dtype), problem.smoothness.astype(dtype)
    mask = active[:, None].astype(dtype)
    operator = compacted
    if operator:  # θ = (c ⊙ s, b): the columns' curvature as a diagonal preconditioner
        rel = problem.target.rel if isinstance(problem.target, WeightedTarget) else None
        pre = jnp.sqrt(_column_curvature(design_s, rel, l2))
        pre = jnp.concatenate([pre, jnp.ones((1,), dtype)])
    else:
        pre = jnp.ones((width * p + 1,), dtype)

    def unpack(theta):
        return theta[: width * p].reshape(width, p), theta[width * p]

    def objective(theta):
        c, b = unpack(theta)
        c = c * mask
        value = jnp.asarray(loss_fn(_scores(design_s, c, operator) + b, problem.target), dtype)
        return value + prior(c, l2, smooth)

    def scaled_objective(z):
        return objective(z / pre)

    free = jnp.concatenate([jnp.repeat(active, p), jnp.ones((1,), bool)])
    lasso = l1 is not None
    # λ on the support's coefficients, 0 on the intercept (and on inactive ones, which stay 0)
    penalty = jnp.concatenate([jnp.repeat(active, p).astype(dtype), jnp.zeros((1,), dtype)])
    penalty = penalty * (l1.astype(dtype) if lasso else jnp.zeros((), dtype))

    def total(theta):
        return objective(theta) + jnp.sum(penalty * jnp.abs(theta))

    def residual(theta):  # ∇F (+ λ sign) on the support and the intercept, θ itself (→ 0) elsewhere
        moving = free & ((theta != 0) | (penalty == 0))  # an L1 zero is held
        return jnp.where(moving, jax.grad(objective)(theta) + penalty * jnp.sign(theta), theta)

    newton = isinstance(problem.config.loss, str) and problem.config.loss in NEWTON_LOSSES
    newton = newton and not isinstance(design_s, PLDesign) and not operator and not lasso

    def solve(_, theta0):
        c0, b0 = unpack(theta0)
        if newton:
            c, b, it, status = _newton(problem, design_s, c0, b0, active, tol, max_iter)
            theta = jnp.concatenate([c.reshape(-1), b[None]])
        else:
            n = design_s.idx.shape[0] if isinstance(design_s, PLDesign) else design_s.shape[0]
            gtol = tol * _gradient_scale(loss_fn, problem.target, n, dtype)
            # ∂F/∂c = s ⊙ ∂F/∂z: the stopping rule in the original coefficients
            if lasso:  # λ|c_j| = (λ/s_j)|z_j|; the tolerance resolves λ: min(tol·σ, λ/2) when λ > 0
                lam = l1.astype(dtype)
                gtol = jnp.where(lam > 0, jnp.minimum(gtol, lam / 2), gtol)
                smooth = jax.value_and_grad(scaled_objective)
                z, it, status = owlqn(smooth, free, penalty / pre, theta0 * pre, gtol, max_iter, metric=pre)
            else:
                z, it, status = _lbfgs(scaled_objective, free, theta0 * pre, gtol, max_iter, metric=pre)
            theta = z / pre
        f0, f = total(theta0), total(theta)
        better = jnp.isfinite(f) & (f <= f0)  # never worse than the schedule's end
        theta = jnp.where(better, theta, theta0)
        status = jnp.where(better | ~jnp.isfinite(f0), status, status | NOT_CONVERGED)
        # custom_root gives integer aux outputs integer tangents, which JAX rejects: floats
        aux = (it.astype(dtype), status.astype(dtype), jnp.where(better, f, f0), f0)
        return theta, aux

    def tangent_solve(g, v):
        return jnp.linalg.solve(jax.jacfwd(g)(v), v)

    theta0 = jax.lax.stop_gradient(jnp.concatenate([(coef * mask).reshape(-1), intercept[None]]))
    if differentiable:
        theta, aux = jax.lax.custom_root(residual, theta0, solve, tangent_solve, has_aux=True)
    else:
        theta, aux = solve(residual, theta0)
    it, status, f, f0 = jax.tree.map(jax.lax.stop_gradient, aux)
    status = status.astype(jnp.int32)
    c, b = unpack(theta)
    return PolishResult(c * mask, b, it.astype(jnp.int32), status == 0, status, f, f0)


def merge_status(status, polished: PolishResult):
    """The status of a polished run: the schedule's flags OR the polish's."""
    return _merge(status, polished.status)


@jit
def _merge(a, b):
    return jnp.bitwise_or(a, b)

