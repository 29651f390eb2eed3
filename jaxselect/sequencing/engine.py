"""Moment-space sequencing engine and the anytime path of a given group order.

The machinery under every feature-group sequencing method (Hu et al., "Efficient Feature Group
Sequencing for Anytime Linear Prediction"): with S the selected features, ``w(S) = C_S⁻¹ b0_S``,
``F(S) = ½ b0_Sᵀ C_S⁻¹ b0_S`` and the gradient ``b = b0 − C_{:,S} w(S)``, the state keeps a partial
block Cholesky factor of C in selection order, ``K = L⁻¹ C_{S,:}`` (P × D, rows = selected slots),
and ``β = L⁻¹ b0_S``; then ``b = b0 − Kᵀβ``, ``F(S) = ½‖β‖²`` and the Schur complements
``M_g = C_gg − K_gᵀK_g``. Adding group h appends ``Q = L_h⁻¹ (C_{h,:} − K_hᵀK)`` (L_h the Cholesky
factor of M_h) and ``β_h = L_h⁻¹ b_h``: O(P·D·s) per step, independent of n once C is formed. On a
``gram=False`` problem the row block ``C_{h,:}`` is a lazy Gram block asked of the design
operator ``problem.Z`` (:func:`group_rows`: one ``u @ X`` product), computed when a group is chosen
together with the rows of the best-scoring unselected groups (:class:`ColumnCache`), so a run of k
steps reads X a few times instead of k times.

The family's :class:`~jaxselect.Solver` (the library's one solver type, run by its one driver,
:func:`jaxselect.solver.run`):

* a selection *rule* is a static :class:`Rule` record — the pick function and its capabilities
  (``needs_schur``: FR and Doubling read the Schur complements);
* :func:`sequencing_solver` ``(rule, capacity=, raw_capacity=)`` closes over the rule and the
  static slot capacities; its ``init(problem, params)`` is :func:`sequencing_init` (traced
  :class:`RuleParams`), its ``step`` is :func:`sequencing_step` (the step's diagnostics in
  ``state.info``, a :class:`StepInfo`) and its ``finish`` stacks them into a
  :class:`~jaxselect.SelectionPath` (with ``status``);
* :func:`sequencing_run` builds the solver and runs it: one compiled program (init, every step,
  the finish), or with ``progress=True`` the driver's compiled chunks and a bar.

:func:`fixed_order_path` is this engine with :func:`fixed_order_rule`: ridge refits on every prefix
of a given order (group-lasso entry order, a user's sequence). The greedy rules (CS-G-OMP, CS-G-FR,
Doubling) live in :mod:`jaxselect.sequencing.rules`, above this module; the evaluation layer
(:mod:`jaxselect.sequencing.anytime`) and the baselines (:mod:`jaxselect.sequencing.group_lasso`) build on it too.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular

from jaxselect._budget import kahan_add
from jaxselect._repr import short_repr
from jaxselect._validation import check_int, clip_k, host_array, is_traced
from jaxselect.linalg import apply_block_diag, floored_cholesky, gather_groups, pivot_rtol
from jaxselect.path import SelectionPath, link_code
from jaxselect.sequencing.prepare import Problem, check_problem, design_columns, to_raw_coef
from jaxselect.sharding import any_mesh
from jaxselect.solver import Solver, SolverTraits, run
from jaxselect.status import DEGENERATE, ILL_CONDITIONED, NONFINITE

__all__ = [
    "Rule",
    "as_rule",
    "sequencing_solver",
    "RuleParams",
    "SequencingConfig",
    "SequencingState",
    "StepInfo",
    "default_params",
    "sequencing_init",
    "sequencing_add",
    "sequencing_coef",
    "sequencing_step",
    "sequencing_run",
    "fixed_order_rule",
    "fixed_order_path",
    "fixed_order",
    "c_rows",
    "c_matvec",
    "degenerate",
    "selectable_groups",
    "slot_capacity",
    "raw_slot_capacity",
    "lean_steps",
]


class RuleParams(NamedTuple):
    """Traced parameters of the selection rules (one compiled solver serves every setting).

    Attributes:
      criterion: () int32 index into ``OMP_CRITERIA`` (:func:`omp_rule`).
      cost_sensitive: () bool, divide scores by c(g).
      c_min: () cap of Doubling's first pick (:func:`doubling_rule`).
      order: (m,) int32 forced group order, −1 to stop (:func:`fixed_order_rule`).
    """

    criterion: jax.Array
    cost_sensitive: jax.Array
    c_min: jax.Array
    order: jax.Array

    __repr__ = short_repr


class Rule(NamedTuple):
    """A selection rule as a static record: the pick function and its capabilities.

    ``rule(problem, state, params) -> (group, take)`` calls ``select``; ``take`` False makes the step
    empty (order −1). The record is hashable and compared by its fields, so it is part of the
    compiled program's key (a module-level ``select`` is reused across calls).

    Attributes:
      select: ``select(problem, state, params) -> (group () int32, take () bool)``.
      name: the label of the solver's progress bar.
      needs_schur: the rule reads ``state.schur`` (the Schur complements ``M_g``, kept up to date by
        rank-s downdates: FR and Doubling); other rules leave it empty ((0, s, s)).

    >>> from jaxselect.sequencing import Rule, fr_rule, omp_rule
    >>> fr_rule.needs_schur, omp_rule.needs_schur, fr_rule.name
    (True, False, 'cs_fr')
    """

    select: Callable
    name: str = "sequencing"
    needs_schur: bool = False

    def __call__(self, problem, state, params):
        return self.select(problem, state, params)


def as_rule(rule) -> Rule:
    """A :class:`Rule` (returned as it is) or a plain ``rule(problem, state, params)`` function (wrapped,
    named after it). A plain function carrying the old ``needs_schur = True`` attribute still gets the
    Schur complements, with a DeprecationWarning: wrap it as ``Rule(fn, needs_schur=True)``."""
    if isinstance(rule, Rule):
        return rule
    if not callable(rule):
        raise TypeError(f"rule must be a selection Rule or function (e.g. omp_rule); got {rule!r}")
    needs_schur = False
    if vars(rule).get("needs_schur", False) if hasattr(rule, "__dict__") else False:
        warnings.warn(
            "a rule function's needs_schur attribute is deprecated: pass "
            "jaxselect.sequencing.Rule(fn, needs_schur=True) instead",
            DeprecationWarning,
            stacklevel=3,
        )
        needs_schur = True
    return Rule(rule, str(getattr(rule, "__name__", "sequencing")), needs_schur)


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class SequencingConfig:
    """Static options of a sequencing run, fixed at :func:`sequencing_init` (a pytree without leaves).

    Attributes:
      rule: the selection :class:`Rule` (:data:`omp_rule`, :data:`fr_rule`, :data:`doubling_rule`,
        :data:`fixed_order_rule` or your own ``Rule(select, name, needs_schur)``).
      slots: ``StepInfo.w`` is the (P, T) model over the state's slots instead of the dense (D, T) one.
    """

    rule: Rule
    slots: bool = False


class SequencingState(NamedTuple):
    """Scan carry of the sequencing solvers (fixed shapes; P = slot capacity)."""

    K: jax.Array  # (P, D) rows of the partial Cholesky factor, L⁻¹ C_{S,:}
    beta: jax.Array  # (P, T) L⁻¹ b0_S
    b: jax.Array  # (D, T) gradient b0 − C_{:,S} w(S)
    schur: jax.Array  # (J, s, s) M_g = C_gg − C_gS C_S⁻¹ C_Sg (FR / Doubling; (0, s, s) otherwise)
    U: jax.Array  # (P, P) = K[:, S] = Lᵀ, the upper Cholesky factor of C_S in slot order, identity-padded
    slot_feature: jax.Array  # (P,) int32 feature of each slot, D when empty
    selected: jax.Array  # (J,) bool
    count: jax.Array  # () int32 number of filled slots
    cum_cost: jax.Array  # () cost of the selected groups (compensated sum)
    cost_carry: jax.Array  # () Kahan compensation of cum_cost
    F: jax.Array  # () explained variance F(S)
    step: jax.Array  # () int32 steps taken so far (taken or empty)
    status: jax.Array  # () int32 status flags (jaxselect.status)
    params: RuleParams  # traced parameters of the rule (criterion, cost_sensitive, c_min, order)
    config: SequencingConfig  # static: the rule and the storage form of StepInfo.w
    info: StepInfo  # diagnostics of the latest step (sequencing_init: the "no step yet" value)
    cache: "ColumnCache | None" = None  # gram=False: the lazy Gram rows computed ahead (None with C)

    __repr__ = short_repr


class ColumnCache(NamedTuple):
    """Lazy Gram rows of a ``gram=False`` run, computed ahead for a batch of likely groups.

    One pass over X costs about as much for a few dozen columns as for one (the product is
    memory-bound), so when the chosen group's rows are not cached, :func:`sequencing_add` computes
    them together with those of the best-scoring unselected groups (``|b|²`` per group over its cost)
    in one ``u @ X`` product; later steps that pick a cached group read their rows for free. The
    results are those of computing each group's rows when it is chosen (same maths).
    """

    rows: jax.Array  # (r·s, D) rows C[index[g], :] of the cached groups, s per group (padding rows 0)
    group: jax.Array  # (r,) int32 cached groups, −1 where empty

    __repr__ = short_repr


#: Columns of X̃ computed per pass of a ``gram=False`` run (rows of C ahead of need; at most this
#: many, fewer when D is large: the cache holds at most :data:`CACHE_BYTES` bytes).
CACHE_COLUMNS = 64
CACHE_BYTES = 1 << 26


def _cache_groups(problem: Problem) -> int:
    """Static number r of groups a pass of a ``gram=False`` run computes the rows of."""
    J, s = problem.groups.index.shape
    d = problem.n_features
    cols = min(CACHE_COLUMNS, max(1, CACHE_BYTES // max(1, d * problem.b0.dtype.itemsize)))
    return max(1, min(J, cols // s))


class StepInfo(NamedTuple):
    """Diagnostics of one :func:`sequencing_step`, kept as ``SequencingState.info``.

    Before any step (:func:`sequencing_init`) it holds the "no step yet" value of the same shapes
    and dtypes: group −1, cum_cost +inf (as an empty step), objective 0 (F(∅) = 0) and a zero model.
    """

    group: jax.Array  # () int32, −1 for an empty step
    cum_cost: jax.Array  # () (+inf for an empty step)
    objective: jax.Array  # () 2·F/T
    w: jax.Array  # (D, T) problem-space model after the step ((P, T) over the slots with config.slots)

    __repr__ = short_repr



def default_params(problem: Problem, *, criterion: int = 0, cost_sensitive: bool = True, c_min=None, order=None):
    """:class:`RuleParams` from already-validated values (``criterion`` an index into
    :data:`jaxselect.sequencing.criteria.OMP_CRITERIA`; defaults: whitened, cost-sensitive, c_min =
    the cheapest cost). :func:`jaxselect.sequencing.rule_params` is the validated front door.

    Concrete values stay host (numpy) values, so building the parameters compiles nothing; the
    default ``c_min`` (None) is resolved by :func:`sequencing_init`, inside the solve's program."""
    dtype = problem.b0.dtype
    if c_min is not None:
        c_min = jnp.asarray(c_min, dtype) if is_traced(c_min) else np.asarray(c_min, dtype)
    if order is None:
        order = np.zeros((1,), np.int32)
    else:
        order = jnp.asarray(order, jnp.int32) if is_traced(order) else np.asarray(order, np.int32)
    return RuleParams(np.asarray(criterion, np.int32), np.asarray(bool(cost_sensitive)), c_min, order)


def _resolve_params(problem: Problem, params: RuleParams) -> RuleParams:
    """Traced, typed parameters (the default c_min, None, is the cheapest group's cost)."""
    dtype = problem.b0.dtype
    c_min = jnp.min(problem.groups.costs) if params.c_min is None else params.c_min
    return RuleParams(
        jnp.asarray(params.criterion, jnp.int32),
        jnp.asarray(params.cost_sensitive, bool),
        jnp.asarray(c_min, dtype),
        jnp.asarray(params.order, jnp.int32),
    )


def sequencing_init(
    problem: Problem,
    rule: Rule | Callable,
    params: RuleParams | None = None,
    *,
    capacity: int | None = None,
    slots: bool = False,
) -> SequencingState:
    """The empty selection: ``b = b0``, no factor rows, identity-padded U; the rule is fixed here.

    Args:
      problem: a :class:`~jaxselect.Problem`.
      rule: the selection :class:`Rule` (static; stored in ``state.config``), or a plain function
        (wrapped by :func:`as_rule`). A rule that reads ``state.schur`` has ``needs_schur=True``
        (FR and Doubling do).
      params: its :class:`RuleParams` (default :func:`default_params`); traced (a ``c_min`` of None
        is resolved here to the cheapest group's cost).
      capacity: static number of feature slots P (default: what a path over every reachable group
        needs, :func:`slot_capacity`; needs concrete groups).
      slots: ``StepInfo.w`` over the slots (P, T) instead of dense (D, T) (static).

    Returns:
      A :class:`SequencingState` (``state.info`` the "no step yet" :class:`StepInfo`); advance it
      with :func:`sequencing_step`.
    """
    rule = as_rule(rule)
    params = _resolve_params(problem, default_params(problem) if params is None else params)
    if capacity is None:
        capacity = _capacities(problem, _steps(problem, None))[0]
    track_schur = bool(rule.needs_schur)
    d, t = problem.b0.shape
    dtype = problem.b0.dtype
    J, s = problem.groups.index.shape
    zero = jnp.zeros((), dtype)
    return SequencingState(
        K=jnp.zeros((capacity, d), dtype),
        beta=jnp.zeros((capacity, t), dtype),
        b=problem.b0,
        schur=problem.diag_blocks if track_schur else jnp.zeros((0, s, s), dtype),
        U=jnp.eye(capacity, dtype=dtype),
        slot_feature=jnp.full((capacity,), d, jnp.int32),
        selected=jnp.zeros((J,), bool),
        count=jnp.zeros((), jnp.int32),
        cum_cost=zero,
        cost_carry=zero,
        F=zero,
        step=jnp.zeros((), jnp.int32),
        status=jnp.zeros((), jnp.int32),
        params=params,
        config=SequencingConfig(rule, bool(slots)),
        info=StepInfo(
            group=jnp.full((), -1, jnp.int32),
            cum_cost=jnp.full((), jnp.inf, dtype),
            objective=zero,
            w=jnp.zeros((capacity if slots else d, t), dtype),
        ),
        cache=None if problem.C is not None else _empty_cache(problem),
    )


def _empty_cache(problem: Problem) -> ColumnCache:
    r = _cache_groups(problem)
    s = problem.groups.index.shape[1]
    dtype = problem.b0.dtype
    return ColumnCache(jnp.zeros((r * s, problem.n_features), dtype), jnp.full((r,), -1, jnp.int32))


def c_rows(problem: Problem, idx: jax.Array, m: jax.Array) -> jax.Array:
    """Rows C[idx, :] (s, D) of the regularised covariance, zero on padding.

    ``idx`` is a group's row of the index table (``problem.groups.index[h]``). On a ``gram=False``
    problem these are the group's lazy Gram columns, asked of the design operator (:func:`group_rows`).
    """
    if problem.C is not None:
        return jnp.take(problem.C, idx, axis=0, mode="fill", fill_value=0) * m[:, None].astype(problem.C.dtype)
    h = problem.groups.ids[jnp.clip(idx[0], 0, problem.n_features - 1)]  # a group's first entry is real
    return group_rows(problem, h[None])[0] * m[:, None].astype(problem.b0.dtype)


def group_rows(problem: Problem, hs: jax.Array) -> jax.Array:
    """Rows C[index[h], :] (r, s, D) of groups ``hs`` (r,) of a ``gram=False`` problem (padding rows 0).

    The lazy Gram columns, asked of the design operator ``Z`` (X̃): the groups' standardised
    columns whitened by their bases ``B_h``, then one ``u @ X``-shaped product ``Z.rmv`` for all of
    them (never ``X.T @ u``) and the block-diagonal basis on the right —
    ``C[idx, :] = (X̃[:, idx] B_h)ᵀ W X̃ B / Σw + diag``: O(n·D·r·s), no D×D matrix.
    """
    tr, groups = problem.transform, problem.groups
    r = hs.shape[0]
    s = groups.index.shape[1]
    idx, real = groups.index[hs], groups.mask[hs]  # (r, s)
    cols = design_columns(problem.Z, idx.reshape(-1), real.reshape(-1))  # (n, r·s)
    cols = jnp.einsum("nra,rab->nrb", cols.reshape((-1, r, s)), tr.basis[hs]).reshape((-1, r * s))
    if problem.weights is not None:
        cols = cols * problem.weights[:, None].astype(cols.dtype)
    rows = apply_block_diag(problem.Z.rmv(cols.T), tr.basis, tr.index, tr.mask) / problem.n_samples
    diag = jnp.where(problem.live, problem.l2, jnp.ones_like(problem.b0[:, 0]))
    flat = idx.reshape(-1)
    rows = rows.at[jnp.arange(r * s, dtype=jnp.int32), flat].add(jnp.take(diag, flat, mode="fill", fill_value=0), mode="drop")
    rows = rows * real.reshape((-1, 1)).astype(rows.dtype)
    return rows.reshape((r, s, -1))


def _cached_rows(problem: Problem, state: SequencingState, h, take):
    """``(rows C[index[h], :] (s, D) unmasked, cache)`` of a ``gram=False`` step: read from the
    cache, or — on a miss of a step that takes h — computed in one pass together with the rows of
    the best-scoring unselected groups (:class:`ColumnCache`)."""
    cache = state.cache
    hit = cache.group == h
    r = cache.group.shape[0]
    s = problem.groups.index.shape[1]

    def refill(_):
        index, mask = problem.groups.index, problem.groups.mask
        bg = gather_groups(state.b, index, mask, axis=0)  # (J, s, T)
        score = jnp.sum(bg * bg, axis=(1, 2)) / problem.groups.costs
        score = jnp.where(state.selected, -jnp.inf, score).at[h].set(jnp.inf)
        hs = jax.lax.top_k(score, r)[1].astype(jnp.int32)  # h first
        return ColumnCache(group_rows(problem, hs).reshape((r * s, -1)), hs)

    cache = jax.lax.cond(jnp.any(hit) | ~jnp.asarray(take, bool), lambda _: cache, refill, None)
    start = (jnp.argmax(cache.group == h) * s).astype(jnp.int32)
    return jax.lax.dynamic_slice_in_dim(cache.rows, start, s, axis=0), cache


def degenerate(problem: Problem) -> jax.Array:
    """() bool: ``b0 = 0`` — every target constant (``prepare`` gives a constant target a zero column)
    or uncorrelated with every feature. The greedy rules then select nothing (the intercept-only
    model, like scikit-learn's OrthogonalMatchingPursuit) and paths carry the DEGENERATE flag."""
    return ~jnp.any(problem.b0 != 0)


def c_matvec(problem: Problem, w: jax.Array) -> jax.Array:
    """``C @ w`` (D, T) for coefficients w (D, T) in problem coordinates, in either mode: from the
    Gram matrix, or (``gram=False``) from the design operator as ``Bᵀ X̃ᵀ W X̃ B w / Σw + diag·w``
    (λ on live coordinates, 1 on inert ones, as :func:`c_rows`): one ``Z.mv`` and one ``Z.rmv``,
    without forming C."""
    if problem.C is not None:
        return problem.C @ w
    tr = problem.transform
    v = apply_block_diag(w.T, jnp.swapaxes(tr.basis, 1, 2), tr.index, tr.mask)  # (B w)ᵀ, (T, D)
    u = problem.Z.mv(v.T)  # (n, T)
    if problem.weights is not None:
        u = u * problem.weights[:, None].astype(u.dtype)
    cross = apply_block_diag(problem.Z.rmv(u.T), tr.basis, tr.index, tr.mask)  # (T, D), u @ X
    diag = jnp.where(problem.live, problem.l2, jnp.ones_like(problem.b0[:, 0]))
    return cross.T / problem.n_samples + diag[:, None] * w


def _pivot_floor(scale: jax.Array) -> jax.Array:
    """Pivot thresholds (s,) of a block whose original diagonal C_hh is ``scale`` (s,).

    A Schur pivot below ``√ε · C_jj`` (:func:`jaxselect.linalg.pivot_rtol`) is at the rounding level
    of the moments: the coordinate is numerically dependent on the selection (e.g. an earlier prefix
    already fits Y exactly, or a duplicated column with ``l2 = 0``) and is dropped.
    """
    return pivot_rtol(scale.dtype) * jnp.abs(scale)


def safe_cholesky(S: jax.Array, m: jax.Array, scale: jax.Array):
    """Floored Cholesky ``(L, keep)`` of the ``m`` block of S (:func:`jaxselect.linalg.floored_cholesky`)."""
    return floored_cholesky(0.5 * (S + S.T), m, _pivot_floor(scale))


def _block_diagonal(rows: jax.Array, idx: jax.Array, m: jax.Array) -> jax.Array:
    """The diagonal C_hh[a, a] (s,) of a row block C[idx, :] (1 on padding)."""
    d = rows.shape[1]
    diag = jnp.take_along_axis(rows, jnp.minimum(idx, d - 1)[:, None], axis=1)[:, 0]
    return jnp.where(m, diag, jnp.ones_like(diag))


def sequencing_add(problem: Problem, state: SequencingState, h: jax.Array, take=True) -> SequencingState:
    """Append group h to the selection: block Cholesky append + gradient and Schur downdates.

    With ``take`` False (a traced bool) the group's mask is empty, so every update writes zeros or
    identity padding where the state already has them: an exact no-op without a select over the
    whole state. A coordinate whose Schur pivot falls below ``√ε · C_jj`` (numerically dependent on
    the selection: an exactly fitting prefix, a duplicated column with ``l2 = 0``) is dropped — it
    gets coefficient 0 and no slot — and the ILL_CONDITIONED status flag is set; nothing turns NaN.
    Inert coordinates of the group (constant columns, dropped whitening directions) take no slot
    either (their coefficient is 0), so the slots a path needs follow the live coordinates.
    """
    index, mask = problem.groups.index, problem.groups.mask
    idx = index[h]
    m = mask[h] & take & jnp.take(problem.live, idx, mode="fill", fill_value=False)
    P = state.K.shape[0]
    s = idx.shape[0]
    dtype = state.K.dtype
    Kh = jnp.take(state.K, idx, axis=1, mode="fill", fill_value=0)  # (P, s)
    cache = state.cache
    if cache is None:
        rows = c_rows(problem, idx, m)  # (s, D)
    else:  # gram=False: lazy Gram rows, computed ahead a batch of groups at a time
        rows, cache = _cached_rows(problem, state, h, take)
        rows = rows * m[:, None].astype(rows.dtype)
    cross = jax.lax.dot_general(Kh, state.K, (((0,), (0,)), ((), ())))  # Kh^T K, (s, D)
    R = rows - cross
    S = jnp.take(R, idx, axis=1, mode="fill", fill_value=0)  # M_h = C_hh - Kh^T Kh
    Lh, keep = safe_cholesky(S, m, _block_diagonal(rows, idx, m))
    floored = jnp.any(m & ~keep)  # a coordinate numerically dependent on the selection: dropped
    kf = keep[:, None].astype(dtype)
    Q = solve_triangular(Lh, R, lower=True) * kf  # (s, D)
    bh = jnp.take(state.b, idx, axis=0, mode="fill", fill_value=0) * kf
    beta_h = solve_triangular(Lh, bh, lower=True) * kf  # (s, T)
    b = state.b - (beta_h.T @ Q).T
    schur = state.schur
    if schur.shape[0]:
        Qg = gather_groups(Q, index, mask, axis=1)  # (s, J, s)
        schur = schur - jnp.einsum("rja,rjb->jab", Qg, Qg)
    # Kept coordinates fill consecutive slots (a stable partition keeps their factor order).
    perm = jnp.argsort(~keep, stable=True)
    Q, beta_h, idx, m = Q[perm], beta_h[perm], idx[perm], keep[perm]

    count = state.count
    K = jax.lax.dynamic_update_slice(state.K, Q, (count, jnp.zeros((), jnp.int32)))
    beta = jax.lax.dynamic_update_slice(state.beta, beta_h, (count, jnp.zeros((), jnp.int32)))
    new_slots = jnp.where(m, idx, problem.n_features).astype(jnp.int32)
    slot_feature = jax.lax.dynamic_update_slice(state.slot_feature, new_slots, (count,))
    # New columns of U = K[:, S]: the updated factor rows at the new features' columns.
    U_cols = jnp.take(K, idx, axis=1, mode="fill", fill_value=0)  # (P, s)
    eye_cols = (jnp.arange(P, dtype=jnp.int32)[:, None] == (count + jnp.arange(s, dtype=jnp.int32))[None, :]).astype(
        dtype
    )
    U_cols = jnp.where(m[None, :], U_cols, eye_cols)
    U = jax.lax.dynamic_update_slice(state.U, U_cols, (jnp.zeros((), jnp.int32), count))
    cost = jnp.where(take, problem.groups.costs[h].astype(dtype), jnp.zeros((), dtype))
    cum_cost, cost_carry = kahan_add(state.cum_cost, state.cost_carry, cost)
    return state._replace(
        K=K,
        beta=beta,
        b=b,
        schur=schur,
        U=U,
        slot_feature=slot_feature,
        selected=state.selected.at[h].set(state.selected[h] | take),
        count=count + m.sum(dtype=jnp.int32),
        cum_cost=cum_cost,
        cost_carry=cost_carry,
        F=state.F + 0.5 * jnp.sum(beta_h * beta_h),
        status=state.status | jnp.where(floored, ILL_CONDITIONED, 0).astype(jnp.int32),
        cache=cache,
    )


def sequencing_coef(problem: Problem, state: SequencingState) -> jax.Array:
    """Problem-space ridge model w(S) (D, T) = scatter of U⁻¹ β (C_S = UᵀU, β = U⁻ᵀ b0_S)."""
    w_slots = solve_triangular(state.U, state.beta, lower=False)
    d, t = problem.b0.shape
    return jnp.zeros((d, t), w_slots.dtype).at[state.slot_feature].set(w_slots, mode="drop")


# ---------------------------------------------------------------------------------------------
# Selection rules: rule(problem, state, params) -> (group h, take). A step with take=False
# leaves the state unchanged (an empty step, order −1).



def _fixed_order_select(problem: Problem, state: SequencingState, params: RuleParams):
    """The group ``params.order[step]`` (−1 ends the path)."""
    g = params.order[jnp.minimum(state.step, params.order.shape[0] - 1)]
    return jnp.maximum(g, 0).astype(jnp.int32), g >= 0


#: The group ``params.order[step]`` (−1 ends the path): :func:`fixed_order_path`'s rule.
fixed_order_rule = Rule(_fixed_order_select, "fixed_order_path")



def sequencing_step(problem: Problem, state: SequencingState) -> SequencingState:
    """One step: the state's rule picks a group, which is appended (or nothing, when ``take`` is False).

    Returns the new state, whose ``info`` field is this step's :class:`StepInfo`; pure and
    jit-able (the rule and the storage form are the static ``state.config`` set by
    :func:`sequencing_init`). With ``config.slots`` the step's model ``StepInfo.w`` is the (P, T)
    problem-space model over the state's slots (``state.slot_feature``) instead of the dense (D, T) one.
    """
    h, take = state.config.rule(problem, state, state.params)
    new = sequencing_add(problem, state, h, take)._replace(step=state.step + 1)
    w = solve_triangular(new.U, new.beta, lower=False) if state.config.slots else sequencing_coef(problem, new)
    inf = jnp.full((), jnp.inf, new.cum_cost.dtype)
    info = StepInfo(
        jnp.where(take, h, -1).astype(jnp.int32),
        jnp.where(take, new.cum_cost, inf),
        2.0 * new.F / problem.n_targets,
        w.astype(state.info.w.dtype),
    )
    return new._replace(info=info)


def _path(problem: Problem, state: SequencingState, info: StepInfo, raw_capacity) -> SelectionPath:
    """The :class:`SelectionPath` of a finished run from its stacked :class:`StepInfo` (``raw_capacity``
    None: a dense path)."""
    if raw_capacity is not None:
        coef, intercept, features = _raw_slot_coef(problem, info.group, state.slot_feature, info.w, raw_capacity)
    else:
        coef, intercept = to_raw_coef(problem.transform, info.w)
        features = None
    finite = jnp.all(jnp.isfinite(info.objective)) & jnp.all(jnp.isfinite(coef)) & jnp.all(jnp.isfinite(intercept))
    flags = jnp.where(finite, 0, NONFINITE) | jnp.where(degenerate(problem), DEGENERATE, 0)
    return SelectionPath(
        order=info.group,
        cum_cost=info.cum_cost,
        objective=info.objective,
        coef=coef,
        intercept=intercept,
        null_intercept=problem.transform.y_mean,
        status=state.status | flags.astype(jnp.int32),
        link=link_code("identity"),
        features=features,
    )


def sequencing_solver(rule: Rule | Callable, *, capacity: int, raw_capacity: int | None = None) -> Solver:
    """The :class:`~jaxselect.Solver` of a sequencing run with ``rule`` (its static options closed over).

    ``init(problem, params)`` is :func:`sequencing_init` (``params`` a :class:`RuleParams`),
    ``step`` is :func:`sequencing_step`, ``finish`` stacks the steps' :class:`StepInfo` into a
    :class:`~jaxselect.SelectionPath`. Run it with :func:`jaxselect.solver.run` (one compiled
    program) or :func:`jaxselect.solver.iterate` inside a traced program.

    Args:
      rule: the selection :class:`Rule` (or a plain function, :func:`as_rule`).
      capacity: static number of feature slots P (:func:`slot_capacity` of the run's steps).
      raw_capacity: None for a dense path; else the raw-feature slots of a slot path
        (:func:`raw_slot_capacity`; ``gram=False`` problems).
    """
    rule = as_rule(rule)
    capacity = int(capacity)
    raw_capacity = None if raw_capacity is None else int(raw_capacity)
    slots = raw_capacity is not None

    def init(problem, params):
        return sequencing_init(problem, rule, params, capacity=capacity, slots=slots)

    def finish(problem, state, infos):
        return _path(problem, state, infos, raw_capacity)

    return Solver(init, sequencing_step, finish, SolverTraits(rule.name, stacks_info=True))


def _raw_slot_coef(problem: Problem, order, slot_feature, ws, raw_capacity: int):
    """Raw-space slot coefficients of a path from its problem-space slot models.

    ``ws`` (m, P, T) are the models over the solver's slots (``slot_feature`` (P,), fixed once
    filled). Raw slots hold the features of the selected groups in selection order, each group a
    contiguous block; a group's raw coefficients are ``basis_g @ w_g · y_scale / x_scale`` as in
    :func:`~jaxselect.sequencing.prepare.to_raw_coef`. Returns ``(coef (m, R, T), intercept (m, T), features (R,))``.
    """
    tr = problem.transform
    d = problem.n_features
    index, mask = tr.index, tr.mask
    s = index.shape[1]
    P = slot_feature.shape[0]
    R = raw_capacity
    taken = order >= 0
    g = jnp.maximum(order, 0)
    gm = mask[g] & taken[:, None]  # (k, s) features of each step's group
    sizes = jnp.sum(gm, axis=1, dtype=jnp.int32)
    offsets = jnp.cumsum(sizes) - sizes
    pos = jnp.where(gm, offsets[:, None] + jnp.arange(s, dtype=jnp.int32)[None, :], R)  # (k, s) raw slot
    feats = jnp.where(gm, index[g], d).astype(jnp.int32)
    features = jnp.full((R,), d, jnp.int32).at[pos.ravel()].set(feats.ravel(), mode="drop")
    # The solver slot of every feature (P when it has none): an O(D) map, never O(D·P).
    pslot = jnp.full((d,), P, jnp.int32).at[slot_feature].set(jnp.arange(P, dtype=jnp.int32), mode="drop")
    src = jnp.where(gm, jnp.take(pslot, feats, mode="fill", fill_value=P), P)  # (k, s)
    basis = tr.basis[g]  # (k, s, s)
    scale = jnp.take(tr.x_scale, feats, mode="fill", fill_value=1)[:, :, None]  # (k, s, 1)

    def one(w):  # (P, T) -> (R, T)
        wb = jnp.take(w, src, axis=0, mode="fill", fill_value=0)  # (k, s, T)
        raw = jnp.einsum("kba,kat->kbt", basis, wb) * tr.y_scale[None, None, :] / scale
        raw = jnp.where(gm[:, :, None], raw, jnp.zeros_like(raw))
        return jnp.zeros((R, w.shape[1]), w.dtype).at[pos.ravel()].set(raw.reshape((-1, w.shape[1])), mode="drop")

    coef = jax.lax.map(one, ws)
    x_mean = jnp.take(tr.x_mean, features, mode="fill", fill_value=0)
    intercept = tr.y_mean[None, :] - jnp.einsum("r,mrt->mt", x_mean, coef)
    return coef, intercept, features


def _steps(problem: Problem, k, who: str = "sequencing_run") -> int:
    """Steps of a path: ``k`` capped at the usable groups (:func:`clip_steps`); by default J, or
    :func:`~jaxselect.sequencing.criteria.lean_steps` (the most steps whose slots fit in min(n, D),
    n the rows of positive weight) on a ``gram=False`` problem."""
    J = problem.n_groups
    if k is None:
        if problem.C is None:
            g = problem.groups
            return lean_steps(g.mask, _rows_present(problem), problem.n_features, index=g.index, live=problem.live)
        return J
    return clip_steps(k, problem.groups, problem.live, who)


def _rows_present(problem: Problem) -> int:
    """The rows of a ``gram=False`` problem: those of positive weight when its weights are concrete
    (rows of weight 0 are absent — padding to a shape bucket, a cross-validation fold), else all
    of Z's rows (inside a user's ``jit`` the weights are not known before the run)."""
    n = problem.Z.shape[0]
    if problem.weights is None or is_traced(problem.weights):
        return n
    return max(1, int((host_array(problem.weights) > 0).sum()))


def usable_groups(groups, live) -> int | None:
    """Number of groups with at least one live coordinate (on the host), or None when ``live`` or
    the groups are traced (inside a user's ``jit``: the count is not known before the run)."""
    if is_traced((live, groups.index, groups.mask)):
        return None
    live = host_array(live)
    index, mask = np.asarray(groups.index), np.asarray(groups.mask)
    padded = np.append(live, False)  # index is padded with D: a False entry
    return int((padded[np.minimum(index, live.shape[0])] & mask).any(axis=1).sum())


def clip_steps(k, groups, live, who: str) -> int:
    """``k`` (≥ 1) capped at the usable groups — the library's one rule
    (:func:`~jaxselect._validation.clip_k`: a ``UserWarning`` naming k and the count, all usable
    groups kept) — and at J when the count is not known (traced)."""
    k = check_int(k, "k", low=1)
    n_usable = usable_groups(groups, live)
    if n_usable is None:
        return min(k, groups.n_groups)
    unit = "features" if groups.max_size == 1 else "groups"
    return clip_k(k, n_usable, who, unit=unit)


def _capacities(problem: Problem, steps: int):
    """(solver slots P, raw slots R or None): slot paths (raw slots) for ``gram=False`` problems."""
    g = problem.groups
    capacity = slot_capacity(g.mask, steps, problem.n_features, index=g.index, live=problem.live)
    if problem.C is not None:
        return capacity, None
    return capacity, raw_slot_capacity(g.mask, steps, problem.n_features, index=g.index, live=problem.live)


def sequencing_run(
    problem: Problem, rule: Rule | Callable, params: RuleParams | None = None, *, k=None, progress: bool = False
) -> SelectionPath:
    """Run ``k`` steps of a selection rule in one compiled program and return the anytime path.

    ``cs_omp``, ``cs_fr``, ``doubling`` and ``fixed_order_path`` are this driver with their rules:
    :func:`sequencing_solver` run by the library's one driver (:func:`jaxselect.solver.run`).
    A custom rule may be passed as a :class:`Rule` (``Rule(select, name, needs_schur)``; a
    module-level ``select``, so the compiled solver is reused) or a plain
    ``rule(problem, state, params) -> (group, take)`` function. ``progress=True`` shows a ``tqdm``
    bar (optional package, the ``[progress]`` extra): the steps then run in about 20 compiled
    chunks with the bar updated between them; the default runs one compiled program.

    >>> import numpy as np, jaxselect as js
    >>> from jaxselect.sequencing import sequencing_run, omp_rule, rule_params
    >>> X = np.random.default_rng(0).normal(size=(100, 4)); y = X @ np.array([1.0, 0.0, 2.0, 0.0])
    >>> problem = js.prepare(X, y)
    >>> sequencing_run(problem, omp_rule, rule_params(problem), k=2).order.tolist()
    [2, 0]
    """
    check_problem(problem)
    rule = as_rule(rule)
    params = default_params(problem) if params is None else params
    steps = _steps(problem, k, rule.name)
    capacity, raw_capacity = _capacities(problem, steps)
    solver = sequencing_solver(rule, capacity=capacity, raw_capacity=raw_capacity)
    return run(solver, problem, params, n_steps=steps, progress=progress)


@any_mesh
def fixed_order_path(problem: Problem, order) -> SelectionPath:
    """The anytime path of a given group order: ridge refits on every prefix of ``order``.

    Used to turn any ranking of groups (group-lasso entry order, an oracle reordering, a user's
    hand-made sequence) into a :class:`SelectionPath`. Entries −1 end the path early.

    Args:
      problem: from :func:`jaxselect.prepare`.
      order: (m,) distinct group indices in 0..J−1, optionally followed by −1 entries (may be traced).

    Returns:
      A :class:`SelectionPath` of m prefixes (cost +inf after the first −1).

    Raises:
      ValueError: repeated or out-of-range group indices, or a non-1-D ``order``.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 4)); y = X @ np.array([1.0, 0.0, 2.0, 0.0])
    >>> path = js.fixed_order_path(js.prepare(X, y), [2, 0, -1, -1])
    >>> path.order.tolist(), path.cum_cost.tolist()
    ([2, 0, -1, -1], [1.0, 2.0, inf, inf])
    """
    check_problem(problem)
    if is_traced(order):  # a user's traced order: what its shape and dtype say
        if jnp.ndim(order) != 1 or not jnp.issubdtype(jnp.result_type(order), jnp.integer):
            raise ValueError("order must be a 1-D integer array of group indices")
    else:  # a host value: every value check, before anything is traced
        order = np.asarray(order)
        _check_order(order, problem.n_groups)
    return fixed_order(problem, order)


def fixed_order(problem: Problem, order) -> SelectionPath:
    """:func:`fixed_order_path` without input checks, for an ``order`` built by the library (e.g. the
    group-lasso entry order, valid by construction; traced or not)."""
    params = default_params(problem, order=order)
    steps = int(jnp.shape(order)[0])
    capacity, raw_capacity = _capacities(problem, steps)
    solver = sequencing_solver(fixed_order_rule, capacity=capacity, raw_capacity=raw_capacity)
    return run(solver, problem, params, n_steps=steps)


def _check_order(order: np.ndarray, J: int) -> None:
    if order.ndim != 1 or order.size < 1:
        raise ValueError(f"order must be a non-empty 1-D array of group indices; got shape {order.shape}")
    if order.dtype.kind not in "iu":
        raise TypeError(f"order must hold integer group indices; got dtype {order.dtype}")
    taken = order[order >= 0]
    if (order < -1).any() or (taken >= J).any():
        raise ValueError(f"order entries must be group indices in 0..{J - 1} (or −1 to stop)")
    if (order[: taken.size] < 0).any():
        raise ValueError("order may end with −1 entries but not contain −1 before a group index")
    if len(np.unique(taken)) != len(taken):
        raise ValueError("order must not repeat a group")
    if order.size > J:
        raise ValueError(f"order has {order.size} entries but there are only {J} groups")


def _group_sizes(mask, index=None, live=None):
    """Concrete (J,) sizes of the groups (live coordinates only when ``live`` is given), or None when traced."""
    try:
        mask = np.asarray(mask)
        if live is None or index is None:
            return mask.sum(axis=1)
        live = np.asarray(live)
        index = np.asarray(index)
        inside = (index >= 0) & (index < live.shape[0])
        return (mask & inside & live[np.where(inside, index, 0)]).sum(axis=1)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def slot_capacity(mask, k: int, n_features: int | None = None, *, index=None, live=None) -> int:
    """Static number of feature slots a k-step path needs: the k largest groups' sizes + one pad block.

    With ``index`` and ``live`` (the problem's group table and live coordinates) only the live
    coordinates count — the groups actually reachable: inert coordinates never take a slot and
    groups with no live coordinate are never selected.

    Args:
      mask: (J, s) the group table's mask (concrete; a traced mask falls back to ``k·s`` slots,
        capped at ``n_features``).
      k: number of steps.
      n_features: D, used by the traced fallback.
      index, live: optional (J, s) group table and (D,) live mask of a :class:`~jaxselect.Problem`.
    """
    s_max = mask.shape[1]
    sizes = _group_sizes(mask, index, live)
    if sizes is None:  # traced groups (e.g. vmap over problems)
        used = k * s_max if n_features is None else min(n_features, k * s_max)
    else:
        used = int(np.sort(sizes)[::-1][:k].sum())
    return used + s_max


def raw_slot_capacity(mask, k: int, n_features: int, *, index=None, live=None) -> int:
    """Static number of raw-feature slots of a k-step slot path (:class:`~jaxselect.SelectionPath`):
    every feature of the k largest selectable groups, plus one slot that always stays empty."""
    full = _group_sizes(mask)
    reach = _group_sizes(mask, index, live)
    if full is None or reach is None:
        return min(n_features, k * mask.shape[1]) + 1
    full = np.where(reach > 0, full, 0)
    return int(np.sort(full)[::-1][:k].sum()) + 1


def lean_steps(mask, n_rows: int, n_features: int, *, index=None, live=None) -> int:
    """Default number of steps of a ``gram=False`` path: the most steps whose slots (live coordinates
    of the largest groups) fit in ``min(n, D)``, so the solver state (P×D factor rows, P×P factor,
    the path's m×P×T slot coefficients) stays O(n·D), the size of the design it already holds.
    At least 1, at most J."""
    sizes = _group_sizes(mask, index, live)
    J, s_max = mask.shape
    cap = max(1, min(int(n_rows), int(n_features)))
    if sizes is None:
        return max(1, min(J, cap // max(1, s_max)))
    used = np.cumsum(np.sort(sizes)[::-1])
    return max(1, min(J, int(np.searchsorted(used, cap, side="right"))))


def selectable_groups(index: jax.Array, mask: jax.Array, live: jax.Array) -> jax.Array:
    """(J,) bool: groups with at least one live coordinate; the others (constant columns, dropped
    whitening directions only) are inert and never selected, by every greedy solver."""
    return jnp.any(jnp.take(live, index, mode="fill", fill_value=False) & mask, axis=1)


#: the solver capacities of a path (shared with the group lasso's refits)
capacities = _capacities
