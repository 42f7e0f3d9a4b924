"""External weight files (converter --saveExternalData)."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import mnnjit.format as F
from fmt_helpers import MODELS, model_path, run_mnn_module

CONVBN_ONNX = os.path.join(MODELS, "convbn.onnx")


def _convs(net):
    return [o for o in net.oplists if o.main_type == "Convolution2D"]


def test_external_fp32_weights_equal_inline(convert):
    path = convert(CONVBN_ONNX, "--saveExternalData", tag="ext")
    assert os.path.exists(path + ".weight")
    raw = F.read_net(path, load_external=False)
    assert F.has_external(raw)
    assert all(o.main["weight"] is None for o in _convs(raw))
    net = F.read_net(path)
    assert not F.has_external(net)
    ref = F.read_net(model_path("convbn"))
    for a, b in zip(_convs(ref), _convs(net)):
        np.testing.assert_array_equal(a.main["weight"], b.main["weight"])
        np.testing.assert_array_equal(a.main["bias"], b.main["bias"])
    consts = {o.name: o.main for o in ref.oplists if o.type == "Const"}
    for o in net.oplists:
        if o.type == "Const":
            for key in ("float32s", "int32s"):
                if consts[o.name][key] is not None:
                    np.testing.assert_array_equal(consts[o.name][key], o.main[key])


def test_external_quantized_equals_inline_quantized(convert):
    ext = F.read_net(convert(CONVBN_ONNX, "--weightQuantBits=8", "--saveExternalData",
                             tag="q8ext"))
    inline = F.read_net(convert(CONVBN_ONNX, "--weightQuantBits=8", tag="q8"))
    for a, b in zip(_convs(inline), _convs(ext)):
        np.testing.assert_array_equal(F.conv_weight(a.main), F.conv_weight(b.main))
        np.testing.assert_array_equal(a.main["bias"], b.main["bias"])


def test_inlined_external_model_runs_in_real_mnn(convert, mnn, tmp_path):
    net = F.read_net(convert(CONVBN_ONNX, "--saveExternalData", tag="ext"))
    out = tmp_path / "inlined.mnn"
    F.write_net(net, out)
    assert not os.path.exists(str(out) + ".weight")
    assert run_mnn_module(mnn, str(out), "convbn") <= 1e-5


def test_explicit_weight_path_and_errors(convert, tmp_path):
    path = convert(CONVBN_ONNX, "--saveExternalData", tag="ext")
    moved = tmp_path / "model.mnn"
    shutil.copy(path, moved)
    with pytest.raises(FileNotFoundError, match="model.mnn.weight"):
        F.read_net(str(moved))
    net = F.read_net(str(moved), weight_path=path + ".weight")
    assert not F.has_external(net)
    with open(path, "rb") as fh:
        data = fh.read()
    with pytest.raises(F.MNNFormatError, match="weight_path"):
        F.read_net(data)
    F.read_net(data, weight_path=path + ".weight")
    short = tmp_path / "short.weight"
    with open(path + ".weight", "rb") as fh:
        short.write_bytes(fh.read()[:1000])
    with pytest.raises(F.MNNFormatError, match="outside"):
        F.read_net(str(moved), weight_path=str(short))


def test_external_offsets_out_of_range(convert, tmp_path):
    path = convert(CONVBN_ONNX, "--saveExternalData", tag="ext")
    net = F.read_net(path, load_external=False)
    conv = _convs(net)[0]
    conv.main["external"] = np.array([2 ** 40, 16, 16], np.int64)
    with pytest.raises(F.MNNFormatError, match=r"op \d+ .*outside"):
        F.load_external_data(net, path + ".weight")
    conv.main["external"] = np.array([-5, 16, 16], np.int64)
    with pytest.raises(F.MNNFormatError, match="outside"):
        F.load_external_data(net, path + ".weight")
