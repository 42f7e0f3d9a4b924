"""Reductions over ``attrs["axes"]`` (a sorted tuple of non-negative axes) with ``attrs["keepdims"]``."""
from __future__ import annotations

import ctypes
import weakref

import numpy as np

from .._dtypes import F32, I32
from .fperr import ERR_IGNORE, ERRVAR, call_ignoring
from .registry import OpDef, register


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    """The shape left after reducing ``axes``."""
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _infer(out_dtype):
    def infer(inputs, attrs):
        x = inputs[0]
        dt = out_dtype(x.dtype)
        return reduced_shape(x.shape, attrs["axes"], attrs["keepdims"]), dt
    return infer


def _acc_dtype(dt):
    return F32 if dt.kind == "f" else I32


def _check_nonempty(x, axes, what):
    if any(x.shape[a] == 0 for a in axes):
        raise ValueError(f"zero-size array to reduction operation {what} which has no identity")


def _ref(np_fn, needs_identity=None):
    def ref(xs, attrs):
        x = xs[0]
        axes = attrs["axes"]
        if needs_identity and not x.size:
            _check_nonempty(x, axes, needs_identity)
        if ERRVAR is not None and ERRVAR.get() is ERR_IGNORE:     # (the eager path's state: no switch)
            return np_fn(x, axis=axes, keepdims=attrs["keepdims"])
        return call_ignoring(np_fn, x, axis=axes, keepdims=attrs["keepdims"])
    return ref


def _sum(x, axis, keepdims):
    return np.add.reduce(x, axis=axis, keepdims=keepdims, dtype=_acc_dtype(x.dtype) if x.dtype.kind != "f" else None)


def _prod(x, axis, keepdims):
    # (np.prod's own call: numpy's wrapper around this one reduce costs ~1 us of a small call)
    return np.multiply.reduce(x, axis=axis, keepdims=keepdims,
                              dtype=_acc_dtype(x.dtype) if x.dtype.kind != "f" else None)


def _mean(x, axis, keepdims):
    if type(x) is np.ndarray and x.dtype == F32 and x.size:
        # np.mean's own steps for float32 written out (its wrapper costs ~3 us of a small call):
        # the sum in float32, divided by the count as an intp (an array in place; a scalar in
        # float64, then rounded to float32 as np.mean does)
        axes = (axis,) if type(axis) is int else range(x.ndim) if axis is None else axis
        count = 1
        for ax in axes:
            count *= x.shape[ax]
        s = np.add.reduce(x, axis=axis, keepdims=keepdims)
        if type(s) is np.ndarray:
            return np.true_divide(s, np.intp(count), out=s, casting="unsafe")
        return np.float32(s / np.intp(count))
    return np.mean(x, axis=axis, keepdims=keepdims, dtype=np.float64 if x.dtype.kind != "f" else None)


def _any(x, axis, keepdims):
    if type(x) is np.ndarray:       # (the method: np.any's wrapper costs ~1 us; the same reduce)
        return x.any(axis=axis, keepdims=keepdims)
    return np.any(x, axis=axis, keepdims=keepdims)


def _all(x, axis, keepdims):
    if type(x) is np.ndarray:
        return x.all(axis=axis, keepdims=keepdims)
    return np.all(x, axis=axis, keepdims=keepdims)


register(OpDef("reduce_sum", "reduce", _infer(_acc_dtype), _ref(_sum), scalar="acc + a", mnn_type="Reduction"))
register(OpDef("reduce_prod", "reduce", _infer(_acc_dtype), _ref(_prod), scalar="acc * a", mnn_type="Reduction"))
register(OpDef("reduce_mean", "reduce", _infer(lambda d: F32), _ref(_mean), scalar="acc + a", mnn_type="Reduction"))
register(OpDef("reduce_max", "reduce", _infer(lambda d: d), _ref(np.maximum.reduce, "maximum"), scalar="max(acc, a)",
               mnn_type="Reduction"))
register(OpDef("reduce_min", "reduce", _infer(lambda d: d), _ref(np.minimum.reduce, "minimum"), scalar="min(acc, a)",
               mnn_type="Reduction"))
register(OpDef("reduce_any", "reduce", _infer(lambda d: I32), _ref(_any), mnn_type="Reduction"))
register(OpDef("reduce_all", "reduce", _infer(lambda d: I32), _ref(_all), mnn_type="Reduction"))


#: id(array) -> (weak reference to it, its writable-flagged alias) (``_readable_alias``)
_ALIASES: dict = {}
_ALIASES_MAX = 64
_BUF_TYPES: dict = {}


def _readable_alias(x: np.ndarray) -> np.ndarray:
    """``x`` itself, or for a read-only C-contiguous ``x`` a writable-flagged alias of its memory
    that is only read: numpy's argmax/argmin copy any read-only input first (they ask for a
    writable contiguous array), which doubles their time on a graph value. The alias does not keep
    ``x`` alive: use it only while ``x`` is referenced. An alias is kept while ``x`` lives (a
    weak reference's callback drops it), so the same value's next argmax does not make it again."""
    if x.flags.writeable or not x.flags.c_contiguous or x.size < 4096:
        return x
    key = id(x)
    hit = _ALIASES.get(key)
    if hit is not None and hit[0]() is x:
        return hit[1]
    n = x.nbytes
    buf_t = _BUF_TYPES.get(n)
    if buf_t is None:
        buf_t = ctypes.c_char * n
        if len(_BUF_TYPES) < 256:
            _BUF_TYPES[n] = buf_t
    alias = np.frombuffer(buf_t.from_address(x.ctypes.data), x.dtype).reshape(x.shape)
    if len(_ALIASES) < _ALIASES_MAX:
        try:
            ref = weakref.ref(x, lambda _r, key=key: _drop_alias(key, _r))
        except TypeError:   # (an array type without weak references: no caching)
            return alias
        _ALIASES[key] = (ref, alias)
    return alias


def _drop_alias(key: int, ref: weakref.ref) -> None:
    """Forget the alias of a freed array (only the entry of that array: the id may be reused)."""
    hit = _ALIASES.get(key)
    if hit is not None and hit[0] is ref:
        del _ALIASES[key]


def _arg_ref(np_fn, what):
    method = np_fn.__name__     # ("argmax"/"argmin": the ndarray method, without np.argmax's wrapper)

    def ref(xs, attrs):
        x = xs[0]
        (axis,) = attrs["axes"]
        if not x.size:
            _check_nonempty(x, (axis,), what)
        if type(x) is np.ndarray:
            return getattr(_readable_alias(x), method)(axis=axis, keepdims=attrs["keepdims"])
        return np_fn(x, axis=axis, keepdims=attrs["keepdims"])
    return ref


register(OpDef("argmax", "reduce", _infer(lambda d: I32), _arg_ref(np.argmax, "argmax"), mnn_type="ArgMax"))
register(OpDef("argmin", "reduce", _infer(lambda d: I32), _arg_ref(np.argmin, "argmin"), mnn_type="ArgMin"))


# Composite statistics as one op each, for small arrays (the front end builds them below the
# compile threshold; above it the elementwise and reduction nodes fuse into compiled kernels).
# Each reference is the exact numpy sequence the separate nodes' references run, in one call.
def _variance_ref(xs, attrs):
    """``var``: reduce_mean (kept dims), sub, square, reduce_sum, div by ``denom`` (float32),
    then ``sqrt`` when ``attrs["sqrt"]`` (``std``)."""
    return call_ignoring(_variance, xs[0], attrs)


def _variance(x, attrs):
    axes = attrs["axes"]
    d = np.subtract(x, _mean(x, axes, True))
    d = np.multiply(d, d, out=d) if type(d) is np.ndarray else np.multiply(d, d)   # (0-d: a scalar)
    out = np.true_divide(_sum(d, axes, attrs["keepdims"]), np.float32(attrs["denom"]))
    if attrs["sqrt"]:
        out = np.sqrt(out)
    return out


def _ptp_ref(xs, attrs):
    """``ptp``: reduce_max minus reduce_min (the empty-axis error of reduce_max)."""
    x, axes, kd = xs[0], attrs["axes"], attrs["keepdims"]
    if not x.size:
        _check_nonempty(x, axes, "maximum")
    return call_ignoring(_ptp, x, axes, kd)


def _ptp(x, axes, kd):
    return np.subtract(np.maximum.reduce(x, axis=axes, keepdims=kd), np.minimum.reduce(x, axis=axes, keepdims=kd))


register(OpDef("variance", "opaque", _infer(lambda d: d), _variance_ref))
register(OpDef("ptp", "opaque", _infer(lambda d: d), _ptp_ref))
