"""abess-style cases: support recovery for Gaussian, logistic and multinomial data, and choosing the
support size by cross-validation (after abess's ``LinearRegression`` / ``LogisticRegression`` /
``MultinomialRegression`` tests, which check that the true support of a simulated sparse model is
found and that the fitted coefficients are those of the model refitted on it).

jaxselect's solvers are sequencing ones (``cs_omp``, ``cs_fr``, ``glm_omp``) or annealing (``fsa``);
for a given support size they should find the same support, and their models are the refits that
scikit-learn computes here: ``LinearRegression`` on the support, ``LogisticRegression(C=1/(l2·n))``
on the standardised support columns (jaxselect's ``l2`` convention; the multinomial case uses one
support shared by every class, as abess does).
"""

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold

import jaxselect as js

N, D = 200, 20
SUPPORT = [2, 9, 15]
L2 = 1e-3
# Newton refits to 1e-6 of the gradient's scale (float32's default 1e-4 leaves ~0.2 % in the coefficients)
GLM_TOL = 1e-6


@pytest.fixture(scope="module")
def design():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D)) * rng.uniform(0.5, 3.0, D) + rng.normal(scale=2.0, size=D)
    return X, (X - X.mean(axis=0)) / X.std(axis=0), rng


def _sorted(a):
    return sorted(np.asarray(a).tolist())


def test_gaussian_support_recovery(design):
    # abess's linear case: the true support of a sparse linear model with noise, and the model
    # refitted on it. Every jaxselect solver finds the support; each model is the least-squares refit.
    X, Xs, rng = design
    beta = np.zeros(D)
    beta[SUPPORT] = [1.0, -0.8, 0.5]
    y = Xs @ beta * 2.0 + 3.0 + rng.normal(size=N)
    X32, y32 = np.float32(X), np.float32(y)
    ols = LinearRegression().fit(X[:, SUPPORT], y)
    problem = js.prepare(X32, y32, l2=0.0)
    for path in (js.cs_omp(problem, k=3), js.cs_fr(problem, k=3)):
        assert _sorted(path.order) == SUPPORT and int(path.status) == 0
        np.testing.assert_allclose(np.asarray(path.coef)[-1, SUPPORT, 0], ols.coef_, rtol=2e-5)
        assert float(np.asarray(path.intercept)[-1, 0]) == pytest.approx(ols.intercept_, rel=2e-5)
        assert np.count_nonzero(np.asarray(path.coef)[-1]) == 3
    fit = js.fsa(X32, y32, 3)
    assert _sorted(fit.support) == SUPPORT and int(fit.status) == 0
    order = np.argsort(np.asarray(fit.support))
    np.testing.assert_allclose(np.asarray(fit.coef)[order], ols.coef_, rtol=2e-4)
    assert float(fit.intercept) == pytest.approx(ols.intercept_, rel=2e-4)


def test_logistic_support_recovery(design):
    # abess's logistic case: binary labels from a sparse logistic model. glm_omp and fsa find the
    # support and their model is scikit-learn's L2 logistic regression on the standardised support
    # columns with C = 1/(l2·n) (the intercept unpenalised in both).
    X, Xs, rng = design
    beta = np.zeros(D)
    beta[SUPPORT] = [2.0, -1.5, 1.0]
    labels = (rng.uniform(size=N) < 1.0 / (1.0 + np.exp(-(Xs @ beta + 0.3)))).astype(np.float32)
    path = js.glm_omp(np.float32(X), labels, k=3, l2=L2, tol=GLM_TOL)
    assert _sorted(path.order) == SUPPORT and int(path.status) == 0
    order = np.asarray(path.order)
    ref = LogisticRegression(C=1.0 / (L2 * N), tol=1e-10, max_iter=10_000).fit(Xs[:, order], labels)
    coef = ref.coef_[0] / X.std(axis=0)[order]
    intercept = ref.intercept_[0] - X.mean(axis=0)[order] @ coef
    np.testing.assert_allclose(np.asarray(path.coef)[-1, order, 0], coef, rtol=4e-5, atol=2e-5)
    assert float(np.asarray(path.intercept)[-1, 0]) == pytest.approx(intercept, rel=4e-5, abs=2e-5)
    # probabilities from the path's inverse link
    proba = np.asarray(js.predict(path, np.float32(X), budget=3, link=True))
    np.testing.assert_allclose(proba.reshape(-1), ref.predict_proba(Xs[:, order])[:, 1], atol=2e-5)
    # FSA with the logistic loss and the same l2 anneals to the same support and the same model
    fit = js.fsa(np.float32(X), labels, 3, loss="logistic", l2=L2)
    assert _sorted(fit.support) == SUPPORT and int(fit.status) == 0
    by_feature = dict(zip(np.asarray(fit.support).tolist(), np.asarray(fit.coef).tolist()))
    np.testing.assert_allclose([by_feature[f] for f in order.tolist()], coef, rtol=4e-5, atol=2e-5)
    assert float(fit.intercept) == pytest.approx(intercept, rel=4e-5, abs=2e-5)


def test_multinomial_support_recovery_shares_the_support(design):
    # abess's multinomial case: one support for every class. glm_omp(loss="softmax") selects
    # features for all classes at once; its model is scikit-learn's multinomial logistic regression
    # (symmetric parametrisation: every class's coefficients penalised) on the support.
    X, Xs, rng = design
    W = np.zeros((D, 3))
    W[SUPPORT] = [[2.0, -1.0, -1.0], [-1.5, 2.5, -1.0], [0.0, -1.5, 1.5]]
    scores = Xs @ W
    proba = np.exp(scores - scores.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    labels = (rng.uniform(size=(N, 1)) > np.cumsum(proba, axis=1)).sum(axis=1)
    path = js.glm_omp(np.float32(X), labels, loss="softmax", k=3, l2=L2, tol=GLM_TOL)
    assert path.coef.shape == (3, D, 3)
    assert _sorted(path.order) == SUPPORT and int(path.status) == 0
    order = np.asarray(path.order)
    ref = LogisticRegression(C=1.0 / (L2 * N), tol=1e-10, max_iter=10_000).fit(Xs[:, order], labels)
    coef = ref.coef_.T / X.std(axis=0)[order, None]  # (3 features, 3 classes), raw units
    np.testing.assert_allclose(np.asarray(path.coef)[-1][order], coef, rtol=4e-5, atol=2e-5)
    assert np.count_nonzero(np.asarray(path.coef)[-1].any(axis=1)) == 3
    np.testing.assert_allclose(
        np.asarray(js.predict(path, np.float32(X), budget=3, link=True)), ref.predict_proba(Xs[:, order]), atol=2e-5
    )


def test_cross_validation_chooses_the_support_size(design):
    # abess chooses the support size by cross-validation. cross_validate_path scores every budget
    # (here a number of features) on held-out folds; the one-standard-error choice is the true size.
    # The fold scores are checked against fits on the fold's training rows alone.
    X, Xs, rng = design
    beta = np.zeros(D)
    beta[SUPPORT] = [1.0, -0.8, 0.5]
    y = Xs @ beta * 2.0 + rng.normal(size=N)
    X32, y32 = np.float32(X), np.float32(y)
    cv = js.cross_validate_path(X32, y32, folds=5)
    assert cv.status == 0
    assert cv.best_1se == 3.0 and cv.best >= 3.0
    np.testing.assert_array_equal(cv.grid, np.arange(D + 1, dtype=float))
    train, test = next(iter(KFold(5).split(X)))
    path = js.cs_omp(js.prepare(X32[train], y32[train]))
    assert np.asarray(path.order).tolist() == np.asarray(cv.fold_order)[0].tolist()
    expected = [r2_score(y[test], np.asarray(js.predict(path, X32[test], budget=b))) for b in cv.grid]
    np.testing.assert_allclose(cv.scores[0], expected, atol=4e-5)
