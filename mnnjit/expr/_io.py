"""``expr.load_as_list``, ``expr.load_as_dict``, ``expr.get_inputs_and_outputs`` and ``expr.save``.

Loading translates the whole model into a lazy graph: every model input becomes a placeholder
Var (write data into it, then read any other Var), every tensor of the model one Var named after
it. Saving writes the graph of the given Vars as a .mnn file real MNN loads (see
:mod:`mnnjit.models.export`).
"""
from __future__ import annotations

import os
from typing import Any, Sequence

from ..graph import Node
from ..var import Var


class VarDict(dict):
    """``load_as_dict``'s result: a dict of name -> Var that also remembers which tensors the model's
    ops consume (so ``get_inputs_and_outputs`` can tell the model's outputs apart)."""

    consumed: frozenset = frozenset()


def _load(file_name: Any) -> tuple[list[tuple[str, Var]], frozenset]:
    from ..models.program import load_program
    from ..models.translate import NeedsValuesError
    if not isinstance(file_name, (str, os.PathLike)):
        raise TypeError(f"fileName must be a path, got {type(file_name).__name__}")
    prog = load_program(file_name)
    net = prog.net
    feeds = []
    for spec in prog.all_inputs:
        dims = tuple(1 if d < 0 else d for d in (spec.dims or ()))
        feeds.append(Node("placeholder", (), {}, dims, spec.dtype, spec.fmt, name=spec.name))
    prog.inputs = list(prog.all_inputs)
    produced = [t for op in net.oplists for t in (op.outputIndexes or [])]
    prog.outputs = produced
    try:
        nodes = prog.translate(feeds)
    except NeedsValuesError as exc:
        raise NotImplementedError(f"{file_name}: the graph depends on input values ({exc}); load it with "
                                  "nn.load_module_from_file instead") from None
    out = []
    for t, node in zip(produced, nodes):
        name = prog.tensor_names[t] if t < len(prog.tensor_names) else str(t)
        if node.name != name:
            node = Node(node.op, node.inputs, node.attrs, node.shape, node.dtype, node.fmt, name=name) \
                if node.op != "const" else Node("const", (), {}, node.shape, node.dtype, node.fmt, node.value, name)
        out.append((name, Var._from_node(node)))
    consumed = frozenset(prog.tensor_names[t] for op in net.oplists for t in (op.inputIndexes or [])
                         if t < len(prog.tensor_names))
    return out, consumed


def load_as_list(fileName: str) -> list[Var]:  # noqa: N803 - MNN's name
    """All tensors of the model in ``fileName`` as Vars (inputs are placeholders), in file order."""
    return [v for _, v in _load(fileName)[0]]


def load_as_dict(fileName: str) -> dict:  # noqa: N803 - MNN's name
    """All tensors of the model in ``fileName`` as a dict name -> Var (sorted by name, as MNN)."""
    items, consumed = _load(fileName)
    d = VarDict(sorted(items, key=lambda kv: kv[0]))
    d.consumed = consumed
    return d


def get_inputs_and_outputs(allVariable: dict) -> tuple[dict, dict]:  # noqa: N803 - MNN's name
    """Split a ``load_as_dict`` result into (inputs, outputs): placeholders, and Vars nothing consumes."""
    if not isinstance(allVariable, dict):
        raise TypeError("get_inputs_and_outputs expects the dict returned by load_as_dict")
    consumed = getattr(allVariable, "consumed", None)
    if consumed is None:
        used = {id(i) for v in allVariable.values() for i in v._node.inputs}
        consumed = {k for k, v in allVariable.items() if id(v._node) in used}
    inputs = {k: v for k, v in allVariable.items() if v._node.op == "placeholder"}
    outputs = {k: v for k, v in allVariable.items() if k not in consumed and k not in inputs}
    return inputs, outputs


def save(vars: Sequence[Var], fileName: str, forInference: bool = True) -> None:  # noqa: A002,N803
    """Write the graph computing ``vars`` as a .mnn model that real MNN loads."""
    from ..format import write_net
    from ..models.export import graph_to_net
    if isinstance(vars, Var):
        vars = [vars]
    vars = list(vars)
    bad = [type(v).__name__ for v in vars if not isinstance(v, Var)]
    if bad:
        raise TypeError(f"expr.save expects a list of Vars, got a {bad[0]}")
    net = graph_to_net([v._node for v in vars], [v._node.name for v in vars])
    write_net(net, fileName)
