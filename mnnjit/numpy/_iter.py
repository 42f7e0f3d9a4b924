"""Iteration and bit helpers: ndenumerate, ndindex, nditer, nested_iters, flatiter, packbits, base_repr...

Iterators walk a Var's computed value (iteration is a Python-level loop, as in numpy); they yield
Python scalars where numpy yields numpy scalars.
"""
from __future__ import annotations

from typing import Any, Iterator

import numpy as _np

from ..ops import build as B
from ..var import Var
from ._core import axis_arg, node, var


def _value(a: Any) -> _np.ndarray:
    return var(node(a)).read_view()


class ndenumerate:  # noqa: N801 - numpy's name
    """Pairs of (index tuple, Python scalar) over ``arr``."""

    def __init__(self, arr: Any) -> None:
        self._arr = _value(arr)

    def __iter__(self) -> Iterator[tuple[tuple[int, ...], Any]]:
        for idx, v in _np.ndenumerate(self._arr):
            yield idx, v.item()


class ndindex:  # noqa: N801 - numpy's name
    """Index tuples of an array of the given shape, in C order."""

    def __init__(self, *shape: Any) -> None:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        self._it = _np.ndindex(*(int(s) for s in shape))

    def __iter__(self):
        return self

    def __next__(self) -> tuple[int, ...]:
        return next(self._it)


class flatiter:  # noqa: N801 - numpy's name
    """A flat iterator over a Var (``flatiter(v)``): Python scalars in C order, indexable."""

    def __init__(self, arr: Any) -> None:
        self.base = arr
        self._flat = _value(arr).ravel()
        self.index = 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.index >= self._flat.shape[0]:
            raise StopIteration
        v = self._flat[self.index].item()
        self.index += 1
        return v

    def __len__(self) -> int:
        return int(self._flat.shape[0])

    def __getitem__(self, key: Any):
        res = self._flat[key]
        return res.item() if _np.ndim(res) == 0 else B.wrap(node(_np.array(res)))


def nditer(op: Any, flags: Any = None, op_flags: Any = None, op_dtypes: Any = None, order: str = "K",
           casting: str = "safe", op_axes: Any = None, itershape: Any = None, buffersize: int = 0):
    """numpy.nditer over the computed values of ``op`` (read-only; writes do not reach the Vars)."""
    ops = [_value(o) for o in op] if isinstance(op, (list, tuple)) else _value(op)
    return _np.nditer(ops, flags=flags, op_flags=op_flags, op_dtypes=op_dtypes, order=order, casting=casting,
                      op_axes=op_axes, itershape=itershape, buffersize=buffersize)


def nested_iters(op: Any, axes: Any, **kwargs: Any):
    """numpy.nested_iters over the computed values of ``op`` (read-only)."""
    return _np.nested_iters([_value(o) for o in op], axes, **kwargs)


def packbits(a: Any, axis: Any = None, bitorder: str = "big") -> Var:
    """Pack the truth values of ``a`` into uint8 bits (numpy.packbits)."""
    n = node(a)
    if n.dtype.kind == "f":
        raise TypeError("Expected an input array of integer or boolean data type")
    if bitorder not in ("big", "little"):
        raise ValueError("'order' must be either 'little' or 'big'")
    ax = None if axis is None else axis_arg(axis, len(n.shape))
    if ax is None and len(n.shape) != 1:
        n = B.reshape(var(n), (-1,))._node
    return var(B.make_node("packbits", (n,), {"axis": ax, "bitorder": bitorder}))


def unpackbits(a: Any, axis: Any = None, count: Any = None, bitorder: str = "big") -> Var:
    """Unpack uint8 ``a`` into bits (numpy.unpackbits), uint8."""
    n = node(a)
    if n.dtype != _np.uint8:
        raise TypeError("Expected an input array of unsigned byte data type")
    if bitorder not in ("big", "little"):
        raise ValueError("'order' must be either 'little' or 'big'")
    ax = None if axis is None else axis_arg(axis, len(n.shape))
    return var(B.make_node("unpackbits", (n,), {"axis": ax, "count": None if count is None else int(count),
                                                  "bitorder": bitorder}))


def binary_repr(num: int, width: int | None = None) -> str:
    """Binary string of ``num`` (two's complement of ``width`` bits for negatives)."""
    return _np.binary_repr(int(num), width)


def base_repr(number: int, base: int = 2, padding: int = 0) -> str:
    """String of ``number`` in ``base`` (2..36)."""
    return _np.base_repr(int(number), base, padding)


_unused = Var
