"""How Numba's OpenMP workers wait between parallel kernels.

libgomp reads its settings once, when it is loaded (the first parallel kernel), so they are set
in the environment before that, and only when the user has set neither:

* ``GOMP_SPINCOUNT=10000``: after a parallel region a worker spins about 0.1-0.3 ms before it
  sleeps. A model's kernel steps follow each other within microseconds, so the workers stay awake
  through a forward: a launch costs ~2.5 us instead of ~17 us (``OMP_WAIT_POLICY=PASSIVE`` alone:
  the worker sleeps at once and each step waits for it to wake). Measured (docs/notes/models.md):
  MobileNetV2 at 2 threads 8-20 % faster, and a numpy-style loop of OpenBLAS matmuls and fused
  kernels no slower.
* ``OMP_WAIT_POLICY=PASSIVE``: beyond that count workers sleep rather than spin on (libgomp's
  default spins far longer and starves OpenBLAS's threads and other processes).

Importing this module does not import numba.
"""
from __future__ import annotations

import os

__all__ = ["configure_openmp_waiting", "SPIN_COUNT"]

#: ``GOMP_SPINCOUNT`` set when the user chose no waiting policy
SPIN_COUNT = 10000


def configure_openmp_waiting() -> None:
    """Set the waiting policy above unless ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` is set."""
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
