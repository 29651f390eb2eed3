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


def report(call_id, it, n_iter, loss, accuracy, features, best_it, best_loss, loss0=None, accuracy0=None, features0=None):
    """Host side of the progress callback: call the function registered under ``call_id``.

    A user's callback gets ``(iteration, mean_return, accuracy)`` of the new iterate's greedy policy
    on the training rows (mean return = minus its datum-wise loss); the ``verbose`` printer gets the
    mean number of features, the best iterate so far and θ_0's figures too. Iterations are numbered
    as the iterates: iteration t (1..n_iter) makes θ_t, and θ_0 (classify at once) is iteration 0.
    Iterations skipped after an early stop (``patience``) are not reported. In an eager fit
    (``guard``) an exception raised by the user's function is stored and re-raised by
    :func:`dwsm_fit` once the fit has finished; the remaining iterations skip the callback.
    """
    cid = int(call_id)
    with _CALLBACK_LOCK:
        entry = _CALLBACKS.get(cid)
        failed = cid in _CALLBACK_ERRORS
    if entry is None or failed:
        return
    fn, guard = entry
    args = (int(it), -float(loss), float(accuracy))
    if fn is print_progress:
        args = (it, n_iter, loss, accuracy, features, best_it, best_loss, loss0, accuracy0, features0)
    if not guard:
        fn(*args)
        return
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - re-raised by dwsm_fit after the fit
        with _CALLBACK_LOCK:
            _CALLBACK_ERRORS[cid] = exc


def print_progress(it, n_iter, loss, acc, features, best_it, best_loss, loss0=None, acc0=None, features0=None):
    """The ``verbose`` printer: one line per iteration t = 1..n_iter (θ_t's training figures and the
    best iterate so far, numbered the same way: 0 is θ_0, classify at once); before the first, θ_0's line."""
    it, n_iter, best_it = int(it), int(n_iter), int(best_it)
    width = len(str(n_iter))
    if it == 1 and loss0 is not None:
        print(
            f"[dwsm] iteration {0:>{width}d}/{n_iter}  training datum-wise loss {float(loss0):.4f}  "
            f"accuracy {float(acc0):.4f}  features {float(features0):.2f}  (θ_0: classify at once)",
            flush=True,
        )
    note = " (θ_0: classify at once)" if best_it == 0 else ""
    print(
        f"[dwsm] iteration {it:>{width}d}/{n_iter}  training datum-wise loss {float(loss):.4f}  accuracy {float(acc):.4f}  "
        f"features {float(features):.2f}  | best so far: iteration {best_it}, loss {float(best_loss):.4f}{note}",
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
