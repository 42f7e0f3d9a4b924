"""mnnjit: a JIT-compiled array runtime that runs pymnn scripts (``import mnnjit as MNN``).

Submodules (``numpy``, ``cv``, ``expr``, ``nn``) are imported on first use so that
``import mnnjit`` stays cheap; Numba, pyopencl and onnx are imported only when first needed.
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

from . import allocator as _allocator  # noqa: E402

_allocator.configure()  # before the first arrays: freed result buffers stay mapped (see allocator.py)

_SUBMODULES = ("numpy", "cv", "expr", "nn", "compiler", "backends", "format", "ops")


def version() -> str:
    """mnnjit's version string."""
    return __version__


#: Modules whose public names pymnn exposes at the top level (``MNN.Interpreter``, ``MNN.CVMatrix``, ...).
_TOP_LEVEL_PROVIDERS = ("session", "imageprocess")


#: Functions of mnnjit's own at the top level, by the module that defines them.
_FUNCTIONS = {"warmup": "warmup", "prewarm": "warmup", "compile_status": "warmup"}


def __getattr__(name: str) -> Any:
    if name in _FUNCTIONS:
        return getattr(importlib.import_module(f"{__name__}.{_FUNCTIONS[name]}"), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if not name.startswith("_"):
        for provider in _TOP_LEVEL_PROVIDERS:
            try:
                module = importlib.import_module(f"{__name__}.{provider}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{__name__}.{provider}":
                    raise
                continue
            if hasattr(module, name):
                value = getattr(module, name)
                globals()[name] = value
                return value
    raise AttributeError(f"module 'mnnjit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_SUBMODULES))
