"""Short ``repr`` for result pytrees: field names and shapes, never whole arrays."""

from __future__ import annotations

import numpy as np


def _describe(value) -> str:
    if isinstance(value, float):
        return repr(float(f"{value:.6g}"))
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if hasattr(value, "_fields"):  # a nested NamedTuple (Groups, Transform, ...)
        return short_repr(value)
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is None or dtype is None:
        return type(value).__name__
    name = np.dtype(dtype).name if not hasattr(dtype, "name") else dtype.name
    if shape == ():
        try:
            item = np.asarray(value).item()
        except Exception:  # noqa: BLE001 - a tracer or a non-addressable array: shape only
            return f"{name}[]"
        return repr(float(f"{item:.6g}")) if isinstance(item, float) else repr(item)
    return f"{name}{list(shape)}"


def short_repr(obj) -> str:
    """``Type(field=dtype[shape], ...)`` — scalars show their value, nested tuples recurse."""
    return f"{type(obj).__name__}(" + ", ".join(f"{f}={_describe(getattr(obj, f))}" for f in obj._fields) + ")"
