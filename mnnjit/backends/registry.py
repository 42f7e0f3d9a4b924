"""Which backends exist, which one runs a graph, and MNN's forward types mapped onto them.

Backends are named (``reference``, ``cpu``, ``opencl``, ``npu``) and loaded by module name on first
use, so neither ``import mnnjit`` nor the compiler imports a concrete backend: the compiler asks
:func:`current` for the active one and sees only :class:`mnnjit.backends.base.Backend`.

The active backend is, in order: the one a ``using(name)`` block selected on this thread (a
Module's forward runs inside one, with its RuntimeManager's backend), else the process default
(:func:`set_default`: ``expr.set_global_executor_config``'s backend, ``MNNJIT_BACKEND``), else the CPU.
``MNNJIT_BACKEND`` is read at import and again by ``set_default(None)`` (every graph asks for the
active backend, and an environment lookup would cost as much as a small op).

MNN's forward types (``backend`` in a runtime config): 0 CPU, 3 OpenCL, 4 AUTO (a GPU through
OpenCL when one is found, else the CPU), 5 NN (the NPU delegate bridge). A type with no backend
here, or one whose backend cannot run in this process, falls back to the CPU with MNN's message.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
from typing import Any, Iterator

from .base import Backend, BackendUnavailable

#: backend name -> module defining ``BACKEND`` (a Backend subclass)
MODULES: dict[str, str] = {
    "reference": "mnnjit.backends.reference",
    "cpu": "mnnjit.backends.cpu",
    "opencl": "mnnjit.backends.opencl",
    "npu": "mnnjit.backends.npu",
}

#: MNN's forward types by name (``MNNForwardType``) and the backend each maps to here
FORWARD_TYPES: dict[str, int] = {"CPU": 0, "METAL": 1, "CUDA": 2, "OPENCL": 3, "AUTO": 4, "NN": 5,
                                 "OPENGL": 6, "VULKAN": 7, "HIAI": 8, "TRT": 9, "USER_0": 10}
_TYPE_BACKEND: dict[int, str] = {0: "cpu", 3: "opencl", 5: "npu", 8: "npu"}
_TYPE_NAMES = {v: k for k, v in FORWARD_TYPES.items()}

_instances: dict[str, Backend] = {}
_unavailable: dict[str, str] = {}
_lock = threading.Lock()
_local = threading.local()
_default: str | None = None
_env_backend: str | None = os.environ.get("MNNJIT_BACKEND") or None


def backend_class(name: str) -> type[Backend]:
    """The Backend subclass registered as ``name`` (imports its module)."""
    if name not in MODULES:
        raise KeyError(f"unknown backend {name!r} (known: {sorted(MODULES)})")
    try:
        module = importlib.import_module(MODULES[name])
    except ImportError as exc:
        raise BackendUnavailable(f"backend {name!r} cannot be imported: {exc}") from exc
    cls = getattr(module, "BACKEND", None)
    if cls is None:
        raise BackendUnavailable(f"backend {name!r}: {MODULES[name]} defines no BACKEND")
    return cls


def get(name: str) -> Backend:
    """The (shared) instance of backend ``name``; BackendUnavailable says why it cannot run here."""
    inst = _instances.get(name)
    if inst is not None:
        return inst
    with _lock:
        inst = _instances.get(name)
        if inst is None:
            cls = backend_class(name)
            if not cls.is_available():
                raise BackendUnavailable(f"backend {name!r} is not available here: "
                                         f"{getattr(cls, 'unavailable_reason', lambda: 'no device')()}")
            inst = _instances[name] = cls()
    return inst


def is_available(name: str) -> bool:
    """Whether backend ``name`` can run in this process (the answer is remembered)."""
    if name in _instances:
        return True
    if name in _unavailable:
        return False
    try:
        ok = backend_class(name).is_available()
    except BackendUnavailable as exc:
        _unavailable[name] = str(exc)
        return False
    if not ok:
        _unavailable[name] = "not available"
    return ok


def available() -> list[str]:
    """Names of the backends that can run here, the reference and CPU ones first."""
    return [n for n in MODULES if is_available(n)]


def resolve(value: Any, *, quiet: bool = False) -> str:
    """The backend name for a runtime config's ``backend`` value (MNN forward type as int or name,
    or a backend name); unknown or unavailable ones fall back to ``"cpu"`` with MNN's message."""
    if isinstance(value, bool):
        raise TypeError(f"runtime config 'backend': expected a name or an int, got {value!r}")
    if isinstance(value, str):
        low = value.lower()
        if low in MODULES:
            name, code = low, None
        elif value.upper() in FORWARD_TYPES:
            code = FORWARD_TYPES[value.upper()]
            name = None
        else:
            raise ValueError(f"runtime config 'backend': unknown backend {value!r} "
                             f"(valid: {list(FORWARD_TYPES)} or {list(MODULES)})")
    else:
        code = int(getattr(value, "value", value))
        name = None
    if code is not None:
        if code == 4:  # AUTO: a GPU through OpenCL when there is one
            name = "opencl" if _opencl_gpu() else "cpu"
        else:
            name = _TYPE_BACKEND.get(code)
    if name is None or not is_available(name):
        if not quiet:
            label = _TYPE_NAMES.get(code, code) if code is not None else name
            why = f": {_unavailable[name]}" if name in _unavailable else ""
            print(f"Can't Find type={code if code is not None else name} backend ({label}){why}, "
                  "use 0 (CPU) instead", file=sys.stderr)
        return "cpu"
    return name


def _opencl_gpu() -> bool:
    if not is_available("opencl"):
        return False
    try:
        return bool(getattr(get("opencl"), "is_gpu", False))
    except BackendUnavailable:
        return False


def set_default(name: str | None) -> None:
    """Make backend ``name`` the process default (None: back to ``MNNJIT_BACKEND``, read again, or
    the CPU)."""
    global _default, _env_backend
    if name is not None and name not in MODULES:
        raise KeyError(f"unknown backend {name!r} (known: {sorted(MODULES)})")
    if name is None:
        _env_backend = os.environ.get("MNNJIT_BACKEND") or None
    _default = name


def current_name() -> str:
    """The name of the backend graphs run on now (see the module docstring)."""
    name = getattr(_local, "name", None)
    if name is not None:
        return name
    if _default is not None:
        return _default
    env = _env_backend
    if env is not None:
        return resolve(env, quiet=True)
    return "cpu"


def current() -> Backend:
    """The backend graphs run on now (an unavailable one falls back to the CPU)."""
    name = current_name()
    try:
        return get(name)
    except BackendUnavailable:
        return get("cpu")


@contextlib.contextmanager
def using(name: str | None) -> Iterator[None]:
    """Run graphs on backend ``name`` on this thread inside the block (None: leave as is)."""
    if name is None:
        yield
        return
    if name not in MODULES:
        raise KeyError(f"unknown backend {name!r} (known: {sorted(MODULES)})")
    prev = getattr(_local, "name", None)
    _local.name = name
    try:
        yield
    finally:
        _local.name = prev
