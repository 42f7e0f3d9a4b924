"""Reductions over ``attrs["axes"]`` (a sorted tuple of non-negative axes) with ``attrs["keepdims"]``."""
from __future__ import annotations

import ctypes

import numpy as np

from .._dtypes import F32, I32
from .fperr import call_ignoring, ignore_errors
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
        if needs_identity and 0 in x.shape:
            _check_nonempty(x, axes, needs_identity)
        return call_ignoring(np_fn, x, axis=axes, keepdims=attrs["keepdims"])
    return ref


def _sum(x, axis, keepdims):
    return np.add.reduce(x, axis=axis, keepdims=keepdims, dtype=_acc_dtype(x.dtype) if x.dtype.kind != "f" else None)


def _prod(x, axis, keepdims):
    return np.prod(x, axis=axis, keepdims=keepdims, dtype=_acc_dtype(x.dtype) if x.dtype.kind != "f" else None)


def _mean(x, axis, keepdims):
    return np.mean(x, axis=axis, keepdims=keepdims, dtype=np.float64 if x.dtype.kind != "f" else None)


def _any(x, axis, keepdims):
    return np.any(x, axis=axis, keepdims=keepdims)


def _all(x, axis, keepdims):
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


def _readable_alias(x: np.ndarray) -> np.ndarray:
    """``x`` itself, or for a read-only C-contiguous ``x`` a writable-flagged alias of its memory
    that is only read: numpy's argmax/argmin copy any read-only input first (they ask for a
    writable contiguous array), which doubles their time on a graph value. The alias does not keep
    ``x`` alive: use it only while ``x`` is referenced."""
    if x.flags.writeable or not x.flags.c_contiguous or x.size < 4096:
        return x
    buf = (ctypes.c_char * x.nbytes).from_address(x.ctypes.data)
    return np.frombuffer(buf, x.dtype).reshape(x.shape)


def _arg_ref(np_fn, what):
    def ref(xs, attrs):
        x = xs[0]
        (axis,) = attrs["axes"]
        _check_nonempty(x, (axis,), what)
        return np_fn(_readable_alias(x), axis=axis, keepdims=attrs["keepdims"])
    return ref


register(OpDef("argmax", "reduce", _infer(lambda d: I32), _arg_ref(np.argmax, "argmax"), mnn_type="ArgMax"))
register(OpDef("argmin", "reduce", _infer(lambda d: I32), _arg_ref(np.argmin, "argmin"), mnn_type="ArgMin"))


# Composite statistics as one op each, for small arrays (the front end builds them below the
# compile threshold; above it the elementwise and reduction nodes fuse into compiled kernels).
# Each reference is the exact numpy sequence the separate nodes' references run, in one call.
def _variance_ref(xs, attrs):
    """``var``: reduce_mean (kept dims), sub, square, reduce_sum, div by ``denom`` (float32),
    then ``sqrt`` when ``attrs["sqrt"]`` (``std``)."""
    x, axes = xs[0], attrs["axes"]
    with ignore_errors():
        d = np.subtract(x, _mean(x, axes, True))
        d = np.multiply(d, d, out=d) if type(d) is np.ndarray else np.multiply(d, d)   # (0-d: a scalar)
        out = np.true_divide(_sum(d, axes, attrs["keepdims"]), np.float32(attrs["denom"]))
        if attrs["sqrt"]:
            out = np.sqrt(out)
    return out


def _ptp_ref(xs, attrs):
    """``ptp``: reduce_max minus reduce_min (the empty-axis error of reduce_max)."""
    x, axes, kd = xs[0], attrs["axes"], attrs["keepdims"]
    if 0 in x.shape:
        _check_nonempty(x, axes, "maximum")
    with ignore_errors():
        return np.subtract(np.maximum.reduce(x, axis=axes, keepdims=kd), np.minimum.reduce(x, axis=axes, keepdims=kd))


register(OpDef("variance", "opaque", _infer(lambda d: d), _variance_ref))
register(OpDef("ptp", "opaque", _infer(lambda d: d), _ptp_ref))
