"""The datum-wise acquisition MDP and its four variants.

Dulac-Arnold, Denoyer, Preux & Gallinari, "Sequential approaches for learning datum-wise sparse
representations", Machine Learning 89 (2012) — §3.1 (states, actions, transition, rewards) and
§4.2, Table 2 (hard budget, cost-sensitive, grouped and relational variants).

One code path serves every variant. Features are organised in J *units* (acquisition actions): a
unit is one feature (the base model) or one group of features (§4.2.4). With z ∈ {0,1}^J the
acquired units (the feature mask is ``z[groups]``), the MDP for a training datum (x, y) is

* actions ``A(x, z)``: the C classification actions (always allowed, terminal) and the acquisition
  of every unit j with ``z_j = 0`` whose size fits the hard budget, ``count(z) + size_j <= M``
  (Table 2, "hard budget"; ``M = ∞`` when no budget is given);
* transition: acquiring unit j sets ``z_j = 1`` (for a group, ``z + Σ_{i∈F_j} e_i``);
* reward for acquiring unit j in state z:
  ``r = −ξ_j · (λ if Related(j, k) for every acquired unit k else γ)``, with ξ_j = 1 unless
  feature costs are given (cost-sensitive, §4.2.3) and ``Related`` all-true unless a relation is
  given (relational, §4.2.5; an empty z is related to everything, so the first acquisition costs
  λ·ξ_j);
* reward for classifying as c: ``r = −C[c, y]`` with the cost matrix C (default ``1 − I``: 0 if
  right, −1 if wrong, §3.1.2).

So the return of a full episode is minus the datum-wise loss of paper eq. (4)/Table 1:
``−(Σ_t ξ_{j_t} ρ_t + C[ŷ, y])`` with ρ_t = λ or γ. With unit costs, singleton units and no
relation this is ``−(λ ‖z‖₀ + Δ(ŷ, y))`` (eq. 2); with groups ``−(λ · #groups + Δ)`` (eq. 8).

Choices the paper leaves open (documented here and in the README section):
* ``feature_costs`` multiply λ: ``r = −λ ξ_j``. The paper's cost-sensitive reward −ξ_j is ``lam=1``.
* with groups, the hard budget counts *features* ``‖z‖₀`` (Table 1) by default; a group is
  acquirable only if all its features fit. ``budget_unit="groups"`` counts groups instead.
* feature costs may be given per feature (d,) — a group then costs the sum of its members — or per
  group (J,).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect.groups import Groups

from .._validation import check_float, check_int

__all__ = [
    "DWSMSpec",
    "make_spec",
    "acquire_allowed",
    "acquire_reward",
    "classify_reward",
    "feature_mask",
    "groups_to_ids",
]

_NO_BUDGET = np.iinfo(np.int32).max // 2


class DWSMSpec(NamedTuple):
    """The MDP of one problem (all arrays, so a policy carrying it is a plain pytree).

    Attributes:
      groups: (d,) int32 unit (group) id of every feature, 0..J-1.
      unit_cols: (J, s_max) int32 feature indices of each unit, padded with 0.
      unit_valid: (J, s_max) bool, which entries of ``unit_cols`` are real.
      unit_size: (J,) int32 budget units used by acquiring each unit (its number of features, or
        1 with ``budget_unit="groups"``).
      unit_cost: (J,) float ξ_j, acquisition cost multiplier of each unit (1 without costs).
      related: (J, J) bool, ``related[j, k]``: acquiring j is "related" to an acquired k; shape
        (0, 0) when there is no relation (everything related; a static flag for the compiler).
      cost_matrix: (C, C) float, ``cost_matrix[c, y]`` cost of predicting c when the class is y.
      lam: () float λ, reward multiplier of a related (or any, without a relation) acquisition.
      gamma: () float γ, reward multiplier of an unrelated acquisition.
      budget: () int32 hard budget M (a huge number when there is none).
    """

    groups: jax.Array
    unit_cols: jax.Array
    unit_valid: jax.Array
    unit_size: jax.Array
    unit_cost: jax.Array
    related: jax.Array
    cost_matrix: jax.Array
    lam: jax.Array
    gamma: jax.Array
    budget: jax.Array

    @property
    def n_features(self) -> int:
        return int(self.groups.shape[0])

    @property
    def n_units(self) -> int:
        return int(self.unit_size.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.cost_matrix.shape[0])

    @property
    def n_actions(self) -> int:
        return self.n_classes + self.n_units


def groups_to_ids(groups, d: int) -> np.ndarray:
    """Validate a feature partition and return the (d,) group id of every feature.

    Args:
      groups: either a (d,) integer array of group ids using every id 0..J-1, or a sequence of J
        sequences of feature indices that together cover every feature exactly once.
      d: number of features.

    Returns:
      (d,) int64 numpy array of ids in 0..J-1.
    """
    if groups is None:
        return np.arange(d, dtype=np.int64)
    is_nested = (
        not isinstance(groups, (np.ndarray, jax.Array))
        and len(groups) > 0
        and all(isinstance(g, (list, tuple, np.ndarray, range)) for g in groups)
    )
    if is_nested:
        ids = np.full(d, -1, dtype=np.int64)
        for j, members in enumerate(groups):
            members = np.asarray(members)
            if members.ndim != 1 or members.size == 0:
                raise ValueError(f"groups: group {j} must be a non-empty 1-D list of feature indices")
            if members.dtype.kind not in "iu":
                raise TypeError(f"groups: group {j} must hold integer feature indices; got {members.dtype}")
            if members.min() < 0 or members.max() >= d:
                raise ValueError(f"groups: group {j} has a feature index outside 0..{d - 1}")
            if np.any(ids[members] >= 0) or len(np.unique(members)) != members.size:
                raise ValueError(
                    "groups must be a partition of the features; feature(s) "
                    f"{sorted(set(members[ids[members] >= 0].tolist()))} appear in more than one group"
                )
            ids[members] = j
        if np.any(ids < 0):
            raise ValueError(
                "groups must be a partition of the features; features "
                f"{np.flatnonzero(ids < 0).tolist()[:10]} are in no group"
            )
        return ids
    if isinstance(groups, Groups):
        groups = groups.ids
    ids = np.asarray(groups)
    if ids.ndim != 1 or ids.shape[0] != d:
        raise ValueError(f"groups must be a (d,)=({d},) array of group ids; got shape {ids.shape}")
    # the same partition checks as every other solver's groups
    try:
        return np.asarray(Groups.from_ids(ids).ids, dtype=np.int64)
    except ValueError as err:
        raise ValueError(f"groups must be a partition of the features: {err}") from None


def make_spec(
    d: int,
    n_classes: int,
    *,
    dtype,
    lam=0.01,
    gamma=None,
    budget=None,
    budget_unit: str = "features",
    feature_costs=None,
    cost_matrix=None,
    groups=None,
    related=None,
) -> DWSMSpec:
    """Validate the variant options at the Python boundary and build the MDP spec.

    Args:
      d: number of features; n_classes: C.
      dtype: floating dtype of the rewards.
      lam: λ >= 0. gamma: γ >= 0 (default 2λ; only matters with ``related``).
      budget: None or hard budget M >= 0 (‖z‖₀ <= M, Table 2).
      budget_unit: ``"features"`` (count ‖z‖₀, the paper's) or ``"groups"``.
      feature_costs: None, (d,) per-feature or (J,) per-group costs ξ > 0.
      cost_matrix: None (``1 − I``) or (C, C) finite costs ``C[predicted, true]``.
      groups: None (every feature its own unit), (d,) ids, or a list of index lists.
      related: None or (J, J) boolean relation between units (J = d without groups).

    Returns:
      A :class:`DWSMSpec`.
    """
    lam = check_float(lam, "lam", low=0.0)
    if gamma is None:
        gamma = 2.0 * lam
    gamma = check_float(gamma, "gamma", low=0.0)
    if budget_unit not in ("features", "groups"):
        raise ValueError(f"budget_unit must be 'features' or 'groups'; got {budget_unit!r}")
    if budget is None:
        budget_val = _NO_BUDGET
    else:
        budget_val = check_int(budget, "budget", low=0)
    ids = groups_to_ids(groups, d)
    J = int(ids.max()) + 1
    sizes = np.bincount(ids, minlength=J)
    s_max = int(sizes.max())
    cols = np.zeros((J, s_max), dtype=np.int32)
    valid = np.zeros((J, s_max), dtype=bool)
    for j in range(J):
        members = np.flatnonzero(ids == j)
        cols[j, : members.size] = members
        valid[j, : members.size] = True
    unit_size = sizes if budget_unit == "features" else np.ones(J, dtype=np.int64)

    if feature_costs is None:
        xi = np.ones(J)
    else:
        fc = np.asarray(feature_costs)
        if fc.dtype == object or fc.dtype.kind not in "biuf":
            raise TypeError(f"feature_costs must be numeric; got dtype {fc.dtype}")
        fc = fc.astype(np.float64)
        if fc.ndim != 1 or fc.shape[0] not in (d, J):
            want = f"({d},)" if J == d else f"({d},) per feature or ({J},) per group"
            raise ValueError(f"feature_costs must have shape {want}; got {fc.shape}")
        if not np.all(np.isfinite(fc)):
            raise ValueError("feature_costs contains NaN or Inf")
        if np.any(fc <= 0):
            bad = int(np.flatnonzero(fc <= 0)[0])
            raise ValueError(f"feature_costs must be > 0; got {fc[bad]} at index {bad}")
        xi = fc if fc.shape[0] == J else np.bincount(ids, weights=fc, minlength=J)

    if cost_matrix is None:
        cm = 1.0 - np.eye(n_classes)
    else:
        cm = np.asarray(cost_matrix)
        if cm.dtype == object or cm.dtype.kind not in "biuf":
            raise TypeError(f"cost_matrix must be numeric; got dtype {cm.dtype}")
        cm = cm.astype(np.float64)
        if cm.shape != (n_classes, n_classes):
            raise ValueError(
                f"cost_matrix must have shape (C, C)=({n_classes}, {n_classes}) "
                f"(cost_matrix[predicted, true]); got {cm.shape}"
            )
        if not np.all(np.isfinite(cm)):
            raise ValueError("cost_matrix contains NaN or Inf")

    if related is None:
        rel = np.ones((0, 0), dtype=bool)  # no relation: every acquisition costs λ ξ_j
    else:
        rel = np.asarray(related)
        if rel.ndim != 2 or rel.shape[0] != rel.shape[1]:
            raise ValueError(f"related must be a square (J, J) boolean matrix; got shape {rel.shape}")
        if rel.shape[0] != J:
            what = "features" if J == d else "groups"
            raise ValueError(f"related must be ({J}, {J}) (one row per {what}); got {rel.shape}")
        if rel.dtype != bool:
            if rel.dtype.kind not in "iuf" or not np.all(np.isin(rel, (0, 1))):
                raise TypeError(
                    f"related must be a boolean matrix (or hold only 0/1); got dtype {rel.dtype}"
                )
            rel = rel.astype(bool)

    f = dtype
    return DWSMSpec(
        groups=jnp.asarray(ids, dtype=jnp.int32),
        unit_cols=jnp.asarray(cols),
        unit_valid=jnp.asarray(valid),
        unit_size=jnp.asarray(unit_size, dtype=jnp.int32),
        unit_cost=jnp.asarray(xi, dtype=f),
        related=jnp.asarray(rel),
        cost_matrix=jnp.asarray(cm, dtype=f),
        lam=jnp.asarray(lam, dtype=f),
        gamma=jnp.asarray(gamma, dtype=f),
        budget=jnp.asarray(budget_val, dtype=jnp.int32),
    )


def acquire_allowed(spec: DWSMSpec, z: jax.Array, count: jax.Array) -> jax.Array:
    """(J,) bool: units acquirable in state z, ``~z_j and count + size_j <= M`` (Table 2)."""
    return (~z) & (count + spec.unit_size <= spec.budget)


def acquire_reward(spec: DWSMSpec, z: jax.Array) -> jax.Array:
    """(J,) reward of acquiring every unit in state z: ``−ξ_j (λ if related to all acquired else γ)``.

    >>> import jax.numpy as jnp
    >>> s = make_spec(3, 2, dtype=jnp.float32, lam=0.1, gamma=0.5,
    ...               related=jnp.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]], bool))
    >>> acquire_reward(s, jnp.array([True, False, False])).tolist()
    [-0.10000000149011612, -0.10000000149011612, -0.5]
    """
    if spec.related.shape[0] == 0:
        return -spec.unit_cost * spec.lam
    unrelated = jnp.any(~spec.related & z[None, :], axis=1)
    rho = jnp.where(unrelated, spec.gamma, spec.lam)
    return -spec.unit_cost * rho


def classify_reward(spec: DWSMSpec, y: jax.Array) -> jax.Array:
    """(C,) reward of every classification action for a datum of class y: ``−C[c, y]``."""
    return -spec.cost_matrix[:, y]


def feature_mask(spec: DWSMSpec, z: jax.Array) -> jax.Array:
    """(..., d) bool feature mask of a (..., J) unit mask."""
    return jnp.take(z, spec.groups, axis=-1)
