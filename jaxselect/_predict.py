"""``js.predict``: one single-dispatch function over the fitted results, and the anytime predictor.

:func:`predict` validates ``X`` once — a dense array becomes a finite float ``jax.Array`` in the
result's dtype (:func:`~jaxselect._validation.as_float_matrix`), a sparse one (``scipy.sparse``
any format, BCOO/BCSR) the canonical scipy CSR in that dtype
(:func:`~jaxselect.design.as_sparse_csr`: never densified) — and then calls the predictor
registered for the result's type (``functools.singledispatch``)::

    @js.predict.register(MyResult)
    def _(result, X, budget, link):   # X: a validated jax.Array (dense) or scipy CSR (sparse)
        ...

Each family registers its own result type in its own package (``jaxselect.anneal``:
:class:`~jaxselect.FSAResult`, ``jaxselect.dwsm``: :class:`~jaxselect.DWSMPolicy`,
``jaxselect.sequencing``: :class:`~jaxselect.GroupLassoFit`, ``jaxselect.rls``:
:class:`~jaxselect.RLSResult`, :mod:`jaxselect.model_selection`: :class:`~jaxselect.CVResult`), so
this module imports no family. The shared anytime result, :class:`~jaxselect.SelectionPath`, is
registered here: :func:`predict_path` is the anytime predictor (the longest prefix within a budget,
or every prefix), on dense and sparse X, through the path's inverse link with ``link=True``.

Layer 2 (beside :mod:`jaxselect.path`): it imports the core and the data layer only.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect._budget import within_budget
from jaxselect._validation import as_float_matrix, check_float, host_array, host_value, is_traced
from jaxselect.design import as_sparse_csr, is_sparse
from jaxselect.design.buckets import bucket_rows
from jaxselect.path import LINKS, SelectionPath
from jaxselect.programs import jit
from jaxselect.sharding import any_mesh
from jaxselect.status import status_message

__all__ = [
    "predict",
    "predict_path",
    "path_scores",
    "check_predictions",
    "refuse",
    "check_budget",
    "budget_steps",
    "no_budget",
    "no_link",
    "check_width",
    "host_predictions",
    "rows_on_axis",
    "anytime_rows",
]


@functools.singledispatch
def _predictor(result, X, budget, link):
    """The predictor of a type nobody registered (never called: :func:`predict` checks first)."""
    raise _unknown(result)


#: types registered with :func:`refuse` (results that hold no model): left out of the list of predictable types
_REFUSED: set = set()


def refuse(cls, message: str) -> None:
    """Register ``cls`` as a result :func:`predict` refuses with ``TypeError(message)`` (a result
    that holds no model, e.g. :class:`~jaxselect.CVResult`: the message says what to do)."""

    def refused(result, X, budget, link):
        raise TypeError(message)

    _predictor.register(cls, refused)
    _REFUSED.add(cls)


#: result type → ``axis_of(budget)``: the axis of X's rows in its predictions (:func:`rows_on_axis`)
_ROW_AXIS: dict = {}


def rows_on_axis(cls, axis_of) -> None:
    """Declare that the predictions of a ``cls`` result are computed row by row, X's rows on axis
    ``axis_of(budget)`` of each prediction array (of every array of a tuple of them): :func:`predict`
    then pads a numpy X with zero rows up to its shape bucket
    (:func:`~jaxselect.design.buckets.bucket_rows`) and cuts the predictions back to X's rows on
    the host, so that new row counts of nearby size share the compiled program."""
    _ROW_AXIS[cls] = axis_of


def _unknown(result) -> TypeError:
    names = [t.__name__ for t in _predictor.registry if t is not object and t not in _REFUSED]
    names = ", ".join(names[:-1]) + (" or " if len(names) > 1 else "") + names[-1] if names else "a fitted result"
    return TypeError(f"predict takes a {names}; got {type(result).__name__}")


def _model_dtype(result):
    """The floating dtype of the result's arrays (the dtype X is validated in)."""
    dtypes = [
        leaf.dtype
        for leaf in jax.tree.leaves(result)
        if hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jnp.floating)
    ]
    return jax.dtypes.canonicalize_dtype(np.result_type(*dtypes)) if dtypes else None  # float64 only under x64


def predict(result, X, budget=None, *, link: bool = False):
    """Predictions of any fitted result on raw features: a single-dispatch function on the result's type.

    ====================================  ==========================================  =====================================
    result (from)                         ``budget``                                  returns
    ====================================  ==========================================  =====================================
    :class:`~jaxselect.SelectionPath`     a cumulative cost B: the longest prefix     (m,) or (m, T); without a budget
    (``cs_omp``, ``cs_fr``, ``doubling``, with ``cum_cost ≤ B`` (intercept-only       (n_steps, m[, T]), row j the model
    ``glm_omp``, ``group_lasso_path``, …) below the cheapest); None: every prefix     after j + 1 groups. ``link=True``:
                                                                                      through the path's inverse link
    :class:`~jaxselect.RLSResult`         B features (unit costs: the model with      as for a path (its prefixes, via
    (``greedy_rls``)                      ⌊B⌋ features); None: every prefix           :func:`~jaxselect.as_path`)
    :class:`~jaxselect.FSAResult`         must be None (one model of k features)      (m,) scores
    :class:`~jaxselect.GroupLassoFit`     must be None (one model per λ)              (L, m[, T]): the model at each λ
    :class:`~jaxselect.DWSMPolicy`        must be None (its hard budget is set at     ``(labels (m,), acquired (m, d))``
                                          fit time: ``dwsm_fit(budget=B)``)
    ====================================  ==========================================  =====================================

    ``X`` may be sparse (``scipy.sparse`` any format, BCOO/BCSR) for the linear results: the
    predictions are ``X @ coef + intercept`` by scipy's sparse product on the host, never
    densifying X; a DWSM policy needs dense X. One rule for every result: ``X`` has exactly the
    training width and finite entries (inside a user's ``jax.jit`` only shapes are checked); a
    concrete budget is a finite number ≥ 0. A :class:`~jaxselect.CVResult` holds scores, not a
    model: refit at ``cv.best`` and predict with that.

    New result types plug in with ``js.predict.register(ResultType)`` on a function
    ``(result, X, budget, link) -> predictions`` that receives ``X`` validated (a ``jax.Array`` in
    the result's floating dtype, or a scipy CSR matrix); ``js.predict.registry`` lists them.
    Every type above predicts row by row (:func:`rows_on_axis`): a numpy X is padded with zero
    rows to its shape bucket and the predictions are cut back to its rows, so that nearby row
    counts share one compiled program (``JAXSELECT_SHAPE_BUCKETS=0`` turns it off).

    Args:
      result: a fitted result of a registered type.
      X: (m, D) raw features, exactly the D columns the result was trained on.
      budget: anytime results (paths, greedy RLS): a cumulative cost B ≥ 0 (a scalar; may be
        traced, then only its shape is checked), or None for every prefix; must be None for the others.
      link: paths only: the linear scores through the path's inverse link (sigmoid / softmax).

    Raises:
      TypeError: a result of an unregistered type (a :class:`~jaxselect.CVResult` says what to
        do); sparse X for a DWSM policy.
      ValueError: X of another width than the training data or with NaN/Inf; a budget that is
        negative, NaN, infinite or not a scalar, or any budget for a result without one;
        ``link=True`` for a result without a link; predictions that overflow.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = 2 * X[:, 1] + 1
    >>> path = js.cs_omp(js.prepare(X, y))
    >>> bool(np.allclose(js.predict(path, X, budget=1.0), y, atol=1e-3)), js.predict(path, X).shape
    (True, (3, 100))
    >>> import scipy.sparse as sp                       # sparse X: the same predictions, X never densified
    >>> bool(np.allclose(js.predict(path, sp.csr_matrix(X), budget=1.0), js.predict(path, X, budget=1.0)))
    True
    """
    fn = _predictor.dispatch(type(result))
    if fn is _predictor.dispatch(object):
        raise _unknown(result)
    dtype = _model_dtype(result)
    if is_sparse(X):
        X = as_sparse_csr(X, "X", dtype=None if dtype is None else np.dtype(dtype))
        return fn(result, X, budget, link)
    # row by row: a numpy X's rows padded to their bucket (nearby row counts share the program)
    axis_of = _ROW_AXIS.get(type(result))
    padded = axis_of is not None and type(X) is np.ndarray and X.ndim == 2 and not is_traced((result, budget))
    n_rows = X.shape[0] if padded else None
    X = as_float_matrix(X if n_rows is None else bucket_rows(X), "X", dtype=dtype)
    pred = fn(result, X, budget, link)
    if n_rows is None or X.shape[0] == n_rows:
        return pred
    # cut on the host: an eager slice of a device array would compile a program per row count
    rows = (slice(None),) * axis_of(budget) + (slice(n_rows),)
    return jax.tree.map(lambda a: jax.device_put(np.asarray(a)[rows]), pred)


predict.register = _predictor.register
predict.dispatch = _predictor.dispatch
predict.registry = _predictor.registry


# ---------------------------------------------------------------------------------------------
# Rules every predictor shares


def no_budget(result, budget, why: str) -> None:
    """ValueError: ``result`` has no budget at predict time (``why`` says why)."""
    if budget is not None:
        raise ValueError(f"budget must be None for a {type(result).__name__} ({why}); got {budget!r}")


def no_link(result, link, why: str) -> None:
    """ValueError: ``link=True`` for a result without an inverse link."""
    if link:
        raise ValueError(f"link=True is not available for a {type(result).__name__} ({why})")


def check_width(X, d: int, what: str = "the model was trained on") -> None:
    """ValueError unless the validated X (dense or CSR) has ``d`` columns."""
    if X.shape[1] != d:
        raise ValueError(f"X has {X.shape[1]} columns but {what} {d}; pass X with {d}")


def host_predictions(pred: np.ndarray, csr):
    """Host (sparse-product) predictions as a JAX array; a ValueError when they overflow."""
    if not np.all(np.isfinite(pred)):
        big = float(np.max(np.abs(csr.data))) if csr.nnz else 0.0
        raise ValueError(
            f"the predictions overflow {pred.dtype}: X has entries up to {big:.3g}, too large for this model's "
            "coefficients (or the model is not finite); rescale X as the training data were scaled, or use float64"
        )
    return jax.device_put(pred)


def check_budget(budget, dtype) -> jax.Array:
    """A scalar cumulative cost ≥ 0 as a ``dtype`` scalar (a traced budget: shape and dtype only).

    Raises:
      ValueError: a non-scalar, negative, NaN or infinite budget.
      TypeError: a budget that is not a real number.
    """
    if is_traced(budget):
        if jnp.shape(budget) != ():
            raise ValueError(
                f"budget must be a scalar cost; got shape {jnp.shape(budget)} (call predict once per budget)"
            )
        if not jnp.issubdtype(jnp.result_type(budget), jnp.number):
            raise TypeError(f"budget must be a real number (a cumulative cost); got dtype {jnp.result_type(budget)}")
        return jnp.asarray(budget, dtype)  # a traced budget below 0 gives the intercept-only model
    if np.ndim(budget) != 0:
        raise ValueError(f"budget must be a scalar cost; got shape {np.shape(budget)} (call predict once per budget)")
    if isinstance(budget, (jax.Array, np.ndarray)):
        if not jnp.issubdtype(jnp.result_type(budget), jnp.number) or jnp.issubdtype(
            jnp.result_type(budget), jnp.complexfloating
        ):
            raise TypeError(f"budget must be a real number (a cumulative cost); got dtype {jnp.result_type(budget)}")
        budget = host_array(budget)[()]
    budget = check_float(budget, "budget", low=0.0)
    budget = min(budget, float(np.finfo(dtype).max))  # beyond the dtype: every prefix
    return jax.device_put(np.asarray(budget, np.dtype(dtype)))


def budget_steps(cum_cost: jax.Array, budget: jax.Array) -> jax.Array:
    """Number of prefixes within ``budget`` (:func:`jaxselect._budget.within_budget`; cum_cost non-decreasing)."""
    return jnp.sum(within_budget(cum_cost, budget))


# ---------------------------------------------------------------------------------------------
# The anytime predictor of a SelectionPath (and of what converts to one)


def _squeeze(pred):
    return pred[..., 0] if pred.shape[-1] == 1 else pred


def _trained_width(path: SelectionPath, width: int) -> int:
    """D of the path (a traced slot path cannot tell: X's width is taken on trust)."""
    if path.features is not None and is_traced(path.features):
        return width
    return path.n_features


def _apply_link(link, scores):
    """The inverse link of code ``link`` (:data:`jaxselect.path.LINKS`) on (..., T) scores (traceable)."""
    return jax.lax.switch(
        jnp.clip(link, 0, len(LINKS) - 1),
        [lambda s: s, jax.nn.sigmoid, lambda s: jax.nn.softmax(s, axis=-1)],
        scores,
    )


def path_scores(path: SelectionPath, X, budget=None, link: bool = False):
    """The anytime predictions of ``path`` on a dense X (traceable, no checks): every prefix
    (``budget`` None) or the longest prefix within ``budget`` (a ``dtype`` scalar from
    :func:`check_budget`; the intercept-only model below the cheapest prefix), through the path's
    inverse link with ``link``, the target axis dropped when T = 1. A family whose result converts
    to a path calls it inside its own compiled program (``rls_to_path`` and this: one program)."""
    cols = path.columns(X)
    if budget is None:
        pred = jnp.einsum("md,jdt->jmt", cols, path.coef) + path.intercept[:, None, :]
    else:
        j = budget_steps(path.cum_cost, budget)  # cum_cost is non-decreasing (+inf where untaken)
        use = j > 0
        k = jnp.maximum(j - 1, 0)
        coef = jnp.where(use, path.coef[k], jnp.zeros_like(path.coef[0]))
        intercept = jnp.where(use, path.intercept[k], path.null_intercept)
        pred = cols @ coef + intercept[None, :]
    if link:
        pred = _apply_link(path.link, pred)
    return _squeeze(pred)


_path_scores = jit(path_scores, static_argnames=("link",))


def check_predictions(pred, X, model=None):
    """``pred`` (predictions on the dense ``X``), or a ValueError naming the cause of non-finite
    values: the model (``model``: a ``(coef, intercept, status)`` triple of its arrays) or X's
    scale. The check reads the predictions on the host: no compiled program; a no-op when traced."""
    ok = host_value(lambda: np.isfinite(np.asarray(pred)).all())
    if ok is None or bool(ok):
        return pred
    if model is not None:
        coef, intercept, status = model
        finite = host_value(lambda: np.isfinite(np.asarray(coef)).all() & np.isfinite(np.asarray(intercept)).all())
        if finite is not None and not bool(finite):
            status = np.asarray(status)
            raise ValueError(
                f"the model has non-finite coefficients (status {int(np.bitwise_or.reduce(np.ravel(status)))}:"
                f" {status_message(status)}); refit it on rescaled data or in float64"
            )
    big = host_value(lambda: np.max(np.abs(np.asarray(X))))
    raise ValueError(
        f"the predictions overflow {pred.dtype}: X has entries up to {float(big) if big is not None else float('nan'):.3g}, "
        "too large for this model's coefficients; rescale X as the training data were scaled, or use float64"
    )


@any_mesh
def _dense_path_predict(path: SelectionPath, X, budget, link: bool):
    X = X.astype(path.coef.dtype) if X.dtype != path.coef.dtype else X
    d = _trained_width(path, X.shape[1])
    if X.shape[1] != d:
        raise ValueError(f"X has {X.shape[1]} columns but the path was trained on {d}")
    budget = None if budget is None else check_budget(budget, path.coef.dtype)
    pred = _path_scores(path, X, budget, link=bool(link))
    return check_predictions(pred, X, (path.coef, path.intercept, path.status))


def _sparse_path_predict(path: SelectionPath, csr, budget, link: bool):
    """Every prefix (budget None) or the prefix within ``budget`` of a path, on sparse X (host)."""
    if budget is not None and is_traced(budget):
        raise ValueError("with sparse X the budget must be concrete (sparse predictions run on the host)")
    coef = host_array(path.coef)  # (m, D or P, T)
    intercept = host_array(path.intercept)  # (m, T)
    d = path.n_features
    csr = csr.astype(coef.dtype, copy=False)
    if csr.shape[1] != d:
        raise ValueError(f"X has {csr.shape[1]} columns but the model was trained on {d}; pass X with {d}")
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
        j = int(host_array(budget_steps(path.cum_cost, check_budget(budget, coef.dtype))))
        step_coef = coef[j - 1] if j > 0 else np.zeros_like(coef[0])
        pred = np.asarray(cols @ step_coef) + (intercept[j - 1] if j > 0 else host_array(path.null_intercept))
    pred = host_predictions(pred.astype(coef.dtype, copy=False), csr)
    if link:
        pred = _inverse_link_host(int(host_array(path.link)), pred)
    return _squeeze(pred)


def _inverse_link_host(code: int, scores):
    name = LINKS[min(max(code, 0), len(LINKS) - 1)]
    if name == "logistic":
        return jax.nn.sigmoid(scores)
    if name == "softmax":
        return jax.nn.softmax(scores, axis=-1)
    return scores


def anytime_rows(budget) -> int:
    """X's rows in an anytime result's predictions: (n_steps, m[, T]) without a budget, else (m[, T])."""
    return 1 if budget is None else 0


rows_on_axis(SelectionPath, anytime_rows)


@_predictor.register(SelectionPath)
def predict_path(path: SelectionPath, X, budget=None, link: bool = False):
    """The anytime predictor of a :class:`~jaxselect.SelectionPath` on a validated X (dense
    ``jax.Array`` or scipy CSR): the longest prefix with ``cum_cost ≤ budget`` (up to a relative
    tolerance of 32 machine epsilons; the intercept-only model below the cheapest prefix), or every
    prefix for ``budget=None``; ``link=True`` passes the scores through the path's inverse link."""
    if is_sparse(X):
        return _sparse_path_predict(path, X, budget, link)
    return _dense_path_predict(path, X, budget, link)
