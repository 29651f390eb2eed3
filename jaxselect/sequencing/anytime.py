"""Anytime prediction and its evaluation (Hu et al. §1 and §5.2).

* :func:`predict` — the anytime predictor: at budget B use the longest prefix whose cumulative cost
  is ≤ B (the intercept-only model below the cheapest prefix); without a budget, every prefix.
* :func:`objective_curve` — held-out objective (explained variance, R², accuracy or any metric)
  against cumulative cost.
* :func:`alpha_stopping_cost`, :func:`plateau_alpha` — where to stop the curve (the paper's
  α-stopping cost and its plateau rule).
* :func:`timeliness` — the normalised area under the objective-vs-cost curve up to the stopping
  cost (Karayev et al. 2012, as used in Hu et al. Tables 1–2).
* :func:`oracle_curve` — the paper's oracle: the same groups reordered by decreasing marginal gain
  per unit cost, the marginal gains held fixed.

Curves are small host-side summaries, returned as numpy arrays in a :class:`Curve`.

Every function takes a :class:`SelectionPath` or any anytime result that :func:`as_path` converts
(the :class:`~jaxselect.RLSResult` of :func:`~jaxselect.greedy_rls`: its features are unit-cost
groups, so a budget B is the model with ⌊B⌋ features).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import numpy as np

from jaxselect._repr import short_repr
from jaxselect._validation import as_float_matrix, check_float, host_array, is_traced
from jaxselect import _predict
from jaxselect._predict import budget_steps, check_budget  # noqa: F401 - re-exported
from jaxselect.path import RLSResult, SelectionPath, rls_to_path
from jaxselect.sharding import any_mesh
from jaxselect.status import NONFINITE, status_message

__all__ = [
    "Curve",
    "as_path",
    "predict",
    "objective_curve",
    "alpha_stopping_cost",
    "plateau_alpha",
    "timeliness",
    "oracle_curve",
]


class _CurveFields(NamedTuple):
    cost: np.ndarray
    value: np.ndarray
    order: np.ndarray
    status: int = 0


class Curve(_CurveFields):
    """An objective-vs-cost curve.

    Attributes:
      cost: (m+1,) cumulative cost, starting at 0 (the intercept-only model).
      value: (m+1,) the objective at each cost.
      order: (m,) the group added at each point after the first.
      status: int, the library's status flags (:mod:`jaxselect.status`): the OR of the status of
        the path the curve was computed from, with ``NONFINITE`` (1) added whenever ``cost`` or
        ``value`` hold NaN/Inf. Built by hand without a ``status``: 0, or ``NONFINITE`` for
        non-finite values.

    Built by :func:`objective_curve` (held-out) and :func:`train_curve` (training), read by
    :func:`timeliness`, :func:`alpha_stopping_cost`, :func:`plateau_alpha` and :func:`oracle_curve`;
    one can also be built by hand from numpy arrays.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = 2 * X[:, 1] + 1
    >>> path = js.cs_omp(js.prepare(X, y))
    >>> curve = js.objective_curve(path, X, y)
    >>> curve.cost.tolist(), [round(v, 3) for v in curve.value.tolist()], curve.status
    ([0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 1.0, 1.0], 0)
    >>> js.Curve(cost=np.array([0.0, 1.0]), value=np.array([0.0, np.nan]), order=np.array([0])).status
    1
    """

    __slots__ = ()

    def __new__(cls, cost, value, order, status=0):
        return super().__new__(cls, cost, value, order, _curve_status(cost, value, status))

    __repr__ = short_repr


def _curve_status(cost, value, status) -> int:
    """``status`` (an int or a status array: its flags are OR-ed) with NONFINITE for non-finite values."""
    code = int(np.bitwise_or.reduce(np.ravel(np.asarray(status, np.int64)), initial=0))
    try:
        finite = all(bool(np.all(np.isfinite(np.asarray(a, np.float64)))) for a in (cost, value))
    except (TypeError, ValueError):  # not numeric: _check_curve says so when the curve is read
        finite = True
    return code if finite else code | NONFINITE


def as_path(result) -> SelectionPath:
    """The :class:`SelectionPath` of an anytime result.

    A :class:`SelectionPath` (``cs_omp``, ``cs_fr``, ``doubling``, ``glm_omp``,
    ``group_lasso_path``, ``fixed_order_path``) is returned as it is; an
    :class:`~jaxselect.RLSResult` (``greedy_rls``) becomes the path of its prefixes, each feature a
    unit-cost group (the same predictions as :func:`~jaxselect.rls_predict`).

    Raises:
      TypeError: anything else.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = 2 * X[:, 1] + 1
    >>> js.as_path(js.greedy_rls(X, y, 2)).cum_cost.tolist()
    [1.0, 2.0]
    """
    if isinstance(result, SelectionPath):
        return result
    if isinstance(result, RLSResult):
        return rls_to_path(result)
    raise TypeError(
        "expected an anytime result: a SelectionPath (from cs_omp, cs_fr, doubling, glm_omp, "
        f"group_lasso_path, ...) or an RLSResult (from greedy_rls); got {type(result).__name__}"
    )


def predict(path, X, budget=None) -> jax.Array:
    """Anytime linear predictions from raw features.

    Args:
      path: a :class:`SelectionPath` or an :class:`~jaxselect.RLSResult` (see :func:`as_path`).
      X: (m, D) raw features (same columns as at training time).
      budget: a cumulative cost B (a scalar; may be traced). With a budget, the model of the
        longest prefix with ``cum_cost ≤ B`` is used (the intercept-only model if even the first
        group costs more); the comparison allows a relative tolerance of 32 machine epsilons, so a
        budget equal to a prefix's cost in decimal (e.g. 24.31) selects that prefix in float32.
        Without one, predictions of every prefix are returned.

    Returns:
      With a budget: (m,) predictions, or (m, T) for T > 1 targets. Without: (n_steps, m) or
      (n_steps, m, T) — row j is the model after j + 1 groups.

    Raises:
      ValueError: X with the wrong number of columns or NaN/Inf, a non-scalar, negative, NaN or
        infinite budget (a traced budget is only checked for its shape: below 0 it gives the
        intercept-only model), or predictions that overflow (X far beyond the training scale).

    >>> import numpy as np, jaxselect
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = 2 * X[:, 1] + 1
    >>> path = jaxselect.cs_omp(jaxselect.prepare(X, y))
    >>> bool(np.allclose(jaxselect.predict(path, X, budget=1.0), y, atol=1e-3))
    True
    """
    return _predict.predict(as_path(path), X, budget)


def _metric_fn(metric) -> Callable:
    if callable(metric):
        return metric
    if metric == "explained_variance":
        return None  # needs the null model; handled in objective_curve
    if metric == "r2":

        def r2(Y, P):
            sse = np.sum((Y - P) ** 2)
            sst = np.sum((Y - Y.mean(axis=0)) ** 2)
            if not sst > 0:
                raise ValueError(
                    "metric='r2' is undefined for a constant held-out Y (zero variance in every column); "
                    "use more varied held-out rows, or metric='explained_variance'"
                )
            return 1.0 - sse / sst

        return r2
    if metric == "accuracy":

        def accuracy(Y, P):
            if Y.shape[1] == 1:
                cut = _binary_threshold(Y[:, 0])
                return float(np.mean((P[:, 0] > cut) == (Y[:, 0] > cut)))
            return float(np.mean(np.argmax(P, axis=1) == np.argmax(Y, axis=1)))

        return accuracy
    raise ValueError(
        f"metric must be 'explained_variance', 'r2', 'accuracy' or a callable(Y_true, Y_pred); got {metric!r}"
    )


def _binary_threshold(y: np.ndarray) -> float:
    """Midpoint between the two label values of a binary target ({0, 1} → 0.5, {−1, +1} → 0)."""
    values = np.unique(y)
    for pair in ((0.0, 1.0), (-1.0, 1.0)):
        if np.all(np.isin(values, pair)):
            return 0.5 * (pair[0] + pair[1])
    if values.size == 2:
        return 0.5 * float(values[0] + values[1])
    raise ValueError(
        f"metric='accuracy' with one target column needs binary labels (two values, e.g. {{0, 1}} or "
        f"{{-1, +1}}); Y has {values.size} distinct values {values[:6].tolist()}. For C classes pass "
        "one-hot (m, C) targets; for real targets use 'explained_variance' or 'r2'"
    )


@any_mesh
def objective_curve(path, X, Y, *, metric="explained_variance") -> Curve:
    """Held-out objective of every prefix against its cumulative cost.

    Metrics (Y_true and predictions as (m, T) arrays):

    * ``"explained_variance"``: ``1 − ‖Y − Ŷ‖² / ‖Y − ŷ_0‖²`` with ŷ_0 the intercept-only model
      (the training mean) — the held-out counterpart of the paper's F, 0 at cost 0;
    * ``"r2"``: ``1 − ‖Y − Ŷ‖² / ‖Y − Ȳ‖²`` with the held-out mean Ȳ;
    * ``"accuracy"``: for one column of binary labels, predictions thresholded halfway between the
      two label values ({0, 1} at 0.5, {−1, +1} at 0); for T one-hot columns, the argmax;
    * any callable ``metric(Y_true, Y_pred) -> float`` on numpy arrays.

    Untaken steps (order −1) are left out.

    Args:
      path: a :class:`SelectionPath` or an :class:`~jaxselect.RLSResult` (see :func:`as_path`).
      X: (m, D) raw features.
      Y: (m,) or (m, T) raw targets.

    Returns:
      A :class:`Curve` whose first point is the intercept-only model at cost 0.

    Raises:
      ValueError: X or Y of the wrong shape or with NaN/Inf, an unknown metric, a metric that is
        undefined on Y (R² of a constant Y, accuracy of non-binary labels).

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = 2 * X[:, 1] + 1
    >>> path = js.cs_omp(js.prepare(X, y))
    >>> r2 = js.objective_curve(path, X, y, metric="r2")   # or "accuracy", or a callable
    >>> r2.value.shape, round(float(r2.value[1]), 3)
    ((4,), 1.0)
    """
    path = as_path(path)
    _check_concrete_path(path, "objective_curve")
    fn = _metric_fn(metric)
    preds = predict(path, X)
    X = as_float_matrix(X, "X", dtype=path.coef.dtype)
    # Metrics are host-side sums over the held-out rows: Y is checked and used in float64 whatever
    # the path's dtype (a Y of 1e20 or 1e39 is fine here).
    Yt = _host_targets(Y, X.shape[0])
    if Yt.shape[1] != path.coef.shape[-1]:
        raise ValueError(f"Y has {Yt.shape[1]} target column(s) but the path predicts {path.coef.shape[-1]}")
    # host_array: predictions (and Y) of rows held by several processes are gathered first
    preds = host_array(preds).astype(np.float64).reshape((path.n_steps, X.shape[0], -1))
    null = np.broadcast_to(np.asarray(path.null_intercept, np.float64), Yt.shape)
    if fn is None:
        base = np.sum((Yt - null) ** 2)
        if not base > 0:
            raise ValueError(
                "metric='explained_variance' is undefined here: Y equals the intercept-only model's prediction "
                "on every row (‖Y − ŷ_0‖ = 0); use a held-out Y that varies, or metric='r2'"
            )

        def fn(Y, P):
            return 1.0 - np.sum((Y - P) ** 2) / base

    taken = np.asarray(path.order) >= 0
    values = np.asarray([fn(Yt, null)] + [fn(Yt, p) for p, t in zip(preds, taken) if t], np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError(
            f"metric returned non-finite values {values[~np.isfinite(values)][:3].tolist()}; "
            "a metric must give a finite number for every prefix"
        )
    cost = np.concatenate([[0.0], np.asarray(path.cum_cost, np.float64)[taken]])
    return Curve(cost, values, np.asarray(path.order)[taken], path.status)


def _check_concrete_path(path: SelectionPath, what: str) -> None:
    """Curves are host-side summaries of one concrete path."""
    if is_traced(path) or np.ndim(path.order) != 1:
        raise ValueError(f"{what} needs a concrete, unbatched path (call it outside jax.jit/vmap)")


def _host_targets(Y, m: int) -> np.ndarray:
    """Held-out targets (m,) or (m, T) as a float64 numpy (m, T) array (finite, numeric)."""
    if is_traced(Y):
        raise ValueError("Y is traced: curves are host-side summaries, call this outside jax.jit/vmap")
    Yn = host_array(Y)
    if Yn.dtype == object or Yn.dtype.kind not in "biuf":
        raise TypeError(f"Y must be numeric; got dtype {Yn.dtype}")
    if Yn.ndim not in (1, 2) or (Yn.ndim == 2 and Yn.shape[1] < 1):
        raise ValueError(f"Y must be 1-D (m,) or 2-D (m, T); got shape {Yn.shape}")
    if Yn.shape[0] != m:
        raise ValueError(f"Y has {Yn.shape[0]} rows but X has {m}; they must match")
    Yt = Yn.astype(np.float64).reshape((m, -1))
    if not np.all(np.isfinite(Yt)):
        raise ValueError("Y contains NaN or Inf")
    return Yt


def train_curve(path) -> Curve:
    """The training objective curve stored in the path (cost 0 ↦ 0); any result :func:`as_path` takes.

    The values are the path's ``objective``: the fraction of the feature-less model's training loss
    removed by each prefix (:class:`~jaxselect.SelectionPath`; the regularised R² of the regression
    solvers, the null risk removed for :func:`~jaxselect.glm_omp`, the LOO error removed for greedy
    RLS); untaken steps are left out.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = 2 * X[:, 1] + 1
    >>> path = js.cs_omp(js.prepare(X, y))
    >>> js.train_curve(path).cost.tolist()
    [0.0, 1.0, 2.0, 3.0]
    """
    path = as_path(path)
    _check_concrete_path(path, "train_curve")
    taken = np.asarray(path.order) >= 0
    cost = np.concatenate([[0.0], np.asarray(path.cum_cost, np.float64)[taken]])
    value = np.concatenate([[0.0], np.asarray(path.objective, np.float64)[taken]])
    if not (np.all(np.isfinite(value)) and np.all(np.isfinite(cost))):
        raise ValueError(
            f"path has non-finite objective values (status {int(np.asarray(path.status))}: "
            f"{status_message(np.asarray(path.status))}); refit it on rescaled data or in float64"
        )
    return Curve(cost, value, np.asarray(path.order)[taken], path.status)


def _as_curve(curve) -> Curve:
    if isinstance(curve, Curve):
        return _check_curve(curve)
    try:
        return train_curve(curve)
    except TypeError:
        raise TypeError(
            f"expected a Curve (from objective_curve), a SelectionPath or an RLSResult; got {type(curve).__name__}"
        ) from None


def _check_curve(curve: Curve) -> Curve:
    """A Curve built by hand must look like one: 1-D finite costs (non-decreasing, ≥ 0) and values."""
    try:
        cost = np.asarray(curve.cost, np.float64)
        value = np.asarray(curve.value, np.float64)
    except (TypeError, ValueError):
        raise TypeError("curve.cost and curve.value must be real 1-D arrays") from None
    if cost.ndim != 1 or value.shape != cost.shape or cost.size < 1:
        raise ValueError(
            f"curve.cost and curve.value must be 1-D arrays of the same length >= 1 (the first point is the "
            f"intercept-only model); got shapes {cost.shape} and {value.shape}"
        )
    if not (np.all(np.isfinite(cost)) and np.all(np.isfinite(value))):
        raise ValueError("curve has NaN or Inf costs or values")
    if cost[0] < 0 or np.any(np.diff(cost) < 0):
        raise ValueError("curve.cost must start at a cost >= 0 and be non-decreasing (cumulative costs)")
    order = np.asarray(curve.order) if curve.order is not None else np.zeros(cost.size - 1, np.int64)
    return Curve(cost, value, order, curve.status)


def alpha_stopping_cost(curve, alpha: float) -> float:
    """The α-stopping cost: the cost of the first point reaching α × the curve's final value.

    Hu et al. §5.2 compute it on the training curve of CS-G-OMP and cut every method's curve there.

    Args:
      curve: a :class:`Curve`, or a result :func:`as_path` takes (its training curve).
      alpha: in [0, 1].

    Returns:
      A float cost.

    Raises:
      ValueError: ``alpha`` outside [0, 1], or a malformed curve.

    >>> import numpy as np, jaxselect as js
    >>> curve = js.Curve(cost=np.array([0.0, 1.0, 3.0, 4.0]), value=np.array([0.0, 0.5, 0.9, 1.0]),
    ...                  order=np.array([2, 0, 1]))
    >>> js.alpha_stopping_cost(curve, 0.9)
    3.0
    """
    curve = _as_curve(curve)
    alpha = check_float(alpha, "alpha", low=0.0, high=1.0)
    if curve.value[-1] < 0:
        raise ValueError(
            f"the curve's final value is negative ({curve.value[-1]:.3g}): α-stopping (a fraction of the final "
            "objective) needs a curve that ends at or above 0"
        )
    target = alpha * curve.value[-1]
    hit = np.flatnonzero(curve.value >= target - 1e-12 * abs(curve.value[-1]))
    return float(curve.cost[hit[0]])


def plateau_alpha(curve, *, start: float = 0.95, step: float = 0.01, cost_fraction: float = 0.2) -> float:
    """The paper's plateau rule for choosing α (Hu et al. §5.2).

    A curve has reached its final plateau at α if at least α ≥ ``start`` (95 %) of the final
    objective is achieved and the next ``step`` (1 %) requires more than ``cost_fraction`` (20 %) of
    the total feature cost. Returns the smallest such α on the grid start, start+step, …, or 1.0 if
    the curve has no plateau.

    Raises:
      ValueError: a malformed curve or grid parameters.

    >>> import numpy as np, jaxselect as js
    >>> curve = js.Curve(cost=np.array([0.0, 1.0, 3.0, 4.0]), value=np.array([0.0, 0.5, 0.9, 1.0]),
    ...                  order=np.array([2, 0, 1]))
    >>> js.plateau_alpha(curve)  # no plateau: 95 % is only reached at the last point
    1.0
    >>> early = js.Curve(cost=np.array([0.0, 1.0, 2.0, 10.0]), value=np.array([0.0, 0.6, 0.96, 1.0]),
    ...                  order=np.array([0, 1, 2]))
    >>> js.plateau_alpha(early)  # 96 % at cost 2; 97 % needs 80 % more of the total cost
    0.96
    """
    curve = _as_curve(curve)
    total = curve.cost[-1]
    for alpha in np.arange(start, 1.0 - 1e-9, step):
        alpha = float(round(alpha, 10))
        now = alpha_stopping_cost(curve, alpha)
        nxt = alpha_stopping_cost(curve, min(alpha + step, 1.0))
        if nxt - now > cost_fraction * total:
            return alpha
    return 1.0


def _value_at(curve: Curve, b: float, interpolation: str) -> float:
    cost, value = curve.cost, curve.value
    if interpolation == "step":
        return float(value[np.searchsorted(cost, b, side="right") - 1])
    return float(np.interp(b, cost, value))


def timeliness(curve, *, stop_cost=None, reference=None, interpolation: str = "linear") -> float:
    """α-timeliness: the normalised area under the objective-vs-cost curve up to ``stop_cost``.

    ``timeliness = (1 / B_stop) ∫₀^{B_stop} F(B) / F_ref dB``

    Normalisation: the area is divided by that of a perfect curve that has the reference objective
    ``F_ref`` at every cost (so a method that reached F_ref at cost 0 would score 1). ``F_ref``
    defaults to the curve's final value (the model with every group, common to all complete
    sequencings); pass one common ``reference`` when comparing curves of different lengths or
    methods. ``F(B)`` interpolates linearly between selection points as in the paper (which also
    interpolates at the stopping cost), or is the anytime step function with ``interpolation="step"``.

    Args:
      curve: a :class:`Curve`, or a result :func:`as_path` takes (its training curve).
      stop_cost: B_stop (default: the curve's last cost, i.e. 1-timeliness). Beyond the last point
        the curve is held at its final value.
      reference: F_ref.
      interpolation: "linear" or "step".

    Returns:
      A float (1 for a curve at F_ref from cost 0).

    Raises:
      ValueError: an unknown interpolation, ``stop_cost`` ≤ 0, a non-positive reference, or a
        malformed curve.

    >>> import numpy as np, jaxselect as js
    >>> curve = js.Curve(cost=np.array([0.0, 1.0, 3.0, 4.0]), value=np.array([0.0, 0.5, 0.9, 1.0]),
    ...                  order=np.array([2, 0, 1]))
    >>> round(js.timeliness(curve), 4), round(js.timeliness(curve, interpolation="step"), 4)
    (0.65, 0.475)
    """
    curve = _as_curve(curve)
    if interpolation not in ("linear", "step"):
        raise ValueError(f"interpolation must be 'linear' or 'step'; got {interpolation!r}")
    stop = float(curve.cost[-1]) if stop_cost is None else check_float(stop_cost, "stop_cost", low=0.0, strict_low=True)
    if not stop > 0:
        raise ValueError(
            "the curve has no point with a positive cost (no group was taken), so its stopping cost is 0; pass "
            "stop_cost > 0 or a curve with at least one selection step"
        )
    ref = float(curve.value[-1]) if reference is None else check_float(reference, "reference")
    if ref == 0.0:
        raise ValueError(
            "the reference objective is 0 (the curve's final value, by default), so timeliness is undefined: "
            "pass reference=F_ref != 0, or a curve that ends away from 0"
        )
    inside = curve.cost < stop
    xs = np.concatenate([curve.cost[inside], [stop]])
    if interpolation == "step":
        vals = np.asarray([_value_at(curve, x, "step") for x in xs[:-1]])
        area = float(np.sum(vals * np.diff(xs)))
    else:
        ys = np.asarray([_value_at(curve, x, "linear") for x in xs])
        area = float(np.trapezoid(ys, xs)) if hasattr(np, "trapezoid") else float(np.trapz(ys, xs))
    return area / (stop * ref)


def oracle_curve(curve) -> Curve:
    """The oracle reordering of a curve (Hu et al. §5.2, after Karayev et al. 2012).

    Each group keeps its marginal benefit ``Δ_j = F_j − F_{j−1}`` and cost ``c_j``; the groups are
    re-sequenced by decreasing ``Δ_j / c_j`` (ties keep their order) and the curve is rebuilt by
    cumulative sums — an approximation of the best achievable anytime curve.

    Args:
      curve: a :class:`Curve` (typically CS-G-FR's), or a result :func:`as_path` takes (training curve).

    Returns:
      A :class:`Curve` with the same final value.

    >>> import numpy as np, jaxselect as js
    >>> curve = js.Curve(cost=np.array([0.0, 1.0, 3.0, 4.0]), value=np.array([0.0, 0.5, 0.9, 1.0]),
    ...                  order=np.array([2, 0, 1]))
    >>> oracle = js.oracle_curve(curve)  # gains per cost: 0.5, 0.2, 0.1
    >>> oracle.order.tolist(), oracle.cost.tolist()
    ([2, 0, 1], [0.0, 1.0, 3.0, 4.0])
    """
    curve = _as_curve(curve)
    gains = np.diff(curve.value)
    costs = np.diff(curve.cost)
    free = np.where(gains > 0, np.inf, np.where(gains < 0, -np.inf, 0.0))  # zero-cost steps: by sign of gain
    rate = np.where(costs > 0, gains / np.where(costs > 0, costs, 1.0), free)
    perm = np.argsort(-rate, kind="stable")
    cost = np.concatenate([[curve.cost[0]], curve.cost[0] + np.cumsum(costs[perm])])
    value = np.concatenate([[curve.value[0]], curve.value[0] + np.cumsum(gains[perm])])
    return Curve(cost, value, curve.order[perm], curve.status)
