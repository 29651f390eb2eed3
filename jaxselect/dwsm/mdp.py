"""The datum-wise acquisition MDP and its four variants.

Dulac-Arnold, Denoyer, Preux & Gallinari, "Sequential approaches for learning datum-wise sparse
representations", Machine Learning 89 (2012) — §3.1 (states, actions, transition, rewards) and
§4.2, Table 2 (hard budget, cost-sensitive, grouped and relational variants).

One code path serves every variant. Features are organised in J *units* (acquisition actions), the
groups of a :class:`~jaxselect.Groups`: a unit is one feature (the base model, ``groups=None``) or
one group of features (§4.2.4), and unit j has the cost ``c_j = Groups.costs[j]`` (1 unless costs are
given). With z ∈ {0,1}^J the acquired units (the feature mask is ``z[groups.ids]``), the MDP for a
training datum (x, y) is

* actions ``A(x, z)``: the C classification actions (always allowed, terminal) and the acquisition
  of every unit j with ``z_j = 0`` that has a non-constant feature and fits the hard budget B,
  ``Σ_{k: z_k=1} c_k + c_j <= B`` (Table 2, "hard budget"; ``B = ∞`` when no budget is given; the
  comparison allows a relative tolerance of ``32·eps`` of the dtype so that float32 rounding of a
  sum of costs never drops a unit that fits exactly);
* transition: acquiring unit j sets ``z_j = 1`` (for a group, ``z + Σ_{i∈F_j} e_i``);
* reward for acquiring unit j in state z:
  ``r = −c_j · (λ if Related(j, k) for every acquired unit k else γ)``, with ``Related`` all-true
  unless a relation is given (relational, §4.2.5; an empty z is related to everything, so the first
  acquisition costs λ·c_j);
* reward for classifying as c: ``r = −C[c, y]`` with the cost matrix C (default ``1 − I``: 0 if
  right, −1 if wrong, §3.1.2).

So the return of a full episode is minus the datum-wise loss of paper eq. (4)/Table 1:
``−(Σ_t c_{j_t} ρ_t + C[ŷ, y])`` with ρ_t = λ or γ. With unit costs, singleton units and no
relation this is ``−(λ ‖z‖₀ + Δ(ŷ, y))`` (eq. 2), and the budget is the paper's ``‖z‖₀ <= M``;
with groups and unit costs it is ``−(λ · #groups + Δ)`` (eq. 8) and the budget counts groups.

Choices the paper leaves open (documented here and in ``docs/dwsm.md``):

* costs multiply λ: ``r = −λ c_j``. The paper's cost-sensitive reward −ξ_j is ``lam=1``.
* the hard budget is a cumulative cost (the library's one meaning of ``budget``). To bound the
  number of *features* ‖z‖₀ of grouped units (Table 1's count), give each group the cost of its
  size, ``Groups.from_ids(ids, costs=sizes)`` (the acquisition reward is then −λ·|F_j| as well).
* a unit whose features are all constant on the training data is never acquirable (constant
  columns are inert, the library's rule).
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect._budget import budget_rtol
from jaxselect._budget import within_budget as _within_budget
from jaxselect._repr import short_repr
from jaxselect.groups import Groups, as_groups

from .._validation import as_hyper, check_magnitudes, default_float, host_hyper

__all__ = [
    "DWSMSpec",
    "make_spec",
    "as_unit_groups",
    "budget_rtol",
    "within_budget",
    "acquire_allowed",
    "acquire_reward",
    "classify_reward",
    "feature_mask",
    "unit_live",
]


#: What to do about rewards too large for the compute dtype (the policy depends on their ratios only).
REWARD_SCALE_FIX = (
    "the learned policy depends only on the ratios of the rewards: divide cost_matrix, lam and "
    "gamma by a common factor (or the groups' costs), or use float64"
)


class DWSMSpec(NamedTuple):
    """The MDP of one problem (all arrays, so a policy carrying it is a plain pytree).

    Attributes:
      groups: the :class:`~jaxselect.Groups` of the units: ``ids`` (d,) unit of every feature,
        ``costs`` (J,) acquisition cost c_j of every unit, ``index``/``mask`` (J, s_max) members.
      live: (J,) bool, unit j can be acquired (it has a non-constant feature on the training data;
        all True in a spec from :func:`make_spec`, set by the fit).
      related: (J, J) bool, ``related[j, k]``: acquiring j is "related" to an acquired k; shape
        (0, 0) when there is no relation (everything related; a static flag for the compiler).
      cost_matrix: (C, C) float, ``cost_matrix[c, y]`` cost of predicting c when the class is y.
      lam: () float λ, reward multiplier of a related (or any, without a relation) acquisition.
      gamma: () float γ, reward multiplier of an unrelated acquisition.
      budget: () float hard budget B on the summed cost of the acquired units (``inf``: none).
    """

    groups: Groups
    live: jax.Array
    related: jax.Array
    cost_matrix: jax.Array
    lam: jax.Array
    gamma: jax.Array
    budget: jax.Array

    __repr__ = short_repr

    @property
    def n_features(self) -> int:
        return int(self.groups.ids.shape[0])

    @property
    def n_units(self) -> int:
        return int(self.groups.costs.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.cost_matrix.shape[0])

    @property
    def n_actions(self) -> int:
        return self.n_classes + self.n_units


def as_unit_groups(groups, d: int, *, dtype=None) -> Groups:
    """The units of a DWSM problem as a :class:`~jaxselect.Groups`.

    Args:
      groups: None (every feature its own unit, unit costs), a (d,) array of group ids 0..J-1, a
        :class:`~jaxselect.Groups` (its costs are the units' costs), or — a convenience — a sequence
        of J sequences of feature indices that together cover every feature exactly once (unit
        costs; build a ``Groups`` to give costs).
      d: number of features.
      dtype: float dtype of the costs.

    Returns:
      A validated :class:`~jaxselect.Groups` over d features.
    """
    if groups is not None and not isinstance(groups, (Groups, np.ndarray, jax.Array)):
        is_nested = len(groups) > 0 and all(isinstance(g, (list, tuple, np.ndarray, range)) for g in groups)
        if is_nested:
            groups = _nested_to_ids(groups, d)
    if groups is None:  # on the host: no device work (no program compiled) for the plain case
        f = np.dtype(dtype or default_float())
        return _device_leaves(Groups(
            np.arange(d, dtype=np.int32),
            np.ones(d, f),
            np.arange(d, dtype=np.int32)[:, None],
            np.ones((d, 1), bool),
        ))
    if groups is not None and not isinstance(groups, Groups):
        ids = np.asarray(groups)
        if ids.ndim != 1 or ids.shape[0] != d:
            raise ValueError(f"groups must be a (d,)=({d},) array of group ids; got shape {ids.shape}")
        try:
            groups = Groups.from_ids(ids, dtype=dtype)
        except ValueError as err:
            raise ValueError(f"groups must be a partition of the features: {err}") from None
    return as_groups(groups, d, dtype=dtype)


def _nested_to_ids(groups, d: int) -> np.ndarray:
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


def check_budget(budget, dtype):
    """A budget B >= 0 as a () array, or None (no budget: None, or a host number beyond the dtype's range)."""
    if budget is None:
        return None
    if isinstance(budget, jax.Array):
        # possibly traced (inside a user's jit): checked by as_hyper where concrete, shape only
        # where traced (a NaN or negative traced budget lets no unit be acquired)
        if budget.dtype == bool:
            raise TypeError(f"budget must be a real number (a cumulative cost); got dtype {budget.dtype}")
        try:
            return as_hyper(budget, "budget", dtype, low=0.0)
        except ValueError as err:
            raise ValueError(f"{err} (a budget given as a jax.Array must be a finite number >= 0; None: no budget)") from None
    if isinstance(budget, (bool, np.bool_)):
        raise TypeError(f"budget must be a real number (a cumulative cost); got {budget!r}")
    if isinstance(budget, np.ndarray) and budget.shape == ():
        budget = budget.item()
    if not isinstance(budget, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"budget must be a real number (a cumulative cost) or None; got {budget!r}")
    if isinstance(budget, numbers.Integral):
        if int(budget) < 0:
            raise ValueError(f"budget must be >= 0; got {budget}")
        try:
            value = float(budget)
        except OverflowError:  # an integer beyond every float: no budget
            return None
    else:
        value = float(budget)
        if math.isnan(value):
            raise ValueError("budget must be a number >= 0; got NaN")
        if value < 0:
            raise ValueError(f"budget must be >= 0; got {value}")
    if math.isinf(value) or value > float(np.finfo(np.dtype(dtype)).max):
        return None  # larger than any sum of costs in this dtype: no budget
    return np.asarray(value, np.dtype(dtype))


def make_spec(
    d: int,
    n_classes: int,
    *,
    dtype=None,
    lam=0.01,
    gamma=None,
    budget=None,
    cost_matrix=None,
    groups=None,
    related=None,
) -> DWSMSpec:
    """Validate the variant options at the Python boundary and build the MDP spec.

    Args:
      d: number of features; n_classes: C.
      dtype: floating dtype of the rewards (default float32, float64 under x64).
      lam: λ >= 0 (may be traced). gamma: γ >= 0 (default 2λ; only matters with ``related``).
      budget: None (no budget) or B >= 0, a cumulative cost: a datum acquires unit j only while
        ``cost so far + c_j <= B`` (relative tolerance ``32·eps``). With unit costs B counts units
        (features without groups: the paper's ``‖z‖₀ <= M``); a Python or numpy budget beyond the
        dtype's range (``inf``) is no budget. A ``jax.Array`` budget (it may be traced) must be a
        finite scalar; concrete values are checked here, traced ones only for shape.
      cost_matrix: None (``1 − I``) or (C, C) finite costs ``C[predicted, true]`` within the
        dtype's range.
      groups: None (every feature its own unit, unit costs), (d,) ids, a
        :class:`~jaxselect.Groups` (costs c_j = ``groups.costs``), or a list of index lists.
      related: None or (J, J) boolean relation between units (J = d without groups).

    Returns:
      A :class:`DWSMSpec`.
    """
    f = np.dtype(dtype or default_float())
    lam = host_hyper(lam, "lam", f, low=0.0)
    if gamma is None:
        gamma = (2.0 * lam).astype(f) if isinstance(lam, np.ndarray) else 2.0 * lam
    else:
        gamma = host_hyper(gamma, "gamma", f, low=0.0)
    budget_val = check_budget(budget, f)
    if budget_val is None:
        budget_val = np.asarray(np.inf, f)
    units = as_unit_groups(groups, d, dtype=f)
    J = units.n_groups

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
        check_magnitudes({"max |cost_matrix|": float(np.max(np.abs(cm)))}, f, fix=REWARD_SCALE_FIX)

    if related is None:
        rel = np.ones((0, 0), dtype=bool)  # no relation: every acquisition costs λ c_j
    else:
        rel = np.asarray(related)
        if rel.ndim != 2 or rel.shape[0] != rel.shape[1]:
            raise ValueError(f"related must be a square (J, J) boolean matrix; got shape {rel.shape}")
        if rel.shape[0] != J:
            what = "features" if J == d else "groups"
            raise ValueError(f"related must be ({J}, {J}) (one row per {what}); got {rel.shape}")
        if rel.dtype != bool:
            if rel.dtype.kind not in "iuf" or not np.all(np.isin(rel, (0, 1))):
                raise TypeError(f"related must be a boolean matrix (or hold only 0/1); got dtype {rel.dtype}")
            rel = rel.astype(bool)

    # host values put on the device as they are (jax.device_put compiles no program, where
    # jnp.asarray of a host array compiles a small conversion program per shape)
    return _device_leaves(DWSMSpec(
        groups=units,
        live=np.ones((J,), bool),
        related=np.asarray(rel),
        cost_matrix=np.asarray(cm, dtype=f),
        lam=lam,
        gamma=gamma,
        budget=budget_val,
    ))


def _device_leaves(tree):
    """The host (numpy) leaves of ``tree`` put on the default device (traced leaves as they are)."""
    return jax.tree.map(lambda v: jax.device_put(v) if isinstance(v, np.ndarray) else v, tree)


def within_budget(spent: jax.Array, cost: jax.Array, budget: jax.Array) -> jax.Array:
    """``spent + cost <= budget`` up to the library's relative budget tolerance
    (:func:`jaxselect._budget.within_budget`, 32 machine epsilons); broadcasts."""
    return _within_budget(spent + cost, budget)


def acquire_allowed(spec: DWSMSpec, z: jax.Array, spent: jax.Array) -> jax.Array:
    """(J,) bool: units acquirable in state z, ``~z_j and live_j and spent + c_j <= B`` (Table 2)."""
    return (~z) & spec.live & within_budget(spent, spec.groups.costs, spec.budget)


def acquire_reward(spec: DWSMSpec, z: jax.Array) -> jax.Array:
    """(J,) reward of acquiring every unit in state z: ``−c_j (λ if related to all acquired else γ)``.

    >>> import jax.numpy as jnp
    >>> s = make_spec(3, 2, dtype=jnp.float32, lam=0.1, gamma=0.5,
    ...               related=jnp.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]], bool))
    >>> acquire_reward(s, jnp.array([True, False, False])).tolist()
    [-0.10000000149011612, -0.10000000149011612, -0.5]
    """
    costs = spec.groups.costs
    if spec.related.shape[0] == 0:
        return -costs * spec.lam
    unrelated = jnp.any(~spec.related & z[None, :], axis=1)
    rho = jnp.where(unrelated, spec.gamma, spec.lam)
    return -costs * rho


def classify_reward(spec: DWSMSpec, y: jax.Array) -> jax.Array:
    """(C,) reward of every classification action for a datum of class y: ``−C[c, y]``."""
    return -spec.cost_matrix[:, y]


def feature_mask(spec: DWSMSpec, z: jax.Array) -> jax.Array:
    """(..., d) bool feature mask of a (..., J) unit mask."""
    return jnp.take(z, spec.groups.ids, axis=-1)


def unit_live(groups: Groups, live: jax.Array) -> jax.Array:
    """(J,) bool: the unit has a live (non-constant) feature, from the (d,) feature flags ``live``."""
    member_live = jnp.take(live, groups.index, mode="fill", fill_value=False)
    return jnp.any(member_live & groups.mask, axis=1)
