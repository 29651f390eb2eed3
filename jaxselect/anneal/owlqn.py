"""OWL-QN: L-BFGS for a smooth function plus a weighted L1 penalty (the polish's ``l1`` mode).

Andrew & Gao, "Scalable training of L1-regularized log-linear models" (ICML 2007). It minimises

    Φ(z) = f(z) + Σ_j λ_j |z_j|,       f smooth, λ_j ≥ 0,

over the ``free`` coordinates (the others stay where they start). Each iteration, with g = ∇f:

* the pseudo-gradient ◇Φ: ``g_j + λ_j sign(z_j)`` where z_j ≠ 0; at z_j = 0 the one-sided
  derivative that points downhill (``g_j + λ_j`` if < 0, ``g_j − λ_j`` if > 0), else 0 — the
  minimum-norm subgradient, 0 at a minimiser;
* the L-BFGS direction d = −H ◇Φ (two-loop recursion over the last ``memory`` pairs
  ``(s, y) = (Δz, Δg)`` of the *smooth* part, ``H₀ = (sᵀy / yᵀy)·I``), with the penalised
  components whose sign disagrees with −◇Φ set to 0 (a descent direction for Φ);
* the orthant ξ = sign(z), or sign(−◇Φ) where z = 0, and the projected step
  ``z(t) = π_ξ(z + t d)`` (a penalised coordinate that leaves its orthant is set to 0 — exact
  zeros; unpenalised ones move freely);
* backtracking ``t = 1, ½, ¼, …`` until ``Φ(z(t)) ≤ Φ(z) + 10⁻⁴ ◇Φᵀ(z(t) − z)``, or (the rounding
  floor of float32, as in :mod:`jaxselect.newton`) Φ rises by at most ``16·eps·|Φ|`` while
  ``max|◇Φ|`` strictly decreases.

It stops when ``max|metric ⊙ ◇Φ| ≤ gtol``, after ``max_iter`` accepted steps, when no step length
is accepted (stalled) or on a non-finite value. Everything is one ``lax.while_loop`` (jit-able,
fixed shapes).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..status import NONFINITE, NOT_CONVERGED

__all__ = ["owlqn", "pseudo_gradient"]

_ARMIJO = 1e-4
_MAX_HALVINGS = 40
_MEMORY = 10


def pseudo_gradient(z, g, penalty):
    """The minimum-norm subgradient ◇Φ of ``f + Σ λ_j|z_j|`` at z (g = ∇f, penalty = λ)."""
    right, left = g + penalty, g - penalty
    zero = jnp.zeros_like(g)
    at_zero = jnp.where(right < 0, right, jnp.where(left > 0, left, zero))
    return jnp.where(z > 0, right, jnp.where(z < 0, left, at_zero))


def _direction(pg, S, Y, rho, n_pairs):
    """−H ◇Φ by the two-loop recursion; pairs stored oldest first, the newest at index −1."""
    memory = S.shape[0]
    dtype = pg.dtype

    def backward(i, carry):
        q, alpha = carry
        j = memory - 1 - i
        a = jnp.where(i < n_pairs, rho[j] * jnp.dot(S[j], q), jnp.zeros((), dtype))
        return q - a * Y[j], alpha.at[j].set(a)

    q, alpha = jax.lax.fori_loop(0, memory, backward, (pg, jnp.zeros((memory,), dtype)))
    yy = jnp.dot(Y[-1], Y[-1])
    gamma = jnp.where((n_pairs > 0) & (yy > 0), jnp.dot(S[-1], Y[-1]) / jnp.where(yy > 0, yy, 1), 1)

    def forward(j, r):
        b = rho[j] * jnp.dot(Y[j], r)
        return jnp.where(j >= memory - n_pairs, r + S[j] * (alpha[j] - b), r)

    return -jax.lax.fori_loop(0, memory, forward, gamma.astype(dtype) * q)


def owlqn(value_and_grad, free, penalty, z0, gtol, max_iter, metric=None, memory: int = _MEMORY):
    """Minimise ``f(z) + Σ_j penalty_j |z_j|`` over the ``free`` coordinates from ``z0``.

    Args:
      value_and_grad: ``z -> (f(z), ∇f(z))`` of the smooth part.
      free: (P,) bool the coordinates that move (the others keep their start).
      penalty: (P,) λ_j ≥ 0 (0: an unpenalised coordinate, e.g. an intercept).
      z0: (P,) start.
      gtol: () stop when ``max|metric ⊙ ◇Φ| ≤ gtol`` over the free coordinates.
      max_iter: () cap on the accepted steps.
      metric: (P,) positive weights of the stopping rule (default 1).
      memory: L-BFGS pairs kept (static).

    Returns:
      ``(z, n_iter, status)``: status 0, NOT_CONVERGED (cap reached or stalled) or NONFINITE.
    """
    dtype = z0.dtype
    penalised = penalty > 0
    metric = jnp.ones_like(z0) if metric is None else metric
    eps = jnp.asarray(jnp.finfo(dtype).eps, dtype)

    def evaluate(z):
        f, g = value_and_grad(z)
        g = jnp.where(free, g, jnp.zeros_like(g))
        pg = jnp.where(free, pseudo_gradient(z, g, penalty), jnp.zeros_like(g))
        return f + jnp.sum(penalty * jnp.abs(z)), g, pg

    def gmax(pg):
        return jnp.max(jnp.abs(metric * pg))

    def cond(c):
        _, phi, _, pg, _, _, _, _, it, stalled = c
        gm = gmax(pg)
        return (it < max_iter) & (gm > gtol) & jnp.isfinite(gm) & jnp.isfinite(phi) & ~stalled

    def body(c):
        z, phi, g, pg, S, Y, rho, n_pairs, it, _ = c
        d = _direction(pg, S, Y, rho, n_pairs)
        d = jnp.where(penalised & (d * pg >= 0), jnp.zeros_like(d), d)  # agree in sign with −◇Φ
        orthant = jnp.where(z != 0, jnp.sign(z), -jnp.sign(pg))
        g_now = gmax(pg)

        def trial(t):
            step = z + t * d
            z_new = jnp.where(penalised & (jnp.sign(step) != orthant), jnp.zeros_like(step), step)
            phi_new, g_new, pg_new = evaluate(z_new)
            armijo = phi_new <= phi + _ARMIJO * jnp.dot(pg, z_new - z)
            floor = (phi_new <= phi + 16 * eps * jnp.abs(phi)) & (gmax(pg_new) < g_now)
            ok = jnp.isfinite(phi_new) & (armijo | floor)
            return z_new, phi_new, g_new, pg_new, ok

        def search_cond(s):
            return ~s[5] & (s[6] < _MAX_HALVINGS)

        def search_body(s):
            t, halvings = s[0] * 0.5, s[6] + 1
            return (t, *trial(t), halvings)

        one = jnp.ones((), dtype)
        start = (one, *trial(one), jnp.zeros((), jnp.int32))
        _, z_new, phi_new, g_new, pg_new, ok, _ = jax.lax.while_loop(search_cond, search_body, start)
        s, y = z_new - z, g_new - g
        sy = jnp.dot(s, y)
        keep = ok & (sy > eps * jnp.dot(y, y))  # curvature condition (f may be non-convex)
        S = jnp.where(keep, jnp.roll(S, -1, axis=0).at[-1].set(s), S)
        Y = jnp.where(keep, jnp.roll(Y, -1, axis=0).at[-1].set(y), Y)
        rho = jnp.where(keep, jnp.roll(rho, -1).at[-1].set(1 / jnp.where(sy > 0, sy, 1)), rho)
        n_pairs = jnp.where(keep, jnp.minimum(n_pairs + 1, memory), n_pairs)
        z, phi, g, pg = (jnp.where(ok, new, old) for new, old in ((z_new, z), (phi_new, phi), (g_new, g), (pg_new, pg)))
        return z, phi, g, pg, S, Y, rho, n_pairs, it + ok.astype(jnp.int32), ~ok

    phi0, g0, pg0 = evaluate(z0)
    history = jnp.zeros((memory,) + z0.shape, dtype)
    init = (z0, phi0, g0, pg0, history, history, jnp.zeros((memory,), dtype), jnp.zeros((), jnp.int32),
            jnp.zeros((), jnp.int32), jnp.zeros((), bool))
    z, phi, _, pg, _, _, _, _, it, _ = jax.lax.while_loop(cond, body, init)
    gm = gmax(pg)
    finite = jnp.isfinite(phi) & jnp.isfinite(gm)
    status = jnp.where(finite, jnp.where(gm <= gtol, 0, NOT_CONVERGED), NONFINITE)
    return z, it, status.astype(jnp.int32)
