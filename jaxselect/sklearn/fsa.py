"""scikit-learn estimators of Feature Selection with Annealing: FSARegressor, FSARegressorCV, FSAClassifier,
FSAClassifierCV."""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.model_selection import check_cv
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array

from jaxselect._validation import clip_k
from jaxselect.anneal import Execution, PiecewiseLinear, Polish, fsa, fsa_predict
from jaxselect.anneal.defaults import auto_n_iter, is_auto
from jaxselect.anneal.multiclass import SOFTMAX_LOSSES
from jaxselect.anneal.scaling import apply_transform, result_transform
from jaxselect.design import is_sparse
from jaxselect.design.buckets import bucket_rows, pad_design
from jaxselect.design.stream import stream_kind
from jaxselect.losses import HuberHinge, loss_names
from jaxselect.model_selection import cross_validate_fsa
from jaxselect.prediction import predict as _predict
from jaxselect.sklearn._base import (
    _RULES,
    _Base,
    _cap_k,
    _check_choice,
    _check_k,
    _check_weights,
    _encode_labels,
    _host,
    _linear_predict,
    _live_columns,
    _precision,
    _Selector,
)


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
            options = {
                name: getattr(self, name) for name in ("huber_h", "scale", "l1", "refine") if hasattr(self, name)
            }
            if loss == "huber_hinge":
                loss = HuberHinge(options.pop("huber_h", 0.1))
            options.pop("huber_h", None)
            polish = Polish(l1=options.pop("l1", "auto"), refine=options.pop("refine", "auto"))
            learner = None if self.bins is None else PiecewiseLinear(self.bins, self.smoothness)
            # nearby shapes (CV folds, GridSearchCV, the next dataset) share compiled programs: zero
            # rows of weight 0 and, for linear learners, zero columns up to the buckets — the same
            # fit: the annealing schedule counts X's own columns (Execution.padded_columns)
            X_fit, y_fit, w_fit = pad_design(X, y, w, columns=self.bins is None)
            execution = Execution(padded_columns=X_fit.shape[1] - X.shape[1])
            # "auto" counts X's own stored values, not the padding's filler entries
            n_iter = auto_n_iter(X) if is_auto(self.n_iter) else self.n_iter
            result = fsa(
                X_fit,
                y_fit,
                k,
                loss=loss,
                n_iter=n_iter,
                mu=self.mu,
                lr=self.lr,
                l2=self.l2,
                learner=learner,
                sample_weight=w_fit,
                polish=polish,
                execution=execution,
                **options,
            )
            self.result_ = _host(result)._replace(transform=result.transform)  # (a str, not an array)
        self.status_ = int(self.result_.status)
        support = np.asarray(self.result_.support)
        self.support_ = np.zeros(X.shape[1], bool)
        self.support_[support] = True
        coef = np.asarray(self.result_.coef, np.float64)
        intercept = np.asarray(self.result_.intercept, np.float64)
        if loss == "softmax" and coef.shape[1] == 2:  # two classes: the score s₁ − s₀ (σ of it: the softmax)
            coef, intercept = coef[:, 1] - coef[:, 0], intercept[1] - intercept[0]
        dense = np.zeros((X.shape[1],) + coef.shape[1:])
        dense[support] = coef
        if loss == "softmax" and dense.ndim == 2:  # (n_classes, n_features), as scikit-learn's
            self.coef_ = dense.T.copy()
            self.intercept_ = intercept
        else:
            self.coef_ = dense
            self.intercept_ = float(intercept)

    def _scores(self, X):
        X = self._validate_X(X)
        transform = result_transform(self.result_)
        if self.bins is None and transform is not None:  # fitted on log1p values: the support's columns mapped
            support = np.flatnonzero(self.support_)
            coef = self.coef_[..., support]
            return _linear_predict(apply_transform(X[:, support], transform), coef, self.intercept_)
        if self.bins is None:
            return _linear_predict(X, self.coef_, self.intercept_)
        dtype = np.asarray(self.result_.coef).dtype
        with _precision(dtype):
            if is_sparse(X):  # a model fitted on dense X: only its support columns are densified
                return np.asarray(_predict(self.result_, X), np.float64)
            # rows are independent: padded to their bucket, nearby row counts share the program
            n = X.shape[0]
            return np.asarray(fsa_predict(self.result_, bucket_rows(X.astype(dtype, copy=False))), np.float64)[:n]


class FSARegressor(RegressorMixin, _FSABase):
    """Feature Selection with Annealing (Barbu et al.) for regression: k features, a linear model.

    Args:
      k: number of features to keep; a k above the number of usable (non-constant) columns keeps
        them all, with a UserWarning.
      loss: "squared" (½·mean squared error) or a callable ``loss(scores, y) -> scalar``.
      n_iter, mu, lr, l2, bins, smoothness: as in :func:`jaxselect.fsa` (``l2``: mean loss +
        (l2/2)‖β‖² on standardised features; ``bins``: piecewise-linear learners).
      scale, l1, refine: as in :func:`jaxselect.fsa` (``scale``: how columns are scaled, raw 0/1
        indicators keep their scale under ``"auto"`` and sparse raw counts are fitted on
        ``log(1 + x)``; ``l1``: the L1 polish; ``refine``: rounds of gradient support pursuit).
        Every ``"auto"`` (``l2`` too: a ridge on count data with a binary classification loss) is
        :func:`jaxselect.fsa`'s data-dependent default (:mod:`jaxselect.anneal.defaults`); the
        defaults before 0.4 on any data: ``scale="std", l2=0.0, n_iter=500, l1=None, refine=0``.

    Attributes:
      support_: (n_features,) bool, the k selected columns.
      coef_: (n_features,) raw-space coefficients, 0 off the support ((n_features, bins + 1) for
        piecewise-linear learners); with ``result_.transform == "log1p"`` (sparse counts under
        ``scale="auto"``, or ``scale="log1p"``) they apply to ``log(1 + x)``, and ``predict``/
        ``decision_function`` map X's support columns so. ``transform`` (the selector's) returns
        the selected columns of X as given, unmapped.
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
        self,
        k=10,
        *,
        loss="squared",
        n_iter="auto",
        mu=300.0,
        lr=None,
        l2="auto",
        bins=None,
        smoothness=0.0,
        scale="auto",
        l1="auto",
        refine="auto",
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
      loss, n_iter, mu, lr, l2, bins, smoothness, scale, l1, refine: as in :class:`FSARegressor`
        (the folds' fits take them too; see :func:`jaxselect.cross_validate_fsa` for how they run).

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
        n_iter="auto",
        mu=300.0,
        lr=None,
        l2="auto",
        bins=None,
        smoothness=0.0,
        scale="auto",
        l1="auto",
        refine="auto",
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
        self.scale = scale
        self.l1 = l1
        self.refine = refine

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
        self.cv_result_ = _cross_validate(self, X, y, w, "squared", self.scoring, classifier=False)
        self.k_ = int(self.cv_result_.best if rule == "best" else self.cv_result_.best_1se)
        self._fsa(X, y, w, "squared", self.k_)
        return self


def _cross_validate(est, X, y, w, loss, scoring, *, classifier: bool):
    """:func:`jaxselect.cross_validate_fsa` over ``est.ks`` (clipped to the usable columns) with the
    estimator's options; folds from ``check_cv(est.cv, y, classifier=...)`` (stratified for
    classifiers, as scikit-learn's)."""
    ks = np.atleast_1d(np.asarray(est.ks))
    if ks.size == 0 or ks.dtype.kind not in "iu" or (ks < 1).any():
        raise ValueError(f"ks must be a non-empty sequence of integers >= 1; got {est.ks!r}")
    n_live = int(_live_columns(X, w).sum())
    ks = clip_k(ks, n_live, type(est).__name__, stacklevel=3)
    folds = list(check_cv(est.cv, y, classifier=classifier).split(X, y))
    l1, refine = getattr(est, "l1", "auto"), getattr(est, "refine", "auto")
    # on dense X "auto" is no L1 and no refinement: no record, so the folds run at once (vmapped)
    plain = (l1 is None or is_auto(l1)) and (is_auto(refine) or refine == 0)
    polish = None if plain and not is_sparse(X) else Polish(l1=l1, refine=refine)
    if loss == "huber_hinge":
        loss = HuberHinge(est.huber_h)
    with _precision(X.dtype):
        return cross_validate_fsa(
            X,
            y,
            np.unique(ks),
            folds=folds,
            loss=loss,
            n_iter=est.n_iter,
            mu=est.mu,
            lr=est.lr,
            l2=est.l2,
            bins=est.bins,
            smoothness=est.smoothness,
            score=scoring,
            sample_weight=w,
            scale=est.scale,
            polish=polish,
        )


class FSAClassifier(ClassifierMixin, _FSABase):
    """Feature Selection with Annealing (Barbu et al.) for classification: k features for all classes.

    Labels may be any values (``classes_``: numbers, strings, bools). Two classes: a binary loss on
    the linear score (> 0: ``classes_[1]``), as :func:`jaxselect.fsa` with that loss. More classes:
    the multinomial (softmax) loss of :func:`jaxselect.fsa` with ``loss="softmax"`` — one support of
    k features shared by every class (annealing keeps the features whose coefficient row is
    largest), class scores (n, n_classes) from ``decision_function`` and softmax probabilities
    from ``predict_proba``, as scikit-learn's multinomial ``LogisticRegression``.

    Args:
      k: number of features to keep (above the usable columns: all, with a UserWarning).
      loss: "logistic" (default: the multinomial loss for more than two classes), "softmax" (alias
        "multinomial": that loss for any number of classes; two classes then give the score
        s₁ − s₀), or the binary losses "huber_hinge" (``huber_h`` its h) and "lorenz".
      n_iter, mu, lr, l2, bins, smoothness, scale, l1, refine: as in :func:`jaxselect.fsa` (see
        :class:`FSARegressor`); the multinomial loss takes linear learners (``bins=None``) without
        ``l1``; ``refine=R`` runs R rounds of gradient support pursuit on it too (``"auto"``: 0 for
        more than two classes).

    Attributes:
      classes_: the labels.
      support_: (n_features,) bool; ``result_``, ``status_`` as in :class:`FSARegressor`.
      coef_: (n_features,) raw-space coefficients for two classes; (n_classes, n_features) for
        more (rows sum to 0 over the classes), 0 off the support.
      intercept_: float for two classes; (n_classes,) for more.

    Raises:
      ValueError: one class only, a binary loss on more than two classes, an unknown loss, or the
        data errors of :func:`jaxselect.fsa`.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(60, 5)); y = X[:, 1] - X[:, 4] > 0
    >>> clf = FSAClassifier(k=2, n_iter=50).fit(X, y)
    >>> clf.get_support(indices=True).tolist(), clf.score(X, y) > 0.9
    ([1, 4], True)
    >>> y3 = np.array(["a", "b", "c"])[np.argmax(X[:, [0, 2, 3]], axis=1)]   # three classes
    >>> clf = FSAClassifier(k=3, n_iter=50).fit(X, y3)
    >>> clf.get_support(indices=True).tolist(), clf.predict_proba(X).shape
    ([0, 2, 3], (60, 3))
    """

    def __init__(
        self,
        k=10,
        *,
        loss="logistic",
        n_iter="auto",
        mu=300.0,
        lr=None,
        l2="auto",
        bins=None,
        smoothness=0.0,
        huber_h=0.1,
        scale="auto",
        l1="auto",
        refine="auto",
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

    def _fit_loss(self, n_classes: int) -> str:
        """The loss :func:`jaxselect.fsa` runs: the binary loss for two classes, else the softmax."""
        _check_choice(self.loss, "loss", loss_names(fsa=True, classification=True) + SOFTMAX_LOSSES)
        if self.loss in SOFTMAX_LOSSES:
            return "softmax"
        if n_classes > 2:
            if self.loss != "logistic":
                raise ValueError(
                    f"{type(self).__name__}(loss={self.loss!r}) is a binary loss and y has {n_classes} classes: use "
                    "loss='logistic' or 'softmax' (the multinomial loss, one support for all classes)"
                )
            return "softmax"
        return self.loss

    def fit(self, X, y, sample_weight=None):
        """Select ``k`` features of X (n_samples, n_features) for the labels y (n_samples,).

        ``sample_weight``: None or (n_samples,) row weights ≥ 0 (:func:`jaxselect.fsa`'s): integer
        weights equal repeated rows, weight-0 rows are left out.
        """
        _check_choice(self.loss, "loss", loss_names(fsa=True, classification=True) + SOFTMAX_LOSSES)
        X, y, w = self._validate_fit(X, y, sample_weight, multi_output=False, numeric=False)
        check_classification_targets(y)
        labels = _encode_labels(self, y, w)
        loss = self._fit_loss(len(self.classes_))
        self._fsa(X, labels, w, loss, self.k)
        return self

    def decision_function(self, X):
        """Scores: (n_samples,) for two classes (> 0 predicts ``classes_[1]``), else
        (n_samples, n_classes) class scores."""
        return self._scores(X)

    def predict(self, X):
        """Predicted labels (n_samples,)."""
        scores = self.decision_function(X)
        if scores.ndim == 2:
            return self.classes_[np.argmax(scores, axis=1)]
        return self.classes_[(scores > 0).astype(int)]

    def _is_logistic(self):
        return self.loss == "logistic" or self.loss in SOFTMAX_LOSSES

    @available_if(_is_logistic)
    def predict_proba(self, X):
        """Probabilities (n_samples, n_classes) of the logistic / multinomial model (``loss="logistic"``
        or ``"softmax"``)."""
        scores = self.decision_function(X)
        if scores.ndim == 2:
            shifted = scores - scores.max(axis=1, keepdims=True)
            e = np.exp(shifted)
            return e / e.sum(axis=1, keepdims=True)
        p = 1.0 / (1.0 + np.exp(-scores))
        return np.stack([1.0 - p, p], axis=1)

    @available_if(_is_logistic)
    def predict_log_proba(self, X):
        """Log-probabilities (n_samples, n_classes) (``loss="logistic"`` or ``"softmax"``)."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))


class FSAClassifierCV(FSAClassifier):
    """:class:`FSAClassifier` whose k is chosen by stratified K-fold cross-validation over a grid.

    :func:`jaxselect.cross_validate_fsa` fits every k of the grid on all folds and scores the
    held-out accuracy; ``k_`` maximises the mean accuracy (``rule="best"``) or is the smallest k
    within one standard error of it (``rule="1se"``); FSA is then refitted on all rows. Any number
    of classes and any labels, as :class:`FSAClassifier` (more than two classes: the multinomial
    loss; every class must appear in every fold's training rows).

    Args:
      ks: candidate k values; one above the number of usable (non-constant) features is replaced
        by that number (all features kept) with a UserWarning.
      cv: int K (``StratifiedKFold(K)``), a scikit-learn splitter or (train, test) index pairs.
      rule: "best" or "1se". scoring: "accuracy".
      loss, n_iter, mu, lr, l2, bins, smoothness, huber_h, scale, l1, refine: as in
        :class:`FSAClassifier`.

    Attributes:
      k_: the chosen k.
      cv_result_: the :class:`jaxselect.CVResult`.
      classes_, support_: and the other attributes of :class:`FSAClassifier`, for the refit at ``k_``.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(90, 6))
    >>> y = np.array(["a", "b", "c"])[np.argmax(X[:, [1, 3, 4]], axis=1)]
    >>> est = FSAClassifierCV(ks=[1, 3], cv=3, n_iter=50).fit(X, y)
    >>> est.k_, est.get_support(indices=True).tolist()
    (3, [1, 3, 4])
    """

    def __init__(
        self,
        ks=(1, 2, 5, 10, 20),
        *,
        cv=5,
        rule="best",
        scoring="accuracy",
        loss="logistic",
        n_iter="auto",
        mu=300.0,
        lr=None,
        l2="auto",
        bins=None,
        smoothness=0.0,
        huber_h=0.1,
        scale="auto",
        l1="auto",
        refine="auto",
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
        self.huber_h = huber_h
        self.scale = scale
        self.l1 = l1
        self.refine = refine

    def fit(self, X, y, sample_weight=None):
        """Cross-validate k on (X, y), then fit FSA with ``k_`` on all rows.

        ``sample_weight``: None or (n_samples,) row weights ≥ 0, used by every fold's fit and
        held-out accuracy (:func:`jaxselect.cross_validate_fsa`) and by the final fit.
        """
        rule = _check_choice(self.rule, "rule", _RULES)
        _check_choice(self.scoring, "scoring", ("accuracy",))
        _check_choice(self.loss, "loss", loss_names(fsa=True, classification=True) + SOFTMAX_LOSSES)
        X, y, w = self._validate_fit(X, y, sample_weight, multi_output=False, numeric=False)
        check_classification_targets(y)
        labels = _encode_labels(self, y, w)
        loss = self._fit_loss(len(self.classes_))
        self._check_sparse_bins(X)
        self.cv_result_ = _cross_validate(self, X, labels, w, loss, "accuracy", classifier=True)
        self.k_ = int(self.cv_result_.best if rule == "best" else self.cv_result_.best_1se)
        self._fsa(X, labels, w, loss, self.k_)
        return self


# ---------------------------------------------------------------------------------------------
# Greedy RLS (Airola & Pahikkala).
