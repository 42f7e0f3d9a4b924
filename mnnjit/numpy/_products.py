"""Products: dot, vdot, inner, outer, tensordot, matmul, cross (built on the matmul op and elementwise ops)."""
from __future__ import annotations

from typing import Any

from ..ops import build as B
from ..var import Var
from ._core import axis_arg, finish, flat, is_int, node, var


def _maybe_scalar(res: Var):
    """0-d products come back as Python scalars, as MNN's ``dot(3, 4)`` gives ``12``."""
    return res.read_view().item() if len(res._node.shape) == 0 else res


def matmul(a: Any, b: Any, out: Any = None, **kwargs: Any) -> Var:
    """Matrix product (numpy.matmul; 0-d inputs are an error)."""
    return finish(B.matmul(a, b), out)


def tensordot(a: Any, b: Any, axes: Any = 2):
    """Sum of products over the given axes (numpy.tensordot), as one matmul between reshapes."""
    na, nb = node(a), node(b)
    if is_int(axes):
        k = int(axes)
        if k < 0 or k > len(na.shape) or k > len(nb.shape):
            raise ValueError("shape-mismatch for sum")
        ax_a = list(range(len(na.shape) - k, len(na.shape)))
        ax_b = list(range(k))
    else:
        ax_a, ax_b = axes
        ax_a = [ax_a] if is_int(ax_a) else list(ax_a)
        ax_b = [ax_b] if is_int(ax_b) else list(ax_b)
        if len(ax_a) != len(ax_b):
            raise ValueError("shape-mismatch for sum")
        ax_a = [axis_arg(x, len(na.shape)) for x in ax_a]
        ax_b = [axis_arg(x, len(nb.shape)) for x in ax_b]
    for x, y in zip(ax_a, ax_b):
        if na.shape[x] != nb.shape[y]:
            raise ValueError("shape-mismatch for sum")
    free_a = [i for i in range(len(na.shape)) if i not in ax_a]
    free_b = [i for i in range(len(nb.shape)) if i not in ax_b]
    ksize = 1
    for x in ax_a:
        ksize *= na.shape[x]
    ma = 1
    for i in free_a:
        ma *= na.shape[i]
    mb = 1
    for i in free_b:
        mb *= nb.shape[i]
    at = B.reshape(B.transpose(var(na), free_a + ax_a), (ma, ksize))
    bt = B.reshape(B.transpose(var(nb), ax_b + free_b), (ksize, mb))
    res = B.matmul(at, bt)
    return B.reshape(res, tuple(na.shape[i] for i in free_a) + tuple(nb.shape[i] for i in free_b))


def dot(a: Any, b: Any, out: Any = None):
    """numpy.dot: multiply for 0-d, inner product for 1-D, matmul for 2-D, sum over a's last and b's
    second-to-last axis otherwise (0-d results are Python scalars)."""
    na, nb = node(a), node(b)
    if len(na.shape) == 0 or len(nb.shape) == 0:
        res = B.binary("mul", var(na), var(nb))
    elif len(na.shape) <= 2 and len(nb.shape) <= 2:
        if na.shape[-1] != nb.shape[0]:
            raise ValueError(f"shapes {na.shape} and {nb.shape} not aligned: {na.shape[-1]} (dim "
                             f"{len(na.shape) - 1}) != {nb.shape[0]} (dim 0)")
        res = B.matmul(var(na), var(nb))
    else:
        kb = len(nb.shape) - 2 if len(nb.shape) >= 2 else 0
        if na.shape[-1] != nb.shape[kb]:
            raise ValueError(f"shapes {na.shape} and {nb.shape} not aligned: {na.shape[-1]} (dim "
                             f"{len(na.shape) - 1}) != {nb.shape[kb]} (dim {kb})")
        res = tensordot(var(na), var(nb), ([len(na.shape) - 1], [kb]))
    if out is not None:
        return finish(res, out)
    return _maybe_scalar(res)


def vdot(a: Any, b: Any):
    """Dot product of the flattened inputs (numpy.vdot), a Python scalar."""
    fa, fb = flat(a), flat(b)
    if fa._node.shape != fb._node.shape:
        raise ValueError("cannot reshape array: vdot needs inputs of the same size")
    return B.reduce("reduce_sum", B.binary("mul", fa, fb), None, False).read_view().item()


def inner(a: Any, b: Any):
    """Inner product over the last axes (numpy.inner); 0-d results are Python scalars."""
    na, nb = node(a), node(b)
    if len(na.shape) == 0 or len(nb.shape) == 0:
        return _maybe_scalar(B.binary("mul", var(na), var(nb)))
    if na.shape[-1] != nb.shape[-1]:
        raise ValueError("shapes mismatch in the last dimension")
    return _maybe_scalar(tensordot(var(na), var(nb), ([len(na.shape) - 1], [len(nb.shape) - 1])))


def outer(a: Any, b: Any, out: Any = None) -> Var:
    """Outer product of the flattened inputs."""
    fa, fb = flat(a), flat(b)
    res = B.binary("mul", B.reshape(fa, (-1, 1)), B.reshape(fb, (1, -1)))
    return finish(res, out)


def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: Any = None):
    """Cross product of 2- or 3-element vectors (numpy.cross)."""
    if axis is not None:
        axisa = axisb = axisc = axis
    na, nb = node(a), node(b)
    if len(na.shape) == 0 or len(nb.shape) == 0:
        raise ValueError("At least one array has zero dimension")
    from ._shape import moveaxis
    va = moveaxis(var(na), axis_arg(axisa, len(na.shape)), -1)
    vb = moveaxis(var(nb), axis_arg(axisb, len(nb.shape)), -1)
    da, db = va._node.shape[-1], vb._node.shape[-1]
    if da not in (2, 3) or db not in (2, 3):
        raise ValueError("incompatible dimensions for cross product\n(dimension must be 2 or 3)")

    def comp(v, i, d):
        return v[..., i] if i < d else None

    a0, a1, a2 = comp(va, 0, da), comp(va, 1, da), comp(va, 2, da)
    b0, b1, b2 = comp(vb, 0, db), comp(vb, 1, db), comp(vb, 2, db)

    def mul(x, y):
        return None if x is None or y is None else B.binary("mul", x, y)

    def sub(x, y):
        if x is None and y is None:
            return None
        if y is None:
            return x
        if x is None:
            return B.unary("neg", y)
        return B.binary("sub", x, y)

    z = sub(mul(a0, b1), mul(a1, b0))
    if da == 2 and db == 2:
        return z
    x = sub(mul(a1, b2), mul(a2, b1))
    y = sub(mul(a2, b0), mul(a0, b2))
    shape = B.broadcast_to(B.binary("add", x, y), B.binary("add", x, y)._node.shape)._node.shape
    parts = [B.reshape(B.broadcast_to(c, shape), shape + (1,)) for c in (x, y, B.broadcast_to(z, shape))]
    res = B.concat(parts, len(shape))
    return moveaxis(res, -1, axis_arg(axisc, len(shape) + 1))
