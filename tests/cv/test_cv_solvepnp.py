"""cv.solvePnP against OpenCV: SOLVEPNP_SQPNP, SOLVEPNP_EPNP and SOLVEPNP_ITERATIVE on random well-posed
problems (points off a plane and on one, lens distortion, noise) and on the 6-point head pose of MNN's
docs. mnnjit numbers SQPNP 8 as MNN and OpenCV 4 do (OpenCV 5 calls it 6)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mnnjit.cv as cv

cv2 = pytest.importorskip("cv2")
CV2_FLAG = {cv.SOLVEPNP_ITERATIVE: cv2.SOLVEPNP_ITERATIVE, 1: cv2.SOLVEPNP_EPNP, cv.SOLVEPNP_SQPNP: cv2.SOLVEPNP_SQPNP}

HEAD_MODEL = np.array([0.0, 0.0, 0.0, 0.0, -330.0, -65.0, -225.0, 170.0, -135.0, 225.0, 170.0, -135.0,
                       -150.0, -150.0, -125.0, 150.0, -150.0, -125.0]).reshape(6, 3)
HEAD_IMAGE = np.array([359., 391., 399., 561., 337., 297., 513., 301., 345., 465., 453., 469.]).reshape(6, 2)
HEAD_K = np.array([1200., 0., 600., 0., 1200., 337.5, 0., 0., 1.]).reshape(3, 3)


def _compare(obj, img, k, dist, flag, tol):
    ok, r2, t2 = cv2.solvePnP(obj, img, k, dist, flags=CV2_FLAG[flag])
    ok1, rv, tv = cv.solvePnP(obj, img, k, dist, flag)
    rv, tv = np.asarray(rv, np.float64), np.asarray(tv, np.float64)
    assert ok and ok1 is True and rv.shape == (3, 1) and tv.shape == (3, 1)
    scale = max(1.0, float(np.abs(t2).max()))
    assert np.abs(rv - r2).max() <= tol, (rv.ravel(), r2.ravel())
    assert np.abs(tv - t2).max() <= tol * scale, (tv.ravel(), t2.ravel())


@pytest.mark.parametrize("flag", [cv.SOLVEPNP_SQPNP, 1, cv.SOLVEPNP_ITERATIVE])
def test_head_pose_of_the_mnn_docs(flag):
    # ITERATIVE ends behind the camera here (its DLT start does), as OpenCV's does
    _compare(HEAD_MODEL, HEAD_IMAGE, HEAD_K, np.zeros((4, 1)), flag, 1e-5)


def test_sqpnp_head_pose_values():
    ok, rv, tv = cv.solvePnP(HEAD_MODEL, HEAD_IMAGE, HEAD_K, np.zeros((4, 1)), cv.SOLVEPNP_SQPNP)
    assert np.asarray(rv).dtype == np.float32
    np.testing.assert_allclose(np.asarray(rv).ravel(), [3.0007222, 0.03165585, -0.9225546], atol=2e-6)
    np.testing.assert_allclose(np.asarray(tv).ravel(), [-435.97514, 95.39295, 2201.461], rtol=2e-6)


@st.composite
def problems(draw, planar_ok=True):
    seed = draw(st.integers(0, 2 ** 31 - 1))
    rng = np.random.default_rng(seed)
    planar = planar_ok and draw(st.booleans())
    n = draw(st.integers(6, 20))
    obj = rng.uniform(-1, 1, (n, 3))
    if planar:
        obj[:, 2] = 0
    rv = rng.normal(size=3) * 0.7
    tv = np.array([rng.uniform(-0.5, 0.5), rng.uniform(-0.5, 0.5), rng.uniform(3, 8)])
    k = np.array([[rng.uniform(400, 900), 0, 320], [0, rng.uniform(400, 900), 240], [0, 0, 1]])
    dist = np.zeros(5) if draw(st.booleans()) else np.array(
        [rng.uniform(-0.2, 0.2), rng.uniform(-0.1, 0.1), rng.uniform(-.01, .01), rng.uniform(-.01, .01), 0])
    img = cv2.projectPoints(obj, rv, tv, k, dist)[0].reshape(-1, 2)
    img = img + rng.normal(size=img.shape) * draw(st.sampled_from([0.0, 0.5, 2.0]))
    return obj, img, k, dist


@settings(max_examples=25, deadline=None, derandomize=True)
@given(problems())
def test_sqpnp_matches_opencv(p):
    _compare(*p, cv.SOLVEPNP_SQPNP, 1e-6)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(problems())
def test_epnp_matches_opencv(p):
    # planar clouds included: the zero singular vectors follow OpenCV's Jacobi SVD and its generator
    _compare(*p, 1, 1e-6)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(problems(planar_ok=False))
def test_iterative_matches_opencv(p):
    # the same start and Levenberg-Marquardt schedule; both stop near the optimum, not exactly at it
    _compare(*p, cv.SOLVEPNP_ITERATIVE, 1e-4)


def test_bad_input_raises():
    obj = np.random.default_rng(0).uniform(-1, 1, (5, 3))
    img = np.random.default_rng(1).uniform(0, 100, (5, 2))
    with pytest.raises(ValueError, match="at least 6 points"):  # OpenCV's DLT start needs 6
        cv.solvePnP(obj, img, HEAD_K, None, cv.SOLVEPNP_ITERATIVE)
    with pytest.raises(ValueError, match="flags"):
        cv.solvePnP(HEAD_MODEL, HEAD_IMAGE, HEAD_K, None, 3)
    with pytest.raises(ValueError, match="object points"):
        cv.solvePnP(HEAD_MODEL, HEAD_IMAGE[:5], HEAD_K, None, cv.SOLVEPNP_SQPNP)
    with pytest.raises(ValueError, match="distCoeffs"):
        cv.solvePnP(HEAD_MODEL, HEAD_IMAGE, HEAD_K, np.zeros(3), cv.SOLVEPNP_SQPNP)
