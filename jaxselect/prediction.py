"""The prediction front door of :mod:`jaxselect`: :func:`predict`, a single-dispatch function on
the type of a fitted result, and the per-family aliases it replaced (deprecated).

:func:`predict` lives in :mod:`jaxselect._predict` (below the families, beside the shared results),
so that each family registers its own result type with ``js.predict.register`` in its own package
(:class:`~jaxselect.SelectionPath` there, :class:`~jaxselect.RLSResult` in ``jaxselect.rls``,
:class:`~jaxselect.FSAResult` in ``jaxselect.anneal``, :class:`~jaxselect.GroupLassoFit` in
``jaxselect.sequencing``, :class:`~jaxselect.DWSMPolicy` in ``jaxselect.dwsm``; a
:class:`~jaxselect.CVResult` is refused with what to do instead). ``X`` — dense, or sparse
(``scipy.sparse`` any format, BCOO/BCSR; never densified) — is validated once, before the dispatch.
See :func:`predict` for the table of results, budgets and outputs.

The per-family functions ``fsa_predict``, ``glm_predict``, ``rls_predict``, ``rls_predict_path``
and ``dwsm_predict`` exported by :mod:`jaxselect` are deprecated aliases (a ``DeprecationWarning``
names the replacement) kept for one release; their implementations stay in their families'
modules, imported when an alias is called.
"""

from __future__ import annotations

import warnings

from jaxselect._predict import predict

__all__ = [
    "predict",
    "fsa_predict",
    "glm_predict",
    "rls_predict",
    "rls_predict_path",
    "dwsm_predict",
]


# ---------------------------------------------------------------------------------------------
# Deprecated aliases (one release): thin wrappers around the families' implementations.


def _deprecated(old: str, new: str) -> None:
    warnings.warn(
        f"jaxselect.{old} is deprecated and will be removed in the next release; use {new}",
        DeprecationWarning,
        stacklevel=3,
    )


def fsa_predict(result, X):
    """Deprecated: use ``js.predict(result, X)`` (the same scores).

    Args:
      result: an :class:`~jaxselect.FSAResult`.
      X: (m, M) features, the training width.

    Returns:
      (m,) scores, as :func:`predict`.

    >>> import warnings, numpy as np, jaxselect as js
    >>> X = np.random.default_rng(1).standard_normal((100, 5)); y = 2 * X[:, 1] + 1
    >>> res = js.fsa(X, y, 1, n_iter=50)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     old = js.fsa_predict(res, X)
    >>> caught[0].category.__name__, bool(np.array_equal(old, js.predict(res, X)))
    ('DeprecationWarning', True)
    """
    from jaxselect.anneal.fsa import fsa_predict as implementation  # noqa: PLC0415 - only for the alias

    _deprecated("fsa_predict", "jaxselect.predict(result, X)")
    return implementation(result, X)


def glm_predict(path, X, budget=None):
    """Deprecated: use ``js.predict(path, X, budget, link=True)`` (the same probabilities).

    Args:
      path: a :class:`~jaxselect.SelectionPath` (from :func:`~jaxselect.glm_omp`).
      X: (m, D) raw features.
      budget: a cumulative cost, or None for every prefix.

    Returns:
      The path's predictions through its inverse link, as :func:`predict` with ``link=True``.

    >>> import warnings, numpy as np, jaxselect as js
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(100, 3)); y = (X[:, 1] > 0).astype(int)
    >>> path = js.glm_omp(X, y)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     old = js.glm_predict(path, X, budget=1.0)
    >>> caught[0].category.__name__, bool(np.array_equal(old, js.predict(path, X, 1.0, link=True)))
    ('DeprecationWarning', True)
    """
    from jaxselect.sequencing.glm_eval import glm_predict as implementation  # noqa: PLC0415 - only for the alias

    _deprecated("glm_predict", "jaxselect.predict(path, X, budget, link=True)")
    return implementation(path, X, budget)


def rls_predict(result, X, *, step=None):
    """Deprecated: use ``js.predict(result, X, budget=step)`` (features have unit cost).

    ``budget=k`` (``result.selected.shape[0]``) replaces ``step=None``; unlike ``step``, a budget
    below 1 is allowed and gives the feature-less model.

    Args:
      result: an :class:`~jaxselect.RLSResult`.
      X: (m, d) features, the training width.
      step: number of selected features to use, 1 ≤ step ≤ k; None means k.

    Returns:
      (m, T) predictions, or (m,) for a model fit on a 1-D ``y``.

    >>> import warnings, numpy as np, jaxselect as js
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(100, 20)).astype(np.float32)
    >>> res = js.greedy_rls(X, X[:, 3] - X[:, 7], 2, l2=0.01)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     old = js.rls_predict(res, X, step=1)
    >>> caught[0].category.__name__, bool(np.allclose(old, js.predict(res, X, budget=1), atol=1e-5))
    ('DeprecationWarning', True)
    """
    from jaxselect.rls.selection import rls_predict as implementation  # noqa: PLC0415 - only for the alias

    _deprecated("rls_predict", "jaxselect.predict(result, X, budget=step)")
    return implementation(result, X, step=step)


def rls_predict_path(result, X):
    """Deprecated: use ``js.predict(result, X)`` (every prefix model).

    The replacement drops a trailing target axis of length 1 (a ``y`` of shape (n, 1)), as for
    every path.

    Args:
      result: an :class:`~jaxselect.RLSResult`.
      X: (m, d) features, the training width.

    Returns:
      (k, m, T) predictions, or (k, m) for a model fit on a 1-D ``y``.

    >>> import warnings, numpy as np, jaxselect as js
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(100, 20)).astype(np.float32)
    >>> res = js.greedy_rls(X, X[:, 3] - X[:, 7], 2, l2=0.01)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     old = js.rls_predict_path(res, X)
    >>> caught[0].category.__name__, bool(np.allclose(old, js.predict(res, X), atol=1e-5))
    ('DeprecationWarning', True)
    """
    from jaxselect.rls.selection import rls_predict_path as implementation  # noqa: PLC0415 - only for the alias

    _deprecated("rls_predict_path", "jaxselect.predict(result, X)")
    return implementation(result, X)


def dwsm_predict(policy, X):
    """Deprecated: use ``js.predict(policy, X)`` (the same labels and acquired features).

    Args:
      policy: a :class:`~jaxselect.DWSMPolicy`.
      X: (m, d) raw features, the training width.

    Returns:
      ``(labels, acquired)``: (m,) int32 classes and (m, d) bool features each datum used.

    >>> import warnings, jax, numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(40, 3)); y = (X[:, 0] > 0).astype(int)
    >>> policy = js.dwsm_fit(jax.random.key(0), X, y, lam=0.05, n_iter=3)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     labels, acquired = js.dwsm_predict(policy, X)
    >>> caught[0].category.__name__, bool(np.array_equal(labels, js.predict(policy, X)[0]))
    ('DeprecationWarning', True)
    """
    from jaxselect.dwsm.policy import dwsm_predict as implementation  # noqa: PLC0415 - only for the alias

    _deprecated("dwsm_predict", "jaxselect.predict(policy, X)")
    return implementation(policy, X)
