"""Row-wise steps of the whole-plan kernel (:mod:`.whole_plan`): softmax and layer norm over the
last axis, compiled once per process (disk cache) and called from the generated kernels.

Written out as loops in a step of the kernel, a row's max and sums are serial chains (a float
reduction is not reordered without fast-math flags) and the exp cannot vectorise beside them:
attention's softmax over 128-wide rows took ~18 ns an element. Here the max is an integer max
over order keys and the sums run under ``reassoc`` alone (no finite-math assumption, so NaN and
infinities keep the reference's results); both vectorise, and the exp and the scaling are loops
of their own that vectorise. Results are the reference's up to the order of the sums.

This module imports numba: import it lazily.
"""
from __future__ import annotations

from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from mnnjit.backends.cpu.runtime.intrinsics import bitcast_f32_i32, bitcast_i32_f32
from mnnjit.backends.cpu.runtime.intrinsics import _C1, _C2, _LOG2E, _P0, _P1, _P2, _P3, _P4, _P5

__all__ = ["softmax_rows", "layer_norm_rows", "opaque"]


@njit(fastmath={"reassoc"}, cache=True, nogil=True, boundscheck=False)
def _sum(a, n):
    s = np.float32(0)
    for t in range(n):
        s += a[t]
    return s


@njit(fastmath={"reassoc"}, cache=True, nogil=True, boundscheck=False)
def _sum_sq_dev(a, n, mean):
    s = np.float32(0)
    for t in range(n):
        d = a[t] - mean
        s += d * d
    return s


#: Order keys (:func:`_key`) of +inf and -inf: a key above the first or below the second is a NaN's.
_KEY_PINF = np.int32(0x7F800000)
_KEY_NINF = np.int32(-2139095041)  # 0xFF800000 ^ 0x7FFFFFFF as int32

#: Elements of a block of rows softmax works on in one set of passes (32 KB: its passes stay in L1).
SOFTMAX_BLOCK = 8192


@njit(inline="always")
def _key(v):
    # an int32 whose signed order is the float order (NaN bits beyond the infinities): integer max
    # and min reductions vectorise, where a float max reduction stays scalar without fast-math
    b = bitcast_f32_i32(v)
    return np.int32(b ^ ((b >> 31) & np.int32(0x7FFFFFFF)))


@njit(cache=True, nogil=True, boundscheck=False)
def _row_max(x, n):
    """``np.max`` of ``x[:n]`` (NaN when any element is NaN)."""
    hi = lo = _key(x[0])
    for t in range(n):
        k = _key(x[t])
        hi = max(hi, k)
        lo = min(lo, k)
    if hi > _KEY_PINF or lo < _KEY_NINF:
        return np.float32(np.nan)
    return bitcast_i32_f32(np.int32(hi ^ ((hi >> 31) & np.int32(0x7FFFFFFF))))


#: Below this, softmax's ``exp(x - max)`` is taken as 0: its exp is under float32's smallest normal
#: (1.2e-38), and subnormal values cost ~10x in every later pass and product (attention over
#: spread-out scores: the softmax alone went from 0.8 to 1.8 ns an element).
_EXP_FLUSH = np.float32(-87.0)


@njit(inline="always")
def _exp_nonpositive(x):
    # exp of x <= 0 (or NaN) as intrinsics.fast_expf computes it, one power-of-two scale (the
    # result is normal above the flush point), 0 below it
    xc = x if not (x < _EXP_FLUSH) else _EXP_FLUSH
    fx = np.floor(xc * _LOG2E + np.float32(0.5))
    r = xc - fx * _C1
    r = r - fx * _C2
    z = r * r
    y = ((((_P0 * r + _P1) * r + _P2) * r + _P3) * r + _P4) * r + _P5
    y = y * z + r + np.float32(1)
    e = y * bitcast_i32_f32(np.int32((np.int32(fx) + 127) << 23))
    e = np.float32(0) if x < _EXP_FLUSH else e
    return x if x != x else e


@njit(fastmath={"contract"}, nogil=True, boundscheck=False, error_model="numpy")
def _exp_inplace(a, n):
    # (``contract``: the polynomial's products and sums as FMAs, ~15 % faster, as accurate)
    for t in range(n):
        a[t] = _exp_nonpositive(a[t])


@intrinsic
def opaque(typingctx, x):
    """``x`` as an int64 the optimiser cannot see through (an empty inline assembly): a loop
    bound LLVM must not specialise on (see :func:`.plan_views.nest`)."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        v = context.cast(builder, args[0], signature.args[0], types.int64)
        return builder.asm(ir.FunctionType(ir.IntType(64), [ir.IntType(64)]), "", "=r,0", [v], False)
    return types.int64(x), codegen


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def softmax_rows(x, o, rows, n):
    """``o[r] = exp(x[r] - max(x[r])) / sum(...)`` for each of ``rows`` rows of ``n`` values
    (flat C order; ``o`` may not alias ``x``)."""
    # the sizes opaque: LLVM inlines this into a kernel step that passes them as constants and,
    # specialised to rows of 32, vectorised it worse (128 x 32: 9.1 us against 2.6)
    rows, n = opaque(rows), opaque(n)
    # blocks of rows, three passes each while they sit in L1: ``x - max`` per row, one exp over
    # the whole block (full vectors even for rows of 8), then each row's sum and scaling
    per = max(1, SOFTMAX_BLOCK // n)
    for r0 in range(0, rows, per):
        r1 = min(rows, r0 + per)
        for r in range(r0, r1):
            xr = x[r * n:(r + 1) * n]
            orow = o[r * n:(r + 1) * n]
            mx = _row_max(xr, n)
            for t in range(n):
                orow[t] = xr[t] - mx
        _exp_inplace(o[r0 * n:r1 * n], (r1 - r0) * n)
        for r in range(r0, r1):
            orow = o[r * n:(r + 1) * n]
            # (a product by the reciprocal: within an ulp of the reference's quotient, and a
            # quarter of the division's time)
            inv = np.float32(1) / _sum(orow, n)
            for t in range(n):
                orow[t] = orow[t] * inv
    return 0


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def layer_norm_rows(x, o, rows, n, gamma, has_gamma, beta, has_beta, eps, rms):
    """Layer norm of each of ``rows`` rows of ``n`` values (flat C order): ``(x - mean) /
    sqrt(mean((x - mean)^2) + eps)`` (``rms``: mean 0), times ``gamma`` and plus ``beta``
    (``n`` values each) when given."""
    for r in range(rows):
        xr = x[r * n:(r + 1) * n]
        orow = o[r * n:(r + 1) * n]
        mean = np.float32(0) if rms else np.float32(_sum(xr, n) / np.float32(n))
        var = np.float32(_sum_sq_dev(xr, n, mean) / np.float32(n))
        inv = np.float32(1) / np.float32(np.sqrt(var + eps))
        if has_gamma and has_beta:
            for t in range(n):
                orow[t] = (xr[t] - mean) * inv * gamma[t] + beta[t]
        elif has_gamma:
            for t in range(n):
                orow[t] = (xr[t] - mean) * inv * gamma[t]
        elif has_beta:
            for t in range(n):
                orow[t] = (xr[t] - mean) * inv + beta[t]
        else:
            for t in range(n):
                orow[t] = (xr[t] - mean) * inv
    return 0
