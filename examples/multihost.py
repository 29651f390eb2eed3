"""Multi-process (multi-host) jaxselect: each process holds its own rows, the solvers see one global array.

Run it in two shells (same machine, or two hosts with the coordinator's address):

    python examples/multihost.py --process-id 0 --num-processes 2 --coordinator 127.0.0.1:12345
    python examples/multihost.py --process-id 1 --num-processes 2 --coordinator 127.0.0.1:12345

or let one command start both on this machine: ``python examples/multihost.py --spawn-local``.

Each process: CPU collectives over gloo, ``--local-devices`` (2) host devices, ``jax.distributed.initialize``;
a mesh over all 4 devices of the 2 processes (``jax.make_mesh``: Explicit axes); its half of an odd
number of rows (101), placed with ``js.shard_rows`` (which pads every process to the same number of
rows and assembles the global arrays with ``jax.make_array_from_process_local_data``); then
``prepare`` + ``cs_fr``, ``glm_omp`` (logistic and 3-class softmax), ``greedy_rls`` and ``fsa`` with
``sample_weight=w`` (0 on the padding rows). The results equal a single-process run on all 101 rows (``tests/test_multiprocess.py``
checks this). Process 0 prints a summary and, with ``--out``, saves the results (``.npz``).

``--sparse`` runs the sparse case instead: each process holds its CSR block of a 101 × 40 sparse X
and passes it to ``js.shard_rows`` (a row-sharded ``SparseDesign``: per-device blocks of entries,
padded to a common count); the front door's column summary, ``prepare(gram=False)`` + ``cs_omp`` /
``cs_fr`` (lazy Gram columns) and ``fsa`` equal a single-process run.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys

import numpy as np

N_ROWS, N_FEATURES = 101, 12  # an odd n: the padding and the row weights are exercised


def make_data(seed: int = 0):
    """The full data set (every process builds it and keeps its own rows; a real job would read them)."""
    rng = np.random.default_rng(seed)
    X = (rng.normal(size=(N_ROWS, N_FEATURES)) + rng.normal(size=N_FEATURES)).astype(np.float32)
    y = (X[:, 1] - 2 * X[:, 6] + 0.5 * X[:, 9] + 0.3 * rng.normal(size=N_ROWS)).astype(np.float32)
    labels = (y > np.median(y)).astype(np.int32)
    classes = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3])).astype(np.int32)  # 3 classes 0, 1, 2
    return X, y, labels, classes


def rows_of(process_id: int, num_processes: int, n: int = N_ROWS) -> slice:
    """This process's contiguous block of rows (sizes differ by at most one)."""
    bounds = np.linspace(0, n, num_processes + 1).round().astype(int)
    return slice(bounds[process_id], bounds[process_id + 1])


def solve(X, y, labels, classes, sample_weight=None):
    """The solvers of the example; returns a dict of numpy results."""
    import jax.numpy as jnp

    import jaxselect as js

    groups = js.Groups.from_ids(np.arange(N_FEATURES) // 2, [1.0, 2.0, 1.0, 1.5, 1.0, 3.0])
    fr = js.cs_fr(js.prepare(X, y, groups, sample_weight=sample_weight))
    glm = js.glm_omp(X, labels, groups, k=3, l2=1e-2, sample_weight=sample_weight)
    # class labels of a global array spread over processes: checked on their gathered values, kept global
    soft = js.glm_omp(X, classes, groups, loss="softmax", k=3, l2=1e-2, sample_weight=sample_weight)
    rls = js.greedy_rls(X, y, 3, l2=1e-2, bias=1.0, sample_weight=sample_weight)
    fsa = js.fsa(X, y, 3, n_iter=40, l2=1e-3, sample_weight=sample_weight)
    out = {
        "cs_fr_order": fr.order,
        "cs_fr_coef": fr.coef,
        "cs_fr_objective": fr.objective,
        "glm_omp_order": glm.order,
        "glm_omp_coef": glm.coef,
        "glm_omp_intercept": glm.intercept,
        "softmax_order": soft.order,
        "softmax_coef": soft.coef,
        "softmax_intercept": soft.intercept,
        "greedy_rls_selected": rls.selected,
        "greedy_rls_loo_error": rls.loo_error,
        "greedy_rls_coef": rls.coef,
        "fsa_support": fsa.support,
        "fsa_coef": fsa.coef,
        "fsa_intercept": fsa.intercept,
    }
    # every result is replicated on every device, so each process can read it whole
    return {k: np.asarray(jnp.asarray(v)) for k, v in out.items()}


def make_sparse_data(seed: int = 1):
    """A sparse data set (CSR, 101 × 40, ~20 % non-zero): column 0 is empty in the first 60 rows
    (constant in process 0's rows, not over all rows: the summary must be global), column 39 is
    empty (inert); y depends on columns 0, 3 and 17."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    X = sp.random(N_ROWS, 40, density=0.2, format="lil", random_state=seed, dtype=np.float32)
    X[:60, 0] = 0.0
    X[60:, 0] = rng.normal(size=(N_ROWS - 60, 1)).astype(np.float32) + 1.0
    X[:, 39] = 0.0
    X = X.tocsr()
    X.eliminate_zeros()
    dense = X.toarray()
    y = (2 * dense[:, 0] - 3 * dense[:, 3] + 2.5 * dense[:, 17] + 0.05 * rng.normal(size=N_ROWS)).astype(np.float32)
    return X, y


def solve_sparse(X, y, sample_weight=None):
    """The sparse case: the front door's column summary, ``prepare(gram=False)`` (lazy Gram
    columns) + ``cs_omp`` / ``cs_fr`` and ``fsa``; a dict of numpy results."""
    import jax.numpy as jnp

    import jaxselect as js

    summary = js.as_data(X, targets=None, sample_weight=sample_weight).summary
    problem = js.prepare(X, y, gram=False, sample_weight=sample_weight)
    omp = js.cs_omp(problem, k=5)
    fr = js.cs_fr(problem, k=5)
    fsa = js.fsa(X, y, 3, n_iter=40, l2=1e-3, sample_weight=sample_weight)
    out = {
        "summary_mean": summary.mean,
        "summary_scale": summary.scale,
        "summary_live": summary.live,
        "cs_omp_order": omp.order,
        "cs_omp_coef": omp.coef,
        "cs_omp_objective": omp.objective,
        "cs_fr_order": fr.order,
        "cs_fr_coef": fr.coef,
        "fsa_support": fsa.support,
        "fsa_coef": fsa.coef,
        "fsa_intercept": fsa.intercept,
    }
    return {k: np.asarray(jnp.asarray(v)) for k, v in out.items()}


def run_sparse(args, mesh) -> None:
    """``--sparse``: each process passes its CSR rows to ``js.shard_rows`` (a row-sharded SparseDesign)."""
    import jax

    import jaxselect as js

    X, y = make_sparse_data()
    mine = rows_of(args.process_id, args.num_processes)
    Xs, ys, w = js.shard_rows(X[mine], y[mine], mesh=mesh)  # this process's CSR rows -> global design
    results = solve_sparse(Xs, ys, sample_weight=w)
    n_real = int(w.sum())
    if jax.process_index() == 0:
        print(
            f"{jax.process_count()} processes, {jax.device_count()} devices; global sparse X {Xs.shape} "
            f"({n_real} real rows); cs_omp order {results['cs_omp_order'].tolist()}, cs_fr order "
            f"{results['cs_fr_order'].tolist()}, fsa {results['fsa_support'].tolist()}"
        )
        if args.out:
            np.savez(args.out, **results)


def run_process(args) -> None:
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={args.local_devices}"
    ).strip()
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=args.coordinator, num_processes=args.num_processes, process_id=args.process_id
    )
    import jaxselect as js

    mesh = jax.make_mesh((jax.device_count(),), ("data",))  # every device of every process
    if args.sparse:
        run_sparse(args, mesh)
        jax.distributed.shutdown()
        return
    X, y, labels, classes = make_data()
    mine = rows_of(args.process_id, args.num_processes)
    # this process's rows -> global row-sharded arrays (padded per process) + row weights (0 = padding)
    Xs, ys, ls, cs, w = js.shard_rows(X[mine], y[mine], labels[mine], classes[mine], mesh=mesh)
    results = solve(Xs, ys, ls, cs, sample_weight=w)
    n_real = int(w.sum())  # a computation on global arrays: every process must run it, not only process 0
    if jax.process_index() == 0:
        print(
            f"{jax.process_count()} processes, {jax.device_count()} devices; global X {Xs.shape} "
            f"({n_real} real rows); cs_fr order {results['cs_fr_order'].tolist()}, glm_omp order "
            f"{results['glm_omp_order'].tolist()}, softmax {results['softmax_order'].tolist()}, greedy_rls {results['greedy_rls_selected'].tolist()}, "
            f"fsa {results['fsa_support'].tolist()}"
        )
        if args.out:
            np.savez(args.out, **results)
    jax.distributed.shutdown()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn_local(args) -> int:
    """Start ``--num-processes`` copies of this script on this machine and wait for them."""
    coordinator = args.coordinator or f"127.0.0.1:{free_port()}"
    base = [
        sys.executable,
        os.path.abspath(__file__),
        "--num-processes",
        str(args.num_processes),
        "--coordinator",
        coordinator,
        "--local-devices",
        str(args.local_devices),
    ] + (["--sparse"] if args.sparse else [])
    procs = [
        subprocess.Popen(base + ["--process-id", str(i)] + (["--out", args.out] if args.out and i == 0 else []))
        for i in range(args.num_processes)
    ]
    try:
        codes = [p.wait(timeout=args.timeout) for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        print(f"timed out after {args.timeout} s", file=sys.stderr)
        return 1
    return max(abs(c) for c in codes)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--process-id", type=int, default=0)
    parser.add_argument("--num-processes", type=int, default=2)
    parser.add_argument(
        "--coordinator", default=None, help="host:port of process 0 (default with --spawn-local: a free local port)"
    )
    parser.add_argument("--local-devices", type=int, default=2, help="host (CPU) devices per process")
    parser.add_argument("--spawn-local", action="store_true", help="start all processes on this machine")
    parser.add_argument("--sparse", action="store_true", help="the sparse case: each process holds a CSR block")
    parser.add_argument("--out", default=None, help="process 0 saves the results here (.npz)")
    parser.add_argument("--timeout", type=float, default=300.0, help="--spawn-local: seconds to wait")
    args = parser.parse_args(argv)
    if args.spawn_local:
        return spawn_local(args)
    if args.coordinator is None:
        parser.error("--coordinator host:port is required (or use --spawn-local)")
    run_process(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
