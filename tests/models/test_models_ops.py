"""One small ONNX model per op family, converted by real MNN's converter, run by mnnjit and real MNN."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mnnjit as MNN
from mnnjit_models_fixtures import _Builder, convert, real_mnn_forward

pytest.importorskip("onnx")
pytest.importorskip("MNN")


def f32(b, v):
    return b.init(np.asarray(v, np.float32), "f")


def i64(b, v):
    return b.init(np.asarray(v, np.int64), "i")


S = [1, 4, 6, 6]
CASES = {
    "convtranspose": (S, lambda b: b.op("ConvTranspose", ["x", b.weight((4, 3, 3, 3)), f32(b, np.ones(3))], strides=[2, 2],
                                       pads=[1, 1, 1, 1], output_padding=[1, 1]), [1, 3, 12, 12]),
    "convtranspose_dw": (S, lambda b: b.op("ConvTranspose", ["x", b.weight((4, 1, 3, 3))], group=4), [1, 4, 8, 8]),
    "int_div_truncates": (S, lambda b: b.op("Cast", [b.op("Div", [b.op("Cast", [b.op("Mul", ["x", f32(b, 4)])], to=6),
                                                             b.init(np.array([3, -3, 2, 5], np.int32).reshape(4, 1, 1), "d")])],
                                            to=1), S),
    "int_mod_divisor_sign": (S, lambda b: b.op("Cast", [b.op("Mod", [b.op("Cast", [b.op("Mul", ["x", f32(b, 4)])], to=6),
                                                                 b.init(np.array([3, -3, 2, 5], np.int32).reshape(4, 1, 1),
                                                                        "d")])], to=1), S),
    "gather_nd_batch_dims": ([2, 3, 4], lambda b: b.op("GatherND", ["x", i64(b, [[[1], [0]], [[2], [1]]])], batch_dims=1),
                             [2, 2, 4]),
    "gather_nd_batch_dims_2": ([2, 3, 4, 5], lambda b: b.op("GatherND", ["x", i64(b, np.array([[[3], [0]], [[1], [2]], [[0], [0]]] * 2)
                                                                          .reshape(2, 3, 2, 1))], batch_dims=2), [2, 3, 2, 5]),
    "max_roi_pool": (S, lambda b: b.op("MaxRoiPool", ["x", f32(b, [[0, 0, 0, 4, 4], [0, 1, 2, 5, 5], [0, 0.6, 1.4, 3.5, 2.2]])],
                                       pooled_shape=[2, 2], spatial_scale=0.8), [3, 4, 2, 2]),
    "split_sizes": (S, lambda b: b.op("Split", ["x", i64(b, [1, 3])], n_out=2, axis=1)[1], [1, 3, 6, 6]),
    "split_sizes_first": ([2, 7], lambda b: b.op("Split", ["x", i64(b, [5, 2])], n_out=2, axis=-1)[0], [2, 5]),
    "resize_align_corners": (S, lambda b: b.op("Resize", ["x", "", "", i64(b, [1, 4, 9, 11])], mode="linear",
                                               coordinate_transformation_mode="align_corners"), [1, 4, 9, 11]),
    "prelu": (S, lambda b: b.op("PRelu", ["x", f32(b, np.full((4, 1, 1), 0.2))]), S),
    "leakyrelu": (S, lambda b: b.op("LeakyRelu", ["x"], alpha=0.1), S),
    "hardswish": (S, lambda b: b.op("HardSwish", ["x"]), S),
    "hardsigmoid": (S, lambda b: b.op("HardSigmoid", ["x"]), S),
    "elu": (S, lambda b: b.op("Elu", ["x"], alpha=0.7), S),
    "selu": (S, lambda b: b.op("Selu", ["x"]), S),
    "softplus": (S, lambda b: b.op("Softplus", ["x"]), S),
    "instance_norm": (S, lambda b: b.op("InstanceNormalization", ["x", f32(b, np.ones(4) * 1.5), f32(b, np.ones(4) * 0.1)]), S),
    "batch_norm": (S, lambda b: b.op("BatchNormalization", ["x", f32(b, [1, 2, 3, 4]), f32(b, [0, .1, .2, .3]),
                                                          f32(b, [0, 1, 2, 3]), f32(b, [1, 2, 3, 4])]), S),
    "depth_to_space_dcr": (S, lambda b: b.op("DepthToSpace", ["x"], blocksize=2), [1, 1, 12, 12]),
    "depth_to_space_crd": (S, lambda b: b.op("DepthToSpace", ["x"], blocksize=2, mode="CRD"), [1, 1, 12, 12]),
    "space_to_depth": (S, lambda b: b.op("SpaceToDepth", ["x"], blocksize=2), [1, 16, 3, 3]),
    "argmax": (S, lambda b: b.op("ArgMax", ["x"], axis=1, keepdims=0), [1, 6, 6]),
    "topk": ([2, 10], lambda b: b.op("TopK", ["x", i64(b, [3])], n_out=2, axis=-1)[0], [2, 3]),
    "cumsum_reverse": ([2, 10], lambda b: b.op("CumSum", ["x", b.init(np.array(1, np.int32), "ax")], reverse=1), [2, 10]),
    "reduce_l2": (S, lambda b: b.op("ReduceL2", ["x"], axes=[2, 3], keepdims=1), [1, 4, 1, 1]),
    "log_softmax": ([2, 10], lambda b: b.op("LogSoftmax", ["x"], axis=-1), [2, 10]),
    "gemm": ([3, 10], lambda b: b.op("Gemm", ["x", b.weight((10, 5)), f32(b, np.ones(5))]), [3, 5]),
    "matmul_3d": ([2, 3, 10], lambda b: b.op("MatMul", ["x", b.weight((10, 5))]), [2, 3, 5]),
    "batch_matmul": ([2, 3, 4], lambda b: b.op("MatMul", ["x", b.op("Transpose", ["x"], perm=[0, 2, 1])]), [2, 3, 3]),
    "gather_nd": ([3, 4], lambda b: b.op("GatherND", ["x", i64(b, [[0, 1], [2, 3]])]), [2]),
    "scatter_nd": ([3, 4], lambda b: b.op("ScatterND", ["x", i64(b, [[0, 1], [2, 3]]), f32(b, [5, 6])]), [3, 4]),
    "constant_of_shape": ([2, 3], lambda b: b.op("Add", ["x", b.op("ConstantOfShape", [b.op("Shape", ["x"])], value=__import__(
        "onnx").helper.make_tensor("v", 1, [1], [2.0]))]), [2, 3]),
    "range": ([5], lambda b: b.op("Add", ["x", b.op("Cast", [b.op("Range", [i64(b, 0), b.op("Squeeze", [b.op("Shape", ["x"])]),
                                                                              i64(b, 1)])], to=1)]), [5]),
    "global_max_pool": (S, lambda b: b.op("GlobalMaxPool", ["x"]), [1, 4, 1, 1]),
    "lrn": (S, lambda b: b.op("LRN", ["x"], size=3), S),
    "sum3": (S, lambda b: b.op("Sum", ["x", "x", "x"]), S),
    "not": (S, lambda b: b.op("Cast", [b.op("Not", [b.op("Greater", ["x", f32(b, 0)])])], to=1), S),
    "fmod": (S, lambda b: b.op("Mod", ["x", f32(b, 0.7)], fmod=1), S),
    "einsum": ([2, 3], lambda b: b.op("Einsum", ["x", b.weight((3, 4))], equation="ij,jk->ik"), [2, 4]),
    "gru": ([4, 1, 3], lambda b: b.op("GRU", ["x", b.weight((1, 15, 3)), b.weight((1, 15, 5))], n_out=2, hidden_size=5)[0],
            [4, 1, 1, 5]),
    "bidirectional_lstm": ([4, 1, 3], lambda b: b.op("LSTM", ["x", b.weight((2, 20, 3)), b.weight((2, 20, 5))], n_out=3,
                                                    hidden_size=5, direction="bidirectional")[0], [4, 2, 1, 5]),
    "conv1d": ([1, 3, 10], lambda b: b.op("Conv", ["x", b.weight((4, 3, 3))], kernel_shape=[3], pads=[1, 1]), [1, 4, 10]),
    "maxpool1d": ([1, 3, 10], lambda b: b.op("MaxPool", ["x"], kernel_shape=[2], strides=[2]), [1, 3, 5]),
    "avgpool_same": (S, lambda b: b.op("AveragePool", ["x"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
                     [1, 4, 3, 3]),
    "conv_same": (S, lambda b: b.op("Conv", ["x", b.weight((2, 4, 3, 3))], kernel_shape=[3, 3], strides=[2, 2],
                                    auto_pad="SAME_UPPER"), [1, 2, 3, 3]),
    "conv_asymmetric_pads": (S, lambda b: b.op("Conv", ["x", b.weight((2, 4, 3, 3))], kernel_shape=[3, 3],
                                               pads=[0, 1, 2, 0]), [1, 2, 6, 5]),
    "shape_start_end": (S, lambda b: b.op("Cast", [b.op("Shape", ["x"], start=1, end=-1)], to=1), [2]),
    "shape_start_negative": ([2, 3, 5], lambda b: b.op("Cast", [b.op("Shape", ["x"], start=-2)], to=1), [2]),
    "castlike_int": (S, lambda b: b.op("Cast", [b.op("CastLike", [b.op("Mul", ["x", f32(b, 4)]),
                                                                  b.init(np.array([1], np.int32), "t")])], to=1), S),
    "reverse_sequence": ([4, 2, 3], lambda b: b.op("ReverseSequence", ["x", i64(b, [4, 2])], batch_axis=1, time_axis=0),
                         [4, 2, 3]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_real_mnn(name: str) -> None:
    shape, build, out_shape = CASES[name]
    b = _Builder(0)
    build(b)
    b.nodes[-1].output[0] = "y"
    with tempfile.TemporaryDirectory() as d:
        onnx_path, mnn_path = os.path.join(d, "m.onnx"), os.path.join(d, "m.mnn")
        b.save(onnx_path, [b.io("x", shape)], [b.io("y", out_shape)])
        convert(onnx_path, mnn_path)
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        (exp,) = real_mnn_forward(mnn_path, {"x": x}, ["y"])
        got = MNN.nn.load_module_from_file(mnn_path, ["x"], ["y"]).forward([MNN.expr.const(x, shape)])[0].read()
        assert got.shape == exp.shape
        assert float(np.abs(got - exp).max()) <= 1e-3 * max(1.0, float(np.abs(exp).max()))


# ---------------------------------------------------------------- ops with several or int inputs

def _onnx_io(b, name: str, shape, dtype=np.float32):
    from onnx import TensorProto
    elem = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64}[np.dtype(dtype)]
    return b.h.make_tensor_value_info(name, elem, shape)


def _converted(d: str, build, inputs: dict, out, out_dtype=np.float32) -> str:
    """Build the ONNX model ``build(b)`` (last node's output is "y") with ``inputs`` {name: (shape, dtype)},
    convert it with real MNN's converter into directory ``d``; returns the .mnn path."""
    b = _Builder(0)
    build(b)
    b.nodes[-1].output[0] = "y"
    onnx_path, mnn_path = os.path.join(d, "m.onnx"), os.path.join(d, "m.mnn")
    b.save(onnx_path, [_onnx_io(b, n, s, t) for n, (s, t) in inputs.items()], [_onnx_io(b, "y", out, out_dtype)])
    return convert(onnx_path, mnn_path)


def _mnn_dtype(mod, a: np.ndarray):
    return mod.expr.int if a.dtype.kind in "iu" else mod.expr.float


def _both(mnn_path: str, feeds: dict) -> tuple[np.ndarray, np.ndarray]:
    """(real MNN's, mnnjit's) output "y" of the model for ``feeds`` (int inputs fed as int32)."""
    import MNN as REAL
    feeds = {k: (v.astype(np.int32) if v.dtype.kind in "iu" else v.astype(np.float32)) for k, v in feeds.items()}
    outs = []
    for mod in (REAL, MNN):
        m = mod.nn.load_module_from_file(mnn_path, list(feeds), ["y"])
        xs = [mod.expr.const(a, list(a.shape), mod.expr.NCHW, _mnn_dtype(mod, a)) for a in feeds.values()]
        outs.append(np.array(m.forward(xs)[0].read(), copy=True))
    return outs[0], outs[1]


def _both_mnnjit(mnn_path: str, feeds: dict) -> np.ndarray:
    """mnnjit's output "y" of the model for ``feeds`` (int inputs fed as int32)."""
    m = MNN.nn.load_module_from_file(mnn_path, list(feeds), ["y"])
    xs = [MNN.expr.const(a.astype(np.int32) if a.dtype.kind in "iu" else a, list(a.shape), MNN.expr.NCHW,
                         _mnn_dtype(MNN, a)) for a in feeds.values()]
    return m.forward(xs)[0].read()


def _assert_close(got: np.ndarray, exp: np.ndarray, tol: float = 1e-4) -> None:
    assert got.shape == exp.shape, (got.shape, exp.shape)
    scale = max(1.0, float(np.abs(exp).max(initial=0.0)))
    assert float(np.abs(got.astype(np.float64) - exp).max(initial=0.0)) <= tol * scale


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A directory for this module's converted models (each converted once, reused by the tests)."""
    return tmp_path_factory.mktemp("ops_models")


_MODELS: dict = {}


def _model(model_dir, key, build, inputs: dict, out, out_dtype=np.float32) -> str:
    """``_converted`` once per ``key`` for the module."""
    if key not in _MODELS:
        d = os.path.join(str(model_dir), "_".join(str(k) for k in key))
        os.makedirs(d, exist_ok=True)
        _MODELS[key] = _converted(d, build, inputs, out, out_dtype)
    return _MODELS[key]


# ---------------------------------------------------------------- GridSample

GS_X, GS_G = [2, 3, 5, 7], [2, 4, 6, 2]


def _grid_model(model_dir, mode: str, pad: str, align: int) -> str:
    build = lambda b: b.op("GridSample", ["x", "g"], mode=mode, padding_mode=pad, align_corners=align)  # noqa: E731
    return _model(model_dir, ("gs", mode, pad, align), build,
                  {"x": (GS_X, np.float32), "g": (GS_G, np.float32)}, GS_X[:2] + GS_G[1:3])


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_matches_real_mnn(model_dir, mode: str, pad: str, align: int) -> None:
    """GridSample against real MNN, with sample points outside [-1, 1] and on rounding ties
    (real MNN's nearest rounds ties up; its reflection padding clamps like border)."""
    path = _grid_model(model_dir, mode, pad, align)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(GS_X).astype(np.float32)
    g = rng.uniform(-1.4, 1.4, GS_G).astype(np.float32)
    g[0, 0, :, 0] = [-1, 1, 0, -6 / 7, 2 / 7, 0.5]  # ties of nearest rounding for both align_corners values
    g[0, 1, :, 1] = [-1, 1, 0, 0.5, -0.5, 0.75]
    exp, got = _both(path, {"x": x, "g": g})
    _assert_close(got, exp)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mode=st.sampled_from(["bilinear", "nearest"]), pad=st.sampled_from(["zeros", "border"]),
       align=st.sampled_from([0, 1]), seed=st.integers(0, 2**31 - 1), spread=st.floats(0.1, 3.0))
def test_grid_sample_random_grids(model_dir, mode: str, pad: str, align: int, seed: int, spread: float) -> None:
    """Random sample grids (inside and far outside the image) against real MNN."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(GS_X).astype(np.float32)
    g = rng.uniform(-spread, spread, GS_G).astype(np.float32)
    exp, got = _both(_grid_model(model_dir, mode, pad, align), {"x": x, "g": g})
    _assert_close(got, exp)


# ---------------------------------------------------------------- NonZero (MNN op type Where)

def _nonzero_model(model_dir, shape) -> str:
    return _model(model_dir, ("nonzero", *shape), lambda b: b.op("NonZero", ["x"]), {"x": (shape, np.float32)},
                  [len(shape), "n"], np.int64)


def _sparse(rng, shape, frac: float) -> np.ndarray:
    return (rng.standard_normal(shape) * (rng.random(shape) < frac)).astype(np.float32)


@pytest.mark.parametrize("shape", [[7], [3, 4], [2, 3, 4]])
@pytest.mark.parametrize("frac", [0.1, 0.5, 1.0])
def test_nonzero_matches_real_mnn(model_dir, shape, frac: float) -> None:
    """ONNX NonZero (MNN Where + Transpose): the coordinates of the nonzero elements, a data-dependent shape."""
    x = _sparse(np.random.default_rng(len(shape)), shape, frac)
    x.reshape(-1)[0] = 1.0  # at least one (real MNN cannot read an empty output)
    exp, got = _both(_nonzero_model(model_dir, shape), {"x": x})
    assert got.dtype == exp.dtype and np.array_equal(got, exp)


def test_nonzero_count_changes_between_forwards(model_dir) -> None:
    """One loaded module, inputs with different nonzero counts (none at all too): numpy's nonzero."""
    m = MNN.nn.load_module_from_file(_nonzero_model(model_dir, [3, 4]), ["x"], ["y"])
    rng = np.random.default_rng(5)
    for frac in (0.5, 0.0, 1.0, 0.2):
        x = _sparse(rng, [3, 4], frac)
        got = m.forward([MNN.expr.const(x, [3, 4])])[0].read()
        assert np.array_equal(got, np.array(np.nonzero(x))), frac


def test_nonzero_feeds_gather_nd(model_dir) -> None:
    """NonZero's coordinates used downstream (GatherND of the nonzero values, then a sum)."""
    def build(b):
        idx = b.op("Transpose", [b.op("NonZero", ["x"])], perm=[1, 0])
        b.op("ReduceSum", [b.op("GatherND", ["x", idx])], keepdims=0)
    path = _model(model_dir, ("nonzero_gather",), build, {"x": ([4, 5], np.float32)}, [])
    m = MNN.nn.load_module_from_file(path, ["x"], ["y"])
    for seed in range(3):
        x = _sparse(np.random.default_rng(seed), [4, 5], 0.4)
        x[0, 0] = 2.0
        exp, got = _both(path, {"x": x})
        _assert_close(got, exp)
        _assert_close(m.forward([MNN.expr.const(x, [4, 5])])[0].read(), np.asarray(x.sum(), np.float32))


# ---------------------------------------------------------------- ScatterElements

def _scatter_model(model_dir, axis: int, data, idx, reduction: str | None = None) -> str:
    """ONNX ScatterElements (data and updates inputs, indices an input too); ``reduction`` rewrites the MNN
    op's BinaryOp opType (the ONNX converter always writes none; MNN's torch converter writes ADD)."""
    build = lambda b: b.op("ScatterElements", ["x", "i", "u"], axis=axis)  # noqa: E731
    path = _model(model_dir, ("scatter", axis, *data, *idx), build,
                  {"x": (data, np.float32), "i": (idx, np.int64), "u": (idx, np.float32)}, data)
    if reduction is None:
        return path
    from mnnjit.format.reader import read_net
    from mnnjit.format.writer import write_net
    net = read_net(path)
    (op,) = [o for o in net.oplists if o.type == "ScatterElements"]
    op.main["opType"] = reduction
    out = path.replace(".mnn", f"_{reduction}.mnn")
    write_net(net, out)
    return out


SCATTER_CASES = [(0, [4, 3], [2, 3]), (1, [3, 5], [3, 2]), (1, [2, 3, 4], [2, 2, 3]), (-1, [2, 3, 4], [1, 3, 2]),
                 (0, [6], [4])]


def _scatter_feeds(rng, axis: int, data, idx, unique: bool):
    x = rng.standard_normal(data).astype(np.float32)
    ax = axis % len(data)
    if unique:  # distinct targets along the axis, so the result does not depend on the write order
        i = np.argsort(rng.random(tuple(idx[:ax]) + (data[ax],) + tuple(idx[ax + 1:])), axis=ax)
        i = np.take(i, np.arange(idx[ax]), axis=ax)
    else:
        i = rng.integers(0, data[ax], idx)
    return {"x": x, "i": i.astype(np.int64), "u": rng.standard_normal(idx).astype(np.float32)}


@pytest.mark.parametrize("axis,data,idx", SCATTER_CASES)
def test_scatter_elements_matches_real_mnn(model_dir, axis: int, data, idx) -> None:
    """ScatterElements along axis 0, 1 and -1 against real MNN and ONNX Runtime (distinct indices)."""
    path = _scatter_model(model_dir, axis, data, idx)
    feeds = _scatter_feeds(np.random.default_rng(axis + len(data)), axis, data, idx, unique=True)
    exp, got = _both(path, feeds)
    _assert_close(got, exp)
    import onnxruntime as ort
    (onnx_exp,) = ort.InferenceSession(path.replace(".mnn", ".onnx")).run(None, feeds)
    _assert_close(got, onnx_exp)


@pytest.mark.parametrize("reduction", ["ADD", "MUL"])
@pytest.mark.parametrize("axis,data,idx", SCATTER_CASES[:3])
def test_scatter_elements_reductions_match_real_mnn(model_dir, reduction: str, axis: int, data, idx) -> None:
    """The BinaryOp reductions (torch scatter_add and the like), with repeated indices."""
    path = _scatter_model(model_dir, axis, data, idx, reduction)
    exp, got = _both(path, _scatter_feeds(np.random.default_rng(7), axis, data, idx, unique=False))
    _assert_close(got, exp)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(SCATTER_CASES), seed=st.integers(0, 2**31 - 1))
def test_scatter_elements_random(model_dir, case, seed: int) -> None:
    """Random data, distinct indices and updates against real MNN."""
    axis, data, idx = case
    exp, got = _both(_scatter_model(model_dir, axis, data, idx),
                     _scatter_feeds(np.random.default_rng(seed), axis, data, idx, unique=True))
    _assert_close(got, exp)


def test_scatter_elements_max_reduction_is_refused(model_dir) -> None:
    """MAXIMUM is refused up front (real MNN ignores the updates with it), not run with other semantics."""
    from mnnjit.models.translate import UnsupportedOpError
    path = _scatter_model(model_dir, *SCATTER_CASES[0], "MAXIMUM")
    feeds = _scatter_feeds(np.random.default_rng(0), *SCATTER_CASES[0], unique=True)
    with pytest.raises(UnsupportedOpError, match="MAXIMUM"):
        _both_mnnjit(path, feeds)


def test_scatter_elements_bad_index_raises(model_dir) -> None:
    """An index past the axis is a clear IndexError (real MNN writes out of bounds)."""
    path = _scatter_model(model_dir, *SCATTER_CASES[1])
    feeds = _scatter_feeds(np.random.default_rng(0), *SCATTER_CASES[1], unique=True)
    feeds["i"][1, 1] = 5
    with pytest.raises(IndexError, match="out of bounds"):
        _both_mnnjit(path, feeds)


# ---------------------------------------------------------------- OneHot

def _one_hot_model(model_dir, axis: int, depth: int = 7) -> str:
    build = lambda b: b.op("OneHot", ["i", i64(b, depth), f32(b, [-0.5, 2.0])], axis=axis)  # noqa: E731
    return _model(model_dir, ("onehot", axis, depth), build, {"i": ([2, 5], np.int64)}, ["a", "b", "c"])


@pytest.mark.parametrize("axis", [-1, 0, 1, 2])
def test_one_hot_matches_real_mnn(model_dir, axis: int) -> None:
    """OneHot with the new axis first, inside and last; indices out of [0, depth) (negative ones too:
    real MNN does not wrap them, unlike ONNX) give the off value."""
    i = np.array([[0, 3, 6, -1, -7], [7, 2, -8, 1, 1]])
    exp, got = _both(_one_hot_model(model_dir, axis), {"i": i})
    assert got.shape == exp.shape and np.array_equal(got, exp)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(axis=st.sampled_from([-1, 0, 1]), depth=st.sampled_from([1, 4]), seed=st.integers(0, 2**31 - 1))
def test_one_hot_random(model_dir, axis: int, depth: int, seed: int) -> None:
    """Random indices around [0, depth) against real MNN."""
    i = np.random.default_rng(seed).integers(-depth - 2, depth + 2, (2, 5))
    exp, got = _both(_one_hot_model(model_dir, axis, depth), {"i": i})
    assert got.shape == exp.shape and np.array_equal(got, exp)


# ---------------------------------------------------------------- Trilu (SliceTf with a negative begin)

@pytest.mark.parametrize("upper", [1, 0])
@pytest.mark.parametrize("shape", [[5, 5], [6, 3], [3, 4, 6]])
@pytest.mark.parametrize("k", [None, 0, 2, -1])
def test_trilu_matches_real_mnn(model_dir, upper: int, shape, k) -> None:
    """ONNX Trilu converts to Shape, SliceTf(shape, [-1], [1]) (a negative begin), Range, Select:
    against real MNN and numpy's triu / tril."""
    def build(b):
        b.op("Trilu", ["x"] if k is None else ["x", i64(b, k)], upper=upper)
    path = _model(model_dir, ("trilu", upper, *shape, k), build, {"x": (shape, np.float32)}, shape)
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    exp, got = _both(path, {"x": x})
    assert np.array_equal(got, exp)
    assert np.array_equal(got, np.triu(x, k or 0) if upper else np.tril(x, k or 0))


# ---------------------------------------------------------------- Less (real MNN compares float bits) and Shrink

def _less_model(model_dir, cshape) -> str:
    return _model(model_dir, ("less", *cshape), lambda b: b.op("Cast", [b.op("Less", ["x", "c"])], to=1),
                  {"x": ([3, 8], np.float32), "c": (cshape, np.float32)}, [3, 8])


def _signed_values(rng, shape) -> np.ndarray:
    v = rng.choice(np.array([-2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0], np.float32), shape)
    return np.where(rng.random(shape) < 0.5, v, rng.standard_normal(shape)).astype(np.float32)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cshape=st.sampled_from([[3, 8], [1], [8], [3, 1]]), seed=st.integers(0, 2**31 - 1))
def test_float_less_matches_real_mnn(model_dir, cshape, seed: int) -> None:
    """ONNX Less on floats with signs, zeros (-0.0 too) and broadcasting: real MNN 3.6.1's result
    (an int32 comparison of the float bits, which differs from x < c for two negative values)."""
    rng = np.random.default_rng(seed)
    x, c = _signed_values(rng, [3, 8]), _signed_values(rng, cshape)
    exp, got = _both(_less_model(model_dir, cshape), {"x": x, "c": c})
    assert np.array_equal(got, exp)
    bits = (x.view(np.int32) < c.view(np.int32)).astype(np.float32)
    assert np.array_equal(got, bits)


@pytest.mark.parametrize("lambd,bias", [(0.5, 0.0), (0.5, 0.3), (0.0, 1.0)])
def test_shrink_matches_real_mnn(model_dir, lambd: float, bias: float) -> None:
    """ONNX Shrink converts to Greater/Less + Select; it follows real MNN, whose ``x < -lambd`` is
    ``|x| < lambd`` for negative x (so negative inputs differ from ONNX Runtime), and agrees with ONNX
    Runtime for inputs >= 0."""
    path = _model(model_dir, ("shrink", lambd, bias), lambda b: b.op("Shrink", ["x"], lambd=lambd, bias=bias),
                  {"x": ([4, 6], np.float32)}, [4, 6])
    x = np.linspace(-1.5, 1.5, 24).astype(np.float32).reshape(4, 6)
    exp, got = _both(path, {"x": x})
    _assert_close(got, exp, 1e-6)
    import onnxruntime as ort
    (onnx_exp,) = ort.InferenceSession(path.replace(".mnn", ".onnx")).run(None, {"x": x})
    keep = x >= 0
    _assert_close(got[keep], onnx_exp[keep], 1e-6)


# ---------------------------------------------------------------- NMS, RoiAlign, GatherElements, Dropout

def _nms_model(model_dir, max_out: int, iou: float, thr: float) -> str:
    def build(b):
        return b.op("NonMaxSuppression", ["boxes", "scores", b.init(np.array([max_out], np.int64), "m"),
                                          f32(b, [iou]), f32(b, [thr])])
    return _model(model_dir, ("nms", max_out, iou, thr), build,
                  {"boxes": ([1, 12, 4], np.float32), "scores": ([1, 1, 12], np.float32)}, [None, 3], np.int64)


@pytest.mark.parametrize("max_out,iou,thr", [(3, 0.5, 0.0), (12, 0.3, -1.0), (5, 0.7, 0.4)])
def test_non_max_suppression_matches_real_mnn(model_dir, max_out: int, iou: float, thr: float) -> None:
    """ONNX NonMaxSuppression (MNN NonMaxSuppressionV2): the kept boxes' count depends on the
    values, so the plan is re-translated per forward; one module, several inputs."""
    path = _nms_model(model_dir, max_out, iou, thr)
    m = MNN.nn.load_module_from_file(path, ["boxes", "scores"], ["y"])
    for seed in range(4):
        rng = np.random.default_rng(seed)
        corners = rng.uniform(0, 10, (1, 12, 2, 2)).astype(np.float32)
        boxes = np.sort(corners, axis=2).reshape(1, 12, 4)   # (y1, x1, y2, x2)
        scores = rng.uniform(-0.2, 1, (1, 1, 12)).astype(np.float32)
        exp, _ = _both(path, {"boxes": boxes, "scores": scores})
        got = m.forward([MNN.expr.const(boxes, [1, 12, 4]), MNN.expr.const(scores, [1, 1, 12])])[0].read()
        assert np.array_equal(np.asarray(got), exp), (seed, got, exp)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ratio", [0, 2])
def test_roi_align_matches_real_mnn(model_dir, mode: str, ratio: int) -> None:
    """ONNX RoiAlign (rois [K, 4] and batch indices) as MNN ROIAlign on an NC4HW4 input."""
    rois = np.array([[0, 0, 4, 4], [1, 2, 7, 6], [0.5, 1.5, 3.2, 7.9]], np.float32)

    def build(b):
        return b.op("RoiAlign", ["x", f32(b, rois), b.init(np.array([0, 1, 1], np.int64), "bi")],
                    output_height=3, output_width=2, sampling_ratio=ratio, spatial_scale=0.9, mode=mode)
    path = _model(model_dir, ("roialign", mode, ratio), build, {"x": ([2, 4, 8, 8], np.float32)}, [3, 4, 3, 2])
    x = np.random.default_rng(ratio).standard_normal((2, 4, 8, 8)).astype(np.float32)
    exp, got = _both(path, {"x": x})
    _assert_close(got, exp, 1e-4)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements_matches_real_mnn(model_dir, axis: int) -> None:
    """Indices in [0, n) match real MNN and numpy's take_along_axis."""
    shape = [3, 4, 5]
    idx = np.random.default_rng(axis % 3 + 5).integers(0, shape[axis], (2, 3, 4)).astype(np.int64)
    path = _model(model_dir, ("gather_el", axis), lambda b: b.op("GatherElements", ["x", b.init(idx, "i")], axis=axis),
                  {"x": (shape, np.float32)}, [2, 3, 4])
    x = np.random.default_rng(axis % 3).standard_normal(shape).astype(np.float32)
    exp, got = _both(path, {"x": x})
    _assert_close(got, exp, 0)
    src = x[tuple(slice(0, None) if a == axis % 3 else slice(0, m) for a, m in enumerate(idx.shape))]
    np.testing.assert_array_equal(got, np.take_along_axis(src, idx, axis=axis))


def test_gather_elements_negative_indices_count_from_the_end(tmp_path) -> None:
    """ONNX's meaning (real MNN reads at the flat offset there: see COMPATIBILITY.md)."""
    idx = np.array([[-1, 0, -3, 2]], np.int64)
    path = _converted(str(tmp_path), lambda b: b.op("GatherElements", ["x", b.init(idx, "i")], axis=1),
                      {"x": ([2, 3], np.float32)}, [1, 4])
    x = np.array([[10, 20, 30], [40, 50, 60]], np.float32)
    np.testing.assert_array_equal(_both_mnnjit(path, {"x": x}), [[30, 10, 10, 30]])


def test_gather_elements_index_out_of_range_raises(tmp_path) -> None:
    idx = np.array([[0, 7]], np.int64)
    path = _converted(str(tmp_path), lambda b: b.op("GatherElements", ["x", b.init(idx, "i")], axis=1),
                      {"x": ([1, 3], np.float32)}, [1, 2])
    with pytest.raises(IndexError, match="out of bounds"):
        m = MNN.nn.load_module_from_file(path, ["x"], ["y"])
        m.forward([MNN.expr.const(np.zeros((1, 3), np.float32), [1, 3])])[0].read()


def test_dropout_is_identity(tmp_path) -> None:
    """ONNX Dropout survives MNN's converter as an MNN Dropout op (real MNN 3.6.1 cannot run it);
    at inference it passes its input through."""
    path = _converted(str(tmp_path), lambda b: b.op("Dropout", ["x"]), {"x": ([2, 5], np.float32)}, [2, 5])
    x = np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)
    np.testing.assert_array_equal(_both_mnnjit(path, {"x": x}), x)


# ---------------------------------------------------------------- Det, EyeLike, RandomUniform/Normal, Unique

@pytest.mark.parametrize("shape", [[3, 3], [2, 4, 4], [2, 1, 2, 2]])
def test_det_matches_real_mnn(model_dir, shape) -> None:
    """ONNX Det (MNN Det) of batches of square matrices, a singular one among them."""
    path = _model(model_dir, ("det", *shape), lambda b: b.op("Det", ["x"]), {"x": (shape, np.float32)}, shape[:-2])
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    x.reshape(-1, shape[-1], shape[-1])[0, 1] = x.reshape(-1, shape[-1], shape[-1])[0, 0] * 2  # singular
    exp, got = _both(path, {"x": x})
    _assert_close(got, exp, 1e-5)
    _assert_close(got, np.linalg.det(x.astype(np.float64)), 1e-5)


@pytest.mark.parametrize("shape,k", [([4, 5], 1), ([4, 5], -2), ([3, 3], 0), ([2, 6], 7)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_eye_like_matches_real_mnn(model_dir, shape, k: int, dtype) -> None:
    """ONNX EyeLike (MNN EyeLike with k as a second input) added to its input, float and int."""
    def build(b):
        b.op("Add", ["x", b.op("EyeLike", ["x"], k=k)])
    path = _model(model_dir, ("eyelike", *shape, k, np.dtype(dtype).name), build, {"x": (shape, dtype)}, shape, dtype)
    rng = np.random.default_rng(k + 10)
    x = (rng.standard_normal(shape) * 5).astype(dtype)
    exp, got = _both(path, {"x": x})
    assert got.dtype == exp.dtype and np.array_equal(got, exp)
    assert np.array_equal(got, x + np.eye(*shape, k, dtype=dtype))


@pytest.mark.parametrize("kind,a,b", [("RandomUniformLike", -2.0, 3.0), ("RandomNormalLike", 1.5, 0.5)])
def test_random_like_statistics(model_dir, kind: str, a: float, b: float) -> None:
    """ONNX RandomUniformLike / RandomNormalLike (MNN RandomUniform / RandomNormal on the input's shape):
    real MNN's generator cannot be reproduced, so shape, dtype, range and moments are checked against
    real MNN's output and the distribution, and the numbers must repeat across forwards and loads
    (real MNN's fixed seed does the same)."""
    attrs = {"low": a, "high": b} if kind == "RandomUniformLike" else {"mean": a, "scale": b}
    shape = [50, 40]
    path = _model(model_dir, ("random", kind), lambda bb: bb.op(kind, ["x"], **attrs), {"x": (shape, np.float32)},
                  shape)
    x = np.zeros(shape, np.float32)
    exp, got = _both(path, {"x": x})
    assert got.shape == exp.shape == tuple(shape) and got.dtype == exp.dtype == np.float32
    if kind == "RandomUniformLike":
        assert got.min() >= a and got.max() < b and exp.min() >= a and exp.max() < b
        mean, std = (a + b) / 2, (b - a) / np.sqrt(12)
    else:
        mean, std = a, b
    for v in (got, exp):  # 2000 samples: the mean within 5 standard errors, the deviation within 10%
        assert abs(float(v.mean()) - mean) < 5 * std / np.sqrt(v.size)
        assert abs(float(v.std()) / std - 1) < 0.1
    assert len(np.unique(got)) > 0.99 * got.size
    np.testing.assert_array_equal(_both_mnnjit(path, {"x": x}), got)
    m = MNN.nn.load_module_from_file(path, ["x"], ["y"])
    np.testing.assert_array_equal(m.forward([MNN.expr.const(x, shape)])[0].read(), got)
    np.testing.assert_array_equal(m.forward([MNN.expr.const(x + 1, shape)])[0].read(), got)


def _unique_model(model_dir, dtype, n: int = 12) -> str:
    from onnx import TensorProto

    def build(b):
        b.op("Unique", ["x"], n_out=4, sorted=1)
        b.nodes[-1].output[:] = ["y", "first", "inverse", "counts"]
    b = _Builder(0)
    build(b)
    d = os.path.join(str(model_dir), f"unique_{np.dtype(dtype).name}")
    os.makedirs(d, exist_ok=True)
    onnx_path, mnn_path = os.path.join(d, "m.onnx"), os.path.join(d, "m.mnn")
    outs = [_onnx_io(b, "y", ["u"], dtype)] + [b.h.make_tensor_value_info(n_, TensorProto.INT64, [d])
                                               for n_, d in (("first", "u"), ("inverse", n), ("counts", "u"))]
    b.save(onnx_path, [_onnx_io(b, "x", [n], dtype)], outs)
    return convert(onnx_path, mnn_path)


def _unique_outputs(mod, path: str, x: np.ndarray) -> list[np.ndarray]:
    names = ["y", "first", "inverse", "counts"]
    m = mod.nn.load_module_from_file(path, ["x"], names)
    return [np.array(v.read(), copy=True) for v in
            m.forward([mod.expr.const(x, list(x.shape), mod.expr.NCHW, _mnn_dtype(mod, x))])]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1), spread=st.sampled_from([2, 5, 40]))
def test_unique_ints_match_real_mnn_and_onnx(model_dir, seed: int, spread: int) -> None:
    """ONNX Unique (MNN Unique, all four outputs) on int inputs: sorted values, first indices, inverse
    indices and counts as real MNN and ONNX Runtime give them; the count changes between forwards."""
    import MNN as REAL
    import onnxruntime as ort
    path = _unique_model(model_dir, np.int64)
    x = np.random.default_rng(seed).integers(-spread, spread, 12).astype(np.int32)
    got = _unique_outputs(MNN, path, x)
    exp = _unique_outputs(REAL, path, x)
    onnx_exp = ort.InferenceSession(path.replace(".mnn", ".onnx")).run(None, {"x": x.astype(np.int64)})
    for g, e, o in zip(got, exp, onnx_exp):
        assert g.dtype == np.int32 and np.array_equal(g, e) and np.array_equal(g, o)


def test_unique_floats(model_dir) -> None:
    """Float inputs: ONNX's numeric order (ONNX Runtime); real MNN agrees for non-negative values (it orders
    floats by their int32 bit patterns, so negative values differ: docs/COMPATIBILITY.md)."""
    import MNN as REAL
    import onnxruntime as ort
    path = _unique_model(model_dir, np.float32)
    sess = ort.InferenceSession(path.replace(".mnn", ".onnx"))
    rng = np.random.default_rng(0)
    pos = rng.integers(0, 5, 12).astype(np.float32) * 0.5
    mixed = np.array([1, -1, -3, 0, -0.0, 2, -1, 7, -3, 0.5, 1, -2], np.float32)
    for x in (pos, mixed):
        got = _unique_outputs(MNN, path, x)
        for g, o in zip(got, sess.run(None, {"x": x})):
            np.testing.assert_array_equal(g, o)
    for g, e in zip(_unique_outputs(MNN, path, pos), _unique_outputs(REAL, path, pos)):
        np.testing.assert_array_equal(g, e)


# ---------------------------------------------------------------- Resize with scales that do not give whole sizes

@pytest.mark.parametrize("mode,nearest,ctm", [("nearest", "floor", "half_pixel"),
                                              ("nearest", "round_prefer_floor", "half_pixel"),
                                              ("nearest", "floor", "asymmetric"), ("linear", None, "half_pixel"),
                                              ("linear", None, "asymmetric")])
@pytest.mark.parametrize("scales", [(1.5, 1.7), (0.5, 0.4)])
def test_resize_scales_map_coordinates_with_the_given_scale(model_dir, mode: str, nearest, ctm: str, scales) -> None:
    """ONNX Resize with scales whose output sizes are rounded down (6 * 1.7 -> 10): real MNN and ONNX Runtime
    map the coordinates with the given scale (1 / 1.7), not with in/out sizes (6 / 10)."""
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm, **({"nearest_mode": nearest} if nearest else {})}
    build = lambda b: b.op("Resize", ["x", "", f32(b, [1, 1, *scales])], **attrs)  # noqa: E731
    out = [2, 3, int(6 * scales[0]), int(6 * scales[1])]
    path = _model(model_dir, ("resize_sc", mode, nearest, ctm, *scales), build, {"x": ([2, 3, 6, 6], np.float32)}, out)
    x = np.random.default_rng(2).standard_normal((2, 3, 6, 6)).astype(np.float32)
    exp, got = _both(path, {"x": x})
    _assert_close(got, exp, 1e-5)
    import onnxruntime as ort
    (onnx_exp,) = ort.InferenceSession(path.replace(".mnn", ".onnx")).run(None, {"x": x})
    _assert_close(got, onnx_exp, 1e-5)


# ---------------------------------------------------------------- ConvTranspose with output_shape / auto_pad (SAME)

DECONV_SAME = {"output_shape_larger": dict(output_shape=[14, 12]), "output_shape_smaller": dict(output_shape=[12, 11]),
               "output_shape_odd": dict(output_shape=[11, 10]), "same_upper": dict(auto_pad="SAME_UPPER"),
               "same_lower": dict(auto_pad="SAME_LOWER"), "dilated": dict(output_shape=[15, 14], dilations=[2, 1]),
               "same_upper_group": dict(auto_pad="SAME_UPPER", group=2)}


@pytest.mark.parametrize("name", sorted(DECONV_SAME))
def test_conv_transpose_same_matches_real_mnn(model_dir, name: str) -> None:
    """MNN Deconvolution with SAME padding (and an output-shape input): real MNN's crop rule; ONNX Runtime
    agrees where ONNX splits the padding the same way (SAME_UPPER, outputs larger than the full result)."""
    attrs = DECONV_SAME[name]
    group = attrs.get("group", 1)
    w = np.random.default_rng(0).standard_normal((4, 2, 3, 3)).astype(np.float32)
    build = lambda b: b.op("ConvTranspose", ["x", b.init(w, "w")], strides=[2, 2], **attrs)  # noqa: E731
    path = _model(model_dir, ("deconv_same", name), build, {"x": ([1, 4, 6, 5], np.float32)},
                  [1, 2 * group, None, None])
    x = np.random.default_rng(1).standard_normal((1, 4, 6, 5)).astype(np.float32)
    exp, got = _both(path, {"x": x})
    _assert_close(got, exp, 1e-5)
    if name in ("output_shape_larger", "same_upper", "same_upper_group"):
        import onnxruntime as ort
        (onnx_exp,) = ort.InferenceSession(path.replace(".mnn", ".onnx")).run(None, {"x": x})
        _assert_close(got, onnx_exp, 1e-5)


RESIZE_ND = {"3d_nearest_sizes": ([2, 3, 7], dict(mode="nearest"), None, [2, 3, 12]),
             "3d_nearest_floor_scales": ([2, 3, 7], dict(mode="nearest", nearest_mode="floor"), [1, 1, 1.6], None),
             "3d_linear_scales": ([2, 3, 7], dict(mode="linear"), [1, 1, 2], None),
             "5d_nearest_sizes": ([1, 2, 3, 4, 5], dict(mode="nearest"), None, [1, 2, 5, 7, 3]),
             "5d_nearest_floor_scales": ([1, 2, 3, 4, 5], dict(mode="nearest", nearest_mode="floor",
                                                                coordinate_transformation_mode="asymmetric"),
                                         [1, 1, 2, 1.5, 0.6], None),
             "5d_linear_scales": ([1, 2, 3, 4, 5], dict(mode="linear"), [1, 1, 2, 1.5, 0.6], None)}


@pytest.mark.parametrize("name", sorted(RESIZE_ND))
def test_resize_3d_and_5d(model_dir, name: str) -> None:
    """ONNX Resize of [N, C, L] and [N, C, D, H, W] tensors (MNN Interp) against ONNX Runtime and real MNN
    (not for linear: real MNN 3.6.1 returns no output for 5-D and, in some runs, zeros for 3-D)."""
    shape, attrs, scales, sizes = RESIZE_ND[name]

    def build(b):
        ins = ["x", "", f32(b, scales)] if scales else ["x", "", "", i64(b, sizes)]
        b.op("Resize", ins, **attrs)
    out = sizes or shape[:2] + [int(n * s) for n, s in zip(shape[2:], scales[2:])]
    path = _model(model_dir, ("resize_nd", name), build, {"x": (shape, np.float32)}, out)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    import onnxruntime as ort
    (onnx_exp,) = ort.InferenceSession(path.replace(".mnn", ".onnx")).run(None, {"x": x})
    if "linear" in name:
        got = _both_mnnjit(path, {"x": x})
    else:
        exp, got = _both(path, {"x": x})
        _assert_close(got, exp, 1e-5)
    _assert_close(got, onnx_exp, 1e-5)


# ---------------------------------------------------------------- ONNX sequences (MNN TensorArray ops)

SEQUENCES = {
    "at": lambda b: b.op("SequenceAt", [b.op("SequenceConstruct", ["x", "x2"]), i64(b, 1)]),
    "concat": lambda b: b.op("ConcatFromSequence", [b.op("SequenceConstruct", ["x", "x2", "x"])], axis=0),
    "stack": lambda b: b.op("ConcatFromSequence", [b.op("SequenceConstruct", ["x", "x2"])], axis=1, new_axis=1),
    "length": lambda b: b.op("Cast", [b.op("SequenceLength", [b.op("SequenceConstruct", ["x", "x2", "x"])])], to=1),
    "insert_end": lambda b: b.op("ConcatFromSequence", [b.op("SequenceInsert", [b.op("SequenceConstruct", ["x", "x"]),
                                                                                "x2"])], axis=1),
    "insert_middle": lambda b: b.op("ConcatFromSequence", [b.op("SequenceInsert", [b.op("SequenceConstruct", ["x", "x"]),
                                                                                   "x2", i64(b, 1)])], axis=1),
    "split_squeeze": lambda b: b.op("SequenceAt", [b.op("SplitToSequence", ["x"], axis=1, keepdims=0), i64(b, 2)]),
    "split_keep": lambda b: b.op("SequenceAt", [b.op("SplitToSequence", ["x"], axis=1), i64(b, 1)]),
    "split_sizes": lambda b: b.op("SequenceAt", [b.op("SplitToSequence", ["x", i64(b, [1, 2])], axis=1), i64(b, 1)]),
    "split_step": lambda b: b.op("SequenceAt", [b.op("SplitToSequence", ["x", i64(b, 2)], axis=1), i64(b, 1)]),
}


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_sequences_match_real_mnn(model_dir, name: str) -> None:
    """ONNX sequence ops (MNN TensorArray, TensorArrayWrite / Read / Concat / Size / Insert / Split) against
    real MNN, and ONNX Runtime (SequenceLength aside: real MNN's length has shape (1,), ONNX's is a scalar)."""
    out = {"at": [2, 3], "concat": [6, 3], "stack": [2, 2, 3], "length": [], "insert_end": [2, 9],
           "insert_middle": [2, 9], "split_squeeze": [2], "split_keep": [2, 1], "split_sizes": [2, 2],
           "split_step": [2, 1]}[name]
    path = _model(model_dir, ("seq", name), SEQUENCES[name], {"x": ([2, 3], np.float32), "x2": ([2, 3], np.float32)},
                  out)
    rng = np.random.default_rng(4)
    feeds = {"x": rng.standard_normal((2, 3)).astype(np.float32), "x2": rng.standard_normal((2, 3)).astype(np.float32)}
    exp, got = _both(path, feeds)
    assert got.shape == exp.shape and np.array_equal(got, exp)
    import onnxruntime as ort
    (onnx_exp,) = ort.InferenceSession(path.replace(".mnn", ".onnx")).run(None, feeds)
    np.testing.assert_array_equal(got.reshape(onnx_exp.shape) if name == "length" else got, onnx_exp)


# ---------------------------------------------------------------- STFT

@pytest.mark.parametrize("case", [(64, 8, "hann", 1), (64, 8, "hann", 0), (50, 6, "length", 1), (41, 5, "ones", 1)])
def test_stft_matches_real_mnn(model_dir, case) -> None:
    """ONNX STFT (MNN Stft) of real signals [B, N, 1]: Hann and rectangular windows, a frame_length input
    instead of a window, one- and two-sided, against real MNN and ONNX Runtime."""
    n, step, win, onesided = case

    def build(b):
        if win == "length":
            return b.op("STFT", ["x", i64(b, step), "", i64(b, 10)], onesided=onesided)
        w = np.hanning(16) if win == "hann" else np.ones(12)
        return b.op("STFT", ["x", i64(b, step), f32(b, w)], onesided=onesided)
    path = _model(model_dir, ("stft", *map(str, case)), build, {"x": ([2, n, 1], np.float32)}, [2, None, None, 2])
    x = np.random.default_rng(n).standard_normal((2, n, 1)).astype(np.float32)
    exp, got = _both(path, {"x": x})
    _assert_close(got, exp, 1e-4)
    import onnxruntime as ort
    (onnx_exp,) = ort.InferenceSession(path.replace(".mnn", ".onnx")).run(None, {"x": x})
    _assert_close(got, onnx_exp, 1e-4)


def test_resize_tf_crop_and_resize_is_refused(model_dir) -> None:
    """ONNX Resize tf_crop_and_resize: MNN's converter drops the roi, so mnnjit refuses the op (real MNN
    3.6.1 fills the output with one value) instead of resizing the whole image."""
    from mnnjit.models.translate import UnsupportedOpError

    def build(b):
        b.op("Resize", ["x", f32(b, [0, 0, 0.1, 0.2, 1, 1, 0.8, 1.2]), "", i64(b, [2, 4, 5, 7])], mode="linear",
             coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=0.5)
    path = _model(model_dir, ("resize_tfcrop",), build, {"x": ([2, 4, 6, 6], np.float32)}, [2, 4, 5, 7])
    with pytest.raises(UnsupportedOpError, match="tf_crop_and_resize"):
        _both_mnnjit(path, {"x": np.zeros((2, 4, 6, 6), np.float32)})


# ---------------------------------------------------------------- MaxPool indices, MaxUnpool

MAXPOOL_IDX = {"plain": ([2, 3, 6, 6], dict(kernel_shape=[2, 2], strides=[2, 2])),
               "padded": ([2, 3, 7, 7], dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
               "overlap_ceil": ([1, 2, 7, 6], dict(kernel_shape=[3, 2], strides=[2, 1], ceil_mode=1)),
               "1d": ([2, 3, 9], dict(kernel_shape=[3], strides=[2]))}


@pytest.mark.parametrize("name", sorted(MAXPOOL_IDX))
def test_max_pool_indices_match_onnx(model_dir, name: str) -> None:
    """ONNX MaxPool's Indices output (MNN Pooling with two outputs) and the MaxUnpool built on it (MNN's
    converter: ScatterNd of the values at the flat indices) against ONNX Runtime, ties included; real MNN
    3.6.1 writes other values as indices (and pads with -1.6e7), so it is only compared for the pooled
    values without padding."""
    import onnxruntime as ort
    from onnx import TensorProto
    shape, attrs = MAXPOOL_IDX[name]

    def build(b):
        y, i = b.op("MaxPool", ["x"], n_out=2, **attrs)
        b.op("Add", [y, b.op("Cast", [i], to=TensorProto.FLOAT)])
    path = _model(model_dir, ("maxpool_idx", name), build, {"x": (shape, np.float32)},
                  [shape[0], shape[1]] + [None] * (len(shape) - 2))
    x = np.round(np.random.default_rng(5).standard_normal(shape) * 2).astype(np.float32)  # ties
    (onnx_exp,) = ort.InferenceSession(path.replace(".mnn", ".onnx")).run(None, {"x": x})
    got = _both_mnnjit(path, {"x": x})
    np.testing.assert_array_equal(got, onnx_exp)


def test_max_unpool_matches_onnx(model_dir) -> None:
    """MaxPool (with indices) then MaxUnpool: each maximum back at its place, zeros elsewhere."""
    import onnxruntime as ort

    def build(b):
        y, i = b.op("MaxPool", ["x"], n_out=2, kernel_shape=[2, 2], strides=[2, 2])
        b.op("MaxUnpool", [y, i], kernel_shape=[2, 2], strides=[2, 2])
    path = _model(model_dir, ("maxunpool",), build, {"x": ([2, 3, 6, 6], np.float32)}, [2, 3, 6, 6])
    x = np.random.default_rng(6).standard_normal((2, 3, 6, 6)).astype(np.float32)
    (onnx_exp,) = ort.InferenceSession(path.replace(".mnn", ".onnx")).run(None, {"x": x})
    np.testing.assert_array_equal(_both_mnnjit(path, {"x": x}), onnx_exp)


def test_max_pool_values_with_indices_match_real_mnn(model_dir) -> None:
    """The pooled values of a MaxPool that also returns indices, against real MNN (no padding)."""
    def build(b):
        b.op("MaxPool", ["x"], n_out=2, kernel_shape=[2, 2], strides=[2, 2])
    path = _model(model_dir, ("maxpool_idx_vals",), build, {"x": ([2, 3, 6, 6], np.float32)}, [2, 3, 3, 3])
    x = np.random.default_rng(7).standard_normal((2, 3, 6, 6)).astype(np.float32)
    exp, got = _both(path, {"x": x})
    np.testing.assert_array_equal(got, exp)


@pytest.mark.parametrize("kind", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [[1, 2, 3, 4, 5], [2, 3, 4, 5, 6]])
def test_global_pool_5d(model_dir, kind: str, shape) -> None:
    """ONNX global pooling of [N, C, D, H, W] (MNN Pooling3D, isGlobal) against ONNX Runtime, and real MNN
    for the single-image average (real MNN 3.6.1 gives other values for the larger shape)."""
    import onnxruntime as ort
    path = _model(model_dir, ("gpool5d", kind, *shape), lambda b: b.op(kind, ["x"]), {"x": (shape, np.float32)},
                  shape[:2] + [1, 1, 1])
    x = np.random.default_rng(8).standard_normal(shape).astype(np.float32)
    got = _both_mnnjit(path, {"x": x})
    (onnx_exp,) = ort.InferenceSession(path.replace(".mnn", ".onnx")).run(None, {"x": x})
    _assert_close(got, onnx_exp, 1e-5)
    if shape[0] == 1 and kind == "GlobalAveragePool":
        exp, _ = _both(path, {"x": x})
        _assert_close(got, exp, 1e-5)


# ---------------------------------------------------------------- 1-D convolutions left 3-D

def _conv1d_model(model_dir) -> str:
    """Conv1d -> Relu -> MaxPool1d -> grouped Conv1d -> ConvTranspose1d on [2, 4, L], L dynamic:
    real MNN's converter unsqueezes the first convolution's input but leaves the layers after the
    pooling on 3-D tensors."""
    rng = np.random.default_rng(5)

    def build(b):
        w1 = b.init(rng.standard_normal((6, 4, 3)).astype(np.float32), "w1")
        c1 = b.op("Conv", ["x", w1, b.init(rng.standard_normal(6).astype(np.float32), "b1")], pads=[1, 1])
        p = b.op("MaxPool", [b.op("Relu", [c1])], kernel_shape=[2], strides=[2])
        w2 = b.init(rng.standard_normal((6, 3, 3)).astype(np.float32), "w2")
        c2 = b.op("Conv", [p, w2], pads=[2, 2], dilations=[2], group=2)
        w3 = b.init(rng.standard_normal((6, 5, 4)).astype(np.float32), "w3")
        b.op("ConvTranspose", [c2, w3], strides=[2], pads=[1, 1])
    return _model(model_dir, ("conv1d",), build, {"x": ([2, 4, "L"], np.float32)}, [2, 5, "M"])


def test_conv1d_on_3d_tensors_matches_real_mnn(model_dir) -> None:
    """A convolution, grouped convolution and transposed convolution whose input stays [N, C, L]
    run as [N, C, L, 1], as real MNN runs them, at two lengths; ONNX Runtime agrees."""
    import onnxruntime as ort
    from mnnjit.format import reader
    path = _conv1d_model(model_dir)
    # ranks along the graph (every op here keeps its first input's rank but the (un)squeezes)
    rank: dict = {}
    fed_3d = []
    for op in reader.read_net(path).oplists:
        ins = op.inputIndexes or []
        r = 3 if op.type == "Input" else rank[ins[0]] + {"Unsqueeze": 1, "Squeeze": -1}.get(op.type, 0)
        if op.type in ("Convolution", "Deconvolution") and rank[ins[0]] == 3:
            fed_3d.append(op.type)
        rank.update({t: r for t in op.outputIndexes or []})
    assert set(fed_3d) == {"Convolution", "Deconvolution"}, fed_3d   # the path under test
    sess = ort.InferenceSession(path.replace(".mnn", ".onnx"))
    for length in (16, 23):
        x = np.random.default_rng(length).standard_normal((2, 4, length)).astype(np.float32)
        exp, got = _both(path, {"x": x})
        _assert_close(got, exp, 1e-5)
        _assert_close(got, sess.run(None, {"x": x})[0], 1e-4)


# ---------------------------------------------------------------- Resize / Interp against real MNN's CPU kernel

RS_X = [1, 2, 5, 6]


@pytest.mark.parametrize("coord", ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"])
@pytest.mark.parametrize("cubic_a", [-0.75, -0.5])
@pytest.mark.parametrize("size", [[9, 7], [3, 4], [10, 12]])
def test_cubic_resize_matches_real_mnn(model_dir, coord: str, cubic_a: float, size) -> None:
    """Real MNN's cubic taps start at the truncated source coordinate (the first rows and columns of a
    half-pixel upscale differ from ONNX there)."""
    out = RS_X[:2] + size
    build = lambda b: b.op("Resize", ["x", "", "", i64(b, out)], mode="cubic",  # noqa: E731
                           coordinate_transformation_mode=coord, cubic_coeff_a=cubic_a)
    path = _model(model_dir, ("cubic", coord, cubic_a, *size), build, {"x": (RS_X, np.float32)}, out)
    x = np.random.default_rng(3).standard_normal(RS_X).astype(np.float32)
    exp, got = _both(path, {"x": x})
    _assert_close(got, exp)


@pytest.mark.parametrize("scale", [1.6, 0.7, 2.5, 1.25])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_by_float_scales_matches_real_mnn(model_dir, scale: float, mode: str) -> None:
    """Scales given as floats: the source coordinate is computed in float32 (8 * float32(1 / 1.6) is
    exactly 5, where float64 gives 4.99999...)."""
    scales = np.array([1, 1, scale, scale], np.float32)
    out = RS_X[:2] + [int(np.floor(n * np.float32(scale))) for n in RS_X[2:]]
    build = lambda b: b.op("Resize", ["x", "", b.init(scales, "s")], mode=mode,  # noqa: E731
                           coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    path = _model(model_dir, ("scaled", mode, scale), build, {"x": (RS_X, np.float32)}, out)
    x = np.random.default_rng(4).standard_normal(RS_X).astype(np.float32)
    exp, got = _both(path, {"x": x})
    _assert_close(got, exp)


@pytest.mark.parametrize("pads", [[0, 0, 1, -1, 0, 0, -2, 2], [0, 0, -1, 2, 0, 0, 1, -2], [0, -1, 0, 0, 0, 0, -2, -1]])
def test_negative_pads_crop(model_dir, pads) -> None:
    """ONNX Pad with negative pads crops. Real MNN agrees on the first case (torch's F.pad(x, (-1, 2, 1, -2)));
    on the others it returns other values or crashes (3.6.1), so ONNX Runtime is the oracle."""
    ort = pytest.importorskip("onnxruntime")
    build = lambda b: b.op("Pad", ["x", i64(b, pads)], mode="constant")  # noqa: E731
    out = [n + pads[i] + pads[i + 4] for i, n in enumerate(RS_X)]
    path = _model(model_dir, ("negpad", *pads), build, {"x": (RS_X, np.float32)}, out)
    x = np.random.default_rng(5).standard_normal(RS_X).astype(np.float32)
    got = _both_mnnjit(path, {"x": x})
    want = ort.InferenceSession(path[:-4] + ".onnx", providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    _assert_close(got, want, 0.0)
    if pads == [0, 0, 1, -1, 0, 0, -2, 2]:
        exp, _ = _both(path, {"x": x})
        _assert_close(got, exp, 0.0)


def test_negative_pads_cropping_everything_raise(model_dir) -> None:
    pads = [0, 0, -3, 0, 0, 0, -3, 0]
    build = lambda b: b.op("Pad", ["x", i64(b, pads)], mode="constant")  # noqa: E731
    path = _model(model_dir, ("negpad", *pads), build, {"x": (RS_X, np.float32)}, [1, 2, 1, 6])
    x = np.zeros(RS_X, np.float32)
    with pytest.raises(ValueError, match="crop more"):
        _both_mnnjit(path, {"x": x})


def test_einsum_diagonal_is_refused_clearly(model_dir) -> None:
    """MNN's converter turns einsum 'ii->i' into a Permute without dims, which real MNN 3.6.1 returns
    unchanged (the whole matrix); mnnjit names the op instead of giving that wrong answer."""
    from mnnjit.models.translate import UnsupportedOpError
    build = lambda b: b.op("Einsum", ["x"], equation="ii->i")  # noqa: E731
    path = _model(model_dir, ("einsum_diag",), build, {"x": ([4, 4], np.float32)}, [4])
    with pytest.raises(UnsupportedOpError, match="Permute.*einsum"):
        _both_mnnjit(path, {"x": np.eye(4, dtype=np.float32)})
