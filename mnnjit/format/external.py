"""External weights (converter ``--saveExternalData``): ``<model>.mnn.weight``.

Tables with an ``external`` int64 list keep their payload in the weight file:

* ``Convolution2D`` / ``Convolution3D``: ``[offset, weight_bytes, bias_bytes]`` (float32);
  a quantized ``Convolution2D`` (with ``quanParameter``):
  ``[offset, buffer_bytes, alpha_bytes, bias_bytes, index_bytes]``, stored back to back;
* ``Blob`` (Const): ``[offset, bytes]`` raw tensor bytes of ``dataType``;
* ``Scale``: ``[offset, scaleData_bytes, biasData_bytes]``;
* ``LayerNorm`` / ``GroupNorm``: ``[offset, gamma_bytes, beta_bytes]``.

:func:`load_external_data` reads them (every offset/size checked against the file) into the
tables' inline fields and clears ``external``, so the Net becomes self-contained.
"""
from __future__ import annotations

import errno
import os
from typing import Any, Callable, Dict, Iterator, List

import numpy as np

from .errors import MNNFormatError
from .model import Net

__all__ = ["ExternalData", "has_external", "load_external_data"]


class ExternalData:
    """A bounds-checked reader of an external weight file."""

    def __init__(self, path: str) -> None:
        path = os.fspath(path)
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, f"MNN external weight file not found: {path}",
                                    path)
        self.path = path
        self.size = os.path.getsize(path)
        self._fh = open(path, "rb")

    def close(self) -> None:
        """Close the file."""
        self._fh.close()

    def __enter__(self) -> "ExternalData":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def read(self, offset: int, size: int, what: str) -> bytes:
        """Read ``size`` bytes at ``offset``; raise MNNFormatError if outside the file."""
        offset, size = int(offset), int(size)
        if offset < 0 or size < 0 or offset + size > self.size:
            raise MNNFormatError(f"{what}: external data [{offset}, +{size}) outside "
                                 f"{self.path} ({self.size} bytes)")
        self._fh.seek(offset)
        data = self._fh.read(size)
        if len(data) != size:
            raise MNNFormatError(f"{what}: short read from {self.path}")
        return data


def _array(data: bytes, dtype: str, what: str) -> np.ndarray:
    dt = np.dtype(dtype)
    if len(data) % dt.itemsize:
        raise MNNFormatError(f"{what}: {len(data)} external bytes are not a whole number of "
                             f"{dt.name} values")
    return np.frombuffer(data, dt).astype(dt.newbyteorder("="))


def _ext(table: Dict[str, Any], n: int, what: str) -> List[int]:
    ext = [int(x) for x in table["external"]]
    if len(ext) < n:
        raise MNNFormatError(f"{what}: external list {ext} too short (need {n} entries)")
    return ext


def _chunks(f: ExternalData, ext: List[int], what: str) -> List[bytes]:
    """Consecutive payloads: ext[0] is the offset, ext[1:] the byte sizes."""
    out, pos = [], ext[0]
    for size in ext[1:]:
        out.append(f.read(pos, size, what))
        pos += size
    return out


def _conv(f: ExternalData, t: Dict[str, Any], what: str) -> None:
    quan = t.get("quanParameter")
    if quan is not None and quan.get("buffer") is None:
        ext = _ext(t, 3, what)
        parts = _chunks(f, ext, what)
        buf, alpha = parts[0], parts[1]
        if buf:
            quan["buffer"] = np.frombuffer(buf, np.int8).copy()
        if alpha:
            if quan.get("scaleStorage") in ("FP16", 1):
                quan["alphaFp16"] = _array(alpha, "<u2", what + ".alpha")
            else:
                quan["alpha"] = _array(alpha, "<f4", what + ".alpha")
        if len(parts) > 2 and parts[2]:
            t["bias"] = _array(parts[2], "<f4", what + ".bias")
        if len(parts) > 3 and parts[3]:
            quan["index"] = _array(parts[3], "<u4", what + ".index")
    else:
        w, b = _chunks(f, _ext(t, 3, what)[:3], what)
        t["weight"] = _array(w, "<f4", what + ".weight")
        t["bias"] = _array(b, "<f4", what + ".bias")
    t["external"] = None


def _pair(names: tuple) -> Callable[[ExternalData, Dict[str, Any], str], None]:
    def load(f: ExternalData, t: Dict[str, Any], what: str) -> None:
        a, b = _chunks(f, _ext(t, 3, what)[:3], what)
        t[names[0]] = _array(a, "<f4", f"{what}.{names[0]}")
        t[names[1]] = _array(b, "<f4", f"{what}.{names[1]}")
        t["external"] = None
    return load


_BLOB_FIELDS = {
    "DT_FLOAT": ("float32s", "<f4"), "DT_INT32": ("int32s", "<i4"),
    "DT_INT64": ("int64s", "<i8"), "DT_UINT8": ("uint8s", "u1"), "DT_INT8": ("int8s", "i1"),
    "DT_BOOL": ("int32s", "<i4"), "DT_QUINT8": ("uint8s", "u1"), "DT_QINT8": ("int8s", "i1"),
    "DT_QINT32": ("int32s", "<i4"), "DT_HALF": ("uint8s", "u1"),
    "DT_BFLOAT16": ("uint8s", "u1"), "DT_INT16": ("uint8s", "u1"), "DT_UINT16": ("uint8s", "u1"),
}


def _blob(f: ExternalData, t: Dict[str, Any], what: str) -> None:
    ext = _ext(t, 2, what)
    data = f.read(ext[0], ext[1], what)
    name, dt = _BLOB_FIELDS.get(str(t.get("dataType")), ("uint8s", "u1"))
    count = int(np.prod(t.get("dims") if t.get("dims") is not None else [], dtype=np.int64))
    if name == "int64s" and count and len(data) == 4 * count:
        name, dt = "int32s", "<i4"  # stored narrowed to int32
    if name == "int32s" and count and len(data) == count and t.get("dataType") == "DT_BOOL":
        name, dt = "uint8s", "u1"
    t[name] = _array(data, dt, what)
    t["external"] = None


_LOADERS: Dict[str, Callable[[ExternalData, Dict[str, Any], str], None]] = {
    "Convolution2D": _conv,
    "Convolution3D": _conv,
    "Blob": _blob,
    "Scale": _pair(("scaleData", "biasData")),
    "LayerNorm": _pair(("gamma", "beta")),
    "GroupNorm": _pair(("gamma", "beta")),
}


def _all_ops(net: Net) -> Iterator[tuple]:
    for i, op in enumerate(net.oplists):
        yield f"op {i} ({op.name!r})", op
    for s, sub in enumerate(net.subgraphs or []):
        for i, op in enumerate(sub.nodes):
            yield f"subgraph {s} op {i} ({op.name!r})", op


def _external_ops(net: Net) -> Iterator[tuple]:
    for label, op in _all_ops(net):
        if op.main_type in _LOADERS and op.main is not None and op.main.get("external") \
                is not None and len(op.main["external"]):
            yield label, op


def has_external(net: Net) -> bool:
    """Whether any op keeps its data in an external weight file."""
    return any(True for _ in _external_ops(net))


def load_external_data(net: Net, weight_path: str) -> Net:
    """Load every op's external payload from ``weight_path`` into the Net (in place, also
    returned). Raises FileNotFoundError if the file is missing, MNNFormatError if an
    offset/size lies outside it."""
    ops: List[tuple] = list(_external_ops(net))
    if not ops:
        return net
    with ExternalData(weight_path) as f:
        for label, op in ops:
            _LOADERS[op.main_type](f, op.main, f"{label}.main({op.main_type})")
            op.externalPath = None
    return net
