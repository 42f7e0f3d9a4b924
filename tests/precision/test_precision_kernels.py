"""fp16/fp32-storage CNN kernels against float64 numpy references."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from precision_refs import act_ref, conv_ref, pool_ref

K = pytest.importorskip("mnnjit.backends.cpu.cnn_steps")

DTYPES = [np.float32, np.float16]


def _tol(dtype, ref):
    """fp32: float rounding; fp16: inputs are exact halves, so only the output rounding
    (half an ulp of fp16, 2**-11 relative) plus fp32 accumulation."""
    scale = np.abs(ref).max() + 1e-6
    return (2e-6 * scale + 1e-6) if dtype == np.float32 else (2 ** -10 * np.abs(ref) + 1e-4 * scale)


@st.composite
def conv_cases(draw):
    group = draw(st.sampled_from([1, 1, 2]))
    cg = draw(st.integers(1, 5))
    og = draw(st.integers(1, 5))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    h = draw(st.integers((kh - 1) * dil[0] + 1, 12))
    w = draw(st.integers((kw - 1) * dil[1] + 1, 12))
    n = draw(st.integers(1, 2))
    act = draw(st.sampled_from(["", "relu", "relu6", "sigmoid", "hard_swish"]))
    seed = draw(st.integers(0, 2 ** 16))
    return n, group, cg, og, (kh, kw), stride, dil, pads, h, w, act, seed


@settings(max_examples=25, deadline=None)
@given(conv_cases(), st.sampled_from(DTYPES))
def test_conv2d_matches_reference(case, dtype):
    n, group, cg, og, k, stride, dil, pads, h, w, act, seed = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, group * cg, h, w)).astype(dtype)
    wt = rng.standard_normal((group * og, cg) + k).astype(np.float32)
    b = rng.standard_normal(group * og).astype(np.float32)
    y = K.conv2d(x, wt.reshape(group * og, -1), b, k, stride, pads, dil, group, act)
    ref = conv_ref(x.astype(np.float32), wt, b, stride, pads, dil, group, act)
    assert y.dtype == dtype and y.shape == ref.shape
    tol = _tol(dtype, ref)
    if dtype == np.float16 and act in ("sigmoid", "hard_swish"):
        # activations the micro-kernel does not apply run on the stored (half-rounded) sums:
        # half an ulp of the pre-activation times the activation's slope (<= 1.5) more
        pre = conv_ref(x.astype(np.float32), wt, b, stride, pads, dil, group, "")
        tol = tol + 1.5 * 2 ** -11 * np.abs(pre)
    assert np.all(np.abs(y.astype(np.float64) - ref) <= tol)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 6), st.integers(3, 15), st.integers(1, 3), st.integers(1, 2),
       st.integers(0, 1), st.sampled_from(DTYPES), st.integers(0, 999))
def test_depthwise_matches_reference(c, hw, k, s, p, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, c, hw, hw + 1)).astype(dtype)
    wt = rng.standard_normal((c, 1, k, k)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    pads = (p, p, p, p)
    y = K.depthwise_conv2d(x, wt, b, (k, k), (s, s), pads, act="relu6")
    ref = conv_ref(x.astype(np.float32), wt, b, (s, s), pads, (1, 1), c, "relu6")
    assert y.dtype == dtype and y.shape == ref.shape
    assert np.all(np.abs(y.astype(np.float64) - ref) <= _tol(dtype, ref))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ["", "relu", "relu6", "sigmoid", "tanh", "hard_swish", "silu"])
def test_elementwise(dtype, act):
    rng = np.random.default_rng(1)
    a = (rng.standard_normal(10007) * 4).astype(dtype)
    b = (rng.standard_normal(10007) * 4).astype(dtype)
    ref = act_ref(a.astype(np.float64), act)
    assert np.all(np.abs(K.activation(a, act).astype(np.float64) - ref) <= _tol(dtype, ref))
    ref = act_ref(a.astype(np.float64) + b.astype(np.float64), act)
    assert np.all(np.abs(K.add(a, b, act).astype(np.float64) - ref) <= _tol(dtype, ref))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind,kernel,stride,pads,incl", [
    ("max", (3, 3), (2, 2), (1, 1, 1, 1), True), ("avg", (3, 3), (2, 2), (1, 1, 1, 1), True),
    ("avg", (2, 3), (1, 2), (0, 1, 1, 0), False), ("max", (2, 2), (2, 2), (0, 0, 0, 0), True)])
def test_pooling(dtype, kind, kernel, stride, pads, incl):
    x = np.random.default_rng(2).standard_normal((2, 3, 9, 10)).astype(dtype)
    y = K.pool2d(x, kind, kernel, stride, pads, count_include_pad=incl)
    ref = pool_ref(x.astype(np.float32), kind, kernel, stride, pads, incl)
    assert y.dtype == dtype and np.all(np.abs(y.astype(np.float64) - ref) <= _tol(dtype, ref))
    for xg in (x, np.random.default_rng(3).standard_normal((1, 64, 48, 48)).astype(dtype)):
        g = K.global_avg_pool(xg)   # serial below GAP_SERIAL_MAX elements, parallel above
        ref = xg.astype(np.float64).mean(axis=(2, 3), keepdims=True)
        assert np.all(np.abs(g.astype(np.float64) - ref) <= _tol(dtype, ref))


def test_errors():
    x = np.zeros((1, 4, 5, 5), np.float32)
    with pytest.raises(ValueError, match="columns"):
        K.conv2d(x, np.zeros((2, 5), np.float32), None, (1, 1))
    with pytest.raises(ValueError, match="larger than"):
        K.conv2d(x, np.zeros((2, 4 * 49), np.float32), None, (7, 7))
    with pytest.raises(ValueError, match="unknown activation"):
        K.activation(x, "gelu_fast")
    with pytest.raises(TypeError, match="float16 or float32"):
        K.activation(x.astype(np.int32), "relu")


def test_1x1_conv_with_only_bottom_right_padding():
    """Regression: a 1x1 stride-1 conv padded only at the bottom/right is not pointwise."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    wt = rng.standard_normal((2, 2, 1, 1)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    for dt in DTYPES:
        y = K.conv2d(x.astype(dt), wt.reshape(2, -1), b, (1, 1), (1, 1), (0, 1, 0, 1))
        ref = conv_ref(x.astype(dt).astype(np.float32), wt, b, (1, 1), (0, 1, 0, 1), (1, 1), 1)
        assert np.all(np.abs(y.astype(np.float64) - ref) <= _tol(dt, ref))


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(DTYPES), st.sampled_from(["max", "avg"]), st.integers(1, 5), st.integers(1, 5),
       st.integers(1, 3), st.integers(1, 3), st.tuples(*[st.integers(0, 2)] * 4), st.booleans(),
       st.integers(1, 30), st.integers(1, 30), st.integers(0, 2**16))
def test_pooling_random_windows(dtype, kind, kh, kw, sh, sw, pads, incl, h, w, seed):
    """Row-segment pooling against the float64 reference: any window, stride and one-sided pads
    (pads below the window, as ONNX allows), both divisors of an average."""
    assume(all(p < k for p, k in zip(pads, (kh, kh, kw, kw))))
    assume(h + pads[0] + pads[1] >= kh and w + pads[2] + pads[3] >= kw)
    x = np.random.default_rng(seed).standard_normal((2, 3, h, w)).astype(dtype)
    y = K.pool2d(x, kind, (kh, kw), (sh, sw), pads, count_include_pad=incl)
    ref = pool_ref(x.astype(np.float32), kind, (kh, kw), (sh, sw), pads, incl)
    assert y.shape == ref.shape
    assert np.all(np.abs(y.astype(np.float64) - ref) <= _tol(dtype, ref))
