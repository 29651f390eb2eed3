"""One status convention for every result of the library.

Every result type (:class:`~jaxselect.SelectionPath`, :class:`~jaxselect.GroupLassoFit`,
:class:`~jaxselect.RLSResult`, :class:`~jaxselect.FSAResult`, :class:`~jaxselect.DWSMPolicy`)
carries an ``int32`` field ``status``: 0 when the solve went fine, otherwise the bitwise OR of the
flags below (several conditions can hold at once). Value-dependent failures inside a jitted solve
cannot raise, so they are reported here; :func:`raise_for_status` raises for eager callers.

==========  =============================================================================
flag        meaning
==========  =============================================================================
1           non-finite values (NaN/Inf) appeared in the solve
2           ill-conditioned: a pivot was dropped or floored (a selected unit is numerically
            dependent on the ones before it, or a rank-one update lost positivity)
4           an iterative solve stopped at its iteration cap before reaching its tolerance
8           degenerate problem: every target is constant (or uncorrelated with every feature),
            so the model is the intercept-only one
==========  =============================================================================

>>> import jaxselect as js
>>> js.status_message(0), js.status_message(4)[:26]
('ok', 'an iterative solve stopped')
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "OK",
    "NONFINITE",
    "ILL_CONDITIONED",
    "NOT_CONVERGED",
    "DEGENERATE",
    "STATUS_MESSAGES",
    "SolverError",
    "status_message",
    "raise_for_status",
]

OK = 0
"""Status 0: the solve went fine."""
NONFINITE = 1
"""Status flag 1: non-finite values (NaN/Inf) appeared in the solve."""
ILL_CONDITIONED = 2
"""Status flag 2: a pivot was dropped or floored (a selected unit numerically dependent on earlier ones)."""
NOT_CONVERGED = 4
"""Status flag 4: an inner iterative solve stopped at ``max_iter`` before reaching its tolerance."""
DEGENERATE = 8
"""Status flag 8: every target is constant (b0 = 0): nothing to select, the intercept-only model."""

#: Message of every status flag (``status`` is the bitwise OR of these keys; 0 is "ok").
STATUS_MESSAGES = {
    NONFINITE: (
        "non-finite values (NaN/Inf) appeared in the solve: rescale the data, raise l2, lower the "
        "step size, or run in float64 (jax.config.update('jax_enable_x64', True) with float64 input)"
    ),
    ILL_CONDITIONED: (
        "ill-conditioned: a pivot was dropped or floored because a selected unit is numerically "
        "dependent on the ones before it (the results stay finite: the sequencing solvers give that "
        "direction coefficient 0, other solvers' gain at that step is unreliable); raise l2 or run in "
        "float64"
    ),
    NOT_CONVERGED: (
        "an iterative solve stopped at its iteration cap (max_iter) before reaching its tolerance; "
        "raise max_iter, loosen tol, or raise l2"
    ),
    DEGENERATE: (
        "degenerate problem: every target is constant (or uncorrelated with every feature: b0 = XᵀY/n = 0), "
        "so no group was selected and the model is the intercept (the target mean), as scikit-learn's "
        "OrthogonalMatchingPursuit does"
    ),
}


class SolverError(RuntimeError):
    """Raised by :func:`raise_for_status` for a result whose ``status`` is not 0.

    Attributes:
      status: int, the status code (the OR of the flags; :func:`status_message` gives its text).

    >>> import jaxselect as js
    >>> try:
    ...     raise js.SolverError(js.status_message(js.NOT_CONVERGED), js.NOT_CONVERGED)
    ... except js.SolverError as e:
    ...     print(e.status)
    4
    """

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def status_message(status) -> str:
    """Human-readable text of a status code (the messages of its flags joined by "; ").

    Args:
      status: an int or an integer array of codes (e.g. a batched ``result.status``; the flags of
        all entries are ORed).

    Returns:
      ``"ok"`` for 0, else the messages of :data:`STATUS_MESSAGES` for every flag set.

    >>> import jaxselect as js
    >>> js.status_message(0)
    'ok'
    >>> msg = js.status_message(js.NONFINITE | js.NOT_CONVERGED)  # status 5: two flags
    >>> msg.startswith("non-finite"), "max_iter" in msg
    (True, True)
    """
    code = int(np.bitwise_or.reduce(np.asarray(status, np.int64).reshape(-1))) if np.size(status) else 0
    if code == 0:
        return "ok"
    parts = [msg for flag, msg in STATUS_MESSAGES.items() if code & flag]
    unknown = code & ~sum(STATUS_MESSAGES)
    if unknown:
        parts.append(f"unknown status flag(s) {unknown}")
    return "; ".join(parts)


def raise_for_status(result):
    """Raise :class:`SolverError` if ``result.status`` is not 0; return ``result`` unchanged otherwise.

    Works on every result type of the library (anything with a ``status`` field), including
    batched results from ``jax.vmap`` (any non-zero entry raises). Call it outside ``jax.jit``.

    Raises:
      SolverError: when any entry of ``result.status`` is not 0; its ``status`` is the OR of them.
      TypeError: ``result`` has no ``status`` field.

    >>> import numpy as np, jaxselect as js
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = 2 * X[:, 1] + 1
    >>> path = js.raise_for_status(js.cs_omp(js.prepare(X, y)))
    """
    status = getattr(result, "status", None)
    if status is None:
        raise TypeError(f"raise_for_status needs a jaxselect result with a `status` field; got {type(result).__name__}")
    values = np.asarray(status)
    if values.size and np.any(values != 0):
        code = int(np.bitwise_or.reduce(values.astype(np.int64).reshape(-1)))
        raise SolverError(f"{type(result).__name__}: {status_message(code)}", code)
    return result
