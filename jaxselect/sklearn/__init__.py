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
FSARegressor / FSAClassifier   :func:`~jaxselect.fsa` (softmax for more    targets / labels,
                               than two classes)                           probabilities
FSARegressorCV /               ``fsa``, k by :func:`~jaxselect.cross_validate_fsa`
FSAClassifierCV
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
/ FSARegressorCV /
FSAClassifierCV
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

from jaxselect.sklearn.dwsm import DWSMClassifier
from jaxselect.sklearn.fsa import FSAClassifier, FSAClassifierCV, FSARegressor, FSARegressorCV
from jaxselect.sklearn.rls import GreedyRLSRegressor
from jaxselect.sklearn.sequencing import GroupSequencingClassifier, GroupSequencingRegressor, GroupSequencingRegressorCV

__all__ = [
    "DWSMClassifier",
    "FSAClassifier",
    "FSAClassifierCV",
    "FSARegressor",
    "FSARegressorCV",
    "GreedyRLSRegressor",
    "GroupSequencingClassifier",
    "GroupSequencingRegressor",
    "GroupSequencingRegressorCV",
]
