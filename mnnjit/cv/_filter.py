"""Image filtering: blur, boxFilter, sqrBoxFilter, GaussianBlur, Sobel, Scharr, Laplacian, spatialGradient,
filter2D, sepFilter2D, erode, dilate, bilateralFilter, pyrDown, pyrUp, threshold, adaptiveThreshold and the
kernel builders (getGaussianKernel, getDerivKernels, getGaborKernel, getStructuringElement)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._dtypes import F32, I32, U8
from ..ops import build as B
from ._common import as_hwc, image_node, image_var, keep_shape, out_var, plane_out, raw_image_node, size2, to_numpy
from ._geometry import cv_border
from ..ops.image_filter import gaussian_kernel, gaussian_taps

__all__ = ["blur", "boxFilter", "sqrBoxFilter", "GaussianBlur", "getGaussianKernel", "Sobel", "Scharr",
           "Laplacian", "getDerivKernels", "spatialGradient", "filter2D", "sepFilter2D", "erode", "dilate",
           "getStructuringElement", "bilateralFilter", "pyrDown", "pyrUp", "getGaborKernel", "threshold",
           "adaptiveThreshold"]

_DEPTH = {-1: None, 0: U8, 3: I32, 4: I32, 5: F32, 6: F32}


def _ddepth(ddepth: int, src_dtype: np.dtype) -> np.dtype:
    try:
        dt = _DEPTH[int(ddepth)]
    except KeyError:
        raise ValueError(f"unsupported ddepth {ddepth}: use -1, cv.CV_8U, cv.CV_16S, cv.CV_32S or cv.CV_32F") \
            from None
    return src_dtype if dt is None else dt


def getGaussianKernel(ksize: int, sigma: float):
    """Gaussian filter coefficients as a float32 [1, ksize] Var (MNN's shape)."""
    return image_var(gaussian_kernel(ksize, float(sigma)).astype(np.float32)[None, :])


def _sep(node, kx, ky, border: int, dtype, delta: float = 0.0, anchor=None, square: bool = False,
         fixed: bool = False):
    kx = tuple(float(v) for v in np.asarray(kx, np.float64).ravel())
    ky = tuple(float(v) for v in np.asarray(ky, np.float64).ravel())
    if anchor is None or tuple(anchor) == (-1, -1):
        anchor = (len(kx) // 2, len(ky) // 2)
    attrs = {"kx": kx, "ky": ky, "anchor": (int(anchor[0]), int(anchor[1])), "border": cv_border(border, "borderType"),
             "delta": float(delta), "dtype": np.dtype(dtype), "square": square, "fixed": fixed}
    return B.make_node("sep_filter", (node,), attrs, fmt="NHWC")


def _image(src):
    return as_hwc(image_node(src))


def GaussianBlur(src: Any, ksize: Any, sigmaX: float, sigmaY: float = 0.0, borderType: int = 1):
    """Gaussian smoothing with kernel ``ksize`` = (w, h) (0 = from sigma) and sigmas (sigmaY 0 = sigmaX)."""
    node = _image(src)
    kw, kh = size2(ksize, "ksize")
    sx = float(sigmaX)
    sy = float(sigmaY) if sigmaY else sx
    if kw <= 0 and sx > 0:
        kw = int(round(sx * (3 if node.dtype == U8 else 4) * 2 + 1)) | 1
    if kh <= 0 and sy > 0:
        kh = int(round(sy * (3 if node.dtype == U8 else 4) * 2 + 1)) | 1
    if kw <= 0 or kh <= 0:
        raise ValueError(f"GaussianBlur: ksize {ksize!r} and sigma {sigmaX} give no kernel")
    # taps folded to what can reach the image: memory follows the image, not sigma
    kx, ax = gaussian_taps(kw, sx, node.shape[1], cv_border(borderType, "borderType"))
    ky, ay = gaussian_taps(kh, sy, node.shape[0], cv_border(borderType, "borderType"))
    folded = len(kx) != kw or len(ky) != kh
    return plane_out(out_var(_sep(node, kx, ky, borderType, node.dtype, anchor=(ax, ay),
                                  fixed=node.dtype == U8 and not folded)))


def _box_size(ksize: Any) -> tuple[int, int]:
    """A box filter's (width, height), both positive."""
    kw, kh = size2(ksize, "ksize")
    if kw <= 0 or kh <= 0:
        raise ValueError(f"box filter: ksize must be positive, got {(kw, kh)}")
    return kw, kh


def boxFilter(src: Any, ddepth: int, ksize: Any, anchor: Any = (-1, -1), normalize: bool = True,
              borderType: int = 1):
    """Box filter (sum over ksize = (w, h), divided by the area when ``normalize``)."""
    if isinstance(anchor, bool):  # MNN's order: (src, ddepth, ksize, normalize, borderType)
        anchor, normalize = (-1, -1), anchor
    node = _image(src)
    kw, kh = _box_size(ksize)
    dt = _ddepth(ddepth, node.dtype)
    if normalize and node.dtype == U8 and dt == U8 and (kw * kh) % 2 == 0:
        # OpenCV rounds an 8-bit mean half up (132.5 -> 133; float taps would round to even): the
        # exact integer sums, then floor(sum / area + 1/2) (exact: a sum / area is 1/area or more
        # away from any other half)
        from .. import numpy as mnp
        sums = out_var(_sep(node, [1.0] * kw, [1.0] * kh, borderType, F32, anchor=anchor))
        return plane_out(mnp.floor(sums * np.float32(1.0 / (kw * kh)) + np.float32(0.5)).astype(np.uint8))
    sx = 1.0 / kw if normalize else 1.0
    sy = 1.0 / kh if normalize else 1.0
    return plane_out(out_var(_sep(node, [sx] * kw, [sy] * kh, borderType, dt, anchor=anchor)))


def blur(src: Any, ksize: Any, anchor: Any = (-1, -1), borderType: int = 1):
    """Normalized box filter (mean over ksize = (w, h))."""
    if isinstance(anchor, int) and not isinstance(anchor, bool):
        anchor, borderType = (-1, -1), anchor
    return boxFilter(src, -1, ksize, anchor, True, borderType)


def sqrBoxFilter(src: Any, ddepth: int, ksize: Any, anchor: Any = (-1, -1), normalize: bool = True,
                 borderType: int = 1):
    """Box filter of the squared pixel values (float32 result for uint8 input, as MNN)."""
    if isinstance(anchor, bool):
        anchor, normalize = (-1, -1), anchor
    node = _image(src)
    kw, kh = _box_size(ksize)
    dt = F32 if int(ddepth) < 0 or node.dtype == U8 and int(ddepth) == 0 else _ddepth(ddepth, F32)
    sx = 1.0 / kw if normalize else 1.0
    sy = 1.0 / kh if normalize else 1.0
    return plane_out(out_var(_sep(node, [sx] * kw, [sy] * kh, borderType, dt, anchor=anchor, square=True)))


def _deriv_kernel(order: int, ksize: int) -> np.ndarray:
    if ksize == -1:  # Scharr
        return np.array([3.0, 10.0, 3.0]) if order == 0 else np.array([-1.0, 0.0, 1.0])
    if ksize == 1:
        ksize = 3 if order > 0 else 1
    if order >= ksize:
        raise ValueError(f"derivative order {order} needs a larger kernel than {ksize}")
    k = np.array([1.0])
    for _ in range(ksize - order - 1):
        k = np.convolve(k, [1.0, 1.0])
    for _ in range(order):
        k = np.convolve(k, [-1.0, 1.0])
    return k


def getDerivKernels(dx: int, dy: int, ksize: int, normalize: bool = False, ktype: int = 5):
    """The separable (kx, ky) kernels of Sobel/Scharr derivatives, as float32 [1, n] Vars."""
    kx = _deriv_kernel(int(dx), int(ksize))
    ky = _deriv_kernel(int(dy), int(ksize))
    if normalize:
        kx = kx / 2.0 ** (len(kx) - int(dx) * 2 - 1) if ksize > 0 else kx / 32.0 if dx == 0 else kx
        ky = ky / 2.0 ** (len(ky) - int(dy) * 2 - 1) if ksize > 0 else ky / 32.0 if dy == 0 else ky
    return image_var(kx.astype(np.float32)[None, :]), image_var(ky.astype(np.float32)[None, :])


def Sobel(src: Any, ddepth: int, dx: int, dy: int, ksize: int = 3, scale: float = 1.0, delta: float = 0.0,
          borderType: int = 1):
    """Sobel derivative (dx, dy) with an extended Sobel kernel of size ``ksize``."""
    node = _image(src)
    kx = _deriv_kernel(int(dx), int(ksize)) * float(scale)
    ky = _deriv_kernel(int(dy), int(ksize))
    return plane_out(out_var(_sep(node, kx, ky, borderType, _ddepth(ddepth, node.dtype), delta)))


def Scharr(src: Any, ddepth: int, dx: int, dy: int, scale: float = 1.0, delta: float = 0.0, borderType: int = 1):
    """Scharr 3x3 derivative (dx, dy in 0/1). dx = dy = 1 (OpenCV refuses it) filters with [-1, 0, 1] both
    ways, as real MNN does for its documented ``cv.Scharr(img, -1, 1, 1)``."""
    if int(dx) not in (0, 1) or int(dy) not in (0, 1) or int(dx) + int(dy) == 0:
        raise ValueError(f"Scharr: dx and dy must be 0 or 1 and not both 0, got ({dx}, {dy})")
    return Sobel(src, ddepth, dx, dy, -1, scale, delta, borderType)


def Laplacian(src: Any, ddepth: int, ksize: int = 1, scale: float = 1.0, delta: float = 0.0, borderType: int = 1):
    """Laplacian: d2/dx2 + d2/dy2 (ksize 1 uses the 3x3 aperture [[0,1,0],[1,-4,1],[0,1,0]])."""
    node = _image(src)
    ksize = int(ksize)
    if ksize == 1:
        k = np.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]], np.float64)
    elif ksize == 3:
        k = np.array([[2, 0, 2], [0, -8, 0], [2, 0, 2]], np.float64)
    else:
        d2 = _deriv_kernel(2, ksize)
        sm = _deriv_kernel(0, ksize)
        k = np.outer(sm, d2) + np.outer(d2, sm)
    return _filter2d(node, k * float(scale), _ddepth(ddepth, node.dtype), (-1, -1), float(delta), borderType)


def spatialGradient(src: Any, ksize: int = 3, borderType: int = 1):
    """(dx, dy) Sobel 3x3 first derivatives of a single-channel image ([h, w] int32 each)."""
    node = _image(src)
    if node.shape[2] != 1:
        raise ValueError(f"spatialGradient needs a single-channel image, got shape {list(node.shape)}")
    gx = Sobel(out_var(node), 4, 1, 0, 3, 1, 0, borderType)
    gy = Sobel(out_var(node), 4, 0, 1, 3, 1, 0, borderType)
    h, w = node.shape[0], node.shape[1]
    return B.reshape(gx, (h, w)), B.reshape(gy, (h, w))


def _filter2d(node, kernel, dtype, anchor, delta, borderType):
    k = np.asarray(kernel, np.float64)
    if k.ndim == 1:
        k = k[None, :]
    kh, kw = k.shape
    ax, ay = (kw // 2, kh // 2) if anchor is None or tuple(anchor) == (-1, -1) else (int(anchor[0]), int(anchor[1]))
    attrs = {"kernel": tuple(tuple(float(v) for v in row) for row in k), "anchor": (ax, ay),
             "border": cv_border(borderType, "borderType"), "delta": float(delta), "dtype": np.dtype(dtype)}
    return plane_out(out_var(B.make_node("filter2d", (node,), attrs, fmt="NHWC")))


def filter2D(src: Any, ddepth: int, kernel: Any, anchor: Any = (-1, -1), delta: float = 0.0, borderType: int = 1):
    """Correlate the image with ``kernel`` (OpenCV's filter2D)."""
    if isinstance(anchor, (int, float)) and not isinstance(anchor, bool):  # MNN's order (.., kernel, delta, border)
        anchor, delta, borderType = (-1, -1), anchor, delta if isinstance(delta, int) and delta else borderType
    node = _image(src)
    return _filter2d(node, np.asarray(to_numpy(kernel), np.float64), _ddepth(ddepth, node.dtype), anchor,
                     float(delta), borderType)


def sepFilter2D(src: Any, ddepth: int, kernelX: Any, kernelY: Any, anchor: Any = (-1, -1), delta: float = 0.0,
                borderType: int = 1):
    """Separable correlation: rows with ``kernelX``, then columns with ``kernelY``."""
    if isinstance(anchor, (int, float)) and not isinstance(anchor, bool):
        anchor, delta = (-1, -1), anchor
    node = _image(src)
    kx = np.asarray(to_numpy(kernelX), np.float64).ravel()
    ky = np.asarray(to_numpy(kernelY), np.float64).ravel()
    return plane_out(out_var(_sep(node, kx, ky, borderType, _ddepth(ddepth, node.dtype), float(delta), anchor)))


def getStructuringElement(shape: int, ksize: Any, anchor: Any = (-1, -1)):
    """A uint8 [h, w] structuring element: MORPH_RECT (0), MORPH_CROSS (1) or MORPH_ELLIPSE (2)."""
    w, h = size2(ksize, "ksize")
    ax, ay = (w // 2, h // 2) if tuple(anchor) == (-1, -1) else (int(anchor[0]), int(anchor[1]))
    k = np.zeros((h, w), np.uint8)
    if shape == 0 or (h == 1 and w == 1):
        k[:] = 1
    elif shape == 1:
        k[ay, :] = 1
        k[:, ax] = 1
    elif shape == 2:
        r, c = h // 2, w // 2
        inv_r2 = 1.0 / (r * r) if r else 0.0
        for i in range(h):  # one row span per kernel row (a small table)
            dy = i - r
            if abs(dy) <= r:
                dx = int(round(c * math.sqrt((r * r - dy * dy) * inv_r2)))
                k[i, max(c - dx, 0):min(c + dx + 1, w)] = 1
    else:
        raise ValueError(f"getStructuringElement: unknown shape {shape}")
    return image_var(k)


def _morph(op, src, kernel, anchor, iterations, borderType, borderValue):
    node = _image(src)
    k = np.asarray(to_numpy(kernel)) if kernel is not None else np.ones((3, 3), np.uint8)
    if k.size == 0:
        k = np.ones((3, 3), np.uint8)
    k = k.reshape(k.shape[0], -1)
    kh, kw = k.shape
    ax, ay = (kw // 2, kh // 2) if anchor is None or tuple(anchor) == (-1, -1) else (int(anchor[0]), int(anchor[1]))
    border = cv_border(borderType, "borderType")
    value = None if borderValue is None else float(np.asarray(borderValue, np.float64).ravel()[0])
    attrs = {"kernel": tuple(tuple(int(v != 0) for v in row) for row in k), "anchor": (ax, ay), "op": op,
             "iterations": int(iterations), "border": border, "value": value}
    return plane_out(out_var(B.make_node("morphology", (node,), attrs, fmt="NHWC")))


def erode(src: Any, kernel: Any, anchor: Any = (-1, -1), iterations: int = 1, borderType: int = 0,
          borderValue: Any = None):
    """Erosion (minimum over the structuring element); BORDER_CONSTANT ignores pixels outside."""
    if isinstance(anchor, int) and not isinstance(anchor, bool):  # MNN's order (src, kernel, iterations, border)
        anchor, iterations, borderType = (-1, -1), anchor, iterations if iterations != 1 else borderType
    return _morph("erode", src, kernel, anchor, iterations, borderType, borderValue)


def dilate(src: Any, kernel: Any, anchor: Any = (-1, -1), iterations: int = 1, borderType: int = 0,
           borderValue: Any = None):
    """Dilation (maximum over the structuring element); BORDER_CONSTANT ignores pixels outside."""
    if isinstance(anchor, int) and not isinstance(anchor, bool):
        anchor, iterations, borderType = (-1, -1), anchor, iterations if iterations != 1 else borderType
    return _morph("dilate", src, kernel, anchor, iterations, borderType, borderValue)


def bilateralFilter(src: Any, d: int, sigmaColor: float, sigmaSpace: float, borderType: int = 1):
    """Edge-preserving bilateral smoothing over a circular window of diameter ``d``."""
    plain = image_node(src)
    node = as_hwc(plain)
    attrs = {"d": int(d), "sigma_color": float(sigmaColor), "sigma_space": float(sigmaSpace),
             "border": cv_border(borderType, "borderType")}
    # real MNN keeps [h, w] and [h, w, 1] as given (unlike its other filters)
    return keep_shape(out_var(B.make_node("bilateral", (node,), attrs, fmt="NHWC")), plain.shape)


def pyrDown(src: Any, dstsize: Any = None, borderType: int = 1):
    """Gaussian blur (5x5 [1 4 6 4 1]/16) and drop every other row and column."""
    node = _image(src)
    h, w = node.shape[0], node.shape[1]
    dw, dh = ((w + 1) // 2, (h + 1) // 2) if dstsize is None or tuple(size2(dstsize, "dstsize")) == (0, 0) \
        else size2(dstsize, "dstsize")
    k = np.array([1, 4, 6, 4, 1], np.float64) / 16.0
    blurred = out_var(_sep(node, k, k, borderType, node.dtype, fixed=node.dtype == U8))
    return plane_out(blurred[0:2 * dh:2, 0:2 * dw:2])


def pyrUp(src: Any, dstsize: Any = None, borderType: int = 1):
    """Upsample 2x (zero insertion) and smooth with 4 * the 5x5 Gaussian."""
    node = _image(src)
    h, w = node.shape[0], node.shape[1]
    dw, dh = (2 * w, 2 * h) if dstsize is None or tuple(size2(dstsize, "dstsize")) == (0, 0) \
        else size2(dstsize, "dstsize")
    attrs = {"size": (dh, dw), "border": cv_border(borderType, "borderType")}
    return plane_out(out_var(B.make_node("pyr_up", (node,), attrs, fmt="NHWC")))


def getGaborKernel(ksize: Any, sigma: float, theta: float, lambd: float, gamma: float, psi: float = math.pi * 0.5,
                   ktype: int = 5):
    """The Gabor filter kernel (float32 [h, w])."""
    kw, kh = size2(ksize, "ksize")
    sx, sy = float(sigma), float(sigma) / float(gamma)
    c, s = math.cos(theta), math.sin(theta)
    xmax, ymax = kw // 2, kh // 2
    ys, xs = np.mgrid[-ymax:ymax + 1, -xmax:xmax + 1].astype(np.float64)
    xr = xs * c + ys * s
    yr = -xs * s + ys * c
    v = np.exp(-0.5 / (sx * sx) * xr * xr - 0.5 / (sy * sy) * yr * yr) * np.cos(2 * math.pi / lambd * xr + psi)
    return image_var(v[::-1, ::-1].astype(np.float32))


def threshold(src: Any, thresh: float, maxval: float, type: int):  # noqa: A002 - OpenCV's name
    """Fixed-level threshold (THRESH_BINARY/_INV/TRUNC/TOZERO/_INV; + THRESH_OTSU/TRIANGLE on uint8).

    Returns only the image, as MNN does; the result keeps the input's shape ([1, h, w, c] included)."""
    node = raw_image_node(src)
    kind = int(type)
    if kind & 24:
        if node.dtype != U8:
            raise TypeError("threshold: THRESH_OTSU / THRESH_TRIANGLE need a uint8 image")
        return out_var(B.make_node("threshold_auto", (node,), {"maxval": float(maxval), "type": kind}, fmt="NHWC"))
    if kind & 7 > 4:
        raise ValueError(f"threshold: unknown type {type}")
    x = out_var(node)
    dt = node.dtype
    if dt == U8:
        t = float(math.floor(thresh))
        if t < 0:
            t = -1.0
        mv = float(min(max(round(maxval), 0), 255))
        tv = int(min(max(t, 0), 255))
    else:
        t, mv, tv = float(thresh), float(maxval), float(thresh)
    if dt == U8 and t >= 255:
        above = B.binary("greater", x, 255)
    else:
        above = B.binary("greater", x if dt != U8 else B.cast(x, I32), t if dt != U8 else int(t))
    zero = B.cast(0, dt)
    k = kind & 7
    if k == 0:
        out = B.select(above, B.cast(mv, dt), zero)
    elif k == 1:
        out = B.select(above, zero, B.cast(mv, dt))
    elif k == 2:
        out = B.select(above, B.cast(tv, dt), x)
    elif k == 3:
        out = B.select(above, x, zero)
    else:
        out = B.select(above, zero, x)
    return out_var(B.cast(out, dt)._node)


def adaptiveThreshold(src: Any, maxValue: float, adaptiveMethod: int, thresholdType: int, blockSize: int, C: float):
    """Threshold against the local mean (ADAPTIVE_THRESH_MEAN_C) or Gaussian-weighted mean of blockSize x
    blockSize neighbourhoods, minus C (uint8 single-channel images; the result keeps the input's shape)."""
    given = raw_image_node(src).shape
    node = _image(src)
    if node.dtype != U8 or node.shape[2] != 1:
        raise ValueError(f"adaptiveThreshold needs a uint8 single-channel image, got {node.dtype} "
                         f"shape {list(node.shape)}")
    if blockSize % 2 == 0 or blockSize <= 1:
        raise ValueError(f"adaptiveThreshold: blockSize must be odd and > 1, got {blockSize}")
    if int(thresholdType) not in (0, 1):
        raise ValueError("adaptiveThreshold: thresholdType must be THRESH_BINARY or THRESH_BINARY_INV")
    attrs = {"maxval": float(maxValue), "method": int(adaptiveMethod), "type": int(thresholdType),
             "block": int(blockSize), "C": float(C)}
    return keep_shape(out_var(B.make_node("adaptive_threshold", (node,), attrs, fmt="NHWC")), given)
