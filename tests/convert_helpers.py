"""Helpers of the converter / CLI tests: ONNX graphs from ``onnx.helper``, conversion with
``mnnjit.converter``, and the three-way check (ONNX Runtime as the reference; real MNN and mnnjit
on the converted file)."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Sequence

import numpy as np

#: the converter's accuracy target: max |error| <= RTOL * max(1, max |reference|)
RTOL = 1e-4


def vi(name: str, shape: Any, elem: int | None = None) -> Any:
    """A tensor value info (float unless ``elem`` says otherwise; 0: no type)."""
    from onnx import TensorProto, helper
    if elem == 0:  # type left to inference
        return helper.make_empty_tensor_value_info(name)
    return helper.make_tensor_value_info(name, TensorProto.FLOAT if elem is None else elem, shape)


def init(name: str, array: Any) -> Any:
    """An initializer."""
    from onnx import numpy_helper
    return numpy_helper.from_array(np.asarray(array), name)


def model(nodes: list, inputs: list, outputs: list, inits: Sequence = (), opset: int = 17) -> Any:
    """A checked ONNX model of one graph."""
    import onnx
    from onnx import helper
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    if any(not o.type.HasField("tensor_type") for o in m.graph.output):  # untyped outputs: inferred
        m = onnx.shape_inference.infer_shapes(m)
    onnx.checker.check_model(m)
    return m


def to_mnn_inputs(mnn: Any, feeds: dict) -> list:
    """Vars for ``feeds`` (integers as int32, as MNN stores them)."""
    out = []
    for a in feeds.values():
        if a.dtype.kind in "iub":
            a = a.astype(np.int32)
            out.append(mnn.expr.const(a, list(a.shape), mnn.expr.NCHW, mnn.expr.int))
        else:
            a = a.astype(np.float32)
            out.append(mnn.expr.const(a, list(a.shape), mnn.expr.NCHW, mnn.expr.float))
    return out


def forward(mnn: Any, path: str, feeds: dict, outputs: list) -> list:
    """Run ``path`` with ``mnn`` (real MNN or mnnjit); outputs as NCHW numpy arrays."""
    m = mnn.nn.load_module_from_file(path, list(feeds), outputs)
    outs = m.forward(to_mnn_inputs(mnn, feeds))
    if not isinstance(outs, (list, tuple)):
        outs = [outs]
    return [np.array(mnn.expr.convert(o, mnn.expr.NCHW).read()) for o in outs]


def ort_run(m: Any, feeds: dict, outputs: list) -> list:
    """ONNX Runtime's answer (1 thread)."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(m.SerializeToString() if not isinstance(m, str) else m, so,
                                providers=["CPUExecutionProvider"]).run(outputs, feeds)


def rel_error(got: np.ndarray, ref: np.ndarray) -> float:
    """max |got - ref| / max(1, max |ref|) (inf when the shapes differ)."""
    g, r = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if g.shape != r.shape:
        return float("inf")
    if not r.size:
        return 0.0
    return float(np.abs(g - r).max() / max(1.0, float(np.abs(r).max())))


def check_three_way(m: Any, feeds: dict, tmp_path: Any, name: str = "m", options: Any = None,
                    rtol: float = RTOL, runtimes: Sequence[str] = ("mnn", "mnnjit")) -> str:
    """Convert ``m``, then require real MNN and mnnjit to give ONNX Runtime's outputs; returns the path."""
    import mnnjit
    from mnnjit.converter import convert_onnx, save_mnn
    path = os.path.join(str(tmp_path), f"{name}.mnn")
    save_mnn(convert_onnx(m, options), path)
    outs = [o.name for o in m.graph.output]
    ref = ort_run(m, feeds, outs)
    for rt in runtimes:
        if rt == "mnn":
            import MNN
            got = forward(MNN, path, feeds, outs)
        else:
            got = forward(mnnjit, path, feeds, outs)
        for o, g, r in zip(outs, got, ref):
            r = np.asarray(r)
            if r.dtype == bool:
                r = r.astype(np.int32)
            err = rel_error(g.reshape(r.shape) if g.size == r.size else g, r)
            assert err <= rtol, f"{name}: {rt} output {o!r}: error {err:.3g} (shape {g.shape} vs {r.shape})"
    return path


def run_cli(*args: str, timeout: float = 300, env: dict | None = None, cwd: str | None = None) -> Any:
    """``python -m mnnjit ARGS`` in a subprocess (completed process, text output)."""
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "mnnjit", *args], capture_output=True, text=True,
                          timeout=timeout, env=e, cwd=cwd)


class GraphMaker:
    """Accumulates nodes and seeded initializers for hand-built ONNX graphs."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.k = 0

    def name(self, base: str) -> str:
        self.k += 1
        return f"{base}{self.k}"

    def const(self, array: Any, base: str = "c") -> str:
        n = self.name(base)
        self.inits.append(init(n, np.asarray(array)))
        return n

    def weight(self, *shape: int, scale: float = 0.3) -> str:
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32), "w")

    def op(self, kind: str, inputs: list, n_out: int = 1, out: str | None = None, **attrs) -> Any:
        from onnx import helper
        outs = [out] if out else [self.name(kind.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(kind, inputs, outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def model(self, inputs: list, outputs: list, opset: int = 17) -> Any:
        return model(self.nodes, inputs, outputs, self.inits, opset)


def transformer_block(d: int = 32, heads: int = 4, ff: int = 64, seed: int = 0) -> Any:
    """A post-norm transformer encoder block on x [N, S, d] with N and S dynamic (shape arithmetic
    from Shape / Gather / Concat as exporters write it; GELU in its erf form)."""
    from onnx import TensorProto
    g = GraphMaker(seed)
    dh = d // heads
    i64 = lambda v: g.const(np.asarray(v, np.int64), "i")  # noqa: E731
    shp = g.op("Shape", ["x"])
    n = g.op("Gather", [shp, i64(0)], axis=0)
    s = g.op("Gather", [shp, i64(1)], axis=0)
    n1, s1 = g.op("Unsqueeze", [n, i64([0])]), g.op("Unsqueeze", [s, i64([0])])
    split_shape = g.op("Concat", [n1, s1, i64([heads]), i64([dh])], axis=0)
    merge_shape = g.op("Concat", [n1, s1, i64([d])], axis=0)

    def proj(x, k_in, k_out):
        return g.op("Add", [g.op("MatMul", [x, g.weight(k_in, k_out)]), g.weight(k_out, scale=0.1)])

    def heads_of(x):
        return g.op("Transpose", [g.op("Reshape", [x, split_shape])], perm=[0, 2, 1, 3])
    q, k, v = (heads_of(proj("x", d, d)) for _ in range(3))
    att = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])])
    att = g.op("Softmax", [g.op("Div", [att, g.const(np.float32(np.sqrt(dh)))])], axis=-1)
    ctx = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [att, v])], perm=[0, 2, 1, 3]), merge_shape])
    h1 = g.op("LayerNormalization", [g.op("Add", ["x", proj(ctx, d, d)]), g.const(np.ones(d, np.float32)),
                                     g.const(np.zeros(d, np.float32))], axis=-1, epsilon=1e-5)
    f = proj(h1, d, ff)
    gelu = g.op("Mul", [g.op("Mul", [f, g.op("Add", [g.op("Erf", [g.op("Div", [f, g.const(np.float32(
        np.sqrt(2.0)))])]), g.const(np.float32(1.0))])]), g.const(np.float32(0.5))])
    y = g.op("LayerNormalization", [g.op("Add", [h1, proj(gelu, ff, d)]), g.weight(d), g.weight(d)], axis=-1,
             epsilon=1e-5, out="y")
    del y
    return g.model([vi("x", ["N", "S", d])], [vi("y", ["N", "S", d], TensorProto.FLOAT)])


def recurrent_model(kind: str, bidirectional: bool, hidden: int = 6, inp: int = 5, seed: int = 1,
                    initial: bool = True, **attrs) -> Any:
    """An ONNX LSTM / GRU / RNN on x [T, N, inp] (T and N dynamic), optionally with initial states."""
    g = GraphMaker(seed)
    ndir = 2 if bidirectional else 1
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    ins = ["x", g.weight(ndir, gates * hidden, inp), g.weight(ndir, gates * hidden, hidden),
           g.weight(ndir, 2 * gates * hidden, scale=0.1)]
    inputs = [vi("x", ["T", "N", inp])]
    if initial:
        ins += ["", "h0"]
        inputs.append(vi("h0", [ndir, "N", hidden]))
        if kind == "LSTM":
            ins.append("c0")
            inputs.append(vi("c0", [ndir, "N", hidden]))
    outs = ["y", "yh"] + (["yc"] if kind == "LSTM" else [])
    g.op(kind, ins, n_out=len(outs), hidden_size=hidden, direction="bidirectional" if bidirectional else "forward",
         **attrs)
    g.nodes[-1].output[:] = outs
    return g.model(inputs, [vi(o, None, 0) for o in outs])
