"""Models made here with real MNN's converter (ONNX from the onnx helper API): a ResNet-18, a
transformer encoder block (both GELU forms), an LSTM (While loop), 2-8 bit and 4-bit block
weight quantization, external weights. Oracle: real MNN on the same file (and ONNX Runtime)."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import mnnjit as MNN
from mnnjit_models_fixtures import convert, lstm_onnx, real_mnn_forward, resnet18_onnx, transformer_onnx

pytest.importorskip("onnx")
pytest.importorskip("MNN")


def close(got: np.ndarray, expected: np.ndarray) -> bool:
    """Issue 6's tolerance."""
    return got.shape == expected.shape and \
        float(np.abs(got - expected).max()) <= 1e-3 * max(1.0, float(np.abs(expected).max()))


@pytest.fixture(scope="module")
def fx(tmp_path_factory) -> str:
    d = str(tmp_path_factory.mktemp("models_fx"))
    resnet18_onnx(os.path.join(d, "r18.onnx"), width=8, size=64, classes=10)
    transformer_onnx(os.path.join(d, "tf_erf.onnx"))
    transformer_onnx(os.path.join(d, "tf_tanh.onnx"), gelu_tanh=True)
    lstm_onnx(os.path.join(d, "lstm.onnx"))
    for n in ("r18", "tf_erf", "tf_tanh", "lstm"):
        convert(os.path.join(d, f"{n}.onnx"), os.path.join(d, f"{n}.mnn"))
    return d


def _check(path: str, shape, outs, seed: int = 0, ort_onnx: str | None = None) -> None:
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    exp = real_mnn_forward(path, {"x": x}, outs)
    m = MNN.nn.load_module_from_file(path, ["x"], outs)
    got = [v.read() for v in m.forward([MNN.expr.const(x, list(shape))])]
    for name, g, e in zip(outs, got, exp):
        assert close(g, e), (path, name, float(np.abs(g - e).max()))
    if ort_onnx:
        import onnxruntime as ort
        ref = ort.InferenceSession(ort_onnx).run(outs, {"x": x})
        for g, r in zip(got, ref):
            assert close(g, r.reshape(g.shape))


def test_resnet18(fx) -> None:
    _check(os.path.join(fx, "r18.mnn"), (1, 3, 64, 64), ["logits"], ort_onnx=os.path.join(fx, "r18.onnx"))


@pytest.mark.parametrize("variant", ["tf_erf", "tf_tanh"])
def test_transformer_block(fx, variant) -> None:
    _check(os.path.join(fx, f"{variant}.mnn"), (1, 16, 64), ["y"], seed=1)


def test_lstm_while_loop(fx) -> None:
    _check(os.path.join(fx, "lstm.mnn"), (5, 1, 8), ["seq_out", "h_last", "c_last"], seed=2,
           ort_onnx=os.path.join(fx, "lstm.onnx"))


@pytest.mark.parametrize("flags", [("--weightQuantBits", "8"), ("--weightQuantBits", "2"),
                                   ("--weightQuantBits", "5", "--weightQuantAsymmetric"),
                                   ("--weightQuantBits", "4", "--weightQuantBlock", "32"),
                                   ("--weightQuantBits", "8", "--weightQuantBlock", "64")])
def test_weight_quantized(fx, flags) -> None:
    path = os.path.join(fx, "r18_q" + "_".join(f.strip("-") for f in flags) + ".mnn")
    convert(os.path.join(fx, "r18.onnx"), path, *flags)
    _check(path, (1, 3, 64, 64), ["logits"], seed=3)


def test_external_weights_and_set_external(fx) -> None:
    path = os.path.join(fx, "r18_ext.mnn")
    convert(os.path.join(fx, "r18.onnx"), path, "--saveExternalData")
    assert os.path.exists(path + ".weight")
    _check(path, (1, 3, 64, 64), ["logits"], seed=4)
    # the weight file elsewhere, given with RuntimeManager.set_external
    moved = os.path.join(fx, "moved")
    os.makedirs(moved, exist_ok=True)
    shutil.copy(path, os.path.join(moved, "model.mnn"))
    shutil.copy(path + ".weight", os.path.join(fx, "weights.bin"))
    x = np.random.default_rng(4).standard_normal((1, 3, 64, 64)).astype(np.float32)
    with pytest.raises((FileNotFoundError, ValueError), match="weight"):
        MNN.nn.load_module_from_file(os.path.join(moved, "model.mnn"), ["x"], ["logits"])
    rt = MNN.nn.create_runtime_manager({"backend": "CPU"})
    rt.set_external(os.path.join(fx, "weights.bin"))
    m = MNN.nn.load_module_from_file(os.path.join(moved, "model.mnn"), ["x"], ["logits"], runtime_manager=rt)
    got = m.forward([MNN.expr.const(x, [1, 3, 64, 64])])[0].read()
    exp = real_mnn_forward(path, {"x": x}, ["logits"])[0]
    assert close(got, exp)


@pytest.mark.parametrize("flags", [("--weightQuantBits", "8"), ("--weightQuantBits", "4", "--weightQuantBlock", "32")])
def test_memory_low_keeps_weights_quantized(fx, flags) -> None:
    """memory=low: conv weights stay int8 / 4-bit codes in memory; results still match real MNN's."""
    path = os.path.join(fx, "r18_low" + "_".join(f.strip("-") for f in flags) + ".mnn")
    convert(os.path.join(fx, "r18.onnx"), path, *flags)
    x = np.random.default_rng(6).standard_normal((1, 3, 64, 64)).astype(np.float32)
    m = MNN.nn.load_module_from_file(path, ["x"], ["logits"], memory_mode=2)  # mnn_conv2d with codes
    got = m.forward([MNN.expr.const(x, [1, 3, 64, 64])])[0].read()
    rt = MNN.nn.create_runtime_manager({"memory": "low"})  # the kernel-step plan keeps codes
    via_rt = MNN.nn.load_module_from_file(path, ["x"], ["logits"], runtime_manager=rt)
    got_rt = via_rt.forward([MNN.expr.const(x, [1, 3, 64, 64])])[0].read()
    convs = [n for n in m._last_plan.order if n.op == "mnn_conv2d"]
    assert convs and any(n.attrs["weights"].quantized for n in convs)
    dense = MNN.nn.load_module_from_file(path, ["x"], ["logits"])
    dense.forward([MNN.expr.const(x, [1, 3, 64, 64])])
    q_bytes = sum(n.attrs["weights"].nbytes for n in convs)
    f_bytes = sum(n.attrs["weights"].nbytes for n in dense._last_plan.order if n.op == "mnn_conv2d")
    assert q_bytes < f_bytes / 2
    exp = real_mnn_forward(path, {"x": x}, ["logits"])[0]
    assert close(got, exp) and close(got_rt, exp)


def test_compiled_kernels_match_reference(fx) -> None:
    """The plan run by the compiler (hand-written conv kernels) equals the reference step loop."""
    config = pytest.importorskip("mnnjit.settings")
    import mnnjit.runtime as rt
    from mnnjit.backends.reference import evaluate as ref_evaluate
    path = os.path.join(fx, "r18.mnn")
    x = MNN.expr.const(np.random.default_rng(7).standard_normal((1, 3, 64, 64)).astype(np.float32), [1, 3, 64, 64])
    old = config.set_threshold(0)
    try:
        fast = MNN.nn.load_module_from_file(path, ["x"], ["logits"]).forward([x])[0].read()
    finally:
        config.set_threshold(old)
    prev = rt.set_executor(ref_evaluate)
    try:
        slow = MNN.nn.load_module_from_file(path, ["x"], ["logits"]).forward([x])[0].read()
    finally:
        rt.set_executor(prev)
    assert close(fast, slow)


def test_loop_with_input_dependent_trip_count(fx) -> None:
    """ONNX Loop -> MNN While whose trip count is an input value: a dynamic plan, re-translated per
    forward with the values; matches real MNN (run in a subprocess: it crashes on 0 iterations)."""
    import subprocess
    import sys
    from mnnjit_models_fixtures import loop_onnx
    path = convert(loop_onnx(os.path.join(fx, "loop.onnx")), os.path.join(fx, "loop.mnn"))
    m = MNN.nn.load_module_from_file(path, ["x", "n"], ["y", "ys"])
    x = np.array([1, 2, 3], np.float32)
    for n in (1, 3, 2):
        y, ys = m.forward([MNN.expr.const(x, [3]), MNN.expr.const(np.array(n, np.int32), [], MNN.expr.NCHW, MNN.expr.int)])
        code = (f"import MNN as R, numpy as np\nm = R.nn.load_module_from_file({path!r}, ['x', 'n'], ['y', 'ys'])\n"
                f"r = m.forward([R.expr.const(np.array([1, 2, 3], np.float32), [3], R.expr.NCHW), "
                f"R.expr.const(np.array({n}, np.int32), [], R.expr.NCHW, R.expr.int)])\n"
                "np.save('y.npy', np.array(r[0].read())); np.save('ys.npy', np.array(r[1].read()))\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=fx, timeout=120)
        assert out.returncode == 0, out.stderr[-1000:]
        np.testing.assert_allclose(y.read(), np.load(os.path.join(fx, "y.npy")))
        np.testing.assert_allclose(ys.read(), np.load(os.path.join(fx, "ys.npy")))
        assert ys.shape == [n, 3]
    assert m._last_plan.dynamic
    y0, ys0 = m.forward([MNN.expr.const(x, [3]), MNN.expr.const(np.array(0, np.int32), [], MNN.expr.NCHW, MNN.expr.int)])
    np.testing.assert_array_equal(y0.read(), x)
    assert ys0.shape == [0, 3]


def test_if_with_branches_of_different_shapes(fx) -> None:
    """An If whose branches differ in shape makes the plan dynamic; each forward takes the branch
    the input value selects (real MNN's results, recorded by running it in a subprocess)."""
    import subprocess
    import sys
    from mnnjit_models_fixtures import if_shapes_onnx
    path = convert(if_shapes_onnx(os.path.join(fx, "if.onnx")), os.path.join(fx, "if.mnn"))
    m = MNN.nn.load_module_from_file(path, ["x", "m"], ["y"])
    for mv in (1, -1, 2):
        code = (f"import MNN as R, numpy as np\nm = R.nn.load_module_from_file({path!r}, ['x', 'm'], ['y'])\n"
                f"r = m.forward([R.expr.const(np.array([1, 2, 3], np.float32), [3], R.expr.NCHW), "
                f"R.expr.const(np.array({mv}, np.int32), [], R.expr.NCHW, R.expr.int)])\n"
                "np.save('if_y.npy', np.array(r[0].read()))\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=fx, timeout=120)
        assert out.returncode == 0, out.stderr[-1000:]
        got = m.forward([MNN.expr.const(np.array([1, 2, 3], np.float32), [3]),
                         MNN.expr.const(np.array(mv, np.int32), [], MNN.expr.NCHW, MNN.expr.int)])[0].read()
        np.testing.assert_array_equal(got, np.load(os.path.join(fx, "if_y.npy")))
    assert m._last_plan.dynamic


def test_while_with_condition_subgraph(tmp_path) -> None:
    """MNN's aliased While form (cond + body subgraphs, aliases_updates [output, input]): mnnjit and
    real MNN (in a subprocess) agree; zero iterations return the input (real MNN fails there)."""
    import subprocess
    import sys
    from mnnjit_models_fixtures import while_net
    path = while_net(str(tmp_path / "while.mnn"))
    m = MNN.nn.load_module_from_file(path, ["x", "limit"], ["out"])
    x = np.array([1, 2, 3], np.float32)

    def run(lim):
        return m.forward([MNN.expr.const(x, [3]), MNN.expr.const(np.array(lim, np.int32), [], MNN.expr.NCHW,
                                                                  MNN.expr.int)])[0].read()
    for lim in (1, 3):
        code = (f"import MNN as R, numpy as np\nm = R.nn.load_module_from_file({path!r}, ['x', 'limit'], ['out'])\n"
                f"r = m.forward([R.expr.const(np.array([1, 2, 3], np.float32), [3], R.expr.NCHW), "
                f"R.expr.const(np.array({lim}, np.int32), [], R.expr.NCHW, R.expr.int)])\n"
                "np.save('w.npy', np.array(r[0].read()))\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(tmp_path), timeout=120)
        assert out.returncode == 0, out.stderr[-1000:]
        np.testing.assert_array_equal(run(lim), np.load(tmp_path / "w.npy"))
        np.testing.assert_array_equal(run(lim), x * 2 ** lim)
    np.testing.assert_array_equal(run(0), x)
