"""The result every feature-group sequencing method returns: an anytime linear predictor.

A :class:`SelectionPath` is the sequence of selected groups ``G = g_1, g_2, …`` with, for each
prefix ``G_j``, its cumulative cost ``c(G_j)``, its training objective and the model ``w(G_j)``
fitted on the prefix's features, in raw feature space (Hu et al. §1: at budget B use the longest
prefix with ``c(G_j) ≤ B``). GLM paths also carry their inverse link, so predictions need no loss.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxselect._repr import short_repr

__all__ = ["SelectionPath", "LINKS", "link_code"]

#: Inverse links a path can carry (``SelectionPath.link`` is the index into this tuple).
LINKS = ("identity", "logistic", "softmax")


def link_code(name: str) -> jax.Array:
    """The int32 code of an inverse link name ("identity", "logistic" or "softmax")."""
    return jnp.asarray(LINKS.index(name), jnp.int32)


class SelectionPath(NamedTuple):
    """An anytime predictor: a group order with the model after every prefix.

    Attributes:
      order: (m,) int32 group chosen at each step; −1 where no group was taken (the path ran out
        of groups that can still change the model — e.g. only constant columns were left).
      cum_cost: (m,) cumulative cost c(G_j) after step j (+inf where no group was taken),
        accumulated with compensated summation so it is exact to the dtype's rounding.
      objective: (m,) training objective after step j: the explained-variance fraction
        ``2·F(G_j)/T`` with ``F(S) = ½ tr(b0_Sᵀ C_S⁻¹ b0_S)`` on standardised targets (the
        regularised training R², summed over the T targets and divided by T). GLM paths store the
        fraction of the null model's loss removed instead; greedy-RLS paths (:func:`jaxselect.rls_to_path`)
        ``1 − LOO error / LOO error of the feature-less model``.
      coef: (m, D, T) raw-space coefficients of the model after each prefix.
      intercept: (m, T) raw-space intercept after each prefix.
      null_intercept: (T,) the intercept-only model used below the cheapest prefix.
      status: () int32, 0 when fine, else flags of :data:`jaxselect.STATUS_MESSAGES`.
      link: () int32 index into :data:`LINKS`: how :func:`jaxselect.glm_predict` turns the linear
        scores into predictions (identity for regression paths).
    """

    order: jax.Array
    cum_cost: jax.Array
    objective: jax.Array
    coef: jax.Array
    intercept: jax.Array
    null_intercept: jax.Array
    status: jax.Array
    link: jax.Array

    __repr__ = short_repr

    @property
    def n_steps(self) -> int:
        return self.order.shape[-1]
