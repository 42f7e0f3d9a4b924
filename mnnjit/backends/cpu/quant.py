"""Weight sources for the CPU GEMM/conv kernels: fp32, fp16 storage, and quantized codes.

A *weight source* is a ``[O, K]`` weight matrix (``K`` = C/group*kh*kw for a convolution) that
the kernels only ever touch through ``matmul(o0, o1, b, out)``: ``out = W[o0:o1] @ b`` in float32.

* :class:`DenseRows` - float32 weights (memory 0/1, and precision 0/1): one BLAS call.
* :class:`HalfRows` - float16 storage (precision=low): rows are widened a block at a time.
* :class:`QuantRows` - int8 codes (8-bit) or packed nibbles (<= 4-bit) with per-channel or
  per-block ``scale``/``offset`` (memory=low): ``w = code * scale[g] + offset[g]``; a block of
  rows is dequantized into a small scratch buffer (cache resident) feeding BLAS, so the whole
  model is never expanded to float32.

:func:`gemm_dynamic_int8` is the other memory=low strategy (activations quantized per column to
int8, int8 x int8 -> int32 accumulation in Numba); ``benchmarks/precision.py`` measures both and
the dequantize-a-block path is the faster one here (see ``docs/notes/precision.md``).

This module imports numba: import it lazily.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np
from numba import njit, prange

from .fp16 import f16_to_f32

__all__ = ["DenseRows", "HalfRows", "QuantRows", "as_weight_source", "gemm_dynamic_int8",
           "quantize_dynamic_int8"]

_BLOCK_BYTES = 128 * 1024  # fp32 scratch per dequantized row block


def _row_block(k: int) -> int:
    return max(8, _BLOCK_BYTES // (4 * max(k, 1)))


class DenseRows:
    """float32 ``[O, K]`` weights."""

    def __init__(self, w: np.ndarray) -> None:
        w = np.ascontiguousarray(w, np.float32)
        if w.ndim != 2:
            raise ValueError(f"weight matrix must be 2-D [O, K], got shape {w.shape}")
        self.w = w
        self.shape: Tuple[int, int] = w.shape

    @property
    def nbytes(self) -> int:
        """Bytes held for the weights."""
        return self.w.nbytes

    def matmul(self, o0: int, o1: int, b: np.ndarray, out: np.ndarray) -> None:
        """``out[:] = W[o0:o1] @ b`` (float32)."""
        np.matmul(self.w[o0:o1], b, out=out)

    def dense(self) -> np.ndarray:
        """The float32 matrix."""
        return self.w


@njit(parallel=True, cache=True)
def _k_widen_rows(w16, r0, out):
    R, K = out.shape
    for r in prange(R):
        for k in range(K):
            out[r, k] = f16_to_f32(w16[r0 + r, k])


class HalfRows:
    """float16-storage ``[O, K]`` weights (precision=low), widened a row block at a time."""

    def __init__(self, w: np.ndarray) -> None:
        w = np.asarray(w)
        if w.ndim != 2:
            raise ValueError(f"weight matrix must be 2-D [O, K], got shape {w.shape}")
        self.w16 = np.ascontiguousarray(w, np.float16)
        self.shape: Tuple[int, int] = w.shape
        self._scratch = np.empty((min(_row_block(w.shape[1]), w.shape[0]), w.shape[1]), np.float32)

    @property
    def nbytes(self) -> int:
        """Bytes held for the weights."""
        return self.w16.nbytes

    def matmul(self, o0: int, o1: int, b: np.ndarray, out: np.ndarray) -> None:
        """``out[:] = W[o0:o1] @ b`` with W widened to float32 one row block at a time."""
        rb = self._scratch.shape[0]
        bits = self.w16.view(np.uint16)
        for r in range(o0, o1, rb):
            n = min(rb, o1 - r)
            s = self._scratch[:n]
            _k_widen_rows(bits, r, s)
            np.matmul(s, b, out=out[r - o0:r - o0 + n])

    def dense(self) -> np.ndarray:
        """The weights widened to float32 (a new array)."""
        return self.w16.astype(np.float32)


@njit(parallel=True, cache=True)
def _k_deq8(codes, scale, offset, bs, r0, out):
    R, K = out.shape
    for r in prange(R):
        for k in range(K):
            g = k // bs
            out[r, k] = np.float32(codes[r0 + r, k]) * scale[r0 + r, g] + offset[r0 + r, g]


@njit(parallel=True, cache=True)
def _k_deq4(packed, scale, offset, bs, r0, out):
    R, K = out.shape
    for r in prange(R):
        for k in range(K):
            byte = np.int32(packed[r0 + r, k >> 1])
            nib = (byte >> 4) if (k & 1) == 0 else (byte & 15)
            code = (nib ^ 8) - 8
            g = k // bs
            out[r, k] = np.float32(code) * scale[r0 + r, g] + offset[r0 + r, g]


class QuantRows:
    """Quantized ``[O, K]`` weights kept as codes: int8 (bits > 4) or two signed 4-bit codes per
    byte (bits <= 4, high nibble first), with ``scale``/``offset`` per ``block`` consecutive
    columns of each row (``block == K``: per output channel)."""

    def __init__(self, codes: np.ndarray, scale: np.ndarray, offset: np.ndarray,
                 shape: Tuple[int, int], block: int, bits: int = 8) -> None:
        O, K = shape
        if block <= 0 or K % block:
            raise ValueError(f"quantization block {block} does not divide K={K}")
        nb = K // block
        codes = np.asarray(codes)
        if codes.size != O * K:
            raise ValueError(f"{codes.size} codes for a [{O}, {K}] weight")
        scale = np.ascontiguousarray(scale, np.float32).reshape(-1)
        offset = np.ascontiguousarray(offset, np.float32).reshape(-1)
        if scale.size != O * nb or offset.size != O * nb:
            raise ValueError(f"scale/offset need {O * nb} entries ({O} rows x {nb} blocks), "
                             f"got {scale.size}/{offset.size}")
        self.shape: Tuple[int, int] = (O, K)
        self.block, self.bits = block, bits
        self.scale, self.offset = scale.reshape(O, nb), offset.reshape(O, nb)
        c8 = codes.astype(np.int8, copy=False).reshape(O, K)
        if bits <= 4:
            if c8.size and (int(c8.min()) < -8 or int(c8.max()) > 7):
                raise ValueError(f"{bits}-bit codes outside [-8, 7]")
            u = (c8.astype(np.uint8) & 15)
            if K % 2:
                u = np.concatenate([u, np.zeros((O, 1), np.uint8)], axis=1)
            self.codes = np.ascontiguousarray((u[:, 0::2] << 4) | u[:, 1::2])
        else:
            self.codes = np.ascontiguousarray(c8)
        self._scratch = np.empty((min(_row_block(K), O), K), np.float32)

    @classmethod
    def from_quantized(cls, qw, shape: Tuple[int, int]) -> "QuantRows":
        """From a :class:`mnnjit.format.QuantizedWeight` whose flat codes are the ``[O, K]``
        matrix in row-major order (``Convolution2D`` weight order)."""
        O, K = shape
        if qw.codes.size != O * K:
            raise ValueError(f"quantized weight has {qw.codes.size} codes, expected {O}*{K}")
        bs = int(qw.block_size)
        if K % bs:
            raise ValueError(f"quantization group of {bs} codes straddles rows of length {K}")
        return cls(qw.codes, qw.scale, qw.offset, (O, K), bs, int(qw.bits))

    @property
    def nbytes(self) -> int:
        """Bytes held for codes, scales and offsets."""
        return self.codes.nbytes + self.scale.nbytes + self.offset.nbytes

    def rows(self, r0: int, out: np.ndarray) -> None:
        """Dequantize rows ``r0 .. r0+len(out)`` into the float32 array ``out``."""
        if self.bits <= 4:
            _k_deq4(self.codes, self.scale, self.offset, self.block, r0, out)
        else:
            _k_deq8(self.codes, self.scale, self.offset, self.block, r0, out)

    def matmul(self, o0: int, o1: int, b: np.ndarray, out: np.ndarray) -> None:
        """``out[:] = W[o0:o1] @ b``, dequantizing one row block at a time into scratch."""
        rb = self._scratch.shape[0]
        for r in range(o0, o1, rb):
            n = min(rb, o1 - r)
            s = self._scratch[:n]
            self.rows(r, s)
            np.matmul(s, b, out=out[r - o0:r - o0 + n])

    def dense(self) -> np.ndarray:
        """All rows dequantized (a new float32 array; for tests and small weights only)."""
        out = np.empty(self.shape, np.float32)
        self.rows(0, out)
        return out


def as_weight_source(w):
    """A weight source for ``w``: sources pass through; a 2-D float16 array -> HalfRows;
    any other array -> DenseRows (float32)."""
    if hasattr(w, "matmul") and hasattr(w, "shape") and not isinstance(w, np.ndarray):
        return w
    w = np.asarray(w)
    if w.dtype == np.float16:
        return HalfRows(w)
    return DenseRows(w)


# ---------------------------------------------------------------- dynamic int8 (measured)
@njit(parallel=True, cache=True)
def _k_quant_cols(b, q, qs, sums):
    """Per column t of b [K, T]: symmetric int8 quantization -> q [T, K] (transposed),
    scale qs[t], and sum of the dequantized column (for asymmetric weight offsets)."""
    K, T = b.shape
    for t in prange(T):
        m = np.float32(0.0)
        for k in range(K):
            m = max(m, abs(b[k, t]))
        s = m / np.float32(127.0) if m > 0 else np.float32(1.0)
        inv = np.float32(1.0) / s
        acc = np.int32(0)
        for k in range(K):
            v = np.int32(np.rint(b[k, t] * inv))
            q[t, k] = v
            acc += v
        qs[t] = s
        sums[t] = np.float32(acc) * s


@njit(parallel=True, cache=True)
def _k_gemm_i8(wq, wscale, woff, q, qs, sums, out):
    O, K = wq.shape
    T = q.shape[0]
    for o in prange(O):
        for t in range(T):
            acc = np.int32(0)
            for k in range(K):
                acc += np.int32(wq[o, k]) * np.int32(q[t, k])
            out[o, t] = np.float32(acc) * wscale[o] * qs[t] + woff[o] * sums[t]


def quantize_dynamic_int8(b: np.ndarray):
    """Quantize the columns of float32 ``b`` [K, T] to int8: (q [T, K], scale [T], colsum [T])."""
    K, T = b.shape
    q = np.empty((T, K), np.int8)
    qs = np.empty(T, np.float32)
    sums = np.empty(T, np.float32)
    _k_quant_cols(np.ascontiguousarray(b, np.float32), q, qs, sums)
    return q, qs, sums


def gemm_dynamic_int8(w: QuantRows, b: np.ndarray) -> np.ndarray:
    """``W @ b`` with ``b`` quantized per column to int8 and int8 x int8 -> int32 accumulation
    (per-channel 8-bit weights only). Kept for measurement against :meth:`QuantRows.matmul`."""
    if w.bits <= 4 or w.block != w.shape[1]:
        raise ValueError("gemm_dynamic_int8 supports per-channel 8-bit weights only")
    q, qs, sums = quantize_dynamic_int8(b)
    out = np.empty((w.shape[0], b.shape[1]), np.float32)
    _k_gemm_i8(w.codes, w.scale[:, 0].copy(), w.offset[:, 0].copy(), q, qs, sums, out)
    return out
