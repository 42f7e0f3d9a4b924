"""Convolution ops: ``conv2d`` and ``conv2d_transpose`` (NCHW, fused bias and relu/relu6 epilogue).

Attribute conventions are in ``docs/NN_OPS.md``. All tuples are ``(h, w)``; ``pads`` is
``(top, bottom, left, right)`` and may hold negative values (a negative end pad crops: MNN's
VALID mode with explicit padding shifts windows without growing the output).

The reference implementations are the fast numpy paths: a 1x1 convolution is one BLAS GEMM, a
general convolution is im2col (one strided copy per kernel tap) + GEMM, a depthwise convolution
accumulates one broadcast multiply-add per tap, and a transposed convolution is GEMM + col2im.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..threads import blas_threads

from .._dtypes import F32
from .registry import OpDef, register

ACTS = ("", "relu", "relu6")

#: Multiply-adds above which the compiled path runs depthwise convolutions with the Numba kernel of
#: ``mnnjit/backends/cpu/handwritten/nn_ops.py`` (below it numpy's tap loop won while other processes
#: loaded the cores: docs/DECISIONS.md, "Threads").
DEPTHWISE_NUMBA_WORK = 1 << 23


# ---------------------------------------------------------------- geometry helpers

def conv_out_size(n: int, pb: int, pe: int, k: int, s: int, d: int) -> int:
    """Output extent of a convolution along one axis (floor rule)."""
    return (n + pb + pe - ((k - 1) * d + 1)) // s + 1


def resolve_conv_pads(in_hw: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
                      dilation: Sequence[int], pad_mode: str = "CAFFE",
                      pads: Sequence[int] = (0, 0, 0, 0)) -> tuple[int, int, int, int]:
    """Explicit ``(top, bottom, left, right)`` pads for MNN/ONNX/TF padding modes (see NN_OPS.md).

    ``pad_mode``: ``"CAFFE"`` (explicit ``pads``), ``"VALID"`` (none), ``"SAME"``/``"SAME_UPPER"`` (TF: the
    extra pixel at the end), ``"SAME_LOWER"`` (extra pixel at the start).
    """
    mode = pad_mode.upper()
    if mode in ("CAFFE", "NOTSET", "EXPLICIT"):
        return tuple(int(p) for p in pads)  # type: ignore[return-value]
    if mode == "VALID":
        return (0, 0, 0, 0)
    if mode in ("SAME", "SAME_UPPER", "SAME_LOWER"):
        out = []
        for n, k, s, d in zip(in_hw, kernel, stride, dilation):
            o = -(-n // s)
            need = max(0, (o - 1) * s + (k - 1) * d + 1 - n)
            small = need // 2
            out.append((need - small, small) if mode == "SAME_LOWER" else (small, need - small))
        return (out[0][0], out[0][1], out[1][0], out[1][1])
    raise ValueError(f"unknown padding mode {pad_mode!r} (expected CAFFE, VALID, SAME, SAME_UPPER or SAME_LOWER)")


def resolve_deconv_pads(in_hw: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
                        dilation: Sequence[int], pad_mode: str = "CAFFE",
                        pads: Sequence[int] = (0, 0, 0, 0)) -> tuple[int, int, int, int]:
    """Crop amounts ``(top, bottom, left, right)`` of a transposed convolution for a padding mode.

    SAME makes the output ``in * stride``; the start crop is ``max(0, k - s) // 2`` computed with the
    undilated kernel (as real MNN does; the same as TF without dilation), the rest is cropped at the
    end (a negative end crop grows the output with zeros plus bias).
    """
    mode = pad_mode.upper()
    if mode in ("CAFFE", "NOTSET", "EXPLICIT"):
        return tuple(int(p) for p in pads)  # type: ignore[return-value]
    if mode == "VALID":
        return (0, 0, 0, 0)
    if mode in ("SAME", "SAME_UPPER", "SAME_LOWER"):
        out = []
        for n, k, s, d in zip(in_hw, kernel, stride, dilation):
            full = (n - 1) * s + (k - 1) * d + 1
            extra = max(0, k - s)
            begin = extra - extra // 2 if mode == "SAME_LOWER" else extra // 2
            out.append((begin, full - n * s - begin))
        return (out[0][0], out[0][1], out[1][0], out[1][1])
    raise ValueError(f"unknown padding mode {pad_mode!r}")


def pad_or_crop(x: np.ndarray, pads: Sequence[int], value: float = 0.0, mode: str = "constant") -> np.ndarray:
    """Pad the last two axes by ``(top, bottom, left, right)``; negative amounts crop."""
    t, b, l, r = pads
    if min(pads) < 0:
        h, w = x.shape[-2], x.shape[-1]
        x = x[..., max(0, -t): h - max(0, -b), max(0, -l): w - max(0, -r)]
        t, b, l, r = max(t, 0), max(b, 0), max(l, 0), max(r, 0)
    if t or b or l or r:
        if mode == "constant":
            h, w = x.shape[-2], x.shape[-1]
            out = np.empty(x.shape[:-2] + (h + t + b, w + l + r), x.dtype)
            if value == 0:
                out[...] = 0
            else:
                out.fill(value)
            out[..., t: t + h, l: l + w] = x
            return out
        widths = [(0, 0)] * (x.ndim - 2) + [(t, b), (l, r)]
        return np.pad(x, widths, mode=mode)
    return x


#: the one OpenBLAS thread pin (small products on one thread): ``mnnjit.threads``
blas_threads_for = blas_threads


def gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray, macs: int) -> np.ndarray:
    """``np.matmul(a, b, out=out)``, on one OpenBLAS thread when the product is small."""
    with blas_threads_for(macs):
        return np.matmul(a, b, out=out)


def apply_act(out: np.ndarray, act: str) -> np.ndarray:
    """The fused activation epilogue, in place."""
    if act == "relu":
        np.maximum(out, 0, out=out)
    elif act == "relu6":
        np.clip(out, 0, 6, out=out)
    return out


# ---------------------------------------------------------------- conv2d

def _conv_infer(inputs, attrs):
    x, w = inputs[0], inputs[1]
    if len(x.shape) != 4:
        raise ValueError(f"conv2d: input must be 4-D NCHW, got shape {list(x.shape)}")
    if len(w.shape) != 4:
        raise ValueError(f"conv2d: weight must be 4-D [O, I/group, kh, kw], got shape {list(w.shape)}")
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    g = attrs["group"]
    if c != ci * g or o % g:
        raise ValueError(f"conv2d: input has {c} channels but weight {list(w.shape)} with group={g} expects "
                         f"{ci * g} (and output channels divisible by group)")
    if len(inputs) > 2 and inputs[2].size != o:
        raise ValueError(f"conv2d: bias has {inputs[2].size} values for {o} output channels")
    (sh, sw), (dh, dw), (t, b, l, r) = attrs["stride"], attrs["dilation"], attrs["pads"]
    oh = conv_out_size(h, t, b, kh, sh, dh)
    ow = conv_out_size(wd, l, r, kw, sw, dw)
    if oh <= 0 or ow <= 0:
        raise ValueError(f"conv2d: kernel {kh}x{kw} (dilation {dh}x{dw}) is larger than the padded input "
                         f"{h + t + b}x{wd + l + r}")
    return (n, o, oh, ow), F32


def _taps(xp: np.ndarray, kh: int, kw: int, oh: int, ow: int, s: Sequence[int], d: Sequence[int]):
    """Yield ``(i, j, view)`` for every kernel tap: the strided input view the tap multiplies."""
    sh, sw = s
    dh, dw = d
    for i in range(kh):
        for j in range(kw):
            h0, w0 = i * dh, j * dw
            yield i, j, xp[:, :, h0: h0 + (oh - 1) * sh + 1: sh, w0: w0 + (ow - 1) * sw + 1: sw]


def conv2d_ref(xs: list, attrs: dict) -> np.ndarray:
    """conv2d on numpy arrays (GEMM / im2col / depthwise paths)."""
    x = np.asarray(xs[0], F32)
    w = np.asarray(xs[1], F32)
    bias = np.asarray(xs[2], F32).reshape(-1) if len(xs) > 2 else None
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    g = attrs["group"]
    stride, dil, pads = attrs["stride"], attrs["dilation"], attrs["pads"]
    oh = conv_out_size(h, pads[0], pads[1], kh, stride[0], dil[0])
    ow = conv_out_size(wd, pads[2], pads[3], kw, stride[1], dil[1])
    xp = pad_or_crop(x, pads)
    out = np.empty((n, o, oh, ow), F32)  # owns its data: the evaluator caches it without a copy
    gemm_out = out.reshape(n, g, o // g, oh * ow)
    if kh == 1 and kw == 1:
        xs_ = xp[:, :, : (oh - 1) * stride[0] + 1: stride[0], : (ow - 1) * stride[1] + 1: stride[1]]
        cols = xs_.reshape(n, g, ci, oh * ow)
        gemm(w.reshape(g, o // g, ci), cols, gemm_out, n * o * ci * oh * ow)
    elif g == c and o == c:
        out[...] = 0
        wt = w.reshape(c, kh, kw)
        tmp = np.empty((n, c, oh, ow), F32)
        for i, j, view in _taps(xp, kh, kw, oh, ow, stride, dil):
            np.multiply(view, wt[:, i, j][None, :, None, None], out=tmp)
            out += tmp
    else:
        cols = np.empty((n, c, kh, kw, oh, ow), F32)
        for i, j, view in _taps(xp, kh, kw, oh, ow, stride, dil):
            cols[:, :, i, j] = view
        cols = cols.reshape(n, g, ci * kh * kw, oh * ow)
        gemm(w.reshape(g, o // g, ci * kh * kw), cols, gemm_out, n * o * ci * kh * kw * oh * ow)
    if bias is not None:
        out += bias[None, :, None, None]
    return apply_act(out, attrs.get("act", ""))


register(OpDef("conv2d", "opaque", _conv_infer, conv2d_ref, mnn_type="Convolution",
               doc="2-D convolution with fused bias and relu/relu6 (see docs/NN_OPS.md)",
               extra={"kernel": "backends/cpu/handwritten/nn_ops.py (depthwise above DEPTHWISE_NUMBA_WORK)"}))


# ---------------------------------------------------------------- conv2d_transpose

def _deconv_infer(inputs, attrs):
    x, w = inputs[0], inputs[1]
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise ValueError(f"conv2d_transpose: input and weight must be 4-D, got {list(x.shape)} and {list(w.shape)}")
    n, c, h, wd = x.shape
    ci, og, kh, kw = w.shape
    g = attrs["group"]
    if ci != c or c % g:
        raise ValueError(f"conv2d_transpose: input has {c} channels but weight {list(w.shape)} "
                         f"(layout [C_in, O/group, kh, kw]) has {ci}")
    o = og * g
    if len(inputs) > 2 and inputs[2].size != o:
        raise ValueError(f"conv2d_transpose: bias has {inputs[2].size} values for {o} output channels")
    (sh, sw), (dh, dw), (t, b, l, r) = attrs["stride"], attrs["dilation"], attrs["pads"]
    ph, pw = attrs.get("output_padding", (0, 0))
    oh = (h - 1) * sh + (kh - 1) * dh + 1 - t - b + ph
    ow = (wd - 1) * sw + (kw - 1) * dw + 1 - l - r + pw
    if oh <= 0 or ow <= 0:
        raise ValueError(f"conv2d_transpose: padding {attrs['pads']} leaves no output")
    return (n, o, oh, ow), F32


def conv2d_transpose_ref(xs: list, attrs: dict) -> np.ndarray:
    """Transposed convolution: GEMM to per-tap columns, then col2im scatter-add."""
    x = np.asarray(xs[0], F32)
    w = np.asarray(xs[1], F32)
    bias = np.asarray(xs[2], F32).reshape(-1) if len(xs) > 2 else None
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    g = attrs["group"]
    cg = c // g
    (sh, sw), (dh, dw), (t, b, l, r) = attrs["stride"], attrs["dilation"], attrs["pads"]
    ph, pw = attrs.get("output_padding", (0, 0))
    o = og * g
    # [g, og*kh*kw, cg] @ [n, g, cg, h*w] -> [n, g, og*kh*kw, h*w]
    wmat = w.reshape(g, cg, og * kh * kw).transpose(0, 2, 1)
    cols = np.matmul(wmat, x.reshape(n, g, cg, h * wd)).reshape(n, o, kh, kw, h, wd)
    fh = (h - 1) * sh + (kh - 1) * dh + 1
    fw = (wd - 1) * sw + (kw - 1) * dw + 1
    full = np.zeros((n, o, fh, fw), F32)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + (h - 1) * sh + 1, sh)
            cols_ = slice(j * dw, j * dw + (wd - 1) * sw + 1, sw)
            full[:, :, rows, cols_] += cols[:, :, i, j]
    out = pad_or_crop(full, (-t, -b + ph, -l, -r + pw))
    out = np.ascontiguousarray(out)
    if bias is not None:
        out += bias[None, :, None, None]
    return apply_act(out, attrs.get("act", ""))


register(OpDef("conv2d_transpose", "opaque", _deconv_infer, conv2d_transpose_ref, mnn_type="Deconvolution",
               doc="2-D transposed convolution, weight [C_in, O/group, kh, kw] (see docs/NN_OPS.md)"))


# ---------------------------------------------------------------- builders

def _pair(v: Any, name: str) -> tuple[int, int]:
    if isinstance(v, (int, np.integer)):
        return (int(v), int(v))
    v = tuple(int(i) for i in v)
    if len(v) != 2:
        raise ValueError(f"{name} must have 2 values (h, w), got {list(v)}")
    return v  # type: ignore[return-value]


def conv2d(x: Any, weight: Any, bias: Any = None, stride: Any = (1, 1), dilation: Any = (1, 1),
           pads: Sequence[int] = (0, 0, 0, 0), group: int = 1, act: str = "", pad_mode: str = "CAFFE"):
    """Build a ``conv2d`` node (tuples in (h, w) order; pads (top, bottom, left, right)); returns a Var."""
    from . import build as B
    nx, nw = B.cast_node(B.as_node(x), F32), B.cast_node(B.as_node(weight), F32)
    if act not in ACTS:
        raise ValueError(f"conv2d: act must be one of {ACTS}, got {act!r}")
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    if min(stride) < 1 or min(dilation) < 1:
        raise ValueError(f"conv2d: stride {stride} and dilation {dilation} must be positive")
    if len(nw.shape) == 4:
        pads = resolve_conv_pads(nx.shape[2:], nw.shape[2:], stride, dilation, pad_mode, pads)
    nodes = [nx, nw]
    if bias is not None:
        nodes.append(B.cast_node(B.as_node(bias), F32))
    attrs = {"stride": stride, "dilation": dilation, "pads": tuple(int(p) for p in pads), "group": int(group),
             "act": act}
    return B.wrap(B.make_node("conv2d", nodes, attrs, fmt=nx.fmt))


def conv2d_transpose(x: Any, weight: Any, bias: Any = None, stride: Any = (1, 1), dilation: Any = (1, 1),
                     pads: Sequence[int] = (0, 0, 0, 0), group: int = 1, act: str = "",
                     output_padding: Any = (0, 0), pad_mode: str = "CAFFE"):
    """Build a ``conv2d_transpose`` node (weight [C_in, O/group, kh, kw]); returns a Var."""
    from . import build as B
    nx, nw = B.cast_node(B.as_node(x), F32), B.cast_node(B.as_node(weight), F32)
    if act not in ACTS:
        raise ValueError(f"conv2d_transpose: act must be one of {ACTS}, got {act!r}")
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    if len(nw.shape) == 4:
        pads = resolve_deconv_pads(nx.shape[2:], nw.shape[2:], stride, dilation, pad_mode, pads)
    nodes = [nx, nw]
    if bias is not None:
        nodes.append(B.cast_node(B.as_node(bias), F32))
    attrs = {"stride": stride, "dilation": dilation, "pads": tuple(int(p) for p in pads), "group": int(group),
             "act": act, "output_padding": _pair(output_padding, "output_padding")}
    return B.wrap(B.make_node("conv2d_transpose", nodes, attrs, fmt=nx.fmt))


# ---------------------------------------------------------------- conv3d

def _conv3d_infer(inputs, attrs):
    x, w = inputs[0], inputs[1]
    if len(x.shape) != 5 or len(w.shape) != 5:
        raise ValueError(f"conv3d: input [N,C,D,H,W] and weight [O,C/group,kd,kh,kw] expected, got {list(x.shape)} "
                         f"and {list(w.shape)}")
    n, c = x.shape[:2]
    o, ci = w.shape[:2]
    g = attrs["group"]
    if c != ci * g or o % g:
        raise ValueError(f"conv3d: input has {c} channels but weight {list(w.shape)} with group={g} expects {ci * g}")
    pads = attrs["pads"]  # (front, back, top, bottom, left, right)
    out = [conv_out_size(x.shape[2 + i], pads[2 * i], pads[2 * i + 1], w.shape[2 + i], attrs["stride"][i],
                         attrs["dilation"][i]) for i in range(3)]
    if min(out) <= 0:
        raise ValueError(f"conv3d: kernel {list(w.shape[2:])} is larger than the padded input {list(x.shape[2:])}")
    return (n, o) + tuple(out), F32


def conv3d_ref(xs: list, attrs: dict) -> np.ndarray:
    """3-D convolution as a sum over depth taps of 2-D convolutions (im2col GEMMs)."""
    x = np.asarray(xs[0], F32)
    w = np.asarray(xs[1], F32)
    bias = np.asarray(xs[2], F32).reshape(-1) if len(xs) > 2 else None
    (sd, sh, sw), (dd, dh, dw) = attrs["stride"], attrs["dilation"]
    pf, pb, t, b, l, r = attrs["pads"]
    n, c, d = x.shape[:3]
    kd = w.shape[2]
    od = conv_out_size(d, pf, pb, kd, sd, dd)
    xd = np.zeros((n, c, d + max(pf, 0) + max(pb, 0)) + x.shape[3:], F32)
    xd[:, :, max(pf, 0): max(pf, 0) + d] = x
    off = max(pf, 0) - pf
    a2 = {"stride": (sh, sw), "dilation": (dh, dw), "pads": (t, b, l, r), "group": attrs["group"], "act": ""}
    out = None
    for i in range(od):
        acc = None
        for k in range(kd):
            plane = conv2d_ref([xd[:, :, off + i * sd + k * dd], w[:, :, k]], a2)
            acc = plane if acc is None else acc + plane
        if out is None:
            out = np.empty((n, w.shape[0], od) + acc.shape[2:], F32)
        out[:, :, i] = acc
    if bias is not None:
        out += bias.reshape(1, -1, 1, 1, 1)
    return apply_act(out, attrs.get("act", ""))


register(OpDef("conv3d", "opaque", _conv3d_infer, conv3d_ref, mnn_type="Convolution3D",
               doc="3-D convolution, NCDHW, pads (front, back, top, bottom, left, right), fused bias/act"))
