"""Compile budget of FSA's public calls: a first in-memory call compiles at most two XLA programs
(the front door's summary and the one solve: schedule, polish and survivors), and a second
identical call compiles none (issue 34, "one program per call").

Counted from ``jax.clear_caches()`` (and the library's program cache cleared) with
tests/compile_count.py, on numpy float32 X of 2 000 x 200, as the issue measures.
"""

import numpy as np
import jax
import pytest

import jaxselect as js
from jaxselect.programs import clear_compiled
from jaxselect.sklearn import FSAClassifier
from compile_count import count_compiles

#: programs a first in-memory call may compile: the front door's summary + the solve
BUDGET = 2


def _data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 200)).astype(np.float32)
    y = (X[:, 3] - 2 * X[:, 7] + 0.1 * rng.standard_normal(2000)).astype(np.float32)
    return X, y, (y > 0).astype(np.int32)


def _calls():
    X, y, labels = _data()
    return {
        "fsa": lambda: js.fsa(X, y, 20),
        "fsa_logistic": lambda: js.fsa(X, labels, 20, loss="logistic"),
        "FSAClassifier.fit": lambda: FSAClassifier().fit(X, labels).coef_,
    }


@pytest.mark.parametrize("name", ["fsa", "fsa_logistic", "FSAClassifier.fit"])
def test_first_call_compiles_at_most_two_programs_and_a_second_none(name):
    call = _calls()[name]
    jax.clear_caches()
    clear_compiled()
    with count_compiles() as first:
        jax.block_until_ready(call())
    assert first[0] <= BUDGET, f"{name}: a first call compiled {first[0]} programs (budget {BUDGET})"
    with count_compiles() as second:
        jax.block_until_ready(call())
    assert second[0] == 0, f"{name}: a second identical call compiled {second[0]} programs"


def test_a_new_k_in_its_bucket_and_new_hyperparameters_compile_nothing():
    X, y, _ = _data()
    js.fsa(X, y, 20)
    assert js.anneal.k_bucket(19, 200) == js.anneal.k_bucket(20, 200)
    with count_compiles() as again:
        js.fsa(X, y, 19, mu=100.0, l2=0.1, n_iter=400)
    assert again[0] == 0
