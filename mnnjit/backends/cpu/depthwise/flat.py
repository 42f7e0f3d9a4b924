"""Depthwise 3x3 convolutions (stride 1 pads 1; stride 2 pads 1 on even planes) as flat loops.

MobileNet's depthwise layers on small planes (7x7, 14x14: 49 or 196 outputs of 9 taps per
channel) are dominated by per-row work in a padded-plane kernel (:mod:`.depthwise`): a row copy
and a row store per row, each too short to vectorise. Here a channel is three flat loops over the
whole plane (copy in, stencil, store through the activation), with no padded columns:

* stride 1: output i = oy*W + ox reads the plane (copied between W+1 zeros above and below) at
  i + (ky-1)*W + (kx-1); the column taps that wrap into the neighbouring row (left taps at
  ox == 0, right taps at ox == W-1) are dropped by a select on precomputed edge masks. Planes of
  more than :data:`_BAND` outputs go band by band of whole rows (masks and accumulator in L1).
* stride 2 (even H, W): planes up to 32 wide are split into their even and odd columns (one
  flat loop); with k = oy*2*OW + ox every tap is one of the two halves at k plus a constant (odd
  rows computed and skipped). Wider planes are split into their four quarter planes (even/odd
  rows x even/odd columns); with output k = oy*OW + ox every tap is one quarter plane at k plus
  a constant, band by band of output rows. The left taps are dropped at ox == 0.

Per-plane bodies (:func:`_dw3_plane_s1`, :func:`_dw3_plane_s1_banded`, :func:`_dw3_plane_s2`,
:func:`_dw3_plane_s2_banded`) take flat storage arrays (float32 or uint16 half bits): pass 2-D ``[planes, H*W]`` arrays and
index them, never reshape inside a kernel (a reshape per plane measured 30-60 ns, the whole gain
on 7x7 planes). Which kernel runs a layer: :func:`choose_path`.

This module imports numba: import it lazily.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
from numba import njit, prange, types
from numba.extending import overload

from mnnjit.backends.cpu.fp16 import load
from mnnjit.backends.cpu.runtime.intrinsics import deinterleave8_f32
from mnnjit.backends.cpu.cnn_steps import _store_act, _store_rows_act

__all__ = ["choose_path", "s1_banded", "s2_banded", "flat_kernel"]


@njit(inline="always")
def _edge_masks(ml, mr, n, W):
    """ml[i] = 0 where i % W == 0 (first column), mr[i] = 0 where i % W == W - 1 (last column),
    1 elsewhere (float32, for a branch-free select in the stencil loops)."""
    for i in range(n):
        ox = i % W
        ml[i] = np.float32(1.0) if ox > 0 else np.float32(0.0)
        mr[i] = np.float32(1.0) if ox < W - 1 else np.float32(0.0)


# Outputs per band of whole rows in :func:`_dw3_plane_s1` (masks and accumulator stay in L1)
_BAND = 1024


@njit(inline="always")
def _band_rows(H, W):
    """Rows per band of :func:`_dw3_plane_s1_banded` (at least one, at most H)."""
    return max(1, min(H, _BAND // W))


@njit(inline="always")
def _flat_s1_scratch(H, W):
    """Per-task scratch of :func:`_dw3_plane_s1`: (buf, ml, mr, acc) for an H x W plane; the
    masks and ``acc`` cover one band of whole rows."""
    HW = H * W
    buf = np.zeros(HW + 2 * W + 2, np.float32)
    rb = _band_rows(H, W) * W
    ml = np.empty(rb, np.float32)
    mr = np.empty(rb, np.float32)
    _edge_masks(ml, mr, rb, W)
    return buf, ml, mr, np.empty(rb, np.float32)


@njit(inline="always")
def _s1_rows(buf, n, W, ml, mr, acc, wc, b, dst, act):
    """``dst[:n]`` (whole rows) of :func:`_dw3_plane_s1`; ``buf`` starts W+1 values before the
    first of these rows' inputs."""
    w0, w1, w2, w3, w4, w5, w6, w7, w8 = wc[0], wc[1], wc[2], wc[3], wc[4], wc[5], wc[6], wc[7], wc[8]
    zero = np.float32(0.0)
    # every tap as its own slice from 0 (no run-time index offsets in the loop)
    t0, t1, t2 = buf[0:], buf[1:], buf[2:]
    t3, t4, t5 = buf[W:], buf[W + 1:], buf[W + 2:]
    t6, t7, t8 = buf[2 * W:], buf[2 * W + 1:], buf[2 * W + 2:]
    for i in range(n):
        left = w0 * t0[i] + w3 * t3[i] + w6 * t6[i]
        mid = b + w1 * t1[i] + w4 * t4[i] + w7 * t7[i]
        right = w2 * t2[i] + w5 * t5[i] + w8 * t8[i]
        acc[i] = mid + (left if ml[i] != zero else zero) + (right if mr[i] != zero else zero)
    _store_act(dst, 0, acc, 0, zero, n, act)


@njit(inline="always")
def _dw3_plane_s1(src, buf, ml, mr, acc, wc, b, dst, W, act):
    """One channel of a 3x3, stride 1, pads 1, dilation 1 depthwise convolution: ``dst`` [H*W] =
    act(b + taps ``wc`` over ``src`` [H*W]) (flat storage arrays; scratch from
    :func:`_flat_s1_scratch`, ``buf``'s borders stay zero).

    The plane is copied (one flat loop, converting half storage) between W+1 zeros above and below,
    and output i = oy*W + ox is one flat loop over all H*W outputs, no padded columns: tap
    (ky, kx) reads buf[i + ky*W + kx] (buffer offset W+1 = plane start). Row borders come from the
    zeros; the column borders wrap into the neighbouring row, so the left-column taps are dropped
    where ox == 0 and the right-column taps where ox == W-1 (a select on the edge masks).

    Planes of more than one band (``ml`` shorter than the plane; ``banded``) are done band by band
    of whole rows (the masks repeat every row), so masks and ``acc`` stay in L1. One-band planes
    run a kernel compiled without that loop: with it, 7x7 and 14x14 planes measured 15% slower."""
    HW = src.shape[0]
    xc = buf[W + 1:W + 1 + HW]
    for i in range(HW):
        xc[i] = load(src, i)
    _s1_rows(buf, HW, W, ml, mr, acc, wc, b, dst, act)


@njit(inline="always")
def _dw3_plane_s1_banded(src, buf, ml, mr, acc, wc, b, dst, W, act):
    """:func:`_dw3_plane_s1` band by band of ``ml.shape[0]`` outputs (whole rows), for planes
    larger than one band (masks and ``acc`` stay in L1)."""
    HW = src.shape[0]
    xc = buf[W + 1:W + 1 + HW]
    for i in range(HW):
        xc[i] = load(src, i)
    rb = ml.shape[0]
    for i0 in range(0, HW, rb):
        _s1_rows(buf[i0:], min(rb, HW - i0), W, ml, mr, acc, wc, b, dst[i0:], act)


# One parallel driver per plane body (four nearly equal kernels, on purpose): one kernel taking
# both bodies behind a flag measured 15-45 % slower on 7x7 / 14x14 planes.
@njit(parallel=True, cache=True, error_model="numpy")
def _k_dw3x3_s1_flat(x, w, bias, out, H, W, act, nchunk):
    """3x3, stride 1, pads 1, dilation 1 on planes of at most one band (:data:`_BAND` outputs);
    x and out [N*C, H*W] storage arrays, w [C, 9]. Tasks are chunks of (image, channel) planes,
    each computed by :func:`_dw3_plane_s1`."""
    NC = x.shape[0]
    C = w.shape[0]
    for chunk in prange(nchunk):
        c0 = chunk * NC // nchunk
        c1 = (chunk + 1) * NC // nchunk
        buf, ml, mr, acc = _flat_s1_scratch(H, W)
        for nc in range(c0, c1):
            c = nc % C
            _dw3_plane_s1(x[nc], buf, ml, mr, acc, w[c], bias[c], out[nc], W, act)


@njit(parallel=True, cache=True, error_model="numpy")
def _k_dw3x3_s1_banded(x, w, bias, out, H, W, act, nchunk):
    """:func:`_k_dw3x3_s1_flat` for planes larger than one band (:func:`_dw3_plane_s1_banded`)."""
    NC = x.shape[0]
    C = w.shape[0]
    for chunk in prange(nchunk):
        c0 = chunk * NC // nchunk
        c1 = (chunk + 1) * NC // nchunk
        buf, ml, mr, acc = _flat_s1_scratch(H, W)
        for nc in range(c0, c1):
            c = nc % C
            _dw3_plane_s1_banded(x[nc], buf, ml, mr, acc, w[c], bias[c], out[nc], W, act)


#: planes up to this wide run stride 2 on their column halves (:func:`_dw3_plane_s2`), wider
#: ones on their quarter planes (:func:`_dw3_plane_s2_banded`)
_S2_HALVES_MAX_W = 32


@njit(inline="always")
def _s2_band_rows(H, W):
    """Output rows per band of :func:`_dw3_plane_s2_banded` (at least one, at most H/2); a
    plane of :func:`_dw3_plane_s2` is one band."""
    if W <= _S2_HALVES_MAX_W:
        return H // 2
    return max(1, min(H // 2, _BAND // (W // 2)))


#: values past each quarter plane in the stride-2 scratch: :func:`_split_row` writes whole
#: vectors of 8 (up to 7 values past a row, into the next row or, after the last row, here)
_S2_SLACK = 8


@njit(inline="always")
def _flat_s2_scratch(H, W):
    """Per-task scratch of :func:`_dw3_plane_s2`: (E, O, ml, acc) for an H x W plane (H, W even).
    ``E`` holds the even input rows, ``O`` the odd ones, each as two quarter planes (even columns,
    then odd columns; OW+1 zeros in front of each, for the top and left borders); the mask and
    ``acc`` cover one band of output rows."""
    OW = W // 2
    L = OW + 1 + (H // 2) * OW + _S2_SLACK
    E = np.zeros(2 * L, np.float32)
    O = np.zeros(2 * L, np.float32)
    # narrow planes: the column halves' masks, period 2*OW (see _dw3_plane_s2)
    period = 2 * OW if W <= _S2_HALVES_MAX_W else OW
    rb = _s2_band_rows(H, W) * period
    ml = np.empty(rb, np.float32)
    mr = np.empty(rb, np.float32)
    _edge_masks(ml, mr, rb, period)
    return E, O, ml, np.empty(rb, np.float32)


def _split_row(src, s0, dst, d0, d1, n):  # pragma: no cover - replaced by the overload in Numba
    """``dst[d0 + j] = src[s0 + 2j]``, ``dst[d1 + j] = src[s0 + 2j + 1]`` for j < n (float32
    ``dst``, d0 < d1); may write up to 7 values past each run where ``dst`` is long enough."""
    raise NotImplementedError("_split_row() is only callable inside Numba-compiled code")


@njit(inline="always")
def _split_row_f32(src, s0, dst, d0, d1, n):
    """:func:`_split_row` for float32 ``src``: 8 pairs per vector step while the 16 source values
    lie inside ``src`` and the 8 destinations inside ``dst`` (LLVM keeps a scalar loop over
    short rows: 1.4-2.4x slower on MobileNet's planes)."""
    lim = min(min(n, (src.shape[0] - s0) // 2 - 7), dst.shape[0] - d1 - 7)
    nv = max(0, (lim + 7) // 8)
    sp = src.ctypes.data + 4 * s0
    ap = dst.ctypes.data + 4 * d0
    bp = dst.ctypes.data + 4 * d1
    for v in range(nv):
        deinterleave8_f32(sp + 64 * v, ap + 32 * v, bp + 32 * v)
    for j in range(8 * nv, n):
        dst[d0 + j] = src[s0 + 2 * j]
        dst[d1 + j] = src[s0 + 2 * j + 1]


@njit(inline="always")
def _split_row_any(src, s0, dst, d0, d1, n):
    """:func:`_split_row` for half (uint16 bits) ``src``."""
    for j in range(n):
        dst[d0 + j] = load(src, s0 + 2 * j)
        dst[d1 + j] = load(src, s0 + 2 * j + 1)


@overload(_split_row, inline="always")
def _split_row_ol(src, s0, dst, d0, d1, n):
    if src.dtype == types.float32:
        return lambda src, s0, dst, d0, d1, n: _split_row_f32(src, s0, dst, d0, d1, n)
    return lambda src, s0, dst, d0, d1, n: _split_row_any(src, s0, dst, d0, d1, n)


@njit(inline="always")
def _s2_split(src, E, O, OH, OW):
    """The quarter planes of ``src`` [2*OH rows of 2*OW] into ``E``/``O`` (see
    :func:`_flat_s2_scratch`), row by row in order (a row's vector overrun lands in the next
    row, rewritten after it)."""
    P = OW + 1
    L = P + OH * OW + _S2_SLACK
    W = 2 * OW
    for oy in range(OH):
        _split_row(src, 2 * oy * W, E, P + oy * OW, L + P + oy * OW, OW)
        _split_row(src, (2 * oy + 1) * W, O, P + oy * OW, L + P + oy * OW, OW)


@njit(inline="always")
def _s2_taps(acc, n, ml, wc, b, t0, t1, t2, t3, t4, t5, t6, t7, t8):
    """acc[k] = b + sum of wc[i] * t_i[k] for k < n, the left-column taps (0, 3, 6) dropped where
    ``ml[k]`` is 0: the stride-2 stencil, each tap a slice indexed from 0."""
    w0, w1, w2, w3, w4, w5, w6, w7, w8 = wc[0], wc[1], wc[2], wc[3], wc[4], wc[5], wc[6], wc[7], wc[8]
    zero = np.float32(0.0)
    for k in range(n):
        left = w0 * t0[k] + w3 * t3[k] + w6 * t6[k]
        acc[k] = (b + w1 * t1[k] + w2 * t2[k] + w4 * t4[k] + w5 * t5[k] + w7 * t7[k]
                  + w8 * t8[k] + (left if ml[k] != zero else zero))


@njit(inline="always")
def _s2_split_halves(src, A, B, n2, OW):
    """A, B (after OW+1 zeros) = the even and odd columns of the plane ``src`` [n2*2]."""
    P = OW + 1
    Ai = A[P:P + n2]
    Bi = B[P:P + n2]
    for j in range(n2):
        Ai[j] = load(src, 2 * j)
        Bi[j] = load(src, 2 * j + 1)


@njit(inline="always")
def _s2_rows_halves(A, B, R, OW, ml, acc, wc, b, dst, act):
    """R output rows from the column halves of :func:`_s2_split_halves` into ``dst`` [R*OW]:
    with k = oy*2*OW + ox (row 2*oy of the halves), rows 2oy-1, 2oy, 2oy+1 are k-OW, k, k+OW and
    column 2ox-1 is B at k-1 (dropped at ox == 0); the odd rows' k are computed and skipped."""
    P = OW + 1
    _s2_taps(acc, R * 2 * OW - OW, ml, wc, b,
             B[P - OW - 1:], A[P - OW:], B[P - OW:], B[P - 1:], A[P:], B[P:], B[P + OW - 1:],
             A[P + OW:], B[P + OW:])
    _store_rows_act(dst, acc, R, OW, 2 * OW, act)


@njit(inline="always")
def _s2_rows(E, O, k0, n, OH, OW, ml, acc, wc, b, dst, act):
    """Outputs ``k0 .. k0+n`` (whole rows; output k = oy*OW + ox) of :func:`_dw3_plane_s2` into
    ``dst``."""
    P = OW + 1
    L = P + OH * OW + _S2_SLACK
    # input rows 2oy-1, 2oy, 2oy+1 are odd row oy-1, even row oy, odd row oy; columns 2ox-1,
    # 2ox, 2ox+1 are odd column ox-1, even column ox, odd column ox: every tap is a quarter
    # plane at k plus a constant (each its own slice from 0)
    _s2_taps(acc, n, ml, wc, b,
             O[L + k0:], O[k0 + 1:], O[L + k0 + 1:], E[L + k0 + OW:], E[k0 + P:], E[L + k0 + P:],
             O[L + k0 + OW:], O[k0 + P:], O[L + k0 + P:])
    _store_act(dst, k0, acc, 0, np.float32(0.0), n, act)


@njit(inline="always")
def _dw3_plane_s2(src, A, B, ml, acc, wc, b, dst, W, act):
    """One channel of a 3x3, stride 2, pads top/left 1, dilation 1 depthwise convolution of an
    H x W plane, H and W even, W <= :data:`_S2_HALVES_MAX_W`: ``dst`` [(H/2)*(W/2)] =
    act(b + taps ``wc`` over ``src`` [H*W]) (flat storage arrays; scratch from
    :func:`_flat_s2_scratch`, borders stay zero).

    One flat loop splits the plane into its even columns A and odd columns B ([H, OW] each, OW+1
    zeros in front for the top border). With k = oy*2*OW + ox (row 2*oy of A/B), every tap of
    output (oy, ox) is A or B at k plus a constant, so one flat loop over k computes all outputs
    (the odd rows' k computed and skipped: on rows this short that costs less than splitting
    the plane into quarters row by row); rows are then stored through the activation."""
    OW = W // 2
    n2 = src.shape[0] // 2
    _s2_split_halves(src, A, B, n2, OW)
    _s2_rows_halves(A, B, n2 // (2 * OW), OW, ml, acc, wc, b, dst, act)


@njit(inline="always")
def _dw3_plane_s2_banded(src, E, O, ml, acc, wc, b, dst, W, act):
    """:func:`_dw3_plane_s2` for planes wider than :data:`_S2_HALVES_MAX_W`: the plane is split
    row by row into its four quarter planes (even/odd rows x even/odd columns, vector
    deinterleaving). Output k = oy*OW + ox then reads each tap from one quarter plane at k plus a
    constant, so flat loops over the outputs alone compute them (the left taps, which wrap into
    the previous row at ox == 0, dropped by a select on the edge mask), band by band of
    ``ml.shape[0]`` outputs (whole output rows), each stored in one pass through the activation.
    (Faster than the column halves on planes wider than 32; on 28x28 and 14x14 planes the
    row-by-row split costs more than the skipped rows save: :data:`_S2_HALVES_MAX_W`.)"""
    OW = W // 2
    OH = src.shape[0] // (2 * W)
    _s2_split(src, E, O, OH, OW)
    _s2_quarter_bands(E, O, OH, OW, ml, acc, wc, b, dst, act)


@njit(inline="always")
def _s2_quarter_bands(E, O, OH, OW, ml, acc, wc, b, dst, act):
    """``dst`` [OH*OW] = the stride-2 stencil on the quarter planes in ``E``/``O`` (the layout
    of :func:`_flat_s2_scratch`), band by band of ``ml.shape[0]`` outputs (whole rows)."""
    n = OH * OW
    rb = ml.shape[0]
    for k0 in range(0, n, rb):
        _s2_rows(E, O, k0, min(rb, n - k0), OH, OW, ml, acc, wc, b, dst, act)


@njit(parallel=True, cache=True, error_model="numpy")
def _k_dw3x3_s2_flat(x, w, bias, out, H, W, act, nchunk):
    """3x3, stride 2, pads top/left 1, dilation 1, even H and W, planes of one band; x [N*C, H*W]
    and out [N*C, (H/2)*(W/2)] storage arrays, w [C, 9]. Tasks are chunks of (image, channel)
    planes, each computed by :func:`_dw3_plane_s2`."""
    NC = x.shape[0]
    C = w.shape[0]
    for chunk in prange(nchunk):
        c0 = chunk * NC // nchunk
        c1 = (chunk + 1) * NC // nchunk
        A, B, ml, acc = _flat_s2_scratch(H, W)
        for nc in range(c0, c1):
            c = nc % C
            _dw3_plane_s2(x[nc], A, B, ml, acc, w[c], bias[c], out[nc], W, act)


@njit(parallel=True, cache=True, error_model="numpy")
def _k_dw3x3_s2_banded(x, w, bias, out, H, W, act, nchunk):
    """:func:`_k_dw3x3_s2_flat` for planes wider than :data:`_S2_HALVES_MAX_W`
    (:func:`_dw3_plane_s2_banded`)."""
    NC = x.shape[0]
    C = w.shape[0]
    for chunk in prange(nchunk):
        c0 = chunk * NC // nchunk
        c1 = (chunk + 1) * NC // nchunk
        A, B, ml, acc = _flat_s2_scratch(H, W)
        for nc in range(c0, c1):
            c = nc % C
            _dw3_plane_s2_banded(x[nc], A, B, ml, acc, w[c], bias[c], out[nc], W, act)


# The flat kernels were at least as fast as the padded-plane kernel on every MobileNetV2 layer
# size (2-2.7x on 7x7 / 14x14 planes, level at 112x112: docs/DECISIONS.md) - no crossover, so
# every 3x3 pads-1 layer the flat kernels can take runs them.


def choose_path(in_shape: Sequence[int], out_shape: Sequence[int], args: Sequence[int],
                pads: Sequence[int]) -> str:
    """Which kernel runs a depthwise convolution: ``"flat_s1"`` (3x3, stride 1, pads 1),
    ``"flat_s2"`` (3x3, stride 2, pads 1 on even planes) or ``"plane"`` (any shape, the
    padded-plane kernels of :mod:`.depthwise`). ``args`` as :class:`.depthwise.Depthwise` keeps
    them (kh, kw, sh, sw, pt, pl, dh, dw, act); ``pads`` (top, bottom, left, right)."""
    _, _, H, W = in_shape
    OH, OW = out_shape[2], out_shape[3]
    kh, kw, sh, sw, _, _, dh, dw, _ = args
    if (kh, kw, dh, dw) != (3, 3, 1, 1):
        return "plane"
    if (sh, sw) == (1, 1) and pads == (1, 1, 1, 1):
        return "flat_s1"
    if ((sh, sw) == (2, 2) and pads[0] == pads[2] == 1 and H % 2 == 0 and W % 2 == 0
            and (OH, OW) == (H // 2, W // 2)):
        return "flat_s2"
    return "plane"


def s1_banded(H: int, W: int) -> bool:
    """Whether a stride-1 H x W plane runs band by band (:func:`_dw3_plane_s1_banded`): more
    than one band of whole rows (matches :func:`_band_rows`)."""
    return H * W > _BAND and H > 1


def s2_banded(H: int, W: int) -> bool:
    """Whether a stride-2 H x W plane runs on its quarter planes band by band
    (:func:`_dw3_plane_s2_banded`, matching :func:`_s2_band_rows`) rather than on its column
    halves in one pass."""
    return W > _S2_HALVES_MAX_W


def flat_kernel(path: str, H: int, W: int) -> Callable:
    """The parallel kernel ``k(x2, w, bias, out2, H, W, act, nchunk)`` of a flat ``path``
    (``x2``/``out2``: [N*C, plane] storage arrays)."""
    if path == "flat_s2":
        return _k_dw3x3_s2_banded if s2_banded(H, W) else _k_dw3x3_s2_flat
    if path == "flat_s1":
        return _k_dw3x3_s1_banded if s1_banded(H, W) else _k_dw3x3_s1_flat
    raise ValueError(f"depthwise: no flat kernel for path {path!r}")
