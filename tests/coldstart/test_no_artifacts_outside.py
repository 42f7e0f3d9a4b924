"""No compiled artifact outside ``MNNJIT_CACHE_DIR`` (issue 24): a cold process in background mode
whose kernels compile in the background worker process (generated fused kernels and hand-written
ones) leaves Numba index and machine code files (``.nbi`` / ``.nbc``) only under its cache
directory: none under the package, the working directory or ``NUMBA_CACHE_DIR``.

(tests/coldstart/test_cache_heal.py checks the same for kernels compiled in the foreground, with an
audit hook on the test process's own writes; the worker is another process, so here the file
systems are compared before and after.)"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json
import numpy as onp
import mnnjit.numpy as np
from mnnjit import compiler
from mnnjit.backends.cpu import fp16
from mnnjit.backends.cpu.runtime import tiering
compiler.set_threshold(0)
x = np.array(onp.arange(24, dtype=onp.float32).reshape(4, 6))
r1 = ((x * 3 - 1) * x).read()
src = onp.arange(16, dtype=onp.float32)
dst = onp.empty(16, onp.uint16)
ran = tiering.run_or_none(fp16._to_f16_kernel, src, dst)     # hand-written: queued for the worker
st = tiering.compile_status()
waited = tiering.wait(240)
r2 = ((x * 3 - 1) * x).read()
print(json.dumps({"r1": r1.tolist(), "r2": r2.tolist(), "first": st, "last": tiering.compile_status(),
                  "waited": waited, "ran_first": ran is not None}))
"""


def _compiled_files(top: Path) -> set:
    """Numba index / machine code files under ``top`` (none when it does not exist)."""
    if not top.is_dir():
        return set()
    return {p for pat in ("*.nbi", "*.nbc") for p in top.rglob(pat)}


def test_worker_writes_only_under_the_cache_dir(tmp_path):
    cache, numba_cache, cwd = tmp_path / "cache", tmp_path / "numba", tmp_path / "cwd"
    numba_cache.mkdir()
    cwd.mkdir()
    pkg = ROOT / "mnnjit"
    before = {p: p.stat().st_mtime for p in _compiled_files(pkg)}
    start = time.time()
    env = dict(os.environ, PYTHONPATH=str(ROOT), MNNJIT_CACHE_DIR=str(cache), NUMBA_CACHE_DIR=str(numba_cache),
               MNNJIT_COMPILE="background")
    for k in ("MNNJIT_DEBUG", "MNNJIT_COMPILE_WORKER"):
        env.pop(k, None)
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300,
                         cwd=cwd)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(np.array(res["r1"], np.float32), (x * 3 - 1) * x)
    np.testing.assert_array_equal(np.array(res["r2"], np.float32), (x * 3 - 1) * x)
    # the kernels went through the worker process, and are done
    assert res["first"]["worker"] == "process" and res["first"]["pending"] + res["first"]["done"] == 2
    assert not res["ran_first"]
    assert res["waited"] and res["last"]["done"] == 2 and res["last"]["failed"] == 0
    # everything compiled sits under MNNJIT_CACHE_DIR: the generated kernel and the hand-written one
    tree = Path(res["last"]["cache"])
    assert tree.is_relative_to(cache)
    inside = _compiled_files(cache)
    assert any(p.parent.parent.name.startswith("kernels-v") for p in inside if p.suffix == ".nbi")
    assert any(p.name.startswith("fp16._to_f16_kernel") for p in inside if p.suffix == ".nbi")
    # ... and nowhere else
    assert _compiled_files(numba_cache) == set() and _compiled_files(cwd) == set()
    new = [p for p in _compiled_files(pkg) if p not in before or p.stat().st_mtime > before[p]
           or p.stat().st_mtime >= start]
    assert new == [], f"compiled artifacts written inside the package: {new}"
