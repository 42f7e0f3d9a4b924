"""CNN kernels with float16 or float32 storage, computing in float32.

Every kernel here is written once against the dtype-generic :func:`fp16.load`/:func:`fp16.store`,
so it compiles to an fp16-storage version (``np.float16`` arrays, passed to Numba as their
``uint16`` bits) and to an fp32 version: the fp32 one is the baseline the fp16 path is measured
against, and the kernel the fp32 backend may use.

Activations are NCHW. The output storage dtype follows the input's (float16 in, float16 out).
Weights are given as a *weight source* (see :mod:`.quant`): a float32 ``[O, K]`` matrix, a
:class:`HalfRows` (float16 storage) or a quantized one; GEMMs run in float32 through BLAS
(numpy ``matmul``) on tiles small enough to stay in cache: fp16 activations are widened one tile
at a time by the im2col packing kernel, and the fp32 GEMM result is narrowed by the epilogue
kernel that also adds the bias and applies the activation.

Activation codes (``act``): ``""``, ``"relu"``, ``"relu6"``, ``"sigmoid"``, ``"tanh"``,
``"hard_swish"``, ``"silu"``.

This module imports numba: import it lazily.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

import numpy as np
from numba import njit, prange

from .fp16 import load, store

__all__ = ["ACTIVATIONS", "activation", "add", "conv2d", "depthwise_conv2d", "pool2d",
           "global_avg_pool", "storage_view", "new_like"]

ACTIVATIONS = {"": 0, "none": 0, "relu": 1, "relu6": 2, "sigmoid": 3, "tanh": 4,
               "hard_swish": 5, "silu": 6}

_TILE_BYTES = 192 * 1024  # fp32 im2col tile budget (L2 is 1 MiB per core here)


def _act_code(act: str) -> int:
    try:
        return ACTIVATIONS[act or ""]
    except KeyError:
        raise ValueError(f"unknown activation {act!r}; expected one of "
                         f"{sorted(k for k in ACTIVATIONS if k)}") from None


@njit(inline="always")
def _act(v, act):
    if act == 0:
        return v
    if act == 1:
        return max(v, np.float32(0.0))
    if act == 2:
        return min(max(v, np.float32(0.0)), np.float32(6.0))
    if act == 3:
        return np.float32(1.0) / (np.float32(1.0) + np.exp(-v))
    if act == 4:
        return np.tanh(v)
    if act == 5:
        return v * min(max(v + np.float32(3.0), np.float32(0.0)), np.float32(6.0)) / np.float32(6.0)
    return v / (np.float32(1.0) + np.exp(-v))


def storage_view(a: np.ndarray) -> np.ndarray:
    """The array a kernel takes: float16 -> its uint16 bits; float32 unchanged."""
    if a.dtype == np.float16:
        return a.view(np.uint16)
    if a.dtype == np.float32:
        return a
    raise TypeError(f"activations must be float16 or float32, got {a.dtype}")


def new_like(dtype: np.dtype, shape: Sequence[int]) -> np.ndarray:
    """An uninitialised activation array of storage ``dtype`` (float16 or float32)."""
    return np.empty(tuple(shape), dtype)


# ---------------------------------------------------------------- elementwise
@njit(parallel=True, cache=True)
def _k_act(x, out, act):
    for i in prange(x.size):
        store(out, i, _act(load(x, i), act))


@njit(parallel=True, cache=True)
def _k_add(a, b, out, act):
    for i in prange(a.size):
        store(out, i, _act(load(a, i) + load(b, i), act))


def _flat_out(x: np.ndarray, out: Optional[np.ndarray]) -> np.ndarray:
    if out is None:
        return np.empty_like(x)
    if out.shape != x.shape or out.dtype != x.dtype or not out.flags.c_contiguous:
        raise ValueError(f"out must be C-contiguous {x.dtype} of shape {x.shape}")
    return out


def activation(x: np.ndarray, act: str, out: Optional[np.ndarray] = None) -> np.ndarray:
    """``act(x)`` elementwise; float16 or float32 storage (computed in float32)."""
    x = np.ascontiguousarray(x)
    out = _flat_out(x, out)
    _k_act(storage_view(x).reshape(-1), storage_view(out).reshape(-1), _act_code(act))
    return out


def add(a: np.ndarray, b: np.ndarray, act: str = "", out: Optional[np.ndarray] = None) -> np.ndarray:
    """``act(a + b)`` for two same-shape, same-storage arrays (the residual add of CNNs)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        raise ValueError(f"add: operands differ: {a.shape} {a.dtype} vs {b.shape} {b.dtype}")
    a = np.ascontiguousarray(a)
    b = np.ascontiguousarray(b)
    out = _flat_out(a, out)
    _k_add(storage_view(a).reshape(-1), storage_view(b).reshape(-1),
           storage_view(out).reshape(-1), _act_code(act))
    return out


# ---------------------------------------------------------------- conv (im2col + BLAS)
@njit(parallel=True, cache=True)
def _k_pack_1x1(x, n, p0, col):
    """col[c, t] = float32(x[n, c, p0 + t]) for x viewed [N, C, H*W]."""
    C, T = col.shape
    for c in prange(C):
        for t in range(T):
            col[c, t] = load(x, (n, c, p0 + t))


@njit(parallel=True, cache=True)
def _k_pack(x, n, c0, p0, kh, kw, sh, sw, pt, pl, dh, dw, ow, col):
    """im2col of one tile: col[(c*kh+ky)*kw+kx, t] for output pixels p0..p0+T of image n,
    input channels c0.. (x is [N, C, H, W]); out-of-image taps are 0."""
    K, T = col.shape
    H = x.shape[2]
    W = x.shape[3]
    for k in prange(K):
        c = c0 + k // (kh * kw)
        ky = (k // kw) % kh
        kx = k % kw
        oy = p0 // ow
        ox = p0 - oy * ow
        for t in range(T):
            iy = oy * sh - pt + ky * dh
            ix = ox * sw - pl + kx * dw
            if 0 <= iy < H and 0 <= ix < W:
                col[k, t] = load(x, (n, c, iy, ix))
            else:
                col[k, t] = np.float32(0.0)
            ox += 1
            if ox == ow:
                ox = 0
                oy += 1


@njit(parallel=True, cache=True)
def _k_epilogue(acc, bias, out, n, o0, p0, act):
    """out[n, o0 + o, p0 + t] = act(acc[o, t] + bias[o0 + o]) (out viewed [N, O, P])."""
    O, T = acc.shape
    for o in prange(O):
        b = bias[o0 + o]
        for t in range(T):
            store(out, (n, o0 + o, p0 + t), _act(acc[o, t] + b, act))


def _conv_out_hw(h: int, w: int, kh: int, kw: int, stride, pads, dilation) -> Tuple[int, int]:
    oh = (h + pads[0] + pads[1] - ((kh - 1) * dilation[0] + 1)) // stride[0] + 1
    ow = (w + pads[2] + pads[3] - ((kw - 1) * dilation[1] + 1)) // stride[1] + 1
    if oh <= 0 or ow <= 0:
        raise ValueError(f"conv2d: kernel {(kh, kw)} (dilation {tuple(dilation)}) larger than "
                         f"padded input {(h + pads[0] + pads[1], w + pads[2] + pads[3])}")
    return oh, ow


def conv2d(x: np.ndarray, weight, bias: Optional[np.ndarray], kernel: Tuple[int, int],
           stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), group: int = 1,
           act: str = "", tile: Optional[int] = None) -> np.ndarray:
    """2-D convolution, NCHW, output storage = input storage (float16 or float32).

    ``weight`` is a weight source with ``rows``/``shape`` (see :mod:`.quant`, e.g.
    ``as_weight_source(w.reshape(O, -1))``) or a float32 ``[O, C/group*kh*kw]`` array;
    ``pads`` = (top, bottom, left, right). Depthwise convolutions (``group == C == O``) go to
    :func:`depthwise_conv2d`. Each output tile of ``tile`` pixels is packed (widened to float32),
    multiplied by BLAS and narrowed by the fused bias + activation epilogue."""
    from .quant import as_weight_source
    src = as_weight_source(weight)
    if x.ndim != 4:
        raise ValueError(f"conv2d: input must be NCHW (4-D), got shape {x.shape}")
    N, C, H, W = x.shape
    kh, kw = kernel
    O, K = src.shape
    if C % group or O % group:
        raise ValueError(f"conv2d: group {group} does not divide channels in {C} / out {O}")
    cg, og = C // group, O // group
    if K != cg * kh * kw:
        raise ValueError(f"conv2d: weight has {K} columns, expected C/group*kh*kw = "
                         f"{cg}*{kh}*{kw} = {cg * kh * kw}")
    if bias is None:
        bias = np.zeros(O, np.float32)
    bias = np.ascontiguousarray(bias, np.float32)
    if bias.shape != (O,):
        raise ValueError(f"conv2d: bias shape {bias.shape}, expected ({O},)")
    oh, ow = _conv_out_hw(H, W, kh, kw, stride, pads, dilation)
    P = oh * ow
    a = _act_code(act)
    x = np.ascontiguousarray(x)
    xs = storage_view(x)
    out = np.empty((N, O, oh, ow), x.dtype)
    outs = storage_view(out).reshape(N, O, P)
    pointwise = (kh == kw == 1 and tuple(stride) == (1, 1) and not any(pads))
    if tile is None:
        tile = max(64, _TILE_BYTES // (4 * K))
    T = min(P, tile)
    col = np.empty((K, T), np.float32)
    acc = np.empty((og, T), np.float32)
    x3 = xs.reshape(N, C, H * W)
    for n in range(N):
        for g in range(group):
            for p0 in range(0, P, T):
                t = min(T, P - p0)
                ct, at = col[:, :t], acc[:, :t]
                if pointwise:
                    _k_pack_1x1(x3[:, g * cg:(g + 1) * cg], n, p0, ct)
                else:
                    _k_pack(xs, n, g * cg, p0, kh, kw, stride[0], stride[1], pads[0], pads[2],
                            dilation[0], dilation[1], ow, ct)
                src.matmul(g * og, (g + 1) * og, ct, at)
                _k_epilogue(at, bias, outs, n, g * og, p0, a)
    return out


# ---------------------------------------------------------------- depthwise
@njit(parallel=True, cache=True)
def _k_dw(x, w, bias, out, kh, kw, sh, sw, pt, pl, dh, dw, act):
    """Depthwise conv: out[n, c] = act(sum_k w[c, k] * x[n, c, shifted] + bias[c])."""
    N, C, H, W = x.shape
    OH, OW = out.shape[2], out.shape[3]
    for nc in prange(N * C):
        n = nc // C
        c = nc % C
        row = np.empty(OW, np.float32)
        # ox range where every kx tap is inside the image: interior, no bounds checks
        for oy in range(OH):
            for ox in range(OW):
                row[ox] = bias[c]
            for ky in range(kh):
                iy = oy * sh - pt + ky * dh
                if iy < 0 or iy >= H:
                    continue
                for kx in range(kw):
                    wv = w[c, ky * kw + kx]
                    off = kx * dw - pl
                    # valid ox: 0 <= ox*sw + off < W
                    lo = 0 if off >= 0 else (-off + sw - 1) // sw
                    hi = (W - 1 - off) // sw + 1 if W - 1 - off >= 0 else 0
                    if hi > OW:
                        hi = OW
                    for ox in range(lo, hi):
                        row[ox] += wv * load(x, (n, c, iy, ox * sw + off))
            for ox in range(OW):
                store(out, (n, c, oy, ox), _act(row[ox], act))


def depthwise_conv2d(x: np.ndarray, weight: np.ndarray, bias: Optional[np.ndarray],
                     kernel: Tuple[int, int], stride=(1, 1), pads=(0, 0, 0, 0),
                     dilation=(1, 1), act: str = "") -> np.ndarray:
    """Depthwise 2-D convolution (group == C == O), NCHW; ``weight`` float32 ``[C, kh*kw]``
    (any shape with C*kh*kw elements); output storage = input storage."""
    if x.ndim != 4:
        raise ValueError(f"depthwise_conv2d: input must be NCHW, got shape {x.shape}")
    N, C, H, W = x.shape
    kh, kw = kernel
    w = np.ascontiguousarray(weight, np.float32)
    if w.size != C * kh * kw:
        raise ValueError(f"depthwise_conv2d: weight has {w.size} values, expected "
                         f"C*kh*kw = {C * kh * kw}")
    w = w.reshape(C, kh * kw)
    b = np.zeros(C, np.float32) if bias is None else np.ascontiguousarray(bias, np.float32)
    oh, ow = _conv_out_hw(H, W, kh, kw, stride, pads, dilation)
    out = np.empty((N, C, oh, ow), x.dtype)
    _k_dw(storage_view(np.ascontiguousarray(x)), w, b, storage_view(out), kh, kw, stride[0],
          stride[1], pads[0], pads[2], dilation[0], dilation[1], _act_code(act))
    return out


# ---------------------------------------------------------------- pooling
@njit(parallel=True, cache=True)
def _k_pool(x, out, is_max, kh, kw, sh, sw, pt, pl, pb, pr, include_pad):
    N, C, H, W = x.shape
    OH, OW = out.shape[2], out.shape[3]
    for nc in prange(N * C):
        n = nc // C
        c = nc % C
        for oy in range(OH):
            y0 = oy * sh - pt
            for ox in range(OW):
                x0 = ox * sw - pl
                acc = np.float32(-np.inf) if is_max else np.float32(0.0)
                cnt = 0
                for ky in range(kh):
                    iy = y0 + ky
                    if iy < 0 or iy >= H:
                        continue
                    for kx in range(kw):
                        ix = x0 + kx
                        if ix < 0 or ix >= W:
                            continue
                        v = load(x, (n, c, iy, ix))
                        if is_max:
                            acc = max(acc, v)
                        else:
                            acc += v
                        cnt += 1
                if not is_max:
                    if include_pad:
                        cy = min(y0 + kh, H + pb) - max(y0, -pt)
                        cx = min(x0 + kw, W + pr) - max(x0, -pl)
                        cnt = cy * cx
                    acc = acc / np.float32(cnt) if cnt > 0 else np.float32(0.0)
                store(out, (n, c, oy, ox), acc)


@njit(parallel=True, cache=True)
def _k_global_avg(x, out):
    NC, P = x.shape
    for i in prange(NC):
        s = np.float32(0.0)
        for p in range(P):
            s += load(x, (i, p))
        store(out, i, s / np.float32(P))


def pool2d(x: np.ndarray, kind: str, kernel: Tuple[int, int], stride=(1, 1),
           pads=(0, 0, 0, 0), out_hw: Optional[Tuple[int, int]] = None,
           count_include_pad: bool = True) -> np.ndarray:
    """Max or average pooling, NCHW (``pads`` = top, bottom, left, right; ``out_hw`` overrides
    the floor-mode output size, e.g. for ceil mode). Padding never wins a max."""
    if kind not in ("max", "avg"):
        raise ValueError(f"pool2d: kind must be 'max' or 'avg', got {kind!r}")
    N, C, H, W = x.shape
    kh, kw = kernel
    if out_hw is None:
        out_hw = _conv_out_hw(H, W, kh, kw, stride, pads, (1, 1))
    out = np.empty((N, C) + tuple(out_hw), x.dtype)
    _k_pool(storage_view(np.ascontiguousarray(x)), storage_view(out), kind == "max", kh, kw,
            stride[0], stride[1], pads[0], pads[2], pads[1], pads[3], bool(count_include_pad))
    return out


def global_avg_pool(x: np.ndarray) -> np.ndarray:
    """Mean over H, W: [N, C, H, W] -> [N, C, 1, 1] (sum in float32)."""
    N, C, H, W = x.shape
    out = np.empty((N, C, 1, 1), x.dtype)
    _k_global_avg(storage_view(np.ascontiguousarray(x)).reshape(N * C, H * W),
                  storage_view(out).reshape(-1))
    return out
