"""Cost-weighted group lasso path: the "Sparse" baseline of Hu et al. §5.2.

Hu, Grubb, Bagnell & Hebert, "Efficient Feature Group Sequencing for Anytime Linear Prediction",
§5.2 (after Yuan & Lin 2006 and Chen et al. 2012): for a decreasing grid of λ solve

    min_w  (1/2n) ‖Y − Z w‖_F² + (l2/2) ‖w‖_F² + λ Σ_g a_g ‖w_g‖_F,      a_g = c(g) (cost-weighted)

on a prepared :class:`Problem` (Z standardised and, by default, group-whitened — Yuan & Lin's
orthonormal-group form; ``l2`` is the Problem's ridge, 0 when prepared with ``l2=0``). In moment
space the smooth part is ``½ wᵀCw − tr(b0ᵀw)`` with ``C = ZᵀZ/n + l2·I`` and ``b0 = ZᵀY/n``.
For T > 1 targets ‖w_g‖_F is the Frobenius norm of the (s_g, T) block (multi-task group lasso).

Solver: block coordinate descent over groups with the gradient ``r = b0 − C w`` kept up to date
(O(D·s·T) per group update, O(D²·T) per sweep, independent of n once C is formed). The block update
is the proximal step ``w_g ← prox(w_g + r_g / L_g)`` with ``L_g = λ_max(C_gg)`` — the exact block
minimiser on whitened groups, where ``C_gg = (1 + l2) I``; a group whose update is zero skips the
O(D·s) gradient update (``lax.cond``). On a ``gram=False`` problem the rows of C and ``C w`` come
from the design (O(n·D·s) per group update), so every solver accepts what ``prepare`` returns.
Sweeps run 4 at a time, each batch one step of :data:`bcd_solver` (the library's
:class:`~jaxselect.Solver`: ``state = group_lasso_init(problem, lam, weights)``,
``state = group_lasso_step(problem, state)``, ``state.info`` the step's :class:`GroupLassoStepInfo`;
the driver's ``lax.while_loop`` runs it until done), until the KKT violation (recomputed from a fresh ``r`` after every 4 sweeps)

    ‖r_g − λ a_g w_g/‖w_g‖‖ (w_g ≠ 0),     max(0, ‖r_g‖ − λ a_g) (w_g = 0)

is at most ``tol · ‖b0‖_G`` for every group, with ``‖b0‖_G = max_g ‖b0_g‖_F`` the gradient's scale at
w = 0 — a tolerance in the units of the violation itself, so multiplying every weight by a common
factor (which only rescales the λ grid) changes nothing; a ``lax.scan`` over the λ grid warm-starts
each solve from the previous solution (:func:`group_lasso_solver`, one step per λ). ``λ_max = max_g ‖b0_g‖ / a_g`` is the smallest λ with w = 0.

:func:`group_lasso_path` turns the path into the order in which groups enter (first λ with
``w_g ≠ 0``) and then into a :class:`SelectionPath` with ridge refits on every prefix
(:func:`jaxselect.fixed_order_path`), as the paper does for its Sparse curves.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect._repr import short_repr
from jaxselect._validation import check_float, check_int, host_value, is_traced
from jaxselect.linalg import gather_groups
from jaxselect.path import SelectionPath
from jaxselect.programs import jit
from jaxselect.sequencing.engine import capacities as _capacities
from jaxselect.sequencing.engine import (
    c_matvec,
    c_rows,
    default_params,
    fixed_order_rule,
    sequencing_solver,
)
from jaxselect.sequencing.prepare import Problem, check_problem, to_raw_coef
from jaxselect.sharding import any_mesh
from jaxselect.solver import Solver, SolverTraits, iterate, run
from jaxselect.status import NONFINITE, NOT_CONVERGED

__all__ = [
    "GroupLassoFit",
    "GroupLassoState",
    "GroupLassoStepInfo",
    "group_lasso",
    "group_lasso_init",
    "group_lasso_step",
    "group_lasso_path",
    "group_lasso_lambda_max",
    "group_lasso_solver",
    "bcd_solver",
]

CHECK_EVERY = 4  # BCD sweeps between two KKT checks (each check costs about two sweeps)


class GroupLassoFit(NamedTuple):
    """Solutions of the weighted group lasso along a λ grid.

    Attributes:
      lambdas: (L,) the decreasing grid.
      weights: (J,) the group weights a_g.
      coef: (L, D, T) solutions in problem coordinates (what the KKT conditions are stated in).
      raw_coef: (L, D, T) the same models in raw feature space.
      raw_intercept: (L, T) their raw-space intercepts.
      n_iter: (L,) int32 BCD sweeps used at each λ.
      kkt: (L,) final max KKT violation at each λ (see the module docstring).
      converged: (L,) bool, ``kkt ≤ tol · max_g ‖b0_g‖_F``.
      entry: (J,) int32 index of the first λ at which the group is non-zero (L if never).
      order: (J,) int32 groups by order of entry, −1 for groups that never enter.
      status: () int32, NOT_CONVERGED when some λ hit ``max_iter`` sweeps, NONFINITE on NaN/Inf.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 4)); y = X @ np.array([1.0, 0.0, 2.0, 0.0])
    >>> fit = js.group_lasso(js.prepare(X, y, l2=0.0), [0.5, 0.1, 0.01])   # a GroupLassoFit
    >>> fit.coef.shape, fit.order.tolist(), fit.converged.tolist()          # (L, D, T)
    ((3, 4, 1), [2, 0, -1, -1], [True, True, True])
    """

    lambdas: jax.Array
    weights: jax.Array
    coef: jax.Array
    raw_coef: jax.Array
    raw_intercept: jax.Array
    n_iter: jax.Array
    kkt: jax.Array
    converged: jax.Array
    entry: jax.Array
    order: jax.Array
    status: jax.Array

    __repr__ = short_repr


def _weights(problem: Problem, cost_weighted: bool, weights):
    """The group weights a_g (J,): numpy when given or all ones (no compile), else the costs."""
    J = problem.n_groups
    dtype = problem.b0.dtype
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (J,):
            raise ValueError(f"weights must have one entry per group: shape ({J},); got {w.shape}")
        bad = np.flatnonzero(~np.isfinite(w) | (w <= 0))
        if bad.size:
            raise ValueError(f"weights must be finite and > 0; got {w[bad[0]]} for group {bad[0]}")
        return np.asarray(w, dtype)
    if cost_weighted:
        costs = problem.groups.costs
        return costs if costs.dtype == dtype else costs.astype(dtype)
    return np.ones((J,), dtype)


@jit
def _lambda_max(problem: Problem, weights) -> jax.Array:
    bg = gather_groups(problem.b0, problem.groups.index, problem.groups.mask, axis=0)  # (J, s, T)
    return jnp.max(jnp.sqrt(jnp.sum(bg * bg, axis=(1, 2))) / weights)


@any_mesh
def group_lasso_lambda_max(problem: Problem, *, cost_weighted: bool = True, weights=None) -> float:
    """The smallest λ at which every group is zero: ``max_g ‖b0_g‖_F / a_g``.

    >>> import numpy as np, jaxselect
    >>> X = np.random.default_rng(0).normal(size=(50, 3)); y = X[:, 0]
    >>> round(group_lasso_lambda_max(jaxselect.prepare(X, y)), 2)
    1.0
    """
    check_problem(problem)
    return float(_lambda_max(problem, _weights(problem, cost_weighted, weights)))


class GroupLassoState(NamedTuple):
    """Block-coordinate-descent state of :func:`group_lasso_step` (fixed shapes).

    Attributes:
      coef: (D, T) current solution w in problem coordinates.
      kkt: () max KKT violation at ``coef`` (see the module docstring).
      n_iter: () int32 sweeps done.
      lipschitz: (J,) block constants ``L_g = λ_max(C_gg)`` (fixed; computed once by the init).
      lam: () the penalty λ; weights: (J,) the group weights a_g (fixed at the init).
      info: :class:`GroupLassoStepInfo` of the latest step (after :func:`group_lasso_init`: the
        KKT violation and non-zero groups of the starting ``coef``).
      threshold: () the max KKT violation at which :data:`bcd_solver` is done
        (``tol · max_g ‖b0_g‖_F``), or None (never done: :func:`group_lasso_init` without it).
    """

    coef: jax.Array
    kkt: jax.Array
    n_iter: jax.Array
    lipschitz: jax.Array
    lam: jax.Array
    weights: jax.Array
    info: GroupLassoStepInfo
    threshold: jax.Array | None = None

    __repr__ = short_repr


class GroupLassoStepInfo(NamedTuple):
    """What :func:`group_lasso_step` reports, kept as ``GroupLassoState.info``: the max KKT violation
    after the step's sweeps and the number of non-zero groups (() int32)."""

    kkt: jax.Array
    n_active: jax.Array

    __repr__ = short_repr


def _kkt(r, w, lam, weights, index, mask):
    """Per-group KKT violation at (w, r = b0 − Cw) for penalty λ Σ a_g ‖w_g‖."""
    rg = gather_groups(r, index, mask, axis=0)  # (J, s, T)
    wg = gather_groups(w, index, mask, axis=0)
    nw = jnp.sqrt(jnp.sum(wg * wg, axis=(1, 2)))
    safe = jnp.where(nw > 0, nw, jnp.ones_like(nw))
    t = lam * weights
    active = rg - (t / safe)[:, None, None] * wg
    v_active = jnp.sqrt(jnp.sum(active * active, axis=(1, 2)))
    v_zero = jnp.maximum(jnp.sqrt(jnp.sum(rg * rg, axis=(1, 2))) - t, 0.0)
    return jnp.where(nw > 0, v_active, v_zero)


def group_lasso_init(problem: Problem, lam, weights, coef=None, *, threshold=None) -> GroupLassoState:
    """BCD state at ``coef`` (default 0) for penalty ``lam · Σ_g weights_g ‖w_g‖`` (pure, jit-able).

    Args:
      problem: a prepared :class:`~jaxselect.Problem` (Gram or ``gram=False``).
      lam: () the penalty λ; weights: (J,) group weights a_g > 0; coef: (D, T) warm start.
      threshold: () the max KKT violation at which :func:`bcd_solver` stops (None: never).

    Returns:
      A :class:`GroupLassoState` holding λ and the weights; advance it with :func:`group_lasso_step`.
    """
    dtype = problem.b0.dtype
    lam = jnp.asarray(lam, dtype)
    weights = jnp.asarray(weights, dtype)
    w = jnp.zeros_like(problem.b0) if coef is None else coef
    state = _state(problem, w, _lipschitz(problem), lam, weights)
    return state if threshold is None else state._replace(threshold=jnp.asarray(threshold, dtype))


def _lipschitz(problem: Problem) -> jax.Array:
    """Block Lipschitz constants L_g = λ_max(C_gg) (J,) (padding is identity, so ≥ its real eigenvalues)."""
    mask = problem.groups.mask
    blocks = jnp.where(mask[:, :, None] & mask[:, None, :], problem.diag_blocks, jnp.zeros_like(problem.diag_blocks))
    lip = jnp.max(jnp.linalg.eigvalsh(blocks), axis=1)
    return jnp.where(lip > 0, lip, jnp.ones_like(lip))


def _n_active(w, index, mask) -> jax.Array:
    """() int32 number of groups with a non-zero block in ``w`` (D, T)."""
    wg = gather_groups(w, index, mask, axis=0)
    return jnp.sum(jnp.any(wg != 0, axis=(1, 2)), dtype=jnp.int32)


def _state(problem: Problem, w, lip, lam, weights) -> GroupLassoState:
    index, mask = problem.groups.index, problem.groups.mask
    kkt = jnp.max(_kkt(problem.b0 - c_matvec(problem, w), w, lam, weights, index, mask))
    info = GroupLassoStepInfo(kkt, _n_active(w, index, mask))
    return GroupLassoState(w, kkt, jnp.zeros((), jnp.int32), lip, lam, weights, info)


def group_lasso_step(problem: Problem, state: GroupLassoState) -> GroupLassoState:
    """``CHECK_EVERY`` (4) block-coordinate-descent sweeps over the groups, then a fresh KKT check.

    Each block update is the proximal step ``w_g ← prox(w_g + r_g / L_g)`` with the gradient
    ``r = b0 − Cw`` kept up to date; a group whose update is zero skips the O(D·s) gradient update.
    λ and the weights are the state's (:func:`group_lasso_init`).

    Returns:
      The new :class:`GroupLassoState`; ``state.info`` is this step's :class:`GroupLassoStepInfo`.
    """
    b0 = problem.b0
    lam, weights = state.lam, state.weights
    index, mask = problem.groups.index, problem.groups.mask
    J = index.shape[0]
    live, lip = problem.live, state.lipschitz

    def block_update(g, carry):
        w, r = carry
        idx, m = index[g], mask[g]
        keep = (m & jnp.take(live, idx, mode="fill", fill_value=False))[:, None]
        wg = jnp.take(w, idx, axis=0, mode="fill", fill_value=0)
        rg = jnp.take(r, idx, axis=0, mode="fill", fill_value=0)
        z = jnp.where(keep, wg + rg / lip[g], jnp.zeros_like(wg))
        nz = jnp.sqrt(jnp.sum(z * z))
        shrink = jnp.maximum(1.0 - lam * weights[g] / lip[g] / jnp.where(nz > 0, nz, jnp.ones_like(nz)), 0.0)
        new = z * shrink
        delta = new - wg

        def apply(carry):
            w, r = carry
            rows = c_rows(problem, idx, m)  # (s, D) = C[:, idx]ᵀ (zero on padding)
            return w.at[idx].set(new, mode="drop"), r - (delta.T @ rows).T

        # Groups that stay at zero (most of them early on the path) cost O(s·T), not O(s·D).
        return jax.lax.cond(jnp.any(delta != 0), apply, lambda c: c, (w, r))

    r = b0 - c_matvec(problem, state.coef)
    sweep = lambda _, c: jax.lax.fori_loop(0, J, block_update, c)  # noqa: E731
    w, _ = jax.lax.fori_loop(0, CHECK_EVERY, sweep, (state.coef, r))
    kkt = jnp.max(_kkt(b0 - c_matvec(problem, w), w, lam, weights, index, mask))
    info = GroupLassoStepInfo(kkt, _n_active(w, index, mask))
    return state._replace(coef=w, kkt=kkt, n_iter=state.n_iter + CHECK_EVERY, info=info)


def _gradient_scale(problem: Problem) -> jax.Array:
    """``max_g ‖b0_g‖_F``: the scale of the KKT violations (the gradient at w = 0), weight-free."""
    return _lambda_max(problem, jnp.ones((problem.n_groups,), problem.b0.dtype))


def _bcd_init(problem: Problem, w, lip, lam, weights, threshold) -> GroupLassoState:
    return _state(problem, w, lip, lam, weights)._replace(threshold=threshold)


def _bcd_done(problem: Problem, state: GroupLassoState) -> jax.Array:
    # not (kkt > threshold): a NaN violation stops the solve, as the loop always did
    return ~(state.kkt > state.threshold)


def _bcd_finish(problem: Problem, state: GroupLassoState, infos) -> GroupLassoState:
    return state


#: The group lasso at one λ as a :class:`~jaxselect.Solver`: ``init(problem, coef, lipschitz, lam,
#: weights, threshold)``, each ``step`` is :func:`group_lasso_step` (``CHECK_EVERY`` sweeps and a KKT
#: check), done when the max KKT violation is at most ``threshold``; ``finish`` returns the state.
bcd_solver = Solver(_bcd_init, group_lasso_step, _bcd_finish, SolverTraits("group_lasso", until_done=True), _bcd_done)


class LassoPathState(NamedTuple):
    """Carry of :func:`group_lasso_solver`: the warm start and the constants of the λ grid.

    Attributes:
      coef: (D, T) the solution at the previous λ (the warm start of the next solve).
      index: () int32 the next λ's position in the grid.
      lambdas: (L,) the grid; weights: (J,) a_g; threshold: () the KKT tolerance; lipschitz: (J,).
      info: :class:`LassoPoint`, the solution at the latest λ (stacked per λ by the driver).
    """

    coef: jax.Array
    index: jax.Array
    lambdas: jax.Array
    weights: jax.Array
    threshold: jax.Array
    lipschitz: jax.Array
    info: LassoPoint

    __repr__ = short_repr


class LassoPoint(NamedTuple):
    """The solution at one λ of the grid: ``coef`` (D, T), ``n_iter`` () sweeps, ``kkt`` () violation."""

    coef: jax.Array
    n_iter: jax.Array
    kkt: jax.Array

    __repr__ = short_repr


def group_lasso_solver(max_iter: int) -> Solver:
    """The group-lasso path over a λ grid as a :class:`~jaxselect.Solver` (one step per λ).

    ``init(problem, lambdas, weights, tol)``; each step solves the next λ from the previous
    solution (warm start) with :data:`bcd_solver` run by :func:`jaxselect.solver.iterate` (at most
    ``max_iter`` sweeps); ``finish`` gives the :class:`GroupLassoFit` (run it for ``L`` steps).
    """
    max_iter = int(max_iter)
    n_checks = -(-max_iter // CHECK_EVERY)  # sweeps run CHECK_EVERY at a time while n_iter < max_iter

    def step(problem, state):  # a closure, not a partial: a partial's keywords dict compares by identity
        return _path_step(problem, state, n_checks=n_checks)

    return Solver(_path_init, step, _path_finish, SolverTraits("group_lasso", stacks_info=True))


def _path_init(problem: Problem, lambdas, weights, tol) -> LassoPathState:
    dtype = problem.b0.dtype
    lambdas = jnp.asarray(lambdas, dtype)
    weights = jnp.asarray(weights, dtype)
    # Violations are gradients: compare them with the gradient's own scale, never with λ_max (which
    # a common factor on the weights rescales — the float32 path then stopped converging).
    threshold = jnp.asarray(tol, dtype) * _gradient_scale(problem)
    zero = jnp.zeros_like(problem.b0)
    none = LassoPoint(zero, jnp.zeros((), jnp.int32), jnp.zeros((), dtype))
    return LassoPathState(zero, jnp.zeros((), jnp.int32), lambdas, weights, threshold, _lipschitz(problem), none)


def _path_step(problem: Problem, state: LassoPathState, *, n_checks: int) -> LassoPathState:
    lam = state.lambdas[state.index]
    inner = bcd_solver.init(problem, state.coef, state.lipschitz, lam, state.weights, state.threshold)
    inner, _ = iterate(bcd_solver, problem, inner, n_checks)
    point = LassoPoint(inner.coef, inner.n_iter, inner.kkt)
    return state._replace(coef=inner.coef, index=state.index + 1, info=point)


def _path_finish(problem: Problem, state: LassoPathState, res: LassoPoint) -> GroupLassoFit:
    index, mask = problem.groups.index, problem.groups.mask
    lambdas, weights, threshold = state.lambdas, state.weights, state.threshold
    coef = res.coef  # (L, D, T)
    raw_coef, raw_intercept = to_raw_coef(problem.transform, coef)

    # Order of entry: first λ index with w_g ≠ 0; ties by larger ‖w_g‖/a_g at entry.
    L = lambdas.shape[0]
    wg = gather_groups(coef, index, mask, axis=1)  # (L, J, s, T)
    norms = jnp.sqrt(jnp.sum(wg * wg, axis=(2, 3)))  # (L, J)
    nonzero = norms > 0
    entry = jnp.where(nonzero.any(axis=0), jnp.argmax(nonzero, axis=0), L).astype(jnp.int32)
    at_entry = jnp.take_along_axis(norms, jnp.minimum(entry, L - 1)[None, :], axis=0)[0] / weights
    # entry first, then larger ‖w_g‖/a_g (a lexicographic sort: no blend of the two keys whose
    # resolution would depend on the weights' scale)
    perm = jnp.lexsort((-at_entry, entry)).astype(jnp.int32)
    order = jnp.where(entry[perm] < L, perm, -1)
    converged = res.kkt <= threshold
    finite = jnp.all(jnp.isfinite(coef)) & jnp.all(jnp.isfinite(res.kkt))
    status = jnp.where(jnp.all(converged), 0, NOT_CONVERGED) | jnp.where(finite, 0, NONFINITE)
    return GroupLassoFit(
        lambdas,
        weights,
        coef,
        raw_coef,
        raw_intercept,
        res.n_iter,
        res.kkt,
        converged,
        entry,
        order,
        status.astype(jnp.int32),
    )


def _grid_ok(lambdas) -> jax.Array:
    return jnp.all(jnp.isfinite(lambdas)) & jnp.all(lambdas > 0)


@partial(jit, static_argnames=("max_iter", "relative", "capacity", "raw_capacity"))
def _lasso_path(problem: Problem, grid, weights, tol, *, max_iter: int, relative: bool, capacity, raw_capacity):
    """The whole of :func:`group_lasso_path` in one program: the λ grid (``relative``: ``grid`` holds
    ratios of λ_max), the path of solutions, the entry order and its ridge refits. Returns the path
    and the λ grid (checked on the host afterwards; a grid that is not finite and > 0 is not solved)."""
    dtype = problem.b0.dtype
    weights = jnp.asarray(weights, dtype)
    lambdas = _lambda_max(problem, weights) * jnp.asarray(grid, dtype) if relative else jnp.asarray(grid, dtype)
    tol = jnp.where(_grid_ok(lambdas), jnp.asarray(tol, dtype), jnp.asarray(jnp.inf, dtype))  # bad grid: no sweeps
    lasso = group_lasso_solver(max_iter)
    state = lasso.init(problem, lambdas, weights, tol)
    state, infos = iterate(lasso, problem, state, lambdas.shape[0])
    fit = lasso.finish(problem, state, infos)
    refit = sequencing_solver(fixed_order_rule, capacity=capacity, raw_capacity=raw_capacity)
    seq = refit.init(problem, default_params(problem, order=fit.order))
    seq, steps = iterate(refit, problem, seq, fit.order.shape[0])
    path = refit.finish(problem, seq, steps)
    return path._replace(status=path.status | fit.status, info=fit), lambdas


def _default_tol(problem: Problem) -> float:
    return 1e-8 if problem.b0.dtype == np.float64 else 5e-6


@any_mesh
def group_lasso(
    problem: Problem, lambdas, *, cost_weighted: bool = True, weights=None, tol=None, max_iter: int = 2000
) -> GroupLassoFit:
    """Solve the (cost-)weighted group lasso at each λ of a decreasing grid, with warm starts.

    Minimises ``(1/2n)‖Y − Zw‖² + (l2/2)‖w‖² + λ Σ_g a_g ‖w_g‖`` (module docstring) by block
    coordinate descent in moment space.

    Args:
      problem: from :func:`jaxselect.prepare` (Gram or ``gram=False``: the rows of C then come from
        the design, O(n·D·s) per group update instead of O(D·s)).
      lambdas: (L,) strictly decreasing, > 0 (in the units of the standardised problem).
      cost_weighted: a_g = c(g) (the paper's Sparse); False: a_g = 1.
      weights: (J,) explicit weights a_g > 0 (overrides ``cost_weighted``).
      tol: stop when the max KKT violation is ≤ tol·max_g ‖b0_g‖_F (the gradient's scale at w = 0;
        default 1e-8 float64, 5e-6 float32). Independent of a common factor on the weights.
      max_iter: cap on BCD sweeps per λ (hitting it sets the NOT_CONVERGED status flag).

    Returns:
      A :class:`GroupLassoFit`.

    >>> import numpy as np, jaxselect
    >>> X = np.random.default_rng(0).normal(size=(100, 4)); y = X @ np.array([1.0, 0.0, 2.0, 0.0])
    >>> fit = group_lasso(jaxselect.prepare(X, y, l2=0.0), [0.5, 0.1, 0.01])
    >>> fit.order.tolist()[:2], bool(fit.converged.all())
    ([2, 0], True)
    """
    check_problem(problem)
    lam = _check_lambdas(lambdas)
    a, tol, max_iter = _solve_options(problem, cost_weighted, weights, tol, max_iter)
    lam = lam if is_traced(lam) else np.asarray(lam, problem.b0.dtype)
    return run(group_lasso_solver(max_iter), problem, lam, a, tol, n_steps=lam.shape[0])


def _check_lambdas(lambdas):
    """A user's λ grid: every value check on a host value; shape only on a traced one."""
    if is_traced(lambdas):
        if jnp.ndim(lambdas) != 1 or jnp.shape(lambdas)[0] < 1:
            raise ValueError(f"lambdas must be a non-empty 1-D array; got shape {jnp.shape(lambdas)}")
        return lambdas
    lam = np.asarray(lambdas, dtype=np.float64)
    if lam.ndim != 1 or lam.size < 1:
        raise ValueError(f"lambdas must be a non-empty 1-D array; got shape {lam.shape}")
    if not np.all(np.isfinite(lam)) or np.any(lam <= 0):
        raise ValueError("lambdas must be finite and > 0")
    if lam.size > 1 and np.any(np.diff(lam) >= 0):
        raise ValueError("lambdas must be strictly decreasing (warm starts run from large to small λ)")
    return lam


def _solve_options(problem: Problem, cost_weighted, weights, tol, max_iter):
    """Validated (weights (J,), tol (), max_iter) of a group-lasso solve."""
    a = _weights(problem, cost_weighted, weights)
    tol = _default_tol(problem) if tol is None else check_float(tol, "tol", low=0.0, strict_low=True)
    if tol >= 1.0:  # the KKT violation at w = 0 is at most the gradient's scale: nothing would be solved
        raise ValueError(f"tol must be < 1 (a fraction of the gradient's scale max_g ‖b0_g‖); got {tol}")
    max_iter = check_int(max_iter, "max_iter", low=1)
    return a, np.asarray(tol, problem.b0.dtype), max_iter


@any_mesh
def group_lasso_path(
    problem: Problem,
    *,
    n_lambdas: int = 50,
    lambda_min_ratio: float = 1e-3,
    lambdas=None,
    cost_weighted: bool = True,
    weights=None,
    tol=None,
    max_iter: int = 2000,
    return_fit=None,
) -> SelectionPath:
    """The "Sparse" anytime baseline: groups in order of entry on the group-lasso path, refitted.

    Solves :func:`group_lasso` on the grid ``λ_max · geomspace(1, lambda_min_ratio, n_lambdas)``
    (or the given ``lambdas``), orders the groups by the first λ at which they become non-zero (ties:
    larger ‖w_g‖/a_g first) and returns the ridge-refitted anytime path of that order
    (:func:`jaxselect.fixed_order_path`). Groups that never enter are left off (order −1).

    Args:
      problem: from :func:`jaxselect.prepare` (Gram or ``gram=False``, as in :func:`group_lasso`).
      n_lambdas: grid size L ≥ 2 (ignored when ``lambdas`` is given).
      lambda_min_ratio: smallest λ as a fraction of λ_max, in (0, 1).
      lambdas: an explicit strictly decreasing grid.
      cost_weighted, weights, tol, max_iter: as in :func:`group_lasso`.
      return_fit: deprecated (the path always carries its :class:`GroupLassoFit` as ``path.info``);
        ``True`` still returns ``(path, path.info)`` with a DeprecationWarning.

    Runs inside a user's ``jax.jit`` (the λ grid and the entry order are then traced; the value
    checks on them are skipped).

    Returns:
      A :class:`SelectionPath` of J steps (its ``status`` also carries the fit's
      NOT_CONVERGED flag); ``path.info`` is the :class:`GroupLassoFit` (the per-λ solutions).

    Raises:
      ValueError: ``n_lambdas`` < 2, ``lambda_min_ratio`` outside (0, 1], bad weights, ``tol`` or
        ``max_iter``.

    >>> import numpy as np, jaxselect
    >>> X = np.random.default_rng(0).normal(size=(100, 4)); y = X @ np.array([1.0, 0.0, 2.0, 0.0])
    >>> group_lasso_path(jaxselect.prepare(X, y), n_lambdas=20).order.tolist()[:2]
    [2, 0]
    """
    check_problem(problem)
    a, tol, max_iter = _solve_options(problem, cost_weighted, weights, tol, max_iter)
    dtype = problem.b0.dtype
    relative = lambdas is None
    if relative:
        n_lambdas = check_int(n_lambdas, "n_lambdas", low=2)
        ratio = check_float(lambda_min_ratio, "lambda_min_ratio", low=0.0, high=1.0, strict_low=True)
        if ratio >= 1.0:
            raise ValueError("lambda_min_ratio must be < 1")
        grid = np.asarray(np.geomspace(1.0, ratio, n_lambdas), dtype)
    else:
        grid = _check_lambdas(lambdas)
        grid = grid if is_traced(grid) else np.asarray(grid, dtype)
    capacity, raw_capacity = _capacities(problem, problem.n_groups)
    path, lams = _lasso_path(
        problem, grid, a, tol, max_iter=max_iter, relative=relative, capacity=capacity, raw_capacity=raw_capacity
    )
    fit = path.info
    if relative:
        values = host_value(lambda: lams)  # a concrete problem: the grid is checked on the host
        if values is not None:
            if not np.isfinite(values[0]):
                raise ValueError(
                    "problem has non-finite moments (b0 = ZᵀY/n contains NaN/Inf): prepare it from rescaled "
                    "X and Y, or in float64"
                )
            if float(values[0]) <= 0:
                raise ValueError("b0 = ZᵀY/n is zero: no group is correlated with Y, the path is empty")
            if not np.all(values > 0):  # the smallest λ must stay a positive number of the dtype
                raise ValueError(
                    f"lambda_min_ratio={ratio:.3g} is too small for {np.dtype(dtype)}: the smallest λ "
                    f"(λ_max·lambda_min_ratio) underflows to 0; use a larger lambda_min_ratio"
                )
    first = host_value(lambda: fit.order)  # after the solve: an eager caller gets an error
    if first is not None and int(first[0]) < 0:
        raise ValueError(
            "no group entered the path (every solution on the λ grid is zero): lower lambda_min_ratio (or the "
            "smallest of lambdas), use a smaller tol, or prepare the problem with a smaller l2"
        )
    if return_fit is not None:
        warnings.warn(
            "group_lasso_path(return_fit=...) is deprecated: the path always carries its GroupLassoFit as "
            "path.info (use path = group_lasso_path(...); path.info)",
            DeprecationWarning,
            stacklevel=2,
        )
        if return_fit:
            return path, fit
    return path
