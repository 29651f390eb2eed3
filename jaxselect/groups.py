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
from jaxselect._validation import default_float

__all__ = ["Groups", "as_groups"]


class Groups(NamedTuple):
    """A partition of D features into J costed groups (see module docstring for the fields)."""

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
        ids = ids.astype(np.int64)
        if ids.min() < 0:
            raise ValueError(f"group ids must be integers 0..J-1; got negative id {ids.min()}")
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
            costs = np.asarray(costs, dtype=np.float64)
            if costs.ndim != 1 or costs.shape[0] != n_groups:
                raise ValueError(f"costs must have one entry per group: shape ({n_groups},); got {costs.shape}")
            bad = np.flatnonzero(~np.isfinite(costs) | (costs <= 0))
            if bad.size:
                raise ValueError(f"costs must be finite and > 0; got {costs[bad[0]]} for group {bad[0]}")
            costs = costs.astype(dtype)
        max_size = int(sizes.max())
        n_features = ids.shape[0]
        index = np.full((n_groups, max_size), n_features, dtype=np.int32)
        order = np.argsort(ids, kind="stable")
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        rank = np.arange(n_features) - starts[ids[order]]
        index[ids[order], rank] = order
        mask = index < n_features
        return cls(jnp.asarray(ids, jnp.int32), jnp.asarray(costs), jnp.asarray(index), jnp.asarray(mask))

    @classmethod
    def singletons(cls, n_features: int, costs=None, *, dtype=None) -> "Groups":
        """Every feature its own group (the plain, non-grouped case)."""
        return cls.from_ids(np.arange(n_features), costs, dtype=dtype)


def as_groups(groups, n_features: int, *, dtype=None) -> Groups:
    """Accept ``None`` (singletons, unit costs), an ids array, or a :class:`Groups`; check D matches."""
    if groups is None:
        return Groups.singletons(n_features, dtype=dtype)
    if not isinstance(groups, Groups):
        groups = Groups.from_ids(groups, dtype=dtype)
    if groups.n_features != n_features:
        raise ValueError(
            f"groups cover {groups.n_features} features but X has {n_features} columns; "
            "give one group id per column"
        )
    if dtype is not None and groups.costs.dtype != np.dtype(dtype):
        groups = groups._replace(costs=groups.costs.astype(dtype))
    return groups
