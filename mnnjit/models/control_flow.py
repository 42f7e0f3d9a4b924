"""Control flow: MNN's ``If`` and ``While`` ops, whose branches and bodies are subgraphs of the
model (``Net.subgraphs``), translated by name.

``If`` with a condition known when the plan is built translates one branch; with an
input-dependent condition it translates both and selects elementwise when the branches agree
in shape and dtype, and otherwise asks for a dynamic plan (re-translated at each forward with
the input values). ``While`` loops are unrolled while the plan is built (the condition must be
known then, or the plan becomes dynamic); recurrent nets exported with a fixed sequence length
unroll into one static plan.
"""
from __future__ import annotations

import numpy as np

from ..graph import Node
from ..ops import build as B
from .translate import Ctx, NeedsValuesError, Translator, converter, node_of

#: Upper bound on unrolled loop iterations (a guard against malformed models).
MAX_ITERATIONS = 100_000


def run_subgraph(ctx: Ctx, name: str, inputs: dict[str, Node], outputs: list[str],
                 outer: dict[str, Node] | None = None) -> list[Node]:
    """Translate subgraph ``name`` with named input nodes; return the named output nodes."""
    sub = ctx.subgraphs.get(name)
    if sub is None:
        raise ValueError(f"{ctx.op_label}: the model has no subgraph {name!r}")
    names = list(sub.tensors or [])
    index = {n: i for i, n in enumerate(names)}
    tensors: dict[int, Node] = {}
    for n, node in inputs.items():
        if n in index:
            tensors[index[n]] = node
    produced = {t for op in sub.nodes for t in (op.outputIndexes or []) if op.type != "Input"}
    scope = dict(outer or {})
    scope.update(inputs)
    for op in sub.nodes:
        for t in op.inputIndexes or []:
            if t not in tensors and t not in produced and names[t] in scope:
                tensors[t] = scope[names[t]]
    for op in sub.nodes:
        if op.type == "Input":
            for t in op.outputIndexes or []:
                if t not in tensors:
                    if names[t] in scope:
                        tensors[t] = scope[names[t]]
                    else:
                        raise ValueError(f"{ctx.op_label}: subgraph {name!r} input {names[t]!r} has no value")
    missing = [o for o in outputs if o not in index]
    if missing:
        raise ValueError(f"{ctx.op_label}: subgraph {name!r} has no tensor {missing[0]!r}")
    label = ctx.op_label
    Translator(ctx, sub.nodes, names).run(tensors, [index[o] for o in outputs])
    ctx.op_label = label
    return [tensors[index[o]] for o in outputs]


def _alias_names(entry) -> list[str]:
    if entry is None:
        return []
    data = entry.get("data") if isinstance(entry, dict) else entry
    return [str(d) for d in (data or [])]


def _truth(ctx: Ctx, node: Node) -> bool | None:
    """The condition's truth value, or None when it depends on the inputs (static plans)."""
    if node.live and not ctx.dynamic:
        return None
    v = np.asarray(ctx.value(node, "condition")).reshape(-1)
    return bool(v[0]) if v.size else False


@converter("If")
def if_op(ctx: Ctx, op, xs):
    """``then`` branch when the first input is true, else the ``else`` branch."""
    p = op.main or {}
    aliases = p.get("aliases_inputs") or []
    named: dict[str, Node] = {}
    for k, node in enumerate(xs):
        for n in _alias_names(aliases[k] if k < len(aliases) else None):
            named[n] = node
    pairs = [_alias_names(e) for e in (p.get("aliases_outputs") or [])]
    then_names = [pr[0] for pr in pairs]
    else_names = [pr[1] if len(pr) > 1 else pr[0] for pr in pairs]
    cond = _truth(ctx, xs[0])
    if cond is True:
        return run_subgraph(ctx, str(p.get("then_graph")), named, then_names)
    if cond is False:
        return run_subgraph(ctx, str(p.get("else_graph")), named, else_names)
    then_out = run_subgraph(ctx, str(p.get("then_graph")), named, then_names)
    else_out = run_subgraph(ctx, str(p.get("else_graph")), named, else_names)
    if any(a.shape != b.shape or a.dtype != b.dtype for a, b in zip(then_out, else_out)):
        raise NeedsValuesError(f"{ctx.op_label}: branches differ in shape; the condition decides")
    c = node_of(B.reshape(xs[0], ())) if xs[0].size == 1 else xs[0]
    return [node_of(B.select(c, a, b)) for a, b in zip(then_out, else_out)]


@converter("While")
def while_op(ctx: Ctx, op, xs):
    """Unroll the loop: run ``body`` while ``cond`` is true, feeding updated tensors back."""
    p = op.main or {}
    if not p.get("cond_graph") and p.get("aliases_inputs") is None:
        return _loop(ctx, op, xs)
    aliases = p.get("aliases_inputs") or []
    state: dict[str, Node] = {}
    for k, node in enumerate(xs):
        for n in _alias_names(aliases[k] if k < len(aliases) else None):
            state[n] = node
    updates = [_alias_names(e) for e in (p.get("aliases_updates") or [])]
    out_names = [str(n) for n in (p.get("aliases_outputs") or [])]
    cond_graph = p.get("cond_graph")
    body_graph = str(p.get("body_graph"))
    body_outs = [u[0] for u in updates]
    for _ in range(MAX_ITERATIONS):
        if cond_graph:
            csub = ctx.subgraphs.get(str(cond_graph))
            cname = (csub.tensors or [])[csub.outputs[0]] if csub is not None and csub.outputs else None
            if cname is None:
                raise ValueError(f"{ctx.op_label}: condition subgraph {cond_graph!r} has no output")
            (c,) = run_subgraph(ctx, str(cond_graph), state, [cname])
            truth = _truth(ctx, c)
            if truth is None:
                raise NeedsValuesError(f"{ctx.op_label}: loop condition depends on the inputs")
            if not truth:
                break
        outs = run_subgraph(ctx, body_graph, state, body_outs)
        new = dict(state)
        for (src, *dsts), node in zip(updates, outs):
            for d in dsts:
                new[d] = node
            new[src] = node
        state = new
    else:
        raise RuntimeError(f"{ctx.op_label}: loop ran more than {MAX_ITERATIONS} iterations")
    missing = [n for n in out_names if n not in state]
    if missing:
        raise ValueError(f"{ctx.op_label}: loop output {missing[0]!r} is not a loop variable")
    return [state[n] for n in out_names]


def _loop(ctx: Ctx, op, xs):
    """ONNX-Loop form of While (no aliases): inputs (M, cond, carried...); body inputs (i, cond,
    carried...); body outputs (cond, carried..., scan...); outputs (carried..., scans stacked on a
    new first axis)."""
    p = op.main or {}
    name = str(p.get("body_graph"))
    sub = ctx.subgraphs.get(name)
    if sub is None:
        raise ValueError(f"{ctx.op_label}: the model has no subgraph {name!r}")
    tn = list(sub.tensors or [])
    in_names = [tn[t] for t in sub.inputs or []]
    out_names = [tn[t] for t in sub.outputs or []]
    n_carried = len(xs) - 2
    if len(in_names) != n_carried + 2 or len(out_names) < n_carried + 1:
        raise ValueError(f"{ctx.op_label}: loop body {name!r} has {len(in_names)} inputs and {len(out_names)} "
                         f"outputs for {n_carried} loop variables")
    trip = xs[0]
    if trip.size == 0:
        max_trip = MAX_ITERATIONS
    else:
        if trip.live and not ctx.dynamic:
            raise NeedsValuesError(f"{ctx.op_label}: loop trip count depends on the inputs")
        max_trip = int(np.asarray(ctx.value(trip, "trip count")).reshape(-1)[0])
        if max_trip < 0:
            max_trip = MAX_ITERATIONS
    cond = xs[1]
    carried = list(xs[2:])
    scans: list[list[Node]] = [[] for _ in out_names[n_carried + 1:]]
    i = 0
    while i < max_trip:
        if cond.size:
            truth = _truth(ctx, cond)
            if truth is None:
                raise NeedsValuesError(f"{ctx.op_label}: loop condition depends on the inputs")
            if not truth:
                break
        feeds = {in_names[0]: ctx.const(np.asarray(i, np.int32)), in_names[1]: cond}
        feeds.update(zip(in_names[2:], carried))
        outs = run_subgraph(ctx, name, feeds, out_names)
        cond = outs[0]
        carried = outs[1:n_carried + 1]
        for lst, node in zip(scans, outs[n_carried + 1:]):
            lst.append(node)
        i += 1
        if i >= MAX_ITERATIONS:
            raise RuntimeError(f"{ctx.op_label}: loop ran more than {MAX_ITERATIONS} iterations")
    stacked = []
    for lst in scans:
        if not lst:
            raise NotImplementedError(f"{ctx.op_label}: a loop that runs zero times has empty scan outputs")
        parts = [node_of(B.reshape(n, (1,) + n.shape)) for n in lst]
        stacked.append(node_of(B.concat(parts, 0)) if len(parts) > 1 else parts[0])
    return carried + stacked
