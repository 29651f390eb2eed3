"""Loaders for the real datasets bundled in ``jaxselect/data`` and the papers' synthetic generators.

Every loader returns plain numpy arrays (float64 features, int labels) so that callers decide the
dtype they hand to the solvers. Sources, licences and label mappings: ``jaxselect/data/README.md``.
"""

from __future__ import annotations

import csv
import gzip
import io
from importlib import resources
from typing import NamedTuple

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


def load_dexter() -> Dataset:
    """DEXTER training part (300 x 20000, sparse counts stored dense); labels 0/1 (source -1/+1)."""
    return load_libsvm("dexter_train.libsvm.gz", n_features=20000)


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
