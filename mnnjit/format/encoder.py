"""Generic FlatBuffers table encoder driven by a :class:`~mnnjit.format.schema.Schema`.

Input is the dict form the decoder produces (missing keys / None mean "absent"; enums by
name or number; vectors as numpy arrays or sequences; union ``X`` with its ``X_type``).
Scalars equal to their schema default are omitted, as FlatBuffers builders do by default.
"""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from .errors import MNNFormatError
from .schema import SCALARS, Field, Schema

__all__ = ["Encoder"]

_PREPEND_SLOT = {
    "bool": "PrependBoolSlot", "int8": "PrependInt8Slot", "uint8": "PrependUint8Slot",
    "int16": "PrependInt16Slot", "uint16": "PrependUint16Slot", "int32": "PrependInt32Slot",
    "uint32": "PrependUint32Slot", "int64": "PrependInt64Slot", "uint64": "PrependUint64Slot",
    "float32": "PrependFloat32Slot", "float64": "PrependFloat64Slot",
}
_INT_RANGES = {
    "int8": (-2**7, 2**7), "uint8": (0, 2**8), "int16": (-2**15, 2**15), "uint16": (0, 2**16),
    "int32": (-2**31, 2**31), "uint32": (0, 2**32), "int64": (-2**63, 2**63),
    "uint64": (0, 2**64),
}


class Encoder:
    """Serialize table dicts into one FlatBuffers ``Builder``."""

    def __init__(self, schema: Schema, initial_size: int = 1 << 16) -> None:
        import flatbuffers  # imported on first write only

        self.schema = schema
        self.b = flatbuffers.Builder(initial_size)
        self._strings: Dict[bytes, int] = {}

    def finish(self, root: Dict[str, Any], tname: str = None) -> bytes:
        """Encode ``root`` as the buffer's root table and return the finished bytes."""
        tname = tname or self.schema.root
        off = self.table(root, tname, tname)
        self.b.Finish(off)
        return bytes(self.b.Output())

    # ------------------------------------------------------------------ helpers
    def _enum_value(self, ename: str, v: Any, path: str) -> int:
        if isinstance(v, str):
            e = self.schema.enums[ename]
            if v not in e.values:
                raise MNNFormatError(f"{path}: {v!r} is not a {ename} value")
            return e.values[v]
        return int(v)

    def _check_scalar(self, base: str, v: Any, path: str) -> Any:
        if base == "bool":
            return bool(v)
        if base.startswith("float"):
            return float(v)
        iv = int(v)
        lo, hi = _INT_RANGES[base]
        if not lo <= iv < hi:
            raise MNNFormatError(f"{path}: value {iv} does not fit {base}")
        return iv

    def string(self, s: Any) -> int:
        """Create (or reuse) a string and return its offset."""
        data = s if isinstance(s, bytes) else str(s).encode("utf-8", errors="surrogateescape")
        off = self._strings.get(data)
        if off is None:
            off = self.b.CreateString(data)
            self._strings[data] = off
        return off

    def _offsets_vector(self, offs: List[int]) -> int:
        b = self.b
        b.StartVector(4, len(offs), 4)
        for o in reversed(offs):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    def _value(self, f: Field, v: Any, path: str) -> int:
        kind = f.kind
        if kind == "string":
            return self.string(v)
        if kind == "table":
            return self.table(v, f.type, path)
        if kind in ("vscalar", "venum"):
            base = self.schema.scalar_of(f)
            if kind == "venum":
                v = [self._enum_value(f.type, x, path) for x in v]
            arr = np.asarray(v)
            if arr.ndim != 1 and arr.size:
                arr = arr.reshape(-1)
            dt = np.dtype(SCALARS[base][1])
            if base == "bool":
                arr = arr.astype(bool).view(np.uint8)
            elif arr.size and arr.dtype != dt:
                if arr.dtype.kind in "iub" and dt.kind in "iu":
                    lo, hi = _INT_RANGES[base]
                    if arr.min() < lo or arr.max() >= hi:
                        raise MNNFormatError(f"{path}: values do not fit {base}")
                arr = arr.astype(dt)
            elif not arr.size:
                arr = np.zeros(0, dt)
            return self.b.CreateNumpyVector(np.ascontiguousarray(arr, dtype=dt))
        if kind == "vstring":
            return self._offsets_vector([self.string(x) for x in v])
        if kind == "vtable":
            return self._offsets_vector(
                [self.table(x, f.type, f"{path}[{i}]") for i, x in enumerate(v)])
        raise MNNFormatError(f"{path}: cannot encode field kind {kind}")

    # ------------------------------------------------------------------ tables
    def table(self, d: Any, tname: str, path: str) -> int:
        """Encode one table dict of type ``tname`` and return its offset."""
        if hasattr(d, "to_dict"):
            d = d.to_dict()
        if not isinstance(d, dict):
            raise MNNFormatError(f"{path}: expected a dict for table {tname}, "
                                 f"got {type(d).__name__}")
        tdef = self.schema.tables[tname]
        known = {f.name for f in tdef.fields} | {
            f.name + "_type" for f in tdef.fields if f.kind == "union"}
        extra = set(d) - known
        if extra:
            raise MNNFormatError(f"{path}: unknown field(s) {sorted(extra)} for table {tname}")
        # 1. children first (FlatBuffers cannot nest object construction)
        offsets: Dict[str, int] = {}
        union_codes: Dict[str, int] = {}
        for f in tdef.fields:
            v = d.get(f.name)
            fpath = f"{path}.{f.name}"
            if f.kind == "union":
                code = self._union_code(f, d.get(f.name + "_type"), v, fpath)
                union_codes[f.name] = code
                if v is not None:
                    if code == 0:
                        raise MNNFormatError(f"{fpath}: value given but {f.name}_type is None")
                    member = self.schema.unions[f.type].members[code - 1]
                    offsets[f.name] = self.table(v, member, f"{fpath}({member})")
            elif f.kind not in ("scalar", "enum") and v is not None:
                offsets[f.name] = self._value(f, v, fpath)
        # 2. the table itself
        b = self.b
        b.StartObject(tdef.num_slots)
        for f in tdef.fields:
            fpath = f"{path}.{f.name}"
            if f.kind == "union":
                code = union_codes[f.name]
                if code:
                    b.PrependUint8Slot(f.slot - 1, code, 0)
                if f.name in offsets:
                    b.PrependUOffsetTRelativeSlot(f.slot, offsets[f.name], 0)
            elif f.kind in ("scalar", "enum"):
                v = d.get(f.name)
                if v is None:
                    continue
                base = self.schema.scalar_of(f)
                if f.kind == "enum":
                    v = self._enum_value(f.type, v, fpath)
                v = self._check_scalar(base, v, fpath)
                getattr(b, _PREPEND_SLOT[base])(f.slot, v, f.default)
            elif f.name in offsets:
                b.PrependUOffsetTRelativeSlot(f.slot, offsets[f.name], 0)
        return b.EndObject()

    def _union_code(self, f: Field, tv: Any, v: Any, path: str) -> int:
        u = self.schema.unions[f.type]
        if tv is None or tv == "NONE":
            return 0
        if isinstance(tv, str):
            if tv not in u.members:
                raise MNNFormatError(f"{path}_type: {tv!r} is not a member of union {f.type}")
            return u.code_of(tv)
        code = int(tv)
        if not 0 <= code <= len(u.members):
            raise MNNFormatError(f"{path}_type: code {code} out of range for union {f.type}")
        return code
