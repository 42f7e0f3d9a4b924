"""MNN.expr shape and indexing functions: reshape, transpose, concat, split, stack, squeeze,
slice, strided_slice, gather, gather_nd, scatter_nd, pad, tile, broadcast_to, crop, reverse,
reverse_sequence, shape/rank/size, clone, raster."""
from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as np

from .._dtypes import I32
from ..graph import Node
from ..ops import build as B
from ..var import Var
from . import _common as C
from ._enums import PadValue_Mode


def _mnp():
    from .. import numpy as mnp
    return mnp


def _int_of(v: Any, name: str) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        raise ValueError(f"parameter `{name}` must be int_like.") from None


def reshape(x: Any, shape: Any, original_format: Any = None) -> Var:
    """``x`` with a new shape (-1 infers one dimension; 0 copies the input's dimension, as MNN)."""
    n = C.node(x)
    dims = C.ints(shape, "shape")
    dims = [n.shape[i] if d == 0 and i < len(n.shape) else d for i, d in enumerate(dims)]
    return B.reshape(n, dims)


def transpose(x: Any, perm: Any) -> Var:
    """``x`` with axes permuted by ``perm``."""
    n = C.node(x)
    return B.transpose(n, C.ints(perm, "perm"))


def concat(values: Sequence[Any], axis: int) -> Var:
    """Join ``values`` along ``axis``."""
    return B.concat(list(values), _int_of(axis, "axis"))


def stack(values: Sequence[Any], axis: int = 0) -> Var:
    """Stack equally shaped ``values`` along a new ``axis``."""
    nodes = [C.node(v) for v in values]
    if not nodes:
        raise ValueError("need at least one array to stack")
    shape = nodes[0].shape
    if any(n.shape != shape for n in nodes):
        raise ValueError("all input arrays must have the same shape")
    ax = B.normalize_axis(_int_of(axis, "axis"), len(shape) + 1)
    return B.concat([B.reshape(n, shape[:ax] + (1,) + shape[ax:]) for n in nodes], ax)


def unstack(x: Any, axis: int = 0) -> list[Var]:
    """Split ``x`` along ``axis`` into its slices (the axis removed)."""
    n = C.node(x)
    ax = B.normalize_axis(_int_of(axis, "axis"), len(n.shape))
    return [B.wrap(_slice_axis(n, ax, i, i + 1, squeeze=True)) for i in range(n.shape[ax])]


def _slice_axis(n: Node, ax: int, start: int, stop: int, squeeze: bool = False) -> Node:
    begin = [0] * len(n.shape)
    end = list(n.shape)
    begin[ax], end[ax] = start, stop
    out = B.make_node("slice", (n,), {"begin": tuple(begin), "end": tuple(end), "step": (1,) * len(n.shape)})
    if squeeze:
        out = B.reshape(out, n.shape[:ax] + n.shape[ax + 1:])._node
    return out


def split(x: Any, size_splits: Any, axis: int) -> list[Var]:
    """Split along ``axis``: into ``size_splits[0]`` equal parts when one value is given, else by sizes."""
    n = C.node(x)
    ax = B.normalize_axis(_int_of(axis, "axis"), len(n.shape))
    sizes = C.ints(size_splits, "size_splits")
    dim = n.shape[ax]
    if len(sizes) == 1:
        k = sizes[0]
        if k <= 0 or dim % k:
            raise ValueError(f"split: axis {ax} of size {dim} cannot be split into {k} equal parts")
        sizes = [dim // k] * k
    if sum(sizes) != dim:
        raise ValueError(f"split: sizes {sizes} do not add up to {dim}")
    out, start = [], 0
    for s in sizes:
        out.append(B.wrap(_slice_axis(n, ax, start, start + s)))
        start += s
    return out


def squeeze(x: Any, axes: Any = ()) -> Var:
    """Remove size-1 ``axes`` (all size-1 axes when empty)."""
    n = C.node(x)
    ax = C.ints(axes, "axes") if axes is not None else []
    nd = len(n.shape)
    if not ax:
        ax = [i for i, d in enumerate(n.shape) if d == 1]
    ax = [B.normalize_axis(a, nd) for a in ax]
    for a in ax:
        if n.shape[a] != 1:
            raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
    return B.reshape(n, tuple(d for i, d in enumerate(n.shape) if i not in ax))


def unsqueeze(x: Any, axes: Any = ()) -> Var:
    """Insert size-1 axes at ``axes`` (positions in the result)."""
    n = C.node(x)
    ax = C.ints(axes, "axes")
    nd = len(n.shape) + len(ax)
    ax = sorted(B.normalize_axis(a, nd) for a in ax)
    shape = list(n.shape)
    for a in ax:
        shape.insert(a, 1)
    return B.reshape(n, tuple(shape))


def expand_dims(x: Any, axis: int) -> Var:
    """Insert one size-1 axis at ``axis``."""
    return unsqueeze(x, [_int_of(axis, "axis")])


def slice(x: Any, starts: Any, sizes: Any) -> Var:  # noqa: A001 - MNN's name
    """``x[starts[i] : starts[i] + sizes[i]]`` per axis (size -1: to the end)."""
    n = C.node(x)
    st, sz = C.var(starts), C.var(sizes)
    if st._node.dtype != I32 or sz._node.dtype != I32:
        raise RuntimeError("parameter starts/sizes must be int type")
    b, s = C.ints(st, "starts"), C.ints(sz, "sizes")
    if len(b) != len(n.shape) or len(s) != len(n.shape):
        raise ValueError(f"slice: starts {b} and sizes {s} must have one value per axis of shape {list(n.shape)}")
    begin, end = [], []
    for d, bb, ss in zip(n.shape, b, s):
        bb = bb + d if bb < 0 else bb
        ee = d if ss < 0 else bb + ss
        if not 0 <= bb <= ee <= d:
            raise ValueError(f"slice: start {bb} size {ss} out of range for dimension {d}")
        begin.append(bb)
        end.append(ee)
    return B.wrap(B.make_node("slice", (n,), {"begin": tuple(begin), "end": tuple(end),
                                                "step": (1,) * len(n.shape)}))


def strided_slice(x: Any, begin: Any, end: Any, strides: Any, begin_mask: int = 0, end_mask: int = 0,
                  ellipsis_mask: int = 0, new_axis_mask: int = 0, shrink_axis_mask: int = 0) -> Var:
    """TF StridedSlice with its five bit masks."""
    v = C.var(x)
    bv, ev, sv = C.var(begin), C.var(end), C.var(strides)
    if bv._node.dtype != I32 or ev._node.dtype != I32 or sv._node.dtype != I32:
        raise RuntimeError("parameter begin/end/strides must be int type")
    b, e, s = C.ints(bv, "begin"), C.ints(ev, "end"), C.ints(sv, "strides")
    key: list[Any] = []
    for i in range(len(b)):
        if ellipsis_mask >> i & 1:
            key.append(Ellipsis)
        elif new_axis_mask >> i & 1:
            key.append(None)
        elif shrink_axis_mask >> i & 1:
            key.append(b[i])
        else:
            if s[i] == 0:
                raise ValueError("strided_slice: stride must not be zero")
            key.append(builtins.slice(None if begin_mask >> i & 1 else b[i],
                                      None if end_mask >> i & 1 else e[i], s[i]))
    from ..ops.indexing import getitem
    return getitem(v, tuple(key))


def gather(x: Any, index: Any) -> Var:
    """Rows of ``x`` (axis 0) picked by int ``index``."""
    n = C.node(x)
    idx = C.as_int(C.node(index))
    if not n.shape:
        raise ValueError("gather: x must have at least 1 dimension")
    return B.wrap(B.make_node("take", (n, idx), {"axis": 0}))


def gather_nd(x: Any, indices: Any) -> Var:
    """TF GatherND: ``x[indices[..., :]]``."""
    n = C.node(x)
    idx = C.as_int(C.node(indices))
    return B.wrap(B.make_node("gather_nd", (n, idx), {"batch_dims": 0}))


def scatter_nd(indices: Any, updates: Any, shape: Any) -> Var:
    """Zeros of ``shape`` with ``updates`` written at ``indices`` (a repeated index keeps the last update)."""
    idx = C.as_int(C.node(indices))
    upd = C.node(updates)
    dims = tuple(C.ints(shape, "shape"))
    depth = idx.shape[-1] if idx.shape else 0
    if depth > len(dims) or tuple(upd.shape) != tuple(idx.shape[:-1]) + dims[depth:]:
        raise ValueError(f"scatter_nd: updates shape {list(upd.shape)} does not match indices {list(idx.shape)} "
                         f"and output shape {list(dims)}")
    return B.wrap(B.make_node("scatter_nd", (idx, upd), {"shape": dims, "reduction": "none"}))


def pad(x: Any, paddings: Any, mode: Any = PadValue_Mode.CONSTANT) -> Var:
    """Pad with zeros (CONSTANT), mirror without the edge (REFLECT) or with it (SYMMETRIC)."""
    n = C.node(x)
    p = C.ints(paddings, "paddings")
    nd = len(n.shape)
    if len(p) != 2 * nd:
        raise ValueError(f"pad: paddings must be [[before, after]] * {nd}, got {p}")
    widths = [(p[2 * i], p[2 * i + 1]) for i in range(nd)]
    m = {0: "constant", 1: "reflect", 2: "symmetric"}[int(mode)]
    return _mnp().pad(B.wrap(n), widths, mode=m)


def tile(x: Any, multiples: Any) -> Var:
    """Repeat ``x`` ``multiples[i]`` times along axis i."""
    return _mnp().tile(C.var(x), tuple(C.ints(multiples, "multiples")))


def broadcast_to(input: Any, shape: Any) -> Var:  # noqa: A002
    """``input`` broadcast to ``shape`` (numpy rules)."""
    return B.broadcast_to(C.node(input), tuple(C.ints(shape, "shape")))


def reverse(x: Any, axis: Any) -> Var:
    """``x`` reversed along ``axis[0]``."""
    n = C.node(x)
    ax = B.normalize_axis(C.ints(axis, "axis")[0], len(n.shape))
    begin = [0] * len(n.shape)
    end = list(n.shape)
    step = [1] * len(n.shape)
    begin[ax], end[ax], step[ax] = n.shape[ax] - 1, -1, -1
    return B.wrap(B.make_node("slice", (n,), {"begin": tuple(begin), "end": tuple(end), "step": tuple(step)}))


def reverse_sequence(x: Any, y: Any, batch_dim: int, seq_dim: int) -> Var:
    """Reverse the first ``y[b]`` items along ``seq_dim`` of every batch entry ``b`` (along ``batch_dim``)."""
    n = C.node(x)
    lens = C.node(y)
    if lens.dtype != I32 or len(lens.shape) != 1:
        raise ValueError("parameter y must be 1-D int type")
    nd = len(n.shape)
    if not 0 <= batch_dim < nd:
        raise ValueError("parameter batch_dim must be in range of the number of dimensions of parameter x")
    if not 0 <= seq_dim < nd:
        raise ValueError("parameter seq_dim must be in range of the number of dimensions of parameter x")
    if lens.shape[0] != n.shape[batch_dim]:
        raise ValueError("parameter y must be shape [x.shape[batch.dim]]")
    return B.wrap(B.make_node("reverse_sequence", (n, lens), {"batch_axis": int(batch_dim), "seq_axis": int(seq_dim)}))


def crop(x: Any, size: Any, axis: int, offset: Sequence[int]) -> Var:
    """Caffe Crop of 4-D NC4HW4 ``x`` to ``size``'s shape from ``axis`` on, starting at ``offset``."""
    v = C.var(x)
    sz = C.node(size)
    if len(v.shape) != 4 or v._node.fmt != "NC4HW4":
        raise RuntimeError("parameter x must be 4-D NC4HW4 format")
    if len(sz.shape) != 4:
        raise RuntimeError("parameter size must be 4-D")
    if axis not in (2, 3):
        raise RuntimeError("parameter axis must be 2 or 3, if 2 you may change both h/w, if 3 only w")
    off = list(offset)
    if (axis == 2 and len(off) not in (1, 2)) or (axis == 3 and len(off) != 1):
        raise RuntimeError("parameter offset must be at most 2 if you want to change h/w" if axis == 2 else
                           "parameter offset must be at most 1 if you want to change w only")
    begin, end = [0] * 4, list(v.shape)
    for k, a in enumerate(range(axis, 4)):
        o = off[k] if len(off) > 1 else off[0]
        begin[a], end[a] = o, o + sz.shape[a]
        if end[a] > v.shape[a]:
            raise ValueError(f"crop: offset {o} + size {sz.shape[a]} exceeds dimension {v.shape[a]}")
    return B.wrap(B.make_node("slice", (v._node,), {"begin": tuple(begin), "end": tuple(end), "step": (1,) * 4}))


def _nhwc_const(value: np.ndarray) -> Var:
    # real MNN's Shape/Rank/Size results are NHWC-tagged, whatever the input's format
    return B.wrap(Node.constant(value, "NHWC"))


def shape(x: Any) -> Var:
    """The shape of ``x`` as an int32 Var, NHWC-tagged as real MNN's; a 4-D NC4HW4 ``x`` reports its
    dimensions in NHWC order (n, h, w, c), as real MNN's Shape op does."""
    n = C.node(x)
    dims = n.shape
    if n.fmt == "NC4HW4" and len(dims) == 4:
        dims = (dims[0], dims[2], dims[3], dims[1])
    return _nhwc_const(np.asarray(dims, np.int32).reshape(-1))


def rank(x: Any) -> Var:
    """The number of dimensions of ``x`` as a 0-d int32 Var (NHWC-tagged, as real MNN)."""
    return _nhwc_const(np.array(len(C.node(x).shape), np.int32))


def size(x: Any) -> Var:
    """The number of elements of ``x`` as a 0-d int32 Var (NHWC-tagged, as real MNN)."""
    return _nhwc_const(np.array(C.node(x).size, np.int32))


def clone(x: Any, deepCopy: bool = False) -> Var:  # noqa: N803
    """A new Var with ``x``'s value (``deepCopy``: a constant holding a copy of the data)."""
    n = C.node(x)
    if deepCopy:
        v = B.wrap(n)
        arr = np.array(v.read_view(), copy=True)
        from ..graph import const_node
        return B.wrap(const_node(arr, n.fmt))
    return B.wrap(n)


def raster(vars: Sequence[Any], region: Sequence[int], shape: Sequence[int]) -> Var:  # noqa: A002
    """MNN Raster: copy strided 3-D regions of the inputs into a new array of ``shape``.

    ``region`` holds 11 ints per input: src offset, src strides[3], dst offset, dst strides[3], size[3].
    """
    nodes = [C.node(v) for v in vars]
    reg = C.ints(region, "region")
    if len(reg) != 11 * len(nodes):
        raise ValueError(f"raster: region must hold 11 ints per input ({11 * len(nodes)}), got {len(reg)}")
    dims = tuple(C.ints(shape, "shape"))
    dt = nodes[0].dtype
    nodes = [B.cast_node(n, dt) for n in nodes]
    return B.wrap(B.make_node("raster", nodes, {"regions": tuple(tuple(reg[11 * i: 11 * i + 11])
                                                                 for i in range(len(nodes))), "shape": dims}))
