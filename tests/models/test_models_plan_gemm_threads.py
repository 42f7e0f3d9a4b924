"""The whole-plan kernel's products on Numba's worker threads (backends/cpu/codegen/plan_gemm_par.py):
the parallel product split by column blocks or by batches matches numpy on its edge cases, and a
transformer block converted by real MNN's converter, run at 2 threads with its products above the
threading bound, matches real MNN and is marked threaded (its model sets the thread count per forward)."""
from __future__ import annotations

import numpy as np
import pytest
from mnnjit_models_fixtures import convert, real_mnn_forward, transformer_onnx

import mnnjit as MNN


def _ref(a, b, bias, bmode, act):
    want = a.astype(np.float64) @ b
    want = want + (bias[:b.shape[1]] if bmode == 1 else bias[:a.shape[0], None] if bmode == 2 else 0)
    return np.clip(want, 0, 6) if act == 2 else np.maximum(want, 0) if act == 1 else want


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_parallel_gemm_matches_numpy(threads: int) -> None:
    """Column splits with a partial last block and tail columns, a single block, rows over one row
    block, A in all three layouts, B packed or in place, both bias modes, NaN through relu6."""
    numba = pytest.importorskip("numba")
    from mnnjit.backends.cpu.codegen.plan_gemm import pack_a, pack_b
    from mnnjit.backends.cpu.codegen.plan_gemm_par import gemm_par
    rng = np.random.default_rng(7)
    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        for m, k, n in [(5, 7, 3), (13, 300, 37), (100, 33, 50), (7, 64, 16), (197, 40, 72)]:
            a = rng.standard_normal((m, k)).astype(np.float32)
            b = rng.standard_normal((k, n)).astype(np.float32)
            a[0, 0] = np.nan
            for ta in (0, 1, 2):
                av = pack_a(a) if ta == 2 else np.ascontiguousarray(a.T if ta else a).ravel()
                for bpk, bv in ((False, b.ravel()), (True, pack_b(b))):
                    for bmode, bias, act in ((0, np.zeros(1, np.float32), 0),
                                             (1, rng.standard_normal(n).astype(np.float32), 2),
                                             (2, rng.standard_normal(m).astype(np.float32), 1)):
                        c = np.full(m * n, 7.0, np.float32)
                        gemm_par(av, ta, m, k, bv, bpk, n, c, bias, bmode, act, 0, threads)
                        want = _ref(a, b, bias, bmode, act)
                        got = c.reshape(m, n)
                        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=str((m, k, n)))
                        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str((m, k, n, ta, bpk)))
        for nb, m, k, n in [(5, 9, 16, 20), (2, 40, 8, 33), (1, 6, 6, 6)]:
            a = rng.standard_normal((nb, m, k)).astype(np.float32)
            b = rng.standard_normal((nb, k, n)).astype(np.float32)
            c = np.full(nb * m * n, 7.0, np.float32)
            gemm_par(a.ravel(), 0, m, k, b.ravel(), False, n, c, np.zeros(1, np.float32), 0, 0, nb, threads)
            np.testing.assert_allclose(c.reshape(nb, m, n), np.matmul(a, b), rtol=1e-4, atol=1e-4)
        with pytest.raises(TypeError, match="float32"):
            gemm_par(a.astype(np.float64).ravel(), 0, m, k, b.ravel(), False, n, c, c, 0, 0, nb, threads)
    finally:
        numba.set_num_threads(before)


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

