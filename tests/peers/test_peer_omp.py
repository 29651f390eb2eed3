"""Ports of scikit-learn's orthogonal matching pursuit tests (``sklearn/linear_model/tests/test_omp.py``).

Each case of scikit-learn's suite is restated against jaxselect's public API (``js.prepare`` →
``js.cs_omp``), with numbers from scikit-learn's ``orthogonal_mp`` / ``OrthogonalMatchingPursuit`` /
``LinearRegression`` / ``Ridge`` or from a few lines of numpy here. Where jaxselect differs from
scikit-learn on purpose, the test says so and asserts jaxselect's rule:

* ``prepare`` centres and scales every column and every target, so OMP's atom choice is made on
  standardised columns (scikit-learn's ``orthogonal_mp`` assumes unit-norm atoms): scikit-learn is
  given the standardised X, jaxselect the raw X, and the raw-space models are compared;
* the model of every prefix is refitted with an intercept (``fit_intercept=True``);
* several targets share one support (simultaneous OMP on the Frobenius norm of the standardised
  targets' gradients), where ``orthogonal_mp`` runs one OMP per target;
* ``l2`` is a ridge on standardised columns, ``l2 = alpha / n`` for ``Ridge(alpha)``; ``l2=0`` is OMP;
* ``k`` larger than the number of features is clipped (scikit-learn raises), and linear dependence
  sets the ``ILL_CONDITIONED`` status flag (scikit-learn warns).

Shapes are shared across tests so that the module compiles a handful of programs.
"""

import warnings

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, OrthogonalMatchingPursuit, Ridge, orthogonal_mp

import jaxselect as js

N, D, T, K = 30, 40, 3, 5  # more atoms than samples, as scikit-learn's sparse-coded-signal fixture


def _standardise(A):
    A = np.asarray(A, np.float64)
    centred = A - A.mean(axis=0)
    return centred / centred.std(axis=0)


def _raw_design(seed):
    """(N, D) features with offsets and unequal scales (so the standardisation inside prepare matters)."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(N, D)) * rng.uniform(0.3, 4.0, D) + rng.normal(scale=5.0, size=D)


def _ols(X, Y, support):
    """Least squares with an intercept on the columns ``support``: (coef (D, T), intercept (T,))."""
    Y = np.asarray(Y, np.float64).reshape(len(Y), -1)
    A = np.column_stack([np.ones(len(X)), np.asarray(X, np.float64)[:, support]])
    sol = np.linalg.lstsq(A, Y, rcond=None)[0]
    coef = np.zeros((X.shape[1], Y.shape[1]))
    coef[support] = sol[1:]
    return coef, sol[0]


def _sklearn_order(X, y, k):
    """Atoms in the order scikit-learn's OMP picks them, on standardised X and a centred target."""
    path = orthogonal_mp(_standardise(X), y - y.mean(), n_nonzero_coefs=k, return_path=True)  # (D, k)
    order = []
    for j in range(k):
        new = set(np.flatnonzero(path[:, j])) - set(order)
        assert len(new) == 1
        order.append(new.pop())
    return order


def _simultaneous_omp_order(X, Y, k):
    """Reference for jaxselect's shared support: OMP on standardised X and standardised targets,
    atom score = sum over targets of the squared correlation with the residual."""
    Xs, Ys = _standardise(X), _standardise(Y)
    order, R = [], Ys
    for _ in range(k):
        score = np.sum((Xs.T @ R) ** 2, axis=1)
        score[order] = -np.inf
        order.append(int(np.argmax(score)))
        R = Ys - Xs[:, order] @ np.linalg.lstsq(Xs[:, order], Ys, rcond=None)[0]
    return order


@pytest.fixture(scope="module")
def signal():
    """Noise-free sparse targets: y (N,) on 5 atoms, Y (N, 3) on 3 atoms per target (different ones)."""
    rng = np.random.default_rng(0)
    X = _raw_design(0)
    w = np.zeros(D)
    w[[3, 11, 17, 25, 38]] = rng.choice([-1.0, 1.0], 5) * rng.uniform(1.0, 3.0, 5)
    W = np.zeros((D, T))
    for t, atoms in enumerate(([0, 7, 21], [5, 12, 30], [7, 19, 33])):  # atom 7 shared by two targets
        W[atoms, t] = rng.choice([-1.0, 1.0], 3) * rng.uniform(1.0, 3.0, 3)
    return X, X @ w + 2.0, w, X @ W - 1.0, W


def _f32(*arrays):
    return [np.asarray(a, np.float32) for a in arrays]


def test_correct_shapes(signal):
    # sklearn: orthogonal_mp gives (n_features,) for a 1-D y and (n_features, n_targets) for 2-D Y.
    # jaxselect: a path of K prefixes, each with (D, T) raw coefficients and (T,) intercepts; T = 1
    # for a 1-D y, and predictions drop the T axis again.
    X, y, _, Y, _ = signal
    X, y, Y = _f32(X, y, Y)
    path = js.cs_omp(js.prepare(X, y, l2=0.0), k=K)
    assert path.order.shape == (K,) and path.coef.shape == (K, D, 1) and path.intercept.shape == (K, 1)
    assert path.coef.dtype == np.float32
    assert js.predict(path, X).shape == (K, N)  # every prefix
    assert js.predict(path, X, budget=3).shape == (N,)
    path = js.cs_omp(js.prepare(X, Y, l2=0.0), k=K)
    assert path.coef.shape == (K, D, T) and path.intercept.shape == (K, T) and path.null_intercept.shape == (T,)
    assert js.predict(path, X).shape == (K, N, T)
    assert js.predict(path, X, budget=2).shape == (N, T)
    # the design (gram=False) problem returns a slot path; its dense form has the same shapes
    slot = js.cs_omp(js.prepare(X, Y, l2=0.0, gram=False), k=K)
    assert not slot.is_dense and slot.dense().coef.shape == (K, D, T)


def test_n_nonzero_coefs(signal):
    # sklearn: count_nonzero(orthogonal_mp(X, y, n_nonzero_coefs=5)) <= 5. jaxselect: prefix j uses
    # exactly the j + 1 atoms picked so far, for every target (one shared support).
    X, y, _, Y, _ = signal
    for target in (y, Y):
        X32, t32 = _f32(X, target)
        path = js.cs_omp(js.prepare(X32, t32, l2=0.0), k=K)
        order = np.asarray(path.order)
        assert len(set(order.tolist())) == K and np.all(order >= 0)
        for j in range(K):
            coef = np.asarray(path.coef)[j]
            for t in range(coef.shape[1]):
                assert set(np.flatnonzero(coef[:, t])) == set(order[: j + 1].tolist())


def test_perfect_signal_recovery(signal):
    # sklearn: the 5 atoms of a noise-free sparse signal are found and the coefficients recovered.
    # jaxselect is given raw (unscaled, offset) columns and returns raw-space coefficients and the
    # intercept.
    X, y, w, _, _ = signal
    X32, y32 = _f32(X, y)
    path = js.cs_omp(js.prepare(X32, y32, l2=0.0), k=K)
    assert set(np.asarray(path.order).tolist()) == set(np.flatnonzero(w).tolist())
    scale = np.abs(w).max()
    np.testing.assert_allclose(np.asarray(path.coef)[-1, :, 0], w, atol=2e-5 * scale)
    np.testing.assert_allclose(float(np.asarray(path.intercept)[-1, 0]), 2.0, atol=2e-5 * np.abs(y).max())
    assert float(np.asarray(path.objective)[-1]) == pytest.approx(1.0, abs=1e-5)
    assert int(path.status) == 0
    # the same atoms as scikit-learn's OMP on the standardised columns, in the same order
    assert np.asarray(path.order).tolist() == _sklearn_order(X, y, K)


def test_matches_sklearn_omp_on_noisy_target(signal):
    # OrthogonalMatchingPursuit(fit_intercept=True) on standardised columns vs cs_omp on the raw
    # columns: same atom order, and at every prefix the same model in raw units.
    X, y, _, _, _ = signal
    y = y + np.random.default_rng(1).normal(scale=0.5 * y.std(), size=N)
    X32, y32 = _f32(X, y)
    path = js.cs_omp(js.prepare(X32, y32, l2=0.0), k=K)
    assert np.asarray(path.order).tolist() == _sklearn_order(X, y, K)
    Xs = _standardise(X)
    scale = X.std(axis=0)
    for j in range(K):
        est = OrthogonalMatchingPursuit(n_nonzero_coefs=j + 1).fit(Xs, y)
        raw_coef = est.coef_ / scale
        raw_intercept = est.intercept_ - (X.mean(axis=0) / scale) @ est.coef_
        tol = 2e-5 * np.abs(raw_coef).max()
        np.testing.assert_allclose(np.asarray(path.coef)[j, :, 0], raw_coef, atol=tol)
        np.testing.assert_allclose(float(np.asarray(path.intercept)[j, 0]), raw_intercept, atol=2e-5 * np.abs(y).max())


def test_every_prefix_is_the_least_squares_refit(signal):
    # sklearn's return_path: the coefficients after each iteration. Each prefix's model is the
    # orthogonal projection on the atoms chosen so far: least squares with an intercept.
    X, _, _, Y, _ = signal
    Y = Y + np.random.default_rng(2).normal(scale=0.3, size=Y.shape)
    X32, Y32 = _f32(X, Y)
    path = js.cs_omp(js.prepare(X32, Y32, l2=0.0), k=K)
    order = np.asarray(path.order)
    for j in range(K):
        coef, intercept = _ols(X, Y, order[: j + 1])
        np.testing.assert_allclose(np.asarray(path.coef)[j], coef, atol=2e-5 * np.abs(coef).max())
        np.testing.assert_allclose(np.asarray(path.intercept)[j], intercept, atol=2e-5 * np.abs(Y).max())


def test_tol_stopping_from_the_objective(signal):
    # sklearn's tol: stop at the first iterate whose residual sum of squares is <= tol.
    # jaxselect has no tol: the path's objective is the training R² of every prefix, so the same
    # stopping point is the first prefix with N·var(y)·(1 − objective) <= tol.
    X, y, _, _, _ = signal
    y = y + np.random.default_rng(3).normal(scale=0.2 * y.std(), size=N)
    X32, y32 = _f32(X, y)
    path = js.cs_omp(js.prepare(X32, y32, l2=0.0), k=K)
    rss = N * y.var() * (1.0 - np.asarray(path.objective, np.float64))
    for j in range(K):  # the objective is the R² of the prefix's predictions
        resid = y - np.asarray(js.predict(path, X32, budget=j + 1), np.float64)
        assert np.sum(resid**2) == pytest.approx(rss[j], rel=1e-4, abs=1e-5 * N * y.var())
    tol = 0.5 * (rss[2] + rss[3])  # reached at the 4th atom
    stop = int(np.argmax(rss <= tol))
    assert stop == 3
    gamma = orthogonal_mp(_standardise(X), y - y.mean(), tol=tol)
    assert set(np.flatnonzero(gamma)) == set(np.asarray(path.order)[: stop + 1].tolist())
    assert np.sum((y - y.mean() - _standardise(X) @ gamma) ** 2) <= tol


def test_gram_and_design_give_the_same_path(signal):
    # sklearn: orthogonal_mp(precompute=True) == orthogonal_mp(precompute=False), and
    # orthogonal_mp_gram(G, Xy) == orthogonal_mp(X, y). jaxselect: the Gram problem, the design
    # (gram=False) problem and a problem built from moments computed here give one path.
    X, _, _, Y, _ = signal
    Y = Y + np.random.default_rng(4).normal(scale=0.3, size=Y.shape)
    X32, Y32 = _f32(X, Y)
    gram = js.cs_omp(js.prepare(X32, Y32, l2=0.0, gram=True), k=K)
    design = js.cs_omp(js.prepare(X32, Y32, l2=0.0, gram=False), k=K).dense()
    Xc, Yc = X - X.mean(axis=0), Y - Y.mean(axis=0)
    moments = js.Moments(
        n_samples=np.float32(N),
        x_mean=np.float32(X.mean(axis=0)),
        constant=np.zeros(D, bool),
        gram=np.float32(Xc.T @ Xc / N),
        y_mean=np.float32(Y.mean(axis=0)),
        y_var=np.float32(Y.var(axis=0)),
        y_constant=np.zeros(T, bool),
        cross=np.float32(Xc.T @ Yc / N),
    )
    from_moments = js.cs_omp(js.problem_from_moments(moments, l2=0.0), k=K)
    # sklearn's test_orthogonal_mp_gram_readonly: read-only (here also Fortran-ordered) inputs
    X_ro, Y_ro = np.asfortranarray(X32), Y32.copy()
    X_ro.setflags(write=False)
    Y_ro.setflags(write=False)
    readonly = js.cs_omp(js.prepare(X_ro, Y_ro, l2=0.0), k=K)
    order = np.asarray(gram.order).tolist()
    assert order == _simultaneous_omp_order(X, Y, K)
    for other in (design, from_moments, readonly):
        assert np.asarray(other.order).tolist() == order
        np.testing.assert_allclose(other.coef, gram.coef, atol=2e-5 * float(np.abs(gram.coef).max()))
        np.testing.assert_allclose(other.intercept, gram.intercept, atol=2e-5 * np.abs(Y).max())
        np.testing.assert_allclose(other.objective, gram.objective, atol=1e-5)


def test_multi_target_shares_one_support(signal):
    # sklearn's orthogonal_mp(X, Y) runs one OMP per column of Y, each with its own support.
    # jaxselect differs on purpose: the targets share one support, chosen by the Frobenius norm of
    # the gradients of the standardised targets. With k = the union of the per-target supports it
    # finds that union and recovers each target exactly (its coefficients vanish off its own atoms).
    X, _, _, Y, W = signal
    union = sorted(set(np.flatnonzero(W.any(axis=1)).tolist()))
    per_target = orthogonal_mp(_standardise(X), Y - Y.mean(axis=0), n_nonzero_coefs=3)  # (D, T)
    for t in range(T):
        assert set(np.flatnonzero(per_target[:, t])) == set(np.flatnonzero(W[:, t]))
    k = len(union)
    X32, Y32 = _f32(X, Y)
    path = js.cs_omp(js.prepare(X32, Y32, l2=0.0), k=k)
    assert np.asarray(path.order).tolist() == _simultaneous_omp_order(X, Y, k)
    assert sorted(np.asarray(path.order).tolist()) == union
    np.testing.assert_allclose(np.asarray(path.coef)[-1], W, atol=2e-5 * np.abs(W).max())
    np.testing.assert_allclose(np.asarray(path.intercept)[-1], np.full(T, -1.0), atol=2e-5 * np.abs(Y).max())


def test_swapped_regressors(signal):
    # sklearn: with y = X[:, 21] + 0.5·X[:, 0] (the stronger atom at the higher index), the support
    # is {0, 21}, from the design and from the Gram alike. jaxselect: the stronger atom first.
    X, _, _, _, _ = signal
    Xs = _standardise(X)
    y = Xs[:, 21] + 0.5 * Xs[:, 0]
    X32, y32 = _f32(X, y)
    # (the design / Gram equivalence is test_gram_and_design_give_the_same_path)
    path = js.cs_omp(js.prepare(X32, y32, l2=0.0), k=K)
    assert np.asarray(path.order)[:2].tolist() == [21, 0]
    coef = np.asarray(path.coef)[1, :, 0] * X.std(axis=0)  # standardised units
    assert np.flatnonzero(coef).tolist() == [0, 21]
    np.testing.assert_allclose(coef[[0, 21]], [0.5, 1.0], atol=1e-5)


def test_identical_regressors_flag_the_dependence(signal):
    # sklearn: a duplicated atom ends OMP early with a RuntimeWarning ("linear dependence in the
    # dictionary"). jaxselect keeps static shapes: the path goes on to every atom, the dependent
    # pick sets the ILL_CONDITIONED status flag (no warning; raise_for_status turns it into an
    # error), and the model stays the exact fit: the duplicate pair's coefficients sum to the truth.
    X = signal[0][:, :20].copy()  # 20 ≤ N − 1 atoms: the duplicate is the only dependence
    X[:, 1] = X[:, 0]
    y = X[:, 0] + X[:, 1] + 0.5 * X[:, 5]
    X32, y32 = _f32(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        path = js.cs_omp(js.prepare(X32, y32, l2=0.0))
    assert sorted(np.asarray(path.order).tolist()) == list(range(20))
    assert int(path.status) & js.ILL_CONDITIONED
    with pytest.raises(js.SolverError):
        js.raise_for_status(path)
    coef = np.asarray(path.coef, np.float64)[-1, :, 0]
    assert coef[0] + coef[1] == pytest.approx(2.0, abs=1e-4)
    assert coef[5] == pytest.approx(0.5, abs=1e-4)
    np.testing.assert_allclose(np.delete(coef, [0, 1, 5]), 0.0, atol=1e-4)
    np.testing.assert_allclose(np.asarray(js.predict(path, X32, budget=20)), y, atol=2e-5 * np.abs(y).max())
    # control: the same atoms without the duplicate are independent, and nothing is flagged
    control = js.cs_omp(js.prepare(*_f32(signal[0][:, :20], y), l2=0.0))
    assert int(control.status) == 0


def test_unreachable_precision_flags_rank_deficiency(signal):
    # sklearn: asking for as many atoms as features when D > n cannot be met (the atoms become
    # linearly dependent) and warns. jaxselect: k = D with l2 = 0 fits the data exactly after
    # rank(X_c) = N − 1 atoms, and the later, dependent picks set ILL_CONDITIONED. k > D is clipped
    # (sklearn raises "n_nonzero_coefs cannot be larger than the number of features").
    X, _, _, _, _ = signal
    y = np.random.default_rng(5).normal(size=N)
    X32, y32 = _f32(X, y)
    problem = js.prepare(X32, y32, l2=0.0)
    path = js.cs_omp(problem, k=D + 7)
    assert path.order.shape == (D,)
    assert sorted(np.asarray(path.order).tolist()) == list(range(D))
    assert int(path.status) & js.ILL_CONDITIONED
    objective = np.asarray(path.objective)
    assert objective[N // 2] < 0.9  # a pure noise target: no exact fit with half the atoms
    assert np.all(np.diff(objective[: N - 1]) > 0)
    np.testing.assert_allclose(objective[N - 2 :], 1.0, atol=1e-3)  # exact from N − 1 atoms on
    # the first N − 1 atoms are a least-squares interpolation of the target
    pred = np.asarray(js.predict(path, X32, budget=N - 1), np.float64)
    np.testing.assert_allclose(pred, y, atol=1e-2 * np.abs(y).max())
    # a small ridge (l2 > 0) removes the dependence: no flag
    ridge = js.cs_omp(js.prepare(X32, y32, l2=1e-3), k=D)
    assert int(ridge.status) == 0


def test_all_atoms_reach_least_squares_and_ridge():
    # sklearn: OMP with n_nonzero_coefs = n_features equals LinearRegression. jaxselect too, and
    # with l2 > 0 it equals Ridge(alpha = l2·n) on the standardised columns (the l2 convention).
    rng = np.random.default_rng(6)
    n, d = 10, 8
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 3.0, d) + 3.0
    Y = rng.normal(size=(n, 2))
    X32, Y32 = _f32(X, Y)
    path = js.cs_omp(js.prepare(X32, Y32, l2=0.0))
    assert path.coef.shape == (d, d, 2)
    lr = LinearRegression().fit(X, Y)
    np.testing.assert_allclose(np.asarray(path.coef)[-1], lr.coef_.T, atol=2e-5 * np.abs(lr.coef_).max())
    np.testing.assert_allclose(np.asarray(path.intercept)[-1], lr.intercept_, atol=2e-5 * np.abs(lr.intercept_).max())
    l2 = 0.05
    path = js.cs_omp(js.prepare(X32, Y32, l2=l2))
    Xs = _standardise(X)
    ridge = Ridge(alpha=l2 * n).fit(Xs, Y)
    np.testing.assert_allclose(np.asarray(path.coef)[-1] * X.std(axis=0)[:, None], ridge.coef_.T, atol=1e-5)


def test_bad_input(signal):
    # sklearn rejects tol < 0 and n_nonzero_coefs <= 0; jaxselect rejects k < 1, l2 < 0 and an
    # unknown criterion with a ValueError.
    X, y = _f32(*signal[:2])
    problem = js.prepare(X, y)
    with pytest.raises(ValueError, match="k"):
        js.cs_omp(problem, k=0)
    with pytest.raises(ValueError, match="l2"):
        js.prepare(X, y, l2=-1.0)
    with pytest.raises(ValueError, match="criterion"):
        js.cs_omp(problem, criterion="lars")
