"""The CNN kernel-step executor's kernels against float64 references: the GEMM micro-kernel
convolutions (every kernel/stride/padding/dilation/group, fused activations, float32 and float16
storage, float and quantized weights) and the depthwise kernel."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from precision_refs import act_ref, conv_ref

K = pytest.importorskip("mnnjit.backends.cpu.gemm.conv")
from mnnjit.backends.cpu.depthwise.planes import Depthwise, depthwise_conv2d  # noqa: E402
from mnnjit.backends.cpu.fp16 import to_f16, to_f32  # noqa: E402
from mnnjit.backends.cpu.cnn_steps import storage_view  # noqa: E402
from mnnjit.backends.cpu.quant import QuantRows  # noqa: E402

ACTS = ["", "relu", "relu6", "sigmoid", "tanh", "hard_swish", "silu"]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def conv_cases(draw, depthwise: bool = False):
    n = draw(st.integers(1, 2))
    group = 1
    if depthwise:
        c = o = draw(st.integers(1, 9))
        group = c
    else:
        group = draw(st.sampled_from([1, 1, 1, 2, 3]))
        c = group * draw(st.integers(1, 6))
        o = group * draw(st.integers(1, 9))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    h, w = draw(st.integers(1, 21)), draw(st.integers(1, 40))
    assume(h + pads[0] + pads[1] >= (kh - 1) * d[0] + 1 and w + pads[2] + pads[3] >= (kw - 1) * d[1] + 1)
    return n, c, o, h, w, kh, kw, s, d, pads, group, draw(st.sampled_from(ACTS)), draw(st.integers(0, 2**31))


def _data(case):
    n, c, o, h, w, kh, kw, s, d, pads, group, act, seed = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((o, c // group, kh, kw)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    return x, wt, b


@SETTINGS
@given(conv_cases(), st.booleans())
def test_conv_gemm_matches_reference(case, half):
    n, c, o, h, w, kh, kw, s, d, pads, group, act, _ = case
    x, wt, b = _data(case)
    mat = wt.reshape(o, -1)
    pw = K.pack_grouped(mat, group) if group > 1 else K.PackedWeights.from_dense(mat)
    cv = K.ConvGemm(pw, b, x.shape, (kh, kw), s, pads, d, group, act)
    xs = to_f16(x) if half else x
    out = np.empty(cv.out_shape, xs.dtype)
    cv.run(storage_view(xs), storage_view(out))
    ref = act_ref(conv_ref(to_f32(xs) if half else x, wt, b, s, pads, d, group), act)
    got = to_f32(out) if half else out
    tol = (2e-2 if half else 1e-4) * max(1.0, float(np.abs(ref).max()))
    assert got.shape == ref.shape
    assert np.abs(got - ref).max() <= tol


@SETTINGS
@given(conv_cases(), st.sampled_from([8, 4]))
def test_conv_gemm_quantized_weights(case, bits):
    """int8 / 4-bit codes, per-channel scales, dequantized panel by panel inside the kernel."""
    n, c, o, h, w, kh, kw, s, d, pads, group, act, seed = case
    assume(group == 1)
    x, _, b = _data(case)
    k = c * kh * kw
    rng = np.random.default_rng(seed + 1)
    lim = 127 if bits == 8 else 7
    codes = rng.integers(-lim - 1, lim + 1, (o, k)).astype(np.int8)
    scale = rng.uniform(0.01, 0.1, (o, 1)).astype(np.float32)
    offset = rng.uniform(-0.1, 0.1, (o, 1)).astype(np.float32)
    q = QuantRows(codes, scale, offset, (o, k), k, bits)
    cv = K.ConvGemm(K.PackedWeights.from_quant_rows(q), b, x.shape, (kh, kw), s, pads, d, 1, act)
    out = np.empty(cv.out_shape, np.float32)
    cv.run(x, out)
    dense = (codes.astype(np.float32) * scale + offset).reshape(o, c, kh, kw)
    ref = act_ref(conv_ref(x, dense, b, s, pads, d, 1), act)
    assert np.abs(out - ref).max() <= 1e-4 * max(1.0, float(np.abs(ref).max()))


@SETTINGS
@given(conv_cases(depthwise=True), st.booleans())
def test_depthwise_matches_reference(case, half):
    n, c, o, h, w, kh, kw, s, d, pads, group, act, _ = case
    x, wt, b = _data(case)
    xs = to_f16(x) if half else x
    got = depthwise_conv2d(xs, wt.reshape(c, -1), b, (kh, kw), s, pads, d, act)
    got = to_f32(got) if half else got
    ref = act_ref(conv_ref(to_f32(xs) if half else x, wt, b, s, pads, d, c), act)
    assert np.abs(got - ref).max() <= (2e-2 if half else 1e-4) * max(1.0, float(np.abs(ref).max()))


@pytest.mark.parametrize("shape,o,k,s,pads", [
    ((1, 3, 37, 41), 10, 7, 2, (3, 3, 3, 3)),     # ResNet-like stem, odd sizes
    ((2, 20, 14, 14), 13, 3, 2, (1, 1, 1, 1)),    # 3x3 s2 to 7x7: 49 = 3 x 16 + 1 columns
    ((1, 64, 7, 7), 7, 3, 1, (1, 1, 1, 1)),       # 3x3 s1 on 7x7, 2-row column chunks
    ((1, 5, 9, 11), 8, 3, 3, (0, 2, 1, 0)),       # stride 3, one-sided pads
    ((1, 9, 10, 10), 6, 1, 2, (0, 0, 0, 0)),      # 1x1 stride 2 (gathered, not phase planes)
    ((1, 32, 18, 18), 14, 3, 2, (1, 1, 1, 1)),    # K = 288: the deep block budget, 81 columns
    ((1, 40, 25, 25), 9, 3, 2, (1, 1, 1, 1)),     # K = 360, 169 columns (rows padded to 176)
])
@pytest.mark.parametrize("threads", [1, 3, 5])
@pytest.mark.parametrize("half", [False, True])
def test_conv_gemm_phase_planes_task_splits(shape, o, k, s, pads, threads, half):
    """im2col from phase planes: column tasks starting mid-row (``threads`` splits), chunks of
    ``pc_max`` columns and the last partial 16-column block, float32 and float16 storage."""
    rng = np.random.default_rng(sum(shape) + o)
    x = rng.standard_normal(shape).astype(np.float32)
    wt = rng.standard_normal((o, shape[1], k, k)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    cv = K.ConvGemm(K.PackedWeights.from_dense(wt.reshape(o, -1)), b, shape, (k, k), (s, s), pads,
                    (1, 1), 1, "relu", threads=threads)
    assert cv.phased == (k >= s)
    xs = to_f16(x) if half else x
    out = np.empty(cv.out_shape, xs.dtype)
    cv.run(storage_view(xs), storage_view(out))
    ref = act_ref(conv_ref(to_f32(xs) if half else x, wt, b, (s, s), pads, (1, 1), 1), "relu")
    got = to_f32(out) if half else out
    assert np.abs(got - ref).max() <= (2e-2 if half else 1e-4) * max(1.0, float(np.abs(ref).max()))


def test_mobilenet_shapes_exact_tiles_and_tails():
    """Layer shapes whose pixel count is (not) a multiple of the 16-column tile, and channel
    counts that are (not) multiples of the 6-row panel."""
    rng = np.random.default_rng(0)
    for c, o, hw in [(16, 96, 12), (24, 144, 7), (160, 960, 7), (960, 160, 7), (7, 13, 5)]:
        x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
        wt = rng.standard_normal((o, c, 1, 1)).astype(np.float32)
        from mnnjit.backends.cpu.cnn_steps import conv2d
        got = conv2d(x, wt.reshape(o, -1), None, (1, 1), act="relu6")
        ref = act_ref(conv_ref(x, wt, None, (1, 1), (0, 0, 0, 0), (1, 1), 1), "relu6")
        assert np.abs(got - ref).max() <= 1e-4 * max(1.0, float(np.abs(ref).max()))


@pytest.mark.parametrize("c,o,h,w", [(960, 96, 7, 7), (256, 520, 5, 9), (320, 410, 4, 8)])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("half", [False, True])
def test_packed_column_blocks_of_wide_1x1_convolutions(c, o, h, w, threads, half):
    """1x1 convolutions with many input channels and panels copy each 16-column input block to
    contiguous rows first (``pack_b``); whole blocks, tails and the residual epilogue still match."""
    rng = np.random.default_rng(c + o)
    x = rng.standard_normal((1, c, h, w)).astype(np.float32)
    wt = (rng.standard_normal((o, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    res = rng.standard_normal((1, o, h, w)).astype(np.float32)
    cv = K.ConvGemm(K.PackedWeights.from_dense(wt.reshape(o, -1)), b, x.shape, (1, 1), act="relu",
                    threads=threads)
    assert cv.pack_b
    xs, rs = (to_f16(x), to_f16(res)) if half else (x, res)
    for residual in (None, rs):
        out = np.empty(cv.out_shape, xs.dtype)
        cv.run(storage_view(xs), storage_view(out), None if residual is None else storage_view(residual))
        pre = conv_ref(to_f32(xs) if half else x, wt, b, (1, 1), (0, 0, 0, 0), (1, 1), 1)
        if residual is not None:
            pre = pre + (to_f32(rs) if half else res)
        ref = act_ref(pre, "relu")
        got = to_f32(out) if half else out
        assert np.abs(got - ref).max() <= (2e-2 if half else 1e-4) * max(1.0, float(np.abs(pre).max()))


@pytest.mark.parametrize("c,o,h,w", [(96, 24, 56, 56), (150, 20, 33, 41)])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("half", [False, True])
def test_prefetching_tiles_of_1x1_convolutions_over_large_inputs(c, o, h, w, threads, half):
    """1x1 convolutions whose input outgrows L2 run their first panel of each column block on the
    tile that prefetches the next block (``pf_b``): the same numbers as without, with tails, a
    partial last panel and the residual epilogue."""
    rng = np.random.default_rng(c + o)
    x = rng.standard_normal((1, c, h, w)).astype(np.float32)
    wt = (rng.standard_normal((o, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    res = rng.standard_normal((1, o, h, w)).astype(np.float32)
    pw = K.PackedWeights.from_dense(wt.reshape(o, -1))
    cv = K.ConvGemm(pw, b, x.shape, (1, 1), act="relu6", threads=threads)
    assert cv.pf_b
    plain = K.ConvGemm(pw, b, x.shape, (1, 1), act="relu6", threads=threads)
    plain.pf_b = False
    xs, rs = (to_f16(x), to_f16(res)) if half else (x, res)
    for residual in (None, rs):
        got, want = np.empty(cv.out_shape, xs.dtype), np.empty(cv.out_shape, xs.dtype)
        r = None if residual is None else storage_view(residual)
        cv.run(storage_view(xs), storage_view(got), r)
        plain.run(storage_view(xs), storage_view(want), r)
        assert np.array_equal(got, want)
        pre = conv_ref(to_f32(xs) if half else x, wt, b, (1, 1), (0, 0, 0, 0), (1, 1), 1)
        if residual is not None:
            pre = pre + (to_f32(rs) if half else res)
        ref = act_ref(pre, "relu6")
        got = to_f32(got) if half else got
        assert np.abs(got - ref).max() <= (2e-2 if half else 1e-4) * max(1.0, float(np.abs(pre).max()))


def test_bad_arguments_raise():
    w = K.PackedWeights.from_dense(np.zeros((4, 27), np.float32))
    with pytest.raises(ValueError, match="weight has 27 columns"):
        K.ConvGemm(w, None, (1, 4, 8, 8), (3, 3))
    with pytest.raises(ValueError, match="NCHW"):
        K.ConvGemm(w, None, (3, 8, 8), (3, 3))
    with pytest.raises(ValueError, match="larger than"):
        K.ConvGemm(w, None, (1, 3, 2, 2), (3, 3))
    with pytest.raises(ValueError, match="bias has 3 values"):
        K.ConvGemm(w, np.zeros(3, np.float32), (1, 3, 8, 8), (3, 3))
    with pytest.raises(ValueError, match="weight has"):
        Depthwise(np.zeros((3, 4), np.float32), None, (1, 3, 8, 8), (3, 3))


@SETTINGS
@given(st.integers(1, 5), st.integers(1, 19), st.integers(1, 19), st.integers(1, 4), st.integers(1, 4),
       st.integers(1, 3), st.integers(1, 3), st.integers(0, 1), st.booleans(), st.booleans())
def test_max_pool_matches_reference(c, h, w, kh, kw, sh, sw, p, ceil, half):
    from mnnjit.backends.cpu.pool import max_pool2d
    pads = (min(p, kh // 2), min(p, kh // 2), min(p, kw // 2), min(p, kw // 2))
    assume(h + pads[0] + pads[1] >= kh and w + pads[2] + pads[3] >= kw)
    x = np.random.default_rng(c * h * w).standard_normal((1, c, h, w)).astype(np.float32)

    def size(n, k, s, a, b):   # MNN's plain ceil rule may leave a last window in the padding
        return (-(-(n + a + b - k) // s) if ceil else (n + a + b - k) // s) + 1
    oh, ow = size(h, kh, sh, pads[0], pads[1]), size(w, kw, sw, pads[2], pads[3])
    # the op's reference (MNN's rule: windows wholly in the padding take the nearest edge cell)
    from mnnjit.ops.nn_pool import pool2d_ref
    ref = pool2d_ref([x], {"kind": "max", "kernel": (kh, kw), "stride": (sh, sw), "pads": pads,
                           "out": (oh, ow), "count_include_pad": False})
    xs = to_f16(x) if half else x
    out = np.empty((1, c, oh, ow), xs.dtype)
    max_pool2d(storage_view(xs), storage_view(out), (kh, kw), (sh, sw), pads)
    got = to_f32(out) if half else out
    exp = to_f32(to_f16(ref)) if half else ref
    assert np.array_equal(got, exp)


@pytest.mark.parametrize("shape,kernel,stride,pads,out_hw", [
    ((2, 5, 112, 112), (3, 3), (2, 2), (1, 1, 1, 1), (56, 56)),   # ResNet's stem pool, 2 images
    ((1, 3, 7, 9), (3, 3), (2, 2), (1, 0, 0, 1), (4, 5)),         # odd sizes, one-sided pads
    ((1, 2, 5, 6), (2, 3), (2, 2), (0, 1, 1, 0), (3, 3)),         # last window wholly in padding
    ((1, 2, 9, 4), (3, 2), (3, 1), (2, 2, 1, 1), (5, 5)),         # stride 3, windows in the pads
])
@pytest.mark.parametrize("half", [False, True])
def test_max_pool_fixed_shapes(shape, kernel, stride, pads, out_hw, half):
    """Row-clamped vertical maxima then strided horizontal maxima: the op's reference (MNN's
    edge rule) exactly, NaNs propagating as in numpy's maximum."""
    from mnnjit.backends.cpu.pool import max_pool2d
    from mnnjit.ops.nn_pool import pool2d_ref
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    x[0, 0, 1, 2] = np.nan
    ref = pool2d_ref([x], {"kind": "max", "kernel": kernel, "stride": stride, "pads": pads,
                           "out": out_hw, "count_include_pad": False})
    xs = to_f16(x) if half else x
    out = np.empty(shape[:2] + out_hw, xs.dtype)
    max_pool2d(storage_view(xs), storage_view(out), kernel, stride, pads)
    got = to_f32(out) if half else out
    exp = to_f32(to_f16(ref)) if half else ref
    assert np.array_equal(got, exp, equal_nan=True)
    assert np.isnan(got).any()


@pytest.mark.parametrize("act", ["", "relu6", "sigmoid"])
@pytest.mark.parametrize("half", [False, True])
def test_quantized_classifier_runs_the_narrow_gemv(act, half):
    """A 1x1 convolution of one pixel with int8 codes: the GEMV on codes, same numbers."""
    rng = np.random.default_rng(3)
    o, c = 37, 70
    codes = rng.integers(-128, 128, (o, c)).astype(np.int8)
    scale = rng.uniform(0.01, 0.1, (o, 2)).astype(np.float32)
    offset = rng.uniform(-0.1, 0.1, (o, 2)).astype(np.float32)
    q = QuantRows(codes, scale, offset, (o, c), 35, 8)
    b = rng.standard_normal(o).astype(np.float32)
    x = rng.standard_normal((1, c, 1, 1)).astype(np.float32)
    cv = K.ConvGemm(K.PackedWeights.from_quant_rows(q), b, x.shape, (1, 1), act=act)
    assert cv.narrow
    xs = to_f16(x) if half else x
    out = np.empty(cv.out_shape, xs.dtype)
    cv.run(storage_view(xs), storage_view(out))
    dense = q.dense().reshape(o, c, 1, 1)
    ref = act_ref(conv_ref(to_f32(xs) if half else x, dense, b, (1, 1), (0, 0, 0, 0), (1, 1), 1), act)
    got = to_f32(out) if half else out
    assert np.abs(got - ref).max() <= (1e-2 if half else 1e-4) * max(1.0, float(np.abs(ref).max()))


@SETTINGS
@given(st.integers(1, 13), st.integers(1, 13), st.tuples(*[st.integers(0, 2)] * 4), st.booleans())
def test_depthwise_3x3_stride2_parity_planes(h, w, pads, half):
    """The 3x3 stride-2 kernel (parity planes) on every small size and padding."""
    assume(h + pads[0] + pads[1] >= 3 and w + pads[2] + pads[3] >= 3)
    rng = np.random.default_rng(h * 100 + w)
    x = rng.standard_normal((2, 3, h, w)).astype(np.float32)
    wt = rng.standard_normal((3, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    xs = to_f16(x) if half else x
    got = depthwise_conv2d(xs, wt.reshape(3, -1), b, (3, 3), (2, 2), pads, (1, 1), "relu6")
    got = to_f32(got) if half else got
    ref = act_ref(conv_ref(to_f32(xs) if half else x, wt, b, (2, 2), pads, (1, 1), 3), "relu6")
    assert got.shape == ref.shape
    assert np.abs(got - ref).max() <= (2e-2 if half else 1e-4) * max(1.0, float(np.abs(ref).max()))


_RUNNER = []


def _gemm_panels_runner():
    """One compiled caller of the inline-only ``gemm_panels`` (compiled once per session)."""
    if not _RUNNER:
        from numba import njit

        @njit
        def run(ap, rows, k, b, n, c, ldc, zb, bt, ct):
            K.gemm_panels(ap, rows, k, b, n, c, ldc, zb, bt, ct)
        _RUNNER.append(run)
    return _RUNNER[0]


@SETTINGS
@given(st.integers(1, 40), st.integers(1, 80), st.integers(1, 70), st.integers(0, 5), st.integers(0, 3))
def test_gemm_panels_matches_numpy(rows, k, n, extra_b, extra_c):
    """The serial micro-kernel GEMM (strided B and C, partial panels and column tails)."""
    run = _gemm_panels_runner()
    rng = np.random.default_rng(rows * 1000 + k * 10 + n)
    a = rng.standard_normal((rows, k)).astype(np.float32)
    b = rng.standard_normal((k, n + extra_b)).astype(np.float32)
    c = np.full(rows * (n + extra_c), 7.0, np.float32)
    run(K.PackedWeights.from_dense(a).panels, rows, k, b, n, c, n + extra_c,
        np.zeros(K.MR, np.float32), np.empty((k, K.NR), np.float32), np.empty(K.MR * K.NR, np.float32))
    got = c.reshape(rows, n + extra_c)
    assert np.abs(got[:, :n] - a @ b[:, :n]).max() <= 1e-4 * max(1.0, float(np.abs(a @ b[:, :n]).max()))
    assert np.all(got[:, n:] == 7.0)       # columns past n untouched


@SETTINGS
@given(st.integers(1, 2), st.integers(1, 20), st.integers(1, 40), st.integers(1, 23), st.integers(1, 37),
       st.sampled_from([(3, 1), (3, 2), (3, 1), (3, 2), (5, 1)]), st.sampled_from([1, 1, 1, 0, 2]),
       st.sampled_from(ACTS), st.sampled_from(ACTS), st.sampled_from([None, 8, 4]), st.booleans(),
       st.integers(0, 2**31))
def test_expand_depthwise_matches_the_two_steps(n, c, o, h, w, ks, pad, act1, act2, bits, half, seed):
    """The fused 1x1 -> depthwise kernel: the same numbers as the two kernels run apart, and the
    float64 reference; pixel tails, channels that are not whole panels, both storages, quantized
    expansion weights."""
    from mnnjit.backends.cpu.depthwise.expand_dw import ExpandDepthwise
    k, s = ks
    assume(h + 2 * pad >= k and w + 2 * pad >= k)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    b1, b2 = rng.standard_normal(o).astype(np.float32), rng.standard_normal(o).astype(np.float32)
    w2 = rng.standard_normal((o, 1, k, k)).astype(np.float32)
    if bits is None:
        w1 = rng.standard_normal((o, c)).astype(np.float32)
        pw = K.PackedWeights.from_dense(w1)
    else:
        lim = 127 if bits == 8 else 7
        codes = rng.integers(-lim - 1, lim + 1, (o, c)).astype(np.int8)
        scale = rng.uniform(0.01, 0.1, (o, 1)).astype(np.float32)
        w1 = codes.astype(np.float32) * scale
        pw = K.PackedWeights.from_quant_rows(QuantRows(codes, scale, np.zeros_like(scale), (o, c), c, bits))
    e = K.ConvGemm(pw, b1, x.shape, (1, 1), act=act1)
    pads = (pad, pad, pad, pad)
    d = Depthwise(w2.reshape(o, -1), b2, e.out_shape, (k, k), (s, s), pads, (1, 1), act2)
    if d.path not in ("flat_s1", "flat_s2"):
        with pytest.raises(ValueError, match="3x3 with pads 1"):
            ExpandDepthwise(e, d)
        return
    f = ExpandDepthwise(e, d)
    xs = storage_view(to_f16(x)) if half else x
    mid = np.empty(e.out_shape, xs.dtype)
    apart = np.empty(d.out_shape, xs.dtype)
    fused = np.empty(d.out_shape, xs.dtype)
    e.run(xs, mid)
    d.run(mid, apart)
    f.run(xs, fused)
    # the same sums up to their order (the column split decides which columns take the
    # one-column kernel; a narrow 8-bit 1x1 runs its own GEMV apart); with half storage the
    # fused kernel keeps the expanded tensor in float32 where the two steps round it to half,
    # so they differ by that rounding carried through the 3x3 taps
    a32, f32 = (to_f32(apart.view(np.float16)), to_f32(fused.view(np.float16))) if half else (apart, fused)
    assert np.abs(a32 - f32).max() <= (1e-2 if half else 1e-5) * max(1.0, float(np.abs(a32).max()))
    got = to_f32(fused.view(np.float16)) if half else fused
    x64 = to_f32(xs.view(np.float16)) if half else x
    ref = act_ref(conv_ref(act_ref(conv_ref(x64, w1.reshape(o, c, 1, 1), b1, (1, 1), (0,) * 4, (1, 1), 1), act1),
                           w2, b2, (s, s), pads, (1, 1), o), act2)
    tol = (3e-2 if half else 1e-4) * max(1.0, float(np.abs(ref).max()))
    assert np.abs(got - ref).max() <= tol


def _fused_matches_apart(c, o, h, w, s, half, act2):
    """Run a 1x1 convolution (relu6) and the 3x3 pads-1 depthwise one (``act2``) apart and fused;
    assert the same numbers; return the fused :class:`ExpandDepthwise`."""
    from mnnjit.backends.cpu.depthwise.expand_dw import ExpandDepthwise
    rng = np.random.default_rng(c + h + w)
    x = rng.standard_normal((1, c, h, w)).astype(np.float32)
    w1 = (rng.standard_normal((o, c)) / np.sqrt(c)).astype(np.float32)
    e = K.ConvGemm(K.PackedWeights.from_dense(w1), rng.standard_normal(o).astype(np.float32), x.shape,
                   (1, 1), act="relu6")
    d = Depthwise(rng.standard_normal((o, 9)).astype(np.float32), rng.standard_normal(o).astype(np.float32),
                  e.out_shape, (3, 3), (s, s), (1, 1, 1, 1), (1, 1), act2)
    f = ExpandDepthwise(e, d)
    xs = storage_view(to_f16(x)) if half else x
    mid, apart, fused = (np.empty(e.out_shape, xs.dtype), np.empty(d.out_shape, xs.dtype),
                         np.empty(d.out_shape, xs.dtype))
    e.run(xs, mid)
    d.run(mid, apart)
    f.run(xs, fused)
    # (half storage: the two steps round the expanded tensor to half, the fused kernel does not)
    a32, f32 = (to_f32(apart.view(np.float16)), to_f32(fused.view(np.float16))) if half else (apart, fused)
    assert np.abs(a32 - f32).max() <= (1e-2 if half else 1e-5) * max(1.0, float(np.abs(a32).max()))
    return f


@pytest.mark.parametrize("c,o,h,w,s", [(5, 13, 66, 34, 2), (3, 7, 112, 112, 2), (4, 9, 30, 32, 2),
                                       (6, 8, 70, 40, 1), (2, 3, 8, 2200, 2)])
@pytest.mark.parametrize("half", [False, True])
def test_expand_depthwise_plane_bodies(c, o, h, w, s, half):
    """Each depthwise plane body the fused kernel calls (stride 2 on column halves up to 32
    wide, on quarter planes band by band beyond; stride 1 banded): the numbers of the two
    kernels run apart."""
    _fused_matches_apart(c, o, h, w, s, half, "relu6")


@pytest.mark.parametrize("c,o,h,w", [(3, 7, 14, 14), (4, 9, 28, 30), (5, 13, 16, 50), (96, 20, 14, 14),
                                     (2, 3, 12, 34)])
@pytest.mark.parametrize("act1", ["relu6", "sigmoid"])
def test_expand_depthwise_stride2_on_quartered_input(c, o, h, w, act1):
    """Stride 2 on float32: the input is split into quarter planes before the expansion (tails
    of 1-15 values per quarter, activations applied per quarter, not on the zero borders): the
    numbers of the two kernels run apart and of the per-plane split."""
    from mnnjit.backends.cpu.depthwise.expand_dw import ExpandDepthwise
    rng = np.random.default_rng(c * h + w)
    x = rng.standard_normal((2, c, h, w)).astype(np.float32)
    e = K.ConvGemm(K.PackedWeights.from_dense((rng.standard_normal((o, c)) / np.sqrt(c)).astype(np.float32)),
                   rng.standard_normal(o).astype(np.float32), x.shape, (1, 1), act=act1)
    d = Depthwise(rng.standard_normal((o, 9)).astype(np.float32), rng.standard_normal(o).astype(np.float32),
                  e.out_shape, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), "relu")
    f = ExpandDepthwise(e, d, threads=2)
    assert f.quarters
    mid, apart = np.empty(e.out_shape, np.float32), np.empty(d.out_shape, np.float32)
    e.run(x, mid)
    d.run(mid, apart)
    for quarters in (True, False):
        f.quarters = quarters
        fused = np.full(d.out_shape, np.nan, np.float32)
        f.run(x, fused)
        assert np.abs(apart - fused).max() <= 1e-5 * max(1.0, float(np.abs(apart).max()))


@pytest.mark.parametrize("c,o,h,w,s,bits", [(5, 13, 14, 14, 1, None), (16, 20, 28, 28, 2, None),
                                            (3, 7, 12, 34, 2, 8), (160, 14, 7, 7, 1, 8),
                                            (24, 9, 9, 11, 1, 4)])
@pytest.mark.parametrize("act2", ["", "relu6"])
def test_expand_depthwise_half_storage_is_float32_compute_with_half_edges(c, o, h, w, s, bits, act2):
    """With float16 storage the fused block widens its input once and runs the float32 kernel:
    its output is exactly the float32 kernel's output (on the widened input) rounded to half -
    quarter-plane stride 2, packed blocks, pixel tails and quantized weights alike. (Depthwise
    activations past relu6 are applied to the stored half, a second rounding: not compared.)"""
    from mnnjit.backends.cpu.depthwise.expand_dw import ExpandDepthwise
    rng = np.random.default_rng(c * h + w + s)
    x16 = to_f16(rng.standard_normal((2, c, h, w)).astype(np.float32))
    x32 = to_f32(x16)
    if bits is None:
        pw = K.PackedWeights.from_dense((rng.standard_normal((o, c)) / np.sqrt(c)).astype(np.float32))
    else:
        lim = 127 if bits == 8 else 7
        codes = rng.integers(-lim - 1, lim + 1, (o, c)).astype(np.int8)
        scale = rng.uniform(0.01, 0.1, (o, 1)).astype(np.float32)
        pw = K.PackedWeights.from_quant_rows(QuantRows(codes, scale, np.zeros_like(scale), (o, c), c, bits))
    e = K.ConvGemm(pw, rng.standard_normal(o).astype(np.float32), x32.shape, (1, 1), act="relu6")
    d = Depthwise(rng.standard_normal((o, 9)).astype(np.float32), rng.standard_normal(o).astype(np.float32),
                  e.out_shape, (3, 3), (s, s), (1, 1, 1, 1), (1, 1), act2)
    f = ExpandDepthwise(e, d, threads=2)
    out32 = np.empty(d.out_shape, np.float32)
    out16 = np.empty(d.out_shape, np.float16)
    f.run(x32, out32)
    f.run(storage_view(x16), storage_view(out16))
    np.testing.assert_array_equal(out16, to_f16(out32))


@pytest.mark.parametrize("c,o,hw,s", [(160, 30, 7, 1), (128, 20, 8, 2), (144, 13, 5, 1)])
@pytest.mark.parametrize("half", [False, True])
def test_expand_depthwise_packed_input_blocks(c, o, hw, s, half):
    """Wide expansions on small planes copy their input blocks to contiguous rows first
    (``packed``): the same numbers as the two kernels run apart."""
    assert _fused_matches_apart(c, o, hw, hw, s, half, "relu").packed


@pytest.mark.parametrize("o,group", [(1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (8, 1), (10, 1), (16, 1),
                                     (32, 1), (64, 1), (8, 2), (20, 2)])
@pytest.mark.parametrize("half,residual", [(False, False), (True, False), (False, True)])
def test_conv_gemm_partial_last_panels(o, group, half, residual):
    """Output channels not a multiple of 6 per group: the last panel of each group runs the 2-,
    4- or 6-row kernel (whole 16-column blocks straight into the output, the rest through the
    scratch tile), plain, in half storage and with a residual."""
    rng = np.random.default_rng(o * 10 + group)
    c, h, w = 4 * group, 6, 11                       # 66 columns: four whole blocks and a tail
    x = rng.standard_normal((2, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((o, c // group, 3, 3)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    mat = wt.reshape(o, -1)
    pw = K.pack_grouped(mat, group) if group > 1 else K.PackedWeights.from_dense(mat)
    cv = K.ConvGemm(pw, b, x.shape, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), group, "relu")
    res = rng.standard_normal(cv.out_shape).astype(np.float32) if residual else None
    xs = to_f16(x) if half else x
    out = np.empty(cv.out_shape, xs.dtype)
    cv.run(storage_view(xs), storage_view(out), None if res is None else storage_view(res))
    conv = conv_ref(to_f32(xs) if half else x, wt, b, (1, 1), (1, 1, 1, 1), (1, 1), group)
    ref = act_ref(conv + (0 if res is None else res), "relu")
    got = to_f32(out) if half else out
    assert np.abs(got - ref).max() <= (2e-2 if half else 1e-4) * max(1.0, float(np.abs(ref).max()))


@SETTINGS
@given(conv_cases(), st.booleans())
def test_conv_gemm_residual_epilogue(case, half):
    """out = act(conv + res): the residual add (and its activation) applied per output block."""
    n, c, o, h, w, kh, kw, s, d, pads, group, act, seed = case
    x, wt, b = _data(case)
    mat = wt.reshape(o, -1)
    pw = K.pack_grouped(mat, group) if group > 1 else K.PackedWeights.from_dense(mat)
    cv = K.ConvGemm(pw, b, x.shape, (kh, kw), s, pads, d, group, act)
    res = np.random.default_rng(seed + 7).standard_normal(cv.out_shape).astype(np.float32)
    xs, rs = (to_f16(x), to_f16(res)) if half else (x, res)
    out = np.empty(cv.out_shape, xs.dtype)
    cv.run(storage_view(xs), storage_view(out), storage_view(rs))
    conv = conv_ref(to_f32(xs) if half else x, wt, b, s, pads, d, group)
    ref = act_ref(conv + (to_f32(rs) if half else res), act)
    got = to_f32(out) if half else out
    assert np.abs(got - ref).max() <= (3e-2 if half else 1e-4) * max(1.0, float(np.abs(ref).max()))
    with pytest.raises(ValueError, match="residual shape"):
        cv.run(storage_view(xs), storage_view(out), storage_view(np.zeros((1, out.size + 1), xs.dtype)))


def test_conv_gemm_residual_layouts():
    """run() accepts a residual of any strides (the micro-kernel adds it from a contiguous copy);
    launch(), whose arguments a plan binds once, refuses one that is not C-contiguous."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 8, 5, 7)).astype(np.float32)
    wt = rng.standard_normal((12, 8)).astype(np.float32)
    cv = K.ConvGemm(K.PackedWeights.from_dense(wt), None, x.shape, (1, 1), act="relu6")
    res_t = rng.standard_normal((1, 12, 7, 5)).astype(np.float32).transpose(0, 1, 3, 2)
    out = np.empty(cv.out_shape, np.float32)
    cv.run(x, out, res_t)
    ref = np.clip(np.einsum("ok,nkp->nop", wt, x.reshape(1, 8, -1)).reshape(out.shape) + res_t, 0, 6)
    assert np.abs(out - ref).max() <= 1e-4 * max(1.0, float(np.abs(ref).max()))
    with pytest.raises(ValueError, match="C-contiguous"):
        cv.launch(x, out, res_t)
    with pytest.raises(ValueError, match="C-contiguous float32"):
        cv.run(x, out, np.ascontiguousarray(res_t).astype(np.uint16))   # half bits with float32 output


@pytest.mark.parametrize("k", [(5, 5), (7, 7), (1, 1), (2, 4), (5, 3)])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("hw,pads", [((57, 56), (2, 2, 2, 2)), ((15, 14), (1, 3, 0, 2)), ((8, 7), (3, 3, 3, 3))])
@pytest.mark.parametrize("half", [False, True])
def test_depthwise_large_kernels_and_stride_2_planes(k, stride, hw, pads, half):
    """Kernels other than 3x3 (EfficientNet's and MobileNetV3's 5x5): stride 1 as contiguous tap
    streams, stride 2 on the four parity planes, odd plane sizes and one-sided pads."""
    kh, kw = k
    if hw[0] + pads[0] + pads[1] < kh or hw[1] + pads[2] + pads[3] < kw:
        pytest.skip("kernel larger than the padded plane")
    case = (2, 6, 6, hw[0], hw[1], kh, kw, (stride, stride), (1, 1), pads, 6, "relu6", kh * 31 + hw[1])
    x, wt, b = _data(case)
    xs = to_f16(x) if half else x
    got = depthwise_conv2d(xs, wt.reshape(6, -1), b, (kh, kw), (stride, stride), pads, (1, 1), "relu6")
    got = to_f32(got) if half else got
    ref = act_ref(conv_ref(to_f32(xs) if half else x, wt, b, (stride, stride), pads, (1, 1), 6), "relu6")
    assert got.shape == ref.shape
    assert np.abs(got - ref).max() <= (2e-2 if half else 1e-4) * max(1.0, float(np.abs(ref).max()))


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 2), st.integers(1, 9), st.integers(1, 20), st.integers(1, 300), st.integers(1, 5),
       st.integers(1, 3), st.integers(1, 4), st.tuples(st.integers(0, 4), st.integers(0, 4)),
       st.sampled_from([1, 1, 2]), st.booleans(), st.booleans(), st.integers(0, 2**16))
def test_conv_gemm_on_column_planes(n, c, o, length, k, s, d, pads, group, half, residual, seed):
    """[N, C, L, 1] planes under (k, 1) kernels (Conv1d as real MNN runs it) run as [N, C, 1, L]
    rows: strides, dilations, top/bottom pads, groups, float16 storage, a residual epilogue."""
    c, o = c * group, o * group
    assume(length + pads[0] + pads[1] >= (k - 1) * d + 1)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, length, 1)).astype(np.float32)
    wt = rng.standard_normal((o, c // group, k, 1)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    mat = wt.reshape(o, -1)
    pw = K.pack_grouped(mat, group) if group > 1 else K.PackedWeights.from_dense(mat)
    p4 = (pads[0], pads[1], 0, 0)
    cv = K.ConvGemm(pw, b, x.shape, (k, 1), (s, 1), p4, (d, 1), group, "relu")
    assert cv.geometry[0] == 1 or length == 1
    ref = conv_ref(x, wt, b, (s, 1), p4, (d, 1), group)
    res = rng.standard_normal(ref.shape).astype(np.float32) if residual else None
    ref = act_ref(ref + (0 if res is None else res), "relu")
    xs = to_f16(x) if half else x
    out = np.empty(cv.out_shape, xs.dtype)
    rs = None if res is None else storage_view(to_f16(res) if half else res)
    cv.run(storage_view(xs), storage_view(out), rs)
    got = to_f32(out) if half else out
    assert got.shape == ref.shape
    assert np.abs(got - ref).max() <= (2e-2 if half else 1e-4) * max(1.0, float(np.abs(ref).max()))
