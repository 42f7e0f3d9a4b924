"""Mode logic and whole-model accuracy per mode on the shared MobileNetV2 models."""
from __future__ import annotations

import numpy as np
import pytest

from mnnjit.backends.cpu.weights import weight_storage
from mnnjit.precision import (Modes, activation_dtype, executor_modes, parse_modes,
                              set_executor_modes)


def test_parse_modes():
    assert parse_modes({}) == Modes(0, 0)
    assert parse_modes({"precision": "low", "memory": 2, "numThread": 4}) == Modes(2, 2)
    assert parse_modes({"precision": "lowBF"}).precision == 3
    assert parse_modes(precision=1, memory="low") == Modes(1, 2)
    with pytest.raises(ValueError, match="precision"):
        parse_modes({"precision": "fast"})
    with pytest.raises(ValueError, match="0..2"):
        parse_modes({"memory": 3})
    with pytest.raises(TypeError, match="memory"):
        parse_modes({"memory": 1.5})


def test_activation_dtype_and_weight_storage():
    assert activation_dtype(2) == np.float16
    assert activation_dtype(Modes(0, 2)) == np.float32
    assert activation_dtype(3) == np.float32          # lowBF: no bf16 path on CPU
    w = np.arange(12, dtype=np.float32)
    assert weight_storage(Modes(2, 0), w, (3, 4)).nbytes == 24
    assert weight_storage(Modes(0, 0), w, (3, 4)).nbytes == 48
    with pytest.raises(ValueError, match="expected 5x4"):
        weight_storage(Modes(), w, (5, 4))


def test_executor_modes_roundtrip():
    try:
        assert set_executor_modes(2, 0) == Modes(2, 0) == executor_modes()
    finally:
        set_executor_modes()
    assert executor_modes() == Modes()


def test_expr_vars_compute_float32_under_low_precision():
    """expr graphs keep float32 compute under precision=low (real MNN's numbers on this CPU)."""
    import mnnjit.expr as F
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 9, 9)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)

    def run():
        xin = F.convert(F.const(x, [1, 3, 9, 9]), F.NC4HW4)
        y = F.relu(F.conv2d(xin, F.const(w, [4, 3, 3, 3]), F.const(np.zeros(4, np.float32), [4]),
                            [1, 1], [1, 1]))
        return np.asarray(y.read())
    normal = run()
    try:
        F.set_global_executor_config(0, 2, 1)
        low = run()
        assert executor_modes().fp16
    finally:
        set_executor_modes()
    assert low.dtype == np.float32 and np.array_equal(low, normal)


MODES = [(0, 0), (2, 0), (0, 2), (2, 2)]


@pytest.fixture(scope="module")
def models(shared_dir):
    from precision_convnet import ConvNet
    out = {}
    for name in ("mobilenetv2", "mobilenetv2_wq8"):
        data = np.load(shared_dir / "models" / f"{name}.npz")
        path = str(shared_dir / "models" / f"{name}.mnn")
        out[name] = (data, {m: ConvNet(path, Modes(*m)) for m in MODES})
    return out


@pytest.mark.parametrize("name", ["mobilenetv2", "mobilenetv2_wq8"])
@pytest.mark.parametrize("mode", MODES)
def test_model_accuracy_per_mode(models, name, mode):
    data, nets = models[name]
    net = nets[mode]
    for case in (0, 1):
        ref = data[f"out{case}_logits"]          # real MNN, fp32 (weights decoded at load)
        y = net.forward(data[f"in{case}_x"])
        assert y.dtype == np.float32 and y.shape == ref.shape
        err = np.abs(y - ref).max()
        if mode[0] == 2:
            # fp16 storage of every activation and weight: a few half ulps of the logits' range
            assert err <= 2e-3 * np.abs(ref).max() + 1e-4, err
        else:
            # memory=low dequantizes the same codes exactly (real MNN's memory=low shows
            # 1.3e-3 from dynamic int8 activations; ours is bounded by fp32 rounding)
            assert err <= 1e-5, err


def test_memory_low_keeps_weights_quantized(models):
    _, nets = models["mobilenetv2_wq8"]
    fp32 = nets[(0, 0)].weight_nbytes
    assert nets[(0, 2)].weight_nbytes <= 0.30 * fp32
    # fp16: GEMM weights halved; depthwise weights (1% of the model) stay float32
    assert nets[(2, 0)].weight_nbytes == pytest.approx(fp32 / 2, rel=0.03)
    _, float_nets = models["mobilenetv2"]
    assert float_nets[(0, 2)].weight_nbytes == fp32   # float model: memory=low changes nothing


def test_memory_low_error_not_above_real_mnn(shared_dir, models):
    MNN = pytest.importorskip("MNN")
    data, nets = models["mobilenetv2_wq8"]
    rt = MNN.nn.create_runtime_manager(({"backend": 0, "precision": 0, "memory": 2,
                                         "numThread": 1},))
    m = MNN.nn.load_module_from_file(str(shared_dir / "models" / "mobilenetv2_wq8.mnn"),
                                     ["x"], ["logits"], runtime_manager=rt)
    x = data["in0_x"]
    real = np.array(m.forward(MNN.expr.const(x, list(x.shape), MNN.expr.NCHW)).read())
    ref = data["out0_logits"]
    ours = nets[(0, 2)].forward(x)
    assert np.abs(ours - ref).max() <= np.abs(real.reshape(ref.shape) - ref).max()


@pytest.mark.parametrize("mode", [(2, 0), (0, 2), (2, 2)])
def test_nn_module_runs_modes(shared_dir, mode):
    """The model runner (mnnjit.nn) with a runtime manager in each mode: the kernel-step plan,
    fp16 activations under precision=low, int8 codes (under 30 % of the fp32 weight bytes, no
    float copies kept) under memory=low."""
    import mnnjit.expr as F
    import mnnjit.nn as nn
    from mnnjit.backends.cpu.kernel_steps import NetPlan
    name = "mobilenetv2_wq8"
    path = str(shared_dir / "models" / f"{name}.mnn")
    data = np.load(shared_dir / "models" / f"{name}.npz")
    rt = nn.create_runtime_manager(({"precision": mode[0], "memory": mode[1]},))
    m = nn.load_module_from_file(path, ["x"], ["logits"], runtime_manager=rt)
    for case in (0, 1):
        x = F.const(data[f"in{case}_x"], [1, 3, 224, 224], F.NCHW)
        y = np.asarray(m.forward(x).read())
        ref = data[f"out{case}_logits"]
        assert y.shape == ref.shape and y.dtype == np.float32
        tol = 2e-3 * np.abs(ref).max() + 1e-4 if mode[0] == 2 else 1e-5
        assert np.abs(y - ref).max() <= tol
    plan = m._last_plan
    assert isinstance(plan, NetPlan)
    assert plan.act_dtype == (np.float16 if mode[0] == 2 else np.float32)
    if mode[1] == 2:
        fp32 = nn.load_module_from_file(path, ["x"], ["logits"])
        fp32.forward(F.const(data["in0_x"], [1, 3, 224, 224], F.NCHW))
        convs = [st.op.w for st in plan.steps if st.kind == "conv"]
        assert convs and all(w.kind in (2, 3, 4) for w in convs)   # 4: codes in panel order
        assert plan.weight_nbytes <= 0.30 * fp32._last_plan.weight_nbytes
        assert not any(k[1] in ("conv", "wnode", "wt") for k in m._program.weight_cache)


def test_nn_module_fp32_modes_keep_the_plain_plan(shared_dir):
    import mnnjit.nn as nn
    from mnnjit.models.program import ExecutionPlan
    rt = nn.create_runtime_manager(({"precision": "high", "memory": 1},))
    m = nn.load_module_from_file(str(shared_dir / "models" / "mlp.mnn"), runtime_manager=rt)
    m.forward(np.zeros((1, 64), np.float32))
    assert isinstance(m._last_plan, ExecutionPlan)
