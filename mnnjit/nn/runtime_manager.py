"""``RuntimeManager`` and ``create_runtime_manager``: MNN's runtime configuration holder.

mnnjit runs on the CPU; asking for another backend (OpenCL, Vulkan, NPU ...) falls back to the
CPU with a warning on stderr, as real MNN does when a backend is not available.
"""
from __future__ import annotations

import os
import sys
import warnings
from typing import Any

#: MNN's forward types (``backend`` config values) by name.
BACKENDS = {"CPU": 0, "METAL": 1, "CUDA": 2, "OPENCL": 3, "AUTO": 4, "NN": 5, "OPENGL": 6, "VULKAN": 7,
            "HIAI": 8, "TRT": 9, "USER_0": 10}
#: MNN's precision / memory / power modes by name (BackendConfig enums).
PRECISIONS = {"normal": 0, "high": 1, "low": 2, "lowbf": 3}
MEMORIES = {"normal": 0, "high": 1, "low": 2}
POWERS = {"normal": 0, "high": 1, "low": 2}
_BACKEND_NAMES = {v: k for k, v in BACKENDS.items()}
#: MNN forward type of each mnnjit backend
_FORWARD_TYPE = {"cpu": 0, "reference": 0, "opencl": 3, "npu": 5}


def _mode(value: Any, table: dict[str, int], key: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"runtime config {key!r}: expected a name or an int, got {value!r}")
    if isinstance(value, int):
        if value not in table.values():
            raise ValueError(f"runtime config {key!r}: unknown value {value} (valid: {sorted(set(table.values()))})")
        return value
    if isinstance(value, str) and value.lower() in table:
        return table[value.lower()]
    raise ValueError(f"runtime config {key!r}: unknown value {value!r} (valid: {list(table)})")


#: the runtime config keys MNN reads (createRuntime / createSession / create_runtime_manager)
KNOWN_KEYS = ("backend", "precision", "memory", "power", "numThread", "saveTensors", "inputPaths", "outputPaths")
#: mnnjit's own keys: "npu" (a dict: the NPU delegate's bridge, device or providers, partition
#: knobs; see mnnjit/backends/npu/options.py)
MNNJIT_KEYS = ("npu",)


def known_config(config: dict, where: str) -> dict:
    """``config`` without the keys MNN does not read: real MNN ignores them silently, mnnjit with a
    RuntimeWarning naming them (a misspelt key would otherwise go unnoticed)."""
    unknown = [k for k in config if k not in KNOWN_KEYS and k not in MNNJIT_KEYS]
    if unknown:
        warnings.warn(f"{where}: unknown runtime config key(s) {unknown} ignored (valid: {list(KNOWN_KEYS)})",
                      RuntimeWarning, stacklevel=4)
    return {k: v for k, v in config.items() if k in KNOWN_KEYS or k in MNNJIT_KEYS}


def _known_forward_type(value: Any) -> Any:
    """``value``, or 0 after real MNN's message when it is a number that names no MNN forward type."""
    code = getattr(value, "value", value)
    if isinstance(code, int) and not isinstance(code, bool) and code not in BACKENDS.values():
        print(f"Can't Find type={code} backend, use 0 instead", file=sys.stderr)
        return 0
    return value


def resolve_backend(value: Any) -> int:
    """The MNN forward type that runs for a ``backend`` value (name or int): the requested one when
    its backend is available here (``mnnjit.backends.registry``), else 0 (CPU) after MNN's message."""
    return _FORWARD_TYPE.get(backend_name(value), 0)


def backend_name(value: Any, quiet: bool = False) -> str:
    """The mnnjit backend (``cpu``, ``opencl``, ``npu``) for a ``backend`` value (see resolve_backend)."""
    from ..backends import registry
    return registry.resolve(value, quiet=quiet)


class RuntimeManager:
    """Runtime resources and settings shared by modules loaded with it (see module docstring)."""

    def __init__(self, config: dict | None = None) -> None:
        config = known_config(dict(config or {}), "create_runtime_manager")
        #: the NPU delegate's settings for models loaded with this manager (config key "npu")
        self.npu: dict = {}
        if config.get("npu") is not None:
            from ..backends.npu.options import validate
            self.npu = validate(config["npu"], "runtime config 'npu'")
        #: the mnnjit backend models loaded with this manager run on, and its MNN forward type
        self.backend_name = backend_name(_known_forward_type(config.get("backend", 0)))
        self.backend = _FORWARD_TYPE.get(self.backend_name, 0)
        self.precision = _mode(config.get("precision", "normal"), PRECISIONS, "precision")
        self.memory = _mode(config.get("memory", "normal"), MEMORIES, "memory")
        self.power = _mode(config.get("power", "normal"), POWERS, "power")
        threads = config.get("numThread", 4)
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"runtime config 'numThread' must be a positive int, got {threads!r}")
        self.num_thread = int(threads)
        self.cache_path: str | None = None
        self.external_path: str | None = None
        self.mode: list[int] = []
        self.hints: dict[int, int] = {}

    def set_cache(self, cache_path: str) -> None:
        """Where compiled-kernel information is kept (mnnjit's kernels cache on disk by itself); a
        backend with a cache file of its own (OpenCL: program binaries and tuned work-group sizes)
        reads an existing one now, as MNN does."""
        self.cache_path = os.fspath(cache_path)
        backend = self._cache_backend()
        if backend is not None and os.path.isfile(self.cache_path):
            try:
                backend.load_cache(self.cache_path)
            except ValueError:  # another tool's file: ignored, and rewritten by update_cache
                pass

    def update_cache(self) -> None:
        """Write kernel information to the cache file (compiled kernels are cached when built; the
        OpenCL backend writes its program binaries and tuning table there)."""
        if self.cache_path is None:
            return
        d = os.path.dirname(os.path.abspath(self.cache_path))
        if not os.path.isdir(d):
            raise FileNotFoundError(f"cache directory does not exist: {d}")
        backend = self._cache_backend()
        if backend is not None:
            backend.save_cache(self.cache_path)
            return
        with open(self.cache_path, "a"):
            pass

    def _cache_backend(self):
        """This manager's backend when it keeps a cache file of its own (``save_cache``/``load_cache``)."""
        name = getattr(self, "backend_name", None)
        if name in (None, "cpu", "reference"):
            return None
        from ..backends import registry
        try:
            backend = registry.get(name)
        except Exception:  # an unavailable backend has no cache to read or write
            return None
        return backend if hasattr(backend, "save_cache") and hasattr(backend, "load_cache") else None

    def set_external(self, path: str) -> None:
        """Use ``path`` as the external weight file of models loaded with this manager."""
        self.external_path = os.fspath(path)

    def set_mode(self, mode: int) -> None:
        """Record a session mode (MNN's Interpreter.SessionMode values)."""
        self.mode.append(int(mode))

    def set_hint(self, mode: int, value: int) -> None:
        """Record an execution hint (MNN's Interpreter.HintMode values)."""
        self.hints[int(mode)] = int(value)

    def __reduce__(self):
        """Pickle by config: the new process builds its own manager from the same settings
        (and the cache and external-weight paths, modes and hints set since)."""
        # the backend by its mnnjit name (keeps "reference", which has no MNN forward type of its own)
        config = {"backend": getattr(self, "backend_name", None) or self.backend, "precision": self.precision,
                  "memory": self.memory,
                  "power": self.power, "numThread": self.num_thread}
        if getattr(self, "npu", None):
            config["npu"] = dict(self.npu)
        extra = {"cache_path": self.cache_path, "external_path": self.external_path,
                 "mode": list(self.mode), "hints": dict(self.hints)}
        return (_rebuild_runtime_manager, (config, extra))

    def __repr__(self) -> str:
        return (f"RuntimeManager(backend={_BACKEND_NAMES[self.backend]}, precision={self.precision}, "
                f"memory={self.memory}, power={self.power}, numThread={self.num_thread})")


def _rebuild_runtime_manager(config: dict, extra: dict) -> RuntimeManager:
    """A RuntimeManager from a pickled one's config and later settings (see ``__reduce__``)."""
    rt = RuntimeManager(config)
    rt.cache_path = extra.get("cache_path")
    rt.external_path = extra.get("external_path")
    rt.mode = list(extra.get("mode", ()))
    rt.hints = dict(extra.get("hints", {}))
    return rt


def create_runtime_manager(config: Any) -> RuntimeManager:
    """A RuntimeManager from a config dict (or a 1-tuple holding one, as pymnn's examples pass)."""
    if isinstance(config, (tuple, list)):
        if len(config) != 1 or not isinstance(config[0], dict):
            raise TypeError("create_runtime_manager expects a config dict or a tuple holding one dict")
        config = config[0]
    if not isinstance(config, dict):
        raise TypeError(f"create_runtime_manager expects a config dict, got {type(config).__name__}")
    return RuntimeManager(config)
