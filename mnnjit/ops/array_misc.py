"""Generic array ops owned by mnnjit.numpy: scans, padding, tiling, diagonals, gathers, histograms.

Attribute conventions (every ``axis`` is a non-negative int resolved by the front end):

* ``cumsum`` / ``cumprod``  inputs (x,); attrs ``axis``, ``exclusive`` (False: element i includes x[i];
                    True: it does not, the first element is 0 / 1), ``reverse`` (scan from the end).
                    Output dtype = input dtype (int32 wraps around like MNN's int32 arithmetic).
* ``pad``           inputs (x,); attrs ``pads`` (tuple of (before, after) per axis), ``mode`` (numpy's
                    names: 'constant', 'edge', 'reflect', 'symmetric', 'wrap', 'maximum', 'minimum',
                    'mean', 'median', 'linear_ramp'), ``value`` (constant / linear_ramp end value).
* ``tile``          inputs (x,); attrs ``reps`` (one per axis of x: the front end reshapes x first).
* ``repeat``        inputs (x,); attrs ``repeats`` (int, or tuple of one count per element along
                    ``axis``), ``axis``.
* ``diag``          inputs (v,); attrs ``k``: 1-D v -> 2-D matrix with v on diagonal k; 2-D v -> its
                    diagonal k (numpy.diag).
* ``diagonal``      inputs (x,); attrs ``offset``, ``axis1``, ``axis2`` (numpy.diagonal, a copy).
* ``tril`` / ``triu`` inputs (x,); attrs ``k``: zero the elements above / below diagonal k of the last
                    two axes.
* ``take_along_axis`` inputs (x, idx int32); attrs ``axis``. x and idx have the same ndim and
                    broadcast against each other on the other axes; negative indices count from the end.
* ``put_along_axis`` inputs (x, idx int32, values); attrs ``axis``; returns x with the values written.
* ``histogram``     inputs (x,) or (x, weights); attrs ``bins`` (int or tuple of ascending edges),
                    ``range`` ((lo, hi) or None: the data's min and max). Counts as numpy.histogram
                    (last bin closed): int32, or the weights' dtype.
* ``histogram_bin_edges`` inputs (x,); same attrs; the float32 bin edges.
* ``bincount``      inputs (x,) or (x, weights); attrs ``n`` (output length, known at build time).
* ``interp``        inputs (x, xp, fp) float32; attrs ``left``, ``right`` (None: fp[0] / fp[-1]), ``period``.
* ``convolve`` / ``correlate`` inputs (a, v) 1-D; attrs ``mode`` ('full', 'same', 'valid').
* ``packbits``      inputs (x,); attrs ``axis`` (None: flattened), ``bitorder``. uint8 output.
* ``unpackbits``    inputs (x uint8,); attrs ``axis``, ``count``, ``bitorder``. uint8 output.
* ``random``        no inputs; attrs ``dist`` ('uniform', 'normal', 'integers'), ``shape``, ``seed``,
                    ``low``, ``high``, ``dtype``: numpy's PCG64 Generator seeded with ``seed``, so a node
                    always produces the same values.
* ``frexp``         inputs (x float32,); two outputs: mantissa float32, exponent int32.
* ``modf``          inputs (x float32,); two outputs: fractional and integral parts (float32, x's sign).
* ``divmod``        inputs (a, b) float32 of one shape; two outputs: floor quotient and floor remainder
                    (float32), as ``floordiv`` and ``mod`` give them.
* elementwise float32: ``exp2``, ``logaddexp``, ``logaddexp2`` (numpy's NaN/inf handling).
* elementwise: ``gcd``, ``lcm`` (int32), ``nextafter``, ``ldexp`` (float32 x, int32 exponent),
                    ``cbrt``, ``signbit`` (int32 0/1); ``i0``, ``spacing`` (opaque: Numba lacks np.i0, and its
                    np.spacing differs from numpy's at -0.0).
"""
from __future__ import annotations

import numpy as np

from .._dtypes import F32, I32, U8
from .elementwise import UFUNC_OPS, broadcast_shape
from .registry import OpDef, register
from .registry import get as registry_get


# ---------------------------------------------------------------- scans
def _scan_ref(np_fn, identity):
    def ref(xs, attrs):
        x = xs[0]
        axis = attrs["axis"]
        if attrs.get("reverse"):
            x = np.flip(x, axis)
        with np.errstate(over="ignore"):
            out = np_fn(x, axis=axis, dtype=x.dtype)
        if attrs.get("exclusive") and x.shape[axis]:
            first = np.full_like(np.take(out, [0], axis=axis), identity)
            out = np.concatenate([first, np.take(out, np.arange(x.shape[axis] - 1), axis=axis)], axis=axis)
        if attrs.get("reverse"):
            out = np.flip(out, axis)
        return out
    return ref


def _same(inputs, attrs):
    return inputs[0].shape, inputs[0].dtype


register(OpDef("cumsum", "opaque", _same, _scan_ref(np.cumsum, 0), mnn_type="CumSum"))
register(OpDef("cumprod", "opaque", _same, _scan_ref(np.cumprod, 1), mnn_type="CumProd"))


# ---------------------------------------------------------------- pad / tile / repeat
def _pad_infer(inputs, attrs):
    return tuple(d + b + a for d, (b, a) in zip(inputs[0].shape, attrs["pads"])), inputs[0].dtype


def _pad_ref(xs, attrs):
    x = xs[0]
    mode = attrs.get("mode", "constant")
    pads = [tuple(p) for p in attrs["pads"]]
    value = attrs.get("value", 0)
    if mode == "constant":
        # np.pad's result built directly: the border slabs filled, the input copied in once
        # (np.pad's Python set-up costs as much as the copy on 64K elements)
        val = np.asarray(value).astype(x.dtype)
        out = np.empty(tuple(d + b + e for d, (b, e) in zip(x.shape, pads)), x.dtype)
        for ax, (b, e) in enumerate(pads):
            lead = (slice(None),) * ax
            if b:
                out[lead + (slice(0, b),)] = val
            if e:
                out[lead + (slice(out.shape[ax] - e, None),)] = val
        out[tuple(slice(b, b + d) for d, (b, _) in zip(x.shape, pads))] = x
        return out
    if mode == "linear_ramp":
        return np.pad(x, pads, mode="linear_ramp", end_values=value)
    return np.pad(x, pads, mode=mode)


register(OpDef("pad", "opaque", _pad_infer, _pad_ref, mnn_type="Padding"))


def _tile_infer(inputs, attrs):
    return tuple(d * r for d, r in zip(inputs[0].shape, attrs["reps"])), inputs[0].dtype


def _tile_ref(xs, at):
    """``np.tile`` as one broadcast assignment into the result viewed as (rep0, dim0, rep1, dim1, ...):
    numpy's tile repeats through ``ndarray.repeat``, which copies a read-only input (every graph
    value) first."""
    x = xs[0]
    reps = at["reps"]
    if type(x) is np.ndarray and x.ndim == 1 and len(reps) == 1:     # numpy's common call, written out
        r, n = int(reps[0]), x.shape[0]
        out = np.empty(r * n, x.dtype)
        if out.size:
            out.reshape(r, n)[...] = x
        return out
    x = np.asarray(x)
    reps = tuple(int(r) for r in reps)
    nd = max(len(reps), x.ndim)
    reps = (1,) * (nd - len(reps)) + reps
    shape = (1,) * (nd - x.ndim) + x.shape
    out = np.empty(tuple(r * d for r, d in zip(reps, shape)), x.dtype)
    if out.size:
        out.reshape([v for rd in zip(reps, shape) for v in rd])[...] = x.reshape([v for d in shape for v in (1, d)])
    return out


register(OpDef("tile", "opaque", _tile_infer, _tile_ref, mnn_type="Tile"))


def _repeat_infer(inputs, attrs):
    shape = list(inputs[0].shape)
    axis, rep = attrs["axis"], attrs["repeats"]
    shape[axis] = sum(rep) if isinstance(rep, tuple) else shape[axis] * rep
    return tuple(shape), inputs[0].dtype


def _repeat_ref(xs, attrs):
    rep = attrs["repeats"]
    return np.repeat(xs[0], list(rep) if isinstance(rep, tuple) else rep, axis=attrs["axis"])


register(OpDef("repeat", "opaque", _repeat_infer, _repeat_ref))


# ---------------------------------------------------------------- diagonals and triangles
def diag_len(rows: int, cols: int, k: int) -> int:
    """Length of diagonal ``k`` of a rows x cols matrix."""
    return max(0, min(rows, cols - k) if k >= 0 else min(rows + k, cols))


def _diag_infer(inputs, attrs):
    v = inputs[0]
    k = attrs["k"]
    if len(v.shape) == 1:
        n = v.shape[0] + abs(k)
        return (n, n), v.dtype
    return (diag_len(v.shape[0], v.shape[1], k),), v.dtype


register(OpDef("diag", "opaque", _diag_infer, lambda xs, at: np.diag(xs[0], at["k"]).copy(), mnn_type="MatrixBandPart"))


def _diagonal_infer(inputs, attrs):
    s = inputs[0].shape
    a1, a2 = attrs["axis1"], attrs["axis2"]
    rest = tuple(d for i, d in enumerate(s) if i not in (a1, a2))
    return rest + (diag_len(s[a1], s[a2], attrs["offset"]),), inputs[0].dtype


def _diagonal_ref(xs, attrs):
    return np.diagonal(xs[0], attrs["offset"], attrs["axis1"], attrs["axis2"]).copy()


register(OpDef("diagonal", "opaque", _diagonal_infer, _diagonal_ref))
register(OpDef("tril", "opaque", _same, lambda xs, at: np.tril(xs[0], at["k"]), mnn_type="MatrixBandPart"))
register(OpDef("triu", "opaque", _same, lambda xs, at: np.triu(xs[0], at["k"]), mnn_type="MatrixBandPart"))


# ---------------------------------------------------------------- gathers
def along_axis_shape(x: tuple[int, ...], idx: tuple[int, ...], axis: int) -> tuple[int, ...]:
    """Output shape of take_along_axis (numpy's broadcasting on the other axes)."""
    xs = x[:axis] + (1,) + x[axis + 1:]
    ids = idx[:axis] + (1,) + idx[axis + 1:]
    out = list(broadcast_shape(xs, ids))
    out[axis] = idx[axis]
    return tuple(out)


def _check_bounds(idx: np.ndarray, n: int, axis: int) -> None:
    if idx.size and (idx.min() < -n or idx.max() >= n):
        bad = idx[(idx < -n) | (idx >= n)].flat[0]
        raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {n}")


def _full_index(x_shape, idx, axis):
    """An index tuple equivalent to take_along_axis with broadcasting on the other axes."""
    nd = len(x_shape)
    out_shape = along_axis_shape(tuple(x_shape), idx.shape, axis)
    idx = np.broadcast_to(idx, out_shape)
    grids = np.ogrid[tuple(slice(0, d) for d in out_shape)]
    full = []
    for i in range(nd):
        if i == axis:
            full.append(np.where(idx < 0, idx + x_shape[axis], idx))
        else:
            full.append(grids[i] if x_shape[i] != 1 else np.zeros_like(grids[i]))
    return tuple(full), out_shape


def _take_along_infer(inputs, attrs):
    return along_axis_shape(inputs[0].shape, inputs[1].shape, attrs["axis"]), inputs[0].dtype


def _take_along_ref(xs, attrs):
    x, idx = xs
    axis = attrs["axis"]
    _check_bounds(idx, x.shape[axis], axis)
    index, _ = _full_index(x.shape, idx.astype(np.intp), axis)
    return x[index]


register(OpDef("take_along_axis", "opaque", _take_along_infer, _take_along_ref, mnn_type="GatherElements"))


def _put_along_ref(xs, attrs):
    x, idx, values = xs
    axis = attrs["axis"]
    _check_bounds(idx, x.shape[axis], axis)
    out = np.array(x, copy=True)
    index, out_shape = _full_index(x.shape, idx.astype(np.intp), axis)
    out[index] = np.broadcast_to(values.astype(x.dtype), out_shape)
    return out


register(OpDef("put_along_axis", "opaque", _same, _put_along_ref, mnn_type="ScatterElements"))


# ---------------------------------------------------------------- histograms and counting
def _hist_bins(attrs):
    bins = attrs["bins"]
    return np.asarray(bins, dtype=np.float64) if isinstance(bins, tuple) else bins


def _hist_range(x, attrs):
    rng = attrs.get("range")
    if rng is None and x.size == 0:
        return (0.0, 1.0)
    return rng


def _histogram_infer(inputs, attrs):
    bins = attrs["bins"]
    n = len(bins) - 1 if isinstance(bins, tuple) else bins
    return (n,), (inputs[1].dtype if len(inputs) > 1 else I32)


def _histogram_ref(xs, attrs):
    x = xs[0].ravel()
    weights = xs[1].ravel() if len(xs) > 1 else None
    counts, _ = np.histogram(x, bins=_hist_bins(attrs), range=_hist_range(x, attrs), weights=weights)
    return counts


def _edges_infer(inputs, attrs):
    bins = attrs["bins"]
    n = len(bins) if isinstance(bins, tuple) else bins + 1
    return (n,), F32


def _edges_ref(xs, attrs):
    x = xs[0].ravel()
    return np.histogram_bin_edges(x, bins=_hist_bins(attrs), range=_hist_range(x, attrs)).astype(np.float32)


register(OpDef("histogram", "opaque", _histogram_infer, _histogram_ref))
register(OpDef("histogram_bin_edges", "opaque", _edges_infer, _edges_ref))


def _bincount_infer(inputs, attrs):
    return (attrs["n"],), (F32 if len(inputs) > 1 else I32)


def _bincount_ref(xs, attrs):
    x = xs[0].ravel()
    if x.size and x.min() < 0:
        raise ValueError("'list' argument must have no negative elements")
    w = xs[1].ravel() if len(xs) > 1 else None
    out = np.bincount(x, weights=w, minlength=attrs["n"])
    if out.shape[0] != attrs["n"]:
        raise ValueError(f"bincount: the input now needs {out.shape[0]} bins, the graph was built for {attrs['n']}")
    return out


register(OpDef("bincount", "opaque", _bincount_infer, _bincount_ref))


def _interp_infer(inputs, attrs):
    return inputs[0].shape, F32


def _interp_ref(xs, attrs):
    x, xp, fp = xs
    return np.interp(x.astype(np.float64), xp.astype(np.float64), fp.astype(np.float64),
                     left=attrs.get("left"), right=attrs.get("right"), period=attrs.get("period"))


register(OpDef("interp", "opaque", _interp_infer, _interp_ref))


def _conv_infer(inputs, attrs):
    n, m = inputs[0].shape[0], inputs[1].shape[0]
    mode = attrs["mode"]
    if mode == "full":
        length = n + m - 1
    elif mode == "same":
        length = max(n, m)
    else:
        length = max(n, m) - min(n, m) + 1
    return (length,), inputs[0].dtype


register(OpDef("convolve", "opaque", _conv_infer, lambda xs, at: np.convolve(xs[0], xs[1], at["mode"])))
register(OpDef("correlate", "opaque", _conv_infer, lambda xs, at: np.correlate(xs[0], xs[1], at["mode"])))


def _packbits_infer(inputs, attrs):
    axis = attrs.get("axis")
    if axis is None:
        return ((inputs[0].size + 7) // 8,), U8
    shape = list(inputs[0].shape)
    shape[axis] = (shape[axis] + 7) // 8
    return tuple(shape), U8


def _unpackbits_infer(inputs, attrs):
    axis = attrs.get("axis")
    shape = [inputs[0].size] if axis is None else list(inputs[0].shape)
    ax = 0 if axis is None else axis
    count = attrs.get("count")
    n = shape[ax] * 8
    if count is not None:
        n = count if count >= 0 else max(0, n + count)
    shape[ax] = n
    return tuple(shape), U8


register(OpDef("packbits", "opaque", _packbits_infer,
               lambda xs, at: np.packbits(xs[0] != 0, axis=at.get("axis"), bitorder=at.get("bitorder", "big"))))
register(OpDef("unpackbits", "opaque", _unpackbits_infer,
               lambda xs, at: np.unpackbits(xs[0], axis=at.get("axis"), count=at.get("count"),
                                            bitorder=at.get("bitorder", "big"))))


# ---------------------------------------------------------------- random numbers
def _random_infer(inputs, attrs):
    return tuple(attrs["shape"]), np.dtype(attrs["dtype"])


def _random_ref(xs, attrs):
    rng = np.random.Generator(np.random.PCG64(attrs["seed"]))
    shape, dist, dt = tuple(attrs["shape"]), attrs["dist"], np.dtype(attrs["dtype"])
    if dist == "uniform":
        lo, hi = attrs.get("low", 0.0), attrs.get("high", 1.0)
        return (lo + (hi - lo) * rng.random(shape, dtype=np.float64)).astype(dt)
    if dist == "normal":
        return (attrs.get("low", 0.0) + attrs.get("high", 1.0) * rng.standard_normal(shape)).astype(dt)
    if dist == "integers":
        return rng.integers(attrs["low"], attrs["high"], size=shape, dtype=np.int64).astype(dt)
    raise ValueError(f"unknown distribution {dist!r}")


register(OpDef("random", "opaque", _random_infer, _random_ref, mnn_type="RandomUniform"))


# ---------------------------------------------------------------- extra elementwise
def _frexp_infer(inputs, attrs):
    return [(inputs[0].shape, F32), (inputs[0].shape, I32)]


def _frexp_ref(xs, attrs):
    m, e = np.frexp(xs[0].astype(np.float32))
    return m.astype(np.float32), e.astype(np.int32)


register(OpDef("frexp", "opaque", _frexp_infer, _frexp_ref, n_out=2))


def _pair_f32_infer(inputs, attrs):
    shape = inputs[0].shape
    return [(shape, F32), (shape, F32)]


def _modf_ref(xs, attrs):
    with np.errstate(all="ignore"):
        return np.modf(xs[0])


def _divmod_ref(xs, attrs):
    with np.errstate(all="ignore"):
        return np.divmod(xs[0], xs[1])


def _sinc_ref(xs, attrs):
    """``sinc`` of float32 x: the front end's node chain (x * float32(pi); where x == 0 the argument
    1 and the result 1; sin(arg) / arg), each step the same numpy call, fewer passes."""
    x = xs[0]
    with np.errstate(all="ignore"):
        arg = np.multiply(x, np.float32(np.pi))
        zero = np.equal(x, np.float32(0))
        if type(arg) is not np.ndarray:     # 0-d
            return np.asarray(np.float32(1) if zero else np.true_divide(np.sin(arg), arg))
        np.copyto(arg, np.float32(1), where=zero)
        out = np.sin(arg)
        np.true_divide(out, arg, out=out)
        np.copyto(out, np.float32(1), where=zero)
    return out


register(OpDef("sinc", "opaque", _same, _sinc_ref))


# one pass where the front end would build two or more elementwise nodes (numpy's loops compute
# both results together): float32 only, inputs of one shape
register(OpDef("modf", "opaque", _pair_f32_infer, _modf_ref, n_out=2))
register(OpDef("divmod", "opaque", _pair_f32_infer, _divmod_ref, n_out=2))


def _bin_same(inputs, attrs):
    return broadcast_shape(*(i.shape for i in inputs)), inputs[0].dtype


def _bin_i32(inputs, attrs):
    return broadcast_shape(*(i.shape for i in inputs)), I32


def _un_i32(inputs, attrs):
    return inputs[0].shape, I32


register(OpDef("gcd", "elementwise", _bin_same, lambda xs, at: np.gcd(xs[0], xs[1]), scalar="math.gcd(a, b)"))
register(OpDef("lcm", "elementwise", _bin_same, lambda xs, at: np.lcm(xs[0], xs[1]),
               scalar="(abs(a * b) // math.gcd(a, b) if a and b else 0)"))
register(OpDef("nextafter", "elementwise", _bin_same, lambda xs, at: np.nextafter(xs[0], xs[1]),
               scalar="np.nextafter(a, b)"))
register(OpDef("ldexp", "elementwise", lambda i, a: (broadcast_shape(i[0].shape, i[1].shape), i[0].dtype),
               lambda xs, at: np.ldexp(xs[0], xs[1]), scalar="math.ldexp(a, b)"))
register(OpDef("spacing", "opaque", _same, lambda xs, at: np.spacing(xs[0])))  # Numba's np.spacing(-0.0) < 0
register(OpDef("i0", "opaque", _same, lambda xs, at: np.i0(xs[0].astype(np.float64))))  # Numba has no np.i0
register(OpDef("cbrt", "elementwise", _same, lambda xs, at: np.cbrt(xs[0]),
               scalar="math.copysign(abs(a) ** (1.0 / 3.0), a)"))
def _signbit_ref(xs, at):
    x = xs[0]
    if x.dtype == np.float32:   # the sign bit shifted down: int32 0/1 in one pass (not bool, then widened)
        return (x.view(np.uint32) >> np.uint32(31)).view(np.int32)
    return np.signbit(x)


register(OpDef("signbit", "elementwise", _un_i32, _signbit_ref,
               scalar="(1 if math.copysign(1.0, a) < 0 else 0)"))

register(OpDef("exp2", "elementwise", _same, lambda xs, at: np.exp2(xs[0]), scalar="(2.0 ** a)"))


def _logaddexp_ref(fn):
    def ref(xs, at):
        with np.errstate(all="ignore"):
            return fn(xs[0], xs[1])
    return ref


register(OpDef("logaddexp", "elementwise", _bin_same, _logaddexp_ref(np.logaddexp),
               scalar="((a + b) if (a != a or b != b) else (a + 0.6931471805599453 if a == b else "
                      "(max(a, b) + math.log1p(math.exp(-abs(a - b))))))"))
register(OpDef("logaddexp2", "elementwise", _bin_same, _logaddexp_ref(np.logaddexp2),
               scalar="((a + b) if (a != a or b != b) else (a + 1.0 if a == b else "
                      "(max(a, b) + math.log1p(2.0 ** (-abs(a - b))) * 1.4426950408889634)))"))

# one ufunc each (under an error state the eager route sets itself): its direct route
UFUNC_OPS.update({name: (fn, registry_get(name).ref) for name, fn in (
    ("exp2", np.exp2), ("cbrt", np.cbrt), ("logaddexp", np.logaddexp), ("logaddexp2", np.logaddexp2))})
