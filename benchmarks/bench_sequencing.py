"""Speed of CS-G-OMP / CS-G-FR against scikit-learn, and against the Gram-product floors.

Measured in one run on the same data, same dtype for every method (float32 by default, --float64
for double). The headline column times **the call a user makes**: a numpy X in, a path out,
``js.cs_omp(js.prepare(X, y), k=k)`` — for numpy input on a CPU backend ``prepare`` forms the
moments with host BLAS (``syrk``) over row chunks of X, with no device copy of X. Beside it:

* the same call with X already a device ``jax.Array`` (XLA moments kernel);
* the host→device copy of X alone (``jnp.asarray``), which the device-resident column does not pay;
* the two Gram floors: numpy ``X.T @ X`` (host BLAS syrk) and jitted ``X.T @ X`` (XLA's dot);
* scikit-learn ``OrthogonalMatchingPursuit(precompute=True)`` on the same numpy X;
* ``cs_fr`` vs ``cs_omp`` on the same problem, the first (compiling) call, and the overlap of picks.

Goals: numpy-in ≤ 0.7× scikit-learn in float32 (≤ 1.0× in float64), ≤ 1.3× the host Gram
floor, first call ≤ 3 s. Timings are interleaved (one run of every method per round, medians over
rounds) so that a shared machine's load affects all columns alike.

Usage: python benchmarks/bench_sequencing.py [--quick] [--float64] [--large] [--repeat R]
(--large adds n = 1 000 000, for accelerators.)
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

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from common import block, device_memory, environment, save, table, timeit  # noqa: E402


def make_data(n, d, k, dtype, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(dtype)
    w = np.zeros(d, dtype)
    w[rng.choice(d, k, replace=False)] = rng.standard_normal(k)
    y = (X @ w + 0.5 * rng.standard_normal(n)).astype(dtype)
    return X, y


def raw_gram(X):
    """XᵀX alone: one GEMM, the XLA floor of any Gram-based method."""
    return jax.lax.dot_general(X, X, (((0,), (0,)), ((), ())))


def interleaved(fns: dict, repeat: int) -> dict:
    """Median seconds of each ``fn`` over ``repeat`` rounds, one call of every fn per round (after a warm-up)."""
    for fn in fns.values():
        block(fn())
    times = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            block(fn())
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (CI-sized run)")
    parser.add_argument("--float64", action="store_true")
    parser.add_argument("--large", action="store_true", help="also n = 1 000 000 (accelerators)")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    if args.float64:
        jax.config.update("jax_enable_x64", True)
    import jaxselect as js
    from sklearn.linear_model import LinearRegression, OrthogonalMatchingPursuit

    dtype = np.float64 if args.float64 else np.float32
    sizes = [(2000, 100, 20)] if args.quick else [(20_000, 500, 100), (100_000, 500, 250)]
    if args.large:
        sizes.append((1_000_000, 500, 250))
    raw_fn = jax.jit(raw_gram)
    rows = []
    for n, d, k in sizes:
        X, y = make_data(n, d, k, dtype)
        t0 = time.perf_counter()
        block(js.cs_omp(js.prepare(X, y, l2=1e-6), k=k))
        first = time.perf_counter() - t0
        Xj, yj = jnp.asarray(X), jnp.asarray(y)
        problem = js.prepare(X, y, l2=1e-6)
        first_fr, _ = timeit(lambda: js.cs_fr(problem, k=k), repeat=1)
        omp = OrthogonalMatchingPursuit(n_nonzero_coefs=k, precompute=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = interleaved(
                {
                    "ours": lambda: js.cs_omp(js.prepare(X, y, l2=1e-6), k=k),
                    "sklearn": lambda: omp.fit(X, y),
                    "device X": lambda: js.cs_omp(js.prepare(Xj, yj, l2=1e-6), k=k),
                    "copy": lambda: jnp.asarray(X),
                    "syrk": lambda: X.T @ X,
                    "xla gram": lambda: raw_fn(Xj),
                    "prepare": lambda: js.prepare(X, y, l2=1e-6),
                    "cs_omp": lambda: js.cs_omp(problem, k=k),
                    "cs_fr": lambda: js.cs_fr(problem, k=k),
                },
                args.repeat,
            )
        ours = set(np.asarray(js.cs_omp(problem, k=k).order).tolist())
        theirs = set(np.flatnonzero(omp.coef_).tolist())
        rows.append(
            {
                "n": n,
                "D": d,
                "k": k,
                "ours, numpy X s": t["ours"],
                "sklearn OMP s": t["sklearn"],
                "ours, device X s": t["device X"],
                "host→device copy s": t["copy"],
                "BLAS syrk XᵀX s": t["syrk"],
                "XLA XᵀX s": t["xla gram"],
                "vs sklearn": t["ours"] / t["sklearn"],
                "vs syrk floor": t["ours"] / t["syrk"],
                "device X vs sklearn": t["device X"] / t["sklearn"],
                "prepare s": t["prepare"],
                "cs_omp s": t["cs_omp"],
                "cs_fr s": t["cs_fr"],
                "fr/omp total": (t["prepare"] + t["cs_fr"]) / (t["prepare"] + t["cs_omp"]),
                "first call s": first,
                "first cs_fr s": first_fr,
                "same picks": len(ours & theirs) / k,
                "device peak GiB": (device_memory() or {}).get("peak_bytes_in_use", float("nan")) / 2**30,
            }
        )
        print(table(rows[-1:], list(rows[-1].keys())), flush=True)

    # CS-G-FR vs scikit-learn's SequentialFeatureSelector (refits a model per candidate).
    from sklearn.feature_selection import SequentialFeatureSelector

    n, d, k = (500, 30, 5) if args.quick else (2000, 100, 10)
    X, y = make_data(n, d, k, dtype, seed=1)
    sfs = SequentialFeatureSelector(LinearRegression(), n_features_to_select=k, direction="forward", cv=2)
    _, t_sfs = timeit(lambda: sfs.fit(X, y), repeat=1, warmup=1)
    _, t_fr = timeit(lambda: js.cs_fr(js.prepare(X, y, l2=1e-6), k=k))
    fr_set = set(np.asarray(js.cs_fr(js.prepare(X, y, l2=1e-6), k=k).order).tolist())
    sfs_row = {
        "n": n,
        "D": d,
        "k": k,
        "cs_fr s": t_fr,
        "sklearn SFS s": t_sfs,
        "speed-up": t_sfs / t_fr,
        "same picks": len(fr_set & set(np.flatnonzero(sfs.get_support()).tolist())) / k,
    }
    print("\nCS-G-FR vs SequentialFeatureSelector(LinearRegression, cv=2)")
    print(table([sfs_row], list(sfs_row.keys())))

    name = "sequencing_quick" if args.quick else "sequencing"
    if args.float64:
        name += "_f64"
    print(
        "\nsaved",
        save(name, {"dtype": np.dtype(dtype).name, "omp": rows, "sfs": sfs_row}),
    )
    print("environment:", environment())


if __name__ == "__main__":
    main()
