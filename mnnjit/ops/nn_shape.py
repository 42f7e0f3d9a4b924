"""Index and layout ops used by NN models: gather_nd, gather_elements, scatter_nd,
scatter_elements, one_hot, space_to_batch, batch_to_space, reverse_sequence.

(depth_to_space, space_to_depth and channel_shuffle are reshape + transpose compositions built by
the expr front end, so they stay movement ops the compiler can fuse.) Conventions in docs/NN_OPS.md.
"""
from __future__ import annotations

import numpy as np

from .._dtypes import F32
from .registry import OpDef, register


def _check_index_range(idx: np.ndarray, dims, what: str) -> np.ndarray:
    dims = np.asarray(dims, np.int64)
    idx = idx.astype(np.int64)
    idx = np.where(idx < 0, idx + dims, idx)
    if idx.size and ((idx < 0) | (idx >= dims)).any():
        bad = np.argwhere((idx < 0) | (idx >= dims))[0]
        raise IndexError(f"{what}: index {tuple(idx[tuple(bad[:-1])])} is out of bounds for shape {tuple(dims)}")
    return idx


# ---------------------------------------------------------------- gather_nd

def _gather_nd_infer(inputs, attrs):
    p, idx = inputs[0].shape, inputs[1].shape
    bd = attrs.get("batch_dims", 0)
    if not idx:
        raise ValueError("gather_nd: indices must have at least 1 dimension")
    depth = idx[-1]
    if depth > len(p) - bd:
        raise ValueError(f"gather_nd: index depth {depth} is larger than the params rank {len(p)} - batch_dims {bd}")
    return tuple(idx[:-1]) + tuple(p[bd + depth:]), inputs[0].dtype


def _gather_nd_ref(xs, attrs):
    p, idx = xs[0], np.asarray(xs[1])
    bd = attrs.get("batch_dims", 0)
    depth = idx.shape[-1]
    if bd == 0:
        ii = _check_index_range(idx, p.shape[:depth], "gather_nd")
        return p[tuple(np.moveaxis(ii, -1, 0))]
    bshape = p.shape[:bd]
    nb = int(np.prod(bshape))
    pf = p.reshape((nb,) + p.shape[bd:])
    idf = idx.reshape((nb,) + idx.shape[bd:])
    outs = [_gather_nd_ref([pf[b], idf[b]], {"batch_dims": 0}) for b in range(nb)]
    out = np.stack(outs) if outs else np.zeros((0,), p.dtype)
    return out.reshape(idx.shape[:-1] + p.shape[bd + depth:])


register(OpDef("gather_nd", "opaque", _gather_nd_infer, _gather_nd_ref, mnn_type="GatherND",
               doc="TF/ONNX GatherND (attrs batch_dims)"))


def _gather_el_ref(xs, attrs):
    x, idx = xs
    ax = attrs["axis"]
    ii = np.where(idx < 0, idx + x.shape[ax], idx)
    if ii.size and ((ii < 0) | (ii >= x.shape[ax])).any():
        raise IndexError(f"gather_elements: index out of bounds for axis {ax} with size {x.shape[ax]}")
    grids = list(np.indices(idx.shape, sparse=True))
    grids[ax] = ii.astype(np.intp)
    return x[tuple(grids)]


register(OpDef("gather_elements", "opaque", lambda i, a: (i[1].shape, i[0].dtype), _gather_el_ref,
               mnn_type="GatherElements", doc="ONNX GatherElements (attrs axis)"))


# ---------------------------------------------------------------- scatter

def _reduce_at(out: np.ndarray, index: tuple, upd: np.ndarray, reduction: str) -> None:
    if reduction == "none":
        out[index] = upd
    elif reduction == "add":
        np.add.at(out, index, upd)
    elif reduction == "mul":
        np.multiply.at(out, index, upd)
    elif reduction == "max":
        np.maximum.at(out, index, upd)
    elif reduction == "min":
        np.minimum.at(out, index, upd)
    else:
        raise ValueError(f"unknown scatter reduction {reduction!r}")


def _scatter_nd_infer(inputs, attrs):
    if len(inputs) > 2:
        return inputs[2].shape, inputs[1].dtype
    return tuple(attrs["shape"]), inputs[1].dtype


def _scatter_nd_ref(xs, attrs):
    idx, upd = np.asarray(xs[0]), xs[1]
    if len(xs) > 2:
        out = np.array(xs[2], dtype=upd.dtype, copy=True)
    else:
        out = np.zeros(tuple(attrs["shape"]), upd.dtype)
    depth = idx.shape[-1]
    ii = _check_index_range(idx.reshape(-1, depth), out.shape[:depth], "scatter_nd")
    u = upd.reshape((ii.shape[0],) + out.shape[depth:])
    _reduce_at(out, tuple(ii.T), u, attrs.get("reduction", "none"))
    return out


register(OpDef("scatter_nd", "opaque", _scatter_nd_infer, _scatter_nd_ref, mnn_type="ScatterNd",
               doc="ScatterND: indices [..., depth], updates, optional data; reduction none (last write "
                   "wins)/add/mul/max/min"))


def _scatter_el_ref(xs, attrs):
    data, idx, upd = xs
    ax = attrs["axis"]
    out = np.array(data, copy=True)
    ii = np.where(idx < 0, idx + data.shape[ax], idx).astype(np.intp)
    if ii.size and ((ii < 0) | (ii >= data.shape[ax])).any():
        raise IndexError(f"scatter_elements: index out of bounds for axis {ax} with size {data.shape[ax]}")
    grids = list(np.indices(idx.shape, sparse=True))
    grids[ax] = ii
    _reduce_at(out, tuple(grids), upd.astype(out.dtype), attrs.get("reduction", "none"))
    return out


register(OpDef("scatter_elements", "opaque", lambda i, a: (i[0].shape, i[0].dtype), _scatter_el_ref,
               mnn_type="ScatterElements", doc="ONNX ScatterElements (attrs axis, reduction)"))


# ---------------------------------------------------------------- one_hot

def _one_hot_infer(inputs, attrs):
    s = list(inputs[0].shape)
    ax = attrs["axis"]
    ax = len(s) if ax == -1 else ax
    s.insert(ax, int(attrs["depth"]))
    return tuple(s), np.dtype(attrs.get("dtype", F32))


def _one_hot_ref(xs, attrs):
    idx = np.asarray(xs[0]).astype(np.int64)
    depth = int(attrs["depth"])
    dt = np.dtype(attrs.get("dtype", F32))
    hot = idx[..., None] == np.arange(depth)
    out = np.where(hot, np.asarray(attrs.get("on", 1.0), dt), np.asarray(attrs.get("off", 0.0), dt))
    ax = attrs["axis"]
    if ax != -1:
        out = np.moveaxis(out, -1, ax)
    return out


register(OpDef("one_hot", "opaque", _one_hot_infer, _one_hot_ref, mnn_type="OneHot",
               doc="one-hot of int indices (attrs depth, on, off, axis; out-of-range indices give off)"))


# ---------------------------------------------------------------- space <-> batch

def _s2b_infer(inputs, attrs):
    x = inputs[0].shape
    bh, bw = attrs["block"]
    (pt, pb), (pl, pr) = attrs["pads"]
    h, w = x[2] + pt + pb, x[3] + pl + pr
    if h % bh or w % bw:
        raise ValueError(f"space_to_batch: padded size {h}x{w} is not divisible by block {bh}x{bw}")
    return (x[0] * bh * bw, x[1], h // bh, w // bw), inputs[0].dtype


def _s2b_ref(xs, attrs):
    x = xs[0]
    bh, bw = attrs["block"]
    (pt, pb), (pl, pr) = attrs["pads"]
    x = np.pad(x, [(0, 0), (0, 0), (pt, pb), (pl, pr)])
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // bh, bh, w // bw, bw).transpose(3, 5, 0, 1, 2, 4)
    return y.reshape(bh * bw * n, c, h // bh, w // bw)


register(OpDef("space_to_batch", "opaque", _s2b_infer, _s2b_ref, mnn_type="SpaceToBatchND",
               doc="TF SpaceToBatchND on NCHW data (attrs block (bh, bw), pads ((t, b), (l, r)))"))


def _b2s_infer(inputs, attrs):
    x = inputs[0].shape
    bh, bw = attrs["block"]
    (ct, cb), (cl, cr) = attrs["crops"]
    if x[0] % (bh * bw):
        raise ValueError(f"batch_to_space: batch {x[0]} is not divisible by block {bh}x{bw}")
    return (x[0] // (bh * bw), x[1], x[2] * bh - ct - cb, x[3] * bw - cl - cr), inputs[0].dtype


def _b2s_ref(xs, attrs):
    x = xs[0]
    bh, bw = attrs["block"]
    (ct, cb), (cl, cr) = attrs["crops"]
    nb, c, h, w = x.shape
    n = nb // (bh * bw)
    y = x.reshape(bh, bw, n, c, h, w).transpose(2, 3, 4, 0, 5, 1).reshape(n, c, h * bh, w * bw)
    return y[:, :, ct: h * bh - cb, cl: w * bw - cr]


register(OpDef("batch_to_space", "opaque", _b2s_infer, _b2s_ref, mnn_type="BatchToSpaceND",
               doc="TF BatchToSpaceND on NCHW data (attrs block, crops ((t, b), (l, r)))"))


# ---------------------------------------------------------------- reverse_sequence

def _revseq_ref(xs, attrs):
    x, lens = xs[0], np.asarray(xs[1]).reshape(-1)
    ba, sa = attrs["batch_axis"], attrs["seq_axis"]
    out = np.array(x, copy=True)
    n = x.shape[sa]
    for b in range(x.shape[ba]):
        length = int(lens[b])
        if length < 0 or length > n:
            raise ValueError(f"reverse_sequence: length {length} is out of range [0, {n}]")
        if length <= 1:
            continue
        src = [slice(None)] * x.ndim
        src[ba] = b
        dst = list(src)
        src[sa] = slice(length - 1, None, -1) if length < n else slice(None, None, -1)
        dst[sa] = slice(0, length)
        out[tuple(dst)] = x[tuple(src)]
    return out


register(OpDef("reverse_sequence", "opaque", lambda i, a: (i[0].shape, i[0].dtype), _revseq_ref,
               mnn_type="ReverseSequence", doc="reverse the first lengths[b] items along seq_axis of batch b"))


# ---------------------------------------------------------------- raster

def _raster_ref(xs, attrs):
    out = np.zeros(int(np.prod(attrs["shape"], dtype=np.int64)), xs[0].dtype)
    for x, reg in zip(xs, attrs["regions"]):
        so, s0, s1, s2, do, d0, d1, d2, n0, n1, n2 = reg
        src = np.lib.stride_tricks.as_strided(
            x.reshape(-1)[so:], shape=(n0, n1, n2),
            strides=tuple(st * x.itemsize for st in (s0, s1, s2)), writeable=False)
        i0, i1, i2 = np.meshgrid(np.arange(n0), np.arange(n1), np.arange(n2), indexing="ij")
        out[do + i0 * d0 + i1 * d1 + i2 * d2] = src
    return out.reshape(attrs["shape"])


def _raster_infer(inputs, attrs):
    total = int(np.prod(attrs["shape"], dtype=np.int64))
    for x, reg in zip(inputs, attrs["regions"]):
        so, s0, s1, s2, do, d0, d1, d2, n0, n1, n2 = reg
        if min(n0, n1, n2) <= 0:
            continue
        last_src = so + (n0 - 1) * s0 + (n1 - 1) * s1 + (n2 - 1) * s2
        last_dst = do + (n0 - 1) * d0 + (n1 - 1) * d1 + (n2 - 1) * d2
        if min(so, do, s0, s1, s2, d0, d1, d2) < 0 or last_src >= x.size or last_dst >= total:
            raise ValueError(f"raster: region {list(reg)} reads or writes outside its input of {x.size} "
                             f"or output of {total} elements")
    return tuple(attrs["shape"]), inputs[0].dtype


register(OpDef("raster", "opaque", _raster_infer, _raster_ref, mnn_type="Raster",
               doc="MNN Raster: strided 3-D region copies (attrs regions: 11 ints each, shape)"))
