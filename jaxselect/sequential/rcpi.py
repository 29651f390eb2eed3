"""Rollout Classification Policy Iteration (RCPI) for the datum-wise sparse model.

Dulac-Arnold et al. (2012), §3.4 (RCPI, after Lagoudakis & Parr 2003), §6.1 (10 states per
training example, 10 iterations, α-mixture with α = 0.7, footnote 11) and §5.1 (complexity
``O(N_s · T · (n + c)²)`` per iteration).

Advanced API (blackjax style): :func:`rcpi_problem` standardises the training data once,
:func:`rcpi_init` gives the :class:`RCPIState` (θ_0 = 0), and :func:`rcpi_step` is one policy
iteration ``(key, state, problem) -> (state, info)``; :func:`dwsm_fit` is the driver, a jitted
``lax.scan`` of ``rcpi_step`` over split keys.

One iteration t (:func:`rcpi_step`):

1. **States.** Every training row is used ``states_per_example`` times. For each state z is drawn
   from the paper's "uniform binomial": the number of acquired units k ~ U{0, …, J} and then a
   uniformly random set of k units (so z_j ~ Bernoulli(p) with p ~ U(0, 1) — every sparsity level
   equally likely; a fixed Bernoulli(½) would almost never visit the near-empty states where the
   policy starts). The S states of one row are stratified over the levels (state r has
   k = ⌊(r(K+1) + w)/S⌋, w ~ U{0..K}; marginally still uniform). Only acquirable units are drawn
   (units whose features are all constant never are); K is their number, or with a hard budget B
   the largest number of them whose costs fit in B, and units that would overflow B are dropped,
   so every sampled state is feasible.
2. **Rollouts.** For each state and each allowed action, ``Q(s, a)`` is computed exactly by one
   rollout of the current (deterministic) policy: ``Q = −C[a, y]`` for classification, and
   ``r(s, a) + return of π from T(s, a)`` for an acquisition. ``vmap`` over states × actions,
   each rollout a bounded ``while_loop`` with a done flag (:func:`~.policy.run_episode`). The
   allowed acquisitions of a row's S states are packed into a static number of lanes (the
   stratification bounds it: ``Σ_r (J − ⌊r(J+1)/S⌋)`` ≈ S·J/2, no budget), the score change of
   every unit is tabulated once per state and shared by its rollouts, and ``lax.map`` over small
   chunks of rows lets each loop stop when its own rollouts end.
   With a row-sharded X (a ``NamedSharding`` splitting the rows) this step runs under
   ``jax.shard_map``: each device rolls out its own rows (the states and mixture components are
   drawn for all rows first, so results do not depend on the device count) and only the ridge
   statistics of step 3 are summed across devices (``psum``); X is never gathered.
3. **Regression.** For each action a, ridge regression of ``Q(s, a)`` on ``φ(s)`` over the m_a
   states where a is allowed, with the library's ``l2`` convention: θ_a minimises
   ``(1/m_a) Σ_s ½ (Q(s, a) − θ_a·φ_s)² + (l2/2) ‖D θ_a‖²`` (D the identity without the bias
   entry: the bias is not penalised), i.e. ``(G_a + l2·D) θ_a = b_a`` with
   ``G_a = (1/m_a) Σ_s φ_s φ_sᵀ`` and ``b_a = (1/m_a) Σ_s Q(s, a) φ_s``. (scikit-learn's
   ``Ridge(alpha)`` on the m_a states is ``l2 = alpha / m_a``.) An action allowed in no sampled
   state keeps its previous weights; the weights of constant features' values are 0.
4. **α-mixture** (footnote 11: "θ_t is chosen with probability 1−α, otherwise the previous
   α-mixture policy is used"), a :class:`MixtureRule`. ``STOCHASTIC_MIXTURE`` (default, the
   paper's): the rollout policy of iteration t is the mixture of θ_0 … θ_t with weights
   ``P(θ_k) = (1−α) α^{t−k}`` (k ≥ 1), ``P(θ_0) = α^t``; the component is drawn once per sampled
   state and used for all the rollouts of that state (common random numbers: the actions of a
   state are compared under the same policy; one rollout per state-action is then exact).
   ``AVERAGE_MIXTURE``: deterministic parameter averaging ``θ̄_t = α θ̄_{t−1} + (1−α) θ_t``.

The initial policy is θ_0 = 0 (all scores tie, so it classifies as class 0 at once). Inference
uses the last iterate θ_T (``"stochastic"``) or θ̄_T (``"average"``): a deterministic classifier, the
paper's "final policy π_θ̂".
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
from jaxselect.status import NONFINITE, OK

from .._validation import (
    MIN_ROWS,
    as_float_matrix,
    as_hyper,
    as_labels,
    check_constant_mode,
    check_int,
    column_standardization,
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
from .policy import DWSMPolicy, phi, run_episode, unit_contribution_table

__all__ = [
    "dwsm_fit",
    "RCPIProblem",
    "RCPIState",
    "RCPIInfo",
    "rcpi_problem",
    "rcpi_init",
    "rcpi_step",
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


def row_state_action_values(thetas, spec: DWSMSpec, x, y, Z, cap: int):
    """Exact Q(s, a) of every action in the S states (x, z_r) of one datum.

    Each state r is evaluated under its own greedy policy ``thetas[r]``. The allowed acquisitions of
    all S states are packed into ``cap`` rollout lanes (``vmap``), each a bounded while loop.

    Args:
      thetas: (S, A, p) policy of each state; spec: MDP; x: (d,) standardised datum; y: () class;
      Z: (S, J) bool acquired units; cap: static number of lanes (>= allowed acquisitions).

    Returns:
      ``(phi, Q, allowed, correct, s0)``: φ (S, p); Q (S, A) (``−C[c, y]`` for classification,
      ``r(s, a) + rollout return`` for acquisitions, 0 where not allowed); allowed (S, A) bool;
      correct (S, A) whether the episode starting with a ends in the right class; s0 (S, A) scores.
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
    if cap < S * J:
        lanes = jnp.argsort(~flat, stable=True)[:cap].astype(jnp.int32)
    else:
        lanes = jnp.arange(S * J, dtype=jnp.int32)
    si, aj = lanes // J, lanes % J
    units = jnp.arange(J, dtype=jnp.int32)

    def rollout(r, j):
        z1 = Z[r] | (units == j)
        ret, label, _, _ = run_episode(
            None, spec, x, y, z1, spent[r] + costs[j], s0[r] + tables[r, j],
            delta_fn=lambda jj: tables[r, jj],
        )
        return ret, label == y

    ret, corr = jax.vmap(rollout)(si, aj)
    ok = flat[lanes]
    ret_full = jnp.zeros((S * J,), ret.dtype).at[lanes].set(jnp.where(ok, ret, 0)).reshape(S, J)
    corr_full = jnp.zeros((S * J,), bool).at[lanes].set(ok & corr).reshape(S, J)
    q_cls = classify_reward(spec, y)
    Q = jnp.concatenate([jnp.broadcast_to(q_cls[None, :], (S, C)), jnp.where(allowed_acq, r_acq + ret_full, 0)], axis=1)
    correct = jnp.concatenate([jnp.broadcast_to((jnp.arange(C, dtype=jnp.int32) == y)[None, :], (S, C)), corr_full], axis=1)
    allowed = jnp.concatenate([jnp.ones((S, C), bool), allowed_acq], axis=1)
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

    Plain sums over the N rows, so the statistics of row blocks add up (a row-sharded fit sums them
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
      Phi: (N, p) state features; Q: (N, A) targets; W: (N, A) bool allowed; l2: () ridge weight;
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
    """

    X: jax.Array
    y: jax.Array
    spec: DWSMSpec
    mean: jax.Array
    scale: jax.Array
    live: jax.Array

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


def rcpi_problem(spec: DWSMSpec, X, y, *, standardize: bool = True) -> RCPIProblem:
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

    Returns:
      An :class:`RCPIProblem`.
    """
    mean, scale, live = column_standardization(X)
    if not standardize:
        mean, scale = jnp.zeros_like(mean), jnp.ones_like(scale)
    Xs = jnp.where(live[None, :], (X - mean[None, :]) / scale[None, :], jnp.zeros_like(X))
    spec = spec._replace(live=spec.live & unit_live(spec.groups, live))
    return RCPIProblem(Xs, jnp.asarray(y).astype(jnp.int32), spec, mean, scale, live)


def rcpi_init(problem: RCPIProblem, n_iter: int) -> RCPIState:
    """θ_0 = 0 and room for ``n_iter`` more iterates (the initial policy classifies at once)."""
    d = problem.X.shape[1]
    A = problem.spec.cost_matrix.shape[0] + problem.spec.groups.costs.shape[0]
    thetas = jnp.zeros((n_iter + 1, A, 2 * d + 1), problem.X.dtype)
    return RCPIState(thetas, jnp.zeros((), jnp.int32))


def rcpi_step(
    key,
    state: RCPIState,
    problem: RCPIProblem,
    *,
    alpha=0.7,
    l2=1e-3,
    states_per_example: int = 10,
    mixture: MixtureRule = STOCHASTIC_MIXTURE,
    rollout_batch: int = 256,
    cap: int | None = None,
    gram_batch: int = 8,
    mesh=None,
    row_axes=None,
) -> tuple[RCPIState, RCPIInfo]:
    """One policy iteration: sample states, roll out every allowed action, ridge fit, α-mixture.

    Pure ``(key, state, problem) -> (state, info)``; ``jax.jit`` it with the keyword options static
    (``states_per_example``, ``mixture``, ``rollout_batch``, ``cap``, ``gram_batch``, ``mesh``,
    ``row_axes`` are Python configuration; ``alpha`` and ``l2`` may be traced).

    Args:
      key: PRNG key of this iteration.
      state: :class:`RCPIState` (from :func:`rcpi_init` or the previous step; ``state.t`` must be
        below its number of slots minus one).
      problem: :class:`RCPIProblem` from :func:`rcpi_problem`.
      alpha: α-mixture weight in [0, 1). l2: ridge weight > 0 (``(1/m) Σ ½ residual² +
        (l2/2)‖θ‖²`` per action, bias not penalised).
      states_per_example: sampled states per row.
      mixture: :data:`STOCHASTIC_MIXTURE` (the paper's) or :data:`AVERAGE_MIXTURE` (or a name).
      rollout_batch: about how many rollouts run side by side in one ``while_loop``.
      cap: rollout lanes per row; default ``S·J`` (always enough). Without a budget
        ``rollout_capacity(J, S, J, exact_sizes=True)`` (what :func:`dwsm_fit` uses) is enough too.
      gram_batch: Gram matrices built at a time.
      mesh, row_axes: run each device's rollouts on its rows of a row-sharded X (set by
        :func:`dwsm_fit`; both None otherwise).

    Returns:
      ``(state, info)``: the state with ``thetas[t + 1]`` filled and ``t + 1``; an :class:`RCPIInfo`.
    """
    mixture = _as_mixture(mixture)
    Xs, y, spec = problem.X, problem.y, problem.spec
    n, d = Xs.shape
    dt = Xs.dtype
    C, J = spec.cost_matrix.shape[0], spec.groups.costs.shape[0]
    A, p, k = C + J, 2 * d + 1, states_per_example
    K = state.thetas.shape[0]
    cap = k * J if cap is None else int(cap)
    parts = 1 if row_axes is None else int(np.prod([mesh.shape[a] for a in row_axes]))
    rows_per_chunk = max(1, min(n // parts, rollout_batch // cap))
    alpha = jnp.asarray(alpha, dt)
    l2 = jnp.asarray(l2, dt)
    thetas, t = state.thetas, state.t

    kz, kc = jax.random.split(key)
    Z = sample_states(kz, spec, n, k)
    probs = mixture.weights(t, K, alpha)
    comp = jax.random.categorical(kc, jnp.log(probs), shape=(n, k))

    def rollouts(thetas, spec, Xs, y, Z, comp):
        # rollouts of these rows (all rows, or one device's block) and their ridge statistics
        nb = Xs.shape[0]

        def per_row(args):
            x, yi, zr, cr = args
            ph, Q, allowed, correct, s0 = row_state_action_values(thetas[cr], spec, x, yi, zr, cap)
            a = jnp.argmax(jnp.where(allowed, s0, jnp.asarray(-jnp.inf, dt)), axis=1)
            pick = jnp.arange(k, dtype=jnp.int32)
            return ph, Q, allowed, Q[pick, a], correct[pick, a]

        # pad the rows to a multiple of the chunk (one compiled body, no remainder copy)
        n_pad = -nb % rows_per_chunk
        args = (Xs, y, Z, comp)
        if n_pad:
            args = jax.tree.map(lambda a: jnp.concatenate([a, a[:1].repeat(n_pad, axis=0)], axis=0), args)
        args = jax.tree.map(lambda a: a.reshape((-1, rows_per_chunk) + a.shape[1:]), args)
        out = jax.lax.map(jax.vmap(per_row), args)
        Phi, Q, W, pi_ret, pi_corr = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:])[:nb], out)
        Phi, Q, W = Phi.reshape(nb * k, p), Q.reshape(nb * k, A), W.reshape(nb * k, A)
        m, Bs, Gs = _ridge_stats(Phi, Q, W, gram_batch=gram_batch)
        return m, Bs, Gs, jnp.sum(pi_ret), jnp.sum(pi_corr.astype(dt))

    if row_axes is None:
        m, Bs, Gs, ret_sum, corr_sum = rollouts(thetas, spec, Xs, y, Z, comp)
    else:
        # X is split by rows: every device runs the rollouts of its own rows (the per-row states
        # and mixture components were drawn for all rows above, so the result does not depend on
        # the device count); the ridge statistics are summed across devices
        def local(thetas, spec, Xs, y, Z, comp):
            return jax.lax.psum(rollouts(thetas, spec, Xs, y, Z, comp), row_axes)

        rows = PartitionSpec(row_axes)
        spec_in = jax.tree.map(lambda _: PartitionSpec(), spec)
        m, Bs, Gs, ret_sum, corr_sum = jax.shard_map(
            local,
            mesh=mesh,
            in_specs=(PartitionSpec(), spec_in, rows, rows, rows, rows),
            out_specs=PartitionSpec(),
            # the rollout loops start from constants (invariant) and carry per-row values
            # (varying); the only cross-device step is the psum above, after which the
            # statistics are replicated
            check_vma=False,
        )(thetas, spec, Xs, y, Z, comp)
    theta_prev = jax.lax.dynamic_index_in_dim(thetas, t, axis=0, keepdims=False)
    theta_new = _ridge_solve(m, Bs, Gs, l2, theta_prev)
    # constant columns are inert: the weights of their values x⊙z_f are exactly 0
    keep = jnp.concatenate([jnp.ones((d,), dt), problem.live.astype(dt), jnp.ones((1,), dt)])
    theta_new = mixture.update(theta_prev, theta_new * keep[None, :], alpha)
    thetas = jax.lax.dynamic_update_index_in_dim(thetas, theta_new, t + 1, axis=0)
    info = RCPIInfo(ret_sum / (n * k), corr_sum / (n * k))
    return RCPIState(thetas, t + 1), info


# ----------------------------------------------------------------------------- driver


# The user's progress callback is not a static argument of the jitted fit: every fit with a
# callback shares one compiled program that reports to :func:`_report` with the fit's call id, and
# the callback is looked up here. A fresh lambda per call therefore never recompiles.
_CALLBACKS: dict = {}
_CALLBACK_ERRORS: dict = {}
_CALLBACK_LOCK = threading.Lock()
_CALL_IDS = itertools.count(1)


def _report(call_id, it, mean_return, accuracy):
    """Host side of the progress callback: call the user's function registered under ``call_id``.

    In an eager fit (``guard``) an exception raised by the user's function is stored and re-raised
    by :func:`dwsm_fit` once the fit has finished; the remaining iterations skip the callback.
    """
    cid = int(call_id)
    with _CALLBACK_LOCK:
        entry = _CALLBACKS.get(cid)
        failed = cid in _CALLBACK_ERRORS
    if entry is None or failed:
        return
    fn, guard = entry
    if not guard:
        fn(it, mean_return, accuracy)
        return
    try:
        fn(it, mean_return, accuracy)
    except Exception as exc:  # noqa: BLE001 - re-raised by dwsm_fit after the fit
        with _CALLBACK_LOCK:
            _CALLBACK_ERRORS[cid] = exc


@partial(
    jax.jit,
    static_argnames=(
        "n_iter", "states_per_example", "mixture", "rollout_batch", "gram_batch", "progress", "standardize", "cap",
        "mesh", "row_axes",
    ),
)
def _fit(
    key, X, y, spec, alpha, l2, call_id, *, n_iter, states_per_example, mixture, rollout_batch, gram_batch, progress,
    standardize, cap, mesh=None, row_axes=None,
):
    problem = rcpi_problem(spec, X, y, standardize=standardize)
    step = partial(
        rcpi_step, problem=problem, alpha=alpha, l2=l2, states_per_example=states_per_example, mixture=mixture,
        rollout_batch=rollout_batch, cap=cap, gram_batch=gram_batch, mesh=mesh, row_axes=row_axes,
    )

    def body(state, key_t):
        state, info = step(key_t, state)
        if progress:
            jax.debug.callback(_report, call_id, state.t, info.mean_return, info.accuracy, ordered=True)
        return state, info

    state, infos = jax.lax.scan(body, rcpi_init(problem, n_iter), jax.random.split(key, n_iter))
    dt = problem.X.dtype
    weights = mixture.weights(n_iter, n_iter + 1, jnp.asarray(alpha, dt))
    finite = jnp.all(jnp.isfinite(state.thetas)) & jnp.all(jnp.isfinite(infos.mean_return))
    status = jnp.where(finite, jnp.int32(OK), jnp.int32(NONFINITE))
    return DWSMPolicy(
        theta=state.thetas[n_iter],
        mean=problem.mean,
        scale=problem.scale,
        spec=problem.spec,
        thetas=state.thetas,
        mix_weights=weights,
        train_return=infos.mean_return,
        train_accuracy=infos.accuracy,
        status=status,
    )


def _print_progress(it, mean_ret, acc):
    print(f"[dwsm] iteration {int(it):3d}  mean return {float(mean_ret): .4f}  accuracy {float(acc):.4f}", flush=True)


def _check_key(key):
    if isinstance(key, jax.Array) and jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape != ():
            raise ValueError(f"key must be a single PRNG key; got shape {key.shape}")
        return key
    k = np.asarray(key) if not isinstance(key, jax.Array) else key
    if k.dtype != np.uint32 or k.shape != (2,):
        raise TypeError("key must be a jax.random.key(...) or jax.random.PRNGKey(...) key, e.g. jax.random.key(0)")
    return key


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
    l2=1e-3,
    gamma=None,
    n_classes: int | None = None,
    mixture: str = "stochastic",
    standardize: bool = True,
    constant_columns: str = "inert",
    rollout_batch: int = 256,
    callback: Callable | None = None,
    verbose: bool = False,
) -> DWSMPolicy:
    """Learn a datum-wise sparse classifier by RCPI (Dulac-Arnold et al. 2012, §3–4).

    The policy maximises the MDP return, i.e. minimises the datum-wise loss (paper eq. 2 and
    Table 1): ``(1/N) Σ_i [ C[ŷ_i, y_i] + Σ_t c_{j_t} ρ_t ]`` where c_j is the cost of unit j
    (``Groups.costs``; 1 by default) and ρ_t = λ (or γ for an acquisition unrelated to an acquired
    unit). Base model: ``Δ(ŷ, y) + λ ‖z‖₀``.

    Runs inside a user's ``jax.jit`` with traced X and y when ``n_classes`` is given (the number of
    classes cannot be read from traced labels; value checks are skipped under trace). ``lam``,
    ``gamma``, ``alpha``, ``l2`` and ``budget`` may be traced.

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
      n_iter: RCPI iterations (paper: 10). states_per_example: sampled states per row (paper: 10).
      alpha: α-mixture weight in [0, 1) (paper: 0.7).
      l2: ridge weight > 0 of the per-action regression, with the library's convention: θ_a
        minimises ``(1/m_a) Σ_s ½ (Q(s, a) − θ_a·φ_s)² + (l2/2) ‖θ_a‖²`` over the m_a sampled states
        where a is allowed (bias not penalised), i.e. ``(Φ_aᵀΦ_a/m_a + l2·D) θ_a = Φ_aᵀQ_a/m_a``
        (scikit-learn ``Ridge(alpha)`` on those states: ``l2 = alpha / m_a``).
      gamma: γ >= 0 for unrelated acquisitions (default 2λ).
      n_classes: C; required when y is traced, else when some classes are absent from y.
      mixture: ``"stochastic"`` (paper footnote 11) or ``"average"`` (parameter averaging).
      standardize: standardise features on the training set (paper).
      constant_columns: ``"inert"`` (default) or ``"raise"`` (ValueError naming the constant columns).
      rollout_batch: about how many rollouts run side by side in one ``while_loop`` (rows are
        processed ``max(1, rollout_batch // lanes_per_row)`` at a time; small chunks stop as
        soon as their own rollouts end, which is what makes training fast on CPU).
      callback: ``callback(iteration, mean_return, accuracy)`` called on the host after each
        iteration (``jax.debug.callback``); off by default, no host round-trips without it. It is
        not a static argument: every fit with a callback shares one compiled program, so a fresh
        lambda per call does not recompile. An exception it raises is re-raised by ``dwsm_fit``
        after the fit (the remaining iterations run without the callback); inside a user's ``jit``
        it surfaces as JAX's runtime error instead, and the callback stays registered for as long
        as the process runs (the compiled function may run again).
      verbose: print that progress line per iteration.

    Returns:
      A :class:`~jaxselect.sequential.DWSMPolicy` (``status`` 0, or ``NONFINITE`` when θ or the
      rollouts' returns are not finite; :func:`jaxselect.raise_for_status` raises on it).

    Cost per iteration: ``n·states_per_example·J`` rollouts of at most J+1 steps, each step
    O(A + A·|g|) (incremental scores), plus J+1 Gram matrices of size (2d+1)².

    >>> import jax, numpy as np
    >>> from jaxselect.sequential import dwsm_fit, dwsm_predict
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 4)); y = (X[:, 1] > 0).astype(int)
    >>> pol = dwsm_fit(jax.random.key(0), X, y, lam=0.05, n_iter=5)
    >>> labels, acquired = dwsm_predict(pol, X)
    >>> bool((np.asarray(labels) == y).mean() > 0.9), bool(acquired.sum(1).max() <= 4)
    (True, True)
    """
    key = _check_key(key)
    X = as_float_matrix(X, "X", min_rows=MIN_ROWS)
    n, d = X.shape
    if n_classes is not None:
        n_classes = check_int(n_classes, "n_classes", low=1)
    labels, C = as_labels(y, n, n_classes=n_classes)
    if n_classes is None:
        present = np.unique(labels)
        if present.size != C:
            missing = np.setdiff1d(np.arange(C), present)
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
        d, C, dtype=X.dtype, lam=lam, gamma=gamma, budget=budget, cost_matrix=cost_matrix, groups=groups,
        related=related,
    )
    if constant_columns == "raise":
        raise_on_constant(column_standardization(X)[2], "raise")
    J = spec.n_units
    # lane packing only without a budget (then every state has exactly k units): budgets stay
    # traced and share one compiled fit; budgeted rollouts are short anyway
    no_budget = not is_traced(spec.budget) and bool(np.isinf(np.asarray(spec.budget)))
    cap = rollout_capacity(J, states_per_example, J, exact_sizes=no_budget)
    # a row-sharded X runs each device's rollouts on its own rows (chunks of its local block)
    sharded = _row_axes(X, n)
    mesh, row_axes = sharded if sharded is not None else (None, None)
    eager = not is_traced((key, X, labels, spec, alpha, l2))
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
            spec,
            alpha,
            l2,
            jnp.asarray(call_id, jnp.int32),
            n_iter=n_iter,
            states_per_example=states_per_example,
            mixture=mixture_rule,
            rollout_batch=rollout_batch,
            gram_batch=8,
            progress=callback is not None,
            standardize=bool(standardize),
            cap=cap,
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
