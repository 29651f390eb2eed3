"""FSA as a :class:`jaxselect.solver.Solver`: one iteration of Algorithm 1 behind the library's driver.

:func:`fsa_solver` builds the solver (closing over the static step rule and the loop kind); its
functions are

* ``init(problem, schedule, lr) -> FSACarry``: β = 0 at full width, every non-constant column
  active, the schedule M_e of eq. (3) and the F-per-iteration buffer;
* ``step(stage, carry) -> FSACarry``: one iteration (the update of ``problem.config.optimizer``,
  then keep the M_e largest, :func:`~jaxselect.anneal.step.advance`), the value/gradient coming
  from the stage's oracle: passes over the stage's design (the default), the moments of the
  squared loss (:class:`~jaxselect.anneal.step.MomentOracle`), or the sums a streamed pass has
  already computed (:class:`Evaluated`: the streamed phase is this same step fed by a
  :class:`~jaxselect.design.stream.StreamedDesign`);
* ``done(stage, carry)``: the stage's last iteration is behind;
* ``finish(ending, carry, None) -> FSAOutput``: the survivors at the last width, in the order
  the result takes its first k (:func:`extract`).

A *stage* (:class:`FSAStage`) is the problem at one compacted width and the iteration where the
stage ends; the compiled run (:func:`jaxselect.anneal.run.solve`) calls
:func:`jaxselect.solver.iterate` once per stage inside one program, compacting between them.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..solver import Solver, SolverTraits
from ..status import NONFINITE, OK
from .design import PLDesign, n_params
from .step import FSAProblem, FSAState, Params, advance, direct_oracle

__all__ = ["Evaluated", "FSACarry", "FSAEnding", "FSAOutput", "FSAStage", "extract", "fsa_solver", "keep_order"]


class FSACarry(NamedTuple):
    """The driver's state of FSA: Algorithm 1's :class:`~jaxselect.anneal.FSAState` and F per iteration.

    Attributes:
      state: the :class:`~jaxselect.anneal.FSAState` at the current width.
      objective: (cap,) F at the start of each iteration (NaN for iterations not run).
    """

    state: FSAState
    objective: jax.Array


class FSAStage(NamedTuple):
    """What ``step`` sees: the problem at one stage's width and where the stage ends.

    Attributes:
      problem: the :class:`~jaxselect.anneal.FSAProblem` over the stage's columns.
      end: () int32 (or a Python int) the first iteration after the stage.
      oracle: None (passes over ``problem.design``), or a callable pytree
        ``oracle(coef, intercept) -> (value, coef-gradient, intercept-gradient)`` of the mean loss.
    """

    problem: FSAProblem
    end: Any
    oracle: Any = None


class Evaluated(NamedTuple):
    """The oracle of a streamed pass: the sums the design operator's pass computed at the state's
    coefficients (value, raw ``u X`` and ``Σu``), standardised here with the stage's column
    means and factors: ``∇_c = f ⊙ (u X − (Σu) μ)``."""

    value: jax.Array
    g_raw: jax.Array
    total: jax.Array
    mean: jax.Array
    factor: jax.Array

    def __call__(self, coef, intercept):
        g = ((self.g_raw - self.total * self.mean) * self.factor)[:, None]
        return self.value, g, self.total


class FSAEnding(NamedTuple):
    """What ``finish`` needs besides the carry: the last width's columns and standardisation.

    Attributes:
      cols: (W,) int32 original index of each column.
      mean, inv_scale: (W,) the columns' means and factors (linear learners; None for PL).
      basis_mean: (W, P) PL centring (None for linear learners).
      x_min, bin_width: (M,) the PL grid (None for linear learners).
      k: () int32 number of survivors; n_iter: () int32 iterations.
    """

    cols: jax.Array
    mean: Any
    inv_scale: Any
    basis_mean: Any
    x_min: Any
    bin_width: Any
    k: Any
    n_iter: Any


class FSAOutput(NamedTuple):
    """The run's survivors at the last width W, kept ones first: the result is the first ``k`` of
    each (W,) field (:func:`jaxselect.anneal.fsa.make_result`), which a new k of the same bucket
    reads from the same compiled program.

    Attributes:
      support: (W,) original column indices, the k kept ones first (ascending).
      coef: (W,) raw-space coefficients (linear) or (W, P) PL coefficients.
      intercept: () raw-space intercept (from the first k).
      objective: (cap,) F per iteration (its first ``n_iter`` entries are the ``loss_path``).
      status: () int32 status of the schedule (and the polish, when fused).
      steps: (n_stages,) the step of each stage.
      basis_mean, x_min, bin_width: PL fields, (W, ...) kept ones first (None for linear).
    """

    support: jax.Array
    coef: jax.Array
    intercept: jax.Array
    objective: jax.Array
    status: jax.Array
    steps: jax.Array
    basis_mean: Any = None
    x_min: Any = None
    bin_width: Any = None


# --------------------------------------------------------------------------- the solver
def _init(step_mode: str):
    def init(problem: FSAProblem, schedule, lr) -> FSACarry:
        p = n_params(problem.design)
        dtype = problem.l2.dtype
        m = problem.live.shape[0]
        coef = jnp.zeros((m, p), dtype)
        intercept = jnp.zeros((), dtype)
        opt_state = problem.config.optimizer.init(Params(coef, intercept))
        if step_mode == "fixed":
            opt_state = opt_state._replace(step=jnp.asarray(lr, dtype))
        state = FSAState(
            coef, intercept, jnp.asarray(problem.live).astype(bool), opt_state, jnp.zeros((), jnp.int32),
            jnp.asarray(schedule), jnp.full((), jnp.nan, dtype),
        )
        return FSACarry(state, jnp.full(jnp.shape(schedule), jnp.nan, dtype))

    return init


def _step(stage: FSAStage, carry: FSACarry) -> FSACarry:
    problem = stage.problem
    oracle = stage.oracle
    if oracle is None:
        oracle = direct_oracle(problem.design, problem.target, problem.config.loss_fn)
    state = advance(oracle, problem, carry.state)
    return FSACarry(state, carry.objective.at[carry.state.iteration].set(state.objective))


def _done(stage: FSAStage, carry: FSACarry):
    return carry.state.iteration >= stage.end


def _finish(ending: FSAEnding, carry: FSACarry, infos=None) -> FSAOutput:
    return extract(carry.state, carry.objective, ending)


#: the progress bars of the runs in flight (the innermost last): :func:`ticking` registers one
_BARS: list = []


def tick(width: int, iteration) -> None:
    """Host side of a progress tick: one iteration of a stage of ``width`` columns is done."""
    del iteration
    if _BARS:
        bar = _BARS[-1]
        if getattr(bar, "n", None) == 0 and hasattr(bar, "reset"):
            bar.reset(total=bar.total)  # the clock starts at the first iteration, not before the compile
        bar.update(width)


@contextlib.contextmanager
def ticking(bar):
    """Route the ticks of the runs compiled with ``progress`` (:func:`fsa_solver`) to ``bar`` while
    the block runs (block on the run's outputs inside it: the ticks arrive as the device works)."""
    _BARS.append(bar)
    try:
        yield bar
    finally:
        _BARS.remove(bar)


def _ticking_step(stage: FSAStage, carry: FSACarry) -> FSACarry:
    out = _step(stage, carry)
    width = int(carry.state.active.shape[0])
    jax.debug.callback(functools.partial(tick, width), carry.state.iteration)
    return out


def iteration_work(bounds, widths) -> np.ndarray:
    """(n_iter,) the width of the stage of each iteration — the columns it touches, the unit of
    FSA's progress bar (the work of an iteration is proportional to its width)."""
    return np.concatenate([np.full((end - start,), w, np.int64) for (start, end), w in zip(bounds, widths)])


def fsa_solver(step_mode: str = "power", static_bounds: bool = False, progress: bool = False) -> Solver:
    """FSA's :class:`~jaxselect.solver.Solver` (see the module docstring).

    Args:
      step_mode: ``"power"`` (the default 1/L per stage, set by the run between stages),
        ``"fixed"`` (the user's ``lr``, set by ``init``) or ``"optimizer"`` (an optax optimizer).
      static_bounds: the stage lengths are Python ints (a traced call: every stage a
        reverse-differentiable ``lax.scan`` of exactly its iterations); else each stage is a
        ``lax.while_loop`` until its end (``until_done``), with no padding work.
      progress: each step ticks the progress bar of :func:`ticking` (a ``jax.debug.callback``
        with the stage's width: the bar counts columns × iterations, the real work).
    """
    traits = SolverTraits(name="fsa", stacks_info=False, until_done=not static_bounds)
    return Solver(init=_init(step_mode), step=_ticking_step if progress else _step, finish=_finish, traits=traits,
                  done=None if static_bounds else _done)


# --------------------------------------------------------------------------- the survivors
def keep_order(active, k):
    """(W,) positions, the k kept ones first in ascending order, then the others: the kept ones
    are the first k active positions, filled up with the lowest inactive ones when fewer than k
    are active (``k`` may be traced)."""
    width = active.shape[0]
    first = jnp.argsort(jnp.logical_not(active), stable=True)  # active ones first, ascending
    rank = jnp.zeros((width,), jnp.int32).at[first].set(jnp.arange(width, dtype=jnp.int32))
    kept = rank < k
    return jnp.argsort(jnp.logical_not(kept), stable=True).astype(jnp.int32)


def extract(state: FSAState, objective, ending: FSAEnding) -> FSAOutput:
    """The survivors of a run (:class:`FSAOutput`), linear coefficients mapped back to raw feature
    space; ``ending.k`` and ``ending.n_iter`` may be traced (they shape nothing here)."""
    width = state.active.shape[0]
    order = keep_order(state.active, ending.k)
    first = jnp.arange(width, dtype=jnp.int32) < ending.k
    coef = jnp.take(state.coef, order, axis=0)
    support = jnp.take(ending.cols, order)
    run = jnp.arange(objective.shape[0], dtype=jnp.int32) < ending.n_iter
    finite = (
        jnp.isfinite(jnp.where(run, objective, 0)).all()
        & jnp.isfinite(jnp.where(first[:, None], coef, 0)).all()
        & jnp.isfinite(state.intercept)
    )
    status = jnp.where(finite, OK, NONFINITE).astype(jnp.int32)
    steps = jnp.zeros((0,), state.coef.dtype)
    if ending.basis_mean is None:
        raw = coef[:, 0] * jnp.take(ending.inv_scale, order)
        shift = jnp.sum(jnp.where(first, jnp.take(ending.mean, order) * raw, 0))
        return FSAOutput(support, raw, state.intercept - shift, objective, status, steps)
    return FSAOutput(
        support, coef, state.intercept, objective, status, steps,
        jnp.take(ending.basis_mean, order, axis=0), jnp.take(ending.x_min, support), jnp.take(ending.bin_width, support),
    )
