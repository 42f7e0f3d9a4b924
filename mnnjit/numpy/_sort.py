"""Sorting, searching and counting: sort, argsort, partition, lexsort, searchsorted, unique, nonzero..."""
from __future__ import annotations

from typing import Any

import numpy as _np

from ..ops import build as B
from ..var import Var
from ._core import axis_arg, const, flat, finish, is_int, node, var


def _prep(a: Any, axis: Any):
    n = node(a)
    if axis is None:
        n = flat(var(n))._node
        return n, 0
    return n, axis_arg(axis, len(n.shape))


def _check_order(order: Any) -> None:
    if order is not None:
        raise ValueError("Cannot specify order when the array has no fields.")


def sort(a: Any, axis: Any = -1, kind: str | None = None, order: Any = None, descending: bool = False) -> Var:
    """A sorted copy of ``a`` along ``axis`` (None: flattened). NaNs last; stable."""
    _check_order(order)
    n, ax = _prep(a, axis)
    return var(B.make_node("sort", (n,), {"axis": ax, "descending": bool(descending)}))


def argsort(a: Any, axis: Any = -1, kind: str | None = None, order: Any = None, descending: bool = False) -> Var:
    """int32 indices that sort ``a`` along ``axis`` (stable: ties keep their order)."""
    _check_order(order)
    n, ax = _prep(a, axis)
    return var(B.make_node("argsort", (n,), {"axis": ax, "descending": bool(descending)}))


def msort(a: Any) -> Var:
    """``a`` sorted along its first axis."""
    return sort(a, axis=0)


def sort_complex(a: Any) -> Var:
    """``a`` sorted (mnnjit has no complex dtype: real data sorted, as float32)."""
    return sort(B.cast(a, _np.float32), axis=-1)


def _kth(kth: Any, n: int) -> tuple[int, ...]:
    ks = [kth] if is_int(kth) else list(_np.asarray(kth.read_view() if isinstance(kth, Var) else kth).ravel())
    out = []
    for k in ks:
        k = int(k)
        if not -n <= k < n:
            raise ValueError(f"kth(={k}) out of bounds ({n})")
        out.append(k + n if k < 0 else k)
    return tuple(sorted(out))


def partition(a: Any, kth: Any, axis: Any = -1, kind: str = "introselect", order: Any = None) -> Var:
    """``a`` partitioned so that each ``kth`` element is in its sorted place."""
    _check_order(order)
    n, ax = _prep(a, axis)
    return var(B.make_node("partition", (n,), {"kth": _kth(kth, n.shape[ax]), "axis": ax}))


def argpartition(a: Any, kth: Any, axis: Any = -1, kind: str = "introselect", order: Any = None) -> Var:
    """int32 indices that partition ``a`` (see ``partition``)."""
    _check_order(order)
    n, ax = _prep(a, axis)
    return var(B.make_node("argpartition", (n,), {"kth": _kth(kth, n.shape[ax]), "axis": ax}))


def topk(a: Any, k: int, axis: int = -1, largest: bool = True) -> tuple[Var, Var]:
    """The ``k`` largest (or smallest) values along ``axis``, sorted, and their int32 indices."""
    n, ax = _prep(a, axis)
    if not 0 <= int(k) <= n.shape[ax]:
        raise ValueError(f"k={k} is out of range for axis {ax} of size {n.shape[ax]}")
    return B.make("topk", [var(n)], {"k": int(k), "axis": ax, "largest": bool(largest)})


def lexsort(keys: Any, axis: int = -1) -> Var:
    """Indices that sort by ``keys`` (last key primary), int32."""
    if isinstance(keys, (list, tuple)):
        nodes = [node(k) for k in keys]
        if not nodes:
            raise TypeError("need sequence of keys with len > 0 in lexsort")
        shapes = {n.shape for n in nodes}
        if len(shapes) != 1:
            raise ValueError("all keys need to be the same shape")
        from ._shape import stack
        stacked = node(stack(nodes, axis=0))
    else:
        stacked = node(keys)
        if len(stacked.shape) == 0:
            raise TypeError("need sequence of keys with len > 0 in lexsort")
    ax = axis_arg(axis, len(stacked.shape) - 1) if len(stacked.shape) > 1 else axis_arg(axis, 1)
    if len(stacked.shape) == 1:
        stacked = B.reshape(var(stacked), (stacked.shape[0], 1))._node
        res = var(B.make_node("lexsort", (stacked,), {"axis": 0}))
        return B.reshape(res, ())
    return var(B.make_node("lexsort", (stacked,), {"axis": ax}))


def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None) -> Var:
    """Insertion indices of ``v`` into sorted 1-D ``a`` (int32)."""
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right' (got {side!r})")
    na = node(a)
    if len(na.shape) != 1:
        raise ValueError("object too deep for desired array" if len(na.shape) > 1 else
                         "object of too small depth for desired array")
    if sorter is not None:
        from ._indexing import take
        na = node(take(var(na), sorter))
    nv = node(v)
    dt = B.result_dtype(na.dtype, nv.dtype)
    return var(B.make_node("searchsorted", (B.cast_node(na, dt), B.cast_node(nv, dt)), {"side": side}))


def unique(ar: Any, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis: Any = None, *, equal_nan: bool = True):
    """Sorted distinct values of ``ar`` (flattened), optionally with index, inverse and counts (int32).

    The number of distinct values decides the output shape, so the input is read when the node is built.
    """
    n = node(ar)
    if axis is not None:
        return _unique_axis(n, axis, return_index, return_inverse, return_counts)
    values = var(n).read_view()
    count = int(_np.unique(values.ravel()).shape[0]) if values.size else 0
    flat_n = flat(var(n))._node
    outs = B.make("unique", [var(flat_n)], {"n": count})
    vals, index, inverse, counts = outs
    if return_inverse and len(n.shape) != 1:
        inverse = B.reshape(inverse, n.shape)  # numpy 2: the inverse has the input's shape
    extra = [x for x, want in ((index, return_index), (inverse, return_inverse), (counts, return_counts)) if want]
    return (vals, *extra) if extra else vals


def _unique_axis(n, axis, return_index, return_inverse, return_counts):
    ax = axis_arg(axis, len(n.shape))
    arr = var(n).read_view()
    res = _np.unique(arr, return_index=return_index, return_inverse=return_inverse,
                     return_counts=return_counts, axis=ax)
    # The rows to keep are known now: gather them lazily from the input.
    if not isinstance(res, tuple):
        res = (res,)
    _, idx_first, _ = _np.unique(arr, return_index=True, return_inverse=True, axis=ax)
    from ._indexing import take
    out = [take(var(n), const(idx_first.astype(_np.int32)), axis=ax)]
    out.extend(const(r.astype(_np.int32)) for r in res[1:])
    return tuple(out) if len(out) > 1 else out[0]


def nonzero(a: Any) -> tuple:
    """Indices of the non-zero elements, one int32 Var per axis (read when built: value-dependent shape)."""
    n = node(a)
    vals = var(n).read_view()
    if vals.ndim == 0:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use np.atleast_1d(scalar).nonzero() "
                         "instead.")
    return tuple(const(i.astype(_np.int32)) for i in _np.nonzero(vals))


def argwhere(a: Any) -> Var:
    """Indices of the non-zero elements, shape (N, ndim), int32."""
    vals = var(node(a)).read_view()
    return const(_np.argwhere(vals).astype(_np.int32))


def flatnonzero(a: Any) -> Var:
    """Indices of the non-zero elements of the flattened ``a`` (int32)."""
    vals = var(node(a)).read_view()
    return const(_np.flatnonzero(vals).astype(_np.int32))


def count_nonzero(a: Any, axis: Any = None, *, keepdims: bool = False):
    """Number of non-zero values (a Python int for the whole array)."""
    n = node(a)
    nz = B.make_node("not_equal", (n, B.scalar_node(0, n.dtype)))
    res = B.reduce("reduce_sum", var(nz), axis, keepdims)
    if (axis is None and not keepdims) or not res._node.shape:  # MNN: count_nonzero(x1d, 0) is an int
        return int(res.read_view().item())
    return res


def extract(condition: Any, arr: Any) -> Var:
    """Elements of ``arr`` (flattened) where ``condition`` (flattened) is non-zero."""
    cond = _np.asarray(var(node(condition)).read_view()).ravel() != 0
    a = flat(arr)
    n = a._node.shape[0]
    idx = _np.nonzero(cond[:n])[0].astype(_np.int32)
    from ._indexing import take
    return take(a, const(idx))


def compress(condition: Any, a: Any, axis: Any = None, out: Any = None) -> Var:
    """Slices of ``a`` along ``axis`` where ``condition`` is true."""
    cond = _np.asarray(var(node(condition)).read_view()).ravel() != 0
    n = node(a)
    if axis is None:
        n, ax = flat(var(n))._node, 0
    else:
        ax = axis_arg(axis, len(n.shape))
    if cond.shape[0] > n.shape[ax]:
        raise IndexError(f"index {cond.shape[0] - 1} is out of bounds for axis {ax} with size {n.shape[ax]}")
    idx = _np.nonzero(cond)[0].astype(_np.int32)
    from ._indexing import take
    return finish(take(var(n), const(idx), axis=ax), out)


def digitize(x: Any, bins: Any, right: bool = False) -> Var:
    """Indices of the bins each ``x`` falls into (numpy.digitize), int32."""
    b = _np.asarray(var(node(bins)).read_view())
    if b.ndim != 1:
        raise ValueError("object too deep for desired array")
    diffs = _np.diff(b)
    increasing = bool(_np.all(diffs >= 0))
    if not increasing and not _np.all(diffs <= 0):
        raise ValueError("bins must be monotonically increasing or decreasing")
    side = "left" if right else "right"
    if increasing:
        return searchsorted(var(node(bins)), x, side=side)
    rev = const(b[::-1].copy())
    return B.binary("sub", len(b), searchsorted(rev, x, side=side))


__all__ = ["sort", "argsort", "msort", "sort_complex", "partition", "argpartition", "topk", "lexsort",
           "searchsorted", "unique", "nonzero", "argwhere", "flatnonzero", "count_nonzero", "extract", "compress",
           "digitize"]

