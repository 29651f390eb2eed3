"""Feature groups with acquisition costs: the partition every sequencing solver works over.

A :class:`Groups` holds, for D features in J groups,

* ``ids``   (D,)  int32 — the group 0..J-1 of every feature,
* ``costs`` (J,)  float — the cost c(g) > 0 of computing group g,
* ``index`` (J, s_max) int32 — the features of each group, padded with D (an out-of-range index,
  so gathers use ``mode="fill"`` and scatters ``mode="drop"``); real members come first,
* ``mask``  (J, s_max) bool — which entries of ``index`` are real,

so that "for every group" is a ``vmap`` or a batched gather over the padded table. Singleton groups
with unit costs are the plain (non-group, cost-blind) case, not a separate code path.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect._repr import short_repr
from jaxselect._validation import default_float, host_value

__all__ = ["Groups", "as_groups", "check_costs"]


class Groups(NamedTuple):
    """A partition of D features into J groups, each with a cost: the unit every solver selects.

    Build one with :meth:`Groups.from_ids` (validated) or :meth:`Groups.singletons`; solvers also
    accept ``groups=None`` (every feature its own group, unit costs) or a (D,) array of group ids.
    Costs always come from here: a budget is a cumulative sum of ``costs`` of the chosen groups.
    A ``Groups`` is a pytree (a ``NamedTuple`` of arrays), so it passes through ``jax.jit`` and
    ``jax.vmap`` (e.g. over stacked cost vectors); a fresh but equal ``Groups`` does not recompile.

    Attributes:
      ids: (D,) int32, the group 0..J-1 of every feature.
      costs: (J,) float, the cost c(g) > 0 of group g (float32; float64 under ``jax_enable_x64``).
      index: (J, s_max) int32, the features of each group, real members first, padded with D.
      mask: (J, s_max) bool, which entries of ``index`` are real.

    Properties ``n_groups`` (J), ``n_features`` (D), ``max_size`` (s_max) and ``sizes`` ((J,)
    features per group).

    Raises (from :meth:`from_ids`):
      ValueError: ids that are not 0..J-1 with every group non-empty, costs of the wrong length,
        costs that are not finite and > 0, or costs outside the float32 range (see
        ``docs/robustness.md``).
      TypeError: non-integer id or non-numeric cost dtypes.

    >>> import jaxselect as js
    >>> g = js.Groups.from_ids([0, 0, 1, 2, 2], costs=[1.0, 5.0, 2.5])  # 5 features, 3 groups
    >>> g.n_groups, g.n_features, g.max_size
    (3, 5, 2)
    >>> g.sizes.tolist(), g.costs.tolist()
    ([2, 1, 2], [1.0, 5.0, 2.5])
    >>> g.index.tolist()  # padded with D = 5
    [[0, 1], [2, 5], [3, 4]]
    >>> js.Groups.singletons(3).costs.tolist()
    [1.0, 1.0, 1.0]
    """

    ids: jax.Array
    costs: jax.Array
    index: jax.Array
    mask: jax.Array

    __repr__ = short_repr

    @property
    def n_groups(self) -> int:
        return self.costs.shape[0]

    @property
    def n_features(self) -> int:
        return self.ids.shape[0]

    @property
    def max_size(self) -> int:
        return self.index.shape[1]

    @property
    def sizes(self) -> jax.Array:
        """(J,) number of features in each group."""
        return self.mask.sum(axis=1)

    @classmethod
    def from_ids(cls, ids, costs=None, *, dtype=None) -> "Groups":
        """Build and validate a partition from per-feature group ids.

        Args:
          ids: (D,) integers; feature d belongs to group ``ids[d]``. Every id in 0..J-1 must occur
            (no empty groups), J = max(ids) + 1.
          costs: (J,) finite costs > 0, one per group; default all ones (cost-blind).
          dtype: float dtype of ``costs`` (default float32, float64 under x64).

        Returns:
          A validated :class:`Groups`.

        >>> g = Groups.from_ids([0, 0, 1, 2, 2, 2], costs=[1.0, 5.0, 2.0])
        >>> g.n_groups, g.max_size
        (3, 3)
        """
        ids = np.asarray(ids)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError(f"group ids must be a non-empty 1-D array (one id per feature); got shape {ids.shape}")
        if ids.dtype.kind == "f":
            if not np.all(np.isfinite(ids)) or not np.all(ids == np.round(ids)):
                raise ValueError("group ids must be integers 0..J-1")
        elif ids.dtype.kind not in "iu":
            raise TypeError(f"group ids must be integers 0..J-1; got dtype {ids.dtype}")
        if ids.min() < 0:
            raise ValueError(f"group ids must be integers 0..J-1; got negative id {ids.min()}")
        if ids.max() >= ids.shape[0]:  # before any allocation of max(ids) + 1 entries
            raise ValueError(
                f"group ids must be integers 0..J-1 with every group non-empty, so J <= {ids.shape[0]} (the "
                f"number of features); got id {ids.max()} — renumber the ids consecutively, e.g. "
                "np.unique(ids, return_inverse=True)[1]"
            )
        ids = ids.astype(np.int64)
        n_groups = int(ids.max()) + 1
        sizes = np.bincount(ids, minlength=n_groups)
        empty = np.flatnonzero(sizes == 0)
        if empty.size:
            raise ValueError(
                f"group ids must cover every group 0..{n_groups - 1}; group(s) {empty[:10].tolist()} "
                "have no features (renumber the ids consecutively, e.g. np.unique(ids, return_inverse=True)[1])"
            )
        dtype = np.dtype(dtype or default_float())
        if costs is None:
            costs = np.ones(n_groups, dtype=dtype)
        else:
            raw = np.asarray(costs)
            if raw.dtype == object or raw.dtype.kind not in "biuf":
                raise TypeError(f"costs must be real numbers, one per group; got dtype {raw.dtype}")
            costs = raw.astype(np.float64)
            if costs.ndim != 1 or costs.shape[0] != n_groups:
                raise ValueError(f"costs must have one entry per group: shape ({n_groups},); got {costs.shape}")
            bad = np.flatnonzero(~np.isfinite(costs) | (costs <= 0))
            if bad.size:
                raise ValueError(f"costs must be finite and > 0; got {costs[bad[0]]} for group {bad[0]}")
            costs = check_costs(costs, dtype)
        max_size = int(sizes.max())
        n_features = ids.shape[0]
        index = np.full((n_groups, max_size), n_features, dtype=np.int32)
        order = np.argsort(ids, kind="stable")
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        rank = np.arange(n_features) - starts[ids[order]]
        index[ids[order], rank] = order
        mask = index < n_features
        # device_put, not jnp.asarray: host data becomes device arrays without a compiled copy program
        put = jax.device_put
        return cls(put(ids.astype(np.int32)), put(np.asarray(costs)), put(index), put(mask))

    @classmethod
    def singletons(cls, n_features: int, costs=None, *, dtype=None) -> "Groups":
        """Every feature its own group (the plain, non-grouped case); ``costs`` (D,) default all ones.

        >>> Groups.singletons(4, costs=[1.0, 2.0, 1.0, 3.0]).ids.tolist()
        [0, 1, 2, 3]
        """
        return cls.from_ids(np.arange(n_features), costs, dtype=dtype)


def as_groups(groups, n_features: int, *, dtype=None) -> Groups:
    """Accept ``None`` (singletons, unit costs), an ids array, or a :class:`Groups`; check D matches."""
    if groups is None:
        return Groups.singletons(n_features, dtype=dtype)
    if not isinstance(groups, Groups):
        groups = Groups.from_ids(groups, dtype=dtype)
    if groups.n_features != n_features:
        raise ValueError(
            f"groups cover {groups.n_features} features but X has {n_features} columns; give one group id per column"
        )
    if dtype is not None and groups.costs.dtype != np.dtype(dtype):
        values = host_value(lambda: groups.costs)
        if values is not None:  # concrete: the costs must survive the cast (e.g. float64 → float32)
            check_costs(values.astype(np.float64), np.dtype(dtype))
        groups = groups._replace(costs=groups.costs.astype(dtype))
    return groups


def check_costs(costs: np.ndarray, dtype) -> np.ndarray:
    """Costs (J,) (finite, > 0, given in float64) as ``dtype``, checked in that dtype.

    ValueError when a cost underflows the dtype's normal range (it would become 0 or lose its
    precision: ``1e-46`` in float32), or when the costs' total overflows (a cost of ``1e39``, or
    costs whose cumulative sum — the path's ``cum_cost``, compared with budgets — is not finite in
    float32). Only ratios of costs matter to every solver: rescale them by a common factor.
    """
    dtype = np.dtype(dtype)
    info = np.finfo(dtype)
    small = np.flatnonzero(costs < info.tiny)
    if small.size:
        j = int(small[0])
        raise ValueError(
            f"costs must be >= {info.tiny:.3g} (the smallest normal {dtype}); got {costs[j]:.3g} for group {j} — "
            "only ratios of costs matter: multiply every cost by a common factor (or use float64)"
        )
    total = float(np.sum(costs))
    if not total <= float(info.max) / 4:
        raise ValueError(
            f"costs are too large for {dtype}: their total {total:.3g} (the largest cumulative cost) must "
            f"stay below {float(info.max) / 4:.3g} — only ratios of costs matter: divide every cost by a common "
            "factor (or use float64)"
        )
    return costs.astype(dtype)
