"""Clean-up passes over a converted Net (main graph and subgraphs), each with one job.

* ``cancel_layout_pairs``: an NC4HW4 -> NCHW conversion feeding an NCHW -> NC4HW4 one cancels, so
  chains of CNN ops stay in NC4HW4 (as real MNN's converter leaves them).
* ``share_conversions``: two NCHW -> NC4HW4 conversions of one tensor become one.
* ``merge_reshapes``: a reshape of a reshape reads the first one's input.
* ``remove_dead``: ops whose outputs nothing reads go (Input ops stay: they are the interface),
  and the tensor table is compacted.
"""
from __future__ import annotations

from typing import Iterator

from ..format import Net, Op


def _graphs(net: Net) -> Iterator[tuple]:
    """(ops, tensor names, output tensor indexes, owner) for the main graph and each subgraph."""
    names = net.tensorName or []
    index = {n: i for i, n in enumerate(names)}
    yield net.oplists, names, [index[n] for n in net.outputName or [] if n in index], net
    for sub in net.subgraphs or []:
        yield sub.nodes, sub.tensors, list(sub.outputs or []), sub


def _is_convert(op: Op, src: str, dst: str) -> bool:
    return op.type == "ConvertTensor" and (op.main or {}).get("source") == src and (op.main or {}).get("dest") == dst


def _replace_uses(ops: list, old: int, new: int) -> None:
    for op in ops:
        if op.inputIndexes and old in op.inputIndexes:
            op.inputIndexes = [new if t == old else t for t in op.inputIndexes]


def cancel_layout_pairs(ops: list, outputs: list) -> None:
    """Drop NCHW -> NC4HW4 conversions of tensors an NC4HW4 -> NCHW conversion produced."""
    producer = {t: op for op in ops for t in op.outputIndexes or []}
    keep = []
    for op in ops:
        if _is_convert(op, "NCHW", "NC4HW4") and op.outputIndexes[0] not in outputs:
            src = producer.get(op.inputIndexes[0])
            if src is not None and _is_convert(src, "NC4HW4", "NCHW"):
                _replace_uses(ops, op.outputIndexes[0], src.inputIndexes[0])
                continue
        keep.append(op)
    ops[:] = keep


def share_conversions(ops: list, outputs: list) -> None:
    """One NCHW -> NC4HW4 conversion per source tensor."""
    seen: dict[int, int] = {}
    keep = []
    for op in ops:
        if _is_convert(op, "NCHW", "NC4HW4") and op.outputIndexes[0] not in outputs:
            src = op.inputIndexes[0]
            if src in seen:
                _replace_uses(ops, op.outputIndexes[0], seen[src])
                continue
            seen[src] = op.outputIndexes[0]
        keep.append(op)
    ops[:] = keep


def merge_reshapes(ops: list, outputs: list) -> None:
    """A Reshape of a Reshape reads the first one's input instead, when its target is a constant
    without 0 entries (a 0 would copy a size of the intermediate shape)."""
    producer = {t: op for op in ops for t in op.outputIndexes or []}
    for op in ops:
        if op.type != "Reshape" or not op.inputIndexes or len(op.inputIndexes) != 2:
            continue
        shape_op = producer.get(op.inputIndexes[1])
        if shape_op is None or shape_op.type != "Const":
            continue
        dims = (shape_op.main or {}).get("int32s")
        if dims is None or 0 in [int(d) for d in dims]:
            continue
        src = producer.get(op.inputIndexes[0])
        while src is not None and src.type == "Reshape" and src.outputIndexes[0] not in outputs:
            op.inputIndexes = [src.inputIndexes[0], op.inputIndexes[1]]
            src = producer.get(op.inputIndexes[0])


def _dead_code(ops: list, outputs: list) -> None:
    needed = set(outputs)
    keep: set[int] = set()
    for op in reversed(ops):
        if op.type == "Input" or any(t in needed for t in op.outputIndexes or []):
            needed.update(op.inputIndexes or [])
            keep.add(id(op))
    ops[:] = [op for op in ops if id(op) in keep]


def _compact(ops: list, names: list, extra: list[list]) -> list:
    """Renumber the tensors that are still used; returns the new name table (``extra`` index lists
    are renumbered in place)."""
    used: list[int] = []
    seen: set[int] = set()

    def see(t: int) -> None:
        if t not in seen:
            seen.add(t)
            used.append(t)
    for lst in extra:
        for t in lst:
            see(t)
    for op in ops:
        for t in (op.inputIndexes or []) + (op.outputIndexes or []):
            see(t)
    used.sort()
    new = {t: k for k, t in enumerate(used)}
    for op in ops:
        op.inputIndexes = [new[t] for t in op.inputIndexes or []] or None
        op.outputIndexes = [new[t] for t in op.outputIndexes or []]
    for lst in extra:
        lst[:] = [new[t] for t in lst]
    return [names[t] for t in used]


def remove_dead(net: Net) -> Net:
    """Drop unused ops and compact every graph's tensor table."""
    for ops, names, outputs, owner in list(_graphs(net)):
        _dead_code(ops, outputs)
        if owner is net:
            net.tensorName = _compact(ops, names, [outputs])
        else:
            ins, outs = list(owner.inputs or []), list(owner.outputs or [])
            owner.tensors = _compact(ops, names, [ins, outs])
            owner.inputs, owner.outputs = ins, outs
    return net


def optimize(net: Net) -> Net:
    """Every pass, in order."""
    for ops, _names, outputs, _owner in _graphs(net):
        cancel_layout_pairs(ops, outputs)
        share_conversions(ops, outputs)
        merge_reshapes(ops, outputs)
    return remove_dead(net)
