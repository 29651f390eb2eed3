"""The library's programs stored as JAX exports beside the persistent cache (jaxselect._exported):
a new process with a warm directory traces none of the library's code and answers exactly as a
process without caches; keys change with everything that shapes a program and are refused for what
cannot be described stably; programs JAX cannot export, and unreadable files, take JAX's own path."""

import json
import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jaxselect as js
from jaxselect import _exported, programs
from jaxselect.anneal import gradient_descent
from jaxselect.losses import squared_loss


def _answers() -> dict:
    """FSA, OMP and ``FSAClassifier`` on one small problem (a constant column included)."""
    from jaxselect.sklearn import FSAClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(301, 37)).astype(np.float32)
    y = (X[:, :3] @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=301)).astype(np.float32)
    X[:, 5] = 1.0
    fsa = js.fsa(X, y, 4)
    omp = js.cs_omp(js.prepare(X, y), k=4)
    clf = FSAClassifier(k=3).fit(X, (y > 0).astype(int))
    policy = js.dwsm_fit(jax.random.key(0), X[:120, :8], (y[:120] > 0).astype(int), n_iter=2)
    return {
        "fsa": np.asarray(fsa.coef).tolist(),
        "fsa_support": np.asarray(fsa.support).tolist(),
        "omp": np.asarray(omp.coef).tolist(),
        "omp_order": np.asarray(omp.order).tolist(),
        "clf": np.asarray(clf.predict_proba(X)[:20]).tolist(),
        "dwsm": np.asarray(js.dwsm_evaluate(policy, X[:120, :8], (y[:120] > 0).astype(int)).acquired).tolist(),
    }


_SCRIPT = r"""
import json, sys
import jax
import jaxselect as js
sys.path.insert(0, TESTS)
from test_exported import _answers
js.enable_persistent_cache(CACHE)
traced = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, d, **kw: traced.append(kw.get("fun_name"))
    if event == "/jax/core/compile/jaxpr_trace_duration" else None)
print(json.dumps(dict(_answers(), traced=traced)))
"""


def _child(cache: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_ENABLE_X64")}
    tests = str(pathlib.Path(__file__).resolve().parent)
    out = subprocess.run(
        [sys.executable, "-c", f"CACHE = {cache!r}\nTESTS = {tests!r}\n" + _SCRIPT],
        capture_output=True,
        text=True,
        timeout=540,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_warm_directory_traces_none_of_the_library_and_answers_the_same(tmp_path):
    plain = _answers()  # this process: no persistent cache
    cold = _child(str(tmp_path / "cache"))
    warm = _child(str(tmp_path / "cache"))
    stored = list(pathlib.Path(tmp_path, "cache", "jaxselect-programs").rglob("*.jaxexport"))
    assert len(stored) >= 4  # fsa's summary and solve, OMP's program, DWSM's fit, at least
    # the cold process traced each program for its export ("flat") and the thin program around it
    # ("call"); the warm one only the thin programs (and eager operations outside the library's
    # programs, which are not the store's)
    assert "flat" in cold["traced"] and "flat" not in warm["traced"], warm["traced"]
    assert warm["traced"].count("call") == cold["traced"].count("call") >= 4
    for name in ("fsa", "fsa_support", "omp", "omp_order", "clf", "dwsm"):
        # the cache compiles with LLVM's optimisation on: float32 rounding differs from the plain run
        np.testing.assert_allclose(cold[name], plain[name], rtol=1e-4, atol=1e-5, err_msg=name)
        np.testing.assert_array_equal(warm[name], cold[name], err_msg=name)


def _key(store, fun, tree_of, static=(), options=None):
    leaves, tree = jax.tree.flatten(tree_of)
    return store.key(fun, tree, tuple((np.shape(x), np.result_type(x)) for x in leaves), static, options or {})


def test_keys_follow_what_shapes_a_program(tmp_path):
    from jaxselect.anneal.run import solve

    store = _exported.ExportStore(str(tmp_path))
    x = np.ones((3, 2), np.float32)
    base = _key(store, solve, (x,), (("plan", (1, 2)),))
    assert base is not None and base == _key(store, solve, (x,), (("plan", (1, 2)),))
    assert base != _key(store, solve, (x,), (("plan", (1, 3)),))  # a static value
    assert base != _key(store, solve, (np.ones((3, 3), np.float32),), (("plan", (1, 2)),))  # a shape
    assert base != _key(store, solve, ((x,),), (("plan", (1, 2)),))  # the tree
    assert base != _key(store, solve, (x,), (("plan", (1, 2)),), {"compiler_options": {"a": 1}})
    assert base != _key(store, js.fsa, (x,), (("plan", (1, 2)),))  # the function
    # the library's and optax's functions and closures are described by name and contents
    assert _exported.describe(squared_loss) == _exported.describe(squared_loss)
    assert _exported.describe(gradient_descent()) == _exported.describe(gradient_descent())
    assert _exported.describe(optax.sgd(0.1)) == _exported.describe(optax.sgd(0.1))
    assert _exported.describe(optax.sgd(0.1)) != _exported.describe(optax.sgd(0.2))
    assert _exported.describe(np.arange(3)) != _exported.describe(np.arange(1, 4))


@pytest.mark.parametrize(
    "unstable",
    [lambda s, t: s - t, object(), jnp.ones(2), optax.sgd(lambda step: 0.1)],
    ids=["user lambda", "plain object", "captured array", "optax with a user schedule"],
)
def test_what_cannot_be_described_stably_has_no_key(tmp_path, unstable):
    store = _exported.ExportStore(str(tmp_path))
    assert _key(store, js.fsa, (np.ones(2),), (("loss", unstable),)) is None


@pytest.fixture
def store_on(tmp_path, monkeypatch):
    monkeypatch.setattr(programs, "_STORE", [_exported.ExportStore(str(tmp_path))])
    monkeypatch.setattr(_exported, "_KNOWN_MODULES", _exported._KNOWN_MODULES + (__name__,))
    js.clear_compiled()
    yield tmp_path
    js.clear_compiled()


@programs.jit
def _doubled_with_a_callback(x):
    jax.debug.callback(lambda v: None, x)
    return 2 * x


@programs.jit
def _squares(x, scale):
    return scale * x * x


@programs.jit
def _noisy(key, x):
    return x + jax.random.normal(key, x.shape)


def test_typed_prng_keys_go_through_an_export_as_their_data(store_on):
    x = np.zeros(5, np.float32)
    expected = np.asarray(jax.jit(_noisy._fun)(jax.random.key(3), x))
    np.testing.assert_allclose(_noisy(jax.random.key(3), x), expected, rtol=1e-6)
    (path,) = pathlib.Path(store_on).rglob("*.jaxexport")
    assert path.read_bytes() != _exported._SKIP
    js.clear_compiled()
    np.testing.assert_allclose(_noisy(jax.random.key(3), x), expected, rtol=1e-6)  # loaded
    assert not np.allclose(_noisy(jax.random.key(4), x), expected)


def test_programs_that_do_not_export_run_the_usual_way_and_are_remembered(store_on):
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(_doubled_with_a_callback(x), 2 * x)
    marks = list(pathlib.Path(store_on).rglob("*.jaxexport"))
    assert len(marks) == 1 and marks[0].read_bytes() == _exported._SKIP
    js.clear_compiled()
    np.testing.assert_array_equal(_doubled_with_a_callback(x), 2 * x)


def test_an_unreadable_file_is_replaced_and_a_stored_export_is_used(store_on):
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(_squares(x, 0.5), 0.5 * x * x)
    (path,) = pathlib.Path(store_on).rglob("*.jaxexport")
    assert isinstance(programs._CACHE[next(iter(programs._CACHE))], _exported.ExportedProgram)
    path.write_bytes(b"garbage")
    js.clear_compiled()
    np.testing.assert_allclose(_squares(x, 0.25), 0.25 * x * x)  # exported again
    assert path.read_bytes() != b"garbage"
    js.clear_compiled()
    np.testing.assert_allclose(_squares(x, 2.0), 2 * x * x)  # loaded from the file
    assert _squares._cache_size() == 1


def test_disable_persistent_cache_stops_the_store(tmp_path):
    saved = jax.config.values["jax_compilation_cache_dir"]
    try:
        js.enable_persistent_cache(tmp_path)
        assert isinstance(programs._STORE[0], _exported.ExportStore)
        js.enable_persistent_cache(tmp_path, exports=False)
        assert programs._STORE[0] is None
        js.enable_persistent_cache(tmp_path)
    finally:
        js.disable_persistent_cache(saved)
    assert programs._STORE[0] is None and jax.config.values["jax_compilation_cache_dir"] == saved


def test_with_the_persistent_cache_small_inputs_compile_optimised(monkeypatch):
    """A compile paid once per machine: LLVM's optimisation stays on for small inputs too."""
    if jax.default_backend() != "cpu":
        pytest.skip("CPU options")
    quick = programs._compile_options({}, 1000).get("compiler_options", {})
    monkeypatch.setattr(programs, "_PERSISTENT", [True])
    cached = programs._compile_options({}, 1000).get("compiler_options", {})
    assert cached == programs.cpu_compiler_options()
    assert not set(programs.QUICK_COMPILE_OPTIONS) & set(cached) and len(quick) >= len(cached)
