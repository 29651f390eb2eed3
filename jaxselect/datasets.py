"""Loaders for the real datasets bundled in ``jaxselect/data`` and the papers' synthetic generators.

Generators: :func:`correlated_design` (FSA §3.1), :func:`equicorrelated` (FSA Figure 1) and
:func:`make_url_like` (sparse, URL-reputation-shaped classification data).

Every loader returns plain numpy arrays (float64 features, int labels) so that callers decide the
dtype they hand to the solvers. Sources, licences and label mappings: ``jaxselect/data/README.md``.
"""

from __future__ import annotations

import csv
import gzip
import io
from importlib import resources
from typing import Any, NamedTuple

import numpy as np

from jaxselect.sources import EquicorrelatedSource

__all__ = [
    "Dataset",
    "data_path",
    "load_csv",
    "load_libsvm",
    "load_pima",
    "load_adult",
    "load_mulan",
    "load_dexter",
    "load_binary_uci",
    "load_multiclass",
    "BINARY_UCI_SETS",
    "MULTICLASS_SETS",
    "correlated_design",
    "equicorrelated",
    "EquicorrelatedSource",
    "UrlLike",
    "make_url_like",
]

BINARY_UCI_SETS = (
    "australian",
    "breast_cancer_wisconsin",
    "pima_diabetes",
    "heart_statlog",
    "ionosphere",
    "liver_disorders_bupa",
    "sonar",
    "splice_train",
)
MULTICLASS_SETS = ("wine", "vowel", "vehicle", "segment")


class Dataset(NamedTuple):
    """A loaded dataset.

    Attributes:
      X: (n, d) float64 features.
      y: (n,) int labels, or (n, L) {0, 1} labels for multi-label sets.
      feature_names: tuple of d column names.
      costs: (J,) float64 acquisition cost of each group (of each column when every column is its
        own group) where the data have costs, else None.
      groups: (d,) int group id 0..J-1 of every column where the set has natural groups, else None.
    """

    X: np.ndarray
    y: np.ndarray
    feature_names: tuple
    costs: np.ndarray | None = None
    groups: np.ndarray | None = None


def data_path(name: str):
    """Path-like handle to a bundled data file (``importlib.resources`` traversable)."""
    path = resources.files("jaxselect").joinpath("data", name)
    if not path.is_file():
        raise FileNotFoundError(f"no bundled data file named {name!r} in jaxselect/data")
    return path


def _read_text(name: str) -> str:
    raw = data_path(name).read_bytes()
    if name.endswith(".gz"):
        raw = gzip.decompress(raw)
    return raw.decode("utf-8")


def load_csv(name: str, n_labels: int = 1) -> Dataset:
    """Load a bundled numeric CSV whose last ``n_labels`` columns are the target(s).

    Args:
      name: file name in ``jaxselect/data`` (e.g. ``"sonar.csv.gz"``).
      n_labels: number of trailing label columns (1 for single-label sets).
    """
    rows = list(csv.reader(io.StringIO(_read_text(name))))
    header, body = rows[0], np.asarray(rows[1:], dtype=np.float64)
    X = body[:, :-n_labels]
    y = body[:, -n_labels:].astype(np.int64)
    if n_labels == 1:
        y = y[:, 0]
    return Dataset(X, y, tuple(header[:-n_labels]))


def load_libsvm(name: str, n_features: int | None = None, zero_based_labels: bool = True) -> Dataset:
    """Load a bundled (gzipped) LibSVM/SVMlight file as a dense array.

    Args:
      name: file name in ``jaxselect/data`` (e.g. ``"wine.scale.gz"``).
      n_features: number of columns (default: the largest index in the file).
      zero_based_labels: relabel the sorted distinct labels as 0..C-1.
    """
    labels, entries = [], []
    max_index = 0
    for line in _read_text(name).splitlines():
        parts = line.split()
        if not parts:
            continue
        labels.append(float(parts[0]))
        row = []
        for item in parts[1:]:
            index, value = item.split(":")
            row.append((int(index) - 1, float(value)))
            max_index = max(max_index, int(index))
        entries.append(row)
    d = n_features or max_index
    X = np.zeros((len(labels), d))
    for i, row in enumerate(entries):
        for j, v in row:
            X[i, j] = v
    y = np.asarray(labels)
    if zero_based_labels:
        _, y = np.unique(y, return_inverse=True)
    return Dataset(X, y.astype(np.int64), tuple(f"f{j + 1}" for j in range(d)))


def load_pima(group_blood_test: bool = True) -> Dataset:
    """Pima Indians diabetes (768 x 8, labels 0/1) with Turney's (1995) test costs in CAD.

    Glucose and insulin come from one blood draw. With ``group_blood_test=True`` they form one group
    whose cost is that of the pair bought together (17.61 + 20.68 = 38.29: the second test is
    discounted by the shared $2.10 draw); every other feature is its own group. Otherwise each
    feature is its own group with its stand-alone cost.
    """
    data = load_csv("pima_diabetes.csv.gz")
    rows = list(csv.DictReader(io.StringIO(_read_text("pima_feature_costs.csv"))))
    costs = np.asarray([float(r["cost_cad"]) for r in rows])
    if group_blood_test:
        blood = [i for i, r in enumerate(rows) if r["group"] == "blood_test"]
        ids, next_id = np.empty(len(rows), dtype=np.int64), 0
        for i in range(len(rows)):
            if i in blood[1:]:
                ids[i] = ids[blood[0]]
            else:
                ids[i] = next_id
                next_id += 1
        group_cost = np.zeros(next_id)
        for i in range(len(rows)):
            group_cost[ids[i]] = costs[i] if i not in blood else 0.0
        discounted = [float(rows[i]["cost_if_group_already_paid_cad"]) for i in blood]
        group_cost[ids[blood[0]]] = max(costs[i] for i in blood) + min(discounted)
        return data._replace(costs=group_cost, groups=ids)
    return data._replace(costs=costs, groups=np.arange(len(rows)))


ADULT_CATEGORICAL = (
    "workclass",
    "education",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "native_country",
)


def load_adult(split: str = "train", drop_missing: bool = True) -> Dataset:
    """Adult census income, one-hot encoded, with one group per original attribute.

    Numeric attributes are single-column groups; each categorical attribute becomes one group of its
    one-hot columns (categories taken from the training split so train and test align). Labels:
    1 for ``>50K``. Group costs are 1 (unit cost per attribute); ``groups`` gives the attribute id of
    each column and ``feature_names`` names each column ``attribute=value``.
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test'; got {split!r}")

    def read(which):
        rows = list(csv.reader(io.StringIO(_read_text(f"adult_{which}.csv.gz"))))
        header, body = rows[0], rows[1:]
        if drop_missing:
            body = [r for r in body if "?" not in r]
        return header, body

    header, train_rows = read("train")
    _, rows = read(split) if split == "test" else (header, train_rows)
    attributes = header[:-1]
    columns, names, ids = [], [], []
    for a, attr in enumerate(attributes):
        values = [r[a] for r in rows]
        if attr in ADULT_CATEGORICAL:
            categories = sorted({r[a] for r in train_rows})
            for cat in categories:
                columns.append([1.0 if v == cat else 0.0 for v in values])
                names.append(f"{attr}={cat}")
                ids.append(a)
        else:
            columns.append([float(v) for v in values])
            names.append(attr)
            ids.append(a)
    X = np.asarray(columns, dtype=np.float64).T
    y = np.asarray([1 if r[-1].strip().startswith(">50K") else 0 for r in rows], dtype=np.int64)
    return Dataset(X, y, tuple(names), costs=np.ones(len(attributes)), groups=np.asarray(ids))


def load_mulan(name: str, split: str = "train") -> Dataset:
    """A Mulan multi-label set (``"emotions"``, ``"yeast"`` or ``"scene"``): y is (n, L) in {0, 1}."""
    if name not in ("emotions", "yeast", "scene"):
        raise ValueError(f"unknown Mulan set {name!r}; choose emotions, yeast or scene")
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test'; got {split!r}")
    fname = f"{name}_{split}.csv.gz"
    header = _read_text(fname).split("\n", 1)[0].split(",")
    n_labels = sum(h.startswith("label_") for h in header)
    return load_csv(fname, n_labels=n_labels)


def load_dexter(*, sparse: bool = False) -> Dataset:
    """DEXTER training part (300 x 20000 word counts, 0.5 % non-zero); labels 0/1 (source -1/+1).

    Args:
      sparse: False (default): ``X`` is a dense float64 array; True: a float32
        ``scipy.sparse.csr_matrix`` (what a vectoriser gives; every jaxselect solver that
        accepts sparse X runs on it without densifying, see docs/sparse.md).
    """
    data = load_libsvm("dexter_train.libsvm.gz", n_features=20000)
    if not sparse:
        return data
    import scipy.sparse as sp

    return Dataset(sp.csr_matrix(data.X, dtype=np.float32), data.y, data.feature_names)


def load_binary_uci(name: str) -> Dataset:
    """One of the 8 binary UCI sets of the datum-wise sparse paper (``BINARY_UCI_SETS``).

    ``breast_cancer_wisconsin``'s sample-id column is dropped, leaving its 9 real features.
    """
    if name not in BINARY_UCI_SETS:
        raise ValueError(f"unknown binary set {name!r}; choose one of {BINARY_UCI_SETS}")
    data = load_csv(f"{name}.csv.gz")
    if name == "breast_cancer_wisconsin":
        data = Dataset(data.X[:, 1:], data.y, data.feature_names[1:])
    return data


def load_multiclass(name: str) -> Dataset:
    """One of the LibSVM-scaled multiclass sets (``MULTICLASS_SETS``), labels 0..C-1."""
    if name not in MULTICLASS_SETS:
        raise ValueError(f"unknown multiclass set {name!r}; choose one of {MULTICLASS_SETS}")
    return load_libsvm(f"{name}.scale.gz")


def correlated_design(key_or_seed, n: int, d: int, rho: float = 0.9, dtype=np.float64) -> np.ndarray:
    """Gaussian design with Toeplitz covariance Sigma_ij = rho^|i-j| (FSA paper §3.1).

    Generated as an AR(1) recursion along the columns, O(n d) time and memory.
    """
    rng = np.random.default_rng(key_or_seed)
    X = np.empty((n, d), dtype=dtype)
    X[:, 0] = rng.standard_normal(n)
    scale = np.sqrt(1.0 - rho * rho)
    for j in range(1, d):
        X[:, j] = rho * X[:, j - 1] + scale * rng.standard_normal(n)
    return X


def equicorrelated(
    n_samples: int,
    n_features: int,
    *,
    n_informative: int | None = None,
    alpha: float = 0.5,
    seed: int = 0,
    label_noise: float = 0.0,
    dtype=np.float32,
) -> EquicorrelatedSource:
    """The FSA paper's Figure 1 data (§3.1.3 eq. (18), labels of eq. (17)) as a generated source.

    ``x_i = α z_i 1_M + ε_i`` with z_i ~ N(0, 1), ε_i ~ N(0, I_M): every pair of columns has
    correlation α²/(1+α²). Nothing is stored: entry (i, j) is a counter-based hash of
    (seed, i, j), the same however it is asked. Use ``source.block(rows, cols)``,
    ``source.targets(rows)``, ``source.materialize()`` (small sizes) or the fused products
    ``source.matvec_block`` / ``source.rmatvec_block``; see
    :class:`~jaxselect.sources.EquicorrelatedSource` for the arguments.

    >>> import jaxselect as js
    >>> src = js.datasets.equicorrelated(2000, 100, n_informative=3)
    >>> X, y = src.materialize(), src.targets()
    >>> X.shape, X.dtype.name, y.shape
    ((2000, 100), 'float32', (2000,))
    """
    return EquicorrelatedSource(
        n_samples, n_features, n_informative=n_informative, alpha=alpha, seed=seed,
        label_noise=label_noise, dtype=dtype,
    )


# --------------------------------------------------------------------- URL-reputation-shaped data
#: Rows generated per block by :func:`make_url_like` (fixed: the draw depends on it).
_URL_BLOCK_ROWS = 16_384


class UrlLike(NamedTuple):
    """A draw of :func:`make_url_like`.

    Attributes:
      X_train: (n_train, n_features) ``scipy.sparse.csr_matrix`` (float32 values, int32 sorted
        column indices, no duplicates, no stored zeros).
      y_train: (n_train,) int64 labels in {0, 1}.
      X_test: (n_test, n_features) CSR, as ``X_train``.
      y_test: (n_test,) int64 labels in {0, 1}.
      coef: (n_features,) float64 true coefficients (``n_informative`` non-zeros); the true
        probability of label 1 is ``sigmoid(X @ coef + intercept)``.
      intercept: float, the true intercept.
      informative: (n_informative,) int64 sorted indices of the non-zero coefficients.
      popularity: (n_features,) float64 probability that one sparse draw of a row picks each
        column (0 for the dense columns); sums to 1.
      bayes_error: float, the true model's expected error ``mean(min(p, 1 − p))`` over all
        generated rows (``p`` the true probabilities): the error of the Bayes rule
        ``X @ coef + intercept > 0``. Its realised error on the drawn labels scatters around it.
    """

    X_train: Any
    y_train: np.ndarray
    X_test: Any
    y_test: np.ndarray
    coef: np.ndarray
    intercept: float
    informative: np.ndarray
    popularity: np.ndarray
    bayes_error: float


def _check_count(value, name: str, low: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int; got {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}; got {value}")
    return int(value)


def _url_block(rng, n_rows, n_features, n_dense, nnz_sparse, cdf, sparse_cols, dtype):
    """One block of rows: (data, indices, indptr) of a CSR with sorted, unique column indices."""
    counts = np.maximum(rng.poisson(nnz_sparse, n_rows), 1)
    rows = np.repeat(np.arange(n_rows, dtype=np.int64), counts)
    ranks = np.searchsorted(cdf, rng.random(rows.size), side="right")
    np.minimum(ranks, cdf.size - 1, out=ranks)
    keys = rows * n_features + sparse_cols[ranks]
    del rows, ranks
    if n_dense:
        dense_keys = (np.arange(n_rows, dtype=np.int64)[:, None] * n_features + np.arange(n_dense)).ravel()
        keys = np.concatenate([keys, dense_keys])
    keys.sort()  # by (row, column); a column drawn twice in a row is kept once
    keep = np.empty(keys.size, dtype=bool)
    keep[0] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    keys = keys[keep]
    del keep
    row_of, indices = np.divmod(keys, n_features)
    del keys
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(row_of, minlength=n_rows), out=indptr[1:])
    data = np.ones(indices.size, dtype=dtype)
    if n_dense:
        dense = indices < n_dense  # every row holds all dense columns: n_dense entries per row
        data[dense] = rng.lognormal(0.0, 0.5, int(dense.sum())).astype(dtype)
    return data, indices.astype(np.int32), indptr


def _url_matrix(rng, n_rows, n_features, n_dense, nnz_sparse, cdf, sparse_cols, dtype):
    import scipy.sparse as sp

    datas, indices, indptrs, offset = [], [], [np.zeros(1, dtype=np.int64)], 0
    for start in range(0, n_rows, _URL_BLOCK_ROWS):
        d, i, p = _url_block(rng, min(_URL_BLOCK_ROWS, n_rows - start), n_features, n_dense, nnz_sparse,
                             cdf, sparse_cols, dtype)
        datas.append(d)
        indices.append(i)
        indptrs.append(p[1:] + offset)
        offset += int(p[-1])
    indptr = np.concatenate(indptrs)
    index_dtype = np.int32 if offset <= np.iinfo(np.int32).max else np.int64
    X = sp.csr_matrix(
        (np.concatenate(datas), np.concatenate(indices), indptr.astype(index_dtype)), shape=(n_rows, n_features)
    )
    X.has_sorted_indices = True
    return X


def _draws_per_row(p: np.ndarray, distinct: float) -> float:
    """λ such that Poisson(λ) draws from ``p`` hit ``distinct`` different columns on average.

    Each column's count is Poisson(λ p_j), independently, so E[#distinct] = Σ_j (1 − exp(−λ p_j)),
    increasing in λ: bisection.
    """
    lo, hi = distinct, distinct
    while np.sum(-np.expm1(-hi * p)) < distinct:
        hi *= 2.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.sum(-np.expm1(-mid * p)) < distinct else (lo, mid)
    return 0.5 * (lo + hi)


def _sigmoid(t: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * t))


def _expected_error(t: np.ndarray, gamma: float) -> float:
    """mean(min(p, 1 − p)) for p = sigmoid(gamma·t) = mean(sigmoid(−gamma·|t|))."""
    return float(np.mean(_sigmoid(-gamma * np.abs(t))))


def make_url_like(
    n_samples: int,
    n_features: int,
    *,
    nnz_per_row: int = 100,
    n_informative: int = 2000,
    n_dense: int = 16,
    popularity_exponent: float = 1.0,
    bayes_error: float = 0.015,
    positive_fraction: float = 0.33,
    test_size: int | float = 0.2,
    seed: int = 0,
    dtype=np.float32,
) -> UrlLike:
    """Sparse binary classification data shaped like the URL reputation set (FSA paper, §3.3).

    Columns ``0 .. n_dense−1`` are dense, real-valued (log-normal, stored in every row); the other
    columns are binary indicators. Each row draws ``Poisson(λ)`` (at least 1)
    sparse columns with replacement from a Zipf-like popularity ``p_r ∝ (r + 1)^−a`` over ranks
    ``r`` (``a = popularity_exponent``; ranks are assigned to columns by a random permutation) and
    stores a 1 in each distinct one, λ solved so that a row holds ``nnz_per_row`` entries on
    average (a popular column drawn twice is stored once). Labels follow a sparse logistic model: ``coef`` is
    non-zero on ``n_informative`` columns — half of the dense columns (rounded up) and the rest
    drawn without replacement among the ``20·n_informative`` most popular sparse columns — with
    normal values (dense ones divided by their column's standard deviation), and
    ``P(y = 1 | x) = sigmoid(x·coef + intercept)``. The scale of ``coef`` is solved (bisection on
    the generated rows) so that the Bayes error ``mean(min(p, 1 − p))`` equals ``bayes_error``,
    and ``intercept`` so that a fraction ``positive_fraction`` of the rows has a positive true
    score. Rows are generated in fixed blocks, fully vectorised: 250 000 × 500 000 with 100
    non-zeros per row (25·10⁶ entries) takes about 6 s on one core and peaks near twice the returned
    matrices' size.

    Args:
      n_samples: total rows N ≥ 2 (train + test).
      n_features: columns M, with M − n_dense > nnz_per_row − n_dense sparse columns.
      nnz_per_row: mean stored entries per row, including the dense columns (> n_dense).
      n_informative: non-zero true coefficients, ``ceil(n_dense/2) ≤ n_informative ≤
        ceil(n_dense/2) + (M − n_dense)``.
      n_dense: dense real-valued columns (≥ 0).
      popularity_exponent: a ≥ 0 of the Zipf-like column popularity (0: uniform).
      bayes_error: target Bayes error in (0, 0.5) (the URL set's best reported error is ~1 %).
      positive_fraction: fraction of rows with a positive true score, in (0, 1).
      test_size: test rows, an int in [1, N − 1] or a fraction in (0, 1) (rounded, at least 1).
      seed: seed of ``numpy.random.default_rng``; the draw is a function of all arguments.
      dtype: value dtype of the matrices (float32 or float64).

    Returns:
      :class:`UrlLike` (train/test CSR matrices and labels, the true model, its Bayes error).

    >>> import jaxselect as js
    >>> d = js.datasets.make_url_like(2000, 5000, nnz_per_row=30, n_informative=100, n_dense=4)
    >>> d.X_train.shape, d.X_test.shape, d.X_train.dtype.name, d.y_train.dtype.name
    ((1600, 5000), (400, 5000), 'float32', 'int64')
    """
    n_samples = _check_count(n_samples, "n_samples", 2)
    n_features = _check_count(n_features, "n_features", 2)
    n_dense = _check_count(n_dense, "n_dense", 0)
    nnz_per_row = _check_count(nnz_per_row, "nnz_per_row", n_dense + 1)
    if n_features - n_dense <= nnz_per_row - n_dense:
        raise ValueError(
            f"nnz_per_row - n_dense ({nnz_per_row - n_dense}) must be below the number of sparse columns "
            f"n_features - n_dense ({n_features - n_dense})"
        )
    n_dense_inf = (n_dense + 1) // 2
    n_informative = _check_count(n_informative, "n_informative", max(n_dense_inf, 1))
    n_sparse = n_features - n_dense
    if n_informative - n_dense_inf > n_sparse:
        raise ValueError(f"n_informative ({n_informative}) exceeds ceil(n_dense/2) + the {n_sparse} sparse columns")
    for value, name, low, high in (
        (bayes_error, "bayes_error", 0.0, 0.5),
        (positive_fraction, "positive_fraction", 0.0, 1.0),
    ):
        if not (isinstance(value, (int, float, np.floating)) and low < float(value) < high):
            raise ValueError(f"{name} must be a number in ({low}, {high}); got {value!r}")
    if not (isinstance(popularity_exponent, (int, float, np.floating)) and 0.0 <= popularity_exponent < np.inf):
        raise ValueError(f"popularity_exponent must be a finite number >= 0; got {popularity_exponent!r}")
    if isinstance(test_size, (float, np.floating)):
        if not 0.0 < test_size < 1.0:
            raise ValueError(f"a fractional test_size must be in (0, 1); got {test_size}")
        n_test = min(max(int(round(test_size * n_samples)), 1), n_samples - 1)
    else:
        n_test = _check_count(test_size, "test_size", 1)
        if n_test >= n_samples:
            raise ValueError(f"test_size ({n_test}) must leave training rows (n_samples = {n_samples})")
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64; got {dtype}")

    rng = np.random.default_rng(seed)
    weights = (np.arange(1, n_sparse + 1, dtype=np.float64)) ** -float(popularity_exponent)
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    sparse_cols = n_dense + rng.permutation(n_sparse)  # popularity rank -> column index
    popularity = np.zeros(n_features)
    popularity[sparse_cols] = weights / weights.sum()
    del weights

    pool = min(n_sparse, 20 * n_informative)
    chosen = rng.choice(pool, n_informative - n_dense_inf, replace=False)
    informative = np.sort(np.concatenate([np.arange(n_dense_inf), sparse_cols[chosen]])).astype(np.int64)
    coef = np.zeros(n_features)
    coef[informative] = rng.standard_normal(n_informative)

    nnz_sparse = _draws_per_row(popularity[n_dense:], float(nnz_per_row - n_dense))
    n_train = n_samples - n_test
    X_train = _url_matrix(rng, n_train, n_features, n_dense, nnz_sparse, cdf, sparse_cols, dtype)
    X_test = _url_matrix(rng, n_test, n_features, n_dense, nnz_sparse, cdf, sparse_cols, dtype)
    if n_dense_inf:
        dense = np.concatenate([X_train[:, :n_dense_inf].toarray(), X_test[:, :n_dense_inf].toarray()])
        dense_std = dense.astype(np.float64).std(axis=0)
        coef[:n_dense_inf] /= np.where(dense_std > 0, dense_std, 1.0)
        del dense
    t = np.concatenate([X_train @ coef, X_test @ coef])
    shift = float(np.quantile(t, 1.0 - float(positive_fraction)))
    t -= shift
    # Scale: the expected error mean(sigmoid(-g|t|)) decreases in g; bisect on log g.
    lo, hi = -30.0, 30.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _expected_error(t, np.exp(mid)) > bayes_error else (lo, mid)
    gamma = float(np.exp(0.5 * (lo + hi)))
    coef *= gamma
    intercept = -gamma * shift
    t *= gamma
    y = (rng.random(n_samples) < _sigmoid(t)).astype(np.int64)
    achieved = _expected_error(t, 1.0)
    return UrlLike(
        X_train=X_train, y_train=y[:n_train], X_test=X_test, y_test=y[n_train:],
        coef=coef, intercept=intercept, informative=informative, popularity=popularity, bayes_error=achieved,
    )
