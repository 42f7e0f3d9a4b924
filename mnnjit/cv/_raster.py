"""OpenCV's rasterisation rules, reimplemented on numpy arrays (the engine behind mnnjit.cv drawing).

Coordinates are integers; inside, points carry ``XY_SHIFT`` = 16 fractional bits. The primitives follow
the behaviour of OpenCV's drawing code pixel for pixel:

- thin lines: Bresenham with 4- or 8-connectivity on rounded points (``line_int``), an 8-connected DDA on
  fixed-point points when ``shift`` > 0 (``line_fixed``), and the Gaussian-weighted anti-aliased line
  (``line_aa``, uint8 images with 1, 3 or 4 channels);
- thick lines: a filled quadrilateral plus round caps (``thick_line``);
- convex fills walk the left and right chains from the top vertex (``fill_convex``); general fills use
  even-odd spans between edge crossings (``collect_edges`` + ``fill_edges``);
- circles of thickness 1 with ``LINE_8`` use the midpoint circle; every other circle and ellipse becomes
  a polygon of at most 73 vertices (``ellipse_poly``).

Every primitive works on what can touch the image: lines are clipped first, fills skip the rows above the
image in one step and circles are computed per visible row, so time and memory are bounded by the image
size, never by coordinates or radii.
"""
from __future__ import annotations

import math

import numpy as np

XY_SHIFT = 16
XY_ONE = 1 << XY_SHIFT
HALF = XY_ONE >> 1
LINE_AA = 16

#: sin of whole degrees 0..450, as the float32 values of OpenCV's table (7 decimals, then float32)
_SIN = [float(v) for v in np.float32(np.round(np.sin(np.deg2rad(np.arange(451))), 7))]
#: slope-dependent gain of the anti-aliased line
_SLOPE_CORR = np.array([181, 181, 181, 182, 182, 183, 184, 185, 187, 188, 190, 192, 194, 196, 198, 201,
                        203, 206, 209, 211, 214, 218, 221, 224, 227, 231, 235, 238, 242, 246, 250, 254])
#: Gaussian weights of the anti-aliased line by 1/32-pixel distance
_FILTER = np.array([168, 177, 185, 194, 202, 210, 218, 224, 231, 236, 241, 246, 249, 252, 254, 254,
                    254, 254, 252, 249, 246, 241, 236, 231, 224, 218, 210, 202, 194, 185, 177, 168,
                    158, 149, 140, 131, 122, 114, 105, 97, 89, 82, 75, 68, 62, 56, 50, 45,
                    40, 36, 32, 28, 25, 22, 19, 16, 14, 12, 11, 9, 8, 7, 5, 5], np.int64)


def cdiv(a: int, b: int) -> int:
    """Integer division truncating toward zero (C semantics)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def cv_round(v: float) -> int:
    """OpenCV's cvRound: to nearest, ties to even."""
    return int(round(v))


class Canvas:
    """An image array ([h, w] or [h, w, c]) and the raw colour every primitive paints with."""

    def __init__(self, arr: np.ndarray, color: np.ndarray):
        self.arr = arr
        self.h, self.w = arr.shape[0], arr.shape[1]
        self.cn = arr.shape[2] if arr.ndim == 3 else 1
        self.color = color if arr.ndim == 3 else color[0]
        #: anti-aliasing blends only uint8 images of 1, 3 or 4 channels (others get plain lines)
        self.aa = arr.dtype == np.uint8 and self.cn in (1, 3, 4)

    def points(self, xs, ys) -> None:
        """Paint the pixels (xs[i], ys[i]) that lie inside the image."""
        xs = np.asarray(xs, np.int64)
        ys = np.asarray(ys, np.int64)
        ok = (xs >= 0) & (xs < self.w) & (ys >= 0) & (ys < self.h)
        if ok.any():
            self.arr[ys[ok], xs[ok]] = self.color

    def spans(self, ys, x1s, x2s) -> None:
        """Paint the horizontal runs [x1, x2] of rows y, clipped to the image."""
        w, h = self.w, self.h
        for y, a, b in zip(ys, x1s, x2s):
            if 0 <= y < h and a < w and b >= 0 and a <= b:
                self.arr[int(y), max(int(a), 0):min(int(b), w - 1) + 1] = self.color

    def blend(self, xs: np.ndarray, ys: np.ndarray, alpha: np.ndarray) -> None:
        """Blend the colour into distinct pixels with 8-bit weights, twice per pixel as OpenCV's
        anti-aliased line does (the second pass sharpens the profile)."""
        ok = (xs >= 0) & (xs < self.w) & (ys >= 0) & (ys < self.h)
        xs, ys, a = xs[ok], ys[ok], alpha[ok]
        if not len(xs):
            return
        v = self.arr[ys, xs].astype(np.int64)
        c = np.asarray(self.color, np.int64)
        if v.ndim == 2:
            a = a[:, None]
        for _ in range(2):
            v = v + (((c - v) * a + 127) >> 8)
        self.arr[ys, xs] = v.astype(np.uint8)


# ----------------------------------------------------------------------------------------------- clipping
def clip_line(w: int, h: int, x1: int, y1: int, x2: int, y2: int) -> tuple[bool, int, int, int, int]:
    """Cohen-Sutherland clipping of a segment to [0, w-1] x [0, h-1] (OpenCV's clipLine, including its
    partial updates when the segment misses the rectangle)."""
    if w <= 0 or h <= 0:
        return False, x1, y1, x2, y2
    right, bottom = w - 1, h - 1
    c1 = (x1 < 0) + (x1 > right) * 2 + (y1 < 0) * 4 + (y1 > bottom) * 8
    c2 = (x2 < 0) + (x2 > right) * 2 + (y2 < 0) * 4 + (y2 > bottom) * 8
    if (c1 & c2) == 0 and (c1 | c2) != 0:
        if c1 & 12:
            a = 0 if c1 < 8 else bottom
            x1 += int(float(a - y1) * float(x2 - x1) / float(y2 - y1))
            y1 = a
            c1 = (x1 < 0) + (x1 > right) * 2
        if c2 & 12:
            a = 0 if c2 < 8 else bottom
            x2 += int(float(a - y2) * float(x2 - x1) / float(y2 - y1))
            y2 = a
            c2 = (x2 < 0) + (x2 > right) * 2
        if (c1 & c2) == 0 and (c1 | c2) != 0:
            if c1:
                a = 0 if c1 == 1 else right
                y1 += int(float(a - x1) * float(y2 - y1) / float(x2 - x1))
                x1 = a
                c1 = 0
            if c2:
                a = 0 if c2 == 1 else right
                y2 += int(float(a - x2) * float(y2 - y1) / float(x2 - x1))
                x2 = a
                c2 = 0
    return (c1 | c2) == 0, x1, y1, x2, y2


def _outside(w: int, h: int, *xy: int) -> bool:
    xs, ys = xy[0::2], xy[1::2]
    return any(not 0 <= x < w for x in xs) or any(not 0 <= y < h for y in ys)


# ------------------------------------------------------------------------------------------------- lines
def line_int(cv: Canvas, x1: int, y1: int, x2: int, y2: int, connectivity: int = 8) -> None:
    """A one-pixel Bresenham line between integer points (connectivity 8, or 4; 0 and 1 alias them)."""
    connectivity = {0: 8, 1: 4}.get(connectivity, connectivity)
    if connectivity not in (4, 8):
        raise ValueError(f"line connectivity must be 4 or 8, got {connectivity}")
    if _outside(cv.w, cv.h, x1, y1, x2, y2):
        ok, x1, y1, x2, y2 = clip_line(cv.w, cv.h, x1, y1, x2, y2)
        if not ok:
            return
    dx, dy = x2 - x1, y2 - y1
    if dx < 0:  # always walk left to right
        dx, dy, x1, y1 = -dx, -dy, x2, y2
    sy = -1 if dy < 0 else 1
    dy = abs(dy)
    vert = dy > dx
    if vert:
        dx, dy = dy, dx
    if connectivity == 8:
        k = np.arange(dx + 1, dtype=np.int64)
        # minor-axis offset of step k: the Bresenham error stays >= 0 until 2*dx*m >= 2*dy*k - dx
        m = -((dx - 2 * dy * k) // (2 * dx)) if dx else np.zeros(1, np.int64)
        major, minor = k, m
    else:
        major, minor, a, b, err = [0], [0], 0, 0, 0
        for _ in range(dx + dy):
            if err < 0:
                err += 2 * dx
                b += 1
            else:
                err -= 2 * dy
                a += 1
            major.append(a)
            minor.append(b)
        major, minor = np.array(major, np.int64), np.array(minor, np.int64)
    if vert:
        cv.points(x1 + minor, y1 + sy * major)
    else:
        cv.points(x1 + major, y1 + sy * minor)


def _order_major(p1, p2):
    """The endpoints ordered along the major axis and whether x is the major axis."""
    (x1, y1), (x2, y2) = p1, p2
    xmajor = abs(x2 - x1) > abs(y2 - y1)
    if (x2 - x1 < 0) if xmajor else (y2 - y1 < 0):
        x1, y1, x2, y2 = x2, y2, x1, y1
    return x1, y1, x2, y2, xmajor


def line_fixed(cv: Canvas, x1: int, y1: int, x2: int, y2: int) -> None:
    """A one-pixel line between fixed-point points (XY_SHIFT fractional bits): clipped in fixed point,
    then one pixel per step along the major axis (the far end painted first)."""
    ok, x1, y1, x2, y2 = clip_line(cv.w << XY_SHIFT, cv.h << XY_SHIFT, x1, y1, x2, y2)
    if not ok:
        return
    x1, y1, x2, y2, xmajor = _order_major((x1, y1), (x2, y2))
    if not xmajor:  # walk y: swap the roles of the axes
        x1, y1, x2, y2 = y1, x1, y2, x2
    step = cdiv((y2 - y1) * XY_ONE, abs(x2 - x1) | 1)
    k = np.arange(((x2 - x1) >> XY_SHIFT) + 1, dtype=np.int64)
    major = np.concatenate([[(x2 + HALF) >> XY_SHIFT], ((x1 + HALF) >> XY_SHIFT) + k])
    minor = np.concatenate([[(y2 + HALF) >> XY_SHIFT], (y1 + HALF + k * step) >> XY_SHIFT])
    if xmajor:
        cv.points(major, minor)
    else:
        cv.points(minor, major)


def thin_line(cv: Canvas, x0: int, y0: int, x1: int, y1: int, line_type: int, shift: int) -> None:
    """A one-pixel line between fixed-point points of a shape drawn with ``shift`` fractional bits: as
    OpenCV 5, integer points and line types 8 and 1 round the ends and run Bresenham, types 4 and 0 with
    fractional points step in fixed point, LINE_AA blends."""
    if line_type >= LINE_AA:
        line_aa(cv, x0, y0, x1, y1)
    elif shift == 0 or line_type in (1, 8):
        line_int(cv, (x0 + HALF) >> XY_SHIFT, (y0 + HALF) >> XY_SHIFT, (x1 + HALF) >> XY_SHIFT,
                 (y1 + HALF) >> XY_SHIFT, line_type)
    else:
        line_fixed(cv, x0, y0, x1, y1)


def line_aa(cv: Canvas, x1: int, y1: int, x2: int, y2: int) -> None:
    """An anti-aliased line between fixed-point points: three pixels across per step, weighted by a
    Gaussian of the distance to the centre line, with partial end pixels."""
    if not cv.aa:  # OpenCV draws a plain line (its points truncated) on other image types
        line_int(cv, x1 >> XY_SHIFT, y1 >> XY_SHIFT, x2 >> XY_SHIFT, y2 >> XY_SHIFT, 8)
        return
    ok, x1, y1, x2, y2 = clip_line(cv.w << XY_SHIFT, cv.h << XY_SHIFT, x1, y1, x2, y2)
    if not ok:
        return
    ax, ay = abs(x2 - x1), abs(y2 - y1)
    if ax > ay:
        if x2 < x1:
            x1, y1, x2, y2 = x2, y2, x1, y1
        step = cdiv((y2 - y1) * XY_ONE, ax | 1)
        a1, b1, a2 = x1, y1, x2 + XY_ONE  # a: the major coordinate, b: the minor one
    else:
        if y2 < y1:
            x1, y1, x2, y2 = x2, y2, x1, y1
        step = cdiv((x2 - x1) * XY_ONE, ay | 1)
        a1, b1, a2 = y1, x1, y2 + XY_ONE
    ecount = (a2 >> XY_SHIFT) - (a1 >> XY_SHIFT)
    b1 += ((step * -(a1 & (XY_ONE - 1))) >> XY_SHIFT) + HALF
    slope = (step >> (XY_SHIFT - 5)) & 0x3f
    slope ^= 0x3f if step < 0 else 0
    slope = 0x100 if slope & 0x20 else int(_SLOPE_CORR[slope])
    i = (a1 >> (XY_SHIFT - 7)) & 0x78
    j = (a2 >> (XY_SHIFT - 7)) & 0x78
    t0, t1, t2 = slope << 7, ((0x78 - i) | 4) * slope, (j | 4) * slope
    ends = [0, ((((j - i) & 0x78) | 4) * slope >> 8) & 0x1ff, (t1 >> 8) & 0x1ff,
            ((((j - i) & 0x78) | 4) * slope >> 8) & 0x1ff, ((((j - i) + 0x80) | 4) * slope >> 8) & 0x1ff,
            ((t1 + t0) >> 8) & 0x1ff, (t2 >> 8) & 0x1ff, ((t2 + t0) >> 8) & 0x1ff, slope]
    k = np.arange(ecount + 1, dtype=np.int64)
    major = (a1 >> XY_SHIFT) + k
    limit = cv.w if ax > ay else cv.h
    keep = (major >= 0) & (major < limit)
    k, major = k[keep], major[keep]
    b = b1 + k * step
    corr = np.asarray(ends, np.int64)[3 * np.minimum(k, 2) + np.minimum(ecount - k, 2)]
    dist = (b >> (XY_SHIFT - 5)) & 31
    minor = (b >> XY_SHIFT) - 1
    for off, weight in ((0, _FILTER[dist + 32]), (1, _FILTER[dist]), (2, _FILTER[63 - dist])):
        alpha = (corr * weight >> 8) & 0xff
        if ax > ay:
            cv.blend(major, minor + off, alpha)
        else:
            cv.blend(minor + off, major, alpha)


# ------------------------------------------------------------------------------------------------- fills
def fill_convex(cv: Canvas, pts: list[tuple[int, int]], line_type: int, shift: int) -> None:
    """Fill a convex polygon (points with ``shift`` fractional bits), its outline drawn first."""
    n = len(pts)
    if n == 0:
        return
    up = XY_SHIFT - shift
    delta = (1 << shift) >> 1
    d1, d2 = (HALF, HALF) if line_type < LINE_AA else (XY_ONE - 1, 0)
    px, py = pts[-1][0] << up, pts[-1][1] << up
    for x, y in pts:
        qx, qy = x << up, y << up
        if line_type >= LINE_AA:
            line_aa(cv, px, py, qx, qy)
        elif shift == 0:
            line_int(cv, px >> XY_SHIFT, py >> XY_SHIFT, qx >> XY_SHIFT, qy >> XY_SHIFT, line_type)
        else:
            line_fixed(cv, px, py, qx, qy)
        px, py = qx, qy
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts]
    imin = min(range(n), key=lambda k: (ys[k], k))
    xmin, xmax = (min(xs) + delta) >> shift, (max(xs) + delta) >> shift
    ymin, ymax = (ys[imin] + delta) >> shift, (max(ys) + delta) >> shift
    if n < 3 or xmax < 0 or ymax < 0 or xmin >= cv.w or ymin >= cv.h:
        return
    ymax = min(ymax, cv.h - 1)
    # the two chains: [index, direction, x, dx, row where the current edge ends]
    edge = [[imin, 1, -XY_ONE, 0, ymin], [imin, n - 1, -XY_ONE, 0, ymin]]
    budget = n  # edges left to walk, shared by both chains
    y = ymin
    rows, lefts, rights = [], [], []
    while True:
        if line_type < LINE_AA or y < ymax or y == ymin:
            for e in edge:
                if y < e[4]:
                    continue
                idx0 = e[0]
                idx = (idx0 + e[1]) % n
                while budget > 0:
                    budget -= 1
                    ty = (ys[idx] + delta) >> shift
                    if ty > y:
                        xs0, xe = xs[idx0] << up, xs[idx] << up
                        e[4] = ty
                        e[3] = cdiv((xe - xs0) * 2 + (ty - y), 2 * (ty - y))
                        e[2] = xs0
                        e[0] = idx
                        break
                    idx0 = idx
                    idx = (idx + e[1]) % n
                else:
                    budget = -1
        if budget < 0:
            break
        if y >= 0:
            left, right = (edge[1], edge[0]) if edge[0][2] > edge[1][2] else (edge[0], edge[1])
            rows.append(y)
            lefts.append((left[2] + d1) >> XY_SHIFT)
            rights.append((right[2] + d2) >> XY_SHIFT)
            skip = 1
        else:  # rows above the image: jump to the next edge change or to row 0 in one step
            skip = max(min(0, edge[0][4], edge[1][4]) - y, 1)
        edge[0][2] += edge[0][3] * skip
        edge[1][2] += edge[1][3] * skip
        y += skip
        if y > ymax:
            break
    cv.spans(rows, lefts, rights)


def collect_edges(cv: Canvas, pts: list[tuple[int, int]], edges: list, line_type: int, shift: int,
                  offset: tuple[int, int] = (0, 0)) -> None:
    """Draw a closed polygon's outline and add its non-horizontal edges [y0, y1, x, dx] to ``edges``."""
    n = len(pts)
    if n == 0:
        return
    up = XY_SHIFT - shift
    delta = offset[1] + ((1 << shift) >> 1)
    p0 = ((pts[-1][0] + offset[0]) << up, (pts[-1][1] + delta) >> shift)
    for x, y in pts:
        p1 = ((x + offset[0]) << up, (y + delta) >> shift)
        c0, c1 = p0, p1
        if line_type < LINE_AA:
            t0x, t1x = (p0[0] + HALF) >> XY_SHIFT, (p1[0] + HALF) >> XY_SHIFT
            t0y, t1y = p0[1], p1[1]
            line_int(cv, t0x, t0y, t1x, t1y, line_type)
            if _outside(cv.w, cv.h, t0x, t0y, t1x, t1y):
                # an edge leaving the image runs through its clipped, rounded endpoints
                _, t0x, t0y, t1x, t1y = clip_line(cv.w, cv.h, t0x, t0y, t1x, t1y)
                c0, c1 = (t0x << XY_SHIFT, t0y), (t1x << XY_SHIFT, t1y)
            elif line_type in (1, 4):  # as OpenCV 5: 4-connected outlines shift their edges by half a pixel
                c0, c1 = (p0[0] + HALF, p0[1]), (p1[0] + HALF, p1[1])
        else:
            line_aa(cv, p0[0], p0[1] << XY_SHIFT, p1[0], p1[1] << XY_SHIFT)
        if p0[1] != p1[1]:
            # an edge clipped to a single row (or point) stands still at its clipped x
            dx = cdiv(c1[0] - c0[0], c1[1] - c0[1]) if c1[1] != c0[1] else 0
            if p0[1] < p1[1]:
                edges.append((p0[1], p1[1], c0[0] + (p0[1] - c0[1]) * dx, dx))
            else:
                edges.append((p1[1], p0[1], c1[0] + (p1[1] - c1[1]) * dx, dx))
        p0 = p1


def fill_edges(cv: Canvas, edges: list, line_type: int) -> None:
    """Even-odd fill: on each row, runs between consecutive sorted crossings of the active edges
    (an edge [y0, y1, x, dx] is active on rows y0 <= y < y1 and crosses row y at x + (y - y0) * dx)."""
    if len(edges) < 2:
        return
    y0, y1, x0, dx = np.array(edges, np.int64).T
    xend = x0 + (y1 - y0) * dx
    if (y1.max() < 0 or y0.min() >= cv.h or max(x0.max(), xend.max()) < 0
            or min(x0.min(), xend.min()) >= (cv.w << XY_SHIFT)):
        return
    lo = np.maximum(y0, 0)
    counts = np.maximum(np.minimum(y1, cv.h) - lo, 0)
    total = int(counts.sum())
    if total == 0:
        return
    idx = np.repeat(np.arange(len(y0)), counts)
    rows = lo[idx] + np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    xs = x0[idx] + (rows - y0[idx]) * dx[idx]
    order = np.lexsort((xs, rows))
    rows, xs = rows[order], xs[order]
    # pair crossings within each row (a closed polygon crosses every row an even number of times)
    first = np.searchsorted(rows, rows, side="left")
    pos = np.arange(total) - first
    a = np.flatnonzero((pos % 2 == 0) & (np.arange(total) + 1 < total))
    a = a[rows[np.minimum(a + 1, total - 1)] == rows[a]]
    # a run covers the pixels whose x lies between the crossings: ceil(left) .. floor(right)
    cv.spans(rows[a], (xs[a] + XY_ONE - 1) >> XY_SHIFT, xs[a + 1] >> XY_SHIFT)


# ----------------------------------------------------------------------------------------------- circles
def circle_mid(cv: Canvas, cx: int, cy: int, r: int, fill: bool) -> None:
    """The midpoint circle (thickness 1 or filled, LINE_8). Its step (dx, dy) has dx = isqrt(r^2 - dy^2)
    for dy = 0 .. isqrt(r^2 / 2) and paints rows cy -/+ dy at x = cx -/+ dx and rows cy -/+ dx at
    x = cx -/+ dy; each row of the image inside the circle is worked out on its own."""
    if r < 0:
        return
    rr = r * r
    dmax = math.isqrt(rr // 2)
    rows, x1s, x2s = [], [], []
    for y in range(max(cy - r, 0), min(cy + r + 1, cv.h)):
        d = abs(y - cy)
        if d <= dmax:  # the step with dy == d
            ddx = math.isqrt(rr - d * d)
            if fill:
                rows.append(y), x1s.append(cx - ddx), x2s.append(cx + ddx)
            else:
                rows += [y, y]
                x1s += [cx - ddx, cx + ddx]
                x2s += [cx - ddx, cx + ddx]
        hi = min(math.isqrt(rr - d * d), dmax)  # the steps whose dx == d: dy in [lo, hi]
        rest = rr - (d + 1) * (d + 1)
        lo = math.isqrt(rest) + 1 if rest >= 0 else 0
        if lo <= hi:
            if fill:
                rows.append(y), x1s.append(cx - hi), x2s.append(cx + hi)
            else:
                rows += [y, y]
                x1s += [cx + lo, cx - hi]
                x2s += [cx + hi, cx - lo]
    cv.spans(rows, x1s, x2s)


def ellipse_poly(cx: float, cy: float, aw: float, ah: float, angle: int, arc0: int, arc1: int,
                 delta: int) -> list[tuple[float, float]]:
    """Vertices of an elliptic arc every ``delta`` degrees (OpenCV's ellipse2Poly, in doubles)."""
    while angle < 0:
        angle += 360
    while angle > 360:
        angle -= 360
    if arc0 > arc1:
        arc0, arc1 = arc1, arc0
    while arc0 < 0:
        arc0 += 360
        arc1 += 360
    while arc1 > 360:
        arc1 -= 360
        arc0 -= 360
    if arc1 - arc0 > 360:
        arc0, arc1 = 0, 360
    a = angle + 360 if angle < 0 else angle
    alpha, beta = _SIN[450 - a], _SIN[a]
    out = []
    for i in range(arc0, arc1 + delta, delta):
        t = min(i, arc1)
        if t < 0:
            t += 360
        x = aw * _SIN[450 - t]
        y = ah * _SIN[t]
        out.append((cx + x * alpha - y * beta, cy + x * beta + y * alpha))
    if len(out) == 1:
        out = [(cx, cy), (cx, cy)]
    return out


def ellipse_ex(cv: Canvas, center: tuple[int, int], axes: tuple[int, int], angle: int, arc0: int, arc1: int,
               thickness: int, line_type: int) -> None:
    """An elliptic arc (fixed-point centre and axes) drawn as a polyline, or filled (thickness < 0)."""
    aw, ah = abs(axes[0]), abs(axes[1])
    delta = (max(aw, ah) + HALF) >> XY_SHIFT
    delta = 90 if delta < 3 else 30 if delta < 10 else 18 if delta < 15 else 5
    poly = ellipse_poly(float(center[0]), float(center[1]), float(aw), float(ah), angle, arc0, arc1, delta)
    v: list[tuple[int, int]] = []
    for x, y in poly:
        hx = cv_round(x / XY_ONE) << XY_SHIFT
        hy = cv_round(y / XY_ONE) << XY_SHIFT
        pt = (hx + cv_round(x - hx), hy + cv_round(y - hy))
        if not v or pt != v[-1]:
            v.append(pt)
    if len(v) <= 1:
        v = [tuple(center), tuple(center)]
    if thickness >= 0:
        polyline(cv, v, False, thickness, line_type, XY_SHIFT)
    elif arc1 - arc0 >= 360:
        fill_convex(cv, v, line_type, XY_SHIFT)
    else:
        v.append(tuple(center))
        edges: list = []
        collect_edges(cv, v, edges, line_type, XY_SHIFT)
        fill_edges(cv, edges, line_type)


# ---------------------------------------------------------------------------------------- thick polylines
def thick_line(cv: Canvas, p0: tuple[int, int], p1: tuple[int, int], thickness: int, line_type: int,
               caps: int, shift: int) -> None:
    """A segment of any thickness: caps bit 1 rounds the start, bit 2 the end (points with ``shift``)."""
    if thickness > 1 and shift == 0:
        # as OpenCV 5, a thick segment between integer points is first clipped to the image grown by
        # the thickness on every side (which moves far endpoints, and with them the rounding)
        ok, ax, ay, bx, by = clip_line(cv.w + 2 * thickness, cv.h + 2 * thickness, p0[0] + thickness,
                                       p0[1] + thickness, p1[0] + thickness, p1[1] + thickness)
        if not ok:
            return
        p0, p1 = (ax - thickness, ay - thickness), (bx - thickness, by - thickness)
    up = XY_SHIFT - shift
    x0, y0, x1, y1 = p0[0] << up, p0[1] << up, p1[0] << up, p1[1] << up
    if thickness <= 1:
        thin_line(cv, x0, y0, x1, y1, line_type, shift)
        return
    fdx, fdy = (x0 - x1) / XY_ONE, (y1 - y0) / XY_ONE
    r2 = fdx * fdx + fdy * fdy
    odd = thickness & 1
    half = thickness << (XY_SHIFT - 1)
    if abs(r2) > np.finfo(np.float64).eps:
        k = (half + odd * XY_ONE * 0.5) / math.sqrt(r2)
        ox, oy = cv_round(fdy * k), cv_round(fdx * k)
        fill_convex(cv, [(x0 + ox, y0 + oy), (x0 - ox, y0 - oy), (x1 - ox, y1 - oy), (x1 + ox, y1 + oy)],
                    line_type, XY_SHIFT)
    for bit, (x, y) in ((1, (x0, y0)), (2, (x1, y1))):
        if caps & bit:
            if line_type < LINE_AA:
                circle_mid(cv, (x + HALF) >> XY_SHIFT, (y + HALF) >> XY_SHIFT, (half + HALF) >> XY_SHIFT, True)
            else:
                ellipse_ex(cv, (x, y), (half, half), 0, 0, 360, -1, line_type)


def polyline(cv: Canvas, pts: list[tuple[int, int]], closed: bool, thickness: int, line_type: int,
             shift: int) -> None:
    """Consecutive thick segments; an open polyline has round caps at both ends, every joint is round."""
    n = len(pts)
    if n == 0:
        return
    p0 = pts[n - 1] if closed else pts[0]
    caps = 2 if closed else 3
    for p in pts[0 if closed else 1:]:
        thick_line(cv, p0, p, thickness, line_type, caps, shift)
        p0 = p
        caps = 2
