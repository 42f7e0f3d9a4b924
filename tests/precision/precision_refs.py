"""numpy references for the precision kernel tests (float64 math)."""
from __future__ import annotations

import numpy as np


def act_ref(v: np.ndarray, act: str) -> np.ndarray:
    """The activation functions of fp16_kernels in float64."""
    if act in ("", "none"):
        return v
    if act == "relu":
        return np.maximum(v, 0)
    if act == "relu6":
        return np.clip(v, 0, 6)
    if act == "sigmoid":
        return 1 / (1 + np.exp(-v))
    if act == "tanh":
        return np.tanh(v)
    if act == "hard_swish":
        return v * np.clip(v + 3, 0, 6) / 6
    if act == "silu":
        return v / (1 + np.exp(-v))
    raise ValueError(act)


def conv_ref(x, w, b, stride, pads, dil, group, act=""):
    """NCHW conv, w [O, C/group, kh, kw], pads (top, bottom, left, right)."""
    x = np.asarray(x, np.float64)
    N, C, H, W = x.shape
    O, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[1]), (pads[2], pads[3])))
    oh = (H + pads[0] + pads[1] - ((kh - 1) * dil[0] + 1)) // stride[0] + 1
    ow = (W + pads[2] + pads[3] - ((kw - 1) * dil[1] + 1)) // stride[1] + 1
    out = np.zeros((N, O, oh, ow))
    og = O // group
    for g in range(group):
        for ky in range(kh):
            for kx in range(kw):
                y0, x0 = ky * dil[0], kx * dil[1]
                patch = xp[:, g * cg:(g + 1) * cg, y0:y0 + stride[0] * (oh - 1) + 1:stride[0],
                           x0:x0 + stride[1] * (ow - 1) + 1:stride[1]]
                out[:, g * og:(g + 1) * og] += np.einsum(
                    "ncij,oc->noij", patch, w[g * og:(g + 1) * og, :, ky, kx].astype(np.float64))
    if b is not None:
        out += np.asarray(b, np.float64)[None, :, None, None]
    return act_ref(out, act)


def pool_ref(x, kind, kernel, stride, pads, count_include_pad=True):
    """Max/avg pooling in float64 with explicit pads (top, bottom, left, right)."""
    x = np.asarray(x, np.float64)
    N, C, H, W = x.shape
    kh, kw = kernel
    oh = (H + pads[0] + pads[1] - kh) // stride[0] + 1
    ow = (W + pads[2] + pads[3] - kw) // stride[1] + 1
    out = np.zeros((N, C, oh, ow))
    for i in range(oh):
        for j in range(ow):
            y0, x0 = i * stride[0] - pads[0], j * stride[1] - pads[2]
            ys, xs = max(y0, 0), max(x0, 0)
            ye, xe = min(y0 + kh, H), min(x0 + kw, W)
            win = x[:, :, ys:ye, xs:xe]
            if kind == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                cnt = ((min(y0 + kh, H + pads[1]) - max(y0, -pads[0])) *
                       (min(x0 + kw, W + pads[3]) - max(x0, -pads[2]))) if count_include_pad \
                    else (ye - ys) * (xe - xs)
                out[:, :, i, j] = win.sum(axis=(2, 3)) / cnt
    return out
