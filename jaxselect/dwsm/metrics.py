"""Evaluation helpers for datum-wise sparse classifiers (Dulac-Arnold et al. 2012, §6).

* accuracy ``= mean(ŷ = y)`` (1 − error rate, §6.1);
* mean sparsity ``= 1 − (1/N) Σ_i ‖z_i‖₀ / d``, the mean proportion of features *not* used (§6.1);
* average cost ``= (1/N) Σ_i [Σ_j c_j z_ij + C[ŷ_i, y_i]]`` with c_j the unit costs
  (``Groups.costs``) (Table 6: acquisition costs plus the misclassification cost, per datum);
* per-feature usage ``(1/N) Σ_i z_i`` (Fig. 4 left) and per-class usage (Fig. 8: mean mask over the
  correctly classified data of each class).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect._repr import short_repr
from jaxselect.programs import jit
from jaxselect.status import NONFINITE, OK

from .._validation import as_labels
from .mdp import as_unit_groups
from .policy import DWSMPolicy, dwsm_trace

__all__ = [
    "accuracy",
    "mean_sparsity",
    "average_cost",
    "feature_usage",
    "class_usage",
    "DWSMReport",
    "dwsm_evaluate",
]


def _mask(acquired) -> jax.Array:
    a = jnp.asarray(acquired)
    if a.ndim != 2:
        raise ValueError(f"acquired must be a (n, d) mask; got shape {a.shape}")
    return a.astype(bool)


def accuracy(labels, y) -> jax.Array:
    """Fraction of correct predictions: (n,), (n,) → ().

    >>> round(float(accuracy([0, 1, 1], [0, 1, 0])), 3)
    0.667
    """
    labels, y = jnp.asarray(labels).astype(jnp.int32), jnp.asarray(y).astype(jnp.int32)
    if labels.shape != y.shape:
        raise ValueError(f"labels {labels.shape} and y {y.shape} must have the same shape")
    return jnp.mean((labels == y).astype(jnp.float32))


def mean_sparsity(acquired) -> jax.Array:
    """Mean proportion of unused features, ``1 − mean_i ‖z_i‖₀ / d``: (n, d) bool → ().

    >>> mean_sparsity([[True, False], [False, False]])
    Array(0.75, dtype=float32)
    """
    a = _mask(acquired)
    return 1.0 - jnp.mean(a.astype(jnp.float32))


def average_cost(labels, acquired, y, *, groups=None, cost_matrix=None) -> jax.Array:
    """Mean per-datum cost ``Σ_j c_j z_ij + C[ŷ_i, y_i]`` (paper Table 6).

    Args:
      labels: (n,) predictions; acquired: (n, d) bool features used; y: (n,) true labels.
      groups: None (every feature its own unit, cost 1), (d,) group ids (cost 1 per group), a
        :class:`~jaxselect.Groups` (costs c_j from ``Groups.costs``) or a list of index lists; a
        group's cost is paid once when any of its features was acquired.
      cost_matrix: (C, C) ``C[predicted, true]`` (default ``1 − I``).

    Returns:
      () mean cost (computed in float64 on the host).

    >>> import jaxselect as js
    >>> average_cost([0, 1], [[True, False], [True, True]], [0, 0],
    ...              groups=js.Groups.from_ids([0, 1], costs=[1.0, 10.0]),
    ...              cost_matrix=[[0, 400], [800, 0]]).item()
    406.0
    """
    a = np.asarray(_mask(acquired))
    n, d = a.shape
    labels, y = np.asarray(labels), np.asarray(y)
    units = as_unit_groups(groups, d)
    ids = np.asarray(units.ids)
    J = units.n_groups
    unit_used = np.zeros((n, J), bool)
    for j in range(J):
        unit_used[:, j] = a[:, ids == j].any(axis=1)
    xi = np.asarray(units.costs, dtype=np.float64)
    C = int(max(labels.max(), y.max())) + 1 if cost_matrix is None else np.asarray(cost_matrix).shape[0]
    cm = 1.0 - np.eye(C) if cost_matrix is None else np.asarray(cost_matrix, dtype=np.float64)
    per = unit_used.astype(np.float64) @ xi + cm[labels, y]
    return jnp.asarray(per.mean())


def feature_usage(acquired) -> jax.Array:
    """Fraction of data that used each feature: (n, d) → (d,)."""
    return jnp.mean(_mask(acquired).astype(jnp.float32), axis=0)


def class_usage(acquired, y, n_classes: int | None = None, *, labels=None) -> jax.Array:
    """Mean feature mask per true class: (n, d), (n,) → (C, d).

    With ``labels`` given only the correctly classified data count (paper Fig. 8). A class with no
    (correct) datum gets a row of zeros.
    """
    a = _mask(acquired).astype(jnp.float32)
    y = jnp.asarray(y).astype(jnp.int32)
    C = int(n_classes) if n_classes is not None else int(jnp.max(y)) + 1
    keep = jnp.ones(y.shape, bool) if labels is None else (jnp.asarray(labels).astype(jnp.int32) == y)
    onehot = ((y[:, None] == jnp.arange(C, dtype=jnp.int32)[None, :]) & keep[:, None]).astype(jnp.float32)
    counts = jnp.sum(onehot, axis=0)
    return (onehot.T @ a) / jnp.maximum(counts, 1.0)[:, None]


class DWSMReport(NamedTuple):
    """Evaluation of a policy on (X, y) (see :func:`dwsm_evaluate`).

    Attributes:
      accuracy: () fraction correct.
      sparsity: () mean fraction of features not used.
      mean_features: () mean ‖z‖₀.
      mean_units: () mean number of acquisition actions (groups) per datum.
      average_cost: () mean ``Σ c_j z_j + C[ŷ, y]`` with the policy's unit costs c and C (λ not
        applied).
      mean_loss: () mean datum-wise loss = minus the mean episode reward (λ, γ applied).
      feature_usage: (d,) fraction of data using each feature.
      class_usage: (C, d) mean mask over the correctly classified data of each class.
      labels: (n,) predictions; acquired: (n, d) masks.
      status: () int32, the trace's ``status`` (the policy's, OR ``NONFINITE`` when θ or an
        episode's reward is not finite) OR ``NONFINITE`` when a cost or the loss is not finite.

    >>> import jax, numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(40, 3)); y = (X[:, 0] > 0).astype(int)
    >>> rep = js.dwsm_evaluate(js.dwsm_fit(jax.random.key(0), X, y, lam=0.05, n_iter=3), X, y)
    >>> rep.feature_usage.shape, rep.class_usage.shape, bool(0 <= rep.sparsity <= 1), int(rep.status)
    ((3,), (2, 3), True, 0)
    """

    accuracy: jax.Array
    sparsity: jax.Array
    mean_features: jax.Array
    mean_units: jax.Array
    average_cost: jax.Array
    mean_loss: jax.Array
    feature_usage: jax.Array
    class_usage: jax.Array
    labels: jax.Array
    acquired: jax.Array
    status: jax.Array

    __repr__ = short_repr


def dwsm_evaluate(policy: DWSMPolicy, X, y) -> DWSMReport:
    """Run the policy on (X, y) and compute every evaluation measure.

    >>> import jax, numpy as np
    >>> from jaxselect.dwsm import dwsm_fit, dwsm_evaluate
    >>> X = np.random.default_rng(0).normal(size=(40, 3)); y = (X[:, 0] > 0).astype(int)
    >>> rep = dwsm_evaluate(dwsm_fit(jax.random.key(0), X, y, lam=0.05, n_iter=3), X, y)
    >>> float(rep.accuracy) > 0.8
    True
    """
    tr = dwsm_trace(policy, X, y)
    spec = policy.spec
    yl, _ = as_labels(y, tr.labels.shape[0], n_classes=spec.n_classes)
    measures = _measures(
        tr.labels,
        tr.acquired,
        tr.order,
        tr.reward,
        tr.status,
        yl,
        spec.groups.costs,
        spec.cost_matrix,
        n_units=spec.n_units,
        n_classes=spec.n_classes,
    )
    return DWSMReport(**measures, labels=tr.labels, acquired=tr.acquired)


@functools.partial(jit, static_argnames=("n_units", "n_classes"))
def _measures(labels, acquired, order, reward, status, y, costs, cost_matrix, *, n_units: int, n_classes: int):
    """Every measure of :class:`DWSMReport` from one trace, in one compiled program: (n,) labels,
    (n, d) acquired, (n, n_units) acquisition order (−1 after the last), (n,) episode rewards, ()
    the trace's status, (n,) true labels, (n_units,) unit costs, (C, C) cost matrix."""
    y = y.astype(jnp.int32)
    units = jnp.sum(order >= 0, axis=1)
    unit_used = jax.vmap(
        lambda o: jnp.zeros((n_units,), bool).at[jnp.where(o >= 0, o, n_units)].set(True, mode="drop")
    )(order)
    cost = unit_used.astype(costs.dtype) @ costs + cost_matrix[labels, y]
    mean_cost, mean_loss = jnp.mean(cost), -jnp.mean(reward)
    finite = jnp.isfinite(mean_cost) & jnp.isfinite(mean_loss)
    return {
        "accuracy": accuracy(labels, y),
        "sparsity": mean_sparsity(acquired),
        "mean_features": jnp.mean(jnp.sum(acquired, axis=1).astype(jnp.float32)),
        "mean_units": jnp.mean(units.astype(jnp.float32)),
        "average_cost": mean_cost,
        "mean_loss": mean_loss,
        "feature_usage": feature_usage(acquired),
        "class_usage": class_usage(acquired, y, n_classes, labels=labels),
        "status": status | jnp.where(finite, jnp.int32(OK), jnp.int32(NONFINITE)),
    }
