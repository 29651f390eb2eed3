"""jaxselect._compat: the only module that uses JAX beyond its stable public API.

One test per code path. Both run in CI's two environments (the floor JAX of ``pyproject.toml`` and
the newest release): the private path of :func:`no_mesh` is the one every supported JAX takes, the
public fallback is forced here so that it keeps working for a JAX that moves the private name.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from compile_count import count_compiles
from jax.sharding import AxisType

import jaxselect as js
from jaxselect import _compat


def _explicit_mesh():
    return jax.make_mesh((1,), ("data",), axis_types=(AxisType.Explicit,))


def test_is_tracer_on_concrete_and_traced_values():
    seen = []

    def f(x):
        seen.append(_compat.is_tracer(x))
        return x * 2

    x = jnp.ones(3)
    assert not _compat.is_tracer(x) and not _compat.is_tracer(np.ones(3)) and not _compat.is_tracer(1.0)
    jax.jit(f)(x)
    jax.vmap(f)(x)
    jax.grad(lambda v: f(v).sum())(x)
    assert seen == [True, True, True]
    assert _compat.Tracer is jax.core.Tracer


def test_every_supported_jax_takes_the_private_mesh_path():
    """The floor and the newest release both expose the private configuration no_mesh resets; a JAX
    that moves it would silently cost one compilation per solver inside ``set_mesh``: fail here."""
    assert _compat.MESH_CONTEXT_PATH == "private", f"jax {jax.__version__}: jax._src.config moved; update _compat"
    assert _compat._private_mesh_context() is not None


def test_moved_private_config_selects_the_public_path(monkeypatch):
    from jax._src import config as private

    monkeypatch.delattr(private, "abstract_mesh_context_manager")
    assert _compat._private_mesh_context() is None


@pytest.mark.parametrize("path", ["private", "public"])
def test_no_mesh_leaves_the_set_mesh_context_and_restores_it(path, monkeypatch):
    if path == "public":
        monkeypatch.setattr(_compat, "_MESH_CONTEXT", None)
    mesh = _explicit_mesh()
    assert jax.sharding.get_abstract_mesh().empty
    with jax.set_mesh(mesh):
        assert jax.sharding.get_abstract_mesh() == mesh.abstract_mesh
        with _compat.no_mesh():
            assert jax.sharding.get_abstract_mesh().empty
        assert jax.sharding.get_abstract_mesh() == mesh.abstract_mesh
        with pytest.raises(RuntimeError, match="inside"):  # an error in the body restores the context too
            with _compat.no_mesh():
                raise RuntimeError("inside")
        assert jax.sharding.get_abstract_mesh() == mesh.abstract_mesh
    assert jax.sharding.get_abstract_mesh().empty


@pytest.mark.parametrize("path", ["private", "public"])
def test_no_mesh_runs_the_code_of_a_plain_call(path, monkeypatch):
    """The private path reuses the compiled program of a call outside any mesh (the reason it
    exists); the public fallback gives the same numbers with one more compilation."""
    if path == "public":
        monkeypatch.setattr(_compat, "_MESH_CONTEXT", None)
    f = jax.jit(lambda x: jnp.cumsum(x * x) + 0.5)  # a new function: nothing of it is cached yet
    x = np.arange(5, dtype=np.float32)
    plain = np.asarray(f(x))
    with count_compiles() as compiles, jax.set_mesh(_explicit_mesh()), _compat.no_mesh():
        lifted = np.asarray(f(x))
    np.testing.assert_array_equal(lifted, plain)
    assert compiles[0] == (0 if path == "private" else 1)


def test_solver_inside_set_mesh_equals_plain_call_and_compiles_nothing_new():
    """The user-facing effect: any_mesh lifts an Explicit set_mesh context through _compat.no_mesh."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(24, 5)).astype(np.float32)
    y = (X[:, 1] - 0.5 * X[:, 3]).astype(np.float32)
    problem = js.prepare(X, y)
    plain = js.cs_fr(problem)
    with count_compiles() as compiles, jax.set_mesh(_explicit_mesh()):
        inside = js.cs_fr(problem)
    np.testing.assert_array_equal(np.asarray(inside.order), np.asarray(plain.order))
    np.testing.assert_allclose(np.asarray(inside.objective), np.asarray(plain.objective), rtol=1e-6)
    assert compiles[0] == 0


def test_private_jax_apis_only_in_compat():
    """JAX's private modules (``jax._src``) and its tracer class (``jax.core.Tracer``, leaving the
    public API) are touched in jaxselect/_compat.py only."""
    import pathlib

    package = pathlib.Path(_compat.__file__).parent
    offenders = [
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if p.name != "_compat.py" and any(api in p.read_text() for api in ("jax._src", "jax.core.Tracer"))
    ]
    assert offenders == []


def test_top_level_is_false_inside_a_trace():
    assert _compat.top_level()
    seen = []
    jax.jit(lambda x: seen.append(_compat.top_level()) or x)(1.0)
    assert seen == [False]
