"""Neighbourhood image ops on HWC images.

* ``sep_filter``   attrs ``kx``, ``ky`` (tuples of float taps), ``anchor`` (ax, ay), ``border`` (OpenCV code),
                   ``delta``, ``dtype`` (output dtype), ``square`` (filter x*x: sqrBoxFilter)
* ``filter2d``     attrs ``kernel`` (tuple of rows), ``anchor``, ``border``, ``delta``, ``dtype``
* ``morphology``   attrs ``kernel`` (tuple of rows of 0/1), ``anchor``, ``op`` ("erode"/"dilate"),
                   ``iterations``, ``border``, ``value``
* ``bilateral``    attrs ``d``, ``sigma_color``, ``sigma_space``, ``border``
* ``threshold_auto`` attrs ``maxval``, ``type`` (THRESH_* with OTSU or TRIANGLE): threshold picked from the
                   histogram
* ``adaptive_threshold`` attrs ``maxval``, ``method``, ``type``, ``block``, ``C``
* ``pyr_up``       attrs ``size`` (out_h, out_w), ``border``

Results are computed in float32 (float64 for wide kernels) and rounded half to even with saturation,
as OpenCV's saturate_cast does; uint8 results may differ from OpenCV's bit-exact fixed-point paths by 1.
"""
from __future__ import annotations

import numpy as np

from .image_geometry import (CV_BORDER_CONSTANT, CV_BORDER_REFLECT, CV_BORDER_REFLECT_101,  # noqa: F401
                             CV_BORDER_REPLICATE, CV_BORDER_TRANSPARENT, CV_BORDER_WRAP, border_index)
from .registry import OpDef, register



_SMALL_GAUSS = {1: [1.0], 3: [0.25, 0.5, 0.25], 5: [0.0625, 0.25, 0.375, 0.25, 0.0625],
                7: [0.03125, 0.109375, 0.21875, 0.28125, 0.21875, 0.109375, 0.03125]}


def gaussian_kernel(ksize: int, sigma: float) -> np.ndarray:
    """OpenCV's getGaussianKernel values (float64)."""
    ksize = int(ksize)
    if ksize <= 0 or ksize % 2 == 0:
        raise ValueError(f"Gaussian kernel size must be odd and positive, got {ksize}")
    if sigma <= 0 and ksize in _SMALL_GAUSS:
        return np.array(_SMALL_GAUSS[ksize], np.float64)
    s = sigma if sigma > 0 else ((ksize - 1) * 0.5 - 1) * 0.3 + 0.8
    x = np.arange(ksize, dtype=np.float64) - (ksize - 1) * 0.5
    k = np.exp(-(x * x) / (2 * s * s))
    return k / k.sum()

def _fold_window(n: int, border: int) -> tuple[int, int, int]:
    """(lowest offset, window size, period or 0) of the tap offsets that stay distinct on an axis of n
    pixels: beyond them a tap reads what another tap reads, for every output pixel."""
    if border in (CV_BORDER_CONSTANT, CV_BORDER_TRANSPARENT):
        return -n, 2 * n + 1, 0  # offsets past +-n only ever read the border value
    if border == CV_BORDER_REPLICATE:
        return -(n - 1), 2 * n - 1, 0  # past +-(n - 1) only ever the edge pixel
    period = {CV_BORDER_WRAP: n, CV_BORDER_REFLECT: 2 * n, CV_BORDER_REFLECT_101: max(2 * n - 2, 1)}[border]
    return -(period // 2), period, period  # periodic borders: offsets alias modulo the period


def _bin_taps(k: np.ndarray, off: np.ndarray, n: int, border: int) -> np.ndarray:
    """Taps ``k`` at offsets ``off`` summed into the window of ``_fold_window``."""
    lo, size, period = _fold_window(n, border)
    off = np.mod(off - lo, period) + lo if period else np.clip(off, lo, lo + size - 1)
    return np.bincount(off - lo, weights=k, minlength=size)


def fold_taps(k, anchor: int, n: int, border: int) -> tuple[np.ndarray, int]:
    """A 1-D correlation kernel with the same result on an axis of ``n`` pixels but at most about 2n taps:
    taps that read the same border pixels for every output are summed. Kernels that are already short
    come back unchanged."""
    k = np.asarray(k, np.float64)
    lo, size, _ = _fold_window(n, border)
    if len(k) <= size:
        return k, int(anchor)
    return _bin_taps(k, np.arange(len(k)) - int(anchor), n, border), -lo


def gaussian_taps(ksize: int, sigma: float, n: int, border: int) -> tuple[np.ndarray, int]:
    """(taps, anchor) of OpenCV's getGaussianKernel(ksize, sigma) for an axis of ``n`` pixels, folded by
    ``fold_taps`` and computed in chunks: memory follows the image, not sigma."""
    ksize = int(ksize)
    if ksize <= 0 or ksize % 2 == 0:
        raise ValueError(f"Gaussian kernel size must be odd and positive, got {ksize}")
    if ksize >= 2 ** 31:
        raise ValueError(f"Gaussian kernel size {ksize} is too large (sigma too large)")
    lo, size, _ = _fold_window(n, border)
    anchor = (ksize - 1) // 2
    if ksize <= max(size, 1 << 16):
        return fold_taps(gaussian_kernel(ksize, sigma), anchor, n, border)
    s = sigma if sigma > 0 else ((ksize - 1) * 0.5 - 1) * 0.3 + 0.8
    acc = np.zeros(size)
    total = 0.0
    for j0 in range(0, ksize, 1 << 20):
        off = np.arange(j0, min(j0 + (1 << 20), ksize), dtype=np.int64) - anchor
        v = np.exp(-(off.astype(np.float64) ** 2) / (2 * s * s))
        total += float(v.sum())
        acc += _bin_taps(v, off, n, border)
    return acc / total, -lo


def cast_round(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Round half to even and saturate to ``dtype`` (OpenCV's saturate_cast)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.clip(np.rint(v), info.min, info.max).astype(dtype)
    return v.astype(dtype)


def pad_image(x: np.ndarray, top: int, bottom: int, left: int, right: int, border: int,
              value: float = 0.0) -> np.ndarray:
    """``x`` padded with OpenCV's border rule (gathers through border_index: no per-pixel Python)."""
    h, w = x.shape[:2]
    yi = border_index(np.arange(-top, h + bottom), h, border)
    xi = border_index(np.arange(-left, w + right), w, border)
    out = x[np.maximum(yi, 0)][:, np.maximum(xi, 0)]
    if border == CV_BORDER_CONSTANT:
        out = out.copy()
        out[yi < 0] = value
        out[:, xi < 0] = value
    return out


def fixed_taps(k) -> np.ndarray | None:
    """Smoothing taps as integers with 8 fractional bits summing to 256 (None for other kernels)."""
    k = np.asarray(k, np.float64)
    if (k < 0).any() or abs(k.sum() - 1) > 1e-6:
        return None
    q = np.rint(k * 256)
    q[len(q) // 2] += 256 - q.sum()
    return q


def sep_filter_ref(x: np.ndarray, kx, ky, anchor, border: int, delta: float, dtype, square: bool = False,
                   fixed: bool = False):
    """Separable correlation (OpenCV's sepFilter2D) of an HWC image. ``fixed``: uint8 smoothing with 8-bit
    fixed-point taps and (sum + 2^15) >> 16 rounding, as OpenCV's bit-exact GaussianBlur."""
    ax, ay = anchor
    h, w = x.shape[:2]
    if len(kx) > 2 * w + 1 or len(ky) > 2 * h + 1:  # taps that cannot reach the image distinctly: fold
        fixed = False
        kx, ax = fold_taps(kx, ax, w, border)
        ky, ay = fold_taps(ky, ay, h, border)
    qx, qy = (fixed_taps(kx), fixed_taps(ky)) if fixed else (None, None)
    if (qx is not None and qy is not None and x.dtype == np.uint8 and np.dtype(dtype) == np.uint8 and not delta
            and len(qx) <= 5 and len(qy) <= 5):  # OpenCV's bit-exact path (longer kernels: float, +-1)
        p = pad_image(x.astype(np.int64), ay, len(qy) - 1 - ay, ax, len(qx) - 1 - ax, border)
        h, w = x.shape[:2]
        tmp = sum(p[:, j:j + w] * int(qx[j]) for j in range(len(qx)))
        out = sum(tmp[i:i + h] * int(qy[i]) for i in range(len(qy)))
        return ((out + 32768) >> 16).astype(np.uint8)
    kx = np.asarray(kx, np.float64)
    ky = np.asarray(ky, np.float64)
    acc = np.float64 if (len(kx) > 7 or len(ky) > 7 or square) else np.float32
    src = x.astype(acc)
    if square:
        src = src * src
    p = pad_image(src, ay, len(ky) - 1 - ay, ax, len(kx) - 1 - ax, border)
    h, w = x.shape[:2]
    tmp = sum(p[:, j:j + w] * acc(kx[j]) for j in range(len(kx)))
    out = sum(tmp[i:i + h] * acc(ky[i]) for i in range(len(ky)))
    if delta:
        out = out + acc(delta)
    return cast_round(out, dtype)


def _sep_infer(inputs, attrs):
    return inputs[0].shape, np.dtype(attrs["dtype"])


def _sep_op(xs, attrs):
    x = xs[0]
    return sep_filter_ref(x, attrs["kx"], attrs["ky"], attrs["anchor"], attrs["border"], attrs["delta"],
                          attrs["dtype"], attrs.get("square", False), attrs.get("fixed", False))


register(OpDef("sep_filter", "opaque", _sep_infer, _sep_op, mnn_type="Convolution",
               doc="separable 2-D correlation"))


def filter2d_ref(x: np.ndarray, kernel, anchor, border: int, delta: float, dtype) -> np.ndarray:
    """Non-separable correlation (OpenCV's filter2D) of an HWC image."""
    k = np.asarray(kernel, np.float64)
    kh, kw = k.shape
    ax, ay = anchor
    p = pad_image(x.astype(np.float64), ay, kh - 1 - ay, ax, kw - 1 - ax, border)
    h, w = x.shape[:2]
    out = np.zeros(x.shape, np.float64)
    for i in range(kh):
        for j in range(kw):
            if k[i, j] != 0:
                out += p[i:i + h, j:j + w] * k[i, j]
    return cast_round(out + delta, dtype)


register(OpDef("filter2d", "opaque", _sep_infer,
               lambda xs, at: filter2d_ref(xs[0], at["kernel"], at["anchor"], at["border"], at["delta"], at["dtype"]),
               mnn_type="Convolution", doc="2-D correlation"))


def morphology_ref(x: np.ndarray, kernel, anchor, op: str, iterations: int, border: int, value) -> np.ndarray:
    """erode / dilate with a 0/1 structuring element (BORDER_CONSTANT pads with the neutral value)."""
    k = np.asarray(kernel) != 0
    kh, kw = k.shape
    ax, ay = anchor
    h, w = x.shape[:2]
    fn = np.minimum if op == "erode" else np.maximum
    if x.dtype.kind == "f":
        neutral = np.inf if op == "erode" else -np.inf
    else:
        info = np.iinfo(x.dtype)
        neutral = info.max if op == "erode" else info.min
    fill = neutral if value is None else value
    out = x
    for _ in range(max(int(iterations), 1)):
        p = pad_image(out, ay, kh - 1 - ay, ax, kw - 1 - ax, border, fill)
        acc = None
        for i in range(kh):
            for j in range(kw):
                if k[i, j]:
                    s = p[i:i + h, j:j + w]
                    acc = s if acc is None else fn(acc, s)
        out = x if acc is None else acc
    return np.ascontiguousarray(out)


register(OpDef("morphology", "opaque", lambda i, a: (i[0].shape, i[0].dtype),
               lambda xs, at: morphology_ref(xs[0], at["kernel"], at["anchor"], at["op"], at["iterations"],
                                             at["border"], at["value"]),
               mnn_type="Pool", doc="erode / dilate"))


def bilateral_ref(x: np.ndarray, d: int, sigma_color: float, sigma_space: float, border: int) -> np.ndarray:
    """OpenCV's bilateralFilter: circular window, Gaussian space weights, Gaussian weights of the L1 colour
    distance (summed over channels)."""
    sc = sigma_color if sigma_color > 0 else 1.0
    ss = sigma_space if sigma_space > 0 else 1.0
    radius = d // 2 if d > 0 else int(round(ss * 1.5))
    radius = max(radius, 1)
    gc = -0.5 / (sc * sc)
    gs = -0.5 / (ss * ss)
    h, w = x.shape[:2]
    xf = x.astype(np.float32)
    p = pad_image(xf, radius, radius, radius, radius, border)
    num = np.zeros_like(xf)
    den = np.zeros(xf.shape[:2] + (1,), np.float32)
    for i in range(-radius, radius + 1):
        for j in range(-radius, radius + 1):
            r2 = i * i + j * j
            if r2 > radius * radius:
                continue
            s = p[radius + i:radius + i + h, radius + j:radius + j + w]
            diff = np.abs(s - xf).sum(-1, keepdims=True)
            if x.dtype == np.uint8:
                diff = np.rint(diff)
            wgt = np.exp(np.float32(r2 * gs) + diff * diff * np.float32(gc)).astype(np.float32)
            num += s * wgt
            den += wgt
    return cast_round(num / den, x.dtype)


register(OpDef("bilateral", "opaque", lambda i, a: (i[0].shape, i[0].dtype),
               lambda xs, at: bilateral_ref(xs[0], at["d"], at["sigma_color"], at["sigma_space"], at["border"]),
               mnn_type="Convolution", doc="bilateral filter"))


# ----------------------------------------------------------------------------- thresholds
def otsu_threshold(x: np.ndarray) -> float:
    """Otsu's threshold of uint8 data (maximises the between-class variance)."""
    hist = np.bincount(x.ravel(), minlength=256).astype(np.float64)
    n = hist.sum()
    if n == 0:
        return 0.0
    p = hist / n
    omega = np.cumsum(p)
    mu = np.cumsum(p * np.arange(256))
    mu_t = mu[-1]
    with np.errstate(all="ignore"):
        sigma = (mu_t * omega - mu) ** 2 / (omega * (1 - omega))
    sigma[~np.isfinite(sigma)] = 0
    sigma[(omega < np.finfo(np.float32).eps) | (omega > 1 - np.finfo(np.float32).eps)] = 0
    return float(np.argmax(sigma))


def triangle_threshold(x: np.ndarray) -> float:
    """The triangle method's threshold of uint8 data."""
    hist = np.bincount(x.ravel(), minlength=256).astype(np.int64)
    nz = np.nonzero(hist)[0]
    if nz.size == 0:
        return 0.0
    left, right = max(int(nz[0]) - 1, 0), min(int(nz[-1]) + 1, 255)
    mx = int(np.argmax(hist))
    flip = False
    if mx - left < right - mx:
        hist = hist[::-1]
        left, right = 255 - right, 255 - left
        mx = 255 - mx
        flip = True
    if left == mx:
        thresh = left
    else:
        a = hist[mx]
        b = left - mx
        idx = np.arange(left + 1, mx + 1)
        dist = a * idx + b * hist[idx]
        thresh = int(idx[np.argmax(dist)]) if idx.size else left
        thresh -= 1
    if flip:
        thresh = 255 - thresh
    return float(thresh)


def apply_threshold(x: np.ndarray, thresh: float, maxval: float, kind: int) -> np.ndarray:
    """THRESH_BINARY(_INV) / TRUNC / TOZERO(_INV) with OpenCV's integer threshold for uint8 data."""
    if x.dtype == np.uint8:
        t = np.floor(thresh)
        mv = np.clip(np.rint(maxval), 0, 255)
    else:
        t, mv = thresh, maxval
    above = x > t
    dt = x.dtype
    if kind == 0:
        return np.where(above, mv, 0).astype(dt)
    if kind == 1:
        return np.where(above, 0, mv).astype(dt)
    if kind == 2:
        return np.where(above, np.asarray(t).astype(dt) if x.dtype == np.uint8 else t, x).astype(dt)
    if kind == 3:
        return np.where(above, x, 0).astype(dt)
    if kind == 4:
        return np.where(above, 0, x).astype(dt)
    raise ValueError(f"threshold: unknown type {kind}")


def _auto_threshold(xs, attrs):
    x = xs[0]
    t = otsu_threshold(x) if attrs["type"] & 8 else triangle_threshold(x)
    return apply_threshold(x, t, attrs["maxval"], attrs["type"] & 7)


register(OpDef("threshold_auto", "opaque", lambda i, a: (i[0].shape, i[0].dtype), _auto_threshold,
               mnn_type="ImageProcess", doc="Otsu / triangle threshold"))


def _adaptive(xs, attrs):
    x = xs[0]
    block = attrs["block"]
    r = block // 2
    if attrs["method"] == 0:
        k = [1.0 / block] * block
    else:
        k = list(gaussian_kernel(block, 0.0))
    mean = sep_filter_ref(x, k, k, (r, r), 1, 0.0, np.uint8)
    maxval = np.clip(np.rint(attrs["maxval"]), 0, 255)
    C = attrs["C"]
    if attrs["type"] == 0:
        idelta = np.ceil(C)
        mask = x.astype(np.int32) - mean.astype(np.int32) > -idelta
    else:
        idelta = np.floor(C)
        mask = x.astype(np.int32) - mean.astype(np.int32) <= -idelta
    return np.where(mask, maxval, 0).astype(np.uint8)


register(OpDef("adaptive_threshold", "opaque", lambda i, a: (i[0].shape, i[0].dtype), _adaptive,
               mnn_type="ImageProcess", doc="adaptiveThreshold"))


def _pyr_up_infer(inputs, attrs):
    oh, ow = attrs["size"]
    return (oh, ow) + tuple(inputs[0].shape[2:]), inputs[0].dtype


def _pyr_up_axis(x: np.ndarray, axis: int) -> np.ndarray:
    """Double ``axis``: even outputs p[i-1] + 6 p[i] + p[i+1], odd outputs 4 (p[i] + p[i+1]), with
    p[-1] = p[1] and p[n] = p[n-1] (OpenCV's pyrUp borders); weights sum to 8."""
    n = x.shape[axis]
    idx = np.arange(n)
    prev = np.take(x, np.where(idx - 1 < 0, min(1, n - 1), idx - 1), axis=axis)
    nxt = np.take(x, np.minimum(idx + 1, n - 1), axis=axis)
    even = prev + 6 * x + nxt
    odd = 4 * (x + nxt)
    out = np.stack([even, odd], axis=axis + 1)
    shape = list(x.shape)
    shape[axis] = 2 * n
    return out.reshape(shape)


def _pyr_up(xs, attrs):
    x = xs[0]
    oh, ow = attrs["size"]
    acc = np.int64 if x.dtype.kind in "iu" else np.float64
    t = _pyr_up_axis(_pyr_up_axis(x.astype(acc), 0), 1)
    t = t[:oh, :ow]
    if x.dtype.kind in "iu":
        return cast_round((t + 32) >> 6, x.dtype)
    return (t / 64.0).astype(x.dtype)


register(OpDef("pyr_up", "opaque", _pyr_up_infer, _pyr_up, mnn_type="ImageProcess", doc="pyrUp"))
