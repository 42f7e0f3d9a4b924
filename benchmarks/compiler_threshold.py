"""Measure the compile threshold: from which element count compiled kernels beat the numpy path.

For sizes 2**10 .. 2**22 (float32) it times, best of several runs, (a) one op ``x + y`` and (b) a
4-op chain ``(x * 2 + 1) * y - z``, each evaluated on the reference path (numpy, per op) and on
the compiled path (threshold forced to 0; kernels already compiled), including all per-call overhead
(node building, dispatch, plan lookup), and (c) the chain as one serial kernel (the parallel threshold
kept above the size, the serial threshold forced to 0). Prints the ratio compiled/reference per size and
the smallest size from which each compiled path wins.

    PYTHONPATH=. python benchmarks/compiler_threshold.py [--threads 2]
"""
from __future__ import annotations

import argparse
import time

import numpy as onp


def best(fn, n_inner: int, repeat: int = 15) -> float:
    fn()
    t_best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(n_inner):
            fn()
        t_best = min(t_best, (time.perf_counter() - t) / n_inner)
    return t_best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import mnnjit.numpy as mp
    from mnnjit import compiler, runtime
    from mnnjit.backends import reference
    compiler.set_num_threads(args.threads)
    rng = onp.random.default_rng(0)
    wins = {"op": None, "chain": None, "serial": None}
    print(f"{'size':>9s} {'op ref us':>10s} {'op jit us':>10s} {'ratio':>6s} {'chain ref':>10s} {'chain jit':>10s} "
          f"{'ratio':>6s} {'serial':>10s} {'ratio':>6s}")
    for p in range(10, 23):
        n = 1 << p
        X, Y, Z = (mp.array(rng.random(n, dtype=onp.float32)) for _ in range(3))
        inner = max(1, (1 << 20) // n)
        cases = {"op": lambda: (X + Y).read_view(), "chain": lambda: ((X * 2 + 1) * Y - Z).read_view()}
        row = [f"{n:9d}"]
        for name, fn in cases.items():
            prev = runtime.set_executor(reference.evaluate)
            t_ref = best(fn, inner)
            runtime.set_executor(prev)
            compiler.set_threshold(0)
            t_jit = best(fn, inner)
            compiler.set_threshold(None)
            row += [f"{t_ref * 1e6:10.1f}", f"{t_jit * 1e6:10.1f}", f"{t_jit / t_ref:6.2f}"]
            if t_jit < t_ref and wins[name] is None:
                wins[name] = n
            elif t_jit >= t_ref:
                wins[name] = None
            if name == "chain":
                compiler.set_threshold(1 << 40)
                compiler.set_serial_threshold(0)
                t_ser = best(fn, inner)
                compiler.set_serial_threshold(None)
                compiler.set_threshold(None)
                row += [f"{t_ser * 1e6:10.1f}", f"{t_ser / t_ref:6.2f}"]
                if t_ser < t_ref and wins["serial"] is None:
                    wins["serial"] = n
                elif t_ser >= t_ref:
                    wins["serial"] = None
        print(" ".join(row))
    print(f"compiled path wins from: single op {wins['op']}, 4-op chain {wins['chain']}, "
          f"4-op chain serial {wins['serial']} elements")


if __name__ == "__main__":
    main()
