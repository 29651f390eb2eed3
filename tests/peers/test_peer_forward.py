"""Ports of scikit-learn's sequential feature selector tests (``sklearn/feature_selection/tests/
test_sequential.py``) that apply to forward regression, against ``js.cs_fr``.

scikit-learn's ``SequentialFeatureSelector(direction="forward")`` adds, at each step, the feature
whose addition gives the best cross-validated score. ``cs_fr`` adds the group with the largest gain
in training explained variance per unit cost. With one feature per group, unit costs, ``l2=0`` and
a "cross-validation" whose only split trains and scores on every row, the two are the same
algorithm (``r2`` averaged over targets is jaxselect's objective ``2F/T``), so scikit-learn is the
oracle; a brute-force numpy forward selection is the second one. Where jaxselect differs on purpose
(costs divide the gain, groups enter whole, one support shared by the targets, ``k`` instead of
``n_features_to_select`` and no ``"auto"``/``tol`` inside the solver: the path's objective gives the
stopping point), the test says so.
"""

import numpy as np
import pytest
from sklearn.feature_selection import SequentialFeatureSelector
from sklearn.linear_model import LinearRegression

import jaxselect as js

N, D = 40, 10


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    latent = rng.normal(size=(N, 3))
    X = rng.normal(size=(N, D)) + latent[:, [0, 0, 1, 1, 2, 2, 0, 1, 2, 0]]  # correlated columns
    X = X * rng.uniform(0.5, 3.0, D) + rng.normal(scale=4.0, size=D)
    beta = np.array([3.0, 0.0, -2.0, 0.0, 1.2, 0.0, 0.6, 0.0, 0.3, 0.0])
    y = X @ beta / X.std(axis=0).mean() + rng.normal(size=N)
    Y = np.column_stack([y, X[:, [1, 3]] @ [1.0, -1.0] + rng.normal(size=N)])
    return X, y, Y


def _train_only_cv():
    rows = np.arange(N)
    return [(rows, rows)]  # fit and score on every row: the training score


def _r2(X, Y, feats):
    """Training R² of least squares with an intercept, averaged over targets (sklearn's r2 score)."""
    Y = Y.reshape(len(Y), -1)
    A = np.column_stack([np.ones(len(X)), X[:, feats]])
    resid = Y - A @ np.linalg.lstsq(A, Y, rcond=None)[0]
    return float(np.mean(1.0 - np.sum(resid**2, axis=0) / np.sum((Y - Y.mean(axis=0)) ** 2, axis=0)))


def _forward(X, Y, k, members=None, costs=None):
    """Brute-force forward selection: the group with the largest R² gain per cost, refitting every candidate."""
    members = members if members is not None else [[j] for j in range(X.shape[1])]
    costs = np.ones(len(members)) if costs is None else np.asarray(costs)
    order, feats, score = [], [], 0.0
    for _ in range(k):
        gains = np.full(len(members), -np.inf)
        for g, cols in enumerate(members):
            if g not in order:
                gains[g] = (_r2(X, Y, feats + cols) - score) / costs[g]
        g = int(np.argmax(gains))
        order.append(g)
        feats = feats + members[g]
        score = _r2(X, Y, feats)
    return order


def _f32(*arrays):
    return [np.asarray(a, np.float32) for a in arrays]


@pytest.mark.parametrize("target", ["single", "multi"])
def test_forward_selection_matches_sklearn(data, target):
    # test_n_features_to_select / test_sanity: for every n_features_to_select, the forward selector
    # keeps the features that best improve the score. cs_fr is nested: its first k picks are
    # SequentialFeatureSelector(n_features_to_select=k)'s support, for every k. For several targets
    # sklearn's r2 averages over targets and LinearRegression fits them jointly, which is jaxselect's
    # shared support and objective.
    X, y, Y = data
    Y = y if target == "single" else Y
    path = js.cs_fr(js.prepare(*_f32(X, Y), l2=0.0))
    order = np.asarray(path.order).tolist()
    assert order == _forward(X, Y, D)
    for k in (1, 3, 5):
        sfs = SequentialFeatureSelector(
            LinearRegression(), n_features_to_select=k, direction="forward", scoring="r2", cv=_train_only_cv()
        ).fit(X, Y)
        assert set(sfs.get_support(indices=True).tolist()) == set(order[:k])
        assert sfs.transform(X).shape == (N, k)
    # the path's objective is the score sklearn maximises
    expected = [_r2(X, Y, order[: j + 1]) for j in range(D)]
    np.testing.assert_allclose(np.asarray(path.objective), expected, atol=4e-5)


def test_k_is_n_features_to_select(data):
    # sklearn: n_features_to_select in {1, 5, 9} (here 1 and 5) gives that many features; 0 or more than the
    # number of features raises. jaxselect: k steps; k=None means all; k < 1 raises; k > D is
    # clipped to D (jaxselect differs on purpose: a path over every group is a valid request).
    X, y, _ = data
    problem = js.prepare(*_f32(X, y), l2=0.0)
    full = np.asarray(js.cs_fr(problem).order)
    assert full.shape == (D,) and sorted(full.tolist()) == list(range(D))
    for k in (1, 5):
        path = js.cs_fr(problem, k=k)
        assert path.order.shape == (k,) and path.coef.shape == (k, D, 1)
        assert np.asarray(path.order).tolist() == full[:k].tolist()
        assert np.count_nonzero(np.asarray(path.coef)[-1, :, 0]) == k
    assert js.cs_fr(problem, k=D + 3).order.shape == (D,)
    with pytest.raises(ValueError, match="k"):
        js.cs_fr(problem, k=0)


def test_auto_with_tol_is_a_stopping_rule_on_the_objective(data):
    # sklearn: n_features_to_select="auto" with tol adds features while the score improves by at
    # least tol. jaxselect's path holds the score of every prefix, so the same count is the number
    # of leading steps whose gain in objective is >= tol.
    X, y, _ = data
    path = js.cs_fr(js.prepare(*_f32(X, y), l2=0.0))
    gains = np.diff(np.concatenate([[0.0], np.asarray(path.objective, np.float64)]))
    for tol in (0.2, 0.02, 0.003):
        count = int(np.argmax(gains < tol)) if np.any(gains < tol) else D
        count = max(count, 1)  # sklearn always adds the first feature
        sfs = SequentialFeatureSelector(
            LinearRegression(), n_features_to_select="auto", tol=tol, direction="forward", cv=_train_only_cv()
        ).fit(X, y)
        assert sfs.n_features_to_select_ == count
        assert set(sfs.get_support(indices=True).tolist()) == set(np.asarray(path.order)[:count].tolist())
    assert len({max(int(np.argmax(gains < t)), 1) for t in (0.2, 0.02, 0.003)}) > 1  # the tols differ


def test_costs_and_groups_change_the_rule(data):
    # jaxselect differs on purpose: a group enters whole and its gain is divided by its cost
    # (CS-G-FR). Checked against the brute-force rule; without costs the order is plain group
    # forward regression.
    X, y, _ = data
    ids = np.array([0, 1, 1, 2, 3, 3, 3, 4, 5, 5])
    costs = np.array([1.0, 3.0, 0.5, 2.0, 1.0, 4.0])
    members = [np.flatnonzero(ids == g).tolist() for g in range(6)]
    problem = js.prepare(*_f32(X, y), js.Groups.from_ids(ids, costs), l2=0.0)
    sensitive = js.cs_fr(problem)
    blind = js.cs_fr(problem, cost_sensitive=False)
    assert np.asarray(sensitive.order).tolist() == _forward(X, y, 6, members, costs)
    assert np.asarray(blind.order).tolist() == _forward(X, y, 6, members)
    assert np.asarray(sensitive.order).tolist() != np.asarray(blind.order).tolist()
    np.testing.assert_allclose(np.asarray(sensitive.cum_cost), np.cumsum(costs[np.asarray(sensitive.order)]), rtol=1e-6)
