"""Shape buckets (issue 35 item 2): nearby data shapes share compiled programs, and padding changes
no result. Every estimator pads X's rows to their bucket — zero rows of weight 0 (and a sparse
X's stored entries) — and greedy RLS and FSA's linear learners also its columns (zero columns,
never selectable; FSA's schedule anneals from X's own columns, ``Execution.padded_columns``), so
a second fit on a nearby shape compiles nothing, and every fit equals the unpadded one (with
``JAXSELECT_SHAPE_BUCKETS=0``). The predictions that compile (DWSM's episodes, FSA's
piecewise-linear learners) pad the rows they predict."""

import numpy as np
import pytest
import scipy.sparse as sp
from compile_count import count_compiles

from jaxselect.design.buckets import bucket, bucket_rows, pad_columns, pad_design, pad_rows
from jaxselect.dwsm.problem import RCPIOptions
from jaxselect.sklearn import (
    DWSMClassifier,
    FSAClassifier,
    FSARegressor,
    GreedyRLSRegressor,
    GroupSequencingClassifier,
    GroupSequencingRegressor,
    GroupSequencingRegressorCV,
)
from jaxselect.sklearn.dwsm import _padding_keeps_draws


def test_buckets_are_few_and_tight():
    sizes = np.arange(1, 5000)
    buckets = np.array([bucket(int(n)) for n in sizes])
    assert (buckets >= sizes).all() and (buckets <= np.maximum(32, sizes * 1.125)).all()
    assert len(np.unique(buckets)) <= 8 * 8 + 1  # eight per octave above 32
    assert all(bucket(int(b)) == b for b in np.unique(buckets))  # a bucket is its own bucket


def test_padding_dense_and_sparse_alike():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((45, 7)).astype(np.float32)
    y = rng.integers(0, 3, 45)
    Xp, yp, wp = pad_design(X, y)
    S, ys, ws = pad_design(sp.csr_matrix(X), y)
    assert Xp.shape == S.shape == (48, 32) and sp.issparse(S) and S.nnz == bucket(X.size) == 320
    np.testing.assert_array_equal(S.toarray()[:45], Xp[:45])
    assert (S.toarray()[45:] == 1).sum() == 320 - X.size  # the stored entries' filler: ones in rows of weight 0
    np.testing.assert_array_equal(Xp[:45, :7], X)
    assert not Xp[45:].any() and not Xp[:, 7:].any()
    assert yp.tolist() == y.tolist() + [y[0]] * 3 and ys.tolist() == yp.tolist()
    assert wp.tolist() == [1.0] * 45 + [0.0] * 3 and ws.tolist() == wp.tolist()
    w = np.linspace(0.5, 2.0, 45)
    assert pad_design(X, y, w)[2].tolist() == w.tolist() + [0.0] * 3
    exact = np.ones((32, 32), np.float32)
    assert pad_design(exact, y[:32])[0] is exact  # already a bucket: untouched
    assert pad_rows(X, 45) is X and pad_columns(X, 7) is X


def _data(n, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    y = (X[:, 1] - 2 * X[:, 4] + 0.5 * X[:, 6] + 0.2 * rng.standard_normal(n)).astype(np.float32)
    return X, y


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_fsa_estimators_on_nearby_shapes_share_programs_and_equal_the_unpadded_fit(sparse, monkeypatch):
    wrap = sp.csr_matrix if sparse else np.asarray
    X, y = _data(200, 37, 1)
    labels = np.where(y > 0, "yes", "no")
    X2, y2 = _data(205, 37, 2)  # the same row bucket (208); sparse: stored entries 7 400 and 7 585, one bucket
    labels2 = np.where(y2 > 0, "yes", "no")
    for make, target, target2 in ((lambda: FSARegressor(k=3, n_iter=60), y, y2), (lambda: FSAClassifier(k=3, n_iter=60), labels, labels2)):
        padded = make().fit(wrap(X), target)
        with count_compiles() as compiles:
            make().fit(wrap(X2), target2)
        assert compiles[0] == 0, f"{type(padded).__name__}: a nearby shape compiled {compiles[0]} programs"
        assert padded.coef_.shape[-1] == 37
        monkeypatch.setenv("JAXSELECT_SHAPE_BUCKETS", "0")
        plain = make().fit(wrap(X), target)
        monkeypatch.delenv("JAXSELECT_SHAPE_BUCKETS")
        assert padded.get_support().tolist() == plain.get_support().tolist()
        assert set(np.flatnonzero(plain.get_support())) == {1, 4, 6}
        np.testing.assert_allclose(padded.coef_, plain.coef_, rtol=2e-3, atol=2e-4)
        np.testing.assert_allclose(padded.intercept_, plain.intercept_, rtol=2e-3, atol=2e-4)
        np.testing.assert_allclose(padded.predict(wrap(X))[:20] if target is y else padded.decision_function(wrap(X)),
                                   plain.predict(wrap(X))[:20] if target is y else plain.decision_function(wrap(X)),
                                   rtol=2e-3, atol=2e-3)


def _fits(make, X, target, weights, monkeypatch):
    """(bucketed fit, unpadded fit) of ``make()`` on the same data."""
    padded = make().fit(X, target, sample_weight=weights)
    monkeypatch.setenv("JAXSELECT_SHAPE_BUCKETS", "0")
    plain = make().fit(X, target, sample_weight=weights)
    monkeypatch.delenv("JAXSELECT_SHAPE_BUCKETS")
    return padded, plain


_OTHER_FAMILIES = {
    "sequencing": (GroupSequencingRegressor, False),
    "sequencing_cv": (lambda: GroupSequencingRegressorCV(cv=3), False),
    "glm_omp": (GroupSequencingClassifier, True),
    "greedy_rls": (lambda: GreedyRLSRegressor(k=4, bias=1.0), False),
}


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("family", list(_OTHER_FAMILIES))
def test_sequencing_and_rls_estimators_pad_to_buckets(family, sparse, weighted, monkeypatch):
    """45 rows (bucket 48; greedy RLS: 7 columns, bucket 32), a constant column: the bucketed fit is
    the unpadded one — the same order or selection, coefficients to float32 rounding."""
    make, classifier = _OTHER_FAMILIES[family]
    wrap = sp.csr_matrix if sparse else np.asarray
    X, y = _data(45, 7, 3)
    X[:, 5] = 1.0
    target = np.where(y > 0, "yes", "no") if classifier else y
    w = np.random.default_rng(4).uniform(0.5, 2.0, 45).astype(np.float32) if weighted else None
    padded, plain = _fits(make, wrap(X), target, w, monkeypatch)
    if hasattr(plain, "order_"):
        assert padded.order_.tolist() == plain.order_.tolist()
        assert padded.path_.order.shape == plain.path_.order.shape
    else:
        assert padded.selected_.tolist() == plain.selected_.tolist()
        assert padded.coef_.shape == plain.coef_.shape == (7,)
    assert padded.get_support().tolist() == plain.get_support().tolist()
    # float32 sums over 45 or 48 (32 columns: 7) terms; in float64 greedy RLS's agree to 1e-13
    np.testing.assert_allclose(padded.coef_, plain.coef_, rtol=1e-4, atol=2e-4)
    np.testing.assert_allclose(padded.intercept_, plain.intercept_, rtol=1e-4, atol=2e-4)


@pytest.mark.parametrize("make", [GroupSequencingRegressor, lambda: GreedyRLSRegressor(k=3)], ids=["sequencing", "greedy_rls"])
def test_nearby_row_counts_compile_nothing(make):
    X, y = _data(200, 37, 1)
    X2, y2 = _data(205, 37, 2)  # one row bucket (208)
    make().fit(X, y)
    with count_compiles() as compiles:
        make().fit(X2, y2)
    assert compiles[0] == 0, f"a nearby row count compiled {compiles[0]} programs"


def test_sparse_lean_default_counts_the_rows_of_positive_weight():
    """A lazy (sparse) problem sequences by default as many groups as fit in its rows: the rows of
    positive weight, so rows of weight 0 (a bucket's padding) change nothing."""
    import jaxselect as js

    X, y = _data(20, 40, 5)
    w = np.ones(30, np.float32)
    w[20:] = 0.0
    Xw = sp.csr_matrix(np.vstack([X, np.zeros((10, 40), np.float32)]))
    yw = np.concatenate([y, np.zeros(10, np.float32)])
    plain = js.cs_omp(js.prepare(sp.csr_matrix(X), y))
    padded = js.cs_omp(js.prepare(Xw, yw, sample_weight=w))
    assert plain.n_steps == padded.n_steps == 20
    assert padded.order.tolist() == plain.order.tolist()


def _dwsm_data(n, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    X[:, 2] = 1.0
    return X, np.where(X[:, 1] - X[:, 4] > 0, "a", "b")


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_dwsm_pads_its_rows_where_the_draws_stay_the_same(weighted, monkeypatch):
    X, y = _dwsm_data(45, 7, 6)
    w = np.random.default_rng(7).uniform(0.5, 2.0, 45).astype(np.float32) if weighted else None
    padded, plain = _fits(lambda: DWSMClassifier(random_state=0, n_iter=3), X, y, w, monkeypatch)
    np.testing.assert_allclose(padded.policy_.theta, plain.policy_.theta, rtol=1e-5, atol=1e-6)
    assert (padded.acquired(X) == plain.acquired(X)).all()
    assert (padded.predict(X) == plain.predict(X)).all()
    assert padded.mean_features_ == pytest.approx(plain.mean_features_)
    X2, y2 = _dwsm_data(47, 7, 8)  # the same row bucket: the fit and its predictions compile nothing
    with count_compiles() as compiles:
        DWSMClassifier(random_state=0, n_iter=3).fit(X2, y2).predict(X2)
    assert compiles[0] == 0


def test_dwsm_padding_rule():
    """Padded only where RCPI's draws for the real rows do not change: both row counts sample
    ``n_states`` rows, or both use every row with every state rolled out for every unit."""
    opts = RCPIOptions()  # S = 10, n_states = 2048, acquisitions = 64
    assert _padding_keeps_draws(opts, 45, 48, 7)  # every row, every state rolled out
    assert _padding_keeps_draws(opts, 230, 240, 7)  # both sample 2 048 states
    assert not _padding_keeps_draws(opts, 200, 208, 7)  # 2 000 states vs sampling 2 048
    assert not _padding_keeps_draws(opts, 45, 48, 80)  # 80 units > 64 acquisitions: M follows n
    assert _padding_keeps_draws(opts, 48, 48, 80)


def test_bucket_rows_pads_dense_arrays_only():
    X = np.ones((33, 4), np.float32)
    assert bucket_rows(X).shape == (36, 4) and not bucket_rows(X)[33:].any()
    assert bucket_rows(X[:32]).shape == (32, 4)
    S = sp.csr_matrix(X)
    assert bucket_rows(S) is S


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_fsa_estimators_pad_columns_and_equal_the_unpadded_fit(sparse, monkeypatch):
    """37 columns (one constant) padded to 40: the schedule anneals from 37 (``n_kept`` equal), the
    support and coefficients are the unpadded fit's; 39 columns then compile nothing."""
    wrap = sp.csr_matrix if sparse else np.asarray
    X, y = _data(200, 37, 1)
    X[:, 9] = 2.0
    noisy = y + np.random.default_rng(9).standard_normal(200).astype(np.float32)
    for make, target in ((lambda: FSARegressor(k=3, n_iter=100), y), (lambda: FSAClassifier(k=3, n_iter=100), np.where(noisy > 0, "a", "b"))):
        padded, plain = _fits(make, wrap(X), target, None, monkeypatch)
        assert padded.get_support().tolist() == plain.get_support().tolist()
        assert padded.result_.n_features == 37
        np.testing.assert_array_equal(padded.result_.n_kept, plain.result_.n_kept)
        np.testing.assert_allclose(padded.coef_, plain.coef_, rtol=2e-3, atol=1e-3)
        np.testing.assert_allclose(padded.intercept_, plain.intercept_, rtol=2e-3, atol=1e-3)
        X2, y2 = _data(200, 39, 2)
        target2 = y2 if target is y else np.where(y2 > 0, "a", "b")
        with count_compiles() as compiles:
            make().fit(wrap(X2), target2)
        assert compiles[0] == 0, f"39 columns after 37 compiled {compiles[0]} programs"


def test_fsa_padded_columns_is_the_fit_without_them():
    """``Execution(padded_columns=p)``: js.fsa on X with p zero columns appended is js.fsa on X."""
    import jaxselect as js

    X, y = _data(120, 21, 10)
    Xp = pad_columns(X, 32)
    plain = js.fsa(X, y, 3, n_iter=80)
    padded = js.fsa(Xp, y, 3, n_iter=80, execution=js.anneal.Execution(padded_columns=11))
    assert padded.support.tolist() == plain.support.tolist() and padded.n_features == 21
    np.testing.assert_array_equal(padded.n_kept, plain.n_kept)
    np.testing.assert_allclose(padded.coef, plain.coef, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="must be constant padding"):
        js.fsa(Xp, y, 3, n_iter=80, execution=js.anneal.Execution(padded_columns=12))
    with pytest.raises(ValueError, match="padded_columns"):
        js.fsa(Xp, y, 3, n_iter=80, execution=js.anneal.Execution(padded_columns=32))


def test_fsa_estimators_decide_n_iter_auto_on_x_not_on_its_padding(monkeypatch):
    """``n_iter="auto"`` switches to 30 above ``LARGE_SPARSE`` stored values: the estimator counts
    X's own, not the filler entries its row padding adds (here X sits exactly at the threshold)."""
    from jaxselect.anneal import defaults

    X, y = _data(203, 30, 4)
    S = sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0.0).astype(np.float32))
    assert pad_design(S, y, None)[0].nnz > S.nnz, "the padding should add stored entries"
    monkeypatch.setattr(defaults, "LARGE_SPARSE", S.nnz)
    fitted = FSARegressor(k=3).fit(S, y)
    assert fitted.result_.loss_path.shape == (500,)
    monkeypatch.setattr(defaults, "LARGE_SPARSE", S.nnz - 1)
    assert FSARegressor(k=3).fit(S, y).result_.loss_path.shape == (30,)


def test_sparse_cross_validation_on_nearby_shapes_shares_programs_and_equals_the_unpadded_scores(monkeypatch):
    """cross_validate_fsa on a sparse X runs its folds on X padded to its buckets (zero-weight rows,
    uncounted zero columns): a nearby shape compiles nothing, and the scores are the unpadded run's."""
    from jaxselect import cross_validate_fsa

    def sparse(n, seed):
        X = _data(n, 37, seed)[0]
        X[np.abs(X) < 0.8] = 0.0  # about 40 % stored
        return sp.csr_matrix(X), X[:, 1] - 2.0 * X[:, 4] + X[:, 6]

    X, y = sparse(200, 1)
    X2, y2 = sparse(203, 2)
    kw = {"folds": 3, "n_iter": 60}
    padded = cross_validate_fsa(X, y, [2, 3], **kw)
    with count_compiles() as compiles:
        cross_validate_fsa(X2, y2, [2, 3], **kw)
    assert compiles[0] == 0, f"a nearby sparse shape compiled {compiles[0]} programs"
    monkeypatch.setenv("JAXSELECT_SHAPE_BUCKETS", "0")
    plain = cross_validate_fsa(X, y, [2, 3], **kw)
    monkeypatch.delenv("JAXSELECT_SHAPE_BUCKETS")
    np.testing.assert_allclose(padded.scores, plain.scores, rtol=1e-4, atol=1e-4)
    assert padded.best == plain.best
    assert padded.best == 3 and padded.scores[:, 1].min() > 0.99  # y is exact in three columns


def _results():
    """One fitted result of every type ``js.predict`` takes, on a 200 × 12 problem."""
    import jax

    import jaxselect as js

    X, y = _data(200, 12, 3)
    problem = js.prepare(X, y)
    labels = (y > np.median(y)).astype(np.int32)
    return X, {
        "fsa": (js.fsa(X, y, 3), None),
        "greedy_rls": (js.greedy_rls(X, y, 4), 2.0),
        "greedy_rls_every_prefix": (js.greedy_rls(X, y, 4), None),
        "cs_omp": (js.cs_omp(problem), 3.0),
        "cs_omp_every_prefix": (js.cs_omp(problem), None),
        "group_lasso": (js.group_lasso(problem, [0.5, 0.1]), None),
        "dwsm": (js.dwsm_fit(jax.random.key(0), X, labels, n_iter=2), None),
    }


def test_predict_pads_a_numpy_x_to_its_row_bucket_and_equals_the_unpadded_predictions(monkeypatch):
    import jax

    import jaxselect as js

    X, results = _results()
    for name, (result, budget) in results.items():
        got = js.predict(result, X[:101], budget)  # 101 rows run as 104
        with count_compiles() as compiles:
            again = js.predict(result, X[:103], budget)  # the same bucket: compiles nothing
        assert compiles[0] == 0, f"{name}: a nearby row count compiled {compiles[0]} programs"
        monkeypatch.setenv("JAXSELECT_SHAPE_BUCKETS", "0")
        plain = js.predict(result, X[:101], budget)
        monkeypatch.delenv("JAXSELECT_SHAPE_BUCKETS")
        for g, a, p in zip(jax.tree.leaves(got), jax.tree.leaves(again), jax.tree.leaves(plain)):
            assert isinstance(g, jax.Array) and g.shape == p.shape, (name, g.shape, p.shape)
            np.testing.assert_allclose(np.asarray(g), np.asarray(p), rtol=1e-5, atol=1e-5, err_msg=name)
            axis = 1 if name.endswith("every_prefix") or name == "group_lasso" else 0
            np.testing.assert_allclose(np.asarray(a).take(np.arange(101), axis=axis), np.asarray(g), rtol=1e-5,
                                       atol=1e-5, err_msg=name)
    # an independent reference: FSA's linear model and the cheapest prefixes within the budgets
    fsa = results["fsa"][0]
    expected = X[:101, np.asarray(fsa.support)] @ np.asarray(fsa.coef) + np.asarray(fsa.intercept)
    np.testing.assert_allclose(np.asarray(js.predict(fsa, X[:101])), expected, rtol=1e-5, atol=1e-4)
    path = results["cs_omp"][0]
    every = np.asarray(js.predict(path, X[:101]))
    step = int(np.sum(np.asarray(path.cum_cost) <= 3.0)) - 1
    np.testing.assert_allclose(np.asarray(js.predict(path, X[:101], 3.0)), every[step], rtol=1e-6, atol=1e-6)
