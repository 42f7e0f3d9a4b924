"""Max pooling, NCHW, on an edge-replicated copy of each plane (no bounds checks in the loops).

Per channel the plane is copied into a float32 buffer whose border repeats the nearest edge
cell, so every window tap is in bounds; an output row is the running maximum of ``kh*kw``
shifted (strided) row slices, each a vectorisable loop. Edge replication is MNN's rule: padding
never wins a max over a window touching the input, and a window lying entirely in the padding
(MNN's ceil mode) takes the nearest edge cell (see ``mnnjit/ops/nn_pool.py``).

This module imports numba: import it lazily.
"""
from __future__ import annotations

import numpy as np
from numba import get_num_threads, njit, prange

from .fp16 import load, store

__all__ = ["max_pool2d"]


@njit(parallel=True, cache=True)
def _k_maxpool(x, out, kh, kw, sh, sw, pt, pl, nchunk):
    N, C, H, W = x.shape
    OH, OW = out.shape[2], out.shape[3]
    HP = max((OH - 1) * sh + kh, pt + H)
    WP = max((OW - 1) * sw + kw, pl + W)
    NC = N * C
    for chunk in prange(nchunk):
        c0 = chunk * NC // nchunk
        c1 = (chunk + 1) * NC // nchunk
        xp = np.empty(HP * WP, np.float32)
        acc = np.empty(OW, np.float32)
        for nc in range(c0, c1):
            n = nc // C
            c = nc % C
            plane = x[n, c]
            for iy in range(H):
                row = xp[(pt + iy) * WP:(pt + iy + 1) * WP]
                dst = row[pl:pl + W]
                src = plane[iy]
                for ix in range(W):
                    dst[ix] = load(src, ix)
                first = dst[0]
                last = dst[W - 1]
                for ix in range(pl):
                    row[ix] = first
                for ix in range(pl + W, WP):
                    row[ix] = last
            top = xp[pt * WP:(pt + 1) * WP]
            for iy in range(pt):
                r = xp[iy * WP:(iy + 1) * WP]
                for ix in range(WP):
                    r[ix] = top[ix]
            bottom = xp[(pt + H - 1) * WP:(pt + H) * WP]
            for iy in range(pt + H, HP):
                r = xp[iy * WP:(iy + 1) * WP]
                for ix in range(WP):
                    r[ix] = bottom[ix]
            orow = out[n, c]
            for oy in range(OH):
                for ox in range(OW):
                    acc[ox] = -np.inf
                for ky in range(kh):
                    base = (oy * sh + ky) * WP
                    for kx in range(kw):
                        r = xp[base + kx:]
                        if sw == 1:
                            for ox in range(OW):
                                acc[ox] = max(acc[ox], r[ox])
                        elif sw == 2:
                            for ox in range(OW):
                                acc[ox] = max(acc[ox], r[2 * ox])
                        else:
                            for ox in range(OW):
                                acc[ox] = max(acc[ox], r[ox * sw])
                d = orow[oy]
                for ox in range(OW):
                    store(d, ox, acc[ox])


def max_pool2d(x: np.ndarray, out: np.ndarray, kernel, stride, pads) -> np.ndarray:
    """Max pooling of storage array ``x`` [N, C, H, W] into ``out`` [N, C, OH, OW] (float32 or
    uint16 half bits; ``pads`` = top, bottom, left, right, non-negative)."""
    N, C = x.shape[:2]
    nchunk = max(1, min(N * C, 4 * get_num_threads()))
    _k_maxpool(x, out, int(kernel[0]), int(kernel[1]), int(stride[0]), int(stride[1]),
               int(pads[0]), int(pads[2]), nchunk)
    return out
