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
from numba import get_num_threads, njit, prange

from ._blas import sgemm, single_threaded_blas
from .fp16 import f16_to_f32, load, store, widen
from .quant import DenseRows, HalfRows, QuantRows, as_weight_source

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


@njit(inline="always")
def _store_act(dst, d0, src, s0, b, n, act):
    """dst[d0 + j] = act(src[s0 + j] + b) for j < n; the activation switch sits outside the loops
    (a run-time branch inside a loop stops LLVM vectorising it, and scalar half conversions are
    several times slower than the vector F16C ones). The loops index slices from 0: an index
    like ``d0 + j`` of unknown sign keeps Numba's negative-index check, which blocks
    vectorisation (measured 20x on an int8 dot product)."""
    d = dst[d0:d0 + n]
    s = src[s0:s0 + n]
    if act == 0:
        for j in range(n):
            store(d, j, load(s, j) + b)
    elif act == 1:
        for j in range(n):
            store(d, j, max(load(s, j) + b, np.float32(0.0)))
    elif act == 2:
        for j in range(n):
            store(d, j, min(max(load(s, j) + b, np.float32(0.0)), np.float32(6.0)))
    else:
        for j in range(n):
            store(d, j, _act(load(s, j) + b, act))


@njit(inline="always")
def _add_act(dst, a, b, i0, n, act):
    """dst[i] = act(a[i] + b[i]) for i in i0 .. i0+n (activation switch outside the loops)."""
    d = dst[i0:i0 + n]
    x = a[i0:i0 + n]
    y = b[i0:i0 + n]
    if act == 0:
        for i in range(n):
            store(d, i, load(x, i) + load(y, i))
    elif act == 1:
        for i in range(n):
            store(d, i, max(load(x, i) + load(y, i), np.float32(0.0)))
    elif act == 2:
        for i in range(n):
            store(d, i, min(max(load(x, i) + load(y, i), np.float32(0.0)), np.float32(6.0)))
    else:
        for i in range(n):
            store(d, i, _act(load(x, i) + load(y, i), act))


_CHUNK = 8192


def _writable(a: np.ndarray) -> np.ndarray:
    """``a`` as a writable array: Numba compiles a separate specialisation for read-only arrays
    (graph constants and cached node values are read-only), so hand it a writable view when
    numpy allows one, else a copy. The kernels never write their inputs."""
    if a.flags.writeable:
        return a
    v = a.view()
    try:
        v.flags.writeable = True
        return v
    except ValueError:
        return a.copy()


def storage_view(a: np.ndarray) -> np.ndarray:
    """The array a kernel takes: float16 -> its uint16 bits; float32 unchanged (read-only arrays
    are given as writable views, see :func:`_writable`)."""
    a = _writable(a)
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
    nch = (x.size + _CHUNK - 1) // _CHUNK
    for ch in prange(nch):
        i0 = ch * _CHUNK
        _store_act(out, i0, x, i0, np.float32(0.0), min(_CHUNK, x.size - i0), act)


@njit(parallel=True, cache=True)
def _k_add(a, b, out, act):
    nch = (a.size + _CHUNK - 1) // _CHUNK
    for ch in prange(nch):
        i0 = ch * _CHUNK
        _add_act(out, a, b, i0, min(_CHUNK, a.size - i0), act)


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
W_DENSE, W_HALF, W_Q8, W_Q4 = 0, 1, 2, 3
_F32_DUMMY = np.zeros((1, 1), np.float32)
_U16_DUMMY = np.zeros((1, 1), np.uint16)
_I8_DUMMY = np.zeros((1, 1), np.int8)
_U8_DUMMY = np.zeros((1, 1), np.uint8)
_S_DUMMY = np.zeros((1, 1), np.float32)


@njit(inline="always")
def _weight_rows(wkind, w16, wq, w4, scale, offset, bs, r0, n, dst):
    """dst[:n] = float32 rows r0..r0+n of a half / int8 / packed-int4 weight matrix."""
    K = dst.shape[1]
    for r in range(n):
        rr = r0 + r
        if wkind == 1:
            for k in range(K):
                dst[r, k] = f16_to_f32(w16[rr, k])
        elif wkind == 2:
            for g in range(K // bs):
                sc = scale[rr, g]
                of = offset[rr, g]
                cq = wq[rr, g * bs:(g + 1) * bs]
                dq = dst[r, g * bs:(g + 1) * bs]
                for k in range(bs):
                    dq[k] = np.float32(cq[k]) * sc + of
        else:
            for k in range(K):
                byte = np.int32(w4[rr, k >> 1])
                nib = (byte >> 4) if (k & 1) == 0 else (byte & 15)
                g = k // bs
                dst[r, k] = np.float32((nib ^ 8) - 8) * scale[rr, g] + offset[rr, g]


@njit(inline="never")
def _keep_alive(a, b):
    return a.shape[0] + b.shape[0]


@njit(parallel=True, cache=True)
def _k_conv(x, H, W, wkind, w32, w16, wq, w4, scale, offset, bs, bias, out, OW, group, cg, og,
            kh, kw, sh, sw, pt, pl, dh, dw, T, RB, act, direct, pointwise, nthreads):
    """One launch per convolution (x viewed [N, C, H*W], out [N, O, OH*OW]).
    Tasks = (image, group, output-row block, chunk of pixel tiles); each thread gets float32
    weight rows once (a pointer into fp32 weights, or rows widened/dequantized into a scratch
    block), then per tile packs its im2col columns (widening fp16 to fp32), multiplies with
    single-threaded OpenBLAS sgemm and runs the fused bias + activation epilogue (narrowing to
    the output storage)."""
    N, C = x.shape[0], x.shape[1]
    P = out.shape[2]
    K = cg * kh * kw
    ntp = (P + T - 1) // T
    nob = (og + RB - 1) // RB
    # tasks = (image, group, output-row block, chunk of pixel tiles): weight rows are widened /
    # dequantized once per task and reused by every tile of its chunk
    # (fp32 weights: 2 chunks per thread for balance; other weights: as few as keep every
    # thread busy, each chunk widens/dequantizes its row block once)
    want = 2 * nthreads if wkind == 0 else nthreads
    nch = min(ntp, max(1, (want + N * group * nob - 1) // (N * group * nob)))
    ntask = N * group * nob * nch
    for task in prange(ntask):
        ch = task % nch
        rest = task // nch
        ob = rest % nob
        rest = rest // nob
        g = rest % group
        n = rest // group
        o0 = g * og + ob * RB
        m = min(RB, g * og + og - o0)
        # scratch buffers are referenced again after sgemm (_keep_alive): a raw pointer does not
        # hold a reference, and Numba frees an array right after its last use
        acc = np.empty((m, T), np.float32)
        col = np.empty((1 if direct else K, T), np.float32)
        wrows = np.empty((1 if wkind == 0 else m, K), np.float32)
        if wkind == 0:
            aptr = w32.ctypes.data + 4 * o0 * K
        else:
            _weight_rows(wkind, w16, wq, w4, scale, offset, bs, o0, m, wrows)
            aptr = wrows.ctypes.data
        tp0 = ch * ntp // nch
        tp1 = (ch + 1) * ntp // nch
        for tp in range(tp0, tp1):
            p0 = tp * T
            t = min(T, P - p0)
            if direct:
                bptr = x.ctypes.data + 4 * ((n * C + g * cg) * H * W + p0)
                ldb = H * W
            else:
                for k in range(K):
                    xr = x[n, g * cg + k // (kh * kw)]
                    cr = col[k]
                    if pointwise:
                        xs = xr[p0:p0 + t]
                        for j in range(t):
                            cr[j] = load(xs, j)
                        continue
                    ky = (k // kw) % kh
                    kx = k % kw
                    oy = p0 // OW
                    ox = p0 - oy * OW
                    j = 0
                    while j < t:
                        # one output row segment: ox .. min(OW, ox + t - j)
                        seg = min(OW - ox, t - j)
                        iy = oy * sh - pt + ky * dh
                        if iy < 0 or iy >= H:
                            for q in range(seg):
                                cr[j + q] = np.float32(0.0)
                        else:
                            base = iy * W - pl + kx * dw
                            for q in range(seg):
                                ix = (ox + q) * sw - pl + kx * dw
                                if 0 <= ix < W:
                                    cr[j + q] = load(xr, base + (ox + q) * sw)
                                else:
                                    cr[j + q] = np.float32(0.0)
                        j += seg
                        ox = 0
                        oy += 1
                bptr = col.ctypes.data
                ldb = T
            sgemm(101, 111, 111, m, t, K, np.float32(1.0), aptr, K, bptr, ldb,
                  np.float32(0.0), acc.ctypes.data, T)
            for o in range(m):
                _store_act(out[n, o0 + o], p0, acc[o], 0, bias[o0 + o], t, act)
        _keep_alive(col, wrows)


def _conv_out_hw(h: int, w: int, kh: int, kw: int, stride, pads, dilation) -> Tuple[int, int]:
    oh = (h + pads[0] + pads[1] - ((kh - 1) * dilation[0] + 1)) // stride[0] + 1
    ow = (w + pads[2] + pads[3] - ((kw - 1) * dilation[1] + 1)) // stride[1] + 1
    if oh <= 0 or ow <= 0:
        raise ValueError(f"conv2d: kernel {(kh, kw)} (dilation {tuple(dilation)}) larger than "
                         f"padded input {(h + pads[0] + pads[1], w + pads[2] + pads[3])}")
    return oh, ow


def _weight_args(src):
    """(kind, w32, w16, wq, w4, scale, offset, block) for the conv kernel."""
    if isinstance(src, DenseRows):
        return W_DENSE, src.w, _U16_DUMMY, _I8_DUMMY, _U8_DUMMY, _S_DUMMY, _S_DUMMY, 1
    if isinstance(src, HalfRows):
        return W_HALF, _F32_DUMMY, src.w16.view(np.uint16), _I8_DUMMY, _U8_DUMMY, _S_DUMMY, \
            _S_DUMMY, 1
    if isinstance(src, QuantRows):
        if src.bits <= 4:
            return W_Q4, _F32_DUMMY, _U16_DUMMY, _I8_DUMMY, src.codes, src.scale, src.offset, \
                src.block
        return W_Q8, _F32_DUMMY, _U16_DUMMY, src.codes, _U8_DUMMY, src.scale, src.offset, \
            src.block
    raise TypeError(f"unsupported weight source {type(src).__name__}")


def conv2d(x: np.ndarray, weight, bias: Optional[np.ndarray], kernel: Tuple[int, int],
           stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), group: int = 1,
           act: str = "", tile: Optional[int] = None) -> np.ndarray:
    """2-D convolution, NCHW, output storage = input storage (float16 or float32).

    ``weight`` is a weight source (:class:`.quant.DenseRows`, :class:`.quant.HalfRows`,
    :class:`.quant.QuantRows`) or a float32/float16 ``[O, C/group*kh*kw]`` array;
    ``pads`` = (top, bottom, left, right). One parallel kernel packs each output tile of
    ``tile`` pixels (widened to float32), multiplies it with OpenBLAS sgemm and narrows it in
    the fused bias + activation epilogue. Use :func:`depthwise_conv2d` for depthwise convs."""
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
    bias = np.zeros(O, np.float32) if bias is None else _writable(np.ascontiguousarray(bias, np.float32))
    if bias.shape != (O,):
        raise ValueError(f"conv2d: bias shape {bias.shape}, expected ({O},)")
    oh, ow = _conv_out_hw(H, W, kh, kw, stride, pads, dilation)
    P = oh * ow
    x = np.ascontiguousarray(x)
    out = np.empty((N, O, oh, ow), x.dtype)
    pointwise = kh == kw == 1 and tuple(stride) == (1, 1) and not any(pads)
    direct = pointwise and x.dtype == np.float32
    T = tile or max(32, _TILE_BYTES // (4 * K))
    T = min(T, P)
    if N * group * -(-P // T) < 2 and P > 64:       # keep both threads busy
        T = -(-P // 2)
    RB = og
    if O * K * 4 > _TILE_BYTES or N * group * -(-P // T) < 2:
        RB = max(8, min(og, _TILE_BYTES // (4 * K), -(-og // 2)))
    kind, w32, w16, wq, w4, sc, off, bs = _weight_args(src)
    with single_threaded_blas():
        _k_conv(storage_view(x).reshape(N, C, H * W), H, W, kind, w32, w16, wq, w4, sc, off, bs,
                bias, storage_view(out).reshape(N, O, P), ow, group, cg, og, kh, kw, stride[0], stride[1], pads[0], pads[2], dilation[0],
                dilation[1], T, RB, _act_code(act), direct, pointwise, get_num_threads())
    return out


# ---------------------------------------------------------------- depthwise
@njit(parallel=True, cache=True)
def _k_dw(x, w, bias, out, kh, kw, sh, sw, pt, pl, dh, dw, act, nchunk):
    """Depthwise conv: out[n, c] = act(sum_k w[c, k] * x[n, c, shifted] + bias[c]).

    Channels are split into ``nchunk`` chunks (buffers allocated once per chunk). Per channel the
    input plane is copied (fp16: widened) into a zero-bordered float32 plane, so every tap is
    in bounds; an output row is then a loop over contiguous (stride 1) or strided columns, with
    the 3x3 case written out (9 terms, one pass per output row)."""
    N, C, H, W = x.shape
    OH, OW = out.shape[2], out.shape[3]
    HP = (OH - 1) * sh + (kh - 1) * dh + 1
    WP = (OW - 1) * sw + (kw - 1) * dw + 1
    NC = N * C
    for chunk in prange(nchunk):
        c0 = chunk * NC // nchunk
        c1 = (chunk + 1) * NC // nchunk
        pad = np.zeros((HP, WP), np.float32)
        row = np.empty(OW, np.float32)
        for nc in range(c0, c1):
            n = nc // C
            c = nc % C
            src = x[n, c]
            for iy in range(HP):
                yy = iy - pt
                prow = pad[iy]
                if yy < 0 or yy >= H:
                    for ix in range(WP):
                        prow[ix] = np.float32(0.0)
                    continue
                sr = src[yy]
                for ix in range(WP):
                    xx = ix - pl
                    if 0 <= xx < W:
                        prow[ix] = load(sr, xx)
                    else:
                        prow[ix] = np.float32(0.0)
            b = bias[c]
            wc = w[c]
            for oy in range(OH):
                y0 = oy * sh
                if kh == 3 and kw == 3 and sw == 1 and dw == 1:
                    r0 = pad[y0]
                    r1 = pad[y0 + dh]
                    r2 = pad[y0 + 2 * dh]
                    w0, w1, w2, w3, w4, w5, w6, w7, w8 = (wc[0], wc[1], wc[2], wc[3], wc[4],
                                                          wc[5], wc[6], wc[7], wc[8])
                    for ox in range(OW):
                        row[ox] = (b + w0 * r0[ox] + w1 * r0[ox + 1] + w2 * r0[ox + 2]
                                   + w3 * r1[ox] + w4 * r1[ox + 1] + w5 * r1[ox + 2]
                                   + w6 * r2[ox] + w7 * r2[ox + 1] + w8 * r2[ox + 2])
                elif kh == 3 and kw == 3 and sw == 2 and dw == 1:
                    r0 = pad[y0]
                    r1 = pad[y0 + dh]
                    r2 = pad[y0 + 2 * dh]
                    w0, w1, w2, w3, w4, w5, w6, w7, w8 = (wc[0], wc[1], wc[2], wc[3], wc[4],
                                                          wc[5], wc[6], wc[7], wc[8])
                    for ox in range(OW):
                        i = 2 * ox
                        row[ox] = (b + w0 * r0[i] + w1 * r0[i + 1] + w2 * r0[i + 2]
                                   + w3 * r1[i] + w4 * r1[i + 1] + w5 * r1[i + 2]
                                   + w6 * r2[i] + w7 * r2[i + 1] + w8 * r2[i + 2])
                else:
                    for ox in range(OW):
                        row[ox] = b
                    for ky in range(kh):
                        pr = pad[y0 + ky * dh]
                        for kx in range(kw):
                            wv = wc[ky * kw + kx]
                            off = kx * dw
                            for ox in range(OW):
                                row[ox] += wv * pr[ox * sw + off]
                _store_act(out[n, c, oy], 0, row, 0, np.float32(0.0), OW, act)


def depthwise_conv2d(x: np.ndarray, weight: np.ndarray, bias: Optional[np.ndarray],
                     kernel: Tuple[int, int], stride=(1, 1), pads=(0, 0, 0, 0),
                     dilation=(1, 1), act: str = "") -> np.ndarray:
    """Depthwise 2-D convolution (group == C == O), NCHW; ``weight`` float32 ``[C, kh*kw]``
    (any shape with C*kh*kw elements); output storage = input storage."""
    if x.ndim != 4:
        raise ValueError(f"depthwise_conv2d: input must be NCHW, got shape {x.shape}")
    N, C, H, W = x.shape
    kh, kw = kernel
    w = _writable(np.ascontiguousarray(weight, np.float32))
    if w.size != C * kh * kw:
        raise ValueError(f"depthwise_conv2d: weight has {w.size} values, expected "
                         f"C*kh*kw = {C * kh * kw}")
    w = w.reshape(C, kh * kw)
    b = np.zeros(C, np.float32) if bias is None else _writable(np.ascontiguousarray(bias, np.float32))
    oh, ow = _conv_out_hw(H, W, kh, kw, stride, pads, dilation)
    out = np.empty((N, C, oh, ow), x.dtype)
    nchunk = min(N * C, 4 * get_num_threads())
    _k_dw(storage_view(np.ascontiguousarray(x)), w, b, storage_view(out), kh, kw, stride[0],
          stride[1], pads[0], pads[2], dilation[0], dilation[1], _act_code(act), nchunk)
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
