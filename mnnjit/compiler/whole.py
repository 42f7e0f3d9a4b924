"""The whole-forward rule: a tiny static graph that runs often becomes one compiled function.

A graph whose activations are all tiny (an MLP at batch one, a short RNN or attention block) is paced
by the Python between its ops, not by arithmetic. When such a graph has run
``settings.plan_kernel_calls()`` times, the active backend is asked to compile its whole step list
(:meth:`~mnnjit.backends.base.Backend.compile_step_list`; on the CPU one Numba function with no Python
between ops). The same rule serves both front ends:

* a model's :class:`~mnnjit.models.program.ExecutionPlan` builds its :class:`StepList` with
  :func:`step_list` and compiles it with :func:`compile_whole` once hot;
* an expression graph (``mnnjit.expr`` / ``mnnjit.numpy`` calls read as one graph) goes through
  :func:`run_if_hot` from the executor: its pending part is cut into a static graph (known
  activations and per-call constants become inputs, weights stay constants), counted by structure and
  weights, and compiled by the same call.

A backend answers with ``run(arrays) -> outputs``, None (declined: the graph stays on its step path
for good) or False (compiling in the background: asked again after as many calls).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .. import settings
from ..backends import registry
from ..graph import Node, topo_order
from ..ops import registry as op_registry
from .lower import _cut, _lifted

#: A graph whose every pending node (and its non-constant inputs) has fewer elements than this is
#: tiny: no hand-written kernel is used below the compiler's ``plan.KERNEL_MIN`` (the same number;
#: a test checks that they agree).
TINY_WORK = 1024
#: Expression graphs with fewer pending ops than this are not counted (tracing them would cost more
#: than a compiled function saves; numpy-style code evaluates one or two ops at a time).
MIN_OPS = 4
#: Expression-graph structures counted at once (least recently used dropped first).
MAX_COUNTED = 64


@dataclass
class StepList:
    """A static graph as reference steps over value slots: ``steps`` are ``(ref, attrs, input slots,
    output slot, dtype, shape)`` tuples in topological order; ``init`` holds the constants' values by
    slot; ``feed_slots`` the slot of each graph input (None: unused); ``out_slots`` the outputs'."""

    steps: list
    init: list
    feed_slots: list
    out_slots: list
    order: list[Node]


def step_list(placeholders: list[Node], outputs: list[Node]) -> StepList:
    """The :class:`StepList` computing ``outputs`` from values fed for ``placeholders``."""
    order = topo_order(outputs, stop_at_values=False)
    slot = {id(n): k for k, n in enumerate(order)}
    init: list = [None] * len(order)
    steps = []
    for k, n in enumerate(order):
        if n.op == "const":
            init[k] = n.value
        elif n.op != "placeholder":
            ref = op_registry.get(n.op).ref
            steps.append((ref, n.attrs, tuple(slot[id(i)] for i in n.inputs), k, n.dtype, n.shape))
    return StepList(steps, init, [slot.get(id(p)) for p in placeholders], [slot[id(o)] for o in outputs], order)


def run_steps(sl: StepList, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """``sl`` run on the op references (the answer a compiled whole function must give)."""
    vals = list(sl.init)
    for s, a in zip(sl.feed_slots, arrays):
        if s is not None:
            vals[s] = a
    with np.errstate(all="ignore"):
        for ref, attrs, ins, out, dt, shape in sl.steps:
            v = np.asarray(ref([vals[i] for i in ins], attrs))
            vals[out] = v.astype(dt, copy=False).reshape(shape) if dt is not None else v
    return [vals[s] for s in sl.out_slots]


def is_tiny(nodes: list[Node]) -> bool:
    """Whether every node to compute in ``nodes`` (and each of its inputs but constants) is below
    :data:`TINY_WORK` elements."""
    for n in nodes:
        if n.op in ("const", "placeholder") or n.value is not None:
            continue
        if n.dtype is not None and n.size >= TINY_WORK:
            return False
        for i in n.inputs:
            if i.op != "const" and i.size >= TINY_WORK:
                return False
    return True


def compile_whole(sl: StepList, check: Callable | None = None, sample: list | None = None,
                  backend: Any = None) -> Callable | None | bool:
    """``sl`` compiled whole by ``backend`` (default: the active one): ``run(arrays) -> outputs``,
    None (declined) or False (compiling in the background). With ``check`` and ``sample`` the compiled
    function's first answer must equal ``check(sample)``."""
    backend = backend if backend is not None else registry.current()
    run = backend.compile_step_list(sl.steps, sl.init, sl.feed_slots, sl.out_slots, sl.order,
                                    check=check, sample=sample)
    if run is False:
        settings.counters["plan_kernel_deferred"] += 1
        return False
    settings.counters["plan_kernels" if run is not None else "plan_kernel_declined"] += 1
    return run


class _Counted:
    """One expression-graph structure being counted: calls left before compiling, and once compiled
    the function (None: declined) with the constants compiled into it, kept alive so that their ids
    stay theirs. (While counting nothing is kept: a reused id only miscounts.)"""

    __slots__ = ("left", "run", "consts", "busy")

    def __init__(self, left: int):
        self.left = left
        self.run: Callable | None = None
        self.consts: list = []
        self.busy = False


_counted: "OrderedDict[tuple, _Counted]" = OrderedDict()
_lock = threading.Lock()


def clear_cache() -> None:
    """Forget the counted and compiled expression graphs."""
    with _lock:
        _counted.clear()


def run_if_hot(order: list[Node], roots: list[Node]) -> bool:
    """Compute ``roots`` with the whole-graph function of this expression graph's structure once it
    has run often enough (see the module docstring); False (nothing computed) while it is counted,
    compiling, or declined."""
    calls = settings.plan_kernel_calls()
    if calls is None:
        return False
    from .plan import trace  # (the plan machinery loads only once a tiny graph is counted)
    tr = trace(roots, order)
    lift = _lifted(tr.order)
    consts = [n for n in tr.order if n.op == "const" and n.value is not None and id(n) not in lift]
    key = (tr.key, tuple(id(n.value) for n in consts), registry.current().plan_key())
    with _lock:
        entry = _counted.get(key)
        if entry is None:
            entry = _counted[key] = _Counted(calls)
            if len(_counted) > MAX_COUNTED:
                _counted.popitem(last=False)
        else:
            _counted.move_to_end(key)
        if entry.run is None:
            entry.left -= 1
            if entry.left >= 0 or entry.busy:
                return False
            entry.busy = True  # this thread compiles; the others keep the step path meanwhile
    feeds = [np.ascontiguousarray(v) for n, v in zip(tr.order, tr.values)
             if v is not None and (n.op != "const" or id(n) in lift)]
    if entry.run is None:
        graph, _ = _cut(tr.order, roots, lift, tr.values)
        sl = step_list(graph.placeholders, graph.outputs)
        try:
            run = compile_whole(sl, check=lambda arrays: run_steps(sl, arrays), sample=feeds)
        finally:
            entry.busy = False
        if run is False:        # compiling in the background: count again
            entry.left = calls
            return False
        if run is None:         # declined for good: never counted down to zero again
            entry.left = 1 << 62
            return False
        entry.consts = consts
        entry.run = run
    outs = entry.run(feeds)
    for r, v in zip(roots, outs):
        if isinstance(v, np.ndarray):
            if v.flags.writeable and any(v is f or v.base is f for f in feeds):
                v = np.array(v)     # a feed passed through: memory Var.read() may have handed out
            v.flags.writeable = False
        r.value = v
    return True
