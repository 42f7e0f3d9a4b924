"""A tiny straight-line CNN runner over a .mnn file using the precision kernels directly.

It exists to test and benchmark the fp16/quantized kernels on the shared MobileNetV2 models
before (and independently of) the full model runner: it knows only Convolution,
ConvolutionDepthwise, residual ADD, global average pooling, Flatten/Reshape to the classifier
and the shape-computing ops around them (skipped)."""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np

from mnnjit.format import read_net
from mnnjit.precision import Modes
from mnnjit.backends.cpu.weights import (conv_weight_source, depthwise_weight, from_storage,
                              to_storage)

_SHAPE_OPS = {"Shape", "Rank", "Const", "Unsqueeze", "SliceTf", "Concat"}


def _conv_params(common) -> Tuple:
    k = (int(common["kernelY"]), int(common["kernelX"]))
    s = (int(common["strideY"]), int(common["strideX"]))
    d = (int(common["dilateY"]), int(common["dilateX"]))
    pads = common.get("pads")
    if pads is not None and len(pads) == 4:      # MNN order: top, left, bottom, right
        p = (int(pads[0]), int(pads[2]), int(pads[1]), int(pads[3]))
    else:
        p = (int(common["padY"]),) * 2 + (int(common["padX"]),) * 2
    if common.get("padMode") not in ("CAFFE", None, 0):
        raise NotImplementedError(f"padMode {common.get('padMode')}")
    act = "relu6" if common.get("relu6") else ("relu" if common.get("relu") else "")
    return k, s, p, d, act


class ConvNet:
    """Run a MobileNet-style .mnn model with the CPU precision kernels in ``modes``."""

    def __init__(self, path: str, modes: Modes) -> None:
        from mnnjit.backends.cpu import cnn_steps as fp16_kernels
        self.K = fp16_kernels
        self.modes = modes
        net = read_net(path)
        self.steps: List[Tuple] = []
        self.weights: List = []
        float_t = set()
        for op in net.oplists:
            t, ins, outs = op.type, op.inputIndexes or [], op.outputIndexes or []
            if t == "Input":
                self.input = outs[0]
                float_t.add(outs[0])
            elif t in ("Convolution", "ConvolutionDepthwise"):
                c = op.main["common"]
                k, s, p, d, act = _conv_params(c)
                bias = np.asarray(op.main["bias"], np.float32)
                dw = t == "ConvolutionDepthwise"
                w = (depthwise_weight if dw else conv_weight_source)(op.main, modes, op.name)
                self.weights.append(w)
                self.steps.append(("dw" if dw else "conv", ins[0], outs[0],
                                   (w, bias, k, s, p, d, int(c["group"]), act)))
                float_t.add(outs[0])
            elif t == "BinaryOp" and all(i in float_t for i in ins):
                if op.main["opType"] != "ADD":
                    raise NotImplementedError(f"BinaryOp {op.main['opType']}")
                self.steps.append(("add", tuple(ins), outs[0], None))
                float_t.add(outs[0])
            elif t == "ConvertTensor" or (t in ("Flatten", "Reshape") and ins[0] in float_t):
                self.steps.append(("alias" if t == "ConvertTensor" else "flat", ins[0], outs[0], None))
                float_t.add(outs[0])
            elif t.startswith("Pooling") and op.main.get("isGlobal") and op.main["type"] == "AVEPOOL":
                self.steps.append(("gap", ins[0], outs[0], None))
                float_t.add(outs[0])
            elif t in _SHAPE_OPS or t == "BinaryOp":
                continue
            else:
                raise NotImplementedError(f"op {t} ({op.name})")
        self.output = net.tensorName.index(net.outputName[0])

    @property
    def weight_nbytes(self) -> int:
        """Bytes held for conv weights (codes + scales, or floats)."""
        return sum(int(w.nbytes) for w in self.weights)

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Logits for an NCHW float32 input. ``activation_nbytes`` records the bytes of all
        activations the forward produced (every intermediate is kept: an upper bound)."""
        K = self.K
        vals: Dict[int, np.ndarray] = {self.input: to_storage(np.ascontiguousarray(x, np.float32), self.modes)}
        for kind, i, o, prm in self.steps:
            if kind == "conv":
                w, b, k, s, p, d, g, act = prm
                vals[o] = K.conv2d(vals[i], w, b, k, s, p, d, g, act)
            elif kind == "dw":
                w, b, k, s, p, d, g, act = prm
                wd = w.dense() if hasattr(w, "dense") else w
                vals[o] = K.depthwise_conv2d(vals[i], wd, b, k, s, p, d, act)
            elif kind == "add":
                vals[o] = K.add(vals[i[0]], vals[i[1]])
            elif kind == "gap":
                vals[o] = K.global_avg_pool(vals[i])
            elif kind == "flat":
                v = vals[i]
                vals[o] = v.reshape(v.shape[0], -1, 1, 1)
            else:
                vals[o] = vals[i]
        self.activation_nbytes = sum(v.nbytes for k, v in vals.items() if k != self.input)
        y = vals[self.output]
        return from_storage(np.ascontiguousarray(y)).reshape(y.shape[0], -1)
