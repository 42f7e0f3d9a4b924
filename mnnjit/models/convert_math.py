"""Converters for MNN's arithmetic op types: BinaryOp, UnaryOp, activations, Eltwise, Cast,
Reduction, Softmax, LayerNorm, MatMul/BatchMatMul/InnerProduct, Scale, Select."""
from __future__ import annotations

import numpy as np

from .._dtypes import F32
from ..graph import Node
from ..ops import build as B
from .translate import MNN_DTYPES, Ctx, converter, node_of

_BINARY = {
    "ADD": "add", "SUB": "sub", "MUL": "mul", "DIV": "div", "REALDIV": "div", "MAX_TEMP": "maximum",
    "MIN_TEMP": "minimum", "POW": "pow", "MINIMUM": "minimum", "MAXIMUM": "maximum", "GREATER": "greater",
    "GREATER_EQUAL": "greater_equal", "LESS": "less", "FLOORDIV": "floordiv",
    "SquaredDifference": "squared_difference", "EQUAL": "equal", "LESS_EQUAL": "less_equal",
    "FLOORMOD": "mod", "MOD": "fmod", "ATAN2": "atan2", "LOGICALOR": "logical_or", "NOTEQUAL": "not_equal",
    "BITWISE_AND": "bitwise_and", "BITWISE_OR": "bitwise_or", "BITWISE_XOR": "bitwise_xor",
    "LOGICALXOR": "logical_xor", "LEFTSHIFT": "left_shift", "RIGHTSHIFT": "right_shift",
}

_UNARY = {
    "ABS": "abs", "NEG": "neg", "FLOOR": "floor", "CEIL": "ceil", "SQUARE": "square", "SQRT": "sqrt",
    "RSQRT": "rsqrt", "EXP": "exp", "LOG": "log", "SIN": "sin", "COS": "cos", "TAN": "tan", "ASIN": "asin",
    "ACOS": "acos", "ATAN": "atan", "RECIPROCAL": "reciprocal", "LOG1P": "log1p", "BNLL": "softplus",
    "ACOSH": "acosh", "SINH": "sinh", "ASINH": "asinh", "ATANH": "atanh", "SIGN": "sign", "ROUND": "round",
    "COSH": "cosh", "ERF": "erf", "ERFC": "erfc", "EXPM1": "expm1", "SIGMOID": "sigmoid", "TANH": "tanh",
    "GELU": "gelu_tanh", "GELU_STANDARD": "gelu",
}
#: Unary operations that are NN ops of the expr branch (not core elementwise ops).
_UNARY_NN = {"HARDSWISH": "hard_swish", "SILU": "silu"}


def _relu(ctx: Ctx, node: Node) -> Node:
    return ctx.emit("relu", [node])


def _mnn_float_less(a: Node, b: Node) -> Node:
    """Real MNN 3.6.1's BinaryOp LESS on float32 operands, which compares the operands' bit patterns as
    int32 (measured on this x86 CPU: 200 of 200 random cases; ``a < b`` held in only 21). So it agrees
    with ``a < b`` when either operand is non-negative, but two negative operands compare by magnitude
    (-1 < -0.5 gives 0, -0.4 < -0.5 gives 1) and -0.0 is below +0.0. ONNX Less (and ONNX Shrink, which
    MNN's converter builds from Less) therefore differ from ONNX Runtime for negative values; mnnjit
    follows real MNN, the oracle for .mnn models (docs/COMPATIBILITY.md). The comparison is a composition
    of sign tests and selects, so it stays fusable."""
    sa, sb = B.unary("signbit", a), B.unary("signbit", b)
    both = B.binary("logical_and", sa, sb)
    mixed = B.binary("not_equal", sa, sb)
    same_sign = B.select(both, B.binary("greater", a, b), B.binary("less", a, b))
    return node_of(B.select(mixed, sa, same_sign))


def _int_trunc_div(a: Node, b: Node) -> Node:
    """Integer division rounding toward zero (C's ``/``; ONNX Div on integers): the floor quotient,
    plus one where the remainder is non-zero and the operands' signs differ."""
    q = node_of(B.binary("floordiv", a, b))
    r = node_of(B.binary("sub", a, B.binary("mul", q, b)))
    zero = B.scalar_node(0, r.dtype)
    signs_differ = B.binary("not_equal", B.binary("less", a, zero), B.binary("less", b, zero))
    fix = B.binary("logical_and", B.binary("not_equal", r, zero), signs_differ)
    return node_of(B.binary("add", q, B.cast(fix, q.dtype)))


#: MOD / FLOORMOD on two integer tensors, as real MNN 3.6.1 computes them (measured): MOD takes the
#: divisor's sign (Python's %, ONNX Mod fmod=0), FLOORMOD the dividend's (C's %) - the reverse of
#: their float meanings
_INT_MOD = {"MOD": "mod", "FLOORMOD": "fmod"}


@converter("BinaryOp")
def binary_op(ctx: Ctx, op, xs):
    """Elementwise binary op with broadcasting (``activationType`` 1 adds a ReLU)."""
    p = op.main or {}
    kind = str(p.get("opType", "ADD"))
    a, b = xs[0], xs[1]
    ints = a.dtype.kind in "iu" and b.dtype.kind in "iu"
    if kind in ("DIV", "REALDIV") and ints:
        # real MNN divides integers to an integer, rounding toward zero (measured: -7 / 3 = -2)
        out = _int_trunc_div(a, b)
        return _relu(ctx, out) if int(p.get("activationType") or 0) == 1 else out
    if kind in _INT_MOD and ints:
        name = _INT_MOD[kind]
    elif kind == "LESS" and a.dtype.kind == "f" and b.dtype.kind == "f":
        return _mnn_float_less(a, b)
    elif kind == "MUL_SILU":
        out = B.binary("mul", a, B.unary("sigmoid", b))
        return node_of(B.binary("mul", out, b))
    else:
        name = _BINARY.get(kind)
    if name is None:
        raise ctx.unsupported(op, f"BinaryOp operation {kind}")
    out = node_of(B.binary(name, a, b))
    if int(p.get("activationType") or 0) == 1:
        out = _relu(ctx, out)
    return out


@converter("UnaryOp")
def unary_op(ctx: Ctx, op, xs):
    """Elementwise unary op (GELU is the tanh form, GELU_STANDARD the erf form)."""
    kind = str((op.main or {}).get("opType", "ABS"))
    if kind in _UNARY:
        return B.unary(_UNARY[kind], xs[0])
    if kind in _UNARY_NN:
        return ctx.emit(_UNARY_NN[kind], [B.cast_node(xs[0], F32)])
    raise ctx.unsupported(op, f"UnaryOp operation {kind}")


@converter("ReLU")
def relu(ctx: Ctx, op, xs):
    """ReLU, or leaky ReLU when ``slope`` is non-zero."""
    slope = float((op.main or {}).get("slope") or 0.0)
    if slope == 0.0:
        return _relu(ctx, xs[0])
    return ctx.emit("leaky_relu", [xs[0]], {"alpha": slope})


@converter("ReLU6")
def relu6(ctx: Ctx, op, xs):
    """Clamp to [minValue, maxValue] (default [0, 6])."""
    p = op.main or {}
    lo = float(p.get("minValue", 0.0)) if p else 0.0
    hi = float(p.get("maxValue", 6.0)) if p else 6.0
    if (lo, hi) == (0.0, 6.0):
        return ctx.emit("relu6", [xs[0]])
    return ctx.emit("clip", [xs[0]], {"lo": lo, "hi": hi})


@converter("Sigmoid")
def sigmoid(ctx: Ctx, op, xs):
    """Logistic sigmoid."""
    return B.unary("sigmoid", xs[0])


@converter("TanH")
def tanh(ctx: Ctx, op, xs):
    """Hyperbolic tangent."""
    return B.unary("tanh", xs[0])


@converter("ELU")
def elu(ctx: Ctx, op, xs):
    """ELU with ``alpha``."""
    return ctx.emit("elu", [xs[0]], {"alpha": float((op.main or {}).get("alpha", 1.0))})


@converter("Selu")
def selu(ctx: Ctx, op, xs):
    """SELU with ``alpha`` and ``scale``."""
    p = op.main or {}
    return ctx.emit("selu", [xs[0]], {"alpha": float(p.get("alpha")), "scale": float(p.get("scale"))})


@converter("PReLU")
def prelu(ctx: Ctx, op, xs):
    """PReLU with per-channel (or shared) slopes."""
    slope = np.asarray((op.main or {}).get("slope"), np.float32)
    return ctx.emit("prelu", [xs[0], ctx.const(slope)])


@converter("Eltwise")
def eltwise(ctx: Ctx, op, xs):
    """N-ary SUM (with coefficients), PROD, MAXIMUM, SUB."""
    p = op.main or {}
    kind = str(p.get("type", "SUM"))
    coeff = p.get("coeff")
    nodes = list(xs)
    if kind == "SUM" and coeff is not None and len(coeff) and any(float(c) != 1.0 for c in coeff):
        nodes = [node_of(B.binary("mul", n, float(c))) for n, c in zip(nodes, coeff)]
    name = {"SUM": "add", "PROD": "mul", "MAXIMUM": "maximum", "SUB": "sub"}.get(kind)
    if name is None:
        raise ctx.unsupported(op, f"Eltwise type {kind}")
    out = nodes[0]
    for n in nodes[1:]:
        out = node_of(B.binary(name, out, n))
    return out


@converter("Cast")
def cast(ctx: Ctx, op, xs):
    """Type conversion (bool targets give int32 0/1)."""
    dst = str((op.main or {}).get("dstT", "DT_FLOAT"))
    if dst == "DT_BOOL":
        return B.binary("not_equal", xs[0], 0)
    dt = MNN_DTYPES.get(dst)
    if dt is None:
        raise ctx.unsupported(op, f"cast to {dst}")
    return B.cast_node(xs[0], dt) if xs[0].dtype != dt else xs[0]


@converter("CastLike")
def cast_like(ctx: Ctx, op, xs):
    """ONNX CastLike: the first input converted to the second input's dtype (as Cast)."""
    if len(xs) != 2:
        raise ctx.unsupported(op, f"CastLike with {len(xs)} inputs")
    dt = xs[1].dtype
    return B.cast_node(xs[0], dt) if xs[0].dtype != dt else xs[0]


_REDUCE = {"SUM": "reduce_sum", "MEAN": "reduce_mean", "MAXIMUM": "reduce_max", "MINIMUM": "reduce_min",
           "PROD": "reduce_prod", "ANY": "reduce_any", "ALL": "reduce_all"}


@converter("Reduction")
def reduction(ctx: Ctx, op, xs):
    """Reduce over ``dim`` (or the axes given as the second input; none = all axes)."""
    p = op.main or {}
    kind = str(p.get("operation", "SUM"))
    x = xs[0]
    if len(xs) > 1:
        axes = ctx.ints(xs[1], "reduction axes")
    else:
        axes = [int(a) for a in (p.get("dim") if p.get("dim") is not None else [])]
    nd = len(x.shape)
    axes = None if not axes else [a + nd if a < 0 else a for a in axes]
    keep = bool(p.get("keepDims", False))
    if kind == "ASUM":
        x, kind = node_of(B.unary("abs", x)), "SUM"
    elif kind == "SUMSQ":
        x, kind = node_of(B.unary("square", x)), "SUM"
    name = _REDUCE.get(kind)
    if name is None:
        raise ctx.unsupported(op, f"Reduction operation {kind}")
    return B.reduce(name, x, axes, keepdims=keep)


@converter("Softmax")
def softmax(ctx: Ctx, op, xs):
    """Softmax over ``axis`` (negative counts from the end)."""
    x = xs[0]
    axis = int((op.main or {}).get("axis", 1))
    return ctx.emit("softmax", [B.cast_node(x, F32)], {"axis": B.normalize_axis(axis, len(x.shape))})


@converter("LayerNorm")
def layer_norm(ctx: Ctx, op, xs):
    """Layer (or RMS, or group) normalisation with optional gamma/beta."""
    p = op.main or {}
    x = B.cast_node(xs[0], F32)
    nd = len(x.shape)
    group = int(p.get("group") or 1)
    eps = float(p.get("epsilon") or 0.0)
    rms = bool(p.get("useRMSNorm"))
    axes = sorted(a + nd if a < 0 else a for a in (p.get("axis") if p.get("axis") is not None else [-1]))
    attrs = {"axes": tuple(axes), "eps": eps, "rms": rms}
    if group > 1:
        attrs["group"] = group
    ins = [x]
    gamma, beta = p.get("gamma"), p.get("beta")
    if len(xs) >= 3:
        ins += [xs[1], xs[2]]
    elif gamma is not None and len(gamma):
        shape = tuple(x.shape[a] for a in axes) if group == 1 else (len(gamma),)
        ins.append(ctx.const(np.asarray(gamma, np.float32).reshape(shape)))
        if not rms:
            b = beta if beta is not None and len(beta) else np.zeros(len(gamma), np.float32)
            ins.append(ctx.const(np.asarray(b, np.float32).reshape(shape)))
    return ctx.emit("layer_norm", ins, attrs)


def _swap_last(node: Node) -> Node:
    nd = len(node.shape)
    perm = list(range(nd))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return node_of(B.transpose(node, perm))


def _matmul(a: Node, b: Node, ta: bool, tb: bool, bias: Node | None) -> Node:
    if ta:
        a = _swap_last(a)
    if tb:
        b = _swap_last(b)
    out = node_of(B.matmul(a, b))
    if bias is not None:
        out = node_of(B.binary("add", out, bias))
    return out


@converter("MatMul")
def matmul(ctx: Ctx, op, xs):
    """Matrix product with optional transposes and bias (third input)."""
    p = op.main or {}
    a, b = xs[0], xs[1]
    if p.get("weight") is not None and len(p.get("weight")) and len(xs) == 1:
        raise ctx.unsupported(op, "MatMul with embedded weights")
    bias = xs[2] if len(xs) > 2 else None
    return _matmul(a, b, bool(p.get("transposeA")), bool(p.get("transposeB")), bias)


@converter("BatchMatMul")
def batch_matmul(ctx: Ctx, op, xs):
    """Batched matrix product (``adjX``/``adjY`` transpose the last two axes)."""
    p = op.main or {}
    return _matmul(xs[0], xs[1], bool(p.get("adjX")), bool(p.get("adjY")), None)


@converter("InnerProduct")
def inner_product(ctx: Ctx, op, xs):
    """Fully connected layer: flatten from ``axis``, multiply by weight [O, I]^T, add bias."""
    p = op.main or {}
    x = xs[0]
    out_count = int(p.get("outputCount"))
    w = ctx.cached((id(op), "w"), lambda: np.asarray(p.get("weight"), np.float32).reshape(out_count, -1).T.copy())
    axis = int(p.get("axis") or 1)
    lead = x.shape[:axis]
    flat = node_of(B.reshape(x, lead + (-1,)))
    out = node_of(B.matmul(flat, ctx.const(w)))
    if p.get("biasTerm", True) and p.get("bias") is not None and len(p.get("bias")):
        out = node_of(B.binary("add", out, ctx.const(np.asarray(p.get("bias"), np.float32))))
    return out


@converter("Scale")
def scale(ctx: Ctx, op, xs):
    """Per-channel ``x * scale + bias`` (channel axis 1)."""
    p = op.main or {}
    x = xs[0]
    nd = len(x.shape)
    shape = (-1,) + (1,) * (nd - 2) if nd >= 2 else (-1,)
    s = ctx.const(np.asarray(p.get("scaleData"), np.float32).reshape(shape))
    out = node_of(B.binary("mul", x, s))
    bias = p.get("biasData")
    if bias is not None and len(bias):
        out = node_of(B.binary("add", out, ctx.const(np.asarray(bias, np.float32).reshape(shape))))
    return out


@converter("Select")
def select(ctx: Ctx, op, xs):
    """``where(cond, a, b)``."""
    return B.select(xs[0], xs[1], xs[2])


@converter("ArgMax", "ArgMin")
def argmax(ctx: Ctx, op, xs):
    """Index of the largest (smallest) element along ``axis``."""
    p = op.main or {}
    x = xs[0]
    axis = B.normalize_axis(int(p.get("axis") or 0), len(x.shape))
    name = "argmax" if op.type == "ArgMax" else "argmin"
    return ctx.emit(name, [x], {"axes": (axis,), "keepdims": False})


@converter("Identity")
def identity(ctx: Ctx, op, xs):
    """Pass the inputs through."""
    return list(xs)
