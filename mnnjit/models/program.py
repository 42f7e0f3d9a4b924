"""A loaded model: :class:`Program` (the decoded ``Net`` plus its inputs and outputs) and
:class:`ExecutionPlan` (the graph for one input signature, built once and reused).

A plan holds one placeholder per model input, the translated output nodes and a precomputed
evaluation step list; ``run`` writes the inputs, evaluates, and returns the output arrays. With
the default (reference) executor the steps run as one tight loop over the ops' reference
functions; when another executor is installed (``mnnjit.runtime.set_executor``, the compiler's)
the plan hands its output nodes to ``mnnjit.runtime.evaluate`` so the executor can cache its own
compiled form keyed by those nodes.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .. import runtime
from ..compiler import whole
from ..graph import Node, topo_order
from ..ops.conv_info import is_patch_conv
from .simplify import simplify
from .translate import MNN_DTYPES, Ctx, NeedsValuesError, Translator

_FMTS = ("NCHW", "NHWC", "NC4HW4")
#: Plans kept per model (one per input signature, least recently used dropped first).
MAX_PLANS = 16
#: The most forwards between two asks for a plan kernel still compiling in the background.
MAX_ASK_CALLS = 4096
#: A plan whose nodes all have fewer elements than this runs on its step loop without importing Numba
#: (the compiler's tiny-graph bound, ``compiler.whole.TINY_WORK``).
TINY_WORK = whole.TINY_WORK


@dataclass(frozen=True)
class InputSpec:
    """One model input: name, tensor index, declared dims (-1 = any), dtype, data format."""

    name: str
    index: int
    dims: tuple[int, ...] | None
    dtype: np.dtype
    fmt: str


class Program:
    """A decoded model ready to build execution plans (see module docstring)."""

    def __init__(self, net: Any, path: str = "<bytes>", input_names: Sequence[str] = (),
                 output_names: Sequence[str] = ()):
        self.net = net
        self.path = path
        names = list(net.tensorName or [])
        self.tensor_names = names
        self.name_index = {n: i for i, n in enumerate(names)}
        self.subgraphs = {str(s.name): s for s in (net.subgraphs or [])}
        self.weight_cache: dict = {}
        #: Runtime memory mode: 2 (low) keeps quantized weights as codes (mnn_conv2d).
        self.memory = 0
        specs = {}
        for op in net.oplists:
            if str(op.type) == "Input":
                p = op.main or {}
                if not op.outputIndexes:
                    raise ValueError(f"{path}: input op {op.name!r} has no output tensor")
                t = op.outputIndexes[0]
                dims = p.get("dims")
                dims = None if dims is None else tuple(int(d) for d in dims)
                fmt = str(p.get("dformat", "NC4HW4"))
                fmt = fmt if fmt in _FMTS else "NCHW"
                dt = MNN_DTYPES.get(str(p.get("dtype", "DT_FLOAT")), np.dtype(np.float32))
                specs[names[t] if t < len(names) else str(t)] = InputSpec(
                    names[t] if t < len(names) else str(t), t, dims, np.dtype(dt), fmt)
        self.all_inputs = list(specs.values())
        input_names = list(input_names or [])
        if input_names:
            missing = [n for n in input_names if n not in specs and n not in self.name_index]
            if missing:
                raise ValueError(f"{path}: the model has no input named {missing[0]!r} "
                                 f"(inputs: {list(specs)})")
            self.inputs = [specs[n] if n in specs else InputSpec(n, self.name_index[n], None,
                                                                 np.dtype(np.float32), "NCHW")
                           for n in input_names]
        else:
            self.inputs = list(self.all_inputs)
        output_names = list(output_names or []) or self._default_outputs()
        missing = [n for n in output_names if n not in self.name_index]
        if missing:
            raise ValueError(f"{path}: the model has no tensor named {missing[0]!r} to output")
        self.output_names = output_names
        self.outputs = [self.name_index[n] for n in output_names]
        self._plans: dict[tuple, ExecutionPlan] = {}
        self._check_supported()

    def _check_supported(self) -> None:
        """Raise UnsupportedOpError at load for an op type the outputs need and mnnjit cannot run."""
        from .translate import Ctx, UnsupportedOpError, get_converter
        tr = Translator(Ctx(self.net, self.subgraphs, False, {}), self.net.oplists, self.tensor_names)
        ops = [self.net.oplists[i] for i in tr.needed_ops(self.outputs)]
        if any(str(op.type) in ("While", "If") for op in ops):
            ops += [op for sub in self.subgraphs.values() for op in sub.nodes]
        for op in ops:
            if str(op.type) != "Input" and get_converter(str(op.type)) is None:
                raise UnsupportedOpError(f"{self.path}: mnnjit does not support MNN op type {op.type!r} "
                                         f"(op {op.name!r}) yet")

    def _default_outputs(self) -> list[str]:
        if self.net.outputName:
            return [str(n) for n in self.net.outputName]
        consumed = {t for op in self.net.oplists for t in (op.inputIndexes or [])}
        outs = [t for op in self.net.oplists for t in (op.outputIndexes or []) if t not in consumed]
        return [self.tensor_names[t] for t in outs]

    def ctx(self, dynamic: bool) -> Ctx:
        """A translation context for this model."""
        return Ctx(self.net, self.subgraphs, dynamic, self.weight_cache, memory_low=self.memory == 2)

    def translate(self, feeds: list[Node], dynamic: bool = False, trace: list | None = None,
                  tensors: dict | None = None) -> list[Node]:
        """Output nodes for input nodes ``feeds`` (one per ``self.inputs``); with ``trace`` (a list)
        the translated ops are recorded, with ``tensors`` (a dict) every tensor's node is kept."""
        tensors = {} if tensors is None else tensors
        tensors.update({spec.index: node for spec, node in zip(self.inputs, feeds)})
        tr = Translator(self.ctx(dynamic), self.net.oplists, self.tensor_names)
        tr.trace = trace
        tr.run(tensors, self.outputs)
        missing = [t for t in self.outputs if t not in tensors]
        if missing:
            t = missing[0]
            name = self.tensor_names[t] if 0 <= t < len(self.tensor_names) else str(t)
            raise ValueError(f"{self.path}: no op of the model produces its output tensor {name!r}")
        return [tensors[t] for t in self.outputs]

    def has_conv_work(self) -> bool:
        """Whether the net has convolutions (ops a backend's graph lowering takes over)."""
        hit = self.__dict__.get("_has_conv")
        if hit is None:
            hit = self._has_conv = any(op.type in ("Convolution", "ConvolutionDepthwise")
                                       for op in self.net.oplists)
        return hit

    def plan(self, signature: tuple) -> "ExecutionPlan":
        """The execution plan for an input signature ((shape, dtype, fmt) per input), cached (the
        :data:`MAX_PLANS` most recently used ones). Thread-safe: one plan per signature is
        built, whichever threads ask for it at once."""
        with plan_lock(self):
            plan = self._plans.pop(signature, None)
            if plan is None:
                plan = ExecutionPlan(self, signature)
                while len(self._plans) >= MAX_PLANS:
                    self._plans.pop(next(iter(self._plans)))
            self._plans[signature] = plan
        return plan


def plan_lock(program: Any) -> threading.RLock:
    """The lock guarding a program's plan caches (its plans per signature and what the compiler
    lowered from them): held while one is looked up or built, never while a plan runs."""
    lock = program.__dict__.get("_plan_lock")
    if lock is None:
        # dict.setdefault is atomic: two threads asking at once get the same lock
        lock = program.__dict__.setdefault("_plan_lock", threading.RLock())
    return lock


def output_format(node: Node) -> str:
    """The data format a Module reports for an output: NC4HW4 results come back as NCHW (as MNN's
    Module converts them)."""
    return "NCHW" if node.fmt == "NC4HW4" else node.fmt


class ExecutionPlan:
    """The translated graph for one input signature, with a lean evaluation loop.

    Any number of threads may run one plan at once. The lean tiers keep every value of a call
    in locals (the step loop, the generated function, the compiled kernel: fresh arrays per
    call). The graph path writes placeholders and caches values on nodes, so each concurrent
    call takes a copy of the graph of its own (:class:`_GraphCopy`: placeholders and the nodes
    depending on them, sharing the weights and the compiled plans), from a free list that holds
    as many copies as calls have ever run at once."""

    #: Whether the plan's compiled kernel splits products over the calling thread's Numba threads
    #: (its caller sets their count before each forward; a lean plan otherwise uses none).
    threaded = False

    def __init__(self, program: Program, signature: tuple):
        self.program = program
        self.signature = signature
        #: guards the one-time switches between tiers
        self._lock = threading.Lock()
        #: idle graph copies for the graph path (see the class docstring)
        self._graphs: list[_GraphCopy] = []
        self.placeholders = [Node("placeholder", (), {}, tuple(shape), np.dtype(dt), fmt, name=spec.name)
                             for spec, (shape, dt, fmt) in zip(program.inputs, signature)]
        self.dynamic = False
        try:
            translated = program.translate(self.placeholders)
            self.out_fmts = [output_format(o) for o in translated]
            self.outputs = simplify(translated)
        except NeedsValuesError:
            self.dynamic = True
            self.outputs = []
            self.out_fmts = []
        self._compile_steps()

    def _compile_steps(self) -> None:
        sl = whole.step_list(self.placeholders, self.outputs)
        self.step_list = sl
        self.steps, self.init, self.feed_slots, self.out_slots = sl.steps, sl.init, sl.feed_slots, sl.out_slots
        self.order = sl.order
        self.n_slots = len(sl.order)
        self._fast = None
        self.lean: bool | None = None
        self._graphs = [_GraphCopy(self.placeholders, self.outputs)]

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """Evaluate the plan on input arrays (already of the signature's shapes and dtypes)."""
        if self.dynamic:
            return self._run_dynamic(arrays)
        if self.lean is None:
            self.lean = _lean(self)
        if self.lean:
            if self._fast is not None:
                return self._fast(arrays)
            return self._run_steps(arrays)
        try:
            graph = self._graphs.pop()      # (list.pop is atomic: no lock on the hot path)
        except IndexError:                  # every copy is running: another one for this call
            graph = _GraphCopy.copy_of(self.placeholders, self.outputs)
        try:
            return graph.run(arrays)
        finally:
            self._graphs.append(graph)

    def _run_steps(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        vals = list(self.init)
        for s, a in zip(self.feed_slots, arrays):
            if s is not None:
                vals[s] = a
        fixed = False
        with np.errstate(all="ignore"):
            for ref, attrs, ins, out, dt, shape in self.steps:
                v = ref([vals[i] for i in ins], attrs)
                if dt is not None:
                    if not isinstance(v, np.ndarray) or v.dtype != dt:
                        v, fixed = np.asarray(v).astype(dt), True
                    if v.shape != shape:
                        v, fixed = v.reshape(shape), True
                vals[out] = v
        if not fixed and self._fast is None:
            # every step gave its node's dtype and shape: later runs skip the checks (once, when
            # threads finish their first runs together)
            with self._lock:
                if self._fast is None:
                    # later calls of ``plan.run`` go straight to the generated function (no
                    # dispatch), and count towards compiling the plan into one kernel first (the
                    # setting is read at the next call: a single forward imports nothing more)
                    self._hot = None
                    self.run = self._warm  # type: ignore[method-assign]
                    self._fast = self._generate()
        return [vals[s] for s in self.out_slots]

    def _warm(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """``run`` while the plan is warming up: the generated function, and after
        ``MNNJIT_PLAN_KERNEL_CALLS`` forwards the switch to one compiled kernel when it takes the plan."""
        hot = self._hot
        if hot is None:
            hot = _plan_kernel_calls()
            if hot is None:  # never: straight to the generated function from now on
                self.run = self._fast  # type: ignore[method-assign]
                return self._fast(arrays)
        self._hot = hot = hot - 1
        # one thread compiles; the others keep running the generated function meanwhile
        if hot < 0 and self._lock.acquire(blocking=False):
            try:
                if self.__dict__.get("run") == self._warm:
                    self.run = self._fast  # type: ignore[method-assign]
                    compiled = self._compile_kernel(arrays)
                    if compiled is False:
                        # compiling in the background: stay warm and ask again later, from the
                        # third ask on after twice as many calls each time (up to
                        # ``MAX_ASK_CALLS``: each ask builds the kernel's source again, ~1 ms, a
                        # cost a tight loop must not pay every few dozen calls)
                        self._deferred = n = getattr(self, "_deferred", 0) + 1
                        base = max(_plan_kernel_calls() or 0, 1)
                        self._hot = min(base << max(0, n - 2), max(base, MAX_ASK_CALLS))
                        self.run = self._warm  # type: ignore[method-assign]
                    elif compiled is not None:
                        # a kernel whose products use the GEMM's threads: the model sets its thread
                        # count before each forward (``nn.module``)
                        self.threaded = bool(getattr(compiled, "threaded", False))
                        self.run = compiled  # type: ignore[method-assign]
                        return compiled(arrays)
            finally:
                self._lock.release()
        return self._fast(arrays)

    def _compile_kernel(self, arrays: list[np.ndarray]):
        """The plan as one compiled kernel by the compiler's whole-forward rule (``compiler/whole.py``),
        or None (declined), or False (the backend is compiling it in the background)."""
        try:
            from ..compiler import whole as whole_rule
            return whole_rule.compile_whole(self.step_list, check=self._fast, sample=arrays)
        except ImportError:  # no Numba
            return None

    def _generate(self):
        """The step list as one generated Python function (see :mod:`.small_plan`)."""
        from .small_plan import generate
        return generate(self.steps, self.init, self.feed_slots, self.out_slots, self.order)

    def _run_dynamic(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        # fresh placeholders: nothing computed before depends on them, so no cached value
        # anywhere is invalidated (no write-counter bump, which would also invalidate values other
        # threads are computing)
        feeds = [Node("placeholder", (), {}, p.shape, p.dtype, p.fmt, name=p.name) for p in self.placeholders]
        for p, a in zip(feeds, arrays):
            p.value = a
        outs = self.program.translate(feeds, dynamic=True)
        runtime.evaluate(outs)
        self.out_fmts = [output_format(o) for o in outs]
        # (``_value``: this call's nodes were just computed; another thread's write elsewhere
        # must not make them read as stale)
        return [o._value for o in outs]


class _GraphCopy:
    """One caller's view of a plan's graph: its placeholders and output nodes. The plan's own
    graph is the first copy; more are made for calls running at once (:meth:`copy_of`)."""

    __slots__ = ("placeholders", "outputs", "computed")

    def __init__(self, placeholders: list[Node], outputs: list[Node]) -> None:
        self.placeholders, self.outputs = placeholders, outputs
        #: outputs whose cached value depends on the inputs (cleared before each run)
        self.computed = [o for o in outputs if o.live and o.op != "placeholder"]

    @classmethod
    def copy_of(cls, placeholders: list[Node], outputs: list[Node]) -> "_GraphCopy":
        """New placeholders and new nodes for everything depending on them; constants and other
        input-independent nodes (the weights) are shared."""
        new: dict[int, Node] = {}
        for p in placeholders:
            new[id(p)] = Node("placeholder", (), {}, p.shape, p.dtype, p.fmt, name=p.name)
        for n in topo_order(outputs, stop_at_values=False):
            if id(n) in new or not n.live:
                continue
            new[id(n)] = Node(n.op, tuple(new.get(id(i), i) for i in n.inputs), n.attrs, n.shape,
                              n.dtype, n.fmt, name=n.name)
        return cls([new[id(p)] for p in placeholders], [new.get(id(o), o) for o in outputs])

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """Evaluate the outputs on these input arrays (only this caller uses this copy now)."""
        # the outputs' values of the previous run are dropped here rather than by bumping the
        # global write counter, which would also invalidate values other threads are computing
        for o in self.computed:
            o._value = None
        for p, a in zip(self.placeholders, arrays):
            p.value = a
        try:
            from ..backends import registry
            with registry.current().run_context():
                runtime.evaluate(self.outputs)
            # (``_value``: computed just now from these placeholders, whatever was written since)
            return [o._value for o in self.outputs]
        finally:
            for p in self.placeholders:
                p._value = None     # the caller's input is not kept alive by the plan


def _lean(plan: ExecutionPlan) -> bool:
    """Whether ``plan`` runs on its own step loop: with the reference executor, or with the compiler's
    dispatcher when no node reaches its compile threshold or has a hand-written kernel (it would run
    the reference path too, after tracing the graph at every call)."""
    if runtime._executor is not None:
        return _reference_executor_chosen()
    active = [n for n in plan.order if n.op not in ("const", "placeholder")]
    if all(max([n.size if n.dtype is not None else 0] + [i.size for i in n.inputs if i.op != "const"]) < TINY_WORK
           for n in active):
        return True  # tiny activations (an MLP): no kernel would be used; load neither the compiler nor Numba
    try:
        from .. import settings as config
        from ..backends import registry
        from ..compiler.plan import KERNEL_MIN
        backend = registry.current()
    except ImportError:
        return True
    thr = config.threshold()
    whole = _plan_kernel_calls() is not None
    for n in plan.order:
        if n.op in ("const", "placeholder"):
            continue
        if whole and (n.op in WHOLE_PLAN_OPS or is_patch_conv(n)):
            continue  # the whole-plan kernel runs these on compiled GEMM / row helpers at any size
        work = max([n.size if n.dtype is not None else 0] + [i.size for i in n.inputs])
        if work >= thr or (work >= KERNEL_MIN and backend.supports_op(n)):
            return False
    return True


#: Ops that keep a plan on the lean tier whatever their size: once hot it compiles whole, and the
#: CPU plan kernel runs them on the packed GEMM (matrix products, a ViT's patch embedding) and
#: compiled row helpers (``backends/cpu/codegen/plan_gemm.py``, ``plan_rows.py``), with no Python
#: between steps (a transformer's graph path paid a step dispatch per op).
WHOLE_PLAN_OPS = frozenset({"matmul_ex", "matmul", "softmax", "layer_norm"})


def _reference_executor_chosen() -> bool:
    """Whether ``runtime.set_executor`` installed the reference evaluator."""
    ex = runtime._executor
    if ex is None:
        return False
    from ..ops.evaluate import evaluate as ref_evaluate
    return ex is ref_evaluate


def _plan_kernel_calls() -> int | None:
    """Forwards before a lean plan is compiled into one kernel (None: it never is: compiling is
    off, or the reference executor was chosen)."""
    if _reference_executor_chosen():
        return None
    from .. import settings as config
    return config.plan_kernel_calls()


def load_program(path: Any, input_names: Sequence[str] = (), output_names: Sequence[str] = (),
                 weight_path: str | None = None) -> Program:
    """Read a .mnn file into a :class:`Program` (clear errors for missing or non-MNN files)."""
    from ..format import MNNFormatError, read_net
    if isinstance(path, (str, os.PathLike)):
        p = os.fspath(path)
        if not os.path.exists(p):
            raise FileNotFoundError(f"MNN model file not found: {p}")
        if os.path.isdir(p):
            raise IsADirectoryError(f"{p} is a directory, not an MNN model file")
    try:
        net = read_net(path, weight_path=weight_path)
    except MNNFormatError as exc:
        raise ValueError(f"cannot load {path}: {exc}") from None
    return Program(net, os.fspath(path) if isinstance(path, (str, os.PathLike)) else "<bytes>",
                   input_names, output_names)
