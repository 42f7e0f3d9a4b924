"""Differential cases: mnnjit prints and returns what real MNN does (where DESIGN.md says MNN wins)."""
from __future__ import annotations

import pytest

MNN = pytest.importorskip("MNN")
import MNN.expr as RF  # noqa: E402
import MNN.numpy as rnp  # noqa: E402

import mnnjit.expr as F  # noqa: E402
import mnnjit.numpy as np  # noqa: E402

CASES = [
    "np.array([[1., 2.], [3., 4.]])",
    "np.array([[1., 2.], [3., 4.]]) * 2",
    "np.array([1, 2, 3]) > 1",
    "np.array([1, 2]) + 1.5",
    "np.array([[[1, 2, 3]]], dtype=np.uint8) - 1",
    "np.array([5, -7]) // 2",
    "np.arange(10)",
    "np.array([[1., -2.], [3., 4.]])[np.array([0, 1])]",
    "np.array([[1., -2.], [3., 4.]])[:, ::-1]",
    "np.array([[1., -2.], [3., 4.]]).sum(0)",
    "np.array([[1., -2.], [3., 4.]]).sum()",
    "np.array([[1., -2.], [3., 4.]])[0, 1]",
    "np.array([1, 5]).max()",
    "np.array(5)",
    "np.array([1.7, -1.7, 2.5, -2.5]).astype(np.int32)",
    "np.array([[1., -2.], [3., 4.]])[np.array([[1., -2.], [3., 4.]]) > 0]",
    "np.array(list(range(2000))).astype(np.float32) / 7",
    "F.const([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 2, 2], F.NCHW)",
    "F.convert(F.const(list(range(24)), [1, 6, 2, 2], F.NCHW, F.float), F.NC4HW4)",
    "F.convert(F.const(list(range(24)), [1, 6, 2, 2], F.NCHW, F.float), F.NC4HW4).read_as_tuple()",
    "F.convert(F.const(list(range(24)), [1, 6, 2, 2], F.NCHW, F.float), F.NHWC).shape",
    "(np.array([[1., 2.]]).shape, np.array([[1., 2.]]).dtype, np.array([[1., 2.]]).data_format)",
]


@pytest.mark.parametrize("source", CASES)
def test_same_repr_as_real_mnn(source):
    ours = eval(source, {"np": np, "F": F})
    theirs = eval(source, {"np": rnp, "F": RF})
    assert repr(ours) == repr(theirs)
    assert type(ours).__name__ == type(theirs).__name__


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402
import numpy as onp  # noqa: E402


@settings(max_examples=30, deadline=None)
@given(a=hnp.arrays(onp.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=6),
                    elements=st.floats(-1e4, 1e4, width=32)),
       k=st.floats(-10, 10, width=32).filter(lambda v: abs(v) > 1e-3))
def test_random_arithmetic_prints_like_real_mnn(a, k):
    ours = (np.array(a) * k + 1) / 3
    theirs = (rnp.array(a) * k + 1) / 3
    assert repr(ours) == repr(theirs)
    assert ours.shape == theirs.shape
    assert ours.read_as_tuple() == pytest.approx(theirs.read_as_tuple(), rel=1e-6, abs=1e-6)


@settings(max_examples=30, deadline=None)
@given(a=hnp.arrays(onp.int32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                    elements=st.integers(-1000, 1000)))
def test_random_int_reductions_like_real_mnn(a):
    assert np.array(a).sum() == rnp.array(a).sum()
    assert repr(np.array(a).sum(0)) == repr(rnp.array(a).sum(0))
    assert repr(np.array(a) > 3) == repr(rnp.array(a) > 3)


from mnnjit.testing import assert_matches_mnn  # noqa: E402
from mnnjit.testing import strategies as mst  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(x=mst.arrays(mst.dtypes([F.float, F.int]), mst.shapes(min_dims=2, max_dims=4, max_side=5),
                    data_format=mst.data_formats(), elements=st.integers(-1000, 1000)))
def test_random_elementwise_chain_on_every_format_matches_real_mnn(x):
    # result shape, dtype, data format and values, for Vars of each dtype and format
    assert_matches_mnn(lambda MNN, v: MNN.numpy.abs(v) * 2 - v // 3, x)
