"""Count XLA compilations: a second call with equal-but-new arguments must compile nothing."""

from __future__ import annotations

import contextlib

import jax

_EVENT = "/jax/core/compile/backend_compile_duration"


@contextlib.contextmanager
def count_compiles():
    """Context manager yielding a one-element list that holds the number of backend compilations."""
    counter = [0]

    def listener(event, duration_secs, **kwargs):
        if event == _EVENT:
            counter[0] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield counter
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
