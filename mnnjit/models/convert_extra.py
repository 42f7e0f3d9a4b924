"""Converters for rarely used MNN op types that ONNX models bring: Det, EyeLike, RandomUniform /
RandomNormal (ONNX RandomUniform(Like) / RandomNormal(Like)), Unique, the TensorArray family (ONNX
sequences), Stft and RNN (ONNX RNN)."""
from __future__ import annotations

import numpy as np

from .._dtypes import I32
from ..graph import Node
from ..ops import build as B
from .convert_shape import _slice
from .translate import MNN_DTYPES, Ctx, converter, node_of


@converter("Det")
def det(ctx: Ctx, op, xs):
    """Determinants of the square matrices in the last two dimensions (output shape ``x.shape[:-2]``)."""
    x = B.cast_node(xs[0], np.dtype(np.float32))
    return ctx.emit("det", [x])


@converter("EyeLike")
def eye_like(ctx: Ctx, op, xs):
    """ONNX EyeLike: a 2-D tensor of the input's shape and dtype with ones on diagonal ``k`` (the second
    input, 0 when absent) and zeros elsewhere. It depends only on the input's shape, so it is a constant."""
    x = xs[0]
    if len(x.shape) != 2:
        raise ValueError(f"EyeLike: the input must be 2-D, got shape {list(x.shape)}")
    k = ctx.ints(xs[1], "k")[0] if len(xs) > 1 else 0
    rows, cols = (int(d) for d in x.shape)
    return ctx.const(np.eye(rows, cols, k, dtype=x.dtype), x.dtype)


def _random(ctx: Ctx, op, xs, dist: str):
    """A ``random`` node of the shape given by the first input; ``low``/``high`` are the range (uniform) or
    the mean and the standard deviation (normal). The values come from mnnjit's generator seeded from the
    op's ``seed`` / ``seed2`` (real MNN's own generator cannot be reproduced): fixed for a model, so each
    forward (and each load) gives the same numbers, as in real MNN."""
    p = op.main if isinstance(op.main, dict) else {}
    shape = tuple(ctx.ints(xs[0], "shape"))
    if any(d < 0 for d in shape):
        raise ValueError(f"{op.type}: negative dimension in shape {list(shape)}")
    dtype = MNN_DTYPES.get(str(p.get("type") or "DT_FLOAT"))
    if dtype is None or dtype.kind != "f":
        raise ctx.unsupported(op, f"random numbers of type {p.get('type')}")
    low, high = float(p.get("low", 0.0)), float(p.get("high", 1.0))
    if dist == "normal" and high < 0:
        raise ValueError(f"{op.type}: negative standard deviation {high}")
    seed = (int(p.get("seed") or 0) & 0xFFFFFFFF) << 32 | (int(p.get("seed2") or 0) & 0xFFFFFFFF)
    attrs = {"dist": dist, "shape": shape, "dtype": np.dtype(dtype), "seed": seed, "low": low, "high": high}
    return ctx.emit("random", [], attrs)


@converter("RandomUniform")
def random_uniform(ctx: Ctx, op, xs):
    """Uniform numbers in [low, high) of the shape given by the input (see ``_random``)."""
    return _random(ctx, op, xs, "uniform")


@converter("RandomNormal")
def random_normal(ctx: Ctx, op, xs):
    """Normal numbers (mean ``low``, standard deviation ``high``) of the shape given by the input."""
    return _random(ctx, op, xs, "normal")


@converter("Unique")
def unique(ctx: Ctx, op, xs):
    """ONNX Unique on the flattened input, as real MNN computes it: the distinct values sorted ascending,
    the index of each one's first occurrence, the inverse indices (one per input element) and the counts,
    all indices int32. MNN's converter drops ONNX's ``sorted`` and ``axis`` attributes (the output is
    always sorted, the input flattened). Float inputs are sorted numerically (real MNN sorts them by bit
    pattern, which differs for negative values: see docs/COMPATIBILITY.md). The output size depends on
    the values, so the plan is translated again with the input values at each forward."""
    v = np.asarray(ctx.value(xs[0], "input")).reshape(-1)
    if v.dtype.kind == "f":
        v = np.where(v == 0, np.zeros_like(v), v)  # -0.0 and 0.0 are one value
    vals, first, inverse, counts = np.unique(v, return_index=True, return_inverse=True, return_counts=True)
    outs = [ctx.const(vals, v.dtype)] + [ctx.const(a.reshape(-1), I32) for a in (first, inverse, counts)]
    return outs[:max(1, len(op.outputIndexes or []))]


# ---------------------------------------------------------------- TensorArray (ONNX sequences)
# MNN's converter writes ONNX SequenceConstruct / SequenceAt / ConcatFromSequence as TF-style TensorArray
# ops: TensorArray(size) -> (handle, flow); TensorArrayWrite(handle, index, value, flow) -> flow;
# TensorArrayRead(handle, index, flow) -> value; TensorArrayConcat(handle, flow) -> joined elements.
# The elements are known while translating, so an array is a list of nodes kept on the Ctx, found
# through its flow tensor (a new constant node for each state of the array).

def _array_state(ctx: Ctx, flow) -> list:
    try:
        return ctx.tensor_arrays[id(flow)][1]
    except KeyError:
        raise ValueError(f"{ctx.op_label}: the flow input is not a TensorArray") from None


def _new_flow(ctx: Ctx, elements: list):
    flow = ctx.const(np.zeros((), np.float32), np.dtype(np.float32))
    ctx.tensor_arrays[id(flow)] = (flow, elements)
    return flow


def _array_index(ctx: Ctx, node, n: int, write: bool) -> int:
    i = ctx.ints(node, "index")[0]
    k = i + n if i < 0 else i
    if k < 0 or k > n or (k == n and not write):
        raise IndexError(f"{ctx.op_label}: TensorArray index {i} is out of range for {n} elements")
    return k


@converter("TensorArray")
def tensor_array(ctx: Ctx, op, xs):
    """A new TensorArray of ``size`` unwritten elements (it grows when written past its end)."""
    size = ctx.ints(xs[0], "size")[0] if xs else 0
    if size < 0:
        raise ValueError(f"TensorArray: negative size {size}")
    handle = ctx.const(np.zeros((), np.int32), I32)
    return [handle, _new_flow(ctx, [None] * size)]


@converter("TensorArrayWrite")
def tensor_array_write(ctx: Ctx, op, xs):
    """The array with element ``index`` set to ``value`` (index = length appends; negative counts from
    the end as ONNX sequence positions do)."""
    if len(xs) != 4:
        raise ctx.unsupported(op, f"TensorArrayWrite with {len(xs)} inputs")
    elems = list(_array_state(ctx, xs[3]))
    k = _array_index(ctx, xs[1], len(elems), write=True)
    if k == len(elems):
        elems.append(xs[2])
    else:
        elems[k] = xs[2]
    return _new_flow(ctx, elems)


@converter("TensorArrayRead")
def tensor_array_read(ctx: Ctx, op, xs):
    """Element ``index`` of the array (ONNX SequenceAt)."""
    elems = _array_state(ctx, xs[-1])
    k = _array_index(ctx, xs[1], len(elems), write=False)
    if elems[k] is None:
        raise ValueError(f"{ctx.op_label}: TensorArray element {k} was never written")
    return elems[k]


@converter("TensorArraySize")
def tensor_array_size(ctx: Ctx, op, xs):
    """The number of elements (ONNX SequenceLength) as int32 of shape (1,) (real MNN's shape; ONNX: a scalar)."""
    return ctx.const(np.asarray([len(_array_state(ctx, xs[-1]))], np.int32), I32)


@converter("TensorArrayInsert")
def tensor_array_insert(ctx: Ctx, op, xs):
    """The array with ``value`` inserted before element ``position`` (ONNX SequenceInsert)."""
    if len(xs) != 4:
        raise ctx.unsupported(op, f"TensorArrayInsert with {len(xs)} inputs")
    elems = list(_array_state(ctx, xs[3]))
    elems.insert(_array_index(ctx, xs[1], len(elems), write=True), xs[2])
    return _new_flow(ctx, elems)


@converter("TensorArraySplit")
def tensor_array_split(ctx: Ctx, op, xs):
    """The array made of ``value`` split along ``axis`` (ONNX SplitToSequence): into the part sizes given
    by ``lengths`` (one value: parts of that size, the last one shorter), the split axis dropped when
    ``keepdims`` is false (parts of size 1 only)."""
    p = op.main if isinstance(op.main, dict) else {}
    if len(xs) != 4:
        raise ctx.unsupported(op, f"TensorArraySplit with {len(xs)} inputs")
    x = xs[1]
    axis = B.normalize_axis(int(p.get("axis") or 0), len(x.shape))
    n = x.shape[axis]
    lengths = ctx.ints(xs[2], "lengths")
    if len(lengths) == 1:
        step = lengths[0]
        if step <= 0:
            raise ValueError(f"TensorArraySplit: part size {step} must be positive")
        lengths = [min(step, n - b) for b in range(0, n, step)]
    if any(v < 0 for v in lengths) or sum(lengths) != n:
        raise ValueError(f"TensorArraySplit: part sizes {lengths} do not add up to {n}")
    keep = p.get("keepdims", True)
    if not keep and any(v != 1 for v in lengths):
        raise ValueError("TensorArraySplit: keepdims=0 needs parts of size 1")
    elems, b = [], 0
    for v in lengths:
        begin = [0] * len(x.shape)
        end = list(x.shape)
        begin[axis], end[axis] = b, b + v
        part = _slice(x, begin, end, [1] * len(x.shape))
        if not keep:
            part = B.reshape(part, tuple(d for i, d in enumerate(x.shape) if i != axis))
        elems.append(node_of(part))
        b += v
    return _new_flow(ctx, elems)


@converter("TensorArrayConcat")
def tensor_array_concat(ctx: Ctx, op, xs):
    """The elements joined along ``axis`` (ONNX ConcatFromSequence), or stacked on a new axis there
    when ``new_axis`` is set."""
    p = op.main if isinstance(op.main, dict) else {}
    elems = _array_state(ctx, xs[-1])
    if not elems or any(e is None for e in elems):
        raise ValueError(f"{ctx.op_label}: TensorArrayConcat of an empty array or unwritten elements")
    new_axis = bool(p.get("new_axis"))
    rank = len(elems[0].shape) + (1 if new_axis else 0)
    axis = B.normalize_axis(int(p.get("axis") or 0), rank)
    if new_axis:
        elems = [B.reshape(e, tuple(e.shape[:axis]) + (1,) + tuple(e.shape[axis:])) for e in elems]
    return B.concat(elems, axis)


@converter("Stft")
def stft(ctx: Ctx, op, xs):
    """ONNX STFT of a real signal [B, N] or [B, N, 1] with frame step ``xs[1]`` and window ``xs[2]`` (its
    length is the frame length; MNN's converter turns an ONNX frame_length into a window of ones):
    [B, frames, bins, 2] (real, imaginary), bins = L // 2 + 1 when the op's ``abs`` flag (ONNX onesided) is
    set, else L. Built as a gather of the frames and one matrix product with the windowed DFT basis."""
    p = op.main if isinstance(op.main, dict) else {}
    if len(xs) != 3:
        raise ctx.unsupported(op, f"Stft with {len(xs)} inputs")
    x = B.cast_node(xs[0], np.dtype(np.float32))
    if len(x.shape) == 3 and x.shape[2] == 1:
        x = node_of(B.reshape(x, tuple(x.shape[:2])))
    if len(x.shape) != 2:
        raise ctx.unsupported(op, f"STFT of a signal of shape {list(xs[0].shape)} (real [B, N] or [B, N, 1] only)")
    step = ctx.ints(xs[1], "frame step")[0]
    window = np.asarray(ctx.value(xs[2], "window"), np.float64).reshape(-1)
    length, n = window.size, x.shape[1]
    if step <= 0 or length == 0 or length > n:
        raise ValueError(f"Stft: frame step {step} and frame length {length} do not fit a signal of {n}")
    frames = (n - length) // step + 1
    bins = length // 2 + 1 if p.get("abs", True) else length
    idx = np.arange(frames)[:, None] * step + np.arange(length)[None, :]
    framed = ctx.emit("take", [x, ctx.const(idx.astype(np.int32), I32)], {"axis": 1})
    angle = 2 * np.pi * np.outer(np.arange(length), np.arange(bins)) / length
    basis = np.stack([np.cos(angle), -np.sin(angle)], axis=-1).reshape(length, bins * 2) * window[:, None]
    out = B.matmul(framed, ctx.const(basis.astype(np.float32), np.dtype(np.float32)))
    return B.reshape(out, (x.shape[0], frames, bins, 2))


@converter("RNN")
def rnn(ctx: Ctx, op, xs):
    """MNN's RNN op, what MNN's converter makes of an ONNX RNN: inputs x [T, B, I], w [D, H, I], r [D, H, H],
    the summed bias [D, H] and optionally the initial hidden state [D, B, H]; outputs y [T, D, B, H] and
    y_h [D, B, H] (op ``rnn_tanh``). As in real MNN the activation is always tanh, every sequence runs all
    T steps and a single direction runs forward: the file keeps no activation, sequence lengths or
    direction (MNN's converter drops them)."""
    p = op.main if isinstance(op.main, dict) else {}
    if len(xs) not in (4, 5):
        raise ctx.unsupported(op, f"an RNN with {len(xs)} inputs (x, w, r, bias and an optional initial state)")
    f32 = np.dtype(np.float32)
    x, w, r, bias = (B.cast_node(n, f32) for n in xs[:4])
    if len(x.shape) != 3 or len(w.shape) != 3:
        raise ctx.unsupported(op, f"an RNN with input of shape {list(x.shape)} and weights of shape {list(w.shape)} "
                                  "(3-D [T, B, I] and [D, H, I] only)")
    d, hidden = int(w.shape[0]), int(w.shape[1])
    count = int(p.get("outputCount") or 0)
    if count != hidden:
        raise ctx.unsupported(op, f"hidden size {count} in the op but weights of shape {list(w.shape)}")

    def flat(node: Node, shape: tuple, what: str) -> Node:  # MNN reads the bias and the initial state as flat arrays
        if int(np.prod(node.shape, dtype=np.int64)) != int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"{ctx.op_label}: {what} of shape {list(node.shape)}, expected {list(shape)}")
        return node if tuple(node.shape) == tuple(shape) else node_of(B.reshape(node, tuple(shape)))

    ins = [x, w, r, flat(bias, (d, hidden), "bias")]
    if len(xs) == 5:
        ins.append(flat(B.cast_node(xs[4], f32), (d, int(x.shape[1]), hidden), "initial hidden state"))
    return [node_of(n) for n in B.split_outputs(ctx.emit("rnn_tanh", ins))]
