"""Issue 37 item 3: one rule for a k above the usable features (non-constant columns), for
``js.fsa``, ``js.greedy_rls`` and the estimators built on them: a ``UserWarning`` naming k and the
count, and all usable features kept — the result equals the call with k = that count. The rule is
one helper, :func:`jaxselect._validation.clip_k`, so the wording is one."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import jaxselect as js
from jaxselect._validation import clip_k
from jaxselect.sklearn import FSAClassifier, FSARegressor, FSARegressorCV, GreedyRLSRegressor

N, M = 120, 6
NITER = 40


def _data():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((N, M)).astype(np.float32)
    X[:, 2] = 1.5  # constant: never usable
    y = (X[:, 0] - 2 * X[:, 4] + 0.1 * rng.standard_normal(N)).astype(np.float32)
    return X, y


def _message(who, k, count):
    return rf"^{who}: k={k} is larger than the number of usable features of X \({count}; constant columns are never selected\); all {count} are kept$"


def test_clip_k_wording_and_sequences():
    with pytest.warns(UserWarning, match=_message("who", 7, 3)) as caught:
        assert clip_k(7, 3, "who") == 3
    assert caught[0].filename == __file__  # the user's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert clip_k(3, 3, "who") == 3 and clip_k(None, 3, "who") is None and clip_k(4, 0, "who") == 4
        assert clip_k([1, 2], 3, "who").tolist() == [1, 2]
    with pytest.warns(UserWarning, match=r"who: ks \[5, 8\] are larger than the number of usable groups of X \(3; "):
        assert clip_k([1, 5, 8], 3, "who", unit="groups").tolist() == [1, 3, 3]


@pytest.mark.parametrize("k", [M - 0, M + 3], ids=["k=M", "k>M"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_fsa_clips_k_to_the_usable_features(k, sparse):
    X, y = _data()
    Xa = sp.csr_matrix(X) if sparse else X
    ref = js.fsa(Xa, y, M - 1, n_iter=NITER)
    with pytest.warns(UserWarning, match=_message("fsa", k, M - 1)) as caught:
        res = js.fsa(Xa, y, k, n_iter=NITER)
    assert len(caught) == 1 and caught[0].filename == __file__
    assert res.support.tolist() == ref.support.tolist() == [0, 1, 3, 4, 5]
    np.testing.assert_array_equal(np.asarray(res.coef), np.asarray(ref.coef))
    np.testing.assert_array_equal(np.asarray(res.loss_path), np.asarray(ref.loss_path))


def test_fsa_logistic_and_piecewise_clip_alike():
    X, y = _data()
    labels = (y > 0).astype(np.int32)
    for kw, target in ((dict(loss="logistic"), labels), (dict(learner=js.anneal.PiecewiseLinear(4)), y)):
        ref = js.fsa(X, target, M - 1, n_iter=NITER, **kw)
        with pytest.warns(UserWarning, match=_message("fsa", M + 1, M - 1)):
            res = js.fsa(X, target, M + 1, n_iter=NITER, **kw)
        np.testing.assert_array_equal(np.asarray(res.coef), np.asarray(ref.coef))


@pytest.mark.parametrize("k", [M, M + 3], ids=["k=M", "k>M"])
def test_greedy_rls_clips_k_to_the_usable_features(k):
    X, y = _data()
    ref = js.greedy_rls(X, y, M - 1)
    with pytest.warns(UserWarning, match=_message("greedy_rls", k, M - 1)) as caught:
        res = js.greedy_rls(X, y, k)
    assert len(caught) == 1 and caught[0].filename == __file__
    assert np.asarray(res.selected).tolist() == np.asarray(ref.selected).tolist()
    np.testing.assert_array_equal(np.asarray(res.coef), np.asarray(ref.coef))
    np.testing.assert_array_equal(np.asarray(res.loo_error), np.asarray(ref.loo_error))


def test_every_column_constant_still_raises():
    X = np.ones((N, 3), np.float32)
    y = np.arange(N, dtype=np.float32)
    with pytest.raises(ValueError, match="constant"):
        js.fsa(X, y, 2, n_iter=NITER)
    with pytest.raises(ValueError, match="constant"):
        js.greedy_rls(X, y, 2)


@pytest.mark.parametrize(
    "make",
    [
        lambda k: FSARegressor(k=k, n_iter=NITER),
        lambda k: FSAClassifier(k=k, n_iter=NITER),
        lambda k: GreedyRLSRegressor(k=k),
    ],
    ids=["FSARegressor", "FSAClassifier", "GreedyRLSRegressor"],
)
def test_estimators_warn_once_in_their_name_and_equal_k_count(make):
    X, y = _data()
    if "Classifier" in type(make(1)).__name__:
        y = y > 0
    ref = make(M - 1).fit(X, y)
    name = type(ref).__name__
    with pytest.warns(UserWarning, match=_message(name, M + 2, M - 1)) as caught:
        est = make(M + 2).fit(X, y)
    assert len([w for w in caught if "usable" in str(w.message)]) == 1  # the estimator's, not fsa's too
    assert caught[0].filename == __file__
    np.testing.assert_array_equal(est.get_support(), ref.get_support())
    np.testing.assert_array_equal(est.coef_, ref.coef_)


def test_fsa_regressor_cv_clips_its_grid():
    X, y = _data()
    with pytest.warns(UserWarning, match=r"^FSARegressorCV: ks \[7, 9\] are larger than the number of usable features of X \(5; ") as caught:
        est = FSARegressorCV(ks=(1, 7, 9), cv=3, n_iter=NITER).fit(X, y)
    assert caught[0].filename == __file__
    assert est.cv_result_.grid.tolist() == [1.0, 5.0]


def test_streamed_fsa_clips_k_alike():
    """A streamed X (batches): the usable count is known after the summary pass; the schedule is
    then planned for the clipped k, so the result equals the call with k = count."""
    X, y = _data()

    def batches():
        for a in range(0, N, 50):
            yield X[a : a + 50], y[a : a + 50]

    ref = js.fsa(batches, None, M - 1, n_iter=NITER)
    with pytest.warns(UserWarning, match=_message("fsa", M + 2, M - 1)):
        res = js.fsa(batches, None, M + 2, n_iter=NITER)
    assert res.support.tolist() == ref.support.tolist() == [0, 1, 3, 4, 5]
    np.testing.assert_array_equal(np.asarray(res.coef), np.asarray(ref.coef))
    np.testing.assert_array_equal(np.asarray(res.n_kept), np.asarray(ref.n_kept))


@pytest.mark.parametrize("method", ["cs_omp", "cs_fr", "doubling"])
def test_sequencing_clips_k_to_the_usable_groups(method):
    """cs_omp / cs_fr / doubling: the same rule, counted in groups with a non-constant column."""
    X, y = _data()
    problem = js.prepare(X, y)
    solve = getattr(js, method)
    ref = solve(problem, M - 1)
    with pytest.warns(UserWarning, match=_message(method, M + 2, M - 1)) as caught:
        path = solve(problem, M + 2)
    assert len(caught) == 1 and caught[0].filename == __file__
    assert path.order.tolist() == ref.order.tolist() and 2 not in path.order.tolist()
    np.testing.assert_array_equal(np.asarray(path.coef), np.asarray(ref.coef))
    groups = js.Groups.from_ids([0, 0, 1, 1, 2, 2])  # group 1 = columns 2 (constant) and 3: usable
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert js.prepare(X, y, groups).n_groups == 3 and solve(js.prepare(X, y, groups), 3).n_steps == 3


def test_glm_omp_clips_k_to_the_usable_groups():
    X, y = _data()
    labels = (y > 0).astype(np.int32)
    X[:, [0, 1]] = X[:, [0, 0]]  # duplicated columns stay usable; column 2 is constant
    groups = js.Groups.from_ids([0, 0, 1, 2, 2, 3])
    ref = js.glm_omp(X, labels, groups, 3)
    msg = r"^glm_omp: k=9 is larger than the number of usable groups of X \(3; constant columns are never selected\)"
    with pytest.warns(UserWarning, match=msg) as caught:
        path = js.glm_omp(X, labels, groups, 9)
    assert len(caught) == 1 and caught[0].filename == __file__
    assert path.order.tolist() == ref.order.tolist() and 1 not in path.order.tolist()
    with pytest.warns(UserWarning, match=r"^glm_omp_run: k=4 is larger"):
        assert js.glm_omp_run(js.glm_prepare(X, labels, groups), 4).n_steps == 3


def test_cross_validate_path_clips_k_to_the_usable_groups():
    X, y = _data()
    ref = js.cross_validate_path(X, y, folds=3, k=M - 1)
    with pytest.warns(UserWarning, match=_message("cross_validate_path", M + 1, M - 1)) as caught:
        res = js.cross_validate_path(X, y, folds=3, k=M + 1)
    assert len(caught) == 1 and caught[0].filename == __file__
    np.testing.assert_array_equal(np.asarray(res.scores), np.asarray(ref.scores))
