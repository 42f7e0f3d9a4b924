"""Hand-written CPU kernels of the NN ops, attached through the compiler's kernel registry.

Imported by the CPU backend when it first needs a kernel (never by ``import mnnjit``). Each kernel
returns exactly what the op's numpy ``ref`` returns; below the measured work thresholds (the
threaded Numba kernels lose to numpy while other processes load the cores, docs/DECISIONS.md) it
simply runs the ``ref``.
"""
from __future__ import annotations

import numpy as np

from typing import Any

from mnnjit.ops import mnn_conv, nn_conv, nn_misc, nn_pool, nn_resize
from mnnjit.backends.cpu import cnn_steps as K
from mnnjit.backends.cpu.quant import DenseRows, QuantRows
from mnnjit.backends.cpu.depthwise import rows as nn_kernels
from mnnjit.backends.cpu.handwritten.registry import cpu_kernel


@cpu_kernel("conv2d", min_size=4096, dtypes=[np.float32])
def conv2d(inputs: list, attrs: dict):
    """Depthwise convolutions above ``nn_conv.DEPTHWISE_NUMBA_WORK`` on the Numba kernel, others as the ref."""
    x, w = inputs[0], inputs[1]
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    g = attrs["group"]
    stride, dil, pads = attrs["stride"], attrs["dilation"], attrs["pads"]
    oh = nn_conv.conv_out_size(h, pads[0], pads[1], kh, stride[0], dil[0])
    ow = nn_conv.conv_out_size(wd, pads[2], pads[3], kw, stride[1], dil[1])
    if g == c and o == c and n * c * oh * ow * kh * kw >= nn_conv.DEPTHWISE_NUMBA_WORK:
        xp = nn_conv.pad_or_crop(np.asarray(x, np.float32), pads)
        bias = np.asarray(inputs[2], np.float32).reshape(-1) if len(inputs) > 2 else None
        return nn_kernels.depthwise_conv2d(xp, np.asarray(w, np.float32).reshape(c, kh, kw), bias, stride, dil,
                                           oh, ow, attrs.get("act", ""))
    return nn_conv.conv2d_ref(inputs, attrs)


@cpu_kernel("pool2d", min_size=4096, dtypes=[np.float32])
def pool2d(inputs: list, attrs: dict):
    """Pooling above ``nn_pool.NUMBA_WORK`` window cells on the Numba kernel, smaller as the ref."""
    x = inputs[0]
    n, c = x.shape[:2]
    kh, kw = attrs["kernel"]
    oh, ow = attrs["out"]
    if n * c * oh * ow * kh * kw >= nn_pool.NUMBA_WORK:
        return nn_kernels.pool2d(x, attrs["kind"], (kh, kw), attrs["stride"], attrs["pads"], (oh, ow),
                                 attrs.get("count_include_pad", True))
    return nn_pool.pool2d_ref(inputs, attrs)


@cpu_kernel("resize", min_size=4096, dtypes=[np.float32])
def resize(inputs: list, attrs: dict):
    """Resizes above ``nn_resize.NUMBA_WORK`` output taps on the Numba kernel (nearest ones as one
    tap of weight 1: an exact copy)."""
    x = inputs[0]
    oh, ow = attrs["size"]
    h, w = x.shape[-2:]
    if not h * w:
        return nn_resize.resize_ref(inputs, attrs)
    ih, wh = nn_resize.axis_taps(h, oh, attrs, 0)
    iw, ww = nn_resize.axis_taps(w, ow, attrs, 1)
    if x.size // (h * w) * oh * ow * ih.shape[1] * iw.shape[1] >= nn_resize.NUMBA_WORK:
        return nn_kernels.resize_separable(x, ih, wh, iw, ww)
    return nn_resize.resize_ref(inputs, attrs)


@cpu_kernel("layer_norm", min_size=1 << 16, dtypes=[np.float32])
def layer_norm(inputs: list, attrs: dict):
    """Normalisation over the trailing axes (LayerNorm, InstanceNorm as converted, RMSNorm) with
    gamma/beta of the normalised shape on the Numba kernel; other layouts (groups, gamma over a
    leading axis) run the ref."""
    x = np.asarray(inputs[0])
    axes = sorted(a % x.ndim for a in attrs["axes"]) if x.ndim else []
    nd = len(axes)
    if attrs.get("group", 1) != 1 or not nd or axes != list(range(x.ndim - nd, x.ndim)):
        return nn_misc._layer_norm_ref(inputs, attrs)
    row = int(np.prod(x.shape[x.ndim - nd:]))
    params = [np.asarray(p, np.float32) for p in inputs[1:3]]
    if row == 0 or any(p.size != row for p in params):
        return nn_misc._layer_norm_ref(inputs, attrs)
    y = nn_kernels.layer_norm_rows(x.reshape(-1, row), params[0] if params else None,
                                   params[1] if len(params) > 1 else None,
                                   attrs.get("eps", 1e-5), attrs.get("rms", False))
    return y.reshape(x.shape)


def weight_source(w: Any) -> Any:
    """The CPU GEMM kernel's weight source of a model convolution's ``ConvWeights`` ([O, C/group*kh*kw]
    rows: float32, or quantized codes), made once and kept on the weights object."""
    src = getattr(w, "_source", None)
    if src is None:
        o = w.shape[0]
        if w.codes is None:
            src = DenseRows(w.dense().reshape(o, -1))
        else:
            src = QuantRows.from_quantized(w.codes, (o, int(np.prod(w.shape[1:]))))
        w._source = src
    return src


@cpu_kernel("mnn_conv2d", min_size=4096, dtypes=[np.float32])
def mnn_conv2d(inputs: list, attrs: dict) -> np.ndarray:
    """The Numba kernels: direct depthwise, or tiled GEMM over the weight source."""
    w = attrs["weights"]
    x = np.ascontiguousarray(inputs[0], np.float32)
    o, ci, kh, kw = w.shape
    g = attrs["group"]
    stride, dil, pads, act = tuple(attrs["stride"]), tuple(attrs["dilation"]), tuple(attrs["pads"]), attrs["act"]
    if min(pads) < 0:
        return mnn_conv.reference(inputs, attrs)
    if g > 1 and g == o and ci == 1:
        return K.depthwise_conv2d(x, w.dense().reshape(o, kh * kw), w.bias, (kh, kw), stride, pads, dil, act)
    if not w.quantized:
        # float weights: the reference (im2col + one BLAS GEMM). Models whose convolutions reach
        # the compile threshold run as kernel-step plans (backends/cpu/kernel_steps) with weights
        # packed once for the micro-kernel; this path only serves the remaining small plans,
        # where packing on every call would cost more than it saves
        return mnn_conv.reference(inputs, attrs)
    return K.conv2d(x, weight_source(w), w.bias, (kh, kw), stride, pads, dil, g, act)
