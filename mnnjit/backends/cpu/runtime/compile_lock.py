"""One compile at a time per cached Numba function, across processes.

Numba's on-disk cache is not safe for processes sharing it (pytest-xdist workers, a pool of
workers, two scripts started together):

* a function's index file maps signatures to data files numbered by their count in the index, so
  two processes saving overloads of one function at the same moment can both pick ``.1.nbc`` and
  the index of one points at the machine code of the other;
* both processes compile the same kernel (for mnnjit's large kernels: up to a minute each).

:func:`install` wraps ``Dispatcher.compile`` so that a first use of a signature of a function with
``cache=True`` (load from disk or compile, then save) holds an exclusive ``flock`` on
``<index>.lock`` beside the function's cache index. A second process waits, then finds the
overload on disk and loads it. Within a process the lock is taken under Numba's own global compiler
lock, and is re-entrant (compiling a kernel compiles its callees). Call graphs have no cycles, so
processes take nested locks in a consistent order and cannot deadlock.

The wrapper first calls the gate :mod:`.tiering` installs (:func:`set_gate`), which may refuse a
compile that would block the foreground (it then runs in the background); with ``MNNJIT_DEBUG``
each compile is logged with its time.

Nothing here can make a compile fail: a lock that cannot be created (read-only or lock-less file
system) is skipped, and a wait longer than :data:`WAIT_SECONDS` (a stopped process holding the
lock) gives up the lock and compiles anyway.
"""
from __future__ import annotations

import contextlib
import os
import time
import sys
import threading
from typing import Any, Callable, Iterator, Optional

__all__ = ["install", "set_gate", "busy_elsewhere", "WAIT_SECONDS"]

#: longest wait for another process's compile before compiling without the lock
WAIT_SECONDS = 900.0
_POLL_SECONDS = 0.05

_held: dict[str, int] = {}     # lock path -> open file descriptor, for re-entry in this process
_installed = False
#: called as ``gate(dispatcher, signature)`` before every compile (may raise to refuse it; see .tiering)
_gate: Optional[Callable[[Any, Any], None]] = None


def set_gate(fn: Optional[Callable[[Any, Any], None]]) -> None:
    """Install the hook :mod:`.tiering` uses to defer compiles (None removes it)."""
    global _gate
    _gate = fn


def _lock_path(dispatcher) -> str | None:
    """``<cache dir>/<function>.nbi.lock`` of a dispatcher with an on-disk cache, else None."""
    cache = getattr(dispatcher, "_cache", None)
    index = getattr(getattr(cache, "_cache_file", None), "_index_path", None)
    return f"{index}.lock" if index else None


@contextlib.contextmanager
def _file_lock(path: str) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` (re-entrant; skipped when the file system refuses)."""
    import fcntl
    if path in _held:
        yield
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        yield
        return
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break                       # give up waiting: compile without the lock
                time.sleep(_POLL_SECONDS)
            except OSError:
                break                           # no flock on this file system
        _held[path] = fd
        try:
            yield
        finally:
            del _held[path]
    finally:
        os.close(fd)                            # closing the descriptor releases the lock


def busy_elsewhere(dispatcher) -> bool:
    """Whether another process holds ``dispatcher``'s lock now (compiling a signature of it): a
    caller that must not wait (:mod:`.tiering`'s gate, in the foreground) queues the compile instead."""
    import fcntl
    path = _lock_path(dispatcher)
    if path is None or path in _held:
        return False
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False                    # no lock file yet: nobody has held it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)                    # (releases the lock when it was taken)
    return False


_depth = threading.local()


def _debug() -> bool:
    return os.environ.get("MNNJIT_DEBUG", "") not in ("", "0", "false", "no")


def install() -> None:
    """Wrap ``numba.core.dispatcher.Dispatcher.compile`` with the cross-process lock (once)."""
    global _installed
    if _installed:
        return
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.dispatcher import Dispatcher

    plain_compile = Dispatcher.compile

    def compile_locked(self, sig):
        gate = _gate
        if gate is not None:
            gate(self, sig)
        path = _lock_path(self)
        if not _debug():
            if path is None:
                return plain_compile(self, sig)
            with global_compiler_lock, _file_lock(path):
                return plain_compile(self, sig)
        misses = sum(self._cache_misses.values())
        t = time.perf_counter()
        _depth.n = getattr(_depth, "n", 0) + 1
        try:
            with global_compiler_lock, contextlib.ExitStack() as stack:
                if path is not None:
                    stack.enter_context(_file_lock(path))
                res = plain_compile(self, sig)
        finally:
            _depth.n -= 1
        if _depth.n == 0 and sum(self._cache_misses.values()) > misses:   # (callees: in their caller's time)
            f = self.py_func
            print(f"[mnnjit] compiled {f.__module__}.{f.__qualname__} in {time.perf_counter() - t:.2f} s",
                  file=sys.stderr, flush=True)
        return res

    compile_locked.__doc__ = plain_compile.__doc__
    Dispatcher.compile = compile_locked
    _installed = True
