"""The classifier step inside real forwards: the ``fc`` GEMV step against numpy's reference (one
OpenBLAS sgemv, what the plan ran before), alternating in one process.

    PYTHONPATH=. python benchmarks/classifier.py [--model PATH] [--threads 1 2] [--precision low]

For each thread count the model is loaded once; rounds alternate the plan's own ``fc`` step and a
reference step swapped in its place, every round runs whole forwards (so the weights come from
wherever the rest of the forward left them: mostly DRAM) and times that step only. Prints medians
and minimums in ms. Run it under the bench lock: ``flock /tmp/mnnjit-bench.lock ...``.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

import mnnjit as MNN


def _reference_call(net, k: int):
    """The classifier as the plan's reference steps ran it: the flattening reshape the ``fc``
    step reads through, then numpy's ``matmul_ex``."""
    from mnnjit.backends.cpu.kernel_steps import _f32
    from mnnjit.ops import registry
    step = net.steps[k]
    node = net.order[step[-1]]
    ref = registry.get("matmul_ex").ref
    xi = next(i for i, v in enumerate(node.inputs) if v.op != "const")
    consts = [v.value if v.op == "const" else None for v in node.inputs]
    x_slot, x_shape = step[2], tuple(node.inputs[xi].shape)
    out, shape = step[-1], tuple(node.shape)
    store = np.float16 if net.fp16 else np.float32

    def call(vals):
        xs = list(consts)
        xs[xi] = _f32(vals[x_slot]).reshape(x_shape)
        vals[out] = np.asarray(ref(xs, node.attrs), np.float32).reshape(shape).astype(store)
    return call


def measure(path: str, threads: int, precision: str, rounds: int = 8, per_round: int = 12) -> dict:
    """Median and min seconds of the classifier step: {"fc": (med, min), "numpy": (med, min)}."""
    from mnnjit.backends.cpu.runtime.blas import single_threaded_blas
    cfg = {"numThread": threads, "precision": precision}
    m = MNN.nn.load_module_from_file(path, ["x"], [], runtime_manager=MNN.nn.create_runtime_manager(cfg))
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    m.forward(MNN.expr.const(x, list(x.shape)))
    net = m._last_plan
    k = next(t for t, st in enumerate(net.steps) if st[0] == "fc")
    calls = {"fc": net._calls[k], "numpy": _reference_call(net, k)}
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            net._calls[k] = fn
            for _ in range(per_round):
                vals = net._feed([x])
                with np.errstate(all="ignore"), single_threaded_blas():
                    for t, c in enumerate(net._calls):
                        if t == k:
                            t0 = time.perf_counter()
                            c(vals)
                            times[name].append(time.perf_counter() - t0)
                        else:
                            c(vals)
    net._calls[k] = calls["fc"]
    return {name: (float(np.median(v)), float(np.min(v))) for name, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(os.environ.get("MNNJIT_SHARED") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "shared"), "models",
        "mobilenetv2.mnn"))
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--precision", default="normal")
    args = ap.parse_args()
    for t in args.threads:
        r = measure(args.model, t, args.precision)
        cells = "  ".join(f"{k} {v[0] * 1e3:.3f} ms (min {v[1] * 1e3:.3f})" for k, v in r.items())
        print(f"{args.model.split('/')[-1]} precision={args.precision} threads={t}: {cells}")


if __name__ == "__main__":
    main()
