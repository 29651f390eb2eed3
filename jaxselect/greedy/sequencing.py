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
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular

from jaxselect._validation import check_choice, check_float, check_int
from jaxselect.linalg import gather_groups
from jaxselect.path import SelectionPath
from jaxselect.prepare import Problem, check_problem, to_raw_coef

__all__ = ["cs_omp", "cs_fr", "doubling", "fixed_order_path", "SequencingState"]

OMP_CRITERIA = ("whiten", "no_whiten", "single")


class SequencingState(NamedTuple):
    """Scan carry of the sequencing solvers (fixed shapes; P = slot capacity)."""

    K: jax.Array  # (P, D) rows of the partial Cholesky factor, L⁻¹ C_{S,:}
    beta: jax.Array  # (P, T) L⁻¹ b0_S
    b: jax.Array  # (D, T) gradient b0 − C_{:,S} w(S)
    schur: jax.Array  # (J, s, s) M_g = C_gg − C_gS C_S⁻¹ C_Sg (FR / Doubling)
    U: jax.Array  # (P, P) = K[:, S] = Lᵀ, the upper Cholesky factor of C_S in slot order, identity-padded
    slot_feature: jax.Array  # (P,) int32 feature of each slot, D when empty
    selected: jax.Array  # (J,) bool
    count: jax.Array  # () int32 number of filled slots
    cum_cost: jax.Array  # () cost of the selected groups
    F: jax.Array  # () explained variance F(S)


class StepInfo(NamedTuple):
    group: jax.Array
    cum_cost: jax.Array
    objective: jax.Array
    w: jax.Array  # (D, T) problem-space model after the step


def _slot_capacity(problem: Problem, max_steps: int) -> int:
    """Static number of factor rows: the features of the max_steps largest groups + one pad block."""
    mask = problem.groups.mask
    s_max = mask.shape[1]
    try:
        sizes = np.sort(np.asarray(mask).sum(axis=1))[::-1]
        used = int(sizes[:max_steps].sum())
    except jax.errors.TracerArrayConversionError:  # traced groups (vmap over problems)
        used = min(problem.n_features, max_steps * s_max)
    return used + s_max


def sequencing_init(problem: Problem, capacity: int, *, track_schur: bool) -> SequencingState:
    d, t = problem.b0.shape
    dtype = problem.b0.dtype
    J, s = problem.groups.index.shape
    return SequencingState(
        K=jnp.zeros((capacity, d), dtype),
        beta=jnp.zeros((capacity, t), dtype),
        b=problem.b0,
        schur=problem.diag_blocks if track_schur else jnp.zeros((0, s, s), dtype),
        U=jnp.eye(capacity, dtype=dtype),
        slot_feature=jnp.full((capacity,), d, jnp.int32),
        selected=jnp.zeros((J,), bool),
        count=jnp.zeros((), jnp.int32),
        cum_cost=jnp.zeros((), dtype),
        F=jnp.zeros((), dtype),
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


def _safe_cholesky(S: jax.Array, m: jax.Array) -> jax.Array:
    """Cholesky of a (s, s) block whose padded rows/columns are replaced by the identity."""
    eye = jnp.eye(S.shape[-1], dtype=S.dtype)
    pad = m[:, None] & m[None, :]
    S = jnp.where(pad, S, eye)
    # Floor the pivots at the relative rounding level so round-off never yields NaN.
    tiny = jnp.finfo(S.dtype).eps * jnp.maximum(1.0, jnp.max(jnp.abs(jnp.diagonal(S))))
    return jnp.linalg.cholesky(S + tiny * eye)


def sequencing_add(problem: Problem, state: SequencingState, h: jax.Array) -> SequencingState:
    """Append group h to the selection: block Cholesky append + gradient and Schur downdates."""
    index, mask = problem.groups.index, problem.groups.mask
    idx, m = index[h], mask[h]
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
    return SequencingState(
        K=K,
        beta=beta,
        b=b,
        schur=schur,
        U=U,
        slot_feature=slot_feature,
        selected=state.selected.at[h].set(True),
        count=count + m.sum(dtype=jnp.int32),
        cum_cost=state.cum_cost + problem.groups.costs[h],
        F=state.F + 0.5 * jnp.sum(beta_h * beta_h),
    )


def sequencing_coef(problem: Problem, state: SequencingState) -> jax.Array:
    """Problem-space ridge model w(S) (D, T) = scatter of U⁻¹ β (C_S = UᵀU, β = U⁻ᵀ b0_S)."""
    w_slots = solve_triangular(state.U, state.beta, lower=False)
    d, t = problem.b0.shape
    return jnp.zeros((d, t), w_slots.dtype).at[state.slot_feature].set(w_slots, mode="drop")


# ---------------------------------------------------------------------------------------------
# Selection criteria: (J,) scores, larger is better; selected groups are masked afterwards.


def _omp_scores(problem: Problem, state: SequencingState, criterion: jax.Array) -> jax.Array:
    """(J,) OMP scores for criterion 0 = whiten, 1 = no_whiten, 2 = single (a traced index, so the
    three variants share one compiled solver)."""
    bg = gather_groups(state.b, problem.groups.index, problem.groups.mask, axis=0)  # (J, s, T)
    white = jnp.einsum("jab,jbt->jat", problem.metric_white, bg)
    std = jnp.einsum("jab,jbt->jat", problem.metric_std, bg)
    per_feature = jnp.sum(std * std, axis=2)
    scores = jnp.stack([jnp.sum(white * white, axis=(1, 2)), jnp.sum(per_feature, axis=1), jnp.max(per_feature, axis=1)])
    return scores[criterion]


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


def _pick(scores: jax.Array, allowed: jax.Array) -> jax.Array:
    return jnp.argmax(jnp.where(allowed, scores, -jnp.inf)).astype(jnp.int32)


@partial(jax.jit, static_argnames=("method", "max_steps", "capacity"))
def _sequence(problem: Problem, c_min, forced_order, criterion, cost_sensitive, *, method, max_steps, capacity):
    costs = problem.groups.costs
    denom = jnp.where(cost_sensitive, costs, jnp.ones_like(costs))
    track_schur = method in ("fr", "doubling")
    t = problem.n_targets

    def step(state: SequencingState, j):
        remaining = ~state.selected
        if method == "omp":
            h = _pick(_omp_scores(problem, state, criterion) / denom, remaining)
        elif method == "fr":
            h = _pick(_fr_gains(problem, state) / denom, remaining)
        elif method == "doubling":
            cap = jnp.where(j == 0, c_min, state.cum_cost)
            # No remaining group under the cap: relax the cap to the cheapest remaining group.
            cheapest = jnp.min(jnp.where(remaining, costs, jnp.inf))
            cap = jnp.maximum(cap, cheapest) * (1 + 8 * jnp.finfo(costs.dtype).eps)
            h = _pick(_fr_gains(problem, state) / denom, remaining & (costs <= cap))
        else:  # forced order; −1 stops the path
            h = jnp.maximum(forced_order[j], 0).astype(jnp.int32)
        new = sequencing_add(problem, state, h)
        if method == "forced":
            take = forced_order[j] >= 0
            new = jax.tree.map(partial(jnp.where, take), new, state)
            h = jnp.where(take, h, -1)
        w = sequencing_coef(problem, new)
        cum = new.cum_cost if method != "forced" else jnp.where(h >= 0, new.cum_cost, jnp.inf)
        return new, StepInfo(h, cum, 2.0 * new.F / t, w)

    state0 = sequencing_init(problem, capacity, track_schur=track_schur)
    _, info = jax.lax.scan(step, state0, jnp.arange(max_steps))
    coef, intercept = to_raw_coef(problem.transform, info.w)
    return SelectionPath(
        order=info.group,
        cum_cost=info.cum_cost,
        objective=info.objective,
        coef=coef,
        intercept=intercept,
        null_intercept=problem.transform.y_mean,
    )


def _steps(problem: Problem, max_steps) -> int:
    J = problem.n_groups
    if max_steps is None:
        return J
    return min(check_int(max_steps, "max_steps", low=1), J)


def cs_omp(problem: Problem, *, criterion: str = "whiten", cost_sensitive: bool = True, max_steps=None) -> SelectionPath:
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
      max_steps: number of groups to sequence (default all J; values above J are clipped to J).

    Returns:
      A :class:`SelectionPath` of ``max_steps`` prefixes.

    >>> import numpy as np, jaxselect
    >>> X = np.random.default_rng(0).normal(size=(100, 4)); y = X @ np.array([1.0, 0.0, 2.0, 0.0])
    >>> path = jaxselect.cs_omp(jaxselect.prepare(X, y, jaxselect.Groups.from_ids([0, 1, 2, 3], [1.0, 1.0, 1.0, 1.0])))
    >>> path.order.tolist()[:2]
    [2, 0]
    """
    check_problem(problem)
    check_choice(criterion, "criterion", OMP_CRITERIA)
    steps = _steps(problem, max_steps)
    return _sequence(
        problem, jnp.zeros((), problem.b0.dtype), jnp.zeros((steps,), jnp.int32),
        jnp.asarray(OMP_CRITERIA.index(criterion), jnp.int32), jnp.asarray(bool(cost_sensitive)),
        method="omp",
        max_steps=steps, capacity=_slot_capacity(problem, steps),
    )


def cs_fr(problem: Problem, *, cost_sensitive: bool = True, max_steps=None) -> SelectionPath:
    """Cost-sensitive group forward regression (CS-G-FR, Hu et al. §2).

    Picks ``argmax_g [F(G_{j−1} ⊕ g) − F(G_{j−1})] / c(g)``, evaluated exactly and without refits as
    ``½ tr(b_gᵀ M_g⁻¹ b_g) / c(g)`` with the Schur complement ``M_g = C_gg − C_gS C_S⁻¹ C_Sg``,
    kept up to date by rank-s downdates. Costs about as much per step as :func:`cs_omp`.

    Args:
      problem: from :func:`jaxselect.prepare`.
      cost_sensitive: divide the gain by c(g) (False: plain group forward regression).
      max_steps: number of groups to sequence (default all J).

    >>> import numpy as np, jaxselect
    >>> X = np.random.default_rng(0).normal(size=(100, 4)); y = X @ np.array([1.0, 0.0, 2.0, 0.0])
    >>> jaxselect.cs_fr(jaxselect.prepare(X, y)).order.tolist()[:2]
    [2, 0]
    """
    check_problem(problem)
    steps = _steps(problem, max_steps)
    return _sequence(
        problem, jnp.zeros((), problem.b0.dtype), jnp.zeros((steps,), jnp.int32),
        jnp.zeros((), jnp.int32), jnp.asarray(bool(cost_sensitive)),
        method="fr",
        max_steps=steps, capacity=_slot_capacity(problem, steps),
    )


def doubling(problem: Problem, *, c_min=None, max_steps=None) -> SelectionPath:
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
      max_steps: number of groups to sequence (default all J).
    """
    check_problem(problem)
    steps = _steps(problem, max_steps)
    if c_min is None:
        c_min = jnp.min(problem.groups.costs)
    else:
        c_min = check_float(c_min, "c_min", low=0.0, strict_low=True)
    return _sequence(
        problem, jnp.asarray(c_min, problem.b0.dtype), jnp.zeros((steps,), jnp.int32),
        jnp.zeros((), jnp.int32), jnp.asarray(True),
        method="doubling",
        max_steps=steps, capacity=_slot_capacity(problem, steps),
    )


def fixed_order_path(problem: Problem, order) -> SelectionPath:
    """The anytime path of a given group order: ridge refits on every prefix of ``order``.

    Used to turn any ranking of groups (group-lasso entry order, an oracle reordering, a user's
    hand-made sequence) into a :class:`SelectionPath`. Entries −1 end the path early.

    Args:
      problem: from :func:`jaxselect.prepare`.
      order: (m,) distinct group indices in 0..J−1, optionally followed by −1 entries.
    """
    check_problem(problem)
    order = np.asarray(order)
    J = problem.n_groups
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
    steps = int(order.size)
    return _sequence(
        problem, jnp.zeros((), problem.b0.dtype), jnp.asarray(order, jnp.int32),
        jnp.zeros((), jnp.int32), jnp.asarray(True),
        method="forced",
        max_steps=steps, capacity=_slot_capacity(problem, steps),
    )
