"""Precision/memory modes on the CPU: model-level, per-layer and kernel-level numbers.

Model level (one fresh process per mode): MobileNetV2, ResNet-18 (a float model and its 8-bit
weight-quantized conversion, ``--weightQuantBits 8``) and a transformer encoder block
(:data:`TRANSFORMER`) through ``mnnjit.nn`` in three modes - fp32 (precision/memory normal on the
float model), precision low (the float model) and memory low (the quantized model; its
memory-normal run, weights dequantized at load, is reported too) - at 1 and 2 threads: latency
(median per forward, and CPU time), activation and weight bytes of the plan, peak RSS, the
largest difference from the model's float reference output; and real MNN in the same mode
(``--mnn``, when installed).

``--layers T``: every step of the CNNs' kernel-step plans timed in fp32, precision low and
memory low at T threads (:meth:`NetPlan.profile`, one process per mode), with the per-layer
choices each plan made (:func:`mnnjit.backends.cpu.weights.plan_choices`). ``--cold``: each model and mode once on an
empty kernel cache (the cold-start compile: the first forward). ``--kernels``: fp16-storage vs
fp32 versions of single kernels, and quantized GEMM strategies.

The machine is shared: every (model, threads) point runs its modes one process each,
alternating, ``--rounds`` times; latencies are the median over rounds of each process's median
and minimum; ratios are against fp32 of the same round set. MNNJIT_COMPILE=sync is set for the
children. Run under ``flock /tmp/mnnjit-bench.lock``:
``PYTHONPATH=. python benchmarks/precision.py [--quick] [--layers 1] [--cold] [--json out.json]``
(default output: ``benchmarks/results/precision_modes.json``).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODELS = Path(os.environ.get("MNNJIT_SHARED", ROOT.parent / "shared")) / "models"


def vm_hwm_mb() -> float:
    """Peak resident set of THIS process image (VmHWM; ru_maxrss survives exec on Linux and
    would report the parent's peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return vm_hwm_mb()


def timeit(fn: Callable[[], object], reps: int) -> Dict[str, float]:
    """min and median wall time in ms after three warm-up calls (the first forwards after the
    first are still slow: arenas, bound launches, thread teams), and the median CPU time (all
    threads of the process) per call: on a machine shared with other jobs the CPU time of a
    1-thread run is the steadiest measure (wall time includes waiting for a core)."""
    for _ in range(3):
        fn()
    ts, cs = [], []
    for _ in range(reps):
        c = time.process_time()
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
        cs.append(time.process_time() - c)
    return {"min_ms": 1e3 * min(ts), "med_ms": 1e3 * float(np.median(ts)),
            "cpu_ms": 1e3 * float(np.median(cs))}


def _set_threads() -> None:
    n = int(os.environ.get("MNNJIT_BENCH_THREADS", "0") or 0)
    if n:
        import numba
        from mnnjit.expr._config import _apply_threads
        numba.set_num_threads(n)
        _apply_threads(n)


def kernel_bench(reps: int) -> List[dict]:
    """fp16 vs fp32 storage of the same kernels, and quantized GEMM strategies."""
    from mnnjit.backends.cpu import cnn_steps as K
    from mnnjit.backends.cpu.quant import DenseRows, QuantRows, gemm_dynamic_int8
    rng = np.random.default_rng(0)
    rows = []

    def pair(name, make, fn):
        res = {}
        for dt in (np.float32, np.float16):
            args = make(dt)
            res[np.dtype(dt).name] = timeit(lambda: fn(*args), reps)
        rows.append({"kernel": name, **{k: round(v["min_ms"], 3) for k, v in
                                         [("fp32_min_ms", res["float32"]),
                                          ("fp16_min_ms", res["float16"])]},
                     "fp32_med_ms": round(res["float32"]["med_ms"], 3),
                     "fp16_med_ms": round(res["float16"]["med_ms"], 3),
                     "fp32_cpu_ms": round(res["float32"]["cpu_ms"], 3),
                     "fp16_cpu_ms": round(res["float16"]["cpu_ms"], 3),
                     "speedup_min": round(res["float32"]["min_ms"] / res["float16"]["min_ms"], 2)})

    big = rng.standard_normal(16 << 20).astype(np.float32)
    pair("relu6(x) 16M", lambda dt: (big.astype(dt),), lambda x: K.activation(x, "relu6"))
    pair("add(a,b) 16M", lambda dt: (big.astype(dt), big.astype(dt)), lambda a, b: K.add(a, b))
    x96 = rng.standard_normal((1, 96, 112, 112)).astype(np.float32)
    wdw = rng.standard_normal((96, 9)).astype(np.float32)
    pair("depthwise 3x3 s1 96x112x112", lambda dt: (x96.astype(dt),),
         lambda x: K.depthwise_conv2d(x, wdw, None, (3, 3), (1, 1), (1, 1, 1, 1), act="relu6"))
    pair("depthwise 3x3 s2 96x112x112", lambda dt: (x96.astype(dt),),
         lambda x: K.depthwise_conv2d(x, wdw, None, (3, 3), (2, 2), (1, 1, 1, 1), act="relu6"))
    x16 = rng.standard_normal((1, 16, 112, 112)).astype(np.float32)
    w1 = DenseRows(rng.standard_normal((96, 16)).astype(np.float32))
    pair("conv 1x1 16->96 @112", lambda dt: (x16.astype(dt),),
         lambda x: K.conv2d(x, w1, None, (1, 1), act="relu6"))
    x3 = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    w3 = DenseRows(rng.standard_normal((32, 27)).astype(np.float32))
    pair("conv 3x3 s2 3->32 @224", lambda dt: (x3.astype(dt),),
         lambda x: K.conv2d(x, w3, None, (3, 3), (2, 2), (1, 1, 1, 1), act="relu6"))
    x64 = rng.standard_normal((1, 64, 56, 56)).astype(np.float32)
    w64 = DenseRows(rng.standard_normal((64, 576)).astype(np.float32))
    pair("conv 3x3 64->64 @56", lambda dt: (x64.astype(dt),),
         lambda x: K.conv2d(x, w64, None, (3, 3), (1, 1), (1, 1, 1, 1)))

    # quantized weights: GEMM strategies at the DESIGN shape and a classifier-like shape
    for (O, Kd, N) in [(64, 576, 3136), (1280, 320, 49), (1000, 1280, 1)]:
        w = rng.standard_normal((O, Kd)).astype(np.float32)
        scale = np.abs(w).max(axis=1) / 127
        codes = np.rint(w / scale[:, None]).astype(np.int8)
        q = QuantRows(codes, scale, np.zeros(O, np.float32), (O, Kd), Kd)
        d = DenseRows(q.dense())
        b = rng.standard_normal((Kd, N)).astype(np.float32)
        x4 = b.reshape(1, Kd, N, 1)
        r = {"gemm": f"{O}x{Kd} @ {Kd}x{N}",
             "fp32_numpy_matmul_ms": timeit(lambda: d.matmul(b), reps)["min_ms"],
             "q8_dequant_block_sgemm_ms": timeit(lambda: q.matmul(b), reps)["min_ms"],
             "q8_dynamic_int8_ms": timeit(lambda: gemm_dynamic_int8(q, b), reps)["min_ms"],
             "conv1x1_fp32_ms": timeit(lambda: K.conv2d(x4, d, None, (1, 1)), reps)["min_ms"],
             "conv1x1_q8_ms": timeit(lambda: K.conv2d(x4, q, None, (1, 1)), reps)["min_ms"],
             "weight_bytes_fp32": d.nbytes, "weight_bytes_q8": q.nbytes}
        rows.append({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()})
    return rows


#: the transformer block of the model table: d_model, heads, sequence length, feed-forward width
TRANSFORMER = dict(d=256, heads=4, seq=128, ff=1024)


def _model_files(model: str, workdir: Path) -> tuple:
    """(.mnn path, input array, float reference output or None, input name, output name) of a
    benchmark model: the shared MobileNetV2 fixtures, or ResNet-18 / a transformer encoder block
    built by the tests' fixture helpers and converted by real MNN's converter (``_wq8``: with
    8-bit weight quantization)."""
    if model.startswith("mobilenetv2"):
        data = np.load(MODELS / f"{model}.npz")
        return str(MODELS / f"{model}.mnn"), data["in0_x"], data["out0_logits"], "x", "logits"
    workdir.mkdir(parents=True, exist_ok=True)
    sys.path[:0] = [str(ROOT / "tests" / "models"), str(ROOT / "tests")]
    from mnnjit_models_fixtures import convert, resnet18_onnx, transformer_onnx
    base = model[:-4] if model.endswith("_wq8") else model
    onnx_path = workdir / f"{base}.onnx"
    mnn_path = workdir / f"{model}.mnn"
    if base == "resnet18":
        if not onnx_path.exists():
            resnet18_onnx(str(onnx_path), width=64, size=224, classes=1000, seed=0)
        shape, names = (1, 3, 224, 224), ("x", "logits")
    elif base == "transformer":
        if not onnx_path.exists():
            transformer_onnx(str(onnx_path), **TRANSFORMER)
        shape, names = (1, TRANSFORMER["seq"], TRANSFORMER["d"]), ("x", "y")
    else:
        raise ValueError(f"unknown benchmark model {model!r}")
    if not mnn_path.exists():
        flags = ("--weightQuantBits", "8") if model.endswith("_wq8") else ()
        convert(str(onnx_path), str(mnn_path), *flags)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    return (str(mnn_path), x, None) + names


def _load(model: str, p: int, m: int, threads: int):
    """(module, input Var, float reference or None) of a benchmark model in one mode."""
    import mnnjit.expr as F
    import mnnjit.nn as nn
    path, x, ref, iname, oname = _model_files(
        model, Path(os.environ.get("MNNJIT_BENCH_WORKDIR", "/tmp/mnnjit-bench")))
    rt = nn.create_runtime_manager(({"precision": p, "memory": m, "numThread": threads},))
    mod = nn.load_module_from_file(path, [iname], [oname], runtime_manager=rt)
    return mod, F.const(x, list(x.shape), F.NCHW), ref


def _choices(plan) -> list:
    """The plan's per-layer storage / compute / weight choices (kernel-step plans), else []."""
    if not hasattr(plan, "steps"):
        return []
    from mnnjit.backends.cpu.weights import plan_choices
    return [list(c) for c in plan_choices(plan)]


def _weight_bytes(plan) -> object:
    """Weight bytes a plan holds: a kernel-step plan's count, else (a plan over graph nodes: the
    transformer's fp32 ExecutionPlan) the constants of 64 values or more it computes from."""
    if hasattr(plan, "weight_nbytes"):
        return plan.weight_nbytes
    outs = getattr(plan, "outputs", None)
    if not outs:
        return None
    from mnnjit.graph import topo_order
    return sum(n.value.nbytes for n in topo_order(list(outs), stop_at_values=False)
               if n.op == "const" and n.value is not None and n.value.size >= 64)


def model_child(model: str, p: int, m: int, reps: int, impl: str = "runner") -> dict:
    """Run in a fresh process: one model in one mode through ``mnnjit.nn`` (the model runner:
    every mode, fp32 included, runs the same kernel-step plan, NetPlan, for CNNs)."""
    import mnnjit.backends.cpu.cnn_steps  # noqa: F401  (numba, llvm loaded before the baseline)
    rss0 = vm_hwm_mb()
    threads = int(os.environ.get("MNNJIT_BENCH_THREADS", "0") or 0) or 2
    mod, xv, ref = _load(model, p, m, threads)
    t0 = time.perf_counter()
    y = np.asarray(mod.forward(xv).read())
    first = time.perf_counter() - t0
    rss_loaded = vm_hwm_mb()
    t = timeit(lambda: mod.forward(xv).read(), reps)
    plan = mod._last_plan
    return {"model": model, "precision": p, "memory": m, "impl": f"mnnjit-{impl}", **t,
            "plan": type(plan).__name__,
            "first_call_s": round(first, 2), "peak_rss_mb": vm_hwm_mb(),
            "rss_growth_mb": vm_hwm_mb() - rss0, "rss_after_first_mb": rss_loaded - rss0,
            "weight_mb": None if _weight_bytes(plan) is None else _weight_bytes(plan) / 2 ** 20,
            "act_mb": (plan.activation_nbytes / 2 ** 20)
            if hasattr(plan, "activation_nbytes") else None,
            "max_abs_err": None if ref is None else float(np.abs(y.reshape(ref.shape) - ref).max())}


def layers_child(model: str, p: int, m: int, reps: int) -> dict:
    """Run in a fresh process: per-step times of a model's kernel-step plan in one mode
    (:meth:`NetPlan.profile`: each step repeated on one forward's values; the median of
    ``reps`` rounds of each step's best of 5) and the plan's per-layer choices."""
    threads = int(os.environ.get("MNNJIT_BENCH_THREADS", "0") or 0) or 2
    mod, xv, _ = _load(model, p, m, threads)
    for _ in range(3):
        mod.forward(xv).read()
    plan = mod._last_plan
    if not hasattr(plan, "profile"):
        return {"model": model, "precision": p, "memory": m, "steps": [], "choices": []}
    x = np.asarray(xv.read(), np.float32)
    runs = [plan.profile([x], repeat=5) for _ in range(max(1, reps))]
    steps = [[k, d, round(1e3 * float(np.median([r[i][2] for r in runs])), 4)]
             for i, (k, d, _) in enumerate(runs[0])]
    return {"model": model, "precision": p, "memory": m, "steps": steps,
            "choices": _choices(plan)}


def mnn_child(model: str, p: int, m: int, reps: int) -> dict:
    """Run in a fresh process: real MNN, same model and mode."""
    import MNN
    path, x, ref, iname, oname = _model_files(
        model, Path(os.environ.get("MNNJIT_BENCH_WORKDIR", "/tmp/mnnjit-bench")))
    rss0 = vm_hwm_mb()
    threads = int(os.environ.get("MNNJIT_BENCH_THREADS", "0") or 0) or 2
    rt = MNN.nn.create_runtime_manager(({"backend": 0, "precision": p, "memory": m,
                                         "numThread": threads},))
    net = MNN.nn.load_module_from_file(path, [iname], [oname], runtime_manager=rt)
    inp = MNN.expr.const(x, list(x.shape), MNN.expr.NCHW)

    def run():
        return np.array(net.forward(inp).read())
    y = run()
    t = timeit(run, reps)
    return {"model": model, "precision": p, "memory": m, "impl": "MNN", **t,
            "peak_rss_mb": vm_hwm_mb(),
            "rss_growth_mb": vm_hwm_mb() - rss0,
            "max_abs_err": None if ref is None else float(np.abs(y.reshape(ref.shape) - ref).max())}


def run_child(kind: str, model: str, p: int, m: int, reps: int, cold: bool = False) -> dict:
    """Spawn this script in child mode and parse its JSON line (``cold``: on an empty kernel
    cache, removed afterwards)."""
    cmd = [sys.executable, __file__, "--child", kind, model, str(p), str(m), str(reps)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), MNNJIT_COMPILE="sync")
    tmp = None
    if cold or os.environ.get("MNNJIT_BENCH_COLD"):
        import tempfile
        tmp = tempfile.mkdtemp(prefix="mnnjit-cold-")
        env["MNNJIT_CACHE_DIR"] = tmp
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    finally:
        if tmp is not None:
            import shutil
            shutil.rmtree(tmp, ignore_errors=True)
    for line in out.stdout.splitlines()[::-1]:
        if line.startswith("{"):
            return json.loads(line)
    return {"model": model, "precision": p, "memory": m, "impl": kind,
            "error": (out.stderr or out.stdout)[-400:]}


#: (label, model suffix, precision, memory) of the model-level modes
MODEL_MODES = [("fp32", "", 0, 0), ("precision_low", "", 2, 0), ("wq8_memory_normal", "_wq8", 0, 0),
               ("memory_low", "_wq8", 0, 2)]


def model_table(models: List[str], threads: List[int], rounds: int, reps: int,
                with_mnn: bool) -> List[dict]:
    """Every (model, threads) point: its modes one process each, alternating, ``rounds`` times;
    one summary row per mode (medians over rounds, speed ratio to fp32)."""
    rows = []
    for model in models:
        for th in threads:
            os.environ["MNNJIT_BENCH_THREADS"] = str(th)
            runs: Dict[str, list] = {label: [] for label, *_ in MODEL_MODES}
            mnn: Dict[str, list] = {label: [] for label, *_ in MODEL_MODES}
            for _ in range(rounds):
                for label, suffix, p, m in MODEL_MODES:
                    runs[label].append(run_child("runner", model + suffix, p, m, reps))
                    if with_mnn:
                        mnn[label].append(run_child("MNN", model + suffix, p, m, reps))
            base = float(np.median([r["med_ms"] for r in runs["fp32"] if "med_ms" in r] or [np.nan]))
            for label, *_ in MODEL_MODES:
                ok = [r for r in runs[label] if "med_ms" in r]
                if not ok:
                    rows.append({"model": model, "threads": th, "mode": label,
                                 "error": runs[label][0].get("error")})
                    continue
                med = float(np.median([r["med_ms"] for r in ok]))
                row = {"model": model, "threads": th, "mode": label, "med_ms": round(med, 3),
                       "min_ms": round(float(np.median([r["min_ms"] for r in ok])), 3),
                       "speed_vs_fp32": round(base / med, 3),
                       "act_mb": None if ok[0]["act_mb"] is None else round(ok[0]["act_mb"], 3),
                       "weight_mb": None if ok[0]["weight_mb"] is None
                       else round(ok[0]["weight_mb"], 3),
                       "cpu_ms": round(float(np.median([r["cpu_ms"] for r in ok])), 3),
                       "peak_rss_mb": round(float(np.median([r["peak_rss_mb"] for r in ok])), 1),
                       "plan": ok[0].get("plan"),
                       "first_call_s": float(np.median([r["first_call_s"] for r in ok])),
                       "max_abs_err": ok[0]["max_abs_err"]}
                mk = [r for r in mnn[label] if "med_ms" in r]
                if mk:
                    row["mnn_med_ms"] = round(float(np.median([r["med_ms"] for r in mk])), 3)
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def cold_table(models: List[str]) -> List[dict]:
    """Cold-start compile time per model and mode: one process each (1 thread) on an empty
    kernel cache; the first forward's time, which compiles every kernel the plan uses."""
    os.environ["MNNJIT_BENCH_THREADS"] = "1"
    rows = []
    for model in models:
        for label, suffix, p, m in MODEL_MODES:
            if label == "wq8_memory_normal":
                continue
            r = run_child("runner", model + suffix, p, m, 1, cold=True)
            row = {"model": model, "mode": label, "cold_first_forward_s": r.get("first_call_s"),
                   **({"error": r["error"]} if "error" in r else {})}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def layer_table(models: List[str], threads: int, reps: int) -> List[dict]:
    """Per-step times of each model's plan in fp32, precision low and memory low (one process
    per mode), joined by step, with each plan's per-layer choices."""
    os.environ["MNNJIT_BENCH_THREADS"] = str(threads)
    out = []
    for model in models:
        res = {label: run_child("layers", model + suffix, p, m, reps)
               for label, suffix, p, m in MODEL_MODES if label != "wq8_memory_normal"}
        if any("error" in r for r in res.values()):
            out.append({"model": model, "threads": threads,
                        "error": {k: r.get("error") for k, r in res.items()}})
            continue
        base = res["fp32"]["steps"]
        rows = []
        for i, (kind, desc, t) in enumerate(base):
            row = {"step": i, "kind": kind, "layer": desc, "fp32_ms": t}
            for label in ("precision_low", "memory_low"):
                st = res[label]["steps"]
                if i < len(st) and st[i][0] == kind:
                    row[label + "_ms"] = st[i][2]
            rows.append(row)
            print(json.dumps({"model": model, **row}), flush=True)
        out.append({"model": model, "threads": threads, "steps": rows,
                    "choices": {k: r["choices"] for k, r in res.items()},
                    "sum_ms": {k: round(sum(s[2] for s in r["steps"]), 3) for k, r in res.items()}})
    return out


def main() -> None:
    """Print kernel and model tables (JSON lines) and write the JSON results."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "precision_modes.json"),
                    help="write all results here")
    ap.add_argument("--kernels", action="store_true", help="also the kernel-level table")
    ap.add_argument("--no-models", action="store_true", help="skip the model table")
    ap.add_argument("--threads", type=int, default=0,
                    help="compute threads (Numba and OpenBLAS; MNN numThread); 0 = all")
    ap.add_argument("--models", nargs="+", default=["mobilenetv2", "resnet18", "transformer"],
                    help="model-level table: mobilenetv2, resnet18, transformer")
    ap.add_argument("--thread-list", nargs="+", type=int, default=[1, 2],
                    help="model-level table: thread counts")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds of the modes")
    ap.add_argument("--mnn", action="store_true", help="also real MNN in each mode")
    ap.add_argument("--cold", action="store_true",
                    help="cold-start compile time: each model and mode once on an empty cache")
    ap.add_argument("--layers", type=int, default=0, metavar="THREADS",
                    help="per-layer table of the CNNs at this many threads")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.threads:
        os.environ["MNNJIT_BENCH_THREADS"] = str(a.threads)
    if a.child:
        _set_threads()
        kind, model, p, m, reps = a.child
        if kind == "MNN":
            print(json.dumps(mnn_child(model, int(p), int(m), int(reps))))
        elif kind == "layers":
            print(json.dumps(layers_child(model, int(p), int(m), int(reps))))
        else:
            print(json.dumps(model_child(model, int(p), int(m), int(reps), kind)))
        return
    reps = 10 if a.quick else 30
    results: Dict[str, object] = {
        "machine": {"cpus": os.cpu_count(), "load_avg_start": os.getloadavg()}}
    if a.kernels:
        _set_threads()
        results["kernels"] = kernel_bench(reps)
        for r in results["kernels"]:
            print(json.dumps(r))
    if a.threads:
        a.thread_list = [a.threads]
    if not a.no_models:
        results["models"] = model_table(a.models, a.thread_list, 1 if a.quick else a.rounds,
                                        reps, a.mnn)
    if a.layers:
        results["layers"] = layer_table([m for m in a.models if m != "transformer"], a.layers,
                                        3 if a.quick else 7)
    if a.cold:
        results["cold"] = cold_table(a.models)
    results["machine"]["load_avg_end"] = os.getloadavg()
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
