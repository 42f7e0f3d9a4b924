"""The default executor: dispatches between the numpy reference path and compiled plans.

``evaluate(roots)``:

* one node whose inputs are all known and whose work is below the compile threshold (the eager,
  numpy-style case) runs its ``ref`` directly: no tracing, no plan, no numba; so does one such node of
  any size whose op never fuses (image ops, movement: a plan would be one step), through its
  hand-written kernel when it has one;
* a graph whose every node is below the threshold runs on the reference evaluator;
* otherwise the graph is traced, its plan taken from the plan cache (keyed by structure, shapes
  and dtypes) or built (passes, fusion, memory plan), and run on the CPU backend: fused groups as
  compiled kernels, other ops as hand-written kernels or their ``ref``.
"""
from __future__ import annotations

import sys
import threading
from collections import OrderedDict

import numpy as np

from ..concurrency import launch_guard
from .. import graph as graph_mod
from ..graph import Node, topo_order
from .. import settings as config
from ..settings import counters
from ..ops.fperr import ERR_IGNORE, ERRVAR, LOCAL as _FP_LOCAL, thread_runner as _fp_thread_runner
from ..ops.evaluate import compute_node as _compute_node
from ..ops.evaluate import run_order
from .fusion import REDUCE_OPS
from . import lower, whole
from .plan import KERNEL_MIN, _check
from ..backends import registry
from ..ops import registry as op_registry

_plans: "OrderedDict[tuple, object]" = OrderedDict()
_PLAN_CACHE_SIZE = 256
_lock = threading.RLock()


def backend():
    """The backend graphs run on now (``mnnjit.backends.registry.current``; the CPU by default)."""
    return registry.current()


def clear_plan_cache() -> None:
    """Forget all cached plans (step plans, lowered and whole-compiled expression graphs)."""
    _plans.clear()
    lower.clear_cache()
    whole.clear_cache()


config.on_threshold_change.append(clear_plan_cache)


def _work(node: Node) -> int:
    n = node.size if node.dtype is not None else 0
    for i in node.inputs:
        s = i.size
        if s > n:
            n = s
    return n


def _handwritten(node: Node):
    """The active backend, when it has its own kernel for non-elementwise ``node`` (big enough to
    want one), else None."""
    if node.op in _NO_HW or _work(node) < KERNEL_MIN:
        return None
    be = registry.current()
    return be if be.supports_op(node) else None


_NO_HW: set = set()
_EW: set = set()
#: Ops a plan would run as a single step anyway (not fused): one such node with known inputs runs directly.
_DIRECT: set = set()


def _chained(node: Node) -> bool:
    """Whether elementwise ``node`` has a pending elementwise input (a chain a serial kernel could fuse)."""
    if node.op not in _EW:
        return False
    for i in node.inputs:
        if i.value is None and i.op in _EW:
            return True
    return False


def _init_no_hw() -> None:
    from ..ops import registry
    for name, od in registry.all_ops().items():
        if od.kind in ("elementwise", "movement", "source"):
            _NO_HW.add(name)
        if od.kind == "elementwise":
            _EW.add(name)
        elif name not in REDUCE_OPS:
            _DIRECT.add(name)


#: numpy's error-state context variable and its "ignore all" value (``ops.fperr``; None: not
#: available, the eager path then uses ``np.errstate``)
_ERRVAR, _ERR_IGNORE = ERRVAR, ERR_IGNORE


_REFS: dict = {}


#: movement ops whose reference is a numpy view of the input
_VIEW_OPS = frozenset({"reshape", "transpose", "slice", "broadcast_to"})


def _view_of(node: Node, wc: int):
    """A numpy view computing movement ``node`` from its input's known value (not cached), or None."""
    op = node.op
    if op not in _VIEW_OPS:
        return None
    src = node.inputs[0]
    v = src._value
    if type(v) is not np.ndarray or (src.live and src.stamp != wc and src.op != "placeholder"):
        return None
    if op == "reshape":
        return v.reshape(node.attrs["shape"])
    if op == "transpose":
        return v.transpose(node.attrs["perm"])
    ref = _REFS.get(op)
    if ref is None:
        ref = _REFS[op] = op_registry.get(op).ref
    out = ref([v], node.attrs)
    return out if type(out) is np.ndarray and out.shape == node.shape else None


def _eager(node: Node, thr: int) -> bool:
    """Run one node whose inputs are known on the eager fast path; False when it does not qualify
    (see the module docstring). This is the whole cost of a small numpy-style call, so it is
    written out: ``compute_node``'s checks, a cheaper floating-point error state."""
    op = node.op
    if op == "placeholder":
        return False
    args = []
    work = 0
    wc = graph_mod._write_counter
    for i in node.inputs:
        v = i._value
        if v is None or (i.live and i.stamp != wc and i.op != "placeholder"):
            # a pending movement input of a known value (stack's expand_dims, roll's slices):
            # its numpy view, made here and not cached
            if op in _VIEW_OPS:
                return False
            v = _view_of(i, wc)
            if v is None:
                return False
        args.append(v)
        if type(v) is np.ndarray and v.size > work:
            work = v.size
    dtype = node.dtype
    if dtype is not None:
        n = 1
        for d in node.shape:
            n *= d
        if n > work:
            work = n
    if work >= thr and op not in _DIRECT:
        return False
    out = None
    if work >= KERNEL_MIN and op not in _NO_HW:
        be = registry.current()     # (``_handwritten`` with ``work`` known)
        if be.supports_op(node):
            with launch_guard():
                out = be.run_op(node, args)
            if out is not None:
                out = _check(node, be.to_host(out))
                counters["handwritten_runs"] += 1
    if out is None:
        if _ERRVAR is None or dtype is None:
            out = _compute_node(node, args)
        else:
            ref = _REFS.get(op)
            if ref is None:
                ref = _REFS[op] = op_registry.get(op).ref
            tok = _ERRVAR.set(_ERR_IGNORE)
            try:
                out = ref(args, node.attrs)
            finally:
                _ERRVAR.reset(tok)
            if type(out) is not np.ndarray:
                out = np.asarray(out)
            if out.dtype is not dtype and out.dtype != dtype:
                out = out.astype(dtype)
            if out.shape != node.shape:
                if out.size != node.size:
                    raise RuntimeError(f"op {op} produced shape {out.shape}, expected {node.shape}")
                out = out.reshape(node.shape)
    if type(out) is np.ndarray:
        # values are cached read-only and C-contiguous (an owner array of one dimension is); a
        # view is kept only when it spans its whole buffer (a reshaped fresh result: copying it
        # would cost a pass; a part of a larger buffer is copied so the rest can be freed). An
        # input's memory that ``read()`` handed out (writable) is copied, never frozen or shared.
        base = out.base
        if base is None:
            for a in args:
                if a is out:
                    if out.flags.writeable:
                        out = np.array(out)
                    break
            else:
                if out.ndim > 1 and not out.flags.c_contiguous:
                    out = np.array(out, order="C")
        else:
            for a in args:
                if a is base or (type(a) is np.ndarray and a.base is base):
                    if out.flags.writeable:
                        base = out = np.array(out, order="C")
                    break
            if base is not out and (not out.flags.c_contiguous or getattr(base, "nbytes", -1) != out.nbytes):
                out = np.array(out, order="C")
        out.setflags(False)     # (read-only; positional: the keyword costs ~0.15 us more)
    node._value = out
    node.stamp = wc
    return True


#: op -> numpy ufunc, for the ops whose registered reference is that ufunc (``eager_value``)
_UFUNCS: dict = {}
#: ``settings.threshold()`` as of the last change (``eager_value`` reads it on every call)
_thr: int | None = None


def _cache_threshold() -> int:
    global _thr
    _thr = config.threshold()
    return _thr


def _forget_threshold() -> None:
    global _thr
    _thr = None


config.on_threshold_change.append(_forget_threshold)


def _init_ufuncs() -> None:
    from ..ops.elementwise import UFUNC_OPS
    if _ERRVAR is None:     # (the route relies on the cheap error state)
        return
    for name, (fn, ref) in UFUNC_OPS.items():
        if op_registry.get(name).ref is ref:
            _UFUNCS[name] = fn


def eager_value(node: Node, handed_out: bool = False):
    """The value of ``node`` computed on the eager fast path (``Var.read``'s direct route), or None
    when it does not qualify (``evaluate`` then decides). ``handed_out``: the caller hands a fresh
    result to its user as the node's own memory, so it is cached writable (the memory ``read()``
    returned).

    An elementwise op whose registered reference is one numpy ufunc calls the ufunc here, without
    the reference's wrappers (the same arithmetic; written out in one frame: this is most of a
    small numpy-style call); other nodes take ``_eager``."""
    fn = _UFUNCS.get(node.op)
    if fn is None:
        if not _NO_HW:
            _init_no_hw()
            _init_ufuncs()
            return eager_value(node, handed_out)
        if _eager(node, config.threshold()):
            return node._value
        return None
    wc = graph_mod._write_counter
    inputs = node.inputs
    i = inputs[0]
    a = i._value
    if type(a) is not np.ndarray or (i.live and i.stamp != wc and i.op != "placeholder"):
        return None
    thr = _thr
    if thr is None:
        thr = _cache_threshold()
    unary = len(inputs) == 1
    if unary:
        if a.size >= thr:
            return None
    else:
        i = inputs[1]
        b = i._value
        if type(b) is not np.ndarray or (i.live and i.stamp != wc and i.op != "placeholder"):
            return None
        if a.size >= thr or b.size >= thr:
            return None
    try:
        run = _FP_LOCAL.run
    except AttributeError:  # this thread's first call
        run = _fp_thread_runner()
    try:
        out = run(fn, a) if unary else run(fn, a, b)
    except RuntimeError:    # its context is in use (a call from inside it), or fn's own error: the variable
        tok = _ERRVAR.set(_ERR_IGNORE)
        try:
            out = fn(a) if unary else fn(a, b)
        finally:
            _ERRVAR.reset(tok)
    if type(out) is not np.ndarray:     # a 0-d result comes back as a numpy scalar
        out = np.asarray(out)
    shape = node.shape
    if out.shape != shape:
        raise RuntimeError(f"op {node.op} produced shape {out.shape}, expected {shape}")
    if out.size >= thr:     # broadcast past the threshold: the compiled path computes it (this is rare)
        return None
    dtype = node.dtype
    if out.dtype is not dtype and out.dtype != dtype:
        out = out.astype(dtype)
    if not handed_out:
        out.setflags(False)     # (read-only; positional: the keyword costs ~0.15 us more)
    node._value = out
    node.stamp = wc
    return out


def evaluate(roots: list[Node]) -> None:
    """Compute and cache the values of ``roots`` (see module docstring)."""
    if not _NO_HW:
        _init_no_hw()
        _init_ufuncs()
    thr = config.threshold()
    if len(roots) == 1:
        node = roots[0]
        if node.value is not None or _eager(node, thr):
            return
        if node.op == "tuple_get":     # one output of a multi-output op (svd, divmod): that op, then it
            src = node.inputs[0]
            if src.value is None and _eager(src, thr) and _eager(node, thr):
                return
    order = topo_order(roots)
    big = False
    pending = 0
    sthr = config.serial_threshold()
    for n in order:
        if n.value is None:
            pending += 1
            w = _work(n)
            if w >= thr or _handwritten(n) is not None or (w >= sthr and _chained(n)):
                big = True
                break
    if not big:
        # a tiny graph run often becomes one compiled function (the rule models follow too)
        if pending >= whole.MIN_OPS and whole.is_tiny(order) and whole.run_if_hot(order, roots):
            return
        counters["ref_graphs"] += 1
        run_order(order, roots)
        return
    from .plan import build_plan, describe, trace
    tr = trace(roots, order)
    with launch_guard():
        if lower.run_expression_graph(tr.order, roots, tr.key, tr.values):
            return
    with _lock:
        plan = _plans.get(tr.key)
        if plan is None:
            plan = build_plan(tr)
            _plans[tr.key] = plan
            if len(_plans) > _PLAN_CACHE_SIZE:
                _plans.popitem(last=False)
            counters["plans_built"] += 1
            if config.debug():
                print("[mnnjit] " + describe(plan, tr.order), file=sys.stderr)
        else:
            _plans.move_to_end(tr.key)
            counters["plan_cache_hits"] += 1
    before = counters["kernels_compiled"], counters["kernel_disk_hits"]
    with launch_guard():
        plan.run(tr.order, backend(), tr.values)
    if config.debug() and (counters["kernels_compiled"], counters["kernel_disk_hits"]) != before:
        print(f"[mnnjit] kernels compiled: {counters['kernels_compiled'] - before[0]}, "
              f"loaded from the disk cache: {counters['kernel_disk_hits'] - before[1]}", file=sys.stderr)


def explain(*values) -> str:
    """The plan that computing ``values`` (Vars or nodes) would run: steps, fusion groups, kernels.

    Nothing is computed. Counters (``mnnjit.compiler.counters``) report kernels compiled and cache hits.
    """
    from .plan import build_plan, describe, trace
    nodes = [getattr(v, "_node", v) for v in values]  # Vars (the front ends' handle) or nodes
    todo = [n for n in nodes if n.value is None]
    if not todo:
        return "plan: nothing to compute (values are known)"
    tr = trace(todo)
    plan = _plans.get(tr.key) or build_plan(tr)
    text = describe(plan, tr.order)
    text += "\ncounters: " + ", ".join(f"{k}={v}" for k, v in sorted(counters.items()))
    return text
