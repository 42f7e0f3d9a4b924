"""The CPU backend's graph lowering: a static graph (a model forward or an expression graph) as a fixed
list of Numba kernel calls on preallocated buffers.

:class:`NetPlan` walks a :class:`mnnjit.backends.base.GraphIR` (from ``compiler.lower``, after the compiler's
fusion pass: ``compiler/fuse_blocks.py``) once, for one input signature, mode and thread count, and
turns every node into a step:

* convolutions (``mnn_conv2d``, or ``conv2d`` with constant weights:
  :func:`mnnjit.ops.conv_info.conv_params`), prepared by :class:`.conv_kernels.ConvKernels` (the rules the
  fusion pass asked, handed back in ``GraphIR.fusion``) -> :class:`mnnjit.backends.cpu.gemm.conv.ConvGemm`
  (the register-blocked micro-kernel, bias and relu/relu6 fused; weights packed once as float32
  panels, or kept as int8/4-bit codes under memory=low), :class:`.depthwise.planes.Depthwise`, or
  Winograd for 3x3 stride-1 layers when :mod:`.gemm.winograd` says so;
* ``fused_block`` nodes, one step each: ``expand_dw`` -> :class:`.depthwise.expand_dw.ExpandDepthwise`
  (step ``xdw``); ``dw_pointwise`` / ``expand_dw_pointwise`` -> :class:`.depthwise.dw_pointwise.DepthwisePointwise`
  (step ``dwpw``; float32 or float16 activations, float or quantized weights; the convolution
  producing the depthwise input runs inside it: MobileNetV2's stem, or a whole inverted residual
  block); ``conv_residual`` -> the GEMM, Winograd or ``dwpw`` kernel adding the residual, then the
  relu/relu6, per output block (step ``convres``); ``add_act`` -> the add kernel with its activation;
* ``add`` of two same-shape tensors; lone activations; max pooling (:mod:`.pool`), average pooling,
  global average pooling;
* a float classifier's ``matmul_ex`` (one constant 2-D operand, 1-4 rows on the other) ->
  :class:`.gemv.Gemv` (weights re-laid once, row blocks split over the threads, float16 weights
  under precision=low);
* anything else -> the op's hand-written kernel (:mod:`.kernels`) when it has one, else its numpy
  reference, on float32 values.

Buffers: every kernel output is assigned, at build, a buffer from a pool (reused once every value
living in it, views made by reference steps included, is dead; the most recently freed one that is
large enough, so a step writes into lines still in cache; a Winograd step's workspace is a
pooled buffer too, one still in cache; all carved from one huge-page arena); buffers large
outputs may alias are fresh per
forward, small outputs (:data:`COPIED_OUTPUT_BYTES`) are copied out of the pool, so results a
caller keeps are never overwritten. Activations are float32,
or float16 storage under precision=low (converted at reference steps and at the outputs).

Threads: the buffers and the launches bound to them form an :class:`_Arena`. Each forward takes
an idle arena (a new one when every arena is running), so any number of threads may run one plan,
sharing its packed weights and compiled kernels; a plan keeps as many arenas as forwards ever ran
at once (``max_arenas`` caps them: 1 is a lock around one arena).

This module imports numba: import it lazily.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
from numba import get_num_threads

from mnnjit.concurrency import launch_guard
from mnnjit.graph import Node, topo_order
from mnnjit.settings import counters
from mnnjit.ops.conv_info import conv_params
from mnnjit.ops import registry
from mnnjit.backends.cpu import cnn_steps as K
from mnnjit.backends.cpu.handwritten import registry as hand_kernels
from mnnjit.backends.cpu.runtime.blas import single_threaded_blas
from mnnjit.backends.cpu.conv_kernels import ConvKernels, Winograd
from mnnjit.backends.cpu.gemm.conv import ConvGemm
from mnnjit.backends.cpu.depthwise.dw_pointwise import DepthwisePointwise
from mnnjit.ops.nn_fused import input_of
from mnnjit.backends.cpu.fp16 import to_f16, to_f32
from mnnjit.backends.cpu.runtime.launch import bind_launch
from mnnjit.backends.cpu.runtime.step_fallback import tier_steps
from mnnjit.backends.cpu.pool import max_pool2d

__all__ = ["NetPlan", "Step"]

_ACTS = ("relu", "relu6", "sigmoid", "tanh", "hard_swish", "silu")
#: outputs up to this size live in pooled buffers and are copied out at the end of a forward
COPIED_OUTPUT_BYTES = 256 * 1024
#: step kinds whose op describes its call as ``launch(*arrays)`` (see :func:`.launch.bind_launch`)
_LAUNCHED = ("conv", "dw", "xdw", "dwpw", "fc", "convres", "wino")


@dataclass
class Step:
    """One step of a :class:`NetPlan`: a kernel call, or an op's reference (``kind == "ref"``).

    ``kind`` names the kernel (``conv``, ``dw``, ``wino``, ``xdw``, ``dwpw``, ``convres``, ``fc``, ``add``,
    ``act``, ``unary``, ``gap``, ``maxpool``, ``pool``, ``ref``); ``op`` is the prepared kernel object
    (ConvGemm, Depthwise, Winograd, ExpandDepthwise, DepthwisePointwise, Gemv), the kernel's constant
    argument (an activation code, a pooling geometry) or, for ``ref``, the function; ``ins`` are the
    value slots read (``add`` / ``convres``: the second is the other addend, the residual), ``shape`` the
    output's, ``out`` the slot written; ``attrs`` and ``dtype`` are a reference step's op attributes and
    output dtype."""

    kind: str
    op: Any
    ins: Tuple[int, ...]
    shape: Tuple[int, ...]
    out: int = -1
    attrs: Optional[dict] = None
    dtype: Any = None


class NetPlan:
    """A plan's graph as kernel steps (see the module docstring). ``run(arrays)`` -> outputs."""

    def __init__(self, plan: Any, modes: Any = None, threads: Optional[int] = None) -> None:
        self.plan = plan
        self.placeholders = plan.placeholders
        self.out_fmts = list(plan.out_fmts)
        self.fp16 = bool(modes is not None and modes.fp16)
        self.keep_quantized = bool(modes is not None and modes.keep_quantized)
        self.act_dtype = np.dtype(np.float16) if self.fp16 else np.dtype(np.float32)
        self.threads = threads or get_num_threads()
        self.weights: List[Any] = []
        #: the prepared convolutions (the compiler's fusion pass asked these rules, graph.fusion)
        fusion = getattr(plan, "fusion", None)
        self.convs = fusion if isinstance(fusion, ConvKernels) else ConvKernels(modes, self.threads)
        hand_kernels.load_kernel_modules()
        order = topo_order(plan.outputs, stop_at_values=False)
        self.order = order
        slot = {id(n): k for k, n in enumerate(order)}
        consumers: Dict[int, List[Node]] = {}
        for n in order:
            for i in n.inputs:
                consumers.setdefault(id(i), []).append(n)
        outputs = {id(o) for o in plan.outputs}
        self.init: List[Any] = [None] * len(order)
        self.feed_slots = [slot.get(id(p)) for p in plan.placeholders]
        #: node id -> value slot (a folded node shares the slot of the step computing it)
        self._slot = slot
        self.steps = steps = []
        for k, n in enumerate(order):
            if n.op == "const":
                self.init[k] = n.value
                continue
            if n.op == "placeholder":
                continue
            step = self._kernel_step(n, slot, consumers, outputs)
            if step is None:
                # an op with a hand-written kernel (resize, pooling the steps do not take, ...)
                # runs it on the reference step's float32 values: DeepLabV3's final bilinear
                # resize to 21x192x320, 6.5 -> 1.0 ms
                fn = hand_kernels.lookup(n) or registry.get(n.op).ref
                step = Step("ref", fn, tuple(slot[id(i)] for i in n.inputs), tuple(n.shape), attrs=n.attrs,
                            dtype=n.dtype)
            step.out = k
            steps.append(step)
        self.out_slots = [slot[id(o)] for o in plan.outputs]
        self.out_shapes = [tuple(o.shape) for o in plan.outputs]
        self._drop_output_reshapes(consumers, outputs)
        self.steps = steps
        self._plan_buffers()
        #: most arenas kept (None: as many as forwards run at once; 1: forwards take turns)
        self.max_arenas: Optional[int] = None
        self._arena_cond = threading.Condition()
        self._n_arenas = 1
        first = self._new_arena(first=True)
        self._free: List[_Arena] = [first]
        # the first arena's buffers and bound calls (tests, benchmarks, ``profile``)
        self._raw, self.buffers, self._calls = first.raw, first.buffers, first.calls
        #: slot -> storage view of the pooled buffer a kernel step writes it into (first arena)
        self._static_sv = first.static_sv

    # ------------------------------------------------------------------ building
    def _drop_output_reshapes(self, consumers, outputs) -> None:
        """An output made by a ``reshape`` reference step of a float32 kernel step's value that
        nothing else reads: the output slot becomes that value's (``run`` gives it the output's
        shape) and the step goes. (Right after a classifier has streamed its weights through
        the caches, the Python of one more step measured ~50 us.)"""
        for j, s in enumerate(self.out_slots):
            pos = next((t for t, st in enumerate(self.steps) if st.out == s), None)
            if pos is None or self.steps[pos].kind != "ref" or self.order[s].op != "reshape":
                continue
            src = self.order[s].inputs[0]
            k = self.steps[pos].ins[0]
            if id(src) in outputs or len(consumers.get(id(src), [])) != 1 or \
                    src.dtype != np.float32 or \
                    not any(st.kind != "ref" and st.out == k for st in self.steps):
                continue
            self.steps.pop(pos)
            self.out_slots[j] = k

    def _kernel_step(self, n: Node, slot, consumers, outputs) -> Optional[Step]:
        ins = n.inputs
        if n.dtype != np.float32:
            return None
        if n.op == "fused_block":
            return self._block_step(n, slot)
        if conv_params(n) is not None and min(n.attrs["pads"]) >= 0:
            op = self.convs.op(n)
            kind = self.convs.kind(n)
            self.weights.append(self.convs.weights_of(op))
            if kind == "wino":
                return Step("wino", op, (slot[id(ins[0])],), tuple(n.shape))
            return Step("dw" if kind == "dw" else "conv", op, (slot[id(ins[0])],), tuple(op.out_shape))
        if n.op == "add" and len(ins) == 2 and ins[0].shape == ins[1].shape == n.shape and \
                ins[0].dtype == ins[1].dtype == np.float32:
            return Step("add", K._act_code(""), (slot[id(ins[0])], slot[id(ins[1])]), tuple(n.shape))
        if n.op == "matmul_ex":
            return self._fc(n, slot, consumers, outputs)
        if n.op in _ACTS and ins[0].dtype == np.float32:
            return Step("act", K._act_code(n.op), (slot[id(ins[0])],), tuple(n.shape))
        if n.op in K.UNARY_FORMS and ins[0].dtype == np.float32:
            return Step("unary", K.UNARY_FORMS[n.op], (slot[id(ins[0])],), tuple(n.shape))
        if n.op == "pool2d" and len(n.shape) == 4 and n.attrs["kind"] in ("max", "avg"):
            a = n.attrs
            x = ins[0]
            if n.shape[2:] == (1, 1) and tuple(a["kernel"]) == tuple(x.shape[2:]) and \
                    not any(a["pads"]) and a["kind"] == "avg":
                return Step("gap", None, (slot[id(x)],), tuple(n.shape))
            if min(a["pads"]) < 0:
                return None
            (kh, kw), (sh, sw), p = a["kernel"], a["stride"], a["pads"]
            if a["kind"] == "max":
                return Step("maxpool", ((kh, kw), (sh, sw), tuple(p)), (slot[id(x)],), tuple(n.shape))
            return Step("pool", (False, kh, kw, sh, sw, p[0], p[2], p[1], p[3],
                                 bool(a.get("count_include_pad", True))), (slot[id(x)],), tuple(n.shape))
        return None

    def _block_step(self, n: Node, slot) -> Optional[Step]:
        """A ``fused_block`` node (the compiler's fusion pass, with :class:`.conv_kernels.ConvKernels`
        accepting it) as one kernel step; None (its reference step) for a pattern without one."""
        pattern, body = n.attrs["pattern"], n.attrs["body"]

        def src(orig: Node) -> int:
            return slot[id(input_of(n, orig))]

        if pattern == "add_act":
            add, act = body
            return Step("add", K._act_code(act.op), (src(add.inputs[0]), src(add.inputs[1])),
                        tuple(n.shape))
        for b in body:
            if b.op != "add" and b.op not in _ACTS:
                self.weights.append(self.convs.weights_of(self.convs.op(b)))
        if pattern == "expand_dw":
            op = self.convs.fused_op(pattern, body)
            return Step("xdw", op, (src(body[0].inputs[0]),), tuple(op.out_shape))
        if pattern in ("dw_pointwise", "expand_dw_pointwise"):
            op = self.convs.fused_op(pattern, body)
            return Step("dwpw", op, (src(body[0].inputs[0]),), tuple(op.out_shape))
        if pattern == "conv_residual":
            op, inner = self.convs.conv_part(body)
            add = body[len(inner)]
            act = body[-1].op if body[-1] is not add else ""
            op.act = K._act_code(act) if isinstance(op, (ConvGemm, DepthwisePointwise)) else act
            other = add.inputs[1] if add.inputs[0] is inner[-1] else add.inputs[0]
            return Step("convres", op, (src(inner[0].inputs[0]), src(other)), tuple(n.shape))
        return None

    def _fc(self, n: Node, slot, consumers, outputs) -> Optional[Step]:
        """A ``matmul_ex`` with one constant float32 2-D operand and at most
        :data:`.gemv.MAX_ROWS` rows on the other (a classifier) -> a :class:`.gemv.Gemv` step;
        its constant leaves the plan's values when only this step reads it. Quantized
        constants (memory=low) and other matmuls stay reference steps."""
        from mnnjit.backends.cpu.gemm.gemv import matmul_gemv
        ins = n.inputs
        if len(ins) not in (2, 3):
            return None
        consts = [i for i in (0, 1) if ins[i].op == "const" and isinstance(ins[i].value, np.ndarray)]
        if len(consts) != 1 or ins[1 - consts[0]].dtype != np.float32:
            return None
        c = consts[0]
        bias = None
        if len(ins) == 3:
            if ins[2].op != "const" or not isinstance(ins[2].value, np.ndarray):
                return None
            bias = ins[2].value
        x = ins[1 - c]
        # precision=low: float16 weights (the GEMV streams them from memory: half the bytes)
        op = matmul_gemv(ins[c].value, c, tuple(x.shape), bias, n.attrs, tuple(n.shape),
                         self.threads, half_weights=self.fp16)
        if op is None:
            return None
        self.weights.append(op)
        wnode = ins[c]
        if id(wnode) not in outputs and all(u is n for u in consumers.get(id(wnode), [])):
            self.init[slot[id(wnode)]] = None
        # the GEMV reads its input in flat (row-major) order: reshapes that only feed it are
        # dropped and it reads their source (a kernel output: a buffer bound once at build)
        while x.op == "reshape" and id(x) not in outputs and len(consumers.get(id(x), [])) == 1:
            pos = next((t for t, st in enumerate(self.steps)
                        if st.kind == "ref" and st.out == slot[id(x)]), None)
            if pos is None:
                break
            self.steps.pop(pos)
            x = x.inputs[0]
        return Step("fc", op, (slot[id(x)],), tuple(n.shape))

    def _plan_buffers(self) -> None:
        """Assign each kernel step's output a pooled buffer (or a fresh one per forward)."""
        n_slots = len(self.order)
        last_use = [-1] * n_slots
        for t, st in enumerate(self.steps):
            for s in _step_inputs(st):
                last_use[s] = t
        for s in self.out_slots:
            last_use[s] = len(self.steps)
        # owners: the kernel-output slots whose buffer a value may live in (reference steps may
        # return views of their inputs)
        owners: List[frozenset] = [frozenset()] * n_slots
        for st in self.steps:
            out = st.out
            if st.kind == "ref":
                owners[out] = frozenset().union(*(owners[s] for s in st.ins))
            else:
                owners[out] = frozenset([out])
        buf_last = {}
        for s in range(n_slots):
            for o in owners[s]:
                buf_last[o] = max(buf_last.get(o, -1), last_use[s])
        # outputs: a kernel step writing a large one gets a fresh buffer per forward; small ones
        # live in the pool like any value and are copied out (``run``), so their steps stay
        # bound launches (a fresh array per forward costs a classifier step ~10-20 us of
        # Python and dispatch)
        out_bytes = {st.out: int(np.prod(st.shape)) * self.act_dtype.itemsize
                     for st in self.steps if st.kind != "ref"}
        fresh = {o for s in self.out_slots for o in owners[s]
                 if out_bytes.get(o, 0) > COPIED_OUTPUT_BYTES}
        #: output slots read out of pooled buffers: copied by ``run``
        self._copied_outs = {s for s in self.out_slots if owners[s] - fresh}
        # free raw buffers, most recently released last: a step writes into the buffer freed
        # last that is large enough - usually its own input's predecessor, read a step ago and
        # still in cache (a pool keyed by shape handed out buffers idle for a whole forward:
        # every step then wrote through cold lines)
        # buffers are planned as ids with a size (grown by later uses), allocated at the end
        sizes: List[int] = []
        touched: List[tuple] = []     # buffer id -> (last step using it, bytes it used there)
        free: List[int] = []
        release: Dict[int, List[int]] = {}
        assign: Dict[int, tuple] = {}                # out slot -> (buffer id, bytes, shape)
        scratch: Dict[int, Tuple[int, int]] = {}     # step index -> (buffer id, bytes)
        held: Dict[int, int] = {}
        fresh_outs = []
        for t, st in enumerate(self.steps):
            out = st.out
            if st.kind != "ref":
                # a Winograd step's workspace (V and M: MBs): the free buffer still in cache
                # (:func:`_warmth`: used - read, written or as workspace - in the last few
                # steps, covering most of it) - a workspace of its own is cold when the first
                # Winograd layer of a forward runs (ResNet-18's first 64@56 layer: 2.04 vs
                # 1.67 ms with it touched first); grown if needed, free again after the step
                need = self._scratch_bytes(st)
                sid = None
                if need:
                    if free:
                        sid = free.pop(max(range(len(free)), key=lambda i: _warmth(
                            touched[free[i]], need, t)))
                        sizes[sid] = max(sizes[sid], need)
                    else:
                        sid = len(sizes)
                        sizes.append(need)
                        touched.append((-1, 0))
                    scratch[t] = (sid, need)
                shape = st.shape
                if out in fresh:
                    fresh_outs.append(out)
                else:
                    nbytes = int(np.prod(shape)) * self.act_dtype.itemsize
                    pick = next((i for i in range(len(free) - 1, -1, -1)
                                 if sizes[free[i]] >= nbytes), None)
                    if pick is None:
                        bid = len(sizes)
                        sizes.append(max(nbytes, 1))
                        touched.append((-1, 0))
                    else:
                        bid = free.pop(pick)
                    assign[out] = (bid, nbytes, shape)
                    held[out] = bid
                    release.setdefault(max(buf_last.get(out, t), t), []).append(out)
                used = [assign[o][:2] for i in _step_inputs(st) for o in owners[i] if o in assign]
                used += [assign[out][:2]] if out in assign else []
                used += [(sid, need)] if sid is not None else []
                for b, nb in used:
                    touched[b] = max(touched[b], (t, nb))
                if sid is not None:
                    free.append(sid)
            for o in release.pop(t, []):
                free.append(held.pop(o))
        #: buffer sizes, out slot -> (buffer, bytes, shape), step -> (workspace buffer, bytes),
        #: and the slots of outputs written to fresh arrays: what every arena is carved into
        self._layout = (sizes, assign, scratch, fresh_outs)
        self.n_buffers = len(sizes)

    def _new_arena(self, first: bool = False) -> "_Arena":
        """Buffers carved as ``_layout`` says, and every step bound to them."""
        sizes, assign, scratch, fresh_outs = self._layout
        raw = _arena(sizes)
        buffers: Dict[int, Optional[np.ndarray]] = {o: None for o in fresh_outs}
        for o, (bid, nbytes, shape) in assign.items():
            buffers[o] = raw[bid][:nbytes].view(self.act_dtype).reshape(shape)
        ws = {t: raw[bid][:nbytes].view(np.float32) for t, (bid, nbytes) in scratch.items()}
        if first:    # (the first arena's workspaces are also the ops' own, for inspection)
            for t, w in ws.items():
                self.steps[t].op.scratch = w
        static_sv = {st.out: K.storage_view(buffers[st.out]) for st in self.steps
                     if st.kind != "ref" and buffers.get(st.out) is not None}
        arena = _Arena(raw, buffers, static_sv)
        arena.calls = [self._bind(st, arena, ws.get(t), count=first) for t, st in enumerate(self.steps)]
        # each step runs its reference path until its kernels are compiled (MNNJIT_COMPILE)
        tier_steps(self, arena.calls, arena.buffers)
        return arena

    def _take(self) -> "_Arena":
        """An idle arena for one forward (made when all are running, or waited for at
        ``max_arenas``)."""
        try:
            return self._free.pop()         # (atomic: no lock when one is idle)
        except IndexError:
            pass
        with self._arena_cond:
            while not self._free:
                if self.max_arenas is None or self._n_arenas < self.max_arenas:
                    self._n_arenas += 1
                    break
                self._arena_cond.wait()
            else:
                return self._free.pop()
        try:
            return self._new_arena()
        except BaseException:
            with self._arena_cond:
                self._n_arenas -= 1
                self._arena_cond.notify()
            raise

    def _give(self, arena: "_Arena") -> None:
        with self._arena_cond:
            self._free.append(arena)
            self._arena_cond.notify()

    @property
    def n_arenas(self) -> int:
        """Arenas made so far (the most forwards that ran at once, up to ``max_arenas``)."""
        return self._n_arenas

    def _scratch_bytes(self, st: Step) -> int:
        """Bytes of pooled scratch a step asks for (a Winograd convolution's workspace at the
        plan's thread count), else 0."""
        if st.kind in ("wino", "convres") and isinstance(st.op, Winograd):
            return 4 * st.op.workspace_floats(self.order[st.ins[0]].shape, self.threads)
        return 0

    # ------------------------------------------------------------------ running
    def _store(self, v: np.ndarray) -> np.ndarray:
        """A value as kernel input: storage dtype, C-contiguous, writable (uint16 bits for fp16)."""
        if v.dtype != self.act_dtype:
            v = to_f16(np.asarray(v, np.float32)) if self.fp16 else np.asarray(v, np.float32)
        if not v.flags.c_contiguous:
            v = np.ascontiguousarray(v)
        return K.storage_view(v)

    def _feed(self, arrays: List[np.ndarray]) -> List[Any]:
        vals = list(self.init)
        for s, a in zip(self.feed_slots, arrays):
            if s is not None:
                vals[s] = a
        return vals

    def _kernel_fn(self, st: Step, ws: Optional[np.ndarray] = None):
        """``f(*input_storage_arrays, out_storage_array)`` running a kernel step (``ws``: an
        arena's workspace for a Winograd step)."""
        kind = st.kind
        op = st.op
        if isinstance(op, Winograd):
            if kind == "convres":
                return lambda x, r, o: op.run(x, o, r, ws)
            return lambda x, o: op.run(x, o, None, ws)
        if kind in ("conv", "dw", "wino", "xdw", "dwpw", "fc"):
            return op.run
        if kind == "convres":
            return lambda x, r, o: op.run(x, o, r)
        if kind == "maxpool":
            args = st.op
            return lambda a, o: max_pool2d(a, o, *args)

        def one_kernel(*arrays):    # gap, add, act, pool: the kernel of _launch_spec
            kernel, args = self._launch_spec(st, arrays)
            kernel(*args)
        return one_kernel

    def _launch_spec(self, st: Step, args: tuple, ws: Optional[np.ndarray] = None):
        """(kernel, arguments) of a kernel step on fixed storage arrays ``args`` (inputs, then
        the output) when it is one kernel call (:func:`.launch.bind_launch`), else None
        (``ws``: an arena's workspace for a Winograd step)."""
        kind = st.kind
        if kind == "gap":
            a, o = args
            small = int(np.prod(self.order[st.ins[0]].shape)) < K.GAP_SERIAL_MAX
            return (K._k_global_avg_serial if small else K._k_global_avg,
                    (a.reshape(a.shape[0] * a.shape[1], -1), o.reshape(-1)))
        if kind == "add":
            a, b, o = args
            return K._k_add, (a.reshape(-1), b.reshape(-1), o.reshape(-1), st.op)
        if kind == "act":
            a, o = args
            return K._k_act, (a.reshape(-1), o.reshape(-1), st.op)
        if kind == "unary":
            a, o = args
            return K._k_unary, (a.reshape(-1), o.reshape(-1), st.op)
        if kind == "pool":
            a, o = args
            return K._k_pool, (a, o, *st.op)
        launch = getattr(st.op, "launch", None) if kind in _LAUNCHED else None
        if launch is None:
            return None
        if isinstance(st.op, Winograd):
            x, o = args[0], args[-1]
            return launch(x, o, args[1] if kind == "convres" else None, ws)
        if kind == "convres":
            x, r, o = args
            return launch(x, o, r)
        return launch(*args)

    def _bind(self, st: Step, arena: "_Arena", ws: Optional[np.ndarray] = None, count: bool = True):
        """One step as a closure over ``vals``: kernel steps whose inputs and output live in
        ``arena``'s buffers call their kernel on storage views fixed at build (no per-forward
        checks); ``ws`` is the arena's workspace for the step; ``count``: add to the counters."""
        out = st.out
        if st.kind == "ref":
            ref, attrs, ins, dt, shape = st.op, st.attrs, st.ins, st.dtype, st.shape

            def call_ref(vals):
                v = ref([_f32(vals[j]) for j in ins], attrs)
                if dt is not None:
                    v = np.asarray(v)
                    if v.dtype != dt:
                        v = v.astype(dt)
                    if v.shape != shape:
                        v = v.reshape(shape)
                vals[out] = v
            return call_ref
        fn = self._kernel_fn(st, ws)
        if count:
            counters[f"kernel_step:{st.kind}:{type(st.op).__name__}"] += 1
        ins = _step_inputs(st)
        buf = arena.buffers[out]
        static = [arena.static_sv.get(i) for i in ins]
        if buf is not None and all(v is not None for v in static):
            args = tuple(static) + (K.storage_view(buf),)
            spec = self._launch_spec(st, args, ws)
            if spec is not None:
                if count:
                    counters["launch:" + _kernel_name(spec[0])] += 1
                go = bind_launch(spec)

                def call_bound(vals):
                    go()
                    vals[out] = buf
                return call_bound

            def call_static(vals):
                fn(*args)
                vals[out] = buf
            return call_static
        store, act_dtype, shape = self._store, self.act_dtype, st.shape

        def call(vals):
            res = np.empty(shape, act_dtype) if buf is None else buf
            fn(*[store(vals[i]) for i in ins], K.storage_view(res))
            vals[out] = res
        return call

    def run(self, arrays: List[np.ndarray]) -> List[np.ndarray]:
        """Evaluate on input arrays (the signature's shapes and dtypes); float32 outputs. Any
        number of threads may call it at once (each forward on an arena of its own)."""
        arena = self._take()
        try:
            vals = self._feed(arrays)
            with launch_guard(), np.errstate(all="ignore"), single_threaded_blas():
                for call in arena.calls:
                    call(vals)
            outs = []
            for s, shape in zip(self.out_slots, self.out_shapes):
                raw = vals[s]
                v = _f32(raw)
                if v is raw and s in self._copied_outs:
                    v = v.copy()        # it lives in a pooled buffer the next forward reuses
                outs.append(v.reshape(shape) if v.shape != shape else v)
        finally:
            self._give(arena)
        return outs

    def profile(self, arrays: List[np.ndarray], repeat: int = 10) -> List[Tuple[str, str, float]]:
        """Per step: (kind, node description, best seconds of ``repeat`` runs of that step on the
        values of one forward) - for benchmarks and tuning."""
        import time
        vals = self._feed(arrays)
        rows = []
        with np.errstate(all="ignore"), single_threaded_blas():
            for st, call in zip(self.steps, self._calls):
                call(vals)
                best = float("inf")
                for _ in range(repeat):
                    t = time.perf_counter()
                    call(vals)
                    best = min(best, time.perf_counter() - t)
                node = self.order[st.out]
                rows.append((st.kind, f"{node.op} {list(node.shape)}", best))
        return rows

    @property
    def activation_nbytes(self) -> int:
        """Bytes of one arena's intermediate activation buffers (pooled between steps and
        forwards) plus the per-forward output buffers of kernel steps."""
        fresh = sum(int(np.prod(st.shape)) * self.act_dtype.itemsize for st in self.steps
                    if st.kind != "ref" and self.buffers.get(st.out, 0) is None)
        return int(sum(r.nbytes for r in self._raw) + fresh)

    @property
    def weight_nbytes(self) -> int:
        """Bytes of the weights the plan keeps: convolution weights (packed panels or codes) and
        the constants of the other steps (e.g. a classifier's matrix)."""
        consts = sum(int(v.nbytes) for v in self.init if isinstance(v, np.ndarray))
        return sum(int(w.nbytes) for w in self.weights) + consts


class _Arena:
    """One forward's activation buffers (raw uint8 buffers, the typed views by slot, their
    storage views) and the plan's steps bound to them (``calls``)."""

    __slots__ = ("raw", "buffers", "static_sv", "calls")

    def __init__(self, raw: List[np.ndarray], buffers: Dict[int, Optional[np.ndarray]],
                 static_sv: Dict[int, np.ndarray]) -> None:
        self.raw, self.buffers, self.static_sv = raw, buffers, static_sv
        self.calls: List[Any] = []


#: the activation arena's alignment and granule (a transparent huge page on x86-64 Linux)
HUGE_PAGE = 2 << 20
_PAGE = 4096


def _arena(sizes: List[int]) -> List[np.ndarray]:
    """Raw buffers of these byte sizes carved from one allocation, each on a page boundary, the
    whole (from 1 MB) on a huge-page boundary and a whole number of huge pages long. numpy asks the kernel
    for transparent huge pages on allocations this large (``madvise``); a 1x1 convolution
    reading 144 input rows 12.5 KB apart then touches one or two pages per column block
    instead of 144 (MobileNetV2 forwards: 0.1-0.6 ms less at 2 threads, within noise at 1)."""
    offs, total = [], 0
    for n in sizes:
        offs.append(total)
        total += -(-max(n, 1) // _PAGE) * _PAGE
    # (a small model's buffers stay on ordinary pages: no 2 MB page for a few KB)
    align = HUGE_PAGE if total >= HUGE_PAGE // 2 else _PAGE
    total = -(-total // align) * align
    raw = np.empty(total + align, np.uint8)
    base = (-raw.ctypes.data) % align
    return [raw[base + o:base + o + n] for o, n in zip(offs, sizes)]


#: steps back within which a buffer's last use still counts as in cache (L3) for a workspace
WARM_STEPS = 4


def _warmth(touched: Tuple[int, int], need: int, t: int) -> Tuple[int, int]:
    """How much of a workspace of ``need`` bytes a free buffer last used at step ``touched[0]``
    (``touched[1]`` bytes) would find in cache at step ``t``; ties go to the latest use."""
    last, nbytes = touched
    return (min(need, nbytes) if t - last <= WARM_STEPS else 0, last)


def _kernel_name(kernel: Any) -> str:
    """The name of the compiled function a bound step launches (the kernel counters' key)."""
    fn = getattr(kernel, "py_func", kernel)
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def _step_inputs(st: "Step") -> List[int]:
    """The value slots a step reads."""
    return list(st.ins)


def _f32(v: Any) -> Any:
    if isinstance(v, np.ndarray) and v.dtype == np.float16:
        return to_f32(v)
    return v
