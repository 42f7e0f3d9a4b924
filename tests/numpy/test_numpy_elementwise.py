"""Elementwise functions of mnnjit.numpy against numpy (narrowed to MNN's 32-bit dtypes).

One table-driven property per family: unary float, unary int, binary (broadcasting shapes).
Tolerances: rtol 1e-5 for exact-ish ops, 2e-5/1e-4 for transcendental ones (float32 vs numpy's float32
libm; float64 reference for ops that numpy computes in float64 on int input).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import mnnjit.numpy as mnp
from numpy_testlib import assert_close, float_arrays, int_arrays, shapes


def _round_half_away(x, decimals=0):
    """Half away from zero, scaled in float32 as MNN computes it (x * 10**d, round, / 10**d)."""
    x = np.asarray(x)
    if x.dtype.kind != "f":
        return x
    s = np.float32(10.0 ** abs(decimals))
    y = x * s if decimals >= 0 else x / s
    r = np.copysign(np.floor(np.abs(y) + np.float32(0.5)), y)
    return (r / s if decimals >= 0 else r * s).astype(x.dtype)


# name -> (numpy reference, (lo, hi) input domain, rtol)
UNARY_FLOAT = {
    "negative": (np.negative, (-1e3, 1e3), 0), "abs": (np.abs, (-1e3, 1e3), 0),
    "absolute": (np.absolute, (-1e3, 1e3), 0), "fabs": (np.fabs, (-1e3, 1e3), 0),
    "square": (np.square, (-1e3, 1e3), 1e-6), "sqrt": (np.sqrt, (0, 1e4), 1e-6),
    "exp": (np.exp, (-50, 50), 2e-6), "expm1": (np.expm1, (-10, 10), 2e-6), "log": (np.log, (1e-3, 1e4), 2e-6),
    "log1p": (np.log1p, (-0.9, 1e3), 2e-6), "log2": (np.log2, (1e-3, 1e4), 2e-6),
    "log10": (np.log10, (1e-3, 1e4), 2e-6), "sin": (np.sin, (-10, 10), 2e-6), "cos": (np.cos, (-10, 10), 2e-6),
    "tan": (np.tan, (-1.5, 1.5), 2e-6), "arcsin": (np.arcsin, (-1, 1), 2e-6), "arccos": (np.arccos, (-1, 1), 2e-6),
    "arctan": (np.arctan, (-100, 100), 2e-6), "sinh": (np.sinh, (-20, 20), 2e-6), "cosh": (np.cosh, (-20, 20), 2e-6),
    "tanh": (np.tanh, (-20, 20), 2e-6), "arcsinh": (np.arcsinh, (-100, 100), 2e-6),
    "arccosh": (np.arccosh, (1, 100), 2e-6), "arctanh": (np.arctanh, (-0.99, 0.99), 2e-6),
    "reciprocal": (np.reciprocal, (0.5, 100), 1e-6), "sign": (np.sign, (-100, 100), 0),
    "floor": (np.floor, (-100, 100), 0), "ceil": (np.ceil, (-100, 100), 0), "trunc": (np.trunc, (-100, 100), 0),
    "fix": (np.fix, (-100, 100), 0), "rint": (np.rint, (-100, 100), 0), "isnan": (np.isnan, (-5, 5), 0),
    "isinf": (np.isinf, (-5, 5), 0), "isfinite": (np.isfinite, (-5, 5), 0), "cbrt": (np.cbrt, (-1e3, 1e3), 2e-6),
    "exp2": (np.exp2, (-30, 30), 2e-6), "deg2rad": (np.deg2rad, (-720, 720), 1e-6),
    "radians": (np.radians, (-720, 720), 1e-6), "rad2deg": (np.rad2deg, (-10, 10), 1e-6),
    "degrees": (np.degrees, (-10, 10), 1e-6), "sinc": (np.sinc, (-10, 10), 1e-5),
    "signbit": (np.signbit, (-10, 10), 0), "spacing": (np.spacing, (-1e3, 1e3), 0), "i0": (np.i0, (-5, 5), 1e-5),
    "positive": (np.positive, (-10, 10), 0), "logical_not": (np.logical_not, (-2, 2), 0),
    "around": (_round_half_away, (-100, 100), 0), "round": (_round_half_away, (-100, 100), 0),
    "round_": (_round_half_away, (-100, 100), 0), "nan_to_num": (np.nan_to_num, (-10, 10), 0),
    "real_if_close": (np.real_if_close, (-10, 10), 0),
}

UNARY_INT = {
    "negative": np.negative, "abs": np.abs, "square": np.square, "sign": np.sign, "floor": np.floor,
    "ceil": np.ceil, "trunc": np.trunc, "fix": np.fix, "invert": np.invert, "bitwise_not": np.bitwise_not,
    "logical_not": np.logical_not, "around": np.around, "positive": np.positive, "sqrt": np.sqrt,
    "exp2": np.exp2, "rint": np.rint, "fabs": np.fabs, "cbrt": np.cbrt, "isnan": np.isnan,
}


@pytest.mark.parametrize("name", sorted(UNARY_FLOAT))
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_unary_float(name, data):
    ref, (lo, hi), rtol = UNARY_FLOAT[name]
    a = data.draw(float_arrays(shapes(), lo, hi), label="a")
    if name in ("isnan", "isinf", "isfinite", "nan_to_num") and a.size:
        a = a.copy()
        a.flat[0] = data.draw(st.sampled_from([np.nan, np.inf, -np.inf, 1.0]))
    assert_close(getattr(mnp, name)(a), ref(a), rtol=rtol, atol=1e-6 if rtol else 0)


@pytest.mark.parametrize("name", sorted(UNARY_INT))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_unary_int(name, data):
    a = data.draw(int_arrays(shapes(), 0 if name in ("sqrt",) else -50, 50), label="a")
    assert_close(getattr(mnp, name)(a), UNARY_INT[name](a), rtol=1e-6)


def _pos(lo=0.5, hi=50.0):
    return (lo, hi)


# name -> (numpy reference, a domain, b domain, kind: 'f' floats, 'i' ints, 'fi' both, rtol)
BINARY = {
    "add": (np.add, None, None, "fi", 1e-6), "subtract": (np.subtract, None, None, "fi", 1e-6),
    "multiply": (np.multiply, None, None, "fi", 1e-6), "divide": (np.divide, None, _pos(), "fi", 1e-6),
    "true_divide": (np.true_divide, None, _pos(), "fi", 1e-6),
    "floor_divide": (np.floor_divide, None, _pos(1, 20), "fi", 1e-6),
    "mod": (np.mod, None, _pos(1, 20), "fi", 1e-5), "remainder": (np.remainder, None, _pos(1, 20), "fi", 1e-5),
    "fmod": (np.fmod, None, _pos(1, 20), "fi", 1e-5), "power": (np.power, _pos(0.1, 3), (-3, 3), "f", 1e-5),
    "float_power": (np.float_power, _pos(0.1, 3), (-3, 3), "fi", 1e-5), "maximum": (np.maximum, None, None, "fi", 0),
    "minimum": (np.minimum, None, None, "fi", 0), "fmax": (np.fmax, None, None, "fi", 0),
    "fmin": (np.fmin, None, None, "fi", 0), "arctan2": (np.arctan2, None, None, "f", 2e-6),
    "hypot": (np.hypot, None, None, "f", 2e-6), "copysign": (np.copysign, None, None, "f", 0),
    "equal": (np.equal, None, None, "fi", 0), "not_equal": (np.not_equal, None, None, "fi", 0),
    "less": (np.less, None, None, "fi", 0), "less_equal": (np.less_equal, None, None, "fi", 0),
    "greater": (np.greater, None, None, "fi", 0), "greater_equal": (np.greater_equal, None, None, "fi", 0),
    "logical_and": (np.logical_and, None, None, "fi", 0), "logical_or": (np.logical_or, None, None, "fi", 0),
    "logical_xor": (np.logical_xor, None, None, "fi", 0), "bitwise_and": (np.bitwise_and, None, None, "i", 0),
    "bitwise_or": (np.bitwise_or, None, None, "i", 0), "bitwise_xor": (np.bitwise_xor, None, None, "i", 0),
    "left_shift": (np.left_shift, (0, 100), (0, 8), "i", 0), "right_shift": (np.right_shift, (0, 1000), (0, 8), "i", 0),
    "gcd": (np.gcd, None, None, "i", 0), "lcm": (np.lcm, (-30, 30), (-30, 30), "i", 0),
    "heaviside": (np.heaviside, None, None, "f", 0), "logaddexp": (np.logaddexp, None, None, "f", 2e-6),
    "logaddexp2": (np.logaddexp2, None, None, "f", 2e-6), "nextafter": (np.nextafter, None, None, "f", 0),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_binary(name, data):
    ref, adom, bdom, kinds, rtol = BINARY[name]
    sa, sb = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4), label="shapes").input_shapes
    kind = data.draw(st.sampled_from(list(kinds)), label="kind")
    if kind == "f":
        lo, hi = adom or (-50, 50)
        a = data.draw(float_arrays(st.just(sa), lo, hi), label="a")
        lo, hi = bdom or (-50, 50)
        b = data.draw(float_arrays(st.just(sb), lo, hi), label="b")
    else:
        lo, hi = adom or (-50, 50)
        a = data.draw(int_arrays(st.just(sa), int(lo), int(hi)), label="a")
        lo, hi = bdom or (-50, 50)
        b = data.draw(int_arrays(st.just(sb), int(max(lo, 1) if bdom else lo), int(hi)), label="b")
    if name in ("fmax", "fmin") and kind == "f" and a.size:
        a = a.copy()
        a.flat[0] = np.nan
    got = getattr(mnp, name)(a, b)
    want = ref(a, b)
    assert_close(got, want, rtol=rtol, atol=1e-6 if rtol else 0)


@settings(max_examples=25, deadline=None)
@given(a=float_arrays(shapes(), -1e3, 1e3), decimals=st.integers(-2, 3))
def test_around_decimals(a, decimals):
    """around(x, d) rounds half away from zero at d places (MNN's rule); real MNN raises for d != 0."""
    got = mnp.around(a, decimals).read()
    want = _round_half_away(a, decimals)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=10.0 ** -max(decimals, 0) * 1e-3)


@settings(max_examples=25, deadline=None)
@given(a=float_arrays(shapes(), -100, 100), lo=st.floats(-50, 0, width=32), hi=st.floats(0, 50, width=32),
       arrays_bounds=st.booleans())
def test_clip(a, lo, hi, arrays_bounds):
    if arrays_bounds:
        lo, hi = np.full(a.shape, lo, np.float32), np.full(a.shape, hi, np.float32)
    assert_close(mnp.clip(a, lo, hi), np.clip(a, lo, hi))


@settings(max_examples=20, deadline=None)
@given(a=float_arrays(shapes(), -100, 100))
def test_multi_output(a):
    fr, ip = mnp.modf(a)
    wf, wi = np.modf(a)
    assert_close(fr, wf, atol=1e-5)
    assert_close(ip, wi)
    m, e = mnp.frexp(a)
    wm, we = np.frexp(a)
    assert_close(m, wm)
    assert_close(e, we)
    q, r = mnp.divmod(a, 7.0)
    wq, wr = np.divmod(a, np.float32(7.0))
    assert_close(q, wq)
    assert_close(r, wr, atol=1e-4)
    assert_close(mnp.ldexp(a, np.int32(3)), np.ldexp(a, 3))


def test_out_argument():
    x = mnp.zeros([3])
    res = mnp.add(mnp.array([1.0, 2.0, 3.0]), 1.0, out=x)
    assert res is x
    assert x.read().tolist() == [2.0, 3.0, 4.0]


def test_exceptions():
    with pytest.raises(ValueError, match="broadcast"):
        mnp.add(np.ones(3, np.float32), np.ones(4, np.float32))
    with pytest.raises(TypeError):
        mnp.gcd(np.ones(3, np.float32), 2)
    with pytest.raises(TypeError):
        mnp.bitwise_and(np.ones(3, np.float32), 1)
