"""The sampling step of ``CVImageProcess.convert`` as real MNN computes it, so converted tensors equal MNN's.

MNN walks each destination row in tiles of 512 pixels: it maps the tile's two ends through the CVMatrix in
float32, steps from the first source point by (end - start) / count, accumulating in float32, and samples the
uint8 source there - NEAREST at the rounded (half away from zero) clamped coordinate, BILINEAR from the
clamped coordinate's four neighbours, rounded half up (BICUBIC has no sampler in MNN and samples NEAREST).
Coordinates are clamped to the image (CLAMP_TO_EDGE and REPEAT behave alike); with CV_Wrap_ZERO the tile is
first clipped to the part whose source points lie inside [0, w - 1] x [0, h - 1] (Cohen-Sutherland on the
tile's source segment, the clipped ends mapped back through the inverse matrix), the rest being padding.
"""
from __future__ import annotations

import math

import numpy as np

TILE = 512  # measured on real MNN 3.6.1 (perspective matrices show the tile ends)
_F = np.float32
_LEFT, _RIGHT, _TOP, _BOTTOM = 1, 2, 4, 8


def _map(m: np.ndarray, x: float, y: float) -> tuple[np.float32, np.float32]:
    """Point (x, y) through the float32 3x3 matrix ``m`` (float32 arithmetic, perspective divide)."""
    x, y = _F(x), _F(y)
    mx = x * m[0, 0] + y * m[0, 1] + m[0, 2]
    my = x * m[1, 0] + y * m[1, 1] + m[1, 2]
    if m[2, 0] != 0 or m[2, 1] != 0 or m[2, 2] != 1:
        z = x * m[2, 0] + y * m[2, 1] + m[2, 2]
        if z != 0:
            z = _F(1) / z
            mx, my = mx * z, my * z
    return _F(mx), _F(my)


def _outcode(x: np.float32, y: np.float32, w: int, h: int) -> int:
    code = 0
    if x < 0:
        code |= _LEFT
    if x > w - 1:
        code |= _RIGHT
    if y < 0:
        code |= _TOP
    if y > h - 1:
        code |= _BOTTOM
    return code


def _round_half_away(v: float) -> int:
    return int(math.floor(v + 0.5)) if v >= 0 else -int(math.floor(-v + 0.5))


def clip_tile(p0, p1, w: int, h: int, inv: np.ndarray, x_start: int, count: int) -> tuple[int, int]:
    """The [sta, end) part of a tile whose source points lie inside the image (CV_Wrap_ZERO)."""
    pts = [list(p0), list(p1)]
    codes = [_outcode(*p0, w, h), _outcode(*p1, w, h)]
    sta, end = 0, count
    dx, dy = _F(p1[0] - p0[0]), _F(p1[1] - p0[1])
    slope_y = _F(dy / dx) if abs(dx) > 0.01 else _F(0)  # dy per unit x
    slope_x = _F(dx / dy) if abs(slope_y) > 0.01 else _F(0)  # dx per unit y (MNN tests the slope here)
    while codes[0] or codes[1]:
        if codes[0] & codes[1]:  # both ends beyond the same edge: nothing of the tile is inside
            sta = end
            break
        i = 0 if codes[0] else 1
        code = codes[i]
        x, y = pts[i]
        if code & _LEFT:
            x, y = _F(0), _F(y + slope_y * (0 - x))
        elif code & _RIGHT:
            x, y = _F(w - 1), _F(y + slope_y * (w - 1 - x))
        elif code & _BOTTOM:
            x, y = _F(x + slope_x * (h - 1 - y)), _F(h - 1)
        elif code & _TOP:
            x, y = _F(x + slope_x * (0 - y)), _F(0)
        pts[i] = [x, y]
        codes[i] = _outcode(x, y, w, h)
        back = _map(inv, x, y)[0]
        if i == 0:
            sta = _round_half_away(float(back)) - x_start
        else:
            end = int(math.floor(float(back))) - x_start + 1
    end = min(end, count)
    sta = max(min(sta, end), 0)
    return sta, end


def sample(img: np.ndarray, matrix: np.ndarray, oh: int, ow: int, bilinear: bool, zero: bool,
           padding: int = 0) -> np.ndarray:
    """The [oh, ow, c] uint8 image MNN's sampler gives for ``img`` ([h, w, c] uint8) and the dst->src matrix."""
    h, w, c = img.shape
    m = np.asarray(matrix, np.float64).reshape(3, 3).astype(_F)
    inv = np.linalg.inv(np.asarray(matrix, np.float64).reshape(3, 3)).astype(_F) if zero else None
    xs = np.zeros((oh, ow), _F)
    ys = np.zeros((oh, ow), _F)
    inside = np.ones((oh, ow), bool)
    for dy in range(oh):
        for x_start in range(0, ow, TILE):
            count = min(TILE, ow - x_start)
            p0, p1 = _map(m, x_start, dy), _map(m, x_start + count, dy)
            step = (_F(p1[0] - p0[0]) / _F(count), _F(p1[1] - p0[1]) / _F(count))
            sta, end = 0, count
            if zero:
                sta, end = clip_tile(p0, p1, w, h, inv, x_start, count)
                inside[dy, x_start:x_start + sta] = False
                inside[dy, x_start + end:x_start + count] = False
                if end <= sta:
                    continue
                p0 = _map(m, x_start + sta, dy)
            n = end - sta
            for axis, out in ((0, xs), (1, ys)):  # sequential float32 sums, as MNN steps
                acc = np.full(n, step[axis], _F)
                acc[0] = p0[axis]
                out[dy, x_start + sta:x_start + end] = np.add.accumulate(acc, dtype=_F)
    x = np.clip(xs, _F(0), _F(w - 1))
    y = np.clip(ys, _F(0), _F(h - 1))
    if not bilinear:
        xi = np.trunc(x) + (x - np.trunc(x) >= 0.5)
        yi = np.trunc(y) + (y - np.trunc(y) >= 0.5)
        out = img[yi.astype(np.intp), xi.astype(np.intp)]
    else:
        x0, y0 = x.astype(np.intp), y.astype(np.intp)
        x1, y1 = np.ceil(x).astype(np.intp), np.ceil(y).astype(np.intp)
        fx = (x - x0.astype(_F))[..., None]
        fy = (y - y0.astype(_F))[..., None]
        f = img.astype(_F)
        top = f[y0, x0] * (_F(1) - fx) + f[y0, x1] * fx
        bottom = f[y1, x0] * (_F(1) - fx) + f[y1, x1] * fx
        out = np.floor(top * (_F(1) - fy) + bottom * fy + _F(0.5)).astype(np.uint8)
    if zero:
        out = out.copy()
        out[~inside] = np.uint8(padding)
    return out
