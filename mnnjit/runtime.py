"""Evaluation entry point: front ends ask here for node values; the active executor computes them.

The default executor is the compiler's dispatcher (``mnnjit.compiler.executor``, imported on the
first evaluation; it runs small work on the numpy reference path and imports numba only when work
reaches the compile threshold). ``set_executor(mnnjit.backends.reference.evaluate)`` forces the
reference path; ``set_executor(None)`` restores the default.
"""
from __future__ import annotations

from typing import Callable

from .graph import Node

Executor = Callable[[list[Node]], None]
_executor: Executor | None = None


def set_executor(fn: Executor | None) -> Executor | None:
    """Install ``fn`` as the executor (None restores the default); returns the previous one."""
    global _executor
    prev = _executor
    _executor = fn
    return prev


def get_executor() -> Executor:
    """The executor in use."""
    if _executor is None:
        from .compiler.executor import evaluate as compiled_evaluate
        return compiled_evaluate
    return _executor


def evaluate(nodes: list[Node]) -> None:
    """Compute and cache the values of ``nodes`` (and nothing they do not need)."""
    get_executor()(nodes)
