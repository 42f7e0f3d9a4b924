"""What the compiler hands a backend: fusion groups (their structure and their place in a plan).

These types sit beside the backend interface (:mod:`mnnjit.backends.base`) so that backends never
import the compiler: the compiler builds them (``compiler/fusion.py``), backends read them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class GroupSpec:
    """The structure of a fusion group (hashable, position-free; see backends/cpu/codegen/groups.py)."""

    nodes: tuple          # ((op, out_dtype, ((kind, index), ...), ((attr, param_index), ...)), ...)
    leaf_dtypes: tuple    # (dtype name, ...)
    param_kinds: tuple    # ('f' | 'i', ...)
    reduce: tuple | None  # (reduce op, input dtype, output dtype) or None

    def key(self) -> str:
        """A deterministic text key (kernel file names, in-memory cache); computed once per spec."""
        k = self.__dict__.get("_key")
        if k is None:
            k = repr((self.nodes, self.leaf_dtypes, self.param_kinds, self.reduce))
            object.__setattr__(self, "_key", k)
        return k


@dataclass
class Group:
    """One fusion group of a plan (positions index the plan's traced node list)."""

    root: int
    members: list[int]           # elementwise members in evaluation order (not the reduce root)
    leaves: list[int]
    spec: GroupSpec
    params: tuple                # runtime scalar parameter values
    shape: tuple[int, ...]       # iteration shape (the reduce input's shape for reductions)
    axes: tuple[int, ...] | None = None
    out_shape: tuple[int, ...] = ()
    out_dtype: np.dtype | None = None
    ops: list[str] = field(default_factory=list)
    serial: bool = False         # below the compile threshold: a serial kernel (no thread team)
    producer: object = None      # a fused producer of one leaf (compiler/producers.py), or None

    @property
    def size(self) -> int:
        """Elements in the iteration space."""
        n = 1
        for d in self.shape:
            n *= d
        return n


def collapse_axes(shape: list[int], strides: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """A group's iteration space for a kernel: size-1 axes dropped and adjacent axes merged where
    every operand's element ``strides`` allow it (the same rule on every backend)."""
    keep = [k for k, d in enumerate(shape) if d != 1]
    shp = [shape[k] for k in keep]
    sts = [[s[k] for k in keep] for s in strides]
    if not shp:
        return [], [[] for _ in strides]
    out_shp, out_sts = [shp[0]], [[s[0]] for s in sts]
    for k in range(1, len(shp)):
        if all(o[-1] == s[k] * shp[k] for o, s in zip(out_sts, sts)):
            out_shp[-1] *= shp[k]
            for o, s in zip(out_sts, sts):
                o[-1] = s[k]
        else:
            out_shp.append(shp[k])
            for o, s in zip(out_sts, sts):
                o.append(s[k])
    return out_shp, out_sts
