"""The one OMP selection criterion shared by :func:`~jaxselect.cs_omp` and :func:`~jaxselect.glm_omp`.

Hu et al., Algorithm 1 (regression) and Algorithm 3 (GLM): with ``b`` (D, T) the gradient of the
objective with respect to the model in problem coordinates, every group g is scored by

* ``"whiten"`` (criterion 0): ``‖A_g b_g‖_F²`` with ``A_g`` the whitening metric, so that the
  score is ``b_gᵀ (X_gᵀX_g/n)⁺ b_g`` — ‖b_g‖² on whitened groups;
* ``"no_whiten"`` (1): ``‖B_g b_g‖_F²`` — the gradient w.r.t. the merely standardised features;
* ``"single"`` (2): ``max_a ‖(B_g b_g)_a‖²`` — the group's best single standardised feature.

The criterion is a traced int32, so the three variants share one compiled solver.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect.linalg import gather_groups

__all__ = ["OMP_CRITERIA", "lean_steps", "omp_scores", "raw_slot_capacity", "selectable_groups", "slot_capacity"]

OMP_CRITERIA = ("whiten", "no_whiten", "single")


def omp_scores(
    b: jax.Array,
    metric_white: jax.Array,
    metric_std: jax.Array,
    index: jax.Array,
    mask: jax.Array,
    criterion: jax.Array,
) -> jax.Array:
    """(J,) OMP scores of every group for the gradient ``b`` (D, T); larger is better.

    Args:
      b: (D, T) gradient in problem coordinates.
      metric_white, metric_std: (J, s, s) the metrics ``A_g`` and ``B_g`` of :class:`jaxselect.Problem`.
      index, mask: (J, s) the group table.
      criterion: () int32 index into :data:`OMP_CRITERIA`.
    """
    bg = gather_groups(b, index, mask, axis=0)  # (J, s, T)
    white = jnp.einsum("jab,jbt->jat", metric_white, bg)
    std = jnp.einsum("jab,jbt->jat", metric_std, bg)
    per_feature = jnp.sum(std * std, axis=2)
    scores = jnp.stack(
        [jnp.sum(white * white, axis=(1, 2)), jnp.sum(per_feature, axis=1), jnp.max(per_feature, axis=1)]
    )
    return scores[criterion]


def _group_sizes(mask, index=None, live=None):
    """Concrete (J,) sizes of the groups (live coordinates only when ``live`` is given), or None when traced."""
    try:
        mask = np.asarray(mask)
        if live is None or index is None:
            return mask.sum(axis=1)
        live = np.asarray(live)
        index = np.asarray(index)
        inside = (index >= 0) & (index < live.shape[0])
        return (mask & inside & live[np.where(inside, index, 0)]).sum(axis=1)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def slot_capacity(mask, k: int, n_features: int | None = None, *, index=None, live=None) -> int:
    """Static number of feature slots a k-step path needs: the k largest groups' sizes + one pad block.

    With ``index`` and ``live`` (the problem's group table and live coordinates) only the live
    coordinates count — the groups actually reachable: inert coordinates never take a slot and
    groups with no live coordinate are never selected.

    Args:
      mask: (J, s) the group table's mask (concrete; a traced mask falls back to ``k·s`` slots,
        capped at ``n_features``).
      k: number of steps.
      n_features: D, used by the traced fallback.
      index, live: optional (J, s) group table and (D,) live mask of a :class:`~jaxselect.Problem`.
    """
    s_max = mask.shape[1]
    sizes = _group_sizes(mask, index, live)
    if sizes is None:  # traced groups (e.g. vmap over problems)
        used = k * s_max if n_features is None else min(n_features, k * s_max)
    else:
        used = int(np.sort(sizes)[::-1][:k].sum())
    return used + s_max


def raw_slot_capacity(mask, k: int, n_features: int, *, index=None, live=None) -> int:
    """Static number of raw-feature slots of a k-step slot path (:class:`~jaxselect.SelectionPath`):
    every feature of the k largest selectable groups, plus one slot that always stays empty."""
    full = _group_sizes(mask)
    reach = _group_sizes(mask, index, live)
    if full is None or reach is None:
        return min(n_features, k * mask.shape[1]) + 1
    full = np.where(reach > 0, full, 0)
    return int(np.sort(full)[::-1][:k].sum()) + 1


def lean_steps(mask, n_rows: int, n_features: int, *, index=None, live=None) -> int:
    """Default number of steps of a ``gram=False`` path: the most steps whose slots (live coordinates
    of the largest groups) fit in ``min(n, D)``, so the solver state (P×D factor rows, P×P factor,
    the path's m×P×T slot coefficients) stays O(n·D), the size of the design it already holds.
    At least 1, at most J."""
    sizes = _group_sizes(mask, index, live)
    J, s_max = mask.shape
    cap = max(1, min(int(n_rows), int(n_features)))
    if sizes is None:
        return max(1, min(J, cap // max(1, s_max)))
    used = np.cumsum(np.sort(sizes)[::-1])
    return max(1, min(J, int(np.searchsorted(used, cap, side="right"))))


def selectable_groups(index: jax.Array, mask: jax.Array, live: jax.Array) -> jax.Array:
    """(J,) bool: groups with at least one live coordinate; the others (constant columns, dropped
    whitening directions only) are inert and never selected, by every greedy solver."""
    return jnp.any(jnp.take(live, index, mode="fill", fill_value=False) & mask, axis=1)
