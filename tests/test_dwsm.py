"""Tests of the datum-wise sparse model (jaxselect.sequential) against slow numpy oracles.

Oracles (numpy, obviously correct, slow): ``np_episode`` simulates the greedy linear policy on
the MDP of paper §3.1/Table 2 step by step (full score recomputation, no incremental updates);
``np_q_values`` gets Q(s, a) from it; ``optimal_loss`` enumerates every adaptive acquisition
policy (decision tree over observed values) of a tiny discrete problem; ``datum_loss`` is the
datum-wise loss of paper eq. (4)/Table 1 for each variant.
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxselect.sequential import (
    DWSMPolicy,
    accuracy,
    average_cost,
    class_usage,
    dwsm_evaluate,
    dwsm_fit,
    dwsm_predict,
    dwsm_trace,
    feature_usage,
    make_spec,
    mean_sparsity,
)
from jaxselect.sequential.rcpi import (
    mixture_weights,
    ridge_fit,
    rollout_capacity,
    row_state_action_values,
    sample_states,
    state_action_values,
)

# ----------------------------------------------------------------------------- numpy oracles


def np_spec(spec):
    return {k: np.asarray(v) for k, v in spec._asdict().items()}


def np_scores(theta, x, zf):
    ph = np.concatenate([zf.astype(float), x * zf, [1.0]])
    return theta @ ph


def np_episode(theta, S, x, y, z):
    """Greedy episode from (x, z), scores recomputed from scratch; returns (reward, label, z, order)."""
    theta = np.asarray(theta, np.float64)
    C = S["cost_matrix"].shape[0]
    J = S["unit_size"].shape[0]
    z = z.copy()
    ret, order = 0.0, []
    while True:
        zf = z[S["groups"]]
        s = np_scores(theta, x, zf)
        count = int(np.sum(S["unit_size"][z]))
        best, best_a = -np.inf, None
        for a in range(C + J):
            if a >= C:
                j = a - C
                if z[j] or count + S["unit_size"][j] > S["budget"]:
                    continue
            if s[a] > best:
                best, best_a = s[a], a
        a = best_a
        if a < C:
            return ret - S["cost_matrix"][a, y], a, z, order
        j = a - C
        rel = S["related"]
        related_to_all = True if rel.shape[0] == 0 else all(rel[j, k] for k in np.flatnonzero(z))
        ret -= S["unit_cost"][j] * (S["lam"] if related_to_all else S["gamma"])
        z[j] = True
        order.append(j)


def np_q_values(theta, S, x, y, z):
    C = S["cost_matrix"].shape[0]
    J = S["unit_size"].shape[0]
    Q = np.zeros(C + J)
    allowed = np.zeros(C + J, bool)
    Q[:C] = -S["cost_matrix"][:, y]
    allowed[:C] = True
    count = int(np.sum(S["unit_size"][z]))
    rel = S["related"]
    for j in range(J):
        if z[j] or count + S["unit_size"][j] > S["budget"]:
            continue
        allowed[C + j] = True
        related_to_all = True if rel.shape[0] == 0 else all(rel[j, k] for k in np.flatnonzero(z))
        r = -S["unit_cost"][j] * (S["lam"] if related_to_all else S["gamma"])
        z1 = z.copy()
        z1[j] = True
        Q[C + j] = r + np_episode(theta, S, x, y, z1)[0]
    return Q, allowed


def datum_loss(S, label, y, order):
    """Datum-wise loss (paper eq. 4 / Table 1) of one classified datum given its acquisition order."""
    loss = S["cost_matrix"][label, y]
    rel = S["related"]
    for t, j in enumerate(order):
        related_to_all = True if rel.shape[0] == 0 else all(rel[j, k] for k in order[:t])
        loss += S["unit_cost"][j] * (S["lam"] if related_to_all else S["gamma"])
    return loss


def optimal_loss(X, y, lam, C):
    """Minimum over all adaptive policies of the mean datum-wise loss (eq. 2), by enumeration."""
    n, d = X.shape
    cm = 1.0 - np.eye(C)

    @functools.lru_cache(maxsize=None)
    def V(members, acquired):
        idx = np.asarray(members, int)
        best = min(cm[c, y[idx]].sum() for c in range(C))
        for j in range(d):
            if j in acquired:
                continue
            total = lam * len(idx)
            for v in np.unique(X[idx, j]):
                sub = tuple(int(i) for i in idx[X[idx, j] == v])
                total += V(sub, tuple(sorted(acquired + (j,))))
            best = min(best, total)
        return best

    return V(tuple(range(n)), ()) / n


# ----------------------------------------------------------------------------- fixtures


def grid_problem(rule: str, reps: int = 2):
    """All sign patterns of 3 ±1 features (balanced: standardisation leaves them as they are)."""
    X = np.array(list(itertools.product([-1.0, 1.0], repeat=3)) * reps)
    if rule == "x0":
        y = (X[:, 0] > 0).astype(int)
    elif rule == "and":
        y = ((X[:, 0] > 0) & (X[:, 1] > 0)).astype(int)
    else:
        raise ValueError(rule)
    return X, y


def random_spec(rng, d, C, variant, dtype=jnp.float64):
    kw = {}
    if variant == "budget":
        kw["budget"] = 2
    elif variant == "cost":
        kw["feature_costs"] = rng.uniform(0.5, 2.0, size=d)
        cm = rng.uniform(0.5, 3.0, size=(C, C))
        np.fill_diagonal(cm, rng.uniform(-0.2, 0.0, size=C))
        kw["cost_matrix"] = cm
    elif variant == "grouped":
        kw["groups"] = [[0, 3], [1], [2, 4]]
    elif variant == "relational":
        rel = rng.random((d, d)) < 0.5
        kw["related"] = rel | rel.T
        kw["gamma"] = 0.4
    elif variant == "grouped_budget":
        kw["groups"] = [[0, 3], [1], [2, 4]]
        kw["budget"] = 3
    return make_spec(d, C, dtype=dtype, lam=0.1, **kw)


VARIANTS = ["base", "budget", "cost", "grouped", "relational", "grouped_budget"]


# ----------------------------------------------------------------------------- rollouts = exact returns

_sav = jax.jit(state_action_values)
_row_sav = jax.jit(row_state_action_values, static_argnums=5)
_sample = jax.jit(sample_states, static_argnums=(2, 3, 4))


@pytest.mark.parametrize("variant", VARIANTS)
def test_rollout_q_values_equal_exact_returns(variant):
    rng = np.random.default_rng(hash(variant) % 2**32)
    d, C = 5, 3
    spec = random_spec(rng, d, C, variant)
    S = np_spec(spec)
    J = S["unit_size"].shape[0]
    theta = rng.normal(size=(C + J, 2 * d + 1))
    for trial in range(6):
        x = rng.normal(size=d)
        y = int(rng.integers(C))
        z = rng.random(J) < 0.3
        if S["unit_size"][z].sum() > S["budget"]:
            z[:] = False
        ph, Q, allowed, correct, s0 = _sav(
            jnp.asarray(theta), spec, jnp.asarray(x), jnp.asarray(y, jnp.int32), jnp.asarray(z)
        )
        Q_ref, allowed_ref = np_q_values(theta, S, x, y, z)
        np.testing.assert_array_equal(np.asarray(allowed), allowed_ref)
        np.testing.assert_allclose(np.asarray(Q)[allowed_ref], Q_ref[allowed_ref], rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(np.asarray(s0), np_scores(theta, x, z[S["groups"]]), rtol=1e-10)


def test_packed_rollouts_match_unpacked():
    """Lane packing over the allowed acquisitions of a row gives the same Q as one state at a time."""
    rng = np.random.default_rng(3)
    d, C, S_ = 6, 2, 5
    spec = make_spec(d, C, dtype=jnp.float64, lam=0.05)
    theta = jnp.asarray(rng.normal(size=(S_, C + d, 2 * d + 1)))
    x = jnp.asarray(rng.normal(size=d))
    Z = _sample(jax.random.key(1), spec, 1, S_, d)[0]
    cap = rollout_capacity(d, S_, d, True)
    assert cap < S_ * d
    out = _row_sav(theta, spec, x, jnp.asarray(1, jnp.int32), Z, cap)
    for r in range(S_):
        one = _sav(theta[r], spec, x, jnp.asarray(1, jnp.int32), Z[r])
        for a, b in zip(out, one):
            np.testing.assert_allclose(np.asarray(a[r]), np.asarray(b), rtol=1e-12)


def test_sample_states_distribution_and_budget():
    spec = make_spec(8, 2, dtype=jnp.float64, lam=0.1)
    Z = np.asarray(_sample(jax.random.key(0), spec, 3000, 4, 8))
    sizes = Z.sum(-1)
    # stratified: state r of a row has at least floor(r*9/4) units
    for r in range(4):
        assert sizes[:, r].min() >= (r * 9) // 4
    hist = np.bincount(sizes.ravel(), minlength=9) / sizes.size
    np.testing.assert_allclose(hist, np.full(9, 1 / 9), atol=0.02)  # ‖z‖ ~ U{0..J}
    np.testing.assert_allclose(Z.mean((0, 1)), 0.5, atol=0.03)  # every unit equally likely
    # budget on features with groups: never exceeded
    spec_b = make_spec(5, 2, dtype=jnp.float64, groups=[[0, 1, 2], [3], [4]], budget=3)
    Zb = np.asarray(_sample(jax.random.key(1), spec_b, 500, 4, 3))
    counts = (Zb * np.asarray(spec_b.unit_size)).sum(-1)
    assert counts.max() <= 3


def test_mixture_weights_are_the_paper_alpha_mixture():
    alpha = 0.7
    for t in range(5):
        w = np.asarray(mixture_weights(t, 6, jnp.float64(alpha), "stochastic"))
        ref = np.zeros(6)
        ref[0] = alpha**t
        for k in range(1, t + 1):
            ref[k] = (1 - alpha) * alpha ** (t - k)
        np.testing.assert_allclose(w, ref, rtol=1e-12)
        assert abs(w.sum() - 1) < 1e-12
    w = np.asarray(mixture_weights(3, 6, jnp.float64(alpha), "average"))
    np.testing.assert_array_equal(w, np.eye(6)[3])


def test_ridge_fit_matches_numpy_per_action():
    rng = np.random.default_rng(0)
    N, p, A = 50, 7, 4
    Phi = np.concatenate([rng.normal(size=(N, p - 1)), np.ones((N, 1))], axis=1)
    Q = rng.normal(size=(N, A))
    W = rng.random((N, A)) < 0.6
    W[:, 3] = False  # never allowed: keeps previous weights
    prev = rng.normal(size=(A, p))
    th = np.asarray(jax.jit(ridge_fit)(jnp.asarray(Phi), jnp.asarray(Q), jnp.asarray(W), jnp.float64(0.1), jnp.asarray(prev)))
    D = np.diag(np.r_[np.ones(p - 1), 0.0])
    for a in range(3):
        P, q = Phi[W[:, a]], Q[W[:, a], a]
        m = len(q)
        ref = np.linalg.solve(P.T @ P / m + 0.1 * D, P.T @ q / m)
        np.testing.assert_allclose(th[a], ref, rtol=1e-9)
    np.testing.assert_array_equal(th[3], prev[3])


def test_ridge_statistics_of_row_blocks_add_up():
    # the row-sharded fit sums these statistics across devices before solving
    from jaxselect.sequential.rcpi import _ridge_solve, _ridge_stats

    rng = np.random.default_rng(1)
    N, p, A = 40, 5, 3
    Phi, Q, W = rng.normal(size=(N, p)), rng.normal(size=(N, A)), rng.random((N, A)) < 0.5
    prev = rng.normal(size=(A, p))
    blocks = [_ridge_stats(*(jnp.asarray(a[i : i + 10]) for a in (Phi, Q, W))) for i in range(0, N, 10)]
    summed = jax.tree.map(lambda *b: sum(b), *blocks)
    th = _ridge_solve(*summed, jnp.float64(0.1), jnp.asarray(prev))
    ref = ridge_fit(jnp.asarray(Phi), jnp.asarray(Q), jnp.asarray(W), jnp.float64(0.1), jnp.asarray(prev))
    np.testing.assert_allclose(np.asarray(th), np.asarray(ref), rtol=1e-10, atol=1e-12)


def test_row_sharded_code_path_equals_plain_fit(monkeypatch):
    # the shard_map path (each device's rows, padded per block, statistics psum-ed) on a one-device
    # mesh must give the plain fit; tests/sharded_cases.py checks 4 devices
    from jaxselect import data_mesh
    from jaxselect.sequential import rcpi

    assert rcpi._row_axes(np.zeros((8, 2)), 8) is None
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 4))
    y = (X[:, 0] > 0).astype(int)
    kw = dict(lam=0.05, n_iter=2, states_per_example=2, rollout_batch=24)  # 4 rows a chunk: 2 padded
    a = dwsm_fit(jax.random.key(3), X, y, **kw)
    monkeypatch.setattr(rcpi, "_row_axes", lambda X, n: (data_mesh(jax.devices()[:1]), ("data",)))
    b = dwsm_fit(jax.random.key(3), X, y, **kw)
    np.testing.assert_allclose(np.asarray(b.theta), np.asarray(a.theta), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(b.train_return), np.asarray(a.train_return), rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- exact optimal policy


FIT_TINY = dict(n_iter=6, states_per_example=10)  # one compiled fit shared by the tiny problems


@pytest.fixture(scope="module")
def x0_fit():
    X, y = grid_problem("x0")
    pol = dwsm_fit(jax.random.key(0), X, y, lam=0.1, **FIT_TINY)
    return X, y, pol


def test_rcpi_reaches_exact_optimal_policy(x0_fit):
    X, y, pol = x0_fit
    opt = optimal_loss(X, y, 0.1, 2)
    assert opt == pytest.approx(0.1)
    tr = dwsm_trace(pol, X, y)
    np.testing.assert_allclose(-float(np.mean(tr.reward)), opt, atol=1e-9)
    labels, acquired = dwsm_predict(pol, X)
    np.testing.assert_array_equal(np.asarray(labels), y)
    np.testing.assert_array_equal(np.asarray(acquired), np.tile([True, False, False], (len(y), 1)))


@pytest.mark.parametrize("rule, lam", [("x0", 0.3), ("x0", 0.6), ("and", 0.3), ("and", 0.6)])
def test_rcpi_reaches_optimum_enumerated(rule, lam):
    """Optimum by enumeration of all adaptive policies; RCPI's training loss must equal it.

    x0 / λ=0.3: acquire x0 then classify (0.3 < 0.5 error). λ=0.6: classify at once. AND / λ=0.3:
    acquiring costs more than it saves, classify as the majority (loss 0.25).
    """
    X, y = grid_problem(rule)
    pol = dwsm_fit(jax.random.key(1), X, y, lam=lam, **FIT_TINY)
    opt = optimal_loss(X, y, lam, 2)
    tr = dwsm_trace(pol, X, y)
    np.testing.assert_allclose(-float(np.mean(tr.reward)), opt, atol=1e-9)


# ----------------------------------------------------------------------------- episode reward = −loss


@pytest.mark.parametrize("variant", VARIANTS)
def test_episode_reward_is_minus_datum_wise_loss(variant):
    rng = np.random.default_rng(7)
    d, C, n = 5, 3, 40
    spec = random_spec(rng, d, C, variant)
    S = np_spec(spec)
    J = S["unit_size"].shape[0]
    theta = rng.normal(size=(C + J, 2 * d + 1))
    theta[:C, -1] -= 1.0  # acquire a few units before classifying
    pol = DWSMPolicy(
        theta=jnp.asarray(theta),
        mean=jnp.zeros(d),
        scale=jnp.ones(d),
        spec=spec,
        thetas=jnp.asarray(theta)[None],
        mix_weights=jnp.ones(1),
        train_return=jnp.zeros(1),
        train_accuracy=jnp.zeros(1),
    )
    X = rng.normal(size=(n, d))
    y = rng.integers(0, C, size=n)
    tr = dwsm_trace(pol, X, y)
    labels, acquired = dwsm_predict(pol, X)
    np.testing.assert_array_equal(np.asarray(tr.labels), np.asarray(labels))
    np.testing.assert_array_equal(np.asarray(tr.acquired), np.asarray(acquired))
    used = 0
    for i in range(n):
        order = [int(j) for j in np.asarray(tr.order[i]) if j >= 0]
        used += len(order)
        ref_ret, ref_label, ref_z, ref_order = np_episode(theta, S, X[i], y[i], np.zeros(J, bool))
        assert order == ref_order
        assert int(tr.labels[i]) == ref_label
        np.testing.assert_array_equal(np.asarray(acquired[i]), ref_z[S["groups"]])
        loss = datum_loss(S, int(tr.labels[i]), int(y[i]), order)
        np.testing.assert_allclose(float(tr.reward[i]), -loss, rtol=1e-10)
        np.testing.assert_allclose(ref_ret, -loss, rtol=1e-10)
        if variant in ("budget", "grouped_budget"):
            assert np.asarray(acquired[i]).sum() <= S["budget"]
        if variant.startswith("grouped"):
            a = np.asarray(acquired[i])
            for members in ([0, 3], [1], [2, 4]):
                assert a[members].all() or not a[members].any()
    assert used > 0  # the test exercised acquisitions
    rep = dwsm_evaluate(pol, X, y)
    np.testing.assert_allclose(float(rep.mean_loss), -float(np.mean(tr.reward)), rtol=1e-10)


def test_base_loss_is_eq2():
    """Base model: reward = −(λ‖z‖₀ + Δ(ŷ, y)) (paper eq. 2)."""
    X, y = grid_problem("x0")
    rng = np.random.default_rng(0)
    spec = make_spec(3, 2, dtype=jnp.float64, lam=0.07)
    theta = rng.normal(size=(5, 7))
    pol = DWSMPolicy(jnp.asarray(theta), jnp.zeros(3), jnp.ones(3), spec, jnp.asarray(theta)[None], jnp.ones(1), jnp.zeros(1), jnp.zeros(1))
    tr = dwsm_trace(pol, X, y)
    ref = 0.07 * np.asarray(tr.acquired).sum(1) + (np.asarray(tr.labels) != y)
    np.testing.assert_allclose(-np.asarray(tr.reward), ref, rtol=1e-12)


# ----------------------------------------------------------------------------- fitted variants


FIT_SMALL = dict(n_iter=4, states_per_example=4, alpha=0.3)  # shared compiled config (90 x 6)


@pytest.fixture(scope="module")
def blobs():
    rng = np.random.default_rng(0)
    n, d = 90, 6
    X = rng.normal(size=(n, d))
    X[:, 4] = 2.5  # constant column
    X[:, 5] = X[:, 0]  # duplicated feature
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int) + (X[:, 2] > 1.0).astype(int)
    return X, y


def test_budget_never_exceeded_and_grouped_masks(blobs):
    X, y = blobs
    groups = [[0, 3], [1, 4], [2], [5]]
    pol = dwsm_fit(jax.random.key(0), X, y, lam=0.0, budget=3, groups=groups, **FIT_SMALL)
    labels, acquired = dwsm_predict(pol, X)
    a = np.asarray(acquired)
    assert a.sum(1).max() <= 3
    assert a.sum() > 0
    for members in groups:
        sub = a[:, members]
        assert np.all(sub.all(1) | ~sub.any(1))
    Xt = np.random.default_rng(5).normal(size=(200, 6)) * 3
    assert np.asarray(dwsm_predict(pol, Xt)[1]).sum(1).max() <= 3


def test_budget_zero_acquires_nothing(blobs):
    X, y = blobs
    pol = dwsm_fit(jax.random.key(0), X, y, lam=0.0, budget=0, groups=[[0, 3], [1, 4], [2], [5]], **FIT_SMALL)
    labels, acquired = dwsm_predict(pol, X)
    assert not np.asarray(acquired).any()
    assert np.all(np.asarray(labels) == np.bincount(y).argmax())


@pytest.fixture(scope="module")
def lam0_fit(blobs):
    X, y = blobs
    return dwsm_fit(jax.random.key(0), X, y, lam=0.0, **FIT_SMALL)


def test_lambda_zero_acquires_and_lambda_large_predicts_majority(blobs, lam0_fit):
    X, y = blobs
    rep0 = dwsm_evaluate(lam0_fit, X, y)
    assert float(rep0.mean_features) >= 1.0
    assert float(rep0.accuracy) > 0.75
    big = dwsm_fit(jax.random.key(0), X, y, lam=5.0, **FIT_SMALL)
    labels, acquired = dwsm_predict(big, X)
    assert not np.asarray(acquired).any()
    np.testing.assert_array_equal(np.asarray(labels), np.full(len(y), np.bincount(y).argmax()))


def test_cost_sensitive_prefers_cheap_equivalent_feature(blobs):
    """Features 0 and 5 are copies; 0 costs 20x more: the policy buys the cheap copy."""
    X, y = blobs
    costs = np.array([20.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    cm = np.array([[0.0, 2.0, 3.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    pol = dwsm_fit(jax.random.key(0), X, y, lam=0.01, feature_costs=costs, cost_matrix=cm, **FIT_SMALL)
    rep = dwsm_evaluate(pol, X, y)
    usage = np.asarray(rep.feature_usage)
    assert usage[5] > 0.2 and usage[0] < 0.5 * usage[5]
    labels, acquired = np.asarray(rep.labels), np.asarray(rep.acquired)
    ref = (acquired @ costs + cm[labels, y]).mean()
    np.testing.assert_allclose(float(rep.average_cost), ref, rtol=1e-9)
    np.testing.assert_allclose(float(average_cost(labels, acquired, y, feature_costs=costs, cost_matrix=cm)), ref, rtol=1e-12)
    np.testing.assert_allclose(float(rep.mean_loss), (0.01 * acquired @ costs + cm[labels, y]).mean(), rtol=1e-9)


def test_fit_deterministic_given_key(blobs, lam0_fit):
    X, y = blobs
    b = dwsm_fit(jax.random.key(0), X, y, lam=0.0, **FIT_SMALL)
    np.testing.assert_array_equal(np.asarray(lam0_fit.theta), np.asarray(b.theta))
    c = dwsm_fit(jax.random.key(4), X, y, lam=0.0, **FIT_SMALL)
    assert not np.array_equal(np.asarray(lam0_fit.theta), np.asarray(c.theta))


def test_jit_and_nojit_agree():
    rng = np.random.default_rng(4)
    d, C = 2, 2
    spec = make_spec(d, C, dtype=jnp.float64, lam=0.1, budget=2)
    theta = jnp.asarray(rng.normal(size=(C + d, 2 * d + 1)))
    x = jnp.asarray(rng.normal(size=d))
    z = jnp.asarray([False, True])
    a = _sav(theta, spec, x, jnp.asarray(1, jnp.int32), z)
    with jax.disable_jit():
        b = state_action_values(theta, spec, x, jnp.asarray(1, jnp.int32), z)
    for u, v in zip(a, b):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-12)
    pol = DWSMPolicy(theta, jnp.zeros(d), jnp.ones(d), spec, theta[None], jnp.ones(1), jnp.zeros(1), jnp.zeros(1))
    X = rng.normal(size=(2, d))
    la, aa = dwsm_predict(pol, X)
    with jax.disable_jit():
        lb, ab = dwsm_predict(pol, X)
    np.testing.assert_array_equal(np.asarray(la), np.asarray(lb))
    np.testing.assert_array_equal(np.asarray(aa), np.asarray(ab))


def test_degenerate_constant_and_duplicate_columns(blobs, lam0_fit):
    X, y = blobs
    pol = lam0_fit
    assert np.all(np.isfinite(np.asarray(pol.theta)))
    assert float(np.asarray(pol.scale)[4]) == 1.0  # constant column: scale 1, standardised to 0
    labels, acquired = dwsm_predict(pol, X)
    assert float(accuracy(labels, y)) > 0.75


def test_float32_fit_and_progress_callback(capsys):
    """float32 in, float32 policy out; the callback sees every iteration; silent by default."""
    X, y = grid_problem("x0")
    seen = []
    pol = dwsm_fit(jax.random.key(0), X.astype(np.float32), y, lam=0.1, **FIT_TINY,
                   callback=lambda it, r, a: seen.append((int(it), float(r), float(a))))
    jax.effects_barrier()
    assert pol.theta.dtype == jnp.float32 and pol.spec.lam.dtype == jnp.float32
    labels, acq = dwsm_predict(pol, X.astype(np.float32))
    assert labels.dtype == jnp.int32 and acq.dtype == jnp.bool_
    np.testing.assert_array_equal(np.asarray(labels), y)
    assert [s[0] for s in seen] == list(range(1, FIT_TINY["n_iter"] + 1))
    np.testing.assert_allclose([s[1] for s in seen], np.asarray(pol.train_return), rtol=1e-6)
    np.testing.assert_allclose([s[2] for s in seen], np.asarray(pol.train_accuracy), rtol=1e-6)
    dwsm_fit(jax.random.key(0), X, y, lam=0.1, **FIT_TINY)
    assert capsys.readouterr().out == ""


def test_relational_prefers_related_features(blobs):
    """Features 0 and 5 are copies; only 5 is related to the other useful features 1 and 2."""
    X, y = blobs
    related = np.eye(6, dtype=bool)
    for i, j in [(5, 1), (5, 2), (1, 2)]:
        related[i, j] = related[j, i] = True
    pol = dwsm_fit(jax.random.key(0), X, y, lam=0.01, gamma=0.5, related=related, **FIT_SMALL)
    rep = dwsm_evaluate(pol, X, y)
    u = np.asarray(rep.feature_usage)
    assert u[5] > u[0]
    tr = dwsm_trace(pol, X, y)
    S = np_spec(pol.spec)
    for i in range(0, len(y), 7):
        order = [int(j) for j in np.asarray(tr.order[i]) if j >= 0]
        np.testing.assert_allclose(float(tr.reward[i]), -datum_loss(S, int(tr.labels[i]), int(y[i]), order), rtol=1e-12)


def test_multiclass_usage_report(blobs, lam0_fit):
    X, y = blobs
    rep = dwsm_evaluate(lam0_fit, X, y)
    assert rep.class_usage.shape == (3, 6) and rep.feature_usage.shape == (6,)
    labels, acquired = np.asarray(rep.labels), np.asarray(rep.acquired)
    np.testing.assert_allclose(np.asarray(rep.class_usage), np.asarray(class_usage(acquired, y, 3, labels=labels)))
    assert set(np.unique(labels)) <= {0, 1, 2}
    np.testing.assert_allclose(float(rep.sparsity), 1 - acquired.mean(), rtol=1e-6)


# ----------------------------------------------------------------------------- metrics


def test_metrics_against_numpy():
    rng = np.random.default_rng(0)
    acq = rng.random((30, 5)) < 0.4
    y = rng.integers(0, 3, 30)
    lab = rng.integers(0, 3, 30)
    np.testing.assert_allclose(float(accuracy(lab, y)), (lab == y).mean(), rtol=1e-6)
    np.testing.assert_allclose(float(mean_sparsity(acq)), 1 - acq.mean(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(feature_usage(acq)), acq.mean(0), rtol=1e-6)
    cu = np.asarray(class_usage(acq, y, 3, labels=lab))
    for c in range(3):
        keep = (y == c) & (lab == y)
        ref = acq[keep].mean(0) if keep.any() else np.zeros(5)
        np.testing.assert_allclose(cu[c], ref, rtol=1e-6)
    groups = [[0, 1], [2], [3, 4]]
    costs = np.array([2.0, 3.0, 5.0])
    cm = np.array([[0, 1, 2], [4, 0, 1], [1, 1, 0]], float)
    ref = np.mean([sum(costs[g] for g, m in enumerate(groups) if acq[i, m].any()) + cm[lab[i], y[i]] for i in range(30)])
    got = average_cost(lab, acq, y, feature_costs=costs, cost_matrix=cm, groups=groups)
    np.testing.assert_allclose(float(got), ref, rtol=1e-12)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs, y_override, err, match",
    [
        ({}, [0, 2] * 10, ValueError, "every class present"),
        ({}, [-1, 1] * 10, ValueError, "negative"),
        ({}, [0.5, 1] * 10, ValueError, "integer"),
        ({"feature_costs": [1.0, 0.0, 1.0]}, None, ValueError, "feature_costs must be > 0"),
        ({"feature_costs": [1.0, -2.0, 1.0]}, None, ValueError, "feature_costs must be > 0"),
        ({"feature_costs": [1.0, 1.0]}, None, ValueError, "feature_costs must have shape"),
        ({"cost_matrix": np.ones((3, 3))}, None, ValueError, r"cost_matrix must have shape \(C, C\)"),
        ({"cost_matrix": [[0, np.nan], [1, 0]]}, None, ValueError, "NaN"),
        ({"budget": -1}, None, ValueError, "budget must be >= 0"),
        ({"budget": 1.5}, None, TypeError, "budget must be an integer"),
        ({"groups": [[0, 1], [1, 2]]}, None, ValueError, "partition"),
        ({"groups": [[0], [2]]}, None, ValueError, "partition"),
        ({"groups": [0, 2, 2]}, None, ValueError, "partition"),
        ({"groups": [0, 1]}, None, ValueError, "groups must be a"),
        ({"related": np.ones((3, 2), bool)}, None, ValueError, "square"),
        ({"related": np.ones((2, 2), bool)}, None, ValueError, r"related must be \(3, 3\)"),
        ({"related": np.full((3, 3), 0.5)}, None, TypeError, "boolean"),
        ({"lam": -0.1}, None, ValueError, "lam must be >= 0"),
        ({"alpha": 1.0}, None, ValueError, "alpha"),
        ({"l2": 0.0}, None, ValueError, "l2"),
        ({"n_iter": 0}, None, ValueError, "n_iter"),
        ({"mixture": "mean"}, None, ValueError, "mixture"),
    ],
)
def test_bad_input_raises(kwargs, y_override, err, match):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 3))
    y = np.array(y_override) if y_override is not None else np.array([0, 1] * 10)
    with pytest.raises(err, match=match):
        dwsm_fit(jax.random.key(0), X, y, **kwargs)


def test_bad_X_and_key():
    y = np.array([0, 1] * 5)
    with pytest.raises(ValueError, match="NaN"):
        dwsm_fit(jax.random.key(0), np.full((10, 2), np.nan), y)
    with pytest.raises(ValueError, match="2-D"):
        dwsm_fit(jax.random.key(0), np.zeros(10), y)
    with pytest.raises(ValueError, match="rows"):
        dwsm_fit(jax.random.key(0), np.zeros((9, 2)), y)
    with pytest.raises(TypeError, match="key"):
        dwsm_fit(0, np.zeros((10, 2)), y)


def test_predict_validates(x0_fit):
    _, _, pol = x0_fit
    with pytest.raises(ValueError, match="features"):
        dwsm_predict(pol, np.zeros((4, 5)))
    with pytest.raises(TypeError, match="DWSMPolicy"):
        dwsm_predict("policy", np.zeros((4, 3)))
