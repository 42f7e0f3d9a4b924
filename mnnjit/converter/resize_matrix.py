"""ONNX Resize along one axis as an interpolation matrix ``M`` [out, in] (``y = M @ x``).

Resizing is separable, so a 4-D resize with known sizes is two matrix products. The converter
writes those for the modes real MNN's Interp does not compute as ONNX does (cubic, whose kernel
real MNN 3.6.1 evaluates differently, and the nearest roundings it lacks). The coefficients follow
the ONNX operator definition: coordinate transformation, then nearest rounding, linear weights or
Keys' cubic kernel with ``cubic_coeff_a``, sample indices clamped to the edge (or, with
``exclude_outside``, dropped and the weights renormalized).
"""
from __future__ import annotations

import numpy as np

MODES = ("nearest", "linear", "cubic")


def source_coords(n_in: int, n_out: int, scale: float, ctm: str) -> np.ndarray:
    """The input coordinate each output index maps to."""
    x = np.arange(n_out, dtype=np.float64)
    if ctm == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if ctm == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if n_out > 1 else np.zeros(n_out)
    if ctm == "align_corners":
        return x * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros(n_out)
    if ctm == "asymmetric":
        return x / scale
    if ctm == "tf_half_pixel_for_nn":
        return (x + 0.5) / scale
    raise ValueError(f"coordinate_transformation_mode {ctm!r}")


def _nearest_index(xo: np.ndarray, mode: str) -> np.ndarray:
    if mode == "round_prefer_floor":
        return np.ceil(xo - 0.5)
    if mode == "round_prefer_ceil":
        return np.floor(xo + 0.5)
    if mode == "floor":
        return np.floor(xo)
    if mode == "ceil":
        return np.ceil(xo)
    raise ValueError(f"nearest_mode {mode!r}")


def _cubic_weights(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' kernel at offsets -1, 0, 1, 2 from the sample left of the point (t in [0, 1))."""
    def near(d):  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=1)


def resize_matrix(n_in: int, n_out: int, scale: float, mode: str, ctm: str, nearest_mode: str = "round_prefer_floor",
                  cubic_a: float = -0.75, exclude_outside: bool = False) -> np.ndarray:
    """The [n_out, n_in] float32 matrix of a one-axis ONNX Resize (``scale`` = out / in as ONNX
    uses it: the given scale, or n_out / n_in when sizes were given)."""
    xo = source_coords(n_in, n_out, scale, ctm)
    m = np.zeros((n_out, n_in), np.float64)
    rows = np.arange(n_out)
    if mode == "nearest":
        idx = np.clip(_nearest_index(xo, nearest_mode), 0, n_in - 1).astype(np.int64)
        m[rows, idx] = 1.0
        return m.astype(np.float32)
    x0 = np.floor(xo)
    t = xo - x0
    if mode == "linear":
        offsets, w = np.array([0, 1]), np.stack([1 - t, t], axis=1)
    elif mode == "cubic":
        offsets, w = np.array([-1, 0, 1, 2]), _cubic_weights(t, cubic_a)
    else:
        raise ValueError(f"mode {mode!r}")
    idx = x0[:, None].astype(np.int64) + offsets[None, :]
    if exclude_outside:
        w = np.where((idx >= 0) & (idx < n_in), w, 0.0)
        w = w / np.where(w.sum(axis=1, keepdims=True) == 0, 1.0, w.sum(axis=1, keepdims=True))
    idx = np.clip(idx, 0, n_in - 1)
    for k in range(idx.shape[1]):
        np.add.at(m, (rows, idx[:, k]), w[:, k])
    return m.astype(np.float32)
