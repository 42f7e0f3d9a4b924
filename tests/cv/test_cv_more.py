"""mnnjit.cv filters, thresholds, shapes, drawing and MNN's return conventions, against OpenCV."""
import numpy as np
import pytest

import mnnjit.cv as cv
from mnnjit.cv._common import image_var

cv2 = pytest.importorskip("cv2")


def maxdiff(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.abs(a.reshape(b.shape).astype(np.float64) - b.astype(np.float64)).max())


@pytest.fixture(scope="module", params=[(37, 53), (260, 300)])
def img(request):
    return np.random.default_rng(0).integers(0, 256, request.param + (3,)).astype(np.uint8)


def test_smoothing_and_derivatives(img):
    x = image_var(img)
    assert maxdiff(cv.GaussianBlur(x, (5, 5), 1.2), cv2.GaussianBlur(img, (5, 5), 1.2)) <= 1
    assert maxdiff(cv.GaussianBlur(x, (5, 5), 0), cv2.GaussianBlur(img, (5, 5), 0)) <= 1
    assert maxdiff(cv.GaussianBlur(x, (0, 0), 2.0), cv2.GaussianBlur(img, (0, 0), 2.0)) <= 1
    assert maxdiff(cv.blur(x, (3, 5)), cv2.blur(img, (3, 5))) <= 1
    assert maxdiff(cv.boxFilter(x, -1, (3, 3)), cv2.boxFilter(img, -1, (3, 3))) <= 1
    assert maxdiff(cv.sqrBoxFilter(x, -1, (3, 3)), cv2.sqrBoxFilter(img, -1, (3, 3))) < 1e-2
    assert maxdiff(cv.Sobel(x, -1, 1, 0), cv2.Sobel(img, -1, 1, 0)) <= 1
    assert maxdiff(cv.Sobel(x, cv.CV_32F, 1, 1, 5), cv2.Sobel(img, cv2.CV_32F, 1, 1, ksize=5)) < 1e-2
    assert maxdiff(cv.Scharr(x, cv.CV_32F, 0, 1), cv2.Scharr(img, cv2.CV_32F, 0, 1)) < 1e-2
    assert maxdiff(cv.Laplacian(x, cv.CV_32F), cv2.Laplacian(img, cv2.CV_32F)) < 1e-2
    assert maxdiff(cv.Laplacian(x, -1, 3), cv2.Laplacian(img, -1, ksize=3)) <= 1
    k = np.random.default_rng(1).normal(size=(3, 4)).astype(np.float32)
    assert maxdiff(cv.filter2D(x, -1, k), cv2.filter2D(img, -1, k)) <= 1
    kx, ky = np.array([1., 2, 1]), np.array([1., 0, -1])
    assert maxdiff(cv.sepFilter2D(x, cv.CV_32F, kx, ky), cv2.sepFilter2D(img, cv2.CV_32F, kx, ky)) < 1e-2
    assert maxdiff(cv.bilateralFilter(x, 5, 30., 5.), cv2.bilateralFilter(img, 5, 30., 5.)) <= 2
    assert maxdiff(cv.pyrDown(x), cv2.pyrDown(img)) <= 1
    assert maxdiff(cv.pyrUp(x), cv2.pyrUp(img)) <= 1


def test_morphology(img):
    x = image_var(img)
    for shape in (0, 1, 2):
        se = cv2.getStructuringElement(shape, (5, 3))
        assert np.array_equal(np.asarray(cv.getStructuringElement(shape, (5, 3))), se)
        assert np.array_equal(np.asarray(cv.erode(x, se)), cv2.erode(img, se))
        assert np.array_equal(np.asarray(cv.dilate(x, se, iterations=2)), cv2.dilate(img, se, iterations=2))


@pytest.mark.parametrize("kind", [0, 1, 2, 3, 4, 8, 16])
def test_threshold_returns_only_the_image(img, kind):
    g = img[..., 0].copy()
    out = cv.threshold(image_var(g), 100.5, 200, kind)
    assert not isinstance(out, tuple)
    assert np.array_equal(np.asarray(out), cv2.threshold(g, 100.5, 200, kind)[1])


def test_adaptive_threshold(img):
    g = img[..., :1].copy()
    for method, kind, block, c in ((0, 0, 5, 2), (1, 1, 7, 3)):
        got = cv.adaptiveThreshold(image_var(g), 255, method, kind, block, c)
        assert got.shape == [g.shape[0], g.shape[1], 1]
        assert np.array_equal(np.asarray(got)[..., 0], cv2.adaptiveThreshold(g[..., 0], 255, method, kind, block, c))


def test_kernels():
    assert maxdiff(cv.getGaussianKernel(9, 2.), cv2.getGaussianKernel(9, 2.).T) < 1e-6
    assert cv.getGaussianKernel(5, 1.0).shape == [1, 5]
    assert maxdiff(cv.getGaborKernel((5, 7), 1., 0.3, 2., 0.5), cv2.getGaborKernel((5, 7), 1., 0.3, 2., 0.5)) < 1e-5
    kx, ky = cv.getDerivKernels(1, 0, 3)
    assert kx.shape == [1, 3] and np.allclose(np.asarray(kx).ravel(), [-1, 0, 1])


def test_shapes_and_components():
    img = np.zeros((60, 80), np.uint8)
    cv2.circle(img, (20, 20), 10, 255, -1)
    cv2.rectangle(img, (40, 30), (70, 50), 255, -1)
    cs, hier = cv.findContours(image_var(img[..., None]), cv.RETR_EXTERNAL, cv.CHAIN_APPROX_SIMPLE)
    ref, _ = cv2.findContours(img, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    assert len(cs) == len(ref)
    for a, b in zip(cs, ref):
        assert np.array_equal(np.asarray(a), b)
        assert cv.contourArea(a) == cv2.contourArea(b)
        assert cv.boundingRect(a) == list(cv2.boundingRect(b))
    pts = np.random.default_rng(3).integers(0, 100, (30, 2)).astype(np.int32)
    assert np.array_equal(np.asarray(cv.convexHull(pts)), cv2.convexHull(pts))
    (c1, s1, a1), (c2, s2, a2) = cv.minAreaRect(pts.astype(np.float32)), cv2.minAreaRect(pts.astype(np.float32))
    assert np.allclose(c1, c2, atol=1e-3) and np.allclose(s1, s2, atol=1e-3) and abs(a1 - a2) < 1e-3
    box = cv2.minAreaRect(pts.astype(np.float32))
    assert maxdiff(cv.boxPoints(box), cv2.boxPoints(box)) < 1e-3
    n, lab, st, ce = cv.connectedComponentsWithStats(image_var(img[..., None]))
    n2, lab2, st2, ce2 = cv2.connectedComponentsWithStats(img)
    assert n == n2 and lab.shape == [1, 60, 80, 1]
    assert np.array_equal(np.asarray(lab)[0, ..., 0], lab2) and np.array_equal(np.asarray(st), st2)
    assert maxdiff(ce, ce2) < 1e-4
    h = cv.calcHist([image_var(img)], [0], None, [16], [0., 256.])
    assert h.shape == [16]
    assert np.array_equal(np.asarray(h), cv2.calcHist([img], [0], None, [16], [0., 256.]).ravel())


def test_drawing_in_place():
    a = np.zeros((80, 100, 3), np.uint8)
    v = image_var(a.copy())
    ref = a.copy()
    assert cv.line(v, (5, 5), (90, 60), (255, 0, 0), 1) is None
    cv2.line(ref, (5, 5), (90, 60), (255, 0, 0), 1)
    assert cv.rectangle(v, (10, 10), (60, 50), (0, 255, 0), -1) is None
    cv2.rectangle(ref, (10, 10), (60, 50), (0, 255, 0), -1)
    cv.circle(v, (50, 40), 20, (0, 0, 255), -1)
    cv2.circle(ref, (50, 40), 20, (0, 0, 255), -1)
    P = np.array([[10, 10], [80, 20], [60, 70], [20, 50]], np.int32)
    cv.fillPoly(v, [P], (1, 2, 3))
    cv2.fillPoly(ref, [P], (1, 2, 3))
    diff = (np.abs(np.asarray(v).astype(int) - ref).sum(-1) > 0).mean()
    assert diff < 0.01


def test_misc_mnn_conventions():
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (20, 30, 3)).astype(np.uint8)
    m = cv.mean(image_var(x))
    assert m.shape == [4] and np.allclose(np.asarray(m)[:3], x.mean((0, 1)), atol=1e-3)
    parts = cv.split(image_var(x))
    assert len(parts) == 3 and parts[0].shape == [20, 30]
    assert np.array_equal(np.asarray(cv.merge(parts)), x)
    y = rng.integers(0, 256, (20, 30, 3)).astype(np.uint8)
    assert maxdiff(cv.addWeighted(image_var(x), 0.3, image_var(y), 0.7, 5), cv2.addWeighted(x, 0.3, y, 0.7, 5)) <= 1
    assert np.array_equal(np.asarray(cv.bitwise_and(image_var(x), image_var(y))), cv2.bitwise_and(x, y))
    assert np.array_equal(np.asarray(cv.hconcat([image_var(x), image_var(y)])), cv2.hconcat([x, y]))
    r = np.array([0.1, -0.2, 0.3])
    assert maxdiff(cv.Rodrigues(r), cv2.Rodrigues(r)[0]) < 1e-5
    obj = rng.uniform(-1, 1, (8, 3))
    K = np.array([[500., 0, 320], [0, 500, 240], [0, 0, 1]])
    ip, _ = cv2.projectPoints(obj, r, np.array([0.1, 0.2, 5.]), K, None)
    ok, rv, tv = cv.solvePnP(obj, ip.reshape(-1, 2), K, np.zeros(4))
    assert ok and maxdiff(rv, r.reshape(3, 1)) < 1e-3 and maxdiff(tv, np.array([[0.1], [0.2], [5.]])) < 1e-3


def test_cvmatrix_and_imageprocess():
    from mnnjit.imageprocess import CVImageProcess, CVMatrix
    m = CVMatrix()
    m.setScale(2, 3)
    m.postTranslate(5, 7)
    assert np.allclose(m.read(), [2, 0, 5, 0, 3, 7, 0, 0, 1])
    m.invert()
    assert np.allclose(np.array(m.read()).reshape(3, 3) @ [[2, 0, 5], [0, 3, 7], [0, 0, 1]], np.eye(3), atol=1e-6)
    img = np.random.default_rng(2).integers(0, 256, (20, 30, 3)).astype(np.uint8)
    p = CVImageProcess({"sourceFormat": 2, "destFormat": 1, "mean": (1, 2, 3), "normal": (0.5, 0.5, 0.5)})
    out = p.convert_array(img, 30, 20, 0, 30, 20)
    assert np.allclose(out, (img[..., ::-1].astype(np.float32) - [1, 2, 3]) * 0.5)


@pytest.mark.parametrize("case", ["resize", "resize_f32", "gray", "swap", "swap4", "bgra", "rgbx", "warp", "warp_rep",
                                  "gauss", "sobel", "blur", "f2d", "f2d_f32", "erode", "dilate_const", "dilate_refl",
                                  "persp", "persp_rep", "remap", "remap_rep", "cubic", "cubic_f32", "lanczos",
                                  "area", "area_f32", "area_up", "area2", "area3", "hsv", "hsv_full"])
def test_kernels_equal_reference(case):
    """Each hand-written Numba kernel returns exactly what its op's numpy reference returns."""
    from mnnjit.backends.cpu.handwritten import image_ops as kernels_cv
    from mnnjit.ops import registry
    rng = np.random.default_rng(7)
    x = rng.integers(0, 256, (123, 157, 3)).astype(np.uint8)
    M = tuple(cv2.invertAffineTransform(cv2.getRotationMatrix2D((70, 60), 25, 0.9)).ravel())
    P = tuple(np.linalg.inv(np.array([[1.1, 0.1, -3], [0.05, 0.9, 2], [0.001, 0.0005, 1]])).ravel())
    mx = rng.uniform(-5, 160, (90, 100)).astype(np.float32)
    my = rng.uniform(-5, 130, (90, 100)).astype(np.float32)
    op, inputs, attrs = {
        "resize": ("resize_image", [x], {"size": (50, 61), "interp": 1, "scale": (123 / 50, 157 / 61)}),
        "resize_f32": ("resize_image", [x.astype(np.float32)], {"size": (200, 90), "interp": 1,
                                                                "scale": (123 / 200, 157 / 90)}),
        "gray": ("cvt_color", [x], {"code": 6}),
        "swap": ("cvt_color", [x[:, :152]], {"code": 4}),
        "swap4": ("cvt_color", [x[:, :153]], {"code": 4}),
        "bgra": ("cvt_color", [x], {"code": 2}),
        "rgbx": ("cvt_color", [np.concatenate([x, x[..., :1]], -1)[:, :151]], {"code": 3}),
        "warp": ("warp_affine", [x], {"M": M, "size": (111, 140), "interp": 1, "border": 0, "value": (3, 4, 5)}),
        "warp_rep": ("warp_affine", [x], {"M": M, "size": (111, 140), "interp": 1, "border": 1, "value": (0,)}),
        "gauss": ("sep_filter", [x], {"kx": (0.0625, 0.25, 0.375, 0.25, 0.0625), "ky": (0.25, 0.5, 0.25),
                                      "anchor": (2, 1), "border": 4, "delta": 0.0, "dtype": np.dtype(np.uint8),
                                      "fixed": True}),
        "sobel": ("sep_filter", [x], {"kx": (-1.0, 0.0, 1.0), "ky": (1.0, 2.0, 1.0), "anchor": (1, 1), "border": 2,
                                      "delta": 0.0, "dtype": np.dtype(np.float32)}),
        "blur": ("sep_filter", [x], {"kx": (1 / 3,) * 3, "ky": (1 / 5,) * 5, "anchor": (1, 2), "border": 0,
                                     "delta": 0.0, "dtype": np.dtype(np.uint8)}),
        "f2d": ("filter2d", [x], {"kernel": ((0.5, -1.0, 0.25), (2.0, 0.0, 1.0)), "anchor": (1, 0), "border": 4,
                                  "delta": 3.0, "dtype": np.dtype(np.uint8)}),
        "f2d_f32": ("filter2d", [x.astype(np.float32)], {"kernel": ((0.5, -1.0, 0.25), (2.0, 0.0, 1.0)),
                                                         "anchor": (2, 1), "border": 0, "delta": 0.0,
                                                         "dtype": np.dtype(np.float32)}),
        "erode": ("morphology", [x], {"kernel": ((0, 1, 0), (1, 1, 1), (0, 1, 0)), "anchor": (1, 1), "op": "erode",
                                      "iterations": 2, "border": 0, "value": None}),
        "dilate_const": ("morphology", [x], {"kernel": ((1, 1, 1, 1, 1),), "anchor": (2, 0), "op": "dilate",
                                             "iterations": 1, "border": 0, "value": 200.0}),
        "dilate_refl": ("morphology", [x], {"kernel": ((1, 0), (1, 1), (0, 1)), "anchor": (0, 1), "op": "dilate",
                                            "iterations": 1, "border": 2, "value": None}),
        "cubic": ("resize_image", [x], {"size": (200, 90), "interp": 2, "scale": (123 / 200, 157 / 90)}),
        "cubic_f32": ("resize_image", [x.astype(np.float32)], {"size": (60, 90), "interp": 2,
                                                               "scale": (123 / 60, 157 / 90)}),
        "lanczos": ("resize_image", [x], {"size": (70, 190), "interp": 4, "scale": (123 / 70, 157 / 190)}),
        "area": ("resize_image", [x], {"size": (50, 61), "interp": 3, "scale": (123 / 50, 157 / 61)}),
        "area_f32": ("resize_image", [x.astype(np.float32)], {"size": (50, 61), "interp": 3,
                                                              "scale": (123 / 50, 157 / 61)}),
        "area_up": ("resize_image", [x], {"size": (150, 61), "interp": 3, "scale": (123 / 150, 157 / 61)}),
        "area2": ("resize_image", [x[:122, :156]], {"size": (61, 78), "interp": 3, "scale": (2.0, 2.0)}),
        "area3": ("resize_image", [x[:120, :156]], {"size": (40, 52), "interp": 3, "scale": (3.0, 3.0)}),
        "hsv": ("cvt_color", [x], {"code": 40}),
        "hsv_full": ("cvt_color", [x], {"code": 67}),
        "persp": ("warp_perspective", [x], {"M": P, "size": (111, 140), "interp": 1, "border": 0, "value": (9,)}),
        "persp_rep": ("warp_perspective", [x], {"M": P, "size": (111, 140), "interp": 1, "border": 1, "value": (0,)}),
        "remap": ("remap", [x, mx, my], {"interp": 1, "border": 0, "value": (1, 2, 3)}),
        "remap_rep": ("remap", [x, mx, my], {"interp": 1, "border": 1, "value": (0,)}),
    }[case]
    inputs = [np.ascontiguousarray(i) for i in inputs]
    got = getattr(kernels_cv, op)(inputs, attrs)
    ref = registry.get(op).ref(inputs, attrs)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    if case in ("blur", "f2d"):  # float32 vs float64 accumulation
        assert np.abs(got.astype(int) - ref).max() <= 1
    elif ref.dtype == np.float32:
        assert np.allclose(got, ref, rtol=1e-5, atol=1e-3)
    else:
        assert np.array_equal(got, ref)


@pytest.mark.parametrize("seed", range(6))
def test_find_contours_matches_opencv(seed):
    rng = np.random.default_rng(seed)
    img = np.zeros((50, 70), np.uint8)
    for _ in range(8):
        c = tuple(int(v) for v in rng.integers(0, 70, 2))
        cv2.circle(img, c, int(rng.integers(2, 12)), int(rng.choice([0, 255])), -1)
    if seed % 2:
        img = (rng.random((50, 70)) > 0.6).astype(np.uint8) * 255
    for mode in (cv.RETR_EXTERNAL, cv.RETR_LIST):
        for meth in (cv.CHAIN_APPROX_NONE, cv.CHAIN_APPROX_SIMPLE):
            cs, hier = cv.findContours(image_var(img[..., None]), mode, meth)
            ref, _ = cv2.findContours(img, mode, meth)
            assert hier == "no hierarchy" and len(cs) == len(ref)
            for a, b in zip(cs, ref):
                assert np.array_equal(np.asarray(a), b)


def test_core_functions_match_opencv():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (20, 30, 3)).astype(np.uint8)
    y = rng.integers(0, 256, (20, 30, 3)).astype(np.uint8)
    f = x.astype(np.float32)
    assert maxdiff(cv.normalize(image_var(f), None, 0, 1, cv.NORM_MINMAX), cv2.normalize(f, None, 0, 1,
                                                                                         cv2.NORM_MINMAX)) < 1e-6
    assert maxdiff(cv.normalize(image_var(f), None, 1, 0, cv.NORM_L2), cv2.normalize(f, None, 1, 0, cv2.NORM_L2)) < 1e-6
    assert maxdiff(cv.normalize(image_var(x), None, 10, 200, cv.NORM_MINMAX),
                   cv2.normalize(x, None, 10, 200, cv2.NORM_MINMAX)) <= 1
    w1 = rng.random((20, 30)).astype(np.float32)
    w2 = rng.random((20, 30)).astype(np.float32)
    assert maxdiff(cv.blendLinear(image_var(x), image_var(y), w1, w2), cv2.blendLinear(x, y, w1, w2)) <= 1
    m = (rng.random((20, 30)) > 0.5).astype(np.uint8)
    assert np.array_equal(np.asarray(cv.copyTo(image_var(x), image_var(m))), cv2.copyTo(x, m))
    assert np.array_equal(np.asarray(cv.bitwise_and(image_var(x), image_var(y), None, image_var(m))),
                          cv2.bitwise_and(x, y, mask=m))
    assert np.allclose(np.asarray(cv.mean(image_var(x), image_var(m))), cv2.mean(x, m), atol=1e-3)
    A, b = rng.random((3, 3)), rng.random((3, 1))
    ok, sol = cv.solve(A, b)
    assert ok and maxdiff(sol, cv2.solve(A, b)[1]) < 1e-5
    mx = rng.uniform(0, 29, (10, 12)).astype(np.float32)
    my = rng.uniform(0, 19, (10, 12)).astype(np.float32)
    m1, m2 = cv.convertMaps(mx, my, 11)
    r1, r2 = cv2.convertMaps(mx, my, cv2.CV_16SC2)
    assert np.array_equal(np.asarray(m1), r1) and np.array_equal(np.asarray(m2), r2)
    assert maxdiff(cv.getRectSubPix(image_var(x), (5, 4), (10.3, 7.6)), cv2.getRectSubPix(x, (5, 4), (10.3, 7.6))) <= 1


def test_imageprocess_convert_into_tensor_like():
    from mnnjit.imageprocess import CVImageProcess, CVMatrix

    class FakeTensor:
        def __init__(self):
            self.data = None

        def getShape(self):
            return (1, 3, 8, 10)

        def getDimensionType(self):
            return 1  # CAFFE: NCHW

        def fromNumpy(self, arr):
            self.data = arr

    img = np.random.default_rng(3).integers(0, 256, (16, 20, 3)).astype(np.uint8)
    p = CVImageProcess({"sourceFormat": 2, "destFormat": 2, "filterType": 1})
    m = CVMatrix()
    m.setScale(2.0, 2.0)  # destination (10 x 8) -> source (20 x 16)
    p.setMatrix(m)
    t = FakeTensor()
    p.convert(img.ravel().tolist(), 20, 16, 0, t)
    assert t.data.shape == (1, 3, 8, 10)
    assert np.allclose(t.data[0].transpose(1, 2, 0), img[::2, ::2])


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=40, deadline=None)
@given(h=st.integers(2, 90), w=st.integers(2, 700), oh=st.integers(1, 90), ow=st.integers(1, 700),
       angle=st.floats(-180, 180), scale=st.floats(0.3, 3.0), border=st.sampled_from([0, 1]),
       seed=st.integers(0, 99))
def test_three_channel_kernels_equal_reference(h, w, oh, ow, angle, scale, border, seed):
    """The 3-channel resize, warpAffine (several output tiles when wide) and BGR<->RGB kernels (8-byte
    pixel-pair loads, byte shuffles, edge and border pixels) return exactly what the op references return."""
    from mnnjit.backends.cpu.image import kernels as K
    from mnnjit.ops import registry
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (h, w, 3)).astype(np.uint8)
    attrs = {"size": (oh, ow), "interp": 1, "scale": (h / oh, w / ow)}
    assert np.array_equal(K.resize_linear(x, oh, ow, h / oh, w / ow), registry.get("resize_image").ref([x], attrs))
    M = tuple(cv2.invertAffineTransform(cv2.getRotationMatrix2D((w / 2, h / 2), angle, scale)).ravel())
    attrs = {"M": M, "size": (oh, ow), "interp": 1, "border": border, "value": (7, 200, 31)}
    got = K.warp_affine_linear_u8(x, M, oh, ow, border, (7, 200, 31))
    assert np.array_equal(got, registry.get("warp_affine").ref([x], attrs))
    assert np.array_equal(K.cvt_color(x, cv.COLOR_BGR2RGB), x[..., ::-1])


def test_pillow_arrow_view_matches_and_outlives_the_image():
    """The zero-copy Arrow view of a decoded RGB image holds R, G, B (+ padding) and keeps Pillow's storage
    alive after the image object is dropped; other modes give None (the caller copies)."""
    import gc
    from PIL import Image
    from mnnjit.cv._arrow import rgbx_view
    rgb = np.random.default_rng(3).integers(0, 256, (37, 53, 3)).astype(np.uint8)
    im = Image.fromarray(rgb)
    view = rgbx_view(im)
    if view is None:
        pytest.skip("this Pillow has no Arrow export")
    assert view.shape == (37, 53, 4) and not view.flags.writeable
    del im
    gc.collect()
    np.testing.assert_array_equal(view[..., :3], rgb)
    assert rgbx_view(Image.fromarray(rgb[..., 0])) is None
    k = cv.cvtColor(image_var(np.ascontiguousarray(view)), cv.COLOR_RGBA2BGR).read()
    np.testing.assert_array_equal(k, rgb[..., ::-1])
