"""Cost-weighted group lasso path: jaxselect (moment-space BCD) vs skglm's GroupLasso.

Problem: n = 20 000 samples, D = 500 features in groups of 10 (J = 50), group weights = random
costs in [1, 10], a path of 20 λ values from λ_max down to λ_max/100. Both solvers get the same
standardised, group-whitened design Z and standardised y (jaxselect's own ``prepare``), the same
weights and the same λ grid; skglm is warm-started along the path (``warm_start=True``) like
jaxselect, with its default tolerance 1e-4 (``--skglm-tol``); jaxselect stops at a KKT violation
≤ 1e-8·λ_max. Reported: wall time of the whole path (jaxselect: ``prepare`` — Gram matrix included —
plus the solve; compile time reported separately), the ratio, and the agreement of the solutions
(max |Δw| and the relative gap of the objective values). Results go to
``benchmarks/results/group_lasso[_quick].json``.

Run: ``python benchmarks/bench_group_lasso.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import jaxselect as js  # noqa: E402
from jaxselect.sequencing.group_lasso import group_lasso, group_lasso_lambda_max  # noqa: E402

RESULTS = os.path.join(os.path.dirname(__file__), "results")


def make_data(n, D, size, seed=0):
    rng = np.random.default_rng(seed)
    J = D // size
    ids = np.repeat(np.arange(J), size)
    latent = rng.normal(size=(n, J))
    X = rng.normal(size=(n, D)) + 0.8 * latent[:, ids]
    w = rng.normal(size=D) * (rng.uniform(size=D) < 0.2)
    y = X @ w + rng.normal(scale=3.0, size=n)
    costs = rng.uniform(1.0, 10.0, J)
    return X, y, ids, costs


def objective(Z, y, w, ids, weights, lam):
    r = y - Z @ w
    pen = sum(weights[g] * np.linalg.norm(w[ids == g]) for g in range(len(weights)))
    return float(r @ r / (2 * len(y)) + lam * pen)


def run_jax(X, y, groups, n_lambdas, ratio, tol):
    problem = js.prepare(X, y, groups, l2=0.0)
    lmax = group_lasso_lambda_max(problem)
    lambdas = lmax * np.geomspace(1.0, ratio, n_lambdas)
    fit = group_lasso(problem, lambdas, tol=tol)
    jax.block_until_ready(fit.coef)
    return problem, lambdas, fit


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small CI-sized problem")
    ap.add_argument("--skglm-tol", type=float, default=1e-4, help="skglm's stopping tolerance (its default 1e-4)")
    args = ap.parse_args()
    n, D, size, n_lambdas = (2000, 100, 10, 10) if args.quick else (20_000, 500, 10, 20)
    ratio, tol = 1e-2, 1e-8
    X, y, ids, costs = make_data(n, D, size)
    groups = js.Groups.from_ids(ids, costs)

    t0 = time.perf_counter()
    run_jax(X, y, groups, n_lambdas, ratio, tol)
    t_first = time.perf_counter() - t0  # compile + run
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        problem, lambdas, fit = run_jax(X, y, groups, n_lambdas, ratio, tol)
        times.append(time.perf_counter() - t0)
    t_jax = min(times)
    t0 = time.perf_counter()
    jax.block_until_ready(group_lasso(problem, lambdas, tol=tol).coef)
    t_solve = time.perf_counter() - t0

    Z = np.asarray(js.whiten_design(X, groups)[0].Z)
    ys = (y - y.mean()) / y.std()
    members = [np.flatnonzero(ids == g).tolist() for g in range(len(costs))]
    result = {
        "problem": {"n": n, "D": D, "group_size": size, "n_lambdas": n_lambdas, "lambda_min_ratio": ratio},
        "jaxselect": {
            "path_s": t_jax,
            "solve_only_s": t_solve,
            "first_call_with_compile_s": t_first,
            "sweeps": np.asarray(fit.n_iter).tolist(),
            "all_converged": bool(fit.converged.all()),
        },
    }
    try:
        from skglm import GroupLasso
    except ImportError:  # pragma: no cover
        GroupLasso = None
    if GroupLasso is not None:
        est = GroupLasso(members, alpha=float(lambdas[0]), weights=costs, fit_intercept=False, tol=1e-6)
        est.fit(Z[:200], ys[:200])  # numba compile outside the timing
        skglm_coef, t_sk = [], []
        est = GroupLasso(members, alpha=1.0, weights=costs, fit_intercept=False, tol=args.skglm_tol, warm_start=True)
        t0 = time.perf_counter()
        for lam in lambdas:
            est.alpha = float(lam)
            est.fit(Z, ys)
            skglm_coef.append(est.coef_.copy())
        t_sk = time.perf_counter() - t0
        skglm_coef = np.asarray(skglm_coef)
        ours = np.asarray(fit.coef[:, :, 0])
        obj_ours = [objective(Z, ys, ours[k], ids, costs, lam) for k, lam in enumerate(lambdas)]
        obj_sk = [objective(Z, ys, skglm_coef[k], ids, costs, lam) for k, lam in enumerate(lambdas)]
        result["skglm"] = {"path_s": t_sk, "tol": args.skglm_tol}
        result["agreement"] = {
            "max_abs_coef_diff": float(np.abs(ours - skglm_coef).max()),
            "max_rel_objective_gap_ours_minus_skglm": float(
                np.max((np.asarray(obj_ours) - np.asarray(obj_sk)) / np.abs(obj_sk))
            ),
        }
        result["speedup_vs_skglm"] = t_sk / t_jax
        result["speedup_vs_skglm_solve_only"] = t_sk / t_solve

    print(f"group lasso path: n={n}, D={D}, groups of {size}, {n_lambdas} λ (float64)")
    print(f"{'solver':<28}{'time [s]':>12}")
    print(f"{'jaxselect (prepare+path)':<28}{t_jax:>12.3f}")
    print(f"{'jaxselect (path only)':<28}{t_solve:>12.3f}")
    print(f"{'jaxselect first call':<28}{t_first:>12.3f}   (includes XLA compile)")
    if "skglm" in result:
        print(f"{'skglm GroupLasso (warm)':<28}{result['skglm']['path_s']:>12.3f}")
        print(
            f"speed-up vs skglm: {result['speedup_vs_skglm']:.1f}x  (path only: {result['speedup_vs_skglm_solve_only']:.1f}x)"
        )
        print(
            f"max |Δw| = {result['agreement']['max_abs_coef_diff']:.2e}, "
            f"max relative objective gap (ours − skglm) = {result['agreement']['max_rel_objective_gap_ours_minus_skglm']:.2e}"
        )
    os.makedirs(RESULTS, exist_ok=True)
    out = os.path.join(RESULTS, "group_lasso_quick.json" if args.quick else "group_lasso.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    print("saved", out)


if __name__ == "__main__":
    main()
