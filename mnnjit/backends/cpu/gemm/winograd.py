"""Winograd F(2x2,3x3) and F(4x4,3x3) convolution (3x3, stride 1, dilation 1, group 1), NCHW.

``Y = A^T [(G g G^T) (.) (B^T d B)] A`` per output tile of ``m x m`` pixels (input tile
``a x a``, ``a = m + 2``). The matrices come from Toom-Cook interpolation (see
:func:`transform_matrices`): F(2,3) at the points 0, 1, -1, inf; F(4,3) at 0, 1, -1, 1/2, -1/2,
inf (rows/columns rescaled to small integers in ``B^T`` and ``A^T``; the fractions live in
``G``, applied once to the weights). With 1/2 instead of 2 the float32 error measured ~30%
lower (simulated: max relative error 7.7e-6 vs 1.1e-5 over 64 channels).

Weights are transformed once (:func:`winograd_weights`) into ``U [a*a, O, C]``. One parallel
Numba launch per convolution (:func:`winograd_conv3x3`): tasks = (image, block of output tiles,
block of output channels); each task

1. gathers the a x a inputs of its tiles per input channel into ``D [a, a, tiles]`` (float32;
   fp16 storage widened on the fly, zero padding written explicitly) and transforms them into
   a scratch ``V [a*a, C, tiles]`` with two straight loops over tiles that LLVM vectorises,
2. runs one micro-kernel GEMM per position (:func:`mnnjit.backends.cpu.gemm.conv.gemm_panels`, U[p] packed in panels
   at load): ``M[p] = U[p] (Ob x C) @ V[p]``,
3. transforms ``M`` back and writes bias + activation straight into the output rows
   (narrowing to the output storage, via :func:`cnn_steps._store_act`).

Activation codes as in :mod:`mnnjit.backends.cpu.cnn_steps` (``""``, ``"relu"``, ``"relu6"``, ...). :func:`choose`
picks F(4,3), F(2,3) or im2col from measurements (docs/DECISIONS.md).

This module imports numba: import it lazily.
"""
from __future__ import annotations

import functools
import math
import threading
from fractions import Fraction
from typing import List, Optional, Sequence, Tuple

import numpy as np
from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
from numba import get_num_threads, njit, prange

from mnnjit.backends.cpu.gemm.conv import MR, NR, PackedWeights, gemm_panels, line_offset
from mnnjit.backends.cpu.fp16 import load
from mnnjit.backends.cpu.cnn_steps import _act_code, _keep_alive, _store_act, _writable, storage_view

__all__ = ["WinogradWeights", "transform_matrices", "winograd_weights", "winograd_conv3x3",
           "workspace_floats", "choose", "POINTS", "transform_under_memory_low"]

#: finite interpolation points per output tile size (the last point is infinity)
POINTS = {2: (0, 1, -1), 4: (0, 1, -1, Fraction(1, 2), Fraction(-1, 2))}

_SCRATCH_BYTES = 800 * 1024  # V + M budget per task (L2 is 1 MiB per core here)
_TILES = 196                 # tiles per task to aim for (sgemm N)
_V_MAX_BYTES = 8 << 20       # V beyond this takes fewer tiles (C > ~300 with 196 tiles)
_ROW_GATHER_TW = 12          # tile rows at least this long: per-row gather, else flat indexed


# ---------------------------------------------------------------- transform matrices
def _inverse(a: List[List[Fraction]]) -> List[List[Fraction]]:
    """Exact inverse (Gauss-Jordan over fractions) of a small square matrix."""
    n = len(a)
    rows = [list(r) + [Fraction(int(i == j)) for j in range(n)] for i, r in enumerate(a)]
    for c in range(n):
        piv = next(i for i in range(c, n) if rows[i][c] != 0)
        rows[c], rows[piv] = rows[piv], rows[c]
        pv = rows[c][c]
        rows[c] = [v / pv for v in rows[c]]
        for i in range(n):
            if i != c and rows[i][c] != 0:
                f = rows[i][c]
                rows[i] = [u - f * v for u, v in zip(rows[i], rows[c])]
    return [r[n:] for r in rows]


def _primitive_scale(vec: Sequence[Fraction]) -> Fraction:
    """The factor turning ``vec`` into coprime integers (positive)."""
    den = 1
    num = 0
    for v in vec:
        den = den * v.denominator // math.gcd(den, v.denominator)
    for v in vec:
        num = math.gcd(num, abs(int(v * den)))
    return Fraction(den, num or 1)


@functools.lru_cache(maxsize=None)
def transform_matrices(m: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(A^T [m, a], G [a, 3], B^T [a, a])`` (float64, exact small fractions) of F(m, 3), read-only
    and computed once per ``m`` (the exact arithmetic over fractions takes ~3 ms, and every plan
    with a Winograd convolution, e.g. each model load, transforms its weights with ``G``).

    Toom-Cook: linear convolution ``s = g * h`` (``h`` of length ``m``) is
    ``V^-1 [(P_g g) (.) (P_h h)]`` with ``V``, ``P_g``, ``P_h`` Vandermonde evaluations at the
    points (and infinity: the leading coefficient); correlation is its transpose, so
    ``A^T = P_h^T``, ``G = P_g``, ``B^T = V^-T``. Rows of ``B^T`` and columns of ``A^T`` are
    scaled to coprime integers, the inverse scale going into ``G``."""
    if m not in POINTS:
        raise ValueError(f"winograd: output tile m must be one of {sorted(POINTS)}, got {m!r}")
    r = 3
    a = m + r - 1
    pts = [Fraction(p) for p in POINTS[m]]

    def evals(n: int) -> List[List[Fraction]]:
        return [[p ** i for i in range(n)] for p in pts] + [[Fraction(0)] * (n - 1) + [Fraction(1)]]

    vinv = _inverse(evals(a))
    bt = [[vinv[j][i] for j in range(a)] for i in range(a)]
    ph = evals(m)
    at = [[ph[j][i] for j in range(a)] for i in range(m)]
    g = evals(r)
    for i in range(a):
        s = _primitive_scale(bt[i])
        bt[i] = [v * s for v in bt[i]]
        g[i] = [v / s for v in g[i]]
        s = _primitive_scale([at[k][i] for k in range(m)])
        for k in range(m):
            at[k][i] *= s
        g[i] = [v / s for v in g[i]]
    def f(mat: List[List[Fraction]]) -> np.ndarray:
        arr = np.array([[float(v) for v in row] for row in mat], np.float64)
        arr.flags.writeable = False     # shared by every caller (cached)
        return arr
    return f(at), f(g), f(bt)


class WinogradWeights:
    """Weights of a 3x3 convolution transformed for F(m, 3): per position ``p`` the ``O x C``
    matrix ``U[p]`` packed into micro-kernel panels (``u[p]``: ``ceil(O / MR)`` panels of
    ``C x MR``, see :class:`mnnjit.backends.cpu.gemm.conv.PackedWeights`), float32 ``[a*a, npanel * C * MR]``."""

    def __init__(self, u: np.ndarray, m: int, out_channels: int, in_channels: int) -> None:
        self.u = u
        self.m = m
        self.out_channels = out_channels
        self.in_channels = in_channels

    def __repr__(self) -> str:
        return (f"WinogradWeights(F({self.m}x{self.m},3x3), O={self.out_channels}, "
                f"C={self.in_channels})")


def winograd_weights(w: np.ndarray, m: int) -> WinogradWeights:
    """Transform float32 weights ``[O, C, 3, 3]`` once (``G w G^T``, in float64 then rounded)
    into the ``[a*a, O, C]`` layout whose per-position ``O x C`` slices are the GEMM's A."""
    w = np.asarray(w)
    if w.ndim != 4 or w.shape[2:] != (3, 3):
        raise ValueError(f"winograd_weights: weight must be [O, C, 3, 3], got shape {w.shape}")
    if w.shape[0] < 1 or w.shape[1] < 1:
        raise ValueError(f"winograd_weights: empty weight {w.shape}")
    _, g, _ = transform_matrices(m)
    a = m + 2
    u = np.einsum("ry,ocyx,kx->rkoc", g, w.astype(np.float64), g)
    u = np.ascontiguousarray(u.reshape(a * a, w.shape[0], w.shape[1]), np.float32)
    panels = np.stack([PackedWeights.from_dense(u[p]).panels for p in range(a * a)])
    return WinogradWeights(panels, m, w.shape[0], w.shape[1])


# ---------------------------------------------------------------- explicit transforms
@njit(inline="always")
def _tile_bases(t0, t1, TW, m, Wp, base):
    """base[t - t0] = index in a block plane (row stride Wp) of tile t's top-left input."""
    ty0 = t0 // TW
    for t in range(t0, t1):
        ty = t // TW
        base[t - t0] = (ty - ty0) * m * Wp + (t - ty * TW) * m


@njit(inline="always")
def _gather_idx(x, n, c, H, W, m, pt, pl, t0, t1, TW, dbuf, plane, base):
    """dbuf[r, s, t - t0] = x[n, c, ty*m - pt + r, tx*m - pl + s] (0 outside the image) for
    the tiles t0 <= t < t1 (t = ty*TW + tx), r, s < m + 2: the rows of the block's tile rows are
    copied (widened) into a zero-bordered float32 plane (row stride TW*m + 2), then one flat
    loop over the block's tiles per (r, s) reads plane[base[t] + r*Wp + s]."""
    a = m + 2
    Wp = TW * m + 2
    ty0 = t0 // TW
    nrow = ((t1 - 1) // TW - ty0) * m + a
    qlo = min(pl, Wp)
    qhi = max(min(Wp, W + pl), qlo)
    for yy in range(nrow):
        iy = ty0 * m - pt + yy
        pr = plane[yy * Wp:(yy + 1) * Wp]
        if iy < 0 or iy >= H:
            for q in range(Wp):
                pr[q] = np.float32(0.0)
            continue
        for q in range(qlo):
            pr[q] = np.float32(0.0)
        xs = x[n, c, iy, qlo - pl:qhi - pl]
        pm = pr[qlo:qhi]
        for q in range(qhi - qlo):
            pm[q] = load(xs, q)
        for q in range(qhi, Wp):
            pr[q] = np.float32(0.0)
    nb = t1 - t0
    for r in range(a):
        for s in range(a):
            d = dbuf[r, s]
            ps = plane[r * Wp + s:]
            for t in range(nb):
                d[t] = ps[base[t]]


@njit(inline="always")
def _gather_rows(x, n, c, H, W, m, pt, pl, t0, t1, TW, dbuf, prow):
    """:func:`_gather_idx`'s result, per tile-row segment and input row: one contiguous widening
    copy into a zero-bordered float32 row ``prow``, then one loop over the segment's tiles
    reading complete stride-m groups (constant offsets: no index checks in the loop); the last
    two columns of a tile are the first two of the next. Faster than the flat indexed gather
    for long tile rows (64@56 F(4,3): ~10%), slower for short ones (14x14: 1.6x)."""
    a = m + 2
    for ty in range(t0 // TW, (t1 - 1) // TW + 1):
        ca = max(t0, ty * TW) - ty * TW
        nt = min(t1, (ty + 1) * TW) - ty * TW - ca
        toff = ty * TW + ca - t0
        x0 = ca * m - pl                  # image column of prow[0]
        nq = nt * m + 2
        qlo = min(max(0, -x0), nq)
        qhi = max(min(nq, W - x0), qlo)
        for r in range(a):
            iy = ty * m - pt + r
            if iy < 0 or iy >= H:
                for s in range(a):
                    d = dbuf[r, s, toff:toff + nt]
                    for t in range(nt):
                        d[t] = np.float32(0.0)
                continue
            for q in range(qlo):
                prow[q] = np.float32(0.0)
            xs = x[n, c, iy, x0 + qlo:x0 + qhi]
            pm = prow[qlo:qhi]
            for q in range(qhi - qlo):
                pm[q] = load(xs, q)
            for q in range(qhi, nq):
                prow[q] = np.float32(0.0)
            dr = dbuf[r]
            if m == 4:
                d0 = dr[0, toff:toff + nt]
                d1 = dr[1, toff:toff + nt]
                d2 = dr[2, toff:toff + nt]
                d3 = dr[3, toff:toff + nt]
                d4 = dr[4, toff:toff + nt]
                d5 = dr[5, toff:toff + nt]
                for t in range(nt):           # one complete stride-4 group per tile
                    d0[t] = prow[4 * t]
                    d1[t] = prow[4 * t + 1]
                    d2[t] = prow[4 * t + 2]
                    d3[t] = prow[4 * t + 3]
                # columns 4, 5 of a tile are columns 0, 1 of the next one
                n0 = dr[0, toff + 1:toff + nt]
                n1 = dr[1, toff + 1:toff + nt]
                for t in range(nt - 1):
                    d4[t] = n0[t]
                    d5[t] = n1[t]
                # (a loop, not d4[nt - 1] = ...: that store was dropped inside prange)
                for t in range(nt - 1, nt):
                    d4[t] = prow[4 * t + 4]
                    d5[t] = prow[4 * t + 5]
            else:
                d0 = dr[0, toff:toff + nt]
                d1 = dr[1, toff:toff + nt]
                d2 = dr[2, toff:toff + nt]
                d3 = dr[3, toff:toff + nt]
                for t in range(nt):
                    d0[t] = prow[2 * t]
                    d1[t] = prow[2 * t + 1]
                n0 = dr[0, toff + 1:toff + nt]
                n1 = dr[1, toff + 1:toff + nt]
                for t in range(nt - 1):
                    d2[t] = n0[t]
                    d3[t] = n1[t]
                for t in range(nt - 1, nt):
                    d2[t] = prow[2 * t + 2]
                    d3[t] = prow[2 * t + 3]


@njit(inline="always")
def _bt4(d0, d1, d2, d3, d4, d5, v0, v1, v2, v3, v4, v5, nb):
    """v = B^T d of F(4,3) for nb tiles (one straight loop over tiles)."""
    for t in range(nb):
        a0, a1, a2, a3, a4, a5 = d0[t], d1[t], d2[t], d3[t], d4[t], d5[t]
        v0[t] = a0 - np.float32(5.0) * a2 + np.float32(4.0) * a4
        v1[t] = np.float32(4.0) * (a3 + a4) - (a1 + a2)
        v2[t] = (a1 - a2) + np.float32(4.0) * (a4 - a3)
        v3[t] = (a1 - a3) + np.float32(2.0) * (a2 - a4)
        v4[t] = (a3 - a1) + np.float32(2.0) * (a2 - a4)
        v5[t] = a1 - np.float32(5.0) * a3 + np.float32(4.0) * a5


@njit(inline="always")
def _bt2(d0, d1, d2, d3, v0, v1, v2, v3, nb):
    """v = B^T d of F(2,3) for nb tiles."""
    for t in range(nb):
        a0, a1, a2, a3 = d0[t], d1[t], d2[t], d3[t]
        v0[t] = a0 - a2
        v1[t] = a1 + a2
        v2[t] = a2 - a1
        v3[t] = a3 - a1


@njit(inline="always")
def _input_tf(dbuf, hbuf, v, c, m, nb):
    """v[r*a + k, c, :nb] = (B^T d B)[r, k] per tile: horizontal pass over each input row of
    the tiles (dbuf [a, a, nb] -> hbuf), then vertical pass into v."""
    a = m + 2
    if m == 4:
        for i in range(6):
            di = dbuf[i]
            hi = hbuf[i]
            _bt4(di[0], di[1], di[2], di[3], di[4], di[5],
                 hi[0], hi[1], hi[2], hi[3], hi[4], hi[5], nb)
        for k in range(6):
            _bt4(hbuf[0, k], hbuf[1, k], hbuf[2, k], hbuf[3, k], hbuf[4, k], hbuf[5, k],
                 v[k, c], v[a + k, c], v[2 * a + k, c], v[3 * a + k, c], v[4 * a + k, c],
                 v[5 * a + k, c], nb)
    else:
        for i in range(4):
            di = dbuf[i]
            hi = hbuf[i]
            _bt2(di[0], di[1], di[2], di[3], hi[0], hi[1], hi[2], hi[3], nb)
        for k in range(4):
            _bt2(hbuf[0, k], hbuf[1, k], hbuf[2, k], hbuf[3, k],
                 v[k, c], v[a + k, c], v[2 * a + k, c], v[3 * a + k, c], nb)


@njit(inline="always")
def _at4(m0, m1, m2, m3, m4, m5, y0, y1, y2, y3, nb):
    """y = A^T m of F(4,3) for nb tiles."""
    for t in range(nb):
        s12 = m1[t] + m2[t]
        d12 = m1[t] - m2[t]
        s34 = m3[t] + m4[t]
        d34 = m3[t] - m4[t]
        y0[t] = m0[t] + s12 + np.float32(8.0) * s34
        y1[t] = d12 + np.float32(4.0) * d34
        y2[t] = s12 + np.float32(2.0) * s34
        y3[t] = d12 + d34 + m5[t]


@njit(inline="always")
def _at2(m0, m1, m2, m3, y0, y1, nb):
    """y = A^T m of F(2,3) for nb tiles."""
    for t in range(nb):
        y0[t] = m0[t] + m1[t] + m2[t]
        y1[t] = m1[t] - m2[t] + m3[t]


@njit(inline="always")
def _output_tf(mm, o, m, nb, zbuf, ybuf):
    """ybuf[i, j, :nb] = (A^T M A)[i, j] per tile for output channel o (mm [a*a, Ob, nb]):
    horizontal pass per row r of M into zbuf [a, m, nb], then vertical pass."""
    a = m + 2
    if m == 4:
        for r in range(6):
            zr = zbuf[r]
            _at4(mm[r * a, o], mm[r * a + 1, o], mm[r * a + 2, o], mm[r * a + 3, o],
                 mm[r * a + 4, o], mm[r * a + 5, o], zr[0], zr[1], zr[2], zr[3], nb)
        for j in range(4):
            _at4(zbuf[0, j], zbuf[1, j], zbuf[2, j], zbuf[3, j], zbuf[4, j], zbuf[5, j],
                 ybuf[0, j], ybuf[1, j], ybuf[2, j], ybuf[3, j], nb)
    else:
        for r in range(4):
            zr = zbuf[r]
            _at2(mm[r * a, o], mm[r * a + 1, o], mm[r * a + 2, o], mm[r * a + 3, o],
                 zr[0], zr[1], nb)
        for j in range(2):
            _at2(zbuf[0, j], zbuf[1, j], zbuf[2, j], zbuf[3, j], ybuf[0, j], ybuf[1, j], nb)


@njit(inline="always")
def _scatter(ybuf, out, n, o, b, act, m, t0, t1, TW, OH, OW, row, res, has_res):
    """Output rows of the tiles t0..t1 of channel o: interleave ybuf[i, j, t] into a row
    buffer (row[t*m + j]), add the residual row (``has_res``: ``res`` shaped like ``out``), then
    bias + activation + narrowing into out[n, o, oy, ...]."""
    for ty in range(t0 // TW, (t1 - 1) // TW + 1):
        ca = max(t0, ty * TW) - ty * TW
        nt = min(t1, (ty + 1) * TW) - ty * TW - ca
        toff = ty * TW + ca - t0
        w = min(nt * m, OW - ca * m)
        for i in range(m):
            oy = ty * m + i
            if oy >= OH:
                break
            yi = ybuf[i]
            if m == 4:
                q0 = yi[0, toff:toff + nt]
                q1 = yi[1, toff:toff + nt]
                q2 = yi[2, toff:toff + nt]
                q3 = yi[3, toff:toff + nt]
                for t in range(nt):
                    row[4 * t] = q0[t]
                    row[4 * t + 1] = q1[t]
                    row[4 * t + 2] = q2[t]
                    row[4 * t + 3] = q3[t]
            else:
                q0 = yi[0, toff:toff + nt]
                q1 = yi[1, toff:toff + nt]
                for t in range(nt):
                    row[2 * t] = q0[t]
                    row[2 * t + 1] = q1[t]
            if has_res:
                rr = res[n, o, oy, ca * m:ca * m + w]
                for j in range(w):
                    row[j] += load(rr, j)
            _store_act(out[n, o, oy], ca * m, row, 0, b, w, act)


# ---------------------------------------------------------------- the kernel
@njit(inline="always")
def _launch_geometry(x, out, m, T, OB, ws):
    """A launch's sizes: x and out dims, a = m + 2, P = a*a transform positions, TW tiles per
    row, ntile tiles per image, ntb tile blocks of T, nob channel blocks of OB, ntask tasks,
    nchunk workspace rows (one per thread), TP = T padded to whole lines."""
    N, C, H, W = x.shape
    O, OH, OW = out.shape[1], out.shape[2], out.shape[3]
    a = m + 2
    TW = (OW + m - 1) // m
    ntile = ((OH + m - 1) // m) * TW
    ntb = (ntile + T - 1) // T
    nob = (O + OB - 1) // OB
    return (N, C, H, W, O, OH, OW, a, a * a, TW, ntile, ntb, nob, N * ntb * nob, ws.shape[0],
            _padded(T))


@njit(inline="always")
def _task_coords(task, nob, ntb, T, ntile, OB, O):
    """Task ``task``'s image n, tile block blk (= n * ntb + block), tiles t0..t1 (nb of them)
    and output channels o0.. (no of them): channel blocks vary fastest, so consecutive tasks of
    a chunk share one tile block's V."""
    blk = task // nob
    t0 = (blk % ntb) * T
    t1 = min(ntile, t0 + T)
    o0 = (task % nob) * OB
    return blk // ntb, blk, t0, t1, t1 - t0, o0, min(OB, O - o0)


@njit(inline="always")
def _task_views(w, end, P, C, OB, TP, T, no, nb, a, m, TW):
    """One task's views of its chunk's workspace ``w[:end]``: V [P, C, TP], M's rows (flat and
    [P, no, TP]), the gathered tiles and their half transform [a, a, nb], the output tiles
    [m, m, nb], one padded input row and the rest as the gather plane."""
    vbuf = w[0:P * C * TP]
    mbuf = w[P * C * TP:P * C * TP + P * no * TP]
    off = P * (C + OB) * TP
    dbuf = w[off:off + P * nb].reshape((a, a, nb))
    hbuf = w[off + P * T:off + P * T + P * nb].reshape((a, a, nb))
    ybuf = w[off + 2 * P * T:off + 2 * P * T + m * m * nb].reshape((m, m, nb))
    off2 = off + 2 * P * T + m * m * T
    return (vbuf.reshape((P, C, TP)), mbuf, mbuf.reshape((P, no, TP)), dbuf, hbuf, ybuf,
            w[off2:off2 + TW * m + 2], w[off2 + TW * m + 2:end])


@njit(inline="always")
def _load_tiles(x, n, C, H, W, m, pt, pl, t0, t1, nb, TW, dbuf, hbuf, v, row, plane):
    """V = the input transform of tiles t0..t1 of image n, every channel."""
    base = np.empty(nb, np.int32)
    _tile_bases(t0, t1, TW, m, TW * m + 2, base)
    for c in range(C):
        if TW >= _ROW_GATHER_TW:
            _gather_rows(x, n, c, H, W, m, pt, pl, t0, t1, TW, dbuf, row)
        else:
            _gather_idx(x, n, c, H, W, m, pt, pl, t0, t1, TW, dbuf, plane, base)
        _input_tf(dbuf, hbuf, v, c, m, nb)


@njit(parallel=True, cache=True, error_model="numpy")
def _k_wino(x, u, bias, out, m, pt, pl, T, OB, act, ws, res, has_res):
    """One launch per convolution; see the module docstring. x [N, C, H, W] and out
    [N, O, OH, OW] in float32 or fp16-bits storage; u [a*a, O, C] float32; ws float32
    [chunks, _ws_size(...)]: one scratch row per chunk of consecutive tasks (one chunk per
    thread, allocated once by the caller: fresh multi-MB buffers per call cost page faults).
    Tasks of a chunk sharing a tile block (output-channel blocks of it) reuse its V. With
    ``has_res``: out = act(conv + bias + res), ``res`` shaped like ``out`` (a residual add)."""
    N, C, H, W, O, OH, OW, a, P, TW, ntile, ntb, nob, ntask, nchunk, TP = _launch_geometry(
        x, out, m, T, OB, ws)
    for ch in prange(nchunk):
        # V and M rows of TP >= T values from a 64-byte line boundary: the GEMM's 16-column
        # blocks of them never straddle two lines (a row of 196 or 49 values would)
        w0 = ws[ch]
        w = w0[line_offset(w0):]
        last = -1
        zbias = np.zeros(MR, np.float32)
        btile = np.empty((C, NR), np.float32)
        ctile = np.empty(MR * NR, np.float32)
        for task in range(ch * ntask // nchunk, (ch + 1) * ntask // nchunk):
            n, blk, t0, t1, nb, o0, no = _task_coords(task, nob, ntb, T, ntile, OB, O)
            v, mbuf, mm, dbuf, hbuf, ybuf, row, plane = _task_views(w, len(w), P, C, OB, TP, T,
                                                                    no, nb, a, m, TW)
            if blk != last:
                _load_tiles(x, n, C, H, W, m, pt, pl, t0, t1, nb, TW, dbuf, hbuf, v, row, plane)
                last = blk
            q0 = o0 // MR
            for p in range(P):
                gemm_panels(u[p, q0 * C * MR:], no, C, v[p], nb,
                            mbuf[p * no * TP:(p + 1) * no * TP], TP, zbias, btile, ctile)
            for o in range(no):
                _output_tf(mm, o, m, nb, hbuf, ybuf)
                _scatter(ybuf, out, n, o0 + o, bias[o0 + o], act, m, t0, t1, TW, OH, OW, row, res,
                         has_res)
        _keep_alive(w, ws)


@njit(inline="always")
def _padded(T):
    """Row length of V and M for T tiles: whole 16-value (64-byte) blocks."""
    return (T + NR - 1) // NR * NR


def _ws_size(C: int, OB: int, T: int, TW: int, m: int) -> int:
    """float32 scratch per chunk of :func:`_k_wino`: V and M [a*a, *, T padded to 16], D and H
    [a, a, T], Y [m, m, T], one padded row, the zero-bordered plane of a block's input rows (flat
    gather), and 16 values of slack to start V on a 64-byte line."""
    P = (m + 2) ** 2
    nrow = (T // TW + 1) * m + m + 2
    TP = _padded.py_func(T)
    return P * (C + OB) * TP + 2 * P * T + m * m * T + (TW * m + 2) * (nrow + 1) + 16


_WS = threading.local()


def _workspace(rows: int, size: int) -> np.ndarray:
    """A float32 [rows, size] scratch array, reused by later calls of this thread (grown when
    too small)."""
    buf = getattr(_WS, "buf", None)
    if buf is None or buf.size < rows * size:
        buf = np.empty(rows * size, np.float32)
        _WS.buf = buf
    return buf[:rows * size].reshape(rows, size)


def _blocks(N: int, C: int, O: int, ntile: int, m: int, threads: int) -> Tuple[int, int]:
    """(tiles per task T, output channels per task OB), from benchmarks/winograd.py sweeps:
    the GEMMs want many tiles (~100-200: skinny GEMMs run at 10-35
    GFLOP/s instead of ~70), V + M scratch should stay near L2 (OB shrinks first), and every
    thread gets the same number of tasks (tiles split first when there are enough of them,
    else output channels; a chunk of tasks on one tile block transforms its input once)."""
    P = (m + 2) ** 2
    T = -(-ntile // -(-ntile // _TILES))
    T = min(T, max(32, _V_MAX_BYTES // (4 * P * C)))     # very wide inputs: cap V's size
    if N * -(-ntile // T) < threads and ntile >= 64:
        T = -(-ntile // -(-threads // N))
    ntb = -(-ntile // T)
    OB = O
    while OB > 64 and 4 * P * (C + OB) * T > _SCRATCH_BYTES:
        OB = -(-OB // 2)
    nob = -(-O // OB)
    while (N * ntb * nob) % threads and N * ntb * nob < 4 * threads and nob < O:
        nob += 1
    OB = -(-O // nob)
    return T, -(-OB // MR) * MR          # whole micro-kernel panels per task


def _layout(N: int, C: int, O: int, OH: int, OW: int, m: int, threads: int,
            blocks: Optional[Tuple[int, int]] = None) -> Tuple[int, int, int, int]:
    """(tiles per task, output channels per task, workspace rows, floats per row) of a call."""
    ntile = -(-OH // m) * -(-OW // m)
    T, OB = blocks if blocks else _blocks(N, C, O, ntile, m, threads)
    if T < 1 or OB < 1:
        raise ValueError(f"winograd_conv3x3: blocks must be positive, got {(T, OB)}")
    T, OB = int(min(T, ntile)), int(min(-(-OB // MR) * MR, O))   # blocks of whole panels
    nchunk = max(1, min(threads, N * -(-ntile // T) * -(-O // OB)))
    return T, OB, nchunk, _ws_size(C, OB, T, -(-OW // m), m)


def workspace_floats(x_shape: Sequence[int], wt: WinogradWeights, pads=(0, 0, 0, 0),
                     threads: Optional[int] = None) -> int:
    """float32 values of the workspace :func:`winograd_conv3x3` uses for an input of
    ``x_shape`` at ``threads`` threads (default: Numba's current count); a caller passing a
    ``ws`` at least this large saves the module's own per-thread workspace."""
    N, C, H, W = (int(v) for v in x_shape)
    OH = H + int(pads[0]) + int(pads[1]) - 2
    OW = W + int(pads[2]) + int(pads[3]) - 2
    if OH <= 0 or OW <= 0 or N == 0:
        raise ValueError(f"workspace_floats: no output for input {list(x_shape)}, pads {pads}")
    _, _, nchunk, size = _layout(N, C, wt.out_channels, OH, OW, wt.m,
                                 threads or get_num_threads())
    return nchunk * size


def winograd_conv3x3(x: np.ndarray, wt: WinogradWeights, bias: Optional[np.ndarray],
                     pads=(0, 0, 0, 0), act: str = "", out: Optional[np.ndarray] = None,
                     stride=(1, 1), dilation=(1, 1), group: int = 1,
                     blocks: Optional[Tuple[int, int]] = None,
                     res: Optional[np.ndarray] = None,
                     ws: Optional[np.ndarray] = None, launch_only: bool = False):
    """3x3 convolution, stride 1, dilation 1, group 1, NCHW, by Winograd F(wt.m, 3).

    ``x`` float32 or float16 ``[N, C, H, W]`` (output storage = input storage), ``wt`` from
    :func:`winograd_weights`, ``bias`` ``[O]`` or None, ``pads`` = (top, bottom, left, right),
    ``act`` a fused activation code; ``out`` an optional C-contiguous ``[N, O, OH, OW]`` array
    of x's dtype to write into. ``stride``/``dilation``/``group`` exist only to be checked
    (anything but 1 raises ValueError). ``blocks`` = (tiles per task, output channels per task)
    overrides the automatic blocking (for benchmarks). ``res``: an array like the output added
    before the activation (a residual connection). ``ws``: a float32 C-contiguous workspace of
    at least :func:`workspace_floats` values (e.g. from a caller's buffer pool, still in cache);
    a smaller or missing one falls back to the per-thread workspace. ``launch_only``: check
    everything but return ``(kernel, args)`` instead of running (see :func:`.launch.bind_launch`;
    the workspace is then the one chosen now, so ``out`` must be given)."""
    if not isinstance(wt, WinogradWeights):
        raise TypeError(f"winograd_conv3x3: wt must come from winograd_weights(), got "
                        f"{type(wt).__name__}")
    if tuple(stride) != (1, 1) or tuple(dilation) != (1, 1) or group != 1:
        raise ValueError(f"winograd_conv3x3: only stride 1, dilation 1, group 1 "
                         f"(got stride {tuple(stride)}, dilation {tuple(dilation)}, group {group})")
    if x.ndim != 4:
        raise ValueError(f"winograd_conv3x3: input must be NCHW (4-D), got shape {x.shape}")
    if x.dtype not in (np.float32, np.float16):
        raise ValueError(f"winograd_conv3x3: input must be float32 or float16, got {x.dtype}")
    N, C, H, W = x.shape
    if C != wt.in_channels:
        raise ValueError(f"winograd_conv3x3: input has {C} channels, weight expects "
                         f"{wt.in_channels}")
    pads = tuple(int(p) for p in pads)
    if len(pads) != 4 or min(pads) < 0:
        raise ValueError(f"winograd_conv3x3: pads must be 4 non-negative ints (t, b, l, r), "
                         f"got {pads}")
    O = wt.out_channels
    OH = H + pads[0] + pads[1] - 2
    OW = W + pads[2] + pads[3] - 2
    if OH <= 0 or OW <= 0 or N == 0:
        raise ValueError(f"winograd_conv3x3: 3x3 kernel larger than padded input "
                         f"{(H + pads[0] + pads[1], W + pads[2] + pads[3])} (or empty batch)")
    if bias is None:
        b = np.zeros(O, np.float32)
    else:
        b = _writable(np.ascontiguousarray(bias, np.float32))
        if b.shape != (O,):
            raise ValueError(f"winograd_conv3x3: bias shape {b.shape}, expected ({O},)")
    code = _act_code(act)
    shape = (N, O, OH, OW)
    if out is None:
        out = np.empty(shape, x.dtype)
    elif out.shape != shape or out.dtype != x.dtype or not out.flags.c_contiguous \
            or not out.flags.writeable:
        raise ValueError(f"winograd_conv3x3: out must be a writable C-contiguous {x.dtype} "
                         f"array of shape {shape}")
    elif np.may_share_memory(out, x):
        raise ValueError("winograd_conv3x3: out must not overlap the input")
    if res is not None and (res.shape != shape or res.dtype != x.dtype):
        raise ValueError(f"winograd_conv3x3: residual must be a {x.dtype} array of shape "
                         f"{shape}, got {res.dtype} {res.shape}")
    m = wt.m
    T, OB, nchunk, size = _layout(N, C, O, OH, OW, m, get_num_threads(), blocks)
    if ws is not None and ws.dtype == np.float32 and ws.ndim == 1 and ws.flags.c_contiguous \
            and ws.flags.writeable and ws.size >= nchunk * size \
            and not np.may_share_memory(ws, x) and not np.may_share_memory(ws, out) \
            and (res is None or not np.may_share_memory(ws, res)):
        ws = ws[:nchunk * size].reshape(nchunk, size)
    else:
        ws = _workspace(nchunk, size)
    so = storage_view(out)
    args = (storage_view(np.ascontiguousarray(x)), wt.u, b, so, m, pads[0], pads[2], T, OB, code,
            ws, so if res is None else storage_view(np.ascontiguousarray(res)), res is not None)
    if launch_only:
        return _k_wino, args
    _k_wino(*args)
    return out


#: memory=low keeps a quantized 3x3 layer's codes unless its output has at least this many 4x4
#: tiles per image and its F(4x4) float weights take at most LOW_MEMORY_MAX_BYTES: there the
#: Winograd GEMMs cost 2-3x less than im2col on dequantized panels, and the float weights are
#: small (ResNet-18's 56x56 and 28x28 layers: 9.4 MB of float U against 11.2 MB of codes in all,
#: the plan's weights 21 % of fp32's)
LOW_MEMORY_MIN_TILES = 49
LOW_MEMORY_MAX_BYTES = 4 << 20


def transform_under_memory_low(C: int, O: int, H: int, W: int) -> bool:
    """Whether a quantized 3x3 stride-1 convolution of ``C -> O`` channels with an ``H x W``
    output keeps float32 Winograd weights under memory=low (see :data:`LOW_MEMORY_MIN_TILES`)."""
    return (-(-H // 4) * -(-W // 4) >= LOW_MEMORY_MIN_TILES
            and 36 * C * O * 4 <= LOW_MEMORY_MAX_BYTES)


def choose(C: int, O: int, H: int, W: int, threads: int) -> int:
    """Fastest method for a 3x3 stride-1 convolution of ``C -> O`` channels with an ``H x W``
    *output* at ``threads`` threads: 4 (F(4,3)), 2 (F(2,3)) or 0 (im2col + sgemm,
    :func:`cnn_steps.conv2d`). From benchmarks/winograd.py (numbers in benchmarks/RESULTS.md):

    * with the per-position GEMMs on the micro-kernel (no call overhead, no packing) F(4,3) wins
      from ~12 tiles of 4x4 per image (outputs >= 13x13: ResNet-18's 56, 28 and 14), F(2,3)
      below (7x7); the thread count does not change the order;
    * one input channel: the GEMMs are rank-1 updates, im2col (K = 9) is as fast and simpler;
    * the order is the same with the weights in cache and evicted (as in a forward, where a 7x7
      layer's 16 MB of U come from DRAM).
    """
    if min(C, O, H, W, threads) < 1:
        raise ValueError(f"choose: sizes and threads must be positive, got C={C} O={O} "
                         f"H={H} W={W} threads={threads}")
    if C == 1:
        return 0
    if -(-H // 4) * -(-W // 4) >= 12:
        return 4
    return 2
