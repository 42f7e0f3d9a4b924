"""Processes sharing a kernel cache (backends/cpu/runtime/compile_lock.py): each kernel is compiled once,
by one process, and the others load it; Numba's cache index stays consistent; the lock never
blocks a compile for good."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from mnnjit.backends.cpu.runtime import compile_lock

ROOT = Path(__file__).resolve().parents[2]

# Started twice at once (both wait for the "go" file): several generated kernels, then a cached
# plain Numba function with three signatures compiled in an order that depends on the process.
SCRIPT = r"""
import json, os, sys, time
go, order, kdir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
import numpy as onp
import mnnjit.numpy as np
from mnnjit import compiler
from mnnjit.backends.cpu.runtime import numba_setup
from numba import njit
sys.path.insert(0, kdir)
import shared_kernel
while not os.path.exists(go):
    time.sleep(0.01)
compiler.set_threshold(0)
x = np.array(onp.arange(24, dtype=onp.float32).reshape(4, 6))
y = np.array(onp.arange(6, dtype=onp.float32))
r1 = ((x * 2 + 1) * y - x).read()
r2 = ((x - y) * 0.5).sum(axis=1).read()
r3 = np.exp(x / 10.0).max(axis=0).read()
args = [onp.arange(5, dtype=t) for t in (onp.int64, onp.float64, onp.float32)]
sums = {}
for a in (args if order == 0 else args[::-1]):
    sums[str(a.dtype)] = float(shared_kernel.total(a))
d = shared_kernel.total
print(json.dumps({"counters": dict(compiler.counters), "r": [r1.tolist(), r2.tolist(), r3.tolist()],
                  "sums": sums, "misses": sum(d.stats.cache_misses.values()),
                  "hits": sum(d.stats.cache_hits.values())}))
"""

KERNEL = """
from numba import njit

@njit(cache=True)
def total(a):
    s = a[0] * 0
    for i in range(a.size):
        s += a[i] * (i + 1)
    return s
"""


def _start_pair(tmp_path: Path) -> list[dict]:
    kdir = tmp_path / "mod"
    kdir.mkdir()
    (kdir / "shared_kernel.py").write_text(KERNEL)
    go = tmp_path / "go"
    env = dict(os.environ, MNNJIT_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT),
               NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    env.pop("MNNJIT_DEBUG", None)
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, str(go), str(i), str(kdir)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (0, 1)]
    time.sleep(3.0)            # both past their imports, waiting
    go.touch()
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    return outs


def test_two_processes_compile_each_kernel_once(tmp_path):
    a, b = _start_pair(tmp_path)
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    y = np.arange(6, dtype=np.float32)
    want = [((x * 2 + 1) * y - x), ((x - y) * np.float32(0.5)).sum(axis=1), np.exp(x / 10).max(axis=0)]
    for out in (a, b):
        for got, w in zip(out["r"], want):
            np.testing.assert_allclose(np.array(got, np.float32), w, rtol=1e-6)
        assert out["sums"] == {"int64": 40.0, "float64": 40.0, "float32": 40.0}
    # every generated kernel and every signature compiled by exactly one of the two
    compiled = [o["counters"].get("kernels_compiled", 0) for o in (a, b)]
    loaded = [o["counters"].get("kernel_disk_hits", 0) for o in (a, b)]
    assert compiled[0] + compiled[1] == compiled[0] + loaded[0] == compiled[1] + loaded[1] >= 2
    assert a["misses"] + b["misses"] == 3 and a["hits"] + b["hits"] == 3


def test_a_third_process_loads_what_two_wrote(tmp_path):
    """The index written by two processes names the right machine code for every signature."""
    _start_pair(tmp_path)
    (tmp_path / "go2").touch()
    env = dict(os.environ, MNNJIT_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT),
               NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "go2"), "0", str(tmp_path / "mod")],
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["misses"] == 0 and res["hits"] == 3
    assert res["sums"] == {"int64": 40.0, "float64": 40.0, "float32": 40.0}
    assert res["counters"].get("kernels_compiled", 0) == 0


def test_lock_is_reentrant_and_gives_up_after_the_wait(tmp_path, monkeypatch):
    import fcntl
    path = str(tmp_path / "f.nbi.lock")
    with compile_lock._file_lock(path):
        with compile_lock._file_lock(path):      # a kernel's callee with the same cache file
            pass
    # another holder that never lets go: the waiter compiles anyway after WAIT_SECONDS
    monkeypatch.setattr(compile_lock, "WAIT_SECONDS", 0.3)
    fd = os.open(path, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        t = time.monotonic()
        with compile_lock._file_lock(path):
            waited = time.monotonic() - t
        assert 0.3 <= waited < 5
    finally:
        os.close(fd)


def test_unwritable_lock_directory_is_skipped(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")
    with compile_lock._file_lock(str(blocked / "sub" / "x.nbi.lock")):   # a file where a dir should be
        pass
