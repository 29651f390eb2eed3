"""FSA's polish (jaxselect/anneal/polish.py): the converged fit on the final support.

Checked against independent references (scikit-learn's LogisticRegression and numpy least
squares / a numpy Newton on the selected columns), with the support unchanged, F never above the
schedule's end, NOT_CONVERGED at a tiny cap, integer weights == repeated rows, jit == eager, the
implicit derivative against finite differences, and one compiled polish per shape.
"""

import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from compile_count import count_compiles

import jaxselect as js
from jaxselect.anneal import fsa_prepare, k_bucket
from jaxselect.anneal.schedule import SHARED_WIDTH
from jaxselect.anneal.polish import polish

import reference_fsa as ref


N, M, K, NITER = 300, 24, 3, 60
TRUE = [3, 11, 17]


def _problem(seed=0, strength=(4.0, 2.0, -2.0)):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, M)) * rng.uniform(0.5, 2.0, M) + rng.normal(size=M)
    lin = (X[:, TRUE] - X[:, TRUE].mean(0)) / X[:, TRUE].std(0) @ np.array(strength)
    labels = (lin + rng.logistic(size=N) > 0).astype(np.int32)
    y = lin + 0.5 * rng.standard_normal(N)
    return X.astype(np.float32), y.astype(np.float32), labels


def _margin_loss(loss, m, h=0.1):
    if loss == "logistic":
        return np.logaddexp(0.0, -m)
    if loss == "lorenz":
        d = np.minimum(m - 1.0, 0.0)
        return np.log1p(d * d)
    return np.where(m > 1 + h, 0.0, np.where(m < 1 - h, 1 - m, (1 + h - m) ** 2 / (4 * h)))


def _objective(X, target, res, loss, pairs=None):
    """F with l2 = 0 in float64 on the raw columns (numpy, independent of the library)."""
    s = np.asarray(X, np.float64)[:, np.asarray(res.support)] @ np.asarray(res.coef, np.float64)
    s = s + float(res.intercept)
    if loss == "squared":
        return 0.5 * np.mean((np.asarray(target, np.float64) - s) ** 2)
    if loss == "ranking":
        i, j = pairs[:, 0].astype(int), pairs[:, 1].astype(int)
        d = s[i] - s[j]
        return np.mean(np.logaddexp(0.0, d) - pairs[:, 2] * d)
    sign = np.where(np.asarray(target) > 0, 1.0, -1.0)
    return np.mean(_margin_loss(loss, sign * s))


def test_logistic_matches_scikit_learn_on_the_support():
    from sklearn.linear_model import LogisticRegression

    X, _, labels = _problem()
    raw = js.fsa(X, labels, K, loss="logistic", n_iter=NITER, polish=False)
    res = js.fsa(X, labels, K, loss="logistic", n_iter=NITER)
    assert res.support.tolist() == raw.support.tolist() == TRUE and int(res.status) == 0
    ref_fit = LogisticRegression(C=1e12, tol=1e-12, max_iter=10_000).fit(np.asarray(X, np.float64)[:, TRUE], labels)
    # float32 on a flat optimum: F agrees to ~1e-8, the coefficients to a few 1e-4
    ref = res._replace(coef=ref_fit.coef_[0], intercept=ref_fit.intercept_[0])
    assert _objective(X, labels, res, "logistic") == pytest.approx(_objective(X, labels, ref, "logistic"), rel=1e-6)
    np.testing.assert_allclose(res.coef, ref_fit.coef_[0], rtol=5e-4, atol=1e-4)
    np.testing.assert_allclose(res.intercept, ref_fit.intercept_[0], rtol=5e-4, atol=1e-4)
    # the schedule's last iterate is visibly short of it (what the polish is for)
    assert np.max(np.abs(np.asarray(raw.coef) - ref_fit.coef_[0])) > 20 * np.max(np.abs(np.asarray(res.coef) - ref_fit.coef_[0]))


def test_logistic_with_l2_matches_a_numpy_newton_on_standardized_columns():
    X, _, labels = _problem(1)
    l2 = 0.05
    res = js.fsa(X, labels, K, loss="logistic", n_iter=NITER, l2=l2)
    Z, mean, inv = ref.standardize(np.asarray(X, np.float64)[:, np.asarray(res.support)])
    A = np.c_[Z, np.ones(N)]
    yb = labels.astype(np.float64)
    theta = np.zeros(K + 1)
    pen = np.r_[np.full(K, l2), 0.0]
    for _ in range(50):  # plain Newton: mean logistic + (l2/2)‖c‖², unpenalised intercept
        p = 1.0 / (1.0 + np.exp(-A @ theta))
        g = A.T @ (p - yb) / N + pen * theta
        H = (A * (p * (1 - p))[:, None]).T @ A / N + np.diag(pen)
        theta -= np.linalg.solve(H, g)
    coef = theta[:K] * inv
    np.testing.assert_allclose(res.coef, coef, rtol=2e-4, atol=1e-4)
    np.testing.assert_allclose(res.intercept, theta[K] - mean @ coef, rtol=2e-4, atol=1e-4)


@pytest.mark.parametrize("l2", [0.0, 0.1])
def test_squared_is_the_least_squares_fit_on_the_support(l2):
    X, y, _ = _problem(2)
    res = js.fsa(X, y, K, n_iter=NITER, l2=l2)
    assert res.support.tolist() == TRUE and int(res.status) == 0
    coef, intercept = ref.ridge(np.asarray(X)[:, TRUE], y, l2)
    np.testing.assert_allclose(res.coef, coef, rtol=2e-4, atol=1e-4)
    np.testing.assert_allclose(res.intercept, intercept, rtol=2e-4, atol=1e-4)


@pytest.mark.parametrize("loss", ["squared", "logistic", "huber_hinge", "lorenz", "ranking"])
def test_support_unchanged_and_objective_never_rises(loss):
    X, y, labels = _problem(3)
    kw = {}
    target = y if loss == "squared" else labels
    if loss == "ranking":
        ij = np.random.default_rng(0).integers(0, N, (600, 2))
        pairs = np.c_[ij, (y[ij[:, 0]] > y[ij[:, 1]]).astype(np.float64)]
        kw, target = dict(pairs=pairs), None
    raw = js.fsa(X, target, K, loss=loss, n_iter=20, polish=False, **kw)
    res = js.fsa(X, target, K, loss=loss, n_iter=20, **kw)
    assert res.support.tolist() == raw.support.tolist() and int(res.status) == 0
    pairs = kw.get("pairs")
    before, after = _objective(X, target, raw, loss, pairs), _objective(X, target, res, loss, pairs)
    assert after <= before + 1e-6 * abs(before)
    if loss in ("logistic", "huber_hinge", "ranking"):  # the short schedule left room: a clearly lower F
        assert after < before - 1e-5


def test_pl_learners_polish_on_request_and_objective_never_rises():
    X, y, labels = _problem(4)
    kw = dict(loss="logistic", n_iter=NITER, bins=4, l2=1e-2, smoothness=1e-2)
    default = js.fsa(X, labels, K, **kw)
    raw = js.fsa(X, labels, K, polish=False, **kw)
    np.testing.assert_array_equal(default.coef, raw.coef)  # PL learners: no polish by default
    res = js.fsa(X, labels, K, polish=True, **kw)
    assert res.support.tolist() == raw.support.tolist() and int(res.status) == 0
    problem = fsa_prepare(X, labels, loss="logistic", bins=4, l2=1e-2, smoothness=1e-2)
    objective = _pl_objective(problem, X)
    assert objective(res) < objective(raw) - 1e-6


def _pl_objective(problem, X):
    from jaxselect.anneal.step import prior

    def F(res):
        scores = js.predict(res, X)
        coef = jnp.asarray(res.coef)
        return float(problem.config.loss_fn(scores, problem.target) + prior(coef, problem.l2, problem.smoothness))

    return F


def test_tiny_max_iter_reports_not_converged():
    X, _, labels = _problem(5)
    with pytest.warns(RuntimeWarning, match="max_iter"):
        res = js.fsa(X, labels, K, loss="logistic", n_iter=NITER, max_iter=1, tol=1e-7)
    assert int(res.status) == js.NOT_CONVERGED
    with pytest.raises(js.SolverError):
        js.raise_for_status(res)
    full = js.fsa(X, labels, K, loss="logistic", n_iter=NITER)
    assert int(full.status) == 0 and full.support.tolist() == res.support.tolist()


def test_integer_weights_equal_repeated_rows():
    X, _, labels = _problem(6)
    w = np.random.default_rng(0).integers(0, 3, N)
    rows = np.repeat(np.arange(N), w)
    a = js.fsa(X, labels, K, loss="logistic", n_iter=NITER, sample_weight=w.astype(np.float32))
    b = js.fsa(X[rows], labels[rows], K, loss="logistic", n_iter=NITER)
    assert a.support.tolist() == b.support.tolist()
    np.testing.assert_allclose(a.coef, b.coef, rtol=5e-4, atol=2e-4)
    np.testing.assert_allclose(a.intercept, b.intercept, rtol=5e-4, atol=2e-4)


@pytest.mark.parametrize("loss", ["logistic", "ranking"])
def test_jit_equals_eager(loss):
    X, y, labels = _problem(7)
    kw = {}
    if loss == "ranking":
        ij = np.random.default_rng(1).integers(0, N, (400, 2))
        kw = dict(pairs=np.c_[ij, (y[ij[:, 0]] > y[ij[:, 1]]).astype(np.float64)])
    target = None if loss == "ranking" else labels
    problem = fsa_prepare(X, target, loss=loss, **kw)
    raw = js.fsa(X, target, K, loss=loss, n_iter=20, polish=False, **kw)
    cols = jnp.asarray(raw.support)
    inv = np.asarray(problem.design.factor)[raw.support]
    coef = jnp.asarray((np.asarray(raw.coef) / inv)[:, None], jnp.float32)
    shift = float(np.asarray(problem.design.mean)[raw.support] @ np.asarray(raw.coef))
    intercept = jnp.asarray(float(raw.intercept) + shift, jnp.float32)
    args = (problem, cols, coef, intercept, jnp.ones((K,), bool), jnp.asarray(1e-5, jnp.float32), jnp.asarray(50, jnp.int32))
    fit = polish(*args)
    with jax.disable_jit():
        eager = polish(*args)
    assert int(fit.status) == int(eager.status) == 0 and bool(fit.converged)
    assert int(fit.n_iter) > 0
    np.testing.assert_allclose(fit.coef, eager.coef, rtol=1e-4, atol=1e-5)
    if loss == "ranking":  # the pairwise loss does not see the intercept: it stays at its start, 0, up to rounding
        np.testing.assert_allclose([float(fit.intercept), float(eager.intercept)], 0.0, atol=5e-5)
    else:
        np.testing.assert_allclose(fit.intercept, eager.intercept, rtol=1e-4, atol=1e-5)
    assert float(fit.objective) <= float(fit.start_objective)


def test_implicit_derivative_matches_finite_differences(x64):
    X, y, _ = _problem(8)
    X, y = X.astype(np.float64), y.astype(np.float64)
    kw = dict(loss="logistic", n_iter=NITER, l2=0.02)
    labels = jnp.asarray(y > np.median(y), jnp.float64)

    def f(X):
        return jnp.sum(js.fsa(X, labels, K, **kw).coef * jnp.arange(1.0, K + 1.0))

    direction = np.random.default_rng(0).standard_normal(X.shape)
    g = float(np.vdot(np.asarray(jax.grad(f)(jnp.asarray(X))), direction))
    eps = 1e-5
    fd = (float(f(jnp.asarray(X + eps * direction))) - float(f(jnp.asarray(X - eps * direction)))) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-4)


def test_one_polish_program_per_shape():
    X, _, labels = _problem(9)
    compiled = sys.modules["jaxselect.anneal.polish"]._polish  # the jitted solve
    js.fsa(X, labels, 9, loss="logistic", n_iter=NITER)
    programs = compiled._cache_size()
    assert k_bucket(9, M) == k_bucket(10, M)
    with count_compiles() as compiles:
        js.fsa(X, labels, 9, loss="logistic", n_iter=NITER, tol=1e-6, max_iter=7, l2=0.1)
    assert compiles[0] == 0
    js.fsa(X, labels, 10, loss="logistic", n_iter=NITER)  # k in the same bucket: the same polish
    assert compiled._cache_size() == programs


@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        (dict(polish="yes"), TypeError, "polish"),
        (dict(tol=0.0), ValueError, "tol"),
        (dict(max_iter=0), ValueError, "max_iter"),
    ],
)
def test_bad_polish_options(kwargs, err, match):
    X, y, _ = _problem()
    with pytest.raises(err, match=match):
        js.fsa(X, y, K, **kwargs)


def test_polish_false_is_the_schedule():
    X, y, _ = _problem(10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = js.fsa(X, y, K, n_iter=NITER, lr=0.05, polish=False)
    out = ref.masked_fsa(X, y, K, n_iter=NITER, mu=300.0, lr=0.05)
    np.testing.assert_array_equal(a.support, out["support"])
    np.testing.assert_allclose(a.coef, out["coef"], rtol=2e-3, atol=2e-4)


# -- the operator polish of sparse designs (compacted support, preconditioned L-BFGS) -------------
def _sparse_problem(seed=0, n=400, m=60):
    rng = np.random.default_rng(seed)
    X = (rng.uniform(size=(n, m)) < np.geomspace(0.6, 0.01, m)).astype(np.float32)
    X[:, :3] = rng.lognormal(size=(n, 3))
    score = X[:, [0, 4, 9, 30]] @ np.array([1.0, 2.0, -2.0, 3.0]) + 0.3 * rng.normal(size=n)
    return X, (score > np.median(score)).astype(np.float32), rng


@pytest.mark.parametrize("loss, weighted", [("logistic", False), ("logistic", True), ("lorenz", False)])
def test_operator_polish_equals_dense_polish(monkeypatch, loss, weighted):
    """A sparse support over the dense budget is polished through the compacted operator: same
    minimiser as the dense Newton polish, at F no larger (to float32 rounding), status 0."""
    import scipy.sparse as sp

    polish_module = sys.modules["jaxselect.anneal.polish"]
    X, labels, rng = _sparse_problem(1)
    w = rng.integers(0, 3, len(X)).astype(np.float32) if weighted else None
    kw = dict(loss=loss, n_iter=40, l2=1e-3, sample_weight=w, scale="sparse", polish=js.anneal.Polish(l1=None, refine=0))
    calls = []
    real = polish_module._polish

    def spy(problem, *args, **kwargs):
        calls.append(problem.design.shape)  # (args: cols, coef, intercept, active, tol, max_iter, compacted)
        return real(problem, *args, **kwargs)

    monkeypatch.setattr(polish_module, "_polish", spy)
    dense = js.fsa(sp.csr_matrix(X), labels, 8, **kw)
    monkeypatch.setattr(polish_module, "DENSE_SUPPORT_BYTES", 0)
    operator = js.fsa(sp.csr_matrix(X), labels, 8, **kw)
    # the dense polish runs inside the one compiled program of the call (seen here only when that
    # program is traced: the full design), the operator polish apart, on the compacted support
    last = max(k_bucket(8, X.shape[1]), min(SHARED_WIDTH, -(-X.shape[1] // 4)))  # a small X's last stage width
    assert calls[-1] == (len(X), last) and all(c == X.shape for c in calls[:-1])
    assert operator.support.tolist() == dense.support.tolist()
    assert int(operator.status) == int(dense.status) == 0
    np.testing.assert_allclose(operator.coef, dense.coef, rtol=5e-3, atol=5e-3)
    np.testing.assert_allclose(operator.intercept, dense.intercept, rtol=5e-3, atol=5e-3)
    f_dense = _objective_l2(X, labels, dense, loss, 1e-3, w)
    f_op = _objective_l2(X, labels, operator, loss, 1e-3, w)
    assert f_op <= f_dense * (1 + 1e-5)
    raw = js.fsa(sp.csr_matrix(X), labels, 8, **dict(kw, polish=False))
    assert _objective_l2(X, labels, raw, loss, 1e-3, w) > f_op * (1 + 1e-3)  # the polish did something


def _objective_l2(X, labels, res, loss, l2, w):
    """F of scale="sparse" in float64: weighted mean margin loss + (l2/2)‖c‖², c the rescaled
    coefficients (c_j = raw_j·σ_j/√f_j)."""
    X = np.asarray(X, np.float64)
    wv = np.ones(len(X)) if w is None else np.asarray(w, np.float64)
    S = np.asarray(res.support)
    mean = wv @ X / wv.sum()
    std = np.sqrt(wv @ (X - mean) ** 2 / wv.sum())
    fill = wv @ (X != 0) / wv.sum()
    raw = np.asarray(res.coef, np.float64)
    s = X[:, S] @ raw + float(res.intercept)
    sign = np.where(labels > 0, 1.0, -1.0)
    c = raw * std[S] / np.sqrt(fill[S])
    return float(wv @ _margin_loss(loss, sign * s) / wv.sum() + 0.5 * l2 * c @ c)
