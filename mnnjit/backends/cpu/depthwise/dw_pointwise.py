"""A 3x3 stride-1 depthwise convolution and the 1x1 convolution it alone feeds, as one kernel.

MobileNet blocks without an expansion (MobileNetV2's first block, every block of MobileNetV1)
filter each channel with a depthwise convolution and mix the channels with a 1x1 one. Run apart,
the depthwise output (32x112x112 float32 in MobileNetV2: 1.6 MB) is written to L3 and read back
by the 1x1 convolution, whose 32 input rows are 50 KB apart. Here a task takes a band of output
rows: the depthwise convolution of every channel over the band goes into a scratch block (rows
of the band's pixels, each on a 64-byte line, together in L1/L2), and the micro-kernel
(:mod:`mnnjit.backends.cpu.gemm.tile`) mixes the channels straight from it into the output, with the 1x1 layer's
bias, activation and residual add in its registers (:func:`mnnjit.backends.cpu.gemm.conv._one_tile`).

The depthwise part is :func:`mnnjit.backends.cpu.depthwise.flat._s1_rows` on a copy of the band's input rows with a
zero row above and below where the plane ends (3x3, pads 1, stride 1, dilation 1).

One kernel for every mode: float32 or float16 activations (``uint16`` bits; the band's depthwise
output is then stored as half, as the two layers run apart would store it, and the micro-kernel
widens it), float weight panels or quantized codes (memory=low: each task dequantizes the 1x1
layer's and the producing convolution's panels into float32 scratch once, as
:func:`mnnjit.backends.cpu.gemm.conv._k_conv_gemm` does).

The convolution producing the depthwise input can run inside too (``pre``): a stem (3x3 stride
2 on the image) or the 1x1 expansion of an inverted residual block. Each band then computes its
input rows from ``pre``'s input (im2col block, micro-kernel tiles) into the per-channel row
buffers the depthwise part reads, and keeps the two rows the next band shares. A whole
MobileNetV2 block (24 -> 144 -> 24 on 56x56) keeps only its 24-channel input and output in
memory.

This module imports numba: import it lazily.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Tuple

import numpy as np
from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
from numba import get_num_threads, njit, prange

from mnnjit.backends.cpu.gemm.conv import (ConvGemm, _aligned_rows, _deq_panels, _im2col, _one_tile,
                                           _pack_tail, _tile_to)
from mnnjit.backends.cpu.depthwise.planes import Depthwise
from mnnjit.backends.cpu.depthwise.flat import _edge_masks, _s1_rows
from mnnjit.backends.cpu.fp16 import load
from mnnjit.backends.cpu.cnn_steps import _keep_alive
from mnnjit.backends.cpu.gemm.tile import MR, NR

__all__ = ["DepthwisePointwise", "band_rows", "fusable", "pre_fits"]

#: a band's rows: its depthwise output (all channels) about this many bytes, and at least
#: :data:`MIN_COLS` pixels (every band reads all the 1x1 weights; 1 thread, input in L3,
#: separate -> fused: 32->16 on 112x112 0.62 -> 0.45 ms with 4-row bands, 0.48 with 2;
#: 64->128 on 56x56 1.09 -> 0.96 with 4 rows; 256->256 on 28x28 1.47 -> 1.39 with 8, 1.93 with
#: 1; 512->512 on 14x14 1.85 -> 1.62 with the whole plane, 2.42 with one row)
BAND_BYTES, MIN_COLS = 64 * 1024, 192
#: the largest im2col block (bytes) of a band's rows a producing convolution may take
PRE_COL_BYTES = 256 * 1024


def band_rows(C: int, H: int, W: int) -> int:
    """Rows per band for ``C`` channels of H x W (see :data:`BAND_BYTES`), rounded up to whole
    16-pixel blocks where the plane has rows enough (no tail block in every band)."""
    rows = max(BAND_BYTES // (4 * C * W), -(-MIN_COLS // W))
    step = NR // math.gcd(W, NR)
    return max(1, min(H, -(-rows // step) * step))


#: activation storage the fused kernel takes (float16 arrives as its uint16 bits)
STORAGES = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.uint16))


def fusable(dw: Depthwise, pw: ConvGemm, storage: np.dtype, threads: int) -> bool:
    """Whether ``dw`` followed by ``pw`` runs as one :class:`DepthwisePointwise` kernel: a 3x3
    stride-1 flat depthwise layer, an ungrouped 1x1 layer (float panels or quantized codes),
    float32 or float16 storage, and bands enough for two tasks per thread (else the layers run
    apart: a whole plane per band gains nothing and leaves threads idle)."""
    N, C, H, W = dw.in_shape
    if not (_layers_fit(dw, pw) and np.dtype(storage) in STORAGES):
        return False
    return N * -(-H // band_rows(C, H, W)) >= 2 * max(1, threads)


def pre_fits(pre: ConvGemm, dw: Depthwise) -> bool:
    """Whether the convolution ``pre`` producing the depthwise layer ``dw``'s input can run
    inside the fused kernel (:class:`DepthwisePointwise` with ``pre``): an ungrouped convolution
    through im2col (float panels or quantized codes) and an activation the micro-kernel
    applies."""
    if not (pre.group == 1 and not pre.narrow
            and pre.act in (0, 1, 2) and tuple(pre.out_shape) == tuple(dw.in_shape)):
        return False
    # its im2col block for one band stays in L2 (a stem: 27 rows; a deep 5x5 layer would not)
    N, C, H, W = dw.in_shape
    K = pre.w.shape[1]
    return K * (band_rows(C, H, W) + 2) * W * 4 <= PRE_COL_BYTES


def _layers_fit(dw: Depthwise, pw: ConvGemm) -> bool:
    return (dw.path == "flat_s1" and pw.direct and pw.group == 1 and not pw.narrow
            and tuple(dw.out_shape) == tuple(pw.in_shape))


@njit(inline="always")
def _pre_rows(x, n, pre, pre_w, pre_bias, col, srow, ya, yb, off, W):
    """Rows ``ya`` .. ``yb - 1`` of the producing convolution's output (all its channels) into
    ``srow`` [channels padded to whole panels, ldS] from column ``1 + off * W``: an im2col block
    (``col``: the input's storage) of those output pixels and micro-kernel tiles into float32
    ``srow`` (the last block's padding columns land in scratch the depthwise part never reads as
    data)."""
    Cs, Hs, Ws, kh, kw, sh, sw, pt, pl, dh, dw, act = pre
    Ks = Cs * kh * kw
    ncol = (yb - ya) * W
    _im2col(x.reshape(x.shape[0], Cs, Hs * Ws), n, 0, Cs, Hs, Ws, kh, kw, sh, sw, pt, pl, dh, dw, W,
            ya * W, ncol, col)
    npre = srow.shape[0] // MR
    lds = srow.shape[1]
    for jb in range((ncol + NR - 1) // NR):
        bp = col.ctypes.data + col.itemsize * jb * NR
        for q in range(npre):
            cp = srow.ctypes.data + 4 * (q * MR * lds + 1 + off * W + jb * NR)
            _tile_to(pre_w[q * Ks * MR:(q + 1) * Ks * MR], col, srow, bp, col.shape[1], cp, lds,
                     Ks, pre_bias.ctypes.data + 4 * q * MR, act, 0, 0)


@njit(inline="always")
def _float_panels(w, q, rows, K):
    """Float32 panels of a weight source ``w`` = (kind, panels, codes8, codes4, scale, offset,
    block) with ``rows`` output rows: the packed panels themselves (kind 0), else its codes
    (kinds 2-4: int8 or 4-bit rows, int8 in panel order) dequantized into a fresh array."""
    kind, panels, codes8, codes4, scale, offset, bs = w
    if kind == 0:
        return panels
    dst = np.empty(q * K * MR, np.float32)
    _deq_panels(kind, codes8, codes4, scale, offset, bs, 0, rows, 0, q, K, dst)
    return dst


@njit(cache=True)
def _dwpw_task(x, pre, pre_src, pre_bias, dw_w, dw_b, dw_act, w_src, bias, out, res, has_res,
               act, dims, R, nchunk, task):
    """One task of :func:`_k_dw_pw` (image ``task // nchunk``, its chunk of row bands), serial.
    Storage: ``x``, ``out``, ``res`` float32 or uint16 half bits alike; weights as
    :func:`_float_panels` takes them."""
    C, H, W = dims
    N = x.shape[0]
    O = out.shape[1]
    P = H * W
    has_pre = pre[0] > 0
    n = task // nchunk
    ch = task % nchunk
    nband = (H + R - 1) // R
    b0 = ch * nband // nchunk
    b1 = (ch + 1) * nband // nchunk
    if b1 <= b0:
        return
    out3 = out.reshape(N, O, P)
    res3 = res.reshape(N, O, P)
    npg = (O + MR - 1) // MR
    wp = _float_panels(w_src, npg, O, C)
    reg_act = act if act <= 2 and not has_res else 0
    ldb = (R * W + NR - 1) // NR * NR
    # the band's depthwise output in the activations' storage: the 1x1 tiles read it as they
    # would read it from memory, rounded alike
    mid = _aligned_rows(C, ldb, out.dtype)
    # per channel: the band's input rows r0-1 .. r1 (zeros outside the plane) between one guard
    # value either side; with a producing convolution, all channels computed here (its padding
    # rows to a whole panel and its last block's padding columns included)
    lds = ((R + 2) * W + 2 + NR + NR - 1) // NR * NR
    srow = _aligned_rows((C + MR - 1) // MR * MR if has_pre else 1, lds, np.float32)
    Ks = pre[1] * pre[4] * pre[5] if has_pre else 1
    pre_w = _float_panels(pre_src, (C + MR - 1) // MR if has_pre else 0, C, Ks)
    col = np.zeros((Ks, (((R + 2) * W + NR - 1) // NR * NR) if has_pre else 1), x.dtype)
    buf = np.zeros((R + 2) * W + 2, np.float32)
    ml = np.empty(R * W, np.float32)
    mr = np.empty(R * W, np.float32)
    _edge_masks(ml, mr, R * W, W)
    acc = np.empty(R * W, np.float32)
    btile = np.empty((C, NR), out.dtype)
    ctile = np.empty(MR * NR, out.dtype)
    bblk = np.empty((1, NR), out.dtype)
    planes = x.reshape(N * x.shape[1], x.shape[2] * x.shape[3])
    for band in range(b0, b1):
        r0 = band * R
        nr = min(H, r0 + R) - r0
        ncol = nr * W
        if has_pre:
            ya = max(0, r0 - 1)
            if band > b0:
                # rows r0-1 and r0 were the last two of the previous band
                for c in range(C):
                    sr = srow[c]
                    for j in range(2 * W):
                        sr[1 + j] = sr[1 + R * W + j]
                ya = r0 + 1
            yb = min(H, r0 + nr + 1)
            if yb > ya:
                _pre_rows(x, n, pre[1:], pre_w, pre_bias, col, srow, ya, yb, ya - (r0 - 1), W)
            for c in range(C):
                sr = srow[c]
                sr[0] = np.float32(0.0)
                if r0 == 0:
                    for j in range(W):
                        sr[1 + j] = np.float32(0.0)
                if r0 + nr == H:
                    for j in range(W):
                        sr[1 + (nr + 1) * W + j] = np.float32(0.0)
                _s1_rows(sr, ncol, W, ml, mr, acc, dw_w[c], dw_b[c], mid[c], dw_act)
        else:
            for c in range(C):
                plane = planes[n * C + c]
                for rr in range(nr + 2):
                    y = r0 - 1 + rr
                    seg = buf[1 + rr * W:1 + (rr + 1) * W]
                    if 0 <= y < H:
                        src = plane[y * W:(y + 1) * W]
                        for j in range(W):
                            seg[j] = load(src, j)
                    else:
                        for j in range(W):
                            seg[j] = np.float32(0.0)
                _s1_rows(buf, ncol, W, ml, mr, acc, dw_w[c], dw_b[c], mid[c], dw_act)
        nfull = ncol // NR
        tail = ncol - nfull * NR
        if tail:
            _pack_tail(btile, mid, nfull * NR, C, tail)
        for jb in range(nfull + (1 if tail else 0)):
            for q in range(npg):
                _one_tile(out3, wp, q, 0, jb, nfull, tail, mid.ctypes.data, ldb, btile, ctile,
                          bias, n, 0, O, npg, C, P, O, r0 * W, reg_act, act, res3, has_res,
                          bblk, False)
    _keep_alive(mid, btile)
    _keep_alive(ctile, bblk)
    _keep_alive(srow, col)
    _keep_alive(wp, pre_w)


@njit(parallel=True, cache=True, error_model="numpy")
def _k_dw_pw(x, pre, pre_src, pre_bias, dw_w, dw_b, dw_act, w_src, bias, out, res, has_res, act,
             dims, R, nchunk):
    """out = act(1x1 conv(depthwise 3x3 s1 p1(y)) [+ res]) for float32 ``out`` [N, O, H, W]
    where ``y`` [N, C, H, W] (``dims`` = (C, H, W)) is ``x`` itself, or with ``pre[0]`` the
    output of a convolution of ``x`` computed band by band (``pre`` = (1, Cs, Hs, Ws, kh, kw, sh,
    sw, pt, pl, dh, dw, act) and its weight source / padded bias ``pre_src`` / ``pre_bias``);
    ``w_src`` the 1x1 layer's weight source (:func:`_float_panels`: packed panels or quantized
    codes) and ``bias`` its padded bias as in :func:`mnnjit.backends.cpu.gemm.conv._k_conv_gemm`. Storage: float32
    or uint16 half bits (``x``, ``out``, ``res`` alike). Tasks: (image, chunk of bands of ``R``
    rows)."""
    # prange(0, n), not prange(n): a signed task index, typed as when the caller's types were
    # first inferred (Numba makes prange(n)'s index unsigned in the parallel body, which then
    # compiled _dwpw_task a second time for a uint64 ``task``)
    for task in prange(0, x.shape[0] * nchunk):
        _dwpw_task(x, pre, pre_src, pre_bias, dw_w, dw_b, dw_act, w_src, bias, out, res, has_res,
                   act, dims, R, nchunk, task)


class DepthwisePointwise:
    """A prepared :class:`.depthwise.Depthwise` (3x3, stride 1, pads 1) and the 1x1
    :class:`mnnjit.backends.cpu.gemm.conv.ConvGemm` it feeds, as one kernel; ``run(x, out, res=None)``. The 1x1
    layer's activation is read at launch (a residual fold may set it after construction).
    Whether fusing pays: :func:`fusable`.

    With ``pre`` (a convolution producing the depthwise layer's input, :func:`pre_fits`) the
    kernel takes ``pre``'s input and computes its output band by band, each task keeping the
    two rows its next band shares with the last: that tensor (MobileNetV2's stem output,
    32x112x112, or an expanded 144x56x56) never goes to memory."""

    def __init__(self, dw: Depthwise, pw: ConvGemm, threads: Optional[int] = None,
                 rows: Optional[int] = None, pre: Optional[ConvGemm] = None) -> None:
        threads = threads or get_num_threads()
        if not _layers_fit(dw, pw):
            raise ValueError("depthwise+1x1: needs a 3x3 stride-1 pads-1 depthwise layer feeding "
                             "an ungrouped unpadded 1x1 layer of its shape")
        if pre is not None and not pre_fits(pre, dw):
            raise ValueError("depthwise+1x1: the producing convolution must be an ungrouped "
                             "convolution with relu/relu6 or no activation giving the "
                             "depthwise layer's input shape")
        self.dw, self.pw, self.pre = dw, pw, pre
        self.in_shape = dw.in_shape if pre is None else pre.in_shape
        self.out_shape = pw.out_shape
        N, C, H, W = dw.in_shape
        if pre is None:
            self._pre = ((0,) * 13, _weight_source(pw.w, none=True), np.zeros(1, np.float32))
        else:
            (kh, kw), (sh, sw), (pt, _, pl, _), (dh, dwl) = pre.kernel, pre.stride, pre.pads, \
                pre.dilation
            self._pre = ((1,) + tuple(int(v) for v in (pre.in_shape[1], pre.in_shape[2],
                                                       pre.in_shape[3], kh, kw, sh, sw, pt, pl,
                                                       dh, dwl, pre.act)),
                         _weight_source(pre.w), pre.bias)
        self._w_src = _weight_source(pw.w)
        #: output rows per band (:func:`band_rows` unless given)
        self.rows = band_rows(C, H, W) if rows is None else max(1, min(H, int(rows)))
        nband = -(-H // self.rows)
        self.nchunk = max(1, min(nband, threads if N < threads else 1))

    @property
    def act(self) -> int:
        """The 1x1 layer's activation code (shared with the wrapped :class:`ConvGemm`)."""
        return self.pw.act

    @act.setter
    def act(self, code: int) -> None:
        self.pw.act = code

    def run(self, x: np.ndarray, out: np.ndarray, res: Optional[np.ndarray] = None) -> np.ndarray:
        """Compute into ``out`` (storage arrays like ``x``: float32 or uint16 half bits); ``res``
        (like ``out``) is added before the 1x1 layer's activation."""
        kernel, args = self.launch(x, out, res)
        kernel(*args)
        return out

    def launch(self, x: np.ndarray, out: np.ndarray,
               res: Optional[np.ndarray] = None) -> Tuple[Callable, tuple]:
        """The kernel and arguments of :meth:`run` on these arrays (see
        :func:`.launch.bind_launch`)."""
        kind = "float32" if x.dtype == np.float32 else "uint16"
        for name, a, shape in (("input", x, self.in_shape), ("output", out, self.out_shape),
                               ("residual", res, self.out_shape)):
            if a is None:
                continue
            if a.dtype != kind or not a.flags.c_contiguous or tuple(a.shape) != shape:
                raise ValueError(f"depthwise+1x1: the {name} must be a C-contiguous {kind} "
                                 f"array of shape {list(shape)} (float32, or uint16 half bits, "
                                 f"like the input), got {a.dtype} {list(a.shape)}")
        pw, dw = self.pw, self.dw
        pre, pre_src, pre_bias = self._pre
        return _k_dw_pw, (x, pre, pre_src, pre_bias, dw.w, dw.bias, dw.args[8], self._w_src,
                          pw.bias, out, out if res is None else res, res is not None, pw.act,
                          tuple(int(v) for v in dw.in_shape[1:]), self.rows, self.nchunk)


def _weight_source(w, none: bool = False) -> tuple:
    """A :class:`mnnjit.backends.cpu.gemm.conv.PackedWeights` as the kernel's weight source tuple (kind, panels,
    codes8, codes4, scale, offset, block); ``none``: an unused one typed like ``w``'s."""
    if none:
        return (np.int64(0), np.zeros(1, np.float32), np.zeros((1, 1), np.int8),
                np.zeros((1, 1), np.uint8), np.zeros((1, 1), np.float32),
                np.zeros((1, 1), np.float32), np.int64(1))
    return (np.int64(w.kind), w.panels, w.codes8, w.codes4, w.scale, w.offset,
            np.int64(w.block))
