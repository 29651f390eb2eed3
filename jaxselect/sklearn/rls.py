"""scikit-learn estimator of multi-target greedy RLS: GreedyRLSRegressor."""

from __future__ import annotations

import numpy as np
from sklearn.base import RegressorMixin

from jaxselect.design.buckets import pad_design
from jaxselect.rls import greedy_rls
from jaxselect.sklearn._base import (
    _Base,
    _cap_k,
    _check_k,
    _host,
    _linear_predict,
    _live_columns,
    _precision,
    _report_status,
    _Selector,
)


class GreedyRLSRegressor(_Selector, RegressorMixin, _Base):
    """Multi-target greedy RLS: the k features shared by all targets with the lowest LOO error.

    Features are used as given (no centring or scaling), as in :func:`jaxselect.greedy_rls`.

    Args:
      k: number of features; a k above the number of usable (non-constant) columns keeps them all,
        with a UserWarning.
      l2: ridge penalty > 0 on the mean loss (RLScore's ``regparam / n``).
      bias: ≥ 0; a constant feature of value √bias is always in the model (its intercept,
        penalised by ``(l2/2)·b²/bias``); the default 0.0, as :func:`jaxselect.greedy_rls`
        and RLScore, means no intercept (features and targets as given); 1.0 gives an
        intercept that is hardly shrunk.

    Attributes:
      support_: (n_features,) bool.
      selected_: (k,) the features in selection order.
      coef_: (n_features,) or (n_targets, n_features).
      intercept_: float or (n_targets,).
      result_: the :class:`jaxselect.RLSResult`.
      status_: int, the solver's status flags (0 = fine).

    Raises:
      ValueError: ``l2`` ≤ 0, ``bias`` < 0, or the data errors of :func:`jaxselect.greedy_rls`.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(100, 20)).astype(np.float32)
    >>> Y = X[:, [3, 7]] @ np.array([[2.0, 0.5], [-1.0, 1.5]], dtype=np.float32)   # two targets
    >>> est = GreedyRLSRegressor(k=2, l2=0.01, bias=1.0).fit(X, Y)
    >>> sorted(est.selected_.tolist()), est.predict(X[:4]).shape
    ([3, 7], (4, 2))

    Sparse X is densified when n·n_features is at most
    :data:`jaxselect.design.sparse.SPARSE_DENSIFY_LIMIT` (greedy RLS's dual state ``C = G X`` is
    (n, n_features) dense anyway) and refused above, naming :class:`FSARegressor` and
    :class:`GroupSequencingRegressor` as the sparse alternatives.
    """

    _sparse = True

    def __init__(self, k=10, *, l2=1e-3, bias=0.0):
        self.k = k
        self.l2 = l2
        self.bias = bias

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def fit(self, X, y, sample_weight=None):
        """Select ``k`` features of X (n_samples, n_features) for y (n_samples,) or (n_samples, n_targets).

        ``sample_weight``: None or (n_samples,) row weights ≥ 0 (:func:`jaxselect.greedy_rls`'s):
        integer weights equal repeated rows, weight-0 rows are left out.
        """
        k = _check_k(self.k, allow_none=False)
        X, y, w = self._validate_fit(X, y, sample_weight, multi_output=True, numeric=True)
        k = _cap_k(self, k, int(_live_columns(X, w).sum()), "features")
        # nearby shapes share compiled programs: zero rows of weight 0 and zero (never selectable)
        # columns up to the shape buckets — the same fit; the padded columns' weights are dropped
        X_fit, y_fit, w_fit = pad_design(X, y, w)
        with _precision(X.dtype):
            result = greedy_rls(X_fit, y_fit, k, l2=self.l2, bias=self.bias, sample_weight=w_fit)
            self.result_ = _host(result)._replace(coef=np.asarray(result.coef)[: X.shape[1]])
        self.status_ = int(self.result_.status)
        _report_status(self.status_, type(self).__name__)
        selected = np.asarray(self.result_.selected)
        self.selected_ = selected[selected >= 0]
        self.support_ = np.zeros(X.shape[1], bool)
        self.support_[self.selected_] = True
        coef = np.asarray(self.result_.coef, np.float64)
        self.coef_ = coef if coef.ndim == 1 else coef.T
        intercept = np.asarray(self.result_.intercept, np.float64)
        self.intercept_ = float(intercept) if intercept.ndim == 0 else intercept
        return self

    def predict(self, X):
        """Predictions (n_samples,) or (n_samples, n_targets)."""
        X = self._validate_X(X)
        return _linear_predict(X, self.coef_, self.intercept_)


# ---------------------------------------------------------------------------------------------
# Datum-wise sparse classification (Dulac-Arnold et al.).
