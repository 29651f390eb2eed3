"""scikit-learn estimators of group sequencing: GroupSequencingRegressor(CV) and GroupSequencingClassifier."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.model_selection import check_cv

from jaxselect._budget import within_budget
from jaxselect.design.buckets import pad_design
from jaxselect.model_selection import cross_validate_path
from jaxselect.sequencing import NewtonOptions, cs_fr, cs_omp, doubling, glm_omp
from jaxselect.sequencing.prepare import prepare
from jaxselect.sklearn._base import (
    _METHODS,
    _RULES,
    _Base,
    _cap_k,
    _check_budget,
    _check_choice,
    _check_k,
    _encode_labels,
    _group_support,
    _host,
    _linear_predict,
    _make_groups,
    _precision,
    _report_status,
    _Selector,
    _usable_groups,
)


class _SequencingMixin:
    """Prefix selection shared by the sequencing estimators (needs ``path_`` and ``groups_``)."""

    def _use_budget(self, budget) -> None:
        """Set ``n_groups_selected_``, ``support_``, ``coef_``, ``intercept_`` for ``budget`` (None: all)."""
        path = self.path_
        order = np.asarray(path.order)
        taken = order >= 0
        self.order_ = order[taken]
        self.cum_cost_ = np.asarray(path.cum_cost)[taken]
        if budget is None:
            j = int(taken.sum())
        else:
            j = int(np.asarray(within_budget(jnp.asarray(path.cum_cost), budget)).sum())
        self.n_groups_selected_ = j
        self.support_ = _group_support(order[:j], np.asarray(self.groups_.ids))
        coef = np.asarray(path.step_coef(j - 1) if j > 0 else np.zeros_like(path.step_coef(0)), np.float64)  # (D, T)
        intercept = np.asarray(path.intercept[j - 1] if j > 0 else path.null_intercept, np.float64)  # (T,)
        self._set_linear(coef.T, intercept)

    def _set_linear(self, coef, intercept):
        self.coef_ = coef
        self.intercept_ = intercept


class GroupSequencingRegressor(_SequencingMixin, _Selector, RegressorMixin, _Base):
    """Anytime linear regression by cost-sensitive group sequencing (Hu et al.), as an estimator.

    Accepts sparse X (CSR/CSC/COO): :func:`jaxselect.prepare` standardises it implicitly.

    ``fit`` standardises and group-whitens X (:func:`jaxselect.prepare`) and learns an order of
    the feature groups with CS-G-OMP, CS-G-FR or Doubling; the model of every prefix is kept in
    ``path_``. ``predict`` and ``transform`` use the longest prefix whose cumulative cost is within
    ``budget`` (every sequenced group when ``budget`` is None). ``score`` is R².

    Args:
      method: "omp" (:func:`jaxselect.cs_omp`), "fr" (:func:`jaxselect.cs_fr`) or "doubling"
        (:func:`jaxselect.doubling`).
      groups: None (every feature its own group), (n_features,) group ids 0..J−1, or a
        :class:`jaxselect.Groups`.
      costs: None (unit costs, or those of a ``Groups``) or (J,) costs > 0.
      budget: a cumulative cost ≥ 0 (with unit costs, a number of groups), or None.
      criterion: OMP's criterion, "whiten", "no_whiten" or "single" (ignored by "fr"/"doubling").
      cost_sensitive: divide the criterion by the group's cost (OMP, FR).
      l2: ridge λ of :func:`jaxselect.prepare`: mean squared loss + (λ/2)‖w‖² on standardised,
        group-whitened coefficients (scikit-learn ``Ridge(alpha)`` ↔ ``l2 = alpha/n``).
      k: number of groups to sequence (None: all; above the number of usable groups — those with a
        non-constant column — all, with a UserWarning).
      whiten: group-whiten (False only standardises).

    Attributes:
      path_: the :class:`jaxselect.SelectionPath` (numpy leaves).
      order_: (m,) the groups in the order they were added; ``cum_cost_``: (m,) their cumulative costs.
      n_groups_selected_: the prefix length used at ``budget``.
      support_: (n_features,) bool, the features of the used groups.
      coef_: (n_features,) or (n_targets, n_features) raw-space coefficients at ``budget``;
        ``intercept_``: () or (n_targets,).
      groups_: the :class:`jaxselect.Groups` used; ``status_``: solver status flags (0 = fine).

    >>> import numpy as np
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(60, 3)); y = 2 * X[:, 2]
    >>> GroupSequencingRegressor(budget=1).fit(X, y).get_support(indices=True).tolist()
    [2]
    """

    def __init__(
        self,
        method="omp",
        *,
        groups=None,
        costs=None,
        budget=None,
        criterion="whiten",
        cost_sensitive=True,
        l2=1e-5,
        k=None,
        whiten=True,
    ):
        self.method = method
        self.groups = groups
        self.costs = costs
        self.budget = budget
        self.criterion = criterion
        self.cost_sensitive = cost_sensitive
        self.l2 = l2
        self.k = k
        self.whiten = whiten

    _sparse = True

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def _fit_path(self, X, y, sample_weight):
        """Validate, fit the path on (X, y) and set ``path_``, ``groups_``, ``status_``.

        Returns the validated ``(X, y, w, k)`` (``k`` capped at the usable groups) and the same
        rows padded to their shape bucket, ``(X_fit, y_fit, w_fit)``, that the path was fitted on.
        """
        method = _check_choice(self.method, "method", _METHODS)
        _check_choice(self.criterion, "criterion", ("whiten", "no_whiten", "single"))
        k = _check_k(self.k)
        X, y, w = self._validate_fit(X, y, sample_weight, multi_output=True, numeric=True)
        self._y_1d = y.ndim == 1
        groups = _make_groups(self.groups, self.costs, X.shape[1])
        k = _cap_k(self, k, _usable_groups(X, w, groups), "groups", stacklevel=4)
        # nearby row counts (CV folds, GridSearchCV, the next dataset) share compiled programs: zero
        # rows of weight 0 up to the shape bucket — the same fit (weight-0 rows are absent)
        X_fit, y_fit, w_fit = pad_design(X, y, w, columns=False)
        with _precision(X.dtype):
            problem = prepare(X_fit, y_fit, groups, sample_weight=w_fit, l2=self.l2, whiten=bool(self.whiten))
            if method == "omp":
                path = cs_omp(problem, criterion=self.criterion, cost_sensitive=bool(self.cost_sensitive), k=k)
            elif method == "fr":
                path = cs_fr(problem, cost_sensitive=bool(self.cost_sensitive), k=k)
            else:
                path = doubling(problem, k=k)
            self.path_ = _host(path)
        self.groups_ = _host(groups)
        self.status_ = int(self.path_.status)
        _report_status(self.status_, type(self).__name__)
        return (X, y, w, k), (X_fit, y_fit, w_fit)

    def _set_linear(self, coef, intercept):  # (T, D), (T,)
        if self._y_1d:
            coef, intercept = coef[0], float(intercept[0])
        self.coef_ = coef
        self.intercept_ = intercept

    def fit(self, X, y, sample_weight=None):
        """Learn the group order on (X, y) (n_samples, n_features), (n_samples,) or (n_samples, n_targets).

        ``sample_weight``: None or (n_samples,) row weights ≥ 0 (:func:`jaxselect.prepare`'s): integer
        weights equal repeated rows, weight-0 rows are left out.
        """
        budget = _check_budget(self.budget)
        (X, _, _, _), _ = self._fit_path(X, y, sample_weight)
        with _precision(X.dtype):
            self._use_budget(budget)
        return self

    def predict(self, X):
        """Predictions of the prefix within ``budget``: (n_samples,) or (n_samples, n_targets)."""
        X = self._validate_X(X)
        return _linear_predict(X, self.coef_, self.intercept_)


class GroupSequencingRegressorCV(GroupSequencingRegressor):
    """:class:`GroupSequencingRegressor` whose budget is chosen by K-fold cross-validation.

    All folds run in one jitted, vmapped call (:func:`jaxselect.cross_validate_path`): each fold's
    path is scored on its held-out rows at every budget of the grid; ``budget_`` is the budget of
    the best mean held-out score (``rule="best"``) or the smallest budget within one standard error
    of it (``rule="1se"``). The path is then refitted on all rows and used at ``budget_``.

    Args:
      budgets: (B,) candidate budgets, or None: 0 and every cumulative cost some fold reaches.
      cv: int K (``KFold(K)``, unshuffled), a scikit-learn splitter, or an iterable of
        (train, test) index pairs — as ``GridSearchCV``'s ``cv``.
      rule: "best" or "1se".
      scoring: "r2" (the default, as a regressor's ``score``) or "neg_mse".
      method, groups, costs, criterion, cost_sensitive, l2, k, whiten: as in
        :class:`GroupSequencingRegressor`.

    Attributes:
      budget_: the chosen budget.
      cv_result_: the :class:`jaxselect.CVResult` (``grid``, per-fold ``scores``, ``mean``, ``std``, ...).
      path_: and the other attributes of :class:`GroupSequencingRegressor`, for the path refitted
        on all rows and used at ``budget_``.

    Raises:
      ValueError: an unknown ``rule``/``scoring``/``method``, negative budgets, or the data
        errors of :func:`jaxselect.prepare`.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(103, 6))
    >>> y = X[:, 0] - 2 * X[:, 3] + 0.5 * rng.normal(size=103)
    >>> est = GroupSequencingRegressorCV(cv=5).fit(X, y)
    >>> est.budget_, est.get_support(indices=True).tolist(), est.cv_result_.scores.shape
    (2.0, [0, 3], (5, 7))
    """

    def __init__(
        self,
        method="omp",
        *,
        groups=None,
        costs=None,
        budgets=None,
        cv=5,
        rule="best",
        scoring="r2",
        criterion="whiten",
        cost_sensitive=True,
        l2=1e-5,
        k=None,
        whiten=True,
    ):
        self.method = method
        self.groups = groups
        self.costs = costs
        self.budgets = budgets
        self.cv = cv
        self.rule = rule
        self.scoring = scoring
        self.criterion = criterion
        self.cost_sensitive = cost_sensitive
        self.l2 = l2
        self.k = k
        self.whiten = whiten

    def fit(self, X, y, sample_weight=None):
        """Cross-validate the budget, then fit the path on all of (X, y).

        ``sample_weight``: None or (n_samples,) row weights ≥ 0, used by every fold's fit and
        held-out score (:func:`jaxselect.cross_validate_path`) and by the final fit.
        """
        rule = _check_choice(self.rule, "rule", _RULES)
        _check_choice(self.scoring, "scoring", ("r2", "neg_mse"))
        # the folds are row weights of one X: the path's padded rows (weight 0, in no fold)
        (X, y, w, k), (X_fit, y_fit, w_fit) = self._fit_path(X, y, sample_weight)
        splitter = check_cv(self.cv, y, classifier=False)
        folds = list(splitter.split(X, y))
        with _precision(X.dtype):
            cv = cross_validate_path(
                X_fit,
                y_fit,
                self.groups_,
                method=self.method,
                folds=folds,
                budgets=self.budgets,
                k=k,
                l2=self.l2,
                whiten=bool(self.whiten),
                criterion=self.criterion,
                cost_sensitive=bool(self.cost_sensitive),
                score=self.scoring,
                sample_weight=w_fit,
            )
            self.cv_result_ = cv
            self.budget_ = cv.best if rule == "best" else cv.best_1se
            self._use_budget(self.budget_)
        return self


class GroupSequencingClassifier(_SequencingMixin, _Selector, ClassifierMixin, _Base):
    """Anytime linear classifier by cost-sensitive group OMP for GLMs (Hu et al., Algorithm 3).

    ``fit`` runs :func:`jaxselect.glm_omp` with the logistic loss for two classes and the softmax
    loss for more (any label values: they are encoded with ``LabelEncoder``; ``classes_`` keeps
    them). ``predict``, ``predict_proba``, ``decision_function`` and ``transform`` use the longest
    prefix within ``budget`` (all sequenced groups when None).

    Args:
      groups, costs, budget, criterion, cost_sensitive, k, whiten: as in
        :class:`GroupSequencingRegressor`.
      l2: λ of :func:`jaxselect.glm_omp`: mean loss + (λ/2)‖W‖² (``LogisticRegression(C)`` ↔
        ``l2 = 1/(C·n)``).
      max_iter, tol: each Newton refit's cap and tolerance (``tol=None``: the solver's default).

    Attributes:
      classes_: the labels.
      path_: the :class:`jaxselect.SelectionPath` of GLMs; ``order_``, ``cum_cost_``,
        ``n_groups_selected_``, ``support_``, ``groups_``, ``status_`` as in
        :class:`GroupSequencingRegressor`.
      n_iter_: Newton iterations of all refits.
      coef_: (1, n_features) for two classes, else (n_classes, n_features).
      intercept_: (1,) or (n_classes,).

    Raises:
      ValueError: a single class, or the data errors of :func:`jaxselect.glm_omp`.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(100, 3))
    >>> y = np.where(X[:, 1] > 0, "yes", "no")
    >>> clf = GroupSequencingClassifier(budget=1).fit(X, y)
    >>> clf.get_support(indices=True).tolist(), clf.classes_.tolist()
    ([1], ['no', 'yes'])
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)

    Sparse X is densified when n·D is at most
    :data:`jaxselect.design.sparse.SPARSE_DENSIFY_LIMIT` (:func:`jaxselect.glm_omp` holds the whitened
    design dense) and refused above, naming :class:`FSAClassifier` as the sparse alternative.
    """

    _sparse = True

    def __init__(
        self,
        *,
        groups=None,
        costs=None,
        budget=None,
        criterion="whiten",
        cost_sensitive=True,
        l2=1e-3,
        k=None,
        whiten=True,
        max_iter=50,
        tol=None,
    ):
        self.groups = groups
        self.costs = costs
        self.budget = budget
        self.criterion = criterion
        self.cost_sensitive = cost_sensitive
        self.l2 = l2
        self.k = k
        self.whiten = whiten
        self.max_iter = max_iter
        self.tol = tol

    def fit(self, X, y, sample_weight=None):
        """Learn the group order on (X, y) with labels y (n_samples,).

        ``sample_weight``: None or (n_samples,) row weights ≥ 0 (:func:`jaxselect.glm_omp`'s): integer
        weights equal repeated rows, weight-0 rows are left out.
        """
        budget = _check_budget(self.budget)
        _check_choice(self.criterion, "criterion", ("whiten", "no_whiten", "single"))
        k = _check_k(self.k)
        X, y, w = self._validate_fit(X, y, sample_weight, multi_output=False, numeric=False)
        labels = _encode_labels(self, y, w)
        groups = _make_groups(self.groups, self.costs, X.shape[1])
        k = _cap_k(self, k, _usable_groups(X, w, groups), "groups")
        loss = "logistic" if len(self.classes_) == 2 else "softmax"
        X_fit, labels_fit, w_fit = pad_design(X, labels, w, columns=False)  # rows to their bucket: the same fit
        with _precision(X.dtype):
            path = glm_omp(
                X_fit,
                labels_fit,
                groups,
                loss=loss,
                l2=self.l2,
                k=k,
                criterion=self.criterion,
                cost_sensitive=bool(self.cost_sensitive),
                whiten=bool(self.whiten),
                newton=NewtonOptions(tol=self.tol, max_iter=self.max_iter),
                n_classes=None if loss == "logistic" else len(self.classes_),
                sample_weight=w_fit,
            )
            self.n_iter_ = int(np.sum(np.asarray(path.info.n_iter)))
            self.path_ = _host(path)
            self.groups_ = _host(groups)
            self.status_ = int(self.path_.status)
            _report_status(self.status_, type(self).__name__)
            self._use_budget(budget)
        return self

    def decision_function(self, X):
        """Linear scores: (n_samples,) for two classes (> 0 means ``classes_[1]``), else (n_samples, n_classes)."""
        X = self._validate_X(X)
        scores = _linear_predict(X, self.coef_, self.intercept_)
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def predict_proba(self, X):
        """Class probabilities (n_samples, n_classes): σ(score) for two classes, softmax for more."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            p = 1.0 / (1.0 + np.exp(-scores))
            return np.stack([1.0 - p, p], axis=1)
        scores = scores - scores.max(axis=1, keepdims=True)
        e = np.exp(scores)
        return e / e.sum(axis=1, keepdims=True)

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X):
        """Predicted labels (n_samples,)."""
        scores = self.decision_function(X)
        idx = (scores > 0).astype(int) if scores.ndim == 1 else np.argmax(scores, axis=1)
        return self.classes_[idx]


# ---------------------------------------------------------------------------------------------
# FSA (Barbu et al.).
