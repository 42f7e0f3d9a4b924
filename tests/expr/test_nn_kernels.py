"""The lazily imported Numba kernels compute exactly what the numpy references compute."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from mnnjit.ops import nn_conv, nn_pool, nn_resize  # noqa: E402

rng = np.random.default_rng(5)


@pytest.mark.parametrize("stride,dil,pads,act", [((1, 1), (1, 1), (1, 1, 1, 1), "relu6"),
                                                 ((2, 1), (1, 2), (0, 2, 1, 0), ""), ((2, 2), (1, 1), (1, 0, 1, 0), "relu")])
def test_depthwise_kernel_equals_numpy(monkeypatch, stride, dil, pads, act):
    x = rng.standard_normal((2, 5, 9, 11)).astype(np.float32)
    w = rng.standard_normal((5, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    attrs = {"stride": stride, "dilation": dil, "pads": pads, "group": 5, "act": act}
    monkeypatch.setattr(nn_conv, "DEPTHWISE_NUMBA_WORK", 1 << 62)
    want = nn_conv.conv2d_ref([x, w, b], attrs)
    monkeypatch.setattr(nn_conv, "DEPTHWISE_NUMBA_WORK", 0)
    np.testing.assert_array_equal(nn_conv.conv2d_ref([x, w, b], attrs), want)


def test_pool_kernel_equals_numpy(monkeypatch):
    x = rng.standard_normal((2, 3, 8, 7)).astype(np.float32)
    for ceil in (False, True, "mnn"):
        for kind in ("max", "avg"):
            for inc in (True, False):
                pads = (1, 2, 0, 1)
                out = (nn_pool.pool_out_size(8, 1, 2, 3, 2, ceil), nn_pool.pool_out_size(7, 0, 1, 2, 3, ceil))
                attrs = {"kind": kind, "kernel": (3, 2), "stride": (2, 3), "pads": pads, "out": out,
                         "count_include_pad": inc}
                monkeypatch.setattr(nn_pool, "NUMBA_WORK", 1 << 62)
                want = nn_pool.pool2d_ref([x], attrs)
                monkeypatch.setattr(nn_pool, "NUMBA_WORK", 0)
                np.testing.assert_allclose(nn_pool.pool2d_ref([x], attrs), want, atol=1e-6)


@pytest.mark.parametrize("method,coord", [("bilinear", "half_pixel"), ("cubic", "align_corners"),
                                          ("bilinear", "asymmetric")])
def test_resize_kernel_equals_numpy(monkeypatch, method, coord):
    x = rng.standard_normal((1, 3, 7, 9)).astype(np.float32)
    attrs = {"size": (13, 5), "method": method, "coord": coord}
    monkeypatch.setattr(nn_resize, "NUMBA_WORK", 1 << 62)
    want = nn_resize.resize_ref([x], attrs)
    monkeypatch.setattr(nn_resize, "NUMBA_WORK", 0)
    np.testing.assert_allclose(nn_resize.resize_ref([x], attrs), want, atol=1e-6)
