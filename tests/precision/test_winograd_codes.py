"""memory=low Winograd on int8 codes (``gemm/winograd_codes.py``): the transformed weights are
computed from the codes per task; the result must equal the convolution with the dequantized
weights up to float rounding."""
from __future__ import annotations

import numba
import numpy as np
import pytest

from precision_refs import act_ref, conv_ref

WC = pytest.importorskip("mnnjit.backends.cpu.gemm.winograd_codes")


def _codes(rng, o, c, offset):
    codes = rng.integers(-128, 128, (o, c, 3, 3)).astype(np.int8)
    scale = rng.uniform(0.002, 0.02, o).astype(np.float32)
    off = rng.uniform(-0.01, 0.01, o).astype(np.float32) if offset else np.zeros(o, np.float32)
    return codes, scale, off


@pytest.mark.parametrize("n,c,o,h,w,m,pads,offset,act,res,half,threads", [
    (1, 5, 7, 6, 9, 2, (1, 1, 1, 1), False, "", False, False, 1),    # C*6 % 8 != 0: tail pass
    (1, 16, 13, 14, 14, 4, (1, 1, 1, 1), True, "relu", True, False, 2),  # offsets, residual
    (2, 8, 20, 7, 7, 2, (0, 1, 1, 0), True, "relu6", False, False, 2),  # batch, uneven pads
    (1, 12, 30, 10, 11, 4, (1, 1, 1, 1), False, "sigmoid", True, False, 1),  # other activations
])
# (float16 storage runs the float kernel's gather and scatter, tested there; its own
# specialisation of this kernel would add ~40 s of cold compile to the suite)
def test_winograd_on_codes_matches_the_dequantized_conv(n, c, o, h, w, m, pads, offset, act,
                                                        res, half, threads):
    rng = np.random.default_rng(c * o + h)
    codes, scale, off = _codes(rng, o, c, offset)
    wt = WC.winograd_codes_weights(codes, scale, off, m)
    assert wt.nbytes == wt.codes.nbytes + 8 * o and wt.codes.nbytes < 9 * (c + 4) * (o + 6)
    bias = rng.standard_normal(o).astype(np.float32)
    dt = np.float16 if half else np.float32
    x = rng.standard_normal((n, c, h, w)).astype(dt)
    wd = codes.astype(np.float64) * scale[:, None, None, None] + off[:, None, None, None]
    ref = conv_ref(x.astype(np.float64), wd, bias, (1, 1), pads, (1, 1), 1)
    r = rng.standard_normal(ref.shape).astype(dt) if res else None
    if res:
        ref = ref + r.astype(np.float64)
    ref = act_ref(ref, act)
    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        got = WC.winograd_codes_conv3x3(x, wt, bias, pads, act, res=r)
    finally:
        numba.set_num_threads(before)
    tol = (2 ** -10 * np.abs(ref) + 3e-3) if half else 1e-5 * (1 + np.abs(ref)) * c
    assert got.dtype == dt and got.shape == ref.shape
    assert np.all(np.abs(got.astype(np.float64) - ref) <= tol)


def test_winograd_codes_workspace_and_bad_input():
    """A caller's workspace of codes_workspace_floats values is used as given (same result as the
    fallback); wrong weights, channels and tile sizes are refused by name."""
    rng = np.random.default_rng(3)
    codes, scale, off = _codes(rng, 9, 4, True)
    wt = WC.winograd_codes_weights(codes, scale, off, 4)
    x = rng.standard_normal((1, 4, 13, 13)).astype(np.float32)
    ws = np.full(WC.codes_workspace_floats(x.shape, wt, (1, 1, 1, 1)), np.nan, np.float32)
    a = WC.winograd_codes_conv3x3(x, wt, None, (1, 1, 1, 1), ws=ws)
    b = WC.winograd_codes_conv3x3(x, wt, None, (1, 1, 1, 1))
    assert np.array_equal(a, b) and not np.isnan(ws).all()
    with pytest.raises(ValueError, match="channels"):
        WC.winograd_codes_conv3x3(x[:, :3], wt, None, (1, 1, 1, 1))
    with pytest.raises(ValueError, match="m must be 2 or 4"):
        WC.winograd_codes_weights(codes, scale, off, 3)
    with pytest.raises(ValueError, match="int8"):
        WC.winograd_codes_weights(codes.astype(np.int16), scale, off, 2)
    with pytest.raises(ValueError, match="one per output"):
        WC.winograd_codes_weights(codes, scale[:5], off, 2)
    with pytest.raises(TypeError, match="winograd_codes_weights"):
        WC.winograd_codes_conv3x3(x, object(), None)
