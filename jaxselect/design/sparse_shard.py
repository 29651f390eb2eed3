"""Sparse rows split over the devices of a mesh, in one process or in several (``jax.distributed``).

:func:`shard_design` (``SparseDesign.shard``) and ``js.shard_rows(X_csr, y, ...)`` (through
:func:`shard_sparse_rows`) give a :class:`ShardedSparseDesign`: the entry arrays ``data``/``rows``/
``cols`` split into one block per position of the mesh axis, each block holding the entries of
``per`` consecutive rows (block ``i``: rows ``[i·per, (i+1)·per)``), every block padded to the same
number of entries (value 0 in slot 0 of the block's last row: the rows stay sorted and the padding
adds nothing) and the rows padded with empty rows of weight 0. The column vectors (means, factors)
are replicated.

Several processes: each process passes **its own** rows (a CSR block, and its rows of y, labels,
weights...), exactly as for dense ``shard_rows``: the processes' row counts are gathered, every
process is padded to the same count (a multiple of its positions on the mesh axis), the widest
block sets the common entry count, and the global arrays are assembled from the processes' blocks
(``jax.make_array_from_callback``: each process only fills its own devices). Nothing else is
special: the solvers' products (``X̃v``, ``uX̃``), the column summary of the front door (means,
scales, the constant-column rule, computed over every process's rows) and the lazy Gram columns are
global segment sums that XLA's partitioner turns into per-device partial sums and all-reduces — the
same multi-process path as a row-sharded dense X.

>>> import numpy as np, scipy.sparse as sp, jaxselect as js
>>> X = sp.random(10, 4, density=0.5, format="csr", random_state=0, dtype=np.float32)
>>> Xs, w = js.shard_rows(X, weights=True)        # a row-sharded SparseDesign and the row weights
>>> type(Xs).__name__, Xs.shape[0] == w.shape[0] >= 10, float(w.sum())
('ShardedSparseDesign', True, 10.0)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from jaxselect.programs import jit
from jaxselect._validation import is_traced
from jaxselect.design.sparse import SparseDesign, as_sparse_csr, is_sparse
from jaxselect.sharding import data_mesh, register_row_handler, row_sharding

__all__ = ["ShardedSparseDesign", "as_raw_design", "shard_design", "shard_sparse_rows"]


@jax.tree_util.register_pytree_node_class
class ShardedSparseDesign(SparseDesign):
    """A :class:`~jaxselect.design.SparseDesign` whose entries are split into per-device row blocks.

    The arrays are global (one ``jax.Array`` over every device and process); ``mesh`` and
    ``axis`` (static) say where the blocks lie: block ``i`` of ``axis`` holds the entries of rows
    ``[i·per, (i+1)·per)``, ``per = n_rows / mesh.shape[axis]``. The products run per device
    (``jax.shard_map``): ``X̃v`` computes each device's own rows (no communication), ``uX̃`` and
    the Gram columns sum each device's partial (D,)-sized result with one ``psum``; the summary and
    the other methods are the global computations of :class:`~jaxselect.design.SparseDesign`,
    which XLA partitions. With concrete arrays :meth:`compact` compacts each device's block on its
    own (no process may read a global array spread over several processes). Built by
    :func:`shard_design` / ``js.shard_rows``.

    Attributes (beyond :class:`~jaxselect.design.SparseDesign`'s):
      mesh: the :class:`jax.sharding.Mesh` of the blocks (Auto axes).
      axis: the mesh axis the rows are split over.
    """

    __slots__ = ("mesh", "axis")

    sharded = True

    def __init__(self, data, rows, cols, mean, factor, n_rows: int, alias=None, n_slots=None, *, mesh, axis: str):
        super().__init__(data, rows, cols, mean, factor, n_rows, alias, n_slots)
        self.mesh = mesh
        self.axis = axis

    def tree_flatten(self):
        leaves, (n_rows, n_slots) = super().tree_flatten()
        return leaves, (n_rows, n_slots, self.mesh, self.axis)

    @classmethod
    def tree_unflatten(cls, aux, leaves):
        n_rows, n_slots, mesh, axis = aux
        *arrays, alias = leaves
        return cls(*arrays, n_rows, alias, n_slots, mesh=mesh, axis=axis)

    def _replace(self, **changes) -> "ShardedSparseDesign":
        fields = {k: getattr(self, k) for k in SparseDesign.__slots__ + self.__slots__}
        fields.update(changes)
        return ShardedSparseDesign(**fields)

    def __repr__(self) -> str:
        return (
            f"ShardedSparseDesign(shape={self.shape}, nnz={self.nnz}, dtype={self.dtype}, "
            f"devices={int(self.mesh.shape[self.axis])} along {self.axis!r})"
        )

    # -- the products, per device ---------------------------------------------------------------
    def _local(self, data, rows, cols, mean, factor, alias) -> SparseDesign:
        """This device's block as a SparseDesign of its ``per`` rows (inside ``shard_map``)."""
        per = self.n_rows // int(self.mesh.shape[self.axis])
        start = jax.lax.axis_index(self.axis).astype(jnp.int32) * jnp.int32(per)
        return SparseDesign(data, rows - start, cols, mean, factor, per, alias, self.n_slots)

    def _per_device(self, body, extra, extra_specs, out_specs):
        """``body(local design, *extra)`` on every device's block (``jax.shard_map``)."""
        rows, rep = PartitionSpec(self.axis), PartitionSpec()
        alias_spec = None if self.alias is None else rep
        arrays = (self.data, self.rows, self.cols, self.mean, self.factor, self.alias)

        def run(data, r, c, mean, factor, alias, *more):
            return body(self._local(data, r, c, mean, factor, alias), *more)

        return jax.shard_map(
            run,
            mesh=self.mesh,
            in_specs=(rows, rows, rows, rep, rep, alias_spec, *extra_specs),
            out_specs=out_specs,
        )(*arrays, *extra)

    def mv(self, v):
        """``X̃ v``: (D,) → (n,), or (D, k) → (n, k); each device computes its own rows."""
        v = jnp.asarray(v)
        out = PartitionSpec(self.axis, *([None] * (v.ndim - 1)))
        return self._per_device(lambda op, v: op.mv(v), (v,), (PartitionSpec(),), out)

    def rmv(self, u):
        """``u X̃``: (n,) → (D,), or (k, n) → (k, D): each device's partial sum, then one ``psum``."""
        u = jnp.asarray(u)
        spec = PartitionSpec(*([None] * (u.ndim - 1)), self.axis)
        axis = self.axis
        return self._per_device(lambda op, u: jax.lax.psum(op.rmv(u), axis), (u,), (spec,), PartitionSpec())

    def materialize(self):
        """The dense (n, D) standardised design, row-sharded (small designs and tests only)."""
        return self._per_device(lambda op: op.materialize(), (), (), PartitionSpec(self.axis, None))

    def gram_columns(self, idx, w=None):
        """``X̃ᵀ W X̃[:, idx] / Σw`` (D, s): each device's s dense columns and its partial ``rmv``,
        then one ``psum``."""
        idx = self._index(idx)
        axis, n = self.axis, self.n_rows

        def body(op, idx, *w):
            cols = op.take(idx).materialize()  # (per, s)
            if not w:
                return jax.lax.psum(op.rmv(cols.T).T, axis) / jnp.asarray(n, cols.dtype)
            (w,) = w
            num = jax.lax.psum(op.rmv((cols * w[:, None]).T).T, axis)
            return num / jax.lax.psum(jnp.sum(w), axis)

        extra, specs = ((idx,), (PartitionSpec(),)) if w is None else ((idx, w), (PartitionSpec(), PartitionSpec(axis)))
        return self._per_device(body, extra, specs, PartitionSpec())

    # -- host-side methods ------------------------------------------------------------------------
    def compact(self, cols, block: int = 0, *, pad: bool = False, size: int | None = None) -> "ShardedSparseDesign":
        """The kept columns ``cols``: under a trace :meth:`take` (static nnz); with concrete arrays each
        device's block keeps only the kept columns' entries, padded to the widest block (over every
        process), so the blocks stay on their devices (``pad`` and ``size`` have nothing to add)."""
        del block, pad, size
        kept = self.take(cols)
        if is_traced((kept.data, kept.rows, kept.cols)):
            return kept
        return _compact_blocks(kept)

    def subsample_rows(self, stride: int) -> SparseDesign:
        """Every ``stride``-th row (static ``stride``) by global position, padding rows included:
        the other rows' entries become zeros (the entry count stays; a plain SparseDesign of the
        same global arrays, whose products XLA partitions)."""
        stride = int(stride)
        if stride < 1:
            raise ValueError(f"subsample_rows: stride must be a positive integer; got {stride}")
        data = jnp.where(self.rows % stride == 0, self.data, jnp.zeros((), self.dtype))
        # the rows no longer lie in per-device blocks: a (global) SparseDesign
        return SparseDesign(
            data, self.rows // stride, self.cols, self.mean, self.factor, -(-self.n_rows // stride), self.alias,
            self.n_slots,
        )

    def row_blocks(self, rows: int | None = None):
        """Row blocks read on the host: one process only (a global array spread over several
        processes cannot be read by any one of them)."""
        if not _fully_addressable(self.data):
            raise NotImplementedError(
                "row_blocks reads the entries on the host; a ShardedSparseDesign spread over several processes "
                "cannot be read by one process: use its products (mv, rmv) instead"
            )
        return super().row_blocks(rows)

    def shard(self, mesh=None, axis: str = "data"):
        raise ValueError("this SparseDesign is already row-sharded; shard the unsharded design (or the CSR rows)")


def _fully_addressable(a) -> bool:
    return not isinstance(a, jax.Array) or a.is_fully_addressable


class _Layout:
    """Where this process's rows go on ``mesh``'s ``axis``: ``parts`` positions, ``per`` rows each;
    ``local`` (sorted) the positions whose devices are this process's; ``n_local`` its real rows."""

    def __init__(self, n_local: int, d: int, mesh, axis: str):
        if axis not in mesh.axis_names:
            raise ValueError(f"mesh has axes {mesh.axis_names}; no axis named {axis!r}")
        self.mesh, self.axis, self.n_local = mesh, axis, int(n_local)
        # the design's gathers and scatters have no Explicit-sharding rule: its arrays (and the rows
        # placed with it) live on the same devices with Auto axes (what the solvers relabel Explicit
        # inputs to, sharding.any_mesh), so that they mix in any computation
        self.auto_mesh = Mesh(mesh.devices, mesh.axis_names, axis_types=(AxisType.Auto,) * len(mesh.axis_names))
        self.parts = int(mesh.shape[axis])
        along = np.moveaxis(mesh.devices, mesh.axis_names.index(axis), 0).reshape(self.parts, -1)
        owners = [{dev.process_index for dev in row} for row in along]
        self.multi = jax.process_count() > 1 and len(set().union(*owners)) > 1
        me = jax.process_index()
        if self.multi and any(len(o) > 1 for o in owners):
            raise ValueError(
                f"the devices at one position of mesh axis {axis!r} belong to several processes; put each "
                "process's devices at their own positions of the row axis (e.g. jax.make_mesh((jax.device_count(),), "
                "('data',)))"
            )
        self.local = [i for i, o in enumerate(owners) if me in o] if self.multi else list(range(self.parts))
        if not self.local:
            raise ValueError(f"no device of process {me} lies on mesh axis {axis!r}; every process needs some")
        counts = self._gather([self.n_local, len(self.local), int(d)])
        if len(set(counts[:, 2])) > 1:
            raise ValueError(f"the processes hold different numbers of columns: {counts[:, 2].tolist()}; all need the same D")
        if len(set(counts[:, 1])) > 1:
            raise ValueError(f"the processes hold different numbers of devices on the mesh: {counts[:, 1].tolist()}")
        self.counts = counts[:, 0]
        k = len(self.local)
        self.per = max(1, -(-int(self.counts.max()) // k))  # rows per position
        self.n_rows = self.per * self.parts
        self.n_real = int(self.counts.sum())
        self.rank = {p: j for j, p in enumerate(self.local)}  # position -> block of this process

    def _gather(self, values) -> np.ndarray:
        """(processes, len(values)) int64: every process's ``values`` (this process's alone in one process)."""
        values = np.asarray(values, np.int64)[None, :]
        if not self.multi:
            return values
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(values)).reshape(-1, values.shape[1])

    def max_over_processes(self, value: int) -> int:
        return int(self._gather([value]).max())

    def place(self, blocks, block_rows: int, tail=(), spec=None):
        """The global array whose position-``i`` block is ``blocks[rank[i]]`` (each (block_rows, *tail))."""
        spec = PartitionSpec(self.axis) if spec is None else spec
        sharding = NamedSharding(self.auto_mesh, spec)
        shape = (block_rows * self.parts, *tail)

        def fill(index):
            start = index[0].start or 0
            return blocks[self.rank[start // block_rows]]

        return jax.make_array_from_callback(shape, sharding, fill)

    def replicate(self, value):
        value = np.asarray(value)
        return jax.make_array_from_callback(value.shape, NamedSharding(self.auto_mesh, PartitionSpec()), lambda i: value[i])

    def weights(self, dtype):
        """The (n_rows,) row weights, 1 on real rows."""
        w = np.zeros((len(self.local) * self.per,), dtype)
        w[: self.n_local] = 1
        return self.place(w.reshape(len(self.local), self.per), self.per)

    def rows_of(self, a):
        """A dense array's rows (padded by repeating the last row) as a global row-sharded array."""
        a = np.asarray(a)
        if a.ndim < 1 or a.shape[0] != self.n_local:
            raise ValueError(f"shard_rows: an array has {a.shape[0] if a.ndim else 0} rows but X has {self.n_local}")
        total = len(self.local) * self.per
        padded = np.concatenate([a, np.repeat(a[-1:], total - self.n_local, axis=0)]) if total > self.n_local else a
        blocks = padded.reshape(len(self.local), self.per, *a.shape[1:])
        return self.place(blocks, self.per, a.shape[1:], row_sharding(self.mesh, self.axis, a.ndim).spec)


def _entry_blocks(layout: _Layout, data, rows, cols, dtype):
    """Per-position entry blocks of this process's COO entries (sorted by row; local row ids)."""
    bounds = np.searchsorted(rows, np.arange(len(layout.local) + 1) * layout.per)
    width = layout.max_over_processes(max(1, int(np.max(np.diff(bounds)))))
    k = len(layout.local)
    bdata = np.zeros((k, width), dtype)
    bcols = np.zeros((k, width), np.int32)
    # padding entries: value 0 in slot 0 of the block's last row (the rows stay sorted)
    brows = np.empty((k, width), np.int32)
    for j, position in enumerate(layout.local):
        a, b = bounds[j], bounds[j + 1]
        offset = position * layout.per - j * layout.per  # local row -> global row
        brows[j] = (position + 1) * layout.per - 1
        bdata[j, : b - a], bcols[j, : b - a] = data[a:b], cols[a:b]
        brows[j, : b - a] = rows[a:b] + offset
    return bdata, brows, bcols, width


def _build(
    layout: _Layout, data, rows, cols, mean, factor, alias, dtype, n_slots=None
) -> tuple[ShardedSparseDesign, jax.Array]:
    keep = data != 0  # stored zeros (padding, dropped entries) add nothing anywhere
    bdata, brows, bcols, width = _entry_blocks(layout, data[keep], rows[keep], cols[keep], dtype)
    design = ShardedSparseDesign(
        layout.place(bdata, width),
        layout.place(brows, width),
        layout.place(bcols, width),
        layout.replicate(np.asarray(mean, dtype)),
        layout.replicate(np.asarray(factor, dtype)),
        layout.n_rows,
        None if alias is None else layout.replicate(np.asarray(alias, np.int32)),
        n_slots,
        mesh=layout.auto_mesh,
        axis=layout.axis,
    )
    return design, layout.weights(dtype)


def shard_design(design: SparseDesign, mesh=None, axis: str = "data") -> tuple[ShardedSparseDesign, jax.Array]:
    """``(sharded, w)``: ``design``'s rows split over ``mesh``'s ``axis`` (``SparseDesign.shard``).

    One process: the rows are split into equal contiguous blocks, one per position of ``axis``
    (n padded with empty rows to a multiple of the axis size). Several processes: ``design`` is
    *this process's* rows; every process is padded to the same number of rows (see the module
    docstring) and the global design is assembled from the processes' blocks. Each block's entries
    are padded to the widest block's count; the standardisation (means, factors) is kept and
    replicated.

    Args:
      design: a :class:`~jaxselect.design.SparseDesign` whose arrays this process holds whole.
      mesh: a :class:`jax.sharding.Mesh` (default: :func:`~jaxselect.data_mesh`, all devices).
      axis: the mesh axis to split rows over.

    Returns:
      ``(sharded, w)``: a :class:`ShardedSparseDesign` with ``n_padded`` rows and ``w``
      (n_padded,) row weights, 1 on real rows and 0 on padding (pass ``sample_weight=w``).

    Raises:
      ValueError: an already sharded design, an unknown axis, processes with different D.
    """
    if isinstance(design, ShardedSparseDesign):
        return design.shard(mesh, axis)
    if is_traced((design.data, design.rows, design.cols)):
        raise TypeError("SparseDesign.shard needs concrete arrays (call it outside jax.jit)")
    if not _fully_addressable(design.data):
        raise ValueError("SparseDesign.shard: this design is spread over several processes already")
    mesh = data_mesh(axis=axis) if mesh is None else mesh
    layout = _Layout(design.n_rows, design.shape[1], mesh, axis)
    data, rows, cols = (np.asarray(a) for a in (design.data, design.rows, design.cols))
    return _build(layout, data, rows, cols, design.mean, design.factor, design.alias, design.dtype, design.n_slots)


def _local_value(a) -> np.ndarray:
    """A replicated array's value, read from this process's first shard (a global array spread over
    several processes is not fully addressable)."""
    if isinstance(a, jax.Array) and not a.is_fully_addressable:
        return np.asarray(a.addressable_shards[0].data)
    return np.asarray(a)


def _compact_blocks(kept: ShardedSparseDesign) -> ShardedSparseDesign:
    """Each device's block of ``kept`` (a lazy :meth:`~SparseDesign.take`) holding only the entries
    of the kept columns' slots, renumbered ``0 .. n_used − 1`` (as :meth:`SparseDesign.compact`
    does), padded to the widest block (the width is agreed over every process); the padding
    entries sit on the block's last row."""
    mesh, axis = kept.mesh, kept.axis
    alias = np.arange(kept.n_slots) if kept.alias is None else _local_value(kept.alias)
    used = np.zeros(kept.n_slots, bool)
    used[alias] = True
    renumber = np.cumsum(used, dtype=np.int32) - 1  # kept slots → 0 .. n_used − 1
    new_alias = renumber[alias]
    identity = new_alias.size == int(used.sum()) and bool(np.all(new_alias == np.arange(new_alias.size)))
    parts = int(mesh.shape[axis])
    sharding = NamedSharding(mesh, PartitionSpec(axis))
    arrays = [jax.device_put(a, sharding) for a in (kept.data, kept.rows, kept.cols)]  # a no-op when in place
    old = arrays[0].shape[0] // parts
    blocks = {}
    for shard_d, shard_r, shard_c in zip(*(a.addressable_shards for a in arrays)):
        position = (shard_d.index[0].start or 0) // old
        if position in blocks:
            continue  # a replica over another mesh axis
        d, r, c = (np.asarray(s.data) for s in (shard_d, shard_r, shard_c))
        keep = (d != 0) & used[c]
        blocks[position] = (d[keep], r[keep], renumber[c[keep]], int(r[-1]))
    width = max(1, max(b[0].size for b in blocks.values()))
    if jax.process_count() > 1 and len({dev.process_index for dev in mesh.devices.flat}) > 1:
        from jax.experimental import multihost_utils

        width = int(np.asarray(multihost_utils.process_allgather(np.asarray([width], np.int64))).max())
    padded = {}
    for position, (d, r, c, last) in blocks.items():
        pd, pr, pc = np.zeros(width, kept.dtype), np.full(width, last, np.int32), np.zeros(width, np.int32)
        pd[: d.size], pr[: d.size], pc[: d.size] = d, r, c
        padded[position] = (pd, pr, pc)

    def place(k):
        return jax.make_array_from_callback((width * parts,), sharding, lambda i: padded[(i[0].start or 0) // width][k])

    replicated = NamedSharding(mesh, PartitionSpec())
    return kept._replace(
        data=place(0), rows=place(1), cols=place(2), n_slots=int(used.sum()),
        alias=None if identity else jax.device_put(new_alias.astype(np.int32), replicated),
    )


def as_raw_design(X: SparseDesign, *, dtype=None, min_rows: int = 1) -> SparseDesign:
    """A :class:`~jaxselect.design.SparseDesign` given as X, unstandardised (the front door then
    computes its summary, over every device and process): the matrix it stores stands for X.

    Raises:
      TypeError: a non-float design or a dtype X cannot take.
      ValueError: too few rows, NaN or Inf among the entries.
    """
    n, d = X.shape
    if n < min_rows:
        raise ValueError(f"X needs at least {min_rows} rows; got {n}")
    if d < 1:
        raise ValueError("X needs at least 1 columns; got 0")
    if dtype is not None and np.dtype(dtype) != X.dtype:
        X = X._replace(data=X.data.astype(dtype))
    elif not jnp.issubdtype(X.dtype, jnp.floating):
        raise TypeError(f"X (a SparseDesign) must hold float values; got {X.dtype}")
    if not is_traced(X.data) and not bool(_all_finite(X.data)):
        raise ValueError("X (a SparseDesign) contains NaN or Inf among its entries; remove or impute them first")
    zeros = jnp.zeros_like(X.mean, dtype=X.dtype)
    return X._replace(mean=zeros, factor=jnp.ones_like(zeros))


@jit
def _all_finite(data):
    return jnp.all(jnp.isfinite(data))


def _is_sparse_rows(a) -> bool:
    return is_sparse(a) or (isinstance(a, SparseDesign) and not isinstance(a, ShardedSparseDesign))


def shard_sparse_rows(X, *arrays, mesh=None, axis: str = "data", weights: bool | None = None):
    """:func:`~jaxselect.shard_rows` for a sparse X (the handler ``shard_rows`` calls).

    ``Xs, ys, w = js.shard_rows(X_csr, y, mesh=mesh)``: X (``scipy.sparse``, BCOO/BCSR, validated
    by :func:`~jaxselect.design.as_sparse_csr`, or an unsharded
    :class:`~jaxselect.design.SparseDesign`) becomes a row-sharded :class:`ShardedSparseDesign`
    (raw: the solvers' front door standardises it with the weights they are given); the other
    arrays are padded and placed as by ``shard_rows`` (the last row repeated), on the same rows.
    With several processes every process passes its own rows.

    Returns:
      ``(Xs, *arrays, w)`` with ``weights`` (default: more than one array given), else ``Xs``
      alone (then the rows must split evenly over the devices).
    """
    weights = len(arrays) > 0 if weights is None else bool(weights)
    mesh = data_mesh(axis=axis) if mesh is None else mesh
    if isinstance(X, SparseDesign):
        if not _fully_addressable(X.data) or is_traced(X.data):
            raise ValueError("shard_rows: X is a SparseDesign spread over processes or traced; pass the local rows")
        n, d = X.shape
        data, rows, cols = (np.asarray(a) for a in (X.data, X.rows, X.cols))
        mean, factor, alias, dtype, n_slots = X.mean, X.factor, X.alias, X.dtype, X.n_slots
    else:
        csr = as_sparse_csr(X, "X")
        n, d = csr.shape
        data, cols, dtype = csr.data, csr.indices, csr.dtype
        rows = np.repeat(np.arange(n, dtype=np.int32), np.diff(csr.indptr))
        mean, factor, alias, n_slots = np.zeros(d, dtype), np.ones(d, dtype), None, None
    layout = _Layout(n, d, mesh, axis)
    if layout.multi and n < 1:
        raise ValueError("shard_rows: this process holds no rows of X; give every process at least one row")
    if not weights and layout.n_rows != layout.n_real:
        raise ValueError(
            f"cannot split {layout.n_real} rows evenly over {layout.parts} devices; pass more arrays "
            f"(shard_rows(X, y) returns row weights last) or weights=True to pad to {layout.n_rows} rows with "
            "weight-0 rows, and give the weights to the solver as sample_weight"
        )
    design, w = _build(layout, data, rows, cols, mean, factor, alias, dtype, n_slots)
    out = [design] + [layout.rows_of(a) for a in arrays]
    if weights:
        out.append(w)
    return out[0] if len(out) == 1 else tuple(out)


register_row_handler(_is_sparse_rows, shard_sparse_rows)
