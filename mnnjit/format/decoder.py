"""Generic, verifying FlatBuffers table decoder driven by a :class:`~mnnjit.format.schema.Schema`.

Every offset, vtable, length and count is checked against the buffer before it is used, so
a malformed buffer raises :class:`MNNFormatError` (never an IndexError, a crash, a hang or a
huge allocation):

* references (uoffsets) must point strictly forward and inside the buffer, which rules out
  cycles; nesting depth is bounded as well (``MAX_DEPTH``);
* vtables and tables must lie inside the buffer, every present field inside its table;
* vector/string bodies must fit in the buffer before anything is allocated;
* the total decoded size is bounded by a multiple of the buffer size (``budget``), so shared
  sub-objects referenced many times cannot multiply memory use.

Tables decode into plain dicts: every schema field is present; absent scalars take their
schema default, absent strings/tables/vectors are ``None``; enums come back as their names
(numeric fallback for unknown values); scalar vectors are numpy arrays; a union field ``X``
yields two keys, ``X_type`` (member table name or None) and ``X`` (its dict).
"""
from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional

import numpy as np

from .errors import MNNFormatError
from .schema import SCALARS, Field, Schema

__all__ = ["Decoder", "MAX_DEPTH"]

MAX_DEPTH = 64
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U16 = struct.Struct("<H")


class Decoder:
    """Decode tables from one buffer; create one per buffer."""

    def __init__(self, buf: bytes, schema: Schema, budget_factor: int = 4) -> None:
        self.buf = buf
        self.n = len(buf)
        self.schema = schema
        self.budget = budget_factor * self.n + (1 << 16)
        self._structs = {k: struct.Struct("<" + v[0]) for k, v in SCALARS.items()}

    # ------------------------------------------------------------------ primitives
    def _fail(self, path: str, msg: str) -> MNNFormatError:
        return MNNFormatError(f"{path}: {msg}")

    def _charge(self, nbytes: int, path: str) -> None:
        self.budget -= nbytes
        if self.budget < 0:
            raise self._fail(path, "decoded data exceeds the size bound for this file "
                             "(shared or repeated sub-objects?)")

    def _u32(self, pos: int, path: str) -> int:
        if pos < 0 or pos + 4 > self.n:
            raise self._fail(path, f"offset {pos} out of bounds (buffer size {self.n})")
        return _U32.unpack_from(self.buf, pos)[0]

    def deref(self, pos: int, path: str) -> int:
        """Follow the uoffset stored at ``pos``; the target must lie strictly after it."""
        u = self._u32(pos, path)
        target = pos + u
        if u < 4:
            raise self._fail(path, f"reference at {pos} points into itself (uoffset {u})")
        if target + 4 > self.n:
            raise self._fail(path, f"reference at {pos} points outside the buffer "
                             f"({target} >= {self.n})")
        return target

    # ------------------------------------------------------------------ tables
    def table(self, pos: int, tname: str, path: str, depth: int = 0) -> Dict[str, Any]:
        """Decode the table of type ``tname`` starting at ``pos``."""
        if depth > MAX_DEPTH:
            raise self._fail(path, f"nesting deeper than {MAX_DEPTH} levels")
        tdef = self.schema.tables[tname]
        if pos < 0 or pos + 4 > self.n:
            raise self._fail(path, f"table {tname} at {pos} outside the buffer")
        vt = pos - _I32.unpack_from(self.buf, pos)[0]
        if vt < 0 or vt + 4 > self.n or vt & 1:
            raise self._fail(path, f"table {tname} at {pos}: bad vtable position {vt}")
        vsize, tsize = struct.unpack_from("<HH", self.buf, vt)
        if vsize < 4 or vsize & 1 or vt + vsize > self.n:
            raise self._fail(path, f"table {tname} at {pos}: bad vtable size {vsize}")
        if tsize < 4 or pos + tsize > self.n:
            raise self._fail(path, f"table {tname} at {pos}: bad table size {tsize}")
        nslots = (vsize - 4) // 2
        self._charge(16 + 8 * len(tdef.fields), path)
        out: Dict[str, Any] = {}
        for f in tdef.fields:
            fpath = f"{path}.{f.name}"
            if f.kind == "union":
                code = self._scalar_field(pos, vt, nslots, tsize, f.slot - 1, "uint8", 0, fpath)
                ofs = self._slot(vt, nslots, f.slot)
                out[f.name + "_type"], out[f.name] = self._union(
                    pos, ofs, tsize, f, code, fpath, depth)
                continue
            if f.kind in ("scalar", "enum"):
                base = self.schema.scalar_of(f)
                v = self._scalar_field(pos, vt, nslots, tsize, f.slot, base, f.default, fpath)
                out[f.name] = self._enum_name(f.type, v) if f.kind == "enum" else v
                continue
            ofs = self._slot(vt, nslots, f.slot)
            if ofs == 0:
                out[f.name] = None
                continue
            if ofs < 4 or ofs + 4 > tsize:
                raise self._fail(fpath, f"field offset {ofs} outside table of size {tsize}")
            target = self.deref(pos + ofs, fpath)
            out[f.name] = self._value(target, f, fpath, depth)
        return out

    def _slot(self, vt: int, nslots: int, slot: int) -> int:
        if slot >= nslots:
            return 0
        return _U16.unpack_from(self.buf, vt + 4 + 2 * slot)[0]

    def _scalar_field(self, pos: int, vt: int, nslots: int, tsize: int, slot: int, base: str,
                      default: Any, path: str) -> Any:
        ofs = self._slot(vt, nslots, slot)
        if ofs == 0:
            return default
        size = SCALARS[base][2]
        if ofs < 4 or ofs + size > tsize:
            raise self._fail(path, f"field offset {ofs} outside table of size {tsize}")
        v = self._structs[base].unpack_from(self.buf, pos + ofs)[0]
        if base == "bool":
            return bool(v)
        return v

    def _enum_name(self, ename: str, v: int) -> Any:
        return self.schema.enums[ename].names.get(v, v)

    def _union(self, pos: int, ofs: int, tsize: int, f: Field, code: int, path: str,
               depth: int):
        u = self.schema.unions[f.type]
        if code == 0:
            return None, None
        if code > len(u.members):
            raise self._fail(path, f"union {f.type} type code {code} unknown "
                             f"(valid 0..{len(u.members)})")
        member = u.members[code - 1]
        if ofs == 0:
            return member, None
        if ofs < 4 or ofs + 4 > tsize:
            raise self._fail(path, f"field offset {ofs} outside table of size {tsize}")
        target = self.deref(pos + ofs, path)
        return member, self.table(target, member, f"{path}({member})", depth + 1)

    # ------------------------------------------------------------------ values
    def _value(self, target: int, f: Field, path: str, depth: int) -> Any:
        kind = f.kind
        if kind == "table":
            return self.table(target, f.type, path, depth + 1)
        if kind == "string":
            return self.string(target, path)
        count = self._u32(target, path)
        body = target + 4
        if kind in ("vscalar", "venum"):
            base = self.schema.scalar_of(f)
            _, dt, size = SCALARS[base]
            nbytes = count * size
            if body + nbytes > self.n:
                raise self._fail(path, f"vector of {count} x {base} at {target} runs past the "
                                 f"end of the buffer ({self.n} bytes)")
            self._charge(nbytes, path)
            arr = np.frombuffer(self.buf, dtype=dt, count=count, offset=body)
            if base == "bool":
                return arr != 0
            arr = arr.astype(arr.dtype.newbyteorder("="), copy=True)
            if kind == "venum":
                return [self._enum_name(f.type, int(x)) for x in arr]
            return arr
        # vectors of offsets
        if body + 4 * count > self.n:
            raise self._fail(path, f"vector of {count} references at {target} runs past the "
                             f"end of the buffer ({self.n} bytes)")
        self._charge(4 * count, path)
        items: List[Any] = []
        for i in range(count):
            ipath = f"{path}[{i}]"
            t = self.deref(body + 4 * i, ipath)
            if kind == "vstring":
                items.append(self.string(t, ipath))
            else:
                items.append(self.table(t, f.type, ipath, depth + 1))
        return items

    def string(self, pos: int, path: str) -> str:
        """Decode the string at ``pos`` (length-prefixed, NUL-terminated, UTF-8)."""
        length = self._u32(pos, path)
        end = pos + 4 + length
        if end + 1 > self.n:
            raise self._fail(path, f"string of length {length} at {pos} runs past the end "
                             f"of the buffer ({self.n} bytes)")
        if self.buf[end] != 0:
            raise self._fail(path, f"string at {pos} is not NUL-terminated")
        self._charge(length + 8, path)
        return bytes(self.buf[pos + 4:end]).decode("utf-8", errors="surrogateescape")

    def root(self, tname: Optional[str] = None) -> Dict[str, Any]:
        """Decode the root table (``tname`` defaults to the schema's root type)."""
        tname = tname or self.schema.root
        if self.n < 12:
            raise MNNFormatError(f"buffer of {self.n} bytes is too small for a FlatBuffer")
        return self.table(self.deref(0, tname), tname, tname)
