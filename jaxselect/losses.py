"""Smooth losses shared by the library's solvers.

Every public loss has the shape ``loss(scores, y) -> scalar`` and returns a *mean* over the
examples (or over the pairs for ranking), so that step sizes and priors do not depend on the number
of examples. Formulas follow Barbu, She, Ding & Gramajo, "Feature Selection with Annealing for
Computer Vision and Big Data Learning" (FSA paper):

* squared error, eq. (4)/(10):          ``½ mean_i (y_i − s_i)²``
* logistic, eq. (6)/(11):                ``mean_i ln(1 + exp(−y_i s_i))``
* huberized hinge, eq. (7):              ``mean_i ℓ_h(y_i s_i)``
* Lorenz, eq. (8):                       ``mean_i ℓ(y_i s_i)``, ``ℓ(x) = ln(1 + (x − 1)²)`` for x ≤ 1, else 0
* pairwise ranking, eq. (9):             ``mean_(i,j) ln(1 + exp(s_i − s_j)) − r_ij (s_i − s_j)``

Classification losses accept labels in {0, 1} or {−1, +1}: a label ``y > 0`` is the positive
class (+1), any other label the negative class (−1). The per-margin functions
(:func:`logistic_margin`, :func:`huber_hinge_margin`, :func:`lorenz_margin`) are exposed too, for
solvers that build their own objective.

All functions are pure ``jax.numpy`` code: they can be jitted, vmapped and differentiated. Their
second derivatives in the score are bounded by :func:`curvature` (used for scale-free step sizes).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = [
    "squared_loss",
    "logistic_loss",
    "huber_hinge_loss",
    "lorenz_loss",
    "ranking_loss",
    "logistic_margin",
    "huber_hinge_margin",
    "lorenz_margin",
    "signed_labels",
    "curvature",
]


def signed_labels(y: jax.Array, dtype) -> jax.Array:
    """Map labels in {0, 1} or {−1, +1} to {−1, +1}: ``+1 where y > 0 else −1``.

    Args:
      y: (n,) labels, any real dtype.
      dtype: floating dtype of the result.

    Returns:
      (n,) array of ±1 in ``dtype``.

    >>> signed_labels(jnp.array([0, 1, 1]), jnp.float32).tolist()
    [-1.0, 1.0, 1.0]
    """
    y = jnp.asarray(y)
    one = jnp.ones((), dtype)
    return jnp.where(y > 0, one, -one)


# --------------------------------------------------------------------------- per-margin functions
def logistic_margin(m: jax.Array) -> jax.Array:
    """Logistic loss of a margin, eq. (6): ``ℓ(m) = ln(1 + e^{−m})`` (computed as softplus(−m)).

    >>> float(logistic_margin(jnp.array(0.0)))  # ln 2
    0.6931...
    """
    return jax.nn.softplus(-m)


def huber_hinge_margin(m: jax.Array, h: float = 0.1) -> jax.Array:
    """Huberized hinge loss of a margin, eq. (7).

    ``ℓ_h(m) = 0`` if ``m > 1 + h``; ``(1 + h − m)² / (4h)`` if ``|1 − m| ≤ h``; ``1 − m`` if
    ``m < 1 − h``. Continuously differentiable, with ``ℓ_h'' ≤ 1/(2h)``.

    Args:
      m: margins ``y·f(x)``, any shape.
      h: half-width of the quadratic zone (> 0); the authors' code uses 0.1.

    >>> float(huber_hinge_margin(jnp.array(1.0), h=0.1))  # (0.1)^2 / 0.4
    0.025...
    """
    quad = (1.0 + h - m) ** 2 / (4.0 * h)
    lin = 1.0 - m
    zero = jnp.zeros_like(m)
    return jnp.where(m > 1.0 + h, zero, jnp.where(m < 1.0 - h, lin, quad))


def lorenz_margin(m: jax.Array) -> jax.Array:
    """Lorenz loss of a margin, eq. (8): ``ℓ(m) = ln(1 + (m − 1)²)`` for ``m ≤ 1``, else 0.

    Differentiable everywhere (``ℓ'(1) = 0`` from both sides), non-convex, bounded growth
    ``O(ln |m|)`` as ``m → −∞`` (robust to label noise); ``|ℓ''| ≤ 2`` (at m = 1).

    >>> float(lorenz_margin(jnp.array(0.0)))  # ln 2
    0.6931...
    """
    d = jnp.minimum(m - 1.0, jnp.zeros_like(m))  # (m - 1) for m <= 1, else 0 -> ln(1) = 0
    return jnp.log1p(d * d)


# --------------------------------------------------------------------------- mean losses
def squared_loss(scores: jax.Array, y: jax.Array) -> jax.Array:
    """Half mean squared error, eq. (10) divided by N: ``½ mean_i (y_i − s_i)²``.

    Args:
      scores: (n,) predictions ``s_i = f(x_i)``.
      y: (n,) targets.

    Returns:
      Scalar loss in the dtype of ``scores``.

    >>> float(squared_loss(jnp.array([1.0, 2.0]), jnp.array([0.0, 0.0])))
    1.25
    """
    r = jnp.asarray(y, scores.dtype) - scores
    return 0.5 * jnp.mean(r * r)


def logistic_loss(scores: jax.Array, y: jax.Array) -> jax.Array:
    """Mean logistic loss, eq. (6): ``mean_i ln(1 + exp(−y_i s_i))`` with y_i ∈ {−1, +1}.

    Equal to the Bernoulli negative log-likelihood of eq. (11) divided by N. Labels in {0, 1} are
    accepted (0 is the negative class).

    Args:
      scores: (n,) scores (log-odds).
      y: (n,) labels in {0, 1} or {−1, +1}.

    >>> float(logistic_loss(jnp.array([0.0, 0.0]), jnp.array([0, 1])))  # ln 2
    0.6931...
    """
    return jnp.mean(logistic_margin(signed_labels(y, scores.dtype) * scores))


def huber_hinge_loss(scores: jax.Array, y: jax.Array, h: float = 0.1) -> jax.Array:
    """Mean huberized hinge (differentiable SVM) loss, eq. (7), on margins ``y_i s_i``.

    Args:
      scores: (n,) scores.
      y: (n,) labels in {0, 1} or {−1, +1}.
      h: half-width of the quadratic zone (default 0.1, as in the authors' code).

    >>> float(huber_hinge_loss(jnp.array([2.0, -2.0]), jnp.array([1, -1])))
    0.0
    """
    return jnp.mean(huber_hinge_margin(signed_labels(y, scores.dtype) * scores, h))


def lorenz_loss(scores: jax.Array, y: jax.Array) -> jax.Array:
    """Mean Lorenz loss, eq. (8), on margins ``y_i s_i``.

    Args:
      scores: (n,) scores.
      y: (n,) labels in {0, 1} or {−1, +1}.

    >>> float(lorenz_loss(jnp.array([0.0]), jnp.array([1])))  # ln 2
    0.6931...
    """
    return jnp.mean(lorenz_margin(signed_labels(y, scores.dtype) * scores))


def ranking_loss(scores: jax.Array, pairs) -> jax.Array:
    """Mean pairwise ranking loss, eq. (9) (RankNet-style, Burges et al. 2005).

    ``mean_(i,j)∈C [ ln(1 + exp(s_i − s_j)) − r_ij (s_i − s_j) ]``. It is minimised at
    ``σ(s_i − s_j) = r_ij``: ``r_ij`` is the target probability that ``i`` scores above ``j``
    (paper: 0 if ``i`` is better than ``j``, 0.5 if equally good, 1 if ``i`` is worse).

    Args:
      scores: (n,) scores.
      pairs: a tuple ``(ij, r)`` with ``ij`` (P, 2) integer indices into ``scores`` and ``r`` (P,)
        targets in [0, 1].

    Returns:
      Scalar mean over the P pairs.

    >>> ij, r = jnp.array([[0, 1]]), jnp.array([1.0])
    >>> round(float(ranking_loss(jnp.array([2.0, 0.0]), (ij, r))), 4)  # ln(1 + e^2) - 2
    0.1269
    """
    ij, r = pairs
    d = jnp.take(scores, ij[:, 0]) - jnp.take(scores, ij[:, 1])
    return jnp.mean(jax.nn.softplus(d) - jnp.asarray(r, scores.dtype) * d)


def curvature(name: str, h: float = 0.1) -> float:
    """Upper bound on the loss's second derivative per unit score (per example / pair).

    Used to turn ``λ_max(AᵀA / n)`` into a Lipschitz constant of the gradient:
    squared 1, logistic 1/4, huberized hinge 1/(2h), Lorenz 2, ranking 1/4 per pair (times the
    pair-difference operator, handled by the caller).
    """
    table = {"squared": 1.0, "logistic": 0.25, "lorenz": 2.0, "ranking": 0.25}
    if name == "huber_hinge":
        return 1.0 / (2.0 * h)
    return table[name]
