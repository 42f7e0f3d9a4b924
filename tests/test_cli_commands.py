"""The ``mnnjit`` command, run as ``python -m mnnjit`` in subprocesses: every subcommand's ``--help``
and a run on real inputs (``../shared/models``), including mnnconvert's ``-f MNN`` / ``-f JSON``
forms. Outputs are checked against real MNN, ONNX Runtime and real MNN's converter."""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from convert_helpers import RTOL, forward, rel_error, run_cli
from shared_paths import MODELS

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import mnnjit  # noqa: E402
from mnnjit.cli import COMMANDS  # noqa: E402
from mnnjit.format import read_net  # noqa: E402


def _shared(name: str) -> str:
    path = os.path.join(MODELS, name)
    if not os.path.exists(path):
        pytest.skip(f"{path} not found")
    return path


def _ok(r) -> str:
    assert r.returncode == 0, f"rc {r.returncode}\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-2000:]}"
    return r.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_help(command) -> None:
    out = _ok(run_cli(command, "--help"))
    assert out.startswith(f"usage: mnnjit {command}")


def test_top_level_help_and_script_entry() -> None:
    out = _ok(run_cli("--help"))
    for c in COMMANDS:
        assert c in out
    import tomllib
    with open(os.path.join(os.path.dirname(__file__), "..", "pyproject.toml"), "rb") as fh:
        scripts = tomllib.load(fh)["project"]["scripts"]
    assert scripts == {"mnnjit": "mnnjit.cli:main"}


def test_convert_shared_model_runs_in_real_mnn(tmp_path) -> None:
    mnn = pytest.importorskip("MNN")
    out = str(tmp_path / "convbn.mnn")
    text = _ok(run_cli("convert", "-f", "ONNX", "--modelFile", _shared("convbn.onnx"), "--MNNModel", out,
                       "--bizCode", "demo"))
    assert "Converted Success!" in text and "outputTensors: [ logits, ]" in text
    assert read_net(out).bizCode == "demo"
    data = np.load(_shared("convbn.npz"))
    for k in (0, 1):
        got = forward(mnn, out, {"x": data[f"in{k}_x"]}, ["logits"])[0]
        assert rel_error(got, data[f"out{k}_logits"]) <= RTOL


def test_convert_flags(tmp_path) -> None:
    """--inputConfigFile / --input, --weightQuantBits with --weightQuantBlock, --fp16, --saveExternalData,
    --optimizeLevel 0."""
    cfg = tmp_path / "inputs.txt"
    cfg.write_text("input_names = x\ninput_dims = 2x3x16x16\n")
    a = str(tmp_path / "a.mnn")
    _ok(run_cli("convert", "--modelFile", _shared("dynamic.onnx"), "--MNNModel", a, "--inputConfigFile", str(cfg),
                "--weightQuantBits", "4", "--weightQuantBlock", "32", "--saveExternalData"))
    net = read_net(a)
    assert [op.main["dims"].tolist() for op in net.oplists if op.type == "Input"] == [[2, 3, 16, 16]]
    assert os.path.exists(a + ".weight")
    quants = [op.main["quanParameter"] for op in net.oplists if op.type == "Convolution"]
    assert quants and all(q["aMaxOrBits"] == 4 for q in quants)
    b = str(tmp_path / "b.mnn")
    _ok(run_cli("convert", "--modelFile", _shared("dynamic.onnx"), "--MNNModel", b, "--input", "x:1x3x8x8",
                "--fp16", "--optimizeLevel", "0"))
    net = read_net(b)
    assert [op.main["dims"].tolist() for op in net.oplists if op.type == "Input"] == [[1, 3, 8, 8]]
    assert all(op.main["quanParameter"]["type"] == 3 for op in net.oplists if op.type == "Convolution")
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    ref = forward(mnnjit, _shared("dynamic.mnn"), {"x": x}, ["logits"])[0]
    assert rel_error(forward(mnnjit, b, {"x": x}, ["logits"])[0], ref) <= 1e-2  # fp16 weights


def test_convert_unsupported_writes_nothing(tmp_path) -> None:
    from onnx import helper as h

    from convert_helpers import model, vi
    m = model([h.make_node("Relu", ["x"], ["a"]), h.make_node("Hardmax", ["a"], ["y"], name="the_hardmax")],
              [vi("x", [2, 3])], [vi("y", [2, 3])])
    src, dest = str(tmp_path / "u.onnx"), str(tmp_path / "u.mnn")
    import onnx
    onnx.save(m, src)
    r = run_cli("convert", "--modelFile", src, "--MNNModel", dest)
    assert r.returncode == 2
    assert "Hardmax" in r.stderr and "the_hardmax" in r.stderr and "nothing was written" in r.stderr
    assert not os.path.exists(dest)


def test_convert_mnnconvert_forms(tmp_path) -> None:
    """-f MNN --info, -f MNN --JsonFile, -f JSON, -f MNN with --weightQuantBits, --OP."""
    src = _shared("mlp.mnn")
    info = _ok(run_cli("convert", "-f", "MNN", "--modelFile", src, "--info"))
    entry = json.load(open(_shared("MANIFEST.json")))["entries"]["mlp"]
    assert info.splitlines()[:len(entry["mnn_info"]["raw"])] == entry["mnn_info"]["raw"]
    js = str(tmp_path / "mlp.json")
    _ok(run_cli("convert", "-f", "MNN", "--modelFile", src, "--JsonFile", js))
    back = str(tmp_path / "back.mnn")
    _ok(run_cli("convert", "-f", "JSON", "--modelFile", js, "--MNNModel", back))
    with open(src, "rb") as a, open(back, "rb") as b:
        assert _net_json(read_net(a.read())) == _net_json(read_net(b.read()))
    q = str(tmp_path / "q.mnn")
    _ok(run_cli("convert", "-f", "MNN", "--modelFile", src, "--MNNModel", q, "--weightQuantBits", "8"))
    assert all(op.main.get("quanParameter") is not None for op in read_net(q).oplists if op.type == "Convolution")
    ops = _ok(run_cli("convert", "--OP")).split()
    assert {"Conv", "LSTM", "Loop", "If", "Resize", "MatMul"} <= set(ops)


def _net_json(net) -> str:
    from mnnjit.cli.json_cmd import net_to_json_text
    return net_to_json_text(net)


def test_info_text_and_json(tmp_path) -> None:
    path = _shared("mobilenetv2_wq8.mnn")
    text = _ok(run_cli("info", path))
    assert "Model Version: 3.6.1" in text and "bizCode: corpus" in text
    assert "ConvolutionDepthwise 17" in text and "int8 asymmetric x53" in text
    data = json.loads(_ok(run_cli("info", path, "--json")))
    entry = json.load(open(_shared("MANIFEST.json")))["entries"]["mobilenetv2_wq8"]
    assert data["op_counts"] == entry["main_graph_op_type_counts"]
    assert data["inputs"] == [entry["mnn_info"]["inputs"][0]] and data["outputs"] == ["logits"]
    assert data["external"] is None
    # external data layout
    ext = str(tmp_path / "e.mnn")
    _ok(run_cli("convert", "--modelFile", _shared("convbn.onnx"), "--MNNModel", ext, "--saveExternalData"))
    e = json.loads(_ok(run_cli("info", ext, "--json")))["external"]
    assert e["exists"] and e["file_bytes"] == e["bytes_used"] == os.path.getsize(ext + ".weight")
    assert {r["type"] for r in e["entries"]} == {"Convolution"}


def test_json_lossless_both_ways(tmp_path) -> None:
    src = str(tmp_path / "q.mnn")  # quantized tables, subgraph-free CNN; then a model with subgraphs
    _ok(run_cli("convert", "--modelFile", _shared("convbn.onnx"), "--MNNModel", src, "--weightQuantBits", "5"))
    js, back, js2 = (str(tmp_path / n) for n in ("m.json", "m.mnn", "m2.json"))
    _ok(run_cli("json", src, js))
    _ok(run_cli("json", js, back))
    _ok(run_cli("json", back, js2))
    assert open(js).read() == open(js2).read()
    a, b = read_net(src), read_net(back)
    assert _net_json(a) == _net_json(b)
    _ok(run_cli("json", _shared("controlflow.mnn"), js))
    _ok(run_cli("json", js, back))
    assert _net_json(read_net(_shared("controlflow.mnn"))) == _net_json(read_net(back))
    # MNN2JSON's own file (6 decimals) loads too
    out = str(tmp_path / "from_mnn_json.mnn")
    _ok(run_cli("json", _shared("mlp.json"), out))
    data = np.load(_shared("mlp.npz"))
    got = forward(mnnjit, out, {"x": data["in0_x"]}, ["prob"])[0]
    assert rel_error(got, data["out0_prob"]) <= 1e-4


def test_quantize_equals_real_converters_output(tmp_path) -> None:
    """mnnjit quantize on the fp32 MobileNetV2 gives real MNN's --weightQuantBits 8 tables, bit for bit."""
    out = str(tmp_path / "q8.mnn")
    text = _ok(run_cli("quantize", _shared("mobilenetv2.mnn"), out, "--weightQuantBits", "8"))
    assert "53 convolution weight tensors" in text
    mine = [op for op in read_net(out).oplists if op.main_type == "Convolution2D"]
    ref = [op for op in read_net(_shared("mobilenetv2_wq8.mnn")).oplists if op.main_type == "Convolution2D"]
    assert len(mine) == len(ref) == 53
    for a, b in zip(mine, ref):
        qa, qb = a.main["quanParameter"], b.main["quanParameter"]
        assert np.array_equal(qa["buffer"], qb["buffer"]) and np.array_equal(qa["alpha"], qb["alpha"])
        assert (qa["aMin"], qa["readType"], qa["aMaxOrBits"]) == (qb["aMin"], qb["readType"], qb["aMaxOrBits"])


def test_compare_ok_and_per_layer_divergence(tmp_path) -> None:
    out = _ok(run_cli("compare", _shared("convbn.onnx"), "--per-layer"))
    assert "TEST_SUCCESS" in out and "logits" in out
    # a converted file with one convolution weight changed: its layer is the first to diverge
    from mnnjit.converter import convert_onnx, save_mnn
    net = convert_onnx(_shared("opmix.onnx"))
    path = str(tmp_path / "broken.mnn")
    save_mnn(net, path)
    data = json.loads(_ok(run_cli("compare", path, "--onnx", _shared("opmix.onnx"), "--per-layer", "--json")))
    assert data["ok"] and data["first_divergent_layer"] is None and data["layers_compared"] > 10
    target = next(op for op in net.oplists if op.type == "UnaryOp" and op.main["opType"] == "TANH")
    target.main["opType"] = "SIGMOID"
    save_mnn(net, path)
    r = run_cli("compare", path, "--onnx", _shared("opmix.onnx"), "--per-layer", "--json")
    assert r.returncode == 1
    first = json.loads(r.stdout)["first_divergent_layer"]
    assert first["tensor"] == target.name and first["op_type"] == "Tanh"


def test_compare_with_real_mnn() -> None:
    pytest.importorskip("MNN")
    out = _ok(run_cli("compare", _shared("mobilenetv2_wq8.mnn"), "--reference", "mnn", "--tolerance", "1e-3"))
    assert "mnnjit vs mnn" in out and "TEST_SUCCESS" in out


def test_bench_cold_and_warm(tmp_path) -> None:
    import importlib.util
    extra = ["--mnn"] if importlib.util.find_spec("MNN") else []  # real MNN's banner must not reach stdout
    r = run_cli("bench", _shared("mlp.mnn"), "--runs", "5", "--warmup", "1", "--json", *extra, timeout=600)
    data = json.loads(_ok(r))
    (row,) = data["results"]
    w, c = row["warm"], row["cold"]
    assert w["runs"] == 5 and 0 < w["min_ms"] <= w["p50_ms"] <= w["p90_ms"] <= w["p99_ms"] <= w["max_ms"]
    assert "error" not in c and 0 < c["first_forward_s"] and c["time_to_first_result_s"] >= c["load_s"]
    text = _ok(run_cli("bench", _shared("mlp.mnn"), "--runs", "3", "--no-cold", "--threads", "1", "2"))
    assert text.count("warm: mean") == 2


def test_warmup_fills_the_cache(tmp_path) -> None:
    cache = tmp_path / "cache"
    out = _ok(run_cli("warmup", _shared("convbn.mnn"), env={"MNNJIT_CACHE_DIR": str(cache)}))
    assert out.count("warmed up") == 1 and str(cache) in out
    assert cache.is_dir() and any(cache.iterdir())


def test_devices(capsys) -> None:
    data = json.loads(_ok(run_cli("devices", "--json")))
    assert data["cpu"]["cores"] >= 1 and data["cpu"]["name"]
    if data["npu"]["onnxruntime"] is not None:
        assert "CPUExecutionProvider" in data["npu"]["onnxruntime"]["providers"]
    from mnnjit.cli import main
    assert main(["devices"]) == 0  # the text form, in this process
    out = capsys.readouterr().out
    assert out.startswith(f"CPU: {data['cpu']['name']}, {data['cpu']['cores']} cores") and "ONNX Runtime" in out


_NO_NET = """
import socket, subprocess, sys
def blocked(*a, **k):
    sys.stderr.write("NETWORK ATTEMPT\\n")
    raise OSError("network access blocked by the test")
socket.socket.connect = blocked
socket.socket.connect_ex = blocked
socket.create_connection = blocked
socket.getaddrinfo = blocked
subprocess.Popen.__init__ = blocked
from mnnjit.cli import main
rc = main(sys.argv[1:])
sys.exit(rc)
"""


def test_convert_and_info_without_network(tmp_path) -> None:
    import subprocess
    out = str(tmp_path / "m.mnn")
    for args in (["convert", "-f", "ONNX", "--modelFile", _shared("opmix.onnx"), "--MNNModel", out,
                  "--weightQuantBits", "8"], ["info", out, "--json"]):
        r = subprocess.run([sys.executable, "-c", _NO_NET, *args], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "NETWORK ATTEMPT" not in r.stderr
    assert os.path.exists(out)


def test_bad_files_are_clear_errors(tmp_path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage" * 10)
    r = run_cli("convert", "--modelFile", str(bad), "--MNNModel", str(tmp_path / "o.mnn"))
    assert r.returncode == 2 and "not a valid ONNX model" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("info", str(tmp_path / "missing.mnn"))
    assert r.returncode == 2 and "missing.mnn" in r.stderr
    (tmp_path / "bad.mnn").write_bytes(b"\x00" * 64)
    r = run_cli("info", str(tmp_path / "bad.mnn"))
    assert r.returncode == 2 and "not a valid MNN model" in r.stderr
    r = run_cli("compare", _shared("dynamic.mnn"), "--onnx", _shared("dynamic.onnx"))
    assert r.returncode == 2 and "--input x:DIMS" in r.stderr


def test_compare_with_given_data(tmp_path) -> None:
    data = np.load(_shared("dynamic.npz"))
    np.save(tmp_path / "x.npy", data["in1_x"])
    out = json.loads(_ok(run_cli("compare", _shared("dynamic.mnn"), "--onnx", _shared("dynamic.onnx"),
                                 "--data", f"x={tmp_path / 'x.npy'}", "--json")))
    assert out["ok"] and out["outputs"]["feat"]["shape"] == list(data["out1_feat"].shape)
