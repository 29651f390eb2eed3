"""Benchmark: products of the sparse design operators against scipy CSR and jax's BCOO.

X is n × D with ``nnz_row`` stored entries per row at uniformly random columns (default n = 100 000,
D = 20 000, 100 per row: 10⁷ entries; dense it would be 8 GB in float32, so the dense
``DenseDesign`` is not a contender). Timed, steady state (compile excluded, median of ``--repeat``):

* ``SparseDesign.mv(v)`` / ``.rmv(u)`` (standardised, jitted segment sums; ``(D, k)``/``(k, n)``
  blocks too) — the device operator of ``jaxselect.as_data(csr)``;
* ``jax.experimental.sparse.BCOO`` ``X @ v`` / ``u @ X`` (raw products, no centring), jitted;
* scipy CSR ``X @ v`` / ``X.T @ u`` (raw, host), and ``HostSparseDesign.mv/rmv`` (standardised).

Run:  python benchmarks/bench_sparse_ops.py [--quick] [--n N --d D --nnz-row R --k K]
Writes benchmarks/results/sparse_ops.json.
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from jax.experimental import sparse as jsparse

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jaxselect as js  # noqa: E402
from common import save, table, timeit  # noqa: E402


def make(n: int, d: int, per_row: int, seed: int = 0) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    cols = rng.integers(0, d, size=n * per_row).astype(np.int32)
    data = rng.normal(size=n * per_row).astype(np.float32)
    X = sp.csr_matrix((data, cols, np.arange(0, n * per_row + 1, per_row, dtype=np.int64)), shape=(n, d))
    X.sum_duplicates()
    return X


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=20_000)
    ap.add_argument("--nnz-row", type=int, default=100)
    ap.add_argument("--k", type=int, default=8, help="columns of the block products (D, k) / (k, n)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="n = 20 000, D = 5 000")
    ap.add_argument("--out", default="sparse_ops")
    args = ap.parse_args()
    if args.quick:
        args.n, args.d = 20_000, 5_000
    n, d, k = args.n, args.d, args.k
    X = make(n, d, args.nnz_row)
    print(f"n={n} D={d} nnz={X.nnz} ({X.nnz / n:.0f}/row), backend {jax.default_backend()}, "
          f"dense float32 would be {n * d * 4 / 1e9:.1f} GB")
    dev = js.as_data(X, targets=None).design
    host = js.as_data(X, targets=None, storage="host").design
    coo = X.tocoo()
    bcoo = jsparse.BCOO(
        (jnp.asarray(coo.data), jnp.asarray(np.stack([coo.row, coo.col], 1).astype(np.int32))),
        shape=X.shape, indices_sorted=True, unique_indices=True,
    )
    rng = np.random.default_rng(1)
    v, u = rng.normal(size=d).astype(np.float32), rng.normal(size=n).astype(np.float32)
    V, U = rng.normal(size=(d, k)).astype(np.float32), rng.normal(size=(k, n)).astype(np.float32)
    vj, uj, Vj, Uj = map(jnp.asarray, (v, u, V, U))
    b_mv, b_rmv = jax.jit(lambda B, v: B @ v), jax.jit(lambda B, u: u @ B)
    cases = {
        "SparseDesign (device, standardised)": (lambda: dev.mv(vj), lambda: dev.rmv(uj),
                                                lambda: dev.mv(Vj), lambda: dev.rmv(Uj)),
        "jax BCOO (raw)": (lambda: b_mv(bcoo, vj), lambda: b_rmv(bcoo, uj),
                           lambda: b_mv(bcoo, Vj), lambda: b_rmv(bcoo, Uj)),
        "scipy CSR (host, raw)": (lambda: X @ v, lambda: X.T @ u, lambda: X @ V, lambda: (X.T @ U.T).T),
        "HostSparseDesign (host, standardised)": (lambda: host.mv(v), lambda: host.rmv(u),
                                                  lambda: host.mv(V), lambda: host.rmv(U)),
    }
    rows = []
    for name, fns in cases.items():
        times = [timeit(f, repeat=args.repeat)[1] * 1e3 for f in fns]
        rows.append({"operator": name, "mv ms": times[0], "rmv ms": times[1],
                     f"mv (D,{k}) ms": times[2], f"rmv ({k},n) ms": times[3]})
    np.testing.assert_allclose(np.asarray(dev.mv(vj)), host.mv(v), rtol=1e-3, atol=1e-3)
    print(table(rows, list(rows[0])))
    print("saved", save(args.out, {"n": n, "d": d, "nnz": int(X.nnz), "k": k, "rows": rows}))


if __name__ == "__main__":
    main()
