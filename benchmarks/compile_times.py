"""Compile time of every CPU kernel a model needs, each model and precision in a new process with an
empty kernel cache.

    PYTHONPATH=. python benchmarks/compile_times.py [--models mobilenetv2 resnet18]
        [--precisions normal low] [--out benchmarks/results/compile_times.json]
        [--baseline earlier.json]

Each child loads the model with a fresh temporary ``MNNJIT_CACHE_DIR`` in background mode (the
default), runs forwards until no new kernel is queued, waits for the background worker and reports
every job: the kernel's name and signature, its compile wall time and the worker's CPU seconds for
it (a kernel's callees compile inside it and count in its time). The worker compiles one kernel at
a time, so the CPU seconds add up to the background compile cost. The first job also pays the
worker's imports (mnnjit's kernel modules and Numba's start-up, a few CPU seconds).
``--baseline`` keeps an earlier run's results (its ``baseline`` if it has one) in the JSON with
each total before / after.
With ``MNNJIT_BENCH_JOBS=<file>`` each child also pickles how to compile each job again alone
(module, file, qualname, signature) for experiments on one kernel.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from models import MODELS, _make_resnet18  # noqa: E402

CHILD = r"""
import json, os, sys, time
import numpy as np
path, precision = sys.argv[1], sys.argv[2]
import mnnjit.expr as F
import mnnjit.nn as nn
from mnnjit.backends.cpu.runtime import tiering
rt = nn.create_runtime_manager(({"precision": precision},))
net = nn.load_module_from_file(path, ["x"], [], runtime_manager=rt)
x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
t0 = time.perf_counter()
for _ in range(20):          # forwards until a forward queues nothing new and nothing is pending
    before = len(tiering._jobs)
    net.forward(F.const(x, [1, 3, 224, 224], F.NCHW)).read()
    tiering.wait()
    if len(tiering._jobs) == before:
        break
wall = time.perf_counter() - t0
jobs = [{"kernel": j.name, "seconds": round(j.seconds, 3), "cpu_seconds": round(j.cpu_seconds, 3),
         "where": j.where, "state": j.state} for j in sorted(tiering._jobs.values(), key=lambda j: j.id)]
dump = os.environ.get("MNNJIT_BENCH_JOBS")
if dump:                     # how to compile each job again alone (module, file, qualname, signature)
    import pickle
    with open(dump, "wb") as f:
        pickle.dump([(j.name, tiering._describe(j.disp), j.sig)
                     for j in sorted(tiering._jobs.values(), key=lambda j: j.id)], f)
print("RESULT" + json.dumps({"jobs": jobs, "wall_s": wall}))
"""


def measure(path: str, precision: str) -> dict:
    """One child with an empty cache: the jobs of ``path`` at ``precision``."""
    with tempfile.TemporaryDirectory(prefix="mnnjit-compile-times-") as cache:
        env = dict(os.environ, MNNJIT_CACHE_DIR=cache, PYTHONPATH=ROOT, MNNJIT_COMPILE="background")
        out = subprocess.run([sys.executable, "-c", CHILD, path, precision], capture_output=True, text=True,
                             env=env, timeout=3600)
        for line in out.stdout.splitlines():
            if line.startswith("RESULT"):
                res = json.loads(line[6:])
                break
        else:
            raise RuntimeError(out.stderr[-3000:])
    jobs = res["jobs"]
    res["total_cpu_s"] = round(sum(j["cpu_seconds"] for j in jobs), 2)
    res["total_compile_wall_s"] = round(sum(j["seconds"] for j in jobs), 2)
    res["kernels"] = len(jobs)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=["mobilenetv2", "resnet18"])
    ap.add_argument("--precisions", nargs="+", default=["normal", "low"])
    ap.add_argument("--out", default=os.path.join(HERE, "results", "compile_times.json"))
    ap.add_argument("--label", default="", help="a name for this build (kept in the JSON)")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "mnnjit_bench_models"))
    ap.add_argument("--baseline", default="", help="an earlier JSON of this script to compare with")
    args = ap.parse_args()
    base = None
    if args.baseline:
        with open(args.baseline) as f:
            base = json.load(f)
        base = base.get("baseline", base)
    os.makedirs(args.workdir, exist_ok=True)
    paths = {"mobilenetv2": os.path.join(MODELS, "mobilenetv2.mnn")}
    if "resnet18" in args.models:
        paths["resnet18"] = _make_resnet18(args.workdir)[1]
    report: dict = {"label": args.label, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    "load": os.getloadavg()[0], "results": {}}
    for name in args.models:
        for prec in args.precisions:
            r = measure(paths[name], prec)
            report["results"][f"{name}/{prec}"] = r
            print(f"{name:12s} {prec:6s} {r['kernels']:3d} kernels  {r['total_cpu_s']:7.1f} CPU-s  "
                  f"(compile wall {r['total_compile_wall_s']:.1f} s)", flush=True)
            for j in sorted(r["jobs"], key=lambda j: -j["cpu_seconds"]):
                print(f"    {j['cpu_seconds']:7.2f}  {j['kernel'][:150]}", flush=True)
    if base is not None:
        report["baseline"] = {k: base[k] for k in ("label", "machine", "how", "dates", "date", "load", "results")
                              if k in base}
        report["totals_cpu_s"] = {
            k: {"before": base["results"][k]["total_cpu_s"], "after": r["total_cpu_s"],
                "ratio": round(r["total_cpu_s"] / base["results"][k]["total_cpu_s"], 3)}
            for k, r in report["results"].items() if k in base["results"]}
        for k, v in report["totals_cpu_s"].items():
            print(f"{k:20s} {v['before']:7.1f} -> {v['after']:7.1f} CPU-s ({v['ratio']:.2f}x)")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
