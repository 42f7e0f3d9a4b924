"""Ordering ops: sort, argsort, partition, argpartition, topk, lexsort, searchsorted, unique.

Attribute conventions (``axis`` is always a non-negative int resolved by the front end):

* ``sort``          inputs (x,); attrs ``axis``, ``descending`` (bool). NaNs sort last (numpy's order);
                    with ``descending`` the result is the ascending result reversed.
* ``argsort``       inputs (x,); attrs ``axis``, ``descending``. int32 indices; STABLE: equal elements
                    keep their input order (also when descending).
* ``partition``     inputs (x,); attrs ``kth`` (tuple of non-negative ints), ``axis``. Only the elements
                    at the ``kth`` positions are defined (every element before is <=, after is >=);
                    a backend may return the fully sorted array, which satisfies this.
* ``argpartition``  as ``partition``, int32 indices.
* ``topk``          inputs (x,); attrs ``k``, ``axis``, ``largest`` (bool). Two outputs (values, int32
                    indices), sorted (largest first when ``largest``); ties: lower index first.
* ``lexsort``       inputs (keys,) with the keys stacked on axis 0 (last key is the primary one);
                    attrs ``axis`` (an axis of one key, i.e. of ``keys.shape[1:]``). int32 indices.
* ``searchsorted``  inputs (a, v) with ``a`` 1-D sorted ascending, same dtype as ``v``; attrs ``side``
                    ('left' or 'right'). int32 output of ``v``'s shape.
* ``unique``        inputs (x,) flattened by the front end; attrs ``n`` (the number of distinct values,
                    known when the node is built since the output shape depends on the values).
                    Four outputs: sorted unique values (n,), int32 first-occurrence index (n,), int32
                    inverse (x.size,), int32 counts (n,). NaNs collapse into one value, as in numpy
                    >= 1.21 (``equal_nan=True``).
"""
from __future__ import annotations

import numpy as np

from .._dtypes import I32
from .registry import OpDef, register


def _same(inputs, attrs):
    return inputs[0].shape, inputs[0].dtype


def _same_i32(inputs, attrs):
    return inputs[0].shape, I32


def _stable_argsort(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    n = x.shape[axis]
    # Sort the reversed array ascending (stable), reverse the order: ties keep input order.
    rev = np.flip(x, axis)
    idx = np.flip(np.argsort(rev, axis=axis, kind="stable"), axis)
    return (n - 1) - idx


def _sort_kind(x: np.ndarray) -> str:
    """numpy's default sort (a vectorised quicksort: ~3x faster than the stable one on float32)
    where its result cannot differ from the stable sort's: when no two elements compare equal with
    different bits. Integers; floats with no zeros (+0.0 and -0.0 compare equal) and no NaNs
    (payloads); any other array sorts stably."""
    kind = x.dtype.kind
    if kind in "iub":
        return "quicksort"
    if kind == "f" and not (x == 0).any() and not np.isnan(x).any():
        return "quicksort"
    return "stable"


def _sort_ref(xs, attrs):
    x = xs[0]
    out = np.sort(x, axis=attrs["axis"], kind=_sort_kind(x))
    if attrs.get("descending"):
        out = np.flip(out, attrs["axis"])
    return out


def _quick_argsort(x: np.ndarray, axis: int) -> np.ndarray | None:
    """Ascending stable sort indices from numpy's default sort (quicksort, ~2x faster than the stable
    sort on float32), or None where the stable sort is needed. The quicksort's order is the stable
    one except inside runs of elements comparing equal (and the NaNs, which sort last), where the
    stable sort keeps input order: those runs (rare in real data) get their indices sorted. 1-D
    only; other ranks sort stably unless no two elements along ``axis`` compare equal."""
    if x.dtype.kind not in "iuf" or x.shape[axis] < 2:
        return None
    idx = np.argsort(x, axis=axis)
    if x.ndim != 1:
        s = np.moveaxis(np.take_along_axis(x, idx, axis), axis, -1)
        last = s[..., -1]
        if (last != last).any() or (s[..., 1:] == s[..., :-1]).any():
            return None
        return idx
    s = x[idx]
    n = s.shape[0]
    end = n
    if x.dtype.kind == "f" and s[-1] != s[-1]:     # NaNs, all at the end: input order among them
        end = int(np.searchsorted(np.isnan(s), True))
        idx[end:].sort()
    eq = s[1:end] == s[:end - 1]
    if eq.any():
        in_run = np.zeros(end, np.bool_)
        in_run[1:] = eq
        in_run[:-1] |= eq
        pos = np.flatnonzero(in_run)
        starts = np.ones(pos.shape[0], np.bool_)
        starts[1:] = ~eq[pos[1:] - 1]
        run = np.cumsum(starts)
        sub = idx[pos]
        idx[pos] = sub[np.lexsort((sub, run))]
    return idx


def _argsort_ref(xs, attrs):
    x, axis = xs[0], attrs["axis"]
    idx = None if attrs.get("descending") else _quick_argsort(x, axis)
    if idx is None:
        idx = _stable_argsort(x, axis, bool(attrs.get("descending")))
    return idx.astype(np.int32)


register(OpDef("sort", "opaque", _same, _sort_ref, mnn_type="TopKV2"))
register(OpDef("argsort", "opaque", _same_i32, _argsort_ref, mnn_type="TopKV2"))


def _partition_ref(xs, attrs):
    return np.partition(xs[0], list(attrs["kth"]), axis=attrs["axis"])


def _argpartition_ref(xs, attrs):
    return np.argpartition(xs[0], list(attrs["kth"]), axis=attrs["axis"]).astype(np.int32)


register(OpDef("partition", "opaque", _same, _partition_ref, mnn_type="TopKV2"))
register(OpDef("argpartition", "opaque", _same_i32, _argpartition_ref, mnn_type="TopKV2"))


def _topk_infer(inputs, attrs):
    shape = list(inputs[0].shape)
    shape[attrs["axis"]] = attrs["k"]
    return [(tuple(shape), inputs[0].dtype), (tuple(shape), I32)]


def _topk_ref(xs, attrs):
    x = xs[0]
    axis, k = attrs["axis"], attrs["k"]
    idx = _stable_argsort(x, axis, bool(attrs.get("largest", True)))
    idx = np.take(idx, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int32)


register(OpDef("topk", "opaque", _topk_infer, _topk_ref, mnn_type="TopKV2", n_out=2))


def _lexsort_infer(inputs, attrs):
    return inputs[0].shape[1:], I32


def _lexsort_ref(xs, attrs):
    keys = xs[0]
    return np.lexsort(tuple(keys), axis=attrs["axis"]).astype(np.int32)


register(OpDef("lexsort", "opaque", _lexsort_infer, _lexsort_ref))


def _searchsorted_infer(inputs, attrs):
    return inputs[1].shape, I32


def _searchsorted_ref(xs, attrs):
    a, v = xs
    return np.searchsorted(a, v, side=attrs.get("side", "left")).astype(np.int32)


register(OpDef("searchsorted", "opaque", _searchsorted_infer, _searchsorted_ref))


def _unique_infer(inputs, attrs):
    n = attrs["n"]
    x = inputs[0]
    return [((n,), x.dtype), ((n,), I32), ((x.size,), I32), ((n,), I32)]


def _unique_ref(xs, attrs):
    x = xs[0].ravel()
    vals, index, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    if vals.shape[0] != attrs["n"]:
        raise ValueError(f"unique: the input now has {vals.shape[0]} distinct values, the graph was built "
                         f"for {attrs['n']} (the output shape of unique depends on the values)")
    return vals, index.astype(np.int32), inverse.reshape(-1).astype(np.int32), counts.astype(np.int32)


register(OpDef("unique", "opaque", _unique_infer, _unique_ref, mnn_type="Unique", n_out=4))
