"""The Delegate interface: one class per vendor SDK bridge, in the style of TFLite's delegates and
ONNX Runtime's execution providers.

A bridge says which ops it runs (:meth:`Delegate.claim`: a per-op predicate over the op, its
shapes, dtypes and attributes, giving the reason when it refuses) and compiles a claimed partition
(:meth:`Delegate.compile`: a static graph of registry ops, see :class:`mnnjit.backends.base.GraphIR`)
into something that maps input arrays to output arrays. Partitioning, the on-disk cache key, CPU
fallback and warnings are the NPU backend's business (``backend.py``), not the bridge's.

A vendor adds a bridge as one class::

    import mnnjit.delegates as D

    class MyNPU(D.Delegate):
        name = "mynpu"
        sdk_module = "mynpu_sdk"          # must be importable for the bridge to be offered

        def claim(self, node):
            reason = D.portable_claim(node)   # the op set every bridge here shares (optional)
            return reason or (None if node.op in MY_OPS else f"mynpu has no {node.op}")

        def compile(self, graph, cache_path, precision_low):
            ...                               # build and compile with the SDK
            return D.Compiled(run=lambda arrays: outputs, from_cache=False)

    D.register(MyNPU)                     # then MNNJIT_NPU_BRIDGE=mynpu, or {"npu": {"bridge": "mynpu"}}
"""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np


@dataclass
class Compiled:
    """A partition compiled by a bridge: ``run(arrays) -> outputs`` (host arrays in the partition's
    placeholder / output order); ``from_cache`` when the SDK loaded it from its on-disk cache
    instead of compiling it."""

    run: Callable[[list[np.ndarray]], list[np.ndarray]]
    from_cache: bool = False


class Delegate:
    """Base class of SDK bridges (see the module docstring). Instances are built per lowering with
    the settings in force (``self.settings``: ``mnnjit.backends.npu.options.current()``)."""

    #: registry name (``MNNJIT_NPU_BRIDGE`` / the ``"bridge"`` setting)
    name: str = "?"
    #: a module that must import for this bridge to run (checked without importing it)
    sdk_module: str = ""

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        self.settings = dict(settings or {})

    @classmethod
    def missing(cls) -> str | None:
        """Why the SDK cannot be used in this process (not installed), or None when it can."""
        if not cls.sdk_module:
            return None
        try:
            found = importlib.util.find_spec(cls.sdk_module) is not None
        except (ImportError, ValueError):  # a module blocked in sys.modules, a broken parent package
            found = False
        if not found:
            return f"the {cls.name} bridge needs the {cls.sdk_module!r} package (pip install {cls.sdk_module})"
        return None

    def device_missing(self) -> str | None:
        """Why the configured device cannot be used (after the SDK imported), or None."""
        return None

    def claim(self, node: Any) -> str | None:
        """None when this bridge runs ``node``, else the reason it does not."""
        raise NotImplementedError

    def compile(self, graph: Any, cache_path: Path, precision_low: bool) -> Compiled:
        """A claimed partition compiled by the SDK. ``cache_path`` is this partition's cache entry
        (a path without suffix, unique to the partition, its input signature and the settings that
        change the compiled result: the bridge adds suffixes and keeps its artifacts there).
        Raise on failure: the partition then runs on the CPU."""
        raise NotImplementedError

    def settings_key(self) -> tuple:
        """The settings that change a compiled partition (device, providers, SDK version): part of
        the cache key and of the backend's plan key."""
        return (self.name,)

    def describe(self) -> str:
        """One line for ``explain``."""
        return self.name


#: bridge name -> the class, or "module:Class" loaded on first use (the SDKs import only then)
_BRIDGES: dict[str, Any] = {
    "openvino": "mnnjit.backends.npu.openvino_bridge:OpenVINODelegate",
    "onnxruntime": "mnnjit.backends.npu.onnx_bridge:ONNXRuntimeDelegate",
}
#: the order in which an unconfigured delegate picks an installed bridge
DEFAULT_ORDER = ("openvino", "onnxruntime")


def register(cls: type[Delegate], name: str | None = None) -> type[Delegate]:
    """Make bridge class ``cls`` selectable as ``name`` (default ``cls.name``); returns ``cls`` (so it
    works as a class decorator). A bridge of the same name is replaced."""
    if not (isinstance(cls, type) and issubclass(cls, Delegate)):
        raise TypeError(f"register expects a Delegate subclass, got {cls!r}")
    key = (name or cls.name).lower()
    if not key or key == "?":
        raise ValueError("a bridge needs a name (set the class attribute 'name')")
    _BRIDGES[key] = cls
    return cls


def names() -> list[str]:
    """Registered bridge names."""
    return list(_BRIDGES)


def bridge_class(name: str) -> type[Delegate]:
    """The bridge class registered as ``name`` (imports its module, not its SDK)."""
    entry = _BRIDGES.get(name.lower())
    if entry is None:
        raise KeyError(f"unknown NPU bridge {name!r} (known: {names()})")
    if isinstance(entry, str):
        mod, cls = entry.split(":")
        entry = _BRIDGES[name.lower()] = getattr(importlib.import_module(mod), cls)
    return entry


def default_bridge() -> str | None:
    """The first installed bridge of :data:`DEFAULT_ORDER`, or None."""
    for n in DEFAULT_ORDER:
        if bridge_class(n).missing() is None:
            return n
    return None
