"""Indexing and assignment: ``x[key]`` and ``x[key] = value`` with numpy's rules.

Basic keys (ints, slices with any step, None, Ellipsis) become a ``slice`` node plus a ``reshape``;
keys with integer arrays or boolean masks become an ``index`` node whose template refers to the
index arrays as extra inputs. A boolean mask's result shape depends on its values, so reading
``x[mask]`` evaluates the mask when the node is built (as MNN does).
"""
from __future__ import annotations

import numbers
from typing import Any, Optional

import numpy as np

from ..graph import Node, const_node
from . import build as B
from .structural import index_shape


def _is_int(item: Any) -> bool:
    return isinstance(item, (numbers.Integral, np.integer)) and not isinstance(item, (bool, np.bool_))


def _classify(item: Any):
    """('basic', item) | ('int', node) | ('mask', node) for one key item."""
    Var = B._var_cls()
    if item is None or item is Ellipsis or isinstance(item, slice):
        if isinstance(item, slice):
            for part in (item.start, item.stop, item.step):
                if part is not None and not _is_int(part):
                    if isinstance(part, Var) and part.size == 1:
                        continue
                    raise TypeError("slice indices must be integers or None or have an __index__ method")
            item = slice(*(int(p) if isinstance(p, Var) else p for p in (item.start, item.stop, item.step)))
        return "basic", item
    if _is_int(item):
        return "basic", int(item)
    if isinstance(item, (bool, np.bool_)):
        return "mask", const_node(np.array(item, dtype=np.int32))
    if isinstance(item, Var):
        node = item._node
        if node.dtype.kind == "f":
            raise IndexError("arrays used as indices must be of integer (or boolean) type")
        return ("mask" if B.is_boolean(node) else "int"), node
    if isinstance(item, float):
        raise IndexError("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or "
                         "boolean arrays are valid indices")
    arr = np.asarray(item)
    if arr.dtype == np.bool_:
        return "mask", const_node(arr.astype(np.int32))
    if arr.dtype.kind in "iu" or (arr.size == 0 and arr.dtype.kind == "f"):
        return "int", const_node(arr.astype(np.int32))
    raise IndexError("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or "
                     "boolean arrays are valid indices")


def _expand(key: Any, ndim: int) -> list[tuple[str, Any]]:
    if not isinstance(key, tuple):
        key = (key,)
    items = [_classify(k) for k in key]
    n_ellipsis = sum(1 for kind, it in items if kind == "basic" and it is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    # a 0-d boolean consumes no dimension (it adds one of length 1 or 0)
    used = sum(len(it.shape) if kind == "mask" else
               (0 if kind == "basic" and (it is None or it is Ellipsis) else 1) for kind, it in items)
    if used > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but {used} were indexed")
    out: list[tuple[str, Any]] = []
    for kind, it in items:
        if kind == "basic" and it is Ellipsis:
            out.extend([("basic", slice(None))] * (ndim - used))
        else:
            out.append((kind, it))
    if n_ellipsis == 0:
        out.extend([("basic", slice(None))] * (ndim - used))
    return out


def _basic(node: Node, items: list[tuple[str, Any]]):
    """Slice + reshape for a key made only of ints, slices and None."""
    shape = node.shape
    begin, end, step, out_shape = [], [], [], []
    dim = 0
    for _, it in items:
        if it is None:
            out_shape.append(1)
            continue
        n = shape[dim]
        if isinstance(it, int):
            if not -n <= it < n:
                raise IndexError(f"index {it} is out of bounds for axis {dim} with size {n}")
            i = it + n if it < 0 else it
            begin.append(i), end.append(i + 1), step.append(1)
        else:
            if it.step == 0:
                raise ValueError("slice step cannot be zero")
            b, e, s = it.indices(n)
            if not len(range(b, e, s)):
                b, e, s = 0, 0, 1   # empty (a negative step from below -n gives begin -1: not "the last")
            begin.append(b), end.append(e), step.append(s)
            out_shape.append(len(range(b, e, s)))
        dim += 1
    full = all(b == 0 and e == n and s == 1 for b, e, s, n in zip(begin, end, step, shape))
    if not full:
        node = B.make_node("slice", (node,), {"begin": tuple(begin), "end": tuple(end), "step": tuple(step)})
    out_shape = tuple(out_shape)
    if out_shape != node.shape:
        node = B.make_node("reshape", (node,), {"shape": out_shape})
    return node


def _template(items: list[tuple[str, Any]], lazy_masks: bool):
    """An index template and its extra input nodes."""
    template, extra = [], []
    for kind, it in items:
        if kind == "basic":
            template.append(it)
        elif kind == "int":
            template.append(("in", len(extra)))
            extra.append(it)
        elif lazy_masks:
            template.append(("mask", len(extra)))
            extra.append(it)
        else:
            for arr in np.nonzero(_read(it)):      # (0-d masks: _scalar_masks_as_axes)
                template.append(("in", len(extra)))
                extra.append(const_node(arr.astype(np.int32)))
    return tuple(template), extra


def _read(node: Node) -> np.ndarray:
    return B.wrap(node).read_view()


def _check_const_bounds(node: Node, template: tuple, extra: list[Node]) -> None:
    dim = 0
    for item in template:
        if item is None:
            continue
        if isinstance(item, tuple) and item[0] == "in":
            idx = extra[item[1]]
            n = node.shape[dim]
            if idx.value is not None and idx.size:
                lo, hi = int(idx.value.min()), int(idx.value.max())
                if lo < -n or hi >= n:
                    raise IndexError(f"index {hi if hi >= n else lo} is out of bounds for axis {dim} with size {n}")
        dim += 1


def _scalar_mask_value(kind: str, it: Any) -> Optional[bool]:
    """The value of a 0-d boolean index item (None for any other item)."""
    if kind != "mask" or len(it.shape):
        return None
    if it.value is None:
        raise IndexError("a 0-d boolean index must be known when the index is built")
    return bool(np.asarray(it.value))


def _scalar_masks_as_axes(node: Node, items: list[tuple[str, Any]]):
    """``x[..., True, ...]`` as numpy reads it: a new axis there, indexed by the integer array
    [0] (``False``: the empty array), so it joins the other advanced indices."""
    dim, out = 0, []
    for kind, it in items:
        flag = _scalar_mask_value(kind, it)
        if flag is None:
            out.append((kind, it))
            if not (kind == "basic" and it is None):
                dim += len(it.shape) if kind == "mask" else 1
            continue
        shape = node.shape[:dim] + (1,) + node.shape[dim:]
        node = B.make_node("reshape", (node,), {"shape": shape})
        out.append(("int", const_node(np.zeros(1 if flag else 0, np.int32))))
        dim += 1
    return node, out


def getitem(x: Any, key: Any):
    """``x[key]`` as a Var (numpy's semantics; slices are copies)."""
    node = B.as_node(x)
    items = _expand(key, len(node.shape))
    if all(kind == "basic" for kind, _ in items):
        return B.wrap(_basic(node, items))
    node, items = _scalar_masks_as_axes(node, items)
    template, extra = _template(items, lazy_masks=False)
    _check_const_bounds(node, template, extra)
    out_shape = index_shape(node.shape, template, [e.shape for e in extra])
    return B.wrap(B.make_node("index", (node, *extra), {"template": template, "shape": out_shape}))


def setitem_node(target: Node, key: Any, value: Any) -> Node:
    """The node of ``target`` after ``target[key] = value`` (numpy's broadcasting rules)."""
    items = _expand(key, len(target.shape))
    flags = [_scalar_mask_value(kind, it) for kind, it in items]
    if False in flags:          # x[False] = v selects nothing
        return target
    items = [item for item, flag in zip(items, flags) if flag is None]
    vnode = B.cast_node(B.as_node(value), target.dtype)
    has_masks = any(kind == "mask" for kind, _ in items)
    lazy = has_masks and vnode.size == 1 and sum(kind != "basic" for kind, _ in items) == 1
    template, extra = _template(items, lazy_masks=lazy)
    _check_const_bounds(target, template, extra)
    if lazy:
        sel_shape = (1,)
    else:
        sel_shape = index_shape(target.shape, template, [e.shape for e in extra])
    vshape = vnode.shape
    ok = len(vshape) <= len(sel_shape) or all(d == 1 for d in vshape[: len(vshape) - len(sel_shape)])
    trimmed = vshape[len(vshape) - len(sel_shape):] if len(vshape) > len(sel_shape) else vshape
    if ok:
        try:
            from .elementwise import broadcast_shape
            ok = broadcast_shape(trimmed, sel_shape) == tuple(sel_shape)
        except ValueError:
            ok = False
    if not ok:
        raise ValueError(f"could not broadcast input array from shape {tuple(vshape)} into shape {tuple(sel_shape)}")
    return B.make_node("setitem", (target, vnode, *extra), {"template": template})
