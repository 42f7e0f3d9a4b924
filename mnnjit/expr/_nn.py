"""MNN.expr neural-network functions: convolution, pooling, resize, softmax, activations,
normalisation, detection. Argument orders, defaults, (x, y) tuple order and format checks follow
real MNN 3.6.1 (see docs/COMPATIBILITY.md for the few differences)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..ops import build as B
from ..ops import nn_conv, nn_pool, nn_resize
from ..var import Var
from . import _common as C
from ._enums import AVEPOOL, BILINEAR, NEAREST, VALID, Padding_Mode


def _pad_mode(mode: Any) -> str:
    try:
        return Padding_Mode(int(mode)).name
    except (ValueError, TypeError):
        raise ValueError(f"padding_mode must be CAFFE, VALID or SAME, got {mode!r}") from None


# ---------------------------------------------------------------- convolution

def _conv_pads(mode: str, padding: Sequence[int], kernel_hw, in_hw, stride, dilation, transpose: bool):
    px, py = C.ints(padding, "padding", 2)
    if mode == "SAME":
        fn = nn_conv.resolve_deconv_pads if transpose else nn_conv.resolve_conv_pads
        return fn(in_hw, kernel_hw, stride, dilation, "SAME")
    if mode == "VALID" and not transpose:
        # MNN: the output keeps the VALID size, windows start at (-padY, -padX)
        return (py, -py, px, -px)
    return (py, py, px, px)


def conv2d(input: Any, weight: Any, bias: Any, stride: Sequence[int] = (1, 1),  # noqa: A002
           padding: Sequence[int] = (0, 0), dilate: Sequence[int] = (1, 1), group: int = 1,
           padding_mode: Any = VALID) -> Var:
    """2-D convolution of NC4HW4 ``input`` with ``weight`` [O, I/group, kh, kw] and ``bias`` [O].

    ``stride``, ``padding`` and ``dilate`` are (x, y) pairs as in MNN; the result is NC4HW4.
    """
    x = C.var(input)
    C.require_c4(x)
    w = C.as_float(C.node(weight))
    b = C.as_float(C.node(bias))
    if len(w.shape) != 4:
        raise ValueError(f"conv2d: weight must be 4-D [O, I/group, kh, kw], got shape {list(w.shape)}")
    stride_hw, dil_hw = C.pair_xy(stride, "stride"), C.pair_xy(dilate, "dilate")
    mode = _pad_mode(padding_mode)
    nx = C.as_float(x._node)
    pads = _conv_pads(mode, padding, w.shape[2:], nx.shape[2:], stride_hw, dil_hw, False)
    return nn_conv.conv2d(nx, w, b, stride_hw, dil_hw, pads, int(group))


def conv2d_transpose(input: Any, weight: Any, bias: Any, stride: Sequence[int] = (1, 1),  # noqa: A002
                     padding: Sequence[int] = (0, 0), dilate: Sequence[int] = (1, 1), group: int = 1,
                     padding_mode: Any = VALID) -> Var:
    """Transposed 2-D convolution of NC4HW4 ``input``; ``weight`` is [C_in, O/group, kh, kw]; NC4HW4 result."""
    x = C.var(input)
    C.require_c4(x)
    w = C.as_float(C.node(weight))
    b = C.as_float(C.node(bias))
    if len(w.shape) != 4:
        raise ValueError(f"conv2d_transpose: weight must be 4-D [C_in, O/group, kh, kw], got {list(w.shape)}")
    stride_hw, dil_hw = C.pair_xy(stride, "stride"), C.pair_xy(dilate, "dilate")
    mode = _pad_mode(padding_mode)
    nx = C.as_float(x._node)
    pads = _conv_pads(mode, padding, w.shape[2:], nx.shape[2:], stride_hw, dil_hw, True)
    return nn_conv.conv2d_transpose(nx, w, b, stride_hw, dil_hw, pads, int(group))


# ---------------------------------------------------------------- pooling

def _pool(kind: str, x: Any, kernel: Any, stride: Any, padding_mode: Any, pads: Any) -> Var:
    v = C.var(x)
    n = v._node
    if len(n.shape) != 4:
        raise ValueError(f"{kind}_pool: input must be 4-D, got shape {list(n.shape)}")
    fmt = n.fmt
    n = C.to_nchw(n)
    k_hw, s_hw = C.pair_xy(kernel, "kernel"), C.pair_xy(stride, "stride")
    px, py = C.ints(pads, "pads", 2)
    mode = _pad_mode(padding_mode)
    if mode != "CAFFE" and (px or py):
        raise ValueError(f"{kind}_pool: padding mode {mode} (tensorflow mode) does not take explicit pads {[px, py]}")
    attrs = nn_pool.resolve_mnn_pool(n.shape[2:], k_hw, s_hw, mode, (py, px))
    out = nn_pool.pool2d(B.wrap(n), kind, attrs["kernel"], attrs["stride"], attrs["pads"],
                         count_include_pad=attrs["count_include_pad"], out=attrs["out"])
    return C.restore_fmt(out._node, fmt)


def max_pool(x: Any, kernel: Any, stride: Any, padding_mode: Any = VALID, pads: Any = (0, 0)) -> Var:
    """Max pooling; ``kernel``, ``stride``, ``pads`` are (x, y) pairs (CAFFE mode rounds the output up)."""
    return _pool("max", x, kernel, stride, padding_mode, pads)


def avg_pool(x: Any, kernel: Any, stride: Any, padding_mode: Any = VALID, pads: Any = (0, 0)) -> Var:
    """Average pooling; CAFFE mode counts padding in the divisor, SAME/VALID do not."""
    return _pool("avg", x, kernel, stride, padding_mode, pads)


# ---------------------------------------------------------------- resize family

def resize(x: Any, x_scale: float, y_scale: float) -> Var:
    """Bilinear resize of 4-D NC4HW4 ``x`` by (x_scale, y_scale) (output floor(W*x_scale), floor(H*y_scale))."""
    v = C.var(x)
    try:
        xs, ys = float(x_scale), float(y_scale)
    except (TypeError, ValueError):
        raise ValueError("parameter `x` must be float_like.") from None
    if len(v.shape) != 4 or v._node.fmt != "NC4HW4":
        raise RuntimeError("parameter x must be 4-D NC4HW4 format")
    h, w = v.shape[2:]
    oh, ow = int(h * ys), int(w * xs)
    if oh <= 0 or ow <= 0:
        raise ValueError(f"resize: scales ({x_scale}, {y_scale}) give an empty output from {h}x{w}")
    return nn_resize.resize(C.as_float(v._node), (oh, ow), "bilinear", "asymmetric")


def crop_and_resize(x: Any, boxes: Any, box_ind: Any, crop_size: Any, method: Any = BILINEAR,
                    extrapolation_value: float = 0.0) -> Var:
    """TF CropAndResize of NHWC ``x``: ``boxes`` [K, 4] normalised (y1, x1, y2, x2); NHWC result [K, h, w, C]."""
    v = C.var(x)
    n = v._node
    if len(n.shape) != 4:
        raise ValueError(f"crop_and_resize: x must be 4-D NHWC, got shape {list(n.shape)}")
    if n.fmt == "NHWC":
        n = C.to_nchw(n)
    size = C.ints(crop_size, "crop_size", 2)
    m = "nearest" if int(method) == int(NEAREST) else "bilinear"
    out = nn_resize.crop_and_resize(B.wrap(n), boxes, box_ind, size, m, float(extrapolation_value))
    return C.restore_fmt(out._node, "NHWC")


# ---------------------------------------------------------------- softmax and activations

def softmax(x: Any, axis: int = -1) -> Var:
    """Softmax along ``axis``."""
    n = C.as_float(C.node(x))
    try:
        axis = int(axis)
    except (TypeError, ValueError):
        raise ValueError("parameter `x` must be int_like.") from None
    ax = B.normalize_axis(axis, len(n.shape))
    return B.wrap(B.make_node("softmax", (n,), {"axis": ax}))


def relu(x: Any, slope: float = 0.0) -> Var:
    """``x if x > 0 else slope * x``."""
    n = C.node(x)
    slope = float(slope)
    if slope == 0.0:
        return B.unary("relu", n)
    return B.wrap(B.make_node("leaky_relu", (C.as_float(n),), {"alpha": slope}))


def relu6(x: Any, min: float = 0.0, max: float = 6.0) -> Var:  # noqa: A002 - MNN's names
    """``x`` clipped to [min, max]."""
    n = C.node(x)
    lo, hi = float(min), float(max)
    if n.dtype.kind != "f":
        n = C.as_float(n)
    return B.wrap(B.make_node("clip", (n,), {"lo": lo, "hi": hi}))


def prelu(x: Any, slopes: Any) -> Var:
    """``x if x >= 0 else slopes[c] * x`` for NC4HW4 ``x`` (channel axis 1)."""
    v = C.var(x)
    C.require_c4(v)
    s = np.asarray(C.floats(slopes), np.float32)
    return B.wrap(B.make_node("prelu", (C.as_float(v._node), B.as_node(s)), {}))


def elu(x: Any, alpha: float) -> Var:
    """``x if x >= 0 else alpha * (exp(x) - 1)``."""
    return B.wrap(B.make_node("elu", (C.as_float(C.node(x)),), {"alpha": float(alpha)}))


def selu(x: Any, scale: float, alpha: float) -> Var:
    """``scale * (x if x > 0 else alpha * (exp(x) - 1))``."""
    return B.wrap(B.make_node("selu", (C.as_float(C.node(x)),), {"alpha": float(alpha), "scale": float(scale)}))


def gelu(x: Any) -> Var:
    """Gaussian error linear unit, tanh approximation (MNN's UnaryOp GELU)."""
    return B.unary("gelu_tanh", x)


def softplus(x: Any) -> Var:
    """``log(1 + exp(x))``."""
    return B.unary("softplus", x)


def erfinv(x: Any) -> Var:
    """Inverse error function."""
    return B.wrap(B.make_node("erfinv", (C.as_float(C.node(x)),), {}))


def scale(x: Any, channels: int, scale: Sequence[float], bias: Sequence[float]) -> Var:  # noqa: A002
    """``x * scale[c] + bias[c]`` for NC4HW4 ``x`` (channel axis 1).

    As real MNN, the lists' length decides, not ``channels``: their first C values scale the C channels."""
    v = C.var(x)
    C.require_c4(v)
    s = np.asarray(C.floats(scale), np.float32)
    b = np.asarray(C.floats(bias), np.float32)
    n = C.as_float(v._node)
    c = n.shape[1] if len(n.shape) > 1 else 1
    if s.size < c or b.size < c:
        # real MNN zeroes the channels past the lists (reading its zero padding): refuse instead
        raise ValueError(f"scale: {s.size} scales and {b.size} biases for {c} channels (channels={channels})")
    s, b = s[:c], b[:c]
    shape = (c,) + (1,) * (len(n.shape) - 2)
    out = B.binary("add", B.binary("mul", B.wrap(n), s.reshape(shape)), b.reshape(shape))
    return C.restore_fmt(out._node, "NC4HW4")


def bias_add(value: Any, bias: Any) -> Var:
    """``value + bias`` with a 1-D ``bias`` on the last axis."""
    v, b = C.var(value), C.var(bias)
    if len(b.shape) != 1:
        raise RuntimeError("parameter bias must be 1-D in bias_add")
    if not v.shape or v.shape[-1] != b.shape[-1]:
        raise RuntimeError("parameter bias's dim must match parameter value's dim in bias_add")
    return B.binary("add", v, b)


def normalize(x: Any, acrossSpatial: int, channelShared: int, eps: float,  # noqa: N803
              scale: Sequence[float]) -> Var:
    """L2 normalisation over channels (and space when ``acrossSpatial``), times ``scale``."""
    v = C.var(x)
    n = C.as_float(v._node)
    s = np.asarray(C.floats(scale), np.float32)
    attrs = {"across_spatial": bool(acrossSpatial), "channel_shared": bool(channelShared), "eps": float(eps)}
    out = B.make_node("normalize", (C.to_nchw(n), B.as_node(s)), attrs)
    return C.restore_fmt(out, v._node.fmt)


def moments(x: Any, axes: Sequence[int] = (2, 3), shift: Any = None, keep_dims: bool = True) -> list[Var]:
    """[mean, variance] of 4-D NC4HW4 ``x`` over ``axes``."""
    v = C.var(x)
    if len(v.shape) != 4 or v._node.fmt != "NC4HW4":
        raise RuntimeError("parameter x must be 4-D w/ NC4HW4 format")
    ax = tuple(sorted({B.normalize_axis(a, 4) for a in C.ints(axes, "axes")}))
    mean, var = B.make(  # type: ignore[misc]
        "moments", [C.as_float(v._node)], {"axes": ax, "keepdims": bool(keep_dims)})
    return [C.restore_fmt(mean._node, "NCHW"), C.restore_fmt(var._node, "NCHW")]


# ---------------------------------------------------------------- space / channel rearrangements

def _block(v: Any) -> tuple[int, int]:
    b = C.ints(v, "block_shape")
    if len(b) == 1:
        b = b * 2
    if len(b) != 2:
        raise ValueError(f"block_shape must have 1 or 2 values, got {b}")
    return (b[0], b[1])


def _pairs(v: Any, name: str) -> tuple[tuple[int, int], tuple[int, int]]:
    p = C.ints(v, name)
    if len(p) != 4:
        raise ValueError(f"parameter `{name}` must be [[top, bottom], [left, right]], got {p}")
    return ((p[0], p[1]), (p[2], p[3]))


def space_to_batch_nd(x: Any, block_shape: Any, paddings: Any) -> Var:
    """TF SpaceToBatchND of 4-D NC4HW4 ``x`` (block and paddings on the H, W axes)."""
    v = C.var(x)
    if len(v.shape) != 4 or v._node.fmt != "NC4HW4":
        raise RuntimeError("parameter x must be 4-D w/ NC4HW4 format")
    attrs = {"block": _block(block_shape), "pads": _pairs(paddings, "paddings")}
    out = B.make_node("space_to_batch", (v._node,), attrs)
    return B.wrap(out)


def batch_to_space_nd(x: Any, block_shape: Any, crops: Any) -> Var:
    """TF BatchToSpaceND of 4-D NC4HW4 ``x``."""
    v = C.var(x)
    if len(v.shape) != 4 or v._node.fmt != "NC4HW4":
        raise RuntimeError("parameter x must be 4-D w/ NC4HW4 format")
    out = B.make_node("batch_to_space", (v._node,), {"block": _block(block_shape), "crops": _pairs(crops, "crops")})
    return B.wrap(out)


def _d2s_nchw(n, b: int):
    N, Cc, H, W = n.shape
    if Cc % (b * b):
        raise ValueError(f"depth_to_space: channels {Cc} are not divisible by block_size^2 = {b * b}")
    y = B.reshape(B.wrap(n), (N, b, b, Cc // (b * b), H, W))
    y = B.transpose(y, (0, 3, 4, 1, 5, 2))
    return B.reshape(y, (N, Cc // (b * b), H * b, W * b))._node


def _s2d_nchw(n, b: int):
    N, Cc, H, W = n.shape
    if H % b or W % b:
        raise ValueError(f"space_to_depth: H({H}) and W({W}) must be divisible by blockSize({b})")
    y = B.reshape(B.wrap(n), (N, Cc, H // b, b, W // b, b))
    y = B.transpose(y, (0, 3, 5, 1, 2, 4))
    return B.reshape(y, (N, Cc * b * b, H // b, W // b))._node


def depth_to_space(x: Any, axis: int) -> Var:
    """DepthToSpace (DCR order, TF/ONNX default) with block size ``axis``."""
    v = C.var(x)
    if len(v.shape) != 4:
        raise ValueError(f"depth_to_space: x must be 4-D, got shape {v.shape}")
    fmt = v._node.fmt
    return C.restore_fmt(_d2s_nchw(C.to_nchw(v._node), int(axis)), fmt)


def space_to_depth(x: Any, axis: int) -> Var:
    """SpaceToDepth with block size ``axis``."""
    v = C.var(x)
    if len(v.shape) != 4:
        raise ValueError(f"space_to_depth: x must be 4-D, got shape {v.shape}")
    fmt = v._node.fmt
    return C.restore_fmt(_s2d_nchw(C.to_nchw(v._node), int(axis)), fmt)


def channel_shuffle(x: Any, axis: int) -> Var:
    """ShuffleNet channel shuffle with ``axis`` groups; NC4HW4 result (as MNN)."""
    v = C.var(x)
    if len(v.shape) != 4:
        raise ValueError(f"channel_shuffle: x must be 4-D, got shape {v.shape}")
    g = int(axis)
    n = C.to_nchw(v._node)
    N, Cc, H, W = n.shape
    if g <= 0 or Cc % g:
        raise ValueError(f"channel_shuffle: {Cc} channels are not divisible by group {g}")
    y = B.reshape(B.wrap(n), (N, g, Cc // g, H, W))
    y = B.reshape(B.transpose(y, (0, 2, 1, 3, 4)), (N, Cc, H, W))
    return C.restore_fmt(y._node, "NC4HW4")


# ---------------------------------------------------------------- detection

def nms(boxes: Any, scores: Any, max_detections: int, iou_threshold: float = -1.0,
        score_threshold: float = -1.0) -> Var:
    """Greedy non-maximum suppression: int32 indices of the kept boxes (at most ``max_detections``)."""
    b = C.as_float(C.node(boxes))
    s = C.as_float(C.node(scores))
    m = int(max_detections)
    thr = float(score_threshold)
    attrs = {"max_out": m, "iou_threshold": float(iou_threshold), "score_threshold": thr if thr >= 0 else -np.inf}
    padded = B.wrap(B.make_node("nms", (b, s), attrs))
    count = int((padded.read_view() >= 0).sum())
    from ..ops.build import make_node
    return B.wrap(make_node("slice", (padded._node,), {"begin": (0,), "end": (count,), "step": (1,)}))


def roi_pooling(input: Any, roi: Any, pooled_height: int, pooled_width: int, spatial_scale: float,  # noqa: A002
                output_grad: bool = False, backward_diff: Any = None) -> Var:
    """Caffe ROIPooling (max) of NC4HW4 ``input`` with ``roi`` [K, 5] (batch, x1, y1, x2, y2); NC4HW4 result."""
    if output_grad:
        raise NotImplementedError("roi_pooling: mnnjit computes inference only (output_grad=True is not supported)")
    x = C.var(input)
    n = C.to_nchw(C.as_float(x._node))
    out = B.make_node("roi_pooling", (n, C.as_float(C.node(roi))),
                      {"pooled": (int(pooled_height), int(pooled_width)), "spatial_scale": float(spatial_scale)},
                      fmt="NC4HW4")
    return B.wrap(out)


def roi_align(input: Any, roi: Any, pooled_height: int, pooled_width: int, spatial_scale: float,  # noqa: A002
              sampling_ratio: int, aligned: bool, pooling_mode: Any, output_grad: bool = False,
              backward_diff: Any = None) -> Var:
    """RoIAlign of NC4HW4 ``input`` with ``roi`` [K, 5] (batch, x1, y1, x2, y2); NC4HW4 result."""
    if output_grad:
        raise NotImplementedError("roi_align: mnnjit computes inference only (output_grad=True is not supported)")
    x = C.var(input)
    n = C.to_nchw(C.as_float(x._node))
    pool = "avg" if int(pooling_mode) == int(AVEPOOL) else "max"
    attrs = {"pooled": (int(pooled_height), int(pooled_width)), "spatial_scale": float(spatial_scale),
             "sampling_ratio": int(sampling_ratio), "aligned": bool(aligned), "pool": pool}
    return B.wrap(B.make_node("roi_align", (n, C.as_float(C.node(roi))), attrs, fmt="NC4HW4"))


def detection_post_process(encode_boxes: Any, class_predictions: Any, anchors: Any, num_classes: int,
                           max_detections: int, max_class_per_detection: int, detections_per_class: int,
                           nms_threshold: float, iou_threshold: float, use_regular_nms: bool,
                           centersize_encoding: Sequence[float]) -> list[Var]:
    """TFLite SSD post-processing: [boxes, classes, scores, num_detections]."""
    enc = list(C.floats(centersize_encoding))
    if len(enc) != 4:
        raise ValueError(f"centersize_encoding must have 4 values (y, x, h, w scales), got {enc}")
    attrs = {"num_classes": int(num_classes), "max_detections": int(max_detections),
             "max_classes_per_detection": int(max_class_per_detection),
             "detections_per_class": int(detections_per_class), "nms_score_threshold": float(nms_threshold),
             "nms_iou_threshold": float(iou_threshold), "use_regular_nms": bool(use_regular_nms),
             "scales": tuple(enc)}
    nodes = [C.as_float(C.node(v)) for v in (encode_boxes, class_predictions, anchors)]
    return list(B.make("detection_post_process", nodes, attrs))


# ---------------------------------------------------------------- quantisation

def _flip_sign_bit(v: Var) -> Var:
    """int8 values with the sign bit flipped (v - 128 for v >= 0, v + 128 otherwise): MNN's int8 storage."""
    return B.select(B.binary("greater_equal", v, 0), B.binary("sub", v, 128), B.binary("add", v, 128))


def quant(var: Any, scale: Any, min: int = -128, max: int = 127, zero: int = 0) -> Var:  # noqa: A002
    """int8 quantisation as real MNN computes it: ``v = clamp(round(x * scale), -128, 127)`` stored with the
    sign bit flipped (the docs' example output; ``min``/``max``/``zero`` do not change MNN's result)."""
    x = C.as_float(C.node(var))
    s = C.as_float(C.node(scale))
    v = B.unary("round", B.binary("mul", B.wrap(x), B.wrap(s)))
    v = B.cast(B.wrap(B.make_node("clip", (v._node,), {"lo": -128.0, "hi": 127.0})), np.int32)
    out = B.cast(_flip_sign_bit(v), np.int8)
    return C.restore_fmt(out._node, C.node(var).fmt)


def dequant(var: Any, scale: Any, zero: int = 0) -> Var:
    """Inverse of :func:`quant` as real MNN computes it: ``(flip(q) - zero) * scale`` (float32)."""
    q = B.cast(C.node(var), np.int32)
    out = B.binary("mul", B.binary("sub", _flip_sign_bit(q), int(zero)), C.as_float(C.node(scale)))
    return C.restore_fmt(B.cast(out, np.float32)._node, C.node(var).fmt)
