"""The one solver type and the one driver (jaxselect.solver), on a toy solver checked against a
plain Python loop: fixed steps with stacked infos, a done mask, until-done, progress chunks, the
compiled-program count, and a factory called twice compiling once."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxselect.solver import Solver, SolverTraits, iterate, run
from compile_count import count_compiles


class GDState(NamedTuple):
    w: jax.Array
    step: jax.Array
    info: jax.Array  # the step's objective


def gradient_descent(lr: float, tol: float = 0.0, *, until_done: bool = False, stacks_info: bool = True) -> Solver:
    """Least squares ½‖Aw − b‖² by gradient descent: a factory closing over static options."""

    def objective(problem, w):
        A, b = problem
        r = A @ w - b
        return 0.5 * jnp.dot(r, r)

    def init(problem, w0):
        return GDState(w0, jnp.int32(0), objective(problem, w0))

    def step(problem, state):
        A, b = problem
        w = state.w - lr * ((A @ state.w - b) @ A)
        return GDState(w, state.step + 1, objective(problem, w))

    def done(problem, state):
        return state.info < tol

    def finish(problem, state, infos):
        return state.w, state.step, infos

    traits = SolverTraits("gd", stacks_info=stacks_info, until_done=until_done)
    return Solver(init, step, finish, traits, done if tol > 0 else None)


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(30, 5)).astype(np.float32)
    b = rng.normal(size=30).astype(np.float32)
    return jnp.asarray(A), jnp.asarray(b)


def _reference(problem, lr, n, tol=0.0):
    A, b = (np.asarray(a, np.float64) for a in problem)
    w = np.zeros(A.shape[1])
    objs = []
    steps = 0
    for _ in range(n):
        if tol > 0 and 0.5 * np.sum((A @ w - b) ** 2) < tol:
            objs.append(objs[-1])
            continue
        w = w - lr * ((A @ w - b) @ A)
        steps += 1
        objs.append(0.5 * np.sum((A @ w - b) ** 2))
    return w, steps, np.array(objs)


def test_fixed_steps_match_a_python_loop():
    problem = _problem()
    w, steps, infos = run(gradient_descent(0.01), problem, jnp.zeros(5), n_steps=25)
    w_ref, steps_ref, objs = _reference(problem, 0.01, 25)
    np.testing.assert_allclose(w, w_ref, rtol=1e-4, atol=1e-5)
    assert int(steps) == steps_ref == 25
    np.testing.assert_allclose(infos, objs, rtol=1e-4)


def test_a_done_state_is_carried_unchanged():
    problem = _problem(1)
    _, _, objs = _reference(problem, 0.01, 200)
    tol = float(objs[40])  # done after 42 steps
    w, steps, infos = run(gradient_descent(0.01, tol), problem, jnp.zeros(5), n_steps=200)
    w_ref, steps_ref, objs_ref = _reference(problem, 0.01, 200, tol)
    assert int(steps) == steps_ref < 200
    np.testing.assert_allclose(w, w_ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(infos, objs_ref, rtol=1e-4)


def test_until_done_stops_at_the_first_done_state():
    problem = _problem(2)
    _, _, objs = _reference(problem, 0.01, 300)
    tol = float(objs[30])
    w, steps, infos = run(
        gradient_descent(0.01, tol, until_done=True, stacks_info=False), problem, jnp.zeros(5), n_steps=300
    )
    w_ref, steps_ref, _ = _reference(problem, 0.01, 300, tol)
    assert infos is None and int(steps) == steps_ref
    np.testing.assert_allclose(w, w_ref, rtol=1e-4, atol=1e-5)


def test_until_done_needs_done():
    with pytest.raises(ValueError, match="until_done"):
        run(gradient_descent(0.01, until_done=True, stacks_info=False), _problem(), jnp.zeros(5), n_steps=3)


@pytest.mark.parametrize("stacks_info", [True, False])
def test_progress_chunks_give_the_same_result(stacks_info):
    pytest.importorskip("tqdm")
    problem = _problem(3)
    plain = run(gradient_descent(0.01, stacks_info=stacks_info), problem, jnp.zeros(5), n_steps=45)
    chunked = run(gradient_descent(0.01, stacks_info=stacks_info), problem, jnp.zeros(5), n_steps=45, progress=True)
    np.testing.assert_allclose(chunked[0], plain[0], rtol=1e-6)
    assert int(chunked[1]) == 45
    if stacks_info:
        assert chunked[2].shape == (45,)
        np.testing.assert_allclose(chunked[2], plain[2], rtol=1e-6)


def test_one_program_per_call_and_a_new_factory_compiles_nothing():
    problem = _problem(4)
    with count_compiles() as first:
        jax.block_until_ready(run(gradient_descent(0.02), problem, jnp.zeros(5), n_steps=7))
    assert first[0] == 1
    with count_compiles() as again:  # the factory called again: equal solver, no compile
        jax.block_until_ready(run(gradient_descent(0.02), problem, jnp.zeros(5), n_steps=7))
    assert again[0] == 0


def test_iterate_traces_into_a_users_program():
    problem = _problem(5)
    solver = gradient_descent(0.01)

    @jax.jit
    def user(problem, w0):
        state = solver.init(problem, w0)
        state, infos = iterate(solver, problem, state, 10)
        return state.w, infos

    w, infos = user(problem, jnp.zeros(5))
    w_run, _, infos_run = run(solver, problem, jnp.zeros(5), n_steps=10)
    np.testing.assert_allclose(w, w_run, rtol=1e-6)
    np.testing.assert_allclose(infos, infos_run, rtol=1e-6)
