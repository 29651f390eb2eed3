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
