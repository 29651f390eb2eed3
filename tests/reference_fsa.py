"""Slow, obviously-correct numpy oracles for FSA (Barbu et al., Algorithm 1, eqs. 3–9, 13).

* ``schedule``: eq. (3) evaluated term by term in Python floats.
* ``loss_and_grad``: each loss and its derivative in score space from the closed forms.
* ``pl_dense``: the dense N × M × (B+1) piecewise-linear basis of §2.5.1 (small problems only).
* ``masked_fsa``: Algorithm 1 at full width with a boolean mask (no compaction), plain gradient
  descent with a given step, standardized (or centered-PL) design, unpenalised intercept, prior
  ``(l2/2)‖β‖²`` (the library's l2 convention); constant columns (max == min) never active.
"""

from __future__ import annotations

import math

import numpy as np


def schedule(M, k, n_iter, mu):
    out = []
    for e in range(1, n_iter + 1):
        frac = max(0.0, (n_iter - 2 * e) / (2 * e * mu + n_iter))
        out.append(int(math.floor(k + (M - k) * frac + 1e-9)))
    return np.array(out)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def margin_loss(name, m, h=0.1):
    """Per-example loss ℓ(m) and ℓ'(m) on margins m = y·s (eqs. 6–8)."""
    if name == "logistic":
        return np.log1p(np.exp(-m)), -_sigmoid(-m)
    if name == "huber_hinge":
        val = np.where(m > 1 + h, 0.0, np.where(m < 1 - h, 1 - m, (1 + h - m) ** 2 / (4 * h)))
        der = np.where(m > 1 + h, 0.0, np.where(m < 1 - h, -1.0, -(1 + h - m) / (2 * h)))
        return val, der
    if name == "lorenz":
        val = np.where(m > 1, 0.0, np.log1p((m - 1) ** 2))
        der = np.where(m > 1, 0.0, 2 * (m - 1) / (1 + (m - 1) ** 2))
        return val, der
    raise ValueError(name)


def loss_and_grad(name, s, y=None, pairs=None, h=0.1):
    """Mean loss and its gradient with respect to the scores s (N,)."""
    n = s.shape[0]
    if name == "squared":
        r = s - y
        return 0.5 * np.mean(r**2), r / n
    if name == "ranking":
        ij, rr = pairs
        d = s[ij[:, 0]] - s[ij[:, 1]]
        val = np.mean(np.log1p(np.exp(d)) - rr * d)
        gd = (_sigmoid(d) - rr) / len(rr)
        g = np.zeros(n)
        np.add.at(g, ij[:, 0], gd)
        np.add.at(g, ij[:, 1], -gd)
        return val, g
    yy = np.where(y > 0, 1.0, -1.0)
    val, der = margin_loss(name, yy * s, h)
    return np.mean(val), yy * der / n


def standardize(X):
    """Centered, unit-variance columns; constant columns (max == min) get inverse scale 0."""
    mean = X.mean(0)
    std = np.sqrt(((X - mean) ** 2).mean(0))
    live = X.max(0) > X.min(0)
    inv = np.where(live, 1.0 / np.where(live, std, 1), 0.0)
    return (X - mean) * inv, mean, inv


def pl_dense(X, B, x_min=None, width=None):
    """Dense basis U (N, M, B+1) with u_k(x) = 1−α at k=j(x), α at k=j(x)+1."""
    if x_min is None:
        x_min, x_max = X.min(0), X.max(0)
        width = (x_max - x_min) / B
        width = np.where(width > 0, width, 1.0)
    t = np.clip((X - x_min) / width, 0, B)
    j = np.clip(np.floor(t), 0, B - 1).astype(int)
    a = t - j
    N, M = X.shape
    U = np.zeros((N, M, B + 1))
    n_idx, m_idx = np.meshgrid(np.arange(N), np.arange(M), indexing="ij")
    U[n_idx, m_idx, j] += 1 - a
    U[n_idx, m_idx, j + 1] += a
    return U, x_min, width


def second_diff_penalty_grad(beta):
    """Value and gradient of Σ_j Σ_k (β_{k+1} + β_{k−1} − 2β_k)² (eq. 13 without c)."""
    W, P = beta.shape
    if P < 3:
        return 0.0, np.zeros_like(beta)
    D = np.zeros((P - 2, P))
    for r in range(P - 2):
        D[r, r], D[r, r + 1], D[r, r + 2] = 1.0, -2.0, 1.0
    d = beta @ D.T
    return float(np.sum(d**2)), 2 * d @ D


def masked_fsa(
    X, y, k, *, loss="squared", n_iter=50, mu=300.0, lr, l2=0.0, bins=None, smoothness=0.0, pairs=None, h=0.1
):
    """Algorithm 1 at full width with a mask. Returns dict(support, beta (solver space), b, losses)."""
    X = np.asarray(X, np.float64)
    N, M = X.shape
    if bins is None:
        Z, mean, inv = standardize(X)
        Z = Z[:, :, None]
    else:
        U, _, _ = pl_dense(X, bins)
        Z = U - U.mean(0, keepdims=True)  # centered basis
    P = Z.shape[2]
    beta = np.zeros((M, P))
    b = 0.0
    active = X.max(0) > X.min(0)  # constant columns are never active
    sched = schedule(M, k, n_iter, mu)
    losses = []
    for e in range(n_iter):
        s = np.einsum("nmp,mp->n", Z, beta) + b
        val, u = loss_and_grad(loss, s, y=y, pairs=pairs, h=h)
        pen, pgrad = second_diff_penalty_grad(beta)
        losses.append(val + 0.5 * l2 * np.sum(beta**2) + smoothness * pen)
        g = np.einsum("nmp,n->mp", Z, u) + l2 * beta + smoothness * pgrad
        g[~active] = 0
        beta = beta - lr * g
        b = b - lr * u.sum()
        score = np.where(active, np.sum(beta**2, 1), -1.0)
        order = np.argsort(-score, kind="stable")
        keep = np.zeros(M, bool)
        keep[order[: sched[e]]] = True
        active = keep & active  # a killed variable never returns
        beta[~active] = 0
    support = np.flatnonzero(active)
    out = dict(support=support, beta=beta[support], b=b, losses=np.array(losses), schedule=sched)
    if bins is None:
        raw = beta[support, 0] * inv[support]
        out.update(coef=raw, intercept=b - mean[support] @ raw)
    return out


def lipschitz(X, loss="squared", h=0.1):
    """Exact Lipschitz constant (mean-loss scaling) of the gradient for [Z 1], Z standardized."""
    Z, _, _ = standardize(np.asarray(X, np.float64))
    A = np.c_[Z, np.ones(len(Z))]
    lam = np.linalg.eigvalsh(A.T @ A / len(Z)).max()
    kappa = {"squared": 1.0, "logistic": 0.25, "lorenz": 2.0, "huber_hinge": 1 / (2 * h)}[loss]
    return kappa * lam


def ridge(X, y, l2):
    """argmin ½ mean (y − Zc − b)² + (l2/2)‖c‖² on standardized Z, in raw space: (coef, intercept)."""
    Z, mean, inv = standardize(np.asarray(X, np.float64))
    y = np.asarray(y, np.float64)
    n, m = Z.shape
    c = np.linalg.solve(Z.T @ Z / n + l2 * np.eye(m), Z.T @ (y - y.mean()) / n)
    raw = c * inv
    return raw, y.mean() - mean @ raw
