"""warpAffine / warpPerspective against OpenCV: images of 2 and 5 channels (OpenCV 5's fixed-point path,
bit-exact here) and non-finite matrices (OpenCV's float kernels read the border value for every pixel;
its fixed-point path wraps its int32 coordinates, and so does mnnjit's)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mnnjit.cv as cv
from mnnjit.cv._common import image_var

cv2 = pytest.importorskip("cv2")
BORDERS = {0: cv2.BORDER_CONSTANT, 1: cv2.BORDER_REFLECT_101, 2: cv2.BORDER_REFLECT}


def _matrices(rng, perspective):
    m = np.array([[1 + rng.normal() * 0.2, rng.normal() * 0.3, rng.normal() * 8],
                  [rng.normal() * 0.3, 1 + rng.normal() * 0.2, rng.normal() * 8],
                  [rng.normal() * 2e-3, rng.normal() * 2e-3, 1.0]])
    return m if perspective else m[:2]


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.integers(0, 2 ** 31 - 1), st.sampled_from([2, 5]), st.sampled_from([np.uint8, np.float32]),
       st.sampled_from([cv.INTER_NEAREST, cv.INTER_LINEAR]), st.sampled_from([0, 1, 2]), st.booleans(),
       st.booleans())
def test_two_and_five_channel_warps_are_exact(seed, c, dtype, interp, border, perspective, inverse):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (int(rng.integers(5, 60)), int(rng.integers(5, 60)), c)).astype(dtype)
    m = _matrices(rng, perspective)
    size = (int(rng.integers(4, 70)), int(rng.integers(4, 70)))
    value = tuple(float(v) for v in rng.integers(0, 256, 4))
    flag = interp | (cv.WARP_INVERSE_MAP if inverse else 0)
    if perspective:
        got = cv.warpPerspective(image_var(x), m, size, flag, border, value)
        ref = cv2.warpPerspective(x, m, size, flags=flag, borderMode=BORDERS[border], borderValue=value)
    else:
        got = cv.warpAffine(image_var(x), m, size, flag, border, value)
        ref = cv2.warpAffine(x, m, size, flags=flag, borderMode=BORDERS[border], borderValue=value)
    got = np.asarray(got)
    assert got.shape == ref.shape and np.array_equal(got, ref)


@pytest.mark.parametrize("c, shape", [(1, (12, 14)), (2, (12, 14)), (3, (12, 14)), (4, (12, 14)), (5, (12, 14)),
                                      (3, (200, 210)), (2, (200, 210))])  # large: the compiled kernels
def test_non_finite_matrices_give_the_border_value(c, shape):
    rng = np.random.default_rng(c)
    x = rng.integers(0, 256, shape + (c,)).astype(np.uint8)
    value = (7, 8, 9, 10)
    osize = (shape[1] - 3, shape[0] - 2)
    large = shape[0] > 100
    interps = (cv.INTER_LINEAR,) if large else \
        (cv.INTER_NEAREST, cv.INTER_LINEAR) + ((cv.INTER_CUBIC,) if c != 5 else ())
    for k, pos in enumerate([(0, 0), (0, 2), (1, 1), (1, 2)]):
        bad = (np.nan, np.inf, -np.inf)[k % 3]
        m = np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 1.0]])
        m[pos] = bad
        for interp in interps:
            for inverse in (0, cv.WARP_INVERSE_MAP):
                got = np.asarray(cv.warpAffine(image_var(x), m, osize, interp | inverse, 0, value))
                ref = cv2.warpAffine(x, m, osize, flags=interp | inverse, borderValue=value)
                assert np.array_equal(got.reshape(ref.shape), ref), (bad, pos, interp, inverse)
                if c in (1, 3, 4):  # (OpenCV's int32 fixed-point path can wrap around to real pixels)
                    assert (ref.reshape(-1, c) == [value[i % 4] for i in range(c)]).all()
                h = np.vstack([m, [0.0, 0.0, 1.0]])
                got = np.asarray(cv.warpPerspective(image_var(x), h, osize, interp | inverse, 0, value))
                ref = cv2.warpPerspective(x, h, osize, flags=interp | inverse, borderValue=value)
                assert np.array_equal(got.reshape(ref.shape), ref), ("perspective", bad, pos, interp, inverse)
