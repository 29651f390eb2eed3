"""Optional progress bars (``tqdm``) for the calls that can run for minutes; off by default.

``progress=True`` needs tqdm (``pip install jaxselect[progress]``); the error says so. Bars are
updated on the host between compiled pieces of work, never from inside a compiled solve.
"""

from __future__ import annotations

import numpy as np

__all__ = ["check_progress", "progress_bar"]


def check_progress(progress) -> bool:
    """Validate a ``progress=`` option (a bool)."""
    if not isinstance(progress, (bool, np.bool_)):
        raise TypeError(f"progress must be True or False; got {progress!r}")
    return bool(progress)


def progress_bar(iterable=None, *, enabled: bool, total=None, desc: str, unit: str = "it"):
    """``tqdm(iterable, ...)`` when ``enabled`` (ImportError naming the extra when tqdm is missing),
    else ``iterable`` itself (or a no-op bar when ``iterable`` is None, for manual ``update``)."""
    if not enabled:
        return iterable if iterable is not None else _NoBar()
    try:
        from tqdm.auto import tqdm  # optional dependency
    except ImportError as err:
        raise ImportError(
            "progress=True needs tqdm, which is not installed: pip install tqdm (or jaxselect[progress]), "
            "or leave progress=False"
        ) from err
    return tqdm(iterable, total=total, unit=unit, desc=desc)


class _NoBar:
    """The bar of ``progress=False``: accepts what a tqdm bar accepts and shows nothing."""

    def update(self, n=1):
        pass

    def set_postfix(self, *args, **kwargs):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
