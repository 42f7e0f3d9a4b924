"""``mnnjit devices``: what mnnjit can run on here: CPU features, OpenCL devices, NPU delegates."""
from __future__ import annotations

import json
import os
from typing import Any

#: CPU features that decide which kernels are fast (as LLVM names them)
KEY_FEATURES = ("sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512vnni",
                "avx512bf16", "avx512fp16", "avxvnni", "amx-int8", "amx-bf16", "neon", "dotprod", "i8mm",
                "fullfp16", "sve", "sve2")


def register(sub: Any) -> None:
    """Add the subcommand's parser."""
    p = sub.add_parser("devices", help="CPU features, OpenCL devices, installed NPU delegates",
                       description="List what mnnjit can run on: the CPU (LLVM's name and features), "
                                   "OpenCL platforms and devices (through mnnjit's OpenCL backend when it has "
                                   "one, else pyopencl), and NPU delegates (ONNX Runtime execution providers, "
                                   "OpenVINO devices) that are installed.")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def cpu_info() -> dict:
    """CPU name, cores and features (from llvmlite, which Numba compiles with)."""
    info: dict = {"cores": os.cpu_count()}
    try:
        import llvmlite.binding as llvm
        info["name"] = llvm.get_host_cpu_name()
        feats = llvm.get_host_cpu_features()
        on = sorted(k for k, v in feats.items() if v)
        info["features"] = [f for f in KEY_FEATURES if f in on]
        info["all_features"] = on
    except Exception as exc:  # llvmlite missing or unable to query the host
        info["error"] = str(exc)
    try:
        import numba
        info["numba_threads"] = numba.config.NUMBA_NUM_THREADS
        info["numba_threading_layer"] = numba.config.THREADING_LAYER
    except Exception:
        pass
    return info


def opencl_info() -> dict:
    """OpenCL devices: mnnjit's backend registry first, else pyopencl directly."""
    out: dict = {"backend": None, "platforms": []}
    try:
        from ..backends import registry
        if "opencl" in registry.MODULES:
            ok = registry.is_available("opencl")
            out["backend"] = {"available": ok}
            if ok:
                out["backend"]["describe"] = registry.get("opencl").describe()
            else:
                out["backend"]["reason"] = getattr(registry, "_unavailable", {}).get("opencl")
    except Exception as exc:
        out["backend"] = {"available": False, "reason": str(exc)}
    try:
        import pyopencl as cl
    except Exception:
        out["pyopencl"] = "not installed (pip install 'mnnjit[opencl]')"
        return out
    try:
        for p in cl.get_platforms():
            devs = []
            for d in p.get_devices():
                devs.append({"name": d.name.strip(), "type": cl.device_type.to_string(d.type),
                             "compute_units": d.max_compute_units, "global_mem_mb": d.global_mem_size >> 20,
                             "fp16": "cl_khr_fp16" in d.extensions})
            out["platforms"].append({"name": p.name, "version": p.version, "devices": devs})
    except Exception as exc:  # no ICD loader or no platform
        out["error"] = str(exc)
    return out


def npu_info() -> dict:
    """NPU delegates: ONNX Runtime execution providers and OpenVINO devices, when installed."""
    out: dict = {}
    try:
        import onnxruntime as ort
        out["onnxruntime"] = {"version": ort.__version__, "providers": ort.get_available_providers()}
    except Exception:
        out["onnxruntime"] = None
    try:
        import openvino as ov
        out["openvino"] = {"version": ov.__version__, "devices": ov.Core().available_devices}
    except Exception:
        out["openvino"] = None
    try:
        from ..backends import registry
        if "npu" in registry.MODULES:
            out["mnnjit_npu_backend"] = registry.is_available("npu")
    except Exception:
        pass
    return out


def run(args: Any) -> int:
    """Run the subcommand."""
    import mnnjit
    info = {"mnnjit": mnnjit.__version__, "cpu": cpu_info(), "opencl": opencl_info(), "npu": npu_info()}
    if args.json:
        print(json.dumps(info, indent=1, default=str))
        return 0
    c = info["cpu"]
    print(f"CPU: {c.get('name', '?')}, {c.get('cores')} cores"
          + (f", Numba {c['numba_threads']} threads ({c['numba_threading_layer']})" if "numba_threads" in c else ""))
    print(f"  features: {' '.join(c.get('features', [])) or '(none of the tracked ones)'}")
    o = info["opencl"]
    if o.get("backend") is not None:
        b = o["backend"]
        print(f"OpenCL backend: {'available' if b.get('available') else 'not available'}"
              f"{': ' + str(b.get('describe') or b.get('reason') or '') if (b.get('describe') or b.get('reason')) else ''}")
    if "pyopencl" in o:
        print(f"OpenCL: pyopencl {o['pyopencl']}")
    for p in o["platforms"]:
        print(f"OpenCL platform: {p['name']} ({p['version']})")
        for d in p["devices"]:
            print(f"  {d['type']}: {d['name']}, {d['compute_units']} compute units, {d['global_mem_mb']} MB"
                  f"{', fp16' if d['fp16'] else ''}")
    if "error" in o:
        print(f"OpenCL: {o['error']}")
    n = info["npu"]
    ort = n.get("onnxruntime")
    print(f"ONNX Runtime: {ort['version']}, providers {', '.join(ort['providers'])}" if ort else
          "ONNX Runtime: not installed (pip install 'mnnjit[npu]')")
    ov = n.get("openvino")
    print(f"OpenVINO: {ov['version']}, devices {', '.join(ov['devices'])}" if ov else "OpenVINO: not installed")
    return 0
