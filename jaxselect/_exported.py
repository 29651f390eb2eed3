"""The library's programs saved as JAX exports on disk, so a new process skips tracing them.

JAX's persistent compilation cache (:func:`jaxselect.enable_persistent_cache`) stores compiled
executables, but JAX must still trace and lower a program to compute that cache's key: for FSA at
2 000 × 200 that is 0.7 of the 0.9 s of a first call with a warm cache. This module keeps, beside
the persistent cache, one :func:`jax.export.export` of each program the library compiled (its
StableHLO and its input and output structure), keyed by everything that shapes the program:

* the function (module and qualified name) and a digest of the library's source files;
* the input tree structure, each array's shape, dtype and weak type, the static arguments' values;
* JAX's and jaxlib's versions, the backend, the XLA options and the configuration that changes
  lowering (``jax_enable_x64``, the default matmul precision, ...).

A new process that finds its key loads the export and compiles a thin ``jax.jit`` around
``Exported.call``, whose executable JAX's persistent cache then holds: no Python tracing of the
library's code. A program that cannot be keyed stably (a static argument whose ``repr`` names a
memory address, such as a user's function), that runs on several devices or under a mesh, or that
JAX cannot export (host callbacks: progress bars, ``verbose``) compiles the usual way, and the
last kind is remembered on disk so it is not tried again.

The files are Python pickles: a directory of them is code the process runs, like JAX's own cache
(use a directory only you can write to).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import os
import pickle
import tempfile
import types

import jax
import numpy as np

from jaxselect._compat import jit_cache_size
from jaxselect._static import Static

__all__ = ["ExportStore", "ExportedProgram", "describe", "exportable_leaves", "key_data_leaves", "source_digest"]

_SKIP = b"not exportable"
#: configuration options that change how a program lowers (those this JAX has)
_CONFIG = (
    "jax_enable_x64",
    "jax_default_matmul_precision",
    "jax_threefry_partitionable",
    "jax_numpy_dtype_promotion",
    "jax_default_prng_impl",
    "jax_numpy_rank_promotion",
)


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """SHA-256 of the library's Python sources: an edited library never loads an older export."""
    root = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                h.update(os.path.relpath(path, root).encode())
                with open(path, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def _environment() -> tuple:
    import jaxlib

    config = tuple((name, str(jax.config.values.get(name))) for name in _CONFIG if name in jax.config.values)
    try:
        import optax

        optax_version = optax.__version__
    except ImportError:  # pragma: no cover - optax is a dependency
        optax_version = ""
    versions = (jax.__version__, getattr(jaxlib, "__version__", ""), optax_version, np.__version__)
    return versions + (jax.default_backend(), config, source_digest())


def _is_key(leaf) -> bool:
    return isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def key_data_leaves(leaves) -> list:
    """The leaves with each typed PRNG key replaced by its raw data (an export takes plain arrays)."""
    return [jax.random.key_data(leaf) if _is_key(leaf) else leaf for leaf in leaves]


def exportable_leaves(leaves) -> bool:
    """Whether every leaf is a single-device array (typed PRNG keys included), a numpy array or a
    Python scalar, and no mesh is in effect (a sharded program keeps JAX's own path)."""
    for leaf in leaves:
        if isinstance(leaf, jax.Array):
            if len(leaf.sharding.device_set) > 1:
                return False
            if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.extended) and not _is_key(leaf):
                return False
        elif not isinstance(leaf, (np.ndarray, np.generic, bool, int, float)):
            return False
    try:
        if not jax.sharding.get_abstract_mesh().empty:
            return False
    except AttributeError:  # pragma: no cover - depends on the JAX version
        pass
    return True


class _Unstable(Exception):
    """A value whose description would not be the same in another process."""


#: modules whose functions are described by name (their code is fixed by the versions in the key)
_KNOWN_MODULES = ("jaxselect", "optax", "jax", "numpy")


def describe(obj, depth: int = 0) -> str:
    """A description of a static value that is equal in two processes exactly when the value would
    trace the same program: containers and dataclasses by their fields, the library's (and optax's,
    JAX's, numpy's) functions by name and closure, arrays by their bytes. Raises :class:`_Unstable`
    for anything else (a user's function, an object whose ``repr`` names an address)."""
    if depth > 40:
        raise _Unstable("too deep")
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes, np.dtype)):
        return repr(obj)
    if isinstance(obj, type):
        return f"type:{obj.__module__}.{obj.__qualname__}"
    if isinstance(obj, np.generic):
        return repr(obj) + str(obj.dtype)
    if isinstance(obj, np.ndarray):
        return f"ndarray{obj.shape}{obj.dtype}:{hashlib.sha256(np.ascontiguousarray(obj).tobytes()).hexdigest()}"
    if isinstance(obj, Static):  # the library's structural wrapper of a callable
        return f"static:{describe(obj.__wrapped__, depth + 1)}"
    if isinstance(obj, functools.partial):
        return f"partial({describe(obj.func, depth + 1)},{describe(obj.args, depth + 1)},{describe(obj.keywords, depth + 1)})"
    if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        module = getattr(obj, "__module__", None) or ""
        if not module.split(".")[0] in _KNOWN_MODULES:
            raise _Unstable(f"function of module {module!r}")
        name = f"fn:{module}.{obj.__qualname__}"
        if isinstance(obj, types.MethodType):
            return f"{name}@{describe(obj.__self__, depth + 1)}"
        cells = tuple(c.cell_contents for c in (getattr(obj, "__closure__", None) or ()))
        return f"{name}{describe(cells, depth + 1)}{describe(getattr(obj, '__defaults__', None), depth + 1)}"
    name = f"{type(obj).__module__}.{type(obj).__qualname__}"
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return f"{name}({','.join(describe(v, depth + 1) for v in obj)})"
    if isinstance(obj, (tuple, list)):
        return f"{name}[{','.join(describe(v, depth + 1) for v in obj)}]"
    if isinstance(obj, dict):
        items = sorted((describe(k, depth + 1), describe(v, depth + 1)) for k, v in obj.items())
        return f"{name}{{{','.join(f'{k}:{v}' for k, v in items)}}}"
    if dataclasses.is_dataclass(obj):
        fields = ",".join(f"{f.name}={describe(getattr(obj, f.name), depth + 1)}" for f in dataclasses.fields(obj))
        return f"{name}({fields})"
    if isinstance(obj, jax.Array):
        raise _Unstable("a captured array")
    known = type(obj).__module__.split(".")[0] in _KNOWN_MODULES or isinstance(obj, enum.Enum)
    text = repr(obj)
    if not known or " at 0x" in text or type(obj).__repr__ is object.__repr__:
        raise _Unstable(f"{name} has no stable description")
    return f"{name}:{text}"


def describe_tree(tree) -> str:
    """:func:`describe` of a tree structure: each node's type and auxiliary data, recursively."""
    children = tree.children()
    if not children and tree.num_leaves == 1 and tree.num_nodes == 1:
        return "*"
    node_type, aux = tree.node_data()
    inner = ",".join(describe_tree(child) for child in children)
    return f"{describe(node_type)}<{describe(aux)}>[{inner}]"


class ExportStore:
    """A directory of exported programs (one file per key, written atomically)."""

    def __init__(self, directory: str):
        self.directory = directory

    def key(self, fun, tree, leaf_keys, static, options) -> str | None:
        """The file name of one program, or None when its description would not be the same in
        another process (:func:`describe`)."""
        try:
            description = "|".join(
                (
                    describe(fun),
                    describe_tree(tree),
                    repr(leaf_keys),
                    describe(static),
                    describe(options),
                    repr(_environment()),
                )
            )
        except _Unstable:
            return None
        return hashlib.sha256(description.encode()).hexdigest()

    def _path(self, key: str) -> str:
        return os.path.join(self.directory, key[:2], key + ".jaxexport")

    def load(self, key: str):
        """The stored :class:`jax.export.Exported` of ``key``; ``False`` when the program is known not
        to export; None when nothing (readable) is stored."""
        try:
            with open(self._path(key), "rb") as f:
                blob = f.read()
        except OSError:
            return None
        if blob == _SKIP:
            return False
        try:
            return pickle.loads(blob)
        except Exception:  # noqa: BLE001 - a truncated or foreign file: compile the usual way
            return None

    def save(self, key: str, exported) -> None:
        """Store ``exported`` (or, with None, that the program does not export); errors are ignored:
        the store only saves time."""
        blob = _SKIP if exported is None else pickle.dumps(dataclasses.replace(exported, _get_vjp=None))
        path = self._path(key)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, path)
        except OSError:
            pass


def _run_options(options: dict) -> dict:
    """``jax.jit`` options of the thin program around an export (no static arguments: it takes leaves)."""
    return {k: v for k, v in options.items() if k not in ("static_argnames", "static_argnums")}


class ExportedProgram:
    """A program-cache entry that runs a :class:`jax.export.Exported` of the library's function: a
    ``jax.jit`` of ``Exported.call`` on the dynamic leaves of the arguments. The export is loaded
    from the store or, on the entry's first call (outside the cache's lock), made and stored.
    ``lower`` and ``trace`` (and a first call that cannot export or run the export) use a plain
    ``jax.jit`` of the function."""

    def __init__(self, store: ExportStore, key: str, owner, program, options, exported):
        self._store, self._key, self._owner = store, key, owner
        self._program, self._options = program, options
        self._plain = None
        self._run = None if exported is None else jax.jit(exported.call, **_run_options(options))
        self._checked = False  # the first call may fall back to the plain path
        self._fallback = False

    @classmethod
    def create(cls, store: ExportStore, owner, program, options, args, kwargs, signature):
        """The entry for a new signature, or None where the program keeps JAX's own path (no stable
        key, leaves that do not export, or an export that failed before)."""
        if jax.config.values.get("jax_disable_jit", False):
            return None
        dyn_args, dyn_kwargs, static = owner._split(args, kwargs)
        leaves, tree = jax.tree.flatten((dyn_args, dyn_kwargs))
        if not exportable_leaves(leaves):
            return None
        key = store.key(owner._fun, tree, signature[1], static, options)
        if key is None:
            return None
        exported = store.load(key)
        if exported is False:
            return None
        return cls(store, key, owner, program, options, exported)

    def _export(self, args, kwargs):
        """Export the function at these arguments' signature and store it (None where JAX cannot)."""
        owner, program = self._owner, self._program
        dyn_args, dyn_kwargs, _ = owner._split(args, kwargs)
        leaves, tree = jax.tree.flatten((dyn_args, dyn_kwargs))
        static_kw = {k: v for k, v in kwargs.items() if k in owner._static}
        static_pos = {i: args[i] for i in owner._static_positions if i < len(args)}
        impls = [str(jax.random.key_impl(leaf)) if _is_key(leaf) else None for leaf in leaves]

        def flat(*flat_leaves):
            flat_leaves = [
                leaf if impl is None else jax.random.wrap_key_data(leaf, impl=impl)
                for leaf, impl in zip(flat_leaves, impls)
            ]
            a, k = jax.tree.unflatten(tree, flat_leaves)
            a = list(a)
            for i, value in static_pos.items():
                a[i] = value
            return program(*a, **k, **static_kw)

        try:
            exported = jax.export.export(jax.jit(flat, **_run_options(self._options)))(*key_data_leaves(leaves))
        except Exception:  # noqa: BLE001 - host callbacks, effects, anything JAX will not export
            exported = None
        self._store.save(self._key, exported)
        return exported

    def _leaves(self, args, kwargs):
        dyn_args, dyn_kwargs, _ = self._owner._split(args, kwargs)
        return key_data_leaves(jax.tree.leaves((dyn_args, dyn_kwargs)))

    def _plain_jit(self):
        if self._plain is None:
            self._plain = jax.jit(self._program, **self._options)
        return self._plain

    def __call__(self, *args, **kwargs):
        if self._checked:
            return self._run(*self._leaves(args, kwargs))
        if self._fallback:
            return self._plain_jit()(*args, **kwargs)
        if self._run is None:
            exported = self._export(args, kwargs)
            if exported is None:
                self._fallback = True
                return self._plain_jit()(*args, **kwargs)
            self._run = jax.jit(exported.call, **_run_options(self._options))
        try:
            out = self._run(*self._leaves(args, kwargs))
        except Exception:  # noqa: BLE001 - an export this JAX cannot run: the plain program from now on
            self._fallback = True
            return self._plain_jit()(*args, **kwargs)
        self._checked = True
        return out

    def lower(self, *args, **kwargs):
        return self._plain_jit().lower(*args, **kwargs)

    def trace(self, *args, **kwargs):
        return self._plain_jit().trace(*args, **kwargs)

    def clear_cache(self):
        if self._run is not None:
            self._run.clear_cache()
        if self._plain is not None:
            self._plain.clear_cache()

    def _cache_size(self) -> int:
        return jit_cache_size(self._plain if self._fallback else self._run)
