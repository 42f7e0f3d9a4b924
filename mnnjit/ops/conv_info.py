"""Convolutions with constant weights, as graph lowering sees them.

:func:`conv_params` is the one definition of the convolutions a backend's kernel steps take over
(a model's ``mnn_conv2d``, or an expr ``conv2d`` whose weight and bias are constants): the same
node from either front end gives the same parameters and so the same kernel. :func:`conv_macs`
measures how much convolution work a graph holds (the compiler's lowering decision).
"""
from __future__ import annotations

from typing import Any, Iterable, Optional, Tuple

import numpy as np

from ..graph import topo_order

__all__ = ["conv_params", "conv_macs", "conv_macs_of"]


def conv_params(n: Any) -> Optional[Tuple[Any, Optional[np.ndarray], Tuple[int, ...]]]:
    """(weights: ``ConvWeights`` or float array [O, C/group, kh, kw], bias or None, weight shape)
    of a float convolution with constant weights - a model's ``mnn_conv2d`` or a ``conv2d`` whose
    weight and bias are constants - else None."""
    if len(n.shape) != 4 or n.dtype != np.float32:
        return None
    if n.op == "mnn_conv2d":
        w = n.attrs["weights"]
        return w, w.bias, tuple(w.shape)
    if n.op == "conv2d" and n.inputs[1].op == "const" and \
            (len(n.inputs) == 2 or n.inputs[2].op == "const"):
        w = np.asarray(n.inputs[1].value, np.float32)
        b = None if len(n.inputs) == 2 else np.asarray(n.inputs[2].value, np.float32).reshape(-1)
        return w, b, tuple(w.shape)
    return None


def is_patch_conv(n: Any) -> bool:
    """Whether ``n`` is a model convolution whose stride equals its kernel, with no padding or
    dilation and one group, over patches of at least 2x2 (a vision transformer's patch embedding:
    one matrix product; a 1x1 convolution is a CNN's pointwise layer)."""
    if n.op != "mnn_conv2d":
        return False
    a = n.attrs
    kh, kw = (int(d) for d in a["weights"].shape[2:])
    return (kh >= 2 and kw >= 2 and int(a.get("group", 1)) == 1 and tuple(a["stride"]) == (kh, kw) and tuple(a["dilation"]) == (1, 1)
            and not any(int(p) for p in a["pads"]))


def conv_macs(outputs: list) -> int:
    """Multiply-adds of the constant-weight float convolutions the nodes ``outputs`` depend on."""
    return conv_macs_of(topo_order(outputs, stop_at_values=False))


def conv_macs_of(nodes: Iterable[Any]) -> int:
    """Multiply-adds of the constant-weight float convolutions among ``nodes``."""
    macs = 0
    for n in nodes:
        conv = conv_params(n)
        if conv is not None:
            macs += int(np.prod(n.shape, dtype=np.int64)) * int(np.prod(conv[2][1:], dtype=np.int64))
    return macs
