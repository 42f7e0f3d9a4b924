"""Elementwise, activation, comparison, logic, cast, reduction and softmax ONNX ops.

Choices that keep real MNN 3.6.1 right: ``Less`` is written as ``GREATER`` with the operands
swapped (real MNN's float ``LESS`` compares bit patterns, wrong for two negative numbers); booleans
are int32 0/1 tensors (comparisons give those), so ``And``/``Or``/``Xor``/``Not`` are arithmetic;
a cast to bool is ``x != 0``.
"""
from __future__ import annotations

import numpy as np

from .builder import Val, mnn_dtype
from .core import GraphConverter, attrs_of, handler

_UNARY = {
    "Abs": "ABS", "Neg": "NEG", "Floor": "FLOOR", "Ceil": "CEIL", "Sqrt": "SQRT", "Exp": "EXP", "Log": "LOG",
    "Sin": "SIN", "Cos": "COS", "Tan": "TAN", "Asin": "ASIN", "Acos": "ACOS", "Atan": "ATAN", "Sinh": "SINH",
    "Cosh": "COSH", "Asinh": "ASINH", "Acosh": "ACOSH", "Atanh": "ATANH", "Reciprocal": "RECIPROCAL",
    "Sign": "SIGN", "Round": "ROUND", "Erf": "ERF", "Sigmoid": "SIGMOID", "Tanh": "TANH", "HardSwish": "HARDSWISH",
}
_BINARY = {"Add": "ADD", "Sub": "SUB", "Mul": "MUL", "Div": "REALDIV", "Pow": "POW", "Equal": "EQUAL",
           "Greater": "GREATER", "GreaterOrEqual": "GREATER_EQUAL", "BitwiseAnd": "BITWISE_AND",
           "BitwiseOr": "BITWISE_OR", "BitwiseXor": "BITWISE_XOR"}
#: comparisons written with their operands swapped (see the module docstring)
_SWAPPED = {"Less": "GREATER", "LessOrEqual": "GREATER_EQUAL"}
_BOOL = np.dtype(bool)


def _name(node) -> str:
    return node.output[0] or node.name


@handler(*_UNARY)
def unary(cv: GraphConverter, node, ins):
    """One MNN UnaryOp."""
    x = ins[0]
    return cv.out(cv.b.unary(_UNARY[node.op_type], cv.idx(x), _name(node)), x.dtype)


@handler(*[k for k in _BINARY if k != "Add"], *_SWAPPED)  # Add: ops_nn.add (bias folding)
def binary(cv: GraphConverter, node, ins):
    """One MNN BinaryOp (broadcasting as numpy)."""
    a, b = ins
    name = _name(node)
    if node.op_type == "Pow" and b.const is not None and b.const.size == 1 and a.is_float:
        e = float(b.const.reshape(-1)[0])
        if e == 2.0:
            return cv.out(cv.b.unary("SQUARE", cv.idx(a), name), a.dtype)
        if e == 0.5:
            return cv.out(cv.b.unary("SQRT", cv.idx(a), name), a.dtype)
        if e == 1.0:
            return a
    if node.op_type in _SWAPPED:
        return cv.out(cv.b.binary(_SWAPPED[node.op_type], cv.idx(b), cv.idx(a), name), _BOOL)
    kind = _BINARY[node.op_type]
    dtype = _BOOL if kind in ("EQUAL", "GREATER", "GREATER_EQUAL") else a.dtype
    return cv.out(cv.b.binary(kind, cv.idx(a), cv.idx(b), name), dtype)


@handler("Mod")
def mod(cv: GraphConverter, node, ins):
    """ONNX Mod: real MNN's integer MOD takes the divisor's sign (fmod=0), its integer FLOORMOD the
    dividend's (fmod=1); its float MOD is C's fmod."""
    a, b = ins
    fmod = int(attrs_of(node).get("fmod", 0))
    if a.is_float:
        if not fmod:
            raise cv.unsupported("Mod with fmod=0 on floats is not valid ONNX")
        kind = "MOD"
    else:
        kind = "FLOORMOD" if fmod else "MOD"
    return cv.out(cv.b.binary(kind, cv.idx(a), cv.idx(b), _name(node)), a.dtype)


@handler("Not")
def logical_not(cv: GraphConverter, node, ins):
    """1 - x on 0/1 values."""
    return cv.out(cv.b.binary("SUB", cv.b.scalar(1, np.int32), cv.idx(ins[0]), _name(node)), _BOOL)


@handler("And", "Or", "Xor")
def logical(cv: GraphConverter, node, ins):
    """And = a*b, Or = max(a, b), Xor = a != b on 0/1 values."""
    kind = {"And": "MUL", "Or": "MAXIMUM", "Xor": "NOTEQUAL"}[node.op_type]
    return cv.out(cv.b.binary(kind, cv.idx(ins[0]), cv.idx(ins[1]), _name(node)), _BOOL)


@handler("IsNaN")
def isnan(cv: GraphConverter, node, ins):
    """x != x."""
    t = cv.idx(ins[0])
    return cv.out(cv.b.binary("NOTEQUAL", t, t, _name(node)), _BOOL)


@handler("IsInf")
def isinf(cv: GraphConverter, node, ins):
    """x == +inf and/or x == -inf."""
    at = attrs_of(node)
    pos, neg = int(at.get("detect_positive", 1)), int(at.get("detect_negative", 1))
    x = cv.idx(ins[0])
    if pos and neg:
        return cv.out(cv.b.binary("EQUAL", cv.b.unary("ABS", x), cv.b.scalar(np.inf), _name(node)), _BOOL)
    if not pos and not neg:
        return cv.out(cv.b.binary("MUL", cv.b.binary("NOTEQUAL", x, x), cv.b.scalar(0, np.int32), _name(node)), _BOOL)
    return cv.out(cv.b.binary("EQUAL", x, cv.b.scalar(np.inf if pos else -np.inf), _name(node)), _BOOL)


def _chain(cv: GraphConverter, node, ins, kind: str) -> int:
    ts = [cv.idx(v) for v in ins if v is not None]
    acc = ts[0]
    for k, t in enumerate(ts[1:]):
        acc = cv.b.binary(kind, acc, t, _name(node) if k == len(ts) - 2 else None)
    return acc


@handler("Sum", "Max", "Min", "Mean")
def variadic(cv: GraphConverter, node, ins):
    """n-ary elementwise ops as chains of binary ops."""
    kind = {"Sum": "ADD", "Mean": "ADD", "Max": "MAXIMUM", "Min": "MINIMUM"}[node.op_type]
    vals = [v for v in ins if v is not None]
    if len(vals) == 1:
        return vals[0]
    t = _chain(cv, node, vals, kind)
    if node.op_type == "Mean":
        t = cv.b.binary("MUL", t, cv.b.scalar(1.0 / len(vals)), _name(node))
    return cv.out(t, vals[0].dtype)


@handler("Identity", "Dropout")
def identity(cv: GraphConverter, node, ins):
    """The input itself (inference); Dropout's mask is all ones."""
    if node.op_type == "Dropout" and len(node.output) > 1 and node.output[1] and cv.uses.get(node.output[1]):
        raise cv.unsupported("Dropout's mask output")
    return [ins[0], None]


@handler("Cast", "CastLike")
def cast(cv: GraphConverter, node, ins):
    """Cast to the target type as MNN stores it (a cast to bool is ``x != 0``)."""
    x = ins[0]
    if node.op_type == "CastLike":
        dst = ins[1].dtype
    else:
        from .onnx_to_mnn import _np_dtype
        dst = _np_dtype(int(attrs_of(node)["to"]))
        if dst is None:
            raise cv.unsupported(f"cast to ONNX type {attrs_of(node)['to']}")
    dst = np.dtype(dst)
    name = _name(node)
    if dst == _BOOL:
        if x.dtype == _BOOL:
            return x
        zero = cv.b.scalar(0, np.float32 if x.is_float else np.int32)
        return cv.out(cv.b.binary("NOTEQUAL", cv.idx(x), zero, name), _BOOL)
    if mnn_dtype(dst) == mnn_dtype(x.dtype):
        return Val(index=cv.idx(x), shape=x.shape, dtype=dst, conv=x.conv)
    return cv.out(cv.b.cast(cv.idx(x), mnn_dtype(dst), name), dst)


@handler("Where")
def where(cv: GraphConverter, node, ins):
    """Select(cond, x, y)."""
    c, a, b = ins
    return cv.out(cv.b.op1("Select", [cv.idx(c), cv.idx(a), cv.idx(b)], None, None, _name(node)), a.dtype)


# ------------------------------------------------------------------------------------ activations
def _fold_act(cv: GraphConverter, node, x: Val, relu6: bool) -> Val | None:
    """Fold ReLU / ReLU6 into the convolution producing ``x`` when nothing else reads it."""
    if x.conv is None or not cv.only_use(node):
        return None
    common = x.conv.main["common"]
    if common.get("relu") or common.get("relu6"):
        return None
    common["relu6" if relu6 else "relu"] = True
    cv.b.rename(x.index, _name(node))
    return Val(index=x.index, shape=x.shape, dtype=x.dtype, nc4=x.nc4)


@handler("Relu", "LeakyRelu")
def relu(cv: GraphConverter, node, ins):
    """ReLU (slope 0, or LeakyRelu's alpha)."""
    x = ins[0]
    slope = float(attrs_of(node).get("alpha", 0.01)) if node.op_type == "LeakyRelu" else 0.0
    if slope == 0.0:
        fused = _fold_act(cv, node, x, relu6=False)
        if fused is not None:
            return fused
    main = {"slope": slope} if slope else {}
    if x.nc4 is not None:
        prod = cv.b.producer.get(x.nc4)
        if slope == 0.0 and prod is not None and prod.type == "BinaryOp" and cv.only_use(node) and \
                not (prod.main or {}).get("activationType"):
            prod.main["activationType"] = 1  # an add followed by ReLU: one BinaryOp, as real MNN writes it
            cv.b.rename(x.index, _name(node))
            return Val(index=x.index, shape=x.shape, dtype=x.dtype, nc4=x.nc4)
        t = cv.b.op1("ReLU", [x.nc4], "Relu", main, _name(node) + "__nc4")
        return Val(index=cv.b.to_nchw(t, _name(node)), shape=x.shape, dtype=x.dtype, nc4=t)
    return cv.out(cv.b.op1("ReLU", [cv.idx(x)], "Relu", main, _name(node)), x.dtype)


@handler("Clip")
def clip(cv: GraphConverter, node, ins):
    """Clamp: ReLU6 with the bounds for constant float bounds, else MAXIMUM / MINIMUM."""
    x = ins[0]
    at = attrs_of(node)
    if cv.opset < 11:
        lo_v = None if "min" not in at else Val(const=np.asarray(at["min"], np.float32))
        hi_v = None if "max" not in at else Val(const=np.asarray(at["max"], np.float32))
    else:
        lo_v = ins[1] if len(ins) > 1 else None
        hi_v = ins[2] if len(ins) > 2 else None
    name = _name(node)
    known = all(v is None or v.const is not None for v in (lo_v, hi_v))
    if x.is_float and known:
        lo = -3.4028234663852886e38 if lo_v is None else float(lo_v.const.reshape(-1)[0])
        hi = 3.4028234663852886e38 if hi_v is None else float(hi_v.const.reshape(-1)[0])
        if lo == 0.0 and (hi == 6.0 or hi_v is None):
            fused = _fold_act(cv, node, x, relu6=hi_v is not None)
            if fused is not None:
                return fused
        return cv.out(cv.b.op1("ReLU6", [cv.idx(x)], "Relu6", {"minValue": lo, "maxValue": hi}, name), x.dtype)
    t = cv.idx(x)
    if lo_v is not None:
        t = cv.b.binary("MAXIMUM", t, cv.idx(lo_v), name if hi_v is None else None)
    if hi_v is not None:
        t = cv.b.binary("MINIMUM", t, cv.idx(hi_v), name)
    return cv.out(t, x.dtype)


@handler("PRelu")
def prelu(cv: GraphConverter, node, ins):
    """max(x, 0) + slope * min(x, 0) (no comparisons, see the module docstring)."""
    x, slope = cv.idx(ins[0]), cv.idx(ins[1])
    zero = cv.b.scalar(0.0)
    pos = cv.b.binary("MAXIMUM", x, zero)
    neg = cv.b.binary("MUL", cv.b.binary("MINIMUM", x, zero), slope)
    return cv.out(cv.b.binary("ADD", pos, neg, _name(node)), ins[0].dtype)


@handler("Elu")
def elu(cv: GraphConverter, node, ins):
    """MNN's ELU op."""
    alpha = float(attrs_of(node).get("alpha", 1.0))
    return cv.out(cv.b.op1("ELU", [cv.idx(ins[0])], "ELU", {"alpha": alpha}, _name(node)))


@handler("Selu")
def selu(cv: GraphConverter, node, ins):
    """MNN's Selu op."""
    at = attrs_of(node)
    main = {"scale": float(at.get("gamma", 1.0507009873554805)), "alpha": float(at.get("alpha", 1.6732632423543772))}
    return cv.out(cv.b.op1("Selu", [cv.idx(ins[0])], "Selu", main, _name(node)))


@handler("HardSigmoid")
def hard_sigmoid(cv: GraphConverter, node, ins):
    """clamp(alpha * x + beta, 0, 1)."""
    at = attrs_of(node)
    t = cv.b.binary("MUL", cv.idx(ins[0]), cv.b.scalar(float(at.get("alpha", 0.2))))
    t = cv.b.binary("ADD", t, cv.b.scalar(float(at.get("beta", 0.5))))
    return cv.out(cv.b.op1("ReLU6", [t], "Relu6", {"minValue": 0.0, "maxValue": 1.0}, _name(node)))


def _softplus(cv: GraphConverter, x: int, name=None) -> int:
    """log(1 + exp(x)) written as max(x, 0) + log(1 + exp(-|x|)) (no overflow for large x)."""
    pos = cv.b.binary("MAXIMUM", x, cv.b.scalar(0.0))
    e = cv.b.unary("EXP", cv.b.unary("NEG", cv.b.unary("ABS", x)))
    return cv.b.binary("ADD", pos, cv.b.unary("LOG", cv.b.binary("ADD", e, cv.b.scalar(1.0))), name)


@handler("Softplus")
def softplus(cv: GraphConverter, node, ins):
    """log(1 + exp(x))."""
    return cv.out(_softplus(cv, cv.idx(ins[0]), _name(node)))


@handler("Mish")
def mish(cv: GraphConverter, node, ins):
    """x * tanh(softplus(x))."""
    x = cv.idx(ins[0])
    return cv.out(cv.b.binary("MUL", x, cv.b.unary("TANH", _softplus(cv, x)), _name(node)))


@handler("Softsign")
def softsign(cv: GraphConverter, node, ins):
    """x / (1 + |x|)."""
    x = cv.idx(ins[0])
    den = cv.b.binary("ADD", cv.b.unary("ABS", x), cv.b.scalar(1.0))
    return cv.out(cv.b.binary("REALDIV", x, den, _name(node)))


@handler("Gelu")
def gelu(cv: GraphConverter, node, ins):
    """GELU: erf form (GELU_STANDARD) or tanh form (GELU)."""
    approx = attrs_of(node).get("approximate", "none")
    approx = approx.decode() if isinstance(approx, bytes) else approx
    kind = "GELU" if approx == "tanh" else "GELU_STANDARD"
    return cv.out(cv.b.unary(kind, cv.idx(ins[0]), _name(node)))


@handler("ThresholdedRelu")
def thresholded_relu(cv: GraphConverter, node, ins):
    """x where x > alpha, else 0."""
    alpha = float(attrs_of(node).get("alpha", 1.0))
    x = cv.idx(ins[0])
    mask = cv.b.cast(cv.b.binary("GREATER", x, cv.b.scalar(alpha)), "DT_FLOAT")
    return cv.out(cv.b.binary("MUL", x, mask, _name(node)))


# ------------------------------------------------------------------------------------ reductions
_REDUCE = {"ReduceSum": "SUM", "ReduceMean": "MEAN", "ReduceMax": "MAXIMUM", "ReduceMin": "MINIMUM",
           "ReduceProd": "PROD", "ReduceL1": "SUM", "ReduceL2": "SUM", "ReduceSumSquare": "SUM",
           "ReduceLogSum": "SUM", "ReduceLogSumExp": "SUM"}
#: opset from which each reduction takes its axes as an input
_AXES_INPUT = {"ReduceSum": 13}


def reduce_axes(cv: GraphConverter, node, ins) -> tuple:
    """(axes list or None for all, keepdims) of a reduction (attribute or input form)."""
    at = attrs_of(node)
    keep = bool(at.get("keepdims", 1))
    axes = at.get("axes")
    if len(ins) > 1 and ins[1] is not None:
        if ins[1].const is None:
            raise cv.unsupported("reduction axes computed at run time")
        axes = [int(a) for a in ins[1].const.reshape(-1)]
    if not axes:
        if int(at.get("noop_with_empty_axes", 0)) and (len(ins) > 1 and ins[1] is not None or "axes" in at):
            return [], keep
        rank = ins[0].rank
        if rank is None:
            raise cv.unsupported("reducing every axis of a tensor of unknown rank")
        axes = list(range(rank))
    rank = ins[0].rank
    if rank is not None:
        axes = sorted(a % rank for a in axes) if rank else []
    return list(axes), keep


def _reduction(cv: GraphConverter, t: int, kind: str, axes, keep: bool, name=None) -> int:
    return cv.b.op1("Reduction", [t], "ReductionParam", {"operation": kind, "dim": np.asarray(axes, np.int32),
                                                         "keepDims": keep, "dType": "DT_FLOAT"}, name)


@handler(*_REDUCE)
def reduce(cv: GraphConverter, node, ins):
    """Reductions; L1, L2, SumSquare, LogSum and LogSumExp around a SUM."""
    x = ins[0]
    axes, keep = reduce_axes(cv, node, ins)
    if not axes and x.rank != 0:
        if node.op_type in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"):
            return x  # noop_with_empty_axes
    if x.rank == 0:
        return x
    name = _name(node)
    t = cv.idx(x)
    op = node.op_type
    if op == "ReduceL1":
        t = cv.b.unary("ABS", t)
    elif op in ("ReduceL2", "ReduceSumSquare"):
        t = cv.b.unary("SQUARE", t)
    elif op == "ReduceLogSumExp":
        # max-shifted: log(sum(exp(x - m))) + m, as ONNX Runtime computes it (no overflow)
        m = _reduction(cv, t, "MAXIMUM", axes, True)
        s = _reduction(cv, cv.b.unary("EXP", cv.b.binary("SUB", t, m)), "SUM", axes, keep)
        m2 = m if keep else cv.b.squeeze(m, axes)
        return cv.out(cv.b.binary("ADD", cv.b.unary("LOG", s), m2, name), x.dtype)
    post = op in ("ReduceL2", "ReduceLogSum")
    r = _reduction(cv, t, _REDUCE[op], axes, keep, None if post else name)
    if op == "ReduceL2":
        r = cv.b.unary("SQRT", r, name)
    elif op == "ReduceLogSum":
        r = cv.b.unary("LOG", r, name)
    return cv.out(r, x.dtype)


@handler("ArgMax", "ArgMin")
def argmax(cv: GraphConverter, node, ins):
    """MNN ArgMax / ArgMin (first index), unsqueezed back for keepdims."""
    at = attrs_of(node)
    if int(at.get("select_last_index", 0)):
        raise cv.unsupported("select_last_index=1")
    x = ins[0]
    axis = int(at.get("axis", 0))
    if x.rank is not None:
        axis %= max(1, x.rank)
    keep = bool(at.get("keepdims", 1))
    name = _name(node)
    t = cv.b.op1(node.op_type, [cv.idx(x)], "ArgMax", {"axis": axis, "topK": 1}, None if keep else name)
    if keep:
        t = cv.b.unsqueeze(t, [axis], name)
    return cv.out(t, np.int64)


@handler("TopK")
def topk(cv: GraphConverter, node, ins):
    """TopKV2 along any axis (values and int32 indices)."""
    at = attrs_of(node)
    x = ins[0]
    axis = int(at.get("axis", -1))
    if x.rank is not None:
        axis %= x.rank
    if cv.opset < 10:
        k = cv.b.ints([int(at["k"])])
    else:
        k = cv.b.reshape(cv.idx(ins[1]), [1]) if ins[1].const is None else cv.b.ints(ins[1].const.reshape(-1))
    main = {"T": "DT_FLOAT", "sorted": True, "largest": bool(at.get("largest", 1))}
    outs = cv.b.op("TopKV2", [cv.idx(x), k, cv.b.scalar(axis, np.int32)], "TopKV2", main, _name(node), n_out=2)
    return [cv.out(outs[0], x.dtype), cv.out(outs[1], np.int64)]


@handler("CumSum")
def cumsum(cv: GraphConverter, node, ins):
    """MNN CumSum (exclusive / reverse)."""
    at = attrs_of(node)
    main = {"exclusive": bool(at.get("exclusive", 0)), "reverse": bool(at.get("reverse", 0))}
    axis = ins[1]
    a = cv.b.scalar(int(axis.const.reshape(-1)[0]), np.int32) if axis.const is not None else cv.idx(axis)
    return cv.out(cv.b.op1("CumSum", [cv.idx(ins[0]), a], "CumSum", main, _name(node)), ins[0].dtype)


# ------------------------------------------------------------------------------------ softmax
def _softmax_axis(cv: GraphConverter, node, x: Val) -> tuple:
    """(axis, needs flattening) of (Log)Softmax: before opset 13 it normalizes over the flattened
    trailing axes from ``axis``."""
    at = attrs_of(node)
    if cv.opset >= 13:
        return int(at.get("axis", -1)), False
    axis = int(at.get("axis", 1))
    rank = x.rank
    if rank is None:
        if axis == -1:
            return -1, False
        raise cv.unsupported("Softmax before opset 13 on a tensor of unknown rank")
    axis %= max(rank, 1)
    return axis, axis != rank - 1


@handler("Softmax", "LogSoftmax")
def softmax(cv: GraphConverter, node, ins):
    """MNN Softmax; LogSoftmax as x - max - log(sum(exp(x - max)))."""
    x = ins[0]
    axis, flatten = _softmax_axis(cv, node, x)
    name = _name(node)
    t = cv.idx(x)
    shape = None
    if flatten:
        shape = cv.b.shape_of(t)
        lead, trail = x.shape[:axis], x.shape[axis:]
        if all(d is not None for d in trail):
            dims = [-1, int(np.prod(trail))]
        elif all(d is not None for d in lead):
            dims = [int(np.prod(lead)), -1]
        else:
            raise cv.unsupported("Softmax before opset 13 over axes of unknown sizes")
        t = cv.b.reshape(t, dims)
        axis = 1
    if node.op_type == "Softmax":
        r = cv.b.op1("Softmax", [t], "Axis", {"axis": axis}, None if flatten else name)
    else:
        m = _reduction(cv, t, "MAXIMUM", [axis], True)
        d = cv.b.binary("SUB", t, m)
        s = _reduction(cv, cv.b.unary("EXP", d), "SUM", [axis], True)
        r = cv.b.binary("SUB", d, cv.b.unary("LOG", s), None if flatten else name)
    if flatten:
        r = cv.b.reshape(r, shape, name)
    return cv.out(r, x.dtype)
