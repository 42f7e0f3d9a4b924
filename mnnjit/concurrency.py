"""Running compiled kernels from several Python threads at once.

Numba runs ``parallel=True`` kernels on a threading layer: TBB or OpenMP (both take launches from
any number of threads), or, when neither library is installed, its own "workqueue" layer, which
terminates the process (``SIGABRT``) when two threads launch parallel kernels at the same time.
Slim container images often lack ``libgomp``, and so end up on the workqueue layer.

:func:`launch_guard` is the one place that knows: the places that launch parallel kernels for a
graph (a model plan's kernel steps, the compiler's evaluation of a graph) run inside it. On TBB or
OpenMP it is a no-op; on the workqueue layer it is a process-wide lock, so threads take turns
instead of killing the process.

Probing the layer loads libgomp (Numba's OpenMP pool), which reads its waiting policy only then:
:func:`serial_launches` sets that policy first (:func:`mnnjit.threads.configure_openmp_waiting`),
else a process whose first parallel kernel comes through a graph evaluation keeps libgomp's
long default spin.

Importing this module does not import numba, nor anything else from mnnjit.
"""
from __future__ import annotations

import contextlib
import importlib
import sys
import threading
from typing import ContextManager

__all__ = ["launch_guard", "serial_launches"]

#: taken around parallel launches on the workqueue layer (reentrant: a graph evaluation may run a
#: model plan inside it)
_LOCK = threading.RLock()
_FREE: ContextManager = contextlib.nullcontext()
#: the decision, once numba is loaded: [guard]
_decided: list = []


def serial_launches() -> bool:
    """Whether numba will run parallel kernels on its workqueue layer (not thread-safe): chosen
    by ``NUMBA_THREADING_LAYER=workqueue``, or the only one whose library loads."""
    from mnnjit.threads import configure_openmp_waiting
    configure_openmp_waiting()      # before the probe below loads libgomp
    numba = sys.modules.get("numba")
    if numba is None:
        numba = importlib.import_module("numba")
    layer = str(getattr(numba.config, "THREADING_LAYER", "default")).lower()
    if layer == "workqueue":
        return True
    if layer in ("tbb", "omp", "safe", "threadsafe"):
        return False        # numba raises at the first launch if no such library loads
    # "default" takes TBB, else OpenMP, else the workqueue; "forksafe" excludes GNU OpenMP
    pools = ("tbbpool",) if layer == "forksafe" else ("tbbpool", "omppool")
    for mod in ("numba.np.ufunc." + p for p in pools):
        try:
            importlib.import_module(mod)
            return False
        except ImportError:  # the layer's library (libtbb, libgomp) is not installed
            continue
    return True


def launch_guard() -> ContextManager:
    """A context to run parallel kernels in: a no-op, or a process-wide lock on the workqueue
    layer (see the module docstring). The first call imports numba (only code about to launch
    kernels asks)."""
    if _decided:
        return _decided[0]
    guard = _LOCK if serial_launches() else _FREE
    _decided.append(guard)
    return guard
