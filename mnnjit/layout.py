"""Data-layout helpers: MNN's NC4HW4 packing (channels in blocks of 4, zero padded)."""
from __future__ import annotations

import numpy as np


def pack_nc4hw4(x: np.ndarray) -> np.ndarray:
    """Pack logical NCHW (or N,C,...) data into MNN's NC4HW4 order: shape (N, ceil(C/4), ..., 4)."""
    n, c = x.shape[0], x.shape[1]
    rest = x.shape[2:]
    c4 = (c + 3) // 4
    padded = np.zeros((n, c4 * 4) + rest, dtype=x.dtype)
    padded[:, :c] = x
    blocks = padded.reshape((n, c4, 4) + rest)
    return np.ascontiguousarray(np.moveaxis(blocks, 2, -1))


def unpack_nc4hw4(packed: np.ndarray, channels: int) -> np.ndarray:
    """Inverse of :func:`pack_nc4hw4`: (N, C4, ..., 4) back to (N, channels, ...)."""
    n, c4 = packed.shape[0], packed.shape[1]
    rest = packed.shape[2:-1]
    blocks = np.moveaxis(packed, -1, 2).reshape((n, c4 * 4) + rest)
    return np.ascontiguousarray(blocks[:, :channels])
