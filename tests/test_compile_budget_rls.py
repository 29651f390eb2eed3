"""One program per call: greedy RLS and the refits compile at most 2 XLA programs on a first call.

Issue 34's budget, measured as the issue does: numpy float32 X of 2000 x 200, XLA's default
flags, from empty caches (``jax.clear_caches()`` and the library's
:func:`~jaxselect.programs.clear_compiled`), counting backend compilations with
:func:`compile_count.count_compiles`. The two programs are the front door's summary pass and the
solve (problem, steps, finish and output shaping in one program); no eager ``jnp`` op runs between
them. A second identical call compiles nothing. Run in a subprocess so no other test's warm caches
can hide a program.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

BUDGET = 2

_SCRIPT = r"""
import json, sys
import jax
import numpy as np
sys.path.insert(0, TESTS)
from compile_count import count_compiles
import jaxselect as js
from jaxselect.programs import clear_compiled

rng = np.random.default_rng(0)
X = rng.normal(size=(2000, 200)).astype(np.float32)
y = (X[:, :5] @ rng.normal(size=5)).astype(np.float32)
Y = np.stack([y, X[:, 7] - y], axis=1)
labels = y > 0
support = np.zeros(200, bool)
support[:5] = True
calls = {
    "greedy_rls": lambda: js.greedy_rls(X, y, 10),
    "greedy_rls(2 targets, bias, weights)": lambda: js.greedy_rls(X, Y, 10, l2=0.01, bias=1.0,
                                                                  sample_weight=np.ones(2000)),
    "ridge_refit": lambda: js.ridge_refit(X, y, support),
    "rls_refit": lambda: js.rls_refit(X, Y, np.arange(5)),
    "glm_refit": lambda: js.glm_refit(X, labels, support),
    "glm_refit(softmax)": lambda: js.glm_refit(X, (y > 0).astype(int) + (y > 1), support, loss="softmax"),
}
counts = {}
for name, call in calls.items():
    clear_compiled()
    jax.clear_caches()
    runs = []
    for _ in range(2):
        with count_compiles() as c:
            jax.block_until_ready(call())
        runs.append(c[0])
    counts[name] = runs
print(json.dumps(counts))
"""


@pytest.fixture(scope="module")
def counts():
    tests = str(pathlib.Path(__file__).resolve().parent)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # XLA's default flags
    env.pop("JAX_ENABLE_X64", None)
    out = subprocess.run(
        [sys.executable, "-c", f"TESTS = {tests!r}\n" + _SCRIPT],
        capture_output=True,
        text=True,
        timeout=540,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "name",
    [
        "greedy_rls",
        "greedy_rls(2 targets, bias, weights)",
        "ridge_refit",
        "rls_refit",
        "glm_refit",
        "glm_refit(softmax)",
    ],
)
def test_first_call_compiles_at_most_two_programs_and_a_second_none(counts, name):
    first, second = counts[name]
    assert first <= BUDGET, f"{name}: the first call compiled {first} programs (budget {BUDGET})"
    assert second == 0, f"{name}: the second identical call compiled {second} programs"
