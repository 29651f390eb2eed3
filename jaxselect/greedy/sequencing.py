"""Cost-sensitive feature-group sequencing: CS-G-OMP, CS-G-FR and the Doubling algorithm.

Hu, Grubb, Bagnell & Hebert, "Efficient Feature Group Sequencing for Anytime Linear Prediction"
(Algorithm 1, its FR variant, Algorithm 2; Theorems 3.2 and 4.3). With S the selected features,
``w(S) = C_S⁻¹ b0_S``, ``F(S) = ½ b0_Sᵀ C_S⁻¹ b0_S`` and the gradient ``b_g = b0_g − C_gS w(S)``:

* CS-G-OMP picks ``argmax_g b_gᵀ (X_gᵀX_g/n)⁻¹ b_g / c(g)`` (= ‖b_g‖²/c(g) on whitened groups);
  variants ``no_whiten`` (‖b_g‖²/c(g) on standardised features), ``single`` (‖b_g‖∞²/c(g)) and
  cost-blind G-OMP (``cost_sensitive=False``: every c(g) = 1 in the criterion).
* CS-G-FR picks ``argmax_g ½ tr(b_gᵀ M_g⁻¹ b_g) / c(g)`` with the Schur complement
  ``M_g = C_gg − C_gS C_S⁻¹ C_Sg``; this is exactly the gain ``F(S ∪ g) − F(S)``.
* Doubling is FR restricted to groups with ``c(g) ≤ c(G_{j−1})`` (first pick ``c(g) ≤ c_min``).

Implementation (moment space, no refactorisation): the solver keeps a partial block Cholesky
factor of C in selection order, ``K = L⁻¹ C_{S,:}`` (P × D, rows = selected slots), and
``β = L⁻¹ b0_S``. Then ``b = b0 − Kᵀβ``, ``F(S) = ½‖β‖²`` and ``M_g = C_gg − K_gᵀK_g``. Adding
group h appends ``Q = L_h⁻¹ (C_{h,:} − K_hᵀK)`` (L_h the Cholesky factor of M_h) and
``β_h = L_h⁻¹ b_h``: O(P·D·s) per step, independent of n once C is formed. In ``gram=False`` mode
the row block ``C_{h,:}`` is computed from the design, O(n·D·s) per step. A fixed-length
``lax.scan`` runs the steps; candidates are scored for all groups at once over the padded table.

Advanced API (blackjax style): :class:`SequencingState`, :func:`sequencing_init`,
:func:`sequencing_step` and :func:`sequencing_run` take a *selection rule* — :func:`omp_rule`,
:func:`fr_rule`, :func:`doubling_rule` or :func:`fixed_order_rule`, or a function of your own with
the signature ``rule(problem, state, params) -> (group, take)`` — and its :class:`RuleParams`.
Groups made only of inert coordinates (constant columns, dropped whitening directions) are never
selected; once no selectable group is left the remaining steps are empty (order −1).
"""

from __future__ import annotations

from functools import partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular

from jaxselect._budget import kahan_add
from jaxselect._repr import short_repr
from jaxselect._validation import as_hyper, check_choice, check_int, is_traced
from jaxselect.greedy.criteria import OMP_CRITERIA, omp_scores, selectable_groups, slot_capacity
from jaxselect.linalg import gather_groups
from jaxselect.path import SelectionPath, link_code
from jaxselect.prepare import Problem, check_problem, to_raw_coef
from jaxselect.status import ILL_CONDITIONED, NONFINITE

__all__ = [
    "cs_omp",
    "cs_fr",
    "doubling",
    "fixed_order_path",
    "SequencingState",
    "StepInfo",
    "RuleParams",
    "rule_params",
    "sequencing_init",
    "sequencing_step",
    "sequencing_run",
    "omp_rule",
    "fr_rule",
    "doubling_rule",
    "fixed_order_rule",
]


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

    __repr__ = short_repr


class StepInfo(NamedTuple):
    """Per-step output of :func:`sequencing_step`."""

    group: jax.Array  # () int32, −1 for an empty step
    cum_cost: jax.Array  # () (+inf for an empty step)
    objective: jax.Array  # () 2·F/T
    w: jax.Array  # (D, T) problem-space model after the step

    __repr__ = short_repr


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


def rule_params(problem: Problem, *, criterion: str = "whiten", cost_sensitive: bool = True, c_min=None,
                order=None) -> RuleParams:
    """Build :class:`RuleParams` (defaults: whitened criterion, cost-sensitive, c_min = cheapest cost)."""
    check_choice(criterion, "criterion", OMP_CRITERIA)
    dtype = problem.b0.dtype
    c_min = jnp.min(problem.groups.costs).astype(dtype) if c_min is None else jnp.asarray(c_min, dtype)
    order = jnp.zeros((1,), jnp.int32) if order is None else jnp.asarray(order, jnp.int32)
    return RuleParams(
        jnp.asarray(OMP_CRITERIA.index(criterion), jnp.int32), jnp.asarray(bool(cost_sensitive)), c_min, order
    )


def sequencing_init(problem: Problem, capacity: int, *, track_schur: bool) -> SequencingState:
    """The empty selection: ``b = b0``, no factor rows, identity-padded U.

    Args:
      problem: a :class:`~jaxselect.Problem`.
      capacity: static number of feature slots P (:func:`jaxselect.greedy.criteria.slot_capacity`).
      track_schur: keep the per-group Schur complements (needed by FR and Doubling).
    """
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
    )


def _c_rows(problem: Problem, idx: jax.Array, m: jax.Array) -> jax.Array:
    """Rows C[idx, :] (s, D) of the regularised covariance, zero on padding."""
    if problem.C is not None:
        rows = jnp.take(problem.C, idx, axis=0, mode="fill", fill_value=0)
    else:
        Zh = jnp.take(problem.Z, idx, axis=1, mode="fill", fill_value=0)  # (n, s)
        rows = jax.lax.dot_general(Zh, problem.Z, (((0,), (0,)), ((), ()))) / problem.n_samples
        diag = jnp.where(problem.live, problem.l2, jnp.ones_like(problem.b0[:, 0]))
        rows = rows.at[jnp.arange(idx.shape[0], dtype=jnp.int32), idx].add(
            jnp.take(diag, idx, mode="fill", fill_value=0), mode="drop"
        )
    return rows * m[:, None].astype(rows.dtype)


def _pivot_floor(S: jax.Array) -> jax.Array:
    """The pivot floor of :func:`_safe_cholesky`: machine epsilon relative to the block's scale."""
    return jnp.finfo(S.dtype).eps * jnp.maximum(1.0, jnp.max(jnp.abs(jnp.diagonal(S))))


def _safe_cholesky(S: jax.Array, m: jax.Array) -> jax.Array:
    """Cholesky of a (s, s) block whose padded rows/columns are replaced by the identity."""
    eye = jnp.eye(S.shape[-1], dtype=S.dtype)
    pad = m[:, None] & m[None, :]
    S = jnp.where(pad, S, eye)
    # Floor the pivots at the relative rounding level so round-off never yields NaN.
    return jnp.linalg.cholesky(S + _pivot_floor(S) * eye)


def sequencing_add(problem: Problem, state: SequencingState, h: jax.Array, take=True) -> SequencingState:
    """Append group h to the selection: block Cholesky append + gradient and Schur downdates.

    With ``take`` False (a traced bool) the group's mask is empty, so every update writes zeros or
    identity padding where the state already has them: an exact no-op without a select over the
    whole state. Sets the ILL_CONDITIONED status flag when a pivot of the new block falls to the
    floor (the group is numerically dependent on the selection).
    """
    index, mask = problem.groups.index, problem.groups.mask
    idx, m = index[h], mask[h] & take
    P = state.K.shape[0]
    s = idx.shape[0]
    dtype = state.K.dtype
    Kh = jnp.take(state.K, idx, axis=1, mode="fill", fill_value=0)  # (P, s)
    rows = _c_rows(problem, idx, m)  # (s, D)
    cross = jax.lax.dot_general(Kh, state.K, (((0,), (0,)), ((), ())))  # Kh^T K, (s, D)
    R = rows - cross
    S = jnp.take(R, idx, axis=1, mode="fill", fill_value=0)  # M_h = C_hh - Kh^T Kh
    S = 0.5 * (S + S.T)
    Lh = _safe_cholesky(S, m)
    floor = _pivot_floor(jnp.where(m[:, None] & m[None, :], S, jnp.eye(s, dtype=dtype)))
    floored = jnp.any(m & (jnp.diagonal(Lh) ** 2 <= 4 * floor))
    Q = solve_triangular(Lh, R, lower=True) * m[:, None].astype(dtype)  # (s, D)
    bh = jnp.take(state.b, idx, axis=0, mode="fill", fill_value=0) * m[:, None].astype(dtype)
    beta_h = solve_triangular(Lh, bh, lower=True)  # (s, T)

    count = state.count
    K = jax.lax.dynamic_update_slice(state.K, Q, (count, jnp.zeros((), jnp.int32)))
    beta = jax.lax.dynamic_update_slice(state.beta, beta_h, (count, jnp.zeros((), jnp.int32)))
    new_slots = jnp.where(m, idx, problem.n_features).astype(jnp.int32)
    slot_feature = jax.lax.dynamic_update_slice(state.slot_feature, new_slots, (count,))
    # New columns of U = K[:, S]: the updated factor rows at the new features' columns.
    U_cols = jnp.take(K, idx, axis=1, mode="fill", fill_value=0)  # (P, s)
    eye_cols = (jnp.arange(P, dtype=jnp.int32)[:, None] == (count + jnp.arange(s, dtype=jnp.int32))[None, :]).astype(dtype)
    U_cols = jnp.where(m[None, :], U_cols, eye_cols)
    U = jax.lax.dynamic_update_slice(state.U, U_cols, (jnp.zeros((), jnp.int32), count))
    b = state.b - (beta_h.T @ Q).T

    schur = state.schur
    if schur.shape[0]:
        Qg = gather_groups(Q, index, mask, axis=1)  # (s, J, s)
        schur = schur - jnp.einsum("rja,rjb->jab", Qg, Qg)
    cost = jnp.where(take, problem.groups.costs[h].astype(dtype), jnp.zeros((), dtype))
    cum_cost, cost_carry = kahan_add(state.cum_cost, state.cost_carry, cost)
    return SequencingState(
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
        step=state.step,
        status=state.status | jnp.where(floored, ILL_CONDITIONED, 0).astype(jnp.int32),
    )


def sequencing_coef(problem: Problem, state: SequencingState) -> jax.Array:
    """Problem-space ridge model w(S) (D, T) = scatter of U⁻¹ β (C_S = UᵀU, β = U⁻ᵀ b0_S)."""
    w_slots = solve_triangular(state.U, state.beta, lower=False)
    d, t = problem.b0.shape
    return jnp.zeros((d, t), w_slots.dtype).at[state.slot_feature].set(w_slots, mode="drop")


# ---------------------------------------------------------------------------------------------
# Selection rules: rule(problem, state, params) -> (group h, take). A step with take=False
# leaves the state unchanged (an empty step, order −1).


def _remaining(problem: Problem, state: SequencingState) -> jax.Array:
    """(J,) bool: unselected groups that are not inert."""
    groups = problem.groups
    return ~state.selected & selectable_groups(groups.index, groups.mask, problem.live)


def _pick(scores: jax.Array, allowed: jax.Array):
    h = jnp.argmax(jnp.where(allowed, scores, -jnp.inf)).astype(jnp.int32)
    return h, jnp.any(allowed)


def _denominator(problem: Problem, params: RuleParams) -> jax.Array:
    costs = problem.groups.costs
    return jnp.where(params.cost_sensitive, costs, jnp.ones_like(costs))


def _fr_gains(problem: Problem, state: SequencingState) -> jax.Array:
    """Exact gains F(S ∪ g) − F(S) = ½ tr(b_gᵀ M_g⁻¹ b_g) for every group (J,)."""
    index, mask = problem.groups.index, problem.groups.mask
    bg = gather_groups(state.b, index, mask, axis=0)  # (J, s, T)
    eye = jnp.eye(index.shape[1], dtype=bg.dtype)
    schur = jnp.where(state.selected[:, None, None], eye, state.schur)
    Lg = jax.vmap(_safe_cholesky)(schur, mask)
    y = jax.vmap(partial(solve_triangular, lower=True))(Lg, bg)
    gains = 0.5 * jnp.sum(y * y, axis=(1, 2))
    return jnp.where(jnp.isfinite(gains), gains, jnp.zeros_like(gains))


def omp_rule(problem: Problem, state: SequencingState, params: RuleParams):
    """CS-G-OMP: ``argmax_g score_g(b) / c(g)`` (criterion ``params.criterion``, Alg. 1)."""
    groups = problem.groups
    scores = omp_scores(state.b, problem.metric_white, problem.metric_std, groups.index, groups.mask, params.criterion)
    return _pick(scores / _denominator(problem, params), _remaining(problem, state))


def fr_rule(problem: Problem, state: SequencingState, params: RuleParams):
    """CS-G-FR: ``argmax_g [F(S ∪ g) − F(S)] / c(g)``."""
    gains = _fr_gains(problem, state)
    return _pick(gains / _denominator(problem, params), _remaining(problem, state))


def doubling_rule(problem: Problem, state: SequencingState, params: RuleParams):
    """Doubling (Alg. 2): FR among groups with ``c(g) ≤ c(G_{j−1})`` (first pick ``c(g) ≤ c_min``)."""
    costs = problem.groups.costs
    remaining = _remaining(problem, state)
    cap = jnp.where(state.step == 0, params.c_min, state.cum_cost)
    # No remaining group under the cap: relax the cap to the cheapest remaining group.
    cheapest = jnp.min(jnp.where(remaining, costs, jnp.inf))
    cap = jnp.maximum(cap, cheapest) * (1 + 8 * jnp.finfo(costs.dtype).eps)
    return _pick(_fr_gains(problem, state) / _denominator(problem, params), remaining & (costs <= cap))


def fixed_order_rule(problem: Problem, state: SequencingState, params: RuleParams):
    """The group ``params.order[step]`` (−1 ends the path)."""
    g = params.order[jnp.minimum(state.step, params.order.shape[0] - 1)]
    return jnp.maximum(g, 0).astype(jnp.int32), g >= 0


fr_rule.needs_schur = True
doubling_rule.needs_schur = True


def sequencing_step(problem: Problem, state: SequencingState, rule: Callable, params: RuleParams):
    """One step: ``rule`` picks a group, which is appended (or nothing, when ``take`` is False).

    Returns ``(state, StepInfo)``; pure and jit-able (``rule`` is a static Python function).
    """
    h, take = rule(problem, state, params)
    new = sequencing_add(problem, state, h, take)._replace(step=state.step + 1)
    w = sequencing_coef(problem, new)
    inf = jnp.full((), jnp.inf, new.cum_cost.dtype)
    info = StepInfo(jnp.where(take, h, -1), jnp.where(take, new.cum_cost, inf), 2.0 * new.F / problem.n_targets, w)
    return new, info


@partial(jax.jit, static_argnames=("rule", "k", "capacity"))
def _sequence(problem: Problem, params: RuleParams, *, rule, k, capacity):
    state0 = sequencing_init(problem, capacity, track_schur=getattr(rule, "needs_schur", False))

    def body(state, _):
        return sequencing_step(problem, state, rule, params)

    state, info = jax.lax.scan(body, state0, length=k)
    coef, intercept = to_raw_coef(problem.transform, info.w)
    finite = jnp.all(jnp.isfinite(info.objective)) & jnp.all(jnp.isfinite(coef)) & jnp.all(jnp.isfinite(intercept))
    return SelectionPath(
        order=info.group,
        cum_cost=info.cum_cost,
        objective=info.objective,
        coef=coef,
        intercept=intercept,
        null_intercept=problem.transform.y_mean,
        status=state.status | jnp.where(finite, 0, NONFINITE).astype(jnp.int32),
        link=link_code("identity"),
    )


def _steps(problem: Problem, k) -> int:
    J = problem.n_groups
    if k is None:
        return J
    return min(check_int(k, "k", low=1), J)


def sequencing_run(problem: Problem, rule: Callable, params: RuleParams | None = None, *, k=None) -> SelectionPath:
    """Run ``k`` steps of a selection rule in one jitted ``lax.scan`` and return the anytime path.

    ``cs_omp``, ``cs_fr``, ``doubling`` and ``fixed_order_path`` are this driver with their rules.
    A custom ``rule(problem, state, params) -> (group, take)`` may be passed (a module-level function,
    so the compiled solver is reused; set ``rule.needs_schur = True`` if it reads ``state.schur``).

    >>> import numpy as np, jaxselect as js
    >>> from jaxselect.greedy import sequencing_run, omp_rule, rule_params
    >>> X = np.random.default_rng(0).normal(size=(100, 4)); y = X @ np.array([1.0, 0.0, 2.0, 0.0])
    >>> problem = js.prepare(X, y)
    >>> sequencing_run(problem, omp_rule, rule_params(problem), k=2).order.tolist()
    [2, 0]
    """
    check_problem(problem)
    if not callable(rule):
        raise TypeError(f"rule must be a selection rule function (e.g. omp_rule); got {rule!r}")
    params = rule_params(problem) if params is None else params
    steps = _steps(problem, k)
    capacity = slot_capacity(problem.groups.mask, steps, problem.n_features)
    return _sequence(problem, params, rule=rule, k=steps, capacity=capacity)


def cs_omp(problem: Problem, *, criterion: str = "whiten", cost_sensitive: bool = True, k=None) -> SelectionPath:
    """Cost-sensitive group orthogonal matching pursuit (Hu et al., Algorithm 1).

    At step j, with the ridge model w(G_{j−1}) refitted on the selected groups, every remaining
    group g is scored by its gradient ``b_g = b0_g − C_{g,S} w`` per unit cost:

    * ``"whiten"``: ``b_gᵀ (X_gᵀX_g/n)⁻¹ b_g / c(g)`` (= ‖b_g‖²/c(g) on whitened groups);
    * ``"no_whiten"``: ``‖b_g‖² / c(g)`` with b_g w.r.t. the standardised (not whitened) features;
    * ``"single"``: ``‖b_g‖∞² / c(g)``, the best single feature of the group.

    For T > 1 targets the squared norms are Frobenius norms. ``cost_sensitive=False`` gives the
    cost-blind G-OMP of the paper's comparisons (costs still accumulate in ``cum_cost``).

    Args:
      problem: from :func:`jaxselect.prepare`.
      criterion: one of "whiten", "no_whiten", "single".
      cost_sensitive: divide the criterion by c(g).
      k: number of groups to sequence (default all J; values above J are clipped to J).

    Returns:
      A :class:`SelectionPath` of ``k`` prefixes (``status`` flags a floored pivot or NaN).

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 4)); y = X @ np.array([1.0, 0.0, 2.0, 0.0])
    >>> path = js.cs_omp(js.prepare(X, y, js.Groups.from_ids([0, 1, 2, 3], [1.0, 1.0, 1.0, 1.0])))
    >>> path.order.tolist()[:2]
    [2, 0]
    """
    check_problem(problem)
    params = rule_params(problem, criterion=criterion, cost_sensitive=cost_sensitive)
    return sequencing_run(problem, omp_rule, params, k=k)


def cs_fr(problem: Problem, *, cost_sensitive: bool = True, k=None) -> SelectionPath:
    """Cost-sensitive group forward regression (CS-G-FR, Hu et al. §2).

    Picks ``argmax_g [F(G_{j−1} ⊕ g) − F(G_{j−1})] / c(g)``, evaluated exactly and without refits as
    ``½ tr(b_gᵀ M_g⁻¹ b_g) / c(g)`` with the Schur complement ``M_g = C_gg − C_gS C_S⁻¹ C_Sg``,
    kept up to date by rank-s downdates. Costs about as much per step as :func:`cs_omp`.

    Args:
      problem: from :func:`jaxselect.prepare`.
      cost_sensitive: divide the gain by c(g) (False: plain group forward regression).
      k: number of groups to sequence (default all J).

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 4)); y = X @ np.array([1.0, 0.0, 2.0, 0.0])
    >>> js.cs_fr(js.prepare(X, y)).order.tolist()[:2]
    [2, 0]
    """
    check_problem(problem)
    return sequencing_run(problem, fr_rule, rule_params(problem, cost_sensitive=cost_sensitive), k=k)


def doubling(problem: Problem, *, c_min=None, k=None) -> SelectionPath:
    """The Doubling algorithm (Hu et al., Algorithm 2): FR whose total cost at most doubles per step.

    Step 1 picks the best gain per cost among groups with ``c(g) ≤ c_min``; step j among the
    remaining groups with ``c(g) ≤ c(G_{j−1})``. Under the paper's "doubling capable" assumption
    this gives ``F(G_⌊B⌋) > (1 − e^{−γ²/(1+γ)}) F(S_⌊B/4⌋)`` for every budget B > c_min
    (Theorem 4.3).

    When no remaining group fits under the cap (the data are not doubling capable — the paper
    assumes this never happens) the cap is relaxed to the cost of the cheapest remaining group, i.e.
    the step chooses among the cheapest remaining groups. This is the smallest violation of the cap
    that lets the sequence continue; the bound holds at every budget reached before it happens.

    Args:
      problem: from :func:`jaxselect.prepare`.
      c_min: cap of the first pick (default: the cheapest group's cost).
      k: number of groups to sequence (default all J).
    """
    check_problem(problem)
    if c_min is not None:
        c_min = as_hyper(c_min, "c_min", problem.b0.dtype, low=0.0, strict_low=True)
    return sequencing_run(problem, doubling_rule, rule_params(problem, c_min=c_min), k=k)


def fixed_order_path(problem: Problem, order) -> SelectionPath:
    """The anytime path of a given group order: ridge refits on every prefix of ``order``.

    Used to turn any ranking of groups (group-lasso entry order, an oracle reordering, a user's
    hand-made sequence) into a :class:`SelectionPath`. Entries −1 end the path early.

    Args:
      problem: from :func:`jaxselect.prepare`.
      order: (m,) distinct group indices in 0..J−1, optionally followed by −1 entries.
    """
    check_problem(problem)
    J = problem.n_groups
    if is_traced(order):  # inside a user's jit: shapes only (group_lasso_path builds its order traced)
        if jnp.ndim(order) != 1 or not jnp.issubdtype(jnp.result_type(order), jnp.integer):
            raise ValueError("order must be a 1-D integer array of group indices")
    else:
        _check_order(np.asarray(order), J)
    params = rule_params(problem, order=order)
    steps = int(order.shape[0] if is_traced(order) else np.shape(order)[0])
    capacity = slot_capacity(problem.groups.mask, steps, problem.n_features)
    return _sequence(problem, params, rule=fixed_order_rule, k=steps, capacity=capacity)


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
