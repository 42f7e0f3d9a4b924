"""A tiny FlatBuffers schema (.fbs) parser and the in-memory schema description.

The reader and writer are driven by a :class:`Schema`: enums, unions and tables with every
field's kind, type, default and vtable slot. The description for MNN's schema is generated
once by :mod:`mnnjit.format.gen_schema` into the checked-in module ``_schema_mnn.py`` (plain
Python literals, cheap to import); :func:`mnn_schema` loads it lazily on first use.

Field kinds (``Field.kind``):

``scalar``  a numeric/bool scalar, ``type`` is a canonical scalar name (``int32``, ``float32``...)
``enum``    a scalar typed by an enum, ``type`` is the enum name
``string``  a string
``table``   a sub-table, ``type`` is the table name
``union``   a union value (its ``<name>_type`` uint8 field sits at ``slot - 1``)
``vscalar`` / ``venum`` / ``vstring`` / ``vtable``  vectors of the above
"""
from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

__all__ = [
    "SchemaError", "Field", "Table", "Enum", "Union", "Schema", "SCALARS",
    "parse_fbs_files", "parse_fbs_dir", "mnn_schema",
]


class SchemaError(ValueError):
    """The .fbs text could not be parsed or uses a construct this parser does not support."""


# canonical scalar name -> (struct format char, numpy dtype string, size in bytes)
SCALARS: Dict[str, Tuple[str, str, int]] = {
    "bool": ("?", "u1", 1),
    "int8": ("b", "i1", 1),
    "uint8": ("B", "u1", 1),
    "int16": ("h", "<i2", 2),
    "uint16": ("H", "<u2", 2),
    "int32": ("i", "<i4", 4),
    "uint32": ("I", "<u4", 4),
    "int64": ("q", "<i8", 8),
    "uint64": ("Q", "<u8", 8),
    "float32": ("f", "<f4", 4),
    "float64": ("d", "<f8", 8),
}

_ALIASES = {
    "bool": "bool", "byte": "int8", "int8": "int8", "ubyte": "uint8", "uint8": "uint8",
    "short": "int16", "int16": "int16", "ushort": "uint16", "uint16": "uint16",
    "int": "int32", "int32": "int32", "uint": "uint32", "uint32": "uint32",
    "long": "int64", "int64": "int64", "ulong": "uint64", "uint64": "uint64",
    "float": "float32", "float32": "float32", "double": "float64", "float64": "float64",
}


@dataclass(frozen=True)
class Field:
    """One table field: ``slot`` is its vtable slot (union values: the value's slot)."""
    name: str
    slot: int
    kind: str
    type: str
    default: Any = None
    deprecated: bool = False


@dataclass
class Table:
    """A table: its fields in declaration order and the number of vtable slots it uses."""
    name: str
    fields: List[Field]
    num_slots: int


@dataclass
class Enum:
    """An enum: underlying scalar type and the value <-> name maps."""
    name: str
    base: str
    names: Dict[int, str]
    values: Dict[str, int]


@dataclass
class Union:
    """A union: member table names; member ``i`` has type code ``i + 1`` (0 is NONE)."""
    name: str
    members: List[str]

    def code_of(self, member: str) -> int:
        """Type code of a member table name."""
        return self.members.index(member) + 1


@dataclass
class Schema:
    """A parsed schema: enums, unions, tables and the root table name."""
    enums: Dict[str, Enum] = field(default_factory=dict)
    unions: Dict[str, Union] = field(default_factory=dict)
    tables: Dict[str, Table] = field(default_factory=dict)
    root: Optional[str] = None

    def scalar_of(self, f: Field) -> str:
        """Canonical scalar type of a scalar/enum field (or vector element)."""
        if f.kind in ("enum", "venum"):
            return self.enums[f.type].base
        return f.type

    def to_literal(self) -> dict:
        """A plain-literal form (for the generated module)."""
        return {
            "root": self.root,
            "enums": {n: (e.base, sorted(e.names.items())) for n, e in self.enums.items()},
            "unions": {n: list(u.members) for n, u in self.unions.items()},
            "tables": {
                n: [(f.name, f.slot, f.kind, f.type, f.default, f.deprecated) for f in t.fields]
                for n, t in self.tables.items()
            },
        }

    @classmethod
    def from_literal(cls, lit: dict) -> "Schema":
        """Rebuild a Schema from :meth:`to_literal` output."""
        s = cls(root=lit["root"])
        for n, (base, items) in lit["enums"].items():
            names = {int(v): k for v, k in items}
            s.enums[n] = Enum(n, base, names, {k: v for v, k in names.items()})
        for n, members in lit["unions"].items():
            s.unions[n] = Union(n, list(members))
        for n, fields in lit["tables"].items():
            fl = [Field(*f) for f in fields]
            s.tables[n] = Table(n, fl, max((f.slot for f in fl), default=-1) + 1)
        return s


# ----------------------------------------------------------------------------- parser

_TOKEN = re.compile(
    r'\s+|//[^\n]*|/\*.*?\*/|(?P<str>"[^"]*")|(?P<num>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)'
    r"|(?P<id>[A-Za-z_][A-Za-z0-9_.]*)|(?P<p>[{}\[\]():;,=])",
    re.S,
)


def _tokenize(text: str, fname: str) -> List[str]:
    toks: List[str] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            line = text.count("\n", 0, pos) + 1
            raise SchemaError(f"{fname}:{line}: unexpected character {text[pos]!r}")
        pos = m.end()
        if m.lastgroup:
            toks.append(m.group(m.lastgroup))
    return toks


class _Parser:
    def __init__(self) -> None:
        self.raw_enums: Dict[str, Tuple[str, List[Tuple[str, Optional[str]]]]] = {}
        self.raw_unions: Dict[str, List[str]] = {}
        self.raw_tables: Dict[str, List[Tuple[str, str, Optional[str], Dict[str, str]]]] = {}
        self.root: Optional[str] = None

    def parse(self, toks: List[str], fname: str) -> None:
        i = 0

        def expect(t: str) -> None:
            nonlocal i
            if i >= len(toks) or toks[i] != t:
                got = toks[i] if i < len(toks) else "end of file"
                raise SchemaError(f"{fname}: expected {t!r}, got {got!r}")
            i += 1

        def ident() -> str:
            nonlocal i
            if i >= len(toks):
                raise SchemaError(f"{fname}: unexpected end of file")
            t = toks[i]
            i += 1
            return t

        def metadata() -> Dict[str, str]:
            nonlocal i
            attrs: Dict[str, str] = {}
            if i < len(toks) and toks[i] == "(":
                i += 1
                while toks[i] != ")":
                    k = ident()
                    v = ""
                    if toks[i] == ":":
                        i += 1
                        v = ident()
                    attrs[k] = v
                    if toks[i] == ",":
                        i += 1
                i += 1
            return attrs

        while i < len(toks):
            kw = ident()
            if kw in ("include", "attribute", "file_identifier", "file_extension"):
                ident()
                expect(";")
            elif kw == "namespace":
                ident()
                expect(";")
            elif kw == "root_type":
                self.root = ident().split(".")[-1]
                expect(";")
            elif kw == "enum":
                name = ident()
                expect(":")
                base = ident()
                metadata()
                expect("{")
                items: List[Tuple[str, Optional[str]]] = []
                while toks[i] != "}":
                    n = ident()
                    v = None
                    if toks[i] == "=":
                        i += 1
                        v = ident()
                    items.append((n, v))
                    if toks[i] == ",":
                        i += 1
                i += 1
                self.raw_enums[name] = (base, items)
            elif kw == "union":
                name = ident()
                metadata()
                expect("{")
                members: List[str] = []
                while toks[i] != "}":
                    members.append(ident().split(".")[-1])
                    if toks[i] == ",":
                        i += 1
                i += 1
                self.raw_unions[name] = members
            elif kw == "table":
                name = ident()
                metadata()
                expect("{")
                fields = []
                while toks[i] != "}":
                    fname_ = ident()
                    expect(":")
                    if toks[i] == "[":
                        i += 1
                        typ = "[" + ident().split(".")[-1] + "]"
                        expect("]")
                    else:
                        typ = ident().split(".")[-1]
                    default = None
                    if toks[i] == "=":
                        i += 1
                        default = ident()
                    attrs = metadata()
                    expect(";")
                    fields.append((fname_, typ, default, attrs))
                i += 1
                self.raw_tables[name] = fields
            elif kw == "struct":
                raise SchemaError(f"{fname}: 'struct' is not supported (the MNN schema has none)")
            elif kw == "rpc_service":
                raise SchemaError(f"{fname}: 'rpc_service' is not supported")
            else:
                raise SchemaError(f"{fname}: unexpected token {kw!r}")

    def build(self) -> Schema:
        s = Schema(root=self.root)
        for name, (base, items) in self.raw_enums.items():
            if base not in _ALIASES:
                raise SchemaError(f"enum {name}: bad underlying type {base!r}")
            names: Dict[int, str] = {}
            nxt = 0
            for n, v in items:
                val = int(v, 0) if v is not None else nxt
                names[val] = n
                nxt = val + 1
            s.enums[name] = Enum(name, _ALIASES[base], names, {k: v for v, k in names.items()})
        for name, members in self.raw_unions.items():
            for m in members:
                if m not in self.raw_tables:
                    raise SchemaError(f"union {name}: member {m!r} is not a table")
            s.unions[name] = Union(name, members)
        for name, raw in self.raw_tables.items():
            fields: List[Field] = []
            slot = 0
            for fname_, typ, default, attrs in raw:
                if "id" in attrs:
                    raise SchemaError(f"table {name}.{fname_}: explicit (id:) is not supported")
                vec = typ.startswith("[")
                base = typ[1:-1] if vec else typ
                if base in _ALIASES:
                    kind, tname = "scalar", _ALIASES[base]
                elif base == "string":
                    kind, tname = "string", "string"
                elif base in self.raw_enums:
                    kind, tname = "enum", base
                elif base in self.raw_tables:
                    kind, tname = "table", base
                elif base in self.raw_unions:
                    if vec:
                        raise SchemaError(f"table {name}.{fname_}: vectors of unions unsupported")
                    kind, tname = "union", base
                else:
                    raise SchemaError(f"table {name}.{fname_}: unknown type {base!r}")
                dflt = self._default(s, name, fname_, kind, tname, default) if not vec else None
                if kind == "union":
                    slot += 1  # the hidden <name>_type field occupies the previous slot
                fields.append(Field(fname_, slot, ("v" + kind) if vec else kind, tname, dflt,
                                    "deprecated" in attrs))
                slot += 1
            s.tables[name] = Table(name, fields, slot)
        return s

    @staticmethod
    def _default(s: Schema, table: str, fname_: str, kind: str, tname: str,
                 default: Optional[str]) -> Any:
        if kind == "scalar":
            if tname == "bool":
                return default == "true" or (default not in (None, "false") and float(default) != 0)
            if tname.startswith("float"):
                return float(default) if default is not None else 0.0
            return int(default, 0) if default is not None else 0
        if kind == "enum":
            if default is None:
                return 0
            e = s.enums[tname]
            if default in e.values:
                return e.values[default]
            try:
                return int(default, 0)
            except ValueError:
                raise SchemaError(f"table {table}.{fname_}: unknown enum default {default!r}") from None
        return None


def parse_fbs_files(paths: List[str]) -> Schema:
    """Parse .fbs files (their ``include``s are followed relative to each file) into a Schema."""
    p = _Parser()
    seen: set = set()

    def visit(path: str) -> None:
        path = os.path.abspath(path)
        if path in seen:
            return
        seen.add(path)
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        for inc in re.findall(r'^\s*include\s+"([^"]+)"\s*;', text, re.M):
            visit(os.path.join(os.path.dirname(path), inc))
        p.parse(_tokenize(text, os.path.basename(path)), os.path.basename(path))

    for path in paths:
        visit(path)
    return p.build()


def parse_fbs_dir(directory: str, main: str = "MNN.fbs") -> Schema:
    """Parse ``main`` in ``directory`` and every .fbs file beside it."""
    files = [os.path.join(directory, main)] + sorted(
        os.path.join(directory, f) for f in os.listdir(directory)
        if f.endswith(".fbs") and f != main)
    return parse_fbs_files(files)


@functools.lru_cache(maxsize=1)
def mnn_schema() -> Schema:
    """The MNN schema description (from the generated ``_schema_mnn`` module), cached."""
    from . import _schema_mnn
    return Schema.from_literal(_schema_mnn.SCHEMA)
