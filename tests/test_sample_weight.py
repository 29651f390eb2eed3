"""``sample_weight`` of every solver against weighted references.

References: integer weights equal repeated rows (the models, standardisation and losses are
weighted means), 0/1 weights equal dropping the weight-0 rows (what :func:`jaxselect.shard_rows`'s
padding relies on), scikit-learn's ``sample_weight`` for the refits, and a naive hat-matrix
reference for greedy RLS's weighted leave-one-out error. float64 (``x64``) so the comparisons are
sharp; one data set and few shapes keep the compiles down.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxselect as js

N, D = 36, 8


def data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D)) + np.linspace(-1, 2, D)
    y = X[:, 1] - 2 * X[:, 5] + 0.5 * rng.normal(size=N)
    w = rng.integers(0, 4, size=N).astype(float)  # integer weights, some 0
    return X, y, w


def repeat(w):
    """Row indices that repeat row i w_i times."""
    return np.repeat(np.arange(w.size), w.astype(int))


def close(a, b, rtol=1e-9, atol=1e-10):
    for x, z in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(z), rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------------------------- validation
BAD = [
    (np.full(N - 1, 1.0), "shape"),
    (np.r_[np.full(N - 1, 1.0), -1.0], "non-negative"),
    (np.r_[np.full(N - 1, 1.0), np.nan], "NaN"),
    (np.zeros(N), "positive"),
    (np.r_[1.0, np.zeros(N - 1)], "positive"),
]


def _calls(X, y):
    yb = (y > 0).astype(int)
    return {
        "greedy_rls": lambda w: js.greedy_rls(X, y, 2, sample_weight=w),
        "glm_omp": lambda w: js.glm_omp(X, yb, k=2, sample_weight=w),
        "fsa": lambda w: js.fsa(X, y, 2, n_iter=5, sample_weight=w),
        "ridge_refit": lambda w: js.ridge_refit(X, y, sample_weight=w),
        "rls_refit": lambda w: js.rls_refit(X, y, np.array([0]), sample_weight=w),
        "glm_refit": lambda w: js.glm_refit(X, yb, sample_weight=w),
        "group_lasso_path": lambda w: js.group_lasso_path(js.prepare(X, y, sample_weight=w), n_lambdas=4),
        "dwsm_fit": lambda w: js.dwsm_fit(jax.random.key(0), X, yb, n_iter=1, sample_weight=w),
    }


@pytest.mark.parametrize("name", list(_calls(np.zeros((2, 2)), np.zeros(2))))
def test_bad_weights_are_clear_value_errors(name):
    X, y, _ = data()
    call = _calls(X, y)[name]
    for w, message in BAD:
        with pytest.raises(ValueError, match=message):
            call(w)
    with pytest.raises(TypeError, match="numeric"):
        call(np.array(["a"] * N))


def test_fsa_weight_errors():
    X, y, w = data()
    with pytest.raises(ValueError, match="callable"):
        js.fsa(X, y, 2, loss=lambda s, t: jnp.mean((s - t) ** 2), n_iter=5, sample_weight=w)
    pairs = np.array([[0, 1, 1.0], [2, 3, 0.0]])
    w0 = np.ones(N)
    w0[[0, 3]] = 0
    with pytest.raises(ValueError, match="every ranking pair"):
        js.fsa(X, None, 2, loss="ranking", pairs=pairs, n_iter=5, sample_weight=w0)


# ---------------------------------------------------------------------------------------------- greedy RLS
def _weighted_loo_reference(X, Y, w, S, l2, bias):
    """Naive weighted LOO: ridge on √w-scaled rows (λ = Σw·l2), hat residuals e_i/(1 − h_ii)."""
    r = np.sqrt(w)
    cols = ([np.full(N, np.sqrt(bias))] if bias > 0 else []) + [X[:, j] for j in S]
    Z = np.stack(cols, axis=1) * r[:, None]
    Yw = Y * r[:, None]
    H = Z @ np.linalg.solve(Z.T @ Z + w.sum() * l2 * np.eye(Z.shape[1]), Z.T)
    R = (Yw - H @ Yw) / (1 - np.diag(H))[:, None]
    return np.sum(R**2) / (w.sum() * Y.shape[1])


def test_greedy_rls_weighted_loo_matches_naive_reference(x64):
    X, y, w = data(1)
    Y = np.c_[y, y**2 / 4]
    w = w + 0.5 * (w > 0)  # non-integer weights too
    l2, bias = 0.05, 1.0
    res = js.greedy_rls(X, Y, 3, l2=l2, bias=bias, sample_weight=w)
    S, loo = [], []
    for _ in range(3):
        scores = [_weighted_loo_reference(X, Y, w, S + [j], l2, bias) if j not in S else np.inf for j in range(D)]
        S.append(int(np.argmin(scores)))
        loo.append(min(scores))
    assert res.selected.tolist() == S
    close(res.loo_error, np.asarray(loo))
    # the final model is weighted ridge on the selected features (rls_refit, the same maths)
    close(js.rls_refit(X, Y, res.selected, l2=l2, bias=bias, sample_weight=w), (res.coef, res.intercept))


def test_greedy_rls_zero_one_weights_equal_dropping_rows(x64):
    X, y, w = data(2)
    keep = w > 0
    w01 = keep.astype(float)
    X[~keep, 3] = 7.0  # column 3 is constant on the kept rows only: inert with the weights
    X[keep, 3] = 1.5
    a = js.greedy_rls(X, y, 4, l2=0.02, bias=1.0, sample_weight=w01)
    b = js.greedy_rls(X[keep], y[keep], 4, l2=0.02, bias=1.0)
    assert 3 not in a.selected.tolist()
    assert a.selected.tolist() == b.selected.tolist()
    close(a, b)


# ---------------------------------------------------------------------------------------------- GLM OMP
@pytest.mark.parametrize("loss", ["logistic"])  # the weights wrap every GLM loss the same way
def test_glm_omp_integer_weights_equal_repeated_rows(x64, loss):
    X, y, w = data(3)
    labels = (y > np.median(y)).astype(int) if loss == "logistic" else np.digitize(y, np.quantile(y, [0.33, 0.66]))
    groups = js.Groups.from_ids(np.arange(D) // 2, [1.0, 2.0, 1.0, 1.5])
    idx = repeat(w)
    a = js.glm_omp(X, labels, groups, loss=loss, l2=0.01, sample_weight=w)
    b = js.glm_omp(X[idx], labels[idx], groups, loss=loss, l2=0.01)
    assert a.order.tolist() == b.order.tolist()
    close(a, b, rtol=1e-7, atol=1e-8)  # Newton stops within tol: same iterates up to rounding


# ---------------------------------------------------------------------------------------------- FSA
@pytest.mark.parametrize("loss, bins", [("squared", None), ("huber_hinge", None), ("lorenz", 3)])
def test_fsa_integer_weights_equal_repeated_rows(x64, loss, bins):
    X, y, w = data(4)
    t = y if loss == "squared" else (y > np.median(y)).astype(int)
    idx = repeat(w)
    a = js.fsa(X, t, 2, loss=loss, bins=bins, n_iter=40, l2=0.01, sample_weight=w)
    b = js.fsa(X[idx], t[idx], 2, loss=loss, bins=bins, n_iter=40, l2=0.01)
    assert a.support.tolist() == b.support.tolist()
    # float64; the huberized hinge's kinks make its iterates sensitive to the order of the sums
    close(a, b, rtol=1e-4 if loss == "huber_hinge" else 1e-6, atol=1e-8)


def test_fsa_ranking_pairs_weighted_by_the_product_of_row_weights(x64):
    X, y, w = data(5)
    pairs = np.array([(i, j, float(y[i] < y[j])) for i in range(0, N, 2) for j in range(1, N, 3) if i != j])
    # repeated rows: every copy of i against every copy of j, i.e. pair weight w_i·w_j
    copies = np.split(np.arange(int(w.sum())), np.cumsum(w.astype(int))[:-1])
    rep = np.array([(a, b, r) for i, j, r in pairs for a in copies[int(i)] for b in copies[int(j)]])
    res = js.fsa(X, None, 2, loss="ranking", pairs=pairs, n_iter=40, sample_weight=w)
    ref = js.fsa(X[repeat(w)], None, 2, loss="ranking", pairs=rep, n_iter=40)
    assert res.support.tolist() == ref.support.tolist()
    close(res, ref, rtol=1e-7, atol=1e-9)


# ---------------------------------------------------------------------------------------------- group lasso
def test_group_lasso_path_weighted_through_prepare(x64):
    X, y, w = data(6)
    groups = js.Groups.from_ids(np.arange(D) // 2, [1.0, 2.0, 1.0, 3.0])
    idx = repeat(w)
    a = js.group_lasso_path(js.prepare(X, y, groups, sample_weight=w), n_lambdas=6)
    b = js.group_lasso_path(js.prepare(X[idx], y[idx], groups), n_lambdas=6)
    assert a.order.tolist() == b.order.tolist()
    # BCD stops within its KKT tolerance; path.info (the fit) is in problem coordinates, whose whitening
    # directions may differ in sign: its raw-space models are compared
    close(a._replace(info=a.info.raw_coef), b._replace(info=b.info.raw_coef), rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------------------------------------- refits
def _weighted_standardised(X, w):
    m = w @ X / w.sum()
    s = np.sqrt(w @ (X - m) ** 2 / w.sum())
    return (X - m) / s, m, s


def test_ridge_refit_matches_sklearn_sample_weight(x64):
    from sklearn.linear_model import Ridge

    X, y, w = data(7)
    support = np.arange(D) % 2 == 1
    l2 = 0.05
    coef, b = js.ridge_refit(X, y, support, l2=l2, sample_weight=w)
    Xs, m, s = _weighted_standardised(X[:, support], w)
    sk = Ridge(alpha=l2 * w.sum()).fit(Xs, y, sample_weight=w)
    np.testing.assert_allclose(np.asarray(coef)[support], sk.coef_ / s, rtol=1e-8)
    assert np.all(np.asarray(coef)[~support] == 0)
    np.testing.assert_allclose(float(b), sk.intercept_ - m @ (sk.coef_ / s), rtol=1e-8)
    idx = repeat(w)
    close((coef, b), js.ridge_refit(X[idx], y[idx], support, l2=l2))


def test_glm_refit_matches_sklearn_sample_weight(x64):
    from sklearn.linear_model import LogisticRegression

    X, y, w = data(8)
    yb = (y + 0.8 * np.random.default_rng(0).normal(size=N) > np.median(y)).astype(int)
    support = np.arange(D) < 3
    l2 = 0.05
    coef, b = js.glm_refit(X, yb, support, l2=l2, sample_weight=w, tol=1e-10)[:2]
    Xs, m, s = _weighted_standardised(X[:, support], w)
    sk = LogisticRegression(C=1 / (l2 * w.sum()), tol=1e-12, max_iter=10_000).fit(Xs, yb, sample_weight=w)
    np.testing.assert_allclose(np.asarray(coef)[support], sk.coef_[0] / s, rtol=1e-5)
    np.testing.assert_allclose(float(b), sk.intercept_[0] - m @ (sk.coef_[0] / s), rtol=1e-5)


def test_rls_refit_integer_weights_equal_repeated_rows(x64):
    X, y, w = data(9)
    sel = np.array([1, 5, -1])
    idx = repeat(w)
    close(
        js.rls_refit(X, y, sel, l2=0.1, bias=2.0, sample_weight=w),
        js.rls_refit(X[idx], y[idx], sel, l2=0.1, bias=2.0),
    )


# ---------------------------------------------------------------------------------------------- shard_rows
def test_shard_rows_one_and_several_arrays():
    X, y, _ = data()
    Xs = js.shard_rows(X.astype(np.float32))
    assert isinstance(Xs, jax.Array) and Xs.shape == (N, D)
    Xs, w = js.shard_rows(X.astype(np.float32), weights=True)
    assert w.dtype == np.float32 and float(w.sum()) == N
    Xs, ys, labels, w = js.shard_rows(X.astype(np.float32), y.astype(np.float32), (y > 0).astype(int))
    assert ys.shape == labels.shape == w.shape == (N,) and np.issubdtype(labels.dtype, np.integer)
    with pytest.raises(ValueError, match="same rows"):
        js.shard_rows(X, y[:-1])
    with pytest.raises(ValueError, match="at least one"):
        js.shard_rows()
    with pytest.raises(ValueError, match="0-d"):
        js.shard_rows(X, np.float32(1.0))


# ---------------------------------------------------------------------------------------------- DWSM
def _dwsm_data():
    X, y, w = data(3)
    labels = (X[:, 1] - 0.5 * X[:, 5] > np.median(X[:, 1] - 0.5 * X[:, 5])).astype(int)
    w[:2] = 1  # both classes keep positive weight
    return X[:, :4], labels, w


def test_dwsm_integer_weights_equal_repeated_rows(x64):
    """RCPI's first iteration is deterministic with explore=0 (θ_0 classifies at once, so every
    policy state is the empty one and the rollouts are greedy): weighted rows must give exactly
    the repeated rows' standardisation, θ_0, ridge statistics (θ_1) and training loss. The greedy
    evaluation of a trained policy is weighted the same way."""
    X, labels, w = _dwsm_data()
    r = repeat(w)
    kw = dict(lam=0.02, n_iter=1, explore=0.0, select="last", states_per_example=3)
    a = js.dwsm_fit(jax.random.key(0), X, labels, sample_weight=w, **kw)
    b = js.dwsm_fit(jax.random.key(1), X[r], labels[r], **kw)
    plain = js.dwsm_fit(jax.random.key(0), X, labels, sample_weight=np.ones_like(w), **kw)  # same program as a
    close((a.thetas, a.mean, a.scale, a.train_loss), (b.thetas, b.mean, b.scale, b.train_loss))
    assert np.abs(np.asarray(a.thetas)[1] - np.asarray(plain.thetas)[1]).max() > 1e-3  # the weights matter

    from jaxselect.dwsm import rcpi_evaluate, rcpi_problem

    # a random policy acquires features and errs: its weighted greedy evaluation vs repeated rows
    theta = np.random.default_rng(4).normal(size=a.theta.shape)
    theta[2:, -1] += 1.5  # acquisitions (rows C = 2 onwards) look attractive at first
    theta = jnp.asarray(theta)
    evaluate = jax.jit(lambda theta, X, y, w: rcpi_evaluate(theta, rcpi_problem(a.spec, X, y, sample_weight=w)))
    ev_w = evaluate(theta, X, labels, w)
    ev_r = evaluate(theta, X[r], labels[r], np.ones(r.size))
    assert 0 < float(ev_w[2]) < X.shape[1] and 0 < float(ev_w[1]) < 1
    close(ev_w, ev_r)


def test_dwsm_appended_zero_weight_rows_change_nothing():
    """The padding of shard_rows: rows appended with weight 0 (here arbitrary values, not copies)
    leave the fit of the real rows unchanged, to float32 rounding, over several iterations."""
    X, labels, _ = _dwsm_data()
    X, labels = X.astype(np.float32), labels
    rng = np.random.default_rng(5)
    Xp = np.concatenate([X, 10 * rng.normal(size=(3, X.shape[1])).astype(np.float32)])
    lp = np.concatenate([labels, [0, 1, 1]])
    wp = np.r_[np.ones(len(X)), np.zeros(3)].astype(np.float32)
    kw = dict(lam=0.01, n_iter=3, states_per_example=3)
    a = js.dwsm_fit(jax.random.key(0), X, labels, **kw)
    b = js.dwsm_fit(jax.random.key(0), Xp, lp, sample_weight=wp, **kw)
    close((a.theta, a.mean, a.scale, a.train_loss), (b.theta, b.mean, b.scale, b.train_loss), rtol=1e-5, atol=1e-6)
    assert int(a.best) == int(b.best)
    np.testing.assert_array_equal(np.asarray(js.predict(a, X)[0]), np.asarray(js.predict(b, X)[0]))
