"""``fused_block``: a chain of ops the compiler's fusion pass (``compiler/fuse_blocks.py``) rewrote into
one node because a backend runs them as one kernel.

A fused node keeps the original nodes it stands for (``attrs["body"]``, in topological order; the last
one computes the fused node's value) and takes as inputs everything the body reads from outside
(:func:`block_inputs`, in order of first use: data, residuals and constant weights alike). Its
reference runs the body's own references, so any backend can run a plan with fused nodes and the
differential tests compare every rewrite with the unfused graph. ``attrs["pattern"]`` names the
rewrite (:data:`PATTERNS`); a backend's lowering builds its kernel from the body.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .evaluate import compute_node
from .registry import OpDef, register

__all__ = ["PATTERNS", "block_inputs", "input_of", "fused_attrs"]

#: the rewrites, each a chain of nodes where every node but the last is read only by the next one
PATTERNS = {
    "expand_dw": "1x1 convolution, then the depthwise convolution it alone feeds",
    "dw_pointwise": "depthwise convolution (after the convolution that alone feeds it, optionally), "
                    "then the 1x1 convolution it alone feeds",
    "expand_dw_pointwise": "a whole inverted residual block: 1x1 expansion, depthwise, 1x1 projection",
    "conv_residual": "a convolution (or a dw_pointwise block), then the add of a residual and an "
                     "optional relu/relu6 (the convolution's epilogue)",
    "add_act": "an add, then the relu/relu6 only it feeds",
}


def block_inputs(body: Sequence[Any]) -> list:
    """The nodes a chain ``body`` reads from outside itself, in order of first use."""
    inside = {id(b) for b in body}
    seen: set[int] = set()
    out = []
    for b in body:
        for i in b.inputs:
            if id(i) not in inside and id(i) not in seen:
                seen.add(id(i))
                out.append(i)
    return out


def fused_attrs(pattern: str, body: Sequence[Any]) -> dict:
    """The attributes of a fused node for ``pattern`` over ``body``."""
    if pattern not in PATTERNS:
        raise ValueError(f"unknown fusion pattern {pattern!r}; known: {sorted(PATTERNS)}")
    if not body:
        raise ValueError("a fused block needs at least one node")
    return {"pattern": pattern, "body": tuple(body), "ext": tuple(block_inputs(body))}


def input_of(fused: Any, original: Any) -> Any:
    """The input of fused node ``fused`` that stands for ``original`` (a node its body reads)."""
    for pos, e in enumerate(fused.attrs["ext"]):
        if e is original:
            return fused.inputs[pos]
    raise KeyError(f"{original.op} node is not read by the fused block")


def _infer(inputs: list, attrs: dict) -> tuple:
    last = attrs["body"][-1]
    return tuple(last.shape), last.dtype


def _ref(arrays: list, attrs: dict) -> np.ndarray:
    vals = {id(e): a for e, a in zip(attrs["ext"], arrays)}
    out = None
    for b in attrs["body"]:
        out = compute_node(b, [vals[id(i)] for i in b.inputs])
        vals[id(b)] = out
    return out


register(OpDef("fused_block", "opaque", _infer, _ref,
               doc="ops rewritten into one node by the compiler's fusion pass; reference: the body's"))
