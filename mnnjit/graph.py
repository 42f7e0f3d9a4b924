"""The lazy expression graph: immutable nodes.

A :class:`Node` is one operation: its op name (a key of the op registry), its input nodes, its
attributes, and its output shape, dtype and data format, all inferred when the node is built.
Its value (a numpy array in the logical layout of ``shape``) is computed only when something reads
it, and cached on the node. User-facing handles are :class:`mnnjit.var.Var` objects, which point at
a node and can be re-pointed (assignment ``x[i] = v`` builds a new node), so nodes never change
meaning after they are built.

Nodes that depend on a placeholder carry ``live=True``: their cached values are only valid for the
placeholder contents they were computed from (``Node.stamp`` against the global write counter).
"""
from __future__ import annotations

from typing import Any

import numpy as np

_write_counter = 0


def bump_write_counter() -> int:
    """Invalidate cached values that depend on placeholders (called when a placeholder is written)."""
    global _write_counter
    _write_counter += 1
    return _write_counter


def write_counter() -> int:
    """The current placeholder write generation."""
    return _write_counter


_new_node = object.__new__


class Node:
    """One operation in the graph (see module docstring)."""

    __slots__ = ("op", "inputs", "attrs", "shape", "dtype", "fmt", "_value", "stamp", "live", "name",
                 "__weakref__")

    def __init__(self, op: str, inputs: tuple["Node", ...], attrs: dict[str, Any], shape: tuple[int, ...],
                 dtype: np.dtype, fmt: str = "NCHW", value: np.ndarray | None = None, name: str = ""):
        self.op = op
        self.inputs = inputs
        self.attrs = attrs
        self.shape = shape
        self.dtype = dtype
        self.fmt = fmt
        self.name = name
        live = op == "placeholder"
        for i in inputs:
            if i.live:
                live = True
                break
        self.live = live
        self._value = value
        self.stamp = _write_counter

    @classmethod
    def constant(cls, value: np.ndarray, fmt: str = "NCHW") -> "Node":
        """A const node holding ``value`` (the constructor's work written out: a model's outputs
        are wrapped once per forward, where ~0.1 us counts)."""
        node = _new_node(cls)
        node.op, node.inputs, node.attrs, node.name = "const", (), {}, ""
        node.shape, node.dtype, node.fmt, node._value = value.shape, value.dtype, fmt, value
        node.live, node.stamp = False, _write_counter
        return node

    @classmethod
    def computed(cls, op: str, inputs: tuple["Node", ...], shape: tuple[int, ...], dtype: np.dtype,
                 fmt: str) -> "Node":
        """A node of attribute-less op ``op`` whose shape and dtype are known (the constructor's
        work written out, for the front ends' per-call elementwise builds)."""
        node = _new_node(cls)
        node.op, node.inputs, node.attrs, node.shape, node.dtype, node.fmt = op, inputs, {}, shape, dtype, fmt
        node.name, node._value, node.stamp = "", None, _write_counter
        live = False
        for i in inputs:
            if i.live:
                live = True
                break
        node.live = live
        return node

    @classmethod
    def built(cls, op: str, inputs: tuple["Node", ...], attrs: dict[str, Any], shape: tuple[int, ...],
              dtype: np.dtype, fmt: str) -> "Node":
        """A node of op ``op`` with attributes ``attrs`` whose shape and dtype the caller inferred
        (the front ends' per-call builds of reductions and movement ops, from a signature cache)."""
        node = _new_node(cls)
        node.op, node.inputs, node.attrs, node.shape, node.dtype, node.fmt = op, inputs, attrs, shape, dtype, fmt
        node.name, node._value, node.stamp = "", None, _write_counter
        live = False
        for i in inputs:
            if i.live:
                live = True
                break
        node.live = live
        return node

    @property
    def value(self) -> np.ndarray | None:
        """The cached value, or None when it is not computed (or stale)."""
        if self._value is not None and self.live and self.op != "placeholder" and self.stamp != _write_counter:
            self._value = None
        return self._value

    @value.setter
    def value(self, v: np.ndarray | None) -> None:
        self._value = v
        self.stamp = _write_counter

    @property
    def size(self) -> int:
        """Number of elements."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __repr__(self) -> str:
        return f"Node({self.op}, shape={self.shape}, dtype={self.dtype}, fmt={self.fmt})"


def const_node(array: np.ndarray, fmt: str = "NCHW", name: str = "") -> Node:
    """A constant node holding ``array`` (which must already have a storage dtype)."""
    if not array.flags.c_contiguous:
        array = np.array(array, order="C")
    array.flags.writeable = False
    return Node("const", (), {}, tuple(array.shape), array.dtype, fmt, array, name)


def topo_order(roots: list[Node], stop_at_values: bool = True) -> list[Node]:
    """Nodes needed to compute ``roots``, inputs before users (iterative, safe for long chains).

    With ``stop_at_values`` the walk does not descend below nodes whose value is already known.
    """
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(r, False) for r in reversed(roots)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        if stop_at_values and node.value is not None:
            continue
        for inp in reversed(node.inputs):
            if id(inp) not in seen:
                stack.append((inp, False))
    return order
