"""MNN.expr.jsonop: build an op described in MNN's JSON op format."""
from __future__ import annotations

from typing import Any, Sequence

from ..ops import build as B
from ..var import Var

_BINARY = {0: "add", 1: "sub", 2: "mul", 3: "div", 4: "maximum", 5: "minimum", 6: "pow", 7: "div", 8: "minimum",
           9: "maximum", 10: "greater", 11: "greater_equal", 12: "less", 13: "floordiv", 14: "squared_difference",
           15: "equal", 16: "less_equal", 17: "mod", 19: "fmod", 20: "atan2", 21: "logical_or", 22: "not_equal",
           23: "bitwise_and", 24: "bitwise_or", 25: "bitwise_xor", 26: "logical_xor", 27: "left_shift",
           28: "right_shift"}
_UNARY = {0: "abs", 1: "neg", 2: "floor", 3: "ceil", 4: "square", 5: "sqrt", 6: "rsqrt", 7: "exp", 8: "log",
          9: "sin", 10: "cos", 11: "tan", 12: "asin", 13: "acos", 14: "atan", 15: "reciprocal", 16: "log1p",
          17: "softplus", 18: "acosh", 19: "sinh", 20: "asinh", 21: "atanh", 22: "sign", 23: "round", 24: "cosh",
          25: "erf", 26: "erfc", 28: "expm1", 29: "sigmoid", 30: "tanh", 31: "hard_swish", 32: "gelu_tanh",
          33: "gelu", 34: "silu"}
_BINARY_NAMES = {"ADD": 0, "SUB": 1, "MUL": 2, "DIV": 3, "MAX_TEMP": 4, "MIN_TEMP": 5, "POW": 6, "REALDIV": 7,
                 "MINIMUM": 8, "MAXIMUM": 9, "GREATER": 10, "GREATER_EQUAL": 11, "LESS": 12, "FLOORDIV": 13,
                 "SquaredDifference": 14, "EQUAL": 15, "LESS_EQUAL": 16, "FLOORMOD": 17, "MOD": 19, "ATAN2": 20,
                 "LOGICALOR": 21, "NOTEQUAL": 22, "BITWISE_AND": 23, "BITWISE_OR": 24, "BITWISE_XOR": 25,
                 "LOGICALXOR": 26, "LEFTSHIFT": 27, "RIGHTSHIFT": 28}
_UNARY_NAMES = {"ABS": 0, "NEG": 1, "FLOOR": 2, "CEIL": 3, "SQUARE": 4, "SQRT": 5, "RSQRT": 6, "EXP": 7, "LOG": 8,
                "SIN": 9, "COS": 10, "TAN": 11, "ASIN": 12, "ACOS": 13, "ATAN": 14, "RECIPROCAL": 15, "LOG1P": 16,
                "BNLL": 17, "ACOSH": 18, "SINH": 19, "ASINH": 20, "ATANH": 21, "SIGN": 22, "ROUND": 23, "COSH": 24,
                "ERF": 25, "ERFC": 26, "ERFINV": 27, "EXPM1": 28, "SIGMOID": 29, "TANH": 30, "HARDSWISH": 31,
                "GELU": 32, "GELU_STANDARD": 33, "SILU": 34}


def _enum(value: Any, names: dict) -> int:
    if isinstance(value, str):
        if value not in names:
            raise ValueError(f"jsonop: unknown operation {value!r}")
        return names[value]
    return int(value)


def jsonop(inputs: Sequence[Var], describe: str, output_number: int) -> Any:
    """Build an op from MNN's JSON op description (``{"type": ..., "main": {...}}``).

    Supported types: BinaryOp, UnaryOp, ReLU, ReLU6, Sigmoid, TanH, Softmax, Concat, Reshape, Transpose
    (perm as a second input), Cast. Others raise NotImplementedError naming the type.
    """
    import json  # only jsonop needs it: not loaded by import mnnjit.expr
    desc = json.loads(describe) if isinstance(describe, str) else dict(describe)
    typ = desc.get("type")
    main = desc.get("main") or {}
    xs = list(inputs)
    from . import _nn, _shape
    if typ == "BinaryOp":
        out = B.binary(_BINARY[_enum(main.get("opType", 0), _BINARY_NAMES)], xs[0], xs[1])
    elif typ == "UnaryOp":
        op = _enum(main.get("opType", 0), _UNARY_NAMES)
        out = _nn.erfinv(xs[0]) if op == 27 else B.unary(_UNARY[op], xs[0])
    elif typ == "ReLU":
        out = _nn.relu(xs[0], float(main.get("slope", 0.0)))
    elif typ == "ReLU6":
        out = _nn.relu6(xs[0], float(main.get("minValue", 0.0)), float(main.get("maxValue", 6.0)))
    elif typ == "Sigmoid":
        out = B.unary("sigmoid", xs[0])
    elif typ == "TanH":
        out = B.unary("tanh", xs[0])
    elif typ == "Softmax":
        out = _nn.softmax(xs[0], int(main.get("axis", -1)))
    elif typ == "Concat":
        out = _shape.concat(xs, int(main.get("axis", 0)))
    elif typ == "Reshape":
        out = _shape.reshape(xs[0], main["dims"]) if "dims" in main else _shape.reshape(xs[0], xs[1])
    elif typ == "Transpose" or typ == "Permute":
        out = _shape.transpose(xs[0], main["dims"] if "dims" in main else xs[1])
    elif typ == "Cast":
        from .._dtypes import as_np_dtype
        dt = {"DT_FLOAT": "float32", "DT_INT32": "int32", "DT_UINT8": "uint8", "DT_INT8": "int8"}.get(
            main.get("dstT", "DT_FLOAT"), "float32")
        out = B.cast(xs[0], as_np_dtype(dt))
    else:
        raise NotImplementedError(f"jsonop: op type {typ!r} is not supported by mnnjit's jsonop")
    return [out] if int(output_number) > 1 else out
