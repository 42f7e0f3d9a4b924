"""The fused depthwise 3x3 -> 1x1 kernel (backends/cpu/depthwise/dw_pointwise) against the two kernels run
apart and a float64 reference: band splits with partial last bands, pixel tails, channel counts
that are not whole panels, activations of both layers, the residual epilogue, and the layers it
refuses."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from precision_refs import act_ref, conv_ref

K = pytest.importorskip("mnnjit.backends.cpu.gemm.conv")
from mnnjit.backends.cpu.depthwise.planes import Depthwise  # noqa: E402
from mnnjit.backends.cpu.depthwise.dw_pointwise import DepthwisePointwise, band_rows, fusable, pre_fits  # noqa: E402
from mnnjit.backends.cpu.quant import QuantRows  # noqa: E402

ACTS = ["", "relu", "relu6", "sigmoid"]


def _layers(n, c, o, h, w, act1, act2, seed, threads=1, stride=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    w1 = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    b1 = rng.standard_normal(c).astype(np.float32)
    w2 = (rng.standard_normal((o, c)) / np.sqrt(c)).astype(np.float32)
    b2 = rng.standard_normal(o).astype(np.float32)
    d = Depthwise(w1.reshape(c, 9), b1, x.shape, (3, 3), (stride, stride), (1, 1, 1, 1), (1, 1), act1,
                  threads)
    p = K.ConvGemm(K.PackedWeights.from_dense(w2), b2, d.out_shape, (1, 1), act=act2, threads=threads)
    return x, (w1, b1, w2, b2), d, p


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 2), st.integers(1, 40), st.integers(1, 30), st.integers(1, 30), st.integers(1, 70),
       st.sampled_from(ACTS), st.sampled_from(ACTS), st.booleans(), st.sampled_from([1, 2]),
       st.sampled_from([None, 1, 2, 3, 5]), st.integers(0, 2**31))
def test_fused_matches_apart_and_reference(n, c, o, h, w, act1, act2, residual, threads, rows, seed):
    x, (w1, b1, w2, b2), d, p = _layers(n, c, o, h, w, act1, act2, seed, threads)
    if not fusable(d, p, np.float32, threads):
        # too few bands for two tasks per thread: run apart in plans (the kernel still works)
        assert n * -(-h // band_rows(c, h, w)) < 2 * threads
    f = DepthwisePointwise(d, p, threads, rows)
    res = np.random.default_rng(seed + 1).standard_normal(p.out_shape).astype(np.float32) if residual else None
    mid, apart, fused = np.empty(d.out_shape, np.float32), np.empty(p.out_shape, np.float32), \
        np.full(p.out_shape, np.nan, np.float32)
    d.run(x, mid)
    p.run(mid, apart, res)
    f.run(x, fused, res)
    # the same sums up to their order (tails of bands and of planes take other kernels)
    assert np.abs(apart - fused).max() <= 1e-5 * max(1.0, float(np.abs(apart).max()))
    dw = act_ref(conv_ref(x, w1, b1, (1, 1), (1, 1, 1, 1), (1, 1), c), act1)
    y = conv_ref(dw, w2.reshape(o, c, 1, 1), b2, (1, 1), (0,) * 4, (1, 1), 1)
    ref = act_ref(y if res is None else y + res, act2)
    assert np.abs(fused - ref).max() <= 1e-4 * max(1.0, float(np.abs(ref).max()))


@pytest.mark.parametrize("c,o,hw,threads", [(32, 16, 112, 1), (32, 16, 112, 2), (64, 128, 56, 2),
                                            (256, 96, 28, 1)])
def test_mobilenet_shapes(c, o, hw, threads):
    """MobileNet-sized layers (several bands per task, whole 16-column blocks per band)."""
    x, _, d, p = _layers(1, c, o, hw, hw, "relu6", "", 7, threads)
    f = DepthwisePointwise(d, p, threads)
    assert f.rows * hw % K.NR == 0 and -(-hw // f.rows) >= 2 * threads
    mid, apart, fused = np.empty(d.out_shape, np.float32), np.empty(p.out_shape, np.float32), \
        np.empty(p.out_shape, np.float32)
    d.run(x, mid)
    p.run(mid, apart)
    f.run(x, fused)
    assert np.abs(apart - fused).max() <= 1e-5 * max(1.0, float(np.abs(apart).max()))


def test_refused_layers_and_arrays():
    """Stride-2 depthwise layers and single-band planes run apart (float16 storage and quantized
    1x1 weights fuse); arrays of the wrong shape or dtype raise instead of being read out of
    bounds."""
    _, _, d, p = _layers(1, 8, 8, 40, 120, "", "", 1)
    assert fusable(d, p, np.float32, 1)
    assert fusable(d, p, np.float16, 1)
    assert not fusable(d, p, np.float64, 1)
    codes = np.ones((8, 8), np.int8)
    scale = np.full((8, 1), 0.1, np.float32)
    q = K.PackedWeights.from_quant_rows(QuantRows(codes, scale, np.zeros_like(scale), (8, 8), 8, 8))
    assert fusable(d, K.ConvGemm(q, None, d.out_shape, (1, 1)), np.float32, 1)
    _, _, d2, p2 = _layers(1, 8, 8, 40, 120, "", "", 1, stride=2)
    assert not fusable(d2, p2, np.float32, 1)
    _, _, d3, p3 = _layers(1, 8, 8, 3, 3, "", "", 1)
    assert not fusable(d3, p3, np.float32, 2)
    with pytest.raises(ValueError, match="depthwise\\+1x1"):
        DepthwisePointwise(d2, p2)
    f = DepthwisePointwise(d, p, 1)
    with pytest.raises(ValueError, match="the output must be a C-contiguous float32 array of shape"):
        f.run(np.zeros(d.in_shape, np.float32), np.zeros((1, 8, 40, 119), np.float32))
    with pytest.raises(ValueError, match="the input must be"):
        f.run(np.zeros(d.in_shape, np.float64), np.zeros(p.out_shape, np.float32))
    with pytest.raises(ValueError, match="the residual must be"):
        f.run(np.zeros(d.in_shape, np.float32), np.zeros(p.out_shape, np.float32),
              np.zeros(p.out_shape, np.float32)[:, :, ::-1])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 2), st.integers(1, 5), st.integers(1, 20), st.integers(1, 20),
       st.integers(3, 40), st.integers(3, 40),
       st.sampled_from([(3, 1, 1), (3, 2, 1), (3, 2, 0), (3, 1, 0), (1, 1, 0)]),
       st.sampled_from(["", "relu", "relu6"]), st.sampled_from([1, 2]),
       st.sampled_from([None, 1, 2, 3]), st.booleans(), st.integers(0, 2**31))
def test_producing_conv_inside_matches_three_kernels(n, cin, c, o, h, w, kernel, act0, threads,
                                                     rows, residual, seed):
    """With ``pre`` (the convolution whose output the depthwise layer reads - a stem, or a 1x1
    expansion - computed band by band, two rows carried from band to band): the same numbers as
    the three kernels run apart, for any band height, plane edge, stride and padding."""
    k, stride, pad = kernel
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin, h, w)).astype(np.float32)
    w0 = rng.standard_normal((c, cin * k * k)).astype(np.float32)
    pre = K.ConvGemm(K.PackedWeights.from_dense(w0), rng.standard_normal(c).astype(np.float32),
                     x.shape, (k, k), (stride, stride), (pad,) * 4, (1, 1), 1, act0, threads)
    _, _, d, p = _layers(n, c, o, *pre.out_shape[2:], "relu6", "", seed, threads)
    res = rng.standard_normal(p.out_shape).astype(np.float32) if residual else None
    f = DepthwisePointwise(d, p, threads, rows, pre=pre)
    assert f.in_shape == x.shape
    y0, y1 = np.empty(pre.out_shape, np.float32), np.empty(d.out_shape, np.float32)
    apart, fused = np.empty(p.out_shape, np.float32), np.full(p.out_shape, np.nan, np.float32)
    pre.run(x, y0)
    d.run(y0, y1)
    p.run(y1, apart, res)
    f.run(x, fused, res)
    assert np.abs(apart - fused).max() <= 1e-5 * max(1.0, float(np.abs(apart).max()))


def test_producing_conv_refused():
    """Producing convolutions the fused kernel cannot take (grouped, an activation it does not
    apply in registers, the wrong output shape, too deep an im2col block) raise; ``pre_fits``
    says so beforehand."""
    _, _, d, p = _layers(1, 8, 8, 20, 20, "", "", 1)
    w0 = K.PackedWeights.from_dense(np.ones((8, 27), np.float32))
    good = K.ConvGemm(w0, None, (1, 3, 40, 40), (3, 3), (2, 2), (1, 1, 1, 1))
    assert pre_fits(good, d)
    bad = [K.ConvGemm(K.pack_grouped(np.ones((8, 9), np.float32), 2), None, (1, 2, 40, 40), (3, 3),
                      (2, 2), (1, 1, 1, 1), group=2),
           K.ConvGemm(w0, None, (1, 3, 40, 40), (3, 3), (2, 2), (1, 1, 1, 1), act="sigmoid"),
           # an im2col block per band past PRE_COL_BYTES (K = 1600)
           K.ConvGemm(K.PackedWeights.from_dense(np.ones((8, 1600), np.float32)), None,
                      (1, 64, 24, 24), (5, 5), (1, 1), (0, 0, 0, 0)),
           K.ConvGemm(w0, None, (1, 3, 42, 42), (3, 3), (2, 2), (1, 1, 1, 1))]
    for b in bad:
        assert not pre_fits(b, d)
        with pytest.raises(ValueError, match="producing convolution"):
            DepthwisePointwise(d, p, pre=b)


def _quant_gemm(w: np.ndarray, bias, in_shape, kernel, stride=(1, 1), pads=(0,) * 4, act="",
                threads=1, bits=8):
    """A ConvGemm on ``bits``-bit codes of ``w`` [O, K] (per-row scales) and the dense weights
    those codes stand for."""
    lim = 127 if bits == 8 else 7
    scale = (np.abs(w).max(axis=1, keepdims=True) / lim).astype(np.float32) + 1e-6
    codes = np.clip(np.rint(w / scale), -lim - 1, lim).astype(np.int8)
    q = QuantRows(codes, scale, np.zeros_like(scale), w.shape, w.shape[1], bits)
    g = K.ConvGemm(K.PackedWeights.from_quant_rows(q), bias, in_shape, kernel, stride, pads,
                   (1, 1), 1, act, threads)
    return g, codes.astype(np.float32) * scale


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 2), st.integers(2, 20), st.integers(1, 20), st.integers(6, 40),
       st.integers(3, 40), st.sampled_from(["", "relu6"]), st.booleans(), st.booleans(),
       st.sampled_from([None, "stem", "expand"]), st.sampled_from([None, 8, 4]),
       st.sampled_from([1, 2]), st.integers(0, 2**31))
def test_storage_and_weight_variants(n, c, o, h, w, act2, half, residual, pre_kind, bits, threads,
                                     seed):
    """The one fused kernel in every mode: float16 storage (``uint16`` bits) and/or 8- and
    4-bit quantized weights (the 1x1 layer's and the producing convolution's), with and without
    a producing convolution: the same numbers as the kernels run apart in that mode (which
    store the depthwise output in the same storage), and as the float64 reference on the
    dequantized weights within the storage's tolerance."""
    from mnnjit.backends.cpu.cnn_steps import storage_view
    from mnnjit.backends.cpu.fp16 import to_f16, to_f32
    rng = np.random.default_rng(seed)
    if pre_kind is None:
        x = rng.standard_normal((n, c, h, w)).astype(np.float32)
        pre, w0d = None, None
    else:
        cin, k, s, pad = (3, 3, 2, 1) if pre_kind == "stem" else (5, 1, 1, 0)
        x = rng.standard_normal((n, cin, h * s, w * s)).astype(np.float32)
        w0 = (rng.standard_normal((c, cin * k * k)) / np.sqrt(cin * k * k)).astype(np.float32)
        b0 = rng.standard_normal(c).astype(np.float32)
        if bits is None:
            pre = K.ConvGemm(K.PackedWeights.from_dense(w0), b0, x.shape, (k, k), (s, s),
                             (pad,) * 4, (1, 1), 1, "relu6", threads)
            w0d = w0
        else:
            pre, w0d = _quant_gemm(w0, b0, x.shape, (k, k), (s, s), (pad,) * 4, "relu6",
                                   threads, bits)
    dshape = (n, c, h, w)
    w1 = rng.standard_normal((c, 9)).astype(np.float32) / 3
    b1 = rng.standard_normal(c).astype(np.float32)
    d = Depthwise(w1, b1, dshape, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), "relu6", threads)
    w2 = (rng.standard_normal((o, c)) / np.sqrt(c)).astype(np.float32)
    b2 = rng.standard_normal(o).astype(np.float32)
    if bits is None:
        p, w2d = K.ConvGemm(K.PackedWeights.from_dense(w2), b2, dshape, (1, 1), act=act2,
                            threads=threads), w2
    else:
        p, w2d = _quant_gemm(w2, b2, dshape, (1, 1), act=act2, threads=threads, bits=bits)
    if pre is not None and not pre_fits(pre, d):
        return
    f = DepthwisePointwise(d, p, threads, pre=pre)
    res = rng.standard_normal(p.out_shape).astype(np.float32) if residual else None
    sto = (lambda a: storage_view(to_f16(a))) if half else (lambda a: a)
    back = (lambda a: to_f32(a.view(np.float16))) if half else (lambda a: a)
    dt = np.uint16 if half else np.float32
    xs, rs = sto(x), None if res is None else sto(res)
    fused, apart = np.empty(p.out_shape, dt), np.empty(p.out_shape, dt)
    f.run(xs, fused, rs)
    y = xs
    if pre is not None:
        y = np.empty(pre.out_shape, dt)
        pre.run(xs, y)
    mid = np.empty(d.out_shape, dt)
    d.run(y, mid)
    p.run(mid, apart, rs)
    got, a32 = back(fused), back(apart)
    scale = max(1.0, float(np.abs(a32).max()))
    # apart and fused store the same intermediates; only the order of the sums differs (and
    # with a producing convolution under half storage, fused keeps its output in float32)
    tol_apart = (2e-2 if half and pre is not None else 2e-3 if half else 1e-5) * scale
    assert np.abs(got - a32).max() <= tol_apart
    xr = back(xs)
    if pre is not None:
        xr = act_ref(conv_ref(xr, w0d.reshape(c, -1, k, k), b0, (s, s), (pad,) * 4, (1, 1), 1),
                     "relu6")
    dw = act_ref(conv_ref(xr, w1.reshape(c, 1, 3, 3), b1, (1, 1), (1, 1, 1, 1), (1, 1), c), "relu6")
    yref = conv_ref(dw, w2d.reshape(o, c, 1, 1), b2, (1, 1), (0,) * 4, (1, 1), 1)
    ref = act_ref(yref if res is None else yref + back(rs), act2)
    assert np.abs(got - ref).max() <= (3e-2 if half else 1e-4) * max(1.0, float(np.abs(ref).max()))
