"""Tests of the datum-wise sparse model (jaxselect.dwsm) against slow numpy oracles.

Oracles (numpy, obviously correct, slow): ``np_episode`` simulates the greedy linear policy on
the MDP of paper §3.1/Table 2 step by step (full score recomputation, no incremental updates,
float64, the budget as a cumulative cost); ``np_q_values`` gets Q(s, a) from it; ``optimal_loss``
enumerates every adaptive acquisition policy (decision tree over observed values) of a tiny discrete
problem; ``datum_loss`` is the datum-wise loss of paper eq. (4)/Table 1 for each variant;
``_oracle_losses`` is every iterate's training datum-wise loss by ``np_episode`` (the returned
policy must be the best, issue 14), and ``collapse_problem`` a small copy of the WDBC collapse.

The suite runs in float32 (the default path); float64 cases use the ``x64`` fixture.
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxselect as js
from compile_count import count_compiles
from jaxselect import Groups
from jaxselect.dwsm import (
    DWSMPolicy,
    MDPOptions,
    RCPIOptions,
    initial_policy,
    trajectory_states,
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
    rcpi_evaluate,
    rcpi_init,
    rcpi_problem,
    rcpi_run,
    rcpi_step,
)
from jaxselect.dwsm.mdp import budget_rtol, feature_mask
from jaxselect.status import NONFINITE
from jaxselect.dwsm.policy_fit import mixture_weights, ridge_fit
from jaxselect.dwsm.rollouts import rollout_capacity, row_state_action_values, state_action_values
from jaxselect.dwsm.states import sample_states

DTYPES = [np.float32, np.float64]


def with_rcpi(fit_kw, **changes):
    """``fit_kw`` with some fields of its ``rcpi=RCPIOptions(...)`` changed."""
    return {**fit_kw, "rcpi": fit_kw["rcpi"].replace(**changes)}


def use_dtype(request, dtype):
    """Switch float64 on for this test when asked (the suite's default is float32)."""
    if dtype == np.float64:
        request.getfixturevalue("x64")


def tight(dtype):
    """(rtol, atol) for comparing a float computation with the float64 oracle."""
    return (1e-10, 1e-10) if dtype == np.float64 else (2e-5, 2e-5)


# ----------------------------------------------------------------------------- numpy oracles


def np_spec(spec):
    return dict(
        ids=np.asarray(spec.groups.ids),
        costs=np.asarray(spec.groups.costs, np.float64),
        live=np.asarray(spec.live),
        related=np.asarray(spec.related),
        cost_matrix=np.asarray(spec.cost_matrix, np.float64),
        lam=float(spec.lam),
        gamma=float(spec.gamma),
        budget=float(spec.budget),
        rtol=budget_rtol(spec.budget.dtype),
    )


def np_fits(S, spent, j):
    return spent + S["costs"][j] <= S["budget"] * (1 + S["rtol"])


def np_scores(theta, x, zf):
    ph = np.concatenate([zf.astype(float), x * zf, [1.0]])
    return theta @ ph


def np_episode(theta, S, x, y, z):
    """Greedy episode from (x, z), scores recomputed from scratch; returns (reward, label, z, order)."""
    theta = np.asarray(theta, np.float64)
    C = S["cost_matrix"].shape[0]
    J = S["costs"].shape[0]
    z = z.copy()
    ret, order = 0.0, []
    while True:
        zf = z[S["ids"]]
        s = np_scores(theta, x, zf)
        spent = float(np.sum(S["costs"][z]))
        best, best_a = -np.inf, None
        for a in range(C + J):
            if a >= C:
                j = a - C
                if z[j] or not S["live"][j] or not np_fits(S, spent, j):
                    continue
            if s[a] > best:
                best, best_a = s[a], a
        a = best_a
        if a < C:
            return ret - S["cost_matrix"][a, y], a, z, order
        j = a - C
        rel = S["related"]
        related_to_all = True if rel.shape[0] == 0 else all(rel[j, k] for k in np.flatnonzero(z))
        ret -= S["costs"][j] * (S["lam"] if related_to_all else S["gamma"])
        z[j] = True
        order.append(j)


def np_q_values(theta, S, x, y, z):
    C = S["cost_matrix"].shape[0]
    J = S["costs"].shape[0]
    Q = np.zeros(C + J)
    allowed = np.zeros(C + J, bool)
    Q[:C] = -S["cost_matrix"][:, y]
    allowed[:C] = True
    spent = float(np.sum(S["costs"][z]))
    rel = S["related"]
    for j in range(J):
        if z[j] or not S["live"][j] or not np_fits(S, spent, j):
            continue
        allowed[C + j] = True
        related_to_all = True if rel.shape[0] == 0 else all(rel[j, k] for k in np.flatnonzero(z))
        r = -S["costs"][j] * (S["lam"] if related_to_all else S["gamma"])
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
        loss += S["costs"][j] * (S["lam"] if related_to_all else S["gamma"])
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


def policy_from_theta(theta, spec, d):
    theta = jnp.asarray(theta, spec.lam.dtype)
    return DWSMPolicy(
        theta=theta,
        mean=jnp.zeros(d, theta.dtype),
        scale=jnp.ones(d, theta.dtype),
        spec=spec,
        thetas=theta[None],
        mix_weights=jnp.ones(1, theta.dtype),
        train_return=jnp.zeros(1, theta.dtype),
        train_accuracy=jnp.zeros(1, theta.dtype),
        status=jnp.zeros((), jnp.int32),
    )


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


GROUPS5 = [[0, 3], [1], [2, 4]]
IDS5 = np.array([0, 1, 2, 0, 2])


def random_spec(rng, d, C, variant):
    kw = {}
    if variant == "budget":
        kw["budget"] = 2
    elif variant == "cost":
        kw["groups"] = Groups.singletons(d, costs=rng.uniform(0.5, 2.0, size=d))
        cm = rng.uniform(0.5, 3.0, size=(C, C))
        np.fill_diagonal(cm, rng.uniform(-0.2, 0.0, size=C))
        kw["cost_matrix"] = cm
    elif variant == "cost_budget":  # the budget is a cumulative cost
        kw["groups"] = Groups.singletons(d, costs=rng.uniform(0.5, 2.0, size=d))
        kw["budget"] = 2.7
    elif variant == "grouped":
        kw["groups"] = GROUPS5
    elif variant == "relational":
        rel = rng.random((d, d)) < 0.5
        kw["related"] = rel | rel.T
        kw["gamma"] = 0.4
    elif variant == "grouped_budget":  # costs = group sizes: the budget counts features
        kw["groups"] = Groups.from_ids(IDS5, costs=np.bincount(IDS5))
        kw["budget"] = 3
    return make_spec(d, C, lam=0.1, **kw)


VARIANTS = ["base", "budget", "cost", "cost_budget", "grouped", "relational", "grouped_budget"]


# ----------------------------------------------------------------------------- rollouts = exact returns

_sav = jax.jit(state_action_values)
_row_sav = jax.jit(row_state_action_values, static_argnums=5)
_sample = jax.jit(sample_states, static_argnums=(2, 3, 4))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_rollout_q_values_equal_exact_returns(variant, dtype, request):
    use_dtype(request, dtype)
    rng = np.random.default_rng(sum(map(ord, variant)))
    d, C = 5, 3
    spec = random_spec(rng, d, C, variant)
    assert spec.lam.dtype == dtype
    S = np_spec(spec)
    J = S["costs"].shape[0]
    theta = rng.normal(size=(C + J, 2 * d + 1)).astype(dtype)
    rtol, atol = tight(dtype)
    for trial in range(6):
        x = rng.normal(size=d).astype(dtype)
        y = int(rng.integers(C))
        z = rng.random(J) < 0.3
        if S["costs"][z].sum() > S["budget"]:
            z[:] = False
        ph, Q, allowed, correct, s0 = _sav(
            jnp.asarray(theta), spec, jnp.asarray(x), jnp.asarray(y, jnp.int32), jnp.asarray(z)
        )
        assert Q.dtype == dtype
        Q_ref, allowed_ref = np_q_values(theta, S, x, y, z)
        np.testing.assert_array_equal(np.asarray(allowed), allowed_ref)
        np.testing.assert_allclose(np.asarray(Q)[allowed_ref], Q_ref[allowed_ref], rtol=rtol, atol=atol)
        np.testing.assert_allclose(np.asarray(s0), np_scores(theta, x, z[S["ids"]]), rtol=rtol, atol=atol)


@pytest.mark.parametrize("variant", VARIANTS)
def test_slot_pool_rollouts_equal_exact_returns(variant):
    """The slot pool of RCPI's rollouts (one while_loop; a finished slot loads the next lane), with
    several policies, a pool smaller than the lanes and invalid lanes skipped, gives the numpy
    oracle's Q(s, j) = r(s, j) + return for every lane, and each lane's terminal units."""
    from jaxselect.dwsm.mdp import acquire_reward
    from jaxselect.dwsm.rollouts import slot_rollouts

    rng = np.random.default_rng(7 + sum(map(ord, variant)))
    d, C, N, K = 5, 3, 12, 3
    spec = random_spec(rng, d, C, variant)
    S = np_spec(spec)
    J = S["costs"].shape[0]
    thetas = rng.normal(size=(K, C + J, 2 * d + 1)).astype(np.float32)
    X = rng.normal(size=(N, d)).astype(np.float32)
    y = rng.integers(C, size=N).astype(np.int32)
    Z = rng.random((N, J)) < 0.3
    Z[S["costs"][None, :].repeat(N, 0).__mul__(Z).sum(1) > S["budget"]] = False
    comp = rng.integers(K, size=N).astype(np.int32)
    lane_s = np.repeat(np.arange(N, dtype=np.int32), J)
    lane_j = np.tile(np.arange(J, dtype=np.int32), N)
    allowed = np.stack([np_q_values(thetas[comp[i]], S, X[i], int(y[i]), Z[i])[1][C:] for i in range(N)])
    lane_v = allowed.reshape(-1) & (rng.random(N * J) < 0.8)
    zf = np.asarray(feature_mask(spec, jnp.asarray(Z)))
    Phi = np.concatenate([zf, X * zf, np.ones((N, 1))], axis=1).astype(np.float32)
    scores = np.einsum("nap,np->na", thetas[comp], Phi)
    spent = (Z * S["costs"][None, :]).sum(1).astype(np.float32)
    ret, zT = jax.jit(slot_rollouts, static_argnames=("n_terminal", "batch"))(
        spec, jnp.swapaxes(jnp.asarray(thetas), 1, 2), jnp.asarray(comp), jnp.asarray(X), jnp.asarray(y),
        jnp.asarray(Z), jnp.asarray(spent), jnp.asarray(scores), jnp.asarray(lane_s), jnp.asarray(lane_j),
        jnp.asarray(lane_v), n_terminal=N * J, batch=7,
    )
    r_acq = np.asarray(jax.vmap(acquire_reward, in_axes=(None, 0))(spec, jnp.asarray(Z)))
    ret, zT = np.asarray(ret), np.asarray(zT)
    for lane in np.flatnonzero(lane_v):
        i, j = lane_s[lane], lane_j[lane]
        Q_ref, _ = np_q_values(thetas[comp[i]], S, X[i], int(y[i]), Z[i])
        np.testing.assert_allclose(r_acq[i, j] + float(ret[lane]), Q_ref[C + j], rtol=1e-4, atol=1e-4)
        assert zT[lane][j] and (zT[lane] >= Z[i]).all()
    assert not ret[~lane_v].any()


def test_packed_rollouts_match_unpacked():
    """Lane packing over the allowed acquisitions of a row gives the same Q as one state at a time."""
    rng = np.random.default_rng(3)
    d, C, S_ = 6, 2, 5
    spec = make_spec(d, C, lam=0.05)
    theta = jnp.asarray(rng.normal(size=(S_, C + d, 2 * d + 1)), jnp.float32)
    x = jnp.asarray(rng.normal(size=d), jnp.float32)
    Z = _sample(jax.random.key(1), spec, 1, S_, d)[0]
    cap = rollout_capacity(d, S_, d, True)
    assert cap < S_ * d
    out = [np.asarray(a) for a in _row_sav(theta, spec, x, jnp.asarray(1, jnp.int32), Z, cap)]
    for r in range(S_):
        one = _sav(theta[r], spec, x, jnp.asarray(1, jnp.int32), Z[r])
        for a, b in zip(out, one):
            np.testing.assert_allclose(a[r], np.asarray(b), rtol=1e-6, atol=1e-6)


def test_sample_states_distribution_and_budget():
    spec = make_spec(8, 2, lam=0.1)
    Z = np.asarray(_sample(jax.random.key(0), spec, 3000, 4, 8))
    sizes = Z.sum(-1)
    # stratified: state r of a row has at least floor(r*9/4) units
    for r in range(4):
        assert sizes[:, r].min() >= (r * 9) // 4
    hist = np.bincount(sizes.ravel(), minlength=9) / sizes.size
    np.testing.assert_allclose(hist, np.full(9, 1 / 9), atol=0.02)  # ‖z‖ ~ U{0..J}
    np.testing.assert_allclose(Z.mean((0, 1)), 0.5, atol=0.03)  # every unit equally likely
    # budget = cumulative cost (costs = group sizes: counts features); never exceeded
    ids = np.array([0, 0, 0, 1, 2])
    spec_b = make_spec(5, 2, groups=Groups.from_ids(ids, costs=np.bincount(ids)), budget=3)
    Zb = np.asarray(jax.jit(sample_states, static_argnums=(2, 3))(jax.random.key(1), spec_b, 500, 4))
    spent = (Zb * np.bincount(ids)).sum(-1)
    assert spent.max() <= 3 and (spent == 3).any()
    # units that cannot be acquired (all features constant) are never sampled
    dead = spec._replace(live=jnp.asarray([True, False] * 4))
    Zd = np.asarray(_sample(jax.random.key(2), dead, 500, 4, 4))
    assert not Zd[..., 1::2].any() and Zd.sum(-1).max() == 4


def test_mixture_weights_are_the_paper_alpha_mixture():
    alpha = 0.7
    for t in range(5):
        w = np.asarray(mixture_weights(t, 6, jnp.float32(alpha), "stochastic"))
        ref = np.zeros(6)
        ref[0] = alpha**t
        for k in range(1, t + 1):
            ref[k] = (1 - alpha) * alpha ** (t - k)
        np.testing.assert_allclose(w, ref, rtol=1e-5)
        assert abs(w.sum() - 1) < 1e-5
    w = np.asarray(mixture_weights(3, 6, jnp.float32(alpha), "average"))
    np.testing.assert_array_equal(w, np.eye(6)[3])


@pytest.mark.parametrize("dtype", DTYPES)
def test_ridge_fit_matches_numpy_per_action(dtype, request):
    """(Φ_aᵀΦ_a/m + l2·D) θ_a = Φ_aᵀQ_a/m: the minimiser of (1/m) Σ ½ r² + (l2/2)‖Dθ‖²."""
    use_dtype(request, dtype)
    rng = np.random.default_rng(0)
    N, p, A = 50, 7, 4
    Phi = np.concatenate([rng.normal(size=(N, p - 1)), np.ones((N, 1))], axis=1)
    Q = rng.normal(size=(N, A))
    W = rng.random((N, A)) < 0.6
    W[:, 3] = False  # never allowed: keeps previous weights
    prev = rng.normal(size=(A, p))
    args = [jnp.asarray(a, dtype) for a in (Phi, Q)] + [
        jnp.asarray(W),
        jnp.asarray(0.1, dtype),
        jnp.asarray(prev, dtype),
    ]
    th = np.asarray(jax.jit(ridge_fit)(*args))
    D = np.diag(np.r_[np.ones(p - 1), 0.0])
    for a in range(3):
        P, q = Phi[W[:, a]], Q[W[:, a], a]
        m = len(q)
        ref = np.linalg.solve(P.T @ P / m + 0.1 * D, P.T @ q / m)
        # the objective's gradient vanishes there: (1/m) Pᵀ(Pθ − q) + l2·Dθ = 0
        np.testing.assert_allclose(P.T @ (P @ ref - q) / m + 0.1 * D @ ref, 0, atol=1e-12)
        np.testing.assert_allclose(th[a], ref, rtol=1e-9 if dtype == np.float64 else 1e-4, atol=1e-5)
    np.testing.assert_array_equal(th[3], prev[3].astype(dtype))


def test_ridge_statistics_of_row_blocks_add_up():
    # the row-sharded fit sums these statistics across devices before solving
    from jaxselect.dwsm.policy_fit import ridge_solve, ridge_stats

    rng = np.random.default_rng(1)
    N, p, A = 40, 5, 3
    Phi, Q, W = rng.normal(size=(N, p)), rng.normal(size=(N, A)), rng.random((N, A)) < 0.5
    prev = jnp.asarray(rng.normal(size=(A, p)), jnp.float32)
    f32 = lambda a: jnp.asarray(a, jnp.float32) if a.dtype != bool else jnp.asarray(a)  # noqa: E731
    blocks = [ridge_stats(*(f32(a[i : i + 10]) for a in (Phi, Q, W))) for i in range(0, N, 10)]
    summed = jax.tree.map(lambda *b: sum(b), *blocks)
    th = ridge_solve(*summed, jnp.float32(0.1), prev)
    ref = ridge_fit(f32(Phi), f32(Q), f32(W), jnp.float32(0.1), prev)
    np.testing.assert_allclose(np.asarray(th), np.asarray(ref), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("p", [9, 300, 1030])  # Cholesky, 2 × 2 blocks, LU (BLOCK_SOLVE_MIN, LU_SOLVE_MIN)
def test_all_actions_in_one_solve_match_numpy(p):
    """ridge_solve_actions: the C classification actions (one shared system) and the J acquisition
    actions (one system each, their own ridge weight) solved in one batched call equal numpy's solves
    of ``(G/m + l2·D) θ = b/m``; an action with m = 0 keeps its previous weights."""
    from jaxselect.dwsm.policy_fit import BLOCK_SOLVE_MIN, LU_SOLVE_MIN, ridge_solve_actions

    assert (p >= BLOCK_SOLVE_MIN) == (p > 9) and (p >= LU_SOLVE_MIN) == (p == 1030)
    rng = np.random.default_rng(2)
    C, J, n = 3, 4, 2 * p
    D = np.diag(np.r_[np.ones(p - 1), 0.0])

    def gram():  # sparse-ish φ with a bias column, as the states' features are
        P = rng.normal(size=(n, p)) * (rng.random((n, p)) < 0.2)
        P[:, -1] = 1.0
        return P.T @ P

    G_cls, B_cls = gram(), rng.normal(size=(C, p))
    G_acq, B_acq = np.stack([gram() for _ in range(J)]), rng.normal(size=(J, p))
    m_acq = np.array([n, n / 2, 0.0, n])
    prev = rng.normal(size=(C + J, p))
    f = lambda a: jnp.asarray(np.asarray(a, np.float32), jnp.float32)  # noqa: E731  (cast on the host)
    th = np.asarray(
        jax.jit(ridge_solve_actions)(
            f(n), f(B_cls), f(G_cls), f(0.1), f(m_acq), f(B_acq), f(G_acq), f(0.3), f(prev)
        ),
        np.float64,
    )
    ref_cls = np.linalg.solve(G_cls / n + 0.1 * D, B_cls.T / n).T
    np.testing.assert_allclose(th[:C], ref_cls, rtol=2e-3, atol=2e-4)
    for j in range(J):
        want = prev[C + j] if m_acq[j] == 0 else np.linalg.solve(G_acq[j] / m_acq[j] + 0.3 * D, B_acq[j] / m_acq[j])
        np.testing.assert_allclose(th[C + j], want, rtol=2e-3, atol=2e-4)


def test_row_sharded_X_equals_plain_fit():
    # a row-sharded X (here on a one-device mesh) is partitioned by XLA inside the one compiled
    # fit; tests/sharded_cases.py checks 4 devices
    from jax.sharding import NamedSharding, PartitionSpec

    from jaxselect import data_mesh

    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 4)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)
    kw = dict(lam=0.05, n_iter=2, rcpi=RCPIOptions(states_per_example=2, rollout_batch=24))
    a = dwsm_fit(jax.random.key(3), X, y, **kw)
    mesh = data_mesh(jax.devices()[:1])
    Xd = jax.device_put(X, NamedSharding(mesh, PartitionSpec("data")))
    b = dwsm_fit(jax.random.key(3), Xd, y, **kw)
    np.testing.assert_allclose(np.asarray(b.theta), np.asarray(a.theta), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(b.train_return), np.asarray(a.train_return), rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------- exact optimal policy


FIT_TINY = dict(n_iter=6, rcpi=RCPIOptions(states_per_example=10))  # one compiled fit shared by the tiny problems


@pytest.fixture(scope="module")
def x0_fit():
    X, y = grid_problem("x0")
    pol = dwsm_fit(jax.random.key(0), X, y, lam=0.1, **FIT_TINY)
    return X, y, pol


def test_rcpi_reaches_exact_optimal_policy(x0_fit):
    X, y, pol = x0_fit
    opt = optimal_loss(X, y, 0.1, 2)
    assert opt == pytest.approx(0.1)
    assert pol.theta.dtype == jnp.float32 and int(pol.status) == 0
    tr = dwsm_trace(pol, X, y)
    np.testing.assert_allclose(-float(np.mean(np.asarray(tr.reward))), opt, atol=1e-6)
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
    np.testing.assert_allclose(-float(np.mean(np.asarray(tr.reward))), opt, atol=1e-6)


def test_rcpi_reaches_optimum_float64(x64):
    X, y = grid_problem("x0")
    pol = dwsm_fit(jax.random.key(0), X, y, lam=0.1, **FIT_TINY)
    assert pol.theta.dtype == jnp.float64
    tr = dwsm_trace(pol, X, y)
    np.testing.assert_allclose(-float(np.mean(np.asarray(tr.reward))), optimal_loss(X, y, 0.1, 2), atol=1e-12)


# ----------------------------------------------------------------------------- episode reward = −loss


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_episode_reward_is_minus_datum_wise_loss(variant, dtype, request):
    use_dtype(request, dtype)
    rng = np.random.default_rng(7)
    d, C, n = 5, 3, 40
    spec = random_spec(rng, d, C, variant)
    S = np_spec(spec)
    J = S["costs"].shape[0]
    theta = rng.normal(size=(C + J, 2 * d + 1))
    theta[:C, -1] -= 1.0  # acquire a few units before classifying
    theta = theta.astype(dtype)
    pol = policy_from_theta(theta, spec, d)
    X = rng.normal(size=(n, d)).astype(dtype)
    y = rng.integers(0, C, size=n)
    tr = dwsm_trace(pol, X, y)
    labels, acquired = dwsm_predict(pol, X)
    np.testing.assert_array_equal(np.asarray(tr.labels), np.asarray(labels))
    np.testing.assert_array_equal(np.asarray(tr.acquired), np.asarray(acquired))
    rtol, atol = tight(dtype)
    used = 0
    tr_order, tr_labels, tr_reward, acquired = (np.asarray(a) for a in (tr.order, tr.labels, tr.reward, acquired))
    for i in range(n):
        order = [int(j) for j in tr_order[i] if j >= 0]
        used += len(order)
        ref_ret, ref_label, ref_z, ref_order = np_episode(theta, S, X[i], y[i], np.zeros(J, bool))
        assert order == ref_order
        assert int(tr_labels[i]) == ref_label
        np.testing.assert_array_equal(acquired[i], ref_z[S["ids"]])
        loss = datum_loss(S, int(tr_labels[i]), int(y[i]), order)
        np.testing.assert_allclose(float(tr_reward[i]), -loss, rtol=rtol, atol=atol)
        np.testing.assert_allclose(ref_ret, -loss, rtol=1e-12)
        assert S["costs"][order].sum() <= S["budget"] * (1 + S["rtol"])
        if variant == "grouped_budget":
            assert acquired[i].sum() <= 3  # costs = sizes: the budget counts features
        if variant.startswith("grouped"):
            a = acquired[i]
            for members in GROUPS5:
                assert a[members].all() or not a[members].any()
    assert used > 0  # the test exercised acquisitions
    rep = dwsm_evaluate(pol, X, y)
    np.testing.assert_allclose(float(rep.mean_loss), -float(np.mean(np.asarray(tr.reward))), rtol=rtol, atol=atol)


def test_base_loss_is_eq2():
    """Base model: reward = −(λ‖z‖₀ + Δ(ŷ, y)) (paper eq. 2)."""
    X, y = grid_problem("x0")
    rng = np.random.default_rng(0)
    spec = make_spec(3, 2, lam=0.07)
    pol = policy_from_theta(rng.normal(size=(5, 7)), spec, 3)
    tr = dwsm_trace(pol, X, y)
    ref = 0.07 * np.asarray(tr.acquired).sum(1) + (np.asarray(tr.labels) != y)
    np.testing.assert_allclose(-np.asarray(tr.reward), ref, rtol=1e-6)


def _ordered_theta(J, C=2):
    """Scores that acquire units 0, 1, …, J-1 in that order while allowed, then classify as 0."""
    d = J
    theta = np.zeros((C + J, 2 * d + 1))
    theta[:C, -1] = [-10.0, -11.0]
    theta[C:, -1] = np.arange(J, 0, -1.0)  # unit j scores J - j
    return theta


@pytest.mark.parametrize("budget, n_acquired", [(24.31, 6), (24.3, 5), (21.95, 5), (21.0, 4), (0.0, 0)])
def test_float32_budget_is_a_cost_with_tolerance(budget, n_acquired):
    """Two-decimal costs summing exactly to the budget: float32 rounding does not drop the last unit."""
    costs = [1.76, 6.5, 2.68, 8.17, 2.84, 2.36]  # sum 24.31; float32 sum 24.310001
    spec = make_spec(6, 2, lam=0.1, budget=budget, groups=Groups.singletons(6, costs=costs))
    assert spec.budget.dtype == jnp.float32
    pol = policy_from_theta(_ordered_theta(6), spec, 6)
    X = np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32)
    tr = dwsm_trace(pol, X, np.zeros(4, int))
    S = np_spec(spec)
    tr_order, tr_reward = np.asarray(tr.order), np.asarray(tr.reward)
    for i in range(4):
        order = [int(j) for j in tr_order[i] if j >= 0]
        assert order == list(range(n_acquired))
        assert order == np_episode(_ordered_theta(6), S, X[i].astype(np.float64), 0, np.zeros(6, bool))[3]
        np.testing.assert_allclose(float(tr_reward[i]), -0.1 * sum(costs[:n_acquired]), rtol=1e-5)


def test_budget_validation_huge_and_inf():
    ok = make_spec(3, 2, budget=10**400)  # beyond every float: no budget, no OverflowError
    assert np.isinf(float(ok.budget))
    assert np.isinf(float(make_spec(3, 2, budget=np.inf).budget))
    assert float(make_spec(3, 2, budget=2).budget) == 2.0
    assert float(make_spec(3, 2, budget=np.float32(1.5)).budget) == 1.5
    with pytest.raises(ValueError, match="budget must be >= 0"):
        make_spec(3, 2, budget=-(10**400))
    with pytest.raises(ValueError, match="NaN"):
        make_spec(3, 2, budget=np.nan)
    with pytest.raises(TypeError, match="budget"):
        make_spec(3, 2, budget="2")
    with pytest.raises(TypeError, match="budget"):
        make_spec(3, 2, budget=True)


# ----------------------------------------------------------------------------- fitted variants


FIT_SMALL = dict(n_iter=4, rcpi=RCPIOptions(states_per_example=4, alpha=0.3))  # shared compiled config (90 x 6)


@pytest.fixture(scope="module")
def blobs():
    rng = np.random.default_rng(0)
    n, d = 90, 6
    X = rng.normal(size=(n, d)).astype(np.float32)
    X[:, 4] = 2.5  # constant column
    X[:, 5] = X[:, 0]  # duplicated feature
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int) + (X[:, 2] > 1.0).astype(int)
    return X, y


BLOB_GROUPS = [[0, 3], [1, 4], [2], [5]]
BLOB_IDS = np.array([0, 1, 2, 0, 1, 3])


def test_budget_counts_features_with_size_costs_and_grouped_masks(blobs):
    X, y = blobs
    units = Groups.from_ids(BLOB_IDS, costs=np.bincount(BLOB_IDS))  # cost = size: budget counts features
    pol = dwsm_fit(jax.random.key(0), X, y, lam=0.0, budget=3, groups=units, **FIT_SMALL)
    labels, acquired = dwsm_predict(pol, X)
    a = np.asarray(acquired)
    assert a.sum(1).max() <= 3
    assert a.sum() > 0
    for members in BLOB_GROUPS:
        sub = a[:, members]
        assert np.all(sub.all(1) | ~sub.any(1))
    Xt = np.random.default_rng(5).normal(size=(200, 6)) * 3
    assert np.asarray(dwsm_predict(pol, Xt)[1]).sum(1).max() <= 3


def test_budget_with_unit_costs_counts_groups(blobs):
    X, y = blobs
    pol = dwsm_fit(jax.random.key(0), X, y, lam=0.0, budget=2, groups=BLOB_IDS, **FIT_SMALL)
    tr = dwsm_trace(pol, X, y)
    n_units = np.asarray(tr.order >= 0).sum(1)
    assert n_units.max() == 2  # a group counts 1 whatever its size
    # the features acquired are those of the acquired groups (2 groups of 2 features: 4 features)
    sizes = np.bincount(np.asarray(BLOB_IDS))
    order = np.asarray(tr.order)
    expected = np.where(order >= 0, sizes[np.maximum(order, 0)], 0).sum(1)
    np.testing.assert_array_equal(np.asarray(tr.acquired).sum(1), expected)
    assert expected.max() > n_units.max()  # some datum took a group of several features


def test_budget_zero_acquires_nothing(blobs):
    X, y = blobs
    pol = dwsm_fit(jax.random.key(0), X, y, lam=0.0, budget=0, groups=BLOB_GROUPS, **FIT_SMALL)
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
    """Features 0 and 5 are copies; 0 costs 20x more (Groups.costs): the policy buys the cheap copy."""
    X, y = blobs
    costs = np.array([20.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    cm = np.array([[0.0, 2.0, 3.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    units = Groups.singletons(6, costs=costs)
    pol = dwsm_fit(jax.random.key(0), X, y, lam=0.01, groups=units, mdp=MDPOptions(cost_matrix=cm), **FIT_SMALL)
    np.testing.assert_allclose(np.asarray(pol.spec.groups.costs), costs)
    rep = dwsm_evaluate(pol, X, y)
    usage = np.asarray(rep.feature_usage)
    assert usage[5] > 0.2 and usage[0] < 0.5 * usage[5]
    labels, acquired = np.asarray(rep.labels), np.asarray(rep.acquired)
    ref = (acquired @ costs + cm[labels, y]).mean()
    np.testing.assert_allclose(float(rep.average_cost), ref, rtol=1e-5)
    np.testing.assert_allclose(float(average_cost(labels, acquired, y, groups=units, cost_matrix=cm)), ref, rtol=1e-6)
    np.testing.assert_allclose(float(rep.mean_loss), (0.01 * acquired @ costs + cm[labels, y]).mean(), rtol=1e-5)


def test_group_costs_are_honoured(blobs):
    """Costs given once in Groups reach the rewards: −λ Σ c_j per datum; a costly group is avoided."""
    X, y = blobs
    cheap = dwsm_fit(jax.random.key(0), X, y, lam=0.01, groups=BLOB_IDS, **FIT_SMALL)
    costs = np.array([40.0, 1.0, 1.0, 1.0])  # group {0, 3} costs 40; group {5} is a copy of feature 0
    dear = dwsm_fit(jax.random.key(0), X, y, lam=0.01, groups=Groups.from_ids(BLOB_IDS, costs=costs), **FIT_SMALL)
    used = lambda pol: np.asarray(dwsm_trace(pol, X, y).acquired)[:, 0].mean()  # noqa: E731
    assert used(cheap) > 0.2 and used(dear) < 0.5 * used(cheap)
    tr = dwsm_trace(dear, X, y)
    order = np.asarray(tr.order)
    acq_cost = np.array([costs[o[o >= 0]].sum() for o in order])
    mistakes = np.asarray(tr.labels) != y
    np.testing.assert_allclose(-np.asarray(tr.reward), 0.01 * acq_cost + mistakes, rtol=1e-5, atol=1e-6)


def test_groups_forms_agree(blobs):
    """Ids, a list of index lists and a unit-cost Groups are the same units."""
    X, y = blobs
    kw = dict(lam=0.01, **FIT_SMALL)
    a = dwsm_fit(jax.random.key(2), X, y, groups=BLOB_IDS, **kw)
    b = dwsm_fit(jax.random.key(2), X, y, groups=BLOB_GROUPS, **kw)
    c = dwsm_fit(jax.random.key(2), X, y, groups=Groups.from_ids(BLOB_IDS), **kw)
    for other in (b, c):
        np.testing.assert_array_equal(np.asarray(other.theta), np.asarray(a.theta))


def test_fit_deterministic_given_key(blobs, lam0_fit):
    X, y = blobs
    b = dwsm_fit(jax.random.key(0), X, y, lam=0.0, **FIT_SMALL)
    np.testing.assert_array_equal(np.asarray(lam0_fit.theta), np.asarray(b.theta))
    c = dwsm_fit(jax.random.key(4), X, y, lam=0.0, **FIT_SMALL)
    assert not np.array_equal(np.asarray(lam0_fit.theta), np.asarray(c.theta))


def test_jit_and_nojit_agree():
    rng = np.random.default_rng(4)
    d, C = 2, 2
    spec = make_spec(d, C, lam=0.1, budget=2)
    theta = jnp.asarray(rng.normal(size=(C + d, 2 * d + 1)), jnp.float32)
    x = jnp.asarray(rng.normal(size=d), jnp.float32)
    z = jnp.asarray([False, True])
    a = _sav(theta, spec, x, jnp.asarray(1, jnp.int32), z)
    with jax.disable_jit():
        b = state_action_values(theta, spec, x, jnp.asarray(1, jnp.int32), z)
    for u, v in zip(a, b):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-6)
    pol = policy_from_theta(theta, spec, d)
    X = rng.normal(size=(2, d))
    la, aa = dwsm_predict(pol, X)
    with jax.disable_jit():
        lb, ab = dwsm_predict(pol, X)
    np.testing.assert_array_equal(np.asarray(la), np.asarray(lb))
    np.testing.assert_array_equal(np.asarray(aa), np.asarray(ab))


@jax.jit
def _user_jit_fit(key, X, y, lam, l2):
    """dwsm_fit inside a user's jit (one compiled program shared by the tests below)."""
    return dwsm_fit(key, X, y, n_classes=2, lam=lam, **with_rcpi(FIT_TINY, l2=l2))


def test_fit_inside_user_jit_matches_eager(x0_fit):
    """Traced key, X, y, lam and l2 (n_classes given): the same policy as the eager fit."""
    X, y, eager = x0_fit
    X = X.astype(np.float32)
    jitted = _user_jit_fit(jax.random.key(0), X, y, jnp.float32(0.1), jnp.float32(0.01))
    assert int(jitted.status) == 0
    np.testing.assert_allclose(np.asarray(jitted.thetas), np.asarray(eager.thetas), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(jitted.train_return), np.asarray(eager.train_return), rtol=1e-5, atol=1e-6)
    assert int(jitted.best) == int(eager.best)
    np.testing.assert_array_equal(np.asarray(dwsm_predict(jitted, X)[0]), np.asarray(dwsm_predict(eager, X)[0]))
    # traced labels need n_classes
    with pytest.raises(ValueError, match="n_classes"):
        jax.jit(lambda X, y: dwsm_fit(jax.random.key(0), X, y, **FIT_TINY).theta)(X, y)


def test_labels_bool_and_column_vector(blobs):
    X, _ = blobs
    yb = X[:, 0] > 0
    kw = dict(lam=0.01, **FIT_SMALL)
    a = dwsm_fit(jax.random.key(1), X, yb, **kw)
    b = dwsm_fit(jax.random.key(1), X, yb.astype(int)[:, None], **kw)
    np.testing.assert_array_equal(np.asarray(a.theta), np.asarray(b.theta))
    assert a.spec.n_classes == 2


_SEEN = []


def test_second_fit_compiles_nothing(blobs):
    """Fresh equal arrays, fresh equal Groups and a fresh equal lambda callback: no recompilation."""
    X, y = blobs

    def run():
        _SEEN.clear()
        units = Groups.from_ids(BLOB_IDS.copy(), costs=[2.0, 1.0, 1.0, 3.0])
        pol = dwsm_fit(
            jax.random.key(0),
            X.copy(),
            y.copy(),
            lam=0.01,
            groups=units,
            budget=4.0,
            callback=lambda it, r, a: _SEEN.append(int(it)),
            **FIT_SMALL,
        )
        dwsm_evaluate(pol, X.copy(), y.copy())
        jax.block_until_ready(pol)
        return list(_SEEN)

    assert run() == [1, 2, 3, 4]
    with count_compiles() as n:
        assert run() == [1, 2, 3, 4]
    assert n[0] == 0


def test_constant_columns_are_inert(blobs, lam0_fit):
    X, y = blobs
    pol = lam0_fit
    assert np.all(np.isfinite(np.asarray(pol.theta))) and int(pol.status) == 0
    assert float(np.asarray(pol.scale)[4]) == 1.0  # constant column: scale 1
    assert not bool(np.asarray(pol.spec.live)[4])  # a unit of constant features only: never acquirable
    assert np.all(np.asarray(pol.thetas)[:, :, 6 + 4] == 0)  # weight of its value: exactly 0
    labels, acquired = dwsm_predict(pol, X)
    assert not np.asarray(acquired)[:, 4].any()
    Xt = X.copy()
    Xt[:, 4] = 1e6  # a different value at prediction time changes nothing
    np.testing.assert_array_equal(np.asarray(dwsm_predict(pol, Xt)[0]), np.asarray(labels))
    assert float(accuracy(labels, y)) > 0.75
    # a group with one live feature stays acquirable
    grouped = dwsm_fit(jax.random.key(0), X, y, lam=0.0, groups=BLOB_IDS, **FIT_SMALL)
    assert np.asarray(grouped.spec.live).all()
    with pytest.raises(ValueError, match=r"constant column\(s\) \[4\]"):
        dwsm_fit(jax.random.key(0), X, y, mdp=MDPOptions(constant_columns="raise"), **FIT_SMALL)
    with pytest.raises(ValueError, match="constant_columns"):
        dwsm_fit(jax.random.key(0), X, y, mdp=MDPOptions(constant_columns="drop"), **FIT_SMALL)


def test_float32_fit_and_progress_callback(capsys):
    """float32 in, float32 policy out; the callback sees every iteration; silent by default."""
    X, y = grid_problem("x0")
    seen = []
    pol = dwsm_fit(
        jax.random.key(0),
        X.astype(np.float32),
        y,
        lam=0.1,
        **FIT_TINY,
        callback=lambda it, r, a: seen.append((int(it), float(r), float(a))),
    )
    assert pol.theta.dtype == jnp.float32 and pol.spec.lam.dtype == jnp.float32
    labels, acq = dwsm_predict(pol, X.astype(np.float32))
    assert labels.dtype == jnp.int32 and acq.dtype == jnp.bool_
    np.testing.assert_array_equal(np.asarray(labels), y)
    assert [s[0] for s in seen] == list(range(1, FIT_TINY["n_iter"] + 1))
    # the callback reports each iterate's own greedy policy on the training rows (−datum-wise loss)
    np.testing.assert_allclose([s[1] for s in seen], np.asarray(pol.train_return), rtol=1e-6)
    np.testing.assert_allclose([s[1] for s in seen], -np.asarray(pol.train_loss)[1:], rtol=1e-6)
    np.testing.assert_allclose([s[2] for s in seen], np.asarray(pol.train_accuracy), rtol=1e-6)
    dwsm_fit(jax.random.key(0), X, y, lam=0.1, **FIT_TINY)
    assert capsys.readouterr().out == ""
    dwsm_fit(jax.random.key(0), X, y, lam=0.1, **FIT_TINY, verbose=True)
    out = capsys.readouterr().out
    # one line per iterate, numbered as the iterates: 0 (θ_0, classify at once), 1..n_iter
    n = FIT_TINY["n_iter"]
    assert out.count("[dwsm] iteration") == n + 1
    assert [line.split()[2] for line in out.strip().splitlines()] == [f"{t}/{n}" for t in range(n + 1)]
    # the log's last line names the iterate that is returned and its training datum-wise loss
    last = out.strip().splitlines()[-1]
    best_loss = float(np.asarray(pol.train_loss)[int(pol.best)])
    assert f"best so far: iteration {int(pol.best)}, loss {best_loss:.4f}" in last
    tr = dwsm_trace(pol, X.astype(np.float32), y)
    assert best_loss == pytest.approx(-float(np.mean(np.asarray(tr.reward))), abs=1e-6)


def test_callback_exception_reaches_the_user():
    X, y = grid_problem("x0")
    calls = []

    def bad(it, r, a):
        calls.append(int(it))
        raise KeyError("stop here")

    with pytest.raises(KeyError, match="stop here"):
        dwsm_fit(jax.random.key(0), X, y, lam=0.1, callback=bad, **FIT_TINY)
    assert calls == [1]  # the remaining iterations ran without it
    # the next fit is unaffected
    pol = dwsm_fit(jax.random.key(0), X, y, lam=0.1, callback=lambda *a: None, **FIT_TINY)
    assert int(pol.status) == 0


def test_status_nonfinite_and_raise_for_status(blobs, x0_fit):
    X, y = blobs
    # rewards that overflow float32 sums; only a traced λ gets past the magnitude check at the boundary
    X0, y0, _ = x0_fit
    pol = _user_jit_fit(jax.random.key(0), X0.astype(np.float32), y0, jnp.float32(3e38), jnp.float32(0.01))
    assert int(pol.status) == NONFINITE
    with pytest.raises(js.SolverError, match="non-finite"):
        js.raise_for_status(pol)
    assert js.raise_for_status(dwsm_fit(jax.random.key(0), X, y, lam=0.0, **FIT_SMALL)) is not None


def test_trace_and_report_status(x0_fit):
    """DWSMTrace and DWSMReport carry a status: 0 for a normal fit; NONFINITE when θ or an episode's
    reward is not finite, or when the policy's own status says so."""
    X, y, pol = x0_fit
    tr, rep = dwsm_trace(pol, X, y), dwsm_evaluate(pol, X, y)
    assert tr.status.dtype == jnp.int32 and int(tr.status) == 0 and int(rep.status) == 0
    assert js.raise_for_status(rep) is rep
    theta = np.asarray(pol.theta).copy()
    theta[0, 0] = np.nan  # the weight of z_0 in class 0's score
    bad = pol._replace(theta=jnp.asarray(theta))
    assert int(dwsm_trace(bad, X, y).status) == NONFINITE and int(dwsm_evaluate(bad, X, y).status) == NONFINITE
    # finite θ, an infinite misclassification cost: the rewards are not finite
    inf_cost = pol._replace(spec=pol.spec._replace(cost_matrix=jnp.asarray([[0.0, np.inf], [np.inf, 0.0]], jnp.float32)))
    rep_inf = dwsm_evaluate(inf_cost, X, 1 - y)
    assert int(rep_inf.status) == NONFINITE
    with pytest.raises(js.SolverError, match="non-finite"):
        js.raise_for_status(rep_inf)
    # the policy's status is passed on
    flagged = pol._replace(status=jnp.asarray(NONFINITE, jnp.int32))
    assert int(dwsm_trace(flagged, X, y).status) == NONFINITE
    assert "status=0" in repr(tr) and "status=0" in repr(rep)


def test_short_reprs(x0_fit):
    X, y, pol = x0_fit
    for obj in (pol, pol.spec, dwsm_trace(pol, X, y), dwsm_evaluate(pol, X, y)):
        text = repr(obj)
        assert len(text) < 700 and "[[" not in text, text
    assert "status=0" in repr(pol) and "theta=float32[5, 7]" in repr(pol)
    assert repr(pol.spec).startswith("DWSMSpec(groups=Groups(ids=int32[3]")


def test_advanced_api_steps_equal_fit(x0_fit):
    """rcpi_problem / rcpi_init / rcpi_step(problem, state) driven by hand, and rcpi_run, give
    dwsm_fit's iterates; the key lives in the state and the options in the problem."""
    X, y, pol = x0_fit
    n_iter, S = FIT_TINY["n_iter"], FIT_TINY["rcpi"].states_per_example
    spec = make_spec(3, 2, lam=0.1)
    problem = rcpi_problem(spec, jnp.asarray(X, jnp.float32), jnp.asarray(y), options=RCPIOptions(states_per_example=S, alpha=0.7))
    assert problem.config.states_per_example == S and problem.config.cap == S * 3
    state = rcpi_init(problem, jax.random.key(0), n_iter)
    assert state.thetas.shape == (n_iter + 1, 5, 7) and int(state.t) == 0
    assert np.isnan(float(state.info.mean_return))
    step = jax.jit(rcpi_step)
    evaluate = jax.jit(rcpi_evaluate)
    returns, losses = [], [float(evaluate(state.thetas[0], problem)[0])]
    for _ in range(n_iter):
        state = step(problem, state)
        returns.append(float(state.info.mean_return))
        losses.append(float(evaluate(state.thetas[state.t], problem)[0]))
    assert int(state.t) == n_iter
    np.testing.assert_allclose(np.asarray(state.thetas), np.asarray(pol.thetas), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(returns, np.asarray(pol.rollout_return), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(losses, np.asarray(pol.train_loss), rtol=1e-5, atol=1e-6)
    assert int(pol.best) == int(np.argmin(losses))
    # the compiled loop of rcpi_step gives the fit's policy
    run = rcpi_run(problem, rcpi_init(problem, jax.random.key(0), n_iter))
    np.testing.assert_allclose(np.asarray(run.thetas), np.asarray(pol.thetas), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(run.train_loss), np.asarray(pol.train_loss), rtol=1e-5, atol=1e-6)
    assert int(run.best) == int(pol.best) and int(run.status) == 0 and int(run.iterations) == n_iter
    # a problem with other static options is another compiled program, an equal one is not
    with count_compiles() as n_comp:
        again = rcpi_problem(spec, jnp.asarray(X, jnp.float32), jnp.asarray(y), options=RCPIOptions(states_per_example=S, alpha=0.7))
        step(again, rcpi_init(again, jax.random.key(0), n_iter))
    assert n_comp[0] == 0
    with pytest.raises(ValueError, match="policy_states"):
        rcpi_problem(spec, jnp.asarray(X, jnp.float32), jnp.asarray(y), options=RCPIOptions(states_per_example=2, policy_states=3))
    with pytest.raises(ValueError, match="alpha"):
        rcpi_problem(spec, jnp.asarray(X, jnp.float32), jnp.asarray(y), options=RCPIOptions(alpha=-0.5))
    with pytest.raises(TypeError, match="key"):
        rcpi_init(problem, 0, n_iter)


def test_relational_prefers_related_features(blobs):
    """Features 0 and 5 are copies; only 5 is related to the other useful features 1 and 2."""
    X, y = blobs
    related = np.eye(6, dtype=bool)
    for i, j in [(5, 1), (5, 2), (1, 2)]:
        related[i, j] = related[j, i] = True
    pol = dwsm_fit(jax.random.key(0), X, y, lam=0.01, mdp=MDPOptions(gamma=0.5, related=related), **FIT_SMALL)
    rep = dwsm_evaluate(pol, X, y)
    u = np.asarray(rep.feature_usage)
    assert u[5] > u[0]
    tr = dwsm_trace(pol, X, y)
    S = np_spec(pol.spec)
    tr_order, tr_reward, tr_labels = np.asarray(tr.order), np.asarray(tr.reward), np.asarray(tr.labels)
    for i in range(0, len(y), 7):
        order = [int(j) for j in tr_order[i] if j >= 0]
        np.testing.assert_allclose(float(tr_reward[i]), -datum_loss(S, int(tr_labels[i]), int(y[i]), order), rtol=1e-5)


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
    ref = np.mean(
        [sum(costs[g] for g, m in enumerate(groups) if acq[i, m].any()) + cm[lab[i], y[i]] for i in range(30)]
    )
    got = average_cost(lab, acq, y, groups=Groups.from_ids([0, 0, 1, 2, 2], costs=costs), cost_matrix=cm)
    np.testing.assert_allclose(float(got), ref, rtol=1e-6)
    unit = np.mean([sum(1 for m in groups if acq[i, m].any()) + cm[lab[i], y[i]] for i in range(30)])
    np.testing.assert_allclose(float(average_cost(lab, acq, y, groups=groups, cost_matrix=cm)), unit, rtol=1e-6)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs, y_override, err, match",
    [
        ({}, [0, 2] * 10, ValueError, "every class present"),
        ({}, [-1, 1] * 10, ValueError, "negative"),
        ({}, [0.5, 1] * 10, ValueError, "integer"),
        ({"cost_matrix": np.ones((3, 3))}, None, ValueError, r"cost_matrix must have shape \(C, C\)"),
        ({"cost_matrix": [[0, np.nan], [1, 0]]}, None, ValueError, "NaN"),
        ({"budget": -1}, None, ValueError, "budget must be >= 0"),
        ({"budget": -0.5}, None, ValueError, "budget must be >= 0"),
        ({"budget": "3"}, None, TypeError, "budget"),
        ({"groups": [[0, 1], [1, 2]]}, None, ValueError, "partition"),
        ({"groups": [[0], [2]]}, None, ValueError, "partition"),
        ({"groups": [0, 2, 2]}, None, ValueError, "partition"),
        ({"groups": [0, 1]}, None, ValueError, "groups must be a"),
        ({"groups": Groups.from_ids([0, 1])}, None, ValueError, "groups cover 2 features"),
        ({"related": np.ones((3, 2), bool)}, None, ValueError, "square"),
        ({"related": np.ones((2, 2), bool)}, None, ValueError, r"related must be \(3, 3\)"),
        ({"related": np.full((3, 3), 0.5)}, None, TypeError, "boolean"),
        ({"lam": -0.1}, None, ValueError, "lam must be >= 0"),
        ({"alpha": 1.0}, None, ValueError, "alpha"),
        ({"l2": 0.0}, None, ValueError, "l2"),
        ({"n_iter": 0}, None, ValueError, "n_iter"),
        ({"mixture": "mean"}, None, ValueError, "mixture"),
        ({"states": "random"}, None, ValueError, "states must be 'policy'"),
        ({"select": "first"}, None, ValueError, "select must be 'best'"),
        ({"patience": 0}, None, ValueError, "patience"),
        ({"explore": 1.5}, None, ValueError, "explore must be a probability"),
        ({"explore": -0.1}, None, ValueError, "explore"),
        ({"feature_costs": [1.0, 1.0, 1.0]}, None, TypeError, "feature_costs"),  # removed: costs live in Groups
        ({"budget_unit": "groups"}, None, TypeError, "budget_unit"),  # removed: give costs = group sizes
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
    with pytest.raises(ValueError, match="reshape"):
        dwsm_fit(jax.random.key(0), np.zeros(10), y)
    with pytest.raises(ValueError, match="rows"):
        dwsm_fit(jax.random.key(0), np.zeros((9, 2)), y)
    with pytest.raises(ValueError, match="at least 2 rows"):
        dwsm_fit(jax.random.key(0), np.zeros((1, 2)), y[:1])
    with pytest.raises(TypeError, match="key"):
        dwsm_fit(0, np.zeros((10, 2)), y)


def test_predict_validates(x0_fit):
    _, _, pol = x0_fit
    with pytest.raises(ValueError, match="features"):
        dwsm_predict(pol, np.zeros((4, 5)))
    with pytest.raises(TypeError, match="DWSMPolicy"):
        dwsm_predict("policy", np.zeros((4, 3)))
    labels, acquired = dwsm_predict(pol, np.ones((1, 3)))  # one row is fine at prediction
    assert labels.shape == (1,) and acquired.shape == (1, 3)


# ----------------------------------------------------------------------------- policy quality (issue 14)

_traj = jax.jit(trajectory_states)


def test_trajectory_states_are_prefixes_of_the_policy_episode():
    """States visited by the policy: a prefix of its episode from z = 0, k ~ U{0..L}; with explore,
    plus one unit allowed there (flagged)."""
    rng = np.random.default_rng(7)
    d, C, n, m = 5, 2, 40, 6
    spec = make_spec(d, C, lam=0.1, budget=3)
    S = np_spec(spec)
    thetas = jnp.asarray(rng.normal(size=(2, C + d, 2 * d + 1)), jnp.float32)
    Xs = rng.normal(size=(n, d)).astype(np.float32)
    comp = jnp.asarray(rng.integers(0, 2, size=(n, m)), jnp.int32)
    for explore in (0.0, 1.0):
        Z, dev = (np.asarray(a) for a in _traj(jax.random.key(3), thetas, comp, spec, jnp.asarray(Xs), explore))
        assert dev.any() == (explore > 0)
        thetas_np, comp_np = np.asarray(thetas), np.asarray(comp)
        for i in range(n):
            for r in range(m):
                order = np_episode(thetas_np[comp_np[i, r]], S, Xs[i], 0, np.zeros(d, bool))[3]
                k = int(Z[i, r].sum()) - int(dev[i, r])
                assert 0 <= k <= len(order)
                prefix = np.zeros(d, bool)
                prefix[order[:k]] = True
                assert np.all(Z[i, r] >= prefix)
                extra = np.flatnonzero(Z[i, r] & ~prefix)
                assert len(extra) == int(dev[i, r])
                if dev[i, r]:  # a unit the MDP allows after the prefix
                    assert np_fits(S, float(S["costs"][prefix].sum()), extra[0])
                elif explore > 0:  # nothing was allowed there
                    assert k == 3 or k == d
    # a policy that acquires until the budget stops it (L = 3): k ~ U{0..3}
    greedy = np.zeros((C + d, 2 * d + 1), np.float32)
    greedy[C:, -1] = 1.0
    both = jnp.stack([jnp.asarray(greedy)] * 2)  # the shapes above: no second compile
    Z, _ = _traj(jax.random.key(4), both, jnp.zeros((n, m), jnp.int32), spec, jnp.asarray(Xs), 0.0)
    Z2, _ = _traj(jax.random.key(5), both, jnp.ones((n, m), jnp.int32), spec, jnp.asarray(Xs), 0.0)
    sizes = np.concatenate([np.asarray(Z).sum(-1).ravel(), np.asarray(Z2).sum(-1).ravel()])
    np.testing.assert_allclose(np.bincount(sizes, minlength=4) / sizes.size, 0.25, atol=0.06)


def test_terminal_classification_statistics_match_numpy():
    """The classification rows' extra data: Σ φ_T φ_Tᵀ and Σ −C[c, y] φ_T over the rollouts' final states."""
    rng = np.random.default_rng(8)
    d, C, S_ = 5, 3, 3
    spec = random_spec(rng, d, C, "cost_budget")
    S = np_spec(spec)
    thetas = rng.normal(size=(S_, C + d, 2 * d + 1)).astype(np.float32)
    x = rng.normal(size=d).astype(np.float32)
    y = 2
    Z = np.array([[False] * d, [True, False, False, False, False], [False, True, True, False, False]])
    keep = np.array([True, False, True])  # the terminal states of state 1's rollouts do not count
    out = jax.jit(row_state_action_values, static_argnums=5, static_argnames=("terminal", "lanes_per_loop"))(
        jnp.asarray(thetas),
        spec,
        jnp.asarray(x),
        jnp.asarray(y, jnp.int32),
        jnp.asarray(Z),
        S_ * d,
        terminal=True,
        lanes_per_loop=4,
        terminal_states=jnp.asarray(keep),
    )
    mT, bT, GT = (np.asarray(a, np.float64) for a in out[5])
    m_ref, b_ref, G_ref = 0.0, np.zeros((C, 2 * d + 1)), np.zeros((2 * d + 1, 2 * d + 1))
    for r in range(S_):
        spent = float(S["costs"][Z[r]].sum())
        for j in range(d):
            if Z[r, j] or not np_fits(S, spent, j) or not keep[r]:
                continue
            z1 = Z[r].copy()
            z1[j] = True
            zT = np_episode(thetas[r], S, x, y, z1)[2]
            ph = np.concatenate([zT.astype(float), x * zT, [1.0]])
            m_ref += 1
            b_ref += -S["cost_matrix"][:, y][:, None] * ph[None, :]
            G_ref += np.outer(ph, ph)
    assert m_ref > 0
    np.testing.assert_allclose(mT, m_ref)
    np.testing.assert_allclose(bT, b_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(GT, G_ref, rtol=1e-5, atol=1e-5)


def test_initial_policy_classifies_at_once_as_the_cheapest_class():
    X = np.random.default_rng(0).normal(size=(12, 3))
    y = np.array([0] * 8 + [1] * 4)
    cm = np.array([[0.0, 5.0], [1.0, 0.0]])  # predicting 0 costs 5·4/12, predicting 1 costs 8/12
    spec = make_spec(3, 2, lam=0.1, cost_matrix=cm)
    problem = rcpi_problem(spec, jnp.asarray(X, jnp.float32), jnp.asarray(y))
    theta0 = rcpi_init(problem, jax.random.key(0), 2).thetas[0]
    np.testing.assert_array_equal(np.asarray(theta0), np.asarray(initial_policy(problem)))
    labels, acquired = dwsm_predict(policy_from_theta(theta0, spec, 3), X)
    assert not np.asarray(acquired).any()
    np.testing.assert_array_equal(np.asarray(labels), 1)
    loss, acc, feats = rcpi_evaluate(theta0, problem)
    assert float(loss) == pytest.approx(8 / 12) and float(acc) == pytest.approx(4 / 12) and float(feats) == 0


def collapse_problem(seed, n=200, d=8):
    """A small copy of the WDBC collapse (issue 14): feature 0 alone classifies well, features 1..7 are
    noisier copies of it on other scales. At λ = 0.1 one feature is worth buying (error ≈ 0.1 against
    0.365 for the majority class), yet a classifier fitted on random subsets of the correlated copies
    is poor on single features: the paper's uniform states made RCPI classify at once."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=n)
    y = (u + 0.25 * rng.normal(size=n) > 0.35).astype(int)
    X = u[:, None] + np.r_[0.3, np.full(d - 1, 0.6)][None, :] * rng.normal(size=(n, d))
    X = X * rng.uniform(0.5, 20, size=d)[None, :] + rng.normal(size=d)[None, :] * 5
    return X.astype(np.float32), y


FIT_Q = dict(n_iter=6, rcpi=RCPIOptions(states_per_example=4))


@pytest.fixture(scope="module")
def collapse_fit():
    X, y = collapse_problem(0)
    return X, y, dwsm_fit(jax.random.key(0), X, y, lam=0.1, **FIT_Q)


def _oracle_losses(pol, X, y):
    """Training datum-wise loss of every iterate by the numpy episode (float64 scores)."""
    S = np_spec(pol.spec)
    mean, scale = np.asarray(pol.mean), np.asarray(pol.scale)
    Xs = ((np.asarray(X, mean.dtype) - mean[None, :]) / scale[None, :]).astype(np.float64)
    z0 = np.zeros(S["costs"].shape[0], bool)
    return np.array(
        [
            np.mean([-np_episode(np.asarray(th), S, Xs[i], int(y[i]), z0)[0] for i in range(len(y))])
            for th in np.asarray(pol.thetas)
        ]
    )


def test_returned_policy_is_the_best_iterate_on_training_data(collapse_fit):
    X, y, pol = collapse_fit
    oracle = _oracle_losses(pol, X, y)
    np.testing.assert_allclose(np.asarray(pol.train_loss), oracle, atol=1e-5)
    best = int(pol.best)
    np.testing.assert_array_equal(np.asarray(pol.theta), np.asarray(pol.thetas)[best])
    assert oracle[best] <= oracle.min() + 1e-6  # no iterate is better on the training data
    majority = min(np.mean(y != c) for c in range(2))
    assert oracle[best] <= majority  # nor classifying at once (θ_0)
    assert oracle[best] <= oracle[-1] + 1e-6  # never worse than the last iterate (issue 14: it can be much worse)
    np.testing.assert_allclose(np.asarray(pol.train_return), -oracle[1:], atol=1e-5)
    assert int(pol.iterations) == FIT_Q["n_iter"]
    # the paper's final policy θ_T (select="last") shares the compiled fit
    last = dwsm_fit(jax.random.key(0), X, y, lam=0.1, **with_rcpi(FIT_Q, select="last"))
    np.testing.assert_array_equal(np.asarray(last.theta), np.asarray(pol.thetas)[-1])
    assert int(last.best) == FIT_Q["n_iter"]


def test_collapse_case_no_longer_collapses(collapse_fit):
    X, y, pol = collapse_fit
    majority = min(np.mean(y != c) for c in range(2))
    rep = dwsm_evaluate(pol, X, y)
    assert float(rep.mean_features) >= 1.0
    assert float(rep.mean_loss) <= majority - 0.05
    # held out: the feature it reads still pays, the error well below classifying at once (the
    # held-out datum-wise loss, error + 0.1 per feature, is within the split's noise of the majority
    # class's: below it by 0.03 for 2 of 8 keys before and after issue 36's draws, 0.41 and 0.32 on
    # average; the error is below the majority's by 0.03 for 6 of 6 keys here)
    Xt, yt = collapse_problem(1)
    rep_t = dwsm_evaluate(pol, Xt, yt)
    assert 1.0 - float(rep_t.accuracy) <= min(np.mean(yt != c) for c in range(2)) - 0.03
    assert float(rep_t.mean_features) >= 1.0


def test_patience_stops_early_and_keeps_the_iterates(x0_fit):
    """patience=1: iterations stop after the first one that does not improve the training loss; the
    iterates run equal the full fit's (patience is traced: no recompilation)."""
    X, y, full = x0_fit
    with count_compiles() as n_comp:
        pol = dwsm_fit(jax.random.key(0), X, y, lam=0.1, **with_rcpi(FIT_TINY, patience=1))
    assert n_comp[0] == 0
    it = int(pol.iterations)
    losses = np.asarray(full.train_loss)
    stop = next(t for t in range(1, len(losses)) if losses[t] >= losses[:t].min())  # first non-improving
    assert it == stop < FIT_TINY["n_iter"]
    np.testing.assert_array_equal(np.asarray(pol.thetas)[: it + 1], np.asarray(full.thetas)[: it + 1])
    for t in range(it + 1, FIT_TINY["n_iter"] + 1):  # skipped slots repeat the last iterate
        np.testing.assert_array_equal(np.asarray(pol.thetas)[t], np.asarray(pol.thetas)[it])
    assert np.all(np.isnan(np.asarray(pol.train_return)[it:])) and np.all(
        np.isfinite(np.asarray(pol.train_return)[:it])
    )
    assert int(pol.best) == int(np.argmin(losses[: it + 1])) and int(pol.status) == 0


def test_paper_uniform_states_option(x0_fit):
    """states="uniform": the paper's sampling (no terminal-state data); still returns the best iterate."""
    X, y, _ = x0_fit
    pol = dwsm_fit(jax.random.key(0), X, y, lam=0.1, **with_rcpi(FIT_TINY, states="uniform"))
    losses = np.asarray(pol.train_loss)
    assert losses[int(pol.best)] == losses.min()
    np.testing.assert_allclose(-float(np.mean(dwsm_trace(pol, X, y).reward)), optimal_loss(X, y, 0.1, 2), atol=1e-6)


def test_old_keywords_warn_and_give_the_same_policy():
    """The 0.3 keywords of dwsm_fit and rcpi_problem still work for one release, with a
    DeprecationWarning naming the new spelling, and give the same policy."""
    X, y = grid_problem("x0")
    new = dwsm_fit(
        jax.random.key(0), X, y, lam=0.1, n_iter=2, scale=None,
        mdp=MDPOptions(gamma=0.3, constant_columns="inert"),
        rcpi=RCPIOptions(states_per_example=3, alpha=0.5, l2=0.02, explore=0.2, select="last", rollout_batch=8),
    )
    with pytest.warns(DeprecationWarning) as record:
        old = dwsm_fit(
            jax.random.key(0), X, y, lam=0.1, n_iter=2, standardize=False, gamma=0.3, constant_columns="inert",
            states_per_example=3, alpha=0.5, l2=0.02, explore=0.2, select="last", rollout_batch=8,
        )
    messages = " ".join(str(w.message) for w in record)
    for name, spelling in [
        ("standardize", "scale=None"), ("gamma", "MDPOptions(gamma"), ("constant_columns", "MDPOptions(constant_columns"),
        ("states_per_example", "RCPIOptions(states_per_example"), ("alpha", "RCPIOptions(alpha"),
        ("l2", "RCPIOptions(l2"), ("explore", "RCPIOptions(explore"), ("select", "RCPIOptions(select"),
        ("rollout_batch", "RCPIOptions(rollout_batch"),
    ]:
        assert f"dwsm_fit({name}=...) is deprecated" in messages and spelling in messages, name
    assert all(w.filename == __file__ for w in record)  # the warning points at the caller
    np.testing.assert_array_equal(np.asarray(old.theta), np.asarray(new.theta))
    np.testing.assert_array_equal(np.asarray(old.train_loss), np.asarray(new.train_loss))
    spec = make_spec(3, 2, lam=0.1)
    with pytest.warns(DeprecationWarning, match=r"rcpi_problem\(states_per_example=...\) is deprecated"):
        a = rcpi_problem(spec, jnp.asarray(X, jnp.float32), jnp.asarray(y), states_per_example=3, standardize=False)
    b = rcpi_problem(spec, jnp.asarray(X, jnp.float32), jnp.asarray(y), options=RCPIOptions(states_per_example=3), scale=None)
    assert a.config == b.config
    np.testing.assert_array_equal(np.asarray(a.X), np.asarray(b.X))
    with pytest.raises(TypeError, match="unexpected keyword"):
        dwsm_fit(jax.random.key(0), X, y, n_iter=1, no_such_option=1)
    with pytest.raises(TypeError, match="RCPIOptions"):
        dwsm_fit(jax.random.key(0), X, y, n_iter=1, rcpi=dict(alpha=0.5))


def test_public_signature_is_short():
    import inspect

    params = inspect.signature(js.dwsm_fit).parameters
    assert len(params) <= 15 and list(params)[:3] == ["key", "X", "y"]
    assert "scale" in params and "standardize" not in params and "progress" in params


def test_progress_bar_gives_the_same_policy(capsys):
    pytest.importorskip("tqdm")
    X, y = grid_problem("x0")
    a = dwsm_fit(jax.random.key(0), X, y, lam=0.1, n_iter=3, rcpi=RCPIOptions(states_per_example=3))
    b = dwsm_fit(jax.random.key(0), X, y, lam=0.1, n_iter=3, rcpi=RCPIOptions(states_per_example=3), progress=True)
    np.testing.assert_allclose(np.asarray(b.theta), np.asarray(a.theta), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(np.asarray(b.train_loss), np.asarray(a.train_loss))
    assert "dwsm" in capsys.readouterr().err


def test_classifier_in_a_pipeline_at_defaults():
    """make_pipeline(DWSMClassifier(), LogisticRegression()) works at defaults: transform gives
    finite values (the training mean where a datum did not acquire a feature) on the columns the
    policy can acquire, and get_feature_names_out names them (a constant column is not one)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    from jaxselect.sklearn import DWSMClassifier

    rng = np.random.default_rng(5)
    X = rng.normal(size=(120, 5)).astype(np.float32)
    X[:, 3] = 2.0  # constant: the policy can never acquire it
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    pipe = make_pipeline(DWSMClassifier(n_iter=2, random_state=0), LogisticRegression()).fit(X, y)
    clf = pipe[0]
    Xt = clf.transform(X)
    assert np.isfinite(Xt).all() and Xt.shape == (120, 4)
    assert clf.acquirable_.tolist() == [True, True, True, False, True]
    assert clf.get_feature_names_out().tolist() == ["x0", "x1", "x2", "x4"]
    mask = clf.acquired(X)[:, clf.acquirable_]
    np.testing.assert_allclose(Xt[~mask], np.broadcast_to(clf.feature_means_[clf.acquirable_], Xt.shape)[~mask], rtol=1e-6)
    np.testing.assert_array_equal(Xt[mask], X[:, clf.acquirable_][mask])
    assert pipe.score(X, y) > 0.8


# ----------------------------------------------------------------------------- state budget, action sample (issue 36)


def _traced_sizes(n, options, d=4):
    """Shapes seen while *tracing* one RCPI iteration on n rows (``jax.eval_shape``: nothing compiled):
    the number of policy episodes and of acquisition rollouts."""
    import jaxselect.dwsm.rcpi as rcpi_mod

    seen = {}
    real_ep, real_roll = rcpi_mod.policy_episodes, rcpi_mod.sampled_rollouts

    def episodes(thetasT, comp, *a, **k):
        seen["episodes"] = comp.shape[0]
        return real_ep(thetasT, comp, *a, **k)

    def rollouts(problem, thetasT, comp, *a, **k):
        out = real_roll(problem, thetasT, comp, *a, **k)
        seen["rollouts"] = problem.config.action_states * problem.spec.groups.costs.shape[0]
        return out

    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int32)
    spec = make_spec(d, 2, lam=0.05)
    problem = rcpi_problem(spec, X, y, options=options)
    state = rcpi_init(problem, jax.random.key(0), 2)
    rcpi_mod.policy_episodes, rcpi_mod.sampled_rollouts = episodes, rollouts
    try:
        jax.eval_shape(rcpi_step, problem, state)
    finally:
        rcpi_mod.policy_episodes, rcpi_mod.sampled_rollouts = real_ep, real_roll
    return seen


def test_state_budget_fixes_the_work_per_iteration():
    """With the state budget N_s the work of one iteration does not grow with the rows: 50 rows and
    5 000 rows trace the same number of sampled states (N_s) and acquisition rollouts (J·M); below
    N_s every row keeps its S states (the paper's protocol), and ``n_states=None`` always does."""
    opts = RCPIOptions(n_states=64, states_per_example=4, acquisitions=2)
    small, large = _traced_sizes(50, opts), _traced_sizes(5000, opts)
    assert small == large == {"episodes": 64, "rollouts": 4 * 32}  # M = ceil(64·2/4) states per unit
    assert _traced_sizes(10, opts) == {"episodes": 40, "rollouts": 4 * 20}  # 10·4 < N_s: every row, M = 20
    assert _traced_sizes(50, opts.replace(n_states=None))["episodes"] == 200
    full = _traced_sizes(5000, opts.replace(acquisitions=None))  # every action of every sampled state
    assert full == {"episodes": 64, "rollouts": 4 * 64}


def _full_action_statistics(spec, thetas, comp, X, y, Z, sw):
    """(m, B, G) of the acquisition actions from every allowed action of every state (state_action_values)."""
    C = spec.cost_matrix.shape[0]
    N, J = Z.shape
    p = 2 * X.shape[1] + 1
    m, B, G = np.zeros(J), np.zeros((J, p)), np.zeros((J, p, p))
    for s in range(N):
        ph, Q, allowed, _, _ = _sav(jnp.asarray(thetas[comp[s]]), spec, jnp.asarray(X[s]), jnp.asarray(y[s]), jnp.asarray(Z[s]))
        ph, Q, allowed = (np.asarray(v, np.float64) for v in (ph, Q, allowed))
        for j in range(J):
            if allowed[C + j] and sw[s] > 0:
                m[j] += sw[s]
                B[j] += sw[s] * Q[C + j] * ph
                G[j] += sw[s] * np.outer(ph, ph)
    return m, B, G


@pytest.mark.parametrize("variant", ["base", "budget"])
def test_action_sample_covering_every_action_equals_full_evaluation(variant):
    """RCPI's acquisition statistics from the action sample equal those of the full evaluation (every
    allowed action of every sampled state, by the exact rollouts of ``state_action_values``) when the
    sample covers every action: M = N (``acquisitions=None``), and M < N drawn at random when every
    unit is allowed in at most M states (one state has weight 0, so at most N − 1 count)."""
    import dataclasses

    from jaxselect.dwsm.policy import phi as phi_fn
    from jaxselect.dwsm.rollouts import sampled_rollouts

    rng = np.random.default_rng(11)
    d, C, N, K = 5, 3, 12, 3
    spec = random_spec(rng, d, C, variant)
    Snp = np_spec(spec)
    J = Snp["costs"].shape[0]
    thetas = rng.normal(size=(K, C + J, 2 * d + 1)).astype(np.float32)
    X = rng.normal(size=(N, d)).astype(np.float32)
    y = rng.integers(C, size=N).astype(np.int32)
    Z = rng.random((N, J)) < 0.3
    Z[(Z * Snp["costs"][None, :]).sum(1) > Snp["budget"]] = False
    comp = rng.integers(K, size=N).astype(np.int32)
    sw = np.ones(N, np.float32)
    sw[4] = 0.0
    problem = rcpi_problem(spec, X, y, options=RCPIOptions(terminal_weight=0.0), scale=None)
    zf = np.asarray(feature_mask(spec, jnp.asarray(Z)))
    Phi = np.asarray(jax.vmap(phi_fn)(jnp.asarray(X), jnp.asarray(zf)))
    scores = np.einsum("nap,np->na", thetas[comp], Phi)
    ref = _full_action_statistics(spec, thetas, comp, X, y, Z, sw)
    run = jax.jit(sampled_rollouts)
    for M in (N, N - 1):
        cfg = dataclasses.replace(problem.config, action_states=M, rollout_batch=5, terminal=False)
        out = run(
            problem._replace(config=cfg), jnp.swapaxes(jnp.asarray(thetas), 1, 2), jnp.asarray(comp), jnp.asarray(X),
            jnp.asarray(y), jnp.asarray(Z), jnp.asarray(Phi), jnp.asarray(sw), jnp.asarray(sw),
            jnp.asarray(scores), jax.random.key(M),
        )
        for got, want in zip(out[:3], ref):
            np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-4, atol=1e-4)
    # the sample proper (M < allowed states): unbiased per unit, its states a subset of the allowed ones
    cfg = dataclasses.replace(problem.config, action_states=3, rollout_batch=5, terminal=False)
    m3 = run(
        problem._replace(config=cfg), jnp.swapaxes(jnp.asarray(thetas), 1, 2), jnp.asarray(comp), jnp.asarray(X),
        jnp.asarray(y), jnp.asarray(Z), jnp.asarray(Phi), jnp.asarray(sw), jnp.asarray(sw),
        jnp.asarray(scores), jax.random.key(0),
    )[0]
    np.testing.assert_array_equal(np.asarray(m3), np.minimum(ref[0], 3))


def test_classifier_progress_bar(capsys):
    """DWSMClassifier(progress=True) shows the driver's bar during fit and learns the same policy."""
    pytest.importorskip("tqdm")
    from jaxselect.sklearn import DWSMClassifier

    X, y = grid_problem("x0")
    kw = dict(lam=0.1, n_iter=3, states_per_example=3, random_state=0)
    a = DWSMClassifier(**kw).fit(X, y)
    b = DWSMClassifier(progress=True, **kw).fit(X, y)
    assert "dwsm" in capsys.readouterr().err
    np.testing.assert_allclose(np.asarray(b.policy_.theta), np.asarray(a.policy_.theta), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(b.support_, a.support_)
