"""The library's bounded program cache (jaxselect.programs): results equal jax.jit's, one entry per
input signature, least recently used dropped and freed, memory mappings bounded over many shapes,
the persistent-cache switch."""

import gc

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxselect as js
from jaxselect import programs
from jaxselect.solver import run
from compile_count import count_compiles
from test_solver import gradient_descent


def _maps() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


@pytest.fixture
def small_cache():
    js.clear_compiled()
    previous = js.set_max_programs(4)
    yield
    js.set_max_programs(previous)
    js.clear_compiled()


@programs.jit
def _toy(x, y):
    return jnp.tanh(x @ x.T).sum() + y


def test_results_equal_jax_jit_and_a_signature_compiles_once(small_cache):
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    np.testing.assert_allclose(_toy(x, 1.0), jax.jit(_toy._fun)(x, 1.0), rtol=1e-6)
    with count_compiles() as again:
        _toy(x + 1, 2.0)  # same signature: no compile
    assert again[0] == 0 and _toy._cache_size() == 1


def test_static_arguments_are_part_of_the_signature(small_cache):
    from functools import partial

    @partial(programs.jit, static_argnames=("n",))
    def powers(x, *, n):
        return sum(x**i for i in range(n))

    x = np.ones(3, np.float32)
    assert float(np.asarray(powers(x, n=2))[0]) == 2.0 and float(np.asarray(powers(x, n=3))[0]) == 3.0
    assert powers._cache_size() == 2


def test_static_arguments_passed_by_position_are_separate_entries(small_cache):
    """A static argument given by position (static_argnames or static_argnums) keys its own cache
    entry, so the bound counts each compiled program once."""
    from functools import partial

    @partial(programs.jit, static_argnames=("n",))
    def by_name(x, n):
        return x * n

    @partial(programs.jit, static_argnums=1)
    def by_number(x, n):
        return x + n

    x = np.ones(3, np.float32)
    previous = js.set_max_programs(16)
    try:
        js.clear_compiled()
        assert float(by_name(x, 2)[0]) == 2.0 and float(by_name(x, 3)[0]) == 3.0
        assert float(by_number(x, 2)[0]) == 3.0 and float(by_number(x, 5)[0]) == 6.0
        assert len(programs._CACHE) == 4 and by_name._cache_size() == 2 and by_number._cache_size() == 2
        by_name(x, 3), by_number(x, 5)  # the same signatures again: no new entry
        assert len(programs._CACHE) == 4
    finally:
        js.set_max_programs(previous)


def test_least_recently_used_is_dropped(small_cache):
    xs = [np.ones((5 + i, 3), np.float32) for i in range(6)]
    for x in xs[:4]:
        _toy(x, 0.0)
    _toy(xs[0], 0.0)  # refreshed: now the most recent
    _toy(xs[4], 0.0)  # evicts xs[1]'s program
    assert len(programs._CACHE) == 4
    with count_compiles() as hit:
        _toy(xs[0], 0.0)
    assert hit[0] == 0
    with count_compiles() as miss:
        _toy(xs[1], 0.0)
    assert miss[0] == 1


def test_inside_a_traced_program_nothing_is_cached(small_cache):
    out = jax.jit(lambda x: _toy(x, 1.0) * 2)(np.ones((3, 2), np.float32))
    assert np.isfinite(out) and len(programs._CACHE) == 0
    g = jax.grad(lambda x: _toy(x, 0.0))(np.ones((3, 2), np.float32))
    assert g.shape == (3, 2)


def test_many_shapes_keep_memory_mappings_bounded(small_cache):
    """60 solves on new shapes through the driver: the mappings stop growing once the cache is full."""
    rng = np.random.default_rng(0)
    counts = []
    for i in range(60):
        n = 20 + i
        problem = (rng.normal(size=(n, 5)).astype(np.float32), np.ones(n, np.float32))
        run(gradient_descent(0.01), problem, jnp.zeros(5), n_steps=3)
        if i in (15, 59):
            gc.collect()
            counts.append(_maps())
    assert len(programs._CACHE) <= 4
    assert counts[1] <= counts[0] + 150, counts


@pytest.mark.skipif(programs._process_maps() is None, reason="needs /proc/self/maps (Linux)")
def test_the_maps_bound_evicts_before_the_count_bound():
    """Each new entry is charged the mappings its compile added; past the maps bound the least
    recently used entries go (the newest stays), though the count bound is far away."""
    js.clear_compiled()
    previous = js.set_max_programs(64), js.set_max_program_maps(10**9)
    try:
        for i in range(3):
            _toy(np.ones((7 + i, 3), np.float32), 0.0)
        charged = dict(programs._MAPS)
        assert len(charged) == 3 and all(v >= 0 for v in charged.values())
        assert sum(charged.values()) > 0, "compiling three programs added no mapping"
        newest = list(programs._CACHE)[-1]
        js.set_max_program_maps(1)  # any charge exceeds it: only the newest entry is kept
        assert list(programs._CACHE) == [newest] and set(programs._MAPS) <= {newest}
        with count_compiles() as miss:
            _toy(np.ones((7, 3), np.float32), 0.0)  # evicted: compiles again, and now it is the newest
        assert miss[0] == 1 and len(programs._CACHE) == 1
    finally:
        js.set_max_programs(previous[0])
        js.set_max_program_maps(previous[1])
        js.clear_compiled()


def test_clear_compiled_and_bounds_are_validated(small_cache):
    _toy(np.ones((2, 2), np.float32), 0.0)
    assert js.clear_compiled() >= 1 and len(programs._CACHE) == 0 and programs._MAPS == {}
    with pytest.raises(ValueError, match="integer >= 1"):
        js.set_max_programs(0)
    with pytest.raises(ValueError, match="integer >= 1"):
        js.set_max_program_maps(0)


def test_enable_persistent_cache_sets_the_directory(tmp_path):
    saved = {k: jax.config.values[k] for k in (
        "jax_compilation_cache_dir",
        "jax_persistent_cache_min_compile_time_secs",
        "jax_persistent_cache_min_entry_size_bytes",
    )}
    try:
        where = js.enable_persistent_cache(tmp_path / "xla")
        assert where == str(tmp_path / "xla") and jax.config.values["jax_compilation_cache_dir"] == where
        assert jax.config.values["jax_persistent_cache_min_compile_time_secs"] == 0.0
    finally:
        js.disable_persistent_cache(saved["jax_compilation_cache_dir"])
        for k, v in saved.items():
            jax.config.update(k, v)


def test_typed_prng_keys_are_a_signature_like_any_array(small_cache):
    @programs.jit
    def draw(key):
        return jax.random.normal(key, (3,))

    a = draw(jax.random.key(0))
    b = draw(jax.random.key(1))
    assert a.shape == (3,) and not np.allclose(a, b) and draw._cache_size() == 1


def test_small_inputs_compile_with_the_cheap_cpu_options(monkeypatch):
    """Small inputs on the CPU: the legacy emitters (about half the compile time), and on the
    smallest LLVM's optimisation off too; large inputs and ``JAXSELECT_XLA_DEFAULTS=1``: XLA's own
    defaults; an XLA that rejects the option: its defaults from then on, the call still answered."""
    from jaxselect import programs

    if jax.default_backend() != "cpu":
        pytest.skip("CPU options")
    quick = programs.quick_compile_max_bytes()
    tiny = programs._compile_options({}, 1000)
    assert tiny["compiler_options"] == {**programs.CPU_COMPILER_OPTIONS, **programs.QUICK_COMPILE_OPTIONS}
    small = programs._compile_options({}, quick + 1)
    assert small["compiler_options"] == programs.CPU_COMPILER_OPTIONS
    assert "compiler_options" not in programs._compile_options({}, programs.CHEAP_COMPILE_MAX_BYTES + 1)
    monkeypatch.setenv("JAXSELECT_QUICK_COMPILE_MAX_BYTES", "0")
    assert programs._compile_options({}, 1000)["compiler_options"] == programs.CPU_COMPILER_OPTIONS
    monkeypatch.delenv("JAXSELECT_QUICK_COMPILE_MAX_BYTES")
    assert programs._compile_options({"compiler_options": {"a": 1}}, 10) == {"compiler_options": {"a": 1}}
    monkeypatch.setenv("JAXSELECT_XLA_DEFAULTS", "1")
    assert programs._compile_options({}, 1000) == {}
    monkeypatch.delenv("JAXSELECT_XLA_DEFAULTS")

    monkeypatch.setattr(programs, "CPU_COMPILER_OPTIONS", {"xla_jaxselect_no_such_option": True})
    monkeypatch.setattr(programs, "QUICK_COMPILE_OPTIONS", {})
    monkeypatch.setattr(programs, "_CPU_OPTIONS_USABLE", [True])
    f = programs.jit(lambda x: 2 * x + 1)
    np.testing.assert_array_equal(np.asarray(f(np.arange(3.0, dtype=np.float32))), [1.0, 3.0, 5.0])
    assert programs._CPU_OPTIONS_USABLE == [False] and programs.cpu_compiler_options() == {}
