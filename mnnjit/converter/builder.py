"""Emit MNN ops for one graph (the main graph or a control-flow subgraph).

A :class:`Val` is what the converter knows about an ONNX value: its MNN tensor index once written,
its value when it is known while converting (constants, folded shape arithmetic), its static shape
and its ONNX element type. A :class:`GraphBuilder` owns one graph's tensor table and op list and
writes ops in the form real MNN's converter writes them (CNN ops between NCHW <-> NC4HW4
conversions, integer constants narrowed to int32).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from ..format import Op

#: A static shape: one entry per axis, None where the size is only known at run time.
Shape = Optional[tuple]

_INT32 = np.iinfo(np.int32)


@dataclass
class Val:
    """An ONNX value while converting (see the module docstring)."""
    index: Optional[int] = None
    const: Optional[np.ndarray] = None
    shape: Shape = None
    dtype: np.dtype = np.dtype(np.float32)
    #: the Convolution op whose output this is (only through layout conversions): activations and
    #: batch normalization following it fold into it
    conv: Any = None
    #: the axis of ``conv``'s output channels in this value (1 for a convolution, -1 for a MatMul
    #: written as a 1x1 convolution): per-channel scales and offsets fold into the convolution
    conv_axis: int = 1
    #: the same values in NC4HW4 layout (a CNN op's output before its NCHW conversion): elementwise
    #: ops between CNN ops run on it, as real MNN's converter leaves them
    nc4: Optional[int] = None

    @property
    def rank(self) -> Optional[int]:
        """Number of axes, when known."""
        if self.const is not None:
            return self.const.ndim
        return None if self.shape is None else len(self.shape)

    @property
    def static_shape(self) -> Optional[tuple]:
        """The shape when every axis is known."""
        if self.const is not None:
            return tuple(self.const.shape)
        if self.shape is None or any(d is None for d in self.shape):
            return None
        return tuple(self.shape)

    def dim(self, axis: int) -> Optional[int]:
        """Size of ``axis`` (negative counts from the end) when known."""
        shp = tuple(self.const.shape) if self.const is not None else self.shape
        if shp is None or not -len(shp) <= axis < len(shp):
            return None
        return shp[axis]

    @property
    def is_float(self) -> bool:
        """Whether the ONNX element type is a floating-point type."""
        return self.dtype.kind == "f"


def const_val(array: Any, dtype: Any = None) -> Val:
    """A Val for a known value."""
    arr = np.asarray(array) if dtype is None else np.asarray(array, dtype=dtype)
    return Val(const=arr, shape=tuple(arr.shape), dtype=arr.dtype)


def mnn_dtype(dtype: np.dtype) -> str:
    """The MNN DataType a value of ONNX element type ``dtype`` has in MNN (64-bit narrowed to 32)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return "DT_FLOAT"
    if dtype == np.uint8:
        return "DT_UINT8"
    if dtype == np.int8:
        return "DT_INT8"
    return "DT_INT32"  # int16/32/64, uint16/32/64 and bool (0/1) run as int32 in MNN


def narrow(array: np.ndarray) -> np.ndarray:
    """``array`` in the storage type MNN gives it (float32, int32, uint8 or int8). Integers outside
    the int32 range saturate (ONNX uses INT64_MAX for "to the end" in slices)."""
    arr = np.asarray(array)
    dt = mnn_dtype(arr.dtype)
    if dt == "DT_FLOAT":
        return arr.astype(np.float32)
    if dt == "DT_INT32":
        if arr.dtype.kind in "iu" and (arr.dtype.itemsize > 4 or arr.dtype == np.uint32):
            arr = np.clip(arr, _INT32.min, _INT32.max)
        return arr.astype(np.int32)
    return arr


def blob(array: np.ndarray) -> dict:
    """A ``Blob`` table holding ``array`` (narrowed, see :func:`narrow`)."""
    arr = narrow(array)
    dt = mnn_dtype(arr.dtype)
    field = {"DT_FLOAT": "float32s", "DT_INT32": "int32s", "DT_UINT8": "uint8s", "DT_INT8": "int8s"}[dt]
    return {"dims": np.asarray(arr.shape, np.int32) if arr.ndim else None, "dataFormat": "NCHW",
            "dataType": dt, field: np.ascontiguousarray(arr).reshape(-1)}


class GraphBuilder:
    """Tensor table and op list of one MNN graph."""

    def __init__(self, reserved: Iterable[str] = ()) -> None:
        self.ops: list[Op] = []
        self.names: list[str] = []
        self._used: set[str] = set()
        #: names other values of the graph will take (auto names avoid them)
        self._reserved: set[str] = set(reserved)
        self._const_cache: dict[tuple, int] = {}
        #: tensor index -> the op producing it
        self.producer: dict[int, Op] = {}
        self._auto = 0

    # ---------------------------------------------------------------- tensors
    def _fresh(self, base: Optional[str]) -> str:
        """``base`` if no tensor has that name, else ``base__<n>`` with a free ``n``."""
        if base and base not in self._used:
            return base
        while True:
            self._auto += 1
            cand = f"{base or 't'}__{self._auto}"
            if cand not in self._used and cand not in self._reserved:
                return cand

    def new_tensor(self, name: Optional[str] = None) -> int:
        """A new tensor index with a unique name (``name`` when free)."""
        name = self._fresh(name)
        self._used.add(name)
        self.names.append(name)
        return len(self.names) - 1

    def rename(self, index: int, name: str, steal_from: Optional[int] = None) -> bool:
        """Give tensor ``index`` (and the op producing it, when it is that op's first output) the
        name ``name`` if no other tensor has it, or if the one that has it is numbered from
        ``steal_from`` on (that one is renamed); returns whether it did."""
        if self.names[index] == name:
            return True
        if name in self._used and steal_from is not None:
            holder = self.names.index(name)
            if holder >= steal_from and holder != index:
                fresh = self._fresh(name)
                self._used.discard(name)
                self._used.add(fresh)
                self.names[holder] = fresh
                op = self.producer.get(holder)
                if op is not None and op.outputIndexes and op.outputIndexes[0] == holder:
                    op.name = fresh
        if name in self._used:
            return False
        self._used.discard(self.names[index])
        self._used.add(name)
        self.names[index] = name
        op = self.producer.get(index)
        if op is not None and op.outputIndexes and op.outputIndexes[0] == index:
            op.name = name
        return True

    # ---------------------------------------------------------------- ops
    def op(self, type_: str, inputs: Sequence[int], main_type: Optional[str] = None,
           main: Optional[dict] = None, name: Optional[str] = None, n_out: int = 1,
           out_names: Optional[Sequence[str]] = None) -> list[int]:
        """Append an op; returns its output tensor indexes."""
        names = list(out_names or [])
        outs = [self.new_tensor(names[k] if k < len(names) else (f"{name}" if k == 0 else f"{name}_{k}")
                                if name else None) for k in range(n_out)]
        op = Op(type=type_, name=self.names[outs[0]] if outs else (name or type_), inputIndexes=list(inputs),
                outputIndexes=outs, main_type=main_type, main=main, defaultDimentionFormat="NCHW")
        self.ops.append(op)
        for t in outs:
            self.producer[t] = op
        return outs

    def op1(self, type_: str, inputs: Sequence[int], main_type: Optional[str] = None,
            main: Optional[dict] = None, name: Optional[str] = None) -> int:
        """Append a one-output op; returns its output tensor index."""
        return self.op(type_, inputs, main_type, main, name)[0]

    def const(self, array: Any, name: Optional[str] = None) -> int:
        """A Const op holding ``array`` (identical small constants are shared)."""
        arr = narrow(np.asarray(array))
        key = None
        if arr.size <= 16:
            key = (arr.dtype.str, arr.shape, arr.tobytes())
            hit = self._const_cache.get(key)
            if hit is not None:
                return hit
        t = self.op1("Const", [], "Blob", blob(arr), name or "Const")
        if key is not None:
            self._const_cache[key] = t
        return t

    def ints(self, values: Sequence[int], name: Optional[str] = None) -> int:
        """A 1-D int32 Const."""
        return self.const(np.asarray(list(values), np.int32).reshape(-1), name)

    def scalar(self, value: Any, dtype: Any = np.float32, name: Optional[str] = None) -> int:
        """A 0-D Const."""
        return self.const(np.asarray(value, dtype), name)

    # ---------------------------------------------------------------- common op forms
    def binary(self, kind: str, a: int, b: int, name: Optional[str] = None) -> int:
        """A BinaryOp (``kind`` is MNN's BinaryOpOperation name)."""
        return self.op1("BinaryOp", [a, b], "BinaryOp", {"opType": kind, "T": "DT_FLOAT"}, name)

    def unary(self, kind: str, a: int, name: Optional[str] = None) -> int:
        """A UnaryOp (``kind`` is MNN's UnaryOpOperation name)."""
        return self.op1("UnaryOp", [a], "UnaryOp", {"opType": kind, "T": "DT_FLOAT"}, name)

    def to_nc4(self, t: int, name: Optional[str] = None) -> int:
        """NCHW -> NC4HW4 (the layout of MNN's CNN ops)."""
        return self.op1("ConvertTensor", [t], "TensorConvertInfo", {"source": "NCHW", "dest": "NC4HW4"},
                        f"{name or self.names[t]}__tr4")

    def to_nchw(self, t: int, name: Optional[str] = None) -> int:
        """NC4HW4 -> NCHW."""
        return self.op1("ConvertTensor", [t], "TensorConvertInfo", {"source": "NC4HW4", "dest": "NCHW"}, name)

    def cnn(self, type_: str, x: int, main_type: str, main: dict, name: str, extra: Sequence[int] = ()) -> int:
        """A CNN op on an NCHW tensor: converted to NC4HW4 and back around it."""
        y = self.op1(type_, [self.to_nc4(x, name)] + list(extra), main_type, main, f"{name}__nc4")
        return self.to_nchw(y, name)

    def reshape(self, x: int, dims: Sequence[int] | int, name: Optional[str] = None) -> int:
        """Reshape to constant ``dims`` (0 copies the input's size, -1 is inferred) or to a shape tensor."""
        shape = dims if isinstance(dims, int) else self.ints(dims)
        return self.op1("Reshape", [x, shape], "Reshape", {"dimType": "NCHW"}, name)

    def unsqueeze(self, x: int, axes: Sequence[int], name: Optional[str] = None) -> int:
        """Insert axes of size 1."""
        return self.op1("Unsqueeze", [x], "SqueezeParam", {"squeezeDims": np.asarray(axes, np.int32)}, name)

    def squeeze(self, x: int, axes: Sequence[int], name: Optional[str] = None) -> int:
        """Remove axes of size 1."""
        return self.op1("Squeeze", [x], "SqueezeParam", {"squeezeDims": np.asarray(axes, np.int32)}, name)

    def permute(self, x: int, perm: Sequence[int], name: Optional[str] = None) -> int:
        """Transpose with permutation ``perm``."""
        return self.op1("Permute", [x], "Permute", {"dims": np.asarray(perm, np.int32)}, name)

    def concat(self, xs: Sequence[int], axis: int, name: Optional[str] = None) -> int:
        """Concatenate along ``axis``."""
        return self.op1("Concat", list(xs), "Axis", {"axis": int(axis)}, name)

    def shape_of(self, x: int, name: Optional[str] = None) -> int:
        """The int32 shape of ``x`` at run time."""
        return self.op1("Shape", [x], None, None, name)

    def slice1(self, x: int, begin: int, end: int, axis: int = 0, name: Optional[str] = None) -> int:
        """``x[begin:end]`` along ``axis`` (ONNX Slice semantics)."""
        return self.op1("StridedSlice", [x, self.ints([begin]), self.ints([end]), self.ints([axis]), self.ints([1])],
                        "StridedSliceParam", {"Index": "DT_INT32", "T": "DT_FLOAT", "fromType": 1}, name)

    def gather(self, x: int, index: int, axis: int, name: Optional[str] = None) -> int:
        """``take(x, index, axis)`` (indices must be non-negative)."""
        return self.op1("GatherV2", [x, index, self.scalar(axis, np.int32)], "GatherV2",
                        {"Taxis": "DT_INT32", "Tindices": "DT_INT32", "Tparams": "DT_FLOAT"}, name)

    def cast(self, x: int, dst: str, name: Optional[str] = None) -> int:
        """Cast to MNN DataType ``dst``."""
        return self.op1("Cast", [x], "CastParam", {"srcT": "DT_FLOAT", "dstT": dst}, name)

    def identity(self, x: int, name: Optional[str] = None) -> int:
        """A copy of ``x`` under another name."""
        return self.op1("Identity", [x], None, None, name)
