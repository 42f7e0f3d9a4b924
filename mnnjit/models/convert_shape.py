"""Converters for constants, layout conversion and the shape ops converters emit: Const,
ConvertTensor, Reshape, Flatten, Permute/Transpose, Shape/Rank/Size, SliceTf, StridedSlice,
(Un)Squeeze/ExpandDims, GatherV2, BroadcastTo, Concat, Slice, Pack/Unpack, Padding, Tile, Fill,
ZerosLike, Range."""
from __future__ import annotations

import numpy as np

from .._dtypes import F32, I32
from ..graph import Node, const_node
from ..ops import build as B
from ..ops.elementwise import broadcast_shape
from .translate import MNN_DTYPES, Ctx, converter, node_of

_FMT = {"NCHW": "NCHW", "NHWC": "NHWC", "NC4HW4": "NC4HW4"}


def blob_array(blob: dict, what: str) -> tuple[np.ndarray, str]:
    """A Blob table as (array of a storage dtype, data format name)."""
    dt = str(blob.get("dataType", "DT_FLOAT"))
    dims = [int(d) for d in (blob.get("dims") if blob.get("dims") is not None else [])]
    fields = {"DT_FLOAT": "float32s", "DT_INT32": "int32s", "DT_INT64": "int64s", "DT_UINT8": "uint8s",
              "DT_INT8": "int8s", "DT_BOOL": "int32s", "DT_QUINT8": "uint8s", "DT_QINT8": "int8s",
              "DT_DOUBLE": "float32s", "DT_HALF": "uint8s"}
    field = fields.get(dt)
    if field is None or dt not in MNN_DTYPES:
        raise NotImplementedError(f"{what}: constants of type {dt} are not supported")
    data = blob.get(field)
    if data is None and dt == "DT_INT64":
        data = blob.get("int32s")
    if data is None:
        data = np.zeros(0)
    arr = np.asarray(data)
    if dt == "DT_HALF":
        arr = np.frombuffer(arr.astype(np.uint8).tobytes(), "<f2")
    arr = arr.astype(MNN_DTYPES[dt])
    size = int(np.prod(dims)) if dims else 1
    if arr.size != size:
        if arr.size == 1:
            arr = np.full(size, arr.reshape(-1)[0], arr.dtype)
        else:
            raise ValueError(f"{what}: {arr.size} values for dims {dims}")
    return arr.reshape(dims), _FMT.get(str(blob.get("dataFormat", "NCHW")), "NCHW")


@converter("Const", "TrainableParam")
def const(ctx: Ctx, op, xs):
    """A constant tensor (decoded once per model)."""
    arr, fmt = ctx.cached((id(op), "blob"), lambda: blob_array(op.main or {}, f"op {op.name!r}"))
    return const_node(arr, fmt)


@converter("ConvertTensor")
def convert_tensor(ctx: Ctx, op, xs):
    """Data-format conversion: NCHW <-> NC4HW4 keeps the logical data; to/from NHWC transposes."""
    p = op.main or {}
    x = xs[0]
    src = x.fmt
    dst = _FMT.get(str(p.get("dest", "NCHW")), "NCHW")
    if src == dst:
        return x
    if (src == "NHWC") == (dst == "NHWC") or len(x.shape) != 4:
        return B.make_node("copy", [x], fmt=dst) if x.op != "const" else const_node(x.value, dst)
    return ctx.emit("convert", [x], {"src": src, "dst": dst}, fmt=dst)


def _reshape_dims(x: Node, dims: list[int]) -> tuple[int, ...]:
    out = []
    for i, d in enumerate(dims):
        if d == 0 and i < len(x.shape):
            out.append(x.shape[i])
        else:
            out.append(d)
    return B.resolve_shape(x.size, out)


@converter("Reshape")
def reshape(ctx: Ctx, op, xs):
    """Reshape to ``dims`` (or the second input); 0 copies the input dimension, -1 is inferred."""
    x = xs[0]
    if len(xs) > 1:
        dims = ctx.ints(xs[1], "reshape target")
    else:
        dims = [int(d) for d in (op.main or {}).get("dims")]
    return B.reshape(x, _reshape_dims(x, dims))


@converter("Flatten")
def flatten(ctx: Ctx, op, xs):
    """Flatten: [prod(d[:axis]), prod(d[axis:])], or axes axis..endAxis merged when endAxis is set."""
    p = op.main or {}
    x = xs[0]
    nd = len(x.shape)
    axis = int(p.get("axis") or 0)
    axis = axis + nd if axis < 0 else axis
    end = int(p.get("endAxis") or 0)
    if end == 0:
        lead = int(np.prod(x.shape[:axis])) if axis else 1
        return B.reshape(x, (lead, -1))
    end = end + nd if end < 0 else end
    mid = int(np.prod(x.shape[axis:end + 1]))
    return B.reshape(x, x.shape[:axis] + (mid,) + x.shape[end + 1:])


@converter("Permute")
def permute(ctx: Ctx, op, xs):
    """Transpose by ``dims``."""
    raw = (op.main or {}).get("dims")
    dims = [] if raw is None else [int(d) for d in raw]
    nd = len(xs[0].shape)
    if sorted(d % nd if nd else d for d in dims) != list(range(nd)):
        # MNN's converter writes such a Permute for an einsum diagonal ('ii->i'); real MNN 3.6.1 then
        # returns its input unchanged, which is not the einsum's answer
        raise ctx.unsupported(op, f"Permute dims {dims} are not a permutation of the input's {nd} axes "
                                  f"(shape {list(xs[0].shape)}; an einsum taking a diagonal converts to this)")
    return B.transpose(xs[0], dims)


@converter("Transpose")
def transpose(ctx: Ctx, op, xs):
    """Transpose by the permutation given as the second input."""
    return B.transpose(xs[0], ctx.ints(xs[1], "permutation"))


@converter("Shape")
def shape(ctx: Ctx, op, xs):
    """The input's shape as int32 (a constant: shapes are known when the plan is built); ONNX Shape's
    ``start`` / ``end`` (opset 15, the op's hasStart / hasEnd) keep a part of it, Python-slice style."""
    p = op.main if isinstance(op.main, dict) else {}
    dims = list(xs[0].shape)
    start = int(p.get("start") or 0) if p.get("hasStart") else 0
    end = int(p.get("end") or 0) if p.get("hasEnd") else len(dims)
    part = dims[start:end]
    return const_node(np.asarray(part, np.int32).reshape(len(part)))


@converter("Rank")
def rank(ctx: Ctx, op, xs):
    """The input's number of dimensions (int32 scalar)."""
    return const_node(np.asarray(len(xs[0].shape), np.int32))


@converter("Size")
def size(ctx: Ctx, op, xs):
    """The input's number of elements (int32 scalar)."""
    return const_node(np.asarray(xs[0].size, np.int32))


def _slice(x: Node, begin: list[int], end: list[int], step: list[int]) -> Node:
    if all(b == 0 and e == n and s == 1 for b, e, s, n in zip(begin, end, step, x.shape)):
        return x
    return B.make_node("slice", [x], {"begin": tuple(begin), "end": tuple(end), "step": tuple(step)})


@converter("SliceTf")
def slice_tf(ctx: Ctx, op, xs):
    """``x[begin : begin + size]`` per axis (size -1 runs to the end). A negative begin counts from
    the end of its axis, as real MNN's SliceTf reads it (ONNX Trilu converts to ``SliceTf(shape, [-1], [1])``)."""
    x = xs[0]
    begin = ctx.ints(xs[1], "begin")
    size = ctx.ints(xs[2], "size")
    b, e, s = [], [], []
    for ax, n in enumerate(x.shape):
        st = begin[ax] if ax < len(begin) else 0
        st = st + n if st < 0 else st
        sz = size[ax] if ax < len(size) else -1
        en = n if sz < 0 else st + sz
        if not (0 <= st <= en <= n):
            raise ValueError(f"slice begin {begin} size {size} out of range for shape {list(x.shape)}")
        b.append(st), e.append(en), s.append(1)
    return _slice(x, b, e, s)


def _norm_range(start: int, stop: int, step: int, n: int) -> tuple[int, int, int]:
    if step == 0:
        raise ValueError("slice step cannot be zero")
    start, stop, step = slice(start, stop, step).indices(n)
    if step < 0 and stop < 0:
        stop = -1
    return start, stop, step


@converter("StridedSlice")
def strided_slice(ctx: Ctx, op, xs):
    """ONNX-style (fromType 1: starts, ends, axes, steps) or TF-style (masks) strided slicing."""
    p = op.main or {}
    x = xs[0]
    nd = len(x.shape)
    begin = ctx.ints(xs[1], "begin")
    end = ctx.ints(xs[2], "end")
    if int(p.get("fromType") or 0) == 1:
        axes = ctx.ints(xs[3], "axes") if len(xs) > 3 else list(range(len(begin)))
        steps = ctx.ints(xs[4], "steps") if len(xs) > 4 else [1] * len(begin)
        b, e, s = [0] * nd, list(x.shape), [1] * nd
        for k, ax in enumerate(axes):
            ax = B.normalize_axis(ax, nd)
            b[ax], e[ax], s[ax] = _norm_range(begin[k], end[k], steps[k], x.shape[ax])
        return _slice(x, b, e, s)
    strides = ctx.ints(xs[3], "strides") if len(xs) > 3 else [1] * len(begin)
    bm, em = int(p.get("beginMask") or 0), int(p.get("endMask") or 0)
    ell, new, shrink = int(p.get("ellipsisMask") or 0), int(p.get("newAxisMask") or 0), int(p.get("shrinkAxisMask") or 0)
    index: list = []
    for k in range(len(begin)):
        bit = 1 << k
        if ell & bit:
            index.append(Ellipsis)
        elif new & bit:
            index.append(None)
        elif shrink & bit:
            index.append(begin[k])
        else:
            index.append(slice(None if bm & bit else begin[k], None if em & bit else end[k], strides[k]))
    from ..ops.indexing import getitem
    return getitem(B.wrap(x), tuple(index))


def _unsqueeze_shape(shape: tuple[int, ...], axes: list[int]) -> tuple[int, ...]:
    nd = len(shape) + len(axes)
    axes = sorted(a + nd if a < 0 else a for a in axes)
    out = list(shape)
    for a in axes:
        out.insert(a, 1)
    return tuple(out)


@converter("Unsqueeze")
def unsqueeze(ctx: Ctx, op, xs):
    """Insert size-1 axes at ``squeezeDims`` (positions in the output)."""
    axes = ctx.ints(xs[1], "axes") if len(xs) > 1 else [int(a) for a in (op.main or {}).get("squeezeDims")]
    return B.reshape(xs[0], _unsqueeze_shape(xs[0].shape, axes))


@converter("ExpandDims")
def expand_dims(ctx: Ctx, op, xs):
    """Insert one size-1 axis (axis from the second input or ``axis``)."""
    axis = ctx.ints(xs[1], "axis")[0] if len(xs) > 1 else int((op.main or {}).get("axis") or 0)
    return B.reshape(xs[0], _unsqueeze_shape(xs[0].shape, [axis]))


@converter("Squeeze")
def squeeze(ctx: Ctx, op, xs):
    """Remove size-1 axes ``squeezeDims`` (all size-1 axes when empty)."""
    x = xs[0]
    if len(xs) > 1:
        dims = ctx.ints(xs[1], "axes")
    else:
        sd = (op.main or {}).get("squeezeDims")
        dims = [] if sd is None else [int(a) for a in sd]
    nd = len(x.shape)
    dims = {d + nd if d < 0 else d for d in dims}
    if not dims:
        dims = {i for i, d in enumerate(x.shape) if d == 1}
    return B.reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in dims))


@converter("GatherV2", "Gather")
def gather(ctx: Ctx, op, xs):
    """``take(params, indices, axis)`` (axis from the third input or the op; negative indices wrap)."""
    x, idx = xs[0], xs[1]
    if len(xs) > 2:
        axis = ctx.ints(xs[2], "axis")[0]
    else:
        axis = int((op.main or {}).get("axis") or 0) if op.main_type == "Axis" else 0
    axis = B.normalize_axis(axis, len(x.shape))
    return ctx.emit("take", [x, B.cast_node(idx, I32)], {"axis": axis})


@converter("BroadcastTo")
def broadcast_to(ctx: Ctx, op, xs):
    """Broadcast to the shape given as the second input (two-way, as ONNX Expand)."""
    target = tuple(ctx.ints(xs[1], "shape"))
    return B.broadcast_to(xs[0], broadcast_shape(xs[0].shape, target))


@converter("Concat")
def concat(ctx: Ctx, op, xs):
    """Join along ``axis``."""
    x = xs[0]
    axis = int((op.main or {}).get("axis") or 0)
    return B.concat(xs, B.normalize_axis(axis, len(x.shape)))


@converter("Slice")
def split(ctx: Ctx, op, xs):
    """Split along ``axis``. Caffe: at ``slicePoints``. TF / ONNX / Torch: into parts of the sizes
    in ``slicePoints`` or in the second input (ONNX Split's ``split``; one size may be -1: the
    rest), or into equal parts (no sizes, or one value: the number of parts when it is below
    the number of outputs, as MNN reads it)."""
    p = op.main or {}
    x = xs[0]
    axis = B.normalize_axis(int(p.get("axis") or 0), len(x.shape))
    n = x.shape[axis]
    given = p.get("slicePoints")
    values = [int(v) for v in given] if given is not None else []
    nout = len(op.outputIndexes or [])
    if str(p.get("sourceType", "CAFFE")) == "CAFFE":
        points = values or [n * k // nout for k in range(1, nout)]
    else:
        if not values and len(xs) > 1:
            values = [int(v) for v in ctx.ints(xs[1], "split sizes")]
        if len(values) <= 1:
            parts = values[0] if values and 0 < values[0] < nout else nout
            if parts <= 0 or n % parts:
                raise ValueError(f"split: axis {axis} of length {n} does not divide into {parts} parts")
            sizes = [n // parts] * parts
        else:
            sizes = values[:nout]
            if sizes.count(-1) > 1:
                raise ValueError(f"split: sizes {sizes} have more than one -1")
            if -1 in sizes:
                sizes[sizes.index(-1)] = n - sum(v for v in sizes if v != -1)
        if any(v < 0 for v in sizes) or sum(sizes) > n:
            raise ValueError(f"split: sizes {sizes} do not fit axis {axis} of length {n}")
        points, acc = [], 0
        for v in sizes[:-1]:
            acc += v
            points.append(acc)
        n = acc + sizes[-1]
    edges = [0] + points + [n]
    outs = []
    for a, b in zip(edges[:-1], edges[1:]):
        begin = [0] * len(x.shape)
        end = list(x.shape)
        begin[axis], end[axis] = a, b
        outs.append(_slice(x, begin, end, [1] * len(x.shape)))
    return outs


@converter("Pack")
def pack(ctx: Ctx, op, xs):
    """Stack the inputs (broadcast to a common shape, as MNN does) along a new ``axis``."""
    shape = broadcast_shape(*(x.shape for x in xs))
    xs = [node_of(B.broadcast_to(x, shape)) if x.shape != shape else x for x in xs]
    nd = len(shape) + 1
    axis = B.normalize_axis(int((op.main or {}).get("axis") or 0), nd)
    parts = [node_of(B.reshape(x, _unsqueeze_shape(x.shape, [axis]))) for x in xs]
    return B.concat(parts, axis)


@converter("Unpack")
def unpack(ctx: Ctx, op, xs):
    """Split along ``axis`` into its slices, dropping the axis."""
    x = xs[0]
    nd = len(x.shape)
    axis = B.normalize_axis(int((op.main or {}).get("axis") or 0), nd)
    shape = x.shape[:axis] + x.shape[axis + 1:]
    outs = []
    for k in range(x.shape[axis]):
        begin, end = [0] * nd, list(x.shape)
        begin[axis], end[axis] = k, k + 1
        outs.append(node_of(B.reshape(_slice(x, begin, end, [1] * nd), shape)))
    return outs


@converter("Padding")
def padding(ctx: Ctx, op, xs):
    """Pad with (before, after) pairs per axis; CONSTANT (value = third input), REFLECT, SYMMETRIC.
    Negative pads crop that many elements from their side first (ONNX Pad, as real MNN runs it)."""
    from .. import numpy as mnp
    x = xs[0]
    pads = ctx.ints(xs[1], "pads")
    nd = len(x.shape)
    if len(pads) < 2 * nd:
        raise ValueError(f"op {op.name!r} (Padding): {len(pads)} pads for a {nd}-D input (need {2 * nd})")
    width = [(pads[2 * i], pads[2 * i + 1]) for i in range(nd)]
    if any(b < 0 or a < 0 for b, a in width):
        begin = [max(0, -b) for b, _ in width]
        end = [n - max(0, -a) for n, (_, a) in zip(x.shape, width)]
        if any(e < b for b, e in zip(begin, end)):
            raise ValueError(f"op {op.name!r} (Padding): negative pads {pads} crop more than the "
                             f"input's shape {list(x.shape)}")
        x = _slice(node_of(x), begin, end, [1] * nd)
        width = [(max(0, b), max(0, a)) for b, a in width]
    mode = str((op.main or {}).get("mode", "CONSTANT"))
    if mode == "CONSTANT":
        value = float(np.asarray(ctx.value(xs[2], "pad value")).reshape(-1)[0]) if len(xs) > 2 else 0
        return mnp.pad(B.wrap(x), width, mode="constant", constant_values=value)
    np_mode = {"REFLECT": "reflect", "SYMMETRIC": "symmetric", "EDGE": "edge"}.get(mode)
    if np_mode is None:
        raise ctx.unsupported(op, f"padding mode {mode}")
    return mnp.pad(B.wrap(x), width, mode=np_mode)


@converter("Tile")
def tile(ctx: Ctx, op, xs):
    """Repeat the input ``multiples`` times per axis."""
    from .. import numpy as mnp
    return mnp.tile(B.wrap(xs[0]), ctx.ints(xs[1], "multiples"))


@converter("Fill")
def fill(ctx: Ctx, op, xs):
    """A tensor of the shape given by the first input filled with the scalar second input."""
    shape = tuple(ctx.ints(xs[0], "shape"))
    return B.broadcast_to(B.reshape(xs[1], ()), shape)


@converter("ZerosLike")
def zeros_like(ctx: Ctx, op, xs):
    """Zeros of the input's shape and dtype."""
    x = xs[0]
    return const_node(np.zeros(x.shape, x.dtype), x.fmt)


@converter("Range")
def range_(ctx: Ctx, op, xs):
    """``arange(start, limit, delta)`` (values known when the plan is built)."""
    start, limit, delta = (np.asarray(ctx.value(n, "range bound")).reshape(-1)[0] for n in xs[:3])
    dt = F32 if any(n.dtype.kind == "f" for n in xs[:3]) else I32
    return const_node(np.arange(start, limit, delta).astype(dt))
