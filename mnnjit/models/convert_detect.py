"""Converters for detection and element-indexing MNN ops: NonMaxSuppressionV2, ROIAlign,
ROIPooling, GatherElements, and Dropout (an identity at inference).

NonMaxSuppressionV2 keeps as many boxes as survive, so its output shape depends on the input
values: the converter computes the selection when the boxes and scores are known (constants,
or the model's inputs in a dynamic plan, which is then translated again at every forward).
"""
from __future__ import annotations

import math

import numpy as np

from ..graph import Node
from ..ops import build as B
from .translate import Ctx, converter, node_of


def _scalar(ctx: Ctx, xs: list, k: int, what: str, default: float) -> float:
    if len(xs) <= k:
        return default
    v = np.asarray(ctx.value(xs[k], what)).reshape(-1)
    if v.size != 1:
        raise ValueError(f"{ctx.op_label}: {what} must be one value, got {v.size}")
    return float(v[0])


@converter("NonMaxSuppressionV2")
def non_max_suppression(ctx: Ctx, op, xs):
    """Greedy NMS of boxes [N, 4] (y1, x1, y2, x2; corners in any order) by scores [N]: the int32
    indices of the kept boxes, best first, at most ``max_output_size`` (input 2); a box is dropped
    when its IoU with a kept one exceeds ``iou_threshold`` (input 3) or its score is not above
    ``score_threshold`` (input 4, default: no threshold)."""
    from ..ops.nn_detect import nms_indices
    if len(xs) < 3:
        raise ValueError(f"{ctx.op_label}: NonMaxSuppressionV2 needs boxes, scores and a maximum count")
    boxes = np.asarray(ctx.value(xs[0], "boxes"), np.float32)
    scores = np.asarray(ctx.value(xs[1], "scores"), np.float32).reshape(-1)
    if boxes.ndim != 2 or boxes.shape[1] != 4 or boxes.shape[0] != scores.size:
        raise ValueError(f"{ctx.op_label}: boxes {list(boxes.shape)} and scores [{scores.size}] do not "
                         f"match (expected [N, 4] and [N])")
    max_out = int(_scalar(ctx, xs, 2, "max_output_size", 0))
    iou = _scalar(ctx, xs, 3, "iou_threshold", 0.5)
    thr = _scalar(ctx, xs, 4, "score_threshold", -math.inf)
    keep = nms_indices(boxes, scores, max(max_out, 0), iou, thr)
    return ctx.const(keep.astype(np.int32), np.int32)


def _rois_with_batch(ctx: Ctx, xs: list) -> Node:
    """ROIs as [K, 5] (batch, x1, y1, x2, y2): given so, or [K, 4] with the batch indices as the
    third input (ONNX RoiAlign)."""
    rois = xs[1]
    if len(rois.shape) != 2 or rois.shape[1] not in (4, 5):
        raise ValueError(f"{ctx.op_label}: rois must be [K, 4] or [K, 5], got shape {list(rois.shape)}")
    rois = B.cast(rois, np.float32) if rois.dtype != np.float32 else rois
    if rois.shape[1] == 5:
        return rois
    if len(xs) < 3:
        raise ValueError(f"{ctx.op_label}: [K, 4] rois need the batch indices as a third input")
    idx = xs[2]
    if tuple(idx.shape) not in ((rois.shape[0],), (rois.shape[0], 1)):
        raise ValueError(f"{ctx.op_label}: batch indices {list(idx.shape)} do not match {rois.shape[0]} rois")
    col = node_of(B.reshape(B.cast(idx, np.float32), (rois.shape[0], 1)))
    return node_of(B.concat([col, rois], 1))


def _roi_op(ctx: Ctx, op, xs, name: str, extra: dict):
    """Emit ``name`` (roi_align / roi_pooling) on 4-D data with the bins and scale of the op's
    RoiParameters and the ``extra`` attributes."""
    p = op.main or {}
    x = xs[0]
    if len(x.shape) != 4:
        raise ValueError(f"{ctx.op_label}: {op.type} input must be 4-D, got shape {list(x.shape)}")
    attrs = {"pooled": (int(p.get("pooledHeight") or 1), int(p.get("pooledWidth") or 1)),
             "spatial_scale": float(p.get("spatialScale") or 1.0), **extra}
    return ctx.emit(name, [x, _rois_with_batch(ctx, xs)], attrs, fmt=x.fmt)


@converter("ROIAlign")
def roi_align(ctx: Ctx, op, xs):
    """RoIAlign of NCHW/NC4HW4 data (average or max of the bilinear samples of each bin)."""
    p = op.main or {}
    pool = "max" if str(p.get("poolType", "AVEPOOL")) == "MAXPOOL" else "avg"
    return _roi_op(ctx, op, xs, "roi_align", {"sampling_ratio": int(p.get("samplingRatio") or 0),
                                              "aligned": bool(p.get("aligned")), "pool": pool})


@converter("ROIPooling")
def roi_pooling(ctx: Ctx, op, xs):
    """Caffe ROIPooling (max over each bin of the rounded ROI)."""
    return _roi_op(ctx, op, xs, "roi_pooling", {})


@converter("GatherElements")
def gather_elements(ctx: Ctx, op, xs):
    """ONNX GatherElements: ``out[i][j][k] = x[idx[i][j][k]][j][k]`` along ``axis`` (third input,
    default 0). A negative index counts from the end and one outside the axis raises IndexError,
    as in ONNX (real MNN reads the element at that flat offset, from another row, or 0 before the
    buffer's start)."""
    x, idx = xs[0], xs[1]
    axis = int(_scalar(ctx, xs, 2, "axis", 0))
    if len(idx.shape) != len(x.shape):
        raise ValueError(f"{ctx.op_label}: indices {list(idx.shape)} must have the rank of the data "
                         f"{list(x.shape)}")
    axis = B.normalize_axis(axis, len(x.shape))
    return ctx.emit("gather_elements", [x, idx], {"axis": axis}, fmt=x.fmt)


@converter("Dropout")
def dropout(ctx: Ctx, op, xs):
    """Inference: the input unchanged (and, if asked for, an all-true mask)."""
    x = xs[0]
    outs = [x]
    if len(op.outputIndexes or []) > 1:
        outs.append(ctx.const(np.ones(x.shape, np.int32), np.int32))
    return outs if len(outs) > 1 else x
