"""The whole-plan kernel's products and softmax on Numba's worker threads
(backends/cpu/codegen/plan_gemm_par.py): every threaded step kind (products split by column blocks
with tail columns, by batches; softmax rows) matches numpy, and a transformer block converted by
real MNN's converter, run at 2 threads with its products above the threading bound, matches real
MNN and is marked threaded (its model sets the thread count per forward)."""
from __future__ import annotations

import numpy as np
import pytest
from mnnjit_models_fixtures import convert, real_mnn_forward, transformer_onnx

import mnnjit as MNN


def _case_model():
    """One model of every threaded step kind: constant weights with tail columns, bias and relu6;
    two computed operands, the left one transposed; a batched product; a row softmax (each above
    the threading bound)."""
    from mnnjit.ops import build as B
    rng = np.random.default_rng(7)
    w = rng.standard_normal((300, 200)).astype(np.float32) * 0.1
    bias = rng.standard_normal(200).astype(np.float32)
    shapes = [(64, 300), (96, 64), (96, 72), (3, 40, 64), (3, 64, 50), (4, 64, 150)]
    xs = [MNN.expr.placeholder(list(s)) for s in shapes]
    n = [x._node for x in xs]
    outs = [
        B.make_node("matmul_ex", [n[0], MNN.expr.const(w, [300, 200])._node, MNN.expr.const(bias, [200])._node],
                    {"act": "relu6"}),
        B.make_node("matmul_ex", [n[1], n[2]], {"transpose_a": True}),
        B.make_node("matmul", [n[3], n[4]]),
        B.make_node("softmax", [n[5]], {"axis": -1}),
    ]

    def ref(x0, x1, x2, x3, x4, x5):
        e = np.exp(x5 - x5.max(-1, keepdims=True))
        return [np.clip(x0 @ w + bias, 0, 6), x1.T @ x2, np.matmul(x3, x4), e / e.sum(-1, keepdims=True)]
    return xs, [B.wrap(o) for o in outs], shapes, ref


@pytest.mark.parametrize("threads", [2, 3])
def test_threaded_steps_match_numpy(threads: int, monkeypatch) -> None:
    """Each threaded step kind, compiled whole and run with more than one thread (3: more than this
    machine may have: the team's size bounds the split), against numpy; the plan is threaded."""
    from mnnjit.backends.cpu.codegen.plan_gemm_steps import PAR_MACS, SOFTMAX_WORK
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "0")
    xs, outs, shapes, ref = _case_model()
    assert 4 * 64 * 150 * SOFTMAX_WORK >= PAR_MACS and 64 * 72 * 96 >= PAR_MACS
    from mnnjit import compiler
    m = MNN.nn.load_module(xs, outs)
    before = compiler.get_num_threads()
    compiler.set_num_threads(threads)   # (the calling thread's team: a Module of Vars has no runtime manager)
    try:
        rng = np.random.default_rng(8)
        for _ in range(3):
            vals = [rng.standard_normal(s).astype(np.float32) for s in shapes]
            got = [o.read() for o in m.forward([MNN.expr.const(v, list(v.shape)) for v in vals])]
            for g, want in zip(got, ref(*vals)):
                np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4)
    finally:
        compiler.set_num_threads(before)
    plan = m._last_plan
    assert getattr(plan.run, "__qualname__", "").startswith("_runner"), "not compiled whole"
    assert plan.threaded


def test_threaded_transformer_matches_real_mnn(tmp_path, monkeypatch) -> None:
    """A transformer block whose projections and attention products are above the threading bound,
    compiled whole and run at 1 and 2 threads, against real MNN."""
    pytest.importorskip("MNN")
    from mnnjit.backends.cpu.codegen.plan_gemm_steps import PAR_MACS
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "0")
    seq, d, ff = 32, 128, 256
    assert seq * d * d >= PAR_MACS
    path = convert(transformer_onnx(str(tmp_path / "t.onnx"), d=d, heads=2, seq=seq, ff=ff),
                   str(tmp_path / "t.mnn"))
    x = np.random.default_rng(2).standard_normal((1, seq, d)).astype(np.float32)
    want = real_mnn_forward(path, {"x": x}, ["y"])[0]
    for threads in (2, 1):
        rt = MNN.nn.create_runtime_manager(({"backend": "CPU", "numThread": threads},))
        m = MNN.nn.load_module_from_file(path, ["x"], ["y"], runtime_manager=rt)
        for _ in range(3):
            got = m.forward(MNN.expr.const(x, list(x.shape))).read()
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(want).max())))
        plan = m._last_plan
        assert getattr(plan.run, "__qualname__", "").startswith("_runner"), "not compiled whole"
        assert plan.threaded


def test_small_kernels_are_not_threaded(monkeypatch) -> None:
    """A kernel whose products are all below the bound runs on the calling thread alone: its model
    sets no thread count per forward."""
    from mnnjit.ops import build as B
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "0")
    w = np.random.default_rng(1).standard_normal((16, 32)).astype(np.float32)
    x = MNN.expr.placeholder([8, 16])
    y = B.wrap(B.make_node("matmul_ex", [x._node, MNN.expr.const(w, [16, 32])._node], {}))
    m = MNN.nn.load_module([x], [y])
    xv = np.random.default_rng(2).standard_normal((8, 16)).astype(np.float32)
    for _ in range(2):
        got = m.forward([MNN.expr.const(xv, [8, 16])])[0].read()
    np.testing.assert_allclose(got, xv @ w, rtol=1e-5, atol=1e-5)
    assert getattr(m._last_plan.run, "__qualname__", "").startswith("_runner")
    assert not m._last_plan.threaded




def test_threaded_steps_keep_their_scratch_alive() -> None:
    """The parallel product's per-thread scratch is allocated inside it and reached only by
    address: it must stay allocated while the tasks write into it (it was freed before the loop:
    heap corruption). The threaded steps run in a process whose allocator maps every block from
    64 KB on by itself and unmaps it when freed, so a write after the free crashes."""
    import os
    import subprocess
    import sys
    code = (
        "import sys, numpy as np\n"
        f"sys.path[:0] = [{os.path.dirname(__file__)!r}, {os.path.dirname(os.path.dirname(__file__))!r}]\n"
        "import test_models_plan_gemm_threads as t\n"
        "from mnnjit import compiler\n"
        "import mnnjit as MNN\n"
        "xs, outs, shapes, ref = t._case_model()\n"
        "m = MNN.nn.load_module(xs, outs)\n"
        "compiler.set_num_threads(2)\n"
        "rng = np.random.default_rng(9)\n"
        "for _ in range(6):\n"
        "    vals = [rng.standard_normal(s).astype(np.float32) for s in shapes]\n"
        "    got = [o.read() for o in m.forward([MNN.expr.const(v, list(v.shape)) for v in vals])]\n"
        "    for g, w in zip(got, ref(*vals)):\n"
        "        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)\n"
        "assert getattr(m._last_plan.run, '__qualname__', '').startswith('_runner')\n"
        "print('ok')\n")
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MNNJIT_PLAN_KERNEL_CALLS="0", MNNJIT_COMPILE="sync")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0 and "ok" in out.stdout, (out.returncode, out.stderr[-3000:])
