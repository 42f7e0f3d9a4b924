"""Fused chains on 16M float32 elements: mnnjit (compiled, N threads) vs numpy.

Cases: ``((x*2+1)*y - z).sum()``, a row softmax of a (4096, 4096) matrix, ``(img - mean) * scale`` on a
(1, 3, 2304, 2304) NCHW image with per-channel mean/scale. Prints one line per case with the best of
``--repeat`` runs after a warm-up call (compile time is reported separately by compiler_compile_time.py).

    PYTHONPATH=. python benchmarks/fused_chains.py [--threads 2] [--repeat 5] [--backend opencl]

``--backend opencl`` runs mnnjit's side on the OpenCL backend (fused groups as OpenCL kernels; the
inputs stay uploaded between calls, each result is downloaded).
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as onp


def best(fn, repeat: int) -> float:
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--backend", default="cpu", choices=["cpu", "opencl"], help="the backend mnnjit runs on")
    args = ap.parse_args()
    if args.backend != "cpu":
        from mnnjit.backends import registry
        registry.set_default(args.backend)
        print(registry.current().describe())

    import mnnjit.numpy as mp
    from mnnjit import compiler
    compiler.set_num_threads(args.threads)

    rng = onp.random.default_rng(0)
    n = 1 << 24
    x, y, z = (rng.random(n, dtype=onp.float32) for _ in range(3))
    X, Y, Z = (mp.array(a) for a in (x, y, z))

    m = rng.random((4096, 4096), dtype=onp.float32)
    M = mp.array(m)
    img = rng.random((1, 3, 2304, 2304), dtype=onp.float32) * 255
    mean = onp.array([103.94, 116.78, 123.68], onp.float32).reshape(1, 3, 1, 1)
    scale = onp.array([0.017, 0.017, 0.017], onp.float32).reshape(1, 3, 1, 1)
    IMG, MEAN, SCALE = mp.array(img), mp.array(mean), mp.array(scale)

    def np_softmax():
        e = onp.exp(m - m.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def mp_softmax():
        e = mp.exp(M - M.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)).read_view()

    cases = [
        ("((x*2+1)*y - z).sum()", lambda: ((x * 2 + 1) * y - z).sum(), lambda: ((X * 2 + 1) * Y - Z).sum()),
        ("softmax(4096x4096, axis=1)", np_softmax, mp_softmax),
        ("(img - mean) * scale", lambda: (img - mean) * scale, lambda: ((IMG - MEAN) * SCALE).read_view()),
    ]
    # correctness check before timing
    r_np, r_mp = cases[0][1](), cases[0][2]()
    assert math.isclose(float(r_np), float(r_mp), rel_tol=1e-3), (r_np, r_mp)
    onp.testing.assert_allclose(mp_softmax(), np_softmax(), rtol=1e-4, atol=1e-7)
    ratios = []
    print(f"threads={compiler.get_num_threads()}")
    for name, f_np, f_mp in cases:
        t_np, t_mp = best(f_np, args.repeat), best(f_mp, args.repeat)
        ratios.append(t_np / t_mp)
        print(f"{name:30s} numpy {t_np * 1e3:8.2f} ms   mnnjit {t_mp * 1e3:8.2f} ms   speedup {t_np / t_mp:5.2f}x")
    print(f"geometric mean speedup {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}x")
    print(dict(compiler.counters))


if __name__ == "__main__":
    main()
