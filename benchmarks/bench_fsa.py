"""Speed of FSA on a shrinking problem (issue 5), peers side by side in one run.

1. N = 10 000, M = 1000, k = 30 (Table IV data: Σ_ij = 0.9^|i−j|, y = Σ_j x_{10j} + ε):
   jaxselect ``fsa`` (compacted stages, default step) vs the same algorithm as one masked
   full-width JAX ``lax.scan`` (same step, same support) vs ``abess.linear.LinearRegression``
   with the same support size. Times are warm (compiled) medians; compile time is reported apart.
2. N = 100 000, M = 10 000 float32 (4 GB): time and peak resident memory of ``fsa`` relative to
   the bytes of X (goal ≤ 2×), and the schedule's bandwidth floor: (columns touched per iteration,
   summed over the schedule) × N × 4 bytes / measured read bandwidth (one pass over X).
3. One compiled run (issue 23): N = 50 000, M = 2 000, k = 30, float32 numpy input, ``fsa`` (the
   whole schedule one XLA program) vs a masked full-width ``lax.scan`` of the same schedule and
   step on the same input (goal ≥ 25×), and the XLA compilations of repeat calls that change
   only ``mu``, only ``lr``, only ``l2``, ``k`` within its bucket, ``k`` to another bucket.

4. Host memory of an in-memory call (``--memory``): ``fsa(X, y, 20, loss="logistic")`` on a numpy
   float32 X of N × 2 000 (N = 200 000 by default, ``--memory-rows``): the peak resident memory
   (VmHWM of /proc/self/status, reset before each call) above what was resident once X was
   built, over the bytes of X, for the first call (with compilation) and a warm one.

Usage: ``python benchmarks/bench_fsa.py [--quick]`` — prints a table, writes
``benchmarks/results/bench_fsa[_quick].json``; ``--compiled-run`` runs only part 3 and writes
``benchmarks/results/bench_fsa_run[_quick].json``; ``--memory`` runs only part 4 and writes
``benchmarks/results/bench_fsa_memory.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from scipy.signal import lfilter  # noqa: E402

from common import device_memory, environment  # noqa: E402
from compile_count import count_compiles  # noqa: E402
from jaxselect.anneal import (  # noqa: E402
    annealing_schedule,
    fsa,
    fsa_init,
    fsa_prepare,
    fsa_step,
    plan_stages,
    schedule_area,
    stage_widths,
)

_fsa_mod = sys.modules["jaxselect.anneal.fsa"]
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def correlated_float32(seed: int, n: int, m: int, rho: float = 0.9, block: int = 8192) -> np.ndarray:
    """Σ_ij = rho^|i−j| Gaussian design generated in float32 row blocks (AR(1) along columns)."""
    rng = np.random.default_rng(seed)
    X = np.empty((n, m), np.float32)
    s = np.float32(np.sqrt(1 - rho * rho))
    for r0 in range(0, n, block):
        z = rng.standard_normal((min(block, n - r0), m), dtype=np.float32)
        z[:, 0] /= s  # stationary start: x_0 = z_0
        X[r0 : r0 + len(z)] = lfilter([s], [1.0, -rho], z, axis=1).astype(np.float32)
    return X


def regression_data(seed, n, m, k):
    X = correlated_float32(seed, n, m)
    true = np.arange(1, k + 1) * 10 - 1
    y = X[:, true].sum(1) + np.random.default_rng(seed + 1000).standard_normal(n).astype(np.float32)
    return X, y.astype(np.float32), true


def timed(fn, repeat=3):
    times = []
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        jax.block_until_ready(out)
        times.append(time.perf_counter() - t)
    return float(np.median(times)), out


def masked_full_width(X, y, k, lr, n_iter=500, mu=300.0):
    """Algorithm 1 as one masked lax.scan of ``fsa_step`` over all M columns (what compaction replaces)."""
    problem = fsa_prepare(X, y)
    state = fsa_init(problem, k, n_iter=n_iter, mu=mu, lr=lr)

    @jax.jit
    def run(problem, state):
        return jax.lax.fori_loop(0, n_iter, lambda i, s: fsa_step(problem, s), state).active  # static: a scan

    def call():
        return run(problem, state)

    return call


def _proc_status_bytes(field: str) -> int:
    """A memory field of /proc/self/status in bytes (-1 where there is none)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return -1


def peak_rss_bytes() -> int:
    return _proc_status_bytes("VmHWM")


def current_rss_bytes() -> int:
    return _proc_status_bytes("VmRSS")


def reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def part1(n, m, k, seeds):
    from abess.linear import LinearRegression

    rows = []
    for seed in range(seeds):
        X, y, true = regression_data(seed, n, m, k)
        Xj, yj = jnp.asarray(X), jnp.asarray(y)
        t0 = time.perf_counter()
        res = fsa(Xj, yj, k)
        jax.block_until_ready(res)
        first = time.perf_counter() - t0
        t_fsa, res = timed(lambda: fsa(Xj, yj, k))
        lr = float(res.step_size[0])
        t_fix, res_fix = timed(lambda: fsa(Xj, yj, k, lr=lr))
        masked = masked_full_width(Xj, yj, k, lr)
        t_mask, active = timed(masked, repeat=2)
        same = np.flatnonzero(np.asarray(active)).tolist() == np.asarray(res_fix.support).tolist()
        t_ab, model = timed(lambda: LinearRegression(support_size=[k]).fit(X, y), repeat=2)
        det = lambda sup: len(set(np.asarray(sup).tolist()) & set(true.tolist()))  # noqa: E731
        rows.append(
            dict(
                seed=seed,
                fsa_s=t_fsa,
                fsa_first_call_s=first,
                fsa_fixed_lr_s=t_fix,
                masked_scan_s=t_mask,
                abess_s=t_ab,
                masked_same_support=bool(same),
                fsa_found=det(res.support),
                abess_found=det(np.flatnonzero(model.coef_)),
                k=k,
            )
        )
        print(
            f"  seed {seed}: fsa {t_fsa:.3f}s (first call {first:.1f}s)  fixed-lr {t_fix:.3f}s  masked {t_mask:.3f}s  "
            f"abess {t_ab:.3f}s  found fsa {rows[-1]['fsa_found']}/{k} abess {rows[-1]['abess_found']}/{k}  masked==compacted {same}"
        )
    widths = stage_widths(m, k, _fsa_mod._MIN_DROP)
    stages = plan_stages(m, annealing_schedule(m, k, 500, 300.0), widths)
    summary = dict(
        N=n,
        M=m,
        k=k,
        seeds=seeds,
        fsa_s=float(np.median([r["fsa_s"] for r in rows])),
        fsa_first_call_s=float(rows[0]["fsa_first_call_s"]),  # includes compilation
        fsa_fixed_lr_s=float(np.median([r["fsa_fixed_lr_s"] for r in rows])),
        masked_scan_s=float(np.median([r["masked_scan_s"] for r in rows])),
        abess_s=float(np.median([r["abess_s"] for r in rows])),
        fsa_DR=100.0 * np.mean([r["fsa_found"] == k for r in rows]),
        abess_DR=100.0 * np.mean([r["abess_found"] == k for r in rows]),
        masked_same_support=all(r["masked_same_support"] for r in rows),
        stage_widths=[s.width for s in stages],
        stage_lengths=[s.length for s in stages],
        schedule_area=schedule_area(m, annealing_schedule(m, k, 500, 300.0)),
        masked_area=500 * m,
        runs=rows,
    )
    summary["speedup_vs_masked"] = summary["masked_scan_s"] / summary["fsa_s"]
    summary["speedup_vs_masked_same_lr"] = summary["masked_scan_s"] / summary["fsa_fixed_lr_s"]
    summary["speedup_vs_abess"] = summary["abess_s"] / summary["fsa_s"]
    return summary


def part2(n, m, k):
    X, y, true = regression_data(7, n, m, k)
    x_bytes = X.nbytes
    Xj = jax.device_put(X)
    yj = jax.device_put(y)
    del X
    jax.block_until_ready(Xj)
    # read bandwidth: one pass over X, as the solver reads it (a matrix-vector product)
    matvec = jax.jit(lambda a, w: a @ w)
    w = jnp.ones((m,), Xj.dtype)
    matvec(Xj, w).block_until_ready()
    t_pass, _ = timed(lambda: matvec(Xj, w), repeat=3)
    base = current_rss_bytes()
    can_reset = reset_peak_rss()
    t0 = time.perf_counter()
    res = fsa(Xj, yj, k)
    jax.block_until_ready(res)
    first = time.perf_counter() - t0
    peak_first = peak_rss_bytes() if can_reset else -1
    reset_peak_rss()
    t_warm, res = timed(lambda: fsa(Xj, yj, k), repeat=2)
    peak_warm = peak_rss_bytes() if can_reset else -1
    sched = annealing_schedule(m, k, 500, 300.0)
    stages = plan_stages(m, sched, stage_widths(m, k, _fsa_mod._MIN_DROP))
    # columns read per iteration: 2 passes (scores + gradient) for direct stages; the Gram stages
    # read their columns once; each compaction reads the new width once
    cols_read = sum(
        (2 * s.length * s.width if s.width >= s.length else 2 * s.width) + s.width for s in stages if s.length
    )
    floor = cols_read / m * t_pass
    found = len(set(np.asarray(res.support).tolist()) & set(true.tolist()))
    dev = device_memory()  # accelerators: the allocator's peak, X included (None on CPU)
    return dict(
        device_peak_bytes=dev["peak_bytes_in_use"] if dev else None,
        device_peak_over_x=dev["peak_bytes_in_use"] / x_bytes if dev else None,
        N=n,
        M=m,
        k=k,
        x_bytes=x_bytes,
        fsa_first_call_s=first,
        fsa_s=t_warm,
        one_pass_s=t_pass,
        read_bandwidth_GBs=x_bytes / t_pass / 1e9,
        bandwidth_floor_s=floor,
        time_over_floor=t_warm / floor,
        rss_before_fsa=base,
        peak_rss_first_call=peak_first,
        peak_rss_warm=peak_warm,
        peak_over_x_first=peak_first / x_bytes if peak_first > 0 else None,
        peak_over_x_warm=peak_warm / x_bytes if peak_warm > 0 else None,
        extra_over_x_warm=(peak_warm - base) / x_bytes if peak_warm > 0 else None,
        found=found,
        stage_widths=[s.width for s in stages],
    )


def part3(n, m, k, repeat=3):
    """One compiled run vs the masked scan on the same float32 numpy input; compile counts of repeat calls."""
    X, y, true = regression_data(11, n, m, k)
    t0 = time.perf_counter()
    res = fsa(X, y, k)
    jax.block_until_ready(res)
    first = time.perf_counter() - t0
    t_fsa, res = timed(lambda: fsa(X, y, k), repeat=repeat)  # numpy in: includes the host -> device copy
    lr = float(res.step_size[0])
    t_fix, res_fix = timed(lambda: fsa(X, y, k, lr=lr), repeat=repeat)
    Xj, yj = jax.device_put(X), jax.device_put(y)
    t_dev, _ = timed(lambda: fsa(Xj, yj, k), repeat=repeat)
    masked = masked_full_width(X, y, k, lr)
    t0 = time.perf_counter()
    active = jax.block_until_ready(masked())
    masked_first = time.perf_counter() - t0
    t_mask, active = timed(masked, repeat=2)
    same = np.flatnonzero(np.asarray(active)).tolist() == np.asarray(res_fix.support).tolist()
    compiles = {}
    for name, call in (
        ("mu_only", lambda: fsa(X, y, k, mu=200.0)),
        ("lr_only", lambda: fsa(X, y, k, lr=0.5 * lr)),
        ("lr_only_again", lambda: fsa(X, y, k, lr=0.25 * lr)),
        ("l2_only", lambda: fsa(X, y, k, l2=1e-3)),
        ("k_within_bucket", lambda: fsa(X, y, k + 1)),
        ("k_other_bucket", lambda: fsa(X, y, k + 5)),
    ):
        with count_compiles() as c:
            jax.block_until_ready(call())
        compiles[name] = c[0]
    sched = annealing_schedule(m, k, 500, 300.0)
    widths = stage_widths(m, k, _fsa_mod._MIN_DROP)
    out = dict(
        N=n,
        M=m,
        k=k,
        input="numpy float32",
        fsa_s=t_fsa,
        fsa_first_call_s=first,
        fsa_fixed_lr_s=t_fix,
        fsa_device_input_s=t_dev,
        masked_scan_s=t_mask,
        masked_first_call_s=masked_first,
        masked_same_support=bool(same),
        speedup_vs_masked=t_mask / t_fsa,
        speedup_vs_masked_same_lr=t_mask / t_fix,
        speedup_vs_masked_device_input=t_mask / t_dev,
        found=len(set(np.asarray(res.support).tolist()) & set(true.tolist())),
        compiles_on_repeat=compiles,
        stage_widths=list(widths),
        stage_lengths=[st.length for st in plan_stages(m, sched, widths)],
        schedule_area=schedule_area(m, sched),
        masked_area=500 * m,
    )
    print(
        f"  fsa {t_fsa:.3f}s (numpy in; first call {first:.1f}s)  fixed-lr {t_fix:.3f}s  device in {t_dev:.3f}s  "
        f"masked scan {t_mask:.2f}s -> {out['speedup_vs_masked']:.1f}x "
        f"(same lr {out['speedup_vs_masked_same_lr']:.1f}x); "
        f"masked==compacted {same}; found {out['found']}/{k}"
    )
    print(f"  compilations on a repeat call: {compiles}; stages {out['stage_widths']} x {out['stage_lengths']}")
    return out


def memory_child(n, kind, cache_dir, m=2000, k=20):
    """One measurement of part 4 in a fresh process: the peak RSS of one ``fsa`` call above what
    was resident once X was built (VmHWM reset before the call), with the XLA programs loaded from
    (or written to) the persistent compilation cache ``cache_dir``."""
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    X = correlated_float32(11, n, m)
    labels = (X[:, 9] - X[:, 99] + 0.5 * X[:, 999] > 0).astype(np.int32)
    if kind == "device":
        X = jax.block_until_ready(jax.device_put(X))
    before = current_rss_bytes()
    if not reset_peak_rss():
        print(json.dumps(None))
        return
    t = time.perf_counter()
    jax.block_until_ready(fsa(X, labels, k, loss="logistic"))
    print(json.dumps(dict(extra=peak_rss_bytes() - before, seconds=time.perf_counter() - t, x_bytes=n * m * 4)))


def part4(n, m=2000, k=20):
    """Peak RSS of ``fsa(X, y, k, loss="logistic")`` above the resident memory with X built, / X,
    each call in a fresh process: X a numpy array (copied to the device unless it is 64-byte
    aligned, which a fresh numpy allocation is not) and X already a device ``jax.Array`` (the
    call's own working memory); first with compilation, then with the programs from the
    persistent compilation cache (the memory of the run itself)."""
    import subprocess
    import tempfile

    out = dict(N=n, M=m, k=k, loss="logistic", x_bytes=n * m * 4)
    for kind in ("numpy", "device"):
        with tempfile.TemporaryDirectory() as cache:  # one per kind: its first call compiles
            for when in ("compiling", "cached"):
                cmd = [sys.executable, os.path.abspath(__file__), "--memory-child", kind]
                cmd += ["--memory-rows", str(n), "--cache", cache]
                line = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
                res = json.loads(line)
                if res is None:
                    return None
                out[f"{kind}_{when}_extra_over_x"] = res["extra"] / res["x_bytes"]
                out[f"{kind}_{when}_s"] = res["seconds"]
        print(
            f"  X {kind}: peak RSS above the resident X {out[f'{kind}_compiling_extra_over_x']:.2f}x X with "
            f"compilation, {out[f'{kind}_cached_extra_over_x']:.2f}x X with the programs cached "
            f"({out[f'{kind}_cached_s']:.1f}s)"
        )
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, finishes in well under a minute")
    ap.add_argument("--skip-large", action="store_true", help="skip the N=100 000 x M=10 000 run")
    ap.add_argument(
        "--only-large", action="store_true", help="only the N=100 000 x M=10 000 run (merged into the JSON)"
    )
    ap.add_argument(
        "--large-rows",
        type=int,
        default=100_000,
        help="N of the large run (1 000 000 on an accelerator with ≥ 80 GB: X is 40 GB)",
    )
    ap.add_argument(
        "--compiled-run", action="store_true", help="only part 3 (one compiled run vs masked scan, compile counts)"
    )
    ap.add_argument("--memory", action="store_true", help="only part 4 (host memory of an in-memory call)")
    ap.add_argument("--memory-rows", type=int, default=200_000, help="N of part 4 (M = 2 000)")
    ap.add_argument("--memory-child", choices=("numpy", "device"), help=argparse.SUPPRESS)
    ap.add_argument("--cache", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_child:
        memory_child(args.memory_rows, args.memory_child, args.cache)
        return
    if args.memory:
        print(f"jax {jax.__version__} on {jax.devices()[0].platform} ({os.cpu_count()} cores, {platform.machine()})")
        print(f"[4] N={args.memory_rows} M=2000 k=20 logistic, numpy float32: peak RSS of fsa")
        out = dict(part4=part4(args.memory_rows), environment=environment())
        path = os.path.join(RESULTS, "bench_fsa_memory.json")
        os.makedirs(RESULTS, exist_ok=True)
        with open(path, "w") as f:
            json.dump(out, f, indent=2, default=float)
        print(f"\nwrote {path}")
        return
    if args.compiled_run:
        p3 = dict(n=5000, m=400, k=30) if args.quick else dict(n=50_000, m=2000, k=30)
        print(f"jax {jax.__version__} on {jax.devices()[0].platform} ({os.cpu_count()} cores, {platform.machine()})")
        print(f"[3] N={p3['n']} M={p3['m']} k={p3['k']} float32 numpy: one compiled run vs masked scan")
        out = dict(part3=part3(**p3), quick=args.quick, environment=environment())
        path = os.path.join(RESULTS, "bench_fsa_run_quick.json" if args.quick else "bench_fsa_run.json")
        os.makedirs(RESULTS, exist_ok=True)
        with open(path, "w") as f:
            json.dump(out, f, indent=2, default=float)
        print(f"\nwrote {path}")
        return
    if args.quick:
        p1 = dict(n=3000, m=300, k=10, seeds=1)
        p2 = dict(n=3000, m=300, k=10)  # same shapes as part 1: a smoke test of the measurement
    else:
        p1 = dict(n=10000, m=1000, k=30, seeds=3)
        p2 = dict(n=args.large_rows, m=10000, k=30)
    print(f"jax {jax.__version__} on {jax.devices()[0].platform} ({os.cpu_count()} cores, {platform.machine()})")
    path = os.path.join(RESULTS, "bench_fsa_quick.json" if args.quick else "bench_fsa.json")
    if args.only_large:
        with open(path) as f:
            out = json.load(f)
        s2 = part2(**p2)
        out["part2"] = s2
        print_part2(s2, p2)
        with open(path, "w") as f:
            json.dump(out, f, indent=2, default=float)
        print(f"\nwrote {path}")
        return
    print(f"[1] N={p1['n']} M={p1['m']} k={p1['k']}: fsa vs masked full-width scan vs abess")
    s1 = part1(**p1)
    out = dict(
        part1=s1, quick=args.quick, jax=jax.__version__, platform=jax.devices()[0].platform, environment=environment()
    )
    print()
    print(f"{'method':<28}{'time (s)':>10}{'ratio':>10}{'DR %':>8}")
    print(f"{'fsa (compacted, default)':<28}{s1['fsa_s']:>10.3f}{1.0:>10.1f}{s1['fsa_DR']:>8.0f}")
    print(
        f"{'fsa (compacted, fixed lr)':<28}{s1['fsa_fixed_lr_s']:>10.3f}{s1['fsa_fixed_lr_s'] / s1['fsa_s']:>10.1f}{'':>8}"
    )
    print(f"{'masked full-width scan':<28}{s1['masked_scan_s']:>10.3f}{s1['speedup_vs_masked']:>10.1f}{'':>8}")
    print(f"{'abess LinearRegression':<28}{s1['abess_s']:>10.3f}{s1['speedup_vs_abess']:>10.1f}{s1['abess_DR']:>8.0f}")
    print(
        f"first call (compile + run): {s1['fsa_first_call_s']:.1f}s; masked scan gives the same support as "
        f"compacted at equal step: {s1['masked_same_support']}; stages {s1['stage_widths']}"
    )
    if not args.skip_large:
        print(f"\n[2] N={p2['n']} M={p2['m']} k={p2['k']} float32")
        s2 = part2(**p2)
        out["part2"] = s2
        print_part2(s2, p2)
    elif os.path.exists(path):  # keep the recorded large run (--only-large re-measures it)
        with open(path) as f:
            previous = json.load(f)
        if "part2" in previous:
            out["part2"] = previous["part2"]
    os.makedirs(RESULTS, exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=2, default=float)
    print(f"\nwrote {path}")


def print_part2(s2, p2):
    print(
        f"X = {s2['x_bytes'] / 2**30:.2f} GiB; fsa warm {s2['fsa_s']:.2f}s (first call {s2['fsa_first_call_s']:.1f}s); "
        f"one pass over X {s2['one_pass_s']:.3f}s ({s2['read_bandwidth_GBs']:.1f} GB/s); bandwidth floor "
        f"{s2['bandwidth_floor_s']:.2f}s -> {s2['time_over_floor']:.1f}x the floor"
    )
    if s2["device_peak_over_x"] is not None:
        print(f"device memory peak: {s2['device_peak_over_x']:.2f}x X ({s2['device_peak_bytes'] / 2**30:.2f} GiB)")
    if s2["peak_over_x_warm"] is not None:
        print(
            f"peak RSS: {s2['peak_over_x_first']:.2f}x X (first call), {s2['peak_over_x_warm']:.2f}x X (warm); "
            f"extra over the resident X during fsa: {s2['extra_over_x_warm']:.2f}x X; found {s2['found']}/{p2['k']}"
        )


if __name__ == "__main__":
    main()
