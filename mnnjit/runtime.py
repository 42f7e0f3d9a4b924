"""Evaluation entry point: front ends ask here for node values; the active executor computes them.

The default executor is the numpy reference evaluator; the compiler installs its own (which
dispatches small work to the reference path and larger work to compiled kernels) with
:func:`set_executor`.
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
        from .backends.reference import evaluate as ref_evaluate
        return ref_evaluate
    return _executor


def evaluate(nodes: list[Node]) -> None:
    """Compute and cache the values of ``nodes`` (and nothing they do not need)."""
    get_executor()(nodes)
