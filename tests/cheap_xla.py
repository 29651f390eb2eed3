"""XLA options that make compiling cheaper without changing what is computed (tests/conftest.py's
``cheap_compiles`` and the test subprocesses that compile with XLA's cheapest settings)."""

import contextlib
import inspect

import jax

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
def legacy_cpu_emitters():
    """Pass :data:`CHEAP_XLA_OPTIONS` to every compilation inside (JAX has no global setting for
    per-compile XLA options: this wraps ``jax._src.compiler.get_compile_options``, which receives
    ``jax.jit``'s ``compiler_options``). Without that function, or on an XLA that lacks the option,
    it does nothing: the options only make compiling cheaper."""
    from jax._src import compiler

    original = getattr(compiler, "get_compile_options", None)
    try:
        signature = inspect.signature(original)
        usable = "env_options_overrides" in signature.parameters
    except (TypeError, ValueError):
        usable = False
    if not usable or not cheap_xla_options_supported():
        yield
        return

    def get_compile_options(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        options = dict(CHEAP_XLA_OPTIONS)
        options.update(bound.arguments.get("env_options_overrides") or {})  # a jit's own options first
        bound.arguments["env_options_overrides"] = options
        return original(*bound.args, **bound.kwargs)

    get_compile_options.original = original
    compiler.get_compile_options = get_compile_options
    try:
        yield
    finally:
        compiler.get_compile_options = original


@contextlib.contextmanager
def default_cpu_emitters():
    """Compile with XLA's default emitters inside, undoing any :func:`legacy_cpu_emitters` around
    (for a test of what the default path's programs allocate: the legacy emitters' buffer
    assignment differs)."""
    from jax._src import compiler

    patched = getattr(compiler, "get_compile_options", None)
    plain = patched
    while hasattr(plain, "original"):
        plain = plain.original
    compiler.get_compile_options = plain
    try:
        yield
    finally:
        compiler.get_compile_options = patched
