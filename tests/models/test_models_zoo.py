"""Small zoo models (benchmarks/zoo) match real MNN's stored outputs: a transformer encoder, LSTM and
GRU While loops (uni- and bidirectional), a tiny ViT.

The fixtures in ``data/zoo`` are PyTorch exports converted by real MNN's converter, with a seeded
input and real MNN's output for it (made by ``benchmarks/zoo/build.py --no-onnx``), so this test
needs no torch. Real MNN, when installed, is also asked live on fresh inputs of other lengths.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import mnnjit as MNN

ZOO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "zoo")
with open(os.path.join(ZOO, "MANIFEST.json")) as _fh:
    ENTRIES: dict = json.load(_fh)["entries"]

#: forwards per check on the generated numpy function (the plan-kernel tier is tested on its own)
FORWARDS = 4


def close(got: np.ndarray, expected: np.ndarray, rel: float = 1e-3) -> bool:
    """Issue 6's tolerance: max|got - expected| <= rel * max(1, max|expected|)."""
    if got.shape != expected.shape:
        return False
    return float(np.abs(got.astype(np.float64) - expected).max()) <= rel * max(1.0, float(np.abs(expected).max()))


def _load(name: str, threads: int, precision: str = "normal"):
    rt = MNN.nn.create_runtime_manager(({"backend": "CPU", "numThread": threads, "precision": precision},))
    return MNN.nn.load_module_from_file(os.path.join(ZOO, ENTRIES[name]["files"]["mnn"]), ["x"], ["y"],
                                        runtime_manager=rt)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", list(ENTRIES))
def test_zoo_model_matches_real_mnn(name: str, threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "off")
    data = np.load(os.path.join(ZOO, ENTRIES[name]["files"]["npz"]))
    x, want = data["in0_x"], data["out0_y"]
    m = _load(name, threads)
    F = MNN.expr
    ph = F.placeholder(list(x.shape), F.NCHW)
    for i in range(FORWARDS):
        # both ways a user loop feeds a model: a new constant Var, or one placeholder written anew
        if i % 2:
            got = m.forward(F.const(x, list(x.shape), F.NCHW)).read()
        else:
            ph.write(x)
            got = m.forward(ph).read()
        assert close(got, want), (name, threads, i, float(np.abs(got - want).max()) if got.shape == want.shape
                                  else (got.shape, want.shape))


@pytest.mark.parametrize("name", ["tf_l1_s8_d64"])
def test_zoo_plan_kernel_matches_real_mnn(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole-plan kernel tier (compiled at the first forward here) on a zoo model."""
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "0")
    data = np.load(os.path.join(ZOO, ENTRIES[name]["files"]["npz"]))
    x, want = data["in0_x"], data["out0_y"]
    m = _load(name, 1)
    for _ in range(2):
        got = m.forward(MNN.expr.const(x, list(x.shape))).read()
        assert close(got, want), (name, float(np.abs(got - want).max()))


@pytest.mark.parametrize("name", list(ENTRIES))
def test_zoo_model_low_precision(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """precision=low may compute in reduced precision: 2e-2 of the output's scale."""
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "off")
    data = np.load(os.path.join(ZOO, ENTRIES[name]["files"]["npz"]))
    x, want = data["in0_x"], data["out0_y"]
    got = _load(name, 2, "low").forward(MNN.expr.const(x, list(x.shape))).read()
    assert close(got, want, 2e-2), (name, float(np.abs(got - want).max()))


@pytest.mark.parametrize("name", [n for n, e in ENTRIES.items() if e["kind"] in ("lstm", "gru")])
def test_zoo_rnn_other_lengths_match_live_real_mnn(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A recurrent model's While loop runs for the input's length: shorter and longer sequences on
    fresh inputs against real MNN itself (the exports fix the batch, not the length)."""
    real = pytest.importorskip("MNN")
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "off")
    path = os.path.join(ZOO, ENTRIES[name]["files"]["mnn"])
    t, b, f = ENTRIES[name]["inputs"][0]["shape"]
    rm = real.nn.load_module_from_file(path, ["x"], ["y"])
    m = _load(name, 1)
    rng = np.random.default_rng(3)
    for steps in (1, 3, t + 2):
        x = rng.standard_normal((steps, b, f)).astype(np.float32)
        want = rm.forward(real.expr.const(x, list(x.shape), real.expr.NCHW)).read()
        got = m.forward(MNN.expr.const(x, list(x.shape))).read()
        assert close(got, np.asarray(want)), (name, steps)


def test_plan_past_the_step_bound_stays_on_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel body calling more than ``whole_plan.MAX_STEPS`` step functions once its unrolled
    loops are folded back into loops is declined (its Numba compile would take minutes) and the
    forward stays correct: the bidirectional GRU over 50 steps (2,102 steps unrolled, its two
    directions' cells one loop body) under a bound of 20."""
    from mnnjit import settings as config
    from mnnjit.backends.cpu.codegen import whole_plan
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "0")
    monkeypatch.setattr(whole_plan, "MAX_STEPS", 20)
    name = "gru_bi_l1_t50_h64"
    data = np.load(os.path.join(ZOO, ENTRIES[name]["files"]["npz"]))
    x, want = data["in0_x"], data["out0_y"]
    m = _load(name, 1)
    before = config.counters["plan_kernel_declined"]
    for _ in range(2):
        got = m.forward(MNN.expr.const(x, list(x.shape))).read()
        assert close(got, want)
    assert len(m._last_plan.steps) > 1000
    assert config.counters["plan_kernel_declined"] == before + 1
