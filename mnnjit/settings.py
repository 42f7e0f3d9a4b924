"""Compiler settings from the environment, and counters a test (or ``explain``) can read.

* ``MNNJIT_CACHE_DIR``   where generated kernel sources and Numba's cache live
                         (default: ``$XDG_CACHE_HOME/mnnjit`` or ``~/.cache/mnnjit``)
* ``MNNJIT_NUM_THREADS`` Numba worker threads (default: Numba's own default, all cores)
* ``MNNJIT_JIT_THRESHOLD`` element count from which work runs in compiled kernels (default
                         :data:`DEFAULT_THRESHOLD`, measured, see benchmarks/RESULTS.md); ``0`` compiles
                         everything; ``off`` never compiles (reference path only)
* ``MNNJIT_SERIAL_THRESHOLD`` element count from which fused chains (two or more elementwise ops) below
                         the compile threshold run as serial compiled kernels (default
                         :data:`DEFAULT_SERIAL_THRESHOLD`; ``off``: never)
* ``MNNJIT_PLAN_KERNEL_CALLS`` forwards after which a tiny model's plan (an MLP) runs as one compiled
                         kernel instead of numpy calls (default :data:`DEFAULT_PLAN_KERNEL_CALLS`;
                         ``0``: from the first forward; ``off``: never)
* ``MNNJIT_DEBUG=1``     print each new plan (fusion groups, kernels compiled, cache hits) to stderr
"""
from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

#: Measured on the 2-vCPU machine (benchmarks/compiler_threshold.py): below this many elements the
#: numpy reference path beats a parallel Numba launch plus plan overhead.
DEFAULT_THRESHOLD = 524288

#: Measured (benchmarks/compiler_threshold.py, benchmarks/RESULTS.md): from this many elements a fused
#: chain run as one serial kernel (no thread team to wake) beats numpy running its ops one by one.
DEFAULT_SERIAL_THRESHOLD = 65536

#: A serving loop pays the plan kernel's compile (~0.3 s from a warm cache) once it is this hot; a
#: script running a model a few times never does.
DEFAULT_PLAN_KERNEL_CALLS = 32

_threshold: int | None = None
_serial: int | None = None
_jit_enabled: bool | None = None

#: Counters: plans_built, plan_cache_hits, kernels_compiled (Numba compiled from scratch),
#: kernel_disk_hits (loaded from the on-disk cache), kernel_memory_hits, kernel_runs, ref_groups,
#: ref_nodes, handwritten_runs, fast_path, cache_errors.
counters: Counter = Counter()


def reset_counters() -> None:
    """Zero all counters."""
    counters.clear()


def _parse_threshold() -> tuple[int, bool]:
    raw = os.environ.get("MNNJIT_JIT_THRESHOLD", "").strip().lower()
    if raw in ("off", "never", "none", "disable", "disabled"):
        return DEFAULT_THRESHOLD, False
    if raw:
        try:
            return max(0, int(float(raw))), True
        except ValueError:
            pass
    return DEFAULT_THRESHOLD, True


def threshold() -> int:
    """Element count from which groups run compiled (large ints mean 'never')."""
    global _threshold, _jit_enabled
    if _threshold is None:
        _threshold, _jit_enabled = _parse_threshold()
    return _threshold if _jit_enabled else 1 << 62


def compiling_enabled() -> bool:
    """False when ``MNNJIT_JIT_THRESHOLD=off`` (or equivalent) disabled compiled kernels."""
    threshold()
    return bool(_jit_enabled)


#: ``MNNJIT_COMPILE`` values that compile where a kernel is first called (else: in the background)
SYNC_COMPILE_WORDS = ("sync", "wait", "blocking", "foreground")


def compile_in_background() -> bool:
    """Whether ``MNNJIT_COMPILE`` asks for background compiling (the default; read on each use).
    The CPU backend's tiering can also force a mode on one thread: its ``mode()`` is the whole
    answer where it is loaded."""
    return os.environ.get("MNNJIT_COMPILE", "").strip().lower() not in SYNC_COMPILE_WORDS


def serial_threshold() -> int:
    """Element count from which fused chains below :func:`threshold` run as serial compiled kernels."""
    global _serial
    if _serial is None:
        raw = os.environ.get("MNNJIT_SERIAL_THRESHOLD", "").strip().lower()
        _serial = DEFAULT_SERIAL_THRESHOLD
        if raw in ("off", "never", "none", "disable", "disabled"):
            _serial = 1 << 62
        elif raw:
            try:
                _serial = max(0, int(float(raw)))
            except ValueError:
                pass
    thr = threshold()  # also reads the environment, so _jit_enabled is known
    return min(_serial, thr) if _jit_enabled else 1 << 62


def set_serial_threshold(n: int | None) -> int:
    """Set the serial-kernel threshold (None: back to the environment/default); returns the previous value."""
    global _serial
    prev = serial_threshold()
    _serial = None if n is None else max(0, int(n))
    _changed()
    return prev


#: Called when a threshold changes (the compiler registers its plan-cache reset: plans depend on them).
on_threshold_change: list = []


def _changed() -> None:
    for fn in on_threshold_change:
        fn()


def set_threshold(n: int | None) -> int:
    """Set the compile threshold (None: back to the environment/default); returns the previous value.

    Tests use ``set_threshold(0)`` to force the compiled path on small arrays.
    """
    global _threshold, _jit_enabled
    prev = threshold()
    if n is None:
        _threshold, _jit_enabled = _parse_threshold()
    else:
        _threshold, _jit_enabled = max(0, int(n)), True
    _changed()
    return prev


def plan_kernel_calls() -> int | None:
    """Forwards before a tiny plan is compiled into one kernel (None: never; see the module docstring)."""
    if not compiling_enabled():
        return None
    raw = os.environ.get("MNNJIT_PLAN_KERNEL_CALLS", "").strip().lower()
    if raw in ("off", "never", "none", "disable", "disabled"):
        return None
    try:
        return max(0, int(float(raw))) if raw else DEFAULT_PLAN_KERNEL_CALLS
    except ValueError:
        return DEFAULT_PLAN_KERNEL_CALLS


def cache_dir() -> Path:
    """The kernel cache directory (not created here)."""
    env = os.environ.get("MNNJIT_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mnnjit"


def debug() -> bool:
    """Whether ``MNNJIT_DEBUG`` asks for plan printing."""
    return os.environ.get("MNNJIT_DEBUG", "") not in ("", "0", "false", "no")


def env_threads() -> int | None:
    """``MNNJIT_NUM_THREADS`` as an int, or None."""
    raw = os.environ.get("MNNJIT_NUM_THREADS", "").strip()
    if not raw:
        return None
    try:
        n = int(raw)
    except ValueError:
        return None
    return n if n > 0 else None
