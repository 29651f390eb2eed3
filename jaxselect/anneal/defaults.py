"""FSA's data-dependent defaults (``"auto"``) and the paper's settings, :data:`FSA_PAPER`.

:func:`~jaxselect.fsa` leaves five options at ``"auto"``; each is decided by the data at the
boundary, before anything is compiled (N_w below is the sum of the row weights — the number of rows
without weights, so integer weights equal repeated rows and weight-0 rows are absent):

* ``scale``: ``"auto"`` (:mod:`.scaling`) — on sparse *count data* (:func:`.scaling.is_count_data`:
  raw word counts) ``"log1p"``, the counts replaced by ``log(1 + x)`` and standardised; otherwise
  indicator columns (their non-zero entries all one value: 0/1 flags) keep their raw scale and
  every other column is standardised; a streamed X (memmap, batches, column source) is
  standardised (``"std"``).
* ``l2``: ``"auto"`` — a ridge ``8·k/N_w`` when the fit runs on ``log1p`` counts with a binary
  classification loss (``logistic``, ``huber_hinge``, ``lorenz``: labels, a loss of fixed
  scale, where it was measured); 0 otherwise (the squared loss, whose ridge would scale with y's
  variance; the multinomial loss, not measured).
* ``Polish.l1``: ``1/N_w`` for the classification losses on sparse X (scipy.sparse, BCOO/BCSR);
  None on dense X.
* ``Polish.refine``: 1 round on sparse X in memory (pointwise losses, linear learners); 0 on
  dense X.
* ``n_iter``: 500, the paper's N_iter; 30 on a sparse X of more than :data:`LARGE_SPARSE` stored
  values.

Why (measured in docs/fsa.md, "Defaults"): sparse click and text columns are mostly 0/1
indicators that standardisation would lift to unit variance; their informative columns are rare
and masked at the first iterations, which one refinement round recovers; the L1 polish
``λ = 1/N_w`` is liblinear's ``C = 1`` on 0/1 columns (``λ = c/N_w`` is ``C = 1/c``) and needs
no retuning when N grows; on 0/1 data no ridge erred less than none; and on large sparse data the
refinement round, not the length of the schedule, decides the support, so 30 iterations cost a
fraction of 500 for the same error. Raw counts are another matter (DEXTER: 300 documents, up to
hundreds of occurrences of a word): a few large counts dominate standardised columns and k
coefficients on few rows overfit — the log of the counts and a ridge that grows with k/N_w (the
MAP ridge of an isotropic Gaussian prior on the k standardised coefficients whose score variance
does not change with k) bring the default call below L1 logistic regression at the same number
of words.
Dense real data keep the paper's settings (Tables II–IV unchanged). ``**FSA_PAPER`` restores the
paper's algorithm on any data.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import is_traced
from .options import Polish

__all__ = ["AUTO", "COUNT_RIDGE", "FSA_PAPER", "LARGE_SPARSE", "auto_l2", "auto_n_iter", "resolve_defaults"]

AUTO = "auto"

#: c of ``l2="auto"``'s ridge ``c·k/N_w`` on count data (the middle, in log scale, of the plateau
#: c ∈ [2, 32] measured on DEXTER: docs/fsa.md, "Defaults").
COUNT_RIDGE = 8.0

#: Stored values above which a sparse X's ``n_iter="auto"`` is 30 instead of 500.
LARGE_SPARSE = 1 << 22

FSA_PAPER = MappingProxyType(dict(scale="std", l2=0.0, n_iter=500, mu=300.0, polish=Polish(enabled=False, l1=None, refine=0)))
"""The FSA paper's settings, read-only: Algorithm 1 with schedule (3), μ = 300, N_iter = 500,
standardised columns, no ridge, the schedule's own iterate (no polish, no refinement):
``js.fsa(X, y, k, **js.FSA_PAPER)``; with one of them changed, ``js.fsa(X, y, k,
**dict(js.FSA_PAPER, n_iter=1000))``."""

_CLASSIFY = ("logistic", "huber_hinge", "lorenz")
_POINTWISE = ("squared",) + _CLASSIFY


def is_auto(value) -> bool:
    return isinstance(value, str) and value == AUTO


def _stored(X) -> int:
    """Stored values of a sparse X (scipy ``nnz``, BCOO ``nse``, a design's entries)."""
    for name in ("nnz", "nse"):
        if hasattr(X, name):
            return int(getattr(X, name))
    data = getattr(X, "data", None)
    return int(np.size(data)) if data is not None else 0


def auto_n_iter(X, sparse: bool | None = None) -> int:
    """``n_iter="auto"``: 30 on a sparse X of more than :data:`LARGE_SPARSE` stored values, else 500."""
    if sparse is None:
        from ..design import is_sparse

        sparse = is_sparse(X)
    return 30 if sparse and _stored(X) > LARGE_SPARSE else 500


def _rows_of_weight(n: int, sample_weight) -> Any:
    """N_w: the sum of the row weights (n without weights)."""
    if sample_weight is None:
        return n
    if is_traced(sample_weight) or isinstance(sample_weight, jax.Array):
        return jnp.sum(sample_weight)  # on the device (rows spread over processes: their global sum)
    total = float(np.sum(np.asarray(sample_weight, np.float64)))
    return total if total > 0 else n  # (a bad weight vector is refused by the front door)


def _host_weights(sample_weight, n: int) -> bool:
    """None, or host weights of X's rows that the front door will accept the shape and dtype of
    (others are left to its message)."""
    if sample_weight is None:
        return True
    if is_traced(sample_weight) or isinstance(sample_weight, jax.Array):
        return False
    return np.shape(sample_weight) == (n,) and np.asarray(sample_weight).dtype.kind in "biuf"


def auto_l2(l2, options, X, sample_weight):
    """``l2="auto"``: ``COUNT_RIDGE·k/N_w`` when the (resolved) ``options`` fit ``log1p`` values with
    a binary classification loss, else 0; any other ``l2`` as given. k is the asked k clipped to X's
    columns; an invalid k leaves 0 (its own check raises)."""
    if not is_auto(l2):
        return l2
    from .scaling import LOG1P

    loss = options.loss if isinstance(options.loss, str) else None
    k = options.k
    whole = isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k >= 1
    if options.scale != LOG1P or loss not in _CLASSIFY or not whole:
        return 0.0
    n, m = (int(d) for d in np.shape(X))
    return COUNT_RIDGE * min(int(k), m) / _rows_of_weight(n, sample_weight)


def resolve_defaults(options, X, sample_weight, *, sparse: bool, streamed: bool):
    """The options with every ``"auto"`` replaced by its value for this X (table above).

    Args:
      options: the :class:`~jaxselect.anneal.fsa.FSAOptions` of the call.
      X: the data (its stored-value count for a sparse X).
      sample_weight: None or the (N,) weights (N_w is their sum).
      sparse: X is stored sparse.
      streamed: X is streamed (a memmap, batches, a column source, a numpy X above ``max_memory``).
    """
    polish = options.polish
    linear = options.bins is None
    loss = options.loss if isinstance(options.loss, str) else None
    scale = options.scale
    if is_auto(scale) and (streamed or not linear):
        scale = "std"
    if is_auto(scale) and sparse:
        from .scaling import LOG1P, is_count_data

        if is_count_data(X, sample_weight):
            scale = LOG1P  # raw counts: log(1 + x), standardised (and l2="auto"'s ridge)
    if is_auto(scale) and type(X) is np.ndarray and X.ndim == 2 and _host_weights(sample_weight, X.shape[0]):
        from .scaling import has_indicator_columns

        if not has_indicator_columns(X, sample_weight):
            scale = "std"  # the same fit, without the pass that looks for indicators on the device
    n_iter = options.n_iter
    if is_auto(n_iter):
        n_iter = auto_n_iter(X, sparse)
    polished = polish.enabled is not False
    l1 = polish.l1
    if is_auto(l1):
        wanted = sparse and linear and polished and loss in _CLASSIFY
        l1 = 1.0 / _rows_of_weight(int(np.shape(X)[0]), sample_weight) if wanted else None
    refine = polish.refine
    if is_auto(refine):
        refine = 1 if (sparse and linear and polished and not streamed and loss in _POINTWISE) else 0
    polish = polish._replace(l1=l1, refine=refine)
    return options._replace(scale=scale, n_iter=n_iter, polish=polish)
