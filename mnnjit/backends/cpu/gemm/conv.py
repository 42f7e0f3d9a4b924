"""Convolutions as GEMMs on the register-blocked micro-kernel of :mod:`mnnjit.backends.cpu.gemm.tile`.

``out[n, o, p] = act(sum_k W[o, k] * B[k, p] + bias[o])`` where ``B`` is the input itself for a
1x1 stride-1 convolution (NCHW rows are the GEMM's rows: no packing) or an im2col block built
per task for any other kernel/stride/padding/dilation (dilation 1: copied in contiguous runs from
``sh*sw`` phase planes of the padded input rows the task reads, :func:`_phases`). Weights are packed once, at plan build,
into panels of :data:`MR` rows (``[O/MR][K][MR]``, zero rows pad the last panel) as float32 or
float16; quantized weights (memory=low) stay as int8 / packed 4-bit codes and each task
dequantizes the panels of its row range into a float32 scratch once (cache resident).

One parallel launch per convolution: tasks are (image, row chunk, column chunk); a task walks
its columns in blocks of :data:`NR`, calling the micro-kernel for every panel of its rows (a 1x1
convolution whose input outgrows L2 runs each block's first panel on the tile that prefetches
the next block's input lines, ``ConvGemm.pf_b``).
Partial blocks (the last columns of a row, the last panel's missing rows) run through scratch
tiles. Activations are float32 or float16 storage (``uint16`` bits), output storage = input
storage. The bias and ``relu``/``relu6`` are applied in registers (other activations in a pass
over the finished block, still cache resident).

This module imports numba: import it lazily.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple

import numpy as np
from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
from numba import get_num_threads, njit, prange, types
from numba.extending import overload

from mnnjit.backends.cpu.fp16 import load, store
from mnnjit.backends.cpu.gemm.tile import (MR, NR, col_f16, col_f32, tile8_f16, tile8_f32, tile16r2_f16, tile16r2_f32,
                        tile16r4_f16, tile16r4_f32, tile_f16, tile_f32, tile_fh, tile_hf,
                        tile_pfb_f16, tile_pfb_f32)
from mnnjit.backends.cpu.cnn_steps import _act_code, _conv_out_hw, _keep_alive, act_inplace
from mnnjit.backends.cpu.quant import deq_panel_order, deq_panels

__all__ = ["PackedWeights", "ConvGemm", "gemm_panels", "pack_grouped", "MR", "NR"]

_IN_REGISTERS = (0, 1, 2)   # activation codes the micro-kernel applies itself


def _tile(a, b, bp, ldb, cp, ldc, k, biasp, act, rp, ldr):
    """Typed dispatch to the 16-column micro-kernel for the activations' storage (``b``'s dtype;
    ``a`` is the float32 weight panel); ``rp`` the address of a residual block (row stride ``ldr``)
    added before the activation, or 0."""


def _tile8(a, b, bp, ldb, cp, ldc, k, biasp, act, rp, ldr):
    """The 8-column micro-kernel (a row's last columns), typed like :func:`_tile`."""


def _dispatch(stub, f32_kernel, f16_kernel) -> None:
    @overload(stub, inline="always")
    def _ov(a, b, bp, ldb, cp, ldc, k, biasp, act, rp, ldr):
        kern = f16_kernel if b.dtype == types.uint16 else f32_kernel
        return lambda a, b, bp, ldb, cp, ldc, k, biasp, act, rp, ldr: kern(
            a.ctypes.data, bp, ldb, cp, ldc, k, biasp, act, rp, ldr)


def _dispatch_col(stub, f32_kernel, f16_kernel) -> None:
    @overload(stub, inline="always")
    def _ov(a, b, bp, ldb, cp, ldc, k, biasp, act):
        kern = f16_kernel if b.dtype == types.uint16 else f32_kernel
        return lambda a, b, bp, ldb, cp, ldc, k, biasp, act: kern(
            a.ctypes.data, bp, ldb, cp, ldc, k, biasp, act)


def _col(a, b, bp, ldb, cp, ldc, k, biasp, act):
    """The one-column kernel (``tile.col_*``), typed like :func:`_tile` (no residual)."""


def _tile_r4(a, b, bp, ldb, cp, ldc, k, biasp, act, rp, ldr):
    """The first 4 rows of a panel, 16 columns (``tile.tile16r4_*``), typed like :func:`_tile`."""


def _tile_r2(a, b, bp, ldb, cp, ldc, k, biasp, act, rp, ldr):
    """The first 2 rows of a panel, 16 columns (``tile.tile16r2_*``), typed like :func:`_tile`."""


def _tile_pfb(a, b, bp, ldb, cp, ldc, k, biasp, act, rp, ldr):
    """:func:`_tile` prefetching the next 16-column block of B (``tile.tile_pfb_*``)."""


def _tile_to(a, b, c, bp, ldb, cp, ldc, k, biasp, act, rp, ldr):
    """:func:`_tile` with B stored like ``b`` and C (and the residual) like ``c``: a fused
    kernel's float32 scratch from float16 activations, or the other way (fp32 compute inside a
    fused layer, float16 storage at its edges)."""


@overload(_tile_to, inline="always")
def _tile_to_ol(a, b, c, bp, ldb, cp, ldc, k, biasp, act, rp, ldr):
    bh, ch = b.dtype == types.uint16, c.dtype == types.uint16
    kern = (tile_f16 if ch else tile_hf) if bh else (tile_fh if ch else tile_f32)
    return lambda a, b, c, bp, ldb, cp, ldc, k, biasp, act, rp, ldr: kern(
        a.ctypes.data, bp, ldb, cp, ldc, k, biasp, act, rp, ldr)


_dispatch(_tile, tile_f32, tile_f16)
_dispatch(_tile_pfb, tile_pfb_f32, tile_pfb_f16)
_dispatch(_tile_r4, tile16r4_f32, tile16r4_f16)
_dispatch(_tile_r2, tile16r2_f32, tile16r2_f16)
_dispatch(_tile8, tile8_f32, tile8_f16)
_dispatch_col(_col, col_f32, col_f16)

#: a block's last columns up to this many run one column at a time (measured: a 6x8 tile costs
#: about three one-column kernels whatever its real width)
_COL_MAX = 2

#: 1x1 convolutions copy their input's 16-column blocks to contiguous rows from this many input
#: channels and this many weight panels per task (see ``ConvGemm.pack_b``)
PACK_MIN_K, PACK_MIN_PANELS = 256, 8


@njit(inline="always")
def _pack_tail(btile, bsrc, j0, K, t):
    """Pack the ``t`` last columns (from ``j0``) of ``bsrc`` [K, *] into ``btile`` [K, NR] storage:
    as :func:`_tail_block` reads them (up to :data:`_COL_MAX` columns: each column contiguous,
    column j at flat offset j*K; else rows of NR, zero padded)."""
    if t <= _COL_MAX:
        flat = btile.reshape(-1)
        for j in range(t):
            col = flat[j * K:(j + 1) * K]
            for k in range(K):
                col[k] = bsrc[k, j0 + j]
        return
    for k in range(K):
        br = btile[k]
        sr = bsrc[k, j0:j0 + t]
        for j in range(t):
            br[j] = sr[j]
        for j in range(t, NR):
            br[j] = 0


@njit(inline="always")
def line_offset(a):
    """Elements from the start of 1-D array ``a`` to its first 64-byte line boundary."""
    return ((64 - a.ctypes.data % 64) % 64) // a.itemsize


@njit(inline="always")
def _aligned_rows(rows, cols, dtype):
    """An uninitialised C-contiguous [rows, cols] array starting on a 64-byte line boundary."""
    raw = np.empty(rows * cols + 32, dtype)
    off = line_offset(raw)
    return raw[off:off + rows * cols].reshape((rows, cols))


@njit(inline="always")
def _copy_block(dst, bsrc, j0, K):
    """dst [K, NR] = the 16 columns of ``bsrc`` [K, *] from ``j0``."""
    for k in range(K):
        br = dst[k]
        sr = bsrc[k, j0:j0 + NR]
        for j in range(NR):
            br[j] = sr[j]


@njit(inline="always")
def _tail_block(ap, like, bp, ldb, ctile, K, biasp, reg_act, t, colmajor):
    """The ``t`` (< NR) last columns of a panel's block into the scratch tile ``ctile`` (row stride
    NR): with ``colmajor`` (columns packed by :func:`_pack_tail`, at ``bp``) one-column kernels
    for up to :data:`_COL_MAX` columns, else the 8- or 16-column tile on rows at ``bp`` with
    stride ``ldb`` (``like``: an array of the activations' storage type)."""
    if colmajor and t <= _COL_MAX:
        for j in range(t):
            _col(ap, like, bp + like.itemsize * j * K, 1, ctile.ctypes.data + ctile.itemsize * j,
                 NR, K, biasp, reg_act)
    elif t <= 8:
        _tile8(ap, like, bp, ldb, ctile.ctypes.data, NR, K, biasp, reg_act, 0, 0)
    else:
        _tile(ap, like, bp, ldb, ctile.ctypes.data, NR, K, biasp, reg_act, 0, 0)


class PackedWeights:
    """A convolution's (or fully connected layer's) ``[O, K]`` weights packed into micro-kernel
    panels: float32 or float16 values, or quantized codes dequantized per task.

    ``kind``: 0 float32 panels (``panels``), 2 int8 codes, 3 packed 4-bit codes (``codes``/``scale``/``offset``/``block`` as in
    :class:`.quant.QuantRows`), 4 per-channel int8 codes in panel order (:meth:`panel_ordered`)."""

    def __init__(self, o: int, k: int, panels: Optional[np.ndarray] = None, quant=None) -> None:
        self.shape = (int(o), int(k))
        self.npanel = -(-self.shape[0] // MR)
        #: float panels are laid out per group (see :func:`pack_grouped`)
        self.groups = 1
        if panels is not None:
            self.quant = None
            self.kind = 0
            self.panels = panels
            self.codes8 = np.zeros((1, 1), np.int8)
            self.codes4 = np.zeros((1, 1), np.uint8)
            self.scale = self.offset = np.zeros((1, 1), np.float32)
            self.block = 1
        else:
            self.quant = quant
            self.kind = 3 if quant.bits <= 4 else 2
            self.panels = np.zeros(1, np.float32)
            self.codes8 = quant.codes if self.kind == 2 else np.zeros((1, 1), np.int8)
            self.codes4 = quant.codes if self.kind == 3 else np.zeros((1, 1), np.uint8)
            self.scale, self.offset, self.block = quant.scale, quant.offset, int(quant.block)

    @classmethod
    def from_dense(cls, w: np.ndarray) -> "PackedWeights":
        """Pack a float ``[O, K]`` matrix into float32 panels."""
        w = np.asarray(w, np.float32)
        if w.ndim != 2:
            raise ValueError(f"weight matrix must be 2-D [O, K], got shape {w.shape}")
        o, k = w.shape
        npanel = -(-o // MR)
        padded = np.zeros((npanel * MR, k), np.float32)
        padded[:o] = w
        panels = np.ascontiguousarray(padded.reshape(npanel, MR, k).transpose(0, 2, 1)).reshape(-1)
        return cls(o, k, panels=panels)

    @classmethod
    def from_quant_rows(cls, q) -> "PackedWeights":
        """Keep a :class:`.quant.QuantRows`'s codes (dequantized panel by panel while running)."""
        return cls(q.shape[0], q.shape[1], quant=q)

    def panel_ordered(self) -> "PackedWeights":
        """Kind 4: these per-channel int8 codes (kind 2, one block per row) reordered like the
        float panels (``codes8`` [npanel, K*6], ``scale``/``offset`` [npanel*6, 1], zero past
        the last row), so a panel dequantizes in straight vector code
        (:func:`.quant.deq_panel_order`) with no interleaving pass. Same bytes as the rows."""
        O, K = self.shape
        if self.kind != 2 or self.block != K:
            raise ValueError("panel_ordered: needs per-channel int8 codes (kind 2, block = K)")
        pw = PackedWeights(O, K, panels=np.zeros(1, np.float32))
        rows = self.npanel * MR
        c = np.zeros((rows, K), np.int8)
        c[:O] = self.codes8
        pw.codes8 = np.ascontiguousarray(c.reshape(self.npanel, MR, K).transpose(0, 2, 1)
                                         ).reshape(self.npanel, K * MR)
        pw.scale = np.zeros((rows, 1), np.float32)
        pw.offset = np.zeros((rows, 1), np.float32)
        pw.scale[:O] = self.scale
        pw.offset[:O] = self.offset
        pw.kind, pw.block = 4, K
        return pw

    @property
    def nbytes(self) -> int:
        """Bytes held for the weights."""
        if self.kind == 0:
            return int(self.panels.nbytes)
        codes = self.codes8 if self.kind in (2, 4) else self.codes4
        return int(codes.nbytes + self.scale.nbytes + self.offset.nbytes)


@njit(inline="always")
def _deq_panels(kind, codes8, codes4, scale, offset, bs, g, og, q0, q1, K, dst):
    """dst = float32 panels q0..q1 of group g's quantized rows (rows past the group are zero).
    Row by row and block by block, so the scale/offset and the code kind are fixed in the inner
    loop (no division or branch per value); codes in panel order (kind 4) by
    :func:`.quant.deq_panel_order`."""
    if kind == 4:
        deq_panel_order(codes8, scale, offset, q0, q1, K, dst)
        return
    nb = K // bs
    for q in range(q0, q1):
        panel = dst[(q - q0) * K * MR:(q - q0 + 1) * K * MR]
        for r in range(MR):
            row = q * MR + r
            if row >= og:
                for k in range(K):
                    store(panel, k * MR + r, np.float32(0.0))
                continue
            o = g * og + row
            col = panel[r:]
            if kind == 2:
                cr = codes8[o]
                for blk in range(nb):
                    sc = scale[o, blk]
                    of = offset[o, blk]
                    cb = cr[blk * bs:(blk + 1) * bs]
                    db = col[blk * bs * MR:]
                    for k in range(bs):
                        store(db, k * MR, np.float32(cb[k]) * sc + of)
            else:
                cr4 = codes4[o]
                for blk in range(nb):
                    sc = scale[o, blk]
                    of = offset[o, blk]
                    db = col[blk * bs * MR:]
                    k0 = blk * bs
                    for k in range(bs):
                        byte = np.int32(cr4[(k0 + k) >> 1])
                        nib = (byte >> 4) if ((k0 + k) & 1) == 0 else (byte & 15)
                        store(db, k * MR, np.float32((nib ^ 8) - 8) * sc + of)


@njit(inline="always")
def _strided_copy(dst, src, n, step):
    """dst[j] = src[j * step] for j < n (slices indexed from 0: no negative-index checks, so the
    copies vectorise; the common steps written out)."""
    if step == 1:
        for j in range(n):
            dst[j] = src[j]
    elif step == 2:
        for j in range(n):
            dst[j] = src[2 * j]
    else:
        for j in range(n):
            dst[j] = src[j * step]


@njit(inline="always")
def _im2col(x, n, c0, C, H, W, kh, kw, sh, sw, pt, pl, dh, dw, OW, p0, pc, col):
    """col[k, j] = input value of column p0 + j for row k = (c, ky, kx) (zero in the padding)."""
    for c in range(C):
        xr = x[n, c0 + c]
        for ky in range(kh):
            for kx in range(kw):
                cr = col[(c * kh + ky) * kw + kx]
                oy = p0 // OW
                ox = p0 - oy * OW
                j = 0
                while j < pc:
                    seg = min(OW - ox, pc - j)
                    iy = oy * sh - pt + ky * dh
                    dst = cr[j:j + seg]
                    if iy < 0 or iy >= H:
                        for q in range(seg):
                            store(dst, q, np.float32(0.0))
                    else:
                        row = xr[iy * W:(iy + 1) * W]
                        xoff = kx * dw - pl
                        # columns q whose input x = a + q*sw lies in [0, W), a = ox*sw + xoff
                        a = ox * sw + xoff
                        lo = 0 if a >= 0 else min(seg, (-a + sw - 1) // sw)
                        hi = 0 if W - 1 - a < 0 else min(seg, (W - 1 - a) // sw + 1)
                        if hi < lo:
                            hi = lo
                        for q in range(lo):
                            store(dst, q, np.float32(0.0))
                        for q in range(hi, seg):
                            store(dst, q, np.float32(0.0))
                        start = (ox + lo) * sw + xoff
                        _strided_copy(dst[lo:hi], row[start:], hi - lo, sw)
                    j += seg
                    ox = 0
                    oy += 1


@njit(inline="always")
def _phases(x, n, c0, C, H, W, sh, sw, pt, pl, r0, nrow, WQ, ph):
    """ph[c, (r - r0) % sh, q, (r - r0) // sh, xq] = padded input row r (``r0 <= r < r0 + nrow``,
    a multiple of ``sh``), padded column ``xq*sw + q`` of channel ``c0 + c`` (zero in the padding):
    the rows a task's windows touch, split into ``sh*sw`` phase planes so that every im2col row
    segment becomes one contiguous copy. Raw storage values (zero bits are +0.0 in float16 too)."""
    for c in range(C):
        xr = x[n, c0 + c]
        for rr in range(nrow):
            iy = r0 + rr - pt
            py = rr % sh
            yq = rr // sh
            for q in range(sw):
                dst = ph[c, py, q, yq]
                WQ_ = dst.shape[0]
                if iy < 0 or iy >= H:
                    for j in range(WQ_):
                        dst[j] = 0
                    continue
                # phase columns j whose input column j*sw + q - pl lies in [0, W)
                a = q - pl
                lo = 0 if a >= 0 else min(WQ_, (-a + sw - 1) // sw)
                hi = 0 if W - 1 - a < 0 else min(WQ_, (W - 1 - a) // sw + 1)
                if hi < lo:
                    hi = lo
                for j in range(lo):
                    dst[j] = 0
                for j in range(hi, WQ_):
                    dst[j] = 0
                _strided_copy(dst[lo:hi], xr[iy * W + lo * sw + a:], hi - lo, sw)


@njit(inline="always")
def _im2col_phased(ph, C, kh, kw, sh, sw, OW, oy0, p0, pc, col):
    """:func:`_im2col`'s result from the phase planes of :func:`_phases` (built from padded row
    ``oy0*sh``): each output-row segment of a row ``k = (c, ky, kx)`` is a contiguous copy."""
    for c in range(C):
        for ky in range(kh):
            for kx in range(kw):
                cr = col[(c * kh + ky) * kw + kx]
                pp = ph[c, ky % sh, kx % sw]
                dy = ky // sh - oy0
                dx = kx // sw
                oy = p0 // OW
                ox = p0 - oy * OW
                j = 0
                while j < pc:
                    seg = min(OW - ox, pc - j)
                    src = pp[oy + dy, ox + dx:]
                    dst = cr[j:j + seg]
                    for q in range(seg):
                        dst[q] = src[q]
                    j += seg
                    ox = 0
                    oy += 1


@njit(inline="always")
def _finish_act(out_row, n, act):
    """Activations the micro-kernel does not apply (sigmoid, tanh, ...), in place."""
    act_inplace(out_row, n, act)


@njit(parallel=True, cache=True, error_model="numpy")
def _k_conv_gemm(x, w, kind, codes8, codes4, scale, offset, bs, bias, out, res, has_res,
                 H, W, kh, kw, sh, sw, pt, pl, dh, dw, OW, group, direct, act,
                 n_ochunk, n_pchunk, pc_max, o_outer, phased, pack_b, pf_b):
    """out[n, g*og + o, p] for every image/group; tasks = (image, group, row chunk, col chunk).

    ``x`` [N, C, H*W] and ``out`` [N, O, P] (float32 or uint16 half bits), ``w`` float panels
    (kind 0; for grouped convs the panels of group g start at panel g*npg) or quantized codes,
    ``bias`` padded to whole panels per group [group * npg * MR] float32. With ``has_res``:
    ``out = act(conv + res)`` (``res`` shaped like ``out``; a residual connection's add)."""
    N = x.shape[0]
    C = x.shape[1]
    O = out.shape[1]
    P = out.shape[2]
    cg = C // group
    og = O // group
    npg = (og + MR - 1) // MR
    K = cg * kh * kw
    reg_act = act if act <= 2 and not has_res else 0
    ntask = N * group * n_ochunk * n_pchunk
    for task in prange(ntask):
        pch = task % n_pchunk
        rest = task // n_pchunk
        och = rest % n_ochunk
        rest = rest // n_ochunk
        g = rest % group
        n = rest // group
        q0 = och * npg // n_ochunk
        q1 = (och + 1) * npg // n_ochunk
        p0 = pch * P // n_pchunk
        p1 = (pch + 1) * P // n_pchunk
        if q1 <= q0 or p1 <= p0:
            continue
        ctile = np.empty(MR * NR, out.dtype)
        btile = np.empty((K, NR), out.dtype)
        tmp = np.empty((MR if kind != 0 else 1, K), np.float32)
        # with ``pack_b``: each whole 16-column block copied to contiguous rows before the panels
        # use it (a 1x1 convolution's input rows are P apart: two cache lines per k-step)
        bblk = np.empty((K if pack_b else 1, NR), out.dtype)
        # quantized codes with panels outside and one column chunk: each panel dequantized
        # right before its column blocks, into one L2-resident panel instead of all the task's
        # panels up front (several chunks would dequantize every panel once per chunk: measured
        # slower, 2.0 -> 2.9 ms on a 256 -> 512 stride-2 layer of four 16-column chunks)
        per_panel = kind != 0 and o_outer and p1 - p0 <= pc_max
        if kind == 0:
            wp = w[(g * npg + q0) * K * MR:(g * npg + q1) * K * MR]
        elif per_panel:
            wp = np.empty(K * MR, w.dtype)
        else:
            wp = np.empty((q1 - q0) * K * MR, w.dtype)
            deq_panels(kind, codes8, codes4, scale, offset, bs, g, og, q0, q1, K, wp, tmp)
        # im2col rows padded to whole 64-byte lines from a line boundary: a 16-column block of a
        # row then never straddles two lines (measured 256->512 on 7x7, one 49-column chunk:
        # 2.06 ms with 49-value rows, 1.52 with 64)
        col = _aligned_rows(1 if direct else K, 1 if direct else -(-pc_max // NR) * NR, out.dtype)
        xg = x[n, g * cg:(g + 1) * cg]
        # phase planes of the padded rows this task's output rows oy0..oy1 read (dilation 1)
        oy0 = p0 // OW
        oy1 = (p1 - 1) // OW + 1
        nrow = (oy1 - 1 - oy0) * sh + kh if phased else 1
        nq = -(-nrow // sh) if phased else 1
        WQ = ((OW - 1) * sw + kw + sw - 1) // sw if phased else 1
        ph = np.empty((cg if phased else 1, sh if phased else 1, sw if phased else 1, nq, WQ),
                      out.dtype)
        if phased:
            _phases(x, n, g * cg, cg, H, W, sh, sw, pt, pl, oy0 * sh, nrow, WQ, ph)
        for cb in range(p0, p1, pc_max):
            pc = min(pc_max, p1 - cb)
            if direct:
                bsrc = xg[:, cb:cb + pc]
                ldb = P
                bptr = x.ctypes.data + x.itemsize * ((n * C + g * cg) * P + cb)
            else:
                if phased:
                    _im2col_phased(ph, cg, kh, kw, sh, sw, OW, oy0, cb, pc, col)
                else:
                    _im2col(x, n, g * cg, cg, H, W, kh, kw, sh, sw, pt, pl, dh, dw, OW, cb, pc,
                            col)
                bsrc = col[:, :pc]
                ldb = col.shape[1]
                bptr = col.ctypes.data
            nfull = pc // NR
            tail = pc - nfull * NR
            if tail:
                # the last columns, packed once for every panel
                _pack_tail(btile, bsrc, nfull * NR, K, tail)
            nblk = nfull + (1 if tail else 0)
            nq = q1 - q0
            # panels outside (o_outer) or column blocks outside, one call site of the tile code
            # (two inlined copies of every micro-kernel variant took ~10 % longer to compile)
            for it in range(nq * nblk):
                qw = q0
                if o_outer:
                    q = q0 + it // nblk
                    jb = it % nblk
                    packed = False
                    if per_panel:
                        qw = q
                        if jb == 0:
                            deq_panels(kind, codes8, codes4, scale, offset, bs, g, og, q, q + 1,
                                       K, wp, tmp)
                else:
                    jb = it // nq
                    q = q0 + it % nq
                    packed = pack_b and jb < nfull
                    if packed and q == q0:
                        _copy_block(bblk, bsrc, jb * NR, K)
                _one_tile(out, wp, q, qw, jb, nfull, tail, bptr, ldb, btile, ctile, bias,
                          n, g, og, npg, K, P, O, cb, reg_act, act, res, has_res, bblk, packed,
                          pf_b and q == q0 and jb + 1 < nfull)
        _keep_alive(tmp, tmp)
        _keep_alive(ctile, btile)
        _keep_alive(bblk, bblk)
        _keep_alive(col, wp)
        _keep_alive(ph, xg)


@njit(inline="always")
def _one_tile(out, wp, q, q0, jb, nfull, tail, bptr, ldb, btile, ctile, bias, n, g, og, npg, K,
              P, O, cb, reg_act, act, res, has_res, bblk, packed, pf_b=False):
    """Column block ``jb`` of panel ``q``: straight into ``out`` when whole (its B rows from
    ``bblk`` when ``packed``), else through the packed tail (``btile``) and a scratch tile
    (``ctile``). With ``has_res``: ``act(block + res)``, added in the micro-kernel's registers
    when the block goes straight into ``out`` (``act`` up to relu6), else in a pass over the block
    while it is in L1 (the micro-kernel then applied no activation)."""
    o0 = g * og + q * MR
    rows = min(MR, g * og + og - o0)
    ap = wp[(q - q0) * K * MR:(q - q0 + 1) * K * MR]
    biasp = bias.ctypes.data + 4 * (g * npg + q) * MR
    j0 = jb * NR
    if packed:
        bp = bblk.ctypes.data
        bl = NR
        t = NR
    elif jb < nfull:
        bp = bptr + out.itemsize * j0
        bl = ldb
        t = NR
    else:
        bp = btile.ctypes.data
        bl = NR
        t = tail
    # a partial last panel runs the 4- or 2-row kernel (its padding rows are zeros)
    kr = MR if rows > 4 else (4 if rows > 2 else 2)
    direct = t == NR and rows == kr
    fused = has_res and direct and act <= 2
    if t == NR:
        cp = ctile.ctypes.data
        ldc = NR
        rp = 0
        tact = reg_act
        if direct:
            off = out.itemsize * ((n * O + o0) * P + cb + j0)
            cp = out.ctypes.data + off
            ldc = P
            if fused:
                rp = res.ctypes.data + off
                tact = act
        if kr == MR and pf_b:
            _tile_pfb(ap, out, bp, bl, cp, ldc, K, biasp, tact, rp, P)
        elif kr == MR:
            _tile(ap, out, bp, bl, cp, ldc, K, biasp, tact, rp, P)
        elif kr == 4:
            _tile_r4(ap, out, bp, bl, cp, ldc, K, biasp, tact, rp, P)
        else:
            _tile_r2(ap, out, bp, bl, cp, ldc, K, biasp, tact, rp, P)
    else:
        _tail_block(ap, out, bp, bl, ctile, K, biasp, reg_act, t, True)
    if not direct:
        for r in range(rows):
            dst = out[n, o0 + r, cb + j0:cb + j0 + t]
            src = ctile[r * NR:r * NR + t]
            for j in range(t):
                dst[j] = src[j]
    if has_res and not fused:
        for r in range(rows):
            dst = out[n, o0 + r, cb + j0:cb + j0 + t]
            rs = res[n, o0 + r, cb + j0:cb + j0 + t]
            for j in range(t):
                store(dst, j, load(dst, j) + load(rs, j))
            act_inplace(dst, t, act)
    elif act > 2:
        for r in range(rows):
            _finish_act(out[n, o0 + r, cb + j0:cb + j0 + t], t, act)


@njit(parallel=True, cache=True, error_model="numpy")
def _k_conv_cols(x, kind, codes8, codes4, scale, offset, bs, bias, out, res, has_res, act,
                 n_ochunk, jc_max):
    """A 1x1 stride-1 convolution of quantized weights over many small images (``x`` [N, K, P],
    ``out``/``res`` [N, O, P], storage float32 or uint16 half bits; ``bias`` padded to whole
    panels) as ONE GEMM whose N*P columns are the images' pixels side by side: a transformer's
    projections, which a converter writes as 1x1 convolutions over ``seq`` one-pixel images,
    then dequantize each weight panel once per call (per image, the panels were dequantized
    once per pixel and the GEMM ran one column at a time).

    The columns are copied to ``bt`` [K, N*P] first (``bt[k, n*P + p] = x[n, k, p]``); tasks are
    row chunks, each dequantizing one panel at a time right before its column blocks (at most
    ``jc_max`` columns per pass, so a pass's columns stay in L2). Each block goes through a
    scratch tile (bias, and relu/relu6 without a residual, in registers), then ``res`` is
    added and other activations applied on the tile, and it is scattered to ``out``."""
    N = x.shape[0]
    K = x.shape[1]
    P = x.shape[2]
    O = out.shape[1]
    J = N * P
    npg = (O + MR - 1) // MR
    Jp = -(-J // NR) * NR
    bt = _aligned_rows(K, Jp, x.dtype)
    xf = x.reshape(-1)
    nkb = -(-K // 16)
    # flat indices: no array view per value (each costs atomic reference counting in a
    # parallel loop); 16-row bands of bt, so a task's writes fill whole lines
    btf = bt.reshape(-1)
    for kb in prange(nkb):
        k1 = min(K, kb * 16 + 16)
        for n in range(N):
            src = n * K * P
            for k in range(kb * 16, k1):
                dst = k * Jp + n * P
                for p in range(P):
                    btf[dst + p] = xf[src + k * P + p]
    reg_act = act if act <= 2 and not has_res else 0
    outf = out.reshape(-1)
    resf = res.reshape(-1)
    for task in prange(n_ochunk):
        q0 = task * npg // n_ochunk
        q1 = (task + 1) * npg // n_ochunk
        if q1 <= q0:
            continue
        wq = np.empty(K * MR, np.float32)
        tmp = np.empty((MR, K), np.float32)
        ctile = np.empty(MR * NR, out.dtype)
        btile = np.empty((K, NR), out.dtype)
        cp = ctile.ctypes.data
        for cb in range(0, J, jc_max):
            pc = min(jc_max, J - cb)
            nfull = pc // NR
            tail = pc - nfull * NR
            if tail:
                _pack_tail(btile, bt, cb + nfull * NR, K, tail)
            for q in range(q0, q1):
                deq_panels(kind, codes8, codes4, scale, offset, bs, 0, O, q, q + 1, K, wq, tmp)
                o0 = q * MR
                rows = min(MR, O - o0)
                kr = MR if rows > 4 else (4 if rows > 2 else 2)
                biasp = bias.ctypes.data + 4 * q * MR
                for jb in range(nfull + (1 if tail else 0)):
                    j0 = cb + jb * NR
                    t = NR
                    if jb < nfull:
                        bp = bt.ctypes.data + bt.itemsize * j0
                        if kr == MR:
                            _tile(wq, out, bp, Jp, cp, NR, K, biasp, reg_act, 0, 0)
                        elif kr == 4:
                            _tile_r4(wq, out, bp, Jp, cp, NR, K, biasp, reg_act, 0, 0)
                        else:
                            _tile_r2(wq, out, bp, Jp, cp, NR, K, biasp, reg_act, 0, 0)
                    else:
                        t = tail
                        _tail_block(wq, out, btile.ctypes.data, NR, ctile, K, biasp, reg_act,
                                    t, True)
                    # column j0 + j is pixel p of image n: out/res flat index (n*O + o)*P + p
                    n0 = j0 // P
                    p0 = j0 - n0 * P
                    if has_res:
                        n = n0
                        p = p0
                        for j in range(t):
                            i0 = (n * O + o0) * P + p
                            for r in range(rows):
                                store(ctile, r * NR + j,
                                      load(ctile, r * NR + j) + load(resf, i0 + r * P))
                            p += 1
                            if p == P:
                                p = 0
                                n += 1
                    if has_res or act > 2:
                        for r in range(rows):
                            act_inplace(ctile[r * NR:r * NR + t], t, act)
                    n = n0
                    p = p0
                    for j in range(t):
                        i0 = (n * O + o0) * P + p
                        for r in range(rows):
                            outf[i0 + r * P] = ctile[r * NR + j]
                        p += 1
                        if p == P:
                            p = 0
                            n += 1
        _keep_alive(wq, tmp)
        _keep_alive(ctile, btile)
    _keep_alive(bt, bt)


@njit(inline="always")
def gemm_panels(ap, rows, K, b, ncols, c, ldc, zbias, btile, ctile):
    """Serial float32 GEMM on the micro-kernel: ``c[r, j] = sum_k A[r, k] * B[k, j]`` for
    ``r < rows``, ``j < ncols``, where ``ap`` holds the packed panels of A (``ceil(rows / MR)``
    panels, see :class:`PackedWeights`), ``b`` is B as a C-contiguous float32 ``[K, >= ncols]``
    array, ``c`` a float32 array viewed flat with row stride ``ldc``. ``zbias`` is :data:`MR`
    zeros; ``btile`` ``[K, NR]`` and ``ctile`` ``[MR * NR]`` float32 scratch."""
    npanel = (rows + MR - 1) // MR
    nfull = ncols // NR
    tail = ncols - nfull * NR
    if tail:
        # the last columns packed once for every panel (one or two columns as contiguous
        # columns for the one-column kernel: a 49-tile Winograd GEMM has a one-value tail)
        _pack_tail(btile, b, nfull * NR, K, tail)
    bptr = b.ctypes.data
    ldb = b.shape[1]
    zb = zbias.ctypes.data
    cp = ctile.ctypes.data
    for jb in range(nfull + (1 if tail else 0)):
        j0 = jb * NR
        for q in range(npanel):
            a = ap[q * K * MR:(q + 1) * K * MR]
            r0 = q * MR
            nr = min(MR, rows - r0)
            if jb < nfull:
                if nr == MR:
                    tile_f32(a.ctypes.data, bptr + 4 * j0, ldb,
                             c.ctypes.data + 4 * (r0 * ldc + j0), ldc, K, zb, 0, 0, 0)
                    continue
                # a partial last panel: the 4- or 2-row kernel where it covers the rows
                if nr <= 2:
                    _tile_r2(a, c, bptr + 4 * j0, ldb, cp, NR, K, zb, 0, 0, 0)
                elif nr <= 4:
                    _tile_r4(a, c, bptr + 4 * j0, ldb, cp, NR, K, zb, 0, 0, 0)
                else:
                    tile_f32(a.ctypes.data, bptr + 4 * j0, ldb, cp, NR, K, zb, 0, 0, 0)
                t = NR
            else:
                _tail_block(a, c, btile.ctypes.data, NR, ctile, K, zb, 0, tail, True)
                t = tail
            for r in range(nr):
                dst = c[(r0 + r) * ldc + j0:(r0 + r) * ldc + j0 + t]
                src = ctile[r * NR:r * NR + t]
                for j in range(t):
                    dst[j] = src[j]


@njit(cache=True, error_model="numpy")
def _k_finish(y, act):
    """In-place activation of a float32 vector (the narrow path's epilogue)."""
    act_inplace(y, y.size, act)


_COL_BYTES = 256 * 1024      # im2col block budget (half of L2)
#: the im2col block budget of deep convolutions (K >= _DEEP_K: ResNet's stride-2 3x3 layers),
#: whose weights do not fit L2 anyway: few large blocks, each weight panel streamed once per
#: block (with 64-byte rows, standalone 1 thread: 128->256 on 28x28 1.67 -> 1.47 ms, 64->128 on
#: 56x56 1.61 -> 1.51, 256->512 on 14x14 1.61 -> 1.56; in ResNet-18 forwards the first two
#: 1.64 -> 1.58 and 1.75 -> 1.54 ms at 1 thread, 0.84 -> 0.82 and 1.07 -> 0.89 at 2, while the
#: 7x7 output got slower at 2 threads, 1.01 -> 1.08: outputs under 4 column blocks keep
#: _COL_BYTES, as do the stems, K = 27 and 147, slower cold with large blocks)
_DEEP_COL_BYTES, _DEEP_K = 1 << 20, 256
_L2_BYTES = 512 * 1024       # L2 per core (AMD Zen 3 here)


class ConvGemm:
    """One convolution prepared for :func:`_k_conv_gemm`: packed weights, padded bias, attributes
    and the task split, for a fixed input shape. ``run(x, out)`` computes into ``out``."""

    def __init__(self, weights: PackedWeights, bias: Optional[np.ndarray], in_shape: Sequence[int],
                 kernel: Tuple[int, int], stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1),
                 group: int = 1, act: str = "", threads: Optional[int] = None) -> None:
        if len(in_shape) != 4:
            raise ValueError(f"conv2d: input must be NCHW (4-D), got shape {list(in_shape)}")
        N, C, H, W = (int(v) for v in in_shape)
        kh, kw = kernel
        O, K = weights.shape
        if C % group or O % group:
            raise ValueError(f"conv2d: group {group} does not divide channels in {C} / out {O}")
        cg, og = C // group, O // group
        if K != cg * kh * kw:
            raise ValueError(f"conv2d: weight has {K} columns, expected C/group*kh*kw = "
                             f"{cg}*{kh}*{kw} = {cg * kh * kw}")
        if weights.kind == 0 and weights.groups != group:
            raise ValueError(f"weights packed for {weights.groups} group(s), the convolution has "
                             f"{group} (use pack_grouped)")
        if weights.kind != 0 and group != 1:
            raise ValueError("quantized weights run ungrouped convolutions only")
        self.w = weights
        self.kernel, self.stride, self.pads, self.dilation = (kh, kw), tuple(stride), tuple(pads), tuple(dilation)
        self.group, self.act = int(group), _act_code(act)
        oh, ow = _conv_out_hw(H, W, kh, kw, stride, pads, dilation)
        self.in_shape, self.out_shape = (N, C, H, W), (N, O, oh, ow)
        npg = -(-og // MR)
        b = np.zeros(group * npg * MR, np.float32)
        if bias is not None:
            bias = np.asarray(bias, np.float32).reshape(-1)
            if bias.size != O:
                raise ValueError(f"conv2d: bias has {bias.size} values, expected {O}")
            for g in range(group):
                b[g * npg * MR:g * npg * MR + og] = bias[g * og:(g + 1) * og]
        self.bias = b
        P = oh * ow
        #: (H, W, kh, kw, sh, sw, pt, pl, dh, dw, OW) the kernel runs with. A column plane
        #: [N, C, L, 1] under a (k, 1) kernel (a Conv1d as MNN runs it) is the same memory as the
        #: row plane [N, C, 1, L] under a (1, k) kernel: it runs as that, so im2col copies rows
        #: of L values instead of L one-value segments (a dilated 64 -> 64 Conv1d on L = 8192:
        #: 20 -> ~1.5 ms)
        self.geometry = (H, W, kh, kw, int(stride[0]), int(stride[1]), int(pads[0]), int(pads[2]),
                         int(dilation[0]), int(dilation[1]), ow)
        if W == 1 and kw == 1 and ow == 1 and pads[2] == pads[3] == 0 and H > 1:
            self.geometry = (1, H, 1, kh, 1, int(stride[0]), 0, int(pads[0]), 1, int(dilation[0]), oh)
        gk, gs, gd = self.geometry[2:4], self.geometry[4:6], self.geometry[8:10]
        self.direct = kh == kw == 1 and tuple(stride) == (1, 1) and not any(pads)
        #: im2col from phase planes of the padded input (contiguous copies): dilation 1 and
        #: every phase used (a 1x1 stride-2 kernel reads a quarter of its input: direct gather)
        self.phased = bool(not self.direct and gd == (1, 1) and gk[0] >= gs[0] and gk[1] >= gs[1])
        budget = _DEEP_COL_BYTES if K >= _DEEP_K and P >= 4 * NR else _COL_BYTES
        self.pc_max = P if self.direct else max(NR, min(P, (budget // (4 * K)) // NR * NR))
        threads = threads or get_num_threads()
        # split columns first (weights are shared), rows when there are few columns
        units = N * group
        n_p = max(1, min(-(-P // NR), -(-threads // units)))
        n_o = 1
        if units * n_p < threads:
            n_o = max(1, min(npg, -(-threads // (units * n_p))))
        if weights.kind != 0 or (og * K > K * P and npg >= threads // units):
            # row chunks when the weights outweigh the columns (small planes: each task reads
            # only its panels, and no task gets a ragged column split with two tails) and for
            # quantized weights (each task dequantizes its panels once)
            n_o, n_p = max(1, min(npg, -(-threads // units))), 1
        self.n_o, self.n_p = n_o, n_p
        # loop order: panels outside (each weight panel read once, the column block streamed
        # from L2) when all weights do not fit in L2 but a column block does; else columns outside
        isz = 4
        b_bytes = K * min(self.pc_max, -(-P // n_p)) * isz
        self.o_outer = bool(O * K * isz > _L2_BYTES // 2 and b_bytes <= _L2_BYTES // 2)
        # an im2col convolution whose output exceeds L2 (ResNet's stem: 3.2 MB) writes each
        # panel's rows as long sequential streams with panels outside: 3.2-3.3 -> 3.0-3.1 ms there
        if not self.direct and O * P * isz > _L2_BYTES and b_bytes <= _L2_BYTES // 2:
            self.o_outer = True
        # a 1x1 convolution whose weights outgrow L2 (panels outside so far), with long weight
        # rows used by many panels: each 16-column block of its input is copied to contiguous
        # rows once per task and read from there by every panel, columns outside (MobileNetV2's
        # 7x7 layers, K = 320-960, in forwards: 0.02-0.10 ms less each, 0.28 ms in all; its
        # 14x14 layers, whose weights fit L2, got 0.01-0.02 ms slower each: not packed)
        self.pack_b = bool(self.direct and self.o_outer and K >= PACK_MIN_K
                           and npg // n_o >= PACK_MIN_PANELS)
        if self.pack_b:
            self.o_outer = False
        #: a 1x1 convolution whose input outgrows L2, columns outside: the first panel of each
        #: column block prefetches the next block's input lines, one per k-step (MobileNetV2's
        #: 96 -> 24 on 56x56 in forwards: 0.37-0.45 -> 0.27-0.33 ms at 1 thread, 0.19 -> 0.14
        #: at 2; 192 -> 32 on 28x28, 0.6 MB: unchanged)
        self.pf_b = bool(self.direct and not self.o_outer and not self.pack_b
                         and K * P * isz > _L2_BYTES)
        # a 1x1 convolution of a few pixels (a classifier) with 8-bit codes: the codes are read
        # once by the quantized GEMV (no dequantized panels, which would cost more than the GEMV)
        self.narrow = bool(self.direct and weights.kind == 2 and group == 1 and N * P <= 8)
        #: a 1x1 convolution of quantized weights over several images of a few pixels each (a
        #: transformer's projections: ``seq`` one-pixel images) runs as one GEMM over the images'
        #: pixels (:func:`_k_conv_cols`): each weight panel dequantized once per call, not per image
        self.cols = bool(self.direct and weights.kind != 0 and group == 1 and not self.narrow
                         and N > 1 and P < NR)
        if self.cols:
            self.n_o, self.n_p = max(1, min(npg, threads)), 1
            self.pc_max = max(NR, (_L2_BYTES // (isz * K)) // NR * NR)
        if weights.kind == 2 and weights.block == K and not self.narrow:
            # per-channel int8 codes in panel order: each panel dequantizes ~5x faster
            self.w = weights.panel_ordered()

    def _run_narrow(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        N, C = self.in_shape[:2]
        O = self.out_shape[1]
        xf = x.view(np.float16).astype(np.float32) if x.dtype == np.uint16 else x
        cols = np.ascontiguousarray(xf.reshape(N, C, -1).transpose(1, 0, 2).reshape(C, -1))
        y = self.w.quant.matmul(cols) + self.bias[:O, None]
        y = np.ascontiguousarray(y.reshape(O, N, -1).transpose(1, 0, 2), np.float32)
        if self.act:
            _k_finish(y.reshape(-1), self.act)
        if out.dtype == np.uint16:
            out.view(np.float16).reshape(y.shape)[...] = y
        else:
            out.reshape(y.shape)[...] = y
        return out

    def run(self, x: np.ndarray, out: np.ndarray, res: Optional[np.ndarray] = None) -> np.ndarray:
        """Compute the convolution of ``x`` (storage array: float32 or uint16 half bits) into
        ``out`` (same storage, shape :attr:`out_shape`). With ``res`` (same storage and shape as
        ``out``): ``out = act(conv + res)``, a residual connection in the epilogue."""
        if self.narrow:
            if res is not None:
                raise ValueError("conv2d: the narrow quantized path takes no residual")
            return self._run_narrow(x, out)
        if res is not None:
            res = np.ascontiguousarray(res)   # a storage type unlike out's is refused by launch
        kernel, args = self.launch(x, out, res)
        kernel(*args)
        return out

    def launch(self, x: np.ndarray, out: np.ndarray,
               res: Optional[np.ndarray] = None) -> Optional[Tuple[Callable, tuple]]:
        """The kernel and arguments of :meth:`run` on these arrays, for :func:`.launch.bind_launch`
        (None on the narrow quantized path, which is not one kernel)."""
        if self.narrow:
            return None
        N, C = self.in_shape[:2]
        H, W, kh, kw, sh, sw, pt, pl, dh, dw, OW = self.geometry
        wt = self.w
        o3 = out.reshape(N, self.out_shape[1], -1)
        if res is not None and res.shape != out.shape:
            raise ValueError(f"conv2d: residual shape {list(res.shape)} is not the output's "
                             f"{list(out.shape)}")
        if res is not None and (res.dtype != out.dtype or not res.flags.c_contiguous):
            raise ValueError(f"conv2d: the residual must be a C-contiguous {out.dtype} array like "
                             f"the output (got {res.dtype}, contiguous={res.flags.c_contiguous})")
        if self.cols:
            return _k_conv_cols, (x.reshape(N, C, H * W), wt.kind, wt.codes8, wt.codes4,
                                  wt.scale, wt.offset, wt.block, self.bias, o3,
                                  o3 if res is None else res.reshape(o3.shape), res is not None,
                                  self.act, self.n_o, self.pc_max)
        return _k_conv_gemm, (x.reshape(N, C, H * W), wt.panels, wt.kind, wt.codes8, wt.codes4,
                              wt.scale, wt.offset, wt.block, self.bias, o3,
                              o3 if res is None else res.reshape(o3.shape), res is not None,
                              H, W, kh, kw, sh, sw, pt, pl, dh, dw, OW, self.group,
                              self.direct, self.act, self.n_o, self.n_p, self.pc_max,
                              self.o_outer, self.phased, self.pack_b, self.pf_b)


def pack_grouped(w: np.ndarray, group: int) -> PackedWeights:
    """Pack ``[O, K]`` weights of a grouped convolution: each group's rows padded to whole panels."""
    w = np.asarray(w, np.float32)
    O, K = w.shape
    og = O // group
    npg = -(-og // MR)
    padded = np.zeros((group, npg * MR, K), np.float32)
    padded[:, :og] = w.reshape(group, og, K)
    pw = PackedWeights.from_dense(padded.reshape(group * npg * MR, K))
    pw.shape = (O, K)
    pw.npanel = group * npg
    pw.groups = group
    return pw
