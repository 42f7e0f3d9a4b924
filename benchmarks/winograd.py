"""Winograd 3x3 convolution (mnnjit/backends/cpu/gemm/winograd.py) vs im2col + sgemm.

For every 3x3 stride-1 layer shape of ResNet-18 at 224 and a few VGG / MobileNet-style ones
(N = 1, pads 1, bias + relu), at 1 and 2 Numba threads: F(2,3), F(4,3) (automatic blocking)
and ``fp16_kernels.conv2d`` (im2col + single-threaded OpenBLAS sgemm per thread, the current
float path), float32 storage. Methods alternate within each repetition; the table gives the
minimum (and median) milliseconds and the effective GFLOP/s ``2*O*C*9*OH*OW / t_min`` (the direct
convolution's flops, so Winograd's number can exceed the machine's sgemm peak). Minimum, not
median: the 2-core machine is shared, other processes inflate medians by up to 3x. Last line per
thread count: the sum over ResNet-18's thirteen 3x3 stride-1 convolutions (4 + 3 + 3 + 3).

Run under the shared lock: ``flock /tmp/mnnjit-bench.lock python benchmarks/winograd.py``
(``--runs N``, ``--json out.json``, ``--quick`` for the ResNet shapes only).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numba  # noqa: E402

from mnnjit.backends.cpu import cnn_steps as fk  # noqa: E402
from mnnjit.backends.cpu.gemm import winograd as wg  # noqa: E402

# (C, O, H=W, label)
RESNET = [(64, 64, 56, "ResNet-18 layer1"), (128, 128, 28, "ResNet-18 layer2"),
          (256, 256, 14, "ResNet-18 layer3"), (512, 512, 7, "ResNet-18 layer4")]
OTHERS = [(3, 64, 224, "VGG conv1_1"), (64, 128, 112, "VGG conv2_1"),
          (128, 128, 56, "VGG-like"), (512, 512, 14, "VGG conv5"),
          (3, 32, 224, "stem 3->32"), (16, 16, 112, "MobileNet-like 16@112"),
          (32, 64, 75, "odd size 75"), (96, 96, 19, "odd size 19")]


def _time_alternating(fns: Dict[str, Callable[[], object]], runs: int) -> Dict[str, List[float]]:
    """Per method, ``runs`` wall-clock times (s), the methods alternating in every round."""
    for f in fns.values():
        f()                                         # compile / warm caches
    times: Dict[str, List[float]] = {k: [] for k in fns}
    for _ in range(runs):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return times


def bench_shape(C: int, O: int, S: int, threads: int, runs: int) -> Dict[str, Tuple[float, float]]:
    """{method: (median ms, min ms)} for one layer at ``threads`` Numba threads."""
    numba.set_num_threads(threads)
    rng = np.random.default_rng(C * 1000 + S)
    x = rng.standard_normal((1, C, S, S)).astype(np.float32)
    w = (rng.standard_normal((O, C, 3, 3)) / np.sqrt(9 * C)).astype(np.float32)
    b = rng.standard_normal(O).astype(np.float32)
    w2, w4 = wg.winograd_weights(w, 2), wg.winograd_weights(w, 4)
    wmat = np.ascontiguousarray(w.reshape(O, -1))
    out = np.empty((1, O, S, S), np.float32)
    fns = {
        "im2col": lambda: fk.conv2d(x, wmat, b, (3, 3), pads=(1, 1, 1, 1), act="relu"),
        "F(2,3)": lambda: wg.winograd_conv3x3(x, w2, b, (1, 1, 1, 1), "relu", out=out),
        "F(4,3)": lambda: wg.winograd_conv3x3(x, w4, b, (1, 1, 1, 1), "relu", out=out),
    }
    # about 0.4 s per method, at least 5 rounds
    t0 = time.perf_counter()
    fns["im2col"]()
    est = time.perf_counter() - t0
    n = max(5, min(runs, int(0.4 / max(est, 1e-4))))
    times = _time_alternating(fns, n)
    return {k: (1e3 * float(np.median(v)), 1e3 * float(np.min(v))) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=30, help="max rounds per shape")
    ap.add_argument("--json", type=str, default="", help="write the results here")
    ap.add_argument("--quick", action="store_true", help="ResNet-18 shapes only")
    args = ap.parse_args()
    shapes = RESNET + ([] if args.quick else OTHERS)
    results = []
    print(f"load average {os.getloadavg()[0]:.2f}; ms min (median); GFLOP/s from the min")
    print("| layer | C->O @ HxW | thr | im2col ms | F(2,3) ms | F(4,3) ms | im2col GF/s | "
          "F(2,3) GF/s | F(4,3) GF/s | choose |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for threads in (1, 2):
        resnet = {"im2col": 0.0, "F(2,3)": 0.0, "F(4,3)": 0.0, "choose": 0.0}
        for C, O, S, label in shapes:
            r = bench_shape(C, O, S, threads, args.runs)
            gf = 2 * O * C * 9 * S * S / 1e6
            ms = [r[k] for k in ("im2col", "F(2,3)", "F(4,3)")]
            pick = wg.choose(C, O, S, S, threads)
            print(f"| {label} | {C}->{O} @ {S}x{S} | {threads} | "
                  + " | ".join(f"{b:.2f} ({a:.2f})" for a, b in ms) + " | "
                  + " | ".join(f"{gf / b:.0f}" for _, b in ms) + f" | {pick} |", flush=True)
            results.append(dict(label=label, C=C, O=O, H=S, W=S, threads=threads, choose=pick,
                                ms_median={k: v[0] for k, v in r.items()},
                                ms_min={k: v[1] for k, v in r.items()}))
            if label.startswith("ResNet"):
                k = 4 if S == 56 else 3
                for name, (_, b) in r.items():
                    resnet[name] += k * b
                resnet["choose"] += k * r[{0: "im2col", 2: "F(2,3)", 4: "F(4,3)"}[pick]][1]
        print(f"| ResNet-18, 13 convs | sum | {threads} | {resnet['im2col']:.1f} | "
              f"{resnet['F(2,3)']:.1f} | {resnet['F(4,3)']:.1f} | | | | "
              f"{resnet['choose']:.1f} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
