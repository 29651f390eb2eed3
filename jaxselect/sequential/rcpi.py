"""Rollout Classification Policy Iteration (RCPI) for the datum-wise sparse model.

Dulac-Arnold et al. (2012), §3.4 (RCPI, after Lagoudakis & Parr 2003), §6.1 (10 states per
training example, 10 iterations, α-mixture with α = 0.7, footnote 11) and §5.1 (complexity
``O(N_s · T · (n + c)²)`` per iteration).

One iteration t (all inside one ``jit``; the iterations are a ``lax.scan``):

1. **States.** Every training row is used ``states_per_example`` times. For each state z is drawn
   from the paper's "uniform binomial": the number of acquired units k ~ U{0, …, J} and then a
   uniformly random set of k units (so z_j ~ Bernoulli(p) with p ~ U(0, 1) — every sparsity level
   equally likely; a fixed Bernoulli(½) would almost never visit the near-empty states where the
   policy starts). The S states of one row are stratified over the levels (state r has
   k = ⌊(r(J+1) + w)/S⌋, w ~ U{0..J}; marginally still uniform). With a hard budget
   k ~ U{0, …, min(J, M)} and units that would overflow M are dropped, so every sampled state is
   feasible.
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
3. **Regression.** For each action a, ridge regression of ``Q(s, a)`` on ``φ(s)`` over the states
   where a is allowed: ``θ_a = (G_a + l2·D)⁻¹ b_a`` with ``G_a = (1/m_a) Σ_s φ_s φ_sᵀ``,
   ``b_a = (1/m_a) Σ_s Q(s, a) φ_s`` and D the identity without the bias entry (the bias is not
   shrunk). An action allowed in no sampled state keeps its previous weights.
4. **α-mixture** (footnote 11: "θ_t is chosen with probability 1−α, otherwise the previous
   α-mixture policy is used"). ``mixture="stochastic"`` (default, the paper's): the rollout policy
   of iteration t is the mixture of θ_0 … θ_t with weights ``P(θ_k) = (1−α) α^{t−k}`` (k ≥ 1),
   ``P(θ_0) = α^t``; the component is drawn once per sampled state and used for all the rollouts
   of that state (common random numbers: the actions of a state are compared under the same
   policy; one rollout per state-action is then exact). ``mixture="average"``: deterministic
   parameter averaging ``θ̄_t = α θ̄_{t−1} + (1−α) θ_t``.

The initial policy is θ_0 = 0 (all scores tie, so it classifies as class 0 at once). Inference
uses the last iterate θ_T (``"stochastic"``) or θ̄_T (``"average"``): a deterministic classifier, the
paper's "final policy π_θ̂".
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .._validation import as_float_matrix, as_labels, check_float, check_int
from .mdp import DWSMSpec, acquire_allowed, acquire_reward, classify_reward, feature_mask, make_spec
from .policy import DWSMPolicy, phi, run_episode, unit_contribution_table

__all__ = [
    "dwsm_fit",
    "sample_states",
    "rollout_capacity",
    "row_state_action_values",
    "state_action_values",
    "mixture_weights",
    "ridge_fit",
]


def _standardize_stats(X: jax.Array):
    n = X.shape[0]
    ones = jnp.ones((n,), X.dtype)
    mean = ones @ X / n
    Xc = X - mean[None, :]
    var = ones @ (Xc * Xc) / n
    std = jnp.sqrt(var)
    eps = jnp.asarray(np.sqrt(np.finfo(X.dtype).eps) * 4.0, X.dtype)
    const = std <= eps * jnp.abs(mean)
    const = const | (std == 0)
    scale = jnp.where(const, jnp.ones_like(std), std)
    return mean, scale


def sample_states(key: jax.Array, spec: DWSMSpec, n_rows: int, states_per_example: int, kmax=None) -> jax.Array:
    """Random acquired-unit masks, (n_rows, S, J) bool, S = ``states_per_example``.

    ``kmax`` defaults to ``min(J, M)`` (traced: budgets share one compiled fit).

    The number of units k of state r of a row is ``⌊(r (kmax+1) + w) / S⌋`` with w ~ U{0..kmax}:
    marginally k ~ U{0, …, kmax} (the "uniform binomial": z_j ~ Bernoulli(p), p ~ U(0, 1)), and
    the S states of one row are stratified over the sparsity levels. The k units are a uniformly
    random subset (units that would push the budget count past M are skipped).
    """
    J = spec.unit_size.shape[0]
    S = states_per_example
    if kmax is None:
        kmax = jnp.minimum(jnp.asarray(J, jnp.int32), spec.budget)
    k1, k2 = jax.random.split(key)
    u = jax.random.uniform(k1, (n_rows, S, J))
    order = jnp.argsort(u, axis=-1).astype(jnp.int32)
    w = jax.random.randint(k2, (n_rows, S), 0, kmax + 1, dtype=jnp.int32)
    k = (jnp.arange(S, dtype=jnp.int32)[None, :] * (kmax + 1) + w) // S
    cum = jnp.cumsum(spec.unit_size[order], axis=-1)
    take = (jnp.arange(J, dtype=jnp.int32)[None, None, :] < k[:, :, None]) & (cum <= spec.budget)
    rank = jnp.argsort(order, axis=-1)
    return jnp.take_along_axis(take, rank, axis=-1)


def rollout_capacity(J: int, states_per_example: int, kmax: int, exact_sizes: bool) -> int:
    """Static number of rollout lanes per row: an upper bound on its allowed acquisitions.

    State r has at least ``⌊r (kmax+1) / S⌋`` acquired units, hence at most J minus that allowed
    acquisitions (exact when every sampled state has exactly k units, ``exact_sizes``).
    """
    S = states_per_example
    if not exact_sizes:
        return S * J
    return int(sum(J - (r * (kmax + 1)) // S for r in range(S)))


def mixture_weights(t, n_components: int, alpha, mixture: str) -> jax.Array:
    """(K,) probabilities of θ_0..θ_{K-1} in the rollout policy of iteration t (components > t: 0).

    ``"stochastic"``: ``P(θ_k) = (1−α) α^{t−k}`` for 1 ≤ k ≤ t and ``P(θ_0) = α^t``;
    ``"average"``: all mass on θ_t (which already holds the parameter average).
    """
    k = jnp.arange(n_components, dtype=jnp.int32)
    tt = jnp.asarray(t)
    if mixture == "average":
        return (k == tt).astype(jnp.asarray(alpha).dtype)
    alpha = jnp.asarray(alpha)
    expo = (tt - k).astype(alpha.dtype)
    w = jnp.where(k == 0, alpha**expo, (1 - alpha) * alpha**expo)
    return jnp.where(k <= tt, w, jnp.zeros_like(w))


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
    zf = feature_mask(spec, Z)
    ph = jax.vmap(phi, in_axes=(None, 0))(x, zf)  # (S, p)
    s0 = jnp.einsum("sap,sp->sa", thetas, ph)
    count = jnp.sum(jnp.where(Z, spec.unit_size[None, :], 0), axis=1).astype(jnp.int32)
    allowed_acq = jax.vmap(acquire_allowed, in_axes=(None, 0, 0))(spec, Z, count)  # (S, J)
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
            None, spec, x, y, z1, count[r] + spec.unit_size[j], s0[r] + tables[r, j],
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
    J = spec.unit_size.shape[0]
    out = row_state_action_values(theta[None], spec, x, y, z[None], J)
    return jax.tree.map(lambda a: a[0], out)


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
      (A, p) ``θ_a = (Φᵀ W_a Φ / m_a + l2 D)⁻¹ Φᵀ W_a Q_a / m_a``, D = diag(1, …, 1, 0).
    """
    m, Bs, Gs = _ridge_stats(Phi, Q, W, gram_batch=gram_batch)
    return _ridge_solve(m, Bs, Gs, l2, theta_prev)


def _row_axes(X, n: int):
    """Mesh axes that split the rows of X, or None (unsharded, or not evenly split by rows).

    Returns ``(mesh, axes)`` with ``axes`` a tuple of mesh axis names when X is a jax.Array with a
    ``NamedSharding`` whose first dimension is split over more than one device and n is a multiple
    of that device count; the fit then runs the rollouts of each device's rows on that device.
    """
    if not isinstance(X, jax.Array):
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


@partial(
    jax.jit,
    static_argnames=(
        "n_iter", "states_per_example", "mixture", "rows_per_chunk", "gram_batch", "callback", "standardize", "cap",
        "mesh", "row_axes",
    ),
)
def _fit(
    key, X, y, spec, alpha, l2, *, n_iter, states_per_example, mixture, rows_per_chunk, gram_batch, callback, standardize,
    cap, mesh=None, row_axes=None,
):
    n, d = X.shape
    dt = X.dtype
    C, J = spec.cost_matrix.shape[0], spec.unit_size.shape[0]
    A, p, k, K = C + J, 2 * d + 1, states_per_example, n_iter + 1
    if standardize:
        mean, scale = _standardize_stats(X)
    else:
        mean, scale = jnp.zeros((d,), dt), jnp.ones((d,), dt)
    Xs = (X - mean[None, :]) / scale[None, :]
    alpha = jnp.asarray(alpha, dt)
    l2 = jnp.asarray(l2, dt)

    def iteration(carry, key_t):
        thetas, t = carry
        kz, kc = jax.random.split(key_t)
        Z = sample_states(kz, spec, n, k)
        probs = mixture_weights(t, K, alpha, mixture)
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
            # X is split by rows: every device runs the rollouts of its own rows (the per-row
            # states and mixture components were drawn for all rows above, so the result does
            # not depend on the device count); the ridge statistics are summed across devices
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
        theta_prev = thetas[t]
        theta_new = _ridge_solve(m, Bs, Gs, l2, theta_prev)
        if mixture == "average":
            theta_new = alpha * theta_prev + (1 - alpha) * theta_new
        thetas = jax.lax.dynamic_update_index_in_dim(thetas, theta_new, t + 1, axis=0)
        mean_ret = ret_sum / (n * k)
        acc = corr_sum / (n * k)
        if callback is not None:
            jax.debug.callback(callback, t + 1, mean_ret, acc, ordered=True)
        return (thetas, t + 1), (mean_ret, acc)

    thetas0 = jnp.zeros((K, A, p), dt)
    keys = jax.random.split(key, n_iter)
    (thetas, _), (rets, accs) = jax.lax.scan(iteration, (thetas0, jnp.zeros((), jnp.int32)), keys)
    weights = mixture_weights(n_iter, K, alpha, mixture)
    return DWSMPolicy(
        theta=thetas[n_iter],
        mean=mean,
        scale=scale,
        spec=spec,
        thetas=thetas,
        mix_weights=weights,
        train_return=rets,
        train_accuracy=accs,
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
    lam: float = 0.01,
    budget: int | None = None,
    feature_costs=None,
    cost_matrix=None,
    groups=None,
    related=None,
    n_iter: int = 10,
    states_per_example: int = 10,
    alpha: float = 0.7,
    l2: float = 1e-3,
    gamma: float | None = None,
    n_classes: int | None = None,
    budget_unit: str = "features",
    mixture: str = "stochastic",
    standardize: bool = True,
    rollout_batch: int = 256,
    callback: Callable | None = None,
    verbose: bool = False,
) -> DWSMPolicy:
    """Learn a datum-wise sparse classifier by RCPI (Dulac-Arnold et al. 2012, §3–4).

    The policy maximises the MDP return, i.e. minimises the datum-wise loss (paper eq. 2 and
    Table 1): ``(1/N) Σ_i [ C[ŷ_i, y_i] + Σ_t ξ_{j_t} ρ_t ]`` where ρ_t = λ (or γ for an acquisition
    unrelated to an acquired unit). Base model: ``Δ(ŷ, y) + λ ‖z‖₀``.

    Args:
      key: PRNG key (the fit is deterministic given it).
      X: (n, d) raw features (standardised on these rows inside; a row-sharded jax.Array is fine).
      y: (n,) integer labels 0..C-1 (every class present unless ``n_classes`` is given).
      lam: λ >= 0, reward multiplier per acquisition (−λ per feature/group in the base model).
      budget: hard budget M >= 0 on ‖z‖₀ (Table 2); None for none.
      feature_costs: ξ > 0, (d,) per feature or (J,) per group; the acquisition reward is −λ ξ_j
        (``lam=1`` gives the paper's −ξ_j).
      cost_matrix: (C, C) ``C[predicted, true]``; default ``1 − I``.
      groups: (d,) group ids or a list of index lists; an action acquires a whole group (§4.2.4).
      related: (J, J) bool, ``related[j, k]``: unit j is related to unit k (§4.2.5).
      n_iter: RCPI iterations (paper: 10). states_per_example: sampled states per row (paper: 10).
      alpha: α-mixture weight in [0, 1) (paper: 0.7). l2: ridge weight > 0 (on the per-action
        normalised Gram matrix; the bias is not penalised).
      gamma: γ >= 0 for unrelated acquisitions (default 2λ).
      n_classes: C when some classes are absent from y.
      budget_unit: ``"features"`` (‖z‖₀, default) or ``"groups"``.
      mixture: ``"stochastic"`` (paper footnote 11) or ``"average"`` (parameter averaging).
      standardize: standardise features on the training set (paper; constant columns get scale 1).
      rollout_batch: about how many rollouts run side by side in one ``while_loop`` (rows are
        processed ``max(1, rollout_batch // lanes_per_row)`` at a time; small chunks stop as
        soon as their own rollouts end, which is what makes training fast on CPU).
      callback: ``callback(iteration, mean_return, accuracy)`` called on the host after each
        iteration (``jax.debug.callback``); off by default, no host round-trips without it.
      verbose: print that progress line per iteration.

    Returns:
      A :class:`~jaxselect.sequential.DWSMPolicy`.

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
    X = as_float_matrix(X, "X")
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
    alpha = check_float(alpha, "alpha", low=0.0)
    if alpha >= 1.0:
        raise ValueError(f"alpha must be in [0, 1); got {alpha}")
    l2 = check_float(l2, "l2", low=0.0, strict_low=True)
    rollout_batch = check_int(rollout_batch, "rollout_batch", low=1)
    if mixture not in ("stochastic", "average"):
        raise ValueError(f"mixture must be 'stochastic' or 'average'; got {mixture!r}")
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
        budget_unit=budget_unit,
        feature_costs=feature_costs,
        cost_matrix=cost_matrix,
        groups=groups,
        related=related,
    )
    J = spec.n_units
    # lane packing only without a budget (then every state has exactly k units): budgets stay
    # traced and share one compiled fit; budgeted rollouts are short anyway
    cap = rollout_capacity(J, states_per_example, J, exact_sizes=budget is None)
    # a row-sharded X runs each device's rollouts on its own rows (chunks of its local block)
    sharded = _row_axes(X, n)
    mesh, row_axes = sharded if sharded is not None else (None, None)
    n_local = n if sharded is None else n // int(np.prod([mesh.shape[a] for a in row_axes]))
    rows_per_chunk = max(1, min(n_local, rollout_batch // cap))
    policy = _fit(
        key,
        X,
        jnp.asarray(labels),
        spec,
        alpha,
        l2,
        n_iter=n_iter,
        states_per_example=states_per_example,
        mixture=mixture,
        rows_per_chunk=rows_per_chunk,
        gram_batch=8,
        callback=callback,
        standardize=bool(standardize),
        cap=cap,
        mesh=mesh,
        row_axes=row_axes,
    )
    return policy
