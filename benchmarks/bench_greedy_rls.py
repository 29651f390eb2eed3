"""Benchmark: jaxselect.greedy_rls vs a faithful vectorised numpy re-implementation of RLScore's GreedyRLS.

RLScore (https://github.com/aatapa/RLScore, MIT) does not build on current Python (its PyPI release
imports numpy in setup.py and ships Python-2-era Cython; ``pip install rlscore`` fails on Python 3.11),
so the peer is ``rlscore_greedy_rls`` below: RLScore's ``GreedyRLS._solve_new`` (its vectorised numpy
path) generalised to T targets exactly as its Cython ``find_optimal_feature`` does (loop over targets,
LOO mean squared error over n·T, ties to the lowest index), in float64 like RLScore (which casts X to
float64). Both sides must pick the same features; the script checks it.

Problem: n=2000, d=5000, k=50, T=1 and T=10, Gaussian X with a 20-feature signal (``--quick``:
n=500, d=1000, k=20), RLScore's default ``regparam=1``, i.e. jaxselect's ``l2 = regparam / n`` (the
library's l2 penalises the mean loss). jaxselect runs in float32 (its default) and in float64 (x64); compile time is
reported separately and excluded from the ratio (it is paid once per shape).

Run:  python benchmarks/bench_greedy_rls.py [--quick]
Writes benchmarks/results/greedy_rls.json (or greedy_rls_quick.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import jax

jax.config.update("jax_enable_x64", True)  # float64 case exists; float32 inputs stay float32

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxselect.rls.selection import greedy_rls  # noqa: E402


def rlscore_greedy_rls(X, Y, k, regparam=1.0, bias=0.0):
    """RLScore GreedyRLS (``_solve_new`` vectorisation, multi-target like its Cython kernel), numpy float64.

    Returns (selected, performances): performances are LOO mean squared errors over n·T.
    """
    X = np.asarray(X, dtype=np.float64).T  # RLScore stores X transposed: (d, n)
    Y = np.asarray(Y, dtype=np.float64).reshape(X.shape[1], -1)
    n, T = Y.shape
    rpinv = 1.0 / regparam
    cv = np.sqrt(bias) * np.ones((1, n))
    # G0 = (cv cvᵀ + λI)⁻¹ applied to Y, Xᵀ and its diagonal (RLScore's "Biaz" block).
    shrink = rpinv / (1.0 + (cv @ cv.T)[0, 0] * rpinv)
    dualvec = rpinv * Y - cv.T * (shrink * (cv * rpinv) @ Y)
    GXT = rpinv * X.T - cv.T * (shrink * (cv * rpinv) @ X.T)
    diagG = rpinv - cv[0] * cv[0] * shrink * rpinv
    selected, performances = [], []
    tmp = np.empty_like(GXT)
    res = np.empty_like(GXT)
    for _ in range(k):
        np.multiply(X.T, GXT, tmp)
        xgx = 1.0 / (1.0 + tmp.sum(axis=0))  # (d,)
        np.multiply(GXT, xgx, tmp)  # u_i for every candidate (columns)
        np.multiply(tmp, GXT, tmp)
        np.subtract(diagG[:, None], tmp, tmp)
        np.divide(1.0, tmp, tmp)  # 1 / g̃
        xa = X @ dualvec  # (d, T)
        looperf = np.zeros(X.shape[0])
        for h in range(T):  # the Cython kernel's loop over labels
            np.multiply(GXT, xa[:, h] * xgx, res)
            np.subtract(dualvec[:, h : h + 1], res, res)  # Ã_h
            np.multiply(res, tmp, res)
            np.multiply(res, res, res)
            looperf += res.sum(axis=0)
        looperf /= n * T
        looperf[selected] = np.inf
        b = int(np.argmin(looperf))
        performances.append(float(looperf[b]))
        cvb = X[b]
        GXT_b = GXT[:, b].copy()
        ca = GXT_b / (1.0 + cvb @ GXT_b)
        dualvec = dualvec - np.outer(ca, cvb @ dualvec)
        diagG = diagG - ca * GXT_b
        GXT -= np.outer(ca, cvb @ GXT)
        selected.append(b)
    return np.asarray(selected), np.asarray(performances)


def _problem(n, d, T, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    W = rng.standard_normal((20, T))
    Y = X[:, :20] @ W + rng.standard_normal((n, T))
    return X, Y


REGPARAM = 1.0  # RLScore's default; jaxselect's l2 = REGPARAM / n


def _time_jax(X, Y, k, dtype, repeats):
    """(result, best wall s, best CPU s, compile s) over ``repeats`` runs after a warm-up run."""
    Xj = jnp.asarray(X, dtype=dtype)
    Yj = jnp.asarray(Y, dtype=dtype)
    l2 = REGPARAM / X.shape[0]
    t0 = time.perf_counter()
    res = jax.block_until_ready(greedy_rls(Xj, Yj, k, l2=l2))
    first = time.perf_counter() - t0
    walls, cpus = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        res = jax.block_until_ready(greedy_rls(Xj, Yj, k, l2=l2))
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return res, min(walls), min(cpus), max(0.0, first - min(walls))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small problem, finishes in seconds")
    ap.add_argument("--targets", type=int, nargs="+", default=[1, 10])
    args = ap.parse_args()
    n, d, k = (500, 1000, 20) if args.quick else (2000, 5000, 50)
    repeats = 3
    load_start = os.getloadavg()[0]
    rows = []
    for T in args.targets:
        X, Y = _problem(n, d, T)
        t0, c0 = time.perf_counter(), time.process_time()
        sel_np, perf_np = rlscore_greedy_rls(X, Y, k, regparam=REGPARAM)
        t_np, c_np = time.perf_counter() - t0, time.process_time() - c0
        for dtype in (jnp.float32, jnp.float64):
            res, t_jax, c_jax, t_compile = _time_jax(X, Y, k, dtype, repeats)
            sel = np.asarray(res.selected)
            loo = np.asarray(res.loo_error, dtype=np.float64)
            rows.append(
                dict(
                    n=n,
                    d=d,
                    k=k,
                    T=T,
                    dtype=np.dtype(dtype).name,
                    rlscore_numpy_s=t_np,
                    jaxselect_s=t_jax,
                    compile_s=t_compile,
                    speedup=t_np / t_jax,
                    rlscore_numpy_cpu_s=c_np,
                    jaxselect_cpu_s=c_jax,
                    cpu_ratio=c_np / c_jax,
                    same_picks=bool(np.array_equal(sel, sel_np)),
                    first_difference=int(np.argmax(sel != sel_np)) if not np.array_equal(sel, sel_np) else None,
                    max_rel_loo_diff=float(np.max(np.abs(loo - perf_np) / perf_np)),
                )
            )
    hdr = (
        f"{'n':>5} {'d':>5} {'k':>3} {'T':>3} {'dtype':>7} {'RLScore-np s':>12} {'jaxselect s':>11} "
        f"{'ratio':>7} {'CPU ratio':>9} {'compile s':>9} {'same picks':>10} {'max rel LOO diff':>16}"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(
            f"{r['n']:>5} {r['d']:>5} {r['k']:>3} {r['T']:>3} {r['dtype']:>7} {r['rlscore_numpy_s']:>12.3f} "
            f"{r['jaxselect_s']:>11.3f} {r['speedup']:>6.1f}x {r['cpu_ratio']:>8.1f}x {r['compile_s']:>9.2f} "
            f"{str(r['same_picks']):>10} {r['max_rel_loo_diff']:>16.2e}"
        )
    out = dict(
        benchmark="greedy_rls vs RLScore GreedyRLS (faithful numpy re-implementation, float64)",
        rlscore_pip="pip install rlscore fails on Python 3.11 (setup.py imports numpy during build)",
        machine=dict(platform=platform.platform(), cpus=os.cpu_count(), jax=jax.__version__, numpy=np.__version__),
        timing=(
            "wall and CPU (process) seconds; jaxselect: best of 3 runs after a warm-up (compile) "
            "run; RLScore-np: one run. CPU ratio is less sensitive to other load on the machine."
        ),
        load_average_1min=dict(start=load_start, end=os.getloadavg()[0]),
        rows=rows,
    )
    here = os.path.dirname(os.path.abspath(__file__))
    os.makedirs(os.path.join(here, "results"), exist_ok=True)
    path = os.path.join(here, "results", "greedy_rls_quick.json" if args.quick else "greedy_rls.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
