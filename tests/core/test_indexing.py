"""Indexing and assignment against numpy: ints, slices with any step, Ellipsis, None, arrays, masks."""
from __future__ import annotations

import numpy as onp
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import mnnjit.numpy as np


@st.composite
def basic_case(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5))
    a = onp.arange(onp.prod(shape), dtype=onp.float32).reshape(shape)
    index = draw(hnp.basic_indices(shape, min_dims=0, allow_newaxis=True, allow_ellipsis=True))
    return a, index


@given(case=basic_case())
def test_basic_indexing_matches_numpy(case):
    a, index = case
    want = a[index]
    got = np.array(a)[index]
    if onp.ndim(want) == 0 and isinstance(index, (int, tuple)) and all(
            isinstance(i, int) for i in (index if isinstance(index, tuple) else (index,))):
        assert got == want.item()
    else:
        onp.testing.assert_array_equal(onp.asarray(got), want)
        assert list(onp.shape(want)) == got.shape


@given(case=basic_case(), value=st.floats(-10, 10, width=32))
def test_basic_assignment_matches_numpy(case, value):
    a, index = case
    want = a.copy()
    want[index] = value
    v = np.array(a)
    before = v + 0
    v[index] = value
    onp.testing.assert_array_equal(v.read(), want)
    onp.testing.assert_array_equal(before.read(), a)  # earlier results keep the old value


@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5), data=st.data())
def test_integer_array_indexing(shape, data):
    a = onp.arange(onp.prod(shape), dtype=onp.int32).reshape(shape)
    idx = data.draw(hnp.arrays(onp.int32, st.integers(0, 4), elements=st.integers(-shape[0], shape[0] - 1)))
    onp.testing.assert_array_equal(np.array(a)[idx].read(), a[idx])
    onp.testing.assert_array_equal(np.array(a)[np.array(idx)].read(), a[idx])


@given(a=hnp.arrays(onp.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4),
                    elements=st.floats(-5, 5, width=32)))
def test_boolean_mask_indexing_and_assignment(a):
    v = np.array(a)
    onp.testing.assert_array_equal(v[v > 0].read(), a[a > 0])
    want = a.copy()
    want[want > 0] = 0
    v[v > 0] = 0
    onp.testing.assert_array_equal(v.read(), want)


def test_all_int_index_gives_python_scalar():
    x = np.array([[1.0, -2.0], [3.0, 4.0]])
    assert x[0, 1] == -2.0 and isinstance(x[0, 1], float)
    assert isinstance(np.array([1, 2])[1], int)


def test_slices_are_copies():
    x = np.array([1.0, 2.0, 3.0])
    s = x[1:]
    x[1] = 9
    assert s.read().tolist() == [2.0, 3.0]


def test_negative_step_slices():
    a = onp.arange(12, dtype=onp.float32).reshape(3, 4)
    onp.testing.assert_array_equal(np.array(a)[::-1, ::-2].read(), a[::-1, ::-2])


@pytest.mark.parametrize("index, exc", [((5,), IndexError), ((0, 0, 0), IndexError), ((1.5,), IndexError),
                                        ((slice(0, 1, 0),), ValueError)])
def test_bad_indices_raise_at_build_time(index, exc):
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(exc):
        x[index]


def test_out_of_bounds_array_index_raises():
    with pytest.raises(IndexError, match="out of bounds"):
        np.array([1, 2, 3])[np.array([0, 3])]


def test_assignment_shape_mismatch_raises():
    x = np.zeros((2, 3))
    with pytest.raises(ValueError, match="could not broadcast"):
        x[0] = np.array([1.0, 2.0])
