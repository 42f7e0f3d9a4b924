"""Building graph nodes: the one place front ends turn arguments into nodes.

Every front end (numpy, cv, expr, nn, Var operators) builds nodes through these helpers, which
apply MNN's dtype rules, check arguments (raising numpy's exception types with the shapes and dtypes
in the message) and infer the output shape and dtype through the op registry, before any work.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .._dtypes import F32, I32, as_np_dtype, narrow, result_dtype
from ..graph import Node, const_node
from . import registry
from .elementwise import BOOLEAN_OPS
from .reduce import reduced_shape

try:  # numpy >= 1.25
    from numpy.exceptions import AxisError
except ImportError:  # pragma: no cover
    AxisError = np.AxisError  # type: ignore[attr-defined]


_VAR = None


def _var_cls():
    """The Var class (imported on first use: var.py imports this module)."""
    global _VAR
    if _VAR is None:
        from ..var import Var
        _VAR = Var
    return _VAR


# ---------------------------------------------------------------- conversion to nodes

def to_array(data: Any, dtype: Any = None) -> np.ndarray:
    """Convert Python data (scalars, nested lists, ndarrays, Vars) to a numpy array of a storage dtype."""
    Var = _var_cls()
    if isinstance(data, Var):
        arr = data.read_view()
    elif isinstance(data, (list, tuple)) and any(isinstance(d, Var) for d in _flat_items(data)):
        arr = np.array(_deep_read(data))
    else:
        arr = np.asarray(data)
    if arr.dtype.kind in "OUSVMmc":
        raise TypeError(f"mnnjit cannot make an array of {arr.dtype} data (from {type(data).__name__})")
    if dtype is not None:
        target = as_np_dtype(dtype)
        if arr.dtype != target:
            if arr.dtype.kind == "f" and target.kind in "iu":
                with np.errstate(invalid="ignore"):
                    arr = arr.astype(target)
            else:
                arr = arr.astype(target)
        return arr
    target = narrow(arr.dtype)
    return arr if arr.dtype == target else arr.astype(target)


def _flat_items(data):
    for d in data:
        if isinstance(d, (list, tuple)):
            yield from _flat_items(d)
        else:
            yield d


def _deep_read(data):
    Var = _var_cls()
    if isinstance(data, Var):
        return data.read_view()
    if isinstance(data, (list, tuple)):
        return [_deep_read(d) for d in data]
    return data


_SCALAR_CACHE: dict = {}


def python_scalar_dtype(value: Any) -> np.dtype | None:
    """The dtype a Python scalar operand takes (int/bool -> int32, float -> float32); None if not one."""
    t = type(value)
    if t is float:
        return F32
    if t is int or t is bool:
        return I32
    return None


def scalar_node(value: Any, dtype: np.dtype | None = None) -> Node:
    """A 0-d const node for a Python scalar (int -> int32, float -> float32, bool -> int32).

    Nodes are immutable, so the nodes of common scalars are shared (cached).
    """
    # -0.0 == 0.0: the sign is part of the key (a / -0.0 is not a / 0.0)
    key = (type(value), value, dtype, isinstance(value, float) and math.copysign(1.0, value) < 0)
    try:
        hit = _SCALAR_CACHE.get(key)
    except TypeError:
        hit = None
    if hit is not None:
        return hit
    node = _scalar_node(value, dtype)
    if len(_SCALAR_CACHE) < 4096 and value == value:
        _SCALAR_CACHE[key] = node
    return node


def _scalar_node(value: Any, dtype: np.dtype | None) -> Node:
    if dtype is None:
        if isinstance(value, (bool, np.bool_)):
            dtype = I32
        elif isinstance(value, numbers.Integral):
            dtype = I32
        elif isinstance(value, numbers.Real):
            dtype = F32
        else:
            raise TypeError(f"unsupported operand type: {type(value).__name__}")
    with np.errstate(over="ignore", invalid="ignore"):
        arr = np.array(value).astype(dtype)
    return const_node(arr)


def as_node(x: Any) -> Node:
    """The node behind a Var, or a const node for Python/numpy data."""
    Var = _var_cls()
    if isinstance(x, Var):
        return x._node
    if isinstance(x, Node):
        return x
    if isinstance(x, (numbers.Number, np.bool_)) and not isinstance(x, np.generic):
        return scalar_node(x)
    arr = to_array(x)
    if arr is x:  # never freeze or alias the caller's array
        arr = arr.copy()
    return const_node(arr)


def wrap(node: Node):
    """A new Var handle on ``node``."""
    return _new_var(node)


def _new_var(node: Node):
    v = _new_obj(_VAR or _var_cls())
    v._node = node
    return v


_new_obj = object.__new__


_OPS = registry._REGISTRY
_computed = Node.computed


def make_node(op: str, inputs: Sequence[Node], attrs: dict | None = None, fmt: str | None = None,
              name: str = "") -> Node:
    """Build a node of registered op ``op``: its shape and dtype come from the op's ``infer``."""
    attrs = {} if attrs is None else attrs
    opdef = _OPS.get(op) or registry.get(op)
    if type(inputs) is not tuple:
        inputs = tuple(inputs)
    if fmt is None:
        fmt = inputs[0].fmt if inputs else "NCHW"
    if opdef.n_out > 1:
        metas = opdef.infer(inputs, attrs)
        attrs = dict(attrs, out_meta=tuple((tuple(s), np.dtype(d)) for s, d in metas))
        return Node(op, inputs, attrs, (), None, fmt, name=name)
    shape, dtype = opdef.infer(inputs, attrs)
    if type(shape) is not tuple:
        shape = tuple(int(d) for d in shape)
    if type(dtype) is not _DTYPE_T and not isinstance(dtype, np.dtype):
        dtype = np.dtype(dtype)
    return Node(op, inputs, attrs, shape, dtype, fmt, name=name)


_DTYPE_T = type(F32)


#: multi-output ops whose outputs' shapes and dtypes follow from the inputs' shapes and dtypes and
#: the attributes alone (never from values): ``make`` caches them per signature
_SHAPE_ONLY_MULTI = frozenset({"svd", "divmod", "modf", "frexp"})
#: (op, inputs' shapes and dtypes, attributes) -> ``out_meta`` of a ``_SHAPE_ONLY_MULTI`` op
_MULTI_SIG: dict = {}


def make(op: str, inputs: Sequence[Any], attrs: dict | None = None, fmt: str | None = None):
    """Build a node of op ``op`` from Vars/data and return a Var (a tuple of Vars for multi-output ops)."""
    nodes = [as_node(i) for i in inputs]
    if op in _SHAPE_ONLY_MULTI and fmt is None and nodes:
        return _make_outputs(op, tuple(nodes), {} if attrs is None else attrs)
    node = make_node(op, nodes, attrs, fmt)
    if node.dtype is None:  # multi-output
        return tuple(wrap(n) for n in split_outputs(node))
    return wrap(node)


def _make_outputs(op: str, nodes: tuple[Node, ...], attrs: dict) -> tuple:
    """``make`` of a ``_SHAPE_ONLY_MULTI`` op: the inference (and its checks) once per signature."""
    try:
        key: Any = (op, tuple([(n.shape, n.dtype) for n in nodes]), tuple(attrs.items()))
        meta = _MULTI_SIG.get(key)
    except TypeError:       # (an unhashable attribute value: no caching)
        key = meta = None
    if meta is None:
        src = make_node(op, nodes, attrs)
        meta = src.attrs["out_meta"]
        if key is not None and len(_MULTI_SIG) < _EW_SIG_MAX:
            _MULTI_SIG[key] = meta
    else:
        src = _built(op, nodes, dict(attrs, out_meta=meta), (), None, nodes[0].fmt)
    fmt = src.fmt
    return tuple([_new_var(_built("tuple_get", (src,), {"index": k, "shape": s, "dtype": d}, s, d, fmt))
                  for k, (s, d) in enumerate(meta)])


def split_outputs(node: Node) -> list[Node]:
    """The per-output nodes of a multi-output node."""
    return [Node("tuple_get", (node,), {"index": k, "shape": s, "dtype": d}, s, d, node.fmt)
            for k, (s, d) in enumerate(node.attrs["out_meta"])]


def _fmt_of(*xs: Any) -> str:
    Var = _VAR or _var_cls()
    for x in xs:
        if isinstance(x, Var):
            return x._node.fmt
        if isinstance(x, Node):
            return x.fmt
    return "NCHW"


# ---------------------------------------------------------------- dtype handling

def cast_node(node: Node, dtype: np.dtype) -> Node:
    """``node`` converted to ``dtype`` (the node itself when it already has it)."""
    dtype = np.dtype(dtype)
    if node.dtype == dtype:
        return node
    if node.op == "const" and node.size <= 64:
        with np.errstate(invalid="ignore", over="ignore"):
            return const_node(node.value.astype(dtype), node.fmt)
    return make_node("cast", (node,), {"dtype": dtype})


def _is_bool_dtype(dtype: Any) -> bool:
    """Whether ``dtype`` names numpy's bool (``bool``, ``np.bool_``, ``"bool"``, ``"?"``)."""
    try:
        return dtype is bool or np.dtype(dtype) == np.bool_
    except TypeError:       # not a numpy dtype (MNN's dtype enum): as_np_dtype decides
        return False


def cast(x: Any, dtype: Any):
    """``x.astype(dtype)`` as a Var (dtype narrowed to MNN's 32-bit types). To bool: numpy's
    ``x != 0`` as int32 truth values (MNN has no bool type), which index as a mask."""
    if _is_bool_dtype(dtype):
        return binary("not_equal", x, 0)
    return wrap(cast_node(as_node(x), as_np_dtype(dtype)))


#: Unary ops that compute in floating point (integer inputs are converted to float32 first).
FLOAT_UNARY = frozenset({
    "sqrt", "rsqrt", "exp", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "asin", "acos",
    "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sigmoid", "erf", "erfc", "gelu", "gelu_tanh",
    "softplus", "softsign",
})
INT_ONLY = frozenset({"invert", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"})
FLOAT_BINARY = frozenset({"div", "atan2", "hypot", "copysign"})


#: (op, dtype, shape) -> output (shape, dtype) of a unary op needing no cast; (op, dtypes, shapes) ->
#: output (shape, dtype) of a binary op whose operands share a dtype. Elementwise ``infer`` depends
#: only on these (no attributes), so a signature seen once skips the dtype rules and the inference.
_EW_SIG: dict = {}
_EW_SIG_MAX = 4096


def unary(op: str, x: Any):
    """Apply elementwise unary ``op`` to ``x`` (as a Var)."""
    if type(x) is _VAR:
        node = x._node
        key = (op, node.dtype, node.shape)
        hit = _EW_SIG.get(key)
        if hit is not None:
            return _new_var(_computed(op, (node,), hit[0], hit[1], node.fmt))
    else:
        node = as_node(x)
        key = None
    if op in FLOAT_UNARY and node.dtype.kind != "f":
        node = cast_node(node, F32)
        key = None
    elif op in INT_ONLY and node.dtype.kind == "f":
        raise TypeError(f"ufunc '{op}' not supported for the input types ({node.dtype})")
    out = make_node(op, (node,))
    if key is not None and len(_EW_SIG) < _EW_SIG_MAX:
        _EW_SIG[key] = (out.shape, out.dtype)
    return wrap(out)


def _operand_nodes(a: Any, b: Any) -> tuple[Node, Node]:
    """Nodes for two operands; a Python scalar beside a Var becomes a const of the promoted dtype directly."""
    Var = _VAR or _var_cls()
    if type(a) is Var and type(b) is Var:
        return a._node, b._node
    if isinstance(a, Var):
        na = a._node
        sd = python_scalar_dtype(b)
        if sd is not None:
            return na, scalar_node(b, result_dtype(na.dtype, sd))
        return na, as_node(b)
    if isinstance(b, Var):
        nb = b._node
        sd = python_scalar_dtype(a)
        if sd is not None:
            return scalar_node(a, result_dtype(nb.dtype, sd)), nb
        return as_node(a), nb
    return as_node(a), as_node(b)


def binary(op: str, a: Any, b: Any):
    """Apply elementwise binary ``op`` with numpy broadcasting and MNN's dtype rules."""
    if type(a) is _VAR and type(b) is _VAR:    # two Vars of a signature seen before: no rules to apply
        na, nb = a._node, b._node
        if na.dtype is nb.dtype:
            hit = _EW_SIG.get((op, na.dtype, na.shape, nb.shape))
            if hit is not None:
                return _new_var(_computed(op, (na, nb), hit[0], hit[1], na.fmt))
    na, nb = _operand_nodes(a, b)
    da, db = na.dtype, nb.dtype
    if da is db or da == db:
        key = (op, da, na.shape, nb.shape)
        hit = _EW_SIG.get(key)
        if hit is not None:
            fmt = na.fmt if type(a) is _VAR else _fmt_of(a, b)
            return _new_var(Node(op, (na, nb), {}, hit[0], hit[1], fmt))
    else:
        key = None
    dt = result_dtype(da, db)
    if op in FLOAT_BINARY and dt.kind != "f":
        dt = F32
        key = None
    if op in INT_ONLY and dt.kind == "f":
        raise TypeError(f"ufunc '{op}' not supported for the input types ({na.dtype}, {nb.dtype})")
    fmt = _fmt_of(a, b)
    out = make_node(op, (cast_node(na, dt), cast_node(nb, dt)), fmt=fmt)
    if key is not None and len(_EW_SIG) < _EW_SIG_MAX:
        _EW_SIG[key] = (out.shape, out.dtype)
    return wrap(out)


def select(cond: Any, a: Any, b: Any):
    """``where(cond, a, b)`` elementwise."""
    nc = as_node(cond)
    if nc.dtype != I32:
        nc = make_node("not_equal", (nc, scalar_node(0, nc.dtype)))
    na, nb = as_node(a), as_node(b)
    dt = result_dtype(na.dtype, nb.dtype)
    return wrap(make_node("select", (nc, cast_node(na, dt), cast_node(nb, dt)), fmt=_fmt_of(a, b, cond)))


#: ops whose result is a truth value when all their inputs are (``&``, ``|``, ``^``, ``*`` of masks)
_MASK_COMBINING = frozenset({"bitwise_and", "bitwise_or", "bitwise_xor", "mul", "minimum", "maximum"})
#: ops that move a mask's values without changing them (a slice, reshape or transpose of a mask)
_MASK_MOVING = frozenset({"reshape", "transpose", "broadcast_to", "slice"})


def is_boolean(node: Node) -> bool:
    """Whether ``node``'s int32 values are truth values: a comparison or logical op, ``signbit``,
    a mask combined with masks by ``&``, ``|``, ``^``, ``*``, minimum or maximum, or a mask moved by a slice,
    reshape or transpose (numpy's boolean arrays index as masks after all of these)."""
    op = node.op
    if op in BOOLEAN_OPS or op == "signbit":
        return True
    if op in _MASK_COMBINING:
        return all(is_boolean(i) for i in node.inputs)
    if op in _MASK_MOVING and node.inputs:
        return is_boolean(node.inputs[0])
    return False


# ---------------------------------------------------------------- axes and shapes

def normalize_axis(axis: int, ndim: int) -> int:
    """A non-negative axis, or numpy's AxisError."""
    if type(axis) is int and 0 <= axis < ndim:     # the common call: nothing to convert
        return axis
    if isinstance(axis, bool) or not isinstance(axis, (numbers.Integral,)):
        raise TypeError(f"axis must be an integer, not {type(axis).__name__}")
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise AxisError(axis, ndim)
    return axis + ndim if axis < 0 else axis


def normalize_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """Sorted non-negative axes for ``axis`` given as None (all), an int, a tuple or a list."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (list, tuple)):
        axes = tuple(normalize_axis(a, ndim) for a in axis)
        if len(set(axes)) != len(axes):
            raise ValueError("duplicate value in 'axis'")
        return tuple(sorted(axes))
    return (normalize_axis(axis, ndim),)


#: (op, input shape, input dtype, keepdims) of a whole-array reduction -> (axes, shape, dtype)
_RED_SIG: dict = {}
_built = Node.built


def reduce(op: str, x: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None):
    """Reduce ``x`` over ``axis`` with reduction op ``op``."""
    if axis is None and dtype is None and type(x) is _VAR:
        # a whole-array reduction of a signature seen before: no axis handling, no inference
        node = x._node
        kd = bool(keepdims)
        key = (op, node.shape, node.dtype, kd)
        hit = _RED_SIG.get(key)
        if hit is not None:
            return _new_var(_built(op, (node,), {"axes": hit[0], "keepdims": kd}, hit[1], hit[2], node.fmt))
        res = make_node(op, (node,), {"axes": tuple(range(len(node.shape))), "keepdims": kd})
        if len(_RED_SIG) < _EW_SIG_MAX:
            _RED_SIG[key] = (res.attrs["axes"], res.shape, res.dtype)
        return wrap(res)
    node = as_node(x)
    if dtype is not None:
        node = cast_node(node, as_np_dtype(dtype))
    axes = normalize_axes(axis, len(node.shape))
    return wrap(make_node(op, (node,), {"axes": axes, "keepdims": bool(keepdims)}))


def resolve_shape(size: int, shape: Iterable[Any]) -> tuple[int, ...]:
    """Resolve a reshape target (with at most one -1) against ``size`` elements, numpy's errors."""
    if type(shape) is tuple or type(shape) is list:     # plain non-negative ints: numpy's common call
        known = 1
        for s in shape:
            if type(s) is not int or s < 0:
                break
            known *= s
        else:
            shape = tuple(shape)
            if known != size:
                raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
            return shape
        if len(shape) == 1 and shape[0] == -1:
            return (size,)
    if isinstance(shape, (numbers.Integral,)):
        shape = (shape,)
    shape = [int(s) for s in shape]
    unknown = [i for i, s in enumerate(shape) if s == -1]
    if len(unknown) > 1:
        raise ValueError("can only specify one unknown dimension")
    if any(s < -1 for s in shape):
        raise ValueError("negative dimensions not allowed")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if unknown:
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape array of size {size} into shape {tuple(shape)}")
        shape[unknown[0]] = size // known
    elif known != size:
        raise ValueError(f"cannot reshape array of size {size} into shape {tuple(shape)}")
    return tuple(shape)


#: (input shape, target as given) of a reshape of a Var seen before -> (target, target) (None: x itself)
_RS_SIG: dict = {}


def _movement(table: dict, key: tuple, node: Node, op: str, attr: str, build: Callable[[Node, Any], Node],
              arg: Any):
    """The Var of one-input movement op ``op`` on ``node`` whose result depends only on ``key``
    (the input's shape and dtype, the op's argument ``arg`` as given): from ``table``, ``key`` ->
    None (the input itself) or (attribute ``attr``'s value, output shape), else ``build(node, arg)``'s
    node, then remembered (numpy-style calls repeat their arguments: the checks run once per
    signature)."""
    try:
        hit = table.get(key, False)
    except TypeError:       # unhashable items: build checks them
        hit = key = None
    if hit is None:
        return _new_var(node)
    if hit is not False:
        return _new_var(_built(op, (node,), {attr: hit[0]}, hit[1], node.dtype, node.fmt))
    res = build(node, arg)
    if key is not None and len(table) < _EW_SIG_MAX:
        table[key] = None if res is node else (res.attrs[attr], res.shape)
    return wrap(res)


def reshape(x: Any, shape: Any):
    """``x`` with a new shape (numpy's rules, one -1 allowed)."""
    if type(x) is _VAR and (type(shape) is tuple or type(shape) is list):
        node = x._node
        return _movement(_RS_SIG, (node.shape, tuple(shape)), node, "reshape", "shape", _reshape, shape)
    return wrap(_reshape(x._node if type(x) is _VAR else as_node(x), shape))


def _reshape(node: Node, shape: Any) -> Node:
    if len(node.shape) == 1 and type(shape) in (tuple, list) and len(shape) == 1 and shape[0] == -1:
        return node
    n = 1
    for d in node.shape:
        n *= d
    target = resolve_shape(n, shape)
    if target == node.shape:
        return node
    return make_node("reshape", (node,), {"shape": target})


#: (input shape, dtype, perm as given) of a transpose seen before -> (perm, output shape) (None: x)
_TR_SIG: dict = {}


def transpose(x: Any, perm: Sequence[int] | None = None):
    """``x`` with its axes permuted (reversed when ``perm`` is None)."""
    if type(x) is _VAR and (perm is None or type(perm) is tuple or type(perm) is list):
        node = x._node
        return _movement(_TR_SIG, (node.shape, node.dtype, perm if type(perm) is not list else tuple(perm)),
                         node, "transpose", "perm", _transpose, perm)
    return wrap(_transpose(as_node(x), perm))


def _transpose(node: Node, perm: Sequence[int] | None) -> Node:
    nd = len(node.shape)
    if perm is None:
        perm = tuple(range(nd - 1, -1, -1))
    else:
        perm = tuple(normalize_axis(p, nd) for p in perm)
        if sorted(perm) != list(range(nd)):
            raise ValueError("axes don't match array")
    if perm == tuple(range(nd)):
        return node
    return make_node("transpose", (node,), {"perm": perm})


#: (input shape, dtype, target shape as given) of a broadcast seen before -> (shape, shape) (None: x)
_BC_SIG: dict = {}


def broadcast_to(x: Any, shape: Sequence[int]):
    """``x`` broadcast to ``shape`` (numpy's rules and error)."""
    if type(x) is _VAR and (type(shape) is tuple or type(shape) is list):
        node = x._node
        return _movement(_BC_SIG, (node.shape, node.dtype, tuple(shape)), node, "broadcast_to", "shape",
                         _broadcast_to, shape)
    return wrap(_broadcast_to(as_node(x), shape))


def _broadcast_to(node: Node, shape: Sequence[int]) -> Node:
    shape = tuple(int(s) for s in shape)
    from .elementwise import broadcast_shape
    if len(shape) < len(node.shape) or broadcast_shape(node.shape, shape) != shape:
        raise ValueError(f"operands could not be broadcast together with remapped shapes "
                         f"[original->remapped]: {node.shape} and requested shape {shape}")
    if shape == node.shape:
        return node
    return make_node("broadcast_to", (node,), {"shape": shape})


#: (axis as given, (shape, dtype) per input) of a concat of Vars seen before -> (axis, shape, dtype)
_CAT_SIG: dict = {}


def concat(xs: Sequence[Any], axis: int = 0):
    """Join ``xs`` along ``axis`` (dtypes promoted)."""
    if (type(xs) is list or type(xs) is tuple) and len(xs) > 1 and type(axis) is int:
        nodes = []
        for x in xs:
            if type(x) is not _VAR:
                break
            nodes.append(x._node)
        else:
            key = (axis,) + tuple([(n.shape, n.dtype) for n in nodes])
            hit = _CAT_SIG.get(key)
            if hit is not None:
                return _new_var(_built("concat", tuple(nodes), {"axis": hit[0]}, hit[1], hit[2], nodes[0].fmt))
            res = _concat(nodes, axis)
            if res.op == "concat" and res.inputs == tuple(nodes) and len(_CAT_SIG) < _EW_SIG_MAX:
                _CAT_SIG[key] = (res.attrs["axis"], res.shape, res.dtype)
            return wrap(res)
    return wrap(_concat([as_node(x) for x in xs], axis))


def _concat(nodes: list[Node], axis: int) -> Node:
    if not nodes:
        raise ValueError("need at least one array to concatenate")
    nd = len(nodes[0].shape)
    if nd == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    for i, n in enumerate(nodes):
        if len(n.shape) != nd:
            raise ValueError("all the input arrays must have same number of dimensions, but the array at index 0 "
                             f"has {nd} dimension(s) and the array at index {i} has {len(n.shape)} dimension(s)")
    axis = normalize_axis(axis, nd)
    dt = result_dtype(*(n.dtype for n in nodes))
    nodes = [cast_node(n, dt) for n in nodes]
    if len(nodes) == 1:
        return nodes[0]
    return make_node("concat", nodes, {"axis": axis}, fmt=nodes[0].fmt)


def matmul(a: Any, b: Any):
    """numpy.matmul with MNN's dtype rules."""
    na, nb = as_node(a), as_node(b)
    dt = result_dtype(na.dtype, nb.dtype)
    return wrap(make_node("matmul", (cast_node(na, dt), cast_node(nb, dt)), fmt=_fmt_of(a, b)))
