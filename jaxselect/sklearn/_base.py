"""What every jaxselect estimator shares: parameter checks, row weights, label encoding, the
base classes (scikit-learn conventions, feature selection by ``get_support``)."""

from __future__ import annotations

import contextlib
import numbers
import warnings

import jax
import numpy as np

try:
    import sklearn  # noqa: F401
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError("jaxselect.sklearn needs scikit-learn >= 1.6: pip install 'jaxselect[sklearn]'") from err

from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_selection import SelectorMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from jaxselect._validation import check_float, check_int, clip_k
from jaxselect.design import HostDesign, as_sparse_csr, is_sparse
from jaxselect.groups import Groups
from jaxselect.status import NOT_CONVERGED, status_message

_FLOATS = (np.float64, np.float32)
_METHODS = ("omp", "fr", "doubling")
_RULES = ("best", "1se")


# ---------------------------------------------------------------------------------------------
# Helpers.


def _seed_key(seed: int):
    """``jax.random.key(seed)``, as its raw data where the default implementation is threefry
    (``[0, seed]``: the same random numbers, without compiling the seeding program)."""
    if jax.config.jax_default_prng_impl == "threefry2x32" and 0 <= seed < 2**32:
        return np.asarray([0, seed], np.uint32)
    return jax.random.key(seed)


def _host(tree):
    """The pytree with every array leaf as a numpy array (picklable, no device buffers kept)."""
    return jax.tree.map(np.asarray, tree)


def _check_choice(value, name: str, choices) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}; got {value!r}")
    return value


def _check_budget(budget, name: str = "budget"):
    if budget is None:
        return None
    return check_float(budget, name, low=0.0)


def _check_k(k, name: str = "k", *, allow_none: bool = True):
    if k is None and allow_none:
        return None
    return check_int(k, name, low=1)


def _precision(dtype):
    """The context of a fit or JAX-side prediction: JAX's x64 mode for float64 data, so that the
    solver computes in X's precision (float64 X in float64, float32 X in float32)."""
    return jax.enable_x64(True) if np.dtype(dtype) == np.float64 else contextlib.nullcontext()


def _check_weights(sample_weight, X):
    """None, or (n_samples,) weights in X's dtype: finite, ≥ 0, not all zero (scikit-learn's rules).

    A number gives every row that weight. The solvers check the rest (at least 2 positive weights).
    """
    if sample_weight is None:
        return None
    n = X.shape[0]
    if isinstance(sample_weight, numbers.Number):
        w = np.full(n, sample_weight, dtype=X.dtype)
    else:
        w = check_array(sample_weight, ensure_2d=False, dtype=X.dtype, input_name="sample_weight", copy=True)
        if w.ndim != 1 or w.shape[0] != n:
            raise ValueError(f"sample_weight must have shape ({n},), one weight per row of X; got {w.shape}")
    if not np.isfinite(w).all():
        raise ValueError("sample_weight contains NaN or Inf")
    if (w < 0).any():
        row = int(np.flatnonzero(w < 0)[0])
        raise ValueError(f"sample_weight must be non-negative; row {row} has {w[row]}")
    if not (w > 0).any():
        raise ValueError("sample_weight: every weight is zero; give some rows a positive weight")
    return w


def _live_columns(X, w) -> np.ndarray:
    """(n_features,) bool: the columns that are not constant over the rows of positive weight — the
    data layer's rule, from its host summary pass (no device copy of X); a sparse X by
    :func:`_sparse_live`."""
    if is_sparse(X):
        return _sparse_live(as_sparse_csr(X, "X", dtype=X.dtype), w)
    return np.asarray(HostDesign.raw(X, X.dtype).summarize(w)[0].live)


def _sparse_live(X, w, block: int = 1 << 20) -> np.ndarray:
    """:func:`_live_columns` of a CSR X with temporaries of about ``block`` entries: a column is
    constant when no row of positive weight stores a non-zero in it, or when every such row does
    and its values are all equal (only those columns are read densely)."""
    n, d = X.shape
    pos = np.ones(n, bool) if w is None else np.asarray(w) > 0
    n_pos = int(pos.sum())
    counts = np.zeros(d, np.int64)
    indptr = X.indptr
    rows = max(1, block * n // max(int(X.nnz), 1))
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        a, b = int(indptr[r0]), int(indptr[r1])
        keep = X.data[a:b] != 0
        if w is not None:
            keep &= np.repeat(pos[r0:r1], np.diff(indptr[r0 : r1 + 1]))
        counts += np.bincount(X.indices[a:b][keep], minlength=d)
    live = (counts > 0) & (counts < n_pos)
    full = np.flatnonzero(counts == n_pos)
    if full.size:
        rows_pos = X if w is None else X[pos]
        step = max(1, block // max(n_pos, 1))
        for j in range(0, full.size, step):
            cols = full[j : j + step]
            dense = rows_pos[:, cols].toarray()
            live[cols] = dense.max(axis=0) != dense.min(axis=0)
    return live


def _cap_k(est, k, n_usable: int, unit: str, *, stacklevel: int = 3):
    """``k``, or ``n_usable`` with a UserWarning when k exceeds it (as ``SelectKBest``: all are kept):
    the library's one rule, :func:`jaxselect._validation.clip_k`, named after the estimator.

    ``stacklevel``: as ``warnings.warn``'s, counted from here (3: the caller of the caller).
    """
    return clip_k(k, n_usable, type(est).__name__, unit=unit, stacklevel=stacklevel)


def _make_groups(groups, costs, n_features: int) -> Groups:
    """A :class:`Groups` from the estimator's ``groups`` (None, ids or Groups) and ``costs`` parameters."""
    if isinstance(groups, Groups):
        ids = np.asarray(groups.ids)
        if costs is None:
            out = groups
        else:
            out = Groups.from_ids(ids, costs)
    elif groups is None:
        out = Groups.singletons(n_features, costs)
    else:
        out = Groups.from_ids(np.asarray(groups), costs)
    if out.n_features != n_features:
        raise ValueError(
            f"groups cover {out.n_features} features but X has {n_features} columns; give one group id per column"
        )
    return out


def _report_status(status: int, who: str) -> None:
    """A ConvergenceWarning for NOT_CONVERGED, a RuntimeWarning for the other flags."""
    status = int(status)
    if status & NOT_CONVERGED:
        warnings.warn(f"{who}: {status_message(NOT_CONVERGED)}", ConvergenceWarning, stacklevel=3)
    if status & ~NOT_CONVERGED:
        warnings.warn(f"{who}: {status_message(status & ~NOT_CONVERGED)}", RuntimeWarning, stacklevel=3)


def _usable_groups(X, w, groups: Groups) -> int:
    """Number of groups with a column that is not constant over the rows of positive weight."""
    ids = np.asarray(groups.ids)
    return int(np.unique(ids[_live_columns(X, w)]).size)


def _group_support(order: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """(D,) bool: the features of the groups in ``order`` (entries −1 ignored)."""
    chosen = order[order >= 0]
    return np.isin(ids, chosen)


def _encode_labels(est, y, w=None, *, min_classes: int = 2):
    """Check classification targets, set ``classes_`` and return labels 0..C−1 (int32).

    With row weights ``w``, the classes are counted over the rows of positive weight.
    """
    check_classification_targets(y)
    encoder = LabelEncoder()
    labels = encoder.fit_transform(y).astype(np.int32)
    est.classes_ = encoder.classes_
    present = est.classes_ if w is None else est.classes_[np.unique(labels[w > 0])]
    if len(present) < min_classes:
        rows = "the data contain" if w is None else "the rows of positive sample_weight contain"
        raise ValueError(
            f"{type(est).__name__} needs samples of at least {min_classes} classes; {rows} only one class "
            f"({present.tolist()[0]!r})"
        )
    return labels


def _linear_predict(X, coef, intercept):
    """``X @ coefᵀ + intercept`` in float64 (coef (D,) → (n,); coef (T, D) → (n, T)); a sparse X
    stays sparse (scipy's sparse product)."""
    X = X.astype(np.float64) if is_sparse(X) else np.asarray(X, np.float64)
    return np.asarray(safe_sparse_dot(X, np.asarray(coef, np.float64).T, dense_output=True)) + intercept


class _Base(BaseEstimator):
    """Tags shared by every estimator here: finite input; sparse X (kept as CSR) where ``_sparse``."""

    #: whether the estimator's solver runs on sparse X (``input_tags.sparse``)
    _sparse = False

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = self._sparse
        return tags

    def _validate_fit(self, X, y, sample_weight, *, multi_output: bool, numeric: bool):
        """``(X, y, w)``: X float64/float32 (a sparse X as CSR), y checked, ``w`` None or the checked
        (n_samples,) weights."""
        X, y = validate_data(
            self,
            X,
            y,
            dtype=_FLOATS,
            accept_sparse="csr" if self._sparse else False,
            multi_output=multi_output,
            y_numeric=numeric,
            ensure_min_samples=2,
        )
        return X, y, _check_weights(sample_weight, X)

    def _validate_X(self, X):
        check_is_fitted(self)
        return validate_data(self, X, dtype=_FLOATS, accept_sparse="csr" if self._sparse else False, reset=False)


class _Selector(SelectorMixin):
    """``SelectorMixin`` with the mask from ``support_``."""

    def _get_support_mask(self):
        check_is_fitted(self)
        return self.support_


# ---------------------------------------------------------------------------------------------
# Group sequencing (Hu et al.): regression, classification, cross-validated budget.
