"""write_net round trips: our reader, and real MNN running the rewritten files."""
from __future__ import annotations

import numpy as np
import pytest

import mnnjit.format as F
from fmt_helpers import MODEL_NAMES, model_path, run_mnn_module


def assert_same(a, b, path="net"):
    """Deep structural equality of decoded values."""
    if hasattr(a, "to_dict"):
        a, b = a.to_dict(), b.to_dict()
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for k in a:
            assert_same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, path
        np.testing.assert_array_equal(a, b, err_msg=path)
    else:
        assert a == b or (a != a and b != b), (path, a, b)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_rewrite_reads_back_identically(name):
    net = F.read_net(model_path(name))
    assert_same(net, F.read_net(F.net_to_bytes(net)))


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_rewritten_model_runs_in_real_mnn(name, mnn, tmp_path):
    out = tmp_path / f"{name}.mnn"
    F.write_net(F.read_net(model_path(name)), out)
    assert run_mnn_module(mnn, str(out), name) <= 1e-5


def test_expr_save_graph_round_trip(mnn, tmp_path):
    expr = mnn.expr
    x = expr.placeholder([2, 3], expr.NCHW)
    x.name = "x"
    c = expr.const(np.arange(6, dtype=np.float32).reshape(2, 3), [2, 3], expr.NCHW)
    y = expr.relu(x * c + 1.5)
    y.name = "y"
    z = expr.reduce_sum(expr.exp(y * 0.1), [1])
    z.name = "z"
    src = tmp_path / "saved.mnn"
    expr.save([y, z], str(src))
    net = F.read_net(str(src))
    assert "y" in net.tensorName and "z" in net.tensorName
    dst = tmp_path / "rewritten.mnn"
    F.write_net(net, dst)
    assert_same(net, F.read_net(str(dst)))

    def run(path):
        m = mnn.nn.load_module_from_file(str(path), ["x"], ["y", "z"])
        data = np.array([[1, -2, 3], [-4, 5, -6]], dtype=np.float32)
        ys = m.forward([expr.const(data, [2, 3], expr.NCHW)])
        return [np.array(v.read()) for v in ys]

    for a, b in zip(run(src), run(dst)):
        np.testing.assert_array_equal(a, b)
    assert len(expr.load_as_list(str(dst))) == len(expr.load_as_list(str(src)))


def test_modified_net_is_written(mnn, tmp_path):
    """Editing a constant in the decoded tree changes what real MNN computes."""
    net = F.read_net(model_path("mlp"))
    convs = [o for o in net.oplists if o.type == "Convolution"]
    bias = convs[-1].main["bias"]
    convs[-1].main["bias"] = bias + np.arange(bias.size, dtype=np.float32)
    out = tmp_path / "edited.mnn"
    F.write_net(net, out)
    assert run_mnn_module(mnn, str(out), "mlp") > 1e-3  # softmax output changed


def test_writer_rejects_bad_values():
    net = F.read_net(model_path("mlp"))
    net.oplists[0].type = "NoSuchOp"
    with pytest.raises(F.MNNFormatError, match="NoSuchOp"):
        F.net_to_bytes(net)
    net = F.read_net(model_path("mlp"))
    net.oplists[1].main["bogus"] = 1
    with pytest.raises(F.MNNFormatError, match="bogus"):
        F.net_to_bytes(net)
    net = F.read_net(model_path("mlp"))
    net.oplists[1].main_type = "NotAParam"
    with pytest.raises(F.MNNFormatError, match="NotAParam"):
        F.net_to_bytes(net)
    net = F.read_net(model_path("mlp"))
    net.oplists[0].inputIndexes = [2 ** 40]
    with pytest.raises(F.MNNFormatError, match="fit"):
        F.net_to_bytes(net)


def test_build_net_from_scratch(mnn, tmp_path):
    """A hand-made Net (Input -> ReLU) is a valid model for real MNN."""
    net = F.Net(
        oplists=[
            F.Op(type="Input", name="x", outputIndexes=[0], main_type="Input",
                 main={"dims": np.array([1, 4], np.int32), "dtype": "DT_FLOAT",
                       "dformat": "NCHW"}, defaultDimentionFormat="NCHW"),
            F.Op(type="ReLU", name="y", inputIndexes=[0], outputIndexes=[1], main_type="Relu",
                 main={"slope": 0.0}, defaultDimentionFormat="NCHW"),
        ],
        tensorName=["x", "y"], outputName=["y"], sourceType="ONNX", bizCode="test")
    path = tmp_path / "scratch.mnn"
    F.write_net(net, path)
    m = mnn.nn.load_module_from_file(str(path), ["x"], ["y"])
    x = mnn.expr.const(np.array([[-1, 2, -3, 4]], np.float32), [1, 4], mnn.expr.NCHW)
    np.testing.assert_array_equal(np.array(m.forward([x])[0].read()).reshape(-1), [0, 2, 0, 4])
