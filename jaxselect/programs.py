"""The library's compiled programs: a bounded cache, a way to clear it, and JAX's persistent cache.

Every XLA:CPU executable keeps hundreds of memory mappings and some resident memory for as long
as it is cached, and ``jax.jit`` keeps one executable per input shape for the life of the process.
A long-lived process that fits many data shapes (a notebook, a service, ``GridSearchCV``) would
grow without bound and, past the kernel's ``vm.max_map_count``, crash inside LLVM. So the library
compiles through :func:`jit`, a drop-in for ``jax.jit`` whose programs live in one process-wide
least-recently-used cache of at most :func:`max_programs` entries: each entry is its own
``jax.jit`` instance for one input signature (the tree structure, shapes, dtypes, shardings and
static arguments), and evicting it clears that instance, which frees its executable (and, with
glibc, hands the freed pages back to the operating system: ``malloc_trim``).

* :func:`clear_compiled` drops every compiled program of the library now;
* :func:`set_max_programs` bounds the cache (default 64 entries, or ``JAXSELECT_MAX_PROGRAMS``), and
  :func:`set_max_program_maps` bounds the memory mappings its executables hold (default 12 000, or
  ``JAXSELECT_MAX_PROGRAM_MAPS``; where ``/proc/self/maps`` exists): whichever bound is reached
  first evicts;
* :func:`enable_persistent_cache` turns on JAX's persistent compilation cache, so a new process
  loads the library's programs from disk instead of compiling them;
* on the CPU, small inputs compile the cheap way (:data:`CPU_COMPILER_OPTIONS`, and up to
  :func:`quick_compile_max_bytes` also :data:`QUICK_COMPILE_OPTIONS`):
  :func:`set_quick_compile_max_bytes` moves that bound.

Inside a traced program (a user's ``jax.jit``, ``vmap`` or ``grad``) the wrapped function traces
into the caller's program and nothing is cached here.
"""

from __future__ import annotations

import collections
import functools
import inspect
import os
import threading
import time

import jax
import numpy as np

from jaxselect._compat import is_tracer, jit_cache_size, top_level
from jaxselect._exported import ExportedProgram, ExportStore
from jaxselect._memory import release_free_memory

__all__ = [
    "clear_compiled", "disable_persistent_cache", "enable_persistent_cache", "jit", "max_program_maps", "max_programs", "quick_compile_max_bytes",
    "set_max_program_maps", "set_max_programs", "set_quick_compile_max_bytes",
]

_DEFAULT_MAX = 64
_DEFAULT_MAX_MAPS = 12_000
_LOCK = threading.RLock()
_CACHE: collections.OrderedDict = collections.OrderedDict()  # (owner, signature) -> jax.jit instance
_MAPS: dict = {}  # (owner, signature) -> memory mappings its first call (the compile) added
_MAX = [int(os.environ.get("JAXSELECT_MAX_PROGRAMS", _DEFAULT_MAX))]
_MAX_MAPS = [int(os.environ.get("JAXSELECT_MAX_PROGRAM_MAPS", _DEFAULT_MAX_MAPS))]
_PROC_MAPS = "/proc/self/maps"
_STORE: list = [None]  # the ExportStore of enable_persistent_cache, or None
_PERSISTENT = [False]  # enable_persistent_cache is in effect


def max_programs() -> int:
    """The bound of the library's program cache (entries, one compiled signature each).

    >>> import jaxselect as js
    >>> js.max_programs() >= 1
    True
    """
    return _MAX[0]


def set_max_programs(n: int) -> int:
    """Bound the library's program cache to ``n`` ≥ 1 entries (least recently used dropped first);
    returns the previous bound. Each XLA:CPU program keeps 100–600 memory mappings; the mappings
    have their own bound (:func:`set_max_program_maps`), which keeps the cache far below Linux's
    65 530 per process whatever ``n`` is.

    >>> import jaxselect as js
    >>> previous = js.set_max_programs(8)
    >>> js.max_programs()
    8
    >>> _ = js.set_max_programs(previous)
    """
    return _set_bound(_MAX, n, "max programs")


def max_program_maps() -> int:
    """The bound on the memory mappings the cached programs hold together (Linux; elsewhere only
    :func:`max_programs` bounds the cache).

    >>> import jaxselect as js
    >>> js.max_program_maps() >= 1
    True
    """
    return _MAX_MAPS[0]


def set_max_program_maps(n: int) -> int:
    """Bound the memory mappings held by the library's cached programs to ``n`` ≥ 1 (where
    ``/proc/self/maps`` exists): each new program is charged the mappings its compile added, and
    least recently used programs are dropped until the total is within ``n`` (the newest always
    stays). Returns the previous bound. The default, 12 000, keeps a process that fits hundreds of
    shapes under 20 000 mappings (Linux allows 65 530; past that XLA's compiler crashes).

    >>> import jaxselect as js
    >>> previous = js.set_max_program_maps(5000)
    >>> js.set_max_program_maps(previous)
    5000
    """
    return _set_bound(_MAX_MAPS, n, "max program maps")


def _set_bound(bound: list, n, what: str) -> int:
    """Set one of the cache's bounds to ``n`` ≥ 1 and evict what exceeds it; the previous bound."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{what} must be an integer >= 1; got {n!r}")
    with _LOCK:
        previous, bound[0] = bound[0], int(n)
        _evict()
    return previous


def _process_maps() -> int | None:
    """The process's memory mappings now (None where ``/proc/self/maps`` does not exist)."""
    try:
        with open(_PROC_MAPS, "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return None


def clear_compiled() -> int:
    """Drop every compiled program of the library (their executables are freed); returns how many
    cache entries were dropped. The next call of each function compiles again (or loads from the
    persistent cache, :func:`enable_persistent_cache`).

    >>> import jaxselect as js
    >>> js.clear_compiled() >= 0
    True
    """
    with _LOCK:
        n = len(_CACHE)
        while _CACHE:
            _drop_oldest()
        if n:
            _return_freed_memory(0.0)
    return n


def _drop_oldest():
    key, fn = _CACHE.popitem(last=False)
    _MAPS.pop(key, None)
    fn.clear_cache()


def _evict():
    """Drop least recently used programs while either bound is exceeded (the newest stays)."""
    dropped = False
    while len(_CACHE) > _MAX[0] or (len(_CACHE) > 1 and sum(_MAPS.values()) > _MAX_MAPS[0]):
        _drop_oldest()
        dropped = True
    if dropped:
        _return_freed_memory()


_LAST_TRIM = [float("-inf")]  # when the freed memory was last handed back


def _return_freed_memory(min_interval: float = 1.0):
    """Hand freed executables' heap back to the operating system (:func:`release_free_memory`, at
    most once per ``min_interval`` seconds, about 10 ms a call): otherwise it stays in the
    process's resident set (after 60 fits on new shapes, 400 of 800 MB)."""
    now = time.monotonic()
    if now - _LAST_TRIM[0] >= min_interval:
        _LAST_TRIM[0] = now
        release_free_memory()


def enable_persistent_cache(directory: str | os.PathLike | None = None, *, exports: bool = True) -> str:
    """Turn on JAX's persistent compilation cache for every program (the library's and the
    caller's), stored in ``directory`` (default ``$JAXSELECT_CACHE_DIR`` or
    ``~/.cache/jaxselect/xla``); returns the directory.

    A new process then loads compiled programs from disk instead of compiling them. Every program
    is cached, however quick its compile (JAX's defaults cache only programs that took over a
    second). With ``exports`` (the default) the library also keeps a :func:`jax.export.export` of
    each of its programs in ``directory/jaxselect-programs`` (:mod:`jaxselect._exported`), so a
    new process does not trace them either: what is left of a first call is loading. While the
    cache is on, small inputs compile with LLVM's optimisation too (:data:`QUICK_COMPILE_OPTIONS`
    are for processes that pay every compile; here a compile is paid once per machine and later
    processes run the faster kernels). Call it once, before the first fit. The cache directory
    holds executable code (and Python pickles) that the process loads and runs without checking
    it: use a directory only you can write to, as JAX's documentation warns.

    >>> import tempfile, jax, jaxselect as js
    >>> saved = jax.config.values["jax_compilation_cache_dir"]
    >>> where = js.enable_persistent_cache(tempfile.mkdtemp())
    >>> jax.config.values["jax_compilation_cache_dir"] == where
    True
    >>> js.disable_persistent_cache(saved)
    """
    if directory is None:
        directory = os.environ.get("JAXSELECT_CACHE_DIR") or os.path.join("~", ".cache", "jaxselect", "xla")
    directory = os.path.abspath(os.path.expanduser(os.fspath(directory)))
    os.makedirs(directory, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    with _LOCK:
        _STORE[0] = ExportStore(os.path.join(directory, "jaxselect-programs")) if exports else None
        _PERSISTENT[0] = True
    return directory


def disable_persistent_cache(directory: str | None = None) -> None:
    """Stop using the on-disk caches of :func:`enable_persistent_cache`: JAX's compilation cache
    directory becomes ``directory`` (None: none) and the library's stored exports are no longer
    read or written. Programs already in memory stay.

    >>> import jaxselect as js
    >>> js.disable_persistent_cache()
    """
    jax.config.update("jax_compilation_cache_dir", directory)
    with _LOCK:
        _STORE[0] = None
        _PERSISTENT[0] = False


#: XLA options of the programs the library compiles for the CPU on inputs up to
#: :data:`CHEAP_COMPILE_MAX_BYTES`: XLA:CPU's legacy (LLVM IR) emitters generate the same kernels
#: as its fusion (MLIR) emitters in about half the compile time (tests/test_default_compile.py
#: compares the two paths' results), where compiling is most of a call. Larger inputs keep XLA's
#: defaults, whose buffer assignment needs less scratch memory (FSA's compacted copies: 3/8 of X
#: against 4/7). Off when the environment says so: ``JAXSELECT_XLA_DEFAULTS=1``, or the option
#: named in ``XLA_FLAGS``.
CPU_COMPILER_OPTIONS = {"xla_cpu_use_fusion_emitters": False}
#: inputs (all array arguments together) above this many bytes compile with XLA's defaults
CHEAP_COMPILE_MAX_BYTES = 64 << 20
#: XLA options added on inputs up to :data:`QUICK_COMPILE_MAX_BYTES`: LLVM's optimisation off (the
#: settings of ``jax_disable_most_optimizations``). Compiling is then 2-2.5x faster and the
#: kernels run 1.3-4x slower (FSA on 2 000 x 200: compile 7.6 s -> 3.0 s, a run 36 -> 150 ms;
#: ``benchmarks/bench_cold.py``): on such inputs a program must run dozens of times before the
#: optimised kernels repay their compile. The matrix products call the same library kernels on
#: both paths; results agree to rounding (tests/test_default_compile.py).
QUICK_COMPILE_OPTIONS = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
#: inputs up to this many bytes compile with :data:`QUICK_COMPILE_OPTIONS` too (environment:
#: ``JAXSELECT_QUICK_COMPILE_MAX_BYTES``; 0 turns them off)
QUICK_COMPILE_MAX_BYTES = 2 << 20
_CPU_OPTIONS_USABLE = [True]


_QUICK_BOUND: list = [None]  # set_quick_compile_max_bytes's value (None: the environment's, or the default)


def quick_compile_max_bytes() -> int:
    """The input size up to which programs compile with :data:`QUICK_COMPILE_OPTIONS` (bytes):
    :func:`set_quick_compile_max_bytes`'s value, else ``JAXSELECT_QUICK_COMPILE_MAX_BYTES``, else
    :data:`QUICK_COMPILE_MAX_BYTES`.

    >>> from jaxselect.programs import quick_compile_max_bytes
    >>> quick_compile_max_bytes() >= 0
    True
    """
    if _QUICK_BOUND[0] is not None:
        return _QUICK_BOUND[0]
    value = os.environ.get("JAXSELECT_QUICK_COMPILE_MAX_BYTES", "")
    return int(value) if value.strip() else QUICK_COMPILE_MAX_BYTES


def set_quick_compile_max_bytes(n_bytes: int | None) -> int:
    """Compile programs on inputs up to ``n_bytes`` with LLVM's optimisation off
    (:data:`QUICK_COMPILE_OPTIONS`); 0 keeps it on everywhere — for a loop that refits one small
    shape hundreds of times, where the optimised kernels repay their compile — and None restores
    the default. Programs already compiled keep their options (:func:`clear_compiled` drops
    them). Returns the previous bound.

    >>> from jaxselect.programs import set_quick_compile_max_bytes
    >>> previous = set_quick_compile_max_bytes(0)
    >>> set_quick_compile_max_bytes(None)  # back to the default
    0
    """
    if n_bytes is not None and (isinstance(n_bytes, bool) or not isinstance(n_bytes, (int, np.integer)) or n_bytes < 0):
        raise ValueError(f"quick compile bytes must be an integer >= 0 or None; got {n_bytes!r}")
    previous = quick_compile_max_bytes()
    _QUICK_BOUND[0] = None if n_bytes is None else int(n_bytes)
    return previous


def cpu_compiler_options(n_bytes: int | None = None) -> dict:
    """The XLA options the library's next CPU compile passes on inputs of ``n_bytes`` (None: the
    options of every small input, :data:`CPU_COMPILER_OPTIONS`; up to
    :func:`quick_compile_max_bytes` also :data:`QUICK_COMPILE_OPTIONS`), or none when the
    environment asks for XLA's defaults or this XLA does not know them.

    >>> from jaxselect.programs import cpu_compiler_options
    >>> isinstance(cpu_compiler_options(), dict)
    True
    """
    if (
        not _CPU_OPTIONS_USABLE[0]
        or os.environ.get("JAXSELECT_XLA_DEFAULTS", "") not in ("", "0")
        or any(name in os.environ.get("XLA_FLAGS", "") for name in CPU_COMPILER_OPTIONS)
    ):
        return {}
    options = dict(CPU_COMPILER_OPTIONS)
    if n_bytes is not None and n_bytes <= quick_compile_max_bytes():
        options.update(QUICK_COMPILE_OPTIONS)
    return options


def _input_bytes(args, kwargs) -> int:
    """Bytes of the numeric array arguments (typed PRNG keys and other leaves count 0)."""
    total = 0
    for leaf in jax.tree.leaves((args, kwargs)):
        try:
            total += int(np.prod(leaf.shape)) * np.dtype(leaf.dtype).itemsize
        except (AttributeError, TypeError):  # not an array, or a dtype numpy does not know (key<fry>)
            pass
    return total


def _compile_options(options: dict, n_bytes: int, quick_max_bytes: int | None = None) -> dict:
    """``options`` with the library's CPU compiler options (small inputs on a CPU backend, unless
    the caller set its own); ``quick_max_bytes``: a program's own cap on
    :func:`quick_compile_max_bytes` (None: none)."""
    if "compiler_options" in options or jax.default_backend() != "cpu" or n_bytes > CHEAP_COMPILE_MAX_BYTES:
        return options
    # with the persistent cache on, a compile is paid once per machine: optimised kernels pay off
    capped = (quick_max_bytes is not None and n_bytes > quick_max_bytes) or _PERSISTENT[0]
    extra = cpu_compiler_options(None if capped else n_bytes)
    return {**options, "compiler_options": extra} if extra else options


def _unknown_option(err: Exception) -> bool:
    return any(name in str(err) for name in {**CPU_COMPILER_OPTIONS, **QUICK_COMPILE_OPTIONS})


def _leaf_key(x):
    if isinstance(x, jax.Array):
        sharding = x.sharding if len(x.sharding.device_set) > 1 else None
        return (x.shape, x.dtype, getattr(x, "weak_type", False), sharding)  # typed PRNG keys have none
    if isinstance(x, (np.ndarray, np.generic)):
        return (x.shape, x.dtype)
    if isinstance(x, (bool, int, float, complex)):
        return type(x)
    if x is None:
        return None
    return (type(x), getattr(x, "shape", None), getattr(x, "dtype", None))


def _static_positions(fun, names, numbers) -> dict:
    """``{position: name}`` of the static arguments that a call may pass by position."""
    numbers = (numbers,) if isinstance(numbers, int) else tuple(numbers or ())
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return {i: f"#{i}" for i in numbers}
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    found = {i: name for i, name in enumerate(positional) if name in names}
    found.update({i: positional[i] if i < len(positional) else f"#{i}" for i in numbers})
    return found


class BoundedJit:
    """``jax.jit(fun, **options)`` whose compiled signatures live in the library's bounded cache."""

    def __init__(self, fun, quick_max_bytes: int | None = None, **options):
        functools.update_wrapper(self, fun)
        self._fun = fun
        self._options = options
        self._quick_max_bytes = quick_max_bytes
        static = options.get("static_argnames", ()) or ()
        self._static = (static,) if isinstance(static, str) else tuple(static)
        self._static_positions = _static_positions(fun, self._static, options.get("static_argnums", ()))
        self._traced = jax.jit(fun, **options)  # for calls inside a traced program: nothing compiled
        self._keys: set = set()

    def _split(self, args, kwargs):
        """``(dynamic args, dynamic kwargs, static items)``: static arguments passed by position are
        replaced by None in the arguments and listed, by name, with those passed by keyword."""
        dynamic = {k: v for k, v in kwargs.items() if k not in self._static}
        static = [(k, v) for k, v in kwargs.items() if k in self._static]
        if self._static_positions:  # static arguments passed by position: keyed by value too
            args = list(args)
            for i, name in self._static_positions.items():
                if i < len(args):
                    static.append((name, args[i]))
                    args[i] = None
            args = tuple(args)
        return args, dynamic, tuple(sorted(static, key=lambda item: item[0]))

    def _signature(self, args, kwargs):
        args, dynamic, static = self._split(args, kwargs)
        leaves, tree = jax.tree.flatten((args, dynamic))
        if any(is_tracer(leaf) for leaf in leaves):
            return None
        return (tree, tuple(_leaf_key(leaf) for leaf in leaves), static)

    def _instance(self, args, kwargs):
        return self._entry(args, kwargs)[0]

    def _entry(self, args, kwargs):
        """``(jax.jit instance, cache key or None, new)``: the cached program of this signature."""
        signature = None if not top_level() else self._signature(args, kwargs)
        if signature is None:  # inside a traced program: it traces into the caller's, nothing cached
            return self._traced, None, False
        key = (self, signature)  # the owner itself: an id could be reused after it is freed
        with _LOCK:
            fn = _CACHE.get(key)
            if fn is not None:
                _CACHE.move_to_end(key)
                return fn, key, False
            fun = self._fun

            def program(*a, **k):  # a new function object: its own jit caches, freed on eviction
                return fun(*a, **k)

            functools.update_wrapper(program, fun)
            options = _compile_options(self._options, _input_bytes(args, kwargs), self._quick_max_bytes)
            fn = _CACHE[key] = self._new_program(program, options, args, kwargs, signature)
            self._keys.add(key)
            _evict()
            return fn, key, True

    def _new_program(self, program, options, args, kwargs, signature):
        """The cache entry of a new signature: run from a stored export where the persistent cache
        is on and the program exports (:mod:`jaxselect._exported`), else ``jax.jit``."""
        store = _STORE[0]
        if store is not None:
            entry = ExportedProgram.create(store, self, program, options, args, kwargs, signature)
            if entry is not None:
                return entry
        return jax.jit(program, **options)

    def _call(self, args, kwargs):
        fn, key, new = self._entry(args, kwargs)
        if not new:
            return fn(*args, **kwargs)
        before = _process_maps()  # a new entry's first call compiles: charge it what that maps
        out = fn(*args, **kwargs)
        after = _process_maps()
        if before is not None and after is not None:
            with _LOCK:
                if key in _CACHE:
                    _MAPS[key] = max(0, after - before)
                    _evict()
        return out

    def __call__(self, *args, **kwargs):
        try:
            return self._call(args, kwargs)
        except Exception as err:
            if not (_CPU_OPTIONS_USABLE[0] and _unknown_option(err)):
                raise
            _CPU_OPTIONS_USABLE[0] = False  # an XLA without the options: XLA's defaults from now on
            clear_compiled()
            return self._call(args, kwargs)

    def lower(self, *args, **kwargs):
        return self._instance(args, kwargs).lower(*args, **kwargs)

    def trace(self, *args, **kwargs):
        return self._instance(args, kwargs).trace(*args, **kwargs)

    def eval_shape(self, *args, **kwargs):
        return self._traced.eval_shape(*args, **kwargs)

    def clear_cache(self):
        """Drop this function's compiled programs."""
        with _LOCK:
            for key in list(self._keys):
                fn = _CACHE.pop(key, None)
                _MAPS.pop(key, None)
                if fn is not None:
                    fn.clear_cache()
            self._keys.clear()
        self._traced.clear_cache()

    def _cache_size(self) -> int:
        """The number of compiled signatures of this function now cached."""
        with _LOCK:
            self._keys &= set(_CACHE)
            return sum(jit_cache_size(_CACHE[key]) for key in self._keys)

    def __get__(self, obj, objtype=None):  # used as a method: bind like a function
        return self if obj is None else functools.partial(self, obj)

    def __repr__(self):
        return f"<jaxselect.programs.jit of {getattr(self._fun, '__qualname__', self._fun)!r}>"


def jit(fun=None, *, quick_max_bytes: int | None = None, **options):
    """``jax.jit`` with the library's bounded program cache; as a decorator with or without options
    (``@jit``, ``@functools.partial(jit, static_argnames=...)``). ``quick_max_bytes``: a program
    whose run is long next to its compile on small inputs (many passes over the data, e.g. DWSM's
    rollouts) caps the input size up to which :data:`QUICK_COMPILE_OPTIONS` apply."""
    if fun is None:
        return functools.partial(jit, quick_max_bytes=quick_max_bytes, **options)
    return BoundedJit(fun, quick_max_bytes=quick_max_bytes, **options)
