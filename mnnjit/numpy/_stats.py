"""Reductions and statistics: sum/mean/var/std, nan-aware variants, median/percentile, scans, histograms..."""
from __future__ import annotations

import math as _math
from typing import Any

import numpy as _np

from .._dtypes import F32, I32
from .._dtypes import as_np_dtype as _as_np_dtype
from .. import settings as _settings
from ..ops import build as B
from ..var import Var
from ._core import axis_arg, const, finish, flat, is_int, node, scalar_or_var, scalar_value, to_float
from ._core import var as _w


# ---------------------------------------------------------------- plain reductions
_BY_SHAPE = frozenset({"reduce_sum", "reduce_prod"})


def _check_kwargs(name: str, kwargs: dict, allowed: tuple = ()) -> None:
    """numpy's TypeError for keywords a function does not take."""
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise TypeError(f"{name}() got an unexpected keyword argument {unknown[0]!r}")


_COMBINE = {"reduce_sum": "add", "reduce_prod": "mul", "reduce_max": "maximum", "reduce_min": "minimum",
            "reduce_all": "logical_and", "reduce_any": "logical_or"}


def _identity(op: str, dt: _np.dtype):
    if op in ("reduce_sum", "reduce_any"):
        return 0
    if op in ("reduce_prod", "reduce_all"):
        return 1
    info = _np.finfo(dt) if dt.kind == "f" else _np.iinfo(dt)
    if dt.kind == "f":
        return -_math.inf if op == "reduce_max" else _math.inf
    return int(info.min) if op == "reduce_max" else int(info.max)


def _reduce(op: str, a: Any, axis: Any, keepdims: Any, dtype: Any = None, out: Any = None,
            kwargs: dict | None = None):
    """A reduction with numpy's ``where=`` (masked elements ignored) and ``initial=`` keywords."""
    if not kwargs and dtype is None and out is None:  # the common call: no keywords to apply
        if axis is None and not keepdims:   # a whole-array reduction: a Python scalar
            return scalar_value(B.reduce(op, a, None, False))
        res = B.reduce(op, a, axis, bool(keepdims))
        return scalar_or_var(res, axis, bool(keepdims), by_shape=op in _BY_SHAPE)
    kwargs = kwargs or {}
    unknown = set(kwargs) - {"where", "initial"}
    if unknown:
        raise TypeError(f"{op.replace('reduce_', '')}() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    where = kwargs.get("where", True)
    initial = kwargs.get("initial", None)
    x = _w(node(a))
    if dtype is not None:
        x = B.cast(x, dtype)
    if where is not True:
        if op == "reduce_mean":
            mask = B.broadcast_to(B.binary("not_equal", where, 0), x._node.shape)
            s = B.reduce("reduce_sum", B.select(mask, B.cast(x, F32), 0.0), axis, bool(keepdims))
            c = B.cast(B.reduce("reduce_sum", mask, axis, bool(keepdims)), F32)
            res = B.binary("div", s, c)
            return finish(res, out) if out is not None else scalar_or_var(res, axis, bool(keepdims))
        if op not in _COMBINE:
            raise TypeError(f"{op.replace('reduce_', '')}() does not support where=")
        if op in ("reduce_max", "reduce_min") and initial is None:
            raise ValueError(f"reduction operation '{'maximum' if op == 'reduce_max' else 'minimum'}' does not "
                             "have an identity, so to use a where mask one has to specify 'initial'")
        x = B.broadcast_to(B.select(where, x, _identity(op, x._node.dtype)),
                           _np.broadcast_shapes(x._node.shape, node(where).shape))
    if initial is not None and op not in _COMBINE:
        raise TypeError(f"{op.replace('reduce_', '')}() got an unexpected keyword argument 'initial'")
    if initial is not None:
        # reduce [x..., initial] over the reduced axes: numpy's ``initial`` (also for empty slices)
        xl, kept, kd_shape = _to_last(x._node, axis)
        init = B.broadcast_to(B.cast(initial, x._node.dtype), kept + (1,))
        res = B.reduce(op, B.concat([xl, init], len(kept)), len(kept), False)
        if keepdims:
            res = B.reshape(res, kd_shape)
    else:
        res = B.reduce(op, x, axis, bool(keepdims))
    if out is not None:
        return finish(res, out)
    return scalar_or_var(res, axis, bool(keepdims), by_shape=op in _BY_SHAPE)


def sum(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, dtype: Any = None,  # noqa: A001
        **kwargs: Any):
    """Sum over ``axis`` (int32 for integers; a Python scalar for the whole array)."""
    return _reduce("reduce_sum", a, axis, keepdims, dtype, out, kwargs)


def prod(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, dtype: Any = None, **kwargs: Any):
    """Product over ``axis`` (a Python scalar for the whole array)."""
    return _reduce("reduce_prod", a, axis, keepdims, dtype, out, kwargs)


def mean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, **kwargs: Any):
    """Arithmetic mean over ``axis`` (float32; a Python float for the whole array)."""
    return _reduce("reduce_mean", a, axis, keepdims, dtype, out, kwargs)


def amax(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, **kwargs: Any):
    """Maximum over ``axis`` (numpy's ValueError for empty input)."""
    return _reduce("reduce_max", a, axis, keepdims, None, out, kwargs)


def amin(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, **kwargs: Any):
    """Minimum over ``axis`` (numpy's ValueError for empty input)."""
    return _reduce("reduce_min", a, axis, keepdims, None, out, kwargs)


max = amax  # noqa: A001
min = amin  # noqa: A001


def all(a: Any, axis: Any = None, out: Any = None, keepdims: Any = None, **kwargs: Any):  # noqa: A001
    """Whether all elements are non-zero (a Python bool for the whole array; int32 0/1 per axis)."""
    res = _reduce("reduce_all", a, axis, keepdims, None, out, kwargs)
    return bool(res) if not isinstance(res, Var) else res


def any(a: Any, axis: Any = None, out: Any = None, keepdims: Any = None, **kwargs: Any):  # noqa: A001
    """Whether any element is non-zero (a Python bool for the whole array; int32 0/1 per axis)."""
    res = _reduce("reduce_any", a, axis, keepdims, None, out, kwargs)
    return bool(res) if not isinstance(res, Var) else res


def _arg(op: str, a: Any, axis: Any, out: Any, keepdims: bool):
    n = node(a)
    if axis is None:
        # (the one axis of the flat array; a 1-D Var is its own flat array)
        res = B.reduce(op, a if type(a) is Var and len(n.shape) == 1 else flat(_w(n)), None, False)
        if keepdims:
            return finish(B.reshape(res, (1,) * len(n.shape)), out)
        return finish(res, out) if out is not None else int(scalar_value(res))
    return finish(B.reduce(op, _w(n), axis, keepdims), out)


def argmax(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False):
    """Index of the maximum along ``axis`` (flattened when None: a Python int)."""
    return _arg("argmax", a, axis, out, keepdims)


def argmin(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False):
    """Index of the minimum along ``axis`` (flattened when None: a Python int)."""
    return _arg("argmin", a, axis, out, keepdims)


def ptp(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False):
    """Range (maximum - minimum) along ``axis``."""
    n = node(a)
    if n.size < _settings.threshold():     # one op (above the threshold the nodes below fuse)
        res = B.reduce("ptp", a if type(a) is Var else _w(n), axis, bool(keepdims))    # (signature-cached)
        return finish(scalar_or_var(res, axis, keepdims) if out is None else res, out)
    hi = B.reduce("reduce_max", a, axis, keepdims)
    lo = B.reduce("reduce_min", a, axis, keepdims)
    res = B.binary("sub", hi, lo)
    return finish(scalar_or_var(res, axis, keepdims) if out is None else res, out)


def _count(n, axes: tuple[int, ...]) -> int:
    c = 1
    for ax in axes:
        c *= n.shape[ax]
    return c


def _var_impl(a: Any, axis: Any, dtype: Any, keepdims: bool, ddof: float, nan: bool,
              sqrt: bool | None = None) -> Var:
    """The variance (``nan``: ignoring NaNs); ``sqrt`` True: its square root (std), False: as it
    is, None: as it is, the caller taking its square root itself."""
    n = to_float(a)
    if dtype is not None:
        n = B.cast_node(n, _as_np_dtype(dtype))
    axes = B.normalize_axes(axis, len(n.shape))
    x = _w(n)
    if nan:
        valid = B.unary("logical_not", B.unary("isnan", x))
        x0 = B.select(valid, x, 0.0)
        cnt = B.cast(B.reduce("reduce_sum", valid, axes, True), F32)
        m = B.binary("div", B.reduce("reduce_sum", x0, axes, True), cnt)
        dev = B.select(valid, B.binary("sub", x, m), 0.0)
        ss = B.reduce("reduce_sum", B.unary("square", dev), axes, keepdims)
        c = B.cast(B.reduce("reduce_sum", valid, axes, keepdims), F32)
        return B.binary("div", ss, B.unary("relu", B.binary("sub", c, float(ddof))))
    denom = _builtin_max(_count(n, axes) - ddof, 0)
    if sqrt is not None and n.dtype == F32 and n.size < _settings.threshold():
        # one op (above the threshold the nodes below fuse into compiled kernels)
        return _w(B.make_node("variance", (n,), {"axes": axes, "keepdims": bool(keepdims),
                                                 "denom": float(denom), "sqrt": sqrt}))
    m = B.reduce("reduce_mean", x, axes, True)
    ss = B.reduce("reduce_sum", B.unary("square", B.binary("sub", x, m)), axes, keepdims)
    res = B.binary("div", ss, float(denom))
    return res if not sqrt else B.unary("sqrt", res)


_builtin_max = __builtins__["max"] if isinstance(__builtins__, dict) else __builtins__.max


def var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
        keepdims: bool = False, **kwargs: Any):
    """Variance ``mean((x - mean(x))**2)`` over ``axis`` (float32; Python float for the whole array)."""
    ddof = _ddof("var", ddof, kwargs)
    res = _var_impl(a, axis, dtype, keepdims, ddof, False, False)
    return finish(scalar_or_var(res, axis, keepdims) if out is None else res, out)


def std(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
        keepdims: bool = False, **kwargs: Any):
    """Standard deviation over ``axis`` (float32; Python float for the whole array)."""
    ddof = _ddof("std", ddof, kwargs)
    res = _var_impl(a, axis, dtype, keepdims, ddof, False, True)
    return finish(scalar_or_var(res, axis, keepdims) if out is None else res, out)


def nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
        keepdims: bool = False, **kwargs: Any):
    """Variance ignoring NaNs."""
    ddof = _ddof("nanvar", ddof, kwargs)
    res = _var_impl(a, axis, dtype, keepdims, ddof, True)
    return finish(scalar_or_var(res, axis, keepdims) if out is None else res, out)


def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
        keepdims: bool = False, **kwargs: Any):
    """Standard deviation ignoring NaNs."""
    ddof = _ddof("nanstd", ddof, kwargs)
    res = B.unary("sqrt", _var_impl(a, axis, dtype, keepdims, ddof, True))
    return finish(scalar_or_var(res, axis, keepdims) if out is None else res, out)


def _ddof(name: str, ddof: float, kwargs: dict) -> float:
    _check_kwargs(name, kwargs, ("correction",))
    return kwargs.get("correction", ddof)


def _nan_fill(a: Any, value: float) -> Var:
    n = node(a)
    if n.dtype.kind != "f":
        return _w(n)
    x = _w(n)
    return B.select(B.unary("isnan", x), value, x)


def nansum(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, dtype: Any = None, **kwargs: Any):
    """Sum treating NaNs as zero."""
    _check_kwargs("nansum", kwargs)
    return _reduce("reduce_sum", _nan_fill(a, 0.0), axis, keepdims, dtype, out)


def nanprod(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, dtype: Any = None, **kwargs: Any):
    """Product treating NaNs as one."""
    _check_kwargs("nanprod", kwargs)
    return _reduce("reduce_prod", _nan_fill(a, 1.0), axis, keepdims, dtype, out)


def nanmean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, **kwargs: Any):
    """Mean ignoring NaNs (NaN for all-NaN slices)."""
    _check_kwargs("nanmean", kwargs)
    n = to_float(a)
    x = _w(n)
    valid = B.unary("logical_not", B.unary("isnan", x))
    s = B.reduce("reduce_sum", B.select(valid, x, 0.0), axis, keepdims)
    c = B.cast(B.reduce("reduce_sum", valid, axis, keepdims), F32)
    res = B.binary("div", s, c)
    return finish(scalar_or_var(res, axis, keepdims) if out is None else res, out)


def _nan_extreme(op: str, a: Any, axis: Any, out: Any, keepdims: bool):
    n = node(a)
    if n.dtype.kind != "f":
        return _reduce(op, _w(n), axis, keepdims, None, out)
    x = _w(n)
    isn = B.unary("isnan", x)
    fill = -_math.inf if op == "reduce_max" else _math.inf
    m = B.reduce(op, B.select(isn, fill, x), axis, keepdims)
    res = B.select(B.reduce("reduce_all", isn, axis, keepdims), _math.nan, m)
    return finish(scalar_or_var(res, axis, keepdims) if out is None else res, out)


def nanmax(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, **kwargs: Any):
    """Maximum ignoring NaNs (NaN for all-NaN slices)."""
    _check_kwargs("nanmax", kwargs)
    return _nan_extreme("reduce_max", a, axis, out, keepdims)


def nanmin(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, **kwargs: Any):
    """Minimum ignoring NaNs (NaN for all-NaN slices)."""
    _check_kwargs("nanmin", kwargs)
    return _nan_extreme("reduce_min", a, axis, out, keepdims)


def _nan_arg(op: str, a: Any, axis: Any, out: Any, keepdims: bool):
    n = node(a)
    if n.dtype.kind != "f":
        return _arg(op, _w(n), axis, out, keepdims)
    x = _w(n)
    isn = B.unary("isnan", x)
    if axis is None and not keepdims:
        if bool(B.reduce("reduce_all", isn, None, False).read_view().item()):
            raise ValueError("All-NaN slice encountered")
    elif not n.live and bool(B.reduce("reduce_any", B.reduce("reduce_all", isn, axis, False), None,
                                      False).read_view().item()):
        raise ValueError("All-NaN slice encountered")  # checked for known data (inputs not yet written: skipped)
    fill = -_math.inf if op == "argmax" else _math.inf
    return _arg(op, B.select(isn, fill, x), axis, out, keepdims)


def nanargmax(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False):
    """Index of the maximum ignoring NaNs."""
    return _nan_arg("argmax", a, axis, out, keepdims)


def nanargmin(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False):
    """Index of the minimum ignoring NaNs."""
    return _nan_arg("argmin", a, axis, out, keepdims)


def average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False, *, keepdims: bool = False):
    """Weighted average over ``axis`` (``returned``: also the sum of weights)."""
    if weights is None:
        avg = mean(a, axis, keepdims=keepdims)
        if returned:
            n = node(a)
            cnt = float(_count(n, B.normalize_axes(axis, len(n.shape))))
            return avg, (cnt if not isinstance(avg, Var) else B.broadcast_to(B.cast(cnt, F32), avg._node.shape))
        return avg
    x = _w(to_float(a))
    w = _w(to_float(weights))
    xs, ws = x._node.shape, w._node.shape
    if xs != ws:
        if axis is None:
            raise TypeError("Axis must be specified when shapes of a and weights differ.")
        if len(ws) != 1:
            raise TypeError("1D weights expected when shapes of a and weights differ.")
        ax = axis_arg(axis, len(xs))
        if ws[0] != xs[ax]:
            raise ValueError("Length of weights not compatible with specified axis.")
        w = B.reshape(w, tuple(ws[0] if i == ax else 1 for i in range(len(xs))))
        w = B.broadcast_to(w, xs)
    wsum = B.reduce("reduce_sum", w, axis, keepdims)
    if axis is None and not keepdims and float(wsum.read_view()) == 0.0:
        raise ZeroDivisionError("Weights sum to zero, can't be normalized")
    avg = B.binary("div", B.reduce("reduce_sum", B.binary("mul", x, w), axis, keepdims), wsum)
    res = scalar_or_var(avg, axis, keepdims)
    if returned:
        return res, scalar_or_var(wsum, axis, keepdims)
    return res


# ---------------------------------------------------------------- order statistics
_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _q_array(q: Any, scale: float) -> _np.ndarray:
    qa = _np.asarray(q.read_view() if isinstance(q, Var) else q, dtype=_np.float64) / scale
    if qa.size and (_np.any(qa < 0) or _np.any(qa > 1) or _np.any(_np.isnan(qa))):
        raise ValueError("Percentiles must be in the range [0, 100]" if scale == 100.0
                         else "Quantiles must be in the range [0, 1]")
    return qa


def _to_last(n, axis: Any):
    """Move the reduced axes of ``n`` to one last axis; returns (var, kept_shape, keepdims_shape)."""
    nd = len(n.shape)
    axes = B.normalize_axes(axis, nd)
    rest = [i for i in range(nd) if i not in axes]
    x = _w(n)
    if list(rest) + list(axes) != list(range(nd)):
        x = B.transpose(x, rest + list(axes))
    kept = tuple(n.shape[i] for i in rest)
    x = B.reshape(x, kept + (_count(n, axes),))
    kd_shape = tuple(1 if i in axes else d for i, d in enumerate(n.shape))
    return x, kept, kd_shape


def _lerp(a: Var, b: Var, t: Any) -> Var:
    d = B.binary("sub", b, a)
    lo = B.binary("add", a, B.binary("mul", d, t))
    hi = B.binary("sub", b, B.binary("mul", d, B.binary("sub", 1.0, t)))
    return B.select(B.binary("greater_equal", t, 0.5), hi, lo)


def _quantile(a: Any, qa: _np.ndarray, axis: Any, keepdims: bool, method: str, nan: bool) -> Var:
    if method not in _METHODS:
        raise ValueError(f"'{method}' is not a valid method. Use one of: {', '.join(_METHODS)}")
    n = to_float(a)
    x, kept, kd_shape = _to_last(n, axis)
    size = x._node.shape[-1]
    qflat = qa.ravel()
    nq = qflat.size
    if nan or size == 0:
        s = _w(B.make_node("sort", (x._node,), {"axis": len(kept), "descending": False}))
    if size == 0:
        res = const(_np.full(kept + (nq,), _np.nan, _np.float32))
    elif not nan:
        pos = qflat * (size - 1)
        lo_i = _np.floor(pos).astype(_np.int64)
        hi_i = _np.minimum(lo_i + 1, size - 1)
        t = pos - lo_i
        idx_lo, idx_hi, tvec = _method_indices(method, lo_i, hi_i, t, pos)
        # Only the needed order statistics (and the last one, NaN when any is NaN) must be in place.
        kth = tuple(sorted({int(i) for i in idx_lo} | {int(i) for i in idx_hi} | {size - 1}))
        s = _w(B.make_node("partition", (x._node,), {"kth": kth, "axis": len(kept)}))
        a_lo = _w(B.make_node("take", (s._node, const(idx_lo.astype(_np.int32))._node), {"axis": len(kept)}))
        a_hi = _w(B.make_node("take", (s._node, const(idx_hi.astype(_np.int32))._node), {"axis": len(kept)}))
        res = _lerp(a_lo, a_hi, const(tvec.astype(_np.float32)))
        last = B.reshape(s[(Ellipsis, slice(size - 1, size))], kept + (1,))
        res = B.select(B.unary("isnan", last), _math.nan, res)
    else:
        valid = B.unary("logical_not", B.unary("isnan", x))
        cnt = B.cast(B.reduce("reduce_sum", valid, len(kept), True), F32)  # kept + (1,)
        qv = const(qflat.astype(_np.float32))
        pos = B.binary("mul", B.binary("sub", cnt, 1.0), qv)  # kept + (nq,)
        pos = B.unary("relu", pos)
        lo_f = B.unary("floor", pos)
        hi_f = B.binary("minimum", B.binary("add", lo_f, 1.0), B.unary("relu", B.binary("sub", cnt, 1.0)))
        t = B.binary("sub", pos, lo_f)
        if method == "lower":
            hi_f, t = lo_f, B.binary("mul", t, 0.0)
        elif method == "higher":
            lo_f = B.select(B.binary("greater", t, 0.0), hi_f, lo_f)
            t = B.binary("mul", t, 0.0)
        elif method == "nearest":
            up = B.binary("greater", t, 0.5)
            tie = B.binary("logical_and", B.binary("equal", t, 0.5),
                           B.binary("equal", B.binary("mod", lo_f, 2.0), 1.0))
            lo_f = B.select(B.binary("logical_or", up, tie), hi_f, lo_f)
            t = B.binary("mul", t, 0.0)
        elif method == "midpoint":
            t = B.select(B.binary("greater", t, 0.0), 0.5, t)
        shp = kept + (nq,)
        lo_idx = B.broadcast_to(B.cast(lo_f, I32), shp)
        hi_idx = B.broadcast_to(B.cast(hi_f, I32), shp)
        a_lo = _w(B.make_node("take_along_axis", (s._node, lo_idx._node), {"axis": len(kept)}))
        a_hi = _w(B.make_node("take_along_axis", (s._node, hi_idx._node), {"axis": len(kept)}))
        res = _lerp(a_lo, a_hi, B.broadcast_to(t, shp))
        res = B.select(B.binary("equal", B.broadcast_to(cnt, shp), 0.0), _math.nan, res)
    # numpy: q's dimensions first, then the kept (or keepdims) shape
    if len(kept) > 0:
        res = B.transpose(res, (len(kept),) + tuple(range(len(kept))))
    out_tail = kd_shape if keepdims else kept
    return B.reshape(res, qa.shape + out_tail)


def _method_indices(method, lo_i, hi_i, t, pos):
    if method == "linear":
        return lo_i, hi_i, t
    if method == "lower":
        return lo_i, lo_i, _np.zeros_like(t)
    if method == "higher":
        return _np.where(t > 0, hi_i, lo_i), lo_i, _np.zeros_like(t)
    if method == "nearest":
        near = _np.where((t > 0.5) | ((t == 0.5) & (lo_i % 2 == 1)), hi_i, lo_i)
        return near, near, _np.zeros_like(t)
    return lo_i, hi_i, _np.where(t > 0, 0.5, 0.0)  # midpoint


def _q_result(res: Var, qa: _np.ndarray, axis: Any, keepdims: bool, out: Any):
    if out is not None:
        return finish(res, out)
    if qa.ndim == 0 and axis is None and not keepdims:
        return res.read_view().item()
    return res


def _check_nonempty_quantile(a: Any, axis: Any) -> None:
    """numpy's percentile/quantile raise IndexError on an empty reduction (median gives NaN instead)."""
    n = node(a)
    axes = B.normalize_axes(axis, len(n.shape))
    if _count(n, axes) == 0:
        raise IndexError("cannot take a percentile/quantile of an empty array: index -1 is out of bounds "
                         "for axis 0 with size 0")


def _method_arg(method: str, kwargs: dict) -> str:
    if "interpolation" in kwargs:  # MNN's (and old numpy's) name for ``method``
        method = kwargs.pop("interpolation")
    _check_kwargs("percentile", kwargs, ("weights",) if kwargs.get("weights") is None else ())
    return method


def percentile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
               method: str = "linear", keepdims: bool = False, **kwargs: Any):
    """The ``q``-th percentiles (0..100) along ``axis`` (float32; numpy's 'linear' method by default)."""
    qa = _q_array(q, 100.0)
    _check_nonempty_quantile(a, axis)
    res = _quantile(a, qa, axis, keepdims, _method_arg(method, kwargs), False)
    return _q_result(res, qa, axis, keepdims, out)


def quantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False, **kwargs: Any):
    """The ``q``-th quantiles (0..1) along ``axis``."""
    qa = _q_array(q, 1.0)
    _check_nonempty_quantile(a, axis)
    res = _quantile(a, qa, axis, keepdims, _method_arg(method, kwargs), False)
    return _q_result(res, qa, axis, keepdims, out)


def nanpercentile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
                  method: str = "linear", keepdims: bool = False, **kwargs: Any):
    """Percentiles ignoring NaNs."""
    qa = _q_array(q, 100.0)
    res = _quantile(a, qa, axis, keepdims, _method_arg(method, kwargs), True)
    return _q_result(res, qa, axis, keepdims, out)


def nanquantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
                method: str = "linear", keepdims: bool = False, **kwargs: Any):
    """Quantiles ignoring NaNs."""
    qa = _q_array(q, 1.0)
    res = _quantile(a, qa, axis, keepdims, _method_arg(method, kwargs), True)
    return _q_result(res, qa, axis, keepdims, out)


def median(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False, keepdims: bool = False):
    """Median along ``axis`` (float32; a Python float for the whole array)."""
    res = _quantile(a, _np.asarray(0.5), axis, keepdims, "linear", False)
    return _q_result(res, _np.asarray(0.5), axis, keepdims, out)


def nanmedian(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False, keepdims: bool = False):
    """Median ignoring NaNs."""
    res = _quantile(a, _np.asarray(0.5), axis, keepdims, "linear", True)
    return _q_result(res, _np.asarray(0.5), axis, keepdims, out)


# ---------------------------------------------------------------- scans and differences
def _scan(op: str, x: Any, axis: Any, dtype: Any, out: Any) -> Var:
    n = node(x)
    if dtype is not None:
        n = B.cast_node(n, _as_np_dtype(dtype))
    elif n.dtype.kind in "iu" and n.dtype.itemsize < 4:
        n = B.cast_node(n, I32)  # numpy accumulates small integers in the platform int (narrowed: int32)
    if axis is None:
        n, ax = flat(_w(n))._node, 0
    else:
        if len(n.shape) == 0:
            n = B.reshape(_w(n), (1,))._node
        ax = axis_arg(axis, len(n.shape))
    return finish(_w(B.make_node(op, (n,), {"axis": ax, "exclusive": False, "reverse": False})), out)


def cumsum(x: Any, axis: Any = 0, dtype: Any = None, out: Any = None) -> Var:
    """Cumulative sum along ``axis`` (MNN's default axis 0; None flattens)."""
    return _scan("cumsum", x, axis, dtype, out)


def cumprod(x: Any, axis: Any = 0, dtype: Any = None, out: Any = None) -> Var:
    """Cumulative product along ``axis`` (MNN's default axis 0; float32 as MNN computes it)."""
    return _scan("cumprod", x, axis, F32 if dtype is None else dtype, out)


def nancumsum(x: Any, axis: Any = 0, dtype: Any = None, out: Any = None) -> Var:
    """Cumulative sum treating NaNs as zero."""
    return _scan("cumsum", _nan_fill(x, 0.0), axis, dtype, out)


def nancumprod(x: Any, axis: Any = 0, dtype: Any = None, out: Any = None) -> Var:
    """Cumulative product treating NaNs as one."""
    return _scan("cumprod", _nan_fill(x, 1.0), axis, F32 if dtype is None else dtype, out)


def _slice_axis(x: Var, ax: int, start: Any, stop: Any) -> Var:
    key = [slice(None)] * len(x._node.shape)
    key[ax] = slice(start, stop)
    return x[tuple(key)]


def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Var:
    """The ``n``-th discrete difference along ``axis``."""
    x = _w(node(a))
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n!r}")
    nd = len(x._node.shape)
    if nd == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    ax = axis_arg(axis, nd)
    if n == 0:
        return x  # numpy: n=0 returns the input unchanged (prepend/append ignored)
    parts = []
    for extra in (prepend, None, append):
        if extra is None:
            continue
        e = _w(node(extra))
        if len(e._node.shape) == 0:
            shp = list(x._node.shape)
            shp[ax] = 1
            e = B.broadcast_to(e, tuple(shp))
        parts.append(e)
    if prepend is not None or append is not None:
        seq = ([parts[0]] if prepend is not None else []) + [x] + ([parts[-1]] if append is not None else [])
        x = B.concat(seq, ax)
    for _ in range(n):
        x = B.binary("sub", _slice_axis(x, ax, 1, None), _slice_axis(x, ax, None, -1))
    return x


def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Var:
    """Differences of consecutive elements of the flattened array (with optional ends)."""
    f = flat(ary)
    d = B.binary("sub", f[1:], f[:-1])
    parts = []
    if to_begin is not None:
        parts.append(flat(B.cast(to_begin, d._node.dtype)))
    parts.append(d)
    if to_end is not None:
        parts.append(flat(B.cast(to_end, d._node.dtype)))
    return B.concat(parts, 0) if len(parts) > 1 else d


def gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: int = 1):
    """Gradient by central differences inside and one-sided differences at the edges (numpy.gradient)."""
    x = _w(to_float(f))
    nd = len(x._node.shape)
    axes = B.normalize_axes(axis, nd) if axis is not None else tuple(range(nd))
    if axis is not None and not isinstance(axis, (list, tuple)):
        axes = (axis_arg(axis, nd),)
    if edge_order not in (1, 2):
        raise ValueError("'edge_order' greater than 2 not supported")
    if len(varargs) == 0:
        spacing: list[Any] = [1.0] * len(axes)
    elif len(varargs) == 1 and _np.ndim(varargs[0] if not isinstance(varargs[0], Var) else varargs[0].read_view()) == 0:
        spacing = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes):
        spacing = list(varargs)
    else:
        raise TypeError("invalid number of arguments")
    outs = []
    for ax, sp in zip(axes, spacing):
        size = x._node.shape[ax]
        if size < edge_order + 1:
            raise ValueError("Shape of array too small to calculate a numerical gradient, at least "
                             "(edge_order + 1) elements are required.")
        outs.append(_grad_axis(x, ax, sp, edge_order, nd))
    return outs[0] if len(outs) == 1 else outs


def _grad_axis(x: Var, ax: int, sp: Any, edge_order: int, nd: int) -> Var:
    def sl(a, b):
        return _slice_axis(x, ax, a, b)
    spv = sp.read_view() if isinstance(sp, Var) else _np.asarray(sp)
    shp = [1] * nd
    if spv.ndim == 0:
        h = float(spv)
        mid = B.binary("div", B.binary("sub", sl(2, None), sl(None, -2)), 2.0 * h)
        if edge_order == 1:
            first = B.binary("div", B.binary("sub", sl(1, 2), sl(0, 1)), h)
            last = B.binary("div", B.binary("sub", sl(-1, None), sl(-2, -1)), h)
        else:
            first = B.binary("div", B.binary("add", B.binary("sub", B.binary("mul", sl(1, 2), 4.0),
                                                              B.binary("mul", sl(0, 1), 3.0)),
                                              B.unary("neg", sl(2, 3))), 2.0 * h)
            last = B.binary("div", B.binary("add", B.binary("sub", B.binary("mul", sl(-1, None), 3.0),
                                                             B.binary("mul", sl(-2, -1), 4.0)), sl(-3, -2)), 2.0 * h)
        return B.concat([first, mid, last], ax)
    coords = spv.astype(_np.float64)
    if coords.ndim != 1 or coords.shape[0] != x._node.shape[ax]:
        raise ValueError("when 1d, distances must match the length of the corresponding dimension")
    dx = _np.diff(coords)
    dx1, dx2 = dx[:-1], dx[1:]
    a = -dx2 / (dx1 * (dx1 + dx2))
    b = (dx2 - dx1) / (dx1 * dx2)
    c = dx1 / (dx2 * (dx1 + dx2))

    def col(v):
        s = list(shp)
        s[ax] = len(v)
        return const(_np.asarray(v, _np.float32).reshape(s))
    mid = B.binary("add", B.binary("add", B.binary("mul", col(a), sl(None, -2)), B.binary("mul", col(b), sl(1, -1))),
                   B.binary("mul", col(c), sl(2, None)))
    if edge_order == 1:
        first = B.binary("div", B.binary("sub", sl(1, 2), sl(0, 1)), float(dx[0]))
        last = B.binary("div", B.binary("sub", sl(-1, None), sl(-2, -1)), float(dx[-1]))
    else:
        d1, d2 = dx[0], dx[1]
        fa, fb, fc = -(2 * d1 + d2) / (d1 * (d1 + d2)), (d1 + d2) / (d1 * d2), -d1 / (d2 * (d1 + d2))
        first = B.binary("add", B.binary("add", B.binary("mul", sl(0, 1), fa), B.binary("mul", sl(1, 2), fb)),
                         B.binary("mul", sl(2, 3), fc))
        d1, d2 = dx[-2], dx[-1]
        la, lb, lc = d2 / (d1 * (d1 + d2)), -(d2 + d1) / (d1 * d2), (2 * d2 + d1) / (d2 * (d1 + d2))
        last = B.binary("add", B.binary("add", B.binary("mul", sl(-3, -2), la), B.binary("mul", sl(-2, -1), lb)),
                        B.binary("mul", sl(-1, None), lc))
    return B.concat([first, mid, last], ax)


def trapz(y: Any, x: Any = None, dx: float = 1.0, axis: int = -1):
    """Integral by the trapezoidal rule along ``axis``."""
    yv = _w(to_float(y))
    nd = len(yv._node.shape)
    ax = axis_arg(axis, nd)
    avg = B.binary("mul", B.binary("add", _slice_axis(yv, ax, 1, None), _slice_axis(yv, ax, None, -1)), 0.5)
    if x is None:
        d: Any = float(dx)
    else:
        xv = _w(to_float(x))
        if len(xv._node.shape) == 1:
            d = B.binary("sub", xv[1:], xv[:-1])
            shp = [1] * nd
            shp[ax] = d._node.shape[0]
            d = B.reshape(d, tuple(shp))
        else:
            xa = axis_arg(axis, len(xv._node.shape))
            d = B.binary("sub", _slice_axis(xv, xa, 1, None), _slice_axis(xv, xa, None, -1))
    res = B.reduce("reduce_sum", B.binary("mul", avg, d), ax, False)
    return res.read_view().item() if len(res._node.shape) == 0 else res


trapezoid = trapz


# ---------------------------------------------------------------- histograms and counting
def _hist_attrs(a_node, bins: Any, range: Any):  # noqa: A002
    if isinstance(bins, str):
        raise NotImplementedError(f"histogram: bins={bins!r} estimators are not supported (give a count or edges)")
    if isinstance(bins, Var):
        bins = bins.read_view()
    if is_int(bins):
        if int(bins) < 1:
            raise ValueError("`bins` must be positive, when an integer")
        b: Any = int(bins)
    else:
        e = _np.asarray(bins, dtype=_np.float64)
        if e.ndim != 1:
            raise ValueError("`bins` must be 1d, when an array")
        if _np.any(e[:-1] > e[1:]):
            raise ValueError("`bins` must increase monotonically, when an array")
        b = tuple(float(v) for v in e)
    rng = None
    if range is not None:
        lo, hi = (float(v) for v in range)
        if lo > hi:
            raise ValueError("max must be larger than min in range parameter.")
        if not (_np.isfinite(lo) and _np.isfinite(hi)):
            raise ValueError(f"supplied range of [{lo}, {hi}] is not finite")
        rng = (lo, hi)
    return {"bins": b, "range": rng}


def histogram(a: Any, bins: Any = 10, range: Any = None, normed: Any = None, weights: Any = None,  # noqa: A002
              density: Any = None):
    """Counts (int32, or the weights' sum) per bin and the float32 bin edges (numpy.histogram)."""
    n = flat(a)._node
    attrs = _hist_attrs(n, bins, range)
    if attrs["range"] is None and n.size and isinstance(attrs["bins"], int) and not n.live:
        # known data: report a non-finite autodetected range now (otherwise the op raises when computed)
        v = _w(n).read_view()
        if v.dtype.kind == "f" and not _np.isfinite(v).all():
            raise ValueError(f"autodetected range of [{v.min()}, {v.max()}] is not finite")
    inputs = [n]
    if weights is not None:
        w = flat(_w(to_float(weights)))._node
        if w.shape != n.shape:
            raise ValueError("weights should have the same shape as a.")
        inputs.append(w)
    counts = _w(B.make_node("histogram", inputs, attrs))
    edges = _w(B.make_node("histogram_bin_edges", (n,), attrs))
    if density or normed:
        widths = B.binary("sub", edges[1:], edges[:-1])
        c = B.cast(counts, F32)
        # (count / total first: at most 1, so only a density float32 cannot hold overflows; numpy
        # divides by the width first, in float64)
        counts = B.binary("div", B.binary("div", c, B.reduce("reduce_sum", c, None, False)), widths)
    return counts, edges


def histogram_bin_edges(a: Any, bins: Any = 10, range: Any = None, weights: Any = None) -> Var:  # noqa: A002
    """The bin edges ``histogram`` would use (float32)."""
    n = flat(a)._node
    return _w(B.make_node("histogram_bin_edges", (n,), _hist_attrs(n, bins, range)))


def histogram2d(x: Any, y: Any, bins: Any = 10, range: Any = None, density: Any = None,  # noqa: A002
                weights: Any = None):
    """2-D histogram of samples (x, y): (counts, xedges, yedges)."""
    h, edges = histogramdd((x, y), bins=bins, range=range, density=density, weights=weights)
    return h, edges[0], edges[1]


def histogramdd(sample: Any, bins: Any = 10, range: Any = None, density: Any = None,  # noqa: A002
                weights: Any = None):
    """D-dimensional histogram, built from 1-D bin indices (digitize) and a bincount."""
    if isinstance(sample, (list, tuple)):
        cols = [flat(s) for s in sample]
    else:
        sn = node(sample)
        if len(sn.shape) != 2:
            raise ValueError("sample must be (N, D) or a sequence of D arrays")
        cols = [_w(sn)[:, i] for i in _builtin_range(sn.shape[1])]
    d = len(cols)
    bins_l = list(bins) if isinstance(bins, (list, tuple)) else [bins] * d
    ranges = list(range) if range is not None else [None] * d
    if len(bins_l) != d or len(ranges) != d:
        raise ValueError("The dimension of bins must be equal to the dimension of the sample x.")
    edges = [histogram_bin_edges(c, b, r) for c, b, r in zip(cols, bins_l, ranges)]
    nb = [e._node.shape[0] - 1 for e in edges]
    flat_idx: Any = None
    inside: Any = None
    for c, e, k in zip(cols, edges, nb):
        cf = _w(to_float(c))
        ix = B.binary("sub", B.make("searchsorted", [e, cf], {"side": "right"}), 1)
        on_last = B.binary("equal", cf, e[k])
        ix = B.select(on_last, k - 1, ix)
        ok = B.binary("logical_and", B.binary("greater_equal", ix, 0), B.binary("less", ix, k))
        inside = ok if inside is None else B.binary("logical_and", inside, ok)
        flat_idx = ix if flat_idx is None else B.binary("add", B.binary("mul", flat_idx, k), ix)
    total = int(_np.prod(nb))
    flat_idx = B.select(inside, flat_idx, total)
    w = None if weights is None else flat(_w(to_float(weights)))
    inputs = [flat_idx._node] + ([w._node] if w is not None else [])
    counts = _w(B.make_node("bincount", inputs, {"n": total + 1}))[:total]
    h = B.reshape(counts, tuple(nb))
    if density:
        h = B.cast(h, F32)
        s = B.reduce("reduce_sum", h, None, False)
        vol: Any = None
        for i, e in enumerate(edges):
            wdt = B.binary("sub", e[1:], e[:-1])
            shp = [1] * d
            shp[i] = nb[i]
            wdt = B.reshape(wdt, tuple(shp))
            vol = wdt if vol is None else B.binary("mul", vol, wdt)
        h = B.binary("div", B.binary("div", h, s), vol)
    return h, edges


_builtin_range = __builtins__["range"] if isinstance(__builtins__, dict) else __builtins__.range


def bincount(x: Any, weights: Any = None, minlength: int = 0) -> Var:
    """Number of occurrences of each non-negative int (the output length depends on max(x): read when built)."""
    n = flat(x)._node
    if n.dtype.kind == "f":
        raise TypeError("Cannot cast array data from dtype('float32') to dtype('int64') according to the rule 'safe'")
    v = _w(n).read_view()
    if v.size and v.min() < 0:
        raise ValueError("'list' argument must have no negative elements")
    if minlength < 0:
        raise ValueError("'minlength' must not be negative")
    length = _builtin_max(int(v.max()) + 1 if v.size else 0, int(minlength))
    inputs = [n]
    if weights is not None:
        w = flat(_w(to_float(weights)))._node
        if w.shape != n.shape:
            raise ValueError("The weights and list don't have the same length.")
        inputs.append(w)
    return _w(B.make_node("bincount", inputs, {"n": length}))


def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None) -> Var:
    """One-dimensional linear interpolation (numpy.interp), float32."""
    xn, xpn, fpn = to_float(x), to_float(xp), to_float(fp)
    if len(xpn.shape) != 1 or len(fpn.shape) != 1:
        raise ValueError("object too deep for desired array" if len(xpn.shape) > 1 else "array of sample points is empty")
    if xpn.shape != fpn.shape:
        raise ValueError("fp and xp are not of the same length.")
    if xpn.shape[0] == 0:
        raise ValueError("array of sample points is empty")
    if period is not None and float(period) == 0:
        raise ValueError("period must be a non-zero value")
    attrs = {"left": None if left is None else float(left), "right": None if right is None else float(right),
             "period": None if period is None else float(period)}
    return _w(B.make_node("interp", (xn, xpn, fpn), attrs))


def _conv(op: str, a: Any, v: Any, mode: str) -> Var:
    na, nv = node(a), node(v)
    if len(na.shape) > 1 or len(nv.shape) > 1:
        raise ValueError("object too deep for desired array")
    if na.size == 0 or nv.size == 0:
        raise ValueError(f"{'v' if nv.size == 0 else 'a'} cannot be empty")
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"mode must be one of 'full', 'same', or 'valid' (got {mode!r})")
    dt = B.result_dtype(na.dtype, nv.dtype)
    na = B.reshape(_w(B.cast_node(na, dt)), (-1,))._node
    nv = B.reshape(_w(B.cast_node(nv, dt)), (-1,))._node
    return _w(B.make_node(op, (na, nv), {"mode": mode}))


def convolve(a: Any, v: Any, mode: str = "full") -> Var:
    """Discrete linear convolution of two 1-D sequences."""
    return _conv("convolve", a, v, mode)


def correlate(a: Any, v: Any, mode: str = "valid") -> Var:
    """Cross-correlation of two 1-D sequences."""
    return _conv("correlate", a, v, mode)


def cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False, ddof: Any = None, fweights: Any = None,
        aweights: Any = None, *, dtype: Any = None) -> Var:
    """Covariance matrix of the rows (variables) of ``m`` (numpy.cov), float32."""
    from ._shape import atleast_2d
    x = atleast_2d(_w(to_float(m)))
    if not rowvar and x._node.shape[0] != 1:
        x = B.transpose(x)
    if y is not None:
        yy = atleast_2d(_w(to_float(y)))
        if not rowvar and yy._node.shape[0] != 1:
            yy = B.transpose(yy)
        x = B.concat([x, yy], 0)
    nobs = x._node.shape[1]
    w: Any = None
    if fweights is not None:
        w = _w(to_float(fweights))
    if aweights is not None:
        aw = _w(to_float(aweights))
        w = aw if w is None else B.binary("mul", w, aw)
    if ddof is None:
        ddof = 0 if bias else 1
    if w is None:
        avg = B.reduce("reduce_mean", x, 1, True)
        fact: Any = float(nobs - ddof)
    else:
        wsum = B.reduce("reduce_sum", w, None, False)
        avg = B.binary("div", B.reduce("reduce_sum", B.binary("mul", x, w), 1, True), wsum)
        if ddof == 0:
            fact = wsum
        elif aweights is None:
            fact = B.binary("sub", wsum, float(ddof))
        else:
            aw = _w(to_float(aweights))
            fact = B.binary("sub", wsum, B.binary("div", B.binary("mul", float(ddof),
                            B.reduce("reduce_sum", B.binary("mul", w, aw), None, False)), wsum))
    xc = B.binary("sub", x, avg)
    xw = xc if w is None else B.binary("mul", xc, w)
    c = B.binary("div", B.matmul(xc, B.transpose(xw)), fact)
    if c._node.shape == (1, 1):
        c = B.reshape(c, ())
    return c


def corrcoef(x: Any, y: Any = None, rowvar: bool = True, *, dtype: Any = None) -> Var:
    """Pearson correlation coefficients (numpy.corrcoef), clipped to [-1, 1]."""
    c = cov(x, y, rowvar)
    if len(c._node.shape) == 0:
        return B.binary("div", c, c)
    from ._creation import diag
    d = B.unary("sqrt", diag(c))
    c = B.binary("div", c, B.reshape(d, (-1, 1)))
    c = B.binary("div", c, B.reshape(d, (1, -1)))
    return _w(B.make_node("clip", (c._node,), {"lo": -1.0, "hi": 1.0}))


def array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> bool:
    """Whether the arrays have the same shape and elements."""
    n1, n2 = node(a1), node(a2)
    if n1.shape != n2.shape:
        return False
    eq = B.binary("equal", _w(n1), _w(n2))
    if equal_nan and (n1.dtype.kind == "f" or n2.dtype.kind == "f"):
        both = B.binary("logical_and", B.unary("isnan", _w(n1)), B.unary("isnan", _w(n2)))
        eq = B.binary("logical_or", eq, both)
    return bool(B.reduce("reduce_all", eq, None, False).read_view().item())


def array_equiv(a1: Any, a2: Any) -> bool:
    """Whether the arrays are shape-consistent (broadcastable) and equal."""
    n1, n2 = node(a1), node(a2)
    try:
        eq = B.binary("equal", _w(n1), _w(n2))
    except ValueError:
        return False
    return bool(B.reduce("reduce_all", eq, None, False).read_view().item())


def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None, out: Any = None):
    """Sum along a diagonal."""
    from ._creation import diagonal
    d = diagonal(a, offset, axis1, axis2)
    res = B.reduce("reduce_sum", d, -1 if len(d._node.shape) else None, False, dtype)
    return finish(res.read_view().item() if len(res._node.shape) == 0 and out is None else res, out)


