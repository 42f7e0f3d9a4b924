"""Partitioning a static graph between a delegate backend (a vendor SDK) and the CPU.

A *delegate backend* (a :class:`~mnnjit.backends.base.Backend` with ``lowers_every_graph = True``,
such as the NPU bridge) does not take a whole graph: it claims the ops its SDK supports. This module
asks it which (:meth:`claimer`), cuts the graph into **maximal claimed subgraphs with no cycle
between partitions**, has each claimed partition compiled by the backend's
:meth:`~mnnjit.backends.base.Backend.lower_graph` and leaves the rest to the CPU backend through the
compiler's normal path (the CPU's whole-graph lowering when it takes the segment, else step plans).
Values cross between partitions as host arrays: those are the transfers at the boundaries.

The protocol a delegate backend offers (duck-typed, so the compiler never imports one):

* ``lowers_every_graph = True``
* ``claimer(graph) -> Callable[[Node], str | None] | None``: the per-op claim predicate (None for
  a claimed op, else the reason it is refused), or None when the delegate cannot run at all (the
  backend has warned; the whole graph stays on the CPU);
* ``partition_limits() -> (min_nodes_per_partition, max_partitions or None)``;
* ``lower_graph(partition, modes)``: a claimed partition compiled, or None when the SDK failed
  (the backend has warned naming the ops; the partition runs on the CPU).

Cutting: a Kahn topological walk that keeps taking ready ops of the kind it is on (claimed or not)
and starts a new segment only when none is ready. Every segment depends only on earlier ones, so
the segments form a chain and no cycle can arise between partitions. Claimed segments with fewer
ops than ``min_nodes_per_partition``, and the smallest ones beyond ``max_partitions``, are given
back to the CPU and the walk is redone until the cut is stable.
"""
from __future__ import annotations

import heapq
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .. import settings
from ..backends import registry
from ..backends.base import GraphIR
from ..graph import Node, bump_write_counter, topo_order

Claim = Callable[[Node], "str | None"]
_SOURCES = ("const", "placeholder")


@dataclass
class Segment:
    """One piece of a cut graph: ops run together on the delegate (``delegated``) or the CPU."""

    index: int
    delegated: bool
    nodes: list[Node]                                  # compute nodes in evaluation order
    inputs: list[Node] = field(default_factory=list)   # non-constant nodes it reads from outside
    outputs: list[Node] = field(default_factory=list)  # its nodes read by later segments or returned

    @property
    def ops(self) -> list[str]:
        """The op names of its nodes, in order."""
        return [n.op for n in self.nodes]


@dataclass
class Cut:
    """A graph cut into segments, with the reason each refused op was refused."""

    segments: list[Segment]
    refusals: list[tuple[Node, str]]     # (node, why the delegate does not run it)

    @property
    def partitions(self) -> list[Segment]:
        """The delegated segments."""
        return [s for s in self.segments if s.delegated]


def _schedule(compute: list[Node], claimed: set[int]) -> list[list[Node]]:
    """Segments (node lists) of a kind-preserving Kahn walk over ``compute`` (see module docstring)."""
    pos = {id(n): k for k, n in enumerate(compute)}
    users: dict[int, list[Node]] = {id(n): [] for n in compute}
    indeg: dict[int, int] = {}
    for n in compute:
        deps = {id(i) for i in n.inputs if id(i) in pos}
        indeg[id(n)] = len(deps)
        for d in deps:
            users[d].append(n)
    ready: dict[bool, list] = {True: [], False: []}
    for n in compute:
        if indeg[id(n)] == 0:
            heapq.heappush(ready[id(n) in claimed], (pos[id(n)], id(n), n))
    segments: list[list[Node]] = []
    kind: bool | None = None
    while ready[True] or ready[False]:
        if kind is None or not ready[kind]:
            if kind is None:  # start with whichever kind comes first in the original order
                kind = bool(ready[True]) and (not ready[False] or ready[True][0][0] < ready[False][0][0])
            else:
                kind = not kind
            segments.append([])
        _, _, n = heapq.heappop(ready[kind])
        segments[-1].append(n)
        for u in users[id(n)]:
            indeg[id(u)] -= 1
            if indeg[id(u)] == 0:
                heapq.heappush(ready[id(u) in claimed], (pos[id(u)], id(u), u))
    return segments


def cut(graph: GraphIR, claim: Claim, min_nodes: int = 1, max_partitions: int | None = None) -> Cut:
    """``graph`` cut into delegated and CPU segments (see module docstring)."""
    if min_nodes < 1:
        raise ValueError(f"min_nodes_per_partition must be >= 1, got {min_nodes}")
    if max_partitions is not None and max_partitions < 0:
        raise ValueError(f"max_partitions must be >= 0 or None, got {max_partitions}")
    order = topo_order(list(graph.outputs), stop_at_values=False)
    compute = [n for n in order if n.op not in _SOURCES]
    reasons: dict[int, str] = {}
    for n in compute:
        try:
            why = claim(n)
        except Exception as exc:  # a vendor predicate that raises refuses the op, never the model
            why = f"claim predicate raised {type(exc).__name__}: {exc}"
        if why is not None:
            reasons[id(n)] = str(why)
    claimed = {id(n) for n in compute if id(n) not in reasons}
    while True:
        segs = _schedule(compute, claimed)
        delegated = [s for s in segs if id(s[0]) in claimed]
        small = [s for s in delegated if len(s) < min_nodes]
        if small:
            for s in small:
                for n in s:
                    claimed.discard(id(n))
                    reasons[id(n)] = (f"left on the CPU: its partition would hold {len(s)} op(s), fewer than "
                                      f"min_nodes_per_partition={min_nodes}")
            continue
        if max_partitions is not None and len(delegated) > max_partitions:
            ranked = sorted(range(len(delegated)), key=lambda k: (-len(delegated[k]), k))
            for k in ranked[max_partitions:]:
                for n in delegated[k]:
                    claimed.discard(id(n))
                    reasons[id(n)] = (f"left on the CPU: a smaller partition beyond "
                                      f"max_partitions={max_partitions}")
            continue
        break
    segments = [Segment(k, id(s[0]) in claimed, s) for k, s in enumerate(segs)]
    _wire(segments, list(graph.outputs))
    refusals = [(n, reasons[id(n)]) for n in compute if id(n) in reasons]
    return Cut(segments, refusals)


def _wire(segments: list[Segment], outputs: list[Node]) -> None:
    """Fill each segment's inputs (read from outside, in first-use order) and outputs."""
    owner = {id(n): s.index for s in segments for n in s.nodes}
    wanted = {id(o) for o in outputs}
    read_outside: set[int] = set()
    for s in segments:
        seen: set[int] = set()
        for n in s.nodes:
            for i in n.inputs:
                if i.op == "const" or owner.get(id(i)) == s.index or id(i) in seen:
                    continue
                seen.add(id(i))
                s.inputs.append(i)
                read_outside.add(id(i))
    for s in segments:
        s.outputs = [n for n in s.nodes if id(n) in read_outside or id(n) in wanted]


def subgraph(seg: Segment) -> GraphIR:
    """A segment as a static graph of its own: a placeholder per outside input, consts shared,
    its nodes copied onto the new inputs."""
    new: dict[int, Node] = {}
    placeholders = []
    for k, i in enumerate(seg.inputs):
        p = Node("placeholder", (), {}, i.shape, i.dtype, i.fmt, name=f"in{k}")
        new[id(i)] = p
        placeholders.append(p)
    for n in seg.nodes:
        ins = tuple(i if i.op == "const" else new[id(i)] for i in n.inputs)
        new[id(n)] = Node(n.op, ins, n.attrs, n.shape, n.dtype, n.fmt, name=n.name)
    outs = [new[id(o)] for o in seg.outputs]
    return GraphIR(placeholders, outs, [("NCHW" if o.fmt == "NC4HW4" else o.fmt) for o in outs])


# ---------------------------------------------------------------------------- running a cut graph
class _CPUSegment:
    """A segment run on the CPU backend: its whole-graph lowering when the CPU takes it, else the
    compiler's step plans (the executor) on the segment's own nodes."""

    def __init__(self, graph: GraphIR, modes: Any) -> None:
        self.graph = graph
        self.compiled = None
        self._lock = threading.Lock()
        from .lower import lower
        try:
            cpu = registry.get("cpu")
        except Exception:  # noqa: BLE001 - no Numba: the reference path below still runs
            cpu = None
        if cpu is not None:
            with registry.using("cpu"):
                self.compiled = lower(graph, modes, backend=cpu)

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        if self.compiled is not None:
            with registry.using("cpu"):
                return self.compiled.run(arrays)
        from .executor import evaluate
        with self._lock:  # the segment's placeholders are shared nodes
            for p, a in zip(self.graph.placeholders, arrays):
                p.value = a
            bump_write_counter()
            with registry.using("cpu"):
                evaluate(list(self.graph.outputs))
            return [o.value for o in self.graph.outputs]


class DelegatedGraph:
    """A static graph cut between a delegate and the CPU (what :func:`lower_partitioned` returns):
    ``run`` feeds each segment in order and passes values across the boundaries."""

    def __init__(self, graph: GraphIR, the_cut: Cut, units: list, backend_desc: str) -> None:
        self.placeholders = list(graph.placeholders)
        self.out_fmts = list(graph.out_fmts)
        self.cut = the_cut
        self.backend_desc = backend_desc
        self._units = units          # (segment, runner, on_delegate)
        slot: dict[int, int] = {id(p): k for k, p in enumerate(self.placeholders)}
        for seg, _, _ in units:
            for n in seg.outputs:
                slot.setdefault(id(n), len(slot))
        self._n = len(slot)
        self._plan = [(runner, [slot[id(i)] for i in seg.inputs], [slot[id(o)] for o in seg.outputs])
                      for seg, runner, _ in units]
        # graph outputs: a slot, or a constant's value
        self._outs = [(slot[id(o)], None) if id(o) in slot else (None, o.value) for o in graph.outputs]

    @property
    def partitions(self) -> list[Segment]:
        """The segments that run on the delegate (after any SDK failure sent one back)."""
        return [seg for seg, _, on in self._units if on]

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """Outputs for input arrays in placeholder order."""
        vals: list[Any] = [None] * self._n
        vals[:len(arrays)] = arrays
        for runner, ins, outs in self._plan:
            res = runner.run([vals[i] for i in ins])
            for s, v in zip(outs, res):
                vals[s] = v
        return [vals[s] if s is not None else v for s, v in self._outs]

    def explain(self) -> str:
        """The partitions, the CPU segments between them and why each op left on the CPU was refused."""
        failed = {seg.index for seg, _, on in self._units if seg.delegated and not on}
        return describe_cut(self.cut, self.backend_desc, failed)


def describe_cut(the_cut: Cut, backend_desc: str, failed: set[int] = frozenset()) -> str:
    """Text for ``explain``: each segment (where it runs, its ops), then every refused op and why;
    ``failed`` are the indices of claimed segments the SDK failed to compile."""
    segs = the_cut.segments
    on = [s for s in segs if s.delegated and s.index not in failed]
    lines = [f"delegate {backend_desc}: {len(on)} partition(s) on the delegate, "
             f"{len(segs) - len(on)} segment(s) on the CPU"]
    for seg in segs:
        where = ("CPU (the SDK failed to compile it)" if seg.index in failed else
                 "delegate" if seg.delegated else "CPU")
        lines.append(f"  segment {seg.index} [{where}] {len(seg.nodes)} op(s): {', '.join(seg.ops)}")
    if the_cut.refusals:
        lines.append("refused ops:")
        for n, why in the_cut.refusals:
            lines.append(f"  {n.op} {list(n.shape)} {n.dtype}: {why}")
    return "\n".join(lines)


def explain_graph(graph: GraphIR, backend: Any) -> str:
    """How delegate backend ``backend`` would cut ``graph`` (nothing is compiled)."""
    claim = backend.claimer(graph)
    if claim is None:
        return f"delegate {backend.describe()}: not available, everything runs on the CPU"
    min_nodes, max_parts = backend.partition_limits()
    return describe_cut(cut(graph, claim, min_nodes, max_parts), backend.describe())


def lower_partitioned(graph: GraphIR, backend: Any, modes: Any = None) -> DelegatedGraph | None:
    """``graph`` cut between delegate backend ``backend`` and the CPU, each claimed partition compiled
    by ``backend``; None when nothing is delegated (the graph then stays on the CPU's normal path)."""
    claim = backend.claimer(graph)
    if claim is None:
        return None
    min_nodes, max_parts = backend.partition_limits()
    the_cut = cut(graph, claim, min_nodes, max_parts)
    if not the_cut.partitions:
        settings.counters["npu_graphs_on_cpu"] += 1
        return None
    units = []
    for seg in the_cut.segments:
        sub = subgraph(seg)
        runner = backend.lower_graph(sub, modes) if seg.delegated else None
        on = runner is not None
        if runner is None:
            runner = _CPUSegment(sub, modes)
        units.append((seg, runner, on))
    if not any(on for _, _, on in units):
        return None
    return DelegatedGraph(graph, the_cut, units, backend.describe())
