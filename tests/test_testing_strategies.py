"""mnnjit.testing.strategies give what they claim (dtypes, shapes, formats, value ranges, loadable
models), and the assertions read Vars and compare with real MNN."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as onp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import mnnjit.expr as F
import mnnjit.nn as nn
import mnnjit.numpy as mnp
from mnnjit.testing import assert_allclose, assert_array_equal, assert_matches_mnn, to_numpy
from mnnjit.testing import strategies as mst

ROOT = Path(__file__).resolve().parent.parent
FAST = settings(max_examples=20, deadline=None, derandomize=True)
_NARROW = {"double": "float", "int64": "int"}
_RANGES = {"uint8": (0, 255), "int8": (-128, 127), "int": (-2**31, 2**31 - 1), "float": (-1e6, 1e6)}


def test_importing_mnnjit_testing_imports_neither_hypothesis_nor_numba():
    code = ("import sys, mnnjit, mnnjit.testing, mnnjit.testing.plugin\n"
            "print(','.join(m for m in ('hypothesis', 'numba', 'MNN') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == ""


@FAST
@given(st.data(), st.sampled_from(["float", "int", "uint8", "int8", "double", "int64"]),
       mst.shapes(min_dims=0, max_dims=4, max_side=6), mst.data_formats())
def test_arrays_have_the_dtype_shape_and_format_asked_for(data, dtype_name, shape, fmt):
    if fmt == F.NC4HW4 and len(shape) < 2:
        with pytest.raises(InvalidArgument, match="NC4HW4"):
            data.draw(mst.arrays(dtype_name, shape, data_format=fmt))
        return
    v = data.draw(mst.arrays(getattr(F, dtype_name), shape, data_format=fmt))
    want = _NARROW.get(dtype_name, dtype_name)
    assert v.dtype == getattr(F, want)
    assert v.shape == list(shape)
    assert v.data_format == fmt
    value = v.read_view()
    assert value.shape == tuple(shape)
    lo, hi = _RANGES[want]
    assert onp.all(value >= lo) and onp.all(value <= hi) and onp.isfinite(value.astype(onp.float64)).all()
    if fmt == F.NC4HW4:  # the logical value is what converting back to NCHW gives
        assert_array_equal(F.convert(v, F.NCHW).read(), value)


@FAST
@given(mst.arrays(mst.dtypes(), mst.shapes(max_dims=3), data_format=mst.data_formats()))
def test_arrays_from_strategies_never_pack_fewer_than_two_dimensions(v):
    assert v.dtype in mst.VAR_DTYPES
    assert v.data_format != F.NC4HW4 or v.ndim >= 2


@FAST
@given(mst.arrays(onp.float32, (3, 4), elements=st.just(1.5)), mst.arrays("uint8", 20, unique=True))
def test_arrays_honour_elements_and_unique(ones, distinct):
    assert_array_equal(ones, onp.full((3, 4), 1.5, onp.float32), check_dtype=True)
    assert len(set(distinct.read().tolist())) == 20


@FAST
@given(st.data(), st.integers(1, 20), st.integers(1, 20), st.sampled_from([1, 3, 4]),
       st.sampled_from(["uint8", "float"]), st.booleans())
def test_images_are_hwc_with_pixel_ranges(data, h, w, c, dtype_name, batch):
    img = data.draw(mst.images(h, w, c, dtype_name, batch=batch))
    assert img.shape == ([1, h, w, c] if batch else [h, w, c])
    assert img.data_format == F.NHWC
    assert img.dtype == getattr(F, dtype_name)
    value = img.read_view()
    assert value.min() >= 0 and value.max() <= 255


@FAST
@given(mst.shapes(min_dims=2, max_dims=3, min_side=2, max_side=5))
def test_shapes_respect_their_bounds(shape):
    assert isinstance(shape, tuple) and 2 <= len(shape) <= 3 and all(2 <= s <= 5 for s in shape)


@FAST
@given(st.data(), mst.shapes(max_dims=4))
def test_broadcastable_shapes_broadcast_as_numpy_does(data, shape):
    other = data.draw(mst.broadcastable_shapes(shape, max_dims=4))
    result = onp.broadcast_shapes(shape, other)  # raises when they do not broadcast
    assert len(result) == max(len(shape), len(other))
    a = data.draw(mst.arrays("float", shape))
    b = data.draw(mst.arrays("float", other))
    assert tuple((a + b).shape) == result
    assert_allclose(a + b, a.read_view() + b.read_view(), rtol=1e-6)  # mnnjit broadcasts the same way


@FAST
@given(mst.mutually_broadcastable_shapes(3, max_dims=4))
def test_mutually_broadcastable_shapes(shapes):
    assert onp.broadcast_shapes(*shapes.input_shapes) == shapes.result_shape


@settings(max_examples=12, deadline=None, derandomize=True)
@given(mst.models(max_layers=3), st.integers(0, 2**16))
def test_models_load_and_run_as_built_and_as_real_mnn_runs_them(model, seed):
    x = model.sample_input(seed)
    module = nn.load_module_from_file(model.path, [model.input_name], [model.output_name])
    out = module.forward(F.const(x, list(x.shape), F.NCHW))
    assert out.shape[:2] == [1, out.shape[1]] and out.data_format == F.NCHW
    assert_allclose(out, model.evaluate(x), rtol=1e-4, atol=1e-5)
    # the saved file is a real .mnn: real MNN loads it and agrees
    assert_matches_mnn(lambda MNN, path, v: MNN.nn.load_module_from_file(path, ["x"], ["y"]).forward(v),
                       model.path, F.const(x, list(x.shape), F.NCHW), rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------------ assertions
def test_assertions_read_vars_in_their_logical_layout():
    a = onp.arange(2 * 5 * 2 * 3, dtype=onp.float32).reshape(2, 5, 2, 3)
    packed = F.convert(F.const(a, list(a.shape), F.NCHW), F.NC4HW4)
    assert_array_equal(packed, a)
    assert_allclose(packed, a + 1e-7, atol=1e-6)
    assert_array_equal(to_numpy([packed, packed])[1], a)
    with pytest.raises(AssertionError):
        assert_array_equal(packed, a + 1)
    with pytest.raises(AssertionError, match="dtypes differ"):
        assert_array_equal(F.const([1, 2], [2], F.NCHW, F.int), onp.array([1, 2], onp.int64), check_dtype=True)


def test_assert_matches_mnn_maps_public_functions_and_finds_differences():
    pytest.importorskip("MNN")
    x = F.const(onp.linspace(-3, 3, 12, dtype=onp.float32), [3, 4])
    got = assert_matches_mnn(mnp.exp, x)  # run as MNN.numpy.exp
    assert_allclose(got, onp.exp(onp.linspace(-3, 3, 12, dtype=onp.float32)).reshape(3, 4), rtol=1e-6)
    assert_matches_mnn(lambda MNN, v: MNN.expr.convert(MNN.numpy.abs(v) * 2, MNN.expr.NC4HW4),
                       F.const(onp.arange(-8, 8, dtype=onp.float32).reshape(1, 4, 2, 2), [1, 4, 2, 2]))

    def off_by_one(MNN, v):
        return MNN.numpy.exp(v) + (1 if MNN.__name__ == "MNN" else 0)
    with pytest.raises(AssertionError, match="values differ"):
        assert_matches_mnn(off_by_one, x)

    def int_only_here(MNN, v):
        return MNN.numpy.floor(v) if MNN.__name__ == "MNN" else v.astype(mnp.int32)
    with pytest.raises(AssertionError, match="dtypes differ"):
        assert_matches_mnn(int_only_here, x)

    def bad(MNN, v):
        return MNN.numpy.reshape(v, [5, 7])
    with pytest.raises(AssertionError, match="both raised"):
        assert_matches_mnn(bad, x)
    assert assert_matches_mnn(bad, x, both_raise_ok=True) is None


def test_assert_matches_mnn_skips_without_real_mnn(monkeypatch):
    monkeypatch.setitem(sys.modules, "MNN", None)  # import MNN now fails
    with pytest.raises(pytest.skip.Exception, match="real MNN is not installed"):
        assert_matches_mnn(mnp.exp, F.const([1.0], [1]))
