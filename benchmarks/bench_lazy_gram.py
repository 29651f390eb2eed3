"""Lazy Gram columns (``prepare(gram=False)``) against the full Gram and scikit-learn's OMP.

Issue 24, item 3: OMP needs only the Gram columns ``X̃ᵀX̃[:, S]`` of the features it picks, not the
whole D×D Gram. ``prepare(X, y, gram=False)`` keeps X behind a design operator and ``cs_omp`` forms
each chosen feature's column when it is chosen (one ``u @ X`` product per step). Measured here on
the call a user makes, from a numpy float32 X, one run of each method per round (medians over
rounds, interleaved so that a shared machine's load affects every column alike):

* **jaxselect lazy**: ``js.cs_omp(js.prepare(X, y, gram=False), k=k)``;
* **jaxselect full Gram**: ``js.cs_omp(js.prepare(X, y, gram=True), k=k)`` (host ``syrk`` moments);
* **scikit-learn**: ``OrthogonalMatchingPursuit(n_nonzero_coefs=k, precompute=True).fit(X, y)``.

The selected features must be the same set. Goal (issue 24): lazy ≤ 0.5× scikit-learn at
n = 100 000, D = 2 000, k = 100. Results go to ``benchmarks/results/bench_lazy_gram.json``.

Usage: python benchmarks/bench_lazy_gram.py [--n N] [--d D] [--k K] [--repeat R] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jaxselect as js  # noqa: E402
from common import block, save, table  # noqa: E402


def make_data(n, d, k, seed=0):
    """Gaussian X (float32) and y from k of its columns plus noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d), dtype=np.float32)
    w = np.zeros(d, np.float32)
    w[rng.choice(d, k, replace=False)] = rng.uniform(0.5, 2.0, k).astype(np.float32) * rng.choice([-1, 1], k)
    y = (X @ w + 0.5 * rng.standard_normal(n).astype(np.float32)).astype(np.float32)
    return X, y


def run_lazy(X, y, k):
    return js.cs_omp(js.prepare(X, y, gram=False), k=k)


def run_gram(X, y, k):
    return js.cs_omp(js.prepare(X, y, gram=True), k=k)


def run_sklearn(X, y, k):
    from sklearn.linear_model import OrthogonalMatchingPursuit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return OrthogonalMatchingPursuit(n_nonzero_coefs=k, precompute=True).fit(X, y)


def selected(result, k) -> set:
    if hasattr(result, "coef_"):
        return set(np.flatnonzero(result.coef_).tolist())
    return set(int(g) for g in np.asarray(result.order)[:k] if g >= 0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--d", type=int, default=2_000)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=2, help="timed rounds after one warm-up round")
    parser.add_argument("--quick", action="store_true", help="n = 20 000 (a smoke run)")
    args = parser.parse_args(argv)
    n = 20_000 if args.quick else args.n
    d, k = args.d, args.k
    X, y = make_data(n, d, k)
    methods = {
        "jaxselect lazy (gram=False)": lambda: run_lazy(X, y, k),
        "jaxselect full Gram (gram=True)": lambda: run_gram(X, y, k),
        "sklearn OMP precompute=True": lambda: run_sklearn(X, y, k),
    }
    results, first, times = {}, {}, {name: [] for name in methods}
    for name, fn in methods.items():  # warm-up round: compilation, and the selected features
        t0 = time.perf_counter()
        results[name] = block(fn())
        first[name] = time.perf_counter() - t0
    for _ in range(args.repeat):
        for name, fn in methods.items():
            t0 = time.perf_counter()
            block(fn())
            times[name].append(time.perf_counter() - t0)
    med = {name: statistics.median(t) for name, t in times.items()}
    ref = selected(results["sklearn OMP precompute=True"], k)
    base = med["sklearn OMP precompute=True"]
    columns = ["method", "seconds", "first call", "x sklearn", "same picks"]
    rows = [
        dict(zip(columns, [name, med[name], first[name], med[name] / base, f"{len(selected(results[name], k) & ref)}/{k}"]))
        for name in methods
    ]
    print(f"cs_omp from numpy float32, n = {n}, D = {d}, k = {k} (median of {args.repeat} rounds)")
    print(table(rows, columns))
    payload = {
        "n": n,
        "d": d,
        "k": k,
        "dtype": "float32",
        "repeat": args.repeat,
        "seconds": med,
        "first_call_seconds": first,
        "ratio_to_sklearn": {name: med[name] / base for name in methods},
        "same_selection": {name: selected(results[name], k) == ref for name in methods},
    }
    path = save("bench_lazy_gram", payload)
    print(f"saved {path}")
    return payload


if __name__ == "__main__":
    main()
