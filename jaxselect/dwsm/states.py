"""The states RCPI samples from every training datum (Dulac-Arnold et al. 2012, §3.4, §6.1).

Two kinds (see :func:`~.rcpi_step` for how a row's S states split between them):

* **policy states** (:func:`trajectory_states`, the default): states *visited by the rollout
  policy*. The row's mixture component is run from z = 0 and the state is a prefix of its
  acquisitions, of length k ~ U{0, …, L}; with probability ``explore`` one more allowed unit is added
  (a one-step deviation). *Why:* a linear score shares one weight per feature across all subsets;
  fitted on uniform subsets (≈ J/2 features each) the classification scores are poor on the small
  subsets where a sparse policy stops, so acquiring looked worse than classifying at once and the
  policy collapsed (issue 14: WDBC, 30 correlated features).
* **uniform states** (:func:`sample_states`, the paper's "uniform binomial"): the number of acquired
  units k ~ U{0, …, K} and then a uniformly random set of k units, the S states of one row stratified
  over the levels. Only acquirable units are drawn; with a hard budget B, K is the largest number of
  them whose costs fit in B and units that would overflow B are dropped, so every state is feasible.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .mdp import DWSMSpec, acquire_allowed, within_budget
from .policy import run_episode

__all__ = ["max_units_within_budget", "sample_states", "trajectory_states", "policy_episodes", "component_delta"]


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
    draws = trajectory_draws(key, comp.shape, spec, Xs.dtype, explore)
    return trajectory_states_given_draws(thetas, comp, spec, Xs, *draws, batch=batch)


def trajectory_draws(key, shape, spec: DWSMSpec, dtype, explore):
    """The random numbers of :func:`trajectory_states` for (n, m) states: prefix fraction, deviate, unit pick."""
    n, m = shape
    J = spec.groups.costs.shape[0]
    k1, k2, k3 = jax.random.split(key, 3)
    u = jax.random.uniform(k1, (n, m), dtype=dtype)
    e = jax.random.uniform(k2, (n, m), dtype=dtype) < jnp.asarray(explore, dtype)
    pick = jax.random.uniform(k3, (n, m, J), dtype=dtype)
    return u, e, pick


def trajectory_states_given_draws(thetas, comp, spec: DWSMSpec, Xs, u, e, pick, *, batch: int = 64):
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



def component_delta(thetasT, c, spec: DWSMSpec, x, j):
    """(A,) score change of acquiring unit j under the policy ``thetasT[c]`` (θ_cᵀ, (p, A)): only the
    rows of unit j's features are read (no per-state copy of θ)."""
    d = spec.groups.ids.shape[0]
    valid = spec.groups.mask[j]
    cols = jnp.where(valid, spec.groups.index[j], 0)  # padding → any real column, weight 0
    v = valid.astype(thetasT.dtype)
    tz = thetasT[c, cols]  # (s_max, A)
    tx = thetasT[c, cols + d]
    # elementwise and a sum over the unit's members (no dot: a vmapped (1, s)·(s, A) product is a
    # batched GEMM call per lane on the CPU, many times slower than this fused loop)
    return jnp.sum(v[:, None] * tz + (jnp.take(x, cols) * v)[:, None] * tx, axis=0)


def grouped_vmap(fn, args, batch: int):
    """``jax.vmap(fn)(*args)`` over the leading axis N, run as G groups of at most ``batch`` one after
    another (``lax.map``): each group's while loops stop when its own episodes end, not when the
    longest of all N does. The groups have equal width (the last padded with copies of the first
    element, cut from the result): a batch size that does not divide N would make ``lax.map`` trace
    and compile the body a second time for the rest."""
    N = jax.tree.leaves(args)[0].shape[0]
    G = -(-N // max(1, min(N, int(batch))))
    width = -(-N // G)
    pad = G * width - N
    if pad:
        args = jax.tree.map(lambda a: jnp.concatenate([a, jnp.broadcast_to(a[:1], (pad,) + a.shape[1:])]), args)
    if G == 1:
        return jax.tree.map(lambda a: a[:N], jax.vmap(fn)(*args))
    out = jax.lax.map(lambda a: jax.vmap(fn)(*a), jax.tree.map(lambda a: a.reshape((G, width) + a.shape[1:]), args))
    return jax.tree.map(lambda a: a.reshape((G * width,) + a.shape[2:])[:N], out)


def policy_episodes(thetasT, comp, spec: DWSMSpec, X, y, u, e, pick, *, batch: int = 256):
    """The rollout policy's episodes from z = 0 on N sampled rows, and the states they visit.

    State s runs the greedy policy ``thetasT[comp[s]]`` (iterates transposed, (K, p, A)) on datum
    ``X[s]`` (label ``y[s]``) from the empty state; its sampled state is the prefix of length
    ``⌊u·(L+1)⌋`` of the L acquisitions, with probability ``e`` one more allowed unit (the one of
    largest ``pick``) added — :func:`trajectory_states` for one state per datum.

    Returns:
      ``(ret, correct, Z, deviated, length)``: (N,) episode return and whether it ends in the right
      class, (N, J) bool sampled states, (N,) whether the state was deviated and (N,) int32 the
      number of units the episode acquired.
    """
    J = spec.groups.costs.shape[0]
    costs = spec.groups.costs
    units = jnp.arange(J, dtype=jnp.int32)
    z0 = jnp.zeros((J,), bool)

    def one(x, yi, c, ui, ei, pi):
        ret, label, _, order = run_episode(
            None,
            spec,
            x,
            yi,
            z0,
            jnp.zeros((), costs.dtype),
            thetasT[c, -1],
            track_order=True,
            delta_fn=lambda j: component_delta(thetasT, c, spec, x, j),
        )
        L = jnp.sum(order >= 0, dtype=jnp.int32)
        kpos = jnp.minimum(jnp.floor(ui * (L + 1).astype(ui.dtype)).astype(jnp.int32), L)
        z = z0.at[jnp.where(units < kpos, order, J)].set(True, mode="drop")
        spent = jnp.sum(jnp.where(z, costs, jnp.zeros_like(costs)))
        ok = acquire_allowed(spec, z, spent)
        j = jnp.argmax(jnp.where(ok, pi, -1.0)).astype(jnp.int32)
        dev = ok[j] & ei
        return ret, label == yi, z | ((units == j) & dev), dev, L

    return grouped_vmap(one, (X, y, comp, u, e, pick), batch)
