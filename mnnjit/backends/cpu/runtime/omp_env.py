"""How Numba's OpenMP workers wait between parallel kernels: :func:`mnnjit.threads.configure_openmp_waiting`
(which has the policy and the measurements behind it), under the CPU runtime's name for it.

Importing this module does not import numba.
"""
from __future__ import annotations

from mnnjit.threads import SPIN_COUNT, configure_openmp_waiting

__all__ = ["configure_openmp_waiting", "SPIN_COUNT"]
