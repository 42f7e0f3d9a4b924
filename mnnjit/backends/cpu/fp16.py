"""float16 storage for Numba kernels, converted with llvmlite intrinsics.

Numba has no CPU float16 arithmetic and cannot type ``float16`` arrays, so fp16 data is held as
``uint16`` arrays (the bits of IEEE half floats: ``a.view(np.uint16)`` of a ``np.float16`` array)
and every kernel computes in float32:

* :func:`f16_to_f32` - ``bitcast i16 -> half``, ``fpext half -> float``
* :func:`f32_to_f16` - ``fptrunc float -> half`` (round to nearest even, as numpy), ``bitcast -> i16``

LLVM lowers both to F16C ``vcvtph2ps``/``vcvtps2ph`` on x86 (vectorised inside ``prange`` loops).
:func:`load` and :func:`store` are dtype-generic: on a ``uint16`` array they convert, on a float
array they are a plain (float32) load/store, so one kernel source compiles to both an fp16-storage
and an fp32 version with no branch at run time.

This module imports numba: import it lazily (never from ``import mnnjit``).
"""
from __future__ import annotations

from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
import numpy as np  # noqa: E402
from llvmlite import ir  # noqa: E402
from numba import njit, prange, types  # noqa: E402
from numba.core import errors  # noqa: E402
from numba.extending import intrinsic, overload  # noqa: E402

__all__ = ["f16_to_f32", "f32_to_f16", "load", "store", "widen", "to_f16", "to_f32", "as_bits",
           "STORAGE_F16"]

#: numpy dtype of fp16 storage as the Numba kernels see it.
STORAGE_F16 = np.dtype(np.uint16)


@intrinsic
def f16_to_f32(typingctx, bits):
    """Numba intrinsic: the float32 value of the IEEE half whose bits are ``bits`` (an integer)."""
    if not isinstance(bits, types.Integer):
        raise errors.TypingError(f"f16_to_f32 needs integer half bits, got {bits}")

    def codegen(context, builder, signature, args):
        v = args[0]
        if v.type.width > 16:
            v = builder.trunc(v, ir.IntType(16))
        elif v.type.width < 16:
            v = builder.zext(v, ir.IntType(16))
        return builder.fpext(builder.bitcast(v, ir.HalfType()), ir.FloatType())

    return types.float32(bits), codegen


@intrinsic
def f32_to_f16(typingctx, value):
    """Numba intrinsic: the uint16 bits of ``value`` (a float) rounded to IEEE half (nearest even)."""
    if not isinstance(value, types.Float):
        raise errors.TypingError(f"f32_to_f16 needs a float, got {value}")

    def codegen(context, builder, signature, args):
        half = builder.fptrunc(args[0], ir.HalfType())
        return builder.bitcast(half, ir.IntType(16))

    return types.uint16(value), codegen


def load(a, i):  # pragma: no cover - replaced by the overload inside Numba
    """``float32(a[i])``; for a uint16 (fp16-bits) array the half value as float32."""
    raise NotImplementedError("load() is only callable inside Numba-compiled code")


def store(a, i, v):  # pragma: no cover - replaced by the overload inside Numba
    """``a[i] = v``; for a uint16 (fp16-bits) array ``v`` rounded to half."""
    raise NotImplementedError("store() is only callable inside Numba-compiled code")


@overload(load, inline="always")
def _load_ol(a, i):
    if not isinstance(a, types.Array):
        return None
    if a.dtype == types.uint16:
        def impl(a, i):
            return f16_to_f32(a[i])
    elif isinstance(a.dtype, types.Float):
        def impl(a, i):
            return np.float32(a[i])
    else:
        raise errors.TypingError(f"load(): unsupported storage dtype {a.dtype}")
    return impl


@overload(store, inline="always")
def _store_ol(a, i, v):
    if not isinstance(a, types.Array):
        return None
    if a.dtype == types.uint16:
        def impl(a, i, v):
            a[i] = f32_to_f16(np.float32(v))
    elif isinstance(a.dtype, types.Float):
        def impl(a, i, v):
            a[i] = v
    else:
        raise errors.TypingError(f"store(): unsupported storage dtype {a.dtype}")
    return impl


def widen(src, buf):  # pragma: no cover - replaced by the overload inside Numba
    """A float32 view of 1-D ``src``: ``src`` itself if it is float32, else ``buf[:n]`` filled
    with the widened halves (one vectorised F16C pass, so later loops read float32)."""
    raise NotImplementedError("widen() is only callable inside Numba-compiled code")


@overload(widen, inline="always")
def _widen_ol(src, buf):
    if not isinstance(src, types.Array):
        return None
    if src.dtype == types.uint16:
        def impl(src, buf):
            n = src.shape[0]
            for i in range(n):
                buf[i] = f16_to_f32(src[i])
            return buf[:n]
    elif src.dtype == types.float32:
        def impl(src, buf):
            return src
    else:
        raise errors.TypingError(f"widen(): unsupported storage dtype {src.dtype}")
    return impl


@njit(parallel=True, cache=True)
def _to_f16_kernel(src, dst):
    for i in prange(src.size):
        dst[i] = f32_to_f16(np.float32(src[i]))


@njit(parallel=True, cache=True)
def _to_f32_kernel(src, dst):
    for i in prange(src.size):
        dst[i] = f16_to_f32(src[i])


def as_bits(a: np.ndarray) -> np.ndarray:
    """The uint16 view of a float16 array (the form the kernels take); uint16 passes through."""
    if a.dtype == np.float16:
        return a.view(np.uint16)
    if a.dtype == np.uint16:
        return a
    raise TypeError(f"expected float16 storage, got dtype {a.dtype}")


def to_f16(a: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """float32 array -> new (or ``out``) float16 array, converted in parallel with F16C."""
    src = np.ascontiguousarray(a, dtype=np.float32)
    if out is None:
        out = np.empty(src.shape, np.float16)
    elif out.shape != src.shape or out.dtype != np.float16 or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous float16 array of shape {src.shape}")
    _to_f16_kernel(src.reshape(-1), out.view(np.uint16).reshape(-1))
    return out


def to_f32(a: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """float16 array -> new (or ``out``) float32 array, converted in parallel with F16C."""
    src = np.ascontiguousarray(as_bits(np.asarray(a)))
    if out is None:
        out = np.empty(src.shape, np.float32)
    elif out.shape != src.shape or out.dtype != np.float32 or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous float32 array of shape {src.shape}")
    _to_f32_kernel(src.reshape(-1), out.reshape(-1))
    return out
