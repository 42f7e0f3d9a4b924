"""Translate an MNN ``Net`` (from :mod:`mnnjit.format`) into graph nodes of registered ops.

A :class:`Translator` walks the ops of a graph (the main graph or a control-flow subgraph) in
file order, keeping one node per tensor index. Each MNN op type is handled by a converter function
registered with :func:`converter` (modules ``convert_*.py`` and ``control_flow.py``); a converter
receives the :class:`Ctx` (the translation context), the ``Op`` and its input nodes, and returns
the output node(s).

Everything that does not depend on a model input (weights, shape arithmetic on known shapes) is
folded to constants while translating, with the ops' reference semantics, so the nodes left in
the plan are exactly the per-forward work.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .._dtypes import F32, I32, U8, I8
from ..graph import Node, const_node
from ..ops import build as B

Converter = Callable[["Ctx", Any, list], Any]
_CONVERTERS: dict[str, Converter] = {}

#: MNN DataType names -> storage dtypes.
MNN_DTYPES = {
    "DT_FLOAT": F32, "DT_DOUBLE": F32, "DT_HALF": F32, "DT_BFLOAT16": F32,
    "DT_INT32": I32, "DT_INT64": I32, "DT_INT16": I32, "DT_BOOL": I32, "DT_UINT16": I32,
    "DT_QINT32": I32, "DT_UINT8": U8, "DT_QUINT8": U8, "DT_INT8": I8, "DT_QINT8": I8,
}


class UnsupportedOpError(NotImplementedError):
    """An MNN op type (or a variant of one) that mnnjit cannot run yet."""


class NeedsValuesError(RuntimeError):
    """Raised when translation needs the value of a tensor that depends on the model inputs
    (the plan then becomes dynamic: it is re-translated with the input values at each forward)."""


def converter(*op_types: str) -> Callable[[Converter], Converter]:
    """Register the decorated function as the converter of MNN op types ``op_types``."""
    def deco(fn: Converter) -> Converter:
        for t in op_types:
            if t in _CONVERTERS:
                raise ValueError(f"MNN op type {t!r} already has a converter")
            _CONVERTERS[t] = fn
        return fn
    return deco


_loaded = False


def _load_converters() -> None:
    global _loaded
    from . import (control_flow, convert_cnn, convert_detect, convert_extra, convert_math, convert_misc,  # noqa: F401
                   convert_shape)
    from . import convert_im2col  # noqa: F401
    _loaded = True


def supported_op_types() -> list[str]:
    """The MNN op types mnnjit can translate."""
    _load_converters()
    return sorted(_CONVERTERS)


def get_converter(op_type: str) -> Converter | None:
    """The converter registered for ``op_type`` (None if there is none)."""
    if not _loaded:
        _load_converters()
    return _CONVERTERS.get(op_type)


def fold(node: Node) -> Node:
    """``node`` as a constant when it does not depend on any model input (computed now)."""
    if node.live or node.op == "const" or node.dtype is None:
        return node
    from ..ops.evaluate import evaluate
    evaluate([node])
    return const_node(np.asarray(node.value), node.fmt, node.name)


class Ctx:
    """What a converter sees while translating one op.

    ``dynamic`` is True when placeholders hold the current input values, so the values of
    input-dependent tensors may be read (control flow, data-dependent shapes).
    """

    def __init__(self, net: Any, subgraphs: dict[str, Any], dynamic: bool, cache: dict, memory_low: bool = False):
        self.net = net
        #: memory=low: quantized weights stay codes in memory (see mnnjit.precision).
        self.memory_low = memory_low
        self.subgraphs = subgraphs
        self.dynamic = dynamic
        self.cache = cache  # per-model cache of decoded weights (keyed by op identity)
        self.op_label = ""
        #: TensorArray states of this translation: id(flow node) -> (flow node, element nodes).
        self.tensor_arrays: dict[int, tuple[Node, list]] = {}

    # -------------------------------------------------------------- values
    def value(self, node: Node, what: str = "input") -> np.ndarray:
        """The value of ``node`` (constant, or input-dependent when the plan is dynamic)."""
        if node.op == "const":
            return node.value
        if node.live and not self.dynamic:
            raise NeedsValuesError(f"{self.op_label}: {what} depends on the model inputs")
        from ..runtime import evaluate
        evaluate([node])
        return np.asarray(node.value)

    def ints(self, node: Node, what: str = "input") -> list[int]:
        """The value of ``node`` as a flat list of Python ints."""
        return [int(v) for v in np.asarray(self.value(node, what)).reshape(-1)]

    # -------------------------------------------------------------- building
    def emit(self, op: str, inputs: Sequence[Node], attrs: dict | None = None, fmt: str | None = None) -> Node:
        """A node of registered op ``op`` (folded to a constant when it does not depend on inputs)."""
        return fold(B.make_node(op, inputs, attrs, fmt))

    def const(self, array: Any, dtype: np.dtype | None = None) -> Node:
        """A constant node for ``array``."""
        arr = np.asarray(array) if dtype is None else np.asarray(array, dtype=dtype)
        if dtype is None:
            arr = B.to_array(arr)
        return const_node(np.array(arr, order="C"))

    def cached(self, key: Any, make: Callable[[], Any]) -> Any:
        """``make()``, computed once per model for ``key`` (decoded weights and the like)."""
        try:
            return self.cache[key]
        except KeyError:
            v = self.cache[key] = make()
            return v

    def unsupported(self, op: Any, detail: str = "") -> UnsupportedOpError:
        """The error for an op mnnjit cannot run."""
        extra = f": {detail}" if detail else ""
        return UnsupportedOpError(f"mnnjit does not support MNN op {op.type!r} (op {op.name!r}){extra}")


def node_of(v: Any) -> Node:
    """The node behind a Var (or the node itself), folded."""
    return fold(B.as_node(v))


class Translator:
    """Translate one graph's ops given nodes for its inputs (see module docstring)."""

    def __init__(self, ctx: Ctx, ops: list, tensor_names: list[str]):
        self.ctx = ctx
        self.ops = ops
        self.names = tensor_names
        #: When a list, each translated op is recorded as (op, input tensor indexes, output tensor indexes).
        self.trace: list | None = None

    def needed_ops(self, outputs: list[int]) -> list[int]:
        """Indexes of the ops needed to compute tensor indexes ``outputs`` (file order)."""
        producer: dict[int, int] = {}
        for i, op in enumerate(self.ops):
            for t in op.outputIndexes or []:
                producer[t] = i
        need: set[int] = set()
        stack = [producer[t] for t in outputs if t in producer]
        while stack:
            i = stack.pop()
            if i in need:
                continue
            need.add(i)
            for t in self.ops[i].inputIndexes or []:
                if t in producer and producer[t] not in need:
                    stack.append(producer[t])
        return sorted(need)

    def run(self, tensors: dict[int, Node], outputs: list[int]) -> dict[int, Node]:
        """Translate the ops needed for ``outputs``; ``tensors`` maps known tensor indexes
        (the graph inputs) to nodes and is extended in place."""
        for i in self.needed_ops(outputs):
            op = self.ops[i]
            if op.type == "Input" and all(t in tensors for t in op.outputIndexes or []):
                continue
            fn = get_converter(str(op.type))
            if fn is None:
                raise UnsupportedOpError(f"mnnjit does not support MNN op type {op.type!r} "
                                         f"(op {op.name!r}) yet")
            ins = []
            for t in op.inputIndexes or []:
                if t not in tensors:
                    raise ValueError(f"op {op.name!r} ({op.type}) reads tensor {self._tname(t)!r}, which no "
                                     "op produces and which is not an input")
                ins.append(tensors[t])
            self.ctx.op_label = f"op {op.name!r} ({op.type})"
            try:
                out = fn(self.ctx, op, ins)
            except (NeedsValuesError, UnsupportedOpError):
                raise
            except (ValueError, TypeError, IndexError) as exc:
                if str(exc).startswith(self.ctx.op_label):
                    raise
                raise type(exc)(f"{self.ctx.op_label}: {exc}") from exc
            outs = out if isinstance(out, (list, tuple)) else [out]
            oidx = op.outputIndexes or []
            if len(outs) < len(oidx):
                raise self.ctx.unsupported(op, f"produced {len(outs)} outputs, the model expects {len(oidx)}")
            for t, n in zip(oidx, outs):
                tensors[t] = node_of(n)
            if self.trace is not None:
                self.trace.append((op, list(op.inputIndexes or []), list(oidx)))
        return tensors

    def _tname(self, t: int) -> str:
        return self.names[t] if 0 <= t < len(self.names) else str(t)
