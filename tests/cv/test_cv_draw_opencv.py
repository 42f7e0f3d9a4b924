"""mnnjit.cv drawing against OpenCV, pixel for pixel: random shapes, thicknesses, line types, shifts,
colours, image types and shapes partly or wholly outside the image (Hypothesis), plus the cases of
issue 23 and MNN's argument forms."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mnnjit.cv as cv
from mnnjit.cv._common import image_var

cv2 = pytest.importorskip("cv2")

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)
LINE_TYPES = st.sampled_from([cv2.LINE_4, cv2.LINE_8, cv2.LINE_AA])
IMAGES = st.tuples(st.integers(1, 40), st.integers(1, 40), st.sampled_from([0, 1, 2, 3, 4]),
                   st.sampled_from([np.uint8, np.uint8, np.float32, np.int16, np.uint16, np.int8]))
COLORS = st.lists(st.floats(-300, 600, allow_nan=False).map(lambda v: round(v, 1)), min_size=1, max_size=4)


def _pair(shift, lo=-20, hi=60):
    return st.tuples(st.integers(lo << shift, hi << shift), st.integers(lo << shift, hi << shift))


def _same(draw_cv2, draw_ours, image, color):
    """Draw the same shape with OpenCV and mnnjit on copies of one random image; they must be equal."""
    h, w, cn, dtype = image
    shape = (h, w) if cn == 0 else (h, w, cn)
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    lo, hi = (info.min, info.max) if info else (-5, 5)
    base = np.random.default_rng(h * 41 + w).uniform(lo, hi, shape).astype(dtype)
    color = tuple(color)
    a, b = base.copy(), base.copy()
    draw_cv2(a, color)
    assert draw_ours(b, color) is None
    diff = np.argwhere(a != b)
    assert not len(diff), f"{len(diff)} values differ, first at {diff[:4].tolist()}"


@SETTINGS
@given(IMAGES, COLORS, st.integers(0, 3).flatmap(lambda s: st.tuples(st.just(s), _pair(s), _pair(s))),
       st.integers(1, 9), LINE_TYPES)
def test_line(image, color, pts, thickness, lt):
    s, p, q = pts
    _same(lambda a, c: cv2.line(a, p, q, c, thickness, lt, s),
          lambda b, c: cv.line(b, p, q, c, thickness, lt, s), image, color)


@SETTINGS
@given(IMAGES, COLORS, _pair(0), _pair(0), st.integers(1, 6), LINE_TYPES, st.floats(0.05, 0.8))
def test_arrowed_line(image, color, p, q, thickness, lt, tip):
    _same(lambda a, c: cv2.arrowedLine(a, p, q, c, thickness, lt, 0, tip),
          lambda b, c: cv.arrowedLine(b, p, q, c, thickness, lt, 0, tip), image, color)


@SETTINGS
@given(IMAGES, COLORS, st.integers(0, 3).flatmap(lambda s: st.tuples(st.just(s), _pair(s), st.integers(0, 50 << s))),
       st.sampled_from([-1, 0, 1, 2, 3, 6]), LINE_TYPES)
def test_circle(image, color, geo, thickness, lt):
    s, c0, r = geo
    _same(lambda a, c: cv2.circle(a, c0, r, c, thickness, lt, s),
          lambda b, c: cv.circle(b, c0, r, c, thickness, lt, s), image, color)


@SETTINGS
@given(IMAGES, COLORS, st.integers(0, 2).flatmap(lambda s: st.tuples(st.just(s), _pair(s), _pair(s, 0, 40))),
       st.tuples(st.floats(-400, 400), st.floats(-400, 400), st.floats(-400, 400)),
       st.sampled_from([-1, 1, 2, 4]), LINE_TYPES)
def test_ellipse(image, color, geo, angles, thickness, lt):
    s, c0, axes = geo
    _same(lambda a, c: cv2.ellipse(a, c0, axes, *angles, c, thickness, lt, s),
          lambda b, c: cv.ellipse(b, c0, axes, *angles, c, thickness, lt, s), image, color)


@SETTINGS
@given(IMAGES, COLORS, st.tuples(st.floats(-10, 50), st.floats(-10, 50)), st.tuples(st.floats(0, 60), st.floats(0, 60)),
       st.floats(-360, 360), st.sampled_from([-1, 1, 3]), LINE_TYPES)
def test_ellipse_in_rotated_box(image, color, center, size, angle, thickness, lt):
    box = (center, size, angle)
    _same(lambda a, c: cv2.ellipse(a, box, c, thickness, lt),
          lambda b, c: cv.ellipse(b, box, c, thickness, lt), image, color)


@SETTINGS
@given(IMAGES, COLORS, st.integers(0, 3).flatmap(lambda s: st.tuples(st.just(s), _pair(s), _pair(s))),
       st.sampled_from([-1, 1, 2, 5]), LINE_TYPES)
def test_rectangle(image, color, pts, thickness, lt):
    s, p, q = pts
    _same(lambda a, c: cv2.rectangle(a, p, q, c, thickness, lt, s),
          lambda b, c: cv.rectangle(b, p, q, c, thickness, lt, s), image, color)


def _polys(shift, max_polys=3):
    poly = st.lists(_pair(shift), min_size=1, max_size=7).map(lambda p: np.array(p, np.int32))
    return st.lists(poly, min_size=1, max_size=max_polys)


@SETTINGS
@given(IMAGES, COLORS, st.integers(0, 3).flatmap(lambda s: st.tuples(st.just(s), _polys(s))), st.booleans(),
       st.integers(0, 5), LINE_TYPES)
def test_polylines(image, color, geo, closed, thickness, lt):
    s, polys = geo
    _same(lambda a, c: cv2.polylines(a, polys, closed, c, thickness, lt, s),
          lambda b, c: cv.polylines(b, polys, closed, c, thickness, lt, s), image, color)


@SETTINGS
@given(IMAGES, COLORS, st.integers(0, 3).flatmap(lambda s: st.tuples(st.just(s), _polys(s))), LINE_TYPES,
       _pair(0, -5, 5))
def test_fill_poly(image, color, geo, lt, offset):
    s, polys = geo
    _same(lambda a, c: cv2.fillPoly(a, polys, c, lt, s, offset),
          lambda b, c: cv.fillPoly(b, polys, c, lt, s, offset), image, color)


@SETTINGS
@given(IMAGES, COLORS, st.integers(0, 3).flatmap(lambda s: st.tuples(st.just(s), _polys(s, 1))), LINE_TYPES)
def test_fill_convex_poly(image, color, geo, lt):
    s, polys = geo
    _same(lambda a, c: cv2.fillConvexPoly(a, polys[0], c, lt, s),
          lambda b, c: cv.fillConvexPoly(b, polys[0], c, lt, s), image, color)


@SETTINGS
@given(IMAGES, COLORS, _polys(0, 4), st.integers(-1, 3), st.sampled_from([-1, 1, 2, 4]), LINE_TYPES)
def test_draw_contours(image, color, polys, idx, thickness, lt):
    contours = [p.reshape(-1, 1, 2) for p in polys]
    idx = min(idx, len(contours) - 1)
    _same(lambda a, c: cv2.drawContours(a, contours, idx, c, thickness, lt),
          lambda b, c: cv.drawContours(b, contours, idx, c, thickness, lt), image, color)


# ------------------------------------------------------------------------------- issue 23 and MNN forms
@pytest.fixture(scope="module")
def photo():
    return np.random.default_rng(23).integers(0, 256, (360, 480, 3)).astype(np.uint8)


def test_issue_cases_on_a_photo_sized_image(photo):
    tri = np.array([[100, 50], [300, 120], [150, 300]], np.int32)
    for draw2, draw in [
        (lambda a: cv2.circle(a, (70, 70), 30, (0, 255, 0)), lambda v: cv.circle(v, (70, 70), 30, (0, 255, 0))),
        (lambda a: cv2.fillPoly(a, [tri], (0, 0, 255)), lambda v: cv.fillPoly(v, [tri], (0, 0, 255))),
        (lambda a: cv2.drawContours(a, [tri.reshape(-1, 1, 2)], -1, (255, 0, 0), 2),
         lambda v: cv.drawContours(v, [tri.reshape(-1, 1, 2)], -1, (255, 0, 0), 2)),
    ]:
        ref = photo.copy()
        draw2(ref)
        v = image_var(photo.copy())  # drawing on a Var changes the Var in place
        assert draw(v) is None
        assert np.array_equal(np.asarray(v), ref)


def test_mnn_argument_forms(photo):
    ref, ours = photo.copy(), photo.copy()
    # flat [x0, y0, x1, y1, ...] contours as in MNN's docs; fractional points truncate as real MNN does
    cv2.fillPoly(ref, [np.array([[10, 10], [80, 20], [40, 70]], np.int32)], (1, 2, 3))
    cv.fillPoly(ours, [[10, 10, 80, 20, 40, 70]], (1, 2, 3))
    cv2.line(ref, (5, 300), (400, 10), (9, 8, 7), 3)
    cv.line(ours, (5.9, 300.2), (400.7, 10.99), (9, 8, 7), 3)
    cv2.rectangle(ref, (20, 30, 100, 50), (4, 5, 6), 2)  # the (x, y, w, h) form
    cv.rectangle(ours, (20, 30, 100, 50), (4, 5, 6), 2)
    cv2.circle(ref, (200, 200), 40, 200, -1)  # a number is the Scalar (v, 0, 0, 0)
    cv.circle(ours, (200, 200), 40, 200, -1)
    assert np.array_equal(ours, ref)
    batch = image_var(photo.copy()[None])  # a batch of one [1, h, w, c]
    cv.circle(batch, (70, 70), 30, (0, 255, 0), 3, cv.LINE_AA)
    ref = photo.copy()
    cv2.circle(ref, (70, 70), 30, (0, 255, 0), 3, cv2.LINE_AA)
    assert batch.shape == [1, 360, 480, 3] and np.array_equal(np.asarray(batch)[0], ref)


def test_bad_arguments_raise_clear_errors():
    img = np.zeros((10, 10, 3), np.uint8)
    with pytest.raises(ValueError, match="thickness"):
        cv.line(img, (0, 0), (5, 5), (255, 0, 0), 0)
    with pytest.raises(ValueError, match="lineType"):
        cv.line(img, (0, 0), (5, 5), (255, 0, 0), 1, 5)
    with pytest.raises(ValueError, match="shift"):
        cv.circle(img, (5, 5), 3, (255, 0, 0), 1, 8, 17)
    with pytest.raises(ValueError, match="radius"):
        cv.circle(img, (5, 5), -1, (255, 0, 0))
    with pytest.raises(ValueError, match="4 channels"):
        cv.circle(np.zeros((10, 10, 5), np.uint8), (5, 5), 3, (255, 0, 0))
    with pytest.raises(ValueError, match="pairs"):
        cv.fillPoly(img, [[1, 2, 3]], (255, 0, 0))
    with pytest.raises(ValueError, match="contourIdx"):
        cv.drawContours(img, [np.array([[1, 1], [5, 5]], np.int32)], 3, (255, 0, 0))
    with pytest.raises(ValueError, match="32-bit"):
        cv.line(img, (0, 0), (2 ** 40, 5), (255, 0, 0))
