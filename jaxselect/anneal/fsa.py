"""Feature Selection with Annealing (FSA): the public solver, its validation and the problem builder.

Barbu, She, Ding & Gramajo, "Feature Selection with Annealing for Computer Vision and Big Data
Learning" — Algorithm 1: from β = 0, alternate a gradient step ``β ← β − η ∇L(β)`` (eq. 2) and
"keep only the M_e variables with the highest |β_j|" with the schedule of eq. (3), so that k
variables are left at the end. Losses: squared (4), logistic (6), huberized hinge (7), Lorenz (8),
pairwise ranking (9) (see :mod:`jaxselect.losses`), with the shrinkage prior ``s‖β‖²`` and, for the
piecewise-linear learners of §2.5.1 (eqs. 12, 15), the second-order smoothness prior of eq. (13);
the selection criterion of a multi-parameter feature is the norm of its coefficient vector.

Implementation (DESIGN.md §5). The objective is mean-normalised, with the library's ``l2``
convention (mean loss + (l2/2)·‖coefficients‖²),

    F(c, b) = mean-loss(A c + b) + (l2/2) ‖c‖² + smoothness Σ_j ‖D₂ c_j‖²,

with ``A`` the standardized linear design (columns centered and scaled to unit variance, never
materialised) or the centered PL design, and b an intercept that is never penalised nor removed.
Constant columns (max == min, the library's one rule) are inert: they start inactive, are never
selected and keep coefficient 0.

Solver protocol (:mod:`.step`): :func:`fsa_prepare` validates and standardizes the data into an
:class:`~jaxselect.anneal.FSAProblem` (with its static options), :func:`~jaxselect.anneal.fsa_init`
gives the :class:`~jaxselect.anneal.FSAState` at β = 0 and :func:`~jaxselect.anneal.fsa_step` is
one iteration of Algorithm 1. :func:`fsa` runs the same iteration over the whole schedule as *one
compiled program* (:mod:`.run`): stages whose widths depend only on M and the k-bucket
(successive halvings), the kept columns gathered into a smaller array between stages, so the
work is about the schedule's area (Table I) instead of ``M·N_iter``; ``mu``, ``lr``, ``n_iter``,
``l2`` and ``smoothness`` are data of that program, not part of its shape.

Ties in ``|β_j|`` are broken towards the lower feature index (stable sort); kept columns stay in
ascending index order, so the result does not depend on compaction: driving
:func:`~jaxselect.anneal.fsa_step` on the full width gives the iterates of :func:`fsa`.

Differentiability: the returned ``coef``/``intercept``/``loss_path`` are differentiable with
respect to X, y, ``l2`` (and anything a callable loss closes over) with the support treated as
fixed: ``loss_path`` (and unpolished coefficients) through the unrolled iterations, polished
coefficients by implicit differentiation of the converged fit (:mod:`.polish`) — the support
itself is piecewise constant in the data (zero derivative almost everywhere). ``fsa`` can be called inside ``jax.jit``/``jax.grad``/
``jax.vmap``: value checks (NaN, labels, pair ranges, constant columns) are then skipped because
they need concrete values, and the stages run as scans of static length (see :mod:`.run`).
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._repr import short_repr
from .._validation import (
    as_binary_labels,
    as_float_matrix,
    as_hyper,
    as_vector_target,
    check_constant_mode,
    check_targets,
    raise_nonfinite,
    scale_error,
    check_float,
    check_int,
    check_result_type,
    clip_k,
    check_scale,
    float_dtype_for,
    host_array,
    host_value,
    is_traced,
)
from .. import losses as _losses
from .._progress import check_progress, progress_bar
from ..design import Data, as_data, as_sample_weight, as_sparse_csr, check_constant_columns, is_sparse
from ..design.boundary import HOST_SUMMARY_MAX_BYTES
from ..design.operators import on_one_device
from .._predict import check_predictions, host_predictions
from ..programs import jit
from ..design.stream import ArraySource, as_stream_source, stream_kind, stream_summary, subsample_rows
from .._memory import release_free_memory
from ..sharding import any_mesh
from ..status import OK, status_message
from .design import PLDesign
from .piecewise import PLGrid, pl_basis_mean, pl_encode, pl_grid, pl_scores
from .defaults import auto_l2, is_auto, resolve_defaults
from .scaling import LOG1P, apply_transform, check_scale_rule, log1p_values, rescale_design, result_transform
from .options import Execution, PiecewiseLinear, Polish, SPELLING, as_execution, as_learner, as_polish, take_deprecated
from .polish import POLISH_MAX_ITER, compacts_support, merge_status, polish_prepared, polish_problem, polish_tol
from .refine import refine_support
from .multiclass import SOFTMAX_LOSSES, check_softmax_options, class_labels, softmax_run, sum_zero_basis
from .run import Finishing, RunPlan, finish_program, iteration_cap, run, solve, stage_bounds, subsample_design
from .solver import FSAOutput, iteration_work, ticking
from .schedule import SHARED_WIDTH, annealing_schedule, plan_stages, stage_widths
from .checkpoint import fingerprint
from .stream import (
    MEMORY_FACTOR, STREAM_LOSSES, RowLoss, StreamRun, StreamedDesign, check_max_memory, check_mesh, check_streamable,
    memory_stage, stream_fsa,
)
from .step import (
    CLASSIFICATION_LOSSES,
    LOSSES,
    FSAProblem,
    check_loss,
    check_optimizer,
    make_config,
    resolve_loss,
)
from .stepsize import WeightedTarget

__all__ = ["FSAResult", "fsa", "fsa_predict", "fsa_prepare", "validate_fsa_options", "LOSSES"]

# a halving of the stage width that drops fewer columns than this is skipped (tiny problems:
# each stage adds to the compiled program more than it saves)
_MIN_DROP = 32
# a concrete sparse X with at least this many stored entries hands freed memory back between phases
_LARGE_ENTRIES = 1 << 22
#: an in-memory design of at most this many bytes (dense N·M, or a sparse X's stored entries with
#: their indices) is *small*: its last stage is at least min(:data:`~jaxselect.anneal.schedule.SHARED_WIDTH`,
#: ⌈M/4⌉) wide, so every k up to that shares one compiled program (compiling is most of such a fit)
SHARED_WIDTH_BYTES = 64 << 20


def schedule_plan(m: int, k: int, n_iter: int, mu: float, m_schedule: int | None = None, *, shared: bool = False):
    """``(schedule, padded, widths)`` of a run: the (n_iter,) int32 M_e of eq. (3), the same padded
    with k to :func:`~jaxselect.anneal.run.iteration_cap` (the program's buffer), and the stage
    widths (:func:`fsa_stage_widths`); host values, for the in-memory and the streamed runs alike.
    ``m_schedule``: the M of eq. (3) when X's width m holds padding columns (default m)."""
    schedule = annealing_schedule(m if m_schedule is None else m_schedule, k, n_iter, mu).astype(np.int32)
    padded = np.full((iteration_cap(n_iter),), k, np.int32)
    padded[:n_iter] = schedule
    return schedule, padded, fsa_stage_widths(m, k, shared=shared)


def fsa_stage_widths(n_features: int, k: int, *, shared: bool = False) -> tuple[int, ...]:
    """The compacted stage widths :func:`fsa` runs for M = ``n_features`` and ``k``
    (:func:`~jaxselect.anneal.stage_widths` with FSA's minimum drop; ``shared``: a small design's,
    the last stage at least min(:data:`~jaxselect.anneal.schedule.SHARED_WIDTH`, ⌈M/4⌉) wide, and
    only M and that stage when M is at most :data:`TWO_STAGE_RATIO` times its width).

    >>> fsa_stage_widths(3072, 25), fsa_stage_widths(3072, 25, shared=True)
    ((3072, 768, 384, 192, 96, 48, 28), (3072, 256))
    """
    # M/4: the first compaction's width anyway (stage_widths skips M/2), so the floor merges only
    # the narrower stages, and a wide run's tail stays narrow
    widths = stage_widths(n_features, k, _MIN_DROP, min(SHARED_WIDTH, -(-int(n_features) // 4)) if shared else 0)
    if shared and len(widths) > 2 and widths[0] <= TWO_STAGE_RATIO * widths[-1]:
        widths = (widths[0], widths[-1])
    return widths


#: a small design at most this many times as wide as its last stage runs two stages, M and the last
#: width: at the default μ the schedule of eq. (3) passes the halvings between them within a few
#: iterations, and each stage adds a loop, a compaction and a step estimate to the compiled run (the
#: TF-IDF folds of 960 × 3 072: four stages compiled in 0.49 s, two in 0.32 s, the fits as fast)
TWO_STAGE_RATIO = 16


#: a sparse X's stage of width W runs on a dense (N, W) copy when that takes at most this many bytes
#: and N·W is at most :data:`DENSE_STAGE_RATIO` times X's stored entries (:func:`dense_stage`)
DENSE_STAGE_BYTES = 32 << 20
#: inside the compiled run a compacted sparse stage still reads every stored entry, and XLA:CPU's
#: scatter-add costs about 100-200 dense multiply-adds per entry (measured: 960 × 3 000 TF-IDF, 30 000
#: entries, 155 µs per product pair sparse against 20 µs dense at W = 750); 64 leaves a margin
DENSE_STAGE_RATIO = 64


def dense_stage(design, widths, traced: bool) -> int | None:
    """The first stage (≥ 1) whose kept columns of a concrete sparse design on one device run on a
    dense (N, W) copy (:data:`DENSE_STAGE_BYTES`, :data:`DENSE_STAGE_RATIO`); None: none."""
    if traced or not hasattr(design, "densify") or getattr(design, "sharded", False):
        return None
    n, entries = int(design.shape[0]), int(design.nnz)
    itemsize = np.dtype(design.dtype).itemsize
    for i, width in enumerate(widths[1:], start=1):
        if n * width * itemsize <= DENSE_STAGE_BYTES and n * width <= DENSE_STAGE_RATIO * entries:
            return i
    return None


def small_dense(n, m: int, dtype) -> bool:
    """Whether N × M dense values take at most :data:`SHARED_WIDTH_BYTES` (False for an unknown N)."""
    return n is not None and int(n) * int(m) * np.dtype(dtype).itemsize <= SHARED_WIDTH_BYTES


def shares_widths(design) -> bool:
    """Whether a design is small (:data:`SHARED_WIDTH_BYTES`): its stages share one program across k
    (a streamed X of the same N × M runs the same stages, :func:`small_dense`)."""
    if getattr(design, "sparse", False):
        return int(design.nnz) * (np.dtype(design.dtype).itemsize + 8) <= SHARED_WIDTH_BYTES
    return small_dense(design.shape[0], design.shape[1], design.dtype)


# rows per block of the first (transposing) compaction of X
_GATHER_BLOCK = 1024
#: on the CPU backend, a numpy X in its compute dtype that jax cannot alias (a device copy would
#: double it) and at least this large runs its first stage from the host array (item "lean"; see ``_stream_input``)
LEAN_BYTES = 1 << 28
#: a lean run streams its stages until twice the working set is at most this fraction of X
LEAN_FRACTION = 0.25


class FSAResult(NamedTuple):
    """What :func:`fsa` returns.

    Attributes:
      support: (k,) int32 selected feature indices, ascending.
      coef: (k,) raw-space coefficients (linear learners), or (k, B+1) PL coefficients: the
        minimiser of F on the support (``polish``), else the schedule's last iterate.
      intercept: () intercept (raw space).
      loss_path: (n_iter,) objective F at the start of each iteration (loss + priors).
      n_kept: (n_iter,) int32 schedule M_e of eq. (3) (variables kept after iteration e).
      step_size: (n_stages,) gradient step of each compacted stage (:func:`~jaxselect.anneal.stage_widths`;
        a stage the schedule skips repeats the previous step; NaN with an optax optimizer).
      status: () int32, 0 = ok, else the flags of :mod:`jaxselect.status` (``NONFINITE`` = 1:
        non-finite loss or coefficients; ``NOT_CONVERGED`` = 4: the polish on the final support
        stopped at ``max_iter`` above its tolerance); ``js.raise_for_status(result)`` raises on it.
      x_min, bin_width: (k,) PL grid of the selected features (None for linear learners).
      basis_mean: (k, B+1) centering ū_j of the PL responses (None for linear learners).
      n_features: int, M, the number of columns of the training X (predictions need X of that
        width; None on a result built by hand).
      transform: None, or ``"log1p"``: the model was fitted on ``sign(x)·log(1 + |x|)`` of X's
        values (``scale="log1p"``, or ``"auto"`` on sparse count data), so ``coef`` applies to the
        transformed values; every prediction (:func:`jaxselect.predict`, the estimators) maps
        X's support columns the same way. A str, not an array: a result with a transform is
        not a ``jax.jit`` output.

    >>> import numpy as np, jaxselect as js
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 50)); y = X[:, 3] - 2 * X[:, 7]
    >>> res = js.fsa(X, y, 2, n_iter=100)       # an FSAResult
    >>> res.support.tolist(), res.coef.shape, res.loss_path.shape, int(res.status)
    ([3, 7], (2,), (100,), 0)
    """

    support: jax.Array
    coef: jax.Array
    intercept: jax.Array
    loss_path: jax.Array
    n_kept: jax.Array
    step_size: jax.Array
    status: jax.Array
    x_min: Any = None
    bin_width: Any = None
    basis_mean: Any = None
    n_features: Any = None
    transform: Any = None


FSAResult.__repr__ = short_repr


# --------------------------------------------------------------------------- validation
def _check_pairs(pairs, n, dtype):
    if pairs is None:
        raise ValueError("loss='ranking' needs pairs as its y: a (P, 3) array of rows (i, j, r_ij) or a tuple (ij, r)")
    if isinstance(pairs, tuple) and len(pairs) == 2:
        ij, r = pairs
    else:
        arr = pairs if isinstance(pairs, jax.Array) else np.asarray(pairs)
        if arr.ndim != 2 or arr.shape[1] != 3:
            raise ValueError(f"pairs must be a (P, 3) array of rows (i, j, r_ij); got shape {tuple(arr.shape)}")
        ij, r = arr[:, :2], arr[:, 2]
    if not is_traced((ij, r)):
        ij_np, r_np = np.asarray(ij), np.asarray(r, dtype=np.float64)
        if ij_np.ndim != 2 or ij_np.shape[1] != 2 or r_np.shape != (ij_np.shape[0],):
            raise ValueError(f"pairs: ij must be (P, 2) and r (P,); got {ij_np.shape} and {r_np.shape}")
        if ij_np.shape[0] < 1:
            raise ValueError("pairs is empty; give at least one (i, j, r_ij)")
        if not np.isfinite(ij_np.astype(np.float64)).all() or np.any(ij_np != np.round(ij_np)):
            raise ValueError("pair indices i, j must be whole numbers")
        if ij_np.min() < 0 or ij_np.max() >= n:
            raise ValueError(
                f"pair indices must lie in [0, {n - 1}] (rows of X); got range [{ij_np.min()}, {ij_np.max()}]"
            )
        if not np.isfinite(r_np).all() or r_np.min() < 0 or r_np.max() > 1:
            raise ValueError("pair targets r_ij must lie in [0, 1]")
    return jnp.asarray(ij).astype(jnp.int32), jnp.asarray(r).astype(dtype)


def host_binary_labels(y: np.ndarray, n: int, name: str, dtype) -> np.ndarray:
    """:func:`~jaxselect._validation.as_binary_labels` on a host array, in numpy: the same checks
    and messages, (n,) 0/1 labels in ``dtype``."""
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},) (binary labels, one per row of X); got {tuple(y.shape)}")
    if y.dtype == object or y.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold binary labels in {{0, 1}}, {{-1, +1}} or bool; got dtype {y.dtype}")
    # a bad y goes through as_binary_labels, which raises with the library's message before it
    # converts anything (a good y is converted here, in numpy: nothing compiled)
    values = np.unique(y.astype(np.float64))
    if values.size > 2 or not np.isfinite(values).all() or values.size < 2:
        as_binary_labels(y, n, name, dtype=dtype)  # raises with the library's message
    if not (set(values.tolist()) <= {0.0, 1.0} or set(values.tolist()) <= {-1.0, 1.0}):
        as_binary_labels(y, n, name, dtype=dtype)
    return (y > 0).astype(dtype)


def _check_target(y, n, dtype, loss, pairs):
    """The loss target: (n,) float targets, (n,) 0/1 float labels, pairs, or y for a callable.
    A concrete host y (not a ``jax.Array``) is checked and converted in numpy, then placed on the
    device (nothing compiled); the squared loss's targets must have squares the dtype holds."""
    if callable(loss):
        return jax.tree.map(jnp.asarray, y)
    if loss == "squared":
        if y is None:
            raise ValueError(f"loss='squared' needs regression targets y of shape ({n},) or ({n}, 1)")
        if isinstance(y, jax.Array) or is_traced(y):
            target = as_vector_target(y, n, "y", dtype=dtype)
            check_scale(target[:, None], "y", squares=True)
            return target
        values = np.asarray(y)
        if values.ndim == 2 and values.shape[1] == 1:
            values = values[:, 0]
        check_targets(values, n, "y")
        if values.ndim != 1:
            raise ValueError(f"y must be a single target of shape ({n},) or ({n}, 1); got {tuple(values.shape)}")
        target = np.asarray(values, dtype)
        if not np.isfinite(target).all():
            raise_nonfinite(values, "y", dtype, "remove those rows first")
        message = scale_error(target.min(keepdims=True), target.max(keepdims=True), n, "y", dtype, squares=True)
        if message is not None:
            raise ValueError(message)
        return jax.device_put(target)
    if loss in CLASSIFICATION_LOSSES:
        if y is None:
            raise ValueError(f"loss={loss!r} needs binary labels y in {{0, 1}}, {{-1, +1}} or bool")
        y = y if isinstance(y, jax.Array) else np.asarray(y)
        if y.dtype == bool:  # as_binary_labels compares y > 0: no bool/int promotion under strict dtypes
            y = y.astype(np.int32)
        if isinstance(y, jax.Array) or is_traced(y):
            return as_binary_labels(y, n, "y", dtype=dtype)
        return jax.device_put(host_binary_labels(y, n, "y", dtype))
    return _check_pairs(pairs, n, dtype)


def validate_fsa_options(X_shape, k, n_iter, mu, lr, optimizer, bins, smoothness, huber_h):
    """Host checks of :func:`fsa`'s options (also run by :func:`jaxselect.cross_validate_fsa`
    before it vmaps); returns ``(k, n_iter, mu, lr, smoothness, bins, huber_h)`` as Python values."""
    n, m = X_shape
    k = min(check_int(k, "k", low=1), m)  # above the usable columns: clipped by fsa (clip_k) once they are known
    n_iter = check_int(n_iter, "n_iter", low=1)
    mu = check_float(mu, "mu", low=0.0)
    if lr is not None:
        lr = check_float(lr, "lr", low=0.0, strict_low=True)
        if optimizer is not None:
            raise ValueError("give either lr (plain gradient descent) or an optax optimizer, not both")
    smoothness = check_float(smoothness, "smoothness", low=0.0)
    huber_h = check_float(huber_h, "huber_h", low=0.0, strict_low=True)
    check_optimizer(optimizer)
    if bins is not None:
        bins = check_int(bins, "bins", low=1)
    elif smoothness > 0:
        raise ValueError("smoothness (eq. 13) applies to piecewise-linear learners: also pass bins=B")
    return k, n_iter, mu, lr, smoothness, bins, huber_h


#: ``polish=None`` polishes only when the support's dense columns (N × k-bucket) fit in this many
#: bytes: the polish holds them as one dense array (and its Newton solver a copy or two).
POLISH_DENSE_BYTES = 1 << 29


def _default_polish(polish, n: int, width: int, dtype, sparse: bool = False) -> bool:
    """``polish=None``: on for linear learners whose dense (n, width) support columns fit
    :data:`POLISH_DENSE_BYTES` and for sparse designs (polished through the operator above that);
    larger dense supports keep the schedule's iterate (pass True to force)."""
    if polish is not None:
        return polish
    return sparse or n * width * np.dtype(dtype).itemsize <= POLISH_DENSE_BYTES


def _check_polish(polish, tol, max_iter, bins, dtype):
    """``(polish, tol, max_iter)``: a bool (None: linear learners only), and the tolerance and cap
    as device scalars."""
    if polish is None:
        polish = None if bins is None else False  # None: decided by the support's size (_default_polish)
    if polish is not None and not isinstance(polish, (bool, np.bool_)):
        raise TypeError(f"polish must be True, False or None; got {polish!r}")
    tol = check_float(polish_tol(dtype) if tol is None else tol, "tol", low=0.0, strict_low=True)
    max_iter = check_int(max_iter, "max_iter", low=1)
    # device_put, not jnp.asarray: no program compiled per call
    polish = None if polish is None else bool(polish)
    return polish, jax.device_put(np.asarray(tol, dtype)), jax.device_put(np.int32(max_iter))


def _check_l1(l1, polish, bins, dtype):
    """``(l1, polish)``: the L1 strength of the polish as a 0-d array (None: none; 0 is none) and
    the polish switch (an ``l1`` needs it: None becomes True, False is an error)."""
    if l1 is None or (not is_traced(l1) and not isinstance(l1, bool) and np.ndim(l1) == 0 and l1 == 0):
        return None, polish
    if bins is not None:
        raise ValueError("l1 (the L1 polish) applies to linear learners; piecewise-linear learners (bins=...) refuse it")
    if polish is False:
        raise ValueError("l1 is the L1 penalty of the polish on the final support: pass polish=True or None with it")
    return as_hyper(l1, "l1", dtype, low=0.0), True


def _release_after_large(design) -> None:
    """Hand the allocator's free pages back after a phase over a large concrete sparse X (its
    transients were entry-sized; see :mod:`jaxselect._memory`)."""
    if design.sparse and not is_traced(design.data) and design.data.size >= _LARGE_ENTRIES:
        release_free_memory()


def _check_refine(refine, bins, polish) -> int:
    """``refine`` validated: an int ≥ 0; rounds need linear learners and the polish."""
    refine = check_int(refine, "refine", low=0)
    if refine and bins is not None:
        raise ValueError("refine (gradient support pursuit) applies to linear learners; pass refine=0 with bins=...")
    if refine and polish is False:
        raise ValueError("refine minimises F on each candidate support (the polish): pass polish=True or None with it")
    return refine


def _real_columns(live, m: int, padded) -> int:
    """M − p for ``Execution.padded_columns`` = p: checked to be an int in 0..M−1 whose columns are
    constant (not live) when ``live`` is concrete."""
    p = check_int(padded, "Execution.padded_columns", low=0, high=m - 1)
    if p:
        values = host_value(lambda: live)
        if values is not None and bool(np.asarray(values)[m - p :].any()):
            raise ValueError(
                f"Execution.padded_columns={p}: the last {p} columns of X must be constant padding "
                "(jaxselect.design.buckets.pad_design appends zero columns); some of them vary"
            )
    return m - p


def _check_k_live(live, k: int) -> int:
    """``k``, clipped to the number of non-constant columns with the library's UserWarning
    (:func:`~jaxselect._validation.clip_k`); a ValueError when every column is constant. With traced
    X the count is unknown: k is clipped to the width M (the support is then padded with constant
    columns, see fsa's docstring)."""
    values = host_value(lambda: live)
    if values is None:
        return clip_k(k, int(np.shape(live)[0]), "fsa")
    n_live = int(values.sum())
    if n_live < 1:
        raise ValueError(
            f"every column of X is constant (max == min; {values.size} columns): constant columns carry no "
            "information and are never selected"
        )
    return clip_k(k, n_live, "fsa")


# --------------------------------------------------------------------------- preparation
@functools.partial(jit, static_argnames="bins")
def _prepare_pl(X, bins, w=None):
    grid = pl_grid(X, bins, w)
    idx, alpha = pl_encode(X, grid, bins)
    return PLDesign(idx, alpha, pl_basis_mean(idx, alpha, bins, w)), grid


def _weight_target(target, w, loss):
    """The :class:`WeightedTarget` of row weights ``w`` (ranking: pair weights ``w_i·w_j``)."""
    if loss != "ranking":
        one_device = isinstance(w, jax.Array) and not is_traced(w) and len(w.sharding.device_set) == 1
        if isinstance(w, np.ndarray) or one_device:  # normalised on the host: no eager device programs
            host = np.asarray(w)  # (row-sharded weights keep their sharding: the device path below)
            scaled = host.astype(np.float64) * (host.shape[0] / host.sum(dtype=np.float64))
            return WeightedTarget(target, jax.device_put(scaled.astype(host.dtype)))
        return WeightedTarget(target, w * (jnp.asarray(w.shape[0], w.dtype) / jnp.sum(w)))
    ij, r = target
    pw = jnp.take(w, ij[:, 0]) * jnp.take(w, ij[:, 1])
    total = host_value(lambda: jnp.sum(pw))
    if total is not None and not total > 0:
        raise ValueError("sample_weight: every ranking pair has a row of weight 0; give some pairs positive weight")
    return WeightedTarget(target, pw * (jnp.asarray(pw.shape[0], w.dtype) / jnp.sum(pw)))


def _prepare(data: Data, y, loss, bins, pairs, config, l2, smoothness) -> FSAProblem:
    """The FSA problem of validated data: the linear design is the front door's standardised
    operator (X itself, the summary's means and factors: no copy of X); the PL design bins X."""
    w, summary = data.weights, data.summary
    target = _check_target(y, data.design.shape[0], data.design.dtype, loss, pairs)
    if w is not None:
        target = _weight_target(target, w, loss)
    if bins is None:
        design, grid = data.design, None  # the standardised operator over X (dense or sparse)
    else:
        _check_dense_for_bins(data)
        design, grid = _prepare_pl(data.X, bins, w)
    return FSAProblem(design, target, summary.live, grid, config, l2, smoothness)


def _check_dense_for_bins(data: Data) -> None:
    """Piecewise-linear learners bin every entry of X, the implicit zeros of a sparse X included:
    their (N, M) bin indices are as large as the dense X, so they refuse sparse input."""
    if data.design.sparse:
        raise ValueError(
            "piecewise-linear learners (bins=...) bin every entry of X, its zeros included, so they need "
            "the dense X: pass X.toarray() if it fits in memory, or use linear learners (bins=None), "
            "which run on sparse X without densifying it"
        )


def _front_door(X, sample_weight, loss, constant_columns, *, squares: bool) -> Data:
    """``as_data`` for FSA: X (NaN/Inf, magnitudes: ``squares`` when raw centred columns are squared),
    row weights, the constant-column mode and the column summary; the targets are checked per loss."""
    if sample_weight is not None and callable(loss):
        resolve_loss(loss, 0.1, weighted=True)  # raises: callables cannot be weighted
    return as_data(
        X, None, sample_weight=sample_weight, targets=None, constant_columns=constant_columns,
        scale="squares" if squares else "values",
    )


def _on_device(X):
    """A numpy X already in its compute dtype goes to the device by ``jax.device_put``: on the CPU
    that aliases a C-contiguous, 64-byte-aligned array (a memmap of an ``.npy`` file, an aligned
    allocation) instead of copying it, where ``jnp.asarray`` always copies. Only :func:`fsa` uses
    it: the aliasing array lives during the call only (a problem kept by the user must not see
    later writes to X)."""
    if stream_kind(X) in ("array", "memmap") and X.flags.c_contiguous and X.dtype == float_dtype_for(X.dtype):
        if type(X) is np.ndarray and X.nbytes <= HOST_SUMMARY_MAX_BYTES:
            return X  # small: the front door summarises it on the host (and copies it to the device)
        return jax.device_put(X)
    return X


# --------------------------------------------------------------------------- streamed X
def _aliasable(X: np.ndarray) -> bool:
    """jax can use the buffer of X on the CPU without a copy (C-contiguous, 64-byte aligned)."""
    return bool(X.flags.c_contiguous) and X.ctypes.data % 64 == 0


def _stream_input(X, k, budget, opts):
    """``(source, lean)``: the :class:`~jaxselect.design.stream.StreamSource` of an X that streams
    (None: the in-memory path), and whether it is a numpy X that runs lean (first stage from the
    host array, gathered at the first compaction: no device copy of the whole X)."""
    loss, bins, optimizer, scale, refine = opts.loss, opts.bins, opts.optimizer, opts.scale, opts.polish.refine
    kind = stream_kind(X)
    if kind in ("source", "memmap"):
        what = "a memmap" if kind == "memmap" else f"X of type {type(X).__name__}"
        if kind == "memmap":
            try:
                check_streamable(loss, bins, optimizer, what, scale)
            except ValueError:
                return None, False  # options only the in-memory path runs: read the memmap whole
        else:
            check_streamable(loss, bins, optimizer, what, scale)
        if refine:
            raise ValueError(
                f"refine needs X in memory (each round takes a gradient over all columns and compacts a union of "
                f"them); {what} streams: pass refine=0, or load X (a numpy array or a scipy.sparse matrix)"
            )
        return as_stream_source(X), False
    if refine and budget is not None and kind == "array" and MEMORY_FACTOR * X.nbytes > budget:
        raise ValueError(
            f"refine needs X in memory, and this numpy X ({X.nbytes / 2**30:.2f} GiB) is above max_memory, so it "
            "would stream: pass max_memory=None to hold it, or refine=0"
        )
    if refine or budget is None or kind != "array":
        return None, False
    if callable(loss) or loss not in STREAM_LOSSES or bins is not None or optimizer is not None or scale == "sparse":
        return None, False
    if MEMORY_FACTOR * X.nbytes > budget:
        return ArraySource(X), False
    lean = (
        jax.default_backend() == "cpu"  # on an accelerator X is copied to the device anyway
        and X.dtype == float_dtype_for(X.dtype)
        and X.nbytes >= LEAN_BYTES
        and not _aliasable(X)
        and isinstance(k, (int, np.integer))
        and 1 <= k <= X.shape[1]
        and len(fsa_stage_widths(X.shape[1], int(k), shared=small_dense(X.shape[0], X.shape[1], X.dtype))) > 1
    )
    return (ArraySource(X), True) if lean else (None, False)


def _postfix(bar, **kw):
    if hasattr(bar, "set_postfix"):
        bar.set_postfix(**kw, refresh=False)


def _work_bar(padded, n_iter: int, widths, enabled: bool):
    """FSA's progress bar: its count is the work done, columns × iterations (an iteration on a
    stage of W columns counts W: the first, widest iterations cost the most), its total that of
    the whole schedule, so the rate and the ETA follow the real work; ``unit_scale`` shows the
    counts as k/M."""
    if not enabled:
        return progress_bar(enabled=False, desc="fsa")
    work = iteration_work(stage_bounds(padded, n_iter, widths), widths)
    bar = progress_bar(total=int(work.sum()), enabled=True, desc="fsa", unit="col")
    if hasattr(bar, "unit_scale"):
        bar.unit_scale = True
    return bar


def _finish_bar(bar) -> None:
    """Close the bar at its total (ticks the last iterations may still owe) after the polish."""
    total = getattr(bar, "total", None)
    if total is not None and bar.n < total:
        bar.update(total - bar.n)
    bar.close()


def _fsa_streamed(source, y, sample_weight, l2, options: FSAOptions, lean: bool):
    """:func:`fsa` on a :class:`~jaxselect.design.stream.StreamSource` (see :mod:`.stream`)."""
    opts = options
    loss, k, n_iter, mu, lr, huber_h = opts.loss, opts.k, opts.n_iter, opts.mu, opts.lr, opts.huber_h
    constant_columns, budget, checkpoint = opts.constant_columns, opts.execution.max_memory, opts.execution.checkpoint
    progress, gram, devices = opts.execution.progress, opts.gram, opts.devices
    polish, tol, max_iter, l1 = opts.polish.enabled, opts.polish.tol, opts.polish.max_iter, opts.polish.l1
    m = source.shape[1]
    dtype = np.dtype(source.dtype)
    k_asked = check_int(k, "k", low=1)
    k, n_iter, mu, lr, _, _, huber_h = validate_fsa_options((0, m), k, n_iter, mu, lr, None, None, 0.0, huber_h)
    polish, tol, max_iter = _check_polish(polish, tol, max_iter, None, dtype)
    l1, polish = _check_l1(l1, polish, None, dtype)
    if y is not None and source.batch_targets:
        raise ValueError("y was given and the batches carry targets too: pass y=None (the batches' targets) or batches (X_rows, None)")
    w = None
    if sample_weight is not None:
        w = np.asarray(sample_weight)
        n0 = source.shape[0]
        as_sample_weight(w, n0 if n0 is not None else (w.shape[0] if w.ndim == 1 else 0))
    shared = small_dense(source.shape[0], m, dtype)
    schedule, padded, widths = schedule_plan(m, k, n_iter, mu, shared=shared)
    cap = padded.shape[0]
    mode = "power" if lr is None else "fixed"
    length0 = stage_bounds(padded, n_iter, widths)[0]
    needs_sub = mode == "power" and min(12, (length0[1] - length0[0]) // 2) < 6
    n = source.shape[0]
    stride = -(-n // 1024) if (needs_sub and n is not None and n > 2048) else None
    summary, lo, hi, y_src, sub = stream_summary(source, w, stride)
    n = source.shape[0]
    if needs_sub and sub is None and n > 2048:  # a batch source: N known only now
        sub = subsample_rows(source, -(-n // 1024))
    if y is None:
        if y_src is None and loss is not None:
            raise ValueError(f"loss={loss!r} needs y: pass y, or a source whose batches or targets(rows) carry it")
        y = y_src
    check_constant_columns(summary.live, constant_columns)
    k_plan, k = k, _check_k_live(summary.live, k_asked)
    shared_plan, shared = shared, small_dense(n, m, dtype)  # a batch source's N is known only now
    if k != k_plan or shared != shared_plan:  # k above the non-constant columns: the schedule of the clipped k
        schedule, padded, widths = schedule_plan(m, k, n_iter, mu, shared=shared)
        cap = padded.shape[0]
        length0 = stage_bounds(padded, n_iter, widths)[0]
        needs_sub = mode == "power" and min(12, (length0[1] - length0[0]) // 2) < 6
        if needs_sub and sub is None and n > 2048:
            sub = subsample_rows(source, -(-n // 1024))
    target = _check_target(y, n, dtype, loss, None)  # (the squared loss's y: its scale too)
    if w is not None:
        target = _weight_target(target, jnp.asarray(w, dtype), loss)
    l2 = as_hyper(l2, "l2", dtype, low=0.0)
    config = make_config(loss, huber_h, None, weighted=w is not None)
    hand_over = memory_stage(widths, n, dtype.itemsize, budget)
    if lean:  # the in-memory stages start at a width of at most M/8: their copy is ≤ X/8
        hand_over = max(1, hand_over, memory_stage(widths, n, dtype.itemsize, LEAN_FRACTION * n * m * dtype.itemsize))
    polish = _default_polish(polish, n, int(widths[-1]), dtype)
    fp = ""
    if checkpoint is not None:
        fp = fingerprint(
            dict(shape=(n, m), dtype=dtype.str, k=k, n_iter=n_iter, mu=mu, lr=lr, l2=float(l2), loss=loss,
                 huber_h=huber_h, widths=tuple(int(v) for v in widths)),
            dict(mean=summary.mean, scale=summary.scale, y=np.asarray(y, np.float64), w=w),
        )
    rel = None
    if isinstance(target, WeightedTarget):
        y_np, rel = np.asarray(target.value), np.asarray(target.rel, dtype)
    else:
        y_np = np.asarray(target)
    design = StreamedDesign(source, y_np, rel, RowLoss(config.loss_fn), config.curvature, dtype, devices)
    problem = FSAProblem(None, target, None, None, config, l2, jax.device_put(np.zeros((), dtype)))
    plan = RunPlan(widths, cap, mode, gram, progress=bool(progress))
    run = StreamRun(padded, n_iter, 0.0 if lr is None else lr, hand_over, sub, checkpoint, fp, bool(polish))
    bar = _work_bar(padded, n_iter, widths, bool(progress))
    try:
        with ticking(bar):
            out = stream_fsa(design, problem, summary, plan, run, _finishing(k, n_iter, dtype, tol, max_iter, l1), bar)
            if progress:
                out = jax.block_until_ready(out)
    finally:
        _finish_bar(bar)
    return make_result(out, k, n_iter, schedule, m, False)


# --------------------------------------------------------------------------- problem builder
@any_mesh
def fsa_prepare(
    X,
    y=None,
    *,
    loss: str | Callable = "squared",
    bins: int | None = None,
    pairs=None,
    constant_columns: str = "inert",
    sample_weight=None,
    l2=0.0,
    smoothness: float = 0.0,
    optimizer=None,
    huber_h: float = 0.1,
) -> FSAProblem:
    """Validate the data and options into an :class:`~jaxselect.anneal.FSAProblem` (solver protocol).

    The problem holds everything :func:`~jaxselect.anneal.fsa_step` needs besides the state: the
    design, the target, the static :class:`~jaxselect.anneal.FSAConfig` (loss, optimizer,
    ``huber_h``) and the priors ``l2``/``smoothness``. :func:`fsa` builds the same problem.

    Args:
      X: (N, M) features, N ≥ 2 (numpy or a row-sharded ``jax.Array``).
      y: as in :func:`fsa` (targets (N,) or (N, 1); binary labels {0, 1}, {−1, +1} or bool;
        None for ``"ranking"``; anything a callable loss takes).
      loss: a loss name of :func:`fsa` or a callable ``loss(scores, y)``; it decides how ``y`` is
        checked.
      bins: B for piecewise-linear learners (None: linear learners on standardized columns).
      pairs: the ranking pairs (see :func:`fsa`).
      constant_columns: ``"inert"`` (default: constant columns are never selected) or ``"raise"``.
      sample_weight: None or (N,) row weights (see :func:`fsa`); the target is then a
        :class:`~jaxselect.anneal.stepsize.WeightedTarget` and the step uses the weighted loss.
      l2: ridge weight ≥ 0 (may be traced), as in :func:`fsa`.
      smoothness: weight ≥ 0 of the prior of eq. (13) (needs ``bins``).
      optimizer: an optax ``GradientTransformation`` (default: plain gradient descent,
        :func:`~jaxselect.anneal.gradient_descent`, with the step set by
        :func:`~jaxselect.anneal.fsa_init`).
      huber_h: h > 0 of the huberized hinge loss.

    Returns:
      :class:`~jaxselect.anneal.FSAProblem`.
    """
    check_loss(loss)
    check_constant_mode(constant_columns)
    data = _front_door(X, sample_weight, loss, constant_columns, squares=False)
    dtype = data.design.dtype
    if bins is not None:
        bins = check_int(bins, "bins", low=1)
    smoothness = check_float(smoothness, "smoothness", low=0.0)
    if bins is None and smoothness > 0:
        raise ValueError("smoothness (eq. 13) applies to piecewise-linear learners: also pass bins=B")
    huber_h = check_float(huber_h, "huber_h", low=0.0, strict_low=True)
    l2 = as_hyper(l2, "l2", dtype, low=0.0)
    config = make_config(loss, huber_h, optimizer, weighted=data.weights is not None)
    return _prepare(data, y, loss, bins, pairs, config, l2, jnp.asarray(smoothness, dtype))


# --------------------------------------------------------------------------- the options record
class FSAOptions(NamedTuple):
    """Every option of one :func:`fsa` call, validated once at the boundary (host values) and passed
    down as one value.

    Attributes:
      k, loss, n_iter, mu, lr, optimizer: as in :func:`fsa` (``loss`` a name or a callable).
      huber_h: h of the huberized hinge loss.
      bins, smoothness: the piecewise-linear learner (None, 0.0: linear learners).
      pairs: the ranking loss's pairs (the ``y`` of ``loss="ranking"``), else None.
      constant_columns, scale: as in :func:`fsa`.
      polish: the :class:`~jaxselect.anneal.Polish` record (``refine`` validated).
      execution: the :class:`~jaxselect.anneal.Execution` record (``max_memory`` in bytes or None).
      devices: the mesh's local devices (None: one device).
      gram: the squared loss on linear learners (its last stage may iterate in moment space).
    """

    k: Any
    loss: Any
    n_iter: Any
    mu: Any
    lr: Any
    optimizer: Any
    huber_h: float
    bins: Any
    smoothness: Any
    pairs: Any
    constant_columns: str
    scale: str
    polish: Polish
    execution: Execution
    devices: Any
    gram: bool


def _as_loss(loss, old: dict):
    """``(loss, huber_h)``: a name or a callable, and h (a :class:`~jaxselect.losses.HuberHinge`
    record or the deprecated ``huber_h`` keyword)."""
    huber_h = old.get("huber_h", 0.1)
    if isinstance(loss, _losses.HuberHinge):
        if "huber_h" in old:
            raise TypeError("give h in loss=HuberHinge(h) or as huber_h=, not both")
        loss, huber_h = "huber_hinge", loss.h
    if isinstance(loss, str) and loss in SOFTMAX_LOSSES:
        return "softmax", huber_h  # the multinomial loss (:mod:`.multiclass`), "multinomial" its alias
    check_loss(loss)
    return loss, huber_h


def fsa_options(k, y, *, loss, n_iter, mu, lr, optimizer, learner, constant_columns, scale, polish, execution,
                deprecated: dict, fn: str = "fsa", stacklevel: int = 6):
    """``(options, y)``: the :class:`FSAOptions` of :func:`fsa`'s arguments (the deprecated keywords
    moved into their records, each with a ``DeprecationWarning``), and the target (``y``, or the
    deprecated ``pairs`` for the ranking loss)."""
    old = take_deprecated(fn, deprecated, SPELLING, stacklevel=stacklevel)
    loss, huber_h = _as_loss(loss, old)
    bins, smoothness = as_learner(learner, old)
    record = as_polish(polish, old)
    run = as_execution(execution, old)
    pairs = None
    if loss == "ranking":
        pairs = old["pairs"] if "pairs" in old else y
        y = None
    check_constant_mode(constant_columns)
    check_scale_rule(scale)
    check_progress(run.progress)
    run = run._replace(max_memory=check_max_memory(run.max_memory))
    devices = check_mesh(run.mesh)
    if not is_auto(record.refine):
        record = record._replace(refine=_check_refine(record.refine, bins, record.enabled))
    # the moment-space (Gram) oracle of the last stages squares raw centred columns
    gram = bins is None and (loss == "squared" or loss is _losses.squared_loss)
    options = FSAOptions(k, loss, n_iter, mu, lr, optimizer, huber_h, bins, smoothness, pairs, constant_columns, scale,
                         record, run, devices, gram)
    return options, y


# --------------------------------------------------------------------------- the result
def make_result(out: FSAOutput, k: int, n_iter: int, schedule, m: int, traced: bool) -> FSAResult:
    """The :class:`FSAResult` of a run's :class:`~jaxselect.anneal.solver.FSAOutput`: the first
    ``k`` survivors and the first ``n_iter`` objectives (on the host for a concrete run: slicing a
    device array would compile a program per shape)."""
    if traced:
        cut = out
    else:
        cut = jax.device_get(out)  # one transfer each way, nothing compiled
    cut = cut._replace(
        support=cut.support[:k], coef=cut.coef[:k], objective=cut.objective[:n_iter],
        basis_mean=None if cut.basis_mean is None else cut.basis_mean[:k],
        x_min=None if cut.x_min is None else cut.x_min[:k],
        bin_width=None if cut.bin_width is None else cut.bin_width[:k],
    )
    fields = cut if traced else jax.device_put(cut)
    result = FSAResult(
        support=fields.support,
        coef=fields.coef,
        intercept=fields.intercept,
        loss_path=fields.objective,
        n_kept=jax.device_put(np.asarray(schedule[:n_iter])),
        step_size=fields.steps,
        status=fields.status,
        x_min=fields.x_min,
        bin_width=fields.bin_width,
        basis_mean=fields.basis_mean,
        n_features=m,
    )
    if not traced:  # the one host sync, after the run
        code = int(cut.status)
        if code != OK:
            warnings.warn(f"fsa: {status_message(code)}", RuntimeWarning, stacklevel=6)
    return result


def _finishing(k, n_iter, dtype, tol=None, max_iter=None, l1=None, grid=None) -> Finishing:
    """The traced data of a run's end (:class:`~jaxselect.anneal.run.Finishing`); ``device_put``,
    not ``jnp.asarray``: nothing is compiled."""
    return Finishing(
        jax.device_put(np.int32(k)), jax.device_put(np.int32(n_iter)), tol, max_iter, l1,
        None if grid is None else grid.x_min, None if grid is None else grid.bin_width,
    )


# --------------------------------------------------------------------------- public API
@any_mesh
def fsa(
    X,
    y,
    k: int,
    *,
    loss: str | Callable = "squared",
    n_iter: int | str = "auto",
    mu: float = 300.0,
    lr: float | None = None,
    l2="auto",
    optimizer=None,
    learner: PiecewiseLinear | None = None,
    sample_weight=None,
    constant_columns: str = "inert",
    scale: str = "auto",
    polish: bool | Polish | None = None,
    execution: Execution | None = None,
    **deprecated,
) -> FSAResult:
    """Feature Selection with Annealing (Barbu et al., Algorithm 1 with schedule (3)).

    Minimises ``F = mean-loss(f(x_i)) + (l2/2)‖β‖² (+ smoothness·eq. 13)`` subject to ``‖β‖₀ ≤ k``
    by gradient steps interleaved with keep-the-M_e-largest, on a problem that is compacted as it
    shrinks (see module docstring). Features are standardized internally (linear learners; β
    is on the standardized features) and the coefficients are returned in raw feature space.

    Args:
      X: (N, M) features, N ≥ 2: a numpy array or a (row-sharded) ``jax.Array``; or data that do
        not sit in memory as one array (streamed, see "Data bigger than memory" in docs/fsa.md):
        an ``np.memmap`` or a row-sliceable array-like (h5py/zarr style: ``shape``, ``dtype``,
        ``X[a:b]``); a callable returning a fresh iterator of ``(X_rows, y_rows)`` batches on
        every call (``y=None``: the batches carry the targets); or a column source with
        ``shape``, ``dtype``, ``block(rows, cols)`` and optionally ``targets(rows)`` (e.g.
        :func:`jaxselect.datasets.equicorrelated`). Streamed X takes the pointwise losses
        (squared, logistic, huber_hinge, lorenz) with linear learners and no optax optimizer.
      y: (N,) or (N, 1) regression targets (``"squared"``); binary labels in {0, 1}, {−1, +1} or
        bool, (N,) or (N, 1) (classification losses); for ``"ranking"`` the pairs: (P, 3) rows
        (i, j, r_ij) with r_ij ∈ [0, 1], or a tuple ``(ij (P, 2) int, r (P,))``; or anything a
        callable loss accepts; None with a source that carries its targets.
      k: number of features to select, k ≥ 1; above the number of non-constant columns, a
        ``UserWarning`` and all of them are selected (k clipped to that count,
        :func:`~jaxselect._validation.clip_k`).
      loss: ``"squared"`` (½·mean, eq. 4/10), ``"logistic"`` (6), ``"huber_hinge"`` (7; its h
        0.1 as in the authors' code, or ``js.losses.HuberHinge(h)``), ``"lorenz"`` (8),
        ``"ranking"`` (9), ``"softmax"`` (alias ``"multinomial"``: the multinomial loss of C
        classes, y integer labels 0..C−1 with every class present; (k, C) coefficients and (C,)
        intercepts, one support shared by the classes, features ranked by the norm of their
        coefficient row — see :mod:`jaxselect.anneal.multiclass`; linear learners on X in memory,
        no ``optimizer``/``l1``; ``refine`` ranks columns by the norm of their gradient and
        coefficient rows), or a callable ``loss(scores (N,), y) -> scalar``
        differentiated with ``jax.grad`` (a smooth jnp function; a fresh but equal lambda reuses
        the compiled stages).
      n_iter: N_iter, number of iterations (≥ 1); ``"auto"`` (default): 500, the paper's, or 30 on
        a sparse X of more than 2²² stored values (:mod:`.defaults`: there the refinement round,
        not the schedule's length, settles the support).
      mu: annealing rate μ ≥ 0 of eq. (3).
      lr: gradient step η (> 0). Default: ``1/L`` per compacted stage, L the gradient's Lipschitz
        bound from power iteration (scale-free; see :mod:`.stepsize`; the three classification
        losses use the logistic curvature 1/4, see ``step._DEFAULT_STEP_NOTE``).
      l2: ridge weight (≥ 0; may be traced, e.g. ``jax.vmap`` over it): the prior is
        ``(l2/2)‖β‖²`` on the mean loss, the library's one ``l2`` convention. ``"auto"``
        (default): ``8·k/N_w`` (N_w the sum of the row weights) when the fit runs on ``log1p``
        counts (``scale="log1p"``, or ``"auto"`` on sparse count data) with a binary
        classification loss (logistic, huberized hinge, Lorenz), else 0 (:mod:`.defaults`). The
        paper's prior ``s‖β‖²`` on its losses summed over the N examples (squared loss as ½Σ, eq. 10) is
        ``l2 = 2s/N``; with eq. (4)'s unhalved Σ(y − xᵀβ)² it is ``l2 = s/N``.
      optimizer: an optax ``GradientTransformation`` used instead of plain gradient descent
        (:func:`~jaxselect.anneal.gradient_descent`, the default rule, goes through the same
        code); its state is compacted with the coefficients. A fresh but equal optimizer on each
        call (``optax.sgd(0.1)``) does not recompile.
      learner: None (linear learners on standardized columns) or
        :class:`~jaxselect.anneal.PiecewiseLinear` ``(bins=B, smoothness=c)``: B + 1 coefficients
        per feature and the weight c of the second-order prior of eq. (13).
      constant_columns: ``"inert"`` (default: a column with max == min is never selected and
        never counted) or ``"raise"`` (ValueError naming them; skipped for traced X).
      sample_weight: None or (N,) row weights ``w ≥ 0`` (at least 2 positive): the mean loss
        becomes the weighted mean ``Σ_i w_i ℓ_i / Σw`` and the standardisation (linear learners)
        or the PL grid and centring use the rows' weights (range and constancy over the rows with
        ``w > 0``), so integer weights equal repeated rows and weight-0 rows are absent — the
        weights of :func:`jaxselect.shard_rows` give the unpadded result. ``"ranking"``: pair
        (i, j) gets weight ``w_i·w_j`` (a pair with a padding row is absent). Built-in losses only
        (a callable loss cannot be weighted: weight inside it).
      polish: True, False, None or a :class:`~jaxselect.anneal.Polish` record
        ``(enabled, tol, max_iter, l1, refine)`` (a bool is ``Polish(enabled=...)``). True: after the schedule, minimise F on the final support (same loss, weights and
        priors) until ``max|∇F| ≤ tol·σ`` and return those coefficients (:mod:`.polish`: damped
        Newton for the pointwise losses on linear learners, L-BFGS for ranking, PL learners and
        callables); the support does not change and F never rises. False: the schedule's last
        gradient iterate (Algorithm 1's output). None (default): True for linear learners whose
        support's dense columns (N × the k-bucket) fit :data:`POLISH_DENSE_BYTES` (512 MiB; the
        polish holds them densely) and for sparse X (above that budget polished through the
        compacted sparse support, never densified), False for larger dense supports and for PL
        learners (``bins``), whose F
        without a strong prior has no finite minimiser on sparsely filled edge bins (pass True
        with ``l2``/``smoothness`` > 0).
      Polish.tol: the polish's gradient tolerance relative to σ (1 for labels, the target spread for the
        squared loss); default 1e-5 in float32, 1e-9 in float64.
      Polish.max_iter: cap on the polish's iterations (≥ 1); stopping there before ``tol`` sets
        NOT_CONVERGED (4) in ``status``.
      Polish.l1: ``"auto"`` (default: ``1/N_w`` for a classification loss on sparse X — liblinear's
        ``C = 1`` on 0/1 columns — else None), None or λ ≥ 0 (may be traced; 0 is None): the polish minimises
        ``F(c, b) + λ‖c‖₁`` on the final support instead of F — L1 (lasso) shrinkage of the k
        selected standardized coefficients, warm-started from the schedule's iterate, by OWL-QN
        (:mod:`.owlqn`: L-BFGS on the pseudo-gradient, steps projected on the current orthant), so
        some coefficients of the support may end exactly 0. Selection is unchanged (FSA with the
        ridge ``l2``); only the final fit is shrunk. Linear learners only; implies ``polish=True``
        (``polish=False`` with it is a ValueError). For labels on raw 0/1 columns
        (``scale="sparse"``) λ ≈ 1/(C·N) matches scikit-learn's L1 ``C``.
      scale: how linear learners scale the centred columns (:mod:`.scaling`): ``"auto"``
        (default) ``"log1p"`` on sparse count data (non-negative whole stored values, at least
        half of them in columns that are not indicators: raw word counts), else ``"sparse"``'s
        scale on indicator columns (their non-zero entries all one value: 0/1 flags) and
        ``"std"`` on the others — exactly ``"std"`` on dense real data, ``"std"`` for a streamed
        X; ``"log1p"``: every value x mapped to ``sign(x)·log(1 + |x|)`` (``log(1 + x)`` on
        counts; a sparse X's stored values only), then ``"std"`` — X in memory and linear
        learners, recorded in ``FSAResult.transform`` and applied by every prediction;
        ``"std"`` unit variance; ``"sparse"`` unit variance per non-zero entry (σ_j/√f_j, f_j the fraction
        of rows where column j is non-zero): the same as ``"std"`` on columns without zeros, raw
        0/1 values on binary indicators, so rare columns are not lifted (sparse text / click data).
      Polish.refine: ``"auto"`` (default: 1 on sparse X in memory with a pointwise loss and
        linear learners, else 0) or R ≥ 0 rounds of gradient support pursuit (GraSP) after the
        schedule (:mod:`.refine`; 0 is the paper's algorithm): at the polished fit on the support S, the 2W
        columns outside S with the largest ``|∂F/∂β_j|`` (W ≥ k the k-bucket) join S, a few
        L-BFGS steps on the union rank its coefficients, its k largest ``|β_j|`` form S', and S'
        replaces S when its polished objective (with ``l1``: ``F + λ‖c‖₁``) is lower — it never
        rises, and a round without gain stops. It recovers columns the first iterations drop
        because their effect shows only once others are fitted (sparse click or text data).
        Linear learners with X in memory (dense or sparse; a streamed X raises ValueError);
        implies ``polish=True``. Each round: two products with X, a fit on 3W columns and a
        polish. ``loss="softmax"`` (``"auto"``: 0) ranks by the L2 norms over the classes of the
        gradient rows and coefficient rows, with W = k (:func:`~jaxselect.anneal.multiclass.softmax_refine`).
      execution: None or an :class:`~jaxselect.anneal.Execution` record ``(max_memory, mesh,
        checkpoint, progress, padded_columns)``, how and where the call runs:
      Execution.max_memory: bytes the working set of a streamed X may take in memory (``"auto"``: a quarter
        of the available RAM, or of the default accelerator's free memory if that is less; a number of bytes; None: no budget). While a stage's columns
        (2·N·W·itemsize) do not fit, each iteration re-reads the stage's columns block by block;
        at the first stage that fits they are gathered once and the rest runs in memory. A numpy
        X above the budget is streamed from the host array too (None: never).
      Execution.progress: show a progress bar (iteration, working-set width, phase "stream"/"memory"/
        "polish"); needs ``tqdm`` (ImportError otherwise).
      Execution.checkpoint: None, or a file path: the streamed phase writes its state there at every stage
        boundary (``np.savez``), and a call that finds a checkpoint of the same problem resumes
        from it with the uninterrupted result (another problem's checkpoint raises ValueError).
        Only streamed stages are checkpointed (an in-memory X ignores it).
      Execution.mesh: None, or a :class:`jax.sharding.Mesh` of this process's devices (e.g.
        :func:`jaxselect.data_mesh`) over which a streamed X's rows are split: each row block of a
        streamed pass is cut into one contiguous part per device, the parts computed at once and
        their gradients summed (equal to the one-device result to float32 rounding). The summary
        pass and the in-memory stages after the hand-over run on the default device. An X that
        runs in memory raises ValueError: place it with :func:`jaxselect.shard_rows` instead.
      Execution.padded_columns: p, the number of X's last columns that are constant padding to a
        shape bucket (:func:`jaxselect.design.buckets.pad_design`): the schedule anneals from
        M − p columns, so the result is the fit on X without them (``n_features`` M − p) from the
        compiled program of M columns. X in memory only.

    Defaults: every ``"auto"`` is decided by the data at the boundary (:mod:`.defaults`; dense
    real data keep the paper's N_iter = 500, no ridge, standardised columns; sparse raw counts
    are fitted on ``log(1 + x)`` with the ridge ``8·k/N_w``). The paper's settings
    on any data: ``fsa(X, y, k, **js.FSA_PAPER)``.

    Deprecated keywords (one release, a ``DeprecationWarning`` each, the same result): ``tol``,
    ``max_iter``, ``l1``, ``refine`` (:class:`~jaxselect.anneal.Polish`), ``max_memory``, ``mesh``,
    ``checkpoint``, ``progress`` (:class:`~jaxselect.anneal.Execution`), ``bins``, ``smoothness``
    (:class:`~jaxselect.anneal.PiecewiseLinear`), ``pairs`` (``y``), ``huber_h``
    (:class:`~jaxselect.losses.HuberHinge`).

    Compilation: an in-memory call is one program (:func:`~jaxselect.anneal.run.solve`: the
    stages, the polish, the k survivors) per shape (N, M, the k-bucket of
    :func:`~jaxselect.anneal.k_bucket`, the power of two above ``n_iter``) and static options
    (loss, optimizer, learner, lr given or not, polish or not), besides the front door's summary
    pass; ``mu``, ``lr``, ``l2``, ``smoothness``, the polish's ``tol``/``max_iter``/``l1`` and a
    new ``k`` in its bucket or ``n_iter`` under its power of two are its data (nothing compiled).
    On a small X (at most 64 MiB, ``SHARED_WIDTH_BYTES``) the last stage is at least
    min(256, ⌈M/4⌉) columns wide (``anneal.schedule.SHARED_WIDTH``), so every k up to that shares
    one program: a grid search over k compiles once per shape.

    Returns:
      :class:`FSAResult`. A non-zero ``status`` (non-finite values: the step was too large;
      NOT_CONVERGED: the polish stopped at ``max_iter``) also gives a ``RuntimeWarning`` when the
      call is not traced; ``js.raise_for_status`` raises.

    Raises:
      ValueError / TypeError: on bad input (shapes, fewer than 2 rows, NaN/Inf, k < 1, every
        column constant, unknown loss, labels not binary for a
        classification loss, pairs out of range, bins < 1, mu < 0, n_iter < 1, l2 < 0, ...).

    Inside a user's ``jax.jit`` (traced X, y): value checks are skipped. In particular a k above
    the number of non-constant columns cannot be detected (k is only clipped to M, with the
    warning); the support is then padded with constant columns, whose coefficient is 0. Classification labels are then read as ``y > 0``.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 50)); y = X[:, 3] - 2 * X[:, 7]
    >>> res = fsa(X, y, 2, n_iter=100)
    >>> res.support.tolist()
    [3, 7]
    """
    options, y = fsa_options(
        k, y, loss=loss, n_iter=n_iter, mu=mu, lr=lr, optimizer=optimizer, learner=learner,
        constant_columns=constant_columns, scale=scale, polish=polish, execution=execution, deprecated=deprecated,
    )
    sparse = is_sparse(X) or getattr(X, "sparse", False) is True
    options = resolve_defaults(options, X, sample_weight, sparse=sparse, streamed=stream_kind(X) in ("source", "memmap"))
    options = options._replace(polish=options.polish._replace(
        refine=_check_refine(options.polish.refine, options.bins, options.polish.enabled)))
    X, l2, options, transform = _value_map(X, y, l2, options, sample_weight)
    if options.loss == "softmax":
        return _with_transform(_fsa_softmax(X, y, sample_weight, l2, options), transform)
    in_jit = is_traced((y, sample_weight, l2, options.pairs))
    budget = None if in_jit else options.execution.max_memory
    source, lean = _stream_input(X, options.k, budget, options)
    if source is not None and options.scale == "auto":
        options = options._replace(scale="std")  # a streamed X is standardised (docs: scaling)
    if options.devices is not None and source is None:
        raise ValueError(
            "mesh= splits the rows of a streamed X (a memmap, batches, a column source, or a numpy X above "
            "max_memory); this X runs in memory: place its rows with js.shard_rows(X, y, mesh=mesh) instead"
        )
    if source is not None:
        if options.execution.padded_columns:
            raise ValueError("Execution.padded_columns applies to an X in memory; this X streams (max_memory=None holds it)")
        return _with_transform(_fsa_streamed(source, y, sample_weight, l2, options, lean), transform)
    return _with_transform(_fsa_memory(X, y, sample_weight, l2, options), transform)


def _with_transform(result: FSAResult, transform) -> FSAResult:
    return result if transform is None else result._replace(transform=transform)


def _value_map(X, y, l2, options, sample_weight):
    """``(X, l2, options, transform)``: ``l2="auto"`` resolved, and for ``scale="log1p"`` X's values
    mapped (:func:`~jaxselect.anneal.scaling.log1p_values`), the columns then standardised."""
    if options.scale != LOG1P:
        return X, auto_l2(l2, options, X, sample_weight), options, None
    if options.bins is not None:
        raise ValueError(
            "scale='log1p' maps the values of linear learners' columns; piecewise-linear learners (bins=...) bin "
            "the raw values"
        )
    if is_traced((X, y)):
        raise TypeError(
            "scale='log1p' needs concrete X and y (the result records the transform, a str, which cannot leave "
            "jax.jit): map X yourself (jnp.log1p) inside jit and pass scale='std'"
        )
    l2 = auto_l2(l2, options, X, sample_weight)
    return log1p_values(X), l2, options._replace(scale="std"), LOG1P


def _fsa_memory(X, y, sample_weight, l2, options: FSAOptions) -> FSAResult:
    """:func:`fsa` on an X in memory: the front door, the problem, then one compiled program
    (:func:`~jaxselect.anneal.run.solve`: the schedule's stages, the polish and the survivors)."""
    opts = options
    data = _front_door(_on_device(X), sample_weight, opts.loss, opts.constant_columns, squares=opts.gram)
    _release_after_large(data.design)
    w = data.weights
    n, m = data.design.shape
    dtype = data.design.dtype
    k, n_iter, mu, lr, smoothness, bins, huber_h = validate_fsa_options(
        (n, m), opts.k, opts.n_iter, opts.mu, opts.lr, opts.optimizer, opts.bins, opts.smoothness, opts.huber_h
    )
    loss, refine = opts.loss, opts.polish.refine
    l2 = as_hyper(l2, "l2", dtype, low=0.0)
    polish, tol, max_iter = _check_polish(opts.polish.enabled, opts.polish.tol, opts.polish.max_iter, bins, dtype)
    l1, polish = _check_l1(opts.polish.l1, polish, bins, dtype)
    polish = True if refine else polish
    config = make_config(loss, huber_h, opts.optimizer, weighted=w is not None)
    problem = _prepare(data, y, loss, bins, opts.pairs, config, l2, jax.device_put(np.asarray(smoothness, dtype)))
    if opts.scale != "std" and bins is None:
        problem = problem._replace(design=rescale_design(problem.design, w, opts.scale))
    k = _check_k_live(problem.live, check_int(opts.k, "k", low=1))
    m_real = _real_columns(problem.live, m, opts.execution.padded_columns)

    schedule, padded, widths = schedule_plan(m, k, n_iter, mu, m_real, shared=shares_widths(problem.design))
    cap = padded.shape[0]
    sparse = problem.design.sparse
    polish = _default_polish(polish, n, int(widths[-1]), dtype, sparse)
    traced = is_traced((problem, X, y, opts.pairs, sample_weight, l1))
    bounds = None
    if traced:  # under jit/grad/vmap: static stage bounds, every loop a differentiable scan
        bounds = tuple((st.start, st.start + st.length) for st in plan_stages(m, schedule, widths))
    mode = "optimizer" if opts.optimizer is not None else ("power" if lr is None else "fixed")
    # the first compaction transposes X in row blocks, unless X is spread over devices or traced
    one_device = not data.design.sparse and not traced and on_one_device(data.design.X)
    show = bool(opts.execution.progress) and not traced
    plan = RunPlan(widths, cap, mode, opts.gram, bounds, _GATHER_BLOCK if one_device else 0, progress=show,
                   dense_from=dense_stage(problem.design, widths, traced))
    bar = _work_bar(padded, n_iter, widths, show)
    _postfix(bar, phase="memory", width=m)
    # device_put, not jnp.asarray: converting a numpy array with jnp compiles a program per shape
    args = (jax.device_put(padded), jax.device_put(np.int32(n_iter)), jax.device_put(np.asarray(0.0 if lr is None else lr, dtype)))
    sub = subsample_design(problem, plan)  # a sparse X's step subsample, without the other rows' entries
    grid = problem.grid
    finishing = _finishing(k, n_iter, dtype, tol, max_iter, l1, grid)
    # one program (schedule + polish + survivors), unless the polish needs the host between them: a
    # refine's rounds, a large sparse X (its memory handed back, its support compacted apart)
    large = sparse and not traced and problem.design.data.size >= _LARGE_ENTRIES
    apart = large or (polish and compacts_support(problem.design, int(widths[-1])))
    # concrete inputs and a named loss: nothing can differentiate the call (a callable loss may close
    # over a tracer that the inputs do not show)
    differentiable = traced or not isinstance(opts.loss, str)
    if not refine and not apart:
        with ticking(bar):
            out = solve(problem, *args, finishing, None, sub, plan=plan, polish=bool(polish),
                        differentiable=differentiable)
            if show:
                out = jax.block_until_ready(out)  # the ticks arrive while the device works
        _finish_bar(bar)
        return make_result(out, k, n_iter, schedule, m_real, traced)
    with ticking(bar):
        state, cols, objective, step_size, mean, inv_scale, basis_mean = run(*((problem,) + args), sub=sub, plan=plan)
        if show:
            jax.block_until_ready(state)
    _release_after_large(problem.design)
    local = None
    if refine:  # the polish on the schedule's support, then rounds of gradient support pursuit
        _postfix(bar, phase="refine", width=int(widths[-1]))
        box = [problem]
        del problem, data  # refine_support drops X's full entries before its last union fit
        refined = refine_support(box.pop(), cols, state.coef, state.intercept, state.active, k=k, rounds=refine,
                                 tol=tol, max_iter=max_iter, l1=l1, differentiable=differentiable)
        cols, mean, inv_scale, fit = refined.cols, refined.mean, refined.inv_scale, refined.fit
        state = state._replace(coef=fit.coef, intercept=fit.intercept, active=refined.active)
        del refined
        polished = fit
    elif polish:  # the converged fit on the final support (width W, the k survivors active)
        _postfix(bar, phase="polish", width=int(widths[-1]))
        target, compacted = polish_problem(problem, cols)
        if compacted:  # polished on the support's own entries: X's full entries can go first
            del problem, data
        fit = polish_prepared(target, cols, state.coef, state.intercept, state.active, tol, max_iter, compacted, l1,
                              differentiable=differentiable)
        state = state._replace(coef=fit.coef, intercept=fit.intercept)
        polished = fit
    else:
        polished = None
    _finish_bar(bar)
    out = finish_program(None, state, cols, objective, step_size, mean, inv_scale, basis_mean, finishing, local,
                         polish=False)
    if polished is not None:
        out = out._replace(status=merge_status(out.status, polished))
    return make_result(out, k, n_iter, schedule, m_real, traced)


def _fsa_softmax(X, y, sample_weight, l2, options: FSAOptions) -> FSAResult:
    """:func:`fsa` with the multinomial loss (:mod:`.multiclass`): one support of k features shared by
    the C classes, (k, C) coefficients and (C,) intercepts, in one compiled program."""
    opts = options
    check_softmax_options(opts, X)
    data = _front_door(_on_device(X), sample_weight, "logistic", opts.constant_columns, squares=False)
    w = data.weights
    n, m = data.design.shape
    dtype = data.design.dtype
    k, n_iter, mu, lr, _, _, _ = validate_fsa_options(
        (n, m), opts.k, opts.n_iter, opts.mu, opts.lr, None, None, 0.0, opts.huber_h
    )
    if is_traced((y, sample_weight, l2)):
        raise TypeError("loss='softmax' needs concrete y, sample_weight and l2 (call fsa outside jax.jit)")
    w_host = None if w is None else np.asarray(jax.device_get(w), np.float64)
    labels, n_classes = class_labels(y, n, w_host)
    l2 = as_hyper(l2, "l2", dtype, low=0.0)
    polish, tol, max_iter = _check_polish(opts.polish.enabled, opts.polish.tol, opts.polish.max_iter, None, dtype)
    design = data.design
    if opts.scale != "std":
        design = rescale_design(design, w, opts.scale)
    k = _check_k_live(data.summary.live, check_int(opts.k, "k", low=1))
    m_real = _real_columns(data.summary.live, m, opts.execution.padded_columns)
    schedule = annealing_schedule(m_real, k, n_iter, mu).astype(np.int32)
    rounds = int(opts.polish.refine)
    polish = True if rounds else _default_polish(polish, n * n_classes, k, dtype, design.sparse)
    onehot = np.zeros((n, n_classes), dtype)
    onehot[np.arange(n), labels] = 1
    rel = np.ones((n,), dtype) if w_host is None else (w_host * (n / w_host.sum())).astype(dtype)
    show = bool(opts.execution.progress)
    bar = _work_bar(schedule, n_iter, (m,), show)  # one stage of width M: every iteration counts M
    _postfix(bar, phase="memory", width=m)
    put = jax.device_put
    with ticking(bar):
        out = softmax_run(
            design, put(onehot), put(rel), put(np.asarray(jax.device_get(data.summary.live), bool)), put(schedule),
            put(np.asarray(0.0 if lr is None else lr, dtype)), l2, tol, max_iter, put(sum_zero_basis(n_classes, dtype)),
            put(np.int32(rounds)), k=int(k), polish=bool(polish), fixed_lr=lr is not None, refine=rounds > 0,
            progress=show,
        )
        out = jax.device_get(out)
    _finish_bar(bar)
    fields = jax.device_put(out)
    result = FSAResult(
        support=fields.support, coef=fields.coef, intercept=fields.intercept, loss_path=fields.objective,
        n_kept=put(schedule), step_size=fields.step, status=fields.status, n_features=m_real,
    )
    code = int(out.status)
    if code != OK:
        warnings.warn(f"fsa: {status_message(code)}", RuntimeWarning, stacklevel=3)
    return result


@any_mesh
def fsa_predict(result: FSAResult, X) -> jax.Array:
    """Scores of a fitted FSA model: regression values, classification or ranking scores.

    ``f(x) = Σ_{j∈support} β_j x_j + b`` for linear learners, ``Σ_j (u(x_j) − ū_j)ᵀ β_j + b`` for
    PL learners (values outside a feature's training range are clipped to it). For classification
    the predicted class is ``+1`` where the score is > 0. Works inside ``jax.jit`` (traced X and
    result).

    Args:
      result: :class:`FSAResult` from :func:`fsa`.
      X: (n, M) data with the same M columns as in training (one row is fine).

    Returns:
      (n,) scores.

    >>> import numpy as np
    >>> X = np.random.default_rng(1).standard_normal((100, 5)); y = 2 * X[:, 1] + 1
    >>> res = fsa(X, y, 1, n_iter=100)
    >>> bool(np.allclose(fsa_predict(res, X), y, atol=1e-2))
    True
    """
    check_result_type(result, FSAResult, "result", "jaxselect.fsa")
    Xj = as_sparse_csr(X, "X") if is_sparse(X) else as_float_matrix(X, "X")
    return fsa_scores(result, Xj)


def check_fsa_width(result: FSAResult, width: int) -> None:
    """ValueError unless X of ``width`` columns fits ``result``: exactly ``n_features`` columns, or
    (a result built by hand, without ``n_features``) more columns than its largest support index.
    Host values only (no compiled program); nothing is checked on a traced result."""
    trained = result.n_features  # None (built by hand), an int, or a 0-d array after a jit boundary
    trained = None if trained is None or is_traced(trained) or np.ndim(trained) else int(trained)
    if trained is not None and width != trained:
        raise ValueError(f"X has {width} columns but the model was trained on {trained}; pass X with {trained}")
    if trained is None and not is_traced(result.support):
        top = int(np.max(np.asarray(result.support)))
        if width <= top:
            raise ValueError(f"X has {width} columns but the model uses feature {top}")


def _scores(support, coef, intercept, x_min, bin_width, basis_mean, X):
    """The FSA model's scores on X (traceable): X's ``support`` columns (``support`` None: X holds
    exactly the k support columns), then ``Xs @ coef + b`` or the PL responses, in X's dtype."""
    Xs = X if support is None else jnp.take(X, support, axis=1)
    dtype = Xs.dtype
    intercept = intercept.astype(dtype)
    if x_min is None:
        if intercept.ndim == 1:  # the multinomial loss: (n, C) class scores
            return Xs @ coef.astype(dtype) + intercept[None, :]
        return Xs @ coef.astype(dtype) + intercept
    bins = coef.shape[1] - 1
    idx, alpha = pl_encode(Xs, PLGrid(x_min.astype(dtype), bin_width.astype(dtype)), bins)
    return pl_scores(idx, alpha, basis_mean.astype(dtype), coef.astype(dtype)) + intercept


def _log1p_scores(support, coef, intercept, x_min, bin_width, basis_mean, X):
    """:func:`_scores` of a model fitted on ``log1p`` values: X's support columns mapped first."""
    Xs = apply_transform(jnp.take(X, support, axis=1), LOG1P)
    return _scores(None, coef, intercept, x_min, bin_width, basis_mean, Xs)


_scores_program = jit(_scores)
_log1p_scores_program = jit(_log1p_scores)


def fsa_scores(result: FSAResult, X) -> jax.Array:
    """:func:`fsa_predict` on an already validated X (a float ``jax.Array`` or numpy array, or a
    scipy CSR): the width check on the host, the scores in ONE compiled program, their finiteness
    read on the host. Sparse X: linear learners take one sparse product on the host (no program),
    piecewise-linear ones densify only the (n, k) support columns."""
    check_fsa_width(result, X.shape[1])
    model = (result.coef, result.intercept, result.status)
    transform = result_transform(result)
    if is_sparse(X):
        cols = apply_transform(X[:, host_array(result.support)], transform)
        if result.x_min is None:  # in X's dtype (js.predict gives X in the model's)
            pred = np.asarray(cols @ host_array(result.coef).astype(X.dtype, copy=False))
            pred = pred + host_array(result.intercept).astype(X.dtype)
            return host_predictions(pred.astype(X.dtype, copy=False), X)
        dense = jax.device_put(cols.toarray())
        pred = _scores_program(None, result.coef, result.intercept, result.x_min, result.bin_width,
                               result.basis_mean, dense)
        return check_predictions(pred, dense, model)
    if isinstance(X, np.ndarray):
        X = jax.device_put(X)
    program = _scores_program if transform is None else _log1p_scores_program  # (the support's columns mapped)
    pred = program(result.support, result.coef, result.intercept, result.x_min, result.bin_width, result.basis_mean, X)
    return check_predictions(pred, X, model)
