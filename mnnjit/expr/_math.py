"""MNN.expr math functions: reductions, arg-reductions, matmul, scans, sorting, histogram, svd,
eltwise, select, one_hot, matrix_band_part, creation (range, fill, zeros_like, randomuniform).

Generic array ops are the ``mnnjit.numpy`` functions (imported lazily), so every front end shares
one registered op per operation.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .._dtypes import F32, I32, as_np_dtype
from ..ops import build as B
from ..var import Var
from . import _common as C


def _mnp():
    from .. import numpy as mnp
    return mnp


# ---------------------------------------------------------------- reductions

def _axes(axis: Any, ndim: int):
    if axis is None:
        return None
    ax = C.ints(axis, "axis")
    if not ax:
        return None
    return tuple(sorted({B.normalize_axis(a, ndim) for a in ax}))


def _reduce(op: str, name: str, as_bool: bool = False):
    def fn(x: Any, axis: Any = (), keepdims: bool = False) -> Var:
        n = C.node(x)
        if as_bool:
            n = B.make_node("not_equal", (n, B.scalar_node(0, n.dtype)))
        out = B.reduce("reduce_" + op, n, _axes(axis, len(n.shape)), bool(keepdims))
        if op == "mean" and n.dtype.kind in "iu":  # MNN keeps the integer dtype (truncating division)
            out = B.cast(out, n.dtype)
        return out
    fn.__name__ = name
    fn.__doc__ = f"{name}(x, axis=[], keepdims=False): reduce over ``axis`` (all axes when empty)."
    return fn


reduce_sum = _reduce("sum", "reduce_sum")
reduce_mean = _reduce("mean", "reduce_mean")
reduce_max = _reduce("max", "reduce_max")
reduce_min = _reduce("min", "reduce_min")
reduce_prod = _reduce("prod", "reduce_prod")
reduce_any = _reduce("max", "reduce_any", as_bool=True)
reduce_all = _reduce("min", "reduce_all", as_bool=True)


def argmax(x: Any, axis: int = 0) -> Var:
    """Index of the maximum along ``axis`` (int32)."""
    return _mnp().argmax(C.var(x), axis=int(axis))


def argmin(x: Any, axis: int = 0) -> Var:
    """Index of the minimum along ``axis`` (int32)."""
    return _mnp().argmin(C.var(x), axis=int(axis))


# ---------------------------------------------------------------- matmul

def matmul(a: Any, b: Any, transposeA: bool = False, transposeB: bool = False) -> Var:  # noqa: N803
    """Matrix product with optional transposes of the last two axes (batched when 3-D or more); float32."""
    na, nb = C.as_float(C.node(a)), C.as_float(C.node(b))
    if len(na.shape) < 2 or len(nb.shape) < 2:
        raise ValueError(f"matmul: inputs must be at least 2-D, got {list(na.shape)} and {list(nb.shape)}")
    if not transposeA and not transposeB:
        return B.matmul(na, nb)
    attrs = {"transpose_a": bool(transposeA), "transpose_b": bool(transposeB), "act": ""}
    return B.wrap(B.make_node("matmul_ex", (na, nb), attrs))


# ---------------------------------------------------------------- scans, sorting, histogram

def cumsum(x: Any, axis: int = 0) -> Var:
    """Cumulative sum along ``axis``."""
    return _mnp().cumsum(C.var(x), axis=int(axis))


def cumprod(x: Any, axis: int = 0) -> Var:
    """Cumulative product along ``axis``."""
    return _mnp().cumprod(C.var(x), axis=int(axis))


def sort(x: Any, axis: int = -1, arg: bool = False, descend: bool = False) -> Var:
    """Sorted values (or, with ``arg``, the int32 sorting indices) along ``axis``; ``descend`` reverses."""
    mnp = _mnp()
    v = C.var(x)
    if descend:
        if arg:
            return mnp.argsort(B.unary("neg", v), axis=int(axis), kind="stable")
        return mnp.flip(mnp.sort(v, axis=int(axis)), axis=int(axis))
    return mnp.argsort(v, axis=int(axis), kind="stable") if arg else mnp.sort(v, axis=int(axis))


def histogram(input: Any, binNum: int, minVal: float, maxVal: float) -> Var:  # noqa: A002,N803
    """Counts (float32) of ``input`` values in ``binNum`` equal bins over [minVal, maxVal] (others ignored)."""
    counts, _edges = _mnp().histogram(C.var(input), bins=int(binNum), range=(float(minVal), float(maxVal)))
    return B.cast(counts, F32)


def svd(x: Any) -> list[Var]:
    """Reduced singular value decomposition of a 2-D ``x``: [w (singular values), u, vt]."""
    n = C.as_float(C.node(x))
    return list(B.make("svd_mnn", [n], {}))


def unravel_index(indices: Any, shape: Any) -> Var:
    """Coordinates of flat ``indices`` in ``shape``: int32 [len(shape), *indices.shape]."""
    idx = C.as_int(C.node(indices))
    dims = C.ints(shape, "shape")
    out = []
    rest = B.wrap(idx)
    for k in range(len(dims) - 1, -1, -1):
        out.append(B.binary("mod", rest, dims[k]))
        rest = B.binary("floordiv", rest, dims[k])
    parts = [B.reshape(p, (1,) + tuple(idx.shape)) for p in reversed(out)]
    return B.concat(parts, 0)


def setdiff1d(x: Any, y: Any) -> Var:
    """Values of ``x`` that are not in ``y``, in ``x``'s order (MNN keeps order and duplicates)."""
    xv, yv = C.var(x), C.var(y)
    a = xv.read_view().reshape(-1)
    keep = ~np.isin(a, yv.read_view())
    n = C.node(xv)
    flat = B.reshape(n, (-1,))
    idx = np.nonzero(keep)[0].astype(np.int32)
    return B.wrap(B.make_node("take", (flat._node, B.as_node(idx)), {"axis": 0}))


def where(x: Any) -> Var:
    """Coordinates (int32 [count, ndim]) of the elements of ``x`` that are > 0 (as MNN documents)."""
    n = C.node(x)
    pos = B.binary("greater", B.wrap(n), B.wrap(B.scalar_node(0, n.dtype)))
    return _mnp().argwhere(pos)


def select(cond: Any, x: Any, y: Any) -> Var:
    """``x`` where ``cond`` is non-zero, else ``y`` (broadcasting)."""
    return B.select(cond, x, y)


# ---------------------------------------------------------------- eltwise (Caffe Eltwise)

def _eltwise(op: str, name: str):
    def fn(x: Any, y: Any, coeff: Sequence[float] = ()) -> Var:
        c = C.floats(coeff) if coeff is not None else []
        a, b = C.var(x), C.var(y)
        if c:
            # MNN: with coefficients every Eltwise type computes the weighted sum c0*x + c1*y
            if len(c) != 2:
                raise ValueError(f"{name}: coeff must be empty or have 2 values, got {c}")
            return B.binary("add", B.binary("mul", a, c[0]), B.binary("mul", b, c[1]))
        return B.binary(op, a, b)
    fn.__name__ = name
    fn.__doc__ = f"{name}(x, y, coeff): Caffe Eltwise {op}; a 2-value coeff gives c0*x + c1*y (as MNN)."
    return fn


eltwise_sum = _eltwise("add", "eltwise_sum")
eltwise_sub = _eltwise("sub", "eltwise_sub")
eltwise_prod = _eltwise("mul", "eltwise_prod")
eltwise_max = _eltwise("maximum", "eltwise_max")


# ---------------------------------------------------------------- one_hot, band part

def one_hot(indices: Any, depth: Any, onValue: float = 1.0, offValue: float = 0.0, axis: int = -1) -> Var:  # noqa: N803
    """One-hot float32 encoding of int ``indices`` (out-of-range indices give all ``offValue``)."""
    n = C.as_int(C.node(indices))
    d = int(depth.read_view().reshape(-1)[0]) if isinstance(depth, Var) else int(depth)
    nd = len(n.shape) + 1
    ax = -1 if int(axis) in (-1, nd - 1) else B.normalize_axis(int(axis), nd)
    attrs = {"depth": d, "on": float(onValue), "off": float(offValue), "axis": ax, "dtype": F32}
    return B.wrap(B.make_node("one_hot", (n,), attrs))


def matrix_band_part(x: Any, num_lower: Any, num_upper: Any) -> Var:
    """Keep ``num_lower`` sub-diagonals and ``num_upper`` super-diagonals of the last two axes (-1: all)."""
    n = C.node(x)
    lo = int(num_lower.read_view().reshape(-1)[0]) if isinstance(num_lower, Var) else int(num_lower)
    up = int(num_upper.read_view().reshape(-1)[0]) if isinstance(num_upper, Var) else int(num_upper)
    if len(n.shape) < 2:
        raise ValueError(f"matrix_band_part: x must be at least 2-D, got shape {list(n.shape)}")
    return B.wrap(B.make_node("matrix_band_part", (n,), {"lower": lo, "upper": up}))


# ---------------------------------------------------------------- creation

def range(start: Any, limit: Any, delta: Any) -> Var:  # noqa: A001 - MNN's name
    """``[start, limit)`` in steps of ``delta`` (int32 when all are ints, else float32)."""
    vals = []
    for v in (start, limit, delta):
        if isinstance(v, Var):
            v = v.read_view().reshape(-1)[0].item()
        vals.append(v)
    dt = I32 if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in vals) else F32
    if float(vals[2]) == 0:
        raise ValueError("range: delta must not be zero")
    return _mnp().arange(vals[0], vals[1], vals[2], dtype=dt)


def fill(shape: Any, value: Any) -> Var:
    """An array of ``shape`` filled with the scalar ``value`` (its dtype)."""
    dims = C.ints(shape, "shape")
    v = C.node(value)
    if v.size != 1:
        raise ValueError(f"fill: value must be a scalar, got shape {list(v.shape)}")
    return B.broadcast_to(B.reshape(v, ()), tuple(dims))


def zeros_like(x: Any) -> Var:
    """Zeros of ``x``'s shape and dtype."""
    n = C.node(x)
    return B.broadcast_to(B.scalar_node(0, n.dtype), n.shape)


def randomuniform(shape: Any, dtype: Any = None, low: float = 0.0, high: float = 1.0, seed0: int = 0,
                  seed1: int = 1) -> Var:
    """Uniform random values in [low, high): deterministic for given seeds, as MNN (whose stream differs)."""
    dims = tuple(C.ints(shape, "shape"))
    dt = F32 if dtype is None else as_np_dtype(dtype)
    rng = np.random.default_rng([int(seed0) & 0xFFFFFFFF, int(seed1) & 0xFFFFFFFF])
    vals = rng.uniform(float(low), float(high), size=dims)
    arr = np.floor(vals).astype(dt) if dt.kind in "iu" else vals.astype(dt)
    return B.wrap(B.as_node(arr))
