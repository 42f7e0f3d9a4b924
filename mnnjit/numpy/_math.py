"""Elementwise math: ufunc-like functions built from the registry's elementwise ops (compositions fuse)."""
from __future__ import annotations

import math as _math
from typing import Any

import numpy as _np

from .._dtypes import I32
from .. import settings as _settings
from ..ops import build as B
from ..var import Var
from ._core import finish, node, to_float, var

_FLOAT_MAX = float(_np.finfo(_np.float32).max)


_IGNORED_UFUNC_KWARGS = frozenset({"casting", "order", "subok", "signature"})


def ufunc_finish(name: str, res: Var, out: Any, kwargs: dict) -> Var:
    """numpy's ufunc keywords: ``dtype=`` (result cast), ``where=`` (elsewhere ``out``'s old values or 0),
    ``out=``; ``casting``/``order``/``subok``/``signature`` have no effect; others are a TypeError."""
    if out is None and not kwargs:
        return res
    unknown = set(kwargs) - _IGNORED_UFUNC_KWARGS - {"dtype", "where"}
    if unknown:
        raise TypeError(f"{name}() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    if isinstance(out, tuple) and len(out) == 1:
        out = out[0]
    if kwargs.get("dtype") is not None:
        res = B.cast(res, kwargs["dtype"])
    where = kwargs.get("where", True)
    if where is not True:
        if out is not None:
            base = B.cast(out, res._node.dtype)
        else:
            base = B.broadcast_to(B.cast(0, res._node.dtype), res._node.shape)
        res = B.select(where, res, base)
        res = B.broadcast_to(res, _np.broadcast_shapes(res._node.shape, node(where).shape))
    return finish(res, out)


def _unary(name: str, op: str, float_input: bool = False):
    def fn(x: Any, out: Any = None, **kwargs: Any) -> Var:
        src = var(to_float(x)) if float_input else x
        if out is None and not kwargs:  # the common call: no ufunc keywords to apply
            return B.unary(op, src)
        return ufunc_finish(name, B.unary(op, src), out, kwargs)
    fn.__name__ = name
    fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name} (numpy.{name}; MNN's 32-bit dtypes)."
    return fn


def _binary(name: str, op: str, float_inputs: bool = False):
    def fn(x1: Any, x2: Any, out: Any = None, **kwargs: Any) -> Var:
        if float_inputs:
            x1, x2 = var(to_float(x1)), var(to_float(x2))
        if out is None and not kwargs:  # the common call: no ufunc keywords to apply
            return B.binary(op, x1, x2)
        return ufunc_finish(name, B.binary(op, x1, x2), out, kwargs)
    fn.__name__ = name
    fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name} with broadcasting (numpy.{name}; MNN's 32-bit dtypes)."
    return fn


def _finish_pair(pair: tuple[Var, Var], out: Any) -> tuple[Var, Var]:
    """``out=(o1, o2)`` for two-output functions."""
    if out is None:
        return pair
    if not isinstance(out, tuple) or len(out) != 2:
        raise TypeError("out must be a tuple of two Vars for a function with two outputs")
    return tuple(finish(r, o) if o is not None else r for r, o in zip(pair, out))  # type: ignore[return-value]


UNARY = {
    "negative": "neg", "abs": "abs", "absolute": "abs", "square": "square", "sqrt": "sqrt", "exp": "exp",
    "expm1": "expm1", "log": "log", "log1p": "log1p", "log2": "log2", "log10": "log10", "sin": "sin",
    "cos": "cos", "tan": "tan", "arcsin": "asin", "arccos": "acos", "arctan": "atan", "sinh": "sinh",
    "cosh": "cosh", "tanh": "tanh", "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh",
    "reciprocal": "reciprocal", "sign": "sign", "floor": "floor", "ceil": "ceil", "trunc": "trunc",
    "fix": "trunc", "isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite",
    "logical_not": "logical_not", "invert": "invert", "bitwise_not": "invert",
}
FLOAT_UNARY = {"rint": "rint", "fabs": "abs", "cbrt": "cbrt", "spacing": "spacing", "i0": "i0"}
BINARY = {
    "add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "true_divide": "div",
    "floor_divide": "floordiv", "mod": "mod", "remainder": "mod", "fmod": "fmod", "power": "pow",
    "maximum": "maximum", "minimum": "minimum", "arctan2": "atan2",
    "hypot": "hypot", "copysign": "copysign", "equal": "equal", "not_equal": "not_equal", "less": "less",
    "less_equal": "less_equal", "greater": "greater", "greater_equal": "greater_equal",
    "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor",
    "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
    "left_shift": "left_shift", "right_shift": "right_shift", "gcd": "gcd", "lcm": "lcm",
}
FLOAT_BINARY = {"float_power": "pow", "nextafter": "nextafter"}

_funcs: dict[str, Any] = {}
for _name, _op in UNARY.items():
    _funcs[_name] = _unary(_name, _op)
for _name, _op in FLOAT_UNARY.items():
    _funcs[_name] = _unary(_name, _op, float_input=True)
for _name, _op in BINARY.items():
    _funcs[_name] = _binary(_name, _op)
for _name, _op in FLOAT_BINARY.items():
    _funcs[_name] = _binary(_name, _op, float_inputs=True)
globals().update(_funcs)


def _int_only(name: str, *xs: Any) -> None:
    for x in xs:
        if node(x).dtype.kind == "f":
            raise TypeError(f"ufunc '{name}' not supported for the input types, and the inputs could not be "
                            "safely coerced to any supported types according to the casting rule ''safe''")


def gcd(x1: Any, x2: Any, out: Any = None) -> Var:  # noqa: F811
    """Greatest common divisor, elementwise (integers only)."""
    _int_only("gcd", x1, x2)
    return finish(B.binary("gcd", x1, x2), out)


def lcm(x1: Any, x2: Any, out: Any = None) -> Var:  # noqa: F811
    """Least common multiple, elementwise (integers only)."""
    _int_only("lcm", x1, x2)
    return finish(B.binary("lcm", x1, x2), out)


def positive(x: Any, deepCopy: bool = False, out: Any = None) -> Var:  # noqa: N803 - MNN's name
    """``+x`` (a copy)."""
    return finish(var(node(x)), out)


def around(x: Any, decimals: int = 0, out: Any = None) -> Var:
    """Round half away from zero (MNN's documented rounding) to ``decimals`` places."""
    n = node(x)
    decimals = int(decimals)
    if n.dtype.kind != "f":
        if decimals >= 0:
            return finish(var(n), out)
        scale = 10 ** (-decimals)
        f = B.unary("round", B.binary("div", var(n), float(scale)))
        return finish(B.cast(B.binary("mul", f, float(scale)), n.dtype), out)
    if decimals == 0:
        return finish(B.unary("round", var(n)), out)
    if decimals > 0:
        scale = float(10.0 ** decimals)
        return finish(B.binary("div", B.unary("round", B.binary("mul", var(n), scale)), scale), out)
    scale = float(10.0 ** (-decimals))
    return finish(B.binary("mul", B.unary("round", B.binary("div", var(n), scale)), scale), out)


round_ = around
round = around  # noqa: A001


def clip(x: Any, a_min: Any = None, a_max: Any = None, out: Any = None, **kwargs: Any) -> Var:
    """``x`` limited to [a_min, a_max] (numpy.clip: ``minimum(maximum(x, a_min), a_max)``)."""
    if "min" in kwargs:
        a_min = kwargs.pop("min")
    if "max" in kwargs:
        a_max = kwargs.pop("max")
    n = node(x)
    scalars = all(isinstance(v, (int, float)) or v is None for v in (a_min, a_max))
    if scalars and not (n.dtype.kind != "f" and any(isinstance(v, float) for v in (a_min, a_max))):
        lo = -_math.inf if a_min is None else a_min
        hi = _math.inf if a_max is None else a_max
        if n.dtype.kind != "f":
            info = _np.iinfo(n.dtype)
            lo, hi = (info.min if a_min is None else a_min), (info.max if a_max is None else a_max)
            if lo > hi:
                return finish(B.broadcast_to(B.cast(hi, n.dtype), n.shape), out)
        return finish(var(B.make_node("clip", (n,), {"lo": lo, "hi": hi})), out)
    res: Any = var(n)
    if a_min is not None:
        res = B.binary("maximum", res, a_min)
    if a_max is not None:
        res = B.binary("minimum", res, a_max)
    return finish(res, out)


def fmax(x1: Any, x2: Any, out: Any = None) -> Var:
    """Elementwise maximum ignoring NaNs (NaN only when both are NaN)."""
    m = B.binary("maximum", x1, x2)
    if m._node.dtype.kind != "f":
        return finish(m, out)
    a, b = B.cast(x1, m._node.dtype), B.cast(x2, m._node.dtype)
    return finish(B.select(B.unary("isnan", b), a, B.select(B.unary("isnan", a), b, m)), out)


def fmin(x1: Any, x2: Any, out: Any = None) -> Var:
    """Elementwise minimum ignoring NaNs (NaN only when both are NaN)."""
    m = B.binary("minimum", x1, x2)
    if m._node.dtype.kind != "f":
        return finish(m, out)
    a, b = B.cast(x1, m._node.dtype), B.cast(x2, m._node.dtype)
    return finish(B.select(B.unary("isnan", b), a, B.select(B.unary("isnan", a), b, m)), out)


def divmod(x1: Any, x2: Any, out: Any = None) -> tuple[Var, Var]:  # noqa: A001
    """``(floor_divide(x1, x2), mod(x1, x2))``."""
    if type(x1) is Var and type(x2) is Var:
        n1, n2 = x1._node, x2._node
        if n1.dtype == _np.float32 and n2.dtype == _np.float32 and n1.shape == n2.shape:
            return _finish_pair(B.make("divmod", [n1, n2]), out)     # one pass for both
    return _finish_pair((B.binary("floordiv", x1, x2), B.binary("mod", x1, x2)), out)


def modf(x: Any, out: Any = None) -> tuple[Var, Var]:
    """Fractional and integral parts (both with ``x``'s sign; float32)."""
    n = to_float(x)
    if n.dtype == _np.float32:
        return _finish_pair(B.make("modf", [n]), out)     # numpy's one pass
    f = var(n)
    ip = B.unary("trunc", f)
    frac = B.binary("copysign", B.binary("sub", f, ip), f)   # -3.0 -> (-0.0, -3.0)
    frac = B.select(B.unary("isinf", f), B.binary("copysign", 0.0, f), frac)
    return _finish_pair((frac, ip), out)


def frexp(x: Any, out: Any = None) -> tuple[Var, Var]:
    """Mantissa (float32) and exponent (int32) with ``x = m * 2**e``."""
    return _finish_pair(B.make("frexp", [var(to_float(x))]), out)


def ldexp(x1: Any, x2: Any, out: Any = None) -> Var:
    """``x1 * 2**x2``; a float exponent gives ``x1 * exp2(x2)`` as MNN documents (``ldexp(2., 3.)`` -> 16.)."""
    n2 = node(x2)
    if n2.dtype.kind == "f":
        return finish(B.binary("mul", var(to_float(x1)), _w_op("exp2", to_float(x2))), out)
    a, b = to_float(x1), B.cast_node(n2, I32)
    return finish(var(B.make_node("ldexp", (a, b))), out)


def signbit(x: Any, out: Any = None) -> Var:
    """1 where the sign bit is set (negative numbers, -0.0), else 0 (int32)."""
    n = to_float(x)
    return finish(B.unary("signbit", var(n)) if n.dtype == _np.float32 else var(B.make_node("signbit", (n,))), out)


def exp2(x: Any, out: Any = None, **kwargs: Any) -> Var:
    """``2 ** x`` (float32)."""
    return ufunc_finish("exp2", _w_op("exp2", to_float(x)), out, kwargs)


def deg2rad(x: Any, out: Any = None) -> Var:
    """Degrees to radians (float32)."""
    return finish(B.binary("mul", var(to_float(x)), _math.pi / 180.0), out)


radians = deg2rad


def rad2deg(x: Any, out: Any = None) -> Var:
    """Radians to degrees (float32)."""
    return finish(B.binary("mul", var(to_float(x)), 180.0 / _math.pi), out)


degrees = rad2deg


def sinc(x: Any) -> Var:
    """``sin(pi x) / (pi x)`` (1 at 0; float32)."""
    n = to_float(x)
    if n.dtype == _np.float32 and n.size < _settings.threshold():
        return var(B.make_node("sinc", (n,)))   # one op (above the threshold the nodes below fuse)
    f = var(n)
    px = B.binary("mul", f, _math.pi)
    zero = B.binary("equal", f, 0.0)
    safe = B.select(zero, 1.0, px)
    return B.select(zero, 1.0, B.binary("div", B.unary("sin", safe), safe))


def heaviside(x1: Any, x2: Any, out: Any = None) -> Var:
    """0 for x1 < 0, x2 for x1 == 0, 1 for x1 > 0 (NaN for NaN)."""
    a, b = var(to_float(x1)), var(to_float(x2))
    res = B.select(B.binary("less", a, 0.0), 0.0, B.select(B.binary("greater", a, 0.0), 1.0, b))
    return finish(B.select(B.unary("isnan", a), a, res), out)


def logaddexp(x1: Any, x2: Any, out: Any = None, **kwargs: Any) -> Var:
    """``log(exp(x1) + exp(x2))`` without overflow (float32)."""
    return ufunc_finish("logaddexp", _w_op("logaddexp", to_float(x1), to_float(x2)), out, kwargs)


def logaddexp2(x1: Any, x2: Any, out: Any = None, **kwargs: Any) -> Var:
    """``log2(2**x1 + 2**x2)`` without overflow (float32)."""
    return ufunc_finish("logaddexp2", _w_op("logaddexp2", to_float(x1), to_float(x2)), out, kwargs)


def _w_op(op: str, *nodes: Any) -> Var:
    """An elementwise op on float32 nodes, broadcast as numpy does."""
    if len(nodes) == 1 and nodes[0].dtype == _np.float32:     # (signature cache, no dtype rule applies)
        return B.unary(op, var(nodes[0]))
    if len(nodes) == 2 and nodes[0].dtype == _np.float32 and nodes[1].dtype == _np.float32:
        return B.binary(op, var(nodes[0]), var(nodes[1]))
    return var(B.make_node(op, nodes))


def nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Var:
    """NaN -> ``nan``, +inf -> ``posinf`` (float32 max), -inf -> ``neginf`` (float32 min)."""
    n = node(x)
    if n.dtype.kind != "f":
        return var(n)
    hi = _FLOAT_MAX if posinf is None else posinf
    lo = -_FLOAT_MAX if neginf is None else neginf
    v = var(n)
    res = B.select(B.unary("isnan", v), float(nan), v)
    res = B.select(B.binary("equal", v, _math.inf), float(hi), res)
    return B.select(B.binary("equal", v, -_math.inf), float(lo), res)


def real_if_close(a: Any, tol: float = 100) -> Var:
    """``a`` itself (mnnjit has no complex numbers)."""
    return var(node(a))


def unwrap(p: Any, discont: float | None = None, axis: int = -1, *, period: float = 2 * _math.pi) -> Var:
    """Phase unwrapping along ``axis`` (numpy.unwrap), float32."""
    from ._stats import cumsum, diff
    f = var(to_float(p))
    nd = len(f._node.shape)
    ax = B.normalize_axis(axis, nd)
    if f._node.shape[ax] < 2:
        return f
    half = period / 2.0
    if discont is None:
        discont = half
    dd = diff(f, axis=ax)
    ddmod = B.binary("sub", B.binary("mod", B.binary("add", dd, half), float(period)), half)
    fix = B.binary("logical_and", B.binary("equal", ddmod, -half), B.binary("greater", dd, 0.0))
    ddmod = B.select(fix, half, ddmod)
    corr = B.binary("sub", ddmod, dd)
    corr = B.select(B.binary("less", B.unary("abs", dd), float(max(discont, half))), 0.0, corr)
    csum = cumsum(corr, axis=ax)
    first = [slice(None)] * nd
    first[ax] = slice(0, 1)
    zeros = B.binary("mul", f[tuple(first)], 0.0)
    return B.binary("add", f, B.concat([zeros, csum], ax))


__all__ = sorted(set(_funcs) | {
    "gcd", "lcm", "positive", "around", "round_", "round", "clip", "fmax", "fmin", "divmod", "modf", "frexp",
    "ldexp", "signbit", "exp2", "deg2rad", "radians", "rad2deg", "degrees", "sinc", "heaviside", "logaddexp",
    "logaddexp2", "nan_to_num", "real_if_close", "unwrap"})

