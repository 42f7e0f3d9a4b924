"""The ONNX Runtime bridge: each claimed partition is exported as an in-memory ONNX model (opset 17,
built with the ``onnx`` package from the registry ops) and run by an ``InferenceSession`` with the
configured execution providers (QNN for Qualcomm NPUs, CoreML, NNAPI, OpenVINO, DirectML, CPU ...)
and provider options.

Caching per partition entry (see :meth:`Delegate.compile`):

* providers that write EP context models (QNN, OpenVINO, VitisAI, TensorRT RTX) get
  ``ep.context_enable``: the compiled context is kept as ``<entry>_ctx.onnx`` and a later session
  loads it instead of compiling;
* the CPU provider alone: ORT's optimized model is kept as ``<entry>.onnx`` (optimized for this
  machine: the entry's key names the platform) and later loaded with optimizations off;
* other providers: the exported model is kept (``<entry>.src.onnx``) so a later process skips the
  export; the provider compiles it as it does every time.

``precision`` low asks the providers that have an fp16 option for it (OpenVINO ``precision=FP16``,
QNN ``enable_htp_fp16_precision``) unless the provider options already say.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ...graph import topo_order
from . import portable as P
from .delegate import Compiled, Delegate

OPSET = 17
#: providers that can write an EP context model
EP_CONTEXT = ("QNNExecutionProvider", "OpenVINOExecutionProvider", "VitisAIExecutionProvider",
              "NvTensorRTRTXExecutionProvider")
_FP16_OPTION = {"OpenVINOExecutionProvider": ("precision", "FP16"),
                "QNNExecutionProvider": ("enable_htp_fp16_precision", "1")}


class _Builder:
    """Collects ONNX nodes and initializers for one partition."""

    def __init__(self) -> None:
        import onnx
        from onnx import helper, numpy_helper
        self.onnx, self.h, self.nh = onnx, helper, numpy_helper
        self.nodes: list = []
        self.inits: list = []
        self._k = 0
        self._consts: dict[int, str] = {}

    def name(self) -> str:
        self._k += 1
        return f"v{self._k}"

    def const(self, arr: Any, dtype: Any = None, key: Any = None) -> str:
        if key is not None and id(key) in self._consts:
            return self._consts[id(key)]
        a = np.array(arr, dtype, order="C")
        nm = self.name()
        self.inits.append(self.nh.from_array(a, nm))
        if key is not None:
            self._consts[id(key)] = nm
        return nm

    def i64(self, vals: Any) -> str:
        return self.const(np.asarray(vals, np.int64).reshape(-1))

    def add(self, op_type: str, inputs: list, **attrs: Any) -> str:
        out = self.name()
        self.nodes.append(self.h.make_node(op_type, list(inputs), [out], **attrs))
        return out


def _tp(dt: np.dtype) -> int:
    from onnx import TensorProto
    return {"float32": TensorProto.FLOAT, "int32": TensorProto.INT32}[str(dt)]


def _scalar(b: _Builder, n: Any, v: float) -> str:
    return b.const(np.asarray(v, n.inputs[0].dtype))


def _act(b: _Builder, y: str, act: str) -> str:
    if act == "relu":
        return b.add("Relu", [y])
    if act == "relu6":
        return b.add("Clip", [y, b.const(np.float32(0)), b.const(np.float32(6))])
    return y


_UN = {"neg": "Neg", "abs": "Abs", "sqrt": "Sqrt", "exp": "Exp", "log": "Log", "sin": "Sin", "cos": "Cos",
       "tan": "Tan", "tanh": "Tanh", "sigmoid": "Sigmoid", "erf": "Erf", "floor": "Floor", "ceil": "Ceil",
       "sign": "Sign", "softplus": "Softplus", "hard_swish": "HardSwish", "asin": "Asin", "acos": "Acos",
       "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh", "asinh": "Asinh", "atanh": "Atanh",
       "reciprocal": "Reciprocal", "copy": "Identity"}
_BIN = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "maximum": "Max", "minimum": "Min"}
_CMP = {"equal": "Equal", "less": "Less", "less_equal": "LessOrEqual", "greater": "Greater",
        "greater_equal": "GreaterOrEqual"}


def _unary(b: _Builder, n: Any, x: str) -> str:
    op = n.op
    intx = n.dtype == P.I32
    if op == "square":
        return b.add("Mul", [x, x])
    if op == "relu":
        return b.add("Max", [x, _scalar(b, n, 0)]) if intx else b.add("Relu", [x])
    if op == "relu6":
        return b.add("Min", [b.add("Max", [x, _scalar(b, n, 0)]), _scalar(b, n, 6)])
    if op == "rsqrt":
        return b.add("Reciprocal", [b.add("Sqrt", [x])])
    if op == "gelu":
        inner = b.add("Erf", [b.add("Mul", [x, _scalar(b, n, 0.7071067811865476)])])
        return b.add("Mul", [b.add("Mul", [x, _scalar(b, n, 0.5)]), b.add("Add", [inner, _scalar(b, n, 1.0)])])
    if op == "gelu_tanh":
        x3 = b.add("Mul", [b.add("Mul", [x, x]), x])
        y = b.add("Mul", [b.add("Add", [x, b.add("Mul", [x3, _scalar(b, n, 0.044715)])]),
                          _scalar(b, n, 0.7978845608028654)])
        return b.add("Mul", [b.add("Mul", [x, _scalar(b, n, 0.5)]), b.add("Add", [b.add("Tanh", [y]), _scalar(b, n, 1.0)])])
    if op == "silu":
        return b.add("Mul", [x, b.add("Sigmoid", [x])])
    if op == "elu":
        return b.add("Elu", [x], alpha=float(n.attrs["alpha"]))
    if op == "leaky_relu":
        return b.add("LeakyRelu", [x], alpha=float(np.float32(n.attrs["alpha"])))
    return b.add(_UN[op], [x])


def _emit(b: _Builder, n: Any, ins: list) -> str:
    """The ONNX value computing registry node ``n`` from its inputs' values ``ins``."""
    from onnx import TensorProto
    op, at = n.op, n.attrs
    if op in P.UNARY:
        return _unary(b, n, ins[0])
    if op in _BIN:
        return b.add(_BIN[op], ins[:2])
    if op == "squared_difference":
        d = b.add("Sub", ins[:2])
        return b.add("Mul", [d, d])
    if op in _CMP:
        return b.add("Cast", [b.add(_CMP[op], ins[:2])], to=TensorProto.INT32)
    if op == "not_equal":
        return b.add("Cast", [b.add("Not", [b.add("Equal", ins[:2])])], to=TensorProto.INT32)
    if op in ("logical_and", "logical_or", "logical_xor", "logical_not"):
        bools = [b.add("Cast", [i], to=TensorProto.BOOL) for i in ins]
        kind = {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor", "logical_not": "Not"}[op]
        return b.add("Cast", [b.add(kind, bools)], to=TensorProto.INT32)
    if op == "cast":
        return b.add("Cast", [ins[0]], to=_tp(n.dtype))
    if op == "clip":
        lo, hi = np.asarray(at["lo"]).astype(n.dtype), np.asarray(at["hi"]).astype(n.dtype)
        return b.add("Min", [b.add("Max", [ins[0], b.const(lo)]), b.const(hi)])
    if op == "select":
        return b.add("Where", [b.add("Cast", [ins[0]], to=TensorProto.BOOL), ins[1], ins[2]])
    if op == "reshape":
        return b.add("Reshape", [ins[0], b.i64(at["shape"])])
    if op == "transpose":
        return b.add("Transpose", [ins[0]], perm=[int(p) for p in at["perm"]])
    if op == "broadcast_to":
        return b.add("Expand", [ins[0], b.i64(at["shape"])])
    if op == "convert":
        x = n.inputs[0]
        if len(x.shape) == 4 and at["src"] != "NHWC" and at["dst"] == "NHWC":
            return b.add("Transpose", [ins[0]], perm=[0, 2, 3, 1])
        if len(x.shape) == 4 and at["src"] == "NHWC" and at["dst"] != "NHWC":
            return b.add("Transpose", [ins[0]], perm=[0, 3, 1, 2])
        return b.add("Identity", [ins[0]])
    if op == "slice":
        bg, e, s = P.slice_parts(n)
        return b.add("Slice", [ins[0], b.i64(bg), b.i64(e), b.i64(range(len(bg))), b.i64(s)])
    if op == "concat":
        return b.add("Concat", ins, axis=int(at["axis"]))
    if op == "take":
        return b.add("Gather", ins[:2], axis=int(at["axis"]))
    if op == "pad":
        pads = at["pads"]
        mode = at.get("mode", "constant")
        args = [ins[0], b.i64([p[0] for p in pads] + [p[1] for p in pads])]
        if mode == "constant":
            args.append(b.const(np.asarray(at.get("value", 0)).astype(n.dtype)))
        return b.add("Pad", args, mode=mode)
    if op == "softmax":
        return b.add("Softmax", [ins[0]], axis=int(at["axis"]))
    if op == "log_softmax":
        return b.add("LogSoftmax", [ins[0]], axis=int(at["axis"]))
    if op == "reduce_sum":
        return b.add("ReduceSum", [ins[0], b.i64(at["axes"])], keepdims=int(bool(at["keepdims"])))
    if op in ("reduce_mean", "reduce_max", "reduce_min", "reduce_prod"):
        kind = {"reduce_mean": "ReduceMean", "reduce_max": "ReduceMax", "reduce_min": "ReduceMin",
                "reduce_prod": "ReduceProd"}[op]
        return b.add(kind, [ins[0]], axes=[int(a) for a in at["axes"]], keepdims=int(bool(at["keepdims"])))
    if op in ("matmul", "matmul_ex"):
        a_, b_ = ins[0], ins[1]
        for flag, k in (("transpose_a", 0), ("transpose_b", 1)):
            r = len(n.inputs[k].shape)
            if at.get(flag) and r >= 2:
                t = b.add("Transpose", [ins[k]], perm=list(range(r - 2)) + [r - 1, r - 2])
                a_, b_ = (t, b_) if k == 0 else (a_, t)
        y = b.add("MatMul", [a_, b_])
        if len(ins) > 2:
            y = b.add("Add", [y, ins[2]])
        return _act(b, y, at.get("act", ""))
    if op in ("conv2d", "mnn_conv2d"):
        w, bias = P.conv_parts(n)
        t, bo, l, r = (int(p) for p in at["pads"])
        args = [ins[0], b.const(w)] + ([] if bias is None else [b.const(bias)])
        y = b.add("Conv", args, group=int(at["group"]), pads=[t, l, bo, r], strides=[int(s) for s in at["stride"]],
                  dilations=[int(d) for d in at["dilation"]], kernel_shape=list(w.shape[2:]))
        return _act(b, y, at.get("act", ""))
    if op == "pool2d":
        return _pool(b, n, ins[0])
    if op == "resize":
        rh, rwt = P.resize_matrices(n)
        return b.add("MatMul", [b.add("MatMul", [b.const(rh), ins[0]]), b.const(rwt)])
    if op == "prelu":
        x = ins[0]
        neg = b.add("Mul", [x, b.const(P.prelu_slope(n))])
        return b.add("Where", [b.add("GreaterOrEqual", [x, _scalar(b, n, 0)]), x, neg])
    raise NotImplementedError(f"no ONNX lowering for op {op!r}")


def _pool(b: _Builder, n: Any, x: str) -> str:
    p = P.pool_parts(n)
    if p["global"]:
        kind = "ReduceMax" if p["kind"] == "max" else "ReduceMean"
        return b.add(kind, [x], axes=[2, 3], keepdims=1)
    if any(p["crop"]):
        t, bo, l, r = p["crop"]
        h, w = n.inputs[0].shape[2:]
        x = b.add("Slice", [x, b.i64([t, l]), b.i64([h - bo, w - r]), b.i64([2, 3]), b.i64([1, 1])])
    if any(p["pads"]):
        t, bo, l, r = p["pads"]
        args = [x, b.i64([0, 0, t, l, 0, 0, bo, r])]
        if p["kind"] == "max":
            x = b.add("Pad", args, mode="edge")
        else:
            x = b.add("Pad", args + [b.const(np.float32(0))], mode="constant")
    k, s = list(p["kernel"]), list(p["stride"])
    if p["kind"] == "max":
        return b.add("MaxPool", [x], kernel_shape=k, strides=s)
    y = b.add("AveragePool", [x], kernel_shape=k, strides=s)
    return b.add("Mul", [y, b.const(p["factor"])])


def export(graph: Any) -> bytes:
    """The partition ``graph`` as a serialized ONNX model (inputs ``in<k>``, outputs ``out<k>``)."""
    b = _Builder()
    h = b.h
    vals: dict[int, str] = {}
    inputs = []
    for k, p in enumerate(graph.placeholders):
        vals[id(p)] = f"in{k}"
        inputs.append(h.make_tensor_value_info(f"in{k}", _tp(p.dtype), list(p.shape)))
    for n in topo_order(list(graph.outputs), stop_at_values=False):
        if id(n) in vals:
            continue
        if n.op == "const":
            vals[id(n)] = b.const(n.value, key=n)
            continue
        vals[id(n)] = _emit(b, n, [vals[id(i)] for i in n.inputs])
    outputs = []
    for k, o in enumerate(graph.outputs):
        b.nodes.append(h.make_node("Identity", [vals[id(o)]], [f"out{k}"]))
        outputs.append(h.make_tensor_value_info(f"out{k}", _tp(o.dtype), list(o.shape)))
    g = h.make_graph(b.nodes, "mnnjit_partition", inputs, outputs, b.inits)
    model = h.make_model(g, opset_imports=[h.make_opsetid("", OPSET)], producer_name="mnnjit")
    model.ir_version = 8
    return model.SerializeToString()


class ONNXRuntimeDelegate(Delegate):
    """ONNX Runtime (``pip install onnxruntime``, or a vendor build with its execution provider):
    partitions exported as ONNX, run with the ``providers`` setting (default the CPU provider)."""

    name = "onnxruntime"
    sdk_module = "onnxruntime"

    @property
    def providers(self) -> list[str]:
        """Execution providers, in priority order."""
        return list(self.settings.get("providers") or ["CPUExecutionProvider"])

    def device_missing(self) -> str | None:
        import onnxruntime as ort
        have = ort.get_available_providers()
        missing = [p for p in self.providers if p not in have]
        if missing:
            return f"ONNX Runtime here has no {missing[0]} (available: {have})"
        return None

    def claim(self, node: Any) -> str | None:
        return P.portable_claim(node)

    def settings_key(self) -> tuple:
        import onnxruntime as ort
        return (self.name, ort.__version__, tuple(self.providers),
                repr(self.settings.get("provider_options")), self.settings.get("num_threads") or 0)

    def describe(self) -> str:
        import onnxruntime as ort
        return f"onnxruntime {ort.__version__} with {', '.join(self.providers)}"

    def _provider_options(self, precision_low: bool) -> list[dict]:
        opts = [dict(o) for o in (self.settings.get("provider_options") or [])]
        opts += [{} for _ in range(len(self.providers) - len(opts))]
        if precision_low:
            for p, o in zip(self.providers, opts):
                if p in _FP16_OPTION and _FP16_OPTION[p][0] not in o:
                    o[_FP16_OPTION[p][0]] = _FP16_OPTION[p][1]
        return opts

    def compile(self, graph: Any, cache_path: Path, precision_low: bool) -> Compiled:
        import onnxruntime as ort
        so = ort.SessionOptions()
        threads = self.settings.get("num_threads")
        if threads:
            so.intra_op_num_threads = int(threads)
        so.inter_op_num_threads = 1
        # ORT warns that an optimized model it saves is machine-specific: the cache key names the machine
        so.log_severity_level = 3
        # idle ORT workers would spin and take the cores the CPU segments run on next
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        providers = self.providers
        popts = self._provider_options(precision_low)
        tmp_tag = f".{os.getpid()}.{threading.get_ident()}.tmp"
        io = (len(graph.placeholders), len(graph.outputs))
        if any(p in EP_CONTEXT for p in providers):
            ctx = cache_path.with_name(cache_path.name + "_ctx.onnx")
            if ctx.exists():
                return Compiled(self._runner(ort.InferenceSession(str(ctx), so, providers, popts), *io), True)
            tmp = ctx.with_name(ctx.name + tmp_tag)
            so.add_session_config_entry("ep.context_enable", "1")
            so.add_session_config_entry("ep.context_file_path", str(tmp))
            sess = ort.InferenceSession(export(graph), so, providers, popts)
            if tmp.exists():
                os.replace(tmp, ctx)
            return Compiled(self._runner(sess, *io), False)
        if providers == ["CPUExecutionProvider"]:
            opt = cache_path.with_suffix(".onnx")
            if opt.exists():
                so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
                return Compiled(self._runner(ort.InferenceSession(str(opt), so, providers, popts), *io), True)
            tmp = opt.with_name(opt.name + tmp_tag)
            so.optimized_model_filepath = str(tmp)
            sess = ort.InferenceSession(export(graph), so, providers, popts)
            if tmp.exists():
                os.replace(tmp, opt)
            return Compiled(self._runner(sess, *io), False)
        src = cache_path.with_name(cache_path.name + ".src.onnx")
        if src.exists():
            return Compiled(self._runner(ort.InferenceSession(str(src), so, providers, popts), *io), False)
        data = export(graph)
        tmp = src.with_name(src.name + tmp_tag)
        tmp.write_bytes(data)
        os.replace(tmp, src)
        return Compiled(self._runner(ort.InferenceSession(data, so, providers, popts), *io), False)

    @staticmethod
    def _runner(sess: Any, n_in: int, n_out: int) -> Any:
        names = [f"in{k}" for k in range(n_in)]
        outs = [f"out{k}" for k in range(n_out)]

        def run(arrays: list[np.ndarray]) -> list[np.ndarray]:
            return sess.run(outs, {nm: a if a.flags.c_contiguous else np.ascontiguousarray(a)
                                   for nm, a in zip(names, arrays)})
        return run
