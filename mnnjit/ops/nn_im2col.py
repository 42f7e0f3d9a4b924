"""Patch extraction and its inverse: ``im2col`` and ``col2im`` (MNN's Im2Col / Col2Im op types).

Real MNN's ONNX converter lowers a 3-D convolution to ``Im2Col`` over the depth axis followed by 2-D
convolutions, and a 3-D transposed convolution to 2-D deconvolutions followed by ``Col2Im`` (see
``docs/NN_OPS.md``). Attributes (all ``(h, w)`` tuples): ``kernel``, ``stride``, ``dilation`` and
``pads`` ``(top, bottom, left, right)`` (zero padding, non-negative); ``col2im`` also takes ``size``
``(oh, ow)``, the image size.

Layouts (MNN's):

* ``im2col``: x ``[N, C, H, W]`` -> ``[C*kh*kw, N*oh*ow]``; row ``(c*kh + ky)*kw + kx``, column
  ``(n*oh + y)*ow + x`` holds ``x[n, c, y*sh - top + ky*dh, x*sw - left + kx*dw]`` (0 in the padding),
  ``oh = (H + top + bottom - ((kh-1)*dh + 1)) // sh + 1`` (the convolution rule).
* ``col2im``: col ``[N, C*kh*kw, L]`` with ``L = bh*bw`` blocks (the convolution rule applied to
  ``size``) -> ``[N, C, oh, ow]``, the sum over taps of each block's value at the image cell that
  ``im2col`` would have read it from; cells in the padding are dropped.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .nn_conv import conv_out_size
from .registry import OpDef, register


def _blocks(size: Sequence[int], attrs: dict) -> tuple[int, int]:
    """Number of kernel positions (bh, bw) over an image of ``size`` (h, w)."""
    (kh, kw), (sh, sw), (dh, dw) = attrs["kernel"], attrs["stride"], attrs["dilation"]
    t, b, l, r = attrs["pads"]
    return conv_out_size(size[0], t, b, kh, sh, dh), conv_out_size(size[1], l, r, kw, sw, dw)


def _check_attrs(name: str, attrs: dict) -> None:
    vals = (*attrs["kernel"], *attrs["stride"], *attrs["dilation"])
    if min(vals) < 1:
        raise ValueError(f"{name}: kernel {attrs['kernel']}, stride {attrs['stride']} and dilation "
                         f"{attrs['dilation']} must be positive")
    if min(attrs["pads"]) < 0:
        raise ValueError(f"{name}: pads {attrs['pads']} must not be negative")


def _tap_views(padded: np.ndarray, blocks: tuple[int, int], attrs: dict):
    """Yield ((ky, kx), view): the [..., bh, bw] strided view of ``padded`` each kernel tap reads."""
    (kh, kw), (sh, sw), (dh, dw) = attrs["kernel"], attrs["stride"], attrs["dilation"]
    bh, bw = blocks
    for ky in range(kh):
        for kx in range(kw):
            y0, x0 = ky * dh, kx * dw
            yield (ky, kx), padded[..., y0: y0 + (bh - 1) * sh + 1: sh, x0: x0 + (bw - 1) * sw + 1: sw]


# ---------------------------------------------------------------- im2col

def _im2col_infer(inputs, attrs):
    x = inputs[0]
    if len(x.shape) != 4:
        raise ValueError(f"im2col: input must be 4-D [N, C, H, W], got shape {list(x.shape)}")
    _check_attrs("im2col", attrs)
    n, c, h, w = x.shape
    bh, bw = _blocks((h, w), attrs)
    if bh <= 0 or bw <= 0:
        raise ValueError(f"im2col: kernel {attrs['kernel']} (dilation {attrs['dilation']}) is larger than "
                         f"the padded input {[h, w]} (pads {attrs['pads']})")
    kh, kw = attrs["kernel"]
    return (c * kh * kw, n * bh * bw), x.dtype


def im2col_ref(xs: list, attrs: dict) -> np.ndarray:
    """Patches of ``x`` as columns (layout in the module docstring): one strided copy per kernel tap."""
    x = np.asarray(xs[0])
    n, c, h, w = x.shape
    t, b, l, r = attrs["pads"]
    kh, kw = attrs["kernel"]
    bh, bw = _blocks((h, w), attrs)
    padded = x
    if t or b or l or r:
        padded = np.zeros((n, c, h + t + b, w + l + r), x.dtype)
        padded[:, :, t: t + h, l: l + w] = x
    out = np.empty((c, kh, kw, n, bh, bw), x.dtype)
    for (ky, kx), view in _tap_views(padded, (bh, bw), attrs):
        out[:, ky, kx] = view.transpose(1, 0, 2, 3)
    return out.reshape(c * kh * kw, n * bh * bw)


register(OpDef("im2col", "opaque", _im2col_infer, im2col_ref, mnn_type="Im2Col",
               doc="patches of x [N, C, H, W] as columns [C*kh*kw, N*oh*ow] (zero padding)"))


# ---------------------------------------------------------------- col2im

def _col2im_infer(inputs, attrs):
    col = inputs[0]
    if len(col.shape) != 3:
        raise ValueError(f"col2im: input must be 3-D [N, C*kh*kw, L], got shape {list(col.shape)}")
    _check_attrs("col2im", attrs)
    n, rows, length = col.shape
    kh, kw = attrs["kernel"]
    oh, ow = attrs["size"]
    if oh <= 0 or ow <= 0:
        raise ValueError(f"col2im: output size {list(attrs['size'])} must be positive")
    if rows % (kh * kw):
        raise ValueError(f"col2im: {rows} rows are not a multiple of the kernel's {kh * kw} taps")
    bh, bw = _blocks((oh, ow), attrs)
    if bh <= 0 or bw <= 0 or bh * bw != length:
        raise ValueError(f"col2im: {length} columns do not fit the {max(bh, 0)}x{max(bw, 0)} kernel positions "
                         f"of a {oh}x{ow} image (kernel {attrs['kernel']}, stride {attrs['stride']}, "
                         f"dilation {attrs['dilation']}, pads {attrs['pads']})")
    return (n, rows // (kh * kw), oh, ow), col.dtype


def col2im_ref(xs: list, attrs: dict) -> np.ndarray:
    """Sum the columns back into the image (layout in the module docstring): one strided add per tap."""
    col = np.asarray(xs[0])
    n, rows, _ = col.shape
    kh, kw = attrs["kernel"]
    (sh, sw), (dh, dw) = attrs["stride"], attrs["dilation"]
    t, b, l, r = attrs["pads"]
    oh, ow = attrs["size"]
    c = rows // (kh * kw)
    bh, bw = _blocks((oh, ow), attrs)
    # the padded canvas covers both the image with its pads and every cell a tap reaches
    ph = max(oh + t + b, (bh - 1) * sh + (kh - 1) * dh + 1)
    pw = max(ow + l + r, (bw - 1) * sw + (kw - 1) * dw + 1)
    canvas = np.zeros((n, c, ph, pw), col.dtype)
    taps = col.reshape(n, c, kh, kw, bh, bw)
    for (ky, kx), view in _tap_views(canvas, (bh, bw), attrs):
        view += taps[:, :, ky, kx]
    return np.ascontiguousarray(canvas[:, :, t: t + oh, l: l + ow])


register(OpDef("col2im", "opaque", _col2im_infer, col2im_ref, mnn_type="Col2Im",
               doc="sum columns [N, C*kh*kw, L] back into an image [N, C, oh, ow] (inverse layout of im2col)"))
