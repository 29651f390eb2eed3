"""A pytest plugin that measures what the suite spends compiling, per program and per test.

Usage (any test selection)::

    PYTHONPATH=benchmarks python -m pytest -q -n 0 -p compile_profile tests/test_sklearn.py

Under pytest-xdist (``-n 2``) each worker writes its own file, ``<name>.<worker>.json``, and the
summary is printed only with ``-n 0``.

It listens to XLA's backend-compile event (``jax.monitoring``; a load from JAX's persistent cache
counts too), sums the seconds per program name and per test (and, in total, the seconds spent tracing
and lowering to MLIR before XLA), prints the largest of each at the
end of the session and writes all of them as JSON to ``$COMPILE_PROFILE`` (default
``benchmarks/results/compile_profile.json``).
"""

from __future__ import annotations

import collections
import json
import os

import jax

_EVENT = "/jax/core/compile/backend_compile_duration"
_TRACE = "/jax/core/compile/jaxpr_trace_duration"
_LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
_BY_PROGRAM: dict = collections.defaultdict(lambda: [0, 0.0])
_BY_TEST: dict = collections.defaultdict(lambda: [0, 0.0])
_STAGES: dict = {"trace": [0, 0.0], "lower": [0, 0.0]}  # seconds before XLA: tracing, lowering to MLIR
_CURRENT = ["(collection)"]


def _listen(event, duration_secs, **kwargs):
    if event == _EVENT:
        for table, key in ((_BY_PROGRAM, kwargs.get("fun_name", "?")), (_BY_TEST, _CURRENT[0])):
            table[key][0] += 1
            table[key][1] += duration_secs
    elif event in (_TRACE, _LOWER):
        stage = _STAGES["trace" if event == _TRACE else "lower"]
        stage[0] += 1
        stage[1] += duration_secs


jax.monitoring.register_event_duration_secs_listener(_listen)


def pytest_runtest_setup(item):
    _CURRENT[0] = item.nodeid


def _top(table, n=15):
    rows = sorted(table.items(), key=lambda kv: -kv[1][1])[:n]
    return "\n".join(f"{secs:9.1f} s {count:5d}  {name}" for name, (count, secs) in rows)


def _write(suffix=""):
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.environ.get("COMPILE_PROFILE") or os.path.join(here, "results", "compile_profile.json")
    if suffix:
        path = f"{os.path.splitext(path)[0]}.{suffix}.json"
    with open(path, "w") as fh:
        json.dump({"programs": dict(_BY_PROGRAM), "tests": dict(_BY_TEST), "stages": _STAGES}, fh, indent=1, sort_keys=True)


def pytest_sessionfinish(session):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        _write(worker)


def pytest_terminal_summary(terminalreporter):
    total = sum(secs for _, secs in _BY_PROGRAM.values())
    count = sum(c for c, _ in _BY_PROGRAM.values())
    write = terminalreporter.write_line
    write(f"\ncompile profile: {count} programs, {total:.1f} s compiling")
    write("".join(f"{name}: {n} times, {secs:.1f} s; " for name, (n, secs) in _STAGES.items()))
    write("by program (seconds, compiles, name):\n" + _top(_BY_PROGRAM))
    write("by test:\n" + _top(_BY_TEST))
    if not os.environ.get("PYTEST_XDIST_WORKER") and count:
        _write()
