"""Shape, joining, splitting, tiling, padding and flipping functions against numpy (exact results)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import mnnjit.numpy as mnp
from numpy_testlib import arrays, assert_close, shapes, to_np


def _same_outcome(mfn, nfn):
    """Both raise the same exception type, or give equal results."""
    try:
        want = nfn()
    except (ValueError, TypeError, IndexError) as exc:
        with pytest.raises(type(exc)):
            res = mfn()
            to_np(res)
        return
    assert_close(mfn(), want)


@st.composite
def _arr_axis(draw, min_dims=1, extra=0):
    a = draw(arrays(shapes(min_dims=min_dims)))
    ax = draw(st.integers(-a.ndim - extra, a.ndim - 1 + extra))
    return a, ax


# name -> builder(data) returning (mnnjit thunk, numpy thunk)
def _case_reshape(d):
    a = d.draw(arrays(shapes()))
    new = d.draw(st.sampled_from([(-1,), (a.size,), (1, -1), (-1, 1)]))
    return (lambda: mnp.reshape(a, new)), (lambda: np.reshape(a, new))


def _case_ravel(d):
    a = d.draw(arrays(shapes()))
    return (lambda: mnp.ravel(a)), (lambda: np.ravel(a))


def _case_transpose(d):
    a = d.draw(arrays(shapes()))
    perm = d.draw(st.permutations(range(a.ndim)))
    return (lambda: mnp.transpose(a, perm)), (lambda: np.transpose(a, perm))


def _case_swapaxes(d):
    a, ax = d.draw(_arr_axis())
    b = d.draw(st.integers(-a.ndim, a.ndim - 1))
    return (lambda: mnp.swapaxes(a, ax, b)), (lambda: np.swapaxes(a, ax, b))


def _case_moveaxis(d):
    a, ax = d.draw(_arr_axis())
    b = d.draw(st.integers(-a.ndim, a.ndim - 1))
    return (lambda: mnp.moveaxis(a, ax, b)), (lambda: np.moveaxis(a, ax, b))


def _case_rollaxis(d):
    a, ax = d.draw(_arr_axis())
    start = d.draw(st.integers(0, a.ndim))
    return (lambda: mnp.rollaxis(a, ax, start)), (lambda: np.rollaxis(a, ax, start))


def _case_expand_dims(d):
    a = d.draw(arrays(shapes(max_dims=2)))
    ax = d.draw(st.one_of(st.integers(-a.ndim - 1, a.ndim), st.just((0, -1))))
    return (lambda: mnp.expand_dims(a, ax)), (lambda: np.expand_dims(a, ax))


def _case_squeeze(d):
    a = d.draw(arrays(shapes(max_side=2)))
    ones = [i for i, s in enumerate(a.shape) if s == 1]
    ax = d.draw(st.one_of(st.none(), st.sampled_from(ones))) if ones else None
    return (lambda: mnp.squeeze(a, ax)), (lambda: np.squeeze(a, ax))


def _case_atleast(d):
    a = d.draw(arrays(shapes()))
    k = d.draw(st.sampled_from(["atleast_1d", "atleast_2d", "atleast_3d"]))
    return (lambda: getattr(mnp, k)(a)), (lambda: getattr(np, k)(a))


def _case_broadcast_to(d):
    a = d.draw(arrays(shapes(max_dims=2, max_side=3)))
    extra = d.draw(st.lists(st.integers(1, 3), max_size=2))
    shp = tuple(extra) + a.shape
    return (lambda: mnp.broadcast_to(a, shp)), (lambda: np.broadcast_to(a, shp))


def _case_broadcast_arrays(d):
    a = d.draw(arrays(shapes(max_dims=2, max_side=3)))
    b = d.draw(arrays(shapes(max_dims=2, max_side=3)))
    return (lambda: mnp.broadcast_arrays(a, b)), (lambda: list(np.broadcast_arrays(a, b)))


def _joined(d, n=3):
    base = d.draw(shapes(min_dims=1, max_dims=3, max_side=3))
    dt = d.draw(st.sampled_from([np.float32, np.int32]))
    return [np.arange(int(np.prod(base)), dtype=dt).reshape(base) + i for i in range(d.draw(st.integers(1, n)))]


def _case_concatenate(d):
    arrs = _joined(d)
    ax = d.draw(st.one_of(st.none(), st.integers(-arrs[0].ndim, arrs[0].ndim - 1)))
    return (lambda: mnp.concatenate(arrs, ax)), (lambda: np.concatenate(arrs, ax))


def _case_stack(d):
    arrs = _joined(d)
    ax = d.draw(st.integers(-arrs[0].ndim - 1, arrs[0].ndim))
    return (lambda: mnp.stack(arrs, ax)), (lambda: np.stack(arrs, ax))


def _case_stackers(d):
    arrs = _joined(d)
    k = d.draw(st.sampled_from(["vstack", "hstack", "dstack", "column_stack", "row_stack"]))
    ref = np.vstack if k == "row_stack" else getattr(np, k)
    return (lambda: getattr(mnp, k)(arrs)), (lambda: ref(arrs))


def _case_block(d):
    a = np.arange(4, dtype=np.float32).reshape(2, 2)
    b = np.ones((2, 1), np.float32)
    c = np.zeros((1, 3), np.float32)
    return (lambda: mnp.block([[a, b], [c]])), (lambda: np.block([[a, b], [c]]))


def _case_split(d):
    a, ax = d.draw(_arr_axis())
    k = d.draw(st.sampled_from(["split", "array_split"]))
    sec = d.draw(st.one_of(st.integers(1, 4), st.lists(st.integers(-4, 6), max_size=3).map(sorted)))
    return (lambda: getattr(mnp, k)(a, sec, ax)), (lambda: getattr(np, k)(a, sec, ax))


def _case_hvdsplit(d):
    a = d.draw(arrays(shapes(min_dims=1)))
    k = d.draw(st.sampled_from(["hsplit", "vsplit", "dsplit"]))
    sec = d.draw(st.one_of(st.integers(1, 3), st.lists(st.integers(0, 4), max_size=2).map(sorted)))
    return (lambda: getattr(mnp, k)(a, sec)), (lambda: getattr(np, k)(a, sec))


def _case_tile(d):
    a = d.draw(arrays(shapes(max_dims=2, max_side=3)))
    reps = d.draw(st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), min_size=1, max_size=3)))
    return (lambda: mnp.tile(a, reps)), (lambda: np.tile(a, reps))


def _case_repeat(d):
    a = d.draw(arrays(shapes(max_dims=2, max_side=3)))
    ax = d.draw(st.one_of(st.none(), st.integers(-a.ndim, a.ndim - 1))) if a.ndim else None
    n = a.size if ax is None else a.shape[ax]
    reps = d.draw(st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    return (lambda: mnp.repeat(a, reps, ax)), (lambda: np.repeat(a, reps, ax))


def _case_repmat(d):
    a = d.draw(arrays(shapes(max_dims=2, max_side=3)))
    m, n = d.draw(st.integers(0, 2)), d.draw(st.integers(0, 2))
    return (lambda: mnp.repmat(a, m, n)), (lambda: np.tile(np.atleast_2d(a), (m, n)))


def _case_pad(d):
    a = d.draw(arrays(shapes(min_dims=1, max_dims=2, min_side=1, max_side=4)))
    mode = d.draw(st.sampled_from(["constant", "edge", "reflect", "symmetric", "wrap", "maximum", "minimum",
                                   "mean", "median", "linear_ramp"]))
    width = d.draw(st.one_of(st.integers(0, 3), st.tuples(st.integers(0, 3), st.integers(0, 3)),
                             st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=a.ndim,
                                      max_size=a.ndim)))
    if mode == "constant":
        return (lambda: mnp.pad(a, width, mode, constant_values=7)), \
            (lambda: np.pad(a, width, mode, constant_values=7))
    if mode in ("mean", "median") and a.dtype.kind == "i":
        a = a.astype(np.float32)
    return (lambda: mnp.pad(a, width, mode)), (lambda: np.pad(a, width, mode))


def _case_flip(d):
    a = d.draw(arrays(shapes()))
    ax = d.draw(st.one_of(st.none(), st.integers(-a.ndim, a.ndim - 1))) if a.ndim else None
    k = d.draw(st.sampled_from(["flip", "fliplr", "flipud"]))
    if k == "flip":
        return (lambda: mnp.flip(a, ax)), (lambda: np.flip(a, ax))
    return (lambda: getattr(mnp, k)(a)), (lambda: getattr(np, k)(a))


def _case_rot90(d):
    a = d.draw(arrays(shapes(min_dims=2)))
    k = d.draw(st.integers(-5, 5))
    return (lambda: mnp.rot90(a, k)), (lambda: np.rot90(a, k))


def _case_roll(d):
    a = d.draw(arrays(shapes()))
    ax = d.draw(st.one_of(st.none(), st.integers(-a.ndim, a.ndim - 1))) if a.ndim else None
    shift = d.draw(st.integers(-7, 7))
    return (lambda: mnp.roll(a, shift, ax)), (lambda: np.roll(a, shift, ax))


def _case_resize(d):
    a = d.draw(arrays(shapes()))
    shp = d.draw(st.lists(st.integers(0, 4), max_size=3))
    return (lambda: mnp.resize(a, shp)), (lambda: np.resize(a, shp))


def _case_append(d):
    a = d.draw(arrays(shapes(min_dims=1, max_dims=2)))
    ax = d.draw(st.one_of(st.none(), st.integers(0, a.ndim - 1)))
    return (lambda: mnp.append(a, a, ax)), (lambda: np.append(a, a, ax))


def _case_delete(d):
    a, ax = d.draw(_arr_axis())
    n = a.shape[ax]
    obj = d.draw(st.one_of(st.lists(st.integers(-n, n - 1), max_size=3) if n else st.just([]),
                           st.just(slice(None, None, 2))))
    return (lambda: mnp.delete(a, obj, ax)), (lambda: np.delete(a, obj, ax))


def _case_insert(d):
    a = d.draw(st.sampled_from([np.arange(6, dtype=np.int32).reshape(2, 3),
                                np.arange(24, dtype=np.float32).reshape(2, 3, 4), np.arange(4, dtype=np.int32)]))
    ax = d.draw(st.sampled_from([None] + list(range(a.ndim))))
    obj = d.draw(st.sampled_from([0, 1, -1, [1], [0, 1], [2, 0], slice(1, None), [-1, 1], [], slice(0, 0), 9]))
    vals = d.draw(st.sampled_from([5, [7, 8], [[7], [8]], [[1, 2, 3]], [0, 1, 2, 3], [[[1]]], []]))
    return (lambda: mnp.insert(a, obj, vals, axis=ax)), (lambda: np.insert(a, obj, vals, axis=ax))


def _case_trim_zeros(d):
    a = d.draw(arrays(shapes(1, 1), nan=False))
    a = np.where(np.abs(a) < 20, 0, a).astype(a.dtype)
    trim = d.draw(st.sampled_from(["f", "b", "fb"]))
    return (lambda: mnp.trim_zeros(a, trim)), (lambda: np.trim_zeros(a, trim))


def _case_tri(d):
    a = d.draw(arrays(shapes(min_dims=1, max_dims=3)))
    k = d.draw(st.integers(-3, 3))
    f = d.draw(st.sampled_from(["tril", "triu"]))
    return (lambda: getattr(mnp, f)(a, k)), (lambda: getattr(np, f)(a, k))


def _case_diag(d):
    a = d.draw(arrays(shapes(min_dims=1, max_dims=2)))
    k = d.draw(st.integers(-3, 3))
    return (lambda: mnp.diag(a, k)), (lambda: np.diag(a, k))


def _case_diagonal(d):
    a = d.draw(arrays(shapes(min_dims=2)))
    a1, a2 = d.draw(st.permutations(range(a.ndim)))[:2]
    off = d.draw(st.integers(-3, 3))
    return (lambda: mnp.diagonal(a, off, a1, a2)), (lambda: np.diagonal(a, off, a1, a2))


def _case_diagflat(d):
    a = d.draw(arrays(shapes(max_dims=2, max_side=3)))
    k = d.draw(st.integers(-2, 2))
    return (lambda: mnp.diagflat(a, k)), (lambda: np.diagflat(a, k))


CASES = {name[len("_case_"):]: fn for name, fn in globals().items() if name.startswith("_case_")}


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_shape_function(name, data):
    mfn, nfn = CASES[name](data)
    _same_outcome(mfn, nfn)


def test_shape_is_tuple_and_mnn_pad_doc_examples():
    """Examples from MNN's numpy docs (pad, shape, repeat, tile)."""
    a = [1, 2, 3, 4, 5]
    assert mnp.pad(a, (2, 3), "constant").read().tolist() == [0, 0, 1, 2, 3, 4, 5, 0, 0, 0]
    assert mnp.pad(a, (2, 3), "reflect").read().tolist() == [3, 2, 1, 2, 3, 4, 5, 4, 3, 2]
    assert mnp.pad(a, (2, 3), "symmetric").read().tolist() == [2, 1, 1, 2, 3, 4, 5, 5, 4, 3]
    assert mnp.shape(mnp.ones([2, 2])) == (2, 2)
    assert mnp.repeat(mnp.array([[1, 2], [3, 4]]), 2).read().tolist() == [1, 1, 2, 2, 3, 3, 4, 4]


def test_broadcast_object():
    b = mnp.broadcast([1, 2, 3], [[1], [2]])
    assert b.shape == (2, 3) and b.size == 6 and b.nd == 2
    assert list(b) == list(np.broadcast([1, 2, 3], [[1], [2]]))


def test_errors():
    with pytest.raises(ValueError, match="equal division"):
        mnp.split(np.arange(5), 2)
    with pytest.raises(np.exceptions.AxisError):
        mnp.flip(np.arange(5), 1)
    with pytest.raises(ValueError):
        mnp.stack([np.ones(2), np.ones(3)])
    with pytest.raises(ValueError):
        mnp.concatenate([np.ones((2, 2)), np.ones((3, 3))])
    with pytest.raises(ValueError):
        mnp.pad(np.ones(3), 1, "nonsense")
    with pytest.raises(ValueError):
        mnp.reshape(np.ones(6), (4, -1))


@settings(max_examples=15, deadline=None)
@given(a=arrays(shapes(min_dims=1)))
def test_negative_step_slices(a):
    """Negative-step slices follow numpy (real MNN returns garbage for some)."""
    v = mnp.array(a)
    assert_close(v[::-1], a[::-1])
    assert_close(v[::-2], a[::-2])
    if a.shape[0] > 2:
        assert_close(v[-2:0:-1], a[-2:0:-1])
    assume(a.ndim > 1)
    assert_close(v[:, ::-1], a[:, ::-1])
