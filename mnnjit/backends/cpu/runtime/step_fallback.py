"""Tiered kernel steps: a :class:`~mnnjit.backends.cpu.kernel_steps.NetPlan` step that runs its
reference path until its kernels are compiled, then switches over (:mod:`.tiering`).

A kernel step covers one graph node or a fused run of them (a 1x1 convolution with the depthwise
one it feeds, a depthwise-pointwise pair, a convolution with its residual add and activation, a
classifier GEMV reading through dropped reshapes, an add with its activation). Its reference
path evaluates those nodes with the ops' numpy references (:func:`mnnjit.ops.evaluate.compute_node`:
BLAS for convolutions and matrix products, nothing to compile), from the values in the step's
input slots, and stores the result where the kernel would have: into the step's pooled buffer
(later kernel steps read it from there) or a fresh array, in the plan's activation dtype.

A step is first run inside :func:`.tiering.deferring`: when its kernel is in memory or on disk it
runs (and the step is switched to it for good); when not, the kernel is queued for the background
compile and this forward takes the reference path. A reference step is tiered the same way (a
hand-written kernel, or float16 conversions, may need compiling), its fallback being the op's
numpy reference on values widened by numpy. In sync mode the first call compiles and switches.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

import numpy as np

from mnnjit.graph import Node
from mnnjit.ops.evaluate import compute_node
from mnnjit.settings import counters
from mnnjit.backends.cpu.runtime import tiering

__all__ = ["tier_steps", "reference_step", "tiered_call"]


def _host_f32(v: Any) -> Any:
    """A stored value as the references take it (float16 storage widened by numpy: nothing to compile)."""
    if isinstance(v, np.ndarray):
        if v.dtype == np.float16:
            return v.astype(np.float32)
    return v


def reference_step(order: List[Node], slot: Dict[int, int], ins: List[int], out: int,
                   buf: Optional[np.ndarray], act_dtype: np.dtype) -> Callable[[list], None]:
    """``f(vals)`` computing the value kernel step slot ``out`` holds from its input slots ``ins``
    with the references, stored in ``buf`` (its pooled buffer) or a fresh ``act_dtype`` array.

    ``slot`` maps node ids to value slots; the node a slot holds is the last one in ``order`` mapped
    to it."""
    holder: Dict[int, Node] = {}
    for n in order:
        holder[slot[id(n)]] = n
    final = holder[out]
    inputs = set(ins)
    plan: List[Node] = []           # nodes to compute, in order
    leaves: Dict[int, int] = {}     # id(node) -> the input slot holding its value
    seen: set = set()

    def visit(n: Node) -> None:
        if id(n) in seen:
            return
        seen.add(id(n))
        s = slot[id(n)]
        if n is not final and s in inputs and holder[s] is n:
            leaves[id(n)] = s
            return
        if n.op in ("const", "placeholder"):
            if n.op == "placeholder":
                raise RuntimeError(f"kernel step reads placeholder {n.name!r} outside its inputs")
            return
        for i in n.inputs:
            visit(i)
        plan.append(n)

    visit(final)
    shape = tuple(final.shape)

    def run(vals: list) -> None:
        local: Dict[int, Any] = {}
        for n in plan:
            args = []
            for i in n.inputs:
                k = id(i)
                if k in local:
                    args.append(local[k])
                elif k in leaves:
                    args.append(_host_f32(vals[leaves[k]]))
                else:                       # a constant (its value, also when the plan dropped its slot)
                    args.append(i.value)
            local[id(n)] = compute_node(n, args)
        v = np.asarray(local[id(final)])
        if buf is not None:
            np.copyto(buf, v.reshape(buf.shape), casting="unsafe")
            vals[out] = buf
        else:
            vals[out] = v.reshape(shape).astype(act_dtype, copy=False)
        counters["tiered_ref_steps"] += 1
    return run


def tiered_call(calls: list, index: int, fast: Callable[[list], None],
                slow: Callable[[list], None]) -> Callable[[list], None]:
    """The step at ``calls[index]``: ``fast`` (its kernels) once they run without compiling, until
    then ``slow`` (its reference path). The first run of ``fast`` replaces this wrapper in ``calls``."""
    state = {"failed": False}

    def call(vals: list) -> None:
        if not state["failed"] and tiering.mode() != "reference":
            try:
                with tiering.deferring():
                    fast(vals)
            except tiering.CompileDeferred as exc:
                if exc.job.state == "failed":
                    state["failed"] = True      # its kernel does not compile: the reference for good
                slow(vals)
                return
            if calls[index] is call:
                calls[index] = fast
            return
        slow(vals)
    return call


def tier_steps(plan: Any, calls: list, buffers: Dict[int, Optional[np.ndarray]]) -> None:
    """Wrap the bound step calls ``calls`` of a NetPlan (on the buffers ``buffers``) with
    :func:`tiered_call`, in place."""
    for t, st in enumerate(plan.steps):
        out = st.out
        if st.kind == "ref":
            slow = _ref_node(plan.order[out], list(st.ins), out)
        else:
            slow = reference_step(plan.order, plan._slot, list(st.ins), out, buffers.get(out),
                                  plan.act_dtype)
        calls[t] = tiered_call(calls, t, calls[t], slow)


def _ref_node(node: Node, ins: List[int], out: int) -> Callable[[list], None]:
    """A reference step's path needing no compiling: the op's numpy reference."""
    def run(vals: list) -> None:
        vals[out] = compute_node(node, [_host_f32(vals[j]) for j in ins])
    return run
