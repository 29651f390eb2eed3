"""The moments engine: column statistics, centred XᵀX and XᵀY of (weighted) data, in one place.

Every moment-based solver (CS-G-OMP, CS-G-FR, Doubling, the group lasso) needs the same numbers
of the data. With row weights ``w_i ≥ 0`` (1 by default) and ``n = Σ w_i``:

    μ = Σ w_i x_i / n,   G = Σ w_i (x_i − μ)(x_i − μ)ᵀ / n,   ν = Σ w_i y_i / n,
    v = Σ w_i (y_i − ν)² / n,   B = Σ w_i (x_i − μ)(y_i − ν)ᵀ / n,

plus the column maxima and minima over the rows that count (``w_i > 0``), for the library's
constant-column rule (constant iff max == min) and the finiteness and scale checks.

Two kernels give these numbers, equal to rounding:

* **host** — a numpy array on a CPU backend (what users pass): rows are streamed in chunks from
  the user's buffer (no copy of X, no host→device transfer of X), shifted by the first chunk's
  mean so that large offsets cost no precision (one pass; the shift is exact algebra,
  ``G = S/n − δδᵀ`` with δ the mean of the shifted rows, which is small), the Gram of each chunk
  by the host BLAS ``syrk`` (numpy's ``A.T @ A``, half the flops of a GEMM), and the
  finiteness/constant/overflow checks fused into the same pass. :class:`MomentAccumulator` is
  the same kernel fed chunk by chunk (``prepare_from_batches``).
* **xla** — ``jax.Array`` inputs (row-sharded arrays stay sharded), values traced inside a user's
  ``jit``/``vmap``, and accelerators: jitted XLA.

The engine only forms moments and checks data; standardising and whitening them is
:func:`jaxselect.prepare`'s job.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect._repr import short_repr

__all__ = [
    "MomentAccumulator",
    "Moments",
    "Summary",
    "check_scales",
    "column_summary",
    "host_kernel_applies",
    "moments_host",
    "moments_xla",
    "scale_vectors",
    "summary_verdict",
    "xla_moments",
]

# Rows per chunk of the host kernel: 8 MB (4 096 rows of float32 at D = 500) — big enough for BLAS to
# reach its peak on the chunk's Gram and amortise the D×D accumulation, small enough that the
# passes after the first read it from the (32 MB) last-level cache.
HOST_CHUNK_BYTES = 1 << 23
HOST_CHUNK_MIN_ROWS = 256


class Moments(NamedTuple):
    """First and second moments of (X, Y) under row weights (see the module docstring).

    Attributes:
      n_samples: () total weight Σ w_i (the number of rows when unweighted).
      x_mean: (D,) column means μ.
      x_max, x_min: (D,) column extremes over rows with w_i > 0.
      gram: (D, D) centred second moments G, or None when not formed.
      y_mean, y_var: (T,) target means ν and variances v.
      y_max, y_min: (T,) target extremes over rows with w_i > 0.
      cross: (D, T) centred cross moments B.
    """

    n_samples: jax.Array
    x_mean: jax.Array
    x_max: jax.Array
    x_min: jax.Array
    gram: jax.Array | None
    y_mean: jax.Array
    y_var: jax.Array
    y_max: jax.Array
    y_min: jax.Array
    cross: jax.Array

    __repr__ = short_repr


def host_kernel_applies(*arrays) -> bool:
    """True when the host kernel should form the moments: every input is host data (not a
    ``jax.Array``, not traced) and JAX computes on the CPU."""
    if any(
        isinstance(a, (jax.Array, jax.core.Tracer)) for a in arrays if a is not None
    ):
        return False
    return jax.default_backend() == "cpu"


def _chunk_rows(d: int, itemsize: int) -> int:
    return max(HOST_CHUNK_MIN_ROWS, HOST_CHUNK_BYTES // max(1, d * itemsize))


class MomentAccumulator:
    """Streams row chunks of (X, Y[, w]) into :class:`Moments` on the host, in one pass.

    The first chunk fixes a shift ``s`` (its weighted column means); every chunk is shifted by it
    while it is converted to the compute dtype, its Gram ``(X_c − s)ᵀ(X_c − s)`` taken by BLAS
    ``syrk`` and added to a float64 accumulator. Checks run per chunk and name it: NaN/Inf,
    mismatched widths, bad weights.

    Args:
      dtype: the compute dtype (float32, or float64 under ``jax_enable_x64``).
      gram: form the D×D Gram (False: only means, extremes and cross moments).
      what: how error messages name a chunk (``"rows 0–4095"`` by default, ``"batch 17"`` for
        :func:`prepare_from_batches`).
    """

    def __init__(self, dtype, *, gram: bool = True):
        self.dtype = np.dtype(dtype)
        self.gram = bool(gram)
        self.n_chunks = 0
        self.n_rows = 0
        self.n_positive = 0
        self._d = self._t = None

    def _start(self, X, Y):
        d, t = X.shape[1], Y.shape[1]
        self._d, self._t = d, t
        self.x_shift = self.y_shift = None
        self.wsum = 0.0
        self.x_sum = np.zeros(d, np.float64)
        self.y_sum = np.zeros(t, np.float64)
        self.y_sq = np.zeros(t, np.float64)
        self.cross_acc = np.zeros((d, t), np.float64)
        self.gram_acc = np.zeros((d, d), np.float64) if self.gram else None
        self.x_max = np.full(d, -np.inf, self.dtype)
        self.x_min = np.full(d, np.inf, self.dtype)
        self.y_max = np.full(t, -np.inf, self.dtype)
        self.y_min = np.full(t, np.inf, self.dtype)
        self._buf = np.empty((0, d), self.dtype)
        self._ones = np.ones(0, self.dtype)

    def _set_shift(self, X, Y, w):
        """The shift: the first non-empty chunk's (weighted) column means."""
        wsum = float(np.sum(w)) if w is not None else float(X.shape[0])
        if w is not None and wsum > 0:
            self.x_shift = (
                np.asarray(w, np.float64) @ X.astype(np.float64, copy=False) / wsum
            ).astype(self.dtype)
            self.y_shift = (
                np.asarray(w, np.float64) @ Y.astype(np.float64, copy=False) / wsum
            ).astype(self.dtype)
        else:
            self.x_shift = np.mean(X, axis=0, dtype=np.float64).astype(self.dtype)
            self.y_shift = np.mean(Y, axis=0, dtype=np.float64).astype(self.dtype)
        if not (np.isfinite(self.x_shift).all() and np.isfinite(self.y_shift).all()):
            self.x_shift = np.zeros(
                self._d, self.dtype
            )  # NaN/Inf in the chunk: reported below
            self.y_shift = np.zeros(self._t, self.dtype)

    def add(self, X, Y, w=None, *, what: str | None = None) -> None:
        """Add the rows of one chunk: X (m, D), Y (m, T) 2-D numpy arrays, w (m,) or None."""
        with np.errstate(over="ignore", invalid="ignore"):
            self._add(X, Y, w, what)

    def _add(self, X, Y, w, what):
        m = X.shape[0]
        what = what or f"rows {self.n_rows}–{self.n_rows + m - 1}"
        if self._d is None:
            self._start(X, Y)
        elif X.shape[1] != self._d:
            raise ValueError(
                f"X in {what} has {X.shape[1]} columns; earlier rows had {self._d}"
            )
        elif Y.shape[1] != self._t:
            raise ValueError(
                f"Y in {what} has {Y.shape[1]} columns; earlier rows had {self._t}"
            )
        self.n_chunks += 1
        self.n_rows += m
        if m == 0:
            return
        if self.x_shift is None:
            self._set_shift(X, Y, w)
        if self._buf.shape[0] < m:
            self._buf = np.empty((m, self._d), self.dtype)
            self._ones = np.ones(m, self.dtype)
        # One read of the chunk from memory: the shifted copy (in cache) feeds every pass after it.
        Xs = self._buf[:m]
        np.subtract(X, self.x_shift, out=Xs, casting="unsafe")
        Ys = np.subtract(Y, self.y_shift, dtype=self.dtype, casting="unsafe")
        if w is not None:
            keep = w > 0
            self.n_positive += int(np.count_nonzero(keep))
            Xk, Yk = (X, Y) if keep.all() else (X[keep], Y[keep])
        else:
            self.n_positive += m
            Xk, Yk = X, Y
        if Xk.shape[0]:
            # Extremes of the raw rows (the constant-column rule is max == min on the data itself);
            # rounding to the compute dtype is monotonic: max(cast(x)) == cast(max(x)).
            np.maximum(
                self.x_max, np.max(Xk, axis=0).astype(self.dtype), out=self.x_max
            )
            np.minimum(
                self.x_min, np.min(Xk, axis=0).astype(self.dtype), out=self.x_min
            )
            np.maximum(
                self.y_max, np.max(Yk, axis=0).astype(self.dtype), out=self.y_max
            )
            np.minimum(
                self.y_min, np.min(Yk, axis=0).astype(self.dtype), out=self.y_min
            )
        # max/min propagate NaN, and ±Inf is its own extreme: this catches every non-finite entry
        # of the rows that count; rows of weight 0 are caught by their NaN-poisoned sums below.
        if not (np.isfinite(self.x_max).all() and np.isfinite(self.x_min).all()):
            raise ValueError(
                f"X contains NaN or Inf in {what}; remove or impute those entries first"
            )
        if not (np.isfinite(self.y_max).all() and np.isfinite(self.y_min).all()):
            raise ValueError(f"Y contains NaN or Inf in {what}")
        if w is not None:
            root = np.sqrt(w).astype(self.dtype)
            Xs *= root[:, None]
            Ys *= root[:, None]
            self.wsum += float(np.sum(w, dtype=np.float64))
        else:
            root = self._ones[:m]
            self.wsum += float(m)
        x_sum = root @ Xs  # BLAS GEMV: faster than an axis-0 reduction
        y_sum = root @ Ys
        if not (np.isfinite(x_sum).all() and np.isfinite(y_sum).all()):
            if not (np.isfinite(X).all() and np.isfinite(Y).all()):
                raise ValueError(
                    f"X or Y contains NaN or Inf in {what} (rows of weight 0 must be finite too)"
                )
            _raise_overflow(self.dtype)
        self.x_sum += x_sum
        self.y_sum += y_sum
        self.y_sq += np.einsum("mt,mt->t", Ys, Ys, dtype=np.float64)
        self.cross_acc += Xs.T @ Ys
        if self.gram:
            self.gram_acc += Xs.T @ Xs  # numpy dispatches A.T @ A to BLAS syrk

    def finish(self) -> Moments:
        """The :class:`Moments` of every row added (numpy arrays in the compute dtype)."""
        if self._d is None or self.n_rows == 0:
            raise ValueError("no rows were given; X needs at least 2 rows")
        n = self.wsum
        if self.n_positive < 2:
            raise ValueError(
                f"at least 2 rows need a positive sample_weight; got {self.n_positive}"
            )
        if not n > 0:
            raise ValueError(
                "sample_weight sums to 0; at least 2 rows need a positive weight"
            )
        with np.errstate(over="ignore", invalid="ignore"):
            return self._finish(n)

    def _finish(self, n) -> Moments:
        dx, dy = self.x_sum / n, self.y_sum / n
        dt = self.dtype
        gram = None
        if self.gram:
            with np.errstate(over="ignore", invalid="ignore"):
                g = self.gram_acc / n - np.outer(dx, dx)
            gram = (0.5 * (g + g.T)).astype(dt)
        cross = (self.cross_acc / n - np.outer(dx, dy)).astype(dt)
        y_var = np.maximum(self.y_sq / n - dy * dy, 0.0).astype(dt)
        x_mean = (self.x_shift.astype(np.float64) + dx).astype(dt)
        y_mean = (self.y_shift.astype(np.float64) + dy).astype(dt)
        return Moments(
            np.asarray(n, dt),
            x_mean,
            self.x_max,
            self.x_min,
            gram,
            y_mean,
            y_var,
            self.y_max,
            self.y_min,
            cross,
        )


def _raise_overflow(dtype):
    raise ValueError(
        f"X or Y has entries too large for {np.dtype(dtype).name} moments (sums overflow); rescale them "
        "(or use float64 with jax_enable_x64)"
    )


def moments_host(
    X: np.ndarray, Y: np.ndarray, w: np.ndarray | None, dtype, *, gram: bool = True
) -> Moments:
    """The host kernel on in-memory arrays: X (n, D), Y (n, T), w (n,) or None (numpy)."""
    acc = MomentAccumulator(dtype, gram=gram)
    n = X.shape[0]
    step = _chunk_rows(X.shape[1], np.dtype(dtype).itemsize)
    for start in range(0, n, step):
        stop = min(n, start + step)
        acc.add(X[start:stop], Y[start:stop], None if w is None else w[start:stop])
    return acc.finish()


def moments_xla(X, Y, w, x_max, x_min, x_sum, *, gram: bool, centre: bool) -> Moments:
    """The XLA kernel (call inside jit). ``x_max``/``x_min``/``x_sum`` come from the validation pass
    (``x_sum`` weighted); ``centre`` forms ``Xc = X − μ`` before the Gram (large offsets), else the
    Gram is ``XᵀWX/n − μμᵀ`` with no centred copy of X."""
    dtype = X.dtype
    if w is None:
        n = jnp.asarray(X.shape[0], dtype)
        root = None
        wy = Y
    else:
        n = jnp.sum(w)
        root = jnp.sqrt(w)[:, None]
        wy = Y * w[:, None]
    x_mean = x_sum / n
    y_mean = jnp.sum(wy, axis=0) / n
    Yc = Y - y_mean[None, :]
    Ycw = Yc if root is None else Yc * root
    y_var = jnp.sum(Ycw * Ycw, axis=0) / n
    if w is None:
        y_max, y_min = jnp.max(Y, axis=0), jnp.min(Y, axis=0)
    else:
        pos = (w > 0)[:, None]
        y_max = jnp.max(jnp.where(pos, Y, -jnp.inf), axis=0)
        y_min = jnp.min(jnp.where(pos, Y, jnp.inf), axis=0)
    contract = (((0,), (0,)), ((), ()))
    if centre:
        Xc = X - x_mean[None, :]
        Xw = Xc if root is None else Xc * root
        G = jax.lax.dot_general(Xw, Xw, contract) / n if gram else None
        cross = (Ycw.T @ Xw).T / n  # written as u @ X: XLA's X.T @ u is slow on CPU
    else:
        Xw = X if root is None else X * root
        G = (
            jax.lax.dot_general(Xw, Xw, contract) / n - jnp.outer(x_mean, x_mean)
            if gram
            else None
        )
        cross = (Ycw.T @ Xw).T / n - (
            x_mean[:, None]
            * (jnp.sum(Ycw if root is None else Ycw * root, axis=0) / n)[None, :]
        )
    if G is not None:
        G = 0.5 * (G + G.T)
    return Moments(
        n, x_mean, x_max, x_min, G, y_mean, y_var, y_max, y_min, cross.astype(dtype)
    )


class Summary(NamedTuple):
    """Per-column statistics of X from one fused pass (all (D,)); sums weighted by sample_weight."""

    col_max: jax.Array
    col_min: jax.Array
    col_sum: jax.Array
    col_sumsq: jax.Array
    n_samples: jax.Array


@jax.jit
def column_summary(X, w=None) -> Summary:
    """Column max, min, sum and sum of squares of X in one fused pass (weighted; extremes over w > 0)."""
    if w is None:
        n = jnp.asarray(X.shape[0], X.dtype)
        return Summary(
            jnp.max(X, axis=0),
            jnp.min(X, axis=0),
            jnp.sum(X, axis=0),
            jnp.sum(X * X, axis=0),
            n,
        )
    pos = (w > 0)[:, None]
    col_max = jnp.max(jnp.where(pos, X, -jnp.inf), axis=0)
    col_min = jnp.min(jnp.where(pos, X, jnp.inf), axis=0)
    # w @ X, not X.T @ w (slow on XLA's CPU backend); a NaN in a weight-0 row still poisons the sum.
    return Summary(col_max, col_min, w @ X, w @ (X * X), jnp.sum(w))


@jax.jit
def summary_verdict(summary: Summary):
    """(has NaN/Inf, sums of squares overflow, max mean²/variance over non-constant columns).

    XLA's max/min reductions may skip NaNs, but a NaN always poisons the column sum.
    """
    n = summary.n_samples
    finite_extremes = jnp.isfinite(summary.col_max) & jnp.isfinite(summary.col_min)
    nonfinite = jnp.any(~finite_extremes | jnp.isnan(summary.col_sum))
    overflow = jnp.any(
        ~jnp.isfinite(summary.col_sumsq) | ~jnp.isfinite(summary.col_sum)
    )
    mean = summary.col_sum / n
    var = jnp.maximum(summary.col_sumsq / n - mean * mean, 0.0)
    nonconstant = summary.col_max > summary.col_min
    tiny = jnp.finfo(var.dtype).tiny
    ratio = jnp.where(
        nonconstant, mean * mean / jnp.maximum(var, tiny), jnp.zeros_like(var)
    )
    return jnp.stack(
        [nonfinite.astype(var.dtype), overflow.astype(var.dtype), jnp.max(ratio)]
    )


@partial(jax.jit, static_argnames=("centre",))
def xla_moments(X, Y, w, summary: Summary, *, centre: bool) -> Moments:
    return moments_xla(
        X,
        Y,
        w,
        summary.col_max,
        summary.col_min,
        summary.col_sum,
        gram=True,
        centre=centre,
    )


@jax.jit
def scale_vectors(m: Moments):
    """The small vectors :func:`~jaxselect.moments.check_scales` needs (no D×D transfer)."""
    return (
        m.n_samples,
        m.x_max,
        m.x_min,
        jnp.diagonal(m.gram),
        m.y_max,
        m.y_min,
        m.y_var,
    )


def check_scales(
    n,
    x_max,
    x_min,
    x_var,
    y_max=None,
    y_min=None,
    y_var=None,
    *,
    x_name: str = "X",
    y_name: str = "Y",
) -> None:
    """Host-side scale checks on concrete moments (numpy inputs): overflow and underflow.

    A non-constant column (or target) whose variance overflows, or is not a normal float of the
    compute dtype, cannot be standardised: a ValueError names it and says to rescale (or use
    float64). ``x_var`` (D,) may be None; the variance is then bounded below by spread²/(2n).
    """
    dtype = np.dtype(np.asarray(x_max).dtype)
    tiny = float(np.finfo(dtype).tiny)
    n = max(2.0, float(n))
    x_live = np.asarray(x_max) > np.asarray(x_min)
    spread = np.asarray(x_max, np.float64) - np.asarray(x_min, np.float64)
    if not np.isfinite(spread).all() or (
        x_var is not None and not np.isfinite(x_var).all()
    ):
        _raise_overflow(dtype)
    x_small = x_live & (spread * spread / (2.0 * n) < 16.0 * tiny)
    if x_var is not None:
        x_small |= x_live & (np.asarray(x_var, np.float64) < 16.0 * tiny)
    if x_small.any():
        cols = np.flatnonzero(x_small)
        raise ValueError(
            f"{x_name} column(s) {cols[:10].tolist()} vary too little for {dtype.name} second moments "
            f"(column {cols[0]} spans {spread[cols[0]]:.3g}); rescale {x_name} (e.g. divide each column by "
            "its standard deviation) or use float64 with jax_enable_x64"
        )
    if y_var is None:
        return
    y_var = np.asarray(y_var, np.float64)
    if not np.isfinite(y_var).all():
        raise ValueError(
            f"{y_name} has entries too large for {dtype.name} moments (its variance overflows); rescale "
            f"{y_name} or use float64 with jax_enable_x64"
        )
    y_constant = ~(np.asarray(y_max) > np.asarray(y_min))
    if y_constant.any():
        raise ValueError(
            f"target column(s) {np.flatnonzero(y_constant).tolist()} of {y_name} are constant"
        )
    if (y_var < 16.0 * tiny).any():
        cols = np.flatnonzero(y_var < 16.0 * tiny)
        raise ValueError(
            f"target column(s) {cols[:10].tolist()} of {y_name} vary too little for {dtype.name} moments; "
            f"rescale {y_name} or use float64 with jax_enable_x64"
        )
