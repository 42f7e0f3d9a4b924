"""Shape, layout, indexing and tensor-construction ONNX ops.

Axes are normalized with the static rank when it is known (MNN's ops read negative axes too, but
ONNX's Unsqueeze counts them in the output's rank). Constant indices are normalized while
converting; run-time indices are wrapped with ``(i + n) % n`` as real MNN's converter does.
"""
from __future__ import annotations

import numpy as np

from .builder import Val, const_val
from .core import GraphConverter, attrs_of, handler

_I64 = np.dtype(np.int64)


def _name(node) -> str:
    return node.output[0] or node.name


def _axes(cv: GraphConverter, node, ins, pos: int, attr: str = "axes", since: int = 13):
    """Axes from the attribute (before opset ``since``) or from input ``pos`` (must be known)."""
    if cv.opset < since:
        v = attrs_of(node).get(attr)
        return None if v is None else [int(a) for a in v]
    if len(ins) <= pos or ins[pos] is None:
        return None
    if ins[pos].const is None:
        raise cv.unsupported(f"{attr} computed at run time")
    return [int(a) for a in ins[pos].const.reshape(-1)]


@handler("Constant")
def constant(cv: GraphConverter, node, ins):
    """The attribute's value."""
    from onnx import numpy_helper
    at = attrs_of(node)
    if "value" in at:
        return const_val(numpy_helper.to_array(at["value"]))
    if "sparse_value" in at:
        return const_val(numpy_helper.to_array(at["sparse_value"]))
    for key, dt in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                    ("value_ints", np.int64)):
        if key in at:
            return const_val(np.asarray(at[key], dt))
    raise cv.unsupported("string constants")


@handler("Shape")
def shape(cv: GraphConverter, node, ins):
    """Known shapes are constants; else MNN's Shape op (sliced for start / end)."""
    x = ins[0]
    at = attrs_of(node)
    start, end = int(at.get("start", 0)), at.get("end")
    if x.static_shape is not None:
        s = np.asarray(x.static_shape, np.int64)
        return const_val(s[start:end] if end is not None else s[start:])
    t = cv.b.shape_of(cv.idx(x), None if (start or end is not None) else _name(node))
    if start or end is not None:
        if end is None:
            end = 2**31 - 1
        t = cv.b.slice1(t, start, int(end), 0, _name(node))
    return cv.out(t, _I64)


@handler("Size")
def size(cv: GraphConverter, node, ins):
    """Element count."""
    x = ins[0]
    if x.static_shape is not None:
        return const_val(np.asarray(int(np.prod(x.static_shape)), np.int64))
    return cv.out(cv.b.op1("Size", [cv.idx(x)], None, None, _name(node)), _I64)


def _reshape_target(x: Val, dims: list, allowzero: bool) -> tuple | None:
    """The static output shape of an ONNX Reshape, when it can be worked out."""
    out = []
    for k, d in enumerate(dims):
        if d == 0 and not allowzero:
            out.append(x.dim(k) if x.rank is not None and k < x.rank else None)
        else:
            out.append(d)
    if out.count(-1) == 1 and x.static_shape is not None and None not in out:
        known = int(np.prod([d for d in out if d != -1]))
        out[out.index(-1)] = int(np.prod(x.static_shape)) // max(known, 1)
    return tuple(None if d is None or d < 0 else int(d) for d in out)


@handler("Reshape")
def reshape(cv: GraphConverter, node, ins):
    """MNN Reshape with the shape as a tensor (0 copies the input's size, -1 is inferred)."""
    x, shp = ins
    allowzero = bool(attrs_of(node).get("allowzero", 0))
    if shp.const is not None:
        dims = [int(d) for d in shp.const.reshape(-1)]
        if allowzero and 0 in dims:
            raise cv.unsupported("allowzero=1 with a zero size")
        target = _reshape_target(x, dims, allowzero)
        if target is not None and None not in target:
            dims = list(target)
            if x.static_shape == tuple(dims):
                return Val(index=cv.idx(x), shape=x.shape, dtype=x.dtype)
        return cv.out(cv.b.reshape(cv.idx(x), dims, _name(node)), x.dtype, target)
    return cv.out(cv.b.reshape(cv.idx(x), cv.idx(shp), _name(node)), x.dtype)


@handler("Flatten")
def flatten(cv: GraphConverter, node, ins):
    """[prod(d[:axis]), prod(d[axis:])] as a Reshape when either side's sizes are known."""
    x = ins[0]
    axis = int(attrs_of(node).get("axis", 1))
    rank = x.rank
    if rank is None:
        raise cv.unsupported("Flatten of a tensor of unknown rank")
    if axis < 0:
        axis += rank
    lead, trail = x.shape[:axis], x.shape[axis:]
    if all(d is not None for d in trail):
        dims = [-1, int(np.prod(trail))] if axis else [1, -1]
    elif all(d is not None for d in lead):
        dims = [int(np.prod(lead)), -1]
    else:
        return cv.out(cv.b.op1("Flatten", [cv.idx(x)], "Flatten", {"axis": axis}, _name(node)), x.dtype)
    return cv.out(cv.b.reshape(cv.idx(x), dims, _name(node)), x.dtype)


@handler("Squeeze")
def squeeze(cv: GraphConverter, node, ins):
    """Squeeze the given axes, or every axis of size 1."""
    x = ins[0]
    axes = _axes(cv, node, ins, 1)
    if axes is None:
        if x.static_shape is None:
            return cv.out(cv.b.squeeze(cv.idx(x), [], _name(node)), x.dtype)
        axes = [k for k, d in enumerate(x.static_shape) if d == 1]
    if x.rank is not None:
        axes = sorted(a % x.rank for a in axes)
    if not axes:
        return x
    return cv.out(cv.b.squeeze(cv.idx(x), axes, _name(node)), x.dtype)


@handler("Unsqueeze")
def unsqueeze(cv: GraphConverter, node, ins):
    """Insert axes of size 1 (negative axes count in the output's rank)."""
    x = ins[0]
    axes = _axes(cv, node, ins, 1)
    if axes is None:
        raise cv.unsupported("Unsqueeze without axes")
    if x.rank is not None:
        out_rank = x.rank + len(axes)
        axes = sorted(a % out_rank for a in axes)
    elif any(a < 0 for a in axes):
        raise cv.unsupported("negative Unsqueeze axes on a tensor of unknown rank")
    return cv.out(cv.b.unsqueeze(cv.idx(x), axes, _name(node)), x.dtype)


@handler("Transpose")
def transpose(cv: GraphConverter, node, ins):
    """MNN Permute."""
    x = ins[0]
    perm = attrs_of(node).get("perm")
    if perm is None:
        if x.rank is None:
            raise cv.unsupported("Transpose without perm on a tensor of unknown rank")
        perm = list(range(x.rank))[::-1]
    perm = [int(p) for p in perm]
    if perm == sorted(perm):
        return x
    return cv.out(cv.b.permute(cv.idx(x), perm, _name(node)), x.dtype)


@handler("Concat")
def concat(cv: GraphConverter, node, ins):
    """MNN Concat (known empty inputs are dropped)."""
    axis = int(attrs_of(node)["axis"])
    vals = [v for v in ins if v is not None]
    rank = next((v.rank for v in vals if v.rank is not None), None)
    if rank is not None:
        axis %= max(rank, 1)
    keep = [v for v in vals if not (v.const is not None and v.const.size == 0)] or vals[:1]
    if len(keep) == 1:
        return keep[0]
    return cv.out(cv.b.concat([cv.idx(v) for v in keep], axis, _name(node)), keep[0].dtype)


@handler("Split")
def split(cv: GraphConverter, node, ins):
    """MNN Slice (sizes along ``axis``)."""
    x = ins[0]
    at = attrs_of(node)
    axis = int(at.get("axis", 0))
    if x.rank is not None:
        axis %= x.rank
    n = len(node.output)
    if cv.opset >= 13:
        sizes = None if len(ins) < 2 or ins[1] is None else ins[1]
        if sizes is not None and sizes.const is None:
            raise cv.unsupported("split sizes computed at run time")
        sizes = None if sizes is None else [int(s) for s in sizes.const.reshape(-1)]
    else:
        sizes = at.get("split")
        sizes = None if sizes is None else [int(s) for s in sizes]
    if sizes is None:
        dim = x.dim(axis)
        if dim is None:
            raise cv.unsupported("equal split of an axis of unknown size")
        n = int(at.get("num_outputs", n))
        part = -(-dim // n)
        sizes = [min(part, dim - part * k) for k in range(n)]
    if n == 1:
        return [x]
    outs = cv.b.op("Slice", [cv.idx(x)], "Slice", {"axis": axis, "slicePoints": np.asarray(sizes, np.int32),
                                                   "sourceType": "TORCH"}, _name(node), n_out=n)
    return [cv.out(t, x.dtype) for t in outs]


@handler("Slice")
def slice_(cv: GraphConverter, node, ins):
    """StridedSlice in its ONNX form (begin, end, axes, steps inputs)."""
    x = ins[0]
    if cv.opset < 10:
        at = attrs_of(node)
        starts, ends = [const_val(np.asarray(at[k], np.int64)) for k in ("starts", "ends")]
        axes = const_val(np.asarray(at["axes"], np.int64)) if "axes" in at else None
        steps = None
    else:
        starts, ends = ins[1], ins[2]
        axes = ins[3] if len(ins) > 3 else None
        steps = ins[4] if len(ins) > 4 else None
    n = starts.dim(0) if starts.const is None else starts.const.size
    if axes is None:
        if n is None:
            raise cv.unsupported("Slice without axes and with starts of unknown length")
        axes = const_val(np.arange(n, dtype=np.int64))
    if steps is None:
        if n is None:
            raise cv.unsupported("Slice without steps and with starts of unknown length")
        steps = const_val(np.ones(n, np.int64))
    if axes.const is not None and x.rank is not None:
        axes = const_val(axes.const % max(x.rank, 1))
    ts = [cv.idx(x)] + [cv.idx(v) for v in (starts, ends, axes, steps)]
    return cv.out(cv.b.op1("StridedSlice", ts, "StridedSliceParam",
                           {"Index": "DT_INT32", "T": "DT_FLOAT", "fromType": 1}, _name(node)), x.dtype)


def _wrap_indices(cv: GraphConverter, idx: Val, dim: int | None, name: str | None = None) -> int:
    """Indices made non-negative: constants now, run-time ones as (i + n) % n."""
    if idx.const is not None:
        c = idx.const.astype(np.int64)
        if (c < 0).any():
            if dim is None:
                raise cv.unsupported("negative constant indices into an axis of unknown size")
            c = np.where(c < 0, c + dim, c)
        return cv.b.const(c)
    t = cv.idx(idx)
    if dim is None:
        return t
    n = cv.b.scalar(dim, np.int32)
    return cv.b.binary("MOD", cv.b.binary("ADD", t, n), n, name)


@handler("Gather")
def gather(cv: GraphConverter, node, ins):
    """GatherV2 along ``axis``."""
    x, idx = ins
    axis = int(attrs_of(node).get("axis", 0))
    if x.rank is not None:
        axis %= max(x.rank, 1)
    i = _wrap_indices(cv, idx, x.dim(axis))
    return cv.out(cv.b.gather(cv.idx(x), i, axis, _name(node)), x.dtype)


@handler("GatherElements")
def gather_elements(cv: GraphConverter, node, ins):
    """MNN GatherElements(data, indices, axis)."""
    x, idx = ins
    axis = int(attrs_of(node).get("axis", 0))
    if x.rank is not None:
        axis %= max(x.rank, 1)
    i = _wrap_indices(cv, idx, x.dim(axis))
    return cv.out(cv.b.op1("GatherElements", [cv.idx(x), i, cv.b.scalar(axis, np.int32)], None, None,
                           _name(node)), x.dtype)


def _wrap_nd(cv: GraphConverter, x: Val, idx: Val) -> int:
    """GatherND / ScatterND indices made non-negative ((i + d) % d per index column; real MNN does
    not wrap them)."""
    k = idx.dim(-1)
    if k is None:
        raise cv.unsupported("indices whose last axis has an unknown size")
    dims = [x.dim(a) for a in range(k)] if x.rank is not None else [None] * k
    if idx.const is not None and None not in dims:
        c = idx.const.astype(np.int64)
        return cv.b.const(np.where(c < 0, c + np.asarray(dims, np.int64), c))
    d = cv.b.ints(dims) if None not in dims else cv.b.slice1(cv.b.shape_of(cv.idx(x)), 0, k, 0)
    return cv.b.binary("MOD", cv.b.binary("ADD", cv.idx(idx), d), d)


@handler("GatherND")
def gather_nd(cv: GraphConverter, node, ins):
    """MNN GatherND (batch_dims 0)."""
    if int(attrs_of(node).get("batch_dims", 0)):
        raise cv.unsupported("batch_dims != 0")
    x, idx = ins
    return cv.out(cv.b.op1("GatherND", [cv.idx(x), _wrap_nd(cv, x, idx)], None, None, _name(node)), x.dtype)


@handler("ScatterND")
def scatter_nd(cv: GraphConverter, node, ins):
    """MNN ScatterNd(indices, updates, shape, data)."""
    if attrs_of(node).get("reduction", b"none") not in (b"none", "none"):
        raise cv.unsupported("ScatterND with a reduction")
    x, idx, upd = ins
    t = cv.idx(x)
    return cv.out(cv.b.op1("ScatterNd", [_wrap_nd(cv, x, idx), cv.idx(upd), cv.b.shape_of(t), t], None, None,
                           _name(node)), x.dtype)


@handler("ScatterElements", "Scatter")
def scatter_elements(cv: GraphConverter, node, ins):
    """MNN ScatterElements(data, indices, updates, axis)."""
    at = attrs_of(node)
    if at.get("reduction", b"none") not in (b"none", "none"):
        raise cv.unsupported("ScatterElements with a reduction")
    x, idx, upd = ins
    axis = int(at.get("axis", 0))
    if x.rank is not None:
        axis %= max(x.rank, 1)
    i = _wrap_indices(cv, idx, x.dim(axis))
    # the BinaryOp parameter is the reduction; -1: none (real MNN reads a missing one wrongly)
    return cv.out(cv.b.op1("ScatterElements", [cv.idx(x), i, cv.idx(upd), cv.b.scalar(axis, np.int32)],
                           "BinaryOp", {"opType": -1, "T": "DT_FLOAT"}, _name(node)), x.dtype)


@handler("Expand")
def expand(cv: GraphConverter, node, ins):
    """BroadcastTo (bidirectional, as ONNX Expand)."""
    x, shp = ins
    return cv.out(cv.b.op1("BroadcastTo", [cv.idx(x), cv.idx(shp)], None, None, _name(node)), x.dtype)


@handler("Tile")
def tile(cv: GraphConverter, node, ins):
    """MNN Tile."""
    x, reps = ins
    return cv.out(cv.b.op1("Tile", [cv.idx(x), cv.idx(reps)], None, None, _name(node)), x.dtype)


@handler("ConstantOfShape")
def constant_of_shape(cv: GraphConverter, node, ins):
    """MNN Fill(shape, value)."""
    from onnx import numpy_helper
    v = attrs_of(node).get("value")
    val = np.zeros(1, np.float32) if v is None else numpy_helper.to_array(v).reshape(-1)
    return cv.out(cv.b.op1("Fill", [cv.idx(ins[0]), cv.b.const(val.reshape(()))], None, None, _name(node)),
                  val.dtype)


@handler("Range")
def range_(cv: GraphConverter, node, ins):
    """MNN Range(start, limit, delta)."""
    ts = [cv.idx(v) if v.const is None else cv.b.const(v.const.reshape(())) for v in ins]
    return cv.out(cv.b.op1("Range", ts, None, None, _name(node)), ins[0].dtype)


@handler("Pad")
def pad(cv: GraphConverter, node, ins):
    """MNN Padding with (begin, end) pairs per axis."""
    at = attrs_of(node)
    mode = at.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    kind = {"constant": "CONSTANT", "reflect": "REFLECT", "edge": "EDGE"}.get(mode)
    if kind is None:
        raise cv.unsupported(f"pad mode {mode!r}")
    x = ins[0]
    if cv.opset < 11:
        pads = const_val(np.asarray(at["pads"], np.int64))
        value = const_val(np.asarray(at.get("value", 0.0), np.float32))
    else:
        pads = ins[1]
        value = ins[2] if len(ins) > 2 and ins[2] is not None else None
        if len(ins) > 3 and ins[3] is not None:
            if ins[3].const is None or pads.const is None or x.rank is None:
                raise cv.unsupported("Pad axes computed at run time")
            axes = [int(a) % x.rank for a in ins[3].const.reshape(-1)]
            p = pads.const.reshape(2, -1)
            full = np.zeros((2, x.rank), np.int64)
            full[:, axes] = p
            pads = const_val(full.reshape(-1))
    if pads.const is not None:
        pairs = cv.b.ints(pads.const.reshape(2, -1).T.reshape(-1))
    else:
        pairs = cv.b.reshape(cv.b.permute(cv.b.reshape(cv.idx(pads), [2, -1]), [1, 0]), [-1])
    extra = []
    if kind == "CONSTANT":
        extra = [cv.idx(value) if value is not None else cv.b.scalar(0, x.dtype if x.is_float else np.int32)]
        if value is not None and value.const is not None:
            extra = [cv.b.const(value.const.reshape(()).astype(x.dtype))]
    return cv.out(cv.b.op1("Padding", [cv.idx(x), pairs] + extra, "PadParam", {"mode": kind}, _name(node)),
                  x.dtype)


@handler("DepthToSpace", "SpaceToDepth")
def depth_space(cv: GraphConverter, node, ins):
    """MNN DepthToSpace / SpaceToDepth (DCR or CRD)."""
    at = attrs_of(node)
    mode = at.get("mode", b"DCR")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    main = {"blockSize": int(at["blocksize"]), "mode": mode}
    return cv.out(cv.b.op1(node.op_type, [cv.idx(ins[0])], "DepthSpaceParam", main, _name(node)), ins[0].dtype)


@handler("OneHot")
def one_hot(cv: GraphConverter, node, ins):
    """MNN OneHot(indices, depth, on, off)."""
    idx, depth, values = ins
    if values.const is None:
        raise cv.unsupported("OneHot values computed at run time")
    off, on = values.const.reshape(-1)[:2]
    axis = int(attrs_of(node).get("axis", -1))
    d = cv.b.const(np.asarray(depth.const).reshape(()).astype(np.int64)) if depth.const is not None \
        else cv.idx(depth)
    i = _wrap_indices(cv, idx, None if depth.const is None else int(np.asarray(depth.const).reshape(-1)[0]))
    main = {"dType": "DT_FLOAT" if values.is_float else "DT_INT32", "axis": axis}
    ts = [i, d, cv.b.const(np.asarray(on)), cv.b.const(np.asarray(off))]
    return cv.out(cv.b.op1("OneHot", ts, "OneHotParam", main, _name(node)), values.dtype)


@handler("NonZero")
def nonzero(cv: GraphConverter, node, ins):
    """Where(x != 0) gives [n, rank] coordinates; ONNX wants [rank, n]."""
    x = cv.idx(ins[0])
    zeros = cv.b.op1("ZerosLike", [x], None, None)
    w = cv.b.op1("Where", [cv.b.binary("NOTEQUAL", x, zeros)], "Extra", {})
    return cv.out(cv.b.permute(w, [1, 0], _name(node)), _I64)


@handler("Trilu")
def trilu(cv: GraphConverter, node, ins):
    """Upper / lower triangle of the last two axes: a select against a constant mask (known sizes)."""
    x = ins[0]
    k = 0 if len(ins) < 2 or ins[1] is None else ins[1]
    if not isinstance(k, int):
        if k.const is None:
            raise cv.unsupported("Trilu k computed at run time")
        k = int(k.const.reshape(-1)[0])
    n, m = x.dim(-2), x.dim(-1)
    if n is None or m is None:
        raise cv.unsupported("Trilu of a matrix of unknown size")
    upper = int(attrs_of(node).get("upper", 1))
    mask = (np.triu if upper else np.tril)(np.ones((n, m), np.int32), k)
    t = cv.idx(x)
    zeros = cv.b.op1("ZerosLike", [t], None, None)
    return cv.out(cv.b.op1("Select", [cv.b.const(mask), t, zeros], None, None, _name(node)), x.dtype)
