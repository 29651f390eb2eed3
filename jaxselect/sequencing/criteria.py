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

from jaxselect.sequencing.engine import lean_steps, raw_slot_capacity, selectable_groups, slot_capacity
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
