"""Put data on a device mesh with rows (samples) split; every solver then runs sharded under jit.

jaxselect has no scheduler of its own: it relies on JAX's SPMD partitioner. Give a solver arrays
whose rows are split over a mesh axis and XLA turns the row reductions of the solve (``XᵀX``,
``Xᵀr``, column sums, batched rollouts) into per-device partial results plus an all-reduce; X is
never gathered onto one device. Multi-host is the same recipe after
``jax.distributed.initialize()``: build the mesh from ``jax.devices()`` (all hosts' devices) and
assemble the global array from each host's rows (``jax.make_array_from_process_local_data``).

>>> import numpy as np, jaxselect as js
>>> X = np.random.default_rng(0).normal(size=(64, 5)).astype(np.float32)
>>> Xs = js.shard_rows(X)            # split over every local device along "data"
>>> Xs.shape
(64, 5)
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["data_mesh", "shard_rows", "row_sharding"]


def data_mesh(devices=None, axis: str = "data") -> Mesh:
    """A 1-D mesh over ``devices`` (default: ``jax.devices()``, every device of every host)."""
    devices = jax.devices() if devices is None else list(devices)
    return Mesh(np.asarray(devices), (axis,))


def row_sharding(mesh: Mesh | None = None, axis: str = "data", ndim: int = 2) -> NamedSharding:
    """``NamedSharding`` that splits axis 0 over ``axis`` and replicates the others."""
    mesh = data_mesh(axis=axis) if mesh is None else mesh
    if axis not in mesh.axis_names:
        raise ValueError(f"mesh has axes {mesh.axis_names}; no axis named {axis!r}")
    return NamedSharding(mesh, PartitionSpec(axis, *([None] * (ndim - 1))))


def shard_rows(X, mesh: Mesh | None = None, axis: str = "data") -> jax.Array:
    """Place X (n, ...) on ``mesh`` with its rows split over ``axis``.

    Args:
      X: array-like with samples on axis 0 (X, Y, y, sample weights...).
      mesh: a :class:`jax.sharding.Mesh` (default: :func:`data_mesh` over all devices).
      axis: mesh axis name to split the rows over.

    Raises:
      ValueError: if n is not divisible by the number of devices along ``axis`` (drop or add rows
        first; padding would change the statistics the solvers compute).
    """
    X = X if isinstance(X, jax.Array) else np.asarray(X)
    if X.ndim < 1:
        raise ValueError("shard_rows needs an array with a sample axis")
    sharding = row_sharding(mesh, axis, X.ndim)
    parts = sharding.mesh.shape[axis]
    if X.shape[0] % parts:
        raise ValueError(
            f"cannot split {X.shape[0]} rows evenly over {parts} devices; use a multiple of {parts} rows"
        )
    return jax.device_put(X, sharding)
