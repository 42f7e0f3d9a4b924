"""Core array functions of MNN.cv: copyTo, bitwise_*, hconcat/vconcat, mean, normalize, merge, split,
addWeighted, blendLinear, calcHist, connectedComponentsWithStats, solve, Rodrigues; solvePnP lives in _pnp.

Element-wise ones build graph nodes; calcHist, connected components and the small linear-algebra helpers
read their (small or value-dependent) inputs when called.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .._dtypes import F32, I32, U8
from ..ops import build as B
from ._common import image_array, image_node, image_var, to_numpy
from ._pnp import solvePnP  # noqa: F401  (SOLVEPNP_ITERATIVE, EPNP and SQPNP as OpenCV)

__all__ = ["copyTo", "bitwise_and", "bitwise_or", "bitwise_xor", "hconcat", "vconcat", "mean", "normalize",
           "merge", "split", "addWeighted", "blendLinear", "calcHist", "connectedComponentsWithStats", "solve",
           "Rodrigues", "solvePnP"]


def _var(x: Any):
    from ..var import Var
    if isinstance(x, Var):
        return x
    arr = np.asarray(x)
    return image_var(B.to_array(arr))


def _image(x: Any):
    """An image argument as an [h, w] or [h, w, c] Var (a batch of one [1, h, w, c] is its image)."""
    from ..var import Var
    return B.wrap(image_node(x if isinstance(x, Var) else B.to_array(np.asarray(x))))


def copyTo(src: Any, mask: Any = None, dst: Any = None):
    """``src`` where ``mask`` is non-zero, else ``dst`` (zeros when None); a [h, w] mask covers all channels."""
    s = _var(src)
    if mask is None:
        return B.wrap(s._node)
    m = _var(mask)
    hw = s.shape[1:3] if s.ndim == 4 and s.shape[0] == 1 else s.shape[:2]  # a batch of one: its image's
    if m.ndim == 4 and m.shape[0] == 1:
        m = B.reshape(m, m.shape[1:])
    if m.shape[:2] != hw:
        raise ValueError("mask [height, width] must equal to src [height, width].")
    m = B.reshape(m, ([1] if s.ndim == 4 else []) + list(m.shape) + [1] * (s.ndim - m.ndim - (s.ndim == 4)))
    d = B.cast(0, s._node.dtype) if dst is None else _var(dst)
    return B.cast(B.select(m, s, d), s._node.dtype)


def _bitwise(op: str, src1, src2, dst, mask):
    a, b = _var(src1), _var(src2)
    res = B.cast(B.binary(op, a, b), a._node.dtype)
    return copyTo(res, mask, dst) if mask is not None else res


def bitwise_and(src1: Any, src2: Any, dst: Any = None, mask: Any = None):
    """Per-element AND (restricted to ``mask`` when given)."""
    return _bitwise("bitwise_and", src1, src2, dst, mask)


def bitwise_or(src1: Any, src2: Any, dst: Any = None, mask: Any = None):
    """Per-element OR (restricted to ``mask`` when given)."""
    return _bitwise("bitwise_or", src1, src2, dst, mask)


def bitwise_xor(src1: Any, src2: Any, dst: Any = None, mask: Any = None):
    """Per-element XOR (restricted to ``mask`` when given)."""
    return _bitwise("bitwise_xor", src1, src2, dst, mask)


def hconcat(src: Sequence[Any]):
    """Join images side by side (axis 1; [1, h, w, c] images are their [h, w, c] images)."""
    return B.concat([_image(s) for s in src], 1)


def vconcat(src: Sequence[Any]):
    """Stack images vertically (axis 0; [1, h, w, c] images are their [h, w, c] images)."""
    return B.concat([_image(s) for s in src], 0)


def mean(src: Any, mask: Any = None):
    """Per-channel mean as a float32 [4] Var (zero padded, as MNN returns)."""
    s = _image(src)
    x = B.cast(s, F32)
    if s.ndim == 2:
        x = B.reshape(x, s.shape + [1])
    if mask is not None:
        m = _var(mask)
        m = B.cast(B.binary("not_equal", m, 0), F32)
        if m.ndim == 2:
            m = B.reshape(m, m.shape + [1])
        tot = B.reduce("reduce_sum", B.binary("mul", x, m), (0, 1))
        cnt = B.reduce("reduce_sum", m, None)
        res = B.binary("div", tot, B.binary("maximum", cnt, 1.0))
    else:
        res = B.reduce("reduce_mean", x, (0, 1))
    c = res.shape[0]
    if c < 4:
        res = B.concat([res, np.zeros(4 - c, np.float32)], 0)
    return res


def normalize(src: Any, dst: Any = None, alpha: float = 1.0, beta: float = 0.0, norm_type: int = 4,
              dtype: Any = -1, mask: Any = None):
    """Scale to unit norm (NORM_INF/L1/L2 -> ``alpha``) or to the range [alpha, beta] (NORM_MINMAX);
    the result keeps ``src``'s dtype (rounded and saturated for integer types)."""
    s = _var(src)
    dt = s._node.dtype
    x = B.cast(s, F32)
    alpha = 1.0 if alpha is None else float(alpha)
    beta = 0.0 if beta is None else float(beta)
    nt = 4 if norm_type is None else int(norm_type)
    if nt == 32:
        lo, hi = min(alpha, beta), max(alpha, beta)
        smin = B.reduce("reduce_min", x)
        smax = B.reduce("reduce_max", x)
        rng = B.binary("sub", smax, smin)
        scale = B.binary("div", hi - lo, B.binary("maximum", rng, 1e-30))
        out = B.binary("add", B.binary("mul", B.binary("sub", x, smin), scale), lo)
    else:
        if nt == 1:
            n = B.reduce("reduce_max", B.unary("abs", x))
        elif nt == 2:
            n = B.reduce("reduce_sum", B.unary("abs", x))
        elif nt == 4:
            n = B.unary("sqrt", B.reduce("reduce_sum", B.binary("mul", x, x)))
        else:
            raise ValueError(f"normalize: unknown norm_type {norm_type}")
        out = B.binary("mul", x, B.binary("div", alpha, B.binary("maximum", n, 1e-30)))
    if dt.kind in "iu":
        info = np.iinfo(dt)
        out = B.unary("rint", out) if _has("rint") else B.unary("round", out)
        out = B.binary("minimum", B.binary("maximum", out, float(info.min)), float(info.max))
    return B.cast(out, dt)


def _has(op: str) -> bool:
    from ..ops import registry
    return registry.has(op)


def merge(mv: Sequence[Any]):
    """Join images ([h, w], [h, w, c] or [1, h, w, c]) channel by channel into one [h, w, n] image;
    1-D arrays of n values give [n, k] (OpenCV's shapes)."""
    vs = [_var(m) for m in mv]
    if not vs:
        raise ValueError("merge needs at least one image")
    if all(v.ndim == 1 for v in vs):
        return B.concat([B.reshape(v, v.shape + [1]) for v in vs], 1)
    vs = [_image(v) for v in vs]
    vs = [B.reshape(v, v.shape + [1]) if v.ndim == 2 else v for v in vs]
    return B.concat(vs, 2)


def split(m: Any):
    """The channels of an [h, w, c] (or [1, h, w, c]) image as a list of [h, w] Vars; a 2-D or 1-D array
    is its own single channel (OpenCV's shapes)."""
    v = _var(m)
    if v.ndim == 1:
        return (v,)
    v = _image(v)
    if v.ndim == 3:
        return [v[:, :, i] for i in range(v.shape[2])]
    return (v,)


def addWeighted(src1: Any, alpha: float, src2: Any, beta: float, gamma: float):
    """``src1 * alpha + src2 * beta + gamma`` rounded back to src1's dtype (saturated for uint8)."""
    a, b = _var(src1), _var(src2)
    dt = a._node.dtype
    out = B.binary("add", B.binary("add", B.binary("mul", B.cast(a, F32), float(alpha)),
                                   B.binary("mul", B.cast(b, F32), float(beta))), float(gamma))
    return _saturate(out, dt)


def _saturate(out, dt):
    if dt.kind in "iu":
        info = np.iinfo(dt)
        out = B.unary("rint", out) if _has("rint") else B.unary("round", out)
        out = B.binary("minimum", B.binary("maximum", out, float(info.min)), float(info.max))
    return B.cast(out, dt)


def blendLinear(src1: Any, src2: Any, weights1: Any, weights2: Any):
    """Per-pixel blend ``(w1 * src1 + w2 * src2) / (w1 + w2)`` with [h, w] weights."""
    a, b = _var(src1), _var(src2)
    w1, w2 = B.cast(_var(weights1), F32), B.cast(_var(weights2), F32)
    if a.ndim >= 3:  # [h, w] weights cover every channel (of a batch of one too)
        w1 = B.reshape(w1, w1.shape[:2] + [1])
        w2 = B.reshape(w2, w2.shape[:2] + [1])
    num = B.binary("add", B.binary("mul", B.cast(a, F32), w1), B.binary("mul", B.cast(b, F32), w2))
    den = B.binary("add", B.binary("add", w1, w2), 1e-5)
    return _saturate(B.binary("div", num, den), a._node.dtype)


def calcHist(images: Sequence[Any], channels: Sequence[int], mask: Any, histSize: Sequence[int],
             ranges: Sequence[float], accumulate: bool = False):
    """Histogram of one channel (or a joint histogram of several) as float32 (MNN: [histSize] for one channel)."""
    imgs = [image_array(i) for i in (images if isinstance(images, (list, tuple)) else [images])]
    imgs = [i[..., None] if i.ndim == 2 else i for i in imgs]
    allc = np.concatenate(imgs, axis=2)
    chans = [int(c) for c in channels]
    sizes = [int(s) for s in histSize]
    rng = [float(r) for r in ranges]
    if len(rng) < 2 * len(chans):
        rng = rng * len(chans)
    sel = np.ones(allc.shape[:2], bool)
    if mask is not None:
        sel = np.asarray(to_numpy(mask)).reshape(allc.shape[:2]) != 0
    idx = []
    valid = sel.copy()
    for k, c in enumerate(chans):
        lo, hi = rng[2 * k], rng[2 * k + 1]
        v = allc[..., c].astype(np.float64)
        b = np.floor((v - lo) * sizes[k] / (hi - lo)).astype(np.int64)
        valid &= (v >= lo) & (v < hi)
        idx.append(np.clip(b, 0, sizes[k] - 1))
    flat = np.ravel_multi_index([i[valid] for i in idx], sizes) if idx else np.zeros(0, np.int64)
    hist = np.bincount(flat, minlength=int(np.prod(sizes))).astype(np.float32).reshape(sizes)
    return image_var(hist)


def connectedComponentsWithStats(image: Any, connectivity: int = 8):
    """Label the non-zero regions: (count, labels [1, h, w, 1] int32, stats [n, 5] int32 (x, y, w, h, area),
    centroids [n, 2] float32), MNN's shapes."""
    from ._contours import label_components
    img = image_array(image)
    img = img.reshape(img.shape[0], img.shape[1], -1)[..., 0]
    labels, n = label_components(img != 0, int(connectivity))
    ys, xs = np.indices(labels.shape)
    lab = labels.ravel()
    area = np.bincount(lab, minlength=n)
    big = np.iinfo(np.int64).max
    xmin = np.full(n, big)
    ymin = np.full(n, big)
    xmax = np.full(n, -1)
    ymax = np.full(n, -1)
    np.minimum.at(xmin, lab, xs.ravel())
    np.minimum.at(ymin, lab, ys.ravel())
    np.maximum.at(xmax, lab, xs.ravel())
    np.maximum.at(ymax, lab, ys.ravel())
    stats = np.stack([xmin, ymin, xmax - xmin + 1, ymax - ymin + 1, area], -1)
    # an empty label (the background of an image without zeros) reads as OpenCV reports it
    stats[area == 0] = (-1, np.iinfo(np.int32).max, 0, 0, 0)
    stats = stats.astype(np.int32)
    with np.errstate(all="ignore"):
        cx = np.bincount(lab, xs.ravel(), minlength=n) / area
        cy = np.bincount(lab, ys.ravel(), minlength=n) / area
    cents = np.stack([cx, cy], -1).astype(np.float32)
    return n, image_var(labels.astype(np.int32)[None, :, :, None]), image_var(stats), image_var(cents)


def solve(src1: Any, src2: Any, flags: int = 0):
    """Solve ``src1 @ X = src2`` ((True, X) float32; least squares for DECOMP_SVD/QR/NORMAL)."""
    a = np.asarray(to_numpy(src1), np.float64)
    b = np.asarray(to_numpy(src2), np.float64)
    a2 = a.reshape(a.shape[0], -1)
    b2 = b.reshape(b.shape[0], -1) if b.ndim > 1 else b[:, None]
    method = int(flags) & 15
    try:
        if a2.shape[0] != a2.shape[1] or method in (1, 4) or int(flags) & 16:
            x = np.linalg.lstsq(a2, b2, rcond=None)[0]
        else:
            x = np.linalg.solve(a2, b2)
    except np.linalg.LinAlgError:
        return False, image_var(np.zeros((a2.shape[1], b2.shape[1]), np.float32))
    return True, image_var(x.astype(np.float32))


def rodrigues_np(src: np.ndarray) -> np.ndarray:
    """Rotation vector (3) <-> rotation matrix (3x3) in float64."""
    s = np.asarray(src, np.float64)
    if s.size == 3:
        r = s.ravel()
        theta = np.linalg.norm(r)
        if theta < 1e-15:
            return np.eye(3)
        k = r / theta
        kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
        return np.cos(theta) * np.eye(3) + (1 - np.cos(theta)) * np.outer(k, k) + np.sin(theta) * kx
    if s.size != 9:
        raise ValueError(f"Rodrigues needs a 3-vector or a 3x3 matrix, got {s.size} values")
    R = s.reshape(3, 3)
    u, _, vt = np.linalg.svd(R)
    R = u @ vt
    rx = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    sn = np.linalg.norm(rx) * 0.5
    c = np.clip((np.trace(R) - 1) * 0.5, -1, 1)
    if sn < 1e-5:
        if c > 0:
            return np.zeros((3, 1))
        t = (R + np.eye(3)) * 0.5
        r = np.sqrt(np.maximum(np.diag(t), 0))
        if t[0, 1] < 0:
            r[1] = -r[1]
        if t[0, 2] < 0:
            r[2] = -r[2]
        return (r / max(np.linalg.norm(r), 1e-300) * np.pi).reshape(3, 1)
    theta = np.arccos(c)
    return (rx * (theta / (2 * sn))).reshape(3, 1)


def Rodrigues(src: Any):
    """Rotation matrix -> rotation vector ([3, 1]) or vector -> matrix ([3, 3]), float32."""
    return image_var(rodrigues_np(np.asarray(to_numpy(src))).astype(np.float32))
