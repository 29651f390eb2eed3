"""Differentiable refits at a fixed support (ridge, greedy-RLS, GLM), with implicit differentiation.

Selection is piecewise constant in the data (an argmax), so what a researcher differentiates is the
*fit at a fixed support*: given a support mask S,

    w(X, Y, λ) = argmin_w (1/2n)‖Ys − Xs_S w‖² + (λ/2)‖w‖²,   i.e.  (Xs_Sᵀ Xs_S/n + λI) w = Xs_Sᵀ Ys/n,

on standardised columns (Xs) and centred targets, mapped back to raw coefficients and an
intercept. The linear system is solved by Cholesky inside ``jax.lax.custom_linear_solve``, so
reverse-mode gradients with respect to X, Y and λ come from one more solve with the same matrix
(the implicit function theorem) instead of differentiating through the factorisation.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect._validation import as_float_matrix, as_targets, host_value

__all__ = ["ridge_refit", "rls_refit", "glm_refit"]


def ridge_refit(X, Y, support=None, *, l2=1e-5):
    """Ridge fit with intercept on the columns in ``support``; differentiable in X, Y and l2.

    Args:
      X: (n, D) raw features.
      Y: (n,) or (n, T) targets.
      support: (D,) bool mask of the columns to use (default all). May be a traced array (e.g.
        ``path.coef[k] != 0``), so one compiled function serves every support.
      l2: ridge constant λ > 0 on standardised coefficients (a Python float or a traced scalar —
        differentiate with respect to it to tune it).

    Returns:
      ``(coef, intercept)``: (D,) and () for 1-D Y, or (D, T) and (T,); zero outside the support.

    >>> import numpy as np, jax, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(50, 3)); y = X[:, 0] + 2.0
    >>> coef, b = js.ridge_refit(X, y, np.array([True, False, False]), l2=1e-8)
    >>> np.round(np.asarray(coef), 4).tolist(), round(float(b), 4)
    ([1.0, 0.0, 0.0], 2.0)
    """
    X = as_float_matrix(X, "X", min_rows=2)
    Y, was_1d = as_targets(Y, X.shape[0], "Y", dtype=X.dtype)
    d = X.shape[1]
    if support is None:
        support = jnp.ones((d,), bool)
    support = jnp.asarray(support)
    if support.shape != (d,):
        raise ValueError(f"support must be a (D,) = ({d},) boolean mask; got shape {support.shape}")
    if support.dtype != bool:
        raise TypeError(f"support must be boolean; got dtype {support.dtype}")
    l2_value = host_value(lambda: l2)
    if l2_value is not None and not (float(l2_value) > 0):
        raise ValueError(f"l2 must be > 0 for a well-posed refit; got {l2}")
    coef, intercept = _ridge_refit(X, Y, support, jnp.asarray(l2, X.dtype))
    if was_1d:
        return coef[:, 0], intercept[0]
    return coef, intercept


def _standardize_support(X, support):
    """Column means, the standardised design restricted to ``support`` (zero columns elsewhere),
    the per-column factors 1/sd (0 off the support or for constant columns) and the used mask."""
    x_mean = jnp.mean(X, axis=0)
    Xc = X - x_mean[None, :]
    x_sd = jnp.sqrt(jnp.mean(Xc * Xc, axis=0))
    use = support & (x_sd > 0)
    w_col = jnp.where(use, 1.0 / jnp.where(use, x_sd, jnp.ones_like(x_sd)), jnp.zeros_like(x_sd))
    return x_mean, Xc * w_col[None, :], w_col, use


@jax.jit
def _ridge_refit(X, Y, support, l2):
    n = X.shape[0]
    nf = jnp.asarray(n, X.dtype)
    x_mean, Xs, w_col, use = _standardize_support(X, support)
    y_mean = jnp.mean(Y, axis=0)
    Yc = Y - y_mean[None, :]
    G = jax.lax.dot_general(Xs, Xs, (((0,), (0,)), ((), ()))) / nf
    A = G + jnp.diag(jnp.where(use, l2, jnp.ones_like(x_mean)))  # identity on unused columns
    rhs = (Yc.T @ Xs).T / nf  # (D, T), zero on unused columns

    w_std = _spd_solve(A, rhs)
    coef = w_std * w_col[:, None]
    intercept = y_mean - x_mean @ coef
    return coef, intercept


def _spd_solve(A, rhs):
    """A⁻¹ rhs by Cholesky, differentiated implicitly (one more solve) via custom_linear_solve."""

    def matvec(v):
        return A @ v

    def solve(_, b):
        L = jnp.linalg.cholesky(A)
        return jax.scipy.linalg.cho_solve((L, True), b)

    return jax.lax.custom_linear_solve(matvec, rhs, solve, symmetric=True)


def rls_refit(X, Y, selected, *, l2=1.0, bias=0.0):
    """The greedy-RLS model on fixed features, differentiable in X, Y, l2 and bias.

    Regularised least squares exactly as :func:`jaxselect.greedy_rls` fits it (no centring or
    scaling): with ``X_S`` the selected columns plus, when ``bias > 0``, a constant column √bias,
    ``w = (X_SᵀX_S + λI)⁻¹ X_SᵀY`` and intercept ``√bias · w_bias``.

    Args:
      X: (n, d) features; Y: (n,) or (n, T) targets.
      selected: (k,) feature indices (e.g. ``greedy_rls(...).selected``).
      l2: λ > 0 (Python float or traced scalar); bias: ≥ 0.

    Returns:
      ``(coef (d,) or (d, T), intercept () or (T,))``; zero coefficients off ``selected``.
    """
    X = as_float_matrix(X, "X")
    Y, was_1d = as_targets(Y, X.shape[0], "Y", dtype=X.dtype)
    selected = jnp.asarray(selected)
    if selected.ndim != 1 or not jnp.issubdtype(selected.dtype, jnp.integer):
        raise ValueError("selected must be a 1-D integer array of feature indices")
    for name, value, strict in (("l2", l2, True), ("bias", bias, False)):
        v = host_value(lambda value=value: value)
        if v is not None and not (float(v) > 0 if strict else float(v) >= 0):
            raise ValueError(f"{name} must be {'> 0' if strict else '>= 0'}; got {float(v)}")
    coef, intercept = _rls_refit(X, Y, selected.astype(jnp.int32), jnp.asarray(l2, X.dtype), jnp.asarray(bias, X.dtype))
    if was_1d:
        return coef[:, 0], intercept[0]
    return coef, intercept


@jax.jit
def _rls_refit(X, Y, selected, l2, bias):
    n, d = X.shape
    root = jnp.sqrt(bias)
    XS = jnp.concatenate([jnp.take(X, selected, axis=1), jnp.full((n, 1), 1.0, X.dtype) * root], axis=1)
    k1 = XS.shape[1]
    # An unused bias column (bias = 0) is all zeros; λ keeps the system definite either way.
    A = jax.lax.dot_general(XS, XS, (((0,), (0,)), ((), ()))) + l2 * jnp.eye(k1, dtype=X.dtype)
    w = _spd_solve(A, (Y.T @ XS).T)
    coef = jnp.zeros((d, Y.shape[1]), X.dtype).at[selected].set(w[:-1])
    return coef, root * w[-1]


def glm_refit(X, y, support=None, *, loss: str = "logistic", l2=1e-3, n_classes=None, max_iter: int = 50):
    """Logistic / softmax fit with intercept at a fixed support; differentiable in X, y and l2.

    Minimises ``r(W, b) = (1/n) Σ_i ℓ(Xs_i W + b, y_i) + (λ/2)‖W‖²`` over the standardised columns in
    ``support`` (W = 0 elsewhere; intercept unpenalised) by Newton's method inside
    ``jax.lax.custom_root``: gradients come from the implicit function theorem at the optimum
    (``∂W* = −H⁻¹ ∂∇r``, one linear solve with the Hessian), not by unrolling the iterations.
    For softmax the intercepts are centred (Σ_c b_c = 0), which fixes the one flat direction.

    Args:
      X: (n, D) raw features.
      y: (n,) labels in {0, 1} for ``loss="logistic"`` (floats in [0, 1] are accepted as soft
        labels), or classes 0..C−1 for ``loss="softmax"``.
      support: (D,) bool mask (default all columns).
      loss: "logistic" or "softmax".
      l2: λ > 0 (Python float or traced scalar).
      n_classes: C for softmax (default max(y) + 1).
      max_iter: Newton iterations (it stops earlier at machine precision).

    Returns:
      ``(coef, intercept)``: (D,), () for logistic; (D, C), (C,) for softmax — raw-space scores.
      The dense Newton system has (D + 1)·T unknowns, so this is meant for the small supports a
      selection produces.
    """
    X = as_float_matrix(X, "X", min_rows=2)
    n, d = X.shape
    if loss not in ("logistic", "softmax"):
        raise ValueError(f"loss must be 'logistic' or 'softmax'; got {loss!r}")
    y_arr = y if isinstance(y, jax.Array) else jnp.asarray(y)
    if y_arr.ndim != 1 or y_arr.shape[0] != n:
        raise ValueError(f"y must be 1-D with one label per row of X ({n}); got shape {tuple(y_arr.shape)}")
    if loss == "logistic":
        values = host_value(lambda: y_arr)
        if values is not None and (np.any(values < 0) or np.any(values > 1) or not np.all(np.isfinite(values))):
            raise ValueError("logistic labels must lie in [0, 1] (use 0/1 classes)")
        Yt = y_arr.astype(X.dtype)[:, None]
    else:
        values = host_value(lambda: y_arr)
        if values is None:
            if n_classes is None:
                raise ValueError("pass n_classes when y is traced")
            C = int(n_classes)
        else:
            if np.any(values < 0) or np.any(values != np.round(values)):
                raise ValueError("softmax labels must be integer classes 0..C-1")
            C = int(n_classes) if n_classes is not None else int(values.max()) + 1
            if values.max() >= C:
                raise ValueError(f"label {int(values.max())} is out of range for n_classes={C}")
        Yt = jax.nn.one_hot(y_arr.astype(jnp.int32), C, dtype=X.dtype)
    if support is None:
        support = jnp.ones((d,), bool)
    support = jnp.asarray(support)
    if support.shape != (d,) or support.dtype != bool:
        raise ValueError(f"support must be a (D,) = ({d},) boolean mask")
    l2_value = host_value(lambda: l2)
    if l2_value is not None and not (float(l2_value) > 0):
        raise ValueError(f"l2 must be > 0; got {l2}")
    coef, intercept = _glm_refit(X, Yt, support, jnp.asarray(l2, X.dtype), softmax=loss == "softmax", max_iter=int(max_iter))
    if loss == "logistic":
        return coef[:, 0], intercept[0]
    return coef, intercept


@partial(jax.jit, static_argnames=("softmax", "max_iter"))
def _glm_refit(X, Yt, support, l2, *, softmax: bool, max_iter: int):
    n, d = X.shape
    T = Yt.shape[1]
    dt = X.dtype
    x_mean, Xs, w_col, use = _standardize_support(X, support)
    free = jnp.concatenate([jnp.repeat(use, T), jnp.ones((T,), bool)])

    def unpack(theta):
        return theta[: d * T].reshape(d, T), theta[d * T :]

    def risk(theta):
        W, b = unpack(theta)
        S = Xs @ W + b[None, :]
        if softmax:
            data = jnp.mean(jax.nn.logsumexp(S, axis=1) - jnp.sum(Yt * S, axis=1))
            centre = 0.5 * jnp.sum(b) ** 2  # pins the flat direction b → b + t·1
        else:
            data = jnp.mean(jnp.sum(jax.nn.softplus(S) - Yt * S, axis=1))
            centre = jnp.zeros((), dt)
        return data + 0.5 * l2 * jnp.sum(W * W) + centre

    def residual(theta):  # ∇r on the free coordinates, θ itself (→ 0) elsewhere
        return jnp.where(free, jax.grad(risk)(theta), theta)

    def newton(F, theta0):
        def body(state):
            theta, it, _ = state
            g = F(theta)
            H = jax.jacfwd(F)(theta)
            step = jnp.linalg.solve(H, g)
            return theta - step, it + 1, jnp.max(jnp.abs(g))

        def cond(state):
            _, it, gmax = state
            return (it < max_iter) & (gmax > 10 * jnp.finfo(dt).eps)

        theta, _, _ = jax.lax.while_loop(cond, body, (theta0, jnp.zeros((), jnp.int32), jnp.asarray(jnp.inf, dt)))
        return theta

    def tangent_solve(g, v):
        return jnp.linalg.solve(jax.jacfwd(g)(v), v)

    theta0 = jnp.zeros(((d + 1) * T,), dt)
    theta = jax.lax.custom_root(residual, theta0, newton, tangent_solve)
    W, b = unpack(theta)
    coef = W * w_col[:, None]
    return coef, b - x_mean @ coef
