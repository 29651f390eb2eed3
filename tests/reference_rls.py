"""Slow, obviously-correct numpy oracle for greedy RLS: refit ridge for every candidate.

LOO residuals of ridge regression come from the hat matrix ``H = Z (ZᵀZ + λI)⁻¹ Zᵀ``:
``r = (Y − HY) / (1 − diag H)`` (exact for any linear smoother fit by least squares with a fixed
penalty). ``Z`` holds the constant column ``√bias`` (when bias > 0) and the selected columns.
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


def ridge_loo_mse(Z, Y, l2):
    """Mean squared LOO residual of ridge on Z (n, m) for targets Y (n, T), via the hat matrix."""
    Y = np.asarray(Y, dtype=np.float64).reshape(Z.shape[0], -1)
    m = Z.shape[1]
    H = Z @ np.linalg.solve(Z.T @ Z + l2 * np.eye(m), Z.T) if m else np.zeros((Z.shape[0],) * 2)
    R = (Y - H @ Y) / (1.0 - np.diag(H))[:, None]
    return float(np.mean(R**2))


def candidate_scores(X, Y, S, l2, bias):
    """(d,) LOO mean squared error of adding each feature to S (inf for features already in S)."""
    d = np.asarray(X).shape[1]
    out = np.full(d, np.inf)
    for i in range(d):
        if i not in S:
            out[i] = ridge_loo_mse(design(X, list(S) + [i], bias), Y, l2)
    return out


def ridge_fit(X, Y, S, l2, bias):
    """Weights (|S|, T) and intercept (T,) of ridge on the selected features (+ bias column)."""
    Y = np.asarray(Y, dtype=np.float64).reshape(np.asarray(X).shape[0], -1)
    Z = design(X, S, bias)
    W = np.linalg.solve(Z.T @ Z + l2 * np.eye(Z.shape[1]), Z.T @ Y)
    if bias > 0:
        return W[1:], np.sqrt(bias) * W[0]
    return W, np.zeros(Y.shape[1])


def greedy_rls_naive(X, Y, k, l2=1.0, bias=0.0):
    """Naive greedy RLS: returns (selected list, loo list) with ties to the lowest index."""
    S, loo = [], []
    for _ in range(k):
        scores = candidate_scores(X, Y, S, l2, bias)
        b = int(np.argmin(scores))
        S.append(b)
        loo.append(float(scores[b]))
    return S, np.asarray(loo)
