"""Walk an ONNX graph and emit MNN ops: the handler registry, constant folding, scopes.

Each ONNX op type has a handler registered with :func:`handler`; it receives the
:class:`GraphConverter` (the current graph's scope), the ``NodeProto`` and the input
:class:`~mnnjit.converter.builder.Val` s (None for omitted optional inputs) and returns the output
Vals. A node whose inputs are all known values is evaluated while converting (with ONNX's own
reference implementation), so shape arithmetic on static shapes never reaches the model.
Control-flow bodies are converted by child scopes: a value of an outer scope becomes an input of
the subgraph (MNN subgraphs see nothing but their inputs), a known value a constant inside it.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..format import SubGraph
from .builder import GraphBuilder, Val, const_val, mnn_dtype

Handler = Callable[["GraphConverter", Any, list], Any]
_HANDLERS: dict[str, Handler] = {}

#: ONNX ops never evaluated while converting (random values, side effects, subgraphs).
_NO_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
            "Bernoulli", "If", "Loop", "Scan", "Constant"}
#: Largest folded value (elements): bigger results stay ops so files keep their size.
FOLD_LIMIT = 1 << 22


class UnsupportedOnnxError(NotImplementedError):
    """ONNX nodes mnnjit cannot convert. ``nodes`` lists ``(op_type, node name, reason)``."""

    def __init__(self, nodes: Sequence[tuple]) -> None:
        self.nodes = list(nodes)
        by_type: dict[str, list[str]] = {}
        for op_type, name, reason in self.nodes:
            by_type.setdefault(op_type + (f" ({reason})" if reason else ""), []).append(name or "<unnamed>")
        lines = [f"  {t}: {', '.join(names[:8])}{' ...' if len(names) > 8 else ''}" for t, names in by_type.items()]
        super().__init__(f"{len(self.nodes)} ONNX node(s) cannot be converted:\n" + "\n".join(lines))


class NodeUnsupported(Exception):
    """Raised by a handler for a variant of an op it cannot convert (collected per node)."""


def handler(*op_types: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of ONNX op types ``op_types``."""
    def deco(fn: Handler) -> Handler:
        for t in op_types:
            if t in _HANDLERS:
                raise ValueError(f"ONNX op type {t!r} already has a handler")
            _HANDLERS[t] = fn
        return fn
    return deco


_loaded = False


def _load_handlers() -> None:
    global _loaded
    if not _loaded:
        from . import ops_control, ops_math, ops_nn, ops_rnn, ops_shape  # noqa: F401
        _loaded = True


def supported_onnx_ops() -> list[str]:
    """The ONNX op types the converter handles."""
    _load_handlers()
    return sorted(_HANDLERS)


def attrs_of(node: Any) -> dict:
    """The node's attributes as Python values (graphs stay GraphProtos)."""
    from onnx import helper
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _fold(node: Any, ins: list, opset: int) -> Optional[list]:
    """Evaluate ``node`` on known input values with ONNX's reference implementation."""
    from onnx.reference import ReferenceEvaluator
    feeds = {n: v.const for n, v in zip(node.input, ins) if n}
    try:
        sess = ReferenceEvaluator(node, opsets={"": opset})
        outs = sess.run(None, feeds)
    except Exception:  # an op the reference cannot evaluate stays an op
        return None
    res = [np.asarray(o) for o in outs]
    if any(r.dtype == object or r.size > FOLD_LIMIT for r in res):
        return None
    return res


def _node_reads(node: Any) -> set:
    """Names a node reads, its subgraphs' outer-scope reads included."""
    names = {n for n in node.input if n}
    for a in node.attribute:
        for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
            inner = {o for nd in g.node for o in nd.output} | {i.name for i in g.input} | \
                {i.name for i in g.initializer}
            for nd in g.node:
                names |= _node_reads(nd) - inner
            names |= {o.name for o in g.output} - inner
    return names


def topo_sorted(nodes: list) -> list:
    """``nodes`` in an order where each runs after the nodes producing its inputs (the file order
    when it already is one: some exporters write unsorted graphs, which real MNN's converter takes)."""
    producer = {o: k for k, n in enumerate(nodes) for o in n.output if o}
    deps = [{producer[i] for i in _node_reads(n) if i in producer and producer[i] != k} for k, n in enumerate(nodes)]
    if all(max(d, default=-1) < k for k, d in enumerate(deps)):
        return nodes
    users: dict[int, list] = {}
    for k, d in enumerate(deps):
        for j in d:
            users.setdefault(j, []).append(k)
    missing = [len(d) for d in deps]
    import heapq
    ready = [k for k, m in enumerate(missing) if m == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for u in users.get(k, []):
            missing[u] -= 1
            if missing[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(nodes):
        stuck = [nodes[k].name or nodes[k].op_type for k, m in enumerate(missing) if m > 0]
        raise ValueError(f"the ONNX graph has a cycle through nodes {stuck[:5]}")
    return [nodes[k] for k in order]


def _count_uses(graph: Any) -> dict:
    uses: dict[str, int] = {}

    def walk(g: Any) -> None:
        for node in g.node:
            for n in node.input:
                if n:
                    uses[n] = uses.get(n, 0) + 1
            for a in node.attribute:
                if a.HasField("g"):
                    walk(a.g)
                for sg in a.graphs:
                    walk(sg)
        for o in g.output:
            uses[o.name] = uses.get(o.name, 0) + 1
    walk(graph)
    return uses


class Root:
    """What every scope of one conversion shares: options, inferred types, subgraphs."""

    def __init__(self, opset: int, value_info: dict, options: Any) -> None:
        self.opset = opset
        self.value_info = value_info
        self.options = options
        self.subgraphs: list[SubGraph] = []
        self._sub_names: set[str] = set()
        self.problems: list[tuple] = []

    def subgraph_name(self, base: str) -> str:
        """A subgraph name not used yet."""
        name, k = base or "subgraph", 1
        while name in self._sub_names:
            name, k = f"{base}_{k}", k + 1
        self._sub_names.add(name)
        return name


class GraphConverter:
    """One graph's scope: ONNX names -> Vals, and the builder writing its ops."""

    def __init__(self, root: Root, graph: Any, parent: Optional["GraphConverter"] = None) -> None:
        self.root = root
        self.graph = graph
        self.parent = parent
        reserved = {n for node in graph.node for n in node.output} | {i.name for i in graph.input}
        self.b = GraphBuilder(reserved)
        self.vals: dict[str, Val] = {}
        #: how many times each name is read (by nodes, nested subgraphs and the graph outputs)
        self.uses: dict[str, int] = _count_uses(graph)
        #: outer-scope names this subgraph reads (they become its inputs, in this order)
        self.captured: list[str] = []
        self.node_label = ""
        #: called with (nodes done, nodes in the graph) (main graph only)
        self.progress: Optional[Callable[[int, int], None]] = None

    @property
    def opset(self) -> int:
        """The model's default-domain opset."""
        return self.root.opset

    # ---------------------------------------------------------------- values
    def info(self, name: str) -> tuple:
        """(static shape or None, numpy dtype or None) that shape inference gave ``name``."""
        return self.root.value_info.get(name, (None, None))

    def lookup(self, name: str) -> Val:
        """The Val of ONNX value ``name`` (outer-scope values become subgraph inputs)."""
        v = self.vals.get(name)
        if v is not None:
            return v
        if self.parent is None:
            raise ValueError(f"{self.node_label or 'graph'}: ONNX value {name!r} is not produced by any node "
                             "and is not a graph input or initializer")
        outer = self.parent.lookup(name)
        if outer.const is not None:
            v = const_val(outer.const)
        else:
            t = self.input_op(name, outer.shape, outer.dtype)
            v = Val(index=t, shape=outer.shape, dtype=outer.dtype)
            self.captured.append(name)
        self.vals[name] = v
        return v

    def input_op(self, name: str, shape: Optional[tuple], dtype: np.dtype) -> int:
        """An Input op named ``name`` (unknown sizes written as -1)."""
        main: dict = {"dtype": mnn_dtype(dtype if dtype is not None else np.float32), "dformat": "NCHW"}
        if shape is not None:
            main["dims"] = np.asarray([-1 if d is None else int(d) for d in shape], np.int32)
        t = self.b.op1("Input", [], "Input", main, name)
        self.b.rename(t, name)
        return t

    def idx(self, v: Val) -> int:
        """The tensor index of ``v`` in this graph (a known value is written as a Const)."""
        if v.index is None:
            if v.const is None:
                raise ValueError(f"{self.node_label}: value has neither a tensor nor a known value")
            v.index = self.b.const(v.const)
        return v.index

    def out(self, t: int, dtype: Any = np.float32, shape: Optional[tuple] = None) -> Val:
        """A Val for tensor ``t`` written by the current node."""
        return Val(index=t, shape=shape, dtype=np.dtype(dtype))

    def only_use(self, node: Any, k: int = 0) -> bool:
        """Whether input ``k`` of ``node`` is read by this node alone (so its producer may change)."""
        return self.uses.get(node.input[k], 0) == 1

    def unsupported(self, reason: str) -> NodeUnsupported:
        """The exception for a variant of an op that cannot be converted."""
        return NodeUnsupported(reason)

    # ---------------------------------------------------------------- walking
    def add_initializers(self) -> None:
        """Initializers of this graph as known values."""
        from onnx import numpy_helper
        for init in self.graph.initializer:
            self.vals[init.name] = const_val(numpy_helper.to_array(init))
        for init in self.graph.sparse_initializer:
            self.vals[init.values.name] = const_val(numpy_helper.to_array(init))

    def run_nodes(self) -> None:
        """Convert every node of the graph, in order; problems are collected in the root."""
        _load_handlers()
        nodes = topo_sorted(list(self.graph.node))
        total = len(nodes)
        for k, node in enumerate(nodes):
            if self.progress is not None:
                self.progress(k, total)
            self.node_label = f"node {node.name!r} ({node.op_type})"
            try:
                self.convert_node(node)
            except NodeUnsupported as exc:
                self.root.problems.append((node.op_type, node.name, str(exc)))
                for o in node.output:  # keep going to report every problem at once
                    if o:
                        self.vals[o] = Val(index=None, const=np.zeros((), np.float32))
        if self.progress is not None:
            self.progress(total, total)

    def convert_node(self, node: Any) -> None:
        """Convert one node (fold it when its inputs are known)."""
        if node.domain not in ("", "ai.onnx"):
            raise NodeUnsupported(f"custom domain {node.domain!r}")
        fn = _HANDLERS.get(node.op_type)
        if fn is None:
            raise NodeUnsupported("")
        ins = [self.lookup(n) if n else None for n in node.input]
        if node.op_type not in _NO_FOLD and all(v is None or v.const is not None for v in ins) \
                and not any(a.g.node or a.graphs for a in node.attribute):
            res = _fold(node, ins, self.opset)
            if res is not None:
                for name, r in zip(node.output, res):
                    if name:
                        self.vals[name] = const_val(r)
                return
        before = len(self.b.names)
        outs = fn(self, node, ins)
        if isinstance(outs, Val):
            outs = [outs]
        for k, name in enumerate(node.output):
            if not name:
                continue
            if k >= len(outs) or outs[k] is None:
                raise NodeUnsupported(f"output {k} ({name!r}) is not produced")
            v = outs[k]
            shape, dtype = self.info(name)
            if v.const is None:
                if shape is not None and (v.shape is None or len(v.shape) == len(shape)):
                    v.shape = tuple(s if s is not None else (v.shape[i] if v.shape else None)
                                    for i, s in enumerate(shape))
                if dtype is not None:
                    v.dtype = dtype
                if v.index is not None and v.index >= before:
                    self.b.rename(v.index, name, steal_from=before)
            self.vals[name] = v

    def finish_outputs(self, names: Sequence[str]) -> list[int]:
        """Tensor indexes of the graph outputs ``names``, each a tensor of that name (an output that
        is an input, a constant or an alias of another value gets an Identity op of its own)."""
        out = []
        for name in names:
            t = self.idx(self.lookup(name))
            if self.b.names[t] != name or t in out:
                t = self.b.identity(t, name)
                self.b.rename(t, name)
            out.append(t)
        return out

    # ---------------------------------------------------------------- subgraphs
    def subgraph(self, graph: Any, formal: Sequence[tuple], base_name: str) -> tuple:
        """Convert ONNX subgraph ``graph`` whose formal inputs are ``formal`` ((name, shape, dtype)
        each). Returns (SubGraph, captured outer names, output tensor names)."""
        child = GraphConverter(self.root, graph, parent=self)
        child.add_initializers()
        for name, shape, dtype in formal:
            t = child.input_op(name, shape, dtype)
            child.vals[name] = Val(index=t, shape=shape, dtype=np.dtype(dtype))
        child.run_nodes()
        outs = child.finish_outputs([o.name for o in graph.output])
        sub = SubGraph(name=self.root.subgraph_name(base_name), tensors=child.b.names, nodes=child.b.ops,
                       outputs=outs)
        sub.inputs = [child.vals[name].index for name, _, _ in formal] + \
            [child.vals[name].index for name in child.captured]
        self.root.subgraphs.append(sub)
        return sub, list(child.captured), [child.b.names[t] for t in outs]

