"""GLM group OMP (Hu et al. Alg. 3) against cs_omp, scikit-learn refits, a naive oracle and finite differences.

float64 cases use the ``x64`` fixture; everything else runs in float32, as users run it.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxselect as js
from compile_count import count_compiles
from jaxselect.sequencing import glm_omp_init, glm_omp_run, glm_omp_step, glm_problem
from jaxselect.sequencing.glm_eval import glm_accuracy, glm_predict
from jaxselect.sequencing.glm import glm_omp
from jaxselect.losses import glm_loss
from jaxselect.newton import glm_risk, glm_risk_grad
from jaxselect.sequencing.prepare import whiten_design


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


def _log_cosh(S, Y):  # a smooth convex user loss
    return jnp.sum(jnp.logaddexp(S - Y, Y - S) - jnp.log(2.0), axis=1)


# --------------------------------------------------------------------------------------------- oracles


@pytest.mark.parametrize("criterion", ["whiten", "no_whiten", "single"])
def test_squared_loss_reproduces_cs_omp(criterion, x64):
    X, y, ids, costs = grouped_data(0, kind="squared")
    groups = js.Groups.from_ids(ids, costs)
    l2 = 1e-3
    omp = js.cs_omp(js.prepare(X, y, groups, l2=l2), criterion=criterion)
    glm = glm_omp(X, y, groups, loss="squared", l2=l2, criterion=criterion)
    assert glm.order.tolist() == omp.order.tolist()
    assert int(glm.link) == 0 and int(glm.status) == 0
    # Same ridge models on every prefix (the ridge fit is linear in y, so Y's scaling cancels).
    np.testing.assert_allclose(glm.coef, omp.coef, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(glm.intercept, omp.intercept, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(glm.cum_cost, omp.cum_cost)


def test_callable_loss_reproduces_cs_omp(x64):
    X, Y, ids, costs = grouped_data(1, kind="squared")
    groups = js.Groups.from_ids(ids, costs)

    def squared(S, Yt):
        return 0.5 * jnp.sum((S - Yt) ** 2, axis=1)

    omp = js.cs_omp(js.prepare(X, Y, groups, l2=1e-3))
    glm = glm_omp(X, Y, groups, loss=squared, l2=1e-3)
    assert glm.order.tolist() == omp.order.tolist()
    np.testing.assert_allclose(glm.coef, omp.coef, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("seed", [2, 3])
def test_logistic_matches_sklearn_refits_and_naive_order(seed, x64):
    X, y, ids, costs = grouped_data(seed)
    l2 = 1e-2
    groups = js.Groups.from_ids(ids, costs)
    path = glm_omp(X, y, groups, loss="logistic", l2=l2)
    info = path.info
    assert bool(info.converged.all()) and int(path.status) == 0
    assert path.coef.dtype == np.float64
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
    assert 0 < float(np.asarray(path.objective)[0]) < 1


def test_logistic_float32_default_path_matches_float64():
    """The default float32 path: converged refits, the float64 order, models to float32 accuracy."""
    X, y, ids, costs = grouped_data(2)
    path = glm_omp(X, y, js.Groups.from_ids(ids, costs), l2=1e-2)
    info = path.info
    assert path.coef.dtype == np.float32 and path.objective.dtype == np.float32
    assert bool(info.converged.all()) and int(path.status) == 0
    assert int(info.n_iter.max()) < 10  # warm-started Newton reaches the float32 tolerance quickly
    with jax.enable_x64():
        ref = glm_omp(X, y, js.Groups.from_ids(ids, costs), l2=1e-2)
        ref_scores = np.asarray(js.predict(ref, X))
    assert path.order.tolist() == ref.order.tolist()
    np.testing.assert_allclose(np.asarray(js.predict(path, X)), ref_scores, atol=2e-3)
    np.testing.assert_allclose(path.objective, np.asarray(ref.objective), atol=1e-4)


def test_softmax_matches_sklearn_multinomial(x64):
    X, y, ids, costs = grouped_data(4, kind="softmax")
    l2 = 1e-2
    groups = js.Groups.from_ids(ids, costs)
    path = glm_omp(X, y, groups, loss="softmax", l2=l2)
    assert path.coef.shape == (len(SIZES), X.shape[1], 3)
    assert int(path.link) == 2
    Z = np.asarray(whiten_design(X, groups)[0].Z)
    order = path.order.tolist()
    assert order == naive_glm_omp(Z, y, ids, costs, l2, "softmax")
    proba = np.asarray(glm_predict(path, X))  # (m, n, 3): the path's softmax link, no loss argument
    np.testing.assert_allclose(proba.sum(-1), 1.0, rtol=1e-12)
    for j in (0, 2, len(order) - 1):
        cols = prefix_columns(Z, ids, order, j)
        ref = fit_sklearn(Z[:, cols], y, l2).predict_proba(Z[:, cols])
        np.testing.assert_allclose(proba[j], ref, atol=2e-5)
    # Intercept-only model: the class frequencies.
    e = np.exp(np.asarray(path.null_intercept) - np.max(np.asarray(path.null_intercept)))
    null = e / e.sum()  # softmax of the null intercepts
    np.testing.assert_allclose(null, np.bincount(y) / len(y), atol=1e-7)


@pytest.mark.parametrize("loss", ["softmax", "multilabel", "callable"])
def test_cg_newton_equals_cholesky_newton(loss, x64):
    """The Hessian-free (CG) Newton refit reaches the same models as the exact Cholesky one."""
    kind = "softmax" if loss == "softmax" else ("regression" if loss == "callable" else "logistic")
    X, y, ids, costs = grouped_data(5, kind=kind)
    if loss == "multilabel":  # two logistic columns sharing the groups
        y = np.stack([y, (X[:, 3] > np.median(X[:, 3])).astype(np.int64)], axis=1)
    fn = _log_cosh if loss == "callable" else ("logistic" if loss == "multilabel" else loss)
    groups = js.Groups.from_ids(ids, costs)
    kw = dict(loss=fn, l2=1e-2)
    exact = glm_omp(X, y, groups, newton=js.NewtonOptions(tol=1e-9, solver="cholesky"), **kw)
    cg = glm_omp(X, y, groups, newton=js.NewtonOptions(tol=1e-9, solver="cg"), **kw)
    info_exact, info_cg = exact.info, cg.info
    assert cg.order.tolist() == exact.order.tolist()
    assert bool(np.all(np.asarray(info_cg.converged))) and bool(np.all(np.asarray(info_exact.converged)))
    np.testing.assert_allclose(info_cg.loss, info_exact.loss, rtol=1e-10)
    np.testing.assert_allclose(cg.coef, exact.coef, atol=1e-6)
    np.testing.assert_allclose(cg.intercept, exact.intercept, atol=1e-6)


def test_newton_solver_auto_and_validation():
    X, y, ids, costs = grouped_data(6, kind="softmax")
    with pytest.raises(ValueError, match="newton_solver"):
        glm_omp(X, y, loss="softmax", newton=js.NewtonOptions(solver="lbfgs"))
    # (P+1)·T = (9+3+1)·3 here: "auto" is the exact solver and equals it
    a = glm_omp(X, y, js.Groups.from_ids(ids, costs), loss="softmax")
    b = glm_omp(X, y, js.Groups.from_ids(ids, costs), loss="softmax", newton=js.NewtonOptions(solver="cholesky"))
    np.testing.assert_array_equal(a.coef, b.coef)


def _fd_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


@pytest.mark.parametrize("loss", ["logistic", "softmax", "squared", "callable"])
def test_risk_gradient_eq22_matches_finite_differences(loss, x64):
    rng = np.random.default_rng(5)
    n, D, T = 40, 5, 3
    Z = jnp.asarray(rng.normal(size=(n, D)))
    if loss == "softmax":
        Y = jnp.asarray(np.eye(T)[rng.integers(0, T, n)])  # one-hot rows (float64: x64 is on)
    elif loss == "logistic":
        Y = jnp.asarray(rng.integers(0, 2, (n, T)).astype(float))
    else:
        Y = jnp.asarray(rng.normal(size=(n, T)))
    parts = glm_loss(_log_cosh if loss == "callable" else loss)
    active = jnp.asarray([True, True, False, True, True])
    l2 = 0.3
    V = rng.normal(size=(D, T)) * np.asarray(active)[:, None]
    b = rng.normal(size=T)
    gV, gb = glm_risk_grad(Z, Y, jnp.asarray(V), jnp.asarray(b), active, l2, parts)
    risk = jax.jit(lambda v, c: glm_risk(Z, Y, v, c, active, l2, parts))
    fd_V = _fd_grad(lambda v: float(risk(jnp.asarray(v), jnp.asarray(b))), V) * np.asarray(active)[:, None]
    np.testing.assert_allclose(gV, fd_V, atol=1e-7)
    np.testing.assert_allclose(gb, _fd_grad(lambda c: float(risk(jnp.asarray(V), jnp.asarray(c))), b), atol=1e-7)


def test_callable_scalar_mean_loss_equals_builtin_logistic():
    X, y, ids, costs = grouped_data(6)
    groups = js.Groups.from_ids(ids, costs)

    def mean_logistic(S, Y):
        return jnp.mean(jnp.sum(jax.nn.softplus(S) - Y * S, axis=1))

    a = glm_omp(X, y, groups, loss="logistic", l2=1e-2)
    b = glm_omp(X, y, groups, loss=mean_logistic, l2=1e-2)
    assert a.order.tolist() == b.order.tolist()
    assert int(a.link) == 1 and int(b.link) == 0  # a callable loss has the identity link
    np.testing.assert_allclose(a.coef, b.coef, atol=1e-4)


# --------------------------------------------------------------------------------------------- conventions


def test_label_codings_are_equivalent():
    """Binary labels {0, 1}, {−1, +1}, bool and (n, 1) give one path; softmax takes (n, 1) and bool."""
    X, y, ids, costs = grouped_data(7)
    groups = js.Groups.from_ids(ids, costs)
    ref = glm_omp(X, y, groups, l2=1e-2)
    for labels in (2 * y - 1, y.astype(bool), y[:, None], (2 * y - 1).astype(np.float32)):
        other = glm_omp(X, labels, groups, l2=1e-2)
        assert other.order.tolist() == ref.order.tolist()
        np.testing.assert_array_equal(other.coef, ref.coef)
    # several label columns, each in its own coding
    Y2 = np.stack([2 * y - 1, (X[:, 3] > np.median(X[:, 3]))], axis=1)
    multi = glm_omp(X, Y2, groups, l2=1e-2)
    Y01 = np.stack([y, (X[:, 3] > np.median(X[:, 3])).astype(int)], axis=1)
    np.testing.assert_array_equal(multi.coef, glm_omp(X, Y01, groups, l2=1e-2).coef)
    # softmax: (n,) == (n, 1)
    ys = np.digitize(X[:, 0], np.quantile(X[:, 0], [0.3, 0.7]))
    a = glm_omp(X, ys, groups, loss="softmax")
    b = glm_omp(X, ys[:, None], groups, loss="softmax")
    np.testing.assert_array_equal(a.coef, b.coef)


@pytest.mark.parametrize(
    "loss,labels,match",
    [
        ("logistic", [0, 1, 2], "binary labels.*multiclass"),
        ("logistic", [0.5, 1.0], "binary labels"),
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
    with pytest.raises(ValueError, match="k must be"):
        glm_omp(X, y, k=0)
    with pytest.raises(TypeError, match="max_steps"):
        glm_omp(X, y, max_steps=2)  # renamed to k
    with pytest.raises(ValueError, match="constant_columns"):
        glm_omp(X, y, constant_columns="drop")
    with pytest.raises(ValueError, match="one per row"):
        glm_omp(X, y[:10])
    with pytest.raises(ValueError, match="at least 2 rows"):
        glm_omp(X[:1], y[:1])
    with pytest.raises(ValueError, match="NaN"):
        glm_omp(np.where(X > 1, np.nan, X), y)
    with pytest.raises(ValueError, match="per-example losses"):
        glm_omp(X, y, loss=lambda S, Y: S)
    with pytest.raises(ValueError, match="1-D"):
        glm_omp(X, np.eye(3)[y], loss="softmax")
    with pytest.raises(ValueError, match="n_classes"):
        glm_omp(X, y, loss="softmax", n_classes=1)
    with pytest.raises(ValueError, match="reshape"):
        glm_omp(X[:, 0], y)


def test_constant_columns_inert_multilabel_and_budgets():
    rng = np.random.default_rng(8)
    n = 120
    base = rng.normal(size=(n, 4))
    # group 0: a feature and its duplicate (rank 1); group 1: a constant column + a real one;
    # group 4: only a constant column (never selected: its step stays empty).
    X = np.column_stack(
        [base[:, 0], 2 * base[:, 0] + 1, np.full(n, 3.0), base[:, 1], base[:, 2], base[:, 3], np.full(n, -1.0)]
    )
    ids = np.array([0, 0, 1, 1, 2, 3, 4])
    costs = np.array([1.0, 2.0, 1.0, 5.0, 0.5])
    Y = np.column_stack([(base[:, 0] + 0.3 * rng.normal(size=n) > 0), (base[:, 3] - base[:, 1] > 0)]).astype(int)
    with pytest.raises(ValueError, match="constant"):
        glm_omp(X, Y, js.Groups.from_ids(ids, costs), constant_columns="raise")
    with pytest.warns(UserWarning, match=r"glm_omp: k=10 is larger than the number of usable groups of X \(4;"):
        assert glm_omp(X, Y, js.Groups.from_ids(ids, costs), l2=1e-2, k=10).n_steps == 4
    path = glm_omp(X, Y, js.Groups.from_ids(ids, costs), l2=1e-2)  # k=None: all J = 5 steps
    info = path.info
    assert path.n_steps == 5 and sorted(path.order.tolist()[:4]) == [0, 1, 2, 3]
    coef = np.asarray(path.coef)
    assert path.order.tolist()[4] == -1 and np.isinf(float(np.asarray(path.cum_cost)[4]))
    assert path.coef.shape == (5, 7, 2)
    assert bool(np.isfinite(coef).all()) and bool(np.asarray(info.converged).all()) and int(path.status) == 0
    assert float(np.abs(coef[:, [2, 6]]).max()) == 0.0  # the constant columns are never used
    np.testing.assert_array_equal(coef[4], coef[3])  # the empty step keeps the model
    # the duplicate pair shares one whitened direction: equal standardised weights, so raw
    # coefficients in the ratio of the column scales (x1 = 2·x0 + 1 → coef0 = 2·coef1)
    j0 = path.order.tolist().index(0)
    c = coef[j0, :2, 0]
    assert abs(c[0]) > 0
    np.testing.assert_allclose(c[0], 2 * c[1], rtol=1e-4)
    # budget semantics: below the cheapest group the intercept-only model (label frequencies)
    p0 = np.asarray(glm_predict(path, X, budget=0.4))
    np.testing.assert_allclose(p0, np.broadcast_to(Y.mean(0), p0.shape), atol=1e-4)  # float32 tol 1e-4
    p_all = np.asarray(glm_predict(path, X, budget=1e9))
    np.testing.assert_allclose(p_all, np.asarray(glm_predict(path, X))[3], rtol=1e-6)
    curve = glm_accuracy(path, X, Y)
    assert curve.value.shape == (5,) and curve.value[-1] > curve.value[0]


def test_digits_softmax_as_written():
    """sklearn digits (constant border pixels) in 2×2 blocks: works with the defaults."""
    datasets = pytest.importorskip("sklearn.datasets")
    d = datasets.load_digits()
    r, c = np.divmod(np.arange(64), 8)
    blocks = js.Groups.from_ids((r // 2) * 4 + c // 2)
    path = glm_omp(d.data, d.target, blocks, loss="softmax", k=6)
    js.raise_for_status(path)
    constant = d.data.max(0) == d.data.min(0)
    assert constant.any() and float(np.abs(np.asarray(path.coef)[:, constant]).max()) == 0.0
    probs = glm_predict(path, d.data, budget=4.0)
    assert probs.shape == (1797, 10)
    np.testing.assert_allclose(np.asarray(probs).sum(1), 1.0, rtol=1e-5)
    acc = glm_accuracy(path, d.data, d.target)
    assert acc.value[0] < 0.2 and acc.value[4] > 0.9


# --------------------------------------------------------------------------------------------- jit, compiles, status


def test_runs_inside_user_jit_with_traced_data():
    X, y, ids, costs = grouped_data(9)
    groups = js.Groups.from_ids(ids, costs)
    eager = glm_omp(X, y, groups, l2=1e-2)
    fit = jax.jit(lambda X, y, l2: glm_omp(X, y, groups, l2=l2))  # traced data and a traced l2
    traced = fit(X.astype(np.float32), y, jnp.float32(1e-2))
    assert traced.order.tolist() == eager.order.tolist()
    np.testing.assert_allclose(traced.coef, eager.coef, rtol=1e-4, atol=1e-5)
    # traced ±1 labels are binary labels too (y > 0); a larger l2 shrinks the model
    pm = fit(X.astype(np.float32), 2 * y - 1, jnp.float32(1e-2))
    np.testing.assert_allclose(pm.coef, eager.coef, rtol=1e-4, atol=1e-5)
    shrunk = fit(X.astype(np.float32), y, jnp.float32(1.0))
    assert float(np.abs(np.asarray(shrunk.coef)[-1]).sum()) < float(np.abs(np.asarray(eager.coef)[-1]).sum())
    # softmax needs n_classes when the labels are traced
    ys = np.digitize(X[:, 1], np.quantile(X[:, 1], [0.3, 0.7]))
    with pytest.raises(ValueError, match="n_classes"):
        jax.jit(lambda y: glm_omp(X, y, groups, loss="softmax"))(ys)
    soft = jax.jit(lambda X, y: glm_omp(X, y, groups, loss="softmax", n_classes=3))(X.astype(np.float32), ys)
    ref = glm_omp(X, ys, groups, loss="softmax")
    assert soft.order.tolist() == ref.order.tolist()
    np.testing.assert_allclose(soft.coef, ref.coef, rtol=1e-4, atol=1e-5)


def test_no_recompile_for_equal_arguments():
    X, y, ids, costs = grouped_data(10)

    def run(loss):
        path = glm_omp(np.array(X), np.array(y, float), js.Groups.from_ids(ids, costs), loss=loss)
        return jax.block_until_ready(path)

    for make in (lambda: "logistic", lambda: lambda S, Y: jnp.sum(jnp.logaddexp(S - Y, Y - S), axis=1)):
        run(make())
        with count_compiles() as compiles:
            run(make())  # fresh arrays, fresh Groups, and for the callable a fresh (equal) lambda
        assert compiles[0] == 0


def test_status_reports_non_convergence_and_nonfinite():
    X, y, ids, costs = grouped_data(11)
    groups = js.Groups.from_ids(ids, costs)
    path = glm_omp(X, y, groups, l2=1e-3, newton=js.NewtonOptions(max_iter=1))
    info = path.info
    assert int(path.status) & js.status.NOT_CONVERGED
    assert not bool(info.converged.all()) and np.all(np.asarray(info.n_iter) <= 1)
    with pytest.raises(js.SolverError, match="iteration cap"):
        js.raise_for_status(path)
    ok = glm_omp(X, y, groups, l2=1e-3)
    assert int(ok.status) == 0 and js.raise_for_status(ok) is ok
    bad = glm_omp(X, y, groups, k=2, loss=lambda S, Y: jnp.sum(jnp.sqrt(S - 1.0), axis=1))
    assert int(bad.status) & js.status.NONFINITE


def test_newton_float32_reaches_its_scale_aware_tolerance():
    """float32 refits converge on a larger problem and on squared-loss targets of any scale."""
    rng = np.random.default_rng(12)
    n, d = 2000, 12
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 10, d) + rng.normal(scale=20, size=d)
    score = X[:, :4] @ rng.normal(size=4) / X[:, :4].std(0).mean()
    y = (score + rng.logistic(size=n) > 0).astype(int)
    path = glm_omp(X, y, l2=1e-4)
    info = path.info
    assert int(path.status) == 0 and bool(info.converged.all()), (info.grad_norm, info.n_iter)
    t = score + rng.normal(size=n)
    a = glm_omp(X, t, loss="squared", k=4)
    b = glm_omp(X, 1e4 * t + 3e4, loss="squared", k=4)
    info_b = b.info
    assert int(b.status) == 0 and bool(info_b.converged.all())
    assert a.order.tolist() == b.order.tolist()
    np.testing.assert_allclose(b.coef, 1e4 * np.asarray(a.coef), rtol=1e-3, atol=1e-2)


# --------------------------------------------------------------------------------------------- advanced API, predict


def test_init_step_api_reproduces_glm_omp():
    X, y, ids, costs = grouped_data(13)
    groups = js.Groups.from_ids(ids, costs)
    path = glm_omp(X, y, groups, l2=1e-2)
    problem = glm_problem(X, y, groups, l2=1e-2)
    assert "Z=DenseDesign(X=float32[150, 9]" in repr(problem)
    capacity = sum(SIZES) + max(SIZES)
    state = jax.jit(lambda p: glm_omp_init(p, capacity))(problem)
    np.testing.assert_allclose(state.b, path.null_intercept, atol=1e-5)
    # after the init, state.info is iteration 0's: the intercept-only fit (group −1, cost +inf, W = 0)
    assert int(state.info.group) == -1 and np.isinf(float(state.info.cum_cost)) and not np.any(np.asarray(state.info.W))
    np.testing.assert_array_equal(state.info.b, state.b)
    np.testing.assert_allclose(state.info.loss, path.info.null_loss, rtol=1e-5)
    step = jax.jit(glm_omp_step)
    order, cum_cost, loss = (np.asarray(a) for a in (path.order, path.cum_cost, path.info.loss))
    for j in range(path.n_steps):
        state = step(problem, state)  # the state only; the step's GLMStepInfo is state.info
        out = state.info
        assert int(out.group) == int(order[j])
        assert float(out.cum_cost) == pytest.approx(float(cum_cost[j]), rel=1e-6)
        np.testing.assert_allclose(out.loss, loss[j], rtol=1e-5)
    assert int(state.status) == 0 and int(state.step) == path.n_steps and "V=float32" in repr(state)
    state = step(problem, state)  # nothing left: an empty step
    assert int(state.info.group) == -1 and np.isinf(float(state.info.cum_cost))
    run_path = glm_omp_run(problem)
    np.testing.assert_array_equal(run_path.coef, path.coef)
    assert f"n_iter=int32[{path.n_steps}]" in repr(run_path.info)
    assert problem.config.loss == "logistic" and problem.config.newton_solver == "auto"


def test_return_info_is_deprecated_but_still_works():
    X, y, ids, costs = grouped_data(13)
    path = glm_omp(X, y, l2=1e-2, k=2)
    assert isinstance(path.info, js.GLMInfo) and path.info.loss.shape == (2,)
    with pytest.warns(DeprecationWarning, match="path.info"):
        old, info = glm_omp(X, y, l2=1e-2, k=2, return_info=True)
    np.testing.assert_array_equal(old.coef, path.coef)
    np.testing.assert_array_equal(info.loss, path.info.loss)
    with pytest.warns(DeprecationWarning):
        assert isinstance(glm_omp(X, y, l2=1e-2, k=2, return_info=False), js.SelectionPath)


def test_glm_predict_uses_the_path_link_and_runs_traced():
    X, y, ids, costs = grouped_data(14)
    groups = js.Groups.from_ids(ids, costs)
    logit = glm_omp(X, y, groups)
    scores = js.predict(logit, X, budget=3.0)
    np.testing.assert_allclose(glm_predict(logit, X, budget=3.0), jax.nn.sigmoid(scores), rtol=1e-6)
    traced = jax.jit(lambda p, X, B: glm_predict(p, X, budget=B))(logit, X.astype(np.float32), jnp.float32(3.0))
    np.testing.assert_allclose(traced, glm_predict(logit, X, budget=3.0), rtol=1e-6)
    # a regression path (identity link) predicts its scores
    reg = js.cs_omp(js.prepare(X, X[:, 0] - X[:, 4], groups), k=2)
    np.testing.assert_allclose(glm_predict(reg, X), js.predict(reg, X), rtol=1e-6)
    with pytest.raises(TypeError, match="loss"):
        glm_predict(logit, X, loss="logistic")  # the loss argument is gone: the path carries its link
    with pytest.raises(ValueError, match="classification path"):
        glm_accuracy(reg, X, y)


def test_cost_blind_and_accuracy_curve_on_pima():
    data = js.datasets.load_pima()
    groups = js.Groups.from_ids(data.groups, data.costs)
    cs = glm_omp(data.X, data.y, groups, l2=1e-3)
    blind = glm_omp(data.X, data.y, groups, l2=1e-3, cost_sensitive=False)
    assert int(cs.status) == 0 and int(blind.status) == 0
    # Cost-sensitive sequencing is cheaper at the start; cost-blind picks the best group first.
    assert float(np.asarray(cs.cum_cost)[0]) <= float(np.asarray(blind.cum_cost)[0])
    assert float(np.asarray(blind.objective)[0]) >= float(np.asarray(cs.objective)[0])
    acc = glm_accuracy(blind, data.X, data.y)
    assert acc.value[0] == pytest.approx(max(data.y.mean(), 1 - data.y.mean()))
    assert acc.value[-1] > 0.75


def test_progress_bar_gives_the_same_path(monkeypatch):
    pytest.importorskip("tqdm")
    from jaxselect import _progress

    monkeypatch.setattr(_progress, "N_UPDATES", 2)
    X, y, ids, costs = grouped_data(13)
    groups = js.Groups.from_ids(ids, costs)
    path = glm_omp(X, y, groups, l2=1e-2)
    updates = []
    monkeypatch.setattr(_progress, "progress_bar", lambda total, desc: _Bar(updates))
    chunked = glm_omp(X, y, groups, l2=1e-2, progress=True)
    assert sum(updates) == path.n_steps and len(updates) == 2
    assert chunked.order.tolist() == path.order.tolist()
    np.testing.assert_allclose(chunked.coef, path.coef, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(chunked.info.n_iter, path.info.n_iter)


class _Bar:
    """A stand-in for tqdm that records the updates."""

    def __init__(self, updates):
        self.updates = updates

    def update(self, n):
        self.updates.append(n)

    def close(self):
        pass


def test_loose_newton_keywords_are_deprecated_but_give_the_same_path():
    """tol / max_iter / newton_solver still work for one release (a DeprecationWarning naming
    NewtonOptions each) and equal the record; k is positional-or-keyword right after groups."""
    X, y, ids, costs = grouped_data(7)
    groups = js.Groups.from_ids(ids, costs)
    new = glm_omp(X, y, groups, 3, l2=1e-2, newton=js.NewtonOptions(tol=1e-6, max_iter=20, solver="cg"))
    with pytest.warns(DeprecationWarning, match="NewtonOptions") as caught:
        old = glm_omp(X, y, groups, l2=1e-2, k=3, tol=1e-6, max_iter=20, newton_solver="cg")
    assert len([w for w in caught if issubclass(w.category, DeprecationWarning)]) == 3
    assert all(w.filename == __file__ for w in caught)  # the warning points at the caller
    np.testing.assert_array_equal(old.coef, new.coef)
    np.testing.assert_array_equal(old.info.n_iter, new.info.n_iter)
    with pytest.raises(TypeError, match="unexpected keyword argument 'tolerance'"):
        glm_omp(X, y, groups, tolerance=1e-3)
    with pytest.raises(TypeError, match="NewtonOptions"):
        glm_omp(X, y, groups, newton={"tol": 1e-3})


def test_prepare_then_run_equals_the_one_call():
    """glm_prepare -> glm_omp_run is the split glm_omp fuses into one program (same path)."""
    X, y, ids, costs = grouped_data(8)
    groups = js.Groups.from_ids(ids, costs)
    path = glm_omp(X, y, groups, 3, l2=1e-2)
    problem = js.glm_prepare(X, y, groups, l2=1e-2)
    assert js.sequencing.glm_problem is js.glm_prepare
    split = js.glm_omp_run(problem, 3)
    assert split.order.tolist() == path.order.tolist()
    np.testing.assert_allclose(split.coef, path.coef, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(split.objective, path.objective, rtol=1e-6)
