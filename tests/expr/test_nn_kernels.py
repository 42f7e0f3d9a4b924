"""The hand-written NN kernels (kernels_nn.py, Numba) compute exactly what the numpy references compute."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from mnnjit.backends.cpu.handwritten import nn_ops as kernels_nn  # noqa: E402
from mnnjit.ops import nn_conv, nn_pool, nn_resize  # noqa: E402

rng = np.random.default_rng(5)


@pytest.mark.parametrize("stride,dil,pads,act", [((1, 1), (1, 1), (1, 1, 1, 1), "relu6"),
                                                 ((2, 1), (1, 2), (0, 2, 1, 0), ""),
                                                 ((2, 2), (1, 1), (1, 0, 1, 0), "relu")])
def test_depthwise_kernel_equals_ref(monkeypatch, stride, dil, pads, act):
    x = rng.standard_normal((2, 5, 9, 11)).astype(np.float32)
    w = rng.standard_normal((5, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    attrs = {"stride": stride, "dilation": dil, "pads": pads, "group": 5, "act": act}
    monkeypatch.setattr(nn_conv, "DEPTHWISE_NUMBA_WORK", 0)
    np.testing.assert_array_equal(kernels_nn.conv2d([x, w, b], attrs), nn_conv.conv2d_ref([x, w, b], attrs))
    np.testing.assert_array_equal(kernels_nn.conv2d([x, w], attrs), nn_conv.conv2d_ref([x, w], attrs))


def test_pool_kernel_equals_ref(monkeypatch):
    monkeypatch.setattr(nn_pool, "NUMBA_WORK", 0)
    x = rng.standard_normal((2, 3, 8, 7)).astype(np.float32)
    for ceil in (False, True, "mnn"):
        for kind in ("max", "avg"):
            for inc in (True, False):
                out = (nn_pool.pool_out_size(8, 1, 2, 3, 2, ceil), nn_pool.pool_out_size(7, 0, 1, 2, 3, ceil))
                attrs = {"kind": kind, "kernel": (3, 2), "stride": (2, 3), "pads": (1, 2, 0, 1), "out": out,
                         "count_include_pad": inc}
                np.testing.assert_allclose(kernels_nn.pool2d([x], attrs), nn_pool.pool2d_ref([x], attrs), atol=1e-6)


@pytest.mark.parametrize("method,coord", [("bilinear", "half_pixel"), ("cubic", "align_corners"),
                                          ("bilinear", "asymmetric"), ("nearest", "asymmetric"),
                                          ("nearest_round", "half_pixel"), ("cubic", "half_pixel")])
def test_resize_kernel_equals_ref(monkeypatch, method, coord):
    monkeypatch.setattr(nn_resize, "NUMBA_WORK", 0)
    x = rng.standard_normal((1, 3, 7, 9)).astype(np.float32)
    x[0, 0, 0, 0] = -0.0
    for trunc in (False, True):
        attrs = {"size": (13, 5), "method": method, "coord": coord, "trunc_taps": trunc}
        got, want = kernels_nn.resize([x], attrs), nn_resize.resize_ref([x], attrs)
        np.testing.assert_allclose(got, want, atol=1e-6)
        if method.startswith("nearest"):   # one tap of weight 1: an exact copy, signed zeros too
            assert np.array_equal(np.signbit(got), np.signbit(want)) and np.array_equal(got, want)


@pytest.mark.parametrize("shape,axes,params", [((2, 32, 40, 30), (2, 3), 0), ((197, 384), (-1,), 2),
                                               ((3, 5, 7, 600), (3,), 1), ((2, 6, 50), (1, 2), 2),
                                               ((4, 6, 50), (1,), 2)])
@pytest.mark.parametrize("rms", [False, True])
def test_layer_norm_kernel_matches_ref(shape, axes, params, rms):
    """Normalisation over trailing axes on the Numba kernel (others, like the middle axis of the
    last case, through the ref): within float32 rounding of the reference."""
    from mnnjit.ops.nn_misc import _layer_norm_ref
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    norm_shape = tuple(shape[a] for a in axes)
    ps = [rng.standard_normal(norm_shape).astype(np.float32) for _ in range(params)]
    attrs = {"axes": axes, "eps": 1e-5, "rms": rms}
    if axes == (1,) and len(shape) == 3:
        ps = []
    want = _layer_norm_ref([x] + ps, attrs)
    np.testing.assert_allclose(kernels_nn.layer_norm([x] + ps, attrs), want, atol=2e-6, rtol=1e-5)


def test_kernels_registered_with_the_compiler():
    from mnnjit.backends.cpu.handwritten import registry as kernels
    kernels.load_kernel_modules()
    for op in ("conv2d", "pool2d", "resize", "layer_norm"):
        assert op in kernels._KERNELS


def test_small_gemm_runs_single_threaded_and_restores():
    from mnnjit.threads import openblas
    lib = openblas()
    if lib is None:
        pytest.skip("no OpenBLAS thread control")
    get = lib[1]
    before = get()
    a = rng.standard_normal((1, 8, 5)).astype(np.float32)
    b = rng.standard_normal((1, 5, 7)).astype(np.float32)
    out = np.empty((1, 8, 7), np.float32)
    nn_conv.gemm(a, b, out, 8 * 5 * 7)
    np.testing.assert_allclose(out, a @ b, rtol=1e-6)
    assert get() == before
