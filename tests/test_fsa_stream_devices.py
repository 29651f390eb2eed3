"""Streamed FSA with rows split over devices equals the one-device run: the cases of
``stream_device_cases.py`` in their own process with 4 fake CPU devices (XLA_FLAGS must be set
before jax is imported)."""

import os
import subprocess
import sys


def test_streamed_rows_over_four_devices():
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.join(here, "stream_device_cases.py")],
        cwd=os.path.dirname(here), env=env, capture_output=True, text=True, timeout=1200,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert " passed" in out and " skipped" not in out and " failed" not in out, out[-2000:]
