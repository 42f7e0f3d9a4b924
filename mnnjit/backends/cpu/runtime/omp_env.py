"""How Numba's OpenMP workers wait between parallel kernels.

libgomp reads its settings once, when it is loaded (the first parallel kernel), so they are set
in the environment before that, and only when the user has set neither:

* ``GOMP_SPINCOUNT=2000``: after a parallel region a worker spins about 40-80 us before it
  sleeps. A model's kernel steps follow each other within a few microseconds, so the workers stay
  awake through a forward: a launch costs ~2 us instead of ~15 us (``OMP_WAIT_POLICY=PASSIVE``
  alone: the worker sleeps at once and each step waits for it to wake). A longer spin buys
  nothing on an idle machine and costs a lot on a shared one: with one busy process beside a
  2-thread MobileNetV2 forward, ``10000`` (~0.1-0.3 ms of spinning per wait) took 31 ms per
  forward, ``2000`` 16 ms, ``1000`` 14 ms, no spinning 12 ms, 1 thread 12 ms; on an idle machine
  ``1000`` was ~3 % slower than ``2000`` and ``10000`` (docs/DECISIONS.md, "Threads").
* ``OMP_WAIT_POLICY=PASSIVE``: beyond that count workers sleep rather than spin on (libgomp's
  default spins far longer and starves OpenBLAS's threads and other processes).

Importing this module does not import numba.
"""
from __future__ import annotations

import os

__all__ = ["configure_openmp_waiting", "SPIN_COUNT"]

#: ``GOMP_SPINCOUNT`` set when the user chose no waiting policy
SPIN_COUNT = 2000


def configure_openmp_waiting() -> None:
    """Set the waiting policy above unless ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` is set."""
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
