"""The OpenMP waiting policy mnnjit sets before libgomp starts (backends/cpu/runtime/omp_env.py)."""
from __future__ import annotations

import os
import subprocess
import sys

from mnnjit.backends.cpu.runtime import omp_env


def test_bounded_spin_when_the_user_chose_nothing(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    omp_env.configure_openmp_waiting()
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert os.environ["GOMP_SPINCOUNT"] == str(omp_env.SPIN_COUNT)


def test_a_users_policy_is_left_alone(monkeypatch):
    for var, val in (("OMP_WAIT_POLICY", "ACTIVE"), ("GOMP_SPINCOUNT", "0")):
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
        monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
        monkeypatch.setenv(var, val)
        omp_env.configure_openmp_waiting()
        assert os.environ[var] == val
        other = "GOMP_SPINCOUNT" if var == "OMP_WAIT_POLICY" else "OMP_WAIT_POLICY"
        assert other not in os.environ


def _run_fresh(code: str) -> subprocess.CompletedProcess:
    """``code`` in a new interpreter without either OpenMP variable in its environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return out


def test_set_before_the_first_parallel_kernel():
    """A fresh process that runs a compiled kernel has the policy in its environment by then."""
    code = ("import os, numpy as np, mnnjit.numpy as mnp\n"
            "os.environ.pop('OMP_WAIT_POLICY', None); os.environ.pop('GOMP_SPINCOUNT', None)\n"
            "from mnnjit.backends.cpu.runtime import jit\n"
            "jit.numba_module()\n"
            "print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('GOMP_SPINCOUNT'))\n")
    out = _run_fresh(code)
    assert out.stdout.split() == ["PASSIVE", str(omp_env.SPIN_COUNT)]


def test_set_before_a_graph_evaluation_loads_libgomp():
    """A fresh process whose first parallel kernel comes through a graph evaluation (the
    executor's launch guard probes Numba's threading layer, loading libgomp) has the policy in its
    environment when libgomp loads: libgomp reads it only then."""
    code = ("import os, sys\n"
            "seen = []\n"
            "def hook(ev, args):\n"
            "    if ev == 'import' and args[0] == 'numba.np.ufunc.omppool':\n"
            "        seen.append((os.environ.get('OMP_WAIT_POLICY'), os.environ.get('GOMP_SPINCOUNT')))\n"
            "sys.addaudithook(hook)\n"
            "import numpy as np, mnnjit.numpy as mnp\n"
            "a = np.arange(256 * 256 * 3, dtype=np.float32).reshape(256, 256, 3)\n"
            "x = mnp.array(a)\n"
            "y = (x * 2 + 1) - x.mean([0, 1])\n"
            "print(np.allclose(y.read(), (a * 2 + 1) - a.mean((0, 1)), rtol=1e-5))\n"
            "print(seen[:1])\n")
    out = _run_fresh(code)
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "True"
    # (no load at all is fine too: a layer without libgomp; then nothing can have read it early)
    assert lines[1] in ("[]", f"[('PASSIVE', '{omp_env.SPIN_COUNT}')]"), lines[1]
