"""Policy improvement of RCPI: per-action ridge regression of Q on φ and the α-mixture of iterates.

Dulac-Arnold et al. (2012), §3.4 (one linear regressor per action, fitted on the rollouts' Q
estimates) and §6.1, footnote 11 (the α-mixture, α = 0.7).

**Regression.** For each action a, ridge regression of ``Q(s, a)`` on ``φ(s)`` over the m_a states
where a is allowed, with the library's ``l2`` convention: θ_a minimises
``(1/m_a) Σ_s ½ (Q(s, a) − θ_a·φ_s)² + (l2/2) ‖D θ_a‖²`` (D the identity without the bias entry),
i.e. ``(G_a + l2·D) θ_a = b_a`` with ``G_a = (1/m_a) Σ_s φ_s φ_sᵀ``, ``b_a = (1/m_a) Σ_s Q(s, a) φ_s``.
The statistics are plain sums over states (:func:`ridge_stats`), so those of row blocks add up (a
row-sharded fit sums them across devices with one ``psum``) before :func:`ridge_solve`.

**α-mixture** (footnote 11: "θ_t is chosen with probability 1−α, otherwise the previous α-mixture
policy is used"), a :class:`MixtureRule`: ``STOCHASTIC_MIXTURE`` (the paper's: the rollout policy of
iteration t is the mixture of θ_0 … θ_t with weights ``P(θ_k) = (1−α) α^{t−k}`` (k ≥ 1),
``P(θ_0) = α^t``) or ``AVERAGE_MIXTURE`` (parameter averaging ``θ̄_t = α θ̄_{t−1} + (1−α) θ_t``).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg  # noqa: F401 - cho_factor / cho_solve

__all__ = [
    "MixtureRule",
    "STOCHASTIC_MIXTURE",
    "AVERAGE_MIXTURE",
    "mixture_weights",
    "ridge_fit",
]


# ----------------------------------------------------------------------------- α-mixture rules


class MixtureRule(NamedTuple):
    """How RCPI mixes its iterates (paper footnote 11); pass one (or its name) to :func:`~.rcpi_problem`.

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
MIXTURES = {"stochastic": STOCHASTIC_MIXTURE, "average": AVERAGE_MIXTURE}


def as_mixture(mixture) -> MixtureRule:
    if isinstance(mixture, MixtureRule):
        return mixture
    if isinstance(mixture, str) and mixture in MIXTURES:
        return MIXTURES[mixture]
    raise ValueError(f"mixture must be 'stochastic' or 'average' (or a MixtureRule); got {mixture!r}")


def mixture_weights(t, n_components: int, alpha, mixture="stochastic") -> jax.Array:
    """(K,) probabilities of θ_0..θ_{K-1} in the rollout policy of iteration t (components > t: 0).

    ``"stochastic"``: ``P(θ_k) = (1−α) α^{t−k}`` for 1 ≤ k ≤ t and ``P(θ_0) = α^t``;
    ``"average"``: all mass on θ_t (which already holds the parameter average).
    """
    return as_mixture(mixture).weights(t, n_components, alpha)


# ----------------------------------------------------------------------------- ridge


def ridge_stats(Phi, Q, W, *, gram_batch: int = 8):
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


def _ridge_matrices(m, G, l2):
    """``G/m + l2·D`` (identity where m = 0) for a batch of Gram matrices, and the safe m."""
    p = G.shape[-1]
    dt = G.dtype
    msafe = jnp.where(m > 0, m, jnp.ones_like(m))
    D = jnp.concatenate([jnp.ones((p - 1,), dt), jnp.zeros((1,), dt)])
    eye = jnp.eye(p, dtype=dt)
    l2 = jnp.broadcast_to(jnp.asarray(l2, dt), m.shape)
    H = G / msafe[:, None, None] + (l2[:, None] * D[None, :])[:, :, None] * eye[None]
    return jnp.where((m > 0)[:, None, None], H, eye[None]), msafe


#: systems at least this large are solved by one 2 × 2 block elimination (two half-size Cholesky
#: factors and a batched matrix product): LAPACK's factorisation of a few hundred columns runs out of
#: cache on the CPU, and two half-size factors plus a product cost half as much (p = 401, 200 systems)
BLOCK_SOLVE_MIN = 256
#: systems at least this large are solved by LU (``jnp.linalg.solve``), as before issue 36's third part:
#: measured on the grouped 10 000 × 1 000 problem (101 systems of 2001, one iteration, first call),
#: LU 76 s, the 2 × 2 blocks 91 s, a plain Cholesky 196 s
LU_SOLVE_MIN = 1024


def _cholesky_solve(H, rhs):
    """Solve the SPD systems ``H x = rhs`` (batched; ``G/m + l2·D`` is positive definite for l2 > 0:
    the bias entry of ``G/m`` is 1): a Cholesky factor and two triangular solves; for
    ``BLOCK_SOLVE_MIN`` ≤ p < ``LU_SOLVE_MIN`` the same elimination in 2 × 2 blocks
    ``[[A, B], [Bᵀ, C]]``: ``A = L Lᵀ``, ``Y = L⁻¹B``, the Schur complement ``S = C − YᵀY`` (SPD)
    solved by Cholesky, then back-substitution; for p ≥ ``LU_SOLVE_MIN`` LU (what measured fastest
    on this CPU at each size)."""
    p = H.shape[-1]
    if p < BLOCK_SOLVE_MIN:
        return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(H, lower=True), rhs)
    if p >= LU_SOLVE_MIN:
        return jnp.linalg.solve(H, rhs)
    k = p // 2
    L1 = jnp.linalg.cholesky(H[:, :k, :k])
    tri = jax.lax.linalg.triangular_solve
    Y = tri(L1, H[:, :k, k:], left_side=True, lower=True)  # (b, k, p − k)
    y1 = tri(L1, rhs[:, :k], left_side=True, lower=True)
    S = H[:, k:, k:] - jnp.einsum("bki,bkl->bil", Y, Y)
    x2 = jax.scipy.linalg.cho_solve(
        jax.scipy.linalg.cho_factor(S, lower=True), rhs[:, k:] - jnp.einsum("bki,bkr->bir", Y, y1)
    )
    x1 = tri(L1, y1 - Y @ x2, left_side=True, lower=True, transpose_a=True)
    return jnp.concatenate([x1, x2], axis=1)


def ridge_solve(m, Bs, Gs, l2, theta_prev):
    """Solve the normalised ridge systems from the statistics of :func:`ridge_stats` (a batched
    Cholesky solve; actions with m = 0 keep ``theta_prev``)."""
    H, msafe = _ridge_matrices(m, Gs, l2)
    sol = _cholesky_solve(H, (Bs / msafe[:, None])[:, :, None])[:, :, 0]
    return jnp.where((m > 0)[:, None], sol, theta_prev)


def shared_ridge_solve(m, B, G, l2, theta_prev):
    """:func:`ridge_solve` for actions that share their states and weights (the classification
    actions): one (p, p) system ``(G/m + l2·D) θ_cᵀ = B_cᵀ/m`` for all of them (a Cholesky factor
    solved for C right-hand sides); ``theta_prev`` (C, p) when m = 0."""
    H, msafe = _ridge_matrices(m[None], G[None], l2)
    sol = _cholesky_solve(H, (B / msafe[0]).T[None])[0].T
    return jnp.where(m > 0, sol, theta_prev)


def ridge_solve_actions(m_cls, B_cls, G_cls, l2_cls, m_acq, B_acq, G_acq, l2_acq, theta_prev):
    """Every action's ridge system in one batched Cholesky solve: :func:`shared_ridge_solve` of the C
    classification actions (one system, C right-hand sides) and :func:`ridge_solve` of the J
    acquisition actions, stacked as 1 + J systems (one factorisation call, one compiled solve).

    Returns:
      (C + J, p) weights, ``theta_prev`` rows where an action's weight m is 0.
    """
    C = B_cls.shape[0]
    J = B_acq.shape[0]
    dt = B_acq.dtype
    m = jnp.concatenate([jnp.reshape(m_cls, (1,)).astype(dt), m_acq.astype(dt)])
    l2 = jnp.concatenate([jnp.reshape(jnp.asarray(l2_cls, dt), (1,)), jnp.broadcast_to(jnp.asarray(l2_acq, dt), (J,))])
    H, msafe = _ridge_matrices(m, jnp.concatenate([G_cls[None], G_acq]), l2)
    # right-hand sides (1 + J, p, C): the classes' C columns, then each unit's in column 0
    rhs_acq = jnp.pad(B_acq[:, :, None], ((0, 0), (0, 0), (0, C - 1)))
    rhs = jnp.concatenate([B_cls.T[None], rhs_acq]) / msafe[:, None, None]
    sol = _cholesky_solve(H, rhs)
    theta = jnp.concatenate([sol[0].T, sol[1:, :, 0]])
    keep = jnp.concatenate([jnp.broadcast_to(m[0] > 0, (C,)), m[1:] > 0])
    return jnp.where(keep[:, None], theta, theta_prev)


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
    m, Bs, Gs = ridge_stats(Phi, Q, W, gram_batch=gram_batch)
    return ridge_solve(m, Bs, Gs, l2, theta_prev)
