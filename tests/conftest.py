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


# ------------------------------------------------------------------------------ pytest-xdist
# Subprocess tests that run long and alone: scheduled first, so that they do not end the run.
_LONG_FIRST = ("test_sharding.py", "test_examples.py", "test_docs.py", "test_multiprocess.py")


def pytest_xdist_make_scheduler(config, log):
    """``-n 2``: send whole modules (and each estimator of the scikit-learn checks) to one worker.

    Compiling dominates most modules, and a module's tests share compiled programs (shapes, static
    arguments); pytest-xdist's default ``load`` scheduling deals out chunks of consecutive tests to
    both workers, so a module cut in two compiles its shared programs twice (and each worker drops
    its compilation caches whenever it moves to another module). The units run long subprocess
    modules first, then the largest units first, so that the two workers finish together.
    """
    if config.getoption("dist") != "load":  # -n's default; an explicit --dist is kept
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            module, _, name = nodeid.partition("::")
            module = module.replace(os.sep, "/")
            if module.endswith("test_sklearn_checks.py") and "[" in name:
                # one unit per estimator: its checks share programs, the estimators none (see there)
                return module + "::" + name.split("[", 1)[1].split("(", 1)[0]
            return module

        def _assign_work_unit(self, node):
            if not getattr(self, "_ordered", False):  # the first call: the queue holds every unit
                units = list(self.workqueue.items())
                units.sort(key=lambda unit: (unit[0].rsplit("/", 1)[-1] not in _LONG_FIRST, -len(unit[1])))
                self.workqueue.clear()
                self.workqueue.update(units)
                self._ordered = True
            super()._assign_work_unit(node)

    return ModuleScheduling(config, log)
