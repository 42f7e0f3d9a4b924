"""Fusion: grouping traced nodes into kernels.

A group is a chain (any DAG, in fact) of elementwise ops - arithmetic, comparisons, casts, clip,
select, with implicit broadcasting - over one iteration shape, optionally ending in a reduction
(``reduce_sum/mean/prod/max/min``) whose elementwise inputs it computes on the fly. A producer joins
its consumer's group when it is compilable, has the group's iteration shape, is not a requested
result, and every one of its consumers is already in the group (so nothing is computed twice and
nothing else needs its value). Everything else - movement ops (views), opaque ops, ops without a
template - runs as a single step.
"""
from __future__ import annotations

from numbers import Integral, Real


from ..backends.ir import Group, GroupSpec  # noqa: F401  (the IR backends consume)
from ..ops import registry

#: Storage dtypes compiled kernels handle (float16: stored as half, computed in float32).
KERNEL_DTYPES = frozenset({"float16", "float32", "int32", "uint8", "int8"})

#: Reductions fused kernels implement.
REDUCE_OPS = frozenset({"reduce_sum", "reduce_mean", "reduce_prod", "reduce_max", "reduce_min"})

#: Elementwise ops whose template does not reproduce numpy for some inputs (they run via ``ref``).
DENY = frozenset({"cbrt", "fmod", "sign", "trunc", "rint", "floor", "ceil", "round", "sinh", "cosh", "atanh", "pow"})




def ew_ok(node) -> bool:
    """Whether ``node`` can be part of a compiled elementwise group."""
    opdef = registry.get(node.op)
    if opdef.kind != "elementwise" or not opdef.scalar or node.op in DENY or node.dtype is None:
        return False
    if node.dtype.name not in KERNEL_DTYPES:
        return False
    for i in node.inputs:
        if i.dtype is None or i.dtype.name not in KERNEL_DTYPES:
            return False
    if node.op in ("div", "floordiv", "mod") and node.dtype.kind != "f" and node.inputs[0].dtype.kind != "f":
        return False  # integer division by zero: numpy's 0 is not guaranteed by the kernel
    for name in registry.template_attrs(node.op):
        v = node.attrs.get(name)
        if isinstance(v, bool) or not isinstance(v, (Integral, Real)):
            return False
    return True


def reduce_ok(node) -> bool:
    """Whether ``node`` is a reduction a fused kernel computes."""
    if node.op not in REDUCE_OPS or node.dtype is None:
        return False
    x = node.inputs[0]
    return (x.dtype is not None and x.dtype.name in KERNEL_DTYPES and node.dtype.name in KERNEL_DTYPES
            and x.size > 0 and "float16" not in (x.dtype.name, node.dtype.name))


def duplicable(j: int, nodes: list, consumers: list, roots: set, threshold: int) -> bool:
    """Whether producer ``j`` (several consumers) may be recomputed in each consumer's kernel.

    Every consumer must itself be a compiled node over ``j``'s shape (so each ends in a group that
    pulls ``j`` in), at most 3 of them, and ``j`` must not be a requested result.
    """
    nj = nodes[j]
    cons = consumers[j]
    if j in roots or not 1 < len(cons) <= 3 or nj.size < max(threshold, 1) or not ew_ok(nj):
        return False
    for c in cons:
        nc = nodes[c]
        if reduce_ok(nc):
            if nc.inputs[0].shape != nj.shape:
                return False
        elif not (ew_ok(nc) and nc.shape == nj.shape):
            return False
    return True


def build_group(root: int, nodes: list, in_pos: list, consumers: list, is_val: list, roots: set,
                assigned: set, dup: set = frozenset()) -> Group | None:
    """Grow the group rooted at ``root`` (reverse-topological greedy); None when not compilable.

    ``dup`` holds producers that may be recomputed inside every consumer's group rather than
    materialised (cheaper than writing and re-reading a full-size intermediate).
    """
    rnode = nodes[root]
    if reduce_ok(rnode):
        shape = rnode.inputs[0].shape
    elif ew_ok(rnode):
        shape = rnode.shape
    else:
        return None
    members = {root}
    work = list(in_pos[root])
    while work:
        j = work.pop()
        if j in members or is_val[j] or j in roots:
            continue
        nj = nodes[j]
        if nj.shape != shape or not ew_ok(nj):
            continue
        if j not in dup and any(c not in members for c in consumers[j]):
            continue
        members.add(j)
        work.extend(in_pos[j])
    ordered = sorted(members)
    is_reduce = rnode.op in REDUCE_OPS
    ew_members = [m for m in ordered if not (is_reduce and m == root)]
    index = {m: k for k, m in enumerate(ew_members)}
    leaves: list[int] = []
    leaf_index: dict[int, int] = {}

    def ref(p: int) -> tuple[str, int]:
        if p in index:
            return ("n", index[p])
        if p not in leaf_index:
            leaf_index[p] = len(leaves)
            leaves.append(p)
        return ("l", leaf_index[p])

    spec_nodes, params, kinds = [], [], []
    for m in ew_members:
        n = nodes[m]
        refs = tuple(ref(p) for p in in_pos[m])
        attrs = []
        for name in registry.template_attrs(n.op):
            v = n.attrs[name]
            attrs.append((name, len(params)))
            is_int = isinstance(v, Integral)
            kinds.append("i" if is_int else "f")
            params.append(int(v) if is_int else float(v))
        spec_nodes.append((n.op, n.dtype.name, refs, tuple(attrs)))
    red = None
    axes = None
    if is_reduce:
        ref(in_pos[root][0])  # registers the reduce input as a leaf when it is not a member
        red = (rnode.op, rnode.inputs[0].dtype.name, rnode.dtype.name)
        axes = tuple(rnode.attrs["axes"])
    spec = GroupSpec(tuple(spec_nodes), tuple(nodes[p].dtype.name for p in leaves), tuple(kinds), red)
    return Group(root=root, members=ew_members, leaves=leaves, spec=spec, params=tuple(params), shape=shape,
                 axes=axes, out_shape=rnode.shape, out_dtype=rnode.dtype,
                 ops=[nodes[m].op for m in ordered])
