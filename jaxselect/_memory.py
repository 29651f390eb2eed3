"""Handing freed host memory back to the operating system between the phases of a large fit.

XLA's CPU buffers come from the C allocator. glibc's malloc keeps freed chunks of a large fit's
transients (a sparse X's compaction, a product's blocks) in its arenas, where they still count
in the process's resident memory, and a later phase whose buffers do not fit those holes grows
the process further. :func:`release_free_memory` asks glibc to return the free pages
(``malloc_trim(0)``); the fits call it between phases, where the live set shrinks. Elsewhere
(another C library, macOS, Windows) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

__all__ = ["release_free_memory"]


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_free_memory() -> bool:
    """Return the C allocator's free pages to the OS (glibc ``malloc_trim(0)``); whether it ran."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
