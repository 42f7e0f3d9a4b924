"""The V2 session API (Interpreter / Session / Tensor / OpInfo) against real MNN."""
from __future__ import annotations

import os

import numpy as np
import pytest

import mnnjit as MNN

from shared_paths import MODELS  # noqa: E402


def _v2_run(mod, path: str, x_nhwc: np.ndarray, batch_resize: int | None = None) -> tuple:
    it = mod.Interpreter(path)
    s = it.createSession({"numThread": 1})
    i, o = it.getSessionInput(s), it.getSessionOutput(s)
    meta = (i.getShape(), i.getDimensionType(), o.getShape(), o.getDimensionType(),
            list(it.getSessionInputAll(s)), list(it.getSessionOutputAll(s)))
    if batch_resize:
        it.resizeTensor(i, (batch_resize,) + tuple(i.getShape()[1:]))
        it.resizeSession(s)
    t = mod.Tensor(x_nhwc.shape, mod.Halide_Type_Float, x_nhwc, mod.Tensor_DimensionType_Tensorflow)
    assert i.copyFrom(t)
    assert it.runSession(s) == 0
    out = mod.Tensor(o.getShape(), mod.Halide_Type_Float, mod.Tensor_DimensionType_Caffe)
    assert o.copyToHostTensor(out)
    return meta, np.array(out.getData(), np.float32).reshape(o.getShape()), o.getShape()


def test_session_matches_real_mnn() -> None:
    real = pytest.importorskip("MNN")
    path = os.path.join(MODELS, "convbn.mnn")
    x = np.random.default_rng(1).random((1, 32, 32, 3)).astype(np.float32)
    meta, got, _ = _v2_run(MNN, path, x)
    rmeta, exp, _ = _v2_run(real, path, x)
    assert meta == rmeta
    np.testing.assert_allclose(got, exp, atol=1e-4)
    x2 = np.random.default_rng(2).random((2, 32, 32, 3)).astype(np.float32)
    _, got2, shape2 = _v2_run(MNN, path, x2, batch_resize=2)
    _, exp2, rshape2 = _v2_run(real, path, x2, batch_resize=2)
    assert shape2 == rshape2 == (2, 10)
    np.testing.assert_allclose(got2, exp2, atol=1e-4)


def test_tensor_constructors_and_data() -> None:
    t = MNN.Tensor((2, 3), MNN.Halide_Type_Int, list(range(6)), MNN.Tensor_DimensionType_Caffe)
    assert t.getShape() == (2, 3) and t.getData() == (0, 1, 2, 3, 4, 5)
    assert t.getDataType() is MNN.Halide_Type_Int and t.getDimensionType() == MNN.Tensor_DimensionType_Caffe
    v = MNN.Tensor(MNN.expr.const([1.0, 2.0, 3.0, 4.0], [2, 2]))
    assert v.getShape() == (2, 2) and v.getData() == (1.0, 2.0, 3.0, 4.0)
    np.testing.assert_array_equal(v.getNumpyData(), [[1, 2], [3, 4]])
    with pytest.raises(ValueError, match="4 values"):
        MNN.Tensor((3, 3), MNN.Halide_Type_Float, [1, 2, 3, 4], MNN.Tensor_DimensionType_Caffe)
    small = MNN.Tensor((1, 2), MNN.Halide_Type_Float, MNN.Tensor_DimensionType_Caffe)
    with pytest.raises(ValueError, match="does not fit"):
        small.copyFrom(t)


def test_callbacks_see_every_layer() -> None:
    path = os.path.join(MODELS, "convbn.mnn")
    it = MNN.Interpreter(path)
    s = it.createSession()
    seen = []
    it.runSessionWithCallBackInfo(s, lambda ts, info: seen.append((info.getName(), info.getType())) or True,
                                  lambda ts, info: True)
    types = [t for _, t in seen]
    assert "Convolution" in types and "Pooling" in types and types.count("Pooling") == 2
    names = []
    it.runSessionWithCallBack(s, lambda ts, name: names.append(name) or len(names) < 3, None)
    assert len(names) == 3
    assert it.getModelVersion() == "3.6.1"
    assert MNN.get_model_uuid(path) == "c9102afe-c6de-4ea9-ab02-440fb88920de"


def test_v2_errors(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        MNN.Interpreter(str(tmp_path / "none.mnn"))
    it = MNN.Interpreter(os.path.join(MODELS, "mlp.mnn"))
    s = it.createSession()
    with pytest.raises(KeyError, match="no input tensor 'y'"):
        it.getSessionInput(s, "y")
