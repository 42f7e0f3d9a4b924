"""Drawing (in place, returning None as MNN does): line, arrowedLine, circle, rectangle, fillPoly, drawContours.

Shapes are rasterised with whole-array masks over their bounding box (no per-pixel Python): a pixel is
painted when its centre lies inside the shape (thick lines are capsules, outlines are rings).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ._common import to_numpy

__all__ = ["line", "arrowedLine", "circle", "rectangle", "fillPoly", "drawContours"]


def _target(img: Any) -> np.ndarray:
    from ..var import Var
    if isinstance(img, Var):
        return np.array(img.read_view())
    if isinstance(img, np.ndarray):
        return img
    raise TypeError(f"img must be an image Var or ndarray, not {type(img).__name__}")


def _commit(img: Any, arr: np.ndarray) -> None:
    from ..var import Var
    if isinstance(img, Var):
        img.write(arr)


def _color(color: Any, cn: int, dtype) -> np.ndarray:
    vals = [float(v) for v in (np.asarray(to_numpy(color), np.float64).ravel() if not isinstance(color, (int, float))
                               else [color])]
    vals = (vals + [0.0] * 4)[:cn]
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        vals = [min(max(round(v), info.min), info.max) for v in vals]
    return np.array(vals, dtype)


def _paint(arr: np.ndarray, mask: np.ndarray, y0: int, x0: int, color: np.ndarray) -> None:
    h, w = arr.shape[:2]
    mh, mw = mask.shape
    ya, xa = max(y0, 0), max(x0, 0)
    yb, xb = min(y0 + mh, h), min(x0 + mw, w)
    if ya >= yb or xa >= xb:
        return
    m = mask[ya - y0:yb - y0, xa - x0:xb - x0]
    view = arr[ya:yb, xa:xb]
    if arr.ndim == 2:
        view[m] = color[0]
    else:
        view[m] = color


def _pt(p: Any, shift: int = 0) -> tuple[float, float]:
    v = np.asarray(to_numpy(p) if not isinstance(p, (list, tuple)) else p, np.float64).ravel()
    s = float(1 << int(shift)) if shift else 1.0
    return float(v[0]) / s, float(v[1]) / s


def _capsule(arr, p1, p2, radius, color):
    """Paint the set of pixel centres within ``radius`` of segment p1-p2."""
    x1, y1 = p1
    x2, y2 = p2
    r = max(radius, 0.5)
    x0, xe = int(math.floor(min(x1, x2) - r)), int(math.ceil(max(x1, x2) + r))
    y0, ye = int(math.floor(min(y1, y2) - r)), int(math.ceil(max(y1, y2) + r))
    h, w = arr.shape[:2]
    x0, y0 = max(x0, 0), max(y0, 0)
    xe, ye = min(xe, w - 1), min(ye, h - 1)
    if x0 > xe or y0 > ye:
        return
    ys, xs = np.mgrid[y0:ye + 1, x0:xe + 1].astype(np.float64)
    dx, dy = x2 - x1, y2 - y1
    L2 = dx * dx + dy * dy
    t = np.clip(((xs - x1) * dx + (ys - y1) * dy) / L2, 0, 1) if L2 > 0 else np.zeros_like(xs)
    d2 = (xs - x1 - t * dx) ** 2 + (ys - y1 - t * dy) ** 2
    _paint(arr, d2 <= r * r, y0, x0, color)


def _thin_line(arr, p1, p2, color):
    """A one-pixel 8-connected line (points rounded along the major axis, as Bresenham)."""
    x1, y1 = p1
    x2, y2 = p2
    n = int(max(abs(round(x2) - round(x1)), abs(round(y2) - round(y1)))) + 1
    xs = np.rint(np.linspace(x1, x2, n)).astype(np.int64)
    ys = np.rint(np.linspace(y1, y2, n)).astype(np.int64)
    h, w = arr.shape[:2]
    ok = (xs >= 0) & (xs < w) & (ys >= 0) & (ys < h)
    arr[ys[ok], xs[ok]] = color if arr.ndim == 3 else color[0]


def _draw_line(arr, p1, p2, color, thickness):
    if thickness <= 1:
        _thin_line(arr, p1, p2, color)
    else:
        _capsule(arr, p1, p2, thickness / 2.0, color)


def line(img: Any, pt1: Any, pt2: Any, color: Any, thickness: int = 1, lineType: int = 8, shift: int = 0) -> None:
    """Draw a segment from pt1 to pt2 (in place)."""
    arr = _target(img)
    col = _color(color, arr.shape[2] if arr.ndim == 3 else 1, arr.dtype)
    _draw_line(arr, _pt(pt1, shift), _pt(pt2, shift), col, int(thickness))
    _commit(img, arr)


def arrowedLine(img: Any, pt1: Any, pt2: Any, color: Any, thickness: int = 1, lineType: int = 8, shift: int = 0,
                tipLength: float = 0.1) -> None:
    """Draw an arrow from pt1 to pt2 with a tip of ``tipLength`` times the length (in place)."""
    arr = _target(img)
    col = _color(color, arr.shape[2] if arr.ndim == 3 else 1, arr.dtype)
    p1, p2 = _pt(pt1, shift), _pt(pt2, shift)
    _draw_line(arr, p1, p2, col, int(thickness))
    ang = math.atan2(p1[1] - p2[1], p1[0] - p2[0])
    tip = tipLength * math.hypot(p2[0] - p1[0], p2[1] - p1[1])
    for s in (1, -1):
        q = (round(p2[0] + tip * math.cos(ang + s * math.pi / 4)), round(p2[1] + tip * math.sin(ang + s * math.pi / 4)))
        _draw_line(arr, p2, q, col, int(thickness))
    _commit(img, arr)


def circle(img: Any, center: Any, radius: int, color: Any, thickness: int = 1, lineType: int = 8,
           shift: int = 0) -> None:
    """Draw a circle (filled when thickness < 0) in place."""
    arr = _target(img)
    col = _color(color, arr.shape[2] if arr.ndim == 3 else 1, arr.dtype)
    cx, cy = _pt(center, shift)
    r = float(radius) / (1 << int(shift)) if shift else float(radius)
    t = int(thickness)
    outer = r + (max(t, 1) / 2.0 if t >= 0 else 0) + 0.5
    x0, y0 = int(math.floor(cx - outer)), int(math.floor(cy - outer))
    size = int(math.ceil(2 * outer)) + 2
    ys, xs = np.mgrid[y0:y0 + size, x0:x0 + size].astype(np.float64)
    d = np.hypot(xs - cx, ys - cy)
    if t < 0:
        mask = d <= r + 0.5
    else:
        half = max(t, 1) / 2.0
        mask = np.abs(d - r) <= max(half, 0.5)
    _paint(arr, mask, y0, x0, col)
    _commit(img, arr)


def rectangle(img: Any, pt1: Any, pt2: Any, color: Any, thickness: int = 1, lineType: int = 8,
              shift: int = 0) -> None:
    """Draw an up-right rectangle with opposite corners pt1, pt2 (filled when thickness < 0) in place."""
    arr = _target(img)
    col = _color(color, arr.shape[2] if arr.ndim == 3 else 1, arr.dtype)
    (x1, y1), (x2, y2) = _pt(pt1, shift), _pt(pt2, shift)
    xa, xb = int(round(min(x1, x2))), int(round(max(x1, x2)))
    ya, yb = int(round(min(y1, y2))), int(round(max(y1, y2)))
    t = int(thickness)
    if t < 0:
        mask = np.ones((yb - ya + 1, xb - xa + 1), bool)
        _paint(arr, mask, ya, xa, col)
    else:
        for a, b in (((xa, ya), (xb, ya)), ((xb, ya), (xb, yb)), ((xb, yb), (xa, yb)), ((xa, yb), (xa, ya))):
            if t <= 1:
                _thin_line(arr, a, b, col)
            else:
                h = t / 2.0
                lx, hx = min(a[0], b[0]) - h, max(a[0], b[0]) + h
                ly, hy = min(a[1], b[1]) - h, max(a[1], b[1]) + h
                y0, x0 = int(math.ceil(ly - 0.5)), int(math.ceil(lx - 0.5))
                mask = np.ones((int(math.floor(hy + 0.5)) - y0, int(math.floor(hx + 0.5)) - x0), bool)
                _paint(arr, mask, y0, x0, col)
    _commit(img, arr)


def _poly_mask(polys: list[np.ndarray], h: int, w: int) -> tuple[np.ndarray, int, int]:
    """Even-odd fill of polygons (pixel centres, edges included) over their common bounding box."""
    allp = np.concatenate(polys)
    x0, y0 = max(int(np.floor(allp[:, 0].min())), 0), max(int(np.floor(allp[:, 1].min())), 0)
    x1, y1 = min(int(np.ceil(allp[:, 0].max())), w - 1), min(int(np.ceil(allp[:, 1].max())), h - 1)
    if x0 > x1 or y0 > y1:
        return np.zeros((0, 0), bool), 0, 0
    ys, xs = np.mgrid[y0:y1 + 1, x0:x1 + 1].astype(np.float64)
    inside = np.zeros(xs.shape, bool)
    for p in polys:
        q = np.roll(p, -1, axis=0)
        for (ax, ay), (bx, by) in zip(p, q):  # loop over polygon edges, vectorised over pixels
            if ay == by:
                continue
            cond = (ay > ys) != (by > ys)
            xint = ax + (ys - ay) * (bx - ax) / (by - ay)
            inside ^= cond & (xs < xint)
    return inside, y0, x0


def fillPoly(img: Any, contours: Sequence[Any], color: Any, lineType: int = 8, shift: int = 0,
             offset: Any = (0, 0)) -> None:
    """Fill the area bounded by one or more polygons (even-odd rule) in place; edges are drawn too."""
    arr = _target(img)
    col = _color(color, arr.shape[2] if arr.ndim == 3 else 1, arr.dtype)
    s = float(1 << int(shift)) if shift else 1.0
    off = np.asarray(offset if offset is not None else (0, 0), np.float64)
    polys = [np.asarray(to_numpy(c), np.float64).reshape(-1, 2) / s + off for c in contours]
    polys = [p for p in polys if len(p)]
    if polys:
        mask, y0, x0 = _poly_mask(polys, arr.shape[0], arr.shape[1])
        _paint(arr, mask, y0, x0, col)
        for p in polys:
            for a, b in zip(p, np.roll(p, -1, axis=0)):
                _thin_line(arr, tuple(a), tuple(b), col)
    _commit(img, arr)


def drawContours(img: Any, contours: Sequence[Any], contourIdx: int, color: Any, thickness: int = 1,
                 lineType: int = 8) -> None:
    """Draw contour outlines (or fill them when thickness < 0); contourIdx < 0 draws all (in place)."""
    arr = _target(img)
    col = _color(color, arr.shape[2] if arr.ndim == 3 else 1, arr.dtype)
    idx = range(len(contours)) if int(contourIdx) < 0 else [int(contourIdx)]
    polys = [np.asarray(to_numpy(contours[i]), np.float64).reshape(-1, 2) for i in idx]
    if int(thickness) < 0:
        polys = [p for p in polys if len(p)]
        if polys:
            mask, y0, x0 = _poly_mask(polys, arr.shape[0], arr.shape[1])
            _paint(arr, mask, y0, x0, col)
    for p in polys:
        for a, b in zip(p, np.roll(p, -1, axis=0)):
            _draw_line(arr, tuple(a), tuple(b), col, max(int(thickness), 1))
    _commit(img, arr)
