"""Tiered execution (issue 24): with kernels not compiled yet a plan runs at once on paths that
need no compiling, the kernels compile in a background worker, each step switches over once they
are ready, and results stay within the tolerances the model tests use.

The in-process tests run model plans on their reference paths (``tiering.forced("reference")``:
exactly the path a step takes while its kernel compiles) against real MNN's outputs; the
subprocess tests run background mode end to end on small generated kernels with a private cache."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from shared_paths import MODELS

ROOT = Path(__file__).resolve().parents[2]


def _close(got: np.ndarray, want: np.ndarray, precision: str) -> None:
    """The model tests' tolerances: issue 6's for float32, the precision tests' for low."""
    scale = max(1.0, float(np.abs(want).max()))
    tol = 1e-3 * scale if precision == "normal" else 2e-3 * float(np.abs(want).max()) + 1e-4
    assert float(np.abs(got - want).max()) <= tol


def _plan_of(module):
    plans = [v for k, v in module._program.__dict__.get("_lowered", {}).items() if k[0] != "worth"]
    assert len(plans) == 1, "the forward did not run a lowered (kernel-step) plan"
    return plans[0]


@pytest.mark.parametrize("name,precision", [("mobilenetv2", "normal"), ("mobilenetv2", "low"),
                                            ("mobilenetv2_wq8", "normal")])
def test_reference_paths_match_real_mnn(name, precision):
    """Every kernel step of the model's plan on its reference path (nothing compiled): real MNN's
    outputs within the model tests' tolerance; then the steps switch to their kernels."""
    import mnnjit.expr as F
    import mnnjit.nn as nn
    from mnnjit.backends.cpu.runtime import tiering
    from mnnjit.settings import counters
    path = Path(MODELS) / f"{name}.mnn"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    data = np.load(Path(MODELS) / f"{name}.npz")
    rt = nn.create_runtime_manager(({"precision": precision},))
    net = nn.load_module_from_file(str(path), ["x"], ["logits"], runtime_manager=rt)
    x, want = data["in0_x"], data["out0_logits"]
    before = counters["tiered_ref_steps"]
    with tiering.forced("reference"):
        got = net.forward(F.const(x, list(x.shape), F.NCHW)).read()
    _close(got, want, precision)
    plan = _plan_of(net)
    kernel_steps = sum(st.kind != "ref" for st in plan.steps)
    assert kernel_steps >= 20 and counters["tiered_ref_steps"] - before == len(plan.steps)
    # switch-over: the next forward runs (and binds) the kernels, same results
    with tiering.forced("sync"):
        got2 = net.forward(F.const(data["in1_x"], list(x.shape), F.NCHW)).read()
    _close(got2, data["out1_logits"], precision)
    assert counters["tiered_ref_steps"] - before == len(plan.steps)
    assert not any(getattr(c, "__qualname__", "").startswith("tiered_call") for c in plan._calls)


SCRIPT = r"""
import json, os, sys, time, warnings
import numpy as onp
t0 = time.perf_counter()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import mnnjit.numpy as np
    from mnnjit import compiler
    from mnnjit.backends.cpu.runtime import tiering
    compiler.set_threshold(0)
    x = np.array(onp.arange(24, dtype=onp.float32).reshape(4, 6))
    r1 = ((x * 2 + 1) - x).read()
    r2 = ((x - 1) * (x + 2)).read()
    first = dict(compiler.counters)
    status = tiering.compile_status()
    out = {"r1": r1.tolist(), "r2": r2.tolist(), "first": first, "status": status,
           "t_first": time.perf_counter() - t0}
    if sys.argv[1] == "wait":
        out["waited"] = tiering.wait(240)
        r1 = ((x * 2 + 1) - x).read()
        r2 = ((x - 1) * (x + 2)).read()
        out.update(r1b=r1.tolist(), r2b=r2.tolist(), after=dict(compiler.counters),
                   status2=tiering.compile_status())
out["warnings"] = [str(w.message) for w in caught if "mnnjit" in str(w.message)]
print(json.dumps(out))
"""


def _run(cache: Path, how: str, extra: dict | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), MNNJIT_CACHE_DIR=str(cache), MNNJIT_COMPILE="background")
    env.pop("MNNJIT_DEBUG", None)
    env.update(extra or {})
    out = subprocess.run([sys.executable, "-c", SCRIPT, how], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _expect(res: dict, suffix: str = "") -> None:
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(np.array(res["r1" + suffix], np.float32), (x * 2 + 1) - x)
    np.testing.assert_array_equal(np.array(res["r2" + suffix], np.float32), (x - 1) * (x + 2))


def _wait_gone(pid: int | None, timeout: float = 240.0) -> None:
    """Wait for a worker process that outlives its parent to finish its queue and exit."""
    if pid is None:
        return
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    pytest.fail(f"compile worker {pid} still running after {timeout} s")


def test_background_mode_runs_at_once_then_switches(tmp_path):
    res = _run(tmp_path, "wait")
    _expect(res)
    first = res["first"]
    # the first reads ran on the reference path: nothing compiled in the foreground
    assert first.get("kernels_compiled", 0) == 0 and first.get("kernel_runs", 0) == 0
    assert first.get("deferred_runs", 0) == 2 and first.get("ref_groups", 0) == 2
    assert res["status"]["pending"] + res["status"]["done"] == 2 and res["status"]["worker"] == "process"
    # then the kernels, compiled by the worker and loaded here, run the same groups
    assert res["waited"] is True and res["status2"]["done"] == 2 and res["status2"]["failed"] == 0
    _expect(res, "b")
    assert res["after"]["kernel_runs"] == 2 and res["after"]["kernels_compiled"] == 0
    assert res["warnings"] == []
    # a second process starts warm: no deferral, loads from disk
    warm = _run(tmp_path, "now")
    _expect(warm)
    assert warm["first"].get("deferred_runs", 0) == 0 and warm["first"]["kernel_disk_hits"] == 2
    assert warm["first"]["kernel_runs"] == 2 and warm["status"]["worker"] is None


@pytest.mark.parametrize("worker", ["process", "thread"])
def test_exit_during_background_compile_is_clean(tmp_path, worker):
    """A process exiting while its kernels compile exits at once and cleanly; the cache it leaves
    loads without a warning (the worker process finishes its queue first)."""
    extra = {"MNNJIT_COMPILE_WORKER": "off"} if worker == "thread" else {}
    res = _run(tmp_path, "now", extra)
    _expect(res)
    assert res["status"]["worker"] == worker and res["first"].get("kernel_runs", 0) == 0
    _wait_gone(res["status"].get("worker_pid"))
    again = _run(tmp_path, "wait", {"MNNJIT_COMPILE_WORKER": "off"})
    _expect(again)
    _expect(again, "b")
    assert again["warnings"] == [] and again["status2"]["failed"] == 0
    if worker == "process":     # the worker finished both kernels for the next process
        assert again["first"].get("deferred_runs", 0) == 0 and again["first"]["kernel_disk_hits"] == 2


WARMUP = r"""
import json, sys
import numpy as onp
import mnnjit.warmup as W
from mnnjit import compiler
if sys.argv[1] == "warmup":
    print(json.dumps(W.warmup(sys.argv[2])))
else:
    import mnnjit.nn as nn, mnnjit.expr as F
    d = onp.load(sys.argv[2][:-4] + ".npz")
    names = ["r", "up", "padc", "padr", "rmax"]
    net = nn.load_module_from_file(sys.argv[2], ["x"], names)
    x = d["in0_x"]
    ys = net.forward(F.const(x, list(x.shape), F.NCHW))
    errs = [float(abs(F.convert(y, F.NCHW).read() - d["out0_" + n]).max() / max(1.0, abs(d["out0_" + n]).max()))
            for y, n in zip(ys, names)]
    print(json.dumps({"err": max(errs), "counters": dict(compiler.counters)}))
"""


def test_warmup_compiles_everything_a_later_process_needs(tmp_path):
    """``mnnjit.warmup.warmup`` waits for a model's kernels (here opmix's fused groups, compiled at
    every size); a later process compiles nothing and matches real MNN."""
    model = Path(MODELS) / "opmix.mnn"
    if not model.is_file():
        pytest.skip(f"{model} not found")
    env = dict(os.environ, PYTHONPATH=str(ROOT), MNNJIT_CACHE_DIR=str(tmp_path), MNNJIT_JIT_THRESHOLD="0")
    env.pop("MNNJIT_DEBUG", None)
    env.pop("MNNJIT_COMPILE", None)
    out = subprocess.run([sys.executable, "-c", WARMUP, "warmup", str(model)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    rep = json.loads(out.stdout.strip().splitlines()[-1])
    assert rep["compiled"] >= 2 and rep["kernels"] == rep["compiled"]
    assert f"[{rep['compiled']}/{rep['compiled']}]" in out.stderr and "in the background" not in out.stderr
    env["MNNJIT_COMPILE"] = "sync"
    out = subprocess.run([sys.executable, "-c", WARMUP, "run", str(model)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["counters"].get("kernels_compiled", 0) == 0 and res["counters"]["kernel_disk_hits"] >= 2
    assert res["err"] <= 1e-3


def test_warmup_refuses_bad_arguments(tmp_path):
    import mnnjit.warmup
    from mnnjit.warmup import prewarm, warmup
    assert callable(mnnjit.warmup)        # mnnjit.warmup(...) is warmup(...)
    with pytest.raises(ValueError, match="precision"):
        prewarm("bogus")
    with pytest.raises(FileNotFoundError, match="not found"):
        warmup(tmp_path / "missing.mnn")
    with pytest.raises(TypeError, match="expected a .mnn path"):
        warmup(42)
    model = Path(MODELS) / "mlp.mnn"
    if model.is_file():
        with pytest.raises(ValueError, match="no input"):
            warmup(model, {"nope": [1, 64]}, progress=False)
        with pytest.raises(ValueError, match="takes 2 dimensions"):
            warmup(model, [[1, 1, 64]], progress=False)


def test_a_first_call_never_waits_for_another_process_compiling_the_same_function(tmp_path, monkeypatch):
    """In background mode, the first call of a signature whose function another process is
    compiling (its cross-process lock held: another signature, by the worker) is queued at once,
    not left to wait for that lock; outside background mode it loads or compiles as usual."""
    import fcntl
    from mnnjit.backends.cpu.runtime import compile_lock, tiering

    monkeypatch.setenv("MNNJIT_COMPILE", "background")
    src = tmp_path / "mod_busy.py"
    src.write_text("import numba\n@numba.njit(cache=True)\ndef f(x):\n    return x + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    compile_lock.install()
    mod = importlib.import_module("mod_busy")
    disp = mod.f
    disp(1)                              # one signature compiled: the lock file exists
    path = compile_lock._lock_path(disp)
    assert path is not None and os.path.exists(path)
    queued = []
    monkeypatch.setattr(tiering, "submit", lambda d, sig: queued.append(sig) or tiering.Job(d, sig, "f", -1))
    tiering.install()
    monkeypatch.setattr(compile_lock, "WAIT_SECONDS", 3.0)     # (a wait would end, and show, in 3 s)
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)   # (another open file: as another process's lock)
        assert compile_lock.busy_elsewhere(disp)
        t = time.monotonic()
        with pytest.raises(tiering.CompileDeferred):
            with tiering.deferring():
                disp(1.5)
        assert time.monotonic() - t < 2.0 and len(queued) == 1
    finally:
        os.close(fd)
    assert not compile_lock.busy_elsewhere(disp)
    assert disp(2.5) == 3.5              # (not deferring: compiles where called)
