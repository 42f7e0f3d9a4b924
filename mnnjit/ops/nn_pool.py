"""Pooling: ``pool2d`` (max / average, NCHW) with explicit pads and output size.

Attributes (see ``docs/NN_OPS.md``): ``kind`` ("max" | "avg"), ``kernel``, ``stride`` (h, w),
``pads`` (top, bottom, left, right), ``out`` (oh, ow) - resolved when the node is built by
:func:`pool_out_size` from a ceil/floor rule - and ``count_include_pad``.

Semantics of a window starting at ``i*stride - top``:
* max ignores padding. A window lying entirely in the padding (possible with MNN's ceil rule)
  takes the nearest edge cell, as MNN does; implemented as edge-replicating padding, which gives
  the same result as ignoring the padding for windows that touch the input.
* avg sums the real cells and divides by the window clipped to ``[-top, H + bottom)`` when
  ``count_include_pad``, else by the number of real cells; a window without real cells gives 0.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .._dtypes import F32, I32
from .registry import OpDef, register


#: Window cells above which the compiled path pools float32 data with the Numba kernel (kernels_nn.py).
NUMBA_WORK = 1 << 23


def pool_out_size(n: int, pb: int, pe: int, k: int, s: int, ceil_mode: bool | str = False) -> int:
    """Output extent along one axis: ``ceil_mode`` False (floor), True (ONNX/PyTorch: the last window
    must start inside the input or the begin padding) or ``"mnn"`` (plain ceil, as MNN's ShapePool)."""
    span = n + pb + pe - k
    if ceil_mode:
        o = -(-span // s) + 1
        if ceil_mode is True and (o - 1) * s >= n + pb:
            o -= 1
        return o
    return span // s + 1


def resolve_mnn_pool(in_hw: Sequence[int], kernel: Sequence[int], stride: Sequence[int], pad_type: str,
                     pad_hw: Sequence[int] = (0, 0), pads: Sequence[int] | None = None, ceil_mode: bool = True,
                     global_pool: bool = False) -> dict:
    """Attributes of ``pool2d`` (minus ``kind``) for MNN's ``Pool`` fields.

    ``pad_type``: "CAFFE" | "VALID" | "SAME"; ``pad_hw``: (padY, padX); ``pads``: (top, bottom, left, right)
    when the model gives explicit pads. Returns kernel, stride, pads, out and count_include_pad
    (TF modes exclude padding from averages, CAFFE includes it).
    """
    h, w = in_hw
    if global_pool:
        return {"kernel": (h, w), "stride": (1, 1), "pads": (0, 0, 0, 0), "out": (1, 1), "count_include_pad": False}
    kernel = tuple(int(k) for k in kernel)
    stride = tuple(int(s) or 1 for s in stride)  # MNN stores 0 for "not given" (ONNX default 1)
    mode = pad_type.upper()
    if mode == "SAME":
        outs, p = [], []
        for n, k, s in zip(in_hw, kernel, stride):
            o = -(-n // s)
            need = max(0, (o - 1) * s + k - n)
            outs.append(o)
            p += [need // 2, need - need // 2]
        return {"kernel": kernel, "stride": stride, "pads": tuple(p), "out": tuple(outs), "count_include_pad": False}
    if mode == "VALID":
        outs = tuple(-(-(n - k + 1) // s) for n, k, s in zip(in_hw, kernel, stride))
        return {"kernel": kernel, "stride": stride, "pads": (0, 0, 0, 0), "out": outs, "count_include_pad": False}
    if pads is None:
        pads = (pad_hw[0], pad_hw[0], pad_hw[1], pad_hw[1])
    pads = tuple(int(p) for p in pads)
    rule: bool | str = "mnn" if ceil_mode else False
    outs = (pool_out_size(h, pads[0], pads[1], kernel[0], stride[0], rule),
            pool_out_size(w, pads[2], pads[3], kernel[1], stride[1], rule))
    return {"kernel": kernel, "stride": stride, "pads": pads, "out": outs, "count_include_pad": True}


def _pool_infer(inputs, attrs):
    x = inputs[0]
    if len(x.shape) != 4:
        raise ValueError(f"pool2d: input must be 4-D NCHW, got shape {list(x.shape)}")
    oh, ow = attrs["out"]
    if oh <= 0 or ow <= 0:
        raise ValueError(f"pool2d: kernel {attrs['kernel']} is larger than the padded input {x.shape[2:]}")
    return (x.shape[0], x.shape[1], oh, ow), x.dtype if attrs["kind"] == "max" else F32


def _axis_counts(n: int, o: int, k: int, s: int, pb: int, pe: int, include_pad: bool) -> np.ndarray:
    start = np.arange(o) * s - pb
    end = start + k
    if include_pad:
        cnt = np.minimum(end, n + pe) - start
    else:
        cnt = np.minimum(end, n) - np.maximum(start, 0)
    return np.maximum(cnt, 0).astype(np.float32)


def _pool_geometry(xs: list, attrs: dict) -> tuple:
    """(x, its NCHW shape, kernel, stride, pads (top, bottom, left, right), output size) of a pool2d
    node's input and attributes."""
    x = xs[0]
    return x, x.shape, attrs["kernel"], attrs["stride"], attrs["pads"], attrs["out"]


def pool2d_ref(xs: list, attrs: dict) -> np.ndarray:
    """pool2d on a numpy array: one strided pass per kernel tap."""
    x, (n, c, h, w), (kh, kw), (sh, sw), (t, b, l, r), (oh, ow) = _pool_geometry(xs, attrs)
    kind = attrs["kind"]
    if (kh, kw) == (h, w) and (oh, ow) == (1, 1) and (t, b, l, r) == (0, 0, 0, 0):
        if kind == "max":
            return x.max(axis=(2, 3), keepdims=True)
        return x.mean(axis=(2, 3), keepdims=True, dtype=np.float32)
    # pad/crop so that every window [i*s - t, i*s - t + k) is inside the array
    need_h = (oh - 1) * sh + kh
    need_w = (ow - 1) * sw + kw
    from .nn_conv import pad_or_crop
    pads = (t, need_h - h - t, l, need_w - w - l)
    if kind == "max":
        xp = _edge_pad(x, pads)
        out = None
        for i in range(kh):
            for j in range(kw):
                view = xp[:, :, i: i + (oh - 1) * sh + 1: sh, j: j + (ow - 1) * sw + 1: sw]
                out = view.copy() if out is None else np.maximum(out, view, out=out)
        return out
    xp = pad_or_crop(np.asarray(x, np.float32), pads)
    out = np.zeros((n, c, oh, ow), np.float32)
    for i in range(kh):
        for j in range(kw):
            out += xp[:, :, i: i + (oh - 1) * sh + 1: sh, j: j + (ow - 1) * sw + 1: sw]
    inc = attrs.get("count_include_pad", True)
    ch = _axis_counts(h, oh, kh, sh, t, b, inc)
    cw = _axis_counts(w, ow, kw, sw, l, r, inc)
    cnt = ch[:, None] * cw[None, :]
    out /= np.maximum(cnt, 1.0)
    return out


def _edge_pad(x: np.ndarray, pads: Sequence[int]) -> np.ndarray:
    """Edge-replicating pad of the last two axes (negative amounts crop; empty inputs stay empty)."""
    t, b, l, r = pads
    h, w = x.shape[-2:]
    x = x[..., max(0, -t): h - max(0, -b), max(0, -l): w - max(0, -r)]
    t, b, l, r = max(t, 0), max(b, 0), max(l, 0), max(r, 0)
    if t or b or l or r:
        return np.pad(x, [(0, 0), (0, 0), (t, b), (l, r)], mode="edge")
    return x


register(OpDef("pool2d", "opaque", _pool_infer, pool2d_ref, mnn_type="Pooling",
               doc="max/avg pooling with explicit pads and output size (see docs/NN_OPS.md)"))


def _argmax_infer(inputs, attrs):
    n, c = inputs[0].shape[:2]
    return (n, c) + tuple(attrs["out"]), I32


def max_pool_argmax_ref(xs: list, attrs: dict) -> np.ndarray:
    """Where each max-pooling window's maximum is (pool2d's attributes): int32 flat offsets into the
    NCHW input, ``((n * C + c) * H + h) * W + w`` (ONNX MaxPool's Indices, storage order 0), the first
    one in row-major order on ties. Padding is never chosen; a window entirely in the padding takes the
    nearest edge cell, as ``pool2d`` does."""
    x, (n, c, h, w), (kh, kw), (sh, sw), (t, _, l, _), (oh, ow) = _pool_geometry(xs, attrs)
    rows, cols = np.arange(oh) * sh - t, np.arange(ow) * sw - l
    best = where = None
    for i in range(kh):
        ri = np.clip(rows + i, 0, h - 1)
        for j in range(kw):
            cj = np.clip(cols + j, 0, w - 1)
            v = x[:, :, ri[:, None], cj[None, :]]
            idx = np.broadcast_to(ri[:, None] * w + cj[None, :], v.shape)
            if best is None:
                best, where = v.copy(), idx.copy()
            else:
                m = v > best  # clamped taps run in row-major order of the cells: ties keep the first
                best[m] = v[m]
                where[m] = idx[m]
    base = ((np.arange(n)[:, None] * c + np.arange(c)[None, :]) * (h * w))[:, :, None, None]
    return (where + base).astype(np.int32)


register(OpDef("max_pool_argmax", "opaque", _argmax_infer, max_pool_argmax_ref,
               doc="flat NCHW offsets of max-pooling maxima (ONNX MaxPool Indices), pool2d's attributes"))


def pool2d(x: Any, kind: str, kernel: Sequence[int], stride: Sequence[int] = (1, 1),
           pads: Sequence[int] = (0, 0, 0, 0), ceil_mode: bool | str = False, count_include_pad: bool = True,
           global_pool: bool = False, out: Sequence[int] | None = None):
    """Build a ``pool2d`` node (tuples (h, w); pads (top, bottom, left, right)); returns a Var."""
    from . import build as B
    node = B.as_node(x)
    if kind not in ("max", "avg"):
        raise ValueError(f"pool2d: kind must be 'max' or 'avg', got {kind!r}")
    if len(node.shape) != 4:
        raise ValueError(f"pool2d: input must be 4-D NCHW, got shape {list(node.shape)}")
    if kind == "avg" and node.dtype.kind != "f":
        node = B.cast_node(node, F32)
    h, w = node.shape[2:]
    if global_pool:
        kernel, stride, pads, out = (h, w), (1, 1), (0, 0, 0, 0), (1, 1)
    kernel = tuple(int(k) for k in kernel)
    stride = tuple(int(s) for s in stride)
    pads = tuple(int(p) for p in pads)
    if min(kernel) < 1 or min(stride) < 1:
        raise ValueError(f"pool2d: kernel {kernel} and stride {stride} must be positive")
    if out is None:
        out = (pool_out_size(h, pads[0], pads[1], kernel[0], stride[0], ceil_mode),
               pool_out_size(w, pads[2], pads[3], kernel[1], stride[1], ceil_mode))
    attrs = {"kind": kind, "kernel": kernel, "stride": stride, "pads": pads, "out": tuple(int(o) for o in out),
             "count_include_pad": bool(count_include_pad)}
    return B.wrap(B.make_node("pool2d", (node,), attrs, fmt=node.fmt))


# ---------------------------------------------------------------- pool3d

def _pool3d_infer(inputs, attrs):
    x = inputs[0]
    if len(x.shape) != 5:
        raise ValueError(f"pool3d: input must be 5-D NCDHW, got shape {list(x.shape)}")
    od, oh, ow = attrs["out"]
    if min(od, oh, ow) <= 0:
        raise ValueError(f"pool3d: kernel {attrs['kernel']} is larger than the padded input {x.shape[2:]}")
    return (x.shape[0], x.shape[1], od, oh, ow), x.dtype if attrs["kind"] == "max" else F32


def pool3d_ref(xs: list, attrs: dict) -> np.ndarray:
    """3-D pooling: 2-D pooling of each depth slice, then a max / (count-weighted) sum over depth taps."""
    x = xs[0]
    n, c, d = x.shape[:3]
    kd, kh, kw = attrs["kernel"]
    sd, sh, sw = attrs["stride"]
    pf, pb, t, b, l, r = attrs["pads"]
    od, oh, ow = attrs["out"]
    kind = attrs["kind"]
    inc = attrs.get("count_include_pad", True)
    a2 = {"kind": kind, "kernel": (kh, kw), "stride": (sh, sw), "pads": (t, b, l, r), "out": (oh, ow),
          "count_include_pad": inc}
    planes = {}

    def plane(z):
        if z not in planes:
            planes[z] = pool2d_ref([x[:, :, z]], a2)
        return planes[z]
    out = np.zeros((n, c, od, oh, ow), x.dtype if kind == "max" else np.float32)
    h = x.shape[3]
    ch = _axis_counts(h, oh, kh, sh, t, b, inc)
    cw = _axis_counts(x.shape[4], ow, kw, sw, l, r, inc)
    area = np.maximum(ch[:, None] * cw[None, :], 1.0)
    real_h = _axis_counts(h, oh, kh, sh, t, b, False)
    real_w = _axis_counts(x.shape[4], ow, kw, sw, l, r, False)
    real_area = np.maximum(real_h[:, None] * real_w[None, :], 1.0)
    for i in range(od):
        z0 = i * sd - pf
        zs = [z for z in range(z0, z0 + kd) if 0 <= z < d]
        if kind == "max":
            zs = zs or [min(max(z0, 0), d - 1)]
            out[:, :, i] = np.max(np.stack([plane(z) for z in zs]), axis=0)
            continue
        if not zs:
            continue
        # plane(z) holds a 2-D average: turn it back into a sum of real cells
        total = sum(plane(z) * (area if inc else real_area) for z in zs)
        depth = (min(z0 + kd, d + pb) - z0) if inc else len(zs)
        cnt = depth * (area if inc else real_area)
        out[:, :, i] = total / np.maximum(cnt, 1.0)
    return out


register(OpDef("pool3d", "opaque", _pool3d_infer, pool3d_ref, mnn_type="Pooling3D",
               doc="3-D max/avg pooling, NCDHW, pads (front, back, top, bottom, left, right), explicit out"))
