"""Test configuration shared by every test module.

The suite runs as users run: x64 OFF, float32 the default. float64 cases switch x64 on locally
(``jax.enable_x64()`` via the ``x64`` fixture, or their own process). Strict promotion and rank
promotion catch accidental dtype/rank mixing inside the library.
"""

import collections
import gc
import json
import os

import jax
import numpy as np

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

import pytest  # noqa: E402

from cheap_xla import legacy_cpu_emitters  # noqa: E402


@pytest.fixture
def x64():
    """Run the test body with float64 enabled (``jax.enable_x64()``); float32 stays the default elsewhere."""
    with jax.enable_x64():
        yield


@pytest.fixture(params=["float32", "float64"])
def dtype(request):
    """Parametrise a test over float32 (the default path) and float64 (inside ``jax.enable_x64()``)."""
    if request.param == "float64":
        with jax.enable_x64():
            yield np.float64
    else:
        yield np.float32


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compilation caches after each test module.

    Every XLA:CPU executable holds memory mappings; the whole suite compiles a few thousand programs
    (float32 and float64 variants, eager-vs-jit checks), which would exhaust the kernel's
    ``vm.max_map_count`` (65 530) in one process and abort it. Modules never share warm caches.
    """
    yield
    jax.clear_caches()
    gc.collect()


@pytest.fixture(scope="module")
def cheap_compiles():
    """Compile with XLA's cheapest optimisation settings for one module (``pytestmark =
    pytest.mark.usefixtures("cheap_compiles")``).

    For modules that fit small problems of many shapes once or twice each (the scikit-learn checks,
    the estimators, cross-validation, the DWSM fits, the docs' examples): compiling dominates
    there, running takes milliseconds. The
    settings change how XLA optimises, not what is computed; :func:`_release_compiled_programs`
    drops the programs after the module, so no other test runs them.
    """
    saved = (
        jax.config.values["jax_disable_most_optimizations"],
        jax.config.values["jax_exec_time_optimization_effort"],
    )
    jax.config.update("jax_disable_most_optimizations", True)
    jax.config.update("jax_exec_time_optimization_effort", -1.0)
    with legacy_cpu_emitters():
        yield
    jax.config.update("jax_disable_most_optimizations", saved[0])
    jax.config.update("jax_exec_time_optimization_effort", saved[1])


# ------------------------------------------------------------------------------ fuzz report
# Each fuzz test (tests/test_fuzz.py) checks its own outcome counts and records them as a user
# property; pytest-xdist sends those to the controller with the test reports, so the totals below are
# the whole run's however the tests were spread over workers.
_FUZZ_TOTALS: collections.Counter = collections.Counter()


def pytest_runtest_logreport(report):
    if report.when == "call":
        for key, value in report.user_properties:
            if key == "fuzz_counts":
                _FUZZ_TOTALS.update(value)


def pytest_sessionfinish(session):
    """``JAXSELECT_FUZZ_REPORT=path``: write the fuzz suite's outcome counts as JSON (controller only)."""
    path = os.environ.get("JAXSELECT_FUZZ_REPORT")
    if path and _FUZZ_TOTALS and not hasattr(session.config, "workerinput"):
        with open(path, "w") as fh:
            json.dump(dict(_FUZZ_TOTALS), fh, indent=1, sort_keys=True)

