"""Speed of CS-G-OMP / CS-G-FR against scikit-learn, and against the Gram-product floor.

Measured in one run, same dtype for every method (float32 by default, --float64 for double):

* ``prepare + cs_omp`` vs scikit-learn ``OrthogonalMatchingPursuit(precompute=True)`` — goal
  steady state ≤ 1.0× scikit-learn and ≤ 1.3× the Gram product alone (reported against both the
  centred Gram formed naively and the bare XᵀX GEMM); first call (compile) ≤ 3 s;
* ``cs_fr`` vs ``cs_omp`` on the same problem — goal ≤ 2× (the paper reports FR 8–20× slower);
* ``cs_fr`` vs scikit-learn ``SequentialFeatureSelector`` (forward, LinearRegression) on a size it
  can finish.

Usage: python benchmarks/bench_sequencing.py [--quick] [--float64] [--large]
(--large adds n = 1 000 000, for accelerators.)
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from common import device_memory, environment, save, table, timeit  # noqa: E402


def make_data(n, d, k, dtype, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(dtype)
    w = np.zeros(d, dtype)
    w[rng.choice(d, k, replace=False)] = rng.standard_normal(k)
    y = (X @ w + 0.5 * rng.standard_normal(n)).astype(dtype)
    return X, y


def gram_only(X):
    """The centred Gram (X − 1μᵀ)ᵀ(X − 1μᵀ): what prepare needs, formed the obvious way."""
    Xc = X - jnp.mean(X, axis=0)[None, :]
    return jax.lax.dot_general(Xc, Xc, (((0,), (0,)), ((), ())))


def raw_gram(X):
    """XᵀX alone: one GEMM, the floor of any Gram-based method."""
    return jax.lax.dot_general(X, X, (((0,), (0,)), ((), ())))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (CI-sized run)")
    parser.add_argument("--float64", action="store_true")
    parser.add_argument("--large", action="store_true", help="also n = 1 000 000 (accelerators)")
    args = parser.parse_args(argv)
    if args.float64:
        jax.config.update("jax_enable_x64", True)
    import jaxselect as js
    from sklearn.linear_model import LinearRegression, OrthogonalMatchingPursuit

    dtype = np.float64 if args.float64 else np.float32
    sizes = [(2000, 100, 20)] if args.quick else [(20_000, 500, 100), (100_000, 500, 250)]
    if args.large:
        sizes.append((1_000_000, 500, 250))
    gram_fn, raw_fn = jax.jit(gram_only), jax.jit(raw_gram)
    rows = []
    for n, d, k in sizes:
        X, y = make_data(n, d, k, dtype)
        Xj, yj = jnp.asarray(X), jnp.asarray(y)
        prep = lambda: js.prepare(Xj, yj, l2=1e-6)  # noqa: E731
        problem = prep()
        first_omp, t_omp_only = timeit(lambda: js.cs_omp(problem, k=k))
        first_fr, t_fr_only = timeit(lambda: js.cs_fr(problem, k=k))
        _, t_prep = timeit(prep)
        _, t_gram = timeit(lambda: gram_fn(Xj))
        _, t_raw = timeit(lambda: raw_fn(Xj))
        _, t_total = timeit(lambda: js.cs_omp(prep(), k=k))
        omp = OrthogonalMatchingPursuit(n_nonzero_coefs=k, precompute=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, t_sk = timeit(lambda: omp.fit(X, y), warmup=1)
        ours = set(np.asarray(js.cs_omp(problem, k=k).order).tolist())
        theirs = set(np.flatnonzero(omp.coef_).tolist())
        rows.append(
            {
                "n": n, "D": d, "k": k,
                "prepare+omp s": t_total, "sklearn OMP s": t_sk, "gram only s": t_gram, "XᵀX s": t_raw,
                "prepare s": t_prep, "cs_omp s": t_omp_only, "cs_fr s": t_fr_only,
                "vs sklearn": t_total / t_sk, "vs gram": t_total / t_gram, "vs XᵀX": t_total / t_raw,
                "fr/omp steps": t_fr_only / t_omp_only,
                "fr/omp total": (t_prep + t_fr_only) / (t_prep + t_omp_only),
                "first call s": first_omp + first_fr, "first omp s": first_omp,
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
    Xj, yj = jnp.asarray(X), jnp.asarray(y)
    _, t_fr = timeit(lambda: js.cs_fr(js.prepare(Xj, yj, l2=1e-6), k=k))
    fr_set = set(np.asarray(js.cs_fr(js.prepare(Xj, yj, l2=1e-6), k=k).order).tolist())
    sfs_row = {
        "n": n, "D": d, "k": k, "cs_fr s": t_fr, "sklearn SFS s": t_sfs, "speed-up": t_sfs / t_fr,
        "same picks": len(fr_set & set(np.flatnonzero(sfs.get_support()).tolist())) / k,
    }
    print("\nCS-G-FR vs SequentialFeatureSelector(LinearRegression, cv=2)")
    print(table([sfs_row], list(sfs_row.keys())))

    name = "sequencing_quick" if args.quick else "sequencing"
    if args.float64:
        name += "_f64"
    print("\nsaved", save(name, {"dtype": np.dtype(dtype).name, "omp": rows, "sfs": sfs_row}))
    print("environment:", environment())


if __name__ == "__main__":
    main()
