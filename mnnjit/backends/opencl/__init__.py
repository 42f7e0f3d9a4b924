"""The OpenCL backend (pyopencl; tested on PoCL's CPU device, runs on GPUs).

Importing this package imports neither pyopencl nor numba: ``BACKEND`` (the registry's entry) loads
the backend module, and pyopencl is imported when a device is first probed.

* :func:`list_devices` / :func:`format_devices`: the OpenCL devices found (name, compute units,
  memory, fp16 support); ``MNNJIT_OPENCL_DEVICE`` chooses one (see :mod:`.device`).
* Programs are cached on disk under ``MNNJIT_CACHE_DIR``/opencl (see :mod:`.cache`), work-group sizes
  are tuned per device and shape (see :mod:`.runtime`).
"""
from __future__ import annotations

from typing import Any

from .device import DeviceInfo, format_devices, list_devices  # noqa: F401


def __getattr__(name: str) -> Any:
    if name == "BACKEND":
        from .backend import OpenCLBackend
        return OpenCLBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
