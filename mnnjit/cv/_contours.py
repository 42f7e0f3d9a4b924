"""Shape analysis on point sets: contourArea, boundingRect, convexHull, minAreaRect, boxPoints;
findContours (Suzuki & Abe border following in a Numba kernel, called when findContours runs) and
connected-component labelling (vectorised label propagation) for connectedComponentsWithStats."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._common import image_array, image_var, to_numpy

__all__ = ["contourArea", "boundingRect", "convexHull", "minAreaRect", "boxPoints", "findContours"]


def _pts(points: Any) -> np.ndarray:
    p = np.asarray(to_numpy(points) if not isinstance(points, (list, tuple)) else
                   [to_numpy(q) if not isinstance(q, (int, float)) else q for q in points])
    if p.size % 2:
        raise ValueError(f"expected 2-D points, got an array of shape {list(p.shape)}")
    return p.reshape(-1, 2)


def contourArea(points: Any, oriented: bool = False) -> float:
    """Polygon area by the shoelace formula (signed when ``oriented``)."""
    p = _pts(points).astype(np.float64)
    if len(p) < 3:
        return 0.0
    x, y = p[:, 0], p[:, 1]
    a = 0.5 * float(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))
    return a if oriented else abs(a)


def boundingRect(points: Any) -> list[int]:
    """[x, y, w, h] of the up-right box holding all points (integer pixels), MNN's list."""
    p = _pts(points)
    if len(p) == 0:
        return [0, 0, 0, 0]
    if p.dtype.kind == "f":
        lo = np.floor(p.min(0)).astype(int)
        hi = np.floor(p.max(0)).astype(int)
    else:
        lo, hi = p.min(0).astype(int), p.max(0).astype(int)
    return [int(lo[0]), int(lo[1]), int(hi[0] - lo[0] + 1), int(hi[1] - lo[1] + 1)]


def hull_indices(p: np.ndarray) -> np.ndarray:
    """Indices of the convex hull of ``p`` (Andrew's monotone chain), counter-clockwise in math axes."""
    n = len(p)
    if n < 3:
        return np.arange(n)
    order = np.lexsort((p[:, 1], p[:, 0]))
    q = p[order].astype(np.float64)

    def half(ix):
        out: list[int] = []
        for i in ix:  # loop over hull candidates (points of the contour, not pixels)
            while len(out) >= 2:
                a, b = q[out[-2]], q[out[-1]]
                if (b[0] - a[0]) * (q[i][1] - a[1]) - (b[1] - a[1]) * (q[i][0] - a[0]) <= 0:
                    out.pop()
                else:
                    break
            out.append(i)
        return out
    lower = half(range(n))
    upper = half(range(n - 1, -1, -1))
    hull = lower[:-1] + upper[:-1]
    return order[np.array(hull, dtype=np.int64)]


def convexHull(points: Any, clockwise: bool = False, returnPoints: bool = True):
    """The convex hull as [n, 1, 2] points (or [n, 1] indices); OpenCV's orientation in image axes."""
    p = _pts(points)
    idx = hull_indices(p)
    idx = idx[::-1] if clockwise else idx
    if len(idx):  # start at the right-most point, as OpenCV's Sklansky output does
        idx = np.roll(idx, -int(np.argmax(p[idx, 0])))
    if returnPoints:
        return image_var(np.ascontiguousarray(p[idx].reshape(-1, 1, 2)).astype(np.int32 if p.dtype.kind in "iu"
                                                                                 else np.float32))
    return image_var(idx.reshape(-1, 1).astype(np.int32))


def minAreaRect(points: Any):
    """((cx, cy), (w, h), angle) of the minimum-area rotated rectangle (rotating calipers on the hull)."""
    p = _pts(points).astype(np.float64)
    if len(p) == 0:
        return ((0.0, 0.0), (0.0, 0.0), 0.0)
    h = p[hull_indices(p)]
    if len(h) == 1:
        return ((float(h[0, 0]), float(h[0, 1])), (0.0, 0.0), 0.0)
    edges = np.roll(h, -1, axis=0) - h
    lens = np.hypot(edges[:, 0], edges[:, 1])
    keep = lens > 0
    edges, lens = edges[keep], lens[keep]
    u = edges / lens[:, None]
    v = np.stack([-u[:, 1], u[:, 0]], 1)
    pu = h @ u.T
    pv = h @ v.T
    wid = pu.max(0) - pu.min(0)
    hei = pv.max(0) - pv.min(0)
    k = int(np.argmin(wid * hei))
    cu = (pu[:, k].max() + pu[:, k].min()) / 2
    cv_ = (pv[:, k].max() + pv[:, k].min()) / 2
    c = cu * u[k] + cv_ * v[k]
    w, hh = float(wid[k]), float(hei[k])
    ang = math.degrees(math.atan2(u[k][1], u[k][0]))
    # OpenCV 5's convention: angle in (-90, 0]
    while ang <= -90:
        ang += 90
        w, hh = hh, w
    while ang > 0:
        ang -= 90
        w, hh = hh, w
    return ((float(c[0]), float(c[1])), (w, hh), float(ang))


def boxPoints(box: Any):
    """The 4 corners (float32 [4, 2]) of a rotated rectangle ((cx, cy), (w, h), angle)."""
    (cx, cy), (w, h), ang = box
    a = math.radians(ang)
    b, c = math.cos(a) * 0.5, math.sin(a) * 0.5
    p0 = (cx - c * h - b * w, cy + b * h - c * w)
    p1 = (cx + c * h - b * w, cy - b * h - c * w)
    p2 = (2 * cx - p0[0], 2 * cy - p0[1])
    p3 = (2 * cx - p1[0], 2 * cy - p1[1])
    return image_var(np.array([p0, p1, p2, p3], np.float32))


def label_components(mask: np.ndarray, connectivity: int = 8) -> tuple[np.ndarray, int]:
    """Labels (0 = background, 1.. in raster order of first pixel) of the connected regions of ``mask``."""
    h, w = mask.shape
    big = h * w + 1
    lab = np.where(mask, np.arange(h * w, dtype=np.int64).reshape(h, w), big)
    shifts = [(0, 1), (1, 0), (0, -1), (-1, 0)]
    if connectivity == 8:
        shifts += [(1, 1), (1, -1), (-1, 1), (-1, -1)]
    while True:  # min-label propagation with pointer jumping (whole-image numpy steps)
        p = np.pad(lab, 1, constant_values=big)
        m = lab.copy()
        for dy, dx in shifts:
            m = np.minimum(m, p[1 + dy:1 + dy + h, 1 + dx:1 + dx + w])
        m = np.where(mask, m, big)
        flat = m.ravel()
        fg = flat < big
        for _ in range(4):
            nxt = flat.copy()
            nxt[fg] = flat[flat[fg]]
            flat = np.minimum(flat, nxt)
        m = flat.reshape(h, w)
        if np.array_equal(m, lab):
            break
        lab = m
    roots = lab[mask]
    uniq, first = np.unique(roots, return_index=True)
    order = np.argsort(first)
    remap = np.zeros(len(uniq), np.int64)
    remap[order] = np.arange(1, len(uniq) + 1)
    out = np.zeros((h, w), np.int64)
    out[mask] = remap[np.searchsorted(uniq, roots)]
    return out, len(uniq) + 1


def _simplify(pts: np.ndarray) -> np.ndarray:
    """CHAIN_APPROX_SIMPLE: keep only the end points of straight runs."""
    if len(pts) < 3:
        return pts
    d = np.diff(np.vstack([pts, pts[:1]]), axis=0)
    prev = np.roll(d, 1, axis=0)
    keep = np.any(d != prev, axis=1)
    return pts[keep] if keep.any() else pts[:1]


def find_borders(mask: np.ndarray) -> list[tuple[np.ndarray, bool, int, int]]:
    """All borders of the non-zero pixels of ``mask`` (Suzuki & Abe border following, a Numba kernel):
    (points [n, 2] x/y, is_hole, parent id, own id) in discovery (raster) order; id 1 is the image frame."""
    from ..backends.cpu.image.kernels import suzuki_borders
    f = np.pad((mask != 0).astype(np.int32), 1)
    pts = np.zeros((int(mask.sum()) * 4 + 16, 2), np.int64)
    meta = np.zeros((f.size // 2 + 8, 5), np.int64)
    n, _ = suzuki_borders(f, pts, meta)
    return [(pts[m[0]:m[0] + m[1]] - 1, bool(m[2]), int(m[3]), int(m[4])) for m in meta[:n]]


def findContours(image: Any, mode: int, method: int, offset: Any = (0, 0)):
    """Borders of the non-zero regions as a list of [n, 1, 2] int32 Vars (OpenCV's points and order), and
    the string 'no hierarchy' (real MNN's second return value). RETR_EXTERNAL keeps the outermost borders,
    the other modes list every outer and hole border (in RETR_LIST order, as MNN)."""
    img = image_array(image)
    img = img.reshape(img.shape[0], img.shape[1], -1)[..., 0]
    borders = find_borders(img != 0)
    if int(mode) == 0:
        borders = [b for b in borders if not b[1] and b[2] == 1]
    ox, oy = [int(v) for v in (offset if offset is not None else (0, 0))]
    out = []
    for pts, _, _, _ in reversed(borders):  # OpenCV lists the last-found border first
        if int(method) != 1:
            pts = _simplify(pts)
        pts = pts + np.array([ox, oy])
        out.append(image_var(pts.reshape(-1, 1, 2).astype(np.int32)))
    return out, "no hierarchy"
