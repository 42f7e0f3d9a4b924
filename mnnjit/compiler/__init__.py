"""The compiler: tracing, passes (CSE, dead-node removal, folding), fusion, plans and their cache.

Public helpers: :func:`explain`, :data:`counters`, :func:`reset_counters`, :func:`set_threshold`,
:func:`set_num_threads`, :func:`get_num_threads`, :func:`clear_caches`. Importing this package does
not import numba, nor the plan machinery (``executor``, ``plan``, ``fusion``) until a graph needs it.
"""
from __future__ import annotations

from ..settings import counters, reset_counters, serial_threshold, set_serial_threshold, set_threshold, threshold  # noqa: F401


def evaluate(roots: list) -> None:
    """Compute and cache the values of graph nodes ``roots`` (the default executor)."""
    from .executor import evaluate as run
    run(roots)


def explain(*values) -> str:
    """The plan that computing ``values`` would run (see :func:`mnnjit.compiler.executor.explain`)."""
    from .executor import explain as text
    return text(*values)


def set_num_threads(n: int) -> None:
    """Run compiled kernels on ``n`` threads (MNNJIT_NUM_THREADS sets the initial value)."""
    from ..backends import registry
    registry.get("cpu").set_num_threads(n)


def get_num_threads() -> int:
    """The number of threads compiled kernels use (imports numba)."""
    from ..backends import registry
    return registry.get("cpu").num_threads()


def clear_caches(disk: bool = False) -> None:
    """Forget cached plans and in-memory kernels (and the on-disk kernel cache when ``disk``)."""
    from ..backends import registry
    from .executor import clear_plan_cache
    clear_plan_cache()
    registry.get("cpu").clear_caches(disk)
