"""Executor settings of MNN.expr: lazy_eval, set_lazy_mode, gc, set_thread_number,
set_global_executor_config (what each means for mnnjit is in docs/COMPATIBILITY.md)."""
from __future__ import annotations

import gc as _gc
import sys
from typing import Any

from ..threads import set_blas_threads, set_kernel_threads

#: Current settings (read by the compiler/backends; plain data so importing this is free).
settings: dict[str, Any] = {"lazy": False, "lazy_mode": 0, "threads": 4, "backend": 0, "precision": 0}


def lazy_eval(lazy: bool) -> None:
    """Record MNN's lazy-evaluation switch.

    mnnjit always builds a lazy graph and computes a value when it is first read (so fusion can
    happen); with lazy evaluation off MNN computes each op as it is built. Results are identical.
    """
    settings["lazy"] = bool(lazy)


def set_lazy_mode(mode: int) -> None:
    """Record MNN's lazy mode (0: everything deferred, 1: geometry computed eagerly); no effect on results."""
    mode = int(mode)
    if mode not in (0, 1):
        raise ValueError(f"set_lazy_mode: mode must be 0 or 1, got {mode}")
    settings["lazy_mode"] = mode


def gc(full: Any = True) -> None:
    """Release memory: drops unreachable graph nodes and their cached values (``full`` is ignored, as in MNN)."""
    _gc.collect()


def _apply_threads(n: int) -> None:
    set_blas_threads(n)
    compiler = sys.modules.get("mnnjit.compiler")
    if compiler is not None and "numba" in sys.modules:  # keep the compiler's own thread setting in step
        try:
            compiler.set_num_threads(n)
        except Exception:  # pragma: no cover - compiler without a usable threading layer
            pass
    set_kernel_threads(n)


def set_thread_number(numberThread: int) -> None:  # noqa: N803 - MNN's name
    """Number of compute threads, clamped to [1, 8] as MNN does (applied to numpy's OpenBLAS and to Numba's
    parallel kernels, capped at the number of CPUs)."""
    n = max(1, min(8, int(numberThread)))
    settings["threads"] = n
    _apply_threads(n)


def set_global_executor_config(backend: int, precision: int, threadnum: int) -> None:
    """Backend, precision and threads for expr evaluation.

    mnnjit computes on the CPU whatever ``backend`` is requested (recorded only); ``precision`` 2 (Low)
    is recorded for backends that keep float16 storage; ``threadnum`` sets the thread count.
    """
    settings["backend"] = int(backend)
    settings["precision"] = int(precision)
    set_thread_number(threadnum)
