"""Vectorisable scalar helpers for generated kernels (imports numba: loaded only by kernels).

LLVM vectorises a kernel's loop only when every call in it can be vectorised. Numba lowers
``math.exp`` on float32 to a libm call, which blocks it (no SVML here), so float32 ``exp`` (and
``sigmoid``, which uses it) call :func:`fast_expf`: Cody-Waite range reduction and a degree-6
polynomial (Cephes' ``expf`` coefficients, about 1 ulp), with 2**n built by an llvmlite bitcast.
Numerical contract: within 2 ulp of numpy's float32 exp, NaN in NaN out, inf above 88.72,
subnormals down to -103.9, 0 below.

Bump ``INTRINSICS_VERSION`` (part of the kernel cache key) whenever this file changes.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
from numba import njit, types
from numba.extending import intrinsic

INTRINSICS_VERSION = 4


@intrinsic
def bitcast_i32_f32(typingctx, x):
    """Reinterpret an int32's bits as a float32 (LLVM ``bitcast``)."""
    if x != types.int32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


@intrinsic
def bitcast_f32_i32(typingctx, x):
    """Reinterpret a float32's bits as an int32 (LLVM ``bitcast``)."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.int32(types.float32), codegen


@intrinsic
def deinterleave8_f32(typingctx, src, even, odd):
    """Split the 16 float32 values at address ``src`` into the 8 even-indexed ones (stored at
    address ``even``) and the 8 odd-indexed ones (at ``odd``): one vector load, two shuffles, two
    vector stores (addresses as int64, ``a.ctypes.data``; the caller guarantees they exist)."""
    if not (src == even == odd == types.int64):
        return None
    f32 = ir.FloatType()
    v16, v8 = ir.VectorType(f32, 16), ir.VectorType(f32, 8)
    i32 = ir.IntType(32)

    def codegen(context, builder, signature, args):
        s_i, e_i, o_i = args
        v = builder.load(builder.inttoptr(s_i, v16.as_pointer()), align=4)
        for addr, first in ((e_i, 0), (o_i, 1)):
            half = builder.shuffle_vector(v, ir.Constant(v16, ir.Undefined),
                                          ir.Constant(ir.VectorType(i32, 8), list(range(first, 16, 2))))
            builder.store(half, builder.inttoptr(addr, v8.as_pointer()), align=4)
        return context.get_dummy_value()
    return types.void(types.int64, types.int64, types.int64), codegen


@intrinsic
def borrow(typingctx, a):
    """A view of array ``a`` without its owner reference (null meminfo and parent): the same
    data, shape and strides. Numba counts references to an array with atomic operations on every
    slice of it and every array passed into an inlined function; on a borrowed view (and on its
    slices) those are no-ops, as on the arrays a ``prange`` body receives. The caller keeps ``a``
    alive (used after the view's last use, e.g. :func:`mnnjit.backends.cpu.cnn_steps._keep_alive`), and a kernel
    never returns a borrowed view (boxed for Python it would own nothing)."""
    if not isinstance(a, types.Array):
        return None

    def codegen(context, builder, signature, args):
        from numba.core import cgutils
        view = cgutils.create_struct_proxy(signature.args[0])(context, builder, value=args[0])
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        view.parent = cgutils.get_null_value(view.parent.type)
        return view._getvalue()
    return a(a), codegen


@njit(inline="always", cache=True)
def f32_order_key(v, nan_bits):
    """An integer whose signed order is the float order of ``v`` (NaN mapped to ``nan_bits`` first).

    Integer max/min reductions vectorise without reassociating; positive NaN bits sort above +inf
    (max propagates NaN), negative NaN bits below -inf (min propagates NaN).
    """
    f = np.float32(v)
    b = np.int64(bitcast_f32_i32(f)) if f == f else np.int64(nan_bits)
    return b ^ ((b >> 31) & 0x7FFFFFFF)


@njit(inline="always", cache=True)
def f32_from_order_key(k):
    """The float32 whose :func:`f32_order_key` is ``k``."""
    b = k ^ ((k >> 31) & 0x7FFFFFFF)
    return bitcast_i32_f32(np.int32(b))


_LOG2E = np.float32(1.44269504088896341)
_C1 = np.float32(0.693359375)
_C2 = np.float32(-2.12194440e-4)
_P0 = np.float32(1.9875691500e-4)
_P1 = np.float32(1.3981999507e-3)
_P2 = np.float32(8.3334519073e-3)
_P3 = np.float32(4.1665795894e-2)
_P4 = np.float32(1.6666665459e-1)
_P5 = np.float32(5.0000001201e-1)
_ONE = np.float32(1.0)
_HALF = np.float32(0.5)
_HI = np.float32(89.0)
_LO = np.float32(-110.0)


@njit(inline="always", cache=True)
def fast_expf(x):
    """float32 exp, vectorisable (see module docstring)."""
    xf = np.float32(x)
    xc = _HI if xf > _HI else xf
    xc = _LO if xc < _LO else xc
    fx = np.floor(xc * _LOG2E + _HALF)
    r = xc - fx * _C1
    r = r - fx * _C2
    z = r * r
    y = ((((_P0 * r + _P1) * r + _P2) * r + _P3) * r + _P4) * r + _P5
    y = y * z + r + _ONE
    n = np.int32(fx)
    n1 = n >> 1
    n2 = n - n1
    s1 = bitcast_i32_f32(np.int32((n1 + 127) << 23))
    s2 = bitcast_i32_f32(np.int32((n2 + 127) << 23))
    res = y * s1 * s2
    return xf if xf != xf else res


@njit(fastmath=True, cache=True, nogil=True, boundscheck=False)
def dot_f32(a, b):
    """The float32 dot product of two 1-D arrays of one length, summed in any order (LLVM
    vectorises it; kept out of line so that the caller's own arithmetic stays strict)."""
    acc = np.float32(0)
    for k in range(a.shape[0]):
        acc += a[k] * b[k]
    return acc
