"""Neural-network math ops: softmax, normalisations, moments, activations with parameters,
``matmul_ex`` (transposes + bias + activation epilogue), ``matrix_band_part``, ``svd``.

Conventions in ``docs/NN_OPS.md``. Channel axis is 1 (NCHW) for prelu / batch_norm / normalize / lrn.
"""
from __future__ import annotations

import math

import numpy as np

from .._dtypes import F32
from .elementwise import broadcast_shape
from .registry import OpDef, register


def _same(inputs, attrs):
    return inputs[0].shape, F32


# ---------------------------------------------------------------- softmax

def _softmax_ref(xs, attrs):
    x = np.asarray(xs[0], F32)
    ax = attrs["axis"]
    m = np.max(x, axis=ax, keepdims=True)
    e = np.exp(x - m)
    e /= np.sum(e, axis=ax, keepdims=True)
    return e


def _log_softmax_ref(xs, attrs):
    x = np.asarray(xs[0], F32)
    ax = attrs["axis"]
    m = np.max(x, axis=ax, keepdims=True)
    s = x - m
    return s - np.log(np.sum(np.exp(s), axis=ax, keepdims=True))


register(OpDef("softmax", "opaque", _same, _softmax_ref, mnn_type="Softmax", doc="softmax over attrs['axis']"))
register(OpDef("log_softmax", "opaque", _same, _log_softmax_ref, mnn_type="Softmax", doc="log(softmax) over axis"))


# ---------------------------------------------------------------- normalisations

def _layer_norm_ref(xs, attrs):
    x = np.asarray(xs[0], F32)
    axes = tuple(attrs["axes"])
    eps = np.float32(attrs.get("eps", 1e-5))
    group = attrs.get("group", 1)
    shape = x.shape
    if group > 1:
        x = x.reshape((shape[0], group, -1))
        axes = (2,)
    if attrs.get("rms", False):
        y = x / np.sqrt(np.mean(x * x, axis=axes, keepdims=True) + eps)
    else:
        mean = np.mean(x, axis=axes, keepdims=True)
        d = x - mean
        y = d / np.sqrt(np.mean(d * d, axis=axes, keepdims=True) + eps)
    y = y.reshape(shape)
    if len(xs) > 1:
        g = np.asarray(xs[1], F32)
        y = y * (g.reshape((-1,) + (1,) * (len(shape) - 2)) if group > 1 else g)
    if len(xs) > 2:
        b = np.asarray(xs[2], F32)
        y = y + (b.reshape((-1,) + (1,) * (len(shape) - 2)) if group > 1 else b)
    return y


register(OpDef("layer_norm", "opaque", _same, _layer_norm_ref, mnn_type="LayerNorm",
               doc="(x - mean) / sqrt(var + eps) over attrs['axes'] (or RMS), then * gamma + beta"))


def _chan(v, ndim):
    return np.asarray(v, F32).reshape((1, -1) + (1,) * (ndim - 2))


def _instance_norm_ref(xs, attrs):
    x = np.asarray(xs[0], F32)
    axes = tuple(range(2, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    d = x - mean
    y = d / np.sqrt((d * d).mean(axis=axes, keepdims=True) + np.float32(attrs.get("eps", 1e-5)))
    if len(xs) > 1:
        y = y * _chan(xs[1], x.ndim)
    if len(xs) > 2:
        y = y + _chan(xs[2], x.ndim)
    return y


register(OpDef("instance_norm", "opaque", _same, _instance_norm_ref, mnn_type="InstanceNorm",
               doc="normalise each (n, c) over the spatial axes, then * gamma[c] + beta[c]"))


def _batch_norm_ref(xs, attrs):
    x, mean, var, gamma, beta = (np.asarray(v, F32) for v in xs)
    nd = x.ndim
    inv = gamma / np.sqrt(var + np.float32(attrs.get("eps", 1e-5)))
    return x * _chan(inv, nd) + _chan(beta - mean * inv, nd)


register(OpDef("batch_norm", "opaque", _same, _batch_norm_ref, mnn_type="BatchNorm",
               doc="inference batch norm on channel axis 1: (x - mean) / sqrt(var + eps) * gamma + beta"))


def _normalize_ref(xs, attrs):
    x = np.asarray(xs[0], F32)
    scale = np.asarray(xs[1], F32).reshape(-1)
    eps = np.float32(attrs.get("eps", 1e-10))
    axes = tuple(range(1, x.ndim)) if attrs.get("across_spatial", False) else (1,)
    y = x / np.sqrt(np.sum(x * x, axis=axes, keepdims=True) + eps)
    if attrs.get("channel_shared", False) or scale.size == 1:
        return y * scale[0]
    return y * _chan(scale, x.ndim)


register(OpDef("normalize", "opaque", _same, _normalize_ref, mnn_type="Normalize",
               doc="L2 normalisation over channels (and space when across_spatial), times scale"))


def _lrn_ref(xs, attrs):
    x = np.asarray(xs[0], F32)
    size = int(attrs["size"])
    alpha, beta, bias = attrs.get("alpha", 1e-4), attrs.get("beta", 0.75), attrs.get("bias", 1.0)
    sq = x * x
    half_lo = (size - 1) // 2
    half_hi = size - 1 - half_lo
    if attrs.get("region", "across") == "across":
        c = x.shape[1]
        pad = np.pad(sq, [(0, 0), (half_lo, half_hi)] + [(0, 0)] * (x.ndim - 2))
        acc = np.zeros_like(x)
        for k in range(size):
            acc += pad[:, k: k + c]
        norm = size
    else:
        h, w = x.shape[2], x.shape[3]
        pad = np.pad(sq, [(0, 0), (0, 0), (half_lo, half_hi), (half_lo, half_hi)])
        acc = np.zeros_like(x)
        for i in range(size):
            for j in range(size):
                acc += pad[:, :, i: i + h, j: j + w]
        norm = size * size
    return x / np.power(bias + (alpha / norm) * acc, beta)


register(OpDef("lrn", "opaque", _same, _lrn_ref, mnn_type="LRN",
               doc="local response normalisation across channels or within a channel (caffe: alpha / size)"))


def _moments_infer(inputs, attrs):
    x = inputs[0]
    axes, keep = attrs["axes"], attrs["keepdims"]
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape)) if keep else \
        tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return [(shape, F32), (shape, F32)]


def _moments_ref(xs, attrs):
    x = np.asarray(xs[0], F32)
    axes = tuple(attrs["axes"])
    mean = x.mean(axis=axes, keepdims=True, dtype=np.float32)
    var = np.mean(np.square(x - mean), axis=axes, keepdims=attrs["keepdims"], dtype=np.float32)
    if not attrs["keepdims"]:
        mean = mean.reshape(var.shape)
    return mean, var


register(OpDef("moments", "opaque", _moments_infer, _moments_ref, mnn_type="Moments", n_out=2,
               doc="(mean, variance) over attrs['axes']"))


# ---------------------------------------------------------------- activations with parameters

def _prelu_ref(xs, attrs):
    x = np.asarray(xs[0], F32)
    s = np.asarray(xs[1], F32).reshape(-1)
    slope = s[0] if s.size == 1 else _chan(s, x.ndim) if x.ndim > 1 else s
    return np.where(x >= 0, x, x * slope)


def _prelu_infer(inputs, attrs):
    x, s = inputs
    c = x.shape[1] if len(x.shape) > 1 else x.shape[0]
    if s.size not in (1, c):
        raise ValueError(f"prelu: {s.size} slopes for {c} channels")
    return x.shape, F32


register(OpDef("prelu", "opaque", _prelu_infer, _prelu_ref, mnn_type="PReLU",
               doc="x if x >= 0 else slope[c] * x (channel axis 1)"))


def _param_ew(name: str, ref, scalar: str, mnn_type: str) -> None:
    register(OpDef(name, "elementwise", lambda i, a: (i[0].shape, F32), lambda xs, at: ref(np.asarray(xs[0], F32), at),
                   scalar=scalar, mnn_type=mnn_type))


_param_ew("leaky_relu", lambda x, a: np.where(x >= 0, x, x * np.float32(a["alpha"])),
          "(a if a >= 0 else a * alpha)", "ReLU")
_param_ew("elu", lambda x, a: np.where(x >= 0, x, np.float32(a["alpha"]) * np.expm1(np.minimum(x, 0))),
          "(a if a >= 0 else alpha * math.expm1(a))", "ELU")
_param_ew("selu", lambda x, a: np.float32(a["scale"]) * np.where(
    x > 0, x, np.float32(a["alpha"]) * np.expm1(np.minimum(x, 0))),
    "(scale * a if a > 0 else scale * alpha * math.expm1(a))", "Selu")
_param_ew("hard_sigmoid", lambda x, a: np.clip(np.float32(a["alpha"]) * x + np.float32(a["beta"]), 0, 1),
          "min(max(alpha * a + beta, 0.0), 1.0)", "UnaryOp")
_param_ew("hard_swish", lambda x, a: x * np.clip(x + 3, 0, 6) / 6, "a * min(max(a + 3.0, 0.0), 6.0) / 6.0", "UnaryOp")
_param_ew("silu", lambda x, a: x / (1 + np.exp(-x)), "(a / (1.0 + math.exp(-a)) if a > -88.0 else 0.0)", "UnaryOp")
_param_ew("mish", lambda x, a: x * np.tanh(np.logaddexp(np.float32(0), x)),
          "a * math.tanh(a + math.log1p(math.exp(-a)) if a > 0 else math.log1p(math.exp(a)))", "UnaryOp")


def _erfinv(x: np.ndarray) -> np.ndarray:
    """Inverse error function: Giles' single-precision approximation refined by two Newton steps."""
    x64 = np.asarray(x, np.float64)
    w = -np.log((1.0 - x64) * (1.0 + x64))
    small = w < 5.0
    ws = w - 2.5
    p1 = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941):
        p1 = c + p1 * ws
    wl = np.sqrt(np.where(small, 5.0, w)) - 3.0
    p2 = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682):
        p2 = c + p2 * wl
    y = np.where(small, p1, p2) * x64
    erf = np.frompyfunc(math.erf, 1, 1)
    for _ in range(2):
        fin = np.isfinite(y)
        err = erf(np.where(fin, y, 0.0)).astype(np.float64) - x64
        y = np.where(fin, y - err / (2.0 / math.sqrt(math.pi) * np.exp(-np.where(fin, y, 0.0) ** 2)), y)
    y = np.where(x64 == 1, np.inf, np.where(x64 == -1, -np.inf, y))
    y = np.where(np.abs(x64) > 1, np.nan, y)
    return y.astype(np.float32)


register(OpDef("erfinv", "opaque", lambda i, a: (i[0].shape, F32), lambda xs, at: _erfinv(xs[0]),
               mnn_type="UnaryOp", doc="inverse error function"))


# ---------------------------------------------------------------- matmul with epilogue

def _swap(shape):
    return shape[:-2] + (shape[-1], shape[-2]) if len(shape) >= 2 else shape


def _matmul_ex_infer(inputs, attrs):
    from .structural import matmul_shape
    a, b = inputs[0].shape, inputs[1].shape
    if attrs.get("transpose_a"):
        a = _swap(a)
    if attrs.get("transpose_b"):
        b = _swap(b)
    out = matmul_shape(a, b)
    if len(inputs) > 2:
        broadcast_shape(out, inputs[2].shape)
    return out, inputs[0].dtype


#: Products up to this many multiply-adds run on one OpenBLAS thread anyway (its own threshold for
#: threading a GEMM is m*n*k > 65536 * 4).
BLAS_SINGLE_MACS = 1 << 18


def _matmul_ex_ref(xs, attrs):
    a, b = xs[0], xs[1]
    if attrs.get("transpose_a") and a.ndim >= 2:
        a = np.swapaxes(a, -1, -2)
    if attrs.get("transpose_b") and b.ndim >= 2:
        b = np.swapaxes(b, -1, -2)
    macs = a.size * (b.shape[-1] if b.ndim >= 2 else 1)  # batch * m * k * n when a carries the batch dims
    if macs < BLAS_SINGLE_MACS:  # OpenBLAS runs these on one thread itself: no thread-count calls
        out = np.matmul(a, b)
    else:
        from .nn_conv import blas_threads_for
        with blas_threads_for(macs):
            out = np.matmul(a, b)
    if len(xs) > 2:
        out = out + xs[2]
    act = attrs.get("act", "")
    if act == "relu":
        out = np.maximum(out, 0)
    elif act == "relu6":
        out = np.clip(out, 0, 6)
    return out


register(OpDef("matmul_ex", "opaque", _matmul_ex_infer, _matmul_ex_ref, mnn_type="MatMul",
               doc="matmul with transpose_a/transpose_b, optional bias (broadcast) and relu/relu6"))


def _band_ref(xs, attrs):
    x = xs[0]
    m, n = x.shape[-2], x.shape[-1]
    lo, up = attrs["lower"], attrs["upper"]
    i = np.arange(m)[:, None]
    j = np.arange(n)[None, :]
    keep = ((lo < 0) | (i - j <= lo)) & ((up < 0) | (j - i <= up))
    return np.where(keep, x, np.zeros((), x.dtype))


register(OpDef("matrix_band_part", "opaque", lambda i, a: (i[0].shape, i[0].dtype), _band_ref,
               mnn_type="MatrixBandPart", doc="keep the band lower/upper diagonals (-1: all)"))


def _svd_infer(inputs, attrs):
    x = inputs[0]
    if len(x.shape) != 2:
        raise ValueError(f"svd: input must be 2-D, got shape {list(x.shape)}")
    m, n = x.shape
    k = min(m, n)
    return [((k,), F32), ((m, k), F32), ((k, n), F32)]


def _svd_ref(xs, attrs):
    u, s, vt = np.linalg.svd(np.asarray(xs[0], np.float64), full_matrices=False)
    return s.astype(F32), u.astype(F32), vt.astype(F32)


register(OpDef("svd_mnn", "opaque", _svd_infer, _svd_ref, mnn_type="Svd", n_out=3,
               doc="reduced SVD: (singular values, u, vt)"))

