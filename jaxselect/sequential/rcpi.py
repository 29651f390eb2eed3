"""Rollout Classification Policy Iteration (RCPI) for the datum-wise sparse model.

Dulac-Arnold et al. (2012), §3.4 (RCPI, after Lagoudakis & Parr 2003: "termination once performance
of a new policy no longer significantly improves", a "final policy" for inference), §6.1 (10 states
per training example, 10 iterations, α-mixture with α = 0.7, footnote 11) and §5.1 (complexity
``O(N_s · T · (n + c)²)`` per iteration).

Advanced API (blackjax style): :func:`rcpi_problem` standardises the training data once,
:func:`rcpi_init` gives the :class:`RCPIState` (θ_0: classify at once as the cheapest class),
:func:`rcpi_step` is one policy iteration ``(key, state, problem) -> (state, info)`` and
:func:`rcpi_evaluate` the datum-wise loss of an iterate's greedy policy on the training rows;
:func:`dwsm_fit` is the driver, a jitted ``lax.scan`` of ``rcpi_step`` over split keys that returns
the iterate with the lowest training datum-wise loss.

One iteration t (:func:`rcpi_step`):

1. **States** (``policy_states`` of the S states of every training row; :func:`trajectory_states`):
   states *visited by the rollout policy*. The row's mixture component (step 4) is run from z = 0
   and the state is a prefix of its acquisitions, of length k ~ U{0, …, L}; with probability
   ``explore`` one more allowed unit is added (a one-step deviation). The remaining states follow the
   paper's "uniform binomial" (:func:`sample_states`): the number of acquired units k ~ U{0, …, J}
   and then a uniformly random set of k units (z_j ~ Bernoulli(p), p ~ U(0, 1)), the S states of one
   row stratified over the levels (state r has k = ⌊(r(K+1) + w)/S⌋, w ~ U{0..K}). Only acquirable
   units are drawn (units whose features are all constant never are); K is their number, or with a
   hard budget B the largest number of them whose costs fit in B, and units that would overflow B
   are dropped, so every sampled state is feasible. :func:`dwsm_fit` uses policy states only
   (``states="policy"``); ``states="uniform"`` is the paper's sampling.
   *Why:* a linear score shares one weight per feature across all subsets; fitted on uniform
   subsets (≈ J/2 features each) the classification scores are poor on the small subsets where a
   sparse policy stops, so acquiring looked worse than classifying at once and the policy collapsed
   (issue 14: WDBC, 30 correlated features).
2. **Rollouts.** For each state and each allowed action, ``Q(s, a)`` is computed exactly by one
   rollout of the current (deterministic) policy: ``Q = −C[a, y]`` for classification, and
   ``r(s, a) + return of π from T(s, a)`` for an acquisition. ``vmap`` over states × actions,
   each rollout a bounded ``while_loop`` with a done flag (:func:`~.policy.run_episode`). The
   allowed acquisitions of a row's S states are packed into a static number of lanes (uniform
   states: the stratification bounds it, ``Σ_r (J − ⌊r(J+1)/S⌋)`` ≈ S·J/2 without a budget; policy
   states: S·J), the score change of every unit is tabulated once per state and shared by its
   rollouts, and the lanes run ``rollout_batch`` at a time (``lax.map`` over groups of lanes and
   rows) so that each loop stops when its own rollouts end.
   With a row-sharded X (a ``NamedSharding`` splitting the rows) this step runs under
   ``jax.shard_map``: each device rolls out its own rows (the states and mixture components are
   drawn for all rows first, so results do not depend on the device count) and only the ridge
   statistics of step 3 are summed across devices (``psum``); X is never gathered.
3. **Regression.** For each action a, ridge regression of ``Q(s, a)`` on ``φ(s)`` over the m_a
   states where a is allowed, with the library's ``l2`` convention: θ_a minimises
   ``(1/m_a) Σ_s ½ (Q(s, a) − θ_a·φ_s)² + (l2/2) ‖D θ_a‖²`` (D the identity without the bias
   entry: the bias is not penalised), i.e. ``(G_a + l2·D) θ_a = b_a`` with
   ``G_a = (1/m_a) Σ_s φ_s φ_sᵀ`` and ``b_a = (1/m_a) Σ_s Q(s, a) φ_s``. (scikit-learn's
   ``Ridge(alpha)`` on the m_a states is ``l2 = alpha / m_a``.) The classification actions'
   targets ``−C[c, y]`` are exact at *any* state, so with ``terminal_weight`` w > 0 they are also
   fitted at the states where the rollouts classified (total weight w times that of the sampled
   states; deviated states do not count): the states where the classification scores decide the
   rollouts' returns. An action allowed in no sampled state keeps its previous weights; the weights
   of constant features' values are 0.
4. **α-mixture** (footnote 11: "θ_t is chosen with probability 1−α, otherwise the previous
   α-mixture policy is used"), a :class:`MixtureRule`. ``STOCHASTIC_MIXTURE`` (default, the
   paper's): the rollout policy of iteration t is the mixture of θ_0 … θ_t with weights
   ``P(θ_k) = (1−α) α^{t−k}`` (k ≥ 1), ``P(θ_0) = α^t``; the component is drawn once per sampled
   state and used for its trajectory and all its rollouts (common random numbers: the actions of a
   state are compared under the same policy; one rollout per state-action is then exact).
   ``AVERAGE_MIXTURE``: deterministic parameter averaging ``θ̄_t = α θ̄_{t−1} + (1−α) θ_t``.

The initial policy θ_0 (:func:`initial_policy`) classifies at once as the class of least mean cost.
Approximate policy iteration is not monotone: the greedy policy of an iterate can be much worse than
the mixture that generated its targets (issue 14 measured 0.628 accuracy with no feature after a
training log that improved every iteration). :func:`dwsm_fit` therefore evaluates every iterate's
deterministic greedy policy on the training rows (one batched episode per row, from z = 0) and
returns the best (``select="best"``; ``"last"``: θ_T); ``patience`` stops the iterations once that
many in a row did not improve it (the paper's termination rule).
"""

from __future__ import annotations

import itertools
import threading
from functools import partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxselect._repr import short_repr
from jaxselect.sharding import any_mesh
from jaxselect.status import NONFINITE, OK

from .._validation import (
    MIN_ROWS,
    as_float_matrix,
    as_hyper,
    as_labels,
    check_constant_mode,
    check_int,
    check_magnitudes,
    column_standardization,
    host_array,
    is_traced,
    raise_on_constant,
)
from .mdp import (
    DWSMSpec,
    acquire_allowed,
    acquire_reward,
    classify_reward,
    feature_mask,
    make_spec,
    unit_live,
    within_budget,
)
from ..prepare import as_sample_weight
from ..refit import weighted_standardization
from .policy import DWSMPolicy, phi, run_episode, unit_contribution_table

__all__ = [
    "dwsm_fit",
    "RCPIProblem",
    "RCPIState",
    "RCPIInfo",
    "rcpi_problem",
    "rcpi_init",
    "rcpi_step",
    "rcpi_evaluate",
    "initial_policy",
    "trajectory_states",
    "MixtureRule",
    "STOCHASTIC_MIXTURE",
    "AVERAGE_MIXTURE",
    "sample_states",
    "max_units_within_budget",
    "rollout_capacity",
    "row_state_action_values",
    "state_action_values",
    "mixture_weights",
    "ridge_fit",
]


# ----------------------------------------------------------------------------- α-mixture rules


class MixtureRule(NamedTuple):
    """How RCPI mixes its iterates (paper footnote 11); pass one to :func:`rcpi_step`.

    Attributes:
      weights: ``(t, K, alpha) -> (K,)`` probabilities of θ_0..θ_{K-1} in the rollout policy of
        iteration t (components after t: 0).
      update: ``(theta_prev, theta_new, alpha) -> θ_{t+1}``, the iterate stored after the ridge fit.
    """

    weights: Callable
    update: Callable


def _stochastic_weights(t, n_components: int, alpha):
    k = jnp.arange(n_components, dtype=jnp.int32)
    alpha = jnp.asarray(alpha)
    expo = (jnp.asarray(t) - k).astype(alpha.dtype)
    w = jnp.where(k == 0, alpha**expo, (1 - alpha) * alpha**expo)
    return jnp.where(k <= t, w, jnp.zeros_like(w))


def _last_weights(t, n_components: int, alpha):
    k = jnp.arange(n_components, dtype=jnp.int32)
    return (k == jnp.asarray(t)).astype(jnp.asarray(alpha).dtype)


def _keep_new(theta_prev, theta_new, alpha):
    return theta_new


def _average_update(theta_prev, theta_new, alpha):
    return alpha * theta_prev + (1 - alpha) * theta_new


#: The paper's stochastic α-mixture: rollouts of iteration t use θ_k with prob. (1−α)α^{t−k}.
STOCHASTIC_MIXTURE = MixtureRule(_stochastic_weights, _keep_new)
#: Parameter averaging θ̄_t = α θ̄_{t−1} + (1−α) θ_t; rollouts use θ̄_t.
AVERAGE_MIXTURE = MixtureRule(_last_weights, _average_update)
_MIXTURES = {"stochastic": STOCHASTIC_MIXTURE, "average": AVERAGE_MIXTURE}


def _as_mixture(mixture) -> MixtureRule:
    if isinstance(mixture, MixtureRule):
        return mixture
    if isinstance(mixture, str) and mixture in _MIXTURES:
        return _MIXTURES[mixture]
    raise ValueError(f"mixture must be 'stochastic' or 'average' (or a MixtureRule); got {mixture!r}")


def mixture_weights(t, n_components: int, alpha, mixture="stochastic") -> jax.Array:
    """(K,) probabilities of θ_0..θ_{K-1} in the rollout policy of iteration t (components > t: 0).

    ``"stochastic"``: ``P(θ_k) = (1−α) α^{t−k}`` for 1 ≤ k ≤ t and ``P(θ_0) = α^t``;
    ``"average"``: all mass on θ_t (which already holds the parameter average).
    """
    return _as_mixture(mixture).weights(t, n_components, alpha)


# ----------------------------------------------------------------------------- states


def max_units_within_budget(spec: DWSMSpec) -> jax.Array:
    """() int32: the most acquirable units a state can hold, the cheapest ones that fit the budget."""
    J = spec.groups.costs.shape[0]
    costs = spec.groups.costs
    n_live = jnp.sum(spec.live, dtype=jnp.int32)
    cheapest = jnp.sort(jnp.where(spec.live, costs, jnp.asarray(jnp.inf, costs.dtype)))
    fits = within_budget(jnp.cumsum(cheapest), jnp.zeros((), costs.dtype), spec.budget)
    return jnp.sum((jnp.arange(J, dtype=jnp.int32) < n_live) & fits, dtype=jnp.int32)


def sample_states(key: jax.Array, spec: DWSMSpec, n_rows: int, states_per_example: int, kmax=None) -> jax.Array:
    """Random acquired-unit masks, (n_rows, S, J) bool, S = ``states_per_example``.

    ``kmax`` defaults to :func:`max_units_within_budget` (traced: budgets share one compiled fit).

    The number of units k of state r of a row is ``⌊(r (kmax+1) + w) / S⌋`` with w ~ U{0..kmax}:
    marginally k ~ U{0, …, kmax} (the "uniform binomial": z_j ~ Bernoulli(p), p ~ U(0, 1)), and
    the S states of one row are stratified over the sparsity levels. The k units are a uniformly
    random subset of the acquirable (``spec.live``) units; once their summed cost would pass the
    budget the remaining ones are skipped.
    """
    J = spec.groups.costs.shape[0]
    costs = spec.groups.costs
    S = states_per_example
    if kmax is None:
        kmax = max_units_within_budget(spec)
    k1, k2 = jax.random.split(key)
    u = jax.random.uniform(k1, (n_rows, S, J))
    u = jnp.where(spec.live, u, jnp.asarray(2.0, u.dtype))  # units that cannot be acquired: last
    order = jnp.argsort(u, axis=-1).astype(jnp.int32)
    w = jax.random.randint(k2, (n_rows, S), 0, kmax + 1, dtype=jnp.int32)
    k = (jnp.arange(S, dtype=jnp.int32)[None, :] * (kmax + 1) + w) // S
    cum = jnp.cumsum(costs[order], axis=-1)
    fits = within_budget(cum, jnp.zeros((), costs.dtype), spec.budget)
    take = (jnp.arange(J, dtype=jnp.int32)[None, None, :] < k[:, :, None]) & fits
    rank = jnp.argsort(order, axis=-1)
    return jnp.take_along_axis(take, rank, axis=-1)


def trajectory_states(key, thetas, comp, spec: DWSMSpec, Xs, explore=0.0, *, batch: int = 64):
    """States visited by the current policies from the empty state: (n, m, J) bool, and (n, m) deviated.

    For datum i and slot r the greedy policy ``thetas[comp[i, r]]`` is run from z = 0 (one episode,
    :func:`~.policy.run_episode`); the state is the prefix of length k ~ U{0, …, L} of its
    acquisitions (L the number of units it acquires before classifying): the empty state, a state on
    its way, or the state where it classifies. With probability ``explore`` one more unit, drawn
    uniformly among the units allowed there, is added: a one-step deviation from the policy (flagged
    in the second output). Every state is feasible (budgets).

    Args:
      key: PRNG key; thetas: (K, A, p) policies; comp: (n, m) int index into ``thetas`` of each
        state's policy; spec: the MDP; Xs: (n, d) standardised data; explore: () probability in [0, 1];
      batch: about how many episodes run side by side in one ``while_loop``.
    """
    draws = _trajectory_draws(key, comp.shape, spec, Xs.dtype, explore)
    return _trajectory_states(thetas, comp, spec, Xs, *draws, batch=batch)


def _trajectory_draws(key, shape, spec: DWSMSpec, dtype, explore):
    """The random numbers of :func:`trajectory_states` for (n, m) states: prefix fraction, deviate, unit pick."""
    n, m = shape
    J = spec.groups.costs.shape[0]
    k1, k2, k3 = jax.random.split(key, 3)
    u = jax.random.uniform(k1, (n, m), dtype=dtype)
    e = jax.random.uniform(k2, (n, m), dtype=dtype) < jnp.asarray(explore, dtype)
    pick = jax.random.uniform(k3, (n, m, J), dtype=dtype)
    return u, e, pick


def _trajectory_states(thetas, comp, spec: DWSMSpec, Xs, u, e, pick, *, batch: int = 64):
    """:func:`trajectory_states` given its random numbers (per row: a row-sharded fit runs it on each device's rows)."""
    n, m = comp.shape
    J = spec.groups.costs.shape[0]
    costs = spec.groups.costs
    units = jnp.arange(J, dtype=jnp.int32)
    z0 = jnp.zeros((J,), bool)

    def one(x, c, ui, ei, pi):
        theta = thetas[c]
        _, _, _, order = run_episode(
            theta, spec, x, jnp.zeros((), jnp.int32), z0, jnp.zeros((), costs.dtype), theta[:, -1], track_order=True
        )
        L = jnp.sum(order >= 0, dtype=jnp.int32)
        kpos = jnp.minimum(jnp.floor(ui * (L + 1).astype(ui.dtype)).astype(jnp.int32), L)
        z = z0.at[jnp.where(units < kpos, order, J)].set(True, mode="drop")
        spent = jnp.sum(jnp.where(z, costs, jnp.zeros_like(costs)))
        ok = acquire_allowed(spec, z, spent)
        j = jnp.argmax(jnp.where(ok, pi, -1.0)).astype(jnp.int32)
        dev = ok[j] & ei
        return z | ((units == j) & dev), dev

    def row(args):
        x, c, ui, ei, pi = args
        return jax.vmap(one, in_axes=(None, 0, 0, 0, 0))(x, c, ui, ei, pi)

    # rows a few at a time (lax.map): each while loop stops when its own episodes end
    return jax.lax.map(row, (Xs, comp, u, e, pick), batch_size=max(1, min(n, int(batch) // m)))


def rollout_capacity(J: int, states_per_example: int, kmax: int, exact_sizes: bool) -> int:
    """Static number of rollout lanes per row: an upper bound on its allowed acquisitions.

    State r has at least ``⌊r (kmax+1) / S⌋`` acquired units, hence at most J minus that allowed
    acquisitions (exact when every sampled state has exactly k units, ``exact_sizes``: no budget;
    fewer acquirable units than J only lower the count).
    """
    S = states_per_example
    if not exact_sizes:
        return S * J
    return int(sum(J - (r * (kmax + 1)) // S for r in range(S)))


# ----------------------------------------------------------------------------- Q-values


def row_state_action_values(
    thetas,
    spec: DWSMSpec,
    x,
    y,
    Z,
    cap: int,
    *,
    terminal: bool = False,
    lanes_per_loop: int | None = None,
    terminal_states=None,
):
    """Exact Q(s, a) of every action in the S states (x, z_r) of one datum.

    Each state r is evaluated under its own greedy policy ``thetas[r]``. The allowed acquisitions of
    all S states are packed into ``cap`` rollout lanes (``vmap``), each a bounded while loop.

    Args:
      thetas: (S, A, p) policy of each state; spec: MDP; x: (d,) standardised datum; y: () class;
      Z: (S, J) bool acquired units; cap: static number of lanes (>= allowed acquisitions);
      terminal: also return the regression statistics of the classification actions at the
        states where the rollouts classified; lanes_per_loop: run the lanes in groups of at most
        this many, one ``while_loop`` after the other (None: all lanes in one loop);
      terminal_states: (S,) bool, the states whose rollouts' terminal states count (None: all).

    Returns:
      ``(phi, Q, allowed, correct, s0)``: φ (S, p); Q (S, A) (``−C[c, y]`` for classification,
      ``r(s, a) + rollout return`` for acquisitions, 0 where not allowed); allowed (S, A) bool;
      correct (S, A) whether the episode starting with a ends in the right class; s0 (S, A) scores.
      With ``terminal`` a sixth entry ``(m_T, b_T, G_T)``: the number of rollouts, (C, p)
      ``Σ −C[c, y] φ_T`` and (p, p) ``Σ φ_T φ_Tᵀ`` over their terminal states φ_T.
    """
    C = spec.cost_matrix.shape[0]
    S, J = Z.shape
    costs = spec.groups.costs
    zf = feature_mask(spec, Z)
    ph = jax.vmap(phi, in_axes=(None, 0))(x, zf)  # (S, p)
    s0 = jnp.einsum("sap,sp->sa", thetas, ph)
    spent = jnp.sum(jnp.where(Z, costs[None, :], jnp.zeros_like(costs)[None, :]), axis=1)
    allowed_acq = jax.vmap(acquire_allowed, in_axes=(None, 0, 0))(spec, Z, spent)  # (S, J)
    r_acq = jax.vmap(acquire_reward, in_axes=(None, 0))(spec, Z)  # (S, J)
    tables = jax.vmap(unit_contribution_table, in_axes=(0, None, None))(thetas, spec, x)  # (S, J, A)
    flat = allowed_acq.reshape(S * J)
    n_lanes = min(int(cap), S * J)
    if n_lanes < S * J:
        lanes = jnp.argsort(~flat, stable=True)[:n_lanes].astype(jnp.int32)
    else:
        lanes = jnp.arange(S * J, dtype=jnp.int32)
    units = jnp.arange(J, dtype=jnp.int32)

    def rollout(lane):
        r, j = lane // J, lane % J
        z1 = Z[r] | (units == j)
        ret, label, zT, _ = run_episode(
            None,
            spec,
            x,
            y,
            z1,
            spent[r] + costs[j],
            s0[r] + tables[r, j],
            delta_fn=lambda jj: tables[r, jj],
        )
        return ret, label == y, zT

    if lanes_per_loop is not None and n_lanes > lanes_per_loop:
        # groups of lanes one after another (lax.map): each group's while loop stops as soon as its
        # own rollouts end, instead of every lane waiting for the longest rollout of the row
        G = -(-n_lanes // int(lanes_per_loop))
        width = -(-n_lanes // G)
        padded = jnp.concatenate([lanes, jnp.zeros((G * width - n_lanes,), jnp.int32)])
        out = jax.lax.map(jax.vmap(rollout), padded.reshape(G, width))
        ret, corr, zT = jax.tree.map(lambda a: a.reshape((G * width,) + a.shape[2:])[:n_lanes], out)
    else:
        ret, corr, zT = jax.vmap(rollout)(lanes)
    ok = flat[lanes]
    if terminal:
        # where the rollouts classified: (cap, p) features and their weights
        phT = jax.vmap(phi, in_axes=(None, 0))(x, feature_mask(spec, zT))
        wT = (ok if terminal_states is None else ok & terminal_states[lanes // J]).astype(phT.dtype)
        term_stats = (jnp.sum(wT), classify_reward(spec, y)[:, None] * (wT @ phT)[None, :], (phT * wT[:, None]).T @ phT)
    ret_full = jnp.zeros((S * J,), ret.dtype).at[lanes].set(jnp.where(ok, ret, 0)).reshape(S, J)
    corr_full = jnp.zeros((S * J,), bool).at[lanes].set(ok & corr).reshape(S, J)
    q_cls = classify_reward(spec, y)
    Q = jnp.concatenate([jnp.broadcast_to(q_cls[None, :], (S, C)), jnp.where(allowed_acq, r_acq + ret_full, 0)], axis=1)
    correct = jnp.concatenate(
        [jnp.broadcast_to((jnp.arange(C, dtype=jnp.int32) == y)[None, :], (S, C)), corr_full], axis=1
    )
    allowed = jnp.concatenate([jnp.ones((S, C), bool), allowed_acq], axis=1)
    if terminal:
        return ph, Q, allowed, correct, s0, term_stats
    return ph, Q, allowed, correct, s0


def state_action_values(theta, spec: DWSMSpec, x, y, z):
    """Exact Q(s, a) of every action in one state s = (x, z) under the greedy policy θ.

    Args:
      theta: (A, p); spec: MDP; x: (d,) standardised datum; y: () class; z: (J,) bool.

    Returns:
      ``(phi, Q, allowed, correct, s0)`` as in :func:`row_state_action_values` for S = 1, squeezed.
    """
    J = spec.groups.costs.shape[0]
    out = row_state_action_values(theta[None], spec, x, y, z[None], J)
    return jax.tree.map(lambda a: a[0], out)


# ----------------------------------------------------------------------------- ridge


def _ridge_stats(Phi, Q, W, *, gram_batch: int = 8):
    """Row sums of the per-action ridge regression: ``(m, Φᵀ W Q, Φᵀ W_a Φ)``, shapes (A,), (A, p), (A, p, p).

    W (N, A) is the allowed mask, or weights (0 where not allowed). Plain sums over the N rows, so the statistics of row blocks add up (a row-sharded fit sums them
    across devices with one ``psum``).
    """
    N = Phi.shape[0]
    dt = Phi.dtype
    Wf = W.astype(dt)
    ones = jnp.ones((N,), dt)
    m = ones @ Wf  # (A,)
    Bs = (Wf * Q).T @ Phi  # (A, p)

    def gram(w):
        return (Phi * w[:, None]).T @ Phi

    Gs = jax.lax.map(gram, Wf.T, batch_size=gram_batch)  # (A, p, p)
    return m, Bs, Gs


def _ridge_solve(m, Bs, Gs, l2, theta_prev):
    """Solve the normalised ridge systems from the statistics of :func:`_ridge_stats`."""
    p = Bs.shape[1]
    dt = Bs.dtype
    msafe = jnp.where(m > 0, m, jnp.ones_like(m))
    B = Bs / msafe[:, None]
    G = Gs / msafe[:, None, None]
    D = jnp.concatenate([jnp.ones((p - 1,), dt), jnp.zeros((1,), dt)])
    G = G + (l2 * D)[None, None, :] * jnp.eye(p, dtype=dt)[None, :, :]
    G = jnp.where((m > 0)[:, None, None], G, jnp.eye(p, dtype=dt)[None, :, :])
    sol = jnp.linalg.solve(G, B[:, :, None])[:, :, 0]
    return jnp.where((m > 0)[:, None], sol, theta_prev)


def ridge_fit(Phi, Q, W, l2, theta_prev, *, gram_batch: int = 8):
    """Ridge regression of Q[:, a] on Φ over the rows where a is allowed, for every action.

    Args:
      Phi: (N, p) state features; Q: (N, A) targets; W: (N, A) bool allowed (or float state
        weights, 0 where not allowed); l2: () ridge weight;
      theta_prev: (A, p) weights kept for actions allowed in no state.

    Returns:
      (A, p) ``θ_a = (Φᵀ W_a Φ / m_a + l2 D)⁻¹ Φᵀ W_a Q_a / m_a``, D = diag(1, …, 1, 0): the
      minimiser of ``(1/m_a) Σ ½ (Q_a − Φ θ_a)² + (l2/2) ‖D θ_a‖²`` over the allowed rows.
    """
    m, Bs, Gs = _ridge_stats(Phi, Q, W, gram_batch=gram_batch)
    return _ridge_solve(m, Bs, Gs, l2, theta_prev)


def _row_axes(X, n: int):
    """Mesh axes that split the rows of X, or None (unsharded, or not evenly split by rows).

    Returns ``(mesh, axes)`` with ``axes`` a tuple of mesh axis names when X is a jax.Array with a
    ``NamedSharding`` whose first dimension is split over more than one device and n is a multiple
    of that device count; the fit then runs the rollouts of each device's rows on that device.
    """
    if not isinstance(X, jax.Array) or is_traced(X):
        return None
    sh = getattr(X, "sharding", None)
    if not isinstance(sh, NamedSharding) or not isinstance(sh.mesh, Mesh) or len(sh.spec) == 0:
        return None
    first = sh.spec[0]
    if first is None or first is PartitionSpec.UNCONSTRAINED:
        return None
    axes = tuple(first) if isinstance(first, (tuple, list)) else (first,)
    if not all(isinstance(a, str) and a in sh.mesh.shape for a in axes):
        return None
    parts = int(np.prod([sh.mesh.shape[a] for a in axes]))
    if parts <= 1 or n % parts:
        return None
    return sh.mesh, axes


# ----------------------------------------------------------------------------- advanced API


class RCPIProblem(NamedTuple):
    """The training data of RCPI, prepared once by :func:`rcpi_problem`.

    Attributes:
      X: (n, d) standardised features (constant columns are 0).
      y: (n,) int32 labels 0..C-1.
      spec: the MDP, with ``spec.live`` False for units whose features are all constant.
      mean, scale: (d,) the standardisation (``X = (X_raw − mean) / scale``; scale 1 on constant
        columns).
      live: (d,) bool, non-constant columns.
      weights: (n,) row weights in X's dtype (1 without ``sample_weight``): every sum over rows —
        the standardisation, θ_0, the ridge statistics, the evaluation — is weighted by them.
    """

    X: jax.Array
    y: jax.Array
    spec: DWSMSpec
    mean: jax.Array
    scale: jax.Array
    live: jax.Array
    weights: jax.Array

    __repr__ = short_repr


class RCPIState(NamedTuple):
    """The carry of RCPI: every iterate so far (the α-mixture needs them).

    Attributes:
      thetas: (K, A, p) θ_0 = 0, θ_1, …, θ_t, then zeros (K = n_iter + 1 slots).
      t: () int32 iterations done; ``thetas[t]`` is the current policy.
    """

    thetas: jax.Array
    t: jax.Array

    __repr__ = short_repr


class RCPIInfo(NamedTuple):
    """Diagnostics of one :func:`rcpi_step` (the rollout policy from the sampled states).

    Attributes:
      mean_return: () mean return (minus the mean datum-wise loss).
      accuracy: () fraction of those episodes that end in the right class.
    """

    mean_return: jax.Array
    accuracy: jax.Array

    __repr__ = short_repr


def rcpi_problem(spec: DWSMSpec, X, y, *, standardize: bool = True, sample_weight=None) -> RCPIProblem:
    """Standardise the training data and mark the units that can be acquired.

    Pure and jit-able (``standardize`` is Python configuration). Columns are standardised with the
    library's rule (:func:`jaxselect._validation.column_standardization`): constant columns (max ==
    min) are inert — their standardised values are 0, and a unit whose features are all constant is
    never acquirable.

    Args:
      spec: the MDP from :func:`~jaxselect.sequential.make_spec`.
      X: (n, d) float raw features; y: (n,) int labels 0..C-1.
      standardize: centre and scale the columns (the paper's choice); False keeps X as it is
        (constant columns are still inert).
      sample_weight: None or (n,) row weights ``w ≥ 0``: weighted means and standard deviations,
        constant columns judged on the rows with ``w > 0``
        (:func:`~jaxselect.refit.weighted_standardization`).

    Returns:
      An :class:`RCPIProblem`.
    """
    if sample_weight is None:
        mean, scale, live = column_standardization(X)
        weights = jnp.ones((X.shape[0],), X.dtype)
    else:
        weights = jnp.asarray(sample_weight).astype(X.dtype)
        mean, scale, live = weighted_standardization(X, weights)
    if not standardize:
        mean, scale = jnp.zeros_like(mean), jnp.ones_like(scale)
    Xs = jnp.where(live[None, :], (X - mean[None, :]) / scale[None, :], jnp.zeros_like(X))
    spec = spec._replace(live=spec.live & unit_live(spec.groups, live))
    return RCPIProblem(Xs, jnp.asarray(y).astype(jnp.int32), spec, mean, scale, live, weights)


def initial_policy(problem: RCPIProblem) -> jax.Array:
    """θ_0, (A, p): classify at once as the class of least mean cost on the training rows.

    Only biases: classification row c gets ``−Σ_i w_i C[c, y_i] / Σ_i w_i`` (its exact mean reward
    at any state; w the row weights), every acquisition row one less than the best of them, so θ_0 never acquires. (Adding
    the one-feature least-squares fits as value weights, so that θ_0 classifies sensibly after a
    rollout's first acquisition, raised the held-out loss at λ = 0.03–0.1 on WDBC and ionosphere.)
    """
    spec = problem.spec
    d = problem.X.shape[1]
    dt = problem.X.dtype
    C, J = spec.cost_matrix.shape[0], spec.groups.costs.shape[0]
    w = problem.weights
    q_cls = -((spec.cost_matrix[:, problem.y].astype(dt) @ w) / jnp.sum(w))  # (C,)
    low = jnp.min(q_cls) - jnp.asarray(1.0, dt)
    bias = jnp.concatenate([q_cls, jnp.broadcast_to(low, (J,))])
    return jnp.zeros((C + J, 2 * d + 1), dt).at[:, -1].set(bias)


def rcpi_init(problem: RCPIProblem, n_iter: int) -> RCPIState:
    """θ_0 = :func:`initial_policy` (classify at once as the cheapest class) and ``n_iter`` free slots."""
    d = problem.X.shape[1]
    A = problem.spec.cost_matrix.shape[0] + problem.spec.groups.costs.shape[0]
    thetas = jnp.zeros((n_iter + 1, A, 2 * d + 1), problem.X.dtype).at[0].set(initial_policy(problem))
    return RCPIState(thetas, jnp.zeros((), jnp.int32))


def rcpi_evaluate(theta, problem: RCPIProblem, *, mesh=None, row_axes=None) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The greedy policy θ on the training rows, every episode from the empty state.

    Args:
      theta: (A, p) policy; problem: :class:`RCPIProblem`.
      mesh, row_axes: run each device's episodes on its rows of a row-sharded ``problem.X`` (as in
        :func:`rcpi_step`; both None otherwise).

    Returns:
      ``(loss, accuracy, features)``: () mean datum-wise loss (minus the mean episode return,
      paper eq. 2/4), () accuracy and () mean number of features acquired per datum (means
      weighted by ``problem.weights``).
    """
    spec = problem.spec
    dt = problem.X.dtype
    J = spec.groups.costs.shape[0]
    z0 = jnp.zeros((J,), bool)
    zero = jnp.zeros((), spec.groups.costs.dtype)

    def sums(theta, spec, X, y, w):
        def one(x, yi):
            ret, label, z, _ = run_episode(theta, spec, x, yi, z0, zero, theta[:, -1])
            return ret, label == yi, jnp.sum(feature_mask(spec, z), dtype=jnp.int32)

        ret, corr, nf = jax.vmap(one)(X, y)
        out = (w @ ret, w @ corr.astype(dt), w @ nf.astype(dt))
        return out if row_axes is None else jax.lax.psum(out, row_axes)

    args = (theta, spec, problem.X, problem.y, problem.weights)
    if row_axes is None:
        tot = sums(*args)
    else:
        rows = PartitionSpec(row_axes)
        spec_in = jax.tree.map(lambda _: PartitionSpec(), spec)
        tot = jax.shard_map(
            sums,
            mesh=mesh,
            in_specs=(PartitionSpec(), spec_in, rows, rows, rows),
            out_specs=PartitionSpec(),
            check_vma=False,
        )(*args)
    total = jnp.sum(problem.weights)
    ret, corr, nf = (v / total for v in tot)
    return -ret, corr, nf


def rcpi_step(
    key,
    state: RCPIState,
    problem: RCPIProblem,
    *,
    alpha=0.7,
    l2=0.01,
    states_per_example: int = 10,
    mixture: MixtureRule = STOCHASTIC_MIXTURE,
    rollout_batch: int = 16,
    cap: int | None = None,
    gram_batch: int = 8,
    mesh=None,
    row_axes=None,
    policy_states: int | None = None,
    terminal_weight=1.0,
    explore=0.1,
) -> tuple[RCPIState, RCPIInfo]:
    """One policy iteration: sample states, roll out every allowed action, ridge fit, α-mixture.

    Pure ``(key, state, problem) -> (state, info)``; ``jax.jit`` it with the keyword options static
    (``states_per_example``, ``mixture``, ``rollout_batch``, ``cap``, ``gram_batch``, ``mesh``,
    ``row_axes``, ``policy_states`` are Python configuration; ``alpha``, ``l2``, ``explore`` and
    ``terminal_weight`` may be traced). Its defaults are :func:`dwsm_fit`'s.

    Args:
      key: PRNG key of this iteration.
      state: :class:`RCPIState` (from :func:`rcpi_init` or the previous step; ``state.t`` must be
        below its number of slots minus one).
      problem: :class:`RCPIProblem` from :func:`rcpi_problem`.
      alpha: α-mixture weight in [0, 1). l2: ridge weight > 0 (``(1/m) Σ ½ residual² +
        (l2/2)‖θ‖²`` per action, bias not penalised).
      states_per_example: sampled states per row (S).
      mixture: :data:`STOCHASTIC_MIXTURE` (the paper's) or :data:`AVERAGE_MIXTURE` (or a name).
      rollout_batch: about how many rollouts run side by side in one ``while_loop`` (a row with more
        lanes runs them in groups).
      cap: rollout lanes per row; default ``S·J`` (always enough). Without a budget
        ``rollout_capacity(J, S − P, J, exact_sizes=True) + P·J`` (what :func:`dwsm_fit` uses, P
        the policy states) is enough too.
      gram_batch: Gram matrices built at a time.
      mesh, row_axes: run each device's rollouts on its rows of a row-sharded X (set by
        :func:`dwsm_fit`; both None otherwise).
      policy_states: how many of the S states of a row are visited by the rollout policy
        (:func:`trajectory_states`); the others are the paper's uniform states
        (:func:`sample_states`). None (default): all S; 0: the paper's sampling.
      terminal_weight: w >= 0; the classification actions are also fitted on the states where the
        rollouts classified (their targets −C[c, y] are exact there), with a total weight w times
        that of the sampled states. 0 (a Python number) skips them (the paper's regression).
      explore: probability in [0, 1] that a policy state gets one more random allowed unit
        (:func:`trajectory_states`); such deviated states enter the acquisitions' regressions only.

    Returns:
      ``(state, info)``: the state with ``thetas[t + 1]`` filled and ``t + 1``; an :class:`RCPIInfo`.
    """
    mixture = _as_mixture(mixture)
    Xs, y, spec, rw = problem.X, problem.y, problem.spec, problem.weights
    n, d = Xs.shape
    dt = Xs.dtype
    C, J = spec.cost_matrix.shape[0], spec.groups.costs.shape[0]
    A, p, k = C + J, 2 * d + 1, states_per_example
    n_pol = k if policy_states is None else int(policy_states)
    if not 0 <= n_pol <= k:
        raise ValueError(f"policy_states must be in 0..states_per_example={k}; got {policy_states}")
    n_unif = k - n_pol
    terminal = is_traced(terminal_weight) or float(terminal_weight) != 0.0
    K = state.thetas.shape[0]
    cap = k * J if cap is None else int(cap)
    parts = 1 if row_axes is None else int(np.prod([mesh.shape[a] for a in row_axes]))
    rows_per_chunk = max(1, min(n // parts, rollout_batch // cap))
    alpha = jnp.asarray(alpha, dt)
    l2 = jnp.asarray(l2, dt)
    thetas, t = state.thetas, state.t

    kz, kc, kp = jax.random.split(key, 3)
    probs = mixture.weights(t, K, alpha)
    comp = jax.random.categorical(kc, jnp.log(probs), shape=(n, k))
    parts_z, parts_d = [], []
    if n_unif > 0:
        parts_z.append(sample_states(kz, spec, n, n_unif))
        parts_d.append(jnp.zeros((n, n_unif), bool))
    if n_pol > 0:
        draws = _trajectory_draws(kp, (n, n_pol), spec, dt, explore)
        traj = partial(_trajectory_states, batch=max(rollout_batch, n_pol))
        if row_axes is None:
            zp, dev = traj(thetas, comp[:, n_unif:], spec, Xs, *draws)
        else:
            # each device runs the episodes of its own rows (the random numbers were drawn for all rows)
            rows = PartitionSpec(row_axes)
            spec_in = jax.tree.map(lambda _: PartitionSpec(), spec)
            zp, dev = jax.shard_map(
                traj,
                mesh=mesh,
                in_specs=(PartitionSpec(), rows, spec_in, rows, rows, rows, rows),
                out_specs=(rows, rows),
                check_vma=False,
            )(thetas, comp[:, n_unif:], spec, Xs, *draws)
        parts_z.append(zp)
        parts_d.append(dev)
    Z = jnp.concatenate(parts_z, axis=1) if len(parts_z) > 1 else parts_z[0]
    # deviated states teach the acquisitions only: the classification rows are fitted where the
    # policy itself goes (its states and the terminal states of its rollouts)
    cls_w = ~(jnp.concatenate(parts_d, axis=1) if len(parts_d) > 1 else parts_d[0])

    def rollouts(thetas, spec, Xs, y, Z, comp, cls_w, rw):
        # rollouts of these rows (all rows, or one device's block) and their ridge statistics;
        # every state of row i counts with the row's weight rw[i]
        nb = Xs.shape[0]

        def per_row(args):
            x, yi, zr, cr, valid, wr, wt = args
            out = row_state_action_values(
                thetas[cr], spec, x, yi, zr, cap, terminal=terminal, lanes_per_loop=rollout_batch, terminal_states=wr
            )
            ph, Q, allowed, correct, s0 = out[:5]
            a = jnp.argmax(jnp.where(allowed, s0, jnp.asarray(-jnp.inf, dt)), axis=1)
            pick = jnp.arange(k, dtype=jnp.int32)
            if terminal:
                mT, bT, GT = out[5]
                v = valid.astype(dt) * wt
                tstats = (v * mT, v * bT, v * GT)
            else:
                tstats = ()
            W = allowed.at[:, :C].set(wr[:, None]).astype(dt) * wt
            return (ph, Q, W, Q[pick, a] * wt, correct[pick, a].astype(dt) * wt), tstats

        # pad the rows to a multiple of the chunk (one compiled body, no remainder copy)
        n_pad = -nb % rows_per_chunk
        args = (Xs, y, Z, comp, jnp.ones((nb,), bool), cls_w, rw)
        if n_pad:
            args = jax.tree.map(lambda a: jnp.concatenate([a, a[:1].repeat(n_pad, axis=0)], axis=0), args)
            args = args[:4] + (args[4].at[nb:].set(False),) + args[5:]
        args = jax.tree.map(lambda a: a.reshape((-1, rows_per_chunk) + a.shape[1:]), args)

        def chunk(acc, a):
            out, tstats = jax.vmap(per_row)(a)
            return jax.tree.map(lambda u, v: u + jnp.sum(v, axis=0), acc, tstats), out

        acc0 = (jnp.zeros((), dt), jnp.zeros((C, p), dt), jnp.zeros((p, p), dt)) if terminal else ()
        tstats, out = jax.lax.scan(chunk, acc0, args)
        Phi, Q, W, pi_ret, pi_corr = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:])[:nb], out)
        Phi, Q, W = Phi.reshape(nb * k, p), Q.reshape(nb * k, A), W.reshape(nb * k, A)
        m, Bs, Gs = _ridge_stats(Phi, Q, W, gram_batch=gram_batch)
        return (m, Bs, Gs, jnp.sum(pi_ret), jnp.sum(pi_corr)) + tuple(tstats)

    if row_axes is None:
        m, Bs, Gs, ret_sum, corr_sum, *tstats = rollouts(thetas, spec, Xs, y, Z, comp, cls_w, rw)
    else:
        # X is split by rows: every device runs the rollouts of its own rows (the per-row states
        # and mixture components were drawn for all rows above, so the result does not depend on
        # the device count); the ridge statistics are summed across devices
        def local(thetas, spec, Xs, y, Z, comp, cls_w, rw):
            return jax.lax.psum(rollouts(thetas, spec, Xs, y, Z, comp, cls_w, rw), row_axes)

        rows = PartitionSpec(row_axes)
        spec_in = jax.tree.map(lambda _: PartitionSpec(), spec)
        m, Bs, Gs, ret_sum, corr_sum, *tstats = jax.shard_map(
            local,
            mesh=mesh,
            in_specs=(PartitionSpec(), spec_in, rows, rows, rows, rows, rows, rows),
            out_specs=PartitionSpec(),
            # the rollout loops start from constants (invariant) and carry per-row values
            # (varying); the only cross-device step is the psum above, after which the
            # statistics are replicated
            check_vma=False,
        )(thetas, spec, Xs, y, Z, comp, cls_w, rw)
    theta_prev = jax.lax.dynamic_index_in_dim(thetas, t, axis=0, keepdims=False)
    if terminal:
        # the classification rows are also fitted on the states where the rollouts classified,
        # with a total weight terminal_weight times that of the sampled states
        mT, bT, GT = tstats
        tau = jnp.asarray(terminal_weight, dt) * m[:C] / jnp.maximum(mT, jnp.ones_like(mT))
        m = m.at[:C].add(tau * mT)
        Bs = Bs.at[:C].add(tau[:, None] * bT)
        Gs = Gs.at[:C].add(tau[:, None, None] * GT[None])
    theta_new = _ridge_solve(m, Bs, Gs, l2, theta_prev)
    # constant columns are inert: the weights of their values x⊙z_f are exactly 0
    keep = jnp.concatenate([jnp.ones((d,), dt), problem.live.astype(dt), jnp.ones((1,), dt)])
    theta_new = mixture.update(theta_prev, theta_new * keep[None, :], alpha)
    thetas = jax.lax.dynamic_update_index_in_dim(thetas, theta_new, t + 1, axis=0)
    total = jnp.sum(rw) * k
    info = RCPIInfo(ret_sum / total, corr_sum / total)
    return RCPIState(thetas, t + 1), info


# ----------------------------------------------------------------------------- driver


# The user's progress callback is not a static argument of the jitted fit: every fit with a
# callback shares one compiled program that reports to :func:`_report` with the fit's call id, and
# the callback is looked up here. A fresh lambda per call therefore never recompiles.
_CALLBACKS: dict = {}
_CALLBACK_ERRORS: dict = {}
_CALLBACK_LOCK = threading.Lock()
_CALL_IDS = itertools.count(1)


def _report(call_id, it, active, loss, accuracy, features, best_it, best_loss):
    """Host side of the progress callback: call the function registered under ``call_id``.

    A user's callback gets ``(iteration, mean_return, accuracy)`` of the new iterate's greedy policy
    on the training rows (mean return = minus its datum-wise loss); the ``verbose`` printer gets the
    mean number of features and the best iterate so far too. Iterations skipped after an early stop
    (``patience``) are not reported. In an eager fit (``guard``) an exception raised by the user's
    function is stored and re-raised by :func:`dwsm_fit` once the fit has finished; the remaining
    iterations skip the callback.
    """
    if not bool(active):
        return
    cid = int(call_id)
    with _CALLBACK_LOCK:
        entry = _CALLBACKS.get(cid)
        failed = cid in _CALLBACK_ERRORS
    if entry is None or failed:
        return
    fn, guard = entry
    args = (it, -loss, accuracy)
    if fn is _print_progress:
        args = (it, loss, accuracy, features, best_it, best_loss)
    if not guard:
        fn(*args)
        return
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - re-raised by dwsm_fit after the fit
        with _CALLBACK_LOCK:
            _CALLBACK_ERRORS[cid] = exc


@partial(
    jax.jit,
    static_argnames=(
        "n_iter",
        "states_per_example",
        "mixture",
        "rollout_batch",
        "gram_batch",
        "progress",
        "standardize",
        "cap",
        "policy_states",
        "terminal_weight",
        "mesh",
        "row_axes",
    ),
)
def _fit(
    key,
    X,
    y,
    sample_weight,
    spec,
    alpha,
    l2,
    explore,
    call_id,
    patience,
    use_best,
    *,
    n_iter,
    states_per_example,
    mixture,
    rollout_batch,
    gram_batch,
    progress,
    standardize,
    cap,
    policy_states,
    terminal_weight,
    mesh=None,
    row_axes=None,
):
    problem = rcpi_problem(spec, X, y, standardize=standardize, sample_weight=sample_weight)
    dt = problem.X.dtype
    step = partial(
        rcpi_step,
        problem=problem,
        alpha=alpha,
        l2=l2,
        states_per_example=states_per_example,
        mixture=mixture,
        rollout_batch=rollout_batch,
        cap=cap,
        gram_batch=gram_batch,
        mesh=mesh,
        row_axes=row_axes,
        policy_states=policy_states,
        terminal_weight=terminal_weight,
        explore=explore,
    )
    nan = jnp.asarray(jnp.nan, dt)

    def run(state, key_t):
        new, info = step(key_t, state)
        return new, info, rcpi_evaluate(new.thetas[new.t], problem, mesh=mesh, row_axes=row_axes)

    def skip(state, key_t):
        # stopped early: the remaining slots repeat the last iterate, diagnostics are NaN
        thetas = jax.lax.dynamic_update_index_in_dim(
            state.thetas,
            jax.lax.dynamic_index_in_dim(state.thetas, state.t, axis=0, keepdims=False),
            state.t + 1,
            axis=0,
        )
        return RCPIState(thetas, state.t + 1), RCPIInfo(nan, nan), (nan, nan, nan)

    def body(carry, key_t):
        state, best, best_loss, since = carry
        # early stop: no iteration runs once `patience` iterations in a row did not improve the best
        # training loss (patience = n_iter: never); lax.cond skips the work of the skipped ones
        active = since < patience
        new, info, ev = jax.lax.cond(active, run, skip, state, key_t)
        loss = ev[0]
        better = active & (loss < best_loss)  # ties keep the earlier iterate
        best = jnp.where(better, new.t, best)
        best_loss = jnp.where(better, loss, best_loss)
        since = jnp.where(better, jnp.zeros_like(since), since + 1)
        if progress:
            jax.debug.callback(_report, call_id, new.t, active, *ev, best, best_loss, ordered=True)
        return (new, best, best_loss, since), (info, ev, active)

    state0 = rcpi_init(problem, n_iter)
    ev0 = rcpi_evaluate(state0.thetas[0], problem, mesh=mesh, row_axes=row_axes)
    carry0 = (state0, jnp.zeros((), jnp.int32), ev0[0], jnp.zeros((), jnp.int32))
    (state, best, _, _), (infos, evs, active) = jax.lax.scan(body, carry0, jax.random.split(key, n_iter))
    n_run = jnp.sum(active, dtype=jnp.int32)
    chosen = jnp.where(use_best, best, n_run)
    weights = mixture.weights(n_run, n_iter + 1, jnp.asarray(alpha, dt))
    finite = jnp.all(jnp.isfinite(state.thetas)) & jnp.all(jnp.isfinite(infos.mean_return) | ~active)
    status = jnp.where(finite, jnp.int32(OK), jnp.int32(NONFINITE))
    loss, acc, feats = evs
    return DWSMPolicy(
        theta=jax.lax.dynamic_index_in_dim(state.thetas, chosen, axis=0, keepdims=False),
        mean=problem.mean,
        scale=problem.scale,
        spec=problem.spec,
        thetas=state.thetas,
        mix_weights=weights,
        train_return=-loss,
        train_accuracy=acc,
        status=status,
        train_loss=jnp.concatenate([ev0[0][None], loss]),
        train_features=jnp.concatenate([ev0[2][None], feats]),
        best=chosen.astype(jnp.int32),
        iterations=n_run,
        rollout_return=infos.mean_return,
        rollout_accuracy=infos.accuracy,
    )


def _print_progress(it, loss, acc, features, best_it, best_loss):
    print(
        f"[dwsm] iteration {int(it):3d}  training datum-wise loss {float(loss):.4f}  accuracy {float(acc):.4f}  "
        f"features {float(features):.2f}  | best so far: iteration {int(best_it)}, loss {float(best_loss):.4f}",
        flush=True,
    )


def _check_rcpi_options(states, select, patience, states_per_example):
    """Validate dwsm_fit's RCPI options; returns ``(policy_states, terminal_weight, patience)``."""
    if not isinstance(states, str) or states not in ("policy", "uniform"):
        raise ValueError(
            f"states must be 'policy' (states visited by the rollout policy) or 'uniform' (the paper's); got {states!r}"
        )
    if not isinstance(select, str) or select not in ("best", "last"):
        raise ValueError(f"select must be 'best' (lowest training datum-wise loss) or 'last' (θ_T); got {select!r}")
    if patience is not None:
        patience = check_int(patience, "patience", low=1)
    if states == "policy":
        return states_per_example, 1.0, patience
    return 0, 0.0, patience


def _check_key(key):
    if isinstance(key, jax.Array) and jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape != ():
            raise ValueError(f"key must be a single PRNG key; got shape {key.shape}")
        return key
    k = np.asarray(key) if not isinstance(key, jax.Array) else key
    if k.dtype != np.uint32 or k.shape != (2,):
        raise TypeError("key must be a jax.random.key(...) or jax.random.PRNGKey(...) key, e.g. jax.random.key(0)")
    return key


@any_mesh
def dwsm_fit(
    key,
    X,
    y,
    *,
    lam=0.01,
    budget=None,
    cost_matrix=None,
    groups=None,
    related=None,
    n_iter: int = 10,
    states_per_example: int = 10,
    alpha=0.7,
    l2=0.01,
    gamma=None,
    n_classes: int | None = None,
    mixture: str = "stochastic",
    states: str = "policy",
    explore=0.1,
    select: str = "best",
    patience: int | None = None,
    standardize: bool = True,
    constant_columns: str = "inert",
    rollout_batch: int = 16,
    callback: Callable | None = None,
    verbose: bool = False,
    sample_weight=None,
) -> DWSMPolicy:
    """Learn a datum-wise sparse classifier by RCPI (Dulac-Arnold et al. 2012, §3–4).

    The policy maximises the MDP return, i.e. minimises the datum-wise loss (paper eq. 2 and
    Table 1): ``(1/N) Σ_i [ C[ŷ_i, y_i] + Σ_t c_{j_t} ρ_t ]`` where c_j is the cost of unit j
    (``Groups.costs``; 1 by default) and ρ_t = λ (or γ for an acquisition unrelated to an acquired
    unit). Base model: ``Δ(ŷ, y) + λ ‖z‖₀``.

    Every iterate's greedy policy is evaluated on the training rows (each episode from z = 0) and the
    one with the lowest datum-wise loss is returned (θ_0, "classify at once as the cheapest class",
    included): the returned policy is never worse on the training data than classifying at once or
    than any iterate seen during training. ``policy.train_loss`` holds every iterate's loss,
    ``policy.best`` the one returned.

    Runs inside a user's ``jax.jit`` with traced X and y when ``n_classes`` is given (the number of
    classes cannot be read from traced labels; value checks are skipped under trace). ``lam``,
    ``gamma``, ``alpha``, ``l2``, ``explore`` and ``budget`` may be traced.

    Args:
      key: PRNG key (the fit is deterministic given it).
      X: (n, d) raw features, n >= 2 (standardised on these rows inside; a row-sharded jax.Array
        is fine). Constant columns (max == min) are inert: never used, weight 0.
      y: (n,) or (n, 1) integer labels 0..C-1 (bool: 0/1); every class present unless
        ``n_classes`` is given.
      lam: λ >= 0; acquiring unit j rewards −λ·c_j (the paper's cost-sensitive reward −ξ_j is
        ``lam=1`` with ``c = ξ``).
      budget: None, or a hard budget B >= 0 on the *summed cost* of the units a datum acquires:
        unit j is acquirable while ``cost so far + c_j <= B`` (relative tolerance 32·eps against
        float rounding). With unit costs and no groups this is the paper's ``‖z‖₀ <= M`` (Table 2);
        with groups and unit costs it counts groups — to count the features of groups, give each
        group the cost of its size (``Groups.from_ids(ids, costs=sizes)``; the rewards then charge
        λ per feature too). A budget beyond the float range means no budget.
      cost_matrix: (C, C) ``C[predicted, true]``; default ``1 − I``.
      groups: None (every feature its own unit, cost 1), (d,) group ids (cost 1 per group), a
        :class:`~jaxselect.Groups` (costs from ``Groups.costs``), or a list of index lists (cost 1
        per group); an action acquires a whole group (§4.2.4).
      related: (J, J) bool, ``related[j, k]``: unit j is related to unit k (§4.2.5).
      n_iter: RCPI iterations (paper: 10; at most, see ``patience``). states_per_example: sampled
        states per row (paper: 10).
      alpha: α-mixture weight in [0, 1) (paper: 0.7).
      l2: ridge weight > 0 of the per-action regression (default 0.01; 1e-3 before 0.3), with the
        library's convention: θ_a minimises ``(1/m_a) Σ_s ½ (Q(s, a) − θ_a·φ_s)² + (l2/2) ‖θ_a‖²``
        over the m_a sampled states where a is allowed (bias not penalised), i.e.
        ``(Φ_aᵀΦ_a/m_a + l2·D) θ_a = Φ_aᵀQ_a/m_a`` (scikit-learn ``Ridge(alpha)`` on those states:
        ``l2 = alpha / m_a``).
      gamma: γ >= 0 for unrelated acquisitions (default 2λ).
      n_classes: C; required when y is traced, else when some classes are absent from y.
      mixture: ``"stochastic"`` (paper footnote 11) or ``"average"`` (parameter averaging).
      states: which states RCPI samples. ``"policy"`` (default): states visited by the rollout
        policy (prefixes of its episode from z = 0, see ``explore``), and the classification actions
        are also fitted at the states where the rollouts classified. ``"uniform"``: the paper's
        "uniform binomial" z (‖z‖ ~ U{0..J}, then a uniform subset), classification fitted at the
        sampled states only (the paper's RCPI; it collapses on correlated features, issue 14).
      explore: with ``states="policy"``, the probability in [0, 1] that a sampled state gets one
        more, uniformly drawn, allowed unit (a one-step deviation from the policy; default 0.1).
        These states teach the acquisitions only.
      select: ``"best"`` (default): return the iterate with the lowest training datum-wise loss;
        ``"last"``: θ_T (before 0.3; it can be much worse than the training run).
      patience: None (run ``n_iter`` iterations) or p >= 1: stop once p iterations in a row did not
        lower the best training datum-wise loss (the remaining iterations are skipped, their
        entries NaN; ``policy.iterations`` says how many ran). Traced: no recompilation.
      standardize: standardise features on the training set (paper).
      constant_columns: ``"inert"`` (default) or ``"raise"`` (ValueError naming the constant columns).
      rollout_batch: about how many rollouts run side by side in one ``while_loop`` (default 16:
        rows are processed ``max(1, rollout_batch // lanes_per_row)`` at a time, and a row with
        more lanes runs them in groups of at most ``rollout_batch``; small groups stop as soon as
        their own rollouts end, which is what makes training fast on CPU; an accelerator may prefer
        a larger value).
      callback: ``callback(iteration, mean_return, accuracy)`` called on the host after each
        iteration with the *new iterate's* greedy policy on the training rows (mean return = minus
        its datum-wise loss, every episode from z = 0; before 0.3 these were the rollouts' figures
        from the sampled states); iterations skipped after an early stop are not reported
        (``jax.debug.callback``); off by default, no host round-trips without it. It is
        not a static argument: every fit with a callback shares one compiled program, so a fresh
        lambda per call does not recompile. An exception it raises is re-raised by ``dwsm_fit``
        after the fit (the remaining iterations run without the callback); inside a user's ``jit``
        it surfaces as JAX's runtime error instead, and the callback stays registered for as long
        as the process runs (the compiled function may run again).
      verbose: print a progress line per iteration: the iterate's training datum-wise loss,
        accuracy and features per datum, and the best iterate so far (the one returned).
      sample_weight: None or (n,) row weights ``w ≥ 0`` (at least 2 positive): the datum-wise
        loss becomes ``Σ_i w_i ℓ_i / Σ_i w_i`` — weighted standardisation, θ_0, ridge statistics
        (every sampled state of row i counts w_i) and iterate selection. Rows of weight 0 change
        nothing: with JAX's default ``jax_threefry_partitionable`` random draws, rows appended
        with weight 0 (the padding of :func:`~jaxselect.shard_rows`) leave the fit of the other
        rows as it is, to rounding.

    Returns:
      A :class:`~jaxselect.sequential.DWSMPolicy`: ``theta = thetas[best]``; ``status`` 0, or
      ``NONFINITE`` when θ or the rollouts' returns are not finite
      (:func:`jaxselect.raise_for_status` raises on it).

    Cost per iteration: ``n·states_per_example·J`` rollouts of at most J+1 steps, each step
    O(A + A·|g|) (incremental scores), plus J+1 Gram matrices of size (2d+1)², plus n episodes to
    evaluate the new iterate.

    Raises:
      ValueError: labels that are not integers 0..C−1 (or a single class), NaN/Inf in X, negative
        ``lam``/``gamma``/``budget``/``l2``, a ``cost_matrix`` of the wrong shape, groups or
        ``related`` that do not match X, constant columns with ``constant_columns="raise"``.
      TypeError: ``key`` is not a JAX PRNG key.

    >>> import jax, numpy as np
    >>> from jaxselect.sequential import dwsm_fit, dwsm_predict
    >>> X = np.random.default_rng(0).normal(size=(40, 3)); y = (X[:, 0] > 0).astype(int)
    >>> pol = dwsm_fit(jax.random.key(0), X, y, lam=0.05, n_iter=3)
    >>> labels, acquired = dwsm_predict(pol, X)
    >>> bool((np.asarray(labels) == y).mean() > 0.9), bool(acquired.sum(1).max() <= 3)
    (True, True)
    """
    key = _check_key(key)
    X = as_float_matrix(X, "X", min_rows=MIN_ROWS, scale="values")  # one pass: NaN/Inf and scale
    n, d = X.shape
    if n_classes is not None:
        n_classes = check_int(n_classes, "n_classes", low=1)
    labels, C = as_labels(y, n, n_classes=n_classes)
    w = as_sample_weight(sample_weight, n)
    if n_classes is None:
        present = np.unique(host_array(labels))
        if present.size != C:
            seen = set(present.tolist())  # the first missing classes, without an arange of a huge label
            missing = np.asarray([c for c in range(min(C, present.size + 10)) if c not in seen][:10])
            raise ValueError(
                f"y must use the labels 0..C-1 with every class present; classes {missing.tolist()[:10]} "
                f"have no example (relabel y to 0..{present.size - 1}, or pass n_classes)"
            )
    n_iter = check_int(n_iter, "n_iter", low=1)
    states_per_example = check_int(states_per_example, "states_per_example", low=1)
    alpha = as_hyper(alpha, "alpha", X.dtype, low=0.0)
    if not is_traced(alpha) and float(alpha) >= 1.0:
        raise ValueError(f"alpha must be in [0, 1); got {float(alpha)}")
    l2 = as_hyper(l2, "l2", X.dtype, low=0.0, strict_low=True)
    rollout_batch = check_int(rollout_batch, "rollout_batch", low=1)
    if not isinstance(mixture, str) or mixture not in _MIXTURES:
        raise ValueError(f"mixture must be 'stochastic' or 'average'; got {mixture!r}")
    mixture_rule = _MIXTURES[mixture]
    check_constant_mode(constant_columns)
    if callback is not None and not callable(callback):
        raise TypeError("callback must be callable(iteration, mean_return, accuracy) or None")
    if verbose and callback is None:
        callback = _print_progress
    spec = make_spec(
        d,
        C,
        dtype=X.dtype,
        lam=lam,
        gamma=gamma,
        budget=budget,
        cost_matrix=cost_matrix,
        groups=groups,
        related=related,
    )
    if not is_traced((spec.cost_matrix, spec.lam, spec.gamma, spec.groups.costs)):
        total_cost = float(np.sum(np.asarray(spec.groups.costs, np.float64)))
        check_magnitudes(
            {
                "max |cost_matrix|": float(np.max(np.abs(np.asarray(spec.cost_matrix, np.float64)))),
                "lam × total unit cost": float(spec.lam) * total_cost,
                "gamma × total unit cost": float(spec.gamma) * total_cost,
            },
            X.dtype,
            fix="the learned policy depends only on the ratios of the rewards: divide cost_matrix, lam and "
            "gamma by a common factor (or the groups' costs), or use float64",
        )
    if constant_columns == "raise":
        raise_on_constant(column_standardization(X)[2], "raise")
    policy_states, terminal_weight, patience = _check_rcpi_options(states, select, patience, states_per_example)
    explore = as_hyper(explore, "explore", X.dtype, low=0.0)
    if not is_traced(explore) and float(explore) > 1.0:
        raise ValueError(f"explore must be a probability in [0, 1]; got {float(explore)}")
    J = spec.n_units
    # lane packing of the uniform states only without a budget (then every state has exactly k
    # units): budgets stay traced and share one compiled fit; budgeted rollouts are short anyway.
    # A state visited by the policy may have any number of units: J lanes each.
    no_budget = not is_traced(spec.budget) and bool(np.isinf(np.asarray(spec.budget)))
    n_unif = states_per_example - policy_states
    cap = (rollout_capacity(J, n_unif, J, exact_sizes=no_budget) if n_unif else 0) + policy_states * J
    # a row-sharded X runs each device's rollouts on its own rows (chunks of its local block)
    sharded = _row_axes(X, n)
    mesh, row_axes = sharded if sharded is not None else (None, None)
    eager = not is_traced((key, X, labels, spec, alpha, l2, explore))
    call_id = next(_CALL_IDS) % (2**31 - 1)
    if callback is not None:
        with _CALLBACK_LOCK:
            _CALLBACKS[call_id] = (callback, eager)
    err = None
    try:
        policy = _fit(
            key,
            X,
            jnp.asarray(labels),
            None if w is None else jnp.asarray(w).astype(X.dtype),
            spec,
            alpha,
            l2,
            explore,
            jnp.asarray(call_id, jnp.int32),
            jnp.asarray(n_iter if patience is None else patience, jnp.int32),
            jnp.asarray(select == "best"),
            n_iter=n_iter,
            states_per_example=states_per_example,
            mixture=mixture_rule,
            rollout_batch=rollout_batch,
            gram_batch=8,
            progress=callback is not None,
            standardize=bool(standardize),
            cap=cap,
            policy_states=policy_states,
            terminal_weight=terminal_weight,
            mesh=mesh,
            row_axes=row_axes,
        )
        if callback is not None and eager:
            jax.effects_barrier()  # the fit has run: wait for its callbacks
    finally:
        if callback is not None and eager:
            # forget the callback (inside a user's jit the compiled function reports whenever it
            # runs, so the registration stays)
            with _CALLBACK_LOCK:
                _CALLBACKS.pop(call_id, None)
                err = _CALLBACK_ERRORS.pop(call_id, None)
    if err is not None:
        raise err
    return policy
