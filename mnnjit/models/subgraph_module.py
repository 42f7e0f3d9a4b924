"""``GraphProgram``: a Program over a graph of Vars (``nn.load_module(inputs, outputs)``).

Its plan for the inputs' own shapes is the graph itself (with the input Vars' nodes as the
placeholders); for other shapes the graph is rebuilt on new placeholders, every node re-inferring
its shape through the op registry (ops whose attributes pin a shape raise a clear error).
"""
from __future__ import annotations

from typing import Sequence


from ..graph import Node, topo_order
from ..ops import build as B
from .program import ExecutionPlan, InputSpec


class GraphProgram:
    """The Program interface (inputs, outputs, plans) for Vars of an existing graph."""

    net = None

    def __init__(self, inputs: Sequence, outputs: Sequence):
        self.in_nodes = [v._node for v in inputs]
        self.out_nodes = [v._node for v in outputs]
        self.inputs = [InputSpec(n.name or f"input{k}", k, tuple(n.shape), n.dtype, n.fmt)
                       for k, n in enumerate(self.in_nodes)]
        self.all_inputs = list(self.inputs)
        self.output_names = [n.name or f"output{k}" for k, n in enumerate(self.out_nodes)]
        self._plans: dict[tuple, ExecutionPlan] = {}
        reach = {id(n) for n in topo_order(self.out_nodes, stop_at_values=False)}
        for spec, n in zip(self.inputs, self.in_nodes):
            if id(n) not in reach:
                raise ValueError(f"load_module: input {spec.name!r} does not feed the outputs")

    def translate(self, feeds: list[Node], dynamic: bool = False) -> list[Node]:
        """The output nodes computed from ``feeds`` instead of the original inputs."""
        sub = {id(old): new for old, new in zip(self.in_nodes, feeds)}
        for node in topo_order(self.out_nodes, stop_at_values=False):
            if id(node) in sub:
                continue
            if not node.inputs or not any(id(i) in sub for i in node.inputs):
                if node.op == "placeholder":
                    raise ValueError(f"load_module: the outputs also depend on input {node.name!r}, "
                                     "which is not among the module's inputs")
                sub[id(node)] = node
                continue
            ins = [sub[id(i)] for i in node.inputs]
            if all(a.shape == b.shape and a.dtype == b.dtype for a, b in zip(ins, node.inputs)):
                sub[id(node)] = Node(node.op, tuple(ins), node.attrs, node.shape, node.dtype, node.fmt,
                                     name=node.name)
            else:
                try:
                    sub[id(node)] = B.make_node(node.op, ins, node.attrs, node.fmt, node.name)
                except (ValueError, KeyError) as exc:
                    raise ValueError(f"load_module: op {node.op!r} cannot take inputs of new shapes "
                                     f"{[list(i.shape) for i in ins]}: {exc}") from None
        return [sub[id(o)] for o in self.out_nodes]

    def plan(self, signature: tuple) -> ExecutionPlan:
        """The execution plan for an input signature, cached."""
        plan = self._plans.get(signature)
        if plan is None:
            plan = self._plans[signature] = ExecutionPlan(self, signature)
        return plan


