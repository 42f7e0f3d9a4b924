"""Device arrays and the device buffer pool.

A :class:`DeviceArray` is a value living on the device: a buffer with a logical shape and dtype and
the C type it is stored as (``float``, ``half`` for float32 values under precision=low and for
float16 values, ``int``, ``uchar``, ``char``). It is what ``run_group`` / ``run_op`` return and
what the compiler hands back to them; ``to_host`` turns it into a numpy array.

Buffers are pooled: a DeviceArray that dies returns its buffer to :class:`BufferPool`, and the next
allocation of a size that fits takes it again, so a plan run again and again allocates nothing
after its first run (a lowered graph holds its buffers for its lifetime, planned once).
"""
from __future__ import annotations

import threading
from typing import Any

import numpy as np

#: logical dtype name -> (C storage type, numpy storage dtype)
STORAGE = {
    "float32": ("float", np.dtype(np.float32)),
    "float16": ("half", np.dtype(np.float16)),
    "int32": ("int", np.dtype(np.int32)),
    "uint8": ("uchar", np.dtype(np.uint8)),
    "int8": ("char", np.dtype(np.int8)),
}
CTYPE_NP = {"float": np.dtype(np.float32), "half": np.dtype(np.float16), "int": np.dtype(np.int32),
            "uchar": np.dtype(np.uint8), "char": np.dtype(np.int8)}


def storage_of(dtype: Any, half_floats: bool = False) -> str | None:
    """The C storage type of logical ``dtype`` (float32 as ``half`` when ``half_floats``), or None when
    the device does not hold that dtype."""
    name = np.dtype(dtype).name
    if name not in STORAGE:
        return None
    if half_floats and name == "float32":
        return "half"
    return STORAGE[name][0]


class BufferPool:
    """Free device buffers by size, reused before new ones are allocated (capped in bytes)."""

    def __init__(self, rt: Any, cap_bytes: int = 1 << 30) -> None:
        self.rt = rt
        self.cap = cap_bytes
        self._free: dict[int, list] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    @staticmethod
    def _round(nbytes: int) -> int:
        # sizes rounded to 1/8 of their power of two: near sizes share buffers
        n = max(int(nbytes), 64)
        step = 1 << max(6, n.bit_length() - 3)
        return -(-n // step) * step

    def take(self, nbytes: int) -> tuple[Any, int]:
        """(buffer, its size) of at least ``nbytes``: a free one of that size class, else a new one."""
        size = self._round(nbytes)
        with self._lock:
            lst = self._free.get(size)
            if lst:
                self._bytes -= size
                return lst.pop(), size
        return self.rt.buffer(size), size

    def give(self, buf: Any, size: int) -> None:
        """Return a buffer (dropped when the pool is full)."""
        with self._lock:
            if self._bytes + size > self.cap:
                return
            self._free.setdefault(size, []).append(buf)
            self._bytes += size

    def clear(self) -> None:
        """Release every free buffer."""
        with self._lock:
            self._free.clear()
            self._bytes = 0


class DeviceArray:
    """A value on the device (see the module docstring). ``shape``/``dtype`` are the logical ones."""

    __slots__ = ("buf", "shape", "dtype", "ctype", "size", "_pool", "_psize", "__weakref__")

    def __init__(self, buf: Any, shape: tuple, dtype: Any, ctype: str, pool: BufferPool | None = None,
                 psize: int = 0) -> None:
        self.buf = buf
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.ctype = ctype
        n = 1
        for s in self.shape:
            n *= s
        self.size = n
        self._pool = pool
        self._psize = psize

    @property
    def nbytes(self) -> int:
        """Bytes of storage the value takes."""
        return self.size * CTYPE_NP[self.ctype].itemsize

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def reshaped(self, shape: tuple) -> "DeviceArray":
        """The same buffer seen with another shape of the same size (the buffer stays owned here)."""
        out = DeviceArray(self.buf, shape, self.dtype, self.ctype)
        out._pool = None
        return out

    def __del__(self) -> None:
        pool = self._pool
        if pool is not None and self.buf is not None:
            try:
                pool.give(self.buf, self._psize)
            except Exception:  # interpreter shutdown
                pass

    def __repr__(self) -> str:
        return f"DeviceArray(shape={list(self.shape)}, dtype={self.dtype.name}, stored as {self.ctype})"


def new_array(pool: BufferPool, shape: tuple, dtype: Any, ctype: str | None = None) -> DeviceArray:
    """A pooled, uninitialised device array."""
    ctype = ctype or storage_of(dtype)
    if ctype is None:
        raise TypeError(f"the OpenCL backend holds no {np.dtype(dtype).name} arrays")
    n = 1
    for s in shape:
        n *= int(s)
    buf, size = pool.take(n * CTYPE_NP[ctype].itemsize)
    return DeviceArray(buf, shape, dtype, ctype, pool, size)


def to_storage(arr: np.ndarray, ctype: str) -> np.ndarray:
    """A host array as the C-contiguous bytes of storage type ``ctype``."""
    want = CTYPE_NP[ctype]
    if arr.dtype != want:
        arr = arr.astype(want)
    return np.ascontiguousarray(arr)


def upload(rt: Any, pool: BufferPool, arr: np.ndarray, ctype: str | None = None) -> DeviceArray:
    """A device copy of host array ``arr`` (blocking: the host array may change afterwards)."""
    arr = np.asarray(arr)
    ctype = ctype or storage_of(arr.dtype)
    if ctype is None:
        raise TypeError(f"the OpenCL backend holds no {arr.dtype.name} arrays")
    dev = new_array(pool, arr.shape, arr.dtype if arr.dtype.name != "float16" or ctype == "half" else arr.dtype,
                    ctype)
    if dev.size:
        rt.upload(dev.buf, to_storage(arr, ctype), blocking=True)
    return dev


def download(rt: Any, dev: DeviceArray) -> np.ndarray:
    """A device array's value as a new numpy array of its logical dtype."""
    host = np.empty(dev.shape, CTYPE_NP[dev.ctype])
    if dev.size:
        rt.download(host, dev.buf, blocking=True)
    if host.dtype != dev.dtype:
        host = host.astype(dev.dtype)
    return host
