"""Decoding real .mnn models: structure, names, parameters, describe()."""
from __future__ import annotations

import os

import numpy as np
import pytest

import mnnjit.format as F
from fmt_helpers import MODEL_NAMES, SHARED, manifest, model_path


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_op_type_counts_match_manifest(name):
    e = manifest()[name]
    net = F.read_net(model_path(name))
    assert net.op_type_counts() == e["main_graph_op_type_counts"]
    assert sorted({str(o.type) for o in net.oplists} |
                  {str(o.type) for s in net.subgraphs or [] for o in s.nodes}) == e["op_types"]
    sub = {}
    field = {"BinaryOp": "opType", "UnaryOp": "opType", "Pooling": "type",
             "Reduction": "operation"}
    for op in net.oplists:
        if op.type in field:
            key = f"{op.type}:{op.main[field[op.type]]}"
            sub[key] = sub.get(key, 0) + 1
    assert sub == e["main_graph_op_subtype_counts"]
    assert net.sourceType == "ONNX"
    assert net.version == e["versions"]["MNN"] if "versions" in e else net.version == "3.6.1"
    assert net.mnn_uuid == e["mnn_uuid"]


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_describe_matches_converter_info(name):
    assert F.describe(F.read_net(model_path(name))).split("\n") == manifest()[name]["mnn_info"]["raw"]


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_tensor_names_and_io(name):
    e = manifest()[name]
    net = F.read_net(model_path(name))
    assert net.outputName == [o["name"] for o in e["outputs"]]
    for i in e["inputs"]:
        assert i["name"] in net.tensorName
    for op in net.oplists:
        for t in (op.inputIndexes or []) + (op.outputIndexes or []):
            assert 0 <= t < len(net.tensorName)


def test_convolution_and_blob_params():
    net = F.read_net(model_path("convbn"))
    conv = next(o for o in net.oplists if o.type == "Convolution")
    assert conv.main_type == "Convolution2D"
    c = conv.main["common"]
    assert (c["kernelX"], c["kernelY"], c["outputCount"], c["inputCount"]) == (3, 3, 16, 3)
    assert c["padMode"] == "CAFFE" and c["relu"] is True and list(c["pads"]) == [1, 1, 1, 1]
    w = F.conv_weight(conv.main)
    assert w.dtype == np.float32 and w.shape == (16 * 3 * 3 * 3,)
    assert conv.main["bias"].shape == (16,)
    assert conv.main["quanParameter"] is None and conv.main["external"] is None
    const = next(o for o in net.oplists if o.type == "Const")
    assert const.main_type == "Blob"
    blob = const.main
    assert blob["dataType"] in ("DT_FLOAT", "DT_INT32")
    assert blob["dataFormat"] in ("NCHW", "NHWC", "NC4HW4")
    data = blob["float32s"] if blob["dataType"] == "DT_FLOAT" else blob["int32s"]
    assert data.size == int(np.prod(blob["dims"]))
    inp = next(o for o in net.oplists if o.type == "Input")
    assert inp.main_type == "Input" and list(inp.main["dims"]) == [1, 3, 32, 32]
    assert inp.main["dtype"] == "DT_FLOAT"


def test_control_flow_subgraphs():
    net = F.read_net(model_path("controlflow"))
    assert [s.name for s in net.subgraphs] == ["sub_graph", "sub_graph1"]
    if_op = next(o for o in net.oplists if o.type == "If")
    assert if_op.main_type == "IfParam"
    assert {if_op.main["then_graph"], if_op.main["else_graph"]} == {"sub_graph", "sub_graph1"}
    for s in net.subgraphs:
        assert s.nodes and s.tensors
        for op in s.nodes:
            for t in (op.inputIndexes or []) + (op.outputIndexes or []):
                assert 0 <= t < len(s.tensors)


def test_opmix_parameters_decode_to_enum_names():
    net = F.read_net(model_path("opmix"))
    kinds = {o.main_type for o in net.oplists}
    assert {"Interp", "ReductionParam", "UnaryOp", "StridedSliceParam", "GatherV2",
            "Permute", "PadParam"} <= kinds
    un = next(o for o in net.oplists if o.type == "UnaryOp")
    assert isinstance(un.main["opType"], str)
    red = next(o for o in net.oplists if o.type == "Reduction")
    assert red.main["operation"] in ("SUM", "MEAN", "MAXIMUM", "MINIMUM", "PROD", "ANY", "ALL",
                                     "ASUM", "SUMSQ")
    interp = next(o for o in net.oplists if o.type == "Interp")
    assert isinstance(interp.main["ctm"], str)


def test_tiny_model_and_bytes_input():
    path = os.path.join(SHARED, "tools", "tiny_model.mnn")
    with open(path, "rb") as fh:
        data = fh.read()
    a, b = F.read_net(path), F.read_net(data)
    assert a.op_type_counts() == b.op_type_counts() == {"Input": 1, "Const": 1, "BinaryOp": 1,
                                                        "ReLU": 1}


def test_unknown_enum_value_falls_back_to_number():
    net = F.read_net(model_path("mlp"))
    net.oplists[0].defaultDimentionFormat = 77
    back = F.read_net(F.net_to_bytes(net))
    assert back.oplists[0].defaultDimentionFormat == 77


def test_schema_parser_matches_generated_module():
    from mnnjit.format.schema import mnn_schema, parse_fbs_dir
    fresh = parse_fbs_dir(os.path.join(SHARED, "reference", "mnn-schema"))
    assert fresh.to_literal() == mnn_schema().to_literal()
    s = mnn_schema()
    assert s.root == "Net"
    assert s.tables["Op"].num_slots == 8
    assert len(s.unions["OpParameter"].members) == 103
    assert s.enums["OpType"].values["While"] == 600
