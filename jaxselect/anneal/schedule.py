"""The FSA annealing schedule (eq. 3) and its split into compacted stages (DESIGN.md §5).

Barbu et al., "Feature Selection with Annealing", §2.2, eq. (3):

    M_e = k + (M − k) · max(0, (N_iter − 2e) / (2eμ + N_iter)),   e = 1, …, N_iter,

the number of variables kept after iteration ``e``. It is a pure function of (M, k, N_iter, μ),
so it is computed on the host with numpy and everything derived from it (stage widths, stage
lengths) is static: the compiled stage programs are cached by width.

Rounding: ``M_e`` is rounded down (``floor``), which keeps it an integer in [k, M], non-increasing
in e, and equal to k from ``e = N_iter/2`` on (in particular ``M_{N_iter} = k``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["annealing_schedule", "Stage", "plan_stages", "schedule_area"]


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


class Stage(NamedTuple):
    """One compacted stage: iterations ``start .. start + length − 1`` (0-based) at ``width``."""

    start: int
    length: int
    width: int


def plan_stages(n_features: int, schedule: np.ndarray, shrink: float = 0.5, min_drop: int = 0) -> list[Stage]:
    """Split the schedule into stages of static width.

    A stage starts at full width M. Before iteration e the active count is M_{e−1}; a new stage
    (compacting to width M_{e−1}) starts when M_{e−1} ≤ ``shrink`` · width, and also once the
    schedule has reached its final value (so the long tail at M_e = k runs at width exactly k).
    The masked work inside a stage is thus at most 1/shrink times the schedule's area. A
    compaction that would drop fewer than ``min_drop`` columns is skipped (on tiny problems a
    stage costs more in compilation and dispatch than it saves).

    Args:
      n_features: M.
      schedule: (n_iter,) output of :func:`annealing_schedule`.
      shrink: compaction threshold in (0, 1).
      min_drop: smallest number of columns worth a new stage.

    Returns:
      List of :class:`Stage`, covering iterations 0..n_iter−1 in order.

    >>> [s.width for s in plan_stages(8, np.array([6, 3, 2, 2, 2]))]
    [8, 3, 2]
    """
    n_iter = len(schedule)
    final = int(schedule[-1])
    stages = []
    start, width = 0, int(n_features)
    for e in range(1, n_iter):
        active = int(schedule[e - 1])  # count before (0-based) iteration e
        if width - active >= max(min_drop, 1) and (active <= shrink * width or active == final):
            stages.append(Stage(start, e - start, width))
            start, width = e, active
    stages.append(Stage(start, n_iter - start, width))
    return stages
