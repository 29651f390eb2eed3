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

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "default_float",
    "is_traced",
    "host_value",
    "float_dtype_for",
    "as_float_matrix",
    "as_targets",
    "as_labels",
    "check_rows",
    "check_int",
    "check_float",
    "check_choice",
    "MIN_ROWS",
    "CONSTANT_MODES",
    "as_vector_target",
    "as_binary_labels",
    "check_constant_mode",
    "column_standardization",
    "raise_on_constant",
    "as_hyper",
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
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(a))


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


def as_float_matrix(X, name: str = "X", *, dtype=None, min_rows: int = 1, min_cols: int = 1, check_finite: bool = True):
    """Validate a 2-D numeric array with finite entries and return it as a float array.

    Args:
      X: (n, d) array-like (numpy, list, or jax.Array; a jax.Array keeps its sharding).
      name: name used in error messages.
      dtype: force this floating dtype (default: ``float_dtype_for(X.dtype)``).
      min_rows, min_cols: smallest accepted shape.
      check_finite: check for NaN/Inf here (callers that fuse the check into their own pass over
        X set it False and must check themselves).

    Returns:
      A jax.Array of shape (n, d).
    """
    if not isinstance(X, jax.Array):
        X = np.asarray(X)
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
    target = np.dtype(dtype) if dtype is not None else float_dtype_for(X.dtype)
    X = jnp.asarray(X, dtype=target)
    if check_finite and not _all_finite(X):
        raise ValueError(f"{name} contains NaN or Inf; remove or impute those entries first")
    return X


def as_targets(Y, n: int, name: str = "Y", *, dtype=None):
    """Validate regression targets: 1-D (n,) or 2-D (n, T), finite.

    Returns:
      (Y2, was_1d): Y2 is a float jax.Array of shape (n, T); was_1d says the input was 1-D.
    """
    if not isinstance(Y, jax.Array):
        Y = np.asarray(Y)
    if Y.dtype == object or not _is_numeric(Y.dtype):
        raise TypeError(f"{name} must be numeric; got dtype {Y.dtype}")
    if Y.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D (n,) or 2-D (n, T); got shape {tuple(Y.shape)}")
    if Y.shape[0] != n:
        raise ValueError(f"{name} has {Y.shape[0]} rows but X has {n}; they must match")
    if Y.ndim == 2 and Y.shape[1] < 1:
        raise ValueError(f"{name} must have at least one target column")
    was_1d = Y.ndim == 1
    target = np.dtype(dtype) if dtype is not None else float_dtype_for(Y.dtype)
    Y = jnp.asarray(Y, dtype=target)
    if was_1d:
        Y = Y[:, None]
    if not _all_finite(Y):
        raise ValueError(f"{name} contains NaN or Inf")
    return Y, was_1d


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
    traced int32 array, unchecked.
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
    y = np.asarray(y)
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
        values = np.unique(np.asarray(y).astype(np.float64))
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{name} contains NaN or Inf")
        if not (set(values.tolist()) <= {0.0, 1.0} or set(values.tolist()) <= {-1.0, 1.0}):
            shown = values[:6].tolist()
            extra = (
                " — for more than two classes use a multiclass solver (labels 0..C-1)"
                if values.size > 2 and np.all(values == np.round(values))
                else ""
            )
            raise ValueError(f"{name} must hold binary labels in {{0, 1}}, {{-1, +1}} or bool; got values {shown}{extra}")
        if values.size < 2:
            raise ValueError(f"{name} has a single class {values.tolist()}; a binary solver needs both classes")
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


@jax.jit
def column_standardization(X):
    """The library's one standardisation rule for the columns of X (n, D).

    Returns ``(mean, scale, live)``, all (D,): column means, standard deviations (1 on inert
    columns) and ``live`` = not constant. A column is *constant* (inert) when its maximum equals
    its minimum — exactly, so no rounding-level tolerance decides it; inert columns are never
    selected and get coefficient 0 in every solver.
    """
    n = X.shape[0]
    mean = jnp.sum(X, axis=0) / jnp.asarray(n, X.dtype)
    centred = X - mean[None, :]
    var = jnp.sum(centred * centred, axis=0) / jnp.asarray(n, X.dtype)
    live = (jnp.max(X, axis=0) > jnp.min(X, axis=0)) & (var > 0)
    # sqrt only of positive variances: a constant column must not give a NaN gradient (d√v at 0)
    scale = jnp.sqrt(jnp.where(live, var, jnp.ones_like(var)))
    return mean, scale, live


def raise_on_constant(live, mode: str, name: str = "X") -> None:
    """With ``mode="raise"``, ValueError naming the constant columns (no-op when traced or "inert")."""
    if mode != "raise":
        return
    values = host_value(lambda: live)
    if values is None:
        return
    cols = np.flatnonzero(~values)
    if cols.size:
        raise ValueError(
            f"{name} has constant column(s) {cols[:10].tolist()} and constant_columns='raise'; remove "
            "them, or use the default constant_columns='inert' (they are then never selected)"
        )


def as_hyper(value, name: str, dtype, *, low: float | None = None, strict_low: bool = False):
    """A real hyper-parameter that may be traced (``l2``, a cost): checked when concrete, cast to ``dtype``.

    Concrete values are checked for finiteness and range here; a traced value (inside a user's
    ``jit``/``vmap``/``grad``) is passed through unchecked. Returns a 0-d array of ``dtype``.
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a real number; got {value!r}")
    if not is_traced(value):
        arr = np.asarray(value)
        if arr.shape != () or arr.dtype == object or not _is_numeric(arr.dtype):
            raise TypeError(f"{name} must be a real scalar; got {value!r}")
        check_float(float(arr), name, low=low, strict_low=strict_low)
    else:
        if jnp.shape(value) != ():
            raise TypeError(f"{name} must be a scalar; got shape {jnp.shape(value)}")
    return jnp.asarray(value, dtype)


def check_rows(n_expected: int, n_got: int, what: str) -> None:
    if n_expected != n_got:
        raise ValueError(f"{what} has {n_got} rows but X has {n_expected}; they must match")


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
    value = float(value)
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
