"""Writing quantized weights (``IDSTQuan``): the inverse of :mod:`mnnjit.format.quant`.

:func:`quantize_weight` turns float weights into the table MNN's converter writes for
``--weightQuantBits`` (type 1, dense IDST buffer): the flat weight is cut into ``groups`` contiguous
runs (one per output channel, or per block of input channels) and each run is quantized with its
own scale. Asymmetric (MNN's default): ``alpha`` holds ``(min, scale)`` pairs, ``scale = (max - min)
/ (2^bits - 1)``, codes ``round((w - min) / scale) - 2^(bits-1)``, ``aMin = -2^(bits-1)`` and
``readType`` the number of groups. Symmetric: ``alpha`` holds one ``scale = max|w| / (2^(bits-1) - 1)``
per group, codes ``round(w / scale)``. Rounding is half away from zero (C's ``roundf``).
:func:`fp16_weight` is the ``--fp16`` form (type 3: the weights as IEEE half floats).
"""
from __future__ import annotations

import math
from typing import Any, Dict

import numpy as np

__all__ = ["quantize_weight", "fp16_weight", "encode_idst", "float_to_half_truncated"]


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + x.dtype.type(0.5))


def _pack_bits(indexes: np.ndarray, bits: int) -> bytes:
    """MSB-first bit stream of ``indexes`` (each ``bits`` wide)."""
    if bits == 8:
        return indexes.astype(np.uint8).tobytes()
    shifts = np.arange(bits - 1, -1, -1, dtype=np.uint16)
    stream = ((indexes.astype(np.uint16)[:, None] >> shifts) & 1).astype(np.uint8).reshape(-1)
    return np.packbits(stream).tobytes()


def encode_idst(codes: np.ndarray, shape: tuple, bits: int) -> np.ndarray:
    """The dense IDST buffer (int8 array) for int codes in ``[-2^(bits-1), 2^(bits-1))``."""
    lo = -(1 << (bits - 1))
    count = 1 << bits
    wide = any(int(d) > 0xFFFF for d in shape)
    head = bytearray([len(shape)])
    for d in shape:
        head += int(d).to_bytes(4 if wide else 2, "little")
    head.append(count & 0xFF)  # 256 samples are written as 0
    head += np.arange(lo, lo + count, dtype=np.int64).astype(np.int8).tobytes()
    body = _pack_bits((codes.astype(np.int64) - lo).reshape(-1), bits)
    return np.frombuffer(bytes(head) + body, np.int8).copy()


def quantize_weight(weight: np.ndarray, groups: int, bits: int, asymmetric: bool = True) -> Dict[str, Any]:
    """The ``IDSTQuan`` table for ``weight`` (flat float32) in ``groups`` equal contiguous runs."""
    if not 2 <= bits <= 8:
        raise ValueError(f"weight quantization bits must be 2..8, got {bits}")
    w = np.asarray(weight, np.float32).reshape(-1)
    if groups <= 0 or w.size % groups:
        raise ValueError(f"cannot cut {w.size} weights into {groups} equal groups")
    g32 = w.reshape(groups, -1)
    half = 1 << (bits - 1)
    if asymmetric:
        lo, hi = g32.min(axis=1), g32.max(axis=1)
        scale = (hi - lo) / np.float32((1 << bits) - 1)  # in float32, as MNN computes it
        safe = np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32)
        # float32 arithmetic throughout: the codes then equal real MNN's at ties as well
        q = _round_half_away((g32 - lo[:, None]) / safe[:, None]) - half
        codes = np.clip(q, -half, half - 1)
        alpha = np.stack([lo, scale], axis=1).reshape(-1)
        extra = {"aMin": -half, "readType": groups}
    else:
        amax = np.abs(g32).max(axis=1)
        scale = amax / np.float32(half - 1)
        safe = np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32)
        codes = np.clip(_round_half_away(g32 / safe[:, None]), -(half - 1), half - 1)
        alpha = scale
        extra = {}
    shape = (groups, g32.shape[1])
    table = {"buffer": encode_idst(codes, shape, bits), "alpha": alpha.astype(np.float32), "type": 1,
             "quantScale": 1.0, "aMaxOrBits": bits, "scaleStorage": "FP32"}
    table.update(extra)
    return table


def float_to_half_truncated(x: np.ndarray) -> np.ndarray:
    """float32 -> IEEE half bits (uint16), rounding toward zero as real MNN's converter does
    (too large values become infinity, NaN stays NaN, tiny ones become subnormals or zero)."""
    b = np.asarray(x, np.float32).reshape(-1).view(np.uint32).astype(np.int64)
    sign = (b >> 16) & 0x8000
    exp = ((b >> 23) & 0xFF) - 127 + 15
    mant = b & 0x7FFFFF
    normal = (exp << 10) | (mant >> 13)
    shift = np.clip(14 - exp, 0, 31)  # subnormal: the implicit bit shifted in
    sub = ((mant | 0x800000) >> np.minimum(shift, 31)) & 0x3FF
    out = np.where(exp >= 31, 0x7C00, np.where(exp >= 1, normal, np.where(exp >= -10, sub, 0)))
    nan = ((b >> 23) & 0xFF) == 0xFF
    out = np.where(nan & (mant != 0), 0x7E00, out)
    return (out | sign).astype(np.uint16)


def fp16_weight(weight: np.ndarray) -> Dict[str, Any]:
    """The ``IDSTQuan`` table of ``--fp16`` (type 3): weights stored as half floats."""
    half = float_to_half_truncated(weight).astype("<u2")
    return {"buffer": np.frombuffer(half.tobytes(), np.int8).copy(), "type": 3, "scaleStorage": "FP32"}


def packed_size(n: int, bits: int) -> int:
    """Bytes of ``n`` codes of ``bits`` bits in the IDST bit stream."""
    return math.ceil(n * bits / 8)
