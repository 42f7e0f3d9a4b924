"""Kernel cache and dispatch: warm-cache processes compile nothing, broken caches never crash,
small work stays on the numpy path (without importing numba), plans are cached and reused."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mnnjit import compiler
from mnnjit.compiler import counters
from mnnjit.ops import build as B

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, sys
import numpy as onp
import mnnjit.numpy as np
from mnnjit import compiler
compiler.set_threshold(0)
x = np.array(onp.arange(24, dtype=onp.float32).reshape(4, 6))
y = np.array(onp.arange(6, dtype=onp.float32))
r1 = ((x * 2 + 1) * y - x).read()
r2 = ((x - y) * 0.5).sum(axis=1).read()
print(json.dumps({"counters": dict(compiler.counters), "r1": r1.tolist(), "r2": r2.tolist()}))
"""


def _run(cache: Path, extra_env: dict | None = None) -> dict:
    env = dict(os.environ, MNNJIT_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    env.pop("MNNJIT_DEBUG", None)
    env.pop("NUMBA_CACHE_DIR", None)   # Numba's cache beside the kernels, unless a test says
    env.update(extra_env or {})
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _expected():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    y = np.arange(6, dtype=np.float32)
    return ((x * 2 + 1) * y - x), ((x - y) * np.float32(0.5)).sum(axis=1)


def test_second_process_with_warm_cache_compiles_nothing(tmp_path):
    cold = _run(tmp_path)
    assert cold["counters"].get("kernels_compiled", 0) >= 2
    warm = _run(tmp_path)
    assert warm["counters"].get("kernels_compiled", 0) == 0
    assert warm["counters"].get("kernel_disk_hits", 0) >= 2
    e1, e2 = _expected()
    np.testing.assert_array_equal(np.array(warm["r1"], np.float32), e1)
    np.testing.assert_allclose(np.array(warm["r2"], np.float32), e2, rtol=1e-6)


def test_corrupt_cache_is_rebuilt(tmp_path):
    _run(tmp_path)
    for f in tmp_path.rglob("*"):
        if f.is_file() and f.suffix in (".py", ".nbi", ".nbc"):
            f.write_bytes(b"\x00garbage" if f.suffix != ".py" else b"def broken(:\n")
    res = _run(tmp_path)
    e1, _ = _expected()
    np.testing.assert_array_equal(np.array(res["r1"], np.float32), e1)
    assert res["counters"].get("cache_errors", 0) >= 1


def test_corrupt_numba_cache_entries_are_rebuilt(tmp_path):
    """NUMBA_CACHE_DIR (the user's own Numba functions) does not move mnnjit's kernel cache."""
    numba_dir = tmp_path / "numba"
    env = {"NUMBA_CACHE_DIR": str(numba_dir)}
    _run(tmp_path / "kernels", env)
    assert not any(numba_dir.rglob("*.nb*")), "mnnjit's kernels were cached under NUMBA_CACHE_DIR"
    broken = [f for f in (tmp_path / "kernels").rglob("*") if f.is_file() and f.suffix in (".nbi", ".nbc")]
    assert broken, "Numba cached nothing under MNNJIT_CACHE_DIR"
    for f in broken:
        f.write_bytes(b"\x00garbage")
    res = _run(tmp_path / "kernels", env)
    e1, _ = _expected()
    np.testing.assert_array_equal(np.array(res["r1"], np.float32), e1)
    assert res["counters"].get("cache_errors", 0) >= 1
    assert res["counters"].get("compile_errors", 0) == 0


def test_unwritable_cache_dir_is_skipped(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    res = _run(blocker / "cache")
    e1, _ = _expected()
    np.testing.assert_array_equal(np.array(res["r1"], np.float32), e1)
    assert res["counters"].get("cache_errors", 0) >= 1


def test_small_work_does_not_import_numba(tmp_path):
    code = ("import sys, numpy as onp\nimport mnnjit.numpy as np\n"
            "x = np.array(onp.ones(1000, onp.float32))\nv = ((x * 2 + 1).sum(), (x - 3).read())\n"
            "print('numba' in sys.modules)")
    env = dict(os.environ, MNNJIT_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    env.pop("MNNJIT_JIT_THRESHOLD", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_plan_cache_and_cse():
    a = np.random.default_rng(0).random((5, 7), dtype=np.float32)

    def build():
        x = B.wrap(B.as_node(a))
        p = B.binary("mul", x, 3.0)
        q = B.binary("mul", x, 3.0)  # same as p: merged by CSE
        return B.binary("add", B.unary("exp", p), q)

    before = dict(counters)
    text = compiler.explain(build())
    assert "1 merged by CSE" in text and "kernel" in text
    v1 = build().read()
    v2 = build().read()
    assert counters["plan_cache_hits"] > before.get("plan_cache_hits", 0)
    expected = np.exp(a * np.float32(3)) + a * np.float32(3)
    np.testing.assert_allclose(v1, expected, rtol=1e-6)
    np.testing.assert_array_equal(v1, v2)


def test_pool_reuses_buffers_and_views_stay_valid():
    """A chain of groups through transposes and reductions (pooled intermediates)."""
    rng = np.random.default_rng(3)
    a = rng.random((6, 8), dtype=np.float32)
    b = rng.random((8, 6), dtype=np.float32)

    def build():
        x, y = B.wrap(B.as_node(a)), B.wrap(B.as_node(b))
        t = B.unary("exp", B.binary("mul", x, 2.0))          # group 1 (materialised: used twice)
        u = B.binary("add", B.transpose(t), y)                # group 2 reads a transposed view
        w = B.binary("sub", t, B.reduce("reduce_max", t, 1, True))
        return B.binary("add", B.reduce("reduce_sum", u, 0, False), B.reduce("reduce_sum", w, 1, False))

    from helpers_compiler import reference_and_compiled
    expected, got = reference_and_compiled(build)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_threads_setting():
    prev = compiler.get_num_threads()
    try:
        compiler.set_num_threads(1)
        assert compiler.get_num_threads() == 1
        x = B.wrap(B.as_node(np.arange(10, dtype=np.int32)))
        np.testing.assert_array_equal(B.binary("mul", x, x).read(), np.arange(10) ** 2)
    finally:
        compiler.set_num_threads(prev)


def test_threshold_dispatch():
    """Below the threshold nothing is compiled; fused chains compile from the threshold, lone ops from 4x."""
    a = np.ones(100, np.float32)
    x = B.wrap(B.as_node(a))
    prev = compiler.set_threshold(1000)
    try:
        runs = counters["kernel_runs"]
        v = B.binary("mul", B.binary("add", x, 1.0), 3.0).read()
        assert counters["kernel_runs"] == runs
        np.testing.assert_array_equal(v, (a + 1) * 3)
        compiler.set_threshold(100)
        v = B.binary("add", x, 2.0).read()          # a lone op: needs 4 x 100 elements
        assert counters["kernel_runs"] == runs
        v = B.binary("mul", B.binary("add", x, 2.0), 3.0).read()   # a chain: compiled
        assert counters["kernel_runs"] == runs + 1
        np.testing.assert_array_equal(v, (a + 2) * 3)
        compiler.set_threshold(25)
        v = B.binary("add", x, 4.0).read()
        assert counters["kernel_runs"] == runs + 2
        np.testing.assert_array_equal(v, a + 4)
    finally:
        compiler.set_threshold(prev)


def test_debug_output(capsys, monkeypatch):
    monkeypatch.setenv("MNNJIT_DEBUG", "1")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = B.binary("maximum", B.wrap(B.as_node(a)), B.wrap(B.as_node(a[::-1].copy()))).read()
    np.testing.assert_array_equal(v, np.maximum(a, a[::-1]))
    err = capsys.readouterr().err
    assert "[mnnjit] plan:" in err and "kernel maximum" in err


def test_handwritten_kernel_registry():
    from mnnjit.backends.cpu.handwritten import registry as hw
    calls = []

    def my_concat(inputs, attrs):
        calls.append(1)
        return np.concatenate(inputs, axis=attrs["axis"])

    old = hw._KERNELS.get("concat")
    hw.register_cpu_kernel("concat", my_concat, min_size=0)
    try:
        a = np.arange(3000, dtype=np.float32)
        v = B.concat([B.wrap(B.as_node(a)), B.wrap(B.as_node(a))], 0).read()
        np.testing.assert_array_equal(v, np.concatenate([a, a]))
        assert calls
    finally:
        if old is None:
            hw._KERNELS.pop("concat", None)
        else:
            hw._KERNELS["concat"] = old


def test_module_ops_name_what_the_kernel_modules_register():
    """``MODULE_OPS`` (what lookups of other ops answer without importing the kernel modules, and
    so without Numba) is exactly the set of ops the package's ``*_ops.py`` modules register."""
    import importlib
    import pkgutil
    from mnnjit.backends.cpu import handwritten
    from mnnjit.backends.cpu.handwritten import registry as hw

    before = dict(hw._KERNELS)
    hw._KERNELS.clear()
    try:
        for info in pkgutil.iter_modules(handwritten.__path__):
            if info.name.endswith("_ops"):
                importlib.reload(importlib.import_module(f"{handwritten.__name__}.{info.name}"))
        assert set(hw._KERNELS) == set(hw.MODULE_OPS)
    finally:
        hw._KERNELS.clear()
        hw._KERNELS.update(before)


def test_lookup_of_an_op_without_a_kernel_imports_no_kernel_module():
    """A transformer's first forward asks about elementwise ops: answered without Numba."""
    import subprocess
    import sys
    code = ("import sys, numpy as np\n"
            "from mnnjit.graph import Node\n"
            "from mnnjit.backends.cpu.handwritten import registry as hw\n"
            "n = Node('add', (), {}, (4096,), np.dtype('float32'))\n"
            "assert hw.lookup(n) is None\n"
            "assert 'numba' not in sys.modules, 'numba imported'\n"
            "n = Node('pool2d', (), {}, (1,), np.dtype('float32'))\n"
            "hw.lookup(n)\n"
            "assert hw._loaded\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
