"""Write a graph of Vars as an MNN ``Net`` (for ``expr.save``): the inverse of the translator.

Each node becomes one MNN op in the form MNN's own converter writes (weights inside
Convolution ops, NC4HW4 conversions around CNN ops), so real MNN loads the file with
``expr.load_as_list`` or ``nn.load_module_from_file`` and computes the same values.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..graph import Node, topo_order
from .convert_math import _BINARY, _REDUCE, _UNARY

_DT_NAMES = {np.dtype(np.float32): "DT_FLOAT", np.dtype(np.int32): "DT_INT32", np.dtype(np.uint8): "DT_UINT8",
             np.dtype(np.int8): "DT_INT8", np.dtype(np.float16): "DT_FLOAT"}
_BLOB_FIELD = {"DT_FLOAT": "float32s", "DT_INT32": "int32s", "DT_UINT8": "uint8s", "DT_INT8": "int8s"}

_INV_UNARY = {v: k for k, v in _UNARY.items()}
_INV_BINARY = {v: k for k, v in _BINARY.items() if k not in ("DIV", "MAX_TEMP", "MIN_TEMP")}
_INV_REDUCE = {v: k for k, v in _REDUCE.items()}


class ExportError(NotImplementedError):
    """A node whose op mnnjit cannot write as an MNN op."""


def blob(array: np.ndarray, fmt: str = "NCHW") -> dict:
    """A Blob table dict for ``array``."""
    arr = np.asarray(array)
    dt = _DT_NAMES.get(arr.dtype)
    if dt is None:
        raise ExportError(f"cannot save constants of dtype {arr.dtype}")
    if arr.dtype == np.float16:
        arr = arr.astype(np.float32)
    return {"dims": np.asarray(arr.shape, np.int32), "dataFormat": fmt if fmt != "NC4HW4" else "NCHW",
            "dataType": dt, _BLOB_FIELD[dt]: arr.reshape(-1)}


class _Writer:
    def __init__(self) -> None:
        self.ops: list = []
        self.names: list[str] = []
        self.used: set[str] = set()
        self.index: dict[int, int] = {}

    def tensor(self, name: str) -> int:
        base = name or f"t{len(self.names)}"
        n, k = base, 1
        while n in self.used:
            n, k = f"{base}__{k}", k + 1
        self.used.add(n)
        self.names.append(n)
        return len(self.names) - 1

    def op(self, type_: str, name: str, ins: list[int], main_type: str | None, main: dict | None,
           out_name: str = "") -> int:
        from ..format import Op
        t = self.tensor(out_name or name)
        self.ops.append(Op(type=type_, name=self.names[t], inputIndexes=ins or None, outputIndexes=[t],
                           main_type=main_type, main=main, defaultDimentionFormat="NCHW"))
        return t

    def const(self, array: np.ndarray, name: str = "") -> int:
        return self.op("Const", name or f"Const{len(self.names)}", [], "Blob", blob(array))

    def ints(self, values, name: str = "") -> int:
        return self.const(np.asarray(values, np.int32).reshape(-1), name)


def _nc4(w: _Writer, t: int, name: str) -> int:
    return w.op("ConvertTensor", f"{name}__tr4", [t], "TensorConvertInfo", {"source": "NCHW", "dest": "NC4HW4"})


def _nchw(w: _Writer, t: int, name: str, out_name: str) -> int:
    return w.op("ConvertTensor", out_name, [t], "TensorConvertInfo", {"source": "NC4HW4", "dest": "NCHW"})


def _value(node: Node, what: str) -> np.ndarray:
    if node.op != "const" and (node.live or node.value is None):
        raise ExportError(f"cannot save {what} that is not a constant")
    if node.value is None:
        from ..runtime import evaluate
        evaluate([node])
    return np.asarray(node.value)


def _write_node(w: _Writer, node: Node, ins: list[int], name: str) -> int:
    op, at = node.op, node.attrs
    if op in _INV_UNARY:
        return w.op("UnaryOp", name, ins, "UnaryOp", {"opType": _INV_UNARY[op], "T": "DT_FLOAT"})
    if op in _INV_BINARY:
        return w.op("BinaryOp", name, ins, "BinaryOp", {"opType": _INV_BINARY[op], "T": "DT_FLOAT"})
    if op == "relu":
        return w.op("ReLU", name, ins, "Relu", {"slope": 0.0})
    if op in ("relu6", "clip"):
        lo, hi = (0.0, 6.0) if op == "relu6" else (float(at["lo"]), float(at["hi"]))
        return w.op("ReLU6", name, ins, "Relu6", {"minValue": lo, "maxValue": hi})
    if op == "cast":
        return w.op("Cast", name, ins, "CastParam", {"srcT": "DT_FLOAT", "dstT": _DT_NAMES[np.dtype(at["dtype"])]})
    if op == "select":
        return w.op("Select", name, ins, None, None)
    if op in _INV_REDUCE:
        return w.op("Reduction", name, ins, "ReductionParam", {
            "operation": _INV_REDUCE[op], "dim": np.asarray(at["axes"], np.int32), "keepDims": bool(at["keepdims"]),
            "dType": "DT_FLOAT"})
    if op in ("argmax", "argmin"):
        (axis,) = at["axes"]
        if at.get("keepdims"):
            raise ExportError("argmax with keepdims")
        return w.op("ArgMax" if op == "argmax" else "ArgMin", name, ins, "ArgMax", {"axis": int(axis), "topK": 1})
    if op == "reshape":
        return w.op("Reshape", name, ins, "Reshape", {"dims": np.asarray(node.shape, np.int32), "dimType": "NCHW"})
    if op == "transpose":
        return w.op("Permute", name, ins, "Permute", {"dims": np.asarray(at["perm"], np.int32)})
    if op == "broadcast_to":
        return w.op("BroadcastTo", name, ins + [w.ints(node.shape)], None, None)
    if op == "concat":
        return w.op("Concat", name, ins, "Axis", {"axis": int(at["axis"])})
    if op == "take":
        return w.op("GatherV2", name, ins + [w.ints([at["axis"]])], None, None)
    if op == "slice":
        return _write_slice(w, node, ins, name)
    if op == "softmax":
        return w.op("Softmax", name, ins, "Axis", {"axis": int(at["axis"])})
    if op in ("matmul", "matmul_ex"):
        return _write_matmul(w, node, ins, name)
    if op == "conv2d":
        return _write_conv(w, node, ins, name)
    if op == "mnn_conv2d":
        cw = at["weights"]
        return _write_conv(w, node, ins, name, cw.dense(), cw.bias)
    if op == "pool2d":
        return _write_pool(w, node, ins, name)
    if op == "layer_norm":
        return _write_layer_norm(w, node, ins, name)
    if op == "resize":
        return _write_resize(w, node, ins, name)
    if op == "pad":
        return _write_pad(w, node, ins, name)
    if op == "convert":
        return w.op("ConvertTensor", name, ins, "TensorConvertInfo", {"source": at["src"], "dest": at["dst"]})
    raise ExportError(f"expr.save: mnnjit cannot write op {op!r} as an MNN op yet")


def _write_slice(w: _Writer, node: Node, ins: list[int], name: str) -> int:
    begin, end, step = node.attrs["begin"], node.attrs["end"], node.attrs["step"]
    end_mask = 0
    ends = []
    for k, (e, s) in enumerate(zip(end, step)):
        if s < 0 and e < 0:
            end_mask |= 1 << k
            ends.append(0)
        else:
            ends.append(e)
    return w.op("StridedSlice", name, ins + [w.ints(begin), w.ints(ends), w.ints(step)], "StridedSliceParam",
                {"Index": "DT_INT32", "T": "DT_FLOAT", "endMask": end_mask})


def _write_matmul(w: _Writer, node: Node, ins: list[int], name: str) -> int:
    at = node.attrs
    a, b = node.inputs[0], node.inputs[1]
    ta, tb = bool(at.get("transpose_a")), bool(at.get("transpose_b"))
    act = at.get("act", "")
    if len(a.shape) < 2 or len(b.shape) < 2:  # numpy's 1-D matmul: as a matrix, then reshaped
        if ta or tb:
            raise ExportError("expr.save: transposed matmul of 1-D operands")
        ins = list(ins)
        if len(a.shape) == 1:
            ins[0] = w.op("Reshape", name + "__a2", [ins[0]], "Reshape", {"dims": np.asarray([1, a.shape[0]], np.int32),
                                                                          "dimType": "NCHW"})
        if len(b.shape) == 1:
            ins[1] = w.op("Reshape", name + "__b2", [ins[1]], "Reshape", {"dims": np.asarray([b.shape[0], 1], np.int32),
                                                                          "dimType": "NCHW"})
        t = w.op("MatMul", name + "__mm2", ins[:2], "MatMul", {"transposeA": False, "transposeB": False, "T": "DT_FLOAT"})
        t = w.op("Reshape", name + "__mmr", [t], "Reshape", {"dims": np.asarray(node.shape, np.int32), "dimType": "NCHW"})
        if len(ins) > 2:
            t = w.op("BinaryOp", name + "__bias", [t, ins[2]], "BinaryOp", {"opType": "ADD", "T": "DT_FLOAT"})
        if act == "relu":
            t = w.op("ReLU", name, [t], "Relu", {"slope": 0.0})
        elif act == "relu6":
            t = w.op("ReLU6", name, [t], "Relu6", {"minValue": 0.0, "maxValue": 6.0})
        return t
    tmp = name + "__mm" if act else name
    if len(a.shape) == 2 and len(b.shape) == 2:
        t = w.op("MatMul", tmp, ins, "MatMul", {"transposeA": ta, "transposeB": tb, "T": "DT_FLOAT"})
    else:
        t = w.op("BatchMatMul", tmp, ins[:2], "BatchMatMulParam", {"adjX": ta, "adjY": tb})
        if len(ins) > 2:
            t = w.op("BinaryOp", tmp + "__bias", [t, ins[2]], "BinaryOp", {"opType": "ADD", "T": "DT_FLOAT"})
    if act == "relu":
        t = w.op("ReLU", name, [t], "Relu", {"slope": 0.0})
    elif act == "relu6":
        t = w.op("ReLU6", name, [t], "Relu6", {"minValue": 0.0, "maxValue": 6.0})
    return t


def _write_conv(w: _Writer, node: Node, ins: list[int], name: str, weight: np.ndarray | None = None,
                bias: np.ndarray | None = None) -> int:
    at = node.attrs
    if weight is None:
        weight = _value(node.inputs[1], "a convolution weight").astype(np.float32)
        bias = (_value(node.inputs[2], "a convolution bias").astype(np.float32) if len(node.inputs) > 2
                else None)
    if bias is None:
        bias = np.zeros(weight.shape[0], np.float32)
    o, cg, kh, kw = weight.shape
    t, b, l, r = at["pads"]
    group = int(at["group"])
    common = {"kernelX": kw, "kernelY": kh, "strideX": at["stride"][1], "strideY": at["stride"][0],
              "dilateX": at["dilation"][1], "dilateY": at["dilation"][0], "padMode": "CAFFE", "group": group,
              "outputCount": o, "inputCount": cg * group, "padX": l, "padY": t,
              "pads": np.asarray([t, l, b, r], np.int32), "relu": at.get("act") == "relu",
              "relu6": at.get("act") == "relu6"}
    kind = "ConvolutionDepthwise" if group > 1 and group == o == cg * group else "Convolution"
    x = _nc4(w, ins[0], name)
    y = w.op(kind, name + "__nc4", [x], "Convolution2D", {"common": common, "weight": weight.reshape(-1),
                                                          "bias": bias})
    return _nchw(w, y, name, name)


def _write_pool(w: _Writer, node: Node, ins: list[int], name: str) -> int:
    at = node.attrs
    x = node.inputs[0]
    kh, kw = at["kernel"]
    sh, sw = at["stride"]
    t, b, l, r = at["pads"]
    oh, ow = at["out"]
    floor_h = (x.shape[2] + t + b - kh) // sh + 1
    floor_w = (x.shape[3] + l + r - kw) // sw + 1
    main = {"kernelX": kw, "kernelY": kh, "strideX": sw, "strideY": sh, "padX": l, "padY": t,
            "pads": np.asarray([t, l, b, r], np.int32), "type": "MAXPOOL" if at["kind"] == "max" else "AVEPOOL",
            "padType": "CAFFE", "ceilModel": (oh, ow) != (floor_h, floor_w),
            "countType": "INCLUDE_PADDING" if at.get("count_include_pad", True) else "EXCLUDE_PADDING"}
    if (kh, kw) == tuple(x.shape[2:]) and (oh, ow) == (1, 1) and (t, b, l, r) == (0, 0, 0, 0):
        main = {"isGlobal": True, "type": main["type"], "padType": "CAFFE"}
    xin = _nc4(w, ins[0], name)
    y = w.op("Pooling", name + "__nc4", [xin], "Pool", main)
    return _nchw(w, y, name, name)


def _write_layer_norm(w: _Writer, node: Node, ins: list[int], name: str) -> int:
    at = node.attrs
    main: dict[str, Any] = {"axis": np.asarray(at["axes"], np.int32), "epsilon": float(at["eps"]),
                            "useRMSNorm": bool(at.get("rms"))}
    if at.get("group"):
        main["group"] = int(at["group"])
    if len(node.inputs) > 1:
        main["gamma"] = _value(node.inputs[1], "a layer-norm gamma").astype(np.float32).reshape(-1)
    if len(node.inputs) > 2:
        main["beta"] = _value(node.inputs[2], "a layer-norm beta").astype(np.float32).reshape(-1)
    return w.op("LayerNorm", name, ins[:1], "LayerNorm", main)


_INV_CTM = {"align_corners": "AlignCorners", "half_pixel": "HalfPixels", "pytorch_half_pixel": "PytorchHalfPixels",
            "asymmetric": "Asymmetric", "tf_half_pixel": "TensorflowHalfPixels"}


def _write_resize(w: _Writer, node: Node, ins: list[int], name: str) -> int:
    at = node.attrs
    method, offset = at["method"], tuple(at.get("offset") or (0.0, 0.0))
    if method == "nearest_ceil" and offset == (-0.5, -0.5):
        rtype = 4  # MNN's rounding nearest (ties down), see convert_cnn.interp
    elif offset != (0.0, 0.0) or at.get("exclude_outside"):
        raise ExportError("expr.save: resize with sampling offsets or exclude_outside")
    else:
        rtype = {"nearest": 1, "bilinear": 2, "cubic": 3}.get(method)
        if rtype is None:
            raise ExportError(f"expr.save: resize method {method!r}")
    oh, ow = at["size"]
    main = {"outputHeight": int(oh), "outputWidth": int(ow), "resizeType": rtype, "ctm": _INV_CTM[at["coord"]],
            "alignCorners": at["coord"] == "align_corners", "halfPixelCenters": at["coord"] == "half_pixel",
            "cubicCoeffA": float(at.get("cubic_a", -0.75))}
    x = _nc4(w, ins[0], name)
    extra = []
    if at.get("scale") is not None:
        # coordinates mapped with given scales (ONNX Resize with scales): written as Interp's float
        # scales input, which the converter reads back to the same sizes and scales (float32 values
        # survive the 1 / (1 / s) round trip)
        sh, sw = (1.0 / float(v) for v in at["scale"])
        extra = [w.const(np.asarray([1.0, 1.0, sh, sw], np.float32))]
    y = w.op("Interp", name + "__nc4", [x] + extra, "Interp", main)
    return _nchw(w, y, name, name)


def _write_pad(w: _Writer, node: Node, ins: list[int], name: str) -> int:
    at = node.attrs
    mode = {"constant": "CONSTANT", "reflect": "REFLECT", "symmetric": "SYMMETRIC", "edge": "EDGE"}.get(at["mode"])
    if mode is None:
        raise ExportError(f"expr.save: pad mode {at['mode']!r}")
    pads = [int(v) for pair in at["pads"] for v in pair]
    extra = [w.const(np.asarray(at.get("value", 0), node.dtype))] if mode == "CONSTANT" else []
    return w.op("Padding", name, ins + [w.ints(pads)] + extra, "PadParam", {"mode": mode})


#: Inputs of these ops are folded into the op's own parameters (not written as tensors).
_PARAM_INPUTS: dict[str, Callable[[Node], int]] = {"conv2d": lambda n: 1, "layer_norm": lambda n: 1}


def graph_to_net(roots: list[Node], names: list[str]) -> Any:
    """An MNN Net computing ``roots`` (tensors named ``names``)."""
    from ..format import Net
    w = _Writer()
    root_names = {id(r): n for r, n in zip(roots, names) if n}
    order = topo_order(roots, stop_at_values=False)
    skip: set[int] = set()
    for node in order:
        keep = _PARAM_INPUTS.get(node.op)
        if keep is not None:
            for inp in node.inputs[keep(node):]:
                skip.add(id(inp))
    needed = {id(r) for r in roots}
    for node in reversed(order):
        if id(node) in needed:
            keep = _PARAM_INPUTS.get(node.op)
            for inp in (node.inputs[:keep(node)] if keep else node.inputs):
                needed.add(id(inp))
    for node in order:
        if id(node) not in needed:
            continue
        name = root_names.get(id(node)) or node.name
        if node.op == "placeholder":
            main = {"dims": np.asarray(node.shape, np.int32), "dtype": _DT_NAMES.get(node.dtype, "DT_FLOAT"),
                    "dformat": "NHWC" if node.fmt == "NHWC" else "NCHW"}
            w.index[id(node)] = w.op("Input", name or f"input{len(w.names)}", [], "Input", main)
            continue
        if node.op == "const" or (not node.live and node.value is not None):
            w.index[id(node)] = w.const(_value(node, "a constant"), name)
            continue
        if node.op == "copy":
            src = w.index[id(node.inputs[0])]
            if name:
                w.index[id(node)] = w.op("BinaryOp", name, [src, w.const(np.zeros((), node.dtype))], "BinaryOp",
                                         {"opType": "ADD", "T": "DT_FLOAT"})
            else:
                w.index[id(node)] = src
            continue
        keep = _PARAM_INPUTS.get(node.op)
        ins = [w.index[id(i)] for i in (node.inputs[:keep(node)] if keep else node.inputs)]
        w.index[id(node)] = _write_node(w, node, ins, name or f"{node.op}{len(w.names)}")
    out_names = [w.names[w.index[id(r)]] for r in roots]
    return Net(oplists=w.ops, tensorName=w.names, outputName=out_names, bizCode="mnnjit",
               extraInfo={"version": "3.6.1"})
