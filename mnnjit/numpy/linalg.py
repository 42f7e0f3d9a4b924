"""mnnjit.numpy.linalg: MNN.numpy.linalg (norm, solve, svd), built on registered ops."""
from __future__ import annotations

import math as _math
from typing import Any

import numpy as _np

from ..ops import build as B
from ..var import Var
from ._core import to_float, var

LinAlgError = _np.linalg.LinAlgError


def _vector_norm(x: Var, ord: Any, axis: Any, keepdims: bool) -> Var:  # noqa: A002
    abs_x = B.unary("abs", x)
    if ord is None or ord == 2:
        return B.unary("sqrt", B.reduce("reduce_sum", B.unary("square", x), axis, keepdims))
    if ord == _math.inf:
        return B.reduce("reduce_max", abs_x, axis, keepdims)
    if ord == -_math.inf:
        return B.reduce("reduce_min", abs_x, axis, keepdims)
    if ord == 0:
        return B.cast(B.reduce("reduce_sum", B.binary("not_equal", x, 0.0), axis, keepdims), _np.float32)
    if ord == 1:
        return B.reduce("reduce_sum", abs_x, axis, keepdims)
    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    p = float(ord)
    return B.binary("pow", B.reduce("reduce_sum", B.binary("pow", abs_x, p), axis, keepdims), 1.0 / p)


def _matrix_norm(x: Var, ord: Any, axes: tuple[int, int], keepdims: bool) -> Var:  # noqa: A002
    r, c = axes
    if ord is None or ord == "fro":
        res = B.unary("sqrt", B.reduce("reduce_sum", B.unary("square", x), axes, keepdims))
        return res
    if ord in ("nuc", 2, -2):
        from ._shape import moveaxis
        m = moveaxis(x, (r, c), (-2, -1))
        _, s, _ = B.make("svd", [m], {"full_matrices": False})
        if ord == "nuc":
            res = B.reduce("reduce_sum", s, -1, False)
        else:
            res = B.reduce("reduce_max" if ord == 2 else "reduce_min", s, -1, False)
        if keepdims:
            shp = tuple(1 if i in axes else d for i, d in enumerate(x._node.shape))
            res = B.reshape(res, shp)
        return res
    abs_x = B.unary("abs", x)
    if ord in (1, -1):
        s = B.reduce("reduce_sum", abs_x, r, True)
        red = B.reduce("reduce_max" if ord == 1 else "reduce_min", s, c, True)
    elif ord in (_math.inf, -_math.inf):
        s = B.reduce("reduce_sum", abs_x, c, True)
        red = B.reduce("reduce_max" if ord == _math.inf else "reduce_min", s, r, True)
    else:
        raise ValueError("Invalid norm order for matrices.")
    if not keepdims:
        red = B.reshape(red, tuple(d for i, d in enumerate(red._node.shape) if i not in axes))
    return red


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Var:  # noqa: A002
    """Matrix or vector norm (numpy.linalg.norm), float32 Var (MNN returns a Var, also for a full norm)."""
    v = var(to_float(x))
    nd = len(v._node.shape)
    if axis is None:
        if ord is None:
            res = B.unary("sqrt", B.reduce("reduce_sum", B.unary("square", v), None, keepdims))
            return res
        if nd == 1:
            return _vector_norm(v, ord, 0, keepdims)
        if nd == 2:
            return _matrix_norm(v, ord, (0, 1), keepdims)
        raise ValueError("Improper number of dimensions to norm.")
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(B.normalize_axis(a, nd) for a in axes)
    if len(axes) == 1:
        return _vector_norm(v, ord, axes[0], keepdims)
    if len(axes) == 2:
        if axes[0] == axes[1]:
            raise ValueError("Duplicate axes given.")
        return _matrix_norm(v, ord, axes, keepdims)
    raise ValueError("Improper number of dimensions to norm.")


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False):
    """Singular value decomposition ``(u, s, vh)`` (float32; ``s`` only when ``compute_uv`` is False)."""
    n = to_float(a)
    if len(n.shape) < 2:
        raise LinAlgError(f"{len(n.shape)}-dimensional array given. Array must be at least two-dimensional")
    u, s, vh = B.make("svd", [var(n)], {"full_matrices": bool(full_matrices)})
    return (u, s, vh) if compute_uv else s


def solve(a: Any, b: Any) -> Var:
    """Solve ``a @ x = b`` for x (float32; numpy.linalg.LinAlgError when ``a`` is singular)."""
    na, nb = to_float(a), to_float(b)
    if len(na.shape) < 2:
        raise LinAlgError(f"{len(na.shape)}-dimensional array given. Array must be at least two-dimensional")
    return var(B.make_node("solve", (na, nb)))
