"""nn API surface: RuntimeManager and its config, backend fall-back, data-format handling of
inputs (the quick start's NHWC -> NC4HW4 example), plans, and clear errors on bad input."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import mnnjit as MNN

from shared_paths import MODELS  # noqa: E402
nn, F = MNN.nn, MNN.expr


def test_create_runtime_manager_config_values() -> None:
    rt = nn.create_runtime_manager(({"precision": "low", "backend": 0, "numThread": 2, "memory": "low",
                                     "power": "high"},))
    assert (rt.precision, rt.memory, rt.power, rt.num_thread, rt.backend) == (2, 2, 1, 2, 0)
    rt = nn.create_runtime_manager({"precision": 1, "backend": "CPU"})
    assert rt.precision == 1
    with pytest.raises(ValueError, match="precision"):
        nn.create_runtime_manager({"precision": "fastest"})
    with pytest.warns(RuntimeWarning, match="numThreads"):  # unknown keys are ignored (real MNN: silently)
        nn.create_runtime_manager({"numThreads": 2})
    with pytest.raises(ValueError, match="numThread"):
        nn.create_runtime_manager({"numThread": 0})
    rt.set_cache(os.devnull)
    rt.set_mode(9)
    rt.set_hint(0, 20)
    assert rt.mode == [9] and rt.hints == {0: 20}


def test_unavailable_backend_falls_back_to_cpu_with_warning(capsys) -> None:
    rt = nn.create_runtime_manager({"backend": "VULKAN", "precision": "low"})
    assert "use 0" in capsys.readouterr().err
    m = nn.load_module_from_file(os.path.join(MODELS, "mlp.mnn"), ["x"], ["prob"], runtime_manager=rt)
    data = np.load(os.path.join(MODELS, "mlp.npz"))
    out = m.forward([F.const(data["in0_x"], [1, 64])])[0]
    # precision=low keeps fp16 activations/weights on the CPU (issue 7): fp16 tolerance
    np.testing.assert_allclose(out.read(), data["out0_prob"], atol=1e-3)
    nn.load_module_from_file(os.path.join(MODELS, "mlp.mnn"), ["x"], ["prob"], backend=7)
    assert "use 0" in capsys.readouterr().err


def test_quick_start_nhwc_image_converted_to_nc4hw4() -> None:
    """An NHWC image through expr.convert(x, NC4HW4) into an NCHW model: real MNN's answer."""
    real = pytest.importorskip("MNN")
    img = np.random.default_rng(5).random((32, 32, 3)).astype(np.float32)
    path = os.path.join(MODELS, "convbn.mnn")
    x = F.convert(F.const(img[None], [1, 32, 32, 3], F.NHWC), F.NC4HW4)
    got = nn.load_module_from_file(path, ["x"], ["logits"]).forward(x)
    rm = real.nn.load_module_from_file(path, ["x"], ["logits"])
    rx = real.expr.convert(real.expr.const(img[None], [1, 32, 32, 3], real.expr.NHWC), real.expr.NC4HW4)
    exp = np.array(rm.forward(rx).read(), copy=True)
    np.testing.assert_allclose(got.read(), exp, atol=1e-4)
    # an NHWC Var fed directly is laid out as the model expects too
    direct = nn.load_module_from_file(path, ["x"], ["logits"]).forward(F.const(img[None], [1, 32, 32, 3], F.NHWC))
    np.testing.assert_allclose(direct.read(), exp, atol=1e-4)


def test_shape_mutable_false_builds_plan_at_load_and_reuses_it() -> None:
    m = nn.load_module_from_file(os.path.join(MODELS, "convbn.mnn"), ["x"], ["logits"], shape_mutable=False)
    plan = m._last_plan
    assert plan is not None
    x = F.const(np.ones((1, 3, 32, 32), np.float32), [1, 3, 32, 32])
    m.forward([x])
    m.forward([x])
    assert m._last_plan is plan and len(m._program._plans) == 1
    info = m.get_info()
    assert info["inputNames"] == ["x"] and info["outputNames"] == ["logits"] and info["version"] == "3.6.1"
    assert m.parameters == [] and m.name == "" and not m.is_training


def test_errors_name_the_problem(tmp_path) -> None:
    path = os.path.join(MODELS, "mlp.mnn")
    m = nn.load_module_from_file(path, ["x"], ["prob"])
    x = F.const(np.ones((1, 64), np.float32), [1, 64])
    with pytest.raises(ValueError, match=r"1 input\(s\) \['x'\], got 2"):
        m.forward([x, x])
    # int32 data for the float input is converted (tests/test_dropin_misc.py)
    np.testing.assert_allclose(m.forward([F.const(np.ones((1, 64), np.int32), [1, 64], F.NCHW, F.int)])[0].read(),
                               m.forward([x])[0].read())
    with pytest.raises(ValueError, match="'x'.*2 dimensions"):
        m.forward([F.const(np.ones((1, 8, 8), np.float32), [1, 8, 8])])
    with pytest.raises(ValueError, match=r"shapes \{'x': \[1, 65\]\}.*Reshape"):
        m.forward([F.const(np.ones((1, 65), np.float32), [1, 65])])
    with pytest.raises(FileNotFoundError, match="missing.mnn"):
        nn.load_module_from_file(str(tmp_path / "missing.mnn"), ["x"], ["y"])
    junk = tmp_path / "junk.mnn"
    junk.write_bytes(os.urandom(300))
    with pytest.raises(ValueError, match="junk.mnn"):
        nn.load_module_from_file(str(junk), ["x"], ["y"])
    with pytest.raises(ValueError, match="no input named 'nope'"):
        nn.load_module_from_file(path, ["nope"], ["prob"])
    with pytest.raises(ValueError, match="no tensor named 'nope'"):
        nn.load_module_from_file(path, ["x"], ["nope"])


def test_unsupported_op_is_named(tmp_path) -> None:
    from mnnjit.format import read_net, write_net
    net = read_net(os.path.join(MODELS, "mlp.mnn"))
    sm = [op for op in net.oplists if op.type == "Softmax"][0]
    sm.type, sm.main_type, sm.main = "CosineSimilarity", None, None
    path = str(tmp_path / "odd.mnn")
    write_net(net, path)
    with pytest.raises(NotImplementedError, match="odd.mnn.*'CosineSimilarity'.*'prob'"):
        nn.load_module_from_file(path, ["x"], ["prob"])
    # an op the requested outputs do not need does not matter
    first_relu = [n for n in net.tensorName if n.endswith("Gemm_output_0")][0]
    m = nn.load_module_from_file(path, ["x"], [first_relu])
    assert m.forward([F.const(np.ones((1, 64), np.float32), [1, 64])])[0].shape == [1, 128, 1, 1]


def test_import_stays_light() -> None:
    code = "import sys, mnnjit.nn, mnnjit.expr; print(any(m in sys.modules for m in ('numba', 'onnx', 'MNN')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=os.getcwd(),
                         env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert out.stdout.strip() == "False", out.stderr


def test_user_module_subclass_registers_children_and_parameters() -> None:
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = nn.load_module_from_file(os.path.join(MODELS, "mlp.mnn"), ["x"], ["prob"])
            self.scale = F.const([2.0], [1])

        def forward(self, x):
            return self.mlp.forward(x) * self.scale

    net = Net()
    assert net.mlp.name == "mlp" and [p.name for p in net.parameters] == ["scale"]
    data = np.load(os.path.join(MODELS, "mlp.npz"))
    out = net.forward(F.const(data["in0_x"], [1, 64]))
    np.testing.assert_allclose(out.read(), 2 * data["out0_prob"], atol=1e-5)
    with pytest.raises(NotImplementedError, match="forward"):
        net(F.const(data["in0_x"], [1, 64]))
    assert isinstance(net, nn._Module) and not isinstance(net.mlp, nn.Module)
