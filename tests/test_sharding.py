"""Sharded vs single-device results for every solver, in a separate process with 4 fake CPU devices.

XLA_FLAGS must be set before jax is imported, so the cases in ``sharded_cases.py`` run in their own
pytest process with ``--xla_force_host_platform_device_count=4``. That process also dumps every
optimised HLO module it compiles; afterwards we check that no module all-gathers an array with the
cases' row count (N_ROWS, chosen to appear nowhere else): X stays split by rows and the solvers'
row reductions are partial sums plus all-reduce.
"""

import glob
import os
import re
import subprocess
import sys

N_ROWS = 104  # keep in sync with sharded_cases.N


def test_sharded_equals_unsharded_and_x_is_not_gathered(tmp_path):
    here = os.path.dirname(os.path.abspath(__file__))
    dump = tmp_path / "hlo"
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "")
        + f" --xla_force_host_platform_device_count=4 --xla_dump_to={dump} --xla_dump_hlo_as_text"
        + " --xla_dump_hlo_pass_re=^$"
    ).strip()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.join(here, "sharded_cases.py")],
        cwd=os.path.dirname(here),
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout and " skipped" not in proc.stdout, proc.stdout[-2000:]
    modules = glob.glob(str(dump / "*after_optimizations.txt"))
    assert modules, "no HLO was dumped"
    gathers = []
    collectives = 0
    for path in modules:
        with open(path) as f:
            for line in f:
                if "all-reduce" in line or "reduce-scatter" in line:
                    collectives += 1
                if "all-gather" in line and re.search(rf"\[{N_ROWS},", line):
                    gathers.append(os.path.basename(path) + ": " + line.strip()[:200])
    assert collectives > 0, "no cross-device reduction found: were the inputs sharded?"
    assert gathers == [], "X-sized arrays were all-gathered:\n" + "\n".join(gathers[:10])
