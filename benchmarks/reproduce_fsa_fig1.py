"""Reproduce the FSA paper's Figure 1: Lorenz FSA vs LogitBoost on equicorrelated data (§3.1.3).

Data: eq. (18), ``x_i = α z_i 1_M + ε_i`` (α = 0.5, pairwise correlation 0.2), labels of eq. (17),
``y = 1[Σ_{j≤k*} x_{10j} > 0]``, from :func:`jaxselect.datasets.equicorrelated` (a counter-based
source: nothing is stored, the test rows come from another seed). Paper: M = 10⁵, k = k* = 500,
N ≤ 10⁶, averaged over 10 runs.

Methods (each run in its own subprocess, so its peak memory is its own):

* ``fsa`` — ``js.fsa(X, y, k, loss="lorenz")`` on the materialised X with the library defaults
  (N_iter = 500, μ = 300);
* ``fsa_stream`` (``--stream``) — ``js.fsa(src, None, k, loss="lorenz", max_memory=...)``: FSA
  streams the counter-based source (its fused kernels generate the entries inside the products,
  :meth:`~jaxselect.sources.EquicorrelatedSource.gradient_block`) until the working set fits
  ``--max-memory-gb``; where ``js.fsa`` does not take a source yet the run is recorded as
  "needs the streamed fsa", not as a failure;
* ``logitboost`` — LogitBoost with univariate linear learners, all M fitted each round, the best
  added, k rounds (the paper's LB; ``benchmarks/logitboost.py``); ``lb1`` trains a random 10 % of
  the learners each round (the paper's LB1, which its Figure 1 shows);
* ``hgb`` — scikit-learn's ``HistGradientBoostingClassifier`` with stumps (``max_depth=1``,
  ``max_leaf_nodes=2``, k iterations, no early stopping), the popular peer.

Reported per (method, N): training time (one call, compilation included; data generation not
included), percent of the k* true variables among the selected ones (PCD, §3.1.2; for the boosters
the distinct features of their k learners), test AUC (test set of the training size, capped by
``--max-test``), peak anonymous RSS of the child (``RssAnon`` sampled every 10 ms; ``VmHWM`` too).
The peers run "up to where they fit": a method is skipped, with the reason recorded in the JSON,
where its estimated peak memory exceeds ``--memory-gb`` (default 90 % of MemAvailable) or, with
``--max-seconds``, where a short timing probe (``--probe`` rounds) estimates its k rounds to take
longer.

Usage::

    python benchmarks/reproduce_fsa_fig1.py --n-features 10000 --sizes 10000 30000 --k 100   # minutes
    python benchmarks/reproduce_fsa_fig1.py --sizes 10000 --max-seconds 600 --tag paper_N1e4  # M = 10⁵
    python benchmarks/reproduce_fsa_fig1.py --stream --max-seconds 3600   # the paper's grid, FSA streamed
    python benchmarks/reproduce_fsa_fig1.py --throughput          # generator / fused-kernel speed
    python benchmarks/reproduce_fsa_fig1.py --combine results/fig1_a.json results/fig1_b.json --tag ab

Writes ``benchmarks/results/fig1_<tag>.json`` and a three-panel plot ``fig1_<tag>.png``
(matplotlib, if installed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from common import RssSampler  # noqa: E402

RESULTS = os.path.join(HERE, "results")
METHODS = ("fsa", "fsa_stream", "logitboost", "lb1", "hgb")
LABELS = {
    "fsa": "FSA (Lorenz)", "fsa_stream": "FSA (Lorenz), streamed", "logitboost": "LogitBoost (all learners)",
    "lb1": "LogitBoost (10% learners)", "hgb": "sklearn HGB stumps",
}
#: estimated peak memory of a method, in units of the float32 X (measured on small runs, rounded up;
#: HGB converts X to float64 and bins it)
MEMORY_FACTOR = {"fsa": 3.2, "logitboost": 1.4, "lb1": 1.5, "hgb": 4.0}
#: the streamed FSA's memory beyond its ``max_memory`` (runtime, compiled programs, the test source)
STREAM_OVERHEAD_BYTES = 1 << 30
TEST_SEED_OFFSET = 1_000_003


# ----------------------------------------------------------------------------------------- child
def _auc(y, scores) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, scores))


def _test_scores_linear(test, support, coef, intercept, block_rows: int = 50_000) -> np.ndarray:
    """Scores of a linear model on the test source, generating only the support's columns."""
    out = []
    for start in range(0, test.shape[0], block_rows):
        Xs = np.asarray(test.block(slice(start, start + block_rows), support), dtype=np.float64)
        out.append(Xs @ np.asarray(coef, dtype=np.float64) + intercept)
    return np.concatenate(out)


def _streamed_fsa_unavailable(js) -> str | None:
    """Why ``js.fsa`` cannot stream a source yet (None when it has the ``max_memory`` option)."""
    import inspect

    if "max_memory" not in inspect.signature(js.fsa).parameters:
        return "needs the streamed fsa (js.fsa has no max_memory option yet)"
    return None


#: messages of a ``js.fsa`` that does not take a source (main's 0.3.0: "X must be a numeric array")
_NOT_A_SOURCE = ("must be a numeric array", "numeric", "array-like", "not supported")


def _materialise(args, src):
    """(X, y): numpy float32 X for HGB, one device array (no host copy) for the others."""
    import jax

    X = src.materialize() if args.method == "hgb" else jax.block_until_ready(src.block(slice(None)))
    return X, src.targets()


def _fit(args, method, src, rounds, data=None):
    """Fit ``method`` on ``data`` = (X, y) (materialised here if None; the streamed FSA reads
    ``src``); (selected, model, seconds, extra).

    ``model`` is ``(support, coef, intercept)`` for the linear models, the classifier for HGB.
    """
    import jax
    from logitboost import linear_model, logitboost

    import jaxselect as js

    k, seed = args.k, args.seed
    if args.method == "fsa_stream":
        t0 = time.perf_counter()
        try:
            res = js.fsa(src, None, k, loss="lorenz", n_iter=args.n_iter, max_memory=int(args.max_memory_gb * 2**30))
            jax.block_until_ready(res)
        except (TypeError, ValueError) as err:
            if any(m in str(err) for m in _NOT_A_SOURCE):
                raise _Unavailable(f"needs the streamed fsa ({type(err).__name__}: {err})") from err
            raise
        support = np.asarray(res.support)
        return support, (support, np.asarray(res.coef), float(res.intercept)), time.perf_counter() - t0, {
            "status": int(res.status)
        }
    X, y = _materialise(args, src) if data is None else data
    t0 = time.perf_counter()
    if args.method == "fsa":
        res = jax.block_until_ready(js.fsa(X, y, k, loss="lorenz", n_iter=args.n_iter))
        support = np.asarray(res.support)
        return support, (support, np.asarray(res.coef), float(res.intercept)), time.perf_counter() - t0, {
            "status": int(res.status)
        }
    if args.method in ("logitboost", "lb1"):
        frac = 1.0 if args.method == "logitboost" else 0.1
        res = jax.block_until_ready(logitboost(X, y, rounds, learner_fraction=frac, seed=seed))
        t_fit = time.perf_counter() - t0
        model = linear_model(res)
        return model[0], model, t_fit, {"n_rounds": rounds}
    from sklearn.ensemble import HistGradientBoostingClassifier

    clf = HistGradientBoostingClassifier(
        max_iter=rounds, max_depth=1, max_leaf_nodes=2, learning_rate=args.hgb_learning_rate,
        early_stopping=False, random_state=seed,
    )
    clf.fit(X, y)
    t_fit = time.perf_counter() - t0
    used = set()
    for trees in clf._predictors:  # private, but the only place the split features live
        for tree in trees:
            nodes = tree.nodes
            used.update(int(f) for f in nodes["feature_idx"][~nodes["is_leaf"].astype(bool)])
    return np.asarray(sorted(used), dtype=np.int64), clf, t_fit, {"learning_rate": args.hgb_learning_rate}


class _Unavailable(Exception):
    """The method cannot run here (the reason is recorded, the run is not a failure)."""


def run_child(args) -> dict:
    import jaxselect as js

    N, M, k, seed = args.n, args.n_features, args.k, args.seed
    kstar = args.n_informative or k
    src = js.datasets.equicorrelated(N, M, n_informative=kstar, alpha=args.alpha, seed=seed)
    base = {"method": args.method, "n": N, "n_features": M, "k": k, "n_informative": kstar, "seed": seed}
    if args.method == "fsa_stream":
        reason = _streamed_fsa_unavailable(js)
        if reason:
            return {**base, "unavailable": reason}
    if args.probe_rounds:
        return {**base, **_probe(args, src)}
    test = js.datasets.equicorrelated(
        min(N, args.max_test), M, n_informative=kstar, alpha=args.alpha, seed=seed + TEST_SEED_OFFSET
    )
    rss_start = RssSampler.read()
    try:
        with RssSampler() as sampler:
            t0 = time.perf_counter()
            selected, model, t_fit, extra = _fit(args, args.method, src, k)
            t_total = time.perf_counter() - t0
            rss_fit = sampler.peak
    except _Unavailable as why:
        return {**base, "unavailable": str(why)}
    if args.warm:  # a second, identical fit: the compiled programs are cached (FSA, LogitBoost)
        extra["time_fit_warm_s"] = _fit(args, args.method, src, k)[2]
    # test AUC (outside the measured peak: the linear models need only their columns; HGB
    # predicts on full-width row blocks)
    y_test = test.targets()
    if args.method == "hgb":
        rows = max(1, (1 << 27) // (M * 4))
        scores = np.concatenate(
            [model.decision_function(test.materialize(slice(s, s + rows))) for s in range(0, test.shape[0], rows)]
        )
    else:
        scores = _test_scores_linear(test, *model)
    true = set(src.true_features.tolist())
    return {
        **base,
        "time_fit_s": t_fit,
        "time_data_s": t_total - t_fit,
        "pcd": 100.0 * len(true.intersection(selected.tolist())) / max(1, kstar),
        "n_selected": int(len(selected)),
        "auc": _auc(y_test, scores),
        "n_test": int(test.shape[0]),
        "x_bytes": src.nbytes,
        "rss_anon_start": rss_start,
        "peak_rss_anon": rss_fit,
        "vm_hwm": RssSampler.read("VmHWM"),
        **extra,
    }


def _probe(args, src) -> dict:
    """Time a booster with a few rounds to estimate its full run of k rounds.

    Fits of ``r`` and ``2r`` rounds (``--probe r``), each twice (LogitBoost compiles once per
    round count; the second call is the steady state): per round = (T₂ᵣ − Tᵣ)/r and
    estimate = compilation (first minus second call) + Tᵣ + (k − r)·per round. The parent compares
    the estimate with ``--max-seconds``.
    """
    r = args.probe_rounds
    data = _materialise(args, src)
    first = _fit(args, args.method, src, r, data)[2]
    t1 = _fit(args, args.method, src, r, data)[2]
    _fit(args, args.method, src, 2 * r, data)
    t2 = _fit(args, args.method, src, 2 * r, data)[2]
    per_round = max(t2 - t1, 0.0) / r
    compile_s = max(first - t1, 0.0)
    return {"probe_rounds": [r, 2 * r], "probe_times_s": [first, t1, t2], "per_round_s": per_round,
            "fixed_s": compile_s + max(t1 - r * per_round, 0.0),
            "estimate_s": compile_s + t1 + (args.k - r) * per_round}


# ---------------------------------------------------------------------------------------- parent
def _budget_bytes(memory_gb: float | None) -> int:
    with open("/proc/meminfo") as f:
        info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f}
    limit = int(0.9 * info["MemAvailable"])
    return min(limit, int(memory_gb * 2**30)) if memory_gb else limit


def _child_cmd(args, method, N, seed, probe=0):
    cmd = [
        sys.executable, os.path.abspath(__file__), "--child", method, "--n", str(N),
        "--n-features", str(args.n_features), "--k", str(args.k), "--seed", str(seed),
        "--alpha", str(args.alpha), "--n-iter", str(args.n_iter), "--max-test", str(args.max_test),
        "--hgb-learning-rate", str(args.hgb_learning_rate), "--max-memory-gb", str(args.max_memory_gb),
    ]
    if probe:
        cmd += ["--probe-rounds", str(probe)]
    elif args.warm:
        cmd += ["--warm"]
    if args.n_informative:
        cmd += ["--n-informative", str(args.n_informative)]
    return cmd


def _run_child(args, cmd, what):
    """(result dict or None, failure dict or None) of one child process."""
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        print(f"{what}: timed out after {args.timeout} s", flush=True)
        return None, {"reason": f"timed out after {args.timeout:.0f} s"}
    if proc.returncode != 0:
        print(f"{what} failed:\n{proc.stderr[-3000:]}", flush=True)
        return None, {"reason": "failed", "error": proc.stderr[-1000:]}
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row["wall_child_s"] = time.perf_counter() - t0
    return row, None


def _memory_need(method, x_bytes, args) -> float:
    if method == "fsa_stream":  # its budget plus the runtime, whatever N·M is
        return args.max_memory_gb * 2**30 + STREAM_OVERHEAD_BYTES
    return MEMORY_FACTOR[method] * x_bytes


def run_parent(args) -> None:
    budget = _budget_bytes(args.memory_gb)
    methods = [("fsa_stream" if (m == "fsa" and args.stream) else m) for m in args.methods]
    rows, skipped = [], []
    for N in args.sizes:
        x_bytes = N * args.n_features * 4
        for method in methods:
            need = _memory_need(method, x_bytes, args)
            if need > budget:
                reason = f"needs ~{need / 2**30:.1f} GiB > memory budget {budget / 2**30:.1f} GiB"
                skipped.append({"method": method, "n": N, "reason": reason})
                print(f"skip {method} at N={N}: {reason}", flush=True)
                continue
            if args.max_seconds and args.probe and method in ("logitboost", "lb1", "hgb"):
                probe, fail = _run_child(args, _child_cmd(args, method, N, 0, probe=args.probe), f"probe {method} N={N}")
                if fail:
                    skipped.append({"method": method, "n": N, **fail})
                    continue
                if probe["estimate_s"] > args.max_seconds:
                    reason = (
                        f"estimated {probe['estimate_s']:.0f} s ({probe['fixed_s']:.0f} s + {args.k} rounds × "
                        f"{probe['per_round_s']:.2f} s, probed with {probe['probe_rounds']} rounds) > "
                        f"--max-seconds {args.max_seconds:.0f}"
                    )
                    skipped.append({"method": method, "n": N, "reason": reason, "probe": probe})
                    print(f"skip {method} at N={N}: {reason}", flush=True)
                    continue
            for seed in range(args.seeds):
                row, fail = _run_child(args, _child_cmd(args, method, N, seed), f"{method} N={N} seed={seed}")
                if fail:
                    skipped.append({"method": method, "n": N, **fail})
                    continue
                if "unavailable" in row:
                    skipped.append({"method": method, "n": N, "reason": row["unavailable"]})
                    print(f"skip {method} at N={N}: {row['unavailable']}", flush=True)
                    break
                rows.append(row)
                print(
                    f"{method:10s} N={N:>8d} seed={seed}: fit {row['time_fit_s']:.1f} s, PCD {row['pcd']:.1f}%, "
                    f"AUC {row['auc']:.4f}, peak RSS {row['peak_rss_anon'] / 2**30:.2f} GiB (X {row['x_bytes'] / 2**30:.2f} GiB)",
                    flush=True,
                )
    report(args, rows, skipped, budget)


def combine(args) -> None:
    """Merge the runs of earlier result files (e.g. one per size) into one table, JSON and plot."""
    rows, skipped = [], []
    for path in args.combine:
        with open(path) as f:
            payload = json.load(f)
        rows += payload["runs"]
        skipped += payload["skipped"]
        budget = payload["memory_budget_bytes"]
        for key in ("n_features", "k", "alpha", "n_iter", "hgb_learning_rate"):  # the runs' settings
            setattr(args, key, payload["config"][key])
    ran = {(r["method"], r["n"]) for r in rows}  # a skip superseded by a run of another file goes
    skipped = [s for s in skipped if (s["method"], s["n"]) not in ran]
    report(args, sorted(rows, key=lambda r: (r["n"], METHODS.index(r["method"]))), skipped, budget, sources=args.combine)


def report(args, rows, skipped, budget, sources=None) -> None:
    from common import environment, table

    summary = _summarise(rows)
    warm = any("time_warm_s" in r for r in summary)
    cols = ["method", "n", "runs", "time_fit_s"] + (["time_warm_s"] if warm else []) + [
        "pcd", "auc", "peak_rss_gib", "peak_over_x", "extra_over_x"]
    print()
    print(table(summary, cols) if summary else "no runs")
    for skip in skipped:
        print(f"skipped {skip['method']} at N={skip['n']}: {skip.get('reason', skip)}")
    ratios = _ratios(summary)
    if ratios:
        print()
        print(table(ratios, ["n", "method", "time_over_fsa"] + (["warm_time_over_fsa"] if warm else [])))
    tag = args.tag or (f"M{args.n_features}_k{args.k}" + ("_paper" if args.n_features == 100_000 and args.k == 500 else ""))
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f"fig1_{tag}.json")
    payload = {
        "environment": environment(),
        "config": {k: v for k, v in vars(args).items() if k not in ("child", "n", "seed")},
        "memory_budget_bytes": budget,
        "load_average_at_end": os.getloadavg(),
        "summary": summary,
        "time_ratios_over_fsa": ratios,
        "skipped": skipped,
        "combined_from": sources,
        "runs": rows,
    }
    with open(path, "w") as f:
        json.dump(payload, f, indent=2, default=float)
    print(f"\nwrote {path}")
    if summary:
        _plot(summary, os.path.join(RESULTS, f"fig1_{tag}.png"), args)


def _summarise(rows):
    out = []
    for method in METHODS:
        for N in sorted({r["n"] for r in rows if r["method"] == method}):
            rs = [r for r in rows if r["method"] == method and r["n"] == N]
            peak = float(np.max([r["peak_rss_anon"] for r in rs]))
            out.append({
                "method": method,
                "n": N,
                "runs": len(rs),
                "time_fit_s": float(np.mean([r["time_fit_s"] for r in rs])),
                "pcd": float(np.mean([r["pcd"] for r in rs])),
                "auc": float(np.mean([r["auc"] for r in rs])),
                "peak_rss_gib": peak / 2**30,
                "peak_over_x": peak / rs[0]["x_bytes"],
                "extra_over_x": float(np.max([r["peak_rss_anon"] - r["rss_anon_start"] for r in rs])) / rs[0]["x_bytes"],
                **({"time_warm_s": float(np.mean([r["time_fit_warm_s"] for r in rs]))} if "time_fit_warm_s" in rs[0] else {}),
            })
    return out


def _ratios(summary):
    """Each peer's time over FSA's at the same N (the streamed FSA where there is one)."""
    fsa = {r["n"]: r for r in summary if r["method"] == "fsa"}
    fsa.update({r["n"]: r for r in summary if r["method"] == "fsa_stream"})
    out = []
    for r in summary:
        if r["method"] in ("fsa", "fsa_stream") or r["n"] not in fsa:
            continue
        row = {"n": r["n"], "method": r["method"], "time_over_fsa": r["time_fit_s"] / fsa[r["n"]]["time_fit_s"]}
        if "time_warm_s" in r and "time_warm_s" in fsa[r["n"]]:
            row["warm_time_over_fsa"] = r["time_warm_s"] / fsa[r["n"]]["time_warm_s"]
        out.append(row)
    return out


def _plot(summary, path, args) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (the JSON has the numbers)")
        return
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for i, method in enumerate(METHODS):
        rs = [r for r in summary if r["method"] == method]
        if not rs:
            continue
        n, color = [r["n"] for r in rs], f"C{i}"
        for ax, key in zip(axes, ("time_fit_s", "pcd", "auc")):
            ax.plot(n, [r[key] for r in rs], "o-", color=color, label=LABELS[method])
        if all("time_warm_s" in r for r in rs):
            axes[0].plot(n, [r["time_warm_s"] for r in rs], "s--", color=color, alpha=0.6, label=LABELS[method] + ", 2nd call")
    for ax, title in zip(axes, ("training time (s)", "% true variables detected", "test AUC")):
        ax.set_xscale("log")
        ax.set_xlabel("N (observations)")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    axes[0].set_yscale("log")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"equicorrelated data (eq. 18, α={args.alpha}), M={args.n_features}, k={args.k}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


# ------------------------------------------------------------------------------------ throughput
def _best_rates(fns: dict, entries: dict, rounds: int = 5, repeat: int = 2) -> dict:
    """Entries per second of each ``fns[name]()``: best of ``rounds`` interleaved measurements.

    Both per wall second and per CPU second of this process (``time.process_time``: on a shared
    machine the CPU time is the stable measure of the work; XLA runs these kernels on one thread).
    """
    import jax

    for fn in fns.values():  # compile
        jax.block_until_ready(fn())
    best = {name: [0.0, 0.0] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(repeat):
                jax.block_until_ready(fn())
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            best[name][0] = max(best[name][0], entries[name] * repeat / wall)
            best[name][1] = max(best[name][1], entries[name] * repeat / max(cpu, 1e-9))
    return {name: {"wall": r[0], "cpu": r[1]} for name, r in best.items()}


def estimate_paper_run(fused_rate: float, dense_rate: float, max_memory_gib: float = 6.0,
                       n: int = 10**6, m: int = 10**5, k: int = 500, n_iter: int = 500, mu: float = 300.0,
                       moments_rate: float | None = None) -> dict:
    """Time of a streamed Lorenz FSA run from kernel throughputs (entries per second), following
    the library's own plan (:func:`~jaxselect.anneal.stream.stream_fsa`):

    * one streamed pass over all N × M entries for the column moments (``moments_rate``);
    * every stage before the hand-over (:func:`~jaxselect.anneal.stream.memory_stage`) streams:
      its power iterations (6 per stage after the first, whose step comes from a row subsample)
      over the stage width, and each iteration over its active columns rounded up to
      :func:`~jaxselect.anneal.stream.column_bucket`, one fused generation per entry;
    * the working set is generated once (N × width) and the remaining iterations run in memory,
      two products each (``dense_rate`` counts an entry once for both).
    """
    from jaxselect.anneal import run as arun
    from jaxselect.anneal import stream as astream
    from jaxselect.anneal.schedule import annealing_schedule, stage_widths

    schedule = annealing_schedule(m, k, n_iter, mu)
    widths = stage_widths(m, k, 32)
    hand_over = astream.memory_stage(widths, n, 4, int(max_memory_gib * 2**30))
    bounds = arun.stage_bounds(schedule, n_iter, widths)
    active = np.concatenate([[m], schedule[:-1]])  # the active columns of iteration e
    iteration_cols = power_cols = 0
    streamed_iterations = 0
    for i in range(min(hand_over, len(widths))):
        start, end = bounds[i]
        if i > 0:
            power_cols += widths[i] * min(arun._POWER_WARM, (end - start) // 2)
        for e in range(start, end):
            iteration_cols += min(widths[i], astream.column_bucket(int(active[e])))
            streamed_iterations += 1
    fit_width = widths[hand_over] if hand_over < len(widths) else 0
    in_memory = active[bounds[hand_over][0]:n_iter] if hand_over < len(widths) else active[:0]
    moments_entries = float(n) * m
    streamed_entries = float(n) * (iteration_cols + power_cols + fit_width)
    streamed_s = streamed_entries / fused_rate + moments_entries / (moments_rate or fused_rate)
    in_memory_s = float(n) * in_memory.sum() / dense_rate
    return {
        "n": n, "m": m, "k": k, "max_memory_gib": max_memory_gib, "fit_width": int(fit_width),
        "streamed_iterations": streamed_iterations, "iteration_entries": float(n) * iteration_cols,
        "power_entries": float(n) * power_cols, "moments_entries": moments_entries,
        "streamed_entries": streamed_entries + moments_entries,
        "in_memory_iterations": int(in_memory.size), "in_memory_entries": float(n) * in_memory.sum(),
        "fused_entries_per_s": fused_rate, "dense_entries_per_s": dense_rate,
        "streamed_s": streamed_s, "in_memory_s": in_memory_s, "total_s": streamed_s + in_memory_s,
    }


def run_throughput(args) -> None:
    """Entries/s of the generator and its fused kernels, against numpy's normals in the same run."""
    import jax
    import jax.numpy as jnp
    from common import environment

    import jaxselect as js
    from jaxselect import sources

    n_rows, n_cols = 2048, 16384  # a working set of 16 384 columns (a middle FSA stage)
    src = js.datasets.equicorrelated(10**6, 10**5, n_informative=500)
    rng = np.random.default_rng(0)
    cols = np.sort(rng.choice(10**5, n_cols, replace=False)).astype(np.int32)
    v = rng.standard_normal(n_cols).astype(np.float32)
    u = rng.standard_normal(n_rows).astype(np.float32)
    every = np.arange(10**5, dtype=np.int32)  # the first stages: all M = 10⁵ columns, 256 rows
    v_all = rng.standard_normal(10**5).astype(np.float32) * 1e-3

    def logistic_weights(s, rows):  # a gradient's pointwise weights, as FSA's would be
        return jax.nn.sigmoid(s) - (rows % 2).astype(s.dtype)

    def numpy_normals():
        return np.random.default_rng(0).standard_normal((n_rows, n_cols), dtype=np.float32)

    keys, alpha = jnp.asarray(src.keys), jnp.asarray(src.alpha, jnp.float32)
    Xd = jax.block_until_ready(src.block(slice(0, n_rows), cols))  # a dense working set in memory
    vd, ud = jnp.asarray(v), jnp.asarray(u)
    dense = jax.jit(lambda X, v, u: (X @ v, u @ X))
    plain = sources._jitted("gradient", False)  # the same kernel with XLA's default vector width
    start = jnp.int32(123_456)
    fns = {
        "numpy_standard_normal": numpy_normals,
        "jax_random_normal": lambda: jax.random.normal(jax.random.key(0), (n_rows, n_cols)),
        "block": lambda: src.block(slice(123_456, 123_456 + n_rows), cols),
        "matvec_block": lambda: src.matvec_block(123_456, n_rows, cols, v),
        "rmatvec_block": lambda: src.rmatvec_block(123_456, n_rows, cols, u),
        "gradient_block": lambda: src.gradient_block(123_456, n_rows, cols, v, logistic_weights),
        "gradient_block_default_vector_width": lambda: plain(
            start, jnp.int32(10**6), jnp.asarray(cols), jnp.asarray(v), keys, alpha,
            jax.tree_util.Partial(logistic_weights), n_rows=n_rows,
        ),
        "gradient_block_all_columns": lambda: src.gradient_block(7, 256, every, v_all, logistic_weights),
        "moments_block": lambda: src.moments_block(123_456, n_rows, cols),
        "dense_matvec_rmatvec": lambda: dense(Xd, vd, ud),  # the in-memory stages' two products
    }
    entries = {name: n_rows * n_cols for name in fns}
    entries["gradient_block_all_columns"] = 256 * 10**5
    rates = _best_rates(fns, entries, rounds=args.rounds)
    ref = rates["numpy_standard_normal"]
    print(f"{'kernel':40s} {'entries/s (wall)':>17s} {'entries/s (CPU)':>16s} {'× numpy (CPU)':>14s}")
    for name, r in rates.items():
        print(f"{name:40s} {r['wall']:17.3g} {r['cpu']:16.3g} {r['cpu'] / ref['cpu']:14.1f}")
    estimate = estimate_paper_run(rates["gradient_block"]["wall"], rates["dense_matvec_rmatvec"]["wall"],
                                  moments_rate=rates["moments_block"]["wall"])
    print(
        f"\nN = 10⁶, M = 10⁵, k = 500, max_memory {estimate['max_memory_gib']} GiB: "
        f"{estimate['streamed_iterations']} streamed iterations, {estimate['streamed_entries']:.2e} generated "
        f"entries ≈ {estimate['streamed_s'] / 60:.0f} min; {estimate['in_memory_iterations']} in-memory iterations "
        f"≈ {estimate['in_memory_s'] / 60:.0f} min; total ≈ {estimate['total_s'] / 60:.0f} min (wall rates)"
    )
    out = {
        "environment": environment(),
        "rates": rates,
        "block_shape": [n_rows, n_cols],
        "estimate_n1e6": estimate,
        "load_average": os.getloadavg(),
    }
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, "fig1_throughput.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=2, default=float)
    print(f"wrote {path}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 30_000, 100_000, 300_000, 1_000_000])
    p.add_argument("--n-features", type=int, default=100_000)
    p.add_argument("--k", type=int, default=500, help="features selected / boosting rounds")
    p.add_argument("--n-informative", type=int, default=None, help="k* (default: k)")
    p.add_argument("--alpha", type=float, default=0.5)
    p.add_argument("--seeds", type=int, default=1, help="runs per size (the paper averages 10)")
    p.add_argument("--methods", nargs="+", default=["fsa", "logitboost", "hgb"], choices=METHODS)
    p.add_argument("--n-iter", type=int, default=500, help="FSA's N_iter")
    p.add_argument("--hgb-learning-rate", type=float, default=0.1)
    p.add_argument("--max-test", type=int, default=100_000, help="test rows (the training size up to this)")
    p.add_argument("--memory-gb", type=float, default=None, help="memory budget (default: 90%% of MemAvailable)")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per method run")
    p.add_argument("--warm", action="store_true", help="also time a second call (compiled programs cached)")
    p.add_argument("--stream", action="store_true",
                   help="FSA streams the source (js.fsa(src, None, k, max_memory=...)) instead of materialising X")
    p.add_argument("--max-memory-gb", type=float, default=6.0, help="--stream: FSA's max_memory (GiB)")
    p.add_argument("--max-seconds", type=float, default=None,
                   help="skip a booster whose probed time estimate exceeds this (with --probe)")
    p.add_argument("--probe", type=int, default=3,
                   help="rounds of the boosters' timing probe (fits of r and 2r rounds) when --max-seconds is set")
    p.add_argument("--tag", default=None, help="results file suffix")
    p.add_argument("--throughput", action="store_true", help="measure the generator and its fused products")
    p.add_argument("--rounds", type=int, default=5, help="--throughput: interleaved measurements (best kept)")
    p.add_argument("--combine", nargs="+", metavar="JSON", help="merge earlier fig1_*.json runs into --tag's table and plot")
    p.add_argument("--child", choices=METHODS, help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--probe-rounds", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        args.method = args.child
        print(json.dumps(run_child(args), default=float))
    elif args.throughput:
        run_throughput(args)
    elif args.combine:
        if not args.tag:
            p.error("--combine needs --tag (the name of the merged result)")
        combine(args)
    else:
        run_parent(args)


if __name__ == "__main__":
    main()
