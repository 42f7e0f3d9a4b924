"""``mnnjit quantize``: weight quantization (or fp16) of an existing .mnn file, in the converter's format."""
from __future__ import annotations

from typing import Any, Optional

from ._common import CliError
from .convert_cmd import _bool01


def register(sub: Any) -> None:
    """Add the subcommand's parser."""
    p = sub.add_parser("quantize", help="quantize the weights of a .mnn file (bits, block, asymmetric) or "
                                        "store them as fp16",
                       description="Re-write a .mnn model with its convolution / MatMul / RNN weights quantized "
                                   "exactly as 'convert --weightQuantBits' writes them (already compressed "
                                   "weights are decoded first).",
                       epilog="example: mnnjit quantize model.mnn model_q8.mnn --weightQuantBits 8")
    p.add_argument("source", help="the .mnn model")
    p.add_argument("dest", help="the .mnn file to write")
    p.add_argument("--weightQuantBits", "--bits", dest="bits", type=int, default=8, metavar="BITS",
                   help="2..8 (default 8)")
    p.add_argument("--weightQuantBlock", "--block", dest="block", type=int, default=0, metavar="N",
                   help="blocks of N input channels (0: per output channel)")
    p.add_argument("--weightQuantAsymmetric", "--asymmetric", dest="asymmetric", type=_bool01, nargs="?",
                   const=True, default=True, metavar="0|1", help="asymmetric (default 1) or symmetric (0)")
    p.add_argument("--fp16", action="store_true", help="store the weights as float16 instead of quantizing")
    p.add_argument("--saveExternalData", action="store_true", help="write weights to <dest>.weight")
    p.set_defaults(run=run)


def requantize(src: str, dest: str, bits: int = 8, block: int = 0, asymmetric: bool = True, fp16: bool = False,
               external: bool = False, biz_code: Optional[str] = None) -> int:
    """Read ``src``, compress its convolution weights, write ``dest``; returns the ops changed."""
    from ..converter import compress_weights, save_mnn
    from ..format import read_net
    if bits and not 2 <= bits <= 8:
        raise CliError(f"bits must be 2..8, got {bits}")
    net = read_net(src)
    n = compress_weights(net, bits=0 if fp16 else bits, block=block, asymmetric=asymmetric, fp16=fp16)
    if biz_code is not None:
        net.bizCode = biz_code
    save_mnn(net, dest, external=external)
    return n


def run(args: Any) -> int:
    """Run the subcommand."""
    n = requantize(args.source, args.dest, bits=args.bits, block=args.block, asymmetric=args.asymmetric,
                   fp16=args.fp16, external=args.saveExternalData)
    what = "float16" if args.fp16 else f"{args.bits}-bit {'asymmetric' if args.asymmetric else 'symmetric'}"
    print(f"{n} convolution weight tensors stored as {what}; wrote {args.dest}")
    return 0
