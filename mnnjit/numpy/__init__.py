"""mnnjit.numpy: MNN.numpy - numpy-style functions that build lazy Vars.

Dtypes are MNN's (``float32`` is ``dtype.float``...); results narrow to 32-bit types; full
reductions return Python scalars; comparisons give int32 0/1.
"""
from __future__ import annotations

import builtins as _bi
from typing import Any, Sequence

import numpy as _np

from .._dtypes import as_np_dtype as _as_np_dtype
from .._dtypes import dtype as _dtype
from ..graph import const_node as _const_node
from ..ops import build as _B
from ..ops.build import AxisError  # noqa: F401  (numpy's exception type, re-exported)
from ..var import Var

float32 = _dtype.float
float64 = _dtype.double
double = _dtype.double
int32 = _dtype.int
int64 = _dtype.int64
uint8 = _dtype.uint8
int8 = _dtype.int8
pi = _np.pi
e = _np.e
inf = _np.inf
nan = _np.nan
newaxis = None
ndarray = Var


def _scalar_or_var(v: Var):
    """Full reductions return Python scalars, as MNN does."""
    return v.read_view().item()


# ---------------------------------------------------------------- creation
def array(object: Any, dtype: Any = None, copy: bool = True, order: str = "K", subok: bool = False,  # noqa: A002
          ndmin: int = 0, like: Any = None) -> Var:
    """A Var from array-like data (float64 -> float32, int64 -> int32, bool -> int32)."""
    if isinstance(object, Var) and dtype is None:
        return _B.wrap(object._node)
    arr = _B.to_array(object, dtype)
    while arr.ndim < ndmin:
        arr = arr[None]
    return Var._from_node(_const_node(_np.array(arr)))


def asarray(a: Any, dtype: Any = None, order: str | None = None) -> Var:
    """Like ``array`` but returns ``a`` itself when it is already a Var of the dtype."""
    if isinstance(a, Var) and (dtype is None or _as_np_dtype(dtype) == a._node.dtype):
        return a
    return array(a, dtype)


def _filled(shape: Any, value: Any, dtype: Any) -> Var:
    if isinstance(shape, Var):
        shape = shape.tolist()
    shape = (shape,) if isinstance(shape, (int, _np.integer)) else tuple(_bi.int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError("negative dimensions are not allowed")
    dt = _np.float32 if dtype is None else _as_np_dtype(dtype)
    return Var._from_node(_const_node(_np.full(shape, value, dtype=dt)))


def zeros(shape: Any, dtype: Any = None, order: str = "C") -> Var:
    """An array of zeros (float32 by default, as documented)."""
    return _filled(shape, 0, dtype)


def ones(shape: Any, dtype: Any = None, order: str = "C") -> Var:
    """An array of ones (float32 by default, as documented)."""
    return _filled(shape, 1, dtype)


def empty(shape: Any, dtype: Any = None, order: str = "C") -> Var:
    """An array of ``shape`` (zero-filled: mnnjit never hands out uninitialised memory)."""
    return _filled(shape, 0, dtype)


def full(shape: Any, fill_value: Any, dtype: Any = None, order: str = "C") -> Var:
    """An array of ``shape`` filled with ``fill_value``."""
    if dtype is None:
        dtype = _B.to_array(fill_value).dtype
    return _filled(shape, fill_value, dtype)


def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None) -> Var:
    """Evenly spaced values in [start, stop)."""
    if isinstance(start, Var):
        start = start.item()
    arr = _np.arange(start, stop, step) if step is not None else (
        _np.arange(start) if stop is None else _np.arange(start, stop))
    return Var._from_node(_const_node(_B.to_array(arr, dtype)))


# ---------------------------------------------------------------- shape functions
def reshape(a: Any, newshape: Any, order: str = "C") -> Var:
    """``a`` with a new shape."""
    return _B.reshape(a, newshape)


def transpose(a: Any, axes: Sequence[int] | None = None) -> Var:
    """``a`` with permuted axes."""
    return _B.transpose(a, axes)


def concatenate(arrays: Sequence[Any], axis: int = 0, out: Any = None, dtype: Any = None) -> Var:
    """Join arrays along an existing axis."""
    res = _B.concat(arrays, axis)
    return res if dtype is None else res.astype(dtype)


def matmul(a: Any, b: Any) -> Var:
    """Matrix product (numpy.matmul)."""
    return _B.matmul(a, b)


def where(condition: Any, x: Any = None, y: Any = None):
    """``x`` where ``condition`` else ``y``."""
    if x is None and y is None:
        return nonzero(condition)
    if x is None or y is None:
        raise ValueError("either both or neither of x and y should be given")
    return _B.select(condition, x, y)


def nonzero(a: Any) -> tuple:
    """Indices of the non-zero elements, one int32 Var per axis."""
    arr = _B.as_node(a)
    vals = _B.wrap(arr).read_view()
    return tuple(Var._from_node(_const_node(i.astype(_np.int32))) for i in _np.nonzero(vals))


# ---------------------------------------------------------------- reductions
def _reduction(op: str):
    def fn(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, **kw: Any):
        res = _B.reduce(op, a, axis, keepdims, dtype)
        if not res._node.shape:
            return _scalar_or_var(res)
        return res
    fn.__name__ = op
    fn.__doc__ = f"{op.replace('reduce_', '').capitalize()} over ``axis`` (a 0-d result is a Python scalar)."
    return fn


sum = _reduction("reduce_sum")  # noqa: A001
prod = _reduction("reduce_prod")
mean = _reduction("reduce_mean")
amax = max = _reduction("reduce_max")  # noqa: A001
amin = min = _reduction("reduce_min")  # noqa: A001


def _arg(op: str):
    def fn(a: Any, axis: int | None = None, out: Any = None, keepdims: bool = False):
        node = _B.as_node(a)
        if axis is None:
            res = _B.reduce(op, _B.reshape(node, (-1,)), 0, keepdims=False)
            return _scalar_or_var(res)
        return _B.reduce(op, node, axis, keepdims)
    fn.__name__ = op
    fn.__doc__ = f"Index of the {op[3:]}imum along ``axis`` (flattened when None: a Python int)."
    return fn


argmax = _arg("argmax")
argmin = _arg("argmin")


# ---------------------------------------------------------------- elementwise
def _unary(name: str, op: str):
    def fn(x: Any, *args: Any, **kwargs: Any) -> Var:
        return _B.unary(op, x)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name}."
    return fn


def _binary(name: str, op: str):
    def fn(x1: Any, x2: Any, *args: Any, **kwargs: Any) -> Var:
        return _B.binary(op, x1, x2)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} with broadcasting."
    return fn


for _name, _op in {
    "negative": "neg", "abs": "abs", "absolute": "abs", "square": "square", "sqrt": "sqrt", "exp": "exp",
    "expm1": "expm1", "log": "log", "log1p": "log1p", "log2": "log2", "log10": "log10", "sin": "sin",
    "cos": "cos", "tan": "tan", "arcsin": "asin", "arccos": "acos", "arctan": "atan", "sinh": "sinh",
    "cosh": "cosh", "tanh": "tanh", "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh",
    "reciprocal": "reciprocal", "sign": "sign", "floor": "floor", "ceil": "ceil", "trunc": "trunc",
    "fix": "trunc", "rint": "rint", "isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite",
    "logical_not": "logical_not", "invert": "invert", "bitwise_not": "invert",
}.items():
    globals()[_name] = _unary(_name, _op)

for _name, _op in {
    "add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "true_divide": "div",
    "floor_divide": "floordiv", "mod": "mod", "remainder": "mod", "fmod": "fmod", "power": "pow",
    "maximum": "maximum", "minimum": "minimum", "fmax": "maximum", "fmin": "minimum", "arctan2": "atan2",
    "hypot": "hypot", "copysign": "copysign", "equal": "equal", "not_equal": "not_equal", "less": "less",
    "less_equal": "less_equal", "greater": "greater", "greater_equal": "greater_equal",
    "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor",
    "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
    "left_shift": "left_shift", "right_shift": "right_shift",
}.items():
    globals()[_name] = _binary(_name, _op)


def around(x: Any, decimals: int = 0) -> Var:
    """Round half away from zero (MNN's documented rounding), to ``decimals`` places."""
    if decimals == 0:
        return _B.unary("round", x)
    scale = 10.0 ** decimals
    return _B.unary("round", _B.binary("mul", x, scale)) / scale


round_ = around
round = around  # noqa: A001
