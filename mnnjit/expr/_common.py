"""Argument helpers shared by the expr modules (MNN's var_like / axis_like conversions)."""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from .._dtypes import F32, I32
from ..graph import Node
from ..ops import build as B
from ..var import Var


def node(x: Any) -> Node:
    """The node of a var_like (Var, scalar, list, ndarray)."""
    return B.as_node(x)


def var(x: Any) -> Var:
    """A Var for a var_like."""
    return x if isinstance(x, Var) else B.wrap(B.as_node(x))


def ints(v: Any, name: str, n: int | None = None) -> list[int]:
    """A list of Python ints from an int, a sequence or a Var (MNN's axis_like)."""
    if isinstance(v, Var):
        v = v.read_view().reshape(-1).tolist()
    elif isinstance(v, np.ndarray):
        v = v.reshape(-1).tolist()
    elif isinstance(v, (numbers.Integral, np.integer)):
        v = [v]
    elif isinstance(v, (list, tuple)) and any(isinstance(i, (list, tuple, Var, np.ndarray)) for i in v):
        v = np.concatenate([np.asarray(i.read_view() if isinstance(i, Var) else i).reshape(-1) for i in v]).tolist()
    try:
        out = [int(i) for i in v]
    except (TypeError, ValueError):
        raise ValueError(f"parameter `{name}` must be axis_like (ints), got {v!r}") from None
    if n is not None and len(out) != n:
        raise ValueError(f"parameter `{name}` shape ({len(out)},) not match require shape ({n},)")
    return out


def floats(v: Any) -> list[float]:
    """A list of Python floats from a number, a sequence or a Var."""
    if isinstance(v, Var):
        return [float(i) for i in v.read_view().reshape(-1)]
    if isinstance(v, numbers.Number):
        return [float(v)]
    return [float(i) for i in np.asarray(v, np.float64).reshape(-1)]


def require_c4(x: Var, what: str = "x") -> None:
    """MNN's check that an input is in NC4HW4 format."""
    if x._node.fmt != "NC4HW4":
        raise ValueError(f"parameter `{what}` data_format must be NC4HW4.")


def to_nchw(n: Node) -> Node:
    """Logical NCHW data of a 4-D node (NHWC data is transposed)."""
    if n.fmt == "NHWC" and len(n.shape) == 4:
        return B.make_node("convert", (n,), {"src": "NHWC", "dst": "NCHW"}, fmt="NCHW")
    return n


def restore_fmt(out: Node, fmt: str) -> Var:
    """Give an NCHW result back the caller's format (NHWC is transposed back, NC4HW4 relabelled)."""
    if fmt == "NHWC" and len(out.shape) == 4:
        return B.wrap(B.make_node("convert", (out,), {"src": "NCHW", "dst": "NHWC"}, fmt="NHWC"))
    if out.fmt != fmt:
        return B.wrap(relabel(out, fmt))
    return B.wrap(out)


def relabel(n: Node, fmt: str) -> Node:
    """The same logical data labelled with another format (NCHW <-> NC4HW4 only)."""
    if n.fmt == fmt:
        return n
    if n.op == "const":
        return Node("const", (), {}, n.shape, n.dtype, fmt, n.value, n.name)
    return B.make_node("convert", (n,), {"src": n.fmt, "dst": fmt}, fmt=fmt)


def as_float(n: Node) -> Node:
    """``n`` as float32."""
    return B.cast_node(n, F32)


def as_int(n: Node) -> Node:
    """``n`` as int32."""
    return B.cast_node(n, I32)


def pair_xy(v: Sequence[int], name: str) -> tuple[int, int]:
    """MNN's (x, y) pair turned into mnnjit's (h, w) order."""
    a = ints(v, name, 2)
    return (a[1], a[0])
