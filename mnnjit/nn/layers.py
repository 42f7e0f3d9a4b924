"""pymnn's layer factories: ``nn.conv``, ``nn.linear``, ``nn.batch_norm``, ``nn.dropout`` (and
``EmptyModule`` / ``dummy``). Each returns a module holding its parameters as Vars; forward builds
nodes of registered ops. New modules are in training mode, as in MNN: ``dropout`` drops and
``batch_norm`` normalises with the batch's statistics (updating its running mean and variance with
``momentum``) until ``train(False)``.

Parameter order and initialisation follow real MNN: conv/linear ``[bias, weight]`` (bias zeros,
weight uniform in +-sqrt(3 / fan_in)); batch_norm ``[scale, bias, running_variance, running_mean]``
starting at (1, 0, 0, 0).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .._dtypes import F32
from ..graph import const_node
from ..ops import build as B
from ..var import Var
from .module import _Module

_rng_state: list = []


def _rng() -> np.random.Generator:
    """The layers' random generator, made on first use (``import mnnjit.nn`` does not load
    numpy.random)."""
    if not _rng_state:
        _rng_state.append(np.random.default_rng())
    return _rng_state[0]


def _param(array: np.ndarray) -> Var:
    return Var._from_node(const_node(np.ascontiguousarray(array, dtype=np.float32)))


def _pair(v: Any, what: str) -> tuple[int, int]:
    """MNN's [x, y] list (width first, as real MNN reads kernel_size/stride/padding/dilation) as (y, x)."""
    if isinstance(v, int):
        return (v, v)
    v = list(v)
    if len(v) != 2:
        raise ValueError(f"{what} must have 2 values [x, y], got {v}")
    return (int(v[1]), int(v[0]))


class _Layer(_Module):
    """A module built by a layer factory (forward defined by the factory)."""

    def __init__(self, kind: str) -> None:
        super().__init__(None, None, "")
        self._kind = kind
        self._training = True

    def forward(self, x: Any) -> Var:
        """Apply the layer to ``x``."""
        if isinstance(x, (list, tuple)):
            if len(x) != 1:
                raise ValueError(f"{self._kind} takes one input, got {len(x)}")
            return [self._apply(x[0])]
        return self._apply(x)

    def onForward(self, x: Any) -> list:  # noqa: N802 - MNN's name
        """Apply the layer; a list with the one output."""
        out = self.forward(x)
        return out if isinstance(out, list) else [out]

    __call__ = forward

    def _apply(self, x: Any) -> Var:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<_Module object at {hex(id(self))}>"


class _Conv(_Layer):
    def __init__(self, cin: int, cout: int, kernel: tuple[int, int], stride, padding, dilation, depthwise: bool,
                 bias: bool, padding_mode: int) -> None:
        super().__init__("conv")
        kh, kw = kernel
        if depthwise and cin != cout:
            raise ValueError(f"a depthwise conv needs in_channel == out_channel, got {cin} and {cout}")
        self.group = cin if depthwise else 1
        fan_in = (cin // self.group) * kh * kw
        a = float(np.sqrt(3.0 / fan_in))
        self.weight = _param(_rng().uniform(-a, a, (cout, cin // self.group, kh, kw)))
        self.bias = _param(np.zeros(cout)) if bias else None
        if self.bias is not None:
            self._add_parameter(self.bias)
        self._add_parameter(self.weight)
        self.stride, self.padding, self.dilation, self.mode = stride, padding, dilation, int(padding_mode)

    def _apply(self, x: Any) -> Var:
        node = B.as_node(x)
        if node.fmt == "NHWC" and len(node.shape) == 4:
            node = B.make_node("convert", (node,), {"src": "NHWC", "dst": "NCHW"}, fmt="NCHW")
        node = B.cast_node(node, F32)
        if len(node.shape) != 4:
            raise ValueError(f"conv input must be 4-D (N, C, H, W), got shape {list(node.shape)}")
        w = self.weight._node
        kh, kw = w.shape[2], w.shape[3]
        if self.mode == 0:  # CAFFE: explicit padding
            pads = (self.padding[0], self.padding[0], self.padding[1], self.padding[1])
        elif self.mode == 2:  # SAME
            from ..models.convert_cnn import same_pads
            t, b = same_pads(node.shape[2], kh, self.stride[0], self.dilation[0])
            l, r = same_pads(node.shape[3], kw, self.stride[1], self.dilation[1])
            pads = (t, b, l, r)
        else:  # VALID: the output size ignores padding, but windows start at -padding (real MNN)
            py, px = self.padding
            pads = (py, -py, px, -px)
        ins = [node, w] + ([self.bias._node] if self.bias is not None else [])
        return B.wrap(B.make_node("conv2d", ins, {"stride": self.stride, "dilation": self.dilation, "pads": pads,
                                                  "group": self.group, "act": ""}, fmt="NC4HW4"))


def conv(in_channel: int, out_channel: int, kernel_size: Any, stride: Sequence[int] = (1, 1),
         padding: Sequence[int] = (0, 0), dilation: Sequence[int] = (1, 1), depthwise: bool = False,
         bias: bool = True, padding_mode: Any = 1) -> _Module:
    """A 2-D convolution module (weights [out, in/group, kh, kw]; output NC4HW4). ``kernel_size``,
    ``stride``, ``padding`` and ``dilation`` are [x, y] lists, as in real MNN; ``padding`` is used in
    CAFFE mode; in VALID mode (the default) the output keeps the unpadded size but windows still
    start at -padding, as real MNN computes; SAME pads to ceil(in / stride)."""
    return _Conv(int(in_channel), int(out_channel), _pair(kernel_size, "kernel_size"), _pair(stride, "stride"),
                 _pair(padding, "padding"), _pair(dilation, "dilation"), bool(depthwise), bool(bias),
                 int(padding_mode))


class _Linear(_Layer):
    def __init__(self, n_in: int, n_out: int, bias: bool) -> None:
        super().__init__("linear")
        a = float(np.sqrt(3.0 / n_in))
        self.weight = _param(_rng().uniform(-a, a, (n_out, n_in)))
        self.bias = _param(np.zeros((1, n_out))) if bias else None
        if self.bias is not None:
            self._add_parameter(self.bias)
        self._add_parameter(self.weight)

    def _apply(self, x: Any) -> Var:
        node = B.cast_node(B.as_node(x), F32)
        if len(node.shape) == 1:
            node = B.reshape(node, (1, node.shape[0]))._node
        ins = [node, self.weight._node] + ([B.reshape(self.bias, (-1,))._node] if self.bias is not None else [])
        return B.wrap(B.make_node("matmul_ex", ins, {"transpose_a": False, "transpose_b": True, "act": ""}))


def linear(input_length: int, output_length: int, bias: bool = True) -> _Module:
    """A fully connected module: ``x @ weight.T + bias`` (weight [out, in])."""
    return _Linear(int(input_length), int(output_length), bool(bias))


class _BatchNorm(_Layer):
    def __init__(self, channels: int, dims: int, momentum: float, epsilon: float) -> None:
        super().__init__("batch_norm")
        shape = (1, channels, 1, 1) if dims == 4 else (1, channels)
        self.dims, self.momentum, self.eps = dims, float(momentum), float(epsilon)
        self.scale = _param(np.ones(shape))
        self.bias = _param(np.zeros(shape))
        self.running_var = _param(np.zeros(shape))
        self.running_mean = _param(np.zeros(shape))
        for p in (self.scale, self.bias, self.running_var, self.running_mean):
            self._add_parameter(p)

    def _apply(self, x: Any) -> Var:
        node = B.cast_node(B.as_node(x), F32)
        if len(node.shape) != self.dims:
            raise ValueError(f"batch_norm(dims={self.dims}) got an input of shape {list(node.shape)}")
        v = B.wrap(node)
        axes = (0, 2, 3) if self.dims == 4 else (0,)
        if self._training:
            mean = B.reduce("reduce_mean", v, axes, keepdims=True)
            var = B.reduce("reduce_mean", B.unary("square", B.binary("sub", v, mean)), axes, keepdims=True)
            m = self.momentum
            self.running_mean.write(m * self.running_mean.read_view() + (1 - m) * mean.read_view())
            self.running_var.write(m * self.running_var.read_view() + (1 - m) * var.read_view())
        else:
            mean, var = self.running_mean, self.running_var
        norm = B.binary("div", B.binary("sub", v, mean), B.unary("sqrt", B.binary("add", var, self.eps)))
        return B.binary("add", B.binary("mul", norm, self.scale), self.bias)


def batch_norm(channels: int, dims: int = 4, momentum: float = 0.99, epsilon: float = 1e-05) -> _Module:
    """A batch normalisation module over channel axis 1 (dims 4: NCHW, dims 2: NC)."""
    if dims not in (2, 4):
        raise ValueError(f"batch_norm dims must be 2 or 4, got {dims}")
    return _BatchNorm(int(channels), int(dims), momentum, epsilon)


class _Dropout(_Layer):
    def __init__(self, ratio: float) -> None:
        super().__init__("dropout")
        if not 0.0 <= ratio < 1.0:
            raise ValueError(f"dropout ratio must be in [0, 1), got {ratio}")
        self.ratio = float(ratio)

    def _apply(self, x: Any) -> Var:
        node = B.as_node(x)
        if not self._training or self.ratio == 0.0:
            return B.wrap(node)
        keep = (_rng().random(node.shape) >= self.ratio).astype(np.float32) / (1.0 - self.ratio)
        return B.binary("mul", B.wrap(node), Var._from_node(const_node(keep, node.fmt)))


def dropout(dropout_ratio: float) -> _Module:
    """A dropout module: in training mode zeroes elements with probability ``dropout_ratio`` and scales
    the rest by 1 / (1 - ratio); identity after ``train(False)``."""
    return _Dropout(float(dropout_ratio))


class EmptyModule(_Module):
    """A module whose forward returns None (pymnn's ``nn.EmptyModule``)."""

    def __init__(self) -> None:
        super().__init__(None, None, "")

    def forward(self, *args: Any) -> None:
        """Nothing."""
        return None


dummy = EmptyModule()
