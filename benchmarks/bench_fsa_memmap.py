"""FSA on an ``np.memmap`` larger than memory, against the disk-read floor (issue 25, item 5).

The FSA paper's Figure 1 data (eq. 18, ``js.datasets.equicorrelated``, k* true columns, labels of
eq. 17) is written once to an ``.npy`` file of N × M float32, then

* **floor**: one sequential read of the whole file with its pages evicted first
  (``posix_fadvise(DONTNEED)``), in 64 MiB pieces — what a single pass over X costs from disk;
* **fsa**: ``js.fsa(np.load(path, mmap_mode="r"), y, k, loss="lorenz", max_memory=...)``: the
  column summary pass, the streamed iterations over the shrinking working columns (row blocks of
  the memmap), the gather of the working set once it fits ``max_memory``, the in-memory compiled
  stages and the polish; the file's pages are evicted before it starts as well.

Reported: both times, their ratio (how many whole-file reads FSA costs), the peak anonymous
resident memory (``RssAnon``: a memmap's pages are file-backed and do not count) above the
process's baseline, and the share of the true columns found. With N = 250 000 and M = 40 000 the
file is 40 GB, more than this 24 GB machine's memory:

    python benchmarks/bench_fsa_memmap.py --n 250000 --m 40000 --k 500 --max-memory-gb 4

Small sizes (``--n 20000 --m 4000``) run in a minute. Results go to
``benchmarks/results/bench_fsa_memmap.json``; ``--keep`` keeps the data file for a rerun.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jaxselect as js  # noqa: E402
from common import RssSampler, save  # noqa: E402

PIECE = 1 << 26  # bytes per read of the floor


def write_data(path: str, n: int, m: int, k_true: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Write the eq. (18) design to ``path`` (.npy) in row blocks; returns (y, true columns, seconds)."""
    src = js.datasets.equicorrelated(n, m, n_informative=k_true, seed=seed)
    t = time.perf_counter()
    X = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, m))
    rows = max(1, (1 << 28) // (4 * m))  # 256 MiB of rows per block
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        X[start:stop] = src.materialize(slice(start, stop))
    X.flush()
    del X
    return np.asarray(src.targets()), src.true_features, time.perf_counter() - t


def evict(path: str) -> None:
    """Drop the file's pages from the page cache (clean pages; no root needed)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def read_floor(path: str) -> float:
    """Seconds for one sequential read of the whole file from disk."""
    evict(path)
    buf = bytearray(PIECE)
    t = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass
    return time.perf_counter() - t


def run_fsa(path: str, y, k: int, max_memory: int, n_iter: int):
    evict(path)
    X = np.load(path, mmap_mode="r")
    with RssSampler() as rss:
        base = rss.peak
        t = time.perf_counter()
        res = js.fsa(X, y, k, loss="lorenz", n_iter=n_iter, max_memory=max_memory)
        res.coef.block_until_ready()
        seconds = time.perf_counter() - t
    return res, seconds, rss.peak - base


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--m", type=int, default=4_000)
    p.add_argument("--k", type=int, default=None, help="features to select (default: k* = min(500, M/10))")
    p.add_argument("--n-iter", type=int, default=500)
    p.add_argument("--max-memory-gb", type=float, default=1.0)
    p.add_argument("--path", default=None, help="data file (default: a .npy under $TMPDIR)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep", action="store_true", help="keep the data file (reused when it has the shape)")
    args = p.parse_args(argv)

    k_true = min(500, args.m // 10)
    k = args.k or k_true
    path = args.path or os.path.join(os.environ.get("TMPDIR", "/tmp"), f"fsa_memmap_{args.n}x{args.m}.npy")
    gib = args.n * args.m * 4 / 2**30
    reuse = os.path.exists(path) and np.load(path, mmap_mode="r").shape == (args.n, args.m)
    if reuse:
        src = js.datasets.equicorrelated(args.n, args.m, n_informative=k_true, seed=args.seed)
        y, true_cols, write_s = np.asarray(src.targets()), src.true_features, float("nan")
    else:
        y, true_cols, write_s = write_data(path, args.n, args.m, k_true, args.seed)
    print(f"X: {args.n} x {args.m} float32 = {gib:.1f} GiB in {path} (written in {write_s:.0f} s)")
    try:
        floor = read_floor(path)
        print(f"floor: one read of the file from disk {floor:.1f} s ({gib / floor:.2f} GiB/s)")
        budget = int(args.max_memory_gb * 2**30)
        res, seconds, rss = run_fsa(path, y, k, budget, args.n_iter)
        found = np.isin(true_cols, np.asarray(res.support)).mean()
        print(
            f"fsa (Lorenz, k={k}, max_memory={args.max_memory_gb} GiB): {seconds:.1f} s = {seconds / floor:.1f}x the "
            f"floor; peak RssAnon +{rss / 2**30:.2f} GiB ({rss / (gib * 2**30):.2f}x X); "
            f"{100 * found:.1f} % of the {k_true} true columns; status {int(res.status)}"
        )
        save(
            "bench_fsa_memmap",
            {
                "n": args.n,
                "m": args.m,
                "k": k,
                "n_iter": args.n_iter,
                "x_gib": gib,
                "max_memory_gib": args.max_memory_gb,
                "write_s": write_s,
                "floor_s": floor,
                "fsa_s": seconds,
                "ratio_to_floor": seconds / floor,
                "peak_rss_anon_gib": rss / 2**30,
                "true_found": float(found),
                "status": int(res.status),
            },
        )
    finally:
        if not args.keep:
            os.remove(path)


if __name__ == "__main__":
    main()
