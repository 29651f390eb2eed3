"""Checks run at the Python boundary, before anything is traced.

Every public solver validates its inputs with these helpers so that bad input raises a
``ValueError``/``TypeError`` that says what to fix, instead of a NaN deep inside a jitted solve.

Dtype rule (shared by the whole library): floating inputs keep their precision where JAX can hold
it (float64 only under ``jax_enable_x64``), everything else (ints, bools) becomes the default float
(float32, or float64 under x64). Inputs that are already ``jax.Array``s are checked on device and
returned as they are, so a row-sharded X keeps its sharding. Inside a user's ``jit``/``vmap`` (traced
inputs) only shapes and dtypes can be checked; value checks (NaN/Inf, constant columns) are skipped.
"""

from __future__ import annotations

import numbers
import os
import sys
import warnings
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect.programs import jit
from jaxselect._compat import is_tracer, top_level

__all__ = [
    "as_device",
    "clip_k",
    "default_float",
    "is_traced",
    "host_value",
    "float_dtype_for",
    "as_float_matrix",
    "check_matrix",
    "check_targets",
    "as_targets",
    "as_labels",
    "check_int",
    "check_float",
    "check_choice",
    "MIN_ROWS",
    "CONSTANT_MODES",
    "as_vector_target",
    "as_binary_labels",
    "check_constant_mode",
    "as_hyper",
    "check_scale",
    "scale_limits",
    "scale_error",
    "raise_nonfinite",
    "check_result_type",
]

#: Every solver needs at least this many training rows (centring and scaling need two).
MIN_ROWS = 2
#: What a solver does with constant columns: "inert" (default: never selected, coefficient 0) or "raise".
CONSTANT_MODES = ("inert", "raise")


def default_float():
    """float64 when ``jax_enable_x64`` is on, else float32."""
    return jnp.float64 if jax.config.jax_enable_x64 else jnp.float32


def float_dtype_for(dtype) -> np.dtype:
    """The floating dtype the library computes in for an input of ``dtype``."""
    dtype = np.dtype(dtype)
    if dtype == np.float64 and jax.config.jax_enable_x64:
        return np.dtype(np.float64)
    if dtype in (np.float16, np.float32) or dtype == jnp.bfloat16:
        return np.dtype(np.float32)
    return np.dtype(default_float())


def _is_numeric(dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind in "biuf" or dtype == jnp.bfloat16


def is_traced(a) -> bool:
    """True when any leaf of ``a`` is being traced by jit/vmap/grad: value checks cannot run on it."""
    return any(is_tracer(leaf) for leaf in jax.tree.leaves(a))


def host_array(a) -> np.ndarray:
    """``np.asarray(a)``; a global ``jax.Array`` spread over several processes is gathered first."""
    if isinstance(a, jax.Array) and not a.is_fully_addressable:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(a, tiled=True))
    return np.asarray(a)


def as_device(a, dtype=None) -> jax.Array:
    """``a`` as a ``jax.Array`` in ``dtype`` (None: its own, canonicalised). A numpy array (or a
    scalar, a list) is converted on the host and placed by ``jax.device_put``, which compiles
    nothing: ``jnp.asarray`` of a numpy array, or ``astype`` of a device array, compiles a small
    program for every new shape."""
    if isinstance(a, jax.Array):
        return a if dtype is None or a.dtype == dtype else a.astype(dtype)
    return jax.device_put(np.asarray(a, dtype))


def host_value(fn):
    """``np.asarray(fn())``, or None when it depends on traced values (inside a user's jit/vmap)."""
    try:
        return np.asarray(fn())
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
        return None


def _all_finite(a) -> bool:
    if is_traced(a):
        return True  # inside a user's jit/vmap: shapes are checked, values cannot be
    if isinstance(a, jax.Array):
        ok = host_value(lambda: jnp.isfinite(a).all())
        return True if ok is None else bool(ok)
    return bool(np.isfinite(a).all())


def as_float_matrix(
    X,
    name: str = "X",
    *,
    dtype=None,
    min_rows: int = 1,
    min_cols: int = 1,
    check_finite: bool = True,
    scale: str | None = None,
):
    """Validate a 2-D numeric array with finite entries and return it as a float array.

    Args:
      X: (n, d) array-like (numpy, list, or jax.Array; a jax.Array keeps its sharding).
      name: name used in error messages.
      dtype: force this floating dtype (default: ``float_dtype_for(X.dtype)``).
      min_rows, min_cols: smallest accepted shape.
      check_finite: check for NaN/Inf here (callers that fuse the check into their own pass over
        X set it False and must check themselves).
      scale: None, ``"values"`` or ``"squares"``: also run :func:`check_scale` (with
        ``squares=scale == "squares"``), fused with the NaN/Inf check into one min/max pass over X.

    Returns:
      A jax.Array of shape (n, d).
    """
    if not isinstance(X, jax.Array):
        X = np.asarray(X)
    check_matrix(X, name, min_rows=min_rows, min_cols=min_cols)
    target = np.dtype(dtype) if dtype is not None else float_dtype_for(X.dtype)
    original = X
    if isinstance(X, np.ndarray) and scale is None:  # host values: cast and check on the host (no compiled op)
        X = _host_cast(X, target, name)
        if check_finite and not np.isfinite(X).all():
            raise_nonfinite(original, name, target, "remove or impute those entries first")
        return jax.device_put(X)
    X = _cast(X, target, name)
    if scale is not None:
        check_scale(X, name, squares=scale == "squares", unchecked=original if check_finite else None)
    elif check_finite and not _all_finite(X):
        raise_nonfinite(original, name, target, "remove or impute those entries first")
    return X


def check_matrix(X, name: str = "X", *, min_rows: int = 1, min_cols: int = 1) -> None:
    """TypeError/ValueError unless X (an array, not converted) is a numeric 2-D (n, d) array with
    at least ``min_rows`` rows and ``min_cols`` columns; a 1-D X gets the ``reshape`` hint. A sparse
    matrix wrapped by ``np.asarray`` (a 0-d object array) gets a message naming the sparse routes."""
    if X.dtype == object and X.ndim == 0 and "sparse" in type(X.item()).__module__:
        raise TypeError(
            f"{name} is a sparse matrix ({type(X.item()).__name__}) and this function needs a dense array: pass "
            f"{name}.toarray() if it fits in memory (jaxselect.as_data and the solvers built on it take sparse "
            f"{name} without densifying)"
        )
    if X.dtype == object or not _is_numeric(X.dtype):
        raise TypeError(f"{name} must be a numeric array; got dtype {X.dtype}")
    if X.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D (n_samples, n_features); got shape {tuple(X.shape)}"
            + (
                " — use X.reshape(-1, 1) for a single feature, or X.reshape(1, -1) for a single sample"
                if X.ndim == 1
                else ""
            )
        )
    if X.shape[0] < min_rows:
        raise ValueError(f"{name} needs at least {min_rows} rows; got {X.shape[0]}")
    if X.shape[1] < min_cols:
        raise ValueError(f"{name} needs at least {min_cols} columns; got {X.shape[1]}")


def check_targets(Y, n: int, name: str = "Y") -> None:
    """TypeError/ValueError unless Y (an array, not converted) is numeric, (n,) or (n, T) with T ≥ 1."""
    if Y.dtype == object or not _is_numeric(Y.dtype):
        raise TypeError(f"{name} must be numeric; got dtype {Y.dtype}")
    if Y.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D (n,) or 2-D (n, T); got shape {tuple(Y.shape)}")
    if Y.shape[0] != n:
        raise ValueError(f"{name} has {Y.shape[0]} rows but X has {n}; they must match")
    if Y.ndim == 2 and Y.shape[1] < 1:
        raise ValueError(f"{name} must have at least one target column")


def _host_cast(A: np.ndarray, target, name: str) -> np.ndarray:
    """``np.asarray(A, target)`` on the host (a value beyond the dtype becomes Inf, which the
    caller's finiteness check reports), with a clear error for values no float can hold."""
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(A, dtype=target)
    except OverflowError:
        raise ValueError(f"{name} has values too large for {np.dtype(target)}; rescale {name}") from None


def _cast(A, target, name: str):
    """``jnp.asarray(A, target)``, with a clear error for values no float can hold (e.g. int > 2**1023)."""
    try:
        return jnp.asarray(A, dtype=target)
    except OverflowError:
        raise ValueError(f"{name} has values too large for {np.dtype(target)}; rescale {name}") from None


def raise_nonfinite(original, name: str, target, fix: str):
    """The error for non-finite values after the cast to ``target``: NaN/Inf in the input, or a
    finite input beyond the dtype's range (1e39 in float32)."""
    if not is_traced(original) and not isinstance(original, jax.Array):
        values = np.asarray(original)
        if values.dtype.kind in "biuf" and np.isfinite(values.astype(np.float64)).all():
            big = float(np.max(np.abs(values.astype(np.float64))))
            raise ValueError(
                f"{name} has values up to {big:.3g}, beyond the range of {np.dtype(target)} (max "
                f"{float(np.finfo(target).max):.3g}); rescale {name} (divide it by a constant), or use float64 "
                "(jax.config.update('jax_enable_x64', True) with float64 input)"
            )
    rows, cols = nonfinite_cells(original)
    raise ValueError(nonfinite_message(name, rows, cols, fix))


def _first(indices: np.ndarray) -> str:
    shown = np.asarray(indices)[:10].tolist()
    return f"{shown}" + (f" (and {indices.size - 10} more)" if indices.size > 10 else "")


def nonfinite_message(name: str, rows, cols=None, fix: str = "", *, where: str = "") -> str:
    """The library's one wording for NaN/Inf in data: the first offending rows and columns.

    ``X contains NaN or Inf in row(s) [4] and column(s) [1, 7]; remove or impute those entries
    first``; ``where`` (e.g. ``" (batch 2, rows 200–299)"``) follows the positions for streamed data.
    """
    rows = np.asarray(rows if rows is not None else [], int)
    cols = np.asarray(cols if cols is not None else [], int)
    at = ""
    if rows.size:
        at = f" in row(s) {_first(rows)}" + (f" and column(s) {_first(cols)}" if cols.size else "")
    return f"{name} contains NaN or Inf{at}{where}" + (f"; {fix}" if fix else "")


def nonfinite_cells(A, *, row_offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, columns)``: the rows (axis 0) and the columns (axis 1, empty for 1-D) of a concrete
    array that hold NaN or Inf, rows shifted by ``row_offset`` (both empty when traced)."""
    empty = np.zeros(0, int)
    if is_traced(A):
        return empty, empty
    if isinstance(A, jax.Array):
        bad = host_value(lambda: ~jnp.isfinite(A) if A.ndim else None)
        if bad is None:
            return empty, empty
        bad = np.asarray(bad)
    else:
        values = np.asarray(A)
        if values.dtype.kind not in "biuf" or values.ndim == 0:
            return empty, empty
        bad = ~np.isfinite(values.astype(np.float64, copy=False))
    if bad.ndim == 1:
        return np.flatnonzero(bad) + row_offset, empty
    flat = bad.reshape(bad.shape[0], -1)
    return np.flatnonzero(flat.any(axis=1)) + row_offset, np.flatnonzero(flat.any(axis=0))


def nonfinite_rows(A) -> np.ndarray:
    """Indices of the rows (axis 0) of a concrete array that hold NaN or Inf (empty when traced)."""
    if is_traced(A):
        return np.zeros(0, int)
    if isinstance(A, jax.Array):
        bad = host_value(lambda: ~jnp.all(jnp.isfinite(A.reshape((A.shape[0], -1))), axis=1) if A.ndim else None)
        return np.flatnonzero(np.asarray(bad)) if bad is not None else np.zeros(0, int)
    values = np.asarray(A)
    if values.dtype.kind not in "biuf" or values.ndim == 0:
        return np.zeros(0, int)
    return np.flatnonzero(~np.isfinite(values.astype(np.float64, copy=False)).reshape(values.shape[0], -1).all(axis=1))


def as_targets(Y, n: int, name: str = "Y", *, dtype=None):
    """Validate regression targets: 1-D (n,) or 2-D (n, T), finite.

    Returns:
      (Y2, was_1d): Y2 is a float jax.Array of shape (n, T); was_1d says the input was 1-D.
    """
    if not isinstance(Y, jax.Array):
        Y = np.asarray(Y)
    check_targets(Y, n, name)
    was_1d = Y.ndim == 1
    target = np.dtype(dtype) if dtype is not None else float_dtype_for(Y.dtype)
    original = Y
    if isinstance(Y, np.ndarray):  # host values: cast, reshape and check on the host (no compiled op)
        Y = _host_cast(Y, target, name)
        Y = Y[:, None] if was_1d else Y
        if not np.isfinite(Y).all():
            raise_nonfinite(original, name, target, "remove those rows first")
        return jax.device_put(Y), was_1d  # (jnp.asarray would compile a copy program per shape)
    if isinstance(Y, jax.Array) and top_level() and not is_traced(Y) and Y.is_fully_addressable:
        Y, finite = _column_and_finite(Y, target=np.dtype(target))  # one program, not three eager ops
        if not bool(finite):
            raise_nonfinite(original, name, target, "remove those rows first")
        return Y, was_1d
    Y = _cast(Y, target, name)
    if was_1d:
        Y = Y[:, None]
    if not _all_finite(Y):
        raise_nonfinite(original, name, target, "remove those rows first")
    return Y, was_1d


@partial(jit, static_argnames=("target",))
def _column_and_finite(Y, *, target):
    """``(Y as (n, T) of dtype target, all entries finite)`` for a concrete device Y."""
    Y = Y.astype(target)
    Y = Y[:, None] if Y.ndim == 1 else Y
    return Y, jnp.all(jnp.isfinite(Y))


def _squeeze_column(y, name: str):
    """(n,) as is; (n, 1) → (n,); anything else is left for the caller's shape check."""
    if getattr(y, "ndim", 0) == 2 and y.shape[1] == 1:
        return y[:, 0]
    return y


def as_labels(y, n: int, name: str = "y", *, n_classes: int | None = None):
    """Validate class labels 0..C-1 of shape (n,) (or (n, 1)); bool labels are classes 0/1.

    Float arrays whose values are whole numbers are accepted. Returns ``(labels, C)``: a numpy
    int32 array and C = ``max + 1`` (or ``n_classes`` when given). Inside a user's ``jit``/``vmap``
    (traced ``y``) the values cannot be read: ``n_classes`` is then required and ``labels`` is the
    traced int32 array, unchecked. A global ``jax.Array`` whose rows live on several processes
    (not fully addressable) is checked on its gathered values (:func:`host_array`) and returned as
    the global int32 jax.Array (same sharding; callers read its values with :func:`host_array`).
    """
    if not isinstance(y, jax.Array):
        y = np.asarray(y)
    y = _squeeze_column(y, name)
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-D (n,) class labels; got shape {tuple(y.shape)}")
    if y.shape[0] != n:
        raise ValueError(f"{name} has {y.shape[0]} entries but X has {n} rows; they must match")
    if not _is_numeric(y.dtype):
        raise TypeError(f"{name} must hold integer class labels 0..C-1; got dtype {y.dtype}")
    if is_traced(y):
        if n_classes is None:
            raise ValueError(
                f"{name} is traced (inside jax.jit/vmap), so the number of classes cannot be read "
                "from it: pass n_classes=C"
            )
        return jnp.asarray(y).astype(jnp.int32), int(n_classes)
    spread = isinstance(y, jax.Array) and not y.is_fully_addressable  # rows on several processes
    y_global = y
    y = host_array(y)
    if y.dtype == bool:
        y = y.astype(np.int64)
    if y.dtype.kind == "f":
        if not np.isfinite(y).all():
            raise ValueError(f"{name} contains NaN or Inf")
        if not np.all(y == np.round(y)):
            raise ValueError(f"{name} must hold integer class labels 0..C-1; got non-integer values")
    labels = y.astype(np.int64)
    if labels.size and labels.min() < 0:
        raise ValueError(f"{name} must hold class labels 0..C-1; got negative label {labels.min()}")
    C = int(labels.max()) + 1 if labels.size else 0
    if n_classes is not None:
        if C > n_classes:
            raise ValueError(f"{name} has label {C - 1} but n_classes={n_classes}")
        C = n_classes
    if spread:  # every process ran the checks on the same gathered values; the labels stay global
        return y_global.astype(jnp.int32), C
    return labels.astype(np.int32), C


def as_binary_labels(y, n: int, name: str = "y", *, dtype=None):
    """Validate binary labels and return them as a float (n,) array of 0/1 (1 = positive class).

    Accepted codings (the library's one rule for binary solvers): {0, 1}, {−1, +1} and bool, of
    shape (n,) or (n, 1). Both classes must occur. Traced labels (inside a user's ``jit``) are
    mapped by ``y > 0`` without value checks.
    """
    if not isinstance(y, jax.Array):
        y = np.asarray(y)
    y = _squeeze_column(y, name)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},) (binary labels, one per row of X); got {tuple(y.shape)}")
    if y.dtype == object or not _is_numeric(y.dtype):
        raise TypeError(f"{name} must hold binary labels in {{0, 1}}, {{-1, +1}} or bool; got dtype {y.dtype}")
    dtype = default_float() if dtype is None else dtype
    if not is_traced(y):
        values = np.unique(host_array(y).astype(np.float64))
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{name} contains NaN or Inf")
        if not (set(values.tolist()) <= {0.0, 1.0} or set(values.tolist()) <= {-1.0, 1.0}):
            shown = values[:6].tolist()
            extra = (
                " — for more than two classes use a multiclass solver (labels 0..C-1)"
                if values.size > 2 and np.all(values == np.round(values))
                else ""
            )
            raise ValueError(
                f"{name} must hold binary labels in {{0, 1}}, {{-1, +1}} or bool; got values {shown}{extra}"
            )
        if values.size < 2:
            raise ValueError(f"{name} has a single class {values.tolist()}; a binary solver needs both classes")
    if isinstance(y, np.ndarray):  # host labels: mapped on the host (no compiled op)
        positive = y if y.dtype == bool else y > 0
        return jax.device_put(positive.astype(np.dtype(dtype)))
    yj = jnp.asarray(y)
    positive = yj if yj.dtype == bool else yj > jnp.zeros((), yj.dtype)
    return jnp.where(positive, jnp.ones((), dtype), jnp.zeros((), dtype))


def as_vector_target(y, n: int, name: str = "y", *, dtype=None):
    """Validate a single real target: shape (n,) or (n, 1), numeric, finite. Returns (n,) float."""
    if not isinstance(y, jax.Array):
        y = np.asarray(y)
    y = _squeeze_column(y, name)
    Y, _ = as_targets(y, n, name, dtype=dtype)
    if Y.shape[1] != 1:
        raise ValueError(f"{name} must be a single target of shape ({n},) or ({n}, 1); got {tuple(y.shape)}")
    return Y[:, 0]


def check_constant_mode(value) -> str:
    """Validate the ``constant_columns`` option ("inert" or "raise")."""
    if value not in CONSTANT_MODES:
        raise ValueError(f"constant_columns must be one of {CONSTANT_MODES}; got {value!r}")
    return value


def host_hyper(value, name: str, dtype, *, low: float | None = None, strict_low: bool = False, high: float | None = None):
    """A real hyper-parameter that may be traced (``l2``, a cost), checked on the host: a concrete
    value comes back as a 0-d numpy array of ``dtype`` (building it compiles nothing), a traced one
    as a traced scalar of ``dtype``.

    Concrete values are checked for finiteness and range here, *in the dtype the solver computes
    in*: a value that overflows it (1e39 in float32) or comes within 16× of its largest number, or
    a non-zero value that rounds to 0 in it (1e-46 in float32), is a ValueError. A traced value
    (inside a user's ``jit``/``vmap``/``grad``) is checked for shape only.
    """
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


def as_hyper(value, name: str, dtype, *, low: float | None = None, strict_low: bool = False, high: float | None = None):
    """:func:`host_hyper`'s checks, the value on the device: a 0-d array of ``dtype`` (a host
    number is put there without a compiled cast; a device array or a traced value is cast)."""
    checked = host_hyper(value, name, dtype, low=low, strict_low=strict_low, high=high)
    if not isinstance(value, jax.Array) and not is_traced(value):
        return jax.device_put(checked)
    return jnp.asarray(value, dtype)


def _check_in_dtype(value: float, name: str, dtype) -> None:
    """A checked hyper-parameter must keep its meaning in the dtype the solver computes in."""
    info = np.finfo(np.dtype(dtype))
    limit = float(info.max) / 16  # headroom for the sums and products it enters
    if abs(value) > limit:
        raise ValueError(
            f"{name}={value:.3g} is too large for {np.dtype(dtype)} (it must stay below {limit:.3g}); "
            "rescale the problem, or use float64 (jax.config.update('jax_enable_x64', True))"
        )
    if value != 0 and np.asarray(value, dtype=np.dtype(dtype)) == 0:
        raise ValueError(
            f"{name}={value:.3g} underflows {np.dtype(dtype)} to 0 (its smallest normal number is "
            f"{float(info.tiny):.3g}); use {name}=0 where that is allowed, a larger value, or float64"
        )


def check_int(value, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """Check ``value`` is an integer in [low, high] and return it as ``int``."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{name} must be an integer; got {value!r}")
    value = int(value)
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}; got {value}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}; got {value}")
    return value


def check_float(
    value, name: str, *, low: float | None = None, high: float | None = None, strict_low: bool = False
) -> float:
    """Check ``value`` is a finite real in the given range and return it as ``float``."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number; got {value!r}")
    try:
        value = float(value)
    except OverflowError:  # an integer beyond every float
        raise ValueError(f"{name} must be finite; got an integer of {len(str(abs(int(value))))} digits") from None
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite; got {value}")
    if low is not None and (value <= low if strict_low else value < low):
        raise ValueError(f"{name} must be {'>' if strict_low else '>='} {low}; got {value}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}; got {value}")
    return value


def check_choice(value, name: str, choices) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}; got {value!r}")
    return value


# ---------------------------------------------------------------------------------------------
# Scale checks: the magnitudes a float dtype can standardise and form moments of.

#: Headroom factor between the largest accepted entry and the dtype's largest number (sums, centring).
SCALE_HEADROOM = 16.0


def scale_limits(dtype, n: int = 1, *, squares: bool = False) -> tuple[float, float]:
    """``(largest |entry|, smallest spread of a non-constant column)`` that ``dtype`` handles.

    * ``squares=False`` — for solvers that standardise each column by a power-of-two rescaling
      first (:func:`jaxselect.design.column_summary`): entries up to ``max/16`` (room to centre and sum)
      and spreads (max − min) down to ``tiny/ε`` (about 1e-31 in float32: below it the centred
      values are no longer normal numbers with full precision).
    * ``squares=True`` — for code that forms raw second moments (``XᵀX``, ``Σ(x − x̄)²``) of n rows
      without rescaling (a Gram/moments engine, greedy RLS): also ``n·max|x|² ≤ max/16`` (no
      overflow: about 1e19/√n in float32) and ``spread²/(2n) ≥ tiny/ε`` (the smallest variance a
      column with that spread can have stays a full-precision normal number: about 3e-16·√n in
      float32).
    """
    info = np.finfo(np.dtype(dtype))
    fmax, tiny, eps = float(info.max), float(info.tiny), float(info.eps)
    big = fmax / SCALE_HEADROOM
    small = tiny / eps
    if squares:
        n = max(int(n), 1)
        big = min(big, float(np.sqrt(fmax / (SCALE_HEADROOM * n))))
        small = max(small, float(np.sqrt(2.0 * n * tiny / eps)))
    return big, small


def scale_error(col_min, col_max, n: int, name: str, dtype, *, squares: bool = False) -> str | None:
    """The message of :func:`check_scale` for given column extremes (numpy (d,)), or None when fine.

    Contract (shared by every solver, and by the moments engine of :func:`jaxselect.prepare`):
    ``col_min``/``col_max`` are the per-column extremes of an (n, d) array named ``name`` that will
    be computed with in ``dtype``; a column is constant when max == min (never an error here). The
    message names the array, the offending columns, the value and the fix (rescale by a constant,
    or float64). See :func:`scale_limits` for the bounds.
    """
    lo = np.asarray(col_min, np.float64)
    hi = np.asarray(col_max, np.float64)
    big, small = scale_limits(dtype, n, squares=squares)
    kind = "its second moments" if squares else "it"
    dtype = np.dtype(dtype)
    fix = "or use float64 (jax.config.update('jax_enable_x64', True) with float64 input)"
    magnitude = np.maximum(np.abs(lo), np.abs(hi))
    bad = np.flatnonzero(~(magnitude <= big))
    if bad.size:
        j = int(bad[np.argmax(magnitude[bad])])
        return (
            f"{name} has entries up to {magnitude[j]:.3g} (column {j}): too large for {dtype} ({kind} would "
            f"overflow above {big:.3g}); divide {name} by a constant (e.g. {2.0 ** np.ceil(np.log2(magnitude[j])):.3g}), {fix}"
        )
    spread = hi - lo
    tiny_cols = np.flatnonzero((spread > 0) & (spread < small))
    if tiny_cols.size:
        j = int(tiny_cols[np.argmin(spread[tiny_cols])])
        return (
            f"{name} column(s) {tiny_cols[:10].tolist()} vary by as little as {spread[j]:.3g} (column {j}): below "
            f"{small:.3g}, {kind} would underflow {dtype} and the column would be taken for constant; multiply "
            f"{name} by a constant (e.g. {2.0 ** -np.floor(np.log2(spread[j])):.3g}), {fix}"
        )
    return None


@jit
def _column_extremes(A):
    """Column minima and maxima, and ``Σ_i 0·A_ij`` (NaN exactly where a column holds NaN or Inf:
    XLA's max/min reductions of a large array may skip NaNs)."""
    return jnp.min(A, axis=0), jnp.max(A, axis=0), jnp.sum(A * jnp.zeros((), A.dtype), axis=0)


def check_scale(A, name: str, *, squares: bool = False, unchecked=None) -> None:
    """ValueError unless every column of A (n, d) has a magnitude and spread ``A.dtype`` can handle.

    A no-op on traced input (inside a user's ``jit``/``vmap``). One fused min/max pass over A; the
    bounds and the message are those of :func:`scale_limits` / :func:`scale_error`. With
    ``unchecked`` (the caller's input before the cast to A, not yet checked for NaN/Inf) the same
    pass is the NaN/Inf check too (NaN propagates through min/max, Inf is an extreme), with
    :func:`as_float_matrix`'s message.
    """
    if is_traced(A):
        return
    A2 = A if A.ndim == 2 else A.reshape((A.shape[0], -1))
    extremes = host_value(lambda: _column_extremes(A2))
    if extremes is None:
        return
    if unchecked is not None and not all(np.isfinite(e).all() for e in extremes):
        raise_nonfinite(unchecked, name, A.dtype, "remove or impute those entries first")
    message = scale_error(extremes[0], extremes[1], A2.shape[0], name, A.dtype, squares=squares)
    if message is not None:
        raise ValueError(message)


def check_finite_output(values, X, what: str, name: str = "X"):
    """``values`` (predictions computed from ``X``), or a ValueError when they overflowed.

    Concrete outputs only (a no-op inside a user's ``jit``): a model's predictions on data far
    larger than its training data can leave the dtype's range; that is a bad ``X``, said clearly,
    never an inf returned without a status.
    """
    ok = host_value(lambda: np.isfinite(np.asarray(values)).all())  # on the host: no compiled program
    if ok is None or bool(ok):
        return values
    big = host_value(lambda: np.max(np.abs(np.asarray(X))))
    raise ValueError(
        f"{what}: the predictions overflow {values.dtype}: {name} has entries up to "
        f"{float(big) if big is not None else float('nan'):.3g}, too large for this model; rescale {name} as the "
        "training data were scaled, or use float64"
    )


def check_result_type(result, types, name: str, producer: str) -> None:
    """TypeError unless ``result`` is one of ``types`` (a result passed to the wrong function, None, ...)."""
    if not isinstance(result, types):
        wanted = " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))
        raise TypeError(f"{name} must be a {wanted} returned by {producer}; got {type(result).__name__}")


def check_magnitudes(values: dict, dtype, *, fix: str, limit: float | None = None) -> None:
    """ValueError naming the largest entry of ``values`` (name → non-negative magnitude, as stored in
    ``dtype``) when it is not finite or above ``limit`` (default: the dtype's largest number, i.e.
    the value must exist in the dtype the solver computes in: 1e39 does not in float32). ``fix``
    says what to do (e.g. which arguments to rescale together).
    """
    limit = float(np.finfo(np.dtype(dtype)).max) if limit is None else float(limit)
    name, worst = max(values.items(), key=lambda kv: (not np.isfinite(kv[1]), kv[1]))
    if not worst <= limit:
        raise ValueError(
            f"{name} is {worst:.3g}: too large for {np.dtype(dtype)} (it must stay below {limit:.3g}); {fix}"
        )


def _caller_outside_package() -> int:
    """``warnings.warn``'s stacklevel (counted from the caller of this function) of the first frame
    outside the jaxselect package: the user's line, however deep inside the library the warning is."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def clip_k(k, n_usable: int, who: str, *, unit: str = "features", stacklevel: int | None = None):
    """The library's one rule for a ``k`` above the usable features (issue 37): a ``UserWarning``
    naming k and the count, and all usable ones kept (as scikit-learn's ``SelectKBest``).

    Usable: columns that are not constant (max == min over the rows of positive weight — the data
    layer's ``live`` mask), or groups with such a column (``unit="groups"``). Every caller —
    :func:`jaxselect.fsa`, :func:`jaxselect.greedy_rls` and the estimators of
    :mod:`jaxselect.sklearn` — goes through here, so the wording is one.

    Args:
      k: the requested number (an int ≥ 1), a sequence of them (a CV grid: each one above the count
        is replaced by it, one warning for all), or None (returned as is).
      n_usable: the number of usable features (groups). Below 1 nothing is clipped: the caller's
        own error says that X has nothing to select.
      who: the function or estimator named at the start of the message.
      unit: ``"features"`` or ``"groups"``.
      stacklevel: as ``warnings.warn``'s, counted from the caller of ``clip_k`` (1: that caller's
        line); None: the first line outside jaxselect (the user's call).

    Returns:
      ``min(k, n_usable)`` (elementwise for a sequence, as a numpy array).

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     clip_k(5, 3, "fsa"), clip_k(2, 3, "fsa")
    (3, 2)
    >>> print(caught[0].message)
    fsa: k=5 is larger than the number of usable features of X (3; constant columns are never selected); all 3 are kept
    """
    if k is None or n_usable < 1:
        return k
    level = _caller_outside_package() if stacklevel is None else stacklevel + 1  # as warnings.warn's, from here
    if np.ndim(k):
        ks = np.asarray(k)
        big = sorted(set(ks[ks > n_usable].tolist()))
        if big:
            warnings.warn(
                f"{who}: ks {big} are larger than the number of usable {unit} of X ({n_usable}; constant columns "
                f"are never selected); they are replaced by {n_usable} (all {unit} kept)",
                UserWarning,
                stacklevel=level,
            )
        return np.minimum(ks, n_usable)
    if k <= n_usable:
        return k
    warnings.warn(
        f"{who}: k={k} is larger than the number of usable {unit} of X ({n_usable}; constant columns are never "
        f"selected); all {n_usable} are kept",
        UserWarning,
        stacklevel=level,
    )
    return int(n_usable)
