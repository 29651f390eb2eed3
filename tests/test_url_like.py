"""``jaxselect.datasets.make_url_like``: the URL-reputation-shaped sparse generator.

Checked against the generator's stated model (not its code): shapes and the CSR invariants, the
dense/binary layout, the mean entries per row, the Zipf-like column popularity (empirical column
frequencies against ``1 − exp(−λ p_j)``), determinism, the true model (labels calibrated to
``sigmoid(X coef + intercept)``) and its Bayes error.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from jaxselect.datasets import UrlLike, make_url_like


def _draw(n=4000, m=20_000, **kw):
    args = dict(nnz_per_row=40, n_informative=200, n_dense=6, seed=3, test_size=0.25)
    args.update(kw)
    return make_url_like(n, m, **args)


@pytest.fixture(scope="module")
def small():
    return _draw()


def test_shapes_dtypes_and_csr_invariants(small):
    d = small
    assert isinstance(d, UrlLike)
    assert d.X_train.shape == (3000, 20_000) and d.X_test.shape == (1000, 20_000)
    assert d.y_train.shape == (3000,) and d.y_test.shape == (1000,)
    for X in (d.X_train, d.X_test):
        assert sp.isspmatrix_csr(X) or isinstance(X, sp.csr_array)
        assert X.dtype == np.float32 and X.indices.dtype == np.int32
        assert np.all(X.data != 0) and np.all(np.isfinite(X.data))
        # sorted, unique column indices in every row
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        key = rows.astype(np.int64) * X.shape[1] + X.indices
        assert np.all(np.diff(key) > 0)
        assert X.has_sorted_indices
    assert set(np.unique(d.y_train)) == {0, 1} and d.y_train.dtype == np.int64
    assert d.coef.shape == (20_000,) and d.coef.dtype == np.float64
    assert np.array_equal(np.flatnonzero(d.coef), d.informative) and d.informative.size == 200
    assert d.popularity.shape == (20_000,)
    np.testing.assert_allclose(d.popularity.sum(), 1.0, rtol=1e-12)


def test_dense_columns_and_binary_rest(small):
    X = small.X_train
    dense = X[:, :6].toarray()
    assert np.all(dense > 0)  # stored in every row, real-valued (log-normal)
    assert np.unique(dense).size > 0.9 * dense.size
    rest = X[:, 6:]
    np.testing.assert_array_equal(rest.data, 1.0)
    assert np.all(small.popularity[:6] == 0)
    # informative: ceil(6/2) = 3 dense columns, the rest among the sparse ones
    assert np.array_equal(small.informative[:3], [0, 1, 2]) and small.informative[3] >= 6


def test_entries_per_row(small):
    counts = np.diff(small.X_train.indptr)
    assert counts.min() >= 6 + 1
    assert abs(counts.mean() - 40) < 0.5  # mean 40 (std of the mean ~ 6/sqrt(3000))
    assert counts.std() > 2  # Poisson, not a fixed count


def test_popularity_is_zipf_like_and_matches_the_model(small):
    X, p = small.X_train, small.popularity
    freq = np.bincount(X.indices, minlength=X.shape[1]) / X.shape[0]  # fraction of rows holding j
    # lambda of the model: E[# distinct sparse columns] = sum(1 - exp(-lam p)) = 40 - 6, solved here
    lam = np.exp(np.interp(0.0, *zip(*sorted(
        (np.sum(-np.expm1(-np.exp(g) * p)) - 34.0, g) for g in np.linspace(np.log(34), np.log(500), 4000)
    ))))
    expected = -np.expm1(-lam * p)
    top = np.argsort(p)[::-1][:50]
    np.testing.assert_allclose(freq[top], expected[top], atol=4 * np.sqrt(0.25 / X.shape[0]))
    # skew: the 1 % most popular sparse columns hold a large share of the sparse entries
    sparse_counts = np.sort(np.bincount(X.indices, minlength=X.shape[1])[6:])[::-1]
    share = sparse_counts[: sparse_counts.size // 100].sum() / sparse_counts.sum()
    assert 0.3 < share < 0.9
    # popularity ranks are spread over the columns (random permutation), not in index order
    rank_order = np.argsort(p[6:])[::-1]
    assert abs(np.corrcoef(np.arange(rank_order.size), rank_order)[0, 1]) < 0.05
    # a flat popularity spreads the entries evenly
    flat = _draw(popularity_exponent=0.0)
    c = np.bincount(flat.X_train.indices, minlength=20_000)[6:]
    assert c.max() < 3 * c.mean()


def test_deterministic_under_a_seed():
    a, b, c = _draw(n=600, m=3000, seed=7), _draw(n=600, m=3000, seed=7), _draw(n=600, m=3000, seed=8)
    for x, y in ((a.X_train, b.X_train), (a.X_test, b.X_test)):
        assert (x != y).nnz == 0
    np.testing.assert_array_equal(a.y_train, b.y_train)
    np.testing.assert_array_equal(a.coef, b.coef)
    assert (a.X_train != c.X_train).nnz > 0


def test_bayes_error_and_calibration():
    d = make_url_like(40_000, 30_000, nnz_per_row=50, n_informative=500, n_dense=8, bayes_error=0.015,
                      test_size=10_000, seed=1)
    X = sp.vstack([d.X_train, d.X_test]).tocsr()
    y = np.concatenate([d.y_train, d.y_test])
    t = X.astype(np.float64) @ d.coef + d.intercept
    p = 1.0 / (1.0 + np.exp(-t))
    # the stated Bayes error is the model's expected error of sign(t), computed independently here
    np.testing.assert_allclose(d.bayes_error, np.mean(np.minimum(p, 1 - p)), rtol=1e-6)
    assert abs(d.bayes_error - 0.015) < 1e-4
    noiseless = (t > 0).astype(np.int64)
    realised = np.mean(noiseless != y)  # error of the true model's sign on the noisy labels
    assert 0.01 <= realised <= 0.02
    assert abs(realised - d.bayes_error) < 4 * np.sqrt(0.015 / y.size)
    # labels are calibrated draws: mean label per probability decile matches the mean probability
    order = np.argsort(p)
    for chunk in np.array_split(order, 10):
        assert abs(y[chunk].mean() - p[chunk].mean()) < 4 * np.sqrt(0.25 / chunk.size)
    # about positive_fraction = 0.33 of the rows have a positive true score
    assert abs(noiseless.mean() - 0.33) < 0.005
    # noise matters: with a 5 % target the realised error is higher
    d5 = make_url_like(20_000, 30_000, nnz_per_row=50, n_informative=500, n_dense=8, bayes_error=0.05, seed=1)
    t5 = d5.X_test @ d5.coef + d5.intercept
    assert 0.035 < np.mean((t5 > 0) != d5.y_test) < 0.065


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(n_samples=1), "n_samples"),
        (dict(n_features=50, nnz_per_row=60), "sparse columns"),
        (dict(nnz_per_row=4, n_dense=4), "nnz_per_row"),
        (dict(n_informative=10**6), "n_informative"),
        (dict(bayes_error=0.0), "bayes_error"),
        (dict(bayes_error=0.5), "bayes_error"),
        (dict(positive_fraction=1.0), "positive_fraction"),
        (dict(popularity_exponent=-1.0), "popularity_exponent"),
        (dict(test_size=1.5), "test_size"),
        (dict(test_size=100), "test_size"),
        (dict(dtype=np.int32), "dtype"),
    ],
)
def test_validation(kw, match):
    args = dict(n_samples=100, n_features=1000, nnz_per_row=20, n_informative=10, n_dense=2)
    args.update(kw)
    n, m = args.pop("n_samples"), args.pop("n_features")
    with pytest.raises(ValueError, match=match):
        make_url_like(n, m, **args)


def test_type_errors():
    with pytest.raises(TypeError, match="n_samples"):
        make_url_like(100.0, 1000)
    with pytest.raises(TypeError, match="nnz_per_row"):
        make_url_like(100, 1000, nnz_per_row=True)
