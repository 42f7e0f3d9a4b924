"""``mnnjit compare``: a model's outputs on mnnjit against ONNX Runtime or real MNN, per output and
(``--per-layer``) per intermediate tensor, reporting the first layer that diverges, as MNN's
``testMNNFromOnnx.py`` does."""
from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from ._common import (CliError, errors, load_data, make_inputs, mnn_inputs, onnx_inputs, parse_input_specs,
                      real_mnn, run_module, run_onnxruntime)


def register(sub: Any) -> None:
    """Add the subcommand's parser."""
    p = sub.add_parser("compare", help="compare mnnjit's outputs with ONNX Runtime or real MNN",
                       description="Run a model on mnnjit and on a reference with the same (given or seeded "
                                   "random) inputs and print the error of each output. MODEL is a .mnn file "
                                   "(reference: ONNX Runtime on --onnx, else real MNN on the same file) or an "
                                   ".onnx file (converted in memory; reference: ONNX Runtime, or real MNN "
                                   "on the converted file with --reference mnn).")
    p.add_argument("model", help="a .mnn or .onnx file")
    p.add_argument("--onnx", help="the ONNX model the .mnn came from (reference: ONNX Runtime)")
    p.add_argument("--reference", choices=["auto", "onnxruntime", "mnn"], default="auto",
                   help="what to compare with (auto: ONNX Runtime when there is an ONNX model, else real MNN)")
    p.add_argument("--input", action="append", default=[], metavar="NAME:DIMS", help="an input's shape")
    p.add_argument("--data", action="append", default=[], metavar="NAME=FILE.npy|FILE.npz", help="input values")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--tolerance", type=float, default=1e-4,
                   help="largest error relative to the reference's largest magnitude (default 1e-4)")
    p.add_argument("--per-layer", action="store_true", help="compare every intermediate tensor both sides "
                                                            "have and report the first that diverges")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def _intermediate_onnx(model: Any, names: list) -> bytes:
    """The ONNX model with ``names`` added as outputs."""
    import onnx
    from onnx import helper
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    types = {vi.name: vi.type.tensor_type.elem_type for vi in list(inferred.graph.value_info) +
             list(inferred.graph.output) + list(inferred.graph.input)}
    m = onnx.ModelProto.FromString(model.SerializeToString())
    have = {o.name for o in m.graph.output}
    for n in names:
        if n not in have and types.get(n):
            m.graph.output.append(helper.make_tensor_value_info(n, types[n], None))
    return m.SerializeToString()


def _layers_onnx(model: Any, mnn_path: str) -> list:
    """(tensor name, op type, node name) of ONNX node outputs that the .mnn file also has, in order."""
    from ..format import read_net
    names = set(read_net(mnn_path, load_external=False).tensorName or [])
    out = []
    for node in model.graph.node:
        for o in node.output:
            if o and o in names:
                out.append((o, node.op_type, node.name))
    return out


def _layers_mnn(mnn_path: str) -> list:
    """(tensor name, op type, op name) of the main graph's NCHW op outputs, in file order."""
    from ..format import read_net
    net = read_net(mnn_path, load_external=False)
    out = []
    for op in net.oplists:
        if str(op.type) in ("Input", "Const") or op.type == "ConvertTensor" and (op.main or {}).get("dest") == "NC4HW4":
            continue
        if str(op.type) in ("Convolution", "ConvolutionDepthwise", "Deconvolution", "Pooling", "Interp", "Scale",
                            "Concat", "Slice"):
            continue  # these may hold NC4HW4 values; their NCHW conversions are compared instead
        for t in op.outputIndexes or []:
            out.append((net.tensorName[t], str(op.type), op.name))
    return out


def run(args: Any) -> int:
    """Run the subcommand."""
    import mnnjit
    model_path = args.model
    onnx_path = args.onnx
    tmpdir = None
    try:
        if model_path.lower().endswith(".onnx"):
            from ..converter import convert_onnx, save_mnn
            onnx_path = model_path
            tmpdir = tempfile.TemporaryDirectory(prefix="mnnjit-compare-")
            mnn_path = os.path.join(tmpdir.name, "model.mnn")
            save_mnn(convert_onnx(model_path), mnn_path)
        else:
            mnn_path = model_path
        if not os.path.exists(mnn_path):
            raise CliError(f"model file not found: {mnn_path}")
        ref_kind = args.reference
        if ref_kind == "auto":
            ref_kind = "onnxruntime" if onnx_path else "mnn"
        if ref_kind == "onnxruntime" and not onnx_path:
            raise CliError("--reference onnxruntime needs an ONNX model (--onnx)")
        specs, outputs = mnn_inputs(mnn_path)
        model = None
        if onnx_path:
            from ..converter import load_onnx
            model = load_onnx(onnx_path)
            specs = onnx_inputs(model)[0]
        feeds = make_inputs(specs, parse_input_specs(args.input), load_data(args.data), args.seed)
        names = list(outputs)
        layers = []
        if args.per_layer:
            layers = _layers_onnx(model, mnn_path) if ref_kind == "onnxruntime" else _layers_mnn(mnn_path)
            names += [n for n, _, _ in layers if n not in names]
        got = run_module(mnnjit, mnn_path, feeds, names)
        if ref_kind == "onnxruntime":
            ref_model = _intermediate_onnx(model, names) if args.per_layer else onnx_path
            if isinstance(ref_model, bytes):
                path = os.path.join(tmpdir.name if tmpdir else tempfile.mkdtemp(), "layers.onnx")
                with open(path, "wb") as fh:
                    fh.write(ref_model)
                ref_model = path
            ref = run_onnxruntime(ref_model, feeds, names)
        else:
            mnn = real_mnn()
            if mnn is None:
                raise CliError("real MNN is not installed (pip install MNN); compare with --onnx instead")
            ref = run_module(mnn, mnn_path, feeds, names)
    finally:
        if tmpdir is not None:
            tmpdir.cleanup()
    result = {"model": model_path, "reference": ref_kind, "tolerance": args.tolerance, "outputs": {}, "ok": True}
    for name, g, r in zip(names[:len(outputs)], got, ref):
        e = errors(g, r)
        e["ok"] = e["rel"] <= args.tolerance
        result["outputs"][name] = e
        result["ok"] &= e["ok"]
    if args.per_layer:
        result["layers_compared"] = len(layers)
        result["first_divergent_layer"] = None
        for name, op_type, node in layers:
            k = names.index(name)
            e = errors(got[k], ref[k])
            if not e["rel"] <= args.tolerance:
                result["first_divergent_layer"] = {"tensor": name, "op_type": op_type, "node": node, **e}
                break
    _print(result, args.json)
    return 0 if result["ok"] else 1


def _print(result: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, indent=1))
        return
    print(f"mnnjit vs {result['reference']} (tolerance {result['tolerance']:g}, relative to each reference's "
          f"largest magnitude)")
    for name, e in result["outputs"].items():
        status = "OK" if e["ok"] else "FAIL"
        print(f"  {name}: shape {e['shape']}, max abs error {e['max_abs']:.3g}, relative {e['rel']:.3g}  {status}")
    if "layers_compared" in result:
        d = result["first_divergent_layer"]
        if d is None:
            print(f"  per layer: all {result['layers_compared']} compared layers agree")
        else:
            print(f"  first divergent layer: {d['tensor']} ({d['op_type']} {d['node']!r}): max abs error "
                  f"{d['max_abs']:.3g}, relative {d['rel']:.3g}")
    print("TEST_SUCCESS" if result["ok"] else "TEST_ERROR")
