"""_static.canonical: structural equality for static jit arguments, with no global state."""

import copy
import gc
import inspect
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from compile_count import count_compiles

import jaxselect as js
from jaxselect import _static
from jaxselect._static import Static, canonical


def _make(scale, offset=0.0):
    return lambda s, t: scale * jnp.mean((s - t) ** 2) + offset


def _over(value):
    return lambda: value


def test_fresh_equal_callables_are_equal_and_others_are_not():
    a, b = canonical(_make(0.5)), canonical(_make(0.5))
    assert a is not b and a == b and hash(a) == hash(b)
    assert canonical(_make(0.25)) != a  # another closure value
    assert canonical(lambda s, t: 0.5 * jnp.mean((s - t) ** 2)) != a  # another code object
    shared = []
    assert canonical(_over(shared)) == canonical(_over(shared))
    assert canonical(_over([])) != canonical(_over([]))  # a fresh mutable container: by identity
    assert canonical(_over(np.arange(3.0))) == canonical(_over(np.arange(3.0)))  # small arrays by value
    assert canonical(_over(np.arange(3.0))) != canonical(_over(np.arange(4.0)))
    big = np.zeros(1 << 17)
    assert canonical(_over(big)) == canonical(_over(big)) != canonical(_over(np.zeros(1 << 17)))  # large: identity

def test_wrappers_forward_calls_and_attributes():
    def loss(s, t, *, scale=0.5):
        """doc"""
        return scale * jnp.sum((s - t) ** 2)

    f = canonical(loss)
    assert isinstance(f, Static) and callable(f) and f.__name__ == "loss"
    assert float(f(jnp.ones(2), jnp.zeros(2))) == 1.0
    assert inspect.signature(f) == inspect.signature(loss)
    assert float(np.asarray(jax.grad(f)(jnp.ones(2), jnp.zeros(2)))[0]) == 1.0
    assert jax.eval_shape(f, jnp.ones(2), jnp.zeros(2)).shape == ()  # jax keeps weak references to functions
    assert float(jax.jit(f)(jnp.ones(2), jnp.zeros(2))) == 1.0
    assert canonical(f) is f and copy.copy(f) == f and copy.deepcopy(f) == f
    with pytest.raises(AttributeError):
        f.extra = 1
    assert f != loss and f != "squared" and f not in ("logistic", "softmax")


def test_optax_transformations_keep_their_type():
    opt = canonical(optax.sgd(0.1))
    assert isinstance(opt, optax.GradientTransformation) and type(opt) is type(optax.sgd(0.1))
    assert opt == canonical(optax.sgd(0.1)) and hash(opt) == hash(canonical(optax.sgd(0.1)))
    assert opt != canonical(optax.sgd(0.2)) and opt != canonical(optax.adam(0.1))
    params = {"w": jnp.ones(3)}
    updates, _ = opt.update({"w": jnp.ones(3)}, opt.init(params), params)
    np.testing.assert_allclose(updates["w"], -0.1 * np.ones(3), rtol=1e-6)


def test_stable_objects_and_unfingerprintable_ones_are_returned_as_they_are():
    for obj in (None, "squared", 3, js.losses.squared_loss, jnp.tanh, np.ones(2)):
        assert canonical(obj) is obj

    def outer():
        def inner():
            return late  # noqa: F821 - the cell is empty when canonical reads it

        keep = canonical(inner)
        late = 1  # noqa: F841
        return inner, keep

    inner, keep = outer()
    assert keep is inner


def test_a_fresh_equal_static_argument_does_not_recompile():
    apply = jax.jit(lambda x, fn: fn(x, 2 * x), static_argnums=1)
    x = jnp.arange(4.0)
    first = apply(x, canonical(_make(0.5)))
    with count_compiles() as compiles:
        again = apply(x, canonical(_make(0.5)))
    assert compiles[0] == 0
    np.testing.assert_array_equal(first, again)
    with count_compiles() as compiles:
        other = apply(x, canonical(_make(0.5, offset=1.0)))
    assert compiles[0] == 1 and float(other) == pytest.approx(float(first) + 1.0)


def test_no_global_state_keeps_objects_alive():
    assert not [
        name
        for name, value in vars(_static).items()
        if isinstance(value, (dict, list, set)) and not name.startswith("__")
    ], "canonical must not keep a module-level cache"
    fn = _make(0.5)
    ref = weakref.ref(fn)
    wrapped = canonical(fn)
    for _ in range(1000):
        canonical(_make(0.5))
    del fn, wrapped
    gc.collect()
    assert ref() is None, "a canonical object must be freed once nothing uses it"


def test_partials_with_equal_keywords_are_equal():
    """A partial's keywords compare by contents (each partial owns its dict), so a solver factory
    whose step is ``partial(f, n=3)`` does not recompile when called again."""
    import functools

    from jaxselect._static import canonical

    def f(x, *, n):
        return x * n

    a, b, c = (canonical(functools.partial(f, n=v)) for v in (3, 3, 4))
    assert a == b and hash(a) == hash(b) and a != c
