"""Two processes on localhost (``jax.distributed.initialize``, gloo CPU collectives, 2 host devices
each) give the single-process answer for ``prepare`` + ``cs_fr``, ``glm_omp`` (logistic, and softmax:
class labels spread over the processes), ``greedy_rls`` and ``fsa`` on dense rows, and — each process
holding a CSR block of a sparse X — for the column summary, ``prepare(gram=False)`` + ``cs_omp`` /
``cs_fr`` (lazy Gram columns) and ``fsa``.

The processes run ``examples/multihost.py --spawn-local [--sparse]`` — the recipe of
``docs/scaling.md`` — each holding its half of an odd number of rows (50 + 51: every process is
padded to 52 rows, weight 0 on the padding); the reference is the same solvers on all rows in this
(single-device) process.
"""

import importlib.util
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "examples", "multihost.py")


def _example():
    spec = importlib.util.spec_from_file_location("multihost_example", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run_two_processes(out, reference, *flags):
    """Start the example's 2 processes, compute ``reference()`` here while they run; ``(stdout, ref)``."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)  # jaxselect need not be installed
    proc = subprocess.Popen(
        [sys.executable, SCRIPT, "--spawn-local", "--out", str(out), "--timeout", "240", *flags],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ref = reference()  # one process, one device, the 101 rows unpadded (while they run)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stdout[-3000:] + stderr[-6000:]
    return stdout, ref


def test_two_processes_match_one(tmp_path):
    out = tmp_path / "results.npz"
    example = _example()
    stdout, ref = _run_two_processes(out, lambda: example.solve(*example.make_data()))
    assert "2 processes, 4 devices; global X (104, 12) (101 real rows)" in stdout, stdout[-2000:]
    got = dict(np.load(out))
    assert sorted(ref) == sorted(got)
    for key in ("cs_fr_order", "glm_omp_order", "softmax_order", "greedy_rls_selected", "fsa_support"):
        assert got[key].tolist() == ref[key].tolist(), key
    for key in ref:
        # float32: the row sums are split over 4 devices and 2 processes, so they round differently
        np.testing.assert_allclose(got[key], ref[key], rtol=2e-3, atol=2e-4, err_msg=key)


def test_two_processes_sparse_match_one(tmp_path):
    """Each process passes its CSR rows to ``js.shard_rows``: a row-sharded SparseDesign whose
    summary (column 0 is empty in process 0's rows, live over all rows; column 39 is empty), lazy
    Gram columns and FSA products are reduced over both processes."""
    out = tmp_path / "sparse.npz"
    example = _example()
    stdout, ref = _run_two_processes(out, lambda: example.solve_sparse(*example.make_sparse_data()), "--sparse")
    assert "2 processes, 4 devices; global sparse X (104, 40) (101 real rows)" in stdout, stdout[-2000:]
    got = dict(np.load(out))
    assert sorted(ref) == sorted(got)
    assert got["summary_live"][0] and not got["summary_live"][39]
    for key in ("summary_live", "cs_omp_order", "cs_fr_order", "fsa_support"):
        assert got[key].tolist() == ref[key].tolist(), key
    assert set(ref["fsa_support"].tolist()) == {0, 3, 17}  # the true columns: not a vacuous comparison
    for key in ref:
        np.testing.assert_allclose(got[key], ref[key], rtol=2e-3, atol=2e-4, err_msg=key)
