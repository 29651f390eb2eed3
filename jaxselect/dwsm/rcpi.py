"""Rollout Classification Policy Iteration (RCPI) for the datum-wise sparse model.

Dulac-Arnold et al. (2012), §3.4 (RCPI, after Lagoudakis & Parr 2003: "termination once performance
of a new policy no longer significantly improves", a "final policy" for inference), §6.1 (10 states
per training example, 10 iterations, α-mixture with α = 0.7, footnote 11) and §5.1 (complexity
``O(N_s · T · (n + c)²)`` per iteration).

Solver protocol (the library's): :func:`~.problem.rcpi_problem` standardises the training data
once and fixes every option (traced hyper-parameters as arrays, Python configuration as a static
config); :func:`rcpi_init` ``(problem, key, n_iter) -> state`` gives the :class:`RCPIState` (θ_0:
classify at once as the cheapest class; the PRNG key lives in the state);
:func:`rcpi_step` ``(problem, state) -> state`` is one policy iteration;
:func:`rcpi_evaluate` the datum-wise loss of an iterate's greedy policy on the training rows; and
:func:`rcpi_run` ``(problem, state) -> DWSMPolicy`` the compiled loop (``lax.scan``) of
``rcpi_step`` that returns the iterate with the lowest training datum-wise loss.
:func:`~.fit.dwsm_fit` validates the user's input and runs ``rcpi_problem`` and that loop in one
compiled program. Module layout: :mod:`~.problem` (problem, options, boundary checks),
:mod:`~.states` (step 1), :mod:`~.rollouts` (step 2), :mod:`~.policy_fit` (steps 3–4), this module
(the iteration and its loop), :mod:`~.fit` (``dwsm_fit``).

One iteration t (:func:`rcpi_step`; its random numbers are one uniform draw from ``fold_in(key, t)``):

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

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec

from jaxselect._compat import is_tracer
from jaxselect._repr import short_repr
from jaxselect.solver import Solver, SolverTraits, run
from jaxselect.status import NONFINITE, OK

from . import progress
from .._validation import check_int
from .mdp import feature_mask
from .policy import DWSMPolicy, phi, run_episode
from .policy_fit import (  # noqa: F401 - the names this module had before it was split by job
    AVERAGE_MIXTURE,
    STOCHASTIC_MIXTURE,
    MixtureRule,
    ridge_solve,
    ridge_solve_actions,
    ridge_stats,
    shared_ridge_solve,
    mixture_weights,
    ridge_fit,
)
from .problem import RCPIConfig, RCPIProblem, check_key, rcpi_problem  # noqa: F401
from .rollouts import rollout_capacity, row_state_action_values, sampled_rollouts, state_action_values  # noqa: F401
from .states import (  # noqa: F401
    max_units_within_budget,
    policy_episodes,
    sample_states,
    trajectory_draws,
    trajectory_states,
    trajectory_states_given_draws,
)

__all__ = [
    "RCPIProblem",
    "RCPIConfig",
    "RCPIState",
    "RCPIInfo",
    "RCPIRun",
    "RCPIStepInfo",
    "rcpi_solver",
    "rcpi_problem",
    "rcpi_init",
    "rcpi_step",
    "rcpi_run",
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

class RCPIInfo(NamedTuple):
    """Diagnostics of one :func:`rcpi_step` (the rollout policy from the sampled states).

    Attributes:
      mean_return: () mean return (minus the mean datum-wise loss).
      accuracy: () fraction of those episodes that end in the right class.
    """

    mean_return: jax.Array
    accuracy: jax.Array

    __repr__ = short_repr


class RCPIState(NamedTuple):
    """The carry of RCPI: every iterate so far (the α-mixture needs them) and the PRNG key.

    Attributes:
      thetas: (K, A, p) θ_0, θ_1, …, θ_t, then zeros (K = n_iter + 1 slots).
      t: () int32 iterations done; ``thetas[t]`` is the current policy.
      key: the fit's PRNG key; iteration t draws its random numbers from ``fold_in(key, t)``
        (a function of (key, t) only, so a loop that skips iterations changes no later draw).
      info: :class:`RCPIInfo` of the last step (NaN before the first).
    """

    thetas: jax.Array
    t: jax.Array
    key: jax.Array
    info: RCPIInfo

    __repr__ = short_repr


def initial_policy(problem: RCPIProblem) -> jax.Array:
    """θ_0, (A, p): classify at once as the class of least mean cost on the training rows.

    Only biases: classification row c gets ``−Σ_i w_i C[c, y_i] / Σ_i w_i`` (its exact mean reward
    at any state; w the row weights), every acquisition row one less than the best of them, so θ_0
    never acquires. (Adding the one-feature least-squares fits as value weights, so that θ_0
    classifies sensibly after a rollout's first acquisition, raised the held-out loss at
    λ = 0.03–0.1 on WDBC and ionosphere.)
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


def initial_evaluation(problem: RCPIProblem):
    """:func:`rcpi_evaluate` of θ_0 in closed form: θ_0 classifies every datum at once as the first
    class of least mean cost, so its loss is that mean cost, its accuracy that class's (weighted)
    share, and it acquires nothing (no episode loop to compile)."""
    spec = problem.spec
    dt = problem.X.dtype
    w = problem.weights
    total = jnp.sum(w)
    q_cls = -((spec.cost_matrix[:, problem.y].astype(dt) @ w) / total)  # (C,), as initial_policy
    c = jnp.argmax(q_cls).astype(jnp.int32)  # ties: the lowest class, as the greedy policy
    acc = jnp.sum(jnp.where(problem.y == c, w, jnp.zeros_like(w))) / total
    return -q_cls[c], acc, jnp.zeros((), dt)


def rcpi_init(problem: RCPIProblem, key, n_iter: int) -> RCPIState:
    """θ_0 = :func:`initial_policy` (classify at once as the cheapest class), ``n_iter`` free slots, the key.

    Args:
      problem: :class:`RCPIProblem` from :func:`rcpi_problem`.
      key: PRNG key of the whole run (``jax.random.key(seed)``; checked for type and shape only).
      n_iter: number of iterations the state has room for (Python int >= 1).

    Returns:
      An :class:`RCPIState` with ``t = 0``.
    """
    key = check_key(key)
    n_iter = check_int(n_iter, "n_iter", low=1)
    d = problem.X.shape[1]
    dt = problem.X.dtype
    A = problem.spec.cost_matrix.shape[0] + problem.spec.groups.costs.shape[0]
    thetas = jnp.zeros((n_iter + 1, A, 2 * d + 1), dt).at[0].set(initial_policy(problem))
    nan = jnp.asarray(jnp.nan, dt)
    return RCPIState(thetas, jnp.zeros((), jnp.int32), key, RCPIInfo(nan, nan))


def rcpi_evaluate(theta, problem: RCPIProblem) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The greedy policy θ on the training rows, every episode from the empty state.

    With a row-sharded problem (``problem.config.row_axes``) each device runs the episodes of its
    own rows and the sums are ``psum``-ed.

    Args:
      theta: (A, p) policy; problem: :class:`RCPIProblem`.

    Returns:
      ``(loss, accuracy, features)``: () mean datum-wise loss (minus the mean episode return,
      paper eq. 2/4), () accuracy and () mean number of features acquired per datum (means
      weighted by ``problem.weights``).
    """
    spec = problem.spec
    dt = problem.X.dtype
    row_axes = problem.config.row_axes
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
            mesh=problem.config.mesh,
            in_specs=(PartitionSpec(), spec_in, rows, rows, rows),
            out_specs=PartitionSpec(),
            check_vma=False,
        )(*args)
    total = jnp.sum(problem.weights)
    ret, corr, nf = (v / total for v in tot)
    return -ret, corr, nf


def rcpi_step(problem: RCPIProblem, state: RCPIState) -> RCPIState:
    """One policy iteration: sample N states, roll out a sample of the actions, ridge fit, α-mixture.

    Pure ``(problem, state) -> state`` (``jax.jit`` it as it is: the problem's options are arrays
    or its static config). The random numbers of iteration t are one (N, 6 + J) uniform draw from
    ``fold_in(state.key, t)``. The work does not grow with the rows once
    ``S·n`` exceeds ``config.n_states`` (:class:`~.problem.RCPIOptions`): N states, J·M rollouts,
    one Gram for the classification actions and J Grams of M states each.

    Args:
      problem: :class:`RCPIProblem` from :func:`rcpi_problem` (data, hyper-parameters, config).
      state: :class:`RCPIState` (from :func:`rcpi_init` or the previous step; ``state.t`` must be
        below its number of slots minus one).

    Returns:
      The state with ``thetas[t + 1]`` filled, ``t + 1`` and the step's :class:`RCPIInfo`.
    """
    cfg = problem.config
    Xs, yall, spec, rw = problem.X, problem.y, problem.spec, problem.weights
    n, d = Xs.shape
    dt = Xs.dtype
    C, J = spec.cost_matrix.shape[0], spec.groups.costs.shape[0]
    A, p = C + J, 2 * d + 1
    S, n_pol = cfg.states_per_example, cfg.policy_states
    K = state.thetas.shape[0]
    thetas, t = state.thetas, state.t
    key = jax.random.fold_in(state.key, t)

    # every random number of the iteration in one draw (one compiled generator; partitionable
    # threefry: a state's draws depend on its index only, so rows appended with weight 0 change none):
    # columns [row, component, prefix fraction, deviation, action sample, slot, unit pick (J)]
    if cfg.all_rows:
        N = n * S
    else:
        N = cfg.n_states
    U = jax.random.uniform(key, (N, 6 + J), dt)

    # 1. the N sampled states: S per row, or N rows drawn ∝ weight (then every state weighs 1)
    if cfg.all_rows:
        # every row S times: a repeat, local to each device of a row-sharded X (no gather)
        slot = jnp.tile(jnp.arange(S, dtype=jnp.int32), n)
        X, y, sw = jnp.repeat(Xs, S, axis=0), jnp.repeat(yall, S), jnp.repeat(rw, S)
    else:
        # inverse CDF of the row weights (jax.random.choice's rule): rows of weight 0 are never drawn
        cdf = jnp.cumsum(rw)
        rows = jnp.clip(jnp.searchsorted(cdf, cdf[-1] * (1 - U[:, 0])), 0, n - 1).astype(jnp.int32)
        slot = jnp.minimum(jnp.floor(U[:, 5] * S).astype(jnp.int32), S - 1)
        sw = jnp.ones((N,), dt)
        X, y = Xs[rows], yall[rows]
    # the mixture component of each state: inverse CDF of the α-mixture's weights (zero-weight
    # components, the iterates not made yet among them, are never drawn)
    cdf_k = jnp.cumsum(cfg.mixture.weights(t, K, problem.alpha).astype(dt))
    comp = jnp.minimum(jnp.sum(cdf_k[None, :] <= U[:, 1:2] * cdf_k[-1], axis=1, dtype=jnp.int32), K - 1)
    thetasT = jnp.swapaxes(thetas, 1, 2)  # (K, p, A): a unit's rows are contiguous
    u, e, ka, pick = U[:, 2], U[:, 3] < problem.explore, U[:, 4], U[:, 6:]
    ret0, corr0, Z, dev, _ = policy_episodes(thetasT, comp, spec, X, y, u, e, pick, batch=cfg.rollout_batch)
    if n_pol < S:  # the first S − P slots of a row: the paper's uniform states
        uniform = slot < S - n_pol
        Z = jnp.where(uniform[:, None], sample_states(jax.random.fold_in(key, 1), spec, N, 1)[:, 0], Z)
        dev = dev & ~uniform
    Phi = jax.vmap(phi)(X, feature_mask(spec, Z))  # (N, p)
    scores = jnp.take_along_axis(
        (Phi @ thetas.reshape(K * A, p).T).reshape(N, K, A), comp[:, None, None], axis=1
    )[:, 0]  # (N, A) θ_comp · φ

    # 2. classification actions: exact targets −C[c, y] at every state (deviated ones excepted)
    wc = jnp.where(dev, jnp.zeros((), dt), sw)
    q_cls = -spec.cost_matrix[:, y].T.astype(dt)  # (N, C)
    m_cls = jnp.sum(wc)
    b_cls = (q_cls * wc[:, None]).T @ Phi
    G_cls = (Phi * wc[:, None]).T @ Phi
    # 3. a sample of the acquisition actions, rolled out (and the rollouts' terminal states)
    m_acq, B_acq, G_acq, *tstats = sampled_rollouts(problem, thetasT, comp, X, y, Z, Phi, sw, wc, scores, ka)
    theta_prev = jax.lax.dynamic_index_in_dim(thetas, t, axis=0, keepdims=False)
    if cfg.terminal:
        # the classification rows are also fitted on the states where the rollouts classified,
        # with a total weight terminal_weight times that of the sampled states
        mT, bT, GT = tstats
        tau = problem.terminal_weight * m_cls / jnp.maximum(mT, jnp.ones_like(mT))
        m_cls, b_cls, G_cls = m_cls + tau * mT, b_cls + tau * bT, G_cls + tau * GT
    theta_new = ridge_solve_actions(
        m_cls, b_cls, G_cls, problem.l2, m_acq, B_acq, G_acq, problem.l2 * cfg.acquisition_l2_scale, theta_prev
    )
    # constant columns are inert: the weights of their values x⊙z_f are exactly 0
    keep = jnp.concatenate([jnp.ones((d,), dt), problem.live.astype(dt), jnp.ones((1,), dt)])
    theta_new = cfg.mixture.update(theta_prev, theta_new * keep[None, :], problem.alpha)
    thetas = jax.lax.dynamic_update_index_in_dim(thetas, theta_new, t + 1, axis=0)
    total = jnp.sum(sw)
    info = RCPIInfo(jnp.sum(sw * ret0) / total, jnp.sum(sw * corr0.astype(dt)) / total)
    return RCPIState(thetas, t + 1, state.key, info)


# ----------------------------------------------------------------------------- the solver


class RCPIStepInfo(NamedTuple):
    """Diagnostics of one iteration of :func:`rcpi_solver` (stacked along the iterations by the driver).

    Attributes:
      loss, accuracy, features: () the new iterate's greedy policy on the training rows
        (:func:`rcpi_evaluate`).
      rollout: the :class:`RCPIInfo` of the iteration (the rollout policy).
    """

    loss: jax.Array
    accuracy: jax.Array
    features: jax.Array
    rollout: RCPIInfo

    __repr__ = short_repr


class RCPIRun(NamedTuple):
    """The state of :func:`rcpi_solver`: RCPI's own :class:`RCPIState` and the iterate selection.

    Attributes:
      rcpi: the :class:`RCPIState` (every iterate so far, the key).
      best: () int32 index of the best iterate so far (0: θ_0, classify at once).
      best_loss: () its training datum-wise loss.
      since: () int32 iterations since the best improved (the run is done at ``patience``).
      patience: () int32 (n_iter: never stop early).
      use_best: () bool: return the best iterate (else the last one run).
      call_id: () int32 of the progress callback (:mod:`~.progress`).
      start: ``(loss, accuracy, features)`` of θ_0 on the training rows.
      info: the :class:`RCPIStepInfo` of the last iteration.
    """

    rcpi: RCPIState
    best: jax.Array
    best_loss: jax.Array
    since: jax.Array
    patience: jax.Array
    use_best: jax.Array
    call_id: jax.Array
    start: tuple
    info: RCPIStepInfo

    __repr__ = short_repr


def rcpi_solver(n_iter: int, *, report: bool = False) -> Solver:
    """RCPI as a :class:`~jaxselect.Solver` (run by :func:`jaxselect.solver.run` for ``n_iter`` steps).

    ``init(problem, key, patience, use_best, call_id)`` gives an :class:`RCPIRun` (θ_0 evaluated on
    the training rows); ``step`` is one policy iteration (:func:`rcpi_step`) followed by the new
    iterate's training evaluation (:func:`rcpi_evaluate`) and the best-so-far bookkeeping; ``done``
    once ``patience`` iterations in a row did not lower the best training loss (the driver then
    carries the state unchanged); ``finish`` returns the :class:`~jaxselect.dwsm.DWSMPolicy`.

    Args:
      n_iter: RCPI iterations (the room of the state: ``n_iter + 1`` iterates).
      report: call the host progress hook (:func:`~.progress.report`, a ``jax.debug.callback``)
        after each iteration.
    """
    n_iter = check_int(n_iter, "n_iter", low=1)

    def init(problem: RCPIProblem, key, patience, use_best, call_id) -> RCPIRun:
        st = rcpi_init(problem, key, n_iter)
        ev0 = initial_evaluation(problem)
        dt = problem.X.dtype
        nan = jnp.asarray(jnp.nan, dt)
        info = RCPIStepInfo(nan, nan, nan, RCPIInfo(nan, nan))
        return RCPIRun(
            st,
            jnp.zeros((), jnp.int32),
            ev0[0],
            jnp.zeros((), jnp.int32),
            jnp.asarray(patience, jnp.int32),
            jnp.asarray(use_best, bool),
            jnp.asarray(call_id, jnp.int32),
            ev0,
            info,
        )

    def step(problem: RCPIProblem, run: RCPIRun) -> RCPIRun:
        new = rcpi_step(problem, run.rcpi)
        loss, acc, feats = rcpi_evaluate(new.thetas[new.t], problem)
        better = loss < run.best_loss  # ties keep the earlier iterate
        best = jnp.where(better, new.t, run.best)
        best_loss = jnp.where(better, loss, run.best_loss)
        since = jnp.where(better, jnp.zeros_like(run.since), run.since + 1)
        if report:
            jax.debug.callback(
                progress.report, run.call_id, new.t, n_iter, loss, acc, feats, best, best_loss, *run.start
            )
        info = RCPIStepInfo(loss, acc, feats, new.info)
        return run._replace(rcpi=new, best=best, best_loss=best_loss, since=since, info=info)

    def done(problem: RCPIProblem, run: RCPIRun):
        return run.since >= run.patience

    def finish(problem: RCPIProblem, run: RCPIRun, infos: RCPIStepInfo) -> DWSMPolicy:
        return _policy(problem, run, infos, n_iter)

    return Solver(init, step, finish, SolverTraits("dwsm", stacks_info=True), done)


def _policy(problem: RCPIProblem, run: RCPIRun, infos: RCPIStepInfo, n_iter: int) -> DWSMPolicy:
    """The :class:`DWSMPolicy` of a finished run (iterations after an early stop: NaN, last iterate)."""
    st = run.rcpi
    n_run = st.t
    ran = jnp.arange(1, n_iter + 1, dtype=jnp.int32) <= n_run  # the driver carries a done state unchanged
    nan = jnp.asarray(jnp.nan, problem.X.dtype)

    def mask(v):
        return jnp.where(ran, v, nan)

    slots = jnp.arange(n_iter + 1, dtype=jnp.int32)
    last = jax.lax.dynamic_index_in_dim(st.thetas, n_run, axis=0, keepdims=False)
    thetas = jnp.where((slots > n_run)[:, None, None], last[None], st.thetas)
    chosen = jnp.where(run.use_best, run.best, n_run)
    weights = problem.config.mixture.weights(n_run, n_iter + 1, problem.alpha)
    rollout_return, rollout_accuracy = mask(infos.rollout.mean_return), mask(infos.rollout.accuracy)
    finite = jnp.all(jnp.isfinite(thetas)) & jnp.all(jnp.isfinite(rollout_return) | ~ran)
    status = jnp.where(finite, jnp.int32(OK), jnp.int32(NONFINITE))
    loss, acc, feats = mask(infos.loss), mask(infos.accuracy), mask(infos.features)
    return DWSMPolicy(
        theta=jax.lax.dynamic_index_in_dim(thetas, chosen, axis=0, keepdims=False),
        mean=problem.mean,
        scale=problem.scale,
        spec=problem.spec,
        thetas=thetas,
        mix_weights=weights,
        train_return=-loss,
        train_accuracy=acc,
        status=status,
        train_loss=jnp.concatenate([run.start[0][None], loss]),
        train_features=jnp.concatenate([run.start[2][None], feats]),
        best=chosen.astype(jnp.int32),
        iterations=n_run,
        rollout_return=rollout_return,
        rollout_accuracy=rollout_accuracy,
    )


def driver_key(key):
    """The key as the driver's program cache takes it: a typed key's raw data (the default
    implementation's: the same random numbers); a raw key as it is."""
    if isinstance(key, jax.Array) and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) and not is_tracer(key):
        return jax.random.key_data(key)
    return key


def rcpi_run(
    problem: RCPIProblem, state: RCPIState, *, patience: int | None = None, select: str = "best", progress: bool = False
) -> DWSMPolicy:
    """Run RCPI to the end of ``state``'s slots: :func:`rcpi_solver` on the library's driver.

    Every iterate's greedy policy is evaluated on the training rows (:func:`rcpi_evaluate`) and the
    best one is returned (θ_0 included). This is :func:`~jaxselect.dwsm.dwsm_fit` without
    the input validation: ``rcpi_run(rcpi_problem(spec, X, y, options=o), rcpi_init(problem, key,
    n_iter))`` gives the same policy as ``dwsm_fit(key, X, y, n_iter=n_iter, rcpi=o)`` with the
    same MDP. One compiled program (:func:`jaxselect.solver.run`); ``progress=True``: a bar.

    Args:
      problem: :class:`RCPIProblem`.
      state: a fresh :class:`RCPIState` from :func:`rcpi_init` (``t = 0``); its slots fix the
        number of iterations n_iter and its key the random numbers.
      patience: None (run n_iter iterations) or p >= 1: stop once p iterations in a row did not
        lower the best training datum-wise loss (traced inside: no recompilation).
      select: ``"best"`` (lowest training datum-wise loss) or ``"last"`` (θ_T).
      progress: a tqdm bar over the iterations (the driver's option).

    Returns:
      A :class:`~jaxselect.dwsm.DWSMPolicy` (``status``: ``NONFINITE`` when θ or the
      rollouts' returns are not finite).
    """
    if not isinstance(select, str) or select not in ("best", "last"):
        raise ValueError(f"select must be 'best' (lowest training datum-wise loss) or 'last' (θ_T); got {select!r}")
    n_iter = state.thetas.shape[0] - 1
    patience = n_iter if patience is None else check_int(patience, "patience", low=1)
    return run(
        rcpi_solver(n_iter),
        problem,
        driver_key(state.key),
        np.int32(patience),
        np.bool_(select == "best"),
        np.int32(0),
        n_steps=n_iter,
        progress=progress,
    )
