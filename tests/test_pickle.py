"""Pickling: Vars by value, Modules and RuntimeManagers by path and config, unpickled in another process.

One child process unpickles everything the parent pickled, runs it, and pickles back plain numpy
arrays and settings; the parent compares them with what the originals give.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as onp
import pytest

import mnnjit.expr as F
import mnnjit.nn as nn
import mnnjit.numpy as mnp
from mnnjit.testing import assert_array_equal

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "examples" / "models" / "small_cnn.mnn"

# The child: unpickle, run, pickle back numpy arrays and plain settings.
CHILD = r"""
import pickle, sys
import numpy as onp
import mnnjit.expr as F
with open(sys.argv[1], "rb") as f:
    objs = pickle.load(f)
out = {}
for key, v in objs["vars"].items():
    out[key] = (onp.array(v.read_view()), v.dtype.name, v.data_format.name, v.name, v.read())
rt = objs["rt"]
out["rt"] = (rt.backend, rt.precision, rt.memory, rt.power, rt.num_thread, rt.cache_path, rt.external_path,
             rt.mode, rt.hints)
x = objs["input"]
for key in ("module", "module_rt"):
    m = objs[key]
    out[key] = (m.name, m.forward(x).read(), m.get_info()["inputNames"], m.get_info()["outputNames"],
                None if m._rt is None else (m._rt.precision, m._rt.num_thread))
with open(sys.argv[2], "wb") as f:
    pickle.dump(out, f)
"""


def _vars() -> dict:
    rng = onp.random.default_rng(0)
    a = rng.standard_normal((2, 5, 3, 2)).astype(onp.float32)
    out = {
        "nchw_float": F.const(a, list(a.shape), F.NCHW),
        "nc4hw4_float": F.convert(F.const(a, list(a.shape), F.NCHW), F.NC4HW4),  # 5 channels: padded blocks
        "nhwc_uint8": F.const(rng.integers(0, 256, (4, 3, 2)).astype(onp.uint8), [4, 3, 2], F.NHWC, F.uint8),
        "int8": F.const(rng.integers(-128, 128, (7,)).astype(onp.int8), [7], F.NCHW, F.int8),
        "lazy_int": mnp.arange(12).reshape(3, 4) * 3,  # an unevaluated expression pickles its value
        "scalar": F.scalar(2.5),
    }
    out["nchw_float"].name = "weights"
    return out


def _run_child(tmp_path: Path, objs: dict) -> dict:
    src, dst = tmp_path / "in.pkl", tmp_path / "out.pkl"
    with open(src, "wb") as f:
        pickle.dump(objs, f)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(src), str(dst)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)  # another directory: paths must be absolute
    assert proc.returncode == 0, proc.stderr
    with open(dst, "rb") as f:
        return pickle.load(f)


def test_vars_modules_runtime_managers_unpickle_in_another_process(tmp_path):
    variables = _vars()
    rt = nn.create_runtime_manager({"precision": "high", "numThread": 2, "memory": "normal"})
    rt.set_cache(str(tmp_path / "cache.bin"))
    rt.set_hint(0, 3)
    rt.set_mode(9)
    rel_model = os.path.relpath(MODEL)  # a relative path: the pickle must carry the absolute one
    module = nn.load_module_from_file(rel_model, ["x"], ["logits"])
    module.set_name("plain")
    module_rt = nn.load_module_from_file(str(MODEL), ["x"], ["logits"], runtime_manager=rt)
    x = F.const(onp.random.default_rng(1).standard_normal((1, 3, 20, 16)).astype(onp.float32), [1, 3, 20, 16])
    got = _run_child(tmp_path, {"vars": variables, "rt": rt, "module": module, "module_rt": module_rt,
                                "input": x})

    for key, v in variables.items():
        value, dt, fmt, name, packed = got[key]
        assert_array_equal(value, v, err_msg=key)   # the logical value, whatever the format
        assert_array_equal(packed, v.read(), err_msg=key)  # and MNN's packed order for NC4HW4
        assert (dt, fmt, name) == (v.dtype.name, v.data_format.name, v.name)
    assert got["rt"] == (rt.backend, 1, 0, 0, 2, str(tmp_path / "cache.bin"), None, [9], {0: 3})
    want = module.forward(x).read()
    for key in ("module", "module_rt"):
        name, out, ins, outs, rt_cfg = got[key]
        onp.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6, err_msg=key)
        assert (ins, outs) == (["x"], ["logits"])
    assert got["module"][0] == "plain" and got["module"][4] is None
    assert got["module_rt"][4] == (1, 2)


class _Head(nn.Module):
    """A user-defined Module holding a loaded model and a Var parameter."""

    def __init__(self, body):
        super().__init__()
        self.body = body
        self.temperature = F.const([2.0], [1])

    def forward(self, x):
        return F.softmax(self.body.forward(x) / self.temperature, -1)


def test_user_module_pickles_its_children_and_parameters():
    head = _Head(nn.load_module_from_file(str(MODEL), ["x"], ["logits"]))
    x = F.const(onp.random.default_rng(2).standard_normal((1, 3, 12, 12)).astype(onp.float32), [1, 3, 12, 12])
    want = head.forward(x).read()
    copy = pickle.loads(pickle.dumps(head))
    assert copy is not head and copy.body is not head.body
    assert copy._children == [copy.body] and len(copy.parameters) == 1
    assert copy.parameters[0] is copy.temperature  # shared references survive
    onp.testing.assert_allclose(copy.forward(x).read(), want, rtol=1e-6)


def test_what_cannot_pickle_says_why():
    x = F.placeholder([2, 2])
    with pytest.raises(ValueError, match="placeholder"):
        pickle.dumps(x)
    graph = nn.load_module([x], [x * 2.0])
    with pytest.raises(TypeError, match="load_module_from_file"):
        pickle.dumps(graph)


def test_a_module_whose_file_is_gone_says_so(tmp_path):
    path = tmp_path / "copy.mnn"
    path.write_bytes(MODEL.read_bytes())
    data = pickle.dumps(nn.load_module_from_file(str(path), ["x"], ["logits"]))
    path.unlink()
    with pytest.raises(FileNotFoundError, match="pickles by path"):
        pickle.loads(data)
