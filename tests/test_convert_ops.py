"""ONNX ops through ``mnnjit.converter``: each small graph (built with ``onnx.helper``) is converted to
.mnn and run in real MNN and in mnnjit; both must give ONNX Runtime's outputs within 1e-4 relative."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from convert_helpers import check_three_way, init, model, vi

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("MNN")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as h  # noqa: E402

F32 = np.float32
I64 = np.int64


def _feed(spec: tuple, rng: np.random.Generator) -> np.ndarray:
    name, shape, kind = spec
    if kind == "f":
        return rng.standard_normal(shape).astype(F32)
    if kind == "pos":
        return (rng.random(shape) * 2 + 0.1).astype(F32)
    if kind == "unit":
        return (rng.random(shape) * 1.8 - 0.9).astype(F32)
    if kind == "i64":
        return rng.integers(-5, 6, shape).astype(I64)
    if kind == "idx":
        return rng.integers(0, 3, shape).astype(I64)
    if kind == "bool":
        return rng.random(shape) > 0.5
    raise ValueError(kind)


_ELEM = {"f": None, "pos": None, "unit": None, "i64": TP.INT64, "idx": TP.INT64, "bool": TP.BOOL}


def case(nodes, ins, outs, inits=None, opset=17):
    """A test case: nodes, inputs (name, shape, kind), output names, initializers (name -> array)."""
    return nodes, ins, outs, inits or {}, opset


def N(op, ins, outs, **attrs):  # noqa: N802 - a node
    return h.make_node(op, ins, outs, **attrs)


_rng = np.random.default_rng(7)


def W(*shape, scale=1.0):  # noqa: N802 - a float weight
    return (_rng.standard_normal(shape) * scale).astype(F32)


UNARY = ["Abs", "Neg", "Floor", "Ceil", "Exp", "Sin", "Cos", "Atan", "Sinh", "Cosh", "Asinh", "Erf", "Sigmoid",
         "Tanh", "HardSwish", "Relu", "Softplus", "Softsign", "Sign", "Identity"]

CASES = {
    "unary": case([N(op, ["x"], [f"y{k}"]) for k, op in enumerate(UNARY)], [("x", [2, 3, 5], "f")],
                  [f"y{k}" for k in range(len(UNARY))]),
    "unary_domain": case([N("Sqrt", ["p"], ["a"]), N("Log", ["p"], ["b"]), N("Reciprocal", ["p"], ["c"]),
                          N("Asin", ["u"], ["d"]), N("Acos", ["u"], ["e"]), N("Atanh", ["u"], ["f"]),
                          N("Tan", ["u"], ["g"]), N("Add", ["p", "one"], ["q"]), N("Acosh", ["q"], ["i"])],
                         [("p", [3, 4], "pos"), ("u", [3, 4], "unit")], list("abcdefgi"), {"one": np.ones(1, F32)}),
    "activations": case([N("LeakyRelu", ["x"], ["a"], alpha=0.2), N("Elu", ["x"], ["b"], alpha=0.7),
                         N("Selu", ["x"], ["c"]), N("HardSigmoid", ["x"], ["d"], alpha=0.3, beta=0.4),
                         N("PRelu", ["x", "slope"], ["e"]), N("Clip", ["x", "lo", "hi"], ["f"]),
                         N("Clip", ["x", "lo"], ["g"]), N("Clip", ["x", "", "hi"], ["i"]),
                         N("ThresholdedRelu", ["x"], ["j"], alpha=0.3)],
                        [("x", [1, 3, 4, 4], "f")], list("abcdefgij"),
                        {"slope": W(3, 1, 1), "lo": np.array(-0.5, F32), "hi": np.array(0.7, F32)}),
    "gelu_mish": case([N("Gelu", ["x"], ["a"]), N("Gelu", ["x"], ["b"], approximate="tanh"), N("Mish", ["x"], ["c"])],
                      [("x", [2, 8], "f")], list("abc"), opset=20),
    "binary": case([N("Add", ["x", "y"], ["a"]), N("Sub", ["x", "y"], ["b"]), N("Mul", ["x", "y"], ["c"]),
                    N("Div", ["x", "p"], ["d"]), N("Max", ["x", "y", "c"], ["e"]), N("Min", ["x", "y"], ["f"]),
                    N("Sum", ["x", "y", "c"], ["g"]), N("Mean", ["x", "y"], ["i"]), N("Pow", ["x", "two"], ["j"]),
                    N("Pow", ["x", "three"], ["k"]), N("Pow", ["p", "y"], ["l"]), N("Pow", ["p", "half"], ["m"])],
                   [("x", [2, 3, 4], "f"), ("y", [3, 1], "f"), ("p", [2, 3, 4], "pos")], list("abcdefgijklm"),
                   {"two": np.array(2.0, F32), "three": np.array(3.0, F32), "half": np.array(0.5, F32)}),
    "compare_logic": case([N("Round", ["x"], ["r"]), N("Equal", ["x", "r"], ["a"]), N("Greater", ["x", "y"], ["b"]), N("Less", ["x", "y"], ["c"]),
                           N("LessOrEqual", ["x", "r"], ["d"]), N("GreaterOrEqual", ["x", "r"], ["e"]),
                           N("And", ["b", "c"], ["f"]), N("Or", ["b", "d"], ["g"]), N("Xor", ["b", "e"], ["i"]),
                           N("Not", ["b"], ["j"]), N("Where", ["c", "x", "y"], ["k"])],
                          [("x", [3, 4], "f"), ("y", [3, 4], "f")], list("abcdefgijk")),
    "int_math": case([N("Add", ["i", "j"], ["a"]), N("Mul", ["i", "j"], ["b"]), N("Mod", ["i", "k"], ["c"]),
                      N("Mod", ["i", "k"], ["d"], fmod=1), N("Div", ["i", "k"], ["e"]), N("Neg", ["i"], ["f"]),
                      N("Abs", ["i"], ["g"]), N("Max", ["i", "j"], ["m"])],
                     [("i", [3, 4], "i64"), ("j", [3, 4], "i64")], list("abcdefgm"),
                     {"k": np.array([3, -3, 2, 5], I64)}),
    "bitwise_trilu": case([N("BitwiseAnd", ["i", "j"], ["a"]), N("BitwiseOr", ["i", "j"], ["b"]),
                           N("BitwiseXor", ["i", "j"], ["c"]), N("Trilu", ["x"], ["d"]),
                           N("Trilu", ["x", "km"], ["e"], upper=0)],
                          [("i", [3, 4], "i64"), ("j", [3, 4], "i64"), ("x", [2, 3, 4], "f")], list("abcde"),
                          {"km": np.array(-1, I64)}, opset=18),
    "float_mod_isnan": case([N("Mod", ["x", "p"], ["a"], fmod=1), N("IsNaN", ["x"], ["b"]), N("IsInf", ["x"], ["c"])],
                            [("x", [3, 4], "f"), ("p", [3, 4], "pos")], list("abc")),
    "cast": case([N("Cast", ["x"], ["a"], to=TP.INT32), N("Cast", ["x"], ["b"], to=TP.INT64),
                  N("Cast", ["i"], ["c"], to=TP.FLOAT), N("Cast", ["x"], ["d"], to=TP.BOOL),
                  N("Mul", ["x", "ten"], ["x10"]), N("Cast", ["x10"], ["e"], to=TP.INT32),
                  N("CastLike", ["i", "x"], ["f"])],
                 [("x", [3, 4], "f"), ("i", [3, 4], "i64")], list("abcdef"), {"ten": np.array(10.0, F32)}),
    "reduce13": case([N("ReduceSum", ["x", "ax"], ["a"], keepdims=0), N("ReduceMean", ["x"], ["b"], axes=[1]),
                      N("ReduceMax", ["x"], ["c"], axes=[-1], keepdims=0), N("ReduceMin", ["x"], ["d"]),
                      N("ReduceProd", ["x"], ["e"], axes=[2]), N("ReduceL1", ["x"], ["f"], axes=[1]),
                      N("ReduceL2", ["x"], ["g"], axes=[1, 2]), N("ReduceSumSquare", ["x"], ["i"], axes=[0]),
                      N("ReduceLogSumExp", ["x"], ["j"], axes=[1], keepdims=0),
                      N("ReduceLogSum", ["p"], ["k"], axes=[2])],
                     [("x", [2, 3, 4], "f"), ("p", [2, 3, 4], "pos")], list("abcdefgijk"), {"ax": np.array([0, -1], I64)},
                     opset=13),
    "reduce18": case([N("ReduceMean", ["x", "ax"], ["a"]), N("ReduceMax", ["x", "ax"], ["b"], keepdims=0)],
                     [("x", [2, 3, 4], "f")], ["a", "b"], {"ax": np.array([1], I64)}, opset=18),
    "arg_topk_cumsum": case([N("ArgMax", ["x"], ["a"], axis=1), N("ArgMin", ["x"], ["b"], axis=-1, keepdims=0),
                             N("TopK", ["x", "k"], ["c", "ci"], axis=-1), N("TopK", ["x", "k"], ["d", "di"], axis=1,
                                                                           largest=0),
                             N("CumSum", ["x", "ax"], ["e"]), N("CumSum", ["x", "ax"], ["f"], exclusive=1, reverse=1)],
                            [("x", [2, 5, 6], "f")], ["a", "b", "c", "ci", "d", "di", "e", "f"],
                            {"k": np.array([3], I64), "ax": np.array(1, np.int32)}),
    "softmax": case([N("Softmax", ["x"], ["a"], axis=1), N("LogSoftmax", ["x"], ["b"]), N("Softmax", ["x"], ["c"])],
                    [("x", [2, 3, 4], "f")], list("abc")),
    "softmax_opset11": case([N("Softmax", ["x"], ["a"], axis=1), N("LogSoftmax", ["x"], ["b"], axis=2)],
                            [("x", [2, 3, 4], "f")], list("ab"), opset=11),
    "reshape_family": case([N("Reshape", ["x", "s1"], ["a"]), N("Flatten", ["x"], ["b"], axis=2),
                            N("Flatten", ["x"], ["c"], axis=0), N("Squeeze", ["u", "ax0"], ["d"]),
                            N("Unsqueeze", ["x", "axn"], ["e"]), N("Transpose", ["x"], ["f"], perm=[2, 0, 1]),
                            N("Transpose", ["x"], ["g"]), N("Squeeze", ["u"], ["i"])],
                           [("x", [2, 3, 4], "f"), ("u", [1, 3, 1, 4], "f")], list("abcdefgi"),
                           {"s1": np.array([0, -1], I64), "ax0": np.array([0, -2], I64), "axn": np.array([-1, 1], I64)},
                           opset=13),
    "concat_split": case([N("Concat", ["x", "y"], ["a"], axis=-1), N("Split", ["a", "sp"], ["b", "c", "d"], axis=2),
                          N("Split", ["x"], ["e", "f"], axis=1)],
                         [("x", [2, 4, 3], "f"), ("y", [2, 4, 5], "f")], list("bcdef"), {"sp": np.array([2, 1, 5], I64)}),
    "slice": case([N("Slice", ["x", "st", "en", "ax", "sp"], ["a"]),
                   N("Slice", ["x", "st2", "en2"], ["b"]),
                   N("Slice", ["x", "st3", "en3", "ax3", "sp3"], ["c"])],
                  [("x", [4, 6, 8], "f")], list("abc"),
                  {"st": np.array([1, -1], I64), "en": np.array([3, -9], I64), "ax": np.array([0, 2], I64),
                   "sp": np.array([1, -2], I64), "st2": np.array([0, 1, 2], I64),
                   "en2": np.array([2**62, 5, -1], I64), "st3": np.array([-1], I64),
                   "en3": np.array([-(2**62)], I64), "ax3": np.array([1], I64), "sp3": np.array([-1], I64)}),
    "gather": case([N("Gather", ["x", "i"], ["a"], axis=1), N("Gather", ["x", "s"], ["b"], axis=0),
                    N("Gather", ["x", "j"], ["c"], axis=-1), N("GatherElements", ["x", "ge"], ["d"], axis=2),
                    N("GatherND", ["x", "gn"], ["e"])],
                   [("x", [3, 4, 5], "f"), ("j", [2, 2], "idx")], list("abcde"),
                   {"i": np.array([[0, -1], [2, 3]], I64), "s": np.array(-1, I64),
                    "ge": np.random.default_rng(1).integers(-5, 5, (3, 4, 2)).astype(I64),
                    "gn": np.array([[1, 2], [0, -1]], I64)}),
    "scatter": case([N("ScatterND", ["x", "i", "u"], ["a"]), N("ScatterElements", ["x", "ei", "eu"], ["b"], axis=1)],
                    [("x", [3, 4], "f")], list("ab"),
                    {"i": np.array([[0, 1], [2, 3]], I64), "u": np.array([5.0, -2.0], F32),
                     "ei": np.array([[0, 3], [1, 2], [2, 0]], I64), "eu": W(3, 2)}),
    "expand_tile": case([N("Expand", ["x", "s"], ["a"]), N("Tile", ["x", "r"], ["b"])], [("x", [3, 1], "f")],
                        list("ab"), {"s": np.array([2, 3, 4], I64), "r": np.array([2, 3], I64)}),
    "pad": case([N("Pad", ["x", "p", "v"], ["a"], mode="constant"), N("Pad", ["x", "p"], ["b"], mode="reflect"),
                 N("Pad", ["x", "p"], ["c"], mode="edge")], [("x", [1, 2, 5, 6], "f")], list("abc"),
                {"p": np.array([0, 0, 1, 2, 0, 1, 2, 1], I64), "v": np.array(1.5, F32)}),
    "depth_space": case([N("DepthToSpace", ["x"], ["a"], blocksize=2, mode="DCR"),
                         N("DepthToSpace", ["x"], ["b"], blocksize=2, mode="CRD"),
                         N("SpaceToDepth", ["x"], ["c"], blocksize=2)], [("x", [1, 8, 4, 6], "f")], list("abc")),
    "onehot_nonzero": case([N("OneHot", ["i", "d", "v"], ["a"], axis=-1), N("NonZero", ["m"], ["b"])],
                           [("i", [2, 3], "idx"), ("m", [3, 4], "idx")], list("ab"),
                           {"d": np.array(4, I64), "v": np.array([-1.0, 2.0], F32)}),
    "dynamic_shape_ops": case([N("Shape", ["x"], ["s"]), N("ConstantOfShape", ["s"], ["c"],
                                                           value=h.make_tensor("v", TP.FLOAT, [1], [2.0])),
                               N("Add", ["c", "x"], ["a"]), N("Size", ["x"], ["n"]), N("Cast", ["n"], ["nf"], to=TP.FLOAT),
                               N("Range", ["zero", "nf", "step"], ["b"]), N("Shape", ["x"], ["s1"], start=1),
                               N("Gather", ["s", "zero_i"], ["d0"]), N("Unsqueeze", ["d0", "ax0"], ["d0u"]),
                               N("Concat", ["d0u", "m1"], ["shp"], axis=0), N("Reshape", ["x", "shp"], ["r"])],
                              [("x", ["N", 3], "f")], ["a", "b", "s1", "r"],
                              {"zero": np.array(0.0, F32), "step": np.array(1.5, F32), "zero_i": np.array(0, I64),
                               "ax0": np.array([0], I64), "m1": np.array([-1], I64)}),
}

# ------------------------------------------------------------------------------------ NN ops
CASES.update({
    "conv": case([N("Conv", ["x", "w", "bias"], ["a"], pads=[1, 1, 1, 1]),
                  N("Conv", ["x", "wd"], ["b"], group=4, strides=[2, 2], pads=[0, 1, 2, 1]),
                  N("Conv", ["x", "wg", "bg"], ["c"], group=2, dilations=[2, 1], pads=[1, 0, 1, 1]),
                  N("Conv", ["x", "w"], ["d"], auto_pad="SAME_UPPER", strides=[2, 2]),
                  N("Relu", ["a"], ["e"])],
                 [("x", [1, 4, 7, 6], "f")], list("bcde"),
                 {"w": W(5, 4, 3, 3), "bias": W(5), "wd": W(4, 1, 3, 3), "wg": W(6, 2, 3, 2), "bg": W(6)}),
    "conv1d_pool1d": case([N("Conv", ["x", "w", "bias"], ["a"], pads=[1, 2], strides=[2]),
                           N("MaxPool", ["x"], ["b"], kernel_shape=[3], strides=[2], pads=[1, 1]),
                           N("AveragePool", ["x"], ["c"], kernel_shape=[2])],
                          [("x", [2, 3, 9], "f")], list("abc"), {"w": W(4, 3, 3), "bias": W(4)}),
    "conv_transpose": case([N("ConvTranspose", ["x", "w", "bias"], ["a"], strides=[2, 2], pads=[1, 1, 1, 1],
                              output_padding=[1, 1]),
                            N("ConvTranspose", ["x", "wg"], ["b"], group=2, strides=[2, 1]),
                            N("ConvTranspose", ["x", "wd"], ["c"], group=4, strides=[2, 2], pads=[0, 0, 1, 1])],
                           [("x", [1, 4, 4, 5], "f")], list("abc"),
                           {"w": W(4, 3, 3, 3), "bias": W(3), "wg": W(4, 3, 2, 2), "wd": W(4, 1, 3, 3)}),
    "conv_transpose1d": case([N("ConvTranspose", ["x", "w"], ["a"], strides=[2])],
                             [("x", [1, 3, 5], "f")], ["a"], {"w": W(3, 2, 3)}),
    "pooling": case([N("MaxPool", ["x"], ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                     N("MaxPool", ["x"], ["b"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
                     N("AveragePool", ["x"], ["c"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                     N("AveragePool", ["x"], ["d"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                       count_include_pad=1),
                     N("GlobalAveragePool", ["x"], ["e"]), N("GlobalMaxPool", ["x"], ["f"])],
                    [("x", [1, 3, 7, 7], "f")], list("abcdef")),
    "norms": case([N("BatchNormalization", ["x", "s", "b", "m", "v"], ["a"]),
                   N("InstanceNormalization", ["x", "s", "b"], ["c"], epsilon=1e-3),
                   N("LayerNormalization", ["x", "g", "bb"], ["d"], axis=-1),
                   N("LayerNormalization", ["x", "g2"], ["e"], axis=2),
                   N("BatchNormalization", ["y", "s", "b", "m", "v"], ["f"])],
                  [("x", [2, 3, 4, 5], "f"), ("y", [2, 3], "f")], list("acdef"),
                  {"s": W(3), "b": W(3), "m": W(3), "v": np.abs(W(3)) + 0.5, "g": W(5), "bb": W(5), "g2": W(4, 5)}),
    "conv_bn_relu6": case([N("Conv", ["x", "w", "cb"], ["c"], pads=[1, 1, 1, 1]),
                           N("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
                           N("Clip", ["n", "zero", "six"], ["y"])],
                          [("x", [1, 3, 6, 6], "f")], ["y"],
                          {"w": W(4, 3, 3, 3), "cb": W(4), "s": W(4), "b": W(4), "m": W(4), "v": np.abs(W(4)) + .5,
                           "zero": np.array(0.0, F32), "six": np.array(6.0, F32)}),
    "gemm_matmul": case([N("Gemm", ["a2", "w"], ["a"], transB=1, alpha=0.5),
                         N("Gemm", ["a2", "wt", "c"], ["b"], beta=2.0),
                         N("Gemm", ["at", "wt", "cm"], ["c1"], transA=1),
                         N("Gemm", ["a2", "d"], ["e"]),
                         N("MatMul", ["x3", "m"], ["f"]), N("Add", ["f", "mb"], ["g"]),
                         N("MatMul", ["x3", "y3"], ["i"]), N("MatMul", ["v", "m"], ["j"]),
                         N("MatMul", ["x3", "v8"], ["k"])],
                        [("a2", [3, 8], "f"), ("at", [8, 3], "f"), ("d", [8, 4], "f"), ("x3", [2, 3, 8], "f"),
                         ("y3", [2, 8, 5], "f"), ("v", [8], "f")], ["a", "b", "c1", "e", "g", "i", "j", "k"],
                        {"w": W(6, 8), "wt": W(8, 6), "c": W(6), "cm": W(3, 6), "m": W(8, 5), "mb": W(5),
                         "v8": W(8)}),
    "resize": case([N("Resize", ["x", "", "sc"], ["a"], mode="linear"),
                    N("Resize", ["x", "", "", "sz"], ["b"], mode="nearest", coordinate_transformation_mode="asymmetric",
                      nearest_mode="floor"),
                    N("Resize", ["x", "", "sc2"], ["c"], mode="nearest"),
                    N("Resize", ["x", "", "", "sz"], ["d"], mode="linear", coordinate_transformation_mode="align_corners"),
                    N("Resize", ["x", "", "sc"], ["e"], mode="cubic"),
                    N("Resize", ["x", "", "", "sz"], ["f"], mode="linear",
                      coordinate_transformation_mode="pytorch_half_pixel")],
                   [("x", [1, 2, 5, 6], "f")], list("abcdef"),
                   {"sc": np.array([1, 1, 2, 1.5], F32), "sz": np.array([1, 2, 7, 9], I64),
                    "sc2": np.array([1, 1, 2, 3], F32)}),
    "resize_matrix_modes": case([
        N("Resize", ["x", "", "", "sz"], ["a"], mode="cubic", coordinate_transformation_mode="align_corners"),
        N("Resize", ["x", "", "sc"], ["b"], mode="nearest", nearest_mode="ceil"),
        N("Resize", ["x", "", "sc"], ["c"], mode="nearest", nearest_mode="round_prefer_ceil",
          coordinate_transformation_mode="asymmetric"),
        N("Resize", ["x", "", "", "sz2"], ["d"], mode="cubic", exclude_outside=1, cubic_coeff_a=-0.5),
        N("Resize", ["x", "", "", "sz2"], ["e"], mode="nearest", coordinate_transformation_mode="half_pixel")],
        [("x", [1, 2, 5, 6], "f")], list("abcde"),
        {"sc": np.array([1, 1, 1.5, 2.5], F32), "sz": np.array([1, 2, 9, 4], I64), "sz2": np.array([1, 2, 3, 11], I64)}),
    "upsample_opset9": case([N("Upsample", ["x", "sc"], ["a"], mode="nearest"), N("Upsample", ["x", "sc"], ["b"],
                                                                                 mode="linear")],
                            [("x", [1, 2, 3, 4], "f")], list("ab"), {"sc": np.array([1, 1, 2, 3], F32)}, opset=9),
    "outputs_alias_inputs_and_constants": case([N("Identity", ["x"], ["a"]), N("Dropout", ["x"], ["b"]),
                                                N("Shape", ["x"], ["c"]), N("Constant", [], ["d"],
                                                                            value_float=2.5)],
                                               [("x", [2, 3], "f")], list("abcd")),
    "einsum": case([N("Einsum", ["a", "b"], ["c"], equation="bij,bjk->bik"),
                    N("Einsum", ["q", "k"], ["d"], equation="bhid,bhjd->bhij"),
                    N("Einsum", ["a", "v"], ["e"], equation="bij,j->bi"),
                    N("Einsum", ["a"], ["f"], equation="bij->jb"),
                    N("Einsum", ["q", "w"], ["g"], equation="bhid,hdo->bio")],
                   [("a", [2, 3, 4], "f"), ("b", [2, 4, 5], "f"), ("q", [2, 3, 4, 5], "f"), ("k", [2, 3, 6, 5], "f"),
                    ("v", [4], "f")], list("cdefg"), {"w": W(3, 5, 7)}),
    "lrn": case([N("LRN", ["x"], ["a"], size=3, alpha=1e-2, beta=0.75, bias=2.0)], [("x", [1, 6, 3, 4], "f")], ["a"]),
})


def _build(name: str):
    nodes, ins, outs, inits, opset = CASES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    inputs = [vi(n, s, _ELEM[k]) for n, s, k in ins]
    feeds = {n: _feed((n, [3 if isinstance(d, str) else d for d in s], k), rng) for n, s, k in ins}
    m = model(nodes, inputs, [vi(o, None, 0) for o in outs], [init(k, v) for k, v in inits.items()], opset)
    return m, feeds


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_onnxruntime_in_mnn_and_mnnjit(name, tmp_path) -> None:
    m, feeds = _build(name)
    check_three_way(m, feeds, tmp_path, name)
