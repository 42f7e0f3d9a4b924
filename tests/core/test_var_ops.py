"""Var arithmetic, broadcasting, reductions and dtype rules against numpy (with MNN's narrowing)."""
from __future__ import annotations

import operator

import numpy as onp
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import mnnjit.expr as F
import mnnjit.numpy as np
from mnnjit._dtypes import narrow
from mnnjit.testing import assert_allclose
from mnnjit.testing import strategies as mst

DTYPES = [onp.float32, onp.int32, onp.uint8, onp.int8]


def arrays(dtype, shape, elements=None):
    if elements is None:
        if onp.dtype(dtype).kind == "f":
            elements = st.floats(-100, 100, width=32)
        else:
            info = onp.iinfo(dtype)
            elements = st.integers(max(info.min, -100), min(info.max, 100))
    return hnp.arrays(dtype, shape, elements=elements)


@st.composite
def broadcastable_pair(draw):
    shapes = draw(mst.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=4))
    da, db = draw(st.sampled_from(DTYPES)), draw(st.sampled_from(DTYPES))
    return draw(arrays(da, shapes.input_shapes[0])), draw(arrays(db, shapes.input_shapes[1]))


def mnn_binary_reference(fn, a, b):
    """numpy's answer computed in the promoted dtype narrowed to 32 bits, as mnnjit defines it."""
    dt = narrow(onp.result_type(a.dtype, b.dtype))
    with onp.errstate(all="ignore"):
        return fn(a.astype(dt), b.astype(dt))


def assert_same(got, want):
    got = onp.asarray(got)
    assert got.shape == want.shape
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind == "f":
        onp.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, equal_nan=True)
    else:
        onp.testing.assert_array_equal(got, want)


ARITH = [operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod]


@pytest.mark.parametrize("fn", ARITH, ids=lambda f: f.__name__)
@given(pair=broadcastable_pair())
def test_binary_arithmetic_matches_numpy(fn, pair):
    a, b = pair
    got = fn(np.array(a), np.array(b))
    assert_same(got.read(), mnn_binary_reference(fn, a, b))


@given(pair=broadcastable_pair())
def test_true_division_gives_float32(pair):
    a, b = pair
    got = (np.array(a) / np.array(b)).read()
    dt = narrow(onp.result_type(a.dtype, b.dtype))
    with onp.errstate(all="ignore"):
        want = (a.astype(dt) / b.astype(dt)).astype(onp.float32)
    assert_same(got, want)


@pytest.mark.parametrize("fn", [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge],
                         ids=lambda f: f.__name__)
@given(pair=broadcastable_pair())
def test_comparisons_give_int32(fn, pair):
    a, b = pair
    got = fn(np.array(a), np.array(b)).read()
    assert_same(got, mnn_binary_reference(fn, a, b).astype(onp.int32))


@given(a=arrays(onp.float32, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)),
       scalar=st.one_of(st.integers(-50, 50), st.floats(-50, 50, width=32)))
def test_python_scalars_narrow(a, scalar):
    got = (np.array(a) * scalar - scalar).read()
    with onp.errstate(all="ignore"):
        want = (a * onp.float32(scalar) - onp.float32(scalar)).astype(onp.float32)
    assert_same(got, want)


@given(a=arrays(onp.uint8, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5)), k=st.integers(0, 300))
def test_uint8_minus_python_int_is_int32(a, k):
    got = (np.array(a) - k).read()
    assert_same(got, a.astype(onp.int32) - k)


@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=4), data=st.data())
def test_reductions(shape, data):
    dt = data.draw(st.sampled_from([onp.float32, onp.int32]))
    a = data.draw(arrays(dt, shape))
    nd = len(shape)
    axis = data.draw(st.one_of(st.none(), st.integers(-nd, nd - 1),
                               st.lists(st.integers(0, nd - 1), unique=True, max_size=nd).map(tuple)))
    keep = data.draw(st.booleans())
    v = np.array(a)
    got = np.sum(v, axis=axis, keepdims=keep)
    want = onp.sum(a, axis=axis, keepdims=keep).astype(narrow(onp.sum(a).dtype))
    if want.ndim == 0:  # a 0-d result is a Python scalar, as in real MNN
        assert isinstance(got, (int, float))
        assert got == pytest.approx(want.item(), rel=1e-5, abs=1e-3)
    else:
        onp.testing.assert_allclose(got.read(), want, rtol=1e-5, atol=1e-3)
    if a.size and all(shape[i] for i in (range(nd) if axis is None else onp.atleast_1d(axis))):
        got_max = np.max(v, axis=axis, keepdims=keep)
        want_max = onp.max(a, axis=axis, keepdims=keep)
        onp.testing.assert_array_equal(onp.asarray(got_max), want_max)
        # real MNN 3.6.1: only full reductions of max are Python scalars (max(x1d, 0) is a 0-d Var)
        assert isinstance(got_max, (int, float)) == (axis is None and not keep)


@given(v=mst.arrays(F.float, mst.shapes(min_dims=0, max_dims=3, max_side=4), elements=st.floats(-100, 100, width=32)))
def test_unary_and_chain(v):
    a = v.read_view()
    want = (-(onp.abs(a) * onp.float32(2) + onp.float32(1)) ** 2).astype(onp.float32)
    assert_allclose(-(abs(v) * 2 + 1) ** 2, want, rtol=1e-6, atol=1e-6, check_dtype=True)


@given(v=mst.arrays(F.float, (2, 3), elements=st.floats(-100, 100, width=32)))
def test_matmul_and_transpose(v):
    a = v.read_view()
    assert_allclose(v @ v.T, a @ a.T, rtol=1e-6, atol=1e-6, check_dtype=True)
    assert v.T.shape == [3, 2]


def test_broadcast_error_names_shapes():
    with pytest.raises(ValueError, match=r"\(3,\) \(2,\)"):
        np.array([1, 2, 3]) + np.array([1, 2])


def test_int_by_int_true_division():
    assert_same((np.array([1, 2]) / np.array([2, 4])).read(), onp.array([0.5, 0.5], onp.float32))


def test_integer_zero_division_is_numpy_answer():
    got = (np.array([5, -7]) // np.array([0, 0])).read()
    assert_same(got, onp.array([0, 0], onp.int32))


def test_bitwise_on_float_raises_type_error():
    with pytest.raises(TypeError):
        np.array([1.0]) & 1
