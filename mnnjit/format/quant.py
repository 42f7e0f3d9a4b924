"""MNN weight-quantization decoding (``Convolution2D.quanParameter``, table ``IDSTQuan``).

Facts about the encoding (from MNN's ``IDSTDecoder`` / ``ConvolutionCommon::load``):

``type`` 1, dense "IDST" buffer::

    u8 ndim (<= 4) | ndim x (u16, or u32 if shapeInt32) shape
    u8 sampleCount (0 means 256) | sampleCount x int8 samples (sorted ascending on read)
    ceil(bits * N / 8) bytes: N indexes into the sorted samples, MSB-first bit stream,
    bits = max(1, ceil(log2(sampleCount)))

``type`` 2, sparse buffer::

    u8 ndim | shape | u32 nnz | u8 stepBits | ceil(stepBits*nnz/8) bytes of position steps
    u8 valueCount (0 means 256) | valueCount x int8 values (deduplicated, sorted)
    ceil(valueBits*nnz/8) bytes of value indexes, valueBits = max(1, ceil(log2(valueCount)))
    positions are running sums of the steps; unlisted positions hold the "zero" code

``type`` 3: the buffer is IEEE fp16 weights. ``type`` 4: the buffer is raw int8 codes.
A non-empty ``index`` (uint32) means sparse float weights: ``weight[index[i]] = alpha[i]``.

Dequantization: the flat codes are split into ``G`` equal contiguous groups (one per output
channel, or per block with ``--weightQuantBlock``). Asymmetric (``readType != 0``, or an old
type-4 model) stores ``alpha`` as ``G`` pairs ``(min, scale)`` and
``w = code * scale + (min - clampMin * scale)`` with ``clampMin = aMin or -128``; symmetric
stores ``G`` scales and ``w = code * scale``. Without ``has_scaleInt`` every alpha entry is
also multiplied by ``quantScale`` (not for old type-4 models).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import numpy as np

from .errors import MNNFormatError

__all__ = ["QuantizedWeight", "quantized_weight", "decode_quantized_weight", "conv_weight",
           "unpack_bits"]


@dataclass
class QuantizedWeight:
    """Int8 weight codes with per-group affine dequantization, not expanded to float.

    ``codes`` is flat int8 (one code per weight, in ``Convolution2D.weight`` order);
    group ``g`` covers ``codes[g*block_size:(g+1)*block_size]`` and dequantizes as
    ``codes * scale[g] + offset[g]`` (``offset`` is zero for symmetric quantization).
    ``shape`` is the shape recorded in the buffer (e.g. ``[oc, ic, kh, kw]`` or
    ``[oc*blocks, block]``), ``bits`` the code width."""
    codes: np.ndarray
    scale: np.ndarray
    offset: np.ndarray
    block_size: int
    shape: Tuple[int, ...]
    bits: int
    asymmetric: bool

    @property
    def num_groups(self) -> int:
        """Number of quantization groups (output channels x blocks)."""
        return int(self.scale.shape[0])

    def dequantize(self) -> np.ndarray:
        """Expand to flat float32 weights (the same layout as ``Convolution2D.weight``)."""
        c = self.codes.reshape(self.num_groups, self.block_size).astype(np.float32)
        return (c * self.scale[:, None] + self.offset[:, None]).reshape(-1)


class _Stream:
    """Bounds-checked little-endian reader over a quantization buffer."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def take(self, n: int, field: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise MNNFormatError(f"{self.what}: buffer too short reading {field} "
                                 f"({n} bytes at {self.pos}, buffer has {len(self.data)})")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u8(self, field: str) -> int:
        return self.take(1, field)[0]

    def u32(self, field: str) -> int:
        return int.from_bytes(self.take(4, field), "little")

    def shape(self, int32: bool) -> Tuple[int, ...]:
        ndim = self.u8("shape rank")
        if ndim == 0 or ndim > 4:
            raise MNNFormatError(f"{self.what}: bad shape rank {ndim} (1..4 expected)")
        dt = "<u4" if int32 else "<u2"
        raw = self.take(ndim * (4 if int32 else 2), "shape")
        return tuple(int(x) for x in np.frombuffer(raw, dtype=dt))


def unpack_bits(data: bytes, count: int, bits: int) -> np.ndarray:
    """Unpack ``count`` unsigned ``bits``-wide integers from an MSB-first bit stream."""
    if bits == 8:
        return np.frombuffer(data, np.uint8, count).copy()
    raw = np.frombuffer(data, np.uint8)
    if bits == 4:
        out = np.empty(raw.size * 2, np.uint8)
        out[0::2] = raw >> 4
        out[1::2] = raw & 15
        return out[:count]
    allbits = np.unpackbits(raw)[: count * bits].reshape(count, bits)
    weights = (1 << np.arange(bits - 1, -1, -1)).astype(np.uint16)
    return (allbits.astype(np.uint16) @ weights).astype(np.uint8)


def _count(shape: Tuple[int, ...], limit: int, what: str) -> int:
    count = math.prod(shape)
    if count > limit:
        raise MNNFormatError(f"{what}: shape {list(shape)} ({count} weights) is implausibly "
                             f"large for a {limit // 256}-byte buffer")
    return count


def _need_bits(n: int) -> int:
    return max(1, (n - 1).bit_length())


def _dense_codes(buf: bytes, shape_int32: bool, what: str) -> Tuple[np.ndarray, Tuple[int, ...], int]:
    s = _Stream(buf, what)
    shape = s.shape(shape_int32)
    count = _count(shape, 256 * len(buf), what)
    nsamples = s.u8("sample count") or 256
    samples = np.sort(np.frombuffer(s.take(nsamples, "samples"), np.int8))
    bits = _need_bits(nsamples)
    nbytes = (bits * count + 7) // 8
    idx = unpack_bits(s.take(nbytes, "indexes"), count, bits)
    if idx.size and int(idx.max()) >= nsamples:
        bad = int(np.argmax(idx >= nsamples))
        raise MNNFormatError(f"{what}: weight index {int(idx[bad])} at {bad} out of range "
                             f"for {nsamples} samples")
    return samples[idx], shape, bits


def _sparse_codes(buf: bytes, shape_int32: bool, alpha: Optional[np.ndarray],
                  what: str) -> Tuple[np.ndarray, Tuple[int, ...], int]:
    s = _Stream(buf, what)
    shape = s.shape(shape_int32)
    count = _count(shape, 256 * len(buf), what)
    nnz = s.u32("nnz")
    if nnz > count:
        raise MNNFormatError(f"{what}: {nnz} non-zeros for {count} weights")
    step_bits = s.u8("step bits")
    if not 1 <= step_bits <= 8:
        raise MNNFormatError(f"{what}: bad step width {step_bits} bits")
    steps = unpack_bits(s.take((step_bits * nnz + 7) // 8, "steps"), nnz, step_bits)
    nvalues = s.u8("value count") or 256
    raw_values = np.frombuffer(s.take(nvalues, "values"), np.int8)
    values = np.unique(raw_values)  # deduplicated and sorted, as MNN's value set
    vbits = _need_bits(nvalues)
    vidx = unpack_bits(s.take((vbits * nnz + 7) // 8, "value indexes"), nnz, vbits)
    if vidx.size and int(vidx.max()) >= values.size:
        raise MNNFormatError(f"{what}: value index {int(vidx.max())} out of range for "
                             f"{values.size} values")
    out = np.zeros(count, np.int8)
    if alpha is not None and alpha.size == 2 * shape[0] and shape[0]:
        minv = -(1 << (vbits - 1))
        area = count // shape[0]
        mins, scales = alpha[0::2], alpha[1::2]
        with np.errstate(divide="ignore", invalid="ignore"):
            zq = np.where(scales > 1e-6, np.round(-mins / np.where(scales > 1e-6, scales, 1))
                          + minv, minv)
        fill = (zq.astype(np.int64) & 0xFF).astype(np.uint8).view(np.int8)
        out[: area * shape[0]] = np.repeat(fill, area)
    pos = np.cumsum(steps.astype(np.int64))
    if pos.size and int(pos[-1]) >= count:
        raise MNNFormatError(f"{what}: sparse position {int(pos[-1])} out of range for "
                             f"{count} weights")
    out[pos] = values[vidx]
    return out, shape, vbits


def _alpha(quan: Dict[str, Any]) -> Optional[np.ndarray]:
    if quan.get("scaleStorage") in ("FP16", 1):
        a16 = quan.get("alphaFp16")
        if a16 is not None:
            return np.asarray(a16, np.uint16).view(np.float16).astype(np.float32)
    a = quan.get("alpha")
    return None if a is None else np.asarray(a, np.float32)


def quantized_weight(quan: Dict[str, Any], what: str = "quanParameter") -> QuantizedWeight:
    """Decode an ``IDSTQuan`` dict (types 1, 2 and 4) into int8 codes + per-group scale and
    offset, without expanding to float. Raises :class:`MNNFormatError` if malformed."""
    qtype = int(quan.get("type") or 0)
    buf = quan.get("buffer")
    if buf is None:
        raise MNNFormatError(f"{what}: no quantized buffer (external data not loaded?)")
    buf = np.asarray(buf, np.int8).tobytes()
    alpha = _alpha(quan)
    shape_int32 = bool(quan.get("shapeInt32"))
    if qtype == 1:
        codes, shape, bits = _dense_codes(buf, shape_int32, what)
    elif qtype == 2:
        codes, shape, bits = _sparse_codes(buf, shape_int32, alpha, what)
    elif qtype == 4:
        codes, shape, bits = np.frombuffer(buf, np.int8).copy(), (len(buf),), 8
    else:
        raise MNNFormatError(f"{what}: quantization type {qtype} has no int8 codes")
    if alpha is None or alpha.size == 0:
        raise MNNFormatError(f"{what}: missing alpha (scales)")
    a_min = int(quan.get("aMin") or 0)
    qscale = float(quan.get("quantScale") or 0.0)
    old_type4 = qtype == 4 and a_min == 0 and abs(qscale) < 1e-6
    asym = int(quan.get("readType") or 0) != 0 or old_type4
    if asym:
        if alpha.size % 2:
            raise MNNFormatError(f"{what}: asymmetric alpha has odd length {alpha.size}")
        mins, scale = alpha[0::2].copy(), alpha[1::2].copy()
        clamp_min = a_min if a_min != 0 else -128
        if clamp_min < 0:
            mins = mins - clamp_min * scale
    else:
        scale, mins = alpha.copy(), np.zeros_like(alpha)
    if not quan.get("has_scaleInt") and not old_type4 and qscale != 1.0:
        scale *= np.float32(qscale)
        mins *= np.float32(qscale)
    groups = scale.size
    if codes.size % groups:
        raise MNNFormatError(f"{what}: {codes.size} weights do not split into {groups} groups")
    return QuantizedWeight(codes=codes, scale=scale.astype(np.float32),
                           offset=mins.astype(np.float32), block_size=codes.size // groups,
                           shape=tuple(shape), bits=bits, asymmetric=asym)


def decode_quantized_weight(quan: Dict[str, Any], what: str = "quanParameter") -> np.ndarray:
    """Decode an ``IDSTQuan`` dict to flat float32 weights exactly as MNN's float path does
    (quantized types 1/2/4, fp16 type 3, and index-sparse float weights)."""
    index = quan.get("index")
    if index is not None:
        alpha = _alpha(quan)
        size = int(quan.get("weightSize") or 0)
        index = np.asarray(index, np.int64)
        if alpha is None or alpha.size != index.size:
            raise MNNFormatError(f"{what}: sparse index without matching alpha")
        if size > max(1 << 24, 1024 * index.size):
            raise MNNFormatError(f"{what}: weightSize {size} implausibly large for "
                                 f"{index.size} non-zeros")
        if index.size and int(index.max()) >= size:
            raise MNNFormatError(f"{what}: sparse index {int(index.max())} out of range for "
                                 f"weightSize {size}")
        out = np.zeros(size, np.float32)
        out[index] = alpha
        return out
    if int(quan.get("type") or 0) == 3:
        buf = quan.get("buffer")
        if buf is None:
            raise MNNFormatError(f"{what}: no fp16 buffer (external data not loaded?)")
        raw = np.asarray(buf, np.int8).tobytes()
        return np.frombuffer(raw[: len(raw) // 2 * 2], "<f2").astype(np.float32)
    return quantized_weight(quan, what).dequantize()


def conv_weight(conv: Dict[str, Any], what: str = "Convolution2D") -> np.ndarray:
    """The float32 weights of a ``Convolution2D`` dict: ``weight`` if present, otherwise
    decoded from ``quanParameter``."""
    quan = conv.get("quanParameter")
    w = conv.get("weight")
    if quan is not None and (w is None or len(w) == 0):
        return decode_quantized_weight(quan, what + ".quanParameter")
    if w is None:
        raise MNNFormatError(f"{what}: no weights (external data not loaded?)")
    return np.asarray(w, np.float32)
