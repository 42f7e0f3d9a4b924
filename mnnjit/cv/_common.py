"""Helpers shared by the mnnjit.cv modules: turning arguments into nodes/arrays and images into Vars."""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from ..graph import Node, const_node
from ..ops import build as B


def image_var(arr: np.ndarray):
    """A constant Var for an image array (NHWC data format, as MNN.cv produces)."""
    return B.wrap(const_node(np.ascontiguousarray(arr), fmt="NHWC"))


def to_numpy(x: Any) -> np.ndarray:
    """The value of a Var / list / ndarray as a numpy array (no dtype narrowing)."""
    from ..var import Var
    if isinstance(x, Var):
        return x.read_view()
    if isinstance(x, (list, tuple)) and any(isinstance(i, Var) for i in x):
        return np.array([to_numpy(i) for i in x])
    return np.asarray(x)


def raw_image_node(src: Any, name: str = "src") -> Node:
    """The node of an image argument as given: [h, w], [h, w, c] or a batch of one [1, h, w, c]
    (a Var, an ndarray or nested lists)."""
    from ..var import Var
    if isinstance(src, Var):
        node = src._node
    elif isinstance(src, np.ndarray) or isinstance(src, (list, tuple)):
        arr = np.asarray(src)
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        elif arr.dtype.kind in "iub" and arr.dtype not in (np.uint8, np.int32, np.int8):
            arr = arr.astype(np.int32)
        node = const_node(np.ascontiguousarray(arr), fmt="NHWC")
    else:
        raise TypeError(f"{name} must be an image Var or array, not {type(src).__name__}")
    if len(node.shape) not in (2, 3, 4) or len(node.shape) == 4 and node.shape[0] != 1:
        raise ValueError(f"{name} must be an image of shape [h, w], [h, w, c] or [1, h, w, c], "
                         f"got shape {list(node.shape)}")
    return node


def image_array(src: Any) -> np.ndarray:
    """The value of an image argument as a numpy array (a batch of one [1, h, w, c] as [h, w, c])."""
    arr = np.asarray(to_numpy(src))
    if arr.ndim == 4 and arr.shape[0] == 1:
        arr = arr[0]
    return arr


def image_node(src: Any, name: str = "src") -> Node:
    """The node of an image argument as [h, w] or [h, w, c]: a batch of one [1, h, w, c] (pymnn code
    builds images with ``expr.const(data, [1, h, w, c], expr.NHWC)``) is the image [h, w, c], as real
    MNN's image functions take it."""
    node = raw_image_node(src, name)
    if len(node.shape) == 4:
        node = B.make_node("reshape", (node,), {"shape": node.shape[1:]}, fmt="NHWC")
    return node


def keep_shape(var, shape: Sequence[int]):
    """``var`` reshaped to ``shape`` (an element-wise image function keeps its input's shape, a batch
    of one included, as real MNN's do)."""
    shape = [int(d) for d in shape]
    if list(var.shape) == shape:
        return var
    return B.wrap(B.make_node("reshape", (var._node,), {"shape": tuple(shape)}, fmt="NHWC"))


def plane_out(var):
    """A filter's result as real MNN (and OpenCV) return it: [h, w] for one channel, else [h, w, c]."""
    if var.ndim == 3 and var.shape[2] == 1:
        return B.wrap(B.make_node("reshape", (var._node,), {"shape": tuple(var.shape[:2])}, fmt="NHWC"))
    return var


def as_hwc(node: Node) -> Node:
    """``node`` as [h, w, c] (a 2-D image gets a channel axis of 1)."""
    if len(node.shape) == 2:
        return B.make_node("reshape", (node,), {"shape": node.shape + (1,)})
    return node


def size2(v: Any, name: str) -> tuple[int, int]:
    """A (width, height) pair from a tuple/list/Var (OpenCV order)."""
    vals = [int(round(float(x))) for x in np.asarray(to_numpy(v) if not isinstance(v, (list, tuple)) else v,
                                                      dtype=np.float64).ravel()]
    if len(vals) != 2:
        raise ValueError(f"{name} must be a (width, height) pair, got {v!r}")
    return vals[0], vals[1]


def scalar4(v: Any, cn: int) -> tuple[float, ...]:
    """A per-channel scalar (OpenCV's Scalar) for ``cn`` channels: an int/float or a sequence."""
    if isinstance(v, numbers.Number):
        vals = [float(v)] * 4
    else:
        vals = [float(x) for x in np.asarray(to_numpy(v), dtype=np.float64).ravel()]
        vals = (vals + [0.0] * 4)[:4]
    return tuple(vals[:max(cn, 1)])


def out_var(node: Node):
    """A Var for ``node`` labelled NHWC (a function that hands its input back relabels it: a
    constant keeps its value, a placeholder stays the one its writes go to)."""
    if node.fmt == "NHWC":
        return B.wrap(node)
    if node.op == "const" and node.value is not None:
        return B.wrap(Node.constant(node.value, "NHWC"))
    if not node.inputs:
        return B.wrap(B.make_node("reshape", (node,), {"shape": node.shape}, fmt="NHWC"))
    return B.wrap(Node(node.op, node.inputs, node.attrs, node.shape, node.dtype, "NHWC"))


def float_list(v: Sequence[Any] | None) -> list[float]:
    """``v`` as a list of floats ([] for None)."""
    if v is None:
        return []
    return [float(x) for x in np.asarray(to_numpy(v), dtype=np.float64).ravel()]
