"""FSA's data-dependent defaults (``"auto"``, :mod:`jaxselect.anneal.defaults`) and ``js.FSA_PAPER``.

Each default is checked against its explicit spelling (the same fit), and ``scale="auto"``'s
column factors against a numpy computation of the rule.
"""

import numpy as np
import pytest
import scipy.sparse as sp

import jaxselect as js
from jaxselect.anneal import defaults
from jaxselect.anneal.scaling import has_indicator_columns, rescale_design

PLAIN = js.anneal.Polish(l1=None, refine=0)


def _mixed(seed=0, n=240):
    """Dense X: 6 real columns, 6 0/1 indicators (rare and common), 4 counts; a logistic truth."""
    rng = np.random.default_rng(seed)
    real = rng.normal(size=(n, 6))
    flags = (rng.uniform(size=(n, 6)) < np.array([0.03, 0.1, 0.2, 0.3, 0.5, 0.05])).astype(float)
    counts = rng.poisson(0.4, size=(n, 4)).astype(float)
    X = np.hstack([real, flags, counts]).astype(np.float32)
    score = X[:, 0] - X[:, 2] + 2 * X[:, 8] - 2 * X[:, 9] + X[:, 13]
    y = (score + 0.3 * rng.normal(size=n) > np.median(score)).astype(np.float32)
    return X, y


def _factors(X, scale):
    data = js.as_data(X, targets=None, constant_columns="inert")
    return np.asarray(rescale_design(data.design, None, scale).factor)


def test_auto_scale_is_sparse_on_indicators_and_std_elsewhere():
    X, _ = _mixed()
    std, sparse_rule, auto = _factors(X, "std"), _factors(X, "sparse"), _factors(X, "auto")
    stored = X != 0
    indicator = np.array([len(np.unique(X[stored[:, j], j])) == 1 for j in range(X.shape[1])]) & ~stored.all(0)
    assert indicator.tolist() == [False] * 6 + [True] * 6 + [False] * 4
    fill = stored.mean(0)
    np.testing.assert_allclose(auto, np.where(indicator, std * np.sqrt(fill), std), rtol=1e-6)
    np.testing.assert_allclose(auto[indicator], sparse_rule[indicator], rtol=1e-6)
    np.testing.assert_allclose(auto[~indicator], std[~indicator], rtol=1e-6)
    # the same factors from the sparse storage of X
    np.testing.assert_allclose(_factors(sp.csr_matrix(X), "auto"), auto, rtol=1e-5)
    assert has_indicator_columns(X) and not has_indicator_columns(X[:, :6])


def test_auto_scale_ignores_weight_zero_rows_when_finding_indicators():
    X, _ = _mixed(1)
    X = X.copy()
    X[-1, 6] = 5.0  # column 6 stops being an indicator on that row only
    w = np.ones(len(X), np.float32)
    w[-1] = 0.0
    data = js.as_data(X, targets=None, constant_columns="inert", sample_weight=w)
    flags = np.asarray(js.anneal.scaling.indicator_columns(data.design, data.weights))
    assert flags[6] and not np.asarray(js.anneal.scaling.indicator_columns(data.design))[6]


def test_dense_real_data_keep_the_old_defaults_exactly():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(150, 40)).astype(np.float32)
    y = (X[:, 3] - 2 * X[:, 7] + 0.5 * rng.normal(size=150) > 0).astype(np.float32)
    new = js.fsa(X, y, 4, loss="logistic")
    old = js.fsa(X, y, 4, loss="logistic", scale="std", n_iter=500, polish=PLAIN)
    np.testing.assert_array_equal(np.asarray(new.support), np.asarray(old.support))
    np.testing.assert_array_equal(np.asarray(new.coef), np.asarray(old.coef))
    assert new.loss_path.shape == (500,)


def test_sparse_defaults_are_their_explicit_spelling():
    X, y = _mixed(3)
    Xs = sp.csr_matrix(X)
    auto = js.fsa(Xs, y, 5, loss="logistic")
    explicit = js.fsa(Xs, y, 5, loss="logistic", scale="auto", n_iter=500,
                      polish=js.anneal.Polish(l1=1.0 / len(y), refine=1))
    np.testing.assert_array_equal(np.asarray(auto.support), np.asarray(explicit.support))
    np.testing.assert_allclose(np.asarray(auto.coef), np.asarray(explicit.coef), rtol=1e-6)
    # the squared loss: refinement, no L1 polish
    sq = js.fsa(Xs, X[:, 0] - X[:, 8], 3)
    sq_explicit = js.fsa(Xs, X[:, 0] - X[:, 8], 3, polish=js.anneal.Polish(l1=None, refine=1))
    np.testing.assert_allclose(np.asarray(sq.coef), np.asarray(sq_explicit.coef), rtol=1e-6)


def test_l1_default_counts_weights_so_integer_weights_equal_repeated_rows():
    X, y = _mixed(4, n=120)
    rng = np.random.default_rng(0)
    w = rng.integers(0, 3, size=len(y)).astype(np.float32)
    rep = np.repeat(np.arange(len(y)), w.astype(int))
    weighted = js.fsa(sp.csr_matrix(X), y, 4, loss="logistic", n_iter=60, sample_weight=w)
    repeated = js.fsa(sp.csr_matrix(X[rep]), y[rep], 4, loss="logistic", n_iter=60)
    np.testing.assert_array_equal(np.asarray(weighted.support), np.asarray(repeated.support))
    np.testing.assert_allclose(np.asarray(weighted.coef), np.asarray(repeated.coef), rtol=2e-3, atol=2e-4)


def test_large_sparse_x_runs_30_iterations(monkeypatch):
    X, y = _mixed(5)
    Xs = sp.csr_matrix(X)
    monkeypatch.setattr(defaults, "LARGE_SPARSE", Xs.nnz - 1)
    res = js.fsa(Xs, y, 4, loss="logistic")
    assert res.loss_path.shape == (30,)
    assert js.fsa(X, y, 4, loss="logistic").loss_path.shape == (500,)  # a dense X: the paper's 500


def test_fsa_paper_is_algorithm_1_on_standardised_columns():
    X, y = _mixed(6)
    paper = js.fsa(sp.csr_matrix(X), y, 4, loss="logistic", **js.FSA_PAPER)
    explicit = js.fsa(X, y, 4, loss="logistic", scale="std", l2=0.0, n_iter=500, mu=300.0, polish=False)
    np.testing.assert_array_equal(np.asarray(paper.support), np.asarray(explicit.support))
    np.testing.assert_allclose(np.asarray(paper.coef), np.asarray(explicit.coef), rtol=2e-3, atol=2e-4)
    with pytest.raises(TypeError):
        js.FSA_PAPER["n_iter"] = 10  # read-only


def test_estimators_and_cv_take_the_same_defaults():
    pytest.importorskip("sklearn")
    from jaxselect.sklearn import FSAClassifier

    X, y = _mixed(7)
    Xs = sp.csr_matrix(X)
    clf = FSAClassifier(k=4).fit(Xs, y)
    direct = js.fsa(Xs, y, 4, loss="logistic")
    np.testing.assert_array_equal(clf.get_support(indices=True), np.sort(np.asarray(direct.support)))
    order = np.argsort(np.asarray(direct.support))
    np.testing.assert_allclose(clf.coef_[clf.get_support()], np.asarray(direct.coef)[order], rtol=2e-3, atol=1e-4)
    # dense real data: "auto" runs the vmapped folds, the same scores as scale="std"
    G = np.random.default_rng(8).normal(size=(120, 12)).astype(np.float32)
    t = G[:, 1] - G[:, 4]
    a = js.cross_validate_fsa(G, t, [2, 3], n_iter=40)
    b = js.cross_validate_fsa(G, t, [2, 3], n_iter=40, scale="std")
    np.testing.assert_array_equal(a.scores, b.scores)


@pytest.mark.parametrize("bad", ["Auto", "", None])
def test_bad_auto_spellings(bad):
    X, y = _mixed(9)
    with pytest.raises((ValueError, TypeError)):
        js.fsa(X, y, 3, loss="logistic", n_iter=bad)
