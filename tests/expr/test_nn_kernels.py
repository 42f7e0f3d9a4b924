"""The hand-written NN kernels (kernels_nn.py, Numba) compute exactly what the numpy references compute."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from mnnjit.backends.cpu import kernels_nn  # noqa: E402
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
                                          ("bilinear", "asymmetric")])
def test_resize_kernel_equals_ref(monkeypatch, method, coord):
    monkeypatch.setattr(nn_resize, "NUMBA_WORK", 0)
    x = rng.standard_normal((1, 3, 7, 9)).astype(np.float32)
    attrs = {"size": (13, 5), "method": method, "coord": coord}
    np.testing.assert_allclose(kernels_nn.resize([x], attrs), nn_resize.resize_ref([x], attrs), atol=1e-6)


def test_kernels_registered_with_the_compiler():
    from mnnjit.backends.cpu import kernels
    kernels.load_kernel_modules()
    for op in ("conv2d", "pool2d", "resize"):
        assert op in kernels._KERNELS


def test_small_gemm_runs_single_threaded_and_restores():
    fns = nn_conv._blas_thread_fns()
    if fns is None:
        pytest.skip("no OpenBLAS thread control")
    get, put = fns
    before = get()
    a = rng.standard_normal((1, 8, 5)).astype(np.float32)
    b = rng.standard_normal((1, 5, 7)).astype(np.float32)
    out = np.empty((1, 8, 7), np.float32)
    nn_conv.gemm(a, b, out, 8 * 5 * 7)
    np.testing.assert_allclose(out, a @ b, rtol=1e-6)
    assert get() == before
