"""FSA's data-dependent defaults (``"auto"``, :mod:`jaxselect.anneal.defaults`) and ``js.FSA_PAPER``.

Each default is checked against its explicit spelling (the same fit), ``scale="auto"``'s
column factors against a numpy computation of the rule, and the count-data default
(``log1p`` + ridge) against a fit on counts mapped by ``np.log1p`` by hand.
"""

import jax
import numpy as np
import pytest
import scipy.sparse as sp

import jaxselect as js
from jaxselect.anneal import defaults
from jaxselect.anneal.scaling import has_indicator_columns, is_count_data, rescale_design

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
    old = js.fsa(X, y, 4, loss="logistic", scale="std", l2=0.0, n_iter=500, polish=PLAIN)
    assert new.transform is None
    np.testing.assert_array_equal(np.asarray(new.support), np.asarray(old.support))
    np.testing.assert_array_equal(np.asarray(new.coef), np.asarray(old.coef))
    assert new.loss_path.shape == (500,)


def test_sparse_defaults_are_their_explicit_spelling():
    X, y = _mixed(3)
    Xs = sp.csr_matrix(X)
    auto = js.fsa(Xs, y, 5, loss="logistic")
    explicit = js.fsa(Xs, y, 5, loss="logistic", scale="auto", l2=0.0, n_iter=500,
                      polish=js.anneal.Polish(l1=1.0 / len(y), refine=1))
    assert auto.transform is None and not is_count_data(Xs)  # real columns: not counts, no ridge
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


# --------------------------------------------------------------------------- sparse count data
N_C, M_C, K_C, IT = 120, 60, 4, 60


def _counts(seed=10, n=N_C, m=M_C):
    """Sparse raw counts (a bag of words: Poisson counts on ~15 % of the entries) and labels from
    the log counts of columns 0-3."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(3.0, size=(n, m)) * (rng.uniform(size=(n, m)) < 0.15)
    score = np.log1p(counts[:, :4]) @ np.array([2.0, -2.0, 1.5, -1.5])
    y = (score + 0.3 * rng.normal(size=n) > np.median(score)).astype(np.float32)
    return sp.csr_matrix(counts.astype(np.float32)), y


def _log1p(X):
    L = sp.csr_matrix(X, dtype=np.float32, copy=True)
    L.data = np.log1p(L.data)
    return L


def test_count_data_detection():
    X, _ = _counts()
    assert is_count_data(X) and is_count_data(X.astype(np.int64)) and is_count_data(X.tocoo())
    from jax.experimental import sparse as jsparse

    assert is_count_data(jsparse.BCOO.from_scipy_sparse(X))
    assert not is_count_data(X.toarray())  # dense X: never
    binary = X.copy()
    binary.data[:] = 1.0
    assert not is_count_data(binary)  # 0/1 indicators
    for value in (-1.0, 2.5):  # one negative or fractional stored value
        bad = X.copy()
        bad.data[0] = value
        assert not is_count_data(bad)
        w = np.ones(X.shape[0])
        w[bad.nonzero()[0][0]] = 0.0  # ... on a row of weight 0: counts again
        assert is_count_data(bad, w)
    few = binary.tolil()
    few[:, 0] = np.arange(X.shape[0])[:, None] % 4  # one count column among indicators
    assert not is_count_data(few.tocsr())
    d = js.datasets.make_url_like(400, 3000, nnz_per_row=20, n_informative=50, n_dense=4)
    u = js.datasets.make_url_like(400, 3000, nnz_per_row=20, n_informative=50, n_dense=0)
    assert not is_count_data(d.X_train) and not is_count_data(u.X_train)  # the URL-like defaults stay


def test_counts_fit_on_log1p_with_the_ridge_and_predict_through_it():
    X, y = _counts()
    res = js.fsa(X, y, K_C, loss="logistic", n_iter=IT)  # scale, l2 and the polish at "auto"
    assert res.transform == "log1p"
    ref = js.fsa(_log1p(X), y, K_C, loss="logistic", scale="std", l2=8.0 * K_C / N_C, n_iter=IT)  # by hand
    assert ref.transform is None
    np.testing.assert_array_equal(np.asarray(res.support), np.asarray(ref.support))
    np.testing.assert_array_equal(np.asarray(res.coef), np.asarray(ref.coef))
    # predictions map the new X: sparse or dense, against numpy on log1p(X)
    Xt, _ = _counts(seed=11)
    S = np.asarray(res.support)
    expect = np.log1p(Xt.toarray()[:, S]) @ np.asarray(res.coef, np.float64) + float(res.intercept)
    np.testing.assert_allclose(np.asarray(js.predict(res, Xt)), expect, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(js.predict(res, Xt.toarray())), expect, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(js.predict(ref, _log1p(Xt))), expect, rtol=1e-5, atol=1e-5)
    # a hand-built result without the field predicts on X as given
    plain = js.FSAResult(*res[:11])
    assert plain.transform is None
    np.testing.assert_allclose(np.asarray(js.predict(plain, Xt)), Xt.toarray()[:, S] @ np.asarray(res.coef)
                               + float(res.intercept), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="transform"):
        js.predict(res._replace(transform="exp"), Xt)
    # explicit options are honoured: scale="std" maps nothing (and then no ridge); l2 the user's
    std = js.fsa(X, y, K_C, loss="logistic", scale="std", n_iter=IT)
    raw = js.fsa(X, y, K_C, loss="logistic", scale="std", l2=0.0, n_iter=IT)
    assert std.transform is None
    np.testing.assert_array_equal(np.asarray(std.coef), np.asarray(raw.coef))
    mine = js.fsa(X, y, K_C, loss="logistic", l2=0.5, n_iter=IT)
    hand = js.fsa(_log1p(X), y, K_C, loss="logistic", scale="std", l2=0.5, n_iter=IT)
    assert mine.transform == "log1p"
    np.testing.assert_array_equal(np.asarray(mine.coef), np.asarray(hand.coef))
    assert js.FSA_PAPER["scale"] == "std" and js.FSA_PAPER["l2"] == 0.0  # the paper: no map, no ridge


def test_log1p_on_dense_x_and_the_squared_loss_without_ridge():
    X, _ = _counts()
    D, L = X.toarray(), _log1p(X).toarray()
    t = L[:, 0] - L[:, 2]
    dense = js.fsa(D, t, 2, scale="log1p", n_iter=IT, polish=PLAIN)  # l2="auto": no ridge (squared loss)
    hand = js.fsa(L, t, 2, scale="std", l2=0.0, n_iter=IT, polish=PLAIN)
    assert dense.transform == "log1p" and js.fsa(D, t, 2, n_iter=IT, polish=PLAIN).transform is None
    np.testing.assert_allclose(np.asarray(dense.coef), np.asarray(hand.coef), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(js.predict(dense, D)), np.asarray(js.predict(hand, L)), rtol=1e-5, atol=1e-5)


def test_counts_ridge_counts_the_weights_and_cv_maps_each_fold():
    X, y = _counts()
    X = X.copy()
    X.data[0] = 0.5  # a fractional value on row 0 ...
    w = np.ones(N_C, np.float32)
    w[::4] = 0.0  # ... of weight 0: counts on the other rows, N_w = 90 for the ridge
    res = js.fsa(X, y, K_C, loss="logistic", sample_weight=w, n_iter=IT)
    hand = js.fsa(_log1p(X), y, K_C, loss="logistic", scale="std", l2=8.0 * K_C / 90, sample_weight=w, n_iter=IT)
    assert res.transform == "log1p"
    np.testing.assert_array_equal(np.asarray(res.coef), np.asarray(hand.coef))
    # cross_validate_fsa: each fold's fit and held-out score on log1p, the ridge of its 80 rows
    X, y = _counts()
    folds = [(np.flatnonzero(np.arange(N_C) % 3 != f), np.flatnonzero(np.arange(N_C) % 3 == f)) for f in range(3)]
    cv = js.cross_validate_fsa(X, y, [K_C], folds=folds, loss="logistic", n_iter=IT)
    by_hand = js.cross_validate_fsa(_log1p(X), y, [K_C], folds=folds, loss="logistic", n_iter=IT, scale="std",
                                    l2=8.0 * K_C / 80)
    np.testing.assert_array_equal(cv.scores, by_hand.scores)


def test_counts_estimator_round_trip(monkeypatch):
    pytest.importorskip("sklearn")
    import pickle

    from jaxselect.sklearn import FSAClassifier

    monkeypatch.setenv("JAXSELECT_SHAPE_BUCKETS", "0")  # X as given: the programs of the direct fits above
    X, y = _counts()
    labels = np.where(y > 0, "pos", "neg")
    clf = FSAClassifier(k=K_C, n_iter=IT).fit(X, labels)
    direct = js.fsa(X, y, K_C, loss="logistic", n_iter=IT)
    assert clf.get_params()["l2"] == "auto" and clf.result_.transform == "log1p"
    np.testing.assert_array_equal(clf.get_support(indices=True), np.sort(np.asarray(direct.support)))
    Xt, _ = _counts(seed=12)
    expect = np.asarray(js.predict(direct, Xt), np.float64)
    np.testing.assert_allclose(clf.decision_function(Xt), expect, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(clf.decision_function(Xt.toarray()), expect, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(clf.predict_proba(Xt)[:, 1], 1 / (1 + np.exp(-expect)), rtol=1e-4, atol=1e-5)
    assert (clf.predict(Xt) == np.where(expect > 0, "pos", "neg")).all()
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.decision_function(Xt), clf.decision_function(Xt))
    # the selector's transform selects X's columns as given
    np.testing.assert_array_equal(clf.transform(Xt).toarray(), Xt.toarray()[:, clf.get_support()])


@pytest.mark.parametrize("bad", [{"scale": "log"}, {"scale": None}, {"l2": "Auto"}, {"l2": -1.0}])
def test_bad_scale_and_l2(bad):
    X, y = _counts()
    with pytest.raises((ValueError, TypeError)):
        js.fsa(X, y, 3, loss="logistic", n_iter=20, **bad)


def test_log1p_refuses_what_it_cannot_map(tmp_path):
    X, y = _counts()
    with pytest.raises(ValueError, match="piecewise-linear"):
        js.fsa(X.toarray(), y, 2, loss="logistic", scale="log1p", learner=js.PiecewiseLinear(bins=3))
    with pytest.raises(TypeError, match="concrete"):
        jax.jit(lambda A: js.fsa(A, y, 2, loss="logistic", scale="log1p").coef)(X.toarray())
    path = tmp_path / "X.npy"
    np.save(path, X.toarray())
    with pytest.raises(TypeError, match="streams"):
        js.fsa(np.load(path, mmap_mode="r"), y, 2, loss="logistic", scale="log1p")
