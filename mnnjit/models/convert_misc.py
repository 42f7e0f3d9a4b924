"""Converters for less common MNN op types: DepthToSpace / SpaceToDepth, TopKV2, CumSum, GatherND,
ScatterNd, ScatterElements, OneHot, LRN, Reverse, ReverseSequence, Where (coordinates of the elements
> 0). They map onto registered ops (nn_shape, nn_misc and the numpy branch's array ops) or onto
movement compositions."""
from __future__ import annotations

import numpy as np

from .._dtypes import F32, I32
from ..ops import build as B
from .convert_shape import _slice
from .translate import Ctx, converter, node_of


@converter("DepthToSpace")
def depth_to_space(ctx: Ctx, op, xs):
    """NCHW depth-to-space (mode DCR or CRD) as reshape + transpose + reshape."""
    p = op.main or {}
    x = xs[0]
    b = int(p.get("blockSize") or 1)
    n, c, h, w = x.shape
    if c % (b * b):
        raise ValueError(f"DepthToSpace: {c} channels are not divisible by block {b}x{b}")
    oc = c // (b * b)
    if str(p.get("mode", "DCR")) == "CRD":
        t = B.transpose(B.reshape(x, (n, oc, b, b, h, w)), (0, 1, 4, 2, 5, 3))
    else:
        t = B.transpose(B.reshape(x, (n, b, b, oc, h, w)), (0, 3, 4, 1, 5, 2))
    return B.reshape(t, (n, oc, h * b, w * b))


@converter("SpaceToDepth")
def space_to_depth(ctx: Ctx, op, xs):
    """NCHW space-to-depth as reshape + transpose + reshape."""
    b = int((op.main or {}).get("blockSize") or 1)
    x = xs[0]
    n, c, h, w = x.shape
    if h % b or w % b:
        raise ValueError(f"SpaceToDepth: spatial size {h}x{w} is not divisible by block {b}")
    t = B.transpose(B.reshape(x, (n, c, h // b, b, w // b, b)), (0, 3, 5, 1, 2, 4))
    return B.reshape(t, (n, c * b * b, h // b, w // b))


@converter("TopKV2")
def topk(ctx: Ctx, op, xs):
    """The k largest (or smallest) values and their int32 indices along an axis (last by default)."""
    p = op.main or {}
    x = xs[0]
    k = ctx.ints(xs[1], "k")[0]
    axis = ctx.ints(xs[2], "axis")[0] if len(xs) > 2 else -1
    axis = B.normalize_axis(axis, len(x.shape))
    node = B.make_node("topk", [x], {"k": int(k), "axis": axis, "largest": bool(p.get("largest", True))})
    return B.split_outputs(node)


@converter("CumSum")
def cumsum(ctx: Ctx, op, xs):
    """Cumulative sum along the axis given as the second input (exclusive / reverse flags)."""
    p = op.main or {}
    x = xs[0]
    axis = B.normalize_axis(ctx.ints(xs[1], "axis")[0], len(x.shape))
    return ctx.emit("cumsum", [x], {"axis": axis, "exclusive": bool(p.get("exclusive")),
                                    "reverse": bool(p.get("reverse"))})


@converter("GatherND")
def gather_nd(ctx: Ctx, op, xs):
    """TF/ONNX GatherND (batch_dims from the op's GatherND table or 0). An ``axis`` parameter
    ``a`` (MNN's converter writes ONNX batch_dims this way, with the batch offsets already added to
    the indices) gathers from the data with its first ``a + 1`` dimensions merged into one."""
    p = op.main if isinstance(op.main, dict) else {}
    batch = int(p.get("batchDims") or 0)
    x = xs[0]
    axis = int(p.get("axis") or 0)
    if axis > 0:
        if axis >= len(x.shape):
            raise ValueError(f"{ctx.op_label}: GatherND axis {axis} is out of range for shape {list(x.shape)}")
        lead = int(np.prod(x.shape[:axis + 1], dtype=np.int64))
        x = node_of(B.reshape(x, (lead,) + tuple(x.shape[axis + 1:])))
    return ctx.emit("gather_nd", [x, B.cast_node(xs[1], I32)], {"batch_dims": batch})


#: The BinaryOp opType of a ScatterNd / ScatterElements op (how an update meets the value already there)
#: -> the scatter ops' reduction; no opType (-1) writes the update (the last one for repeated indexes).
#: MAXIMUM and MINIMUM are refused: real MNN's CPU backend leaves the data unchanged with them (measured),
#: and no MNN converter writes them (ONNX's reduction attribute is dropped; torch scatter_add gives ADD).
_SCATTER_REDUCTIONS = {"ADD": "add", "MUL": "mul"}


def _scatter_reduction(ctx: Ctx, op) -> str:
    p = op.main if isinstance(op.main, dict) else {}
    kind = p.get("opType", -1)
    if kind is None or (isinstance(kind, int) and kind < 0):
        return "none"
    if str(kind) not in _SCATTER_REDUCTIONS:
        raise ctx.unsupported(op, f"scatter with the {kind} reduction")
    return _SCATTER_REDUCTIONS[str(kind)]


@converter("ScatterNd")
def scatter_nd(ctx: Ctx, op, xs):
    """ScatterNd(indices, updates, shape[, data]): updates written into data (or zeros of shape)."""
    idx, upd = B.cast_node(xs[0], I32), xs[1]
    shape = tuple(ctx.ints(xs[2], "shape"))
    reduction = _scatter_reduction(ctx, op)
    ins = [idx, upd] + ([B.cast_node(xs[3], upd.dtype)] if len(xs) > 3 else [])
    return ctx.emit("scatter_nd", ins, {"shape": shape, "reduction": reduction})


@converter("LRN")
def lrn(ctx: Ctx, op, xs):
    """Local response normalisation across channels (regionType 0) or within a channel (1)."""
    p = op.main or {}
    attrs = {"size": int(p.get("localSize") or 1), "alpha": float(p.get("alpha") or 0.0),
             "beta": float(p.get("beta") or 0.0), "bias": float(p.get("bias", 1.0)),
             "region": "within" if int(p.get("regionType") or 0) == 1 else "across"}
    return ctx.emit("lrn", [B.cast_node(xs[0], F32)], attrs)


@converter("Reverse")
def reverse(ctx: Ctx, op, xs):
    """Reverse the order of elements along the axes given as the second input."""
    x = xs[0]
    nd = len(x.shape)
    axes = {B.normalize_axis(a, nd) for a in ctx.ints(xs[1], "axes")}
    begin = [n - 1 if i in axes else 0 for i, n in enumerate(x.shape)]
    end = [-1 if i in axes else n for i, n in enumerate(x.shape)]
    step = [-1 if i in axes else 1 for i in range(nd)]
    return _slice(x, begin, end, step)


@converter("ReverseSequence")
def reverse_sequence(ctx: Ctx, op, xs):
    """Reverse the first ``lengths[b]`` steps of each batch entry along the sequence axis."""
    p = op.main or {}
    x = xs[0]
    nd = len(x.shape)
    attrs = {"batch_axis": B.normalize_axis(int(p.get("batchDim") or 0), nd),
             "seq_axis": B.normalize_axis(int(p.get("seqDim") or 0), nd)}
    return ctx.emit("reverse_sequence", [x, B.cast_node(xs[1], I32)], attrs)


@converter("Where")
def where_coordinates(ctx: Ctx, op, xs):
    """TF ``Where`` with one input: the int32 coordinates [n, rank] of the elements > 0 in row-major
    order (real MNN's rule, as ``expr.where``; ONNX NonZero converts to ``Where(x != 0)``, where > 0 and
    non-zero agree). The output shape depends on the values, so the plan is translated again with the
    input values at each forward."""
    if len(xs) != 1:
        raise ctx.unsupported(op, f"Where with {len(xs)} inputs (the three-input form is Select)")
    v = np.asarray(ctx.value(xs[0], "condition"))
    return ctx.const(np.argwhere(v > 0).astype(np.int32).reshape(-1, v.ndim), I32)


@converter("ScatterElements")
def scatter_elements(ctx: Ctx, op, xs):
    """ONNX ScatterElements / torch scatter(_add): ``data`` with ``updates`` written at ``indices`` along
    ``axis`` (the fourth input, 0 when absent). Out-of-range indices raise IndexError; negative ones
    count from the end as in ONNX (real MNN does not wrap them: it writes outside the row there)."""
    if len(xs) < 3:
        raise ctx.unsupported(op, f"ScatterElements with {len(xs)} inputs")
    data, idx = xs[0], B.cast_node(xs[1], I32)
    upd = B.cast_node(xs[2], data.dtype)
    axis = ctx.ints(xs[3], "axis")[0] if len(xs) > 3 else 0
    nd = len(data.shape)
    axis = B.normalize_axis(axis, nd)
    if len(idx.shape) != nd or tuple(idx.shape) != tuple(upd.shape):
        raise ValueError(f"ScatterElements: indices {list(idx.shape)} and updates {list(upd.shape)} must have "
                         f"one shape of the data's rank {nd}")
    if any(i > d for k, (i, d) in enumerate(zip(idx.shape, data.shape)) if k != axis):
        raise ValueError(f"ScatterElements: indices {list(idx.shape)} exceed the data {list(data.shape)} "
                         f"off axis {axis}")
    attrs = {"axis": axis, "reduction": _scatter_reduction(ctx, op)}
    return ctx.emit("scatter_elements", [data, idx, upd], attrs)


@converter("OneHot")
def one_hot(ctx: Ctx, op, xs):
    """TF OneHot(indices, depth, on_value, off_value) with the new axis at ``axis`` (-1: last)."""
    p = op.main or {}
    if len(xs) != 4:
        raise ctx.unsupported(op, f"OneHot with {len(xs)} inputs")
    idx = B.cast_node(xs[0], I32)
    depth = ctx.ints(xs[1], "depth")[0]
    if depth < 0:
        raise ValueError(f"OneHot: depth must be >= 0, got {depth}")
    on = np.asarray(ctx.value(xs[2], "on value")).reshape(-1)
    off = np.asarray(ctx.value(xs[3], "off value")).reshape(-1)
    if on.size != 1 or off.size != 1:
        raise ctx.unsupported(op, "on/off values that are not scalars")
    nd = len(idx.shape) + 1
    axis = int(p.get("axis", -1))
    axis = -1 if axis == -1 else B.normalize_axis(axis, nd)
    dt = xs[2].dtype
    return ctx.emit("one_hot", [idx], {"depth": depth, "on": on[0].item(), "off": off[0].item(), "axis": axis,
                                        "dtype": np.dtype(dt).name})
