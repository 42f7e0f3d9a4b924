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
