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

from .mdp import DWSMSpec, acquire_allowed, acquire_reward, budget_rtol, classify_reward, feature_mask
from .policy import phi, run_episode, unit_contribution_table
from .states import component_delta

__all__ = ["rollout_capacity", "row_state_action_values", "state_action_values", "sampled_rollouts", "slot_rollouts"]


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



def sampled_rollouts(problem, thetasT, comp, X, y, Z, Phi, sw, wc, scores, key):
    """Roll out a sample of the acquisition actions in the N sampled states; their ridge statistics.

    Every acquisition unit j is rolled out from M = ``problem.config.action_states`` of the N
    states where it is allowed (drawn uniformly; all of them when M = N): the lane (j, m) runs the
    greedy policy ``thetasT[comp[s]]`` of its state s from ``z_s ∪ {j}`` until it classifies, in
    chunks of ``config.rollout_batch`` lanes (a ``lax.scan`` of vmapped ``while_loop``s: fixed
    shapes, each chunk stops when its own rollouts end). ``Q(s, j) = r(s, j) + return``.

    Args:
      problem: the :class:`~.RCPIProblem` (config, spec, hyper-parameters).
      thetasT: (K, p, A) iterates transposed; comp: (N,) int32 component of each state.
      X: (N, d) standardised data of the states; y: (N,) labels; Z: (N, J) bool states;
        Phi: (N, p) their features φ(x, z).
      sw: (N,) state weights; wc: (N,) weights of the states in the classification regressions
        (0 for deviated states): the weights of the rollouts' terminal states.
      scores: (N, A) ``θ_comp · φ(x, z)`` of every state; key: PRNG key of the action sample, or
        its (N,) uniform draws in [0, 1) (one per state; what :func:`~.rcpi_step` passes).

    Returns:
      ``(m, B, G)`` of the J acquisition actions ((J,), (J, p), (J, p, p): weighted count,
      ``Σ w Q φ`` and ``Σ w φ φᵀ``) and, with ``config.terminal``, ``(m_T, b_T, G_T)`` over the
      rollouts' terminal states (weight ``wc``; ``b_T`` is (C, p) with the targets ``−C[c, y]``).
    """
    cfg = problem.config
    spec = problem.spec
    dt = X.dtype
    N, d = X.shape
    C, J = spec.cost_matrix.shape[0], spec.groups.costs.shape[0]
    p = 2 * d + 1
    costs = spec.groups.costs
    units = jnp.arange(J, dtype=jnp.int32)
    spent = jnp.sum(jnp.where(Z, costs[None, :], jnp.zeros_like(costs)[None, :]), axis=1)
    allowed = jax.vmap(acquire_allowed, in_axes=(None, 0, 0))(spec, Z, spent)  # (N, J)
    r_acq = jax.vmap(acquire_reward, in_axes=(None, 0))(spec, Z)  # (N, J)
    ok = allowed & (sw > 0)[:, None]
    M = cfg.action_states
    if M >= N:
        idx = jnp.broadcast_to(jnp.arange(N, dtype=jnp.int32)[None, :], (J, N))
        valid = ok.T
    else:
        # M states per unit, uniformly among those where it is allowed (draws laid out state-major:
        # rows appended with weight 0 change no draw of the others)
        # one draw per state shared by every unit (common states): unit j takes the M states of
        # largest draw among those where it is allowed, so the units' regressions see (almost) the
        # same states and their errors are correlated — the differences between the actions' scores,
        # which the greedy policy compares, stay accurate (independent samples per unit over-rate
        # acquisitions: the argmax over J noisy fits picks the most optimistic one)
        if isinstance(key, jax.Array) and jnp.issubdtype(key.dtype, jnp.floating):
            u = key.astype(dt).reshape(N, 1)  # the caller's uniform draws, one per state
        else:
            u = jax.random.uniform(key, (N, 1), dt)
        vals, idx = jax.lax.top_k(jnp.where(ok, u, -1.0).T, M)
        valid = vals >= 0
    q_cls = -spec.cost_matrix[:, y].T.astype(dt)  # (N, C)

    # lanes m-major (lane m·J + j: the m-th sampled state of unit j): the first 8N lanes are a
    # random sample spread over every unit, whose terminal states enter the classification
    # regressions (their total weight is set by terminal_weight; one Gram over them afterwards)
    L = J * M
    lane_s, lane_j, lane_v = idx.T.reshape(L), jnp.tile(units, M), valid.T.reshape(L)
    L_T = min(L, 8 * N) if cfg.terminal else 0
    ret, zT = slot_rollouts(
        spec, thetasT, comp, X, y, Z, spent, scores, lane_s, lane_j, lane_v, L_T, batch=int(cfg.rollout_batch)
    )
    ret = ret.reshape(M, J).T
    tstats = ()
    if L_T:
        s_T = lane_s[:L_T]
        phT = jax.vmap(phi)(X[s_T], feature_mask(spec, zT))
        wT = jnp.where(lane_v[:L_T], wc[s_T], jnp.zeros((), dt))
        tstats = (jnp.sum(wT), (q_cls[s_T] * wT[:, None]).T @ phT, (phT * wT[:, None]).T @ phT)
    Q = jnp.take_along_axis(r_acq.T, idx, axis=1) + ret  # (J, M)
    wa = jnp.where(valid, sw[idx], jnp.zeros((), dt))

    def stats(args):
        idx_j, w_j, q_j = args
        P = Phi[idx_j]
        return jnp.sum(w_j), (w_j * q_j) @ P, (P * w_j[:, None]).T @ P

    m, Bs, Gs = jax.lax.map(stats, (idx, wa, Q), batch_size=max(1, int(cfg.gram_batch)))
    return (m, Bs, Gs) + tuple(tstats)


def slot_rollouts(spec: DWSMSpec, thetasT, comp, X, y, Z, spent, scores, lane_s, lane_j, lane_v, n_terminal: int, *,
                  batch: int = 1024):
    """Roll out L lanes (state ``lane_s``, first acquisition ``lane_j``) in a pool of ``batch`` slots.

    One ``while_loop`` steps every slot's episode (greedy policy ``thetasT[comp[s]]``, incremental
    scores, §5.1); a slot whose lane classified writes its result and loads the next lane, so the
    loop runs about ``Σ lengths / batch + max length`` steps (no slot waits for the longest rollout
    of a fixed group). Lanes with ``lane_v`` False are not run (return 0).

    Returns:
      ``(ret, zT)``: (L,) the return collected after the first acquisition (its own reward
      excluded), and (n_terminal, J) bool the final units of the first ``n_terminal`` lanes.
    """
    C, J = spec.cost_matrix.shape[0], spec.groups.costs.shape[0]
    d = spec.groups.ids.shape[0]
    L = lane_s.shape[0]
    B = max(1, min(int(batch), L))
    dt = scores.dtype
    costs = spec.groups.costs
    units = jnp.arange(J, dtype=jnp.int32)
    has_rel = spec.related.shape[0] > 0
    limit = spec.budget * jnp.asarray(1.0 + budget_rtol(spec.budget.dtype), spec.budget.dtype)
    neg_inf = jnp.asarray(-jnp.inf, dt)
    # invalid lanes are skipped: the run order lists the valid lanes first
    order = jnp.argsort(~lane_v, stable=True).astype(jnp.int32)
    n_valid = jnp.sum(lane_v, dtype=jnp.int32)

    def delta(c, st, j):
        """(B, A) score change of acquiring unit j[b] in slot b (policy c[b], datum st[b])."""
        cols_ok = spec.groups.mask[j]  # (B, s_max)
        cols = jnp.where(cols_ok, spec.groups.index[j], 0)
        v = cols_ok.astype(dt)
        tz = thetasT[c[:, None], cols]  # (B, s_max, A)
        tx = thetasT[c[:, None], cols + d]
        xv = X[st[:, None], cols] * v
        return jnp.sum(v[..., None] * tz + xv[..., None] * tx, axis=1)

    def load(pos):
        """The slots' state for run positions ``pos`` (B,) (inactive beyond the valid lanes)."""
        ok = pos < n_valid
        lane = order[jnp.minimum(pos, L - 1)]
        st, j = lane_s[lane], lane_j[lane]
        c = comp[st]
        z1 = Z[st] | (units[None, :] == j[:, None])
        out = dict(
            lane=lane,
            ok=ok,
            st=st,
            c=c,
            z1=z1,
            s=scores[st] + delta(c, st, j),
            avail=(~z1) & spec.live[None, :],
            left=limit - (spent[st] + costs[j]).astype(spec.budget.dtype),
            ret=jnp.zeros((B,), dt),
        )
        if has_rel:
            out["bad"] = jnp.any(~spec.related[None, :, :] & z1[:, None, :], axis=2)
        return out

    def body(carry):
        sl, nxt, out_ret, out_z = carry
        allowed = sl["avail"] & (costs[None, :] <= sl["left"][:, None])
        masked = jnp.where(jnp.concatenate([jnp.ones((B, C), bool), allowed], axis=1), sl["s"], neg_inf)
        a = jnp.argmax(masked, axis=1).astype(jnp.int32)
        is_cls = a < C
        j = jnp.clip(a - C, 0, J - 1)
        if has_rel:
            rho = jnp.where(jnp.take_along_axis(sl["bad"], j[:, None], axis=1)[:, 0], spec.gamma, spec.lam)
        else:
            rho = spec.lam
        r = jnp.where(is_cls, -spec.cost_matrix[jnp.clip(a, 0, C - 1), y[sl["st"]]], -costs[j] * rho)
        onehot = (units[None, :] == j[:, None]) & ~is_cls[:, None]
        stepped = dict(sl)
        stepped["s"] = jnp.where(is_cls[:, None], sl["s"], sl["s"] + delta(sl["c"], sl["st"], j))
        stepped["avail"] = sl["avail"] & ~onehot
        stepped["left"] = sl["left"] - jnp.where(is_cls, jnp.zeros_like(sl["left"]), costs[j])
        stepped["ret"] = sl["ret"] + r
        if has_rel:
            stepped["bad"] = sl["bad"] | (~spec.related[:, j].T & ~is_cls[:, None])
        finished = is_cls & sl["ok"]
        out_ret = out_ret.at[jnp.where(finished, sl["lane"], L)].set(stepped["ret"], mode="drop")
        if n_terminal:
            zT = sl["z1"] | (spec.live[None, :] & ~stepped["avail"])
            out_z = out_z.at[jnp.where(finished & (sl["lane"] < n_terminal), sl["lane"], n_terminal)].set(zT, mode="drop")
        # finished (or empty) slots take the next lanes in the run order
        refill = is_cls | ~sl["ok"]
        pos = nxt + jnp.cumsum(refill, dtype=jnp.int32) - 1
        fresh = load(pos)
        new = jax.tree.map(
            lambda f, o: jnp.where(refill.reshape((B,) + (1,) * (o.ndim - 1)), f, o), fresh, stepped
        )
        return new, nxt + jnp.sum(refill, dtype=jnp.int32), out_ret, out_z

    def cond(carry):
        return jnp.any(carry[0]["ok"]) | (carry[1] < n_valid)

    out_ret = jnp.zeros((L,), dt)
    out_z = jnp.zeros((max(n_terminal, 1), J), bool)
    # every slot starts idle: the first step loads lanes 0..B−1 (one traced load, inside the loop)
    idle = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), jax.eval_shape(load, jnp.zeros((B,), jnp.int32)))
    init = (idle, jnp.zeros((), jnp.int32), out_ret, out_z)
    _, _, out_ret, out_z = jax.lax.while_loop(cond, body, init)
    return out_ret, out_z[:n_terminal]
