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

1. transforms its tiles of every input channel into a scratch ``V [a*a, C, tiles]`` (float32;
   fp16 storage widened on the fly): padded input rows are copied de-interleaved by tile phase,
   so both transform passes are straight loops over tiles that LLVM vectorises,
2. runs one single-threaded OpenBLAS sgemm per position: ``M[p] = U[p] (Ob x C) @ V[p]``,
3. transforms ``M`` back and writes bias + activation straight into the output rows
   (narrowing to the output storage, via :func:`fp16_kernels._store_act`).

Activation codes as in :mod:`.fp16_kernels` (``""``, ``"relu"``, ``"relu6"``, ...). :func:`choose`
picks F(4,3), F(2,3) or im2col from measurements (docs/notes/winograd.md).

This module imports numba: import it lazily.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import List, Optional, Sequence, Tuple

import numpy as np
from numba import get_num_threads, njit, prange

from ._blas import sgemm, single_threaded_blas
from .fp16 import load
from .fp16_kernels import _act_code, _keep_alive, _store_act, _writable, storage_view

__all__ = ["WinogradWeights", "transform_matrices", "winograd_weights", "winograd_conv3x3",
           "choose", "POINTS"]

#: finite interpolation points per output tile size (the last point is infinity)
POINTS = {2: (0, 1, -1), 4: (0, 1, -1, Fraction(1, 2), Fraction(-1, 2))}

_L2_BYTES = 1 << 20          # per core on this machine
_SCRATCH_BYTES = 640 * 1024  # V + M scratch budget per task (leaves room for U rows in L2)


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


def transform_matrices(m: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(A^T [m, a], G [a, 3], B^T [a, a])`` (float64, exact small fractions) of F(m, 3).

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
    f = lambda mat: np.array([[float(v) for v in row] for row in mat], np.float64)  # noqa: E731
    return f(at), f(g), f(bt)


class WinogradWeights:
    """Weights of a 3x3 convolution transformed for F(m, 3): ``u`` float32 ``[a*a, O, C]``."""

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
    return WinogradWeights(u, m, w.shape[0], w.shape[1])


# ---------------------------------------------------------------- explicit transforms
@njit(inline="always")
def _rows_in(x, n, c, iy0, H, W, a0, m, pl, nt, dbuf):
    """dbuf[r, j, t] = x[n, c, iy0 + r, (a0 + t)*m + j - pl] (0 outside), r < m+2, t <= nt:
    padded input rows split by tile phase j (the columns a tile needs are phases 0..m-1 at t and
    0, 1 at t + 1)."""
    for r in range(m + 2):
        iy = iy0 + r
        for j in range(m):
            d = dbuf[r, j]
            if iy < 0 or iy >= H:
                for t in range(nt + 1):
                    d[t] = np.float32(0.0)
                continue
            xr = x[n, c, iy]
            base = a0 * m + j - pl
            tlo = min(max(0, (-base + m - 1) // m), nt + 1)
            thi = max(min(nt + 1, (W - 1 - base) // m + 1), tlo)
            for t in range(tlo):
                d[t] = np.float32(0.0)
            xs = xr[base + tlo * m:]
            dm = d[tlo:]
            for t in range(thi - tlo):
                dm[t] = load(xs, t * m)
            for t in range(thi, nt + 1):
                d[t] = np.float32(0.0)


@njit(inline="always")
def _input_tf4(dbuf, ubuf, v, c, toff, nt):
    """F(4,3) B^T d B for nt tiles: vertical pass over the phase rows, horizontal pass per row
    into v[r*6 + k, c, toff + t] (both straight loops over tiles)."""
    for j in range(4):
        d0, d1, d2, d3, d4, d5 = dbuf[0, j], dbuf[1, j], dbuf[2, j], dbuf[3, j], dbuf[4, j], dbuf[5, j]
        u0, u1, u2, u3, u4, u5 = ubuf[0, j], ubuf[1, j], ubuf[2, j], ubuf[3, j], ubuf[4, j], ubuf[5, j]
        for t in range(nt + 1):
            a0, a1, a2, a3, a4, a5 = d0[t], d1[t], d2[t], d3[t], d4[t], d5[t]
            u0[t] = a0 - np.float32(5.0) * a2 + np.float32(4.0) * a4
            u1[t] = np.float32(4.0) * (a3 + a4) - (a1 + a2)
            u2[t] = (a1 - a2) + np.float32(4.0) * (a4 - a3)
            u3[t] = (a1 - a3) + np.float32(2.0) * (a2 - a4)
            u4[t] = (a3 - a1) + np.float32(2.0) * (a2 - a4)
            u5[t] = a1 - np.float32(5.0) * a3 + np.float32(4.0) * a5
    for r in range(6):
        e0 = ubuf[r, 0, 0:nt]
        e1 = ubuf[r, 1, 0:nt]
        e2 = ubuf[r, 2, 0:nt]
        e3 = ubuf[r, 3, 0:nt]
        e4 = ubuf[r, 0, 1:nt + 1]
        e5 = ubuf[r, 1, 1:nt + 1]
        v0 = v[r * 6 + 0, c, toff:toff + nt]
        v1 = v[r * 6 + 1, c, toff:toff + nt]
        v2 = v[r * 6 + 2, c, toff:toff + nt]
        v3 = v[r * 6 + 3, c, toff:toff + nt]
        v4 = v[r * 6 + 4, c, toff:toff + nt]
        v5 = v[r * 6 + 5, c, toff:toff + nt]
        for t in range(nt):
            a0, a1, a2, a3, a4, a5 = e0[t], e1[t], e2[t], e3[t], e4[t], e5[t]
            v0[t] = a0 - np.float32(5.0) * a2 + np.float32(4.0) * a4
            v1[t] = np.float32(4.0) * (a3 + a4) - (a1 + a2)
            v2[t] = (a1 - a2) + np.float32(4.0) * (a4 - a3)
            v3[t] = (a1 - a3) + np.float32(2.0) * (a2 - a4)
            v4[t] = (a3 - a1) + np.float32(2.0) * (a2 - a4)
            v5[t] = a1 - np.float32(5.0) * a3 + np.float32(4.0) * a5


@njit(inline="always")
def _input_tf2(dbuf, ubuf, v, c, toff, nt):
    """F(2,3) B^T d B for nt tiles (see :func:`_input_tf4`)."""
    for j in range(2):
        d0, d1, d2, d3 = dbuf[0, j], dbuf[1, j], dbuf[2, j], dbuf[3, j]
        u0, u1, u2, u3 = ubuf[0, j], ubuf[1, j], ubuf[2, j], ubuf[3, j]
        for t in range(nt + 1):
            a0, a1, a2, a3 = d0[t], d1[t], d2[t], d3[t]
            u0[t] = a0 - a2
            u1[t] = a1 + a2
            u2[t] = a2 - a1
            u3[t] = a3 - a1
    for r in range(4):
        e0 = ubuf[r, 0, 0:nt]
        e1 = ubuf[r, 1, 0:nt]
        e2 = ubuf[r, 0, 1:nt + 1]
        e3 = ubuf[r, 1, 1:nt + 1]
        v0 = v[r * 4 + 0, c, toff:toff + nt]
        v1 = v[r * 4 + 1, c, toff:toff + nt]
        v2 = v[r * 4 + 2, c, toff:toff + nt]
        v3 = v[r * 4 + 3, c, toff:toff + nt]
        for t in range(nt):
            a0, a1, a2, a3 = e0[t], e1[t], e2[t], e3[t]
            v0[t] = a0 - a2
            v1[t] = a1 + a2
            v2[t] = a2 - a1
            v3[t] = a3 - a1


@njit(inline="always")
def _output_tf4(mm, o, toff, nt, zbuf, row):
    """F(4,3) A^T M A for output channel o of nt tiles; row[i, t*4 + j] = Y[i, j] of tile t."""
    for r in range(6):
        m0 = mm[r * 6 + 0, o, toff:toff + nt]
        m1 = mm[r * 6 + 1, o, toff:toff + nt]
        m2 = mm[r * 6 + 2, o, toff:toff + nt]
        m3 = mm[r * 6 + 3, o, toff:toff + nt]
        m4 = mm[r * 6 + 4, o, toff:toff + nt]
        m5 = mm[r * 6 + 5, o, toff:toff + nt]
        z0, z1, z2, z3 = zbuf[r, 0], zbuf[r, 1], zbuf[r, 2], zbuf[r, 3]
        for t in range(nt):
            s12 = m1[t] + m2[t]
            d12 = m1[t] - m2[t]
            s34 = m3[t] + m4[t]
            d34 = m3[t] - m4[t]
            z0[t] = m0[t] + s12 + np.float32(8.0) * s34
            z1[t] = d12 + np.float32(4.0) * d34
            z2[t] = s12 + np.float32(2.0) * s34
            z3[t] = d12 + d34 + m5[t]
    for j in range(4):
        w0, w1, w2, w3, w4, w5 = zbuf[0, j], zbuf[1, j], zbuf[2, j], zbuf[3, j], zbuf[4, j], zbuf[5, j]
        y0, y1, y2, y3 = zbuf[6, j], zbuf[7, j], zbuf[8, j], zbuf[9, j]
        for t in range(nt):
            s12 = w1[t] + w2[t]
            d12 = w1[t] - w2[t]
            s34 = w3[t] + w4[t]
            d34 = w3[t] - w4[t]
            y0[t] = w0[t] + s12 + np.float32(8.0) * s34
            y1[t] = d12 + np.float32(4.0) * d34
            y2[t] = s12 + np.float32(2.0) * s34
            y3[t] = d12 + d34 + w5[t]
    for i in range(4):
        q0, q1, q2, q3 = zbuf[6 + i, 0], zbuf[6 + i, 1], zbuf[6 + i, 2], zbuf[6 + i, 3]
        ri = row[i]
        for t in range(nt):
            ri[4 * t] = q0[t]
            ri[4 * t + 1] = q1[t]
            ri[4 * t + 2] = q2[t]
            ri[4 * t + 3] = q3[t]


@njit(inline="always")
def _output_tf2(mm, o, toff, nt, zbuf, row):
    """F(2,3) A^T M A for output channel o of nt tiles (see :func:`_output_tf4`)."""
    for r in range(4):
        m0 = mm[r * 4 + 0, o, toff:toff + nt]
        m1 = mm[r * 4 + 1, o, toff:toff + nt]
        m2 = mm[r * 4 + 2, o, toff:toff + nt]
        m3 = mm[r * 4 + 3, o, toff:toff + nt]
        z0, z1 = zbuf[r, 0], zbuf[r, 1]
        for t in range(nt):
            z0[t] = m0[t] + m1[t] + m2[t]
            z1[t] = m1[t] - m2[t] + m3[t]
    for j in range(2):
        w0, w1, w2, w3 = zbuf[0, j], zbuf[1, j], zbuf[2, j], zbuf[3, j]
        r0 = row[0]
        r1 = row[1]
        for t in range(nt):
            r0[2 * t + j] = w0[t] + w1[t] + w2[t]
            r1[2 * t + j] = w1[t] - w2[t] + w3[t]


# ---------------------------------------------------------------- the kernel
@njit(parallel=True, cache=True)
def _k_wino(x, u, bias, out, m, pt, pl, T, OB, act):
    """One launch per convolution; see the module docstring. x [N, C, H, W] and out
    [N, O, OH, OW] in float32 or fp16-bits storage; u [a*a, O, C] float32."""
    N, C, H, W = x.shape
    O, OH, OW = out.shape[1], out.shape[2], out.shape[3]
    a = m + 2
    P = a * a
    TH = (OH + m - 1) // m
    TW = (OW + m - 1) // m
    ntile = TH * TW
    ntb = (ntile + T - 1) // T
    nob = (O + OB - 1) // OB
    seg = min(T, TW)
    for task in prange(N * ntb * nob):
        ob = task % nob
        rest = task // nob
        tb = rest % ntb
        n = rest // ntb
        t0 = tb * T
        t1 = min(ntile, t0 + T)
        nb = t1 - t0
        o0 = ob * OB
        no = min(OB, O - o0)
        # scratch is kept referenced past the sgemm calls (_keep_alive): raw pointers do not
        # hold a reference, and Numba frees an array right after its last use
        vbuf = np.empty(P * C * nb, np.float32)
        mbuf = np.empty(P * no * nb, np.float32)
        v = vbuf.reshape((P, C, nb))
        mm = mbuf.reshape((P, no, nb))
        dbuf = np.empty((a, m, seg + 1), np.float32)
        ubuf = np.empty((a, m, seg + 1), np.float32)
        zbuf = np.empty((a + m, m, seg), np.float32)
        row = np.empty((m, seg * m), np.float32)
        ty0 = t0 // TW
        ty1 = (t1 - 1) // TW
        for c in range(C):
            for ty in range(ty0, ty1 + 1):
                ca = max(t0, ty * TW) - ty * TW
                cb = min(t1, (ty + 1) * TW) - ty * TW
                toff = ty * TW + ca - t0
                nt = cb - ca
                _rows_in(x, n, c, ty * m - pt, H, W, ca, m, pl, nt, dbuf)
                if m == 4:
                    _input_tf4(dbuf, ubuf, v, c, toff, nt)
                else:
                    _input_tf2(dbuf, ubuf, v, c, toff, nt)
        for p in range(P):
            sgemm(101, 111, 111, no, nb, C, np.float32(1.0),
                  u.ctypes.data + 4 * (p * O * C + o0 * C), C,
                  vbuf.ctypes.data + 4 * p * C * nb, nb,
                  np.float32(0.0), mbuf.ctypes.data + 4 * p * no * nb, nb)
        for o in range(no):
            b = bias[o0 + o]
            for ty in range(ty0, ty1 + 1):
                ca = max(t0, ty * TW) - ty * TW
                cb = min(t1, (ty + 1) * TW) - ty * TW
                toff = ty * TW + ca - t0
                nt = cb - ca
                if m == 4:
                    _output_tf4(mm, o, toff, nt, zbuf, row)
                else:
                    _output_tf2(mm, o, toff, nt, zbuf, row)
                ox0 = ca * m
                w = min(nt * m, OW - ox0)
                for i in range(m):
                    oy = ty * m + i
                    if oy < OH:
                        _store_act(out[n, o0 + o, oy], ox0, row[i], 0, b, w, act)
        _keep_alive(vbuf, mbuf)


def _blocks(N: int, C: int, O: int, ntile: int, m: int, threads: int) -> Tuple[int, int]:
    """(tiles per block T, output channels per block OB): V [a*a, C, T] + M [a*a, OB, T] within
    the per-task scratch budget, at least ``threads`` tasks (2 per thread when tiles allow)."""
    a2 = (m + 2) ** 2
    OB = O
    T = max(1, _SCRATCH_BYTES // (4 * a2 * (C + OB)))
    if T < 16 and O > 64:           # wide layers: split output channels rather than starve sgemm
        OB = max(32, O // 2)
        T = max(1, _SCRATCH_BYTES // (4 * a2 * (C + OB)))
    T = min(T, ntile)
    want = 2 * threads if threads > 1 else 1
    ntb = -(-ntile // T)
    if N * ntb < want and ntile > 1:
        T = -(-ntile // max(1, min(ntile, -(-want // N))))
        ntb = -(-ntile // T)
    if N * ntb < threads and O >= 2 * 16:
        OB = -(-O // -(-threads // (N * ntb)))
    return T, OB


def winograd_conv3x3(x: np.ndarray, wt: WinogradWeights, bias: Optional[np.ndarray],
                     pads=(0, 0, 0, 0), act: str = "", out: Optional[np.ndarray] = None,
                     stride=(1, 1), dilation=(1, 1), group: int = 1,
                     blocks: Optional[Tuple[int, int]] = None) -> np.ndarray:
    """3x3 convolution, stride 1, dilation 1, group 1, NCHW, by Winograd F(wt.m, 3).

    ``x`` float32 or float16 ``[N, C, H, W]`` (output storage = input storage), ``wt`` from
    :func:`winograd_weights`, ``bias`` ``[O]`` or None, ``pads`` = (top, bottom, left, right),
    ``act`` a fused activation code; ``out`` an optional C-contiguous ``[N, O, OH, OW]`` array
    of x's dtype to write into. ``stride``/``dilation``/``group`` exist only to be checked
    (anything but 1 raises ValueError). ``blocks`` = (tiles per task, output channels per task)
    overrides the automatic blocking (for benchmarks)."""
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
    m = wt.m
    ntile = -(-OH // m) * -(-OW // m)
    T, OB = blocks if blocks else _blocks(N, C, O, ntile, m, get_num_threads())
    with single_threaded_blas():
        _k_wino(storage_view(np.ascontiguousarray(x)), wt.u, b, storage_view(out), m,
                pads[0], pads[2], int(T), int(OB), code)
    return out


def choose(C: int, O: int, H: int, W: int, threads: int) -> int:
    """Fastest method for a 3x3 stride-1 convolution of ``C -> O`` channels on an ``H x W``
    output at ``threads`` threads: 4 (F(4,3)), 2 (F(2,3)) or 0 (im2col + sgemm,
    :func:`fp16_kernels.conv2d`). Rules from benchmarks/winograd.py (docs/notes/winograd.md)."""
    if min(H, W) < 4 or C < 8 or O < 8:
        return 0
    return 4
