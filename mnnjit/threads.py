"""Thread counts: numpy's bundled OpenBLAS and Numba's kernel threads, set in one place.

* :func:`openblas` finds numpy's OpenBLAS library and its ``get``/``set_num_threads`` functions once
  (numpy wheels bundle ``scipy_openblas`` with 64-bit symbol suffixes, older ones plain OpenBLAS).
* :class:`blas_threads` pins OpenBLAS to one thread inside a block, optionally only for products
  below :data:`SMALL_GEMM` multiply-adds: waking OpenBLAS's threads costs more than they save on small
  products, and while Numba's workers run a plan's kernels OpenBLAS's own threads fight them.
* :func:`set_kernel_threads` sets Numba's thread count for the calling thread when Numba is loaded
  (it never imports Numba: a process that compiled nothing has nothing to set).
* :func:`configure_openmp_waiting` sets how Numba's OpenMP workers wait between parallel kernels.
  libgomp reads it once, when it is loaded, so whatever may load it first (a kernel module's
  ``numba_setup``, :func:`mnnjit.concurrency.serial_launches` probing the threading layer) calls
  this before; it lives here, below every layer, so each of them can.

No other module looks for OpenBLAS or calls ``numba.set_num_threads`` itself.
"""
from __future__ import annotations

import ctypes
import glob
import os
import sys
from typing import Any, Callable, Optional, Tuple

import numpy as np

#: ``GOMP_SPINCOUNT`` set when the user chose no waiting policy (:func:`configure_openmp_waiting`)
SPIN_COUNT = 2000

#: GEMMs with fewer multiply-adds run OpenBLAS on one thread (see the module docstring).
SMALL_GEMM = 1 << 26

_found: list = []


def openblas() -> Optional[Tuple[str, Callable[[], int], Callable[[int], Any], bool]]:
    """(library path, get_num_threads, set_num_threads, 64-bit interface) of numpy's OpenBLAS, or None."""
    if not _found:
        hit = None
        dirs = {os.path.dirname(np.__file__) + ".libs",
                os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")}
        for path in sorted(p for d in dirs for p in glob.glob(os.path.join(d, "lib*openblas*.so*"))):
            try:
                lib = ctypes.CDLL(path)
            except OSError:  # an unreadable library: try the next
                continue
            for prefix, suffix, wide in (("scipy_openblas_", "64_", True), ("scipy_openblas_", "", False),
                                         ("openblas_", "", False)):
                get = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
                put = getattr(lib, f"{prefix}set_num_threads{suffix}", None)
                if get is not None and put is not None:
                    get.restype = ctypes.c_int
                    put.argtypes, put.restype = [ctypes.c_int], None
                    hit = (path, get, put, wide)
                    break
            if hit:
                break
        _found.append(hit)
    return _found[0]


def set_blas_threads(n: int) -> None:
    """Run OpenBLAS on ``n`` threads (capped at the CPU count); nothing when OpenBLAS is not found."""
    lib = openblas()
    if lib is not None:
        lib[2](max(1, min(int(n), os.cpu_count() or 1)))


class blas_threads:  # noqa: N801 - a context manager
    """OpenBLAS on one thread inside the block (for every product, or only below ``SMALL_GEMM``
    multiply-adds when ``macs`` is given); the previous count is restored on exit."""

    __slots__ = ("macs", "restore")

    def __init__(self, macs: int | None = None) -> None:
        self.macs = macs
        self.restore: int | None = None

    def __enter__(self) -> "blas_threads":
        lib = openblas() if self.macs is None or self.macs < SMALL_GEMM else None
        if lib is not None:
            before = lib[1]()
            if before > 1:
                lib[2](1)
                self.restore = before
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.restore is not None:
            openblas()[2](self.restore)
            self.restore = None


def set_kernel_threads(n: int) -> None:
    """Use ``n`` Numba worker threads on this thread, capped at Numba's pool (only when Numba is loaded)."""
    numba = sys.modules.get("numba")
    if numba is None:
        return
    try:
        numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))
    except (ValueError, AttributeError):  # numba without a usable threading layer
        pass


def configure_openmp_waiting() -> None:
    """Set OpenMP's waiting policy for Numba's workers, unless ``OMP_WAIT_POLICY`` or
    ``GOMP_SPINCOUNT`` is set (a user's choice wins). Call it before libgomp loads.

    * ``GOMP_SPINCOUNT=2000``: after a parallel region a worker spins about 40-80 us before it
      sleeps. A model's kernel steps follow each other within a few microseconds, so the workers
      stay awake through a forward: a launch costs ~2 us instead of ~15 us (``OMP_WAIT_POLICY=PASSIVE``
      alone: the worker sleeps at once and each step waits for it to wake). A longer spin buys
      nothing on an idle machine and costs a lot on a shared one: with one busy process beside a
      2-thread MobileNetV2 forward, ``10000`` (~0.1-0.3 ms of spinning per wait) took 31 ms per
      forward, ``2000`` 16 ms, ``1000`` 14 ms, no spinning 12 ms, 1 thread 12 ms; on an idle machine
      ``1000`` was ~3 % slower than ``2000`` and ``10000`` (docs/DECISIONS.md, "Threads").
    * ``OMP_WAIT_POLICY=PASSIVE``: beyond that count workers sleep rather than spin on (libgomp's
      default spins far longer and starves OpenBLAS's threads, the Python thread between kernels
      and other processes).
    """
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
