"""Depthwise convolution (group == C == O), NCHW.

Each task keeps a zero-bordered float32 copy of one input plane (the border is zeroed once per
task; a channel overwrites only the interior), so every tap is in bounds and a whole output plane
is one vectorisable loop over a flat index (3x3 written out for stride 1 and 2), small planes
(7x7, 14x14) included. Rows are stored through the activation (float32 or float16 storage).
Tasks are chunks of (image, channel) planes. 3x3 layers with pads 1 (stride 1; stride 2 on even
planes) run the flat kernels of :mod:`mnnjit.backends.cpu.depthwise.flat` instead (``Depthwise.path``).

This module imports numba: import it lazily.
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import numpy as np
from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
from numba import get_num_threads, njit, prange

from mnnjit.backends.cpu.depthwise.flat import choose_path, flat_kernel
from mnnjit.backends.cpu.fp16 import load
from mnnjit.backends.cpu.cnn_steps import _act_code, _conv_out_hw, _store_act, _writable, storage_view

__all__ = ["Depthwise", "depthwise_conv2d"]


@njit(inline="always")
def _plane_flat(xp, WP, acc, n_flat, wc, b, kh, kw, s, dh, dw):
    """acc[i] = b + sum_taps wc[tap] * xp[s*i + ky*dh*WP + kx*dw] for i < n_flat: the whole
    (zero-bordered, row stride WP) plane as one vectorisable loop; i = oy*WP + ox, columns
    ox >= OW are junk the caller skips."""
    a = acc[:n_flat]
    if kh == 3 and kw == 3 and (s == 1 or s == 2):
        # every tap as its own slice from 0: an index like ``i + dw`` with a run-time offset keeps
        # Numba's negative-index check in the loop, which stops vectorisation
        w0, w1, w2, w3, w4, w5, w6, w7, w8 = wc[0], wc[1], wc[2], wc[3], wc[4], wc[5], wc[6], wc[7], wc[8]
        t0 = xp[0:]
        t1 = xp[dw:]
        t2 = xp[2 * dw:]
        t3 = xp[dh * WP:]
        t4 = xp[dh * WP + dw:]
        t5 = xp[dh * WP + 2 * dw:]
        t6 = xp[2 * dh * WP:]
        t7 = xp[2 * dh * WP + dw:]
        t8 = xp[2 * dh * WP + 2 * dw:]
        if s == 1:
            for i in range(n_flat):
                a[i] = (b + w0 * t0[i] + w1 * t1[i] + w2 * t2[i] + w3 * t3[i] + w4 * t4[i]
                        + w5 * t5[i] + w6 * t6[i] + w7 * t7[i] + w8 * t8[i])
        else:
            for i in range(n_flat):
                j = 2 * i
                a[i] = (b + w0 * t0[j] + w1 * t1[j] + w2 * t2[j] + w3 * t3[j] + w4 * t4[j]
                        + w5 * t5[j] + w6 * t6[j] + w7 * t7[j] + w8 * t8[j])
    else:
        for i in range(n_flat):
            a[i] = b
        for ky in range(kh):
            for kx in range(kw):
                wv = wc[ky * kw + kx]
                r = xp[ky * dh * WP + kx * dw:]
                if s == 1:   # a contiguous stream (``r[s * i]`` with s unknown is a gather: 7x slower)
                    for i in range(n_flat):
                        a[i] += wv * r[i]
                else:
                    for i in range(n_flat):
                        a[i] += wv * r[s * i]


@njit(inline="always")
def _dw_plane(plane, xp, acc, wc, b, outp, kh, kw, sh, sw, pt, pl, dh, dw, act, HP, WP, n_flat):
    """One channel: ``outp`` [OH, OW] = act(b + taps ``wc`` over ``plane`` [H, W]) (storage arrays)
    through the zero-bordered float32 plane ``xp`` (row stride WP, borders already zero) and the
    float32 row buffer ``acc``. With equal strides the plane is one flat loop (:func:`_plane_flat`)."""
    H, W = plane.shape
    OH, OW = outp.shape
    for iy in range(H):
        if pt + iy >= HP:
            break
        dst = xp[(pt + iy) * WP + pl:(pt + iy) * WP + WP]
        src = plane[iy]
        m = min(W, WP - pl)
        for ix in range(m):
            dst[ix] = load(src, ix)
    if sh == sw:
        _plane_flat(xp, WP, acc, n_flat, wc, b, kh, kw, sh, dh, dw)
        for oy in range(OH):
            _store_act(outp[oy], 0, acc, oy * WP, np.float32(0.0), OW, act)
        return
    for oy in range(OH):
        row = acc[:OW]
        for ox in range(OW):
            row[ox] = b
        for ky in range(kh):
            r = xp[(oy * sh + ky * dh) * WP:]
            for kx in range(kw):
                wv = wc[ky * kw + kx]
                rk = r[kx * dw:]
                for ox in range(OW):
                    row[ox] += wv * rk[ox * sw]
        _store_act(outp[oy], 0, acc, 0, np.float32(0.0), OW, act)


@njit(inline="always")
def _dw_geometry(H, W, OH, OW, kh, kw, sh, sw, pt, pl, dh, dw):
    """(HP, WP, n_flat) of :func:`_dw_plane`'s bordered plane for these sizes."""
    HP = max((OH - 1) * sh + (kh - 1) * dh + 1, pt + H)
    WP = max((OW - 1) * sw + (kw - 1) * dw + 1, pl + W)
    # one flat loop needs equal strides; the flat index i = oy*WP + ox stops at the last output
    return HP, WP, (OH - 1) * WP + OW


@njit(parallel=True, cache=True, error_model="numpy")
def _k_depthwise(x, w, bias, out, kh, kw, sh, sw, pt, pl, dh, dw, act, nchunk):
    """out[n, c] = act(bias[c] + sum_taps w[c, tap] * x[n, c, shifted]); x [N, C, H, W] and out
    [N, C, OH, OW] as storage arrays (float32 or uint16 half bits), w [C, kh*kw] float32.
    Tasks are chunks of (image, channel) planes, each computed by :func:`_dw_plane`."""
    N, C, H, W = x.shape
    OH, OW = out.shape[2], out.shape[3]
    HP, WP, n_flat = _dw_geometry(H, W, OH, OW, kh, kw, sh, sw, pt, pl, dh, dw)
    NC = N * C
    for chunk in prange(nchunk):
        c0 = chunk * NC // nchunk
        c1 = (chunk + 1) * NC // nchunk
        xp = np.zeros((HP + 1) * WP, np.float32)
        acc = np.empty(max(n_flat, 1), np.float32)
        for nc in range(c0, c1):
            n = nc // C
            c = nc % C
            _dw_plane(x[n, c], xp, acc, w[c], bias[c], out[n, c], kh, kw, sh, sw, pt, pl, dh, dw,
                      act, HP, WP, n_flat)


@njit(inline="always")
def _s2_geometry(H, W, OH, OW, pt, pl, kh, kw):
    """(WH, PS, n_flat) of :func:`_dw_plane_s2`'s four parity planes for a kh x kw kernel: row
    length, plane size and the flat output length."""
    HH = max(OH + (kh - 1) // 2, (pt + H + 1) // 2) + 1
    WH = max(OW + (kw - 1) // 2, (pl + W + 1) // 2) + 1
    return WH, HH * WH, (OH - 1) * WH + OW


@njit(inline="always")
def _dw_plane_s2(plane, xp, acc, wc, b, outp, pt, pl, act, WH, PS, n_flat, kh, kw):
    """One channel of a kh x kw stride-2 (dilation 1) depthwise convolution: the zero-bordered
    plane is stored as four parity planes in ``xp`` (even/odd padded rows x even/odd padded
    columns, split while copying), so every tap of output (oy, ox) is
    plane[(ky%2)*2 + kx%2][oy + ky//2, ox + kx//2]: contiguous streams over a flat output index
    with junk columns at the row ends, instead of stride-2 gathers (written out for 3x3)."""
    H, W = plane.shape
    OH, OW = outp.shape
    e0 = pl % 2                  # first input column landing on an even padded column
    e1 = 1 - e0
    ne = (W - e0 + 1) // 2
    no = (W - e1 + 1) // 2
    je = (e0 + pl) // 2
    jo = (e1 + pl) // 2
    for iy in range(H):
        py = iy + pt
        rb = (py % 2) * 2 * PS + (py // 2) * WH
        src = plane[iy]
        de = xp[rb + je:rb + je + ne]
        se = src[e0:]
        for j in range(ne):
            de[j] = load(se, 2 * j)
        do = xp[rb + PS + jo:rb + PS + jo + no]
        so = src[e1:]
        for j in range(no):
            do[j] = load(so, 2 * j)
    if kh == 3 and kw == 3:
        w0, w1, w2, w3, w4, w5, w6, w7, w8 = wc[0], wc[1], wc[2], wc[3], wc[4], wc[5], wc[6], wc[7], wc[8]
        t0 = xp[0:]
        t1 = xp[PS:]
        t2 = xp[1:]
        t3 = xp[2 * PS:]
        t4 = xp[3 * PS:]
        t5 = xp[2 * PS + 1:]
        t6 = xp[WH:]
        t7 = xp[PS + WH:]
        t8 = xp[WH + 1:]
        for i in range(n_flat):
            acc[i] = (b + w0 * t0[i] + w1 * t1[i] + w2 * t2[i] + w3 * t3[i] + w4 * t4[i]
                      + w5 * t5[i] + w6 * t6[i] + w7 * t7[i] + w8 * t8[i])
    else:
        a = acc[:n_flat]
        for i in range(n_flat):
            a[i] = b
        for ky in range(kh):
            for kx in range(kw):
                wv = wc[ky * kw + kx]
                t = xp[((ky % 2) * 2 + kx % 2) * PS + (ky // 2) * WH + kx // 2:]
                for i in range(n_flat):
                    a[i] += wv * t[i]
    for oy in range(OH):
        _store_act(outp[oy], 0, acc, oy * WH, np.float32(0.0), OW, act)


@njit(parallel=True, cache=True, error_model="numpy")
def _k_depthwise_s2(x, w, bias, out, pt, pl, act, nchunk, kh, kw):
    """kh x kw, stride 2, dilation 1 (:func:`_dw_plane_s2` per channel); tasks are chunks of planes."""
    N, C, H, W = x.shape
    OH, OW = out.shape[2], out.shape[3]
    WH, PS, n_flat = _s2_geometry(H, W, OH, OW, pt, pl, kh, kw)
    NC = N * C
    for chunk in prange(nchunk):
        c0 = chunk * NC // nchunk
        c1 = (chunk + 1) * NC // nchunk
        xp = np.zeros(4 * PS, np.float32)
        acc = np.empty(n_flat, np.float32)
        for nc in range(c0, c1):
            n = nc // C
            c = nc % C
            _dw_plane_s2(x[n, c], xp, acc, w[c], bias[c], out[n, c], pt, pl, act, WH, PS, n_flat, kh, kw)


class Depthwise:
    """A depthwise convolution prepared for a fixed input shape; ``run(x, out)`` computes into
    ``out`` (storage arrays, float32 or float16 bits)."""

    def __init__(self, weight: np.ndarray, bias: Optional[np.ndarray], in_shape,
                 kernel: Tuple[int, int], stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1),
                 act: str = "", threads: Optional[int] = None) -> None:
        if len(in_shape) != 4:
            raise ValueError(f"depthwise_conv2d: input must be NCHW, got shape {list(in_shape)}")
        N, C, H, W = (int(v) for v in in_shape)
        kh, kw = kernel
        w = np.ascontiguousarray(weight, np.float32)
        if w.size != C * kh * kw:
            raise ValueError(f"depthwise_conv2d: weight has {w.size} values, expected "
                             f"C*kh*kw = {C * kh * kw}")
        self.w = _writable(w.reshape(C, kh * kw)).copy()
        b = np.zeros(C, np.float32) if bias is None else np.asarray(bias, np.float32).reshape(-1)
        if b.size != C:
            raise ValueError(f"depthwise_conv2d: bias has {b.size} values, expected {C}")
        self.bias = np.array(b, np.float32)
        oh, ow = _conv_out_hw(H, W, kh, kw, stride, pads, dilation)
        self.in_shape, self.out_shape = (N, C, H, W), (N, C, oh, ow)
        self.args = (kh, kw, int(stride[0]), int(stride[1]), int(pads[0]), int(pads[2]),
                     int(dilation[0]), int(dilation[1]), _act_code(act))
        self.nchunk = max(1, min(N * C, 4 * (threads or get_num_threads())))
        # "flat_s1" / "flat_s2" (:mod:`mnnjit.backends.cpu.depthwise.flat`) or "plane" (the kernels here)
        self.path = choose_path(self.in_shape, self.out_shape, self.args,
                                tuple(int(p) for p in pads))

    def run(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Compute into ``out`` (same storage as ``x``)."""
        kernel, args = self.launch(x, out)
        kernel(*args)
        return out

    def launch(self, x: np.ndarray, out: np.ndarray) -> Tuple[Callable, tuple]:
        """The kernel and arguments of :meth:`run` on these arrays (see
        :func:`.launch.bind_launch`)."""
        kh, kw, sh, sw, pt, pl, dh, dw, act = self.args
        if self.path != "plane":
            N, C, H, W = self.in_shape
            return flat_kernel(self.path, H, W), (
                x.reshape(N * C, H * W), self.w, self.bias,
                out.reshape(N * C, self.out_shape[2] * self.out_shape[3]), H, W, act, self.nchunk)
        if (sh, sw, dh, dw) == (2, 2, 1, 1):
            return _k_depthwise_s2, (x, self.w, self.bias, out, pt, pl, act, self.nchunk, kh, kw)
        return _k_depthwise, (x, self.w, self.bias, out, *self.args, self.nchunk)


def depthwise_conv2d(x: np.ndarray, weight: np.ndarray, bias: Optional[np.ndarray],
                     kernel: Tuple[int, int], stride=(1, 1), pads=(0, 0, 0, 0),
                     dilation=(1, 1), act: str = "") -> np.ndarray:
    """Depthwise 2-D convolution of NCHW ``x`` (float32 or float16); weight ``[C, kh*kw]``."""
    x = np.ascontiguousarray(x)
    dw = Depthwise(weight, bias, x.shape, kernel, stride, pads, dilation, act)
    out = np.empty(dw.out_shape, x.dtype)
    dw.run(storage_view(x), storage_view(out))
    return out
