"""Whole models through ``mnnjit.converter``: the ONNX files of ``../shared/models``, a transformer block
with dynamic batch and sequence axes, LSTM / GRU / RNN, If and Loop, dynamic spatial axes. Each
converted file runs in real MNN and in mnnjit and must give ONNX Runtime's outputs within 1e-4
relative. Weight compression is checked bit for bit against real MNN's own converter."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from convert_helpers import (RTOL, GraphMaker, check_three_way, forward, model, ort_run, recurrent_model,
                             rel_error, transformer_block, vi)
from shared_paths import CONVERTER, MODELS

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
MNN = pytest.importorskip("MNN")
from onnx import TensorProto as TP  # noqa: E402

import mnnjit  # noqa: E402
from mnnjit.converter import ConvertOptions, UnsupportedOnnxError, convert_onnx, save_mnn  # noqa: E402


def _manifest() -> dict:
    path = os.path.join(MODELS, "MANIFEST.json")
    if not os.path.exists(path):
        pytest.skip(f"{path} not found")
    with open(path) as fh:
        return json.load(fh)["entries"]


def _shared_onnx() -> list:
    path = os.path.join(MODELS, "MANIFEST.json")
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        entries = json.load(fh)["entries"]
    return sorted(k for k, e in entries.items() if e.get("onnx_file") and not e.get("converter_flags"))


@pytest.mark.parametrize("name", _shared_onnx())
def test_shared_onnx_models(name, tmp_path) -> None:
    """Every case of every shared ONNX model, with the manifest's inputs."""
    entry = _manifest()[name]
    m = onnx.load(os.path.join(MODELS, entry["onnx_file"]))
    data = np.load(os.path.join(MODELS, entry["files"]["npz"]))
    for case in entry["cases"]:
        feeds = {n: data[spec["key"]] for n, spec in case["inputs"].items()}
        check_three_way(m, feeds, tmp_path, f"{name}_{case['index']}")


def test_transformer_block_dynamic_axes(tmp_path) -> None:
    m = transformer_block()
    rng = np.random.default_rng(3)
    for shape in ((1, 7, 32), (3, 5, 32)):
        check_three_way(m, {"x": rng.standard_normal(shape).astype(np.float32)}, tmp_path, f"tf{shape[0]}")


@pytest.mark.parametrize("kind,bidir,attrs", [("LSTM", True, {}), ("LSTM", False, {}), ("GRU", True, {}),
                                              ("GRU", False, {"linear_before_reset": 1}), ("RNN", True, {})])
def test_recurrent(kind, bidir, attrs, tmp_path) -> None:
    m = recurrent_model(kind, bidir, **attrs)
    rng = np.random.default_rng(4)
    ndir = 2 if bidir else 1
    for t, n in ((4, 2), (6, 1)):
        feeds = {"x": rng.standard_normal((t, n, 5)).astype(np.float32),
                 "h0": rng.standard_normal((ndir, n, 6)).astype(np.float32)}
        if kind == "LSTM":
            feeds["c0"] = rng.standard_normal((ndir, n, 6)).astype(np.float32)
        check_three_way(m, feeds, tmp_path, f"{kind}{t}")


def test_lstm_without_initial_state(tmp_path) -> None:
    m = recurrent_model("LSTM", False, initial=False)
    x = np.random.default_rng(5).standard_normal((3, 2, 5)).astype(np.float32)
    check_three_way(m, {"x": x}, tmp_path, "lstm0")


def _if_model():
    """y = x * w if sum(x) > 0 else x + b  (both branches read outer values)."""
    from onnx import helper as h
    g = GraphMaker(6)
    w, b = g.weight(4), g.weight(4)
    then = h.make_graph([h.make_node("Mul", ["x", w], ["t_out"])], "then", [], [vi("t_out", [2, 4])])
    other = h.make_graph([h.make_node("Add", ["x", b], ["e_out"]), h.make_node("Neg", ["e_out"], ["e2"])], "else", [],
                         [vi("e2", [2, 4])])
    cond = g.op("Greater", [g.op("ReduceSum", ["x"], keepdims=0), g.const(np.float32(0))])
    g.op("If", [cond], out="y", then_branch=then, else_branch=other)
    return g.model([vi("x", [2, 4])], [vi("y", [2, 4])])


def test_if_both_branches(tmp_path) -> None:
    m = _if_model()
    x = np.random.default_rng(7).standard_normal((2, 4)).astype(np.float32)
    check_three_way(m, {"x": np.abs(x)}, tmp_path, "if_then")
    check_three_way(m, {"x": -np.abs(x)}, tmp_path, "if_else")


def _loop_model():
    """acc <- acc * 0.5 + x * i, M times (M an input), scanning acc * 2."""
    from onnx import helper as h
    g = GraphMaker(8)
    body = h.make_graph(
        [h.make_node("Cast", ["i"], ["fi"], to=TP.FLOAT), h.make_node("Mul", ["x", "fi"], ["xi"]),
         h.make_node("Mul", ["acc", "half"], ["ah"]), h.make_node("Add", ["ah", "xi"], ["acc_out"]),
         h.make_node("Identity", ["cond"], ["cond_out"]), h.make_node("Mul", ["acc_out", "two"], ["scan"])],
        "body", [vi("i", [], TP.INT64), vi("cond", [], TP.BOOL), vi("acc", [3])],
        [vi("cond_out", [], TP.BOOL), vi("acc_out", [3]), vi("scan", [3])],
        [onnx.numpy_helper.from_array(np.float32(0.5), "half"), onnx.numpy_helper.from_array(np.float32(2), "two")])
    g.nodes.append(h.make_node("Loop", ["M", g.const(np.array(True)), g.const(np.zeros(3, np.float32))],
                               ["acc_final", "scans"], body=body))
    return g.model([vi("x", [3]), vi("M", [], TP.INT64)], [vi("acc_final", [3]), vi("scans", None, 0)])


def test_loop_with_trip_count_input_and_scan(tmp_path) -> None:
    m = _loop_model()
    x = np.random.default_rng(9).standard_normal(3).astype(np.float32)
    for trips in (1, 4):
        check_three_way(m, {"x": x, "M": np.array(trips, np.int64)}, tmp_path, f"loop{trips}")


def test_dynamic_spatial_axes_two_shapes(tmp_path) -> None:
    """A conv / pool / global-pool / Gemm net with N, H, W dynamic, run at two input shapes."""
    g = GraphMaker(10)
    y = g.op("Relu", [g.op("Conv", ["x", g.weight(8, 3, 3, 3), g.weight(8)], pads=[1, 1, 1, 1])])
    y = g.op("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
    y = g.op("Flatten", [g.op("GlobalAveragePool", [y])], axis=1)
    g.op("Gemm", [y, g.weight(4, 8), g.weight(4)], out="logits", transB=1)
    m = g.model([vi("x", ["N", 3, "H", "W"])], [vi("logits", ["N", 4])])
    rng = np.random.default_rng(11)
    path = None
    for shape in ((1, 3, 8, 10), (2, 3, 12, 6)):
        path = check_three_way(m, {"x": rng.standard_normal(shape).astype(np.float32)}, tmp_path, "dyn")
    info = mnnjit.format.read_net(path)
    dims = [op.main["dims"].tolist() for op in info.oplists if op.type == "Input"]
    assert dims == [[-1, 3, -1, -1]]


def test_input_shapes_fix_dynamic_axes(tmp_path) -> None:
    """--input shapes: the Input op gets them, and shape arithmetic on them folds away."""
    net = convert_onnx(transformer_block(), ConvertOptions(input_shapes={"x": [2, 5, 32]}))
    (inp,) = [op for op in net.oplists if op.type == "Input"]
    assert inp.main["dims"].tolist() == [2, 5, 32]
    assert not [op for op in net.oplists if op.type == "Shape"]


def _oracle_convert(src: str, dest: str, *flags: str) -> str:
    import subprocess
    import sys
    r = subprocess.run([sys.executable, CONVERTER, "-f", "ONNX", "--modelFile", src, "--MNNModel", dest,
                        "--bizCode", "t", *flags], capture_output=True, text=True, timeout=120)
    if "Converted Success" not in r.stdout:
        pytest.skip(f"real MNN's converter failed: {r.stdout[-300:]}")
    return dest


def _small_cnn() -> object:
    g = GraphMaker(12)
    y = g.op("Relu", [g.op("Conv", ["x", g.weight(16, 64, 3, 3), g.weight(16)], pads=[1, 1, 1, 1])])
    y = g.op("Conv", [y, g.weight(16, 1, 3, 3), g.weight(16)], group=16, pads=[1, 1, 1, 1])
    y = g.op("Reshape", [y, g.const(np.array([1, -1], np.int64))])
    g.op("MatMul", [y, g.weight(16 * 16, 10)], out="z")
    return g.model([vi("x", [1, 64, 4, 4])], [vi("z", [1, 10])])


@pytest.mark.parametrize("flags,opts", [
    (("--weightQuantBits", "8"), {"weight_quant_bits": 8}),
    (("--weightQuantBits", "4", "--weightQuantBlock", "32"), {"weight_quant_bits": 4, "weight_quant_block": 32}),
    (("--weightQuantBits", "3", "--weightQuantAsymmetric=0"), {"weight_quant_bits": 3,
                                                                "weight_quant_asymmetric": False}),
    (("--fp16",), {"fp16": True}),
])
def test_compressed_weights_equal_real_converters(flags, opts, tmp_path) -> None:
    """Weight quantization / fp16 write the same tables as real MNN's converter, bit for bit, so the
    converted model's error is the one real MNN's converter gives."""
    from mnnjit.converter.quantize import conv_ops
    m = _small_cnn()
    src = str(tmp_path / "cnn.onnx")
    onnx.save(m, src)
    ref = mnnjit.format.read_net(_oracle_convert(src, str(tmp_path / "oracle.mnn"), *flags))
    mine = convert_onnx(m, ConvertOptions(**opts))
    pairs = list(zip(conv_ops(mine), conv_ops(ref)))
    assert len(pairs) == len(list(conv_ops(ref))) == 3
    for a, b in pairs:
        qa, qb = a.main["quanParameter"], b.main["quanParameter"]
        for key in ("type", "aMaxOrBits", "aMin", "readType", "quantScale"):
            assert (qa.get(key) or 0) == (qb.get(key) or 0), key
        assert np.array_equal(qa["buffer"], qb["buffer"])
        if qb.get("alpha") is not None:
            assert np.array_equal(qa["alpha"], qb["alpha"])
    path = str(tmp_path / "mine.mnn")
    save_mnn(mine, path)
    x = np.random.default_rng(13).standard_normal((1, 64, 4, 4)).astype(np.float32)
    exact = ort_run(m, {"x": x}, ["z"])[0]
    got_mine = forward(MNN, path, {"x": x}, ["z"])[0]
    got_ref = forward(MNN, str(tmp_path / "oracle.mnn"), {"x": x}, ["z"])[0]
    assert rel_error(got_mine, exact) <= rel_error(got_ref, exact) * 1.01 + 1e-6
    assert rel_error(forward(mnnjit, path, {"x": x}, ["z"])[0], got_mine) <= RTOL


def test_external_data(tmp_path) -> None:
    m = _small_cnn()
    path = str(tmp_path / "ext.mnn")
    files = save_mnn(convert_onnx(m), path, external=True)
    assert files == [path, path + ".weight"]
    assert os.path.getsize(path + ".weight") > 4 * (16 * 64 * 9)
    assert os.path.getsize(path) < 4096
    x = np.random.default_rng(14).standard_normal((1, 64, 4, 4)).astype(np.float32)
    exact = ort_run(m, {"x": x}, ["z"])[0]
    for rt in (MNN, mnnjit):
        assert rel_error(forward(rt, path, {"x": x}, ["z"])[0], exact) <= RTOL


def test_unsupported_ops_are_listed_by_name() -> None:
    from onnx import helper as h
    nodes = [h.make_node("Relu", ["x"], ["a"]), h.make_node("Hardmax", ["a"], ["b"], name="hm1"),
             h.make_node("Hardmax", ["b"], ["c"], name="hm2"),
             h.make_node("MyOp", ["c"], ["d"], name="custom", domain="com.example"),
             h.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2, 2], name="pool3d")]
    g = h.make_graph(nodes, "g", [vi("x", [1, 2, 4, 4, 4])], [vi("d", None), vi("p", None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.example", 1)])
    with pytest.raises(UnsupportedOnnxError) as exc:
        convert_onnx(m)
    text = str(exc.value)
    assert "Hardmax" in text and "hm1" in text and "hm2" in text and "custom" in text
    assert {n[1] for n in exc.value.nodes} == {"hm1", "hm2", "custom"}
    nodes = nodes[:1] + nodes[4:]
    m2 = model(nodes, [vi("x", [1, 2, 4, 4, 4])], [vi("p", None, 0)])
    with pytest.raises(UnsupportedOnnxError, match="pool3d"):
        convert_onnx(m2)


def test_residual_block_stays_in_nc4hw4(tmp_path) -> None:
    """conv-relu-conv + skip, then ReLU: one layout conversion in and one out, the ReLUs folded into the
    first convolution and into the residual add (the structure real MNN's converter writes)."""
    g = GraphMaker(15)
    a = g.op("Relu", [g.op("Conv", ["x", g.weight(4, 4, 3, 3), g.weight(4)], pads=[1, 1, 1, 1])])
    b = g.op("Conv", [a, g.weight(4, 4, 3, 3), g.weight(4)], pads=[1, 1, 1, 1])
    s = g.op("Conv", ["x", g.weight(4, 4, 1, 1), g.weight(4)])
    g.op("Relu", [g.op("Add", [b, s])], out="y")
    m = g.model([vi("x", [1, 4, 6, 6])], [vi("y", [1, 4, 6, 6])])
    x = np.random.default_rng(16).standard_normal((1, 4, 6, 6)).astype(np.float32)
    net = mnnjit.format.read_net(check_three_way(m, {"x": x}, tmp_path, "res"))
    counts = net.op_type_counts()
    assert counts.get("ConvertTensor") == 2 and "ReLU" not in counts
    (add,) = [op for op in net.oplists if op.type == "BinaryOp"]
    assert add.main["activationType"] == 1
