"""Elementwise ops: unary, binary, comparison, logical, bitwise, cast, clip and select.

Front ends insert casts so that the value inputs of an op share one dtype (``select``'s condition is
int32); ``infer`` gives the broadcast shape and the output dtype. ``scalar`` is the per-element
expression a code generator inlines (``a``, ``b``, ``c`` are the input scalars; ``math`` and ``np``
are in scope; attribute values are inlined by name).
"""
from __future__ import annotations

import math

import numpy as np

from .._dtypes import F32, I32
from .registry import OpDef, register
from .registry import get as registry_get


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """numpy's broadcast of shapes, with numpy's error message naming the shapes."""
    if len(shapes) == 2:
        s0, s1 = shapes
        if s0 == s1 or not s1:
            return s0
        if not s0:
            return s1
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        off = ndim - len(s)
        for i, d in enumerate(s):
            o = out[off + i]
            if o == 1:
                out[off + i] = d
            elif d != 1 and d != o:
                desc = " ".join("(" + ",".join(str(x) for x in sh) + ("," if len(sh) == 1 else "") + ")"
                                for sh in shapes)
                raise ValueError(f"operands could not be broadcast together with shapes {desc}")
    return tuple(out)


def _shape_of(inputs) -> tuple[int, ...]:
    if len(inputs) == 1:
        return inputs[0].shape
    if len(inputs) == 2:
        return broadcast_shape(inputs[0].shape, inputs[1].shape)
    return broadcast_shape(*(i.shape for i in inputs))


def _same_dtype(inputs, attrs):
    return _shape_of(inputs), inputs[-1].dtype


def _int32_out(inputs, attrs):
    return _shape_of(inputs), I32


def _float_out(inputs, attrs):
    return broadcast_shape(*(i.shape for i in inputs)), F32


def _ew(name: str, ref, scalar: str, infer=_same_dtype, mnn_type: str = "UnaryOp") -> None:
    register(OpDef(name=name, kind="elementwise", infer=infer, ref=ref, scalar=scalar, mnn_type=mnn_type))


#: signed integer views of float widths and their sign bits (``_round_half_away``'s copysign)
_SIGN_BITS = {2: (np.int16, np.int16(-0x8000)), 4: (np.int32, np.int32(-0x80000000)),
              8: (np.int64, np.int64(-0x8000000000000000))}


def _round_half_away(x):
    """C's ``roundf``: to nearest, halves away from zero (MNN's rounding; the compiled template
    rounds in double precision, so it is exact too). Floats: numpy's ``rint`` (halves to even),
    then the exact halves (|x - rint(x)| == 0.5, rare) moved away from zero: ``x +- 0.5`` is exact
    there. Adding 0.5 in the input's precision first would round 0.49999997 and odd integers from
    2**23 wrongly."""
    if type(x) is np.ndarray and x.dtype.kind == "f":
        if x.ndim == 0:
            return _round_half_away(x.reshape(1)).reshape(())
        r = np.rint(x)
        d = np.subtract(x, r)
        # no tie (|d| == 0.5 exactly) in finite data: rint is already the answer; two read-only
        # reductions cost less than marking the ties (NaN, from NaN or infinite x, fails both
        # tests and takes the marking below, which leaves rint's NaN and infinities as they are)
        if not d.size or (np.maximum.reduce(d, None) < 0.5 and np.minimum.reduce(d, None) > -0.5):
            return r
        np.abs(d, out=d)
        tie = np.equal(d, np.asarray(0.5, x.dtype))
        if tie.any():
            xt = x[tie]
            r[tie] = xt + np.copysign(np.asarray(0.5, x.dtype), xt)
        return r
    y = np.abs(x)
    sb = _SIGN_BITS.get(x.dtype.itemsize) if x.dtype.kind == "f" else None
    if type(y) is not np.ndarray or sb is None:
        return np.copysign(np.floor(y + np.asarray(0.5, x.dtype)), x)
    # in place, and the sign copied as a bit: numpy's float32 copysign is not vectorised (~7x a
    # floor); y is >= 0 or NaN (abs cleared its sign bit), so OR-ing x's sign bit in is copysign
    np.add(y, np.asarray(0.5, x.dtype), out=y)
    np.floor(y, out=y)
    it, bit = sb
    yi = y.view(it)
    yi |= x.view(it) & bit
    return y


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return (1.0 / (1.0 + np.exp(-x))).astype(x.dtype)


_erf_vec = np.frompyfunc(math.erf, 1, 1)
_erfc_vec = np.frompyfunc(math.erfc, 1, 1)


def _erf(x):
    return _erf_vec(x.astype(np.float64)).astype(x.dtype)


def _erfc(x):
    return _erfc_vec(x.astype(np.float64)).astype(x.dtype)


def _gelu(x):
    return (0.5 * x * (1.0 + _erf_vec(x.astype(np.float64) / math.sqrt(2.0)).astype(np.float64))).astype(x.dtype)


def _gelu_tanh(x):
    """As ``x / (1 + exp(-2y))`` (= 0.5 x (1 + tanh(y)), without its cancellation for negative x) in
    float64 with ``x * x * x``: 2 ms for 300k elements, where ``x ** 3`` and tanh took 28."""
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore"):
        e = np.exp(-1.5957691216057308 * (x64 + 0.044715 * x64 * x64 * x64))
    return (x64 / (1.0 + e)).astype(x.dtype)


def _sign(x):
    return np.sign(x)


def _int_safe(fn):
    """Wrap an integer op so that division by zero gives 0 (numpy's answer) without a warning."""
    def run(a, b):
        with np.errstate(divide="ignore", invalid="ignore"):
            return fn(a, b)
    return run


# ---- unary ----
_UNARY = {
    "neg": (np.negative, "(-a)"),
    "abs": (np.abs, "abs(a)"),
    "square": (np.square, "(a * a)"),
    "sqrt": (np.sqrt, "math.sqrt(a) if a >= 0 else math.nan"),
    "rsqrt": (lambda x: 1 / np.sqrt(x), "(1.0 / math.sqrt(a)) if a > 0 else (math.copysign(math.inf, a) if a == 0 else math.nan)"),
    "exp": (np.exp, "math.exp(a) if a < 88.8 else (math.inf if a > 0 else a)"),
    "expm1": (np.expm1, "math.expm1(a) if a < 88.8 else (math.inf if a > 0 else a)"),
    "log": (np.log, "(math.log(a) if a > 0 else (-math.inf if a == 0 else math.nan))"),
    "log1p": (np.log1p, "(math.log1p(a) if a > -1 else (-math.inf if a == -1 else math.nan))"),
    "log2": (np.log2, "(math.log2(a) if a > 0 else (-math.inf if a == 0 else math.nan))"),
    "log10": (np.log10, "(math.log10(a) if a > 0 else (-math.inf if a == 0 else math.nan))"),
    "sin": (np.sin, "math.sin(a)"),
    "cos": (np.cos, "math.cos(a)"),
    "tan": (np.tan, "math.tan(a)"),
    "asin": (np.arcsin, "(math.asin(a) if -1 <= a <= 1 else math.nan)"),
    "acos": (np.arccos, "(math.acos(a) if -1 <= a <= 1 else math.nan)"),
    "atan": (np.arctan, "math.atan(a)"),
    "sinh": (np.sinh, "np.sinh(a)"),
    "cosh": (np.cosh, "np.cosh(a)"),
    "tanh": (np.tanh, "math.tanh(a)"),
    "asinh": (np.arcsinh, "math.asinh(a)"),
    "acosh": (np.arccosh, "(math.acosh(a) if a >= 1 else math.nan)"),
    "atanh": (np.arctanh, "np.arctanh(a)"),
    "reciprocal": (np.reciprocal, "(1.0 / a)"),
    "sign": (_sign, "(1 if a > 0 else (-1 if a < 0 else (0 if a == 0 else a)))"),
    "floor": (np.floor, "math.floor(a)"),
    "ceil": (np.ceil, "math.ceil(a)"),
    "trunc": (np.trunc, "float(int(a))"),
    "round": (_round_half_away, "math.copysign(math.floor(abs(a) + 0.5), a)"),
    "rint": (np.rint, "np.rint(a)"),
    "sigmoid": (_sigmoid, "(1.0 / (1.0 + math.exp(-a))) if not a <= -88.7 else 0.0"),
    "relu": (lambda x: np.maximum(x, np.zeros((), x.dtype)), "(a if a > 0 else 0)"),
    "relu6": (lambda x: np.clip(x, 0, 6).astype(x.dtype), "min(max(a, 0), 6)"),
    "erf": (_erf, "math.erf(a)"),
    "erfc": (_erfc, "math.erfc(a)"),
    "gelu": (_gelu, "0.5 * a * (1.0 + math.erf(a * 0.7071067811865476))"),
    "gelu_tanh": (_gelu_tanh, "0.5 * a * (1.0 + math.tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)))"),
    "softplus": (lambda x: np.logaddexp(np.zeros((), x.dtype), x), "(a + math.log1p(math.exp(-a))) if a > 0 else math.log1p(math.exp(a))"),
    "softsign": (lambda x: x / (1 + np.abs(x)), "a / (1.0 + abs(a))"),
    "invert": (np.invert, "(~a)"),
    "copy": (np.copy, "a"),
}
for _name, (_fn, _sc) in _UNARY.items():
    _ew(_name, (lambda f: lambda xs, at: f(xs[0]))(_fn), _sc)

# Predicates give int32 0/1.
_PRED = {
    "isnan": (np.isnan, "(1 if a != a else 0)"),
    "isinf": (np.isinf, "(1 if (a == math.inf or a == -math.inf) else 0)"),
    "isfinite": (np.isfinite, "(1 if (a == a and a != math.inf and a != -math.inf) else 0)"),
    "logical_not": (np.logical_not, "(0 if a else 1)"),
}
for _name, (_fn, _sc) in _PRED.items():
    _ew(_name, (lambda f: lambda xs, at: f(xs[0]))(_fn), _sc, infer=_int32_out)


def _floor_mod(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.mod(a, b)


def _fmod(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.fmod(a, b)


def _pow(a, b):
    if a.dtype.kind in "iu" and np.any(np.asarray(b) < 0):
        raise ValueError("Integers to negative integer powers are not allowed.")
    with np.errstate(all="ignore"):
        return np.power(a, b)


# ---- binary ----
_BINARY = {
    "add": (np.add, "(a + b)"),
    "sub": (np.subtract, "(a - b)"),
    "mul": (np.multiply, "(a * b)"),
    "div": (_int_safe(np.true_divide), "(a / b)"),
    "floordiv": (_int_safe(np.floor_divide), "(a // b)"),
    "mod": (_floor_mod, "(a % b)"),
    "fmod": (_fmod, "math.fmod(a, b)"),
    "pow": (_pow, "(a ** b)"),
    "maximum": (np.maximum, "(a if a >= b or a != a else b)"),
    "minimum": (np.minimum, "(a if a <= b or a != a else b)"),
    "atan2": (np.arctan2, "math.atan2(a, b)"),
    "squared_difference": (lambda a, b: np.square(a - b), "((a - b) * (a - b))"),
    "bitwise_and": (np.bitwise_and, "(a & b)"),
    "bitwise_or": (np.bitwise_or, "(a | b)"),
    "bitwise_xor": (np.bitwise_xor, "(a ^ b)"),
    "left_shift": (np.left_shift, "(a << b)"),
    "right_shift": (np.right_shift, "(a >> b)"),
    "hypot": (np.hypot, "math.hypot(a, b)"),
    "copysign": (np.copysign, "math.copysign(a, b)"),
}
for _name, (_fn, _sc) in _BINARY.items():
    _ew(_name, (lambda f: lambda xs, at: f(xs[0], xs[1]))(_fn), _sc, mnn_type="BinaryOp")

_COMPARE = {
    "equal": (np.equal, "(1 if a == b else 0)"),
    "not_equal": (np.not_equal, "(1 if a != b else 0)"),
    "less": (np.less, "(1 if a < b else 0)"),
    "less_equal": (np.less_equal, "(1 if a <= b else 0)"),
    "greater": (np.greater, "(1 if a > b else 0)"),
    "greater_equal": (np.greater_equal, "(1 if a >= b else 0)"),
    "logical_and": (np.logical_and, "(1 if (a and b) else 0)"),
    "logical_or": (np.logical_or, "(1 if (a or b) else 0)"),
    "logical_xor": (np.logical_xor, "(1 if (bool(a) != bool(b)) else 0)"),
}
for _name, (_fn, _sc) in _COMPARE.items():
    _ew(_name, (lambda f: lambda xs, at: f(xs[0], xs[1]))(_fn), _sc, infer=_int32_out, mnn_type="BinaryOp")

#: Ops whose int32 output is a truth value (usable as a boolean mask when indexing).
BOOLEAN_OPS = frozenset(set(_COMPARE) | {"isnan", "isinf", "isfinite", "logical_not"})


# ---- cast, clip, select ----
def _cast_infer(inputs, attrs):
    return inputs[0].shape, np.dtype(attrs["dtype"])


def _cast_ref(xs, attrs):
    dt = np.dtype(attrs["dtype"])
    x = xs[0]
    if x.dtype.kind == "f" and dt.kind in "iu":
        with np.errstate(invalid="ignore"):
            return x.astype(dt)
    return x.astype(dt)


register(OpDef("cast", "elementwise", _cast_infer, _cast_ref, scalar="a", mnn_type="Cast"))


def _clip_ref(xs, attrs):
    return np.clip(xs[0], attrs["lo"], attrs["hi"]).astype(xs[0].dtype)


register(OpDef("clip", "elementwise", lambda i, a: (i[0].shape, i[0].dtype), _clip_ref,
               scalar="min(max(a, lo), hi)", mnn_type="ReLU6"))


def _select_infer(inputs, attrs):
    return broadcast_shape(*(i.shape for i in inputs)), inputs[1].dtype


register(OpDef("select", "elementwise", _select_infer, lambda xs, at: np.where(xs[0] != 0, xs[1], xs[2]),
               scalar="(b if a else c)", mnn_type="Select"))


#: Elementwise ops whose reference is exactly one numpy ufunc applied to the inputs, with the
#: reference registered for them here: op -> (ufunc, reference). An eager evaluator may call the
#: ufunc directly where the registry still holds that reference (nothing replaced the op).
UFUNC_OPS = {name: (fn, registry_get(name).ref) for table in (_UNARY, _PRED, _BINARY, _COMPARE)
             for name, (fn, _sc) in table.items() if isinstance(fn, np.ufunc)}
# references that are one ufunc under an error state (the eager route ignores every error itself)
UFUNC_OPS.update({name: (fn, registry_get(name).ref) for name, fn in (
    ("sign", np.sign), ("div", np.true_divide), ("floordiv", np.floor_divide), ("mod", np.mod),
    ("fmod", np.fmod))})
