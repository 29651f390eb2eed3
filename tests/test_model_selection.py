"""Cross-validation of budgets and k (jaxselect.model_selection) against naive per-fold loops."""

import numpy as np
import pytest

import jaxselect as js
from jaxselect import model_selection as ms

N, D = 43, 6  # 43 rows in 5 folds: test folds of 9, 9, 9, 8, 8 rows (KFold's unequal split)
COSTS = [1.0, 2.5, 1.0, 4.0, 0.5]
IDS = [0, 1, 1, 2, 3, 4]


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D)).astype(np.float32)
    y = (X[:, 0] - 1.5 * X[:, 2] + 0.7 * X[:, 5] + 0.5 * rng.normal(size=N)).astype(np.float32)
    return X, y


def _r2(y, p):
    y, p = np.asarray(y, np.float64), np.asarray(p, np.float64)
    return 1.0 - np.sum((y - p) ** 2) / np.sum((y - y.mean()) ** 2)


def test_fold_masks_are_sklearn_kfold():
    KFold = pytest.importorskip("sklearn.model_selection").KFold
    train, test = ms.fold_masks(5, N)
    for f, (tr, te) in enumerate(KFold(5).split(np.zeros((N, 1)))):
        assert np.flatnonzero(train[f]).tolist() == tr.tolist()
        assert np.flatnonzero(test[f]).tolist() == te.tolist()
    ids = np.arange(N) % 3
    train_ids, test_ids = ms.fold_masks(ids, N)
    assert test_ids.sum(axis=1).tolist() == [15, 14, 14] and not (train_ids & test_ids).any()
    pairs = [(np.flatnonzero(ids != f), np.flatnonzero(ids == f)) for f in range(3)]
    assert all((a == b).all() for a, b in zip(ms.fold_masks(pairs, N), (train_ids, test_ids)))


@pytest.mark.parametrize(
    "folds, match",
    [
        (1, "folds must be >= 2"),
        (N + 1, "exceeds the number of rows"),
        (np.zeros(N, int), "at least 2 folds"),
        ([(np.arange(40), np.arange(39, 43))], "both its training and its test set"),
        ([(np.arange(1), np.arange(1, 43))], "fewer than 2 training rows"),
    ],
)
def test_fold_masks_errors(folds, match):
    with pytest.raises(ValueError, match=match):
        ms.fold_masks(folds, N)


def test_cross_validate_path_matches_per_fold_refits():
    """Every fold's order, its prefixes' held-out R², and the score at every budget of the grid
    equal those of a plain loop: prepare + cs_fr on the fold's rows, predict at the budget."""
    X, y = _data()
    groups = js.Groups.from_ids(IDS, COSTS)
    cv = js.cross_validate_path(X, y, groups, method="fr", folds=5, l2=1e-3)
    train, test = ms.fold_masks(5, N)
    assert cv.scores.shape == (5, cv.grid.size) and cv.grid[0] == 0.0 and cv.status == 0
    for f in range(5):
        tr, te = train[f], test[f]
        path = js.cs_fr(js.prepare(X[tr], y[tr], groups, l2=1e-3))
        assert cv.fold_order[f].tolist() == np.asarray(path.order).tolist()
        np.testing.assert_allclose(cv.fold_cum_cost[f], path.cum_cost, rtol=1e-6)
        ref = [_r2(y[te], np.full(te.sum(), float(np.asarray(path.null_intercept)[0])))]
        ref += [_r2(y[te], p) for p in np.asarray(js.predict(path, X[te]))]
        np.testing.assert_allclose(cv.fold_path_scores[f], ref, atol=2e-5)
        at_budget = [_r2(y[te], js.predict(path, X[te], budget=float(b))) for b in cv.grid]
        np.testing.assert_allclose(cv.scores[f], at_budget, atol=2e-5)
    np.testing.assert_allclose(cv.mean, cv.scores.mean(axis=0))
    assert cv.best == cv.grid[np.argmax(cv.mean)]
    # the grid holds every budget at which some fold's prediction changes (and nothing in between)
    finite = cv.fold_cum_cost[np.isfinite(cv.fold_cum_cost)]
    assert np.all(np.min(np.abs(finite[:, None] - cv.grid[None, :]), axis=1) <= 1e-5 * finite)


def test_selection_rules():
    scores = np.array([[0.0, 0.70, 0.78, 0.85, 0.80], [0.0, 0.72, 0.84, 0.79, 0.88], [0.0, 0.68, 0.80, 0.83, 0.85]])
    grid = np.array([0.0, 1.0, 2.0, 3.0, 5.0])
    res = ms._summarise(grid, scores)
    # means 0, .70, .8067, .8233, .8433; sem at 5 = std(.80, .88, .85; ddof=1)/√3 = .0233
    assert res.best_index == 4 and res.best == 5.0
    assert res.index_1se == 3 and res.best_1se == 3.0
    np.testing.assert_allclose(res.sem, scores.std(axis=0, ddof=1) / np.sqrt(3))
    np.testing.assert_allclose(res.std, scores.std(axis=0))
    tie = ms._summarise(grid[:3], np.array([[0.0, 0.5, 0.5], [0.0, 0.5, 0.5]]))
    assert tie.best == 1.0  # ties go to the smallest budget, as GridSearchCV on an ascending grid


def test_cross_validate_path_options_and_errors():
    X, y = _data()
    cv = js.cross_validate_path(X, y, folds=5, budgets=[0, 2, 1, 6], score="neg_mse", l2=1e-3)
    assert cv.grid.tolist() == [0.0, 1.0, 2.0, 6.0]
    assert np.all(cv.scores <= 0) and cv.mean[0] < cv.mean[-1]
    with pytest.raises(ValueError, match="method must be one of"):
        js.cross_validate_path(X, y, method="lasso")
    with pytest.raises(ValueError, match="budgets must be"):
        js.cross_validate_path(X, y, budgets=[-1.0])
    with pytest.raises(ValueError, match="score must be one of"):
        js.cross_validate_path(X, y, score="accuracy")


def test_cross_validate_fsa_unequal_weighted_folds_match_per_fold_fits():
    """One compiled program serves every k and every fold (unequal folds padded with weight-0 rows):
    each score is still that fold's own FSA fit (the schedule's iterate, polish=False), weighted."""
    rng = np.random.default_rng(3)
    n = 53  # 5 folds of 11 or 10 rows
    X = rng.normal(size=(n, 12)).astype(np.float32)
    labels = (X[:, 1] - X[:, 4] + 0.5 * rng.normal(size=n) > 0).astype(int)
    w = rng.uniform(0.5, 2.0, size=n).astype(np.float32)
    ks = [1, 2, 6]
    cv = js.cross_validate_fsa(X, labels, ks, folds=5, loss="logistic", n_iter=30, sample_weight=w)
    train, test = ms.fold_masks(5, n)
    for b, k in enumerate(ks):
        for f in range(5):
            res = js.fsa(X[train[f]], labels[train[f]], k, loss="logistic", n_iter=30, sample_weight=w[train[f]], polish=False)
            hit = (np.asarray(js.predict(res, X[test[f]])) > 0) == (labels[test[f]] > 0)
            np.testing.assert_allclose(cv.scores[f, b], np.sum(w[test[f]] * hit) / np.sum(w[test[f]]), atol=1e-6)


def test_cross_validate_fsa_matches_per_fold_fits():
    X, y = _data(1)
    X = np.concatenate([X, X[:, :2] ** 2], axis=1)  # 8 features
    ks = [3, 1]
    cv = js.cross_validate_fsa(X, y, ks, folds=5, n_iter=40)
    assert cv.grid.tolist() == [1.0, 3.0] and cv.fold_order is None
    train, test = ms.fold_masks(5, N)
    for b, k in enumerate([1, 3]):
        for f in range(5):
            res = js.fsa(X[train[f]], y[train[f]], k, n_iter=40)
            np.testing.assert_allclose(cv.scores[f, b], _r2(y[test[f]], js.predict(res, X[test[f]])), atol=1e-4)
    labels = (y > 0).astype(int)
    acc = js.cross_validate_fsa(X, labels, [1], folds=5, loss="logistic", n_iter=40)
    assert np.all((acc.scores >= 0) & (acc.scores <= 1)) and acc.mean[0] > 0.6
    with pytest.raises(ValueError, match="non-constant columns"):
        js.cross_validate_fsa(np.concatenate([X, np.ones((N, 1))], axis=1), y, [9], n_iter=40)
    with pytest.raises(ValueError, match="score must be one of"):
        js.cross_validate_fsa(X, labels, [1], loss="logistic", score="r2")


def test_sparse_folds_with_a_column_constant_on_one_fold_match_the_dense_folds():
    """Column 0 varies only in fold 0's held-out rows: on fold 0's training rows it is constant, so
    that fold sequences one group fewer. The sparse folds (one after the other) pad it as the dense
    (vmapped) folds do, quietly, and score the same."""
    import warnings

    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 5)).astype(np.float32)
    X[10:, 0] = 0.0
    y = (X[:, 1] + 0.1 * rng.standard_normal(50)).astype(np.float32)
    dense = js.cross_validate_path(X, y, folds=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sparse = js.cross_validate_path(sp.csr_matrix(X), y, folds=5)
    assert sparse.scores.shape == dense.scores.shape == (5, 6)
    np.testing.assert_array_equal(sparse.fold_order, dense.fold_order)
    assert (sparse.fold_order[0] == -1).sum() == 1
    np.testing.assert_allclose(sparse.scores, dense.scores, rtol=1e-5, atol=1e-6)
    assert sparse.best == dense.best


def test_host_fold_scores_are_the_compiled_ones():
    """The fold-by-fold paths score on the host (no program per row count): the same R², MSE and
    accuracy as the compiled paths' scorers, constant held-out targets (r2_score's 1 or 0) included."""
    import jax.numpy as jnp

    from jaxselect.model_selection import _accuracy, _fold_score, _host_score

    def _host_fold_score(Y, P, w, score):  # the fold-by-fold paths' scorer: numpy, float64
        return float(_fold_score(Y, P, w, score=score, xp=np))

    rng = np.random.default_rng(3)
    Y = rng.normal(size=(40, 3))
    P = Y + 0.3 * rng.normal(size=(40, 3))
    Y[:, 2] = 1.5  # constant target: predicted exactly on a copy below, else 0
    w = rng.uniform(0.0, 2.0, size=40)
    for score in ("r2", "neg_mse"):
        for Pc in (P, np.c_[P[:, :2], Y[:, 2]]):
            want = float(_fold_score(jnp.asarray(Y), jnp.asarray(Pc), jnp.asarray(w), score=score))
            assert _host_fold_score(Y, Pc, w, score) == pytest.approx(want, rel=1e-6, abs=1e-9)
    assert _host_fold_score(Y[:, 2:], P[:, 2:], w, "r2") == 0.0  # constant target, not predicted exactly
    assert _host_fold_score(Y[:, 2:], Y[:, 2:].copy(), w, "r2") == 1.0
    assert float(_fold_score(jnp.asarray(Y[:, 2:]), jnp.asarray(P[:, 2:]), jnp.asarray(w), score="r2")) == 0.0
    labels = (Y[:, 0] > 0).astype(np.float64)
    s = P[:, 1]
    want = float(_accuracy(jnp.asarray(labels), jnp.asarray(s), jnp.asarray(w)))
    assert _host_score(labels, s, w, "accuracy") == pytest.approx(want, rel=1e-6)
    assert _host_score(Y[:, 0], P[:, 0], w, "r2") == pytest.approx(_host_fold_score(Y[:, :1], P[:, :1], w, "r2"))
    classes = rng.integers(0, 3, 40)
    scores = rng.normal(size=(40, 3))
    assert _host_score(classes, scores, w, "accuracy") == pytest.approx(np.sum(w * (scores.argmax(1) == classes)) / w.sum())


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_cross_validate_fsa_on_a_new_shape_compiles_its_cv_program_only(weighted):
    """The folds, the row weights and the column summary of the option checks stay on the host:
    a numpy X of a new shape compiles the cross-validation's one program, nothing per shape else."""
    from compile_count import count_compiles

    rng = np.random.default_rng(11)
    X = rng.standard_normal((301 + 6 * weighted, 21)).astype(np.float32)  # shapes no other test uses
    y = X[:, :3].sum(1) + 0.1 * rng.standard_normal(X.shape[0]).astype(np.float32)
    w = rng.uniform(0.5, 2.0, X.shape[0]) if weighted else None
    if weighted:
        w[:5] = 0.0  # rows of weight 0: the option checks summarise the others
    with count_compiles() as compiles:
        cv = js.cross_validate_fsa(X, y, [2, 3], sample_weight=w)
    assert compiles[0] == 1, f"cross_validate_fsa on a new shape compiled {compiles[0]} programs"
    assert np.isfinite(np.asarray(cv.mean)).all()
