"""Sequencing on sparse X with a million columns: ``prepare`` + ``cs_omp`` / ``cs_fr`` (issue 24).

The lazy Gram mode computes the Gram columns of each chosen feature with one sparse ``u @ X``
product, so the D×D Gram (4 TB at D = 10⁶ in float32) is never formed and memory stays
O(nnz + n + D + k·D). Data: n rows, D columns with power-law popularity, ``nnz_per_row`` stored
entries per row, a target from 20 popular columns plus noise. Reports time (first call with
compilation, and a second call), peak anonymous RSS of the process, the stored bytes of X, and
whether the true columns were found.

Usage: ``python benchmarks/bench_sparse_sequencing.py [--n 100000] [--d 1000000] [--k 100]``;
writes ``benchmarks/results/bench_sparse_sequencing.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jaxselect as js  # noqa: E402
from common import RssSampler, save  # noqa: E402


def make(n: int, d: int, nnz_per_row: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, d + 1) ** 1.1
    popularity /= popularity.sum()
    cols = rng.choice(d, size=(n, nnz_per_row), p=popularity).astype(np.int32)
    data = rng.uniform(0.5, 1.5, size=(n, nnz_per_row)).astype(np.float32)
    X = sp.csr_matrix((data.ravel(), cols.ravel(), np.arange(0, n * nnz_per_row + 1, nnz_per_row)), shape=(n, d))
    X.sum_duplicates()
    true = np.arange(5, 45, 2)  # 20 popular columns
    beta = rng.choice([-1.0, 1.0], size=true.size) * rng.uniform(1.0, 2.0, size=true.size)
    y = (X[:, true] @ beta + 0.1 * rng.normal(size=n)).astype(np.float32)
    return X, y, set(true.tolist())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--d", type=int, default=1_000_000)
    parser.add_argument("--nnz-per-row", type=int, default=50)
    parser.add_argument("--k", type=int, default=100)
    args = parser.parse_args()
    X, y, true = make(args.n, args.d, args.nnz_per_row)
    x_bytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    print(f"X: {X.shape[0]} x {X.shape[1]}, {X.nnz} stored entries ({x_bytes / 1e6:.0f} MB; dense float32 would be "
          f"{X.shape[0] * X.shape[1] * 4 / 1e9:.0f} GB)", flush=True)
    rows = []
    for name, solver in (("cs_omp", js.cs_omp), ("cs_fr", js.cs_fr)):
        times = []
        for _ in range(2):
            t = time.perf_counter()
            path = solver(js.prepare(X, y, l2=1e-3), k=args.k)
            np.asarray(path.coef)
            times.append(time.perf_counter() - t)
        found = len(true & set(np.asarray(path.order).tolist()))
        rows.append({"solver": name, "first_s": times[0], "second_s": times[1], "true_found": found, "k": args.k})
        print(f"prepare + {name}, k = {args.k}: {times[0]:.1f} s first call, {times[1]:.1f} s second; "
              f"{found}/20 true columns in the order", flush=True)
    peak = RssSampler.read("VmHWM")
    print(f"peak RSS of the process: {peak / 1e9:.2f} GB", flush=True)
    save("bench_sparse_sequencing", {"n": args.n, "d": args.d, "nnz": int(X.nnz), "x_bytes": int(x_bytes),
                                     "rows": rows, "peak_rss_bytes": peak})


if __name__ == "__main__":
    main()
