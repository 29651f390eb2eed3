"""The design-operator protocol: what solvers may ask of X, whatever stores it.

A solver never touches the storage of X. It asks a design operator for the standardised design
``X̃ = (X − 1 μᵀ) · diag(f)`` (μ the column means, ``f = live/scale`` from the
:class:`~jaxselect.design.ColumnSummary`; inert columns are zero) through a few operations:

==========================  ===========================================================
``mv(v)``                   ``X̃ v``: (D,) → (n,), or (D, k) → (n, k)
``rmv(u)``                  ``u X̃``: (n,) → (D,), or (k, n) → (k, D) — never ``X.T @ u``
``gram(w)``                 ``X̃ᵀ W X̃ / Σw`` (D, D)
``gram_columns(idx, w)``    ``X̃ᵀ W X̃[:, idx] / Σw`` (D, s): the lazy Gram of OMP/FR
``take(idx)``               the operator restricted to columns ``idx``
``compact(cols, block=0)``  the kept columns ``cols`` (ascending, in range; may be traced) as the
                            cheapest operator for repeated ``mv``/``rmv`` (FSA's compaction
                            between stages): a :class:`TransposedDesign` for dense storage;
                            ``block`` > 0 is a hint to gather in row blocks of that many rows
``subsample_rows(stride)``  every ``stride``-th row (a static stride; FSA's cheap spectral estimate)
``row_blocks(rows)``        iterate ``(start, block operator)`` over row blocks
``shard(mesh)``             rows split over a device mesh (``DenseDesign``), with padding weights
``materialize()``           the dense (n, D) ``X̃`` (for small designs and tests)
``summarize(w)``            ``(ColumnSummary, col_min, col_max)`` of the *stored* columns: the
                            boundary's one pass (the standardisation rule and the checks' extremes)
``standardized(summary)``   the operator standardised by ``summary``
==========================  ===========================================================

The boundary (:func:`~jaxselect.design.as_data`) wraps the user's X in an operator with no
standardisation, asks it for ``summarize``, checks the numbers, and keeps ``standardized(summary)``.

Standardisation is applied implicitly (``X̃ v = X (f⊙v) − (μ·(f⊙v)) 1``), so the stored X is never
centred, scaled or copied. Implementations:

* :class:`DenseDesign` — a ``jax.Array`` on one device or row-sharded over a mesh (a pytree: it
  passes through ``jit``/``vmap``; XLA inserts the cross-device reductions);
* :class:`HostDesign` — a numpy array, ``np.memmap`` or any row-sliceable array-like on the host;
  products run over row chunks with host BLAS, nothing is copied to a device;
* :class:`TransposedDesign` — a dense ``jax.Array`` stored transposed, Xᵀ (D, n): what
  ``compact`` returns for dense storage (gathering kept columns of a row-major X straight into a
  (W, n) array is one pass with one output buffer, later compactions gather contiguous rows, and
  both ``v @ Xᵀ`` and ``Xᵀ @ u`` are row-major products).

Adding a storage kind (sparse, streamed) is one new class with these methods and a case in
``tests/test_design.py``, which checks every implementation against the dense answer.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect._repr import short_repr
from jaxselect._validation import is_traced
from jaxselect.design.summary import standardize, summary_and_extremes

__all__ = [
    "BLOCKED_SUMMARY_BYTES",
    "DenseDesign",
    "DesignOperator",
    "HostDesign",
    "HOST_BLOCK_BYTES",
    "TransposedDesign",
]

#: Bytes of X per row block of a host operator's products (cache-friendly BLAS calls).
HOST_BLOCK_BYTES = 1 << 23
#: A single-device X above this size is summarised over row blocks (no (n, D) temporary).
BLOCKED_SUMMARY_BYTES = 1 << 26


def on_one_device(X) -> bool:
    """A concrete ``jax.Array`` on one device (a row-sharded X keeps the plain, sharded reductions)."""
    if is_traced(X) or not isinstance(X, jax.Array):
        return False
    try:
        return len(X.sharding.device_set) == 1
    except AttributeError:  # pragma: no cover - an unusual array type
        return False


@runtime_checkable
class DesignOperator(Protocol):
    """The operations solvers use on a standardised design ``X̃`` (n, D); see the module docstring."""

    @property
    def shape(self) -> tuple[int, int]: ...

    @property
    def dtype(self): ...

    def mv(self, v): ...

    def rmv(self, u): ...

    def gram(self, w=None): ...

    def gram_columns(self, idx, w=None): ...

    def take(self, idx) -> "DesignOperator": ...

    def compact(self, cols, block: int = 0) -> "DesignOperator": ...

    def subsample_rows(self, stride: int) -> "DesignOperator": ...

    def row_blocks(self, rows: int | None = None) -> Iterator: ...

    def materialize(self): ...

    def summarize(self, w=None): ...

    def standardized(self, summary) -> "DesignOperator": ...


def _block_rows(n_cols: int, itemsize: int, rows: int | None) -> int:
    if rows is not None:
        return max(1, int(rows))
    return max(8, HOST_BLOCK_BYTES // max(1, n_cols * itemsize))


class DenseDesign(NamedTuple):
    """A standardised view of a dense ``jax.Array`` X (n, D): one device, or rows sharded on a mesh.

    Attributes:
      X: (n, D) the stored features, never modified or copied.
      mean: (D,) column means μ.
      factor: (D,) ``live/scale`` (0 on inert columns).

    >>> import numpy as np, jax.numpy as jnp, jaxselect as js
    >>> X = jnp.asarray(np.random.default_rng(0).normal(size=(5, 3)), jnp.float32)
    >>> op = js.design.DenseDesign.from_summary(X, js.design.column_summary(X))
    >>> bool(jnp.allclose(op.rmv(jnp.ones(5, jnp.float32)), 0.0, atol=1e-5))   # centred columns
    True
    """

    X: jax.Array
    mean: jax.Array
    factor: jax.Array

    #: the storage holds only non-zero entries (solvers read this, never the class)
    sparse = False

    __repr__ = short_repr

    @classmethod
    def from_summary(cls, X, summary) -> "DenseDesign":
        return cls(X, summary.mean, summary.factor)

    @classmethod
    def raw(cls, X) -> "DenseDesign":
        """X itself (no centring or scaling), before the boundary's summary pass."""
        d = X.shape[1]  # host zeros and ones: the summary pass reads X only (no compiled op here)
        return cls(X, np.zeros((d,), X.dtype), np.ones((d,), X.dtype))

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.X.shape)

    @property
    def dtype(self):
        return self.X.dtype

    def summarize(self, w=None):
        """The summary pass of the stored X: one jitted call (over row blocks for a large X on one
        device, where XLA's CPU runtime may stage an (n, D) temporary for a plain reduction)."""
        X = self.X
        blocked = w is None and on_one_device(X) and X.size * X.dtype.itemsize > BLOCKED_SUMMARY_BYTES
        return summary_and_extremes(X, w, blocked=blocked)

    def standardized(self, summary) -> "DenseDesign":
        return DenseDesign.from_summary(self.X, summary)

    def mv(self, v):
        if v.ndim == 1:
            fv = v * self.factor
            return self.X @ fv - self.mean @ fv
        fv = v * self.factor[:, None]
        return self.X @ fv - (self.mean @ fv)[None, :]

    def rmv(self, u):
        if u.ndim == 1:
            return (u @ self.X - jnp.sum(u) * self.mean) * self.factor
        total = jnp.sum(u, axis=-1)
        return (u @ self.X - total[:, None] * self.mean[None, :]) * self.factor[None, :]

    def materialize(self):
        return (self.X - self.mean[None, :]) * self.factor[None, :]

    def gram(self, w=None):
        Xs = self.materialize()
        if w is None:
            return jnp.einsum("na,nb->ab", Xs, Xs) / jnp.asarray(Xs.shape[0], Xs.dtype)
        return jnp.einsum("na,nb->ab", Xs * w[:, None], Xs) / jnp.sum(w)

    def gram_columns(self, idx, w=None):
        cols = self.take(idx).materialize()  # (n, s): only the chosen columns are formed
        if w is None:
            return self.rmv(cols.T).T / jnp.asarray(cols.shape[0], cols.dtype)
        return self.rmv((cols * w[:, None]).T).T / jnp.sum(w)

    def take(self, idx) -> "DenseDesign":
        idx = jnp.asarray(idx)
        return DenseDesign(jnp.take(self.X, idx, axis=1), jnp.take(self.mean, idx), jnp.take(self.factor, idx))

    def compact(self, cols, block: int = 0) -> "TransposedDesign":
        """The columns ``cols`` (W,) as a :class:`TransposedDesign` (a (W, n) copy).

        The gathers clip their (always valid) indices instead of filling out-of-range ones: a fill
        adds a select over the gathered copy, a second buffer as large as the copy inside a compiled
        program. ``block`` > 0 gathers ``block`` rows at a time (a ``fori_loop``): on the CPU the
        fused gather-transpose reads X with a stride of D floats per element and is about 5× slower
        than the blocked one, which reads cache-resident row blocks. Use 0 for a row-sharded X (the
        blocks would cross shards).
        """
        cols = jnp.asarray(cols)
        return TransposedDesign(
            _gather_transposed(self.X, cols, block), _clip_take(self.mean, cols), _clip_take(self.factor, cols)
        )

    def subsample_rows(self, stride: int) -> "DenseDesign":
        return self._replace(X=self.X[:: int(stride)])

    def row_blocks(self, rows: int | None = None):
        n, d = self.shape
        rows = _block_rows(d, self.X.dtype.itemsize, rows)
        for start in range(0, n, rows):
            yield start, self._replace(X=self.X[start : start + rows])

    def shard(self, mesh=None, axis: str = "data"):
        """``(design, w)``: the rows split over ``mesh``'s ``axis`` (padded to a multiple of its size
        with copies of the last row) and the (n_padded,) row weights (0 on padding) to use as
        ``sample_weight``; see :func:`jaxselect.shard_rows`."""
        from jaxselect.sharding import shard_rows

        X, w = shard_rows(self.X, mesh=mesh, axis=axis, weights=True)
        return self._replace(X=X), w.astype(self.X.dtype)


def host_gram_columns(op, idx, w=None):
    """``X̃ᵀ W X̃[:, idx] / Σw`` (D, s) of a host operator: the s standardised columns, then one ``rmv``."""
    cols = op.take(idx).materialize()
    if w is not None:
        cols = cols * np.asarray(w, op.dtype)[:, None]
    total = float(op.shape[0]) if w is None else float(np.sum(w, dtype=np.float64))
    return (op.rmv(cols.T).T / total).astype(op.dtype)


class HostDesign:
    """A standardised view of a host X (n, D): numpy array, ``np.memmap`` or row-sliceable array-like.

    Products run over row blocks (:data:`HOST_BLOCK_BYTES` of X each) with host BLAS and return
    numpy arrays in the compute dtype; X is read block by block and never copied whole (a memmap
    stays on disk). :meth:`to_device` gives the :class:`DenseDesign` of the same data.
    """

    #: the storage holds only non-zero entries (solvers read this, never the class)
    sparse = False

    __slots__ = ("X", "mean", "factor", "dtype")

    def __init__(self, X, mean, factor, dtype=None):
        self.X = X
        self.dtype = np.dtype(dtype if dtype is not None else np.asarray(mean).dtype)
        self.mean = np.asarray(mean, self.dtype)
        self.factor = np.asarray(factor, self.dtype)

    @classmethod
    def from_summary(cls, X, summary) -> "HostDesign":
        return cls(X, np.asarray(summary.mean), np.asarray(summary.factor))

    @classmethod
    def raw(cls, X, dtype) -> "HostDesign":
        """X itself (no centring or scaling), before the boundary's summary pass."""
        d = X.shape[1]
        return cls(X, np.zeros(d, dtype), np.ones(d, dtype), dtype)

    def summarize(self, w=None):
        """The summary pass over row blocks on the host (two passes: extremes and sums, then
        centred squares), accumulated in float64; the rule of :func:`~jaxselect.design.column_summary`."""
        d = self.shape[1]
        lo, hi = np.full(d, np.inf), np.full(d, -np.inf)
        total, wsum = np.zeros(d), 0.0
        with np.errstate(invalid="ignore", over="ignore"):
            for start, block in self._blocks():
                b = block.astype(np.float64)
                ww = None if w is None else np.asarray(w[start : start + b.shape[0]], np.float64)
                rows = b if ww is None else b[ww > 0]
                if rows.shape[0]:
                    np.minimum(lo, rows.min(axis=0), out=lo)
                    np.maximum(hi, rows.max(axis=0), out=hi)
                total += b.sum(axis=0) if ww is None else ww @ b
                wsum += b.shape[0] if ww is None else float(ww.sum())
            mean = total / wsum
            sq = np.zeros(d)
            for start, block in self._blocks():
                c = block.astype(np.float64) - mean
                ww = None if w is None else np.asarray(w[start : start + c.shape[0]], np.float64)
                sq += (c * c).sum(axis=0) if ww is None else ww @ (c * c)
        dt = self.dtype
        # the rule in float64, then the dtype: a column of scale 1e25 has a variance float32 cannot hold
        wide = standardize(mean, sq / wsum, hi > lo, np.asarray(wsum), xp=np)
        summary = wide._replace(mean=mean.astype(dt), scale=wide.scale.astype(dt), n_samples=np.asarray(wsum, dt))
        return summary, lo.astype(dt), hi.astype(dt)

    def standardized(self, summary) -> "HostDesign":
        return HostDesign.from_summary(self.X, summary)

    def __repr__(self) -> str:
        return f"HostDesign(shape={self.shape}, dtype={self.dtype}, storage={type(self.X).__name__})"

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.X.shape)

    def _blocks(self, rows=None):
        n, d = self.shape
        rows = _block_rows(d, self.dtype.itemsize, rows)
        for start in range(0, n, rows):
            yield start, np.asarray(self.X[start : start + rows], dtype=self.dtype)

    def mv(self, v):
        v = np.asarray(v, self.dtype)
        fv = v * (self.factor if v.ndim == 1 else self.factor[:, None])
        out = np.concatenate([block @ fv for _, block in self._blocks()], axis=0)
        return out - self.mean @ fv

    def rmv(self, u):
        u = np.asarray(u, self.dtype)
        acc = np.zeros(u.shape[:-1] + (self.shape[1],), np.float64)
        for start, block in self._blocks():
            acc += u[..., start : start + block.shape[0]] @ block
        total = np.sum(u, axis=-1, dtype=np.float64)
        return ((acc - total[..., None] * self.mean) * self.factor).astype(self.dtype)

    def materialize(self):
        return np.concatenate([(b - self.mean) * self.factor for _, b in self._blocks()], axis=0)

    def gram(self, w=None):
        # Σ over row blocks of the centred blocks' syrk (numpy's A.T @ A), accumulated in float64.
        d = self.shape[1]
        acc = np.zeros((d, d), np.float64)
        for start, block in self._blocks():
            c = (block - self.mean) * self.factor
            if w is not None:
                c = c * np.sqrt(np.asarray(w[start : start + block.shape[0]], self.dtype))[:, None]
            acc += c.T @ c
        total = float(self.shape[0]) if w is None else float(np.sum(w, dtype=np.float64))
        return (acc / total).astype(self.dtype)

    def gram_columns(self, idx, w=None):
        return host_gram_columns(self, idx, w)

    def take(self, idx) -> "HostDesign":
        idx = np.asarray(idx)
        cols = np.concatenate([b[:, idx] for _, b in self._blocks()], axis=0)
        return HostDesign(cols, self.mean[idx], self.factor[idx], self.dtype)

    def compact(self, cols, block: int = 0) -> "TransposedDesign":
        """The columns ``cols`` (concrete) as a device :class:`TransposedDesign`, gathered over row
        blocks on the host (X is read once, only the kept columns are copied to the device)."""
        if is_traced(cols):
            raise TypeError("HostDesign.compact needs concrete column indices (it gathers on the host)")
        cols = np.asarray(cols)
        Xt = np.empty((cols.shape[0], self.shape[0]), self.dtype)
        for start, b in self._blocks(block if block > 0 else None):
            Xt[:, start : start + b.shape[0]] = b[:, cols].T
        return TransposedDesign(jax.device_put(Xt), jnp.asarray(self.mean[cols]), jnp.asarray(self.factor[cols]))

    def subsample_rows(self, stride: int) -> "HostDesign":
        return HostDesign(self.X[:: int(stride)], self.mean, self.factor, self.dtype)

    def row_blocks(self, rows: int | None = None):
        for start, block in self._blocks(rows):
            yield start, HostDesign(block, self.mean, self.factor, self.dtype)

    def to_device(self) -> DenseDesign:
        """The same standardised design as a :class:`DenseDesign` (one device copy of X)."""
        X = jax.device_put(np.asarray(self.X, self.dtype))
        return DenseDesign(X, jnp.asarray(self.mean), jnp.asarray(self.factor))


def _clip_take(a, idx, axis=0):
    return jnp.take(a, idx, axis=axis, mode="clip")


def _gather_transposed(X, cols, block: int):
    """``X[:, cols].T`` (W, n), in row blocks of ``block`` rows (0: one fused gather)."""
    n = X.shape[0]
    if block <= 0 or n < 2 * block:
        return _clip_take(X, cols, axis=1).T
    n_blocks = n // block

    def body(i, out):
        rows = jax.lax.dynamic_slice_in_dim(X, i * block, block, 0)
        return jax.lax.dynamic_update_slice_in_dim(out, _clip_take(rows, cols, axis=1).T, i * block, 1)

    out = jax.lax.fori_loop(0, n_blocks, body, jnp.zeros((cols.shape[0], n), X.dtype))
    if n_blocks * block < n:
        tail = _clip_take(X[n_blocks * block :], cols, axis=1).T
        out = jax.lax.dynamic_update_slice_in_dim(out, tail, n_blocks * block, 1)
    return out


class TransposedDesign(NamedTuple):
    """A standardised view of a dense ``jax.Array`` stored transposed, Xᵀ (D, n).

    What :meth:`DenseDesign.compact` returns: ``X̃ v = v_f @ Xᵀ − μ·v_f`` and
    ``u X̃ = f ⊙ (Xᵀ @ u − (Σu) μ)`` (``v_f = f ⊙ v``) are both row-major products, and a further
    compaction gathers contiguous rows of Xᵀ. A pytree, like :class:`DenseDesign`.

    Attributes:
      Xt: (D, n) the stored features, transposed (row j is column j of X).
      mean: (D,) column means μ.
      factor: (D,) ``live/scale`` (0 on inert columns).

    >>> import numpy as np, jax.numpy as jnp, jaxselect as js
    >>> X = jnp.asarray(np.random.default_rng(0).normal(size=(5, 3)), jnp.float32)
    >>> op = js.design.DenseDesign.from_summary(X, js.design.column_summary(X))
    >>> t = op.compact(jnp.asarray([0, 2]))          # columns 0 and 2, stored (2, 5)
    >>> t.Xt.shape, bool(jnp.allclose(t.materialize(), op.materialize()[:, jnp.asarray([0, 2])], atol=1e-6))
    ((2, 5), True)
    """

    Xt: jax.Array
    mean: jax.Array
    factor: jax.Array

    #: the storage holds only non-zero entries (solvers read this, never the class)
    sparse = False

    __repr__ = short_repr

    @classmethod
    def from_summary(cls, Xt, summary) -> "TransposedDesign":
        """Xᵀ (D, n) standardised by the ``summary`` of X's D columns."""
        return cls(Xt, summary.mean, summary.factor)

    @classmethod
    def raw(cls, Xt) -> "TransposedDesign":
        """X itself from its transpose Xᵀ (D, n), no centring or scaling."""
        d = Xt.shape[0]
        return cls(Xt, jnp.zeros((d,), Xt.dtype), jnp.ones((d,), Xt.dtype))

    @property
    def shape(self) -> tuple[int, int]:
        d, n = self.Xt.shape
        return (n, d)

    @property
    def dtype(self):
        return self.Xt.dtype

    def summarize(self, w=None):
        """The summary pass of the stored columns (the rows of Xᵀ): one jitted call."""
        return summary_and_extremes(self.Xt.T, w)

    def standardized(self, summary) -> "TransposedDesign":
        return TransposedDesign.from_summary(self.Xt, summary)

    def mv(self, v):
        if v.ndim == 1:
            fv = v * self.factor
            return fv @ self.Xt - self.mean @ fv
        fv = v * self.factor[:, None]  # (D, k)
        return (fv.T @ self.Xt).T - (self.mean @ fv)[None, :]

    def rmv(self, u):
        if u.ndim == 1:
            return (self.Xt @ u - jnp.sum(u) * self.mean) * self.factor
        total = jnp.sum(u, axis=-1)
        return (u @ self.Xt.T - total[:, None] * self.mean[None, :]) * self.factor[None, :]

    def _centred(self):
        """(D, n) the standardised design, transposed."""
        return (self.Xt - self.mean[:, None]) * self.factor[:, None]

    def materialize(self):
        return self._centred().T

    def gram(self, w=None):
        xc = self._centred()
        if w is None:
            return (xc @ xc.T) / jnp.asarray(xc.shape[1], xc.dtype)
        return ((xc * w[None, :]) @ xc.T) / jnp.sum(w)

    def gram_columns(self, idx, w=None):
        cols = self.take(idx)._centred()  # (s, n): only the chosen columns are formed
        if w is None:
            return self.rmv(cols).T / jnp.asarray(cols.shape[1], cols.dtype)
        return self.rmv(cols * w[None, :]).T / jnp.sum(w)

    def take(self, idx) -> "TransposedDesign":
        idx = jnp.asarray(idx)
        return TransposedDesign(jnp.take(self.Xt, idx, axis=0), jnp.take(self.mean, idx), jnp.take(self.factor, idx))

    def compact(self, cols, block: int = 0) -> "TransposedDesign":
        """The rows ``cols`` of Xᵀ (contiguous row gathers; ``block`` is not needed)."""
        cols = jnp.asarray(cols)
        return TransposedDesign(
            _clip_take(self.Xt, cols, axis=0), _clip_take(self.mean, cols), _clip_take(self.factor, cols)
        )

    def subsample_rows(self, stride: int) -> "TransposedDesign":
        return self._replace(Xt=self.Xt[:, :: int(stride)])

    def row_blocks(self, rows: int | None = None):
        n, d = self.shape
        rows = _block_rows(d, self.Xt.dtype.itemsize, rows)
        for start in range(0, n, rows):
            yield start, self._replace(Xt=self.Xt[:, start : start + rows])
