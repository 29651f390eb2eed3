"""scikit-learn estimator of datum-wise sparse classification: DWSMClassifier."""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import _check_feature_names_in, check_is_fitted

from jaxselect.design.buckets import bucket, bucket_rows, pad_design
from jaxselect.dwsm import MDPOptions as _MDPOptions
from jaxselect.dwsm import RCPIOptions as _RCPIOptions
from jaxselect.dwsm import dwsm_predict
from jaxselect.dwsm.fit import fit_with_acquired as _dwsm_fit_with_acquired
from jaxselect.dwsm.problem import padding_keeps_draws as _padding_keeps_draws
from jaxselect.sklearn._base import (
    _Base,
    _check_budget,
    _encode_labels,
    _host,
    _make_groups,
    _precision,
    _report_status,
    _seed_key,
)


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
      progress: a tqdm bar over the RCPI iterations during ``fit`` (the library's option; a fit can
        run for minutes on hundreds of features); the policy is the same.

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
        progress=False,
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
        self.progress = progress

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
        rcpi = _RCPIOptions(states_per_example=self.states_per_example, alpha=self.alpha, l2=self.l2)
        n = X.shape[0]
        X_fit, labels_fit, w_fit = X, labels, w
        if _padding_keeps_draws(rcpi, n, bucket(n), X.shape[1] if groups is None else groups.n_groups):
            X_fit, labels_fit, w_fit = pad_design(X, labels, w, columns=False)
        with _precision(X.dtype):
            # one compiled program: the policy and the features it acquires on the training rows
            policy, acquired = _dwsm_fit_with_acquired(
                # jax.random.key(seed)'s raw data (threefry: [0, seed]): the same random numbers,
                # without compiling the seeding program
                _seed_key(seed),
                X_fit,
                labels_fit,
                lam=self.lam,
                budget=budget,
                groups=groups,
                n_iter=self.n_iter,
                mdp=_MDPOptions(gamma=self.gamma, cost_matrix=self.cost_matrix),
                rcpi=rcpi,
                n_classes=len(self.classes_),
                sample_weight=w_fit,
                progress=self.progress,
            )
            self.policy_ = _host(policy)
        self.status_ = int(self.policy_.status)
        _report_status(self.status_, type(self).__name__)
        acquired = np.asarray(acquired)[:n]
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
        n = X.shape[0]
        with _precision(dtype):
            # every datum's episode is its own: rows padded to their shape bucket share the compiled
            # program of nearby row counts, and the padding's episodes are dropped
            labels, acquired = dwsm_predict(self.policy_, bucket_rows(X.astype(dtype, copy=False)))
        return X, np.asarray(labels)[:n], np.asarray(acquired)[:n]

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
