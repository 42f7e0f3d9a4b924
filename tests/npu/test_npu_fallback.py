"""Failures never stop a model: a missing SDK or device gives one warning and the CPU, an SDK error on
a partition sends that partition to the CPU with a warning naming its ops; vendor bridges plug in
with ``mnnjit.delegates.register``."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import mnnjit.delegates as D
from mnnjit.backends.npu.onnx_bridge import ONNXRuntimeDelegate
from mnnjit.ops.evaluate import evaluate
from mnnjit.graph import bump_write_counter

from npu_helpers import BRIDGES, cases, entries, forward, load, partitions, rel_err

pytestmark = pytest.mark.skipif(not entries() or not BRIDGES, reason="needs ../shared models and an NPU SDK")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_missing_sdk_warns_and_runs_on_the_cpu(tmp_path) -> None:
    """Both SDKs made unimportable in a fresh process: MNN's message, the CPU, the right answer."""
    code = textwrap.dedent("""
        import sys
        sys.modules["openvino"] = None       # as if neither SDK were installed
        sys.modules["onnxruntime"] = None
        import numpy as np
        sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests", sys.argv[1] + "/tests/npu"]
        from npu_helpers import cases, forward, load
        m = load("convbn", {"backend": 5})
        assert m._rt.backend == 0 and m._rt.backend_name == "cpu", m._rt
        got = forward(m, cases("convbn")[0])[0]
        exp = forward(load("convbn"), cases("convbn")[0])[0]
        assert np.array_equal(got, exp)
        print("OK")
    """)
    env = dict(os.environ, MNNJIT_CACHE_DIR=os.environ.get("MNNJIT_CACHE_DIR") or str(tmp_path), PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code, ROOT], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr[-3000:]
    assert out.stderr.count("Can't Find type=5 backend (NN)") == 1, out.stderr
    assert "no NPU SDK is installed" in out.stderr


class _NoSDK(D.Delegate):
    name = "test-nosdk"
    sdk_module = "mnnjit_test_no_such_sdk"


class _FailsOnSoftmax(ONNXRuntimeDelegate):
    """ONNX Runtime, except that a partition holding a softmax fails to compile."""

    name = "test-fails-softmax"

    def compile(self, graph, cache_path, precision_low):
        from mnnjit.graph import topo_order
        if any(n.op == "softmax" for n in topo_order(list(graph.outputs), stop_at_values=False)):
            raise RuntimeError("simulated SDK compile error")
        return super().compile(graph, cache_path, precision_low)


class _FailsAtRun(ONNXRuntimeDelegate):
    name = "test-fails-run"

    def compile(self, graph, cache_path, precision_low):
        def run(arrays):
            raise RuntimeError("simulated device loss")
        return D.Compiled(run)


class _NumpyNPU(D.Delegate):
    """A vendor bridge in one class: its 'SDK' runs the ops' references; it takes convolutions and
    pooling only."""

    name = "test-numpy-npu"

    def claim(self, node):
        why = D.portable_claim(node)
        return why or (None if node.op in ("mnn_conv2d", "pool2d") else f"{self.name} has no {node.op}")

    def compile(self, graph, cache_path, precision_low):
        def run(arrays):
            for p, a in zip(graph.placeholders, arrays):
                p.value = a
            bump_write_counter()
            evaluate(list(graph.outputs))
            return [o.value for o in graph.outputs]
        return D.Compiled(run)


for _cls in (_NoSDK, _FailsOnSoftmax, _FailsAtRun, _NumpyNPU):
    D.register(_cls)


def test_missing_bridge_sdk_warns_once() -> None:
    (xs,) = cases("mlp")[:1]
    exp = forward(load("mlp"), xs)[0]
    with pytest.warns(D.NPUDelegateWarning, match="needs the 'mnnjit_test_no_such_sdk' package") as rec:
        m = load("mlp", {"backend": 5, "npu": {"bridge": "test-nosdk"}})
        got = forward(m, xs)[0]
        forward(load("mlp", {"backend": 5, "npu": {"bridge": "test-nosdk"}}), xs)
    assert sum(issubclass(w.category, D.NPUDelegateWarning) for w in rec) == 1
    assert np.array_equal(got, exp) and partitions(m) == []


def test_missing_openvino_device_warns_and_runs_on_the_cpu() -> None:
    if "openvino" not in BRIDGES:
        pytest.skip("needs openvino")
    import openvino as ov
    if "NPU" in ov.Core().available_devices:
        pytest.skip("this machine has an Intel NPU")
    (xs,) = cases("mlp")[:1]
    with pytest.warns(D.NPUDelegateWarning, match="OpenVINO has no device 'NPU'"):
        m = load("mlp", {"backend": 5, "npu": {"bridge": "openvino", "device": "NPU"}})
        got = forward(m, xs)[0]
    assert np.array_equal(got, forward(load("mlp"), xs)[0])


def test_sdk_compile_error_sends_that_partition_to_the_cpu() -> None:
    """mlp's one partition fails to compile: a warning naming its ops, the CPU; cut so that the
    softmax is in a partition of its own, only that partition falls back."""
    if "onnxruntime" not in BRIDGES:
        pytest.skip("needs onnxruntime")
    (xs,) = cases("mlp")[:1]
    exp = forward(load("mlp"), xs)[0]
    with pytest.warns(D.NPUDelegateWarning, match=r"partition of 3 op\(s\) \(.*softmax.*\) failed to compile"):
        m = load("mlp", {"backend": 5, "npu": {"bridge": "test-fails-softmax"}})
        got = forward(m, xs)[0]
    assert rel_err(got, exp) <= 1e-6 and partitions(m) == []
    # a cut that isolates the softmax: only that partition falls back
    split = {"bridge": "test-fails-softmax", "refuse": lambda n: "split" if n.op == "matmul_ex" and
             n.inputs[0].op == "matmul_ex" else None}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", D.NPUDelegateWarning)
        m2 = load("mlp", {"backend": 5, "npu": split})
        got2 = forward(m2, xs)[0]
    assert rel_err(got2, exp) <= 1e-4
    assert [p.ops for p in partitions(m2)] == [["matmul_ex"]]
    assert "CPU (the SDK failed to compile it)" in D.explain(m2)


def test_sdk_error_at_run_time_falls_back() -> None:
    (xs,) = cases("convbn")[:1]
    exp = forward(load("convbn"), xs)[0]
    with pytest.warns(D.NPUDelegateWarning, match="failed at run time .*simulated device loss"):
        m = load("convbn", {"backend": 5, "npu": {"bridge": "test-fails-run"}})
        got = forward(m, xs)[0]
    assert rel_err(got, exp) <= 1e-5
    assert rel_err(forward(m, xs)[0], exp) <= 1e-5


def test_vendor_bridge_registered_as_one_class() -> None:
    assert "test-numpy-npu" in D.names()
    (xs,) = cases("convbn")[:1]
    exp = forward(load("convbn"), xs)[0]
    m = load("convbn", {"backend": "NPU", "npu": {"bridge": "test-numpy-npu"}})
    assert rel_err(forward(m, xs)[0], exp) <= 1e-5
    assert [p.ops for p in partitions(m)] == [["mnn_conv2d", "pool2d", "pool2d"]]
    assert "test-numpy-npu has no matmul_ex" in D.explain(m)
    with pytest.raises(TypeError, match="Delegate subclass"):
        D.register(object)


def test_shape_mutable_true_warns_as_mnn_documents() -> None:
    with pytest.warns(UserWarning, match="shape_mutable=False"):
        m = load("mlp", {"backend": 5}, shape_mutable=True)
    (xs,) = cases("mlp")[:1]
    assert rel_err(forward(m, xs)[0], forward(load("mlp"), xs)[0]) <= 1e-4


def test_bad_npu_settings_are_clear_errors() -> None:
    import mnnjit as MNN
    with pytest.raises(KeyError, match="unknown key 'devise'"):
        MNN.nn.create_runtime_manager({"backend": 5, "npu": {"devise": "NPU"}})
    with pytest.raises(ValueError, match="max_partitions"):
        MNN.nn.create_runtime_manager({"backend": 5, "npu": {"max_partitions": -1}})
    with pytest.raises(TypeError, match="providers"):
        MNN.nn.create_runtime_manager({"backend": 5, "npu": {"providers": 3}})
