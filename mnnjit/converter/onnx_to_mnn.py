"""ONNX model -> MNN ``Net``: load, infer shapes, convert every graph, simplify, compress weights."""
from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from ..format import Net
from .builder import Val
from .core import GraphConverter, Root, UnsupportedOnnxError

#: The MNN version whose file conventions the converter writes (real MNN reads the model's
#: ``extraInfo.version`` to pick op semantics that changed between releases).
MNN_FORMAT_VERSION = "3.6.1"


@dataclass
class ConvertOptions:
    """What ``mnnjit convert`` (mnnconvert's flags) asks of a conversion."""
    biz_code: str = "MNN"
    fp16: bool = False
    weight_quant_bits: int = 0
    weight_quant_block: int = 0
    weight_quant_asymmetric: bool = True
    #: input name -> shape overriding the model's (``--inputConfigFile`` / ``--input``)
    input_shapes: dict = field(default_factory=dict)
    optimize_level: int = 1
    keep_input_format: bool = True
    #: called with (done, total) as nodes are converted (a progress bar)
    progress: Optional[Callable[[int, int], None]] = None


def load_onnx(source: Any) -> Any:
    """An ``onnx.ModelProto`` from a path, bytes or a model (external data loaded beside a path)."""
    import onnx
    if isinstance(source, onnx.ModelProto):
        return source
    if isinstance(source, (bytes, bytearray)):
        return onnx.load_from_string(bytes(source))
    path = os.fspath(source)
    if not os.path.exists(path):
        raise FileNotFoundError(f"ONNX model file not found: {path}")
    try:
        return onnx.load(path)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise ValueError(f"{path}: not a valid ONNX model ({exc})") from None


def _np_dtype(elem_type: int) -> Optional[np.dtype]:
    from onnx import helper
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:
        return None


def _type_info(vi: Any) -> tuple:
    t = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
    if t is None:
        return None, None
    dtype = _np_dtype(t.elem_type) if t.elem_type else None
    if not t.HasField("shape"):
        return None, dtype
    shape = tuple(int(d.dim_value) if d.HasField("dim_value") and d.dim_value >= 0 else None for d in t.shape.dim)
    return shape, dtype


def _collect_value_info(graph: Any, out: dict) -> None:
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        shape, dtype = _type_info(vi)
        if dtype is not None or shape is not None:
            out[vi.name] = (shape, dtype)
    for node in graph.node:
        for a in node.attribute:
            if a.HasField("g"):
                _collect_value_info(a.g, out)
            for g in a.graphs:
                _collect_value_info(g, out)


def _set_input_shapes(model: Any, shapes: dict) -> None:
    names = {i.name for i in model.graph.input}
    unknown = [n for n in shapes if n not in names]
    if unknown:
        raise ValueError(f"--input names {unknown} are not inputs of the model (inputs: {sorted(names)})")
    for inp in model.graph.input:
        if inp.name not in shapes:
            continue
        dims = inp.type.tensor_type.shape.dim
        new = [int(d) for d in shapes[inp.name]]
        if len(dims) and len(dims) != len(new):
            raise ValueError(f"--input {inp.name}: {len(new)} sizes for a {len(dims)}-D input")
        del dims[:]
        for d in new:
            dims.add().dim_value = d


def _opset(model: Any) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 1


def convert_onnx(source: Any, options: Optional[ConvertOptions] = None) -> Net:
    """Convert an ONNX model (path, bytes or ``ModelProto``) into an MNN :class:`~mnnjit.format.Net`.

    Raises :class:`UnsupportedOnnxError` listing every node that cannot be converted (nothing is
    produced then), ``ValueError`` for a malformed model.
    """
    import onnx
    from . import passes
    from .quantize import compress_weights
    opts = options or ConvertOptions()
    model = load_onnx(source)
    if opts.input_shapes:
        model = onnx.ModelProto.FromString(model.SerializeToString())
        _set_input_shapes(model, opts.input_shapes)
    opset = _opset(model)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:  # a model shape inference rejects still converts; shapes come from the nodes
        inferred = model
    value_info: dict = {}
    _collect_value_info(inferred.graph, value_info)
    root = Root(opset, value_info, opts)
    _check_supported(model.graph, root)
    if root.problems:
        raise UnsupportedOnnxError(root.problems)
    main = GraphConverter(root, model.graph)
    main.add_initializers()
    init_names = {i.name for i in model.graph.initializer}
    for inp in model.graph.input:
        if inp.name in init_names:
            continue
        shape, dtype = value_info.get(inp.name, _type_info(inp))
        t = main.input_op(inp.name, shape, dtype if dtype is not None else np.dtype(np.float32))
        main.vals[inp.name] = Val(index=t, shape=shape, dtype=np.dtype(dtype if dtype is not None else np.float32))
    main.progress = opts.progress
    main.run_nodes()
    if root.problems:
        raise UnsupportedOnnxError(root.problems)
    outputs = main.finish_outputs([o.name for o in model.graph.output])
    net = Net(oplists=main.b.ops, tensorName=main.b.names, outputName=[main.b.names[t] for t in outputs],
              bizCode=opts.biz_code, sourceType="ONNX", extraInfo={"version": MNN_FORMAT_VERSION},
              subgraphs=root.subgraphs or None, mnn_uuid=str(uuid.uuid4()))
    if opts.optimize_level > 0:
        passes.optimize(net)
    else:
        passes.remove_dead(net)
    if opts.weight_quant_bits or opts.fp16:
        compress_weights(net, bits=opts.weight_quant_bits, block=opts.weight_quant_block,
                         asymmetric=opts.weight_quant_asymmetric, fp16=opts.fp16)
    return net


def _check_supported(graph: Any, root: Root) -> None:
    """Collect nodes of unsupported op types (in every subgraph) before converting anything."""
    from .core import _HANDLERS, _load_handlers
    _load_handlers()
    for node in graph.node:
        if node.domain not in ("", "ai.onnx"):
            root.problems.append((node.op_type, node.name, f"custom domain {node.domain!r}"))
        elif node.op_type not in _HANDLERS:
            root.problems.append((node.op_type, node.name, ""))
        for a in node.attribute:
            if a.HasField("g"):
                _check_supported(a.g, root)
            for g in a.graphs:
                _check_supported(g, root)


def count_nodes(model: Any) -> int:
    """Nodes in the model, subgraphs included (the progress bar's total)."""
    def walk(g: Any) -> int:
        n = 0
        for node in g.node:
            n += 1
            for a in node.attribute:
                if a.HasField("g"):
                    n += walk(a.g)
                for sg in a.graphs:
                    n += walk(sg)
        return n
    return walk(model.graph)
