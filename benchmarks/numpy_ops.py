"""numpy vs mnnjit.numpy (vs real MNN.numpy when installed) on 64,000-element float32 arrays.

Cases follow the groups of pymnn's own numpy benchmark: unary, binary, reduction and memory
functions, plus a small svd. Each call is timed end to end *including computing the result*
(mnnjit is lazy: its result is read with ``read_view()``, or with ``read()`` under ``--forced-read``
as a script does; real MNN's with ``read()``), best of ``--repeat`` runs of ``--loop`` calls. Prints
a table and the geometric means of mnnjit/numpy (and MNN/numpy) per group and overall, then the
latency of a 1,000-element ``a + b`` and of ``transpose`` on [4, 16, 10, 100], each read with
``read()`` (medians of rounds alternating the libraries).

    PYTHONPATH=. python benchmarks/numpy_ops.py [--loop 20] [--repeat 3] [--no-mnn] [--forced-read]
                                                [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any, Callable

os.environ.setdefault("OMP_NUM_THREADS", "2")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import mnnjit.numpy as jnp  # noqa: E402
from mnnjit.var import Var  # noqa: E402

N = 64000
X = {"shape": [N], "dtype": "float32"}
XI = {"shape": [N], "dtype": "int32"}
Y4 = {"shape": [4, 16, 10, 100], "dtype": "float32"}

UNARY = ["sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arctanh",
         "around", "floor", "ceil", "trunc", "exp", "expm1", "exp2", "log", "log2", "log10", "log1p", "sinc",
         "signbit", "positive", "negative", "reciprocal", "sqrt", "cbrt", "square", "sign", "argwhere",
         "flatnonzero", "sort", "argsort", "copy", "modf"]
BINARY = ["greater", "greater_equal", "less", "less_equal", "equal", "not_equal", "multiply", "add", "divide",
          "power", "subtract", "true_divide", "floor_divide", "mod", "maximum", "minimum", "hypot", "logaddexp",
          "logaddexp2", "copysign", "divmod"]
REDUCTION = ["prod", "sum", "argmax", "argmin", "cumsum", "cumprod", "nonzero", "count_nonzero", "max", "min",
             "ptp", "mean", "var", "std", "median", "percentile"]
MEMORY = ["reshape", "ravel", "transpose", "atleast_1d", "atleast_2d", "atleast_3d", "squeeze", "moveaxis",
          "rollaxis", "swapaxes", "broadcast_to", "expand_dims", "concatenate", "stack", "vstack", "hstack", "dstack",
          "column_stack", "split", "dsplit", "hsplit", "vsplit", "pad", "tile", "repeat", "flip", "roll"]


def _args_for(name: str) -> tuple[list[Any], dict]:
    """Arguments (data specs or plain values) of one benchmark case."""
    if name in UNARY:
        return [X], {}
    if name in BINARY:
        return [X, X], {}
    if name in ("all", "any"):
        return [XI], {}
    if name == "percentile":
        return [X, 30], {}
    if name in REDUCTION:
        return [X], {}
    table = {
        "reshape": [Y4, [10, 64, 100]], "broadcast_to": [Y4, [3, 4, 16, 10, 100]], "expand_dims": [Y4, 0],
        "moveaxis": [Y4, 0, 3], "rollaxis": [Y4, 0, 3], "swapaxes": [Y4, 0, 3], "split": [Y4, 2], "dsplit": [Y4, 2],
        "hsplit": [Y4, 2], "vsplit": [Y4, 2], "pad": [X, 2], "tile": [X, 2], "repeat": [X, 2], "roll": [X, 7],
        "concatenate": [[Y4, Y4]], "stack": [[Y4, Y4]], "vstack": [[Y4, Y4]], "hstack": [[Y4, Y4]],
        "dstack": [[Y4, Y4]], "column_stack": [[Y4, Y4]], "flip": [Y4],
    }
    return table.get(name, [Y4]), {}


def _make(spec: Any, lib: str, rng: np.random.Generator, cache: dict) -> Any:
    if isinstance(spec, list) and spec and isinstance(spec[0], dict):
        return [_make(s, lib, rng, cache) for s in spec]
    if not isinstance(spec, dict):
        return spec
    key = (lib, tuple(spec["shape"]), spec["dtype"], id(spec))
    if key not in cache:
        base = cache.setdefault(("np", tuple(spec["shape"]), spec["dtype"], id(spec)),
                                (rng.random(spec["shape"]) * (100 if spec["dtype"] == "int32" else 1) + 0.01)
                                .astype(spec["dtype"]))
        if lib == "np":
            cache[key] = base
        elif lib == "jit":
            cache[key] = jnp.array(base)
        else:
            import MNN.numpy as mp
            v = mp.array(base)
            v.fix_as_const()
            cache[key] = v
    return cache[key]


#: ``--forced-read``: every mnnjit result is read with ``read()`` (as a script does), not ``read_view()``.
FORCED_READ = False


def _materialize(res: Any, lib: str) -> None:
    if isinstance(res, (list, tuple)):
        for r in res:
            _materialize(r, lib)
        return
    if lib == "jit" and isinstance(res, Var):
        res.read() if FORCED_READ else res.read_view()
    elif lib == "mnn" and hasattr(res, "read"):
        res.read()


def _time(fn: Callable[[], Any], lib: str, loop: int, repeat: int) -> float:
    _materialize(fn(), lib)  # warm-up (and first-use costs)
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(loop):
            _materialize(fn(), lib)
        best = min(best, (time.perf_counter() - t0) / loop)
    return best * 1e3


def _geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def run(loop: int, repeat: int, use_mnn: bool) -> dict:
    """Time every case; returns {group: [(name, numpy_ms, mnnjit_ms, mnn_ms or None)]}."""
    libs = {"np": np, "jit": jnp}
    if use_mnn:
        try:
            import contextlib
            import io
            with contextlib.redirect_stdout(io.StringIO()):
                import MNN.numpy as mp
            libs["mnn"] = mp
        except ImportError:
            pass
    rng = np.random.default_rng(0)
    cache: dict = {}
    out: dict = {}
    for group, names in (("unary", UNARY), ("binary", BINARY), ("reduction", REDUCTION + ["all", "any"]),
                         ("memory", MEMORY), ("linalg", ["svd"])):
        rows = []
        for name in names:
            times = {}
            for lib, mod in libs.items():
                if name == "svd":
                    spec = {"shape": [9, 9], "dtype": "float32"}
                    a = _make(spec, lib, rng, cache)
                    fn_mod = mod.linalg
                    args, func = [a], getattr(fn_mod, "svd")
                else:
                    specs, kw = _args_for(name)
                    args = [_make(s, lib, rng, cache) for s in specs]
                    func = getattr(mod, name)
                try:
                    times[lib] = _time(lambda: func(*args), lib, loop, repeat)
                except Exception as exc:  # real MNN raises for some valid calls
                    times[lib] = float("nan")
                    if lib != "mnn":
                        raise RuntimeError(f"{lib}.{name} failed: {exc}") from exc
            rows.append((name, times["np"], times["jit"], times.get("mnn")))
        out[group] = rows
    return out


def report(results: dict) -> dict:
    """Print the table; return the geometric means."""
    summary = {}
    all_jit, all_mnn = [], []
    print(f"{'function':<16}{'numpy ms':>10}{'mnnjit ms':>11}{'MNN ms':>10}{'jit/np':>9}{'MNN/np':>9}")
    for group, rows in results.items():
        print(f"-- {group}")
        rj, rm = [], []
        for name, tn, tj, tm in rows:
            r1 = tj / tn
            r2 = (tm / tn) if tm is not None and math.isfinite(tm) else float("nan")
            rj.append(r1)
            if math.isfinite(r2):
                rm.append(r2)
            tm_s = f"{tm:10.3f}" if tm is not None else f"{'-':>10}"
            print(f"{name:<16}{tn:10.3f}{tj:11.3f}{tm_s}{r1:9.2f}{r2:9.2f}")
        summary[group] = {"mnnjit/numpy": _geomean(rj), "MNN/numpy": _geomean(rm)}
        all_jit += rj
        all_mnn += rm
    summary["all"] = {"mnnjit/numpy": _geomean(all_jit), "MNN/numpy": _geomean(all_mnn)}
    print("-- geometric means (lower is faster)")
    for group, s in summary.items():
        print(f"{group:<12} mnnjit/numpy {s['mnnjit/numpy']:6.2f}   MNN/numpy {s['MNN/numpy']:6.2f}")
    return summary


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2]


def latency(libs: dict, rounds: int = 15, n: int = 2000) -> dict:
    """Per-call latency (us, median of ``rounds`` rounds alternating the libraries) of a 1,000-element
    ``a + b`` and a [4, 16, 10, 100] ``transpose``, each result read (numpy: the result itself)."""
    rng = np.random.default_rng(1)
    a0, b0 = rng.random(1000, np.float32), rng.random(1000, np.float32)
    t0 = rng.random((4, 16, 10, 100), np.float32)
    calls: dict = {}
    for lib, mod in libs.items():
        if lib == "np":
            a, b, t = a0, b0, t0
            calls[lib] = {"add_1000": lambda a=a, b=b: a + b, "transpose_4x16x10x100": lambda t=t: np.transpose(t)}
        else:
            a, b, t = mod.array(a0), mod.array(b0), mod.array(t0)
            if lib == "mnn":
                for v in (a, b, t):
                    v.fix_as_const()
            calls[lib] = {"add_1000": lambda a=a, b=b: (a + b).read(),
                          "transpose_4x16x10x100": lambda t=t, mod=mod: mod.transpose(t).read()}
    out: dict = {}
    for case in ("add_1000", "transpose_4x16x10x100"):
        samples: dict = {lib: [] for lib in calls}
        for lib in calls:
            for _ in range(200):
                calls[lib][case]()
        for _ in range(rounds):
            for lib, fns in calls.items():
                fn = fns[case]
                k = n if case == "add_1000" else n // 10
                t = time.perf_counter()
                for _ in range(k):
                    fn()
                samples[lib].append((time.perf_counter() - t) / k * 1e6)
        out[case] = {lib: _median(v) for lib, v in samples.items()}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loop", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-mnn", action="store_true", help="do not time real MNN even when installed")
    ap.add_argument("--forced-read", action="store_true",
                    help="read every mnnjit result with read() (a new array), as a script does")
    ap.add_argument("--json", help="write the results and geometric means to this file")
    args = ap.parse_args()
    global FORCED_READ
    FORCED_READ = args.forced_read
    results = run(args.loop, args.repeat, not args.no_mnn)
    summary = report(results)
    libs = {"np": np, "jit": jnp}
    if not args.no_mnn:
        try:
            import contextlib
            import io
            with contextlib.redirect_stdout(io.StringIO()):
                import MNN.numpy as mp
            libs["mnn"] = mp
        except ImportError:
            pass
    lat = latency(libs)
    print("-- latency, us per call, result read (medians of alternating rounds)")
    for case, per in lat.items():
        extra = "  ".join(f"{lib} {t:8.2f}" for lib, t in per.items())
        print(f"{case:<24} {extra}   mnnjit - numpy {per['jit'] - per['np']:+.2f} us")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"forced_read": FORCED_READ, "loop": args.loop, "repeat": args.repeat, "results": results,
                       "summary": summary, "latency_us": lat}, f, indent=1)


if __name__ == "__main__":
    main()
