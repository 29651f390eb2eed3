"""The one place jaxselect touches JAX beyond its stable public API.

Every other module imports what it needs from here, so a JAX release that moves one of these names
breaks one small module with a test per code path (``tests/test_compat.py``), not the solvers.

- :data:`Tracer`: the class of traced values (``jax.core.Tracer``; ``jax.core`` is public but
  mostly deprecated, so the name is read here, once). :func:`is_tracer` is the test every module
  uses to skip value checks on traced inputs.
- :func:`no_mesh`: leave a ``jax.set_mesh`` context for a call *exactly as if there were none*.
  The public way, ``jax.set_mesh`` of an empty mesh, installs that empty mesh, which is part of
  jit's cache key, so every solver called inside ``set_mesh`` would compile again. JAX's private
  configuration (``jax._src.config``) lets the context's two values be reset to their unset default
  instead; without it (a JAX that moved it) :func:`no_mesh` falls back to the public way: the same
  results, one more compilation per solver. (``jax.set_mesh(None)`` would be shorter but JAX 0.9
  rejects ``None``.)

``jax.experimental.multihost_utils`` (used for multi-process gathers) is public, documented API
and is imported where it is used.

Supported JAX: 0.9.0 (the floor in ``pyproject.toml``, run by CI's floor environment) to the
newest release; both use the private path of :func:`no_mesh`.
"""

from __future__ import annotations

import contextlib

import jax
import numpy as np
from jax.sharding import Mesh

__all__ = ["Tracer", "is_tracer", "jit_cache_size", "no_mesh", "top_level", "MESH_CONTEXT_PATH"]

Tracer = jax.core.Tracer


def is_tracer(x) -> bool:
    """True when ``x`` is a traced value (inside ``jit``/``vmap``/``grad``)."""
    return isinstance(x, Tracer)


def _private_mesh_context():
    """``(managers, unset)`` of JAX's private mesh-context configuration, or None when it has moved."""
    try:
        from jax._src import config as _config

        managers = (_config.abstract_mesh_context_manager, _config.device_context)
        unset = _config.config_ext.unset
        for m in managers:  # the two methods no_mesh needs
            if not (callable(getattr(m, "swap_local", None)) and callable(getattr(m, "set_local", None))):
                return None
    except (ImportError, AttributeError):
        return None
    return managers, unset


_MESH_CONTEXT = _private_mesh_context()
#: ``"private"`` (reset JAX's context values: no recompilation) or ``"public"`` (set an empty mesh).
MESH_CONTEXT_PATH = "private" if _MESH_CONTEXT is not None else "public"


@contextlib.contextmanager
def no_mesh():
    """Run the body outside any ``jax.set_mesh`` context, exactly as if none had been entered.

    On the private path the compiled code of a plain call is reused; on the public fallback
    (``jax.set_mesh`` of an empty mesh) the body sees an empty mesh, which compiles once more per
    solver.
    """
    if _MESH_CONTEXT is None:
        yield from _public_no_mesh()
        return
    managers, unset = _MESH_CONTEXT
    previous = tuple(m.swap_local(unset) for m in managers)
    try:
        yield
    finally:
        for m, value in zip(managers, previous):
            m.set_local(value)


def _public_no_mesh():
    try:
        lifted = jax.set_mesh(Mesh(np.empty((), dtype=object), ()))
    except ValueError:  # inside a trace with only constant inputs: nothing to lift there
        lifted = contextlib.nullcontext()
    with lifted:
        yield


def jit_cache_size(jitted) -> int:
    """The number of compiled signatures a ``jax.jit`` function holds (JAX's private
    ``_cache_size``; 0 where this JAX has none)."""
    size = getattr(jitted, "_cache_size", None)
    return int(size()) if callable(size) else 0


def top_level() -> bool:
    """Whether no JAX transformation is tracing now (JAX's private ``trace_state_clean``; False,
    the safe answer, where it has moved)."""
    try:
        from jax._src import core

        return bool(core.trace_state_clean())
    except (ImportError, AttributeError):  # pragma: no cover - depends on the JAX version
        return False
