"""The NPU backend: a delegate bridge to vendor NPU SDKs (OpenVINO, ONNX Runtime execution providers).

Importing this package imports no SDK: ``BACKEND`` (the registry's entry) is the backend class,
``unavailable_reason()`` says why it cannot run here. See ``backend.py`` for how graphs are cut and
compiled, ``delegate.py`` for the bridge interface, ``options.py`` for the settings.
"""
from __future__ import annotations

from .backend import NPUBackend, NPUDelegateWarning  # noqa: F401
from .delegate import Compiled, Delegate, register  # noqa: F401
from .options import configure  # noqa: F401

BACKEND = NPUBackend
__all__ = ["BACKEND", "NPUBackend", "NPUDelegateWarning", "Compiled", "Delegate", "register", "configure",
           "unavailable_reason"]


def unavailable_reason() -> str | None:
    """Why the NPU backend cannot run in this process, or None."""
    return NPUBackend.unavailable_reason()
