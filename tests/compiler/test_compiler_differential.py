"""Differential property tests: compiled kernels vs the numpy reference path on random expression graphs.

Stated accuracy: integer results bit for bit; float results of correctly rounded ops (+ - * /, casts,
comparisons, min/max, select, clip, abs) bit for bit; float reductions within 1e-5 of the sum of
magnitudes (kernels accumulate float32 sums in float64, numpy pairwise in float32); transcendental
ops within 4 ulp.
"""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers_compiler import assert_ulp, reference_and_compiled
from mnnjit.ops import build as B

BIN_ANY = ["add", "sub", "mul", "maximum", "minimum", "equal", "less", "greater_equal", "not_equal"]
BIN_INT = ["bitwise_and", "bitwise_or", "bitwise_xor"]
UNARY_ANY = ["neg", "abs", "square", "relu", "logical_not"]
REDUCE = ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"]


@st.composite
def recipes(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 6)) for _ in range(ndim))
    n_in = draw(st.integers(1, 3))
    inputs = []
    for k in range(n_in):
        sub = shape if k == 0 else tuple(d if draw(st.booleans()) else 1 for d in shape)[draw(st.integers(0, ndim - 1)):]
        dtype = draw(st.sampled_from(["float32", "int32", "uint8"]))
        inputs.append((sub, dtype, draw(st.integers(0, 2 ** 31 - 1))))
    steps = draw(st.lists(st.tuples(st.sampled_from(
        ["bin", "bin", "bin", "int", "unary", "cast", "clip", "select", "div", "transpose", "slice"]),
        st.integers(0, 99), st.integers(0, 99), st.integers(0, 99)), min_size=1, max_size=6))
    reduce = draw(st.one_of(st.none(), st.tuples(st.sampled_from(REDUCE), st.integers(0, 7), st.booleans())))
    return inputs, steps, reduce


def _data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "float32":
        a = rng.uniform(-10, 10, shape).astype(np.float32)
        a[rng.random(shape) < 0.1] = 0
        return a
    if dtype == "uint8":
        return rng.integers(0, 256, shape).astype(np.uint8)
    return rng.integers(-100, 100, shape).astype(np.int32)


def _build(recipe):
    inputs, steps, reduce = recipe
    vals = [B.wrap(B.as_node(_data(*spec))) for spec in inputs]
    for kind, i, j, k in steps:
        x, y, z = vals[i % len(vals)], vals[j % len(vals)], vals[k % len(vals)]
        try:
            if kind == "bin":
                v = B.binary(BIN_ANY[k % len(BIN_ANY)], x, y)
            elif kind == "int":
                if x._node.dtype.kind == "f" or y._node.dtype.kind == "f":
                    continue
                v = B.binary(BIN_INT[k % len(BIN_INT)], x, y)
            elif kind == "div":
                v = B.binary("div", x, B.binary("add", B.unary("abs", y), 1))
            elif kind == "unary":
                v = B.unary(UNARY_ANY[k % len(UNARY_ANY)], x)
            elif kind == "cast":
                target = ["float32", "int32", "uint8"][k % 3]
                if x._node.dtype.kind == "f" and target != "float32":
                    x = B.wrap(B.make_node("clip", (B.as_node(x),), {"lo": -1e6, "hi": 1e6}))
                v = B.cast(x, target)
            elif kind == "clip":
                kind_ = x._node.dtype.kind
                lo = float(j % 7) - 3 if kind_ == "f" else (j % 7 - 3 if kind_ == "i" else j % 7)
                v = B.wrap(B.make_node("clip", (B.as_node(x),), {"lo": lo, "hi": lo + k % 5}))
            elif kind == "select":
                v = B.select(B.binary("greater", x, 0), y, z)
            elif kind == "transpose":
                v = B.transpose(x)
            else:
                v = x[::2] if x.ndim == 1 else x[:, ::-1]
        except ValueError:  # shapes that do not broadcast: skip the step
            continue
        vals.append(v)
    out = vals[-1]
    if reduce is not None and out.size > 0:
        op, axes_bits, keep = reduce
        axes = tuple(a for a in range(out.ndim) if axes_bits >> a & 1) or None
        out = B.reduce(op, out, axes, keep)
    return out


@settings(max_examples=25, deadline=None)
@given(recipes())
def test_random_graphs_match_reference(recipe):
    expected, got = reference_and_compiled(lambda: _build(recipe))
    if recipe[2] is not None and expected.dtype.kind == "f":
        op = recipe[2][0]
        if op in ("reduce_max", "reduce_min"):
            assert_ulp(expected, got, 0)
        else:
            np.testing.assert_allclose(got, expected, rtol=2e-5, atol=1e-3)
            assert got.dtype == expected.dtype
    else:
        assert_ulp(expected, got, 0)


UNARY_FLOAT = ["exp", "log", "sqrt", "sin", "cos", "tan", "tanh", "sigmoid", "expm1", "log1p", "atan", "asin",
               "acos", "asinh", "acosh", "erf", "erfc", "softplus", "softsign", "gelu", "gelu_tanh", "rsqrt",
               "reciprocal", "log2", "log10", "relu6"]


def test_transcendental_ops_within_4_ulp():
    """All float unary templates in ONE kernel (a select chain picks one op per element)."""
    rng = np.random.default_rng(0)
    n = len(UNARY_FLOAT)
    x = rng.uniform(-3, 3, (n, 64)).astype(np.float32)
    x[:, :4] = [0.0, 1.0, -1.0, 0.5]
    sel = np.repeat(np.arange(n, dtype=np.int32)[:, None], 64, axis=1)

    def build():
        xv = B.wrap(B.as_node(x))
        k = B.wrap(B.as_node(sel))
        out = B.unary(UNARY_FLOAT[0], xv)
        for i, op in enumerate(UNARY_FLOAT[1:], 1):
            out = B.select(B.binary("equal", k, i), B.unary(op, xv), out)
        return out

    expected, got = reference_and_compiled(build)
    for i, op in enumerate(UNARY_FLOAT):
        try:
            assert_ulp(expected[i], got[i], 4)
        except AssertionError as exc:
            raise AssertionError(f"op {op}: {exc}") from None


def test_binary_float_ops():
    rng = np.random.default_rng(1)
    a = rng.uniform(-5, 5, (6, 50)).astype(np.float32)
    b = rng.uniform(-5, 5, (6, 50)).astype(np.float32)
    b[:, :3] = 0
    ops = ["atan2", "hypot", "copysign", "mod", "fmod", "squared_difference"]
    sel = np.repeat(np.arange(len(ops), dtype=np.int32)[:, None], 50, axis=1)

    def build():
        av, bv, k = (B.wrap(B.as_node(v)) for v in (a, b, sel))
        out = B.binary(ops[0], av, bv)
        for i, op in enumerate(ops[1:], 1):
            out = B.select(B.binary("equal", k, i), B.binary(op, av, bv), out)
        return out

    expected, got = reference_and_compiled(build)
    for i, op in enumerate(ops):
        try:
            assert_ulp(expected[i], got[i], 2)
        except AssertionError as exc:
            raise AssertionError(f"op {op}: {exc}") from None


def test_float16_storage_groups():
    """float16 nodes compile too (half storage, float32 compute, rounded to half after every op)."""
    rng = np.random.default_rng(5)
    a = rng.uniform(-4, 4, (5, 33)).astype(np.float16)
    b = rng.uniform(-4, 4, (33,)).astype(np.float32)

    def build():
        x, y = B.wrap(B.as_node(a)), B.wrap(B.as_node(b))
        t = B.binary("add", B.binary("mul", x, B.cast(y, np.float16)), B.cast(1.5, np.float16))
        return B.cast(B.unary("exp", B.cast(t, np.float32)), np.float16)

    expected, got = reference_and_compiled(build)
    assert_ulp(expected, got, 1)
