"""Shape buckets (issue 35 item 2): nearby data shapes share compiled programs, and padding changes
no result. The FSA estimators pad X's rows to their bucket — zero rows of weight 0 (and a sparse
X's stored entries) — so a second fit on a nearby row count compiles nothing, and every fit equals
the unpadded one."""

import numpy as np
import pytest
import scipy.sparse as sp
from compile_count import count_compiles

from jaxselect.design.buckets import bucket, pad_columns, pad_design, pad_rows
from jaxselect.sklearn import FSAClassifier, FSARegressor


def test_buckets_are_few_and_tight():
    sizes = np.arange(1, 5000)
    buckets = np.array([bucket(int(n)) for n in sizes])
    assert (buckets >= sizes).all() and (buckets <= np.maximum(32, sizes * 1.125)).all()
    assert len(np.unique(buckets)) <= 8 * 8 + 1  # eight per octave above 32
    assert all(bucket(int(b)) == b for b in np.unique(buckets))  # a bucket is its own bucket


def test_padding_dense_and_sparse_alike():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((45, 7)).astype(np.float32)
    y = rng.integers(0, 3, 45)
    Xp, yp, wp = pad_design(X, y)
    S, ys, ws = pad_design(sp.csr_matrix(X), y)
    assert Xp.shape == S.shape == (48, 32) and sp.issparse(S) and S.nnz == bucket(X.size) == 320
    np.testing.assert_array_equal(S.toarray()[:45], Xp[:45])
    assert (S.toarray()[45:] == 1).sum() == 320 - X.size  # the stored entries' filler: ones in rows of weight 0
    np.testing.assert_array_equal(Xp[:45, :7], X)
    assert not Xp[45:].any() and not Xp[:, 7:].any()
    assert yp.tolist() == y.tolist() + [y[0]] * 3 and ys.tolist() == yp.tolist()
    assert wp.tolist() == [1.0] * 45 + [0.0] * 3 and ws.tolist() == wp.tolist()
    w = np.linspace(0.5, 2.0, 45)
    assert pad_design(X, y, w)[2].tolist() == w.tolist() + [0.0] * 3
    exact = np.ones((32, 32), np.float32)
    assert pad_design(exact, y[:32])[0] is exact  # already a bucket: untouched
    assert pad_rows(X, 45) is X and pad_columns(X, 7) is X


def _data(n, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    y = (X[:, 1] - 2 * X[:, 4] + 0.5 * X[:, 6] + 0.2 * rng.standard_normal(n)).astype(np.float32)
    return X, y


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_fsa_estimators_on_nearby_shapes_share_programs_and_equal_the_unpadded_fit(sparse, monkeypatch):
    wrap = sp.csr_matrix if sparse else np.asarray
    X, y = _data(200, 37, 1)
    labels = np.where(y > 0, "yes", "no")
    X2, y2 = _data(205, 37, 2)  # the same row bucket (208); sparse: stored entries 7 400 and 7 585, one bucket
    labels2 = np.where(y2 > 0, "yes", "no")
    for make, target, target2 in ((lambda: FSARegressor(k=3, n_iter=60), y, y2), (lambda: FSAClassifier(k=3, n_iter=60), labels, labels2)):
        padded = make().fit(wrap(X), target)
        with count_compiles() as compiles:
            make().fit(wrap(X2), target2)
        assert compiles[0] == 0, f"{type(padded).__name__}: a nearby shape compiled {compiles[0]} programs"
        assert padded.coef_.shape[-1] == 37
        monkeypatch.setenv("JAXSELECT_SHAPE_BUCKETS", "0")
        plain = make().fit(wrap(X), target)
        monkeypatch.delenv("JAXSELECT_SHAPE_BUCKETS")
        assert padded.get_support().tolist() == plain.get_support().tolist()
        assert set(np.flatnonzero(plain.get_support())) == {1, 4, 6}
        np.testing.assert_allclose(padded.coef_, plain.coef_, rtol=2e-3, atol=2e-4)
        np.testing.assert_allclose(padded.intercept_, plain.intercept_, rtol=2e-3, atol=2e-4)
        np.testing.assert_allclose(padded.predict(wrap(X))[:20] if target is y else padded.decision_function(wrap(X)),
                                   plain.predict(wrap(X))[:20] if target is y else plain.decision_function(wrap(X)),
                                   rtol=2e-3, atol=2e-3)
