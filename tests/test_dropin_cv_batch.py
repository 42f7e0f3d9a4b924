"""Batch-of-one images ([1, h, w, c], as pymnn code builds them with ``expr.const(data, [1, h, w, c],
expr.NHWC)``) in every mnnjit.cv image function, against real MNN 3.6.1 (shapes and values) and OpenCV.

Where real MNN runs, mnnjit returns its shape; where real MNN crashes, raises or reduces the wrong axes
(listed in docs/COMPATIBILITY.md, "Batch-of-one images"), a [1, h, w, c] image is its [h, w, c] image
and the answer is OpenCV's.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import mnnjit.cv as jcv
import mnnjit.expr as JF

MNN = pytest.importorskip("MNN")
import MNN.cv as mcv  # noqa: E402
import MNN.expr as MF  # noqa: E402
import MNN.numpy as mnp  # noqa: E402
import mnnjit.numpy as jnp  # noqa: E402

cv2 = pytest.importorskip("cv2")

H, W = 12, 16


def _kernels(cv, F, np_):
    return {
        "blur": lambda x: cv.blur(x, (3, 3)),
        "boxFilter": lambda x: cv.boxFilter(x, -1, (3, 3)),
        "sqrBoxFilter": lambda x: cv.sqrBoxFilter(x, -1, (3, 3)),
        "GaussianBlur": lambda x: cv.GaussianBlur(x, (3, 3), 1.0),
        "Sobel": lambda x: cv.Sobel(x, -1, 1, 0),
        "Scharr": lambda x: cv.Scharr(x, -1, 0, 1),
        "Laplacian": lambda x: cv.Laplacian(x, -1),
        "filter2D": lambda x: cv.filter2D(x, -1, F.const(np.full((3, 3), 1 / 9, np.float32), [3, 3])),
        "sepFilter2D": lambda x: cv.sepFilter2D(x, -1, np_.array([[0., 1., 0.]]), np_.array([[0.5, 0., 0.5]]), 1),
        "erode": lambda x: cv.erode(x, cv.getStructuringElement(0, (3, 3))),
        "dilate": lambda x: cv.dilate(x, cv.getStructuringElement(0, (3, 3))),
        "pyrDown": lambda x: cv.pyrDown(x),
        "pyrUp": lambda x: cv.pyrUp(x),
        "threshold": lambda x: cv.threshold(x, 100, 255, cv.THRESH_BINARY),
        "cvtColor": lambda x: cv.cvtColor(x, cv.COLOR_BGR2RGB if x.shape[-1] == 3 else cv.COLOR_GRAY2BGR),
        "resize": lambda x: cv.resize(x, (8, 6)),
        "warpAffine": lambda x: cv.warpAffine(x, cv.getRotationMatrix2D((8., 6.), 10., 1.), [W, H]),
        "remap": lambda x: cv.remap(x, F.const(np.tile(np.arange(W, dtype=np.float32)[::-1], (H, 1)), [H, W]),
                                    F.const(np.tile(np.arange(H, dtype=np.float32)[:, None], (1, W)), [H, W]),
                                    cv.INTER_NEAREST),
        "getRectSubPix": lambda x: cv.getRectSubPix(x, (4, 4), (5.0, 5.0)),
        "copyTo": lambda x: cv.copyTo(x),
        "bitwise_and": lambda x: cv.bitwise_and(x, x),
        "addWeighted": lambda x: cv.addWeighted(x, 0.5, x, 0.25, 3),
        "normalize": lambda x: cv.normalize(x, None, 0, 1, cv.NORM_MINMAX),
        "calcHist": lambda x: cv.calcHist([x], [0], None, [8], [0., 256.]),
    }


MNN_K = _kernels(mcv, MF, mnp)
JIT_K = _kernels(jcv, JF, jnp)
_MAPX = np.tile(np.arange(W, dtype=np.float32)[::-1], (H, 1))
_MAPY = np.tile(np.arange(H, dtype=np.float32)[:, None], (1, W))
# Real MNN's own numerics differ from OpenCV's in these (mnnjit follows OpenCV, docs/COMPATIBILITY.md; real
# MNN's calcHist of uint8 and its remap of a [1, h, w, c] image are garbage): OpenCV on the [h, w, c] image
# is the value oracle, real MNN the shape oracle.
CV2_VALUES = {
    "cvtColor": lambda d: cv2.cvtColor(d, cv2.COLOR_BGR2RGB if d.shape[-1] == 3 else cv2.COLOR_GRAY2BGR),
    "resize": lambda d: cv2.resize(d, (8, 6)),
    "warpAffine": lambda d: cv2.warpAffine(d, cv2.getRotationMatrix2D((8., 6.), 10., 1.), (W, H)),
    "remap": lambda d: cv2.remap(d, _MAPX, _MAPY, cv2.INTER_NEAREST),
    "getRectSubPix": lambda d: cv2.getRectSubPix(d, (4, 4), (5.0, 5.0)),
    "pyrUp": lambda d: cv2.pyrUp(d),
    "calcHist": lambda d: cv2.calcHist([d], [0], None, [8], [0., 256.]),
}


def _image(dtype: str, c: int, seed: int) -> np.ndarray:
    data = np.random.default_rng(seed).random((1, H, W, c)) * 255
    return data.astype(dtype)


def _mnn_var(data: np.ndarray):
    return MF.const(data, list(data.shape), MF.NHWC, MF.uint8 if data.dtype == np.uint8 else MF.float)


def _jit_var(data: np.ndarray):
    return JF.const(data, list(data.shape), JF.NHWC, JF.uint8 if data.dtype == np.uint8 else JF.float)


def _close(a: np.ndarray, b: np.ndarray, dtype: str) -> bool:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    # uint8: real MNN and OpenCV round some filter results differently by one
    tol = 1.0 if dtype == "uint8" else 1e-4 * max(1.0, float(np.abs(b).max()))
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= tol))


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
@pytest.mark.parametrize("c", [1, 3])
@pytest.mark.parametrize("name", sorted(JIT_K))
def test_batch_of_one_matches_real_mnn(name, c, dtype):
    if name == "bitwise_and" and dtype == "float32":
        pytest.skip("bitwise ops on float images: real MNN converts to int, OpenCV uses the bits")
    data = _image(dtype, c, zlib.crc32(f"{name}{c}{dtype}".encode()))
    want = MNN_K[name](_mnn_var(data))
    got = JIT_K[name](_jit_var(data))
    assert got.shape == want.shape, name
    if name in CV2_VALUES:
        assert _close(got.read(), CV2_VALUES[name](data[0]), dtype), name
    else:
        assert _close(got.read(), want.read(), dtype), name
    # and a batch of one is exactly its [h, w, c] image
    same = JIT_K[name](_jit_var(data[0]))
    assert np.array_equal(np.asarray(got.read()).ravel(), np.asarray(same.read()).ravel())


@pytest.mark.parametrize("name", ["blur", "GaussianBlur", "erode", "pyrDown", "Sobel", "bilateralFilter"])
@pytest.mark.parametrize("shape", [[H, W], [H, W, 1]])
def test_single_channel_filters_give_planes(name, shape):
    """Real MNN's (and OpenCV's) filters return [h, w] for one channel; bilateralFilter keeps its input's rank."""
    data = np.random.default_rng(1).integers(0, 256, shape).astype(np.uint8)
    if name == "bilateralFilter":
        got = jcv.bilateralFilter(_jit_var(data), 5, 10., 10.)
        want = mcv.bilateralFilter(_mnn_var(data), 5, 10., 10.)
    else:
        got = JIT_K[name](_jit_var(data))
        want = MNN_K[name](_mnn_var(data))
    assert got.shape == want.shape


def test_adaptive_threshold_keeps_the_batch():
    """Shape as real MNN; values as OpenCV (real MNN's local means round differently)."""
    data = _image("uint8", 1, 5)
    got = jcv.adaptiveThreshold(_jit_var(data), 255, 0, 0, 3, 2)
    want = mcv.adaptiveThreshold(_mnn_var(data), 255, 0, 0, 3, 2)
    assert got.shape == want.shape == [1, H, W, 1]
    assert np.array_equal(np.asarray(got.read())[0, ..., 0],
                          cv2.adaptiveThreshold(data[0, ..., 0], 255, 0, 0, 3, 2))


def test_spatial_gradient_of_a_batch_of_one():
    data = _image("uint8", 1, 6)
    gx, gy = jcv.spatialGradient(_jit_var(data))
    mx, my = mcv.spatialGradient(_mnn_var(data))
    assert gx.shape == mx.shape == [H, W] and gy.shape == my.shape
    rx, ry = cv2.spatialGradient(data[0, ..., 0])
    assert np.array_equal(np.asarray(gx.read()), rx) and np.array_equal(np.asarray(gy.read()), ry)


def test_findcontours_and_components_of_a_batch_of_one():
    data = ((np.random.default_rng(9).random((1, H, W, 1)) > 0.5) * 255).astype(np.uint8)
    contours, _ = jcv.findContours(_jit_var(data), jcv.RETR_EXTERNAL, jcv.CHAIN_APPROX_SIMPLE)
    want, _ = cv2.findContours(data[0, ..., 0], cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    assert [np.asarray(c.read()).tolist() for c in contours] == [w.tolist() for w in want]
    n, labels, stats, cents = jcv.connectedComponentsWithStats(_jit_var(data))
    mn, mlabels, mstats, _ = mcv.connectedComponentsWithStats(_mnn_var(data))
    assert labels.shape == mlabels.shape == [1, H, W, 1] and n == mn
    assert np.array_equal(np.asarray(stats.read()), np.asarray(mstats.read()))


def test_imencode_of_a_batch_of_one():
    data = _image("uint8", 3, 7)
    ok, buf = jcv.imencode(".png", _jit_var(data))
    assert ok and np.array_equal(cv2.imdecode(np.array(buf, np.uint8), cv2.IMREAD_UNCHANGED), data[0])


# Real MNN fails on these (crash, exception or an invalid Var), so OpenCV on the [h, w, c] image is the oracle.
CV2_ONLY = {
    "flip": (lambda cv, x: cv.flip(x, 1), lambda d: cv2.flip(d, 1)),
    "rotate": (lambda cv, x: cv.rotate(x, 0), lambda d: cv2.rotate(d, 0)),
    "bilateralFilter": (lambda cv, x: cv.bilateralFilter(x, 5, 20., 20.), lambda d: cv2.bilateralFilter(d, 5, 20., 20.)),
    "warpPerspective": (lambda cv, x: cv.warpPerspective(x, [1., 0., 1., 0., 1., 2., 0., 0., 1.], [W, H]),
                        lambda d: cv2.warpPerspective(d, np.array([[1., 0, 1], [0, 1, 2], [0, 0, 1]]), (W, H))),
}


@pytest.mark.parametrize("name", sorted(CV2_ONLY))
def test_batch_of_one_where_real_mnn_fails(name):
    data = _image("uint8", 3, 11)
    ours, ref = CV2_ONLY[name]
    got = np.asarray(ours(jcv, _jit_var(data)).read())
    assert got.shape == ref(data[0]).shape
    assert np.abs(got.astype(int) - ref(data[0]).astype(int)).max() <= 1


def test_blend_linear_keeps_the_batch():
    a, b = _image("uint8", 3, 12), _image("uint8", 3, 13)
    w1 = np.random.default_rng(0).random((H, W)).astype(np.float32)
    w2 = 1 - w1
    got = jcv.blendLinear(_jit_var(a), _jit_var(b), JF.const(w1, [H, W]), JF.const(w2, [H, W]))
    assert got.shape == [1, H, W, 3]
    assert np.abs(np.asarray(got.read())[0].astype(int) - cv2.blendLinear(a[0], b[0], w1, w2).astype(int)).max() <= 1


def test_deliberate_differences_mean_concat_split_merge():
    """Real MNN reduces or joins the wrong axes of a [1, h, w, c] image in these (COMPATIBILITY.md);
    mnnjit gives OpenCV's answer for the image."""
    data = _image("float32", 3, 14)
    mx, jx = _mnn_var(data), _jit_var(data)
    d = data[0]
    assert mcv.mean(mx).shape == [W, 3]  # real MNN: per-column means
    assert np.allclose(np.asarray(jcv.mean(jx).read()), cv2.mean(d), rtol=1e-5)
    assert mcv.hconcat([mx, mx]).shape == [1, 2 * H, W, 3]  # real MNN joins the rows
    assert np.array_equal(np.asarray(jcv.hconcat([jx, jx]).read()), cv2.hconcat([d, d]))
    assert mcv.vconcat([mx, mx]).shape == [2, H, W, 3]
    assert np.array_equal(np.asarray(jcv.vconcat([jx, jx]).read()), cv2.vconcat([d, d]))
    assert [p.shape for p in mcv.split(mx)] == [[1, H, W, 3]]  # real MNN: not split
    parts = jcv.split(jx)
    assert [np.asarray(p.read()).tolist() for p in parts] == [p.tolist() for p in cv2.split(d)]
    assert mcv.merge([mx, mx]).shape == [1, H, W, 3, 2]
    assert np.array_equal(np.asarray(jcv.merge([jx, jx]).read()), cv2.merge([d, d]))


def test_a_larger_batch_is_refused_clearly():
    x = JF.const(np.zeros((2, H, W, 3), np.float32), [2, H, W, 3], JF.NHWC)
    with pytest.raises(ValueError, match=r"\[1, h, w, c\]"):
        jcv.blur(x, (3, 3))


def test_masks_on_a_batch_of_one():
    """Real MNN refuses a [h, w] mask for a [1, h, w, c] image ("mask [height, width] must equal to src
    [height, width]"); mnnjit masks the image as OpenCV does and keeps the batch."""
    data, mask = _image("uint8", 3, 15), (np.random.default_rng(3).random((H, W)) > 0.5).astype(np.uint8)
    with pytest.raises(ValueError, match="mask"):
        mcv.copyTo(_mnn_var(data), MF.const(mask, [H, W], MF.NHWC, MF.uint8))
    jm = JF.const(mask, [H, W], JF.NHWC, JF.uint8)
    got = jcv.copyTo(_jit_var(data), jm)
    assert got.shape == [1, H, W, 3] and np.array_equal(np.asarray(got.read())[0], cv2.copyTo(data[0], mask))
    got = jcv.bitwise_xor(_jit_var(data), _jit_var(data[..., ::-1].copy()), None, jm)
    assert np.array_equal(np.asarray(got.read())[0], cv2.bitwise_xor(data[0], data[0, ..., ::-1].copy(), mask=mask))
