"""``mnnjit warmup``: compile everything a model needs ahead of time into the kernel cache
(:func:`mnnjit.warmup.warmup`), e.g. at a Docker image's build time; ``--common`` compiles the
kernels of common CNN building blocks without a model (:func:`mnnjit.warmup.prewarm`)."""
from __future__ import annotations

import os
from typing import Any

from ._common import CliError, parse_input_specs


def register(sub: Any) -> None:
    """Add the subcommand's parser."""
    p = sub.add_parser("warmup", help="compile a model's kernels ahead of time into the cache directory",
                       description="Compile every kernel a .mnn model needs for the given input shapes, "
                                   "precisions and backend, waiting for the compiler, into the kernel cache "
                                   "(MNNJIT_CACHE_DIR), so that later processes start warm. Without a model, "
                                   "--common compiles the kernels of common CNN blocks.",
                       epilog="example (Dockerfile): RUN mnnjit warmup model.mnn --input x:1x3x224x224")
    p.add_argument("model", nargs="?", help="a .mnn file")
    p.add_argument("--input", action="append", default=[], metavar="NAME:DIMS", help="an input's shape")
    p.add_argument("--precision", nargs="+", default=["normal"], choices=["normal", "high", "low", "lowBF"],
                   help="precision modes to compile for (default normal)")
    p.add_argument("--backend", default="CPU", help="MNN backend name or number (default CPU)")
    p.add_argument("--threads", type=int, default=None, help="threads (default: the runtime's)")
    p.add_argument("--common", action="store_true", help="also (or, without a model, only) compile the "
                                                         "kernels of common CNN building blocks")
    p.add_argument("--quiet", action="store_true", help="no per-kernel lines")
    p.set_defaults(run=run)


def run(args: Any) -> int:
    """Run the subcommand."""
    from ..settings import cache_dir
    from ..warmup import prewarm, warmup
    if not args.model and not args.common:
        raise CliError("give a .mnn model, or --common")
    if args.model and not os.path.exists(args.model):
        raise CliError(f"model file not found: {args.model}")
    if args.common:
        res = prewarm([p for p in args.precision if p in ("normal", "high", "low")] or ["normal"], progress=not args.quiet)
        print(f"warmed up common CNN blocks: {res.get('compiled', 0)} kernel(s) compiled "
              f"in {res.get('seconds', 0.0):.2f} s")
    if args.model:
        backend: Any = int(args.backend) if str(args.backend).isdigit() else args.backend
        res = warmup(args.model, parse_input_specs(args.input) or None, precision=list(args.precision),
                     backend=backend, threads=args.threads, progress=not args.quiet)
        print(f"warmed up {args.model} (precision {', '.join(args.precision)}, backend {args.backend}): "
              f"{res['kernels']} kernel(s), {res['compiled']} compiled now, in {res['seconds']:.2f} s")
    print(f"kernel cache: {cache_dir()}")
    return 0
