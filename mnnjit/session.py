"""The V2 session API (``MNN.Interpreter``, ``Session``, ``Tensor``, ``OpInfo``) and the top-level
constants pymnn exposes (``Halide_Type_*``, ``Tensor_DimensionType_*``), over the same model
translation and execution plans as ``nn.load_module_from_file``.

Tensors hold numpy data in the logical layout of their dimension type: ``Caffe`` (NCHW) and
``Caffe_C4`` (NC4HW4, logically NCHW) or ``Tensorflow`` (NHWC). ``copyFrom`` / ``copyToHostTensor``
between a Tensorflow and a Caffe tensor of 4 dimensions transpose, as MNN does.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable, Sequence

import numpy as np

from . import var as _var
from .graph import Node
from .hostmem import is_address, read_address, read_buffer

Tensor_DimensionType_Tensorflow = 0
Tensor_DimensionType_Caffe = 1
Tensor_DimensionType_Caffe_C4 = 2


class HalideType:
    """A tensor element type (MNN exposes these as opaque capsules)."""

    __slots__ = ("name", "dtype")

    def __init__(self, name: str, dtype: Any) -> None:
        self.name = name
        self.dtype = None if dtype is None else np.dtype(dtype)

    def __repr__(self) -> str:
        return f"<Halide_Type_{self.name}>"


Halide_Type_Double = HalideType("Double", np.float64)
Halide_Type_Float = HalideType("Float", np.float32)
Halide_Type_Int = HalideType("Int", np.int32)
Halide_Type_Int64 = HalideType("Int64", np.int64)
Halide_Type_String = HalideType("String", None)
Halide_Type_Uint8 = HalideType("Uint8", np.uint8)
_STORAGE = {np.dtype(np.float32): Halide_Type_Float, np.dtype(np.int32): Halide_Type_Int,
            np.dtype(np.uint8): Halide_Type_Uint8, np.dtype(np.int8): Halide_Type_Int,
            np.dtype(np.float64): Halide_Type_Double, np.dtype(np.int64): Halide_Type_Int64}
_FMT_DIM = {"NCHW": Tensor_DimensionType_Caffe, "NC4HW4": Tensor_DimensionType_Caffe_C4,
            "NHWC": Tensor_DimensionType_Tensorflow}


def _halide(dtype: Any) -> HalideType:
    if isinstance(dtype, HalideType):
        if dtype.dtype is None:
            raise TypeError("Halide_Type_String tensors are not supported")
        return dtype
    return _STORAGE.get(np.dtype(dtype), Halide_Type_Float)


def _check_dim(dimension: int) -> int:
    if dimension not in (0, 1, 2):
        raise ValueError(f"dimension type must be Tensor_DimensionType_Tensorflow (0), Caffe (1) or Caffe_C4 (2), "
                         f"got {dimension!r}")
    return int(dimension)


class Tensor:
    """MNN's V2 Tensor: data, element type and dimension type (see module docstring)."""

    def __init__(self, *args: Any) -> None:
        from .var import Var
        self._dim = Tensor_DimensionType_Caffe
        self._type = Halide_Type_Float
        self._data = np.zeros((), np.float32)
        if not args:
            return
        first = args[0]
        if isinstance(first, (Var, Tensor)):
            if len(args) > 2:
                raise TypeError("Tensor(tensor_or_var, dimension) takes at most 2 arguments")
            if isinstance(first, Var):
                self._data = np.array(first.read_view(), copy=True)
                self._dim = _FMT_DIM[first._node.fmt]
            else:
                self._data = first._data.copy()
                self._dim = first._dim
            self._type = _halide(self._data.dtype)
            if len(args) == 2:
                self._dim = _check_dim(args[1])
            return
        if isinstance(first, (np.ndarray, list)) and len(args) == 1:
            # Tensor(data): an ndarray, or a list of values (real MNN: ``Tensor([2, 3])`` holds 2 and 3)
            self._data = np.array(first, copy=True)
            if self._data.dtype.kind in "iub":
                self._data = self._data.astype(np.int32)
            if self._data.dtype == np.float64:
                self._data = self._data.astype(np.float32)
            self._type = _halide(self._data.dtype)
            self._dim = Tensor_DimensionType_Tensorflow if self._data.ndim == 4 else Tensor_DimensionType_Caffe
            return
        shape = tuple(int(s) for s in first)
        if len(args) == 3:
            dtype, values, dim = args[1], None, args[2]
        elif len(args) == 4:
            dtype, values, dim = args[1], args[2], args[3]
        else:
            raise TypeError("Tensor(shape, dtype, dimension) or Tensor(shape, dtype, value_list, dimension)")
        self._type = _halide(dtype)
        self._dim = _check_dim(dim)
        if values is None:
            self._data = np.zeros(shape, self._type.dtype)
        else:
            size = int(np.prod(shape)) if shape else 1
            if is_address(values):  # an int address or a PyCapsule (Var.ptr): read size values of the type
                arr = read_address(values, size, self._type.dtype, "Tensor")
            elif isinstance(values, (bytes, bytearray, memoryview)):
                arr = read_buffer(values, self._type.dtype)
            elif isinstance(values, (float, bool, np.generic)):
                raise TypeError(f"Tensor: data must be a tuple, list, ndarray, bytes or an int address, "
                                f"not {type(values).__name__}")
            else:
                arr = np.asarray(values.read_view() if isinstance(values, Var) else values).astype(self._type.dtype)
            if arr.size != size:
                raise ValueError(f"Tensor: {arr.size} values for shape {list(shape)}")
            self._data = np.array(arr.reshape(shape), copy=True)

    # ---------------------------------------------------------------- info
    def getShape(self) -> tuple:  # noqa: N802 - MNN's names
        """The shape, as a tuple."""
        return tuple(self._data.shape)

    def getDataType(self) -> HalideType:  # noqa: N802
        """The element type (a ``Halide_Type_*`` value)."""
        return self._type

    def getDimensionType(self) -> int:  # noqa: N802
        """The dimension type (a ``Tensor_DimensionType_*`` value)."""
        return self._dim

    def getData(self) -> tuple:  # noqa: N802
        """The data, flattened, as a tuple of Python numbers."""
        return tuple(self._data.reshape(-1).tolist())

    def getNumpyData(self) -> np.ndarray:  # noqa: N802
        """A copy of the data as a numpy array of the tensor's shape."""
        return np.array(self._data, copy=True)

    def getHost(self) -> memoryview:  # noqa: N802
        """The tensor's memory (a writable memoryview over its buffer)."""
        return memoryview(self._data.reshape(-1))

    # ---------------------------------------------------------------- copies
    def _as_layout(self, data: np.ndarray, src_dim: int, dst_dim: int) -> np.ndarray:
        tf_src, tf_dst = src_dim == Tensor_DimensionType_Tensorflow, dst_dim == Tensor_DimensionType_Tensorflow
        if data.ndim == 4 and tf_src != tf_dst:
            return np.transpose(data, (0, 3, 1, 2) if tf_src else (0, 2, 3, 1))
        return data

    def copyFrom(self, source: "Tensor") -> bool:  # noqa: N802
        """Copy ``source``'s data into this tensor (converting between NHWC and NCHW layouts)."""
        if not isinstance(source, Tensor):
            raise TypeError(f"copyFrom expects a Tensor, got {type(source).__name__}")
        data = source._data
        if data.ndim == 4 and source._dim != self._dim:
            data = self._as_layout(data, source._dim, self._dim)
        if data.size != self._data.size:
            raise ValueError(f"copyFrom: source shape {list(source.getShape())} does not fit this tensor's "
                             f"shape {list(self.getShape())}")
        if data.shape != self._data.shape:
            data = data.reshape(self._data.shape)
        self._data = data.astype(self._type.dtype, copy=True)
        return True

    def copyFromHostTensor(self, source: "Tensor") -> bool:  # noqa: N802
        """Same as :meth:`copyFrom`."""
        return self.copyFrom(source)

    def fromNumpy(self, array: np.ndarray) -> None:  # noqa: N802
        """Take the data of ``array`` (same number of elements; converted to the tensor's type)."""
        arr = np.asarray(array)
        if arr.size != self._data.size:
            raise ValueError(f"fromNumpy: {arr.size} values for a tensor of shape {list(self.getShape())}")
        self._data = np.array(arr.reshape(self._data.shape), dtype=self._type.dtype, copy=True)

    def printTensorData(self) -> None:  # noqa: N802
        """Print the shape and data."""
        print(f"Tensor shape: {list(self.getShape())}")
        print(self._data)

    def copyToHostTensor(self, target: "Tensor") -> bool:  # noqa: N802
        """Copy this tensor's data into ``target`` (converting between NHWC and NCHW layouts)."""
        return target.copyFrom(self)

    def __repr__(self) -> str:
        return repr(self._data)


_getrefcount = sys.getrefcount


def _own_output(outs: list, k: int) -> np.ndarray:
    """Output ``k`` of a plan's ``outs`` (a new list per run) as an output tensor's data: the array
    itself when nothing else holds it (a fresh result: no copy), else a copy (memory the plan keeps
    or may write again)."""
    arr = outs[k]
    flags = arr.flags
    # holders of ``outs``: the caller's local and this parameter (+ getrefcount's argument); of a
    # fresh ``arr``: the list, this local and ``flags`` (+ the argument)
    if flags.c_contiguous and flags.writeable and flags.owndata and arr.base is None \
            and _var._COUNTS_HOLDERS and _getrefcount(outs) == 3 and _getrefcount(arr) == 4:
        return arr
    return np.array(arr, copy=True)


class OpInfo:
    """What a callback learns about one layer: name, type and flops (``runSessionWithCallBackInfo``)."""

    def __init__(self, name: str = "", type_: str = "", flops: float = 0.0) -> None:
        self._name, self._type, self._flops = name, type_, flops

    def getName(self) -> str:  # noqa: N802
        """The layer's name."""
        return self._name

    def getType(self) -> str:  # noqa: N802
        """The layer's MNN op type."""
        return self._type

    def getFlops(self) -> float:  # noqa: N802
        """The layer's work in millions of floating-point operations (output size x inputs per output)."""
        return self._flops


class Session:
    """A session of an Interpreter: its input and output tensors and the current plan."""

    def __init__(self, interpreter: "Interpreter | None" = None, config: dict | None = None) -> None:
        self._interp = interpreter
        self.config = dict(config or {})
        self.inputs: dict[str, Tensor] = {}
        self.outputs: dict[str, Tensor] = {}
        self.plan = None
        if interpreter is not None:
            for spec in interpreter._program.inputs:
                shape = tuple(1 if d < 0 else d for d in (spec.dims or ()))
                dim = _FMT_DIM.get(spec.fmt, Tensor_DimensionType_Caffe)
                self.inputs[spec.name] = Tensor(shape, _halide(spec.dtype), dim)
            for name in interpreter._program.output_names:
                self.outputs[name] = Tensor((), Halide_Type_Float, Tensor_DimensionType_Caffe)

    def cache(self) -> None:
        """Keep the session cached (sessions keep their plans already)."""

    def removeCache(self) -> None:  # noqa: N802
        """Drop the session's plan."""
        self.plan = None


class Interpreter:
    """MNN's V2 Interpreter over a .mnn file."""

    def __init__(self, model_path: str) -> None:
        from .models.program import load_program
        self._path = os.fspath(model_path)
        self._external: str | None = None
        self._program = load_program(self._path)
        self._mode: list[int] = []
        self._hints: dict[int, int] = {}
        self._cache_file: str | None = None

    # ---------------------------------------------------------------- runtime, sessions
    def createRuntime(self, config: dict) -> tuple:  # noqa: N802
        """A runtime (a RuntimeManager) for ``config`` and which config keys took effect."""
        from .nn.runtime_manager import RuntimeManager
        keys = ("backend", "precision", "memory", "power", "numThread")
        rt = RuntimeManager({k: v for k, v in dict(config).items() if k in keys})
        return rt, tuple(k in keys for k in config)

    def createSession(self, config: dict | None = None, runtime: Any = None) -> Session:  # noqa: N802
        """A new session (inputs at their declared shapes, outputs computed on resize/run)."""
        from .nn.runtime_manager import known_config
        config = known_config(dict(config or {}), "createSession")
        if runtime is None:
            self.createRuntime({k: v for k, v in config.items() if k in ("backend", "precision", "memory",
                                                                        "power", "numThread")})
        if config.get("saveTensors") or config.get("outputPaths"):
            names = list(config.get("outputPaths") or []) + list(config.get("saveTensors") or [])
            from .models.program import Program
            self._program = Program(self._program.net, self._path, [s.name for s in self._program.inputs],
                                    list(dict.fromkeys(list(self._program.output_names) + names)))
        session = Session(self, config)
        if 7 not in self._mode:
            self.resizeSession(session)
        return session

    def setCacheFile(self, cache_path: str) -> None:  # noqa: N802
        """Where kernel information is cached (compiled kernels are cached on disk by mnnjit)."""
        self._cache_file = os.fspath(cache_path)

    def setExternalFile(self, path: str) -> None:  # noqa: N802
        """Load external weights from ``path`` (the model is re-read)."""
        from .models.program import load_program
        self._external = os.fspath(path)
        self._program = load_program(self._path, weight_path=self._external)

    def updateCacheFile(self, session: Session, flag: int = 0) -> None:  # noqa: N802
        """Update the cache file after a run (nothing to write: kernels are cached when compiled)."""

    def setSessionMode(self, mode: int) -> None:  # noqa: N802
        """Record a session mode (``Session_Resize_Defer`` (7) defers the first resize)."""
        if not 0 <= int(mode) <= 9:
            raise ValueError(f"unknown session mode {mode}")
        self._mode.append(int(mode))

    def setSessionHint(self, mode: int, value: int) -> None:  # noqa: N802
        """Record an execution hint."""
        self._hints[int(mode)] = int(value)

    # ---------------------------------------------------------------- tensors
    def getSessionInput(self, session: Session, tensorName: str | None = None) -> Tensor:  # noqa: N802,N803
        """The input tensor ``tensorName`` (the first input when None)."""
        return self._pick(session.inputs, tensorName, "input")

    def getSessionInputAll(self, session: Session) -> dict:  # noqa: N802
        """All input tensors by name."""
        return dict(session.inputs)

    def getSessionOutput(self, session: Session, tensorName: str | None = None) -> Tensor:  # noqa: N802,N803
        """The output tensor ``tensorName`` (the first output when None)."""
        return self._pick(session.outputs, tensorName, "output")

    def getSessionOutputAll(self, session: Session) -> dict:  # noqa: N802
        """All output tensors by name."""
        return dict(session.outputs)

    @staticmethod
    def _pick(tensors: dict, name: str | None, what: str) -> Tensor:
        if name is None:
            return next(iter(tensors.values()))
        if name not in tensors:
            raise KeyError(f"the session has no {what} tensor {name!r} ({what}s: {list(tensors)})")
        return tensors[name]

    def resizeTensor(self, tensor: Tensor, shape: Sequence[int]) -> None:  # noqa: N802
        """Give ``tensor`` a new shape (its contents are reset)."""
        tensor._data = np.zeros(tuple(int(s) for s in shape), tensor._type.dtype)

    def _signature(self, session: Session) -> tuple:
        sig = []
        for spec in self._program.inputs:
            t = session.inputs[spec.name]
            sig.append((t._data.shape, spec.dtype, spec.fmt))
        return tuple(sig)

    def resizeSession(self, session: Session) -> None:  # noqa: N802
        """Build the plan for the input tensors' current shapes and size the outputs."""
        plan = self._program.plan(self._signature(session))
        session.plan = plan
        if not plan.dynamic:
            for name, node, fmt in zip(self._program.output_names, plan.outputs, plan.out_fmts):
                t = session.outputs[name]
                if t.getShape() != node.shape:
                    t._data = np.zeros(node.shape, node.dtype)
                    t._type = _halide(node.dtype)
                t._dim = _FMT_DIM.get(fmt, Tensor_DimensionType_Caffe)

    def _feeds(self, session: Session) -> list[np.ndarray]:
        arrays = []
        for spec in self._program.inputs:
            t = session.inputs[spec.name]
            arrays.append(np.ascontiguousarray(t._data, dtype=spec.dtype))
        return arrays

    def runSession(self, session: Session) -> int:  # noqa: N802
        """Run the model on the session's input tensors; outputs land in the output tensors. 0 = OK."""
        sig, arrays = [], []
        tensors = session.inputs
        for spec in self._program.inputs:      # (``_signature`` and ``_feeds`` in one pass)
            data = tensors[spec.name]._data
            sig.append((data.shape, spec.dtype, spec.fmt))
            arrays.append(data if data.dtype is spec.dtype and data.flags.c_contiguous
                          else np.ascontiguousarray(data, dtype=spec.dtype))
        plan = session.plan
        if plan is None or plan.signature != tuple(sig):
            self.resizeSession(session)
            plan = session.plan
        outs = plan.run(arrays)
        names, fmts = self._program.output_names, plan.out_fmts
        for k in range(len(outs)):      # (no zip: ``_own_output`` counts the holders of ``outs``)
            t = session.outputs[names[k]]
            t._data = _own_output(outs, k)
            t._type = _STORAGE.get(t._data.dtype) or _halide(t._data.dtype)
            t._dim = _FMT_DIM.get(fmts[k], Tensor_DimensionType_Caffe)
        return 0

    def runSessionWithCallBack(self, session: Session, begin_callback: Callable | None = None,  # noqa: N802
                               end_callback: Callable | None = None) -> int:
        """``runSession`` calling ``begin_callback(input_tensors, name)`` before and
        ``end_callback(output_tensors, name)`` after each layer; a False return stops the run."""
        return self._run_traced(session, begin_callback, end_callback, info=False)

    def runSessionWithCallBackInfo(self, session: Session, begin_callback: Callable | None = None,  # noqa: N802
                                   end_callback: Callable | None = None) -> int:
        """Like ``runSessionWithCallBack`` with an :class:`OpInfo` (name, type, flops) per layer."""
        return self._run_traced(session, begin_callback, end_callback, info=True)

    def _run_traced(self, session: Session, begin: Callable | None, end: Callable | None, info: bool) -> int:
        from .runtime import evaluate
        prog = self._program
        feeds = [Node("placeholder", (), {}, a.shape, a.dtype, spec.fmt, name=spec.name)
                 for spec, a in zip(prog.inputs, self._feeds(session))]
        # fresh placeholders: nothing computed before depends on them (no write-counter bump,
        # which would also invalidate values other threads are computing)
        for p, a in zip(feeds, self._feeds(session)):
            p.value = a
        trace: list = []
        tensors: dict = {}
        prog.translate(feeds, dynamic=True, trace=trace, tensors=tensors)

        def wrap(idx: list[int]) -> list[Tensor]:
            out = []
            for t in idx:
                node = tensors.get(t)
                if node is None or node.dtype is None:
                    continue
                evaluate([node])
                tt = Tensor(node.shape, _halide(node.dtype), np.asarray(node._value),
                            _FMT_DIM.get(node.fmt, Tensor_DimensionType_Caffe))
                out.append(tt)
            return out

        for op, ins, outs in trace:
            name = op.name or ""
            label: Any = name
            if info:
                flops = 0.0
                out_nodes = [tensors[t] for t in outs if t in tensors and tensors[t].dtype is not None]
                in_size = sum(tensors[t].size for t in ins if t in tensors and tensors[t].dtype is not None)
                if out_nodes:
                    flops = sum(n.size for n in out_nodes) * max(1, in_size // max(1, out_nodes[0].size)) / 1e6
                label = OpInfo(name, str(op.type), float(flops))
            if begin is not None and begin(wrap(ins), label) is False:
                break
            out_tensors = wrap(outs)
            if end is not None and end(out_tensors, label) is False:
                break
        outs = [tensors[t] for t in prog.outputs if t in tensors]
        if len(outs) == len(prog.outputs):
            evaluate(outs)
            for name, node in zip(prog.output_names, outs):
                t = session.outputs[name]
                t._data = np.array(node._value, copy=True)   # (computed just now)
                t._type = _halide(node.dtype)
        return 0

    # ---------------------------------------------------------------- misc
    def getSessionInfo(self, session: Session, code: int) -> float:  # noqa: N802
        """Session information: 0 memory (MB), 1 flops (M), 2 backend type, 3 resize status."""
        if code == 0:
            return float(sum(t._data.nbytes for t in session.outputs.values()) / 2**20)
        if code == 1:
            return float(sum(n.size for n in (session.plan.outputs if session.plan else [])) / 1e6)
        if code == 2:
            return 0.0
        return 0.0

    def updateSessionToModel(self, session: Session) -> None:  # noqa: N802
        """Write trained parameters back (an inference session has none)."""

    def getModelVersion(self) -> str:  # noqa: N802
        """The converter version recorded in the model."""
        return self._program.net.version or ""

    def cache(self) -> None:
        """Keep the interpreter cached (plans are kept on the model already)."""

    def removeCache(self) -> None:  # noqa: N802
        """Drop cached plans."""
        self._program._plans.clear()


def get_model_uuid(model_path: str) -> str:
    """The model's uuid (written by the converter)."""
    from .format import read_net
    return read_net(model_path, load_external=False).mnn_uuid or ""
