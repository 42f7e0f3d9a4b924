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
#: the default executor once imported (a function-level import on every read costs ~0.5 us)
_default: Executor | None = None
#: the default executor's one-node eager route, once imported
_eager_value: Callable[[Node, bool], object] | None = None
#: ``_eager_value`` while the default executor is in use, else None (``Var.read``'s direct call)
_read_route: Callable[[Node, bool], object] | None = None


def set_executor(fn: Executor | None) -> Executor | None:
    """Install ``fn`` as the executor (None restores the default); returns the previous one."""
    global _executor, _read_route
    prev = _executor
    _executor = fn
    _read_route = _eager_value if fn is None else None
    return prev


def _load_default() -> Executor:
    global _default, _eager_value, _read_route
    from .compiler.executor import eager_value
    from .compiler.executor import evaluate as compiled_evaluate
    _default = compiled_evaluate
    _eager_value = eager_value
    if _executor is None:
        _read_route = eager_value
    return compiled_evaluate


def get_executor() -> Executor:
    """The executor in use."""
    if _executor is None:
        return _default or _load_default()
    return _executor


def evaluate(nodes: list[Node]) -> None:
    """Compute and cache the values of ``nodes`` (and nothing they do not need)."""
    ex = _executor
    if ex is None:
        ex = _default or _load_default()
    ex(nodes)
