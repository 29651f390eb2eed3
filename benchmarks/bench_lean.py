"""Benchmark: ``gram=False`` sequencing at very large D — slot-space paths, state O(n·P + P·D).

X is n × D float32 (``--input numpy``, default, or ``--input jax``: a ``jax.Array`` built on the device) (default n = 5 000, D = 50 000: 1 GB; ``--quick``: n = 2 000, D = 10 000), with
10 informative columns; every feature its own unit-cost group. In a fresh child process:

    problem = js.prepare(X, y, gram=False)   # keeps the standardised design, never the D×D Gram
    path = js.cs_fr(problem, k=100)          # 100 steps; the path is (100, P, 1) slot coefficients

and it reports the peak resident memory of the child (``ru_maxrss``) — total, and above what the
process held after generating X — against the size of X, plus the times (compile included in the
first call, "warm" a second call). Goal (issue 12): peak memory ≤ 2× X. The Gram mode would hold a
D×D matrix (10 GB at D = 50 000) and, before this change, ``gram=False`` held K (P×D) and U (P×P)
with P ≈ D by default, plus a (J, D, T) path.

Run:  python benchmarks/bench_lean.py [--quick] [--n N --d D --k K] [--method fr|omp]
Writes benchmarks/results/lean.json (``--out`` to choose; the JSON records the sizes).

``--method fsa`` measures :func:`jaxselect.fsa` instead (issue 25, "lean in memory"): a numpy float32
X that jax cannot alias (16-byte aligned, as large numpy allocations are), logistic labels from 10
informative columns, ``k = 20``; ``--max-memory auto`` (default: the first stage runs from the host
array, the kept columns are gathered at the first compaction) or ``--max-memory none`` (the whole X
copied to the device, as before). Defaults for fsa: n = 200 000, D = 2 000 (1.6 GB).

    python benchmarks/bench_lean.py --method fsa                      # lean
    python benchmarks/bench_lean.py --method fsa --max-memory none    # the device copy, to compare
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from functools import partial

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def rss_peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child_fsa(args) -> dict:
    import jax
    import numpy as np

    import jaxselect as js

    n, d, k = args.n, args.d, args.k
    base = rss_peak()
    rng = np.random.default_rng(0)
    raw = np.empty(n * d + 16, np.float32)  # X starts 16 bytes past a 64-byte boundary: not aliasable
    offset = (16 - raw.ctypes.data % 64) % 64 // 4
    X = raw[offset : offset + n * d].reshape(n, d)
    assert X.ctypes.data % 64 != 0
    for start in range(0, n, 5000):
        X[start : start + 5000] = rng.standard_normal((min(5000, n - start), d), dtype=np.float32)
    informative = rng.choice(d, 10, replace=False)
    beta = rng.uniform(0.5, 1.5, 10).astype(np.float32) * rng.choice([-1, 1], 10).astype(np.float32)
    y = (X[:, informative] @ beta + rng.standard_normal(n, dtype=np.float32) > 0).astype(np.int32)
    after_x = rss_peak()
    max_memory = None if args.max_memory == "none" else args.max_memory
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        res = js.fsa(X, y, k, loss="logistic", max_memory=max_memory)
        jax.block_until_ready(res)
        times.append(time.perf_counter() - t0)
    found = sorted(set(np.asarray(res.support).tolist()) & set(informative.tolist()))
    return {
        "x_bytes": int(X.nbytes),
        "input": f"numpy-unaligned, max_memory={args.max_memory}",
        "rss_start_bytes": base,
        "rss_after_x_bytes": after_x,
        "peak_rss_bytes": rss_peak(),
        "extra_peak_over_x": (rss_peak() - after_x) / X.nbytes,
        "fsa_cold_s": times[0],
        "fsa_warm_s": times[1],
        "informative_found": len(found),
        "status": int(res.status),
        "jax": jax.__version__,
    }


def child(args) -> dict:
    if args.method == "fsa":
        return child_fsa(args)
    import jax
    import numpy as np

    import jaxselect as js

    n, d, k = args.n, args.d, args.k
    base = rss_peak()
    rng = np.random.default_rng(0)
    informative = rng.choice(d, 10, replace=False)
    beta = rng.uniform(1.0, 3.0, 10).astype(np.float32)
    if args.input == "numpy":
        X = np.empty((n, d), np.float32)
        for start in range(0, n, 500):  # filled in place: no float64 temporaries of X's size
            X[start : start + 500] = rng.standard_normal((min(500, n - start), d), dtype=np.float32)
    else:  # a jax.Array filled block by block in place (donated buffer): X exists once, on the device
        import jax.numpy as jnp

        @partial(jax.jit, donate_argnums=0)
        def fill(A, key):
            def body(i, A):
                block = jax.random.normal(jax.random.fold_in(key, i), (500, d), jnp.float32)
                return jax.lax.dynamic_update_slice_in_dim(A, block, i * 500, axis=0)

            return jax.lax.fori_loop(0, n // 500, body, A)

        X = fill(jnp.zeros((n, d), jnp.float32), jax.random.key(0))
    y = np.asarray(X[:, informative]) @ beta + rng.standard_normal(n, dtype=np.float32)
    after_x = rss_peak()
    solver = js.cs_fr if args.method == "fr" else js.cs_omp
    t0 = time.perf_counter()
    problem = js.prepare(X, y, gram=False)
    jax.block_until_ready(problem)
    t_prepare = time.perf_counter() - t0
    t0 = time.perf_counter()
    path = solver(problem, k=k)
    jax.block_until_ready(path)
    t_cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    path = solver(problem, k=k)
    jax.block_until_ready(path)
    t_warm = time.perf_counter() - t0
    pred = js.predict(path, np.asarray(X[:100]), budget=float(k))
    found = sorted(set(np.asarray(path.order[:10]).tolist()) & set(informative.tolist()))
    return {
        "x_bytes": int(X.nbytes),
        "input": args.input,
        "rss_start_bytes": base,
        "rss_after_x_bytes": after_x,
        "peak_rss_bytes": rss_peak(),
        "prepare_s": t_prepare,
        "solve_cold_s": t_cold,
        "solve_warm_s": t_warm,
        "path_coef_shape": list(path.coef.shape),
        "path_features_shape": list(path.features.shape),
        "dense_path_bytes_avoided": int(k * d * 4),
        "informative_found_in_first_10": len(found),
        "pred_finite": bool(np.all(np.isfinite(np.asarray(pred)))),
        "status": int(path.status),
        "jax": jax.__version__,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=5_000)
    ap.add_argument("--d", type=int, default=50_000)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--method", choices=("fr", "omp", "fsa"), default="fr")
    ap.add_argument("--max-memory", default="auto", help="fsa: 'auto' (lean) or 'none' (device copy of X)")
    ap.add_argument("--quick", action="store_true", help="n = 2 000, D = 10 000 (80 MB)")
    ap.add_argument(
        "--input",
        choices=("numpy", "jax"),
        default="numpy",
        help="X as a numpy array (prepare makes one device copy) or a jax.Array (no copy)",
    )
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.method == "fsa":  # its own defaults
        args.n = 200_000 if "--n" not in sys.argv else args.n
        args.d = 2_000 if "--d" not in sys.argv else args.d
        args.k = 20 if "--k" not in sys.argv else args.k
    if args.quick:
        args.n, args.d = 2_000, 10_000
    if args.child:
        print(json.dumps(child(args)))
        return
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        "--n",
        str(args.n),
        "--d",
        str(args.d),
        "--k",
        str(args.k),
        "--method",
        args.method,
        "--input",
        args.input,
        "--max-memory",
        args.max_memory,
    ]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
    run = json.loads(proc.stdout.strip().splitlines()[-1])
    if args.method == "fsa":
        gib = 2**30
        print(f"X {args.n} x {args.d} float32 = {run['x_bytes'] / gib:.3f} GiB ({run['input']})")
        print(f"extra peak RSS above X: {(run['peak_rss_bytes'] - run['rss_after_x_bytes']) / gib:.3f} GiB = "
              f"{run['extra_peak_over_x']:.2f}x X")
        print(f"fsa k={args.k} logistic: {run['fsa_cold_s']:.2f} s cold, {run['fsa_warm_s']:.2f} s warm; "
              f"informative found {run['informative_found']}/10, status {run['status']}")
        out = args.out or os.path.join(RESULTS, "lean_fsa.json")
        runs = []
        if os.path.exists(out):
            with open(out) as f:
                runs = [r for r in json.load(f).get("runs", []) if r.get("input") != run["input"]]
        run.update(n=args.n, d=args.d, k=args.k, loadavg_after=os.getloadavg())
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as f:
            json.dump({"runs": runs + [run]}, f, indent=2)
        print(f"wrote {out}")
        return
    xb = run["x_bytes"]
    result = {
        "n": args.n,
        "d": args.d,
        "k": args.k,
        "method": args.method,
        "input": args.input,
        **run,
        "peak_over_x": run["peak_rss_bytes"] / xb,
        "peak_above_start_over_x": (run["peak_rss_bytes"] - run["rss_start_bytes"]) / xb,
        "goal": "peak memory <= 2 x X",
        "loadavg_after": os.getloadavg(),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
    }
    gib = 2**30
    rows = [
        ("X", f"{args.n} × {args.d} float32 = {xb / gib:.3f} GiB"),
        ("peak RSS (child)", f"{run['peak_rss_bytes'] / gib:.3f} GiB = {result['peak_over_x']:.2f}× X"),
        (
            "peak above start",
            (
                f"{(run['peak_rss_bytes'] - run['rss_start_bytes']) / gib:.3f} GiB = "
                f"{result['peak_above_start_over_x']:.2f}× X (imports: {run['rss_start_bytes'] / gib:.3f} GiB)"
            ),
        ),
        ("prepare(gram=False)", f"{run['prepare_s']:.2f} s"),
        (
            f"cs_{args.method} k={args.k}",
            f"{run['solve_cold_s']:.2f} s cold (compile), {run['solve_warm_s']:.2f} s warm",
        ),
        ("path coef / features", f"{run['path_coef_shape']} / {run['path_features_shape']}"),
        ("informative in first 10", f"{run['informative_found_in_first_10']} of 10"),
    ]
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    out = args.out or os.path.join(RESULTS, "lean.json")
    if os.path.exists(out) and args.out is None:  # one file, one entry per (input, size)
        with open(out) as f:
            try:
                previous = json.load(f)
            except json.JSONDecodeError:
                previous = {}
        runs = previous.get("runs", []) if isinstance(previous, dict) else []
    else:
        runs = []
    runs = [r for r in runs if (r.get("input"), r.get("n"), r.get("d")) != (args.input, args.n, args.d)]
    result = {"runs": runs + [result]}
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
