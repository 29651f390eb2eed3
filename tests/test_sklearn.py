"""jaxselect.sklearn: the estimators give the solvers' results, and work in Pipelines, GridSearchCV, pandas."""

import pickle

import jax
import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline

import jaxselect as js
from jaxselect.sklearn import (
    DWSMClassifier,
    FSAClassifier,
    FSARegressor,
    FSARegressorCV,
    GreedyRLSRegressor,
    GroupSequencingClassifier,
    GroupSequencingRegressor,
    GroupSequencingRegressorCV,
)

N, D = 62, 6  # 62 rows: KFold(5) gives test folds of 13, 13, 12, 12, 12 rows
IDS = [0, 0, 1, 2, 3, 3]
COSTS = [2.0, 1.0, 3.0, 1.5]
NAMES = ["age", "bmi", "glucose", "insulin", "bp", "skin"]


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D)).astype(np.float32)
    y = (X[:, 0] - 1.5 * X[:, 2] + 0.8 * X[:, 5] + 0.4 * rng.normal(size=N)).astype(np.float32)
    return X, y


def test_sequencing_regressor_is_the_path_at_its_budget():
    X, y = _data()
    groups = js.Groups.from_ids(IDS, COSTS)
    est = GroupSequencingRegressor("fr", groups=IDS, costs=COSTS, budget=4.0, l2=1e-3).fit(X, y)
    path = js.cs_fr(js.prepare(X, y, groups, l2=1e-3))
    order = np.asarray(path.order)
    assert est.order_.tolist() == order[order >= 0].tolist()
    j = est.n_groups_selected_
    assert est.cum_cost_[j - 1] <= 4.0 < est.cum_cost_[j]
    np.testing.assert_array_equal(est.get_support(), np.isin(IDS, est.order_[:j]))
    np.testing.assert_allclose(est.predict(X), js.predict(path, X, budget=4.0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(est.transform(X), X[:, est.get_support()])
    # every group with budget=None; the anytime path answers other budgets without refitting
    full = clone(est).set_params(budget=None).fit(X, y)
    assert full.n_groups_selected_ == 4 and full.get_support().all()
    np.testing.assert_allclose(js.predict(full.path_, X, budget=4.0), est.predict(X), rtol=1e-5, atol=1e-5)
    # multi-output, and a Groups object with its own costs
    Y = np.stack([y, X[:, 3]], axis=1)
    multi = GroupSequencingRegressor(groups=groups, budget=None).fit(X, Y)
    assert multi.coef_.shape == (2, D) and multi.predict(X).shape == (N, 2)
    assert multi.score(X, Y) > 0.9
    restored = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(restored.predict(X), est.predict(X))
    with pytest.raises(ValueError, match="groups cover 6 features but X has 5"):
        GroupSequencingRegressor(groups=IDS).fit(X[:, :5], y)
    with pytest.raises(ValueError, match="costs must have one entry per group"):
        GroupSequencingRegressor(groups=IDS, costs=[1.0, 2.0]).fit(X, y)
    with pytest.raises(ValueError, match="method must be one of"):
        GroupSequencingRegressor("lars").fit(X, y)


def test_cv_estimators_choose_what_gridsearchcv_chooses():
    """Same grid, same folds: the CV estimators pick GridSearchCV's budget / k, with its scores."""
    X, y = _data(1)
    cv_est = GroupSequencingRegressorCV(groups=IDS, costs=COSTS, cv=KFold(5), l2=1e-3).fit(X, y)
    grid = cv_est.cv_result_.grid
    gs = GridSearchCV(GroupSequencingRegressor(groups=IDS, costs=COSTS, l2=1e-3), {"budget": list(grid)}, cv=KFold(5))
    gs.fit(X, y)
    assert gs.best_params_["budget"] == cv_est.budget_
    np.testing.assert_allclose(gs.cv_results_["mean_test_score"], cv_est.cv_result_.mean, atol=1e-4)
    np.testing.assert_allclose(gs.predict(X), cv_est.predict(X), rtol=1e-5, atol=1e-5)
    one_se = clone(cv_est).set_params(rule="1se").fit(X, y)
    assert one_se.budget_ == cv_est.cv_result_.best_1se <= cv_est.budget_

    fsa_cv = FSARegressorCV(ks=[3, 1, 2], cv=KFold(5), n_iter=40).fit(X, y)
    gs = GridSearchCV(FSARegressor(n_iter=40), {"k": [1, 2, 3]}, cv=KFold(5)).fit(X, y)
    assert gs.best_params_["k"] == fsa_cv.k_
    np.testing.assert_allclose(gs.cv_results_["mean_test_score"], fsa_cv.cv_result_.mean, atol=1e-4)
    assert fsa_cv.get_support().sum() == fsa_cv.k_


def test_pandas_pipeline_keeps_column_names():
    pd = pytest.importorskip("pandas")
    X, y = _data(2)
    X[::7, 3] = np.nan  # missing insulin values, imputed in the pipeline
    df = pd.DataFrame(X, columns=NAMES)
    labels = (y > 0).astype(int)
    select = GroupSequencingRegressorCV(groups=IDS, costs=COSTS, cv=3, l2=1e-3)
    pipe = make_pipeline(SimpleImputer(), select, LogisticRegression()).set_output(transform="pandas")
    pipe.fit(df, labels)
    names = pipe[:-1].get_feature_names_out()
    assert list(names) == [c for c, keep in zip(NAMES, select.get_support()) if keep]
    assert list(pipe[-1].feature_names_in_) == list(names)
    assert list(pipe[:-1].transform(df).columns) == list(names)
    assert pipe.score(df, labels) > 0.8


def test_group_sequencing_classifier_is_glm_omp():
    X, y = _data(3)
    labels = np.where(y > 0, "yes", "no")
    est = GroupSequencingClassifier(groups=IDS, costs=COSTS, budget=3.5).fit(X, labels)
    path = js.glm_omp(X, (y > 0).astype(int), js.Groups.from_ids(IDS, COSTS))
    assert est.classes_.tolist() == ["no", "yes"] and est.coef_.shape == (1, D)
    assert est.order_.tolist() == [g for g in np.asarray(path.order).tolist() if g >= 0]
    proba = est.predict_proba(X)
    np.testing.assert_allclose(proba[:, 1], js.predict(path, X, budget=3.5, link=True), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(est.predict(X), np.where(proba[:, 1] > 0.5, "yes", "no"))
    three = np.digitize(y, [-1.0, 1.0])  # softmax for three classes
    multi = GroupSequencingClassifier(budget=None).fit(X, three + 10)
    assert multi.classes_.tolist() == [10, 11, 12] and multi.predict_proba(X).shape == (N, 3)
    np.testing.assert_allclose(multi.predict_proba(X).sum(axis=1), 1.0, rtol=1e-6)
    assert multi.score(X, three + 10) > 0.7


def test_fsa_and_rls_estimators_are_their_solvers():
    X, y = _data(4)
    reg = FSARegressor(k=2, n_iter=40).fit(X, y)
    res = js.fsa(X, y, 2, n_iter=40)
    assert np.flatnonzero(reg.get_support()).tolist() == np.asarray(res.support).tolist()
    np.testing.assert_allclose(reg.predict(X), js.predict(res, X), rtol=1e-4, atol=1e-4)
    labels = np.where(y > 0, 1, -1)
    clf = FSAClassifier(k=2, n_iter=40).fit(X, labels)
    res = js.fsa(X, labels, 2, n_iter=40, loss="logistic")
    np.testing.assert_allclose(clf.decision_function(X), js.predict(res, X), rtol=1e-4, atol=1e-4)
    assert clf.classes_.tolist() == [-1, 1] and clf.score(X, labels) > 0.8
    assert hasattr(clf, "predict_proba") and not hasattr(clone(clf).set_params(loss="lorenz"), "predict_proba")
    three = clone(clf).fit(X, np.digitize(y, [-1.0, 1.0]))  # several classes: the multinomial loss
    assert three.classes_.tolist() == [0, 1, 2] and three.predict_proba(X).shape == (len(y), 3)
    assert three.coef_.shape == (3, X.shape[1]) and three.get_support().sum() == 2  # one shared support
    Y = np.stack([y, X[:, 1] - X[:, 4]], axis=1)
    rls = GreedyRLSRegressor(k=3, l2=1e-2).fit(X, Y)
    ref = js.greedy_rls(X, Y, 3, l2=1e-2)  # the same defaults (bias=0.0: no intercept)
    assert rls.intercept_.tolist() == [0.0, 0.0]
    assert rls.selected_.tolist() == np.asarray(ref.selected).tolist()
    np.testing.assert_allclose(rls.predict(X), js.predict(ref, X, budget=3), rtol=1e-4, atol=1e-4)


def test_dwsm_classifier_transform_and_budget():
    X, y = _data(5)
    labels = np.where(y > 0, "pos", "neg")
    est = DWSMClassifier(lam=0.02, budget=2.0, n_iter=3, states_per_example=4, random_state=0).fit(X, labels)
    pol = js.dwsm_fit(
        jax.random.key(int(np.random.RandomState(0).randint(np.iinfo(np.int32).max))),
        X,
        (y > 0).astype(int),
        lam=0.02,
        budget=2.0,
        n_iter=3,
        states_per_example=4,
    )
    ref_labels, ref_acq = js.predict(pol, X)
    acquired = est.acquired(X)
    np.testing.assert_array_equal(acquired, ref_acq)
    np.testing.assert_array_equal(est.predict(X), np.array(["neg", "pos"])[np.asarray(ref_labels)])
    assert acquired.sum(axis=1).max() <= 2
    # transform: the columns the policy can acquire, unacquired entries at the training mean
    Xt, keep = est.transform(X), est.acquirable_
    assert Xt.shape == (X.shape[0], keep.sum()) and np.isfinite(Xt).all()
    np.testing.assert_allclose(Xt, np.where(acquired[:, keep], X[:, keep], est.feature_means_[keep]), rtol=1e-6)
    nan = clone(est).set_params(fill_value=np.nan).fit(X, labels).transform(X)
    assert np.isnan(nan[~acquired[:, keep]]).all() and (nan[acquired[:, keep]] == X[:, keep][acquired[:, keep]]).all()
    np.testing.assert_array_equal(est.get_support(), acquired.any(axis=0))
    assert est.get_feature_names_out().tolist() == [f"x{i}" for i in range(D) if keep[i]]


# ---------------------------------------------------------------------------------------------
# sample_weight: integer weights are repeated rows, weight-0 rows are removed rows. The data are
# float64, so the estimators fit in float64 and agree to rounding.

NW = 24
FOLD_IDS = np.arange(NW) % 3  # the CV estimators' folds, carried over to the repeated rows


def _weighted_data():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(NW, 5))
    y = X[:, 0] - 2 * X[:, 3] + 0.3 * rng.normal(size=NW)
    w = rng.integers(0, 4, size=NW)
    w[[1, 5]] = 0
    return X, y, w


def _folds(ids):
    return [(np.flatnonzero(ids != f), np.flatnonzero(ids == f)) for f in range(3)]


WEIGHTED = {
    "GroupSequencingRegressor": lambda ids: GroupSequencingRegressor(budget=2),
    "GroupSequencingRegressorCV": lambda ids: GroupSequencingRegressorCV(cv=_folds(ids)),
    "GroupSequencingClassifier": lambda ids: GroupSequencingClassifier(budget=2),
    "FSARegressor": lambda ids: FSARegressor(k=2, n_iter=30),
    "FSAClassifier": lambda ids: FSAClassifier(k=2, n_iter=30),
    "FSARegressorCV": lambda ids: FSARegressorCV(ks=(1, 2), cv=_folds(ids), n_iter=30),
    # greedy RLS selects by leave-one-out error, which repeated rows change (a left-out copy's twins
    # stay in): repeated rows give its model, not its selection — so k = every feature here
    "GreedyRLSRegressor": lambda ids: GreedyRLSRegressor(k=5, bias=1.0),
}


def _outputs(est, X):
    out = {"support": est.get_support()}
    for name in ("coef_", "intercept_", "budget_", "k_"):
        if hasattr(est, name):
            out[name] = np.asarray(getattr(est, name), np.float64)
    for method in ("predict_proba", "decision_function", "predict"):
        if hasattr(est, method):
            out[method] = getattr(est, method)(X)
    return out


def _assert_same_fit(a, b, X):
    A, B = _outputs(a, X), _outputs(b, X)
    assert A.keys() == B.keys()
    for key in A:
        if A[key].dtype.kind == "f":
            np.testing.assert_allclose(A[key], B[key], rtol=1e-7, atol=1e-9, err_msg=key)
        else:
            np.testing.assert_array_equal(A[key], B[key], err_msg=key)


@pytest.mark.parametrize("name", list(WEIGHTED))
def test_sample_weight_is_repeated_and_removed_rows(name):
    X, y, w = _weighted_data()
    if "Classifier" in name:
        y = np.where(y > 0, "pos", "neg")
    make = WEIGHTED[name]
    weighted = make(FOLD_IDS).fit(X, y, sample_weight=w)
    repeated = make(np.repeat(FOLD_IDS, w)).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    _assert_same_fit(weighted, repeated, X)
    keep = w > 0
    removed = make(FOLD_IDS[keep]).fit(X[keep], y[keep], sample_weight=w[keep])
    _assert_same_fit(weighted, removed, X)
    # weights matter: the unweighted fit differs
    plain = make(FOLD_IDS).fit(X, y)
    key = "predict_proba" if hasattr(plain, "predict_proba") else "predict"
    assert not np.allclose(_outputs(plain, X)[key], _outputs(weighted, X)[key], rtol=1e-5)


def test_greedy_rls_weights_remove_rows_at_any_k():
    """Weight-0 rows are removed rows for greedy RLS's selection too (the LOO sums skip them)."""
    X, y, w = _weighted_data()
    keep = w > 0
    a = GreedyRLSRegressor(k=2).fit(X, y, sample_weight=np.where(keep, 1, 0))
    b = GreedyRLSRegressor(k=2).fit(X[keep], y[keep])
    assert a.selected_.tolist() == b.selected_.tolist()
    np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=1e-7, atol=1e-9)


def test_dwsm_classifier_sample_weight():
    """RCPI samples at random per row: rows of weight 0 appended at the end and uniform weights
    change nothing; integer weights equal repeated rows only in expectation (not tested)."""
    X, y, _ = _weighted_data()
    labels = np.where(y > 0, "pos", "neg")
    make = lambda: DWSMClassifier(n_iter=2, states_per_example=3, random_state=0)  # noqa: E731
    plain = make().fit(X, labels)
    padded = make().fit(
        np.vstack([X, X[:4] + 1.0]), np.concatenate([labels, labels[:4]]), sample_weight=np.r_[np.ones(NW), np.zeros(4)]
    )
    np.testing.assert_array_equal(padded.acquired(X), plain.acquired(X))
    np.testing.assert_array_equal(padded.predict(X), plain.predict(X))
    np.testing.assert_allclose(padded.policy_.theta, plain.policy_.theta, rtol=1e-7, atol=1e-9)
    assert padded.mean_features_ == pytest.approx(plain.mean_features_)
    doubled = make().fit(X, labels, sample_weight=np.full(NW, 2.0))
    np.testing.assert_allclose(doubled.policy_.theta, plain.policy_.theta, rtol=1e-7, atol=1e-9)


def test_sample_weight_errors():
    X, y, w = _weighted_data()
    est = GroupSequencingRegressor()
    with pytest.raises(ValueError, match=r"sample_weight must have shape \(24,\)"):
        est.fit(X, y, sample_weight=w[:-1])
    with pytest.raises(ValueError, match="sample_weight must be non-negative; row 0"):
        est.fit(X, y, sample_weight=-np.ones(NW))
    with pytest.raises(ValueError, match="every weight is zero"):
        est.fit(X, y, sample_weight=np.zeros(NW))
    one_class = np.where(y > 0, "pos", "neg")
    with pytest.raises(ValueError, match=r"rows of positive sample_weight contain only one class \('pos'\)"):
        GroupSequencingClassifier().fit(X, one_class, sample_weight=(one_class == "pos").astype(float))
    with pytest.raises(ValueError, match="sample_weight needs a built-in loss name"):
        FSARegressor(k=1, loss=lambda s, t: ((s - t) ** 2).mean()).fit(X, y, sample_weight=w)


# ---------------------------------------------------------------------------------------------
# A k above the usable features warns and keeps them all (as SelectKBest).

K_ESTIMATORS = {
    "GroupSequencingRegressor": (lambda: GroupSequencingRegressor(k=5), "groups"),
    "GroupSequencingClassifier": (lambda: GroupSequencingClassifier(k=5), "groups"),
    "FSARegressor": (lambda: FSARegressor(k=5, n_iter=30), "features"),
    "FSAClassifier": (lambda: FSAClassifier(k=5, n_iter=30), "features"),
    "GreedyRLSRegressor": (lambda: GreedyRLSRegressor(k=5), "features"),
}


@pytest.mark.parametrize("name", list(K_ESTIMATORS))
def test_k_above_the_usable_features_warns_and_keeps_them_all(name):
    X, y, _ = _weighted_data()
    X = X[:, :4].copy()
    X[:, 2] = 1.5  # a constant column is never selected
    if "Classifier" in name:
        y = y > 0
    make, unit = K_ESTIMATORS[name]
    message = rf"{name}: k=5 is larger than the number of usable {unit} of X \(3; .*\); all 3 are kept"
    with pytest.warns(UserWarning, match=message):
        est = make().fit(X, y)
    assert est.get_support().tolist() == [True, True, False, True]
    # the usable columns are judged on the rows of positive weight
    w = (np.arange(NW) % 4 != 0).astype(float)
    X[w > 0, 1] = 7.0  # column 1 varies only on rows of weight 0: constant where it counts
    with pytest.warns(UserWarning, match=rf"usable {unit} of X \(2; .*\); all 2 are kept"):
        est = make().fit(X, y, sample_weight=w)
    assert est.get_support().tolist() == [True, False, False, True]


def test_fsa_regressor_cv_replaces_ks_above_the_usable_features():
    X, y, _ = _weighted_data()
    X = X[:, :3]
    message = r"ks \[5, 8\] are larger than the number of usable features of X \(3; .*\); they are replaced by 3"
    with pytest.warns(UserWarning, match=message):
        est = FSARegressorCV(ks=(1, 5, 8), cv=3, n_iter=30).fit(X, y)
    assert est.cv_result_.grid.tolist() == [1.0, 3.0]
