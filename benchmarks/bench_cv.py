"""Benchmark: choosing the budget / k by cross-validation — the CV estimators vs GridSearchCV.

``GroupSequencingRegressorCV`` runs the K folds of a sequencing path in one jitted, vmapped call
(:func:`jaxselect.cross_validate_path`) and reads every budget of the grid off each fold's path;
``GridSearchCV(GroupSequencingRegressor(), {"budget": grid})`` refits the path for every (budget,
fold) pair. ``FSARegressorCV`` fits each k on all folds in one vmapped call per k
(:func:`jaxselect.cross_validate_fsa`); ``GridSearchCV(FSARegressor(), {"k": ks})`` fits every
(k, fold) pair. Both sides use the same folds (``KFold(5)``) and the same grid; the script checks
that they choose the same budget / k.

Problems: Pima (768 × 8, Turney's costs, glucose + insulin one group; the 0/1 label as the
regression target, as in the anytime paper's experiments), a synthetic regression (n = 2000,
D = 100 unit-cost features, 10 informative; the grid is every budget 0..100), and FSA on a
synthetic regression (n = 500, M = 200, ks = 5, 10, 20, 40, 300 iterations). ``--quick``: smaller.

Times: "cold" = first call in the process after ``jax.clear_caches()`` (includes compilation),
"warm" = median of 3 further calls. float32, CPU.

Run:  python benchmarks/bench_cv.py [--quick]
Writes benchmarks/results/bench_cv.json (or bench_cv_quick.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import jax
import numpy as np
from sklearn.model_selection import GridSearchCV, KFold

import jaxselect as js
from jaxselect.sklearn import (
    FSARegressor,
    FSARegressorCV,
    GroupSequencingRegressor,
    GroupSequencingRegressorCV,
)

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def timed(fn, repeat=3):
    """(cold seconds, warm median seconds, last result)."""
    jax.clear_caches()
    t0 = time.perf_counter()
    out = fn()
    cold = time.perf_counter() - t0
    warm = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        warm.append(time.perf_counter() - t0)
    return cold, statistics.median(warm), out


def sequencing_case(name, X, y, groups, costs, l2=1e-3):
    cv = KFold(5)
    cold_cv, warm_cv, est = timed(
        lambda: GroupSequencingRegressorCV(groups=groups, costs=costs, cv=cv, l2=l2).fit(X, y)
    )
    grid = list(est.cv_result_.grid)
    base = GroupSequencingRegressor(groups=groups, costs=costs, l2=l2)
    cold_gs, warm_gs, gs = timed(lambda: GridSearchCV(base, {"budget": grid}, cv=cv).fit(X, y), repeat=1)
    same = gs.best_params_["budget"] == est.budget_
    gap = float(np.max(np.abs(gs.cv_results_["mean_test_score"] - est.cv_result_.mean)))
    return {
        "problem": name,
        "what": "budget",
        "grid_size": len(grid),
        "n": X.shape[0],
        "d": X.shape[1],
        "cv_estimator_cold_s": cold_cv,
        "cv_estimator_warm_s": warm_cv,
        "gridsearch_cold_s": cold_gs,
        "gridsearch_warm_s": warm_gs,
        "choice_cv": est.budget_,
        "choice_gridsearch": gs.best_params_["budget"],
        "same_choice": bool(same),
        "max_mean_score_gap": gap,
    }


def fsa_case(name, X, y, ks, n_iter):
    cv = KFold(5)
    cold_cv, warm_cv, est = timed(lambda: FSARegressorCV(ks=ks, cv=cv, n_iter=n_iter).fit(X, y), repeat=1)
    cold_gs, warm_gs, gs = timed(
        lambda: GridSearchCV(FSARegressor(n_iter=n_iter), {"k": ks}, cv=cv).fit(X, y), repeat=1
    )
    gap = float(np.max(np.abs(gs.cv_results_["mean_test_score"] - est.cv_result_.mean)))
    return {
        "problem": name,
        "what": "k",
        "grid_size": len(ks),
        "n": X.shape[0],
        "d": X.shape[1],
        "cv_estimator_cold_s": cold_cv,
        "cv_estimator_warm_s": warm_cv,
        "gridsearch_cold_s": cold_gs,
        "gridsearch_warm_s": warm_gs,
        "choice_cv": est.k_,
        "choice_gridsearch": gs.best_params_["k"],
        "same_choice": bool(gs.best_params_["k"] == est.k_),
        "max_mean_score_gap": gap,
    }


def main(quick: bool):
    rng = np.random.default_rng(0)
    rows = []
    pima = js.datasets.load_pima()
    rows.append(
        sequencing_case(
            "Pima (Turney costs)", pima.X.astype(np.float32), pima.y.astype(np.float32), pima.groups, pima.costs
        )
    )
    n, d = (500, 30) if quick else (2000, 100)
    X = rng.normal(size=(n, d)).astype(np.float32)
    w = np.zeros(d)
    w[:10] = rng.normal(size=10)
    y = (X @ w + rng.normal(size=n)).astype(np.float32)
    rows.append(sequencing_case(f"synthetic n={n}, D={d}", X, y, None, None))
    n, m, ks, n_iter = (200, 50, [2, 5, 10], 100) if quick else (500, 200, [5, 10, 20, 40], 300)
    X = rng.normal(size=(n, m)).astype(np.float32)
    w = np.zeros(m)
    w[:10] = rng.normal(size=10)
    y = (X @ w + 0.5 * rng.normal(size=n)).astype(np.float32)
    rows.append(fsa_case(f"FSA synthetic n={n}, M={m}", X, y, ks, n_iter))

    print(
        "| problem | grid | CV estimator cold / warm (s) | GridSearchCV cold / warm (s) | choice (CV, GridSearchCV) |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['problem']} | {r['grid_size']} {r['what']}s | {r['cv_estimator_cold_s']:.2f} / {r['cv_estimator_warm_s']:.3f} "
            f"| {r['gridsearch_cold_s']:.2f} / {r['gridsearch_warm_s']:.2f} | {r['choice_cv']:g}, {r['choice_gridsearch']:g} "
            f"({'same' if r['same_choice'] else 'DIFFERENT'}) |"
        )
    os.makedirs(RESULTS, exist_ok=True)
    out = os.path.join(RESULTS, "bench_cv_quick.json" if quick else "bench_cv.json")
    with open(out, "w") as f:
        json.dump(
            {
                "machine": platform.processor() or platform.machine(),
                "cpus": os.cpu_count(),
                "jax": jax.__version__,
                "rows": rows,
            },
            f,
            indent=2,
        )
    print(f"wrote {out}")
    if not all(r["same_choice"] for r in rows):
        raise SystemExit("the CV estimator and GridSearchCV chose differently")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    main(parser.parse_args().quick)
