"""memory=low GEMM paths: a 1x1 convolution over many small images as one GEMM over their pixels
(a transformer's projections), and deep convolutions dequantizing one panel at a time."""
from __future__ import annotations

import numpy as np
import pytest

from precision_refs import act_ref, conv_ref

Q = pytest.importorskip("mnnjit.backends.cpu.quant")
G = pytest.importorskip("mnnjit.backends.cpu.gemm.conv")


def _quant_rows(rng, o, k, bits, block):
    lim = 127 if bits == 8 else 7
    codes = rng.integers(-lim - 1, lim + 1, (o, k)).astype(np.int8)
    scale = rng.uniform(0.005, 0.02, (o, k // block)).astype(np.float32)
    offset = rng.uniform(-0.01, 0.01, (o, k // block)).astype(np.float32)
    return Q.QuantRows(codes, scale, offset, (o, k), block, bits)


def _to_storage(a, half):
    return a.astype(np.float16).view(np.uint16) if half else a.astype(np.float32)


def _from_storage(a, half):
    return a.view(np.float16).astype(np.float64) if half else a.astype(np.float64)


@pytest.mark.parametrize("n,o,k,hw,bits,block,act,res,half", [
    (37, 50, 40, 1, 8, 40, "relu6", False, False),      # partial last panel (50 = 8*6 + 2)
    (128, 64, 96, 1, 8, 96, "", True, False),           # a transformer projection + residual
    (9, 23, 32, 3, 4, 8, "sigmoid", True, False),       # 4-bit per-block, 3-pixel images, tail
    (20, 30, 48, 2, 8, 16, "relu", False, True),        # float16 activation storage
])
def test_images_as_columns_match_the_dequantized_conv(n, o, k, hw, bits, block, act, res, half):
    """The one-GEMM-over-all-pixels path equals the convolution with the dequantized weights
    (bias, activation, residual, float16 storage, 4-bit codes, ragged panels and columns)."""
    rng = np.random.default_rng(n * o + k)
    q = _quant_rows(rng, o, k, bits, block)
    bias = rng.standard_normal(o).astype(np.float32)
    op = G.ConvGemm(G.PackedWeights.from_quant_rows(q), bias, (n, k, 1, hw), (1, 1),
                    act=act, threads=2)
    assert op.cols
    x = rng.standard_normal((n, k, 1, hw)).astype(np.float32)
    r = rng.standard_normal((n, o, 1, hw)).astype(np.float32) if res else None
    xs = _to_storage(x, half)
    out = np.full((n, o, 1, hw), 0x7E00 if half else np.nan,
                  np.uint16 if half else np.float32)
    op.run(xs, out, None if r is None else _to_storage(r, half))
    xin = _from_storage(xs, half)
    ref = conv_ref(xin, q.dense().reshape(o, k, 1, 1), bias, (1, 1), (0, 0, 0, 0), (1, 1), 1)
    if res:
        ref = ref + _from_storage(_to_storage(r, half), half)
    ref = act_ref(ref, act)
    got = _from_storage(out, half)
    tol = (2 ** -10 * np.abs(ref) + 2e-3) if half else 1e-5 * (1 + np.abs(ref))
    assert np.all(np.abs(got - ref) <= tol)


@pytest.mark.parametrize("threads", [1, 2])
def test_deep_quantized_conv_dequantizes_panel_by_panel(threads):
    """A 3x3 convolution whose weights outgrow L2 runs panels outside, each dequantized right
    before its column blocks: same values as the dequantized convolution."""
    rng = np.random.default_rng(threads)
    o, c = 130, 160
    q = _quant_rows(rng, o, c * 9, 8, c * 9)
    bias = rng.standard_normal(o).astype(np.float32)
    op = G.ConvGemm(G.PackedWeights.from_quant_rows(q), bias, (1, c, 5, 6), (3, 3),
                    (1, 1), (1, 1, 1, 1), act="relu", threads=threads)
    assert op.o_outer and not op.cols
    x = rng.standard_normal((1, c, 5, 6)).astype(np.float32)
    out = np.full((1, o, 5, 6), np.nan, np.float32)
    op.run(x, out)
    ref = conv_ref(x, q.dense().reshape(o, c, 3, 3), bias, (1, 1), (1, 1, 1, 1), (1, 1), 1, "relu")
    assert np.allclose(out, ref, rtol=1e-5, atol=1e-4)


@pytest.fixture(scope="module")
def wq8_models(tmp_path_factory):
    """A narrow ResNet-18 on 112x112 inputs (its first 3x3 layers have 28x28 outputs) and a small
    transformer block, converted by real MNN's converter with 8-bit weight quantization."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "models"))
    from mnnjit_models_fixtures import convert, resnet18_onnx, transformer_onnx
    d = tmp_path_factory.mktemp("wq8")
    rn = resnet18_onnx(str(d / "rn.onnx"), width=16, size=112, classes=10, seed=1)
    tf = transformer_onnx(str(d / "tf.onnx"), d=64, heads=4, seq=24, ff=128)
    return {"resnet": (convert(rn, str(d / "rn.mnn"), "--weightQuantBits", "8"),
                       (1, 3, 112, 112), "x", "logits"),
            "transformer": (convert(tf, str(d / "tf.mnn"), "--weightQuantBits", "8"),
                            (1, 24, 64), "x", "y")}


def _forward(spec, memory):
    import mnnjit.expr as F
    import mnnjit.nn as nn
    path, shape, iname, oname = spec
    rt = nn.create_runtime_manager(({"precision": 0, "memory": memory, "numThread": 2},))
    mod = nn.load_module_from_file(path, [iname], [oname], runtime_manager=rt)
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    y = np.asarray(mod.forward(F.const(x, list(shape), F.NCHW)).read())
    return y, mod._last_plan


@pytest.mark.parametrize("name,kind", [("resnet", "wino"), ("transformer", "conv")])
def test_memory_low_models_match_their_dequantized_weights(wq8_models, name, kind):
    """memory=low on 8-bit weight models equals memory=normal (weights dequantized at load) up to
    float rounding: the transformer's projections run as one GEMM over the sequence, ResNet's
    large-plane 3x3 layers as Winograd on float weights, the deeper ones as Winograd on the codes."""
    from mnnjit.backends.cpu.weights import plan_choices
    y_low, plan = _forward(wq8_models[name], 2)
    y_ref, _ = _forward(wq8_models[name], 0)
    assert np.allclose(y_low, y_ref, rtol=1e-4, atol=1e-4 * float(np.abs(y_ref).max()))
    choices = plan_choices(plan)
    assert any(c[1] == kind for c in choices)
    assert any("int8 codes" in c[5] for c in choices)
    if name == "resnet":     # the 14x14 and smaller 3x3 layers: Winograd on the codes
        assert any("Winograd-transformed per task" in c[5] for c in choices)
    if name == "transformer":
        convs = [st.op for st in plan.steps if st.kind == "conv"]
        assert convs and all(op.cols for op in convs)
