"""expr.load_as_list / load_as_dict / get_inputs_and_outputs / save, round trips with real MNN."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import mnnjit as MNN

from shared_paths import MODELS  # noqa: E402
F = MNN.expr


def test_load_as_list_has_every_tensor() -> None:
    from mnnjit.format import read_net
    vs = F.load_as_list(os.path.join(MODELS, "mlp.mnn"))
    net = read_net(os.path.join(MODELS, "mlp.mnn"))
    assert len(vs) == len(net.tensorName) == 33
    assert vs[0].name == "x" and vs[0].op_type == "Input" and vs[0].shape == [1, 64]
    assert vs[-1].name == "prob" and vs[-1].shape == [1, 10]


def test_load_as_dict_write_input_then_read_output() -> None:
    d = F.load_as_dict(os.path.join(MODELS, "convbn.mnn"))
    assert list(d) == sorted(d)
    inputs, outputs = F.get_inputs_and_outputs(d)
    assert list(inputs) == ["x"] and list(outputs) == ["logits"]
    data = np.load(os.path.join(MODELS, "convbn.npz"))
    for k in range(2):
        d["x"].write(data[f"in{k}_x"])
        np.testing.assert_allclose(d["logits"].read(), data[f"out{k}_logits"], atol=1e-4)


def test_load_as_dict_then_load_module() -> None:
    d = F.load_as_dict(os.path.join(MODELS, "mlp.mnn"))
    m = MNN.nn.load_module([d["x"]], [d["prob"]], False)
    data = np.load(os.path.join(MODELS, "mlp.npz"))
    out = m.forward([F.const(data["in1_x"], [1, 64])])[0]
    np.testing.assert_allclose(out.read(), data["out1_prob"], atol=1e-5)


def test_load_errors(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.mnn"):
        F.load_as_list(str(tmp_path / "nope.mnn"))
    bad = tmp_path / "bad.mnn"
    bad.write_bytes(b"this is not a flatbuffer at all" * 10)
    with pytest.raises(ValueError, match="bad.mnn"):
        F.load_as_dict(str(bad))


def _graph():
    x = F.placeholder([2, 3, 8, 8])
    x.name = "inp"
    w = F.const(np.linspace(-1, 1, 4 * 3 * 9, dtype=np.float32).reshape(4, 3, 3, 3), [4, 3, 3, 3])
    from mnnjit.ops import build as B
    conv = B.wrap(B.make_node("conv2d", [x._node, w._node, F.const(np.arange(4, dtype=np.float32), [4])._node],
                              {"stride": (1, 1), "dilation": (1, 1), "pads": (1, 1, 1, 1), "group": 1, "act": "relu"}))
    y = F.reshape(conv, [2, -1]) if hasattr(F, "reshape") else B.reshape(conv, (2, 256))
    y = F.add(F.multiply(y, 0.5), F.const(np.ones(256, np.float32), [256]))
    y = F.maximum(y, 0.25)
    y.name = "y"
    z = F.subtract(F.exp(F.negative(y)), 1.0)
    z.name = "z"
    return x, y, z


def _real(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def test_save_loads_in_real_mnn(tmp_path) -> None:
    pytest.importorskip("MNN")
    x, y, z = _graph()
    path = str(tmp_path / "g.mnn")
    F.save([y, z], path)
    data = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "in.npy", data)
    x.write(data)
    exp_y, exp_z = y.read(), z.read()
    _real(f"""
import MNN, numpy as np
F = MNN.expr
x = np.load({str(tmp_path / 'in.npy')!r})
m = MNN.nn.load_module_from_file({path!r}, ['inp'], ['y', 'z'])
ys = m.forward([F.const(x, list(x.shape), F.NCHW)])
np.save({str(tmp_path / 'y.npy')!r}, ys[0].read()); np.save({str(tmp_path / 'z.npy')!r}, ys[1].read())
vs = F.load_as_list({path!r})
print(len(vs), sorted(v.name for v in vs if v.name in ('inp', 'y', 'z')))
""")
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), exp_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.load(tmp_path / "z.npy"), exp_z, rtol=1e-5, atol=1e-5)
    # and back into mnnjit
    d = F.load_as_dict(path)
    d["inp"].write(data)
    np.testing.assert_allclose(d["y"].read(), exp_y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(d["z"].read(), exp_z, rtol=1e-5, atol=1e-6)


def test_load_graph_saved_by_real_mnn(tmp_path) -> None:
    pytest.importorskip("MNN")
    path = str(tmp_path / "real.mnn")
    _real(f"""
import MNN, numpy as np
F = MNN.expr
a = F.placeholder([2, 4]); a.name = 'a'
b = F.const(np.arange(8, dtype=np.float32).reshape(2, 4), [2, 4])
y = F.relu(a * b - 3.0); y.name = 'y'
s = F.reduce_sum(F.softmax(y, -1), [1]); s.name = 's'
c = F.const([1., 2., 3., 4.], [2, 2]); c.name = 'c'
F.save([y, s, c], {path!r})
""")
    vs = {v.name: v for v in F.load_as_list(path)}
    np.testing.assert_array_equal(vs["c"].read(), [[1, 2], [3, 4]])
    d = F.load_as_dict(path)
    inputs, outputs = F.get_inputs_and_outputs(d)
    assert list(inputs) == ["a"] and {"s", "c"} <= set(outputs)
    a = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)
    d["a"].write(a)
    exp_y = np.maximum(a * np.arange(8).reshape(2, 4) - 3, 0)
    np.testing.assert_allclose(d["y"].read(), exp_y, rtol=1e-6)
    e = np.exp(exp_y - exp_y.max(-1, keepdims=True))
    np.testing.assert_allclose(d["s"].read(), (e / e.sum(-1, keepdims=True)).sum(1), rtol=1e-5)


@pytest.mark.parametrize("name", ["mlp", "convbn", "opmix"])
def test_save_round_trip_of_real_converted_model(name, tmp_path) -> None:
    """A model real MNN converted, loaded by mnnjit (load_as_dict), saved by mnnjit, run by real MNN."""
    pytest.importorskip("MNN")
    import json
    entry = json.load(open(os.path.join(MODELS, "MANIFEST.json")))["entries"][name]
    if name == "opmix" and not hasattr(MNN.numpy, "pad"):
        pytest.skip("needs mnnjit.numpy.pad")
    outs = [o["name"] for o in entry["outputs"]]
    d = F.load_as_dict(os.path.join(MODELS, f"{name}.mnn"))
    path = str(tmp_path / f"{name}_again.mnn")
    F.save([d[o] for o in outs], path)
    data = np.load(os.path.join(MODELS, f"{name}.npz"))
    np.save(tmp_path / "in.npy", data["in0_x"])
    _real(f"""
import MNN, numpy as np
F = MNN.expr
x = np.load({str(tmp_path / 'in.npy')!r})
m = MNN.nn.load_module_from_file({path!r}, ['x'], {outs!r})
ys = m.forward([F.const(x, list(x.shape), F.NCHW)])
np.savez({str(tmp_path / 'out.npz')!r}, *[np.array(y.read()) for y in ys])
""")
    got = np.load(tmp_path / "out.npz")
    for k, o in enumerate(outs):
        np.testing.assert_allclose(got[f"arr_{k}"], data[f"out0_{o}"], atol=1e-4)
