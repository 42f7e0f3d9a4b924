"""A 1x1 convolution and the depthwise convolution it alone feeds, as one kernel.

MobileNet-style blocks expand C channels to t*C with a 1x1 convolution and filter each of those
channels with a depthwise one. Run apart, the expanded tensor (the block's largest: 96x112x112
float32 is 4.8 MB) is written to memory and read back. Here a task computes the expansion one
micro-kernel panel (:data:`mnnjit.backends.cpu.gemm.tile.MR` channels) at a time into a scratch of MR planes, which
stays in L2, and runs the depthwise convolution of those channels straight from it. One parallel
launch for both steps; the expanded tensor never exists.

Tasks are (image, chunk of panels). Storage (float32 or float16 bits) and quantized weights are
handled as in :mod:`mnnjit.backends.cpu.gemm.conv` (the expanded panel itself is float32 in both: half storage at
the layer's edges only); the depthwise part is one of the flat per-plane bodies of
:mod:`mnnjit.backends.cpu.depthwise.flat` (3x3, pads 1, stride 1 or 2: the depthwise layers of MobileNets), the
banded form for every plane size, so the kernel inlines two bodies only (with all six depthwise
bodies it took 1-2 minutes to compile).

This module imports numba: import it lazily.
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import numpy as np
from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
from numba import get_num_threads, njit, prange

from mnnjit.backends.cpu.fp16 import load, store
from mnnjit.backends.cpu.gemm.conv import (ConvGemm, _aligned_rows, _copy_block, _finish_act, _pack_tail,
                        _tail_block, _tile, _tile_to)
from mnnjit.backends.cpu.depthwise.planes import Depthwise
from mnnjit.backends.cpu.depthwise.flat import (_BAND, _S2_HALVES_MAX_W, _S2_SLACK, _dw3_plane_s1,
                             _dw3_plane_s1_banded, _dw3_plane_s2, _dw3_plane_s2_banded,
                             _edge_masks, _flat_s1_scratch, _flat_s2_scratch,
                             _s2_quarter_bands, _split_row_f32)
from mnnjit.backends.cpu.cnn_steps import _keep_alive
from mnnjit.backends.cpu.gemm.tile import MR, NR
from mnnjit.backends.cpu.quant import deq_panels
from mnnjit.backends.cpu.runtime.intrinsics import borrow

__all__ = ["ExpandDepthwise"]

#: the depthwise layers this kernel takes (:attr:`.depthwise.Depthwise.path`): 3x3, pads 1, the
#: flat bodies of :mod:`mnnjit.backends.cpu.depthwise.flat`; other depthwise shapes run as two steps
FUSABLE_PATHS = ("flat_s1", "flat_s2")

#: when the expansion's input blocks are copied to contiguous rows (see ``ExpandDepthwise.packed``)
PACK_MIN_K, PACK_MAX_BYTES = 128, 64 * 1024
#: stride-2 layers on planes of at least this many pixels split the input into quarter planes
#: (see ``ExpandDepthwise.quarters``)
QUARTERS_MIN_PIXELS = 196


@njit(inline="always")
def _expand_panel(x, n, wp, q, q0, K, P, bias, reg_act, act, mid, btile, ctile, tail, xpk, packed):
    """mid[r] (r < MR, planes of P values) = act(row ``q*MR + r`` of the 1x1 convolution of image
    ``n``): whole 16-column blocks from ``x`` (or from their contiguous copies ``xpk`` [blocks,
    K, NR] when ``packed``) into ``mid``, the last columns from the packed ``btile`` through
    ``ctile`` (``x``'s storage). ``mid`` is float32 whatever the storage: with float16
    activations the expanded panel, which never leaves L2, is computed and read in float32
    (no conversions inside the layer; half storage only at its edges)."""
    ap = wp[(q - q0) * K * MR:(q - q0 + 1) * K * MR]
    biasp = bias.ctypes.data + 4 * q * MR
    isz = x.itemsize
    msz = mid.itemsize
    xb = x.ctypes.data + isz * n * K * P
    mb = mid.ctypes.data
    nfull = P // NR
    for jb in range(nfull):
        if packed:
            bp = xpk.ctypes.data + isz * jb * K * NR
            ldb = NR
        else:
            bp = xb + isz * jb * NR
            ldb = P
        _tile_to(ap, x, mid, bp, ldb, mb + msz * jb * NR, P, K, biasp, reg_act, 0, 0)
    if tail:
        j0 = nfull * NR
        _tail_block(ap, x, btile.ctypes.data, NR, ctile, K, biasp, reg_act, tail, True)
        flat = mid.reshape(-1)
        for r in range(MR):
            dst = flat[r * P + j0:r * P + j0 + tail]
            src = ctile[r * NR:r * NR + tail]
            for j in range(tail):
                store(dst, j, load(src, j))
    if act > 2:
        flat = mid.reshape(-1)
        _finish_act(flat, MR * P, act)


@njit(inline="always")
def _quarter_plane(src, H, W, Qs, dst):
    """``dst[q*Qs + a*OW + b]`` = pixel (2a + ry, 2b + rx) of the flat float32 H x W plane
    ``src``, q = 2*ry + rx: its four quarter planes (even/odd rows x even/odd columns), each
    starting on a 16-value block (vector deinterleaving: up to 7 values written past a row);
    the expansion, a per-pixel map, then yields its output planes split the same way, as the
    stride-2 stencil reads them."""
    OW = W // 2
    for ry in range(2):
        for a in range(H // 2):
            _split_row_f32(src, (2 * a + ry) * W, dst, 2 * ry * Qs + a * OW,
                           (2 * ry + 1) * Qs + a * OW, OW)


@njit(inline="always")
def _expand_panel_quarters(like, wp, q, q0, K, Q, Qs, L, front, bias, reg_act, act, mid, btq,
                           ctile, xq):
    """mid[r] (r < MR) = act(row ``q*MR + r`` of the 1x1 convolution) on the quartered input
    ``xq`` (:func:`_quarter_plane`): quarter plane ``u`` of each row at ``u*L + front`` (the
    layout of :func:`mnnjit.backends.cpu.depthwise.flat._s2_rows`: E = quarters 0-1, O = quarters 2-3, zeros in
    front); the tails of the quarters (packed in ``btq[u]``) through ``ctile``."""
    ap = wp[(q - q0) * K * MR:(q - q0 + 1) * K * MR]
    biasp = bias.ctypes.data + 4 * q * MR
    isz = like.itemsize
    nfull = Q // NR
    tail = Q - nfull * NR
    ldb = xq.shape[1]
    ldc = mid.shape[1]
    for u in range(4):
        bq = xq.ctypes.data + isz * u * Qs
        cq = mid.ctypes.data + isz * (u * L + front)
        for jb in range(nfull):
            _tile(ap, like, bq + isz * jb * NR, ldb, cq + isz * jb * NR, ldc, K, biasp, reg_act,
                  0, 0)
        if tail:
            _tail_block(ap, like, btq[u].ctypes.data, NR, ctile, K, biasp, reg_act, tail, True)
            for r in range(MR):
                dst = mid[r, u * L + front + nfull * NR:u * L + front + Q]
                src = ctile[r * NR:r * NR + tail]
                for j in range(tail):
                    dst[j] = src[j]
        if act > 2:
            for r in range(MR):
                _finish_act(mid[r, u * L + front:u * L + front + Q], Q, act)


# The depthwise part of a panel as out-of-line calls, one function per plane body: inlined into
# the task, the bodies measured 20-40 % slower than in the standalone depthwise kernels, and two
# bodies in one function slowed each other (35 % on 14x14 planes).
@njit(cache=True)
def _dw_planes_s1(mid, rows, buf, ml, mr, acc, dw_w, dw_b, c0, out2, o0, W, act):
    """out2[o0 + c0 + r] = the stride-1 depthwise convolution of the one-band plane ``mid[r]``
    (r < rows)."""
    for r in range(rows):
        c = c0 + r
        _dw3_plane_s1(mid[r], buf, ml, mr, acc, dw_w[c], dw_b[c], out2[o0 + c], W, act)


@njit(cache=True)
def _dw_planes_s1_banded(mid, rows, buf, ml, mr, acc, dw_w, dw_b, c0, out2, o0, W, act):
    """:func:`_dw_planes_s1` for planes of more than one band."""
    for r in range(rows):
        c = c0 + r
        _dw3_plane_s1_banded(mid[r], buf, ml, mr, acc, dw_w[c], dw_b[c], out2[o0 + c], W, act)


@njit(cache=True)
def _dw_planes_s2(mid, rows, A, B, ml, acc, dw_w, dw_b, c0, out2, o0, W, act):
    """out2[o0 + c0 + r] = the stride-2 depthwise convolution of plane ``mid[r]`` (r < rows),
    for planes up to :data:`mnnjit.backends.cpu.depthwise.flat._S2_HALVES_MAX_W` wide."""
    for r in range(rows):
        c = c0 + r
        _dw3_plane_s2(mid[r], A, B, ml, acc, dw_w[c], dw_b[c], out2[o0 + c], W, act)


@njit(cache=True)
def _dw_planes_s2_wide(mid, rows, E, O, ml, acc, dw_w, dw_b, c0, out2, o0, W, act):
    """:func:`_dw_planes_s2` for wider planes (quarter planes, band by band). Its own function:
    both bodies in one measured 35 % slower on 14x14 planes."""
    for r in range(rows):
        c = c0 + r
        _dw3_plane_s2_banded(mid[r], E, O, ml, acc, dw_w[c], dw_b[c], out2[o0 + c], W, act)


@njit(cache=True)
def _dw_planes_s2_quarters(mid, rows, L, ml, acc, dw_w, dw_b, c0, out2, o0, OH, OW, act):
    """out2[o0 + c0 + r] = the stride-2 depthwise convolution of row ``r`` of ``mid``, already
    split into quarter planes (:func:`_expand_panel_quarters`), band by band of ``ml.shape[0]``
    outputs."""
    for r in range(rows):
        c = c0 + r
        _s2_quarter_bands(mid[r, 0:2 * L], mid[r, 2 * L:4 * L], OH, OW, ml, acc, dw_w[c], dw_b[c],
                          out2[o0 + c], act)


@njit(inline="always")
def _task_panels(w, kind, K, O, nchunk, task):
    """(image, first panel, end panel, weight buffer) of an expand+depthwise task: tasks are
    (image, chunk of the 1x1 layer's panels). Float weights: the task's packed panels. Quantized
    codes: a one-panel float32 buffer, which :func:`_panel_weights` fills per panel right
    before its use (the task's panels dequantized at once - 0.6 MB for 160 -> 960 at one
    thread - no longer fit L2 by the time the expansion reads them)."""
    npanel = (O + MR - 1) // MR
    n = task // nchunk
    ch = task % nchunk
    q0 = ch * npanel // nchunk
    q1 = max(q0, (ch + 1) * npanel // nchunk)
    if kind == 0:
        wq = w[q0 * K * MR:q1 * K * MR]
    else:
        wq = np.empty(K * MR, w.dtype)
    return n, q0, q1, wq


@njit(inline="always")
def _panel_weights(kind, codes8, codes4, scale, offset, bs, O, K, q, q0, wq, tmp):
    """The first panel index of the buffer ``wq`` once panel ``q`` is in it: ``q0`` for the
    task's float panels; for quantized codes panel ``q`` is dequantized into ``wq`` now (int8 or
    4-bit rows, or per-channel int8 codes kept in panel order: kind 4)."""
    if kind == 0:
        return q0
    deq_panels(kind, codes8, codes4, scale, offset, bs, 0, O, q, q + 1, K, wq, tmp)
    return q


@njit(cache=True)
def _xdw_task(x, w, kind, codes8, codes4, scale, offset, bs, bias, act1,
              dw_w, dw_b, out, act2, s2, nchunk, task, packed):
    """One task of :func:`_k_expand_dw` (image ``task // nchunk``, its chunk of panels), serial.
    A function of its own, not inlined into the parallel loop (Numba's parallel lowering of the
    whole body is slow to compile)."""
    N, K, H, W = x.shape
    O, OH, OW = out.shape[1], out.shape[2], out.shape[3]
    P = H * W
    reg_act = act1 if act1 <= 2 else 0
    nfull = P // NR
    tail = P - nfull * NR
    xflat = x.reshape(N, K, P)
    out2 = out.reshape(N * O, OH * OW)
    n, q0, q1, wq = _task_panels(w, kind, K, O, nchunk, task)
    if q1 <= q0:
        return
    tmp_a = np.empty((MR if kind else 1, K), np.float32)
    # scratch arrays are used through borrowed views (intrinsics.borrow: no atomic reference
    # counts per slice and per inlined call in this serial task), kept alive below
    wp = borrow(wq)
    # the expanded panel in float32 (see _expand_panel), the tiles in the input's storage
    mid_a = np.empty((MR, P), np.float32)
    ctile_a = np.empty(MR * NR, x.dtype)
    btile_a = np.empty((K, NR), x.dtype)
    mid, ctile, btile = borrow(mid_a), borrow(ctile_a), borrow(btile_a)
    if tail:
        _pack_tail(btile, xflat[n], nfull * NR, K, tail)
    # with ``packed``: the input's whole 16-column blocks copied to contiguous rows, once per task
    xpk_a = np.empty((nfull if packed else 1, K if packed else 1, NR), x.dtype)
    xpk = borrow(xpk_a)
    if packed:
        for jb in range(nfull):
            _copy_block(xpk[jb], xflat[n], jb * NR, K)
    # the depthwise scratch of the flat body (four float32 vectors)
    if s2:
        t0, t1, t2, t3 = _flat_s2_scratch(H, W)
    else:
        t0, t1, t2, t3 = _flat_s1_scratch(H, W)
    s0, s1, s2v, s3 = borrow(t0), borrow(t1), borrow(t2), borrow(t3)
    for q in range(q0, q1):
        b0 = _panel_weights(kind, codes8, codes4, scale, offset, bs, O, K, q, q0, wq, tmp_a)
        _expand_panel(x, n, wp, q, b0, K, P, bias, reg_act, act1, mid, btile, ctile, tail, xpk,
                      packed)
        rows = min(MR, O - q * MR)
        if s2 and W > _S2_HALVES_MAX_W:
            _dw_planes_s2_wide(mid, rows, s0, s1, s2v, s3, dw_w, dw_b, q * MR, out2, n * O, W,
                               act2)
        elif s2:
            _dw_planes_s2(mid, rows, s0, s1, s2v, s3, dw_w, dw_b, q * MR, out2, n * O, W, act2)
        elif s2v.shape[0] < P:
            _dw_planes_s1_banded(mid, rows, s0, s1, s2v, s3, dw_w, dw_b, q * MR, out2, n * O, W,
                                 act2)
        else:
            _dw_planes_s1(mid, rows, s0, s1, s2v, s3, dw_w, dw_b, q * MR, out2, n * O, W, act2)
    _keep_alive(mid_a, ctile_a)
    _keep_alive(btile_a, wq)
    _keep_alive(xpk_a, t0)
    _keep_alive(t1, t2)
    _keep_alive(t3, tmp_a)


@njit(cache=True)
def _xdw_task_quarters(x, xq_all, w, kind, codes8, codes4, scale, offset, bs, bias, act1, dw_w,
                       dw_b, out, act2, nchunk, task):
    """:func:`_xdw_task` for a stride-2 depthwise layer on float32 storage: the input comes
    split into its quarter planes (``xq_all`` [N*K, 4*Qs], :func:`_quarter_plane`), so every
    expanded panel comes out split as the stride-2 stencil reads it and no expanded plane is
    split (the split pass of :func:`mnnjit.backends.cpu.depthwise.flat._dw3_plane_s2` / ``_s2_split``)."""
    N, K, H, W = x.shape
    O, OH, OW = out.shape[1], out.shape[2], out.shape[3]
    reg_act = act1 if act1 <= 2 else 0
    out2 = out.reshape(N * O, OH * OW)
    n, q0, q1, wq = _task_panels(w, kind, K, O, nchunk, task)
    if q1 <= q0:
        return
    tmp_a = np.empty((MR if kind else 1, K), np.float32)
    wp = borrow(wq)
    Q = OH * OW
    Qs = xq_all.shape[1] // 4
    xq_a = xq_all[n * K:(n + 1) * K]
    xq = borrow(xq_a)
    nfull = Q // NR
    tail = Q - nfull * NR
    btq_a = np.empty((4, K, NR), x.dtype)
    btq = borrow(btq_a)
    if tail:
        for u in range(4):
            _pack_tail(btq[u], xq, u * Qs + nfull * NR, K, tail)
    # the expanded panel: per row E = quarters 0-1, O = quarters 2-3, each OW + 1 zeros first
    front = OW + 1
    L = front + Q + _S2_SLACK
    mid_a = np.zeros((MR, 4 * L), x.dtype)
    mid = borrow(mid_a)
    ctile_a = np.empty(MR * NR, x.dtype)
    ctile = borrow(ctile_a)
    rb = max(1, min(OH, _BAND // OW)) * OW
    ml_a = np.empty(rb, np.float32)
    mr_a = np.empty(rb, np.float32)
    _edge_masks(ml_a, mr_a, rb, OW)
    acc_a = np.empty(rb, np.float32)
    for q in range(q0, q1):
        b0 = _panel_weights(kind, codes8, codes4, scale, offset, bs, O, K, q, q0, wq, tmp_a)
        _expand_panel_quarters(x, wp, q, b0, K, Q, Qs, L, front, bias, reg_act, act1, mid, btq,
                               ctile, xq)
        rows = min(MR, O - q * MR)
        _dw_planes_s2_quarters(mid, rows, L, ml_a, acc_a, dw_w, dw_b, q * MR, out2, n * O, OH,
                               OW, act2)
    _keep_alive(xq_all, wq)
    _keep_alive(btq_a, mid_a)
    _keep_alive(ctile_a, mr_a)
    _keep_alive(tmp_a, tmp_a)


# The drivers below loop over tasks with ``prange(0, n)``, not ``prange(n)``: Numba makes
# prange(n)'s index unsigned in the parallel body, so each task function, first compiled for
# the signed ``task`` of the caller's type inference, compiled a second time for a uint64 one
# (twice the compile time of the kernel).


@njit(parallel=True, cache=True, error_model="numpy")
def _k_expand_dw(x, w, kind, codes8, codes4, scale, offset, bs, bias, act1,
                 dw_w, dw_b, out, act2, s2, nchunk, packed):
    """out = depthwise(act1(1x1 conv(x))) for x [N, K, H, W] and out [N, O, OH, OW] storage
    arrays; the 1x1 weights as in :func:`mnnjit.backends.cpu.gemm.conv._k_conv_gemm` (bias padded to whole panels),
    ``dw_w`` [O, 9] float32; the depthwise convolution is 3x3, pads 1, stride 2 if ``s2`` else 1.
    Tasks: (image, chunk of panels), each :func:`_xdw_task`."""
    for task in prange(0, x.shape[0] * nchunk):   # a signed index (see above)
        _xdw_task(x, w, kind, codes8, codes4, scale, offset, bs, bias, act1, dw_w, dw_b, out,
                  act2, s2, nchunk, task, packed)


@njit(parallel=True, cache=True, error_model="numpy")
def _k_expand_dw_quarters(x, w, kind, codes8, codes4, scale, offset, bs, bias, act1,
                          dw_w, dw_b, out, act2, nchunk):
    """:func:`_k_expand_dw` for a stride-2 depthwise layer on float32 storage: the input's
    quarter planes first, once for all tasks (each quarter on whole 16-value blocks, 16 values
    apart: the vector split writes up to 7 values past a run), then the tasks
    (:func:`_xdw_task_quarters`). A kernel of its own: one kernel with both task bodies took
    twice as long to compile."""
    N, K, H, W = x.shape
    Q = (H // 2) * (W // 2)
    Qs = (Q + NR - 1) // NR * NR + NR
    xq = _aligned_rows(N * K, 4 * Qs, x.dtype)
    planes = x.reshape(N * K, H * W)
    for p in prange(N * K):
        _quarter_plane(planes[p], H, W, Qs, xq[p])
    for task in prange(0, N * nchunk):   # a signed index (see above)
        _xdw_task_quarters(x, xq, w, kind, codes8, codes4, scale, offset, bs, bias, act1,
                           dw_w, dw_b, out, act2, nchunk, task)


@njit(inline="always")
def _widen_planes(x, xf, p):
    """Plane ``p`` of the float16-bits input ``x`` [N*K, P] widened into ``xf`` [N*K, P]."""
    src = x[p]
    dst = xf[p]
    for j in range(src.shape[0]):
        dst[j] = load(src, j)


@njit(parallel=True, cache=True, error_model="numpy")
def _k_expand_dw_half(x, w, kind, codes8, codes4, scale, offset, bs, bias, act1,
                      dw_w, dw_b, out, act2, s2, nchunk, packed):
    """:func:`_k_expand_dw` on float16 storage (``x``, ``out`` uint16 half bits): the block's
    input (its smallest tensor) is widened to float32 once, in the same launch, and the float32
    tasks run on it, storing halves only at the output. Each expanded panel then reads float32
    input rows: the float16 tasks widened every input vector once per panel (up to 160 times
    for a 960-channel expansion; 14x14 layers measured 20-30 % slower than float32)."""
    N, K, H, W = x.shape
    xf = np.empty((N, K, H, W), np.float32)
    src = x.reshape(N * K, H * W)
    dst = xf.reshape(N * K, H * W)
    for p in prange(N * K):
        _widen_planes(src, dst, p)
    for task in prange(0, N * nchunk):   # a signed index (see above)
        _xdw_task(xf, w, kind, codes8, codes4, scale, offset, bs, bias, act1, dw_w, dw_b, out,
                  act2, s2, nchunk, task, packed)


@njit(parallel=True, cache=True, error_model="numpy")
def _k_expand_dw_quarters_half(x, w, kind, codes8, codes4, scale, offset, bs, bias, act1,
                               dw_w, dw_b, out, act2, nchunk):
    """:func:`_k_expand_dw_quarters` on float16 storage: each input plane is widened (into
    float32 planes in L2) and split into its quarter planes in the same task, then the float32
    tasks run, storing halves only at the output."""
    N, K, H, W = x.shape
    Q = (H // 2) * (W // 2)
    Qs = (Q + NR - 1) // NR * NR + NR
    xq = _aligned_rows(N * K, 4 * Qs, np.float32)
    xf = np.empty((N, K, H, W), np.float32)
    src = x.reshape(N * K, H * W)
    planes = xf.reshape(N * K, H * W)
    for p in prange(N * K):
        _widen_planes(src, planes, p)
        _quarter_plane(planes[p], H, W, Qs, xq[p])
    for task in prange(0, N * nchunk):   # a signed index (see above)
        _xdw_task_quarters(xf, xq, w, kind, codes8, codes4, scale, offset, bs, bias, act1,
                           dw_w, dw_b, out, act2, nchunk, task)


class ExpandDepthwise:
    """A prepared 1x1 :class:`mnnjit.backends.cpu.gemm.conv.ConvGemm` (stride 1, no padding, one group) followed by
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
        if dw.path not in FUSABLE_PATHS:
            raise ValueError(f"expand+depthwise: the depthwise layer must be 3x3 with pads 1 (a flat "
                             f"kernel), got path {dw.path!r}")
        self.s2 = dw.path == "flat_s2"
        npanel = expand.w.npanel
        threads = threads or get_num_threads()
        self.nchunk = max(1, min(npanel, 2 * threads if threads > 1 else 1))
        # the input's 16-column blocks copied to contiguous rows once per task when they are
        # long (K >= PACK_MIN_K) and all fit PACK_MAX_BYTES (7x7 planes: 160 -> 960 measured
        # 0.184 -> 0.166-0.171 ms standalone; 14x14 planes with K = 64-96: no gain)
        N, K, H, W = expand.in_shape
        self.packed = bool(K >= PACK_MIN_K and (H * W // NR) * K * NR * 4 <= PACK_MAX_BYTES)
        #: stride 2 on float32 storage: the input split into quarter planes first, then no
        #: expanded plane is split (:func:`_xdw_task_quarters`; standalone, against splitting
        #: each expanded plane, 1 / 2 threads: 24->144 on 56x56 0.457 -> 0.397 / 0.333 ->
        #: 0.294 ms, 32->192 on 28x28 0.178 -> 0.166 / 0.133 -> 0.134, 96->576 on 14x14
        #: 0.329 -> 0.310 / 0.263 -> 0.232; planes under 14x14: a few us slower)
        self.quarters = bool(self.s2 and H * W >= QUARTERS_MIN_PIXELS)

    def run(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Compute into ``out`` (storage array, same storage as ``x``)."""
        kernel, args = self.launch(x, out)
        kernel(*args)
        return out

    def launch(self, x: np.ndarray, out: np.ndarray) -> Tuple[Callable, tuple]:
        """The kernel and arguments of :meth:`run` on these arrays (see
        :func:`.launch.bind_launch`)."""
        e, wt = self.expand, self.expand.w
        args = (x, wt.panels, wt.kind, wt.codes8, wt.codes4, wt.scale, wt.offset, wt.block,
                e.bias, e.act, self.dw.w, self.dw.bias, out, self.dw.args[8])
        half = x.dtype == np.uint16
        if self.quarters:
            return (_k_expand_dw_quarters_half if half else _k_expand_dw_quarters), \
                args + (self.nchunk,)
        return (_k_expand_dw_half if half else _k_expand_dw), \
            args + (self.s2, self.nchunk, self.packed)
