"""Resizing: ``resize`` (nearest / bilinear / cubic on the last two axes of NCHW data) and
``crop_and_resize`` (TF CropAndResize, NCHW in and out).

Attributes of ``resize`` (see ``docs/NN_OPS.md``): ``size`` (oh, ow); ``method``; ``coord``;
``scale`` (sy, sx) input-per-output ratios for the coordinate transform (None: in/out);
``offset`` (oy, ox); ``cubic_a``; ``exclude_outside``; ``trunc_taps`` (cubic taps from the source
coordinate truncated toward zero, as real MNN's CPU Interp). The resize is separable: each axis is
a small gather + weighted sum, so the work is two passes over the data.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .._dtypes import F32, I32
from .registry import OpDef, register

METHODS = ("nearest", "nearest_round", "nearest_floor", "nearest_ceil", "bilinear", "cubic")
#: Output taps above which the compiled path resizes float32 data with the Numba kernel (kernels_nn.py).
NUMBA_WORK = 1 << 20

COORDS = ("asymmetric", "align_corners", "half_pixel", "pytorch_half_pixel", "tf_half_pixel")


def source_coords(n_in: int, n_out: int, coord: str, scale: float | None = None, offset: float = 0.0) -> np.ndarray:
    """Source coordinate of every output index along one axis, computed in float32 as real MNN and
    ONNX Runtime do (a nearest resize by 1.6 maps 8 to 8 * float32(1 / 1.6) = 5 exactly, where float64
    gives 4.99999...), returned as float64."""
    f = np.float32
    x = np.arange(n_out, dtype=f)
    s = f(n_in) / f(n_out) if scale is None else f(scale)
    off, half = f(offset), f(0.5)
    if coord == "align_corners":
        if n_out <= 1:
            return np.zeros(n_out)
        return (x * (f(n_in - 1) / f(n_out - 1))).astype(np.float64)
    if coord == "half_pixel":
        src = (x + half) * s - half + off
    elif coord == "pytorch_half_pixel":
        src = (x + half) * s - half + off if n_out > 1 else np.zeros(n_out, f)
    elif coord == "tf_half_pixel":
        src = (x + half) * s + off
    elif coord == "asymmetric":
        src = x * s + off
    else:
        raise ValueError(f"unknown coordinate transform {coord!r} (expected one of {COORDS})")
    return src.astype(np.float64)


def axis_taps(n_in: int, n_out: int, attrs: dict, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices [n_out, taps], weights [n_out, taps]) of one axis of a ``resize`` node."""
    return _axis_taps(n_in, n_out, attrs, axis)


def _axis_taps(n_in: int, n_out: int, attrs: dict, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices [n_out, taps], weights [n_out, taps]) of one axis."""
    scale = attrs.get("scale")
    offset = attrs.get("offset") or (0.0, 0.0)
    src = source_coords(n_in, n_out, attrs["coord"], None if scale is None else scale[axis], offset[axis])
    method = attrs["method"]
    if method.startswith("nearest"):
        if method == "nearest_round":
            idx = np.floor(src + 0.5)
        elif method == "nearest_ceil":
            idx = np.ceil(src)
        elif method == "nearest_floor" or attrs["coord"] in ("asymmetric", "tf_half_pixel"):
            idx = np.floor(src)
        else:
            idx = np.floor(src)
        idx = np.clip(idx, 0, n_in - 1).astype(np.intp)[:, None]
        return idx, np.ones_like(idx, dtype=np.float32)
    if method == "bilinear":
        src = np.maximum(src, 0.0) if attrs["coord"] != "align_corners" else src
        lo = np.floor(src)
        frac = src - lo
        lo = lo.astype(np.intp)
        idx = np.stack([np.clip(lo, 0, n_in - 1), np.clip(lo + 1, 0, n_in - 1)], axis=1)
        wts = np.stack([1.0 - frac, frac], axis=1)
        return idx, wts.astype(np.float32)
    if method == "cubic":
        a = attrs.get("cubic_a", -0.75)
        lo = np.floor(src)
        t = src - lo
        lo = lo.astype(np.intp)
        d = np.stack([1 + t, t, 1 - t, 2 - t], axis=1)
        ad = np.abs(d)
        wts = np.where(ad <= 1, ((a + 2) * ad - (a + 3)) * ad * ad + 1,
                       np.where(ad < 2, ((a * ad - 5 * a) * ad + 8 * a) * ad - 4 * a, 0.0))
        if attrs.get("trunc_taps", False):
            # real MNN's CPU Interp: the four taps start from (int)src, truncated toward zero, while the
            # fraction is src - floor(src), so a negative src (the first row/column of a half-pixel
            # upscale) weights the taps one pixel to the right of ONNX's
            lo = np.trunc(src).astype(np.intp)
        raw = lo[:, None] + np.arange(-1, 3)[None, :]
        if attrs.get("exclude_outside", False):
            wts = np.where((raw >= 0) & (raw < n_in), wts, 0.0)
            wts = wts / wts.sum(axis=1, keepdims=True)
        return np.clip(raw, 0, n_in - 1), wts.astype(np.float32)
    raise ValueError(f"unknown resize method {method!r} (expected one of {METHODS})")


def _apply_axis(x: np.ndarray, axis: int, idx: np.ndarray, wts: np.ndarray) -> np.ndarray:
    if idx.shape[1] == 1:
        return np.take(x, idx[:, 0], axis=axis)
    shape = [1] * x.ndim
    shape[axis] = idx.shape[0]
    out = None
    for k in range(idx.shape[1]):
        term = np.take(x, idx[:, k], axis=axis) * wts[:, k].reshape(shape)
        out = term if out is None else out + term
    return out


def _resize_infer(inputs, attrs):
    x = inputs[0]
    if len(x.shape) < 2:
        raise ValueError(f"resize: input must have at least 2 dimensions, got shape {list(x.shape)}")
    oh, ow = attrs["size"]
    if oh <= 0 or ow <= 0:
        raise ValueError(f"resize: output size {attrs['size']} must be positive")
    dt = x.dtype if attrs["method"].startswith("nearest") else F32
    return tuple(x.shape[:-2]) + (int(oh), int(ow)), dt


def resize_ref(xs: list, attrs: dict) -> np.ndarray:
    """Separable resize of the last two axes."""
    x = xs[0]
    oh, ow = attrs["size"]
    h, w = x.shape[-2:]
    if not attrs["method"].startswith("nearest"):
        x = np.asarray(x, np.float32)
    ih, wh = _axis_taps(h, oh, attrs, 0)
    iw, ww = _axis_taps(w, ow, attrs, 1)
    # resize the axis that shrinks the data most first
    if oh * w <= h * ow:
        y = _apply_axis(x, x.ndim - 2, ih, wh)
        y = _apply_axis(y, x.ndim - 1, iw, ww)
    else:
        y = _apply_axis(x, x.ndim - 1, iw, ww)
        y = _apply_axis(y, x.ndim - 2, ih, wh)
    return y


register(OpDef("resize", "opaque", _resize_infer, resize_ref, mnn_type="Interp",
               doc="nearest/bilinear/cubic resize of the last two axes (see docs/NN_OPS.md)"))


def resize(x: Any, size: Sequence[int], method: str = "bilinear", coord: str = "asymmetric",
           scale: Sequence[float] | None = None, offset: Sequence[float] | None = None, cubic_a: float = -0.75,
           exclude_outside: bool = False):
    """Build a ``resize`` node; returns a Var."""
    from . import build as B
    node = B.as_node(x)
    if method not in METHODS:
        raise ValueError(f"resize: unknown method {method!r} (expected one of {METHODS})")
    if coord not in COORDS:
        raise ValueError(f"resize: unknown coordinate transform {coord!r} (expected one of {COORDS})")
    attrs = {"size": tuple(int(s) for s in size), "method": method, "coord": coord,
             "scale": None if scale is None else tuple(float(s) for s in scale),
             "offset": None if offset is None else tuple(float(o) for o in offset),
             "cubic_a": float(cubic_a), "exclude_outside": bool(exclude_outside)}
    return B.wrap(B.make_node("resize", (node,), attrs, fmt=node.fmt))


# ---------------------------------------------------------------- crop_and_resize

def _car_infer(inputs, attrs):
    x, boxes, ind = inputs
    if len(x.shape) != 4:
        raise ValueError(f"crop_and_resize: image must be 4-D, got shape {list(x.shape)}")
    if len(boxes.shape) != 2 or boxes.shape[1] != 4:
        raise ValueError(f"crop_and_resize: boxes must be [K, 4], got shape {list(boxes.shape)}")
    if ind.size != boxes.shape[0]:
        raise ValueError(f"crop_and_resize: box_ind has {ind.size} values for {boxes.shape[0]} boxes")
    ch, cw = attrs["crop_size"]
    return (boxes.shape[0], x.shape[1], int(ch), int(cw)), F32


def crop_and_resize_ref(xs: list, attrs: dict) -> np.ndarray:
    """TF CropAndResize on NCHW data: box (y1, x1, y2, x2) normalised, sample points include both ends."""
    x = np.asarray(xs[0], np.float32)
    boxes = np.asarray(xs[1], np.float64)
    ind = np.asarray(xs[2]).reshape(-1).astype(np.intp)
    n, c, h, w = x.shape
    ch, cw = attrs["crop_size"]
    ext = np.float32(attrs.get("extrapolation_value", 0.0))
    nearest = attrs.get("method", "bilinear") == "nearest"
    out = np.empty((boxes.shape[0], c, ch, cw), np.float32)
    for k in range(boxes.shape[0]):
        if not 0 <= ind[k] < n:
            raise IndexError(f"crop_and_resize: box_ind {ind[k]} is out of range for batch {n}")
        y1, x1, y2, x2 = boxes[k]
        ys = y1 * (h - 1) + np.arange(ch) * ((y2 - y1) * (h - 1) / (ch - 1)) if ch > 1 else \
            np.array([0.5 * (y1 + y2) * (h - 1)])
        xs_ = x1 * (w - 1) + np.arange(cw) * ((x2 - x1) * (w - 1) / (cw - 1)) if cw > 1 else \
            np.array([0.5 * (x1 + x2) * (w - 1)])
        vy = (ys >= 0) & (ys <= h - 1)
        vx = (xs_ >= 0) & (xs_ <= w - 1)
        img = x[ind[k]]
        if nearest:
            iy = np.clip(np.round(ys), 0, h - 1).astype(np.intp)
            ix = np.clip(np.round(xs_), 0, w - 1).astype(np.intp)
            val = img[:, iy][:, :, ix]
        else:
            y0 = np.floor(ys)
            x0 = np.floor(xs_)
            fy = (ys - y0).astype(np.float32)[None, :, None]
            fx = (xs_ - x0).astype(np.float32)[None, None, :]
            y0i = np.clip(y0, 0, h - 1).astype(np.intp)
            y1i = np.clip(y0 + 1, 0, h - 1).astype(np.intp)
            x0i = np.clip(x0, 0, w - 1).astype(np.intp)
            x1i = np.clip(x0 + 1, 0, w - 1).astype(np.intp)
            top = img[:, y0i][:, :, x0i] * (1 - fx) + img[:, y0i][:, :, x1i] * fx
            bot = img[:, y1i][:, :, x0i] * (1 - fx) + img[:, y1i][:, :, x1i] * fx
            val = top * (1 - fy) + bot * fy
        mask = vy[:, None] & vx[None, :]
        out[k] = np.where(mask[None], val, ext)
    return out


register(OpDef("crop_and_resize", "opaque", _car_infer, crop_and_resize_ref, mnn_type="CropAndResize",
               doc="TF CropAndResize on NCHW data (see docs/NN_OPS.md)"))


def crop_and_resize(x: Any, boxes: Any, box_ind: Any, crop_size: Sequence[int], method: str = "bilinear",
                    extrapolation_value: float = 0.0):
    """Build a ``crop_and_resize`` node on NCHW data; returns a Var [K, C, ch, cw]."""
    from . import build as B
    nx = B.cast_node(B.as_node(x), F32)
    nb = B.cast_node(B.as_node(boxes), F32)
    ni = B.cast_node(B.as_node(box_ind), I32)
    attrs = {"crop_size": tuple(int(s) for s in crop_size), "method": method,
             "extrapolation_value": float(extrapolation_value)}
    if method not in ("bilinear", "nearest"):
        raise ValueError(f"crop_and_resize: method must be 'bilinear' or 'nearest', got {method!r}")
    return B.wrap(B.make_node("crop_and_resize", (nx, nb, ni), attrs, fmt=nx.fmt))




# ---------------------------------------------------------------- grid_sample

def _unnormalize(coord: np.ndarray, size: int, align: bool) -> np.ndarray:
    if align:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _reflect(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Reflect coordinates into [lo, hi] (PyTorch/ONNX grid_sample reflection padding)."""
    span = hi - lo
    if span <= 0:
        return np.zeros_like(v)
    d = np.abs(v - lo)
    flips = np.floor(d / span)
    extra = d - flips * span
    return np.where(flips % 2 == 0, lo + extra, hi - extra)


def _grid_sample_ref(xs, attrs):
    x = np.asarray(xs[0], np.float32)
    grid = np.asarray(xs[1], np.float64)
    n, c, h, w = x.shape
    align = attrs.get("align_corners", False)
    pad = attrs.get("padding", "zeros")
    gx = _unnormalize(grid[..., 0], w, align)
    gy = _unnormalize(grid[..., 1], h, align)
    if pad == "border":
        gx, gy = np.clip(gx, 0, w - 1), np.clip(gy, 0, h - 1)
    elif pad == "reflection":
        if align:
            gx, gy = _reflect(gx, 0, w - 1), _reflect(gy, 0, h - 1)
        else:
            gx, gy = _reflect(gx, -0.5, w - 0.5), _reflect(gy, -0.5, h - 0.5)
        gx, gy = np.clip(gx, 0, w - 1), np.clip(gy, 0, h - 1)
    oh, ow = grid.shape[1:3]
    out = np.zeros((n, c, oh, ow), np.float32)
    bidx = np.arange(n)[:, None, None]

    def tap(iy, ix, wt):
        valid = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
        v = x[bidx, :, np.clip(iy, 0, h - 1), np.clip(ix, 0, w - 1)]  # [n, oh, ow, c]
        return np.where(valid[..., None], v, 0.0) * wt[..., None]

    if attrs.get("mode", "bilinear") == "nearest":
        if attrs.get("round_half_up", False):  # real MNN: floor(v + 0.5)
            iy, ix = np.floor(gy + 0.5).astype(np.intp), np.floor(gx + 0.5).astype(np.intp)
        else:  # round half to even, as ONNX Runtime / PyTorch
            iy, ix = np.rint(gy).astype(np.intp), np.rint(gx).astype(np.intp)
        acc = tap(iy, ix, np.ones_like(gx))
    else:
        x0, y0 = np.floor(gx), np.floor(gy)
        fx, fy = gx - x0, gy - y0
        x0i, y0i = x0.astype(np.intp), y0.astype(np.intp)
        acc = (tap(y0i, x0i, (1 - fy) * (1 - fx)) + tap(y0i, x0i + 1, (1 - fy) * fx)
               + tap(y0i + 1, x0i, fy * (1 - fx)) + tap(y0i + 1, x0i + 1, fy * fx))
    out[:] = np.moveaxis(acc, -1, 1)
    return out


def _grid_sample_infer(inputs, attrs):
    x, g = inputs
    if len(x.shape) != 4 or len(g.shape) != 4 or g.shape[3] != 2 or g.shape[0] != x.shape[0]:
        raise ValueError(f"grid_sample: input must be [N, C, H, W] and grid [N, oh, ow, 2], got {list(x.shape)} "
                         f"and {list(g.shape)}")
    return (x.shape[0], x.shape[1], g.shape[1], g.shape[2]), F32


register(OpDef("grid_sample", "opaque", _grid_sample_infer, _grid_sample_ref, mnn_type="GridSample",
               doc="GridSample (attrs mode bilinear/nearest, padding zeros/border/reflection, align_corners, "
                   "round_half_up: nearest rounds ties up instead of to even)"))
