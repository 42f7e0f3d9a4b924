"""MNN's dtype and data_format enums and the dtype rules mnnjit applies.

MNN narrows everything to 32-bit types: Python floats and float64 become float32, Python ints,
int64 and the other wide integer types become int32. Booleans become int32 (MNN has no bool
dtype; comparisons give int32 0/1). Internally a node may also hold float16 data (precision=low).
"""
from __future__ import annotations

import enum
from typing import Any

import numpy as _np


class _MNNEnum(enum.IntEnum):
    """An IntEnum that prints like pybind11 enums do: ``dtype.float``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    __str__ = __repr__


class dtype(_MNNEnum):  # noqa: N801 - MNN's name
    """MNN's expr.dtype."""

    double = 0
    float = 1
    int = 2
    int64 = 3
    uint8 = 4
    int8 = 5


class data_format(_MNNEnum):  # noqa: N801 - MNN's name
    """MNN's expr.data_format."""

    NCHW = 0
    NHWC = 1
    NC4HW4 = 2


FORMAT_NAMES = ("NCHW", "NHWC", "NC4HW4")

F32 = _np.dtype(_np.float32)
F16 = _np.dtype(_np.float16)
I32 = _np.dtype(_np.int32)
U8 = _np.dtype(_np.uint8)
I8 = _np.dtype(_np.int8)

#: The numpy dtypes a node may hold.
STORAGE_DTYPES = frozenset({F32, F16, I32, U8, I8})

_ENUM_TO_NP = {
    dtype.double: F32,
    dtype.float: F32,
    dtype.int: I32,
    dtype.int64: I32,
    dtype.uint8: U8,
    dtype.int8: I8,
}
_NP_TO_ENUM = {F32: dtype.float, F16: dtype.float, I32: dtype.int, U8: dtype.uint8, I8: dtype.int8}

_NARROW = {
    "f": F32,  # float16 stays float16 only when asked for explicitly (see as_np_dtype)
    "i": I32,
    "u": I32,
    "b": I32,
}


def narrow(dt: Any) -> _np.dtype:
    """Map any numpy dtype to the 32-bit storage dtype MNN uses for it."""
    dt = _np.dtype(dt)
    if dt in STORAGE_DTYPES and dt != F16:
        return dt
    if dt == F16:
        return F32
    kind = dt.kind
    if kind in _NARROW:
        return _NARROW[kind]
    raise TypeError(f"mnnjit does not support dtype {dt} (supported: float32, int32, uint8, int8)")


def as_np_dtype(d: Any) -> _np.dtype:
    """Turn a user's dtype argument (MNN enum, numpy dtype or type, Python type, string) into storage dtype."""
    if isinstance(d, dtype):
        return _ENUM_TO_NP[d]
    if d is float:
        return F32
    if d is int or d is bool:
        return I32
    try:
        npd = _np.dtype(d)
    except TypeError as exc:
        raise TypeError(f"not a dtype: {d!r}") from exc
    if npd == F16:
        return F16
    return narrow(npd)


def to_enum(dt: _np.dtype) -> dtype:
    """The MNN dtype enum member reported for a storage dtype."""
    return _NP_TO_ENUM[_np.dtype(dt)]


def as_format(fmt: Any) -> str:
    """Turn a data_format enum or name into its name ('NCHW', 'NHWC' or 'NC4HW4')."""
    if isinstance(fmt, data_format):
        return fmt.name
    if isinstance(fmt, str) and fmt.upper() in FORMAT_NAMES:
        return fmt.upper()
    if isinstance(fmt, int) and not isinstance(fmt, bool) and 0 <= fmt < 3:
        return data_format(fmt).name
    raise TypeError(f"not a data_format: {fmt!r} (expected NCHW, NHWC or NC4HW4)")


def result_dtype(*dts: _np.dtype) -> _np.dtype:
    """numpy's promotion of storage dtypes, narrowed to MNN's 32-bit types."""
    if len(dts) == 1:
        return dts[0]
    first = dts[0]
    if all(d == first for d in dts):
        return first
    return narrow(_np.result_type(*dts))
