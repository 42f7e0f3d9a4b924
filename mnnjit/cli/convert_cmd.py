"""``mnnjit convert``: ONNX -> .mnn with mnnconvert's flags (also ``-f MNN`` / ``-f JSON`` forms)."""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from ._common import CliError, parse_input_specs, read_input_config

#: a model with at least this many nodes (or bytes) converts with a progress bar
PROGRESS_MIN_NODES = 2000
PROGRESS_MIN_BYTES = 64 << 20


def _bool01(text: str) -> bool:
    low = str(text).strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected 0 or 1, got {text!r}")


def register(sub: Any) -> None:
    """Add the subcommand's parser."""
    p = sub.add_parser("convert", help="convert an ONNX model to .mnn (mnnconvert's flags)",
                       description="Convert an ONNX model to an MNN model, in pure Python and offline. "
                                   "The flags are mnnconvert's. -f MNN with --info or --JsonFile, and -f JSON, "
                                   "work as in mnnconvert.",
                       epilog="example: mnnjit convert -f ONNX --modelFile model.onnx --MNNModel model.mnn "
                              "--bizCode demo")
    p.add_argument("-f", "--framework", default="ONNX", type=str.upper, choices=["ONNX", "MNN", "JSON"],
                   help="source format (default ONNX)")
    p.add_argument("--modelFile", help="the model to convert")
    p.add_argument("--MNNModel", help="the .mnn file to write")
    p.add_argument("--bizCode", default="MNN", help="the model's bizCode flag (default MNN)")
    p.add_argument("--fp16", action="store_true", help="store convolution / MatMul / RNN weights as float16")
    p.add_argument("--weightQuantBits", type=int, default=0, metavar="BITS",
                   help="quantize convolution / MatMul / RNN weights to 2..8 bits (0: off)")
    p.add_argument("--weightQuantBlock", type=int, default=0, metavar="N",
                   help="quantize in blocks of N input channels (0: per output channel)")
    p.add_argument("--weightQuantAsymmetric", type=_bool01, nargs="?", const=True, default=True, metavar="0|1",
                   help="asymmetric (min/max) weight quantization, the default; 0 for symmetric")
    p.add_argument("--saveExternalData", action="store_true", help="write weights to <MNNModel>.weight")
    p.add_argument("--keepInputFormat", type=_bool01, nargs="?", const=True, default=True, metavar="0|1",
                   help="keep the inputs' NCHW format (the default; inputs are never NC4HW4)")
    p.add_argument("--inputConfigFile", help="file with 'input_names = a,b' and 'input_dims = 1x3x224x224,...' "
                                             "fixing input shapes")
    p.add_argument("--input", action="append", default=[], metavar="NAME:DIMS",
                   help="fix an input's shape, e.g. x:1x3x224x224 (repeatable)")
    p.add_argument("--optimizeLevel", type=int, default=1, choices=[0, 1, 2],
                   help="0: no clean-up passes; 1 (default) and 2: constant folding and layout clean-up")
    p.add_argument("--info", action="store_true", help="with -f MNN: print the model's inputs and outputs")
    p.add_argument("--JsonFile", help="with -f MNN: write the model as JSON")
    p.add_argument("--OP", action="store_true", help="list the ONNX ops the converter supports")
    p.add_argument("--progress", choices=["auto", "on", "off"], default="auto",
                   help=f"progress bar (auto: models of {PROGRESS_MIN_NODES}+ nodes on a terminal; needs tqdm)")
    p.set_defaults(run=run)


def _progress(args: Any, model: Any, path: str) -> Any:
    """A tqdm progress callback for large models (None otherwise)."""
    if args.progress == "off":
        return None
    from ..converter import count_nodes
    nodes = count_nodes(model)
    big = nodes >= PROGRESS_MIN_NODES or (os.path.exists(path) and os.path.getsize(path) >= PROGRESS_MIN_BYTES)
    if args.progress == "auto" and not (big and sys.stderr.isatty()):
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        if args.progress == "on":
            print("mnnjit convert: no progress bar without tqdm (pip install 'mnnjit[convert]')", file=sys.stderr)
        return None
    bar = tqdm(total=len(model.graph.node), desc="converting", unit="node", file=sys.stderr, leave=False)

    def update(done: int, total: int) -> None:
        bar.n = done
        bar.refresh()
        if done >= total:
            bar.close()
    return update


def run(args: Any) -> int:
    """Run the subcommand."""
    if args.OP:
        from ..converter import supported_onnx_ops
        print("\n".join(supported_onnx_ops()))
        return 0
    if not args.modelFile:
        raise CliError("--modelFile is required")
    if args.framework == "MNN":
        return _from_mnn(args)
    if args.framework == "JSON":
        from .json_cmd import json_to_mnn
        if not args.MNNModel:
            raise CliError("-f JSON needs --MNNModel")
        json_to_mnn(args.modelFile, args.MNNModel)
        print("Converted Success!")
        return 0
    if not args.MNNModel:
        raise CliError("--MNNModel is required")
    if args.weightQuantBits and not 2 <= args.weightQuantBits <= 8:
        raise CliError(f"--weightQuantBits must be 2..8, got {args.weightQuantBits}")
    shapes = read_input_config(args.inputConfigFile) if args.inputConfigFile else {}
    shapes.update(parse_input_specs(args.input))
    from ..converter import ConvertOptions, convert_onnx, load_onnx, save_mnn
    t0 = time.perf_counter()
    model = load_onnx(args.modelFile)
    opts = ConvertOptions(biz_code=args.bizCode, fp16=args.fp16, weight_quant_bits=args.weightQuantBits,
                          weight_quant_block=args.weightQuantBlock,
                          weight_quant_asymmetric=args.weightQuantAsymmetric, input_shapes=shapes,
                          optimize_level=args.optimizeLevel, keep_input_format=args.keepInputFormat,
                          progress=_progress(args, model, args.modelFile))
    net = convert_onnx(model, opts)
    files = save_mnn(net, args.MNNModel, external=args.saveExternalData)
    ins = [net.tensorName[op.outputIndexes[0]] for op in net.oplists if op.type == "Input"]
    print(f"inputTensors : [ {', '.join(ins)}, ]")
    print(f"outputTensors: [ {', '.join(net.outputName or [])}, ]")
    print(f"wrote {', '.join(files)} ({sum(os.path.getsize(f) for f in files)} bytes, "
          f"{time.perf_counter() - t0:.2f} s)")
    print("Converted Success!")
    return 0


def _from_mnn(args: Any) -> int:
    """``-f MNN``: --info, --JsonFile, or re-writing (with weight compression) to --MNNModel."""
    if args.info:
        from .info_cmd import print_info
        print_info(args.modelFile, as_json=False)
        return 0
    if args.JsonFile:
        from .json_cmd import mnn_to_json
        mnn_to_json(args.modelFile, args.JsonFile)
        print("Converted Success!")
        return 0
    if not args.MNNModel:
        raise CliError("-f MNN needs --info, --JsonFile or --MNNModel")
    from .quantize_cmd import requantize
    requantize(args.modelFile, args.MNNModel, bits=args.weightQuantBits, block=args.weightQuantBlock,
               asymmetric=args.weightQuantAsymmetric, fp16=args.fp16, external=args.saveExternalData,
               biz_code=args.bizCode if args.bizCode != "MNN" else None)
    print("Converted Success!")
    return 0
