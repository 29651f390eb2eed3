"""FSA's update rule as an optax ``GradientTransformation`` (eq. 2 of Barbu et al.).

:func:`gradient_descent` is plain gradient descent, ``c ← c − η g``, with the step η held in the
transformation's *state* (:class:`StepState`) rather than closed over: :func:`~jaxselect.anneal.fsa`
sets it per compacted stage (the scale-free default ``1/L`` from power iteration, or the user's
``lr``) inside its one compiled run, so a new ``lr`` is a new state value, never a new program.
The built-in rule and a user's optax optimizer (``optimizer=optax.sgd(0.1, momentum=0.9)``) go
through the same code: ``updates, opt_state = optimizer.update(grads, opt_state, params)``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

__all__ = ["StepState", "gradient_descent"]


class StepState(NamedTuple):
    """State of :func:`gradient_descent`: ``step`` () the current step size η (in the params' dtype)."""

    step: jax.Array


@functools.lru_cache(maxsize=None)
def gradient_descent() -> optax.GradientTransformation:
    """Plain gradient descent ``updates = −η · grads`` with η read from the state.

    ``init(params)`` starts with η = NaN (in the dtype of the first leaf of ``params``): set it
    with ``state._replace(step=η)`` (what :func:`~jaxselect.anneal.fsa_init` and
    :func:`~jaxselect.anneal.fsa` do). The same object is returned on every call, so it is a
    stable static argument of compiled programs.

    >>> import jax.numpy as jnp
    >>> gd = gradient_descent()
    >>> state = gd.init(jnp.zeros(2))._replace(step=jnp.asarray(0.5))
    >>> updates, state = gd.update(jnp.asarray([1.0, -2.0]), state)
    >>> updates.tolist()
    [-0.5, 1.0]
    """

    def init(params):
        leaves = jax.tree.leaves(params)
        dtype = leaves[0].dtype if leaves else jnp.float32
        return StepState(jnp.full((), jnp.nan, dtype))

    def update(updates, state, params=None):
        del params
        return jax.tree.map(lambda g: -state.step.astype(g.dtype) * g, updates), state

    return optax.GradientTransformation(init, update)
