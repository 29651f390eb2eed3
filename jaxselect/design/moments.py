"""The moments engine: column statistics, centred XᵀX and XᵀY of (weighted) data, in one place.

Every moment-based solver (CS-G-OMP, CS-G-FR, Doubling, the group lasso) needs the same numbers
of the data. With row weights ``w_i ≥ 0`` (1 by default) and ``n = Σ w_i``:

    μ = Σ w_i x_i / n,   G = Σ w_i (x_i − μ)(x_i − μ)ᵀ / n,   ν = Σ w_i y_i / n,
    v = Σ w_i (y_i − ν)² / n,   B = Σ w_i (x_i − μ)(y_i − ν)ᵀ / n,

plus which columns are constant over the rows that count (``w_i > 0``; the library's rule:
constant iff max == min, exactly) and the finiteness and scale checks.

Two kernels give these numbers, equal to rounding:

* **host** — a numpy array on a CPU backend (what users pass): rows are streamed in chunks from
  the user's buffer (no copy of X, no host→device transfer of X), shifted by the first chunk's
  mean so that large offsets cost no precision (one pass; the shift is exact algebra,
  ``G = S/n − δδᵀ`` with δ the mean of the shifted rows, which is small). Each chunk is read
  once, into a cache-sized buffer ``[X − s | Y − t | 1]``, whose Gram — one host BLAS ``syrk``
  (numpy's ``A.T @ A``, half the flops of a GEMM) — holds every moment at once; the
  finiteness/constant/overflow checks are read off its diagonal. :class:`MomentAccumulator` is
  the same kernel fed chunk by chunk (``prepare_from_batches``).
* **xla** — ``jax.Array`` inputs (row-sharded arrays stay sharded), values traced inside a user's
  ``jit``/``vmap``, and accelerators: jitted XLA.

The engine only forms moments and checks data; standardising and whitening them is
:func:`jaxselect.prepare`'s job.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect.programs import jit
from jaxselect._compat import Tracer
from jaxselect._progress import progress_bar
from jaxselect._repr import short_repr
from jaxselect._validation import nonfinite_cells, nonfinite_message

__all__ = [
    "MomentAccumulator",
    "Moments",
    "check_scales",
    "chunk_rows",
    "host_kernel_applies",
    "moments_host",
    "moments_xla",
    "scale_vectors",
    "xla_moments",
]

# Rows per chunk of the host kernel: 8 MB (4 096 rows of float32 at D = 500) — big enough for BLAS to
# reach its peak on the chunk's Gram and amortise the D×D accumulation, small enough that the
# shifted copy stays in the (32 MB) last-level cache for the syrk that reads it.
HOST_CHUNK_BYTES = 1 << 23
HOST_CHUNK_MIN_ROWS = 256


class Moments(NamedTuple):
    """First and second moments of (X, Y) under row weights (see the module docstring).

    Attributes:
      n_samples: () total weight Σ w_i (the number of rows when unweighted).
      x_mean: (D,) column means μ.
      constant: (D,) bool, columns constant over the rows with w_i > 0 (max == min).
      gram: (D, D) centred second moments G.
      y_mean, y_var: (T,) target means ν and variances v.
      y_constant: (T,) bool, constant targets.
      cross: (D, T) centred cross moments B.
      x_spread: (D,) column max − min where the kernel tracked extremes, else None.

    Produced by the moments engine (``jaxselect.design.moments.MomentAccumulator`` for row chunks on the
    host, the XLA kernel for device arrays) and turned into a :class:`~jaxselect.Problem` by
    :func:`~jaxselect.problem_from_moments`.

    >>> import numpy as np
    >>> from jaxselect.design.moments import MomentAccumulator
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = 2 * X[:, 1] + 1
    >>> acc = MomentAccumulator(np.float32)
    >>> acc.add(X[:50], y[:50, None]); acc.add(X[50:], y[50:, None])
    >>> m = acc.finish()
    >>> m.gram.shape, m.cross.shape, float(m.n_samples)
    ((3, 3), (3, 1), 100.0)
    """

    n_samples: jax.Array
    x_mean: jax.Array
    constant: jax.Array
    gram: jax.Array
    y_mean: jax.Array
    y_var: jax.Array
    y_constant: jax.Array
    cross: jax.Array
    x_spread: jax.Array | None = None

    __repr__ = short_repr


def host_kernel_applies(*arrays) -> bool:
    """True when the host kernel should form the moments: every input is host data (not a
    ``jax.Array``, not traced) and JAX computes on the CPU."""
    if any(isinstance(a, (jax.Array, Tracer)) for a in arrays if a is not None):
        return False
    return jax.default_backend() == "cpu"


def chunk_rows(d: int, itemsize: int) -> int:
    """Rows per chunk of the host kernel for D columns of ``itemsize`` bytes."""
    return max(HOST_CHUNK_MIN_ROWS, HOST_CHUNK_BYTES // max(1, d * itemsize))


class MomentAccumulator:
    """Streams row chunks of (X, Y[, w]) into :class:`Moments` on the host, in one pass.

    The first chunk with a positive weight fixes a shift ``s``: per column its (weighted) mean, or
    its value when the column is constant within that chunk. Every chunk is written once, in the
    compute dtype, into a cache-sized buffer ``A = [√w·(X − s) | √w·(Y − t) | √w]`` and ``AᵀA`` is
    taken by one BLAS ``syrk`` (numpy's ``A.T @ A``) and added to a float64 accumulator: its blocks
    are the shifted Gram, the cross moments, the column sums and the target sums of squares — every
    moment from one read of the chunk and one BLAS call, no further pass over the rows. (With many
    targets, T > max(8, D/8), Y stays out of the buffer and ``XᵀY`` is a GEMM, so that the syrk
    does not form the unneeded T×T block.)

    Checks come from the same numbers, per chunk, and name it: a NaN/Inf entry makes its column's
    diagonal entry of ``AᵀA`` non-finite, and only then is the chunk scanned to say whether X or Y
    holds it (or whether the sums overflowed). The constant-column rule is exact (constant iff all
    values over the rows of positive weight are equal, in the compute dtype): a constant column
    shifts to exact zeros, so a column with a non-zero diagonal entry varies; the few columns with
    a zero diagonal entry (constant so far, or varying below what the dtype's squares hold) are
    compared with their shift on the chunk's own rows.

    Args:
      dtype: the compute dtype (float32, or float64 under ``jax_enable_x64``).
    """

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)
        self.n_chunks = 0
        self.n_rows = 0
        self.n_positive = 0
        self._d = self._t = None

    def _start(self, X, Y):
        d, t = X.shape[1], Y.shape[1]
        self._d, self._t = d, t
        self.x_shift = self.y_shift = None
        self.wsum = 0.0
        # AᵀA of the augmented rows [x − s | y − t | 1] (weighted by √w): width D + T + 1. Many
        # targets (T > D/8) would make the syrk also form the unneeded T×T block: they get a GEMM.
        self.fused = t <= max(8, d // 8)
        width = d + (t if self.fused else 0) + 1
        self.acc = np.zeros((width, width), np.float64)
        if not self.fused:
            self.cross_acc = np.zeros((d, t), np.float64)
            self.y_sum = np.zeros(t, np.float64)
            self.y_sq = np.zeros(t, np.float64)
        self.varying = np.zeros(d, bool)  # columns seen to take two values (over rows with w > 0)
        self.y_max = np.full(t, -np.inf, self.dtype)
        self.y_min = np.full(t, np.inf, self.dtype)
        self._buf = np.empty((0, width), self.dtype)

    def _set_shift(self, Xk, Yk, wk):
        """The shift from the rows of positive weight of the first chunk that has any."""
        tmp = np.empty((max(1, Xk.shape[0] // 2), self._d), Xk.dtype)
        hi = _column_fold(np.maximum, Xk, tmp).astype(self.dtype)
        lo = _column_fold(np.minimum, Xk, tmp).astype(self.dtype)
        if wk is not None:
            mean = wk.astype(np.float64) @ Xk.astype(np.float64, copy=False) / float(np.sum(wk, dtype=np.float64))
            y_shift = wk.astype(np.float64) @ Yk.astype(np.float64, copy=False) / float(np.sum(wk, dtype=np.float64))
        else:
            mean = np.mean(Xk, axis=0, dtype=np.float64)
            y_shift = np.mean(Yk, axis=0, dtype=np.float64)
        shift = np.where(hi == lo, hi, mean.astype(self.dtype))
        if not (np.isfinite(shift).all() and np.isfinite(y_shift).all()):
            shift = np.zeros(self._d, self.dtype)  # NaN/Inf in the chunk: reported by the checks
            y_shift = np.zeros(self._t)
        self.x_shift, self.y_shift = shift.astype(self.dtype), y_shift.astype(self.dtype)

    def add(self, X, Y, w=None, *, what: str | None = None) -> None:
        """Add the rows of one chunk: X (m, D), Y (m, T) 2-D numpy arrays, w (m,) or None.

        A chunk is best cache-sized (:data:`HOST_CHUNK_BYTES`): ``prepare`` and
        ``prepare_from_batches`` cut larger ones into such pieces.
        """
        with np.errstate(over="ignore", invalid="ignore"):
            self._add(X, Y, w, what)

    def _add(self, X, Y, w, what):
        m = X.shape[0]
        what = what or f"rows {self.n_rows}–{self.n_rows + m - 1}"
        if self._d is None:
            self._start(X, Y)
        elif X.shape[1] != self._d:
            raise ValueError(f"X in {what} has {X.shape[1]} columns; earlier rows had {self._d}")
        elif Y.shape[1] != self._t:
            raise ValueError(f"Y in {what} has {Y.shape[1]} columns; earlier rows had {self._t}")
        self.n_chunks += 1
        self.n_rows += m
        if m == 0:
            return
        d, t = self._d, self._t
        keep = None
        if w is not None:
            keep = w > 0
            n_keep = int(np.count_nonzero(keep))
            if n_keep == m:
                keep = None
        else:
            n_keep = m
        self.n_positive += n_keep
        if n_keep == 0:  # contributes nothing; its entries must still be finite
            if not (np.isfinite(X).all() and np.isfinite(Y).all()):
                raise ValueError(f"X or Y contains NaN or Inf in {what} (rows of weight 0 must be finite too)")
            return
        if self.x_shift is None:
            if keep is None:
                self._set_shift(X, Y, w)
            else:
                self._set_shift(X[keep], Y[keep], w[keep])
        Yk = Y if keep is None else Y[keep]
        np.maximum(self.y_max, np.max(Yk, axis=0).astype(self.dtype), out=self.y_max)
        np.minimum(self.y_min, np.min(Yk, axis=0).astype(self.dtype), out=self.y_min)
        width = self.acc.shape[0]
        if self._buf.shape[0] < m:
            self._buf = np.empty((m, width), self.dtype)
        # The one read of the chunk: shifted (and weighted) into the cache-resident buffer.
        A = self._buf[:m]
        Ax = A[:, :d]
        _shifted_copy(X, self.x_shift, Ax)
        Ay = A[:, d : width - 1] if self.fused else np.empty((m, t), self.dtype)
        np.copyto(Ay, Y, casting="unsafe")
        Ay -= self.y_shift
        if w is not None:
            root = np.sqrt(w).astype(self.dtype)
            A[:, : width - 1] *= root[:, None]
            if not self.fused:
                Ay *= root[:, None]
            A[:, width - 1] = root
            self.wsum += float(np.sum(w, dtype=np.float64))
        else:
            A[:, width - 1] = 1
            self.wsum += float(m)
        G = A.T @ A  # numpy dispatches A.T @ A to BLAS syrk: every moment of the chunk at once
        diag = np.diagonal(G)
        if not self.fused:
            y_sum = A[:, width - 1] @ Ay  # NaN/Inf in Y poison it
            diag = np.concatenate([diag, y_sum])
        if not np.isfinite(diag).all():  # NaN/Inf entries poison their column's sum of squares
            first = self.n_rows - m
            for name, A, fix in (("X", X, "remove or impute those entries first"), ("Y", Y, "")):
                rows, cols = nonfinite_cells(A, row_offset=first)
                if rows.size:
                    raise ValueError(nonfinite_message(name, rows, cols, fix, where=f", {what}"))
            if not np.isfinite(G[: width - 1, width - 1]).all():
                _raise_overflow(self.dtype)
            # else squares overflow: the scale checks on the finished moments report it
        self.acc += G
        if not self.fused:
            self.cross_acc += Ax.T @ Ay
            self.y_sum += y_sum
            self.y_sq += np.einsum("mt,mt->t", Ay, Ay, dtype=np.float64)
        self.varying |= diag[:d] > 0
        if not self.varying.all():  # constant so far or tiny: compare with the shift on these rows
            cand = np.flatnonzero(~self.varying)
            cols = X[:, cand] if keep is None else X[:, cand][keep]
            self.varying[cand] = (cols.astype(self.dtype, copy=False) != self.x_shift[cand]).any(axis=0)

    def finish(self) -> Moments:
        """The :class:`Moments` of every row added (numpy arrays in the compute dtype)."""
        if self._d is None or self.n_rows == 0:
            raise ValueError("no rows were given; X needs at least 2 rows")
        if self.n_positive < 2:
            raise ValueError(f"at least 2 rows need a positive sample_weight; got {self.n_positive}")
        with np.errstate(over="ignore", invalid="ignore"):
            return self._finish(self.wsum)

    def _finish(self, n) -> Moments:
        d = self._d
        acc, last = self.acc, self.acc.shape[0] - 1
        if self.fused:
            cross_acc, y_sum, y_sq = acc[:d, d:last], acc[d:last, last], np.diagonal(acc)[d:last]
        else:
            cross_acc, y_sum, y_sq = self.cross_acc, self.y_sum, self.y_sq
        dx, dy = acc[:d, last] / n, y_sum / n
        dt = self.dtype
        g = acc[:d, :d] / n - np.outer(dx, dx)
        gram = (0.5 * (g + g.T)).astype(dt)
        cross = (cross_acc / n - np.outer(dx, dy)).astype(dt)
        y_var = np.maximum(y_sq / n - dy * dy, 0.0).astype(dt)
        x_mean = (self.x_shift.astype(np.float64) + dx).astype(dt)
        y_mean = (self.y_shift.astype(np.float64) + dy).astype(dt)
        return Moments(np.asarray(n, dt), x_mean, ~self.varying, gram, y_mean, y_var, ~(self.y_max > self.y_min), cross)


def _shifted_copy(X, shift, out) -> None:
    """``out[:] = X − shift`` in out's dtype (X rounded to it first, so that a constant column
    shifts to exact zeros)."""
    if X.dtype == out.dtype:
        np.subtract(X, shift, out=out)
    else:
        np.copyto(out, X, casting="unsafe")
        out -= shift


def _column_fold(op, A, tmp):
    """``op.reduce(A, axis=0)`` for op in (np.maximum, np.minimum) by pairwise halving of the rows.

    Same result (max/min are exact and NaN propagates), but each step is a contiguous SIMD
    elementwise op: about 5× faster than numpy's axis-0 reduction on C-ordered rows. ``tmp`` is
    scratch of at least ``len(A) // 2`` rows.
    """
    k = A.shape[0]
    if k == 1:
        return A[0].copy()
    h = k // 2
    op(A[:h], A[h : 2 * h], out=tmp[:h])
    if k % 2:
        op(tmp[0], A[k - 1], out=tmp[0])
    while h > 1:
        half = h // 2
        op(tmp[:half], tmp[half : 2 * half], out=tmp[:half])
        if h % 2:
            op(tmp[0], tmp[h - 1], out=tmp[0])
        h = half
    return tmp[0].copy()


def _raise_overflow(dtype):
    raise ValueError(
        f"X or Y has entries too large for {np.dtype(dtype).name} moments (sums overflow); rescale them "
        "(or use float64 with jax_enable_x64)"
    )


def moments_host(X: np.ndarray, Y: np.ndarray, w: np.ndarray | None, dtype, *, progress: bool = False) -> Moments:
    """The host kernel on in-memory arrays: X (n, D), Y (n, T), w (n,) or None (numpy).

    Streams cache-sized row chunks of X through :class:`MomentAccumulator` (no copy of X); with
    ``progress`` a bar counts the rows.
    """
    acc = MomentAccumulator(dtype)
    n = X.shape[0]
    step = chunk_rows(X.shape[1], np.dtype(dtype).itemsize)
    with progress_bar(enabled=progress, total=n, unit="row", desc="moments") as bar:
        for start in range(0, n, step):
            stop = min(n, start + step)
            acc.add(X[start:stop], Y[start:stop], None if w is None else w[start:stop])
            bar.update(stop - start)
    return acc.finish()


def moments_xla(X, Y, w, x_mean, constant, *, gram: bool, centre: bool) -> Moments:
    """The XLA kernel (call inside jit). ``x_mean``/``constant`` come from the boundary's summary
    pass (weighted); ``centre`` forms ``Xc = X − μ`` before the Gram (large offsets), else the Gram
    is ``XᵀWX/n − μμᵀ`` with no centred copy of X."""
    dtype = X.dtype
    if w is None:
        n = jnp.asarray(X.shape[0], dtype)
        root = None
        wy = Y
    else:
        n = jnp.sum(w)
        root = jnp.sqrt(w)[:, None]
        wy = Y * w[:, None]
    y_mean = jnp.sum(wy, axis=0) / n
    Yc = Y - y_mean[None, :]
    Ycw = Yc if root is None else Yc * root
    y_var = jnp.sum(Ycw * Ycw, axis=0) / n
    if w is None:
        y_constant = ~(jnp.max(Y, axis=0) > jnp.min(Y, axis=0))
    else:
        pos = (w > 0)[:, None]
        y_constant = ~(jnp.max(jnp.where(pos, Y, -jnp.inf), axis=0) > jnp.min(jnp.where(pos, Y, jnp.inf), axis=0))
    contract = (((0,), (0,)), ((), ()))
    if centre:
        Xc = X - x_mean[None, :]
        Xw = Xc if root is None else Xc * root
        G = jax.lax.dot_general(Xw, Xw, contract) / n if gram else None
        cross = (Ycw.T @ Xw).T / n  # written as u @ X: XLA's X.T @ u is slow on CPU
    else:
        Xw = X if root is None else X * root
        G = jax.lax.dot_general(Xw, Xw, contract) / n - jnp.outer(x_mean, x_mean) if gram else None
        cross = (Ycw.T @ Xw).T / n - (
            x_mean[:, None] * (jnp.sum(Ycw if root is None else Ycw * root, axis=0) / n)[None, :]
        )
    if G is not None:
        G = 0.5 * (G + G.T)
    return Moments(n, x_mean, constant, G, y_mean, y_var, y_constant, cross.astype(dtype))


@partial(jit, static_argnames=("centre",))
def xla_moments(X, Y, w, summary, *, centre: bool) -> Moments:
    """:func:`moments_xla` with the Gram, from the boundary's :class:`~jaxselect.design.ColumnSummary`."""
    return moments_xla(X, Y, w, summary.mean, ~summary.live, gram=True, centre=centre)


@jit
def scale_vectors(m: Moments):
    """The small vectors :func:`~jaxselect.design.moments.check_scales` needs (no D×D transfer)."""
    return m.n_samples, m.constant, jnp.diagonal(m.gram), m.y_constant, m.y_var, m.x_spread


def check_scales(
    n, constant, x_var, y_constant=None, y_var=None, x_spread=None, *, x_name: str = "X", y_name: str = "Y"
) -> None:
    """Host-side scale checks on concrete moments (numpy inputs): overflow and underflow.

    A non-constant column (or target) whose variance overflows, or is not a normal float of the
    compute dtype (≥ 16·tiny, e.g. about 2e-37 in float32), cannot be standardised: a ValueError
    names it and says to rescale (or use float64). ``x_var`` (D,) may be None; the variance is then
    bounded below by ``x_spread²/(2n)``. A constant target warns (its problem column is zero).
    """
    dtype = np.dtype(np.asarray(x_var if x_var is not None else x_spread).dtype)
    tiny = float(np.finfo(dtype).tiny)
    n = max(2.0, float(n))
    x_live = ~np.asarray(constant, bool)
    x_small = np.zeros_like(x_live)
    if x_spread is not None:
        spread = np.asarray(x_spread, np.float64)
        if not np.isfinite(spread).all():
            _raise_overflow(dtype)
        x_small |= x_live & (spread * spread / (2.0 * n) < 16.0 * tiny)
    if x_var is not None:
        x_var = np.asarray(x_var, np.float64)
        if not np.isfinite(x_var).all():
            _raise_overflow(dtype)
        x_small |= x_live & (x_var < 16.0 * tiny)
    if x_small.any():
        cols = np.flatnonzero(x_small)
        raise ValueError(
            f"{x_name} column(s) {cols[:10].tolist()} vary too little for {dtype.name} second moments; rescale "
            f"{x_name} (e.g. divide each column by its standard deviation) or use float64 with jax_enable_x64"
        )
    if y_var is None:
        return
    y_var = np.asarray(y_var, np.float64)
    if not np.isfinite(y_var).all():
        raise ValueError(
            f"{y_name} has entries too large for {dtype.name} moments (its variance overflows); rescale "
            f"{y_name} or use float64 with jax_enable_x64"
        )
    y_constant = np.asarray(y_constant, bool)
    if y_constant.any():  # like scikit-learn's OMP: warn; the solvers return the intercept-only model
        warnings.warn(
            f"target column(s) {np.flatnonzero(y_constant).tolist()} of {y_name} are constant: nothing is "
            "selected for them (coefficients 0, intercept = the target mean; status DEGENERATE when all are)",
            UserWarning,
            stacklevel=3,
        )
    if ((y_var < 16.0 * tiny) & ~y_constant).any():
        cols = np.flatnonzero((y_var < 16.0 * tiny) & ~y_constant)
        raise ValueError(
            f"target column(s) {cols[:10].tolist()} of {y_name} vary too little for {dtype.name} moments; "
            f"rescale {y_name} or use float64 with jax_enable_x64"
        )
