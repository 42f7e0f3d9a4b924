"""Converters for MNN's CNN op types: Convolution, ConvolutionDepthwise, Deconvolution, Pooling,
Pooling3D, Interp. They map onto the NN ops of ``mnnjit/ops/nn_*.py`` (see
docs/NN_OPS.md); weights (decoded from quantized storage when needed) are made once per model."""
from __future__ import annotations

import math

import numpy as np

from .._dtypes import F32
from ..ops import build as B
from ..format import conv_weight
from .translate import Ctx, converter, node_of


def same_pads(size: int, kernel: int, stride: int, dilation: int) -> tuple[int, int]:
    """(begin, end) padding of TF/MNN SAME mode for one axis."""
    out = -(-size // stride)
    need = max(0, (out - 1) * stride + (kernel - 1) * dilation + 1 - size)
    return need // 2, need - need // 2


def _conv_pads(common: dict, hw: tuple[int, int], k: tuple[int, int], s: tuple[int, int],
               d: tuple[int, int]) -> tuple[int, int, int, int]:
    mode = str(common.get("padMode", "CAFFE"))
    if mode == "VALID":
        return (0, 0, 0, 0)
    if mode == "SAME":
        t, b = same_pads(hw[0], k[0], s[0], d[0])
        l, r = same_pads(hw[1], k[1], s[1], d[1])
        return (t, b, l, r)
    pads = common.get("pads")
    if pads is not None and len(pads) == 4:
        t, l, b, r = (int(v) for v in pads)  # MNN order: top, left, bottom, right
        return (t, b, l, r)
    py, px = int(common.get("padY") or 0), int(common.get("padX") or 0)
    return (py, py, px, px)


def _conv_weights(ctx: Ctx, op, common: dict, in_ch: int):
    p = op.main or {}
    out_ch = int(common.get("outputCount") or 0)
    kh, kw = int(common.get("kernelY") or 1), int(common.get("kernelX") or 1)

    def make():
        w = conv_weight(p, f"op {op.name!r}")
        o = out_ch or (w.size // max(1, in_ch * kh * kw))
        w = np.ascontiguousarray(w.reshape(o, -1, kh, kw), dtype=np.float32)
        bias = p.get("bias")
        b = None if bias is None or len(bias) == 0 else np.asarray(bias, np.float32)
        return w, b
    return ctx.cached((id(op), "conv"), make)


def _model_weights(ctx: Ctx, op, common: dict, in_ch: int):
    """The op's ConvWeights (kept quantized when the runtime asks for memory=low), once per model."""
    from ..ops.mnn_conv import ConvWeights
    p = op.main or {}
    keep = ctx.memory_low and p.get("quanParameter") is not None and \
        (p.get("weight") is None or len(p.get("weight")) == 0)

    def make():
        bias = p.get("bias")
        b = None if bias is None or len(bias) == 0 else np.asarray(bias, np.float32)
        kh, kw = int(common.get("kernelY") or 1), int(common.get("kernelX") or 1)
        if keep:
            from ..format import quantized_weight
            from ..format.errors import MNNFormatError
            try:
                q = quantized_weight(p["quanParameter"], f"op {op.name!r}")
            except MNNFormatError:
                q = None
            if q is not None and q.bits <= 8:
                o = int(common.get("outputCount") or 0) or q.num_groups
                return ConvWeights((o, q.codes.size // (o * kh * kw), kh, kw), b, quant=q)
        w, _ = _conv_weights(ctx, op, common, in_ch)
        return ConvWeights(w.shape, b, dense=w)
    return ctx.cached((id(op), "convweights", keep), make)


def _as_4d(x, what: str):
    """``x`` as 4-D and whether it was 3-D: real MNN runs a [N, C, L] input of a 2-D layer as
    [N, C, L, 1] (its ONNX converter leaves a Conv1d with dynamic length unsqueezed; the layer's
    kernel is then (k, 1))."""
    if len(x.shape) == 3:
        return node_of(B.reshape(x, (*x.shape, 1))), True
    if len(x.shape) != 4:
        raise ValueError(f"{what} input must be 4-D (N, C, H, W) or 3-D (N, C, L), got shape "
                         f"{list(x.shape)}")
    return x, False


def _back_to_3d(y):
    """A 4-D [N, C, L, 1] result as the [N, C, L] a 3-D input gives."""
    return B.reshape(y, tuple(node_of(y).shape[:3]))


@converter("Convolution", "ConvolutionDepthwise")
def convolution(ctx: Ctx, op, xs):
    """2-D convolution (weights in the op, or as extra inputs) with fused ReLU / ReLU6; a 3-D
    input runs as [N, C, L, 1]."""
    x, was_3d = _as_4d(B.cast_node(xs[0], F32), "convolution")
    y = _convolution_4d(ctx, op, [x, *xs[1:]])
    return _back_to_3d(y) if was_3d else y


def _convolution_4d(ctx: Ctx, op, xs):
    p = op.main or {}
    common = p.get("common") or {}
    x = xs[0]
    in_ch = x.shape[1]
    weights = None
    if len(xs) >= 2:
        w_node = xs[1]
        b_node = xs[2] if len(xs) > 2 else None
        out_ch, wi, kh, kw = w_node.shape
    else:
        weights = _model_weights(ctx, op, common, in_ch)
        out_ch, wi, kh, kw = weights.shape
    group = int(common.get("group") or 1)
    if op.type == "ConvolutionDepthwise" or (wi == 1 and in_ch == out_ch and in_ch > 1):
        group = in_ch
    if wi * group != in_ch:
        raise ValueError(f"convolution weights {[out_ch, wi, kh, kw]} (group {group}) do not fit "
                         f"{in_ch} input channels")
    s = (int(common.get("strideY") or 1), int(common.get("strideX") or 1))
    d = (int(common.get("dilateY") or 1), int(common.get("dilateX") or 1))
    pads = _conv_pads(common, x.shape[2:], (kh, kw), s, d)
    act = "relu6" if common.get("relu6") else ("relu" if common.get("relu") else "")
    attrs = {"stride": s, "dilation": d, "pads": pads, "group": group, "act": act}
    n, _, h, wd = x.shape
    if weights is not None:
        if (kh, kw) == (1, 1) and (h, wd) == (1, 1) and s == (1, 1) and pads == (0, 0, 0, 0) and group == 1 \
                and not weights.quantized:
            w_node = ctx.cached((id(op), "wnode"), lambda: ctx.const(weights.dense()))
            b_node = None if weights.bias is None else ctx.cached((id(op), "bnode"), lambda: ctx.const(weights.bias))
            return _dense(ctx, op, x, w_node, b_node, act)
        return ctx.emit("mnn_conv2d", [x], dict(attrs, weights=weights))
    ins = [x, w_node] + ([] if b_node is None else [b_node])
    return ctx.emit("conv2d", ins, attrs)


def _dense(ctx: Ctx, op, x, w_node, b_node, act: str):
    """A 1x1 convolution of a 1x1 image is a matrix product (the converter's Gemm form). A single
    image runs as a matrix-vector product W @ x (BLAS gemv: measured ~10x faster than x @ W.T for a
    1000x1280 classifier); small layers and batches as x @ W.T (fewer plan steps)."""
    n, c = x.shape[0], x.shape[1]
    o = w_node.shape[0]
    attrs = {"transpose_a": False, "transpose_b": False, "act": act}
    if n == 1 and o * c >= 65536:
        w2 = ctx.cached((id(op), "w2"), lambda: node_of(B.reshape(w_node, (o, c))))
        ins = [w2, node_of(B.reshape(x, (c,)))] + ([] if b_node is None else [b_node])
    else:
        wt = ctx.cached((id(op), "wt"), lambda: node_of(B.transpose(B.reshape(w_node, (o, c)), (1, 0))))
        ins = [node_of(B.reshape(x, (n, c))), wt] + ([] if b_node is None else [b_node])
    out = ctx.emit("matmul_ex", ins, attrs)
    return B.reshape(out, (n, o, 1, 1))


def _deconv_same_pads(ctx: Ctx, common: dict, xs, size, k, s, d) -> tuple[tuple, tuple]:
    """(pads (t, b, l, r), output padding) of a SAME transposed convolution (ONNX ConvTranspose with
    ``output_shape`` or ``auto_pad``), real MNN's rule (measured): the output size is the second input's
    (H, W) when the op has an output shape, else input size x stride; the output starts at
    ``trunc(total / 2)`` of the full result, ``total = (in - 1) * stride + kernel - out`` counted with the
    undilated kernel (a negative start puts zeros first; cells past the full result are zeros). ONNX
    puts the odd cell first for SAME_LOWER and for an explicit output_shape without auto_pad (and counts
    the dilated kernel), so those cases differ from ONNX Runtime, in real MNN and mnnjit alike."""
    if common.get("hasOutputShape") and len(xs) > 1:
        v = ctx.ints(xs[1], "deconvolution output shape")
        if len(v) not in (2, 4):
            raise ValueError(f"Deconvolution: output shape {v} is not (H, W) or (N, H, W, C)")
        out = (v[1], v[2]) if len(v) == 4 else (v[0], v[1])
    else:
        out = (size[0] * s[0], size[1] * s[1])
    pads, extra = [], []
    for n_in, n_out, kk, ss, dd in zip(size, out, k, s, d):
        if n_out <= 0:
            raise ValueError(f"Deconvolution: output size {list(out)} must be positive")
        begin = int(((n_in - 1) * ss + kk - n_out) / 2)  # C division: toward zero
        full = (n_in - 1) * ss + (kk - 1) * dd + 1
        end = full - n_out - begin  # cells cropped at the end (negative: zeros added there)
        pads.append((begin, max(0, end)))
        extra.append(max(0, -end))
    return (pads[0][0], pads[0][1], pads[1][0], pads[1][1]), (extra[0], extra[1])


@converter("Deconvolution", "DeconvolutionDepthwise")
def deconvolution(ctx: Ctx, op, xs):
    """Transposed 2-D convolution (MNN stores weights as [O, C/group, kh, kw]... per group); a 3-D
    input runs as [N, C, L, 1]."""
    x, was_3d = _as_4d(B.cast_node(xs[0], F32), "deconvolution")
    y = _deconvolution_4d(ctx, op, [x, *xs[1:]])
    return _back_to_3d(y) if was_3d else y


def _deconvolution_4d(ctx: Ctx, op, xs):
    p = op.main or {}
    common = p.get("common") or {}
    x = xs[0]
    in_ch = x.shape[1]
    out_ch = int(common.get("outputCount") or 0)
    group = int(common.get("group") or 1)
    if op.type == "DeconvolutionDepthwise":
        group = in_ch
    kh, kw = int(common.get("kernelY") or 1), int(common.get("kernelX") or 1)

    def make():
        w = conv_weight(p, f"op {op.name!r}").reshape(in_ch, out_ch // group, kh, kw)
        bias = p.get("bias")
        return w.astype(np.float32), (None if bias is None or len(bias) == 0 else np.asarray(bias, np.float32))
    w, b = ctx.cached((id(op), "deconv"), make)
    s = (int(common.get("strideY") or 1), int(common.get("strideX") or 1))
    d = (int(common.get("dilateY") or 1), int(common.get("dilateX") or 1))
    mode = str(common.get("padMode", "CAFFE"))
    outp = common.get("outPads")
    # (h, w); the per-depth-tap deconvolutions real MNN's converter writes for a ConvTranspose3d carry
    # 4 values, the last two read past the 3-D op's 3 (garbage): real MNN uses the first two
    op_pad = (int(outp[0]), int(outp[1])) if outp is not None and len(outp) >= 2 else (0, 0)
    if mode == "SAME":
        pads, op_pad = _deconv_same_pads(ctx, common, xs, x.shape[2:], (kh, kw), s, d)
    else:
        pads = (0, 0, 0, 0) if mode == "VALID" else _conv_pads(common, x.shape[2:], (kh, kw), s, d)
    act = "relu6" if common.get("relu6") else ("relu" if common.get("relu") else "")
    ins = [x, ctx.const(w)] + ([] if b is None else [ctx.const(b)])
    return ctx.emit("conv2d_transpose", ins, {"stride": s, "dilation": d, "pads": pads, "group": group,
                                              "output_padding": op_pad, "act": act})


def _pool(ctx: Ctx, op, x, kind: str, attrs: dict):
    if kind not in ("max", "avg"):
        raise ctx.unsupported(op, f"pooling type {kind}")
    return ctx.emit("pool2d", [B.cast_node(x, F32)], dict(attrs, kind=kind))


_POOL_KIND = {"MAXPOOL": "max", "AVEPOOL": "avg"}


def _count_rule(attrs: dict, count_type: str) -> dict:
    """Average divisor: only INCLUDE_PADDING counts padded cells; DEFAULT (what the converter writes
    for ONNX count_include_pad=0) and EXCLUDE_PADDING count the real cells (checked against real MNN)."""
    return dict(attrs, count_include_pad=count_type == "INCLUDE_PADDING")


@converter("Pooling")
def pooling(ctx: Ctx, op, xs):
    """2-D max / average pooling (CAFFE, VALID or SAME padding; global), MNN's output-size rule."""
    from ..ops.nn_pool import resolve_mnn_pool
    p = op.main or {}
    x = xs[0]
    if len(x.shape) == 3:  # [N, C, L] pools as [N, C, L, 1] (the converter puts the window in kernelY)
        outs = pooling(ctx, op, [_as_4d(x, "pooling")[0]])
        if isinstance(outs, list):  # with indices: [N, C, L, 1] offsets are the [N, C, L] ones
            return [_back_to_3d(o) for o in outs]
        return _back_to_3d(outs)
    if len(x.shape) != 4:
        raise ValueError(f"pooling input must be 4-D (N, C, H, W), got shape {list(x.shape)}")
    kind = _POOL_KIND.get(str(p.get("type", "MAXPOOL")), str(p.get("type")))
    pl = p.get("pads")
    pads = None
    if pl is not None and len(pl) == 4:
        t, l, b, r = (int(v) for v in pl)  # MNN order: top, left, bottom, right
        pads = (t, b, l, r)
    attrs = resolve_mnn_pool(x.shape[2:], (int(p.get("kernelY") or 1), int(p.get("kernelX") or 1)),
                             (int(p.get("strideY") or 1), int(p.get("strideX") or 1)), str(p.get("padType", "CAFFE")),
                             (int(p.get("padY") or 0), int(p.get("padX") or 0)), pads,
                             bool(p.get("ceilModel", True)), bool(p.get("isGlobal")))
    y = _pool(ctx, op, x, kind, _count_rule(attrs, str(p.get("countType", "DEFAULT"))))
    if len(op.outputIndexes or []) < 2:
        return y
    if kind != "max":
        raise ctx.unsupported(op, "a second (indices) output of average pooling")
    # ONNX MaxPool's Indices (real MNN 3.6.1 writes other values there: mnnjit gives ONNX's)
    return [y, ctx.emit("max_pool_argmax", [B.cast_node(x, F32)], attrs)]


@converter("Pooling3D")
def pooling3d(ctx: Ctx, op, xs):
    """Pool3D: on 4-D data (the converter's form of global and 2-D pooling) and on 5-D data."""
    from ..ops.nn_pool import resolve_mnn_pool
    p = op.main or {}
    x = xs[0]
    kind = _POOL_KIND.get(str(p.get("type", "MAXPOOL")), str(p.get("type")))
    if len(x.shape) == 5 and p.get("isGlobal") and kind in ("max", "avg"):
        # ONNX GlobalAveragePool / GlobalMaxPool of [N, C, D, H, W]: a reduction over D, H, W
        red = "reduce_max" if kind == "max" else "reduce_mean"
        return B.reduce(red, B.cast_node(x, F32), (2, 3, 4), True)
    if len(x.shape) == 5 and not p.get("isGlobal"):
        return _pooling3d_5d(ctx, op, x, kind)
    if len(x.shape) != 4:
        raise ctx.unsupported(op, f"3-D pooling of a {len(x.shape)}-D tensor")
    if p.get("isGlobal"):
        attrs = resolve_mnn_pool(x.shape[2:], (1, 1), (1, 1), "CAFFE", global_pool=True)
    else:
        ks = [int(v) for v in p.get("kernels")][-2:]
        ss = [int(v) for v in p.get("strides")][-2:]
        ps = [int(v) for v in (p.get("pads") if p.get("pads") is not None else [0, 0])][-2:]
        attrs = resolve_mnn_pool(x.shape[2:], ks, ss, str(p.get("padType", "CAFFE")), (ps[0], ps[1]), None, False)
    return _pool(ctx, op, x, kind, attrs)


def _pooling3d_5d(ctx: Ctx, op, x, kind: str):
    """Pool3D of [N, C, D, H, W] (ONNX 5-D MaxPool / AveragePool) as real MNN computes it: a 2-D pooling
    of every depth slice over (H, W) with the op's padType (CAFFE: symmetric ``pads`` (d, h, w), floor
    sizes; averages count the padding there, as the 4-D form does), then a pooling of the depth axis
    whose averages count only real cells (measured: ONNX Runtime counts no padding on any axis)."""
    from ..ops.nn_pool import resolve_mnn_pool
    p = op.main or {}
    ks, ss, ps = ([int(v) for v in (p.get(f) if p.get(f) is not None else dflt)]
                  for f, dflt in (("kernels", []), ("strides", [1, 1, 1]), ("pads", [0, 0, 0])))
    if len(ks) != 3 or len(ss) != 3 or len(ps) != 3:
        raise ctx.unsupported(op, f"kernels {ks}, strides {ss}, pads {ps} for a 5-D input (3 values each)")
    pad_type = str(p.get("padType", "CAFFE"))
    n, c, d, h, w = x.shape
    hw = resolve_mnn_pool((h, w), ks[1:], ss[1:], pad_type, (ps[1], ps[2]), None, False)
    y = _pool(ctx, op, node_of(B.reshape(x, (n, c * d, h, w))), kind, hw)
    oh, ow = hw["out"]
    dep = resolve_mnn_pool((d, oh * ow), (ks[0], 1), (ss[0], 1), pad_type, (ps[0], 0), None, False)
    y = _pool(ctx, op, node_of(B.reshape(y, (n, c, d, oh * ow))), kind, dict(dep, count_include_pad=False))
    return B.reshape(y, (n, c, dep["out"][0], oh, ow))


_CTM = {"AlignCorners": "align_corners", "HalfPixels": "half_pixel", "PytorchHalfPixels": "pytorch_half_pixel",
        "Asymmetric": "asymmetric", "TensorflowHalfPixels": "tf_half_pixel"}
#: resizeType 4 rounds to the nearest source pixel with ties going down (real MNN: 0.5 -> 0), which is
#: ``ceil(src - 0.5)``: the resize op's "nearest_ceil" with a -0.5 offset.
_RESIZE = {1: "nearest", 2: "bilinear", 3: "cubic", 4: "nearest_ceil"}


def _interp_targets(ctx: Ctx, op, xs, spatial: tuple) -> tuple[list[int], list | None]:
    """(output sizes, input-per-output scales or None) of an Interp's spatial axes: from the scales or
    sizes input, else from the op's output sizes / scales (depth, height, width)."""
    p = op.main or {}
    k = len(spatial)
    if len(xs) > 1:
        v = np.asarray(ctx.value(xs[1], "resize scales/sizes")).reshape(-1)
        if v.size < k and v.size != 1:
            raise ValueError(f"Interp: {v.size} scales/sizes for {k} spatial axes")
        v = v[-k:] if v.size >= k else np.repeat(v, k)
        if xs[1].dtype.kind == "f":
            sc = [float(t) for t in v]
            if min(sc) <= 0:
                raise ValueError(f"Interp: resize scales must be positive, got {sc}")
            # ONNX Resize with scales (and real MNN) maps coordinates with the given scale, not out/in,
            # its reciprocal taken in float32 as real MNN does
            return [int(math.floor(n * t)) for n, t in zip(spatial, sc)], [float(np.float32(1) / np.float32(t)) for t in sc]
        return [int(t) for t in v], None
    names = ("Depth", "Height", "Width")[3 - k:]
    outs = [int(p.get(f"output{nm}") or 0) for nm in names]
    if all(outs):
        return outs, None
    sc = [float(p.get(f"{nm.lower()}Scale") or 0) for nm in names]
    if not all(sc):
        raise ctx.unsupported(op, "resize without an output size or scale")
    return [int(n * t) for n, t in zip(spatial, sc)], None


@converter("Interp")
def interp(ctx: Ctx, op, xs):
    """Resize (nearest, bilinear, cubic) to the output size given by the op or its extra inputs. 3-D
    inputs [N, C, L] resize as [N, C, 1, L]; 5-D inputs [N, C, D, H, W] as two separable passes (H and
    W, then D), which is exact since each method weights every axis separately."""
    p = op.main or {}
    x = B.cast_node(xs[0], F32)
    nd = len(x.shape)
    if nd not in (3, 4, 5):
        raise ctx.unsupported(op, f"resizing a {nd}-D tensor")
    outs, scales = _interp_targets(ctx, op, xs, tuple(x.shape[2:]))
    if min(outs) <= 0:
        raise ValueError(f"Interp: output size {outs} must be positive")
    method = _RESIZE.get(int(p.get("resizeType") or 1))
    if method is None:
        raise ctx.unsupported(op, f"resizeType {p.get('resizeType')}")
    ctm = str(p.get("ctm", "NotSet"))
    if ctm == "TensorflowCropAndResize":  # the crop box (ONNX roi) is not in the op: no answer to give
        raise ctx.unsupported(op, "tf_crop_and_resize resizing (MNN's converter drops the roi input; "
                                  "real MNN 3.6.1 returns a constant there)")
    if ctm in _CTM:
        coord = _CTM[ctm]
    elif p.get("alignCorners"):
        coord = "align_corners"
    elif p.get("halfPixelCenters"):
        coord = "half_pixel"
    else:
        coord = "asymmetric"

    def resize2d(node, size, scale):
        attrs = {"size": tuple(size), "method": method, "coord": coord,
                 "cubic_a": float(p.get("cubicCoeffA", -0.75)), "exclude_outside": False}
        if scale is not None and coord != "align_corners":
            attrs["scale"] = tuple(scale)
        if method == "nearest_ceil":
            attrs["offset"] = (-0.5, -0.5)
        if method == "cubic":  # real MNN's CPU kernel: Keys a = -0.75 whatever cubicCoeffA says
            attrs["trunc_taps"], attrs["cubic_a"] = True, -0.75
        return ctx.emit("resize", [node_of(node)], attrs)

    n, c = x.shape[0], x.shape[1]
    if nd == 4:
        return resize2d(x, outs, scales)
    if nd == 3:
        y = resize2d(B.reshape(x, (n, c, 1, x.shape[2])), (1, outs[0]), None if scales is None else (1.0, scales[0]))
        return B.reshape(y, (n, c, outs[0]))
    d, h, w = x.shape[2:]
    od, oh, ow = outs
    y = resize2d(B.reshape(x, (n, c * d, h, w)), (oh, ow), None if scales is None else scales[1:])
    y = resize2d(B.reshape(y, (n, c, d, oh * ow)), (od, oh * ow), None if scales is None else (scales[0], 1.0))
    return B.reshape(y, (n, c, od, oh, ow))


#: MNN's GridSample BorderMode -> the grid_sample op's padding. Real MNN's CPU kernel only tells ZEROS
#: from the rest: any other mode clamps the sample indices to the border, so REFLECTION (ONNX/PyTorch
#: "reflection") runs as "border" there, unlike ONNX Runtime; mnnjit follows real MNN.
_GRID_PADDING = {"ZEROS": "zeros", "CLAMP": "border", "REFLECTION": "border"}


@converter("GridSample")
def grid_sample(ctx: Ctx, op, xs):
    """Sample ``x`` [N, C, H, W] at the normalised (x, y) points of ``grid`` [N, oh, ow, 2]
    (bilinear or nearest; zeros, border or reflection padding; align_corners)."""
    p = op.main or {}
    if p.get("backward"):
        raise ctx.unsupported(op, "the backward (gradient) GridSample")
    if len(xs) != 2:
        raise ctx.unsupported(op, f"GridSample with {len(xs)} inputs")
    x, grid = B.cast_node(xs[0], F32), B.cast_node(xs[1], F32)
    if len(x.shape) != 4:
        raise ctx.unsupported(op, f"sampling a {len(x.shape)}-D tensor (only 4-D [N, C, H, W])")
    mode = str(p.get("mode", "BILINEAR"))
    padding = _GRID_PADDING.get(str(p.get("paddingMode", "ZEROS")))
    if mode not in ("BILINEAR", "NEAREST") or padding is None:
        raise ctx.unsupported(op, f"mode {mode}, paddingMode {p.get('paddingMode')}")
    # real MNN's nearest mode rounds a sample position with floor(v + 0.5) (ONNX: ties to even)
    attrs = {"mode": mode.lower(), "padding": padding, "align_corners": bool(p.get("alignCorners")),
             "round_half_up": True}
    return ctx.emit("grid_sample", [x, grid], attrs)
