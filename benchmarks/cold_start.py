"""Cold start: a new process with an empty kernel cache, next to real MNN in its own new process.

    PYTHONPATH=. python benchmarks/cold_start.py [--cases quickstart mobilenetv2 ...] [--forwards 20]
        [--threads 2] [--out benchmarks/results/cold_start.json]

Cases: ``quickstart`` (examples/quickstart.py's ``main``), ``mobilenetv2`` and ``mobilenetv2_low``
(shared/models, ``precision`` normal / low), ``resnet18`` and ``resnet18_low`` (built by
``benchmarks/models.py``), ``zoo:<name>`` (a model of the small-model zoo, ``--zoo``, on its stored
input, a new input Var per call), ``cv`` (examples/preprocess_pipeline.py's mnnjit pipeline: decode,
resize, BGR -> RGB, normalise, NCHW). Real MNN runs the same scripts with the import lines switched
back to ``import MNN`` (the scripts are pymnn scripts with only those lines changed; real MNN's
``cv.imdecode`` is given the read mode it requires, and ``read`` stands for mnnjit's ``read_view``).

Each framework and case runs in a new process; mnnjit's gets a fresh temporary ``MNNJIT_CACHE_DIR``
and the default ``MNNJIT_COMPILE`` (background). Reported per case:

* ``first_result_s``: from starting the process (interpreter, imports, model load) to the first
  result;
* ``latencies_s``: each of the first ``--forwards`` calls (the first included);
* mnnjit, zoo models: ``plan_kernel_after_s`` (from the process start) and
  ``calls_before_plan_kernel``: when the plan's one compiled kernel (compiled in the background
  after some forwards) runs the forwards;
* mnnjit only: ``compile`` - the background compile totals once every kernel is done
  (``compile_cpu_seconds``: the worker's CPU seconds, ``compile_seconds`` their wall time, the
  kernel count), ``compiles_done_after_s`` (from the process start), and ``steady_s``, the median
  of ``--forwards`` further calls after the compiles finished and the steps switched over;
* real MNN: ``steady_s``, the median of ``--forwards`` further calls.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from models import MODELS, _make_resnet18  # noqa: E402

#: the child: builds one case's callable, times it, prints RESULT<json>. argv: framework, spec json
CHILD = r"""
import io, json, os, re, sys, time, contextlib
fw, spec = sys.argv[1], json.loads(sys.argv[2])
t_imp = time.time()
if fw == "mnnjit":
    import mnnjit.expr as F, mnnjit.nn as nn
else:
    import MNN
    F, nn = MNN.expr, MNN.nn
import numpy as onp


def script(path):
    # a pymnn example as a module; for real MNN its import lines switched back to MNN
    src = open(path).read()
    if fw == "MNN":
        src = re.sub(r"import mnnjit as MNN\b", "import MNN", src)
        src = re.sub(r"import mnnjit\.(\w+) as", r"import MNN.\1 as", src)
        # real MNN's imdecode has no default read mode
        src = src.replace("cv.imdecode(data)", "cv.imdecode(data, cv.IMREAD_COLOR)")
        src = src.replace(".read_view()", ".read()")     # (mnnjit's zero-copy read)
    mod = type(sys)("case_script")
    mod.__file__ = path
    sys.modules["case_script"] = mod
    exec(compile(src, path, "exec"), mod.__dict__)
    return mod


case = spec["case"]
if case == "quickstart":
    mod = script(os.path.join(spec["root"], "examples", "quickstart.py"))
    def call():
        with contextlib.redirect_stdout(io.StringIO()):
            mod.main()
elif case == "cv":
    mod = script(os.path.join(spec["root"], "examples", "preprocess_pipeline.py"))
    data = open(os.path.join(spec["root"], "examples", "images", "cat.jpg"), "rb").read()
    def call():
        x = mod.mnnjit_pipeline(data, 224)
        x.read()
else:
    cfg = {"backend": "CPU", "numThread": spec["threads"], "precision": spec["precision"]}
    rt = nn.create_runtime_manager((cfg,))
    net = nn.load_module_from_file(spec["model"], ["x"], [], runtime_manager=rt)
    if spec.get("npz"):     # a zoo model: its stored input, a new input Var per call as a user's loop
        x = onp.load(spec["npz"])["in0_x"]
        def call():
            return net.forward([F.const(x, list(x.shape), F.NCHW)])[0].read()
    else:
        x = onp.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(onp.float32)
        xv = F.const(x, [1, 3, 224, 224], F.NCHW)
        def call():
            return net.forward([xv])[0].read()
lat = []
first_at = None
for i in range(spec["forwards"]):
    t = time.perf_counter()
    call()
    lat.append(time.perf_counter() - t)
    if first_at is None:
        first_at = time.time()
res = {"first_result_at": first_at, "imports_at": t_imp, "latencies_s": lat}
if fw == "mnnjit" and spec.get("npz"):
    # a small model's plan compiles into one kernel after some forwards, in the background: the
    # user's loop goes on until that kernel runs the forwards
    calls, t_end = 0, time.time() + spec["compile_timeout"]
    while not getattr(net._last_plan.run, "__qualname__", "").startswith("_runner") and time.time() < t_end:
        call()
        calls += 1
    res["plan_kernel_at"] = time.time()
    res["calls_before_plan_kernel"] = calls + spec["forwards"]
if fw == "mnnjit":
    from mnnjit.backends.cpu.runtime import tiering
    tiering.wait(timeout=spec["compile_timeout"])
    res["compiles_done_at"] = time.time()
    st = tiering.compile_status()
    res["compile"] = {k: st[k] for k in ("done", "failed", "pending", "compile_seconds", "compile_cpu_seconds")}
    for _ in range(3):                 # steps switch to kernels loaded since the last call
        call()
    res["compile_after_switch"] = tiering.compile_status()["pending"]
steady = []
for _ in range(spec["forwards"]):
    t = time.perf_counter()
    call()
    steady.append(time.perf_counter() - t)
res["steady_s"] = sorted(steady)[len(steady) // 2]
print("RESULT" + json.dumps(res))
"""


def run_case(framework: str, spec: dict, timeout: float) -> dict:
    """One new process of ``framework`` ("mnnjit" or "MNN") for the case in ``spec``."""
    with tempfile.TemporaryDirectory(prefix="mnnjit-cold-") as cache:
        env = dict(os.environ, PYTHONPATH=ROOT, MNNJIT_CACHE_DIR=cache)
        env.pop("MNNJIT_COMPILE", None)
        t0 = time.time()
        out = subprocess.run([sys.executable, "-c", CHILD, framework, json.dumps(spec)], capture_output=True,
                             text=True, env=env, timeout=timeout, cwd=ROOT)
        for line in out.stdout.splitlines():
            if line.startswith("RESULT"):
                r = json.loads(line[6:])
                break
        else:
            raise RuntimeError(f"{framework} {spec['case']}: {out.stderr[-3000:]}")
        stray = [m.group(0) for m in re.finditer(r"^mnnjit: compiling .*$", out.stderr, re.M)]
    r["first_result_s"] = r.pop("first_result_at") - t0
    r["imports_start_s"] = r.pop("imports_at") - t0
    if "plan_kernel_at" in r:
        r["plan_kernel_after_s"] = r.pop("plan_kernel_at") - t0
    if "compiles_done_at" in r:
        r["compiles_done_after_s"] = r.pop("compiles_done_at") - t0
        r["stderr_notice"] = stray
    r["max_first20_s"] = max(r["latencies_s"])
    r["max_after_first_s"] = max(r["latencies_s"][1:]) if len(r["latencies_s"]) > 1 else None
    return r


def _zoo_case(zoo: str, name: str) -> dict:
    """The model and input files of zoo model ``name`` (built first when the zoo is missing)."""
    manifest = os.path.join(zoo, "MANIFEST.json")
    if not os.path.exists(manifest):
        subprocess.run([sys.executable, os.path.join(HERE, "zoo", "build.py"), "--out", zoo], check=True)
    entries = json.load(open(manifest))["entries"]
    if name not in entries:
        raise SystemExit(f"no zoo model {name!r} in {manifest}: {', '.join(sorted(entries))}")
    files = entries[name]["files"]
    return {"model": os.path.join(zoo, files["mnn"]), "npz": os.path.join(zoo, files["npz"])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", nargs="+", default=["quickstart", "cv", "mobilenetv2", "mobilenetv2_low",
                                                   "resnet18", "resnet18_low"])
    ap.add_argument("--frameworks", nargs="+", default=["mnnjit", "MNN"])
    ap.add_argument("--forwards", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--compile-timeout", type=float, default=1800.0)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "cold_start.json"))
    ap.add_argument("--zoo", default=os.path.join(ROOT, "build", "zoo"),
                    help="the small-model zoo (benchmarks/zoo/build.py) for cases zoo:<name>")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "mnnjit_bench_models"))
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    models = {"mobilenetv2": os.path.join(MODELS, "mobilenetv2.mnn")}
    if any(c.startswith("resnet18") for c in args.cases):
        models["resnet18"] = _make_resnet18(args.workdir)[1]
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "threads": args.threads,
                    "forwards": args.forwards, "load_at_start": os.getloadavg()[0], "cases": {}}
    for case in args.cases:
        base, _, low = case.partition("_")
        spec = {"case": base, "root": ROOT, "forwards": args.forwards, "threads": args.threads,
                "precision": "low" if low else "normal", "model": models.get(base),
                "compile_timeout": args.compile_timeout}
        if case.startswith("zoo:"):
            spec.update(_zoo_case(args.zoo, case[4:]), case=case, precision="normal")
        row = report["cases"][case] = {}
        for fw in args.frameworks:
            r = row[fw] = run_case(fw, spec, args.compile_timeout + 600)
            lat = ", ".join(f"{v * 1e3:.0f}" for v in r["latencies_s"])
            extra = ""
            if "compile" in r:
                c = r["compile"]
                extra = (f"  compiles {c['done']} kernels {c['compile_cpu_seconds']:.0f} CPU-s, done after "
                         f"{r['compiles_done_after_s']:.0f} s")
                if "plan_kernel_after_s" in r:
                    extra += (f"; the plan's kernel runs after {r['plan_kernel_after_s']:.1f} s, "
                              f"{r['calls_before_plan_kernel']} forwards")
            print(f"{case:16s} {fw:6s} first result {r['first_result_s']:6.2f} s  steady "
                  f"{r['steady_s'] * 1e3:7.2f} ms{extra}\n{'':23s} first {args.forwards} (ms): {lat}", flush=True)
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:            # after each case: a long run keeps what it measured
            json.dump(report, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
