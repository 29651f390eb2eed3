"""Groups and prepare: validation at the boundary, whitening, transforms back to raw space."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxselect as js
import reference as ref
from jaxselect.sequencing.prepare import problem_design


def data(seed=0, n=60, d=5, T=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 3.0 + 7.0
    Y = X @ rng.normal(size=(d, T)) + rng.normal(size=(n, T))
    return X, (Y[:, 0] if T == 1 else Y)


def test_groups_from_ids_table():
    g = js.Groups.from_ids([2, 0, 0, 1, 2, 2], costs=[1.0, 5.0, 2.0])
    assert g.n_groups == 3 and g.n_features == 6 and g.max_size == 3
    np.testing.assert_array_equal(g.sizes, [2, 1, 3])
    np.testing.assert_array_equal(g.index, [[1, 2, 6], [3, 6, 6], [0, 4, 5]])
    np.testing.assert_array_equal(g.mask, g.index < 6)
    assert g.costs.dtype == jnp.float32  # the default float (x64 off, as users run)
    with jax.enable_x64():
        assert js.Groups.from_ids([0, 1]).costs.dtype == jnp.float64
        assert js.Groups.from_ids([0, 1], dtype=np.float32).costs.dtype == jnp.float32
    assert "Groups(ids=int32[6], costs=float32[3]" in repr(g)
    np.testing.assert_array_equal(js.Groups.from_ids([0, 1, 1]).costs, [1.0, 1.0])


@pytest.mark.parametrize(
    "ids,costs,match",
    [
        ([0, 2, 2], None, "group\\(s\\) \\[1\\] have no features"),
        ([0, -1], None, "negative"),
        ([[0, 1]], None, "1-D"),
        ([], None, "non-empty"),
        ([0.5, 1.0], None, "integers"),
        ([0, 1], [1.0], "one entry per group"),
        ([0, 1], [1.0, 0.0], "costs must be finite and > 0; got 0.0 for group 1"),
        ([0, 1], [1.0, -2.0], "> 0"),
        ([0, 1], [np.inf, 1.0], "finite"),
        ([0, 1], [np.nan, 1.0], "finite"),
    ],
)
def test_groups_validation(ids, costs, match):
    with pytest.raises(ValueError, match=match):
        js.Groups.from_ids(ids, costs)


def test_groups_reject_non_integer_dtype():
    with pytest.raises(TypeError, match="integers"):
        js.Groups.from_ids(np.array(["a", "b"]))


def test_prepare_validation():
    X, y = data()
    with pytest.raises(ValueError, match="NaN or Inf"):
        js.prepare(np.where(np.arange(5) == 2, np.nan, X), y)
    with pytest.raises(ValueError, match="NaN or Inf"):
        js.prepare(X, np.where(np.arange(60) == 3, np.inf, y))
    with pytest.raises(ValueError, match="rows"):
        js.prepare(X, y[:-1])
    with pytest.raises(ValueError, match="2-D"):
        js.prepare(X[:, 0], y)
    with pytest.raises(ValueError, match="1-D .* or 2-D"):
        js.prepare(X, y[:, None, None])
    with pytest.raises(ValueError, match="l2 must be >= 0"):
        js.prepare(X, y, l2=-1.0)
    with pytest.raises(ValueError, match="columns"):
        js.prepare(X, y, groups=[0, 1, 2])
    with pytest.raises(ValueError, match="gram"):
        js.prepare(X, y, gram="yes")
    with pytest.raises(TypeError, match="numeric"):
        js.prepare(X.astype(str), y)
    Xc = X.copy()
    Xc[:, 3] = 4.0
    with pytest.raises(ValueError, match=r"constant column\(s\) \[3\].*constant_columns='raise'"):
        js.prepare(Xc, y, constant_columns="raise")
    with pytest.raises(ValueError, match="constant_columns must be one of"):
        js.prepare(X, y, constant_columns=True)
    with pytest.raises(ValueError, match=r"reshape\(1, -1\) for a single sample"):
        js.prepare(X[0], y[:1])
    with pytest.raises(ValueError, match="at least 2 rows"):
        js.prepare(X[:1], y[:1])
    with pytest.warns(UserWarning, match="target column"):  # a constant target: the empty model, DEGENERATE
        js.prepare(X, np.ones(60))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("where", [(0, 0), (59, 4), (31, 2)])
def test_prepare_finds_any_nonfinite_entry(bad, where, dtype):
    """The fused column pass catches NaN (via the column sums: max/min may skip NaNs) and ±Inf."""
    X, y = data()
    if True:
        Xb = X.astype(dtype)
        Xb[where] = bad
        with pytest.raises(ValueError, match="NaN or Inf"):
            js.prepare(Xb, y.astype(dtype))
        with pytest.raises(ValueError, match="NaN or Inf"):
            js.whiten_design(jnp.asarray(Xb))


def test_prepare_rejects_overflowing_moments():
    X, y = data()
    X = X.astype(np.float32)
    X[5, 2] = 3e20  # finite in float32, but its square is not
    with pytest.raises(ValueError, match="too large"):
        js.prepare(X, y.astype(np.float32))


@pytest.mark.parametrize("offset", [0.0, 8.0, 1e4], ids=["centred", "moderate-offset", "large-offset"])
def test_float32_moments_accurate_with_and_without_centring_copy(offset, x64):
    """float32 C and b0 match float64 whichever Gram branch the offset picks (raw XᵀX − nμμᵀ or centred)."""
    prepare_mod = __import__("jaxselect.sequencing.prepare", fromlist=["_moderate_offsets"])
    rng = np.random.default_rng(7)
    n, d = 4000, 12
    X = rng.normal(size=(n, d)) * rng.uniform(1.0, 2.0, d) + offset * rng.uniform(0.5, 1.0, d)
    y = X[:, :3] @ np.array([1.0, -2.0, 0.5]) + rng.normal(size=n)
    ids = np.repeat(np.arange(4), 3)
    raw = prepare_mod._moderate_offsets(js.design.column_summary(jnp.asarray(X, jnp.float32)))
    assert raw == (offset < 10)  # mean²/variance ≤ 100 → no centring copy
    p64 = js.prepare(X, y, ids, l2=1e-4)
    p32 = js.prepare(X.astype(np.float32), y.astype(np.float32), ids, l2=1e-4)
    np.testing.assert_allclose(np.asarray(p32.C), np.asarray(p64.C), atol=2e-4)
    np.testing.assert_allclose(np.asarray(p32.b0), np.asarray(p64.b0), atol=2e-4)
    assert js.cs_omp(p32).order.tolist() == js.cs_omp(p64).order.tolist()


def test_constant_column_is_inert_by_default(dtype):
    X, y = data(1)
    X = X.astype(dtype)
    X[:, 1] = 2.5
    problem = js.prepare(X, y.astype(dtype))
    assert not bool(np.asarray(problem.live)[1])
    path = js.cs_fr(problem)
    assert 1 not in path.order.tolist() and path.order.tolist()[-1] == -1  # never selected
    np.testing.assert_array_equal(np.asarray(path.coef)[:, 1, :], 0.0)


def test_whitened_moments_match_numpy(x64):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(80, 6)) @ rng.normal(size=(6, 6)) + 3.0
    y = rng.normal(size=80)
    ids = np.array([0, 0, 0, 1, 2, 2])
    problem = js.prepare(X, y, js.Groups.from_ids(ids), l2=0.0)
    Xs, ys = ref.standardize(X, y)
    Z = ref.whiten(Xs, ids, tol=1e-10)
    # C restricted to each group is the identity (whitened), and F of any union matches
    C = np.asarray(problem.C)
    for g in range(3):
        cols = np.flatnonzero(ids == g)
        np.testing.assert_allclose(C[np.ix_(cols, cols)], np.eye(len(cols)), atol=1e-10)
    np.testing.assert_allclose(
        0.5 * np.sum(np.linalg.solve(C, np.asarray(problem.b0)) * np.asarray(problem.b0)),
        ref.explained_variance(Z, ys, list(range(6)), 0.0),
        rtol=1e-8,
    )


def test_design_matches_prepare_coordinates(x64):
    X, y = data(3, d=6)
    ids = np.array([0, 0, 1, 1, 1, 2])
    design, groups = js.whiten_design(X, ids)
    problem = js.prepare(X, y, ids, gram=False)
    np.testing.assert_allclose(design.Z, problem_design(problem), rtol=1e-10, atol=1e-12)
    assert groups.n_groups == 3


def test_budget_prediction_equals_raw_least_squares_refit(x64):
    """Prediction at budget B = OLS with intercept on the raw columns of the groups within B."""
    rng = np.random.default_rng(4)
    n, ids = 90, np.array([0, 0, 1, 2, 2, 2, 3])
    X = rng.normal(size=(n, 7)) * rng.uniform(0.01, 100, 7) + rng.normal(scale=1000, size=7)
    Y = X @ rng.normal(size=(7, 2)) + rng.normal(size=(n, 2))
    costs = np.array([2.0, 1.0, 3.0, 0.5])
    path = js.cs_omp(js.prepare(X, Y, js.Groups.from_ids(ids, costs), l2=1e-10))
    Xt = rng.normal(size=(20, 7)) * 50
    for B in [0.4, 0.6, 1.7, 3.6, 10.0]:
        k = int(np.sum(np.asarray(path.cum_cost) <= B))
        cols = [f for g in path.order.tolist()[:k] for f in np.flatnonzero(ids == g)]
        A = np.column_stack([np.ones(n), X[:, cols]])
        beta = np.linalg.lstsq(A, Y, rcond=None)[0]
        expected = np.column_stack([np.ones(20), Xt[:, cols]]) @ beta
        np.testing.assert_allclose(
            js.predict(path, Xt, budget=B), expected, rtol=1e-6, atol=1e-6 * np.abs(expected).max()
        )
    # below the cheapest group: the intercept-only model
    np.testing.assert_allclose(js.predict(path, Xt, budget=0.1), np.broadcast_to(Y.mean(axis=0), (20, 2)))


def test_dtype_follows_the_input_through_problem_from_moments():
    """float32 X with float64 targets fed to the accumulator: every field of the Problem and the
    path is float32 (no float64 accumulator leaks into b0 or the coefficients)."""
    from jaxselect.design.moments import MomentAccumulator

    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 5)).astype(np.float32)
    y = X[:, 1] - 2.0 * X[:, 3] + 0.1 * rng.normal(size=200)  # float64
    acc = MomentAccumulator(np.float32)
    acc.add(X, y[:, None])
    problem = js.problem_from_moments(acc.finish())
    path = js.cs_fr(problem)
    assert {problem.C.dtype, problem.b0.dtype, path.coef.dtype, path.objective.dtype} == {np.dtype(np.float32)}
    assert path.order.tolist()[:2] == [3, 1]


@pytest.mark.parametrize("kernel", ["host", "xla"])
def test_nan_errors_name_the_offending_rows(kernel):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(100, 4)).astype(np.float32)
    y = X[:, 0].copy()
    X[3, 1] = np.nan
    as_input = (lambda a: a) if kernel == "host" else jnp.asarray
    with pytest.raises(ValueError, match=r"X contains NaN or Inf.*row\(s\) \[3\]"):
        js.prepare(as_input(X), as_input(y))
    X[3, 1] = 0.0
    y[[7, 60]] = np.inf
    with pytest.raises(ValueError, match=r"Y contains NaN or Inf.*row\(s\) \[7, 60\]"):
        js.prepare(as_input(X), as_input(y))


def test_progress_option(capsys):
    pytest.importorskip("tqdm")
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 4)).astype(np.float32)
    y = X[:, 2]
    quiet = js.prepare(X, y)
    shown = js.prepare(X, y, progress=True)
    np.testing.assert_array_equal(np.asarray(quiet.C), np.asarray(shown.C))
    assert "moments" in capsys.readouterr().err
    js.prepare(jnp.asarray(X), y, progress=True)
    assert "prepare" in capsys.readouterr().err
    with pytest.raises(TypeError, match="progress must be True or False"):
        js.prepare(X, y, progress="yes")


def test_one_orientation_rule_for_tied_directions():
    """A standardised 2-column group's eigen-directions are (1, ±1)/√2 exactly: "the largest entry"
    is a tie decided by rounding. prepare (host BLAS or XLA moments, dense or sparse) and
    whiten_design orient them alike — the first of the near-largest entries positive."""
    import scipy.sparse as sp

    from jaxselect.sequencing.prepare import orient

    rng = np.random.default_rng(5)
    a = rng.standard_normal(300)
    X = np.stack([a, 0.6 * a + 0.8 * rng.standard_normal(300), rng.standard_normal(300), rng.standard_normal(300)], 1)
    y = X @ np.array([1.0, -2.0, 0.5, 0.0])
    groups = [0, 0, 1, 1]
    bases = [
        js.prepare(X, y, groups).transform.basis,
        js.prepare(sp.csr_matrix(X), y, groups).transform.basis,
        js.prepare(X, y, groups, gram=False).transform.basis,
        js.whiten_design(X, groups)[0].basis,
    ]
    for basis in bases:
        b = np.asarray(basis)
        np.testing.assert_allclose(b, np.asarray(bases[0]), rtol=1e-4, atol=1e-5)  # the signs above all
        assert (b[:, 0, :] > 0).all()  # ties: the first entry is the pivot, made positive
    # columns (1, 1) and (1, −1.00001): the largest entry of the second is its negative one, but the
    # first entry ties with it and wins (the old rule, "largest entry positive", flipped it)
    tied = np.array([[[1.0, 1.0], [1.0, -1.00001]]], np.float32)
    np.testing.assert_array_equal(np.asarray(orient(tied)), tied)
    np.testing.assert_array_equal(np.asarray(orient(-tied)), tied)
    clear = np.array([[[0.6, 1.0], [-0.8, 0.0]]], np.float32)  # no tie: the largest entry positive
    np.testing.assert_array_equal(np.asarray(orient(clear)), np.array([[[-0.6, 1.0], [0.8, 0.0]]], np.float32))
