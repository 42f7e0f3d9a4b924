"""Tracing, passes and execution plans.

``trace(roots)`` collects the nodes not yet computed (stopping at known values) and a structural
key: op, attributes, shapes, dtypes and wiring, but not values, so one plan serves every graph of
the same structure (an nn model's forward with the same input shapes, a loop body run again).

``build_plan`` runs the passes over a trace:

1. common-subexpression elimination: nodes with the same op, attributes and (canonical) inputs
   are computed once;
2. dead-node removal: only what the roots need (after CSE) stays;
3. constant folding / small work: nodes too small to be worth a kernel run on the numpy reference
   path first, so their results enter kernels as leaves (scalars become kernel scalars);
4. fusion (see fusion.py) into groups, each one compiled kernel when its iteration space reaches
   the compile threshold;
5. a memory plan: each intermediate's last use is known, kernel outputs come from a pool of
   buffers released after their last use (views included), so a chain of groups reuses memory.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..graph import Node, topo_order
from ..ops import registry
from .. import settings as config
from .fusion import Group, build_group, duplicable
from .producers import find_producer

#: Nodes with fewer elements than this (output and largest input) never join a kernel group
#: (they are folded on the reference path first).
FOLD_LIMIT = 4096
#: A group of one op (numpy already runs it in one pass) compiles only from this many times the threshold.
SINGLE_OP_FACTOR = 4
#: Hand-written kernels are looked up for nodes with at least this many elements.
KERNEL_MIN = 1024


def _freeze(v: Any) -> Any:
    if isinstance(v, (int, float, str, bool, type(None))):
        return v
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, slice):
        return ("slice", v.start, v.stop, v.step)
    if isinstance(v, np.dtype):
        return ("dtype", v.str)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    if isinstance(v, np.ndarray):
        return ("array", id(v))
    if isinstance(v, (np.generic,)):
        return v.item()
    try:
        hash(v)
        return v
    except TypeError:
        return ("obj", id(v))


def attrs_key(attrs: dict) -> tuple:
    """A hashable key of an attribute dict."""
    if not attrs:
        return ()
    return tuple(sorted((k, _freeze(v)) for k, v in attrs.items()))


@dataclass
class Trace:
    """The nodes needing computation (topological), with wiring by position and a structure key."""

    order: list[Node]
    in_pos: list[tuple[int, ...]]
    is_val: list[bool]
    roots: list[int]
    key: tuple
    #: the known values (None for nodes to compute), read once while tracing: what a plan runs
    #: on, even if another thread's placeholder write makes the nodes read as stale meanwhile
    values: list = field(default_factory=list)


def trace(roots: list[Node], order: list[Node] | None = None) -> Trace:
    """Collect what computing ``roots`` needs (see module docstring); ``order`` if already known."""
    if order is None:
        order = topo_order(roots)
    pos = {id(n): i for i, n in enumerate(order)}
    in_pos: list[tuple[int, ...]] = []
    is_val: list[bool] = []
    key: list = []
    values: list = []
    for n in order:
        v = n.value
        values.append(v)
        if v is not None:
            in_pos.append(())
            is_val.append(True)
            key.append((n.shape, n.dtype.str if n.dtype is not None else None))
            continue
        if n.op == "placeholder":
            raise ValueError(f"placeholder {n.name or ''!r} (shape {list(n.shape)}) has no value: "
                             "write() data into it before reading results that depend on it")
        ins = tuple(pos[id(i)] for i in n.inputs)
        in_pos.append(ins)
        is_val.append(False)
        key.append((n.op, attrs_key(n.attrs), n.shape, n.dtype.str if n.dtype is not None else None, ins))
    rpos = [pos[id(r)] for r in roots]
    return Trace(order, in_pos, is_val, rpos, (tuple(key), tuple(rpos)), values)


def work_size(node: Node) -> int:
    """Elements touched by a node: its output or its largest input, whichever is larger."""
    n = node.size if node.dtype is not None else 0
    for i in node.inputs:
        s = i.size
        if s > n:
            n = s
    return n


@dataclass
class Step:
    """One step of a plan: a fusion group run as a kernel, or a single op."""

    pos: int                       # output position
    kind: str                      # "kernel" | "op" | "alias"
    inputs: tuple[int, ...] = ()   # canonical input positions (op steps)
    group: Group | None = None
    pooled: bool = False           # output buffer taken from (and returned to) the pool
    release: tuple[int, ...] = ()  # positions whose values are dropped after this step
    to_pool: tuple[int, ...] = ()  # positions whose buffers return to the pool after this step


@dataclass
class Plan:
    """A reusable execution plan for one graph structure (see module docstring)."""

    steps: list[Step]
    canon: list[int]
    roots: list[int]
    leaves: list[int]
    n: int
    groups: list[Group] = field(default_factory=list)
    folded: int = 0
    cse_merged: int = 0
    dead: int = 0
    owned: frozenset = frozenset()  # root positions whose value is (a view of) a kernel output of the run

    def run(self, order: list[Node], backend, values: list | None = None) -> None:
        """Execute on the nodes of a trace with this plan's structure on ``backend`` (steps it does
        not take run on the ops' references, on host values); caches the roots' values.
        ``values``: the trace's known values (default: read from the nodes now)."""
        from ..ops.evaluate import compute_node
        vals: list[Any] = [None] * self.n
        for p in self.leaves:
            vals[p] = values[p] if values else order[p].value
        pool: dict[tuple, list] = {}
        for step in self.steps:
            p = step.pos
            if step.kind == "kernel":
                g = step.group
                res = None
                if backend.supports_group(g):
                    out = None
                    if step.pooled:
                        free = pool.get((g.out_shape, g.out_dtype))
                        if free:
                            out = free.pop()
                    if out is None:
                        out = backend.alloc(g.out_shape, g.out_dtype)
                    res = backend.run_group(g, [vals[q] for q in g.leaves], out)
                if res is None:  # the backend does not run it: reference path for its nodes
                    res = self._run_group_ref(g, order, vals, backend)
                else:
                    config.counters["kernel_runs"] += 1
                vals[p] = res
            else:
                node = order[p]
                args = [vals[q] for q in step.inputs]
                out = None
                if step.kind == "op" and work_size(node) >= KERNEL_MIN and registry.get(node.op).kind not in (
                        "elementwise", "movement") and backend.supports_op(node):
                    out = backend.run_op(node, args)
                if out is not None:
                    vals[p] = _check(node, backend.to_host(out))
                    config.counters["handwritten_runs"] += 1
                else:
                    vals[p] = compute_node(node, [_host(backend, a) for a in args])
                    config.counters["ref_nodes"] += 1
            for q in step.to_pool:
                buf = vals[q]
                if buf is not None and not isinstance(buf, tuple):
                    pool.setdefault((tuple(buf.shape), np.dtype(buf.dtype)), []).append(buf)
            for q in step.release:
                vals[q] = None
        for r in self.roots:
            node = order[r]
            c = self.canon[r]
            out = _host(backend, vals[c])
            if isinstance(out, np.ndarray):
                # a view is copied (it may alias a leaf, or keep a larger array alive), except a whole-array
                # view (reshape) of a fresh kernel output of this run
                whole = out.base is not None and c in self.owned and out.size == out.base.size
                # (a leaf passed through writable: memory Var.read() handed out, not to be frozen)
                if not out.flags.c_contiguous or (out.base is not None and not whole) or \
                        (out.flags.writeable and c not in self.owned and any(out is vals[q] for q in self.leaves)):
                    out = np.array(out, order="C")
                out.flags.writeable = False
            node.value = out

    def _run_group_ref(self, g: Group, order: list[Node], vals: list, backend=None) -> np.ndarray:
        from ..ops.evaluate import compute_node
        if backend is not None:
            vals = [_host(backend, v) for v in vals]
        local = {}
        if g.producer is not None:  # the fused producer chain first (its steps were dropped from the plan)
            for m in g.producer.chain:
                node = order[m]
                args = [local[q] if q in local else vals[q] for q in node_inputs(order, m, self)]
                local[m] = compute_node(node, args)
        for m in g.members + ([g.root] if g.spec.reduce else []):
            node = order[m]
            args = [local[q] if q in local else vals[q] for q in node_inputs(order, m, self)]
            local[m] = compute_node(node, args)
        config.counters["ref_groups"] += 1
        return local[g.root]


def _host(backend, v: Any) -> Any:
    """A step value as a host (numpy) value: the transfer at a partition boundary."""
    if v is None or type(v) is np.ndarray:
        return v
    return backend.to_host(v)


def node_inputs(order: list[Node], p: int, plan: Plan) -> list[int]:
    """Canonical input positions of position ``p`` (recomputed from the nodes)."""
    pos = {id(n): i for i, n in enumerate(order)}
    return [plan.canon[pos[id(i)]] for i in order[p].inputs]


def _check(node: Node, out: Any) -> Any:
    if node.dtype is None:
        return tuple(np.asarray(o) for o in out)
    out = np.asarray(out)
    if out.dtype != node.dtype:
        out = out.astype(node.dtype)
    if out.shape != node.shape:
        out = out.reshape(node.shape)
    return out


def build_plan(tr: Trace) -> Plan:
    """Run the passes (module docstring) over a trace."""
    order, in_pos, is_val = tr.order, tr.in_pos, tr.is_val
    n = len(order)
    # 1. CSE
    canon = list(range(n))
    seen: dict[tuple, int] = {}
    cse = 0
    cin: list[tuple[int, ...]] = [()] * n
    for i, node in enumerate(order):
        if is_val[i]:
            continue
        ins = tuple(canon[q] for q in in_pos[i])
        cin[i] = ins
        k = (node.op, attrs_key(node.attrs), node.shape, node.dtype.str if node.dtype is not None else None, ins)
        j = seen.get(k)
        if j is None:
            seen[k] = i
        else:
            canon[i] = j
            cse += 1
    # 2. dead-node removal
    live = [False] * n
    stack = [canon[r] for r in tr.roots]
    while stack:
        i = stack.pop()
        if live[i]:
            continue
        live[i] = True
        stack.extend(cin[i])
    dead = sum(1 for i in range(n) if not live[i] and canon[i] == i)
    consumers: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        if live[i]:
            for q in set(cin[i]):
                consumers[q].append(i)
    roots = {canon[r] for r in tr.roots}
    # 3. folding: small nodes run first on the reference path and act as leaves
    small = [False] * n
    folded = 0
    thr = config.threshold()
    sthr = config.serial_threshold()
    fold_limit = min(FOLD_LIMIT, sthr)  # sthr <= thr
    for i in range(n):
        if live[i] and not is_val[i] and work_size(order[i]) < fold_limit:
            small[i] = True
            folded += 1
    leafish = [is_val[i] or small[i] for i in range(n)]
    # 4. fusion
    assigned: set[int] = set()
    groups: dict[int, Group] = {}
    dup = {i for i in range(n) if live[i] and not leafish[i] and duplicable(i, order, consumers, roots, thr)}
    for i in range(n - 1, -1, -1):
        if not live[i] or leafish[i] or i in assigned:
            continue
        g = build_group(i, order, list(cin), consumers, leafish, roots - {i}, assigned, dup)
        if g is None:
            continue
        # A lone op must be SINGLE_OP_FACTOR times larger than a fused chain to beat numpy (measured);
        # an elementwise chain below the threshold runs as a serial kernel from the serial threshold.
        if g.size == 0:
            continue
        if len(g.ops) == 1:
            if g.size < thr * SINGLE_OP_FACTOR:
                continue
        elif g.size < thr:
            if g.spec.reduce is not None or g.size < sthr:
                continue
            g.serial = True
        groups[i] = g
        assigned.update(g.members)
        assigned.add(i)
    # 4b. producer fusion (producers.py): a resize feeding only a mid-size group is computed inside it
    for g in groups.values():
        if g.serial:
            prod = find_producer(g, order, cin, consumers, roots, leafish)
            if prod is not None:
                g.producer = prod
                g.leaves[prod.leaf] = cin[prod.chain[0]][0]
                g.ops = [order[prod.chain[0]].op] + g.ops
                assigned.update(prod.chain)
    # 5. steps and the memory plan
    steps: list[Step] = []
    base = list(range(n))
    for i in range(n):
        if not live[i] or is_val[i]:
            continue
        if i in groups:
            steps.append(Step(i, "kernel", tuple(groups[i].leaves), groups[i]))
        elif i in assigned:
            continue
        else:
            kind = "op"
            if registry.get(order[i].op).kind == "movement":
                base[i] = base[cin[i][0]]
            steps.append(Step(i, kind, cin[i]))
    last_use: dict[int, int] = {}
    for s_idx, st in enumerate(steps):
        for q in st.inputs:
            last_use[q] = s_idx
    protected = set()
    for r in roots:
        protected.add(base[r])
        protected.add(r)
    base_last: dict[int, int] = {}
    for q, s_idx in last_use.items():
        b = base[q]
        base_last[b] = max(base_last.get(b, -1), s_idx)
    release: dict[int, list[int]] = {}
    to_pool: dict[int, list[int]] = {}
    for q, s_idx in last_use.items():
        if q not in roots:
            release.setdefault(s_idx, []).append(q)
    for st in steps:
        if st.kind == "kernel" and st.pos not in protected and st.pos in base_last:
            st.pooled = True
            to_pool.setdefault(base_last[st.pos], []).append(st.pos)
    for s_idx, st in enumerate(steps):
        st.release = tuple(release.get(s_idx, ()))
        st.to_pool = tuple(to_pool.get(s_idx, ()))
    owned = frozenset(r for r in roots if base[r] in groups)
    return Plan(steps, canon, list(tr.roots), [i for i in range(n) if is_val[i]], n,
                list(groups.values()), folded, cse, dead, owned)


def describe(plan: Plan, order: list[Node]) -> str:
    """A human-readable plan: steps, fusion groups and their kernels."""
    lines = [f"plan: {len(plan.steps)} steps, {len(plan.groups)} fused kernels, {plan.cse_merged} merged by CSE, "
             f"{plan.dead} dead, {plan.folded} small/folded, threshold {config.threshold()}"]
    for st in plan.steps:
        node = order[st.pos]
        if st.kind == "kernel":
            g = st.group
            what = "reduce " if g.spec.reduce else ""
            what += "serial " if g.serial else ""
            lines.append(f"  [{st.pos}] kernel {what}{'+'.join(g.ops)} over {list(g.shape)} "
                         f"({len(g.leaves)} inputs{', pooled output' if st.pooled else ''})")
        else:
            lines.append(f"  [{st.pos}] {node.op} -> {list(node.shape)} {node.dtype}")
    return "\n".join(lines)
