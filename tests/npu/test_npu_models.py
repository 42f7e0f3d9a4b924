"""Every shared model through each bridge (OpenVINO's CPU device, ONNX Runtime's CPU provider)
matches the CPU backend within 1e-4 relative, with its ops in delegated partitions."""
from __future__ import annotations

import pytest

from mnnjit import settings

from npu_helpers import BRIDGES, cases, entries, forward, load, partitions, rel_err

NAMES = sorted(entries())
pytestmark = pytest.mark.skipif(not NAMES or not BRIDGES, reason="needs ../shared models and an NPU SDK")


@pytest.mark.parametrize("bridge", BRIDGES)
@pytest.mark.parametrize("name", NAMES)
def test_model_matches_cpu(bridge: str, name: str) -> None:
    cpu = load(name)
    before = settings.counters["npu_partitions_compiled"] + settings.counters["npu_partitions_from_cache"]
    # (shape_mutable=False: a model with fixed input shapes is compiled for the delegate at load)
    npu = load(name, {"backend": 5, "npu": {"bridge": bridge}})
    assert npu._rt.backend == 5
    for xs in cases(name):
        exp = forward(cpu, xs)
        got = forward(npu, xs)
        assert len(got) == len(exp)
        for g, e in zip(got, exp):
            assert g.dtype == e.dtype
            assert rel_err(g, e) <= 1e-4, (bridge, name, rel_err(g, e))
        parts = partitions(npu)
        assert parts, f"{name}: nothing was delegated"
        delegated = [op for p in parts for op in p.ops]
        if name == "controlflow":
            # the If became a select of both branches: the whole graph is one partition
            assert len(parts) == 1 and "select" in delegated and "greater" in delegated
        if name.startswith("mobilenetv2"):
            assert delegated.count("mnn_conv2d") == 52 and len(parts) == 1
    compiled = settings.counters["npu_partitions_compiled"] + settings.counters["npu_partitions_from_cache"]
    assert compiled > before


def test_npu_by_name_and_hiai_type() -> None:
    """backend "NN", "NPU" and HIAI's forward type 8 all choose the delegate."""
    for value in ("NN", "NPU", 8):
        m = load("mlp", {"backend": value, "npu": {"bridge": BRIDGES[0]}})
        assert m._rt.backend_name == "npu"
        (xs,) = cases("mlp")[:1]
        forward(m, xs)
        assert partitions(m)


@pytest.mark.parametrize("bridge", BRIDGES)
def test_expression_graph_on_the_npu(bridge: str) -> None:
    """An expression graph (mnnjit.expr) read with the NPU backend active (as MNNJIT_BACKEND=npu
    does) runs delegated; its input data is fed per run, so new data reuses the compiled graph."""
    import numpy as np
    import mnnjit as MNN
    from mnnjit.backends import registry
    from mnnjit.backends.npu import options

    def graph(x0):
        x = MNN.expr.const(x0, list(x0.shape))
        return MNN.expr.reduce_sum(MNN.expr.exp(x * 0.5) + MNN.expr.tanh(x) * 2.0, [1])

    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((1024, 768)).astype(np.float32) for _ in range(2)]
    exp = [graph(x).read() for x in xs]
    settings.reset_counters()
    with registry.using("npu"), options.using(bridge=bridge):
        got = [np.array(graph(x).read(), copy=True) for x in xs]
    for g, e in zip(got, exp):
        assert rel_err(g, e) <= 1e-4
    assert settings.counters["npu_partitions_compiled"] + settings.counters["npu_partitions_from_cache"] == 1
    assert settings.counters["graphs_lowered"] == 1


def test_precision_low_becomes_the_sdks_fp16_setting(tmp_path) -> None:
    """precision low: OpenVINO's f16 inference-precision hint (f32 otherwise, never its bf16
    default), the fp16 options of the ONNX Runtime providers that have one."""
    from mnnjit.backends.npu.onnx_bridge import ONNXRuntimeDelegate
    qnn = ONNXRuntimeDelegate({"providers": ["QNNExecutionProvider", "CPUExecutionProvider"],
                               "provider_options": [{"backend_path": "QnnHtp.so"}]})
    assert qnn._provider_options(True) == [{"backend_path": "QnnHtp.so", "enable_htp_fp16_precision": "1"}, {}]
    assert qnn._provider_options(False) == [{"backend_path": "QnnHtp.so"}, {}]
    if "openvino" not in BRIDGES:
        return
    from mnnjit.backends.npu.openvino_bridge import OpenVINODelegate
    d = OpenVINODelegate({"device": "CPU"})
    assert d._config(True, tmp_path)["INFERENCE_PRECISION_HINT"] == "f16"
    assert d._config(False, tmp_path)["INFERENCE_PRECISION_HINT"] == "f32"
    (xs,) = cases("convbn")[:1]
    got = forward(load("convbn", {"backend": 5, "precision": "low", "npu": {"bridge": "openvino"}}), xs)[0]
    assert rel_err(got, forward(load("convbn"), xs)[0]) <= 2e-2
