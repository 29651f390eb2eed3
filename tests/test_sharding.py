"""Sharded vs single-device results for every solver, in a separate process with 4 fake CPU devices.

XLA_FLAGS must be set before jax is imported, so the cases in ``sharded_cases.py`` run in their own
pytest process with ``--xla_force_host_platform_device_count=4``.
"""

import os
import subprocess
import sys


def test_sharded_equals_unsharded_and_x_is_not_gathered():
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.join(here, "sharded_cases.py")],
        cwd=os.path.dirname(here),
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout
