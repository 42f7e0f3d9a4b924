"""Raw host memory as pymnn passes it: an int address (``arr.__array_interface__['data'][0]``, ``Var.ptr``),
a PyCapsule (real MNN's ``Var.ptr`` / ``Tensor.getHost()``) or a bytes-like buffer, read into numpy arrays.

MNN's ``expr.const``, ``Tensor(shape, type, data, dim)`` and ``CVImageProcess.convert`` read such data with
the size their shape (and type) gives; mnnjit copies it through ctypes after checking that the whole span
lies in one readable mapping of the process, so a wrong int raises instead of crashing the interpreter.
"""
from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

__all__ = ["is_address", "address_of", "read_address", "read_buffer"]


def is_address(v: Any) -> bool:
    """Whether ``v`` is read as a data address: a Python int (not bool) or a PyCapsule, as in MNN."""
    return (isinstance(v, int) and not isinstance(v, bool)) or type(v).__name__ == "PyCapsule"


def address_of(v: Any) -> int:
    """The address an int or a PyCapsule holds."""
    if isinstance(v, int):
        return int(v)
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
    get_ptr.restype, get_ptr.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get_ptr(v, get_name(v)) or 0


def _readable(addr: int, nbytes: int) -> bool:
    """Whether [addr, addr + nbytes) lies in one readable mapping of this process (Linux /proc/self/maps)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                span, perms = line.split()[:2]
                lo, hi = (int(p, 16) for p in span.split("-"))
                if lo <= addr and addr + nbytes <= hi:
                    return perms.startswith("r")
    except OSError:  # pragma: no cover - no procfs: trust the caller, as MNN does
        return True
    return False


def read_address(v: Any, count: int, dtype: Any, what: str = "data") -> np.ndarray:
    """Copy ``count`` values of ``dtype`` from an int address or a PyCapsule pointer (a new 1-D array)."""
    dtype = np.dtype(dtype)
    addr = address_of(v)
    nbytes = int(count) * dtype.itemsize
    if nbytes and (addr <= 0 or not _readable(addr, nbytes)):
        raise ValueError(f"{what}: {addr:#x} is not the address of {nbytes} readable bytes (an int is read as a "
                         "data address, as in MNN; pass a list or an ndarray for values)")
    out = np.empty(int(count), dtype)
    if nbytes:
        ctypes.memmove(out.ctypes.data, addr, nbytes)
    return out


def read_buffer(v: Any, dtype: Any) -> np.ndarray:
    """The values of a bytes-like object (bytes, bytearray, memoryview) as ``dtype`` (a new 1-D array)."""
    raw = memoryview(v).cast("B")
    dtype = np.dtype(dtype)
    if raw.nbytes % dtype.itemsize:
        raise ValueError(f"{raw.nbytes} bytes are not a whole number of {dtype} values")
    return np.frombuffer(raw, dtype).copy()
