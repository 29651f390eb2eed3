"""Rollouts of RCPI: exact Q(s, a) of every allowed action in the sampled states, and their sums.

Dulac-Arnold et al. (2012), §3.4 and §5.1 (complexity ``O(N_s · T · (n + c)²)`` per iteration).
For each state and each allowed action, ``Q(s, a)`` is computed exactly by one rollout of the
(deterministic) policy of the state: ``Q = −C[a, y]`` for classification, and ``r(s, a) + return of
π from T(s, a)`` for an acquisition. ``vmap`` over states × actions, each rollout a bounded
``while_loop`` with a done flag (:func:`~.policy.run_episode`). The allowed acquisitions of a row's S
states are packed into a static number of lanes (:func:`rollout_capacity`), the score change of every
unit is tabulated once per state and shared by its rollouts, and the lanes run ``rollout_batch`` at a
time (``lax.map`` over groups of lanes and rows) so that each loop stops when its own rollouts end.

:func:`rollout_statistics` turns the rollouts of all training rows into the per-action ridge
statistics of :mod:`~.policy_fit`. With a row-sharded X it runs under ``jax.shard_map``: each device
rolls out its own rows and only the statistics are summed across devices (``psum``); X is never
gathered.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec

from .mdp import DWSMSpec, acquire_allowed, acquire_reward, classify_reward, feature_mask
from .policy import phi, run_episode, unit_contribution_table
from .policy_fit import ridge_stats

__all__ = ["rollout_capacity", "row_state_action_values", "state_action_values", "rollout_statistics"]


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



def rollout_statistics(problem, thetas, Z, comp, cls_w):
    """Roll out every allowed action in the sampled states of every row; sum the ridge statistics.

    Each state r of row i is evaluated under its own greedy policy ``thetas[comp[i, r]]``
    (:func:`row_state_action_values`), and every state counts with the row's weight
    ``problem.weights[i]``. Rows are processed a chunk at a time (``lax.scan``; the chunk is padded
    so that one body is compiled). With ``problem.config.row_axes`` set each device rolls out its
    own rows (``jax.shard_map``) and the sums are ``psum``-ed: the result does not depend on the
    device count.

    Args:
      problem: an :class:`~.RCPIProblem` (its static ``config`` gives the lanes, batches, mesh).
      thetas: (K, A, p) policy iterates; Z: (n, S, J) bool sampled states; comp: (n, S) int32
        index into ``thetas`` of each state's policy; cls_w: (n, S) bool, the states where the
        classification actions are fitted (not the deviated ones).

    Returns:
      ``(m, Bs, Gs, ret_sum, corr_sum)`` — the statistics of :func:`~.policy_fit.ridge_stats`
      ((A,), (A, p), (A, p, p)) and the weighted sums of the rollout policy's return and
      correctness over the sampled states — followed, when ``config.terminal``, by
      ``(m_T, b_T, G_T)``: the weighted number of rollouts that classified, (C, p)
      ``Σ −C[c, y] φ_T`` and (p, p) ``Σ φ_T φ_Tᵀ`` over their terminal states.
    """
    cfg = problem.config
    Xs, y, spec, rw = problem.X, problem.y, problem.spec, problem.weights
    n, d = Xs.shape
    dt = Xs.dtype
    C, J = spec.cost_matrix.shape[0], spec.groups.costs.shape[0]
    A, p, k = C + J, 2 * d + 1, cfg.states_per_example
    terminal, cap, rollout_batch, row_axes = cfg.terminal, cfg.cap, cfg.rollout_batch, cfg.row_axes
    parts = 1 if row_axes is None else cfg.n_parts
    rows_per_chunk = max(1, min(n // parts, rollout_batch // cap))

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
        m, Bs, Gs = ridge_stats(Phi, Q, W, gram_batch=cfg.gram_batch)
        return (m, Bs, Gs, jnp.sum(pi_ret), jnp.sum(pi_corr)) + tuple(tstats)

    args = (thetas, spec, Xs, y, Z, comp, cls_w, rw)
    if row_axes is None:
        return rollouts(*args)

    # X is split by rows: every device runs the rollouts of its own rows (the per-row states and
    # mixture components were drawn for all rows, so the result does not depend on the device
    # count); the ridge statistics are summed across devices
    def local(*a):
        return jax.lax.psum(rollouts(*a), row_axes)

    rows = PartitionSpec(row_axes)
    spec_in = jax.tree.map(lambda _: PartitionSpec(), spec)
    return jax.shard_map(
        local,
        mesh=cfg.mesh,
        in_specs=(PartitionSpec(), spec_in, rows, rows, rows, rows, rows, rows),
        out_specs=PartitionSpec(),
        # the rollout loops start from constants (invariant) and carry per-row values (varying);
        # the only cross-device step is the psum above, after which the statistics are replicated
        check_vma=False,
    )(*args)
