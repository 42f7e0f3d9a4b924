"""Hand-written CPU kernels of the image ops, attached through the compiler's kernel registry.

Loaded by the CPU backend when it first needs a kernel (never by ``import mnnjit.cv``). Each kernel
returns what the op's numpy ``ref`` returns; cases a kernel does not cover (dtypes, border modes,
interpolations) run the ``ref``. ``min_size`` values: below about 2^15 output elements numpy's
reference is as fast (measured, docs/DECISIONS.md).
"""
from __future__ import annotations

import numpy as np

from mnnjit.ops import registry
from mnnjit.ops.image_color import FAST_CODES
from mnnjit.ops.image_color import FWD3
from mnnjit.ops.image_geometry import (CV_BORDER_CONSTANT, CV_BORDER_REPLICATE, INTER_LINEAR, INTER_LINEAR_EXACT,
                                   resize_area_int, resize_plan)
from mnnjit.backends.cpu.handwritten.registry import cpu_kernel


class _LazyKernels:
    """``cv_kernels``, imported when an image kernel first runs: loading the kernel registry (which
    every compiled model plan does) then does not build the image ops' Numba dispatchers."""

    def __getattr__(self, name: str):
        from mnnjit.backends.cpu.image import kernels as cv_kernels
        return getattr(cv_kernels, name)


K = _LazyKernels()


def _ref(op: str, inputs, attrs):
    return registry.get(op).ref(inputs, attrs)


@cpu_kernel("resize_image", min_size=1 << 15)
def resize_image(inputs, attrs):
    """Bilinear resize of uint8/float32 images; other interpolations use the reference."""
    x = inputs[0]
    if attrs["interp"] in (INTER_LINEAR, INTER_LINEAR_EXACT) and x.dtype in (np.uint8, np.float32):
        oh, ow = attrs["size"]
        sy, sx = attrs["scale"]
        return K.resize_linear(x, oh, ow, sy, sx)
    if x.dtype in (np.uint8, np.float32):
        oh, ow = attrs["size"]
        sy, sx = attrs["scale"]
        plan = resize_plan(x.shape[0], x.shape[1], oh, ow, attrs["interp"], sy, sx, x.dtype)
        if plan[0] == "area_int":
            return resize_area_int(x, oh, ow, plan[1], plan[2], K.resize_area_int)
        out = K.resize_general(x, oh, ow, attrs["interp"], sy, sx)
        if out is not None:
            return out
    return _ref("resize_image", inputs, attrs)


@cpu_kernel("cvt_color", min_size=1 << 15)
def cvt_color(inputs, attrs):
    """Channel swaps, gray and HSV conversions of uint8 images."""
    x = inputs[0]
    code = attrs["code"]
    if x.dtype == np.uint8 and code in FAST_CODES:
        return K.cvt_color(x, code)
    if x.dtype == np.uint8 and code in FWD3 and FWD3[code][0] in ("hsv", "hsv_full"):
        return K.bgr_to_hsv(x, FWD3[code][1], FWD3[code][0] == "hsv_full")
    return _ref("cvt_color", inputs, attrs)


@cpu_kernel("warp_affine", min_size=1 << 15)
def warp_affine(inputs, attrs):
    """Bilinear warpAffine of uint8 images with constant or replicated borders."""
    x = inputs[0]
    if attrs["interp"] == INTER_LINEAR and x.dtype == np.uint8 and x.shape[2] in (1, 3, 4) and \
            attrs["border"] in (CV_BORDER_CONSTANT, CV_BORDER_REPLICATE):
        oh, ow = attrs["size"]
        return K.warp_affine_linear_u8(x, attrs["M"], oh, ow, attrs["border"], attrs["value"])
    return _ref("warp_affine", inputs, attrs)


@cpu_kernel("sep_filter", min_size=1 << 15)
def sep_filter(inputs, attrs):
    """Separable filters of uint8 images (GaussianBlur bit-exact fixed point, others float32 taps)."""
    x = inputs[0]
    dt = np.dtype(attrs["dtype"])
    if x.dtype == np.uint8 and dt in (np.uint8, np.float32) and not attrs.get("square") \
            and len(attrs["kx"]) <= 31 and len(attrs["ky"]) <= 31:
        return K.sep_filter_u8(x, attrs["kx"], attrs["ky"], attrs["anchor"], attrs["border"], attrs["delta"], dt,
                               attrs.get("fixed", False))
    return _ref("sep_filter", inputs, attrs)


@cpu_kernel("filter2d", min_size=1 << 15)
def filter2d(inputs, attrs):
    """2-D correlation of uint8/float32 images with float32 accumulation."""
    x = inputs[0]
    dt = np.dtype(attrs["dtype"])
    if x.dtype in (np.uint8, np.float32) and dt in (np.uint8, np.float32):
        return K.filter2d(x, attrs["kernel"], attrs["anchor"], attrs["border"], attrs["delta"], dt)
    return _ref("filter2d", inputs, attrs)


@cpu_kernel("morphology", min_size=1 << 15)
def morphology(inputs, attrs):
    """erode / dilate."""
    x = inputs[0]
    if x.dtype in (np.uint8, np.float32, np.int32):
        return K.morphology(x, attrs["kernel"], attrs["anchor"], attrs["op"], attrs["iterations"], attrs["border"],
                            attrs["value"])
    return _ref("morphology", inputs, attrs)


@cpu_kernel("warp_perspective", min_size=1 << 15)
def warp_perspective(inputs, attrs):
    """Bilinear warpPerspective of uint8 images with constant or replicated borders."""
    x = inputs[0]
    if attrs["interp"] == INTER_LINEAR and x.dtype == np.uint8 and x.shape[2] in (1, 3, 4) and \
            attrs["border"] in (CV_BORDER_CONSTANT, CV_BORDER_REPLICATE):
        oh, ow = attrs["size"]
        return K.warp_perspective_linear_u8(x, attrs["M"], oh, ow, attrs["border"], attrs["value"])
    return _ref("warp_perspective", inputs, attrs)


@cpu_kernel("remap", min_size=1 << 15)
def remap(inputs, attrs):
    """Bilinear remap of uint8 images with constant or replicated borders."""
    x, mx, my = inputs
    if attrs["interp"] == INTER_LINEAR and x.dtype == np.uint8 and \
            attrs["border"] in (CV_BORDER_CONSTANT, CV_BORDER_REPLICATE):
        return K.remap_linear_u8(x, mx, my, attrs["border"], attrs["value"])
    return _ref("remap", inputs, attrs)
