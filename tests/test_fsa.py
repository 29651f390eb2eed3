"""FSA (Barbu et al.): schedule, compacted solver vs a masked full-width oracle, Theorem 2.1(i),
piecewise-linear learners, ranking, bad input, degenerate data, jit/grad/sharding."""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxselect.anneal import (
    PLGrid,
    annealing_schedule,
    fsa,
    fsa_predict,
    pl_basis_mean,
    pl_encode,
    pl_grid,
    pl_response,
    pl_scores,
    plan_stages,
    schedule_area,
    smoothness_penalty,
)
from jaxselect.losses import squared_loss

import reference_fsa as ref

@pytest.fixture(autouse=True)
def _compact_every_stage(monkeypatch):
    """The tests use small M: compact at every halving (production skips drops < 32 columns)."""
    monkeypatch.setattr(sys.modules["jaxselect.anneal.fsa"], "_MIN_DROP", 0)


# one problem shape for most tests, so that compiled stages are shared between tests
N, M, K, NITER, MU = 80, 16, 4, 40, 10.0
TRUE = [2, 7, 11, 14]


def _problem(seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, M)) * rng.uniform(0.5, 3.0, M) + rng.normal(size=M)
    lin = (X[:, TRUE] / X[:, TRUE].std(0)) @ np.array([1.5, -2.0, 1.0, 1.2])
    y = lin + 0.3 * rng.standard_normal(N)
    labels = (lin + 0.3 * rng.standard_normal(N) > np.median(lin)).astype(np.int32)
    return X.astype(dtype), y.astype(dtype), labels


# --------------------------------------------------------------------------- schedule (eq. 3)
@pytest.mark.parametrize("args", [(1000, 10, 500, 300.0), (1000, 30, 500, 0.0), (24, 3, 40, 10.0), (7, 7, 5, 1.0), (50, 1, 1, 3.0)])
def test_schedule_matches_eq3(args):
    M_, k, n_iter, mu = args
    s = annealing_schedule(M_, k, n_iter, mu)
    np.testing.assert_array_equal(s, ref.schedule(M_, k, n_iter, mu))
    assert s[-1] == k and np.all(np.diff(s) <= 0) and s.min() >= k and s.max() <= M_
    stages = plan_stages(M_, s)
    assert stages[0].start == 0 and sum(st.length for st in stages) == n_iter
    assert all(a.start + a.length == b.start for a, b in zip(stages, stages[1:]))
    widths = [st.width for st in stages]
    assert widths[0] == M_ and all(a > b for a, b in zip(widths, widths[1:]))
    prev = np.concatenate([[M_], s[:-1]])
    for st in stages:  # every stage is wide enough for its active counts, and at most 2x wider
        assert prev[st.start] == st.width and prev[st.start : st.start + st.length].max() <= st.width
    masked_work = sum(st.width * st.length for st in stages)
    assert masked_work <= 2 * schedule_area(M_, s)


def test_min_drop_skips_tiny_compactions():
    s = annealing_schedule(40, 3, 500, 300.0)
    assert [st.width for st in plan_stages(40, s)] == [40, 19, 9, 4, 3]
    assert [st.width for st in plan_stages(40, s, min_drop=32)] == [40, 8]
    big = plan_stages(1000, annealing_schedule(1000, 30, 500, 300.0), min_drop=32)
    assert [st.width for st in big] == [1000, 469, 194, 95, 47]


def test_schedule_area_matches_table1_order():
    # Table I: mu = 300 costs about 5MN + kN N_iter (with M = 1000, k = 10, N_iter = 500)
    s = annealing_schedule(1000, 10, 500, 300.0)
    area = schedule_area(1000, s)
    assert 4 * 1000 + 10 * 500 <= area <= 7 * 1000 + 10 * 500


# --------------------------------------------------------------------------- vs masked oracle
@pytest.mark.parametrize("loss", ["squared", "logistic", "huber_hinge", "lorenz"])
def test_compacted_matches_masked_reference(loss):
    X, y, labels = _problem()
    target = y if loss == "squared" else labels
    lr = 0.5 / ref.lipschitz(X, loss)
    res = fsa(X, target, K, loss=loss, n_iter=NITER, mu=MU, lr=lr, l2=1e-3)
    out = ref.masked_fsa(X, target, K, loss=loss, n_iter=NITER, mu=MU, lr=lr, l2=1e-3)
    np.testing.assert_array_equal(res.support, out["support"])
    np.testing.assert_allclose(res.coef, out["coef"], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(res.intercept, out["intercept"], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(res.loss_path, out["losses"], rtol=1e-8, atol=1e-12)
    np.testing.assert_array_equal(res.n_kept, out["schedule"])
    assert int(res.status) == 0


def test_compacted_matches_masked_reference_pl_smoothness():
    X, y, _ = _problem()
    lr = 0.05
    res = fsa(X, y, K, n_iter=NITER, mu=MU, lr=lr, bins=4, l2=1e-3, smoothness=1e-2)
    out = ref.masked_fsa(X, y, K, n_iter=NITER, mu=MU, lr=lr, bins=4, l2=1e-3, smoothness=1e-2)
    np.testing.assert_array_equal(res.support, out["support"])
    np.testing.assert_allclose(res.coef, out["beta"], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(res.loss_path, out["losses"], rtol=1e-8, atol=1e-12)


def test_compacted_matches_masked_reference_ranking():
    X, y, _ = _problem()
    rng = np.random.default_rng(3)
    ij = rng.integers(0, N, size=(300, 2))
    r = (y[ij[:, 0]] > y[ij[:, 1]]).astype(np.float64)
    res = fsa(X, None, K, loss="ranking", pairs=np.c_[ij, r], n_iter=NITER, mu=MU, lr=0.5)
    out = ref.masked_fsa(X, None, K, loss="ranking", pairs=(ij, r), n_iter=NITER, mu=MU, lr=0.5)
    np.testing.assert_array_equal(res.support, out["support"])
    np.testing.assert_allclose(res.coef, out["coef"], rtol=1e-8, atol=1e-10)
    assert sorted(res.support.tolist()) == TRUE  # ranking recovers the generating features


@pytest.mark.parametrize("jit", [True, False])
def test_float32_and_no_jit(jit):
    X, y, _ = _problem(dtype=np.float32)
    lr = 0.5 / ref.lipschitz(X)
    with jax.disable_jit(not jit):
        res = fsa(X, y, K, n_iter=6, mu=300.0, lr=lr)
    out = ref.masked_fsa(X, y, K, n_iter=6, mu=300.0, lr=lr)
    assert res.coef.dtype == jnp.float32 and res.loss_path.dtype == jnp.float32
    np.testing.assert_array_equal(res.support, out["support"])
    np.testing.assert_allclose(res.coef, out["coef"], rtol=2e-3, atol=2e-3)


# --------------------------------------------------------------------------- Theorem 2.1 / defaults
@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_theorem_2_1_monotone_once_k(loss):
    X, y, labels = _problem(1)
    target = y if loss == "squared" else labels
    lr = 0.99 / ref.lipschitz(X, loss)  # inside the theorem's bound eta < 1/L (mean-loss scaling)
    res = fsa(X, target, K, loss=loss, n_iter=NITER, mu=MU, lr=lr)
    path, kept = np.asarray(res.loss_path), np.asarray(res.n_kept)
    first_k = int(np.argmax(kept == K))
    tail = path[first_k + 1 :]  # F(beta^(e)) for e after M_e = k
    assert np.all(np.diff(tail) <= 1e-12 * np.abs(tail[:-1]).max())


@pytest.mark.parametrize("loss", ["squared", "logistic", "lorenz", "huber_hinge"])
def test_default_step_is_scale_free_and_recovers_support(loss):
    X, y, labels = _problem(2)
    target = y if loss == "squared" else labels
    res = fsa(X, target, K, loss=loss, n_iter=NITER, mu=MU)
    hits = len(set(res.support.tolist()) & set(TRUE))
    assert hits == K if loss == "squared" else hits >= K - 1  # N = 80 is small for classification
    # the default step: within GD's stability limit 2/L of the full problem's Lipschitz bound ...
    steps = np.asarray(res.step_size)
    assert steps[0] < 2.0 / ref.lipschitz(X, "squared" if loss == "squared" else "logistic")
    # ... and invariant to rescaling the features (standardization + scale-free step)
    res2 = fsa(X * 1000.0, target, K, loss=loss, n_iter=NITER, mu=MU)
    np.testing.assert_array_equal(res.support, res2.support)
    np.testing.assert_allclose(np.asarray(res2.coef) * 1000.0, res.coef, rtol=1e-6, atol=1e-9)
    if loss == "squared":
        tail = np.asarray(res.loss_path)[int(np.argmax(np.asarray(res.n_kept) == K)) + 1 :]
        assert np.all(np.diff(tail) <= 1e-12)


def test_predict_and_optimizer_and_callable_loss():
    X, y, _ = _problem(4)
    res = fsa(X, y, K, n_iter=NITER, mu=MU)
    np.testing.assert_allclose(fsa_predict(res, X), X[:, res.support] @ res.coef + res.intercept, rtol=1e-10)
    assert np.sqrt(np.mean((np.asarray(fsa_predict(res, X)) - y) ** 2)) < 0.5
    # a callable loss identical to the built-in gives the identical fit
    res_c = fsa(X, y, K, loss=squared_loss, n_iter=NITER, mu=MU)
    np.testing.assert_array_equal(res.support, res_c.support)
    np.testing.assert_allclose(res.coef, res_c.coef, rtol=1e-10)
    # any optax optimizer (its state is compacted with the coefficients)
    with jax.numpy_dtype_promotion("standard"):  # optax's bias correction mixes float and int32
        res_a = fsa(X, y, K, n_iter=NITER, mu=MU, optimizer=optax.adam(0.05))
    assert sorted(res_a.support.tolist()) == TRUE and np.isnan(np.asarray(res_a.step_size)).all()


def test_callable_loss_with_pytree_target():
    X, y, labels = _problem(5)

    def weighted_logistic(scores, target):
        lab, w = target
        m = jnp.where(lab > 0, 1.0, -1.0) * scores
        return jnp.sum(w * jax.nn.softplus(-m)) / jnp.sum(w)

    w = np.ones(N)
    res = fsa(X, (labels, w), K, loss=weighted_logistic, n_iter=NITER, mu=MU)
    res_b = fsa(X, labels, K, loss="logistic", n_iter=NITER, mu=MU)
    np.testing.assert_array_equal(res.support, res_b.support)
    np.testing.assert_allclose(res.coef, res_b.coef, rtol=1e-6)


def test_inside_jit_and_grad_with_callable_loss():
    X, y, _ = _problem(6)
    lr = 0.5 / ref.lipschitz(X)
    kw = dict(loss=squared_loss, n_iter=12, mu=300.0, lr=lr)
    res = fsa(X, y, K, **kw)
    jitted = jax.jit(lambda X, y: fsa(X, y, K, **kw))(jnp.asarray(X), jnp.asarray(y))
    np.testing.assert_array_equal(jitted.support, res.support)
    np.testing.assert_allclose(jitted.coef, res.coef, rtol=1e-10)
    # gradient of the fitted coefficients w.r.t. y (support fixed) vs finite differences
    f = lambda yy: jnp.sum(fsa(X, yy, K, **kw).coef)  # noqa: E731
    g = jax.grad(f)(jnp.asarray(y))
    v = np.random.default_rng(0).normal(size=N)
    eps = 1e-5
    fd = (float(f(jnp.asarray(y + eps * v))) - float(f(jnp.asarray(y - eps * v)))) / (2 * eps)
    np.testing.assert_allclose(float(g @ v), fd, rtol=1e-5)


# --------------------------------------------------------------------------- PL learners
def test_pl_basis_reproduces_piecewise_linear_function():
    B = 5
    knots = np.array([0.0, 2.0, -1.0, 3.0, 3.0, 0.5])  # values at the B+1 grid points of [-1, 4]
    x = np.linspace(-2.0, 5.0, 101)  # includes values outside the range (clipped)
    grid = PLGrid(jnp.asarray([-1.0]), jnp.asarray([1.0]))
    idx, alpha = pl_encode(jnp.asarray(x)[:, None], grid, B)
    got = pl_scores(idx, alpha, jnp.zeros((1, B + 1)), jnp.asarray(knots)[None, :])
    expected = np.interp(np.clip(x, -1, 4), np.linspace(-1, 4, B + 1), knots)
    np.testing.assert_allclose(got, expected, atol=1e-12)
    np.testing.assert_allclose(pl_response(jnp.asarray(knots), jnp.asarray(x), -1.0, 1.0), expected, atol=1e-12)
    # the stored encoding equals the dense basis of the paper
    X = np.random.default_rng(0).uniform(-3, 3, (30, 4))
    U, _, _ = ref.pl_dense(X, B)
    g = pl_grid(jnp.asarray(X), B)
    idx, alpha = pl_encode(jnp.asarray(X), g, B)
    assert idx.dtype == jnp.int8 and idx.shape == X.shape  # never the dense (N, M, B+1) array
    coef = np.random.default_rng(1).normal(size=(4, B + 1))
    np.testing.assert_allclose(pl_scores(idx, alpha, jnp.zeros((4, B + 1)), jnp.asarray(coef)), np.einsum("nmp,mp->n", U, coef), atol=1e-12)
    np.testing.assert_allclose(pl_basis_mean(idx, alpha, B), U.mean(0), atol=1e-12)


def test_smoothness_prior_value_and_gradient():
    beta = np.random.default_rng(0).normal(size=(3, 6))
    val, grad = ref.second_diff_penalty_grad(beta)
    np.testing.assert_allclose(smoothness_penalty(jnp.asarray(beta)), val, rtol=1e-12)
    np.testing.assert_allclose(jax.grad(smoothness_penalty)(jnp.asarray(beta)), grad, rtol=1e-12)
    assert float(smoothness_penalty(jnp.asarray(np.outer([1, 2, 3], np.arange(6.0))))) == 0.0  # linear = smooth


def test_pl_fsa_recovers_nonlinear_features():
    rng = np.random.default_rng(7)
    X = rng.uniform(-2, 2, (N, M))
    y = 2 * np.abs(X[:, 2]) + np.sin(2 * X[:, 7]) - X[:, 11] ** 2 + 2 * np.maximum(X[:, 14], 0)
    res = fsa(X, y, K, bins=4, n_iter=NITER, mu=MU, smoothness=1e-4)
    assert sorted(res.support.tolist()) == TRUE
    assert res.coef.shape == (K, 5) and res.basis_mean.shape == (K, 5)
    assert np.sqrt(np.mean((np.asarray(fsa_predict(res, X)) - y) ** 2)) < 0.25 * y.std()
    lin = fsa(X, y, K, n_iter=NITER, mu=MU)  # the linear learner cannot see |x| or x^2
    assert sorted(lin.support.tolist()) != TRUE


# --------------------------------------------------------------------------- bad input / degenerate data
@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        (dict(k=0), ValueError, "k must be >= 1"),
        (dict(k=M + 1), ValueError, "larger than the number of features"),
        (dict(k=2.5), TypeError, "k must be an integer"),
        (dict(loss="hinge"), ValueError, "loss must be one of"),
        (dict(loss="logistic", y="reg"), ValueError, "binary labels"),
        (dict(loss="lorenz", y="const"), ValueError, "single class"),
        (dict(loss="ranking", pairs=None), ValueError, "needs pairs"),
        (dict(loss="ranking", pairs=[[0, N, 1.0]]), ValueError, r"pair indices must lie in \[0"),
        (dict(loss="ranking", pairs=[[0, 1, 1.5]]), ValueError, r"r_ij must lie in \[0, 1\]"),
        (dict(loss="ranking", pairs=[[0, 1]]), ValueError, r"\(P, 3\)"),
        (dict(bins=0), ValueError, "bins must be >= 1"),
        (dict(smoothness=1.0), ValueError, "also pass bins"),
        (dict(mu=-1.0), ValueError, "mu must be >= 0"),
        (dict(n_iter=0), ValueError, "n_iter must be >= 1"),
        (dict(lr=0.0), ValueError, "lr must be > 0"),
        (dict(l2=-1.0), ValueError, "l2 must be >= 0"),
        (dict(lr=0.1, optimizer=optax.sgd(0.1)), ValueError, "not both"),
        (dict(optimizer="adam"), TypeError, "GradientTransformation"),
        (dict(X="nan"), ValueError, "NaN or Inf"),
        (dict(y="inf"), ValueError, "NaN or Inf"),
        (dict(y="short"), ValueError, "must have shape"),
        (dict(X="1d"), ValueError, "must be 2-D"),
    ],
)
def test_bad_input(kwargs, err, match):
    X, y, labels = _problem()
    args = dict(X=X, y=y, k=K)
    args.update(kwargs)
    if args["X"] == "nan" if isinstance(args["X"], str) else False:
        args["X"] = X.copy()
        args["X"][3, 2] = np.nan
    elif isinstance(args["X"], str):
        args["X"] = X[:, 0]
    if isinstance(args["y"], str):
        args["y"] = {"reg": y, "const": np.ones(N), "inf": np.where(np.arange(N) == 5, np.inf, y), "short": y[:-1]}[args["y"]]
    with pytest.raises(err, match=match):
        fsa(args.pop("X"), args.pop("y"), args.pop("k"), **args)


def test_degenerate_constant_duplicated_and_k_equals_m():
    X, y, _ = _problem(8)
    X = X.copy()
    X[:, 0] = 3.0  # constant column
    X[:, 15] = X[:, TRUE[0]]  # duplicate of a relevant feature (higher index)
    res = fsa(X, y, K, n_iter=NITER, mu=MU)
    assert 0 not in res.support.tolist() and 15 not in res.support.tolist()  # ties -> lower index
    assert sorted(res.support.tolist()) == TRUE
    full = fsa(X, y, M, n_iter=NITER, mu=MU)
    assert full.support.tolist() == list(range(M)) and float(full.coef[0]) == 0.0
    assert np.isfinite(np.asarray(full.coef)).all()


def test_divergent_step_reports_status():
    X, y, _ = _problem()
    with pytest.warns(RuntimeWarning, match="non-finite"):
        res = fsa(X, y, K, n_iter=NITER, mu=MU, lr=1e12)
    assert int(res.status) == 1


# --------------------------------------------------------------------------- sharding


# The row-sharded case runs with every other solver in tests/sharded_cases.py (4 fake devices).
