"""``Module``: a loaded .mnn model (MNN's ``_Module``), and the loaders.

``forward`` lays each input out as the model expects (an NHWC image converted to NC4HW4 feeds an
NCHW model unchanged: NC4HW4 is NCHW data), looks up the execution plan for the input signature
(built once per signature; ``shape_mutable=False`` builds it at load) and runs it.
"""
from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Any, Sequence

import numpy as np

from ..backends import registry
from ..graph import Node
from ..threads import set_kernel_threads
from ..models.program import ExecutionPlan, Program, load_program
from ..ops import build as B
from .. import graph as _graph
from .. import var as _var
from ..var import OwnConst, Var, _take_own_value
from .runtime_manager import RuntimeManager, resolve_backend


_set_threads = set_kernel_threads


def _true() -> bool:
    return True


class _OnBackend:
    """A model plan run with backend ``name`` active on the calling thread (the steps a lowered
    graph left to the compiler, and a step plan's kernels, then run there)."""

    def __init__(self, plan: Any, name: str) -> None:
        self.plan, self.name = plan, name
        self.out_fmts = plan.out_fmts

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        with registry.using(self.name):
            outs = self.plan.run(arrays)
        self.out_fmts = self.plan.out_fmts
        return outs


def _backend_settings(name: str | None, rt: RuntimeManager | None) -> Any:
    """The runtime manager's settings for its backend while a plan is lowered (the NPU delegate: the
    config's "npu" dict, and set_cache's path as the partition cache), or a no-op."""
    if name != "npu" or rt is None or not (rt.npu or rt.cache_path):
        return contextlib.nullcontext()
    opts = dict(rt.npu)
    if rt.cache_path and "cache_dir" not in opts:
        opts["cache_dir"] = rt.cache_path + ".npu"
    return registry.get("npu").options(**opts)


def _own_var(arr: np.ndarray, fmt: str) -> Var:
    """A Var whose own memory is ``arr``: a fresh, C-contiguous array nothing else holds, in a
    format other than NC4HW4."""
    v = _new(Var)
    v._node = OwnConst.constant(arr, fmt)
    return v


def _result(outs: list, k: int, fmt: str) -> Var:
    """A Var on output ``k`` of a plan's ``outs`` (a new list per forward). An array this call's
    alone (nothing but ``outs`` holds it: a plan's fresh output, see ``var.OwnConst``) becomes the
    Var's own memory, handed out by ``read()`` without a copy as in real MNN, so the user's loop
    pays no copy; memory something else may still write (a plan's buffer, an input passed through)
    is copied into such an array; a read-only array others hold (a graph's cached value) is kept
    as a plain constant, copied by ``read()``."""
    arr = outs[k]
    if type(arr) is not np.ndarray:     # (a numpy scalar: a 0-d array of its own)
        arr = np.asarray(arr)
    flags = arr.flags
    # holders of ``outs``: the caller's local and this parameter (+ getrefcount's argument): a
    # plan keeping the list would keep its arrays. A fresh array is held by the list, this local
    # and ``flags`` (+ the argument).
    if flags.c_contiguous and flags.writeable and flags.owndata and arr.base is None and fmt != "NC4HW4" \
            and _var._COUNTS_HOLDERS and _getrefcount(outs) == 3 and _getrefcount(arr) == 4:
        return _own_var(arr, fmt)
    v = _new(Var)
    if fmt == "NC4HW4" or not flags.c_contiguous:
        del flags
        arr = np.ascontiguousarray(arr)      # (a copy of its own, or plain data for NC4HW4)
        if fmt == "NC4HW4":                  # (read() presents packed data: no hand-out)
            v._node = Node.constant(arr, fmt)
            return v
    else:
        del flags
        # a whole view of a fresh buffer (``_take_own_value`` counts the list, this local and its
        # parameter), else memory others hold: copied when they may write it
        if not (_var._COUNTS_HOLDERS and _getrefcount(outs) == 3 and _take_own_value(arr)):
            if not arr.flags.writeable:
                v._node = Node.constant(arr, fmt)
                return v
            arr = arr.copy()
    v._node = OwnConst.constant(arr, fmt)
    return v


_getrefcount = sys.getrefcount
_new = object.__new__


class _Module:
    """MNN's ``nn._Module``: a model loaded from a .mnn file (or a graph of Vars), and the base of
    user-defined :class:`Module` subclasses."""

    def __init__(self, program: Program | None = None, runtime_manager: RuntimeManager | None = None,
                 name: str = "") -> None:
        self._program = program
        self._rt = runtime_manager
        self._name = name
        self._training = False
        #: (signature, plan) of the last call. One tuple, read and replaced whole: threads
        #: calling with other signatures never pair one's signature with another's plan.
        self._last: tuple | None = None
        #: (keys, plan): per input (shape, dtype, fmt) of the Vars of the last call when they fed
        #: that plan unchanged (no cast or layout conversion): a call matching them skips
        #: ``_prepare`` and runs that plan. One tuple, as ``_last``.
        self._fast_path: tuple | None = None
        #: ``forward``'s copy of ``_fast_path`` for one input (see ``onForward``), or None
        self._fast1: tuple | None = None
        #: ``forward``'s shortest path, once ``_fast1``'s plan runs as one compiled kernel with one
        #: output and no thread count to set: (shape, dtype, fmt, the kernel's ``run.one``,
        #: output format), or None
        self._one: tuple | None = None
        self._params: list[Var] = []
        #: Worker threads for compiled kernels (RuntimeManager numThread / thread_num), 0 = default.
        self._threads = runtime_manager.num_thread if runtime_manager is not None else 0
        self._children: list[_Module] = []

    # ------------------------------------------------------------------ running
    def _prepare(self, inputs: Any) -> tuple[tuple, list[np.ndarray]]:
        """The input signature and the input arrays, laid out and cast as the model expects."""
        sig, arrays, _ = self._prepare_keyed(inputs)
        return sig, arrays

    def _prepare_keyed(self, inputs: Any) -> tuple[tuple, list[np.ndarray], tuple | None]:
        """``_prepare``, plus the inputs' (shape, dtype, fmt) keys when every input is a Var
        whose array feeds the plan unchanged (else None)."""
        prog = self._program
        if prog is None:
            raise RuntimeError("this Module has no model: load one with nn.load_module_from_file")
        if isinstance(inputs, (Var, np.ndarray)):
            inputs = [inputs]
        inputs = list(inputs)
        specs = prog.inputs
        if len(inputs) != len(specs):
            raise ValueError(f"the model takes {len(specs)} input(s) {[s.name for s in specs]}, "
                             f"got {len(inputs)}")
        sig = []
        arrays = []
        keys: list | None = []
        for spec, v in zip(specs, inputs):
            node = v._node if isinstance(v, Var) else B.as_node(v)
            if keys is not None and isinstance(v, Var):
                keys.append((node.shape, node.dtype, node.fmt))
            else:
                keys = None
            given = node
            if spec.dims is not None and spec.dims and len(node.shape) != len(spec.dims):
                raise ValueError(f"input {spec.name!r}: expected {len(spec.dims)} dimensions "
                                 f"(shape {list(spec.dims)}), got shape {list(node.shape)}")
            if node.dtype != spec.dtype:
                # integer data for a float input is converted (real MNN reads int32 bits as floats)
                if spec.dtype.kind == "f" and node.dtype.kind in "fiub":
                    node = B.cast_node(node, spec.dtype)
                else:
                    raise TypeError(f"input {spec.name!r}: expected dtype {spec.dtype}, got {node.dtype}")
            want = "NHWC" if spec.fmt == "NHWC" else "NCHW"
            have = "NHWC" if node.fmt == "NHWC" else "NCHW"
            if want != have and len(node.shape) == 4:
                node = B.make_node("convert", (node,), {"src": node.fmt, "dst": want}, fmt=want)
            arr = node.value
            if arr is None:
                arr = Var._from_node(node).read_view()
            if node is not given or given.value is None:
                keys = None
            sig.append((node.shape, node.dtype, spec.fmt))
            arrays.append(arr)
        return tuple(sig), arrays, None if keys is None else tuple(keys)

    @property
    def _last_sig(self) -> tuple | None:
        last = self._last
        return None if last is None else last[0]

    @property
    def _last_plan(self) -> ExecutionPlan | None:
        """The plan of the last call (for tests and benchmarks)."""
        last = self._last
        return None if last is None else last[1]

    @property
    def _fast_keys(self) -> tuple | None:
        fast = self._fast_path
        return None if fast is None else fast[0]

    def _plan(self, sig: tuple) -> ExecutionPlan:
        last = self._last
        if last is not None and sig == last[0]:
            return last[1]
        rt = self._rt
        try:
            plan = self._program.plan(sig)
            name = rt.backend_name if rt is not None else None
            if not getattr(plan, "dynamic", True) and (name not in (None, "cpu") or getattr(self._program, "has_conv_work", _true)()):
                # the compiler's one lowering decision, on this module's backend (CPU: CNNs and
                # the precision/memory modes run as kernel steps); a CPU model without
                # convolutions never needs it, and a tiny model's first forward stays free of
                # the compiler's import
                from ..compiler.lower import plan_for_program
                from ..precision import parse_modes
                modes = parse_modes({"precision": rt.precision if rt is not None else 0,
                                     "memory": rt.memory if rt is not None else getattr(self._program, "memory", 0)})
                with registry.using(name), _backend_settings(name, rt):
                    plan = plan_for_program(self._program, sig, modes)
                if name not in (None, "cpu"):
                    plan = _OnBackend(plan, name)
        except (ValueError, TypeError, IndexError) as exc:
            shapes = ", ".join(f"{spec.name!r}: {list(shape)}" for spec, (shape, _, _) in zip(self._program.inputs, sig))
            raise type(exc)(f"the model cannot take inputs of shapes {{{shapes}}}: {exc}") from exc
        self._last = (sig, plan)
        return plan

    def onForward(self, inputs: Any) -> list[Var]:  # noqa: N802 - MNN's name
        """Run the model; a list of output Vars."""
        arrays = None
        fast = self._fast_path
        if fast is not None:
            keys = fast[0]
            # fast path: Vars of the last call's shapes, dtypes and formats whose arrays fed the
            # last plan unchanged; anything else goes through _prepare (checks, casts, errors)
            if isinstance(inputs, Var):
                inputs = (inputs,)
            if (type(inputs) is list or type(inputs) is tuple) and len(inputs) == len(keys):
                arrays = []
                for v, (shape, dtype, fmt) in zip(inputs, keys):
                    node = v._node if isinstance(v, Var) else None
                    # (a dtype equal to the key's but another object takes the full path)
                    if node is None or node.shape != shape or node.dtype is not dtype or node.fmt != fmt:
                        arrays = None
                        break
                    arr = node.value if node.live else node._value  # (.value checks staleness)
                    if arr is None:
                        arrays = None
                        break
                    arrays.append(arr)
        if arrays is None:
            sig, arrays, keys = self._prepare_keyed(inputs)
            if self._threads:
                _set_threads(self._threads)   # kernel-step plans split their work at build
            plan = self._plan(sig)
            # (forward's copy of the fast path skips onForward: not for a subclass overriding it)
            fast = (keys, plan) if keys is not None and type(self).onForward is _Module.onForward else None
            self._fast_path = fast
            # forward's one-input copy: (shape, dtype, fmt, plan, whether the plan is no ExecutionPlan:
            # kernel steps set their thread count per forward)
            self._one = None
            self._fast1 = None if fast is None or len(keys) != 1 else \
                keys[0] + (plan, not isinstance(plan, ExecutionPlan))
        else:
            plan = fast[1]
        if self._threads and (getattr(plan, "_fast", None) is None or getattr(plan, "threaded", False)):
            # worker threads for compiled kernels (a small plan running as one generated numpy
            # function, or one compiled kernel without large products, uses none: no thread-count
            # call per forward)
            _set_threads(self._threads)
        outs = plan.run(arrays)
        fmts = plan.out_fmts
        if len(outs) == 1:
            return [_result(outs, 0, fmts[0])]
        res = []
        for k in range(len(outs)):      # (no comprehension: ``_result`` counts the holders of ``outs``)
            res.append(_result(outs, k, fmts[k]))
        return res

    def forward(self, inputs: Any) -> Var | list[Var]:
        """Run the model: a list of outputs for a list of inputs, the first output for one Var."""
        one = self._one
        if one is not None and type(inputs) is Var:
            # a tiny model's whole forward (a few microseconds: every attribute read counts)
            node = inputs._node
            if node.dtype is one[1] and node.shape == one[0] and node.fmt == one[2] and not node.live:
                arr = node._value
                if arr is not None:
                    arr = one[3](arr)
                    # (``_own_var`` and ``OwnConst.constant`` written out: two calls are ~3 % of
                    # this forward)
                    node = _new(OwnConst)
                    node.attrs, node.name = {}, ""
                    node.shape, node.dtype, node.fmt, node._value = arr.shape, arr.dtype, one[4], arr
                    node.stamp = _graph._write_counter
                    v = _new(Var)
                    v._node = node
                    return v
        fast = self._fast1
        if fast is not None:
            # one Var (alone or in a list) of the last call's shape, dtype and format:
            # onForward's fast path written out for one input (a tiny model's forward takes a
            # few microseconds: a shared helper measured 0.5 us slower per forward)
            kind = type(inputs)
            if kind is Var:
                node = inputs._node
            elif (kind is list or kind is tuple) and len(inputs) == 1 and type(inputs[0]) is Var:
                node = inputs[0]._node
            else:
                node = None
            shape, dtype, fmt, plan, other = fast
            if node is not None and node.dtype is dtype and node.shape == shape and node.fmt == fmt:
                arr = node.value if node.live else node._value
                if arr is not None:
                    threads = self._threads
                    set_threads = threads and (other or plan._fast is None or plan.threaded)
                    if set_threads:
                        _set_threads(threads)
                    if kind is Var:
                        # a one-output kernel's own call: its output is fresh, this Var's alone
                        one = getattr(plan.run, "one", None)
                        if one is not None:
                            out_fmt = plan.out_fmts[0]
                            if out_fmt != "NC4HW4":
                                if not set_threads:
                                    self._one = (shape, dtype, fmt, one, out_fmt)
                                return _own_var(one(arr), out_fmt)
                    outs = plan.run([arr])
                    fmts = plan.out_fmts
                    if kind is Var:
                        return _result(outs, 0, fmts[0])
                    res = []
                    for k in range(len(outs)):
                        res.append(_result(outs, k, fmts[k]))
                    return res
        outs = self.onForward(inputs)
        if isinstance(inputs, (Var, np.ndarray)):
            return outs[0]
        return outs

    __call__ = forward

    # ------------------------------------------------------------------ info
    @property
    def _shape_mutable(self) -> bool:
        return getattr(self, "_mutable", True)

    def get_info(self) -> dict:
        """Model information: version, bizCode, input and output names."""
        prog = self._program
        if prog is None:
            return {}
        net = prog.net
        if net is None:
            return {"version": "", "bizCode": "", "inputNames": [s.name for s in prog.inputs],
                    "outputNames": list(prog.output_names), "inputs": []}
        return {"version": net.version or "", "bizCode": net.bizCode or "",
                "inputNames": [s.name for s in prog.inputs], "outputNames": list(prog.output_names),
                "inputs": []}

    @property
    def name(self) -> str:
        """The module's name."""
        return self._name

    def set_name(self, name: str) -> None:
        """Set the module's name."""
        self._name = str(name)

    @property
    def parameters(self) -> list[Var]:
        """Trainable parameters (a loaded inference model has none, as in MNN)."""
        return list(self._params)

    @property
    def is_training(self) -> bool:
        """Whether the module is in training mode."""
        return self._training

    def train(self, isTrain: bool = True) -> None:  # noqa: N803 - MNN's name
        """Set training mode (mnnjit runs inference only; the flag is recorded)."""
        self._training = bool(isTrain)

    def load_parameters(self, parameters: Sequence[Var]) -> bool:
        """Replace the parameters' values (in ``parameters`` order); False when the count or a
        shape does not match."""
        parameters = list(parameters)
        if len(parameters) != len(self._params):
            return False
        if any(list(p.shape) != list(q.shape) for p, q in zip(self._params, parameters)):
            return False
        for p, q in zip(self._params, parameters):
            p.write(q.read_view() if isinstance(q, Var) else q)
        return True

    def clear_cache(self) -> None:
        """Drop the execution plans built so far (and the children's)."""
        if self._program is not None:
            self._program._plans.clear()
        self._last = self._fast_path = self._fast1 = self._one = None
        for c in self._children:
            c.clear_cache()

    def clone(self) -> "_Module":
        """A module sharing the same model: its weights and compiled plans are shared, while each
        call runs on activation buffers and placeholders of its own (clones, and one module, may
        run on any number of threads at once)."""
        m = _Module(self._program, self._rt, self._name)
        m._mutable = self._shape_mutable
        return m

    def _register_submodules(self, children: Sequence["_Module"]) -> None:
        self._children.extend(children)

    def _add_parameter(self, parameter: Var) -> int:
        self._params.append(parameter)
        return len(self._params) - 1

    def __repr__(self) -> str:
        return f"<_Module object at {hex(id(self))}>"

    def __reduce__(self):
        """Pickle by path and config: the unpickling process loads the same .mnn file (absolute path,
        which must exist there) with the same inputs, outputs, shape_mutable, threads and runtime
        manager (itself pickled by config). A user-defined ``Module`` pickles its own attributes
        (children loaded from files by path, Var parameters by value)."""
        if type(self) is not _Module:
            # per-call state (plans, fast-path keys, anything else the base sets up) is rebuilt fresh
            runtime_only = set(vars(_Module())) - set(_PICKLED_STATE)
            state = {k: v for k, v in self.__dict__.items() if k not in runtime_only}
            return (_rebuild_subclass, (type(self), state))
        prog = self._program
        path = getattr(prog, "path", "<bytes>") if isinstance(prog, Program) else "<bytes>"
        if path == "<bytes>":
            raise TypeError("only a Module loaded from a .mnn file (nn.load_module_from_file) pickles: "
                            "save a graph built from Vars with expr.save and load that file")
        config = {"input_names": [s.name for s in prog.inputs], "output_names": list(prog.output_names),
                  "shape_mutable": self._shape_mutable, "runtime_manager": self._rt}
        if self._rt is None:
            config.update(memory_mode=int(getattr(prog, "memory", 0)), num_thread=max(1, int(self._threads)))
        return (_rebuild_module, (os.path.abspath(path), config, self._name))


#: The base-class attributes a user-defined Module's pickle keeps (the rest is per-call state).
_PICKLED_STATE = ("_program", "_rt", "_name", "_training", "_params", "_threads", "_children", "_mutable")


def _rebuild_module(path: str, config: dict, name: str) -> _Module:
    """A Module from a pickled one's model path and load settings (see ``_Module.__reduce__``)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"unpickling a Module: its model file {path} does not exist in this process "
                                "(a Module pickles by path: the file must be at the same path where it is unpickled)")
    mod = load_module_from_file(path, **config)
    mod.set_name(name)
    return mod


def _rebuild_subclass(cls: type, state: dict) -> _Module:
    """A user-defined Module from its pickled attributes, with fresh per-call state."""
    mod = cls.__new__(cls)
    _Module.__init__(mod)
    mod.__dict__.update(state)
    return mod


def load_module_from_file(file_name: str, input_names: Sequence[str] = (), output_names: Sequence[str] = (),
                          dynamic: bool = False, shape_mutable: bool = True, rearrange: bool = False,
                          backend: Any = 0, memory_mode: Any = 0, power_mode: Any = 0, precision_mode: Any = 0,
                          num_thread: int = 1, runtime_manager: RuntimeManager | None = None,
                          thread_num: int | None = None) -> _Module:
    """Load a .mnn model as a Module (MNN's keyword arguments; see docs/COMPATIBILITY.md)."""
    if not isinstance(file_name, (str, os.PathLike)):
        raise TypeError(f"file_name must be a path, got {type(file_name).__name__}")
    if runtime_manager is not None and not isinstance(runtime_manager, RuntimeManager):
        raise TypeError("runtime_manager must come from nn.create_runtime_manager")
    if runtime_manager is None:
        resolve_backend(backend)
    weight_path = runtime_manager.external_path if runtime_manager is not None else None
    program = load_program(file_name, list(input_names or []), list(output_names or []), weight_path)
    memory = runtime_manager.memory if runtime_manager is not None else int(getattr(memory_mode, "value", memory_mode))
    program.memory = memory
    mod = _Module(program, runtime_manager, "")
    if runtime_manager is None and (thread_num or num_thread) > 1:
        mod._threads = int(thread_num or num_thread)
    mod._mutable = bool(shape_mutable)
    if shape_mutable and runtime_manager is not None and runtime_manager.backend_name == "npu":
        # MNN documents shape_mutable=False as required for NPU backends; here the model still runs,
        # its delegate partitions compiled once per input shape
        warnings.warn("the NPU backend (forward type 5) needs shape_mutable=False, as MNN documents; "
                      "loading with shape_mutable=True compiles the model for the NPU once per input shape",
                      UserWarning, stacklevel=2)
    if not shape_mutable:
        specs = program.inputs
        if all(s.dims is not None and all(d >= 0 for d in s.dims) for s in specs):
            sig = tuple((tuple(s.dims), s.dtype, s.fmt) for s in specs)
            mod._plan(sig)
    return mod


def load_module(inputs: Sequence[Var], outputs: Sequence[Var], for_training: bool = False) -> _Module:
    """A module computing ``outputs`` from ``inputs`` (Vars of one graph, e.g. from load_as_dict)."""
    from ..models.subgraph_module import GraphProgram
    return _Module(GraphProgram(list(inputs), list(outputs)), None, "")


class Module(_Module):
    """Base class of user-defined modules (pymnn's ``nn.Module``): assigning a module attribute
    registers a child, assigning a Var registers a parameter; subclasses define ``forward``."""

    def __init__(self) -> None:
        super().__init__()
        self.__dict__["_children_by_name"] = {}
        self.__dict__["_vars"] = {}

    def forward(self, x: Any) -> Any:
        """Defined by subclasses."""
        raise NotImplementedError

    def __call__(self, x: Any) -> Any:
        raise NotImplementedError("__call__ not implemented, please use 'forward' method in subclasses")

    def __setattr__(self, name: str, value: Any) -> None:
        self.__dict__[name] = value
        children = self.__dict__.get("_children_by_name")
        if children is None:
            return
        children.pop(name, None)
        if isinstance(value, _Module):
            value.set_name(name)
            children[name] = value
            self._register_submodules([value])
        elif isinstance(value, Var):
            value.name = name
            if name not in self._vars:
                self._vars[name] = value
                self._add_parameter(value)
            else:
                self._vars[name] = value
                self._params[self._params.index(next(p for p in self._params if p.name == name))] = value
