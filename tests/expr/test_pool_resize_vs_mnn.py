"""Pooling, resize and crop_and_resize against real MNN; the resize op's coordinate modes against
OpenCV / ONNX Runtime formulas."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import mnnjit.expr as JF
from conftest import both, c4
from mnnjit.ops.nn_pool import pool2d_ref
from mnnjit.ops.nn_resize import resize_ref


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["max_pool", "avg_pool"]), k=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       s=st.tuples(st.integers(1, 3), st.integers(1, 3)), pads=st.tuples(st.integers(0, 1), st.integers(0, 1)),
       mode=st.sampled_from(["VALID", "SAME", "CAFFE"]), hw=st.tuples(st.integers(3, 8), st.integers(3, 8)),
       fmt=st.sampled_from(["NCHW", "NC4HW4"]), seed=st.integers(0, 2**16))
def test_pool_vs_mnn(MF, kind, k, s, pads, mode, hw, fmt, seed):
    if mode != "CAFFE":
        pads = (0, 0)
    assume(all(p < kk for p, kk in zip(pads, k)))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3) + hw).astype(np.float32)

    def run(F):
        v = F.const(x, list(x.shape)) if fmt == "NCHW" else c4(F, x)
        return getattr(F, kind)(v, list(k), list(s), getattr(F, mode), list(pads))
    both(MF, run)


def test_pool_nhwc_vs_mnn(MF):
    x = np.random.default_rng(1).standard_normal((1, 5, 6, 3)).astype(np.float32)
    both(MF, lambda F: F.max_pool(F.const(x, [1, 5, 6, 3], F.NHWC), [2, 2], [2, 2], F.SAME))


def test_pool_tf_mode_rejects_pads():
    x = JF.const(np.zeros((1, 1, 4, 4), np.float32), [1, 1, 4, 4])
    with pytest.raises(ValueError, match="explicit pads"):
        JF.max_pool(x, [2, 2], [1, 1], JF.VALID, [1, 1])


def _torch_like_pool(x, kind, k, s, pads, ceil, include):
    """Loop reference with PyTorch/ONNX semantics."""
    n, c, h, w = x.shape
    t, b, l, r = pads

    def osz(size, pb, pe, kk, ss):
        span = size + pb + pe - kk
        o = (-(-span // ss) if ceil else span // ss) + 1
        if ceil and (o - 1) * ss >= size + pb:
            o -= 1
        return o
    oh, ow = osz(h, t, b, k[0], s[0]), osz(w, l, r, k[1], s[1])
    out = np.zeros((n, c, oh, ow), np.float32)
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * s[0] - t, j * s[1] - l
            h1, w1 = min(h0 + k[0], h + b), min(w0 + k[1], w + r)
            win = x[:, :, max(h0, 0):min(h1, h), max(w0, 0):min(w1, w)]
            if kind == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                cnt = (h1 - h0) * (w1 - w0) if include else win.shape[2] * win.shape[3]
                out[:, :, i, j] = win.sum(axis=(2, 3)) / cnt
    return out


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["max", "avg"]), k=st.tuples(st.integers(1, 4), st.integers(1, 4)),
       s=st.tuples(st.integers(1, 3), st.integers(1, 3)), pads=st.tuples(*[st.integers(0, 2)] * 4),
       ceil=st.booleans(), include=st.booleans(), hw=st.tuples(st.integers(4, 9), st.integers(4, 9)),
       seed=st.integers(0, 2**16))
def test_pool_op_onnx_semantics(kind, k, s, pads, ceil, include, hw, seed):
    assume(pads[0] < k[0] and pads[1] < k[0] and pads[2] < k[1] and pads[3] < k[1])
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, 2) + hw).astype(np.float32)
    from mnnjit.ops.nn_pool import pool2d
    got = pool2d(JF.const(x, list(x.shape)), kind, k, s, pads, ceil_mode=ceil, count_include_pad=include).read()
    np.testing.assert_allclose(got, _torch_like_pool(x, kind, k, s, pads, ceil, include), atol=1e-5)


def test_global_pool():
    x = np.random.default_rng(2).standard_normal((2, 3, 5, 4)).astype(np.float32)
    from mnnjit.ops.nn_pool import pool2d
    np.testing.assert_allclose(pool2d(JF.const(x, list(x.shape)), "avg", (1, 1), global_pool=True).read(),
                               x.mean(axis=(2, 3), keepdims=True), atol=1e-6)
    np.testing.assert_allclose(pool2d_ref([x], {"kind": "max", "kernel": (5, 4), "stride": (1, 1),
                                                "pads": (0, 0, 0, 0), "out": (1, 1)}),
                               x.max(axis=(2, 3), keepdims=True))


@settings(max_examples=30, deadline=None)
@given(xs=st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0]), ys=st.sampled_from([0.5, 1.0, 2.0, 2.5]),
       hw=st.tuples(st.integers(2, 7), st.integers(2, 7)), seed=st.integers(0, 2**16))
def test_resize_vs_mnn(MF, xs, ys, hw, seed):
    assume(int(hw[0] * ys) > 0 and int(hw[1] * xs) > 0)
    x = np.random.default_rng(seed).standard_normal((1, 3) + hw).astype(np.float32)
    both(MF, lambda F: F.resize(c4(F, x), xs, ys))


def test_resize_requires_nc4hw4():
    with pytest.raises(RuntimeError, match="NC4HW4"):
        JF.resize(JF.const(np.zeros((1, 1, 2, 2), np.float32), [1, 1, 2, 2]), 2.0, 2.0)


@settings(max_examples=20, deadline=None)
@given(k=st.integers(1, 4), crop=st.tuples(st.integers(1, 4), st.integers(1, 4)), nearest=st.booleans(),
       seed=st.integers(0, 2**16))
def test_crop_and_resize_vs_mnn(MF, k, crop, nearest, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 6, 7, 3)).astype(np.float32)
    boxes = rng.uniform(-0.2, 1.2, (k, 4)).astype(np.float32)
    ind = rng.integers(0, 2, k).astype(np.int32)
    both(MF, lambda F: F.crop_and_resize(F.const(x, [2, 6, 7, 3], F.NHWC), F.const(boxes, [k, 4]),
                                         F.const(ind, [k], F.NCHW, F.int),
                                         F.const(np.array(crop, np.int32), [2], F.NCHW, F.int),
                                         F.NEAREST if nearest else F.BILINEAR, 0.25))


def test_resize_op_matches_cv2_bilinear_half_pixel():
    cv2 = pytest.importorskip("cv2")
    x = np.random.default_rng(0).standard_normal((1, 1, 7, 9)).astype(np.float32)
    for oh, ow in [(14, 18), (5, 4), (10, 13)]:
        got = resize_ref([x], {"size": (oh, ow), "method": "bilinear", "coord": "half_pixel"})
        want = cv2.resize(x[0, 0], (ow, oh), interpolation=cv2.INTER_LINEAR)
        np.testing.assert_allclose(got[0, 0], want, atol=1e-4)


@pytest.mark.parametrize("mode,coord,nearest_mode", [
    ("linear", "align_corners", None), ("linear", "asymmetric", None), ("linear", "pytorch_half_pixel", None),
    ("cubic", "half_pixel", None), ("cubic", "align_corners", None), ("nearest", "asymmetric", "floor"),
    ("nearest", "half_pixel", "round_prefer_ceil"), ("nearest", "asymmetric", "ceil")])
def test_resize_op_vs_onnxruntime(mode, coord, nearest_mode):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    x = np.random.default_rng(1).standard_normal((1, 2, 5, 6)).astype(np.float32)
    out_size = np.array([1, 2, 9, 4], np.int64)
    attrs = {"mode": mode, "coordinate_transformation_mode": coord}
    if nearest_mode:
        attrs["nearest_mode"] = nearest_mode
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [helper.make_tensor("sizes", TensorProto.INT64, [4], out_size)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    method = {"linear": "bilinear", "cubic": "cubic"}.get(mode) or {
        "floor": "nearest_floor", "round_prefer_ceil": "nearest_round", "ceil": "nearest_ceil"}[nearest_mode]
    got = resize_ref([x], {"size": (9, 4), "method": method, "coord": coord, "cubic_a": -0.75})
    np.testing.assert_allclose(got, want, atol=1e-4)
