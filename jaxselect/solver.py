"""The one solver type of every family, and the one driver that runs any of them.

A :class:`Solver` is a NamedTuple of pure functions, built by a factory per method that closes over
the method's static options (selection rule, criterion, loss, schedule), as optax builds a
``GradientTransformation`` and blackjax a ``SamplingAlgorithm``::

    state  = solver.init(problem, *args)      # state.info: a "no step yet" record of the step's shapes
    state  = solver.step(problem, state)      # pure; the step's diagnostics in state.info
    done   = solver.done(problem, state)      # bool[] (optional): no step changes a done state
    result = solver.finish(problem, state, infos)   # infos: stacked state.info per step, or None

Static capabilities are fields of :class:`SolverTraits`, never attributes of the functions.

The driver (:func:`run`, and :func:`iterate` inside a traced program) is the single compiled loop:
``lax.scan`` of ``step`` over a fixed number of steps (a done state is carried unchanged), or a
``lax.while_loop`` until done; it stacks ``state.info`` when the solver's result is a path; with
``progress=True`` it runs the same steps in a few compiled chunks and updates a bar between them.
Without progress, :func:`run` compiles one XLA program for ``init`` + every step + ``finish``.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxselect._progress import check_progress, progress_bar, run_in_chunks
from jaxselect._static import canonical
from jaxselect.programs import jit

__all__ = ["Solver", "SolverTraits", "iterate", "run"]


class SolverTraits(NamedTuple):
    """Static capabilities of a :class:`Solver` (hashable; part of the compiled program's key).

    Attributes:
      name: the label of the solver's progress bar (``"cs_omp"``, ``"fsa"``, ...).
      stacks_info: the result is a path: the driver stacks ``state.info`` of every step along a
        leading axis and hands it to ``finish`` (else ``finish`` gets ``None``).
      until_done: the driver runs a ``lax.while_loop`` until ``done`` (at most ``n_steps`` steps)
        instead of a fixed-length scan; needs ``done`` and excludes ``stacks_info``.

    >>> import jaxselect as js
    >>> js.SolverTraits("halving", stacks_info=True)
    SolverTraits(name='halving', stacks_info=True, until_done=False)
    """

    name: str
    stacks_info: bool = False
    until_done: bool = False


class Solver(NamedTuple):
    """One solve as pure functions: ``init``, ``step``, ``finish`` and an optional ``done``.

    Attributes:
      init: ``init(problem, *args) -> state``; ``state.info`` holds a "no step yet" value with the
        shapes and dtypes of a step's diagnostics, so the loop's carry is stable.
      step: ``step(problem, state) -> state``; pure and jit-able, diagnostics in ``state.info``.
      finish: ``finish(problem, state, infos) -> result``; ``infos`` is the stacked per-step
        ``state.info`` (leading axis: the steps) when ``traits.stacks_info``, else ``None``.
      traits: the solver's static :class:`SolverTraits`.
      done: ``done(problem, state) -> bool[]`` or None (never done before ``n_steps``); the driver
        leaves a done state unchanged.

    A toy solver that halves a number until it is below a tolerance, run by the one driver:

    >>> from typing import NamedTuple
    >>> import jax.numpy as jnp, jaxselect as js
    >>> from jaxselect.solver import run
    >>> class State(NamedTuple):
    ...     x: jnp.ndarray
    ...     info: jnp.ndarray
    >>> def halving(tol):
    ...     return js.Solver(
    ...         init=lambda problem, x0: State(x0, x0),
    ...         step=lambda problem, s: State(s.x / 2, s.x / 2),
    ...         finish=lambda problem, s, infos: (s.x, infos),
    ...         traits=js.SolverTraits("halving", stacks_info=True),
    ...         done=lambda problem, s: s.x < tol,
    ...     )
    >>> x, path = run(halving(1.0), None, jnp.float32(10.0), n_steps=6)
    >>> float(x), path.tolist()
    (0.625, [5.0, 2.5, 1.25, 0.625, 0.625, 0.625])
    """

    init: Callable[..., Any]
    step: Callable[[Any, Any], Any]
    finish: Callable[[Any, Any, Any], Any]
    traits: SolverTraits
    done: Callable[[Any, Any], Any] | None = None


def _guarded_step(solver: Solver, problem, state):
    if solver.done is None:
        return solver.step(problem, state)
    return jax.lax.cond(solver.done(problem, state), lambda s: s, partial(solver.step, problem), state)


def iterate(solver: Solver, problem, state, n_steps: int):
    """``n_steps`` steps of ``solver`` from ``state`` inside a traced program.

    Returns ``(state, infos)``: ``infos`` stacks ``state.info`` of every step along a leading axis
    when ``solver.traits.stacks_info`` (a ``lax.scan``), else it is ``None``. With
    ``traits.until_done`` the loop is a ``lax.while_loop`` that stops at the first done state (at
    most ``n_steps`` steps); otherwise a done state is carried unchanged to the end.
    """
    traits = solver.traits
    if traits.until_done:
        if solver.done is None or traits.stacks_info:
            raise ValueError(f"{traits.name}: until_done needs a done function and no stacked infos")

        def cond(carry):
            i, st = carry
            return (i < n_steps) & ~solver.done(problem, st)

        def body(carry):
            i, st = carry
            return i + 1, solver.step(problem, st)

        _, state = jax.lax.while_loop(cond, body, (jnp.int32(0), state))
        return state, None

    def body(st, _):
        st = _guarded_step(solver, problem, st)
        return st, (st.info if traits.stacks_info else None)

    state, infos = jax.lax.scan(body, state, length=n_steps)
    return state, infos


@partial(jit, static_argnames=("solver", "n_steps"))
def _program(solver: Solver, problem, args, *, n_steps: int):
    state = solver.init(problem, *args)
    state, infos = iterate(solver, problem, state, n_steps)
    return solver.finish(problem, state, infos)


@partial(jit, static_argnames=("solver",))
def _start(solver: Solver, problem, args):
    return solver.init(problem, *args)


@partial(jit, static_argnames=("solver", "n_steps"))
def _advance(solver: Solver, problem, state, *, n_steps: int):
    return iterate(solver, problem, state, n_steps)


@partial(jit, static_argnames=("solver",))
def _finish(solver: Solver, problem, state, infos):
    return solver.finish(problem, state, infos)


def run(solver: Solver, problem, *args, n_steps: int, progress: bool = False):
    """Run ``solver`` on ``problem`` for ``n_steps`` steps and return ``finish``'s result.

    ``args`` (pytrees, traced) go to ``solver.init(problem, *args)``. Without ``progress`` this is
    one compiled program — init, every step and finish — cached on the solver (compared by
    structure, :func:`~jaxselect._static.canonical`: a factory called twice with the same options
    compiles once), the shapes of ``problem`` and ``args``, and ``n_steps``. With
    ``progress=True`` (tqdm) the steps run in about 20 compiled chunks of at most two lengths, a
    bar updated between them; the result is the same. Called inside a user's ``jit``, it traces
    into the user's program.
    """
    solver = canonical(solver)
    n_steps = int(n_steps)
    if not check_progress(progress) or solver.traits.until_done:
        return _program(solver, problem, tuple(args), n_steps=n_steps)
    state = _start(solver, problem, tuple(args))
    if solver.traits.stacks_info:
        state, infos = run_in_chunks(
            lambda st, n: _advance(solver, problem, st, n_steps=n), state, n_steps, solver.traits.name
        )
    else:
        bar = progress_bar(total=n_steps, desc=solver.traits.name)
        done = 0
        chunk = max(1, -(-n_steps // 20))
        try:
            while done < n_steps:
                length = min(chunk, n_steps - done)
                state, _ = _advance(solver, problem, state, n_steps=length)
                jax.block_until_ready(state)
                done += length
                bar.update(length)
        finally:
            bar.close()
        infos = None
    return _finish(solver, problem, state, infos)
