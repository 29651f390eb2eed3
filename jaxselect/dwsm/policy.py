"""Linear block-vector policy of the datum-wise sparse model and its inference loop.

Dulac-Arnold et al. (2012), §3.1.1 (greedy policy ``π(x, z) = argmax_a s(x, z, a)``), §3.3 (linear
score on block vectors) and §5.1 (incremental score updates at inference).

Representation (§3.3): ``φ(x, z) = [z_f, x ⊙ z_f, 1]`` of length ``p = 2d + 1`` with ``z_f`` the
(d,) acquired-feature mask (the paper's ``(z, μ(x, z))``; the constant 1 is the bias every linear
regressor carries). The block vector ``Φ(x, z, a)`` puts φ at the offset of action a, so
``s(x, z, a) = ⟨Φ(x, z, a), θ⟩ = θ_a · φ(x, z)``: one weight row per action, ``θ`` of shape
(A, p) with rows ``[classify 0..C-1, acquire unit 0..J-1]``.

Incremental scores (§5.1): φ changes only in the coordinates of the newly acquired unit g, so
``s ← s + Σ_{i∈g} (θ[:, i] + θ[:, d+i] x_i)`` — O(A·|g|) per step instead of O(A·p). An episode
starts from ``s = θ[:, 2d]`` (z = 0). Ties in the argmax go to the lowest action index, i.e. to
classification before acquisition and to the lower class / unit.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxselect._repr import short_repr
from jaxselect.programs import jit
from jaxselect.sharding import any_mesh
from jaxselect.status import NONFINITE, OK

from .._validation import as_float_matrix, as_labels
from .mdp import DWSMSpec, budget_rtol, feature_mask

#: DWSM's programs run many passes over X (the rollouts): with LLVM's optimisation off
#: (:data:`jaxselect.programs.QUICK_COMPILE_OPTIONS`) splice's 1 000 x 60 fit ran 8x slower, so
#: only inputs up to this many bytes compile that way
QUICK_BYTES = 16 << 10

__all__ = [
    "DWSMPolicy",
    "DWSMTrace",
    "phi",
    "action_scores",
    "unit_contribution",
    "dwsm_predict",
    "dwsm_trace",
]


class DWSMPolicy(NamedTuple):
    """A learned datum-wise sparse classifier (a pytree of arrays).

    Attributes:
      theta: (A, p) score weights used for inference, rows ``[classify 0..C-1, acquire 0..J-1]``,
        columns ``[z_f (d), x⊙z_f (d), 1]``: the iterate ``thetas[best]``.
        The columns of constant features' values ``x⊙z_f`` are 0 (constant columns are inert).
      mean, scale: (d,) standardisation of the raw features (fitted on the training set; constant
        columns get scale 1).
      spec: the :class:`~jaxselect.dwsm.mdp.DWSMSpec` (rewards, budget, units and their
        costs, relation; ``spec.live`` marks the units that have a non-constant feature).
      thetas: (n_iter+1, A, p) the policy iterates θ_0 (classify at once as the cheapest class),
        θ_1, …, θ_T (after an early stop the remaining slots repeat the last iterate).
      mix_weights: (n_iter+1,) probabilities of the final α-mixture over ``thetas``.
      train_return: (n_iter,) mean return (minus the datum-wise loss) of the greedy policy of each
        iterate θ_1..θ_T on the training rows, every episode from the empty state; NaN for
        iterations skipped after an early stop.
      train_accuracy: (n_iter,) its training accuracy.
      status: () int32, 0 when fine; ``NONFINITE`` (1) when θ or the rollouts' returns are not
        finite (see :func:`jaxselect.raise_for_status`).
      train_loss: (n_iter+1,) training datum-wise loss of every iterate θ_0..θ_T (θ_0 included):
        what selects ``best``.
      train_features: (n_iter+1,) mean number of features each iterate acquires per training datum.
      best: () int32 index of the returned iterate (``theta = thetas[best]``).
      iterations: () int32 RCPI iterations run (fewer than n_iter after an early stop).
      rollout_return: (n_iter,) mean return of the rollout policy from the sampled states (a
        diagnostic of the rollouts, not the datum-wise loss: the sampled states' units are free).
      rollout_accuracy: (n_iter,) accuracy of those rollouts.

    >>> import jax, numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(40, 3)); y = (X[:, 0] > 0).astype(int)
    >>> policy = js.dwsm_fit(jax.random.key(0), X, y, lam=0.05, n_iter=3)
    >>> policy.theta.shape, policy.train_loss.shape, int(policy.status)   # (C + J, 2d + 1)
    ((5, 7), (4,), 0)
    """

    theta: jax.Array
    mean: jax.Array
    scale: jax.Array
    spec: DWSMSpec
    thetas: jax.Array
    mix_weights: jax.Array
    train_return: jax.Array
    train_accuracy: jax.Array
    status: jax.Array
    train_loss: jax.Array | None = None
    train_features: jax.Array | None = None
    best: jax.Array | None = None
    iterations: jax.Array | None = None
    rollout_return: jax.Array | None = None
    rollout_accuracy: jax.Array | None = None

    __repr__ = short_repr


class DWSMTrace(NamedTuple):
    """Per-datum episodes of a policy (see :func:`dwsm_trace`).

    Attributes:
      labels: (n,) int32 predicted classes.
      acquired: (n, d) bool features used.
      order: (n, J) int32 acquired units in acquisition order, −1 padded.
      reward: (n,) total reward of the episode (= minus the datum-wise loss).
      status: () int32, the policy's ``status`` OR ``NONFINITE`` (1) when θ, the standardisation or
        an episode's reward is not finite (see :func:`jaxselect.raise_for_status`).

    >>> import jax, numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(40, 3)); y = (X[:, 0] > 0).astype(int)
    >>> policy = js.dwsm_fit(jax.random.key(0), X, y, lam=0.05, n_iter=3)
    >>> trace = js.dwsm_trace(policy, X, y)
    >>> trace.order.shape, trace.reward.shape, int(trace.status)
    ((40, 3), (40,), 0)
    """

    labels: jax.Array
    acquired: jax.Array
    order: jax.Array
    reward: jax.Array
    status: jax.Array

    __repr__ = short_repr


def phi(x: jax.Array, zf: jax.Array) -> jax.Array:
    """State features ``φ(x, z) = [z_f, x ⊙ z_f, 1]``: (d,), (d,) bool → (2d+1,)."""
    zf_ = zf.astype(x.dtype)
    return jnp.concatenate([zf_, x * zf_, jnp.ones((1,), x.dtype)])


def action_scores(theta: jax.Array, x: jax.Array, zf: jax.Array) -> jax.Array:
    """All action scores from scratch, ``s = θ φ(x, z)``: (A, p), (d,), (d,) → (A,)."""
    return theta @ phi(x, zf)


def unit_contribution(
    theta: jax.Array, spec: DWSMSpec, x: jax.Array, j: jax.Array, *, transposed: bool = False
) -> jax.Array:
    """Score change when unit j is acquired: ``Σ_{i∈F_j} θ[:, i] + θ[:, d+i] x_i`` → (A,).

    With ``transposed=True`` ``theta`` is given as θᵀ (p, A), so the gathered columns are
    contiguous rows (what the inference loop uses).
    """
    d = spec.groups.ids.shape[0]
    valid = spec.groups.mask[j]
    cols = jnp.where(valid, spec.groups.index[j], 0)  # padding (index d) → any real column, weight 0
    v = valid.astype(theta.dtype)
    tt = theta if transposed else theta.T
    tz = jnp.take(tt, cols, axis=0)  # (s_max, A)
    tx = jnp.take(tt, cols + d, axis=0)
    # elementwise, summed over the unit's members: no (1, s)·(s, A) dot, which becomes a batched
    # GEMM call per datum under vmap on the CPU
    return jnp.sum(v[:, None] * tz + (jnp.take(x, cols) * v)[:, None] * tx, axis=0)


def unit_contribution_table(theta: jax.Array, spec: DWSMSpec, x: jax.Array) -> jax.Array:
    """(J, A) score change of acquiring each unit, rows ``Σ_{i∈F_j} θ[:, i] + θ[:, d+i] x_i``.

    Used by the training rollouts, where one table is shared by the J rollouts of a state.
    """
    d = spec.groups.ids.shape[0]
    J = spec.groups.costs.shape[0]
    per_feature = theta[:, :d] + theta[:, d : 2 * d] * x[None, :]  # (A, d)
    member = (spec.groups.ids[None, :] == jnp.arange(J, dtype=jnp.int32)[:, None]).astype(theta.dtype)  # (J, d)
    return member @ per_feature.T


def _has_relation(spec: DWSMSpec) -> bool:
    return spec.related.shape[0] > 0


def unrelated_mask(spec: DWSMSpec, z: jax.Array) -> jax.Array:
    """(J,) bool: unit j is unrelated to some acquired unit (its acquisition then costs γ c_j)."""
    if not _has_relation(spec):
        return jnp.zeros(z.shape, bool)
    return jnp.any(~spec.related & z[None, :], axis=1)


def run_episode(theta, spec: DWSMSpec, x, y, z, spent, s, *, track_order: bool = False, delta_fn=None):
    """Follow the greedy policy θ from state (x, z) (scores s) until it classifies.

    A bounded ``while_loop`` (at most J+1 steps: every step acquires a new unit or classifies).
    Scores are updated incrementally (§5.1), from θ's columns of the acquired unit, or by
    ``delta_fn(j)`` (e.g. a row of a precomputed :func:`unit_contribution_table`) when given.

    Args:
      theta: (A, p); spec: the MDP; x: (d,) standardised datum; y: () int class (for the reward;
        any value when only the decision is wanted); z: (J,) bool acquired units; spent: () float
        summed cost of the units in z; s: (A,) scores ``θ φ(x, z)``; delta_fn: optional
        j ↦ (A,) score change.

    Returns:
      ``(reward, label, z, order)``: total reward collected from (x, z), predicted class, final unit
      mask, and (J,) int32 acquisition order (−1 padded; None unless ``track_order``).
    """
    C = spec.cost_matrix.shape[0]
    J = spec.groups.costs.shape[0]
    costs = spec.groups.costs
    neg_inf = jnp.asarray(-jnp.inf, s.dtype)
    units = jnp.arange(J, dtype=jnp.int32)
    cls_ok = jnp.ones((C,), bool)
    has_rel = _has_relation(spec)
    theta_t = theta.T if delta_fn is None else None  # (p, A): contiguous rows per feature

    def cond(c):
        return ~c["done"]

    # carried: the units still available (not acquired, acquirable) and the budget left
    # (B·(1 + rtol) − spent, see mdp.within_budget): the fewest ops in the loop body
    limit = spec.budget * jnp.asarray(1.0 + budget_rtol(spec.budget.dtype), spec.budget.dtype)

    def body(c):
        avail, left = c["avail"], c["left"]
        allowed = avail & (costs <= left)
        masked = jnp.where(jnp.concatenate([cls_ok, allowed]), c["s"], neg_inf)
        a = jnp.argmax(masked).astype(jnp.int32)
        is_cls = a < C
        j = jnp.clip(a - C, 0, J - 1)
        onehot = (units == j) & ~is_cls
        rho = jnp.where(c["bad"][j], spec.gamma, spec.lam) if has_rel else spec.lam
        r = jnp.where(is_cls, -spec.cost_matrix[jnp.clip(a, 0, C - 1), y], -costs[j] * rho)
        delta = delta_fn(j) if delta_fn is not None else unit_contribution(theta_t, spec, x, j, transposed=True)
        out = dict(c)
        out["s"] = jnp.where(is_cls, c["s"], c["s"] + delta)
        out["avail"] = avail & ~onehot
        out["left"] = left - jnp.where(is_cls, jnp.zeros_like(left), costs[j])
        out["ret"] = c["ret"] + r
        out["done"] = is_cls
        out["label"] = jnp.where(is_cls, a, c["label"])
        if has_rel:
            out["bad"] = c["bad"] | (~spec.related[:, j] & ~is_cls)
        if track_order:
            t = c["t"]
            out["order"] = jnp.where((units == t) & ~is_cls, j, c["order"])
            out["t"] = t + 1
        return out

    init = dict(
        avail=(~z) & spec.live,
        left=limit - jnp.asarray(spent, costs.dtype),
        s=s,
        ret=jnp.zeros((), s.dtype),
        done=jnp.zeros((), bool),
        label=jnp.zeros((), jnp.int32),
    )
    if has_rel:
        init["bad"] = unrelated_mask(spec, z)
    else:
        init["bad"] = jnp.zeros((1,), bool)
    if track_order:
        init["t"] = jnp.zeros((), jnp.int32)
        init["order"] = jnp.full((J,), -1, jnp.int32)
    out = jax.lax.while_loop(cond, body, init)
    z_final = z | (spec.live & ~out["avail"])
    return out["ret"], out["label"], z_final, out.get("order")


def standardize(policy: DWSMPolicy, X: jax.Array) -> jax.Array:
    return (X - policy.mean[None, :]) / policy.scale[None, :]


@partial(jit, quick_max_bytes=QUICK_BYTES)
def _predict(policy: DWSMPolicy, X: jax.Array):
    Xs = standardize(policy, X)
    theta, spec = policy.theta, policy.spec
    J = spec.groups.costs.shape[0]
    s0 = theta[:, -1]

    def one(x):
        _, label, z, _ = run_episode(theta, spec, x, jnp.zeros((), jnp.int32), jnp.zeros((J,), bool), 0, s0)
        return label, z

    labels, z = jax.vmap(one)(Xs)
    return labels, feature_mask(spec, z)


@partial(jit, quick_max_bytes=QUICK_BYTES)
def _trace(policy: DWSMPolicy, X: jax.Array, y: jax.Array):
    Xs = standardize(policy, X)
    theta, spec = policy.theta, policy.spec
    J = spec.groups.costs.shape[0]
    s0 = theta[:, -1]

    def one(x, yi):
        ret, label, z, order = run_episode(theta, spec, x, yi, jnp.zeros((J,), bool), 0, s0, track_order=True)
        return label, z, order, ret

    labels, z, order, ret = jax.vmap(one)(Xs, y)
    finite = jnp.all(jnp.isfinite(ret)) & jnp.all(jnp.isfinite(theta)) & jnp.all(jnp.isfinite(Xs))
    status = jnp.asarray(policy.status, jnp.int32) | jnp.where(finite, jnp.int32(OK), jnp.int32(NONFINITE))
    return DWSMTrace(labels, feature_mask(spec, z), order, ret, status)


def _check_policy_X(policy: DWSMPolicy, X):
    if not isinstance(policy, DWSMPolicy):
        raise TypeError(f"policy must be a DWSMPolicy returned by dwsm_fit; got {type(policy).__name__}")
    X = as_float_matrix(X, "X", dtype=policy.theta.dtype)
    d = policy.mean.shape[0]
    if X.shape[1] != d:
        raise ValueError(f"X has {X.shape[1]} features but the policy was fitted on {d}")
    return X


@any_mesh
def dwsm_predict(policy: DWSMPolicy, X) -> tuple[jax.Array, jax.Array]:
    """Classify every datum with the greedy acquisition policy.

    One jitted ``vmap`` over the rows of a bounded acquisition loop; scores are updated
    incrementally as units are acquired (§5.1). The hard budget is enforced by the action set.

    Args:
      policy: a :class:`DWSMPolicy` from :func:`~jaxselect.dwsm.dwsm_fit`.
      X: (n, d) raw features (standardised inside with the training statistics).

    Returns:
      ``(labels, acquired)``: (n,) int32 classes and (n, d) bool mask of the features each datum
      used (whole groups when the policy is grouped).

    Raises:
      ValueError: X with the wrong number of columns or NaN/Inf.

    >>> import jax, numpy as np
    >>> from jaxselect.dwsm import dwsm_fit, dwsm_predict
    >>> X = np.random.default_rng(0).normal(size=(40, 3)); y = (X[:, 0] > 0).astype(int)
    >>> pol = dwsm_fit(jax.random.key(0), X, y, lam=0.05, n_iter=3)
    >>> labels, acquired = dwsm_predict(pol, X)
    >>> labels.shape, acquired.shape
    ((40,), (40, 3))
    """
    X = _check_policy_X(policy, X)
    return _predict(policy, X)


def dwsm_trace(policy: DWSMPolicy, X, y) -> DWSMTrace:
    """Episodes with their acquisition order and total reward under the policy's MDP.

    ``reward[i] = −(Σ_t c_{j_t} ρ_t + C[ŷ_i, y_i])`` (c the unit costs, ρ_t = λ or γ), minus the
    datum-wise loss of paper eq. (4) / Table 1 for the fitted variant. Runs inside a user's ``jit``
    (traced y is not value-checked).

    Args:
      policy: fitted :class:`DWSMPolicy`; X: (n, d) raw features; y: (n,) labels 0..C-1.

    Returns:
      A :class:`DWSMTrace`.

    Raises:
      ValueError: X with the wrong number of columns or NaN/Inf, labels outside 0..C−1.

    >>> import jax, numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(40, 3)); y = (X[:, 0] > 0).astype(int)
    >>> policy = js.dwsm_fit(jax.random.key(0), X, y, lam=0.05, n_iter=3)
    >>> trace = js.dwsm_trace(policy, X, y)
    >>> first = trace.order[0].tolist()        # units datum 0 acquired, in order (−1 padded)
    >>> len(first), bool(trace.reward[0] <= 0)
    (3, True)
    """
    X = _check_policy_X(policy, X)
    labels, _ = as_labels(y, X.shape[0], n_classes=policy.spec.n_classes)
    return _trace(policy, X, jax.device_put(labels))  # no eager copy program per shape


#: the policy's batched prediction core, for the family's other modules
predict_policy = _predict
