"""Row weights: the library's one ``sample_weight`` rule.

Every solver takes ``sample_weight=None`` or (n,) finite weights ``w_i ≥ 0`` with at least 2
positive entries. A weight multiplies its row's contribution to every mean, so integer weights equal
repeated rows and rows of weight 0 are absent (the padding of :func:`jaxselect.shard_rows`, the
folds of cross-validation). Means are ``Σ w_i a_i / Σ w``; "the rows that count" for extremes and
the constant-column rule are those with ``w_i > 0``.
"""

from __future__ import annotations

import jax
import numpy as np

from jaxselect._compat import Tracer
from jaxselect._validation import MIN_ROWS, is_traced

__all__ = ["as_sample_weight"]


def as_sample_weight(sample_weight, n: int, name: str = "sample_weight"):
    """Validate row weights: None, or (n,) finite and ≥ 0 with at least 2 positive entries.

    Args:
      sample_weight: None or an (n,) array-like (numpy, list, ``jax.Array``; a global array spread
        over processes is checked on its gathered values).
      n: the number of rows of X.
      name: the argument's name in error messages.

    Returns:
      None or the weights (numpy for host input, a ``jax.Array`` for jax input, unchanged). Traced
      weights (inside a user's ``jit``) are only shape-checked.

    Raises:
      TypeError / ValueError: non-numeric, wrong shape, NaN/Inf, negative, fewer than 2 positive.

    >>> as_sample_weight([1.0, 0.0, 2.0], 3).tolist()
    [1.0, 0.0, 2.0]
    """
    if sample_weight is None:
        return None
    w = sample_weight
    if not isinstance(w, (jax.Array, Tracer)):
        w = np.asarray(w)
        if w.dtype == object or w.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be a numeric array; got dtype {w.dtype}")
    if w.ndim != 1 or w.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},), one weight per row of X; got {tuple(w.shape)}")
    if is_traced(w):
        return w
    if isinstance(w, jax.Array) and not w.is_fully_addressable:  # rows on several processes
        from jax.experimental import multihost_utils

        wh = np.asarray(multihost_utils.process_allgather(w, tiled=True))
    else:
        wh = np.asarray(w)
    if not np.isfinite(wh).all():
        bad = np.flatnonzero(~np.isfinite(wh))
        raise ValueError(f"{name} contains NaN or Inf (rows {bad[:10].tolist()})")
    if (wh < 0).any():
        raise ValueError(f"{name} must be non-negative; row {int(np.flatnonzero(wh < 0)[0])} has {wh[wh < 0][0]}")
    if np.count_nonzero(wh > 0) < MIN_ROWS:
        raise ValueError(f"{name} needs at least {MIN_ROWS} positive weights; got {np.count_nonzero(wh > 0)}")
    return w
