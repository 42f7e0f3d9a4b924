"""Small and sequence models (the zoo): mnnjit vs real MNN vs ONNX Runtime, one framework per process.

    .venv/bin/python benchmarks/small_models.py [--zoo build/zoo] [--models NAME ...] [--threads 1 2]
                                                [--rounds 3] [--seconds 0.5] [--input const|placeholder]
                                                [--json benchmarks/results/small_models.json]

The zoo comes from ``benchmarks/zoo/build.py`` (built first when ``--zoo`` has no MANIFEST.json).
For each thread count, ``--rounds`` rounds each start one process per framework in turn (mnnjit,
real MNN, ONNX Runtime, mnnjit, ...: a shared machine's drifting load reaches all three alike);
a process loads every model, warms it up (at least 60 forwards and 0.2 s: past mnnjit's tier
switches, with kernels compiled before the first forward returns, ``MNNJIT_COMPILE=sync``) and
times single forwards for ``--seconds`` (at least 30). Each figure is the median per call of a
user's loop: build the input Var, forward, read the output (mnnjit and real MNN run the same code:
``F.const(x, shape, F.NCHW)`` or a placeholder and ``write``, ``net.forward(x)``, ``y.read()``;
ONNX Runtime: ``sess.run(None, {"x": x})`` on its own session with ``intra_op_num_threads``). The
reported figure is the median over the rounds; the JSON keeps every round and the load average.
The run holds ``/tmp/mnnjit-bench.lock`` (flock) so two benchmarks never time at once.
mnnjit's and ONNX Runtime's outputs are checked against real MNN's stored output.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_ZOO = os.path.join(ROOT, "build", "zoo")
FRAMEWORKS = ("mnnjit", "MNN", "ORT")
LOCK = "/tmp/mnnjit-bench.lock"

CHILD = r"""
import json, os, sys, time
import numpy as np
spec = json.loads(sys.argv[1])
fw, threads, zoo = spec["framework"], spec["threads"], spec["zoo"]
man = json.load(open(os.path.join(zoo, "MANIFEST.json")))["entries"]
if fw == "mnnjit":
    import mnnjit as M
elif fw == "MNN":
    import MNN as M
else:
    import onnxruntime as ort
res = {"load_before": os.getloadavg()[0]}
for name in spec["models"]:
    e = man[name]
    data = np.load(os.path.join(zoo, e["files"]["npz"]))
    x = data["in0_x"]; want = data["out0_y"]; shape = list(x.shape)
    if fw == "ORT":
        so = ort.SessionOptions(); so.intra_op_num_threads = threads; so.inter_op_num_threads = 1
        sess = ort.InferenceSession(os.path.join(zoo, e["files"]["onnx"]), so, providers=["CPUExecutionProvider"])
        def call():
            return sess.run(None, {"x": x})[0]
    else:
        F = M.expr
        rt = M.nn.create_runtime_manager(({"backend": "CPU", "numThread": threads, "precision": "normal"},))
        net = M.nn.load_module_from_file(os.path.join(zoo, e["files"]["mnn"]), ["x"], ["y"], runtime_manager=rt)
        if spec["input"] == "placeholder":
            ph = F.placeholder(shape, F.NCHW)
            def call():
                ph.write(x)
                return net.forward(ph).read()
        else:
            def call():
                return net.forward(F.const(x, shape, F.NCHW)).read()
    t0 = time.perf_counter(); n = 0
    while n < 60 or time.perf_counter() - t0 < 0.2:
        y = call(); n += 1
    err = float(np.abs(np.asarray(y, np.float32).reshape(want.shape) - want).max())
    times = []
    t0 = time.perf_counter()
    while len(times) < 30 or time.perf_counter() - t0 < spec["seconds"]:
        t = time.perf_counter(); call(); times.append(time.perf_counter() - t)
    res[name] = {"median_s": float(np.median(times)), "calls": len(times), "max_abs_diff_vs_MNN": err}
res["load_after"] = os.getloadavg()[0]
print("RESULT" + json.dumps(res))
"""


def _child(framework: str, threads: int, models: list[str], zoo: str, seconds: float, inp: str) -> dict:
    """One process of one framework over the models; its per-model medians."""
    spec = json.dumps({"framework": framework, "threads": threads, "models": models, "zoo": zoo,
                       "seconds": seconds, "input": inp})
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.setdefault("MNNJIT_COMPILE", "sync")
    env.setdefault("MNNJIT_CACHE_DIR", "/tmp/mnnjit-cache")
    out = subprocess.run([sys.executable, "-c", CHILD, spec], capture_output=True, text=True, env=env,
                         timeout=3600)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            return json.loads(line[len("RESULT"):])
    raise RuntimeError(f"{framework} child failed ({out.returncode}): {out.stdout[-2000:]} {out.stderr[-3000:]}")


def _lock(fh, wait: float | None) -> bool:
    """Take the bench lock on ``fh``: True once held; False after ``wait`` seconds without it."""
    if wait is None:
        fcntl.flock(fh, fcntl.LOCK_EX)
        return True
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                print("bench lock still busy: timing without it", file=sys.stderr, flush=True)
                return False
            time.sleep(0.5)


def _fmt(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1e6:.1f} µs" if s < 1e-4 else f"{s * 1e3:.3f} ms"


def run(zoo: str, models: list[str], thread_counts: list[int], rounds: int, seconds: float, inp: str) -> dict:
    """Medians per model, thread count and framework, with the rounds they came from."""
    out: dict = {"rounds": rounds, "seconds": seconds, "input": inp, "cpus": os.cpu_count(),
                 "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(("MNNJIT_", "NUMBA_", "OMP_"))},
                 "results": {}}
    for th in thread_counts:
        raw: dict = {fw: [] for fw in FRAMEWORKS}
        for r in range(rounds):
            for fw in FRAMEWORKS:
                raw[fw].append(_child(fw, th, models, zoo, seconds, inp))
                print(f"threads={th} round {r + 1}/{rounds} {fw} done (load {raw[fw][-1]['load_after']:.2f})",
                      file=sys.stderr, flush=True)
        for name in models:
            row = {}
            for fw in FRAMEWORKS:
                meds = [res[name]["median_s"] for res in raw[fw]]
                row[fw] = {"median_s": statistics.median(meds), "rounds_s": meds,
                           "max_abs_diff_vs_MNN": max(res[name]["max_abs_diff_vs_MNN"] for res in raw[fw])}
            row["mnnjit_over_MNN"] = row["mnnjit"]["median_s"] / row["MNN"]["median_s"]
            row["mnnjit_over_ORT"] = row["mnnjit"]["median_s"] / row["ORT"]["median_s"]
            out["results"].setdefault(name, {})[str(th)] = row
        out.setdefault("load", {})[str(th)] = {fw: [(res["load_before"], res["load_after"]) for res in raw[fw]]
                                               for fw in FRAMEWORKS}
    return out


def table(out: dict, descriptions: dict) -> str:
    """A markdown table of the medians and the mnnjit / MNN ratio."""
    lines = ["| model | threads | mnnjit | real MNN | ONNX Runtime | mnnjit / MNN | mnnjit / ORT |",
             "|---|---|---|---|---|---|---|"]
    for name, per in out["results"].items():
        for th, row in per.items():
            lines.append(f"| {name} | {th} | {_fmt(row['mnnjit']['median_s'])} | {_fmt(row['MNN']['median_s'])} | "
                         f"{_fmt(row['ORT']['median_s'])} | {row['mnnjit_over_MNN']:.2f} | "
                         f"{row['mnnjit_over_ORT']:.2f} |")
    lines.append("")
    lines += [f"- {n}: {descriptions[n]}" for n in out["results"]]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zoo", default=DEFAULT_ZOO)
    ap.add_argument("--models", nargs="+", default=None, help="zoo entries (default: all)")
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=0.5, help="timed seconds per model and process")
    ap.add_argument("--input", choices=("const", "placeholder"), default="const")
    ap.add_argument("--lock-wait", type=float, default=None,
                    help="seconds to wait for the bench lock before timing without it (default: wait)")
    ap.add_argument("--json", default=os.path.join(HERE, "results", "small_models.json"))
    args = ap.parse_args()
    man_path = os.path.join(args.zoo, "MANIFEST.json")
    if not os.path.exists(man_path):
        subprocess.run([sys.executable, os.path.join(HERE, "zoo", "build.py"), "--out", args.zoo], check=True)
    with open(man_path) as fh:
        entries = json.load(fh)["entries"]
    models = args.models or list(entries)
    unknown = set(models) - set(entries)
    if unknown:
        raise SystemExit(f"not in the zoo at {args.zoo}: {sorted(unknown)}")
    # one lock for the whole run (the children of a round follow each other with nothing timed between)
    with open(LOCK, "a") as lk:
        locked = _lock(lk, args.lock_wait)
        out = run(args.zoo, models, args.threads, args.rounds, args.seconds, args.input)
    out["bench_lock_held"] = locked
    print(table(out, {n: entries[n]["description"] for n in models}))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
