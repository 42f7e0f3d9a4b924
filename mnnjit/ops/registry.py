"""The op registry: one entry per op name, shared by every front end, the compiler and the backends.

An :class:`OpDef` says how to infer an op's output shape and dtype from its inputs (``infer``) and
how to compute it with plain numpy (``ref``, the reference semantics every backend must match).
Elementwise ops also give ``scalar``: a Python expression over the input scalars ``a``, ``b``, ``c``
(and attribute names) that code generators inline into fused kernels.

``kind`` tells the compiler what it may do with the op:

* ``"elementwise"`` - output element i depends on input element i (after broadcasting); all inputs
  share one dtype (front ends insert casts), the output dtype is given by ``infer``.
* ``"reduce"`` - reduces ``attrs["axes"]`` of its single input (``attrs["keepdims"]``).
* ``"movement"`` - rearranges elements without computing (reshape, transpose, slice, broadcast).
* ``"opaque"`` - anything else; computed by a backend's hand-written kernel or the reference.
* ``"source"`` - const and placeholder.
"""
from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

import numpy as np

Shape = tuple[int, ...]
InferFn = Callable[[tuple, dict], tuple[Shape, np.dtype]]
RefFn = Callable[..., Any]


@dataclass(frozen=True)
class OpDef:
    """How one op behaves (see module docstring)."""

    name: str
    kind: str
    infer: InferFn
    ref: RefFn
    scalar: str | None = None
    mnn_type: str = ""
    n_out: int = 1
    doc: str = ""
    extra: dict = field(default_factory=dict)


_REGISTRY: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    """Add an op to the registry (an existing name is an error: op names are unique)."""
    if op.name in _REGISTRY:
        raise ValueError(f"op {op.name!r} is already registered")
    _REGISTRY[op.name] = op
    return op


def get(name: str) -> OpDef:
    """The OpDef of ``name``; a clear error for an unknown op."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise NotImplementedError(f"mnnjit has no op {name!r}") from None


def has(name: str) -> bool:
    """Whether ``name`` is a registered op."""
    return name in _REGISTRY


def all_ops() -> dict[str, OpDef]:
    """A copy of the registry."""
    return dict(_REGISTRY)


#: Names a scalar template may use that are not op attributes (inputs a, b, c; helpers).
_TEMPLATE_NAMES = frozenset({"a", "b", "c", "acc", "math", "np"} | set(dir(builtins)))


@lru_cache(maxsize=None)
def template_attrs(op: str) -> tuple[str, ...]:
    """The attribute names op ``op``'s scalar template refers to (kernel parameters)."""
    tpl = get(op).scalar
    names = {n.id for n in ast.walk(ast.parse(tpl, mode="eval")) if isinstance(n, ast.Name)}
    return tuple(sorted(names - _TEMPLATE_NAMES))
