"""Gathers, scatters and index helpers: take, take_along_axis, put, choose, select, unravel_index..."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as _np

from .._dtypes import I32
from ..graph import Node, const_node
from ..ops import build as B
from ..var import Var
from ._core import axis_arg, const, finish, flat, int_node, node, var


def _wrap_indices(idx: Node, n: int, mode: str) -> Node:
    if mode == "raise":
        return idx
    if n == 0:
        raise IndexError("cannot do a non-empty take from an empty axes.")
    if mode == "wrap":
        return B.make_node("mod", (idx, B.scalar_node(n, I32)))
    if mode == "clip":
        return B.make_node("clip", (idx,), {"lo": 0, "hi": n - 1})
    raise ValueError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})")


def take(a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Var:
    """Elements of ``a`` at ``indices`` along ``axis`` (None: the flattened array)."""
    n = node(a)
    if axis is None:
        n, ax = flat(var(n))._node, 0
    else:
        ax = axis_arg(axis, len(n.shape))
    idx = int_node(indices)
    idx = _wrap_indices(idx, n.shape[ax], mode)
    if idx.value is not None and idx.size:
        m = n.shape[ax]
        lo, hi = int(idx.value.min()), int(idx.value.max())
        if lo < -m or hi >= m:
            raise IndexError(f"index {hi if hi >= m else lo} is out of bounds for axis {ax} with size {m}")
    return finish(var(B.make_node("take", (n, idx), {"axis": ax})), out)


def take_along_axis(arr: Any, indices: Any, axis: Any = -1) -> Var:
    """``arr`` gathered along ``axis`` at ``indices`` (same ndim; the other axes broadcast)."""
    n = node(arr)
    idx = int_node(indices)
    if axis is None:
        if len(idx.shape) != 1:
            raise ValueError("when axis=None, `indices` must have a single dimension.")
        n, ax = flat(var(n))._node, 0
    else:
        ax = axis_arg(axis, len(n.shape))
    if len(idx.shape) != len(n.shape):
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    return var(B.make_node("take_along_axis", (n, idx), {"axis": ax}))


def put_along_axis(arr: Var, indices: Any, values: Any, axis: Any) -> None:
    """Write ``values`` into ``arr`` (in place) at ``indices`` along ``axis``."""
    _require_var(arr, "put_along_axis")
    n = node(arr)
    idx = int_node(indices)
    if axis is None:
        flat_n = flat(var(n))._node
        res = B.make_node("put_along_axis", (flat_n, idx, B.cast_node(node(values), n.dtype)), {"axis": 0})
        arr._node = B.reshape(var(res), n.shape)._node
        return
    ax = axis_arg(axis, len(n.shape))
    if len(idx.shape) != len(n.shape):
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    arr._node = B.make_node("put_along_axis", (n, idx, B.cast_node(node(values), n.dtype)), {"axis": ax})


def _require_var(a: Any, fname: str) -> None:
    if not isinstance(a, Var):
        raise TypeError(f"{fname}: argument must be a Var (it is modified in place)")


def put(a: Var, ind: Any, v: Any, mode: str = "raise") -> None:
    """Set ``a.flat[ind] = v`` in place (``v`` repeated to the length of ``ind``)."""
    _require_var(a, "put")
    n = node(a)
    idx = flat(var(int_node(ind)))._node
    idx = _wrap_indices(idx, n.size, mode)
    vals = flat(var(B.cast_node(node(v), n.dtype)))._node
    k = idx.shape[0]
    if k == 0:
        return
    if vals.shape[0] == 0:
        raise ValueError("cannot put empty values")
    if vals.shape[0] != k:
        reps = -(-k // vals.shape[0])
        vals = B.make_node("tile", (vals,), {"reps": (reps,)})
        vals = B.make_node("slice", (vals,), {"begin": (0,), "end": (k,), "step": (1,)})
    res = B.make_node("put_along_axis", (flat(var(n))._node, idx, vals), {"axis": 0})
    a._node = B.reshape(var(res), n.shape)._node


def putmask(a: Var, mask: Any, values: Any) -> None:
    """Set ``a[mask] = values`` in place (``values`` repeated as needed, numpy.putmask)."""
    _require_var(a, "putmask")
    n = node(a)
    m = _np.asarray(var(node(mask)).read_view()).astype(bool)
    if m.shape != n.shape:
        raise ValueError("putmask: mask and data must be the same size")
    vals = flat(var(B.cast_node(node(values), n.dtype)))._node
    if vals.shape[0] == 0:
        return
    where = _np.flatnonzero(m)
    src = const((where % vals.shape[0]).astype(_np.int32))
    picked = B.make_node("take", (vals, src._node), {"axis": 0})
    res = B.make_node("put_along_axis", (flat(var(n))._node, const_node(where.astype(_np.int32)), picked),
                      {"axis": 0})
    a._node = B.reshape(var(res), n.shape)._node


def place(arr: Var, mask: Any, vals: Any) -> None:
    """Put ``vals`` (in order, repeated) where ``mask`` is true, in place (numpy.place)."""
    _require_var(arr, "place")
    n = node(arr)
    m = _np.asarray(var(node(mask)).read_view()).astype(bool).ravel()
    if m.size != n.size:
        raise ValueError("place: mask and data must be the same size")
    vals = flat(var(B.cast_node(node(vals), n.dtype)))._node
    where = _np.flatnonzero(m)
    if where.size == 0:
        return
    if vals.shape[0] == 0:
        raise ValueError("Cannot insert from an empty array!")
    src = const((_np.arange(where.size) % vals.shape[0]).astype(_np.int32))
    picked = B.make_node("take", (vals, src._node), {"axis": 0})
    res = B.make_node("put_along_axis", (flat(var(n))._node, const_node(where.astype(_np.int32)), picked),
                      {"axis": 0})
    arr._node = B.reshape(var(res), n.shape)._node


def copyto(dst: Var, src: Any, casting: str = "same_kind", where: Any = True) -> None:
    """Copy ``src`` into ``dst`` (broadcast; only where ``where`` is true), in place."""
    _require_var(dst, "copyto")
    n = node(dst)
    s = B.cast_node(node(src), n.dtype)
    s = node(B.broadcast_to(var(s), n.shape))
    if where is True:
        dst._node = s
        return
    dst._node = node(B.select(B.broadcast_to(where, n.shape), var(s), var(n)))


def fill(a: Var, value: Any) -> None:
    """Fill ``a`` with ``value`` in place (``a``'s shape and dtype are kept)."""
    _require_var(a, "fill")
    n = a._node
    v = B.cast_node(node(value), n.dtype)
    if v.size != 1:
        raise ValueError("fill: the value must be a scalar")
    v = B.reshape(var(v), ())._node
    a._node = node(B.broadcast_to(var(v), n.shape)) if n.shape else v


def fill_diagonal(a: Var, val: Any, wrap: bool = False) -> None:
    """Fill the main diagonal of ``a`` (in place; numpy.fill_diagonal)."""
    _require_var(a, "fill_diagonal")
    n = node(a)
    if len(n.shape) < 2:
        raise ValueError("array must be at least 2-d")
    if len(n.shape) == 2:
        step = n.shape[1] + 1
        end = n.size if wrap else n.shape[1] * n.shape[1]
    else:
        if len(set(n.shape)) != 1:
            raise ValueError("All dimensions of input must be of equal length")
        step = 1 + int(_np.cumprod(n.shape[:-1]).sum())
        end = n.size
    idx = _np.arange(0, min(end, n.size), step).astype(_np.int32)
    put(a, const(idx), val)


def choose(a: Any, choices: Sequence[Any], out: Any = None, mode: str = "raise") -> Var:
    """Pick from ``choices`` by the index array ``a`` (numpy.choose), built as nested selects."""
    idx = int_node(a)
    nodes = [node(c) for c in choices]
    if not nodes:
        raise ValueError("choices must not be empty")
    k = len(nodes)
    if mode == "raise" and idx.value is not None and idx.size and (idx.value.min() < 0 or idx.value.max() >= k):
        raise ValueError("invalid entry in choice array")
    idx = _wrap_indices(idx, k, mode) if mode != "raise" else idx
    res = var(nodes[-1])
    for i in range(k - 2, -1, -1):
        res = B.select(B.binary("equal", var(idx), i), var(nodes[i]), res)
    shape = _np.broadcast_shapes(idx.shape, *(n.shape for n in nodes))
    return finish(B.broadcast_to(res, shape), out)


def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Var:
    """Elements from ``choicelist`` by the first true condition (numpy.select)."""
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if not condlist:
        raise ValueError("select with an empty condition list is not possible")
    res = default
    for c, v in zip(reversed(list(condlist)), reversed(list(choicelist))):
        res = B.select(c, v, res)
    shape = _np.broadcast_shapes(*(node(c).shape for c in condlist), *(node(v).shape for v in choicelist))
    return B.broadcast_to(res, shape)


def unravel_index(indices: Any, shape: Any, order: str = "C"):
    """Coordinates of flat ``indices`` in an array of ``shape``: a list of int32 Vars (MNN's documented
    return type; numpy gives a tuple)."""
    dims = tuple(int(s) for s in (shape.read_view().tolist() if isinstance(shape, Var) else
                                  (shape if isinstance(shape, (list, tuple)) else (shape,))))
    idx = int_node(indices)
    total = int(_np.prod(dims))
    if idx.value is not None and idx.size and (idx.value.min() < 0 or idx.value.max() >= total):
        raise ValueError(f"index {int(idx.value.max())} is out of bounds for array with size {total}")
    out = []
    rem = var(idx)
    order_dims = list(enumerate(dims))
    if order == "F":
        for i, d in order_dims:
            out.append((i, B.binary("mod", rem, d)))
            rem = B.binary("floordiv", rem, d)
    else:
        for i, d in reversed(order_dims):
            out.append((i, B.binary("mod", rem, d)))
            rem = B.binary("floordiv", rem, d)
    out.sort(key=lambda t: t[0])
    return [v for _, v in out]


def ravel_multi_index(multi_index: Sequence[Any], dims: Sequence[int], mode: str = "raise",
                      order: str = "C") -> Var:
    """Flat indices of the coordinate arrays ``multi_index`` in an array of shape ``dims`` (int32)."""
    dims = tuple(int(d) for d in dims)
    if len(multi_index) != len(dims):
        raise ValueError(f"parameter multi_index must be a sequence of length {len(dims)}")
    modes = (mode,) * len(dims) if isinstance(mode, str) else tuple(mode)
    coords = []
    for c, d, m in zip(multi_index, dims, modes):
        cn = int_node(c)
        if m == "raise":
            if cn.value is not None and cn.size and (cn.value.min() < 0 or cn.value.max() >= d):
                raise ValueError("invalid entry in coordinates array")
        else:
            cn = _wrap_indices(cn, d, m)
        coords.append(var(cn))
    order_ix = range(len(dims)) if order == "C" else range(len(dims) - 1, -1, -1)
    res: Any = 0
    for i in order_ix:
        res = B.binary("add", B.binary("mul", res, dims[i]), coords[i])
    return B.cast(res, I32) if isinstance(res, Var) else const(_np.array(res, _np.int32))


def indices(dimensions: Sequence[int], dtype: Any = int, sparse: bool = False):
    """Grid index arrays (numpy.indices), int32 by default."""
    dims = tuple(int(d) for d in dimensions)
    res = _np.indices(dims, sparse=sparse)
    if sparse:
        return tuple(const(r, dtype) for r in res)
    return const(res, dtype)


def ix_(*args: Any):
    """Open-mesh index arrays (numpy.ix_), int32."""
    out = []
    nd = len(args)
    for k, a in enumerate(args):
        arr = _np.asarray(var(node(a)).read_view() if isinstance(a, Var) else a)
        if arr.ndim != 1:
            raise ValueError("Cross index must be 1 dimensional")
        if arr.dtype == bool:
            arr = _np.nonzero(arr)[0]
        out.append(const(arr.reshape((1,) * k + (arr.size,) + (1,) * (nd - k - 1))))
    return tuple(out)


def diag_indices(n: int, ndim: int = 2):
    """Indices of the main diagonal of an n x n x ... array (int32)."""
    idx = const(_np.arange(int(n), dtype=_np.int32))
    return (idx,) * int(ndim)


def diag_indices_from(arr: Any):
    """Indices of the main diagonal of ``arr`` (all its dimensions equal)."""
    s = node(arr).shape
    if len(s) < 2:
        raise ValueError("input array must be at least 2-d")
    if len(set(s)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    return diag_indices(s[0], len(s))


def tril_indices(n: int, k: int = 0, m: int | None = None):
    """Indices of the lower triangle of an n x m matrix (int32)."""
    return tuple(const(i.astype(_np.int32)) for i in _np.tril_indices(int(n), int(k), m))


def triu_indices(n: int, k: int = 0, m: int | None = None):
    """Indices of the upper triangle of an n x m matrix (int32)."""
    return tuple(const(i.astype(_np.int32)) for i in _np.triu_indices(int(n), int(k), m))


def tril_indices_from(arr: Any, k: int = 0):
    """Indices of the lower triangle of 2-D ``arr``."""
    s = node(arr).shape
    if len(s) != 2:
        raise ValueError("input array must be 2-d")
    return tril_indices(s[-2], k, s[-1])


def triu_indices_from(arr: Any, k: int = 0):
    """Indices of the upper triangle of 2-D ``arr``."""
    s = node(arr).shape
    if len(s) != 2:
        raise ValueError("input array must be 2-d")
    return triu_indices(s[-2], k, s[-1])


def mask_indices(n: int, mask_func: Any, k: int = 0):
    """Indices where ``mask_func(ones((n, n)), k)`` is non-zero (numpy.mask_indices)."""
    from ._creation import ones
    m = mask_func(ones((n, n), dtype=_np.int32), k)
    vals = _np.asarray(m.read_view() if isinstance(m, Var) else m)
    return tuple(const(i.astype(_np.int32)) for i in _np.nonzero(vals != 0))
