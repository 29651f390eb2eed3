"""FSA's option records: built once at :func:`~jaxselect.fsa`'s boundary, passed down as one value.

:func:`~jaxselect.fsa` mixes several concerns; the ones beside the data, the model and the
schedule are grouped into small frozen records (NamedTuples of plain values, hashable):

* :class:`Polish` — the fit after the schedule: the switch, its tolerance and cap, the L1 penalty
  and the rounds of gradient support pursuit (``refine``);
* :class:`Execution` — how and where the call runs: the memory budget of a streamed X, the mesh
  its row blocks are split over, the checkpoint file and the progress bar;
* :class:`PiecewiseLinear` — the piecewise-linear learners of §2.5.1 (bins and the smoothness
  prior of eq. 13); ``learner=None`` is the linear learner.

The keywords these records replace (``tol``, ``max_iter``, ``l1``, ``refine``, ``max_memory``,
``mesh``, ``checkpoint``, ``progress``, ``bins``, ``smoothness``, ``pairs``, ``huber_h``) keep
working for one release with a ``DeprecationWarning`` (:func:`take_deprecated`).
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

__all__ = ["Execution", "PiecewiseLinear", "Polish", "take_deprecated"]


class Polish(NamedTuple):
    """The fit on the final support after the schedule (see ``polish`` in :func:`~jaxselect.fsa`).

    Attributes:
      enabled: True, False, or None (default: decided by the support's size; see ``fsa``).
      tol: the polish's gradient tolerance relative to σ (None: 1e-5 in float32, 1e-9 in float64).
      max_iter: cap on its iterations (≥ 1); stopping there before ``tol`` sets NOT_CONVERGED.
      l1: ``"auto"`` (default: ``1/N_w`` for a classification loss on sparse X, else None; see
        :mod:`.defaults`), None or λ ≥ 0 (may be traced): the L1 polish ``F + λ‖c‖₁`` (implies
        ``enabled``).
      refine: ``"auto"`` (default: 1 on sparse X in memory with a pointwise loss, else 0) or
        R ≥ 0 rounds of gradient support pursuit after the schedule (implies ``enabled``).

    >>> import jaxselect as js
    >>> js.anneal.Polish(tol=1e-6, l1=1e-3)
    Polish(enabled=None, tol=1e-06, max_iter=100, l1=0.001, refine='auto')
    """

    enabled: bool | None = None
    tol: Any = None
    max_iter: int = 100
    l1: Any = "auto"
    refine: Any = "auto"


class Execution(NamedTuple):
    """How and where :func:`~jaxselect.fsa` runs (storage and execution; see its docstring).

    Attributes:
      max_memory: bytes a streamed X's working set may take (``"auto"``: a quarter of the
        available memory; None: no budget, an in-memory X never streams).
      mesh: None or a :class:`jax.sharding.Mesh` over which a streamed X's row blocks are split.
      checkpoint: None or a file path: the streamed phase's state at every stage boundary.
      progress: show a progress bar (needs ``tqdm``) whose count is the work done, columns ×
        iterations, ticked by every iteration (the compiled ones through a ``jax.debug.callback``:
        a run with the bar is its own compiled program).
      padded_columns: p ≥ 0, the number of X's last columns that are padding (constant columns
        appended to reach a shape bucket, :func:`jaxselect.design.buckets.pad_design`): the
        schedule anneals from M − p columns, so the fit is the one on X without them, while the
        compiled program is that of M columns (shared with nearby column counts). X in memory
        only; the padding columns must be constant (ValueError otherwise).

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(60, 8)).astype(np.float32)
    >>> y = X[:, 0] - 2 * X[:, 3]
    >>> js.fsa(X, y, 2, n_iter=50, execution=js.Execution(max_memory=None)).support.tolist()
    [0, 3]
    """

    max_memory: Any = "auto"
    mesh: Any = None
    checkpoint: Any = None
    progress: bool = False
    padded_columns: int = 0


class PiecewiseLinear(NamedTuple):
    """Piecewise-linear learners (§2.5.1): B + 1 coefficients per feature and the prior of eq. (13).

    Attributes:
      bins: B ≥ 1.
      smoothness: weight c ≥ 0 of the second-order smoothness prior of eq. (13).

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(80, 6)).astype(np.float32)
    >>> y = np.sin(2 * X[:, 1]) + X[:, 4] ** 2
    >>> res = js.fsa(X, y, 2, n_iter=60, learner=js.PiecewiseLinear(bins=6, smoothness=0.1))
    >>> sorted(res.support.tolist())
    [1, 4]
    """

    bins: int
    smoothness: float = 0.0


#: Old keyword -> (record, field) of its new spelling.
MOVES = {
    "tol": ("polish", "tol"),
    "max_iter": ("polish", "max_iter"),
    "l1": ("polish", "l1"),
    "refine": ("polish", "refine"),
    "max_memory": ("execution", "max_memory"),
    "mesh": ("execution", "mesh"),
    "checkpoint": ("execution", "checkpoint"),
    "progress": ("execution", "progress"),
    "bins": ("learner", "bins"),
    "smoothness": ("learner", "smoothness"),
}
#: The new spelling of each old keyword, for the warning.
SPELLING = {
    "tol": "polish=js.anneal.Polish(tol=...)",
    "max_iter": "polish=js.anneal.Polish(max_iter=...)",
    "l1": "polish=js.anneal.Polish(l1=...)",
    "refine": "polish=js.anneal.Polish(refine=...)",
    "max_memory": "execution=js.anneal.Execution(max_memory=...)",
    "mesh": "execution=js.anneal.Execution(mesh=...)",
    "checkpoint": "execution=js.anneal.Execution(checkpoint=...)",
    "progress": "execution=js.anneal.Execution(progress=...)",
    "bins": "learner=js.anneal.PiecewiseLinear(bins=...)",
    "smoothness": "learner=js.anneal.PiecewiseLinear(bins, smoothness=...)",
    "pairs": "y=pairs (the ranking loss's target)",
    "huber_h": "loss=js.losses.HuberHinge(h=...)",
}


def take_deprecated(fn: str, deprecated: dict, allowed, stacklevel: int = 3) -> dict:
    """The old keywords of ``fn`` that were passed (a dict), each with a ``DeprecationWarning``
    naming its new spelling; TypeError for a keyword ``fn`` never had."""
    unknown = sorted(set(deprecated) - set(allowed))
    if unknown:
        raise TypeError(f"{fn}() got an unexpected keyword argument {unknown[0]!r}")
    for name in deprecated:
        warnings.warn(
            f"{fn}({name}=...) is deprecated and will be removed in the next release: pass {SPELLING[name]}",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
    return dict(deprecated)


def as_polish(polish, old: dict) -> Polish:
    """The :class:`Polish` record of ``polish`` (a bool, None or a record) and the old keywords."""
    if isinstance(polish, Polish):
        record = polish
    else:
        record = Polish(enabled=polish)
    moved = {MOVES[k][1]: v for k, v in old.items() if MOVES.get(k, ("",))[0] == "polish"}
    if moved and isinstance(polish, Polish):
        raise TypeError(f"give the polish options in polish=Polish(...) or as keywords, not both ({sorted(moved)})")
    return record._replace(**moved)


def as_execution(execution, old: dict) -> Execution:
    if execution is None:
        record = Execution()
    elif isinstance(execution, Execution):
        record = execution
    else:
        raise TypeError(f"execution must be a js.anneal.Execution record or None; got {type(execution).__name__}")
    moved = {MOVES[k][1]: v for k, v in old.items() if MOVES.get(k, ("",))[0] == "execution"}
    if moved and execution is not None:
        raise TypeError(f"give the execution options in execution=Execution(...) or as keywords, not both ({sorted(moved)})")
    return record._replace(**moved)


def as_learner(learner, old: dict):
    """``(bins, smoothness)`` of ``learner`` (None: linear, a :class:`PiecewiseLinear`) and the old
    ``bins``/``smoothness`` keywords."""
    if learner is not None and not isinstance(learner, PiecewiseLinear):
        raise TypeError(f"learner must be None (linear) or js.anneal.PiecewiseLinear(bins, smoothness); got {learner!r}")
    if learner is not None and ("bins" in old or "smoothness" in old):
        raise TypeError("give bins/smoothness in learner=PiecewiseLinear(...) or as keywords, not both")
    if learner is not None:
        return learner.bins, learner.smoothness
    return old.get("bins"), old.get("smoothness", 0.0)
