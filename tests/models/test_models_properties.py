"""Property tests: random small CNN / elementwise / shape graphs built with the onnx helper API,
converted by real MNN's converter, run by mnnjit and by real MNN (the oracle) on random inputs."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mnnjit as MNN
from mnnjit_models_fixtures import _Builder, convert, real_mnn_forward

pytest.importorskip("onnx")
pytest.importorskip("MNN")


@st.composite
def cnn_specs(draw):
    c = draw(st.sampled_from([1, 3, 4, 8]))
    h = draw(st.integers(5, 17))
    w = draw(st.integers(5, 17))
    layers = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["conv", "dwconv", "maxpool", "avgpool", "act", "resize"]))
        k = draw(st.integers(1, 3))
        s = draw(st.integers(1, 2))
        p = draw(st.integers(0, k // 2 + (1 if kind == "conv" else 0)))
        layers.append({"kind": kind, "k": k, "s": s, "p": p, "o": draw(st.sampled_from([2, 4, 6])),
                       "d": draw(st.sampled_from([1, 1, 2])), "ceil": draw(st.booleans()),
                       "incl": draw(st.booleans()), "act": draw(st.sampled_from(["Relu", "Sigmoid", "Tanh", "clip"]))})
    return c, h, w, layers, draw(st.integers(0, 2**16))


def _build(path: str, c: int, h: int, w: int, layers: list, seed: int) -> None:
    b = _Builder(seed)
    x, ch, hh, ww = "x", c, h, w
    for L in layers:
        k, s, p = L["k"], L["s"], L["p"]
        if L["kind"] in ("conv", "dwconv"):
            d = L["d"] if (hh + 2 * p - (k - 1) * L["d"] - 1) >= 0 and (ww + 2 * p - (k - 1) * L["d"] - 1) >= 0 else 1
            if (hh + 2 * p - (k - 1) * d - 1) < 0 or (ww + 2 * p - (k - 1) * d - 1) < 0:
                continue
            grp, o = (ch, ch) if L["kind"] == "dwconv" else (1, L["o"])
            x = b.op("Conv", [x, b.weight((o, ch // grp, k, k)), b.init(b.rng.standard_normal(o).astype(np.float32), "b")],
                     kernel_shape=[k, k], strides=[s, s], pads=[p, p, p, p], dilations=[d, d], group=grp)
            hh = (hh + 2 * p - (k - 1) * d - 1) // s + 1
            ww = (ww + 2 * p - (k - 1) * d - 1) // s + 1
            ch = o
        elif L["kind"] in ("maxpool", "avgpool"):
            k = max(k, 2)
            p = min(p, k // 2)
            if hh + 2 * p < k or ww + 2 * p < k:
                continue
            attrs = dict(kernel_shape=[k, k], strides=[s, s], pads=[p, p, p, p], ceil_mode=int(L["ceil"]))
            if L["kind"] == "avgpool":
                attrs["count_include_pad"] = int(L["incl"])
            x = b.op("MaxPool" if L["kind"] == "maxpool" else "AveragePool", [x], **attrs)
            f = (lambda n: -(-(n + 2 * p - k) // s) + 1) if L["ceil"] else (lambda n: (n + 2 * p - k) // s + 1)
            nh, nw = f(hh), f(ww)
            if L["ceil"]:  # the last window must start inside the input or the left padding
                nh -= (nh - 1) * s >= hh + p
                nw -= (nw - 1) * s >= ww + p
            hh, ww = nh, nw
        elif L["kind"] == "resize":
            sc = b.init(np.array([1, 1, 2, 2], np.float32), "sc")
            mode = "linear" if L["incl"] else "nearest"
            x = b.op("Resize", [x, "", sc], mode=mode, coordinate_transformation_mode="half_pixel" if L["ceil"] else "asymmetric")
            hh, ww = hh * 2, ww * 2
        else:
            if L["act"] == "clip":
                x = b.op("Clip", [x, b.init(np.array(-0.5, np.float32), "lo"), b.init(np.array(0.7, np.float32), "hi")])
            else:
                x = b.op(L["act"], [x])
    y = b.op("Add", [x, b.init(np.array(0.25, np.float32), "c")])
    b.nodes[-1].output[0] = "y"
    b.save(path, [b.io("x", [1, c, h, w])], [b.io("y", [1, ch, hh, ww])])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cnn_specs())
def test_random_cnn_matches_real_mnn(spec) -> None:
    c, h, w, layers, seed = spec
    with tempfile.TemporaryDirectory() as d:
        onnx_path, mnn_path = os.path.join(d, "m.onnx"), os.path.join(d, "m.mnn")
        _build(onnx_path, c, h, w, layers, seed)
        convert(onnx_path, mnn_path)
        x = np.random.default_rng(seed).standard_normal((1, c, h, w)).astype(np.float32)
        (exp,) = real_mnn_forward(mnn_path, {"x": x}, ["y"])
        got = MNN.nn.load_module_from_file(mnn_path, ["x"], ["y"]).forward([MNN.expr.const(x, [1, c, h, w])])[0].read()
        assert got.shape == exp.shape, (layers, got.shape, exp.shape)
        assert float(np.abs(got - exp).max()) <= 1e-3 * max(1.0, float(np.abs(exp).max())), layers
