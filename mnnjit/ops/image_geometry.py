"""Geometric image ops: ``resize_image``, ``warp_affine``, ``warp_perspective``, ``remap``.

All work on HWC images ([h, w, c]). ``resize_image`` attrs: ``size`` (out_h, out_w), ``interp``
(OpenCV INTER_* code), ``scale`` (the source/destination scale factors OpenCV derives: (sy, sx)).
uint8 INTER_LINEAR follows OpenCV's 11-bit fixed-point coefficients (exactly, including its SIMD
vertical pass), INTER_NEAREST its floor mapping, INTER_AREA its integer-factor box average.

Warps (attrs ``M``: the inverse map dst->src as a flat tuple, ``size``, ``interp``, ``border``
(OpenCV border code), ``value``): bilinear warps compute coordinates and weights in float32 as OpenCV 5's warp kernels do.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .registry import OpDef, register

INTER_NEAREST, INTER_LINEAR, INTER_CUBIC, INTER_AREA, INTER_LANCZOS4 = 0, 1, 2, 3, 4
INTER_LINEAR_EXACT, INTER_NEAREST_EXACT = 5, 6
# OpenCV's border codes (the cv front end maps MNN's codes to these)
CV_BORDER_CONSTANT, CV_BORDER_REPLICATE, CV_BORDER_REFLECT, CV_BORDER_WRAP, CV_BORDER_REFLECT_101 = 0, 1, 2, 3, 4
CV_BORDER_TRANSPARENT = 5


# ----------------------------------------------------------------------------- resize tap tables
def _cubic_coeffs(x: np.ndarray) -> np.ndarray:
    A = np.float32(-0.75)
    x = x.astype(np.float32)
    c0 = ((A * (x + 1) - 5 * A) * (x + 1) + 8 * A) * (x + 1) - 4 * A
    c1 = ((A + 2) * x - (A + 3)) * x * x + 1
    c2 = ((A + 2) * (1 - x) - (A + 3)) * (1 - x) * (1 - x) + 1
    c3 = 1 - c0 - c1 - c2
    return np.stack([c0, c1, c2, c3], -1).astype(np.float32)


def _lanczos_coeffs(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    s45, c45 = 0.70710678118654752440084436210485, 0.70710678118654752440084436210485
    cs = [(1, 0), (-s45, -c45), (0, 1), (s45, -c45), (-1, 0), (s45, c45), (0, -1), (-s45, c45)]
    out = np.zeros(x.shape + (8,), np.float64)
    small = x < 1.192092896e-07
    y0 = -(x + 3) * math.pi * 0.25
    s0, c0 = np.sin(y0), np.cos(y0)
    for i in range(8):
        y = -(x + 3 - i) * math.pi * 0.25
        out[..., i] = (cs[i][0] * s0 + cs[i][1] * c0) / np.where(small, 1, y * y)
    out /= out.sum(-1, keepdims=True)
    out[small] = 0
    out[small, 3] = 1
    return out.astype(np.float32)


def linear_taps(n_in: int, n_out: int, scale: float, interp: int) -> tuple[np.ndarray, np.ndarray]:
    """Source indices [n_out, k] and float weights [n_out, k] of OpenCV's linear/cubic/lanczos resize."""
    d = np.arange(n_out, dtype=np.float64)
    f = ((d + 0.5) * scale - 0.5).astype(np.float32)
    s = np.floor(f).astype(np.int64)
    f = (f - s).astype(np.float32)
    if interp == INTER_LINEAR:
        low = s < 0
        f[low], s[low] = 0, 0
        high = s >= n_in - 1
        f[high], s[high] = 0, n_in - 1
        w = np.stack([1 - f, f], -1).astype(np.float32)
        idx = np.stack([s, np.minimum(s + 1, n_in - 1)], -1)
        return idx, w
    if interp == INTER_CUBIC:
        w = _cubic_coeffs(f)
        idx = np.clip(s[:, None] + np.arange(-1, 3)[None, :], 0, n_in - 1)
        return idx, w
    w = _lanczos_coeffs(f)
    idx = np.clip(s[:, None] + np.arange(-3, 5)[None, :], 0, n_in - 1)
    return idx, w


def area_taps(n_in: int, n_out: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Source indices and weights of OpenCV's INTER_AREA downscale along one axis (box overlap)."""
    k = int(math.ceil(scale)) + 1
    idx = np.zeros((n_out, k), np.int64)
    w = np.zeros((n_out, k), np.float64)
    for d in range(n_out):  # per output index (a table, not per pixel)
        fs, fe = d * scale, (d + 1) * scale
        s0, s1 = int(math.ceil(fs)), int(math.floor(fe))
        s1 = min(s1, n_in)
        cellw = min(scale, n_in - fs)
        j = 0
        if s0 - fs > 1e-3:
            idx[d, j], w[d, j] = s0 - 1, (s0 - fs) / cellw
            j += 1
        for s in range(s0, s1):
            idx[d, j], w[d, j] = s, 1.0 / cellw
            j += 1
        if fe - s1 > 1e-3 and s1 < n_in:
            idx[d, j], w[d, j] = s1, min(min(fe - s1, 1.0), cellw) / cellw
            j += 1
        idx[d, j:] = idx[d, max(j - 1, 0)]
    return idx, w.astype(np.float32)


def area_up_taps(n_in: int, n_out: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """OpenCV's INTER_AREA when enlarging: linear with box-clipped weights."""
    inv = 1.0 / scale
    d = np.arange(n_out, dtype=np.float64)
    s = np.floor(d * scale).astype(np.int64)
    f = ((d + 1) - (s + 1) * inv).astype(np.float32)
    f = np.where(f <= 0, 0, f - np.floor(f)).astype(np.float32)
    low = s < 0
    s = np.where(low, 0, s)
    f = np.where(low, 0, f)
    high = s >= n_in - 1
    s = np.where(high, n_in - 1, s)
    f = np.where(high, 0, f).astype(np.float32)
    return np.stack([s, np.minimum(s + 1, n_in - 1)], -1), np.stack([1 - f, f], -1).astype(np.float32)


def _apply_taps(x: np.ndarray, idx: np.ndarray, w: np.ndarray, axis: int) -> np.ndarray:
    """sum_k w[:, k] * x.take(idx[:, k], axis) in float32."""
    shape = [1] * x.ndim
    shape[axis] = idx.shape[0]
    out = None
    for k in range(idx.shape[1]):
        term = np.take(x, idx[:, k], axis=axis).astype(np.float32) * w[:, k].reshape(shape)
        out = term if out is None else out + term
    return out


def _linear_u8(x: np.ndarray, oh: int, ow: int, sy: float, sx: float, taps=None) -> np.ndarray:
    """OpenCV's fixed-point bilinear resize of uint8 data (11-bit coefficients, SIMD rounding)."""
    h, w = x.shape[:2]
    if taps is None:
        yi, yw = linear_taps(h, oh, sy, INTER_LINEAR)
        xi, xw = linear_taps(w, ow, sx, INTER_LINEAR)
    else:
        (yi, yw), (xi, xw) = taps
    ax = np.rint(xw[:, 0] * 2048).astype(np.int32)
    ax = np.stack([ax, 2048 - ax], -1)
    by = np.rint(yw[:, 0] * 2048).astype(np.int32)
    by = np.stack([by, 2048 - by], -1)
    rows = np.unique(yi)
    sub = x[rows].astype(np.int32)
    hx = sub[:, xi[:, 0]] * ax[None, :, 0, None] + sub[:, xi[:, 1]] * ax[None, :, 1, None]
    pos = np.searchsorted(rows, yi)
    s0 = hx[pos[:, 0]] >> 4
    s1 = hx[pos[:, 1]] >> 4
    out = (((s0 * by[:, 0, None, None]) >> 16) + ((s1 * by[:, 1, None, None]) >> 16) + 2) >> 2
    return np.clip(out, 0, 255).astype(np.uint8)


def _cast_out(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype == np.uint8:
        return np.clip(np.rint(v), 0, 255).astype(np.uint8)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.clip(np.rint(v), info.min, info.max).astype(dtype)
    return v.astype(dtype)


def _area_whole_blocks(x: np.ndarray, oh: int, ow: int, isy: int, isx: int) -> np.ndarray:
    """uint8 INTER_AREA by integer factors where every block lies inside ``x`` (numpy)."""
    blk = x.reshape(oh, isy, ow, isx, x.shape[2]).astype(np.int32).sum((1, 3))
    if isx * isy == 4:  # OpenCV's 2x2 fast path: (sum + 2) >> 2
        return ((blk + 2) >> 2).astype(np.uint8)
    return _cast_out(blk.astype(np.float32) * np.float32(1.0 / (isx * isy)), x.dtype)


def resize_area_int(x: np.ndarray, oh: int, ow: int, isy: int, isx: int, whole_blocks) -> np.ndarray:
    """uint8 INTER_AREA by integer factors ``isy``, ``isx``: ``whole_blocks(x_crop, rows, cols, isy,
    isx)`` computes the cells whose blocks lie inside the image; a block the image edge cuts (fx =
    0.5 on 7 rows) is the mean of its pixels inside, in float32, rounded to even (as OpenCV's
    fast area path; checked on 3259 cut blocks)."""
    h, w, c = x.shape
    fh, fw = min(oh, h // isy), min(ow, w // isx)
    if (fh, fw) == (oh, ow):
        return whole_blocks(x[: oh * isy, : ow * isx], oh, ow, isy, isx)
    out = np.empty((oh, ow, c), np.uint8)
    if fh and fw:
        out[:fh, :fw] = whole_blocks(x[: fh * isy, : fw * isx], fh, fw, isy, isx)
    for i in range(oh):
        rows = x[i * isy: min(h, (i + 1) * isy)]
        for j in range(fw if i < fh else 0, ow):
            blk = rows[:, j * isx: min(w, (j + 1) * isx)]
            total = blk.astype(np.int64).sum((0, 1)).astype(np.float32)
            out[i, j] = np.clip(np.rint(total / np.float32(blk.shape[0] * blk.shape[1])), 0, 255)
    return out


def resize_plan(h: int, w: int, oh: int, ow: int, interp: int, sy: float, sx: float, dtype: np.dtype) -> tuple:
    """How cv2.resize computes this case: ("nearest", yi, xi), ("area_int", isy, isx), ("linear_u8", taps),
    ("int_taps", yi, by, xi, ax) with 11-bit integer weights, or ("float_taps", yi, yw, xi, xw)."""
    if interp in (INTER_NEAREST, INTER_NEAREST_EXACT):
        if interp == INTER_NEAREST:
            yi = np.minimum(np.floor(np.arange(oh) * sy).astype(np.int64), h - 1)
            xi = np.minimum(np.floor(np.arange(ow) * sx).astype(np.int64), w - 1)
        else:  # pixel-centre nearest (OpenCV's bit-exact variant may pick the neighbour at exact ties)
            yi = np.minimum(np.floor((np.arange(oh) + 0.5) * sy).astype(np.int64), h - 1)
            xi = np.minimum(np.floor((np.arange(ow) + 0.5) * sx).astype(np.int64), w - 1)
        return ("nearest", yi, xi)
    u8 = np.dtype(dtype) == np.uint8
    if interp == INTER_AREA:
        isx, isy = round(sx), round(sy)
        if sx >= 1 and sy >= 1 and abs(sx - isx) < 1e-9 and abs(sy - isy) < 1e-9 and u8:
            return ("area_int", isy, isx)
        if sx >= 1 and sy >= 1:
            return ("float_taps",) + area_taps(h, oh, sy) + area_taps(w, ow, sx)
        # enlarging along any axis: OpenCV runs its linear resize with "area" coefficients on both axes
        taps = (area_up_taps(h, oh, sy), area_up_taps(w, ow, sx))
        if u8:
            return ("linear_u8", taps)
        return ("float_taps",) + taps[0] + taps[1]
    if interp in (INTER_LINEAR, INTER_LINEAR_EXACT) and u8:
        return ("linear_u8", None)
    if interp not in (INTER_LINEAR, INTER_LINEAR_EXACT, INTER_CUBIC, INTER_LANCZOS4):
        raise ValueError(f"resize: unknown interpolation {interp}")
    kind = INTER_LINEAR if interp == INTER_LINEAR_EXACT else interp
    yi, yw = linear_taps(h, oh, sy, kind)
    xi, xw = linear_taps(w, ow, sx, kind)
    if u8:  # cubic / lanczos: 11-bit integer weights, 22-bit descale
        return ("int_taps", yi, np.rint(yw * 2048).astype(np.int64), xi, np.rint(xw * 2048).astype(np.int64))
    return ("float_taps", yi, yw, xi, xw)


def resize_ref(x: np.ndarray, oh: int, ow: int, interp: int, sy: float, sx: float) -> np.ndarray:
    """cv2.resize of an HWC image to (oh, ow) with source/destination scales (sy, sx) (numpy reference)."""
    h, w = x.shape[:2]
    plan = resize_plan(h, w, oh, ow, interp, sy, sx, x.dtype)
    kind = plan[0]
    if kind == "nearest":
        return x[plan[1]][:, plan[2]]
    if kind == "area_int":
        return resize_area_int(x, oh, ow, plan[1], plan[2], _area_whole_blocks)
    if kind == "linear_u8":
        return _linear_u8(x, oh, ow, sy, sx, plan[1])
    if kind == "int_taps":
        yi, by, xi, ax = plan[1:]
        hx = sum(x[:, xi[:, k]].astype(np.int64) * ax[None, :, k, None] for k in range(xi.shape[1]))
        v = sum(hx[yi[:, k]] * by[:, k, None, None] for k in range(yi.shape[1]))
        return np.clip((v + (1 << 21)) >> 22, 0, 255).astype(np.uint8)
    yi, yw, xi, xw = plan[1:]
    return _cast_out(_apply_taps(_apply_taps(x, yi, yw, 0), xi, xw, 1), x.dtype)


def _resize_infer(inputs, attrs):
    x = inputs[0]
    oh, ow = attrs["size"]
    return (oh, ow) + tuple(x.shape[2:]), x.dtype


def _resize_op(xs, attrs):
    oh, ow = attrs["size"]
    sy, sx = attrs["scale"]
    return resize_ref(xs[0], oh, ow, attrs["interp"], sy, sx)


register(OpDef("resize_image", "opaque", _resize_infer, _resize_op, mnn_type="ImageProcess",
               doc="cv2.resize of an HWC image"))


# ----------------------------------------------------------------------------- border handling
def border_index(i: np.ndarray, n: int, border: int) -> np.ndarray:
    """OpenCV's borderInterpolate for an index array (-1 where BORDER_CONSTANT falls outside)."""
    i = np.asarray(i, dtype=np.int64)
    if border == CV_BORDER_CONSTANT or border == CV_BORDER_TRANSPARENT:
        return np.where((i >= 0) & (i < n), i, -1)
    if border == CV_BORDER_REPLICATE:
        return np.clip(i, 0, n - 1)
    if border == CV_BORDER_WRAP:
        return np.mod(i, n)
    if n == 1:
        return np.zeros_like(i)
    if border == CV_BORDER_REFLECT:
        period = 2 * n
        m = np.mod(i, period)
        return np.where(m < n, m, period - 1 - m)
    if border == CV_BORDER_REFLECT_101:
        period = 2 * n - 2
        m = np.mod(i, period)
        return np.where(m < n, m, period - m)
    raise ValueError(f"unknown border type {border}")


def border_value(value, c: int) -> list:
    """The per-channel border value of OpenCV's Scalar for ``c`` channels: beyond 4 channels it repeats."""
    v = list(value)
    if len(v) < c:
        v4 = (v + [0.0] * 4)[:4]
        v = [v4[i % 4] for i in range(c)]
    return v[:c]


def _sample(x: np.ndarray, yi: np.ndarray, xi: np.ndarray, border: int, value: tuple) -> np.ndarray:
    """x[yi, xi] with OpenCV border handling; [.., c] float32 result."""
    h, w, c = x.shape
    by = border_index(yi, h, border)
    bx = border_index(xi, w, border)
    out = x[np.maximum(by, 0), np.maximum(bx, 0)].astype(np.float32)
    if border in (CV_BORDER_CONSTANT, CV_BORDER_TRANSPARENT):
        outside = (by < 0) | (bx < 0)
        val = np.array(border_value(value, c), np.float32)
        out = np.where(outside[..., None], val, out)
    return out


@functools.lru_cache(maxsize=4)
def remap_int_table(interp: int) -> np.ndarray:
    """OpenCV's 15-bit 2-D interpolation table for 1/32-pixel fractions: [32*32, ks*ks] int64, each row
    rounded from the float products and corrected to sum to 2^15 at its largest/smallest central weight."""
    ks = 4 if interp == INTER_CUBIC else 8
    f = np.arange(32, dtype=np.float32) / np.float32(32)
    k1 = _cubic_coeffs(f) if ks == 4 else _lanczos_coeffs(f)
    tab = (k1[:, None, :, None] * k1[None, :, None, :]).astype(np.float32)  # [fy, fx, ky, kx]
    itab = np.clip(np.rint(tab.astype(np.float64) * 32768), -32768, 32767).astype(np.int64).reshape(1024, ks, ks)
    c = ks // 2
    for row in itab:  # a 1024-entry table, built once
        diff = int(row.sum()) - 32768
        if diff:
            blk = row[c:c + 2, c:c + 2]
            if diff < 0:
                a, b = np.unravel_index(int(np.argmax(blk)), blk.shape)
            else:
                a, b = np.unravel_index(int(np.argmin(blk)), blk.shape)
            row[c + a, c + b] -= diff
    return itab.reshape(1024, ks * ks)


def remap_ref(x: np.ndarray, mx: np.ndarray, my: np.ndarray, interp: int, border: int,
              value: tuple, fixed: tuple | None = None) -> np.ndarray:
    """Sample ``x`` at float coordinates (mx, my) as cv2.remap does: nearest rounds, bilinear lerps in
    float32 (OpenCV 5's warp kernels), cubic/Lanczos use 1/32-pixel tables with 15-bit uint8 weights."""
    if interp == INTER_NEAREST:
        xi = np.rint(mx).astype(np.int64)
        yi = np.rint(my).astype(np.int64)
        out = _sample(x, yi, xi, border, value)
        return _cast_out(out, x.dtype)
    if interp == INTER_LINEAR and fixed is None:
        return _cast_out(bilinear_float(x, mx, my, border, value), x.dtype)
    if interp in (INTER_CUBIC, INTER_LANCZOS4):
        ks = 4 if interp == INTER_CUBIC else 8
        off = 1 if interp == INTER_CUBIC else 3
    else:
        ks, off = 2, 0
    if fixed is not None:  # coordinates already in 1/32 pixels (warpAffine's fixed-point mapping)
        ix, iy = fixed
    else:
        ix = np.rint(mx.astype(np.float64) * 32).astype(np.int64)
        iy = np.rint(my.astype(np.float64) * 32).astype(np.int64)
    x0, y0 = ix >> 5, iy >> 5
    fx = (ix & 31).astype(np.float32) / 32
    fy = (iy & 31).astype(np.float32) / 32
    if ks == 2:
        wx = np.stack([1 - fx, fx], -1)
        wy = np.stack([1 - fy, fy], -1)
    elif ks == 4:
        wx, wy = _cubic_coeffs(fx), _cubic_coeffs(fy)
    else:
        wx, wy = _lanczos_coeffs(fx), _lanczos_coeffs(fy)
    if x.dtype == np.uint8 and ks == 2:  # bilinear 15-bit weights: products of 1/32 steps, exact
        fxi, fyi = ix & 31, iy & 31
        acc = np.zeros(ix.shape + (x.shape[2],), np.int64)
        for a, wa in ((0, 32 - fyi), (1, fyi)):
            for b, wb in ((0, 32 - fxi), (1, fxi)):
                acc += _sample(x, y0 + a, x0 + b, border, value).astype(np.int64) * (wa * wb * 32)[..., None]
        return np.clip((acc + (1 << 14)) >> 15, 0, 255).astype(np.uint8)
    if x.dtype == np.uint8:
        # 15-bit weights (INTER_REMAP_COEF_BITS) from OpenCV's corrected table
        wts = remap_int_table(interp)[(iy & 31) * 32 + (ix & 31)].reshape(ix.shape + (ks, ks))
        acc = np.zeros(ix.shape + (x.shape[2],), np.int64)
        for a in range(ks):
            for b in range(ks):
                s = _sample(x, y0 - off + a, x0 - off + b, border, value).astype(np.int64)
                acc += s * wts[..., a, b, None]
        return np.clip((acc + (1 << 14)) >> 15, 0, 255).astype(np.uint8)
    acc = np.zeros(ix.shape + (x.shape[2],), np.float32)
    for a in range(ks):
        for b in range(ks):
            s = _sample(x, y0 - off + a, x0 - off + b, border, value)
            acc += s * (wy[..., a] * wx[..., b])[..., None]
    return _cast_out(acc, x.dtype)


def bilinear_float(x: np.ndarray, mx: np.ndarray, my: np.ndarray, border: int, value: tuple) -> np.ndarray:
    """Bilinear sampling in float32 as OpenCV 5's warp kernels: lerp along x, then along y."""
    mx = mx.astype(np.float32)
    my = my.astype(np.float32)
    x0 = np.floor(mx)
    y0 = np.floor(my)
    ax = (mx - x0)[..., None]
    ay = (my - y0)[..., None]
    x0 = x0.astype(np.int64)
    y0 = y0.astype(np.int64)
    p00 = _sample(x, y0, x0, border, value)
    p01 = _sample(x, y0, x0 + 1, border, value)
    p10 = _sample(x, y0 + 1, x0, border, value)
    p11 = _sample(x, y0 + 1, x0 + 1, border, value)
    v0 = p00 + ax * (p01 - p00)
    v1 = p10 + ax * (p11 - p10)
    return v0 + ay * (v1 - v0)


def cubic_float(x: np.ndarray, mx: np.ndarray, my: np.ndarray, border: int, value: tuple) -> np.ndarray:
    """Bicubic sampling in float32 with unquantised fractions, rows first (OpenCV 5's warp kernels)."""
    mx = mx.astype(np.float32)
    my = my.astype(np.float32)
    x0 = np.floor(mx)
    y0 = np.floor(my)
    wx = _cubic_coeffs((mx - x0).astype(np.float32))
    wy = _cubic_coeffs((my - y0).astype(np.float32))
    x0 = x0.astype(np.int64)
    y0 = y0.astype(np.int64)
    acc = np.zeros(mx.shape + (x.shape[2],), np.float32)
    for a in range(4):
        row = np.zeros_like(acc)
        for b in range(4):
            row += _sample(x, y0 - 1 + a, x0 - 1 + b, border, value) * wx[..., b, None]
        acc += row * wy[..., a, None]
    return acc


def affine_maps(M: tuple, oh: int, ow: int) -> tuple[np.ndarray, np.ndarray]:
    """Source coordinates of every destination pixel under the inverse affine map M (2x3, flat)."""
    m = np.asarray(M, np.float64).reshape(2, 3)
    xs = np.arange(ow, dtype=np.float32)[None, :]
    ys = np.arange(oh, dtype=np.float64)[:, None]
    mx = np.float32(m[0, 0]) * xs + (ys * m[0, 1] + m[0, 2]).astype(np.float32)
    my = np.float32(m[1, 0]) * xs + (ys * m[1, 1] + m[1, 2]).astype(np.float32)
    return mx, my


def perspective_maps(M: tuple, oh: int, ow: int) -> tuple[np.ndarray, np.ndarray]:
    """Source coordinates under the inverse homography M (3x3, flat)."""
    m = np.asarray(M, np.float64).reshape(3, 3)
    xs = np.arange(ow, dtype=np.float32)[None, :]
    ys = np.arange(oh, dtype=np.float64)[:, None]
    with np.errstate(all="ignore"):  # float32 as OpenCV 5's warp kernels
        wv = np.float32(m[2, 0]) * xs + (ys * m[2, 1] + m[2, 2]).astype(np.float32)
        mx = (np.float32(m[0, 0]) * xs + (ys * m[0, 1] + m[0, 2]).astype(np.float32)) / wv
        my = (np.float32(m[1, 0]) * xs + (ys * m[1, 1] + m[1, 2]).astype(np.float32)) / wv
    return mx, my


def _clamp_maps(mx, my):
    """Coordinates that are not finite or beyond 1e8 pixels become (-10, -10), as the Numba kernels do."""
    with np.errstate(invalid="ignore"):
        bad = ~((np.abs(mx) < 1e8) & (np.abs(my) < 1e8))
    if bad.any():
        mx = np.where(bad, -10, mx).astype(mx.dtype)
        my = np.where(bad, -10, my).astype(my.dtype)
    return mx, my


def _warp_infer(inputs, attrs):
    x = inputs[0]
    oh, ow = attrs["size"]
    return (oh, ow) + tuple(x.shape[2:]), x.dtype


def _warp_affine_op(xs, attrs):
    x = xs[0]
    oh, ow = attrs["size"]
    interp, border, value = attrs["interp"], attrs["border"], attrs["value"]
    if interp == INTER_LANCZOS4 or _legacy(x, interp):  # OpenCV's fixed-point warpAffine path
        return _fixed_warp(x, affine_fixed(attrs["M"], oh, ow, interp == INTER_NEAREST), interp, border, value)
    mx, my = _clamp_maps(*affine_maps(attrs["M"], oh, ow))
    if interp == INTER_CUBIC:
        return _cast_out(cubic_float(x, mx, my, border, value), x.dtype)
    return remap_ref(x, mx, my, interp, border, value)


_I32 = 2 ** 31


def _round_i32(v) -> np.ndarray:
    """saturate_cast<int>(double) as compiled for x86: nearest (ties to even); NaN, infinities and values
    out of the int range give INT_MIN."""
    v = np.asarray(v, np.float64)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(v) & (v > -_I32 - 0.5) & (v < _I32 - 0.5)
    return np.where(ok, np.rint(np.where(ok, v, 0.0)), -_I32).astype(np.int64)


def _wrap_i32(v: np.ndarray) -> np.ndarray:
    """Two's-complement int32 wrap-around of int64 sums."""
    return ((v + _I32) & 0xFFFFFFFF) - _I32


def affine_fixed(M: tuple, oh: int, ow: int, nearest: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """warpAffine's source coordinates in OpenCV's fixed-point path: row and column terms rounded to
    1/1024 pixel separately (int32, as OpenCV: non-finite terms become INT_MIN, sums wrap), plus half a
    step, then shifted down to 1/32 pixel (whole pixels when ``nearest``)."""
    m = np.asarray(M, np.float64)
    xs = np.arange(ow, dtype=np.float64)
    ys = np.arange(oh, dtype=np.float64)[:, None]
    with np.errstate(all="ignore"):
        ax, ay = _round_i32(m[0] * xs * 1024), _round_i32(m[3] * xs * 1024)
        x0, y0 = _round_i32((m[1] * ys + m[2]) * 1024), _round_i32((m[4] * ys + m[5]) * 1024)
    half, bits = (512, 10) if nearest else (16, 5)
    return _wrap_i32(_wrap_i32(x0 + half) + ax) >> bits, _wrap_i32(_wrap_i32(y0 + half) + ay) >> bits


def perspective_fixed(M: tuple, oh: int, ow: int, nearest: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """warpPerspective's source coordinates in OpenCV's fixed-point path: in double, clamped to the int
    range (NaN to INT_MAX, as std::min/std::max treat it), rounded, in 1/32 pixel (whole pixels when
    ``nearest``); a zero denominator maps to 0."""
    m = np.asarray(M, np.float64).reshape(9)
    xs = np.arange(ow, dtype=np.float64)
    ys = np.arange(oh, dtype=np.float64)[:, None]
    with np.errstate(all="ignore"):
        w = (m[7] * ys + m[8]) + m[6] * xs
        w = np.where(w != 0, (1.0 if nearest else 32.0) / np.where(w != 0, w, 1.0), 0.0)
        out = []
        for v in ((m[1] * ys + m[2]) + m[0] * xs, (m[4] * ys + m[5]) + m[3] * xs):
            f = v * w
            f = np.where(f < _I32 - 1, f, _I32 - 1)  # NaN fails the test: INT_MAX
            f = np.where(-_I32 < f, f, -_I32)
            out.append(np.rint(f).astype(np.int64))
    return out[0], out[1]


def _legacy(x: np.ndarray, interp: int) -> bool:
    """OpenCV 5's float32 warp kernels take nearest and bilinear only for 1, 3 and 4 channels (bicubic for
    any): other channel counts go through its older fixed-point path."""
    return interp in (INTER_NEAREST, INTER_LINEAR) and x.shape[2] not in (1, 3, 4)


def _fixed_warp(x, coords, interp, border, value):
    if interp == INTER_NEAREST:
        return _cast_out(_sample(x, coords[1], coords[0], border, value), x.dtype)
    return remap_ref(x, None, None, interp, border, value, coords)


def _warp_perspective_op(xs, attrs):
    x = xs[0]
    oh, ow = attrs["size"]
    if _legacy(x, attrs["interp"]):
        coords = perspective_fixed(attrs["M"], oh, ow, attrs["interp"] == INTER_NEAREST)
        return _fixed_warp(x, coords, attrs["interp"], attrs["border"], attrs["value"])
    mx, my = _clamp_maps(*perspective_maps(attrs["M"], oh, ow))
    if attrs["interp"] == INTER_CUBIC:
        return _cast_out(cubic_float(x, mx, my, attrs["border"], attrs["value"]), x.dtype)
    return remap_ref(x, mx, my, attrs["interp"], attrs["border"], attrs["value"])


register(OpDef("warp_affine", "opaque", _warp_infer, _warp_affine_op, mnn_type="ImageProcess",
               doc="cv2.warpAffine with an inverse map"))
register(OpDef("warp_perspective", "opaque", _warp_infer, _warp_perspective_op, mnn_type="ImageProcess",
               doc="cv2.warpPerspective with an inverse map"))


def _remap_infer(inputs, attrs):
    x, mx = inputs[0], inputs[1]
    return tuple(mx.shape[:2]) + tuple(x.shape[2:]), x.dtype


def _remap_op(xs, attrs):
    x, mx, my = xs
    mx, my = _clamp_maps(mx.astype(np.float64), my.astype(np.float64))
    return remap_ref(x, mx, my, attrs["interp"], attrs["border"], attrs["value"])


register(OpDef("remap", "opaque", _remap_infer, _remap_op, mnn_type="GridSample", doc="cv2.remap"))
