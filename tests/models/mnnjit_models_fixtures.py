"""Build small ONNX models with the ``onnx`` helper API and convert them with real MNN's converter
(``shared/tools/mnn_oracle_convert.py``): a ResNet-18, a transformer encoder block, an LSTM.
Used by the tests (tmp dirs) and by benchmarks/models.py."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from shared_paths import CONVERTER  # noqa: E402
PYTHON = sys.executable


def convert(onnx_path: str, mnn_path: str, *flags: str) -> str:
    """Run real MNN's converter on ``onnx_path`` (in a subprocess); returns ``mnn_path``."""
    cmd = [PYTHON, CONVERTER, "-f", "ONNX", "--modelFile", onnx_path, "--MNNModel", mnn_path,
           "--bizCode", "mnnjit", *flags]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if "Converted Success" not in r.stdout or not os.path.exists(mnn_path):  # its exit code is not reliable
        raise RuntimeError(f"MNN converter failed ({r.returncode}): {r.stdout[-2000:]} {r.stderr[-2000:]}")
    return mnn_path


class _Builder:
    def __init__(self, seed: int) -> None:
        from onnx import helper
        self.h = helper
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.k = 0

    def name(self, base: str) -> str:
        self.k += 1
        return f"{base}_{self.k}"

    def init(self, arr: np.ndarray, base: str = "w") -> str:
        from onnx import numpy_helper
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), n))
        return n

    def weight(self, shape, scale=None, base="w") -> str:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
        s = scale if scale is not None else np.sqrt(2.0 / max(1, fan_in))
        return self.init((self.rng.standard_normal(shape) * s).astype(np.float32), base)

    def op(self, kind: str, inputs: list[str], n_out: int = 1, **attrs) -> str | list[str]:
        outs = [self.name(kind.lower()) for _ in range(n_out)]
        self.nodes.append(self.h.make_node(kind, inputs, outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def save(self, path: str, inputs: list, outputs: list, opset: int = 17) -> str:
        import onnx
        graph = self.h.make_graph(self.nodes, "g", inputs, outputs, self.inits)
        model = self.h.make_model(graph, opset_imports=[self.h.make_opsetid("", opset)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        onnx.save(model, path)
        return path

    def io(self, name: str, shape) -> object:
        from onnx import TensorProto
        return self.h.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def resnet18_onnx(path: str, width: int = 64, size: int = 224, classes: int = 1000, seed: int = 0) -> str:
    """A ResNet-18 (torchvision topology; BatchNorm folded into the convolutions) as ONNX."""
    b = _Builder(seed)

    def conv(x, cin, cout, k, s, p, relu=True):
        y = b.op("Conv", [x, b.weight((cout, cin, k, k)), b.init(b.rng.standard_normal(cout).astype(np.float32) * 0.1, "b")],
                 kernel_shape=[k, k], strides=[s, s], pads=[p, p, p, p])
        return b.op("Relu", [y]) if relu else y

    x = conv("x", 3, width, 7, 2, 3)
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = width
    for stage, cout in enumerate([width, width * 2, width * 4, width * 8]):
        for blk in range(2):
            s = 2 if stage > 0 and blk == 0 else 1
            y = conv(x, cin, cout, 3, s, 1)
            y = conv(y, cout, cout, 3, 1, 1, relu=False)
            sc = conv(x, cin, cout, 1, s, 0, relu=False) if (s != 1 or cin != cout) else x
            x = b.op("Relu", [b.op("Add", [y, sc])])
            cin = cout
    x = b.op("GlobalAveragePool", [x])
    x = b.op("Flatten", [x], axis=1)
    w = b.weight((classes, cin), scale=0.05)
    bias = b.init(np.zeros(classes, np.float32), "fcb")
    out = b.op("Gemm", [x, w, bias], transB=1)
    b.nodes[-1].output[0] = "logits"
    return b.save(path, [b.io("x", [1, 3, size, size])], [b.io("logits", [1, classes])])


def transformer_onnx(path: str, d: int = 64, heads: int = 4, seq: int = 16, ff: int = 128,
                     gelu_tanh: bool = False, seed: int = 1) -> str:
    """A post-norm transformer encoder block (self-attention, LayerNorm, GELU MLP) as ONNX."""
    b = _Builder(seed)
    hd = d // heads

    def linear(x, i, o):
        y = b.op("MatMul", [x, b.weight((i, o), scale=1 / np.sqrt(i))])
        return b.op("Add", [y, b.init((b.rng.standard_normal(o) * 0.02).astype(np.float32), "b")])

    def layer_norm(x):
        g = b.init((1 + 0.1 * b.rng.standard_normal(d)).astype(np.float32), "g")
        be = b.init((0.1 * b.rng.standard_normal(d)).astype(np.float32), "be")
        return b.op("LayerNormalization", [x, g, be], axis=-1, epsilon=1e-5)

    def heads_split(t):
        t = b.op("Reshape", [t, b.init(np.array([1, seq, heads, hd], np.int64), "s")])
        return b.op("Transpose", [t], perm=[0, 2, 1, 3])

    x = "x"
    q, k, v = (heads_split(linear(x, d, d)) for _ in range(3))
    kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
    att = b.op("Mul", [b.op("MatMul", [q, kt]), b.init(np.array(1 / np.sqrt(hd), np.float32), "sc")])
    att = b.op("Softmax", [att], axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [att, v])], perm=[0, 2, 1, 3])
    ctx = b.op("Reshape", [ctx, b.init(np.array([1, seq, d], np.int64), "s")])
    h = layer_norm(b.op("Add", [x, linear(ctx, d, d)]))
    f = linear(h, d, ff)
    if gelu_tanh:  # x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
        c = lambda v: b.init(np.array(v, np.float32), "c")  # noqa: E731
        cube = b.op("Mul", [b.op("Mul", [f, f]), f])
        inner = b.op("Mul", [b.op("Add", [f, b.op("Mul", [cube, c(0.044715)])]), c(np.sqrt(2 / np.pi))])
        f = b.op("Mul", [b.op("Mul", [f, c(0.5)]), b.op("Add", [b.op("Tanh", [inner]), c(1.0)])])
    else:  # x * 0.5 * (1 + erf(x / sqrt(2)))
        c = lambda v: b.init(np.array(v, np.float32), "c")  # noqa: E731
        e = b.op("Erf", [b.op("Div", [f, c(np.sqrt(2.0))])])
        f = b.op("Mul", [b.op("Mul", [f, b.op("Add", [e, c(1.0)])]), c(0.5)])
    out = layer_norm(b.op("Add", [h, linear(f, ff, d)]))
    b.nodes[-1].output[0] = "y"
    return b.save(path, [b.io("x", [1, seq, d])], [b.io("y", [1, seq, d])])


def lstm_onnx(path: str, inp: int = 8, hidden: int = 16, seq: int = 5, seed: int = 2) -> str:
    """A one-layer LSTM (ONNX LSTM op) followed by a Linear on the last hidden state."""
    b = _Builder(seed)
    w = b.weight((1, 4 * hidden, inp), scale=0.3)
    r = b.weight((1, 4 * hidden, hidden), scale=0.3)
    bias = b.init((b.rng.standard_normal((1, 8 * hidden)) * 0.1).astype(np.float32), "b")
    y, yh, yc = b.op("LSTM", ["x", w, r, bias], n_out=3, hidden_size=hidden)
    b.nodes[-1].output[:] = ["seq_out", "h_last", "c_last"]
    return b.save(path, [b.io("x", [seq, 1, inp])],
                  [b.io("seq_out", [seq, 1, 1, hidden]), b.io("h_last", [1, 1, hidden]), b.io("c_last", [1, 1, hidden])])


def real_mnn_forward(mnn_path: str, inputs: dict[str, np.ndarray], outputs: list[str]) -> list[np.ndarray]:
    """Outputs of real MNN (imported lazily; the oracle) for named inputs."""
    import MNN
    m = MNN.nn.load_module_from_file(mnn_path, list(inputs), outputs)
    xs = [MNN.expr.const(a, list(a.shape), MNN.expr.NCHW) for a in inputs.values()]
    return [np.array(v.read(), copy=True) for v in m.forward(xs)]  # read() views MNN memory


_ISOLATED_ORACLE = """
import sys, numpy as np, MNN
data = np.load(sys.argv[1])
names = [k for k in data.files]
m = MNN.nn.load_module_from_file(sys.argv[2], names, sys.argv[4].split(","))
xs = [MNN.expr.const(data[k], list(data[k].shape), MNN.expr.NCHW) for k in names]
np.savez(sys.argv[3], *[np.array(v.read(), copy=True) for v in m.forward(xs)])
"""


class OracleCrashed(RuntimeError):
    """Real MNN failed or crashed (it segfaults on some graphs): there is nothing to compare with."""


def real_mnn_forward_isolated(mnn_path: str, inputs: dict[str, np.ndarray], outputs: list[str]) -> list[np.ndarray]:
    """Like :func:`real_mnn_forward`, in a child process, so that a segfault in real MNN cannot kill the tests."""
    import subprocess
    import sys
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.npz"), os.path.join(d, "out.npz")
        np.savez(src, **inputs)
        run = subprocess.run([sys.executable, "-c", _ISOLATED_ORACLE, src, mnn_path, dst, ",".join(outputs)],
                             capture_output=True, timeout=300)
        if run.returncode != 0 or not os.path.exists(dst):
            raise OracleCrashed(f"real MNN exited with {run.returncode}: {run.stderr.decode()[-300:]}")
        with np.load(dst) as out:
            return [out[f"arr_{i}"] for i in range(len(outputs))]


def loop_onnx(path: str) -> str:
    """An ONNX Loop whose trip count is a model input: y <- 2*y + i, scanning every y."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=1), helper.make_node("Mul", ["y_in", "two"], ["y2"]),
         helper.make_node("Add", ["y2", "fi"], ["y_out"]), helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["y_out"], ["scan"])],
        "body", [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("y_in", TensorProto.FLOAT, [3])],
        [vi("cond_out", TensorProto.BOOL, []), vi("y_out", TensorProto.FLOAT, [3]), vi("scan", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    nodes = [helper.make_node("Cast", ["n"], ["M"], to=7), helper.make_node("Loop", ["M", "cond0", "x"], ["y", "ys"], body=body)]
    g = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [3]), vi("n", TensorProto.INT32, [])],
                          [vi("y", TensorProto.FLOAT, [3]), vi("ys", TensorProto.FLOAT, ["N", 3])],
                          [numpy_helper.from_array(np.array(True), "cond0")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def if_shapes_onnx(path: str) -> str:
    """An ONNX If whose branches give different shapes: x*x ([3]) when m > 0, else concat(x, x) ([6])."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    vi = helper.make_tensor_value_info
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["t"])], "then", [], [vi("t", TensorProto.FLOAT, [3])])
    else_g = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["e"], axis=0)], "else", [],
                               [vi("e", TensorProto.FLOAT, [6])])
    nodes = [helper.make_node("Greater", ["m", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    g = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [3]), vi("m", TensorProto.INT32, [])],
                          [vi("y", TensorProto.FLOAT, ["N"])], [numpy_helper.from_array(np.array(0, np.int32), "zero")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def while_net(path: str) -> str:
    """An MNN Net (written with mnnjit.format) with a While op in MNN's aliased form (condition and
    body subgraphs): i = 0; while i < limit: x = 2 * x; i += 1; output x."""
    from mnnjit.format import Net, Op, SubGraph, write_net

    def blob(arr):
        arr = np.asarray(arr)
        dt, field = ("DT_FLOAT", "float32s") if arr.dtype.kind == "f" else ("DT_INT32", "int32s")
        return {"dims": np.asarray(arr.shape, np.int32), "dataFormat": "NCHW", "dataType": dt, field: arr.reshape(-1)}

    def op(t, name, ins, outs, mt=None, main=None):
        return Op(type=t, name=name, inputIndexes=ins or None, outputIndexes=outs, main_type=mt, main=main,
                  defaultDimentionFormat="NCHW")

    def inp(name, idx, dims, dt):
        return op("Input", name, [], [idx], "Input", {"dims": np.asarray(dims, np.int32), "dtype": dt, "dformat": "NCHW"})

    cond = SubGraph(name="cond", inputs=[0, 1], outputs=[2], tensors=["i", "limit", "c"], nodes=[
        inp("i", 0, [], "DT_INT32"), inp("limit", 1, [], "DT_INT32"),
        op("BinaryOp", "c", [0, 1], [2], "BinaryOp", {"opType": "LESS", "T": "DT_INT32"})])
    body = SubGraph(name="body", inputs=[0, 1], outputs=[4, 5], tensors=["i", "x", "one", "two", "i1", "x1"], nodes=[
        inp("i", 0, [], "DT_INT32"), inp("x", 1, [3], "DT_FLOAT"),
        op("Const", "one", [], [2], "Blob", blob(np.array(1, np.int32))),
        op("Const", "two", [], [3], "Blob", blob(np.array(2.0, np.float32))),
        op("BinaryOp", "i1", [0, 2], [4], "BinaryOp", {"opType": "ADD", "T": "DT_INT32"}),
        op("BinaryOp", "x1", [1, 3], [5], "BinaryOp", {"opType": "MUL", "T": "DT_FLOAT"})])
    main = [inp("x", 0, [3], "DT_FLOAT"), inp("limit", 1, [], "DT_INT32"),
            op("Const", "i0", [], [2], "Blob", blob(np.array(0, np.int32))),
            op("While", "out", [2, 1, 0], [3], "WhileParam", {
                "cond_graph": "cond", "body_graph": "body",
                "aliases_inputs": [{"data": ["i"]}, {"data": ["limit"]}, {"data": ["x"]}],
                "aliases_outputs": ["x1"], "aliases_updates": [{"data": ["i1", "i"]}, {"data": ["x1", "x"]}]})]
    net = Net(oplists=main, tensorName=["x", "limit", "i0", "out"], outputName=["out"], subgraphs=[cond, body],
              sourceType="TENSORFLOW", bizCode="mnnjit", extraInfo={"version": "3.6.1"})
    write_net(net, path)
    return path
