"""Scale-free default step size for FSA: ``η = 1 / L`` with L a Lipschitz bound of the gradient.

For an objective ``F(c, b) = loss(A c + b) + (l2/2) ‖c‖² + smoothness ‖D₂ c‖²`` (see :mod:`.fsa`),

    L = λ_max( [A 1]ᵀ H [A 1] ) + l2 + 32·smoothness,

where H bounds the loss Hessian in score space: ``H = (κ / N) I`` for the built-in pointwise losses
with curvature κ (squared 1; logistic 1/4 — also used for the huberized hinge and Lorenz losses,
whose exact bounds 1/(2h) and 2 hold only in a narrow band of margins, see ``fsa``), and for the
ranking loss and user callables H is the exact score-space Hessian at zero scores (for ranking
σ'(0) = 1/4 is the largest value, so that is a bound too; a callable that is more curved away from
zero should get an explicit ``lr``). ``λ_max(D₂ᵀD₂) ≤ 16`` gives the smoothness term.

λ_max is found by power iteration on the operator (never forming a Gram matrix), warm-started
from the previous stage's vector when the problem is compacted. Theorem 2.1 of the FSA paper asks
for ``η < 1/‖X‖²`` (regression, sum loss) and ``η < 4/‖X‖²`` (logistic), i.e. ``η < 1/L`` in
our mean-loss scaling; ``1/L`` with the power-iteration estimate (a lower bound on λ_max) sits at
that bound and well inside plain gradient descent's stability limit ``2/L``.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from .design import FSADesign, gradient, scores

__all__ = ["power_iteration", "WeightedTarget"]


class WeightedTarget(NamedTuple):
    """The loss target of a weighted FSA problem (``sample_weight``).

    Attributes:
      value: the unweighted target ((N,) targets or labels, or the ranking pairs ``(ij, r)``).
      rel: relative weights with mean 1: (N,) ``N·w/Σw`` per row, or (P,) per ranking pair
        ``P·w_i w_j / Σ w_i w_j``; the loss is ``mean(rel · ℓ)``, the weighted mean loss.
    """

    value: Any
    rel: jax.Array


def _score_hessian(loss_fn: Callable, target, curvature: float | None, n: int, dtype):
    """Return v ↦ H v in score space (see module docstring)."""
    if curvature is not None:
        scale = jnp.asarray(curvature / n, dtype)
        if isinstance(target, WeightedTarget):  # H = κ·diag(w)/Σw
            rel = target.rel.astype(dtype)
            return lambda v: scale * rel * v
        return lambda v: scale * v

    def hvp(v):
        grad = jax.grad(lambda s: jnp.asarray(loss_fn(s, target), dtype))
        return jax.jvp(grad, (jnp.zeros((n,), dtype),), (v,))[1]

    return hvp


def power_iteration(
    design: FSADesign, target, v_coef: jax.Array, v_icpt: jax.Array, *, loss_fn, curvature, n_power, lam=None
):
    """λ_max of ``[A 1]ᵀ H [A 1]`` by ``n_power`` power iterations (pure; call it inside ``jit``).

    Args:
      design: the stage's design (W features).
      target: loss target (labels, or pairs for ranking).
      v_coef: (W, P) start vector, coefficient part; v_icpt: () intercept part.
      loss_fn: the loss; curvature: κ for built-in pointwise losses, or None to use the exact
        score-space Hessian at zero.
      n_power: number of iterations: a Python int or a traced int32 scalar (a ``fori_loop``).
      lam: () the estimate returned when ``n_power`` is 0 (default 0).

    Returns:
      ``(lam, v_coef, v_icpt)``: the Rayleigh-quotient estimate (a lower bound on λ_max) and the
      final unit vector, to warm-start the next stage.
    """
    dtype = v_coef.dtype
    hess = _score_hessian(loss_fn, target, curvature, design.shape[0], dtype)
    tiny = jnp.asarray(jnp.finfo(dtype).tiny, dtype)

    def apply(vc, vb):
        s = scores(design, vc) + vb
        w = hess(s)
        return gradient(design, w), jnp.sum(w)

    def normalize(vc, vb):
        nrm = jnp.sqrt(jnp.sum(vc * vc) + vb * vb)
        nrm = jnp.maximum(nrm, tiny)
        return vc / nrm, vb / nrm

    def body(_, carry):
        vc, vb, _ = carry
        gc, gb = apply(vc, vb)
        lam = jnp.abs(jnp.sum(gc * vc) + gb * vb)  # Rayleigh quotient of the unit vector (vc, vb)
        gc, gb = normalize(gc, gb)
        return gc, gb, lam

    vc, vb = normalize(v_coef, v_icpt)
    lam = jnp.zeros((), dtype) if lam is None else jnp.asarray(lam, dtype)
    vc, vb, lam = jax.lax.fori_loop(0, n_power, body, (vc, vb, lam))
    return lam, vc, vb
