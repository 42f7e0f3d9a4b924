"""The backend interface: what a backend (CPU/Numba, OpenCL, NPU delegate) must offer the compiler.

The compiler turns the part of a graph that needs computing into a :class:`~mnnjit.compiler.plan.Plan`:
a list of steps, each either a *fusion group* (elementwise/broadcast/cast chains, optionally ending in
a reduction) or a single op. A backend says which groups and ops it can run (``supports_group``,
``supports_op``), owns the buffers it computes into (``alloc``/``to_host``), and runs one step at a
time (``run_group``/``run_op``); everything a backend does not support runs on the numpy reference
path, so a new backend is useful from its first supported op.

Buffers: the CPU backend's buffers are numpy arrays (``to_host`` is the identity); a device backend
returns its own buffer objects and converts at the plan's boundaries.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Sequence

import numpy as np


class Backend(ABC):
    """A compute backend (see the module docstring)."""

    #: Short name shown by ``explain`` and the debug log (``"cpu"``, ``"opencl"``, ``"npu"``).
    name: str = "?"

    @abstractmethod
    def supports_group(self, group: Any) -> bool:
        """Whether this backend can run fusion group ``group`` as one compiled kernel."""

    @abstractmethod
    def supports_op(self, node: Any) -> bool:
        """Whether this backend has its own kernel for the single (non-fused) op ``node``."""

    @abstractmethod
    def run_group(self, group: Any, inputs: Sequence[Any], out: Any) -> Any:
        """Run fusion group ``group`` on its leaf values ``inputs``, writing into buffer ``out``; returns ``out``."""

    @abstractmethod
    def run_op(self, node: Any, inputs: Sequence[Any]) -> Any:
        """Run one op with this backend's kernel; returns its value (a tuple for multi-output ops)."""

    def alloc(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        """A new buffer of ``shape``/``dtype`` (uninitialised)."""
        return np.empty(shape, dtype)

    def to_host(self, buf: Any) -> np.ndarray:
        """A buffer's contents as a numpy array."""
        return np.asarray(buf)

    def from_host(self, arr: np.ndarray) -> Any:
        """A buffer holding ``arr``'s contents."""
        return arr

    def set_num_threads(self, n: int) -> None:
        """Use ``n`` worker threads (backends without threads ignore it)."""

    def describe(self) -> str:
        """One line for ``explain``: the backend and its settings."""
        return self.name
