"""Slow, obviously-correct numpy oracle for greedy RLS: refit ridge for every candidate.

``l2`` is the library's penalty on the mean loss, ``(1/2n)‖Y − Zw‖² + (l2/2)‖w‖²``, i.e. the ridge
system ``(ZᵀZ + λI) w = ZᵀY`` with RLScore's ``λ = regparam = n·l2``. LOO residuals of ridge
regression come from the hat matrix ``H = Z (ZᵀZ + λI)⁻¹ Zᵀ``: ``r = (Y − HY) / (1 − diag H)``
(exact for any linear smoother fit by least squares with a fixed penalty). ``Z`` holds the constant
column ``√bias`` (when bias > 0) and the selected columns. Constant columns of X (max == min) are
never candidates (the library's rule for constant columns).
"""

from __future__ import annotations

import numpy as np


def design(X, S, bias):
    X = np.asarray(X, dtype=np.float64)
    cols = [X[:, j] for j in S]
    if bias > 0:
        cols = [np.full(X.shape[0], np.sqrt(bias))] + cols
    if not cols:
        return np.zeros((X.shape[0], 0))
    return np.stack(cols, axis=1)


def regparam(n, l2):
    """RLScore's regparam λ for the library's ``l2`` on ``n`` samples."""
    return n * l2


def ridge_loo_mse(Z, Y, l2):
    """Mean squared LOO residual of ridge on Z (n, m) for targets Y (n, T), via the hat matrix."""
    Y = np.asarray(Y, dtype=np.float64).reshape(Z.shape[0], -1)
    n, m = Z.shape
    lam = regparam(n, l2)
    H = Z @ np.linalg.solve(Z.T @ Z + lam * np.eye(m), Z.T) if m else np.zeros((n, n))
    R = (Y - H @ Y) / (1.0 - np.diag(H))[:, None]
    return float(np.mean(R**2))


def live_columns(X):
    """(d,) bool: the non-constant columns (max > min), the only candidates."""
    X = np.asarray(X)
    return X.max(axis=0) > X.min(axis=0)


def candidate_scores(X, Y, S, l2, bias):
    """(d,) LOO mean squared error of adding each feature to S (inf for taken or constant ones)."""
    live = live_columns(X)
    out = np.full(live.size, np.inf)
    for i in range(live.size):
        if i not in S and live[i]:
            out[i] = ridge_loo_mse(design(X, list(S) + [i], bias), Y, l2)
    return out


def ridge_fit(X, Y, S, l2, bias):
    """Weights (|S|, T) and intercept (T,) of ridge on the selected features (+ bias column)."""
    n = np.asarray(X).shape[0]
    Y = np.asarray(Y, dtype=np.float64).reshape(n, -1)
    Z = design(X, S, bias)
    W = np.linalg.solve(Z.T @ Z + regparam(n, l2) * np.eye(Z.shape[1]), Z.T @ Y)
    if bias > 0:
        return W[1:], np.sqrt(bias) * W[0]
    return W, np.zeros(Y.shape[1])


def greedy_rls_naive(X, Y, k, l2, bias=0.0):
    """Naive greedy RLS: returns (selected list, loo list) with ties to the lowest index."""
    S, loo = [], []
    for _ in range(k):
        scores = candidate_scores(X, Y, S, l2, bias)
        b = int(np.argmin(scores))
        S.append(b)
        loo.append(float(scores[b]))
    return S, np.asarray(loo)


def greedy_rls_dual(X, Y, k, l2, bias=0.0):
    """RLScore's GreedyRLS algorithm (Pahikkala, Airola & Salakoski 2010), in numpy float64.

    A second, independent oracle: instead of refitting ridge for every candidate it keeps the dual
    matrix ``G = (ZZᵀ + λI)⁻¹`` (n × n, ``λ = regparam``) implicitly through ``GX = G X``, the dual
    coefficients ``a = G Y`` and ``diag G``; adding column ``v`` is the Sherman–Morrison update
    ``G ← G − (Gv)(Gv)ᵀ / (1 + vᵀGv)``, and the LOO residuals of a candidate are ``a'ᵢ / G'ᵢᵢ``.
    This is the algorithm of RLScore's ``GreedyRLS`` (whose PyPI release does not build on current
    Python), written from the paper. Returns (selected list, mean squared LOO error per step).
    """
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    Y = np.asarray(Y, dtype=np.float64).reshape(n, -1)
    lam = regparam(n, l2)
    # G for the bias column alone: (bias·11ᵀ + λI)⁻¹ = (I − bias·11ᵀ / (λ + n·bias)) / λ
    G0 = (np.eye(n) - bias * np.ones((n, n)) / (lam + n * bias)) / lam
    GX, a, diag = G0 @ X, G0 @ Y, np.diag(G0).copy()
    live = live_columns(X)
    S, loo = [], []
    for _ in range(k):
        scores = np.full(d, np.inf)
        for j in range(d):
            if j in S or not live[j]:
                continue
            u, v = GX[:, j], X[:, j]
            s = 1.0 + v @ u
            a_j = a - np.outer(u, v @ a) / s
            diag_j = diag - u * u / s
            scores[j] = np.mean((a_j / diag_j[:, None]) ** 2)
        b = int(np.argmin(scores))  # ties to the lowest index
        u, v = GX[:, b].copy(), X[:, b]
        s = 1.0 + v @ u
        a = a - np.outer(u, v @ a) / s
        diag = diag - u * u / s
        GX = GX - np.outer(u, v @ GX) / s
        S.append(b)
        loo.append(float(scores[b]))
    return S, np.asarray(loo)
