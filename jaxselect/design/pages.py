"""Handing a memmap's resident pages back to the kernel as the rows are consumed (the storage
detail of reading a file-backed X once, kept in the data layer)."""

from __future__ import annotations

import mmap

import numpy as np

__all__ = ["PageReleaser"]


class PageReleaser:
    """Drops the resident pages of rows of a C-contiguous ``np.memmap`` (no-op for other arrays)."""

    def __init__(self, a):
        self.mm = None
        mm = getattr(a, "_mmap", None)
        if not isinstance(a, np.memmap) or not isinstance(mm, mmap.mmap) or not hasattr(mm, "madvise"):
            return
        if not a.flags.c_contiguous or not hasattr(mmap, "MADV_DONTNEED") or a.shape[0] == 0:
            return
        if getattr(a, "mode", None) == "c":  # copy-on-write: dropping pages would drop the user's edits
            return
        probe = np.frombuffer(mm, np.uint8, count=1)
        self.start = a.ctypes.data - probe.ctypes.data  # byte offset of row 0 inside the mapping
        del probe
        self.row_bytes = a.strides[0] if a.ndim else a.itemsize
        self.size = len(mm)
        self.page = mmap.PAGESIZE
        self.done = 0  # bytes of the mapping already released
        self.mm = mm

    def release(self, start: int, stop: int) -> None:
        if self.mm is None:
            return
        lo = self.start + start * self.row_bytes
        hi = min(self.size, self.start + stop * self.row_bytes)
        lo -= lo % self.page
        if hi > lo:
            try:
                self.mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
            except (OSError, ValueError):  # a closed or unusual mapping: paging is only an optimisation
                self.mm = None
