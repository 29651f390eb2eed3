"""A streamed design operator: X read from a re-readable source by passes (FSA's streamed phase).

Barbu et al. (FSA paper, §3.1.3): "in FSA one can re-load only the working variables, the number
of which quickly drops". A solver that streams asks :class:`StreamedDesign` — built over a
:class:`~jaxselect.design.stream.StreamSource` (a memmap, a batch callable, a column source) and
the per-row loss — for one pass at a time: per row block the scores ``X_b v + offset``, the loss's
per-row derivative ``u`` and the gradient ``u X_b``, accumulated (:meth:`StreamedDesign.loss_pass`);
with ``devices`` each row block is split into one part per local device. The storage dispatch (host
BLAS over a numpy array or memmap, a source's fused kernels, padded row blocks) lives here; the
solver only standardises the sums (``∇ = f ⊙ (u X − (Σu) μ)``) and steps.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect.design.operators import TransposedDesign
from jaxselect.programs import jit

__all__ = ["StreamedDesign", "active_positions", "aligned_empty", "column_bucket", "gather_columns", "scatter_columns"]

#: rows per call of a fused source's ``matvec_block``/``rmatvec_block``
_FUSED_ROWS = 1 << 16
#: bytes of X per host BLAS call of a pass over a numpy X (cache-sized: the fastest on a busy CPU)
_CACHE_BYTES = 1 << 20


def _u(s, y, rel, mask, inv_n, curv, row_loss, power: bool):
    """(value, u) of a block's scores: its rows' share ``Σ_i mask_i ℓ_i / N`` of the mean loss
    (``ℓ_i = row_loss(s_i, y_i, rel_i)``, the loss of row i alone, weighted by ``rel_i``) and its
    score gradient; or (0, the power iteration's ``H s``). ``mask`` is 0 on padding rows."""
    if power:
        u = curv * inv_n * s * mask
        return jnp.zeros((), s.dtype), u if rel is None else u * rel

    def share(s):
        rows = jax.vmap(row_loss, in_axes=(0, 0, None if rel is None else 0))(s, y, rel)
        return jnp.sum(rows * mask) * inv_n

    return jax.value_and_grad(share)(s)


class _RowWeights(NamedTuple):
    """The score gradient of :func:`_u` for one tile of rows, as the static function of a
    :class:`jax.tree_util.Partial` whose leaves are the pass's data: ``Partial(_RowWeights(row_loss,
    power), y, rel, offset, inv_n, curv)`` is the ``fn`` of a source's ``gradient_block``, so one
    compiled kernel serves every iteration and block (equal by value: a new pass, or a new ``fsa``
    call, hits the same compiled kernel).

    ``u_i = ∂(rel_i ℓ(s_i + b, y_i) / N)/∂s_i`` (or the power iteration's ``κ rel_i s_i / N``), with
    y and rel the (N,) targets and weights indexed by the global row (clamped: ``gradient_block``
    zeroes the weights of rows past N itself)."""

    row_loss: Any
    power: bool

    def __call__(self, y, rel, offset, inv_n, curv, s, rows):
        rows = jnp.clip(rows, 0, y.shape[0] - 1)
        r = None if rel is None else rel[rows]
        return _u(s + offset, y[rows], r, jnp.ones_like(s), inv_n, curv, self.row_loss, self.power)[1]


@partial(jit, static_argnames=("row_loss", "power"))
def _block_pass(X, y, rel, mask, v, offset, inv_n, curv, *, row_loss, power):
    """One row block: (value share, u X (W,), Σu) at scores ``X v + offset``."""
    X = X.astype(v.dtype)
    val, u = _u(X @ v + offset, y, rel, mask, inv_n, curv, row_loss, power)
    return val, u @ X, jnp.sum(u)


@partial(jit, static_argnames=("row_loss", "power"))
def _block_u(s, y, rel, mask, offset, inv_n, curv, *, row_loss, power):
    val, u = _u(s + offset, y, rel, mask, inv_n, curv, row_loss, power)
    return val, u, jnp.sum(u)


def _pad(a, rows: int):
    """``a`` (r, ...) padded with zero rows to ``rows`` (numpy; a jax array stays jax)."""
    extra = rows - a.shape[0]
    if extra <= 0:
        return a
    widths = [(0, extra)] + [(0, 0)] * (a.ndim - 1)
    return jnp.pad(a, widths) if isinstance(a, jax.Array) else np.pad(a, widths)


def column_bucket(count: int) -> int:
    """Columns a streamed pass computes for ``count`` active ones: ``count`` rounded up to 8 steps
    per octave (at most 1/8 more columns, and a stage compiles at most ~8 kernels per halving).

    >>> [column_bucket(c) for c in (1, 16, 17, 1000, 1024, 1025)]
    [1, 16, 18, 1024, 1024, 1152]
    """
    step = 1 << max(0, int(count).bit_length() - 4)
    return -(-int(count) // step) * step


def active_positions(active: np.ndarray):
    """Positions (B,) (sorted) of the stage's columns an iteration's streamed pass computes: the
    active ones, padded with inactive ones to :func:`column_bucket` B; None when B covers the stage.

    An inactive column has coefficient 0 (its scores' share is 0) and its gradient is masked by
    the solver's step, so the pass over these columns gives the iteration of
    the whole stage; as the schedule M_e drops inside a stage (a stage is a halving of the width)
    the streamed entries drop with it (at N = 10⁶, M = 10⁵, k = 500: 5.2·10¹¹ against 6.7·10¹¹).
    """
    width = active.shape[0]
    count = int(np.count_nonzero(active))
    size = column_bucket(max(count, 1))
    if size >= width:
        return None
    pos = np.concatenate([np.flatnonzero(active), np.flatnonzero(~active)[: size - count]])
    return np.sort(pos).astype(np.int32)


@partial(jit, static_argnums=2)
def scatter_columns(g_part, pos, width: int):
    """(width,) the sums ``g_part`` of a pass over the columns at positions ``pos``, zeros elsewhere."""
    return jnp.zeros(width, g_part.dtype).at[pos].set(g_part)


def _bucket(rows: int, nominal: int) -> int:
    """Padded rows of a block: the source's nominal block rows, or the power of two above."""
    return nominal if rows <= nominal else 1 << (rows - 1).bit_length()


class StreamedDesign:
    """The standardised design over a re-readable source, read by passes: a streaming solver's
    design operator (a Python object, not a pytree: its products are host-driven passes).

    :meth:`loss_pass` is one pass over the source for some columns: the value, ``u X`` and ``Σu``
    of a mean of per-row losses at the scores ``X v + offset`` (the dispatch on the storage lives
    here: host BLAS over a numpy array or memmap, a source's fused ``gradient_block`` or
    ``matvec_block``/``rmatvec_block``, or row blocks through one jitted kernel). Blocks are padded
    to the source's nominal block rows (masked), so each column count compiles one kernel.
    :meth:`gather` loads columns into a device :class:`~jaxselect.design.TransposedDesign`.

    Args:
      source: the :class:`~jaxselect.design.stream.StreamSource`.
      y: (N,) numpy targets; rel: None or (N,) relative row weights (mean 1).
      row_loss: ``row_loss(s_i, y_i, rel_i) -> ℓ_i`` the loss of one row (hashable, equal by value:
        a static argument of the kernels); curvature: κ of the power iteration's ``H s`` (None: 1).
      dtype: the compute dtype; devices: None, or the local devices each row block is split over.

    With ``devices`` (a mesh's local devices), every row block is cut into ``len(devices)``
    contiguous parts of equal (padded) size, part d computed on device d (its inputs committed
    there, the calls dispatched asynchronously, so the devices work at once); each device keeps a
    running sum of its parts' value, gradient and Σu, and the devices' sums are added on the host
    at the end of the pass (float32 rounding differs from one device's sum)."""

    def __init__(self, source, y, rel, row_loss, curvature, dtype, devices=None):
        self.source, self.y, self.rel, self.row_loss = source, y, rel, row_loss
        self.dtype = dtype
        n = source.shape[0]
        self.inv_n = jnp.asarray(1.0 / n, dtype)
        self.curv = jnp.asarray(curvature if curvature is not None else 1.0, dtype)
        self.nominal = getattr(source, "rows", None) or 0
        self.n_passes = 0
        self.devices = None if devices is None else tuple(devices)
        self.gradient = source.gradient
        if self.gradient:  # the fused kernel's per-row data: on each device once, indexed by row
            data = (jnp.asarray(y), None if rel is None else jnp.asarray(rel))
            self.row_data = [data] if self.devices is None else [jax.device_put(data, d) for d in self.devices]

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.source.shape)

    def gather(self, cols_np, mean, factor):
        """The columns ``cols_np`` in memory, in one pass: a device
        :class:`~jaxselect.design.TransposedDesign` standardised by ``mean``/``factor`` ((W,))."""
        return TransposedDesign(jax.device_put(gather_columns(self.source, cols_np, self.dtype)), mean, factor)

    def __call__(self, cols_np, v, offset, power: bool):
        return self.loss_pass(cols_np, v, offset, power)

    def loss_pass(self, cols_np, v, offset, power: bool):
        """``(mean-loss value, u X (W,), Σu)`` summed over the blocks of one pass."""
        self.n_passes += 1
        src = self.source
        if self.devices is None and src.host_array(self.dtype):
            return self._host(cols_np, v, offset, power)
        fused = src.fused or self.gradient
        devices = (None,) if self.devices is None else self.devices
        parts = len(devices)
        nominal = _fused_rows(src, parts) if fused else self.nominal
        blocks = _fused_blocks(src, nominal) if fused else src.passes(cols_np)
        # the pass's vectors on each device (one weights Partial per device for the fused kernel)
        placed = [(v, offset) if d is None else jax.device_put((v, offset), d) for d in devices]
        weights = [None] * parts
        if self.gradient:
            rule = _RowWeights(self.row_loss, power)
            weights = [jax.tree_util.Partial(rule, *self.row_data[i], placed[i][1], self.inv_n, self.curv)
                       for i in range(parts)]
        sums = [None] * parts  # each device's running (value, gradient, Σu): no sync until the end
        for start, X, _ in blocks:
            rows = int(X) if fused else X.shape[0]
            if not fused and self.nominal == 0:  # a batch source: the first batch sets the size
                self.nominal = nominal = rows
            size = -(-_bucket(rows, nominal) // parts)  # rows of each part (padded, masked)
            for i in range(parts):
                a = i * size
                live = min(size, rows - a)
                if live <= 0:
                    break
                X_part = None if fused else X[a : a + live]
                out = self._part(start + a, live, size, X_part, cols_np, *placed[i], weights[i], devices[i], power)
                sums[i] = out if sums[i] is None else tuple(map(jnp.add, sums[i], out))
        if self.devices is None:
            return sums[0]
        sums = [part for part in sums if part is not None]
        val, g, total = (np.sum([np.asarray(x) for x in terms], axis=0, dtype=self.dtype) for terms in zip(*sums))
        return jnp.asarray(val), jnp.asarray(g), jnp.asarray(total)

    def _part(self, row0, live, size, X, cols_np, v, offset, weights, device, power: bool):
        """(value share, u X (W,), Σu) of rows ``row0 … row0 + live − 1`` padded to ``size`` rows,
        on ``device`` (None: the default device)."""
        src, row_loss = self.source, self.row_loss
        y = _pad(self.y[row0 : row0 + live], size)
        rel = None if self.rel is None else _pad(self.rel[row0 : row0 + live], size)
        mask = _pad(np.ones(live, self.dtype), size)
        if self.gradient:  # scores, weights and gradient in one kernel: each entry read once
            s, bg = src.src.gradient_block(row0, size, cols_np, v, weights)
            bv, _, bs = _block_u(s, y, rel, mask, offset, self.inv_n, self.curv, row_loss=row_loss, power=power)
            return bv, bg.astype(self.dtype), bs
        if src.fused:
            s = src.src.matvec_block(row0, size, cols_np, v)
            bv, u, bs = _block_u(s, y, rel, mask, offset, self.inv_n, self.curv, row_loss=row_loss, power=power)
            return bv, src.src.rmatvec_block(row0, size, cols_np, u).astype(self.dtype), bs
        X = _pad(X, size)
        if device is not None:
            X = jax.device_put(X, device)
        return _block_pass(X, y, rel, mask, v, offset, self.inv_n, self.curv, row_loss=row_loss, power=power)

    def _host(self, cols_np, v, offset, power: bool):
        """The pass over a numpy (or memmap) X in its compute dtype with host BLAS on full row
        blocks (rows are contiguous: reading a row block costs the same whatever the columns), the
        coefficients scattered into an M-vector: no block is copied or gathered."""
        X, row_loss = self.source.X, self.row_loss
        n, m = X.shape
        full = cols_np.shape[0] == m
        v_np = np.asarray(v)
        if not full:
            v_full = np.zeros(m, self.dtype)
            v_full[cols_np] = v_np
            v_np = v_full
        g = np.zeros(m, self.dtype)
        val = jnp.zeros((), self.dtype)
        total = jnp.zeros((), self.dtype)
        rows_nominal = self.source.rows
        sub = max(8, _CACHE_BYTES // (m * X.dtype.itemsize))  # cache-sized, single-threaded BLAS calls
        s = np.zeros(rows_nominal, self.dtype)
        for start in range(0, n, rows_nominal):
            block = X[start : start + rows_nominal]
            rows = block.shape[0]
            y = _pad(self.y[start : start + rows], rows_nominal)
            rel = None if self.rel is None else _pad(self.rel[start : start + rows], rows_nominal)
            mask = _pad(np.ones(rows, self.dtype), rows_nominal)
            s[rows:] = 0
            for a in range(0, rows, sub):
                np.matmul(block[a : a + sub], v_np, out=s[a : min(a + sub, rows)])
            bv, u, bs = _block_u(s, y, rel, mask, offset, self.inv_n, self.curv, row_loss=row_loss, power=power)
            u = np.asarray(u)
            for a in range(0, rows, sub):
                g += u[a : min(a + sub, rows)] @ block[a : a + sub]
            val, total = val + bv, total + bs
        return val, jnp.asarray(g if full else g[cols_np]), total


def _fused_rows(src, parts: int = 1) -> int:
    """Rows per block of a fused source's products (nothing of the block is stored: large calls),
    a multiple of ``parts`` (the devices a block is split over)."""
    rows = int(src.rows) if src.rows else min(src.shape[0], _FUSED_ROWS)
    return parts * -(-rows // parts)


def _fused_blocks(src, rows: int):
    n = src.shape[0]
    for start in range(0, n, rows):
        yield start, min(rows, n - start), None


def aligned_empty(shape, dtype, align: int = 64) -> np.ndarray:
    """An uninitialised C-contiguous array whose data start at a multiple of ``align`` bytes: on the
    CPU ``jax.device_put`` then uses its buffer instead of copying it."""
    dtype = np.dtype(dtype)
    size = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(size + align, np.uint8)
    offset = (-raw.ctypes.data) % align
    return raw[offset : offset + size].view(dtype).reshape(shape)


def gather_columns(source, cols_np, dtype):
    """(W, N) host array of the columns ``cols_np`` of every row, in one pass (64-byte aligned:
    its ``device_put`` on the CPU is not a second copy)."""
    n = source.shape[0]
    out = aligned_empty((cols_np.shape[0], n), dtype)
    for start, X, _ in source.passes(cols_np):
        out[:, start : start + X.shape[0]] = np.asarray(X, dtype).T
    return out
