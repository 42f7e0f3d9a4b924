"""Each op of the portable set, lowered by each bridge, matches the op's numpy reference (the
semantics every backend follows), including the attributes the shared models do not exercise."""
from __future__ import annotations

import numpy as np
import pytest

from mnnjit.backends import registry
from mnnjit.backends.base import GraphIR
from mnnjit.backends.npu import options
from mnnjit.backends.npu.portable import portable_claim
from mnnjit.graph import Node, bump_write_counter, const_node
from mnnjit.ops import build as B
from mnnjit.ops.evaluate import evaluate
from mnnjit.ops.nn_pool import resolve_mnn_pool

from npu_helpers import BRIDGES

pytestmark = pytest.mark.skipif(not BRIDGES, reason="needs an NPU SDK")
RNG = np.random.default_rng(3)
F32, I32 = np.float32, np.int32


def _in(shape, lo=-3.0, hi=3.0, dtype=F32):
    if np.dtype(dtype) == np.int32:
        return RNG.integers(-5, 6, shape).astype(np.int32)
    return RNG.uniform(lo, hi, shape).astype(dtype)


def _case(op, arrays, attrs=None, consts=()):
    """(graph, feeds): op on placeholders for ``arrays`` (constants for the indices in ``consts``)."""
    nodes, phs, feeds = [], [], []
    for k, a in enumerate(arrays):
        if k in consts:
            nodes.append(const_node(np.array(a)))
        else:
            p = Node("placeholder", (), {}, a.shape, a.dtype, name=f"x{k}")
            nodes.append(p)
            phs.append(p)
            feeds.append(a)
    out = B.make_node(op, nodes, attrs or {})
    return GraphIR(phs, [out], ["NCHW"]), feeds


def _unary(op, lo=-3.0, hi=3.0, dtype=F32, **attrs):
    return op, _case(op, [_in((2, 3, 5), lo, hi, dtype)], attrs)


def _pool(kind, h, w, k, s, pad_type="CAFFE", pads=(0, 0), ceil=True):
    attrs = dict(resolve_mnn_pool((h, w), k, s, pad_type, pads, ceil_mode=ceil), kind=kind)
    return f"pool2d-{kind}-{pad_type}", _case("pool2d", [_in((1, 3, h, w))], attrs)


def _resize(method, coord, size):
    attrs = {"size": size, "method": method, "coord": coord, "scale": None, "offset": None, "cubic_a": -0.75,
             "exclude_outside": False}
    return f"resize-{method}-{coord}", _case("resize", [_in((1, 2, 6, 7))], attrs)


CASES = dict([
    *[_unary(op) for op in ("neg", "abs", "square", "exp", "sin", "cos", "tanh", "sigmoid", "relu", "relu6",
                            "erf", "floor", "ceil", "sign", "softplus", "gelu", "gelu_tanh", "hard_swish",
                            "silu", "atan", "sinh", "cosh", "asinh", "tan", "copy")],
    *[_unary(op, 0.1, 3.0) for op in ("sqrt", "rsqrt", "log", "reciprocal")],
    *[_unary(op, -0.9, 0.9) for op in ("asin", "acos", "atanh")],
    ("elu", _case("elu", [_in((4, 5))], {"alpha": 0.7})),
    ("leaky_relu", _case("leaky_relu", [_in((4, 5))], {"alpha": 0.1})),
    *[(f"{op}-int", _unary(op, dtype=I32)[1]) for op in ("neg", "abs", "square", "relu", "relu6", "sign")],
    *[(op, _case(op, [_in((2, 3, 4)), _in((3, 1), 0.5, 2.0)])) for op in
      ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "squared_difference")],
    *[(f"{op}-int", _case(op, [_in((2, 3, 4), dtype=I32), _in((3, 1), dtype=I32)])) for op in
      ("add", "sub", "mul", "maximum", "minimum")],
    *[(op, _case(op, [np.round(_in((3, 4))), np.round(_in((4,)))])) for op in
      ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")],
    *[(op, _case(op, [_in((3, 4), dtype=I32) % 2, _in((4,), dtype=I32) % 2])) for op in
      ("logical_and", "logical_or", "logical_xor")],
    ("logical_not", _case("logical_not", [_in((3, 4), dtype=I32) % 2])),
    ("cast-f2i", _case("cast", [_in((3, 4))], {"dtype": "int32"})),
    ("cast-i2f", _case("cast", [_in((3, 4), dtype=I32)], {"dtype": "float32"})),
    ("clip", _case("clip", [_in((3, 4))], {"lo": -0.5, "hi": 1.25})),
    ("select", _case("select", [_in((3, 4), dtype=I32) % 2, _in((3, 4)), _in((4,))])),
    ("reshape", _case("reshape", [_in((2, 3, 4))], {"shape": (4, 6)})),
    ("transpose", _case("transpose", [_in((2, 3, 4))], {"perm": (2, 0, 1)})),
    ("broadcast_to", _case("broadcast_to", [_in((3, 1))], {"shape": (2, 3, 4)})),
    ("slice", _case("slice", [_in((5, 6, 7))], {"begin": (4, 1, 0), "end": (-1, 6, 7), "step": (-2, 2, 3)})),
    ("convert", _case("convert", [_in((1, 3, 4, 5))], {"src": "NCHW", "dst": "NHWC"})),
    ("concat", _case("concat", [_in((2, 3)), _in((2, 4)), _in((2, 1))], {"axis": 1})),
    ("take", _case("take", [_in((4, 5, 6)), np.array([[3, -1], [0, 2]], np.int32)], {"axis": 1}, consts=(1,))),
    *[(f"pad-{m}", _case("pad", [_in((2, 5, 6))], {"pads": ((0, 1), (2, 1), (3, 0)), "mode": m, "value": 0.5}))
      for m in ("constant", "reflect", "edge")],
    ("softmax", _case("softmax", [_in((2, 3, 5))], {"axis": 1})),
    ("log_softmax", _case("log_softmax", [_in((2, 3, 5))], {"axis": 2})),
    *[(f"{op}-{kd}", _case(op, [_in((2, 3, 4))], {"axes": (0, 2), "keepdims": kd})) for op in
      ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod") for kd in (False, True)],
    ("reduce_sum-int", _case("reduce_sum", [_in((2, 3, 4), dtype=I32)], {"axes": (1,), "keepdims": False})),
    ("matmul", _case("matmul", [_in((2, 3, 4)), _in((4, 5))])),
    ("matmul_ex", _case("matmul_ex", [_in((3, 4)), _in((5, 4)), _in((5,))],
                        {"transpose_a": False, "transpose_b": True, "act": "relu6"}, consts=(1, 2))),
    ("matmul-1d", _case("matmul_ex", [_in((4,)), _in((4, 6))], {"act": ""}, consts=(1,))),
    ("conv2d", _case("conv2d", [_in((1, 4, 9, 8)), _in((6, 2, 3, 3)), _in((6,))],
                     {"stride": (2, 1), "dilation": (1, 2), "pads": (1, 0, 2, 1), "group": 2, "act": "relu"},
                     consts=(1, 2))),
    ("conv2d-depthwise", _case("conv2d", [_in((1, 4, 7, 7)), _in((4, 1, 3, 3))],
                               {"stride": (1, 1), "dilation": (1, 1), "pads": (1, 1, 1, 1), "group": 4, "act": ""},
                               consts=(1,))),
    _pool("max", 7, 9, (3, 3), (2, 2), pads=(1, 1)),
    _pool("avg", 7, 9, (3, 3), (2, 2), pads=(1, 1)),
    _pool("avg", 7, 9, (3, 2), (2, 2), "SAME"),
    _pool("max", 8, 8, (8, 8), (1, 1)),
    _resize("bilinear", "half_pixel", (12, 5)),
    _resize("nearest", "asymmetric", (9, 14)),
    _resize("cubic", "align_corners", (11, 4)),
    ("prelu", _case("prelu", [_in((1, 3, 4, 4)), np.array([0.1, -0.2, 0.3], F32)], consts=(1,))),
])


def _reference(graph, feeds):
    for p, a in zip(graph.placeholders, feeds):
        p.value = a
    bump_write_counter()
    evaluate(list(graph.outputs))
    return graph.outputs[0].value


@pytest.mark.parametrize("bridge", BRIDGES)
def test_every_portable_op_matches_its_reference(bridge: str) -> None:
    backend = registry.get("npu")
    bad = []
    with options.using(bridge=bridge):
        for name, (graph, feeds) in CASES.items():
            out = graph.outputs[0]
            assert portable_claim(out) is None, (name, portable_claim(out))
            exp = _reference(graph, feeds)
            compiled = backend.lower_graph(graph)
            assert compiled is not None, name
            got = compiled.run(feeds)[0]
            if got.dtype != exp.dtype or got.shape != exp.shape:
                bad.append((name, got.dtype, got.shape, exp.dtype, exp.shape))
            elif not np.allclose(got, exp, rtol=1e-5, atol=1e-5 * max(1.0, float(np.nanmax(np.abs(exp)))),
                                 equal_nan=True):  # (pow of a negative base: NaN on both sides)
                bad.append((name, float(np.abs(got.astype(np.float64) - exp).max())))
    assert not bad, bad


def test_refused_ops_say_why() -> None:
    x = Node("placeholder", (), {}, (2, 3), np.dtype(I32), name="x")
    assert "int32" in portable_claim(B.make_node("div", (x, x)))
    assert "not in the delegate's op set" in portable_claim(B.make_node("cumsum", (x,), {"axis": 0, "exclusive": False,
                                                                                          "reverse": False}))
    f = Node("placeholder", (), {}, (2, 3), np.dtype(np.float64), name="f")
    assert "float64" in portable_claim(B.make_node("exp", (f,)))
