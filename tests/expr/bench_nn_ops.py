"""Benchmark of mnnjit's NN ops against real MNN (run by hand; not collected by pytest).

    PYTHONPATH=. python tests/expr/bench_nn_ops.py
"""
from __future__ import annotations

import time

import numpy as np


def best(fn, n=7):
    fn()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts) * 1e3


def main():
    import MNN.expr as MF

    import mnnjit.expr as JF
    rng = np.random.default_rng(0)
    cases = [("conv 3x3 64->64 112x112", (1, 64, 112, 112), (64, 64, 3, 3), 1, 1),
             ("conv 1x1 64->128 112x112", (1, 64, 112, 112), (128, 64, 1, 1), 1, 0),
             ("conv 3x3 s2 3->32 224x224", (1, 3, 224, 224), (32, 3, 3, 3), 1, 1),
             ("dwconv 3x3 144 56x56", (1, 144, 56, 56), (144, 1, 3, 3), 144, 1),
             ("conv 3x3 256->256 14x14", (1, 256, 14, 14), (256, 256, 3, 3), 1, 1)]
    print(f"{'case':32s} {'mnnjit ms':>10s} {'MNN ms':>10s} {'GFLOP/s':>8s}")
    for name, xs, ws, g, p in cases:
        x = rng.standard_normal(xs).astype(np.float32)
        w = rng.standard_normal(ws).astype(np.float32)
        b = rng.standard_normal(ws[0]).astype(np.float32)
        stride = [2, 2] if "s2" in name else [1, 1]

        def run(F):
            X = F.convert(F.const(x, list(xs)), F.NC4HW4)
            W, Bv = F.const(w, list(ws)), F.const(b, [ws[0]])
            X.read() if F is MF else None

            def go():
                y = F.conv2d(X, W, Bv, stride, [p, p], [1, 1], g, F.CAFFE)
                y.read()
            return go
        tj, tm = best(run(JF)), best(run(MF))
        oh = (xs[2] + 2 * p - ws[2]) // stride[0] + 1
        flops = 2 * ws[0] * ws[1] * ws[2] * ws[3] * oh * oh
        print(f"{name:32s} {tj:10.2f} {tm:10.2f} {flops / tj / 1e6:8.1f}")
    x = rng.standard_normal((1, 64, 112, 112)).astype(np.float32)
    for name, fn in [("max_pool 3x3 s2 64x112x112", lambda F, X: F.max_pool(X, [3, 3], [2, 2], F.CAFFE, [1, 1])),
                     ("avg_pool 2x2 s2 64x112x112", lambda F, X: F.avg_pool(X, [2, 2], [2, 2])),
                     ("resize x2 64x112x112", lambda F, X: F.resize(X, 2.0, 2.0)),
                     ("softmax axis1 64x112x112", lambda F, X: F.softmax(X, 1))]:
        res = []
        for F in (JF, MF):
            X = F.convert(F.const(x, list(x.shape)), F.NC4HW4)
            res.append(best(lambda: fn(F, X).read()))
        print(f"{name:32s} {res[0]:10.2f} {res[1]:10.2f}")


if __name__ == "__main__":
    main()
