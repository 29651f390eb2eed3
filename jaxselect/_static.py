"""Canonical static arguments: equal-but-new callables must not recompile a jitted solver.

``jax.jit`` keys its cache on static arguments by hash/equality, and a function is only equal to
itself: ``optax.sgd(0.1)`` built afresh on every call, or a ``lambda`` loss defined inside a user's
loop, is a new object each time and would trigger a new trace and XLA compilation.
:func:`canonical` gives such an object a *structural* equality instead of identity: a callable is
wrapped in a small frozen :class:`Static` that forwards calls and attributes to it and whose
``__eq__``/``__hash__`` compare a fingerprint: two functions are equal when they share their code
object, globals, defaults and (recursively) the values in their closures; tuples, NamedTuples and
``functools.partial`` compare by their contents; small concrete arrays by value; everything else —
mutable containers included, so a closure keeps its own list — by identity. A NamedTuple of
callables (optax's ``GradientTransformation``) keeps its type and gets each callable field
canonicalised, so ``isinstance`` checks and ``opt.init``/``opt.update`` work as before.

Nothing is cached here: the fingerprint lives in the wrapper, and what keeps a wrapper (and the
object in it) alive is jit's own bounded cache of static arguments. Every object whose identity
enters a fingerprint is referenced by the wrapper, so an identity is never reused while the
fingerprint that holds it exists. Objects that cannot be fingerprinted (a closure over a traced
value or with an empty cell, a nesting deeper than 64) are returned as they are, which only costs
the recompilation this module avoids.
"""

from __future__ import annotations

import functools
import sys
import types

import jax
import numpy as np

from jaxselect._compat import is_tracer

__all__ = ["Static", "canonical"]

_MAX_ARRAY_SIZE = 1 << 16
_MAX_DEPTH = 64


class _Unhashable(Exception):
    pass


def _fp(obj, depth: int, stack: tuple, pins: list):
    """Structural fingerprint of ``obj``; objects compared by identity are appended to ``pins``."""
    if depth > _MAX_DEPTH:
        raise _Unhashable
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        return (type(obj), obj)
    if id(obj) in stack:
        return ("cycle", stack.index(id(obj)))
    stack = stack + (id(obj),)
    if isinstance(obj, Static):
        return ("static", obj._key)
    if is_tracer(obj):
        raise _Unhashable
    if isinstance(obj, (np.ndarray, np.generic, jax.Array)):
        if obj.size > _MAX_ARRAY_SIZE:
            pins.append(obj)
            return ("id", id(obj))
        a = np.asarray(obj)
        return ("array", a.dtype.str, a.shape, a.tobytes())
    if isinstance(obj, tuple):  # immutable: compared by contents (optax's GradientTransformation)
        return (type(obj), tuple(_fp(v, depth + 1, stack, pins) for v in obj))
    if isinstance(obj, functools.partial):
        return (
            "partial",
            _fp(obj.func, depth + 1, stack, pins),
            _fp(obj.args, depth + 1, stack, pins),
            # a partial's keywords dict is its own (a new dict per partial, never shared): by contents
            tuple(sorted((k, _fp(v, depth + 1, stack, pins)) for k, v in obj.keywords.items())),
        )
    if isinstance(obj, types.MethodType):
        return ("method", _fp(obj.__func__, depth + 1, stack, pins), _fp(obj.__self__, depth + 1, stack, pins))
    if isinstance(obj, types.FunctionType):
        cells = obj.__closure__ or ()
        try:
            contents = tuple(c.cell_contents for c in cells)
        except ValueError as exc:  # an empty cell (a closure variable not yet assigned)
            raise _Unhashable from exc
        pins.append(obj.__globals__)
        pins.append(contents)
        return (
            "function",
            obj.__code__,
            id(obj.__globals__),
            _fp(obj.__defaults__, depth + 1, stack, pins),
            _fp(obj.__kwdefaults__, depth + 1, stack, pins),
            _fp(contents, depth + 1, stack, pins),
        )
    # mutable containers (a fresh closure over a new list must keep its own) and everything else
    pins.append(obj)
    return ("id", id(obj))


class Static:
    """A callable compared by structure: forwards calls and attributes to the wrapped object.

    Built by :func:`canonical`; hashable and immutable, so it can be a static ``jax.jit`` argument.
    Two wrappers are equal when their objects' fingerprints are (see the module docstring).

    >>> from jaxselect._static import canonical
    >>> f, g = (canonical(lambda s, t: s - t) for _ in range(2))
    >>> f == g, hash(f) == hash(g), f(3, 1)
    (True, True, 2)
    """

    __slots__ = ("__wrapped__", "_key", "_hash", "_pins", "__weakref__")

    def __init__(self, obj, key, pins):
        object.__setattr__(self, "__wrapped__", obj)
        object.__setattr__(self, "_key", key)
        object.__setattr__(self, "_hash", hash(key))
        object.__setattr__(self, "_pins", tuple(pins))  # keeps every identity in the key alive

    def __call__(self, *args, **kwargs):
        return self.__wrapped__(*args, **kwargs)

    def __getattr__(self, name):
        if name in Static.__slots__:  # not yet set (copy/pickle protocols): no forwarding
            raise AttributeError(name)
        return getattr(self.__wrapped__, name)

    def __setattr__(self, name, value):
        raise AttributeError("a canonical static argument is immutable")

    def __eq__(self, other):
        if not isinstance(other, Static):
            return NotImplemented
        return self is other or (self._hash == other._hash and self._key == other._key)

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"canonical({self.__wrapped__!r})"

    def __reduce__(self):
        return (canonical, (self.__wrapped__,))


def _is_importable(obj) -> bool:
    """Whether ``obj`` is what its module holds under its qualified name (a stable, unique object)."""
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    qualname = getattr(obj, "__qualname__", None)
    if module is None or not isinstance(qualname, str) or "<" in qualname:
        return False
    found = module
    for part in qualname.split("."):
        found = getattr(found, part, None)
        if found is None:
            return False
    return found is obj


def canonical(obj):
    """``obj`` with structural equality, for use as a static ``jax.jit`` argument.

    * ``None``, strings, numbers, and objects that are already canonical: returned as they are;
      so is a function its module exports under its qualified name (``js.losses.squared_loss``,
      ``jnp.tanh``): the same object on every call, so identity is already the right equality.
    * a NamedTuple (optax's ``GradientTransformation``): the same type with every field
      canonicalised (its callables compare by structure; ``isinstance`` still holds).
    * any other callable: a :class:`Static` wrapper (equal to every wrapper of a structurally
      equal callable), or the callable itself when it cannot be fingerprinted.
    * anything else: returned as it is.

    >>> import optax
    >>> canonical(optax.sgd(0.1)) == canonical(optax.sgd(0.1)), canonical(optax.sgd(0.1)) == canonical(optax.sgd(0.2))
    (True, False)
    """
    if obj is None or isinstance(obj, (str, bool, int, float, complex, Static)):
        return obj
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)._make(canonical(v) for v in obj)
    if not callable(obj) or _is_importable(obj):
        return obj
    pins: list = []
    try:
        key = _fp(obj, 0, (), pins)
        hash(key)
    except (_Unhashable, TypeError):
        return obj
    return Static(obj, key, pins)
