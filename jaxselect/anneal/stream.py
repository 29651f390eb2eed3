"""FSA on X that does not sit in memory: the streamed stages, then the in-memory compiled ones.

Barbu et al. (FSA paper, §3.1.3): "in FSA one can re-load only the working variables, the number
of which quickly drops". :func:`stream_fsa` runs Algorithm 1 on a
:class:`~jaxselect.design.stream.StreamSource` (a memmap, a batch callable, a column source):

1. (done by the caller) one pass for the column summary, the targets and the weights;
2. while stage i's working set (N × W_i, :func:`memory_stage`) does not fit the memory budget, the
   host drives the iterations: each iteration is **one pass** over the rows of the stage's W_i
   columns — per block the scores ``X̃_b β = X_b (f⊙β) − μ·(f⊙β) + b`` (standardised implicitly),
   ``u = ∂loss/∂score`` per row and the gradient ``u X_b`` accumulated, in one jitted kernel (or
   the source's own fused ``gradient_block``, each entry read or generated once, its per-row
   weights a :class:`jax.tree_util.Partial` of the iteration's data so one compiled kernel serves
   every iteration; else its ``matvec_block``/``rmatvec_block``) — then the update and the
   keep-the-M_e-largest of :func:`~jaxselect.anneal.step.advance` itself (same tie rule); between
   stages the same compaction as the compiled run (:func:`~jaxselect.anneal.run.keep_columns`);
   with ``mesh=`` each row block is split into one part per local device, computed at once and
   summed (:class:`_Pass`);
3. at the first stage that fits, the kept columns are gathered in one more pass into a device
   :class:`~jaxselect.design.TransposedDesign`, and :func:`~jaxselect.anneal.run.run` continues from
   that state (:class:`~jaxselect.anneal.run.RunStart`), so the rest is the ordinary compiled program.

Step size: the rule of the compiled run, stage by stage (:func:`~jaxselect.anneal.run._stage_step`):
stage 0 uses ``min(12, length // 2)`` (at least 6) power iterations over the data — extra passes —
or, when that is fewer than 6 and N > 2048, 12 iterations on every ``⌈N/1024⌉``-th row, a subsample
kept in memory from the summary pass; later stages ``min(6, length // 2)`` warm-started iterations
(none below 2), each an extra pass. So a streamed stage of length L costs L passes plus at most 6.

Losses: the pointwise ones (squared, logistic, huber_hinge, lorenz), with sample weights. Ranking
(pairs couple rows of different blocks) and callable losses (not known to be a mean of per-row
terms), piecewise-linear learners and optax optimizers are refused with a clear message.

Checkpoints (``checkpoint=path``, :mod:`.checkpoint`): the streamed phase writes its state at every
stage boundary; a call with an existing checkpoint of the same problem resumes from it and gives the
uninterrupted result. The in-memory stages are one compiled program and are not checkpointed.
"""

from __future__ import annotations

import os
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..design import TransposedDesign
from ..design.operators import DenseDesign
from .checkpoint import load_checkpoint, save_checkpoint
from .run import RunPlan, RunStart, gather_rows, keep_columns, run, stage_bounds
from .step import FSAProblem, FSAState, Params, advance, default_step, start_vector
from .stepsize import WeightedTarget

__all__ = [
    "STREAM_LOSSES", "StreamOutcome", "check_max_memory", "check_mesh", "check_streamable", "memory_stage",
    "stream_fsa",
]

#: Losses the streamed phase runs (means of per-row terms).
STREAM_LOSSES = ("squared", "logistic", "huber_hinge", "lorenz")
#: Bytes an in-memory stage of width W needs per ``N·W·itemsize``: the gathered (W, N) columns, the
#: next compaction's copy (≤ W/2) and the polish's dense support.
MEMORY_FACTOR = 2.0
#: ``max_memory="auto"``: this fraction of the available RAM (``MemAvailable`` of /proc/meminfo).
AUTO_FRACTION = 0.25
#: rows per call of a fused source's ``matvec_block``/``rmatvec_block``
_FUSED_ROWS = 1 << 16
#: bytes of X per host BLAS call of a pass over a numpy X (cache-sized: the fastest on a busy CPU)
_CACHE_BYTES = 1 << 20
# the compiled run's step rule (see .run)
_POWER_COLD, _POWER_WARM, _SUBSAMPLE_ROWS = 12, 6, 1024


def available_memory() -> int:
    """Bytes of memory available now for FSA's working set: the host's ``MemAvailable`` (the free
    physical pages where that is missing) and, on an accelerator, the free memory of the default
    device too (the in-memory stages hold their columns there), whichever is smaller."""
    host = _host_available()
    device = _device_available()
    return host if device is None else min(host, device)


def _host_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - exotic platforms
        return 1 << 33


def _device_available() -> int | None:
    """Free bytes of the default device when it is an accelerator with memory statistics (None on
    the CPU, whose memory is the host's)."""
    device = jax.devices()[0]
    if device.platform == "cpu":
        return None
    try:
        stats = device.memory_stats() or {}
    except Exception:  # pragma: no cover - backends without statistics
        return None
    limit = stats.get("bytes_limit")
    return None if limit is None else int(limit - stats.get("bytes_in_use", 0))


def check_max_memory(max_memory):
    """``max_memory`` as bytes: ``"auto"`` → a quarter of the available memory (host RAM, and the
    default device's free memory on an accelerator: :func:`available_memory`); None stays None (no
    budget: an in-memory array is never streamed, a stream source is loaded at once); else > 0."""
    if max_memory is None:
        return None
    if isinstance(max_memory, str):
        if max_memory != "auto":
            raise ValueError(f"max_memory must be 'auto', None or a number of bytes > 0; got {max_memory!r}")
        return int(available_memory() * AUTO_FRACTION)
    if isinstance(max_memory, (bool, np.bool_)) or not isinstance(max_memory, (int, float, np.integer, np.floating)):
        raise TypeError(f"max_memory must be 'auto', None or a number of bytes > 0; got {max_memory!r}")
    if not np.isfinite(max_memory) or max_memory <= 0:
        raise ValueError(f"max_memory must be a number of bytes > 0; got {max_memory!r}")
    return int(max_memory)


def check_mesh(mesh):
    """The devices of ``mesh`` that split a streamed X's row blocks: None (one device) or the tuple
    of the mesh's devices in mesh order, all local to this process."""
    if mesh is None:
        return None
    if not isinstance(mesh, jax.sharding.Mesh):
        raise TypeError(f"mesh must be a jax.sharding.Mesh (e.g. js.data_mesh()) or None; got {type(mesh).__name__}")
    devices = tuple(mesh.devices.flat)
    remote = [d for d in devices if d.process_index != jax.process_index()]
    if remote:
        raise ValueError(
            f"mesh has {len(remote)} devices of other processes; a streamed X splits its row blocks over this "
            "process's devices only (use a mesh of jax.local_devices())"
        )
    return devices


def check_streamable(loss, bins, optimizer, what: str, scale: str = "std") -> None:
    """ValueError unless the options are ones the streamed phase runs (see the module docstring)."""
    if scale != "std":
        raise ValueError(f"FSA on {what} scales columns by their standard deviation only (scale='std'); got scale={scale!r}")
    if callable(loss) or loss not in STREAM_LOSSES:
        raise ValueError(
            f"FSA on {what} streams row blocks, which needs a loss that is a mean of per-row terms: "
            f"one of {STREAM_LOSSES}; got loss={loss!r}. For the ranking loss or a callable loss load X "
            "into memory (a numpy array) and pass max_memory=None"
        )
    if bins is not None:
        raise ValueError(f"FSA on {what} runs linear learners only (bins=None); load X into memory for bins=...")
    if optimizer is not None:
        raise ValueError(f"FSA on {what} uses plain gradient descent (lr or the default step); an optax optimizer needs X in memory")


def memory_stage(widths, n: int, itemsize: int, budget, first: int = 0) -> int:
    """The first stage ≥ ``first`` whose working set ``MEMORY_FACTOR·N·W·itemsize`` fits ``budget``
    (``len(widths)``: none; ``budget`` None: ``first``)."""
    if budget is None:
        return first
    for i in range(first, len(widths)):
        if MEMORY_FACTOR * n * widths[i] * itemsize <= budget:
            return i
    return len(widths)


class StreamOutcome(NamedTuple):
    """What :func:`stream_fsa` hands back to :func:`~jaxselect.fsa`.

    Attributes:
      state: :class:`~jaxselect.anneal.FSAState` at the last width W.
      cols: (W,) int32 original column of each coefficient.
      objective: (cap,) F per iteration.
      steps: (n_stages,) step of each stage.
      mean, inv_scale: (W,) the kept columns' standardisation.
      problem: the in-memory :class:`~jaxselect.anneal.FSAProblem` over the gathered columns (for
        the polish), or None when nothing was gathered.
      local: (W,) position of each of ``cols`` in ``problem``'s design.
      streamed: the number of stages run by streaming.
    """

    state: FSAState
    cols: Any
    objective: Any
    steps: Any
    mean: Any
    inv_scale: Any
    problem: Any
    local: Any
    streamed: int


# --------------------------------------------------------------------------- kernels
def _u(s, y, rel, mask, inv_n, curv, loss_fn, power: bool):
    """(value, u) of a block's scores: its rows' share ``Σ_i mask_i ℓ_i / N`` of the mean loss
    (ℓ_i the loss of row i alone: ``loss_fn`` on one row, weighted by ``rel_i``) and its score
    gradient; or (0, the power iteration's ``H s``). ``mask`` is 0 on padding rows."""
    if power:
        u = curv * inv_n * s * mask
        return jnp.zeros((), s.dtype), u if rel is None else u * rel

    def row_loss(si, yi, ri):
        target = yi[None] if ri is None else WeightedTarget(yi[None], ri[None])
        return jnp.asarray(loss_fn(si[None], target), s.dtype)

    def share(s):
        rows = jax.vmap(row_loss, in_axes=(0, 0, None if rel is None else 0))(s, y, rel)
        return jnp.sum(rows * mask) * inv_n

    return jax.value_and_grad(share)(s)


class _RowWeights(NamedTuple):
    """The score gradient of :func:`_u` for one tile of rows, as the static function of a
    :class:`jax.tree_util.Partial` whose leaves are the pass's data: ``Partial(_RowWeights(loss_fn,
    power), y, rel, offset, inv_n, curv)`` is the ``fn`` of a source's ``gradient_block``, so one
    compiled kernel serves every iteration and block (equal by value: a new pass, or a new ``fsa``
    call, hits the same compiled kernel).

    ``u_i = ∂(rel_i ℓ(s_i + b, y_i) / N)/∂s_i`` (or the power iteration's ``κ rel_i s_i / N``), with
    y and rel the (N,) targets and weights indexed by the global row (clamped: ``gradient_block``
    zeroes the weights of rows past N itself)."""

    loss_fn: Any
    power: bool

    def __call__(self, y, rel, offset, inv_n, curv, s, rows):
        rows = jnp.clip(rows, 0, y.shape[0] - 1)
        r = None if rel is None else rel[rows]
        return _u(s + offset, y[rows], r, jnp.ones_like(s), inv_n, curv, self.loss_fn, self.power)[1]


@partial(jax.jit, static_argnames=("loss_fn", "power"))
def _block_pass(X, y, rel, mask, v, offset, inv_n, curv, *, loss_fn, power):
    """One row block: (value share, u X (W,), Σu) at scores ``X v + offset``."""
    X = X.astype(v.dtype)
    val, u = _u(X @ v + offset, y, rel, mask, inv_n, curv, loss_fn, power)
    return val, u @ X, jnp.sum(u)


@partial(jax.jit, static_argnames=("loss_fn", "power"))
def _block_u(s, y, rel, mask, offset, inv_n, curv, *, loss_fn, power):
    val, u = _u(s + offset, y, rel, mask, inv_n, curv, loss_fn, power)
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
    :func:`~jaxselect.anneal.step.advance`, so the pass over these columns gives the iteration of
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


@partial(jax.jit, static_argnums=2)
def _scatter(g_part, pos, width: int):
    return jnp.zeros(width, g_part.dtype).at[pos].set(g_part)


def _bucket(rows: int, nominal: int) -> int:
    """Padded rows of a block: the source's nominal block rows, or the power of two above."""
    return nominal if rows <= nominal else 1 << (rows - 1).bit_length()


def _direction(coef, intercept, mean, factor):
    """``(f⊙c, b − μ·(f⊙c))``: the raw-space vector and offset of standardised scores."""
    v = coef[:, 0] * factor
    return v, intercept - jnp.dot(mean, v)


def _standardised_gradient(g_raw, total, mean, factor):
    """``u X̃ = f ⊙ (u X − (Σu) μ)`` as a (W, 1) coefficient gradient."""
    return ((g_raw - total * mean) * factor)[:, None]


direction = jax.jit(_direction)


@jax.jit
def _apply(problem: FSAProblem, state: FSAState, val, g_raw, total, mean, factor):
    """:func:`~jaxselect.anneal.step.advance` with the streamed value and gradient; also the next
    iteration's direction."""
    g_coef = _standardised_gradient(g_raw, total, mean, factor)
    state = advance(lambda c, b: (val, g_coef, total), problem, state)
    return state, _direction(state.coef, state.intercept, mean, factor)


def _normalize(vc, vb):
    nrm = jnp.maximum(jnp.sqrt(jnp.sum(vc * vc) + vb * vb), jnp.asarray(jnp.finfo(vc.dtype).tiny, vc.dtype))
    return vc / nrm, vb / nrm


@jax.jit
def _power_start(vc, vb, mean, factor):
    vc, vb = _normalize(vc, vb)
    return vc, vb, _direction(vc, vb, mean, factor)


@jax.jit
def _power_update(g_raw, total, vc, vb, mean, factor):
    """One power iteration's end: the Rayleigh quotient, the normalised product and its direction."""
    gc = _standardised_gradient(g_raw, total, mean, factor)
    lam = jnp.abs(jnp.sum(gc * vc) + total * vb)
    vc, vb = _normalize(gc, total)
    return lam, vc, vb, _direction(vc, vb, mean, factor)


@jax.jit
def _compact(state: FSAState, cols, v_coef, keep):
    width = state.active.shape[0]
    state = state._replace(
        coef=jnp.take(state.coef, keep, axis=0),
        active=jnp.take(state.active, keep),
        opt_state=gather_rows(state.opt_state, keep, width),
    )
    return state, jnp.take(cols, keep), jnp.take(v_coef, keep, axis=0)


@partial(jax.jit, static_argnames=("n_power",))
def _subsample_step(problem, v_coef, v_icpt, lam, *, n_power):
    return default_step(problem, v_coef, v_icpt, n_power, lam)


class _Pass:
    """One pass over the source for the current columns: the streamed oracle. Blocks are padded to
    the source's nominal block rows (masked), so each stage width compiles one kernel.

    With ``devices`` (a mesh's local devices), every row block is cut into ``len(devices)``
    contiguous parts of equal (padded) size, part d computed on device d (its inputs committed
    there, the calls dispatched asynchronously, so the devices work at once); each device keeps a
    running sum of its parts' value, gradient and Σu, and the devices' sums are added on the host
    at the end of the pass (float32 rounding differs from one device's sum)."""

    def __init__(self, source, y, rel, config, dtype, devices=None):
        self.source, self.y, self.rel, self.config = source, y, rel, config
        self.dtype = dtype
        n = source.shape[0]
        self.inv_n = jnp.asarray(1.0 / n, dtype)
        self.curv = jnp.asarray(config.curvature if config.curvature is not None else 1.0, dtype)
        self.nominal = getattr(source, "rows", None) or 0
        self.n_passes = 0
        self.devices = None if devices is None else tuple(devices)
        self.gradient = getattr(source, "gradient", False)
        if self.gradient:  # the fused kernel's per-row data: on each device once, indexed by row
            data = (jnp.asarray(y), None if rel is None else jnp.asarray(rel))
            self.row_data = [data] if self.devices is None else [jax.device_put(data, d) for d in self.devices]

    def __call__(self, cols_np, v, offset, power: bool):
        """``(mean-loss value, u X (W,), Σu)`` summed over the blocks of one pass."""
        self.n_passes += 1
        src = self.source
        if self.devices is None and _host_blas(src, self.dtype):
            return self._host(cols_np, v, offset, power)
        fused = getattr(src, "fused", False) or self.gradient
        devices = (None,) if self.devices is None else self.devices
        parts = len(devices)
        nominal = _fused_rows(src, parts) if fused else self.nominal
        blocks = _fused_blocks(src, nominal) if fused else src.passes(cols_np)
        # the pass's vectors on each device (one weights Partial per device for the fused kernel)
        placed = [(v, offset) if d is None else jax.device_put((v, offset), d) for d in devices]
        weights = [None] * parts
        if self.gradient:
            rule = _RowWeights(self.config.loss_fn, power)
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
        src, loss_fn = self.source, self.config.loss_fn
        y = _pad(self.y[row0 : row0 + live], size)
        rel = None if self.rel is None else _pad(self.rel[row0 : row0 + live], size)
        mask = _pad(np.ones(live, self.dtype), size)
        if self.gradient:  # scores, weights and gradient in one kernel: each entry read once
            s, bg = src.src.gradient_block(row0, size, cols_np, v, weights)
            bv, _, bs = _block_u(s, y, rel, mask, offset, self.inv_n, self.curv, loss_fn=loss_fn, power=power)
            return bv, bg.astype(self.dtype), bs
        if getattr(src, "fused", False):
            s = src.src.matvec_block(row0, size, cols_np, v)
            bv, u, bs = _block_u(s, y, rel, mask, offset, self.inv_n, self.curv, loss_fn=loss_fn, power=power)
            return bv, src.src.rmatvec_block(row0, size, cols_np, u).astype(self.dtype), bs
        X = _pad(X, size)
        if device is not None:
            X = jax.device_put(X, device)
        return _block_pass(X, y, rel, mask, v, offset, self.inv_n, self.curv, loss_fn=loss_fn, power=power)

    def _host(self, cols_np, v, offset, power: bool):
        """The pass over a numpy (or memmap) X in its compute dtype with host BLAS on full row
        blocks (rows are contiguous: reading a row block costs the same whatever the columns), the
        coefficients scattered into an M-vector: no block is copied or gathered."""
        X, loss_fn = self.source.X, self.config.loss_fn
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
            bv, u, bs = _block_u(s, y, rel, mask, offset, self.inv_n, self.curv, loss_fn=loss_fn, power=power)
            u = np.asarray(u)
            for a in range(0, rows, sub):
                g += u[a : min(a + sub, rows)] @ block[a : a + sub]
            val, total = val + bv, total + bs
        return val, jnp.asarray(g if full else g[cols_np]), total


def _host_blas(src, dtype) -> bool:
    """A pass runs on host BLAS: a numpy array or memmap already in the compute dtype."""
    X = getattr(src, "X", None)
    return isinstance(X, np.ndarray) and X.dtype == dtype and X.ndim == 2


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


def _bar_postfix(bar, **kw):
    if hasattr(bar, "set_postfix"):
        bar.set_postfix(**kw, refresh=False)


def stream_fsa(
    source,
    target,
    summary,
    config,
    l2,
    smoothness,
    *,
    schedule,
    n_iter: int,
    widths,
    step_mode: str,
    lr,
    gram: bool,
    hand_over: int,
    sub=None,
    checkpoint=None,
    fp: str = "",
    polish: bool = False,
    bar=None,
    devices=None,
) -> StreamOutcome:
    """Run FSA on a stream source: streamed stages ``< hand_over``, then the compiled run.

    Args:
      source: the :class:`~jaxselect.design.stream.StreamSource` (its summary pass already done).
      target: (N,) targets/labels (jax), or a :class:`~jaxselect.anneal.stepsize.WeightedTarget`.
      summary: the host :class:`~jaxselect.design.ColumnSummary` of the source.
      config: the problem's static :class:`~jaxselect.anneal.FSAConfig`; l2, smoothness: () priors.
      schedule: (cap,) int32 numpy M_e, padded with k; n_iter: iterations.
      widths: stage widths (:func:`~jaxselect.anneal.stage_widths`).
      step_mode: ``"power"`` or ``"fixed"``; lr: the fixed step (or 0).
      gram: the compiled run may use moment space for the squared loss.
      hand_over: the first stage run in memory (:func:`memory_stage`; ``len(widths)``: none).
      sub: the (⌈N/stride⌉, M) subsample of the stage-0 step (when the rule uses it) or None.
      checkpoint: path of the checkpoint (None: none); fp: the problem's fingerprint.
      polish: gather the final support for the polish when every stage streams.
      bar: a progress bar (:func:`jaxselect._progress.progress_bar`).
      devices: None, or the local devices each row block of a streamed pass is split over
        (:func:`check_mesh`).

    Returns:
      :class:`StreamOutcome`.
    """
    n, m = source.shape
    dtype = np.dtype(summary.mean.dtype)
    mean_np, factor_np = np.asarray(summary.mean), np.asarray(summary.factor)
    live = np.asarray(summary.live)
    if isinstance(target, WeightedTarget):
        y_np, rel_np = np.asarray(target.value), np.asarray(target.rel, dtype)
    else:
        y_np, rel_np = np.asarray(target), None
    light = FSAProblem(None, None, None, None, config, l2, smoothness)
    oracle = _Pass(source, y_np, rel_np, config, dtype, devices)
    bounds = stage_bounds(schedule, n_iter, widths)
    cap = schedule.shape[0]
    extra = float(l2) + 32.0 * float(smoothness)

    # the state of run() at β = 0
    coef = jnp.zeros((m, 1), dtype)
    intercept = jnp.zeros((), dtype)
    opt_state = config.optimizer.init(Params(coef, intercept))
    if step_mode == "fixed":
        opt_state = opt_state._replace(step=jnp.asarray(lr, dtype))
    state = FSAState(coef, intercept, jnp.asarray(live), opt_state, jnp.zeros((), jnp.int32),
                     jnp.asarray(schedule), jnp.full((), jnp.nan, dtype))
    cols = jnp.arange(m, dtype=jnp.int32)
    v_coef, v_icpt, lam = start_vector(m, 1, dtype), jnp.ones((), dtype), jnp.ones((), dtype)
    objective = np.full((cap,), np.nan, dtype)
    steps: list = []
    first = 0
    saved = load_checkpoint(checkpoint, fp) if checkpoint is not None else None
    if saved is not None:
        first = int(saved["stage"])
        state = state._replace(
            coef=jnp.asarray(saved["coef"]), intercept=jnp.asarray(saved["intercept"]),
            active=jnp.asarray(saved["active"]), iteration=jnp.asarray(saved["iteration"]),
            opt_state=opt_state._replace(step=jnp.asarray(saved["opt_step"])),
        )
        cols = jnp.asarray(saved["cols"])
        v_coef, v_icpt, lam = jnp.asarray(saved["v_coef"]), jnp.asarray(saved["v_icpt"]), jnp.asarray(saved["lam"])
        objective = np.asarray(saved["objective"], dtype).copy()
        steps = [jnp.asarray(s) for s in saved["steps"]]
        hand_over = max(hand_over, first)
        if bar is not None:
            bar.update(int(saved["iteration"]))

    for i in range(first, min(hand_over, len(widths))):
        width = widths[i]
        if i > 0:
            state, cols, v_coef = _compact(state, cols, v_coef, keep_columns(state.active, width))
        cols_np = np.asarray(cols)
        mean_s, factor_s = jnp.asarray(mean_np[cols_np]), jnp.asarray(factor_np[cols_np])
        start, end = bounds[i]
        length = end - start
        if step_mode == "power":
            step, lam, v_coef, v_icpt = _stream_step(
                oracle, cols_np, mean_s, factor_s, i, length, n, v_coef, v_icpt, lam, extra, sub, light, target,
                mean_np, factor_np, dtype,
            )
            state = state._replace(opt_state=state.opt_state._replace(step=step))
        else:
            step = jnp.asarray(lr, dtype)
        steps.append(step)
        _bar_postfix(bar, phase="stream", width=width)
        v, offset = direction(state.coef, state.intercept, mean_s, factor_s)
        for e in range(start, end):
            pos = active_positions(np.asarray(state.active))
            if pos is None:
                val, g_raw, total = oracle(cols_np, v, offset, power=False)
            else:  # the inactive columns' coefficients are 0 and their gradient masked: not computed
                val, g_raw, total = oracle(cols_np[pos], jnp.take(v, pos), offset, power=False)
                g_raw = _scatter(g_raw, jnp.asarray(pos), width)
            state, (v, offset) = _apply(light, state, val, g_raw, total, mean_s, factor_s)
            objective[e] = float(state.objective)
            if bar is not None:
                bar.update(1)
        if checkpoint is not None:
            save_checkpoint(
                checkpoint, fp, stage=np.asarray(i + 1), coef=np.asarray(state.coef),
                intercept=np.asarray(state.intercept), active=np.asarray(state.active), cols=cols_np,
                iteration=np.asarray(state.iteration), opt_step=np.asarray(state.opt_state.step),
                v_coef=np.asarray(v_coef), v_icpt=np.asarray(v_icpt), lam=np.asarray(lam), objective=objective,
                steps=np.asarray([np.asarray(s) for s in steps], dtype).reshape(-1),
            )
    streamed = min(hand_over, len(widths))

    if hand_over >= len(widths):  # every stage streamed: the final support, gathered for the polish only
        cols_np = np.asarray(cols)
        mean_s, factor_s = jnp.asarray(mean_np[cols_np]), jnp.asarray(factor_np[cols_np])
        problem = None
        if polish:
            Xt = jax.device_put(gather_columns(source, cols_np, dtype))
            problem = FSAProblem(TransposedDesign(Xt, mean_s, factor_s), target, jnp.asarray(live[cols_np]), None,
                                 config, l2, smoothness)
        return StreamOutcome(state, cols, jnp.asarray(objective), jnp.stack(steps), mean_s, factor_s, problem,
                             jnp.arange(cols_np.shape[0], dtype=jnp.int32), streamed)

    # hand over: the kept columns of stage h, gathered once, then the compiled stages h, h+1, ...
    h = hand_over
    if h > 0:
        state, cols, v_coef = _compact(state, cols, v_coef, keep_columns(state.active, widths[h]))
    cols_np = np.asarray(cols)
    _bar_postfix(bar, phase="memory", width=widths[h])
    Xt = jax.device_put(gather_columns(source, cols_np, dtype))
    design = TransposedDesign(Xt, jnp.asarray(mean_np[cols_np]), jnp.asarray(factor_np[cols_np]))
    problem = FSAProblem(design, target, jnp.asarray(live[cols_np]), None, config, l2, smoothness)
    plan = RunPlan(tuple(widths), cap, step_mode, gram, None, 0, h)
    start = None
    if h > 0:
        start = RunStart(state, cols, v_coef, v_icpt, lam, jnp.asarray(objective), jnp.stack(steps))
    state, out_cols, obj, step_size, mean, inv_scale, _ = run(
        problem, jax.device_put(schedule), jax.device_put(np.int32(n_iter)),
        jax.device_put(np.asarray(lr, dtype)), start, plan=plan,
    )
    # h = 0: cols_np is 0..M-1, run() numbered the columns itself; else out_cols are original indices
    if bar is not None:
        bar.update(n_iter - bounds[h][0])
    local = out_cols if h == 0 else jnp.searchsorted(jnp.asarray(cols_np), out_cols).astype(jnp.int32)
    return StreamOutcome(state, out_cols, obj, step_size, mean, inv_scale, problem, local, streamed)


def _stream_step(oracle, cols_np, mean_s, factor_s, i, length, n, v_coef, v_icpt, lam, extra, sub, light, target,
                 mean_np, factor_np, dtype):
    """The stage's default step by the compiled run's rule, with streamed power iterations."""
    if i > 0:
        k = min(_POWER_WARM, length // 2)
        n_power = k if k >= 2 else 0
    else:
        k = min(_POWER_COLD, length // 2)
        if n > 2 * _SUBSAMPLE_ROWS and k < _POWER_WARM:  # 12 iterations on every stride-th row, in memory
            stride = -(-n // _SUBSAMPLE_ROWS)
            if isinstance(target, WeightedTarget):
                rel = target.rel[::stride]
                sub_target = WeightedTarget(None, rel * (rel.shape[0] / jnp.sum(rel)))
            else:
                sub_target = target
            design = DenseDesign(jnp.asarray(sub), jnp.asarray(mean_np), jnp.asarray(factor_np))
            problem = light._replace(design=design, target=sub_target)
            return _subsample_step(problem, v_coef, v_icpt, lam, n_power=_POWER_COLD)
        n_power = max(k, _POWER_WARM)
    vc, vb, (v, offset) = _power_start(v_coef, v_icpt, mean_s, factor_s)
    for _ in range(n_power):
        _, g_raw, total = oracle(cols_np, v, offset, power=True)
        lam, vc, vb, (v, offset) = _power_update(g_raw, total, vc, vb, mean_s, factor_s)
    step = 1.0 / (lam + jnp.asarray(extra, dtype))
    return step, lam, vc, vb
