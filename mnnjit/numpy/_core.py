"""Helpers shared by the mnnjit.numpy modules: argument checks, axis handling, ``out=``, scalars."""
from __future__ import annotations

import numbers
import operator
from typing import Any, Sequence

import numpy as _np

from .._dtypes import F32, I32
from ..graph import Node, const_node
from ..ops import build as B
from ..ops.build import AxisError  # noqa: F401  (re-exported)
from .. import runtime as _rt
from ..var import Var


def node(x: Any) -> Node:
    """The graph node of ``x`` (a Var, Python data or numpy data)."""
    return B.as_node(x)


def var(n: Node) -> Var:
    """A Var on node ``n``."""
    return B.wrap(n)


def const(arr: Any, dtype: Any = None) -> Var:
    """A constant Var holding ``arr`` (narrowed to MNN's dtypes)."""
    return Var._from_node(const_node(_np.array(B.to_array(arr, dtype))))


def ndim(x: Any) -> int:
    """Number of dimensions of ``x``."""
    return len(node(x).shape)


def shape_of(x: Any) -> tuple[int, ...]:
    """Shape of ``x`` as a tuple."""
    return node(x).shape


def dtype_of(x: Any) -> _np.dtype:
    """Storage dtype of ``x``."""
    return node(x).dtype


def is_int(v: Any) -> bool:
    """Whether ``v`` is an integer (not a bool)."""
    return isinstance(v, (numbers.Integral, _np.integer)) and not isinstance(v, (bool, _np.bool_))


def _is_index(v: Any) -> bool:
    try:
        operator.index(v)
    except TypeError:
        return False
    return True


def as_shape(shape: Any) -> tuple[int, ...]:
    """A shape argument (int, sequence, Var) as a tuple of non-negative ints."""
    if isinstance(shape, Var):
        shape = shape.read_view().tolist()
    if is_int(shape):
        shape = (int(shape),)
    try:
        items = list(shape)
    except TypeError:
        raise TypeError(f"expected a shape (int or sequence of ints), got {type(shape).__name__}") from None
    if any(isinstance(s, (list, tuple)) for s in items):
        # MNN's docs write nested shapes (``np.ones([[2], [2]])`` is a 2x2 array): flatten them
        flat: list = []
        for s in items:
            flat.extend(as_shape(s) if isinstance(s, (list, tuple)) else [s])
        items = flat
    try:
        out = tuple(operator.index(s) for s in items)
    except TypeError:
        bad = next(s for s in items if not _is_index(s))
        raise TypeError(f"'{type(bad).__name__}' object cannot be interpreted as an integer "
                        f"(shape {shape!r})") from None
    if any(s < 0 for s in out):
        raise ValueError("negative dimensions are not allowed")
    return out


def scalar_or_var(v: Var, axis: Any, keepdims: bool, by_shape: bool = False):
    """Python scalars for reductions, as real MNN gives them.

    Full reductions (``axis=None``, no ``keepdims``) always give a Python scalar. With ``by_shape``
    (MNN's ``sum``, ``prod``, ``nansum``, ``nanprod``, ``count_nonzero``) any 0-d result does too
    (``sum(x1d, 0)`` is a float in MNN, while ``max(x1d, 0)`` or ``mean(x1d, 0)`` are 0-d Vars).
    """
    if (axis is None and not keepdims) or (by_shape and not v._node.shape):
        return scalar_value(v)
    return v


def scalar_value(v: Var):
    """The Python scalar of a 0-d (or one-element) Var just built (a full reduction): through the
    runtime's one-node eager route when it applies (the layers of ``read_view`` cost ~1 us)."""
    n = v._node
    route = _rt._read_route
    if route is not None and n._value is None:
        val = _direct_reduction(n)
        if val is None:
            val = route(n, False)
        if val is not None:
            return val.item()
    return v.read_view().item()


#: reduction ops (and the one-op statistics) whose reference ``_direct_reduction`` may call
_DIRECT_KINDS = frozenset({"reduce", "opaque"})
_REFS: dict = {}
_env: tuple | None = None


def _direct_env() -> tuple:
    """What ``_direct_reduction`` consults (imported on first use: these import the backends)."""
    global _env
    from .. import graph as graph_mod, settings
    from ..backends import registry as backends
    from ..compiler.plan import KERNEL_MIN
    from ..ops import registry as ops
    from ..ops.fperr import ERR_IGNORE, ERRVAR, LOCAL, thread_runner
    _env = (graph_mod, settings.threshold, backends.current, KERNEL_MIN, ops.get, ERRVAR, ERR_IGNORE, LOCAL,
            thread_runner)
    return _env


def _direct_reduction(n: Node):
    """The value of reduction node ``n`` just built for its scalar, computed as the default
    executor's eager path computes it (the op's reference under an ignoring error state), without
    caching it on the node (the node is dropped) and without the executor's general dispatch; None
    where that path would not run the reference (an input not known or stale, work at or over the
    compile threshold, a backend kernel for the op), and the caller then asks the runtime."""
    if len(n.inputs) != 1 or n.dtype is None:
        return None
    i = n.inputs[0]
    x = i._value
    if type(x) is not _np.ndarray:
        return None
    env = _env or _direct_env()
    graph_mod, threshold, current, kernel_min, get_op, errvar, err_ignore, local, thread_runner = env
    if errvar is None or (i.live and i.stamp != graph_mod._write_counter and i.op != "placeholder"):
        return None
    work = x.size
    if work >= threshold():
        return None
    op = n.op
    ref = _REFS.get(op)
    if ref is None:
        opdef = get_op(op)
        if opdef.kind not in _DIRECT_KINDS:
            return None
        ref = _REFS[op] = opdef.ref
    if work >= kernel_min and current().supports_op(n):
        return None
    try:
        run = local.run     # (this thread's context whose error state ignores everything)
    except AttributeError:
        run = thread_runner()
    try:
        out = run(ref, [x], n.attrs)
    except RuntimeError:    # the context is in use (a call from inside it), or the reference's own error
        tok = errvar.set(err_ignore)
        try:
            out = ref([x], n.attrs)
        finally:
            errvar.reset(tok)
    if not isinstance(out, (_np.ndarray, _np.generic)):
        out = _np.asarray(out)
    dtype = n.dtype
    if out.dtype is not dtype and out.dtype != dtype:
        out = out.astype(dtype)
    if out.size != 1:
        raise RuntimeError(f"op {op} produced shape {out.shape}, expected {n.shape}")
    return out


def finish(res: Any, out: Any = None):
    """Handle numpy's ``out=``: ``out`` (a Var) takes the result's value (cast to its dtype)."""
    if out is None:
        return res
    if isinstance(out, tuple) and len(out) == 1:
        out = out[0]
    if not isinstance(out, Var):
        raise TypeError("out must be a Var (mnnjit arrays are Vars)")
    rn = node(res)
    if rn.shape != out._node.shape:
        raise ValueError(f"non-broadcastable output operand with shape {tuple(out._node.shape)} doesn't match "
                         f"the broadcast shape {rn.shape}")
    out._node = B.cast_node(rn, out._node.dtype)
    return out


def to_float(x: Any) -> Node:
    """``x``'s node, converted to float32 when it holds integers."""
    n = node(x)
    return n if n.dtype.kind == "f" else B.cast_node(n, F32)


def axis_arg(axis: Any, nd: int) -> int:
    """A single non-negative axis (numpy AxisError otherwise)."""
    return B.normalize_axis(axis, nd)


def flat(x: Any) -> Var:
    """``x`` flattened to 1-D."""
    return B.reshape(x, (-1,))


def slice_node(n: Node, begin: Sequence[int], end: Sequence[int], step: Sequence[int]) -> Node:
    """``n`` sliced as ``range(begin, end, step)`` per axis (normalised bounds, see ``ops/movement.py``);
    ``n`` itself when the slice keeps everything."""
    shape = n.shape
    for b, e, s, d in zip(begin, end, step, shape):
        if b != 0 or e != d or s != 1:
            return B.make_node("slice", (n,), {"begin": tuple(begin), "end": tuple(end), "step": tuple(step)})
    return n


def moveaxis_node(n: Node, src: int, dst: int) -> Node:
    """``n`` with axis ``src`` moved to position ``dst`` (both non-negative)."""
    nd = len(n.shape)
    perm = [i for i in range(nd) if i != src]
    perm.insert(dst, src)
    return B.transpose(var(n), perm)._node


def int_node(x: Any) -> Node:
    """An int32 node for index-like data."""
    n = node(x)
    if n.dtype.kind == "f" and n.size:
        raise TypeError(f"arrays used as indices must be of integer type, not {n.dtype}")
    return B.cast_node(n, I32)


def full_const(shape: Sequence[int], value: Any, dtype: Any) -> Var:
    """A constant Var of ``shape`` filled with ``value``."""
    return Var._from_node(const_node(_np.full(tuple(shape), value, dtype=dtype)))


def broadcast_var(value: Any, shape: Sequence[int], dtype: _np.dtype) -> Var:
    """``value`` cast to ``dtype`` and broadcast to ``shape`` (lazily)."""
    n = B.cast_node(node(value), dtype)
    return B.broadcast_to(var(n), tuple(shape))
