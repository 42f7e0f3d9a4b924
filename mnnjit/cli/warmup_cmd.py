"""``mnnjit warmup``: compile everything a model needs ahead of time (one forward, compiling
synchronously into the kernel cache), e.g. at a Docker image's build time."""
from __future__ import annotations

import os
import time
from typing import Any

from ._common import CliError, load_data, make_inputs, mnn_inputs, parse_input_specs


def register(sub: Any) -> None:
    """Add the subcommand's parser."""
    p = sub.add_parser("warmup", help="compile a model's kernels ahead of time into the cache directory",
                       description="Compile every kernel a .mnn model needs for the given input shapes, "
                                   "precision and backend, waiting for the compiler, into the kernel cache "
                                   "(MNNJIT_CACHE_DIR), so that later processes start warm.",
                       epilog="example (Dockerfile): RUN mnnjit warmup model.mnn --input x:1x3x224x224")
    p.add_argument("model", help="a .mnn file")
    p.add_argument("--input", action="append", default=[], metavar="NAME:DIMS", help="an input's shape")
    p.add_argument("--data", action="append", default=[], metavar="NAME=FILE.npy|FILE.npz", help="input values")
    p.add_argument("--precision", nargs="+", default=["normal"], choices=["normal", "high", "low", "lowBF"],
                   help="precision modes to compile for (default normal)")
    p.add_argument("--backend", default="CPU", help="MNN backend name or number (default CPU)")
    p.add_argument("--threads", type=int, default=1, help="threads (default 1)")
    p.set_defaults(run=run)


def warmup_model(path: str, shapes: dict, data: dict, precision: str, backend: str, threads: int) -> float:
    """Compile what ``path`` needs (one synchronous forward); returns the seconds it took."""
    import mnnjit
    api = getattr(mnnjit, "warmup", None)
    t0 = time.perf_counter()
    if callable(api) and not data:  # the cold-start API, where this mnnjit has it
        api(path, shapes or None, precision=precision, backend=backend)
        return time.perf_counter() - t0
    from ._common import run_module
    specs, outputs = mnn_inputs(path)
    feeds = make_inputs(specs, shapes, data, 0)
    b: Any = int(backend) if str(backend).isdigit() else backend
    old = os.environ.get("MNNJIT_COMPILE")
    os.environ["MNNJIT_COMPILE"] = "sync"  # wait for every kernel (no background compiling)
    try:
        run_module(mnnjit, path, feeds, outputs, {"backend": b, "numThread": threads, "precision": precision})
    finally:
        if old is None:
            os.environ.pop("MNNJIT_COMPILE", None)
        else:
            os.environ["MNNJIT_COMPILE"] = old
    return time.perf_counter() - t0


def run(args: Any) -> int:
    """Run the subcommand."""
    if not os.path.exists(args.model):
        raise CliError(f"model file not found: {args.model}")
    from ..settings import cache_dir
    shapes = parse_input_specs(args.input)
    data = load_data(args.data)
    for p in args.precision:
        s = warmup_model(args.model, shapes, data, p, args.backend, args.threads)
        print(f"warmed up {args.model} (precision {p}, backend {args.backend}, {args.threads} thread(s)) "
              f"in {s:.2f} s")
    print(f"kernel cache: {cache_dir()}")
    return 0
