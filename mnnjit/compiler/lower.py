"""Graph lowering: one decision for every static graph, whichever front end built it.

A model's forward (``nn.Module``) and an expression graph read from ``mnnjit.expr`` / ``mnnjit.numpy``
reach the same function, :func:`lower`, with a :class:`~mnnjit.backends.base.GraphIR` (placeholders
fed per run, constant weights, outputs). When the graph holds enough convolution work
(:func:`worth_lowering`), the active backend is asked to compile it whole
(:meth:`~mnnjit.backends.base.Backend.lower_graph`: on the CPU the kernel-step plan with its fused
convolution blocks and buffer arena); otherwise, or when the backend declines, the graph runs as a
step plan (``plan.py``). So an ``expr.conv2d`` and a model's convolution of the same shapes run the
same compiled kernel.

A *delegate backend* (``lowers_every_graph = True``: the NPU bridge to vendor SDKs) is handed every
static graph, with or without convolutions: ``partition.py`` cuts it between the ops the delegate
claims and the CPU, so the decision above applies only to the other backends.

Compiled graphs are cached per (structure, input signature, constants, modes, backend settings):
for a model on its Program, for expression graphs here.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from .. import settings
from ..backends import registry
from ..backends.base import Backend, GraphIR
from ..graph import Node, topo_order
from ..ops.conv_info import conv_macs, conv_macs_of


def worth_lowering(outputs: list[Node], modes: Any = None, macs: int | None = None) -> bool:
    """Whether a graph goes to the backend's whole-graph lowering: its constant-weight convolutions
    do at least the compile threshold of multiply-adds (below it the numpy reference steps are
    faster than launching kernels), or any in fp16 / quantized-weight modes (those modes exist only
    on lowered graphs). Decided without importing numba."""
    if not outputs:
        return False
    if macs is None:
        macs = conv_macs(outputs)
    if not macs or not settings.compiling_enabled():
        return False
    moded = modes is not None and (modes.fp16 or modes.keep_quantized)
    if moded:
        return True
    if macs >= settings.threshold() and _only_patch_convs(outputs):
        return False  # a vision transformer: its plan compiles whole (the patch embedding a GEMM)
    return macs >= settings.threshold()


def _only_patch_convs(outputs: list[Node]) -> bool:
    """Whether every convolution of the graph is a patch embedding (``conv_info.is_patch_conv``)."""
    from ..ops.conv_info import conv_params, is_patch_conv
    convs = [n for n in topo_order(outputs, stop_at_values=False) if conv_params(n) is not None]
    return bool(convs) and all(is_patch_conv(n) for n in convs)


def delegates(backend: Backend) -> bool:
    """Whether ``backend`` is a delegate backend: it claims ops of every static graph, and
    ``partition.py`` cuts the graph between it and the CPU."""
    return bool(getattr(backend, "lowers_every_graph", False))


def compile_graph(backend: Backend, graph: GraphIR, modes: Any = None) -> Any:
    """``graph`` compiled by ``backend`` whatever its size: fused by the backend's rules
    (``fuse_blocks.py``) and lowered whole, or cut into partitions for a delegate backend."""
    if delegates(backend):
        from .partition import lower_partitioned
        return lower_partitioned(graph, backend, modes)
    from .fuse_blocks import fuse
    return backend.lower_graph(fuse(graph, backend.fusion_rules(modes)), modes)


def lower(graph: GraphIR, modes: Any = None, backend: Backend | None = None) -> Any:
    """The graph compiled by ``backend`` (default: the active one), or None when it stays a step plan."""
    backend = backend if backend is not None else registry.current()
    if not delegates(backend) and not worth_lowering(graph.outputs, modes):
        return None
    compiled = compile_graph(backend, graph, modes)
    if compiled is not None:
        settings.counters["graphs_lowered"] += 1
    return compiled


def plan_for_program(program: Any, signature: tuple, modes: Any) -> Any:
    """What runs a model's forward for an input signature: the program's own plan (control flow,
    small graphs: ``models.program.ExecutionPlan``) or the active backend's lowering of it, built
    once per (signature, modes, backend settings) and cached on the program."""
    # the program's plan lock (``models.program.plan_lock``: one lowering per key, whichever
    # threads ask at once; the compiled graph then runs on any number of threads)
    with program.__dict__.setdefault("_plan_lock", threading.RLock()):
        return _plan_for_program(program, signature, modes)


def _plan_for_program(program: Any, signature: tuple, modes: Any) -> Any:
    plan = program.plan(signature)
    if getattr(plan, "dynamic", False):
        return plan
    cache = program.__dict__.setdefault("_lowered", {})
    backend = registry.current()
    if not delegates(backend) and not getattr(backend, "lowers_every_model", False):
        worth = cache.get(("worth", signature, modes))
        if worth is None:
            worth = cache[("worth", signature, modes)] = worth_lowering(plan.outputs, modes)
        if not worth:
            return plan
    key = (signature, modes, backend.plan_key())
    compiled = cache.get(key)
    if compiled is None or getattr(compiled, "source", plan) is not plan:
        compiled = compile_graph(backend, GraphIR(plan.placeholders, plan.outputs, list(plan.out_fmts)), modes)
        if compiled is None:
            compiled = plan
        else:
            compiled.source = plan
            settings.counters["graphs_lowered"] += 1
        cache[key] = compiled
    return compiled


# ---------------------------------------------------------------------------- expression graphs
_graphs: "OrderedDict[tuple, tuple]" = OrderedDict()
_GRAPH_CACHE_SIZE = 32
_lock = threading.Lock()


def clear_cache() -> None:
    """Forget the compiled expression graphs."""
    with _lock:
        _graphs.clear()


#: ops whose inputs after the first are weights (kept as constants when a delegate lifts data)
_WEIGHT_OPS = frozenset({"conv2d", "conv2d_transpose", "matmul", "matmul_ex", "prelu"})


def _lifted(order: list[Node]) -> set[int]:
    """The constants of an expression graph a delegate backend is fed per run (they are its data):
    all but scalars and the weights of convolutions and matmuls. Compiled into its model, each new
    array would be a new SDK compilation."""
    weights = {id(i) for n in order if n.op in _WEIGHT_OPS for i in n.inputs[1:]}
    return {id(n) for n in order if n.op == "const" and n.value is not None and n.size > 1
            and id(n) not in weights}


def _cut(order: list[Node], roots: list[Node], lift: set[int] = frozenset(),
         values: list | None = None) -> tuple[GraphIR, list[Node]]:
    """The pending part of a traced expression graph as a static graph: known values that are not
    constants (and the constants in ``lift``) become placeholders (fed per run), constants (weights)
    stay, pending nodes are copied onto the new inputs. Returns the graph and the nodes whose
    values feed its placeholders. ``values``: the known values (default: read from the nodes)."""
    new: dict[int, Node] = {}
    feeds: list[Node] = []
    placeholders: list[Node] = []
    if values is None:
        values = [n.value for n in order]
    for n, v in zip(order, values):
        if v is not None:
            if n.op == "const" and id(n) not in lift:
                new[id(n)] = n
            else:
                p = Node("placeholder", (), {}, n.shape, n.dtype, n.fmt, name=f"in{len(feeds)}")
                new[id(n)] = p
                feeds.append(n)
                placeholders.append(p)
            continue
        new[id(n)] = Node(n.op, tuple(new[id(i)] for i in n.inputs), n.attrs, n.shape, n.dtype, n.fmt)
    outputs = [new[id(r)] for r in roots]
    return GraphIR(placeholders, outputs, [("NCHW" if o.fmt == "NC4HW4" else o.fmt) for o in outputs]), feeds


def run_expression_graph(order: list[Node], roots: list[Node], key: tuple,
                         values: list | None = None) -> bool:
    """Compute ``roots`` through the active backend's graph lowering when the graph is worth it
    (see :func:`worth_lowering`); False (nothing computed) otherwise. ``key`` is the trace's
    structural key; the constants' identities are added, as lowering packs their values.
    ``values``: the trace's known values, read once (default: read from the nodes now): another
    thread's placeholder write may make the nodes read as stale while this runs."""
    if values is None:
        values = [n.value for n in order]
    backend = registry.current()
    lift = _lifted(order) if delegates(backend) else set()
    consts = tuple(id(n.value) for n in order if n.op == "const" and n.value is not None and id(n) not in lift)
    full = (key, consts, backend.plan_key())
    with _lock:
        hit = _graphs.get(full)
        if hit is not None:
            _graphs.move_to_end(full)
    if hit is None:
        known = {id(n) for n, v in zip(order, values) if v is not None}
        if any(id(r) in known for r in roots):
            return False
        pending = [n for n, v in zip(order, values) if v is None]
        if not delegates(backend) and not worth_lowering(pending, None, conv_macs_of(pending)):
            return False
        graph, _ = _cut(order, roots, lift, values)
        compiled = compile_graph(backend, graph, None)
        # the entry keeps the const nodes alive, so their ids stay theirs while it is cached
        hit = (compiled, [n for n in order if n.op == "const"])
        with _lock:
            _graphs[full] = hit
            if len(_graphs) > _GRAPH_CACHE_SIZE:
                _graphs.popitem(last=False)
        if compiled is None:
            return False
        settings.counters["graphs_lowered"] += 1
    compiled = hit[0]
    if compiled is None:
        return False
    feeds = [v for n, v in zip(order, values) if v is not None and (n.op != "const" or id(n) in lift)]
    outs = compiled.run([np.ascontiguousarray(a) for a in feeds])
    for r, v in zip(roots, outs):
        if isinstance(v, np.ndarray):
            # (a feed passed through writable: memory Var.read() handed out, not to be frozen)
            if v.base is not None or not v.flags.c_contiguous or (v.flags.writeable and any(v is f for f in feeds)):
                v = np.array(v, order="C")
            v.flags.writeable = False
        r.value = v
    return True
