"""Property tests: random small CNN / elementwise / shape graphs built with the onnx helper API,
converted by real MNN's converter, run by mnnjit and by real MNN (the oracle) on random inputs."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import mnnjit as MNN
from mnnjit_models_fixtures import OracleCrashed, _Builder, convert, real_mnn_forward_isolated

pytest.importorskip("onnx")
pytest.importorskip("MNN")


@st.composite
def cnn_specs(draw):
    c = draw(st.sampled_from([1, 3, 4, 8]))
    h = draw(st.integers(5, 17))
    w = draw(st.integers(5, 17))
    layers = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["conv", "dwconv", "maxpool", "avgpool", "act", "resize"]))
        k = draw(st.integers(1, 3))
        s = draw(st.integers(1, 2))
        p = draw(st.integers(0, k // 2 + (1 if kind == "conv" else 0)))
        layers.append({"kind": kind, "k": k, "s": s, "p": p, "o": draw(st.sampled_from([2, 4, 6])),
                       "d": draw(st.sampled_from([1, 1, 2])), "ceil": draw(st.booleans()),
                       "incl": draw(st.booleans()), "act": draw(st.sampled_from(["Relu", "Sigmoid", "Tanh", "clip"]))})
    return c, h, w, layers, draw(st.integers(0, 2**16))


def _build(path: str, c: int, h: int, w: int, layers: list, seed: int) -> None:
    b = _Builder(seed)
    x, ch, hh, ww = "x", c, h, w
    for L in layers:
        k, s, p = L["k"], L["s"], L["p"]
        if L["kind"] in ("conv", "dwconv"):
            d = L["d"] if (hh + 2 * p - (k - 1) * L["d"] - 1) >= 0 and (ww + 2 * p - (k - 1) * L["d"] - 1) >= 0 else 1
            if (hh + 2 * p - (k - 1) * d - 1) < 0 or (ww + 2 * p - (k - 1) * d - 1) < 0:
                continue
            grp, o = (ch, ch) if L["kind"] == "dwconv" else (1, L["o"])
            x = b.op("Conv", [x, b.weight((o, ch // grp, k, k)), b.init(b.rng.standard_normal(o).astype(np.float32), "b")],
                     kernel_shape=[k, k], strides=[s, s], pads=[p, p, p, p], dilations=[d, d], group=grp)
            hh = (hh + 2 * p - (k - 1) * d - 1) // s + 1
            ww = (ww + 2 * p - (k - 1) * d - 1) // s + 1
            ch = o
        elif L["kind"] in ("maxpool", "avgpool"):
            k = max(k, 2)
            p = min(p, k // 2)
            if hh + 2 * p < k or ww + 2 * p < k:
                continue
            attrs = dict(kernel_shape=[k, k], strides=[s, s], pads=[p, p, p, p], ceil_mode=int(L["ceil"]))
            if L["kind"] == "avgpool":
                attrs["count_include_pad"] = int(L["incl"])
            x = b.op("MaxPool" if L["kind"] == "maxpool" else "AveragePool", [x], **attrs)
            f = (lambda n: -(-(n + 2 * p - k) // s) + 1) if L["ceil"] else (lambda n: (n + 2 * p - k) // s + 1)
            nh, nw = f(hh), f(ww)
            if L["ceil"]:  # the last window must start inside the input or the left padding
                nh -= (nh - 1) * s >= hh + p
                nw -= (nw - 1) * s >= ww + p
            hh, ww = nh, nw
        elif L["kind"] == "resize":
            sc = b.init(np.array([1, 1, 2, 2], np.float32), "sc")
            mode = "linear" if L["incl"] else "nearest"
            x = b.op("Resize", [x, "", sc], mode=mode, coordinate_transformation_mode="half_pixel" if L["ceil"] else "asymmetric")
            hh, ww = hh * 2, ww * 2
        else:
            if L["act"] == "clip":
                x = b.op("Clip", [x, b.init(np.array(-0.5, np.float32), "lo"), b.init(np.array(0.7, np.float32), "hi")])
            else:
                x = b.op(L["act"], [x])
    y = b.op("Add", [x, b.init(np.array(0.25, np.float32), "c")])
    b.nodes[-1].output[0] = "y"
    b.save(path, [b.io("x", [1, c, h, w])], [b.io("y", [1, ch, hh, ww])])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cnn_specs())
def test_random_cnn_matches_real_mnn(spec) -> None:
    c, h, w, layers, seed = spec
    with tempfile.TemporaryDirectory() as d:
        onnx_path, mnn_path = os.path.join(d, "m.onnx"), os.path.join(d, "m.mnn")
        _build(onnx_path, c, h, w, layers, seed)
        convert(onnx_path, mnn_path)
        x = np.random.default_rng(seed).standard_normal((1, c, h, w)).astype(np.float32)
        try:
            (exp,) = real_mnn_forward_isolated(mnn_path, {"x": x}, ["y"])
        except OracleCrashed:  # real MNN itself crashed on this graph: nothing to compare
            assume(False)
        got = MNN.nn.load_module_from_file(mnn_path, ["x"], ["y"]).forward([MNN.expr.const(x, [1, c, h, w])])[0].read()
        assert got.shape == exp.shape, (layers, got.shape, exp.shape)
        assert float(np.abs(got - exp).max()) <= 1e-3 * max(1.0, float(np.abs(exp).max())), layers
        from mnnjit import settings as config  # the same model through the compiled kernels
        old = config.set_threshold(0)
        try:
            fast = MNN.nn.load_module_from_file(mnn_path, ["x"], ["y"]).forward([MNN.expr.const(x, [1, c, h, w])])[0]
            fast = fast.read()
        finally:
            config.set_threshold(old)
        assert float(np.abs(fast - exp).max()) <= 1e-3 * max(1.0, float(np.abs(exp).max())), ("compiled", layers)


_CHAIN_OPS = ["transpose", "reshape", "slice", "gather", "concat", "reduce", "softmax", "unsqueeze", "expand",
              "unary", "binary", "matmul", "layernorm", "where", "cast", "flatten", "tile", "split"]


def _apply(b, name: str, t: str, shape: list, draw) -> tuple[str, list]:
    """Append ONNX op ``name`` to the graph on tensor ``t`` of ``shape``; returns the new (tensor, shape)."""
    nd = len(shape)
    i64 = lambda v: b.init(np.asarray(v, np.int64), "i")  # noqa: E731
    f32 = lambda v: b.init(np.asarray(v, np.float32), "f")  # noqa: E731
    probe = np.zeros(shape, np.float32)
    if name == "transpose":
        perm = draw(st.permutations(range(nd)))
        return b.op("Transpose", [t], perm=list(perm)), [shape[p] for p in perm]
    if name == "reshape" and nd >= 2:
        new = shape[:-2] + [shape[-2] * shape[-1]]
        spec = [0] * (nd - 2) + [-1] if draw(st.booleans()) else new
        return b.op("Reshape", [t, i64(spec)]), new
    if name == "slice":
        ax = draw(st.integers(0, nd - 1))
        n = shape[ax]
        step = draw(st.sampled_from([1, 1, 2, -1, -2]))
        start = draw(st.integers(-n, n))  # real MNN mishandles starts below -n (ONNX clamps them to 0)
        end = draw(st.sampled_from([draw(st.integers(-n - 1, n + 1)), 2**31 - 1, -2**31]))
        out = probe[(slice(None),) * ax + (slice(start, end, step),)].shape
        if 0 in out:
            return t, shape
        return b.op("Slice", [t, i64([start]), i64([end]), i64([ax]), i64([step])]), list(out)
    if name == "gather":
        ax = draw(st.integers(0, nd - 1))
        n = shape[ax]
        idx = draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=4))
        return b.op("Gather", [t, i64(idx)], axis=ax), shape[:ax] + [len(idx)] + shape[ax + 1:]
    if name == "concat":
        ax = draw(st.integers(-nd, nd - 1))
        out = list(shape)
        out[ax] *= 2
        return b.op("Concat", [t, t], axis=ax), out
    if name == "reduce":
        axes = sorted(set(draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd))))
        keep = draw(st.booleans())
        kind = draw(st.sampled_from(["ReduceMean", "ReduceMax", "ReduceSum", "ReduceMin", "ReduceProd"]))
        if kind == "ReduceSum":
            y = b.op(kind, [t, i64(axes)], keepdims=int(keep))
        else:
            y = b.op(kind, [t], axes=axes, keepdims=int(keep))
        out = [1 if i in axes else d for i, d in enumerate(shape)] if keep else [d for i, d in enumerate(shape) if i not in axes]
        if not out:
            return b.op("Reshape", [y, i64([1])]), [1]
        return y, out
    if name == "softmax":
        return b.op("Softmax", [t], axis=draw(st.integers(-nd, nd - 1))), shape
    if name == "unsqueeze" and nd < 5:
        ax = draw(st.integers(0, nd))
        y = b.op("Unsqueeze", [t, i64([ax])])
        if draw(st.booleans()):
            return b.op("Squeeze", [y, i64([ax])]), shape
        return y, shape[:ax] + [1] + shape[ax:]
    if name == "expand" and 1 in shape:
        out = [d if d != 1 else draw(st.integers(1, 3)) for d in shape]
        return b.op("Expand", [t, i64(out)]), out
    if name == "unary":
        kind = draw(st.sampled_from(["Abs", "Neg", "Sigmoid", "Tanh", "Floor", "Ceil", "Erf", "Exp", "Sqrt", "Relu",
                                     "Round", "Sign", "Sin", "Cos", "Reciprocal", "Log"]))
        if kind in ("Sqrt", "Log", "Reciprocal"):
            t = b.op("Add", [b.op("Abs", [t]), f32(0.5)])
        if kind == "Exp":
            t = b.op("Mul", [t, f32(0.1)])
        return b.op(kind, [t]), shape
    if name == "binary":
        kind = draw(st.sampled_from(["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"]))
        cshape = [d if draw(st.booleans()) else 1 for d in shape][draw(st.integers(0, nd - 1)):]
        c = (b.rng.standard_normal(cshape) if kind != "Pow" else b.rng.integers(1, 3, cshape)).astype(np.float32)
        if kind == "Div":
            c = np.where(np.abs(c) < 0.3, 1.0, c).astype(np.float32)
        if kind == "Pow":
            t = b.op("Add", [b.op("Abs", [t]), f32(0.1)])
        args = [t, f32(c)] if draw(st.booleans()) or kind == "Pow" else [f32(c), t]
        if kind == "Div" and args[0] != t:
            args = [t, f32(c)]
        return b.op(kind, args), shape
    if name == "matmul":
        k = draw(st.integers(1, 6))
        return b.op("MatMul", [t, f32(b.rng.standard_normal((shape[-1], k)) * 0.5)]), shape[:-1] + [k]
    if name == "layernorm":
        return b.op("LayerNormalization", [t, f32(1 + 0.1 * b.rng.standard_normal(shape[-1])),
                                           f32(0.1 * b.rng.standard_normal(shape[-1]))], axis=-1, epsilon=1e-5), shape
    if name == "where":
        return b.op("Where", [b.op("Greater", [t, f32(0.0)]), t, f32(0.5)]), shape
    if name == "cast":
        y = b.op("Cast", [b.op("Mul", [t, f32(3.0)])], to=6)
        return b.op("Cast", [y], to=1), shape
    if name == "flatten":
        ax = draw(st.integers(0, nd))
        lead = int(np.prod(shape[:ax])) if ax else 1
        return b.op("Flatten", [t], axis=ax), [lead, int(np.prod(shape)) // lead]
    if name == "tile" and int(np.prod(shape)) < 200:
        reps = [draw(st.integers(1, 2)) for _ in shape]
        return b.op("Tile", [t, i64(reps)]), [d * r for d, r in zip(shape, reps)]
    if name == "split":
        ax = draw(st.integers(0, nd - 1))
        if shape[ax] % 2:
            return t, shape
        a, c = b.op("Split", [t], n_out=2, axis=ax, num_outputs=2) if False else b.op("Split", [t, i64([shape[ax] // 2] * 2)], n_out=2, axis=ax)
        out = list(shape)
        out[ax] //= 2
        return b.op("Sub", [a, c]), out
    return t, shape


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_op_chain_matches_real_mnn(data) -> None:
    draw = data.draw
    shape = draw(st.lists(st.integers(1, 5), min_size=2, max_size=4))
    seed = draw(st.integers(0, 2**16))
    b = _Builder(seed)
    t, cur = "x", list(shape)
    for _ in range(draw(st.integers(1, 5))):
        t, cur = _apply(b, draw(st.sampled_from(_CHAIN_OPS)), t, cur, draw)
    y = b.op("Add", [t, b.init(np.array(0.0, np.float32), "z")])
    b.nodes[-1].output[0] = "y"
    with tempfile.TemporaryDirectory() as d:
        onnx_path, mnn_path = os.path.join(d, "m.onnx"), os.path.join(d, "m.mnn")
        b.save(onnx_path, [b.io("x", shape)], [b.io("y", cur)])
        convert(onnx_path, mnn_path)
        x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
        try:
            (exp,) = real_mnn_forward_isolated(mnn_path, {"x": x}, ["y"])
        except Exception:  # the oracle itself fails (real MNN's shape computation): nothing to compare
            assume(False)
        got = MNN.nn.load_module_from_file(mnn_path, ["x"], ["y"]).forward([MNN.expr.const(x, shape)])[0].read()
        nodes = [n.op_type for n in b.nodes]
        assert got.shape == exp.shape, (nodes, got.shape, exp.shape)
        assert float(np.abs(got - exp).max()) <= 1e-3 * max(1.0, float(np.abs(exp).max())), nodes
