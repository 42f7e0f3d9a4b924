"""The op set both bridges share: which registry ops (with which shapes, dtypes and attributes) a
bridge may claim, and the decompositions both use so that their results follow the ops' numpy
references (``mnnjit/ops``) rather than any SDK's own conventions:

* ``pool2d`` windows are made exact with explicit padding (edge padding for max, as the reference
  replicates edges; zeros for average, then a constant per-window factor for the reference's
  divisor), so the SDK pools with no padding and no ceil rule;
* ``resize`` (every method and coordinate rule) is two matrix products with constant
  interpolation matrices built from the reference's own taps (``axis_taps``);
* convolutions take their float weights from the model (quantized ones decoded once).

:func:`portable_claim` is the shared predicate: None when an op is in the set, else the reason.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...ops.conv_info import conv_params
from ...ops.nn_pool import _axis_counts
from ...ops.nn_resize import axis_taps

F32 = np.dtype(np.float32)
I32 = np.dtype(np.int32)
_NUM = (F32, I32)

#: unary elementwise ops on float32 (``copy`` .. ``sign`` also on int32)
UNARY = frozenset({
    "neg", "abs", "square", "sqrt", "rsqrt", "exp", "log", "sin", "cos", "tan", "tanh", "sigmoid", "relu",
    "relu6", "erf", "floor", "ceil", "reciprocal", "sign", "softplus", "gelu", "gelu_tanh", "hard_swish",
    "silu", "elu", "leaky_relu", "asin", "acos", "atan", "sinh", "cosh", "asinh", "atanh", "copy",
})
UNARY_INT = frozenset({"neg", "abs", "square", "relu", "relu6", "copy", "sign"})
#: binary elementwise ops (float32 and int32); FLOAT_ONLY among them need float32
BINARY = frozenset({"add", "sub", "mul", "div", "pow", "maximum", "minimum", "squared_difference"})
FLOAT_ONLY = frozenset({"div", "pow", "squared_difference"})
#: comparisons and logic, giving int32 0/1
COMPARE = frozenset({"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"})
LOGIC = frozenset({"logical_and", "logical_or", "logical_xor", "logical_not"})
MOVEMENT = frozenset({"reshape", "transpose", "broadcast_to", "slice", "convert"})
REDUCE = frozenset({"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"})
OTHER = frozenset({"cast", "clip", "select", "concat", "take", "pad", "softmax", "log_softmax", "matmul",
                   "matmul_ex", "conv2d", "mnn_conv2d", "pool2d", "resize", "prelu"})
OPS = UNARY | BINARY | COMPARE | LOGIC | MOVEMENT | REDUCE | OTHER

#: interpolation matrices above this many elements are refused (the resize stays on the CPU)
MAX_RESIZE_MATRIX = 1 << 22
_ACTS = ("", "relu", "relu6")


def _dt(node: Any) -> str | None:
    bad = [str(d) for d in [node.dtype] + [i.dtype for i in node.inputs] if d not in _NUM]
    return f"dtype {bad[0]} (the delegate takes float32 and int32)" if bad else None


def portable_claim(node: Any) -> str | None:
    """None when ``node`` is in the portable op set with shapes, dtypes and attributes both bridges
    lower exactly; else the reason it is refused."""
    op = node.op
    if op not in OPS:
        return f"op {op!r} is not in the delegate's op set"
    if any(d == 0 for d in node.shape) or any(d == 0 for i in node.inputs for d in i.shape):
        return "empty tensor"
    if len(node.shape) > 6:
        return f"rank {len(node.shape)} (the delegate takes up to 6 dimensions)"
    why = _dt(node)
    if why:
        return why
    floats = all(d == F32 for d in [node.dtype] + [i.dtype for i in node.inputs])
    if op in UNARY:
        if not floats and op not in UNARY_INT:
            return f"{op} on int32 (float32 only)"
        return None
    if op in BINARY:
        if op in FLOAT_ONLY and not floats:
            return f"{op} on int32 (integer {op} semantics differ between numpy and the SDKs)"
        return None
    if op in COMPARE or op in LOGIC or op in MOVEMENT:
        return None
    if op in REDUCE:
        axes = node.attrs.get("axes", ())
        if not axes:
            return "reduction over no axes"
        if op in ("reduce_mean", "reduce_prod") and not floats:
            return f"{op} on int32"
        return None
    return _OTHER[op](node)


def _cast(node: Any) -> str | None:
    return None


def _clip(node: Any) -> str | None:
    lo, hi = node.attrs.get("lo"), node.attrs.get("hi")
    if lo is None or hi is None:
        return "clip with an open bound"
    return None


def _select(node: Any) -> str | None:
    return None


def _concat(node: Any) -> str | None:
    return None


def _take(node: Any) -> str | None:
    if node.inputs[1].dtype != I32:
        return "take with non-int32 indices"
    idx = node.inputs[1]
    if idx.op == "const":
        n = node.inputs[0].shape[node.attrs["axis"]]
        v = idx.value
        if v.size and (v.min() < -n or v.max() >= n):
            return "take with out-of-range indices (the reference raises)"
    else:
        return "take with computed indices (out-of-range indices raise on the CPU)"
    return None


def _pad(node: Any) -> str | None:
    mode = node.attrs.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        return f"pad mode {mode!r} (constant, reflect and edge only)"
    if any(p < 0 for pr in node.attrs["pads"] for p in pr):
        return "negative pads"
    if mode == "reflect" and any(max(pr) >= d for pr, d in zip(node.attrs["pads"], node.inputs[0].shape)):
        return "reflect padding as wide as the axis"
    return None


def _softmax(node: Any) -> str | None:
    return None if node.dtype == F32 else "softmax on int32"


def _matmul(node: Any) -> str | None:
    a, b = node.inputs[0], node.inputs[1]
    if node.attrs.get("act", "") not in _ACTS:
        return f"matmul activation {node.attrs.get('act')!r}"
    if a.dtype != F32 or b.dtype != F32:
        return "integer matmul"
    return None


def _conv(node: Any) -> str | None:
    if conv_params(node) is None:
        return "convolution with computed weights (the delegate takes constant float weights)"
    if node.attrs.get("act", "") not in _ACTS:
        return f"convolution activation {node.attrs.get('act')!r}"
    if min(node.attrs["pads"]) < 0:
        return "convolution with negative pads"
    return None


def _pool(node: Any) -> str | None:
    if node.attrs["kind"] not in ("max", "avg"):
        return f"pool kind {node.attrs['kind']!r}"
    if node.dtype != F32:
        return "pooling int32"
    return None


def _resize(node: Any) -> str | None:
    if node.dtype != F32 or node.inputs[0].dtype != F32:
        return "resize of int32"
    h, w = node.inputs[0].shape[-2:]
    oh, ow = node.attrs["size"]
    if max(h * oh, w * ow) > MAX_RESIZE_MATRIX:
        return "resize too large for its interpolation matrices"
    try:
        resize_matrices(node)
    except Exception as exc:  # noqa: BLE001 - an attribute set the taps do not take
        return f"resize attributes: {exc}"
    return None


def _prelu(node: Any) -> str | None:
    if node.inputs[1].op != "const":
        return "prelu with computed slopes"
    return None


_OTHER = {"cast": _cast, "clip": _clip, "select": _select, "concat": _concat, "take": _take, "pad": _pad,
          "softmax": _softmax, "log_softmax": _softmax, "matmul": _matmul, "matmul_ex": _matmul,
          "conv2d": _conv, "mnn_conv2d": _conv, "pool2d": _pool, "resize": _resize, "prelu": _prelu}


# ---------------------------------------------------------------------------- decompositions
def conv_parts(node: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """(float32 weights [O, C/group, kh, kw], bias [O] or None) of a claimed convolution."""
    w, b, _ = conv_params(node)
    dense = w.dense() if hasattr(w, "dense") else w
    return np.ascontiguousarray(dense, np.float32), None if b is None else np.ascontiguousarray(b, np.float32)


def pool_parts(node: Any) -> dict:
    """How a claimed ``pool2d`` runs as an unpadded pool: ``global`` (a mean/max over H, W), else
    ``crop`` (top, bottom, left, right amounts to cut first, >= 0), ``pads`` (top, bottom, left,
    right >= 0: edge padding for max, zeros for avg) and for avg ``factor`` ([oh, ow] float32: the
    window mean times it gives the reference's sum / divisor)."""
    x = node.inputs[0]
    _, _, h, w = x.shape
    kh, kw = node.attrs["kernel"]
    sh, sw = node.attrs["stride"]
    t, b, l, r = node.attrs["pads"]
    oh, ow = node.attrs["out"]
    kind = node.attrs["kind"]
    if (kh, kw) == (h, w) and (oh, ow) == (1, 1) and (t, b, l, r) == (0, 0, 0, 0):
        return {"global": True, "kind": kind}
    pads = (t, (oh - 1) * sh + kh - h - t, l, (ow - 1) * sw + kw - w - l)
    out = {"global": False, "kind": kind, "kernel": (kh, kw), "stride": (sh, sw),
           "crop": tuple(max(0, -p) for p in pads), "pads": tuple(max(0, p) for p in pads)}
    if kind == "avg":
        inc = node.attrs.get("count_include_pad", True)
        cnt = _axis_counts(h, oh, kh, sh, t, b, inc)[:, None] * _axis_counts(w, ow, kw, sw, l, r, inc)[None, :]
        out["factor"] = (np.float32(kh * kw) / np.maximum(cnt, 1.0)).astype(np.float32)
        if not np.all(cnt > 0):  # windows without real cells give 0
            out["factor"] = np.where(cnt > 0, out["factor"], 0).astype(np.float32)
    return out


def resize_matrices(node: Any) -> tuple[np.ndarray, np.ndarray]:
    """(Rh [oh, h], RwT [w, ow]) float32 with ``resize(x) == Rh @ x @ RwT`` on the last two axes."""
    h, w = node.inputs[0].shape[-2:]
    oh, ow = node.attrs["size"]
    mats = []
    for axis, (n_in, n_out) in enumerate(((h, oh), (w, ow))):
        idx, wts = axis_taps(n_in, n_out, node.attrs, axis)
        m = np.zeros((n_out, n_in), np.float64)
        for k in range(idx.shape[1]):
            np.add.at(m, (np.arange(n_out), idx[:, k]), wts[:, k].astype(np.float64))
        mats.append(m.astype(np.float32))
    return mats[0], np.ascontiguousarray(mats[1].T)


def slice_parts(node: Any) -> tuple[list[int], list[int], list[int]]:
    """(begin, end, step) of a ``slice`` node; the reference reads a negative end as 'run to the
    end of the axis' (the start, for a negative step), written as a sentinel both SDKs clamp."""
    begin = [int(b) for b in node.attrs["begin"]]
    step = [int(s) for s in node.attrs["step"]]
    end = [int(e) if e >= 0 else (-(2 ** 62) if s < 0 else 2 ** 62) for e, s in zip(node.attrs["end"], step)]
    return begin, end, step


def prelu_slope(node: Any) -> np.ndarray:
    """The slope of a claimed prelu, shaped to broadcast against its input (channel axis 1)."""
    x = node.inputs[0]
    s = np.asarray(node.inputs[1].value, np.float32).reshape(-1)
    if s.size == 1:
        return s.reshape(())
    if len(x.shape) > 1:
        return s.reshape((1, -1) + (1,) * (len(x.shape) - 2))
    return s
