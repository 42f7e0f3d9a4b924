"""mnnjit: a JIT-compiled array runtime that runs pymnn scripts (``import mnnjit as MNN``).

Submodules (``numpy``, ``cv``, ``expr``, ``nn``) are imported on first use so that
``import mnnjit`` stays cheap; Numba, pyopencl and onnx are imported only when first needed.
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_SUBMODULES = ("numpy", "cv", "expr", "nn", "compiler", "backends", "format", "ops")


def version() -> str:
    """mnnjit's version string."""
    return __version__


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    try:
        session_api = importlib.import_module(f"{__name__}.session")
    except ModuleNotFoundError:
        session_api = None
    if session_api is not None and hasattr(session_api, name):
        return getattr(session_api, name)
    raise AttributeError(f"module 'mnnjit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_SUBMODULES))
