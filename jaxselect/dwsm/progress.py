"""Host side of dwsm_fit's progress reports (``callback`` / ``verbose``).

The user's callback is not a static argument of the jitted fit: every fit with a callback shares
one compiled program that reports to :func:`report` (``jax.debug.callback``) with the fit's call
id, and the callback is looked up in a registry here. A fresh lambda per call therefore never
recompiles.
"""

from __future__ import annotations

import itertools
import threading

__all__ = ["register", "unregister", "report", "print_progress"]

_CALLBACKS: dict = {}
_CALLBACK_ERRORS: dict = {}
_CALLBACK_LOCK = threading.Lock()
_CALL_IDS = itertools.count(1)


def report(call_id, it, active, loss, accuracy, features, best_it, best_loss):
    """Host side of the progress callback: call the function registered under ``call_id``.

    A user's callback gets ``(iteration, mean_return, accuracy)`` of the new iterate's greedy policy
    on the training rows (mean return = minus its datum-wise loss); the ``verbose`` printer gets the
    mean number of features and the best iterate so far too. Iterations skipped after an early stop
    (``patience``) are not reported. In an eager fit (``guard``) an exception raised by the user's
    function is stored and re-raised by :func:`dwsm_fit` once the fit has finished; the remaining
    iterations skip the callback.
    """
    if not bool(active):
        return
    cid = int(call_id)
    with _CALLBACK_LOCK:
        entry = _CALLBACKS.get(cid)
        failed = cid in _CALLBACK_ERRORS
    if entry is None or failed:
        return
    fn, guard = entry
    args = (it, -loss, accuracy)
    if fn is print_progress:
        args = (it, loss, accuracy, features, best_it, best_loss)
    if not guard:
        fn(*args)
        return
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - re-raised by dwsm_fit after the fit
        with _CALLBACK_LOCK:
            _CALLBACK_ERRORS[cid] = exc


def print_progress(it, loss, acc, features, best_it, best_loss):
    """The ``verbose`` printer: one line per iteration (its loss, accuracy, features; the best so far)."""
    print(
        f"[dwsm] iteration {int(it):3d}  training datum-wise loss {float(loss):.4f}  accuracy {float(acc):.4f}  "
        f"features {float(features):.2f}  | best so far: iteration {int(best_it)}, loss {float(best_loss):.4f}",
        flush=True,
    )


def register(callback, guard: bool) -> int:
    """Register ``callback`` for one fit; returns its call id (an int32 value for the compiled fit).

    ``guard``: store an exception the callback raises (an eager fit re-raises it afterwards)
    instead of letting it propagate into the runtime.
    """
    call_id = next(_CALL_IDS) % (2**31 - 1)
    if callback is not None:
        with _CALLBACK_LOCK:
            _CALLBACKS[call_id] = (callback, guard)
    return call_id


def unregister(call_id: int):
    """Forget the callback of ``call_id``; returns the exception it raised during the fit, or None."""
    with _CALLBACK_LOCK:
        _CALLBACKS.pop(call_id, None)
        return _CALLBACK_ERRORS.pop(call_id, None)
