"""The reference evaluator: computes every op with its plain-numpy ``ref`` from the op registry.

It is the correctness oracle for the compiled backends and the fast path for small arrays.
Intermediate values are released as soon as their last user has run.
"""
from __future__ import annotations

import numpy as np

from ..graph import Node, topo_order
from . import registry
from .fperr import call_ignoring


def compute_node(node: Node, inputs: list) -> np.ndarray | tuple:
    """Run one node's reference implementation on input values and check the result's shape/dtype."""
    # (a call, not ``ignore_errors``: the context manager's generator costs ~1 us of a small op)
    return call_ignoring(_compute, node, inputs)


def _compute(node: Node, inputs: list) -> np.ndarray | tuple:
    """``compute_node`` under the caller's floating-point error state."""
    out = registry.get(node.op).ref(inputs, node.attrs)
    if node.dtype is None:  # multi-output node: a tuple of arrays
        return tuple(np.asarray(o) for o in out)
    out = np.asarray(out)
    if out.dtype != node.dtype:
        out = out.astype(node.dtype)
    if out.shape != node.shape:
        if out.size != node.size:
            raise RuntimeError(f"op {node.op} produced shape {out.shape}, expected {node.shape}")
        out = out.reshape(node.shape)
    return out


def evaluate(roots: list[Node]) -> None:
    """Compute and cache the values of ``roots``."""
    run_order(topo_order(roots), roots)


def run_order(order: list[Node], roots: list[Node]) -> None:
    """Run a topological ``order`` with the op references, caching the values of ``roots``.

    Intermediate values are released after their last use.
    """
    users: dict[int, int] = {}
    for node in order:
        for inp in node.inputs:
            users[id(inp)] = users.get(id(inp), 0) + 1
    keep = {id(r) for r in roots}
    values: dict[int, object] = {}
    call_ignoring(_run, order, users, keep, values)     # once for the graph, not per node


def _run(order: list[Node], users: dict[int, int], keep: set, values: dict) -> None:
    for node in order:
        known = node.value
        if known is not None:
            values[id(node)] = known
            continue
        if node.op == "placeholder":
            raise ValueError(f"placeholder {node.name or ''!r} (shape {list(node.shape)}) has no value: "
                             "write() data into it before reading results that depend on it")
        args = [values[id(i)] for i in node.inputs]
        out = _compute(node, args)
        values[id(node)] = out
        if node.dtype is None and id(node) not in keep:
            # a multi-output node (svd, unique, ...): its outputs are read one by one, each read
            # would compute it again; its arrays are cached read-only, as values are
            for o in out:
                if isinstance(o, np.ndarray):
                    o.flags.writeable = False
            node.value = out
        for inp in node.inputs:
            k = id(inp)
            users[k] -= 1
            if users[k] == 0 and k not in keep:
                values.pop(k, None)
        if id(node) in keep:
            if isinstance(out, np.ndarray):
                # (a writable input passed through: memory Var.read() handed out, not to be frozen)
                if not out.flags.c_contiguous or out.base is not None or \
                        (out.flags.writeable and any(out is a for a in args)):
                    out = np.array(out, order="C")
                out.flags.writeable = False
            node.value = out
