"""One prediction front door: :func:`predict` dispatches on the type of a fitted result.

============================  ========================================  ===================================
result (from)                 ``budget``                                returns
============================  ========================================  ===================================
:class:`SelectionPath`        a cumulative cost B: the longest prefix   (m,) or (m, T); without a budget
(``cs_omp``, ``cs_fr``,       with ``cum_cost ≤ B`` (intercept-only     (n_steps, m[, T]), row j the model
``doubling``, ``glm_omp``,    below the cheapest); None: every prefix   after j + 1 groups. Linear scores;
``group_lasso_path``, …)                                                ``link=True``: through the path's
                                                                        inverse link (σ / softmax: what
                                                                        ``glm_predict`` gave)
:class:`RLSResult`            B features (unit costs: the model with    as for a path (its prefixes, via
(``greedy_rls``)              ⌊B⌋ features); None: every prefix         :func:`~jaxselect.as_path`)
:class:`FSAResult` (``fsa``)  must be None (one model of k features)    (m,) scores
:class:`GroupLassoFit`        must be None (one model per λ)            (L, m[, T]): the model at each λ
(``group_lasso``)
:class:`DWSMPolicy`           must be None (the hard budget is set      ``(labels (m,), acquired (m, d))``
(``dwsm_fit``)                at fit time: ``dwsm_fit(budget=B)``)
============================  ========================================  ===================================

``X`` may be a ``scipy.sparse`` matrix/array (any format) or a ``jax.experimental.sparse`` BCOO/BCSR
for the linear results (paths, greedy RLS, FSA, group lasso): predictions are ``X @ coef +
intercept`` by scipy's sparse product on the host, never densifying X (an FSA model with
piecewise-linear learners reads only its k support columns, densified: (m, k)). A DWSM policy
needs dense X (its episodes read single entries of X): pass ``X.toarray()``. With sparse X a budget
must be concrete. The sparse entries follow :func:`~jaxselect.design.as_sparse_csr`'s rules
(duplicates summed; NaN/Inf an error naming the rows).

One rule for every result: ``X`` must have exactly the training width (a ``ValueError`` names the
expected number of columns) and finite entries (NaN/Inf is a ``ValueError``; inside a user's
``jax.jit`` only shapes are checked); a concrete budget must be a finite number ≥ 0. A
:class:`~jaxselect.CVResult` holds scores, not a model: refit at ``cv.best`` and predict with that.

The per-family functions ``fsa_predict``, ``glm_predict``, ``rls_predict``, ``rls_predict_path``
and ``dwsm_predict`` exported by :mod:`jaxselect` are deprecated aliases (a ``DeprecationWarning``
names the replacement) kept for one release; their implementations stay in their families'
modules.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp

import numpy as np

from jaxselect.sequencing import anytime
from jaxselect._validation import as_float_matrix, check_finite_output, host_array, is_traced
from jaxselect.anneal.fsa import FSAResult
from jaxselect.anneal.fsa import fsa_predict as _fsa_predict
from jaxselect.sequencing.group_lasso import GroupLassoFit
from jaxselect.design import as_sparse_csr, is_sparse
from jaxselect.sequencing.glm_eval import glm_predict as _glm_predict
from jaxselect.rls.selection import RLSResult
from jaxselect.rls.selection import rls_predict as _rls_predict
from jaxselect.rls.selection import rls_predict_path as _rls_predict_path
from jaxselect.model_selection import CVResult
from jaxselect.path import LINKS, SelectionPath
from jaxselect.dwsm.policy import DWSMPolicy
from jaxselect.dwsm.policy import dwsm_predict as _dwsm_predict
from jaxselect.sharding import any_mesh

__all__ = [
    "predict",
    "fsa_predict",
    "glm_predict",
    "rls_predict",
    "rls_predict_path",
    "dwsm_predict",
]

_PREDICTABLE = "a SelectionPath, RLSResult, FSAResult, GroupLassoFit or DWSMPolicy"
_CV_MESSAGE = (
    "a CVResult holds cross-validated scores, not a model: refit at the chosen point (cv.best or "
    "cv.best_1se) on all the data and predict with that result"
)


def predict(result, X, budget=None, *, link: bool = False):
    """Predictions of any fitted result on raw features (see the module table).

    Args:
      result: a :class:`~jaxselect.SelectionPath`, :class:`~jaxselect.RLSResult`,
        :class:`~jaxselect.FSAResult`, :class:`~jaxselect.GroupLassoFit` or
        :class:`~jaxselect.DWSMPolicy`.
      X: (m, D) raw features, exactly the D columns the result was trained on: an array, or
        (linear results) a sparse matrix — ``scipy.sparse`` or BCOO/BCSR, kept sparse.
      budget: anytime results (paths, greedy RLS): a cumulative cost B ≥ 0 (a scalar; may be
        traced, then only its shape is checked) — the longest prefix with ``cum_cost ≤ B`` up to a
        relative tolerance of 32 machine epsilons, the intercept-only model below the cheapest
        prefix; None for every prefix. Other results have no budget at predict time: it must be
        None.
      link: paths only: pass the linear scores through the path's inverse link (``glm_omp``'s
        sigmoid for ``loss="logistic"``, softmax for ``"softmax"``, identity otherwise). An
        :class:`~jaxselect.RLSResult` or :class:`~jaxselect.GroupLassoFit` has the identity link.

    Returns:
      Paths and greedy RLS: with a budget (m,) or (m, T); without, (n_steps, m) or
      (n_steps, m, T) (T = 1 is dropped). FSA: (m,) scores (regression values; classification:
      class +1 where > 0; ranking scores). Group lasso: (L, m) or (L, m, T), the model at each λ.
      DWSM: ``(labels, acquired)``, (m,) int32 classes and (m, d) bool features each datum used.

    Raises:
      TypeError: a result of another type (a :class:`~jaxselect.CVResult` says what to do);
        sparse X for a DWSM policy.
      ValueError: X of another width than the training data or with NaN/Inf; a budget that is
        negative, NaN, infinite or not a scalar, or any budget for a result without one;
        ``link=True`` for an FSA result or a DWSM policy; predictions that overflow.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = 2 * X[:, 1] + 1
    >>> path = js.cs_omp(js.prepare(X, y))
    >>> bool(np.allclose(js.predict(path, X, budget=1.0), y, atol=1e-3)), js.predict(path, X).shape
    (True, (3, 100))
    >>> res = js.fsa(X, y, 1, n_iter=50)
    >>> bool(np.allclose(js.predict(res, X), y, atol=1e-2))
    True
    >>> import scipy.sparse as sp                       # sparse X: the same predictions, X never densified
    >>> bool(np.allclose(js.predict(path, sp.csr_matrix(X), budget=1.0), js.predict(path, X, budget=1.0)))
    True
    """
    if is_sparse(X):
        return _sparse_predict(result, X, budget, link)
    if isinstance(result, (SelectionPath, RLSResult)):
        if link:
            return _glm_predict(result, X, budget)
        return anytime.predict(result, X, budget)
    if isinstance(result, FSAResult):
        _no_budget(result, budget, "an FSA result is one model of k features")
        _no_link(result, link, "FSA scores: apply jax.nn.sigmoid yourself for loss='logistic'")
        return _fsa_predict(result, X)
    if isinstance(result, GroupLassoFit):
        _no_budget(result, budget, "a group-lasso fit has one model per λ; group_lasso_path gives a budgeted path")
        return _group_lasso_predict(result, X)
    if isinstance(result, DWSMPolicy):
        _no_budget(result, budget, "a DWSM policy's hard budget is set at fit time (dwsm_fit(budget=B))")
        _no_link(result, link, "a DWSM policy predicts labels")
        return _dwsm_predict(result, X)
    if isinstance(result, CVResult):
        raise TypeError(_CV_MESSAGE)
    raise TypeError(f"predict takes {_PREDICTABLE}; got {type(result).__name__}")


def _no_budget(result, budget, why: str) -> None:
    if budget is not None:
        raise ValueError(f"budget must be None for a {type(result).__name__} ({why}); got {budget!r}")


def _no_link(result, link, why: str) -> None:
    if link:
        raise ValueError(f"link=True is not available for a {type(result).__name__} ({why})")


# ---------------------------------------------------------------------------------------------
# Sparse X: linear results by scipy's sparse product on the host.


def _sparse_predict(result, X, budget, link: bool):
    """:func:`predict` for sparse X (see the module docstring): O(nnz + m·outputs) memory."""
    if isinstance(result, DWSMPolicy):
        raise TypeError(
            "a DWSM policy does not predict on sparse X (its episodes read single entries of each datum): "
            "pass X.toarray(), or use a linear result (fsa, cs_omp, greedy_rls, ...) for sparse data"
        )
    if isinstance(result, CVResult):
        raise TypeError(_CV_MESSAGE)
    if budget is not None and is_traced(budget):
        raise ValueError("with sparse X the budget must be concrete (sparse predictions run on the host)")
    if isinstance(result, (SelectionPath, RLSResult)):
        return _sparse_path_predict(anytime.as_path(result), X, budget, link)
    if isinstance(result, FSAResult):
        _no_budget(result, budget, "an FSA result is one model of k features")
        _no_link(result, link, "FSA scores: apply jax.nn.sigmoid yourself for loss='logistic'")
        return _sparse_fsa_predict(result, X)
    if isinstance(result, GroupLassoFit):
        _no_budget(result, budget, "a group-lasso fit has one model per λ; group_lasso_path gives a budgeted path")
        coef = host_array(result.raw_coef)
        if coef.ndim != 3:
            raise ValueError(f"predict needs an unbatched GroupLassoFit (raw_coef (L, D, T)); got {coef.shape}")
        L, d, T = coef.shape
        csr = _sparse_rows(X, d, coef.dtype)
        pred = (csr @ coef.transpose(1, 0, 2).reshape(d, L * T)).reshape(-1, L, T).transpose(1, 0, 2)
        pred = _finite(pred + host_array(result.raw_intercept)[:, None, :], csr)
        return pred[..., 0] if T == 1 else pred
    raise TypeError(f"predict takes {_PREDICTABLE}; got {type(result).__name__}")


def _sparse_rows(X, d: int, dtype):
    """The canonical CSR of a sparse X in the model's dtype, checked against the training width ``d``."""
    csr = as_sparse_csr(X, "X", dtype=np.dtype(dtype))
    if csr.shape[1] != d:
        raise ValueError(f"X has {csr.shape[1]} columns but the model was trained on {d}; pass X with {d}")
    return csr


def _finite(pred: np.ndarray, csr):
    """Concrete predictions as a JAX array; a ValueError when they overflow (X's scale)."""
    if not np.all(np.isfinite(pred)):
        big = float(np.max(np.abs(csr.data))) if csr.nnz else 0.0
        raise ValueError(
            f"the predictions overflow {pred.dtype}: X has entries up to {big:.3g}, too large for this model's "
            "coefficients (or the model is not finite); rescale X as the training data were scaled, or use float64"
        )
    return jnp.asarray(pred)


def _sparse_path_predict(path: SelectionPath, X, budget, link: bool):
    """Every prefix (budget None) or the prefix within ``budget`` of a path, on sparse X."""
    coef = host_array(path.coef)  # (m, D or P, T)
    intercept = host_array(path.intercept)  # (m, T)
    d = path.n_features
    csr = _sparse_rows(X, d, coef.dtype)
    if path.features is None:
        cols = csr
    else:  # a slot path: the P slot columns (empty slots, index D, multiply zero coefficients)
        features = host_array(path.features)
        cols = csr[:, np.minimum(features, d - 1)]
        coef = coef * (features < d).astype(coef.dtype)[None, :, None]
    m, p, T = coef.shape
    if budget is None:
        pred = (cols @ coef.transpose(1, 0, 2).reshape(p, m * T)).reshape(-1, m, T).transpose(1, 0, 2)
        pred = pred + intercept[:, None, :]
    else:
        j = int(host_array(anytime.budget_steps(path.cum_cost, anytime.check_budget(budget, coef.dtype))))
        step_coef = coef[j - 1] if j > 0 else np.zeros_like(coef[0])
        pred = np.asarray(cols @ step_coef) + (intercept[j - 1] if j > 0 else host_array(path.null_intercept))
    pred = _finite(pred.astype(coef.dtype, copy=False), csr)
    if link:
        pred = _inverse_link(int(host_array(path.link)), pred)
    return pred[..., 0] if pred.shape[-1] == 1 else pred


def _inverse_link(code: int, scores):
    """The path's inverse link (:data:`jaxselect.path.LINKS`) on (..., T) scores."""
    name = LINKS[min(max(code, 0), len(LINKS) - 1)]
    if name == "logistic":
        return jax.nn.sigmoid(scores)
    if name == "softmax":
        return jax.nn.softmax(scores, axis=-1)
    return scores


def _sparse_fsa_predict(result: FSAResult, X):
    """FSA scores on sparse X: the k support columns only (linear: one sparse product)."""
    support = host_array(result.support)
    coef = host_array(result.coef)
    width = result.n_features
    if width is None or np.ndim(width):
        raise ValueError("predict on sparse X needs an FSA result with n_features (from jaxselect.fsa)")
    csr = _sparse_rows(X, int(width), coef.dtype)
    cols = csr[:, support]
    if result.x_min is None:
        pred = np.asarray(cols @ coef) + host_array(result.intercept)
        return _finite(pred.astype(coef.dtype, copy=False), csr)
    # piecewise-linear learners: the (m, k) support columns, dense, through the same encoding
    k = int(support.shape[0])
    local = result._replace(support=jnp.arange(k, dtype=jnp.int32), n_features=k)
    return _fsa_predict(local, cols.toarray())


@any_mesh
def _group_lasso_predict(fit: GroupLassoFit, X) -> jax.Array:
    X = as_float_matrix(X, "X", dtype=fit.raw_coef.dtype)
    if fit.raw_coef.ndim != 3:
        raise ValueError(f"predict needs an unbatched GroupLassoFit (raw_coef (L, D, T)); got {fit.raw_coef.shape}")
    d = fit.raw_coef.shape[1]
    if X.shape[1] != d:
        raise ValueError(f"X has {X.shape[1]} columns but the fit was trained on {d}; pass X with {d}")
    pred = _group_lasso_scores(fit.raw_coef, fit.raw_intercept, X)
    pred = check_finite_output(pred, X, "predict")
    return pred[..., 0] if pred.shape[-1] == 1 else pred


@jax.jit
def _group_lasso_scores(coef, intercept, X):
    return jnp.einsum("md,ldt->lmt", X, coef) + intercept[:, None, :]


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
    _deprecated("fsa_predict", "jaxselect.predict(result, X)")
    return _fsa_predict(result, X)


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
    _deprecated("glm_predict", "jaxselect.predict(path, X, budget, link=True)")
    return _glm_predict(path, X, budget)


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
    _deprecated("rls_predict", "jaxselect.predict(result, X, budget=step)")
    return _rls_predict(result, X, step=step)


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
    _deprecated("rls_predict_path", "jaxselect.predict(result, X)")
    return _rls_predict_path(result, X)


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
    _deprecated("dwsm_predict", "jaxselect.predict(policy, X)")
    return _dwsm_predict(policy, X)
