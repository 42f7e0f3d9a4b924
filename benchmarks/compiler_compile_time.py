"""Compile time of the first call, and of the same call in a second process with a warm kernel cache.

Runs a child process twice on one fresh cache directory; each child times ``import numba`` (paid
once per process, when the first kernel is needed), then the first evaluation of the fused chains
``((x*2+1)*y - z).sum()`` and the row softmax on 1M-element inputs (kernel generation + Numba compile or
cache load + run), then a second evaluation (run only).

    PYTHONPATH=. python benchmarks/compiler_compile_time.py
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, time
import numpy as onp
t0 = time.perf_counter()
import numba
t_numba = time.perf_counter() - t0
import mnnjit.numpy as mp
from mnnjit import compiler
rng = onp.random.default_rng(0)
x, y, z = (mp.array(rng.random(1 << 20, dtype=onp.float32)) for _ in range(3))
m = mp.array(rng.random((1024, 1024), dtype=onp.float32))
def chain():
    return ((x * 2 + 1) * y - z).sum()
def softmax():
    e = mp.exp(m - m.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).read_view()
res = {"import_numba_s": t_numba}
for name, fn in (("chain", chain), ("softmax", softmax)):
    t = time.perf_counter(); fn(); res[name + "_first_s"] = time.perf_counter() - t
    t = time.perf_counter(); fn(); res[name + "_second_s"] = time.perf_counter() - t
res["counters"] = dict(compiler.counters)
print(json.dumps(res))
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, MNNJIT_CACHE_DIR=cache)
        env.setdefault("PYTHONPATH", ".")
        for label in ("cold cache", "warm cache"):
            out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            c = r["counters"]
            print(f"{label}: import numba {r['import_numba_s']:.2f} s; chain first call {r['chain_first_s']:.2f} s "
                  f"(then {r['chain_second_s'] * 1e3:.1f} ms); softmax first call {r['softmax_first_s']:.2f} s "
                  f"(then {r['softmax_second_s'] * 1e3:.1f} ms); kernels compiled {c.get('kernels_compiled', 0)}, "
                  f"loaded from disk {c.get('kernel_disk_hits', 0)}")


if __name__ == "__main__":
    main()
