"""NN ops without an MNN.expr function (or with ONNX-only attributes) against ONNX Runtime."""
from __future__ import annotations

import numpy as np
import pytest

from mnnjit.ops import registry
from mnnjit.ops.build import as_node, make_node, wrap

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

rng = np.random.default_rng(7)


def run_onnx(op, inputs, attrs=None, n_out=1, opset=17):
    """Run one ONNX node on numpy inputs (name '' for an omitted optional input)."""
    names, inits, vis = [], [], []
    feeds = {}
    for i, a in enumerate(inputs):
        if a is None:
            names.append("")
            continue
        nm = f"i{i}"
        names.append(nm)
        if a.dtype == np.int64:
            inits.append(numpy_helper.from_array(a, nm))
        else:
            vis.append(helper.make_tensor_value_info(nm, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape))
            feeds[nm] = a
    outs = [f"o{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    graph = helper.make_graph([node], "g", vis, [helper.make_empty_tensor_value_info(o)
                                                 for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    res = sess.run(None, feeds)
    return res if n_out > 1 else res[0]


def mine(op, inputs, attrs):
    node = make_node(op, [as_node(np.asarray(a)) for a in inputs], attrs)
    return wrap(node).read()


X = rng.standard_normal((2, 6, 5, 7)).astype(np.float32)


def test_layer_norm():
    g = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal((5, 7)).astype(np.float32)
    want = run_onnx("LayerNormalization", [X, g, b], {"axis": -2, "epsilon": 1e-5})
    np.testing.assert_allclose(mine("layer_norm", [X, g, b], {"axes": (2, 3), "eps": 1e-5}), want, atol=1e-4)


def test_group_norm_via_layer_norm():
    g = rng.standard_normal(6).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    got = mine("layer_norm", [X, g, b], {"axes": (2,), "eps": 1e-5, "group": 3})
    xr = X.reshape(2, 3, -1)
    ref = ((xr - xr.mean(-1, keepdims=True)) / np.sqrt(xr.var(-1, keepdims=True) + 1e-5)).reshape(X.shape)
    np.testing.assert_allclose(got, ref * g[None, :, None, None] + b[None, :, None, None], atol=1e-4)


def test_rms_norm():
    g = rng.standard_normal(7).astype(np.float32)
    got = mine("layer_norm", [X, g], {"axes": (3,), "eps": 1e-6, "rms": True})
    np.testing.assert_allclose(got, X / np.sqrt((X * X).mean(-1, keepdims=True) + 1e-6) * g, atol=1e-4)


def test_instance_and_batch_norm():
    g, b = rng.standard_normal(6).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    np.testing.assert_allclose(mine("instance_norm", [X, g, b], {"eps": 1e-5}),
                               run_onnx("InstanceNormalization", [X, g, b], {"epsilon": 1e-5}), atol=1e-4)
    mean, var = rng.standard_normal(6).astype(np.float32), rng.uniform(0.5, 2, 6).astype(np.float32)
    np.testing.assert_allclose(mine("batch_norm", [X, mean, var, g, b], {"eps": 1e-3}),
                               run_onnx("BatchNormalization", [X, g, b, mean, var], {"epsilon": 1e-3}), atol=1e-4)


@pytest.mark.parametrize("size", [1, 3, 5])
def test_lrn(size):
    want = run_onnx("LRN", [X], {"size": size, "alpha": 1e-2, "beta": 0.75, "bias": 2.0})
    np.testing.assert_allclose(mine("lrn", [X], {"size": size, "alpha": 1e-2, "beta": 0.75, "bias": 2.0}), want,
                               atol=1e-5)


@pytest.mark.parametrize("axis", [1, 3])
def test_softmax_and_log_softmax(axis):
    np.testing.assert_allclose(mine("softmax", [X], {"axis": axis}), run_onnx("Softmax", [X], {"axis": axis}),
                               atol=1e-6)
    np.testing.assert_allclose(mine("log_softmax", [X], {"axis": axis}),
                               run_onnx("LogSoftmax", [X], {"axis": axis}), atol=1e-5)


@pytest.mark.parametrize("op,onnx_op,attrs,onnx_attrs", [
    ("leaky_relu", "LeakyRelu", {"alpha": 0.1}, {"alpha": 0.1}),
    ("elu", "Elu", {"alpha": 0.7}, {"alpha": 0.7}),
    ("selu", "Selu", {"alpha": 1.6, "scale": 1.05}, {"alpha": 1.6, "gamma": 1.05}),
    ("hard_sigmoid", "HardSigmoid", {"alpha": 0.2, "beta": 0.5}, {"alpha": 0.2, "beta": 0.5}),
    ("hard_swish", "HardSwish", {}, {}),
    ("mish", "Mish", {}, {}),
])
def test_activations(op, onnx_op, attrs, onnx_attrs):
    x = (X * 3).astype(np.float32)
    np.testing.assert_allclose(mine(op, [x], attrs), run_onnx(onnx_op, [x], onnx_attrs, opset=18), atol=1e-5,
                               rtol=1e-5)
    # the scalar expression the code generators inline computes the same
    import math
    fn = eval("lambda a: " + registry.get(op).scalar, {"math": math, "np": np, **attrs})
    ref = np.array([fn(float(v)) for v in x.ravel()[:200]], np.float32)
    np.testing.assert_allclose(ref, mine(op, [x], attrs).ravel()[:200], atol=1e-5, rtol=1e-5)


def test_prelu():
    s = rng.standard_normal(6).astype(np.float32)
    np.testing.assert_allclose(mine("prelu", [X, s], {}), run_onnx("PRelu", [X, s.reshape(6, 1, 1)]), atol=1e-6)


def test_gather_scatter_elements_and_nd():
    idx = rng.integers(-5, 5, (2, 6, 5, 3)).astype(np.int64)
    np.testing.assert_allclose(mine("gather_elements", [X, idx.astype(np.int32)], {"axis": 2}),
                               run_onnx("GatherElements", [X, idx], {"axis": 2}))
    upd = rng.standard_normal(idx.shape).astype(np.float32)
    uniq = np.stack(np.meshgrid(*[np.arange(d) for d in idx.shape], indexing="ij"))[2].astype(np.int64) % 5
    for red in ["add", "mul"]:
        np.testing.assert_allclose(
            mine("scatter_elements", [X, idx.astype(np.int32), upd], {"axis": 2, "reduction": red}),
            run_onnx("ScatterElements", [X, idx, upd], {"axis": 2, "reduction": red}), atol=1e-5)
    np.testing.assert_allclose(mine("scatter_elements", [X, uniq.astype(np.int32), upd], {"axis": 2}),
                               run_onnx("ScatterElements", [X, uniq, upd], {"axis": 2}))
    ind = np.array([[[0, 1], [1, 5]], [[1, 0], [0, 2]]], np.int64)
    np.testing.assert_allclose(mine("gather_nd", [X, ind.astype(np.int32)], {"batch_dims": 0}),
                               run_onnx("GatherND", [X, ind]))
    ind1 = np.array([[1], [0]], np.int64)
    np.testing.assert_allclose(mine("gather_nd", [X, ind1.astype(np.int32)], {"batch_dims": 1}),
                               run_onnx("GatherND", [X, ind1], {"batch_dims": 1}))
    sind = np.array([[0, 1], [1, 3]], np.int64)
    supd = rng.standard_normal((2, 5, 7)).astype(np.float32)
    np.testing.assert_allclose(mine("scatter_nd", [sind.astype(np.int32), supd, X], {"reduction": "none"}),
                               run_onnx("ScatterND", [X, sind, supd]))


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_compositions(mode):
    import mnnjit.expr as F
    from mnnjit.ops import build as B
    x = rng.standard_normal((2, 8, 3, 4)).astype(np.float32)
    want = run_onnx("DepthToSpace", [x], {"blocksize": 2, "mode": mode})
    if mode == "DCR":
        got = F.depth_to_space(F.const(x, list(x.shape)), 2).read()
    else:
        y = B.transpose(B.reshape(x, (2, 2, 2, 2, 3, 4)), (0, 1, 4, 2, 5, 3))
        got = B.reshape(y, (2, 2, 6, 8)).read()
    np.testing.assert_allclose(got, want)
    np.testing.assert_allclose(F.space_to_depth(F.const(want, list(want.shape)), 2).read(),
                               run_onnx("SpaceToDepth", [want], {"blocksize": 2}))


@pytest.mark.parametrize("group,stride,pads,op,dil", [
    (1, (2, 2), (1, 0, 1, 0), (1, 1), (1, 1)), (2, (2, 1), (0, 1, 1, 0), (1, 0), (1, 2)), (6, (1, 1), (0, 0, 0, 0), (0, 0), (2, 2))])
def test_conv_transpose_vs_onnx(group, stride, pads, op, dil):
    w = rng.standard_normal((6, 4 // (2 if group == 2 else 1) if group != 6 else 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(w.shape[1] * group).astype(np.float32)
    t, bo, l, r = pads
    want = run_onnx("ConvTranspose", [X, w, b], {"group": group, "strides": list(stride), "pads": [t, l, bo, r],
                                                  "output_padding": list(op), "dilations": list(dil)})
    got = mine("conv2d_transpose", [X, w, b], {"stride": stride, "dilation": dil, "pads": pads, "group": group,
                                                "output_padding": op, "act": ""})
    np.testing.assert_allclose(got, want, atol=1e-4)


@pytest.mark.parametrize("group,k,stride,pads,dil", [(2, 3, (2, 1), (1, 0, 2, 1), (1, 1)), (3, 1, (1, 1), (0, 0, 0, 0), (1, 1)),
                                                    (6, 3, (1, 2), (1, 1, 1, 1), (2, 1)), (1, 2, (1, 1), (0, 1, 0, 1), (1, 2))])
def test_grouped_conv_vs_onnx(group, k, stride, pads, dil):
    w = rng.standard_normal((12, 6 // group, k, k)).astype(np.float32)
    b = rng.standard_normal(12).astype(np.float32)
    t, bo, l, r = pads
    want = run_onnx("Conv", [X, w, b], {"group": group, "strides": list(stride), "pads": [t, l, bo, r],
                                        "dilations": list(dil)})
    got = mine("conv2d", [X, w, b], {"stride": stride, "dilation": dil, "pads": pads, "group": group, "act": "relu6"})
    np.testing.assert_allclose(got, np.clip(want, 0, 6), atol=1e-4)


@pytest.mark.parametrize("ceil,include,pads", [(0, 0, (1, 1, 1, 1)), (1, 1, (0, 1, 1, 0)), (1, 0, (1, 0, 0, 1))])
def test_pool_vs_onnx(ceil, include, pads):
    from mnnjit.ops.nn_pool import pool2d
    t, bo, l, r = pads
    for kind, onnx_op in [("max", "MaxPool"), ("avg", "AveragePool")]:
        attrs = {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [t, l, bo, r], "ceil_mode": ceil}
        if kind == "avg":
            attrs["count_include_pad"] = include
        want = run_onnx(onnx_op, [X], attrs)
        got = pool2d(wrap(as_node(X)), kind, (3, 2), (2, 2), pads, ceil_mode=bool(ceil),
                     count_include_pad=bool(include)).read()
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_roi_align_vs_onnx():
    rois = np.array([[0.5, 1.0, 4.0, 4.5], [1.0, 0.0, 6.5, 3.0]], np.float32)
    bi = np.array([0, 1], np.int64)
    for mode, ctm in [("avg", "half_pixel"), ("avg", "output_half_pixel")]:
        want = run_onnx("RoiAlign", [X, rois, bi], {"mode": mode, "output_height": 2, "output_width": 3,
                                                    "sampling_ratio": 2, "spatial_scale": 0.5,
                                                    "coordinate_transformation_mode": ctm}, opset=16)
        r5 = np.concatenate([bi[:, None].astype(np.float32), rois], axis=1)
        got = mine("roi_align", [X, r5], {"pooled": (2, 3), "spatial_scale": 0.5, "sampling_ratio": 2,
                                          "aligned": ctm == "half_pixel", "pool": mode})
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_matmul_ex_bias_act():
    a = rng.standard_normal((3, 4, 5)).astype(np.float32)
    b = rng.standard_normal((3, 6, 5)).astype(np.float32)
    bias = rng.standard_normal(6).astype(np.float32)
    got = mine("matmul_ex", [a, b, bias], {"transpose_b": True, "act": "relu"})
    np.testing.assert_allclose(got, np.maximum(a @ b.transpose(0, 2, 1) + bias, 0), atol=1e-5)


def test_one_hot_and_nms_vs_onnx():
    idx = np.array([[0, 3], [2, -1]], np.int64)
    want = run_onnx("OneHot", [idx, np.array(4, np.int64), np.array([0.5, 2.0], np.float32)], {"axis": 1})
    got = mine("one_hot", [idx.astype(np.int32)], {"depth": 4, "on": 2.0, "off": 0.5, "axis": 1})
    # ONNX counts negative indices from the end; MNN/TF give all-off values for them
    np.testing.assert_allclose(got[0], want[0])
    np.testing.assert_allclose(got[1, :, 0], want[1, :, 0])
    np.testing.assert_allclose(got[1, :, 1], [0.5] * 4)
    boxes = rng.uniform(0, 10, (1, 20, 4)).astype(np.float32)
    boxes[..., 2:] += boxes[..., :2]
    scores = rng.uniform(0, 1, (1, 1, 20)).astype(np.float32)
    sel = run_onnx("NonMaxSuppression", [boxes, scores, np.array([7], np.int64), np.array([0.4], np.float32),
                                         np.array([0.2], np.float32)], {}, opset=11)
    got = mine("nms", [boxes[0], scores[0, 0]], {"max_out": 7, "iou_threshold": 0.4, "score_threshold": 0.2})
    np.testing.assert_array_equal(got[got >= 0], sel[:, 2])


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_vs_onnx(mode, pad, align):
    grid = rng.uniform(-1.3, 1.3, (2, 4, 3, 2)).astype(np.float32)
    want = run_onnx("GridSample", [X, grid], {"mode": mode, "padding_mode": pad, "align_corners": align}, opset=16)
    got = mine("grid_sample", [X, grid], {"mode": mode, "padding": pad, "align_corners": bool(align)})
    np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("group,k,stride,pads,dil", [(1, (3, 3, 3), (1, 1, 1), (1, 1, 1, 1, 1, 1), (1, 1, 1)),
                                                    (2, (2, 3, 1), (2, 1, 2), (0, 1, 1, 0, 0, 0), (1, 2, 1))])
def test_conv3d_vs_onnx(group, k, stride, pads, dil):
    x = rng.standard_normal((2, 4, 5, 6, 7)).astype(np.float32)
    w = rng.standard_normal((6, 4 // group) + k).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    f, bk, t, bo, l, r = pads
    want = run_onnx("Conv", [x, w, b], {"group": group, "strides": list(stride), "pads": [f, t, l, bk, bo, r],
                                        "dilations": list(dil)})
    got = mine("conv3d", [x, w, b], {"stride": stride, "dilation": dil, "pads": pads, "group": group, "act": ""})
    np.testing.assert_allclose(got, want, atol=1e-4)


@pytest.mark.parametrize("ceil,include", [(0, 0), (1, 1), (0, 1)])
def test_pool3d_vs_onnx(ceil, include):
    from mnnjit.ops.nn_pool import pool_out_size
    x = rng.standard_normal((1, 3, 5, 6, 7)).astype(np.float32)
    k, s, pads = (2, 3, 2), (2, 2, 1), (1, 0, 1, 1, 0, 1)
    out = tuple(pool_out_size(x.shape[2 + i], pads[2 * i], pads[2 * i + 1], k[i], s[i], bool(ceil)) for i in range(3))
    f, bk, t, bo, l, r = pads
    for kind, onnx_op in [("max", "MaxPool"), ("avg", "AveragePool")]:
        attrs = {"kernel_shape": list(k), "strides": list(s), "pads": [f, t, l, bk, bo, r], "ceil_mode": ceil}
        if kind == "avg":
            attrs["count_include_pad"] = include
        want = run_onnx(onnx_op, [x], attrs)
        got = mine("pool3d", [x], {"kind": kind, "kernel": k, "stride": s, "pads": pads, "out": out,
                                   "count_include_pad": bool(include)})
        np.testing.assert_allclose(got, want, atol=1e-5)
