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


# --------------------------------------------------------------------------- refine (GraSP) rounds
def _masked(seed, n=300, m=8):
    """Three ordinal classes driven by t = x0 + x1, where x1 = e − x0/2 is uncorrelated with t (masked:
    on its own it says nothing about the class) and x2 = t + noise is a decoy that is: FSA's schedule
    keeps {0, 2}, the best pair is {0, 1}."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, m))
    X[:, 1] = 0.5 * rng.standard_normal(n) - 0.5 * X[:, 0]
    t = X[:, 0] + X[:, 1]
    X[:, 2] = t + rng.standard_normal(n)
    P = _proba(np.outer(t, [-4.0, 0.0, 4.0]))
    y = np.array([rng.choice(3, p=p) for p in P]).astype(np.int64)
    return X, y


def _reference_rounds(X, y, support, l2, rounds):
    """The refinement rounds in numpy + scikit-learn (fits converged): the gradient row norms over all
    standardised columns at S's fit, the union with the 2k best outside S, its k largest coefficient
    rows, kept when the refit's objective is lower. Returns (support, objective)."""
    n, m = X.shape
    k = len(support)
    Z = (X - X.mean(0)) / X.std(0)
    Y = np.eye(int(y.max()) + 1)[y]

    def fit(cols):
        lr = LogisticRegression(C=1.0 / (l2 * n), tol=1e-12, max_iter=10_000).fit(Z[:, cols], y)
        return lr.coef_.T, lr.intercept_, _sk_fit(X, y, cols, l2)[2]

    support = sorted(support)
    V, b, f = fit(support)
    for _ in range(rounds):
        G = Z.T @ (_proba(Z[:, support] @ V + b) - Y) / n
        score = np.linalg.norm(G, axis=1)
        score[support] = -np.inf
        union = sorted(support + np.argsort(-score, kind="stable")[: min(2 * k, m - k)].tolist())
        VU = fit(union)[0]
        new = sorted(np.asarray(union)[np.argsort(-np.linalg.norm(VU, axis=1), kind="stable")[:k]].tolist())
        V1, b1, f1 = fit(new)
        if new == support or not f1 < f:
            break
        support, V, b, f = new, V1, b1, f1
    return support, f


def test_refine_recovers_the_masked_column_the_schedule_drops(x64):
    X, y = _masked(0)
    best = min(itertools.combinations(range(X.shape[1]), 2), key=lambda s: _sk_fit(X, y, list(s), L2)[2])
    assert best == (0, 1)
    plain = js.fsa(X, y, 2, loss="softmax", l2=L2, n_iter=100)
    assert np.asarray(plain.support).tolist() == [0, 2]  # the schedule alone keeps the decoy
    res = js.fsa(X, y, 2, loss="softmax", l2=L2, n_iter=100, polish=js.anneal.Polish(refine=1))
    assert tuple(np.asarray(res.support).tolist()) == best and int(res.status) == 0
    ref_support, ref_f = _reference_rounds(X, y, [0, 2], L2, 1)
    assert ref_support == [0, 1]
    coef, intercept, f = _sk_fit(X, y, [0, 1], L2)
    np.testing.assert_allclose(f, ref_f, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(res.coef), coef, atol=1e-6)
    np.testing.assert_allclose(np.asarray(res.intercept), intercept, atol=1e-6)
    assert f < _sk_fit(X, y, [0, 2], L2)[2]
    # the estimator passes refine through, with any labels
    names = np.array(["lo", "mid", "hi"])
    clf = FSAClassifier(k=2, l2=L2, n_iter=100, refine=1).fit(X, names[y])
    assert clf.get_support(indices=True).tolist() == [0, 1]


def test_refine_never_raises_the_objective_and_matches_the_reference_rounds(x64):
    """On random problems of the module's shape (k = 3, three rounds) the refined support is the
    reference's, its F is never above the unrefined F, and equal supports mean the very same fit."""
    X0, y = _data()
    moved = 0
    for seed in range(4):
        rng = np.random.default_rng(seed)
        X = X0[:, rng.permutation(M)] + 1.5 * rng.standard_normal((N, M))
        plain = js.fsa(X, y, 3, loss="softmax", l2=L2, n_iter=100)
        res = js.fsa(X, y, 3, loss="softmax", l2=L2, n_iter=100, polish=js.anneal.Polish(refine=3))
        f_plain = _sk_fit(X, y, np.asarray(plain.support), L2)[2]
        f_res = _sk_fit(X, y, np.asarray(res.support), L2)[2]
        assert f_res <= f_plain + 1e-12
        ref_support, ref_f = _reference_rounds(X, y, np.asarray(plain.support).tolist(), L2, 3)
        assert np.asarray(res.support).tolist() == ref_support
        np.testing.assert_allclose(f_res, ref_f, rtol=1e-9)
        if np.array_equal(np.asarray(res.support), np.asarray(plain.support)):
            np.testing.assert_allclose(np.asarray(res.coef), np.asarray(plain.coef), atol=1e-12)
        moved += f_res < f_plain - 1e-9
    assert moved >= 1  # the rounds did change some support


def test_refine_sparse_equals_dense_and_k_equal_to_the_width():
    X, y = _masked(1)
    X = np.where(np.abs(X) < 0.3, 0.0, X).astype(np.float32)
    refine = js.anneal.Polish(refine=2)
    dense = js.fsa(X, y, 2, loss="softmax", l2=L2, n_iter=100, polish=refine)
    sparse = js.fsa(sp.csr_matrix(X), y, 2, loss="softmax", l2=L2, n_iter=100, polish=refine)
    assert np.asarray(sparse.support).tolist() == np.asarray(dense.support).tolist()
    np.testing.assert_allclose(np.asarray(sparse.coef), np.asarray(dense.coef), atol=1e-4)
    full = js.fsa(X[:, :4], y, 4, loss="softmax", l2=L2, n_iter=100, polish=refine)  # no column outside S
    assert np.asarray(full.support).tolist() == [0, 1, 2, 3] and int(full.status) == 0


def test_refine_bad_input_says_what_to_fix():
    X, y = _data()
    with pytest.raises(ValueError, match="linear learners"):
        js.fsa(X, y, K, loss="softmax", learner=js.anneal.PiecewiseLinear(4), polish=js.anneal.Polish(refine=1))
    with pytest.raises(ValueError, match="the polish"):
        js.fsa(X, y, K, loss="softmax", polish=js.anneal.Polish(enabled=False, refine=1))
    with pytest.raises(ValueError, match="in memory"):
        js.fsa(lambda: iter([(X, y)]), y, K, loss="softmax", polish=js.anneal.Polish(refine=1))
    with pytest.raises(ValueError, match="no L1 polish"):
        js.fsa(X, y, K, loss="softmax", polish=js.anneal.Polish(l1=0.01, refine=1))
    with pytest.raises(ValueError, match="refine"):
        js.fsa(X, y, K, loss="softmax", polish=js.anneal.Polish(refine=-1))
