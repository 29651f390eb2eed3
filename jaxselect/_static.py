"""Canonical static arguments: equal-but-new callables must not recompile a jitted solver.

``jax.jit`` keys its cache on static arguments by hash/equality, and a function is only equal to
itself: ``optax.sgd(0.1)`` built afresh on every call, or a ``lambda`` loss defined inside a user's
loop, is a new object each time and would trigger a new trace and XLA compilation. :func:`canonical`
maps such an object to the first *structurally equal* one seen before: two functions are equal when
they share their code object, globals, defaults and (recursively) the values in their closures;
tuples, NamedTuples (optax's ``GradientTransformation``) and ``functools.partial`` compare by
their contents; small concrete arrays by value; everything else — mutable containers included, so a
closure keeps its own list — by identity. Objects that
cannot be fingerprinted (a closure over a traced value, a very large array) are returned as they
are, which only costs the recompilation this module avoids.
"""

from __future__ import annotations

import functools
import types
from collections import OrderedDict

import jax
import numpy as np

from jaxselect._compat import is_tracer

__all__ = ["canonical"]

_MAX_ENTRIES = 512
_MAX_ARRAY_SIZE = 1 << 16
_MAX_DEPTH = 64
_CACHE: OrderedDict = OrderedDict()


class _Unhashable(Exception):
    pass


def _fp(obj, depth: int, stack: tuple):
    if depth > _MAX_DEPTH:
        raise _Unhashable
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        return (type(obj), obj)
    if id(obj) in stack:
        return ("cycle", stack.index(id(obj)))
    stack = stack + (id(obj),)
    if is_tracer(obj):
        raise _Unhashable
    if isinstance(obj, (np.ndarray, np.generic, jax.Array)):
        if obj.size > _MAX_ARRAY_SIZE:
            return ("id", id(obj))
        a = np.asarray(obj)
        return ("array", a.dtype.str, a.shape, a.tobytes())
    if isinstance(obj, tuple):  # immutable: compared by contents (optax's GradientTransformation)
        return (type(obj), tuple(_fp(v, depth + 1, stack) for v in obj))
    if isinstance(obj, (list, dict, set, bytearray)):
        # mutable: a fresh closure over a new list (e.g. a callback appending to it) must keep its own
        return ("id", id(obj))
    if isinstance(obj, functools.partial):
        return (
            "partial",
            _fp(obj.func, depth + 1, stack),
            _fp(obj.args, depth + 1, stack),
            _fp(obj.keywords, depth + 1, stack),
        )
    if isinstance(obj, types.MethodType):
        return ("method", _fp(obj.__func__, depth + 1, stack), _fp(obj.__self__, depth + 1, stack))
    if isinstance(obj, types.FunctionType):
        cells = obj.__closure__ or ()
        try:
            contents = tuple(c.cell_contents for c in cells)
        except ValueError as exc:  # an empty cell (a closure variable not yet assigned)
            raise _Unhashable from exc
        return (
            "function",
            obj.__code__,
            id(obj.__globals__),
            _fp(obj.__defaults__, depth + 1, stack),
            _fp(obj.__kwdefaults__, depth + 1, stack),
            _fp(contents, depth + 1, stack),
        )
    return ("id", id(obj))


def canonical(obj):
    """The first structurally equal object seen before, or ``obj`` itself (see module docstring)."""
    if obj is None or isinstance(obj, str):
        return obj
    try:
        key = _fp(obj, 0, ())
        hash(key)
    except (_Unhashable, TypeError):
        return obj
    found = _CACHE.get(key)
    if found is not None:
        _CACHE.move_to_end(key)
        return found
    _CACHE[key] = obj
    if len(_CACHE) > _MAX_ENTRIES:
        _CACHE.popitem(last=False)
    return obj
