"""The ``mnnjit`` command (also ``python -m mnnjit``): offline model tools.

    mnnjit convert -f ONNX --modelFile m.onnx --MNNModel m.mnn --bizCode demo
    mnnjit info m.mnn [--json]            mnnjit json m.mnn m.json / m.json m.mnn
    mnnjit quantize m.mnn m_q8.mnn --weightQuantBits 8
    mnnjit compare m.onnx [--per-layer]   mnnjit bench m.mnn --threads 1 2
    mnnjit warmup m.mnn                   mnnjit devices

Nothing here opens a network connection. Each subcommand is one module (``*_cmd.py``) with a
``register(subparsers)`` function; heavy imports happen inside the commands, so ``--help`` is fast.
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from ._common import CliError

COMMANDS = ("convert", "info", "json", "quantize", "compare", "bench", "warmup", "devices")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    import importlib
    from .. import __version__
    parser = argparse.ArgumentParser(prog="mnnjit", description="mnnjit's model tools: convert ONNX to .mnn, "
                                     "inspect, quantize, compare, benchmark, warm up (offline, pure Python).")
    parser.add_argument("--version", action="version", version=f"mnnjit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}_cmd").register(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    from ..converter.core import UnsupportedOnnxError
    from ..format import MNNFormatError
    try:
        return int(args.run(args) or 0)
    except UnsupportedOnnxError as exc:
        print(f"mnnjit {args.command}: {exc}\nnothing was written", file=sys.stderr)
        return 2
    except (CliError, MNNFormatError, FileNotFoundError, ValueError) as exc:
        print(f"mnnjit {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
