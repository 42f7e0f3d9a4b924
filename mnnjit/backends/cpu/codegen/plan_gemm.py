"""Matrix products for the whole-plan kernel (:mod:`.whole_plan`) on the packed GEMM micro-kernel.

A transformer's projections (``[tokens, width] @ [width, n]``), its attention products and a
ViT's patch embedding are too large for loops written out per step: :func:`gemm` runs them on
the register-blocked 6x16 micro-kernel :func:`.plan_tile.tile_pf_f32`. The left operand (the
activations) is read in place, six rows at a time (only a last partial panel is copied); the
right one is constant weights laid out once in 16-column blocks (:func:`pack_b`, in the plan's
blob; the next block is prefetched while the current one is used) or computed rows read in
place; a bias per column and relu / relu6 are applied on the registers of the last pass over
``k`` (a bias per row, a convolution's, in one pass over each finished block of rows).

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

from mnnjit.backends.cpu.gemm.conv import MR as _TILE_MR, NR as _TILE_NR, _pack_tail, _tail_block, _tile_r2, _tile_r4
from mnnjit.backends.cpu.codegen.plan_gemm_layout import MR, NR, ROW_BLOCK, pack_a, pack_b, scratch_size
from mnnjit.backends.cpu.gemm.tile import tile16r2_f32, tile16r4_f32, tile_f32
from mnnjit.backends.cpu.codegen.plan_tile import tile_pf_f32
from mnnjit.backends.cpu.runtime.intrinsics import dot_f32

__all__ = ["gemm", "gemm_batched", "pack_a", "pack_b", "patch_im2col", "scratch_size", "MR", "NR"]

if (MR, NR) != (_TILE_MR, _TILE_NR):   # (the layouts are written for the micro-kernel's tile)
    raise ImportError(f"plan_gemm_layout's MR, NR {(MR, NR)} are not the micro-kernel's {(_TILE_MR, _TILE_NR)}")

#: depth of one pass over the weights: a 16-column block of B of this many rows (16 KB) stays in
#: L1 while every panel of the row block runs over it; deeper products (a feed-forward layer's
#: 2048) accumulate their passes in C through the micro-kernel's residual input
KC = 256



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
    thread's share of a product split by columns (:mod:`.plan_gemm_par`).

    A is read in place (:func:`.plan_tile.tile_pf_f32` takes its rows at any strides); only a
    last partial panel (``m % 6`` rows) is copied, zero padded, into the scratch."""
    psize = ((min(m, ROW_BLOCK) + MR - 1) // MR) * MR * k
    ap = scratch[:MR * k]
    btile = scratch[psize:psize + k * NR].reshape((k, NR))
    ctile = scratch[psize + k * NR:psize + k * NR + MR * NR]
    zb = scratch[psize + k * NR + MR * NR:psize + k * NR + MR * NR + MR]
    for r in range(MR):
        zb[r] = np.float32(0)
    # element (i, kk) of A at a[i * sr + kk * sk]; panel q starts at a[q * ps]
    if ta == 0:
        sr, sk, ps = k, 1, MR * k
    elif ta == 1:
        sr, sk, ps = 1, m, MR
    else:
        sr, sk, ps = 1, MR, MR * k
    nfull = n // NR
    tail = n - nfull * NR
    if tail:
        if bpk:
            t0 = (jc // NR + nfull) * NR * k
            _pack_tail(btile, b[t0:t0 + k * tail].reshape((k, tail)), 0, k, tail)
        else:
            _pack_tail(btile, b[:k * ldn].reshape((k, ldn)), jc + nfull * NR, k, tail)
    npf = m // MR
    rem = m - npf * MR
    if rem:
        if ta == 2:  # (packed panels: the last one is zero padded already)
            ap = a[npf * MR * k:(npf + 1) * MR * k]
        else:
            # the last rows as a zero-padded panel: ap[kk*MR + r] = A[npf*MR + r, kk]
            for r in range(MR):
                i = npf * MR + r
                for kk in range(k):
                    ap[kk * MR + r] = a[i * sr + kk * sk] if r < rem else np.float32(0)
    # that panel runs with the whole ones, on each block of B while it is in L1 (alone after
    # them, it read every block again from L2 or L3), into a scratch tile per block: one tile
    # reused when one pass covers K, else one per block accumulating the passes (when they fit
    # the scratch's free part; else the panel runs alone at the end)
    acc_stride = 0 if k <= KC else MR * NR
    joint = rem > 0 and (k <= KC or MR * k + nfull * MR * NR <= psize)
    acc = ctile if acc_stride == 0 else scratch[MR * k:MR * k + nfull * MR * NR + MR * NR]
    # a bias per column and the activation on the registers of the whole tiles' last pass
    fused = bmode != 2
    qb = ROW_BLOCK // MR
    nblk = max(1, (npf + qb - 1) // qb)
    for blk in range(nblk):
        q0, q1 = blk * qb, min(npf, (blk + 1) * qb)
        rr = rem if joint and blk == nblk - 1 else 0
        _full(a, sr, sk, ps, q0, q1, k, b, bpk, ldn, jc, nfull, c, bias if bmode == 1 else zb, bmode == 1,
              act if fused else 0, ap, rr, acc, acc_stride, npf * MR, zb)
        i0 = q0 * MR
        cb = c[i0 * ldn:q1 * MR * ldn]
        if tail and q1 > q0:
            _tail_cols(a, sr, sk, ps, q0, q1, k, ldn, jc + nfull * NR, tail, c, btile, ctile)
            if fused:
                _epilogue(cb, q1 * MR - i0, ldn, jc + nfull * NR, tail, i0, bias, bmode, act)
        if not fused:
            _epilogue(cb, q1 * MR - i0, ldn, jc, n, i0, bias, bmode, act)
    if rem:
        cb = c[npf * MR * ldn:m * ldn]
        if not joint:
            _part(ap, rem, k, b, bpk, ldn, jc, 0, n, cb, zb, btile, ctile)
            _epilogue(cb, rem, ldn, jc, n, npf * MR, bias, bmode, act)
        else:
            if tail:
                _part(ap, rem, k, b, bpk, ldn, jc, nfull, n, cb, zb, btile, ctile)
                if fused:
                    _epilogue(cb, rem, ldn, jc + nfull * NR, tail, npf * MR, bias, bmode, act)
            if not fused:
                _epilogue(cb, rem, ldn, jc, n, npf * MR, bias, bmode, act)
    return 0


@njit(inline="always")
def _full(a, sr, sk, ps, q0, q1, K, b, bpk, ldn, jc, nfull, c, bias, cbias, act, ap, rem, acc, acc_stride, i_rem,
          zb):
    """The whole 6x16 tiles of panels ``q0 .. q1 - 1`` (A at strides ``sr``, ``sk``; panel ``q``
    at ``a[q * ps]``), straight into ``c``, in passes of :data:`KC` over ``K`` accumulated in C;
    with ``rem`` > 0 also the packed partial panel ``ap`` (C's rows ``i_rem ..``) on each block,
    into ``acc`` (block ``jb`` at ``jb * acc_stride``) and copied out after the last pass.
    While the first panel runs over a block of B, the next block is prefetched (constant weights
    come from L3: a transformer layer's exceed L2)."""
    apt = a.ctypes.data
    bptr = b.ctypes.data
    cptr = c.ctypes.data
    ldb = NR if bpk else ldn
    jb0 = jc // NR
    step = 4 * K * NR if bpk else 4 * NR
    biasp = bias.ctypes.data
    for k0 in range(0, K, KC):
        kc = min(KC, K - k0)
        last = k0 + kc >= K
        for jb in range(nfull):
            bp = bptr + 4 * (((jb0 + jb) * K + k0) * NR if bpk else k0 * ldn + jc + jb * NR)
            pfd = step if jb + 1 < nfull else 0
            bj = biasp + 4 * (jc + jb * NR) if cbias and last else 0
            aj = act if last else 0
            for q in range(q0, q1):
                cp = cptr + 4 * (q * MR * ldn + jc + jb * NR)
                tile_pf_f32(apt + 4 * (q * ps + k0 * sk), sr, sk, bp, ldb, cp, ldn, kc, cp if k0 else 0, ldn,
                            pfd if q == q0 else 0, bj, aj)
            if rem:
                ab = acc[jb * acc_stride:jb * acc_stride + MR * NR]
                accp = ab.ctypes.data
                app = ap.ctypes.data + 4 * k0 * MR
                res = accp if k0 else 0
                if rem <= 2:
                    tile16r2_f32(app, bp, ldb, accp, NR, kc, zb.ctypes.data, 0, res, NR)
                elif rem <= 4:
                    tile16r4_f32(app, bp, ldb, accp, NR, kc, zb.ctypes.data, 0, res, NR)
                else:
                    tile_pf_f32(app, 1, MR, bp, ldb, accp, NR, kc, res, NR, pfd if q1 == q0 else 0, 0, 0)
                if last:
                    j0 = jc + jb * NR
                    for r in range(rem):
                        dst = c[(i_rem + r) * ldn + j0:(i_rem + r) * ldn + j0 + NR]
                        for j in range(NR):
                            v = ab[r * NR + j]
                            if cbias:
                                v += bias[j0 + j]
                            if act == 1:
                                v = v if not (v < np.float32(0)) else np.float32(0)
                            elif act == 2:
                                v = v if not (v < np.float32(0)) else np.float32(0)
                                v = v if not (v > np.float32(6)) else np.float32(6)
                            dst[j] = v


@njit(inline="always")
def _tail_cols(a, sr, sk, ps, q0, q1, K, ldn, j0, t, c, btile, ctile):
    """The last ``t`` (< 16) columns, from ``j0``, of panels ``q0 .. q1 - 1``: one or two columns
    (packed as contiguous columns in ``btile``, column ``j`` at ``j * K``) as dot products with
    the rows of A; more as a tile over ``btile``'s zero-padded rows into ``ctile``, copied out."""
    if t <= 2:
        flat = btile.reshape(-1)
        for j in range(t):
            col = flat[j * K:(j + 1) * K]
            for q in range(q0, q1):
                for r in range(MR):
                    base = q * ps + r * sr
                    if sk == 1:
                        v = dot_f32(a[base:base + K], col)
                    else:
                        v = np.float32(0)
                        for kk in range(K):
                            v += a[base + kk * sk] * col[kk]
                    c[(q * MR + r) * ldn + j0 + j] = v
        return
    cs = ctile.ctypes.data
    for q in range(q0, q1):
        tile_pf_f32(a.ctypes.data + 4 * q * ps, sr, sk, btile.ctypes.data, NR, cs, NR, K, 0, 0, 0, 0, 0)
        for r in range(MR):
            dst = c[(q * MR + r) * ldn + j0:(q * MR + r) * ldn + j0 + t]
            for j in range(t):
                dst[j] = ctile[r * NR + j]


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


@njit(inline="always")
def _part(ap, rows, K, b, bpk, ldn, jc, jfrom, n, c, zb, btile, ctile):
    """``c[:rows, jc:jc + n] = A @ B[:, jc:jc + n]`` for one packed, partial panel ``ap`` of A
    (``rows`` < 6 rows, ``K`` deep; its column blocks from ``jfrom``), ``b`` flat B (``[K, ldn]`` rows, or with ``bpk`` the blocks
    of :func:`pack_b`), ``c`` flat with row stride ``ldn`` (its first row the panel's): each
    block through the scratch tile ``ctile`` (``btile``: the packed tail columns)."""
    nfull = n // NR
    tail = n - nfull * NR
    jb0 = jc // NR
    bptr = b.ctypes.data
    zp = zb.ctypes.data
    ldb = NR if bpk else ldn
    cs = ctile.ctypes.data
    for jb in range(jfrom, nfull + (1 if tail else 0)):
        j0 = jc + jb * NR
        if jb < nfull:
            bp = bptr + 4 * ((jb0 + jb) * K * NR if bpk else j0)
            if rows <= 2:
                _tile_r2(ap, c, bp, ldb, cs, NR, K, zp, 0, 0, 0)
            elif rows <= 4:
                _tile_r4(ap, c, bp, ldb, cs, NR, K, zp, 0, 0, 0)
            else:
                tile_f32(ap.ctypes.data, bp, ldb, cs, NR, K, zp, 0, 0, 0)
            t = NR
        else:
            _tail_block(ap, c, btile.ctypes.data, NR, ctile, K, zp, 0, tail, True)
            t = tail
        for r in range(rows):
            dst = c[r * ldn + j0:r * ldn + j0 + t]
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
