"""The Numba CPU backend: fused kernels generated from fusion groups, hand-written kernels, kernel
steps for whole graphs, the kernel cache.

Importing this package does not import numba; ``BACKEND`` (the registry's entry) loads the backend
module, which does on its first compiled kernel.
"""
from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "BACKEND":
        from mnnjit.backends.cpu.backend import CPUBackend
        return CPUBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
