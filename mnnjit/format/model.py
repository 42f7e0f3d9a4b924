"""The plain-Python model tree: :class:`Net`, :class:`Op`, :class:`SubGraph`.

Field names follow MNN's schema exactly. ``Net``/``Op``/``SubGraph`` are dataclasses; every
other table (an op's ``main`` parameter, ``extraTensorDescribe`` entries, ``extraInfo``...)
is a plain dict as produced by :mod:`mnnjit.format.decoder` (all schema fields present,
enums as names, scalar vectors as numpy arrays).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Optional

from .errors import MNNFormatError

__all__ = ["Op", "SubGraph", "Net", "validate_net"]


def _ints(v: Any) -> Optional[List[int]]:
    return None if v is None else [int(x) for x in v]


@dataclass
class Op:
    """One operator. ``type`` is the OpType name (e.g. "Convolution"); ``main_type`` the
    OpParameter union member name (e.g. "Convolution2D") or None; ``main`` its dict."""
    type: Any = "AbsVal"
    name: Optional[str] = None
    inputIndexes: Optional[List[int]] = None
    outputIndexes: Optional[List[int]] = None
    main_type: Optional[str] = None
    main: Optional[Dict[str, Any]] = None
    defaultDimentionFormat: Any = "NHWC"
    externalPath: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Op":
        """Build from a decoded ``Op`` table dict."""
        return cls(type=d["type"], name=d["name"], inputIndexes=_ints(d["inputIndexes"]),
                   outputIndexes=_ints(d["outputIndexes"]), main_type=d["main_type"],
                   main=d["main"], defaultDimentionFormat=d["defaultDimentionFormat"],
                   externalPath=d["externalPath"])

    def to_dict(self) -> Dict[str, Any]:
        """The table dict the writer encodes."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class SubGraph:
    """A ``SubGraphProto`` (bodies of While/If): its own tensors, nodes, inputs, outputs."""
    name: Optional[str] = None
    inputs: Optional[List[int]] = None
    outputs: Optional[List[int]] = None
    tensors: Optional[List[str]] = None
    nodes: List[Op] = field(default_factory=list)
    extraTensorDescribe: Optional[List[Dict[str, Any]]] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "SubGraph":
        """Build from a decoded ``SubGraphProto`` table dict."""
        return cls(name=d["name"], inputs=_ints(d["inputs"]), outputs=_ints(d["outputs"]),
                   tensors=d["tensors"], nodes=[Op.from_dict(o) for o in d["nodes"] or []],
                   extraTensorDescribe=d["extraTensorDescribe"])

    def to_dict(self) -> Dict[str, Any]:
        """The table dict the writer encodes."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["nodes"] = [o.to_dict() for o in self.nodes]
        return d


@dataclass
class Net:
    """A whole .mnn model (the schema's root table ``Net``)."""
    oplists: List[Op] = field(default_factory=list)
    tensorName: Optional[List[str]] = None
    outputName: Optional[List[str]] = None
    bizCode: Optional[str] = None
    extraTensorDescribe: Optional[List[Dict[str, Any]]] = None
    extraInfo: Optional[Dict[str, Any]] = None
    preferForwardType: Any = "CPU"
    sourceType: Any = "CAFFE"
    tensorNumber: int = 0
    usage: Any = "INFERENCE"
    subgraphs: Optional[List[SubGraph]] = None
    mnn_uuid: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Net":
        """Build from a decoded ``Net`` table dict."""
        subs = d["subgraphs"]
        return cls(oplists=[Op.from_dict(o) for o in d["oplists"] or []],
                   tensorName=d["tensorName"], outputName=d["outputName"],
                   bizCode=d["bizCode"], extraTensorDescribe=d["extraTensorDescribe"],
                   extraInfo=d["extraInfo"], preferForwardType=d["preferForwardType"],
                   sourceType=d["sourceType"], tensorNumber=d["tensorNumber"], usage=d["usage"],
                   subgraphs=None if subs is None else [SubGraph.from_dict(s) for s in subs],
                   mnn_uuid=d["mnn_uuid"])

    def to_dict(self) -> Dict[str, Any]:
        """The table dict the writer encodes."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["oplists"] = [o.to_dict() for o in self.oplists]
        d["subgraphs"] = None if self.subgraphs is None else [s.to_dict() for s in self.subgraphs]
        return d

    # convenience ----------------------------------------------------------------
    @property
    def version(self) -> Optional[str]:
        """The converter version recorded in ``extraInfo.version`` (None before MNN 2.0)."""
        return (self.extraInfo or {}).get("version") or None

    def op_type_counts(self) -> Dict[str, int]:
        """How many ops of each type the main graph has."""
        out: Dict[str, int] = {}
        for op in self.oplists:
            out[str(op.type)] = out.get(str(op.type), 0) + 1
        return out


# ----------------------------------------------------------------------------- validation

def _op_label(i: int, op: Op) -> str:
    return f"op {i} ({op.name!r})" if op.name is not None else f"op {i}"


def _check_indexes(where: str, name: str, idx: Optional[List[int]], count: int) -> None:
    if idx is None:
        return
    for k, v in enumerate(idx):
        if not 0 <= v < count:
            raise MNNFormatError(f"{where}: {name}[{k}]={v} out of range for {count} tensors")


def _check_ops(prefix: str, ops: List[Op], count: int) -> None:
    for i, op in enumerate(ops):
        where = prefix + _op_label(i, op)
        _check_indexes(where, "inputIndexes", op.inputIndexes, count)
        _check_indexes(where, "outputIndexes", op.outputIndexes, count)
        if op.main_type == "LoopParam" and op.main is not None:
            _check_loop(where, op.main)


def _check_loop(where: str, loop: Dict[str, Any]) -> None:
    n = int(loop.get("tensorNumber") or 0)
    for key in ("inputIndexes", "outputIndexes"):
        v = loop.get(key)
        _check_indexes(where + " LoopParam", key, None if v is None else list(v), n)
    for key in ("commands", "initCommand"):
        for c, cmd in enumerate(loop.get(key) or []):
            v = cmd.get("indexes")
            _check_indexes(f"{where} LoopParam.{key}[{c}]", "indexes",
                           None if v is None else list(v), n)


def _check_describe(prefix: str, descs: Optional[List[Dict[str, Any]]], count: int) -> None:
    for k, d in enumerate(descs or []):
        idx = d.get("index", 0)
        if not 0 <= idx < count:
            raise MNNFormatError(f"{prefix}extraTensorDescribe[{k}]: index={idx} out of range "
                                 f"for {count} tensors")


def validate_net(net: Net) -> None:
    """Check cross-references of a decoded Net: op input/output tensor indexes, tensor
    describe indexes, subgraph inputs/outputs. Raises :class:`MNNFormatError`."""
    count = len(net.tensorName) if net.tensorName is not None else int(net.tensorNumber)
    if net.tensorName is not None and net.tensorNumber and net.tensorNumber > count:
        count = int(net.tensorNumber)
    _check_ops("", net.oplists, count)
    _check_describe("", net.extraTensorDescribe, count)
    for s, sub in enumerate(net.subgraphs or []):
        prefix = f"subgraph {s} ({sub.name!r}) "
        scount = len(sub.tensors or [])
        _check_ops(prefix, sub.nodes, scount)
        _check_indexes(prefix.strip(), "inputs", sub.inputs, scount)
        _check_indexes(prefix.strip(), "outputs", sub.outputs, scount)
        _check_describe(prefix, sub.extraTensorDescribe, scount)
