"""The longer fuzz run of the .mnn loader and of forwards on mutated models.

    PYTHONPATH=. python benchmarks/fuzz_models.py [--per-model 300] [--models mlp convbn ...]
                                                  [--seed 0] [--mem-mb 2048] [--cpu-seconds 120]
                                                  [--case-timeout 120] [--json out.json]

The same mutations and child-process checks as ``tests/fuzz/test_model_fuzz.py`` (see
``tests/fuzz/model_fuzz.py``: byte flips, truncations, extreme words, inconsistent fields and
indexes; every case loaded and run under RLIMIT_AS / RLIMIT_CPU and a wall-clock timeout), on
every model of the shared corpus by default, MobileNetV2 and its 8-bit-weight variant included.
Prints the outcomes per model (results, exceptions by type, and any crash, timeout or killed
child with its case) and exits with status 1 when a case ended in none of a result or a Python
exception.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "fuzz"))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from model_fuzz import BAD, mutants, run_cases, summary  # noqa: E402
from shared_paths import MODELS  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    with open(os.path.join(MODELS, "MANIFEST.json")) as fh:
        every = sorted(json.load(fh)["entries"])
    ap.add_argument("--models", nargs="+", default=every)
    ap.add_argument("--per-model", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mem-mb", type=int, default=2048)
    ap.add_argument("--cpu-seconds", type=int, default=120)
    ap.add_argument("--case-timeout", type=float, default=120.0)
    ap.add_argument("--json", default=None, help="write every outcome to this file")
    args = ap.parse_args()
    os.environ.setdefault("MNNJIT_COMPILE", "sync")    # (no background compiles in the children)
    rows = []
    failed = 0
    for i, name in enumerate(args.models):
        with open(os.path.join(MODELS, name + ".mnn"), "rb") as fh:
            data = fh.read()
        cases = mutants(data, seed=args.seed * 1000 + i, count=args.per_model)
        t0 = time.perf_counter()
        outcomes = run_cases(cases, mem_mb=args.mem_mb, cpu_seconds=args.cpu_seconds,
                             case_timeout=args.case_timeout)
        s = summary(outcomes)
        print(f"{name}: {len(cases)} cases in {time.perf_counter() - t0:.1f} s: {s['kinds']}; "
              f"exceptions: {s['errors']}", flush=True)
        for o in outcomes:
            rows.append({"model": name, "label": o.label, "kind": o.kind, "detail": o.detail,
                         "seconds": round(o.seconds, 4)})
            if o.kind in BAD:
                failed += 1
                print(f"  {o.kind} ({o.detail}): {o.label}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    print("no crash, timeout or killed child" if not failed else f"{failed} case(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
