"""Array creation: array, zeros/ones/full(_like), arange/linspace/logspace/geomspace, eye/tri, diag, meshgrid..."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as _np

from .._dtypes import F32
from .._dtypes import as_np_dtype as _as_np_dtype
from ..graph import const_node
from ..ops import build as B
from ..var import Var
from ._core import as_shape, const, full_const, node, var


def _value(x: Any) -> Any:
    return x.read_view() if isinstance(x, Var) else x


def array(object: Any, dtype: Any = None, copy: bool = True, order: str = "K", subok: bool = False,  # noqa: A002
          ndmin: int = 0, like: Any = None) -> Var:
    """A Var from array-like data (float64 -> float32, int64 -> int32, bool -> int32)."""
    if isinstance(object, Var) and dtype is None and ndmin <= object.ndim:
        return B.wrap(object._node)
    if isinstance(object, Var):
        res = B.cast(object, dtype) if dtype is not None else B.wrap(object._node)
        n = res._node
        if len(n.shape) < ndmin:
            res = B.reshape(res, (1,) * (ndmin - len(n.shape)) + n.shape)
        return res
    arr = B.to_array(object, dtype)
    while arr.ndim < ndmin:
        arr = arr[None]
    return Var._from_node(const_node(_np.array(arr)))


def asarray(a: Any, dtype: Any = None, order: str | None = None, **kwargs: Any) -> Var:
    """Like ``array`` but returns ``a`` itself when it is already a Var of the dtype."""
    if isinstance(a, Var) and (dtype is None or _as_np_dtype(dtype) == a._node.dtype):
        return a
    return array(a, dtype)


def asanyarray(a: Any, dtype: Any = None, order: str | None = None, **kwargs: Any) -> Var:
    """Same as ``asarray``."""
    return asarray(a, dtype)


def ascontiguousarray(a: Any, dtype: Any = None, **kwargs: Any) -> Var:
    """``asarray`` with at least one dimension (numpy.ascontiguousarray)."""
    res = asarray(a, dtype)
    return res if res.ndim else B.reshape(res, (1,))


def asfortranarray(a: Any, dtype: Any = None, **kwargs: Any) -> Var:
    """``asarray`` (mnnjit has one memory order; the logical values are the same)."""
    res = asarray(a, dtype)
    return res if res.ndim else B.reshape(res, (1,))


def asarray_chkfinite(a: Any, dtype: Any = None, order: str | None = None) -> Var:
    """``asarray``, raising ValueError when ``a`` holds inf or NaN."""
    res = asarray(a, dtype)
    v = res.read_view()
    if v.dtype.kind == "f" and not _np.isfinite(v).all():
        raise ValueError("array must not contain infs or NaNs")
    return res


def asfarray(a: Any, dtype: Any = _np.float32) -> Var:
    """``a`` as a float32 array (integer dtypes are replaced by float32)."""
    dt = _as_np_dtype(dtype)
    if dt.kind != "f":
        dt = F32
    return asarray(a, dt)


def require(a: Any, dtype: Any = None, requirements: Any = None) -> Var:
    """``asarray`` (every mnnjit array is aligned, owned, C-contiguous)."""
    return asarray(a, dtype)


def copy(a: Any, order: str = "K", subok: bool = False) -> Var:
    """A copy of ``a``."""
    return B.wrap(node(a)) if isinstance(a, Var) else array(a)


def asscalar(a: Any):
    """The single element of ``a`` as a Python scalar."""
    v = node(a)
    if v.size != 1:
        raise ValueError("can only convert an array of size 1 to a Python scalar")
    return var(v).read_view().item()


def mat(data: Any, dtype: Any = None) -> Var:
    """``data`` as a 2-D Var (a 1-D input becomes one row; MNN has no matrix class)."""
    res = asarray(data, dtype)
    n = res._node
    if len(n.shape) > 2:
        raise ValueError("matrix must be 2-dimensional")
    if len(n.shape) < 2:
        res = B.reshape(res, (1, n.size) if len(n.shape) == 1 else (1, 1))
    return res


matrix = mat
asmatrix = mat


def bmat(obj: Any, ldict: Any = None, gdict: Any = None) -> Var:
    """A 2-D Var built from nested blocks (numpy.bmat; string input is not supported)."""
    if isinstance(obj, str):
        raise NotImplementedError("bmat: string input is not supported by mnnjit")
    from ._shape import block
    if isinstance(obj, (list, tuple)) and obj and not isinstance(obj[0], (list, tuple)):
        obj = [list(obj)]
    return mat(block([[mat(b) for b in row] for row in obj]))


# ---------------------------------------------------------------- filled arrays
def _filled(shape: Any, value: Any, dtype: Any) -> Var:
    dt = F32 if dtype is None else _as_np_dtype(dtype)
    return full_const(as_shape(shape), value, dt)


def zeros(shape: Any, dtype: Any = None, order: str = "C") -> Var:
    """An array of zeros (float32 by default, as documented)."""
    return _filled(shape, 0, dtype)


def ones(shape: Any, dtype: Any = None, order: str = "C") -> Var:
    """An array of ones (float32 by default, as documented)."""
    return _filled(shape, 1, dtype)


def empty(shape: Any, dtype: Any = None, order: str = "C") -> Var:
    """An array of ``shape`` (zero-filled: mnnjit never hands out uninitialised memory)."""
    return _filled(shape, 0, dtype)


def full(shape: Any, fill_value: Any, dtype: Any = None, order: str = "C") -> Var:
    """An array of ``shape`` filled with ``fill_value`` (dtype from the value by default)."""
    fv = _value(fill_value)
    if dtype is None:
        dtype = B.to_array(fv).dtype
    fv = _np.asarray(fv)
    shp = as_shape(shape)
    if fv.ndim:
        return const(_np.broadcast_to(fv, shp).astype(_as_np_dtype(dtype)))
    return _filled(shp, fv.item(), dtype)


def _like(a: Any, dtype: Any, shape: Any) -> tuple[tuple[int, ...], Any]:
    n = node(a)
    return (n.shape if shape is None else as_shape(shape)), (n.dtype if dtype is None else dtype)


def zeros_like(a: Any, dtype: Any = None, order: str = "K", subok: bool = True, shape: Any = None) -> Var:
    """Zeros with ``a``'s shape and dtype."""
    shp, dt = _like(a, dtype, shape)
    return _filled(shp, 0, dt)


def ones_like(a: Any, dtype: Any = None, order: str = "K", subok: bool = True, shape: Any = None) -> Var:
    """Ones with ``a``'s shape and dtype."""
    shp, dt = _like(a, dtype, shape)
    return _filled(shp, 1, dt)


def empty_like(prototype: Any, dtype: Any = None, order: str = "K", subok: bool = True, shape: Any = None) -> Var:
    """An array with ``prototype``'s shape and dtype (zero-filled)."""
    shp, dt = _like(prototype, dtype, shape)
    return _filled(shp, 0, dt)


def full_like(a: Any, fill_value: Any, dtype: Any = None, order: str = "K", subok: bool = True,
              shape: Any = None) -> Var:
    """``fill_value`` with ``a``'s shape and dtype."""
    shp, dt = _like(a, dtype, shape)
    return full(shp, fill_value, dt)


# ---------------------------------------------------------------- ranges
def arange(*args: Any, dtype: Any = None, **kwargs: Any) -> Var:
    """Evenly spaced values in [start, stop) (numpy.arange; int32 or float32)."""
    if "start" in kwargs or "stop" in kwargs or "step" in kwargs:
        start = kwargs.pop("start", 0 if len(args) == 0 else args[0])
        stop = kwargs.pop("stop", None)
        step = kwargs.pop("step", None)
        args = (start, stop, step) if stop is not None else (start,) if step is None else (0, start, step)
    if kwargs:
        raise TypeError(f"arange() got unexpected keyword arguments {sorted(kwargs)}")
    if not args or len(args) > 4:
        raise TypeError("arange() requires stop to be specified.")
    if len(args) == 4:
        args, dtype = args[:3], args[3]
    vals = [_value(a) for a in args if a is not None]
    vals = [v.item() if isinstance(v, _np.ndarray) else v for v in vals]
    if len(vals) == 3 and vals[2] == 0:
        raise ZeroDivisionError("division by zero in arange: step must not be 0")
    # with a dtype numpy computes in it (an int dtype with a float step repeats values, as
    # numpy does: the first two values are cast, then stepped by their difference)
    arr = _np.arange(*vals) if dtype is None else _np.arange(*vals, dtype=_as_np_dtype(dtype))
    return const(arr, dtype)


def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype: Any = None, axis: int = 0):
    """``num`` evenly spaced values from ``start`` to ``stop`` (float32; numpy's rules)."""
    num = int(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    npdt = None
    if dtype is not None:
        npdt = _np.int64 if _as_np_dtype(dtype).kind in "iu" else _np.float64
    arr, step = _np.linspace(_value(start), _value(stop), num, endpoint=endpoint, retstep=True, axis=axis, dtype=npdt)
    res = const(arr, dtype)
    if retstep:
        return res, float(step) if _np.ndim(step) == 0 else const(step)
    return res


def logspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, base: Any = 10.0, dtype: Any = None,
             axis: int = 0) -> Var:
    """``base ** linspace(start, stop, num)`` (float32)."""
    arr = _np.logspace(_value(start), _value(stop), int(num), endpoint=endpoint, base=_value(base), axis=axis)
    return const(arr, dtype)


def geomspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, dtype: Any = None,
              axis: int = 0) -> Var:
    """Numbers spaced evenly on a log scale between ``start`` and ``stop`` (float32)."""
    arr = _np.geomspace(_value(start), _value(stop), int(num), endpoint=endpoint, axis=axis)
    if _np.iscomplexobj(arr):
        raise TypeError("mnnjit has no complex dtype")
    return const(arr, dtype)


# ---------------------------------------------------------------- matrices
def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = _np.float32, order: str = "C",  # noqa: N803
        like: Any = None) -> Var:
    """A 2-D array with ones on diagonal ``k`` (float32 by default)."""
    return const(_np.eye(int(N), None if M is None else int(M), int(k)), dtype)


def identity(n: int, dtype: Any = _np.float32) -> Var:
    """The n x n identity matrix (float32 by default)."""
    return eye(n, dtype=dtype)


def tri(N: int, M: int | None = None, k: int = 0, dtype: Any = _np.float32) -> Var:  # noqa: N803
    """Ones at and below diagonal ``k`` (float32 by default)."""
    return const(_np.tri(int(N), None if M is None else int(M), int(k)), dtype)


def _tri_op(op: str, m: Any, k: int) -> Var:
    n = node(m)
    if len(n.shape) == 0:
        raise ValueError(f"{op}: input must be at least 1-d")
    if len(n.shape) == 1:
        n = B.broadcast_to(var(n), (n.shape[0], n.shape[0]))._node
    return var(B.make_node(op, (n,), {"k": int(k)}))


def tril(m: Any, k: int = 0) -> Var:
    """``m`` with the elements above diagonal ``k`` zeroed."""
    return _tri_op("tril", m, k)


def triu(m: Any, k: int = 0) -> Var:
    """``m`` with the elements below diagonal ``k`` zeroed."""
    return _tri_op("triu", m, k)


def diag(v: Any, k: int = 0) -> Var:
    """The diagonal ``k`` of 2-D ``v``, or a 2-D array with 1-D ``v`` on diagonal ``k``."""
    n = node(v)
    if len(n.shape) not in (1, 2):
        raise ValueError("Input must be 1- or 2-d.")
    return var(B.make_node("diag", (n,), {"k": int(k)}))


def diagflat(v: Any, k: int = 0) -> Var:
    """A 2-D array with the flattened ``v`` on diagonal ``k``."""
    return diag(B.reshape(v, (-1,)), k)


def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Var:
    """The diagonal ``offset`` of ``a`` over axes (axis1, axis2), moved to the last axis."""
    n = node(a)
    nd = len(n.shape)
    if nd < 2:
        raise ValueError("diag requires an array of at least two dimensions")
    a1, a2 = B.normalize_axis(axis1, nd), B.normalize_axis(axis2, nd)
    if a1 == a2:
        raise ValueError("axis1 and axis2 cannot be the same")
    return var(B.make_node("diagonal", (n,), {"offset": int(offset), "axis1": a1, "axis2": a2}))


def vander(x: Any, N: int | None = None, increasing: bool = False) -> Var:  # noqa: N803
    """The Vandermonde matrix of 1-D ``x`` (powers as columns)."""
    n = node(x)
    if len(n.shape) != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    cols = n.shape[0] if N is None else int(N)
    powers = _np.arange(cols) if increasing else _np.arange(cols)[::-1]
    xcol = B.reshape(var(n), (n.shape[0], 1))
    return B.binary("pow", xcol, const(powers.astype(_np.int32) if n.dtype.kind != "f" else powers.astype(F32)))


def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> list[Var]:
    """Coordinate matrices from 1-D coordinate vectors (numpy.meshgrid)."""
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    nodes = [B.reshape(var(node(x)), (-1,))._node for x in xi]
    nd = len(nodes)
    outs = []
    for i, n in enumerate(nodes):
        shp = [1] * nd
        shp[i] = n.shape[0]
        outs.append(B.reshape(var(n), tuple(shp)))
    if indexing == "xy" and nd > 1:
        for i in range(len(outs)):
            s = list(outs[i]._node.shape)
            s[0], s[1] = s[1], s[0]
            outs[i] = B.reshape(outs[i], tuple(s))
    if sparse:
        return outs
    full_shape = _np.broadcast_shapes(*(o._node.shape for o in outs))
    return [B.broadcast_to(o, full_shape) for o in outs]


# ---------------------------------------------------------------- from functions, buffers, files
def fromfunction(function: Callable, shape: Sequence[int], dtype: Any = _np.float32, **kwargs: Any):
    """``function`` called with the index grids of ``shape`` (float32 by default)."""
    grids = _np.indices(tuple(int(s) for s in shape))
    return function(*(const(g, dtype) for g in grids), **kwargs)


def frombuffer(buffer: Any, dtype: Any = _np.float32, count: int = -1, offset: int = 0) -> Var:
    """A 1-D array from the bytes of ``buffer``."""
    dt = _np.dtype(_as_np_dtype(dtype))
    return const(_np.frombuffer(buffer, dtype=dt, count=count, offset=offset))


def fromfile(file: Any, dtype: Any = _np.float32, count: int = -1, sep: str = "", offset: int = 0) -> Var:
    """A 1-D array from a binary or text file."""
    dt = _np.dtype(_as_np_dtype(dtype))
    return const(_np.fromfile(file, dtype=dt, count=count, sep=sep, offset=offset))


def fromiter(iter: Any, dtype: Any, count: int = -1) -> Var:  # noqa: A002
    """A 1-D array from an iterable."""
    dt = _np.dtype(_as_np_dtype(dtype))
    return const(_np.fromiter(iter, dtype=dt, count=count))


def fromstring(string: Any, dtype: Any = _np.float32, count: int = -1, sep: str = "") -> Var:
    """A 1-D array from text data (``sep`` separated numbers) or raw bytes (``sep=''``)."""
    dt = _np.dtype(_as_np_dtype(dtype))
    if sep == "":
        data = string.encode("latin-1") if isinstance(string, str) else string
        return const(_np.frombuffer(data, dtype=dt, count=count).copy())
    with _np.errstate(all="ignore"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return const(_np.fromstring(string, dtype=dt, count=count, sep=sep))


def loadtxt(fname: Any, dtype: Any = _np.float32, comments: str = "#", delimiter: str | None = None,
            converters: Any = None, skiprows: int = 0, usecols: Any = None, unpack: bool = False,
            ndmin: int = 0, **kwargs: Any):
    """Data from a text file (numpy.loadtxt), as a Var (float32 by default)."""
    dt = _np.dtype(_as_np_dtype(dtype))
    arr = _np.loadtxt(fname, dtype=dt, comments=comments, delimiter=delimiter, converters=converters,
                      skiprows=skiprows, usecols=usecols, unpack=unpack, ndmin=ndmin, **kwargs)
    if unpack:
        return [const(a) for a in arr]
    return const(arr)


