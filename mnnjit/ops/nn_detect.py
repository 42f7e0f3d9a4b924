"""Detection ops: ``nms``, ``roi_align``, ``roi_pooling``, ``detection_post_process``.

Conventions in docs/NN_OPS.md. ``nms`` has a value-dependent result length: the op returns
``max_out`` int32 indices padded with -1 and the front end trims it after reading.
"""
from __future__ import annotations

import math

import numpy as np

from .._dtypes import F32, I32
from .registry import OpDef, register


# ---------------------------------------------------------------- nms

def _iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """IoU of one (y1, x1, y2, x2) box with many (corners in any order)."""
    def norm(b):
        return (np.minimum(b[..., 0], b[..., 2]), np.minimum(b[..., 1], b[..., 3]),
                np.maximum(b[..., 0], b[..., 2]), np.maximum(b[..., 1], b[..., 3]))
    ay1, ax1, ay2, ax2 = norm(box)
    by1, bx1, by2, bx2 = norm(boxes)
    ih = np.maximum(np.minimum(ay2, by2) - np.maximum(ay1, by1), 0)
    iw = np.maximum(np.minimum(ax2, bx2) - np.maximum(ax1, bx1), 0)
    inter = ih * iw
    union = (ay2 - ay1) * (ax2 - ax1) + (by2 - by1) * (bx2 - bx1) - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / union, 0.0)


def nms_indices(boxes: np.ndarray, scores: np.ndarray, max_out: int, iou_threshold: float,
                score_threshold: float) -> np.ndarray:
    """Greedy non-maximum suppression: selected indices. Boxes need score > threshold (TF
    NonMaxSuppressionV3; real MNN's DetectionPostProcess too, where TFLite keeps a score equal to
    the threshold)."""
    boxes = np.asarray(boxes, np.float64)
    scores = np.asarray(scores, np.float32)
    order = np.argsort(-scores, kind="stable")
    if score_threshold > -math.inf:
        thr = np.float32(score_threshold)  # compared in float32, as MNN does
        keep = scores[order] > thr
        order = order[keep]
    keep: list[int] = []
    alive = np.ones(order.size, bool)
    for pos, i in enumerate(order):
        if len(keep) >= max_out:
            break
        if not alive[pos]:
            continue
        keep.append(int(i))
        rest = order[pos + 1:]
        if rest.size:
            alive[pos + 1:] &= ~(_iou(boxes[i], boxes[rest]) > iou_threshold)
    return np.asarray(keep, np.int32)


def _nms_ref(xs, attrs):
    sel = nms_indices(xs[0], xs[1].reshape(-1), attrs["max_out"], attrs["iou_threshold"], attrs["score_threshold"])
    out = np.full(attrs["max_out"], -1, np.int32)
    out[: sel.size] = sel
    return out


def _nms_infer(inputs, attrs):
    b, s = inputs
    if len(b.shape) != 2 or b.shape[1] != 4:
        raise ValueError(f"nms: boxes must be [K, 4], got shape {list(b.shape)}")
    if s.size != b.shape[0]:
        raise ValueError(f"nms: {s.size} scores for {b.shape[0]} boxes")
    return (int(attrs["max_out"]),), I32


register(OpDef("nms", "opaque", _nms_infer, _nms_ref, mnn_type="NonMaxSuppressionV2",
               doc="greedy NMS: max_out indices padded with -1 (attrs max_out, iou_threshold, score_threshold)"))


# ---------------------------------------------------------------- roi_align

def _bilinear_points(img: np.ndarray, ys: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """Detectron-style bilinear samples of img [C, H, W] at the grid ys x xs -> [C, len(ys), len(xs)]."""
    c, h, w = img.shape

    def axis(v, n):
        valid = (v >= -1.0) & (v <= n)
        v = np.maximum(v, 0.0)
        lo = np.floor(v).astype(np.intp)
        top = lo >= n - 1
        lo = np.where(top, n - 1, lo)
        hi = np.where(top, n - 1, lo + 1)
        v = np.where(top, lo.astype(np.float64), v)
        f = v - lo
        return lo, hi, f, valid

    y0, y1, fy, vy = axis(ys, h)
    x0, x1, fx, vx = axis(xs, w)
    fy = fy[None, :, None]
    fx = fx[None, None, :]
    r0 = img[:, y0]
    r1 = img[:, y1]
    val = (r0[:, :, x0] * (1 - fy) * (1 - fx) + r0[:, :, x1] * (1 - fy) * fx
           + r1[:, :, x0] * fy * (1 - fx) + r1[:, :, x1] * fy * fx)
    mask = (vy[:, None] & vx[None, :])[None]
    return np.where(mask, val, 0.0)


def _roi_align_ref(xs, attrs):
    x = np.asarray(xs[0], np.float64)
    rois = np.asarray(xs[1], np.float64)
    ph, pw = attrs["pooled"]
    scale = attrs["spatial_scale"]
    ratio = attrs.get("sampling_ratio", 0)
    aligned = attrs.get("aligned", False)
    use_max = attrs.get("pool", "avg") == "max"
    n, c, h, w = x.shape
    out = np.zeros((rois.shape[0], c, ph, pw), np.float64)
    off = 0.5 if aligned else 0.0
    for k, roi in enumerate(rois):
        b = int(roi[0])
        if not 0 <= b < n:
            raise IndexError(f"roi_align: roi batch index {b} is out of range for batch {n}")
        x1, y1, x2, y2 = roi[1] * scale - off, roi[2] * scale - off, roi[3] * scale - off, roi[4] * scale - off
        rw, rh = x2 - x1, y2 - y1
        if not aligned:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / ph, rw / pw
        gh = ratio if ratio > 0 else int(math.ceil(rh / ph))
        gw = ratio if ratio > 0 else int(math.ceil(rw / pw))
        gh, gw = max(gh, 1), max(gw, 1)
        ys = y1 + (np.arange(ph)[:, None] * bh + (np.arange(gh)[None, :] + 0.5) * bh / gh).ravel()
        xs_ = x1 + (np.arange(pw)[:, None] * bw + (np.arange(gw)[None, :] + 0.5) * bw / gw).ravel()
        vals = _bilinear_points(x[b], ys, xs_).reshape(c, ph, gh, pw, gw)
        out[k] = vals.max(axis=(2, 4)) if use_max else vals.mean(axis=(2, 4))
    return out.astype(F32)


def _roi_infer(inputs, attrs):
    x, r = inputs[0].shape, inputs[1].shape
    if len(x) != 4:
        raise ValueError(f"roi op: input must be 4-D NCHW, got shape {list(x)}")
    if len(r) != 2 or r[1] != 5:
        raise ValueError(f"roi op: rois must be [K, 5] (batch, x1, y1, x2, y2), got shape {list(r)}")
    ph, pw = attrs["pooled"]
    return (r[0], x[1], int(ph), int(pw)), F32


register(OpDef("roi_align", "opaque", _roi_infer, _roi_align_ref, mnn_type="ROIAlign",
               doc="RoIAlign (attrs pooled, spatial_scale, sampling_ratio, aligned, pool avg/max)"))


def _roi_pool_ref(xs, attrs):
    x = np.asarray(xs[0], F32)
    rois = np.asarray(xs[1], np.float64)
    ph, pw = attrs["pooled"]
    scale = attrs["spatial_scale"]
    n, c, h, w = x.shape
    out = np.zeros((rois.shape[0], c, ph, pw), F32)

    def rnd(v):
        return int(math.floor(v + 0.5)) if v >= 0 else -int(math.floor(-v + 0.5))

    for k, roi in enumerate(rois):
        b = int(roi[0])
        if not 0 <= b < n:
            raise IndexError(f"roi_pooling: roi batch index {b} is out of range for batch {n}")
        xs_, ys = rnd(roi[1] * scale), rnd(roi[2] * scale)
        xe, ye = rnd(roi[3] * scale), rnd(roi[4] * scale)
        rh, rw = max(ye - ys + 1, 1), max(xe - xs_ + 1, 1)
        bh, bw = rh / ph, rw / pw
        for i in range(ph):
            hs = min(max(int(math.floor(i * bh)) + ys, 0), h)
            he = min(max(int(math.ceil((i + 1) * bh)) + ys, 0), h)
            for j in range(pw):
                ws = min(max(int(math.floor(j * bw)) + xs_, 0), w)
                we = min(max(int(math.ceil((j + 1) * bw)) + xs_, 0), w)
                if he > hs and we > ws:
                    out[k, :, i, j] = x[b, :, hs:he, ws:we].max(axis=(1, 2))
    return out


register(OpDef("roi_pooling", "opaque", _roi_infer, _roi_pool_ref, mnn_type="ROIPooling",
               doc="Caffe ROIPooling (max) (attrs pooled, spatial_scale)"))


# ---------------------------------------------------------------- detection_post_process

def _dpp_infer(inputs, attrs):
    m = int(attrs["max_detections"]) * int(attrs.get("max_classes_per_detection", 1))
    return [((1, m, 4), F32), ((1, m), F32), ((1, m), F32), ((1,), F32)]


def _decode(enc: np.ndarray, anchors: np.ndarray, scales) -> np.ndarray:
    ys, xs, hs, ws = scales
    ya, xa, ha, wa = anchors[:, 0], anchors[:, 1], anchors[:, 2], anchors[:, 3]
    yc = enc[:, 0] / ys * ha + ya
    xc = enc[:, 1] / xs * wa + xa
    hh = np.exp(enc[:, 2] / hs) * ha
    ww = np.exp(enc[:, 3] / ws) * wa
    return np.stack([yc - hh / 2, xc - ww / 2, yc + hh / 2, xc + ww / 2], axis=1)


def _dpp_ref(xs, attrs):
    enc = np.asarray(xs[0], np.float64).reshape(-1, 4)
    cls = np.asarray(xs[1], np.float64)
    cls = cls.reshape(enc.shape[0], -1)
    anchors = np.asarray(xs[2], np.float64).reshape(-1, 4)
    nc = int(attrs["num_classes"])
    scores = cls[:, cls.shape[1] - nc:]
    boxes = _decode(enc, anchors, attrs["scales"])
    maxd = int(attrs["max_detections"])
    per_det = int(attrs.get("max_classes_per_detection", 1))
    thr, iou = attrs["nms_score_threshold"], attrs["nms_iou_threshold"]
    dets: list[tuple[float, int, int]] = []
    if attrs.get("use_regular_nms", False):
        per_class = int(attrs.get("detections_per_class", 100))
        for c in range(nc):
            for i in nms_indices(boxes, scores[:, c], per_class, iou, thr):
                dets.append((scores[i, c], int(i), c))
        dets.sort(key=lambda d: -d[0])
        dets = dets[: maxd * per_det]
    else:
        top = np.argsort(-scores, axis=1, kind="stable")[:, :per_det]
        best = scores[np.arange(scores.shape[0]), top[:, 0]]
        for i in nms_indices(boxes, best, maxd, iou, thr):
            for c in top[i]:
                dets.append((scores[i, c], int(i), int(c)))
    m = maxd * per_det
    ob = np.zeros((1, m, 4), F32)
    oc = np.zeros((1, m), F32)
    os_ = np.zeros((1, m), F32)
    for k, (s, i, c) in enumerate(dets[:m]):
        ob[0, k] = boxes[i]
        oc[0, k] = c
        os_[0, k] = s
    return ob, oc, os_, np.array([min(len(dets), m)], F32)


register(OpDef("detection_post_process", "opaque", _dpp_infer, _dpp_ref, mnn_type="DetectionPostProcess", n_out=4,
               doc="TFLite DetectionPostProcess: (boxes, classes, scores, num_detections)"))
