"""FSA (Barbu et al.): schedule and stage widths, the one compiled run vs a masked full-width oracle,
the solver protocol (fsa_prepare / fsa_init / fsa_step) by hand, the optax update rule, Theorem
2.1(i), the l2 convention (ridge oracle), piecewise-linear learners, ranking, labels, constant
columns, bad input, status, compilation counts (mu / lr / l2 / k in its bucket), jit/vmap/grad.
float32 (the default) is covered everywhere; float64 runs under the ``x64`` context."""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from compile_count import count_compiles
from jaxselect.anneal import (
    FSAResult,
    PLGrid,
    annealing_schedule,
    fsa,
    fsa_init,
    fsa_predict,
    fsa_prepare,
    fsa_step,
    gradient_descent,
    k_bucket,
    pl_basis_mean,
    pl_encode,
    pl_grid,
    pl_response,
    pl_scores,
    plan_stages,
    schedule_area,
    smoothness_penalty,
    stage_widths,
)
from jaxselect.losses import squared_loss
from jaxselect.status import NONFINITE, SolverError, raise_for_status

import reference_fsa as ref


@pytest.fixture(autouse=True)
def _compact_every_stage(monkeypatch):
    """The tests use small M: compact at every halving (production skips drops < 32 columns)."""
    monkeypatch.setattr(sys.modules["jaxselect.anneal.fsa"], "_MIN_DROP", 0)


@pytest.fixture(params=[np.float32, np.float64], ids=["float32", "float64"])
def dtype(request):
    """float32 as users run it; float64 inside ``jax.enable_x64()``."""
    if request.param == np.float64:
        with jax.enable_x64():
            yield np.float64
    else:
        yield np.float32


def _tol(dtype, rtol64=1e-8, atol64=1e-10, rtol32=2e-3, atol32=2e-4):
    return dict(rtol=rtol64, atol=atol64) if dtype == np.float64 else dict(rtol=rtol32, atol=atol32)


# one problem shape for most tests, so that compiled stages are shared between tests
N, M, K, NITER, MU = 80, 16, 4, 40, 10.0
TRUE = [2, 7, 11, 14]
L2 = 2e-3  # (l2/2)‖β‖²; was 1e-3 under the former l2‖β‖² convention


def _problem(seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, M)) * rng.uniform(0.5, 3.0, M) + rng.normal(size=M)
    lin = (X[:, TRUE] / X[:, TRUE].std(0)) @ np.array([1.5, -2.0, 1.0, 1.2])
    y = lin + 0.3 * rng.standard_normal(N)
    labels = (lin + 0.3 * rng.standard_normal(N) > np.median(lin)).astype(np.int32)
    return X.astype(dtype), y.astype(dtype), labels


# --------------------------------------------------------------------------- schedule (eq. 3)
@pytest.mark.parametrize(
    "args", [(1000, 10, 500, 300.0), (1000, 30, 500, 0.0), (24, 3, 40, 10.0), (7, 7, 5, 1.0), (50, 1, 1, 3.0)]
)
def test_schedule_matches_eq3(args):
    M_, k, n_iter, mu = args
    s = annealing_schedule(M_, k, n_iter, mu)
    np.testing.assert_array_equal(s, ref.schedule(M_, k, n_iter, mu))
    assert s[-1] == k and np.all(np.diff(s) <= 0) and s.min() >= k and s.max() <= M_
    widths = stage_widths(M_, k)
    stages = plan_stages(M_, s, widths)
    assert stages[0].start == 0 and sum(st.length for st in stages) == n_iter
    assert all(a.start + a.length == b.start for a, b in zip(stages, stages[1:]))
    assert [st.width for st in stages] == list(widths) and widths[0] == M_ and widths[-1] == k_bucket(k, M_)
    assert all(a > b for a, b in zip(widths, widths[1:]))
    prev = np.concatenate([[M_], s[:-1]])
    for i, st in enumerate(stages):  # each iteration runs in the narrowest width that holds its active count
        seg = prev[st.start : st.start + st.length]
        assert np.all(seg <= st.width)
        if i + 1 < len(stages):
            assert np.all(seg > stages[i + 1].width)
    masked_work = sum(st.width * st.length for st in stages)
    # each stage's width is at most 2x the active counts it runs on (4x in the full-width stage,
    # which runs until M/4: there is no M/2 stage), plus the last stage's bucket padding
    bound = sum((4 if i == 0 else 2) * prev[st.start : st.start + st.length].sum() for i, st in enumerate(stages))
    assert masked_work <= bound and masked_work <= 4 * schedule_area(M_, s)


def test_stage_widths_depend_on_m_and_the_k_bucket_only():
    assert stage_widths(40, 3) == (40, 10, 5, 3)  # no M/2 stage: the first compaction keeps M/4
    assert stage_widths(40, 3, min_drop=32) == (40, 5, 3)
    assert stage_widths(1000, 30, min_drop=32) == (1000, 250, 125, 63, 32)
    assert stage_widths(40, 12) == (40, 12)
    assert stage_widths(16, 16) == (16,)
    for k in range(1, 300):  # k <= bucket <= 1.25 k; every k of a bucket shares the widths
        b = k_bucket(k, 10_000)
        assert k <= b <= 1.25 * k
        assert stage_widths(10_000, k) == stage_widths(10_000, b)
    assert k_bucket(30, 31) == 31  # never above M


def test_keep_largest_keeps_the_largest_active_rows_and_sorts_only_when_it_prunes():
    from jaxselect.anneal.step import keep_largest

    rng = np.random.default_rng(3)
    coef = rng.standard_normal((12, 2))
    active = rng.random(12) < 0.75
    norms = np.where(active, (coef * coef).sum(1), -1.0)
    for n_keep in range(14):  # below, at and above the active count (no prune: active unchanged)
        want = np.zeros(12, bool)
        want[np.argsort(-norms, kind="stable")[:n_keep]] = True
        want &= active
        got = np.asarray(jax.jit(keep_largest)(jnp.asarray(coef), jnp.asarray(active), jnp.int32(n_keep)))
        np.testing.assert_array_equal(got, want)
    # under vmap the cond's predicate is batched (both branches run): the same answer per row
    keeps = jnp.array([1, 5, 12], jnp.int32)
    batched = jax.vmap(keep_largest, in_axes=(None, None, 0))(jnp.asarray(coef), jnp.asarray(active), keeps)
    for row, n_keep in zip(np.asarray(batched), [1, 5, 12]):
        np.testing.assert_array_equal(row, np.asarray(keep_largest(jnp.asarray(coef), jnp.asarray(active), n_keep)))


def test_schedule_area_matches_table1_order():
    # Table I: mu = 300 costs about 5MN + kN N_iter (with M = 1000, k = 10, N_iter = 500)
    s = annealing_schedule(1000, 10, 500, 300.0)
    area = schedule_area(1000, s)
    assert 4 * 1000 + 10 * 500 <= area <= 7 * 1000 + 10 * 500


# --------------------------------------------------------------------------- vs masked oracle
@pytest.mark.parametrize("loss", ["squared", "logistic", "huber_hinge", "lorenz"])
def test_compacted_matches_masked_reference(loss, dtype):
    X, y, labels = _problem(dtype=dtype)
    target = y if loss == "squared" else labels
    lr = 0.5 / ref.lipschitz(X, loss)
    res = fsa(X, target, K, loss=loss, n_iter=NITER, mu=MU, lr=lr, l2=L2, polish=False)  # Algorithm 1 itself
    out = ref.masked_fsa(X, target, K, loss=loss, n_iter=NITER, mu=MU, lr=lr, l2=L2)
    assert res.coef.dtype == dtype and res.loss_path.dtype == dtype
    np.testing.assert_array_equal(res.support, out["support"])
    np.testing.assert_allclose(res.coef, out["coef"], **_tol(dtype))
    np.testing.assert_allclose(res.intercept, out["intercept"], **_tol(dtype))
    np.testing.assert_allclose(res.loss_path, out["losses"], **_tol(dtype, atol64=1e-12, rtol32=1e-4, atol32=1e-6))
    np.testing.assert_array_equal(res.n_kept, out["schedule"])
    assert int(res.status) == 0


def test_compacted_matches_masked_reference_pl_smoothness(dtype):
    X, y, _ = _problem(dtype=dtype)
    lr = 0.05
    res = fsa(X, y, K, n_iter=NITER, mu=MU, lr=lr, bins=4, l2=L2, smoothness=1e-2)
    out = ref.masked_fsa(X, y, K, n_iter=NITER, mu=MU, lr=lr, bins=4, l2=L2, smoothness=1e-2)
    np.testing.assert_array_equal(res.support, out["support"])
    np.testing.assert_allclose(res.coef, out["beta"], **_tol(dtype))
    np.testing.assert_allclose(res.loss_path, out["losses"], **_tol(dtype, atol64=1e-12, rtol32=1e-4, atol32=1e-6))


def test_compacted_matches_masked_reference_ranking(dtype):
    X, y, _ = _problem(dtype=dtype)
    rng = np.random.default_rng(3)
    ij = rng.integers(0, N, size=(300, 2))
    r = (y[ij[:, 0]] > y[ij[:, 1]]).astype(np.float64)
    res = fsa(X, None, K, loss="ranking", pairs=np.c_[ij, r], n_iter=NITER, mu=MU, lr=0.5, polish=False)
    out = ref.masked_fsa(X, None, K, loss="ranking", pairs=(ij, r), n_iter=NITER, mu=MU, lr=0.5)
    np.testing.assert_array_equal(res.support, out["support"])
    np.testing.assert_allclose(res.coef, out["coef"], **_tol(dtype))
    assert sorted(res.support.tolist()) == TRUE  # ranking recovers the generating features


def test_jit_matches_disable_jit():
    X, y, _ = _problem()
    lr = 0.5 / ref.lipschitz(X)
    res = fsa(X, y, K, n_iter=6, mu=300.0, lr=lr)
    with jax.disable_jit():
        eager = fsa(X, y, K, n_iter=6, mu=300.0, lr=lr)
    np.testing.assert_array_equal(res.support, eager.support)
    np.testing.assert_allclose(res.coef, eager.coef, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res.loss_path, eager.loss_path, rtol=1e-5)


# --------------------------------------------------------------------------- the step API by hand
def _by_hand(X, target, loss, lr=None, optimizer=None, l2=L2):
    """Algorithm 1 on the full width with fsa_init / fsa_step (no compaction), mapped to raw space."""
    problem = fsa_prepare(X, target, loss=loss, l2=l2, optimizer=optimizer)
    state = fsa_init(problem, K, n_iter=NITER, mu=MU, lr=lr)

    @jax.jit
    def run(problem, state):
        def body(state, _):
            state = fsa_step(problem, state)
            return state, state.objective

        return jax.lax.scan(body, state, length=NITER)

    state, objective = run(problem, state)
    assert int(state.iteration) == NITER
    support = np.flatnonzero(np.asarray(state.active))
    d = problem.design
    raw = np.asarray(state.coef)[support, 0] * np.asarray(d.factor)[support]
    intercept = float(state.intercept) - np.asarray(d.mean)[support] @ raw
    return support, raw, intercept, np.asarray(objective)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_step_by_hand_equals_compacted_fsa(loss, dtype):
    X, y, labels = _problem(3, dtype)
    X[:, 5] = 1.5  # a constant column: inactive from fsa_init on, in both
    target = y if loss == "squared" else labels
    lr = 0.5 / ref.lipschitz(X, loss)
    res = fsa(X, target, K, loss=loss, n_iter=NITER, mu=MU, lr=lr, l2=L2, polish=False)  # squared: moment-space tail
    support, coef, intercept, objective = _by_hand(X, target, loss, lr=lr)
    np.testing.assert_array_equal(res.support, support)
    assert 5 not in support
    np.testing.assert_allclose(res.coef, coef, **_tol(dtype, rtol32=1e-3, atol32=1e-4))
    np.testing.assert_allclose(res.intercept, intercept, **_tol(dtype, rtol32=1e-3, atol32=1e-4))
    # the squared loss's moment-space tail sums terms ~ F(0) to get F: float32 cancellation ~ eps·F(0)
    np.testing.assert_allclose(res.loss_path, objective, **_tol(dtype, rtol32=1e-5, atol32=1e-6 * objective[0]))


def test_step_by_hand_with_optimizer_equals_compacted_fsa():
    # the optax state is gathered with the coefficients at each compaction. Adam's step
    # m̂/(√v̂ + ε) is ±lr for any |g| ≫ ε: with optax's ε = 1e-8 a gradient at rounding level (the
    # intercept's, on a centred target) takes a full step of rounding's sign, which two compiles of
    # the same sums (fsa's program, the hand-made one) do not share; ε = 1e-5 keeps such steps small
    X, y, _ = _problem(3)
    adam = optax.adam(0.05, eps=1e-5)
    with jax.numpy_dtype_promotion("standard"):  # optax's bias correction mixes float and int32
        res = fsa(X, y, K, n_iter=NITER, mu=MU, l2=L2, optimizer=adam, polish=False)
        support, coef, intercept, objective = _by_hand(X, y, "squared", optimizer=adam)
    np.testing.assert_array_equal(res.support, support)
    np.testing.assert_allclose(res.coef, coef, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(res.loss_path, objective, rtol=1e-4, atol=1e-6)
    assert np.isnan(np.asarray(res.step_size)).all()


def test_protocol_options_live_in_the_problem():
    X, y, _ = _problem()
    problem = fsa_prepare(X, y, l2=0.5)
    assert float(problem.l2) == 0.5 and problem.config.optimizer is gradient_descent()
    assert jax.tree.leaves(problem.config) == []  # static: part of the compiled program's key
    with pytest.raises(ValueError, match="not both"):
        fsa_init(fsa_prepare(X, y, optimizer=optax.sgd(0.1)), K, lr=0.1)
    with pytest.raises(ValueError, match="loss must be one of"):
        fsa_prepare(X, y, loss="hinge")
    with pytest.raises(ValueError, match="also pass bins"):
        fsa_prepare(X, y, smoothness=1.0)
    with pytest.raises(ValueError, match="k must be <= 16"):
        fsa_init(problem, M + 1)
    # lr=None: the scale-free default 1/L of the full problem, L by power iteration (a lower bound)
    step = float(fsa_init(problem, K).opt_state.step)
    lip = ref.lipschitz(X) + 0.5
    assert 1.0 / lip <= step <= 1.05 / lip
    # a step past the schedule keeps k variables
    state = fsa_init(problem, K, n_iter=3, mu=MU, lr=0.1)
    for _ in range(5):
        state = fsa_step(problem, state)
    assert int(np.asarray(state.active).sum()) == K and int(state.iteration) == 5


def test_default_update_is_a_gradient_step_and_any_optax_optimizer_works():
    X, y, _ = _problem(3)
    lr = 0.5 / ref.lipschitz(X)
    problem = fsa_prepare(X, y, l2=L2)
    state = fsa_init(problem, K, n_iter=NITER, mu=MU, lr=lr)
    nxt = fsa_step(problem, state)
    # by hand: c <- c - lr (dF/dc) with F = 1/2 mean (A c + b - y)^2 + (l2/2)|c|^2, from c = 0, b = 0
    Z, mean, inv = ref.standardize(np.asarray(X, np.float64))
    r = -np.asarray(y, np.float64)
    g_coef, g_icpt = Z.T @ r / N, r.mean()
    step = -lr * g_coef
    keep = np.asarray(nxt.active)
    n_keep = annealing_schedule(M, K, NITER, MU)[0]
    assert keep.sum() == n_keep and set(np.flatnonzero(keep)) == set(np.argsort(-np.abs(step))[:n_keep])
    np.testing.assert_allclose(np.asarray(nxt.coef)[keep, 0], step[keep], rtol=1e-5, atol=1e-7)
    assert np.all(np.asarray(nxt.coef)[~keep] == 0)
    np.testing.assert_allclose(float(nxt.intercept), -lr * g_icpt, rtol=1e-5)
    np.testing.assert_allclose(float(nxt.objective), 0.5 * np.mean(r * r), rtol=1e-6)
    # optax's own plain SGD with the same learning rate takes the very same step
    sgd = fsa_prepare(X, y, l2=L2, optimizer=optax.sgd(lr))
    np.testing.assert_allclose(fsa_step(sgd, fsa_init(sgd, K, n_iter=NITER, mu=MU)).coef, nxt.coef, rtol=1e-6)
    # and a user optimizer with state (momentum) runs through the same code, compacted by fsa
    res_m = fsa(X, y, K, n_iter=NITER, mu=MU, l2=L2, optimizer=optax.sgd(lr, momentum=0.5))
    support, coef, _, _ = _by_hand(X, y, "squared", optimizer=optax.sgd(lr, momentum=0.5))
    np.testing.assert_array_equal(res_m.support, support)
    np.testing.assert_allclose(res_m.coef, coef, rtol=1e-3, atol=1e-4)
    assert sorted(res_m.support.tolist()) == TRUE


# --------------------------------------------------------------------------- Theorem 2.1 / defaults
@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_theorem_2_1_monotone_once_k(loss, dtype):
    X, y, labels = _problem(1, dtype)
    target = y if loss == "squared" else labels
    lr = 0.99 / ref.lipschitz(X, loss)  # inside the theorem's bound eta < 1/L (mean-loss scaling)
    res = fsa(X, target, K, loss=loss, n_iter=NITER, mu=MU, lr=lr)
    path, kept = np.asarray(res.loss_path, np.float64), np.asarray(res.n_kept)
    first_k = int(np.argmax(kept == K))
    tail = path[first_k + 1 :]  # F(beta^(e)) for e after M_e = k
    # float32: F is evaluated (moment space for the squared loss) from terms as large as F(0)
    slack = 1e-12 * np.abs(tail).max() if dtype == np.float64 else 8 * np.finfo(np.float32).eps * path[0]
    assert np.all(np.diff(tail) <= slack)


@pytest.mark.parametrize("loss", ["squared", "logistic", "lorenz", "huber_hinge"])
def test_default_step_is_scale_free_and_recovers_support(loss):
    X, y, labels = _problem(2)
    target = y if loss == "squared" else labels
    # polish=False: the schedule's own step is what is scale-free (a polished fit of separable
    # labels with l2 = 0 runs to large, unconverged coefficients)
    res = fsa(X, target, K, loss=loss, n_iter=NITER, mu=MU, polish=False)
    hits = len(set(res.support.tolist()) & set(TRUE))
    assert hits == K if loss == "squared" else hits >= K - 1  # N = 80 is small for classification
    # the default step: within GD's stability limit 2/L of the full problem's Lipschitz bound ...
    steps = np.asarray(res.step_size)
    assert steps[0] < 2.0 / ref.lipschitz(X, "squared" if loss == "squared" else "logistic")
    # ... and invariant to rescaling the features (standardization + scale-free step)
    res2 = fsa(X * np.float32(1000.0), target, K, loss=loss, n_iter=NITER, mu=MU, polish=False)
    np.testing.assert_array_equal(res.support, res2.support)
    np.testing.assert_allclose(np.asarray(res2.coef) * 1000.0, res.coef, rtol=2e-3, atol=1e-4)
    if loss == "squared":
        loss_path = np.asarray(res.loss_path)
        tail = loss_path[int(np.argmax(np.asarray(res.n_kept) == K)) + 1 :]
        assert np.all(np.diff(tail) <= 8 * np.finfo(np.float32).eps * float(loss_path[0]))


def test_l2_is_half_squared_norm_on_the_mean_loss(dtype):
    # k = all non-constant columns, no selection left: FSA converges to the ridge solution of
    # ½ mean (y − Zc − b)² + (l2/2)‖c‖², i.e. (ZᵀZ/N + l2 I) c = Zᵀ(y − ȳ)/N
    X, y, _ = _problem(11, dtype)
    X[:, 3] = 2.5  # constant: coefficient 0, not counted
    res = fsa(X, y, M - 1, n_iter=300, mu=0.0, l2=0.5)
    coef, intercept = ref.ridge(X, y, 0.5)
    assert 3 not in res.support.tolist()
    np.testing.assert_allclose(
        res.coef, coef[np.asarray(res.support)], **_tol(dtype, rtol64=1e-9, rtol32=1e-4, atol32=1e-5)
    )
    np.testing.assert_allclose(res.intercept, intercept, **_tol(dtype, rtol64=1e-9, rtol32=1e-4, atol32=1e-5))


def test_l2_may_be_traced_vmap_matches_loop():
    X, y, _ = _problem(10)
    lr = 0.5 / ref.lipschitz(X)
    l2s = np.array([0.0, 0.2, 2.0], np.float32)
    kw = dict(n_iter=NITER, mu=MU, lr=lr)
    sup, coef = (np.asarray(a) for a in jax.vmap(lambda l2: tuple(fsa(X, y, K, l2=l2, **kw)[:2]))(jnp.asarray(l2s)))
    for i, l2 in enumerate(l2s):
        one = fsa(X, y, K, l2=float(l2), **kw)
        np.testing.assert_array_equal(sup[i], one.support)
        # float32; the polish's capped iterative solve carries rounding differences between the
        # batched and the single program (4e-5 relative on an AMD EPYC host)
        np.testing.assert_allclose(coef[i], one.coef, rtol=2e-4, atol=1e-5)
    assert not np.allclose(coef[0], coef[2])  # the penalty does shrink


def test_predict_and_optimizer_and_callable_loss():
    X, y, _ = _problem(4)
    res = fsa(X, y, K, n_iter=NITER, mu=MU)
    expected = X[:, np.asarray(res.support)] @ np.asarray(res.coef) + np.asarray(res.intercept)
    np.testing.assert_allclose(fsa_predict(res, X), expected, rtol=1e-5, atol=1e-5)
    assert np.sqrt(np.mean((np.asarray(fsa_predict(res, X)) - y) ** 2)) < 0.5
    one_row = np.asarray(fsa_predict(res, X))[:1]
    np.testing.assert_allclose(fsa_predict(res, X[:1]), one_row, rtol=1e-6)  # one row is fine
    # a callable loss identical to the built-in gives the same fit
    res_c = fsa(X, y, K, loss=squared_loss, n_iter=NITER, mu=MU)
    np.testing.assert_array_equal(res.support, res_c.support)
    np.testing.assert_allclose(res.coef, res_c.coef, rtol=1e-6)
    # any optax optimizer (its state is compacted with the coefficients)
    with jax.numpy_dtype_promotion("standard"):  # optax's bias correction mixes float and int32
        res_a = fsa(X, y, K, n_iter=NITER, mu=MU, optimizer=optax.adam(0.05, eps=1e-5))  # ε: see above
    assert sorted(res_a.support.tolist()) == TRUE and np.isnan(np.asarray(res_a.step_size)).all()


def test_callable_loss_with_pytree_target():
    X, y, labels = _problem(5)

    def weighted_logistic(scores, target):
        lab, w = target
        m = jnp.where(lab > 0, scores, -scores)
        return jnp.sum(w * jax.nn.softplus(-m)) / jnp.sum(w)

    w = np.ones(N, np.float32)
    # the schedule's iterates (near-separable labels: the polished fits run off towards infinity)
    res = fsa(X, (labels, w), K, loss=weighted_logistic, n_iter=NITER, mu=MU, polish=False)
    res_b = fsa(X, labels, K, loss="logistic", n_iter=NITER, mu=MU, polish=False)
    np.testing.assert_array_equal(res.support, res_b.support)
    np.testing.assert_allclose(res.coef, res_b.coef, rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------- no silent recompilation
def _fits(X, y, labels):
    """Three fits built the way a user writes them: a fresh optimizer and a fresh lambda per call."""
    a = fsa(X, y, K, n_iter=NITER, mu=MU, optimizer=optax.sgd(0.1))
    b = fsa(X, labels, K, loss=lambda s, t: jnp.mean(jax.nn.softplus(-jnp.where(t > 0, s, -s))), n_iter=NITER, mu=MU)
    c = fsa(X, labels, K, loss="lorenz", n_iter=NITER, mu=MU)
    return a, b, c, fsa_predict(c, X)


def test_no_recompilation_with_fresh_equal_arguments():
    X, y, labels = _problem(9)
    first = _fits(X, y, labels)
    with count_compiles() as compiles:
        second = _fits(X.copy(), y.copy(), labels.copy())
    assert compiles[0] == 0
    for a, b in zip(first[:3], second[:3]):
        np.testing.assert_array_equal(a.support, b.support)
        np.testing.assert_array_equal(a.coef, b.coef)
    np.testing.assert_array_equal(first[3], second[3])


def test_one_compiled_run_mu_lr_l2_k_in_its_bucket_compile_nothing():
    """The whole call (schedule, polish, survivors) is one program per (N, M, k-bucket): mu, lr,
    l2 and k within its bucket are its data."""
    run = sys.modules["jaxselect.anneal.run"].solve
    X, y, labels = _problem(13)
    assert k_bucket(9, M) == k_bucket(10, M) == 10
    for target, kw in ((y, dict(lr=0.05, polish=False)), (y, {}), (labels, dict(loss="logistic"))):
        first = fsa(X, target, 9, n_iter=NITER, mu=MU, **kw)
        programs = run._cache_size()
        with count_compiles() as compiles:
            a = fsa(X, target, 9, n_iter=NITER, mu=3.0, **kw)
            b = fsa(X, target, 9, n_iter=NITER, mu=MU, l2=0.3, **kw)
            if "lr" in kw:
                c = fsa(X, target, 9, n_iter=NITER, mu=MU, lr=0.02, polish=False)
                np.testing.assert_allclose(c.step_size, 0.02)
        assert compiles[0] == 0
        np.testing.assert_array_equal(a.n_kept, annealing_schedule(M, 9, NITER, 3.0))
        assert not np.array_equal(a.n_kept, first.n_kept) and not np.allclose(b.coef, first.coef)
        with count_compiles() as compiles:
            d = fsa(X, target, 10, n_iter=NITER, mu=MU, **kw)
        assert compiles[0] == 0 and run._cache_size() == programs  # the survivors' count is data
        assert d.support.shape == (10,) and np.asarray(d.n_kept)[-1] == 10
        if "lr" in kw:  # k = 9 runs its last stage at the bucket's width 10: the masked oracle agrees
            for k, res in ((9, a), (10, d)):
                mu = 3.0 if k == 9 else MU
                out = ref.masked_fsa(X, y, k, n_iter=NITER, mu=mu, lr=0.05)
                np.testing.assert_array_equal(res.support, out["support"])
                np.testing.assert_allclose(res.coef, out["coef"], rtol=2e-3, atol=2e-4)


def test_compiled_run_holds_at_most_three_eighths_of_x_in_compacted_copies(monkeypatch):
    """The stage copies live one after another: the first (M/4 columns: there is no M/2 stage) and
    the second (M/8) at the gather between them; no select copy of a gathered design, no copy of X.
    On XLA's default options, those of an X above ``programs.CHEAP_COMPILE_MAX_BYTES`` (a small X
    compiles with the legacy emitters, whose buffer assignment keeps 4/7 of X)."""
    monkeypatch.setenv("JAXSELECT_XLA_DEFAULTS", "1")
    run_mod = sys.modules["jaxselect.anneal.run"]
    rng = np.random.default_rng(14)
    X = rng.standard_normal((2001, 64)).astype(np.float32)
    labels = (X[:, 3] > 0).astype(np.int32)
    problem = fsa_prepare(X, labels, loss="logistic")
    plan = run_mod.RunPlan(stage_widths(64, 4), 512, "power", False)
    assert plan.widths == (64, 16, 8, 4)
    compiled = run_mod.run.lower(problem, jnp.zeros(512, jnp.int32), jnp.int32(500), jnp.float32(0.1), plan=plan).compile()
    stats = compiled.memory_analysis()
    assert stats.argument_size_in_bytes >= X.nbytes
    assert stats.temp_size_in_bytes <= 0.45 * X.nbytes


def test_blocked_transposing_gather_equals_the_fused_one(dtype):
    from jaxselect.design import DenseDesign, TransposedDesign

    X = np.random.default_rng(15).standard_normal((2500, 40)).astype(dtype)  # 2 blocks of 1024 + 452 rows
    d = DenseDesign.raw(jnp.asarray(X))
    cols = jnp.asarray([0, 3, 4, 17, 39], jnp.int32)
    blocked = jax.jit(lambda d, c: d.compact(c, 1024))(d, cols)
    assert isinstance(blocked, TransposedDesign)
    np.testing.assert_array_equal(blocked.Xt, X[:, [0, 3, 4, 17, 39]].T)
    np.testing.assert_array_equal(blocked.Xt, d.compact(cols).Xt)
    again = blocked.compact(jnp.asarray([1, 4], jnp.int32))  # a compacted copy gathers its rows
    np.testing.assert_array_equal(again.Xt, X[:, [3, 39]].T)


# --------------------------------------------------------------------------- jit / grad
@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_inside_user_jit_with_traced_data(loss):
    X, y, labels = _problem(6)
    target = y if loss == "squared" else 2 * labels - 1  # traced {-1, +1} labels
    kw = dict(loss=loss, n_iter=NITER, mu=MU)
    eager = fsa(X, target, K, **kw)

    @jax.jit
    def fit_predict(X, y, X_new):
        res = fsa(X, y, K, **kw)
        return res, fsa_predict(res, X_new)

    res, pred = fit_predict(jnp.asarray(X), jnp.asarray(target), jnp.asarray(X[:7]))
    np.testing.assert_array_equal(res.support, eager.support)
    np.testing.assert_allclose(res.coef, eager.coef, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(pred, fsa_predict(eager, X[:7]), rtol=1e-4, atol=1e-4)
    assert int(res.status) == 0


def test_grad_with_callable_loss(x64):
    X, y, _ = _problem(6, np.float64)
    lr = 0.5 / ref.lipschitz(X)
    kw = dict(loss=squared_loss, n_iter=12, mu=300.0, lr=lr)
    # gradient of the fitted coefficients w.r.t. y (support fixed) vs finite differences
    f = lambda yy: jnp.sum(fsa(X, yy, K, **kw).coef)  # noqa: E731
    g = np.asarray(jax.grad(f)(jnp.asarray(y)))
    v = np.random.default_rng(0).normal(size=N)
    eps = 1e-5
    fd = (float(f(jnp.asarray(y + eps * v))) - float(f(jnp.asarray(y - eps * v)))) / (2 * eps)
    np.testing.assert_allclose(float(g @ v), fd, rtol=1e-5)


# --------------------------------------------------------------------------- PL learners
def test_pl_basis_reproduces_piecewise_linear_function(dtype):
    tol = 1e-12 if dtype == np.float64 else 1e-5
    B = 5
    knots = np.array([0.0, 2.0, -1.0, 3.0, 3.0, 0.5], dtype)  # values at the B+1 grid points of [-1, 4]
    x = np.linspace(-2.0, 5.0, 101).astype(dtype)  # includes values outside the range (clipped)
    grid = PLGrid(jnp.asarray([-1.0], dtype), jnp.asarray([1.0], dtype))
    idx, alpha = pl_encode(jnp.asarray(x)[:, None], grid, B)
    got = pl_scores(idx, alpha, jnp.zeros((1, B + 1), dtype), jnp.asarray(knots)[None, :])
    expected = np.interp(np.clip(x, -1, 4), np.linspace(-1, 4, B + 1), knots)
    np.testing.assert_allclose(got, expected, atol=tol)
    np.testing.assert_allclose(pl_response(jnp.asarray(knots), jnp.asarray(x), -1.0, 1.0), expected, atol=tol)
    # the stored encoding equals the dense basis of the paper
    X = np.random.default_rng(0).uniform(-3, 3, (30, 4)).astype(dtype)
    U, _, _ = ref.pl_dense(X, B)
    g = pl_grid(jnp.asarray(X), B)
    idx, alpha = pl_encode(jnp.asarray(X), g, B)
    assert idx.dtype == jnp.int8 and idx.shape == X.shape  # never the dense (N, M, B+1) array
    coef = np.random.default_rng(1).normal(size=(4, B + 1)).astype(dtype)
    np.testing.assert_allclose(
        pl_scores(idx, alpha, jnp.zeros((4, B + 1), dtype), jnp.asarray(coef)),
        np.einsum("nmp,mp->n", U, coef),
        atol=10 * tol,
    )
    np.testing.assert_allclose(pl_basis_mean(idx, alpha, B), U.mean(0), atol=tol)


def test_smoothness_prior_value_and_gradient(dtype):
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    beta = np.random.default_rng(0).normal(size=(3, 6))
    val, grad = ref.second_diff_penalty_grad(beta)
    b = jnp.asarray(beta, dtype)
    np.testing.assert_allclose(smoothness_penalty(b), val, rtol=rtol)
    np.testing.assert_allclose(jax.grad(smoothness_penalty)(b), grad, rtol=rtol, atol=rtol)
    assert float(smoothness_penalty(jnp.asarray(np.outer([1, 2, 3], np.arange(6.0)), dtype))) == 0.0  # linear = smooth


def test_pl_fsa_recovers_nonlinear_features():
    rng = np.random.default_rng(7)
    X = rng.uniform(-2, 2, (N, M)).astype(np.float32)
    y = 2 * np.abs(X[:, 2]) + np.sin(2 * X[:, 7]) - X[:, 11] ** 2 + 2 * np.maximum(X[:, 14], 0)
    X[:, 0] = 1.0  # constant: its PL basis is centered to zero, and it is never selected
    res = fsa(X, y, K, bins=4, n_iter=NITER, mu=MU, smoothness=1e-4)
    assert sorted(res.support.tolist()) == TRUE
    assert res.coef.shape == (K, 5) and res.basis_mean.shape == (K, 5)
    assert np.sqrt(np.mean((np.asarray(fsa_predict(res, X)) - y) ** 2)) < 0.25 * y.std()
    lin = fsa(X, y, K, n_iter=NITER, mu=MU)  # the linear learner cannot see |x| or x^2
    assert sorted(lin.support.tolist()) != TRUE
    assert 0 not in fsa(X, y, M - 1, bins=4, n_iter=NITER, mu=MU).support.tolist()


# --------------------------------------------------------------------------- labels and targets
def test_label_codings_and_column_targets():
    X, y, labels = _problem(12)
    kw = dict(loss="logistic", n_iter=NITER, mu=MU)
    base = fsa(X, labels, K, **kw)
    for coded in (
        2 * labels - 1,
        labels.astype(bool),
        labels.astype(bool).tolist(),
        labels[:, None],
        (2.0 * labels - 1)[:, None],
    ):
        res = fsa(X, coded, K, **kw)
        np.testing.assert_array_equal(res.support, base.support)
        np.testing.assert_array_equal(res.coef, base.coef)
    reg = fsa(X, y, K, n_iter=NITER, mu=MU)
    col = fsa(X, y[:, None], K, n_iter=NITER, mu=MU)
    np.testing.assert_array_equal(reg.support, col.support)
    np.testing.assert_array_equal(reg.coef, col.coef)


# --------------------------------------------------------------------------- constant columns
def test_constant_columns_inert_raise_and_k_check():
    X, y, _ = _problem(8)
    X[:, 0] = 3.0
    X[:, 9] = -1.0
    kw = dict(n_iter=NITER, mu=MU)
    res = fsa(X, y, K, **kw)
    assert sorted(res.support.tolist()) == TRUE
    with pytest.raises(ValueError, match=r"constant column\(s\) \[0, 9\]"):
        fsa(X, y, K, constant_columns="raise", **kw)
    with pytest.raises(ValueError, match="constant_columns must be one of"):
        fsa(X, y, K, constant_columns="drop", **kw)
    full = fsa(X, y, M - 2, **kw)
    # k above the 14 non-constant columns: a UserWarning, all 14 kept (issue 37: the one k rule)
    with pytest.warns(UserWarning, match=r"fsa: k=15 is larger than the number of usable features of X \(14; "):
        clipped = fsa(X, y, M - 1, **kw)
    assert clipped.support.tolist() == full.support.tolist()
    np.testing.assert_array_equal(np.asarray(clipped.coef), np.asarray(full.coef))
    assert full.support.tolist() == [j for j in range(M) if j not in (0, 9)]
    # traced X: k cannot be checked; the support is padded with constant columns, coefficient 0
    traced = jax.jit(lambda X, y: fsa(X, y, M - 1, **kw))(X, y)
    assert traced.support.tolist() == [j for j in range(M) if j != 9]
    assert float(np.asarray(traced.coef)[0]) == 0.0 and np.isfinite(np.asarray(traced.coef)).all()
    np.testing.assert_allclose(np.asarray(traced.coef)[1:], full.coef, rtol=1e-4, atol=1e-5)


def test_degenerate_duplicated_and_k_equals_m():
    X, y, _ = _problem(8)
    X[:, 15] = X[:, TRUE[0]]  # duplicate of a relevant feature (higher index)
    res = fsa(X, y, K, n_iter=NITER, mu=MU)
    assert 15 not in res.support.tolist()  # ties -> lower index
    assert sorted(res.support.tolist()) == TRUE
    full = fsa(X, y, M, n_iter=NITER, mu=MU)
    assert full.support.tolist() == list(range(M)) and np.isfinite(np.asarray(full.coef)).all()


# --------------------------------------------------------------------------- bad input / status
@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        (dict(k=0), ValueError, "k must be >= 1"),
        (dict(k=2.5), TypeError, "k must be an integer"),
        (dict(loss="hinge"), ValueError, "loss must be one of"),
        (dict(loss="logistic", y="reg"), ValueError, "binary labels"),
        (dict(loss="lorenz", y="const"), ValueError, "single class"),
        (dict(loss="logistic", y=None), ValueError, "needs binary labels"),
        (dict(y=None), ValueError, "needs regression targets"),
        (dict(y="two"), ValueError, "single target"),
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
        (dict(l2=np.ones(2)), TypeError, "l2 must be a real scalar"),
        (dict(lr=0.1, optimizer=optax.sgd(0.1)), ValueError, "not both"),
        (dict(optimizer="adam"), TypeError, "GradientTransformation"),
        (dict(X="nan"), ValueError, "NaN or Inf"),
        (dict(X="one row"), ValueError, "at least 2 rows"),
        (dict(y="inf"), ValueError, "NaN or Inf"),
        (dict(y="short"), ValueError, "rows but X has"),
        (dict(X="1d"), ValueError, r"must be 2-D .*reshape\(1, -1\) for a single sample"),
    ],
)
def test_bad_input(kwargs, err, match):
    X, y, labels = _problem()
    args = dict(X=X, y=y, k=K)
    args.update(kwargs)
    if isinstance(args["X"], str):
        kind, args["X"] = args["X"], X.copy()
        if kind == "nan":
            args["X"][3, 2] = np.nan
        elif kind == "one row":
            args["X"], args["y"], args["k"] = X[:1], y[:1], 1
        else:
            args["X"] = X[:, 0]
    if isinstance(args["y"], str):
        args["y"] = {
            "reg": y,
            "const": np.ones(N),
            "inf": np.where(np.arange(N) == 5, np.inf, y),
            "short": y[:-1],
            "two": np.c_[y, y],
        }[args["y"]]
    with pytest.raises(err, match=match):
        fsa(args.pop("X"), args.pop("y"), args.pop("k"), **args)


def test_divergent_step_reports_status():
    X, y, _ = _problem()
    with pytest.warns(RuntimeWarning, match="non-finite"):
        res = fsa(X, y, K, n_iter=NITER, mu=MU, lr=1e12)
    assert int(res.status) == NONFINITE
    with pytest.raises(SolverError, match="FSAResult: non-finite"):
        raise_for_status(res)
    ok = fsa(X, y, K, n_iter=NITER, mu=MU)
    assert raise_for_status(ok) is ok


def test_short_repr():
    X, y, _ = _problem()
    res = fsa(X, y, K, n_iter=NITER, mu=MU)
    text = repr(res)
    assert isinstance(res, FSAResult) and text.startswith("FSAResult(support=int32[4], coef=float32[4]")
    assert "status=0" in text and len(text) < 400
    assert repr(fsa_init(fsa_prepare(X, y), K)).startswith("FSAState(coef=float32[16, 1]")


# The row-sharded case runs with every other solver in tests/sharded_cases.py (4 fake devices).
