"""FSA on X that does not sit in memory: the streamed stages, then the in-memory compiled ones.

Barbu et al. (FSA paper, §3.1.3): "in FSA one can re-load only the working variables, the number
of which quickly drops". :func:`stream_fsa` runs Algorithm 1 on a
:class:`~jaxselect.design.streamed.StreamedDesign` over a
:class:`~jaxselect.design.stream.StreamSource` (a memmap, a batch callable, a column source):

1. (done by the caller) one pass for the column summary, the targets and the weights;
2. while stage i's working set (N × W_i, :func:`memory_stage`) does not fit the memory budget, the
   host drives the iterations: each iteration is **one pass** of the streamed design over the
   rows of the stage's W_i columns (:meth:`~jaxselect.design.streamed.StreamedDesign.loss_pass`:
   the value, ``u X`` and ``Σu`` of the per-row losses, :class:`RowLoss`), then FSA's solver step
   itself (:func:`~jaxselect.anneal.fsa_solver`, fed the pass's sums as its oracle,
   :class:`~jaxselect.anneal.solver.Evaluated`: the same update and keep-the-M_e-largest, same
   tie rule); between stages the same compaction as the compiled run
   (:func:`~jaxselect.anneal.run.keep_columns`); with ``mesh=`` each row block is split into one
   part per local device, computed at once and summed;
3. at the first stage that fits, the kept columns are gathered in one more pass into a device
   :class:`~jaxselect.design.TransposedDesign`, and the in-memory program
   (:func:`~jaxselect.anneal.run.solve`: the remaining stages, the polish, the survivors) continues
   from that state (:class:`~jaxselect.anneal.run.RunStart`).

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

from ..design.operators import DenseDesign
from ..design.streamed import StreamedDesign, scatter_columns, active_positions, aligned_empty, column_bucket, gather_columns  # noqa: F401
from ..losses import loss_names
from ..programs import jit
from .checkpoint import load_checkpoint, save_checkpoint
from .run import RunPlan, RunStart, finish_program, gather_rows, keep_columns, solve, stage_bounds
from .solver import Evaluated, FSACarry, FSAOutput, FSAStage, fsa_solver, iteration_work
from .step import FSAProblem, FSAState, default_step, start_vector
from .stepsize import WeightedTarget

__all__ = [
    "STREAM_LOSSES", "RowLoss", "StreamRun", "StreamedDesign", "check_max_memory", "check_mesh", "check_streamable", "memory_stage",
    "stream_fsa",
]

#: Losses the streamed phase runs (means of per-row terms).
STREAM_LOSSES = loss_names(fsa=True, pointwise=True)
#: Bytes an in-memory stage of width W needs per ``N·W·itemsize``: the gathered (W, N) columns, the
#: next compaction's copy (≤ W/2) and the polish's dense support.
MEMORY_FACTOR = 2.0
#: ``max_memory="auto"``: this fraction of the available RAM (``MemAvailable`` of /proc/meminfo).
AUTO_FRACTION = 0.25
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


# --------------------------------------------------------------------------- the streamed step
class RowLoss(NamedTuple):
    """The loss of one row, ``ℓ_i = loss(s_i, y_i)`` (weighted by ``rel_i``): what the streamed
    design's passes differentiate per row (equal by value: one compiled kernel per loss)."""

    loss_fn: Any

    def __call__(self, si, yi, ri):
        target = yi[None] if ri is None else WeightedTarget(yi[None], ri[None])
        return jnp.asarray(self.loss_fn(si[None], target), si.dtype)


def _direction(coef, intercept, mean, factor):
    """``(f⊙c, b − μ·(f⊙c))``: the raw-space vector and offset of standardised scores."""
    v = coef[:, 0] * factor
    return v, intercept - jnp.dot(mean, v)


def _standardised_gradient(g_raw, total, mean, factor):
    """``u X̃ = f ⊙ (u X − (Σu) μ)`` as a (W, 1) coefficient gradient."""
    return ((g_raw - total * mean) * factor)[:, None]


direction = jit(_direction)


@partial(jit, static_argnames=("solver",))
def _stream_step(stage: FSAStage, carry: FSACarry, *, solver):
    """FSA's step (:func:`~jaxselect.anneal.fsa_solver`) with the oracle of a streamed pass
    (``stage.oracle``, an :class:`~jaxselect.anneal.solver.Evaluated`), and the next iteration's
    direction."""
    carry = solver.step(stage, carry)
    oracle = stage.oracle
    return carry, _direction(carry.state.coef, carry.state.intercept, oracle.mean, oracle.factor)


def _normalize(vc, vb):
    nrm = jnp.maximum(jnp.sqrt(jnp.sum(vc * vc) + vb * vb), jnp.asarray(jnp.finfo(vc.dtype).tiny, vc.dtype))
    return vc / nrm, vb / nrm


@jit
def _power_start(vc, vb, mean, factor):
    vc, vb = _normalize(vc, vb)
    return vc, vb, _direction(vc, vb, mean, factor)


@jit
def _power_update(g_raw, total, vc, vb, mean, factor):
    """One power iteration's end: the Rayleigh quotient, the normalised product and its direction."""
    gc = _standardised_gradient(g_raw, total, mean, factor)
    lam = jnp.abs(jnp.sum(gc * vc) + total * vb)
    vc, vb = _normalize(gc, total)
    return lam, vc, vb, _direction(vc, vb, mean, factor)


@jit
def _compact(state: FSAState, cols, v_coef, keep):
    width = state.active.shape[0]
    state = state._replace(
        coef=jnp.take(state.coef, keep, axis=0),
        active=jnp.take(state.active, keep),
        opt_state=gather_rows(state.opt_state, keep, width),
    )
    return state, jnp.take(cols, keep), jnp.take(v_coef, keep, axis=0)


@partial(jit, static_argnames=("n_power",))
def _subsample_step(problem, v_coef, v_icpt, lam, *, n_power):
    return default_step(problem, v_coef, v_icpt, n_power, lam)


def _bar_postfix(bar, **kw):
    if hasattr(bar, "set_postfix"):
        bar.set_postfix(**kw, refresh=False)


class StreamRun(NamedTuple):
    """The host plan of a streamed run (:func:`stream_fsa`).

    Attributes:
      schedule: (cap,) int32 numpy M_e, padded with k; n_iter: iterations.
      lr: the fixed step (0 for the default rule).
      hand_over: the first stage run in memory (:func:`memory_stage`; ``len(widths)``: none).
      sub: the (⌈N/stride⌉, M) subsample of the stage-0 step (when the rule uses it) or None.
      checkpoint: path of the checkpoint (None: none); fp: the problem's fingerprint.
      polish: polish the final support (gathered for it when every stage streams).
    """

    schedule: Any
    n_iter: int
    lr: float
    hand_over: int
    sub: Any = None
    checkpoint: Any = None
    fp: str = ""
    polish: bool = False


def stream_fsa(design: StreamedDesign, problem: FSAProblem, summary, plan: RunPlan, run: StreamRun, finishing,
               bar=None) -> FSAOutput:
    """Run FSA on a streamed design: streamed stages ``< run.hand_over``, then the compiled program.

    Every iteration is FSA's solver step (:func:`~jaxselect.anneal.fsa_solver`) fed by one pass of
    ``design`` (:meth:`~jaxselect.design.streamed.StreamedDesign.loss_pass`); from the hand-over
    on, the stages, the polish and the survivors are the in-memory program
    (:func:`~jaxselect.anneal.run.solve`) over the gathered columns.

    Args:
      design: the :class:`~jaxselect.design.streamed.StreamedDesign` (its summary pass done).
      problem: the :class:`~jaxselect.anneal.FSAProblem` without a design: (N,) target (or a
        :class:`~jaxselect.anneal.stepsize.WeightedTarget`), (M,) live mask, config and priors.
      summary: the host :class:`~jaxselect.design.ColumnSummary` of the source.
      plan: the :class:`~jaxselect.anneal.run.RunPlan` (widths, cap, step mode, gram).
      run: the host :class:`StreamRun`.
      finishing: the :class:`~jaxselect.anneal.run.Finishing` of the run's end.
      bar: a progress bar (:func:`jaxselect._progress.progress_bar`).

    Returns:
      The :class:`~jaxselect.anneal.solver.FSAOutput` of the run.
    """
    n, m = design.shape
    widths, schedule, n_iter, checkpoint = plan.widths, run.schedule, run.n_iter, run.checkpoint
    dtype = np.dtype(summary.mean.dtype)
    mean_np, factor_np = np.asarray(summary.mean), np.asarray(summary.factor)
    live = np.asarray(summary.live)
    target = problem.target
    light = problem._replace(live=jax.device_put(live))
    solver = fsa_solver(plan.step_mode)
    bounds = stage_bounds(schedule, n_iter, widths)
    extra = float(problem.l2) + 32.0 * float(problem.smoothness)
    lr = jax.device_put(np.asarray(run.lr, dtype))

    carry = solver.init(light, jax.device_put(schedule), lr)  # the state of the run at β = 0
    cols = jnp.arange(m, dtype=jnp.int32)
    v_coef, v_icpt, lam = start_vector(m, 1, dtype), jnp.ones((), dtype), jnp.ones((), dtype)
    steps: list = []
    first = 0
    hand_over = run.hand_over
    saved = load_checkpoint(checkpoint, run.fp) if checkpoint is not None else None
    if saved is not None:
        first = int(saved["stage"])
        state = carry.state
        state = state._replace(
            coef=jnp.asarray(saved["coef"]), intercept=jnp.asarray(saved["intercept"]),
            active=jnp.asarray(saved["active"]), iteration=jnp.asarray(saved["iteration"]),
            opt_state=state.opt_state._replace(step=jnp.asarray(saved["opt_step"])),
        )
        carry = FSACarry(state, jnp.asarray(np.asarray(saved["objective"], dtype)))
        cols = jnp.asarray(saved["cols"])
        v_coef, v_icpt, lam = jnp.asarray(saved["v_coef"]), jnp.asarray(saved["v_icpt"]), jnp.asarray(saved["lam"])
        steps = [jnp.asarray(s) for s in saved["steps"]]
        hand_over = max(hand_over, first)
        if bar is not None:  # the work of the iterations the checkpoint holds
            bar.update(int(iteration_work(bounds, widths)[: int(saved["iteration"])].sum()))

    for i in range(first, min(hand_over, len(widths))):
        width = widths[i]
        state = carry.state
        if i > 0:
            state, cols, v_coef = _compact(state, cols, v_coef, keep_columns(state.active, width))
        cols_np = np.asarray(cols)
        mean_s, factor_s = jax.device_put(mean_np[cols_np]), jax.device_put(factor_np[cols_np])
        start, end = bounds[i]
        length = end - start
        if plan.step_mode == "power":
            step, lam, v_coef, v_icpt = _stream_step_size(
                design, cols_np, mean_s, factor_s, i, length, n, v_coef, v_icpt, lam, extra, run.sub, light,
                target, mean_np, factor_np, dtype,
            )
            state = state._replace(opt_state=state.opt_state._replace(step=step))
        else:
            step = lr
        steps.append(step)
        carry = carry._replace(state=state)
        _bar_postfix(bar, phase="stream", width=width)
        v, offset = direction(state.coef, state.intercept, mean_s, factor_s)
        for e in range(start, end):
            pos = active_positions(np.asarray(carry.state.active))
            if pos is None:
                val, g_raw, total = design.loss_pass(cols_np, v, offset, power=False)
            else:  # the inactive columns' coefficients are 0 and their gradient masked: not computed
                val, g_raw, total = design.loss_pass(cols_np[pos], jnp.take(v, pos), offset, power=False)
                g_raw = scatter_columns(g_raw, jax.device_put(pos), width)
            stage = FSAStage(light, end, Evaluated(val, g_raw, total, mean_s, factor_s))
            carry, (v, offset) = _stream_step(stage, carry, solver=solver)
            if bar is not None:
                bar.update(width)  # the bar counts columns × iterations (see fsa's _work_bar)
        if checkpoint is not None:
            state = carry.state
            save_checkpoint(
                checkpoint, run.fp, stage=np.asarray(i + 1), coef=np.asarray(state.coef),
                intercept=np.asarray(state.intercept), active=np.asarray(state.active), cols=cols_np,
                iteration=np.asarray(state.iteration), opt_step=np.asarray(state.opt_state.step),
                v_coef=np.asarray(v_coef), v_icpt=np.asarray(v_icpt), lam=np.asarray(lam),
                objective=np.asarray(carry.objective), steps=np.asarray([np.asarray(s) for s in steps], dtype).reshape(-1),
            )
    state = carry.state

    if hand_over >= len(widths):  # every stage streamed: the final support, gathered for the polish only
        cols_np = np.asarray(cols)
        mean_s, factor_s = jax.device_put(mean_np[cols_np]), jax.device_put(factor_np[cols_np])
        polished = None
        if run.polish:
            polished = light._replace(design=design.gather(cols_np, mean_s, factor_s), live=jax.device_put(live[cols_np]))
        local = jax.device_put(np.arange(cols_np.shape[0], dtype=np.int32))
        return finish_program(polished, state, cols, carry.objective, jnp.stack(steps), mean_s, factor_s, None,
                              finishing, local, polish=run.polish)

    # hand over: the kept columns of stage h, gathered once, then the compiled stages h, h+1, ...
    h = hand_over
    if h > 0:
        state, cols, v_coef = _compact(state, cols, v_coef, keep_columns(state.active, widths[h]))
    cols_np = np.asarray(cols)
    _bar_postfix(bar, phase="memory", width=widths[h])
    gathered = design.gather(cols_np, jax.device_put(mean_np[cols_np]), jax.device_put(factor_np[cols_np]))
    memory = light._replace(design=gathered, live=jax.device_put(live[cols_np]))
    start = None
    if h > 0:
        start = RunStart(state, cols, v_coef, v_icpt, lam, carry.objective, jnp.stack(steps))
    # the compiled stages tick the bar themselves (plan.progress; the caller holds solver.ticking)
    return solve(memory, jax.device_put(schedule), jax.device_put(np.int32(n_iter)), lr, finishing, start,
                 plan=plan._replace(first_stage=h), polish=run.polish)


def _stream_step_size(oracle, cols_np, mean_s, factor_s, i, length, n, v_coef, v_icpt, lam, extra, sub, light, target,
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
