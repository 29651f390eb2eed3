"""GLM group OMP (Hu et al. Alg. 3) against cs_omp, scikit-learn refits, a naive oracle and finite differences."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxselect as js
from jaxselect.greedy.glm import _builtin_parts, _callable_parts, _risk, _risk_grad, glm_accuracy, glm_omp, glm_predict
from jaxselect.prepare import whiten_design

sklearn_linear = pytest.importorskip("sklearn.linear_model")

SIZES = (1, 3, 2, 2, 1)


def grouped_data(seed, n=150, kind="logistic", sizes=SIZES):
    """Raw correlated grouped features with offsets/scales, random costs, and labels of ``kind``."""
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(len(sizes)), sizes)
    D = len(ids)
    latent = rng.normal(size=(n, len(sizes)))
    X = rng.normal(size=(n, D)) + 1.2 * latent[:, ids]
    X = X * rng.uniform(0.3, 4.0, D) + rng.normal(scale=5.0, size=D)
    Xs = (X - X.mean(0)) / X.std(0)
    W = rng.normal(size=(D, 3)) * (rng.uniform(size=(D, 1)) < 0.6)
    scores = Xs @ W
    if kind == "logistic":
        y = (scores[:, 0] + rng.logistic(size=n) > 0).astype(np.int64)
    elif kind == "softmax":
        y = np.argmax(scores + rng.gumbel(size=(n, 3)), axis=1)
    else:
        y = scores[:, 0] + rng.normal(size=n)
    costs = rng.uniform(0.5, 4.0, len(sizes))
    return X, y, ids, costs


def naive_glm_omp(Z, y, ids, costs, l2, kind):
    """Alg. 3 with scikit-learn refits: gradient (eq. 22) at the refitted model, argmax ‖∇_g‖²/c(g)."""
    n = Z.shape[0]
    J = int(ids.max()) + 1
    classes = np.unique(y)
    Y = (y[:, None] == classes[None, :]).astype(float) if kind == "softmax" else y[:, None].astype(float)
    chosen, feats = [], []
    for _ in range(J):
        if feats:
            model = fit_sklearn(Z[:, feats], y, l2)
            P = model.predict_proba(Z[:, feats])
            P = P if kind == "softmax" else P[:, 1:]
        else:
            freq = Y.mean(axis=0)
            P = np.broadcast_to(freq, Y.shape)
        grad = Z.T @ (P - Y) / n  # unselected groups: W_g = 0
        best, best_g = -np.inf, None
        for g in range(J):
            if g in chosen:
                continue
            score = np.sum(grad[ids == g] ** 2) / costs[g]
            if score > best:
                best, best_g = score, g
        chosen.append(best_g)
        feats += [f for f in np.flatnonzero(ids == best_g) if np.any(Z[:, f] != 0)]
    return chosen


def fit_sklearn(Zs, y, l2):
    n = Zs.shape[0]
    return sklearn_linear.LogisticRegression(C=1.0 / (l2 * n), tol=1e-12, max_iter=10_000).fit(Zs, y)


def prefix_columns(Z, ids, order, j):
    feats = [f for g in order[: j + 1] for f in np.flatnonzero(ids == g)]
    return [f for f in feats if np.any(Z[:, f] != 0)]


# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("criterion", ["whiten", "no_whiten", "single"])
def test_squared_loss_reproduces_cs_omp(criterion):
    X, y, ids, costs = grouped_data(0, kind="squared")
    groups = js.Groups.from_ids(ids, costs)
    l2 = 1e-3
    omp = js.cs_omp(js.prepare(X, y, groups, l2=l2), criterion=criterion)
    glm = glm_omp(X, y, groups, loss="squared", l2=l2, criterion=criterion)
    assert glm.order.tolist() == omp.order.tolist()
    # Same ridge models on every prefix (the ridge fit is linear in y, so Y's scaling cancels).
    np.testing.assert_allclose(glm.coef, omp.coef, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(glm.intercept, omp.intercept, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(glm.cum_cost, omp.cum_cost)


def test_callable_loss_reproduces_cs_omp():
    X, Y, ids, costs = grouped_data(1, kind="squared")
    groups = js.Groups.from_ids(ids, costs)

    def squared(S, Yt):
        return 0.5 * jnp.sum((S - Yt) ** 2, axis=1)

    omp = js.cs_omp(js.prepare(X, Y, groups, l2=1e-3))
    glm = glm_omp(X, Y, groups, loss=squared, l2=1e-3)
    assert glm.order.tolist() == omp.order.tolist()
    np.testing.assert_allclose(glm.coef, omp.coef, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("seed", [2, 3])
def test_logistic_matches_sklearn_refits_and_naive_order(seed):
    X, y, ids, costs = grouped_data(seed)
    l2 = 1e-2
    groups = js.Groups.from_ids(ids, costs)
    path, info = glm_omp(X, y, groups, loss="logistic", l2=l2, return_info=True)
    assert bool(info.converged.all())
    Z = np.asarray(whiten_design(X, groups)[0].Z)
    order = path.order.tolist()
    assert order == naive_glm_omp(Z, y, ids, costs, l2, "logistic")
    scores = np.asarray(js.predict(path, X))  # (m, n) log-odds of every prefix
    for j in range(len(order)):
        cols = prefix_columns(Z, ids, order, j)
        ref = fit_sklearn(Z[:, cols], y, l2).decision_function(Z[:, cols])
        np.testing.assert_allclose(scores[j], ref, atol=2e-5)
    # Objective: fraction of the null risk removed, non-decreasing along the path.
    assert np.all(np.diff(np.asarray(path.objective)) >= -1e-10)
    assert 0 < float(path.objective[0]) < 1


def test_softmax_matches_sklearn_multinomial():
    X, y, ids, costs = grouped_data(4, kind="softmax")
    l2 = 1e-2
    groups = js.Groups.from_ids(ids, costs)
    path = glm_omp(X, y, groups, loss="softmax", l2=l2)
    assert path.coef.shape == (len(SIZES), X.shape[1], 3)
    Z = np.asarray(whiten_design(X, groups)[0].Z)
    order = path.order.tolist()
    assert order == naive_glm_omp(Z, y, ids, costs, l2, "softmax")
    proba = np.asarray(glm_predict(path, X, loss="softmax"))  # (m, n, 3)
    np.testing.assert_allclose(proba.sum(-1), 1.0, rtol=1e-12)
    for j in (0, 2, len(order) - 1):
        cols = prefix_columns(Z, ids, order, j)
        ref = fit_sklearn(Z[:, cols], y, l2).predict_proba(Z[:, cols])
        np.testing.assert_allclose(proba[j], ref, atol=2e-5)
    # Intercept-only model: the class frequencies.
    null = np.asarray(jax.nn.softmax(path.null_intercept))
    np.testing.assert_allclose(null, np.bincount(y) / len(y), atol=1e-7)


@pytest.mark.parametrize("loss", ["logistic", "softmax", "multilabel", "callable"])
def test_cg_newton_equals_cholesky_newton(loss):
    """The Hessian-free (CG) Newton refit reaches the same models as the exact Cholesky one."""
    kind = "softmax" if loss == "softmax" else ("regression" if loss == "callable" else "logistic")
    X, y, ids, costs = grouped_data(5, kind=kind)
    if loss == "multilabel":  # two logistic columns sharing the groups
        y = np.stack([y, (X[:, 3] > np.median(X[:, 3])).astype(np.int64)], axis=1)
    fn = _log_cosh if loss == "callable" else ("logistic" if loss == "multilabel" else loss)
    groups = js.Groups.from_ids(ids, costs)
    kw = dict(loss=fn, l2=1e-2, return_info=True, tol=1e-9)
    exact, info_exact = glm_omp(X, y, groups, newton_solver="cholesky", **kw)
    cg, info_cg = glm_omp(X, y, groups, newton_solver="cg", **kw)
    assert cg.order.tolist() == exact.order.tolist()
    assert bool(np.all(info_cg.converged)) and bool(np.all(info_exact.converged))
    np.testing.assert_allclose(info_cg.loss, info_exact.loss, rtol=1e-10)
    np.testing.assert_allclose(cg.coef, exact.coef, atol=1e-6)
    np.testing.assert_allclose(cg.intercept, exact.intercept, atol=1e-6)


def test_newton_solver_auto_and_validation():
    X, y, ids, costs = grouped_data(6, kind="softmax")
    with pytest.raises(ValueError, match="newton_solver"):
        glm_omp(X, y, loss="softmax", newton_solver="lbfgs")
    # (P+1)·T = (9+3+1)·3 here: "auto" is the exact solver and equals it
    a = glm_omp(X, y, js.Groups.from_ids(ids, costs), loss="softmax")
    b = glm_omp(X, y, js.Groups.from_ids(ids, costs), loss="softmax", newton_solver="cholesky")
    np.testing.assert_array_equal(a.coef, b.coef)


def _fd_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def _log_cosh(S, Y):  # a smooth convex user loss
    return jnp.sum(jnp.logaddexp(S - Y, Y - S) - jnp.log(2.0), axis=1)


@pytest.mark.parametrize("loss", ["logistic", "softmax", "squared", "callable"])
def test_gradient_eq22_matches_finite_differences(loss):
    rng = np.random.default_rng(5)
    n, D, T = 40, 5, 3
    Z = jnp.asarray(rng.normal(size=(n, D)))
    if loss == "softmax":
        Y = jax.nn.one_hot(jnp.asarray(rng.integers(0, T, n)), T, dtype=jnp.float64)
    elif loss == "logistic":
        Y = jnp.asarray(rng.integers(0, 2, (n, T)).astype(float))
    else:
        Y = jnp.asarray(rng.normal(size=(n, T)))
    parts = _callable_parts(_log_cosh) if loss == "callable" else _builtin_parts(loss)
    active = jnp.asarray([True, True, False, True, True])
    l2 = 0.3
    V = rng.normal(size=(D, T)) * np.asarray(active)[:, None]
    b = rng.normal(size=T)
    gV, gb = _risk_grad(Z, Y, jnp.asarray(V), jnp.asarray(b), active, l2, parts[1])

    risk = jax.jit(lambda v, c: _risk(Z, Y, v, c, active, l2, parts[0]))

    def risk_V(v):
        return float(risk(jnp.asarray(v), jnp.asarray(b)))

    def risk_b(c):
        return float(risk(jnp.asarray(V), jnp.asarray(c)))

    fd_V = _fd_grad(risk_V, V) * np.asarray(active)[:, None]
    np.testing.assert_allclose(gV, fd_V, atol=1e-7)
    np.testing.assert_allclose(gb, _fd_grad(risk_b, b), atol=1e-7)
    # Per-example score Hessians (used by Newton) against differences of the score gradient.
    S = Z @ jnp.asarray(V) + jnp.asarray(b)[None, :]
    H = np.asarray(parts[2](S, Y))
    eps = 1e-6
    for k in range(T):
        e = jnp.zeros_like(S).at[:, k].set(eps)
        col = (np.asarray(parts[1](S + e, Y)) - np.asarray(parts[1](S - e, Y))) / (2 * eps)
        np.testing.assert_allclose(H[:, :, k], col, atol=1e-7)


def test_callable_scalar_mean_loss_equals_builtin_logistic():
    X, y, ids, costs = grouped_data(6)
    groups = js.Groups.from_ids(ids, costs)

    def mean_logistic(S, Y):
        return jnp.mean(jnp.sum(jax.nn.softplus(S) - Y * S, axis=1))

    a = glm_omp(X, y, groups, loss="logistic", l2=1e-2)
    b = glm_omp(X, y, groups, loss=mean_logistic, l2=1e-2)
    assert a.order.tolist() == b.order.tolist()
    np.testing.assert_allclose(a.coef, b.coef, atol=1e-6)


@pytest.mark.parametrize(
    "loss,labels,match",
    [
        ("logistic", [0, 1, 2], "labels in \\{0, 1\\}.*softmax"),
        ("logistic", [-1, 1], "\\(y \\+ 1\\) / 2"),
        ("logistic", [0.5, 1.0], "labels in \\{0, 1\\}"),
        ("logistic", [1, 1], "single class"),
        ("softmax", [0, -1, 2], "negative"),
        ("softmax", [0, 1.5, 2], "non-integer"),
        ("softmax", [0, 2, 3], "never occur"),
        ("softmax", [0, 0, 0], "at least 2 classes"),
    ],
)
def test_bad_labels_rejected(loss, labels, match):
    rng = np.random.default_rng(0)
    y = np.resize(np.asarray(labels), 30)
    X = rng.normal(size=(30, 3))
    with pytest.raises(ValueError, match=match):
        glm_omp(X, y, loss=loss)


def test_bad_configuration_rejected():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 3)), rng.integers(0, 2, 30)
    with pytest.raises(ValueError, match="loss must be one of"):
        glm_omp(X, y, loss="hinge")
    with pytest.raises(TypeError, match="loss must be one of"):
        glm_omp(X, y, loss=3)
    with pytest.raises(ValueError, match="criterion"):
        glm_omp(X, y, criterion="l1")
    with pytest.raises(ValueError, match="l2"):
        glm_omp(X, y, l2=-1.0)
    with pytest.raises(ValueError, match="rows"):
        glm_omp(X, y[:10])
    with pytest.raises(ValueError, match="NaN"):
        glm_omp(np.where(X > 1, np.nan, X), y)
    with pytest.raises(ValueError, match="per-example losses"):
        glm_omp(X, y, loss=lambda S, Y: S)
    with pytest.raises(ValueError, match="softmax needs a 1-D"):
        glm_omp(X, np.eye(3)[y], loss="softmax")
    with pytest.raises(ValueError, match="n_classes"):
        glm_omp(X, y, loss="softmax", n_classes=1)


@pytest.mark.parametrize("dtype,jit", [(np.float32, True), (np.float64, True), (np.float64, False)])
def test_dtypes_and_jit(dtype, jit):
    # eager mode runs every Newton iteration op by op: keep it short there
    X, y, ids, costs = grouped_data(7) if jit else grouped_data(7, n=40, sizes=(2, 1, 2))
    groups = js.Groups.from_ids(ids, costs, dtype=dtype)
    steps = None if jit else 1
    reference = glm_omp(X, y, js.Groups.from_ids(ids, costs), l2=1e-2, max_steps=steps)
    with jax.disable_jit(not jit):
        path, info = glm_omp(X.astype(dtype), y, groups, l2=1e-2, max_steps=steps, return_info=True)
    assert path.coef.dtype == dtype and path.objective.dtype == dtype
    assert bool(info.converged.all())
    assert path.order.tolist() == reference.order.tolist()
    tol = 1e-3 if dtype == np.float32 else 1e-8
    np.testing.assert_allclose(path.coef, reference.coef, rtol=tol, atol=tol)


def test_degenerate_groups_multilabel_and_budgets():
    rng = np.random.default_rng(8)
    n = 120
    base = rng.normal(size=(n, 4))
    # group 0: a feature and its duplicate (rank 1); group 1: a constant column + a real one.
    X = np.column_stack([base[:, 0], 2 * base[:, 0] + 1, np.full(n, 3.0), base[:, 1], base[:, 2], base[:, 3]])
    ids = np.array([0, 0, 1, 1, 2, 3])
    costs = np.array([1.0, 2.0, 1.0, 5.0])
    Y = np.column_stack([(base[:, 0] + 0.3 * rng.normal(size=n) > 0), (base[:, 3] - base[:, 1] > 0)]).astype(int)
    with pytest.raises(ValueError, match="constant"):
        glm_omp(X, Y, js.Groups.from_ids(ids, costs))
    path, info = glm_omp(
        X, Y, js.Groups.from_ids(ids, costs), l2=1e-2, max_steps=10, drop_constant=True, return_info=True
    )
    assert path.n_steps == 4 and sorted(path.order.tolist()) == [0, 1, 2, 3]
    assert path.coef.shape == (4, 6, 2)
    assert bool(jnp.isfinite(path.coef).all()) and bool(info.converged.all())
    assert float(jnp.abs(path.coef[:, 2]).max()) == 0.0  # the constant column is never used
    # the duplicate pair shares one whitened direction: equal standardised weights, so raw
    # coefficients in the ratio of the column scales (x1 = 2·x0 + 1 → coef0 = 2·coef1)
    j0 = path.order.tolist().index(0)
    c = np.asarray(path.coef[j0, :2, 0])
    assert abs(c[0]) > 0
    np.testing.assert_allclose(c[0], 2 * c[1], rtol=1e-6)
    # budget semantics: below the cheapest group the intercept-only model (label frequencies)
    p0 = np.asarray(glm_predict(path, X, budget=0.5))
    np.testing.assert_allclose(p0, np.broadcast_to(Y.mean(0), p0.shape), atol=1e-6)
    p_all = np.asarray(glm_predict(path, X, budget=1e9))
    np.testing.assert_allclose(p_all, np.asarray(glm_predict(path, X))[-1])
    curve = glm_accuracy(path, X, Y)
    assert curve.value.shape == (5,) and curve.value[-1] > curve.value[0]


def test_cost_blind_and_accuracy_curve_on_pima():
    data = js.datasets.load_pima()
    groups = js.Groups.from_ids(data.groups, data.costs)
    cs = glm_omp(data.X, data.y, groups, l2=1e-3)
    blind = glm_omp(data.X, data.y, groups, l2=1e-3, cost_sensitive=False)
    # Cost-sensitive sequencing is cheaper at the start; cost-blind picks the best group first.
    assert float(cs.cum_cost[0]) <= float(blind.cum_cost[0])
    assert float(blind.objective[0]) >= float(cs.objective[0])
    acc = glm_accuracy(blind, data.X, data.y)
    assert acc.value[0] == pytest.approx(max(data.y.mean(), 1 - data.y.mean()))
    assert acc.value[-1] > 0.75
