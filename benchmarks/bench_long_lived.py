"""A long-lived process that fits many data shapes: memory mappings and resident memory stay bounded.

Fits pairs of ``FSAClassifier().fit`` and ``GroupSequencingRegressor().fit`` on random shapes (rows
50–5 000, columns 5–400) in one process and records, every 10 pairs, the process's memory mappings
(``/proc/self/maps``; Linux allows 65 530) and its anonymous resident memory (``RssAnon``). The
library's compiled programs live in a bounded least-recently-used cache (``js.set_max_programs``),
so both stop growing once the cache is full. Goal (issue 35): 300 pairs under 20 000 mappings, at
most 600 MB of resident growth after the first 20 pairs, no crash.

Run: ``python benchmarks/bench_long_lived.py [--pairs 300]`` (about 30 minutes on 2 CPU cores);
saves ``results/bench_long_lived.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def maps() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def rss_anon_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=os.path.join(HERE, "results", "bench_long_lived.json"))
    args = parser.parse_args(argv)

    import jaxselect as js
    from jaxselect.sklearn import FSAClassifier, GroupSequencingRegressor

    rng = np.random.default_rng(args.seed)
    rows = []
    t0 = time.perf_counter()
    print(f"{'pairs':>6s} {'maps':>7s} {'RssAnon MB':>10s} {'seconds':>8s}   (cache bound {js.max_programs()} programs)")
    for i in range(1, args.pairs + 1):
        n, d = int(rng.integers(50, 5001)), int(rng.integers(5, 401))
        X = rng.normal(size=(n, d)).astype(np.float32)
        w = np.zeros(d, np.float32)
        w[: min(5, d)] = 1.0
        y = (X @ w + 0.3 * rng.normal(size=n)).astype(np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            FSAClassifier(k=min(10, d)).fit(X, y > 0)
            GroupSequencingRegressor(k=min(10, d)).fit(X, y)
        if i % 10 == 0 or i == 1:
            gc.collect()
            row = {"pairs": i, "maps": maps(), "rss_anon_mb": rss_anon_mb(), "seconds": time.perf_counter() - t0}
            rows.append(row)
            print(f"{i:6d} {row['maps']:7d} {row['rss_anon_mb']:10.0f} {row['seconds']:8.1f}", flush=True)
    after20 = next(r for r in rows if r["pairs"] >= 20)
    summary = {
        "max_maps": max(r["maps"] for r in rows),
        "rss_growth_after_20_mb": rows[-1]["rss_anon_mb"] - after20["rss_anon_mb"],
    }
    summary["under_20000_maps"] = summary["max_maps"] < 20000
    summary["rss_growth_under_600_mb"] = summary["rss_growth_after_20_mb"] <= 600
    print(summary)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"rows": rows, "summary": summary, "max_programs": js.max_programs()}, f, indent=1)
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
