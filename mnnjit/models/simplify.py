"""Peephole simplification of a translated plan graph.

Converted models are full of layout bookkeeping that moves no data in mnnjit's logical layout:
NCHW <-> NC4HW4 conversions (``copy`` nodes that only relabel the format) and chains of reshapes
around Gemm-as-convolution. Before a plan is compiled, ``copy`` nodes are bypassed, reshape chains
collapse into one reshape of their origin, and reshapes to the input's own shape disappear.
"""
from __future__ import annotations

from ..graph import Node, topo_order


def simplify(outputs: list[Node]) -> list[Node]:
    """Equivalent output nodes with layout-only nodes removed (the originals are not changed)."""
    new: dict[int, Node] = {}
    for node in topo_order(outputs, stop_at_values=False):
        if not node.inputs:
            new[id(node)] = node
            continue
        ins = tuple(new[id(i)] for i in node.inputs)
        if node.op == "copy" and ins[0].shape == node.shape and ins[0].dtype == node.dtype:
            new[id(node)] = ins[0]
            continue
        if node.op == "reshape":
            src = ins[0]
            while src.op == "reshape" or (src.op == "copy" and src.dtype == node.dtype):
                src = src.inputs[0]
            if src.shape == node.shape:
                new[id(node)] = src
                continue
            ins = (src,)
        if all(a is b for a, b in zip(ins, node.inputs)):
            new[id(node)] = node
        else:
            n = Node(node.op, ins, node.attrs, node.shape, node.dtype, node.fmt, name=node.name)
            if n.op == "const":
                n.value = node.value
            new[id(node)] = n
    return [new[id(o)] for o in outputs]
