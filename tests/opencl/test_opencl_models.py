"""Every shared model on the OpenCL backend matches the CPU backend (fp32 within 1e-4 relative,
precision=low within the CPU fp16 path's 2e-2); MobileNetV2 and a ResNet-shaped network run with no
step on the host; ``backend=3`` runs models on OpenCL through the public API."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from mnnjit.compiler.lower import compile_graph
import mnnjit as MNN
from mnnjit import settings
from mnnjit.backends import registry
from mnnjit.backends.base import GraphIR
from mnnjit.backends.opencl.graph import CLGraph
from mnnjit.precision import parse_modes
from ocl_helpers import assert_close, const, lowered, node, placeholder, reference

from shared_paths import MODELS  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.isdir(MODELS), reason="shared models not available")
F = MNN.expr


def _entries() -> dict:
    with open(os.path.join(MODELS, "MANIFEST.json")) as fh:
        return json.load(fh)["entries"]


ENTRIES = _entries() if os.path.isdir(MODELS) else {}
#: the big models run one case (each case is a full forward on a CPU OpenCL device)
BIG = ("mobilenetv2", "mobilenetv2_wq8")


def _cases(name: str) -> list:
    cases = ENTRIES[name]["cases"]
    return cases[:1] if name in BIG else cases


def _load(name: str, rt=None):
    e = ENTRIES[name]
    ins = [i["name"] for i in e["inputs"]]
    outs = [o["name"] for o in e["outputs"]]
    return MNN.nn.load_module_from_file(os.path.join(MODELS, e["files"]["mnn"]), ins, outs,
                                        runtime_manager=rt), ins, outs


def _feeds(name: str, case: dict, ins: list) -> tuple[list, list]:
    data = np.load(os.path.join(MODELS, f"{name}.npz"))
    arrays = [data[case["inputs"][n]["key"]] for n in ins]
    xs = [F.const(a, list(a.shape), F.NCHW, F.int if a.dtype == np.int32 else F.float) for a in arrays]
    return arrays, xs


def _lower(ocl, module, case: dict, ins: list, precision: int = 0) -> CLGraph:
    sig = tuple((tuple(case["inputs"][n]["shape"]), np.dtype(case["inputs"][n]["dtype"]), "NCHW") for n in ins)
    plan = module._program.plan(sig)
    assert not plan.dynamic
    return compile_graph(ocl, GraphIR(plan.placeholders, plan.outputs, list(plan.out_fmts)),
                           parse_modes({"precision": precision}))


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_model_matches_cpu_backend(ocl, name: str) -> None:
    module, ins, outs = _load(name)
    data = np.load(os.path.join(MODELS, f"{name}.npz"))
    for case in _cases(name):
        arrays, xs = _feeds(name, case, ins)
        graph = _lower(ocl, module, case, ins)
        assert not graph.fallbacks, graph.explain()
        got = graph.run(arrays)
        cpu = [v.read() for v in module.forward(xs)]  # the default (CPU) backend
        for o, g, c in zip(outs, got, cpu):
            assert_close(g, c, rtol=1e-4)
            expect = data[case["outputs"][o]["key"]]  # real MNN's output
            assert np.abs(g - expect).max() <= 1e-3 * max(1.0, float(np.abs(expect).max()))


@pytest.mark.parametrize("name", ["convbn", "mobilenetv2"])
def test_model_precision_low_matches_cpu_fp16_tolerance(ocl, name: str) -> None:
    """precision=low (half storage, float arithmetic) on the convolution networks (fusion groups in
    half storage: test_opencl_ops.py)."""
    module, ins, outs = _load(name)
    case = ENTRIES[name]["cases"][0]
    arrays, xs = _feeds(name, case, ins)
    graph = _lower(ocl, module, case, ins, precision=2)
    assert graph.half and not graph.fallbacks, graph.explain()
    got = graph.run(arrays)
    cpu = [v.read() for v in module.forward(xs)]
    for g, c in zip(got, cpu):
        assert g.dtype == np.float32
        assert np.abs(g - c).max() <= 2e-2 * max(1.0, float(np.abs(c).max()))


def test_backend_3_runs_mobilenetv2_on_opencl_with_no_host_step(ocl) -> None:
    rt = MNN.nn.create_runtime_manager(({"backend": 3},))
    assert rt.backend_name == "opencl"
    module, ins, outs = _load("mobilenetv2", rt)
    case = ENTRIES["mobilenetv2"]["cases"][1]
    arrays, xs = _feeds("mobilenetv2", case, ins)
    before = settings.counters["graphs_lowered"]
    y = module.forward(xs)[0].read()
    plan = module._last_plan
    graph = getattr(plan, "plan", plan)
    assert isinstance(graph, CLGraph) and settings.counters["graphs_lowered"] == before + 1
    assert not graph.fallbacks, graph.explain()
    assert "HOST" not in graph.explain()
    expect = np.load(os.path.join(MODELS, "mobilenetv2.npz"))[case["outputs"]["logits"]["key"]]
    assert_close(y, expect.astype(np.float32), rtol=1e-4)
    y2 = module.forward(xs)[0].read()  # pooled buffers reused: the same answer
    assert np.array_equal(y, y2)


def _resnet_shaped(rng: np.random.Generator) -> tuple:
    """A small ResNet: stem conv 7x7/2 + relu, max pool 3x3/2, a basic block (identity shortcut), a
    downsampling block (1x1/2 projection shortcut), global average pool, linear classifier."""
    def conv(x, cin, cout, k, s, p, act=""):
        w = const(rng.standard_normal((cout, cin, k, k)).astype(np.float32) * (2.0 / (cin * k * k)) ** 0.5)
        b = const(rng.standard_normal(cout).astype(np.float32) * 0.1)
        return node("conv2d", [x, w, b], stride=(s, s), dilation=(1, 1), pads=(p, p, p, p), group=1, act=act)

    x = placeholder((1, 3, 64, 64))
    y = conv(x, 3, 16, 7, 2, 3, "relu")
    y = node("pool2d", [y], kind="max", kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1), out=(16, 16),
             count_include_pad=True)
    r = conv(y, 16, 16, 3, 1, 1, "relu")
    r = conv(r, 16, 16, 3, 1, 1)
    y = node("relu", [node("add", [r, y])])
    r = conv(y, 16, 32, 3, 2, 1, "relu")
    r = conv(r, 32, 32, 3, 1, 1)
    s = conv(y, 16, 32, 1, 2, 0)
    y = node("relu", [node("add", [r, s])])
    y = node("pool2d", [y], kind="avg", kernel=(8, 8), stride=(1, 1), pads=(0, 0, 0, 0), out=(1, 1),
             count_include_pad=False)
    y = node("reshape", [y], shape=(1, 32))
    w = const(rng.standard_normal((32, 10)).astype(np.float32) * 0.2)
    b = const(rng.standard_normal(10).astype(np.float32))
    return x, node("matmul_ex", [y, w, b], transpose_a=False, transpose_b=False, act="")


def test_resnet_shaped_graph_runs_wholly_on_the_device(ocl) -> None:
    rng = np.random.default_rng(5)
    x, out = _resnet_shaped(rng)
    feed = rng.standard_normal((1, 3, 64, 64)).astype(np.float32)
    graph = lowered(ocl, [out], {x: feed})
    text = graph.explain()
    assert not graph.fallbacks and "HOST" not in text, text
    assert text.count("+add+relu") == 2  # both residual adds (and their relus) are convolution epilogues
    got = graph.run([feed])[0]
    assert_close(got, reference([out], {x: feed})[0], rtol=1e-4)
    cpu = compile_graph(registry.get("cpu"), GraphIR([x], [out], ["NCHW"])).run([feed])[0]
    assert_close(got, cpu, rtol=1e-4)


def test_expr_conv_graph_is_lowered_to_opencl(ocl) -> None:
    """An expression graph (expr.conv2d with constant weights) on the OpenCL backend goes through its
    graph lowering, as a model does."""
    rng = np.random.default_rng(2)
    xv = rng.standard_normal((1, 8, 40, 40)).astype(np.float32)
    wv = rng.standard_normal((16, 8, 3, 3)).astype(np.float32) * 0.2
    bv = rng.standard_normal(16).astype(np.float32)

    def build():
        x = F.convert(F.const(xv, [1, 8, 40, 40]), F.NC4HW4)
        return F.relu(F.conv2d(x, F.const(wv, [16, 8, 3, 3]), F.const(bv, [16]), padding=[1, 1],
                               padding_mode=F.CAFFE))

    want = build().read()
    settings.set_threshold(0)
    try:
        with registry.using("opencl"):
            before = settings.counters["graphs_lowered"]
            got = build().read()
            assert settings.counters["graphs_lowered"] == before + 1
    finally:
        settings.set_threshold(None)
    assert_close(got, want, rtol=1e-4)
