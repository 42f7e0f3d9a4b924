"""mnnjit.expr: MNN.expr - the Var type, dtypes, data formats, const/placeholder/convert and the ops.

This module holds creation, conversion and the elementwise functions; the rest lives in
``_nn`` (convolution, pooling, resize, activations, detection), ``_math`` (reductions, matmul,
sorting, eltwise, creation), ``_shape`` (reshape/slice/gather/pad...), ``_enums`` and ``_config``
(executor settings), all re-exported here.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as _np

from .._dtypes import as_format, as_np_dtype, data_format, dtype
from .. import graph as _graph_mod
from ..graph import Node as _Node
from ..graph import const_node as _const_node
from ..hostmem import is_address as _is_address, read_address as _read_address, read_buffer as _read_buffer
from ..ops import build as _B
from ..var import Var

double = dtype.double
float = dtype.float  # noqa: A001 - MNN's name
int = dtype.int  # noqa: A001 - MNN's name
int64 = dtype.int64
uint8 = dtype.uint8
int8 = dtype.int8
NCHW = data_format.NCHW
NHWC = data_format.NHWC
NC4HW4 = data_format.NC4HW4


#: (id of the dtype argument, id of the format argument) -> (those arguments, numpy dtype, format
#: name): the entry holds the arguments, so their ids stay theirs while it is kept
_CONST_ARGS: dict = {}
#: the entry of the last call's arguments (replaced whole: threads see one call's entry or another's)
_LAST_ARGS: tuple = (None, None, None, None)
_new = object.__new__
_ndarray = _np.ndarray


def const(value_list: Any, shape: Sequence[int] | None = None, data_format: Any = NCHW,
          dtype: Any = float) -> Var:
    """A constant Var from a list/tuple/bytes/ndarray (or an int address of contiguous data) and a shape."""
    global _LAST_ARGS
    if type(value_list) is _ndarray:
        # a model's input in a user's loop: an ndarray already of the target dtype, so nothing is
        # converted; only the copy the Var owns is made (any other case takes the full path below)
        hit = _LAST_ARGS
        if not (hit[0] is dtype and hit[1] is data_format and value_list.dtype is hit[2]):
            hit = _CONST_ARGS.get((id(dtype), id(data_format)))
            if hit is not None and (hit[0] is not dtype or hit[1] is not data_format
                                    or value_list.dtype != hit[2]):
                hit = None
        if hit is not None:
            if shape is None or value_list.shape == tuple(shape):
                arr = value_list.copy()     # (C order: the Var's own contiguous copy)
            else:
                try:
                    arr = _np.array(value_list, order="C").reshape(shape)
                    if arr.shape != tuple(shape):     # (numpy filled in a -1)
                        arr = None
                except (TypeError, ValueError):
                    arr = None
            if arr is not None:
                arr.setflags(False)     # (read-only; positional: the keyword costs ~0.15 us more)
                # (``Node.constant`` written out: once per input and forward)
                node = _new(_Node)
                node.op, node.inputs, node.attrs, node.name = "const", (), {}, ""
                node.shape, node.dtype, node.fmt, node._value = arr.shape, arr.dtype, hit[3], arr
                node.live, node.stamp = False, _graph_mod._write_counter
                v = _new(Var)
                v._node = node
                return v
    fmt = as_format(data_format)
    target = as_np_dtype(dtype)
    if len(_CONST_ARGS) > 64:
        _CONST_ARGS.clear()
    _LAST_ARGS = _CONST_ARGS[(id(dtype), id(data_format))] = (dtype, data_format, target, fmt)
    if _is_address(value_list):
        if shape is None:
            raise TypeError("const: an int address (or PyCapsule) needs a shape")
        count = 1
        for d in shape:
            count *= _builtin_int(d)
        arr = _read_address(value_list, count, target, "const")
    elif isinstance(value_list, (bytes, bytearray, memoryview)):
        arr = _read_buffer(value_list, target)
    elif isinstance(value_list, Var):
        arr = value_list.read_view().astype(target)
    else:
        arr = _B.to_array(value_list, target)
    if shape is None:
        shape = arr.shape
    shape = tuple(_builtin_int(s) for s in shape)
    size = 1
    for s in shape:
        size *= s
    if arr.size != size:
        raise ValueError(f"const: {arr.size} values do not fill shape {list(shape)} ({size} elements)")
    return Var._from_node(_const_node(_np.array(arr).reshape(shape), fmt))


_builtin_int = __builtins__["int"] if isinstance(__builtins__, dict) else __builtins__.int


def placeholder(shape: Sequence[int] = (), format: Any = NCHW, dtype: Any = float) -> Var:  # noqa: A002
    """An input Var of ``shape`` to be filled with ``write``."""
    shape = tuple(_builtin_int(s) for s in shape)
    node = _Node("placeholder", (), {}, shape, as_np_dtype(dtype), as_format(format))
    return Var._from_node(node)


def convert(x: Any, format: Any) -> Var:  # noqa: A002
    """Re-lay ``x`` out in ``format`` (NCHW <-> NHWC transposes 4-D data; NC4HW4 packs channels)."""
    node = _B.as_node(x)
    dst = as_format(format)
    if node.fmt == dst:
        return Var._from_node(node)
    return Var._from_node(_B.make_node("convert", (node,), {"src": node.fmt, "dst": dst}, fmt=dst))


def cast(x: Any, dtype: Any = float) -> Var:
    """``x`` converted to ``dtype``."""
    return _B.cast(x, dtype)


def scalar(value: Any, dtype: Any = None) -> Var:
    """A 0-d constant Var."""
    return Var._from_node(_B.scalar_node(value, None if dtype is None else as_np_dtype(dtype)))


def _unary(op: str):
    def fn(x: Any) -> Var:
        return _B.unary(op, x)
    fn.__name__ = op
    fn.__doc__ = f"Elementwise {op}."
    return fn


def _binary(op: str):
    def fn(x: Any, y: Any) -> Var:
        return _B.binary(op, x, y)
    fn.__name__ = op
    fn.__doc__ = f"Elementwise {op} with broadcasting."
    return fn


for _name, _op in {
    "abs": "abs", "negative": "neg", "floor": "floor", "ceil": "ceil", "square": "square", "sqrt": "sqrt",
    "rsqrt": "rsqrt", "exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin",
    "acos": "acos", "atan": "atan", "reciprocal": "reciprocal", "log1p": "log1p", "tanh": "tanh",
    "sigmoid": "sigmoid", "sign": "sign", "round": "round", "sinh": "sinh", "cosh": "cosh", "asinh": "asinh",
    "acosh": "acosh", "atanh": "atanh", "erf": "erf", "erfc": "erfc", "expm1": "expm1", "softsign": "softsign",
}.items():
    globals()[_name] = _unary(_op)

for _name, _op in {
    "add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "pow": "pow", "minimum": "minimum",
    "maximum": "maximum", "greater": "greater", "greater_equal": "greater_equal", "less": "less",
    "less_equal": "less_equal", "equal": "equal", "not_equal": "not_equal", "floordiv": "floordiv",
    "floormod": "mod", "mod": "fmod", "atan2": "atan2", "squared_difference": "squared_difference",
    "logical_or": "logical_or", "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or",
    "bitwise_xor": "bitwise_xor",
}.items():
    globals()[_name] = _binary(_op)


from ._config import gc, lazy_eval, set_global_executor_config, set_lazy_mode, set_thread_number  # noqa: E402,F401
from ._enums import *  # noqa: E402,F401,F403
from ._enums import __all__ as _enum_names  # noqa: E402,F401
from ._math import (  # noqa: E402,F401
    argmax, argmin, cumprod, cumsum, eltwise_max, eltwise_prod, eltwise_sub, eltwise_sum, fill, histogram, matmul,
    matrix_band_part, one_hot, randomuniform, range, reduce_all, reduce_any, reduce_max, reduce_mean, reduce_min,
    reduce_prod, reduce_sum, select, setdiff1d, sort, svd, unravel_index, where, zeros_like)
from ._nn import (  # noqa: E402,F401
    avg_pool, batch_to_space_nd, bias_add, channel_shuffle, conv2d, conv2d_transpose, crop_and_resize,
    depth_to_space, dequant, detection_post_process, elu, erfinv, gelu, max_pool, moments, nms, normalize, prelu,
    quant, relu, relu6, resize, roi_align, roi_pooling, scale, selu, softmax, softplus, space_to_batch_nd,
    space_to_depth)
from ._shape import (  # noqa: E402,F401
    broadcast_to, clone, concat, crop, expand_dims, gather, gather_nd, pad, rank, raster, reshape, reverse,
    reverse_sequence, scatter_nd, shape, size, slice, split, squeeze, stack, strided_slice, tile, transpose,
    unsqueeze, unstack)
from ._graph import jsonop  # noqa: E402,F401
# ---------------------------------------------------------------------------------------------
from ._io import load_as_list, load_as_dict, save, get_inputs_and_outputs  # models engineer
