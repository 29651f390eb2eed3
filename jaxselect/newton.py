"""The library's one damped Newton solver for smooth GLM fits (``glm_omp`` refits and ``glm_refit``).

With a design Z (n, P), targets Y (n, T), a per-example loss ℓ (a :class:`~jaxselect.losses.GLMLoss`),
an active mask a (P,) and λ ≥ 0, it minimises the regularised risk (Hu et al., Appendix B, eq. 21)

    r(V, b) = (1/n) Σ_i ℓ(Vᵀz_i + b, y_i) + (λ/2) Σ_{p: a_p} ‖V_p‖²

over the active rows of V (P, T) and the unpenalised intercept b (T,); inactive rows do not move.
Each iteration, with ``A = [Z, 1]`` and ``h_i = ∂²ℓ/∂s_i²``:

* the Newton system ``H s = −g``, ``H = Aᵀ diag(h) A / n + λ`` (λ on active coefficients), solved
  exactly by Cholesky (``solver="cholesky"``: H formed, O(n·m²) for m = (P+1)·T unknowns), or
  inexactly by Jacobi-preconditioned conjugate gradients on Hessian-vector products
  ``Aᵀ(h ⊙ (A v))/n`` (``solver="cg"``: O(n·m) each, forcing tolerance
  ``‖Hs + g‖ ≤ min(0.1, √‖g‖)·‖g‖``; PCG from 0 on an SPD H is a descent direction);
* Armijo backtracking ``t = 1, ½, ¼, …`` accepting ``r(θ + ts) ≤ r(θ) + 10⁻⁴·t·gᵀs``. Near the
  optimum the decrease of a Newton step falls below the rounding resolution of r (in float32 at
  ``max|g| ≈ 10⁻⁴``), so a step is also accepted when r rises by at most its rounding allowance
  ``16·eps·|r|`` while ``max|∇r|`` strictly decreases — the full step is then taken and Newton's
  quadratic convergence does the rest;
* softmax: shifting every intercept by the same constant leaves r unchanged; that null direction
  gets unit curvature (the pseudo-inverse step), so from centred intercepts they stay centred.

Stopping rule (scale-aware, reachable in float32): ``max|∇r| ≤ tol · σ`` with
``σ = max(1, RMS_i ‖G0_i − mean(G0)‖)``, ``G0 = ∂ℓ/∂s`` at zero scores — 1 for logistic / softmax
labels, the target spread for the squared loss, so large-scale regression targets do not ask for an
absolute gradient accuracy that float32 cannot represent. The solve stops after ``max_iter``
accepted steps, or when no step length decreases r (stalled at round-off). The result's ``status``
(flags of :mod:`jaxselect.status`) is NOT_CONVERGED when the rule was not met and NONFINITE when the
risk or its gradient is not finite.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxselect._repr import short_repr
from jaxselect.losses import GLMLoss
from jaxselect.status import NONFINITE, NOT_CONVERGED

__all__ = [
    "NEWTON_SOLVERS",
    "CG_MIN_UNKNOWNS",
    "NewtonResult",
    "NewtonInfo",
    "glm_newton",
    "glm_risk",
    "glm_risk_grad",
    "gradient_scale",
    "choose_solver",
    "default_tol",
]

NEWTON_SOLVERS = ("auto", "cholesky", "cg")
#: Above this many unknowns (P+1)·T, ``solver="auto"`` solves Newton steps by CG instead of Cholesky.
CG_MIN_UNKNOWNS = 256
_ARMIJO = 1e-4
_MAX_HALVINGS = 40


class NewtonInfo(NamedTuple):
    """Diagnostics of one Newton solve.

    Attributes:
      n_iter: () int32 accepted Newton steps.
      grad_norm: () ``max|∇r|`` at the returned point (over the coefficients that may move).
      loss: () the regularised risk r at the returned point.
      status: () int32 flags: NOT_CONVERGED (4) if ``grad_norm > tol·σ``, NONFINITE (1) on NaN/Inf.
    """

    n_iter: jax.Array
    grad_norm: jax.Array
    loss: jax.Array
    status: jax.Array

    __repr__ = short_repr


class NewtonResult(NamedTuple):
    """The fitted slot coefficients ``V`` (P, T), intercept ``b`` (T,) and the solve's :class:`NewtonInfo`."""

    V: jax.Array
    b: jax.Array
    info: NewtonInfo

    __repr__ = short_repr


def default_tol(dtype) -> float:
    """Default gradient tolerance (relative to σ): 1e-7 in float64, 1e-4 in float32."""
    return 1e-7 if jnp.dtype(dtype) == jnp.float64 else 1e-4


def choose_solver(solver: str, n_unknowns: int) -> str:
    """Resolve ``"auto"``: CG above :data:`CG_MIN_UNKNOWNS` unknowns, Cholesky otherwise."""
    if solver not in NEWTON_SOLVERS:
        raise ValueError(f"newton_solver must be one of {NEWTON_SOLVERS}; got {solver!r}")
    if solver == "auto":
        return "cg" if n_unknowns > CG_MIN_UNKNOWNS else "cholesky"
    return solver


def glm_risk(Z, Y, V, b, active, l2, loss: GLMLoss):
    """Regularised risk r(V, b) (eq. 21) on the design Z (n, P) with coefficients V (P, T)."""
    S = Z @ V + b[None, :]
    pen = jnp.sum(jnp.where(active[:, None], V * V, jnp.zeros_like(V)))
    return jnp.mean(loss.value(S, Y)) + 0.5 * l2 * pen


def glm_risk_grad(Z, Y, V, b, active, l2, loss: GLMLoss):
    """``(∇_V r (P, T), ∇_b r (T,))`` at (V, b) (eq. 22), zero on inactive rows."""
    n = Z.shape[0]
    G = loss.grad(Z @ V + b[None, :], Y)
    gV = (G.T @ Z).T / jnp.asarray(n, Z.dtype) + l2 * V
    gV = jnp.where(active[:, None], gV, jnp.zeros_like(gV))
    return gV, jnp.mean(G, axis=0)


def gradient_scale(Y, loss: GLMLoss):
    """σ = max(1, RMS spread of the per-example score gradient at zero scores) — the stopping scale."""
    G0 = loss.grad(jnp.zeros_like(Y), Y)
    spread = G0 - jnp.mean(G0, axis=0, keepdims=True)
    return jnp.maximum(jnp.ones((), Y.dtype), jnp.sqrt(jnp.mean(jnp.sum(spread * spread, axis=1))))


class _Carry(NamedTuple):
    V: jax.Array
    b: jax.Array
    f: jax.Array
    g: jax.Array  # (m,) gradient at (V, b), zero on entries that may not move
    gmax: jax.Array
    it: jax.Array
    stalled: jax.Array


def glm_newton(
    Z, Y, V, b, active, l2, loss: GLMLoss, *, tol, max_iter, solver: str = "cholesky", softmax: bool = False
) -> NewtonResult:
    """Damped Newton for r restricted to the active rows of V, warm-started at (V, b).

    Pure and traceable (a ``lax.while_loop``); call it inside a jitted function.

    Args:
      Z: (n, P) design; Y: (n, T) targets in the loss's coding (one-hot for softmax).
      V, b: (P, T), (T,) starting point (inactive rows of V are kept as they are — pass zeros).
      active: (P,) bool, the rows of V that are fitted (and penalised).
      l2: () λ ≥ 0.
      loss: a :class:`~jaxselect.losses.GLMLoss`.
      tol: () gradient tolerance relative to σ (see the module docstring); max_iter: () int cap.
      solver: (static) "cholesky" or "cg" (resolve "auto" with :func:`choose_solver`).
      softmax: (static) give the intercept-shift null direction unit curvature.

    Returns:
      A :class:`NewtonResult`.
    """
    if solver not in ("cholesky", "cg"):
        raise ValueError(f"solver must be 'cholesky' or 'cg'; got {solver!r}")
    n, P = Z.shape
    T = Y.shape[1]
    dtype = Z.dtype
    nf = jnp.asarray(n, dtype)
    m = (P + 1) * T
    eps = jnp.finfo(dtype).eps
    free = jnp.concatenate([jnp.repeat(active, T), jnp.ones((T,), bool)])  # entries that may move
    pen_mask = jnp.concatenate([jnp.repeat(active, T), jnp.zeros((T,), bool)])
    zero_m = jnp.zeros((m,), dtype)
    # λ on penalised entries, 1 on entries that may not move (so H stays definite there).
    extra_diag = jnp.where(pen_mask, l2, jnp.zeros((), dtype)) + jnp.where(free, 0, 1).astype(dtype)
    u = jnp.concatenate([jnp.zeros((P * T,), dtype), jnp.ones((T,), dtype) / jnp.sqrt(jnp.asarray(T, dtype))])
    gtol = tol * gradient_scale(Y, loss)

    def f_and_g(V, b):
        S = Z @ V + b[None, :]
        pen = jnp.sum(jnp.where(active[:, None], V * V, jnp.zeros_like(V)))
        f = jnp.mean(loss.value(S, Y)) + 0.5 * l2 * pen
        G = loss.grad(S, Y)
        gV = jnp.where(active[:, None], (G.T @ Z).T / nf + l2 * V, jnp.zeros_like(V))
        g = jnp.concatenate([gV.reshape(-1), jnp.mean(G, axis=0)])
        return f, g, jnp.max(jnp.abs(g))

    def cholesky_step(g, h):
        A = jnp.concatenate([Z, jnp.ones((n, 1), dtype)], axis=1)  # (n, P+1)
        Ah = jnp.einsum("ia,ikl->iakl", A, h)
        H = jnp.einsum("iakl,ic->akcl", Ah, A).reshape(m, m) / nf
        H = jnp.where(free[:, None] & free[None, :], H, jnp.zeros_like(H)) + jnp.diag(extra_diag)
        H = 0.5 * (H + H.T)
        if softmax:
            H = H + u[:, None] * u[None, :]
        jitter = 10 * eps * jnp.maximum(1.0, jnp.max(jnp.diagonal(H)))
        L = jnp.linalg.cholesky(H + jitter * jnp.eye(m, dtype=dtype))
        return -jax.scipy.linalg.cho_solve((L, True), g)

    def cg_step(g, h):
        def hvp(v):
            vf = jnp.where(free, v, zero_m)
            Sv = Z @ vf[: P * T].reshape(P, T) + vf[P * T :][None, :]  # (n, T) = A v
            Q = jnp.einsum("ikl,il->ik", h, Sv)
            hv = jnp.concatenate([((Q.T @ Z).T / nf).reshape(-1), jnp.sum(Q, axis=0) / nf])
            out = jnp.where(free, hv, zero_m) + extra_diag * v
            return out + u * jnp.dot(u, v) if softmax else out

        hdiag = jnp.diagonal(h, axis1=1, axis2=2)  # (n, T)
        dg = jnp.concatenate([((hdiag.T @ (Z * Z)).T / nf).reshape(-1), jnp.sum(hdiag, axis=0) / nf])
        dg = jnp.where(free, dg, zero_m) + extra_diag + (u * u if softmax else zero_m)
        inv_dg = 1.0 / jnp.maximum(dg, jnp.finfo(dtype).tiny)
        forcing = jnp.minimum(0.1, jnp.sqrt(jnp.linalg.norm(g)))
        step, _ = jax.scipy.sparse.linalg.cg(
            hvp, -g, M=lambda r: inv_dg * r, tol=forcing, atol=0.1 * gtol, maxiter=max(m, 20)
        )
        # softmax: drop the component along the null direction (PCG need not keep the iterate
        # orthogonal to it), so the intercepts stay centred as with the exact solve.
        return step - u * jnp.dot(u, step) if softmax else step

    def cond(c: _Carry):
        return (c.it < max_iter) & (c.gmax > gtol) & ~c.stalled

    def body(c: _Carry):
        h = loss.hess(Z @ c.V + c.b[None, :], Y)  # (n, T, T)
        step = cholesky_step(c.g, h) if solver == "cholesky" else cg_step(c.g, h)
        step = jnp.where(free, step, zero_m)
        slope = jnp.dot(c.g, step)
        dV, db = step[: P * T].reshape(P, T), step[P * T :]
        allowance = 16 * eps * jnp.abs(c.f)

        def acceptable(t, f_new, gmax_new):
            armijo = f_new <= c.f + _ARMIJO * t * slope
            rounding = (f_new <= c.f + allowance) & (gmax_new < c.gmax)
            return jnp.isfinite(f_new) & jnp.isfinite(gmax_new) & (armijo | rounding)

        def trial(t):
            f_new, g_new, gmax_new = f_and_g(c.V + t * dV, c.b + t * db)
            return t, f_new, g_new, gmax_new

        def ls_cond(s):
            t, f_new, _, gmax_new, halvings = s
            return ~acceptable(t, f_new, gmax_new) & (halvings < _MAX_HALVINGS)

        def ls_body(s):
            t, _, _, _, halvings = s
            return trial(0.5 * t) + (halvings + 1,)

        t, f_new, g_new, gmax_new, _ = jax.lax.while_loop(
            ls_cond, ls_body, trial(jnp.ones((), dtype)) + (jnp.zeros((), jnp.int32),)
        )
        ok = acceptable(t, f_new, gmax_new)
        keep = lambda new, old: jnp.where(ok, new, old)  # noqa: E731
        return _Carry(
            keep(c.V + t * dV, c.V),
            keep(c.b + t * db, c.b),
            keep(f_new, c.f),
            keep(g_new, c.g),
            keep(gmax_new, c.gmax),
            c.it + ok.astype(jnp.int32),
            ~ok,
        )

    f0, g0, gmax0 = f_and_g(V, b)
    c = jax.lax.while_loop(cond, body, _Carry(V, b, f0, g0, gmax0, jnp.zeros((), jnp.int32), jnp.zeros((), bool)))
    finite = jnp.isfinite(c.f) & jnp.isfinite(c.gmax)
    status = jnp.where(finite, jnp.where(c.gmax <= gtol, 0, NOT_CONVERGED), NONFINITE).astype(jnp.int32)
    return NewtonResult(c.V, c.b, NewtonInfo(c.it, c.gmax, c.f, status))
