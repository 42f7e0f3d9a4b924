"""Max pooling, NCHW, on a -inf bordered copy of each plane (no bounds checks in the loops).

Per task a float32 plane with a -inf border (written once; each channel overwrites the
interior) so every window tap is in bounds; an output row is the running maximum of ``kh*kw``
shifted (strided) row slices, each a vectorisable loop. Padding never wins a max, as in MNN.
Output rows past the input (ceil mode) only see the border and the taps inside.

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
        xp = np.full(HP * WP, -np.inf, np.float32)
        acc = np.empty(OW, np.float32)
        for nc in range(c0, c1):
            n = nc // C
            c = nc % C
            plane = x[n, c]
            for iy in range(H):
                dst = xp[(pt + iy) * WP + pl:(pt + iy) * WP + pl + W]
                src = plane[iy]
                for ix in range(W):
                    dst[ix] = load(src, ix)
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
