"""MNN's ``RNN`` op (what real MNN's converter makes of an ONNX RNN): ONNX models built with the onnx
helper API, converted by real MNN's converter, run by mnnjit and compared with real MNN (the oracle)
and, where real MNN agrees with it, ONNX Runtime.

Real MNN's op keeps neither ONNX's activation, its sequence lengths nor a "reverse" direction: a Relu
RNN computes tanh, every sequence runs all T steps and "reverse" runs forward. Those cases are checked
against real MNN and against ONNX Runtime on the model real MNN effectively computes.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import mnnjit as MNN
from mnnjit_models_fixtures import convert, real_mnn_forward

pytest.importorskip("onnx")
pytest.importorskip("MNN")


def close(got: np.ndarray, expected: np.ndarray) -> bool:
    """The models' tolerance: 1e-3 * max(1, max|expected|)."""
    return got.shape == expected.shape and \
        float(np.abs(got - expected).max()) <= 1e-3 * max(1.0, float(np.abs(expected).max()))


def rnn_onnx(path: str, *, inp: int = 5, hidden: int = 7, layers: int = 1, direction: str = "forward",
             act: str = "Tanh", h0: str = "none", bias: bool = True, seq_lens: bool = False, batch: int = 3,
             seed: int = 0) -> list[str]:
    """An ONNX model of ``layers`` chained RNN nodes over input x [T, batch, inp] (T symbolic); each layer's
    y [T, D, B, H] is re-laid as [T, B, D*H] for the next. ``h0``: "none", "input" (model inputs h0_<l>)
    or "const". Returns the output names: the last layer's sequence, then each layer's y_h."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    d = 2 if direction == "bidirectional" else 1
    vi = helper.make_tensor_value_info
    nodes, inits = [], []
    inputs = [vi("x", TensorProto.FLOAT, ["T", batch, inp])]
    outputs = []

    def init(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(arr, name))
        return name

    cur, cin = "x", inp
    for k in range(layers):
        # gains below 1: rounding differences fade over the steps instead of growing (no chaos)
        ins = [cur, init(f"W{k}", (rng.standard_normal((d, hidden, cin)) / np.sqrt(cin)).astype(np.float32)),
               init(f"R{k}", (rng.standard_normal((d, hidden, hidden)) * 0.8 / np.sqrt(hidden)).astype(np.float32)),
               init(f"B{k}", (rng.standard_normal((d, 2 * hidden)) * 0.3).astype(np.float32)) if bias else "",
               "sl" if seq_lens else ""]
        if h0 == "input":
            inputs.append(vi(f"h0_{k}", TensorProto.FLOAT, [d, batch, hidden]))
            ins.append(f"h0_{k}")
        elif h0 == "const":
            ins.append(init(f"h0_{k}", rng.standard_normal((d, batch, hidden)).astype(np.float32)))
        while ins[-1] == "":
            ins.pop()
        attrs = {"hidden_size": hidden, "activations": [act] * d}
        if direction != "forward":
            attrs["direction"] = direction
        nodes.append(helper.make_node("RNN", ins, [f"Y{k}", f"Yh{k}"], **attrs))
        nodes.append(helper.make_node("Transpose", [f"Y{k}"], [f"Yt{k}"], perm=[0, 2, 1, 3]))
        nodes.append(helper.make_node("Reshape", [f"Yt{k}", init(f"shape{k}", np.array([0, 0, -1], np.int64))],
                                      [f"seq{k}"]))
        outputs.append(vi(f"Yh{k}", TensorProto.FLOAT, [d, batch, hidden]))
        cur, cin = f"seq{k}", d * hidden
    outputs.insert(0, vi(cur, TensorProto.FLOAT, ["T", batch, d * hidden]))
    if seq_lens:
        inputs.append(vi("sl", TensorProto.INT32, [batch]))
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return [o.name for o in outputs]


def _feeds(path: str, t: int, seed: int = 1) -> dict[str, np.ndarray]:
    """Random float inputs for the model's x (with T = t) and h0_* inputs."""
    import onnx
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in onnx.load(path).graph.input:
        if i.name == "sl":
            continue
        dims = [d.dim_value or t for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def _ort(path: str, feeds: dict, outs: list[str]) -> list[np.ndarray]:
    import onnxruntime as ort
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(outs, feeds)


def _mnnjit(mnn_path: str, feeds: dict, outs: list[str], module=None) -> list[np.ndarray]:
    m = module or MNN.nn.load_module_from_file(mnn_path, list(feeds), outs)
    xs = [MNN.expr.const(a, list(a.shape), MNN.expr.NCHW, MNN.expr.int if a.dtype.kind == "i" else MNN.expr.float)
          for a in feeds.values()]
    return [np.asarray(v.read()) for v in m.forward(xs)]


def _check(got: list, expected: list, outs: list[str], what: str) -> None:
    for name, g, e in zip(outs, got, expected):
        e = np.asarray(e).reshape(np.shape(g)) if np.size(e) == np.size(g) else e
        assert close(g, e), (what, name, np.shape(g), np.shape(e),
                             float(np.abs(g - e).max()) if np.shape(g) == np.shape(e) else None)


@pytest.mark.parametrize("case, kw", [
    ("fwd", {}),
    ("fwd_h0_input", {"h0": "input"}),
    ("fwd_no_bias", {"bias": False, "h0": "input"}),
    ("bi_h0_input", {"direction": "bidirectional", "h0": "input"}),
    ("bi_2layer_h0_const", {"direction": "bidirectional", "layers": 2, "h0": "const"}),
    ("fwd_2layer_batch1", {"layers": 2, "batch": 1, "h0": "input", "hidden": 4}),
    ("bi_batch9", {"direction": "bidirectional", "batch": 9, "hidden": 4, "h0": "input"}),
])
def test_rnn_tanh_matches_real_mnn_and_onnxruntime(tmp_path, case, kw) -> None:
    onnx_path, mnn_path = str(tmp_path / f"{case}.onnx"), str(tmp_path / f"{case}.mnn")
    outs = rnn_onnx(onnx_path, **kw)
    convert(onnx_path, mnn_path)
    module = None
    for t in (4, 1, 6):  # the sequence length is dynamic: one module, several lengths
        feeds = _feeds(onnx_path, t, seed=t)
        got = _mnnjit(mnn_path, feeds, outs, module)
        module = module or MNN.nn.load_module_from_file(mnn_path, list(feeds), outs)
        _check(got, real_mnn_forward(mnn_path, feeds, outs), outs, f"{case} T={t} vs real MNN")
        _check(got, _ort(onnx_path, feeds, outs), outs, f"{case} T={t} vs ONNX Runtime")


def test_relu_rnn_computes_tanh_like_real_mnn(tmp_path) -> None:
    """MNN's converter drops ONNX's activations: real MNN runs a Relu RNN with tanh, and so does mnnjit."""
    relu, tanh = str(tmp_path / "relu.onnx"), str(tmp_path / "tanh.onnx")
    outs = rnn_onnx(relu, act="Relu", layers=2, h0="input")
    rnn_onnx(tanh, act="Tanh", layers=2, h0="input")  # same seed: same weights
    path = convert(relu, str(tmp_path / "relu.mnn"))
    feeds = _feeds(relu, 5)
    got = _mnnjit(path, feeds, outs)
    _check(got, real_mnn_forward(path, feeds, outs), outs, "relu vs real MNN")
    _check(got, _ort(tanh, feeds, outs), outs, "relu vs ONNX Runtime on the tanh model")
    assert not close(got[0], _ort(relu, feeds, outs)[0].reshape(got[0].shape))  # not ONNX's relu


def test_reverse_rnn_runs_forward_like_real_mnn(tmp_path) -> None:
    """MNN's converter drops ONNX's direction: real MNN runs a "reverse" RNN forward, and so does mnnjit."""
    rev, fwd = str(tmp_path / "rev.onnx"), str(tmp_path / "fwd.onnx")
    outs = rnn_onnx(rev, direction="reverse", h0="input")
    rnn_onnx(fwd, h0="input")
    path = convert(rev, str(tmp_path / "rev.mnn"))
    feeds = _feeds(rev, 4)
    got = _mnnjit(path, feeds, outs)
    _check(got, real_mnn_forward(path, feeds, outs), outs, "reverse vs real MNN")
    _check(got, _ort(fwd, feeds, outs), outs, "reverse vs ONNX Runtime on the forward model")


def test_sequence_lengths_are_ignored_like_real_mnn(tmp_path) -> None:
    """MNN's converter drops ONNX's sequence_lens: every batch entry runs all T steps."""
    onnx_path = str(tmp_path / "sl.onnx")
    outs = rnn_onnx(onnx_path, direction="bidirectional", seq_lens=True, h0="input")
    path = convert(onnx_path, str(tmp_path / "sl.mnn"))
    feeds = _feeds(onnx_path, 5)
    full = dict(feeds, sl=np.full(3, 5, np.int32))
    got = _mnnjit(path, dict(feeds, sl=np.array([5, 2, 1], np.int32)), outs)
    _check(got, real_mnn_forward(path, feeds, outs), outs, "seq lens vs real MNN")
    _check(got, _ort(onnx_path, full, outs), outs, "seq lens vs ONNX Runtime with full lengths")


def test_malformed_rnn_ops_raise_clear_errors(tmp_path) -> None:
    """An RNN whose hidden size disagrees with its weights, or with a wrong input count, is refused by name."""
    from mnnjit.format import read_net, write_net
    from mnnjit.models.translate import UnsupportedOpError
    onnx_path = str(tmp_path / "m.onnx")
    outs = rnn_onnx(onnx_path, h0="input")
    net = read_net(convert(onnx_path, str(tmp_path / "m.mnn")))
    op = next(o for o in net.oplists if o.type == "RNN")
    op.main["outputCount"] = 5
    write_net(net, str(tmp_path / "bad_hidden.mnn"))
    with pytest.raises(UnsupportedOpError, match="hidden size 5"):
        _mnnjit(str(tmp_path / "bad_hidden.mnn"), _feeds(onnx_path, 3), outs)
    op.main["outputCount"] = 7
    op.inputIndexes = op.inputIndexes[:3]
    write_net(net, str(tmp_path / "bad_inputs.mnn"))
    with pytest.raises(UnsupportedOpError, match="RNN with 3 inputs"):
        _mnnjit(str(tmp_path / "bad_inputs.mnn"), _feeds(onnx_path, 3), outs)


def test_rnn_op_reference_against_a_plain_loop() -> None:
    """The ``rnn_tanh`` op's numpy reference, through the graph, against the textbook recurrence."""
    from mnnjit.ops import build as B
    rng = np.random.default_rng(3)
    t, batch, inp, d, h = 5, 2, 3, 2, 4
    arrays = [rng.standard_normal(s).astype(np.float32) for s in
              ((t, batch, inp), (d, h, inp), (d, h, h), (d, h), (d, batch, h))]
    y, yh = B.make("rnn_tanh", arrays)
    exp = np.zeros((t, d, batch, h), np.float32)
    for k in range(d):
        state = arrays[4][k]
        for i in (range(t) if k == 0 else reversed(range(t))):
            state = np.tanh(arrays[0][i] @ arrays[1][k].T + state @ arrays[2][k].T + arrays[3][k])
            exp[i, k] = state
    np.testing.assert_allclose(y.read(), exp, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(yh.read(), np.stack([exp[-1, 0], exp[0, 1]]), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="initial hidden state has shape"):
        B.make("rnn_tanh", arrays[:4] + [arrays[4][:, :1]])
