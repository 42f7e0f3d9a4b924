"""Writing ``--saveExternalData`` weight files: the inverse of :mod:`mnnjit.format.external`.

:func:`split_external` moves the payload of every convolution (float or quantized weights and
bias), Scale, LayerNorm / GroupNorm, and every Const holding more than 1024 values into one
byte string, back to back in op order, and records ``external = [offset, sizes...]`` in each table
(the layout real MNN's converter writes and reads).
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np

from .model import Net

__all__ = ["split_external", "CONST_EXTERNAL_MIN"]

#: Consts with more values than this go to the weight file (real MNN's converter keeps smaller ones).
CONST_EXTERNAL_MIN = 1024

_BLOB_FIELDS = ("float32s", "int32s", "uint8s", "int8s", "int64s")


def _bytes(v: Any, dtype: str) -> bytes:
    return b"" if v is None else np.ascontiguousarray(np.asarray(v).astype(dtype)).tobytes()


class _Out:
    def __init__(self) -> None:
        self.parts: List[bytes] = []
        self.size = 0

    def put(self, chunks: List[bytes]) -> List[int]:
        ext = [self.size] + [len(c) for c in chunks]
        for c in chunks:
            self.parts.append(c)
            self.size += len(c)
        return ext


def _conv(out: _Out, t: Dict[str, Any]) -> None:
    q = t.get("quanParameter")
    if q is not None and q.get("buffer") is not None:
        alpha = q.get("alpha")
        chunks = [_bytes(q["buffer"], "i1"), _bytes(alpha, "<f4"), _bytes(t.get("bias"), "<f4"),
                  _bytes(q.get("index"), "<u4")]
        t["external"] = np.asarray(out.put(chunks), np.int64)
        q["buffer"], q["alpha"], q["index"] = None, None, None
        t["bias"] = None
    elif q is None and t.get("weight") is not None:
        chunks = [_bytes(t["weight"], "<f4"), _bytes(t.get("bias"), "<f4")]
        t["external"] = np.asarray(out.put(chunks), np.int64)
        t["weight"], t["bias"] = None, None


def _pair(names: Tuple[str, str]):
    def move(out: _Out, t: Dict[str, Any]) -> None:
        if t.get(names[0]) is None:
            return
        t["external"] = np.asarray(out.put([_bytes(t.get(names[0]), "<f4"), _bytes(t.get(names[1]), "<f4")]),
                                   np.int64)
        t[names[0]], t[names[1]] = None, None
    return move


def _blob(out: _Out, t: Dict[str, Any]) -> None:
    for name in _BLOB_FIELDS:
        v = t.get(name)
        if v is not None and np.asarray(v).size > CONST_EXTERNAL_MIN:
            dtype = {"float32s": "<f4", "int32s": "<i4", "uint8s": "u1", "int8s": "i1", "int64s": "<i8"}[name]
            t["external"] = np.asarray(out.put([_bytes(v, dtype)]), np.int64)
            t[name] = None
            return


_MOVERS = {"Convolution2D": _conv, "Blob": _blob, "Scale": _pair(("scaleData", "biasData")),
           "LayerNorm": _pair(("gamma", "beta")), "GroupNorm": _pair(("gamma", "beta"))}


def split_external(net: Net) -> bytes:
    """Move weights out of ``net`` (in place) and return the weight file's bytes."""
    out = _Out()
    ops = list(net.oplists)
    for sub in net.subgraphs or []:
        ops += sub.nodes
    for op in ops:
        mover = _MOVERS.get(op.main_type)
        if mover is not None and op.main is not None:
            mover(out, op.main)
    return b"".join(out.parts)
