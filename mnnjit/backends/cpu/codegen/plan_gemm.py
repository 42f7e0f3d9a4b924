"""Matrix products for the whole-plan kernel (:mod:`.whole_plan`) on the packed GEMM micro-kernel.

A transformer's projections (``[tokens, width] @ [width, n]``), its attention products and a
ViT's patch embedding are too large for loops written out per step: :func:`gemm` runs them on
the register-blocked micro-kernel of :mod:`mnnjit.backends.cpu.gemm.tile` (through
:func:`~mnnjit.backends.cpu.gemm.conv.gemm_panels`). The left operand (the activations) is
packed into panels of :data:`MR` rows per call, the right one is read in place as ``[k, n]``
rows (constant weights sit that way in the plan's blob), and bias and activation are applied in
one pass over each finished block of rows while it is in cache.

:func:`patch_im2col` lays out a convolution whose stride equals its kernel (no padding, no
dilation: a ViT's patch embedding) as the ``[C*kh*kw, OH*OW]`` right operand, so the
convolution is one :func:`gemm` with the weights ``[O, C*kh*kw]`` on the left.

These are compiled once (disk cache); the generated kernels call the GEMM through the symbols
of :mod:`.plan_gemm_par` (threaded or not), so their compile time does not grow with the GEMMs.

This module imports numba: import it lazily.
"""
from __future__ import annotations

from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
import numpy as np
from numba import njit

from mnnjit.backends.cpu.gemm.conv import MR, NR, _pack_tail, _tail_block, _tile_r2, _tile_r4
from mnnjit.backends.cpu.gemm.tile import tile_f32

__all__ = ["gemm", "gemm_batched", "pack_a", "pack_b", "patch_im2col", "scratch_size", "MR", "NR"]

#: depth of one pass over the weights: a 16-column block of B of this many rows (16 KB) stays in
#: L1 while every panel of the row block runs over it; deeper products (a feed-forward layer's
#: 2048) accumulate their passes in C through the micro-kernel's residual input
KC = 256

#: rows of C finished per pass: the A panels of a block of rows stay in L2 while every column
#: block runs over them, and the bias / activation pass finds the block's rows in cache
ROW_BLOCK = 96


def scratch_size(m: int, k: int) -> int:
    """Float32 elements of :func:`gemm`'s scratch for an ``m x k`` left operand."""
    rows = min(m, ROW_BLOCK)
    return ((rows + MR - 1) // MR) * MR * k + k * NR + MR * NR + MR + 64


@njit(cache=True, nogil=True, error_model="numpy", boundscheck=False)
def gemm(a, ta, m, k, b, bpk, n, c, bias, bmode, act, scratch):
    """``c[i, j] = act(sum_k A[i, k] * b[k, j] + bias)`` for ``i < m``, ``j < n``, where the
    bias is none (``bmode`` 0), ``bias[j]`` (1: a linear layer's) or ``bias[i]`` (2: a
    convolution's, its rows being output channels): ``A`` is ``a`` read as ``[m, k]`` (``ta`` 0),
    ``[k, m]`` (1; both flat C order) or as the panels of :func:`pack_a` (2: constant weights);
    ``b`` is flat ``[k, n]`` (with ``bpk``: laid out by :func:`pack_b`), ``c`` flat ``[m, n]``;
    ``act`` 0 none, 1 relu, 2 relu6 (NaN stays NaN, as the reference's ``maximum`` / ``clip``).
    ``scratch`` holds :func:`scratch_size` float32 values."""
    gemm_cols(a, ta, m, k, b, bpk, n, 0, n, c, bias, bmode, act, scratch)
    return 0


@njit(inline="always")
def gemm_cols(a, ta, m, k, b, bpk, ldn, jc, n, c, bias, bmode, act, scratch):
    """:func:`gemm`'s columns ``jc .. jc + n - 1`` of a product ``ldn`` columns wide (``b`` and
    ``c`` as :func:`gemm` takes them for ``ldn`` columns; ``jc`` a multiple of :data:`NR`): one
    thread's share of a product split by columns (:mod:`.plan_gemm_par`)."""
    rows_max = min(m, ROW_BLOCK)
    npan_max = (rows_max + MR - 1) // MR
    psize = npan_max * MR * k
    ap = scratch[:psize]
    btile = scratch[psize:psize + k * NR].reshape((k, NR))
    ctile = scratch[psize + k * NR:psize + k * NR + MR * NR]
    zb = scratch[psize + k * NR + MR * NR:psize + k * NR + MR * NR + MR]
    for r in range(MR):
        zb[r] = np.float32(0)
    for i0 in range(0, m, ROW_BLOCK):
        rows = min(ROW_BLOCK, m - i0)
        npan = (rows + MR - 1) // MR
        cb = c[i0 * ldn:(i0 + rows) * ldn]
        if ta == 2:  # already panels (ROW_BLOCK is a multiple of MR: the block's start one)
            _panels(a[i0 * k:(i0 + npan * MR) * k], rows, k, b, bpk, ldn, jc, n, cb, zb, btile, ctile)
            _epilogue(cb, rows, ldn, jc, n, i0, bias, bmode, act)
            continue
        # the block's rows of A as panels: ap[q*k*MR + kk*MR + r] = A[i0 + q*MR + r, kk]
        for q in range(npan):
            base = q * k * MR
            for r in range(MR):
                i = i0 + q * MR + r
                if i < i0 + rows:
                    if ta:
                        for kk in range(k):
                            ap[base + kk * MR + r] = a[kk * m + i]
                    else:
                        src = a[i * k:(i + 1) * k]
                        for kk in range(k):
                            ap[base + kk * MR + r] = src[kk]
                else:
                    for kk in range(k):
                        ap[base + kk * MR + r] = np.float32(0)
        _panels(ap, rows, k, b, bpk, ldn, jc, n, cb, zb, btile, ctile)
        _epilogue(cb, rows, ldn, jc, n, i0, bias, bmode, act)
    return 0


@njit(inline="always")
def _epilogue(cb, rows, ldn, jc, n, i0, bias, bmode, act):
    """Bias and activation on ``rows`` finished rows of C (row ``i`` is C's ``i0 + i``; its
    columns ``jc .. jc + n - 1`` of ``ldn``)."""
    if bmode == 0 and act == 0:
        return
    for i in range(rows):
        row = cb[i * ldn + jc:i * ldn + jc + n]
        if bmode == 1:
            bj = bias[jc:jc + n]
            for j in range(n):
                row[j] += bj[j]
        elif bmode == 2:
            bi = bias[i0 + i]
            for j in range(n):
                row[j] += bi
        if act == 1:
            for j in range(n):
                t = row[j]
                row[j] = t if not (t < np.float32(0)) else np.float32(0)
        elif act == 2:
            for j in range(n):
                t = row[j]
                t = t if not (t < np.float32(0)) else np.float32(0)
                row[j] = t if not (t > np.float32(6)) else np.float32(6)


def pack_a(w: np.ndarray) -> np.ndarray:
    """Constant ``[m, k]`` weights as :func:`gemm` reads a left operand with ``ta`` 2: panels of
    :data:`MR` rows, ``[ceil(m / MR)][k][MR]`` (zero rows pad the last). Flat float32."""
    w = np.ascontiguousarray(w, np.float32)
    m, k = w.shape
    npan = (m + MR - 1) // MR
    padded = np.zeros((npan * MR, k), np.float32)
    padded[:m] = w
    return np.ascontiguousarray(padded.reshape(npan, MR, k).transpose(0, 2, 1)).reshape(-1)


def pack_b(w: np.ndarray) -> np.ndarray:
    """Constant ``[k, n]`` weights as :func:`gemm` reads them fastest (``bpk``): each whole
    16-column block's ``k`` rows contiguous (``[n // 16][k][16]``), then the last ``n % 16``
    columns as ``[k][n % 16]`` rows. Flat float32."""
    w = np.ascontiguousarray(w, np.float32)
    k, n = w.shape
    nfull = n // NR
    blocks = w[:, :nfull * NR].reshape(k, nfull, NR).transpose(1, 0, 2).reshape(-1)
    return np.concatenate([blocks, w[:, nfull * NR:].reshape(-1)])


@njit(inline="always")
def _panels(ap, rows, K, b, bpk, ldn, jc, n, c, zb, btile, ctile):
    """``c[:rows, jc:jc + n] = A @ B[:, jc:jc + n]`` for the packed panels ``ap`` of A (``rows``
    x ``K``), ``b`` flat B (``[K, ldn]`` rows, or with ``bpk`` the blocks of :func:`pack_b`),
    ``c`` flat with row stride ``ldn``; ``jc`` a multiple of :data:`NR`: whole 6x16 tiles
    straight into ``c`` in passes of :data:`KC` over ``K``, a partial last panel and the last
    ``n % 16`` columns through the scratch tile ``ctile`` (``btile``: the packed tail columns)."""
    npf = rows // MR
    nfull = n // NR
    tail = n - nfull * NR
    jb0 = jc // NR
    apt = ap.ctypes.data
    bptr = b.ctypes.data
    cptr = c.ctypes.data
    zp = zb.ctypes.data
    ldb = NR if bpk else ldn
    for k0 in range(0, K, KC):
        kc = min(KC, K - k0)
        for jb in range(nfull):
            bp = bptr + 4 * (((jb0 + jb) * K + k0) * NR if bpk else k0 * ldn + jc + jb * NR)
            for q in range(npf):
                cp = cptr + 4 * (q * MR * ldn + jc + jb * NR)
                tile_f32(apt + 4 * (q * K * MR + k0 * MR), bp, ldb, cp, ldn, kc, zp, 0, cp if k0 else 0, ldn)
    if tail:
        if bpk:
            t0 = (jb0 + nfull) * NR * K
            _pack_tail(btile, b[t0:t0 + K * tail].reshape((K, tail)), 0, K, tail)
        else:
            _pack_tail(btile, b[:K * ldn].reshape((K, ldn)), jc + nfull * NR, K, tail)
    cs = ctile.ctypes.data
    for q in range(npf + (1 if rows > npf * MR else 0)):
        a = ap[q * K * MR:(q + 1) * K * MR]
        r0 = q * MR
        nr = min(MR, rows - r0)
        for jb in range(nfull + (1 if tail else 0)):
            j0 = jc + jb * NR
            if jb < nfull:
                if nr == MR:
                    continue  # done above
                bp = bptr + 4 * ((jb0 + jb) * K * NR if bpk else j0)
                if nr <= 2:
                    _tile_r2(a, c, bp, ldb, cs, NR, K, zp, 0, 0, 0)
                elif nr <= 4:
                    _tile_r4(a, c, bp, ldb, cs, NR, K, zp, 0, 0, 0)
                else:
                    tile_f32(a.ctypes.data, bp, ldb, cs, NR, K, zp, 0, 0, 0)
                t = NR
            else:
                _tail_block(a, c, btile.ctypes.data, NR, ctile, K, zp, 0, tail, True)
                t = tail
            for r in range(nr):
                dst = c[(r0 + r) * ldn + j0:(r0 + r) * ldn + j0 + t]
                src = ctile[r * NR:r * NR + t]
                for j in range(t):
                    dst[j] = src[j]


@njit(cache=True, nogil=True, error_model="numpy", boundscheck=False)
def patch_im2col(x, c, h, w, kh, kw, col):
    """``col[(ci*kh + y)*kw + z, p*ow + q] = x[ci, p*kh + y, q*kw + z]``: the right operand of a
    convolution with stride ``(kh, kw)``, no padding and no dilation, on one image ``x`` (flat
    ``[c, h, w]``) with output ``oh = h // kh`` by ``ow = w // kw``."""
    oh, ow = h // kh, w // kw
    npix = oh * ow
    for ci in range(c):
        for y in range(kh):
            for z in range(kw):
                dst = col[((ci * kh + y) * kw + z) * npix:((ci * kh + y) * kw + z + 1) * npix]
                for p in range(oh):
                    src = (ci * h + p * kh + y) * w + z
                    for q in range(ow):
                        dst[p * ow + q] = x[src + q * kw]
    return 0


@njit(cache=True, nogil=True, error_model="numpy", boundscheck=False)
def gemm_batched(a, m, k, b, n, c, nb, scratch):
    """``nb`` products ``c[t] = a[t] @ b[t]`` on :func:`gemm` (flat ``[m, k]``, ``[k, n]``,
    ``[m, n]`` each; ``scratch`` of :func:`scratch_size` for ``m x k``)."""
    for q in range(nb):
        gemm(a[q * m * k:(q + 1) * m * k], 0, m, k, b[q * k * n:(q + 1) * k * n], False, n,
             c[q * m * n:(q + 1) * m * n], scratch, 0, 0, scratch)
    return 0
