"""Max pooling, NCHW, separably: per output row the vertical maximum of the window's input rows
(each a contiguous, vectorised pass over a row; row indices clamped to the plane), then the
horizontal maximum of ``kw`` strided slices of that row, which sits in a buffer whose border cells
repeat its first/last value. Clamping = edge replication, MNN's rule: padding never wins a max over
a window touching the input, and a window lying entirely in the padding (MNN's ceil mode) takes
the nearest edge cell (see ``mnnjit/ops/nn_pool.py``). ``np.maximum`` (not Python's ``max``,
which Numba does not vectorise: 4x slower) so NaNs propagate as in the reference. Three-row and
three-column windows each take one pass, stored straight from the registers (the common 3x3 case;
other windows loop over rows and columns).

This module imports numba: import it lazily.
"""
from __future__ import annotations

import numpy as np
from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
from numba import get_num_threads, njit, prange

from mnnjit.backends.cpu.fp16 import load, store

__all__ = ["max_pool2d"]


@njit(parallel=True, cache=True, error_model="numpy")
def _k_maxpool(x, out, kh, kw, sh, sw, pt, pl, nchunk):
    N, C, H, W = x.shape
    OH, OW = out.shape[2], out.shape[3]
    WP = max((OW - 1) * sw + kw, pl + W)
    NC = N * C
    for chunk in prange(nchunk):
        c0 = chunk * NC // nchunk
        c1 = (chunk + 1) * NC // nchunk
        row = np.empty(WP, np.float32)
        acc = np.empty(OW, np.float32)
        vm = row[pl:pl + W]
        for nc in range(c0, c1):
            n = nc // C
            c = nc % C
            plane = x[n, c]
            orow = out[n, c]
            for oy in range(OH):
                # vertical maximum of the window's rows (clamped: the nearest edge row); three
                # rows (the usual 3x3 window) in one pass
                if kh == 3:
                    r0 = plane[min(max(oy * sh - pt, 0), H - 1)]
                    r1 = plane[min(max(oy * sh - pt + 1, 0), H - 1)]
                    r2 = plane[min(max(oy * sh - pt + 2, 0), H - 1)]
                    for ix in range(W):
                        vm[ix] = np.maximum(np.maximum(load(r0, ix), load(r1, ix)), load(r2, ix))
                else:
                    src = plane[min(max(oy * sh - pt, 0), H - 1)]
                    for ix in range(W):
                        vm[ix] = load(src, ix)
                    for ky in range(1, kh):
                        src = plane[min(max(oy * sh - pt + ky, 0), H - 1)]
                        for ix in range(W):
                            vm[ix] = np.maximum(vm[ix], load(src, ix))
                first = vm[0]
                last = vm[W - 1]
                for ix in range(pl):
                    row[ix] = first
                for ix in range(pl + W, WP):
                    row[ix] = last
                # horizontal maximum over kw columns, stride sw (three columns at stride 1 or 2
                # in one pass, as the vertical one)
                d = orow[oy]
                if kw == 3 and sw == 2:
                    for ox in range(OW):
                        store(d, ox, np.maximum(np.maximum(row[2 * ox], row[2 * ox + 1]), row[2 * ox + 2]))
                    continue
                if kw == 3 and sw == 1:
                    for ox in range(OW):
                        store(d, ox, np.maximum(np.maximum(row[ox], row[ox + 1]), row[ox + 2]))
                    continue
                for ox in range(OW):
                    acc[ox] = row[ox * sw]
                for kx in range(1, kw):
                    r = row[kx:]
                    if sw == 1:
                        for ox in range(OW):
                            acc[ox] = np.maximum(acc[ox], r[ox])
                    elif sw == 2:
                        for ox in range(OW):
                            acc[ox] = np.maximum(acc[ox], r[2 * ox])
                    else:
                        for ox in range(OW):
                            acc[ox] = np.maximum(acc[ox], r[ox * sw])
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
