"""ONNX If and Loop as MNN If and While ops with subgraphs.

An If whose condition is known while converting is inlined (only the taken branch is converted).
Otherwise each branch becomes a subgraph; the outer values a branch reads are passed as inputs
of the If op (``aliases_inputs``), its outputs are paired by name (``aliases_outputs``).

A Loop becomes a While in ONNX's own form, which MNN runs as such: inputs (trip count, condition,
loop-carried values...), body inputs (iteration, condition, carried...), body outputs (condition,
carried..., scan values...), op outputs (carried..., scans stacked on a new first axis). Outer
values the body reads are appended to the carried values and passed through unchanged.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..format import Op, SubGraph
from .builder import Val
from .core import GraphConverter, attrs_of, handler


def _formal(cv: GraphConverter, vi: Any, fallback: Val | None = None) -> tuple:
    from .onnx_to_mnn import _type_info
    shape, dtype = _type_info(vi)
    if dtype is None:
        dtype = fallback.dtype if fallback is not None else np.dtype(np.float32)
    if shape is None and fallback is not None:
        shape = fallback.shape
    return vi.name, shape, dtype


def add_inputs(sub: SubGraph, names: list, vals: list) -> None:
    """Give ``sub`` Input ops for outer values it does not read yet (so every branch of an If has
    the same inputs)."""
    from .builder import mnn_dtype
    have = {sub.tensors[i] for i in sub.inputs or []}
    for name, v in zip(names, vals):
        if name in have:
            continue
        t = len(sub.tensors)
        sub.tensors.append(name)
        main = {"dtype": mnn_dtype(v.dtype), "dformat": "NCHW"}
        if v.shape is not None:
            main["dims"] = np.asarray([-1 if d is None else d for d in v.shape], np.int32)
        sub.nodes.insert(0, Op(type="Input", name=name, outputIndexes=[t], main_type="Input", main=main,
                               defaultDimentionFormat="NCHW"))
        sub.inputs.append(t)


def _inline(cv: GraphConverter, node: Any, graph: Any) -> list:
    """Convert a branch's nodes in the current scope; returns the branch outputs' Vals."""
    cv.b._reserved.update(n for nd in graph.node for n in nd.output)
    from onnx import numpy_helper
    from .builder import const_val
    for init in graph.initializer:
        cv.vals[init.name] = const_val(numpy_helper.to_array(init))
    label = cv.node_label
    for nd in graph.node:
        cv.node_label = f"node {nd.name!r} ({nd.op_type})"
        cv.convert_node(nd)
    cv.node_label = label
    return [cv.lookup(o.name) for o in graph.output]


@handler("If")
def if_(cv: GraphConverter, node, ins):
    """MNN If (or the taken branch, inlined, when the condition is known)."""
    at = attrs_of(node)
    cond = ins[0]
    if cond.const is not None:
        return _inline(cv, node, at["then_branch"] if bool(cond.const.reshape(-1)[0]) else at["else_branch"])
    base = (node.name or node.output[0]).replace("/", "_")
    sub_t, cap_t, outs_t = cv.subgraph(at["then_branch"], [], base + "_then")
    sub_e, cap_e, outs_e = cv.subgraph(at["else_branch"], [], base + "_else")
    names = list(dict.fromkeys(cap_t + cap_e))
    vals = [cv.lookup(n) for n in names]
    add_inputs(sub_t, names, vals)
    add_inputs(sub_e, names, vals)
    main = {"then_graph": sub_t.name, "else_graph": sub_e.name,
            "aliases_inputs": [{"data": None}] + [{"data": [n]} for n in names],
            "aliases_outputs": [{"data": [a, b]} for a, b in zip(outs_t, outs_e)]}
    outs = cv.b.op("If", [cv.idx(cond)] + [cv.idx(v) for v in vals], "IfParam", main,
                   node.output[0] or node.name, n_out=len(node.output))
    return [cv.out(t) for t in outs]


@handler("Loop")
def loop(cv: GraphConverter, node, ins):
    """MNN While in ONNX's Loop form."""
    body = attrs_of(node)["body"]
    trip = ins[0] if ins and ins[0] is not None else None
    cond = ins[1] if len(ins) > 1 and ins[1] is not None else None
    carried = [v for v in ins[2:]]
    n_carried = len(carried)
    formal = [(body.input[0].name, (), np.dtype(np.int64)), (body.input[1].name, (), np.dtype(bool))]
    formal += [_formal(cv, vi, v) for vi, v in zip(body.input[2:], carried)]
    base = (node.name or node.output[0]).replace("/", "_") + "_body"
    sub, captured, _ = cv.subgraph(body, formal, base)
    # outputs: cond, carried..., captured (passed through)..., scans...
    cap_idx = sub.inputs[2 + n_carried:]
    sub.outputs = sub.outputs[:1 + n_carried] + list(cap_idx) + sub.outputs[1 + n_carried:]
    n_scan = len(body.output) - 1 - n_carried
    t_trip = cv.b.scalar(2**31 - 1, np.int32) if trip is None else (
        cv.b.scalar(int(trip.const.reshape(-1)[0]), np.int32) if trip.const is not None else cv.idx(trip))
    t_cond = cv.b.scalar(1, np.int32) if cond is None else cv.idx(cond)
    inputs = [t_trip, t_cond] + [cv.idx(v) for v in carried] + [cv.idx(cv.lookup(n)) for n in captured]
    name = (node.output[0] if node.output else "") or node.name
    outs = cv.b.op("While", inputs, "WhileParam", {"body_graph": sub.name}, name,
                   n_out=n_carried + len(captured) + n_scan)
    res = [cv.out(t, v.dtype) for t, v in zip(outs[:n_carried], carried)]
    res += [cv.out(t) for t in outs[n_carried + len(captured):]]
    return res
