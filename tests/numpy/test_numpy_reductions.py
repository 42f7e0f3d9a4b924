"""Reductions, statistics, scans and counting of mnnjit.numpy against numpy.

Tolerances: sums/means rtol 1e-5 (float32 accumulation order differs from numpy's pairwise sum),
var/std and percentiles rtol 1e-4, exact for integer results and order statistics.
Full reductions must return Python scalars (MNN's rule).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import mnnjit.numpy as mnp
from numpy_testlib import array_and_axis, arrays, assert_close, float_arrays, int_arrays, shapes


def _np_call(fn, *args, **kwargs):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _outcome(fn, *args, **kwargs):
    try:
        return _np_call(fn, *args, **kwargs), None
    except (ValueError, TypeError, IndexError) as exc:
        # numpy's median of an all-empty result fails inside its own reshape (mnnjit returns the empty result)
        assume("cannot reshape array of size 0" not in str(exc))
        return None, type(exc)


# name -> (numpy function, float domain (lo, hi), with NaNs, rtol)
REDUCTIONS = {
    "sum": (np.sum, 100, False, 1e-5), "prod": (np.prod, 1.5, False, 1e-5), "mean": (np.mean, 100, False, 1e-5),
    "amax": (np.amax, 100, False, 0), "amin": (np.amin, 100, False, 0), "max": (np.max, 100, False, 0),
    "min": (np.min, 100, False, 0), "all": (np.all, 2, False, 0), "any": (np.any, 2, False, 0),
    "ptp": (np.ptp, 100, False, 0), "var": (np.var, 100, False, 1e-4), "std": (np.std, 100, False, 1e-4),
    "nansum": (np.nansum, 100, True, 1e-5), "nanprod": (np.nanprod, 1.5, True, 1e-5),
    "nanmean": (np.nanmean, 100, True, 1e-5), "nanmax": (np.nanmax, 100, True, 0),
    "nanmin": (np.nanmin, 100, True, 0), "nanvar": (np.nanvar, 100, True, 1e-4),
    "nanstd": (np.nanstd, 100, True, 1e-4), "median": (np.median, 100, False, 1e-5),
    "nanmedian": (np.nanmedian, 100, True, 1e-5), "count_nonzero": (np.count_nonzero, 2, False, 0),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_reduction(name, data):
    ref, dom, nan, rtol = REDUCTIONS[name]
    arr_st = st.one_of(float_arrays(shapes(), -dom, dom, nan=nan), int_arrays(shapes(), -int(dom) - 1, int(dom) + 1))
    a, axis = data.draw(array_and_axis(arr_st), label="a, axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    if name in ("prod", "nanprod") and a.dtype.kind == "i":
        a = np.clip(a, -2, 2)
    want, err = _outcome(ref, a, axis=axis, keepdims=keepdims)
    if err is not None:
        with pytest.raises(err):
            res = getattr(mnp, name)(a, axis=axis, keepdims=keepdims)
            if hasattr(res, "read"):
                res.read()
        return
    got = getattr(mnp, name)(a, axis=axis, keepdims=keepdims)
    full = axis is None and not keepdims
    check_dtype = name not in ("median", "nanmedian", "mean", "nanmean", "var", "std", "nanvar", "nanstd") \
        or a.dtype.kind == "f"
    assert_close(got, want, rtol=rtol, atol=1e-4 if rtol else 0, check_dtype=check_dtype and name != "count_nonzero",
                 scalar=True if full else None)


@pytest.mark.parametrize("name", ["argmax", "argmin", "nanargmax", "nanargmin"])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_arg_reduction(name, data):
    a, axis = data.draw(array_and_axis(arrays(shapes(min_dims=1, min_side=1)), allow_tuple=False), label="a, axis")
    want, err = _outcome(getattr(np, name), a, axis=axis)
    assume(err is None)
    assert_close(getattr(mnp, name)(a, axis=axis), want, scalar=True if axis is None else None)


@pytest.mark.parametrize("name", ["percentile", "quantile", "nanpercentile", "nanquantile"])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_percentiles(name, data):
    nan = name.startswith("nan")
    a, axis = data.draw(array_and_axis(float_arrays(shapes(min_dims=1, min_side=1), nan=nan)), label="a, axis")
    scale = 100.0 if "percentile" in name else 1.0
    qs = st.integers(0, 1000).map(lambda k: k * scale / 1000)  # float32 positions: no sub-ulp q values
    q = data.draw(st.one_of(qs, st.lists(qs, min_size=1, max_size=3)), label="q")
    method = data.draw(st.sampled_from(["linear", "lower", "higher", "nearest", "midpoint"]), label="method")
    keepdims = data.draw(st.booleans(), label="keepdims")
    want = _np_call(getattr(np, name), a, q, axis=axis, method=method, keepdims=keepdims)
    got = getattr(mnp, name)(a, q, axis=axis, method=method, keepdims=keepdims)
    assert_close(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "nancumsum", "nancumprod"])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_scans(name, data):
    nan = name.startswith("nan")
    arr_st = st.one_of(float_arrays(shapes(), -3, 3, nan=nan), int_arrays(shapes(), -3, 3))
    a, axis = data.draw(array_and_axis(arr_st, allow_tuple=False), label="a, axis")
    assume(axis is not None or a.ndim <= 1 or True)
    # MNN computes cumprod in float32 (also for int32 input): the reference is numpy's float cumprod.
    ref_in = a.astype(np.float64) if "prod" in name else a
    want = _np_call(getattr(np, name), ref_in, axis=axis)
    got = getattr(mnp, name)(a, axis=axis)
    assert_close(got, want, rtol=1e-5, atol=1e-5, check_dtype="prod" not in name)


def test_cumsum_default_axis_is_mnns():
    """MNN's cumsum/cumprod default to axis 0 (numpy flattens): recorded from real MNN 3.6.1."""
    a = [[1, 2], [3, 4]]
    assert mnp.cumsum(a).read().tolist() == [[1, 2], [4, 6]]
    got = mnp.cumprod(a).read()
    assert got.dtype == np.float32 and got.tolist() == [[1.0, 2.0], [3.0, 8.0]]


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_average(data):
    a, axis = data.draw(array_and_axis(float_arrays(shapes(min_dims=1, min_side=1)), allow_tuple=False))
    use_w = data.draw(st.booleans())
    if use_w:
        n = a.size if axis is None else a.shape[axis]
        w = data.draw(float_arrays(st.just((n,) if axis is not None else a.shape), 0.5, 2))
        want = np.average(a, axis=axis, weights=w)
        got = mnp.average(a, axis=axis, weights=w)
    else:
        want, got = np.average(a, axis=axis), mnp.average(a, axis=axis)
    assert_close(got, want, rtol=1e-4, atol=1e-4, check_dtype=False)


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_differences(data):
    a, axis = data.draw(array_and_axis(arrays(shapes(min_dims=1)), allow_none=False, allow_tuple=False))
    n = data.draw(st.integers(0, 2))
    assert_close(mnp.diff(a, n, axis), np.diff(a, n, axis))
    assert_close(mnp.ediff1d(a), np.ediff1d(a))
    assert_close(mnp.ediff1d(a, to_end=[9], to_begin=[-1, 0]), np.ediff1d(a, to_end=[9], to_begin=[-1, 0]))
    if a.shape[axis] >= 3:
        af = a.astype(np.float32)
        for edge in (1, 2):
            assert_close(mnp.gradient(af, axis=axis, edge_order=edge), np.gradient(af, axis=axis, edge_order=edge),
                         rtol=1e-4, atol=1e-3)
            coords = np.cumsum(np.arange(1, a.shape[axis] + 1) * 0.5)
            assert_close(mnp.gradient(af, coords, axis=axis, edge_order=edge),
                         np.gradient(af, coords, axis=axis, edge_order=edge), rtol=1e-4, atol=1e-3)
        assert_close(mnp.trapz(af, axis=axis), np.trapezoid(af, axis=axis), rtol=1e-4, atol=1e-3)


@settings(max_examples=30, deadline=None)
@given(a=float_arrays(shapes(max_dims=2), -10, 10), bins=st.one_of(st.integers(1, 8),
       st.lists(st.integers(-48, 48).map(lambda k: k / 4), min_size=2, max_size=6, unique=True).map(sorted)),
       rng=st.one_of(st.none(), st.tuples(st.floats(-5, 0), st.floats(0.5, 5))), density=st.booleans(),
       weighted=st.booleans())
@example(a=np.array([1.08e-43, 0.0], np.float32), bins=1, rng=None, density=True, weighted=False)
@example(a=np.array([1e-38, 0.0, 2e-38, 5e-39] * 250, np.float32), bins=4, rng=None, density=True, weighted=False)
def test_histogram(a, bins, rng, density, weighted):
    w = np.linspace(0.5, 1.5, a.size, dtype=np.float32).reshape(a.shape) if weighted else None
    want_h, want_e = np.histogram(a, bins, rng if isinstance(bins, int) else None, weights=w, density=density)
    got_h, got_e = mnp.histogram(a, bins, rng if isinstance(bins, int) else None, weights=w, density=density)
    if density:     # float32, as MNN has no float64: a density past float32's range is inf
        with np.errstate(over="ignore"):
            want_h = want_h.astype(np.float32)
    assert_close(got_h, want_h, rtol=1e-4, atol=1e-5, check_dtype=False)
    assert_close(got_e, want_e, rtol=1e-5, atol=1e-5)
    assert_close(mnp.histogram_bin_edges(a, bins), np.histogram_bin_edges(a, bins), rtol=1e-5, atol=1e-5)


@settings(max_examples=20, deadline=None)
@given(x=float_arrays(shapes(1, 1, 1, 30), -5, 5), y=float_arrays(shapes(1, 1, 1, 30), -5, 5))
def test_histogram2d_dd(x, y):
    n = min(x.size, y.size)
    x, y = x[:n], y[:n]
    want = np.histogram2d(x, y, bins=(3, 4))
    got = mnp.histogram2d(x, y, bins=(3, 4))
    assert_close(got[0], want[0], check_dtype=False)
    assert_close(got[1], want[1], rtol=1e-5, atol=1e-5)
    assert_close(got[2], want[2], rtol=1e-5, atol=1e-5)


@settings(max_examples=25, deadline=None)
@given(x=int_arrays(shapes(1, 1), 0, 12), minlength=st.integers(0, 15), weighted=st.booleans())
def test_bincount(x, minlength, weighted):
    w = np.arange(x.size, dtype=np.float32) if weighted else None
    assert_close(mnp.bincount(x, w, minlength), np.bincount(x, w, minlength), check_dtype=False)


@settings(max_examples=25, deadline=None)
@given(x=float_arrays(shapes(0, 2), -12, 12), xp=st.lists(st.floats(-10, 10), min_size=1, max_size=8,
       unique=True).map(sorted), left=st.one_of(st.none(), st.floats(-3, 3)))
def test_interp(x, xp, left):
    fp = np.sin(np.asarray(xp)).astype(np.float32)
    xp = np.asarray(xp, np.float32)
    assert_close(mnp.interp(x, xp, fp, left=left), np.interp(x, xp, fp, left=left), rtol=1e-5, atol=1e-5,
                 check_dtype=False)


@pytest.mark.parametrize("name", ["convolve", "correlate"])
@settings(max_examples=20, deadline=None)
@given(a=arrays(shapes(1, 1, 1, 8)), v=arrays(shapes(1, 1, 1, 8)), mode=st.sampled_from(["full", "same", "valid"]))
def test_convolve(name, a, v, mode):
    want = getattr(np, name)(a, v, mode)
    assert_close(getattr(mnp, name)(a, v, mode), want, rtol=1e-5, atol=1e-3)


@settings(max_examples=20, deadline=None)
@given(m=float_arrays(shapes(2, 2, 2, 5), -10, 10), rowvar=st.booleans(), ddof=st.sampled_from([None, 0, 1]))
def test_cov_corrcoef(m, rowvar, ddof):
    m = np.round(m, 2)  # no float32 underflow in the squared deviations
    nobs = m.shape[1] if rowvar else m.shape[0]
    assume(nobs > 1)
    want = _np_call(np.cov, m, rowvar=rowvar, ddof=ddof)
    assert_close(mnp.cov(m, rowvar=rowvar, ddof=ddof), want, rtol=1e-3, atol=1e-3)
    wc = _np_call(np.corrcoef, m, rowvar=rowvar)
    assume(np.all(np.isfinite(wc)))
    assert_close(mnp.corrcoef(m, rowvar=rowvar), wc, rtol=1e-3, atol=1e-3)
    aw = np.linspace(1, 2, nobs)
    assert_close(mnp.cov(m, rowvar=rowvar, aweights=aw), np.cov(m, rowvar=rowvar, aweights=aw), rtol=1e-3, atol=1e-3)


@settings(max_examples=25, deadline=None)
@given(x=float_arrays(shapes(0, 2), -10, 10), bins=st.lists(st.integers(-8, 8), min_size=1, max_size=6,
       unique=True).map(sorted), rev=st.booleans(), right=st.booleans())
def test_digitize(x, bins, rev, right):
    b = np.asarray(bins[::-1] if rev else bins, np.float32)
    assert_close(mnp.digitize(x, b, right), np.digitize(x, b, right))


def test_equality_helpers():
    assert mnp.array_equal([1, 2], [1, 2]) is True
    assert mnp.array_equal([1, 2], [1, 2, 3]) is False
    assert mnp.array_equal([np.nan, 1.0], [np.nan, 1.0], equal_nan=True) is True
    assert mnp.array_equiv([1, 2], [[1, 2], [1, 2]]) is True
    assert mnp.array_equiv([1, 2], [[1, 2, 3]]) is False
    assert mnp.trace(np.arange(9).reshape(3, 3)) == 12


def test_errors():
    with pytest.raises(np.exceptions.AxisError):
        mnp.sum(np.ones((2, 3), np.float32), axis=2)
    with pytest.raises(ValueError, match="duplicate"):
        mnp.sum(np.ones((2, 3), np.float32), axis=(0, 0))
    with pytest.raises(ValueError):
        mnp.amax(np.ones((0,), np.float32))
    with pytest.raises(ValueError):
        mnp.percentile([1.0, 2.0], 101)
    with pytest.raises(ValueError):
        mnp.histogram([1.0, 2.0], bins=[3.0, 1.0])


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_argument_forms(data):
    """axis as list, ddof, dtype=, out= and keepdims for argmax, as numpy."""
    a, axis = data.draw(array_and_axis(float_arrays(shapes(min_dims=1, min_side=2)), allow_none=False))
    ax_list = list(axis) if isinstance(axis, tuple) else [axis]
    assert_close(mnp.sum(a, axis=ax_list), np.sum(a, axis=tuple(ax_list)), rtol=1e-5, atol=1e-4)
    ddof = data.draw(st.integers(0, 1))
    assert_close(mnp.var(a, axis=axis, ddof=ddof), _np_call(np.var, a, axis=axis, ddof=ddof), rtol=1e-4, atol=1e-3)
    assert_close(mnp.std(a, axis=axis, ddof=ddof), _np_call(np.std, a, axis=axis, ddof=ddof), rtol=1e-4, atol=1e-3)
    assert_close(mnp.sum(a, axis=axis, dtype=np.int32), np.sum(a, axis=axis, dtype=np.int32))
    ax = ax_list[0]
    assert_close(mnp.argmax(a, axis=ax, keepdims=True), np.argmax(a, axis=ax, keepdims=True))
    out = mnp.zeros(list(np.mean(a, axis=axis).shape))
    res = mnp.mean(a, axis=axis, out=out)
    assert res is out
    assert_close(out, np.mean(a, axis=axis), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "all", "any"])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_where_and_initial(name, data):
    """numpy's ``where=`` and ``initial=`` reduction keywords."""
    a, axis = data.draw(array_and_axis(float_arrays(shapes(min_dims=1), -3, 3)), label="a, axis")
    mask = data.draw(hnp.arrays(np.bool_, a.shape[-1:]), label="where")
    kw = {}
    if data.draw(st.booleans()) or name in ("max", "min"):
        kw["where"] = mask
    if name in ("sum", "prod", "max", "min") and (data.draw(st.booleans()) or name in ("max", "min")):
        kw["initial"] = data.draw(st.integers(-2, 2))
    want, err = _outcome(getattr(np, name), a, axis=axis, **kw)
    if err is not None:
        with pytest.raises(err):
            getattr(mnp, name)(a, axis=axis, **kw)
        return
    assert_close(getattr(mnp, name)(a, axis=axis, **kw), want, rtol=1e-4, atol=1e-4, check_dtype=False)


@settings(max_examples=25, deadline=None)
@given(a=float_arrays(shapes(min_dims=1), -5, 5), use_out=st.booleans())
def test_ufunc_keywords(a, use_out):
    """numpy's ufunc ``where=``/``dtype=``/``out=`` keywords."""
    mask = a > 0
    out = mnp.full(list(a.shape), 7.0)
    want = np.full(a.shape, 7.0, np.float32) if use_out else None
    got = mnp.add(a, 1.0, out=out if use_out else None, where=mask)
    if use_out:
        np.add(a, np.float32(1.0), out=want, where=mask)
        assert got is out
        assert_close(out, want)
    else:  # numpy leaves unselected elements uninitialised; mnnjit fills 0
        np.testing.assert_allclose(got.read()[mask], (a + 1)[mask])
    assert_close(mnp.multiply(a, 2, dtype=np.int32), (a * 2).astype(np.int32))
    with pytest.raises(TypeError):
        mnp.add(a, 1, bogus=True)
