"""FSA's whole annealing schedule, its polish and its survivors as one compiled program (DESIGN.md §5).

:func:`solve` takes an :class:`~jaxselect.anneal.FSAProblem`, the schedule M_e of eq. (3) as data
(an int32 array padded to a power-of-two length ``cap``), the traced ``n_iter`` and ``lr`` and the
end's data (:class:`Finishing`: k, the polish's tolerance, cap and L1 weight), and runs every
stage, compaction and step-size estimate (:func:`stages`), the polish on the final support and the
extraction of the survivors (:func:`~jaxselect.anneal.solver.extract`) in one XLA program. Only
the static :class:`RunPlan` and the polish switch shape the program: the stage widths (successive
halvings of M down to the k-bucket, without M/2, :func:`~jaxselect.anneal.stage_widths`), ``cap``,
how the step is set, and whether the squared loss may iterate in moment space. So a call that
changes only ``mu``, ``lr``, ``l2``, ``smoothness``, ``k`` within its bucket or ``n_iter`` within
its ``cap`` compiles nothing. :func:`run` is the stages alone (a refine, or a polish on a compacted
sparse support, runs between it and :func:`finish_program`).

Inside the program (:func:`stages`): the bounds of each stage (the iterations whose active count
fits its width, :func:`~jaxselect.anneal.plan_stages`) are computed from the schedule; between
stages the kept columns are gathered into a smaller array (``design.compact``: a dense linear
design becomes its transposed copy, see :mod:`.design`); each stage sets its step (power
iteration, warm-started, with a traced number of iterations) and runs its iterations by the
library's driver, :func:`jaxselect.solver.iterate` of FSA's solver
(:func:`~jaxselect.anneal.fsa_solver`): a ``while`` loop until the stage's end, which does no
masked padding work. For the squared loss the last stage, when it is narrower than its
length, iterates in moment space (``G = AᵀA/N``, :class:`~jaxselect.anneal.step.MomentOracle`),
chosen by ``lax.cond``. Nothing leaves the device.

Reverse-mode differentiation cannot go through a ``while`` loop, so when :func:`~jaxselect.fsa`
is called under a transformation (``jax.grad``, ``jax.jit``, ``jax.vmap``: traced inputs) the
plan carries the stage bounds as static integers (``RunPlan.bounds``, computed on the host by
:func:`~jaxselect.anneal.plan_stages`), every loop is then a ``lax.scan`` of exactly the
stage's iterations, and ``coef``/``intercept``/``loss_path`` are differentiable through them.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import is_traced
from ..programs import jit
from ..solver import iterate
from .design import PLDesign
from .polish import polish_prepared
from .solver import FSACarry, FSAEnding, FSAOutput, FSAStage, fsa_solver
from .step import FSAProblem, FSAState, default_step, design_shape, moment_oracle, start_vector
from .stepsize import WeightedTarget

__all__ = ["Finishing", "RunPlan", "RunStart", "run", "solve", "finish_program", "iteration_cap", "stage_bounds"]

# default step: power iterations for the first (cold) and later (warm-started) estimates, at most
# half the stage's own iterations; the first estimate of a short wide stage uses a row subsample
_POWER_COLD = 12
_POWER_WARM = 6
_SUBSAMPLE_ROWS = 1024


class RunPlan(NamedTuple):
    """The static shape of a compiled FSA run (hashable; the cache key with the input shapes).

    Attributes:
      widths: decreasing stage widths, M first (:func:`~jaxselect.anneal.stage_widths`).
      cap: length of the schedule/objective buffers (:func:`iteration_cap` of ``n_iter``).
      step_mode: ``"power"`` (default 1/L per stage), ``"fixed"`` (the user's ``lr``) or
        ``"optimizer"`` (an optax optimizer; no step).
      gram: the squared loss on a linear design may iterate in moment space.
      bounds: None (stage bounds computed in the program from the schedule), or static
        ``((start, end), ...)`` per stage (traced calls: every loop a differentiable scan).
      gather_block: rows per block of the first (transposing) compaction of a linear design, 0
        for one fused gather (row-sharded or traced X; see :meth:`~jaxselect.design.DenseDesign.compact`).
      first_stage: the stage the program starts at (0: from β = 0 at full width; > 0: from a
        :class:`RunStart` at that stage's width, e.g. after FSA's streamed phase).
      progress: every iteration ticks the progress bar of :func:`~jaxselect.anneal.solver.ticking`.
      dense_from: None, or the first stage (≥ 1) from which a sparse design's kept columns are
        copied densely (:meth:`~jaxselect.design.SparseDesign.densify`): inside the program a
        compacted sparse stage still reads every stored entry, so narrow stages of a small X run
        faster on an (n, W) array.
    """

    widths: tuple
    cap: int
    step_mode: str
    gram: bool
    bounds: tuple | None = None
    gather_block: int = 0
    first_stage: int = 0
    progress: bool = False
    dense_from: int | None = None


class RunStart(NamedTuple):
    """Where a run resumes: the state of Algorithm 1 at the start of stage ``plan.first_stage``.

    Attributes:
      state: :class:`~jaxselect.anneal.FSAState` at that stage's width W (compacted: the kept
        columns of the previous stage's end, :func:`keep_columns`), ``iteration`` the stage's start.
      cols: (W,) int32 original index of each column.
      v_coef: (W, P) power-iteration vector; v_icpt: () its intercept part; lam: () its estimate.
      objective: (cap,) F of the iterations so far (NaN after them).
      steps: (first_stage,) step of each earlier stage.
    """

    state: FSAState
    cols: jax.Array
    v_coef: jax.Array
    v_icpt: jax.Array
    lam: jax.Array
    objective: jax.Array
    steps: jax.Array


def stage_bounds(schedule, n_iter: int, widths) -> list:
    """Host ``[(start, end), ...]`` of each stage: the formula of :func:`run` on a numpy schedule."""
    schedule = np.asarray(schedule)
    prev = np.concatenate([[widths[0]], schedule[:-1]])
    valid = np.arange(schedule.shape[0]) < n_iter
    starts = [0] + [int(np.sum(valid & (prev > w))) for w in widths[1:]]
    return list(zip(starts, starts[1:] + [int(n_iter)]))


@functools.partial(jit, static_argnames="width")
def keep_columns(active, width: int):
    """Positions of the columns kept for a stage of ``width``: the active ones first (ascending)."""
    return _first_true(active, width)


def iteration_cap(n_iter: int) -> int:
    """Buffer length for ``n_iter`` iterations: the next power of two, at least 16."""
    return max(16, 1 << (int(n_iter) - 1).bit_length())


def _first_true(mask, size):
    """Ascending positions of the first ``size`` True entries of ``mask``; when fewer are True, the
    lowest False positions fill up (a stable sort, then ascending order)."""
    return jnp.sort(jnp.argsort(jnp.logical_not(mask), stable=True)[:size]).astype(jnp.int32)


def gather_rows(tree, cols, width):
    """Gather rows ``cols`` of every leaf of ``tree`` whose leading dimension is ``width``."""

    def take(leaf):
        if hasattr(leaf, "ndim") and leaf.ndim >= 1 and leaf.shape[0] == width:
            return jnp.take(leaf, cols, axis=0)
        return leaf

    return jax.tree.map(take, tree)


def _cond(pred, true_fn, false_fn, *operands):
    """``lax.cond`` for a traced predicate, a plain ``if`` for a Python bool (static plans)."""
    if isinstance(pred, bool):
        return true_fn(*operands) if pred else false_fn(*operands)
    return jax.lax.cond(pred, true_fn, false_fn, *operands)


def _subsampled(problem: FSAProblem, stride: int, design=None) -> FSAProblem:
    """Every ``stride``-th row of the problem (for the cheap first spectral estimate); ``design``:
    that subsample of the design, made beforehand (:func:`subsample_design`), else taken here."""
    target = problem.target
    if isinstance(target, WeightedTarget):  # the subsample's weights, again of mean 1
        rel = target.rel[::stride]
        target = WeightedTarget(None, rel * (rel.shape[0] / jnp.sum(rel)))
    if design is None:
        design = problem.design.subsample_rows(stride)
    return problem._replace(design=design, target=target)


def subsample_design(problem: FSAProblem, plan: "RunPlan"):
    """The row subsample of the first stage's step estimate, taken outside the compiled run: for a
    concrete :class:`~jaxselect.design.SparseDesign` on one device (None otherwise — a row-sharded
    design's is taken in the run — or when the run cannot use it).

    Under the run's trace a sparse design's subsample keeps every stored entry (the other rows'
    entries become zeros: two arrays the size of X's entries and full-size products); taken here
    on concrete arrays it holds only the subsample's ~nnz/stride entries (padded to
    :func:`~jaxselect.design.sparse.nnz_bucket`, so similar problems share the compiled run)."""
    from ..design.sparse import pad_entries

    design = problem.design
    rows = design.shape[0]
    if (
        plan.step_mode != "power" or plan.first_stage != 0 or problem.config.curvature is None
        or not design.sparse or design.sharded or rows <= 2 * _SUBSAMPLE_ROWS  # a row-sharded design: in the run
        or is_traced((design.data, design.rows, design.cols))
    ):
        return None
    return pad_entries(design.subsample_rows(-(-rows // _SUBSAMPLE_ROWS)))


def _stage_step(problem: FSAProblem, index: int, length, v_coef, v_icpt, lam, sub_design=None):
    """The default step of a stage: ``(step, lam, v_coef, v_icpt)``.

    Stage 0: ``min(12, length // 2)`` power iterations (at least 6), or 12 on a 1024-row subsample
    when that is fewer than 6 and the loss has a curvature bound. Later stages: ``min(6, length
    // 2)`` warm-started iterations, none (the previous estimate, still an upper bound on the
    shrunken problem) when that is below 2.
    """
    if index > 0:
        n = jnp.minimum(_POWER_WARM, length // 2)
        return default_step(problem, v_coef, v_icpt, jnp.where(n >= 2, n, 0), lam)
    n = jnp.minimum(_POWER_COLD, length // 2)
    rows = problem.design.shape[0]
    if problem.config.curvature is None or rows <= 2 * _SUBSAMPLE_ROWS:
        return default_step(problem, v_coef, v_icpt, jnp.maximum(n, _POWER_WARM), lam)
    sub = _subsampled(problem, -(-rows // _SUBSAMPLE_ROWS), sub_design)
    return jax.lax.cond(
        n >= _POWER_WARM,
        lambda: default_step(problem, v_coef, v_icpt, jnp.maximum(n, _POWER_WARM), lam),
        lambda: default_step(sub, v_coef, v_icpt, _POWER_COLD, lam),
    )


def _iterate(problem: FSAProblem, carry, start, end, gram: bool, solver):
    """Iterations ``start .. end − 1`` of Algorithm 1 on one stage: the driver's
    :func:`~jaxselect.solver.iterate` of FSA's solver (a ``while`` loop until the stage's end, or a
    scan of exactly its iterations when the bounds are Python ints), F of each in the carry."""

    def loop(moments: bool):
        def go(carry):
            oracle = moment_oracle(problem.design, problem.target) if moments else None
            stage = FSAStage(problem, end, oracle)
            n_steps = end - start if isinstance(end, int) else carry.objective.shape[0]
            return iterate(solver, stage, carry, n_steps)[0]

        return go

    if not gram:
        return loop(False)(carry)
    width = carry.state.active.shape[0]
    return _cond(width < end - start, loop(True), loop(False), carry)


def stages(problem: FSAProblem, schedule, n_iter, lr, start: RunStart | None = None, sub=None, *, plan: RunPlan):
    """The body of :func:`run` (traced: also the first part of :func:`solve`)."""
    widths = plan.widths
    m = widths[0]
    solver = fsa_solver(plan.step_mode, plan.bounds is not None, plan.progress)
    if plan.bounds is None:
        prev = jnp.concatenate([jnp.full((1,), m, jnp.int32), schedule[:-1]])
        valid = jnp.arange(plan.cap, dtype=jnp.int32) < n_iter
        starts = [jnp.zeros((), jnp.int32)] + [jnp.sum(valid & (prev > w), dtype=jnp.int32) for w in widths[1:]]
        ends = starts[1:] + [jnp.asarray(n_iter, jnp.int32)]
    else:
        starts, ends = (list(b) for b in zip(*plan.bounds))
    first = plan.first_stage
    if start is None:
        carry = solver.init(problem, schedule, lr)
        p, dtype = design_shape(problem.design)
        cols = jnp.arange(m, dtype=jnp.int32)
        v_coef, v_icpt, lam = start_vector(m, p, dtype), jnp.ones((), dtype), jnp.ones((), dtype)
        steps = []
    else:
        state, cols, v_coef, v_icpt, lam, objective = start[:6]
        dtype = state.coef.dtype
        carry = FSACarry(state, objective)
        steps = [start.steps[j] for j in range(first)]
    design = problem.design
    for i, width in enumerate(widths):
        if i < first:
            continue
        state = carry.state
        if i > first:
            keep = _first_true(state.active, width)
            design = design.compact(keep, plan.gather_block)
            state = state._replace(
                coef=jnp.take(state.coef, keep, axis=0),
                active=jnp.take(state.active, keep),
                opt_state=gather_rows(state.opt_state, keep, widths[i - 1]),
            )
            cols = jnp.take(cols, keep)
            v_coef = jnp.take(v_coef, keep, axis=0)
            if plan.dense_from is not None and i >= plan.dense_from and design.sparse:
                design = design.densify()
        stage = problem._replace(design=design)
        if plan.step_mode == "power":
            step, lam, v_coef, v_icpt = _stage_step(stage, i, ends[i] - starts[i], v_coef, v_icpt, lam, sub)
            state = state._replace(opt_state=state.opt_state._replace(step=step))
        elif plan.step_mode == "fixed":
            step = jnp.asarray(lr, dtype)
        else:
            step = jnp.full((), jnp.nan, dtype)
        steps.append(step)
        # moment space: only the last stage, where the schedule's long flat tail runs (a candidate
        # stage compiles both loops; the stage before it qualifies only when narrow and short: at
        # 2 000 x 200 its moment loop changed no run time and cost 0.07 s of compile); never for a
        # width no stage length can exceed
        gram = plan.gram and i == len(widths) - 1 and width < plan.cap
        carry = _iterate(stage, carry._replace(state=state), starts[i], ends[i], gram, solver)
    if isinstance(design, PLDesign):
        mean = inv_scale = None
        basis_mean = design.basis_mean
    else:  # a linear design operator carries its standardisation (the kept columns' μ and f)
        mean, inv_scale, basis_mean = design.mean, design.factor, None
    return carry.state, cols, carry.objective, jnp.stack(steps), mean, inv_scale, basis_mean


@functools.partial(jit, static_argnames=("plan",))
def run(problem: FSAProblem, schedule, n_iter, lr, start: RunStart | None = None, sub=None, *, plan: RunPlan):
    """The whole schedule of :func:`~jaxselect.fsa` in one program (see module docstring).

    Args:
      problem: the :class:`~jaxselect.anneal.FSAProblem` at full width M.
      schedule: (cap,) int32 M_e of eq. (3), padded with k after ``n_iter``.
      n_iter: () int32 number of iterations (≤ cap).
      lr: () step of ``step_mode="fixed"`` (ignored otherwise).
      start: None (from β = 0), or the :class:`RunStart` of stage ``plan.first_stage``; then
        ``problem.design`` holds that stage's W columns (``start.cols``) only.
      sub: None, or the first stage's row subsample of ``problem.design`` made beforehand
        (:func:`subsample_design`: a sparse design's, without the other rows' entries).
      plan: the static :class:`RunPlan`.

    Returns:
      ``(state, cols, objective, steps, mean, inv_scale, basis_mean)`` at the last width W:
      the :class:`~jaxselect.anneal.FSAState`, (W,) original index of each column, (cap,) F per
      iteration (NaN after ``n_iter``), (n_stages,) step of each stage (NaN with an optimizer),
      and the last design's (W,) column means and inverse scales (linear) or (W, P) PL centring.
    """
    return stages(problem, schedule, n_iter, lr, start, sub, plan=plan)


class Finishing(NamedTuple):
    """The data of the end of a run: the survivors' count and the polish's options (traced).

    Attributes:
      k: () int32 survivors; n_iter: () int32 iterations.
      tol: () the polish's tolerance; max_iter: () int32 its cap; l1: None or () λ.
      x_min, bin_width: (M,) PL grid (None for linear learners).
    """

    k: jax.Array
    n_iter: jax.Array
    tol: Any = None
    max_iter: Any = None
    l1: Any = None
    x_min: Any = None
    bin_width: Any = None


def end_of_run(problem, state, cols, objective, steps, mean, inv_scale, basis_mean, finishing: Finishing, *,
               polish: bool, local=None, differentiable: bool = True) -> FSAOutput:
    """The polish (``polish``: on the problem's design, whose columns ``local`` — default ``cols`` —
    are the survivors' positions; ``differentiable``: see :func:`~jaxselect.anneal.polish.polish_prepared`)
    and the survivors (:func:`~jaxselect.anneal.solver.extract`)."""
    fit_status = None
    if polish:
        fit = polish_prepared(problem, cols if local is None else local, state.coef, state.intercept, state.active,
                              finishing.tol, finishing.max_iter, False, finishing.l1, differentiable=differentiable)
        state = state._replace(coef=fit.coef, intercept=fit.intercept)
        fit_status = fit.status
    ending = FSAEnding(cols, mean, inv_scale, basis_mean, finishing.x_min, finishing.bin_width, finishing.k,
                       finishing.n_iter)
    out = fsa_solver().finish(ending, FSACarry(state, objective), None)
    status = out.status if fit_status is None else jnp.bitwise_or(out.status, fit_status)
    return out._replace(status=status, steps=steps)


@functools.partial(jit, static_argnames=("plan", "polish", "differentiable"))
def solve(problem: FSAProblem, schedule, n_iter, lr, finishing: Finishing, start: RunStart | None = None, sub=None,
          *, plan: RunPlan, polish: bool, differentiable: bool = True) -> FSAOutput:
    """One compiled program for a whole in-memory call of :func:`~jaxselect.fsa`: the schedule's
    stages (:func:`run`'s body), the polish on the final support (``polish``), and the survivors
    (:class:`~jaxselect.anneal.solver.FSAOutput`: ``finishing.k`` and ``n_iter`` are data, so a new
    k in its bucket compiles nothing). With ``start`` (a streamed phase's hand-over) the design
    holds ``start.cols`` only and the polish reads the survivors' positions among them.
    ``differentiable=False`` (a call on concrete inputs, which nothing differentiates) traces the
    polish without its implicit-differentiation rule."""
    state, cols, objective, steps, mean, inv_scale, basis_mean = stages(
        problem, schedule, n_iter, lr, start, sub, plan=plan
    )
    local = None if start is None else jnp.searchsorted(start.cols, cols).astype(jnp.int32)
    return end_of_run(problem, state, cols, objective, steps, mean, inv_scale, basis_mean, finishing,
                      polish=polish, local=local, differentiable=differentiable)


@functools.partial(jit, static_argnames=("polish",))
def finish_program(problem, state, cols, objective, steps, mean, inv_scale, basis_mean, finishing: Finishing, local=None,
                   *, polish: bool) -> FSAOutput:
    """:func:`end_of_run` as its own program (after a streamed phase, a refine, or a polish run apart)."""
    return end_of_run(problem, state, cols, objective, steps, mean, inv_scale, basis_mean, finishing, polish=polish,
                      local=local)
