"""scikit-learn estimators: jaxselect inside ``Pipeline``, ``GridSearchCV`` and pandas workflows.

Every estimator follows scikit-learn's conventions — hyper-parameters are the ``__init__``
arguments (``get_params``/``set_params``/``clone``), fitted attributes end with ``_``, input is
validated by scikit-learn's helpers (``n_features_in_``, ``feature_names_in_`` from a DataFrame),
and each is a feature selector (``get_support``, ``transform``, ``get_feature_names_out``,
``set_output(transform="pandas")``):

=============================  ==========================================  ==========================
estimator                      solver                                      predicts
=============================  ==========================================  ==========================
GroupSequencingRegressor       :func:`~jaxselect.cs_omp` / ``cs_fr`` /     real targets (multi-output)
                               ``doubling`` on :func:`~jaxselect.prepare`
GroupSequencingClassifier      :func:`~jaxselect.glm_omp` (logistic /      labels, probabilities
                               softmax from the labels)
GroupSequencingRegressorCV     the above, budget by                        real targets
                               :func:`~jaxselect.cross_validate_path`
FSARegressor / FSAClassifier   :func:`~jaxselect.fsa`                      targets / binary labels
FSARegressorCV                 ``fsa``, k by :func:`~jaxselect.cross_validate_fsa`
GreedyRLSRegressor             :func:`~jaxselect.greedy_rls`               real targets (multi-output)
DWSMClassifier                 :func:`~jaxselect.dwsm_fit`                 labels, per-datum features
=============================  ==========================================  ==========================

Groups and costs: ``groups`` is None (every feature its own group), a (n_features,) array of group
ids 0..J−1, or a :class:`jaxselect.Groups`; ``costs`` is None (unit costs) or (J,) costs > 0 (it
replaces a ``Groups``' costs). Selection is by whole groups: ``get_support()`` marks every feature
of the groups the model uses. Sequencing estimators learn an order of groups once; ``budget`` (a
cumulative cost) picks the longest prefix within it, and ``path_`` keeps the whole anytime path —
``jaxselect.predict(est.path_, X, budget=B)`` predicts at any other budget without refitting.

Precision follows X, as in scikit-learn: float64 data (NumPy's default) are fitted in float64
(JAX's x64 mode is switched on for the fit and for JAX-side predictions), float32 data in
float32 — pass ``X.astype(np.float32)`` for float32's speed. Fitted arrays are numpy arrays (the
estimators pickle and ``clone`` like any scikit-learn estimator).

Every ``fit`` takes ``sample_weight`` (None or (n_samples,) row weights ≥ 0, the solver's): integer
weights equal repeated rows and weight-0 rows equal removed rows (DWSMClassifier: in expectation,
its RCPI samples at random per row). A ``k`` above the number of usable (non-constant) features
keeps them all, with a ``UserWarning`` (as ``SelectKBest``). Solver status flags
(:mod:`jaxselect.status`) are kept in ``status_``; a refit that hit ``max_iter`` gives a
``ConvergenceWarning``, other flags a ``RuntimeWarning``.

Sparse X (``scipy.sparse`` CSR/CSC/COO, e.g. the output of ``TfidfVectorizer``): the estimators
whose solver runs on sparse X take it in ``fit``, ``predict``, ``decision_function`` and
``transform`` (``transform`` then returns a sparse matrix, as every ``SelectorMixin``) and
declare ``input_tags.sparse``; X is never densified (predictions are the sparse product
``X @ coef_ + intercept_``):

=============================  ================================================================
estimator                      sparse X
=============================  ================================================================
FSARegressor / FSAClassifier   yes, linear learners (``bins=None``); ``bins`` refuses sparse X
/ FSARegressorCV
GroupSequencingRegressor(CV)   yes (:func:`~jaxselect.prepare` on the sparse design)
GroupSequencingClassifier      densified when n·D ≤ ``SPARSE_DENSIFY_LIMIT`` (its problem holds
                               the whitened design dense), refused above
GreedyRLSRegressor             densified when n·D ≤ ``SPARSE_DENSIFY_LIMIT`` (its dual state
                               ``C = G X`` is (n, D) dense), refused above
DWSMClassifier                 no: scikit-learn's "dense data is required" ``TypeError``
=============================  ================================================================

This is the only module of jaxselect that imports scikit-learn (``pip install 'jaxselect[sklearn]'``).

>>> import numpy as np
>>> from jaxselect.sklearn import GroupSequencingRegressor
>>> rng = np.random.default_rng(0); X = rng.normal(size=(60, 4)); y = X[:, 1] - X[:, 3]
>>> est = GroupSequencingRegressor(costs=[1.0, 1.0, 1.0, 5.0], budget=2.0).fit(X, y)
>>> est.order_.tolist(), est.get_support().tolist()   # feature 3 is worth its cost 5, but not within 2
([1, 3, 0, 2], [False, True, False, False])
"""

from __future__ import annotations

import contextlib
import numbers
import warnings

import jax
import jax.numpy as jnp
import numpy as np

try:
    import sklearn  # noqa: F401
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError("jaxselect.sklearn needs scikit-learn >= 1.6: pip install 'jaxselect[sklearn]'") from err

from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    RegressorMixin,
    TransformerMixin,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_selection import SelectorMixin
from sklearn.model_selection import check_cv
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import check_random_state
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import (
    _check_feature_names_in,
    check_array,
    check_is_fitted,
    validate_data,
)

from jaxselect._budget import within_budget
from jaxselect.design import HostDesign, HostSparseDesign, as_sparse_csr, is_sparse
from jaxselect.design.stream import stream_kind
from jaxselect._validation import check_float, check_int, clip_k
from jaxselect.anneal import PiecewiseLinear, Polish, fsa, fsa_predict
from jaxselect.losses import HuberHinge, loss_names
from jaxselect.rls import greedy_rls
from jaxselect.sequencing import NewtonOptions, cs_fr, cs_omp, doubling, glm_omp
from jaxselect.groups import Groups
from jaxselect.model_selection import cross_validate_fsa, cross_validate_path
from jaxselect.prediction import predict as _predict
from jaxselect.sequencing.prepare import prepare
from jaxselect.dwsm import MDPOptions as _MDPOptions
from jaxselect.dwsm import RCPIOptions as _RCPIOptions
from jaxselect.dwsm.fit import fit_with_acquired as _dwsm_fit_with_acquired
from jaxselect.dwsm import dwsm_predict
from jaxselect.status import NOT_CONVERGED, status_message

__all__ = [
    "DWSMClassifier",
    "FSAClassifier",
    "FSARegressor",
    "FSARegressorCV",
    "GreedyRLSRegressor",
    "GroupSequencingClassifier",
    "GroupSequencingRegressor",
    "GroupSequencingRegressorCV",
]

_FLOATS = (np.float64, np.float32)
_METHODS = ("omp", "fr", "doubling")
_RULES = ("best", "1se")


# ---------------------------------------------------------------------------------------------
# Helpers.


def _seed_key(seed: int):
    """``jax.random.key(seed)``, as its raw data where the default implementation is threefry
    (``[0, seed]``: the same random numbers, without compiling the seeding program)."""
    if jax.config.jax_default_prng_impl == "threefry2x32" and 0 <= seed < 2**32:
        return np.asarray([0, seed], np.uint32)
    return jax.random.key(seed)


def _host(tree):
    """The pytree with every array leaf as a numpy array (picklable, no device buffers kept)."""
    return jax.tree.map(np.asarray, tree)


def _check_choice(value, name: str, choices) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}; got {value!r}")
    return value


def _check_budget(budget, name: str = "budget"):
    if budget is None:
        return None
    return check_float(budget, name, low=0.0)


def _check_k(k, name: str = "k", *, allow_none: bool = True):
    if k is None and allow_none:
        return None
    return check_int(k, name, low=1)


def _precision(dtype):
    """The context of a fit or JAX-side prediction: JAX's x64 mode for float64 data, so that the
    solver computes in X's precision (float64 X in float64, float32 X in float32)."""
    return jax.enable_x64(True) if np.dtype(dtype) == np.float64 else contextlib.nullcontext()


def _check_weights(sample_weight, X):
    """None, or (n_samples,) weights in X's dtype: finite, ≥ 0, not all zero (scikit-learn's rules).

    A number gives every row that weight. The solvers check the rest (at least 2 positive weights).
    """
    if sample_weight is None:
        return None
    n = X.shape[0]
    if isinstance(sample_weight, numbers.Number):
        w = np.full(n, sample_weight, dtype=X.dtype)
    else:
        w = check_array(sample_weight, ensure_2d=False, dtype=X.dtype, input_name="sample_weight", copy=True)
        if w.ndim != 1 or w.shape[0] != n:
            raise ValueError(f"sample_weight must have shape ({n},), one weight per row of X; got {w.shape}")
    if not np.isfinite(w).all():
        raise ValueError("sample_weight contains NaN or Inf")
    if (w < 0).any():
        row = int(np.flatnonzero(w < 0)[0])
        raise ValueError(f"sample_weight must be non-negative; row {row} has {w[row]}")
    if not (w > 0).any():
        raise ValueError("sample_weight: every weight is zero; give some rows a positive weight")
    return w


def _live_columns(X, w) -> np.ndarray:
    """(n_features,) bool: the columns that are not constant over the rows of positive weight — the
    data layer's rule, from its host summary pass (no device copy of X)."""
    if is_sparse(X):
        return np.asarray(HostSparseDesign.raw(as_sparse_csr(X, "X", dtype=X.dtype)).summarize(w)[0].live)
    return np.asarray(HostDesign.raw(X, X.dtype).summarize(w)[0].live)


def _cap_k(est, k, n_usable: int, unit: str, *, stacklevel: int = 3):
    """``k``, or ``n_usable`` with a UserWarning when k exceeds it (as ``SelectKBest``: all are kept):
    the library's one rule, :func:`jaxselect._validation.clip_k`, named after the estimator.

    ``stacklevel``: as ``warnings.warn``'s, counted from here (3: the caller of the caller).
    """
    return clip_k(k, n_usable, type(est).__name__, unit=unit, stacklevel=stacklevel)


def _make_groups(groups, costs, n_features: int) -> Groups:
    """A :class:`Groups` from the estimator's ``groups`` (None, ids or Groups) and ``costs`` parameters."""
    if isinstance(groups, Groups):
        ids = np.asarray(groups.ids)
        if costs is None:
            out = groups
        else:
            out = Groups.from_ids(ids, costs)
    elif groups is None:
        out = Groups.singletons(n_features, costs)
    else:
        out = Groups.from_ids(np.asarray(groups), costs)
    if out.n_features != n_features:
        raise ValueError(
            f"groups cover {out.n_features} features but X has {n_features} columns; give one group id per column"
        )
    return out


def _report_status(status: int, who: str) -> None:
    """A ConvergenceWarning for NOT_CONVERGED, a RuntimeWarning for the other flags."""
    status = int(status)
    if status & NOT_CONVERGED:
        warnings.warn(f"{who}: {status_message(NOT_CONVERGED)}", ConvergenceWarning, stacklevel=3)
    if status & ~NOT_CONVERGED:
        warnings.warn(f"{who}: {status_message(status & ~NOT_CONVERGED)}", RuntimeWarning, stacklevel=3)


def _usable_groups(X, w, groups: Groups) -> int:
    """Number of groups with a column that is not constant over the rows of positive weight."""
    ids = np.asarray(groups.ids)
    return int(np.unique(ids[_live_columns(X, w)]).size)


def _group_support(order: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """(D,) bool: the features of the groups in ``order`` (entries −1 ignored)."""
    chosen = order[order >= 0]
    return np.isin(ids, chosen)


def _binary_only(y) -> None:
    y_type = type_of_target(y, input_name="y", raise_unknown=True)
    if y_type != "binary":
        raise ValueError(
            f"Only binary classification is supported. The type of the target is {y_type}. "
            "FSA's classification losses are binary; for several classes use GroupSequencingClassifier "
            "or DWSMClassifier, or wrap FSAClassifier in sklearn.multiclass.OneVsRestClassifier"
        )


def _encode_labels(est, y, w=None, *, min_classes: int = 2):
    """Check classification targets, set ``classes_`` and return labels 0..C−1 (int32).

    With row weights ``w``, the classes are counted over the rows of positive weight.
    """
    check_classification_targets(y)
    encoder = LabelEncoder()
    labels = encoder.fit_transform(y).astype(np.int32)
    est.classes_ = encoder.classes_
    present = est.classes_ if w is None else est.classes_[np.unique(labels[w > 0])]
    if len(present) < min_classes:
        rows = "the data contain" if w is None else "the rows of positive sample_weight contain"
        raise ValueError(
            f"{type(est).__name__} needs samples of at least {min_classes} classes; {rows} only one class "
            f"({present.tolist()[0]!r})"
        )
    return labels


def _linear_predict(X, coef, intercept):
    """``X @ coefᵀ + intercept`` in float64 (coef (D,) → (n,); coef (T, D) → (n, T)); a sparse X
    stays sparse (scipy's sparse product)."""
    X = X.astype(np.float64) if is_sparse(X) else np.asarray(X, np.float64)
    return np.asarray(safe_sparse_dot(X, np.asarray(coef, np.float64).T, dense_output=True)) + intercept


class _Base(BaseEstimator):
    """Tags shared by every estimator here: finite input; sparse X (kept as CSR) where ``_sparse``."""

    #: whether the estimator's solver runs on sparse X (``input_tags.sparse``)
    _sparse = False

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = self._sparse
        return tags

    def _validate_fit(self, X, y, sample_weight, *, multi_output: bool, numeric: bool):
        """``(X, y, w)``: X float64/float32 (a sparse X as CSR), y checked, ``w`` None or the checked
        (n_samples,) weights."""
        X, y = validate_data(
            self,
            X,
            y,
            dtype=_FLOATS,
            accept_sparse="csr" if self._sparse else False,
            multi_output=multi_output,
            y_numeric=numeric,
            ensure_min_samples=2,
        )
        return X, y, _check_weights(sample_weight, X)

    def _validate_X(self, X):
        check_is_fitted(self)
        return validate_data(self, X, dtype=_FLOATS, accept_sparse="csr" if self._sparse else False, reset=False)


class _Selector(SelectorMixin):
    """``SelectorMixin`` with the mask from ``support_``."""

    def _get_support_mask(self):
        check_is_fitted(self)
        return self.support_


# ---------------------------------------------------------------------------------------------
# Group sequencing (Hu et al.): regression, classification, cross-validated budget.


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

        Returns the validated ``(X, y, w, k)`` (``k`` capped at the usable groups).
        """
        method = _check_choice(self.method, "method", _METHODS)
        _check_choice(self.criterion, "criterion", ("whiten", "no_whiten", "single"))
        k = _check_k(self.k)
        X, y, w = self._validate_fit(X, y, sample_weight, multi_output=True, numeric=True)
        self._y_1d = y.ndim == 1
        groups = _make_groups(self.groups, self.costs, X.shape[1])
        k = _cap_k(self, k, _usable_groups(X, w, groups), "groups", stacklevel=4)
        with _precision(X.dtype):
            problem = prepare(X, y, groups, sample_weight=w, l2=self.l2, whiten=bool(self.whiten))
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
        return X, y, w, k

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
        X, _, _, _ = self._fit_path(X, y, sample_weight)
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
        X, y, w, k = self._fit_path(X, y, sample_weight)
        splitter = check_cv(self.cv, y, classifier=False)
        folds = list(splitter.split(X, y))
        with _precision(X.dtype):
            cv = cross_validate_path(
                X,
                y,
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
                sample_weight=w,
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
        with _precision(X.dtype):
            path = glm_omp(
                X,
                labels,
                groups,
                loss=loss,
                l2=self.l2,
                k=k,
                criterion=self.criterion,
                cost_sensitive=bool(self.cost_sensitive),
                whiten=bool(self.whiten),
                newton=NewtonOptions(tol=self.tol, max_iter=self.max_iter),
                n_classes=None if loss == "logistic" else len(self.classes_),
                sample_weight=w,
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


class _FSABase(_Selector, _Base):
    _sparse = True

    def _validate_fit(self, X, y, sample_weight, *, multi_output: bool, numeric: bool):
        """As :class:`_Base`'s, but an ``np.memmap`` or a row-sliceable array-like (h5py, zarr) X is
        left as it is — :func:`jaxselect.fsa` streams it (validating every block) — and only y and
        the weights are checked here."""
        streamed = stream_kind(X) in ("memmap", "source") and not callable(X)
        if not streamed or np.dtype(X.dtype) not in (np.float32, np.float64):
            return super()._validate_fit(X, y, sample_weight, multi_output=multi_output, numeric=numeric)
        if len(X.shape) != 2:
            raise ValueError(f"X must be 2-D (n_samples, n_features); got shape {tuple(X.shape)}")
        y = check_array(y, ensure_2d=False, dtype="numeric" if numeric else None, input_name="y")
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have shape ({X.shape[0]},), one target per row of X; got {y.shape}")
        self.n_features_in_ = X.shape[1]
        return X, y, _check_weights(sample_weight, X)

    def _check_sparse_bins(self, X) -> None:
        """ValueError: piecewise-linear learners (``bins``) on sparse X."""
        if self.bins is not None and is_sparse(X):
            raise ValueError(
                f"{type(self).__name__}(bins={self.bins!r}): piecewise-linear learners do not run on sparse X — "
                "their centred basis values make every entry of the encoded design non-zero, so it would be dense "
                "(n x n_features x (bins + 1)). Use bins=None (linear learners) for sparse X, or X.toarray() if it "
                "fits in memory (or select with bins=None, then fit bins on X[:, get_support()].toarray())"
            )

    def _fsa(self, X, y, w, loss, k):
        """Fit :func:`jaxselect.fsa` with ``k`` (capped at the usable columns) and set the fitted attributes."""
        self._check_sparse_bins(X)
        k = _cap_k(self, _check_k(k, allow_none=False), int(_live_columns(X, w).sum()), "features", stacklevel=4)
        with _precision(X.dtype):
            options = {name: getattr(self, name) for name in ("huber_h", "scale", "l1", "refine") if hasattr(self, name)}
            if loss == "huber_hinge":
                loss = HuberHinge(options.pop("huber_h", 0.1))
            options.pop("huber_h", None)
            polish = Polish(l1=options.pop("l1", None), refine=options.pop("refine", 0))
            learner = None if self.bins is None else PiecewiseLinear(self.bins, self.smoothness)
            result = fsa(
                X, y, k, loss=loss, n_iter=self.n_iter, mu=self.mu, lr=self.lr, l2=self.l2, learner=learner,
                sample_weight=w, polish=polish, **options,
            )
            self.result_ = _host(result)
        self.status_ = int(self.result_.status)
        support = np.asarray(self.result_.support)
        self.support_ = np.zeros(X.shape[1], bool)
        self.support_[support] = True
        coef = np.asarray(self.result_.coef, np.float64)
        dense = np.zeros((X.shape[1],) + coef.shape[1:])
        dense[support] = coef
        self.coef_ = dense
        self.intercept_ = float(self.result_.intercept)

    def _scores(self, X):
        X = self._validate_X(X)
        if self.bins is None:
            return _linear_predict(X, self.coef_, self.intercept_)
        dtype = np.asarray(self.result_.coef).dtype
        with _precision(dtype):
            if is_sparse(X):  # a model fitted on dense X: only its support columns are densified
                return np.asarray(_predict(self.result_, X), np.float64)
            return np.asarray(fsa_predict(self.result_, X.astype(dtype, copy=False)), np.float64)


class FSARegressor(RegressorMixin, _FSABase):
    """Feature Selection with Annealing (Barbu et al.) for regression: k features, a linear model.

    Args:
      k: number of features to keep; a k above the number of usable (non-constant) columns keeps
        them all, with a UserWarning.
      loss: "squared" (½·mean squared error) or a callable ``loss(scores, y) -> scalar``.
      n_iter, mu, lr, l2, bins, smoothness: as in :func:`jaxselect.fsa` (``l2``: mean loss +
        (l2/2)‖β‖² on standardised features; ``bins``: piecewise-linear learners).
      scale, l1, refine: as in :func:`jaxselect.fsa` (``scale="sparse"``: raw 0/1 indicators keep
        their scale; ``l1``: the L1 polish; ``refine``: rounds of gradient support pursuit).

    Attributes:
      support_: (n_features,) bool, the k selected columns.
      coef_: (n_features,) raw-space coefficients, 0 off the support ((n_features, bins + 1) for
        piecewise-linear learners).
      intercept_: float.
      result_: the :class:`jaxselect.FSAResult`.
      status_: int, the solver's status flags (0 = fine).

    Raises:
      ValueError: k < 1, or the data errors of :func:`jaxselect.fsa`.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 50)); y = X[:, 3] - 2 * X[:, 7]
    >>> FSARegressor(k=2, n_iter=100).fit(X, y).get_support(indices=True).tolist()
    [3, 7]
    """

    def __init__(
        self, k=10, *, loss="squared", n_iter=500, mu=300.0, lr=None, l2=0.0, bins=None, smoothness=0.0, scale="std",
        l1=None, refine=0,
    ):
        self.k = k
        self.loss = loss
        self.n_iter = n_iter
        self.mu = mu
        self.lr = lr
        self.l2 = l2
        self.bins = bins
        self.smoothness = smoothness
        self.scale = scale
        self.l1 = l1
        self.refine = refine

    def fit(self, X, y, sample_weight=None):
        """Select ``k`` features of X (n_samples, n_features) for the targets y (n_samples,).

        ``sample_weight``: None or (n_samples,) row weights ≥ 0 (:func:`jaxselect.fsa`'s; built-in
        losses only): integer weights equal repeated rows, weight-0 rows are left out.
        """
        if not callable(self.loss):
            _check_choice(self.loss, "loss", ("squared",))
        X, y, w = self._validate_fit(X, y, sample_weight, multi_output=False, numeric=True)
        self._fsa(X, y, w, self.loss, self.k)
        return self

    def predict(self, X):
        """Predictions (n_samples,)."""
        return self._scores(X)


class FSARegressorCV(FSARegressor):
    """:class:`FSARegressor` whose k is chosen by K-fold cross-validation over a grid.

    :func:`jaxselect.cross_validate_fsa` fits every k of the grid on all folds (one vmapped call
    per k) and scores the held-out rows; ``k_`` maximises the mean score (``rule="best"``) or is
    the smallest k within one standard error of it (``rule="1se"``); FSA is then refitted on all rows.

    Args:
      ks: candidate k values; one above the number of usable (non-constant) features is replaced
        by that number (all features kept) with a UserWarning.
      cv: int K (``KFold(K)``), a scikit-learn splitter or (train, test) index pairs.
      rule: "best" or "1se". scoring: "r2" or "neg_mse".
      loss, n_iter, mu, lr, l2, bins, smoothness: as in :class:`FSARegressor`.

    Attributes:
      k_: the chosen k.
      cv_result_: the :class:`jaxselect.CVResult`.
      support_: and the other attributes of :class:`FSARegressor`, for the refit at ``k_``.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(60, 10))
    >>> y = X[:, 3] - 2 * X[:, 7] + 0.3 * rng.normal(size=60)
    >>> est = FSARegressorCV(ks=[1, 2], cv=5, n_iter=50).fit(X, y)
    >>> est.k_, est.get_support(indices=True).tolist()
    (2, [3, 7])
    """

    def __init__(
        self,
        ks=(1, 2, 5, 10, 20),
        *,
        cv=5,
        rule="best",
        scoring="r2",
        loss="squared",
        n_iter=500,
        mu=300.0,
        lr=None,
        l2=0.0,
        bins=None,
        smoothness=0.0,
    ):
        self.ks = ks
        self.cv = cv
        self.rule = rule
        self.scoring = scoring
        self.loss = loss
        self.n_iter = n_iter
        self.mu = mu
        self.lr = lr
        self.l2 = l2
        self.bins = bins
        self.smoothness = smoothness

    def fit(self, X, y, sample_weight=None):
        """Cross-validate k on (X, y), then fit FSA with ``k_`` on all rows.

        ``sample_weight``: None or (n_samples,) row weights ≥ 0, used by every fold's fit and
        held-out score (:func:`jaxselect.cross_validate_fsa`) and by the final fit.
        """
        rule = _check_choice(self.rule, "rule", _RULES)
        _check_choice(self.loss, "loss", ("squared",))
        _check_choice(self.scoring, "scoring", ("r2", "neg_mse"))
        X, y, w = self._validate_fit(X, y, sample_weight, multi_output=False, numeric=True)
        self._check_sparse_bins(X)
        ks = np.atleast_1d(np.asarray(self.ks))
        if ks.size == 0 or ks.dtype.kind not in "iu" or (ks < 1).any():
            raise ValueError(f"ks must be a non-empty sequence of integers >= 1; got {self.ks!r}")
        n_live = int(_live_columns(X, w).sum())
        ks = clip_k(ks, n_live, "FSARegressorCV", stacklevel=2)
        folds = list(check_cv(self.cv, y, classifier=False).split(X, y))
        with _precision(X.dtype):
            cv = cross_validate_fsa(
                X,
                y,
                np.unique(ks),
                folds=folds,
                loss="squared",
                n_iter=self.n_iter,
                mu=self.mu,
                lr=self.lr,
                l2=self.l2,
                bins=self.bins,
                smoothness=self.smoothness,
                score=self.scoring,
                sample_weight=w,
            )
        self.cv_result_ = cv
        self.k_ = int(cv.best if rule == "best" else cv.best_1se)
        self._fsa(X, y, w, "squared", self.k_)
        return self


class FSAClassifier(ClassifierMixin, _FSABase):
    """Feature Selection with Annealing (Barbu et al.) for binary classification: k features.

    Labels may be any two values (``classes_``); ``decision_function`` gives the linear score
    (> 0: ``classes_[1]``), ``predict_proba`` exists for the logistic loss (σ of the score).

    Args:
      k: number of features to keep (above the usable columns: all, with a UserWarning).
      loss: "logistic", "huber_hinge" (``huber_h`` its h) or "lorenz".
      n_iter, mu, lr, l2, bins, smoothness, scale, l1, refine: as in :func:`jaxselect.fsa` (see
        :class:`FSARegressor`).

    Attributes:
      classes_: the two labels.
      support_: (n_features,) bool; ``coef_``, ``intercept_``, ``result_``, ``status_`` as in
        :class:`FSARegressor`.

    Raises:
      ValueError: more or fewer than two classes, an unknown loss, or the data errors of
        :func:`jaxselect.fsa`.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(60, 5)); y = X[:, 1] - X[:, 4] > 0
    >>> clf = FSAClassifier(k=2, n_iter=50).fit(X, y)
    >>> clf.get_support(indices=True).tolist(), clf.score(X, y) > 0.9
    ([1, 4], True)
    """

    def __init__(
        self, k=10, *, loss="logistic", n_iter=500, mu=300.0, lr=None, l2=0.0, bins=None, smoothness=0.0, huber_h=0.1,
        scale="std", l1=None, refine=0,
    ):
        self.k = k
        self.loss = loss
        self.n_iter = n_iter
        self.mu = mu
        self.lr = lr
        self.l2 = l2
        self.bins = bins
        self.smoothness = smoothness
        self.huber_h = huber_h
        self.scale = scale
        self.l1 = l1
        self.refine = refine

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def fit(self, X, y, sample_weight=None):
        """Select ``k`` features of X (n_samples, n_features) for the binary labels y (n_samples,).

        ``sample_weight``: None or (n_samples,) row weights ≥ 0 (:func:`jaxselect.fsa`'s): integer
        weights equal repeated rows, weight-0 rows are left out.
        """
        _check_choice(self.loss, "loss", loss_names(fsa=True, classification=True))
        X, y, w = self._validate_fit(X, y, sample_weight, multi_output=False, numeric=False)
        check_classification_targets(y)
        _binary_only(y)
        labels = _encode_labels(self, y, w)
        self._fsa(X, labels, w, self.loss, self.k)
        return self

    def decision_function(self, X):
        """Scores (n_samples,); > 0 predicts ``classes_[1]``."""
        return self._scores(X)

    def predict(self, X):
        """Predicted labels (n_samples,)."""
        scores = self.decision_function(X)
        return self.classes_[(scores > 0).astype(int)]

    def _is_logistic(self):
        return self.loss == "logistic"

    @available_if(_is_logistic)
    def predict_proba(self, X):
        """Probabilities (n_samples, 2) of the logistic model (``loss="logistic"`` only)."""
        p = 1.0 / (1.0 + np.exp(-self.decision_function(X)))
        return np.stack([1.0 - p, p], axis=1)


# ---------------------------------------------------------------------------------------------
# Greedy RLS (Airola & Pahikkala).


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
        with _precision(X.dtype):
            result = greedy_rls(X, y, k, l2=self.l2, bias=self.bias, sample_weight=w)
            self.result_ = _host(result)
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


class DWSMClassifier(ClassifierMixin, TransformerMixin, _Base):
    """Datum-wise sparse classifier (Dulac-Arnold et al.): each datum acquires its own features.

    ``fit`` learns an acquisition-and-classification policy by RCPI (:func:`jaxselect.dwsm_fit`);
    ``predict`` classifies every datum after the features its episode acquired; ``acquired(X)``
    gives the per-datum (n_samples, n_features) mask. Being datum-wise, ``transform`` keeps the
    columns the policy can acquire (``acquirable_``: the non-constant features of acquirable units;
    ``get_feature_names_out`` names them) and gives the entries a datum did not acquire
    ``fill_value``: by default ``"mean"``, the feature's training mean, so the next step of a
    ``Pipeline`` gets finite values (``make_pipeline(DWSMClassifier(), LogisticRegression())``
    works at defaults); ``np.nan`` hands them to an estimator that handles missing values
    (``HistGradientBoostingClassifier``). The mask is ``acquired(X)[:, acquirable_]``.
    ``get_support()`` marks the features at least one training datum acquired.
    Dense X only (a policy reads single entries of each datum): sparse X gets scikit-learn's "dense
    data is required" ``TypeError`` — pass ``X.toarray()``.

    Args:
      lam: λ ≥ 0, the cost per unit cost of an acquired feature (group).
      budget: None, or a hard cap B ≥ 0 on the summed cost a datum may acquire.
      groups, costs: acquisition units and their costs (as in :class:`GroupSequencingRegressor`).
      random_state: seed of the RCPI sampling (None: a fresh seed from numpy's global RNG).
      n_iter, states_per_example, alpha, l2, gamma: as in :func:`jaxselect.dwsm_fit`.
      cost_matrix: None (0/1 loss) or (n_classes, n_classes) ``C[predicted, true]`` in the order of
        ``classes_``.
      fill_value: the value of unacquired entries in ``transform``: ``"mean"`` (default: the
        feature's (weighted) training mean) or a number (``np.nan``: missing).

    Attributes:
      classes_: the labels.
      policy_: the :class:`jaxselect.DWSMPolicy` (numpy leaves).
      support_: (n_features,) bool, the features at least one training datum acquired.
      acquirable_: (n_features,) bool, the features the policy can acquire (the columns of
        ``transform``): non-constant features of units that are not all constant.
      feature_means_: (n_features,) the training means ``transform`` fills in.
      mean_features_: mean number of features acquired per training datum.
      status_: int, the solver's status flags (0 = fine).

    Raises:
      ValueError: fewer than two classes, negative ``lam``/``budget``, or the data errors of
        :func:`jaxselect.dwsm_fit`.

    A fit runs RCPI (seconds to minutes; ``examples/dwsm_quickstart.py`` times one), so this
    example only configures the estimator; ``tests/test_sklearn.py`` fits it:

    >>> clf = DWSMClassifier(lam=0.01, budget=2.0, random_state=0)
    >>> clf.get_params()["budget"], clf.get_params()["lam"]
    (2.0, 0.01)
    >>> # clf.fit(X, y).predict(X); clf.acquired(X) is the (n_samples, n_features) mask of each datum
    """

    def __init__(
        self,
        *,
        lam=0.01,
        budget=None,
        groups=None,
        costs=None,
        random_state=None,
        n_iter=10,
        states_per_example=10,
        alpha=0.7,
        l2=0.01,
        gamma=None,
        cost_matrix=None,
        fill_value="mean",
    ):
        self.lam = lam
        self.budget = budget
        self.groups = groups
        self.costs = costs
        self.random_state = random_state
        self.n_iter = n_iter
        self.states_per_example = states_per_example
        self.alpha = alpha
        self.l2 = l2
        self.gamma = gamma
        self.cost_matrix = cost_matrix
        self.fill_value = fill_value

    def fit(self, X, y, sample_weight=None):
        """Learn the policy on X (n_samples, n_features) and labels y (n_samples,).

        ``sample_weight``: None or (n_samples,) row weights ≥ 0 (:func:`jaxselect.dwsm_fit`'s: the
        datum-wise loss is the weighted mean). RCPI samples its rollout states at random per row,
        so integer weights equal repeated rows in expectation, not draw by draw.
        """
        budget = _check_budget(self.budget)
        X, y, w = self._validate_fit(X, y, sample_weight, multi_output=False, numeric=False)
        labels = _encode_labels(self, y, w)
        groups = (
            None if self.groups is None and self.costs is None else _make_groups(self.groups, self.costs, X.shape[1])
        )
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        with _precision(X.dtype):
            # one compiled program: the policy and the features it acquires on the training rows
            policy, acquired = _dwsm_fit_with_acquired(
                # jax.random.key(seed)'s raw data (threefry: [0, seed]): the same random numbers,
                # without compiling the seeding program
                _seed_key(seed),
                X,
                labels,
                lam=self.lam,
                budget=budget,
                groups=groups,
                n_iter=self.n_iter,
                mdp=_MDPOptions(gamma=self.gamma, cost_matrix=self.cost_matrix),
                rcpi=_RCPIOptions(states_per_example=self.states_per_example, alpha=self.alpha, l2=self.l2),
                n_classes=len(self.classes_),
                sample_weight=w,
            )
            self.policy_ = _host(policy)
        self.status_ = int(self.policy_.status)
        _report_status(self.status_, type(self).__name__)
        acquired = np.asarray(acquired)
        if w is not None:  # the training data are the rows of positive weight, counted w times
            acquired, counts = acquired[w > 0], w[w > 0]
        else:
            counts = np.ones(acquired.shape[0])
        self.support_ = acquired.any(axis=0)
        self.mean_features_ = float(np.average(acquired.sum(axis=1), weights=counts))
        Xf = np.asarray(X, np.float64)
        rows = Xf if w is None else Xf[w > 0]
        self.feature_means_ = np.average(rows, axis=0, weights=None if w is None else w[w > 0])
        spec = self.policy_.spec
        unit_live = np.asarray(spec.live)[np.asarray(spec.groups.ids)]
        self.acquirable_ = unit_live & (rows.max(axis=0) > rows.min(axis=0))
        return self

    def _episodes(self, X):
        X = self._validate_X(X)
        dtype = np.asarray(self.policy_.theta).dtype
        with _precision(dtype):
            labels, acquired = dwsm_predict(self.policy_, X.astype(dtype, copy=False))
        return X, np.asarray(labels), np.asarray(acquired)

    def predict(self, X):
        """Predicted labels (n_samples,)."""
        _, labels, _ = self._episodes(X)
        return self.classes_[labels]

    def acquired(self, X):
        """(n_samples, n_features) bool: the features each datum's episode acquired."""
        return self._episodes(X)[2]

    def transform(self, X):
        """The columns the policy can acquire (``acquirable_``), with the entries each datum did not
        acquire set to ``fill_value`` (``"mean"``: the training mean; finite for the next step)."""
        X, _, acquired = self._episodes(X)
        keep = self.acquirable_
        out = np.array(X[:, keep], copy=True)
        if isinstance(self.fill_value, str):
            if self.fill_value != "mean":
                raise ValueError(f"fill_value must be 'mean' or a number; got {self.fill_value!r}")
            fill = np.broadcast_to(self.feature_means_[keep].astype(out.dtype, copy=False), out.shape)
        else:
            fill = np.full(out.shape, self.fill_value, dtype=np.result_type(out.dtype, np.float32))
            out = out.astype(fill.dtype, copy=False)
        mask = acquired[:, keep]
        out[~mask] = fill[~mask]
        return out

    def get_support(self, indices: bool = False):
        """The features at least one training datum acquired (a mask, or their indices)."""
        check_is_fitted(self)
        return np.flatnonzero(self.support_) if indices else self.support_

    def get_feature_names_out(self, input_features=None):
        """The names of the features the policy can acquire (``acquirable_``): ``transform``'s columns."""
        check_is_fitted(self)
        return _check_feature_names_in(self, input_features)[self.acquirable_]
