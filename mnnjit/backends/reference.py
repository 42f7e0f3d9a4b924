"""The reference backend: every op on its numpy ``ref`` (the ops' own semantics, ``mnnjit.ops.evaluate``).

It compiles nothing and claims no step, so a plan run on it computes everything on the reference
path: the oracle the other backends are tested against (``tests/conformance``), and what
``runtime.set_executor(mnnjit.backends.reference.evaluate)`` installs.
"""
from __future__ import annotations

from typing import Any, Sequence

from ..ops.evaluate import compute_node, evaluate, run_order  # noqa: F401  (this backend's executor)
from .base import Backend


class ReferenceBackend(Backend):
    """Runs nothing itself: every step falls to the ops' numpy references."""

    name = "reference"

    def supports_group(self, group: Any) -> bool:
        return False

    def supports_op(self, node: Any) -> bool:
        return False

    def run_group(self, group: Any, inputs: Sequence[Any], out: Any) -> Any:
        return None

    def run_op(self, node: Any, inputs: Sequence[Any]) -> Any:
        return None


BACKEND = ReferenceBackend
