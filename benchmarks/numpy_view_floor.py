"""The lowest geometric mean ``numpy_ops.py --forced-read`` can reach under pymnn's ``read()``.

numpy returns some results as views of their inputs (reshape, transpose, squeeze, flip, split, ...);
pymnn's ``read()`` returns memory of the result's own (writes into it never change the input Var:
checked against real MNN in ``tests/core/test_read_ownership.py``), so an implementation's best time
for such a case is numpy's own call plus one copy of the result. This prints, for every case of
``numpy_ops.py`` whose numpy result shares memory with an input, that best time over numpy's, and
the geometric mean over the whole case list with every other case at exactly 1.0x numpy: a floor
no implementation of those semantics gets under.

    .venv/bin/python benchmarks/numpy_view_floor.py
"""
from __future__ import annotations

import math
import os
import sys
import timeit
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy_ops as cases_mod  # noqa: E402


def _inputs(args: list) -> list[np.ndarray]:
    flat = []
    for a in args:
        if isinstance(a, np.ndarray):
            flat.append(a)
        elif isinstance(a, list):
            flat.extend(x for x in a if isinstance(x, np.ndarray))
    return flat


def _best(fn, number: int = 200) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number


def main() -> None:
    rng = np.random.default_rng(0)
    cache: dict = {}
    names = cases_mod.UNARY + cases_mod.BINARY + cases_mod.REDUCTION + cases_mod.MEMORY
    ratios = {}
    for name in names:
        specs, kw = cases_mod._args_for(name)
        args = [cases_mod._make(s, "np", rng, cache) for s in specs]
        fn = getattr(np, name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = fn(*args, **kw)
        outs = res if isinstance(res, (list, tuple)) else [res]
        ins = _inputs(args)
        if not any(isinstance(o, np.ndarray) and any(np.shares_memory(o, i) for i in ins) for o in outs):
            continue

        def copied(fn=fn, args=args, kw=kw):
            r = fn(*args, **kw)
            return [np.array(x) for x in (r if isinstance(r, (list, tuple)) else [r])]
        ratios[name] = _best(copied) / _best(lambda: fn(*args, **kw))
    for name, r in sorted(ratios.items(), key=lambda kv: -kv[1]):
        print(f"{name:14s} {r:6.1f}x numpy (its call + one copy of the result)")
    floor = math.exp(sum(math.log(r) for r in ratios.values()) / len(names))
    rest = floor ** (-len(names) / (len(names) - len(ratios)))
    print(f"{len(ratios)} of {len(names)} cases return views; with every other case at 1.0x the geometric "
          f"mean is {floor:.2f}x; a 1.0x mean needs the other {len(names) - len(ratios)} at {rest:.2f}x numpy")


if __name__ == "__main__":
    main()
