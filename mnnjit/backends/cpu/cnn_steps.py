"""CNN kernels with float16 or float32 storage, computing in float32.

Every kernel here is written once against the dtype-generic :func:`fp16.load`/:func:`fp16.store`,
so it compiles to an fp16-storage version (``np.float16`` arrays, passed to Numba as their
``uint16`` bits) and to an fp32 version: the fp32 one is the baseline the fp16 path is measured
against, and the kernel the fp32 backend may use.

Activations are NCHW. The output storage dtype follows the input's (float16 in, float16 out).
Convolutions are wrappers over :mod:`mnnjit.backends.cpu.gemm.conv` (the GEMM micro-kernel; weights given as a
*weight source*, see :mod:`.quant`) and :mod:`.depthwise`; elementwise, pooling and global pooling
kernels live here.

Activation codes (``act``): ``""``, ``"relu"``, ``"relu6"``, ``"sigmoid"``, ``"tanh"``,
``"hard_swish"``, ``"silu"``.

This module imports numba: import it lazily.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

import numpy as np
from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
from numba import njit, prange

from mnnjit.backends.cpu.fp16 import load, store
from mnnjit.backends.cpu.runtime.intrinsics import fast_expf
from mnnjit.backends.cpu.quant import QuantRows, as_weight_source

__all__ = ["ACTIVATIONS", "activation", "add", "conv2d", "depthwise_conv2d", "pool2d",
           "global_avg_pool", "storage_view", "new_like"]

ACTIVATIONS = {"": 0, "none": 0, "relu": 1, "relu6": 2, "sigmoid": 3, "tanh": 4,
               "hard_swish": 5, "silu": 6}



def _act_code(act: str) -> int:
    try:
        return ACTIVATIONS[act or ""]
    except KeyError:
        raise ValueError(f"unknown activation {act!r}; expected one of "
                         f"{sorted(k for k in ACTIVATIONS if k)}") from None


@njit(inline="always")
def act_from(d, s, n, act):
    """d[j] = act(s[j]) for j < n (storage arrays; ``s`` may be ``d``), one loop per activation
    code 1-6: a code tested per element inside one loop keeps the loop scalar, 7 ns an element for
    silu, against 1. exp goes through the vectorised fast_expf (libm's expf / tanhf calls keep a
    loop scalar: 19 ns an element for tanh). Code 0 copies nothing (callers handle it)."""
    one = np.float32(1.0)
    if act == 1:
        for j in range(n):
            store(d, j, max(load(s, j), np.float32(0.0)))
    elif act == 2:
        for j in range(n):
            store(d, j, min(max(load(s, j), np.float32(0.0)), np.float32(6.0)))
    elif act == 3:
        for j in range(n):
            store(d, j, one / (one + fast_expf(-load(s, j))))
    elif act == 4:
        for j in range(n):
            v = load(s, j)
            store(d, j, one - np.float32(2.0) / (one + fast_expf(v + v)))
    elif act == 5:
        for j in range(n):
            v = load(s, j)
            store(d, j, v * min(max(v + np.float32(3.0), np.float32(0.0)), np.float32(6.0)) / np.float32(6.0))
    elif act == 6:
        for j in range(n):
            v = load(s, j)
            store(d, j, v / (one + fast_expf(-v)))


@njit(inline="always")
def act_inplace(d, n, act):
    """d[j] = act(d[j]) for j < n (see :func:`act_from`)."""
    act_from(d, d, n, act)


@njit(inline="always")
def _store_act(dst, d0, src, s0, b, n, act):
    """dst[d0 + j] = act(src[s0 + j] + b) for j < n; the activation switch sits outside the loops
    (a run-time branch inside a loop stops LLVM vectorising it, and scalar half conversions are
    several times slower than the vector F16C ones). The loops index slices from 0: an index
    like ``d0 + j`` of unknown sign keeps Numba's negative-index check, which blocks
    vectorisation (measured 20x on an int8 dot product)."""
    d = dst[d0:d0 + n]
    s = src[s0:s0 + n]
    if act == 0:
        for j in range(n):
            store(d, j, load(s, j) + b)
    elif act == 1:
        for j in range(n):
            store(d, j, max(load(s, j) + b, np.float32(0.0)))
    elif act == 2:
        for j in range(n):
            store(d, j, min(max(load(s, j) + b, np.float32(0.0)), np.float32(6.0)))
    else:   # biased values first, then the activation in place (the row is in L1)
        for j in range(n):
            store(d, j, load(s, j) + b)
        act_inplace(d, n, act)


@njit(inline="always")
def _store_rows_act(dst, src, rows, n, ss, act):
    """dst[r*n + j] = act(src[r*ss + j]) for r < rows, j < n: :func:`_store_act` for a block of
    rows, with the two slices made once and unsigned indices (no negative-index fix-up, so the
    inner loop vectorises without a slice per row). A slice made per row inside a loop costs an
    atomic reference-count pair in a serial kernel (one not run as the body of a ``prange``):
    on 7-value rows (14x14 stride-2 planes) this is ~4x faster than :func:`_store_act` per row."""
    d = dst[:rows * n]
    s = src[:(rows - 1) * ss + n]
    if act == 0:
        for r in range(rows):
            for j in range(n):
                store(d, np.uint64(r * n + j), load(s, np.uint64(r * ss + j)))
    elif act == 1:
        for r in range(rows):
            for j in range(n):
                store(d, np.uint64(r * n + j), max(load(s, np.uint64(r * ss + j)), np.float32(0.0)))
    elif act == 2:
        for r in range(rows):
            for j in range(n):
                store(d, np.uint64(r * n + j),
                      min(max(load(s, np.uint64(r * ss + j)), np.float32(0.0)), np.float32(6.0)))
    else:
        for r in range(rows):
            for j in range(n):
                store(d, np.uint64(r * n + j), load(s, np.uint64(r * ss + j)))
        act_inplace(d, rows * n, act)


@njit(inline="always")
def _add_act(dst, a, b, i0, n, act):
    """dst[i] = act(a[i] + b[i]) for i in i0 .. i0+n (activation switch outside the loops)."""
    d = dst[i0:i0 + n]
    x = a[i0:i0 + n]
    y = b[i0:i0 + n]
    if act == 0:
        for i in range(n):
            store(d, i, load(x, i) + load(y, i))
    elif act == 1:
        for i in range(n):
            store(d, i, max(load(x, i) + load(y, i), np.float32(0.0)))
    elif act == 2:
        for i in range(n):
            store(d, i, min(max(load(x, i) + load(y, i), np.float32(0.0)), np.float32(6.0)))
    else:
        for i in range(n):
            store(d, i, load(x, i) + load(y, i))
        act_inplace(d, n, act)


_CHUNK = 8192


def _writable(a: np.ndarray) -> np.ndarray:
    """``a`` as a writable array: Numba compiles a separate specialisation for read-only arrays
    (graph constants and cached node values are read-only), so hand it a writable view when
    numpy allows one, else a copy. The kernels never write their inputs."""
    if a.flags.writeable:
        return a
    v = a.view()
    try:
        v.flags.writeable = True
        return v
    except ValueError:
        return a.copy()


def storage_view(a: np.ndarray) -> np.ndarray:
    """The array a kernel takes: float16 -> its uint16 bits; float32 unchanged (read-only arrays
    are given as writable views, see :func:`_writable`)."""
    a = _writable(a)
    if a.dtype == np.float16:
        return a.view(np.uint16)
    if a.dtype == np.float32:
        return a
    raise TypeError(f"activations must be float16 or float32, got {a.dtype}")


def new_like(dtype: np.dtype, shape: Sequence[int]) -> np.ndarray:
    """An uninitialised activation array of storage ``dtype`` (float16 or float32)."""
    return np.empty(tuple(shape), dtype)


# ---------------------------------------------------------------- elementwise
@njit(parallel=True, cache=True, error_model="numpy")
def _k_act(x, out, act):
    """out = act(x), one pass per chunk (:func:`act_from`; a copy then :func:`act_inplace` is a
    second pass over memory)."""
    nch = (x.size + _CHUNK - 1) // _CHUNK
    for ch in prange(nch):
        i0 = ch * _CHUNK
        n = min(_CHUNK, x.size - i0)
        if act > 2:
            act_from(out[i0:i0 + n], x[i0:i0 + n], n, act)
        else:
            _store_act(out, i0, x, i0, np.float32(0.0), n, act)


#: unary ops of model steps that are not activation codes (no convolution epilogue applies
#: them): the ``form`` codes of :func:`_k_unary`
UNARY_FORMS = {"gelu_tanh": 0, "gelu": 1, "erf": 2}


@njit(parallel=True, cache=True, error_model="numpy")
def _k_unary(x, out, form):
    """out = f(x) in float32: GELU's tanh approximation (form 0, MNN's GELU), GELU's erf form (1)
    or erf (2)."""
    nch = (x.size + _CHUNK - 1) // _CHUNK
    c2, k, r2 = np.float32(-1.5957691216057308), np.float32(0.044715), np.float32(0.7071067811865476)
    half, one = np.float32(0.5), np.float32(1.0)
    for ch in prange(nch):
        i0 = ch * _CHUNK
        n = min(_CHUNK, x.size - i0)
        d = out[i0:i0 + n]
        s = x[i0:i0 + n]
        if form == 0:   # 0.5 v (1 + tanh(y)) = v / (1 + exp(-2y)): a vectorised exp, 4x libm's tanh
            for j in range(n):
                v = load(s, j)
                store(d, j, v / (one + fast_expf(c2 * (v + k * v * v * v))))
        elif form == 1:
            for j in range(n):
                v = load(s, j)
                store(d, j, half * v * (one + np.float32(math.erf(v * r2))))
        else:
            for j in range(n):
                store(d, j, np.float32(math.erf(load(s, j))))


@njit(parallel=True, cache=True, error_model="numpy")
def _k_add(a, b, out, act):
    nch = (a.size + _CHUNK - 1) // _CHUNK
    for ch in prange(nch):
        i0 = ch * _CHUNK
        _add_act(out, a, b, i0, min(_CHUNK, a.size - i0), act)


def _flat_out(x: np.ndarray, out: Optional[np.ndarray]) -> np.ndarray:
    if out is None:
        return np.empty_like(x)
    if out.shape != x.shape or out.dtype != x.dtype or not out.flags.c_contiguous:
        raise ValueError(f"out must be C-contiguous {x.dtype} of shape {x.shape}")
    return out


def activation(x: np.ndarray, act: str, out: Optional[np.ndarray] = None) -> np.ndarray:
    """``act(x)`` elementwise; float16 or float32 storage (computed in float32)."""
    x = np.ascontiguousarray(x)
    out = _flat_out(x, out)
    _k_act(storage_view(x).reshape(-1), storage_view(out).reshape(-1), _act_code(act))
    return out


def add(a: np.ndarray, b: np.ndarray, act: str = "", out: Optional[np.ndarray] = None) -> np.ndarray:
    """``act(a + b)`` for two same-shape, same-storage arrays (the residual add of CNNs)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        raise ValueError(f"add: operands differ: {a.shape} {a.dtype} vs {b.shape} {b.dtype}")
    a = np.ascontiguousarray(a)
    b = np.ascontiguousarray(b)
    out = _flat_out(a, out)
    _k_add(storage_view(a).reshape(-1), storage_view(b).reshape(-1),
           storage_view(out).reshape(-1), _act_code(act))
    return out


# ---------------------------------------------------------------- conv, depthwise
@njit(inline="never")
def _keep_alive(a, b):
    """Reference two scratch arrays after their raw pointers were used: Numba frees an array
    right after its last use, and ``a.ctypes.data`` does not count as one."""
    return a.shape[0] + b.shape[0]


def _conv_out_hw(h: int, w: int, kh: int, kw: int, stride, pads, dilation) -> Tuple[int, int]:
    """Output height and width of a convolution / pooling window (ValueError when empty)."""
    oh = (h + pads[0] + pads[1] - ((kh - 1) * dilation[0] + 1)) // stride[0] + 1
    ow = (w + pads[2] + pads[3] - ((kw - 1) * dilation[1] + 1)) // stride[1] + 1
    if oh <= 0 or ow <= 0:
        raise ValueError(f"conv2d: kernel {(kh, kw)} (dilation {tuple(dilation)}) larger than "
                         f"padded input {(h + pads[0] + pads[1], w + pads[2] + pads[3])}")
    return oh, ow


def conv2d(x: np.ndarray, weight, bias: Optional[np.ndarray], kernel: Tuple[int, int],
           stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), group: int = 1,
           act: str = "") -> np.ndarray:
    """2-D convolution, NCHW, output storage = input storage (float16 or float32), on the GEMM
    micro-kernel (:mod:`mnnjit.backends.cpu.gemm.conv`; weights packed on every call: kernel-step plans keep a
    prepared :class:`mnnjit.backends.cpu.gemm.conv.ConvGemm` instead).

    ``weight`` is a weight source (:class:`.quant.DenseRows`, :class:`.quant.HalfRows`,
    :class:`.quant.QuantRows`) or a float32/float16 ``[O, C/group*kh*kw]`` array;
    ``pads`` = (top, bottom, left, right)."""
    from mnnjit.backends.cpu.gemm.conv import ConvGemm, PackedWeights, pack_grouped
    src = as_weight_source(weight)
    if x.ndim != 4:
        raise ValueError(f"conv2d: input must be NCHW (4-D), got shape {x.shape}")
    O, K = src.shape
    if isinstance(src, QuantRows) and group == 1:
        pw = PackedWeights.from_quant_rows(src)
    elif group > 1:
        pw = pack_grouped(src.dense(), group)
    else:
        pw = PackedWeights.from_dense(src.dense())
    x = np.ascontiguousarray(x)
    cv = ConvGemm(pw, bias, x.shape, kernel, stride, pads, dilation, group, act)
    out = np.empty(cv.out_shape, x.dtype)
    cv.run(storage_view(x), storage_view(out))
    return out


def depthwise_conv2d(x: np.ndarray, weight: np.ndarray, bias: Optional[np.ndarray],
                     kernel: Tuple[int, int], stride=(1, 1), pads=(0, 0, 0, 0),
                     dilation=(1, 1), act: str = "") -> np.ndarray:
    """Depthwise 2-D convolution (group == C == O), NCHW; ``weight`` float32 ``[C, kh*kw]``
    (any shape with C*kh*kw elements); output storage = input storage (:mod:`.depthwise`)."""
    from mnnjit.backends.cpu.depthwise.planes import depthwise_conv2d as dw
    return dw(x, weight, bias, kernel, stride, pads, dilation, act)


# ---------------------------------------------------------------- pooling
@njit(parallel=True, cache=True, error_model="numpy")
def _k_pool(x, out, is_max, kh, kw, sh, sw, pt, pl, pb, pr, include_pad):
    """Max or average pooling of storage arrays x [N, C, H, W] -> out [N, C, OH, OW]. Each output
    row accumulates, tap by tap in (ky, kx) order (the reference's order), the input row segment
    that tap reads for the outputs whose window holds it: contiguous at stride 1, no per-tap
    bounds tests."""
    N, C, H, W = x.shape
    OH, OW = out.shape[2], out.shape[3]
    # per output column: cells of its window inside the image, or inside the padded image
    cx = np.empty(OW, np.int64)
    for ox in range(OW):
        x0 = ox * sw - pl
        if include_pad:
            cx[ox] = max(0, min(x0 + kw, W + pr) - max(x0, -pl))
        else:
            cx[ox] = max(0, min(x0 + kw, W) - max(x0, 0))
    for nc in prange(N * C):
        n = nc // C
        c = nc % C
        acc = np.empty(OW, np.float32)
        for oy in range(OH):
            y0 = oy * sh - pt
            for ox in range(OW):
                acc[ox] = np.float32(-np.inf) if is_max else np.float32(0.0)
            for ky in range(kh):
                iy = y0 + ky
                if iy < 0 or iy >= H:
                    continue
                row = x[n, c, iy]
                for kx in range(kw):
                    # outputs ox whose tap kx reads inside the row: 0 <= ox*sw - pl + kx < W
                    lo = max(0, (pl - kx + sw - 1) // sw)
                    hi = min(OW, (W - 1 + pl - kx) // sw + 1)
                    if hi <= lo:
                        continue
                    a = acc[lo:hi]
                    if sw == 1:
                        r = row[lo - pl + kx:]
                        if is_max:
                            for j in range(hi - lo):
                                a[j] = max(a[j], load(r, j))
                        else:
                            for j in range(hi - lo):
                                a[j] += load(r, j)
                    else:
                        r = row[lo * sw - pl + kx:]
                        for j in range(hi - lo):
                            v = load(r, j * sw)
                            a[j] = max(a[j], v) if is_max else a[j] + v
            orow = out[n, c, oy]
            if is_max:
                for ox in range(OW):
                    store(orow, ox, acc[ox])
            else:
                if include_pad:
                    cy = max(0, min(y0 + kh, H + pb) - max(y0, -pt))
                else:
                    cy = max(0, min(y0 + kh, H) - max(y0, 0))
                for ox in range(OW):
                    cnt = cy * cx[ox]
                    store(orow, ox, acc[ox] / np.float32(cnt) if cnt > 0 else np.float32(0.0))


@njit(inline="always", fastmath={"reassoc"})
def _row_mean(x, out, i):
    """out[i] = mean of row i of x [NC, P]; the sum may be reassociated (so it vectorises: a
    sequential sum is one add latency per element)."""
    P = x.shape[1]
    s = np.float32(0.0)
    for p in range(P):
        s += load(x, (i, p))
    store(out, i, s / np.float32(P))


@njit(parallel=True, cache=True, fastmath={"reassoc"})
def _k_global_avg(x, out):
    """out[i] = mean of row i of x [NC, P] (storage arrays), rows split over the threads."""
    for i in prange(x.shape[0]):
        _row_mean(x, out, i)


@njit(cache=True, fastmath={"reassoc"})
def _k_global_avg_serial(x, out):
    """:func:`_k_global_avg` on the calling thread (small inputs: waking the thread team costs
    more than the sums)."""
    for i in range(x.shape[0]):
        _row_mean(x, out, i)


#: Global average pooling over fewer elements than this runs serially (on MobileNetV2's 1280 x 7x7
#: waking the thread team costs more than the sums).
GAP_SERIAL_MAX = 1 << 17


def pool2d(x: np.ndarray, kind: str, kernel: Tuple[int, int], stride=(1, 1),
           pads=(0, 0, 0, 0), out_hw: Optional[Tuple[int, int]] = None,
           count_include_pad: bool = True) -> np.ndarray:
    """Max or average pooling, NCHW (``pads`` = top, bottom, left, right; ``out_hw`` overrides
    the floor-mode output size, e.g. for ceil mode). Padding never wins a max."""
    if kind not in ("max", "avg"):
        raise ValueError(f"pool2d: kind must be 'max' or 'avg', got {kind!r}")
    N, C, H, W = x.shape
    kh, kw = kernel
    if out_hw is None:
        out_hw = _conv_out_hw(H, W, kh, kw, stride, pads, (1, 1))
    out = np.empty((N, C) + tuple(out_hw), x.dtype)
    _k_pool(storage_view(np.ascontiguousarray(x)), storage_view(out), kind == "max", kh, kw,
            stride[0], stride[1], pads[0], pads[2], pads[1], pads[3], bool(count_include_pad))
    return out


def global_avg_pool(x: np.ndarray) -> np.ndarray:
    """Mean over H, W: [N, C, H, W] -> [N, C, 1, 1] (sum in float32)."""
    N, C, H, W = x.shape
    out = np.empty((N, C, 1, 1), x.dtype)
    kernel = _k_global_avg_serial if x.size < GAP_SERIAL_MAX else _k_global_avg
    kernel(storage_view(np.ascontiguousarray(x)).reshape(N * C, H * W), storage_view(out).reshape(-1))
    return out
