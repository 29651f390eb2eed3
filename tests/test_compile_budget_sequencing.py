"""One program per call (issue 34): each public call of the sequencing family compiles at most 2 XLA
programs on its first call — the front door's summary or moments and the solve (its finish
included) — with no eager ``jnp`` work between them, and a second identical call compiles nothing.

Counted with jax.monitoring's backend-compile events (tests/compile_count.py) from
``jax.clear_caches()``. The count does not depend on the data's size, so the data are small.
"""

import jax
import numpy as np
import pytest

import jaxselect as js
from compile_count import count_compiles

BUDGET = 2  # the front door's summary/moments + the one compiled solve


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 8)).astype(np.float32)
    y = (X[:, :3] @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=60)).astype(np.float32)
    return X, y, (y > 0).astype(np.int32)


def _calls():
    X, y, labels = _data()
    problem = js.prepare(X, y)  # built before the caches are cleared: its own count is below
    lazy = js.prepare(X, y, gram=False)
    jax.block_until_ready((problem, lazy))
    glm_problem = js.glm_prepare(X, labels)
    return {
        "prepare": lambda: js.prepare(X, y),
        "prepare(gram=False)": lambda: js.prepare(X, y, gram=False),
        "cs_omp": lambda: js.cs_omp(problem),
        "cs_omp(k=3, criterion='single')": lambda: js.cs_omp(problem, 3, criterion="single"),
        "cs_fr": lambda: js.cs_fr(problem),
        "doubling": lambda: js.doubling(problem, c_min=1.0),
        "fixed_order_path": lambda: js.fixed_order_path(problem, [3, 1, -1]),
        "cs_omp(gram=False problem)": lambda: js.cs_omp(lazy, 4),
        "group_lasso_path": lambda: js.group_lasso_path(problem, n_lambdas=8),
        "group_lasso": lambda: js.group_lasso(problem, [0.5, 0.1, 0.01]),
        "glm_omp": lambda: js.glm_omp(X, labels, k=3),
        "glm_omp(softmax)": lambda: js.glm_omp(X, (y > 0).astype(int) + (y > 1), k=2, loss="softmax"),
        "glm_prepare": lambda: js.glm_prepare(X, labels),
        "glm_omp_run": lambda: js.glm_omp_run(glm_problem, 3),
    }


CALLS = _calls()


@pytest.mark.parametrize("name", list(CALLS))
def test_first_call_compiles_at_most_two_programs_and_a_second_none(name):
    call = CALLS[name]
    jax.clear_caches()
    js.clear_compiled()
    with count_compiles() as first:
        jax.block_until_ready(call())
    with count_compiles() as second:
        jax.block_until_ready(call())
    assert first[0] <= BUDGET, f"{name}: {first[0]} programs compiled on the first call (budget {BUDGET})"
    assert first[0] >= 1  # the count sees the solve itself
    assert second[0] == 0, f"{name}: a second identical call compiled {second[0]} programs"
