"""The data layer: one front door (:func:`as_data`) and the design-operator protocol.

Layer 1 of the package (above the core helpers, below every problem builder and solver):

* :mod:`.weights` — the one ``sample_weight`` rule (:func:`as_sample_weight`);
* :mod:`.summary` — the one standardisation rule (:class:`ColumnSummary`, :func:`column_summary`);
* :mod:`.operators` — the :class:`DesignOperator` protocol and its implementations
  (:class:`DenseDesign` for device and row-sharded arrays, :class:`HostDesign` for host arrays and
  memmaps, :class:`TransposedDesign` for a compacted copy stored transposed);
* :mod:`.sparse` — sparse X (:class:`SparseDesign` on a device, :class:`HostSparseDesign` for
  ``scipy.sparse`` on the host), standardised implicitly and never densified;
* :mod:`.sparse_shard` — sparse rows split over devices and processes (:class:`ShardedSparseDesign`,
  built by ``shard_rows`` on sparse X);
* :mod:`.boundary` — :func:`as_data`, the validation of everything a user passes, returning a
  :class:`Data`.
"""

from jaxselect.design.boundary import TARGET_KINDS, Data, as_data, check_constant_columns, check_moments
from jaxselect.design.operators import HOST_BLOCK_BYTES, DenseDesign, DesignOperator, HostDesign, TransposedDesign
from jaxselect.design.sparse import HostSparseDesign, SparseDesign, as_sparse_csr, densify_sparse, is_sparse
from jaxselect.design.sparse_shard import ShardedSparseDesign
from jaxselect.design.summary import ColumnSummary, column_summary, standardize, summary_from_moments
from jaxselect.design.weights import as_sample_weight

__all__ = [
    "HOST_BLOCK_BYTES",
    "TARGET_KINDS",
    "ColumnSummary",
    "Data",
    "DenseDesign",
    "DesignOperator",
    "HostDesign",
    "HostSparseDesign",
    "ShardedSparseDesign",
    "SparseDesign",
    "TransposedDesign",
    "as_data",
    "as_sample_weight",
    "as_sparse_csr",
    "check_constant_columns",
    "check_moments",
    "column_summary",
    "densify_sparse",
    "is_sparse",
    "standardize",
    "summary_from_moments",
]
