"""Model latency: mnnjit vs real MNN vs ONNX Runtime, side by side (alternating runs, medians).

    PYTHONPATH=. python benchmarks/models.py [--runs 30] [--threads 1 2] [--quick]

Rounds alternate the frameworks; in each round a CNN gets a block of four forwards of which the
last three are timed (the first pays for the previous framework's spinning threads and evicted
caches). Models: MobileNetV2 (shared/models), ResNet-18 (built with the onnx helper API, converted with real
MNN's converter into a temp dir), the 2-layer MLP. For each thread count a fresh process runs the
three frameworks in turn, one forward each per round, and reports medians and mnnjit / MNN ratios.
Also: the MLP's per-forward time (medians of batches of 100 forwards, and of single alternating
calls) and the first-forward time of a new process (load + first forward) with warm on-disk
kernel caches (best of three runs after a warming one).

    PYTHONPATH=. python benchmarks/models.py --backend npu [--runs 30] [--threads 1 2]

``--backend npu``: the NPU delegate bridge against mnnjit's CPU backend on MobileNetV2 and ResNet-18,
one latency per bridge installed (OpenVINO on its CPU device, ONNX Runtime with its CPU provider:
here the SDKs run on the CPU too, so the numbers show the bridge's overhead), with the number of
delegated partitions and the largest difference from the CPU backend's output.

    PYTHONPATH=. python benchmarks/models.py --backend opencl [--runs 30] [--threads 1 2]

``--backend opencl``: the OpenCL backend (``backend=3``, fp32 and precision=low) against mnnjit's CPU
backend on MobileNetV2 and ResNet-18: the device's name, latency medians, the steps that fell back to
the host and the largest relative difference from the CPU backend's output. On PoCL's CPU device
the numbers are informational (both backends share the same cores).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
#: ../shared beside the checkout (MNNJIT_SHARED when set)
SHARED = os.environ.get("MNNJIT_SHARED") or os.path.join(os.path.dirname(ROOT), "shared")
MODELS = os.path.join(SHARED, "models")


def _make_resnet18(workdir: str) -> tuple[str, str]:
    sys.path[:0] = [os.path.join(ROOT, "tests", "models"), os.path.join(ROOT, "tests")]
    from mnnjit_models_fixtures import convert, resnet18_onnx
    onnx_path = os.path.join(workdir, "resnet18.onnx")
    mnn_path = os.path.join(workdir, "resnet18.mnn")
    if not os.path.exists(mnn_path):
        resnet18_onnx(onnx_path, width=64, size=224, classes=1000, seed=0)
        convert(onnx_path, mnn_path)
    return onnx_path, mnn_path


def _mobilenet_onnx(workdir: str) -> str | None:
    """MobileNetV2's ONNX is not kept in shared/models; ORT then runs our ONNX export if any."""
    p = os.path.join(MODELS, "mobilenetv2.onnx")
    return p if os.path.exists(p) else None


CHILD = r"""
import json, os, sys, time
import numpy as np
spec = json.loads(sys.argv[1])
threads, runs = spec["threads"], spec["runs"]
import mnnjit as J
import MNN
import onnxruntime as ort
res = {}
for name, (mnn_path, onnx_path, shape) in spec["models"].items():
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    jm = J.nn.load_module_from_file(mnn_path, ["x"], [], runtime_manager=J.nn.create_runtime_manager({"numThread": threads}))
    jx = J.expr.const(x, list(shape))
    rt = MNN.nn.create_runtime_manager(({"backend": "CPU", "numThread": threads, "precision": "normal"},))
    mm = MNN.nn.load_module_from_file(mnn_path, ["x"], [], runtime_manager=rt)
    mx = MNN.expr.const(x, list(shape), MNN.expr.NCHW)
    fns = {"mnnjit": lambda: jm.forward([jx])[0].read_view(), "MNN": lambda: mm.forward([mx])[0].read()}
    if onnx_path:
        so = ort.SessionOptions(); so.intra_op_num_threads = threads; so.inter_op_num_threads = 1
        # ORT's idle workers spin after each run by default and then steal the second core from
        # the framework measured next in this process (mnnjit's 2-thread ResNet-18 doubled)
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
        iname = sess.get_inputs()[0].name
        fns["ORT"] = lambda: sess.run(None, {iname: x})
    a = np.asarray(fns["mnnjit"]()); b = np.asarray(fns["MNN"]())
    err = float(np.abs(a.reshape(b.shape) - b).max())
    for f in fns.values():  # warm up (the MLP: enough forwards for mnnjit to compile its plan)
        for _ in range(200 if name == "mlp" else 2):
            f()
    times = {k: [] for k in fns}
    # the MLP: each sample times a batch of forwards (per-forward time = batch / size, caches warm
    # as in a serving loop); single alternating calls are reported too (cold caches: every call
    # follows the other frameworks' calls)
    batch = 100 if name == "mlp" else 1
    single = {k: [] for k in fns}
    n = runs * (3 if name == "mlp" else 1)
    for _ in range(n):
        for k, f in fns.items():
            if batch == 1:
                # a block of forwards per framework: the first one after another framework pays
                # for the other's idle worker threads (MNN's pool spins for a while after a run)
                # and its evicted caches; it is run but not counted
                f()
                for _ in range(3):
                    t = time.perf_counter(); f(); times[k].append(time.perf_counter() - t)
                continue
            t = time.perf_counter()
            for _ in range(batch):
                f()
            times[k].append((time.perf_counter() - t) / batch)
        if batch > 1:
            for _ in range(20):
                for k, f in fns.items():
                    t = time.perf_counter(); f(); single[k].append(time.perf_counter() - t)
    res[name] = {k: float(np.median(v)) for k, v in times.items()}
    if batch > 1:
        res[name]["single_call"] = {k: float(np.median(v)) for k, v in single.items()}
    res[name]["max_abs_diff_vs_MNN"] = err
print("RESULT" + json.dumps(res))
"""

CHILD_NPU = r"""
import json, sys, time
import numpy as np
spec = json.loads(sys.argv[1])
threads, runs = spec["threads"], spec["runs"]
import mnnjit as J
res = {}
for name, (mnn_path, _onnx, shape) in spec["models"].items():
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    jx = J.expr.const(x, list(shape))
    mods = {"cpu": J.nn.load_module_from_file(mnn_path, ["x"], [], runtime_manager=J.nn.create_runtime_manager(
        {"numThread": threads}), shape_mutable=False)}
    for bridge in spec["bridges"]:
        t0 = time.perf_counter()
        rt = J.nn.create_runtime_manager({"backend": 5, "numThread": threads,
                                          "npu": {"bridge": bridge, "num_threads": threads}})
        mods[bridge] = J.nn.load_module_from_file(mnn_path, ["x"], [], runtime_manager=rt, shape_mutable=False)
        res.setdefault(name, {})[bridge + "_load_s"] = time.perf_counter() - t0
    fns = {k: (lambda m=m: m.forward([jx])[0].read_view()) for k, m in mods.items()}
    ref = np.asarray(fns["cpu"]())
    out = res.setdefault(name, {})
    for k, f in fns.items():
        if k == "cpu":
            continue
        out[k + "_max_rel_diff"] = float(np.abs(np.asarray(f()) - ref).max() / np.abs(ref).max())
        plan = mods[k]._last_plan
        out[k + "_partitions"] = len(getattr(getattr(plan, "plan", plan), "partitions", []))
    for f in fns.values():
        for _ in range(3):
            f()
    times = {k: [] for k in fns}
    for _ in range(runs):
        for k, f in fns.items():
            f()  # the first forward after another framework's run is not timed (see the module doc)
            for _ in range(3):
                t = time.perf_counter(); f(); times[k].append(time.perf_counter() - t)
    out.update({k: float(np.median(v)) for k, v in times.items()})
print("RESULT" + json.dumps(res))
"""


CHILD_OPENCL = r"""
import json, sys, time
import numpy as np
spec = json.loads(sys.argv[1])
threads, runs = spec["threads"], spec["runs"]
import mnnjit as J
from mnnjit.backends import registry
res = {"device": registry.get("opencl").describe()}
for name, (mnn_path, _onnx, shape) in spec["models"].items():
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    jx = J.expr.const(x, list(shape))
    mods = {}
    for key, cfg in (("cpu", {"numThread": threads}), ("opencl", {"backend": 3}),
                     ("opencl_fp16", {"backend": 3, "precision": "low"})):
        t0 = time.perf_counter()
        mods[key] = J.nn.load_module_from_file(mnn_path, ["x"], [], runtime_manager=J.nn.create_runtime_manager(cfg))
        mods[key].forward([jx])[0].read_view()  # builds (and on a cold cache compiles) the plan
        res.setdefault(name, {})[key + "_first_s"] = time.perf_counter() - t0
    fns = {k: (lambda m=m: m.forward([jx])[0].read_view()) for k, m in mods.items()}
    ref = np.asarray(fns["cpu"]())
    out = res[name]
    for k in ("opencl", "opencl_fp16"):
        out[k + "_max_rel_diff"] = float(np.abs(np.asarray(fns[k]()) - ref).max() / np.abs(ref).max())
        plan = mods[k]._last_plan
        out[k + "_host_steps"] = len(getattr(getattr(plan, "plan", plan), "fallbacks", []))
    times = {k: [] for k in fns}
    for _ in range(runs):
        for k, f in fns.items():
            f()  # the first forward after another backend's run is not timed (see the module doc)
            for _ in range(3):
                t = time.perf_counter(); f(); times[k].append(time.perf_counter() - t)
    out.update({k: float(np.median(v)) for k, v in times.items()})
print("RESULT" + json.dumps(res))
"""


def main_opencl(args: argparse.Namespace, runs: int) -> None:
    """``--backend opencl``: OpenCL (fp32, precision=low) against the CPU backend, with host steps."""
    names = args.models or ["mobilenetv2", "resnet18"]
    models = {}
    if "mobilenetv2" in names:
        models["mobilenetv2"] = (os.path.join(MODELS, "mobilenetv2.mnn"), None, [1, 3, 224, 224])
    if "resnet18" in names:
        models["resnet18"] = (_make_resnet18(args.workdir)[1], None, [1, 3, 224, 224])
    report = {}
    for t in args.threads:
        res = report[t] = _run_child(CHILD_OPENCL, t, runs, models)
        print(f"threads={t} device: {res['device']}")
        for name, r in res.items():
            if name == "device":
                continue
            cells = "  ".join(f"{k} {r[k] * 1e3:8.2f} ms" for k in ("cpu", "opencl", "opencl_fp16"))
            print(f"threads={t} {name:12s} {cells}   opencl/cpu {r['opencl'] / r['cpu']:6.2f}x   host steps "
                  f"{r['opencl_host_steps']}/{r['opencl_fp16_host_steps']}   max rel diff "
                  f"{r['opencl_max_rel_diff']:.1e} (fp16 {r['opencl_fp16_max_rel_diff']:.1e})")
    print(json.dumps(report))


def _run_child(code: str, threads: int, runs: int, models: dict) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               NUMBA_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), PYTHONPATH=ROOT)
    spec = json.dumps({"threads": threads, "runs": runs, "models": models})
    out = subprocess.run([sys.executable, "-c", code, spec], capture_output=True, text=True, env=env, timeout=3600)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            return json.loads(line[6:])
    raise RuntimeError(out.stderr[-3000:])


def run_npu(threads: int, runs: int, models: dict, bridges: list[str]) -> dict:
    """One process timing mnnjit's CPU backend and the NPU delegate through each bridge."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               NUMBA_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), PYTHONPATH=ROOT)
    spec = json.dumps({"threads": threads, "runs": runs, "models": models, "bridges": bridges})
    out = subprocess.run([sys.executable, "-c", CHILD_NPU, spec], capture_output=True, text=True, env=env,
                         timeout=3600)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            return json.loads(line[6:])
    raise RuntimeError(out.stderr[-3000:])


def main_npu(args: argparse.Namespace, runs: int) -> None:
    """``--backend npu``: latency per bridge against the CPU backend, with partition counts."""
    import importlib.util
    bridges = [b for b in ("openvino", "onnxruntime") if importlib.util.find_spec(b) is not None]
    if not bridges:
        raise SystemExit("--backend npu needs openvino or onnxruntime (pip install -e '.[npu]')")
    names = args.models or ["mobilenetv2", "resnet18"]
    models = {}
    if "mobilenetv2" in names:
        models["mobilenetv2"] = (os.path.join(MODELS, "mobilenetv2.mnn"), None, [1, 3, 224, 224])
    if "resnet18" in names:
        models["resnet18"] = (_make_resnet18(args.workdir)[1], None, [1, 3, 224, 224])
    report = {}
    for t in args.threads:
        res = report[t] = run_npu(t, runs, models, bridges)
        for name, r in res.items():
            cells = "  ".join(f"{k} {r[k] * 1e3:7.2f} ms" + (f" ({r[k + '_partitions']} partition(s), "
                                                                f"max rel diff {r[k + '_max_rel_diff']:.1e})"
                                                                if k != "cpu" else "")
                              for k in ["cpu"] + bridges)
            print(f"threads={t} {name:12s} {cells}")
    print(json.dumps(report))


FIRST = r"""
import time, sys
t0 = time.perf_counter()
import numpy as np
import mnnjit as J
m = J.nn.load_module_from_file(sys.argv[1], ["x"], [])
shape = [int(s) for s in sys.argv[2].split(",")]
m.forward([J.expr.const(np.zeros(shape, np.float32), shape)])[0].read_view()
print("FIRST", time.perf_counter() - t0)
"""


def run_threads(threads: int, runs: int, models: dict) -> dict:
    """Run one benchmark process with ``threads`` threads for every framework."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               NUMBA_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), PYTHONPATH=ROOT)
    spec = json.dumps({"threads": threads, "runs": runs, "models": models})
    out = subprocess.run([sys.executable, "-c", CHILD, spec], capture_output=True, text=True, env=env, timeout=3600)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            return json.loads(line[6:])
    raise RuntimeError(out.stderr[-3000:])


def first_forward(path: str, shape: list[int]) -> float:
    """Seconds from process start (imports included) to the first forward's result, warm caches."""
    env = dict(os.environ, PYTHONPATH=ROOT,
               PYTHONPYCACHEPREFIX=os.path.join(tempfile.gettempdir(), "mnnjit_bench_pycache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a warm start includes compiled bytecode
    vals = []
    for _ in range(4):  # the first run warms the on-disk caches; the best of the other three
        out = subprocess.run([sys.executable, "-c", FIRST, path, ",".join(map(str, shape))],
                             capture_output=True, text=True, env=env, timeout=600)
        vals.append(float(out.stdout.split("FIRST")[1]))
    return min(vals[1:])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--quick", action="store_true", help="MLP and MobileNetV2 only, 10 runs")
    ap.add_argument("--models", nargs="+", help="only these (mlp, mobilenetv2, resnet18)")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "mnnjit_bench_models"))
    ap.add_argument("--backend", default="cpu", choices=["cpu", "npu", "opencl"],
                    help="npu: the NPU delegate's bridges against mnnjit's CPU backend; "
                         "opencl: the OpenCL backend (fp32, fp16) against the CPU backend")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    runs = 10 if args.quick else args.runs
    if args.backend == "npu":
        main_npu(args, runs)
        return
    if args.backend == "opencl":
        main_opencl(args, runs)
        return
    models = {"mlp": (os.path.join(MODELS, "mlp.mnn"), os.path.join(MODELS, "mlp.onnx"), [1, 64]),
              "mobilenetv2": (os.path.join(MODELS, "mobilenetv2.mnn"), _mobilenet_onnx(args.workdir), [1, 3, 224, 224])}
    if not args.quick and (not args.models or "resnet18" in args.models):
        onnx_path, mnn_path = _make_resnet18(args.workdir)
        models["resnet18"] = (mnn_path, onnx_path, [1, 3, 224, 224])
    if args.models:
        models = {k: v for k, v in models.items() if k in args.models}
    report = {}
    for t in args.threads:
        res = run_threads(t, runs, models)
        report[t] = res
        for name, r in res.items():
            unit, scale = ("us", 1e6) if name == "mlp" else ("ms", 1e3)
            cells = "  ".join(f"{k} {r[k] * scale:8.2f} {unit}" for k in ("mnnjit", "MNN", "ORT") if k in r)
            ratio = r["mnnjit"] / r["MNN"]
            print(f"threads={t} {name:12s} {cells}   mnnjit/MNN {ratio:6.2f}x   max|diff| {r['max_abs_diff_vs_MNN']:.2e}")
            if "single_call" in r:
                sc = r["single_call"]
                cells = "  ".join(f"{k} {sc[k] * scale:8.2f} {unit}" for k in ("mnnjit", "MNN", "ORT") if k in sc)
                print(f"threads={t} {name + ' 1-call':12s} {cells}   mnnjit/MNN {sc['mnnjit'] / sc['MNN']:6.2f}x")
    for name in [m for m in ("mlp", "mobilenetv2") if m in models]:
        p, _, shape = models[name]
        print(f"first forward in a new process ({name}, warm caches): {first_forward(p, shape) * 1e3:.0f} ms")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
