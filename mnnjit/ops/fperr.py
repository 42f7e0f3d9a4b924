"""A cheap "ignore all floating-point errors" state for the numpy calls of op references.

numpy keeps its error state in a context variable; setting it to a prebuilt "ignore all" object
and resetting the token is what ``np.errstate(all="ignore")`` does, minus ~1 us of argument
handling per use (a numpy-style call on a small array pays it on every op). Where numpy's
internals differ, ``ignore_errors`` falls back to ``np.errstate``.
"""
from __future__ import annotations

import contextlib
import contextvars
import threading
from typing import Any, Callable

import numpy as np


def _context_var():
    try:
        from numpy._core import _ufunc_config as uc
        var, ext = uc._extobj_contextvar, uc._make_extobj(all="ignore")
        var.reset(var.set(ext))
        return var, ext
    except Exception:  # other numpy versions: the public context manager
        return None, None


#: numpy's error-state context variable and its "ignore all" value (None, None: not available)
ERRVAR, ERR_IGNORE = _context_var()


#: ``LOCAL.run(ufunc, *arrays)``: the ufunc run in this thread's own context whose numpy error
#: state ignores everything (entering it costs less than setting and resetting the variable:
#: ~0.3 us of a small call). Only for numpy ufuncs on plain arrays: nothing else of the caller's
#: context is visible inside. A context can be entered by one thread at a time, so each thread
#: has its own; ``thread_runner()`` makes it on a thread's first use (``LOCAL.run`` raises
#: AttributeError until then). Raises RuntimeError for a call from inside it: then use
#: ``call_ignoring``.
LOCAL = threading.local()


def thread_runner() -> Callable | None:
    """This thread's ``LOCAL.run`` (made on first use), or None where ``ERRVAR`` is not available."""
    if ERRVAR is None:
        return None
    ctx = contextvars.Context()
    ctx.run(ERRVAR.set, ERR_IGNORE)
    LOCAL.run = ctx.run
    return ctx.run


def call_ignoring(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with floating-point errors ignored."""
    if ERRVAR is None:
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)
    if ERRVAR.get() is ERR_IGNORE:      # (inside the eager path's or another caller's ignoring)
        return fn(*args, **kwargs)
    tok = ERRVAR.set(ERR_IGNORE)
    try:
        return fn(*args, **kwargs)
    finally:
        ERRVAR.reset(tok)


@contextlib.contextmanager
def ignore_errors():
    """``np.errstate(all="ignore")`` as a context manager (for blocks, where a call does not fit)."""
    if ERRVAR is None:
        with np.errstate(all="ignore"):
            yield
        return
    tok = ERRVAR.set(ERR_IGNORE)
    try:
        yield
    finally:
        ERRVAR.reset(tok)
