"""Shape and layout functions: reshape, stack/split, tile/repeat/pad, flip/roll/rot90, insert/delete..."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as _np

from ..ops import build as B
from ..ops.build import AxisError
from ..graph import Node
from ..var import Var
from ._core import axis_arg, const, finish, flat, is_int, node, slice_node, var


def shape(a: Any) -> tuple[int, ...]:
    """The shape of ``a`` as a tuple."""
    return tuple(node(a).shape)


def reshape(a: Any, *newshape: Any, order: str = "C", **kwargs: Any) -> Var:
    """``a`` with a new shape (one -1 allowed)."""
    if "newshape" in kwargs or "shape" in kwargs:
        newshape = kwargs.get("shape", kwargs.get("newshape"))
    elif len(newshape) == 1:
        newshape = newshape[0]
    if order not in ("C", "A", "K"):
        raise NotImplementedError("mnnjit stores arrays in C order only (order='F' is not supported)")
    return B.reshape(a, newshape)


def ravel(a: Any, order: str = "C") -> Var:
    """``a`` flattened to 1-D."""
    return flat(a)


def transpose(a: Any, axes: Sequence[int] | None = None) -> Var:
    """``a`` with its axes permuted (reversed when ``axes`` is None)."""
    return B.transpose(a, axes)


def swapaxes(a: Any, axis1: int, axis2: int) -> Var:
    """``a`` with two axes exchanged."""
    nd = len(node(a).shape)
    a1, a2 = axis_arg(axis1, nd), axis_arg(axis2, nd)
    perm = list(range(nd))
    perm[a1], perm[a2] = perm[a2], perm[a1]
    return B.transpose(a, perm)


def _axes_list(axes: Any, nd: int, what: str) -> list[int]:
    axes = [axes] if is_int(axes) else list(axes)
    return [axis_arg(x, nd) for x in axes]


def moveaxis(a: Any, source: Any, destination: Any) -> Var:
    """``a`` with axes moved from ``source`` to ``destination`` positions."""
    nd = len(node(a).shape)
    src = _axes_list(source, nd, "source")
    dst = _axes_list(destination, nd, "destination")
    if len(src) != len(dst):
        raise ValueError("`source` and `destination` arguments must have the same number of elements")
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError("repeated axis in `source` or `destination` argument")
    order = [n for n in range(nd) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return B.transpose(a, order)


def rollaxis(a: Any, axis: int, start: int = 0) -> Var:
    """Roll ``axis`` backwards until it lies at ``start``."""
    nd = len(node(a).shape)
    axis = axis_arg(axis, nd)
    if start < 0:
        start += nd
    if not 0 <= start <= nd:
        raise AxisError(f"'start' arg requires {-nd} <= start < {nd + 1}, but {start} was passed in")
    if axis < start:
        start -= 1
    if axis == start:
        return var(node(a))
    perm = [i for i in range(nd) if i != axis]
    perm.insert(start, axis)
    return B.transpose(a, perm)


def expand_dims(a: Any, axis: Any) -> Var:
    """``a`` with new length-1 axes at ``axis`` (int or tuple)."""
    n = node(a)
    if type(axis) is int:           # one axis (numpy's common call): no sorting or set
        shape = n.shape
        ax = axis_arg(axis, len(shape) + 1)
        return B.reshape(var(n), shape[:ax] + (1,) + shape[ax:])
    axes = [axis] if is_int(axis) else list(axis)
    out_nd = len(n.shape) + len(axes)
    axes = sorted(axis_arg(x, out_nd) for x in axes)
    if len(set(axes)) != len(axes):
        raise ValueError("repeated axis")
    it = iter(n.shape)
    new = tuple(1 if i in axes else next(it) for i in range(out_nd))
    return B.reshape(var(n), new)


def squeeze(a: Any, axis: Any = None) -> Var:
    """``a`` without length-1 axes (only ``axis`` when given)."""
    n = node(a)
    if axis is None:
        new = tuple(d for d in n.shape if d != 1)
    else:
        axes = B.normalize_axes(axis, len(n.shape))
        for x in axes:
            if n.shape[x] != 1:
                raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
        new = tuple(d for i, d in enumerate(n.shape) if i not in axes)
    return B.reshape(var(n), new)


def _atleast(nd: int, arys: tuple):
    res = []
    for a in arys:
        n = node(a)
        s = n.shape
        if len(s) >= nd:
            res.append(var(n))
            continue
        if nd == 1:
            new = (1,) * (1 - len(s)) + s
        elif nd == 2:
            new = (1,) * (2 - len(s)) + s
        else:
            new = {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}[len(s)]
        res.append(B.reshape(var(n), new))
    return res[0] if len(res) == 1 else res


def atleast_1d(*arys: Any):
    """Inputs viewed with at least one dimension."""
    return _atleast(1, arys)


def atleast_2d(*arys: Any):
    """Inputs viewed with at least two dimensions."""
    return _atleast(2, arys)


def atleast_3d(*arys: Any):
    """Inputs viewed with at least three dimensions."""
    return _atleast(3, arys)


def broadcast_to(array: Any, shape: Any, subok: bool = False) -> Var:
    """``array`` broadcast to ``shape``."""
    shape = (int(shape),) if is_int(shape) else tuple(int(s) for s in shape)
    return B.broadcast_to(array, shape)


def broadcast_shapes(*shapes: Any) -> tuple[int, ...]:
    """numpy's broadcast of shapes."""
    from ..ops.elementwise import broadcast_shape
    return broadcast_shape(*(tuple(s) if not is_int(s) else (int(s),) for s in shapes))


def broadcast_arrays(*args: Any, subok: bool = False) -> list[Var]:
    """The inputs broadcast against each other."""
    nodes = [node(a) for a in args]
    shp = broadcast_shapes(*(n.shape for n in nodes))
    return [B.broadcast_to(var(n), shp) for n in nodes]


class broadcast:  # noqa: N801 - numpy's name
    """numpy.broadcast: the broadcast shape of its inputs, iterable as tuples of Python scalars."""

    def __init__(self, *args: Any) -> None:
        self._vars = broadcast_arrays(*args)
        self.shape = broadcast_shapes(*(node(a).shape for a in args)) if args else ()
        self.nd = self.ndim = len(self.shape)
        self.size = int(_np.prod(self.shape))
        self.numiter = len(args)
        self.index = 0

    def __iter__(self):
        arrays = [v.read_view().ravel() for v in self._vars]
        for i in range(self.size):
            self.index = i + 1
            yield tuple(a[i].item() for a in arrays)

    def reset(self) -> None:
        """Restart the iteration."""
        self.index = 0


# ---------------------------------------------------------------- joining
def concatenate(arrays: Sequence[Any], axis: Any = 0, out: Any = None, dtype: Any = None,
                casting: str = "same_kind") -> Var:
    """Join arrays along an existing axis (None: flattened first)."""
    arrays = list(arrays)
    if axis is None:
        arrays = [flat(a) for a in arrays]
        axis = 0
    res = B.concat(arrays, axis)
    if dtype is not None:
        res = res.astype(dtype)
    return finish(res, out)


def stack(arrays: Sequence[Any], axis: int = 0, out: Any = None, dtype: Any = None) -> Var:
    """Join arrays along a new axis."""
    if dtype is None and out is None and type(axis) is int and (type(arrays) is list or type(arrays) is tuple) \
            and len(arrays) > 1:
        first = arrays[0]
        if type(first) is Var:
            n0 = first._node
            for a in arrays:
                if type(a) is not Var or a._node.shape != n0.shape or a._node.dtype != n0.dtype:
                    break
            else:   # Vars of one shape and dtype (numpy's common call): the expand_dims nodes written out
                shape = n0.shape
                ax = axis_arg(axis, len(shape) + 1)
                new = shape[:ax] + (1,) + shape[ax:]
                return B.concat([var(Node.built("reshape", (a._node,), {"shape": new}, new, a._node.dtype,
                                                a._node.fmt)) for a in arrays], ax)
    nodes = [node(a) for a in arrays]
    if not nodes:
        raise ValueError("need at least one array to stack")
    shapes = {n.shape for n in nodes}
    if len(shapes) != 1:
        raise ValueError("all input arrays must have the same shape")
    ax = axis_arg(axis, len(nodes[0].shape) + 1)
    res = B.concat([expand_dims(var(n), ax) for n in nodes], ax)
    if dtype is not None:
        res = res.astype(dtype)
    return finish(res, out)


def vstack(tup: Sequence[Any], dtype: Any = None) -> Var:
    """Stack arrays row-wise (along axis 0 after atleast_2d)."""
    arrs = [atleast_2d(a) for a in tup]
    return concatenate(arrs, 0, dtype=dtype)


row_stack = vstack


def hstack(tup: Sequence[Any], dtype: Any = None) -> Var:
    """Stack arrays column-wise (axis 1, or 0 for 1-D inputs)."""
    arrs = [atleast_1d(a) for a in tup]
    if not arrs:
        raise ValueError("need at least one array to concatenate")
    return concatenate(arrs, 0 if len(node(arrs[0]).shape) == 1 else 1, dtype=dtype)


def dstack(tup: Sequence[Any]) -> Var:
    """Stack arrays along the third axis."""
    return concatenate([atleast_3d(a) for a in tup], 2)


def column_stack(tup: Sequence[Any]) -> Var:
    """Stack 1-D arrays as columns of a 2-D array."""
    arrs = []
    for a in tup:
        n = node(a)
        arrs.append(B.reshape(var(n), (n.shape[0], 1)) if len(n.shape) < 2 else var(n))
    return concatenate(arrs, 1)


def block(arrays: Any) -> Var:
    """Assemble an array from nested lists of blocks (numpy.block)."""
    def depth(x):
        return 1 + depth(x[0]) if isinstance(x, list) and x else (1 if isinstance(x, list) else 0)

    list_depth = depth(arrays)
    if list_depth == 0:
        return var(node(arrays))
    leaves = []

    def collect(x):
        if isinstance(x, list):
            for y in x:
                collect(y)
        else:
            leaves.append(node(x))
    collect(arrays)
    result_nd = max([list_depth] + [len(n.shape) for n in leaves])

    def rec(x, level):
        if not isinstance(x, list):
            n = node(x)
            return B.reshape(var(n), (1,) * (result_nd - len(n.shape)) + n.shape)
        parts = [rec(y, level + 1) for y in x]
        return B.concat(parts, result_nd - list_depth + level)
    return rec(arrays, 0)


# ---------------------------------------------------------------- splitting
def array_split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list[Var]:
    """Split into sub-arrays (sections may be unequal)."""
    n = node(ary)
    ax = axis_arg(axis, len(n.shape))
    length = n.shape[ax]
    if is_int(indices_or_sections):
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ValueError("number sections must be larger than 0.")
        each, extra = divmod(length, sections)
        bounds = [0]
        for k in range(sections):
            bounds.append(bounds[-1] + each + (k < extra))
    else:
        idx = indices_or_sections
        if isinstance(idx, Var):
            idx = idx.read_view().tolist()
        bounds = [0] + [int(i) for i in idx] + [length]
    out = []
    shape = n.shape
    nd = len(shape)
    step = (1,) * nd
    zeros = [0] * nd
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        lo = min(max(lo + length if lo < 0 else lo, 0), length)
        hi = min(max(hi + length if hi < 0 else hi, 0), length)
        hi = max(lo, hi)
        if lo == hi:
            lo = hi = 0  # an empty piece (as indexing normalises it)
        if lo == 0 and hi == length:
            out.append(var(n))
            continue
        # slice_node's node, its shape written out (one axis cut, step 1: ``_slice_infer``'s result)
        begin, end = zeros[:], list(shape)
        begin[ax], end[ax] = int(lo), int(hi)
        out.append(var(Node.built("slice", (n,), {"begin": tuple(begin), "end": tuple(end), "step": step},
                                  shape[:ax] + (int(hi) - int(lo),) + shape[ax + 1:], n.dtype, n.fmt)))
    return out


def split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list[Var]:
    """Split into equal sub-arrays (an error when the axis does not divide) or at indices."""
    if type(ary) is Var and type(indices_or_sections) is int and type(axis) is int and indices_or_sections > 0:
        # numpy's common call (equal sections of a Var): the slice nodes written out
        n = ary._node
        shape = n.shape
        nd = len(shape)
        ax = axis_arg(axis, nd)
        length, k = shape[ax], indices_or_sections
        if length % k:
            raise ValueError("array split does not result in an equal division")
        if k == 1:
            return [var(n)]
        each = length // k
        if each == 0:   # (an empty axis: the general path)
            return array_split(ary, k, axis)
        piece = shape[:ax] + (each,) + shape[ax + 1:]
        step = (1,) * nd
        begin, end = [0] * nd, list(shape)
        out = []
        for lo in range(0, length, each):
            begin[ax], end[ax] = lo, lo + each
            out.append(var(Node.built("slice", (n,), {"begin": tuple(begin), "end": tuple(end), "step": step},
                                      piece, n.dtype, n.fmt)))
        return out
    if is_int(indices_or_sections):
        n = node(ary)
        ax = axis_arg(axis, len(n.shape))
        if int(indices_or_sections) <= 0:
            raise ValueError("number sections must be larger than 0.")
        if n.shape[ax] % int(indices_or_sections):
            raise ValueError("array split does not result in an equal division")
    return array_split(ary, indices_or_sections, axis)


def hsplit(ary: Any, indices_or_sections: Any) -> list[Var]:
    """Split along axis 1 (axis 0 for 1-D)."""
    nd = len(node(ary).shape)
    if nd == 0:
        raise ValueError("hsplit only works on arrays of 1 or more dimensions")
    return split(ary, indices_or_sections, 1 if nd > 1 else 0)


def vsplit(ary: Any, indices_or_sections: Any) -> list[Var]:
    """Split along axis 0 (needs 2-D or more)."""
    if len(node(ary).shape) < 2:
        raise ValueError("vsplit only works on arrays of 2 or more dimensions")
    return split(ary, indices_or_sections, 0)


def dsplit(ary: Any, indices_or_sections: Any) -> list[Var]:
    """Split along axis 2 (needs 3-D or more)."""
    if len(node(ary).shape) < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return split(ary, indices_or_sections, 2)


# ---------------------------------------------------------------- tile / repeat / pad
def tile(A: Any, reps: Any) -> Var:  # noqa: N803 - numpy's name
    """``A`` repeated ``reps`` times along each axis."""
    if type(A) is Var and type(reps) is int and reps > 1 and len(A._node.shape) == 1:
        # numpy's common call (a 1-D Var, an int count): the node written out
        n = A._node
        shape = (n.shape[0] * reps,)
        return var(Node.built("tile", (n,), {"reps": (reps,)}, shape, n.dtype, n.fmt))
    n = node(A)
    reps = (int(reps),) if is_int(reps) else tuple(int(r) for r in reps)
    if any(r < 0 for r in reps):
        raise ValueError("negative dimensions are not allowed")
    nd = max(len(n.shape), len(reps))
    shp = (1,) * (nd - len(n.shape)) + n.shape
    reps = (1,) * (nd - len(reps)) + reps
    if shp != n.shape:
        n = B.reshape(var(n), shp)._node
    if all(r == 1 for r in reps):
        return var(n)
    return var(B.make_node("tile", (n,), {"reps": reps}))


def repmat(a: Any, m: int, n: int) -> Var:
    """``a`` (as 2-D) tiled m x n times."""
    return tile(atleast_2d(a), (m, n))


def repeat(a: Any, repeats: Any, axis: Any = None) -> Var:
    """Each element of ``a`` repeated (``repeats`` an int or one count per element along ``axis``)."""
    n = node(a)
    if axis is None:
        n, ax = flat(var(n))._node, 0
    else:
        ax = axis_arg(axis, len(n.shape))
    if isinstance(repeats, Var):
        repeats = repeats.read_view().tolist()
    if isinstance(repeats, (list, tuple, _np.ndarray)):
        reps = tuple(int(r) for r in _np.asarray(repeats).ravel())
        if len(reps) == 1:
            reps = reps[0]
        elif len(reps) != n.shape[ax]:
            raise ValueError(f"operands could not be broadcast together with shape ({n.shape[ax]},) ({len(reps)},)")
    else:
        reps = int(repeats)
    if (min(reps, default=0) if isinstance(reps, tuple) else reps) < 0:
        raise ValueError("repeats may not contain negative values.")
    return var(B.make_node("repeat", (n,), {"repeats": reps, "axis": ax}))


_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap", "maximum", "minimum", "mean", "median",
              "linear_ramp", "empty")


def _pad_widths(pad_width: Any, nd: int) -> tuple[tuple[int, int], ...]:
    if type(pad_width) is int and pad_width >= 0:     # one width for every edge (the common call)
        return ((pad_width, pad_width),) * nd
    if isinstance(pad_width, Var):
        pad_width = pad_width.read_view()
    pw = _np.asarray(pad_width)
    if pw.dtype.kind not in "iu":
        if pw.dtype.kind == "f" and _np.all(pw == _np.round(pw)):
            pw = pw.astype(_np.int64)
        else:
            raise TypeError("`pad_width` must be of integral type.")
    if pw.ndim == 1 and pw.size == 2 * nd and nd > 1:
        pw = pw.reshape(nd, 2)  # MNN also accepts a flat list of 2*ndim numbers
    try:
        pw = _np.broadcast_to(pw, (nd, 2))
    except ValueError:
        raise ValueError(f"operands could not be broadcast together with remapped shapes "
                         f"[original->remapped]: {pw.shape} and requested shape ({nd},2)") from None
    if _np.any(pw < 0):
        raise ValueError("index can't contain negative values")
    return tuple((int(b), int(e)) for b, e in pw)


def pad(array: Any, pad_width: Any, mode: str = "constant", constant_values: Any = 0,
        end_values: Any = 0, reflect_type: str = "even", **kwargs: Any) -> Var:
    """``array`` padded (numpy.pad's modes: constant, edge, reflect, symmetric, wrap, ...)."""
    n = node(array)
    if callable(mode) or mode not in _PAD_MODES:
        raise ValueError(f"mode '{mode}' is not supported")
    if reflect_type != "even":
        raise NotImplementedError("pad: reflect_type='odd' is not supported")
    pads = _pad_widths(pad_width, len(n.shape))
    if mode in ("edge", "reflect", "symmetric", "wrap", "maximum", "minimum", "mean", "median"):
        for ax, (b, e) in enumerate(pads):
            if n.shape[ax] == 0 and (b or e):
                raise ValueError(f"can't extend empty axis {ax} using modes other than 'constant' or 'empty'")
    if mode == "empty":
        mode = "constant"
    value = constant_values if mode == "constant" else end_values
    if isinstance(value, Var):
        value = value.read_view()
    if type(value) is not int and type(value) is not float:
        v = _np.asarray(value)
        if v.size != 1:
            raise NotImplementedError("pad: only a single constant value is supported (one for all edges)")
        value = v.item()
    if mode == "mean" and n.dtype.kind != "f":
        pass
    if all(b == 0 and e == 0 for b, e in pads):
        return var(n)
    return var(B.make_node("pad", (n,), {"pads": pads, "mode": mode, "value": value}))


# ---------------------------------------------------------------- flips and rolls
#: (shape, axis) of a flip seen before -> its slice attributes (None: nothing to reverse)
_FLIP_SIG: dict = {}


def flip(m: Any, axis: Any = None) -> Var:
    """``m`` reversed along ``axis`` (all axes when None)."""
    if type(m) is Var and (axis is None or type(axis) is int):
        n = m._node
        key = (n.shape, axis)
        hit = _FLIP_SIG.get(key, False)
        if hit is None:
            return var(n)
        if hit is not False:
            return var(Node.built("slice", (n,), dict(hit), n.shape, n.dtype, n.fmt))
        res = _flip(n, axis)
        if len(_FLIP_SIG) < 4096:
            _FLIP_SIG[key] = None if res is n else res.attrs
        return var(res)
    return var(_flip(node(m), axis))


def _flip(n: Node, axis: Any) -> Node:
    axes = B.normalize_axes(axis, len(n.shape))
    begin, end, step = [], [], []
    for i, d in enumerate(n.shape):
        if i in axes and d:
            begin.append(d - 1), end.append(-1), step.append(-1)
        elif i in axes:
            begin.append(0), end.append(0), step.append(1)
        else:
            begin.append(0), end.append(d), step.append(1)
    return slice_node(n, begin, end, step)


def fliplr(m: Any) -> Var:
    """Reverse the second axis."""
    if len(node(m).shape) < 2:
        raise ValueError("Input must be >= 2-d.")
    return flip(m, 1)


def flipud(m: Any) -> Var:
    """Reverse the first axis."""
    if len(node(m).shape) < 1:
        raise ValueError("Input must be >= 1-d.")
    return flip(m, 0)


def rot90(m: Any, k: int = 1, axes: Sequence[int] = (0, 1)) -> Var:
    """Rotate by 90 degrees ``k`` times in the plane of ``axes``."""
    n = node(m)
    nd = len(n.shape)
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError("len(axes) must be 2.")
    if axes[0] == axes[1] or abs(axes[0] - axes[1]) == nd:
        raise ValueError("Axes must be different.")
    a0, a1 = axis_arg(axes[0], nd), axis_arg(axes[1], nd)
    k %= 4
    if k == 0:
        return var(n)
    if k == 2:
        return flip(flip(m, a0), a1)
    perm = list(range(nd))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return B.transpose(flip(m, a1), perm)
    return flip(B.transpose(m, perm), a1)


def roll(a: Any, shift: Any, axis: Any = None) -> Var:
    """Elements rolled by ``shift`` along ``axis`` (flattened when None)."""
    if type(a) is Var and type(shift) is int and (axis is None or type(axis) is int):
        # numpy's common call: the nodes below written out (a tail and a head slice, joined)
        n = a._node
        rn = n if axis is None and len(n.shape) == 1 else (flat(a)._node if axis is None else n)
        shape = rn.shape
        ax = 0 if axis is None else axis_arg(axis, len(shape))
        size = shape[ax]
        s = shift % size if size else 0
        if s == 0:
            return var(n)
        nd = len(shape)
        ones, begin, end = (1,) * nd, [0] * nd, list(shape)
        begin[ax] = size - s
        tail = Node.built("slice", (rn,), {"begin": tuple(begin), "end": tuple(end), "step": ones},
                          shape[:ax] + (s,) + shape[ax + 1:], rn.dtype, rn.fmt)
        begin[ax], end[ax] = 0, size - s
        head = Node.built("slice", (rn,), {"begin": tuple(begin), "end": tuple(end), "step": ones},
                          shape[:ax] + (size - s,) + shape[ax + 1:], rn.dtype, rn.fmt)
        res = var(Node.built("concat", (tail, head), {"axis": ax}, shape, rn.dtype, rn.fmt))
        return res if rn is n else B.reshape(res, n.shape)
    n = node(a)
    if axis is None:
        res = roll(flat(var(n)), shift, 0)
        return B.reshape(res, n.shape)
    axes = [axis] if is_int(axis) else list(axis)
    shifts = [shift] * len(axes) if is_int(shift) else list(shift)
    if len(shifts) == 1 and len(axes) > 1:
        shifts = shifts * len(axes)
    if len(axes) == 1 and len(shifts) > 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError("'shift' and 'axis' should be scalars or 1D sequences")
    total: dict[int, int] = {}
    for ax, s in zip(axes, shifts):
        ax = axis_arg(ax, len(n.shape))
        total[ax] = total.get(ax, 0) + int(s)
    res = var(n)
    for ax, s in total.items():
        size = n.shape[ax]
        if size == 0:
            continue
        s %= size
        if s == 0:
            continue
        rn = res._node
        nd = len(rn.shape)
        begin, end = [0] * nd, list(rn.shape)
        begin[ax] = size - s
        tail = slice_node(rn, begin, end, [1] * nd)
        begin[ax], end[ax] = 0, size - s
        head = slice_node(rn, begin, end, [1] * nd)
        res = var(B.make_node("concat", (tail, head), {"axis": ax}, fmt=rn.fmt))
    return res


def resize(a: Any, new_shape: Any) -> Var:
    """``a`` repeated/truncated (flattened, in order) to fill ``new_shape``."""
    shp = (int(new_shape),) if is_int(new_shape) else tuple(int(s) for s in new_shape)
    if any(s < 0 for s in shp):
        raise ValueError("all elements of `new_shape` must be non-negative")
    f = flat(a)
    size = int(_np.prod(shp))
    n = f._node.shape[0]
    if n == 0 or size == 0:
        return B.reshape(const(_np.zeros(size, f._node.dtype)), shp)
    reps = -(-size // n)
    t = tile(f, reps) if reps > 1 else f
    return B.reshape(t[:size], shp)


def append(arr: Any, values: Any, axis: Any = None) -> Var:
    """``arr`` with ``values`` appended (flattened when axis is None)."""
    if axis is None:
        return B.concat([flat(arr), flat(values)], 0)
    return concatenate([arr, values], axis)


def _positions(obj: Any, length: int) -> _np.ndarray:
    if isinstance(obj, slice):
        return _np.arange(length)[obj]
    if isinstance(obj, Var):
        obj = obj.read_view()
    return _np.asarray(obj)


def delete(arr: Any, obj: Any, axis: Any = None) -> Var:
    """``arr`` without the entries ``obj`` along ``axis`` (flattened when None)."""
    n = node(arr)
    if axis is None:
        n, ax = flat(var(n))._node, 0
    else:
        ax = axis_arg(axis, len(n.shape))
    length = n.shape[ax]
    pos = _positions(obj, length)
    if pos.dtype == bool:
        if pos.shape != (length,):
            raise ValueError(f"boolean array argument obj to delete must be one dimensional and match the axis "
                             f"length of {length}")
        keep = ~pos
    else:
        pos = pos.astype(_np.int64).ravel()
        if pos.size and (pos.min() < -length or pos.max() >= length):
            bad = pos[(pos < -length) | (pos >= length)][0]
            raise IndexError(f"index {bad} is out of bounds for axis {ax} with size {length}")
        keep = _np.ones(length, bool)
        keep[pos] = False
    from ._indexing import take
    return take(var(n), const(_np.nonzero(keep)[0].astype(_np.int32)), axis=ax)


def insert(arr: Any, obj: Any, values: Any, axis: Any = None) -> Var:
    """``arr`` with ``values`` inserted before the positions ``obj`` along ``axis`` (numpy.insert)."""
    n = node(arr)
    if axis is None:
        n, ax = flat(var(n))._node, 0
    else:
        ax = axis_arg(axis, len(n.shape))
    nd = len(n.shape)
    length = n.shape[ax]
    pos = _positions(obj, length)
    if pos.dtype == bool:
        pos = _np.flatnonzero(pos)
    pos = pos.astype(_np.int64)
    vals = B.cast_node(node(values), n.dtype)
    if len(vals.shape) < nd:
        vals = B.reshape(var(vals), (1,) * (nd - len(vals.shape)) + vals.shape)._node
    other = list(n.shape)
    if pos.size == 1:
        index = int(pos.ravel()[0])
        if not -length <= index <= length:
            raise IndexError(f"index {index} is out of bounds for axis {ax} with size {length}")
        index += length if index < 0 else 0
        if pos.ndim == 0 and not isinstance(obj, slice):  # a scalar position: values form a block
            vals = node(moveaxis(var(vals), 0, ax))
        other[ax] = vals.shape[ax]
        pos = _np.full(other[ax], index)
    else:
        pos = pos.ravel()
        if pos.size and (pos.min() < -length or pos.max() > length):
            bad = pos[(pos < -length) | (pos > length)][0]
            raise IndexError(f"index {bad} is out of bounds for axis {ax} with size {length}")
        pos = _np.where(pos < 0, pos + length, pos)
        other[ax] = pos.size
    # assignment broadcasting: leading length-1 axes beyond the array's dimensions are dropped
    extra = 0
    while len(vals.shape) - extra > nd and vals.shape[extra] == 1:
        extra += 1
    if extra:
        vals = B.reshape(var(vals), vals.shape[extra:])._node
    if len(vals.shape) > nd:
        raise ValueError(f"could not broadcast input array from shape {vals.shape} into shape {tuple(other)}")
    vals = node(B.broadcast_to(var(vals), tuple(other)))
    # Merge by one gather over concat(arr, values): stable order of positions, values after old elements.
    order = _np.argsort(pos, kind="stable")
    total = length + pos.size
    new_pos = pos[order] + _np.arange(pos.size)
    src = _np.empty(total, _np.int64)
    is_new = _np.zeros(total, bool)
    is_new[new_pos] = True
    src[is_new] = length + order
    src[~is_new] = _np.arange(length)
    joined = B.concat([var(n), var(vals)], ax)
    from ._indexing import take
    return take(joined, const(src.astype(_np.int32)), axis=ax)


def trim_zeros(filt: Any, trim: str = "fb") -> Var:
    """1-D ``filt`` without leading ('f') and/or trailing ('b') zeros."""
    n = node(filt)
    vals = var(n).read_view()
    nz = _np.flatnonzero(vals)
    trim = trim.lower()
    lo = (nz[0] if nz.size else vals.shape[0]) if "f" in trim else 0
    hi = (nz[-1] + 1 if nz.size else 0) if "b" in trim else vals.shape[0]
    hi = max(hi, lo)
    return var(n)[int(lo):int(hi)]
