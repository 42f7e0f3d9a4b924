"""Numba kernels for the NN ops whose numpy references are memory-bound (depthwise convolution).

Imported lazily by ``mnnjit/ops/nn_conv.py`` for inputs above a size threshold: importing this
module imports Numba. Each kernel computes exactly what the op's numpy reference computes
(float32 accumulation in tap order), is parallel over (batch, channel) planes with ``prange``,
and is compiled with ``cache=True`` so later processes load it from Numba's on-disk cache.
"""
from __future__ import annotations

from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
import numba as nb
import numpy as np

_JIT = dict(parallel=True, cache=True, nogil=True, fastmath=False)


@nb.njit(**_JIT)
def _depthwise(xp, w, bias, sh, sw, dh, dw, oh, ow, act, out):  # pragma: no cover - compiled
    n, c = xp.shape[0], xp.shape[1]
    kh, kw = w.shape[1], w.shape[2]
    for p in nb.prange(n * c):
        b = p // c
        ch = p % c
        src = xp[b, ch]
        dst = out[b, ch]
        acc = np.empty(ow, np.float32)  # one output row, kept in L1 while every tap adds into it
        bv = bias[ch]
        for i in range(oh):
            for j in range(ow):
                acc[j] = 0.0
            for u in range(kh):
                row = src[i * sh + u * dh]
                for v in range(kw):
                    wv = w[ch, u, v]
                    off = v * dw
                    if sw == 1:
                        for j in range(ow):
                            acc[j] += row[j + off] * wv
                    else:
                        for j in range(ow):
                            acc[j] += row[j * sw + off] * wv
            o = dst[i]
            for j in range(ow):
                r = acc[j] + bv
                if act == 1:
                    r = max(r, np.float32(0.0))
                elif act == 2:
                    r = min(max(r, np.float32(0.0)), np.float32(6.0))
                o[j] = r


def depthwise_conv2d(xp: np.ndarray, w: np.ndarray, bias: np.ndarray | None, stride, dilation, oh: int, ow: int,
                     act: str) -> np.ndarray:
    """Depthwise convolution of already padded ``xp`` [N, C, Hp, Wp] with ``w`` [C, kh, kw]."""
    n, c = xp.shape[:2]
    out = np.empty((n, c, oh, ow), np.float32)
    b = np.zeros(c, np.float32) if bias is None else np.ascontiguousarray(bias, np.float32)
    code = {"": 0, "relu": 1, "relu6": 2}[act]
    _depthwise(np.ascontiguousarray(xp, np.float32), np.ascontiguousarray(w, np.float32), b, stride[0], stride[1],
               dilation[0], dilation[1], oh, ow, code, out)
    return out


@nb.njit(**_JIT)
def _resize_sep(x, ih, wh, iw, ww, out):  # pragma: no cover - compiled
    p_, h, _ = x.shape
    oh, ow = out.shape[1], out.shape[2]
    th, tw = ih.shape[1], iw.shape[1]
    for p in nb.prange(p_):
        src = x[p]
        dst = out[p]
        tmp = np.empty((h, ow), np.float32)  # every input row resized along W
        for r in range(h):
            row = src[r]
            t = tmp[r]
            for j in range(ow):
                acc = row[iw[j, 0]] * ww[j, 0]   # (not 0 + ...: a one-tap copy keeps -0.0)
                for b in range(1, tw):
                    acc += row[iw[j, b]] * ww[j, b]
                t[j] = acc
        for i in range(oh):
            o = dst[i]
            r0 = tmp[ih[i, 0]]
            w0 = wh[i, 0]
            for j in range(ow):
                o[j] = r0[j] * w0
            for a in range(1, th):
                ra = tmp[ih[i, a]]
                wa = wh[i, a]
                for j in range(ow):
                    o[j] += ra[j] * wa


def resize_separable(x: np.ndarray, ih: np.ndarray, wh: np.ndarray, iw: np.ndarray, ww: np.ndarray) -> np.ndarray:
    """Separable resize of the last two axes of float32 ``x`` with per-output taps (index, weight)."""
    lead = x.shape[:-2]
    h, w = x.shape[-2:]
    planes = np.ascontiguousarray(x, np.float32).reshape(-1, h, w)
    out = np.empty((planes.shape[0], ih.shape[0], iw.shape[0]), np.float32)
    _resize_sep(planes, np.ascontiguousarray(ih, np.int64), np.ascontiguousarray(wh, np.float32),
                np.ascontiguousarray(iw, np.int64), np.ascontiguousarray(ww, np.float32), out)
    return out.reshape(lead + out.shape[1:])


@nb.njit(**_JIT)
def _pool(x, kh, kw, sh, sw, pt, pl, pb, pr, is_max, include_pad, out):  # pragma: no cover - compiled
    p_, h, w = x.shape
    oh, ow = out.shape[1], out.shape[2]
    for p in nb.prange(p_):
        src = x[p]
        dst = out[p]
        for i in range(oh):
            h0 = i * sh - pt
            hs = min(max(h0, 0), h - 1)
            he = max(min(h0 + kh, h), hs + 1)  # an all-padding window takes the nearest edge row (max)
            ch = min(h0 + kh, h + pb) - h0 if include_pad else min(h0 + kh, h) - max(h0, 0)
            for j in range(ow):
                w0 = j * sw - pl
                ws = min(max(w0, 0), w - 1)
                we = max(min(w0 + kw, w), ws + 1)
                if is_max:
                    m = src[hs, ws]
                    for a in range(hs, he):
                        for b in range(ws, we):
                            if src[a, b] > m:
                                m = src[a, b]
                    dst[i, j] = m
                else:
                    cw = min(w0 + kw, w + pr) - w0 if include_pad else min(w0 + kw, w) - max(w0, 0)
                    acc = np.float32(0.0)
                    for a in range(max(h0, 0), min(h0 + kh, h)):
                        for b in range(max(w0, 0), min(w0 + kw, w)):
                            acc += src[a, b]
                    cnt = max(ch, 0) * max(cw, 0)
                    dst[i, j] = acc / cnt if cnt > 0 else np.float32(0.0)


def pool2d(x: np.ndarray, kind: str, kernel, stride, pads, out_hw, include_pad: bool) -> np.ndarray:
    """Max/avg pooling of float32 NCHW ``x`` (the semantics of ``mnnjit.ops.nn_pool.pool2d_ref``)."""
    n, c, h, w = x.shape
    planes = np.ascontiguousarray(x, np.float32).reshape(n * c, h, w)
    out = np.empty((n * c,) + tuple(out_hw), np.float32)
    t, b, l, r = pads
    _pool(planes, kernel[0], kernel[1], stride[0], stride[1], t, l, b, r, kind == "max", bool(include_pad), out)
    return out.reshape(n, c, out_hw[0], out_hw[1])


@nb.njit(parallel=True, cache=True, nogil=True, fastmath={"reassoc"})
def _layer_norm_rows(x, g, b, eps, rms, has_g, has_b, out):  # pragma: no cover - compiled
    rows, n = x.shape
    for r in nb.prange(rows):
        src = x[r]
        dst = out[r]
        mean = 0.0
        if not rms:
            s = 0.0
            for j in range(n):
                s += src[j]
            mean = s / n
        q = 0.0
        for j in range(n):
            d = src[j] - mean
            q += d * d
        rstd = np.float32(1.0 / np.sqrt(q / n + eps))
        m32 = np.float32(mean)
        for j in range(n):
            v = (src[j] - m32) * rstd
            if has_g:
                v = v * g[j]
            if has_b:
                v = v + b[j]
            dst[j] = v


def layer_norm_rows(x: np.ndarray, gamma: np.ndarray | None, beta: np.ndarray | None, eps: float,
                    rms: bool) -> np.ndarray:
    """Normalise each row of the 2-D float32 ``x`` (mean and variance summed in float64; RMS
    without the mean), then ``* gamma + beta`` (vectors of the row length, or None)."""
    x = np.ascontiguousarray(x, np.float32)
    out = np.empty_like(x)
    one = np.ones(1, np.float32)
    g = one if gamma is None else np.ascontiguousarray(gamma, np.float32).reshape(-1)
    b = one if beta is None else np.ascontiguousarray(beta, np.float32).reshape(-1)
    _layer_norm_rows(x, g, b, float(eps), bool(rms), gamma is not None, beta is not None, out)
    return out
