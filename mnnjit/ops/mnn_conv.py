"""``mnn_conv2d``: a model's convolution with its weights held as the model keeps them in memory.

Models loaded from .mnn files carry per-convolution weights that may stay quantized in memory
(``memory=low``: int8 / 4-bit codes with per-channel or per-block scale and offset). The ``conv2d``
op takes its weights as an input node (a float array), which cannot hold codes, so the model
runner uses this op: ``attrs["weights"]`` is a :class:`ConvWeights` (hashable by identity),
the other attributes are ``conv2d``'s (``stride``, ``dilation``, ``pads`` (top, bottom, left,
right), ``group``, ``act``).

Semantics (``ref``) are exactly ``conv2d``'s on the decoded float weights. The CPU kernel (Numba,
registered with the compiler's hand-written-kernel registry) runs depthwise convolutions with the
depthwise kernel and quantized weights with the GEMM micro-kernel convolution on the codes
(dequantizing panel by panel); float weights use the reference (im2col + BLAS). Large models do
not come here: they run as kernel-step plans (``backends/cpu/kernel_steps``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .._dtypes import F32
from .nn_conv import conv2d_ref, conv_out_size
from .registry import OpDef, register


class ConvWeights:
    """One model convolution's weights [O, C/group, kh, kw] and bias, float or quantized."""

    __slots__ = ("shape", "bias", "_dense", "_quant", "_source", "__weakref__")

    def __init__(self, shape: tuple[int, int, int, int], bias: np.ndarray | None, dense: np.ndarray | None = None,
                 quant: Any = None) -> None:
        if dense is None and quant is None:
            raise ValueError("ConvWeights needs float weights or quantized codes")
        self.shape = tuple(int(s) for s in shape)
        self.bias = None if bias is None else np.ascontiguousarray(bias, np.float32).reshape(-1)
        self._dense = None if dense is None else np.ascontiguousarray(dense, np.float32).reshape(self.shape)
        self._quant = quant
        self._source = None

    @property
    def quantized(self) -> bool:
        """True when the weights are kept as quantized codes."""
        return self._dense is None

    def dense(self) -> np.ndarray:
        """The float32 weights [O, C/group, kh, kw] (decoded from codes on each call when quantized)."""
        if self._dense is not None:
            return self._dense
        return np.asarray(self._quant.dequantize(), np.float32).reshape(self.shape)

    @property
    def codes(self) -> Any:
        """The quantized weight (``mnnjit.format.QuantizedWeight``) when kept as codes, else None."""
        return self._quant if self._dense is None else None

    @property
    def nbytes(self) -> int:
        """Bytes the weights keep in memory."""
        if self._dense is not None:
            return int(self._dense.nbytes)
        q = self._quant
        return int(q.codes.nbytes + q.scale.nbytes + q.offset.nbytes)

    def __repr__(self) -> str:
        return f"ConvWeights({list(self.shape)}{', quantized' if self.quantized else ''})"


def _infer(inputs, attrs):
    x = inputs[0]
    w: ConvWeights = attrs["weights"]
    if len(x.shape) != 4:
        raise ValueError(f"convolution input must be 4-D NCHW, got shape {list(x.shape)}")
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    g = attrs["group"]
    if c != ci * g or o % g:
        raise ValueError(f"convolution: input has {c} channels but weights {list(w.shape)} with group={g} "
                         f"expect {ci * g}")
    (sh, sw), (dh, dw), (t, b, l, r) = attrs["stride"], attrs["dilation"], attrs["pads"]
    oh, ow = conv_out_size(h, t, b, kh, sh, dh), conv_out_size(wd, l, r, kw, sw, dw)
    if oh <= 0 or ow <= 0:
        raise ValueError(f"convolution: kernel {kh}x{kw} is larger than the padded input {h + t + b}x{wd + l + r}")
    return (n, o, oh, ow), F32


def reference(xs, attrs):
    w: ConvWeights = attrs["weights"]
    args = [xs[0], w.dense()] + ([] if w.bias is None else [w.bias])
    return conv2d_ref(args, attrs)


register(OpDef("mnn_conv2d", "opaque", _infer, reference, mnn_type="Convolution",
               doc="a model convolution with weights as kept in memory (float or quantized codes)"))
