"""Host-side (numpy) values at the family's Python boundary: building them compiles nothing.

In JAX ``jnp.asarray(value)`` of a concrete value compiles a small XLA program per shape and dtype
(``stage``, ``convert_element_type``); the family's public calls build their options as numpy
values instead and hand them to the one compiled program of the call, which converts them. Traced
values (inside a user's ``jit``/``vmap``) pass through unchanged.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxselect._validation import _check_in_dtype, _is_numeric, check_float, is_traced

__all__ = ["host_hyper", "host_or_traced"]


def host_hyper(value, name: str, dtype, *, low: float | None = None, strict_low: bool = False, high: float | None = None):
    """:func:`jaxselect._validation.as_hyper`'s checks; a concrete value comes back as a 0-d numpy
    array of ``dtype`` (no compile), a traced one as a traced scalar of ``dtype``."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a real number; got {value!r}")
    if is_traced(value):
        if jnp.shape(value) != ():
            raise TypeError(f"{name} must be a scalar; got shape {jnp.shape(value)}")
        return jnp.asarray(value, dtype)
    arr = np.asarray(value)
    if arr.shape != () or arr.dtype == object or not _is_numeric(arr.dtype):
        raise TypeError(f"{name} must be a real scalar; got {value!r}")
    try:
        as_float = float(arr)
    except OverflowError:  # an integer beyond every float
        raise ValueError(f"{name} must be finite; got {value!r}") from None
    as_float = check_float(as_float, name, low=low, high=high, strict_low=strict_low)
    _check_in_dtype(as_float, name, dtype)
    return np.asarray(arr, np.dtype(dtype))


def host_or_traced(value, dtype):
    """``value`` as ``dtype``: numpy when concrete (no compile), ``jnp`` when traced or already on device."""
    if is_traced(value):
        return jnp.asarray(value, dtype)
    return np.asarray(value, np.dtype(dtype))
