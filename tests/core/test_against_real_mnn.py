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
