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

GLM losses (Hu et al., Appendix B, eq. 21) work on (n, T) scores ``S`` and targets ``Y`` example by
example: :func:`glm_loss` returns a :class:`GLMLoss` with the per-example value ``ℓ(s_i, y_i)``
(n,), its score gradient ``∂ℓ/∂s_i`` (n, T) and per-example Hessian ``∂²ℓ/∂s_i²`` (n, T, T), for

* ``"logistic"``: ``Σ_k softplus(s_k) − y_k s_k`` with y ∈ {0, 1}^T (T independent binary outputs;
  with T = 1 its mean is :func:`logistic_loss`);
* ``"softmax"``: ``logsumexp(s) − yᵀs`` with one-hot y (multinomial);
* ``"squared"``: ``½ ‖s − y‖²`` (its mean is :func:`squared_loss` for T = 1);
* a callable ``loss(S, Y)`` returning the (n,) per-example losses (or their scalar mean): the
  derivatives come from ``jax.grad`` and forward-over-reverse ``jax.jvp``.

Classification losses accept labels in {0, 1} or {−1, +1}: a label ``y > 0`` is the positive
class (+1), any other label the negative class (−1). The per-margin functions
(:func:`logistic_margin`, :func:`huber_hinge_margin`, :func:`lorenz_margin`) are exposed too, for
solvers that build their own objective.

All functions are pure ``jax.numpy`` code: they can be jitted, vmapped and differentiated. Their
second derivatives in the score are bounded by :func:`curvature` (used for scale-free step sizes).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

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
    "HuberHinge",
    "LossKind",
    "LOSS_KINDS",
    "loss_names",
    "GLM_LOSSES",
    "GLMLoss",
    "glm_loss",
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
    return _softplus(-m)


@jax.custom_jvp
def _softplus(d: jax.Array) -> jax.Array:
    """``ln(1 + e^d)`` as ``jax.nn.softplus`` computes it (the same values), with a derivative
    ``σ(d)`` that reuses the value's ``e^{−|d|}``: one exponential per entry for the value and the
    slope together. ``jax.nn.softplus``'s derivative takes a second one, which in the quick compiles
    of small inputs (:mod:`jaxselect.programs`) cost a quarter of a logistic ``fsa`` at 2 000 × 200."""
    return _softplus_parts(d)[0]


def _softplus_parts(d):
    positive = d >= 0
    t = jnp.exp(-jnp.where(positive, d, -d))  # e^{−|d|} ∈ (0, 1]: no overflow
    # where(d ≥ 0, d, 0), not max(d, 0): its derivative is exact at d = 0 (σ(0) = 1/2 at second order)
    value = jnp.where(positive, d, jnp.zeros_like(d)) + jnp.log1p(t)
    slope = jnp.where(positive, jnp.ones_like(t), t) / (1 + t)  # σ(d)
    return value, slope


@_softplus.defjvp
def _softplus_jvp(primals, tangents):
    (d,), (dd,) = primals, tangents
    value, slope = _softplus_parts(d)
    return value, slope * dd


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


# --------------------------------------------------------------------------- the loss names
class LossKind(NamedTuple):
    """What a built-in loss is (one row of :data:`LOSS_KINDS`, the one list of the library's losses).

    Attributes:
      classification: takes binary labels (y > 0 the positive class).
      pointwise: a mean of per-example terms (a streamed pass sums row blocks; FSA's polish is
        the damped Newton solver); False for pairwise ranking and the multinomial softmax.
      fsa: a loss of :func:`jaxselect.fsa` (scalar scores).
      glm: a per-example GLM loss of :func:`glm_loss` ((n, T) scores).
    """

    classification: bool
    pointwise: bool
    fsa: bool
    glm: bool


#: Every built-in loss by name; the families' loss lists are read off it (:func:`loss_names`).
LOSS_KINDS = {
    "squared": LossKind(classification=False, pointwise=True, fsa=True, glm=True),
    "logistic": LossKind(classification=True, pointwise=True, fsa=True, glm=True),
    "huber_hinge": LossKind(classification=True, pointwise=True, fsa=True, glm=False),
    "lorenz": LossKind(classification=True, pointwise=True, fsa=True, glm=False),
    "ranking": LossKind(classification=False, pointwise=False, fsa=True, glm=False),
    "softmax": LossKind(classification=False, pointwise=False, fsa=False, glm=True),
}


class HuberHinge(NamedTuple):
    """The huberized hinge loss of eq. (7) with its width ``h`` (> 0): ``loss=HuberHinge(h=0.2)``
    where a solver takes a loss name (``"huber_hinge"`` is ``HuberHinge(0.1)``)."""

    h: float = 0.1


def loss_names(**kind) -> tuple:
    """The names of :data:`LOSS_KINDS` whose :class:`LossKind` fields equal ``kind``, in table order.

    >>> loss_names(fsa=True, classification=True)
    ('logistic', 'huber_hinge', 'lorenz')
    """
    return tuple(name for name, k in LOSS_KINDS.items() if all(getattr(k, f) == v for f, v in kind.items()))


# --------------------------------------------------------------------------- per-example GLM losses
#: Names of the built-in per-example GLM losses of :func:`glm_loss`.
GLM_LOSSES = tuple(sorted(loss_names(glm=True)))


class GLMLoss(NamedTuple):
    """A per-example loss of (n, T) scores and its score derivatives (see :func:`glm_loss`).

    Attributes:
      value: ``value(S, Y) -> (n,)`` per-example losses ``ℓ(s_i, y_i)``.
      grad: ``grad(S, Y) -> (n, T)`` score gradients ``∂ℓ/∂s_i``.
      hess: ``hess(S, Y) -> (n, T, T)`` per-example score Hessians ``∂²ℓ/∂s_i²``.
    """

    value: Callable
    grad: Callable
    hess: Callable


def _eye_like(S):
    return jnp.eye(S.shape[1], dtype=S.dtype)[None, :, :]


def _squared_value(S, Y):
    return 0.5 * jnp.sum((S - Y) ** 2, axis=1)


def _squared_grad(S, Y):
    return S - Y


def _squared_hess(S, Y):
    n, t = S.shape
    return jnp.broadcast_to(_eye_like(S), (n, t, t))


def _logistic_value(S, Y):
    return jnp.sum(jax.nn.softplus(S) - Y * S, axis=1)


def _logistic_grad(S, Y):
    return jax.nn.sigmoid(S) - Y


def _logistic_hess(S, Y):
    p = jax.nn.sigmoid(S)
    return (p * (1 - p))[:, :, None] * _eye_like(S)


def _softmax_value(S, Y):
    return jax.nn.logsumexp(S, axis=1) - jnp.sum(Y * S, axis=1)


def _softmax_grad(S, Y):
    return jax.nn.softmax(S, axis=1) - Y


def _softmax_hess(S, Y):
    p = jax.nn.softmax(S, axis=1)
    return p[:, :, None] * _eye_like(S) - p[:, :, None] * p[:, None, :]


_BUILTIN = {
    "squared": GLMLoss(_squared_value, _squared_grad, _squared_hess),
    "logistic": GLMLoss(_logistic_value, _logistic_grad, _logistic_hess),
    "softmax": GLMLoss(_softmax_value, _softmax_grad, _softmax_hess),
}


def _callable_loss(fn: Callable) -> GLMLoss:
    def value(S, Y):
        out = jnp.asarray(fn(S, Y))
        # A scalar mean m is spread as m on every example (same sum n·m, same derivatives).
        return out if out.ndim == 1 else out * jnp.ones((S.shape[0],), S.dtype)

    def grad(S, Y):
        return jax.grad(lambda s: jnp.sum(value(s, Y)))(S)

    def hess(S, Y):
        # Column k of every per-example Hessian: a forward-over-reverse product with e_k (the loss
        # is separable over examples, so one product per score column gives all n Hessians).
        t = S.shape[1]
        cols = [jax.jvp(lambda s: grad(s, Y), (S,), (jnp.zeros_like(S).at[:, k].set(1),))[1] for k in range(t)]
        return jnp.stack(cols, axis=2)

    return GLMLoss(value, grad, hess)


def glm_loss(loss) -> GLMLoss:
    """The per-example value, score gradient and score Hessian of a GLM loss.

    Args:
      loss: "logistic", "softmax", "squared", or a callable ``loss(S (n, T), Y (n, T))`` returning
        (n,) per-example losses or their scalar mean; it must be smooth and separable over examples
        (convex for a unique fit).

    Returns:
      A :class:`GLMLoss`.

    >>> parts = glm_loss("logistic")
    >>> S, Y = jnp.zeros((2, 1)), jnp.array([[0.0], [1.0]])
    >>> parts.value(S, Y).tolist(), parts.grad(S, Y)[:, 0].tolist(), parts.hess(S, Y)[:, 0, 0].tolist()
    ([0.6931..., 0.6931...], [0.5, -0.5], [0.25, 0.25])
    """
    if callable(loss):
        return _callable_loss(loss)
    if loss not in _BUILTIN:
        raise ValueError(f"loss must be one of {GLM_LOSSES} or a callable(scores, Y); got {loss!r}")
    return _BUILTIN[loss]
