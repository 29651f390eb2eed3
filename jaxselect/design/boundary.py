"""The front door: one boundary function from what users pass to one validated :class:`Data`.

Every family's problem builder (``prepare``, ``glm_problem``, ``fsa_prepare``, ``rcpi_problem``,
``greedy_rls``, the refits) starts here. :func:`as_data` runs, on the host and before any ``jit``,
every check of the inputs — types, shapes, NaN/Inf, magnitudes the dtype can hold, row weights,
groups, targets or labels, the constant-column mode — and computes the column summary once, with
the library's one standardisation rule (:mod:`jaxselect.design.summary`) and one sample-weight rule
(:mod:`jaxselect.design.weights`). Inside a user's ``jit`` (traced inputs) only shapes and dtypes
can be checked; the value checks are skipped there and solvers report numerical trouble through
``status``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from jaxselect._progress import check_progress
from jaxselect._repr import short_repr
from jaxselect._validation import (
    MIN_ROWS,
    as_binary_labels,
    as_device,
    as_float_matrix,
    as_labels,
    as_targets,
    as_vector_target,
    check_constant_mode,
    check_matrix,
    check_targets,
    float_dtype_for,
    host_value,
    is_traced,
    raise_nonfinite,
    scale_error,
)
from jaxselect.design.operators import DenseDesign, HostDesign
from jaxselect.design.sparse import HostSparseDesign, SparseDesign, as_sparse_csr, is_sparse
from jaxselect.design.sparse_shard import as_raw_design
from jaxselect.design.summary import ColumnSummary, summary_from_moments
from jaxselect.design.weights import as_sample_weight
from jaxselect.groups import Groups, as_groups
from jaxselect.design.moments import check_scales, moments_host

__all__ = [
    "Data",
    "TARGET_KINDS",
    "as_data",
    "check_constant_columns",
    "check_moments",
    "host_matrix",
    "host_targets",
]

#: What ``as_data(..., targets=)`` accepts: no targets, real targets (n, T), one real target (n,),
#: binary labels mapped to 0/1, class labels 0..C−1, or anything (passed through unchecked, for
#: callable losses and ranking pairs).
TARGET_KINDS = (None, "regression", "vector", "binary", "labels", "raw")


class Data(NamedTuple):
    """Validated data: a design operator over X, the targets, row weights and the column summary.

    Attributes:
      design: the design operator over the standardised design ``X̃`` of the summary: a
        :class:`~jaxselect.design.DenseDesign` (X on a device, possibly row-sharded), a
        :class:`~jaxselect.design.HostDesign` (``storage="host"``), or for sparse X a
        :class:`~jaxselect.design.SparseDesign` / :class:`~jaxselect.design.HostSparseDesign`.
      Y: the validated targets: (n, T) float (``"regression"``), (n,) float (``"vector"``, and
        ``"binary"`` as 0/1), (n,) int32 (``"labels"``), as given (``"raw"``), or None.
      weights: None or (n,) row weights in X's dtype.
      summary: the :class:`~jaxselect.design.ColumnSummary` (weighted mean, scale, live mask).
      groups: the validated :class:`~jaxselect.Groups` (None when not asked for).
      n_classes: the number of classes (``"labels"``), else None.
      y_1d: the targets were given as a 1-D array.
      moments: the :class:`~jaxselect.Moments` of ``storage="host"`` data (formed by the same
        pass as the summary), else None.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(20, 3)).astype(np.float32); X[:, 2] = 1.0
    >>> data = js.as_data(X, X[:, 0])
    >>> data.design.shape, data.Y.shape, data.summary.live.tolist()
    ((20, 3), (20, 1), [True, True, False])
    """

    design: DenseDesign | HostDesign | SparseDesign | HostSparseDesign
    Y: object
    weights: jax.Array | None
    summary: ColumnSummary
    groups: Groups | None
    n_classes: int | None = None
    y_1d: bool = False
    moments: object = None

    __repr__ = short_repr

    @property
    def X(self) -> jax.Array:
        """The stored (unstandardised) features (dense designs; a sparse design has no dense X)."""
        if isinstance(self.design, SparseDesign):
            raise TypeError(
                "this solver does not run on sparse X yet (it reads the dense X, and a SparseDesign never "
                "densifies): pass X.toarray() if it fits in memory"
            )
        return self.design.X

    @property
    def n_samples(self) -> int:
        return self.design.shape[0]

    @property
    def n_features(self) -> int:
        return self.design.shape[1]


def check_constant_columns(live, constant_columns: str, name: str = "X") -> None:
    """The constant-column rule at the boundary: every column constant is an error; with
    ``constant_columns="raise"`` any constant column is (the message names them). A no-op when
    ``live`` is traced."""
    values = host_value(lambda: live)
    if values is None:
        return
    values = np.asarray(values, bool)
    if not values.any():
        raise ValueError(f"every column of {name} is constant; there is nothing to select")
    if constant_columns == "raise" and not values.all():
        cols = np.flatnonzero(~values)
        raise ValueError(
            f"{name} has constant column(s) {cols[:10].tolist()} and constant_columns='raise'; remove them, "
            "or use the default constant_columns='inert' (they are then never selected)"
        )


def _targets(Y, n: int, kind, dtype, n_classes):
    """Validated targets of one kind: ``(Y, n_classes, y_1d)``."""
    if kind is None or kind == "raw":
        return Y, None, getattr(Y, "ndim", 0) == 1
    if Y is None:
        raise ValueError("targets are required: pass y (one value or label per row of X)")
    if kind == "regression":
        Y2, y_1d = as_targets(Y, n, "Y", dtype=dtype)
        return Y2, None, y_1d
    if kind == "vector":
        return as_vector_target(Y, n, "y", dtype=dtype), None, True
    if kind == "binary":
        return as_binary_labels(Y, n, "y", dtype=dtype), None, True
    labels, C = as_labels(Y, n, "y", n_classes=n_classes)
    return labels, C, True


STORAGES = ("device", "host")


def as_data(
    X,
    Y=None,
    *,
    sample_weight=None,
    groups=None,
    targets: str | None = "regression",
    n_classes: int | None = None,
    constant_columns: str = "inert",
    scale: str | None = "values",
    dtype=None,
    min_rows: int = MIN_ROWS,
    storage: str = "device",
    with_moments: bool = False,
    progress: bool = False,
) -> Data:
    """Validate what a user passed and return one :class:`Data` (the library's front door).

    Args:
      X: (n, D) features: numpy, a list, pandas, or a ``jax.Array`` (a row-sharded array stays
        sharded); or sparse: ``scipy.sparse`` (any format, arrays and matrices) or
        ``jax.experimental.sparse`` BCOO/BCSR, canonicalised by
        :func:`~jaxselect.design.as_sparse_csr` (duplicates summed, int32 indices) and never
        densified; or a :class:`~jaxselect.design.SparseDesign` (e.g. row-sharded over devices and
        processes by :func:`~jaxselect.shard_rows`), which stands for the matrix it stores: its
        summary is computed here, over all its rows. Integer and bool X become the default float
        dtype; float64 stays float64 only under ``jax_enable_x64``.
      Y: targets or labels (see ``targets``), or None.
      sample_weight: None or (n,) row weights (:func:`~jaxselect.design.as_sample_weight`).
      groups: None (no partition asked for), ``"singletons"``, (D,) group ids or a
        :class:`~jaxselect.Groups`.
      targets: one of :data:`TARGET_KINDS`.
      n_classes: for ``"labels"``: the number of classes (required when y is traced).
      constant_columns: ``"inert"`` (default) or ``"raise"``.
      scale: the magnitude check of X, read off the summary pass's column extremes:
        ``"values"`` (solvers that rescale columns before squaring), ``"squares"`` (solvers that
        form raw second moments) or None (NaN/Inf only).
      dtype: force the compute dtype (default: from X).
      min_rows: fewest rows accepted (2 for every fit).
      storage: ``"device"`` (default): X becomes a ``jax.Array`` (kept as is when it is one) behind
        a :class:`~jaxselect.design.DenseDesign`. ``"host"``: a numpy X stays where it is behind a
        :class:`~jaxselect.design.HostDesign` whose summary pass runs over row blocks on the host.
        Sparse X: ``"device"`` gives a :class:`~jaxselect.design.SparseDesign` (the non-zeros on
        the device), ``"host"`` a :class:`~jaxselect.design.HostSparseDesign` (scipy CSR).
      with_moments: with ``storage="host"`` and real targets: the summary pass is the host moments
        kernel (host BLAS ``syrk`` over row chunks), which also forms ``Data.moments`` (the centred
        Gram and cross moments) in the same read of X — what :func:`~jaxselect.prepare` uses.
      progress: with ``with_moments``, a progress bar over the rows of the moments pass
        (optional ``tqdm``).

    Returns:
      A :class:`Data`.

    Raises:
      TypeError / ValueError: with a message that says what to fix.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(30, 3)).astype(np.float32); X[2, 1] = np.nan
    >>> try:
    ...     js.as_data(X, X[:, 0])
    ... except ValueError as e:
    ...     print(e)
    X contains NaN or Inf in row(s) [2] and column(s) [1]; remove or impute those entries first
    >>> X[2, 1] = 0.0
    >>> data = js.as_data(X, np.arange(30) % 2, targets="binary", sample_weight=np.ones(30))
    >>> data.design.shape, data.Y.dtype.name, float(data.summary.n_samples)
    ((30, 3), 'float32', 30.0)
    """
    check_constant_mode(constant_columns)
    if targets not in TARGET_KINDS:
        raise ValueError(f"targets must be one of {TARGET_KINDS}; got {targets!r}")
    if scale not in (None, "values", "squares"):
        raise ValueError(f"scale must be None, 'values' or 'squares'; got {scale!r}")
    if storage not in STORAGES:
        raise ValueError(f"storage must be one of {STORAGES}; got {storage!r}")
    if is_sparse(X) or isinstance(X, SparseDesign):
        return _sparse_data(X, Y, sample_weight, groups, targets, n_classes, constant_columns, scale, dtype, min_rows,
                            storage, with_moments)
    if storage == "host":
        return _host_data(X, Y, sample_weight, groups, targets, n_classes, constant_columns, scale, dtype, min_rows,
                          with_moments, progress)
    Xj = as_float_matrix(X, "X", dtype=dtype, min_rows=min_rows, check_finite=False)
    n, d = Xj.shape
    w = as_sample_weight(sample_weight, n)
    if w is not None:
        w = as_device(w, Xj.dtype)
    Y, C, y_1d = _targets(Y, n, targets, Xj.dtype, n_classes)
    groups = _groups(groups, d, Xj.dtype)
    raw = DenseDesign.raw(Xj)
    summary, col_min, col_max = _host_summary(X, Xj, w) or raw.summarize(w)
    _check_values(X, Xj, summary, col_min, col_max, scale)
    check_constant_columns(summary.live, constant_columns)
    return Data(raw.standardized(summary), Y, w, summary, groups, C, y_1d)


#: a numpy X up to this many bytes is summarised on the host (no compiled summary program)
HOST_SUMMARY_MAX_BYTES = 8 << 20


def _host_summary(X, Xj, w):
    """``(summary, col_min, col_max)`` of a small numpy X computed on the host, as device arrays —
    the rule of :func:`~jaxselect.design.column_summary` (accumulated in float64), without compiling
    a summary program for each new shape; None for any other X (a jax array keeps the compiled pass,
    as its sharded copies do), or for weights inside a user's jit."""
    if type(X) is not np.ndarray or is_traced(w) or Xj.size * Xj.dtype.itemsize > HOST_SUMMARY_MAX_BYTES:
        return None
    with np.errstate(over="ignore", invalid="ignore"):  # out-of-range values: the checks below name them
        values = np.asarray(X, Xj.dtype)
    summary, lo, hi = HostDesign.raw(values, Xj.dtype).summarize(None if w is None else np.asarray(w))
    return jax.device_put((summary, lo, hi))


def _host_sparse_summary(csr, raw, w):
    """:func:`_host_summary` for a CSR X of at most :data:`HOST_SUMMARY_MAX_BYTES` of stored values
    (the device design ``raw`` summarises any other, and weights inside a user's jit)."""
    if csr is None or not isinstance(raw, SparseDesign) or is_traced(w):
        return None
    if csr.nnz * (csr.dtype.itemsize + 4) > HOST_SUMMARY_MAX_BYTES:
        return None
    summary, lo, hi = HostSparseDesign.raw(csr).summarize(None if w is None else np.asarray(w))
    return jax.device_put((summary, lo, hi))


def _groups(groups, d: int, dtype):
    if groups is None:
        return None
    return as_groups(None if isinstance(groups, str) and groups == "singletons" else groups, d, dtype=dtype)


def _check_values(original, Xj, summary, col_min, col_max, scale, *, dtype=None, n=None) -> None:
    """NaN/Inf and magnitude checks from the summary pass (a no-op on traced X)."""
    values = host_value(lambda: (col_min, col_max, summary.mean))
    if values is None:
        return
    dtype = Xj.dtype if dtype is None else dtype
    n = Xj.shape[0] if n is None else n
    lo, hi, mean = (np.asarray(v) for v in values)
    if not (np.isfinite(lo).all() and np.isfinite(hi).all() and np.isfinite(mean).all()):
        raise_nonfinite(original, "X", dtype, "remove or impute those entries first")
    if scale is not None:
        message = scale_error(lo, hi, n, "X", dtype, squares=scale == "squares")
        if message is not None:
            raise ValueError(message)


def _host_data(
    X, Y, sample_weight, groups, targets, n_classes, constant_columns, scale, dtype, min_rows, with_moments, progress
) -> Data:
    """``storage="host"``: X stays where it is (numpy, memmap); the summary pass runs on the host."""
    X = host_matrix(X, "X", min_rows=min_rows)
    dtype = np.dtype(dtype) if dtype is not None else float_dtype_for(X.dtype)
    w = as_sample_weight(sample_weight, X.shape[0])
    groups = _groups(groups, X.shape[1], dtype)
    if with_moments:
        if targets != "regression":
            raise ValueError("with_moments=True needs real targets (targets='regression')")
        Y, y_1d = host_targets(Y, X.shape[0], "Y")
        moments = moments_host(X, Y, None if w is None else np.asarray(w), dtype, progress=check_progress(progress))
        check_moments(moments, constant_columns)
        summary = summary_from_moments(moments, xp=np)  # on the host: also inside a user's jit
        w = None if w is None else np.asarray(w, dtype)
        return Data(HostDesign.from_summary(X, summary), Y, w, summary, groups, None, y_1d, moments)
    w = None if w is None else np.asarray(w, dtype)
    Y, C, y_1d = _targets(Y, X.shape[0], targets, dtype, n_classes)
    raw = HostDesign.raw(X, dtype)
    summary, col_min, col_max = raw.summarize(w)
    _check_values(X, None, summary, col_min, col_max, scale, dtype=dtype, n=X.shape[0])
    check_constant_columns(summary.live, constant_columns)
    return Data(raw.standardized(summary), Y, w, summary, groups, C, y_1d)


def _sparse_data(
    X, Y, sample_weight, groups, targets, n_classes, constant_columns, scale, dtype, min_rows, storage, with_moments
) -> Data:
    """Sparse X: canonical CSR, summary from the stored entries, a sparse design operator."""
    if with_moments:
        raise ValueError(
            "sparse X has no moments pass: with_moments=True (the Gram mode of prepare) forms the dense D x D "
            "moments on dense X; pass X.toarray() if it fits in memory, or with_moments=False (the design "
            "operator then gives Gram columns lazily, gram_columns)"
        )
    if isinstance(X, SparseDesign):  # e.g. row-sharded by shard_rows: the matrix it stores is X
        csr, raw = None, as_raw_design(X, dtype=dtype, min_rows=min_rows)
    else:
        csr = as_sparse_csr(X, "X", dtype=dtype, min_rows=min_rows)
    n, d = raw.shape if csr is None else csr.shape
    dtype = raw.dtype if csr is None else csr.dtype
    w = as_sample_weight(sample_weight, n)
    groups = _groups(groups, d, dtype)
    Y, C, y_1d = _targets(Y, n, targets, dtype, n_classes)
    if storage == "host" and csr is not None:
        w = None if w is None else np.asarray(w, dtype)
        raw = HostSparseDesign.raw(csr)
    else:
        w = None if w is None else as_device(w, dtype)
        raw = SparseDesign.raw(csr) if csr is not None else raw
    summary, col_min, col_max = _host_sparse_summary(csr, raw, w) or raw.summarize(w)
    _check_values(X if csr is not None else None, None, summary, col_min, col_max, scale, dtype=dtype, n=n)
    check_constant_columns(summary.live, constant_columns)
    return Data(raw.standardized(summary), Y, w, summary, groups, C, y_1d)


def check_moments(moments, constant_columns: str) -> None:
    """The constant-column rule and the scale checks on concrete :class:`~jaxselect.Moments`."""
    m = jax.tree.map(np.asarray, moments)
    check_constant_columns(~m.constant, constant_columns)
    check_scales(m.n_samples, m.constant, np.diagonal(m.gram), m.y_constant, m.y_var, m.x_spread)


def host_matrix(X, name: str = "X", *, min_rows: int = MIN_ROWS) -> np.ndarray:
    """Shape and dtype checks of a host X, without copying or converting it (a memmap stays one)."""
    X = X if isinstance(X, np.ndarray) else np.asarray(X)
    check_matrix(X, name, min_rows=min_rows)
    return X


def host_targets(Y, n: int, name: str = "Y") -> tuple[np.ndarray, bool]:
    """Host targets as an (n, T) view and whether they were 1-D (finiteness: the moments kernel)."""
    Y = np.asarray(Y)
    check_targets(Y, n, name)
    return (Y[:, None], True) if Y.ndim == 1 else (Y, False)
