"""Models made here with real MNN's converter (ONNX from the onnx helper API): a ResNet-18, a
transformer encoder block (both GELU forms), an LSTM (While loop), 2-8 bit and 4-bit block
weight quantization, external weights. Oracle: real MNN on the same file (and ONNX Runtime)."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import mnnjit as MNN
from mnnjit_models_fixtures import convert, lstm_onnx, real_mnn_forward, resnet18_onnx, transformer_onnx

pytest.importorskip("onnx")
pytest.importorskip("MNN")


def close(got: np.ndarray, expected: np.ndarray) -> bool:
    """Issue 6's tolerance."""
    return got.shape == expected.shape and \
        float(np.abs(got - expected).max()) <= 1e-3 * max(1.0, float(np.abs(expected).max()))


@pytest.fixture(scope="module")
def fx(tmp_path_factory) -> str:
    d = str(tmp_path_factory.mktemp("models_fx"))
    resnet18_onnx(os.path.join(d, "r18.onnx"), width=8, size=64, classes=10)
    transformer_onnx(os.path.join(d, "tf_erf.onnx"))
    transformer_onnx(os.path.join(d, "tf_tanh.onnx"), gelu_tanh=True)
    lstm_onnx(os.path.join(d, "lstm.onnx"))
    for n in ("r18", "tf_erf", "tf_tanh", "lstm"):
        convert(os.path.join(d, f"{n}.onnx"), os.path.join(d, f"{n}.mnn"))
    return d


def _check(path: str, shape, outs, seed: int = 0, ort_onnx: str | None = None) -> None:
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    exp = real_mnn_forward(path, {"x": x}, outs)
    m = MNN.nn.load_module_from_file(path, ["x"], outs)
    got = [v.read() for v in m.forward([MNN.expr.const(x, list(shape))])]
    for name, g, e in zip(outs, got, exp):
        assert close(g, e), (path, name, float(np.abs(g - e).max()))
    if ort_onnx:
        import onnxruntime as ort
        ref = ort.InferenceSession(ort_onnx).run(outs, {"x": x})
        for g, r in zip(got, ref):
            assert close(g, r.reshape(g.shape))


def test_resnet18(fx) -> None:
    _check(os.path.join(fx, "r18.mnn"), (1, 3, 64, 64), ["logits"], ort_onnx=os.path.join(fx, "r18.onnx"))


@pytest.mark.parametrize("variant", ["tf_erf", "tf_tanh"])
def test_transformer_block(fx, variant) -> None:
    _check(os.path.join(fx, f"{variant}.mnn"), (1, 16, 64), ["y"], seed=1)


def test_lstm_while_loop(fx) -> None:
    _check(os.path.join(fx, "lstm.mnn"), (5, 1, 8), ["seq_out", "h_last", "c_last"], seed=2,
           ort_onnx=os.path.join(fx, "lstm.onnx"))


@pytest.mark.parametrize("flags", [("--weightQuantBits", "8"), ("--weightQuantBits", "2"),
                                   ("--weightQuantBits", "5", "--weightQuantAsymmetric"),
                                   ("--weightQuantBits", "4", "--weightQuantBlock", "32"),
                                   ("--weightQuantBits", "8", "--weightQuantBlock", "64")])
def test_weight_quantized(fx, flags) -> None:
    path = os.path.join(fx, "r18_q" + "_".join(f.strip("-") for f in flags) + ".mnn")
    convert(os.path.join(fx, "r18.onnx"), path, *flags)
    _check(path, (1, 3, 64, 64), ["logits"], seed=3)


def test_external_weights_and_set_external(fx) -> None:
    path = os.path.join(fx, "r18_ext.mnn")
    convert(os.path.join(fx, "r18.onnx"), path, "--saveExternalData")
    assert os.path.exists(path + ".weight")
    _check(path, (1, 3, 64, 64), ["logits"], seed=4)
    # the weight file elsewhere, given with RuntimeManager.set_external
    moved = os.path.join(fx, "moved")
    os.makedirs(moved, exist_ok=True)
    shutil.copy(path, os.path.join(moved, "model.mnn"))
    shutil.copy(path + ".weight", os.path.join(fx, "weights.bin"))
    x = np.random.default_rng(4).standard_normal((1, 3, 64, 64)).astype(np.float32)
    with pytest.raises((FileNotFoundError, ValueError), match="weight"):
        MNN.nn.load_module_from_file(os.path.join(moved, "model.mnn"), ["x"], ["logits"])
    rt = MNN.nn.create_runtime_manager({"backend": "CPU"})
    rt.set_external(os.path.join(fx, "weights.bin"))
    m = MNN.nn.load_module_from_file(os.path.join(moved, "model.mnn"), ["x"], ["logits"], runtime_manager=rt)
    got = m.forward([MNN.expr.const(x, [1, 3, 64, 64])])[0].read()
    exp = real_mnn_forward(path, {"x": x}, ["logits"])[0]
    assert close(got, exp)
