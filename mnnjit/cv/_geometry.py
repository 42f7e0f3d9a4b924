"""Geometric transforms: resize, warpAffine, warpPerspective, remap, flip, rotate, getRectSubPix,
convertMaps and the transform builders (getRotationMatrix2D, getAffineTransform, getPerspectiveTransform,
invertAffineTransform)."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .._dtypes import F32
from ..graph import const_node
from ..imageprocess import CVMatrix
from ..ops import build as B
from ._common import as_hwc, float_list, image_node, out_var, scalar4, size2, to_numpy
from ._constants import INTER_LINEAR, WARP_INVERSE_MAP

#: MNN's BORDER_* values -> OpenCV's (MNN: 0 constant, 1 reflect-101, 2 reflect; 3 wrap and 4 reflect-101
#: are OpenCV's own values, accepted too).
BORDER_TO_CV = {0: 0, 1: 4, 2: 2, 3: 3, 4: 4}


def cv_border(mode: int, name: str = "borderMode") -> int:
    """OpenCV's border code for an MNN BORDER_* value."""
    try:
        return BORDER_TO_CV[int(mode)]
    except KeyError:
        raise ValueError(f"unsupported {name} {mode}: use cv.BORDER_CONSTANT, cv.BORDER_REFLECT or "
                         "cv.BORDER_REFLECT_101") from None


def _interp(flag: int) -> int:
    interp = int(flag) & 7
    if interp not in (0, 1, 2, 3, 4, 5, 6):
        raise ValueError(f"unknown interpolation {flag}")
    return interp


def _post(node, code, mean, norm):
    """Apply resize/warpAffine's extra code/mean/norm steps as graph nodes: cvtColor, (x - mean) * norm."""
    if code is not None and int(code) >= 0:
        from ._color import cvt_node
        node = cvt_node(node, int(code))
    mean, norm = float_list(mean), float_list(norm)
    if mean or norm:
        c = node.shape[-1]
        m = np.array((mean + [0.0] * c)[:c] if mean else [0.0] * c, np.float32)
        n = np.array((norm + [1.0] * c)[:c] if norm else [1.0] * c, np.float32)
        node = B.cast_node(node, F32)
        node = B.make_node("sub", (node, const_node(m)), fmt="NHWC")
        node = B.make_node("mul", (node, const_node(n)), fmt="NHWC")
    return out_var(node)


def resize(src: Any, dsize: Any = None, fx: float | None = None, fy: float | None = None,
           interpolation: int = INTER_LINEAR, code: int | None = None, mean: Sequence[float] = (),
           norm: Sequence[float] = ()):
    """Resize an image to ``dsize`` = (width, height), or by factors (fx, fy) when dsize is empty/None.

    ``code`` (a COLOR_* code) converts colours, ``mean``/``norm`` give float32 ``(x - mean) * norm``."""
    if dsize is None and fx is None and fy is None:
        raise ValueError("resize must set dsize or fx,fy.")
    node = as_hwc(image_node(src))
    h, w = node.shape[0], node.shape[1]
    if h == 0 or w == 0:
        raise ValueError(f"resize: the image is empty (shape {list(node.shape)})")
    dw, dh = (0, 0) if dsize is None else size2(dsize, "dsize")
    fx = float(fx or 0.0)
    fy = float(fy or 0.0)
    if dw > 0 and dh > 0:
        sx, sy = 1.0 / (dw / w), 1.0 / (dh / h)  # as OpenCV: 1 / inv_scale
    else:
        if fx <= 0 or fy <= 0:
            raise ValueError(f"resize: dsize {dsize!r} is empty and fx={fx}, fy={fy} are not both positive")
        dw, dh = int(round(w * fx)), int(round(h * fy))
        sx, sy = 1.0 / fx, 1.0 / fy
    if dw <= 0 or dh <= 0 or h == 0 or w == 0:
        raise ValueError(f"resize: cannot resize an image of shape {list(node.shape)} to {dw}x{dh}")
    interp = _interp(interpolation)
    out = node
    if (dh, dw) != (h, w) or interp == 3:
        # a pending RGB<->BGR swap (e.g. from imread) commutes with resizing: swap the smaller result instead
        swapped = node.op == "cvt_color" and node.attrs.get("code") == 4 and node.value is None
        src = node.inputs[0] if swapped else node
        out = B.make_node("resize_image", (src,), {"size": (dh, dw), "interp": interp, "scale": (sy, sx)},
                          fmt="NHWC")
        if swapped:
            out = B.make_node("cvt_color", (out,), {"code": 4}, fmt="NHWC")
    return _post(out, code, mean, norm)


def matrix_of(M: Any, rows: int) -> np.ndarray:
    """A float64 [rows, 3] matrix from a CVMatrix, Var, ndarray or list (6 or 9 values)."""
    if isinstance(M, CVMatrix):
        m = M.matrix()
    else:
        m = np.asarray(to_numpy(M), dtype=np.float64)
        if m.size == 6:
            m = np.vstack([m.reshape(2, 3), [0.0, 0.0, 1.0]])
        elif m.size == 9:
            m = m.reshape(3, 3)
        else:
            raise ValueError(f"a transform matrix needs 6 or 9 values, got shape {list(m.shape)}")
    return m[:rows]


def _affine_inverse(m: np.ndarray) -> np.ndarray:
    """The inverse of a 2x3 affine map as OpenCV's warpAffine computes it (1/det, 0 when singular;
    non-finite entries stay non-finite, so every pixel reads the border)."""
    (a, b, c), (d, e, f) = m[0], m[1]
    with np.errstate(all="ignore"):
        det = a * e - b * d
        det = 1.0 / det if det != 0 else 0.0
        a11, a22, a12, a21 = e * det, a * det, b * -det, d * -det
        return np.array([[a11, a12, -a11 * c - a12 * f], [a21, a22, -a21 * c - a22 * f], [0.0, 0.0, 1.0]])


def _inverse3(m: np.ndarray) -> np.ndarray:
    """The inverse of a 3x3 matrix as OpenCV's invert (DECOMP_LU) computes it for 3x3: the adjugate over
    the determinant, zeros when it is singular."""
    with np.errstate(all="ignore"):
        det = (m[0, 0] * (m[1, 1] * m[2, 2] - m[1, 2] * m[2, 1]) - m[0, 1] * (m[1, 0] * m[2, 2] - m[1, 2] * m[2, 0])
               + m[0, 2] * (m[1, 0] * m[2, 1] - m[1, 1] * m[2, 0]))
        if det == 0:
            return np.zeros((3, 3))
        d = 1.0 / det
        return np.array([
            [(m[1, 1] * m[2, 2] - m[1, 2] * m[2, 1]) * d, (m[0, 2] * m[2, 1] - m[0, 1] * m[2, 2]) * d,
             (m[0, 1] * m[1, 2] - m[0, 2] * m[1, 1]) * d],
            [(m[1, 2] * m[2, 0] - m[1, 0] * m[2, 2]) * d, (m[0, 0] * m[2, 2] - m[0, 2] * m[2, 0]) * d,
             (m[0, 2] * m[1, 0] - m[0, 0] * m[1, 2]) * d],
            [(m[1, 0] * m[2, 1] - m[1, 1] * m[2, 0]) * d, (m[0, 1] * m[2, 0] - m[0, 0] * m[2, 1]) * d,
             (m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0]) * d]])


def warpAffine(src: Any, M: Any, dsize: Any, flag: int = INTER_LINEAR, borderMode: int = 0, borderValue: Any = 0,
               code: int | None = None, mean: Sequence[float] = (), norm: Sequence[float] = ()):
    """Apply the affine transform ``M`` (2x3 source->destination, or a CVMatrix) to an image of output
    size ``dsize`` = (width, height); flag may include ``WARP_INVERSE_MAP``."""
    node = as_hwc(image_node(src))
    dw, dh = size2(dsize, "dsize")
    if dw <= 0 or dh <= 0:
        raise ValueError(f"warpAffine: dsize must be positive, got {dsize!r}")
    m = matrix_of(M, 3)
    m = np.vstack([m[:2], [0.0, 0.0, 1.0]])
    inv = m if int(flag) & WARP_INVERSE_MAP else _affine_inverse(m)
    attrs = {"M": tuple(float(v) for v in inv[:2].ravel()), "size": (dh, dw), "interp": _interp(flag),
             "border": cv_border(borderMode), "value": scalar4(borderValue, node.shape[2])}
    out = B.make_node("warp_affine", (node,), attrs, fmt="NHWC")
    return _post(out, code, mean, norm)


def warpPerspective(src: Any, M: Any, dsize: Any, flag: int = INTER_LINEAR, borderMode: int = 0,
                    borderValue: Any = 0):
    """Apply the perspective transform ``M`` (3x3 source->destination, or a CVMatrix)."""
    node = as_hwc(image_node(src))
    dw, dh = size2(dsize, "dsize")
    if dw <= 0 or dh <= 0:
        raise ValueError(f"warpPerspective: dsize must be positive, got {dsize!r}")
    m = matrix_of(M, 3)
    inv = m if int(flag) & WARP_INVERSE_MAP else _inverse3(m)
    attrs = {"M": tuple(float(v) for v in inv.ravel()), "size": (dh, dw), "interp": _interp(flag),
             "border": cv_border(borderMode), "value": scalar4(borderValue, node.shape[2])}
    return out_var(B.make_node("warp_perspective", (node,), attrs, fmt="NHWC"))


def remap(src: Any, map1: Any, map2: Any, interpolation: int, borderMode: int = 0, borderValue: Any = 0):
    """Sample ``src`` at (map1, map2) = (x, y) float coordinates ([h, w] each), or map1 [h, w, 2] and map2 None."""
    node = as_hwc(image_node(src))
    m1 = np.asarray(to_numpy(map1))
    if map2 is None or (m1.ndim == 3 and m1.shape[2] == 2):
        if m1.ndim != 3 or m1.shape[2] != 2:
            raise ValueError(f"remap: map1 must be [h, w, 2] when map2 is None, got {list(m1.shape)}")
        mx, my = m1[..., 0], m1[..., 1]
    else:
        mx, my = m1, np.asarray(to_numpy(map2))
    mx = np.asarray(mx, np.float32).reshape(mx.shape[0], -1)
    my = np.asarray(my, np.float32).reshape(my.shape[0], -1)
    if mx.shape != my.shape:
        raise ValueError(f"remap: map1 {list(mx.shape)} and map2 {list(my.shape)} differ in shape")
    attrs = {"interp": _interp(interpolation), "border": cv_border(borderMode),
             "value": scalar4(borderValue, node.shape[2])}
    return out_var(B.make_node("remap", (node, const_node(np.ascontiguousarray(mx)),
                                          const_node(np.ascontiguousarray(my))), attrs, fmt="NHWC"))


def convertMaps(map1: Any, map2: Any, dstmap1type: int, nninterpolation: bool = False):
    """Convert float maps: to fixed point (dstmap1type CV_16SC2 = 11: integer [h, w, 2] coordinates and
    [h, w] 1/32-pixel table indices; int32 as MNN has no int16), or between [h, w] pairs (CV_32FC1 = 5)
    and one [h, w, 2] map (CV_32FC2 = 13)."""
    m1 = np.asarray(to_numpy(map1), np.float32)
    if map2 is None:
        mx, my = m1[..., 0], m1[..., 1]
    else:
        mx, my = m1.reshape(m1.shape[0], -1), np.asarray(to_numpy(map2), np.float32).reshape(m1.shape[0], -1)
    t = int(dstmap1type)
    if t == 11:
        if nninterpolation:
            xy = np.stack([np.rint(mx), np.rint(my)], -1).astype(np.int32)
            return image_var_nchw(xy), None
        ix = np.rint(mx.astype(np.float64) * 32).astype(np.int64)
        iy = np.rint(my.astype(np.float64) * 32).astype(np.int64)
        xy = np.stack([ix >> 5, iy >> 5], -1).astype(np.int32)
        frac = ((iy & 31) * 32 + (ix & 31)).astype(np.int32)
        return image_var_nchw(xy), image_var_nchw(frac)
    if t == 13:
        return image_var_nchw(np.stack([mx, my], -1).astype(np.float32)), None
    if t == 5:
        return image_var_nchw(mx.astype(np.float32)), image_var_nchw(my.astype(np.float32))
    raise ValueError(f"convertMaps: unsupported dstmap1type {dstmap1type} (use 5, 11 or 13)")


def image_var_nchw(arr: np.ndarray):
    """A constant Var (NHWC-labelled, as cv returns)."""
    from ._common import image_var
    return image_var(arr)


def flip(src: Any, flipCode: int):
    """Flip around the x axis (0), the y axis (> 0) or both (< 0)."""
    x = out_var(image_node(src))
    if flipCode == 0:
        return x[::-1]
    if flipCode > 0:
        return x[:, ::-1]
    return x[::-1, ::-1]


def rotate(src: Any, rotateMode: int):
    """Rotate by 90 degrees clockwise (0), 180 (1) or 90 counter-clockwise (2)."""
    x = out_var(image_node(src))
    perm = [1, 0] + list(range(2, x.ndim))
    if rotateMode == 0:
        return B.transpose(x, perm)[:, ::-1]
    if rotateMode == 1:
        return x[::-1, ::-1]
    if rotateMode == 2:
        return B.transpose(x, perm)[::-1]
    return x


def getRectSubPix(image: Any, patchSize: Any, center: Any):
    """The patch of ``patchSize`` = (w, h) centred at ``center`` with sub-pixel bilinear sampling
    (pixels outside the image replicate the border)."""
    node = as_hwc(image_node(image))
    pw, ph = size2(patchSize, "patchSize")
    c = [float(v) for v in np.asarray(to_numpy(center) if not isinstance(center, (list, tuple)) else center,
                                      np.float64).ravel()]
    x0 = c[0] - (pw - 1) * 0.5
    y0 = c[1] - (ph - 1) * 0.5
    ys, xs = np.mgrid[0:ph, 0:pw].astype(np.float32)
    mx = (xs + np.float32(x0)).astype(np.float32)
    my = (ys + np.float32(y0)).astype(np.float32)
    attrs = {"interp": 1, "border": 1, "value": (0.0,)}
    return out_var(B.make_node("remap", (node, const_node(mx), const_node(my)), attrs, fmt="NHWC"))


# ----------------------------------------------------------------------------- transform builders
def _points(v: Any, n: int, name: str) -> np.ndarray:
    p = np.asarray(to_numpy(v) if not isinstance(v, (list, tuple)) else
                   [to_numpy(i) if not isinstance(i, (int, float)) else i for i in v], np.float64).ravel()
    if p.size < 2 * n:
        raise ValueError(f"{name} needs {n} points ({2 * n} values), got {p.size} values")
    return p[: 2 * n].reshape(n, 2)


def affine_from_points(s: np.ndarray, d: np.ndarray) -> np.ndarray:
    """The 2x3 affine matrix mapping the 3 points ``s`` to ``d``."""
    a = np.zeros((6, 6))
    b = np.zeros(6)
    for i in range(3):
        a[2 * i, 0:3] = [s[i, 0], s[i, 1], 1]
        a[2 * i + 1, 3:6] = [s[i, 0], s[i, 1], 1]
        b[2 * i], b[2 * i + 1] = d[i]
    try:
        return np.linalg.solve(a, b).reshape(2, 3)
    except np.linalg.LinAlgError:
        return np.zeros((2, 3))


def perspective_from_points(s: np.ndarray, d: np.ndarray) -> np.ndarray:
    """The 3x3 homography mapping the 4 points ``s`` to ``d``."""
    a = np.zeros((8, 8))
    b = np.zeros(8)
    for i in range(4):
        x, y = s[i]
        u, v = d[i]
        a[i] = [x, y, 1, 0, 0, 0, -x * u, -y * u]
        a[i + 4] = [0, 0, 0, x, y, 1, -x * v, -y * v]
        b[i], b[i + 4] = u, v
    try:
        h = np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        return np.zeros((3, 3))
    return np.append(h, 1.0).reshape(3, 3)


def getRotationMatrix2D(center: Any, angle: float, scale: float) -> CVMatrix:
    """The 2x3 rotation (counter-clockwise degrees) + scale about ``center``, as a CVMatrix (MNN's type)."""
    cx, cy = [float(v) for v in np.asarray(to_numpy(center) if not isinstance(center, (list, tuple)) else center,
                                           np.float64).ravel()[:2]]
    a = math.radians(float(angle))
    alpha, beta = math.cos(a) * scale, math.sin(a) * scale
    return CVMatrix.from_array(np.array([[alpha, beta, (1 - alpha) * cx - beta * cy],
                                         [-beta, alpha, beta * cx + (1 - alpha) * cy]]))


def getAffineTransform(src: Any, dst: Any) -> CVMatrix:
    """The affine transform mapping 3 source points to 3 destination points (flat lists or [3, 2])."""
    return CVMatrix.from_array(affine_from_points(_points(src, 3, "src"), _points(dst, 3, "dst")))


def getPerspectiveTransform(src: Any, dst: Any) -> CVMatrix:
    """The perspective transform mapping 4 source points to 4 destination points."""
    return CVMatrix.from_array(perspective_from_points(_points(src, 4, "src"), _points(dst, 4, "dst")))


def invertAffineTransform(m: Any) -> CVMatrix:
    """The inverse of a 2x3 affine transform (zeros when singular, as OpenCV)."""
    a = matrix_of(m, 2)
    det = a[0, 0] * a[1, 1] - a[0, 1] * a[1, 0]
    if det == 0:
        return CVMatrix.from_array(np.zeros((2, 3)))
    inv = np.linalg.inv(np.vstack([a, [0, 0, 1]]))
    return CVMatrix.from_array(inv[:2])
