"""Fixed cases found by a differential fuzz against numpy (session 9), on the numpy path and on
compiled kernels (threshold 0)."""
from __future__ import annotations

import numpy as np
import pytest

import mnnjit.numpy as mnp
from mnnjit import compiler


@pytest.fixture(params=["numpy path", "compiled"])
def path(request):
    compiler.set_threshold(0 if request.param == "compiled" else None)
    yield request.param
    compiler.set_threshold(None)


def test_negative_zero_scalar_keeps_its_sign(path):
    """-0.0 and 0.0 compare equal: the shared scalar nodes must not swap them."""
    a = np.float32([1.0, -1.0, 0.5])
    for s in (0.0, -0.0, 0.0):
        with np.errstate(divide="ignore"):
            assert np.array_equal(mnp.array(a) / s, a / np.float32(s))
        assert np.array_equal(mnp.copysign(mnp.array(a), s).read(), np.copysign(a, np.float32(s)))


MASKS = {
    "and": lambda x: (x > 0) & (x < 3),
    "or": lambda x: (x < -1) | (x > 2),
    "xor": lambda x: (x > 0) ^ (x > 2),
    "times": lambda x: (x > 0) * (x < 3),
    "signbit": lambda x: np.signbit(x) if isinstance(x, np.ndarray) else mnp.signbit(x),
    "reversed": lambda x: (x > 0)[::-1],
    "reshaped": lambda x: (x > 0).reshape(2, 3).reshape(6),
    "not of and": lambda x: ~((x > 0) & (x < 3)),
    "astype bool": lambda x: x.astype(bool),
}


@pytest.mark.parametrize("name", sorted(MASKS))
def test_combined_and_moved_masks_index_as_masks(name, path):
    x = np.float32([-2, -1, 0, 1, 2, 3])
    mask = MASKS[name]
    v = mnp.array(x)
    assert np.array_equal(v[mask(v)].read(), x[mask(x)])
    y = np.arange(6, dtype=np.int32)
    w = mnp.array(y)
    w[mask(mnp.array(x))] = 0
    y[mask(x)] = 0
    assert np.array_equal(w.read(), y)


def test_astype_bool_is_nonzero(path):
    x = np.float32([-2, -0.5, 0, 0.5, np.nan])
    got = mnp.array(x).astype(bool).read()
    assert got.dtype == np.int32 and np.array_equal(got, x.astype(bool).astype(np.int32))


@pytest.mark.parametrize("key", [slice(-7, 1, -2), slice(-6, None, -1), slice(-2 ** 40, None, -1),
                                 slice(None, -9, 1), slice(9, None, 1)])
def test_empty_slices_from_out_of_range_starts(key, path):
    x = np.arange(5, dtype=np.int32)
    assert np.array_equal(mnp.array(x)[key].read(), x[key])
    y = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert mnp.array(y)[key].shape == list(y[key].shape)


@pytest.mark.parametrize("name", ["exp", "expm1", "sign", "tanh"])
def test_nan_stays_nan(name, path):
    x = np.float32([np.nan, np.inf, -np.inf, 0.0, 1.0, -100.0, 100.0])
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x)
    got = getattr(mnp, name)(mnp.array(x)).read()
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.allclose(got, want, rtol=1e-6, equal_nan=True)


def test_in_looks_at_every_element(path):
    v = mnp.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert 3.0 in v and 5 in v and 7.0 not in v and -1 not in v


def test_modf_fraction_keeps_the_sign_of_zero(path):
    x = np.float32([-0.0, -3.0, 2.0, -2.5, np.inf, -np.inf])
    frac, whole = mnp.modf(mnp.array(x))
    want_f, want_w = np.modf(x)
    assert np.array_equal(np.signbit(frac.read()), np.signbit(want_f))
    assert np.array_equal(frac.read(), want_f) and np.array_equal(whole.read(), want_w)


@pytest.mark.parametrize("key", ["True", "False", "(1, True)", "(Ellipsis, True)",
                                 "(slice(None), True, [0, 2])", "(True, [1, 0])", "(None, True)",
                                 "(True, True)", "(0, 1, 2, True)"])
def test_zero_d_boolean_index_adds_an_axis(key):
    """x[True] / x[False] add an axis of length 1 / 0 and consume none, alone or with other
    indices; assigning through them sets everything / nothing."""
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    k = eval(key)
    got = mnp.array(a)[k]
    assert np.array_equal(np.asarray(got.read()) if hasattr(got, "read") else got, a[k])
    if "[" not in key:
        b, want = mnp.array(a.copy()), a.copy()
        b[k] = 7.0
        want[k] = 7.0
        assert np.array_equal(b.read(), want)


def test_float_dimensions_are_refused():
    """numpy takes no float in a shape: zeros((2.5,)) and friends raise TypeError."""
    for make in (lambda: mnp.zeros((2.5,)), lambda: mnp.empty((2, 3.0)), lambda: mnp.ones([2.0]),
                 lambda: mnp.full((1.5, 2), 1.0), lambda: mnp.random.rand(2.0)):
        with pytest.raises(TypeError):
            make()
    assert mnp.zeros((np.int64(2), 3)).shape == [2, 3]


@pytest.mark.parametrize("args,dtype", [((0, 5, 0.5), "int32"), ((0.5, 5, 1.5), "int32"),
                                        ((0, 1, 0.1), "float32"), ((0, 3, 0.3), "uint8")])
def test_arange_computes_in_the_given_dtype(args, dtype):
    """arange with a dtype steps in that dtype, as numpy does (an int dtype with a float step
    repeats values)."""
    got = mnp.arange(*args, dtype=getattr(mnp, dtype)).read()
    assert np.array_equal(got, np.arange(*args, dtype=dtype))
