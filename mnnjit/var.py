"""``Var``: MNN's VARP, a user handle on a lazy graph node.

A Var points at an immutable :class:`~mnnjit.graph.Node`. Operators and methods build new nodes;
values are computed only when read (``read``, printing, ``__array__``, ``float``, ...). Assignment
(``x[i] = v``, ``write``, ``fill``) re-points the handle at a new node, so Vars built from the old
value keep it, as numpy arrays would.

Many methods are the ``mnnjit.numpy`` functions of the same name (as in pymnn, where
``Var.sum`` is ``MNN.numpy.sum``).
"""
from __future__ import annotations

import sys
from typing import Any, Iterator

import numpy as np

from . import graph as graph_mod
from ._dtypes import as_format, as_np_dtype, data_format, to_enum
from .graph import Node, bump_write_counter
from . import runtime as _rt
from .runtime import evaluate


def _np():
    from . import numpy as mnp
    return mnp


class OwnConst(Node):
    """A constant whose value is its Var's own memory: an array made for it alone (a model
    forward's output, ``nn.module``). As real MNN does with a forward's output, ``read()`` and
    ``np.asarray`` hand that array out without a copy, writable: later reads return it, and
    writes into it show in later reads and in expressions computed afterwards. Nothing else
    holds it, so no later computation writes into it."""

    __slots__ = ()
    # what every OwnConst has: class attributes in place of three of Node's slots (read-only on
    # instances). A forward makes one per output, where three stores fewer are ~1 % of a tiny model.
    op = "const"
    inputs = ()
    live = False

    @classmethod
    def constant(cls, value: np.ndarray, fmt: str = "NCHW") -> "OwnConst":
        """An OwnConst holding ``value``."""
        node = object.__new__(cls)
        node.attrs, node.name = {}, ""
        node.shape, node.dtype, node.fmt, node._value = value.shape, value.dtype, fmt, value
        node.stamp = graph_mod._write_counter
        return node


class Var:
    """A lazy array (MNN's VARP): see the module docstring."""

    __slots__ = ("_node", "__weakref__")
    __array_priority__ = 100.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("Var() cannot be created directly: use mnnjit.expr.const or mnnjit.numpy.array")

    @classmethod
    def _from_node(cls, node: Node) -> "Var":
        v = object.__new__(cls)
        v._node = node
        return v

    # ------------------------------------------------------------ metadata
    @property
    def shape(self) -> list[int]:
        """The shape, as a list (MNN returns lists)."""
        return list(self._node.shape)

    @property
    def dtype(self):
        """The MNN dtype enum member (``dtype.float``, ``dtype.int``, ...)."""
        return to_enum(self._node.dtype)

    @property
    def data_format(self) -> data_format:
        """The data format label (``data_format.NCHW``, ``NHWC`` or ``NC4HW4``)."""
        return data_format[self._node.fmt]

    @property
    def size(self) -> int:
        """Number of elements; an NC4HW4 Var counts its stored elements, channels padded to a multiple of 4
        (real MNN: a [1, 5, 2, 2] NC4HW4 Var has size 32)."""
        shape = self._node.shape
        if self._node.fmt == "NC4HW4" and len(shape) >= 2:
            rest = 1
            for d in shape[2:]:
                rest *= d
            return shape[0] * -(-shape[1] // 4) * 4 * rest
        return self._node.size

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self._node.shape)

    @property
    def name(self) -> str:
        """The node's name ('' when unnamed)."""
        return self._node.name

    @name.setter
    def name(self, value: str) -> None:
        self._node.name = str(value)

    @property
    def valid(self) -> bool:
        """Always True: mnnjit raises at build time instead of making invalid Vars."""
        return True

    @property
    def op_type(self) -> str:
        """MNN's op type name of the expression producing this Var (``Const``, ``Input``, ``BinaryOp``...)."""
        from .ops import registry
        node = self._node
        if node.op == "placeholder":
            return "Input"
        if node.op == "const" or node.value is not None and not node.live and node.op in ("const",):
            return "Const"
        opdef = registry.get(node.op)
        return opdef.mnn_type or node.op

    @property
    def inputs(self) -> list["Var"]:
        """The input Vars of this Var's expression."""
        return [Var._from_node(n) for n in self._node.inputs]

    # ------------------------------------------------------------ values
    def _value(self) -> np.ndarray:
        node = self._node
        v = node._value
        if v is not None and (not node.live or node.stamp == graph_mod._write_counter or node.op == "placeholder"):
            return v
        v = node.value
        if v is None:
            evaluate([node])
            # (``_value``: computed just now; another thread's placeholder write since then must
            # not make it read as stale)
            v = node._value
            while v is None:    # cleared by another thread reading it stale meanwhile: again
                evaluate([node])
                v = node._value
        return v

    def _user_value(self) -> tuple[np.ndarray, bool]:
        """The value for the user-facing reads (``read``, ``__array__``, printing) and whether it is a
        view of another node's value: a movement op (reshape, transpose, broadcast, slice) of computed
        values is a read-only numpy view of them, as numpy's own result would be, with no copy and no
        value cached (graph values stay contiguous for the compiler and the backends)."""
        node = self._node
        v = node._value
        if v is not None and (not node.live or node.stamp == graph_mod._write_counter or node.op == "placeholder"):
            return v, False
        if node.op in _VIEW_OPS:
            view = _movement_view(node, 8)
            if view is not None:
                return view, True
        return self._value(), False

    def read_view(self) -> np.ndarray:
        """The value as a read-only numpy array in the logical layout (no copy)."""
        node = self._node
        v = node._value
        if v is not None and not node.live:  # a computed constant (a model's output): no staleness
            return v
        return self._value()

    def _packed(self) -> np.ndarray:
        """The data as MNN stores it: NC4HW4 packs channels in blocks of 4 (zero padded)."""
        v = self._value()
        if self._node.fmt != "NC4HW4" or v.ndim < 2:
            return v
        from .layout import pack_nc4hw4
        return pack_nc4hw4(v)

    def read(self) -> np.ndarray:
        """The value as a writable numpy array (NC4HW4 data shown in MNN's packed order).

        As in real MNN, the result may be this Var's own memory: the computed value of an
        expression that nothing else shares (no other Var or expression holds the node, nothing
        else holds the array; see ``_take_own_value``) is handed out without a copy, writable;
        later ``read()`` calls return that same array, writes into it show in them and in
        expressions computed afterwards, and no later computation ever writes into it. Any other
        value (constants, inputs, values shared with other Vars or expressions, kernel buffers)
        is copied once, so writing into the result never changes a Var. A model forward's output
        made for it alone is its own memory from the start (``OwnConst``), handed out as it is. The result of a movement
        op (reshape, transpose, broadcast, slice) is copied straight from the values it moves.
        ``np.asarray(var)`` is the zero-copy view (read-only unless handed out by ``read()``).
        """
        node = self._node
        if type(node) is OwnConst:  # (never NC4HW4: see ``nn.module._result``)
            return node._value
        op = node.op
        if node.fmt == "NC4HW4" and node.size:
            packed = self._packed().ravel()
            return np.array(packed[: node.size].reshape(node.shape))
        if op in _VIEW_OPS:
            if op == "reshape" or op == "transpose":    # of a known value: copied at once (no read-only view)
                sv = node.inputs[0].value
                # (not of memory read() handed out: this Var computes and keeps its own value)
                if type(sv) is np.ndarray and not sv.flags.writeable:
                    if op == "reshape":
                        return sv.reshape(node.attrs["shape"]).copy()
                    return np.array(sv.transpose(node.attrs["perm"]))
            elif op == "slice":     # (split's pieces, flip): the same, through the slice's view
                sv = node.inputs[0].value
                if type(sv) is np.ndarray and not sv.flags.writeable:
                    at = node.attrs
                    return _copy_out(sv[tuple([slice(b, None if e < 0 else e, s) for b, e, s in
                                               zip(at["begin"], at["end"], at["step"])])])
            return _copy_out(self._user_value()[0])
        v = node._value
        if v is None:
            # (references to the node: ``self._node``, the local, getrefcount's argument: when
            # that is all, a fresh result is this Var's alone and is handed out as computed)
            own = _COUNTS_HOLDERS and _getrefcount(node) == 3
            eager = _rt._read_route
            if eager is not None:
                v = eager(node, own)
                if v is not None and own and v.flags.writeable:     # computed fresh, handed out as it is
                    return v
            if v is None:
                v = self._value()
        elif node.live and node.stamp != graph_mod._write_counter and op != "placeholder":
            v = self._value()
        if type(v) is not np.ndarray or op == "const" or op == "placeholder":
            return v.copy()
        if v.flags.writeable:       # handed out before: this Var's memory
            return v
        # the references counted: ``self._node`` and the local ``node`` (+ getrefcount's argument);
        # the node's ``_value`` and the local ``v`` (+ the argument)
        if _COUNTS_HOLDERS and _getrefcount(node) == 3 and _take_own_value(v):
            return v
        return v.copy()
    def read_as_tuple(self) -> tuple:
        """The data as a flat tuple of Python numbers (NC4HW4: the whole packed buffer)."""
        return tuple(self._packed().ravel().tolist())

    def write(self, data: Any) -> None:
        """Overwrite the data (keeps shape and dtype; a placeholder takes new contents)."""
        node = self._node
        if type(data) is np.ndarray and data.dtype is node.dtype and data.shape == node.shape:
            # a model's input in a user's loop: only the copy the Var owns is made
            arr = data.copy()
            arr.setflags(False)     # (read-only; positional: the keyword costs ~0.15 us more)
        else:
            from .ops.build import to_array
            arr = to_array(data, node.dtype)
            if arr.size != node.size:
                raise ValueError(f"write: got {arr.size} elements for a Var of shape {list(node.shape)}")
            arr = np.array(arr.reshape(node.shape), order="C")
            arr.flags.writeable = False
        if node.op == "placeholder":
            node.value = arr
            bump_write_counter()
        else:
            self._node = Node("const", (), {}, node.shape, node.dtype, node.fmt, arr, node.name)

    def fix_as_const(self) -> None:
        """Compute the value now and make this Var a constant."""
        node = self._node
        v = self._value()
        self._node = Node("const", (), {}, node.shape, node.dtype, node.fmt, v, node.name)

    def fix_as_placeholder(self) -> None:
        """Make this Var an input that can be written (keeps its current value if it has one)."""
        node = self._node
        v = node.value if node.op in ("const", "placeholder") else None
        self._node = Node("placeholder", (), {}, node.shape, node.dtype, node.fmt, v, node.name)

    def fix_as_trainable(self) -> None:
        """Make this Var a trainable constant (mnnjit has no training: it becomes a constant)."""
        self.fix_as_const()

    def close(self) -> None:
        """Drop this Var's inputs (it keeps its value when it has been computed)."""
        self.fix_as_const() if self._node.value is not None else None

    def copy_from(self, src: "Var") -> None:
        """Make this Var compute what ``src`` computes."""
        self._node = src._node

    def replace(self, src: "Var") -> None:
        """Replace this Var's expression with ``src``'s."""
        self._node = src._node

    def set_inputs(self, inputs: list["Var"]) -> None:
        """Re-point the inputs of this Var's op at ``inputs`` (same count; shapes are re-inferred)."""
        from .ops.build import make_node
        node = self._node
        if len(inputs) != len(node.inputs):
            raise ValueError(f"set_inputs: op {node.op} takes {len(node.inputs)} inputs, got {len(inputs)}")
        self._node = make_node(node.op, [i._node for i in inputs], node.attrs, node.fmt, node.name)

    def set_order(self, fmt: Any) -> None:
        """Relabel the data format without moving data."""
        node = self._node
        new = as_format(fmt)
        if node.op == "placeholder":
            node.fmt = new
            return
        from .ops.build import make_node
        self._node = make_node("copy", (node,), fmt=new) if node.value is None else \
            Node("const", (), {}, node.shape, node.dtype, new, node.value, node.name)

    def reorder(self, fmt: Any) -> None:
        """Same as ``set_order`` (relabel the data format)."""
        self.set_order(fmt)

    def resize(self, shape: list[int]) -> None:
        """Give a placeholder a new shape (its contents are dropped)."""
        node = self._node
        shape = tuple(int(s) for s in shape)
        if node.op != "placeholder":
            from .ops.build import reshape
            self._node = reshape(self, shape)._node
            return
        self._node = Node("placeholder", (), {}, shape, node.dtype, node.fmt, None, node.name)

    def sync(self) -> None:
        """Compute the value now (MNN syncs device data; mnnjit computes on the host).

        A placeholder that has not been written yet has nothing to compute: a no-op, as in MNN.
        """
        if self._node.op == "placeholder" and self._node.value is None:
            return
        self._value()

    @property
    def ptr(self) -> int:
        """Address of the computed data."""
        return int(self._value().ctypes.data)

    def copy_to_device_ptr(self, device_ptr: int, memory_type: int) -> None:
        """Copy the data to the address ``device_ptr``; mnnjit only has host memory (memory_type 0, CPU)."""
        if int(memory_type) != 0:
            raise RuntimeError(f"copy_to_device_ptr: mnnjit keeps data in host memory; memory_type {memory_type} "
                               "(a GPU backend) is not available, use 0 (CPU)")
        import ctypes
        data = np.ascontiguousarray(self._packed())
        ctypes.memmove(int(device_ptr), data.ctypes.data, data.nbytes)

    def set_device_ptr(self, device_ptr: int, memory_type: int) -> None:
        """Take this Var's data from host address ``device_ptr`` (memory_type 0, CPU; same shape and dtype)."""
        if int(memory_type) != 0:
            raise RuntimeError(f"set_device_ptr: mnnjit keeps data in host memory; memory_type {memory_type} "
                               "(a GPU backend) is not available, use 0 (CPU)")
        import ctypes
        node = self._node
        buf = np.empty(node.shape, node.dtype)
        ctypes.memmove(buf.ctypes.data, int(device_ptr), buf.nbytes)
        self.write(buf)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """numpy's conversion: the value without copying (read-only), unless ``copy`` or ``dtype``
        asks for a new array."""
        if self._node.fmt == "NC4HW4":
            v = self.read()
        else:
            v = self._user_value()[0]
        if dtype is not None and np.dtype(dtype) != v.dtype:
            return v.astype(dtype)
        return v.copy() if copy else v

    # ------------------------------------------------------------ printing and conversions
    def __repr__(self) -> str:
        return repr(self.read() if self._node.fmt == "NC4HW4" else self._user_value()[0])

    __str__ = __repr__

    def _scalar(self, kind: str):
        if self._node.size != 1:
            raise TypeError(f"only length-1 arrays can be converted to Python scalars (got size {self._node.size})")
        return self._value().reshape(()).item()

    def __float__(self) -> float:
        return float(self._scalar("float"))

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def __index__(self) -> int:
        if self._node.dtype.kind == "f" or self._node.size != 1:
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        return int(self._scalar("int"))

    def __bool__(self) -> bool:
        if self._node.size != 1:
            raise ValueError("The truth value of an array with more than one element is ambiguous. "
                             "Use a.any() or a.all()")
        return bool(self._scalar("bool"))

    def item(self, *idx: Any):
        """One element as a Python scalar (``item()`` needs a size-1 Var)."""
        v = self._value()
        if not idx:
            return self._scalar("item")
        if len(idx) == 1:
            return v.ravel()[idx[0]].item() if not isinstance(idx[0], tuple) else v[idx[0]].item()
        return v[idx].item()

    def tolist(self):
        """The value as nested Python lists."""
        return self._value().tolist()

    def __len__(self) -> int:
        if not self._node.shape:
            raise TypeError("len() of unsized object")
        return self._node.shape[0]

    def __contains__(self, value: Any) -> bool:
        """numpy's ``value in a``: whether any element equals ``value`` (any shape)."""
        return bool(np.asarray(B.binary("equal", self, value).read()).any())

    def _item(self, i: int) -> Any:
        """Item ``i`` along axis 0 as iteration gives it: a 0-d Var for a 1-D Var (pymnn's iteration yields
        Vars, where ``v[i]`` gives a Python number), else ``self[i]``."""
        if len(self._node.shape) == 1:
            return B.wrap(Node.constant(np.array(self.read_view()[i]), self._node.fmt))
        return self[i]

    def __iter__(self) -> Iterator[Any]:
        if not self._node.shape:
            raise TypeError("iteration over a 0-d array")
        if len(self._node.shape) == 1:
            fmt, values = self._node.fmt, self.read_view()
            for x in values:  # one read, then constants (slices copy, as in MNN)
                yield B.wrap(Node.constant(np.array(x), fmt))
            return
        for i in range(self._node.shape[0]):
            yield self[i]

    def __next__(self) -> Any:
        """The next item along axis 0 (pymnn Vars are their own iterators); StopIteration at the end."""
        if not self._node.shape:
            raise TypeError("iteration over a 0-d array")
        key = id(self)
        if key not in _NEXT_POS:
            _NEXT_POS[key] = 0
            _weakref.finalize(self, _NEXT_POS.pop, key, None)
        pos = _NEXT_POS[key]
        if pos >= self._node.shape[0]:
            _NEXT_POS[key] = 0
            raise StopIteration
        _NEXT_POS[key] = pos + 1
        return self._item(pos)

    def __delitem__(self, key: Any) -> None:
        raise ValueError("cannot delete array elements")

    def __hash__(self) -> int:
        return id(self)

    def __copy__(self) -> "Var":
        return self.copy()

    def __deepcopy__(self, memo: dict) -> "Var":
        return self.copy()

    def __reduce__(self):
        """Pickle by value: the logical-layout data, the data format and the name (a placeholder
        or a lazy expression unpickles as a constant holding its current value)."""
        # the logical value, not read(): read() shows NC4HW4 data in MNN's packed order
        return (_rebuild, (self._value(), self._node.fmt, self._node.name))

    # ------------------------------------------------------------ indexing
    def __getitem__(self, key: Any):
        from .ops.indexing import getitem
        out = getitem(self, key)
        if out._node.shape == () and _all_int_key(key):
            return out._value().item()
        return out

    def __setitem__(self, key: Any, value: Any) -> None:
        from .ops.indexing import setitem_node
        self._node = setitem_node(self._node, key, value)

    # ------------------------------------------------------------ shape methods
    @property
    def T(self) -> "Var":  # noqa: N802 - numpy's name
        """The transpose (axes reversed)."""
        return B.transpose(self)

    def astype(self, dtype: Any) -> "Var":
        """This Var converted to ``dtype`` (narrowed to MNN's 32-bit types)."""
        return B.cast(self, dtype)

    def copy(self, *args: Any, **kwargs: Any) -> "Var":
        """A copy (a new Var with the same value)."""
        return B.wrap(self._node)

    def reshape(self, *shape: Any, **kwargs: Any) -> "Var":
        """This Var with a new shape."""
        if "newshape" in kwargs or "shape" in kwargs:
            shape = kwargs.get("shape", kwargs.get("newshape"))
        elif len(shape) == 1:
            shape = shape[0]
        return B.reshape(self, shape)

    def transpose(self, *axes: Any) -> "Var":
        """Permute the axes (reverse them when none are given)."""
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (list, tuple))):
            axes = axes[0]
        return B.transpose(self, axes or None)

    def flatten(self, order: str = "C") -> "Var":
        """A 1-D copy."""
        return B.reshape(self, (-1,))

    ravel = flatten

    def __matmul__(self, other: Any) -> "Var":
        return B.matmul(self, other)

    def __rmatmul__(self, other: Any) -> "Var":
        return B.matmul(other, self)

    # ------------------------------------------------------------ arithmetic
    def __add__(self, o): return B.binary("add", self, o)
    def __radd__(self, o): return B.binary("add", o, self)
    def __sub__(self, o): return B.binary("sub", self, o)
    def __rsub__(self, o): return B.binary("sub", o, self)
    def __mul__(self, o): return B.binary("mul", self, o)
    def __rmul__(self, o): return B.binary("mul", o, self)
    def __truediv__(self, o): return B.binary("div", self, o)
    def __rtruediv__(self, o): return B.binary("div", o, self)
    def __floordiv__(self, o): return B.binary("floordiv", self, o)
    def __rfloordiv__(self, o): return B.binary("floordiv", o, self)
    def __mod__(self, o): return B.binary("mod", self, o)
    def __rmod__(self, o): return B.binary("mod", o, self)
    def __pow__(self, o, mod=None): return B.binary("pow", self, o)
    def __rpow__(self, o, mod=None): return B.binary("pow", o, self)
    def __and__(self, o): return B.binary("bitwise_and", self, o)
    def __rand__(self, o): return B.binary("bitwise_and", o, self)
    def __or__(self, o): return B.binary("bitwise_or", self, o)
    def __ror__(self, o): return B.binary("bitwise_or", o, self)
    def __xor__(self, o): return B.binary("bitwise_xor", self, o)
    def __rxor__(self, o): return B.binary("bitwise_xor", o, self)
    def __lshift__(self, o): return B.binary("left_shift", self, o)
    def __rlshift__(self, o): return B.binary("left_shift", o, self)
    def __rshift__(self, o): return B.binary("right_shift", self, o)
    def __rrshift__(self, o): return B.binary("right_shift", o, self)
    def __eq__(self, o): return B.binary("equal", self, o)  # type: ignore[override]
    def __ne__(self, o): return B.binary("not_equal", self, o)  # type: ignore[override]
    def __lt__(self, o): return B.binary("less", self, o)
    def __le__(self, o): return B.binary("less_equal", self, o)
    def __gt__(self, o): return B.binary("greater", self, o)
    def __ge__(self, o): return B.binary("greater_equal", self, o)
    def __neg__(self): return B.unary("neg", self)
    def __pos__(self): return B.wrap(self._node)
    def __abs__(self): return B.unary("abs", self)

    def __invert__(self):
        if B.is_boolean(self._node):
            return B.unary("logical_not", self)
        return B.unary("invert", self)

    def __iadd__(self, o): return self._inplace("add", o)
    def __isub__(self, o): return self._inplace("sub", o)
    def __imul__(self, o): return self._inplace("mul", o)
    def __itruediv__(self, o): return self._inplace("div", o)
    def __ifloordiv__(self, o): return self._inplace("floordiv", o)

    def _inplace(self, op: str, o: Any) -> "Var":
        out = B.binary(op, self, o)
        if out._node.dtype != self._node.dtype and self._node.dtype.kind != "f" and out._node.dtype.kind == "f":
            raise TypeError(f"Cannot cast ufunc '{op}' output from dtype('float32') to dtype('{self._node.dtype}')"
                            " with casting rule 'same_kind'")
        self._node = B.cast(out, self._node.dtype)._node
        return self

    def __round__(self, ndigits: int | None = None):
        return _np().around(self, ndigits or 0)

    # ------------------------------------------------------------ numpy methods (as pymnn attaches them)
    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        fn = _VAR_METHODS.get(name)
        if fn is None:
            raise AttributeError(f"'Var' object has no attribute '{name}'")
        target = getattr(_np(), fn, None)
        if target is None:
            raise AttributeError(f"'Var' object has no attribute '{name}'")
        return lambda *a, **k: target(self, *a, **k)


#: Var methods that are mnnjit.numpy functions, as in pymnn.
_VAR_METHODS = {n: n for n in (
    "all", "any", "argmax", "argmin", "argpartition", "argsort", "clip", "dot", "fill", "max", "mean", "min",
    "nonzero", "prod", "ptp", "repeat", "round", "searchsorted", "sort", "squeeze", "std", "sum", "swapaxes",
    "var", "cumsum", "cumprod", "partition", "trace", "diagonal",
)}
_VAR_METHODS.update({"max": "amax", "min": "amin"})


#: Positions of Vars used as iterators through ``next()`` (pymnn Vars are their own iterators).
import weakref as _weakref  # noqa: E402
_NEXT_POS: dict[int, int] = {}


def _all_int_key(key: Any) -> bool:
    items = key if isinstance(key, tuple) else (key,)
    import numbers
    return all(isinstance(k, (numbers.Integral, np.integer)) and not isinstance(k, (bool, np.bool_)) for k in items)


#: Movement ops whose numpy reference returns a view of its input.
_VIEW_OPS = frozenset({"reshape", "transpose", "broadcast_to", "slice"})
_VIEW_REFS: dict = {}


def _movement_view(node: Node, depth: int) -> np.ndarray | None:
    """A read-only numpy view computing movement ``node`` from known values (through at most
    ``depth`` movement ops), or None."""
    src = node.inputs[0]
    v = src.value
    if v is None:
        if src.op not in _VIEW_OPS or depth <= 0:
            return None
        v = _movement_view(src, depth - 1)
        if v is None:
            return None
    elif type(v) is not np.ndarray or v.flags.writeable:  # only views of immutable values
        return None
    op = node.op
    if op == "transpose":       # the methods, not numpy's Python wrappers: ~1 us less per read
        return v.transpose(node.attrs["perm"])
    if op == "reshape":
        out = v.reshape(node.attrs["shape"])
    else:
        ref = _VIEW_REFS.get(op)
        if ref is None:
            from .ops import registry
            ref = _VIEW_REFS[op] = registry.get(op).ref
        out = ref([v], node.attrs)
        if type(out) is not np.ndarray or out.shape != node.shape or out.dtype != node.dtype:
            return None
    if out.flags.writeable:  # the reference copied (a reshape of a non-contiguous view)
        out.flags.writeable = False
    return out


_getrefcount = sys.getrefcount


class _ProbeNode:
    __slots__ = ("_node", "_value", "base")


def _probe_read(holder: _ProbeNode) -> tuple[int, int, int]:
    """The reference counts ``Var.read`` and ``_take_own_value`` compare, taken the same way (a
    node held by one attribute and a local, a value held by an attribute, a local and a
    parameter, a base held by its view and a local)."""
    node = holder._node
    at_node = _getrefcount(node)
    v = node._value
    return (at_node,) + _probe_take(v)


def _probe_take(v: _ProbeNode) -> tuple[int, int]:
    at_value = _getrefcount(v)
    base = v.base
    return at_value, _getrefcount(base)


def _counts_holders() -> bool:
    """Whether this interpreter's reference counts see every holder as ``read()`` expects.

    Handing a value out without a copy relies on exact counts; an interpreter that borrows
    references for locals or defers counting (free-threaded builds) would give other numbers,
    and there ``read()`` always copies."""
    gil = getattr(sys, "_is_gil_enabled", None)
    if gil is not None and not gil():
        return False
    holder = _ProbeNode()
    holder._node = _ProbeNode()
    holder._node._value = _ProbeNode()
    holder._node._value.base = _ProbeNode()
    alone = _probe_read(holder)
    extra = (holder._node, holder._node._value, holder._node._value.base)
    shared = _probe_read(holder)
    del extra
    return alone == (3, 4, 3) and shared == (4, 5, 4)


#: whether ``read()`` may hand out a value's own memory (see ``_counts_holders``)
_COUNTS_HOLDERS = _counts_holders()


def _take_own_value(v: np.ndarray) -> bool:
    """Make ``v`` (a computed node's read-only value, referenced by the node and the caller's local
    only) writable when it owns its memory or is a whole view of an array nothing else holds;
    whether it did. Reference counts see every holder a Python object can have (other Vars, other
    nodes' values or views, caches, kernels' pools), so a value passing this is memory no one else
    can read or write."""
    # v: the node's ``_value``, the caller's local, this argument (+ getrefcount's argument)
    if _getrefcount(v) != 4:
        return False
    base = v.base
    if base is None:
        if not v.flags.owndata:
            return False
    # base: ``v.base``, the local (+ the argument): nothing else holds it (other views would)
    elif type(base) is not np.ndarray or base.base is not None or not base.flags.owndata \
            or _getrefcount(base) != 3 or base.nbytes != v.nbytes or not base.flags.writeable:
        return False
    v.flags.writeable = True
    return True


def _copy_out(v: np.ndarray) -> np.ndarray:
    """A new array holding movement view ``v``: in ``v``'s own axis order (a transpose copies as one
    pass over memory, as ``np.array`` does), except a broadcast view (zero strides), which is filled
    by assignment into a C-ordered array (numpy copies it block by block instead of element by
    element: ~10x faster)."""
    if 0 in v.strides and v.size > 1:
        out = np.empty(v.shape, v.dtype)
        np.copyto(out, v)
        return out
    return np.array(v)


def _rebuild(arr: np.ndarray, fmt: str, name: str = "") -> Var:
    """A constant Var from a pickled Var's value, data format and name (see ``Var.__reduce__``)."""
    from .graph import const_node
    return Var._from_node(const_node(arr, fmt, name))


from .ops import build as B  # noqa: E402  (after Var: build refers back to this module)
B._VAR = Var


def _fast_binary(op: str):
    """Var's operator method for elementwise ``op``: two Vars of a signature seen before build their
    node here (``B.binary``'s first branch, one call less: a numpy-style call pays this per op);
    anything else goes to ``B.binary``."""
    sig, computed, binary, new = B._EW_SIG, B._computed, B.binary, object.__new__

    def method(self, o):
        if type(o) is Var:
            na, nb = self._node, o._node
            if na.dtype is nb.dtype:
                hit = sig.get((op, na.dtype, na.shape, nb.shape))
                if hit is not None:
                    v = new(Var)
                    v._node = computed(op, (na, nb), hit[0], hit[1], na.fmt)
                    return v
        return binary(op, self, o)
    method.__name__ = f"__{op}__"
    return method


Var.__add__ = _fast_binary("add")
Var.__sub__ = _fast_binary("sub")
Var.__mul__ = _fast_binary("mul")
Var.__truediv__ = _fast_binary("div")
