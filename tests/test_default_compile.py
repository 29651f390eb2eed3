"""Every solver family gives the same numbers on each compile path: the library's default, XLA's own
defaults, and XLA's cheapest settings.

On the CPU the library compiles small inputs with XLA:CPU's legacy emitters
(``jaxselect.programs.CPU_COMPILER_OPTIONS``: about half the compile time), and the smallest
(``programs.QUICK_COMPILE_MAX_BYTES``) with LLVM's optimisation off as well
(``programs.QUICK_COMPILE_OPTIONS``); ``JAXSELECT_XLA_DEFAULTS=1`` restores XLA's own defaults
(the fusion emitters, full optimisation), and ``jax_disable_most_optimizations`` is JAX's switch
for the cheapest settings. Here each family runs on tiny data on each path, from empty caches (so
the programs really are compiled here), and the results must agree — so the references the suite
checks on the library's path hold on the others.
"""

import contextlib
import os

import jax
import numpy as np
import pytest
from compile_count import count_compiles

import jaxselect as js
from jaxselect import programs

CHEAP = {"jax_disable_most_optimizations": True, "jax_exec_time_optimization_effort": -1.0}

_rng = np.random.default_rng(7)
N, D = 40, 8
X = _rng.normal(size=(N, D)).astype(np.float32)
X[:, 3] += 0.5 * X[:, 2]
Y2 = np.stack([X[:, 1] - 0.8 * X[:, 4], X[:, 6] + 0.3 * X[:, 1]], axis=1) + 0.1 * _rng.normal(size=(N, 2))
Y2 = Y2.astype(np.float32)
y = Y2[:, 0]
labels = (X[:, 1] - 0.7 * X[:, 5] + 0.3 * _rng.normal(size=N) > 0).astype(np.int32)
IDS = np.array([0, 0, 1, 2, 2, 3, 4, 5])
COSTS = np.array([1.0, 2.0, 0.5, 1.0, 1.5, 1.0], np.float32)


@contextlib.contextmanager
def _cheapest():
    saved = {name: jax.config.values[name] for name in CHEAP}
    for name, value in CHEAP.items():
        jax.config.update(name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            jax.config.update(name, value)


@contextlib.contextmanager
def _xla_defaults():
    saved = os.environ.get("JAXSELECT_XLA_DEFAULTS")
    os.environ["JAXSELECT_XLA_DEFAULTS"] = "1"
    try:
        yield
    finally:
        if saved is None:
            del os.environ["JAXSELECT_XLA_DEFAULTS"]
        else:
            os.environ["JAXSELECT_XLA_DEFAULTS"] = saved


def _leaves(result):
    return [np.asarray(leaf) for leaf in jax.tree.leaves(result)]


def _each_path(fn):
    """``fn()`` compiled on the library's default path, on XLA's defaults and on XLA's cheapest
    settings, each from empty caches."""
    assert all(jax.config.values[name] != value for name, value in CHEAP.items()), "not the default settings"
    assert programs.cpu_compiler_options() == programs.CPU_COMPILER_OPTIONS, "not the library's default path"
    results = []
    for context in (contextlib.nullcontext, _xla_defaults, _cheapest):
        js.clear_compiled()
        jax.clear_caches()
        with context(), count_compiles() as compiles:
            results.append(_leaves(fn()))
        assert compiles[0] > 0, f"nothing was compiled on the {context.__name__} path"
    jax.clear_caches()
    return results


def _assert_same(default, cheap, rtol=2e-4, atol=2e-5):
    assert len(default) == len(cheap)
    for i, (a, b) in enumerate(zip(default, cheap)):
        assert a.shape == b.shape and a.dtype == b.dtype, f"leaf {i}"
        if np.issubdtype(a.dtype, np.inexact):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"leaf {i}")
        else:  # orders, selections, statuses, labels, counts: exactly equal
            np.testing.assert_array_equal(a, b, err_msg=f"leaf {i}")


def _sequencing():
    """One problem (one ``prepare``), every solver that takes it."""
    problem = js.prepare(X, Y2, js.Groups.from_ids(IDS, COSTS), l2=1e-3)
    return js.cs_omp(problem), js.cs_fr(problem), js.doubling(problem), js.group_lasso_path(problem, n_lambdas=6)


def _refits():
    return (
        js.ridge_refit(X, Y2, np.arange(D) % 2 == 0, l2=0.01),
        js.glm_refit(X, labels, np.arange(D) < 4, l2=0.01),
        js.rls_refit(X, Y2, np.array([1, 4, 6]), l2=0.01, bias=1.0),
    )


SOLVERS = {
    "prepare-cs_omp-cs_fr-doubling-group_lasso_path": _sequencing,
    "glm_omp": lambda: js.glm_omp(X, labels, k=3),
    "greedy_rls": lambda: js.greedy_rls(X, Y2, 4, l2=0.01, bias=1.0),
    "fsa": lambda: js.fsa(X, y, 3, n_iter=60),
    "ridge_refit-glm_refit-rls_refit": _refits,
    "cross_validate_path": lambda: js.cross_validate_path(X, y, folds=3, k=4),
    "dwsm_fit": lambda: js.dwsm_fit(
        jax.random.key(0), X[:24, :5], labels[:24], lam=0.05, n_iter=2, states_per_example=2, rollout_batch=8
    ),
}


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_every_compile_path_gives_the_same_numbers(name):
    library, xla_defaults, cheap = _each_path(SOLVERS[name])
    _assert_same(library, xla_defaults)
    _assert_same(library, cheap)


def test_the_paths_are_restored_and_change_nothing_else():
    before = dict(jax.config.values)
    with _cheapest():
        assert all(jax.config.values[name] == value for name, value in CHEAP.items())
    with _xla_defaults():
        assert programs.cpu_compiler_options() == {}
    assert dict(jax.config.values) == before
    assert programs.cpu_compiler_options() == programs.CPU_COMPILER_OPTIONS
