"""The counter-based eq. (18) source (jaxselect/sources.py): entries independent of how they are
asked, the right distribution, fused products (and the fused gradient) equal to the materialised
ones, labels of eq. (17).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

import jaxselect as js
from jaxselect.sources import EquicorrelatedSource, equicorrelated_normals


def _mix(x):
    """lowbias32 in numpy uint32 (the independent reference of the hash)."""
    x = x.astype(np.uint32)
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint32(16))
        x = x * np.uint32(0x7FEB352D)
        x = x ^ (x >> np.uint32(15))
        x = x * np.uint32(0x846CA68B)
        return x ^ (x >> np.uint32(16))


def _reference_normals(rows, cols, keys):
    """ε of eq. (18) from the documented construction: hash → top 23 bits → √2·erfinv(2u − 1)."""
    row_keys = _mix(rows.astype(np.uint32) ^ keys[0])
    with np.errstate(over="ignore"):
        c = cols.astype(np.uint32) * np.uint32(0x85EBCA6B) + keys[1]
    bits = _mix(row_keys[:, None] ^ c[None, :])
    u = ((bits >> np.uint32(9)).astype(np.float64) + 0.5) * 2.0**-22 - 1.0
    return np.sqrt(2.0) * special.erfinv(u)


@pytest.fixture(scope="module")
def source():
    return EquicorrelatedSource(700, 300, n_informative=20, seed=11)


@pytest.fixture(scope="module")
def full(source):
    return np.asarray(source.block(slice(None)))


def test_entries_do_not_depend_on_the_request(source, full):
    rng = np.random.default_rng(0)
    assert full.shape == (700, 300) and full.dtype == np.float32
    for n_rows, n_cols in [(37, 11), (37, 11), (90, 64), (5, 300)]:
        rows = rng.choice(700, n_rows)  # repeats allowed, any order
        cols = rng.choice(300, n_cols)
        np.testing.assert_array_equal(np.asarray(source.block(rows, cols)), full[np.ix_(rows, cols)])
    for start, stop in [(0, 1), (3, 20), (123, 611), (699, 700)]:
        np.testing.assert_array_equal(np.asarray(source.block(slice(start, stop))), full[start:stop])
    np.testing.assert_array_equal(np.asarray(source.block(slice(None, None, -1), slice(5, 40, 3))), full[::-1, 5:40:3])
    np.testing.assert_array_equal(np.asarray(source.block(np.array([42]), np.array([17]))), full[42:43, 17:18])
    np.testing.assert_array_equal(source.materialize(), full)
    # a source of another shape with the same seed holds the same entries where both exist
    other = EquicorrelatedSource(50, 1000, n_informative=0, seed=11)
    np.testing.assert_array_equal(np.asarray(other.block(slice(None), np.arange(300))), full[:50])


def test_entries_follow_the_documented_construction(source, full):
    rows, cols = np.arange(0, 700, 7), np.arange(300)
    eps = np.asarray(equicorrelated_normals(jnp.asarray(rows, jnp.int32), jnp.asarray(cols, jnp.int32), jnp.asarray(source.keys)))
    ref = _reference_normals(rows, cols, source.keys)
    np.testing.assert_allclose(eps, ref, rtol=2e-6, atol=2e-6)
    z = source.common_factor(rows)
    np.testing.assert_allclose(full[rows], source.alpha * z[:, None] + eps, rtol=1e-6, atol=1e-6)


def test_seed_changes_the_data_and_reproduces_it(full):
    again = np.asarray(EquicorrelatedSource(700, 300, n_informative=20, seed=11).block(slice(0, 50)))
    np.testing.assert_array_equal(again, full[:50])
    other = np.asarray(EquicorrelatedSource(700, 300, n_informative=20, seed=12).block(slice(0, 50)))
    assert abs(np.corrcoef(other.ravel(), full[:50].ravel())[0, 1]) < 0.02


def test_marginal_moments_and_correlation():
    n, m, alpha = 20_000, 40, 0.5
    X = EquicorrelatedSource(n, m, n_informative=0, alpha=alpha, seed=5).materialize().astype(np.float64)
    # the grand mean has variance α²/n + 1/(nm) (z is shared by a row's entries)
    se_mean = np.sqrt(alpha**2 / n + 1.0 / (n * m))
    assert abs(X.mean()) < 5 * se_mean
    var = X.var(axis=0)
    assert abs(var.mean() - (1 + alpha**2)) < 0.05 and np.all(np.abs(var - (1 + alpha**2)) < 0.1)
    corr = np.corrcoef(X.T)[np.triu_indices(m, 1)]
    target = alpha**2 / (1 + alpha**2)
    assert abs(corr.mean() - target) < 0.02 and np.all(np.abs(corr - target) < 6 / np.sqrt(n))


def test_noise_is_independent_standard_normal():
    n, m = 20_000, 30
    E = EquicorrelatedSource(n, m, n_informative=0, alpha=0.0, seed=9).materialize().astype(np.float64)
    assert stats.kstest(E.ravel(), "norm").pvalue > 1e-4
    assert abs(np.mean(E**4) - 3.0) < 0.1  # kurtosis of a normal
    corr = np.corrcoef(E.T)[np.triu_indices(m, 1)]
    assert np.all(np.abs(corr) < 5 / np.sqrt(n))
    lag = np.corrcoef(E[:-1].ravel(), E[1:].ravel())[0, 1]  # neighbouring rows
    assert abs(lag) < 5 / np.sqrt(E.size)
    assert np.abs(E).max() < 5.4


def test_fused_products_equal_the_materialised_ones(source, full):
    rng = np.random.default_rng(1)
    cols = rng.choice(300, 57, replace=False)
    v = rng.standard_normal(57).astype(np.float32)
    for start in (0, 256, 600):  # the last block overhangs N = 700: rows past it give 0 / nothing
        out = np.asarray(source.matvec_block(start, 128, cols, v))
        live = full[start : start + 128][:, cols].astype(np.float64)
        ref = np.zeros(128)
        ref[: live.shape[0]] = live @ v
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
        u = rng.standard_normal(128).astype(np.float32)
        got = np.asarray(source.rmatvec_block(start, 128, cols, u))
        np.testing.assert_allclose(got, u[: live.shape[0]].astype(np.float64) @ live, rtol=1e-4, atol=1e-4)
    # row_start is traced: one compiled kernel serves every block; inside jit too
    f = jax.jit(lambda s: source.matvec_block(s, 64, cols, v))
    np.testing.assert_allclose(np.asarray(f(jnp.int32(64))), full[64:128][:, cols] @ v, rtol=1e-4, atol=1e-4)


def test_fused_products_over_several_tiles(source, full):
    from jaxselect.sources import TILE_ENTRIES, _tile_rows

    rng = np.random.default_rng(3)
    cols = rng.choice(300, 1000)  # repeated columns are fine
    n_rows = 300
    assert _tile_rows(n_rows, cols.size) < n_rows and n_rows * cols.size > TILE_ENTRIES  # 2 tiles, the 2nd padded
    v = rng.standard_normal(1000).astype(np.float32)
    u = rng.standard_normal(n_rows).astype(np.float32)
    for start in (0, 500):  # 500 + 300 overhangs N = 700
        live = full[start : start + n_rows][:, cols].astype(np.float64)
        ref = np.zeros(n_rows)
        ref[: live.shape[0]] = live @ v
        np.testing.assert_allclose(np.asarray(source.matvec_block(start, n_rows, cols, v)), ref, rtol=1e-4, atol=2e-4)
        got = np.asarray(source.rmatvec_block(start, n_rows, cols, u))
        np.testing.assert_allclose(got, u[: live.shape[0]].astype(np.float64) @ live, rtol=1e-4, atol=2e-4)


def test_fused_products_in_float64(x64):
    src = EquicorrelatedSource(90, 40, n_informative=2, seed=2, dtype=np.float64)
    X = np.asarray(src.block(slice(None)))
    assert X.dtype == np.float64
    f32 = np.asarray(EquicorrelatedSource(90, 40, n_informative=2, seed=2).block(slice(None)))
    np.testing.assert_allclose(X, f32, rtol=1e-6, atol=1e-6)  # the float32 normals, held in float64
    v = np.linspace(-1, 1, 40)
    np.testing.assert_allclose(np.asarray(src.matvec_block(0, 90, np.arange(40), v)), X @ v, rtol=1e-12, atol=1e-12)
    u = np.linspace(-1, 2, 90)
    np.testing.assert_allclose(np.asarray(src.rmatvec_block(0, 90, np.arange(40), u)), u @ X, rtol=1e-12, atol=1e-12)


def _logistic_weights_of(y):
    """A gradient's pointwise weights, u_i = σ(s_i) − y_i, indexing the targets by the global row."""
    yj = jnp.asarray(y, jnp.float32)

    def fn(s, rows):
        return jax.nn.sigmoid(s) - yj[jnp.clip(rows, 0, yj.shape[0] - 1)]

    return fn


def test_gradient_block_equals_the_materialised_products(source, full):
    rng = np.random.default_rng(5)
    y = source.targets()
    fn = _logistic_weights_of(y)
    cases = [
        (rng.choice(300, 57, replace=False), 128, (0, 256, 600)),  # any subset, any order; 600 overhangs
        (rng.choice(300, 1000), 300, (0, 500)),  # repeated columns, several tiles (the last padded)
        (np.array([299]), 700, (0,)),  # one column, the whole of N in one tile
    ]
    for cols, n_rows, starts in cases:
        v = (0.2 * rng.standard_normal(cols.size)).astype(np.float32)
        for start in starts:
            s, g = source.gradient_block(start, n_rows, cols, v, fn)
            assert s.shape == (n_rows,) and g.shape == (cols.size,) and s.dtype == g.dtype == jnp.float32
            live = full[start : start + n_rows][:, cols].astype(np.float64)  # block()'s entries
            n_live = live.shape[0]
            s_ref = live @ v
            u_ref = 1.0 / (1.0 + np.exp(-s_ref)) - y[start : start + n_live]
            scale = np.sqrt(cols.size)
            np.testing.assert_allclose(np.asarray(s)[:n_live], s_ref, rtol=1e-5, atol=2e-6 * scale)
            np.testing.assert_array_equal(np.asarray(s)[n_live:], 0.0)  # rows at or past N
            np.testing.assert_allclose(np.asarray(g), u_ref @ live, rtol=1e-5, atol=2e-6 * np.sqrt(n_live))
            # and the same as the two separate fused products with the same weights
            mv = source.matvec_block(start, n_rows, cols, v)
            np.testing.assert_allclose(np.asarray(mv), np.asarray(s), atol=1e-5)
            u = np.zeros(n_rows, np.float32)
            u[:n_live] = u_ref
            np.testing.assert_allclose(
                np.asarray(source.rmatvec_block(start, n_rows, cols, u)), np.asarray(g), rtol=1e-5, atol=1e-4
            )


def test_gradient_block_gets_global_rows_and_ignores_the_overhang(source, full):
    cols = np.array([3, 250, 17])
    v = np.ones(3, np.float32)

    def row_number(s, rows):  # u_i = i: g = Σ_i i·x_i over the live rows
        return rows.astype(s.dtype)

    _, g = source.gradient_block(640, 100, cols, v, row_number)
    live = full[640:700][:, cols].astype(np.float64)
    np.testing.assert_allclose(np.asarray(g), np.arange(640, 700) @ live, rtol=1e-5)

    def nan_past_the_end(s, rows):  # whatever fn says about rows past N, they weigh nothing
        return jnp.where(rows >= 700, jnp.float32(jnp.nan), jnp.ones_like(s))

    s, g = source.gradient_block(640, 100, cols, v, nan_past_the_end)
    assert np.all(np.isfinite(np.asarray(s))) and np.all(np.isfinite(np.asarray(g)))
    np.testing.assert_allclose(np.asarray(g), live.sum(axis=0), rtol=1e-5)


def test_gradient_block_compiles_once_per_shape_and_fn(source, full):
    traces = []

    def fn(s, rows):
        traces.append(1)  # runs only when the kernel is traced
        return jnp.tanh(s)

    rng = np.random.default_rng(8)
    for start in (0, 64, 320, 650):  # row_start is traced
        cols = rng.choice(300, 40, replace=False)  # other columns of the same count: same program
        v = rng.standard_normal(40).astype(np.float32)
        s, g = source.gradient_block(start, 64, cols, v, fn)
        live = full[start : start + 64][:, cols].astype(np.float64)
        np.testing.assert_allclose(np.asarray(g), np.tanh(live @ v) @ live, rtol=1e-4, atol=1e-4)
    assert len(traces) == 1
    # inside an outer jit (where the kernel is inlined, without its own compiler options), with
    # the columns traced too (a working set that changes every iteration)
    f = jax.jit(lambda st, cc, vv: source.gradient_block(st, 64, cc, vv, fn))
    s_in, g_in = f(jnp.int32(650), jnp.asarray(cols), jnp.asarray(v))
    np.testing.assert_allclose(np.asarray(s_in), np.asarray(s), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(g_in), np.asarray(g), rtol=1e-5, atol=1e-5)
    mv = jax.jit(lambda cc, vv: source.matvec_block(650, 64, cc, vv))(jnp.asarray(cols), jnp.asarray(v))
    np.testing.assert_allclose(np.asarray(mv), np.asarray(s), rtol=1e-5, atol=1e-5)


def test_gradient_block_takes_per_call_data_in_a_partial(source, full):
    """``fn`` as a Partial: its arrays are traced leaves, so new data of the same shapes reuse the kernel."""
    traces = []

    def weights(y, c, s, rows):
        traces.append(1)  # runs only when the kernel is traced
        return jax.nn.sigmoid(s - c) - y[jnp.clip(rows, 0, y.shape[0] - 1)]

    cols = np.array([5, 250, 17, 99])
    v = np.array([0.3, -0.2, 0.1, 0.4], np.float32)
    live = full[600:700][:, cols].astype(np.float64)  # 600 + 128 overhangs N = 700
    for seed, c in ((0, 0.0), (1, 0.7), (2, -1.5)):
        y = np.random.default_rng(seed).integers(0, 2, 700).astype(np.float32)
        fn = jax.tree_util.Partial(weights, jnp.asarray(y), jnp.float32(c))
        s, g = source.gradient_block(600, 128, cols, v, fn)
        u = 1.0 / (1.0 + np.exp(-(live @ v - c))) - y[600:]
        np.testing.assert_allclose(np.asarray(g), u @ live, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(s)[:100], live @ v, rtol=1e-5, atol=1e-5)
    assert len(traces) == 1


def test_moments_block_equals_the_materialised_sums(source, full):
    rng = np.random.default_rng(12)
    for cols, n_rows, start in [(rng.choice(300, 1000), 300, 500), (np.array([7, 3]), 128, 0)]:
        s1, s2 = source.moments_block(start, n_rows, cols)
        live = full[start : start + n_rows][:, cols].astype(np.float64)  # 500 + 300 overhangs N = 700
        np.testing.assert_allclose(np.asarray(s1), live.sum(axis=0), rtol=1e-5, atol=2e-4)
        np.testing.assert_allclose(np.asarray(s2), (live * live).sum(axis=0), rtol=1e-5, atol=2e-4)


def _sin_of_scores(s, rows):
    return jnp.sin(s)


def test_gradient_block_in_float64(x64):
    src = EquicorrelatedSource(90, 40, n_informative=2, seed=2, dtype=np.float64)
    X = np.asarray(src.block(slice(None)))
    v = np.linspace(-1, 1, 40)
    s, g = src.gradient_block(0, 90, np.arange(40), v, _sin_of_scores)
    assert s.dtype == g.dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(s), X @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(g), np.sin(X @ v) @ X, rtol=1e-11, atol=1e-11)


def test_kernels_do_not_change_values_with_the_vector_width(source):
    """The CPU kernels' wider vectors change the speed only (the entries are bitwise the same)."""
    from jaxselect import sources

    rows, cols = jnp.arange(0, 700, 3, dtype=jnp.int32), jnp.arange(300, dtype=jnp.int32)
    args = (rows, cols, jnp.asarray(source.keys), jnp.asarray(source.alpha, jnp.float32))
    wide = sources._jitted("block", True)(*args, dtype=np.float32)
    plain = sources._jitted("block", False)(*args, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(wide), np.asarray(plain))


def test_labels_follow_eq_17(source, full):
    np.testing.assert_array_equal(source.true_features, 10 * np.arange(1, 21) - 1)  # columns 10, 20, ... (1-based)
    y = source.targets()
    expected = (full[:, source.true_features].astype(np.float64).sum(axis=1) > 0).astype(np.int32)
    np.testing.assert_array_equal(y, expected)
    assert 0.4 < y.mean() < 0.6
    rows = np.array([650, 3, 3, 77])
    np.testing.assert_array_equal(source.targets(rows), expected[rows])
    np.testing.assert_array_equal(source.targets(slice(100, 200)), expected[100:200])


def test_label_noise_replaces_a_fraction_by_coin_flips():
    clean = EquicorrelatedSource(20_000, 100, n_informative=10, seed=4)
    noisy = EquicorrelatedSource(20_000, 100, n_informative=10, seed=4, label_noise=0.1)
    changed = np.mean(clean.targets() != noisy.targets())
    assert abs(changed - 0.05) < 0.01  # 10 % random labels: about half of them wrong
    np.testing.assert_array_equal(noisy.targets(np.arange(500, 600)), noisy.targets()[500:600])


def test_datasets_wrapper_and_informative_columns():
    src = js.datasets.equicorrelated(4000, 200, n_informative=4, seed=0)
    assert isinstance(src, EquicorrelatedSource) and src.shape == (4000, 200) and src.nbytes == 4000 * 200 * 4
    X, y = src.materialize().astype(np.float64), src.targets().astype(np.float64)
    # the k* true columns are the ones most correlated with the labels
    corr = np.abs([np.corrcoef(X[:, j], y)[0, 1] for j in range(200)])
    assert sorted(np.argsort(corr)[-4:].tolist()) == src.true_features.tolist()
    assert js.datasets.equicorrelated(10, 100).n_informative == 10  # default min(500, M // 10)


def _sum_of_scores(s, rows):  # not pointwise: one number for the whole tile
    return jnp.sum(s)


def test_invalid_arguments_raise_clear_errors(source):
    with pytest.raises(ValueError, match="n_features >= 100"):
        EquicorrelatedSource(10, 50, n_informative=10)
    with pytest.raises(ValueError, match="n_samples must be >= 1"):
        EquicorrelatedSource(0, 50)
    with pytest.raises(ValueError, match="label_noise must be <= 1"):
        EquicorrelatedSource(10, 50, label_noise=1.5)
    with pytest.raises(TypeError, match="dtype must be float32 or float64"):
        EquicorrelatedSource(10, 50, dtype=np.int32)
    with pytest.raises(IndexError, match=r"cols must lie in \[0, 300\)"):
        source.block(slice(0, 2), np.array([0, 300]))
    with pytest.raises(TypeError, match="rows must be a slice or a 1-D integer array"):
        source.block(np.array([0.5, 1.0]))
    with pytest.raises(ValueError, match="v must have shape"):
        source.matvec_block(0, 8, np.arange(5), np.ones(4))
    with pytest.raises(ValueError, match=r"u must have shape \(8,\)"):
        source.rmatvec_block(0, 8, np.arange(5), np.ones(5))
    with pytest.raises(ValueError, match="v must have shape"):
        source.gradient_block(0, 8, np.arange(5), np.ones(4), _sin_of_scores)
    with pytest.raises(TypeError, match="fn must be a callable"):
        source.gradient_block(0, 8, np.arange(5), np.ones(5), None)
    with pytest.raises(ValueError, match=r"fn\(s, rows\) must return one weight per row, shape \(8,\)"):
        source.gradient_block(0, 8, np.arange(5), np.ones(5), _sum_of_scores)
