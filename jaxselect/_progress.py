"""Optional progress bars (``tqdm``) for the calls that can run for minutes; off by default.

``progress=True`` needs tqdm (``pip install jaxselect[progress]``); the error says so. Bars are
updated on the host between compiled pieces of work, never from inside a compiled solve: a solver
with ``progress=True`` runs its ``lax.scan`` of ``k`` steps as about :data:`N_UPDATES` separately
compiled chunks (two chunk lengths at most, so at most two compiled scans) and updates the bar
between them (:func:`run_in_chunks`); the default ``progress=False`` keeps the one fused program.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect.programs import jit

__all__ = ["N_UPDATES", "check_progress", "progress_bar", "run_in_chunks"]

#: How many times a solver's bar is updated over a run (the number of compiled chunks).
N_UPDATES = 20


def check_progress(progress) -> bool:
    """Validate a ``progress=`` option (a bool)."""
    if not isinstance(progress, (bool, np.bool_)):
        raise TypeError(f"progress must be True or False; got {progress!r}")
    return bool(progress)


def progress_bar(iterable=None, *, enabled: bool = True, total=None, desc: str, unit: str = "step"):
    """``tqdm(iterable, ...)`` when ``enabled`` (ImportError naming the extra when tqdm is missing),
    else ``iterable`` itself (or a no-op bar when ``iterable`` is None, for manual ``update``)."""
    if not enabled:
        return iterable if iterable is not None else _NoBar()
    try:
        from tqdm.auto import tqdm  # optional dependency
    except ImportError as err:
        raise ImportError(
            "progress=True needs tqdm, which is not installed: pip install tqdm (or jaxselect[progress]), "
            "or leave progress=False"
        ) from err
    return tqdm(iterable, total=total, unit=unit, desc=desc)


class _NoBar:
    """The bar of ``progress=False``: accepts what a tqdm bar accepts and shows nothing."""

    def update(self, n=1):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def run_in_chunks(advance, state, total: int, desc: str, bar=None):
    """Run ``advance(state, length) -> (state, stacked info)`` for ``total`` steps in chunks.

    ``advance`` is a jitted function with a static ``length``; the stacked per-step outputs of the
    chunks are concatenated along their leading axis. Returns ``(state, info)`` as one scan would.
    """
    bar = progress_bar(total=total, desc=desc) if bar is None else bar
    chunk = max(1, -(-total // N_UPDATES))
    outputs = []
    done = 0
    try:
        while done < total:
            length = min(chunk, total - done)
            state, info = advance(state, length)
            jax.block_until_ready(state)
            outputs.append(info)
            done += length
            bar.update(length)
    finally:
        bar.close()
    return state, jax.tree.map(_concat, *outputs)


@partial(jit)
def _concat_jit(*parts):
    return jnp.concatenate(parts, axis=0)


def _concat(*parts):
    return parts[0] if len(parts) == 1 else _concat_jit(*parts)
