"""The fusion pass over static graphs: chains a backend runs as one kernel become ``fused_block`` nodes.

The pass finds the candidates (:data:`mnnjit.ops.nn_fused.PATTERNS`) from the graph's structure alone:
constant-weight convolutions (:func:`mnnjit.ops.conv_info.conv_params`), depthwise ones, adds of two
same-shape tensors, and links where a node is read only by the next one and is not a graph output.
Whether a candidate fuses is the backend's call (its kernels have limits: tile shapes, cache sizes,
thread counts), asked through the rules object from ``Backend.fusion_rules(modes)``::

    rules.accepts(pattern, body) -> bool

The graph is walked in topological order and each node tries its rewrites in a fixed order (a 1x1
convolution first fuses forward with the depthwise layer it feeds, then backward with the depthwise
layer feeding it; an add takes its relu, then the convolution producing one of its inputs), so the
result is deterministic for a graph, a backend and its settings. The rewritten graph has the same
placeholders, constants and outputs; a fused node's reference runs its body, so the graph computes
the same values on any backend.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..backends.base import GraphIR
from ..graph import Node, topo_order
from ..ops.conv_info import conv_params
from ..ops.nn_fused import fused_attrs

__all__ = ["fuse", "is_conv", "is_depthwise", "is_pointwise"]

_EPILOGUE_ACTS = ("relu", "relu6")


def is_conv(n: Node) -> bool:
    """A float convolution with constant weights and no negative (cropping) padding."""
    return conv_params(n) is not None and min(n.attrs["pads"]) >= 0


def is_depthwise(n: Node) -> bool:
    """A constant-weight convolution with one group per input channel and one filter per group."""
    conv = conv_params(n)
    if conv is None or min(n.attrs["pads"]) < 0:
        return False
    O, cg = conv[2][0], conv[2][1]
    return int(n.attrs.get("group", 1)) == n.inputs[0].shape[1] == O and cg == 1


def is_pointwise(n: Node) -> bool:
    """A constant-weight 1x1 convolution (not depthwise)."""
    return is_conv(n) and tuple(conv_params(n)[2][2:]) == (1, 1) and not is_depthwise(n)


def _same_shape_add(n: Node) -> bool:
    ins = n.inputs
    return n.op == "add" and len(ins) == 2 and ins[0].shape == ins[1].shape == n.shape and \
        ins[0].dtype == ins[1].dtype == n.dtype == np.float32


class _Walk:
    """The pass's bookkeeping over one graph (see the module docstring)."""

    def __init__(self, graph: GraphIR, rules: Any) -> None:
        self.rules = rules
        self.order = topo_order(graph.outputs, stop_at_values=False)
        self.outputs = {id(o) for o in graph.outputs}
        self.consumers: dict[int, list[Node]] = {}
        for n in self.order:
            for i in n.inputs:
                self.consumers.setdefault(id(i), []).append(n)
        #: id(last node of a block) -> (pattern, body)
        self.blocks: dict[int, tuple[str, list[Node]]] = {}
        #: id(node) -> id(last node of the block holding it)
        self.member: dict[int, int] = {}

    def sole_consumer(self, n: Node) -> Node | None:
        """The one node reading ``n`` when ``n`` is not an output and has exactly one reader."""
        cons = self.consumers.get(id(n), [])
        if id(n) in self.outputs or len(cons) != 1:
            return None
        return cons[0]

    def block_of(self, n: Node) -> tuple[str, list[Node]] | None:
        key = self.member.get(id(n))
        return None if key is None else self.blocks[key]

    def add_block(self, pattern: str, body: list[Node]) -> None:
        for b in body:
            old = self.member.get(id(b))
            if old is not None and old != id(body[-1]):
                self.blocks.pop(old, None)
            self.member[id(b)] = id(body[-1])
        self.blocks[id(body[-1])] = (pattern, body)

    def try_add(self, pattern: str, body: list[Node]) -> bool:
        if self.rules.accepts(pattern, tuple(body)):
            self.add_block(pattern, body)
            return True
        return False

    # ------------------------------------------------------------------ rules per node
    def visit_conv(self, n: Node) -> None:
        if not is_pointwise(n):
            return
        c = self.sole_consumer(n)
        if c is not None and is_depthwise(c) and c.inputs[0] is n and \
                self.try_add("expand_dw", [n, c]):
            return
        x = n.inputs[0]
        if self.sole_consumer(x) is not n:
            return
        held = self.block_of(x)
        if held is not None:
            pattern, body = held
            if pattern == "expand_dw" and body[-1] is x:
                self.try_add("expand_dw_pointwise", body + [n])
            return
        if not is_depthwise(x) or not self.rules.accepts("dw_pointwise", (x, n)):
            return
        pre = x.inputs[0]
        if is_conv(pre) and not is_depthwise(pre) and id(pre) not in self.member and \
                self.sole_consumer(pre) is x and self.try_add("dw_pointwise", [pre, x, n]):
            return
        self.add_block("dw_pointwise", [x, n])

    def visit_add(self, n: Node) -> None:
        tail: list[Node] = []
        c = self.sole_consumer(n)
        if c is not None and c.op in _EPILOGUE_ACTS:
            tail = [c]
        for side in (0, 1):
            p = n.inputs[side]
            if n.inputs[1 - side] is p or self.sole_consumer(p) is not n:
                continue
            held = self.block_of(p)
            if held is not None:
                pattern, body = held
                if body[-1] is not p or pattern not in ("dw_pointwise", "expand_dw_pointwise"):
                    continue
                inner = body
            elif is_conv(p) and not is_depthwise(p):
                inner = [p]
            else:
                continue
            if self.try_add("conv_residual", inner + [n] + tail):
                return
        if tail:
            self.try_add("add_act", [n] + tail)

    def run(self) -> None:
        for n in self.order:
            if id(n) in self.member:
                continue
            if is_conv(n):
                self.visit_conv(n)
            elif _same_shape_add(n):
                self.visit_add(n)

    # ------------------------------------------------------------------ the rewritten graph
    def rewrite(self, graph: GraphIR) -> GraphIR:
        new: dict[int, Node] = {}
        for n in self.order:
            key = self.member.get(id(n))
            if key is not None and key != id(n):
                continue            # inside a block: computed by the block's fused node
            if key is not None:
                pattern, body = self.blocks[key]
                attrs = fused_attrs(pattern, body)
                new[id(n)] = Node("fused_block", tuple(new[id(e)] for e in attrs["ext"]), attrs,
                                  n.shape, n.dtype, n.fmt, name=n.name)
                continue
            ins = tuple(new[id(i)] for i in n.inputs)
            if all(a is b for a, b in zip(ins, n.inputs)):
                new[id(n)] = n
            else:
                new[id(n)] = Node(n.op, ins, n.attrs, n.shape, n.dtype, n.fmt, name=n.name)
        return GraphIR(list(graph.placeholders), [new[id(o)] for o in graph.outputs],
                       list(graph.out_fmts), fusion=self.rules)


def fuse(graph: GraphIR, rules: Any) -> GraphIR:
    """``graph`` with every chain that ``rules`` accepts rewritten into a ``fused_block`` node (see the
    module docstring); ``graph`` itself when ``rules`` is None or nothing fuses."""
    if rules is None:
        return graph
    walk = _Walk(graph, rules)
    walk.run()
    if not walk.blocks:
        return GraphIR(graph.placeholders, graph.outputs, graph.out_fmts, fusion=rules)
    return walk.rewrite(graph)
