"""The kernel-step executor (backends/cpu/net_exec.NetPlan) against the reference plan of the same
model: random small CNNs converted by real MNN's converter, each mode; buffers reused between
forwards never leak into results a caller keeps."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import mnnjit as MNN
from mnnjit.compiler import set_threshold

pytest.importorskip("onnx")
from mnnjit_models_fixtures import convert  # noqa: E402
from test_models_properties import _build, cnn_specs  # noqa: E402

_DIR = tempfile.mkdtemp(prefix="mnnjit_netexec_")


def _run(path, x, threshold, config=None):
    prev = set_threshold(threshold)
    try:
        rt = MNN.nn.create_runtime_manager(config or {})
        m = MNN.nn.load_module_from_file(path, ["x"], [], runtime_manager=rt)
        y = m.forward(MNN.expr.const(x, list(x.shape)))
        return np.array(y.read()), type(m._last_plan).__name__
    finally:
        set_threshold(prev)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cnn_specs())
def test_random_cnns_match_the_reference_plan(spec):
    c, h, w, layers, seed = spec
    stem = os.path.join(_DIR, f"net_{abs(hash(repr(spec)))}")
    _build(stem + ".onnx", c, h, w, layers, seed)
    path = stem + ".mnn"
    convert(stem + ".onnx", path)
    x = np.random.default_rng(seed).standard_normal((1, c, h, w)).astype(np.float32)
    ref, _ = _run(path, x, 1 << 60)
    for config, tol in (({}, 1e-4), ({"precision": "low"}, 2e-2)):
        got, kind = _run(path, x, 0, config)
        if any(L["kind"] in ("conv", "dwconv") for L in layers):
            assert kind == "NetPlan"
        assert got.shape == ref.shape
        assert np.abs(got - ref).max() <= tol * max(1.0, float(np.abs(ref).max()))


def test_outputs_survive_later_forwards(shared_dir):
    """Intermediate buffers are reused between forwards; returned outputs never are."""
    path = str(shared_dir / "models" / "mobilenetv2.mnn")
    data = np.load(shared_dir / "models" / "mobilenetv2.npz")
    m = MNN.nn.load_module_from_file(path, ["x"], ["logits"])
    a = m.forward(MNN.expr.const(data["in0_x"], [1, 3, 224, 224]))
    keep = np.array(a.read())
    b = m.forward(MNN.expr.const(data["in1_x"], [1, 3, 224, 224]))
    assert type(m._last_plan).__name__ == "NetPlan"
    assert np.array_equal(np.asarray(a.read()), keep)
    assert np.abs(np.asarray(b.read()).reshape(-1) - data["out1_logits"].reshape(-1)).max() <= 1e-4
    assert m._last_plan.n_buffers < len(m._last_plan.steps)   # buffers are shared


def test_profile_lists_every_step(shared_dir):
    path = str(shared_dir / "models" / "mobilenetv2.mnn")
    m = MNN.nn.load_module_from_file(path, ["x"], ["logits"])
    x = np.zeros((1, 3, 224, 224), np.float32)
    m.forward(MNN.expr.const(x, [1, 3, 224, 224]))
    rows = m._last_plan.profile([x], repeat=1)
    assert len(rows) == len(m._last_plan.steps)
    assert {r[0] for r in rows} >= {"conv", "dw", "xdw", "add"}


def test_plan_uses_the_module_thread_count(shared_dir):
    """A kernel-step plan splits its work for the module's numThread, whatever ran before."""
    path = str(shared_dir / "models" / "mobilenetv2.mnn")
    x = MNN.expr.const(np.zeros((1, 3, 224, 224), np.float32), [1, 3, 224, 224])
    one = MNN.nn.load_module_from_file(path, ["x"], ["logits"],
                                       runtime_manager=MNN.nn.create_runtime_manager({"numThread": 1}))
    one.forward(x)
    two = MNN.nn.load_module_from_file(path, ["x"], ["logits"],
                                       runtime_manager=MNN.nn.create_runtime_manager({"numThread": 2}))
    two.forward(x)
    import numba
    assert one._last_plan.threads == 1
    assert two._last_plan.threads == min(2, numba.config.NUMBA_NUM_THREADS)
    assert np.allclose(np.asarray(one.forward(x).read()), np.asarray(two.forward(x).read()), atol=1e-5)
