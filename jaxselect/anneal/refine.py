"""Gradient support pursuit after FSA's schedule: the ``refine`` option of :func:`~jaxselect.fsa`.

FSA ranks the columns by ``|β_j|`` after a few gradient steps from β = 0, so a column whose
effect shows only once other columns are fitted — *marginally masked*, e.g. a rare click-log or
text column on rows that common columns already explain — can be dropped in the first
iterations and never come back. A refinement round is one iteration of GraSP (gradient support
pursuit, Bahmani, Raj & Boufounos, JMLR 2013) started from FSA's support S and its polished fit
(the polish: the minimiser of F, or of ``F + λ‖c‖₁`` with ``l1``, on S):

1. ``g = Ãᵀ ∂ℓ/∂z``: the gradient of F over all M columns at that fit (one product with X);
2. ``U = S ∪`` the ``2·B`` live columns outside S with the largest ``|g_j|`` (B ≥ k the
   k-bucket of :func:`~jaxselect.anneal.k_bucket`: GraSP's 2k, rounded up; the union's storage
   holds 2·W, W ≥ B the support's width, so one program serves every k of a shared width);
3. F on U decreased from S's fit by at most :data:`UNION_MAX_ITER` steps of the polish's solver
   (damped Newton, CG steps above 255 coefficients; L-BFGS on a compacted sparse union): the
   union's fit only ranks its coefficients;
4. ``S' =`` the k columns of U with the largest ``|c_j|`` (standardized coefficients), polished
   as S was.

S' replaces S only if it is another set of columns and its polished objective is lower: the
objective of the returned fit never rises above the unrefined one, and a round that finds
nothing better ends the refinement (the result is then exactly the unrefined fit). Each round
costs two products with X, the union's fit (3W columns) and the polish of W columns; a sparse
X's union and supports are compacted to their own entries as in the polish, and X's full entries
are dropped before the last round's union fit (the memory beyond the schedule's is the union's
stored entries).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._memory import release_free_memory
from .._validation import is_traced
from ..programs import jit
from .polish import PolishResult, polish_prepared, polish_problem
from .schedule import k_bucket
from .step import FSAProblem

__all__ = ["UNION_MAX_ITER", "Refined", "refine_support", "union_width"]

#: The union's fit only ranks its coefficients: its iterations are capped at this many (fewer
#: with the polish's own ``max_iter``), at the polish's tolerance.
UNION_MAX_ITER = 10


class Refined(NamedTuple):
    """The support after :func:`refine_support` and its polished fit.

    Attributes:
      cols: (W,) int32 original index of each coefficient (``active`` marks the k of the support).
      coef: (W, P) the polished coefficients on the support (standardized), 0 off ``active``.
      intercept: () intercept.
      active: (W,) bool.
      mean, inv_scale: (W,) the support's column means and inverse scales (raw coefficients are
        ``coef · inv_scale``, see :func:`~jaxselect.anneal.solver.extract`).
      fit: the :class:`~jaxselect.anneal.polish.PolishResult` of the accepted support's polish
        (the result's coefficients; its status joins the result's).
    """

    cols: jax.Array
    coef: jax.Array
    intercept: jax.Array
    active: jax.Array
    mean: jax.Array
    inv_scale: jax.Array
    fit: PolishResult


def union_width(width: int, n_features: int) -> int:
    """Columns a round may add beside the support's W: GraSP's 2k on the width W, at most the
    M − W columns outside it."""
    return int(max(0, min(2 * width, n_features - width)))


@jit
def _full_gradient(problem: FSAProblem, cols, coef, intercept, active):
    """(M,) ``|∂F/∂β_j|`` over all columns at the fit ``(cols, coef, intercept)``."""
    design = problem.design
    m = design.shape[1]
    beta = jnp.zeros((m,), coef.dtype).at[cols].add(jnp.where(active, coef[:, 0], 0))
    z = design.mv(beta) + intercept
    u = jax.grad(lambda s: problem.config.loss_fn(s, problem.target))(z)
    return jnp.abs(design.rmv(u.astype(coef.dtype)))


@functools.partial(jit, static_argnames="n_add")
def _candidates(score, live, cols, active, coef, n_take, n_add: int):
    """The union U = S ∪ T, T the ``n_take`` (data) live columns off S's support with the largest
    score: S's W columns and the ``n_add`` best columns outside them (T's members among those and
    among S's padding columns are active; the rest join inactive), W + n_add columns in increasing
    order, with the union's active mask and start coefficients (S's, 0 on the new columns)."""
    m = live.shape[0]
    live = live.astype(bool)
    held = jnp.zeros((m,), bool).at[cols].set(True)
    support = jnp.zeros((m,), bool).at[cols].max(active)
    # T: the top n_take (≤ 2W) of the live columns off the support
    best, top = jax.lax.top_k(jnp.where(live & ~support, score, -jnp.inf), min(m, 2 * int(cols.shape[0])))
    chosen = jnp.zeros((m,), bool).at[top].set((jnp.arange(top.shape[0], dtype=jnp.int32) < n_take) & jnp.isfinite(best))
    union_active = active | jnp.take(chosen, cols)
    if n_add == 0:
        return cols, union_active, coef
    best, new = jax.lax.top_k(jnp.where(live & ~held, score, -jnp.inf), n_add)
    union = jnp.concatenate([cols, new.astype(cols.dtype)])
    union_active = jnp.concatenate([union_active, jnp.take(chosen, new) & jnp.isfinite(best)])
    union_coef = jnp.concatenate([coef, jnp.zeros((n_add,) + coef.shape[1:], coef.dtype)])
    order = jnp.argsort(union)  # sorted columns compact to an operator without an alias
    return union[order], union_active[order], union_coef[order]


@functools.partial(jit, static_argnames="width")
def _prune(union, union_coef, union_active, k, width: int):
    """``(positions, active, cols, coef)`` of S′ in U: the ``k`` largest ``|c|`` of U active, padded
    with the next largest (inactive) to W positions (increasing), their columns and coefficients."""
    size = jnp.where(union_active, jnp.abs(union_coef[:, 0]), -jnp.inf)
    top = jax.lax.top_k(size, width)[1]
    chosen = jnp.zeros(size.shape, bool).at[top].set(jnp.arange(width) < k) & union_active
    positions = jnp.sort(top)
    return positions, jnp.take(chosen, positions), jnp.take(union, positions), jnp.take(union_coef, positions, axis=0)


def _select(take_first, a, b):
    return jnp.where(take_first, a, b)


@functools.partial(jit, static_argnames="n_features")
def _accept(fit, new_fit, cols, active, new_cols, new_active, n_features: int):
    """``(better, cols, active, fit)``: whether S′ is another set of columns with a lower finite
    objective, and the support and fit chosen elementwise (S′'s when better)."""
    better = jnp.isfinite(new_fit.objective) & (new_fit.objective < fit.objective)
    old = jnp.zeros((n_features,), bool).at[cols].max(active)
    new = jnp.zeros((n_features,), bool).at[new_cols].max(new_active)
    better = better & ~jnp.all(old == new)
    pick = functools.partial(_select, better)
    return better, pick(new_cols, cols), pick(new_active, active), jax.tree.map(pick, new_fit, fit)


@jit
def _support_scales(mean, factor, cols):
    return jnp.take(mean, cols), jnp.take(factor, cols)


def _sub_problem(problem: FSAProblem, compacted: bool, positions, size: int | None = None):
    """The problem on the columns ``positions`` of a (compacted) problem, compacted again when the
    parent is: ``(problem, compacted)``; ``size``: the entry count to pad to when it fits (the
    support's polish program then serves S' too)."""
    if compacted:
        design = problem.design.compact(positions, pad=True, size=size)  # padded as it is copied
        return problem._replace(design=design), True
    return problem, False


def _entries(problem: FSAProblem, compacted: bool):
    return int(problem.design.data.shape[0]) if compacted else None


def _column_scales(design):
    return design.mean, design.factor


def refine_support(problem: FSAProblem, cols, coef, intercept, active, *, k: int, rounds: int, tol,
                   max_iter, l1=None, differentiable: bool = True) -> Refined:
    """``rounds`` rounds of gradient support pursuit from the support ``cols[active]`` (see the
    module docstring); linear learners only.

    Args:
      problem: the :class:`~jaxselect.anneal.FSAProblem` at full width M.
      cols, coef, intercept, active: the schedule's last state at width W (≥ the k-bucket).
      k: the support size; rounds: ≥ 1.
      tol, max_iter: the polish's tolerance and iteration cap (every solve of a round).
      l1: None, or the L1 polish's λ: the fits of S and S' are then L1 polishes and the
        comparison is on ``F + λ‖c‖₁`` (the union's fit stays the ridge one).
      differentiable: False for inputs nothing differentiates (a call on concrete values): every
        solve is traced without its implicit-differentiation rule
        (:func:`~jaxselect.anneal.polish.polish_prepared`); the result is the same.

    Memory: a caller that passes the only reference to ``problem`` has X's full entries freed
    before the last round's union fit when the union is compacted (a concrete sparse X); the
    support's own entries are not held beside the union's, nor the union's during S′'s polish.

    Returns:
      :class:`Refined`.
    """
    width = int(cols.shape[0])
    n_features = int(problem.design.shape[1])
    n_add = union_width(width, n_features)
    # GraSP's 2k on the k-bucket, as data: every k of the width shares the round's programs
    n_take = jax.device_put(np.int32(min(2 * k_bucket(k, n_features), n_features)))
    mean_all, factor_all = _column_scales(problem.design)
    live = problem.live
    traced = is_traced((problem, cols, coef))

    current, compacted = polish_problem(problem, cols)
    fit = polish_prepared(current, cols, coef, intercept, active, tol, max_iter, compacted, l1,
                          differentiable=differentiable)
    # the union's cap: on the host for a concrete cap (an eager jnp.minimum compiles a program)
    union_max_iter = jnp.minimum(max_iter, UNION_MAX_ITER) if is_traced(max_iter) else jax.device_put(
        np.minimum(np.asarray(max_iter), UNION_MAX_ITER).astype(np.asarray(max_iter).dtype))
    full = problem
    for r in range(rounds):
        score = _full_gradient(full, cols, fit.coef, fit.intercept, active)
        union, union_active, union_coef = _candidates(score, live, cols, active, fit.coef, n_take, n_add)
        del score
        size = _entries(current, compacted)
        current = None  # S's entries are not needed beside U's: the round keeps S's fit only
        if compacted:
            jax.block_until_ready(union)
            release_free_memory()
        union_problem, union_compacted = polish_problem(full, union)
        if r == rounds - 1 and union_compacted:  # X's full entries are no longer needed
            full = problem = None
            release_free_memory()
        union_fit = polish_prepared(union_problem, union, union_coef, fit.intercept, union_active,
                                    tol, union_max_iter, union_compacted, differentiable=differentiable)
        order, new_active, new_cols, new_coef = _prune(union, union_fit.coef, union_active, k, width)
        if union_compacted:  # the union fit's transients are gone once its result is read
            jax.block_until_ready(order)
            release_free_memory()
        new_problem, new_compacted = _sub_problem(union_problem, union_compacted, order, size)
        union_problem = None  # S' is all a round needs of U from here
        if union_compacted:
            release_free_memory()
        new_fit = polish_prepared(new_problem, new_cols, new_coef, union_fit.intercept, new_active, tol, max_iter,
                                  new_compacted, l1, differentiable=differentiable)
        better, chosen_cols, chosen_active, chosen_fit = _accept(fit, new_fit, cols, active, new_cols, new_active,
                                                                 n_features)
        if union_compacted:  # concrete: the supports hold different entries
            if not bool(better):  # one host read per round
                break
            cols, active, fit, current, compacted = new_cols, new_active, new_fit, new_problem, new_compacted
            new_problem = None
            continue
        # the same storage (the full problem): chosen elementwise, so it also runs traced
        current = full
        cols, active, fit = chosen_cols, chosen_active, chosen_fit
        if not traced and not bool(better):
            break
    mean, inv_scale = _support_scales(mean_all, factor_all, cols)
    return Refined(cols, fit.coef, fit.intercept, active, mean, inv_scale, fit)
