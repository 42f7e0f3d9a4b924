"""Upstream pymnn's numpy benchmark cases (64,000-element float32 arrays), mnnjit.numpy vs numpy.

The case list follows pymnn's own numpy benchmark (unary math, binary ops, reductions, memory ops;
each call's result is converted to a string, as there). Functions mnnjit.numpy does not provide yet are
listed as missing and left out of the geometric mean. Timing: best of ``--repeat`` loops of
``--loop`` calls each, after a warm-up call. ``--forced-read``: mnnjit results are read with ``read()``
(a new array, as a script does) instead of being printed to a string; numpy's results are used as
they are.

    PYTHONPATH=. python benchmarks/pymnn_numpy_cases.py [--loop 20] [--repeat 5] [--forced-read] [-v]
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as onp

X = {"shape": [64000], "dtype": "float32"}
XI = {"shape": [64000], "dtype": "int32"}
Y4 = {"shape": [4, 16, 10, 100], "dtype": "float32"}
M1024 = {"shape": [1024, 1024], "dtype": "float32"}

# (function names, argument specs, mode); mode 0: one result, 1: result not printed,
# 2: a sequence of results, 3: the argument list passed as one sequence
CASES = [
    (["sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
      "around", "floor", "ceil", "trunc", "exp", "expm1", "exp2", "log", "log2", "log10", "log1p", "sinc",
      "signbit", "positive", "cbrt", "negative", "reciprocal", "sqrt", "square", "sign", "argwhere", "flatnonzero",
      "sort", "argsort", "copy"], [X], 0),
    (["modf"], [X], 2),
    (["greater", "greater_equal", "less", "less_equal", "equal", "not_equal", "multiply", "add", "divide", "power",
      "subtract", "true_divide", "floor_divide", "mod", "maximum", "minimum", "hypot", "logaddexp", "logaddexp2",
      "copysign"], [X, X], 0),
    (["divmod"], [X, X], 2),
    (["ldexp"], [X, 2], 1),
    (["dot", "vdot", "inner", "matmul"], [M1024, M1024], 0),
    (["array_equal", "array_equiv"], [X, X], 1),
    (["bitwise_and", "bitwise_or", "bitwise_xor"], [XI, XI], 0),
    (["where"], [XI, X, X], 0),
    (["prod", "sum", "argmax", "argmin", "cumsum", "cumprod", "nonzero", "count_nonzero", "max", "min", "ptp",
      "mean", "var", "std"], [X], 1),
    (["all", "any"], [XI], 1),
    (["reshape"], [Y4, [10, 64, 100]], 0),
    (["ravel", "transpose", "atleast_1d", "atleast_2d", "atleast_3d", "squeeze"], [Y4], 0),
    (["moveaxis", "rollaxis", "swapaxes"], [Y4, 0, 3], 0),
    (["broadcast_to"], [Y4, [3, 4, 16, 10, 100]], 0),
    (["expand_dims"], [Y4, 0], 0),
    (["concatenate", "stack", "vstack", "hstack", "dstack", "column_stack", "row_stack"], [Y4, Y4], 3),
    (["split", "dsplit", "hsplit", "vsplit"], [Y4, 2], 2),
    (["pad"], [X, 2], 0),
    (["tile", "repeat"], [X, 2], 0),
]


def make_args(specs, mp):
    rng = onp.random.default_rng(0)
    np_args, mp_args = [], []
    for s in specs:
        if isinstance(s, dict):
            a = rng.random(s["shape"]).astype(s["dtype"])
            if s["dtype"] == "int32":
                a = (rng.random(s["shape"]) * 100).astype(onp.int32)
            v = mp.array(a)
            v.fix_as_const()
            np_args.append(a)
            mp_args.append(v)
        else:
            np_args.append(s)
            mp_args.append(s)
    return np_args, mp_args


#: ``--forced-read``: results are read with ``read()`` (numpy's: used as they are) instead of printed.
FORCED_READ = False


def _use(r) -> None:
    if not FORCED_READ:
        r.__str__()
    elif hasattr(r, "read") and not isinstance(r, onp.ndarray):
        r.read()


def run_once(fn, args, mode):
    if mode == 3:
        res = fn(args)
    else:
        res = fn(*args)
    if FORCED_READ and not isinstance(res, (list, tuple)):
        _use(res)  # every result, also those the upstream benchmark does not print
    elif mode in (0, 3) and not isinstance(res, (list, tuple)):
        _use(res)
    elif mode in (2, 3) or isinstance(res, (list, tuple)):
        for r in res:
            _use(r)
    return res


def timeit(fn, args, mode, loop, repeat):
    run_once(fn, args, mode)
    best = math.inf
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(loop):
            run_once(fn, args, mode)
        best = min(best, (time.perf_counter() - t) / loop)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--loop", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("-v", action="store_true")
    ap.add_argument("--forced-read", action="store_true", help="read mnnjit results with read(), not str()")
    args = ap.parse_args()
    global FORCED_READ
    FORCED_READ = args.forced_read
    import mnnjit.numpy as mp
    ratios, missing, failed = [], [], []
    for names, specs, mode in CASES:
        np_args, mp_args = make_args(specs, mp)
        for name in names:
            np_fn = getattr(onp, name, None)
            mp_fn = getattr(mp, name, None)
            if np_fn is None:
                continue
            if mp_fn is None:
                missing.append(name)
                continue
            try:
                t_mp = timeit(mp_fn, mp_args, mode, args.loop, args.repeat)
            except Exception as exc:  # noqa: BLE001 - report and continue
                failed.append(f"{name} ({type(exc).__name__}: {exc})")
                continue
            t_np = timeit(np_fn, np_args, mode, args.loop, args.repeat)
            ratios.append((name, t_mp / t_np))
            if args.v:
                print(f"{name:14s} numpy {t_np * 1e6:9.1f} us  mnnjit {t_mp * 1e6:9.1f} us  ratio {t_mp / t_np:5.2f}")
    geo = math.exp(sum(math.log(r) for _, r in ratios) / max(len(ratios), 1))
    print(f"cases timed: {len(ratios)}, missing in mnnjit.numpy: {len(missing)}, failed: {len(failed)}")
    worst = sorted(ratios, key=lambda t: -t[1])[:8]
    print("worst ratios: " + ", ".join(f"{n} {r:.2f}" for n, r in worst))
    if missing:
        print("missing: " + " ".join(missing))
    for f in failed:
        print("failed: " + f)
    print(f"geometric mean mnnjit/numpy: {geo:.3f}")


if __name__ == "__main__":
    main()
