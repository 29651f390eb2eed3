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


def ridge_solve(m, Bs, Gs, l2, theta_prev):
    """Solve the normalised ridge systems from the statistics of :func:`ridge_stats`."""
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


def shared_ridge_solve(m, B, G, l2, theta_prev):
    """:func:`ridge_solve` for actions that share their states and weights (the classification
    actions): one (p, p) system ``(G/m + l2·D) θ_cᵀ = B_cᵀ/m`` for all of them (a Cholesky factor
    solved for C right-hand sides); ``theta_prev`` (C, p) when m = 0."""
    p = B.shape[1]
    dt = B.dtype
    msafe = jnp.where(m > 0, m, jnp.ones_like(m))
    D = jnp.concatenate([jnp.ones((p - 1,), dt), jnp.zeros((1,), dt)])
    H = G / msafe + (l2 * D)[None, :] * jnp.eye(p, dtype=dt)
    H = jnp.where(m > 0, H, jnp.eye(p, dtype=dt))
    sol = jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(H), (B / msafe).T).T
    return jnp.where(m > 0, sol, theta_prev)


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

