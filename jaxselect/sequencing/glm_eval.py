"""Anytime predictions and accuracy of GLM paths (:func:`~jaxselect.glm_omp`) through their inverse link.

Evaluation layer: built on :mod:`jaxselect.sequencing.anytime` (the budget rule of :func:`jaxselect.predict`
and :func:`jaxselect.objective_curve`); the solver (:mod:`jaxselect.sequencing.glm`) does not import it.
"""

from __future__ import annotations

import jax
import numpy as np

from jaxselect import _predict
from jaxselect.sequencing import anytime
from jaxselect._validation import as_labels, host_array, host_value
from jaxselect.path import LINKS, SelectionPath
from jaxselect.sharding import any_mesh

__all__ = ["glm_predict", "glm_accuracy"]


@any_mesh
def glm_predict(path: SelectionPath, X, budget=None) -> jax.Array:
    """Anytime GLM predictions through the path's inverse link (no loss argument needed).

    At budget B the model of the longest prefix with ``cum_cost ≤ B`` is used (the intercept-only
    model below the cheapest group), exactly as :func:`jaxselect.predict`, whose linear scores are
    passed through ``path.link``: ``σ(s)`` (probabilities of class 1) for logistic paths,
    ``softmax(s)`` over the classes (class probabilities) for softmax paths, the scores themselves
    for identity paths (squared / callable losses). Works inside ``jax.jit`` (the link is applied
    with ``lax.switch``).

    Args:
      path: from :func:`glm_omp` (any :class:`SelectionPath`: regression paths have the identity link).
      X: (m, D) raw features.
      budget: a cumulative cost B, or None for every prefix.

    Returns:
      With a budget: (m,) for one logistic column, else (m, T) (T classes for softmax).
      Without: a leading (n_steps,) axis.

    Raises:
      ValueError: X with the wrong number of columns or NaN/Inf, a non-scalar budget.

    >>> import numpy as np, jaxselect as js
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(100, 3)); y = (X[:, 1] > 0).astype(int)
    >>> p = glm_predict(js.glm_omp(X, y), X, budget=1.0)
    >>> bool(np.mean((np.asarray(p) > 0.5) == y) > 0.9)
    True
    """
    return _predict.predict(anytime.as_path(path), X, budget, link=True)  # one program: scores and link


def _accuracy_labels(y, m: int, name: str = "y"):
    """Held-out binary labels (m,) or (m, T) in {0, 1}, {−1, +1} or bool → float 0/1 (m, T)."""
    y = np.asarray(y)
    if y.ndim == 1:
        y = y[:, None]
    if y.ndim != 2 or y.shape[0] != m:
        raise ValueError(f"{name} must have shape ({m},) or ({m}, T); got {y.shape}")
    if y.dtype == object or y.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold binary labels in {{0, 1}}, {{-1, +1}} or bool; got dtype {y.dtype}")
    values = set(np.unique(y.astype(np.float64)).tolist())
    if not (values <= {0.0, 1.0} or values <= {-1.0, 1.0}):
        raise ValueError(
            f"{name} must hold binary labels in {{0, 1}}, {{-1, +1}} or bool; got values {sorted(values)[:6]}"
        )
    return (y > 0).astype(np.float64)


@any_mesh
def glm_accuracy(path: SelectionPath, X, y) -> anytime.Curve:
    """Held-out classification accuracy of every prefix against its cumulative cost.

    Logistic paths predict class 1 where the score is > 0 (probability > ½), averaged over the label
    columns; softmax paths predict the arg-max class. The first point is the intercept-only model.
    A host-side summary (numpy): call it outside ``jax.jit``.

    Args:
      path: from :func:`glm_omp` with ``loss="logistic"`` or ``"softmax"`` (its ``link`` says which).
      X: (m, D) raw features.
      y: logistic: (m,) or (m, T) labels in {0, 1}, {−1, +1} or bool; softmax: (m,) classes 0..C−1.

    Returns:
      A :class:`jaxselect.Curve`.

    Raises:
      ValueError: a regression (identity-link) path, labels of the wrong shape or values.

    >>> import numpy as np, jaxselect as js
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(100, 3)); y = (X[:, 1] > 0).astype(int)
    >>> curve = js.glm_accuracy(js.glm_omp(X, y), X, y)
    >>> curve.cost.tolist(), [round(v, 2) for v in curve.value.tolist()]
    ([0.0, 1.0, 2.0, 3.0], [0.55, 0.99, 0.99, 0.99])
    """
    path = anytime.as_path(path)
    code = host_value(lambda: path.link)
    if code is None or np.ndim(code) != 0:
        raise ValueError("glm_accuracy needs a concrete, unbatched path (call it outside jax.jit/vmap)")
    link = LINKS[int(code)]
    m = np.shape(X)[0]
    C = path.coef.shape[-1]
    if link == "softmax":
        labels, _ = as_labels(y, m, "y", n_classes=C)
        Yt = np.eye(C)[host_array(labels)]

        def metric(Yt, S):
            return float(np.mean(np.argmax(S, axis=1) == np.argmax(Yt, axis=1)))
    elif link == "logistic":
        Yt = _accuracy_labels(y, m)
        if Yt.shape[1] != C:
            raise ValueError(f"y has {Yt.shape[1]} label column(s) but the path has {C}")

        def metric(Yt, S):
            return float(np.mean((S > 0) == (Yt > 0.5)))
    else:
        raise ValueError(
            "glm_accuracy needs a classification path (glm_omp with loss='logistic' or 'softmax'); "
            "this path has the identity link — use jaxselect.objective_curve for regression paths"
        )
    return anytime.objective_curve(path, X, Yt, metric=metric)
