"""Fixed cases of MNN's semantics, recorded from real MNN 3.6.1 (and numpy where DESIGN.md says numpy wins)."""
from __future__ import annotations

import pickle

import numpy as onp
import pytest

import mnnjit as MNN
import mnnjit.expr as F
import mnnjit.numpy as np


def test_printing_is_numpy_repr():
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert repr(x) == "array([[1., 2.],\n       [3., 4.]], dtype=float32)"
    assert str(x) == repr(x)
    assert repr(np.array([1, 2, 3])) == "array([1, 2, 3], dtype=int32)"
    assert repr(np.array(3.5)) == "array(3.5, dtype=float32)"
    assert repr(np.ones([2, 2], dtype=np.uint8)) == "array([[1, 1],\n       [1, 1]], dtype=uint8)"


def test_metadata():
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert x.shape == [2, 2] and isinstance(x.shape, list)
    assert str(x.dtype) == "dtype.float" and x.dtype == F.float
    assert str(x.data_format) == "data_format.NCHW"
    assert (x.size, x.ndim, x.valid, x.op_type) == (4, 2, True, "Const")
    assert x.read_as_tuple() == (1.0, 2.0, 3.0, 4.0)
    assert len(x) == 2


def test_narrowing():
    assert np.array([1, 2], dtype=np.int64).dtype == np.int32
    assert np.array([1.5, 2]).dtype == np.float32
    assert np.array([1, 2.5]).read().tolist() == [1.0, 2.5]
    assert np.array(onp.arange(3, dtype=onp.float64)).dtype == F.float
    assert np.array([True, False]).dtype == F.int  # MNN has no bool dtype


def test_zeros_ones_default_float32():
    assert repr(np.zeros((2, 3))) == repr(onp.zeros((2, 3), onp.float32))
    assert np.ones([2]).dtype == F.float


def test_comparison_and_scalar_results():
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert repr(x == 1) == "array([[1, 0],\n       [0, 0]], dtype=int32)"
    assert np.sum(x) == 10.0 and isinstance(np.sum(x), float)
    assert np.max(np.array([1, 5])) == 5 and isinstance(np.max(np.array([1, 5])), int)
    assert x.mean() == 2.5


def test_around_half_away_from_zero():
    got = np.around(np.array([0.5, 1.5, 2.5, -0.5, -2.5])).read().tolist()
    assert got == [1.0, 2.0, 3.0, -1.0, -3.0]


def test_astype_truncates_toward_zero():
    assert np.array([1.7, -1.7, 2.5, -2.5]).astype(np.int32).read().tolist() == [1, -1, 2, -2]


def test_uint8_image_arithmetic():
    img = np.array([[[1, 2, 3]]], dtype=np.uint8)
    assert repr(img - 1) == "array([[[0, 1, 2]]], dtype=int32)"
    assert repr(img * 2) == "array([[[2, 4, 6]]], dtype=int32)"
    assert (img - 1.5).dtype == F.float
    assert (img + img).dtype == F.uint8  # numpy's answer (real MNN crashes here)


def test_scalar_conversions_like_numpy():
    assert float(np.array([2.5])) == 2.5
    assert int(np.array([3.7])) == 3
    assert bool(np.array([0])) is False
    with pytest.raises(TypeError):
        float(np.array([1.0, 2.0]))
    with pytest.raises(ValueError):
        bool(np.array([1, 2]))


def test_numpy_interop():
    x = np.array([[1.0, 2.0]])
    assert onp.asarray(x).tolist() == [[1.0, 2.0]]
    assert onp.add(x, 1).tolist() == [[2.0, 3.0]] if isinstance(onp.add(x, 1), onp.ndarray) else True
    y = pickle.loads(pickle.dumps(x))
    assert y.read().tolist() == [[1.0, 2.0]]


def test_iteration_and_inplace():
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    rows = list(x)
    assert [r.read().tolist() for r in rows] == [[1.0, 2.0], [3.0, 4.0]]
    y = x
    x += 1
    assert y.read().tolist() == [[2.0, 3.0], [4.0, 5.0]]


def test_const_and_enums():
    v = F.const([2, 3, 4], [3], F.NCHW, F.int)
    assert repr(v) == "array([2, 3, 4], dtype=int32)"
    b = F.const(bytes("abc", encoding="utf8"), [3], F.NCHW, F.uint8)
    assert b.read().tolist() == [97, 98, 99]
    assert repr(F.dtype.float) == "dtype.float" and str(F.NHWC) == "data_format.NHWC"
    with pytest.raises(ValueError):
        F.const([1, 2, 3], [2, 2])


def test_convert_nc4hw4_packs_like_mnn():
    x = F.const(list(range(24)), [1, 6, 2, 2], F.NCHW, F.float)
    c = F.convert(x, F.NC4HW4)
    assert c.shape == [1, 6, 2, 2]
    assert c.read_as_tuple() == (0.0, 4.0, 8.0, 12.0, 1.0, 5.0, 9.0, 13.0, 2.0, 6.0, 10.0, 14.0, 3.0, 7.0, 11.0,
                                 15.0, 16.0, 20.0, 0.0, 0.0, 17.0, 21.0, 0.0, 0.0, 18.0, 22.0, 0.0, 0.0, 19.0, 23.0,
                                 0.0, 0.0)
    assert F.convert(x, F.NHWC).shape == [1, 2, 2, 6]
    back = F.convert(c, F.NCHW)
    assert back.read().ravel().tolist() == list(map(float, range(24)))
    nhwc = F.convert(x, F.NHWC)
    onp.testing.assert_array_equal(nhwc.read(), onp.arange(24, dtype=onp.float32).reshape(1, 6, 2, 2)
                                   .transpose(0, 2, 3, 1))


def test_placeholder_write_and_recompute():
    p = F.placeholder([2], F.NCHW, F.float)
    y = p * 2
    with pytest.raises(ValueError, match="placeholder"):
        y.read()
    p.write([1.0, 2.0])
    assert y.read().tolist() == [2.0, 4.0]
    p.write([3.0, 4.0])
    assert y.read().tolist() == [6.0, 8.0]


def test_set_order_relabels():
    x = np.array(onp.zeros((1, 2, 2, 3), onp.float32))
    x.set_order(F.NHWC)
    assert x.data_format == F.NHWC and x.shape == [1, 2, 2, 3]


def test_top_level_module_lazy_submodules():
    assert MNN.numpy is np and MNN.expr is F
    with pytest.raises(AttributeError):
        MNN.not_a_thing


def test_var_cannot_be_constructed_directly():
    with pytest.raises(TypeError):
        F.Var()


@pytest.mark.parametrize("bad", [["a", "b"], [object()], [1 + 2j]])
def test_unsupported_data_raises_type_error(bad):
    with pytest.raises(TypeError):
        np.array(bad)


def test_reshape_errors_like_numpy():
    with pytest.raises(ValueError, match="cannot reshape array of size 6 into shape"):
        np.array(onp.zeros(6)).reshape(4)
    from mnnjit.ops.build import AxisError
    with pytest.raises(AxisError):
        np.sum(np.array([1, 2]), axis=2)
