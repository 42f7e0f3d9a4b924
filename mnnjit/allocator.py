"""The C allocator's policy for this process: freed large blocks stay mapped.

Every value mnnjit computes is a fresh numpy array, and ``read()`` hands the caller a copy of its
own, so a numpy-style loop over 64,000-element arrays frees two blocks of 256 KB or more per call.
glibc's default policy gives the top of the heap back to the OS whenever more than its trim
threshold (twice the current mmap threshold: 1 MB after a 512 KB block) is free there, so each new
result is faulted in page by page again: a concatenate of two [4, 16, 10, 100] float32 arrays took
0.9 ms against numpy's 12 us, and 40 us once the pages stay mapped.

:func:`configure` fixes glibc's mmap threshold at 32 MB and its trim threshold at 64 MB: the values
glibc's own dynamic policy settles at once a 32 MB block has been freed, so a process keeps at most
what it would keep after one large array anyway. Nothing is changed when the user set
``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` (their choice wins), when
``MNNJIT_MALLOC=default``, or on a C library without ``mallopt`` (musl, macOS, Windows).
"""
from __future__ import annotations

import os

#: glibc's mallopt parameter numbers (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 64 << 20

_configured: bool | None = None


def configure() -> bool:
    """Apply the policy above once per process; whether it is in effect."""
    global _configured
    if _configured is not None:
        return _configured
    _configured = False
    if os.environ.get("MNNJIT_MALLOC", "").strip().lower() == "default":
        return False
    if any(k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")):
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
        gnu = libc.gnu_get_libc_version  # glibc only: other C libraries' mallopt takes other numbers
    except (OSError, AttributeError):
        return False
    del gnu
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # the mmap threshold first: setting either one turns glibc's dynamic adjustment off
    _configured = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _configured
