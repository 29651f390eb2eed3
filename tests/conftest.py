"""Test configuration shared by every test module.

The suite runs as users run: x64 OFF, float32 the default. float64 cases switch x64 on locally
(``jax.enable_x64()`` via the ``x64`` fixture, or their own process). Strict promotion and rank
promotion catch accidental dtype/rank mixing inside the library.
"""

import collections
import contextlib
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
    with _legacy_cpu_emitters():
        yield
    jax.config.update("jax_disable_most_optimizations", saved[0])
    jax.config.update("jax_exec_time_optimization_effort", saved[1])


# XLA:CPU's fusion emitters (MLIR) take about half of a small program's compile time at XLA's
# cheapest settings; its legacy (LLVM IR) emitters generate the same elementwise computations
# (FSARegressorCV() and DWSMClassifier() fits agree bit for bit) at about half the compile cost.
CHEAP_XLA_OPTIONS = {"xla_cpu_use_fusion_emitters": False}
# the same, as XLA_FLAGS, for the test subprocesses that compile with XLA's cheapest settings
CHEAP_XLA_FLAGS = " ".join(f"--{k}={str(v).lower()}" for k, v in CHEAP_XLA_OPTIONS.items())


def cheap_xla_options_supported() -> bool:
    """Whether this jaxlib's XLA knows :data:`CHEAP_XLA_OPTIONS` (one tiny compile, memoised)."""
    if _SUPPORTED[0] is None:
        try:
            jax.jit(lambda x: x + 1, compiler_options=CHEAP_XLA_OPTIONS).lower(1.0).compile()
            _SUPPORTED[0] = True
        except Exception:  # noqa: BLE001 - an XLA without the option: compile with the rest only
            _SUPPORTED[0] = False
    return _SUPPORTED[0]


_SUPPORTED = [None]


@contextlib.contextmanager
def _legacy_cpu_emitters():
    """Pass :data:`CHEAP_XLA_OPTIONS` to every compilation inside (JAX has no global setting for
    per-compile XLA options: this wraps ``jax._src.compiler.get_compile_options``, which receives
    ``jax.jit``'s ``compiler_options``). Without that function, or on an XLA that lacks the option,
    it does nothing: the options only make compiling cheaper."""
    from jax._src import compiler

    original = getattr(compiler, "get_compile_options", None)
    if original is None or not cheap_xla_options_supported():
        yield
        return

    def get_compile_options(*args, env_options_overrides=None, **kwargs):
        options = dict(CHEAP_XLA_OPTIONS)
        options.update(env_options_overrides or {})  # a jit's own compiler_options come first
        return original(*args, env_options_overrides=options, **kwargs)

    compiler.get_compile_options = get_compile_options
    try:
        yield
    finally:
        compiler.get_compile_options = original


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
