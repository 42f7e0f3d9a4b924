"""The packed GEMM's operand layouts and scratch size (:mod:`.plan_gemm`), for the plan kernel's
source writer (:mod:`.plan_gemm_steps`), which lays constant weights out while it writes a
kernel's source. Nothing here imports numba: a model's first forwards write that source before
any kernel is loaded, and Numba's import (~0.25 s) then happens off the forward's thread.
:mod:`.plan_gemm` checks at its import that :data:`MR` and :data:`NR` are the micro-kernel's.
"""
from __future__ import annotations

import numpy as np

#: rows of a packed panel of A (the micro-kernel's row count)
MR = 6
#: columns of a packed block of B (the micro-kernel's width: one AVX-512 register of float32)
NR = 16

#: rows of C finished per pass: the A panels of a block of rows stay in L2 while every column
#: block runs over them, and the bias / activation pass finds the block's rows in cache
ROW_BLOCK = 96


def scratch_size(m: int, k: int) -> int:
    """Float32 elements of the GEMM's scratch for an ``m x k`` left operand."""
    rows = min(m, ROW_BLOCK)
    return ((rows + MR - 1) // MR) * MR * k + k * NR + MR * NR + MR + 64


def pack_a(w: np.ndarray) -> np.ndarray:
    """Constant ``[m, k]`` weights as the GEMM reads a left operand with ``ta`` 2: panels of
    :data:`MR` rows, ``[ceil(m / MR)][k][MR]`` (zero rows pad the last). Flat float32."""
    w = np.ascontiguousarray(w, np.float32)
    m, k = w.shape
    npan = (m + MR - 1) // MR
    padded = np.zeros((npan * MR, k), np.float32)
    padded[:m] = w
    return np.ascontiguousarray(padded.reshape(npan, MR, k).transpose(0, 2, 1)).reshape(-1)


def pack_b(w: np.ndarray) -> np.ndarray:
    """Constant ``[k, n]`` weights as the GEMM reads them fastest (``bpk``): each whole
    16-column block's ``k`` rows contiguous (``[n // 16][k][16]``), then the last ``n % 16``
    columns as ``[k][n % 16]`` rows. Flat float32."""
    w = np.ascontiguousarray(w, np.float32)
    k, n = w.shape
    nfull = n // NR
    blocks = w[:, :nfull * NR].reshape(k, nfull, NR).transpose(1, 0, 2).reshape(-1)
    return np.concatenate([blocks, w[:, nfull * NR:].reshape(-1)])
