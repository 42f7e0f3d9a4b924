"""Numba kernels for the hot image ops (resize, warpAffine, cvtColor, separable filters).

Imported lazily (only when an image op runs on an image above its size threshold): importing this
module imports Numba. Every kernel is a ``prange`` loop over output rows computing exactly what the
op's numpy reference in ``mnnjit/ops/image_*.py`` computes (same fixed-point arithmetic), and is
compiled with ``cache=True`` so a second process loads it from Numba's on-disk cache.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from ...ops.image_geometry import CV_BORDER_CONSTANT, CV_BORDER_REPLICATE, linear_taps, INTER_LINEAR

_JIT = dict(parallel=True, cache=True, nogil=True)


# ----------------------------------------------------------------------------- resize
@nb.njit(**_JIT)
def _resize_linear_u8(src, xi, ax, yi, by, out):
    oh, ow, c = out.shape
    for dy in nb.prange(oh):
        r0 = yi[dy, 0]
        r1 = yi[dy, 1]
        b0 = by[dy, 0]
        b1 = by[dy, 1]
        for dx in range(ow):
            x0 = xi[dx, 0]
            x1 = xi[dx, 1]
            a0 = ax[dx, 0]
            a1 = ax[dx, 1]
            for k in range(c):
                h0 = (np.int32(src[r0, x0, k]) * a0 + np.int32(src[r0, x1, k]) * a1) >> 4
                h1 = (np.int32(src[r1, x0, k]) * a0 + np.int32(src[r1, x1, k]) * a1) >> 4
                v = (((h0 * b0) >> 16) + ((h1 * b1) >> 16) + 2) >> 2
                out[dy, dx, k] = min(max(v, 0), 255)


@nb.njit(**_JIT)
def _resize_linear_f32(src, xi, ax, yi, by, out):
    oh, ow, c = out.shape
    for dy in nb.prange(oh):
        r0 = yi[dy, 0]
        r1 = yi[dy, 1]
        b0 = by[dy, 0]
        b1 = by[dy, 1]
        for dx in range(ow):
            x0 = xi[dx, 0]
            x1 = xi[dx, 1]
            a0 = ax[dx, 0]
            a1 = ax[dx, 1]
            for k in range(c):
                h0 = src[r0, x0, k] * a0 + src[r0, x1, k] * a1
                h1 = src[r1, x0, k] * a0 + src[r1, x1, k] * a1
                out[dy, dx, k] = h0 * b0 + h1 * b1


def resize_linear(x: np.ndarray, oh: int, ow: int, sy: float, sx: float) -> np.ndarray:
    """Bilinear resize (uint8: OpenCV's 11-bit fixed point; float32: float taps)."""
    h, w, c = x.shape
    yi, yw = linear_taps(h, oh, sy, INTER_LINEAR)
    xi, xw = linear_taps(w, ow, sx, INTER_LINEAR)
    x = np.ascontiguousarray(x)
    if x.dtype == np.uint8:
        a0 = np.rint(xw[:, 0] * 2048).astype(np.int32)
        b0 = np.rint(yw[:, 0] * 2048).astype(np.int32)
        ax = np.stack([a0, 2048 - a0], -1)
        by = np.stack([b0, 2048 - b0], -1)
        out = np.empty((oh, ow, c), np.uint8)
        _resize_linear_u8(x, xi.astype(np.int32), ax, yi.astype(np.int32), by, out)
        return out
    out = np.empty((oh, ow, c), np.float32)
    _resize_linear_f32(x, xi.astype(np.int32), xw.astype(np.float32), yi.astype(np.int32),
                       yw.astype(np.float32), out)
    return out


# ----------------------------------------------------------------------------- warpAffine
@nb.njit(**_JIT)
def _warp_affine_u8(src, m, rowx, rowy, replicate, bval, out):
    oh, ow, c = out.shape
    h, w = src.shape[0], src.shape[1]
    m0 = np.float32(m[0])
    m3 = np.float32(m[3])
    for y in nb.prange(oh):
        mx0 = rowx[y]
        my0 = rowy[y]
        for x in range(ow):
            fx = m0 * np.float32(x) + mx0
            fy = m3 * np.float32(x) + my0
            if not (-1e9 < fx < 1e9 and -1e9 < fy < 1e9):
                for k in range(c):
                    out[y, x, k] = np.uint8(bval[k]) if not replicate else src[0, 0, k]
                continue
            x0f = np.floor(fx)
            y0f = np.floor(fy)
            ax = fx - x0f
            ay = fy - y0f
            x0 = np.int64(x0f)
            y0 = np.int64(y0f)
            inside = x0 >= 0 and y0 >= 0 and x0 + 1 < w and y0 + 1 < h
            for k in range(c):
                if inside:
                    p00 = np.float32(src[y0, x0, k])
                    p01 = np.float32(src[y0, x0 + 1, k])
                    p10 = np.float32(src[y0 + 1, x0, k])
                    p11 = np.float32(src[y0 + 1, x0 + 1, k])
                else:
                    p00 = _px(src, y0, x0, k, replicate, bval[k])
                    p01 = _px(src, y0, x0 + 1, k, replicate, bval[k])
                    p10 = _px(src, y0 + 1, x0, k, replicate, bval[k])
                    p11 = _px(src, y0 + 1, x0 + 1, k, replicate, bval[k])
                v0 = p00 + ax * (p01 - p00)
                v1 = p10 + ax * (p11 - p10)
                v = v0 + ay * (v1 - v0)
                out[y, x, k] = np.uint8(min(max(np.rint(v), 0.0), 255.0))


@nb.njit(inline="always", cache=True)
def _px(src, y, x, k, replicate, bv):
    h, w = src.shape[0], src.shape[1]
    if replicate:
        y = min(max(y, 0), h - 1)
        x = min(max(x, 0), w - 1)
        return np.float32(src[y, x, k])
    if y < 0 or x < 0 or y >= h or x >= w:
        return np.float32(bv)
    return np.float32(src[y, x, k])


def warp_affine_linear_u8(x: np.ndarray, M: tuple, oh: int, ow: int, border: int, value: tuple) -> np.ndarray:
    """Bilinear warpAffine of uint8 HWC data with the inverse map M (float32 coordinates, as OpenCV 5)."""
    if border not in (CV_BORDER_CONSTANT, CV_BORDER_REPLICATE):
        raise ValueError("warp kernel handles BORDER_CONSTANT and BORDER_REPLICATE only")
    m = np.asarray(M, np.float64)
    ys = np.arange(oh, dtype=np.float64)
    rowx = (ys * m[1] + m[2]).astype(np.float32)
    rowy = (ys * m[4] + m[5]).astype(np.float32)
    c = x.shape[2]
    bval = np.array((list(value) + [0.0] * 4)[:max(c, 4)], np.float32)
    bval = np.clip(np.rint(bval), 0, 255)
    out = np.empty((oh, ow, c), np.uint8)
    _warp_affine_u8(np.ascontiguousarray(x), m, rowx, rowy, border == CV_BORDER_REPLICATE, bval, out)
    return out


# ----------------------------------------------------------------------------- cvtColor
@nb.njit(**_JIT)
def _swap_u8(src, order, alpha_src, out):
    h, w, dc = out.shape
    for y in nb.prange(h):
        for x in range(w):
            for k in range(3):
                out[y, x, k] = src[y, x, order[k]]
            if dc == 4:
                out[y, x, 3] = src[y, x, 3] if alpha_src else np.uint8(255)


@nb.njit(**_JIT)
def _gray_u8(src, bidx, out):
    h, w = out.shape[0], out.shape[1]
    for y in nb.prange(h):
        for x in range(w):
            b = np.int32(src[y, x, bidx])
            g = np.int32(src[y, x, 1])
            r = np.int32(src[y, x, 2 - bidx])
            out[y, x, 0] = np.uint8((b * 1868 + g * 9617 + r * 4899 + 8192) >> 14)


@nb.njit(**_JIT)
def _gray2bgr_u8(src, out):
    h, w, dc = out.shape
    for y in nb.prange(h):
        for x in range(w):
            v = src[y, x, 0]
            out[y, x, 0] = v
            out[y, x, 1] = v
            out[y, x, 2] = v
            if dc == 4:
                out[y, x, 3] = 255


def cvt_color(x: np.ndarray, code: int) -> np.ndarray:
    """uint8 channel swaps, BGR->gray (14-bit fixed point) and gray->BGR(A)."""
    from ...ops.image_color import GRAY_FROM, GRAY_TO, SWAP
    x = np.ascontiguousarray(x)
    h, w = x.shape[:2]
    if code in SWAP:
        scn, dcn, swap, _ = SWAP[code]
        out = np.empty((h, w, dcn), np.uint8)
        order = np.array([2, 1, 0] if swap else [0, 1, 2], np.int64)
        _swap_u8(x, order, scn == 4, out)
        return out
    if code in GRAY_FROM:
        out = np.empty((h, w, 1), np.uint8)
        _gray_u8(x, GRAY_FROM[code][1], out)
        return out
    if code in GRAY_TO:
        out = np.empty((h, w, GRAY_TO[code]), np.uint8)
        _gray2bgr_u8(x, out)
        return out
    raise ValueError(f"no kernel for cvtColor code {code}")


# ----------------------------------------------------------------------------- separable filters
@nb.njit(**_JIT)
def _sep_rows_u8(src, xidx, kx, const_border, tmp):
    """Horizontal pass: tmp[y, x, c] = sum_j kx[j] * src[y, xidx[x + j], c] for every source row."""
    h, w, c = tmp.shape
    nk = kx.shape[0]
    for y in nb.prange(h):
        for x in range(w):
            for k in range(c):
                acc = np.float32(0.0)
                for j in range(nk):
                    xi = xidx[x + j]
                    if xi >= 0:
                        acc += kx[j] * np.float32(src[y, xi, k])
                tmp[y, x, k] = acc


@nb.njit(**_JIT)
def _sep_cols_u8(tmp, yidx, ky, delta, out):
    h, w, c = out.shape
    nk = ky.shape[0]
    for y in nb.prange(h):
        for x in range(w):
            for k in range(c):
                acc = np.float32(0.0)
                for i in range(nk):
                    yi = yidx[y + i]
                    if yi >= 0:
                        acc += ky[i] * tmp[yi, x, k]
                v = np.rint(acc + delta)
                out[y, x, k] = np.uint8(min(max(v, 0.0), 255.0))


@nb.njit(**_JIT)
def _sep_cols_f32(tmp, yidx, ky, delta, out):
    h, w, c = out.shape
    nk = ky.shape[0]
    for y in nb.prange(h):
        for x in range(w):
            for k in range(c):
                acc = np.float32(0.0)
                for i in range(nk):
                    yi = yidx[y + i]
                    if yi >= 0:
                        acc += ky[i] * tmp[yi, x, k]
                out[y, x, k] = acc + delta


def sep_filter_u8(x: np.ndarray, kx, ky, anchor, border: int, delta: float, dtype: np.dtype) -> np.ndarray:
    """Separable correlation of uint8 HWC data in float32 (uint8 or float32 result)."""
    from ...ops.image_geometry import border_index
    h, w, c = x.shape
    ax, ay = anchor
    kx = np.asarray(kx, np.float32)
    ky = np.asarray(ky, np.float32)
    xidx = border_index(np.arange(-ax, w + len(kx) - 1 - ax), w, border).astype(np.int64)
    yidx = border_index(np.arange(-ay, h + len(ky) - 1 - ay), h, border).astype(np.int64)
    tmp = np.empty((h, w, c), np.float32)
    _sep_rows_u8(np.ascontiguousarray(x), xidx, kx, border == CV_BORDER_CONSTANT, tmp)
    out = np.empty((h, w, c), dtype)
    if dtype == np.uint8:
        _sep_cols_u8(tmp, yidx, ky, np.float32(delta), out)
    else:
        _sep_cols_f32(tmp, yidx, ky, np.float32(delta), out)
    return out
