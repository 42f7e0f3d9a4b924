"""Property-based tests of a user's preprocessing function with mnnjit.testing and Hypothesis.

``preprocess`` below stands for the function a user ships: it turns a BGR uint8 image of any size
into a normalised [1, 3, S, S] NCHW float network input. Hypothesis draws images of random sizes,
channel counts and contents (``mnnjit.testing.strategies.images``) and checks properties:

* the output shape, dtype and data format, for every image size;
* every value lies in the range normalisation can produce;
* the result matches an independent numpy + OpenCV version of the same steps.

Run it as a script (each test runs its examples) or with pytest:
    python examples/property_test_preprocessing.py
    python -m pytest examples/property_test_preprocessing.py
"""
from __future__ import annotations

import numpy
from hypothesis import given, settings
from hypothesis import strategies as st

import mnnjit.cv as cv
import mnnjit.expr as F
import mnnjit.numpy as np
from mnnjit.testing import assert_allclose
from mnnjit.testing import strategies as mst

SIZE = 32
MEAN = [123.68, 116.78, 103.94]  # RGB
STD = [58.4, 57.1, 57.4]


# ------------------------------------------------------------------ the function under test
def preprocess(img, size: int = SIZE):
    """A BGR uint8 image ([h, w, 3] or [h, w, 1] gray) -> a [1, 3, size, size] NCHW float32 input."""
    if img.shape[-1] == 1:
        img = cv.cvtColor(img, cv.COLOR_GRAY2BGR)
    img = cv.resize(img, (size, size))
    img = cv.cvtColor(img, cv.COLOR_BGR2RGB)
    x = (img.astype(np.float32) - MEAN) / STD
    return F.convert(np.expand_dims(x, 0), F.NCHW)


# ------------------------------------------------------------------ an independent oracle
def preprocess_reference(img: numpy.ndarray, size: int = SIZE) -> numpy.ndarray:
    """The same steps with OpenCV and numpy."""
    import cv2
    if img.shape[-1] == 1:
        img = cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)
    img = cv2.resize(img, (size, size))
    img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
    x = (img.astype(numpy.float32) - numpy.float32(MEAN)) / numpy.float32(STD)
    return numpy.ascontiguousarray(x.transpose(2, 0, 1))[None]


# Images of 1..64 x 1..64 pixels, 3 channels or gray, any contents. Few examples keep it quick;
# raise max_examples to search harder.
IMAGES = mst.images(height=st.integers(1, 64), width=st.integers(1, 64), channels=st.sampled_from([1, 3]))
SETTINGS = settings(max_examples=15, deadline=None, derandomize=True)


@SETTINGS
@given(IMAGES)
def test_shape_dtype_and_format(img):
    """Any image becomes a [1, 3, SIZE, SIZE] float NCHW input."""
    x = preprocess(img)
    assert x.shape == [1, 3, SIZE, SIZE]
    assert x.dtype == F.float
    assert x.data_format == F.NCHW


@SETTINGS
@given(IMAGES)
def test_values_in_normalised_range(img):
    """Normalised pixels stay within what 0..255 maps to."""
    x = numpy.asarray(preprocess(img).read())
    lo = min((0 - m) / s for m, s in zip(MEAN, STD))
    hi = max((255 - m) / s for m, s in zip(MEAN, STD))
    assert numpy.isfinite(x).all()
    assert lo - 1e-5 <= x.min() and x.max() <= hi + 1e-5


@SETTINGS
@given(IMAGES)
def test_matches_opencv_and_numpy(img):
    """The mnnjit pipeline gives OpenCV + numpy's answer (resize rounding: one level, 1/STD)."""
    want = preprocess_reference(numpy.asarray(img.read()))
    assert_allclose(preprocess(img), want, atol=1.01 / min(STD))


if __name__ == "__main__":
    for test in (test_shape_dtype_and_format, test_values_in_normalised_range, test_matches_opencv_and_numpy):
        test()
        print(f"{test.__name__}: passed")
