"""The compiler: tracing, passes (CSE, dead-node removal, folding), fusion, plans and their cache.

Public helpers: :func:`explain`, :data:`counters`, :func:`reset_counters`, :func:`set_threshold`,
:func:`set_num_threads`, :func:`get_num_threads`, :func:`clear_caches`. Importing this package does
not import numba.
"""
from __future__ import annotations

from ..settings import counters, reset_counters, serial_threshold, set_serial_threshold, set_threshold, threshold  # noqa: F401
from .executor import evaluate, explain  # noqa: F401


def set_num_threads(n: int) -> None:
    """Run compiled kernels on ``n`` threads (MNNJIT_NUM_THREADS sets the initial value)."""
    from ..backends.cpu.runtime import jit
    jit.set_num_threads(n)


def get_num_threads() -> int:
    """The number of threads compiled kernels use (imports numba)."""
    from ..backends.cpu.runtime import jit
    return jit.get_num_threads()


def clear_caches(disk: bool = False) -> None:
    """Forget cached plans and in-memory kernels (and the on-disk kernel cache when ``disk``)."""
    from ..backends.cpu.runtime import jit
    from .executor import clear_plan_cache
    clear_plan_cache()
    if disk:
        jit.clear_disk_cache()
    else:
        jit.reset()
