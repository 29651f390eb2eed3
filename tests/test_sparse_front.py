"""Sparse X at the front: predictions, refits, cross-validation, the greedy families and the
scikit-learn estimators give the dense answer on sparse input, or refuse it with a clear message.

The reference for every sparse call is the same call on ``X.toarray()`` (each format: scipy
CSR/CSC/COO, a ``csr_array``, a jax BCOO where the function takes it). Small problems, cheap
compiles: the suite's budget is seconds.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from jax.experimental import sparse as jsparse

import jaxselect as js
from jaxselect.design import sparse as sparse_module


N, D = 60, 8
FORMATS = [sp.csr_matrix, sp.csc_matrix, sp.coo_matrix, sp.csr_array]
FORMAT_IDS = ["csr", "csc", "coo", "csr_array"]


def _data():
    """(N, D) float32, about half of the entries zero; y depends on columns 1 and 4."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D)) * (rng.uniform(size=(N, D)) < 0.55)
    X[:, 1] = rng.normal(size=N)  # two dense informative columns
    X[:, 4] = rng.normal(size=N) * (rng.uniform(size=N) < 0.8)
    y = 2.0 * X[:, 1] - 1.5 * X[:, 4] + 0.1 * rng.normal(size=N)
    w = rng.uniform(0.5, 2.0, size=N)
    return X.astype(np.float32), y.astype(np.float32), w.astype(np.float32)


X, Y, W = _data()
LABELS = (Y > 0).astype(np.int32)


def _close(a, b, atol=1e-4):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, atol=atol, rtol=1e-4)


# ---------------------------------------------------------------------------------------------
# js.predict


@pytest.fixture(scope="module")
def fitted():
    """Results fitted on dense X (the predictions are then compared on sparse and dense X)."""
    path = js.cs_omp(js.prepare(X, Y), k=4)
    return {
        "path": path,
        "slot_path": js.cs_omp(js.prepare(X, Y, gram=False), k=3),
        "glm": js.glm_omp(X, LABELS, k=3),
        "softmax": js.glm_omp(X, np.digitize(Y, [-1.0, 1.0]), loss="softmax", k=2),
        "rls": js.greedy_rls(X, Y, 3),
        "fsa": js.fsa(X, Y, 2, n_iter=30),
        "fsa_pl": js.fsa(X, Y, 2, n_iter=30, bins=4),
        "lasso": js.group_lasso(js.prepare(X, Y), lambdas=np.array([0.1, 0.01], np.float32)),
    }


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_predict_sparse_equals_dense(fitted, fmt):
    Xs = fmt(X)
    for name in ("path", "slot_path", "rls"):
        for budget in (None, 0.0, 1.0, 2.5, 100.0):
            _close(js.predict(fitted[name], Xs, budget), js.predict(fitted[name], X, budget))
    for name in ("glm", "softmax"):
        for budget in (None, 1.0):
            _close(js.predict(fitted[name], Xs, budget, link=True), js.predict(fitted[name], X, budget, link=True))
    for name in ("fsa", "fsa_pl", "lasso"):
        _close(js.predict(fitted[name], Xs), js.predict(fitted[name], X))


def test_predict_sparse_bcoo_and_errors(fitted):
    _close(js.predict(fitted["path"], jsparse.BCOO.fromdense(X), 2.0), js.predict(fitted["path"], X, 2.0))
    with pytest.raises(ValueError, match="columns but the model was trained on 8"):
        js.predict(fitted["path"], sp.csr_matrix(X[:, :5]))
    bad = sp.csr_matrix(X)
    bad.data[3] = np.nan
    with pytest.raises(ValueError, match="NaN or Inf in row"):
        js.predict(fitted["fsa"], bad)
    with pytest.raises(ValueError, match="budget must be None"):
        js.predict(fitted["fsa"], sp.csr_matrix(X), budget=1.0)
    with pytest.raises(TypeError, match="a CVResult holds"):
        js.predict(js.cross_validate_path(X, Y, folds=3, k=2), sp.csr_matrix(X))


def test_predict_dwsm_refuses_sparse():
    from jaxselect.dwsm.policy import DWSMPolicy

    policy = DWSMPolicy(*[None] * len(DWSMPolicy._fields))  # refused on X's type before anything is read
    with pytest.raises(TypeError, match="DWSM policy does not predict on sparse X.*toarray"):
        js.predict(policy, sp.csr_matrix(X))


# ---------------------------------------------------------------------------------------------
# Refits: only the support's columns are densified


@pytest.mark.parametrize(
    "fmt, weighted",
    [(sp.csr_matrix, False), (sp.csc_matrix, True), (sp.coo_matrix, True)],
    ids=["csr", "csc-weighted", "coo-weighted"],
)
def test_refits_sparse_equal_dense(fmt, weighted):
    w = W if weighted else None
    Xs = fmt(X)
    support = np.array([False, True, False, True, True, False, False, True])
    for sup in (support, None, np.zeros(D, bool)):
        a, b = js.ridge_refit(X, Y, sup, l2=1e-3, sample_weight=w), js.ridge_refit(Xs, Y, sup, l2=1e-3, sample_weight=w)
        _close(b[0], a[0])
        _close(b[1], a[1])
    selected = np.array([4, -1, 1])
    a = js.rls_refit(X, Y, selected, l2=1e-3, bias=1.0, sample_weight=w)
    b = js.rls_refit(Xs, Y, selected, l2=1e-3, bias=1.0, sample_weight=w)
    _close(b[0], a[0])
    _close(b[1], a[1])
    a = js.glm_refit(X, LABELS, support, l2=1e-2, sample_weight=w)
    b = js.glm_refit(Xs, LABELS, support, l2=1e-2, sample_weight=w)
    _close(b.coef, a.coef, atol=1e-3)
    _close(b.intercept, a.intercept, atol=1e-3)
    assert int(b.status) == 0


def test_refit_softmax_sparse_and_traced_support_refused():
    labels = np.digitize(Y, [-1.0, 1.0])
    support = np.array([True, True, False, False, True, False, False, False])
    a = js.glm_refit(X, labels, support, loss="softmax", l2=1e-2)
    b = js.glm_refit(sp.csr_matrix(X), labels, support, loss="softmax", l2=1e-2)
    _close(b.coef, a.coef, atol=1e-3)
    Xs = sp.csr_matrix(X)
    with pytest.raises(ValueError, match="with sparse X the support must be concrete"):
        jax.jit(lambda s: js.ridge_refit(Xs, Y, s)[1])(jnp.asarray(support))
    with pytest.raises(ValueError, match="selected must be concrete"):
        jax.jit(lambda s: js.rls_refit(Xs, Y, s)[1])(jnp.array([1, 4]))


# ---------------------------------------------------------------------------------------------
# greedy RLS and GLM OMP: densified when n·d is small, refused above; DWSM refuses


def test_greedy_rls_and_glm_omp_sparse_equal_dense():
    Xs = sp.csc_matrix(X)
    a, b = js.greedy_rls(X, Y, 3, sample_weight=W), js.greedy_rls(Xs, Y, 3, sample_weight=W)
    np.testing.assert_array_equal(b.selected, a.selected)
    _close(b.coef, a.coef)
    a, b = js.glm_omp(X, LABELS, k=3), js.glm_omp(sp.coo_matrix(X), LABELS, k=3)
    np.testing.assert_array_equal(b.order, a.order)
    _close(b.coef, a.coef, atol=1e-3)


def test_dense_state_families_refuse_large_sparse(monkeypatch):
    monkeypatch.setattr(sparse_module, "SPARSE_DENSIFY_LIMIT", N * D - 1)  # read by densify_sparse
    Xs = sp.csr_matrix(X)
    with pytest.raises(ValueError, match=r"greedy_rls keeps the dual state C = G X.*use jaxselect.fsa"):
        js.greedy_rls(Xs, Y, 2)
    with pytest.raises(ValueError, match=r"glm_omp keeps the whitened design.*loss='logistic'"):
        js.glm_omp(Xs, LABELS, k=2)


def test_dwsm_refuses_sparse():
    with pytest.raises(TypeError, match="dwsm_fit does not run on sparse X.*toarray"):
        js.dwsm_fit(jax.random.key(0), sp.csr_matrix(X), LABELS)
    from jaxselect.dwsm.mdp import make_spec
    from jaxselect.dwsm.problem import rcpi_problem

    with pytest.raises(TypeError, match="rcpi_problem does not run on sparse X"):
        rcpi_problem(make_spec(D, 2), sp.csr_matrix(X), LABELS)


# ---------------------------------------------------------------------------------------------
# Cross-validation on sparse X: the folds' weights of the same X, one fold after the other


def test_cross_validate_path_sparse_equals_dense():
    a = js.cross_validate_path(X, Y, folds=3, k=3)
    b = js.cross_validate_path(sp.csr_matrix(X), Y, folds=3, k=3)
    np.testing.assert_array_equal(b.fold_order, a.fold_order)
    np.testing.assert_allclose(b.grid, a.grid, rtol=1e-5)
    _close(b.scores, a.scores, atol=1e-3)
    assert b.best == a.best


def test_cross_validate_fsa_sparse_equals_dense():
    a = js.cross_validate_fsa(X, Y, [1, 2], folds=3, n_iter=30, sample_weight=W)
    b = js.cross_validate_fsa(sp.csc_matrix(X), Y, [1, 2], folds=3, n_iter=30, sample_weight=W)
    _close(b.scores, a.scores, atol=1e-3)
    assert b.best == a.best
    with pytest.raises(ValueError, match=r"piecewise-linear learners \(bins\) do not run on sparse X.*bins=None"):
        js.cross_validate_fsa(sp.csr_matrix(X), Y, [1], folds=3, bins=4)


# ---------------------------------------------------------------------------------------------
# scikit-learn estimators


sk = pytest.importorskip("sklearn")
def test_load_dexter_sparse_is_the_dense_data_and_fsa_agrees():
    """``load_dexter(sparse=True)`` is the dense data as float32 CSR; FSA on both picks the same words."""
    dense, csr = js.datasets.load_dexter(), js.datasets.load_dexter(sparse=True)
    assert sp.issparse(csr.X) and csr.X.format == "csr" and csr.X.dtype == np.float32
    np.testing.assert_array_equal(csr.X.toarray(), dense.X.astype(np.float32))
    np.testing.assert_array_equal(csr.y, dense.y)
    rows = np.arange(0, 300, 2)
    # counts: the map of sparse counts (scale="auto" there) on both, and the same polish
    opts = {"loss": "logistic", "l2": 3.0, "n_iter": 100, "scale": "log1p", "polish": js.anneal.Polish(l1=None, refine=0)}
    a = js.fsa(csr.X[rows], csr.y[rows], 10, **opts)
    b = js.fsa(dense.X[rows].astype(np.float32), dense.y[rows], 10, **opts)
    np.testing.assert_array_equal(np.asarray(a.support), np.asarray(b.support))
    np.testing.assert_allclose(np.asarray(a.coef), np.asarray(b.coef), rtol=2e-3, atol=1e-4)


from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402

from jaxselect.sklearn import (  # noqa: E402
    DWSMClassifier,
    FSAClassifier,
    FSARegressor,
    FSARegressorCV,
    GreedyRLSRegressor,
    GroupSequencingClassifier,
    GroupSequencingRegressor,
    GroupSequencingRegressorCV,
)


def _same_fit(make, y, formats=(sp.csr_matrix, sp.csc_matrix, sp.coo_matrix), atol=1e-4):
    """Fit ``make()`` on dense X and on X in each sparse format: same support and coefficients, same
    predictions and transform (sparse for sparse input); returns the last sparse fit."""
    dense = make().fit(X, y)
    score = "decision_function" if hasattr(dense, "decision_function") else "predict"
    for fmt in formats:
        sparse = make().fit(fmt(X), y)
        assert sparse.__sklearn_tags__().input_tags.sparse
        np.testing.assert_array_equal(sparse.get_support(), dense.get_support())
        _close(sparse.coef_, dense.coef_, atol=atol)
        _close(getattr(sparse, score)(fmt(X)), getattr(dense, score)(X), atol=atol)
        _close(getattr(dense, score)(fmt(X)), getattr(dense, score)(X), atol=atol)
        reduced = sparse.transform(fmt(X))
        assert sp.issparse(reduced)
        _close(reduced.toarray(), dense.transform(X))
    return sparse


def test_greedy_and_glm_estimators_sparse_equal_dense():
    _same_fit(lambda: GreedyRLSRegressor(k=3), Y)
    _same_fit(lambda: GroupSequencingClassifier(k=3), LABELS, atol=1e-3)


def test_fsa_and_sequencing_estimators_sparse_equal_dense():
    # (the dense defaults pinned: on sparse X "auto" adds a refinement round and, for labels, the L1 polish)
    _same_fit(lambda: FSARegressor(k=2, n_iter=30, l1=None, refine=0), Y, atol=1e-3)
    _same_fit(lambda: FSAClassifier(k=2, n_iter=30, l1=None, refine=0), LABELS, atol=1e-3)
    _same_fit(lambda: GroupSequencingRegressor(k=3, budget=2.0), Y)


def test_cv_estimators_sparse_equal_dense():
    one = (sp.csr_matrix,)
    est = _same_fit(lambda: GroupSequencingRegressorCV(cv=3, k=3), Y, one)
    assert est.budget_ == GroupSequencingRegressorCV(cv=3, k=3).fit(X, Y).budget_
    est = _same_fit(lambda: FSARegressorCV(ks=[1, 2], cv=3, n_iter=30, l1=None, refine=0), Y, one, atol=1e-3)
    assert est.k_ == FSARegressorCV(ks=[1, 2], cv=3, n_iter=30, l1=None, refine=0).fit(X, Y).k_


def test_estimator_refusals():
    Xs = sp.csr_matrix(X)
    assert not DWSMClassifier().__sklearn_tags__().input_tags.sparse
    with pytest.raises(TypeError, match="dense data is required"):
        DWSMClassifier(n_iter=1).fit(Xs, LABELS)
    for est in (FSARegressor(k=2, bins=4), FSARegressorCV(ks=[1], bins=4)):
        with pytest.raises(ValueError, match=r"bins=4\): piecewise-linear learners do not run on sparse X.*bins=None"):
            est.fit(Xs, Y)


def _documents(n: int = 48, seed: int = 0):
    """Short generated documents: filler words plus two words of the label's vocabulary."""
    rng = np.random.default_rng(seed)
    filler = [f"word{i}" for i in range(30)]
    vocab = (["awful", "poor", "dull"], ["great", "superb", "lovely"])
    labels = np.arange(n) % 2
    docs = [" ".join(list(rng.choice(filler, size=6)) + list(rng.choice(vocab[c], size=2))) for c in labels]
    return docs, labels, vocab


def test_pipeline_after_tfidf():
    docs, labels, vocab = _documents()
    pipe = make_pipeline(TfidfVectorizer(), FSAClassifier(k=4, n_iter=50)).fit(docs, labels)
    assert np.mean(pipe.predict(docs) == labels) > 0.9
    words = set(pipe[0].get_feature_names_out()[pipe[1].get_support()])
    assert words & set(vocab[0] + vocab[1])
    pipe = make_pipeline(TfidfVectorizer(), FSAClassifier(k=4, n_iter=50), LogisticRegression()).fit(docs, labels)
    assert pipe.score(docs, labels) > 0.9  # the selector's transform hands a sparse matrix on
    target = labels + 0.1 * np.random.default_rng(1).normal(size=labels.size)
    reg = make_pipeline(TfidfVectorizer(), GroupSequencingRegressor(k=4)).fit(docs, target)
    assert reg.score(docs, target) > 0.8


def test_sparse_weights_equal_repeated_rows():
    """Integer weights on sparse X give the fit on the repeated rows (a determined problem)."""
    counts = np.random.default_rng(3).integers(0, 3, size=N)
    Xr, Yr = sp.csr_matrix(np.repeat(X, counts, axis=0)), np.repeat(Y, counts)
    for make in (lambda: FSARegressor(k=2, n_iter=30), lambda: GroupSequencingRegressor(k=3)):
        weighted = make().fit(sp.csr_matrix(X), Y, sample_weight=counts.astype(np.float32))
        repeated = make().fit(Xr, Yr)
        np.testing.assert_array_equal(weighted.get_support(), repeated.get_support())
        _close(weighted.predict(sp.csr_matrix(X)), repeated.predict(sp.csr_matrix(X)), atol=1e-3)


def test_estimators_count_live_sparse_columns_as_the_data_layer_does():
    """The estimators' blockwise count of non-constant sparse columns (no CSC copy of X) equals the
    data layer's summary, with and without row weights, on all-zero, full and mixed columns."""
    from jaxselect.design import HostSparseDesign
    from jaxselect.sklearn._base import _sparse_live

    rng = np.random.default_rng(0)
    for t in range(30):
        n, d = int(rng.integers(3, 40)), int(rng.integers(1, 30))
        M = sp.random(n, d, density=rng.uniform(0, 1), format="lil", random_state=t, dtype=np.float32)
        for j in range(d):
            kind = rng.integers(4)
            if kind == 0:
                M[:, j] = 2.0  # stored in every row, constant
            elif kind == 1:
                M[:, j] = 0.0  # empty
        M = sp.csr_matrix(M, dtype=np.float32)
        w = None if t % 2 else (rng.uniform(size=n) < 0.7).astype(np.float32)
        if w is not None:
            w[:2] = 1.0
        expected = np.asarray(HostSparseDesign.raw(M).summarize(w)[0].live)
        np.testing.assert_array_equal(_sparse_live(M, w, block=7), expected)
