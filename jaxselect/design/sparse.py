"""Sparse design operators: X stored as its non-zeros, standardised implicitly, never densified.

Two implementations of the :class:`~jaxselect.design.DesignOperator` protocol:

* :class:`SparseDesign` — the non-zeros on a device in coordinate form (``data``, ``rows``,
  ``cols``; int32, sorted by row): a pytree that passes through ``jax.jit``. ``mv`` is a segment
  sum over rows, ``rmv`` a segment sum (scatter-add) over columns; on XLA's CPU backend both are
  2–3× faster than ``jax.experimental.sparse.BCOO`` products, and 4–8× slower than scipy's
  (XLA's CPU gathers and scatters; see ``benchmarks/bench_sparse_ops.py``).
* :class:`HostSparseDesign` — a ``scipy.sparse`` CSR matrix on the host, products by scipy;
  :meth:`HostSparseDesign.to_device` gives the :class:`SparseDesign` of the same data.

Centring and scaling are implicit (``X̃ v = X (f⊙v) − (μ·(f⊙v)) 1``, ``u X̃ = f⊙(u X − (Σu) μ)``),
so memory stays O(nnz + n + D). The column summary is the library's one rule
(:mod:`jaxselect.design.summary`) computed from the stored entries: implicit zeros count (a column
with fewer stored entries than rows of positive weight has ``min ≤ 0 ≤ max``; an empty column is
constant, hence inert), and the centred variance is two-pass arithmetic
``Σ_stored w (x − m)² + (Σw − Σ_stored w) m²`` (no ``E[x²] − m²`` cancellation), on the device with
a corrected mean (one extra pass ``m += Σ w (x − m) / Σw``), on the host in float64.

Input rules (:func:`as_sparse_csr`, used by :func:`~jaxselect.design.as_data`):

* accepted: ``scipy.sparse`` CSR/CSC/COO (and any other scipy format), arrays and matrices, and
  ``jax.experimental.sparse`` BCOO/BCSR without batch or dense dimensions;
* the canonical form is CSR with sorted column indices, **duplicate entries summed** (the value
  ``X.toarray()`` shows, scipy's own rule), stored zeros dropped, and int32 indices: int64 indices
  are narrowed when n, D and nnz are below 2³¹, refused otherwise; BCOO padding entries (indices out
  of range) are dropped;
* integer and bool values become the default float, as dense X does; NaN or Inf in ``data`` is an
  error naming the rows; the user's matrix is never modified.
"""

from __future__ import annotations

from functools import partial
from typing import Iterator

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect.programs import jit
from jaxselect._validation import check_matrix, float_dtype_for, is_traced, nonfinite_message
from jaxselect.design.operators import DenseDesign, host_gram_columns
from jaxselect.design.summary import standardize

__all__ = ["SPARSE_DENSIFY_LIMIT", "HostSparseDesign", "SparseDesign", "as_sparse_csr", "densify_sparse", "is_sparse", "nnz_bucket"]

_INT32_MAX = np.iinfo(np.int32).max
#: Stored entries per row block of :meth:`SparseDesign.row_blocks` (default block size).
SPARSE_BLOCK_ENTRIES = 1 << 21


def nnz_bucket(nnz: int) -> int:
    """The stored-entry count a :class:`SparseDesign` is padded to: the smallest ``m·2^e ≥ nnz``
    with ``m ∈ {4, 5, 6, 7}`` (at most 25 % padding). Entry counts are static shapes, so designs
    whose counts share a bucket (cross-validation folds, repeated fits on similar data) share their
    compiled programs; the padding entries are zeros (value 0 in column 0 of the last row), which
    add nothing to any product and count as implicit zeros in the summary."""
    if nnz <= 8:
        return 8
    e = max(0, int(nnz - 1).bit_length() - 3)
    return -(-nnz // (1 << e)) * (1 << e)


def is_sparse(X) -> bool:
    """True for a ``scipy.sparse`` matrix/array or a ``jax.experimental.sparse`` BCOO/BCSR."""
    module = type(X).__module__ or ""
    if module.startswith("scipy.sparse"):
        import scipy.sparse as sp

        return sp.issparse(X)
    if module.startswith("jax.experimental.sparse"):
        from jax.experimental import sparse as jsparse

        return isinstance(X, (jsparse.BCOO, jsparse.BCSR))
    return False


def _to_scipy(X, name: str):
    """A ``scipy.sparse`` matrix of the user's sparse X (BCOO/BCSR are read to the host)."""
    import scipy.sparse as sp

    if sp.issparse(X):
        return X
    from jax.experimental import sparse as jsparse

    if is_traced(X):
        raise TypeError(
            f"sparse {name} is traced (inside jax.jit/vmap): convert it outside jit with jaxselect.as_data, "
            "then pass the resulting SparseDesign (a pytree) into your jitted function"
        )
    if X.n_batch or X.n_dense or len(X.shape) != 2:
        raise ValueError(
            f"sparse {name} must be a 2-D BCOO/BCSR without batch or dense dimensions; got shape {tuple(X.shape)} "
            f"with n_batch={X.n_batch}, n_dense={X.n_dense}"
        )
    data = np.asarray(X.data)
    if isinstance(X, jsparse.BCSR):
        return sp.csr_matrix((data, np.asarray(X.indices), np.asarray(X.indptr)), shape=X.shape)
    idx = np.asarray(X.indices)
    keep = (idx[:, 0] < X.shape[0]) & (idx[:, 1] < X.shape[1])  # BCOO pads with out-of-range indices
    return sp.coo_matrix((data[keep], (idx[keep, 0], idx[keep, 1])), shape=X.shape)


def _entry_rows(indptr) -> np.ndarray:
    """(nnz,) int32 row of each stored entry of a CSR matrix."""
    indptr = np.asarray(indptr)
    return np.repeat(np.arange(indptr.size - 1, dtype=np.int32), np.diff(indptr))


def _aligned(size: int, dtype, fill) -> np.ndarray:
    """A fresh (size,) array filled with ``fill`` whose buffer is 64-byte aligned: ``jax.device_put``
    on the CPU then aliases it instead of copying (the entries are held once, not twice)."""
    dtype = np.dtype(dtype)
    buf = np.empty(size * dtype.itemsize + 64, np.uint8)
    offset = (-buf.ctypes.data) % 64
    out = buf[offset : offset + size * dtype.itemsize].view(dtype)
    out[...] = fill
    return out


def as_sparse_csr(X, name: str = "X", *, dtype=None, min_rows: int = 1):
    """Validate a sparse X and return its canonical ``scipy.sparse.csr_matrix`` (see the module docstring).

    Args:
      X: a ``scipy.sparse`` matrix/array (any format) or a ``jax.experimental.sparse`` BCOO/BCSR.
      name: name in error messages.
      dtype: force this float dtype (default: :func:`~jaxselect._validation.float_dtype_for`).
      min_rows: fewest rows accepted.

    Returns:
      A CSR matrix (n, D): float ``dtype`` data, int32 sorted indices, no duplicates, no stored
      zeros. The user's X is never modified (a copy is made whenever anything changes; a
      canonical float32 CSR with int32 indices is shared, not copied).

    Raises:
      TypeError: non-numeric values, traced input.
      ValueError: bad shape, NaN/Inf (rows named), values beyond the dtype's range, indices that do
        not fit int32.
    """
    import scipy.sparse as sp

    X = _to_scipy(X, name)
    check_matrix(X, name, min_rows=min_rows)
    n, d = X.shape
    if max(n, d) > _INT32_MAX:
        raise ValueError(f"sparse {name} has shape {(n, d)}: jaxselect indexes rows and columns with int32 (< 2**31)")
    target = np.dtype(dtype) if dtype is not None else float_dtype_for(X.dtype)
    csr = X.tocsr()
    if not csr.has_canonical_format or not csr.data.all():
        if csr is X:  # never modify the user's matrix
            csr = X.copy()
        csr.sum_duplicates()  # the documented rule: duplicates add up (what X.toarray() shows)
        csr.eliminate_zeros()
    if csr.nnz > _INT32_MAX:
        raise ValueError(f"sparse {name} has {csr.nnz} stored entries: at most 2**31 - 1 are supported")
    values = csr.data
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        bad = ~np.isfinite(values)
        rows, cols = np.unique(_entry_rows(csr.indptr)[bad]), np.unique(csr.indices[bad])
        raise ValueError(nonfinite_message(name, rows, cols, "remove or impute those entries first"))
    with np.errstate(over="ignore"):
        cast = values.astype(target, copy=False)  # a canonical float CSR is not copied at all
    if not np.isfinite(cast).all():
        big = float(np.max(np.abs(values.astype(np.float64))))
        raise ValueError(
            f"{name} has values up to {big:.3g}, beyond the range of {target} (max {float(np.finfo(target).max):.3g}); "
            f"rescale {name} (divide it by a constant), or use float64 (jax.config.update('jax_enable_x64', True) "
            "with float64 input)"
        )
    return sp.csr_matrix(
        (cast, csr.indices.astype(np.int32, copy=False), csr.indptr.astype(np.int32, copy=False)), shape=(n, d)
    )


def _gather(values, idx):
    """``values[idx]`` for indices known to be in range (every stored entry's row and column are:
    padding entries point at slot 0 with value 0): no clamping or bounds masks."""
    return values.at[idx].get(mode="promise_in_bounds")


def _segment_sum(values, ids, num_segments, *, sorted_ids=False):
    """``jax.ops.segment_sum`` for in-range ``ids`` (see :func:`_gather`)."""
    return jax.ops.segment_sum(
        values, ids, num_segments, indices_are_sorted=sorted_ids, mode=jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS
    )


def _power_of_two(col_max, col_min):
    """A power of two near each column's half-range (1 for constant columns): the exact rescaling
    before squaring of :mod:`jaxselect.design.summary`."""
    half = jax.lax.stop_gradient(0.5 * col_max - 0.5 * col_min)
    exponent = jnp.frexp(jnp.where(half > 0, half, jnp.ones_like(half)))[1]
    return jnp.ldexp(jnp.ones_like(half), exponent)


def _finish(col_min, col_max, mean_n, var_n, p, nf):
    """The rule on the moments of ``X / p`` (as :func:`~jaxselect.design.column_summary`)."""
    s = standardize(mean_n * p, var_n, col_max > col_min, nf)
    return s._replace(scale=s.scale * jnp.where(s.live, p, jnp.ones_like(p)))


@partial(jit, static_argnames=("n", "d"))
def _summary(data, rows, cols, w, n: int, d: int):
    """``(summary, col_min, col_max)`` of the stored entries (implicit zeros included); see the module docstring."""
    dtype = data.dtype
    ones_rows = jnp.ones((n,), bool)
    pos_row = ones_rows if w is None else w > 0
    # a stored zero (padding, a shard's padding, a row dropped by a traced subsample) is an implicit zero
    entry_pos = pos_row[rows] & (data != 0)
    count = jax.ops.segment_sum(entry_pos.astype(jnp.int32), cols, num_segments=d)
    n_pos = jnp.sum(pos_row, dtype=jnp.int32)  # int32 under x64 too (count is int32)
    smax = jax.ops.segment_max(jnp.where(entry_pos, data, -jnp.inf), cols, num_segments=d)
    smin = jax.ops.segment_min(jnp.where(entry_pos, data, jnp.inf), cols, num_segments=d)
    zero = jnp.zeros((), dtype)
    implicit = count < n_pos  # some row that counts holds an implicit zero in this column
    col_max = jnp.where(implicit, jnp.maximum(smax, zero), smax)
    col_min = jnp.where(implicit, jnp.minimum(smin, zero), smin)
    p = _power_of_two(col_max, col_min)
    xn = data / _gather(p, cols)
    stored = data != 0  # zeros (padding) are left to the implicit-zero term
    we = jnp.where(stored, jnp.ones_like(data) if w is None else w[rows], jnp.zeros_like(data))
    nf = jnp.asarray(n, dtype) if w is None else jnp.sum(w)
    stored_w = jax.ops.segment_sum(we, cols, num_segments=d)
    implicit_w = jnp.maximum(nf - stored_w, zero)  # weight of the implicit zeros, each (0 − m)²
    # The mean, then one correction pass Σ w (x − m) / Σw: a scatter-add sums sequentially, and the
    # correction removes its rounding (otherwise a column far from 0 loses digits of its variance).
    first = jax.ops.segment_sum(we * xn, cols, num_segments=d) / nf
    residual = jax.ops.segment_sum(we * (xn - _gather(first, cols)), cols, num_segments=d) - implicit_w * first
    mean_n = first + residual / nf
    c = xn - _gather(mean_n, cols)
    var_n = (jax.ops.segment_sum(we * c * c, cols, num_segments=d) + implicit_w * mean_n * mean_n) / nf
    return _finish(col_min, col_max, mean_n, var_n, p, nf), col_min, col_max


@jax.tree_util.register_pytree_node_class
class SparseDesign:
    """A standardised view of a sparse X (n, D) stored on a device as its non-zeros (a pytree).

    Attributes:
      data: (nnz,) the stored values.
      rows: (nnz,) int32 row of each entry, sorted (ascending).
      cols: (nnz,) int32 stored column ("slot") of each entry, in ``[0, n_slots)``.
      mean: (D,) column means μ.
      factor: (D,) ``live/scale`` (0 on inert columns).
      n_rows: n (static: pytree auxiliary data).
      alias: None (column j is slot j), or (D,) int32 the slot of each column: set by
        :meth:`take`, which selects columns without touching the entries (a repeated column
        shares its slot; the entries of slots no column names add nothing to any product or
        summary), so a traced compaction costs O(D), not O(nnz).
      n_slots: the number of slots (static; D when ``alias`` is None).

    Build one with :meth:`from_csr` (or :func:`~jaxselect.design.as_data` on sparse X). The
    entries must not repeat a (row, column) pair for :meth:`summarize` (products add repeats up).

    >>> import numpy as np, jax.numpy as jnp, scipy.sparse as sp, jaxselect as js
    >>> X = sp.random(6, 4, density=0.5, format="csr", random_state=0, dtype=np.float32)
    >>> op = js.as_data(X, targets=None, constant_columns="inert").design
    >>> type(op).__name__, op.shape
    ('SparseDesign', (6, 4))
    >>> bool(np.allclose(op.rmv(jnp.ones(6, jnp.float32)), 0.0, atol=1e-5))   # centred columns
    True
    """

    #: the storage holds only non-zero entries (solvers read this, never the class)
    sparse = True
    #: rows split over devices (:class:`~jaxselect.design.ShardedSparseDesign`)
    sharded = False

    __slots__ = ("data", "rows", "cols", "mean", "factor", "n_rows", "alias", "n_slots")

    def __init__(self, data, rows, cols, mean, factor, n_rows: int, alias=None, n_slots: int | None = None):
        self.data = data
        self.rows = rows
        self.cols = cols
        self.mean = mean
        self.factor = factor
        self.n_rows = n_rows
        self.alias = alias
        self.n_slots = int(mean.shape[0]) if n_slots is None else n_slots

    def tree_flatten(self):
        return (self.data, self.rows, self.cols, self.mean, self.factor, self.alias), (self.n_rows, self.n_slots)

    @classmethod
    def tree_unflatten(cls, aux, leaves):
        *arrays, alias = leaves
        n_rows, n_slots = aux
        return cls(*arrays, n_rows, alias, n_slots)

    def _replace(self, **changes) -> "SparseDesign":
        fields = {k: getattr(self, k) for k in self.__slots__}
        fields.update(changes)
        return SparseDesign(**fields)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_csr(cls, X, mean=None, factor=None, dtype=None) -> "SparseDesign":
        """The operator of a canonical CSR matrix (:func:`as_sparse_csr`); no standardisation when
        ``mean``/``factor`` are None."""
        dtype = np.dtype(dtype if dtype is not None else X.dtype)
        n, d = X.shape
        mean = np.zeros(d, dtype) if mean is None else mean
        factor = np.ones(d, dtype) if factor is None else factor
        nnz = int(X.indptr[-1])
        size = nnz_bucket(nnz) if n and d else nnz
        data, rows, cols = _aligned(size, dtype, 0), _aligned(size, np.int32, max(n - 1, 0)), _aligned(size, np.int32, 0)
        data[:nnz], rows[:nnz], cols[:nnz] = X.data[:nnz], _entry_rows(X.indptr), X.indices[:nnz]
        # device_put, not jnp.asarray: on the CPU it aliases these fresh aligned host arrays (no second copy)
        return cls(
            jax.device_put(data), jax.device_put(rows), jax.device_put(cols), jnp.asarray(mean, dtype),
            jnp.asarray(factor, dtype), int(n),
        )

    @classmethod
    def raw(cls, X) -> "SparseDesign":
        """X itself (no centring or scaling), before the boundary's summary pass."""
        return cls.from_csr(X)

    def standardized(self, summary) -> "SparseDesign":
        return self._replace(mean=jnp.asarray(summary.mean, self.dtype), factor=jnp.asarray(summary.factor, self.dtype))

    # -- protocol -----------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_rows, int(self.mean.shape[0]))

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def nnz(self) -> int:
        """Stored entries, padding included (:func:`nnz_bucket`)."""
        return int(self.data.shape[0])

    def __repr__(self) -> str:
        return f"SparseDesign(shape={self.shape}, nnz={self.nnz}, dtype={self.dtype})"

    def summarize(self, w=None):
        """``(ColumnSummary, col_min, col_max)`` from the stored entries (implicit zeros counted),
        jitted; the rule of :func:`~jaxselect.design.column_summary`."""
        summary, lo, hi = _summary(self.data, self.rows, self.cols, w, self.n_rows, self.n_slots)
        if self.alias is None:
            return summary, lo, hi
        a = self.alias  # per slot → per column
        return summary._replace(mean=summary.mean[a], scale=summary.scale[a], live=summary.live[a]), lo[a], hi[a]

    def mv(self, v):
        """``X̃ v``: (D,) → (n,), or (D, k) → (n, k) (a segment sum over the sorted rows)."""
        return _mv(self, jnp.asarray(v))

    def rmv(self, u):
        """``u X̃``: (n,) → (D,), or (k, n) → (k, D) (a scatter-add over the columns)."""
        return _rmv(self, jnp.asarray(u))

    def materialize(self):
        """The dense (n, D) standardised design (small designs and tests only)."""
        return _materialize(self)

    def densify(self):
        """The same standardised view over a dense copy of the stored values: a
        :class:`~jaxselect.design.DenseDesign` of (n, D) (FSA's narrow stages of a small sparse X,
        where XLA's dense products beat its scatter-adds over every stored entry)."""
        from jaxselect.design.operators import DenseDesign

        return DenseDesign(_raw_dense(self), self.mean, self.factor)

    def gram(self, w=None):
        """``X̃ᵀ W X̃ / Σw`` (D, D), through the dense design: for small D only."""
        return _gram(self, w)

    def gram_columns(self, idx, w=None):
        """``X̃ᵀ W X̃[:, idx] / Σw`` (D, s): the s dense standardised columns, then one ``rmv``."""
        return _gram_columns(self, self._index(idx), w)

    def take(self, idx) -> "SparseDesign":
        """The operator of columns ``idx`` (s,): the same entries, ``alias`` naming the slot of each
        kept column (the other slots' entries add nothing; a repeated index shares its slot).
        O(s), traceable."""
        return _take(self, self._index(idx))

    def _index(self, idx):
        idx = jnp.asarray(idx).astype(jnp.int32)
        if idx.ndim != 1:
            raise ValueError(f"take: idx must be 1-D; got shape {tuple(idx.shape)}")
        return idx

    def compact(self, cols, block: int = 0, *, pad: bool = False, size: int | None = None) -> "SparseDesign":
        """The kept columns ``cols`` as the cheapest operator for repeated products: with concrete
        arrays the entries of the other columns are removed (nnz shrinks to the kept columns';
        ``pad``: padded to :func:`nnz_bucket`, zeros in slot 0 of the last row, so similar supports
        share compiled programs; ``size``: to that many entries instead when it is at least their
        count, so that another support shares this one's programs), under a trace it is
        :meth:`take` (the same entries, O(D)).
        ``block`` (a row-block hint of the dense operators) does not apply to sparse storage.
        The entries are read in blocks (on the CPU without a copy): besides the result, the
        selection holds one block's temporaries."""
        del block
        kept = self.take(cols)
        if is_traced((kept.data, kept.cols, kept.alias)):
            return kept
        alias = np.asarray(kept.alias)
        used = np.zeros(kept.n_slots, bool)
        used[alias] = True
        renumber = np.cumsum(used, dtype=np.int32) - 1  # kept slots → 0 .. n_used − 1
        new_alias = renumber[alias]
        n_used = int(used.sum())
        identity = new_alias.size == n_used and bool(np.all(new_alias == np.arange(new_alias.size)))
        fill = self.n_rows > 0 and n_used > 0
        data, rows, slot = _kept_entries(kept, used, renumber, pad and fill, size if fill else None)
        return kept._replace(
            data=data, rows=rows, cols=slot, alias=None if identity else jnp.asarray(new_alias), n_slots=n_used,
        )

    def subsample_rows(self, stride: int) -> "SparseDesign":
        """Every ``stride``-th row (static ``stride``), as ``X[::stride]``: with concrete arrays the
        other rows' entries are removed; under a trace they become zeros (static nnz, rows stay sorted)."""
        stride = int(stride)
        if stride < 1:
            raise ValueError(f"subsample_rows: stride must be a positive integer; got {stride}")
        n_new = -(-self.n_rows // stride)
        if is_traced((self.data, self.rows)):
            kept = self.rows % stride == 0
            data = jnp.where(kept, self.data, jnp.zeros((), self.dtype))
            return self._replace(data=data, rows=self.rows // stride, n_rows=n_new)
        keep = np.flatnonzero(np.asarray(self.rows) % stride == 0)
        return self._replace(
            data=self.data[keep], rows=self.rows[keep] // stride, cols=self.cols[keep], n_rows=n_new
        )

    def row_blocks(self, rows: int | None = None) -> Iterator:
        """``(start, block operator)`` over row blocks (host iteration; concrete arrays only)."""
        n = self.n_rows
        row_ids = np.asarray(self.rows)
        if rows is None:
            per_row = max(1.0, row_ids.size / max(n, 1))
            rows = max(8, int(SPARSE_BLOCK_ENTRIES / per_row))
        rows = max(1, int(rows))
        for start in range(0, n, rows):
            stop = min(n, start + rows)
            a, b = np.searchsorted(row_ids, [start, stop])
            yield start, self._replace(
                data=self.data[a:b], rows=self.rows[a:b] - jnp.int32(start), cols=self.cols[a:b], n_rows=stop - start
            )

    def shard(self, mesh=None, axis: str = "data"):
        """``(design, w)``: rows split into equal contiguous blocks over ``mesh``'s ``axis``, each
        block's entries padded to the same count; ``w`` (n_padded,) is 1 on real rows and 0 on padding
        (pass it as ``sample_weight``). With several processes, this design is this process's rows.
        See :func:`jaxselect.design.sparse_shard.shard_design`."""
        from jaxselect.design.sparse_shard import shard_design

        return shard_design(self, mesh, axis)


def pad_entries(op: "SparseDesign") -> "SparseDesign":
    """``op`` with its entries padded to :func:`nnz_bucket` (zeros in slot 0 of the last row: the
    rows stay sorted), so designs with similar entry counts share compiled programs."""
    nnz = int(op.data.shape[0])
    extra = nnz_bucket(nnz) - nnz
    if extra <= 0:
        return op
    last = jnp.int32(max(op.n_rows - 1, 0))
    return op._replace(
        data=jnp.concatenate([op.data, jnp.zeros((extra,), op.dtype)]),
        rows=jnp.concatenate([op.rows, jnp.full((extra,), last, jnp.int32)]),
        cols=jnp.concatenate([op.cols, jnp.zeros((extra,), jnp.int32)]),
    )


def _kept_entries(op: "SparseDesign", used, renumber, pad: bool, target: int | None = None):
    """The stored non-zero entries of ``op`` in ``used`` slots, in order, slots renumbered by
    ``renumber``: ``(data, rows, cols)`` device arrays, padded to :func:`nnz_bucket` with zeros in
    slot 0 of the last row when ``pad`` (to ``target`` entries when that is at least the count,
    with or without ``pad``). Two passes over blocks of :data:`PRODUCT_BLOCK` entries
    (count, then copy into the aligned result, which the device aliases on the CPU)."""
    data, rows, cols = np.asarray(op.data), np.asarray(op.rows), np.asarray(op.cols)
    nnz, block = data.shape[0], PRODUCT_BLOCK

    def masks():
        for lo in range(0, nnz, block):
            hi = min(nnz, lo + block)
            yield lo, hi, used[cols[lo:hi]] & (data[lo:hi] != 0)

    count = sum(int(np.count_nonzero(m)) for _, _, m in masks())
    size = nnz_bucket(count) if pad else count
    if target is not None and target >= count:
        size = int(target)
    out_d = _aligned(size, data.dtype, 0)
    out_r = _aligned(size, np.int32, max(op.n_rows - 1, 0))
    out_c = _aligned(size, np.int32, 0)
    pos = 0
    for lo, hi, m in masks():
        k = int(np.count_nonzero(m))
        out_d[pos : pos + k] = data[lo:hi][m]
        out_r[pos : pos + k] = rows[lo:hi][m]
        out_c[pos : pos + k] = renumber[cols[lo:hi][m]]
        pos += k
    return jax.device_put(out_d), jax.device_put(out_r), jax.device_put(out_c)


# -- the products, jitted once per shape (eager calls do not dispatch op by op) --------------------
#: Stored entries per block of a product over many entries: the products add each block's
#: ``value × gathered`` terms into the (n,) or (D,) accumulator in turn, so their temporaries hold
#: one block, not one array the size of the entries (the additions happen in the same order).
PRODUCT_BLOCK = 1 << 20


def _scatter_add(acc, ids, values_of, nnz: int, sorted_ids: bool = False):
    """``acc.at[ids].add(values_of(lo, hi))`` over the entries, one :data:`PRODUCT_BLOCK` at a time
    when there are more than two blocks (``values_of(lo, hi)`` gives the terms of entries lo..hi;
    ``lo`` may be traced)."""
    def add(a, i, u):
        return a.at[i].add(u, mode=jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS, indices_are_sorted=sorted_ids)

    block = PRODUCT_BLOCK
    if nnz <= 2 * block:
        return add(acc, ids, values_of(0, nnz))
    full = nnz // block

    @jax.checkpoint  # differentiated, a block's slices are taken again, not stored for every block
    def body(b, acc):
        lo = b * block
        return add(acc, jax.lax.dynamic_slice_in_dim(ids, lo, block), values_of(lo, block))

    acc = jax.lax.fori_loop(0, full, body, acc)
    if nnz > full * block:
        lo = full * block
        acc = add(acc, ids[lo:], values_of(lo, nnz - lo))
    return acc


def _entries(x, lo, size):
    """Entries ``lo .. lo + size`` of an entry array (``lo`` static or traced)."""
    if isinstance(lo, int):
        return x[lo : lo + size]
    return jax.lax.dynamic_slice_in_dim(x, lo, size)


# -- the products, jitted once per shape (eager calls do not dispatch op by op) --------------------
@jit
def _mv(op: SparseDesign, v):
    n, d = op.shape
    fv = v * (op.factor if v.ndim == 1 else op.factor[:, None])
    if d == 0:
        return jnp.zeros((n,) + v.shape[1:], op.dtype)
    slots = fv if op.alias is None else _segment_sum(fv, op.alias, op.n_slots)  # columns sharing a slot add up
    nnz = int(op.data.shape[0])

    def terms(lo, size):
        data = _entries(op.data, lo, size)
        return (data if v.ndim == 1 else data[:, None]) * _gather(slots, _entries(op.cols, lo, size))

    out = _scatter_add(jnp.zeros((n,) + v.shape[1:], op.dtype), op.rows, terms, nnz, sorted_ids=True)
    return out - (op.mean @ fv if v.ndim == 1 else (op.mean @ fv)[None, :])


@jit
def _rmv(op: SparseDesign, u):
    d = op.shape[1]
    if d == 0:
        return jnp.zeros(u.shape[:-1] + (0,), op.dtype)
    nnz = int(op.data.shape[0])
    ut = u if u.ndim == 1 else u.T  # (n,) or (n, k)

    def terms(lo, size):
        data = _entries(op.data, lo, size)
        return (data if u.ndim == 1 else data[:, None]) * _gather(ut, _entries(op.rows, lo, size))

    acc = _scatter_add(jnp.zeros((op.n_slots,) + ut.shape[1:], op.dtype), op.cols, terms, nnz)  # (slots[, k])
    acc = acc if op.alias is None else _gather(acc, op.alias)
    if u.ndim == 1:
        return (acc - jnp.sum(u) * op.mean) * op.factor
    total = jnp.sum(u, axis=-1)
    return (acc.T - total[:, None] * op.mean[None, :]) * op.factor[None, :]


@jit
def square_sums(op: SparseDesign, u):
    """(D,) ``Σ_i u_i x_ij²`` of the stored (raw) entries, one :data:`PRODUCT_BLOCK` at a time
    (no entry-sized temporaries; the diagonal curvature of a polish through the operator)."""
    nnz = int(op.data.shape[0])
    if op.shape[1] == 0:
        return jnp.zeros((0,), op.dtype)

    def terms(lo, size):
        data = _entries(op.data, lo, size)
        return data * data * _gather(u, _entries(op.rows, lo, size))

    acc = _scatter_add(jnp.zeros((op.n_slots,), op.dtype), op.cols, terms, nnz)
    return acc if op.alias is None else _gather(acc, op.alias)


def _raw_dense(op: SparseDesign):
    """(n, D) the stored values placed densely (aliased columns repeat their slot's values)."""
    n, d = op.shape
    if op.alias is None:
        return jnp.zeros((n, d), op.dtype).at[op.rows, op.cols].add(op.data, mode="drop")
    # only the named slots, each at the position of its first column (n × D, never n × slots)
    first = jnp.full((op.n_slots,), d, jnp.int32).at[op.alias].min(jnp.arange(d, dtype=jnp.int32))
    dense = jnp.zeros((n, d), op.dtype).at[op.rows, _gather(first, op.cols)].add(op.data, mode="drop")
    return dense[:, first[op.alias]]


@jit
def _materialize(op: SparseDesign):
    return (_raw_dense(op) - op.mean[None, :]) * op.factor[None, :]


@jit
def _gram(op: SparseDesign, w):
    return DenseDesign(_materialize(op), jnp.zeros_like(op.mean), jnp.ones_like(op.factor)).gram(w)


def _take(op: SparseDesign, idx) -> SparseDesign:
    # only the (s,) vectors go through the jitted program: a jit returning the entries unchanged
    # would copy them (the size of X's entries) on every concrete call
    mean, factor, slot = _take_vectors(op.mean, op.factor, op.alias, idx)
    return op._replace(mean=mean, factor=factor, alias=slot)


@jit
def _take_vectors(mean, factor, alias, idx):
    d = mean.shape[0]
    idx = jnp.where(idx < 0, idx + d, idx)
    slot = idx if alias is None else alias[idx]  # the stored slot of each requested column
    return mean[idx], factor[idx], slot


@jit
def _gram_columns(op: SparseDesign, idx, w):
    cols = _materialize(_take(op, idx))  # (n, s)
    if w is None:
        return _rmv(op, cols.T).T / jnp.asarray(cols.shape[0], cols.dtype)
    return _rmv(op, (cols * w[:, None]).T).T / jnp.sum(w)


class HostSparseDesign:
    """A standardised view of a canonical ``scipy.sparse`` CSR X (n, D) on the host.

    Products are scipy's (``X @ v``, ``X.T @ u``) with implicit centring and scaling; the summary
    pass runs in float64 on the stored entries; nothing is densified except by :meth:`materialize`,
    :meth:`gram` and the s columns of :meth:`gram_columns`. :meth:`to_device` gives the
    :class:`SparseDesign` of the same data.
    """

    #: the storage holds only non-zero entries (solvers read this, never the class)
    sparse = True

    __slots__ = ("X", "mean", "factor", "dtype")

    def __init__(self, X, mean, factor, dtype=None):
        self.X = X
        self.dtype = np.dtype(dtype if dtype is not None else X.dtype)
        self.mean = np.asarray(mean, self.dtype)
        self.factor = np.asarray(factor, self.dtype)

    @classmethod
    def raw(cls, X) -> "HostSparseDesign":
        """X itself (no centring or scaling), before the boundary's summary pass."""
        d = X.shape[1]
        return cls(X, np.zeros(d, X.dtype), np.ones(d, X.dtype))

    def standardized(self, summary) -> "HostSparseDesign":
        return HostSparseDesign(self.X, np.asarray(summary.mean), np.asarray(summary.factor), self.dtype)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.X.shape)

    @property
    def nnz(self) -> int:
        return int(self.X.nnz)

    def __repr__(self) -> str:
        return f"HostSparseDesign(shape={self.shape}, nnz={self.nnz}, dtype={self.dtype})"

    def summarize(self, w=None):
        """``(ColumnSummary, col_min, col_max)`` in float64 on the host (numpy arrays), the rule of
        :func:`~jaxselect.design.column_summary` with implicit zeros counted."""
        X = self.X
        n, d = X.shape
        ww = None if w is None else np.asarray(w, np.float64)
        counted = X if ww is None or (ww > 0).all() else X[np.flatnonzero(ww > 0)]
        lo = np.asarray(counted.min(axis=0).todense(), np.float64).ravel()  # implicit zeros included
        hi = np.asarray(counted.max(axis=0).todense(), np.float64).ravel()
        half = 0.5 * hi - 0.5 * lo
        p = np.ldexp(1.0, np.frexp(np.where(half > 0, half, 1.0))[1])  # exact power-of-two rescaling
        cols = X.indices
        xn = X.data.astype(np.float64) / p[cols]
        we = np.ones_like(xn) if ww is None else ww[_entry_rows(X.indptr)]
        nf = float(n) if ww is None else float(ww.sum())
        with np.errstate(invalid="ignore", over="ignore"):
            mean_n = np.bincount(cols, weights=we * xn, minlength=d) / nf
            c = xn - mean_n[cols]
            implicit_w = np.maximum(nf - np.bincount(cols, weights=we, minlength=d), 0.0)
            var_n = (np.bincount(cols, weights=we * c * c, minlength=d) + implicit_w * mean_n**2) / nf
        dt = self.dtype
        s = standardize((mean_n * p).astype(dt), var_n.astype(dt), hi > lo, np.asarray(nf, dt), xp=np)
        s = s._replace(scale=(s.scale * np.where(s.live, p, 1.0)).astype(dt))
        return s, lo.astype(dt), hi.astype(dt)

    def mv(self, v):
        v = np.asarray(v, self.dtype)
        fv = v * (self.factor if v.ndim == 1 else self.factor[:, None])
        return np.asarray(self.X @ fv, self.dtype) - self.mean @ fv

    def rmv(self, u):
        u = np.asarray(u, self.dtype)
        acc = np.asarray(self.X.T @ u.T, self.dtype).T  # CSC view of the CSR: no copy
        total = np.sum(u, axis=-1)
        return ((acc - total[..., None] * self.mean) * self.factor).astype(self.dtype)

    def materialize(self):
        return ((self.X.toarray() - self.mean) * self.factor).astype(self.dtype)

    def gram(self, w=None):
        Xs = self.materialize()
        if w is None:
            return (Xs.T @ Xs / Xs.shape[0]).astype(self.dtype)
        w = np.asarray(w, self.dtype)
        return ((Xs * w[:, None]).T @ Xs / np.sum(w, dtype=np.float64)).astype(self.dtype)

    def gram_columns(self, idx, w=None):
        return host_gram_columns(self, idx, w)

    def take(self, idx) -> "HostSparseDesign":
        idx = np.asarray(idx)
        return HostSparseDesign(self.X[:, idx].tocsr(), self.mean[idx], self.factor[idx], self.dtype)

    def compact(self, cols, block: int = 0) -> SparseDesign:
        """The kept columns ``cols`` (concrete) as a device :class:`SparseDesign` holding only their
        entries (as :meth:`HostDesign.compact` gives a device operator); ``block`` does not apply to
        sparse storage."""
        del block
        if is_traced(cols):
            raise TypeError("HostSparseDesign.compact needs concrete column indices (it gathers on the host)")
        return self.take(np.asarray(cols)).to_device()

    def subsample_rows(self, stride: int) -> "HostSparseDesign":
        """Every ``stride``-th row, ``X[::stride]``."""
        return HostSparseDesign(self.X[:: int(stride)], self.mean, self.factor, self.dtype)

    def row_blocks(self, rows: int | None = None):
        n = self.shape[0]
        if rows is None:
            rows = max(8, int(SPARSE_BLOCK_ENTRIES / max(1.0, self.nnz / max(n, 1))))
        for start in range(0, n, max(1, int(rows))):
            yield start, HostSparseDesign(self.X[start : start + rows], self.mean, self.factor, self.dtype)

    def shard(self, mesh=None, axis: str = "data"):
        """Row-sharding goes through the device operator: ``design.to_device().shard(mesh)``."""
        return self.to_device().shard(mesh, axis)

    def to_device(self) -> SparseDesign:
        """The same standardised design as a :class:`SparseDesign` (one device copy of the entries)."""
        return SparseDesign.from_csr(self.X, self.mean, self.factor, self.dtype)


#: Largest ``n·d`` up to which :func:`greedy_rls` and :func:`~jaxselect.glm_omp` densify a sparse X
#: (their own state is an (n, d) dense matrix, so sparse storage would save nothing there).
SPARSE_DENSIFY_LIMIT = 1 << 26


def densify_sparse(X, who: str, state: str, alternative: str):
    """X itself when dense; a sparse X (``scipy.sparse``, BCOO/BCSR) as a dense array when ``n·d`` is
    at most :data:`SPARSE_DENSIFY_LIMIT`, else a ValueError naming ``alternative``.

    For solvers whose ``state`` is an (n, d) dense matrix anyway: densifying X at most doubles
    their memory. The entries follow :func:`~jaxselect.design.as_sparse_csr`'s rules (duplicates
    summed; NaN/Inf an error naming the rows).
    """
    if not is_sparse(X):
        return X
    n, d = X.shape
    if n * d > SPARSE_DENSIFY_LIMIT:
        raise ValueError(
            f"{who} keeps {state}, an (n, d) dense matrix, so it densifies sparse X only up to n·d = "
            f"{SPARSE_DENSIFY_LIMIT:,} entries; this X is {n} x {d} = {n * d:,}: use {alternative}, which run on "
            "sparse X without densifying it, or pass X.toarray() if it fits in memory"
        )
    return as_sparse_csr(X, "X").toarray()
