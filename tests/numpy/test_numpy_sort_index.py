"""Sorting, searching, gathering and scattering functions against numpy (exact results)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mnnjit.numpy as mnp
from numpy_testlib import arrays, assert_close, float_arrays, int_arrays, shapes, to_np


def _same_outcome(mfn, nfn):
    try:
        want = nfn()
    except (ValueError, TypeError, IndexError) as exc:
        with pytest.raises(type(exc)):
            to_np(mfn())
        return
    assert_close(mfn(), want)


def _axis(d, a, allow_none=True):
    opts = [st.integers(-a.ndim, a.ndim - 1)] if a.ndim else []
    if allow_none or not opts:
        opts.append(st.none())
    return d.draw(st.one_of(*opts))


def _case_sort(d):
    a = d.draw(arrays(shapes(), nan=True))
    ax = _axis(d, a)
    return (lambda: mnp.sort(a, ax)), (lambda: np.sort(a, ax))


def _case_argsort(d):
    a = d.draw(int_arrays(shapes(), -3, 3))  # many ties: checks stability
    ax = _axis(d, a)
    return (lambda: mnp.argsort(a, ax)), (lambda: np.argsort(a, ax, kind="stable"))


def _case_argsort_descending(d):
    a = d.draw(int_arrays(shapes(min_dims=1), -3, 3))
    return (lambda: mnp.argsort(a, -1, descending=True)), \
        (lambda: np.flip(a.shape[-1] - 1 - np.argsort(np.flip(a, -1), -1, kind="stable"), -1))


def _case_msort(d):
    a = d.draw(arrays(shapes(min_dims=1)))
    return (lambda: mnp.msort(a)), (lambda: np.sort(a, 0))


def _case_lexsort(d):
    n = d.draw(st.integers(1, 6))
    keys = [d.draw(int_arrays(st.just((n,)), 0, 2)) for _ in range(d.draw(st.integers(1, 3)))]
    return (lambda: mnp.lexsort(keys)), (lambda: np.lexsort(keys))


def _case_searchsorted(d):
    a = np.sort(d.draw(arrays(shapes(1, 1))))
    v = d.draw(arrays(shapes()))
    side = d.draw(st.sampled_from(["left", "right"]))
    return (lambda: mnp.searchsorted(a, v, side)), (lambda: np.searchsorted(a, v, side))


def _case_unique(d):
    a = d.draw(int_arrays(shapes(), -4, 4) | float_arrays(shapes(), nan=True))
    flags = d.draw(st.tuples(st.booleans(), st.booleans(), st.booleans()))
    return (lambda: mnp.unique(a, *flags)), (lambda: np.unique(a, *flags))


def _case_unique_axis(d):
    a = d.draw(int_arrays(shapes(2, 2, 1), 0, 2))
    return (lambda: mnp.unique(a, axis=0)), (lambda: np.unique(a, axis=0))


def _case_nonzero(d):
    a = d.draw(int_arrays(shapes(min_dims=1), -1, 1))
    k = d.draw(st.sampled_from(["nonzero", "argwhere", "flatnonzero"]))
    fn = getattr(np, k)
    return (lambda: getattr(mnp, k)(a)), (lambda: tuple(fn(a)) if k == "nonzero" else fn(a))


def _case_where1(d):
    a = d.draw(int_arrays(shapes(min_dims=1), -1, 1))
    return (lambda: mnp.where(a)), (lambda: tuple(np.where(a)))


def _case_where3(d):
    a = d.draw(int_arrays(shapes(), -1, 1))
    x = d.draw(arrays(shapes(max_dims=1)))
    return (lambda: mnp.where(a, x, -1)), (lambda: np.where(a, x, -1))


def _case_extract_compress(d):
    a = d.draw(arrays(shapes(min_dims=1)))
    cond = (np.arange(a.size) % 3 == 0).reshape(a.shape)
    k = d.draw(st.sampled_from(["extract", "compress"]))
    if k == "extract":
        return (lambda: mnp.extract(cond, a)), (lambda: np.extract(cond, a))
    c1 = np.arange(a.shape[0]) % 2 == 0
    return (lambda: mnp.compress(c1, a, 0)), (lambda: np.compress(c1, a, 0))


def _case_take(d):
    a = d.draw(arrays(shapes(min_dims=1, min_side=1)))
    ax = _axis(d, a)
    n = a.size if ax is None else a.shape[ax]
    mode = d.draw(st.sampled_from(["raise", "wrap", "clip"]))
    lo, hi = (-n, n - 1) if mode == "raise" else (-2 * n, 2 * n)
    idx = d.draw(int_arrays(shapes(max_dims=2), lo, hi))
    return (lambda: mnp.take(a, idx, ax, mode=mode)), (lambda: np.take(a, idx, ax, mode=mode))


def _case_take_along_axis(d):
    a = d.draw(arrays(shapes(min_dims=1, min_side=1)))
    ax = d.draw(st.integers(-a.ndim, a.ndim - 1))
    shp = list(a.shape)
    shp[ax] = d.draw(st.integers(0, 4))
    shp = [s if i == ax % a.ndim or not d.draw(st.booleans()) else 1 for i, s in enumerate(shp)]
    idx = d.draw(int_arrays(st.just(tuple(shp)), -a.shape[ax], a.shape[ax] - 1))
    return (lambda: mnp.take_along_axis(a, idx, ax)), (lambda: np.take_along_axis(a, idx, ax))


def _inplace(mfn_name, a, *args, **kwargs):
    v = mnp.array(a)
    getattr(mnp, mfn_name)(v, *args, **kwargs)
    return v


def _np_inplace(fn, a, *args, **kwargs):
    b = a.copy()
    fn(b, *args, **kwargs)
    return b


def _case_put_along_axis(d):
    a = d.draw(arrays(shapes(min_dims=1, min_side=1)))
    ax = d.draw(st.integers(-a.ndim, a.ndim - 1))
    shp = list(a.shape)
    shp[ax] = 1
    idx = d.draw(int_arrays(st.just(tuple(shp)), 0, a.shape[ax] - 1))
    return (lambda: _inplace("put_along_axis", a, idx, 99, ax)), \
        (lambda: _np_inplace(np.put_along_axis, a, idx, 99, ax))


def _case_put(d):
    a = d.draw(arrays(shapes(min_dims=1, min_side=1)))
    idx = d.draw(st.lists(st.integers(-a.size, a.size - 1), max_size=4, unique=True))
    vals = d.draw(st.lists(st.integers(-9, 9), min_size=1, max_size=3))
    return (lambda: _inplace("put", a, idx, vals)), (lambda: _np_inplace(np.put, a, idx, vals))


def _case_putmask_place(d):
    a = d.draw(arrays(shapes(min_dims=1, min_side=1)))
    mask = (np.arange(a.size) % 2 == 0).reshape(a.shape)
    vals = d.draw(st.lists(st.integers(-9, 9), min_size=1, max_size=3))
    k = d.draw(st.sampled_from(["putmask", "place"]))
    return (lambda: _inplace(k, a, mask, vals)), (lambda: _np_inplace(getattr(np, k), a, mask, vals))


def _case_copyto(d):
    a = d.draw(float_arrays(shapes(min_dims=1)))
    src = d.draw(float_arrays(st.just(a.shape[-1:])))
    where = np.arange(a.size).reshape(a.shape) % 2 == 0
    return (lambda: _inplace("copyto", a, src, where=where)), (lambda: _np_inplace(np.copyto, a, src, where=where))


def _case_fill(d):
    a = d.draw(arrays(shapes()))
    return (lambda: _inplace("fill", a, 3)), (lambda: _np_inplace(np.ndarray.fill, a, 3))


def _case_fill_diagonal(d):
    n = d.draw(st.integers(1, 4))
    a = np.zeros((n, d.draw(st.integers(1, 5))), np.float32)
    wrap = d.draw(st.booleans())
    return (lambda: _inplace("fill_diagonal", a, 5, wrap)), (lambda: _np_inplace(np.fill_diagonal, a, 5, wrap))


def _case_choose(d):
    idx = d.draw(int_arrays(shapes(max_dims=2), 0, 2))
    choices = [np.full(idx.shape, k * 10, np.int32) for k in range(3)]
    return (lambda: mnp.choose(idx, choices)), (lambda: np.choose(idx, choices))


def _case_select(d):
    x = d.draw(arrays(shapes(max_dims=2)))
    conds = [x < 0, x > 10]
    return (lambda: mnp.select(conds, [x * 2, x - 1], 5)), (lambda: np.select(conds, [x * 2, x - 1], 5))


def _case_unravel_ravel(d):
    dims = tuple(d.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    idx = d.draw(int_arrays(shapes(max_dims=1), 0, int(np.prod(dims)) - 1))
    order = d.draw(st.sampled_from(["C", "F"]))
    if d.draw(st.booleans()):
        return (lambda: mnp.unravel_index(idx, dims, order)), (lambda: list(np.unravel_index(idx, dims, order)))
    coords = np.unravel_index(idx, dims)
    return (lambda: mnp.ravel_multi_index(coords, dims, order=order)), \
        (lambda: np.ravel_multi_index(coords, dims, order=order))


def _case_index_helpers(d):
    n = d.draw(st.integers(1, 4))
    k = d.draw(st.integers(-2, 2))
    name = d.draw(st.sampled_from(["tril_indices", "triu_indices", "diag_indices", "indices", "mask_indices"]))
    if name == "diag_indices":
        return (lambda: mnp.diag_indices(n)), (lambda: np.diag_indices(n))
    if name == "indices":
        return (lambda: mnp.indices((n, 2))), (lambda: np.indices((n, 2)))
    if name == "mask_indices":
        return (lambda: mnp.mask_indices(n, mnp.triu, k)), (lambda: np.mask_indices(n, np.triu, k))
    return (lambda: getattr(mnp, name)(n, k)), (lambda: getattr(np, name)(n, k))


def _case_partition(d):
    a = d.draw(arrays(shapes(min_dims=1, min_side=1)))
    ax = d.draw(st.integers(-a.ndim, a.ndim - 1))
    kth = d.draw(st.integers(-a.shape[ax], a.shape[ax] - 1))
    # Only the kth element is defined: compare it (and the partition property) with numpy.
    def mine():
        p = mnp.partition(a, kth, ax).read()
        idx = mnp.argpartition(a, kth, ax).read()
        kp = np.take(p, [kth], ax)
        assert np.all(np.take(p, np.arange(kth % a.shape[ax]), ax) <= kp)
        assert np.all(np.take(p, np.arange(kth % a.shape[ax] + 1, a.shape[ax]), ax) >= kp)
        assert np.array_equal(np.sort(np.take_along_axis(a, idx, ax), ax), np.sort(a, ax))
        return mnp.array(kp)
    return mine, (lambda: np.take(np.partition(a, kth, ax), [kth], ax))


def _case_topk(d):
    a = d.draw(int_arrays(shapes(min_dims=1, min_side=1), -3, 3))
    k = d.draw(st.integers(0, a.shape[-1]))
    order = np.argsort(-a.astype(np.int64), -1, kind="stable")[..., :k]
    return (lambda: mnp.topk(a, k)), (lambda: (np.take_along_axis(a, order, -1), order))


CASES = {name[len("_case_"):]: fn for name, fn in globals().items() if name.startswith("_case_")}


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_sort_index_function(name, data):
    mfn, nfn = CASES[name](data)
    _same_outcome(mfn, nfn)


def test_var_methods_forward():
    v = mnp.array([3, 1, 2])
    assert v.sort().read().tolist() == [1, 2, 3]
    assert v.argsort().read().tolist() == [1, 2, 0]
    v.fill(7)
    assert v.read().tolist() == [7, 7, 7]
    w = mnp.array([[1.0, 2.0], [3.0, 4.0]])
    assert w.sum() == 10.0 and w.var() == 1.25
    assert w.searchsorted is not None


def test_fill_keeps_other_vars():
    v = mnp.array([1.0, 2.0])
    w = v + 1
    v.fill(0)
    assert w.read().tolist() == [2.0, 3.0]
    assert v.read().tolist() == [0.0, 0.0]


def test_errors():
    with pytest.raises(IndexError):
        mnp.take(np.arange(3), [5])
    with pytest.raises(ValueError):
        mnp.partition(np.arange(3), 5)
    with pytest.raises(ValueError):
        mnp.searchsorted(np.ones((2, 2)), 1)
    with pytest.raises(np.exceptions.AxisError):
        mnp.sort(np.arange(3), axis=1)
