"""Put data on a device mesh with rows (samples) split; every solver then runs sharded under jit.

jaxselect has no scheduler of its own: it relies on JAX's SPMD partitioner. Give a solver arrays
whose rows are split over a mesh axis and XLA turns the row reductions of the solve (``XᵀX``,
``Xᵀr``, column sums, batched rollouts) into per-device partial results plus an all-reduce; X is
never gathered onto one device.

Any mesh. Inputs may live on a mesh with ``Auto`` axes (:func:`data_mesh`, ``jax.sharding.Mesh``,
``jax.make_mesh(..., axis_types=(AxisType.Auto,))``) or with ``Explicit`` axes (``jax.make_mesh``'s
default since JAX 0.7), and calls may run inside ``jax.set_mesh(mesh)``. Every public solver is
wrapped by :func:`any_mesh`: explicitly sharded inputs are relabelled (no copy) onto the same
devices with ``Auto`` axes, the solver runs there — the partitioner places the row reductions, as
above — and array outputs on that mesh are relabelled back to the caller's ``Explicit`` mesh.

Any n. :func:`shard_rows` pads the rows to a multiple of the device count and returns the row
weights (1 for real rows, 0 for padding) last; pass them as ``sample_weight=`` and every solver gives
the unpadded result.

Several processes. After ``jax.distributed.initialize(...)``, :func:`shard_rows` takes each
process's own rows (``jax.process_count() > 1``), pads every process to the same number of rows
and assembles the global arrays with ``jax.make_array_from_process_local_data``
(``examples/multihost.py``).

>>> import numpy as np, jaxselect as js
>>> X = np.random.default_rng(0).normal(size=(64, 5)).astype(np.float32)
>>> Xs = js.shard_rows(X)            # one array: just the array (n must split evenly)
>>> Xs.shape
(64, 5)
>>> y = X[:, 0]
>>> Xs, ys, w = js.shard_rows(X, y)  # several arrays: padded as needed, weights last
>>> Xs.shape[0] == ys.shape[0] == w.shape[0] >= 64, float(w.sum())
(True, 64.0)
"""

from __future__ import annotations

import contextlib
import functools
import types

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from jaxselect._compat import Tracer, is_tracer, no_mesh

__all__ = ["data_mesh", "shard_rows", "row_sharding", "any_mesh", "register_row_handler"]

#: ``(accepts, handler)`` pairs for an X this layer does not place itself: ``shard_rows(X, ...)``
#: returns ``handler(X, *rest, mesh=, axis=, weights=)`` for the first ``accepts(X)``. Sparse X
#: registers here (``jaxselect.design.sparse_shard``), which this layer may not import.
_ROW_HANDLERS: list = []


def register_row_handler(accepts, handler) -> None:
    """Let :func:`shard_rows` place an X of another kind (first argument) with ``handler``."""
    _ROW_HANDLERS.append((accepts, handler))


def data_mesh(devices=None, axis: str = "data") -> Mesh:
    """A 1-D mesh over ``devices`` (default: ``jax.devices()``, every device of every host).

    Args:
      devices: a sequence of devices (default ``jax.devices()``).
      axis: the mesh axis name (default ``"data"``), the one :func:`shard_rows` splits rows over.

    Returns:
      A :class:`jax.sharding.Mesh` of shape ``(len(devices),)``.

    >>> import jaxselect as js
    >>> mesh = js.data_mesh()
    >>> mesh.axis_names, mesh.devices.ndim
    (('data',), 1)
    """
    devices = jax.devices() if devices is None else list(devices)
    return Mesh(np.asarray(devices), (axis,))


def row_sharding(mesh: Mesh | None = None, axis: str = "data", ndim: int = 2) -> NamedSharding:
    """``NamedSharding`` that splits axis 0 over ``axis`` and replicates the others.

    Args:
      mesh: a :class:`jax.sharding.Mesh` (default: :func:`data_mesh`).
      axis: the mesh axis to split rows over.
      ndim: rank of the arrays it will place (2 for X, 1 for y or row weights).

    Raises:
      ValueError: ``mesh`` has no axis named ``axis``.

    >>> import jaxselect as js
    >>> tuple(js.row_sharding(js.data_mesh()).spec)   # rows split, columns replicated
    ('data', None)
    """
    mesh = data_mesh(axis=axis) if mesh is None else mesh
    if axis not in mesh.axis_names:
        raise ValueError(f"mesh has axes {mesh.axis_names}; no axis named {axis!r}")
    return NamedSharding(mesh, PartitionSpec(axis, *([None] * (ndim - 1))))


def _as_rows(a, i: int, n_args: int):
    a = a if isinstance(a, jax.Array) else np.asarray(a)
    if a.ndim < 1:
        name = "the array" if n_args == 1 else f"array {i}"
        raise ValueError(f"shard_rows needs arrays with a sample axis; {name} is 0-d")
    return a


def _pad_rows(a, rows: int):
    """``a`` with its last row repeated up to ``rows`` rows (labels stay valid, constant columns constant)."""
    extra = rows - a.shape[0]
    if extra == 0:
        return a
    xp = jnp if isinstance(a, jax.Array) else np
    return xp.concatenate([a, xp.repeat(a[-1:], extra, axis=0)], axis=0)


def _weight_dtype(arrays):
    for a in arrays:
        if np.issubdtype(a.dtype, np.floating):
            return a.dtype
    return jnp.zeros((), float).dtype  # float32, float64 under x64


def shard_rows(*arrays, mesh: Mesh | None = None, axis: str = "data", weights: bool | None = None):
    """Place arrays with the same rows on ``mesh``, rows split over ``axis``, padding n as needed.

    ``Xs, ys, w = js.shard_rows(X, y, mesh=mesh)``: every array is padded to the same number of
    rows, a multiple of the number of devices along ``axis``, and placed row-sharded; ``w`` (last) is
    the (n_padded,) row weights, 1 for real rows and 0 for padding rows. Pass ``sample_weight=w``
    to any solver and it gives the result of the unpadded data. Padding rows repeat the last real
    row (so labels stay valid labels and constant columns stay constant); their weight is 0.
    With your own weights ``sw``, shard them too: ``Xs, ys, sws, w = js.shard_rows(X, y, sw)``
    and pass ``sample_weight=sws * w`` (or just ``sws``: its padding rows are copies of its last
    row, so multiply by ``w``).

    One array, ``js.shard_rows(X)``, returns just the sharded array (as before 0.4) and needs n to
    be a multiple of the device count; ``weights=True`` returns ``(Xs, w)`` with padding instead.

    Sparse X (``scipy.sparse``, BCOO/BCSR, or an unsharded ``SparseDesign``) as the first array:
    ``Xs`` is a row-sharded :class:`~jaxselect.design.ShardedSparseDesign` (each device holds the
    entries of its own rows, padded to a common count; never densified) that every solver taking
    sparse X accepts as X; it and the other arrays live on ``mesh``'s devices with ``Auto`` axes
    (:mod:`jaxselect.design.sparse_shard`).

    Several processes (``jax.process_count() > 1``, after ``jax.distributed.initialize``): each
    process passes *its own* rows (numpy, or its CSR block of a sparse X); every process is padded to the same number of rows (a
    multiple of its device count on the mesh) and the global arrays are assembled with
    ``jax.make_array_from_process_local_data``. Every process must call this with the same shapes
    except for the number of rows.

    Args:
      *arrays: array-likes with samples on axis 0 (X, Y, y, labels, your sample weights...), all
        with the same number of rows.
      mesh: a :class:`jax.sharding.Mesh` with ``Auto`` or ``Explicit`` axes (default:
        :func:`data_mesh` over all devices).
      axis: mesh axis name to split the rows over.
      weights: return the row weights last (default: when more than one array is given).

    Returns:
      The sharded arrays in the order given, then ``w`` when ``weights``; one array without
      weights is returned alone (not in a tuple).

    Raises:
      ValueError: no arrays, a 0-d array, arrays with different numbers of rows, an unknown
        ``axis``, or (one array without ``weights``) n not a multiple of the device count.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(10, 3)).astype(np.float32); y = X[:, 0]
    >>> Xs, ys, w = js.shard_rows(X, y, mesh=js.data_mesh())
    >>> js.cs_fr(js.prepare(Xs, ys, sample_weight=w)).order.tolist()[0]
    0
    """
    if not arrays:
        raise ValueError("shard_rows needs at least one array, e.g. shard_rows(X, y)")
    for accepts, handler in _ROW_HANDLERS:
        if accepts(arrays[0]):
            return handler(*arrays, mesh=mesh, axis=axis, weights=weights)
    arrays = [_as_rows(a, i, len(arrays)) for i, a in enumerate(arrays)]
    n = arrays[0].shape[0]
    for i, a in enumerate(arrays[1:], start=1):
        if a.shape[0] != n:
            raise ValueError(f"shard_rows: array {i} has {a.shape[0]} rows but array 0 has {n}; all need the same rows")
    weights = len(arrays) > 1 if weights is None else bool(weights)
    mesh = data_mesh(axis=axis) if mesh is None else mesh
    row_sharding(mesh, axis)  # checks the axis name
    if jax.process_count() > 1 and len({d.process_index for d in mesh.devices.flat}) > 1:
        return _shard_process_local(arrays, mesh, axis, weights)
    parts = mesh.shape[axis]
    rows = -(-n // parts) * parts
    if not weights and rows != n:
        raise ValueError(
            f"cannot split {n} rows evenly over {parts} devices; pass more arrays (shard_rows(X, y) returns "
            f"row weights last) or weights=True to pad to {rows} rows with weight-0 rows, and give the "
            "weights to the solver as sample_weight"
        )
    out = [jax.device_put(_pad_rows(a, rows), row_sharding(mesh, axis, a.ndim)) for a in arrays]
    if weights:
        w = np.zeros((rows,), _weight_dtype(arrays))
        w[:n] = 1
        out.append(jax.device_put(w, row_sharding(mesh, axis, 1)))
    return out[0] if len(out) == 1 else tuple(out)


def _shard_process_local(arrays, mesh: Mesh, axis: str, weights: bool):
    """Multi-process :func:`shard_rows`: each process's rows, padded to a common local count."""
    from jax.experimental import multihost_utils

    arrays = [np.asarray(a) for a in arrays]
    n_local = arrays[0].shape[0]
    me = jax.process_index()
    # devices of this process along the row axis (every process holds the same number of them)
    axis_pos = mesh.axis_names.index(axis)
    along = np.moveaxis(mesh.devices, axis_pos, 0).reshape(mesh.shape[axis], -1)[:, 0]
    local_parts = sum(d.process_index == me for d in along)
    n_procs = len({d.process_index for d in along})
    counts = np.asarray(multihost_utils.process_allgather(np.asarray([n_local], np.int64))).reshape(-1)
    rows_local = -(-int(counts.max()) // local_parts) * local_parts
    out = []
    for a in arrays:
        local = _pad_rows(a, rows_local)
        sharding = row_sharding(mesh, axis, a.ndim)
        out.append(jax.make_array_from_process_local_data(sharding, local, (rows_local * n_procs, *a.shape[1:])))
    if weights:
        w = np.zeros((rows_local,), _weight_dtype(arrays))
        w[:n_local] = 1
        out.append(jax.make_array_from_process_local_data(row_sharding(mesh, axis, 1), w, (rows_local * n_procs,)))
    elif rows_local * n_procs != int(counts.sum()):
        raise ValueError(
            f"cannot split the processes' rows {counts.tolist()} evenly over the mesh; pass more arrays or "
            "weights=True to pad with weight-0 rows"
        )
    return out[0] if len(out) == 1 else tuple(out)


# ---------------------------------------------------------------------------------------------
# Any mesh: run the solvers on Auto axes.


def _explicit(mesh) -> bool:
    return any(t == AxisType.Explicit for t in getattr(mesh, "axis_types", ()))


@functools.lru_cache(maxsize=32)
def _auto_mesh(mesh: Mesh) -> Mesh:
    """The same devices and axis names with every axis ``Auto``."""
    return Mesh(mesh.devices, mesh.axis_names, axis_types=(AxisType.Auto,) * len(mesh.axis_names))


def _relabel(x, mesh: Mesh):
    """``x`` on ``mesh`` with the same partitioning (no copy: the same devices and shards)."""
    return jax.device_put(x, NamedSharding(mesh, x.sharding.spec))


def any_mesh(fn):
    """Decorator: ``fn`` gives the same result on Auto and Explicit meshes and inside ``jax.set_mesh``.

    When an argument (any pytree leaf) is a concrete ``jax.Array`` on a mesh with ``Explicit``
    axes, or the call runs inside ``jax.set_mesh`` of such a mesh, those arrays are relabelled onto
    the same devices with ``Auto`` axes (no data moves), ``fn`` runs outside any mesh context (as
    for inputs placed on an Auto mesh: the same compiled code), and the array outputs on that mesh
    are relabelled back to the ``Explicit`` mesh. Traced inputs (inside a user's ``jit``) with
    Explicit axes run under ``jax.sharding.auto_axes`` with replicated outputs. Otherwise ``fn``
    is called as it is. Under ``Auto`` axes XLA's partitioner reduces over the sharded rows with partial sums
    and an all-reduce (X is never gathered), which is what every solver relies on; with
    ``Explicit`` axes JAX instead asks each contraction over the row axis for an output sharding.
    """

    call = _call_on_auto_axes

    def wrapper(*args, **kwargs):
        return call(fn, args, kwargs)

    # the wrapper reads only its closure, so it can live in fn's module: doctest and inspect then
    # treat it as that module's function (its docstring examples still run)
    wrapper = types.FunctionType(wrapper.__code__, fn.__globals__, fn.__name__, None, wrapper.__closure__)
    return functools.update_wrapper(wrapper, fn)


def _aval_mesh(x):
    """The (abstract) mesh of a traced value's type, or None."""
    sharding = getattr(jax.typeof(x), "sharding", None)
    return getattr(sharding, "mesh", None)


def _call_on_auto_axes(fn, args, kwargs):
    """``fn(*args, **kwargs)`` with Explicit mesh axes turned Auto (see :func:`any_mesh`)."""
    leaves, tree = jax.tree.flatten((args, kwargs))
    to_auto = {}
    traced = explicit_trace = None
    for x in leaves:
        if is_tracer(x):
            traced = True
            mesh = _aval_mesh(x)
            if mesh is not None and not mesh.empty and _explicit(mesh):
                explicit_trace = mesh
        elif isinstance(x, jax.Array):
            sh = x.sharding
            if isinstance(sh, NamedSharding) and isinstance(sh.mesh, Mesh) and _explicit(sh.mesh):
                to_auto.setdefault(sh.mesh, _auto_mesh(sh.mesh))
    context = jax.sharding.get_abstract_mesh()
    in_context = not context.empty and _explicit(context)
    if traced:
        abstract = explicit_trace or (next(iter(to_auto)).abstract_mesh if to_auto else None)
        abstract = abstract or (context if in_context else None)
        if abstract is None:
            return fn(*args, **kwargs)
        return _traced_on_auto_axes(fn, leaves, tree, abstract)
    if not to_auto and not in_context:
        return fn(*args, **kwargs)
    leaves = [
        _relabel(x, to_auto[x.sharding.mesh])
        if isinstance(x, jax.Array) and isinstance(x.sharding, NamedSharding) and x.sharding.mesh in to_auto
        else x
        for x in leaves
    ]
    args, kwargs = jax.tree.unflatten(tree, leaves)
    # Outside any mesh context, exactly as for inputs placed on an Auto mesh (the same compiled code);
    # inside jax.set_mesh(explicit mesh) the context is lifted for the call.
    lift = no_mesh() if in_context else contextlib.nullcontext()
    with lift:
        out = fn(*args, **kwargs)
    back = {auto: explicit for explicit, auto in to_auto.items()}

    def restore(x):
        if isinstance(x, jax.Array) and not is_tracer(x):
            sh = x.sharding
            if isinstance(sh, NamedSharding) and sh.mesh in back:
                return _relabel(x, back[sh.mesh])
        return x

    return jax.tree.map(restore, out)


def _traced_on_auto_axes(fn, leaves, tree, abstract):
    """Inside a trace (a user's ``jit``/``grad``): ``jax.sharding.auto_axes`` over ``abstract``.

    The array leaves become the traced arguments of ``fn`` with every mesh axis Auto; the outputs
    are replicated (``P()``) on the caller's Explicit mesh. Value checks on traced inputs are
    skipped, as for any traced call.
    """
    index = [i for i, x in enumerate(leaves) if isinstance(x, (jax.Array, Tracer))]

    def inner(*arrays):
        filled = list(leaves)
        for i, a in zip(index, arrays):
            filled[i] = a
        args, kwargs = jax.tree.unflatten(tree, filled)
        return fn(*args, **kwargs)

    with jax.sharding.use_abstract_mesh(abstract):
        return jax.sharding.auto_axes(inner, out_sharding=PartitionSpec())(*[leaves[i] for i in index])
