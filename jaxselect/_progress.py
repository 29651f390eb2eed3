"""Optional progress bars for long solves: the compiled scan runs in a few chunks of steps.

With ``progress=True`` a solver runs its ``lax.scan`` of ``k`` steps as about :data:`N_UPDATES`
separately compiled chunks (two chunk lengths at most, so at most two compiled scans) and updates a
``tqdm`` bar between them — no host round-trip inside a compiled chunk. The default
(``progress=False``) keeps the one fused program. ``tqdm`` is optional (the ``[progress]`` extra).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

__all__ = ["N_UPDATES", "check_progress", "progress_bar", "run_in_chunks"]

#: How many times the bar is updated over a run (the number of compiled chunks).
N_UPDATES = 20


def check_progress(progress) -> bool:
    """``progress`` as a bool (True/False only)."""
    if not isinstance(progress, bool):
        raise TypeError(f"progress must be True or False; got {progress!r}")
    return progress


def progress_bar(total: int, desc: str):
    """A ``tqdm`` bar of ``total`` steps; ImportError naming the ``[progress]`` extra without tqdm."""
    try:
        from tqdm.auto import tqdm  # noqa: PLC0415 - optional dependency, imported on demand
    except ImportError as err:
        raise ImportError(
            "progress=True needs the optional package tqdm: pip install 'jaxselect[progress]' (or pip install tqdm)"
        ) from err
    return tqdm(total=total, desc=desc, unit="step")


def run_in_chunks(advance, state, total: int, desc: str, bar=None):
    """Run ``advance(state, length) -> (state, stacked info)`` for ``total`` steps in chunks.

    ``advance`` is a jitted function with a static ``length``; the stacked per-step outputs of the
    chunks are concatenated along their leading axis. Returns ``(state, info)`` as one scan would.
    """
    bar = progress_bar(total, desc) if bar is None else bar
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


@partial(jax.jit)
def _concat_jit(*parts):
    return jnp.concatenate(parts, axis=0)


def _concat(*parts):
    return parts[0] if len(parts) == 1 else _concat_jit(*parts)
