"""Drawing, in place and returning None as MNN does: line, arrowedLine, circle, ellipse, rectangle,
polylines, fillPoly, fillConvexPoly and drawContours.

Pixels follow OpenCV's rasterisation rules (``_raster``): fixed-point coordinates with ``shift``
fractional bits, line types 4, 8 and LINE_AA, ellipses as polygons, OpenCV's thickness rules. Colours are
OpenCV Scalars (a number is (v, 0, 0, 0)) saturated to the image type. Points may be tuples, lists, arrays
or Vars; fractional coordinates are truncated, as real MNN does.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

import numpy as np

from . import _raster as R
from ._common import to_numpy

__all__ = ["line", "arrowedLine", "circle", "ellipse", "rectangle", "polylines", "fillPoly", "fillConvexPoly",
           "drawContours"]

MAX_THICKNESS = 32767
_INT32 = 2 ** 31


# -------------------------------------------------------------------------------------------- arguments
def _target(img: Any) -> np.ndarray:
    """A writable array of the image ([h, w] or [h, w, c]; a batch of one is its image)."""
    from ..var import Var
    if isinstance(img, Var):
        arr = np.array(img.read_view())
    elif isinstance(img, np.ndarray):
        if not img.flags.writeable:
            raise ValueError("img: the array is read-only and cannot be drawn on")
        arr = img
    else:
        raise TypeError(f"img must be an image Var or ndarray, not {type(img).__name__}")
    view = arr[0] if arr.ndim == 4 and arr.shape[0] == 1 else arr
    if view.ndim not in (2, 3):
        raise ValueError(f"img must be an image of shape [h, w], [h, w, c] or [1, h, w, c], got {list(arr.shape)}")
    if view.ndim == 3 and view.shape[2] > 4:
        raise ValueError(f"drawing supports images of at most 4 channels, got {view.shape[2]}")
    if view.dtype.kind not in "iuf":
        raise TypeError(f"img: cannot draw on an image of dtype {view.dtype}")
    return arr


def _commit(img: Any, arr: np.ndarray) -> None:
    from ..var import Var
    if isinstance(img, Var):
        img.write(arr)


def _canvas(arr: np.ndarray, color: Any) -> R.Canvas:
    """The canvas of an image with ``color`` (an OpenCV Scalar) saturated to its type."""
    view = arr[0] if arr.ndim == 4 else arr
    cn = view.shape[2] if view.ndim == 3 else 1
    if isinstance(color, numbers.Number):
        vals = [float(color), 0.0, 0.0, 0.0]
    else:
        vals = [float(v) for v in np.asarray(to_numpy(color), np.float64).ravel()][:4]
        vals += [0.0] * (4 - len(vals))
    vals = vals[:cn]
    dt = view.dtype
    if dt.kind in "iu":
        info = np.iinfo(dt)
        raw = [int(min(max(round(v), info.min), info.max)) if math.isfinite(v) else (info.max if v > 0 else
               info.min if v < 0 else 0) for v in vals]
        return R.Canvas(view, np.array(raw, dt))
    return R.Canvas(view, np.array(vals, np.float64).astype(dt))


def _int(v: Any, name: str) -> int:
    f = float(v)
    if not math.isfinite(f) or abs(f) >= _INT32:
        raise ValueError(f"{name} must be a finite 32-bit integer, got {v!r}")
    return int(f)  # fractional values truncate, as real MNN


def _point(p: Any, name: str) -> tuple[int, int]:
    vals = np.asarray(to_numpy(p) if not isinstance(p, (list, tuple)) else p, np.float64).ravel()
    if vals.size != 2:
        raise ValueError(f"{name} must be a point (x, y), got {p!r}")
    return _int(vals[0], name), _int(vals[1], name)


def _contour(c: Any, name: str) -> list[tuple[int, int]]:
    """Points of one contour: flat [x0, y0, x1, y1, ...], [n, 2], [n, 1, 2], an ndarray or a Var."""
    vals = np.asarray(to_numpy(c), np.float64).ravel()
    if vals.size % 2:
        raise ValueError(f"{name}: a contour needs (x, y) pairs, got {vals.size} values")
    if vals.size and (not np.isfinite(vals).all() or np.abs(vals).max() >= _INT32):
        raise ValueError(f"{name}: contour coordinates must be finite 32-bit integers")
    v = vals.astype(np.int64).reshape(-1, 2)
    return [(int(x), int(y)) for x, y in v]


def _contours(pts: Any, name: str) -> list[list[tuple[int, int]]]:
    """A list of contours (as OpenCV: an array or Var is one contour, a list holds one per item)."""
    from ..var import Var
    if isinstance(pts, (np.ndarray, Var)):
        return [_contour(pts, name)]
    if not isinstance(pts, (list, tuple)):
        raise TypeError(f"{name} must be a list of contours, not {type(pts).__name__}")
    return [_contour(c, name) for c in pts]


def _line_type(lt: Any, arr: np.ndarray) -> int:
    t = int(lt)
    if t not in (0, 1, 4, 8) and t < R.LINE_AA:
        raise ValueError(f"lineType must be cv.LINE_4, cv.LINE_8 or cv.LINE_AA, got {lt}")
    if t == R.LINE_AA and arr.dtype != np.uint8:  # anti-aliasing is for 8-bit images only
        t = 8
    return t


def _shift(shift: Any) -> int:
    s = int(shift)
    if not 0 <= s <= R.XY_SHIFT:
        raise ValueError(f"shift must be in [0, {R.XY_SHIFT}], got {shift}")
    return s


def _thickness(t: Any, lo: int = -_INT32) -> int:
    t = int(t)
    if not lo <= t <= MAX_THICKNESS:
        raise ValueError(f"thickness must be in [{max(lo, -1) if lo > -_INT32 else 'any negative'}, "
                         f"{MAX_THICKNESS}], got {t}")
    return t


# --------------------------------------------------------------------------------------------- functions
def line(img: Any, pt1: Any, pt2: Any, color: Any, thickness: int = 1, lineType: int = 8, shift: int = 0) -> None:
    """Draw the segment pt1-pt2 (thickness 1..32767, round ends) in place."""
    arr = _target(img)
    _line(arr, _point(pt1, "pt1"), _point(pt2, "pt2"), color, _thickness(thickness, 1), lineType, shift)
    _commit(img, arr)


def _line(arr, p1, p2, color, thickness, lineType, shift):
    cv = _canvas(arr, color)
    R.thick_line(cv, p1, p2, thickness, _line_type(lineType, cv.arr), 3, _shift(shift))


def arrowedLine(img: Any, pt1: Any, pt2: Any, color: Any, thickness: int = 1, lineType: int = 8, shift: int = 0,
                tipLength: float = 0.1) -> None:
    """Draw an arrow from pt1 to pt2 whose two tip strokes are ``tipLength`` times its length (in place)."""
    arr = _target(img)
    p1, p2 = _point(pt1, "pt1"), _point(pt2, "pt2")
    t = _thickness(thickness, 1)
    tip = math.hypot(p1[0] - p2[0], p1[1] - p2[1]) * float(tipLength)
    _line(arr, p1, p2, color, t, lineType, shift)
    angle = math.atan2(p1[1] - p2[1], p1[0] - p2[0])
    for turn in (math.pi / 4, -math.pi / 4):
        p = (R.cv_round(p2[0] + tip * math.cos(angle + turn)), R.cv_round(p2[1] + tip * math.sin(angle + turn)))
        _line(arr, p, p2, color, t, lineType, shift)
    _commit(img, arr)


def circle(img: Any, center: Any, radius: int, color: Any, thickness: int = 1, lineType: int = 8,
           shift: int = 0) -> None:
    """Draw a circle (filled when thickness < 0) in place."""
    arr = _target(img)
    cv = _canvas(arr, color)
    cx, cy = _point(center, "center")
    r = _int(radius, "radius")
    if r < 0:
        raise ValueError(f"radius must be >= 0, got {radius}")
    t, lt, s = _thickness(thickness), _line_type(lineType, cv.arr), _shift(shift)
    if t > 1 or lt != 8 or s > 0:
        up = R.XY_SHIFT - s
        R.ellipse_ex(cv, (cx << up, cy << up), (r << up, r << up), 0, 0, 360, t, lt)
    else:
        R.circle_mid(cv, cx, cy, r, t < 0)
    _commit(img, arr)


def _is_box(v: Any) -> bool:
    """Whether ``v`` is a rotated rectangle ((cx, cy), (w, h), angle)."""
    return isinstance(v, (list, tuple)) and len(v) == 3 and np.size(v[0]) == 2 and np.size(v[1]) == 2


def ellipse(img: Any, center: Any, axes: Any, angle: Any = None, startAngle: Any = None, endAngle: Any = None,
            color: Any = None, thickness: int = 1, lineType: int = 8, shift: int = 0) -> None:
    """Draw an elliptic arc, or an ellipse inscribed in a rotated rectangle (in place).

    ``ellipse(img, center, axes, angle, startAngle, endAngle, color, thickness=1, lineType=LINE_8, shift=0)``
    (angles in degrees, rounded to integers), or ``ellipse(img, box, color, thickness=1, lineType=LINE_8)``
    with ``box`` = ((cx, cy), (width, height), angle)."""
    arr = _target(img)
    if _is_box(center):
        box, color = center, axes
        thickness = thickness if angle is None else angle
        lineType = lineType if startAngle is None else startAngle
        cv = _canvas(arr, color)
        _box_ellipse(cv, box, _thickness(thickness), _line_type(lineType, cv.arr))
    else:
        if angle is None or startAngle is None or endAngle is None or color is None:
            raise TypeError("ellipse needs center, axes, angle, startAngle, endAngle and color (or box, color)")
        cv = _canvas(arr, color)
        cx, cy = _point(center, "center")
        aw, ah = _point(axes, "axes")
        if aw < 0 or ah < 0:
            raise ValueError(f"axes must be >= 0, got {axes!r}")
        s = _shift(shift)
        up = R.XY_SHIFT - s
        R.ellipse_ex(cv, (cx << up, cy << up), (aw << up, ah << up), R.cv_round(float(angle)),
                     R.cv_round(float(startAngle)), R.cv_round(float(endAngle)), _thickness(thickness),
                     _line_type(lineType, cv.arr))
    _commit(img, arr)


def _box_ellipse(cv: R.Canvas, box: Any, thickness: int, lt: int) -> None:
    (bx, by), (bw, bh), ba = box
    f = np.float32  # a rotated rectangle holds float32 values
    bx, by, bw, bh = f(bx), f(by), f(bw), f(bh)
    if not all(math.isfinite(float(v)) for v in (bx, by, bw, bh, ba)) or bw < 0 or bh < 0:
        raise ValueError(f"box must have a finite centre and non-negative size, got {box!r}")
    cx, cy = R.cv_round(float(bx)), R.cv_round(float(by))
    cx = (cx << R.XY_SHIFT) + R.cv_round(float((bx - f(cx)) * f(R.XY_ONE)))
    cy = (cy << R.XY_SHIFT) + R.cv_round(float((by - f(cy)) * f(R.XY_ONE)))
    aw, ah = R.cv_round(float(bw)), R.cv_round(float(bh))
    aw = (aw << (R.XY_SHIFT - 1)) + R.cv_round(float((bw - f(aw)) * f(R.HALF)))
    ah = (ah << (R.XY_SHIFT - 1)) + R.cv_round(float((bh - f(ah)) * f(R.HALF)))
    R.ellipse_ex(cv, (cx, cy), (aw, ah), R.cv_round(float(ba)), 0, 360, thickness, lt)


def rectangle(img: Any, *args: Any, **kwargs: Any) -> None:
    """Draw an up-right rectangle (filled when thickness < 0) in place:
    ``rectangle(img, pt1, pt2, color, thickness=1, lineType=LINE_8, shift=0)`` with opposite corners, or
    ``rectangle(img, rec, color, thickness=1, lineType=LINE_8, shift=0)`` with rec = (x, y, w, h)."""
    first = args[0] if args else kwargs.get("rec", kwargs.get("pt1"))
    is_rec = first is not None and np.size(to_numpy(first) if not isinstance(first, (list, tuple)) else first) == 4
    names = (["rec"] if is_rec else ["pt1", "pt2"]) + ["color", "thickness", "lineType", "shift"]
    if len(args) > len(names):
        raise TypeError(f"rectangle takes at most {len(names)} arguments after img, got {len(args)}")
    a = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names or k in a:
            raise TypeError(f"rectangle: unexpected or repeated argument {k!r}")
        a[k] = v
    if "color" not in a:
        raise TypeError("rectangle needs a color")
    arr = _target(img)
    view = arr[0] if arr.ndim == 4 else arr
    s = _shift(a.get("shift", 0))
    if is_rec:
        x, y, w, h = [_int(v, "rec") for v in np.asarray(to_numpy(a["rec"]), np.float64).ravel()]
        one = 1 << s  # as OpenCV: crop to just around the image, then corners tl and br - (1, 1)
        x1, y1 = max(x, -one), max(y, -one)
        x2, y2 = min(x + w, -one + ((view.shape[1] + 2) << s)), min(y + h, -one + ((view.shape[0] + 2) << s))
        if x2 <= x1 or y2 <= y1:
            return
        p1, p2 = (x1, y1), (x2 - one, y2 - one)
    else:
        if "pt1" not in a or "pt2" not in a:
            raise TypeError("rectangle needs pt1 and pt2 (or rec)")
        p1, p2 = _point(a["pt1"], "pt1"), _point(a["pt2"], "pt2")
    cv = _canvas(arr, a["color"])
    t, lt = _thickness(a.get("thickness", 1)), _line_type(a.get("lineType", 8), cv.arr)
    quad = [p1, (p2[0], p1[1]), p2, (p1[0], p2[1])]
    if t >= 0:
        R.polyline(cv, quad, True, t, lt, s)
    else:
        R.fill_convex(cv, quad, lt, s)
    _commit(img, arr)


def polylines(img: Any, pts: Any, isClosed: bool, color: Any, thickness: int = 1, lineType: int = 8,
              shift: int = 0) -> None:
    """Draw one or more polygonal chains (closed when isClosed) in place."""
    arr = _target(img)
    cv = _canvas(arr, color)
    t, lt, s = _thickness(thickness, 0), _line_type(lineType, cv.arr), _shift(shift)
    for c in _contours(pts, "pts"):
        R.polyline(cv, c, bool(isClosed), t, lt, s)
    _commit(img, arr)


def fillPoly(img: Any, pts: Any, color: Any, lineType: int = 8, shift: int = 0, offset: Any = (0, 0)) -> None:
    """Fill the area bounded by one or more polygons (even-odd rule, outlines included) in place."""
    arr = _target(img)
    cv = _canvas(arr, color)
    lt, s = _line_type(lineType, cv.arr), _shift(shift)
    off = (0, 0) if offset is None else _point(offset, "offset")
    edges: list = []
    for c in _contours(pts, "pts"):
        R.collect_edges(cv, c, edges, lt, s, off)
    R.fill_edges(cv, edges, lt)
    _commit(img, arr)


def fillConvexPoly(img: Any, points: Any, color: Any, lineType: int = 8, shift: int = 0) -> None:
    """Fill a convex polygon (faster than fillPoly; a non-convex one is filled row by row between its
    left and right chains, as OpenCV) in place."""
    arr = _target(img)
    cv = _canvas(arr, color)
    R.fill_convex(cv, _contour(points, "points"), _line_type(lineType, cv.arr), _shift(shift))
    _commit(img, arr)


def drawContours(img: Any, contours: Sequence[Any], contourIdx: int, color: Any, thickness: int = 1,
                 lineType: int = 8, hierarchy: Any = None, maxLevel: int = 2 ** 31 - 1,
                 offset: Any = (0, 0)) -> None:
    """Draw closed contour outlines, or fill them (thickness < 0, even-odd over all drawn contours);
    contourIdx < 0 draws every contour (in place). ``hierarchy`` is not supported (MNN has none)."""
    arr = _target(img)
    if hierarchy is not None and int(maxLevel) != 0:
        raise NotImplementedError("drawContours: drawing by hierarchy is not supported; pass hierarchy=None")
    if not isinstance(contours, (list, tuple)):
        contours = [contours]
    n = len(contours)
    idx = int(contourIdx)
    if idx >= n:
        raise ValueError(f"contourIdx {idx} is out of range for {n} contours")
    cv = _canvas(arr, color)
    t, lt = _thickness(thickness), _line_type(lineType, cv.arr)
    ox, oy = (0, 0) if offset is None else _point(offset, "offset")
    edges: list = []
    for i in (range(n) if idx < 0 else [idx]):
        pts = [(x + ox, y + oy) for x, y in _contour(contours[i], "contours")]
        if not pts:
            continue
        if t >= 0:
            for a, b in zip(pts, pts[1:] + pts[:1]):
                R.thick_line(cv, a, b, t, lt, 2, 0)
        else:
            R.collect_edges(cv, pts, edges, lt, 0)
    if t < 0:
        R.fill_edges(cv, edges, lt)
    _commit(img, arr)
