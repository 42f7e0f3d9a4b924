"""Quantized weight sources: codes stay quantized, dequantization exact, GEMM/conv results."""
from __future__ import annotations

import numpy as np
import pytest

from precision_refs import conv_ref

Q = pytest.importorskip("mnnjit.backends.cpu.quant")
K = pytest.importorskip("mnnjit.backends.cpu.cnn_steps")
from mnnjit.format import quantized_weight, read_net  # noqa: E402


@pytest.fixture(scope="module")
def wq8_convs(shared_dir):
    net = read_net(str(shared_dir / "models" / "mobilenetv2_wq8.mnn"))
    return [op for op in net.oplists if op.type == "Convolution"]


def test_model_weights_stay_int8_and_dequantize_exactly(wq8_convs):
    total_q = total_f = 0
    for op in wq8_convs:
        qw = quantized_weight(op.main["quanParameter"])
        O = int(op.main["common"]["outputCount"])
        src = Q.QuantRows.from_quantized(qw, (O, qw.codes.size // O))
        assert src.codes.dtype == np.int8
        assert np.array_equal(src.dense().reshape(-1), qw.dequantize())
        total_q += src.nbytes
        total_f += 4 * qw.codes.size
    assert total_q <= 0.30 * total_f


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_quantized_conv_equals_conv_with_dequantized_weights(wq8_convs, dtype):
    op = next(o for o in wq8_convs if o.main["common"]["kernelX"] == 3)   # the 3x3 stem conv
    c = op.main["common"]
    qw = quantized_weight(op.main["quanParameter"])
    O, Cin = int(c["outputCount"]), int(c["inputCount"])
    src = Q.QuantRows.from_quantized(qw, (O, qw.codes.size // O))
    x = np.random.default_rng(0).standard_normal((1, Cin, 17, 19)).astype(dtype)
    b = np.asarray(op.main["bias"], np.float32)
    y = K.conv2d(x, src, b, (3, 3), (2, 2), (1, 1, 1, 1), act="relu6")
    wd = qw.dequantize().reshape(O, Cin, 3, 3)
    ref = conv_ref(x.astype(np.float32), wd, b, (2, 2), (1, 1, 1, 1), (1, 1), 1, "relu6")
    tol = 1e-5 if dtype == np.float32 else 2 ** -10 * np.abs(ref) + 1e-4
    assert np.all(np.abs(y.astype(np.float64) - ref) <= tol)


def test_four_bit_codes_packed_two_per_byte_per_block():
    rng = np.random.default_rng(3)
    O, Kd, block = 9, 20, 5
    codes = rng.integers(-8, 8, O * Kd).astype(np.int8)
    scale = rng.uniform(0.01, 0.1, O * Kd // block).astype(np.float32)
    offset = rng.uniform(-0.1, 0.1, O * Kd // block).astype(np.float32)
    src = Q.QuantRows(codes, scale, offset, (O, Kd), block, bits=4)
    assert src.codes.nbytes == O * Kd // 2
    want = (codes.reshape(-1, block) * scale[:, None] + offset[:, None]).reshape(O, Kd)
    assert np.allclose(src.dense(), want, atol=1e-6)
    # as a 1x1 conv with 20 input channels
    x = rng.standard_normal((1, Kd, 6, 7)).astype(np.float32)
    y = K.conv2d(x, src, None, (1, 1))
    ref = conv_ref(x, want.reshape(O, Kd, 1, 1), None, (1, 1), (0, 0, 0, 0), (1, 1), 1)
    assert np.allclose(y, ref, atol=1e-4)
    with pytest.raises(ValueError, match=r"\[-8, 7\]"):
        Q.QuantRows(codes * 2, scale, offset, (O, Kd), block, bits=4)


def test_half_and_quant_rows_matmul():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((300, 200)).astype(np.float32)
    b = rng.standard_normal((200, 33)).astype(np.float32)
    src = Q.HalfRows(w)
    out = src.matmul(b)
    assert np.allclose(out, w.astype(np.float16).astype(np.float32) @ b, atol=1e-3)
    q = Q.QuantRows(np.ones(300 * 200, np.int8), np.full(300, 0.5), np.zeros(300), (300, 200), 200)
    assert np.allclose(q.matmul(b), np.full((300, 200), 0.5) @ b, atol=1e-3)
    with pytest.raises(ValueError, match="operand"):
        src.matmul(b.T)
    assert src.nbytes == w.size * 2


def test_dynamic_int8_gemm_within_quantization_error():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((64, 96)).astype(np.float32)
    scale = np.abs(w).max(axis=1) / 127
    codes = np.rint(w / scale[:, None]).astype(np.int8)
    src = Q.QuantRows(codes, scale, np.zeros(64, np.float32), (64, 96), 96)
    b = rng.standard_normal((96, 50)).astype(np.float32)
    exact = src.dense() @ b
    got = Q.gemm_dynamic_int8(src, b)
    err = np.abs(got - exact).max() / np.abs(exact).max()
    assert err < 0.02


@pytest.mark.parametrize("n", [1, 3, 8, 9])
def test_quant_matmul_narrow_and_wide_per_block_asymmetric(n):
    rng = np.random.default_rng(6)
    O, Kd, block = 37, 48, 16
    codes = rng.integers(-128, 128, O * Kd).astype(np.int8)
    scale = rng.uniform(0.001, 0.01, O * Kd // block).astype(np.float32)
    offset = rng.uniform(-0.5, 0.5, O * Kd // block).astype(np.float32)
    src = Q.QuantRows(codes, scale, offset, (O, Kd), block)
    b = rng.standard_normal((Kd, n)).astype(np.float32)
    want = src.dense().astype(np.float64) @ b
    assert np.allclose(src.matmul(b), want, rtol=1e-4, atol=1e-4)


def _both_deq(kind, c8, c4, sc, of, bs, o, npanel, k, a, b, tmp):
    """Both dequantizations into ``a`` (gemm.conv's) and ``b`` (quant.deq_panels), compiled once."""
    from numba import njit
    from mnnjit.backends.cpu.gemm.conv import _deq_panels
    global _both_deq_k
    if _both_deq_k is None:
        deq = Q.deq_panels

        @njit
        def run(kind, c8, c4, sc, of, bs, o, npanel, k, a, b, tmp):
            _deq_panels(kind, c8, c4, sc, of, bs, 0, o, 0, npanel, k, a)
            deq(kind, c8, c4, sc, of, bs, 0, o, 0, npanel, k, b, tmp)
        _both_deq_k = run
    _both_deq_k(kind, c8, c4, sc, of, bs, o, npanel, k, a, b, tmp)


_both_deq_k = None


@pytest.mark.parametrize("o,k,bits,block", [(13, 40, 8, 40), (12, 64, 8, 16), (7, 48, 4, 48), (20, 32, 4, 8)])
def test_deq_panels_matches_the_conv_kernels_dequantization(o, k, bits, block):
    """quant.deq_panels (rows dequantized contiguously, then interleaved into panels) gives the
    very panels gemm.conv._deq_panels does - memory=low outputs do not move - including rows
    past the last output channel (zeros), per-block asymmetric scales and 4-bit codes."""
    from mnnjit.backends.cpu.gemm.conv import PackedWeights
    rng = np.random.default_rng(o * k + bits)
    lim = 127 if bits == 8 else 7
    codes = rng.integers(-lim - 1, lim + 1, (o, k)).astype(np.int8)
    scale = rng.uniform(0.01, 0.1, (o, k // block)).astype(np.float32)
    offset = rng.uniform(-0.05, 0.05, (o, k // block)).astype(np.float32)
    w = PackedWeights.from_quant_rows(Q.QuantRows(codes, scale, offset, (o, k), block, bits))
    npanel = (o + 5) // 6
    a = np.full(npanel * 6 * k, np.nan, np.float32)
    b = np.full_like(a, np.nan)
    _both_deq(w.kind, w.codes8, w.codes4, w.scale, w.offset, w.block, o, npanel, k, a, b,
              np.empty((6, k), np.float32))
    assert np.array_equal(a, b)
    dense = codes.astype(np.float32).reshape(o, k // block, block) * scale[..., None] + offset[..., None]
    assert np.array_equal(b.reshape(npanel, k, 6)[:, :, :].transpose(0, 2, 1).reshape(-1, k)[:o],
                          dense.reshape(o, k))
    if bits == 8 and block == k:    # per-channel codes reordered into panels (kind 4): same panels
        w4 = w.panel_ordered()
        assert w4.kind == 4 and w4.codes8.nbytes == npanel * 6 * k
        c = np.full_like(a, np.nan)
        d = np.full_like(a, np.nan)
        _both_deq(w4.kind, w4.codes8, w4.codes4, w4.scale, w4.offset, w4.block, o, npanel, k, c,
                  d, np.empty((6, k), np.float32))
        assert np.array_equal(c, b) and np.array_equal(d, b)
    else:
        with pytest.raises(ValueError, match="per-channel int8"):
            w.panel_ordered()
