"""Shared strategies and comparison helpers for the mnnjit.numpy tests."""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mnnjit.var import Var


def narrow_dtype(dt: np.dtype) -> np.dtype:
    """MNN's 32-bit narrowing of a numpy result dtype."""
    dt = np.dtype(dt)
    if dt.kind == "f":
        return np.dtype(np.float32)
    if dt.kind in "iub":
        return np.dtype(np.int32) if dt not in (np.dtype(np.uint8), np.dtype(np.int8)) else dt
    return dt


def to_np(x: Any) -> Any:
    """A Var's value as numpy, tuples/lists elementwise, Python scalars unchanged."""
    if isinstance(x, Var):
        return x.read()
    if isinstance(x, (list, tuple)):
        return type(x)(to_np(v) for v in x)
    return x


def assert_close(got: Any, want: Any, rtol: float = 1e-5, atol: float = 1e-6, check_dtype: bool = True,
                 scalar: bool | None = None) -> None:
    """``got`` (mnnjit result) equals ``want`` (numpy result) after MNN's narrowing, within tolerance."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)), f"expected a sequence, got {type(got).__name__}"
        assert len(got) == len(want), f"length {len(got)} != {len(want)}"
        for g, w in zip(got, want):
            assert_close(g, w, rtol, atol, check_dtype, scalar)
        return
    if scalar is True:
        assert not isinstance(got, Var), f"expected a Python scalar, got a Var {got!r}"
    if isinstance(got, Var):
        g = got.read()
        w = np.asarray(want)
        assert g.shape == w.shape, f"shape {g.shape} != numpy's {w.shape}"
        if check_dtype:
            assert g.dtype == narrow_dtype(w.dtype), f"dtype {g.dtype} != narrowed numpy {narrow_dtype(w.dtype)}"
        if w.dtype.kind in "f" or g.dtype.kind == "f":
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                       equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w.astype(g.dtype))
        return
    w = np.asarray(want)
    assert w.ndim == 0 or w.size == 1, f"got a scalar {got!r}, numpy gave shape {w.shape}"
    assert isinstance(got, (int, float, bool)), f"expected a Python scalar, got {type(got).__name__}"
    np.testing.assert_allclose(float(got), float(w.reshape(())), rtol=rtol, atol=atol, equal_nan=True)


def shapes(min_dims: int = 0, max_dims: int = 3, min_side: int = 0, max_side: int = 5):
    """Array shapes including 0-d and empty ones."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def float_arrays(shape_st=None, lo: float = -100.0, hi: float = 100.0, nan: bool = False):
    """float32 arrays of moderate values (optionally with NaNs)."""
    shape_st = shape_st if shape_st is not None else shapes()
    elems = st.floats(float(np.float32(lo)), float(np.float32(hi)), width=32, allow_nan=False, allow_infinity=False)
    if nan:
        elems = st.one_of(elems, st.just(float("nan")))
    return hnp.arrays(np.float32, shape_st, elements=elems)


def int_arrays(shape_st=None, lo: int = -50, hi: int = 50):
    """int32 arrays of small values."""
    shape_st = shape_st if shape_st is not None else shapes()
    return hnp.arrays(np.int32, shape_st, elements=st.integers(lo, hi))


def arrays(shape_st=None, nan: bool = False):
    """float32 or int32 arrays."""
    return st.one_of(float_arrays(shape_st, nan=nan), int_arrays(shape_st))


@st.composite
def array_and_axis(draw, arr_st=None, allow_none: bool = True, allow_tuple: bool = True, min_dims: int = 0):
    """An array and a valid axis argument for it (None, int incl. negative, or tuple)."""
    a = draw(arr_st if arr_st is not None else arrays(shapes(min_dims=min_dims)))
    nd = a.ndim
    options = []
    if allow_none:
        options.append(st.none())
    if nd:
        options.append(st.integers(-nd, nd - 1))
        if allow_tuple:
            options.append(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True)
                           .map(lambda xs: tuple(x - nd if i % 2 else x for i, x in enumerate(xs))))
    axis = draw(st.one_of(*options)) if options else None
    return a, axis
