"""Small and sequence models run as one compiled plan kernel (backends/cpu/codegen/whole_plan.py):
a transformer encoder block, an LSTM and a GRU converted by real MNN's converter compile whole
(slices, concat, gathers, layer norm, batched matmuls, sigmoid / tanh) and match real MNN; the
new step writers match numpy on their edge cases; a kernel still compiling in the background
leaves the plan warm (asked for again later), not declined."""
from __future__ import annotations

import os

import numpy as np
import pytest
from mnnjit_models_fixtures import _Builder, convert, lstm_onnx, real_mnn_forward, transformer_onnx

import mnnjit as MNN
from mnnjit import settings as config
from mnnjit.ops import build as B

nn, F = MNN.nn, MNN.expr


@pytest.fixture(autouse=True)
def _compile_at_once(monkeypatch):
    """Plans compile on their second forward (the first one runs the step loop)."""
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "0")


def _compiled(mod) -> bool:
    return getattr(mod._last_plan.run, "__qualname__", "").startswith("_runner")


def gru_onnx(path: str, inp: int = 16, hidden: int = 32, seq: int = 6, seed: int = 3) -> str:
    """A one-layer GRU (ONNX GRU op, linear_before_reset as PyTorch exports it)."""
    b = _Builder(seed)
    w = b.weight((1, 3 * hidden, inp), scale=0.3)
    r = b.weight((1, 3 * hidden, hidden), scale=0.3)
    bias = b.init((b.rng.standard_normal((1, 6 * hidden)) * 0.1).astype(np.float32), "b")
    b.op("GRU", ["x", w, r, bias], n_out=2, hidden_size=hidden, linear_before_reset=1)
    b.nodes[-1].output[:] = ["seq_out", "h_last"]
    return b.save(path, [b.io("x", [seq, 1, inp])],
                  [b.io("seq_out", [seq, 1, 1, hidden]), b.io("h_last", [1, 1, hidden])])


_MODELS = {
    "transformer_erf": (lambda p: transformer_onnx(p, d=64, heads=4, seq=8, ff=128), {"x": (1, 8, 64)}, ["y"]),
    "transformer_tanh": (lambda p: transformer_onnx(p, d=32, heads=2, seq=5, ff=64, gelu_tanh=True),
                         {"x": (1, 5, 32)}, ["y"]),
    "lstm": (lambda p: lstm_onnx(p, inp=32, hidden=64, seq=10), {"x": (10, 1, 32)},
             ["seq_out", "h_last", "c_last"]),
    "gru": (gru_onnx, {"x": (6, 1, 16)}, ["seq_out", "h_last"]),
}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """Every model of ``_MODELS`` converted by real MNN (once per module)."""
    d = tmp_path_factory.mktemp("small_forward")
    out = {}
    for name, (make, _, _) in _MODELS.items():
        onnx_path = make(str(d / f"{name}.onnx"))
        out[name] = convert(onnx_path, str(d / f"{name}.mnn"))
    return out


@pytest.mark.parametrize("name", sorted(_MODELS))
def test_sequence_models_compile_whole_and_match_real_mnn(converted, name) -> None:
    _, shapes, outs = _MODELS[name]
    path = converted[name]
    rng = np.random.default_rng(7)
    mod = nn.load_module_from_file(path, list(shapes), outs)
    before = config.counters["plan_kernels"]
    for k in range(3):  # step loop, then the compiled kernel (twice: no state kept between calls)
        feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}
        got = [o.read() for o in mod.forward([F.const(a, list(a.shape)) for a in feeds.values()])]
        want = real_mnn_forward(path, feeds, outs)
        for g, e in zip(got, want):
            assert g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=0, atol=1e-4 * max(1.0, float(np.abs(e).max())))
    assert _compiled(mod), f"{name}: the plan did not compile into one kernel"
    assert config.counters["plan_kernels"] == before + 1


def _module(build, shapes):
    xs = [F.placeholder(list(s)) for s in shapes]
    return nn.load_module(xs, [B.wrap(build(*[x._node for x in xs]))])


def _ints(values) -> object:
    """A constant int32 index node."""
    arr = np.asarray(values, np.int32)
    return F.const(arr, list(arr.shape), F.NCHW, F.int)._node


_CASES = {
    # strided, negative-start and contiguous slices
    "slice_step": ([(6, 5)], lambda x: B.make_node("slice", [x], {"begin": (1, 0), "end": (6, 5), "step": (2, 2)}),
                   lambda x: x[1:6:2, 0:5:2]),
    "slice_rows": ([(6, 5)], lambda x: B.make_node("slice", [x], {"begin": (2, 0), "end": (4, 5), "step": (1, 1)}),
                   lambda x: x[2:4]),
    "slice_cols": ([(3, 8)], lambda x: B.make_node("slice", [x], {"begin": (0, 3), "end": (3, 8), "step": (1, 1)}),
                   lambda x: x[:, 3:]),
    "concat_mid": ([(2, 3, 4), (2, 1, 4)], lambda a, b: B.make_node("concat", [a, b, a], {"axis": 1}),
                   lambda a, b: np.concatenate([a, b, a], 1)),
    "take_many": ([(4, 5, 3)], lambda x: B.make_node("take", [x, _ints([3, 0, -1])],
                                                     {"axis": 1}),
                  lambda x: np.take(x, [3, 0, -1], axis=1)),
    "take_row": ([(4, 6)], lambda x: B.make_node("take", [x, _ints(2)], {"axis": 0}),
                 lambda x: x[2]),
    "layer_norm_2axes": ([(3, 4, 5)], lambda x: B.make_node(
        "layer_norm", [x, F.const(np.linspace(0.5, 1.5, 20, dtype=np.float32).reshape(4, 5), [4, 5])._node],
        {"axes": (1, 2), "eps": 1e-5}),
        lambda x: ((x - x.mean((1, 2), keepdims=True)) / np.sqrt(x.var((1, 2), keepdims=True) + 1e-5))
        * np.linspace(0.5, 1.5, 20, dtype=np.float32).reshape(4, 5)),
    "rms_norm": ([(2, 7)], lambda x: B.make_node("layer_norm", [x], {"axes": (1,), "eps": 1e-6, "rms": True}),
                 lambda x: x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-6)),
    "batched_matmul_broadcast": ([(2, 1, 3, 4), (3, 4, 5)], lambda a, b: B.make_node("matmul", [a, b]),
                                 lambda a, b: np.matmul(a, b)),
    "transpose_view": ([(1, 6, 4)], lambda x: B.make_node("transpose", [x], {"perm": (1, 0, 2)}),
                       lambda x: np.transpose(x, (1, 0, 2))),
    "tanh_wide": ([(5, 40)], lambda x: B.make_node("tanh", [B.make_node("mul", [x, F.const(np.float32(3), [])._node])]),
                  lambda x: np.tanh(x * np.float32(3))),
    "matmul_rows": ([(7, 9)], lambda x: B.make_node(
        "matmul_ex", [x, F.const(np.arange(9 * 20, dtype=np.float32).reshape(9, 20) / 50, [9, 20])._node,
                      F.const(np.arange(20, dtype=np.float32) / 10, [20])._node], {"act": "relu6"}),
        lambda x: np.clip(x @ (np.arange(9 * 20, dtype=np.float32).reshape(9, 20) / 50)
                          + np.arange(20, dtype=np.float32) / 10, 0, 6)),
}


def _patch_conv(x):
    from mnnjit.ops.mnn_conv import ConvWeights
    w, b = _PATCH_W
    return B.make_node("mnn_conv2d", [x], {"weights": ConvWeights(w.shape, b, w), "stride": (4, 4),
                                           "dilation": (1, 1), "pads": (0, 0, 0, 0), "group": 1, "act": "relu"})


def _patch_conv_ref(x):
    w, b = _PATCH_W
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    cols = x.reshape(n, c, h // kh, kh, wd // kw, kw).transpose(0, 2, 4, 1, 3, 5).reshape(n, -1, c * kh * kw)
    y = cols @ w.reshape(o, -1).T + b
    return np.maximum(y, 0).transpose(0, 2, 1).reshape(n, o, h // kh, wd // kw)


_PATCH_W = (np.random.default_rng(11).standard_normal((20, 3, 4, 4)).astype(np.float32) * 0.2,
            np.linspace(-0.5, 0.5, 20, dtype=np.float32))
_WIDE_W = np.random.default_rng(12).standard_normal((40, 300)).astype(np.float32) * 0.1

# steps the kernel runs on the packed GEMM (plan_gemm_steps) and the row helpers (plan_rows)
_CASES.update({
    # k over one pass of the micro-kernel (accumulated in C), transposed constant weights, bias, relu
    "gemm_linear_deep": ([(20, 300)], lambda x: B.make_node(
        "matmul_ex", [x, F.const(_WIDE_W, [40, 300])._node, F.const(np.arange(40, dtype=np.float32) / 40, [40])._node],
        {"transpose_b": True, "act": "relu"}),
        lambda x: np.maximum(x @ _WIDE_W.T + np.arange(40, dtype=np.float32) / 40, 0)),
    # both operands computed, the left one transposed
    "gemm_computed": ([(24, 13), (24, 33)], lambda a, b: B.make_node("matmul_ex", [a, b], {"transpose_a": True}),
                      lambda a, b: a.T @ b),
    "gemm_batched": ([(2, 3, 20, 16), (2, 3, 16, 25)], lambda a, b: B.make_node("matmul", [a, b]),
                     lambda a, b: np.matmul(a, b)),
    "patch_conv": ([(2, 3, 16, 12)], _patch_conv, _patch_conv_ref),
    "softmax_last": ([(3, 7, 37)], lambda x: B.make_node("softmax", [x], {"axis": -1}),
                     lambda x: np.exp(x - x.max(-1, keepdims=True)) / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)),
})


def test_gemm_helper_matches_numpy() -> None:
    """plan_gemm.gemm on its edge cases: partial panels and column blocks, k over one pass, more
    rows than one row block, A transposed or packed, B packed or in place, both bias modes, relu6
    keeping NaN."""
    from mnnjit.backends.cpu.codegen.plan_gemm import gemm, pack_a, pack_b, scratch_size
    rng = np.random.default_rng(4)
    for m, k, n in [(1, 8, 16), (5, 7, 3), (6, 16, 16), (13, 300, 37), (100, 33, 50), (7, 520, 18), (197, 9, 17)]:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        a[0, 0] = np.nan
        s = np.empty(scratch_size(m, k), np.float32)
        c = np.full(m * n, 7.0, np.float32)
        for ta in (0, 1, 2):
            av = pack_a(a) if ta == 2 else np.ascontiguousarray(a.T if ta else a).ravel()
            for bpk, bv in ((False, b.ravel()), (True, pack_b(b))):
                for bmode, bias, act in ((0, s, 0), (1, rng.standard_normal(n).astype(np.float32), 2),
                                         (2, rng.standard_normal(m).astype(np.float32), 1)):
                    gemm(av, ta, m, k, bv, bpk, n, c, bias, bmode, act, s)
                    want = a.astype(np.float64) @ b
                    want = want + (bias[:n] if bmode == 1 else bias[:m, None] if bmode == 2 else 0)
                    want = np.clip(want, 0, 6) if act == 2 else np.maximum(want, 0) if act == 1 else want
                    got = c.reshape(m, n)
                    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=str((m, k, n)))
                    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str((m, k, n, ta, bpk)))


def test_row_helpers_match_numpy() -> None:
    """plan_rows: softmax and layer norm over rows, NaN and infinities as numpy computes them."""
    from mnnjit.backends.cpu.codegen.plan_rows import layer_norm_rows, softmax_rows
    rng = np.random.default_rng(6)
    x = rng.standard_normal((6, 29)).astype(np.float32) * 4
    x[1, 3], x[2, 5], x[3, 0] = np.nan, np.inf, -np.inf
    o = np.empty_like(x)
    softmax_rows(x.ravel(), o.reshape(-1), 6, 29)
    with np.errstate(all="ignore"):
        e = np.exp(x - x.max(1, keepdims=True))
        want = e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-7)
    g, b = rng.standard_normal(29).astype(np.float32), rng.standard_normal(29).astype(np.float32)
    layer_norm_rows(x.ravel(), o.reshape(-1), 6, 29, g, True, b, True, np.float32(1e-5), False)
    with np.errstate(all="ignore"):
        want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + np.float32(1e-5)) * g + b
    np.testing.assert_allclose(o, want, rtol=1e-4, atol=1e-5)


def test_step_writers_match_numpy() -> None:
    # every case in one model (one kernel to compile): a case the kernel declined would leave the
    # whole plan on numpy, which the last assertion catches
    names = sorted(_CASES)
    shapes = [s for n in names for s in _CASES[n][0]]
    xs = [F.placeholder(list(s)) for s in shapes]
    outs, k = [], 0
    for n in names:
        count = len(_CASES[n][0])
        outs.append(B.wrap(_CASES[n][1](*[x._node for x in xs[k:k + count]])))
        k += count
    mod = nn.load_module(xs, outs)
    rng = np.random.default_rng(5)
    for _ in range(3):
        vals = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        got = [o.read() for o in mod.forward([F.const(v, list(v.shape)) for v in vals])]
        k = 0
        for n, g in zip(names, got):
            count = len(_CASES[n][0])
            want = _CASES[n][2](*vals[k:k + count])
            k += count
            assert g.shape == want.shape, n
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5, err_msg=n)
    assert _compiled(mod), "a case was not compiled into the plan kernel"


_ROWS_W = np.random.default_rng(13).standard_normal((64, 32)).astype(np.float32) * 0.2
_FEW_W = np.random.default_rng(14).standard_normal((100, 48)).astype(np.float32) * 0.1


@pytest.mark.parametrize("name,shape,build,ref,gemm", [
    # a linear layer on a batch of rows as MNN's converter writes small ones: one GEMM over all rows
    ("matmul_3d_by_2d_weights", (1, 8, 64), lambda x: B.make_node("matmul", [x, F.const(_ROWS_W, [64, 32])._node]),
     lambda x: x @ _ROWS_W, True),
    # four rows, a small product: the kernel's row loops (each weight loaded once for the rows)
    ("matmul_ex_few_rows", (4, 100), lambda x: B.make_node(
        "matmul_ex", [x, F.const(_FEW_W, [100, 48])._node, F.const(np.linspace(-1, 1, 48, dtype=np.float32), [48])._node],
        {"act": "relu"}), lambda x: np.maximum(x @ _FEW_W + np.linspace(-1, 1, 48, dtype=np.float32), 0), False),
])
def test_products_take_the_gemm_or_the_row_loops(name, shape, build, ref, gemm) -> None:
    from mnnjit.backends.cpu.codegen.whole_plan import plan_source
    mod = _module(build, [shape])
    rng = np.random.default_rng(6)
    for _ in range(3):
        x = rng.standard_normal(shape).astype(np.float32)
        got = mod.forward([F.const(x, list(shape))])[0].read()
        np.testing.assert_allclose(got, ref(x), rtol=1e-5, atol=1e-5, err_msg=name)
    assert _compiled(mod)
    sl = mod._last_plan.step_list
    source, _ = plan_source(sl.steps, sl.init, sl.feed_slots, sl.out_slots, sl.order)
    assert ("gemm_linked(" in source) == gemm, name


def test_tanh_keeps_nan_and_saturates() -> None:
    mod = _module(lambda x: B.make_node("tanh", [x]), [(8,)])
    xv = np.array([np.nan, np.inf, -np.inf, 0.0, 1e-20, -0.05, 0.2, 30.0], np.float32)
    for _ in range(2):
        got = mod.forward([F.const(xv, [8])])[0].read()
    assert _compiled(mod)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(np.tanh(xv)))
    np.testing.assert_allclose(got, np.tanh(xv), rtol=1e-6, atol=0)


def test_a_kernel_compiling_in_the_background_is_asked_for_again(monkeypatch) -> None:
    from mnnjit.backends import registry
    backend = registry.current()
    real = backend.compile_step_list
    answers = [False, False]

    def deferred_then_ready(*args, **kwargs):
        return answers.pop(0) if answers else real(*args, **kwargs)
    monkeypatch.setattr(backend, "compile_step_list", deferred_then_ready)
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "1")
    mod = _module(lambda x: B.make_node("sigmoid", [x]), [(3, 4)])
    xv = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    for _ in range(10):
        got = mod.forward([F.const(xv, [3, 4])])[0].read()
        np.testing.assert_allclose(got, 1 / (1 + np.exp(-xv)), rtol=1e-6)
    assert not answers and _compiled(mod)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(pytest.main([os.path.abspath(__file__), "-n", "0", "-q"]))
