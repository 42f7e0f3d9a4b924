"""A 1x1 convolution and the depthwise convolution it alone feeds, as one kernel.

MobileNet-style blocks expand C channels to t*C with a 1x1 convolution and filter each of those
channels with a depthwise one. Run apart, the expanded tensor (the block's largest: 96x112x112
float32 is 4.8 MB) is written to memory and read back. Here a task computes the expansion one
micro-kernel panel (:data:`.gemm_tile.MR` channels) at a time into a scratch of MR planes, which
stays in L2, and runs the depthwise convolution of those channels straight from it. One parallel
launch for both steps; the expanded tensor never exists.

Tasks are (image, chunk of panels). Storage (float32 or float16 bits) and quantized weights are
handled as in :mod:`.conv_gemm`; the depthwise part runs the per-plane body the standalone
:class:`.depthwise.Depthwise` would (flat kernels of :mod:`.depthwise_flat` or the padded-plane
ones of :mod:`.depthwise`).

This module imports numba: import it lazily.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
from numba import get_num_threads, njit, prange

from .conv_gemm import ConvGemm, _deq_panels, _finish_act, _pack_tail, _tail_block, _tile
from .depthwise import Depthwise, _dw_geometry, _dw_plane, _dw_plane_s2, _s2_geometry
from .depthwise_flat import (_dw3_plane_s1, _dw3_plane_s1_banded, _dw3_plane_s2,
                             _dw3_plane_s2_banded, _flat_s1_scratch, _flat_s2_scratch, s1_banded,
                             s2_banded)
from .fp16_kernels import _keep_alive
from .gemm_tile import MR, NR

__all__ = ["ExpandDepthwise"]

#: the depthwise bodies (:attr:`.depthwise.Depthwise.path`): the flat kernels of
#: :mod:`.depthwise_flat` (stride 1, one band or banded; stride 2) and the padded-plane ones of
#: :mod:`.depthwise` (3x3 stride-2 parity planes; any other shape)
_PLANE, _PARITY_S2, _FLAT_S1, _FLAT_S1_BANDED, _FLAT_S2, _FLAT_S2_BANDED = 0, 1, 2, 3, 4, 5
_PATHS = ("plane", "parity_s2", "flat_s1", "flat_s1_banded", "flat_s2", "flat_s2_banded")


@njit(inline="always")
def _expand_panel(x, n, wp, q, q0, K, P, bias, reg_act, act, mid, btile, ctile, tail):
    """mid[r] (r < MR, planes of P values) = act(row ``q*MR + r`` of the 1x1 convolution of image
    ``n``): whole 16-column blocks straight from ``x`` into ``mid``, the last columns from the
    packed ``btile`` through ``ctile``."""
    ap = wp[(q - q0) * K * MR:(q - q0 + 1) * K * MR]
    biasp = bias.ctypes.data + 4 * q * MR
    isz = x.itemsize
    xb = x.ctypes.data + isz * n * K * P
    mb = mid.ctypes.data
    nfull = P // NR
    for jb in range(nfull):
        _tile(ap, x, xb + isz * jb * NR, P, mb + isz * jb * NR, P, K, biasp, reg_act)
    if tail:
        j0 = nfull * NR
        _tail_block(ap, x, btile.ctypes.data, NR, ctile, K, biasp, reg_act, tail, True)
        flat = mid.reshape(-1)
        for r in range(MR):
            dst = flat[r * P + j0:r * P + j0 + tail]
            src = ctile[r * NR:r * NR + tail]
            for j in range(tail):
                dst[j] = src[j]
    if act > 2:
        flat = mid.reshape(-1)
        _finish_act(flat, MR * P, act)


@njit(parallel=True, cache=True)
def _k_expand_dw(x, w, kind, codes8, codes4, scale, offset, bs, bias, act1,
                 dw_w, dw_b, out, kh, kw, sh, sw, pt, pl, dh, dw, act2, path, nchunk):
    """out = depthwise(act1(1x1 conv(x))) for x [N, K, H, W] and out [N, O, OH, OW] storage
    arrays; the 1x1 weights as in :func:`.conv_gemm._k_conv_gemm` (bias padded to whole panels),
    ``dw_w`` [O, kh*kw] float32. ``path``: the depthwise per-plane body (see :data:`_PATHS`)."""
    N, K, H, W = x.shape
    O, OH, OW = out.shape[1], out.shape[2], out.shape[3]
    P = H * W
    npanel = (O + MR - 1) // MR
    reg_act = act1 if act1 <= 2 else 0
    nfull = P // NR
    tail = P - nfull * NR
    HP, WP, n_flat = _dw_geometry(H, W, OH, OW, kh, kw, sh, sw, pt, pl, dh, dw)
    WH, PS, n_flat2 = _s2_geometry(H, W, OH, OW, pt, pl)
    xflat = x.reshape(N, K, P)
    out2 = out.reshape(N * O, OH * OW)
    for task in prange(N * nchunk):
        n = task // nchunk
        ch = task % nchunk
        q0 = ch * npanel // nchunk
        q1 = (ch + 1) * npanel // nchunk
        if q1 <= q0:
            continue
        if kind == 0:
            wp = w[q0 * K * MR:q1 * K * MR]
        else:
            wp = np.empty((q1 - q0) * K * MR, w.dtype)
            _deq_panels(kind, codes8, codes4, scale, offset, bs, 0, O, q0, q1, K, wp)
        mid2 = np.empty((MR, P), x.dtype)
        mid = mid2.reshape((MR, H, W))
        ctile = np.empty(MR * NR, x.dtype)
        btile = np.empty((K, NR), x.dtype)
        if tail:
            _pack_tail(btile, xflat[n], nfull * NR, K, tail)
        # the depthwise scratch of the chosen body (four float32 vectors)
        if path == _FLAT_S1 or path == _FLAT_S1_BANDED:
            s0, s1, s2, s3 = _flat_s1_scratch(H, W)
        elif path == _FLAT_S2 or path == _FLAT_S2_BANDED:
            s0, s1, s2, s3 = _flat_s2_scratch(H, W)
        elif path == _PARITY_S2:
            s0, s1 = np.zeros(4 * PS, np.float32), np.empty(n_flat2, np.float32)
            s2, s3 = s1[:0], s1[:0]
        else:
            s0, s1 = np.zeros((HP + 1) * WP, np.float32), np.empty(max(n_flat, 1), np.float32)
            s2, s3 = s1[:0], s1[:0]
        for q in range(q0, q1):
            _expand_panel(x, n, wp, q, q0, K, P, bias, reg_act, act1, mid, btile, ctile, tail)
            for r in range(min(MR, O - q * MR)):
                c = q * MR + r
                if path == _FLAT_S1:
                    _dw3_plane_s1(mid2[r], s0, s1, s2, s3, dw_w[c], dw_b[c], out2[n * O + c], W, act2)
                elif path == _FLAT_S1_BANDED:
                    _dw3_plane_s1_banded(mid2[r], s0, s1, s2, s3, dw_w[c], dw_b[c], out2[n * O + c],
                                         W, act2)
                elif path == _FLAT_S2:
                    _dw3_plane_s2(mid2[r], s0, s1, s2, s3, dw_w[c], dw_b[c], out2[n * O + c], W, act2)
                elif path == _FLAT_S2_BANDED:
                    _dw3_plane_s2_banded(mid2[r], s0, s1, s2, s3, dw_w[c], dw_b[c], out2[n * O + c],
                                         W, act2)
                elif path == _PARITY_S2:
                    _dw_plane_s2(mid[r], s0, s1, dw_w[c], dw_b[c], out[n, c], pt, pl, act2,
                                 WH, PS, n_flat2)
                else:
                    _dw_plane(mid[r], s0, s1, dw_w[c], dw_b[c], out[n, c], kh, kw, sh, sw,
                              pt, pl, dh, dw, act2, HP, WP, n_flat)
        _keep_alive(mid2, ctile)
        _keep_alive(btile, wp)


class ExpandDepthwise:
    """A prepared 1x1 :class:`.conv_gemm.ConvGemm` (stride 1, no padding, one group) followed by
    the :class:`.depthwise.Depthwise` it feeds, as one kernel; ``run(x, out)``."""

    def __init__(self, expand: ConvGemm, dw: Depthwise, threads: Optional[int] = None) -> None:
        if not expand.direct or expand.group != 1:
            raise ValueError("expand+depthwise: the first convolution must be 1x1, stride 1, "
                             "unpadded, ungrouped")
        if tuple(dw.in_shape) != tuple(expand.out_shape):
            raise ValueError(f"expand+depthwise: the depthwise input {list(dw.in_shape)} is not "
                             f"the 1x1 output {list(expand.out_shape)}")
        self.expand, self.dw = expand, dw
        self.in_shape, self.out_shape = expand.in_shape, dw.out_shape
        kh, kw, sh, sw, pt, pl, dh, dwl, _ = dw.args
        H, W = dw.in_shape[2:]
        if dw.path == "flat_s1":
            self.path = _FLAT_S1_BANDED if s1_banded(H, W) else _FLAT_S1
        elif dw.path == "flat_s2":
            self.path = _FLAT_S2_BANDED if s2_banded(H, W) else _FLAT_S2
        elif (kh, kw, sh, sw, dh, dwl) == (3, 3, 2, 2, 1, 1):
            self.path = _PARITY_S2
        else:
            self.path = _PLANE
        npanel = expand.w.npanel
        threads = threads or get_num_threads()
        self.nchunk = max(1, min(npanel, 2 * threads if threads > 1 else 1))

    def run(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Compute into ``out`` (storage array, same storage as ``x``)."""
        e, wt = self.expand, self.expand.w
        _k_expand_dw(x, wt.panels, wt.kind, wt.codes8, wt.codes4, wt.scale, wt.offset, wt.block,
                     e.bias, e.act, self.dw.w, self.dw.bias, out, *self.dw.args[:8],
                     self.dw.args[8], self.path, self.nchunk)
        return out
