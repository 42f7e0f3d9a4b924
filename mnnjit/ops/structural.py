"""Sources and opaque structural ops: const, placeholder, concat, take, index, setitem, matmul, tuple_get.

``index`` and ``setitem`` carry an index *template*: a tuple whose items are ``slice`` objects,
``None``, ``Ellipsis``, Python ints, or ``("in", k)`` meaning "the k-th extra input node" (an
integer index array, or a boolean mask stored as int32 0/1 with ``("mask", k)``).
"""
from __future__ import annotations

import numpy as np

from .elementwise import broadcast_shape
from .registry import OpDef, register


def _no_ref(xs, attrs):
    raise RuntimeError("a source node has no computation")


register(OpDef("const", "source", lambda i, a: ((), None), _no_ref, mnn_type="Const"))
register(OpDef("placeholder", "source", lambda i, a: ((), None), _no_ref, mnn_type="Input"))


def _concat_infer(inputs, attrs):
    axis = attrs["axis"]
    first = inputs[0].shape
    rest = first[:axis] + first[axis + 1:]
    total = 0
    for i, node in enumerate(inputs):
        s = node.shape
        if s != first and (len(s) != len(first) or s[:axis] + s[axis + 1:] != rest):
            raise ValueError(
                "all the input array dimensions except for the concatenation axis must match exactly, but "
                f"along a dimension other than {axis}, the array at index 0 has shape {first} and the array "
                f"at index {i} has shape {s}")
        total += s[axis]
    out = list(first)
    out[axis] = total
    return tuple(out), inputs[0].dtype


register(OpDef("concat", "opaque", _concat_infer, lambda xs, at: np.concatenate(xs, axis=at["axis"]),
               mnn_type="Concat"))


def _take_infer(inputs, attrs):
    x, idx = inputs
    axis = attrs["axis"]
    return x.shape[:axis] + idx.shape + x.shape[axis + 1:], x.dtype


def _take_ref(xs, attrs):
    x, idx = xs
    axis = attrs["axis"]
    n = x.shape[axis]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        bad = idx[(idx < -n) | (idx >= n)].flat[0]
        raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {n}")
    return np.take(x, idx, axis=axis)


register(OpDef("take", "opaque", _take_infer, _take_ref, mnn_type="GatherV2"))


def resolve_template(template: tuple, extra: list[np.ndarray]) -> tuple:
    """Turn an index template and the extra input arrays into a numpy index tuple."""
    out = []
    for item in template:
        if isinstance(item, tuple) and len(item) == 2 and item[0] in ("in", "mask"):
            arr = extra[item[1]]
            out.append(arr.astype(bool) if item[0] == "mask" else arr.astype(np.intp, copy=False))
        else:
            out.append(item)
    return tuple(out)


def index_shape(shape: tuple[int, ...], template: tuple, extra_shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The result shape of ``x[template]`` for integer-array items of the given shapes (no data needed)."""
    dummy = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), shape=shape, strides=(0,) * len(shape))
    idx = []
    for item in template:
        if isinstance(item, tuple) and len(item) == 2 and item[0] == "in":
            idx.append(np.zeros(extra_shapes[item[1]], np.intp))
        elif isinstance(item, tuple) and len(item) == 2 and item[0] == "mask":
            raise ValueError("the shape of a boolean-mask index depends on the mask's values")
        else:
            idx.append(item)
    probe_shape = list(shape)
    # Zero-size axes cannot be probed with index 0; their result is empty anyway.
    if 0 in probe_shape:
        return np.empty(shape, np.uint8)[tuple(idx)].shape
    return dummy[tuple(idx)].shape


def _index_infer(inputs, attrs):
    if "shape" in attrs:
        return tuple(attrs["shape"]), inputs[0].dtype
    return index_shape(inputs[0].shape, attrs["template"], [i.shape for i in inputs[1:]]), inputs[0].dtype


def _index_ref(xs, attrs):
    return np.array(xs[0][resolve_template(attrs["template"], list(xs[1:]))], copy=True)


register(OpDef("index", "opaque", _index_infer, _index_ref, mnn_type="GatherND"))


def _setitem_infer(inputs, attrs):
    return inputs[0].shape, inputs[0].dtype


def _setitem_ref(xs, attrs):
    out = np.array(xs[0], copy=True)
    value = xs[1]
    out[resolve_template(attrs["template"], list(xs[2:]))] = value.astype(out.dtype, copy=False)
    return out


register(OpDef("setitem", "opaque", _setitem_infer, _setitem_ref, mnn_type="ScatterNd"))


def matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """numpy.matmul's result shape, with numpy's error for mismatched core dimensions."""
    if len(a) == 0 or len(b) == 0:
        raise ValueError("matmul: Input operand does not have enough dimensions (0-d)")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError(
            f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc signature "
            f"(n?,k),(k,m?)->(n?,m?) (size {b2[-2]} is different from {a2[-1]})")
    batch = broadcast_shape(a2[:-2], b2[:-2])
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def _matmul_infer(inputs, attrs):
    return matmul_shape(inputs[0].shape, inputs[1].shape), inputs[0].dtype


register(OpDef("matmul", "opaque", _matmul_infer, lambda xs, at: np.matmul(xs[0], xs[1]), mnn_type="MatMul"))


def _tuple_get_infer(inputs, attrs):
    return tuple(attrs["shape"]), np.dtype(attrs["dtype"])


register(OpDef("tuple_get", "opaque", _tuple_get_infer, lambda xs, at: xs[0][at["index"]], mnn_type="Identity"))
