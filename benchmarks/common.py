"""Shared helpers for the benchmark scripts: timing, environment record, JSON output."""

from __future__ import annotations

import json
import os
import platform
import statistics
import threading
import time

import jax

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def block(x):
    """Wait for every array in a pytree (JAX dispatch is asynchronous)."""
    return jax.block_until_ready(x)


def timeit(fn, *, repeat: int = 3, warmup: int = 1):
    """(first-call seconds, median steady-state seconds) of ``fn()``; the first call includes compilation."""
    t0 = time.perf_counter()
    block(fn())
    first = time.perf_counter() - t0
    for _ in range(max(warmup - 1, 0)):
        block(fn())
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        block(fn())
        times.append(time.perf_counter() - t0)
    return first, statistics.median(times)


def l1_logistic(C: float, **kwargs):
    """scikit-learn's L1 logistic regression (liblinear), spelled for the installed version.

    scikit-learn 1.8 deprecated ``penalty=`` in favour of ``l1_ratio=`` (removed in 1.10).
    """
    import sklearn
    from sklearn.linear_model import LogisticRegression

    major, minor = (int(v) for v in sklearn.__version__.split(".")[:2])
    style = {"l1_ratio": 1.0} if (major, minor) >= (1, 8) else {"penalty": "l1"}
    return LogisticRegression(C=C, solver="liblinear", **style, **kwargs)


def device_memory() -> dict | None:
    """Allocator statistics of the first device (GPU/TPU): bytes in use, peak since start, limit.

    None where the backend keeps none (the CPU). The peak cannot be reset: measure the largest
    problem last, or read it as "peak so far".
    """
    try:
        stats = jax.devices()[0].memory_stats()
    except Exception:  # noqa: BLE001 - backends without allocator statistics
        return None
    if not stats:
        return None
    return {k: int(stats[k]) for k in ("bytes_in_use", "peak_bytes_in_use", "bytes_limit") if k in stats}


def environment() -> dict:
    dev = jax.devices()[0]
    return {
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "device": getattr(dev, "device_kind", str(dev)),
        "n_devices": jax.device_count(),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "x64": bool(jax.config.jax_enable_x64),
        "device_memory": device_memory(),
    }


def save(name: str, payload: dict) -> str:
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f"{name}.json")
    with open(path, "w") as f:
        json.dump({"environment": environment(), **payload}, f, indent=2, default=float)
    return path


def table(rows: list[dict], columns: list[str]) -> str:
    """Plain-text table of dict rows."""
    cells = [[_fmt(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    line = "  ".join(c.rjust(w) for c, w in zip(columns, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(out)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
    return str(v)


class RssSampler:
    """Peak of ``RssAnon`` (anonymous resident memory) of this process, sampled in a thread."""

    def __init__(self, period: float = 0.01):
        self.period, self.peak, self._stop = period, 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def read(field: str = "RssAnon") -> int:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        return -1

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.read())
            time.sleep(self.period)

    def __enter__(self):
        self.peak = self.read()
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.thread.join()
        self.peak = max(self.peak, self.read())
