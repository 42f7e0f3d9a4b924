"""The NPU delegate's settings: which bridge, which device or providers, partition knobs, cache.

Three layers, later ones winning:

1. environment variables (read at each lookup):

   ============================  =================================================================
   ``MNNJIT_NPU_BRIDGE``         ``openvino`` | ``onnxruntime`` | a registered bridge (default: the
                                 first of openvino, onnxruntime that is installed)
   ``MNNJIT_NPU_DEVICE``         OpenVINO device: ``CPU`` | ``NPU`` | ``GPU`` | ``AUTO`` ... (default CPU)
   ``MNNJIT_NPU_PROVIDERS``      ONNX Runtime providers, comma-separated (default CPUExecutionProvider)
   ``MNNJIT_NPU_MIN_NODES``      min_nodes_per_partition (default 1)
   ``MNNJIT_NPU_MAX_PARTITIONS`` max_partitions (default: no limit)
   ``MNNJIT_NPU_THREADS``        threads the SDK may use (default: the SDK's own choice)
   ============================  =================================================================

2. :func:`configure` (process defaults set from Python);
3. :func:`using` blocks (this thread only): a RuntimeManager's ``"npu"`` config dict and its
   ``set_cache`` path are applied this way while its models are lowered.

Keys: ``bridge``, ``device``, ``providers``, ``provider_options`` (a list of dicts, one per
provider), ``min_nodes_per_partition``, ``max_partitions``, ``num_threads``, ``cache_dir`` (where
compiled partitions are kept; default ``<MNNJIT_CACHE_DIR>/npu``), ``refuse`` (a callable
``node -> reason | None`` consulted before the bridge's own claims: a vendor's or a test's extra
restrictions).
"""
from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Iterator

KEYS = ("bridge", "device", "providers", "provider_options", "min_nodes_per_partition", "max_partitions",
        "num_threads", "cache_dir", "refuse")

_defaults: dict[str, Any] = {}
_local = threading.local()


def _env() -> dict[str, Any]:
    out: dict[str, Any] = {}
    env = os.environ
    if env.get("MNNJIT_NPU_BRIDGE"):
        out["bridge"] = env["MNNJIT_NPU_BRIDGE"].strip().lower()
    if env.get("MNNJIT_NPU_DEVICE"):
        out["device"] = env["MNNJIT_NPU_DEVICE"].strip()
    if env.get("MNNJIT_NPU_PROVIDERS"):
        out["providers"] = [p.strip() for p in env["MNNJIT_NPU_PROVIDERS"].split(",") if p.strip()]
    for var, key in (("MNNJIT_NPU_MIN_NODES", "min_nodes_per_partition"),
                     ("MNNJIT_NPU_MAX_PARTITIONS", "max_partitions"), ("MNNJIT_NPU_THREADS", "num_threads")):
        if env.get(var):
            try:
                out[key] = int(env[var])
            except ValueError:
                raise ValueError(f"{var} must be an integer, got {env[var]!r}") from None
    return out


def validate(opts: dict[str, Any], where: str = "npu options") -> dict[str, Any]:
    """``opts`` checked (known keys, value types); returns a copy."""
    if not isinstance(opts, dict):
        raise TypeError(f"{where}: expected a dict, got {type(opts).__name__}")
    out = dict(opts)
    unknown = [k for k in out if k not in KEYS]
    if unknown:
        raise KeyError(f"{where}: unknown key {unknown[0]!r} (valid: {list(KEYS)})")
    if "bridge" in out and (not isinstance(out["bridge"], str) or not out["bridge"]):
        raise TypeError(f"{where}: 'bridge' must be a bridge name, got {out['bridge']!r}")
    if "device" in out and not isinstance(out["device"], str):
        raise TypeError(f"{where}: 'device' must be a string such as 'CPU', 'NPU', 'GPU' or 'AUTO', "
                        f"got {out['device']!r}")
    if "providers" in out:
        p = out["providers"]
        if isinstance(p, str):
            p = [p]
        if not isinstance(p, (list, tuple)) or not all(isinstance(x, str) for x in p) or not p:
            raise TypeError(f"{where}: 'providers' must be a list of ONNX Runtime provider names, got {p!r}")
        out["providers"] = list(p)
    if "provider_options" in out:
        po = out["provider_options"]
        if not isinstance(po, (list, tuple)) or not all(isinstance(x, dict) for x in po):
            raise TypeError(f"{where}: 'provider_options' must be a list of dicts (one per provider), got {po!r}")
        out["provider_options"] = [dict(x) for x in po]
    for key, lo in (("min_nodes_per_partition", 1), ("max_partitions", 0), ("num_threads", 0)):
        if key in out and out[key] is not None:
            v = out[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{where}: {key!r} must be an int >= {lo}, got {v!r}")
    if "refuse" in out and out["refuse"] is not None and not callable(out["refuse"]):
        raise TypeError(f"{where}: 'refuse' must be a callable node -> reason or None")
    if "cache_dir" in out and out["cache_dir"] is not None:
        out["cache_dir"] = os.fspath(out["cache_dir"])
    return out


def configure(**opts: Any) -> None:
    """Set process-wide defaults (see the module docstring for the keys); a None value removes one."""
    opts = validate(opts, "npu configure")
    for k, v in opts.items():
        if v is None:
            _defaults.pop(k, None)
        else:
            _defaults[k] = v


def reset() -> None:
    """Forget the defaults :func:`configure` set."""
    _defaults.clear()


@contextlib.contextmanager
def using(**opts: Any) -> Iterator[None]:
    """Settings for this thread inside the block (over the environment and :func:`configure`)."""
    opts = {k: v for k, v in validate(opts, "npu options").items() if v is not None}
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(opts)
    try:
        yield
    finally:
        stack.pop()


def current() -> dict[str, Any]:
    """The settings in force on this thread (environment < configure < using blocks)."""
    out = _env()
    out.update(_defaults)
    for layer in getattr(_local, "stack", ()):
        out.update(layer)
    return out
