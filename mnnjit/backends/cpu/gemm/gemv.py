"""A fully-connected layer of a few rows (a classifier at batch 1-4) as a streaming GEMV.

``y[m, n] = act(sum_k W[n, k] * x[m, k] + bias[m, n])`` for ``M <= MAX_ROWS`` rows of ``x``:
the weights are re-laid once as a row-major float32 ``[N, K]`` matrix, so every output is a
contiguous dot product; the kernel walks eight weight rows at a time (eight independent 8-wide
vector accumulators over one read of ``x``), so the weights stream through once per row of ``x``
at the memory / L3 bandwidth. Large layers split their rows over the plan's threads with
``prange``, small ones run serially (a parallel launch costs more than they do).

Under precision=low the weights are stored as float16 (``half_weights``: widened by F16C inside
the loop, half the bytes to stream; measured 0.29 vs 0.40 ms on MobileNetV2's classifier).

The dot sums are reassociated (``fastmath`` reassoc/contract only: no finite-math or NaN
assumptions), so results differ from numpy's BLAS by float32 rounding (~1e-6 relative).

This module imports numba: import it lazily.
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import numpy as np
from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
from numba import njit, prange

from mnnjit.backends.cpu.fp16 import load
from mnnjit.backends.cpu.runtime.intrinsics import borrow

__all__ = ["Gemv", "MAX_ROWS", "fc_operands", "gemv", "matmul_gemv", "weights_nk"]

#: the largest number of rows of ``x`` (batch) the GEMV takes; more is a GEMM's job
MAX_ROWS = 4
#: layers with fewer multiply-adds than this run on one thread
PARALLEL_MACS = 1 << 16

#: weight rows per block: eight independent vector accumulators (eight DRAM streams)
BLOCK = 8
_FM = {"reassoc", "contract"}
_ACT_CODES = {"": 0, "relu": 1, "relu6": 2}


@njit(fastmath=_FM, inline="always")
def _finish(v, b, act):
    v = v + b
    if act == 1:
        return max(v, np.float32(0.0))
    if act == 2:
        return min(max(v, np.float32(0.0)), np.float32(6.0))
    return v


@njit(fastmath=_FM, nogil=True, cache=True)
def _rows(w, x, bias, out, sm, sn, act, r0, r1):
    """Outputs of weight rows ``r0 .. r1`` for every row of ``x``; ``out`` is flat with
    element (m, n) at ``m * sm + n * sn``. ``w`` is float32, or uint16 half bits (widened by
    F16C in the loop). Slices are indexed from 0 (vectorisation).
    (Measured inside MobileNetV2 forwards: 8-row blocks beat 4, 2 and 1; software prefetching
    ahead of the block made it slower.)"""
    K = w.shape[1]
    M = x.shape[0]
    # borrowed views: the per-block slices cost no atomic reference counts (intrinsics.borrow);
    # the caller holds the arrays
    w, x, bias, out = borrow(w), borrow(x), borrow(bias), borrow(out)
    n = r0
    while n + BLOCK <= r1:
        w0 = w[n, :K]
        w1 = w[n + 1, :K]
        w2 = w[n + 2, :K]
        w3 = w[n + 3, :K]
        w4 = w[n + 4, :K]
        w5 = w[n + 5, :K]
        w6 = w[n + 6, :K]
        w7 = w[n + 7, :K]
        for m in range(M):
            xs = x[m, :K]
            a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = np.float32(0.0)
            for k in range(K):
                xv = xs[k]
                a0 += load(w0, k) * xv
                a1 += load(w1, k) * xv
                a2 += load(w2, k) * xv
                a3 += load(w3, k) * xv
                a4 += load(w4, k) * xv
                a5 += load(w5, k) * xv
                a6 += load(w6, k) * xv
                a7 += load(w7, k) * xv
            bm = bias[m, n:n + BLOCK]
            o = out[m * sm + n * sn:]
            o[0] = _finish(a0, bm[0], act)
            o[sn] = _finish(a1, bm[1], act)
            o[2 * sn] = _finish(a2, bm[2], act)
            o[3 * sn] = _finish(a3, bm[3], act)
            o[4 * sn] = _finish(a4, bm[4], act)
            o[5 * sn] = _finish(a5, bm[5], act)
            o[6 * sn] = _finish(a6, bm[6], act)
            o[7 * sn] = _finish(a7, bm[7], act)
        n += BLOCK
    while n < r1:
        wr = w[n, :K]
        for m in range(M):
            xs = x[m, :K]
            a = np.float32(0.0)
            for k in range(K):
                a += load(wr, k) * xs[k]
            out[m * sm + n * sn] = _finish(a, bias[m, n], act)
        n += 1


@njit(parallel=True, nogil=True, cache=True)
def _rows_parallel(w, x, bias, out, sm, sn, act, ntask):
    """:func:`_rows` over ``ntask`` contiguous ranges of whole blocks, one per task."""
    N = w.shape[0]
    nblk = (N + BLOCK - 1) // BLOCK
    for t in prange(ntask):
        r0 = min(N, (t * nblk // ntask) * BLOCK)
        r1 = min(N, ((t + 1) * nblk // ntask) * BLOCK)
        _rows(w, x, bias, out, sm, sn, act, r0, r1)


def gemv(w: np.ndarray, x: np.ndarray, bias: np.ndarray, out: np.ndarray, act: str = "",
         threads: int = 1, out_transposed: bool = False) -> np.ndarray:
    """``out = act(x @ w.T + bias)`` for ``w`` [N, K] (C-contiguous float32, or uint16 half
    bits), float32 ``x`` [M, K] and ``bias`` [M, N]; ``out`` is a C-contiguous float32 [M, N]
    array, or [N, M] when ``out_transposed``. Runs on ``threads`` threads when the layer is
    large enough."""
    if w.ndim != 2 or x.ndim != 2 or x.shape[1] != w.shape[1]:
        raise ValueError(f"gemv: weights {list(w.shape)} and rows {list(x.shape)} do not match")
    N, K = w.shape
    M = x.shape[0]
    if bias.shape != (M, N):
        raise ValueError(f"gemv: bias must be [{M}, {N}], got {list(bias.shape)}")
    if out.shape != ((N, M) if out_transposed else (M, N)) or not out.flags.c_contiguous:
        raise ValueError(f"gemv: output {list(out.shape)} does not fit [{M}, {N}]")
    if w.dtype not in (np.float32, np.uint16) or not w.flags.c_contiguous:
        raise TypeError("gemv: weights must be a C-contiguous float32 or uint16 (half) array")
    for a in (x, bias, out):
        if a.dtype != np.float32 or not a.flags.c_contiguous:
            raise TypeError("gemv: operands must be C-contiguous float32 arrays")
    code = _ACT_CODES.get(act)
    if code is None:
        raise ValueError(f"gemv: unknown activation {act!r}; expected '', 'relu' or 'relu6'")
    sm, sn = (1, M) if out_transposed else (N, 1)
    flat = out.reshape(-1)
    ntask = _tasks(N, K, M, threads)
    if ntask > 1:
        _rows_parallel(w, x, bias, flat, sm, sn, code, ntask)
    else:
        _rows(w, x, bias, flat, sm, sn, code, 0, N)
    return out


def _tasks(N: int, K: int, M: int, threads: int) -> int:
    if threads <= 1 or N * K * M < PARALLEL_MACS:
        return 1
    return max(1, min(threads, (N + BLOCK - 1) // BLOCK))


class Gemv:
    """A prepared fully-connected layer: ``y = act(x @ w.T + bias)`` on the executor's storage
    arrays. ``w`` [N, K] is laid out (contiguous float32) once; ``bias`` is the [M, N] array
    the output's bias broadcasts to. The activation ``x`` arrives in its own shape
    (``x_shape``); ``x_transposed`` says it holds ``x`` as [K, M]. The output ``y`` is written in
    ``out_shape``, which holds [N, M] when ``out_transposed``, else [M, N] (1-D shapes: M = 1).
    ``half_weights``: keep the weights as float16 (precision=low)."""

    def __init__(self, w: np.ndarray, bias: Optional[np.ndarray], act: str,
                 x_shape: Tuple[int, ...], x_transposed: bool, out_shape: Tuple[int, ...],
                 out_transposed: bool, threads: int = 1, half_weights: bool = False) -> None:
        w = np.asarray(w, np.float32)
        if w.ndim != 2:
            raise ValueError(f"Gemv: weights must be 2-D [N, K], got {list(w.shape)}")
        N, K = w.shape
        if N == 0 or K == 0:
            raise ValueError(f"Gemv: empty weights {list(w.shape)}")
        size = int(np.prod(x_shape, dtype=np.int64))
        if size % K or not 1 <= size // K <= MAX_ROWS:
            raise ValueError(f"Gemv: input {list(x_shape)} is not 1-{MAX_ROWS} rows of {K}")
        M = size // K
        if int(np.prod(out_shape, dtype=np.int64)) != M * N:
            raise ValueError(f"Gemv: output {list(out_shape)} does not hold [{M}, {N}]")
        if act not in _ACT_CODES:
            raise ValueError(f"Gemv: unknown activation {act!r}; expected '', 'relu' or 'relu6'")
        if half_weights:
            self.w = np.ascontiguousarray(w.astype(np.float16)).view(np.uint16)
        else:
            w = np.ascontiguousarray(w)
            self.w = w if w.flags.writeable else w.copy()   # one Numba specialisation: writable
        b = np.zeros((M, N), np.float32)
        if bias is not None:
            full = np.broadcast_to(np.asarray(bias, np.float32), out_shape).reshape(
                (N, M) if out_transposed else (M, N))
            b[...] = full.T if out_transposed else full
        self.bias = b
        self.act, self.code = act, _ACT_CODES[act]
        self.M, self.N, self.K = M, N, K
        self.x_shape, self.x_transposed = tuple(x_shape), bool(x_transposed and M > 1)
        self.out_shape, self.out_transposed = tuple(out_shape), bool(out_transposed and M > 1)
        self.sm, self.sn = (1, M) if self.out_transposed else (N, 1)
        self.ntask = _tasks(N, K, M, threads)

    @property
    def nbytes(self) -> int:
        """Bytes of the laid-out weights and bias."""
        return int(self.w.nbytes + self.bias.nbytes)

    def launch(self, x: np.ndarray, out: np.ndarray) -> Optional[Tuple[Callable, tuple]]:
        """The kernel and arguments of :meth:`run` on these arrays when it is one kernel call
        (float32 storage, ``x`` not transposed; see :func:`.launch.bind_launch`), else None."""
        if x.dtype == np.uint16 or out.dtype == np.uint16 or self.x_transposed:
            return None
        return self._kernel(x.reshape(self.M, self.K), out.reshape(-1))

    def _kernel(self, rows: np.ndarray, flat: np.ndarray) -> Tuple[Callable, tuple]:
        """The kernel and arguments writing the outputs of float32 ``rows`` [M, K] into ``flat``."""
        if self.ntask > 1:
            return _rows_parallel, (self.w, rows, self.bias, flat, self.sm, self.sn, self.code,
                                    self.ntask)
        return _rows, (self.w, rows, self.bias, flat, self.sm, self.sn, self.code, 0, self.N)

    def run(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Compute into ``out`` (storage arrays: float32, or uint16 half bits for both)."""
        if x.dtype == np.uint16:
            x = x.view(np.float16).astype(np.float32)
        if self.x_transposed:
            rows = np.ascontiguousarray(x.reshape(self.K, self.M).T)
        else:
            rows = x.reshape(self.M, self.K)
        half = out.dtype == np.uint16
        # (the float32 result before half storage: per call, as threads may share this op)
        flat = np.empty(self.M * self.N, np.float32) if half else out.reshape(-1)
        kernel, args = self._kernel(rows, flat)
        kernel(*args)
        if half:
            out.view(np.float16).reshape(-1)[...] = flat
        return out


def fc_operands(a_shape: Tuple[int, ...], b_shape: Tuple[int, ...], const: int,
                transpose_a: bool, transpose_b: bool) -> Optional[Tuple[bool, bool]]:
    """For ``matmul_ex(a, b)`` whose input ``const`` (0 or 1) is a constant 2-D matrix: whether
    it runs as a :class:`Gemv`, as ``(x_transposed, out_transposed)`` with the weights being the
    constant laid out as [N, K] (see :func:`weights_nk`), or None (batched operands, more than
    :data:`MAX_ROWS` rows, mismatched sizes)."""
    if len(a_shape) not in (1, 2) or len(b_shape) not in (1, 2):
        return None
    if const == 0:
        if len(a_shape) != 2:
            return None
        K = a_shape[0] if transpose_a else a_shape[1]
        if len(b_shape) == 1:
            return (False, False) if b_shape[0] == K else None
        bk, M = (b_shape[1], b_shape[0]) if transpose_b else b_shape
        if bk != K or not 1 <= M <= MAX_ROWS:
            return None
        return (not transpose_b, True)
    if len(b_shape) != 2:
        return None
    K = b_shape[1] if transpose_b else b_shape[0]
    if len(a_shape) == 1:
        return (False, False) if a_shape[0] == K else None
    M, ak = (a_shape[1], a_shape[0]) if transpose_a else a_shape
    if ak != K or not 1 <= M <= MAX_ROWS:
        return None
    return (bool(transpose_a), False)


def weights_nk(w: np.ndarray, const: int, transpose_a: bool, transpose_b: bool) -> np.ndarray:
    """The constant operand of :func:`fc_operands` as the [N, K] matrix (a view if it is one)."""
    if const == 0:
        return w.T if transpose_a else w
    return w if transpose_b else w.T


def matmul_gemv(w: np.ndarray, const: int, x_shape: Tuple[int, ...], bias: Optional[np.ndarray],
                attrs: dict, out_shape: Tuple[int, ...], threads: int = 1,
                half_weights: bool = False) -> Optional[Gemv]:
    """``matmul_ex`` (attrs ``transpose_a``/``transpose_b``/``act``) whose input ``const`` is the
    constant float32 matrix ``w`` and whose other input has shape ``x_shape``, with an optional
    constant ``bias``, as a :class:`Gemv` - or None when the GEMV does not apply (batched or
    1-D constant, more than :data:`MAX_ROWS` rows, an activation it lacks, a bias that would
    broadcast the output to a larger shape). ``half_weights``: see :class:`Gemv`."""
    if const not in (0, 1) or not isinstance(w, np.ndarray) or w.dtype != np.float32 or \
            w.size == 0:
        return None
    act = attrs.get("act", "") or ""
    if act not in _ACT_CODES or len(out_shape) not in (1, 2):
        return None
    ta, tb = bool(attrs.get("transpose_a")), bool(attrs.get("transpose_b"))
    shapes = (tuple(w.shape), tuple(x_shape)) if const == 0 else (tuple(x_shape), tuple(w.shape))
    lay = fc_operands(shapes[0], shapes[1], const, ta, tb)
    if lay is None:
        return None
    if bias is not None:
        try:
            if np.broadcast_shapes(tuple(out_shape), np.shape(bias)) != tuple(out_shape):
                return None
        except ValueError:
            return None
    return Gemv(weights_nk(w, const, ta, tb), bias, act, tuple(x_shape), lay[0],
                tuple(out_shape), lay[1], threads, half_weights)
