"""Choose the budget (or k) by cross-validation: every fold in one jitted, vmapped call.

:func:`cross_validate_path` runs a sequencing solver (CS-G-OMP, CS-G-FR or Doubling, Hu et al.) on
K training folds at once and scores every prefix of every fold's path on that fold's held-out rows.
The K folds are K row weightings of the *same* X — ``prepare(X, y, groups, sample_weight=w_f)``
with ``w_f`` the 0/1 training mask of fold f — so folds of unequal size (any n, the folds of
scikit-learn's ``KFold``) share one compiled program and one ``jax.vmap``; nothing is gathered and
no Python loop runs over folds. Held-out scores use the fold's 0/1 test mask on the same rows.

Each fold's path is an anytime predictor, so the held-out score is a step function of the budget
B: at B the fold uses its longest prefix with cumulative cost ≤ B (the rule of
:func:`jaxselect.predict`, relative tolerance 32ε). The curves are evaluated on a grid of budgets
(by default every cumulative cost reached by some fold, and 0: the intercept-only model), where
the mean over folds attains every value it takes. :func:`cross_validate_fsa` does the same for
FSA over a grid of k (one fit per k, each vmapped over the folds).

The selection rules:

* ``best``: the grid point maximising the mean held-out score (the smallest on ties — what
  scikit-learn's ``GridSearchCV`` picks on an ascending grid);
* ``best_1se``: the smallest grid point whose mean is within one standard error of the best,
  ``mean ≥ mean[best] − sem[best]`` with ``sem = std(ddof=1)/√K`` (Hastie, Tibshirani & Friedman,
  *Elements of Statistical Learning*, §7.10; glmnet's ``lambda.1se``).

Scores (higher is better, as in scikit-learn's scorers): ``"r2"`` — ``1 − SSE/SST`` on the fold's
held-out rows, SST around their own mean, averaged over targets (scikit-learn's ``r2_score``);
``"neg_mse"`` — minus the mean squared error; ``"accuracy"`` (FSA's classification losses) — the
fraction of held-out labels whose sign the score predicts.

Sparse X (``scipy.sparse`` any format, BCOO/BCSR): the folds are the same row weightings of
the one sparse X, but run one after the other (a Python loop over folds: sparse X is converted
on the host and cannot be vmapped): ``prepare``/``fsa`` on sparse X with the fold's weights,
held-out predictions by scipy's sparse product. FSA's piecewise-linear learners (``bins``) are
refused on sparse X, as by :func:`jaxselect.fsa`.

This module does not import scikit-learn; :mod:`jaxselect.sklearn` builds its ``*CV`` estimators
on it.
"""

from __future__ import annotations

import numbers
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect import _predict
from jaxselect._budget import budget_rtol
from jaxselect._repr import short_repr
from jaxselect._validation import (
    MIN_ROWS,
    as_device,
    as_float_matrix,
    as_hyper,
    as_targets,
    check_choice,
    check_int,
    host_array,
    is_traced,
)
from jaxselect.anneal.fsa import fsa, fsa_predict, fsa_prepare, fsa_stage_widths, small_dense, validate_fsa_options
from jaxselect.anneal.multiclass import SOFTMAX_LOSSES, class_labels
from jaxselect.anneal.options import Execution, PiecewiseLinear, Polish, take_deprecated
from jaxselect.anneal.defaults import auto_n_iter, is_auto
from jaxselect.anneal.scaling import apply_transform, check_scale_rule, has_indicator_columns, result_transform
from jaxselect.losses import HuberHinge, loss_names
from jaxselect.anneal.run import RunPlan, iteration_cap, run as run_schedule
from jaxselect.anneal.schedule import annealing_schedule
from jaxselect.design.buckets import pad_design
from jaxselect.design import HostDesign, HostSparseDesign, as_sample_weight, as_sparse_csr, column_summary, is_sparse
from jaxselect.design.boundary import HOST_SUMMARY_MAX_BYTES
from jaxselect.sequencing.criteria import OMP_CRITERIA
from jaxselect.sequencing.engine import clip_steps
from jaxselect.groups import as_groups
from jaxselect.sharding import any_mesh
from jaxselect.status import NONFINITE, OK
from jaxselect.programs import jit

__all__ = ["CVResult", "cross_validate_fsa", "cross_validate_path", "fold_masks"]

METHODS = ("omp", "fr", "doubling")
REGRESSION_SCORES = ("r2", "neg_mse")


class CVResult(NamedTuple):
    """Cross-validated held-out scores on a grid of budgets (or of k), and the chosen grid points.

    Attributes:
      grid: (B,) ascending budgets (:func:`cross_validate_path`) or k values (:func:`cross_validate_fsa`).
      scores: (K, B) held-out score of every fold at every grid point (the per-fold curves).
      mean: (B,) mean over folds.
      std: (B,) standard deviation over folds (ddof=0, as ``GridSearchCV``'s ``std_test_score``).
      sem: (B,) standard error of the mean, ``std(ddof=1)/√K``.
      best_index, best: the grid point maximising ``mean`` (the smallest on ties).
      index_1se, best_1se: the smallest grid point with ``mean ≥ mean[best_index] − sem[best_index]``.
      fold_order: (K, m) group order of each fold's path (−1 = no group), or None (FSA).
      fold_cum_cost: (K, m) cumulative cost of each fold's prefixes (+inf where no group), or None.
      fold_path_scores: (K, m+1) held-out score of each fold's intercept-only model and of each of its
        prefixes, or None (FSA).
      status: OR of the folds' status flags (0 = fine; see :func:`jaxselect.status_message`).

    All fields are host (numpy) arrays or Python scalars.

    >>> import numpy as np, jaxselect as js
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(103, 6))
    >>> y = X[:, 0] - 2 * X[:, 3] + 0.5 * rng.normal(size=103)
    >>> cv = js.cross_validate_path(X, y, folds=5)   # a CVResult
    >>> cv.mean.shape, cv.best, cv.best_1se <= cv.best, cv.status
    ((7,), 2.0, True, 0)
    """

    grid: np.ndarray
    scores: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    sem: np.ndarray
    best_index: int
    best: float
    index_1se: int
    best_1se: float
    fold_order: np.ndarray | None
    fold_cum_cost: np.ndarray | None
    fold_path_scores: np.ndarray | None
    status: int

    __repr__ = short_repr


# ---------------------------------------------------------------------------------------------
# Folds.


def fold_masks(folds, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(K, n) boolean training and test masks from a fold specification.

    Args:
      folds: an int K ≥ 2 — scikit-learn's ``KFold(K)`` without shuffling: contiguous test blocks,
        the first ``n % K`` of size ``n // K + 1``, the others ``n // K``; or an (n,) integer array
        of fold ids 0..K−1 (row i is held out in fold ``folds[i]``; e.g. from a shuffled or
        stratified split); or a sequence of ``(train_indices, test_indices)`` pairs (what a
        scikit-learn splitter's ``split`` yields; the test sets need not partition the rows).
      n: number of rows.

    Returns:
      ``(train, test)``, each (K, n) bool. Every training set has ≥ 2 rows, every test set ≥ 1.
    """
    if isinstance(folds, (numbers.Integral, np.integer)) and not isinstance(folds, bool):
        K = check_int(folds, "folds", low=2)
        if K > n:
            raise ValueError(f"folds={K} exceeds the number of rows n={n}; choose folds <= {n}")
        sizes = np.full(K, n // K)
        sizes[: n % K] += 1
        ids = np.repeat(np.arange(K), sizes)
        test = ids[None, :] == np.arange(K)[:, None]
        return ~test, test
    if isinstance(folds, np.ndarray) and folds.ndim == 1 and folds.dtype.kind in "iu":
        if folds.shape[0] != n:
            raise ValueError(f"fold ids must have one entry per row: shape ({n},); got {folds.shape}")
        ids, inverse = np.unique(folds, return_inverse=True)
        if ids.size < 2:
            raise ValueError("fold ids must name at least 2 folds")
        test = inverse[None, :] == np.arange(ids.size)[:, None]
        train = ~test
    else:
        try:
            pairs = list(folds)
        except TypeError:
            raise TypeError(
                "folds must be an int (K contiguous folds, as KFold), an (n,) integer array of fold ids, "
                f"or a sequence of (train_indices, test_indices) pairs; got {type(folds).__name__}"
            ) from None
        if len(pairs) < 1 or not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in pairs):
            raise TypeError("folds given as a sequence must hold (train_indices, test_indices) pairs")
        train = np.zeros((len(pairs), n), bool)
        test = np.zeros((len(pairs), n), bool)
        for f, (tr, te) in enumerate(pairs):
            for mask, idx, what in ((train, tr, "train"), (test, te, "test")):
                idx = np.asarray(idx)
                if idx.dtype == bool:
                    if idx.shape != (n,):
                        raise ValueError(f"fold {f}: a boolean {what} mask must have shape ({n},); got {idx.shape}")
                    idx = np.flatnonzero(idx)
                if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
                    raise TypeError(f"fold {f}: {what} indices must be a 1-D integer array")
                if idx.size and (idx.min() < -n or idx.max() >= n):
                    raise ValueError(f"fold {f}: {what} indices must lie in 0..{n - 1}")
                mask[f, idx] = True
            if (train[f] & test[f]).any():
                raise ValueError(f"fold {f}: a row is in both its training and its test set")
    small = np.flatnonzero(train.sum(axis=1) < MIN_ROWS)
    if small.size:
        raise ValueError(f"fold {small[0]} has fewer than {MIN_ROWS} training rows; use fewer folds")
    empty = np.flatnonzero(test.sum(axis=1) < 1)
    if empty.size:
        raise ValueError(f"fold {empty[0]} has no test row")
    return train, test


def _size_buckets(train: np.ndarray) -> list[np.ndarray]:
    """Fold indices grouped by training-set size (solvers without row weights vmap per size)."""
    sizes = train.sum(axis=1)
    return [np.flatnonzero(sizes == s) for s in np.unique(sizes)]


def _gathered_rows(train: np.ndarray, folds: np.ndarray) -> np.ndarray:
    """(len(folds), n_train) row indices of the training sets of ``folds`` (all of one size)."""
    return np.stack([np.flatnonzero(train[f]) for f in folds])


def _padded_rows(train: np.ndarray, w, dtype):
    """``(rows, row_w)``: (K, n_max) training row indices of every fold, the shorter folds padded by
    repeating their first row with weight 0 (weight-0 rows are absent from a weighted fit), and
    their (K, n_max) row weights — None when the folds are of one size and unweighted."""
    sizes = train.sum(axis=1)
    n_max = int(sizes.max())
    rows = np.zeros((train.shape[0], n_max), np.int32)
    valid = np.zeros((train.shape[0], n_max), bool)
    for f in range(train.shape[0]):
        idx = np.flatnonzero(train[f])
        rows[f, : idx.size], rows[f, idx.size :] = idx, idx[0]
        valid[f, : idx.size] = True
    if w is None and bool(valid.all()):
        return as_device(rows), None
    weights = valid.astype(np.float64) if w is None else np.where(valid, w[rows], 0.0)
    return as_device(rows), as_device(weights, dtype)


def _fold_weights(train: np.ndarray, test: np.ndarray, sample_weight, n: int):
    """(K, n) training and test row weights: the 0/1 fold masks times ``sample_weight`` (None: 1).

    Returns ``(train_w, test_w, w)`` with ``w`` the (n,) host weights or None. Every fold needs
    ≥ 2 training rows and ≥ 1 test row of positive weight.
    """
    w = as_sample_weight(sample_weight, n)
    if w is None:
        return train.astype(np.float64), test.astype(np.float64), None
    w = host_array(w).astype(np.float64)
    train_w, test_w = train * w[None, :], test * w[None, :]
    few = np.flatnonzero((train_w > 0).sum(axis=1) < MIN_ROWS)
    if few.size:
        raise ValueError(f"fold {few[0]} has fewer than {MIN_ROWS} training rows of positive sample_weight")
    empty = np.flatnonzero((test_w > 0).sum(axis=1) < 1)
    if empty.size:
        raise ValueError(f"fold {empty[0]} has no test row of positive sample_weight")
    return train_w, test_w, w


# ---------------------------------------------------------------------------------------------
# Held-out scores (inside the vmapped fold function).


def _fold_score(Y, P, w, *, score: str, xp=jnp):
    """Held-out score of predictions P (n, T) against Y (n, T) on the rows with test weight w (n,);
    ``xp=numpy`` scores host arrays (no compiled program)."""
    wsum = xp.sum(w)
    r = (Y - P) * w[:, None]
    sse = xp.sum(r * (Y - P), axis=0)  # (T,)
    if score == "neg_mse":
        return -xp.sum(sse) / (wsum * Y.shape[1])
    mean = xp.sum(Y * w[:, None], axis=0) / wsum
    dev = Y - mean[None, :]
    sst = xp.sum(dev * dev * w[:, None], axis=0)
    # a target constant on the held-out rows (max == min: exact, where sst may be a rounding residue)
    held = (w > 0)[:, None]
    varies = xp.max(xp.where(held, Y, -xp.inf), axis=0) > xp.min(xp.where(held, Y, xp.inf), axis=0)
    ok = varies & (sst > 0)
    # r2_score's convention for a constant held-out target: 1 when predicted exactly, else 0
    r2 = xp.where(
        ok, 1.0 - sse / xp.where(ok, sst, xp.ones_like(sst)), xp.where(sse == 0, 1.0, 0.0).astype(sse.dtype)
    )
    return xp.mean(r2)


def _accuracy(y, s, w, *, xp=jnp):
    """Fraction of rows (weight w) whose label y ∈ {0, 1} is predicted by the sign of the score s."""
    hit = ((s > 0) == (y > 0.5)).astype(s.dtype)
    return xp.sum(hit * w) / xp.sum(w)


# ---------------------------------------------------------------------------------------------
# Sequencing paths.


def _solve(problem, c_min, *, method: str, k: int, criterion: str, cost_sensitive: bool):
    from jaxselect.sequencing import cs_fr, cs_omp, doubling

    if method == "omp":
        return cs_omp(problem, criterion=criterion, cost_sensitive=cost_sensitive, k=k)
    if method == "fr":
        return cs_fr(problem, cost_sensitive=cost_sensitive, k=k)
    return doubling(problem, c_min=c_min, k=k)


def _path_scores(path, X, Y, test_w, *, score: str):
    """(m+1,) held-out scores: the intercept-only model, then every prefix of ``path``."""
    null = _fold_score(Y, jnp.broadcast_to(path.null_intercept[None, :], Y.shape), test_w, score=score)

    Xp = path.columns(X)  # the slot columns of a gram=False (slot) path, X itself for a dense one

    def prefix(_, cb):
        coef, intercept = cb
        return None, _fold_score(Y, Xp @ coef + intercept[None, :], test_w, score=score)

    _, scores = jax.lax.scan(prefix, None, (path.coef, path.intercept))  # memory O(n·T), not O(m·n·T)
    return jnp.concatenate([null[None], scores])


@partial(jit, static_argnames=("method", "k", "criterion", "cost_sensitive", "whiten", "score"))
def _cv_weighted(X, Y, groups, train_w, test_w, l2, c_min, *, method, k, criterion, cost_sensitive, whiten, score):
    from jaxselect.sequencing.prepare import prepare

    def fold(tw, vw):
        problem = prepare(X, Y, groups, l2=l2, whiten=whiten, sample_weight=tw)
        path = _solve(problem, c_min, method=method, k=k, criterion=criterion, cost_sensitive=cost_sensitive)
        return path.order, path.cum_cost, _path_scores(path, X, Y, vw, score=score), path.status

    return jax.vmap(fold)(train_w, test_w)


def _cv_sparse(X, Y, groups, train_w, test_w, l2, c_min, *, method, k, criterion, cost_sensitive, whiten, score):
    """:func:`_cv_weighted` for a sparse (canonical CSR) X: one fold after the other. A fold whose
    training rows leave fewer than ``k`` usable groups (a column constant on them) sequences those
    and is padded, as the dense folds are, with steps that take nothing (order −1, cost +inf)."""
    from jaxselect.sequencing.engine import usable_groups
    from jaxselect.sequencing.prepare import prepare

    outs = []
    for tw, vw in zip(train_w, test_w):
        problem = prepare(X, Y, groups, l2=l2, whiten=whiten, sample_weight=tw)
        n_usable = usable_groups(problem.groups, problem.live)
        steps = k if n_usable is None else max(1, min(k, n_usable))
        path = _solve(problem, c_min, method=method, k=steps, criterion=criterion, cost_sensitive=cost_sensitive)
        order, cum_cost = host_array(path.order), host_array(path.cum_cost)
        scores = host_array(_sparse_path_scores(path, X, Y, vw, score=score))
        pad = k - order.shape[0]
        if pad > 0:  # scores of steps never within a budget (cost +inf): the last prefix's
            order = np.concatenate([order, np.full(pad, -1, order.dtype)])
            cum_cost = np.concatenate([cum_cost, np.full(pad, np.inf, cum_cost.dtype)])
            scores = np.concatenate([scores, np.repeat(scores[-1:], pad)])
        outs.append((order, cum_cost, scores, host_array(path.status)))
    return tuple(np.stack([o[i] for o in outs]) for i in range(4))


def _sparse_path_scores(path, X, Y, test_w, *, score: str):
    """(m+1,) held-out scores of :func:`_path_scores` on a sparse X (predictions by scipy's product)."""
    coef = host_array(path.coef)  # (m, D or P, T)
    d = X.shape[1]
    if path.features is None:
        cols = X
    else:  # slot path: the P slot columns; an empty slot (index D) multiplies a zero coefficient
        features = host_array(path.features)
        cols = X[:, np.minimum(features, d - 1)]
        coef = coef * (features < d).astype(coef.dtype)[None, :, None]
    m, p, T = coef.shape
    pred = (cols @ coef.transpose(1, 0, 2).reshape(p, m * T)).reshape(-1, m, T).transpose(1, 0, 2)
    pred = pred.astype(coef.dtype, copy=False) + host_array(path.intercept)[:, None, :]
    Y, w = np.asarray(host_array(Y), np.float64), np.asarray(host_array(test_w), np.float64)
    null = np.broadcast_to(host_array(path.null_intercept)[None, :], Y.shape)
    return np.array([_fold_score(Y, np.asarray(P, np.float64), w, score=score, xp=np) for P in [null, *pred]])


def _budget_grid(cum_cost: np.ndarray, dtype) -> np.ndarray:
    """0 and every finite cumulative cost, ascending, near-duplicates (within the budget tolerance) merged."""
    values = np.unique(np.concatenate([[0.0], cum_cost[np.isfinite(cum_cost)].astype(np.float64)]))
    rtol = budget_rtol(dtype)
    keep = [values[0]]
    for v in values[1:]:
        if v > keep[-1] * (1.0 + rtol):
            keep.append(v)
    return np.asarray(keep)


def _steps_within(cum_cost: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """(K, B) number of prefixes of each fold within each budget (the rule of ``predict``)."""
    dtype = cum_cost.dtype
    cap = (grid.astype(dtype) * dtype.type(1.0 + budget_rtol(dtype))).astype(dtype)
    return np.sum(cum_cost[:, None, :] <= cap[None, :, None], axis=2)


def _summarise(grid, scores, *, fold_order=None, fold_cum_cost=None, fold_path_scores=None, status=0) -> CVResult:
    scores = np.asarray(scores, np.float64)
    K = scores.shape[0]
    mean = scores.mean(axis=0)
    std = scores.std(axis=0)
    sem = scores.std(axis=0, ddof=1) / np.sqrt(K) if K > 1 else np.zeros_like(mean)
    if not np.all(np.isfinite(mean)):
        mean_for_choice = np.where(np.isfinite(mean), mean, -np.inf)
    else:
        mean_for_choice = mean
    best = int(np.argmax(mean_for_choice))  # first maximum: the smallest grid point on ties
    threshold = mean_for_choice[best] - sem[best]
    one_se = int(np.flatnonzero(mean_for_choice >= threshold)[0])
    return CVResult(
        grid=np.asarray(grid),
        scores=scores,
        mean=mean,
        std=std,
        sem=sem,
        best_index=best,
        best=float(grid[best]),
        index_1se=one_se,
        best_1se=float(grid[one_se]),
        fold_order=fold_order,
        fold_cum_cost=fold_cum_cost,
        fold_path_scores=fold_path_scores,
        status=int(status),
    )


@any_mesh
def cross_validate_path(
    X,
    y,
    groups=None,
    k=None,
    *,
    method: str = "omp",
    folds=5,
    budgets=None,
    l2=1e-5,
    whiten: bool = True,
    criterion: str = "whiten",
    cost_sensitive: bool = True,
    c_min=None,
    score: str = "r2",
    sample_weight=None,
) -> CVResult:
    """K-fold cross-validation of a sequencing path: held-out score against budget, in one call.

    For each fold f, ``prepare(X, y, groups, sample_weight=train_f)`` and the solver give the fold's
    anytime path; every prefix (and the intercept-only model) is scored on the fold's held-out rows;
    the score at budget B is that of the longest prefix with cumulative cost ≤ B. All folds run in
    one jitted ``jax.vmap`` over the 0/1 training masks of the same X (so unequal folds share one
    program, compiled once per shape of X).

    Args:
      X: (n, D) raw features (concrete: the folds are built on the host); may be row-sharded on any
        mesh (see :func:`jaxselect.shard_rows`): the folds are row weights of the same sharded X.
        Or sparse (``scipy.sparse``, BCOO/BCSR): the folds then run one after the other (see the
        module docstring).
      y: (n,) or (n, T) regression targets.
      groups: None, (D,) group ids, or a :class:`jaxselect.Groups` with costs (budgets are in its
        cost units; with unit costs a budget is a number of groups).
      method: "omp" (:func:`jaxselect.cs_omp`), "fr" (:func:`jaxselect.cs_fr`) or "doubling"
        (:func:`jaxselect.doubling`).
      folds: an int K (scikit-learn's ``KFold(K)``, unshuffled), an (n,) array of fold ids, or a
        sequence of ``(train_indices, test_indices)`` (e.g. ``list(StratifiedKFold(5).split(X, y))``);
        see :func:`fold_masks`.
      budgets: (B,) budgets ≥ 0 to evaluate; default: 0 and every cumulative cost some fold reaches
        (the mean curve takes all its values there).
      k: number of groups each fold sequences (default all J).
      l2, whiten: as in :func:`jaxselect.prepare` (``l2`` may not be traced here).
      criterion, cost_sensitive: as in :func:`jaxselect.cs_omp` (``cost_sensitive`` also for "fr").
      c_min: Doubling's first cap (default the cheapest cost).
      score: "r2" (held-out R², averaged over targets, as scikit-learn's ``r2_score``) or "neg_mse".
      sample_weight: None or (n,) row weights ≥ 0: fold f trains on ``train_f · w`` and is scored
        with the weights ``test_f · w`` (integer weights equal repeated rows within each fold).

    Returns:
      A :class:`CVResult` with ``grid`` = the budgets, ``best`` the budget maximising the mean
      held-out score and ``best_1se`` the smallest budget within one standard error of it.

    Raises:
      ValueError: an unknown ``method`` or ``scoring``, ``folds`` < 2 or folds that do not
        partition the rows, negative budgets, and the data errors of :func:`jaxselect.prepare`.

    >>> import numpy as np, jaxselect as js
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(103, 6))
    >>> y = X[:, 0] - 2 * X[:, 3] + 0.5 * rng.normal(size=103)
    >>> cv = js.cross_validate_path(X, y, folds=5)
    >>> cv.grid.tolist(), cv.best, cv.scores.shape
    ([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 2.0, (5, 7))
    """
    check_choice(method, "method", METHODS)
    check_choice(criterion, "criterion", OMP_CRITERIA)
    check_choice(score, "score", REGRESSION_SCORES)
    if is_traced((X, y)):
        raise ValueError("cross_validate_path builds its folds on the host: call it outside jax.jit/vmap")
    sparse = is_sparse(X)
    X = as_sparse_csr(X, "X", min_rows=2 * MIN_ROWS) if sparse else as_float_matrix(X, "X", min_rows=2 * MIN_ROWS)
    n, d = X.shape
    Y, _ = as_targets(y, n, "y", dtype=X.dtype)
    groups = as_groups(groups, d, dtype=X.dtype)
    if k is None:
        steps = groups.n_groups
    else:  # above the usable groups of X: the library's one rule (a UserWarning, all of them kept)
        host = HostSparseDesign.raw(X) if sparse else HostDesign.raw(X, X.dtype)
        w = None if sample_weight is None else np.asarray(sample_weight, X.dtype)
        steps = clip_steps(k, groups, host.summarize(w)[0].live, "cross_validate_path")
    l2 = as_hyper(l2, "l2", X.dtype, low=0.0)
    c_min = groups.costs.min() if c_min is None else as_hyper(c_min, "c_min", X.dtype, low=0.0, strict_low=True)
    c_min = jnp.asarray(c_min, X.dtype)
    train, test, _ = _fold_weights(*fold_masks(folds, n), sample_weight, n)
    options = {
        "method": method,
        "k": steps,
        "criterion": criterion,
        "cost_sensitive": bool(cost_sensitive),
        "whiten": bool(whiten),
        "score": score,
    }
    dt = X.dtype
    run = _cv_sparse if sparse else _cv_weighted
    out = run(X, Y, groups, as_device(train, dt), as_device(test, dt), l2, c_min, **options)
    order, cum_cost, path_scores, status = (host_array(a) for a in out)
    if budgets is None:
        grid = _budget_grid(cum_cost, cum_cost.dtype)
    else:
        grid = np.asarray(budgets, np.float64)
        if grid.ndim != 1 or grid.size < 1 or not np.all(np.isfinite(grid)) or np.any(grid < 0):
            raise ValueError("budgets must be a non-empty 1-D array of finite budgets >= 0")
        grid = np.unique(grid)
    counts = _steps_within(cum_cost, grid)
    scores = np.take_along_axis(path_scores, counts, axis=1)
    return _summarise(
        grid,
        scores,
        fold_order=order,
        fold_cum_cost=cum_cost,
        fold_path_scores=path_scores,
        status=int(np.bitwise_or.reduce(status.astype(np.int32))) if status.size else OK,
    )


# ---------------------------------------------------------------------------------------------
# FSA over a grid of k.

@partial(jit, static_argnames=("k", "score", "options"))
def _cv_fsa(X, y, rows, row_w, test_w, l2, *, k, score, options):
    # The folds score the schedule's own fit (polish=False): XLA's CPU compiler crashed compiling the
    # polish's Newton solve vmapped over folds on a two-column problem; the final fit is polished.
    opts = _fsa_keywords(dict(options), polish=False)

    def fold(r, rw, vw):
        res = fsa(X[r], y[r], k, l2=l2, sample_weight=rw, **opts)
        s = fsa_predict(res, X)
        if score == "accuracy":
            return _accuracy(y, s, vw), res.status
        return _fold_score(y[:, None], s[:, None], vw, score=score), res.status

    return jax.vmap(fold, in_axes=(0, None if row_w is None else 0, 0))(rows, row_w, test_w)


def _fsa_keywords(opts: dict, **extra) -> dict:
    """The keywords of :func:`jaxselect.fsa` for cross_validate_fsa's options (FSA's records: the
    huberized hinge's h in its loss, the piecewise-linear learner)."""
    loss = opts["loss"]
    if loss == "huber_hinge":
        loss = HuberHinge(opts["huber_h"])
    learner = None if opts["bins"] is None else PiecewiseLinear(opts["bins"], opts["smoothness"])
    return dict(loss=loss, n_iter=opts["n_iter"], mu=opts["mu"], lr=opts["lr"], learner=learner, **extra)


@partial(jit, static_argnames=("score", "options", "plan"))
def _cv_fsa_linear(X, y, rows, row_w, test_w, l2, schedule, n_iter, lr, *, score, options, plan):
    """:func:`_cv_fsa` for linear learners with the schedule as data: every k of the grid shares this
    program (the stages of the largest k, ``plan``). Each fold runs
    :func:`jaxselect.fsa`'s compiled schedule (:func:`~jaxselect.anneal.run.run`, stage bounds
    computed from ``schedule`` in the program) and scores its k survivors — the coefficients of
    the columns still active at the end, in raw feature space — on the held-out rows."""
    opts = dict(options)

    def fold(r, rw, vw):
        problem = fsa_prepare(X[r], y[r], loss=opts["loss"], sample_weight=rw, l2=l2, huber_h=opts["huber_h"])
        state, cols, objective, _, mean, inv_scale, _ = run_schedule(problem, schedule, n_iter, lr, plan=plan)
        coef = jnp.where(state.active, state.coef[:, 0], jnp.zeros((), state.coef.dtype)) * inv_scale
        intercept = state.intercept - jnp.dot(mean, coef)
        s = jnp.take(X, cols, axis=1) @ coef + intercept
        ran = jnp.where(jnp.arange(objective.shape[0], dtype=jnp.int32) < n_iter, objective, jnp.zeros((), objective.dtype))
        finite = jnp.isfinite(ran).all() & jnp.isfinite(coef).all() & jnp.isfinite(intercept)
        status = jnp.where(finite, OK, NONFINITE).astype(jnp.int32)
        if score == "accuracy":
            return _accuracy(y, s, vw), status
        return _fold_score(y[:, None], s[:, None], vw, score=score), status

    return jax.vmap(fold, in_axes=(0, None if row_w is None else 0, 0))(rows, row_w, test_w)


def _linear_schedule_args(m: int, k: int, k_max: int, options: dict, dtype, n_train: int):
    """``(schedule, n_iter, lr, plan)`` of :func:`_cv_fsa_linear` for one k ≤ ``k_max`` (as
    :func:`jaxselect.fsa` builds them for a fold of ``n_train`` rows, with the stages of ``k_max``:
    with a fixed step FSA's result does not depend on the compaction widths, so every k of the
    grid shares one program)."""
    n_iter, lr = options["n_iter"], options["lr"]
    cap = iteration_cap(n_iter)
    padded = np.full((cap,), k, np.int32)
    padded[:n_iter] = annealing_schedule(m, k, n_iter, options["mu"]).astype(np.int32)
    widths = fsa_stage_widths(m, k_max, shared=small_dense(n_train, m, dtype))
    plan = RunPlan(widths, cap, "power" if lr is None else "fixed", options["loss"] == "squared")
    lr = jax.device_put(np.asarray(0.0 if lr is None else lr, dtype))
    return jax.device_put(padded), jax.device_put(np.int32(n_iter)), lr, plan


@any_mesh
def cross_validate_fsa(
    X,
    y,
    ks,
    *,
    folds=5,
    loss: str = "squared",
    n_iter: int | str = "auto",
    mu: float = 300.0,
    lr=None,
    l2="auto",
    bins=None,
    smoothness: float = 0.0,
    score: str | None = None,
    sample_weight=None,
    scale: str = "auto",
    polish: Polish | None = None,
    **deprecated,
) -> CVResult:
    """K-fold cross-validation of :func:`jaxselect.fsa` over a grid of k.

    For each k one jitted call runs FSA on every fold at once (``jax.vmap`` over the folds' training
    rows) and scores the fits on the held-out rows. Each fold's fit is :func:`jaxselect.fsa` on its
    gathered training rows, so folds are batched by training-set size: one call per k for equal
    folds, two for ``KFold`` with ``n % K ≠ 0``. Every k is a separate compiled program (the schedule depends on k).

    Args:
      X: (n, M) raw features (concrete; may be row-sharded on any mesh — each fold's training rows
        are gathered into a copy for its fits). Or sparse (``scipy.sparse``, BCOO/BCSR; linear
        learners only, ``bins=None``): each fold is then a fit on the whole sparse X with the fold's
        0/1 training weights (weight-0 rows are left out), one fold after the other.
      y: (n,) targets (``loss="squared"``), binary labels in {0, 1}, {−1, +1} or bool
        (``"logistic"``, ``"huber_hinge"``, ``"lorenz"``), or class labels 0..C−1 (``"softmax"``).
      ks: the k values to try (integers ≥ 1, at most the number of non-constant columns).
      folds: as in :func:`cross_validate_path`.
      loss: as in :func:`jaxselect.fsa`: ``"squared"``, ``"logistic"``, ``"huber_hinge"`` (or
        ``js.losses.HuberHinge(h)``), ``"lorenz"``, or ``"softmax"`` (alias ``"multinomial"``: the
        multiclass loss, one support shared by the classes; every class present in every fold's
        training rows — use stratified folds).
      n_iter, mu, lr, l2, bins, smoothness: as in :func:`jaxselect.fsa` (``"auto"``: decided by
        the data, :mod:`jaxselect.anneal.defaults`; ``l2="auto"`` per fold, from its k and its
        training rows' weight).
      score: "r2" or "neg_mse" for the squared loss (default "r2"), "accuracy" for the
        classification losses (their default; the arg-max class for ``"softmax"``).
      sample_weight: None or (n,) row weights ≥ 0: each fold's fit gets its training rows'
        weights (:func:`jaxselect.fsa`'s ``sample_weight``), its held-out score their weights.
      scale: the column scaling of linear learners, as in :func:`jaxselect.fsa` (``"auto"``,
        ``"std"``, ``"sparse"`` or ``"log1p"``; each fold's held-out scores map X as its fit did).
      polish: None or a :class:`~jaxselect.anneal.Polish` record (``l1``, ``refine``, ``tol``,
        ``max_iter``), as in :func:`jaxselect.fsa`.

    How the folds run: dense X with the defaults (``scale="auto"`` on an X without indicator
    columns, or ``"std"``; no ``polish`` record; a binary or squared loss) runs every fold at once
    per k (``jax.vmap``) and scores the schedule's own fit; sparse X, indicator columns under
    ``scale="auto"``, ``scale="sparse"``, a ``polish`` record or the softmax loss run the folds one after
    the other, each a :func:`jaxselect.fsa` call on the whole X with the fold's training weights
    (weight-0 rows are left out; the same compiled program for every fold of a k), scoring its
    polished fit — the fit the estimators keep.

    Deprecated keyword (a ``DeprecationWarning``, the same result): ``huber_h`` (pass
    ``loss=js.losses.HuberHinge(h)``).

    Returns:
      A :class:`CVResult` with ``grid`` = the sorted distinct ks (``fold_*`` fields None).

    Raises:
      ValueError: ``ks`` entries < 1 or above the number of features, ``folds`` < 2, and the data
        errors of :func:`jaxselect.fsa`.

    >>> import numpy as np, jaxselect as js
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(60, 10))
    >>> y = X[:, 3] - 2 * X[:, 7] + 0.3 * rng.normal(size=60)
    >>> cv = js.cross_validate_fsa(X, y, [1, 2], n_iter=50)
    >>> cv.best, cv.scores.shape
    (2.0, (5, 2))
    """

    old = take_deprecated("cross_validate_fsa", deprecated, ("huber_h",), stacklevel=3)
    huber_h = old.get("huber_h", 0.1)
    if isinstance(loss, HuberHinge):
        if "huber_h" in old:
            raise TypeError("give h in loss=HuberHinge(h) or as huber_h=, not both")
        loss, huber_h = "huber_hinge", loss.h
    pointwise = loss_names(fsa=True, pointwise=True)
    if isinstance(loss, str) and loss in SOFTMAX_LOSSES:
        loss = "softmax"
    if not isinstance(loss, str) or loss not in pointwise + ("softmax",):
        raise ValueError(f"loss must be one of {pointwise + SOFTMAX_LOSSES}; got {loss!r}")
    check_scale_rule(scale)
    if polish is not None and not isinstance(polish, Polish):
        raise TypeError(f"polish must be None or a js.anneal.Polish record; got {polish!r}")
    classify = loss != "squared"
    score = ("accuracy" if classify else "r2") if score is None else score
    check_choice(score, "score", ("accuracy",) if classify else REGRESSION_SCORES)
    if is_traced((X, y)):
        raise ValueError("cross_validate_fsa builds its folds on the host: call it outside jax.jit/vmap")
    sparse = is_sparse(X)
    if sparse and bins is not None:
        raise ValueError(
            "cross_validate_fsa: piecewise-linear learners (bins) do not run on sparse X (their basis values are "
            "centred, so every entry of the encoded design is non-zero: it would be dense, n x M x (bins + 1)); use "
            "bins=None (linear learners) for sparse X, or X.toarray() if it fits in memory"
        )
    host = X if type(X) is np.ndarray and X.nbytes <= HOST_SUMMARY_MAX_BYTES else None  # its summary: on the host
    X = as_sparse_csr(X, "X", min_rows=2 * MIN_ROWS) if sparse else as_float_matrix(X, "X", min_rows=2 * MIN_ROWS)
    n, m = X.shape
    y = host_array(y)  # (n,) on the host (gathered when its rows span processes)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must have shape ({n},) or ({n}, 1); got {np.shape(y)}")
    if loss == "softmax":
        y = class_labels(y, n)[0]
    elif classify:
        from jaxselect._validation import as_binary_labels

        y = np.asarray(as_binary_labels(y, n, "y", dtype=X.dtype)).reshape(-1)
        y = (y > 0).astype(np.dtype(X.dtype))  # {0, 1}: FSA reads labels as y > 0 under trace
    else:
        y = np.asarray(as_targets(y, n, "y", dtype=X.dtype)[0])[:, 0]
    try:
        grid = sorted({check_int(kk, "ks entries", low=1, high=m) for kk in np.atleast_1d(np.asarray(ks)).tolist()})
    except TypeError:
        raise TypeError(f"ks must be a sequence of integers k ≥ 1; got {ks!r}") from None
    if not grid:
        raise ValueError("ks must name at least one k")
    if is_auto(n_iter):
        n_iter = auto_n_iter(X)
    if is_auto(scale) and not sparse and not has_indicator_columns(X):
        scale = "std"  # the same fit: "auto" is "std" on columns without a single non-zero value
    fold_by_fold = sparse or loss == "softmax" or scale != "std" or polish is not None
    if is_auto(l2) and not fold_by_fold:
        l2 = 0.0  # "auto" is a ridge on sparse counts (scale "log1p") only: those folds run one by one
    if not is_auto(l2):
        l2 = as_hyper(l2, "l2", X.dtype, low=0.0)
    options = (
        ("loss", loss),
        ("n_iter", n_iter),
        ("mu", mu),
        ("lr", lr),
        ("bins", bins),
        ("smoothness", smoothness),
        ("huber_h", huber_h),
    )
    train, test = fold_masks(folds, n)
    train, test, w = _fold_weights(train, test, sample_weight, n)
    # the vmapped fits skip value checks
    _check_fsa_options(X, max(grid), dict(options), w=w, host=host)
    if fold_by_fold:
        # the folds one after the other, each a polished fsa call (train: the folds' weights)
        return _cv_fsa_sparse(X, y, grid, train, test, l2, score, options, scale=scale, polish=polish)
    train = train > 0
    K = train.shape[0]
    scores = np.zeros((K, len(grid)))
    status = 0
    Xj, yj = X, as_device(y)
    if bins is None:  # linear learners: one program for every k and every fold
        rows, rw = _padded_rows(train, w, X.dtype)
        test_w = as_device(test, X.dtype)
        for b, kk in enumerate(grid):
            *sched, plan = _linear_schedule_args(m, kk, max(grid), dict(options), X.dtype, rows.shape[-1])
            sc, st = _cv_fsa_linear(Xj, yj, rows, rw, test_w, l2, *sched, score=score, options=options, plan=plan)
            scores[:, b] = host_array(sc)
            status |= int(np.bitwise_or.reduce(host_array(st).astype(np.int32)))
        return _summarise(np.asarray(grid, np.float64), scores, status=status)
    for b, kk in enumerate(grid):
        for bucket in _size_buckets(train):
            rows = _gathered_rows(train, bucket)
            rw = None if w is None else as_device(w[rows], X.dtype)
            test_w = as_device(test[bucket], X.dtype)
            sc, st = _cv_fsa(Xj, yj, as_device(rows), rw, test_w, l2, k=kk, score=score, options=options)
            scores[bucket, b] = host_array(sc)
            status |= int(np.bitwise_or.reduce(host_array(st).astype(np.int32)))
    return _summarise(np.asarray(grid, np.float64), scores, status=status)


def _cv_fsa_sparse(X, y, grid, train_w, test_w, l2, score: str, options, *, scale="std", polish=None) -> CVResult:
    """:func:`cross_validate_fsa` fold by fold (a sparse (canonical CSR) X, or the options the
    vmapped path does not run): for each k, the folds one after the other, each an FSA fit on the
    whole X with the fold's training weights (one compiled program per k).

    X is padded to its shape buckets first (zero-weight rows, zero columns the
    schedule does not count: :func:`jaxselect.design.buckets.pad_design`), so data sets of nearby
    shapes share the compiled fits; the held-out scores are computed on the host."""
    opts = _fsa_keywords(dict(options), scale=scale)
    if polish is not None:
        opts["polish"] = polish
    n, dt = X.shape[0], X.dtype
    X_fit, y_fit, _ = pad_design(X, y, None, columns=dict(options)["bins"] is None)
    if X_fit.shape[1] != X.shape[1]:
        opts["execution"] = Execution(padded_columns=X_fit.shape[1] - X.shape[1])
    train_fit = np.pad(train_w, ((0, 0), (0, X_fit.shape[0] - n))).astype(dt)  # appended rows: weight 0
    y64 = np.asarray(y, np.float64)
    scores = np.zeros((train_w.shape[0], len(grid)))
    status = 0
    for b, kk in enumerate(grid):
        for f in range(train_w.shape[0]):
            res = fsa(X_fit, y_fit, kk, l2=l2, sample_weight=train_fit[f], **opts)
            support = host_array(res.support)
            cols = apply_transform(X[:, support], result_transform(res))  # the values its fit saw
            s = np.asarray(cols @ host_array(res.coef)).astype(dt) + host_array(res.intercept)
            scores[f, b] = _host_score(y64, np.asarray(s, np.float64), np.asarray(test_w[f], np.float64), score)
            status |= int(host_array(res.status))
    return _summarise(np.asarray(grid, np.float64), scores, status=status)


def _host_score(y, s, w, score: str) -> float:
    """One fold's held-out score on the host (float64 numpy, no compiled program): y (n,) targets
    or labels, s (n,) predictions or scores (or (n, C) class scores), w (n,) test weights."""
    if s.ndim == 2:  # softmax: the weighted share of held-out rows whose arg-max class is right
        return float(np.sum(w * (np.argmax(s, axis=1) == y)) / np.sum(w))
    if score == "accuracy":
        return float(_accuracy(y, s, w, xp=np))
    return float(_fold_score(y[:, None], s[:, None], w, score=score, xp=np))


def _check_fsa_options(X, k_max: int, options: dict, *, w=None, host=None) -> None:
    """Run FSA's own option and data checks (k against the columns not constant on the rows of
    positive weight ``w``, None: all rows) before vmapping; ``host``: X's numpy array, whose column
    summary is then taken on the host (no program per shape)."""
    validate_fsa_options(
        X.shape,
        k_max,
        options["n_iter"],
        options["mu"],
        options["lr"],
        None,
        options["bins"],
        options["smoothness"],
        options["huber_h"],
    )
    if is_sparse(X):
        summary = HostSparseDesign.raw(X).summarize(w)[0]
    elif host is not None:
        summary = HostDesign.raw(host, X.dtype).summarize(w)[0]
    else:
        summary = column_summary(X, None if w is None else as_device(w, X.dtype))
    live = host_array(summary.live)
    if k_max > int(live.sum()):
        raise ValueError(
            f"ks holds k={k_max} but X has only {int(live.sum())} non-constant columns; choose k <= {int(live.sum())}"
        )


# js.predict refuses a CVResult (scores, not a model) and says what to do instead
_predict.refuse(
    CVResult,
    "a CVResult holds cross-validated scores, not a model: refit at the chosen point (cv.best or "
    "cv.best_1se) on all the data and predict with that result",
)
