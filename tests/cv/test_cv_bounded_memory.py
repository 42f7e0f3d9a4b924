"""Memory follows the image, not a parameter: GaussianBlur with huge sigmas and drawing with huge
coordinates, radii and thicknesses on small images run in a subprocess whose address space is capped
(RLIMIT_AS) a little above what it holds after a warm-up call of each function."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import mnnjit.cv as cv
from mnnjit.cv._common import image_var

cv2 = pytest.importorskip("cv2")
pytest.importorskip("resource")

_CHILD = textwrap.dedent(r"""
    import resource, sys
    import numpy as np
    from hypothesis import given, settings, strategies as st
    import mnnjit.cv as cv
    from mnnjit.cv._common import image_var

    def vm_bytes():
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmSize")

    img = lambda h, w, c, dt: np.zeros((h, w, c) if c > 1 else (h, w), dt)
    # warm up every path once (kernels, caches), then cap the address space
    np.asarray(cv.GaussianBlur(image_var(img(8, 8, 3, np.uint8)), (0, 0), 300.0))
    np.asarray(cv.GaussianBlur(image_var(img(8, 8, 1, np.float32)), (0, 0), 300.0))
    warm = img(8, 8, 3, np.uint8)
    for lt in (4, 8, 16):
        cv.circle(warm, (3, 3), 9, (1, 2, 3), 3, lt)
        cv.line(warm, (0, 0), (9, 9), (1, 2, 3), 4, lt)
        cv.fillPoly(warm, [np.array([[0, 0], [9, 2], [3, 9]], np.int32)], (1, 2, 3), lt)
    LIMIT = vm_bytes() + (768 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    BIG = st.integers(-(2 ** 30), 2 ** 30)
    shapes = st.tuples(st.integers(1, 24), st.integers(1, 24), st.sampled_from([1, 3]))

    @settings(max_examples=12, deadline=None, derandomize=True)
    @given(shapes, st.sampled_from([np.uint8, np.float32]), st.floats(50.0, 1e5), st.floats(0.0, 1e5),
           st.sampled_from([0, 1, 2]))
    def blur(shape, dt, sx, sy, border):
        out = np.asarray(cv.GaussianBlur(image_var(img(*shape, dt) + 7), (0, 0), sx, sy, border))
        assert out.shape[:2] == shape[:2] and np.isfinite(out.astype(np.float64)).all()

    @settings(max_examples=20, deadline=None, derandomize=True)
    @given(shapes, st.tuples(BIG, BIG), st.tuples(BIG, BIG), st.integers(0, 2 ** 30),
           st.integers(-1, 32767), st.sampled_from([4, 8, 16]), st.integers(0, 4))
    def draw(shape, p, q, r, t, lt, shift):
        a = img(*shape, np.uint8)
        col = (255, 128, 7)
        cv.circle(a, p, r, col, t, lt, shift)
        cv.rectangle(a, p, q, col, t, lt, shift)
        cv.line(a, p, q, col, max(t, 1), lt, shift)
        cv.arrowedLine(a, p, q, col, max(t, 1), lt)
        cv.ellipse(a, p, (r, r // 3), 17.0, -40.0, 300.0, col, t, lt, shift)
        cv.polylines(a, [np.array([p, q, (q[0], p[1])], np.int32)], True, col, max(t, 0), lt, shift)
        cv.fillPoly(a, [np.array([p, q, (p[0], q[1]), (q[0] // 2, -q[1])], np.int32)], col, lt, shift)
        cv.fillConvexPoly(a, np.array([p, q, (q[0], p[1])], np.int32), col, lt, shift)
        cv.drawContours(a, [np.array([p, q, (q[0], p[1])], np.int32).reshape(-1, 1, 2)], -1, col, t, lt)

    blur()
    draw()
    print("OK", LIMIT >> 20)
""")


def test_huge_parameters_stay_within_a_memory_cap():
    proc = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]


@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
@pytest.mark.parametrize("border", [0, 1, 2])
def test_folded_gaussian_matches_the_full_kernel(dtype, border):
    """Huge sigmas fold the kernel to the image: the result is the one of the full kernel (float32 as
    OpenCV's within its own rounding; uint8 OpenCV quantises each of thousands of taps, so it is compared
    with the exact value)."""
    from mnnjit.ops.image_geometry import border_index
    rng = np.random.default_rng(border)
    x = rng.integers(0, 256, (7, 9, 3)).astype(dtype)
    sigma = 400.0
    ksize = int(round(sigma * (3 if dtype == np.uint8 else 4) * 2 + 1)) | 1
    k = np.exp(-((np.arange(ksize) - ksize // 2) ** 2) / (2 * sigma * sigma))
    k /= k.sum()
    cvb = {0: 0, 1: 4, 2: 2}[border]

    def axis(n):
        m = np.zeros((n, n))
        for i in range(n):
            idx = border_index(np.arange(ksize) + i - ksize // 2, n, cvb)
            np.add.at(m[i], np.maximum(idx, 0), np.where(idx >= 0, k, 0.0))
        return m
    exact = np.einsum("yh,hwc,xw->yxc", axis(7), x.astype(np.float64), axis(9))
    ours = np.asarray(cv.GaussianBlur(image_var(x), (0, 0), sigma, 0, border)).astype(np.float64)
    if dtype == np.uint8:
        assert np.abs(ours - exact).max() <= 0.5 + 1e-6
    else:
        np.testing.assert_allclose(ours, exact, rtol=1e-5, atol=1e-4)
        ref = cv2.GaussianBlur(x, (0, 0), sigma, borderType={0: cv2.BORDER_CONSTANT, 1: cv2.BORDER_REFLECT_101,
                                                                  2: cv2.BORDER_REFLECT}[border])
        np.testing.assert_allclose(ours, ref, rtol=0, atol=2e-3)
