"""A static graph lowered to OpenCL kernel launches (:meth:`OpenCLBackend.lower_graph`).

Walking the graph once (for one input signature and mode):

* elementwise chains with broadcasting and casts, optionally ending in a reduction, become fusion
  groups (the same :class:`~mnnjit.backends.ir.GroupSpec` the compiler builds) rendered as OpenCL C;
* a ``conv_residual`` node of the compiler's fusion pass (a convolution whose only consumer is an
  ``add``, and a ``relu``/``relu6`` that only that add feeds; :class:`FusionRules` accepts those
  whose convolution has a kernel here) runs as the convolution with that epilogue;
* ops with a kernel (:mod:`.launches`) become launches; ``reshape`` is a view of its input's buffer;
* anything else runs on the host: its inputs are downloaded, its numpy reference runs, its result
  is uploaded (these steps are listed by :meth:`CLGraph.explain` and :attr:`CLGraph.fallbacks`).

Buffers stay on the device between steps; each value gets a buffer from a pool planned once by
liveness (a buffer is reused once every value living in it is dead), held for the graph's lifetime,
so forwards allocate nothing. Under precision=low float32 values are stored as half.

A launch that fails on the device (the driver refuses it, or the run fails) is retried step by
step; the failing step then runs on the host for good, with a warning.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any

import numpy as np

from mnnjit.graph import Node, topo_order
from mnnjit.ops import registry
from mnnjit.ops.nn_fused import input_of
from mnnjit.backends.ir import GroupSpec
from . import codegen
from .buffers import CTYPE_NP, DeviceArray, storage_of
from .launches import Binder, Unsupported, build, device_inputs, group_launch, leaf_of, supported
from .runtime import OpenCLBuildError

REDUCE_OPS = frozenset({"reduce_sum", "reduce_mean", "reduce_prod", "reduce_max", "reduce_min"})
_CONV_OPS = ("mnn_conv2d", "conv2d")


class FusionRules:
    """Which candidates of the compiler's fusion pass run as one OpenCL kernel: a convolution with a
    kernel here and no activation of its own takes its residual add (and relu/relu6) as epilogue."""

    def accepts(self, pattern: str, body: tuple) -> bool:
        """Whether ``body`` runs as one launch sequence for ``pattern``."""
        if pattern != "conv_residual" or len(body) < 2 or body[1].op != "add":
            return False
        conv = body[0]
        return conv.op in _CONV_OPS and not conv.attrs.get("act", "") and supported(conv) is None


@dataclass(eq=False)
class Slot:
    """One value of the lowered graph."""

    node: Node
    shape: tuple
    dtype: Any
    ctype: str | None                 # device storage, or None: host only
    const: Any = None                 # a constant's host value
    arr: DeviceArray | None = None    # the device array (set when bound)
    bufid: int = -1
    alias: "Slot | None" = None       # a view of another slot's buffer (reshape)

    def base(self) -> "Slot":
        """The slot owning the buffer this one lives in."""
        s = self
        while s.alias is not None:
            s = s.alias
        return s


@dataclass(eq=False)
class Step:
    """One step: launches on the device, or the node's reference on the host."""

    kind: str                         # "kernel" | "group" | "host" | "view"
    node: Node
    ins: list
    out: Slot
    label: str = ""
    launches: list = field(default_factory=list)
    group: Any = None                 # (spec, params, shape, axes) of a fusion group
    res: Slot | None = None           # residual input of a fused convolution
    act: str | None = None
    reason: str = ""                  # why a host step is not on the device


def _template_ok(node: Node) -> bool:
    opdef = registry.get(node.op)
    if opdef.kind != "elementwise" or not opdef.scalar or node.dtype is None or node.op in codegen.DENY:
        return False
    if node.dtype.name not in codegen.KERNEL_DTYPES:
        return False
    if any(i.dtype is None or i.dtype.name not in codegen.KERNEL_DTYPES for i in node.inputs):
        return False
    if node.op in ("div", "floordiv", "mod") and node.dtype.kind != "f" and node.inputs[0].dtype.kind != "f":
        return False  # integer division by zero: numpy's 0 is not guaranteed
    for name in registry.template_attrs(node.op):
        v = node.attrs.get(name)
        if isinstance(v, bool) or not isinstance(v, (Integral, Real)):
            return False
    spec = GroupSpec(((node.op, node.dtype.name, tuple(("l", k) for k in range(len(node.inputs))),
                       tuple((n, k) for k, n in enumerate(registry.template_attrs(node.op)))),),
                     tuple(i.dtype.name for i in node.inputs),
                     tuple("f" for _ in registry.template_attrs(node.op)), None)
    try:
        codegen.check_spec(spec)
    except codegen.Untranslatable:
        return False
    return True


def _reduce_ok(node: Node) -> bool:
    if node.op not in REDUCE_OPS or node.dtype is None:
        return False
    x = node.inputs[0]
    return (x.dtype is not None and x.dtype.name in codegen.KERNEL_DTYPES and node.dtype.name in codegen.KERNEL_DTYPES
            and "float16" not in (x.dtype.name, node.dtype.name) and 0 not in x.shape and len(x.shape) > 0)


class CLGraph:
    """A graph compiled to OpenCL launches (see the module docstring); ``run(arrays) -> outputs``."""

    def __init__(self, backend: Any, graph: Any, modes: Any = None) -> None:
        self.backend = backend
        self.rt = backend.rt
        self.placeholders = list(graph.placeholders)
        self.out_fmts = list(graph.out_fmts)
        self.half = bool(modes is not None and getattr(modes, "fp16", False))
        self.binder = Binder(self.rt, self.half)
        self.outputs = list(graph.outputs)
        self.order = topo_order(self.outputs, stop_at_values=False)
        self.slots: dict[int, Slot] = {}
        self.steps: list[Step] = []
        self._plan()
        self._plan_buffers()
        self._bind()

    # ------------------------------------------------------------------ planning
    def _slot(self, n: Node) -> Slot:
        return self.slots[id(n)]

    def _new_slot(self, n: Node) -> Slot:
        ctype = storage_of(n.dtype, self.half) if n.dtype is not None else None
        s = Slot(n, tuple(n.shape) if n.dtype is not None else (), n.dtype, ctype)
        self.slots[id(n)] = s
        return s

    def _plan(self) -> None:
        order = self.order
        consumers: dict[int, list[Node]] = {}
        for n in order:
            for i in n.inputs:
                lst = consumers.setdefault(id(i), [])
                if n not in lst:
                    lst.append(n)
        outs = {id(o) for o in self.outputs}
        groups = self._groups(order, consumers, outs)
        in_group = {id(m) for g in groups.values() for m in g[1]}
        for n in order:
            if n.op == "const":
                s = self._new_slot(n)
                s.const = n.value
                continue
            if n.op == "placeholder":
                self._new_slot(n)
                continue
            if id(n) in in_group and id(n) not in groups:
                continue
            out = self._new_slot(n)
            if n.op == "fused_block" and n.attrs["pattern"] == "conv_residual":
                conv, add = n.attrs["body"][:2]
                act = n.attrs["body"][2].op if len(n.attrs["body"]) > 2 else ""
                other = add.inputs[1] if add.inputs[0] is conv else add.inputs[0]
                # (all the block's inputs: a step that leaves the device runs the block's reference)
                self.steps.append(Step("kernel", n, [self._slot(i) for i in n.inputs], out,
                                       f"{conv.op}+add" + (f"+{act}" if act else ""),
                                       res=self._slot(input_of(n, other)), act=act))
                continue
            if id(n) in groups:
                spec, members, leaves, params, shape, axes = groups[id(n)]
                ops = "+".join(m.op for m in members) + (f"+{n.op}" if n.op in REDUCE_OPS and n not in members else "")
                self.steps.append(Step("group", n, [self._slot(x) for x in leaves], out, ops,
                                       group=(spec, params, shape, axes)))
                continue
            why = supported(n)
            if why is None and any(self._slot(n.inputs[j]).ctype is None for j in device_inputs(n)):
                why = "an input lives on the host only"
            if why is None and out.ctype is None:
                why = f"output dtype {n.dtype} is not held on the device"
            if why is None:
                if n.op == "reshape" or (n.op == "convert" and n.shape == n.inputs[0].shape
                                         and _same_layout(n)):
                    src = self._slot(n.inputs[0])
                    if src.ctype == out.ctype and src.const is None:
                        out.alias = src
                        self.steps.append(Step("view", n, [src], out, n.op))
                        continue
                self.steps.append(Step("kernel", n, [self._slot(i) for i in n.inputs], out, n.op))
            else:
                self.steps.append(Step("host", n, [self._slot(i) for i in n.inputs], out, n.op, reason=why))

    def _groups(self, order, consumers, outs) -> dict:
        """Fusion groups: root id -> (spec, member nodes, leaf nodes, params, iteration shape, axes)."""
        groups: dict[int, tuple] = {}
        taken: set[int] = set()
        ok: dict[int, bool] = {}

        def ew(n: Node) -> bool:
            r = ok.get(id(n))
            if r is None:
                r = ok[id(n)] = n.op not in ("const", "placeholder") and _template_ok(n) and \
                    storage_of(n.dtype) is not None
            return r

        for root in reversed(order):
            if id(root) in taken:
                continue
            is_red = _reduce_ok(root)
            if not is_red and not ew(root):
                continue
            shape = tuple(root.inputs[0].shape) if is_red else tuple(root.shape)
            members = {id(root): root} if not is_red else {}
            work = list(root.inputs) if not is_red else [root.inputs[0]]
            while work:
                j = work.pop()
                if id(j) in members or id(j) in taken or id(j) in outs or \
                        j.op in ("const", "placeholder"):
                    continue
                if tuple(j.shape) != shape or not ew(j):
                    continue
                cons = consumers.get(id(j), [])
                if any(id(c) not in members and not (is_red and c is root) for c in cons):
                    continue
                members[id(j)] = j
                work.extend(j.inputs)
            if not members and not is_red:
                continue
            pos = {id(n): k for k, n in enumerate(order)}
            ordered = sorted(members.values(), key=lambda m: pos[id(m)])
            index = {id(m): k for k, m in enumerate(ordered)}
            leaves: list[Node] = []
            leaf_index: dict[int, int] = {}

            def ref(p: Node) -> tuple:
                if id(p) in index:
                    return ("n", index[id(p)])
                if id(p) not in leaf_index:
                    leaf_index[id(p)] = len(leaves)
                    leaves.append(p)
                return ("l", leaf_index[id(p)])

            spec_nodes, params, kinds = [], [], []
            for m in ordered:
                refs = tuple(ref(p) for p in m.inputs)
                attrs = []
                for name in registry.template_attrs(m.op):
                    v = m.attrs[name]
                    attrs.append((name, len(params)))
                    is_int = isinstance(v, Integral)
                    kinds.append("i" if is_int else "f")
                    params.append(int(v) if is_int else float(v))
                spec_nodes.append((m.op, m.dtype.name, refs, tuple(attrs)))
            red, axes = None, None
            if is_red:
                ref(root.inputs[0])
                red = (root.op, root.inputs[0].dtype.name, root.dtype.name)
                axes = tuple(int(a) for a in root.attrs["axes"])
            if any(storage_of(x.dtype) is None for x in leaves):
                continue
            spec = GroupSpec(tuple(spec_nodes), tuple(x.dtype.name for x in leaves), tuple(kinds), red)
            try:
                codegen.check_spec(spec)
            except codegen.Untranslatable:
                continue
            groups[id(root)] = (spec, ordered, leaves, tuple(params), shape, axes)
            taken.add(id(root))
            taken.update(members)
        return {k: v for k, v in groups.items()}

    def _plan_buffers(self) -> None:
        """Buffer ids by liveness: a buffer is free again once every value living in it is dead."""
        last: dict[int, int] = {}
        end = len(self.steps)
        for t, st in enumerate(self.steps):
            for s in st.ins + ([st.res] if st.res is not None else []):
                b = s.base()
                last[id(b)] = max(last.get(id(b), -1), t)
        for o in self.outputs:
            b = self._slot(o).base()
            last[id(b)] = end + 1
        sizes: list[int] = []
        free: list[int] = []
        release: dict[int, list[int]] = {}
        producers = [(-1, self._slot(p)) for p in self.placeholders if id(p) in self.slots]
        producers += [(t, st.out) for t, st in enumerate(self.steps) if st.kind != "view"]
        by_step: dict[int, list[Slot]] = {}
        for t, s in producers:
            by_step.setdefault(t, []).append(s)
        for t in range(-1, end):
            for s in by_step.get(t, []):
                if s.ctype is None or s.alias is not None:
                    continue
                need = max(int(np.prod(s.shape, dtype=np.int64)), 1) * CTYPE_NP[s.ctype].itemsize
                fits = [i for i in free if sizes[i] >= need]
                if fits:
                    bid = min(fits, key=lambda i: sizes[i])
                    free.remove(bid)
                elif free:
                    bid = max(free, key=lambda i: sizes[i])
                    free.remove(bid)
                    sizes[bid] = need
                else:
                    bid = len(sizes)
                    sizes.append(need)
                s.bufid = bid
                release.setdefault(max(last.get(id(s), t), t), []).append(bid)
            free.extend(release.pop(t, []))
        self._sizes = sizes

    # ------------------------------------------------------------------ binding
    def _bind(self) -> None:
        rt = self.rt
        self._bufs = [rt.buffer(n) for n in self._sizes]
        for s in self.slots.values():
            if s.ctype is None or s.arr is not None:
                continue
            if s.const is not None:
                continue  # constants are uploaded by the steps that read them
            b = s.base()
            if b.bufid >= 0:
                s.arr = DeviceArray(self._bufs[b.bufid], s.shape, s.dtype, s.ctype)
        for st in self.steps:
            if st.kind in ("kernel", "group"):
                try:
                    st.launches = self._launches(st)
                except OpenCLBuildError:
                    raise
                except (Unsupported, self.rt.cl.Error, TypeError, ValueError) as exc:
                    self._to_host(st, f"{type(exc).__name__}: {exc}", warn=not isinstance(exc, Unsupported))

    def _const_arr(self, s: Slot) -> DeviceArray:
        """A constant read by a device step, uploaded once in its storage type."""
        if s.arr is None:
            host = np.asarray(s.const)
            buf = self.binder.const(("slot", id(s)), host, CTYPE_NP[s.ctype])
            s.arr = DeviceArray(buf, s.shape, s.dtype, s.ctype)
        return s.arr

    def _dev(self, s: Slot) -> DeviceArray:
        if s.const is not None:
            return self._const_arr(s)
        if s.arr is None:
            raise Unsupported(f"value of {s.node.op} is not on the device")
        return s.arr

    def _launches(self, st: Step) -> list:
        b = self.binder
        if st.kind == "group":
            spec, params, shape, axes = st.group
            leaves = [leaf_of(self._dev(s), shape) for s in st.ins]
            return group_launch(b, spec, params, shape, axes, leaves, st.out.arr)
        n = st.node
        if st.res is not None:
            from .launches import conv_launches
            conv = n.attrs["body"][0]
            x = self._dev(self._slot(input_of(n, conv.inputs[0])))
            return conv_launches(b, conv, x, st.out.arr, self._dev(st.res), st.act)
        dev = set(device_inputs(n))
        ins = [self._dev(s) if k in dev else None for k, s in enumerate(st.ins)]
        return build(b, n, ins, st.out.arr)

    def _to_host(self, st: Step, why: str, warn: bool = True) -> None:
        if st.res is not None:  # a fused convolution + add: the add's reference needs the conv's value
            why = "fused convolution: " + why
        st.kind, st.launches, st.reason = "host", [], why
        if warn:
            warnings.warn(f"OpenCL: {st.label} ({st.node.op} -> {list(st.out.shape)}) fails on "
                          f"{self.rt.info.name}; it runs on the CPU: {why}", RuntimeWarning, stacklevel=3)

    # ------------------------------------------------------------------ running
    @property
    def fallbacks(self) -> list[tuple[str, str]]:
        """(step label, reason) of every step that runs on the host."""
        return [(st.label, st.reason) for st in self.steps if st.kind == "host"]

    def explain(self) -> str:
        """The steps: kernels launched, views, and host steps with the reason."""
        lines = [f"opencl graph on {self.rt.info.name}: {len(self.steps)} steps, "
                 f"{sum(len(s.launches) for s in self.steps)} launches, {len(self.fallbacks)} on the host, "
                 f"{len(self._sizes)} buffers ({sum(self._sizes) / 2 ** 20:.1f} MiB), "
                 f"{'half' if self.half else 'float'} storage"]
        for st in self.steps:
            shape = list(st.out.shape)
            if st.kind == "host":
                lines.append(f"  HOST   {st.label} -> {shape}: {st.reason}")
            elif st.kind == "view":
                lines.append(f"  view   {st.label} -> {shape}")
            else:
                names = ",".join(sorted({l.name.split(':')[0] for l in st.launches})) or "-"
                lines.append(f"  {st.kind:6s} {st.label} -> {shape} [{names}]")
        return "\n".join(lines)

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """Outputs (host arrays) for input arrays in placeholder order."""
        rt = self.rt
        with rt.lock:
            try:
                return self._run(arrays, careful=False)
            except (rt.cl.Error, RuntimeError) as exc:
                if isinstance(exc, OpenCLBuildError):
                    raise
                rt.finish_quietly()
                return self._run(arrays, careful=True)

    def _run(self, arrays: list[np.ndarray], careful: bool) -> list[np.ndarray]:
        rt = self.rt
        host: dict[int, Any] = {}
        keep = []
        for p, a in zip(self.placeholders, arrays):
            s = self.slots.get(id(p))
            if s is None:
                continue
            a = np.asarray(a)
            host[id(s)] = a
            if s.ctype is not None and s.arr is not None and a.size:
                st = np.ascontiguousarray(a, dtype=CTYPE_NP[s.ctype])
                keep.append(st)
                rt.upload(s.arr.buf, st, blocking=False)
        for st in self.steps:
            if st.kind == "view":
                continue
            if st.kind == "host":
                self._run_host(st, host)
                continue
            try:
                for l in st.launches:
                    rt.launch(l.kernel, l.gsize, l.lsize)
                if careful:
                    rt.finish()
            except rt.cl.Error as exc:
                if not careful:
                    raise
                rt.finish_quietly()
                self._to_host(st, f"{type(exc).__name__}: {exc}")
                self._run_host(st, host)
        outs = []
        for o in self.outputs:
            s = self._slot(o)
            outs.append(self._host_value(s, host))
        rt.finish()
        del keep
        res = []
        for o, v in zip(self.outputs, outs):
            v = np.asarray(v)
            if o.dtype is not None and v.dtype != o.dtype:
                v = v.astype(o.dtype)
            elif not v.flags.owndata:
                v = v.copy()
            res.append(v)
        return res

    def _host_value(self, s: Slot, host: dict) -> Any:
        v = host.get(id(s))
        if v is not None:
            return v
        if s.const is not None:
            return s.const
        if s.arr is None:
            raise RuntimeError(f"value of {s.node.op} was not computed")
        out = np.empty(s.shape, CTYPE_NP[s.ctype])
        if out.size:
            self.rt.download(out, s.arr.buf, blocking=True)
        if s.dtype is not None and out.dtype != s.dtype:
            out = out.astype(s.dtype)
        host[id(s)] = out
        return out

    def _run_host(self, st: Step, host: dict) -> None:
        n = st.node
        args = [self._host_value(s, host) for s in st.ins]
        with np.errstate(all="ignore"):
            v = registry.get(n.op).ref(args, n.attrs)
        s = st.out
        if s.dtype is not None:
            v = np.asarray(v)
            if v.dtype != s.dtype:
                v = v.astype(s.dtype)
            if v.shape != s.shape:
                v = v.reshape(s.shape)
        host[id(s)] = v
        if s.ctype is not None and s.arr is not None and v.size:
            self.rt.upload(s.arr.buf, np.ascontiguousarray(v, dtype=CTYPE_NP[s.ctype]), blocking=True)


def _same_layout(node: Node) -> bool:
    src, dst = node.attrs.get("src"), node.attrs.get("dst")
    return len(node.shape) != 4 or (src == "NHWC") == (dst == "NHWC")
