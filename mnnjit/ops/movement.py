"""Movement ops: they rearrange elements without computing new values.

* ``reshape``     attrs ``shape`` (fully resolved, no -1)
* ``transpose``   attrs ``perm``
* ``broadcast_to`` attrs ``shape``
* ``slice``       attrs ``begin``, ``end``, ``step`` (one per input axis, normalised as
                  ``range(begin, end, step)`` so that ``len(range(...))`` is the output extent;
                  ``end`` may be -1 for a negative step running to the start)
* ``convert``     attrs ``src``, ``dst``: data-format conversion (NCHW <-> NHWC transposes 4-D data;
                  to or from NC4HW4 keeps the logical NCHW data, only the reported packing changes)
"""
from __future__ import annotations

import numpy as np

from .registry import OpDef, register


def _reshape_infer(inputs, attrs):
    return tuple(attrs["shape"]), inputs[0].dtype


register(OpDef("reshape", "movement", _reshape_infer, lambda xs, at: xs[0].reshape(at["shape"]),
               mnn_type="Reshape"))


def _transpose_infer(inputs, attrs):
    s = inputs[0].shape
    return tuple(s[p] for p in attrs["perm"]), inputs[0].dtype


register(OpDef("transpose", "movement", _transpose_infer, lambda xs, at: np.transpose(xs[0], at["perm"]),
               mnn_type="Transpose"))


def _broadcast_infer(inputs, attrs):
    return tuple(attrs["shape"]), inputs[0].dtype


register(OpDef("broadcast_to", "movement", _broadcast_infer, lambda xs, at: np.broadcast_to(xs[0], at["shape"]),
               mnn_type="BroadcastTo"))


def slice_extent(begin: int, end: int, step: int) -> int:
    """Number of elements of ``range(begin, end, step)``."""
    return len(range(begin, end, step))


def _slice_infer(inputs, attrs):
    return (tuple(slice_extent(b, e, s) for b, e, s in zip(attrs["begin"], attrs["end"], attrs["step"])),
            inputs[0].dtype)


def _slice_ref(xs, attrs):
    idx = tuple(slice(b, None if e < 0 else e, s) for b, e, s in zip(attrs["begin"], attrs["end"], attrs["step"]))
    return xs[0][idx]


register(OpDef("slice", "movement", _slice_infer, _slice_ref, mnn_type="StridedSlice"))


def _convert_infer(inputs, attrs):
    x = inputs[0]
    src, dst = attrs["src"], attrs["dst"]
    shape = x.shape
    if len(shape) == 4:
        if src != "NHWC" and dst == "NHWC":
            shape = (shape[0], shape[2], shape[3], shape[1])
        elif src == "NHWC" and dst != "NHWC":
            shape = (shape[0], shape[3], shape[1], shape[2])
    return shape, x.dtype


def _convert_ref(xs, attrs):
    x = xs[0]
    src, dst = attrs["src"], attrs["dst"]
    if x.ndim == 4:
        if src != "NHWC" and dst == "NHWC":
            return np.transpose(x, (0, 2, 3, 1))
        if src == "NHWC" and dst != "NHWC":
            return np.transpose(x, (0, 3, 1, 2))
    return x


register(OpDef("convert", "movement", _convert_infer, _convert_ref, mnn_type="ConvertTensor"))
