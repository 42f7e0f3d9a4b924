"""OpenCL platforms and devices: listing them, and choosing the one mnnjit runs on.

``pyopencl`` is imported here only, and lazily: ``import mnnjit`` never loads it. When it is missing,
or when the ICD loader finds no platform, :func:`probe` says why and the backend reports itself
unavailable (the registry then runs the CPU, after one warning).

The device is chosen by ``MNNJIT_OPENCL_DEVICE``:

* unset: the first GPU of any platform, else the first device found;
* ``P:D``: device ``D`` of platform ``P`` (indices as :func:`list_devices` numbers them);
* anything else: the first device whose name, vendor or platform name contains it (case-insensitive).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

ENV_DEVICE = "MNNJIT_OPENCL_DEVICE"


class NoOpenCL(RuntimeError):
    """No usable OpenCL: pyopencl is missing, no platform or no matching device (the message says which)."""


@dataclass(frozen=True)
class DeviceInfo:
    """One OpenCL device as :func:`list_devices` reports it."""

    platform_index: int
    device_index: int
    name: str
    platform: str
    vendor: str
    kind: str                 # "GPU", "CPU", "ACCELERATOR", ...
    compute_units: int
    global_mem_bytes: int
    local_mem_bytes: int
    max_work_group_size: int
    fp16: bool                # cl_khr_fp16: half arithmetic
    fp64: bool                # cl_khr_fp64
    driver_version: str
    opencl_version: str

    @property
    def index(self) -> str:
        """``"P:D"``, the value ``MNNJIT_OPENCL_DEVICE`` takes to choose this device."""
        return f"{self.platform_index}:{self.device_index}"

    @property
    def is_gpu(self) -> bool:
        """Whether the device reports itself as a GPU."""
        return self.kind == "GPU"

    def line(self) -> str:
        """One human-readable line (the command line's device listing)."""
        mem = self.global_mem_bytes / 2 ** 30
        return (f"[{self.index}] {self.name} ({self.kind}, {self.platform}): {self.compute_units} compute units, "
                f"{mem:.1f} GiB, fp16 {'yes' if self.fp16 else 'no'}, driver {self.driver_version}")


def import_cl() -> Any:
    """The ``pyopencl`` module; NoOpenCL when it is not installed."""
    try:
        import pyopencl as cl
    except ImportError as exc:  # the [opencl] extra is not installed
        raise NoOpenCL(f"pyopencl is not installed ({exc}); pip install 'mnnjit[opencl]'") from exc
    return cl


def _kind(cl: Any, dev: Any) -> str:
    t = dev.type
    for name in ("GPU", "CPU", "ACCELERATOR", "CUSTOM"):
        if t & getattr(cl.device_type, name, 0):
            return name
    return "OTHER"


def _platforms(cl: Any) -> list:
    try:
        return list(cl.get_platforms())
    except cl.Error as exc:  # PLATFORM_NOT_FOUND_KHR from the ICD loader: no driver installed
        raise NoOpenCL(f"no OpenCL platform found ({exc})") from exc


def _info(cl: Any, pi: int, di: int, plat: Any, dev: Any) -> DeviceInfo:
    ext = dev.extensions.split()
    return DeviceInfo(pi, di, dev.name.strip(), plat.name.strip(), dev.vendor.strip(), _kind(cl, dev),
                      int(dev.max_compute_units), int(dev.global_mem_size), int(dev.local_mem_size),
                      int(dev.max_work_group_size), "cl_khr_fp16" in ext, "cl_khr_fp64" in ext,
                      dev.driver_version.strip(), dev.version.strip())


def _all_devices() -> list[tuple[DeviceInfo, Any]]:
    cl = import_cl()
    out = []
    for pi, plat in enumerate(_platforms(cl)):
        try:
            devs = plat.get_devices()
        except cl.Error:  # a platform with no devices raises DEVICE_NOT_FOUND
            continue
        for di, dev in enumerate(devs):
            out.append((_info(cl, pi, di, plat, dev), dev))
    return out


def list_devices() -> list[DeviceInfo]:
    """Every OpenCL device found (empty when pyopencl or a platform is missing)."""
    try:
        return [info for info, _ in _all_devices()]
    except NoOpenCL:
        return []


def select_device(spec: str | None = None) -> tuple[DeviceInfo, Any]:
    """The device to run on (``spec``, else ``MNNJIT_OPENCL_DEVICE``, else the first GPU, else the
    first device) as (info, pyopencl device); NoOpenCL when there is none or none matches."""
    found = _all_devices()
    if not found:
        raise NoOpenCL("no OpenCL device found")
    spec = (spec if spec is not None else os.environ.get(ENV_DEVICE, "")).strip()
    if not spec:
        gpus = [f for f in found if f[0].is_gpu]
        return (gpus or found)[0]
    if ":" in spec and all(p.strip().isdigit() for p in spec.split(":", 1)):
        pi, di = (int(p) for p in spec.split(":", 1))
        for f in found:
            if (f[0].platform_index, f[0].device_index) == (pi, di):
                return f
        raise NoOpenCL(f"{ENV_DEVICE}={spec!r}: no device {pi}:{di} "
                       f"(found: {', '.join(f[0].index + ' ' + f[0].name for f in found)})")
    low = spec.lower()
    for f in found:
        if low in f[0].name.lower() or low in f[0].vendor.lower() or low in f[0].platform.lower():
            return f
    raise NoOpenCL(f"{ENV_DEVICE}={spec!r} matches no device (found: "
                   f"{', '.join(f[0].index + ' ' + f[0].name for f in found)})")


def probe() -> str | None:
    """None when an OpenCL device can be used here, else why not (one line)."""
    try:
        select_device()
    except NoOpenCL as exc:
        return str(exc)
    except Exception as exc:  # a broken driver must not crash the caller: it is a reason like any other
        return f"OpenCL failed to start: {type(exc).__name__}: {exc}"
    return None


def format_devices() -> str:
    """The device listing as text (one line per device, or why there is none)."""
    try:
        found = _all_devices()
    except NoOpenCL as exc:
        return f"no OpenCL devices: {exc}"
    if not found:
        return "no OpenCL devices"
    return "\n".join(info.line() for info, _ in found)
