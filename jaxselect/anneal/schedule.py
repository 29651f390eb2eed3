"""The FSA annealing schedule (eq. 3) and the fixed stage widths of the compiled run (DESIGN.md §5).

Barbu et al., "Feature Selection with Annealing", §2.2, eq. (3):

    M_e = k + (M − k) · max(0, (N_iter − 2e) / (2eμ + N_iter)),   e = 1, …, N_iter,

the number of variables kept after iteration ``e``. It is computed on the host in float64
(:func:`annealing_schedule`) and handed to the compiled run as *data* (an int32 array), so μ and
N_iter never enter a compiled program.

Rounding: ``M_e`` is rounded down (``floor``), which keeps it an integer in [k, M], non-increasing
in e, and equal to k from ``e = N_iter/2`` on (in particular ``M_{N_iter} = k``).

Stages. :func:`fsa` runs the schedule on a problem that shrinks: the widths of its stages depend
only on M and the *k-bucket* (:func:`stage_widths`: successive halvings of M down to
:func:`k_bucket`, without M/2), never on μ, N_iter or k itself, so one compiled program serves every schedule
of a shape. With a ``floor`` (FSA passes min(:data:`SHARED_WIDTH`, ⌈M/4⌉) on small inputs) the
last stage is at least that wide, so every k up to the floor shares one program: a grid over k
compiles once.
:func:`plan_stages` says which iterations each width runs (some may run none).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["SHARED_WIDTH", "annealing_schedule", "Stage", "plan_stages", "schedule_area", "stage_widths", "k_bucket"]

#: The least width of the last stage on small inputs, at most M/4 (:func:`stage_widths`'s
#: ``floor``): every k up to it shares one compiled run of a shape.
SHARED_WIDTH = 256


def annealing_schedule(n_features: int, k: int, n_iter: int, mu: float) -> np.ndarray:
    """Kept-count schedule of eq. (3).

    Args:
      n_features: M, number of features (or feature groups) at the start.
      k: number kept at the end (1 ≤ k ≤ M).
      n_iter: N_iter ≥ 1.
      mu: annealing rate μ ≥ 0 (larger = faster removal).

    Returns:
      (n_iter,) int64 array, entry ``e − 1`` is ``M_e``.

    >>> annealing_schedule(1000, 10, 500, 300.0)[:3].tolist()
    [458, 298, 222]
    """
    e = np.arange(1, n_iter + 1, dtype=np.float64)
    frac = np.maximum(0.0, (n_iter - 2.0 * e) / (2.0 * e * mu + n_iter))
    m = k + np.floor((n_features - k) * frac + 1e-9)
    return np.clip(m, k, n_features).astype(np.int64)


def schedule_area(n_features: int, schedule: np.ndarray) -> int:
    """Total number of column-iterations Σ_e M_{e−1} (the work of Algorithm 1, Table I)."""
    prev = np.concatenate([[n_features], schedule[:-1]])
    return int(prev.sum())


def k_bucket(k: int, n_features: int) -> int:
    """The width of the last stage for a given k: k rounded up to ``m·2^j`` with m ∈ {4, 5, 6, 7}
    (at most 25 % above k, at most M). Every k of a bucket shares the compiled run.

    >>> [k_bucket(k, 1000) for k in (1, 5, 9, 30, 33, 100)]
    [1, 5, 10, 32, 40, 112]
    """
    if k <= 4:
        return min(k, n_features)
    j = (k - 1).bit_length() - 3  # 2^(j+2) < k <= 2^(j+3)
    step = 1 << j
    return min(-(-k // step) * step, n_features)


def stage_widths(n_features: int, k: int, min_drop: int = 0, floor: int = 0) -> tuple[int, ...]:
    """Widths of the compacted stages: M, then successive halvings ⌈W/2⌉ while they stay above the
    last width, then the last width — the k-bucket, or ``floor`` if that is larger (at most M) —
    without the first halving (M/2): the first compaction keeps a
    quarter of the columns. A compacted copy of M/2 columns would be alive with the next one (M/4)
    at the gather between them, 0.75× X of memory (now 0.375× X), and the schedule of eq. (3)
    passes M/2 within its first iterations for the default μ, which the full-width stage runs on
    X itself at about the cost of the saved gather. A halving that would drop fewer than
    ``min_drop`` columns from the previous width is skipped (on tiny problems a stage costs more
    to compile than it saves).

    >>> stage_widths(1000, 30)
    (1000, 250, 125, 63, 32)
    >>> stage_widths(40, 3, min_drop=32)
    (40, 5, 3)
    >>> stage_widths(1000, 30, floor=256) == stage_widths(1000, 200, floor=256) == (1000, 256)
    True
    """
    last = min(max(k_bucket(k, n_features), int(floor)), int(n_features))
    widths = [int(n_features)]
    w = int(n_features)
    first = True
    while -(-w // 2) > last:
        w = -(-w // 2)
        if first:  # no copy of half the columns
            first = False
            continue
        if widths[-1] - w >= max(min_drop, 1):
            widths.append(w)
    if widths[-1] > last:
        widths.append(last)
    return tuple(widths)


class Stage(NamedTuple):
    """One compacted stage: iterations ``start .. start + length − 1`` (0-based) at ``width``."""

    start: int
    length: int
    width: int


def plan_stages(n_features: int, schedule: np.ndarray, widths: tuple[int, ...]) -> list[Stage]:
    """The iterations each stage width runs (the host mirror of the compiled run's stage bounds).

    Before iteration e the active count is M_{e−1} (M_0 = M); iteration e runs in the narrowest
    stage whose width holds M_{e−1}. Stages are contiguous and in order; a stage the schedule
    jumps over has ``length`` 0. Since consecutive widths differ by at most 2×, the masked work
    Σ width·length is at most 2× the schedule's area (plus the last stage's bucket padding).

    Args:
      n_features: M.
      schedule: (n_iter,) output of :func:`annealing_schedule`.
      widths: decreasing stage widths starting at M (:func:`stage_widths`); the last must be ≥ k.

    Returns:
      One :class:`Stage` per width, covering iterations 0..n_iter−1 in order.

    >>> [(s.length, s.width) for s in plan_stages(8, np.array([6, 3, 2, 2, 2]), (8, 4, 2))]
    [(2, 8), (1, 4), (2, 2)]
    """
    n_iter = len(schedule)
    prev = np.concatenate([[n_features], np.asarray(schedule)[:-1]])
    starts = [0] + [int(np.sum(prev > w)) for w in widths[1:]]
    ends = starts[1:] + [n_iter]
    return [Stage(s, e - s, w) for s, e, w in zip(starts, ends, widths)]
