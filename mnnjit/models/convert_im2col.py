"""Converters for MNN's Im2Col and Col2Im op types (ops ``im2col`` / ``col2im``, mnnjit/ops/nn_im2col.py).

Real MNN 3.6.1's ONNX converter writes them for 3-D convolutions: a Conv on 5-D input becomes
Reshape [1, N*C, D, H*W] -> Im2Col (kernel (kd, 1) over the depth axis) -> one 2-D Convolution per
depth tap -> sum; a ConvTranspose on 5-D input becomes one 2-D Deconvolution per depth tap ->
Col2Im (kernel (kd, 1)) over [N, C*kd, D*H*W] columns. The fields are the ``Convolution2DCommon`` of
the op: kernelY/X, strideY/X, dilateY/X and ``pads`` ([top, left, bottom, right]; padY/padX when absent).

Real MNN lays the columns out for the undilated kernel's block count while it sizes the tensors with
the dilated one, so with a dilation above 1 it reads and writes outside its buffers (measured: errors
of 5.7 on values of 4 for a depth-dilated Conv3d, values of 1e36 for a depth-dilated ConvTranspose3d).
mnnjit uses the dilated kernel throughout, which gives ONNX's answer there; elsewhere both agree.
"""
from __future__ import annotations

from .._dtypes import F32
from ..ops import build as B
from .translate import Ctx, converter


def _fold_attrs(ctx: Ctx, op) -> dict:
    """Kernel, stride, dilation and (top, bottom, left, right) pads of an Im2Col / Col2Im op."""
    common = (op.main or {}).get("common") or {}
    pads = common.get("pads")
    if pads is not None and len(pads) >= 4:
        t, l, b, r = (int(v) for v in pads[:4])  # MNN order: top, left, bottom, right
    else:
        py, px = int(common.get("padY") or 0), int(common.get("padX") or 0)
        t, b, l, r = py, py, px, px
    mode = str(common.get("padMode", "CAFFE"))
    # real MNN sizes the result with padMode but fills it with the pads: only CAFFE (and a VALID
    # mode without pads) agree, and its converter only writes CAFFE
    if mode == "SAME" or (mode == "VALID" and (t or b or l or r)):
        raise ctx.unsupported(op, f"padMode {mode} with pads {[t, l, b, r]}")
    return {"kernel": (int(common.get("kernelY") or 1), int(common.get("kernelX") or 1)),
            "stride": (int(common.get("strideY") or 1), int(common.get("strideX") or 1)),
            "dilation": (int(common.get("dilateY") or 1), int(common.get("dilateX") or 1)),
            "pads": (t, b, l, r)}


@converter("Im2Col")
def im2col(ctx: Ctx, op, xs):
    """Patches of a 4-D [N, C, H, W] input as columns [C*kh*kw, N*oh*ow] (float32)."""
    x = xs[0]
    if len(x.shape) != 4:
        raise ctx.unsupported(op, f"a {len(x.shape)}-D input (Im2Col takes [N, C, H, W])")
    return ctx.emit("im2col", [B.cast_node(x, F32)], _fold_attrs(ctx, op))


@converter("Col2Im")
def col2im(ctx: Ctx, op, xs):
    """Columns [N, C*kh*kw, L] (or [C*kh*kw, L]: one image) summed back into [N, C, oh, ow], the
    image size (oh, ow) being the second input."""
    if len(xs) != 2:
        raise ctx.unsupported(op, f"{len(xs)} inputs (Col2Im takes the columns and the image size)")
    col = B.cast_node(xs[0], F32)
    size = ctx.ints(xs[1], "Col2Im image size")
    if len(size) != 2:
        raise ValueError(f"Col2Im: the image size must hold (height, width), got {size}")
    if len(col.shape) == 2:
        col = B.as_node(B.reshape(col, (1, *col.shape)))
    elif len(col.shape) != 3:
        raise ctx.unsupported(op, f"a {len(col.shape)}-D input (Col2Im takes [N, C*kh*kw, L] or [C*kh*kw, L])")
    return ctx.emit("col2im", [col], dict(_fold_attrs(ctx, op), size=(size[0], size[1])))
