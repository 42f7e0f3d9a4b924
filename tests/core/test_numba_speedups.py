"""mnnjit.backends.cpu.runtime.numba_speedups computes what Numba's own analyses compute.

Each replaced analysis runs beside Numba's original on every call while a parallel kernel with
inlined helpers compiles (the results must be equal), and the machine code of a kernel compiled
with the replacements equals the code Numba's originals produce.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (installs the speedups)
from mnnjit.backends.cpu.runtime import numba_speedups as S

numba = pytest.importorskip("numba")
from numba.core import analysis, inline_closurecall, ir, ir_utils  # noqa: E402
from numba.parfors import parfor  # noqa: E402

pytestmark = pytest.mark.skipif(not S.installed(), reason="speedups not installed for this Numba")


def _make_kernel():
    """A fresh parallel function (no cache) with inlined helpers, branches and several loops."""
    @numba.njit(inline="always")
    def clamp(v, lo, hi):
        if v < lo:
            return lo
        if v > hi:
            return hi
        return v

    @numba.njit(inline="always")
    def row_sum(x, i, act):
        s = np.float32(0.0)
        r = x[i]
        for j in range(r.shape[0]):
            t = r[j] * np.float32(2.0)
            if act == 1:
                t = clamp(t, np.float32(0.0), np.float32(6.0))
            s += t
        return s

    @numba.njit(parallel=True)
    def kern(x, out, act, scale):
        n = x.shape[0]
        tmp = np.empty(n, np.float32)
        for i in numba.prange(n):
            a = row_sum(x, i, act)
            b = a
            c = b * scale if act else b
            tmp[i] = c
        for i in numba.prange(n):
            v = tmp[i]
            w = v
            for k in range(3):
                if w > 1:
                    w = w - np.float32(1.0)
                else:
                    w = clamp(w, np.float32(-1.0), np.float32(1.0))
            out[i] = w + v
        return out

    return kern


def _args():
    x = np.random.default_rng(0).standard_normal((37, 11)).astype(np.float32)
    return x, np.empty(37, np.float32), 1, np.float32(0.5)


def _norm_asm(text: str) -> str:
    text = re.sub(r"0x[0-9a-f]{6,}", "ADDR", text)
    return re.sub(r"\b[0-9a-f]{20,}\b", "HASH", text)


def test_analyses_equal_numbas_on_a_parallel_kernel(monkeypatch):
    orig = S.originals()
    calls = {"cp": 0, "live": 0}

    def checked_cp(blocks, typemap):
        ours = S.copy_propagate(blocks, typemap)
        theirs = orig["copy_propagate"](blocks, typemap)
        assert ours == theirs
        calls["cp"] += 1
        return ours

    def checked_live(cfg, blocks, use, defs):
        ours = S.compute_live_map(cfg, blocks, use, defs)
        theirs = orig["compute_live_map"](cfg, blocks, use, defs)
        assert ours == theirs
        calls["live"] += 1
        return ours

    monkeypatch.setattr(ir_utils, "copy_propagate", checked_cp)
    monkeypatch.setattr(parfor, "copy_propagate", checked_cp)
    for mod in (analysis, ir_utils, parfor):
        monkeypatch.setattr(mod, "compute_live_map", checked_live)
    kern = _make_kernel()
    x, out, act, scale = _args()
    got = kern(x, out, act, scale)
    assert calls["cp"] > 0 and calls["live"] > 0
    tmp = np.clip(x * 2, 0, 6).sum(1, dtype=np.float32) * scale
    w = tmp.copy()
    for _ in range(3):
        w = np.where(w > 1, w - 1, np.clip(w, -1, 1))
    np.testing.assert_allclose(got, w + tmp, rtol=1e-5)


def test_machine_code_equals_numbas(monkeypatch):
    x, out, act, scale = _args()
    ours = _make_kernel()
    ours(x, out, act, scale)
    asm_ours = _norm_asm(ours.inspect_asm(ours.signatures[0]))
    orig = S.originals()
    monkeypatch.setattr(ir_utils, "copy_propagate", orig["copy_propagate"])
    monkeypatch.setattr(ir_utils, "init_copy_propagate_data", orig["init_copy_propagate_data"])
    monkeypatch.setattr(parfor, "copy_propagate", orig["copy_propagate"])
    for mod in (analysis, ir_utils, parfor):
        monkeypatch.setattr(mod, "compute_live_map", orig["compute_live_map"])
    monkeypatch.setattr(inline_closurecall, "copy", orig["inline_copy_module"])
    monkeypatch.setattr(ir.FunctionIR, "copy", orig["FunctionIR.copy"])
    theirs = _make_kernel()
    theirs(x, out, act, scale)
    asm_theirs = _norm_asm(theirs.inspect_asm(theirs.signatures[0]))
    # mangled names carry per-definition numbers; the code must be the same
    strip = lambda s: re.sub(r"_ZN\w+(\", \d+)?", "SYM", s)  # noqa: E731
    assert len(asm_ours) > 10000
    assert strip(asm_ours) == strip(asm_theirs)


_CACHED_KERNEL = '''
import sys
import numpy as np
from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401
import numba

@numba.njit(parallel=True, cache=True)
def k(x, out):
    for i in numba.prange(0, x.shape[0]):
        s = np.float32(0.0)
        for j in range(x.shape[1]):
            s += x[i, j] * np.float32(j)
        out[i] = s
    for i in numba.prange(x.shape[0]):
        out[i] += np.float32(i)
    return out

x = np.arange(60, dtype=np.float32).reshape(12, 5)
got = k(x, np.empty(12, np.float32))
want = (x * np.arange(5, dtype=np.float32)).sum(1) + np.arange(12, dtype=np.float32)
assert np.array_equal(got, want), (got, want)
print("hits", sum(k.stats.cache_hits.values()), "misses", sum(k.stats.cache_misses.values()))
'''


def test_parallel_kernel_with_link_only_gufuncs_runs_compiled_and_from_cache(tmp_path):
    """The gufunc libraries get no machine code of their own: the kernel runs right after its
    compile and, loaded from the disk cache, in a new process."""
    import os
    import subprocess
    import sys
    src = tmp_path / "cached_kernel.py"
    src.write_text(_CACHED_KERNEL)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(os.path.dirname(
                   os.path.abspath(__file__))))] + sys.path))
    outs = [subprocess.run([sys.executable, str(src)], env=env, capture_output=True, text=True,
                           timeout=300) for _ in range(2)]
    for o in outs:
        assert o.returncode == 0, o.stderr[-2000:]
    assert "misses 1" in outs[0].stdout
    assert "hits 1" in outs[1].stdout


def test_a_link_only_library_makes_its_code_when_asked():
    """A gufunc library whose address is asked for after all (a caller Numba does not make
    today) gets its machine code then."""
    from numba.core import codegen
    libs = []
    orig = codegen.CPUCodeLibrary._finalize_final_module

    def spy(self):
        if getattr(self, "_mnnjit_link_only", False):
            libs.append(self)
        return orig(self)

    codegen.CPUCodeLibrary._finalize_final_module = spy
    try:
        kern = _make_kernel()
        kern(*_args())
    finally:
        codegen.CPUCodeLibrary._finalize_final_module = orig
    assert libs and all(lib._mnnjit_deferred for lib in libs)
    lib = libs[0]
    name = next(f.name for f in lib.get_defined_functions() if f.name.startswith("__gufunc__")
                or "parfor_gufunc" in f.name)
    assert lib.get_pointer_to_function(name) != 0
    assert not lib._mnnjit_deferred
