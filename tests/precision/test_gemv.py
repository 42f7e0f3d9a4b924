"""The classifier GEMV (:mod:`mnnjit.backends.cpu.gemm.gemv`) against numpy (``matmul_ex``'s reference):
either operand constant, transpose flags, 1-D and 2-D activations of 1-4 rows, bias shapes,
relu/relu6, float16 storage, the parallel split; which matmuls it declines; and MobileNetV2's
classifier as a kernel step inside the executor."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("numba")
from mnnjit.backends.cpu.gemm import gemv as G  # noqa: E402
from mnnjit.backends.cpu.fp16 import to_f16, to_f32  # noqa: E402
from mnnjit.ops import registry  # noqa: E402

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_REF = registry.get("matmul_ex").ref


@st.composite
def fc_cases(draw):
    """(a, b, const index, bias or None, attrs) for a matmul_ex the GEMV takes."""
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    K, N = draw(st.integers(1, 300)), draw(st.integers(1, 70))
    const = draw(st.integers(0, 1))
    ta, tb = draw(st.booleans()), draw(st.booleans())
    rows = draw(st.sampled_from([None, 1, 2, 3, 4]))       # None: a 1-D activation
    if const == 0:   # y = W' @ x', W' [N, K], x' [K, M]
        a = rng.standard_normal((K, N) if ta else (N, K))
        b = rng.standard_normal(K) if rows is None else \
            rng.standard_normal((rows, K) if tb else (K, rows))
        out = (N,) if rows is None else (N, rows)
    else:            # y = x' @ W', x' [M, K], W' [K, N]
        b = rng.standard_normal((N, K) if tb else (K, N))
        a = rng.standard_normal(K) if rows is None else \
            rng.standard_normal((K, rows) if ta else (rows, K))
        out = (N,) if rows is None else (rows, N)
    shapes = [None, out, (out[-1],), (1,)] + ([(out[0], 1)] if len(out) == 2 else [])
    bshape = draw(st.sampled_from(shapes))
    bias = None if bshape is None else rng.standard_normal(bshape).astype(np.float32)
    attrs = {"transpose_a": ta, "transpose_b": tb, "act": draw(st.sampled_from(["", "relu", "relu6"]))}
    return a.astype(np.float32), b.astype(np.float32), const, bias, attrs


def _run(a, b, const, bias, attrs, half=False):
    """(kernel output as float32, numpy reference, sum |w||x| + |bias| bound per output)."""
    x = b if const == 0 else a
    ref_ops = [a, b] + ([] if bias is None else [bias])
    out_shape = np.asarray(_REF(ref_ops, attrs)).shape
    op = G.matmul_gemv(a if const == 0 else b, const, x.shape, bias, attrs, out_shape,
                       half_weights=half)
    assert op is not None
    xs = to_f16(x).view(np.uint16) if half else x
    out = np.empty(out_shape, np.uint16 if half else np.float32)
    op.run(xs, out)
    got = to_f32(out.view(np.float16)) if half else out
    if half:   # the reference on the half-rounded activations and weights
        ref_ops[1 - const] = to_f32(xs.view(np.float16))
        ref_ops[const] = ref_ops[const].astype(np.float16).astype(np.float32)
    ref = np.asarray(_REF(ref_ops, attrs), np.float32)
    mag_ops = [np.abs(v) for v in ref_ops]
    mag = np.asarray(_REF(mag_ops[:2], {**attrs, "act": ""}), np.float64)
    if bias is not None:
        mag = mag + np.abs(bias)
    return got, ref, mag


@SETTINGS
@given(fc_cases())
def test_gemv_matches_numpy(case):
    got, ref, mag = _run(*case)
    assert got.shape == ref.shape
    assert np.all(np.abs(got.astype(np.float64) - ref) <= 1e-5 * mag + 1e-30)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fc_cases())
def test_gemv_half_storage(case):
    """precision=low: float16 activations in and out and float16 weights, float32 sums, one
    rounding of the result to half."""
    got, ref, mag = _run(*case, half=True)
    assert np.all(np.abs(got - ref) <= 1e-3 * np.abs(ref) + 1e-5 * mag + 1e-7)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 200), st.integers(1, 90), st.integers(1, 4), st.integers(1, 5),
       st.booleans(), st.integers(0, 2**31))
def test_gemv_parallel_split(K, N, M, threads, transposed, seed):
    """Rows split over tasks (whole 8-row blocks, the last task the remainder) give the serial
    result exactly, for any number of tasks."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((N, K)).astype(np.float32)
    x = rng.standard_normal((M, K)).astype(np.float32)
    bias = rng.standard_normal((M, N)).astype(np.float32)
    one = np.empty((N, M) if transposed else (M, N), np.float32)
    many = np.empty_like(one)
    G.gemv(w, x, bias, one, "relu", 1, transposed)
    prev = G.PARALLEL_MACS
    G.PARALLEL_MACS = 0
    try:
        G.gemv(w, x, bias, many, "relu", threads, transposed)
    finally:
        G.PARALLEL_MACS = prev
    assert np.array_equal(one, many)
    ref = np.maximum(x @ w.T + bias, 0)
    assert np.allclose(many.T if transposed else many, ref, rtol=1e-5, atol=1e-4)


def test_gemv_declines_and_rejects():
    """Batched or wide operands stay on the reference path; mismatched arrays raise."""
    w = np.ones((10, 6), np.float32)
    attrs = {"transpose_a": False, "transpose_b": False, "act": ""}
    assert G.matmul_gemv(w, 0, (6, 5), None, attrs, (10, 5)) is None            # 5 rows
    assert G.matmul_gemv(w, 0, (2, 6, 1), None, attrs, (2, 10, 1)) is None      # batched
    assert G.matmul_gemv(w, 0, (7,), None, attrs, (10,)) is None                # K mismatch
    assert G.matmul_gemv(w, 0, (6,), None, {**attrs, "act": "tanh"}, (10,)) is None
    assert G.matmul_gemv(w, 0, (6, 1), np.ones((3, 10, 1), np.float32), attrs, (10, 1)) is None
    assert G.matmul_gemv(w.astype(np.float16), 0, (6,), None, attrs, (10,)) is None
    assert G.matmul_gemv(w, 0, (6, 0), None, attrs, (10, 0)) is None              # no rows
    assert G.matmul_gemv(w[:, :0], 0, (0,), None, attrs, (10,)) is None           # K = 0
    op = G.matmul_gemv(w, 0, (6,), None, attrs, (10,))
    assert op is not None and op.nbytes >= w.nbytes
    with pytest.raises(ValueError):
        G.gemv(w, np.ones((1, 5), np.float32), np.zeros((1, 10), np.float32),
               np.empty((1, 10), np.float32))
    with pytest.raises(TypeError):
        G.gemv(w, np.ones((1, 6)), np.zeros((1, 10), np.float32), np.empty((1, 10), np.float32))
    with pytest.raises(ValueError):
        G.Gemv(w, None, "", (6, 9), False, (10, 9), True)


@pytest.mark.parametrize("config,tol", [({"numThread": 2}, 1e-4), ({"precision": "low"}, 2e-2)])
def test_mobilenetv2_classifier_is_a_gemv_step(shared_dir, config, tol):
    """MobileNetV2's 1280 -> 1000 classifier runs as an ``fc`` step (its matrix held once, by
    the step) and the logits still match the recorded ones."""
    import mnnjit as MNN
    path = str(shared_dir / "models" / "mobilenetv2.mnn")
    data = np.load(shared_dir / "models" / "mobilenetv2.npz")
    rt = MNN.nn.create_runtime_manager(config)
    m = MNN.nn.load_module_from_file(path, ["x"], ["logits"], runtime_manager=rt)
    y = np.asarray(m.forward(MNN.expr.const(data["in0_x"], [1, 3, 224, 224])).read())
    net = m._last_plan
    fc = [st_ for st_ in net.steps if st_.kind == "fc"]
    assert len(fc) == 1 and (fc[0].op.N, fc[0].op.K) == (1000, 1280)
    assert fc[0].op.w.dtype == (np.uint16 if config.get("precision") == "low" else np.float32)
    k = next(t for t, s in enumerate(net.steps) if s is fc[0])
    assert net.steps[k - 1].kind == "gap"       # the flattening reshape between them is dropped
    assert not any(isinstance(v, np.ndarray) and v.size >= 1000 * 1280 for v in net.init)
    ref = data["out0_logits"].reshape(-1)
    assert np.abs(y.reshape(-1) - ref).max() <= tol * max(1.0, float(np.abs(ref).max()))
