"""The flat 3x3 depthwise kernels (:mod:`mnnjit.backends.cpu.depthwise.flat`) against float64
references and against the padded-plane kernel: stride 1 and 2, small and banded planes, channel
counts not a multiple of 8, activations, float16 storage, edge columns, which path a shape takes."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from precision_refs import act_ref, conv_ref

pytest.importorskip("numba")
from mnnjit.backends.cpu.depthwise.planes import Depthwise  # noqa: E402
from mnnjit.backends.cpu.depthwise.flat import s1_banded, s2_banded  # noqa: E402
from mnnjit.backends.cpu.fp16 import to_f16, to_f32  # noqa: E402
from mnnjit.backends.cpu.cnn_steps import storage_view  # noqa: E402

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _depthwise_case(n, c, h, w, stride, pads, act, half, seed):
    """(got, ref, path) of a 3x3 depthwise convolution run by :class:`Depthwise`."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    xs = to_f16(x) if half else x
    dw = Depthwise(wt.reshape(c, 9), b, x.shape, (3, 3), stride, pads, (1, 1), act)
    out = np.empty(dw.out_shape, xs.dtype)
    dw.run(storage_view(xs), storage_view(out))
    got = to_f32(out) if half else out
    ref = act_ref(conv_ref(to_f32(xs) if half else x, wt, b, stride, pads, (1, 1), c), act)
    return got, ref, dw.path


@SETTINGS
@given(st.integers(1, 2), st.integers(1, 19), st.integers(1, 20), st.integers(1, 20),
       st.sampled_from(["", "relu", "relu6", "hard_swish"]), st.booleans(), st.integers(0, 2**31))
def test_depthwise_flat_stride1_small_planes(n, c, h, w, act, half, seed):
    """3x3 stride 1 pads 1 on small planes runs the flat kernel (one loop over the whole plane,
    edge-column masks): any size down to 1x1, channel counts not a multiple of 8."""
    got, ref, path = _depthwise_case(n, c, h, w, (1, 1), (1, 1, 1, 1), act, half, seed)
    assert path == "flat_s1"
    assert np.abs(got - ref).max() <= (2e-2 if half else 1e-4) * max(1.0, float(np.abs(ref).max()))


@SETTINGS
@given(st.integers(1, 2), st.integers(1, 19), st.integers(1, 10), st.integers(1, 10),
       st.integers(0, 1), st.integers(0, 1), st.sampled_from(["", "relu", "relu6"]), st.booleans(),
       st.integers(0, 2**31))
def test_depthwise_flat_stride2_small_planes(n, c, h2, w2, pb, pr, act, half, seed):
    """3x3 stride 2 on even planes with pads top/left 1 (bottom/right 0 or 1) runs the flat
    column-split kernel."""
    got, ref, path = _depthwise_case(n, c, 2 * h2, 2 * w2, (2, 2), (1, pb, 1, pr), act, half, seed)
    assert path == "flat_s2"
    assert got.shape == ref.shape
    assert np.abs(got - ref).max() <= (2e-2 if half else 1e-4) * max(1.0, float(np.abs(ref).max()))


@pytest.mark.parametrize("c,hw,stride", [(384, 14, 1), (960, 7, 1), (576, 14, 2), (144, 56, 2),
                                         (144, 56, 1), (13, 28, 2)])
@pytest.mark.parametrize("half", [False, True])
def test_depthwise_flat_matches_plane_kernel_on_mobilenet_shapes(c, hw, stride, half):
    """The flat kernels against the padded-plane kernel on MobileNetV2's layer shapes."""
    rng = np.random.default_rng(c + hw)
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    xs = storage_view(to_f16(x) if half else x)
    wt = rng.standard_normal((c, 9)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    dw = Depthwise(wt, b, x.shape, (3, 3), (stride, stride), (1, 1, 1, 1), (1, 1), "relu6", 2)
    assert dw.path == ("flat_s1" if stride == 1 else "flat_s2")
    got = np.empty(dw.out_shape, xs.dtype)
    dw.run(xs, got)
    dw.path = "plane"
    exp = np.empty(dw.out_shape, xs.dtype)
    dw.run(xs, exp)
    if half:
        got, exp = to_f32(got.view(np.float16)), to_f32(exp.view(np.float16))
    # same sums in another order: float32 rounding, at most one half ulp after rounding to half
    assert np.abs(got - exp).max() <= (4e-3 if half else 1e-5) * max(1.0, float(np.abs(exp).max()))


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_flat_edge_columns_do_not_leak(stride):
    """An inf in a plane's last column must not reach the next row's first output (the flat
    loop's wrapped column taps are selected away, not multiplied by zero)."""
    h = w = 6
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, h, w)).astype(np.float32)
    x[0, :, 2, w - 1] = np.inf
    x[0, :, 3, 0] = -np.inf
    wt = rng.uniform(0.5, 1.0, (2, 1, 3, 3)).astype(np.float32)
    dw = Depthwise(wt.reshape(2, 9), None, x.shape, (3, 3), (stride, stride), (1, 1, 1, 1))
    assert dw.path == ("flat_s1" if stride == 1 else "flat_s2")
    out = np.empty(dw.out_shape, np.float32)
    dw.run(x, out)
    ref = conv_ref(x, wt, None, (stride, stride), (1, 1, 1, 1), (1, 1), 2)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_depthwise_other_shapes_keep_the_plane_kernel():
    """Shapes outside the flat kernels' conditions (pads, odd stride-2 planes, dilation, other
    kernels) choose the padded-plane kernel."""
    w9 = np.zeros((4, 9), np.float32)
    assert Depthwise(w9, None, (1, 4, 14, 14), (3, 3), (1, 1), (0, 0, 0, 0)).path == "plane"
    assert Depthwise(w9, None, (1, 4, 7, 7), (3, 3), (2, 2), (1, 1, 1, 1)).path == "plane"
    assert Depthwise(w9, None, (1, 4, 112, 112), (3, 3), (2, 2), (0, 1, 0, 1)).path == "plane"
    assert Depthwise(w9, None, (1, 4, 14, 14), (3, 3), (1, 1), (2, 2, 2, 2), (2, 2)).path == "plane"
    assert Depthwise(np.zeros((4, 25), np.float32), None, (1, 4, 14, 14), (5, 5), (1, 1),
                     (2, 2, 2, 2)).path == "plane"


@pytest.mark.parametrize("h,w", [(33, 33), (40, 30), (2, 1100), (1, 1100), (3, 700), (56, 56)])
@pytest.mark.parametrize("half", [False, True])
def test_depthwise_flat_stride1_banded_planes(h, w, half):
    """Stride-1 planes larger than one band (1024 outputs) run band by band of whole rows (the
    last band partial; a band of one row when a row is longer than a band)."""
    got, ref, path = _depthwise_case(2, 3, h, w, (1, 1), (1, 1, 1, 1), "relu", half, h * w)
    assert path == "flat_s1"
    assert s1_banded(h, w) == (h > 1)
    assert np.abs(got - ref).max() <= (2e-2 if half else 1e-4) * max(1.0, float(np.abs(ref).max()))


@pytest.mark.parametrize("h,w", [(120, 40), (4, 2200), (2, 2200), (130, 34), (112, 112), (6, 34),
                                 (64, 32), (28, 28), (2, 2)])
@pytest.mark.parametrize("half", [False, True])
def test_depthwise_flat_stride2_banded_planes(h, w, half):
    """Stride-2 planes wider than 32 run on their quarter planes band by band (the last band
    partial; one output row per band when a row pair is longer than a band; odd half widths),
    narrower ones on their column halves."""
    got, ref, path = _depthwise_case(1, 2, h, w, (2, 2), (1, 1, 1, 1), "relu6", half, h + w)
    assert path == "flat_s2"
    assert s2_banded(h, w) == (w > 32)
    assert np.abs(got - ref).max() <= (2e-2 if half else 1e-4) * max(1.0, float(np.abs(ref).max()))
