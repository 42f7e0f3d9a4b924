"""Colour conversion op ``cvt_color`` (attrs ``code``: an OpenCV/MNN COLOR_* code).

Inputs are HWC images ([h, w, c]); YUV 4:2:0 planar/semi-planar data is [h*3/2, w, 1]. The uint8
reference follows OpenCV's fixed-point arithmetic (14-bit luma/chroma coefficients, 12-bit XYZ and
HSV tables, BT.601 20-bit YUV 4:2:0 coefficients) so results equal cv2.cvtColor's (Lab/Luv within 1);
uint8 HSV/HLS follow the float32 code cv2 runs on x86-64 (IPP's for most _FULL codes), see "HSV / HLS".
float32 inputs use OpenCV's float formulas (HSV/HLS hue in degrees, values in [0, 1]).
"""
from __future__ import annotations

import functools

import numpy as np

from .._dtypes import F32, U8
from .registry import OpDef, register

# ----------------------------------------------------------------------------- code tables
# code -> (kind, params)
SWAP = {0: (3, 4, False, True), 1: (4, 3, False, False), 2: (3, 4, True, True), 3: (4, 3, True, False),
        4: (3, 3, True, False), 5: (4, 4, True, False)}  # (scn, dcn, swap_rb, add_alpha)
GRAY_FROM = {6: (3, 0), 7: (3, 2), 10: (4, 0), 11: (4, 2)}  # code -> (scn, blue index)
GRAY_TO = {8: 3, 9: 4}
TO_565 = {12: (3, 0, 6), 13: (3, 2, 6), 16: (4, 0, 6), 17: (4, 2, 6),
          22: (3, 0, 5), 23: (3, 2, 5), 26: (4, 0, 5), 27: (4, 2, 5)}  # (scn, bidx, green bits)
FROM_565 = {14: (3, 0, 6), 15: (3, 2, 6), 18: (4, 0, 6), 19: (4, 2, 6),
            24: (3, 0, 5), 25: (3, 2, 5), 28: (4, 0, 5), 29: (4, 2, 5)}  # (dcn, bidx, green bits)
GRAY_565 = {21: 6, 31: 5}
TO_565_GRAY = {20: 6, 30: 5}
FWD3 = {32: ("xyz", 0), 33: ("xyz", 2), 36: ("ycrcb", 0), 37: ("ycrcb", 2), 82: ("yuv", 0), 83: ("yuv", 2),
        40: ("hsv", 0), 41: ("hsv", 2), 66: ("hsv_full", 0), 67: ("hsv_full", 2),
        52: ("hls", 0), 53: ("hls", 2), 68: ("hls_full", 0), 69: ("hls_full", 2),
        44: ("lab", 0), 45: ("lab", 2), 74: ("llab", 0), 75: ("llab", 2),
        50: ("luv", 0), 51: ("luv", 2), 76: ("lluv", 0), 77: ("lluv", 2)}
INV3 = {34: ("xyz", 0), 35: ("xyz", 2), 38: ("ycrcb", 0), 39: ("ycrcb", 2), 84: ("yuv", 0), 85: ("yuv", 2),
        54: ("hsv", 0), 55: ("hsv", 2), 70: ("hsv_full", 0), 71: ("hsv_full", 2),
        60: ("hls", 0), 61: ("hls", 2), 72: ("hls_full", 0), 73: ("hls_full", 2),
        56: ("lab", 0), 57: ("lab", 2), 78: ("llab", 0), 79: ("llab", 2),
        58: ("luv", 0), 59: ("luv", 2), 80: ("lluv", 0), 81: ("lluv", 2)}
# YUV 4:2:0 -> colour: code -> (dcn, bidx, layout, u-first)
YUV420_TO = {90: (3, 2, "sp", True), 91: (3, 0, "sp", True), 92: (3, 2, "sp", False), 93: (3, 0, "sp", False),
             94: (4, 2, "sp", True), 95: (4, 0, "sp", True), 96: (4, 2, "sp", False), 97: (4, 0, "sp", False),
             98: (3, 2, "p", False), 99: (3, 0, "p", False), 100: (3, 2, "p", True), 101: (3, 0, "p", True),
             102: (4, 2, "p", False), 103: (4, 0, "p", False), 104: (4, 2, "p", True), 105: (4, 0, "p", True)}
# YUV 4:2:2 packed -> colour: code -> (dcn, bidx, y offset, u offset, v offset) within a 4-byte macro pixel
YUV422_TO = {107: (3, 2, 1, 0, 2), 108: (3, 0, 1, 0, 2), 111: (4, 2, 1, 0, 2), 112: (4, 0, 1, 0, 2),
             115: (3, 2, 0, 1, 3), 116: (3, 0, 0, 1, 3), 117: (3, 2, 0, 3, 1), 118: (3, 0, 0, 3, 1),
             119: (4, 2, 0, 1, 3), 120: (4, 0, 0, 1, 3), 121: (4, 2, 0, 3, 1), 122: (4, 0, 0, 3, 1)}
YUV422_GRAY = {123: 1, 124: 0}
# colour -> YUV 4:2:0 planar: code -> (scn, bidx, u-first)
TO_YUV420 = {127: (3, 2, True), 128: (3, 0, True), 129: (4, 2, True), 130: (4, 0, True),
             131: (3, 2, False), 132: (3, 0, False), 133: (4, 2, False), 134: (4, 0, False)}
MRGBA = {125: True, 126: False}
YUV420_GRAY = 106

SUPPORTED = (set(SWAP) | set(GRAY_FROM) | set(GRAY_TO) | set(TO_565) | set(FROM_565) | set(GRAY_565)
             | set(TO_565_GRAY) | set(FWD3) | set(INV3) | set(YUV420_TO) | set(YUV422_TO) | set(YUV422_GRAY)
             | set(TO_YUV420) | set(MRGBA) | {YUV420_GRAY})


def expected_channels(code: int) -> tuple[int, ...]:
    """Channel counts the input of ``code`` may have."""
    if code in SWAP:
        return (SWAP[code][0],)
    if code in GRAY_FROM:
        return (GRAY_FROM[code][0],)
    if code in GRAY_TO or code in TO_565_GRAY or code == YUV420_GRAY or code in YUV420_TO:
        return (1,)
    if code in TO_565:
        return (TO_565[code][0],)
    if code in FROM_565 or code in GRAY_565 or code in YUV422_TO or code in YUV422_GRAY:
        return (2,)
    if code in FWD3 or code in INV3:
        return (3,)
    if code in TO_YUV420:
        return (TO_YUV420[code][0],)
    if code in MRGBA:
        return (4,)
    raise ValueError(f"cvtColor: unsupported conversion code {code}")


def output_shape(code: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Output [h, w, c] of ``code`` for an input of ``shape`` ([h, w, c])."""
    h, w = shape[0], shape[1]
    if code in SWAP:
        return (h, w, SWAP[code][1])
    if code in GRAY_FROM or code in GRAY_565 or code in YUV422_GRAY:
        return (h, w, 1)
    if code in GRAY_TO:
        return (h, w, GRAY_TO[code])
    if code in TO_565 or code in TO_565_GRAY:
        return (h, w, 2)
    if code in FROM_565:
        return (h, w, FROM_565[code][0])
    if code in FWD3 or code in INV3:
        return (h, w, 3)
    if code in YUV420_TO:
        return (h * 2 // 3, w, YUV420_TO[code][0])
    if code == YUV420_GRAY:
        return (h * 2 // 3, w, 1)
    if code in YUV422_TO:
        return (h, w, YUV422_TO[code][0])
    if code in TO_YUV420:
        return (h * 3 // 2, w, 1)
    if code in MRGBA:
        return (h, w, 4)
    raise ValueError(f"cvtColor: unsupported conversion code {code}")


# ----------------------------------------------------------------------------- helpers
def _descale(x: np.ndarray, n: int) -> np.ndarray:
    return (x + (1 << (n - 1))) >> n


def _sat8(x: np.ndarray) -> np.ndarray:
    return np.clip(x, 0, 255).astype(np.uint8)


def _round8(x: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


def _bgr(x: np.ndarray, bidx: int):
    """The blue, green and red planes (int32 for uint8 data, float32 otherwise)."""
    dt = np.int32 if x.dtype == np.uint8 else np.float32
    return x[..., bidx].astype(dt), x[..., 1].astype(dt), x[..., 2 - bidx].astype(dt)


def _stack_bgr(b, g, r, bidx: int, dcn: int, alpha) -> np.ndarray:
    chans = [b, g, r] if bidx == 0 else [r, g, b]
    if dcn == 4:
        chans.append(np.full_like(chans[0], alpha))
    return np.stack(chans, axis=-1)


#: OpenCV 5's fixed-point luma weights of B, G, R (15 bits; OpenCV 4 used 1868, 9617, 4899 >> 14: the
#: two differ by one in ~0.5 % of random pixels; these match cv2 5.0 on every pixel of 40000)
#: (``backends/cpu/image/kernels._gray_rows`` compiles them in and Numba's cache keys on that file only:
#: changing them needs that file touched too)
GRAY_B, GRAY_G, GRAY_R, GRAY_SHIFT = 3735, 19235, 9798, 15


def gray_u8(b, g, r) -> np.ndarray:
    """OpenCV's fixed-point luma: (B*3735 + G*19235 + R*9798 + 2^14) >> 15."""
    return ((b * GRAY_B + g * GRAY_G + r * GRAY_R + (1 << (GRAY_SHIFT - 1))) >> GRAY_SHIFT).astype(np.uint8)


def _gray(x: np.ndarray, bidx: int) -> np.ndarray:
    b, g, r = _bgr(x, bidx)
    if x.dtype == np.uint8:
        return gray_u8(b, g, r)[..., None]
    return (np.float32(0.114) * b + np.float32(0.587) * g + np.float32(0.299) * r).astype(x.dtype)[..., None]


# ---- XYZ / YCrCb / YUV
_XYZ = np.array([[0.412453, 0.357580, 0.180423], [0.212671, 0.715160, 0.072169], [0.019334, 0.119193, 0.950227]])
_XYZ_INV = np.array([[3.240479, -1.53715, -0.498535], [-0.969256, 1.875991, 0.041556],
                     [0.055648, -0.204043, 1.057311]])


def _to_xyz(x, bidx):
    b, g, r = _bgr(x, bidx)
    if x.dtype == np.uint8:
        c = np.rint(_XYZ * 4096).astype(np.int64)
        out = [_descale(r * int(c[i, 0]) + g * int(c[i, 1]) + b * int(c[i, 2]), 12) for i in range(3)]
        return np.stack([_sat8(o) for o in out], -1)
    c = _XYZ.astype(np.float32)
    return np.stack([r * c[i, 0] + g * c[i, 1] + b * c[i, 2] for i in range(3)], -1).astype(np.float32)


def _from_xyz(x, bidx):
    if x.dtype == np.uint8:
        X, Y, Z = (x[..., i].astype(np.int32) for i in range(3))
        c = np.rint(_XYZ_INV * 4096).astype(np.int64)
        b, g, r = (_sat8(_descale(X * int(c[i, 0]) + Y * int(c[i, 1]) + Z * int(c[i, 2]), 12)) for i in (2, 1, 0))
        return _stack_bgr(b, g, r, bidx, 3, 255)
    X, Y, Z = (x[..., i].astype(np.float32) for i in range(3))
    c = _XYZ_INV.astype(np.float32)
    b, g, r = (X * c[i, 0] + Y * c[i, 1] + Z * c[i, 2] for i in (2, 1, 0))
    return _stack_bgr(b, g, r, bidx, 3, 1).astype(np.float32)


def _to_ycc(x, bidx, yuv: bool):
    b, g, r = _bgr(x, bidx)
    cr_c, cb_c = (0.877, 0.492) if yuv else (0.713, 0.564)
    if x.dtype == np.uint8:
        y = _descale(b * 1868 + g * 9617 + r * 4899, 14)
        cr = _descale((r - y) * int(round(cr_c * 16384)) + (128 << 14), 14)
        cb = _descale((b - y) * int(round(cb_c * 16384)) + (128 << 14), 14)
        first, second = (cb, cr) if yuv else (cr, cb)
        return np.stack([_sat8(y), _sat8(first), _sat8(second)], -1)
    y = np.float32(0.114) * b + np.float32(0.587) * g + np.float32(0.299) * r
    cr = (r - y) * np.float32(cr_c) + np.float32(0.5)
    cb = (b - y) * np.float32(cb_c) + np.float32(0.5)
    first, second = (cb, cr) if yuv else (cr, cb)
    return np.stack([y, first, second], -1).astype(np.float32)


def _from_ycc(x, bidx, yuv: bool):
    if yuv:
        cf = (2.032, -0.395, -0.581, 1.140)  # B<-U, G<-U, G<-V, R<-V
    else:
        cf = (1.773, -0.344, -0.714, 1.403)  # B<-Cb, G<-Cb, G<-Cr, R<-Cr
    if x.dtype == np.uint8:
        y = x[..., 0].astype(np.int32)
        if yuv:
            cb, cr = x[..., 1].astype(np.int32) - 128, x[..., 2].astype(np.int32) - 128
        else:
            cr, cb = x[..., 1].astype(np.int32) - 128, x[..., 2].astype(np.int32) - 128
        c = [int(round(v * 16384)) for v in cf]
        b = _sat8(y + _descale(cb * c[0], 14))
        g = _sat8(y + _descale(cb * c[1] + cr * c[2], 14))
        r = _sat8(y + _descale(cr * c[3], 14))
        return _stack_bgr(b, g, r, bidx, 3, 255)
    y = x[..., 0].astype(np.float32)
    if yuv:
        cb, cr = x[..., 1] - np.float32(0.5), x[..., 2] - np.float32(0.5)
    else:
        cr, cb = x[..., 1] - np.float32(0.5), x[..., 2] - np.float32(0.5)
    c = [np.float32(v) for v in cf]
    return _stack_bgr(y + cb * c[0], y + cb * c[1] + cr * c[2], y + cr * c[3], bidx, 3, 1).astype(np.float32)


# ---- HSV / HLS
# uint8 conversions reproduce what cv2 (x86-64 wheels, AVX2) runs: OpenCV's own code for the 180-degree
# hue codes and Intel IPP (through OpenCV's IPP HAL) for the _FULL codes other than RGB->HSV. Both
# vectorise along a row and finish its last pixels (``w % 32`` for OpenCV's HSV->RGB, ``w % 8``
# otherwise) in scalar code that rounds differently, so those pixels are computed apart (``tail``).
# Checked on all 2^24 input triples (tests/cv/test_cv_color_exact.py): exact, except HSV_FULL->BGR
# (42 inputs one off in one channel: values within ~1e-7 of x.5 that IPP's float32 operation order
# rounds the other way) and HLS_FULL->BGR row tails (~0.6 % one off). Assumes AVX2 (SSE4.1-only
# CPUs have 4-lane loops, hence other tails) and cv2 built with IPP (the pip wheels); without IPP
# (ARM, ``cv2.ipp.setUseIPP(False)``) cv2's _FULL codes use OpenCV's own code, not followed here.
_SECTORS = np.array([[1, 3, 0], [1, 0, 2], [3, 0, 1], [0, 2, 1], [0, 1, 3], [2, 1, 0]])
_f32 = np.float32


def _hsv_tables(hrange: int):
    i = np.arange(256, dtype=np.float64)
    with np.errstate(divide="ignore"):
        sdiv = np.where(i > 0, np.rint((255 << 12) / np.maximum(i, 1)), 0).astype(np.int64)
        hdiv = np.where(i > 0, np.rint((hrange << 12) / (6.0 * np.maximum(i, 1))), 0).astype(np.int64)
    return sdiv, hdiv


def _fma32(a, b, c) -> np.ndarray:
    """float32 ``a * b + c`` rounded once (a fused multiply-add), evaluated in float64: the product of
    two float32 values is exact there, and the sum's double rounding changes no uint8 result of the
    conversions below (checked against cv2 on every input)."""
    return (np.asarray(a, np.float64) * np.asarray(b, np.float64) + c).astype(np.float32)


def _by_tail(fn, x, step: int) -> np.ndarray:
    """``fn(part, tail)`` on the columns of ``x`` [h, w, c] that a row's vector loop covers (``tail``
    False) and on its last ``w % step`` columns (``tail`` True), joined again."""
    n = x.shape[1] - x.shape[1] % step
    parts = [fn(p, t) for p, t in ((x[:, :n], False), (x[:, n:], True)) if p.shape[1]]
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)


def _trunc8(x: np.ndarray) -> np.ndarray:
    return np.clip(np.trunc(x), 0, 255).astype(np.uint8)


def _to_hsv(x, bidx, full: bool):
    b, g, r = _bgr(x, bidx)
    if x.dtype == np.uint8:
        hrange = 256 if full else 180
        sdiv, hdiv = _hsv_tables(hrange)
        v = np.maximum(np.maximum(b, g), r)
        vmin = np.minimum(np.minimum(b, g), r)
        diff = v - vmin
        s = (diff * sdiv[v] + (1 << 11)) >> 12
        h = np.where(v == r, g - b, np.where(v == g, b - r + 2 * diff, r - g + 4 * diff))
        h = (h * hdiv[diff] + (1 << 11)) >> 12
        h = np.where(h < 0, h + hrange, h)
        return np.stack([h.astype(np.uint8), s.astype(np.uint8), v.astype(np.uint8)], -1)
    v = np.maximum(np.maximum(b, g), r)
    vmin = np.minimum(np.minimum(b, g), r)
    diff = v - vmin
    eps = np.float32(np.finfo(np.float32).eps)
    s = diff / (np.abs(v) + eps)
    d = np.float32(60.0) / (diff + eps)
    h = np.where(v == r, (g - b) * d, np.where(v == g, (b - r) * d + np.float32(120), (r - g) * d + np.float32(240)))
    h = np.where(h < 0, h + np.float32(360), h)   # float images: hue in [0, 360) with or without _FULL
    return np.stack([h, s, v], -1).astype(np.float32)


def _sector_rgb(h6, tab, bidx, dcn, alpha):
    sector = np.floor(h6).astype(np.int64) % 6
    idx = _SECTORS[sector]
    tab = np.stack(tab, -1)
    b = np.take_along_axis(tab, idx[..., 0:1], -1)[..., 0]
    g = np.take_along_axis(tab, idx[..., 1:2], -1)[..., 0]
    r = np.take_along_axis(tab, idx[..., 2:3], -1)[..., 0]
    return b, g, r


def _hue6(h, hscale):
    h = h * hscale
    h = np.where(h < 0, h + 6, np.where(h >= 6, h - 6, h))
    return h


def _from_hsv(x, bidx, full: bool):
    if x.dtype == np.uint8:
        if full:
            return _from_hsv_u8(x, bidx, True, False)
        return _by_tail(lambda part, tail: _from_hsv_u8(part, bidx, False, tail), x, 32)
    h = x[..., 0].astype(np.float32)
    s = x[..., 1].astype(np.float32)
    v = x[..., 2].astype(np.float32)
    h6 = _hue6(h, np.float32(6.0 / 360.0))
    f = h6 - np.floor(h6)
    tab = [v, v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))]
    b, g, r = _sector_rgb(h6, tab, bidx, 3, 1)
    zero = s == 0
    b, g, r = (np.where(zero, v, c) for c in (b, g, r))
    return _stack_bgr(b, g, r, bidx, 3, 1).astype(np.float32)


def _from_hsv_u8(x, bidx, full: bool, tail: bool):
    """uint8 HSV->RGB as cv2 computes it: saturation / 255 and value / 255 in float32, the colour times
    255. IPP (_FULL) takes the hue through degrees and rounds to nearest; OpenCV (hue range 180) uses
    fused multiply-adds and truncates, except in the scalar ``tail`` of a row, which rounds."""
    h = x[..., 0].astype(np.float32)
    s = x[..., 1].astype(np.float32) * _f32(1 / 255.0)
    v = x[..., 2].astype(np.float32) * _f32(1 / 255.0)
    h6 = h * _f32(360 / 255.0) * _f32(1 / 60.0) if full else h * _f32(6 / 180.0)
    f = h6 - np.floor(h6)
    one = _f32(1)
    if full:
        tab = [v, v * (one - s), v * (one - s * f), v * (one - s * (one - f))]
    else:
        tab = [v, v * (one - s), v * _fma32(-s, f, one), v * _fma32(-s, one - f, one)]
    b, g, r = _sector_rgb(h6, tab, bidx, 3, 1)
    out = _stack_bgr(b, g, r, bidx, 3, 1) * _f32(255)
    return _round8(out) if full or tail else _trunc8(out)


def _to_hls(x, bidx, full: bool):
    if x.dtype == np.uint8:
        fn = _to_hls_ipp if full else _to_hls_u8
        return _by_tail(lambda part, tail: fn(part, bidx, tail), x, 8)
    b, g, r = _bgr(x, bidx)
    vmax = np.maximum(np.maximum(b, g), r)
    vmin = np.minimum(np.minimum(b, g), r)
    diff = vmax - vmin
    l = (vmax + vmin) * np.float32(0.5)
    ok = diff > np.finfo(np.float32).eps
    with np.errstate(all="ignore"):
        s = np.where(l < 0.5, diff / (vmax + vmin), diff / (np.float32(2) - vmax - vmin))
        d = np.float32(60.0) / diff
        h = np.where(vmax == r, (g - b) * d, np.where(vmax == g, (b - r) * d + np.float32(120),
                                                      (r - g) * d + np.float32(240)))
    h = np.where(h < 0, h + np.float32(360), h)
    h = np.where(ok, h, 0).astype(np.float32)
    s = np.where(ok, s, 0).astype(np.float32)
    return np.stack([h, l, s], -1).astype(np.float32)


def _max_sector(b, g, r):
    """max, min, the hue's numerator and its offset in degrees (0 / 120 / 240 for a red / green / blue
    maximum, red winning ties, then green)."""
    vmax = np.maximum(np.maximum(b, g), r)
    vmin = np.minimum(np.minimum(b, g), r)
    rmax = vmax == r
    gmax = ~rmax & (vmax == g)
    num = np.where(rmax, g - b, np.where(gmax, b - r, r - g))
    off = np.where(rmax, 0, np.where(gmax, 120, 240)).astype(np.float32)
    return vmax, vmin, num, off


def _to_hls_u8(x, bidx, tail: bool):
    """OpenCV's uint8 RGB->HLS (hue range 180): float32 on values / 255, rounded to nearest. The vector
    code adds a negative red hue's 360 inside the fused multiply-add and divides the saturation by
    ``2 - (max + min)``; the scalar ``tail`` adds the 360 afterwards and divides by ``(2 - max) - min``."""
    b, g, r = (c.astype(np.float32) * _f32(1 / 255.0) for c in _bgr(x, bidx))
    vmax, vmin, num, off = _max_sector(b, g, r)
    diff = vmax - vmin
    msum = vmax + vmin
    l = msum * _f32(0.5)
    ok = diff > np.finfo(np.float32).eps
    with np.errstate(all="ignore"):
        if tail:
            s = diff / np.where(l < _f32(0.5), msum, (_f32(2) - vmax) - vmin)
            h = _fma32(num, _f32(60) / diff, off)
            h = np.where(h < 0, h + _f32(360), h)
        else:
            s = diff / np.where(l < _f32(0.5), msum, _f32(2) - msum)
            h = _fma32(num, _f32(60) / diff, np.where((off == 0) & (num < 0), _f32(360), off))
    h = np.where(ok, h * _f32(0.5), 0)
    s = np.where(ok, s, 0)
    return np.stack([_round8(h), _round8(l * _f32(255)), _round8(s * _f32(255))], -1)


@functools.lru_cache(maxsize=2)
def _ipp_reciprocals(refined: bool) -> np.ndarray:
    """IPP's float32 reciprocals of 0..510: the CPU's ``rcpps`` approximation, with one Newton step
    when ``refined`` (index 0 is infinite and never used)."""
    from ._x86_rcp import rcp_f32
    x = np.arange(511, dtype=np.float32)
    r = rcp_f32(x)
    with np.errstate(invalid="ignore"):
        return r * (_f32(2) - x * r) if refined else r


def _to_hls_ipp(x, bidx, tail: bool):
    """IPP's uint8 RGB->HLS (_FULL: hue range 255): lightness (max + min) / 2 in integers; saturation
    and hue in float32 on 0..255 values, dividing by multiplying with ``rcpps`` reciprocals. The vector
    code rounds to nearest; the scalar ``tail`` refines the reciprocals by a Newton step and truncates."""
    b, g, r = _bgr(x, bidx)
    vmax, vmin, num, off = _max_sector(b, g, r)
    d = vmax - vmin
    total = vmax + vmin
    rcp = _ipp_reciprocals(tail)
    with np.errstate(invalid="ignore"):
        h = _fma32(num.astype(np.float32) * _f32(60), rcp[d], off)
        h = np.where(h < 0, h + _f32(360), h) * _f32(255 / 360.0)
        s = d.astype(np.float32) * rcp[np.where(total <= 255, total, 510 - total)] * _f32(255)
    h, s = np.where(d > 0, h, 0), np.where(d > 0, s, 0)
    if tail:
        return np.stack([_trunc8(h), (total >> 1).astype(np.uint8), _trunc8(s)], -1)
    return np.stack([_round8(h), _round8(total * 0.5), _round8(s)], -1)


def _from_hls(x, bidx, full: bool):
    u8 = x.dtype == np.uint8
    if u8 and full:
        return _by_tail(lambda part, tail: _from_hls_ipp(part, bidx, tail), x, 8)
    h = x[..., 0].astype(np.float32)
    l = x[..., 1].astype(np.float32)
    s = x[..., 2].astype(np.float32)
    if u8:   # OpenCV (hue range 180): its vector and scalar code agree on every input
        l, s = l * np.float32(1 / 255.0), s * np.float32(1 / 255.0)
        hscale = np.float32(6.0 / 180)
    else:
        hscale = np.float32(6.0 / 360.0)
    p2 = np.where(l <= 0.5, l * (1 + s), l + s - l * s)
    p1 = 2 * l - p2
    h6 = _hue6(h, hscale)
    f = h6 - np.floor(h6)
    tab = [p2, p1, p1 + (p2 - p1) * (1 - f), p1 + (p2 - p1) * f]
    b, g, r = _sector_rgb(h6, tab, bidx, 3, 1)
    zero = s == 0
    b, g, r = (np.where(zero, l, c) for c in (b, g, r))
    out = _stack_bgr(b, g, r, bidx, 3, 1)
    return _round8(out * np.float32(255)) if u8 else out.astype(np.float32)


def _from_hls_ipp(x, bidx, tail: bool):
    """IPP's uint8 HLS->RGB (_FULL: hue range 255), float32 on lightness and saturation / 255: each of
    red, green and blue interpolates between ``m1`` and ``m2`` at the hue in degrees shifted by +120, 0
    and -120. The vector code rounds to nearest; the scalar ``tail`` truncates (its other arithmetic is
    not reproduced: ~0.6 % of tail pixels differ by one, see the HSV / HLS note above)."""
    deg = x[..., 0].astype(np.float32) * _f32(360 / 255.0)
    l = x[..., 1].astype(np.float32) * _f32(1 / 255.0)
    s = x[..., 2].astype(np.float32) * _f32(1 / 255.0)
    m2 = np.where(l <= _f32(0.5), l + l * s, l + (s - l * s))
    m1 = _f32(2) * l - m2
    rgb = []
    for shift in (120, 0, -120):
        h = deg + _f32(shift)
        h = np.where(h > _f32(360), h - _f32(360), np.where(h < 0, h + _f32(360), h))
        rise = m1 + (m2 - m1) * (h / _f32(60))
        fall = m1 + (m2 - m1) * ((_f32(240) - h) / _f32(60))
        rgb.append(np.where(h < 60, rise, np.where(h < 180, m2, np.where(h < 240, fall, m1))))
    r, g, b = (np.where(s == 0, l, c) for c in rgb)
    out = _stack_bgr(b, g, r, bidx, 3, 1) * _f32(255)
    return _trunc8(out) if tail else _round8(out)


# ---- Lab / Luv (float formulas; uint8 scaled as OpenCV: L*255/100, a+128, b+128)
_WHITE = np.array([0.950456, 1.0, 1.088754])


def _srgb_to_linear(c):
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _linear_to_srgb(c):
    return np.where(c <= 0.0031308, c * 12.92, 1.055 * np.power(np.maximum(c, 0), 1 / 2.4) - 0.055)


def _rgb_lin(x, bidx, srgb):
    b, g, r = _bgr(x, bidx)
    b, g, r = (c.astype(np.float64) for c in (b, g, r))
    if x.dtype == np.uint8:
        b, g, r = b / 255.0, g / 255.0, r / 255.0
    if srgb:
        b, g, r = _srgb_to_linear(b), _srgb_to_linear(g), _srgb_to_linear(r)
    return b, g, r


def _to_lab(x, bidx, srgb: bool):
    b, g, r = _rgb_lin(x, bidx, srgb)
    X = (_XYZ[0, 0] * r + _XYZ[0, 1] * g + _XYZ[0, 2] * b) / _WHITE[0]
    Y = _XYZ[1, 0] * r + _XYZ[1, 1] * g + _XYZ[1, 2] * b
    Z = (_XYZ[2, 0] * r + _XYZ[2, 1] * g + _XYZ[2, 2] * b) / _WHITE[2]
    t = 0.008856

    def f(v):
        return np.where(v > t, np.cbrt(v), 7.787 * v + 16.0 / 116.0)
    fx, fy, fz = f(X), f(Y), f(Z)
    L = np.where(Y > t, 116.0 * fy - 16.0, 903.3 * Y)
    a = 500.0 * (fx - fy)
    bb = 200.0 * (fy - fz)
    if x.dtype == np.uint8:
        return np.stack([_round8(L * 255 / 100), _round8(a + 128), _round8(bb + 128)], -1)
    return np.stack([L, a, bb], -1).astype(np.float32)


def _from_lab(x, bidx, srgb: bool):
    L, a, bb = (x[..., i].astype(np.float64) for i in range(3))
    if x.dtype == np.uint8:
        L, a, bb = L * 100 / 255.0, a - 128, bb - 128
    fy = (L + 16.0) / 116.0
    Y = np.where(L <= 8.0, L / 903.3, fy ** 3)
    fy = np.where(L <= 8.0, 7.787 * Y + 16.0 / 116.0, fy)
    fx = fy + a / 500.0
    fz = fy - bb / 200.0

    def finv(f):
        return np.where(f <= 0.206893, (f - 16.0 / 116.0) / 7.787, f ** 3)
    X = finv(fx) * _WHITE[0]
    Z = finv(fz) * _WHITE[2]
    c = _XYZ_INV
    r = c[0, 0] * X + c[0, 1] * Y + c[0, 2] * Z
    g = c[1, 0] * X + c[1, 1] * Y + c[1, 2] * Z
    b = c[2, 0] * X + c[2, 1] * Y + c[2, 2] * Z
    r, g, b = (np.clip(c, 0, 1) for c in (r, g, b))
    if srgb:
        r, g, b = _linear_to_srgb(r), _linear_to_srgb(g), _linear_to_srgb(b)
    out = _stack_bgr(b, g, r, bidx, 3, 1)
    return _round8(out * 255) if x.dtype == np.uint8 else out.astype(np.float32)


_UN = 4 * 0.950456 / (0.950456 + 15 + 3 * 1.088754)
_VN = 9 / (0.950456 + 15 + 3 * 1.088754)


def _to_luv(x, bidx, srgb: bool):
    b, g, r = _rgb_lin(x, bidx, srgb)
    X = _XYZ[0, 0] * r + _XYZ[0, 1] * g + _XYZ[0, 2] * b
    Y = _XYZ[1, 0] * r + _XYZ[1, 1] * g + _XYZ[1, 2] * b
    Z = _XYZ[2, 0] * r + _XYZ[2, 1] * g + _XYZ[2, 2] * b
    L = np.where(Y > 0.008856, 116.0 * np.cbrt(Y) - 16.0, 903.3 * Y)
    d = X + 15 * Y + 3 * Z
    with np.errstate(all="ignore"):
        up = np.where(d > 0, 4 * X / d, 0)
        vp = np.where(d > 0, 9 * Y / d, 0)
    u = 13 * L * (up - _UN)
    v = 13 * L * (vp - _VN)
    if x.dtype == np.uint8:
        return np.stack([_round8(L * 2.55), _round8((u + 134) * (255 / 354.0)),
                         _round8((v + 140) * (255 / 262.0))], -1)
    return np.stack([L, u, v], -1).astype(np.float32)


def _from_luv(x, bidx, srgb: bool):
    L, u, v = (x[..., i].astype(np.float64) for i in range(3))
    if x.dtype == np.uint8:
        L, u, v = L / 2.55, u * (354 / 255.0) - 134, v * (262 / 255.0) - 140
    Y = np.where(L >= 8, ((L + 16) / 116.0) ** 3, L / 903.3)
    dn = 1.0 / (_WHITE[0] + 15 * _WHITE[1] + 3 * _WHITE[2])
    un, vn = 13 * 4 * _WHITE[0] * dn, 13 * 9 * dn
    up = 3 * (L * un + u)
    with np.errstate(all="ignore"):
        vp = np.clip(0.25 / (L * vn + v), -0.25, 0.25)
    X = 3 * Y * up * vp
    Z = Y * ((156 * L - up) * vp - 5)
    c = _XYZ_INV
    r = c[0, 0] * X + c[0, 1] * Y + c[0, 2] * Z
    g = c[1, 0] * X + c[1, 1] * Y + c[1, 2] * Z
    b = c[2, 0] * X + c[2, 1] * Y + c[2, 2] * Z
    r, g, b = (np.clip(c, 0, 1) for c in (r, g, b))
    if srgb:
        r, g, b = _linear_to_srgb(r), _linear_to_srgb(g), _linear_to_srgb(b)
    out = _stack_bgr(b, g, r, bidx, 3, 1)
    return _round8(out * 255) if x.dtype == np.uint8 else out.astype(np.float32)


# ---- YUV 4:2:0 / 4:2:2 (BT.601, 20-bit fixed point, as OpenCV)
_CY, _CUB, _CUG, _CVG, _CVR = 1220542, 2116026, -409993, -852492, 1673527
_CRY, _CGY, _CBY, _CRU, _CGU, _CBU, _CGV, _CBV = 269484, 528482, 102760, -155188, -305135, 460324, -385875, -74448


def _yuv_pixels(y, u, v, bidx, dcn):
    y = np.maximum(y.astype(np.int64) - 16, 0) * _CY
    u = u.astype(np.int64) - 128
    v = v.astype(np.int64) - 128
    half = 1 << 19
    r = _sat8((y + half + _CVR * v) >> 20)
    g = _sat8((y + half + _CVG * v + _CUG * u) >> 20)
    b = _sat8((y + half + _CUB * u) >> 20)
    return _stack_bgr(b, g, r, bidx, dcn, 255).astype(np.uint8)


def _yuv420_to(x, dcn, bidx, layout, ufirst):
    x = x.reshape(x.shape[0], x.shape[1])
    h, w = x.shape[0] * 2 // 3, x.shape[1]
    y = x[:h]
    if layout == "sp":
        uv = x[h:].reshape(h // 2, w // 2, 2)
        u, v = (uv[..., 0], uv[..., 1]) if ufirst else (uv[..., 1], uv[..., 0])
    else:
        planes = x[h:].reshape(-1)
        q = (h // 2) * (w // 2)
        p0, p1 = planes[:q].reshape(h // 2, w // 2), planes[q:2 * q].reshape(h // 2, w // 2)
        u, v = (p0, p1) if ufirst else (p1, p0)
    u = np.repeat(np.repeat(u, 2, 0), 2, 1)
    v = np.repeat(np.repeat(v, 2, 0), 2, 1)
    return _yuv_pixels(y, u, v, bidx, dcn)


def _yuv422_to(x, dcn, bidx, yo, uo, vo):
    h, w = x.shape[0], x.shape[1]
    m = x.reshape(h, w // 2, 4)
    y = np.stack([m[..., yo], m[..., yo + 2]], -1).reshape(h, w)
    u = np.repeat(m[..., uo], 2, axis=1)
    v = np.repeat(m[..., vo], 2, axis=1)
    return _yuv_pixels(y, u, v, bidx, dcn)


def _to_yuv420(x, bidx, ufirst):
    b, g, r = _bgr(x, bidx)
    h, w = x.shape[:2]
    half = 1 << 19
    y = _sat8((_CRY * r + _CGY * g + _CBY * b + half + (16 << 20)) >> 20)
    r0, g0, b0 = r[0::2, 0::2], g[0::2, 0::2], b[0::2, 0::2]
    u = _sat8((_CRU * r0 + _CGU * g0 + _CBU * b0 + half + (128 << 20)) >> 20)
    v = _sat8((_CBU * r0 + _CGV * g0 + _CBV * b0 + half + (128 << 20)) >> 20)
    p0, p1 = (u, v) if ufirst else (v, u)
    chroma = np.concatenate([p0.ravel(), p1.ravel()]).reshape(h // 2, w)
    return np.concatenate([y, chroma], 0)[..., None]


# ---- 565 / 555
def _to_565(x, bidx, gbits):
    b, g, r = _bgr(x, bidx)
    if gbits == 6:
        t = (b >> 3) | ((g & ~3) << 3) | ((r & ~7) << 8)
    else:
        t = (b >> 3) | ((g & ~7) << 2) | ((r & ~7) << 7)
        if x.shape[-1] == 4:  # BGRA -> BGR555 keeps "alpha != 0" in bit 15
            t = t | np.where(x[..., 3] != 0, 0x8000, 0)
    return np.stack([t & 255, t >> 8], -1).astype(np.uint8)


def _from_565_planes(x, gbits):
    t = x[..., 0].astype(np.int32) | (x[..., 1].astype(np.int32) << 8)
    if gbits == 6:
        return (t << 3) & 255, (t >> 3) & ~3 & 255, (t >> 8) & ~7 & 255
    return (t << 3) & 255, (t >> 2) & ~7 & 255, (t >> 7) & ~7 & 255


def _gray_to_565(x, gbits):
    g = x[..., 0].astype(np.int32)
    if gbits == 6:
        t = (g >> 3) | ((g & ~3) << 3) | ((g & ~7) << 8)
    else:
        t = g >> 3
        t = t | (t << 5) | (t << 10)
    return np.stack([t & 255, t >> 8], -1).astype(np.uint8)


def _mrgba(x, forward: bool):
    v = x[..., :3].astype(np.int32)
    a = x[..., 3:4].astype(np.int32)
    if forward:
        out = (v * a + 128) // 255
    else:
        with np.errstate(all="ignore"):
            out = np.where(a > 0, (v * 255 + a // 2) // np.maximum(a, 1), 0)
    return np.concatenate([_sat8(out), x[..., 3:4]], -1)


# ----------------------------------------------------------------------------- the op
def cvt_color_ref(x: np.ndarray, code: int) -> np.ndarray:
    """cv2.cvtColor(x, code) for an HWC image ``x`` (numpy reference)."""
    if code in SWAP:
        scn, dcn, swap, add = SWAP[code]
        y = x[..., [2, 1, 0]] if swap else x[..., :3]
        if dcn == 4:
            alpha = x[..., 3:4] if scn == 4 else np.full(x.shape[:2] + (1,), 255 if x.dtype == np.uint8 else 1,
                                                         x.dtype)
            y = np.concatenate([y, alpha], -1)
        return y
    if code in GRAY_FROM:
        return _gray(x, GRAY_FROM[code][1])
    if code in GRAY_TO:
        n = GRAY_TO[code]
        y = np.repeat(x[..., :1], 3, axis=-1)
        if n == 4:
            y = np.concatenate([y, np.full(x.shape[:2] + (1,), 255 if x.dtype == np.uint8 else 1, x.dtype)], -1)
        return y
    if code in TO_565:
        return _to_565(x, TO_565[code][1], TO_565[code][2])
    if code in FROM_565:
        dcn, bidx, gbits = FROM_565[code]
        b, g, r = _from_565_planes(x, gbits)
        out = _stack_bgr(b, g, r, bidx, dcn, 255).astype(np.uint8)
        if dcn == 4 and gbits == 5:  # BGR555 -> BGRA: alpha from bit 15
            out[..., 3] = np.where(x[..., 1] & 0x80, 255, 0)
        return out
    if code in GRAY_565:
        b, g, r = _from_565_planes(x, GRAY_565[code])
        return gray_u8(b, g, r)[..., None]
    if code in TO_565_GRAY:
        return _gray_to_565(x, TO_565_GRAY[code])
    if code in FWD3:
        kind, bidx = FWD3[code]
        if kind == "xyz":
            return _to_xyz(x, bidx)
        if kind in ("ycrcb", "yuv"):
            return _to_ycc(x, bidx, kind == "yuv")
        if kind.startswith("hsv"):
            return _to_hsv(x, bidx, kind.endswith("full"))
        if kind.startswith("hls"):
            return _to_hls(x, bidx, kind.endswith("full"))
        if kind in ("lab", "llab"):
            return _to_lab(x, bidx, kind == "lab")
        return _to_luv(x, bidx, kind == "luv")
    if code in INV3:
        kind, bidx = INV3[code]
        if kind == "xyz":
            return _from_xyz(x, bidx)
        if kind in ("ycrcb", "yuv"):
            return _from_ycc(x, bidx, kind == "yuv")
        if kind.startswith("hsv"):
            return _from_hsv(x, bidx, kind.endswith("full"))
        if kind.startswith("hls"):
            return _from_hls(x, bidx, kind.endswith("full"))
        if kind in ("lab", "llab"):
            return _from_lab(x, bidx, kind == "lab")
        return _from_luv(x, bidx, kind == "luv")
    if code in YUV420_TO:
        return _yuv420_to(x, *YUV420_TO[code])
    if code == YUV420_GRAY:
        return x[: x.shape[0] * 2 // 3]
    if code in YUV422_TO:
        return _yuv422_to(x, *YUV422_TO[code])
    if code in YUV422_GRAY:
        off = YUV422_GRAY[code]
        return x.reshape(x.shape[0], x.shape[1] * 2)[:, off::2][..., None]
    if code in TO_YUV420:
        scn, bidx, ufirst = TO_YUV420[code]
        return _to_yuv420(x, bidx, ufirst)
    if code in MRGBA:
        return _mrgba(x, MRGBA[code])
    raise ValueError(f"cvtColor: unsupported conversion code {code}")


def _infer(inputs, attrs):
    x = inputs[0]
    return output_shape(attrs["code"], x.shape), x.dtype


def _ref(xs, attrs):
    with np.errstate(all="ignore"):
        return cvt_color_ref(xs[0], attrs["code"])


#: Codes with a hand-written Numba kernel for uint8 data (mnnjit/backends/cpu/handwritten/image_ops.py).
FAST_CODES = frozenset({0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 8, 9})

register(OpDef("cvt_color", "opaque", _infer, _ref, mnn_type="ImageProcess",
               doc="cv2.cvtColor on an HWC image"))
