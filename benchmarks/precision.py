"""Precision/memory modes on the CPU: kernel-level and model-level numbers.

Kernel level (one process): fp16-storage vs fp32 versions of the same Numba kernels
(elementwise, depthwise conv, 1x1 and 3x3 conv); quantized GEMM strategies (dequantize a row
block into scratch feeding BLAS vs dynamic int8 activations with int8 x int8 -> int32) vs fp32.

Model level (one fresh process per mode, for peak RSS): MobileNetV2 (float and 8-bit weight
quantized) through the precision kernels (tests/precision/precision_convnet.py, the same
kernels the model runner calls) per (precision, memory) mode: latency, peak RSS, RSS growth
over the loaded process, weight bytes, activation bytes; and real MNN 3.6.1 in the same mode
(``create_runtime_manager(({'precision': p, 'memory': m, ...},))``) when installed.

The machine is shared: latencies are the MINIMUM and the median over repeated runs, modes
interleaved. Run: PYTHONPATH=. python benchmarks/precision.py [--quick] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODELS = Path(os.environ.get("MNNJIT_SHARED", ROOT.parent / "shared")) / "models"
MODES = [(0, 0), (2, 0), (0, 2), (2, 2)]


def vm_hwm_mb() -> float:
    """Peak resident set of THIS process image (VmHWM; ru_maxrss survives exec on Linux and
    would report the parent's peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return vm_hwm_mb()


def timeit(fn: Callable[[], object], reps: int) -> Dict[str, float]:
    """min and median wall time in ms after one warm-up call, and the median CPU time (all
    threads of the process) per call: on a machine shared with other jobs the CPU time of a
    1-thread run is the steadiest measure (wall time includes waiting for a core)."""
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


def model_child(model: str, p: int, m: int, reps: int, impl: str = "runner") -> dict:
    """Run in a fresh process: one model in one mode through ``mnnjit.nn`` (the model runner:
    every mode, fp32 included, runs the same kernel-step plan, NetPlan)."""
    import mnnjit.expr as F
    import mnnjit.nn as nn
    data = np.load(MODELS / f"{model}.npz")
    x, ref = data["in0_x"], data["out0_logits"]
    import mnnjit.backends.cpu.cnn_steps  # noqa: F401  (numba, llvm loaded before baseline)
    rss0 = vm_hwm_mb()
    threads = int(os.environ.get("MNNJIT_BENCH_THREADS", "0") or 0) or 2
    rt = nn.create_runtime_manager(({"precision": p, "memory": m, "numThread": threads},))
    mod = nn.load_module_from_file(str(MODELS / f"{model}.mnn"), ["x"], ["logits"],
                                   runtime_manager=rt)
    xv = F.const(x, list(x.shape), F.NCHW)
    t0 = time.perf_counter()
    y = np.asarray(mod.forward(xv).read())
    first = time.perf_counter() - t0
    rss_loaded = vm_hwm_mb()
    t = timeit(lambda: mod.forward(xv).read(), reps)
    plan = mod._last_plan
    return {"model": model, "precision": p, "memory": m, "impl": f"mnnjit-{impl}", **t,
            "first_call_s": round(first, 2), "peak_rss_mb": vm_hwm_mb(),
            "rss_growth_mb": vm_hwm_mb() - rss0, "rss_after_first_mb": rss_loaded - rss0,
            "weight_mb": (plan.weight_nbytes / 2 ** 20) if hasattr(plan, "weight_nbytes") else None,
            "act_mb": (plan.activation_nbytes / 2 ** 20)
            if hasattr(plan, "activation_nbytes") else None,
            "max_abs_err": float(np.abs(y.reshape(ref.shape) - ref).max())}


def mnn_child(model: str, p: int, m: int, reps: int) -> dict:
    """Run in a fresh process: real MNN, same model and mode."""
    import MNN
    data = np.load(MODELS / f"{model}.npz")
    x, ref = data["in0_x"], data["out0_logits"]
    rss0 = vm_hwm_mb()
    threads = int(os.environ.get("MNNJIT_BENCH_THREADS", "0") or 0) or 2
    rt = MNN.nn.create_runtime_manager(({"backend": 0, "precision": p, "memory": m,
                                         "numThread": threads},))
    net = MNN.nn.load_module_from_file(str(MODELS / f"{model}.mnn"), ["x"], ["logits"],
                                       runtime_manager=rt)
    inp = MNN.expr.const(x, list(x.shape), MNN.expr.NCHW)

    def run():
        return np.array(net.forward(inp).read())
    y = run()
    t = timeit(run, reps)
    return {"model": model, "precision": p, "memory": m, "impl": "MNN", **t,
            "peak_rss_mb": vm_hwm_mb(),
            "rss_growth_mb": vm_hwm_mb() - rss0,
            "max_abs_err": float(np.abs(y.reshape(ref.shape) - ref).max())}


def run_child(kind: str, model: str, p: int, m: int, reps: int) -> dict:
    """Spawn this script in child mode and parse its JSON line."""
    cmd = [sys.executable, __file__, "--child", kind, model, str(p), str(m), str(reps)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    for line in out.stdout.splitlines()[::-1]:
        if line.startswith("{"):
            return json.loads(line)
    return {"model": model, "precision": p, "memory": m, "impl": kind,
            "error": (out.stderr or out.stdout)[-400:]}


def main() -> None:
    """Print kernel and model tables (markdown) and optionally write JSON."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--json", help="write all results here")
    ap.add_argument("--no-kernels", action="store_true", help="skip the kernel-level table")
    ap.add_argument("--threads", type=int, default=0,
                    help="compute threads (Numba and OpenBLAS; MNN numThread); 0 = all")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.threads:
        os.environ["MNNJIT_BENCH_THREADS"] = str(a.threads)
    if a.child:
        _set_threads()
        kind, model, p, m, reps = a.child
        if kind == "MNN":
            print(json.dumps(mnn_child(model, int(p), int(m), int(reps))))
        else:
            print(json.dumps(model_child(model, int(p), int(m), int(reps), kind)))
        return
    reps = 10 if a.quick else 30
    results: Dict[str, list] = {"kernels": [], "models": []}
    if not a.no_kernels:
        _set_threads()
        results["kernels"] = kernel_bench(reps)
        for r in results["kernels"]:
            print(json.dumps(r))
    for model in ("mobilenetv2", "mobilenetv2_wq8"):
        for p, m in MODES:
            for kind in ("runner", "MNN"):
                r = run_child(kind, model, p, m, reps)
                results["models"].append(r)
                print(json.dumps({k: (float(f"{v:.4g}") if isinstance(v, float) else v)
                                  for k, v in r.items()}))
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
