"""Multiclass FSA (issue 37): the multinomial (softmax) loss with one support shared by every class.

References: scikit-learn's multinomial ``LogisticRegression`` refitted on the support with the same
penalty (C = 1/(l2·Σw) on the standardised support columns), and a brute-force search over every
support of a tiny problem (M = 6, k = 2). One shape (60 × 6, three classes) for the whole module.
"""

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

import jaxselect as js
from jaxselect.sklearn import FSAClassifier

N, M, C, K = 60, 6, 3, 2
L2 = 0.05


def _data():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((N, M))
    X[:, 1] *= 4.0  # scales differ: the standardisation matters
    W = np.zeros((M, C))
    W[1] = [0.8, -0.4, -0.4]
    W[4] = [-1.5, 1.5, 0.0]
    W[2] = [0.3, 0.0, -0.3]
    S = X @ W
    P = np.exp(S - S.max(1, keepdims=True))
    P /= P.sum(1, keepdims=True)
    y = np.array([rng.choice(C, p=p) for p in P]).astype(np.int64)
    return X, y


def _sk_fit(X, y, support, l2, w=None):
    """scikit-learn's multinomial fit on the standardised support columns (weighted mean/std as FSA's)."""
    w = np.ones(len(y)) if w is None else np.asarray(w, float)
    Xs = X[:, support]
    mu = np.average(Xs, axis=0, weights=w)
    sd = np.sqrt(np.average((Xs - mu) ** 2, axis=0, weights=w))
    Z = (Xs - mu) / sd
    lr = LogisticRegression(C=1.0 / (l2 * w.sum()), tol=1e-12, max_iter=10_000).fit(Z, y, sample_weight=w)
    coef = lr.coef_.T / sd[:, None]
    intercept = lr.intercept_ - mu @ coef
    logp = lr.predict_log_proba(Z)
    objective = -np.average(logp[np.arange(len(y)), y], weights=w) + 0.5 * l2 * np.sum(lr.coef_**2)
    return coef, intercept, objective


def _proba(scores):
    e = np.exp(scores - scores.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def test_softmax_fit_equals_sklearn_multinomial_refit_on_its_support(x64):
    X, y = _data()
    res = js.fsa(X, y, K, loss="softmax", l2=L2, n_iter=100)
    support = np.asarray(res.support)
    assert res.coef.shape == (K, C) and res.intercept.shape == (C,) and int(res.status) == 0
    coef, intercept, _ = _sk_fit(X, y, support, L2)
    np.testing.assert_allclose(np.asarray(res.coef), coef, atol=1e-6)
    np.testing.assert_allclose(np.asarray(res.intercept), intercept, atol=1e-6)
    scores = np.asarray(js.predict(res, X))
    assert scores.shape == (N, C)
    np.testing.assert_allclose(_proba(scores), _proba(X[:, support] @ coef + intercept), atol=1e-8)


def test_softmax_float32_and_alias_agree_with_the_reference():
    X, y = _data()
    res = js.fsa(X.astype(np.float32), y, K, loss="multinomial", l2=L2, n_iter=100)
    coef, intercept, _ = _sk_fit(X, y, np.asarray(res.support), L2)
    np.testing.assert_allclose(np.asarray(res.coef), coef, atol=2e-4)
    np.testing.assert_allclose(np.asarray(res.intercept), intercept, atol=2e-4)


def test_softmax_finds_the_brute_force_best_support():
    X, y = _data()
    best = min(itertools.combinations(range(M), K), key=lambda s: _sk_fit(X, y, list(s), L2)[2])
    res = js.fsa(X, y, K, loss="softmax", l2=L2, n_iter=100)
    assert tuple(np.asarray(res.support).tolist()) == best


def test_sparse_equals_dense_and_weights_equal_repeated_rows():
    X, y = _data()
    X = np.where(np.abs(X) < 0.5, 0.0, X).astype(np.float32)
    dense = js.fsa(X, y, K, loss="softmax", l2=L2, n_iter=100)
    sparse = js.fsa(sp.csr_matrix(X), y, K, loss="softmax", l2=L2, n_iter=100)
    assert np.asarray(sparse.support).tolist() == np.asarray(dense.support).tolist()
    np.testing.assert_allclose(np.asarray(sparse.coef), np.asarray(dense.coef), atol=1e-4)
    np.testing.assert_allclose(np.asarray(sparse.intercept), np.asarray(dense.intercept), atol=1e-4)
    w = np.random.default_rng(0).integers(0, 3, N)
    w[:3] = 1  # every class keeps a row of positive weight
    weighted = js.fsa(X, y, K, loss="softmax", l2=L2, n_iter=100, sample_weight=w)
    rep = np.repeat(np.arange(N), w)
    repeated = js.fsa(X[rep], y[rep], K, loss="softmax", l2=L2, n_iter=100)
    assert np.asarray(weighted.support).tolist() == np.asarray(repeated.support).tolist()
    np.testing.assert_allclose(np.asarray(weighted.coef), np.asarray(repeated.coef), atol=1e-4)
    np.testing.assert_allclose(np.asarray(weighted.intercept), np.asarray(repeated.intercept), atol=1e-4)


def test_softmax_label_errors_say_what_to_fix():
    X, y = _data()
    with pytest.raises(ValueError, match="every class present"):
        js.fsa(X, np.where(y == 1, 2, y), K, loss="softmax")
    with pytest.raises(TypeError, match="integer class labels"):
        js.fsa(X, np.array(["a", "b", "c"])[y], K, loss="softmax")
    with pytest.raises(ValueError, match="linear learners"):
        js.fsa(X, y, K, loss="softmax", learner=js.anneal.PiecewiseLinear(4))


def test_classifier_string_labels_probabilities_and_shapes():
    X, y = _data()
    names = np.array(["cat", "dog", "emu"])
    clf = FSAClassifier(k=K, l2=L2, n_iter=100).fit(X.astype(np.float32), names[y])
    assert clf.classes_.tolist() == names.tolist()
    assert clf.coef_.shape == (C, M) and clf.intercept_.shape == (C,) and clf.support_.sum() == K
    scores = clf.decision_function(X)
    proba = clf.predict_proba(X)
    assert scores.shape == (N, C) and proba.shape == (N, C)
    np.testing.assert_allclose(proba.sum(1), 1.0, atol=1e-12)
    assert set(clf.predict(X)) <= set(names) and clf.score(X, names[y]) > 0.5
    res = js.fsa(X.astype(np.float32), y, K, loss="softmax", l2=L2, n_iter=100)
    np.testing.assert_allclose(proba, _proba(np.asarray(js.predict(res, X.astype(np.float32)), float)), atol=1e-5)
    with pytest.raises(ValueError, match="binary loss"):
        FSAClassifier(k=K, loss="lorenz").fit(X, y)


def test_cross_validate_fsa_softmax_scores_each_fold_as_fsa_on_its_rows():
    """FSA CV alike (issue 37): the softmax loss and the plain estimators' options in
    cross_validate_fsa, FSAClassifierCV and FSARegressorCV; a fold's score is fsa on its training rows."""
    from sklearn.model_selection import StratifiedKFold

    from jaxselect.sklearn import FSAClassifierCV, FSARegressorCV

    X, y = _data()
    X = X.astype(np.float32)
    folds = list(StratifiedKFold(3).split(X, y))
    cv = js.cross_validate_fsa(X, y, [K], folds=folds, loss="softmax", l2=L2, n_iter=100)
    for f, (train, test) in enumerate(folds):
        res = js.fsa(X[train], y[train], K, loss="softmax", l2=L2, n_iter=100)
        acc = np.mean(np.argmax(np.asarray(js.predict(res, X[test])), axis=1) == y[test])
        assert abs(cv.scores[f, 0] - acc) <= 1.0 / len(test) + 1e-9
    names = np.array(["cat", "dog", "emu"])
    est = FSAClassifierCV(ks=[1, K], cv=folds, l2=L2, n_iter=100).fit(X, names[y])
    assert est.k_ in (1, K) and est.cv_result_.scores.shape == (3, 2) and est.predict_proba(X).shape == (N, C)
    # the plain estimators' options reach the folds: l1 and scale as in js.fsa on the fold's rows
    yr = (X[:, 1] - X[:, 4]).astype(np.float32)
    reg = FSARegressorCV(ks=[K], cv=folds, n_iter=100, l1=1e-2, scale="sparse").fit(X, yr)
    train, test = folds[0]
    res = js.fsa(X[train], yr[train], K, n_iter=100, scale="sparse", polish=js.anneal.Polish(l1=1e-2))
    pred = np.asarray(js.predict(res, X[test]), float)
    r2 = 1 - np.sum((yr[test] - pred) ** 2) / np.sum((yr[test] - yr[test].mean()) ** 2)
    np.testing.assert_allclose(reg.cv_result_.scores[0, 0], r2, atol=1e-4)
