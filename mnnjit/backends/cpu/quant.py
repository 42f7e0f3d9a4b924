"""Weight sources for the CPU GEMM/conv kernels: fp32, fp16 storage, and quantized codes.

A *weight source* is a ``[O, K]`` weight matrix (``K`` = C/group*kh*kw for a convolution) held
in its memory form. The conv kernel (:func:`mnnjit.backends.cpu.cnn_steps.conv2d`) reads it directly (fp32 rows
by pointer, fp16/int8/int4 rows widened or dequantized one row block at a time into a
per-thread scratch buffer feeding sgemm); ``matmul(b)`` gives ``W @ b`` in float32 the same way
(for MatMul/InnerProduct layers).

* :class:`DenseRows` - float32 weights (memory 0/1, and precision 0/1): one BLAS call.
* :class:`HalfRows` - float16 storage (precision=low): rows are widened a block at a time.
* :class:`QuantRows` - int8 codes (8-bit) or packed nibbles (<= 4-bit) with per-channel or
  per-block ``scale``/``offset`` (memory=low): ``w = code * scale[g] + offset[g]``; a block of
  rows is dequantized into a small scratch buffer (cache resident) feeding BLAS, so the whole
  model is never expanded to float32.

:func:`gemm_dynamic_int8` is the other memory=low strategy (activations quantized per column to
int8, int8 x int8 -> int32 accumulation in Numba); ``benchmarks/precision.py`` measures both and
the dequantize-a-block path is the faster one here (``benchmarks/RESULTS.md``).

This module imports numba: import it lazily.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np
from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic


__all__ = ["DenseRows", "HalfRows", "QuantRows", "as_weight_source", "gemm_dynamic_int8",
           "quantize_dynamic_int8"]

class DenseRows:
    """float32 ``[O, K]`` weights."""

    def __init__(self, w: np.ndarray) -> None:
        w = np.ascontiguousarray(w, np.float32)
        if w.ndim != 2:
            raise ValueError(f"weight matrix must be 2-D [O, K], got shape {w.shape}")
        if not w.flags.writeable:       # one Numba specialisation: writable arrays
            w = w.copy()
        self.w = w
        self.shape: Tuple[int, int] = w.shape

    @property
    def nbytes(self) -> int:
        """Bytes held for the weights."""
        return self.w.nbytes

    def matmul(self, b: np.ndarray) -> np.ndarray:
        """``W @ b`` (float32, BLAS)."""
        return np.matmul(self.w, np.asarray(b, np.float32))

    def dense(self) -> np.ndarray:
        """The float32 matrix."""
        return self.w


class HalfRows:
    """float16-storage ``[O, K]`` weights (precision=low), widened a row block at a time."""

    def __init__(self, w: np.ndarray) -> None:
        w = np.asarray(w)
        if w.ndim != 2:
            raise ValueError(f"weight matrix must be 2-D [O, K], got shape {w.shape}")
        self.w16 = np.ascontiguousarray(w, np.float16)
        self.shape: Tuple[int, int] = w.shape

    @property
    def nbytes(self) -> int:
        """Bytes held for the weights."""
        return self.w16.nbytes

    def matmul(self, b: np.ndarray) -> np.ndarray:
        """``W @ b`` in float32, W widened one row block at a time inside the GEMM kernel."""
        return _gemm(self, b)

    def dense(self) -> np.ndarray:
        """The weights widened to float32 (a new array)."""
        from mnnjit.backends.cpu.fp16 import to_f32
        return to_f32(self.w16)


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

    def matmul(self, b: np.ndarray) -> np.ndarray:
        """``W @ b`` in float32. Few columns (a classifier, batch <= 8): a direct kernel reading
        the codes once (``sum(code * b) * scale + offset * sum(b)`` per group, exact); more: the
        conv kernel's dequantize-a-row-block + sgemm."""
        b = np.ascontiguousarray(b, np.float32)
        if b.ndim == 2 and b.shape[0] == self.shape[1] and b.shape[1] <= 8 and self.bits > 4:
            out = np.empty((self.shape[0], b.shape[1]), np.float32)
            _k_qgemm_narrow(self.codes, self.scale, self.offset, self.block, b, out)
            return out
        return _gemm(self, b)

    def dense(self) -> np.ndarray:
        """All rows dequantized (a new float32 array; for tests and small weights only)."""
        out = np.empty(self.shape, np.float32)
        self.rows(0, out)
        return out


@njit(fastmath=True, inline="always")
def _qdot(cr, br, k0, k1):
    c = cr[k0:k1]        # slices indexed from 0: see cnn_steps._store_act on vectorisation
    x = br[k0:k1]
    acc = np.float32(0.0)
    for k in range(k1 - k0):
        acc += np.float32(c[k]) * x[k]
    return acc


@njit(parallel=True, cache=True, fastmath=True)
def _k_qgemm_narrow(codes, scale, offset, bs, b, out):
    """out[o, t] = sum_g scale[o,g] * sum_{k in g} codes[o,k] * b[k,t] + offset[o,g] * sum b[k,t]
    for a narrow ``b`` [K, N] (N small): weights read once as int8, no float copy."""
    O, K = codes.shape
    N = b.shape[1]
    G = K // bs
    bt = np.ascontiguousarray(b.T)
    gsum = np.empty((G, N), np.float32)
    for g in range(G):
        for t in range(N):
            s = np.float32(0.0)
            for k in range(g * bs, (g + 1) * bs):
                s += bt[t, k]
            gsum[g, t] = s
    nch = min(O, 64)
    for ch in prange(nch):
        for o in range(ch * O // nch, (ch + 1) * O // nch):
            cr = codes[o]
            for t in range(N):
                br = bt[t]
                tot = np.float32(0.0)
                for g in range(G):
                    tot += _qdot(cr, br, g * bs, (g + 1) * bs) * scale[o, g] \
                        + offset[o, g] * gsum[g, t]
                out[o, t] = tot


def _gemm(src, b: np.ndarray) -> np.ndarray:
    """``W @ b`` for a [K, N] float32 ``b`` as a 1x1 convolution over [1, K, N, 1]."""
    from mnnjit.backends.cpu.cnn_steps import conv2d
    b = np.ascontiguousarray(b, np.float32)
    if b.ndim != 2 or b.shape[0] != src.shape[1]:
        raise ValueError(f"matmul: weight is {list(src.shape)}, operand {list(b.shape)}")
    return conv2d(b.reshape(1, b.shape[0], b.shape[1], 1), src, None, (1, 1))[0, :, :, 0]


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


#: micro-kernel panel height (rows of a weight panel; :data:`mnnjit.backends.cpu.gemm.tile.MR`)
_MR = 6


@njit(inline="always")
def deq_panels(kind, codes8, codes4, scale, offset, bs, g, og, q0, q1, K, dst, tmp):
    """dst = float32 micro-kernel panels q0..q1 (``[K, 6]`` each, rows interleaved) of group
    ``g``'s quantized rows (kind 4, codes already in panel order: :func:`deq_panel_order`) (rows past the group are zero), as ``gemm.conv._deq_panels``
    computes them (``code * scale + offset`` per value, the same float32 operations): each
    panel's six rows are dequantized as contiguous rows into ``tmp`` [6, K] first (vector
    loops: int8 widening, multiply-add), then interleaved into the panel. Dequantizing
    straight into the panel wrote every value 6 floats from the last, a scalar loop (about
    0.45 ns a weight: 0.2 ms per forward for a 1280x320 layer)."""
    if kind == 4:
        deq_panel_order(codes8, scale, offset, q0, q1, K, dst)
        return
    nb = K // bs
    for q in range(q0, q1):
        for r in range(_MR):
            row = q * _MR + r
            t = tmp[r]
            if row >= og:
                for k in range(K):
                    t[k] = np.float32(0.0)
                continue
            o = g * og + row
            if kind == 2:
                cr = codes8[o]
                for blk in range(nb):
                    sc = scale[o, blk]
                    of = offset[o, blk]
                    cb = cr[blk * bs:(blk + 1) * bs]
                    tb = t[blk * bs:(blk + 1) * bs]
                    for k in range(bs):
                        tb[k] = np.float32(cb[k]) * sc + of
            else:
                cr4 = codes4[o]
                for blk in range(nb):
                    sc = scale[o, blk]
                    of = offset[o, blk]
                    k0 = blk * bs
                    for k in range(bs):
                        byte = np.int32(cr4[(k0 + k) >> 1])
                        nib = (byte >> 4) if ((k0 + k) & 1) == 0 else (byte & 15)
                        t[k0 + k] = np.float32((nib ^ 8) - 8) * sc + of
        panel = dst[(q - q0) * K * _MR:(q - q0 + 1) * K * _MR]
        t0, t1, t2, t3, t4, t5 = tmp[0], tmp[1], tmp[2], tmp[3], tmp[4], tmp[5]
        for k in range(K):
            p = panel[k * _MR:k * _MR + _MR]
            p[0] = t0[k]
            p[1] = t1[k]
            p[2] = t2[k]
            p[3] = t3[k]
            p[4] = t4[k]
            p[5] = t5[k]


_F32 = ir.FloatType()
_I64 = ir.IntType(64)
_V8 = ir.VectorType(_F32, 8)


def _typer_deq24(typingctx, c_i, s_i, o_i, d_i, n):
    """``deq24(codes, scale, offset, dst, n)`` (addresses, int64): ``dst[i] = codes[i] *
    scale[i % 6] + offset[i % 6]`` for ``i < 24 * n`` (int8 codes, float32 scale/offset/dst).
    24 values (four k-steps of a 6-row panel) are three ``<8 x float>`` vectors whose
    scale/offset patterns repeat: built once, then per step three int8 loads, widenings,
    multiply-adds and stores (no interleaving pass)."""
    sig = types.void(*([types.int64] * 5))

    def codegen(context, builder, signature, args):
        c_a, s_a, o_a, d_a, n_v = args
        c_p = builder.inttoptr(c_a, ir.IntType(8).as_pointer())
        s_p = builder.inttoptr(s_a, _F32.as_pointer())
        o_p = builder.inttoptr(o_a, _F32.as_pointer())
        d_p = builder.inttoptr(d_a, _F32.as_pointer())
        ss = [builder.load(builder.gep(s_p, [ir.Constant(_I64, r)])) for r in range(_MR)]
        os_ = [builder.load(builder.gep(o_p, [ir.Constant(_I64, r)])) for r in range(_MR)]

        def pattern(vals, h):
            v = ir.Constant(_V8, ir.Undefined)
            for j in range(8):
                v = builder.insert_element(v, vals[(8 * h + j) % _MR], ir.Constant(ir.IntType(32), j))
            return v
        sv = [pattern(ss, h) for h in range(3)]
        ov = [pattern(os_, h) for h in range(3)]
        fn = builder.function
        entry = builder.basic_block
        loop = fn.append_basic_block("deq24.loop")
        done = fn.append_basic_block("deq24.done")
        builder.cbranch(builder.icmp_signed(">", n_v, ir.Constant(_I64, 0)), loop, done)
        builder.position_at_end(loop)
        i = builder.phi(_I64)
        base = builder.mul(i, ir.Constant(_I64, 24))
        for h in range(3):
            off = builder.add(base, ir.Constant(_I64, 8 * h))
            cv = builder.load(builder.bitcast(builder.gep(c_p, [off]),
                                              ir.VectorType(ir.IntType(8), 8).as_pointer()), align=1)
            fv = builder.sitofp(builder.sext(cv, ir.VectorType(ir.IntType(32), 8)), _V8)
            dv = builder.fadd(builder.fmul(fv, sv[h]), ov[h])
            builder.store(dv, builder.bitcast(builder.gep(d_p, [off]), _V8.as_pointer()), align=4)
        nxt = builder.add(i, ir.Constant(_I64, 1))
        i.add_incoming(ir.Constant(_I64, 0), entry)
        i.add_incoming(nxt, loop)
        builder.cbranch(builder.icmp_signed("<", nxt, n_v), loop, done)
        builder.position_at_end(done)
        return context.get_dummy_value()

    return sig, codegen


_typer_deq24.__name__ = _typer_deq24.__qualname__ = "quant_deq24"
_deq24 = intrinsic(_typer_deq24)


@njit(inline="always")
def deq_panel_order(codes8, scale, offset, q0, q1, K, dst):
    """dst = float32 panels q0..q1 of per-channel int8 codes kept in panel order (kind 4 of
    ``gemm.conv.PackedWeights``: ``codes8`` [npanel, K*6], panel q's value (k, r) at
    ``k*6 + r``; ``scale``/``offset`` [npanel*6, 1], zero past the last row): ``code * scale +
    offset`` per value, the same float32 operations as :func:`deq_panels`, in straight vector
    code (about 5x faster than dequantizing rows and interleaving them)."""
    n24 = K // 4
    for q in range(q0, q1):
        cq = codes8[q]
        d = dst[(q - q0) * K * _MR:(q - q0 + 1) * K * _MR]
        sq = scale[q * _MR:(q + 1) * _MR, 0]
        oq = offset[q * _MR:(q + 1) * _MR, 0]
        _deq24(cq.ctypes.data, sq.ctypes.data, oq.ctypes.data, d.ctypes.data, n24)
        for i in range(n24 * 24, K * _MR):
            d[i] = np.float32(cq[i]) * sq[i % _MR] + oq[i % _MR]
