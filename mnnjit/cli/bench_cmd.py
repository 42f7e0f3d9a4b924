"""``mnnjit bench``: latency per backend, thread count and precision: cold start (a new process with
an empty kernel cache) and warm steady state, with percentiles; real MNN beside it on request."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

from ._common import CliError, load_data, make_inputs, mnn_inputs, parse_input_specs, real_mnn
from ._common import _const_for


def register(sub: Any) -> None:
    """Add the subcommand's parser."""
    p = sub.add_parser("bench", help="latency: cold start (empty kernel cache) and warm percentiles",
                       description="Time a .mnn model's forward on mnnjit for each backend x threads x "
                                   "precision: the cold start in a new process with an empty kernel cache "
                                   "(load, first forward) and the warm steady state (mean and percentiles).")
    p.add_argument("model", help="a .mnn file")
    p.add_argument("--input", action="append", default=[], metavar="NAME:DIMS", help="an input's shape")
    p.add_argument("--data", action="append", default=[], metavar="NAME=FILE.npy|FILE.npz", help="input values")
    p.add_argument("--backend", nargs="+", default=["CPU"], help="MNN backend names or numbers (default CPU)")
    p.add_argument("--threads", nargs="+", type=int, default=[1], help="thread counts (default 1)")
    p.add_argument("--precision", nargs="+", default=["normal"], choices=["normal", "high", "low", "lowBF"],
                   help="precision modes (default normal)")
    p.add_argument("--runs", type=int, default=20, help="timed forwards (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed forwards first (default 3)")
    p.add_argument("--cold", action=argparse.BooleanOptionalAction, default=True,
                   help="also time a cold start in a new process with an empty kernel cache (default on)")
    p.add_argument("--cold-timeout", type=float, default=900.0, help="seconds allowed for a cold start")
    p.add_argument("--mnn", action="store_true", help="time real MNN on the same settings too")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--cold-child", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(run=run)


def stats(times: list) -> dict:
    """Milliseconds: mean, min, p50, p90, p99, max."""
    a = np.asarray(times, np.float64) * 1e3
    return {"runs": int(a.size), "mean_ms": float(a.mean()), "min_ms": float(a.min()),
            "p50_ms": float(np.percentile(a, 50)), "p90_ms": float(np.percentile(a, 90)),
            "p99_ms": float(np.percentile(a, 99)), "max_ms": float(a.max())}


def _config(backend: str, threads: int, precision: str) -> dict:
    b: Any = int(backend) if str(backend).isdigit() else backend
    return {"backend": b, "numThread": threads, "precision": precision}


def _load(mnn: Any, path: str, feeds: dict, outputs: list, config: dict) -> Any:
    rt = mnn.nn.create_runtime_manager((config,))
    return mnn.nn.load_module_from_file(path, list(feeds), outputs, runtime_manager=rt)


def _forward(mnn: Any, module: Any, feeds: dict) -> None:
    outs = module.forward([_const_for(mnn, a) for a in feeds.values()])
    for o in outs if isinstance(outs, (list, tuple)) else [outs]:
        o.read()


def warm(mnn: Any, path: str, feeds: dict, outputs: list, config: dict, runs: int, warmup: int) -> dict:
    """Steady-state latency in this process."""
    t0 = time.perf_counter()
    module = _load(mnn, path, feeds, outputs, config)
    load_s = time.perf_counter() - t0
    for _ in range(max(0, warmup)):
        _forward(mnn, module, feeds)
    times = []
    for _ in range(max(1, runs)):
        t = time.perf_counter()
        _forward(mnn, module, feeds)
        times.append(time.perf_counter() - t)
    return dict(stats(times), load_s=load_s)


def cold(args: Any, config: dict, timeout: float) -> dict:
    """Load + first forwards in a new process whose kernel caches (mnnjit's and Numba's) are empty."""
    with tempfile.TemporaryDirectory(prefix="mnnjit-cold-") as d:
        env = dict(os.environ, MNNJIT_CACHE_DIR=os.path.join(d, "mnnjit"), NUMBA_CACHE_DIR=os.path.join(d, "numba"))
        cmd = [sys.executable, "-m", "mnnjit", "bench", args.model, "--cold-child", "--json",
               "--backend", str(config["backend"]), "--threads", str(config["numThread"]),
               "--precision", config["precision"]]
        for spec in args.input:
            cmd += ["--input", spec]
        for spec in args.data:
            cmd += ["--data", spec]
        t0 = time.perf_counter()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return {"error": f"cold start took more than {timeout:g} s"}
        wall = time.perf_counter() - t0
    if r.returncode != 0:
        return {"error": (r.stderr or r.stdout).strip().splitlines()[-1:] or ["failed"]}
    res = json.loads(r.stdout.strip().splitlines()[-1])
    res["process_wall_s"] = wall
    return res


def _cold_child(args: Any, feeds: dict, outputs: list) -> int:
    """In the cold process: time load, the first forward and the next two."""
    import mnnjit
    t0 = time.perf_counter()
    cfg = _config(args.backend[0], args.threads[0], args.precision[0])
    module = _load(mnnjit, args.model, feeds, outputs, cfg)
    t1 = time.perf_counter()
    _forward(mnnjit, module, feeds)
    t2 = time.perf_counter()
    later = []
    for _ in range(2):
        t = time.perf_counter()
        _forward(mnnjit, module, feeds)
        later.append(time.perf_counter() - t)
    print(json.dumps({"load_s": t1 - t0, "first_forward_s": t2 - t1, "time_to_first_result_s": t2 - t0,
                      "next_forwards_s": later}))
    return 0


def run(args: Any) -> int:
    """Run the subcommand."""
    if not os.path.exists(args.model):
        raise CliError(f"model file not found: {args.model}")
    specs, outputs = mnn_inputs(args.model)
    feeds = make_inputs(specs, parse_input_specs(args.input), load_data(args.data), 0)
    if args.cold_child:
        return _cold_child(args, feeds, outputs)
    import mnnjit
    mnn = real_mnn() if args.mnn else None
    if args.mnn and mnn is None:
        raise CliError("--mnn: real MNN is not installed (pip install MNN)")
    rows = []
    for backend in args.backend:
        for threads in args.threads:
            for precision in args.precision:
                cfg = _config(backend, threads, precision)
                row: dict = {"backend": backend, "threads": threads, "precision": precision}
                if args.cold:
                    row["cold"] = cold(args, cfg, args.cold_timeout)
                row["warm"] = warm(mnnjit, args.model, feeds, outputs, cfg, args.runs, args.warmup)
                if mnn is not None:
                    row["mnn_warm"] = warm(mnn, args.model, feeds, outputs, cfg, args.runs, args.warmup)
                    row["ratio_p50"] = row["warm"]["p50_ms"] / max(row["mnn_warm"]["p50_ms"], 1e-9)
                rows.append(row)
    result = {"model": args.model, "inputs": {k: list(v.shape) for k, v in feeds.items()}, "results": rows}
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"{args.model}  inputs {result['inputs']}")
    for row in rows:
        w = row["warm"]
        print(f"{row['backend']} threads={row['threads']} precision={row['precision']}:")
        if "cold" in row:
            c = row["cold"]
            if "error" in c:
                print(f"  cold: {c['error']}")
            else:
                print(f"  cold (empty kernel cache): load {c['load_s'] * 1e3:.1f} ms, first forward "
                      f"{c['first_forward_s'] * 1e3:.1f} ms, first result after {c['time_to_first_result_s']:.2f} s")
        print(f"  warm: mean {w['mean_ms']:.3f} ms, p50 {w['p50_ms']:.3f}, p90 {w['p90_ms']:.3f}, "
              f"p99 {w['p99_ms']:.3f}, min {w['min_ms']:.3f} ({w['runs']} runs)")
        if "mnn_warm" in row:
            m = row["mnn_warm"]
            print(f"  real MNN warm: mean {m['mean_ms']:.3f} ms, p50 {m['p50_ms']:.3f}, p90 {m['p90_ms']:.3f}; "
                  f"mnnjit / MNN p50 = {row['ratio_p50']:.2f}x")
    return 0
