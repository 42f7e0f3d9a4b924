"""The OpenVINO bridge: each claimed partition is built with OpenVINO's opset Python API straight
from the registry ops (no ONNX in between) and compiled for the configured device (``CPU``, ``GPU``,
``NPU`` on Intel Core Ultra, ``AUTO``).

Compiled partitions are cached twice: the built model is saved as IR (``<entry>.xml/.bin``, float
weights kept as float32) so a later process skips building it, and OpenVINO's own model cache
(``CACHE_DIR``) keeps the device's compiled blob, so compiling that IR again is a load
(``LOADED_FROM_CACHE``). Precision: ``precision`` low (the fp16 mode) becomes the ``f16``
inference-precision hint, anything else ``f32`` (OpenVINO's CPU plugin would otherwise pick bf16
on CPUs that have it).
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ...graph import topo_order
from . import portable as P
from .delegate import Compiled, Delegate

_core = None
_core_lock = threading.Lock()


def _ov() -> Any:
    import openvino
    return openvino


def core() -> Any:
    """The process's OpenVINO Core (created once)."""
    global _core
    with _core_lock:
        if _core is None:
            _core = _ov().Core()
        return _core


def _o() -> Any:
    import openvino.opset13 as o
    return o


def _c(o: Any, arr: Any, dtype: Any = None) -> Any:
    return o.constant(np.array(arr, dtype, order="C")).output(0)


def _i64(o: Any, vals: Any) -> Any:
    return _c(o, np.asarray(vals, np.int64).reshape(-1))


def _scalar_like(o: Any, node: Any, v: float) -> Any:
    return _c(o, np.asarray(v, node.inputs[0].dtype))


def _act(o: Any, y: Any, act: str) -> Any:
    if act == "relu":
        return o.relu(y).output(0)
    if act == "relu6":
        return o.clamp(y, 0.0, 6.0).output(0)
    return y


def _to_bool(o: Any, x: Any) -> Any:
    return o.convert(x, "boolean").output(0)


def _to_i32(o: Any, x: Any) -> Any:
    return o.convert(x, "i32").output(0)


def _unary(o: Any, n: Any, x: Any) -> Any:
    op = n.op
    intx = n.dtype == P.I32
    simple = {"neg": o.negative, "abs": o.abs, "sqrt": o.sqrt, "exp": o.exp, "log": o.log, "sin": o.sin,
              "cos": o.cos, "tan": o.tan, "tanh": o.tanh, "sigmoid": o.sigmoid, "erf": o.erf, "floor": o.floor,
              "ceil": o.ceiling, "sign": o.sign, "softplus": o.softplus, "hard_swish": o.hswish,
              "silu": o.swish, "asin": o.asin, "acos": o.acos, "atan": o.atan, "sinh": o.sinh, "cosh": o.cosh,
              "asinh": o.asinh, "atanh": o.atanh}
    if op == "copy":
        return x
    if op == "square":
        return o.multiply(x, x).output(0)
    if op == "relu":
        return o.maximum(x, _scalar_like(o, n, 0)).output(0) if intx else o.relu(x).output(0)
    if op == "relu6":
        return o.minimum(o.maximum(x, _scalar_like(o, n, 0)), _scalar_like(o, n, 6)).output(0)
    if op == "rsqrt":
        return o.divide(_scalar_like(o, n, 1.0), o.sqrt(x)).output(0)
    if op == "reciprocal":
        return o.divide(_scalar_like(o, n, 1.0), x).output(0)
    if op == "gelu":
        return o.gelu(x, "erf").output(0)
    if op == "gelu_tanh":
        return o.gelu(x, "tanh").output(0)
    if op == "elu":
        return o.elu(x, float(n.attrs["alpha"])).output(0)
    if op == "leaky_relu":
        slope = _scalar_like(o, n, np.float32(n.attrs["alpha"]))
        return o.select(o.greater_equal(x, _scalar_like(o, n, 0)), x, o.multiply(x, slope)).output(0)
    return simple[op](x).output(0)


_BIN = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide", "pow": "power",
        "maximum": "maximum", "minimum": "minimum", "squared_difference": "squared_difference"}
_CMP = {"equal": "equal", "not_equal": "not_equal", "less": "less", "less_equal": "less_equal",
        "greater": "greater", "greater_equal": "greater_equal"}
_RED = {"reduce_sum": "reduce_sum", "reduce_mean": "reduce_mean", "reduce_max": "reduce_max",
        "reduce_min": "reduce_min", "reduce_prod": "reduce_prod"}


def _emit(o: Any, n: Any, ins: list) -> Any:
    """The OpenVINO output computing registry node ``n`` from its inputs' outputs ``ins``."""
    op, at = n.op, n.attrs
    if op in P.UNARY:
        return _unary(o, n, ins[0])
    if op in _BIN:
        return getattr(o, _BIN[op])(ins[0], ins[1]).output(0)
    if op in _CMP:
        return _to_i32(o, getattr(o, _CMP[op])(ins[0], ins[1]))
    if op == "logical_not":
        return _to_i32(o, o.logical_not(_to_bool(o, ins[0])))
    if op in ("logical_and", "logical_or", "logical_xor"):
        return _to_i32(o, getattr(o, op)(_to_bool(o, ins[0]), _to_bool(o, ins[1])))
    if op == "cast":
        return o.convert(ins[0], "f32" if n.dtype == P.F32 else "i32").output(0)
    if op == "clip":
        lo, hi = np.asarray(at["lo"]).astype(n.dtype), np.asarray(at["hi"]).astype(n.dtype)
        return o.minimum(o.maximum(ins[0], _c(o, lo)), _c(o, hi)).output(0)
    if op == "select":
        return o.select(_to_bool(o, ins[0]), ins[1], ins[2]).output(0)
    if op == "reshape":
        return o.reshape(ins[0], _i64(o, at["shape"]), False).output(0)
    if op == "transpose":
        return o.transpose(ins[0], _i64(o, at["perm"])).output(0)
    if op == "broadcast_to":
        return o.broadcast(ins[0], _i64(o, at["shape"])).output(0)
    if op == "convert":
        x = n.inputs[0]
        if len(x.shape) == 4 and at["src"] != "NHWC" and at["dst"] == "NHWC":
            return o.transpose(ins[0], _i64(o, (0, 2, 3, 1))).output(0)
        if len(x.shape) == 4 and at["src"] == "NHWC" and at["dst"] != "NHWC":
            return o.transpose(ins[0], _i64(o, (0, 3, 1, 2))).output(0)
        return ins[0]
    if op == "slice":
        import openvino.opset8 as o8
        b, e, s = P.slice_parts(n)
        return o8.slice(ins[0], _i64(o, b), _i64(o, e), _i64(o, s)).output(0)
    if op == "concat":
        return o.concat(ins, int(at["axis"])).output(0)
    if op == "take":
        return o.gather(ins[0], ins[1], _c(o, np.int64(at["axis"]))).output(0)
    if op == "pad":
        pads = at["pads"]
        mode = at.get("mode", "constant")
        val = _c(o, np.asarray(at.get("value", 0)).astype(n.dtype)) if mode == "constant" else None
        return o.pad(ins[0], _i64(o, [p[0] for p in pads]), _i64(o, [p[1] for p in pads]), mode, val).output(0)
    if op == "softmax":
        return o.softmax(ins[0], int(at["axis"])).output(0)
    if op == "log_softmax":
        return o.log_softmax(ins[0], int(at["axis"])).output(0)
    if op in _RED:
        return getattr(o, _RED[op])(ins[0], _i64(o, at["axes"]), bool(at["keepdims"])).output(0)
    if op in ("matmul", "matmul_ex"):
        # (the reference applies a transpose flag to operands of 2 or more dimensions only)
        ta = bool(at.get("transpose_a", False)) and len(n.inputs[0].shape) >= 2
        tb = bool(at.get("transpose_b", False)) and len(n.inputs[1].shape) >= 2
        y = o.matmul(ins[0], ins[1], ta, tb).output(0)
        if len(ins) > 2:
            y = o.add(y, ins[2]).output(0)
        return _act(o, y, at.get("act", ""))
    if op in ("conv2d", "mnn_conv2d"):
        return _conv(o, n, ins[0])
    if op == "pool2d":
        return _pool(o, n, ins[0])
    if op == "resize":
        rh, rwt = P.resize_matrices(n)
        return o.matmul(o.matmul(_c(o, rh), ins[0], False, False), _c(o, rwt), False, False).output(0)
    if op == "prelu":
        x = ins[0]
        slope = _c(o, P.prelu_slope(n))
        return o.select(o.greater_equal(x, _scalar_like(o, n, 0)), x, o.multiply(x, slope)).output(0)
    raise NotImplementedError(f"no OpenVINO lowering for op {op!r}")


def _conv(o: Any, n: Any, x: Any) -> Any:
    w, b = P.conv_parts(n)
    at = n.attrs
    g = int(at["group"])
    t, bo, l, r = (int(p) for p in at["pads"])
    strides, dil = [int(s) for s in at["stride"]], [int(d) for d in at["dilation"]]
    if g == 1:
        y = o.convolution(x, _c(o, w), strides, [t, l], [bo, r], dil).output(0)
    else:
        oc, ci, kh, kw = w.shape
        wg = w.reshape(g, oc // g, ci, kh, kw)
        y = o.group_convolution(x, _c(o, wg), strides, [t, l], [bo, r], dil).output(0)
    if b is not None:
        y = o.add(y, _c(o, b.reshape(1, -1, 1, 1))).output(0)
    return _act(o, y, at.get("act", ""))


def _pool(o: Any, n: Any, x: Any) -> Any:
    import openvino.opset8 as o8
    p = P.pool_parts(n)
    if p["global"]:
        red = o.reduce_max if p["kind"] == "max" else o.reduce_mean
        return red(x, _i64(o, [2, 3]), True).output(0)
    if any(p["crop"]):
        t, b, l, r = p["crop"]
        h, w = n.inputs[0].shape[2:]
        x = o8.slice(x, _i64(o, [t, l]), _i64(o, [h - b, w - r]), _i64(o, [1, 1]), _i64(o, [2, 3])).output(0)
    t, b, l, r = p["pads"]
    if any(p["pads"]):
        mode = "edge" if p["kind"] == "max" else "constant"
        val = None if mode == "edge" else _c(o, np.float32(0))
        x = o.pad(x, _i64(o, [0, 0, t, l]), _i64(o, [0, 0, b, r]), mode, val).output(0)
    k, s = list(p["kernel"]), list(p["stride"])
    if p["kind"] == "max":
        return o.max_pool(x, s, [1, 1], [0, 0], [0, 0], k, "floor").output(0)
    y = o.avg_pool(x, s, [0, 0], [0, 0], k, False, "floor").output(0)
    return o.multiply(y, _c(o, p["factor"])).output(0)


def _ov_type(dt: np.dtype) -> Any:
    t = _ov().Type
    return {"float32": t.f32, "int32": t.i32}[str(dt)]


def build_model(graph: Any) -> Any:
    """The partition ``graph`` (placeholders, consts, claimed registry ops) as an ``openvino.Model``."""
    ov, o = _ov(), _o()
    vals: dict[int, Any] = {}
    params = []
    for p in graph.placeholders:
        par = o.parameter(list(p.shape), _ov_type(p.dtype), name=p.name or f"in{len(params)}")
        params.append(par)
        vals[id(p)] = par.output(0)
    for n in topo_order(list(graph.outputs), stop_at_values=False):
        if id(n) in vals:
            continue
        if n.op == "const":
            vals[id(n)] = _c(o, n.value)
            continue
        vals[id(n)] = _emit(o, n, [vals[id(i)] for i in n.inputs])
    results = [o.result(vals[id(out)]) for out in graph.outputs]
    return ov.Model(results, params, "mnnjit_partition")


class OpenVINODelegate(Delegate):
    """OpenVINO (``pip install openvino``): the partition built with the opset API, compiled for the
    ``device`` setting (default ``CPU``)."""

    name = "openvino"
    sdk_module = "openvino"

    @property
    def device(self) -> str:
        """The OpenVINO device name partitions compile for."""
        return str(self.settings.get("device") or "CPU")

    def device_missing(self) -> str | None:
        dev = self.device
        if dev.split(":")[0].split(".")[0] in ("AUTO", "MULTI", "HETERO", "BATCH"):
            return None
        have = core().available_devices
        if dev not in have and not any(d.split(".")[0] == dev for d in have):
            return f"OpenVINO has no device {dev!r} here (available: {have})"
        return None

    def claim(self, node: Any) -> str | None:
        return P.portable_claim(node)

    def settings_key(self) -> tuple:
        return (self.name, _ov().__version__, self.device, self.settings.get("num_threads") or 0)

    def describe(self) -> str:
        return f"openvino {_ov().__version__.split('-')[0]} on {self.device}"

    def _config(self, precision_low: bool, cache_dir: Path) -> dict:
        dev = self.device
        cfg: dict[str, Any] = {"CACHE_DIR": str(cache_dir)}
        try:
            supported = set(core().get_property(dev, "SUPPORTED_PROPERTIES"))
        except Exception:  # noqa: BLE001 - virtual devices (AUTO ...) forward what they are given
            supported = {"INFERENCE_PRECISION_HINT", "PERFORMANCE_HINT"}
        if "INFERENCE_PRECISION_HINT" in supported:
            cfg["INFERENCE_PRECISION_HINT"] = "f16" if precision_low else "f32"
        if "PERFORMANCE_HINT" in supported:
            cfg["PERFORMANCE_HINT"] = "LATENCY"
        threads = self.settings.get("num_threads")
        if threads and "INFERENCE_NUM_THREADS" in supported:
            cfg["INFERENCE_NUM_THREADS"] = int(threads)
        return cfg

    def compile(self, graph: Any, cache_path: Path, precision_low: bool) -> Compiled:
        ov = _ov()
        xml = cache_path.with_suffix(".xml")
        if not (xml.exists() and xml.with_suffix(".bin").exists()):
            model = build_model(graph)
            tmp = cache_path.with_name(f"{cache_path.name}.{os.getpid()}.{threading.get_ident()}.tmp.xml")
            ov.save_model(model, str(tmp), compress_to_fp16=False)
            # the .bin first: a reader that sees the .xml finds its weights
            os.replace(tmp.with_suffix(".bin"), xml.with_suffix(".bin"))
            os.replace(tmp, xml)
            built = True
        else:
            built = False
        blobs = cache_path.parent / "openvino_blobs"
        blobs.mkdir(parents=True, exist_ok=True)
        compiled = core().compile_model(str(xml), self.device, self._config(precision_low, blobs))
        try:
            loaded = bool(compiled.get_property("LOADED_FROM_CACHE"))
        except Exception:  # noqa: BLE001 - a device without the property
            loaded = not built
        return Compiled(_runner(compiled, len(graph.outputs)), from_cache=loaded and not built)


def _runner(compiled: Any, n_out: int) -> Callable[[list[np.ndarray]], list[np.ndarray]]:
    request = compiled.create_infer_request()
    lock = threading.Lock()  # one infer request: runs of a partition are serialised

    def run(arrays: list[np.ndarray]) -> list[np.ndarray]:
        with lock:
            # (inputs are shared, not copied; OpenVINO cannot share a read-only 0-d array)
            res = request.infer([a if a.flags.c_contiguous and a.ndim else np.array(a, order="C") for a in arrays],
                                share_inputs=True, share_outputs=False)
            return [np.asarray(res[k]) for k in range(n_out)]
    return run
