"""Slow, obviously-correct numpy oracles for the sequencing solvers (no code shared with jaxselect)."""

from __future__ import annotations

import itertools

import numpy as np


def grouped_problem(seed, n=120, T=1, sizes=(1, 3, 2, 4, 1, 2), dtype=np.float64):
    """Test data: raw features with offsets/scales, correlated columns inside groups, random costs.

    Returns ``(X, Y, ids, costs)``; Y is 1-D when T = 1.
    """
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(len(sizes)), sizes)
    D = len(ids)
    latent = rng.normal(size=(n, len(sizes)))
    X = rng.normal(size=(n, D)) + 1.5 * latent[:, ids]
    X = X * rng.uniform(0.2, 5.0, D) + rng.normal(scale=10.0, size=D)
    W = rng.normal(size=(D, T)) * (rng.uniform(size=(D, 1)) < 0.5)
    Y = X @ W + rng.normal(scale=2.0, size=(n, T))
    costs = rng.uniform(0.5, 4.0, len(sizes))
    return X.astype(dtype), (Y[:, 0] if T == 1 else Y).astype(dtype), ids, costs


def standardize(X, Y):
    Xc = X - X.mean(axis=0)
    Xs = Xc / Xc.std(axis=0)
    Y = Y.reshape(len(Y), -1)
    Yc = Y - Y.mean(axis=0)
    return Xs, Yc / Yc.std(axis=0)


def whiten(Xs, ids, tol=1e-8):
    """Per-group whitening: columns X_g V Λ^{-1/2} on kept directions, dropped directions → 0."""
    n = Xs.shape[0]
    Z = np.zeros_like(Xs)
    for g in np.unique(ids):
        cols = np.flatnonzero(ids == g)
        lam, V = np.linalg.eigh(Xs[:, cols].T @ Xs[:, cols] / n)
        lam, V = lam[::-1], V[:, ::-1]
        keep = lam > tol * lam.max()
        Zg = np.zeros((n, len(cols)))
        Zg[:, keep] = Xs[:, cols] @ V[:, keep] / np.sqrt(lam[keep])
        Z[:, cols] = Zg
    return Z


def explained_variance(Z, Y, feats, l2):
    """F(S) = ½ tr(b0_Sᵀ C_S⁻¹ b0_S) with C = ZᵀZ/n + λI, b0 = ZᵀY/n (live columns only)."""
    n = Z.shape[0]
    feats = [f for f in feats if np.any(Z[:, f] != 0)]
    if not feats:
        return 0.0
    ZS = Z[:, feats]
    C = ZS.T @ ZS / n + l2 * np.eye(len(feats))
    b0 = ZS.T @ Y / n
    return 0.5 * float(np.sum(b0 * np.linalg.solve(C, b0)))


def ridge(Z, Y, feats, l2):
    n, d = Z.shape
    w = np.zeros((d, Y.shape[1]))
    feats = [f for f in feats if np.any(Z[:, f] != 0)]
    if feats:
        ZS = Z[:, feats]
        w[feats] = np.linalg.solve(ZS.T @ ZS / n + l2 * np.eye(len(feats)), ZS.T @ Y / n)
    return w


def forward_regression(Z, Y, ids, costs, l2, cost_sensitive=True):
    """Brute-force CS-G-FR: refit F(S ∪ g) for every candidate g at every step."""
    J = int(ids.max()) + 1
    chosen, feats = [], []
    for _ in range(J):
        base = explained_variance(Z, Y, feats, l2)
        best, best_g = -np.inf, None
        for g in range(J):
            if g in chosen:
                continue
            gain = explained_variance(Z, Y, feats + list(np.flatnonzero(ids == g)), l2) - base
            score = gain / (costs[g] if cost_sensitive else 1.0)
            if score > best + 1e-12:
                best, best_g = score, g
        chosen.append(best_g)
        feats += list(np.flatnonzero(ids == best_g))
    return chosen


def omp(Xs, Z, Y, ids, costs, l2, criterion="whiten", cost_sensitive=True):
    """Naive CS-G-OMP on whitened design Z; criteria use residual correlations directly.

    whiten: ‖Z_gᵀ r / n‖²;  no_whiten: ‖X_gᵀ r / n‖² (standardised features);  single: max_f ‖x_fᵀ r/n‖².
    """
    n = Z.shape[0]
    J = int(ids.max()) + 1
    chosen, feats = [], []
    for _ in range(J):
        w = ridge(Z, Y, feats, l2)
        r = Y - Z @ w
        best, best_g = -np.inf, None
        for g in range(J):
            if g in chosen:
                continue
            cols = np.flatnonzero(ids == g)
            if criterion == "whiten":
                v = np.sum((Z[:, cols].T @ r / n) ** 2)
            elif criterion == "no_whiten":
                v = np.sum((Xs[:, cols].T @ r / n) ** 2)
            else:
                v = np.max(np.sum((Xs[:, cols].T @ r / n) ** 2, axis=1))
            score = v / (costs[g] if cost_sensitive else 1.0)
            if score > best + 1e-12:
                best, best_g = score, g
        chosen.append(best_g)
        feats += list(np.flatnonzero(ids == best_g))
    return chosen


def doubling(Z, Y, ids, costs, l2, c_min):
    """Brute-force Doubling algorithm (Alg. 2) with refits."""
    J = int(ids.max()) + 1
    chosen, feats, total = [], [], 0.0
    for j in range(J):
        cap = c_min if j == 0 else total
        remaining = [g for g in range(J) if g not in chosen]
        cap = max(cap, min(costs[g] for g in remaining))
        base = explained_variance(Z, Y, feats, l2)
        best, best_g = -np.inf, None
        for g in remaining:
            if costs[g] > cap * (1 + 1e-12):
                continue
            gain = explained_variance(Z, Y, feats + list(np.flatnonzero(ids == g)), l2) - base
            if gain / costs[g] > best + 1e-12:
                best, best_g = gain / costs[g], g
        chosen.append(best_g)
        feats += list(np.flatnonzero(ids == best_g))
        total += costs[best_g]
    return chosen


def best_subset_value(Z, Y, ids, costs, l2, budget):
    """max F(A) over all group subsets A with cost(A) ≤ budget (exhaustive)."""
    J = int(ids.max()) + 1
    best = 0.0
    for r in range(1, J + 1):
        for A in itertools.combinations(range(J), r):
            if sum(costs[g] for g in A) <= budget + 1e-12:
                feats = [f for g in A for f in np.flatnonzero(ids == g)]
                best = max(best, explained_variance(Z, Y, feats, l2))
    return best


def rtol_for(dtype, f64: float = 1e-6, f32: float = 2e-3) -> float:
    """A tolerance realistic for the dtype a test computes in."""
    return f64 if np.dtype(dtype) == np.float64 else f32
