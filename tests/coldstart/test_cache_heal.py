"""The kernel cache heals (issue 27 section 2): every kind of damage on every kind of compiled
artifact (generated kernel sources, their Numba index and machine code, the hand-written kernels'
Numba index and machine code) is dropped and rebuilt with one warning naming the file; a read-only
warm cache is used as it is; with nothing writable kernels compile in memory after one warning;
nothing is written outside ``MNNJIT_CACHE_DIR``. Each case ends in correct results.

Every case runs in a fresh process on a private cache, with small kernels (two generated
elementwise kernels, the two float16 conversion kernels)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, os, sys, warnings
ro = os.environ.get("TEST_READONLY_DIR")
pkg = os.environ["TEST_PKG_DIR"]
outside = []
_W = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

def _hook(event, args):
    # writes under the package are recorded; under TEST_READONLY_DIR they fail as on a read-only
    # file system (the tests run as root, whom permission bits do not stop)
    paths, write = (), False
    if event == "open" and args[0] is not None and not isinstance(args[0], int):
        flags = args[2] if isinstance(args[2], int) else 0
        write = bool(flags & _W) or (isinstance(args[1], str) and any(c in args[1] for c in "wax+"))
        paths = (args[0],)
    elif event in ("os.mkdir", "os.remove", "os.rmdir", "os.chmod", "os.truncate"):
        paths, write = (args[0],), True
    elif event == "os.rename":
        paths, write = (args[0], args[1]), True
    if not write:
        return
    for p in paths:
        p = os.path.abspath(os.fsdecode(p))
        if p.startswith(pkg + os.sep):
            outside.append(p)
        if ro and (p == ro or p.startswith(ro + os.sep)):
            raise PermissionError(13, "Read-only file system", p)

sys.addaudithook(_hook)
import numpy as onp
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import mnnjit.numpy as np
    from mnnjit import compiler
    from mnnjit.backends.cpu import fp16
    compiler.set_threshold(0)
    x = np.array(onp.arange(24, dtype=onp.float32).reshape(4, 6))
    r1 = ((x * 2 + 1) - x).read()
    r2 = ((x - 1) * (x + 2)).read()
    h = fp16.to_f16(onp.arange(16, dtype=onp.float32))
    back = fp16.to_f32(h)
from mnnjit.backends.cpu.runtime import cache
hw = {f"{k.__name__}": [sum(k.stats.cache_misses.values()), sum(k.stats.cache_hits.values())]
      for k in (fp16._to_f16_kernel, fp16._to_f32_kernel)}
print(json.dumps({
    "r1": r1.tolist(), "r2": r2.tolist(), "h": h.view(onp.uint16).tolist(), "back": back.tolist(),
    "counters": dict(compiler.counters), "hw": hw, "root": str(cache.root()),
    "warnings": [str(w.message) for w in caught if type(w.message).__name__ == "KernelCacheWarning"],
    "outside": outside}))
"""


def _run(env_extra: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), MNNJIT_COMPILE="sync",
               TEST_PKG_DIR=str(ROOT / "mnnjit"))
    for k in ("MNNJIT_DEBUG", "MNNJIT_CACHE_DIR", "TEST_READONLY_DIR"):
        env.pop(k, None)
    env.update(env_extra)
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _check_results(res: dict) -> None:
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(np.array(res["r1"], np.float32), (x * 2 + 1) - x)
    np.testing.assert_array_equal(np.array(res["r2"], np.float32), (x - 1) * (x + 2))
    want = np.arange(16, dtype=np.float32)
    np.testing.assert_array_equal(np.array(res["h"], np.uint16), want.astype(np.float16).view(np.uint16))
    np.testing.assert_array_equal(np.array(res["back"], np.float32), want)
    assert res["outside"] == [], f"written inside the package: {res['outside']}"


def _artifacts(tree: Path) -> dict:
    """The cache files by artifact: generated sources, generated index/data (by kernel), the
    hand-written kernels' index/data (by function)."""
    gen_src = sorted(tree.glob("kernels-v*/k_*.py"))
    gen = {p.stem: (next(p.parent.glob(f"__pycache__/{p.stem}.*.nbi")),
                    next(p.parent.glob(f"__pycache__/{p.stem}.*.1.nbc"))) for p in gen_src}
    hw = {}
    for fn in ("_to_f16_kernel", "_to_f32_kernel"):
        nbi = next(tree.glob(f"numba/backends/cpu/fp16.{fn}-*.nbi"))
        hw[fn] = (nbi, next(nbi.parent.glob(nbi.name[:-4] + ".1.nbc")))
    return {"gen_src": gen_src, "gen": gen, "hw": hw}


def _damage(path: Path, kind: str) -> None:
    data = path.read_bytes()
    if kind == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif kind == "emptied":
        path.write_bytes(b"")
    elif kind == "garbage":
        path.write_bytes(os.urandom(max(64, len(data) // 4)))
    elif kind == "llvm":
        # machine code LLVM refuses ("Invalid bitcode signature" / "Invalid record") inside a file
        # whose checksum is valid: the load itself fails, not the file check
        from mnnjit.backends.cpu.runtime import cache as kc
        payload = kc._unwrap(data, str(path))
        assert b"BC\xc0\xde" in payload, "not a machine-code file"
        payload = payload.replace(b"BC\xc0\xde", b"XX\xc0\xde", 1)
        path.write_bytes(kc.MAGIC + hashlib.sha256(payload).digest() + payload)
    else:
        raise ValueError(kind)


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory) -> Path:
    """A cache directory holding the script's four kernels (compiled once)."""
    d = tmp_path_factory.mktemp("warm-cache")
    numba_dir = tmp_path_factory.mktemp("numba-cache-dir")
    res = _run({"MNNJIT_CACHE_DIR": str(d), "NUMBA_CACHE_DIR": str(numba_dir)})
    _check_results(res)
    assert res["counters"].get("kernels_compiled") == 2 and res["warnings"] == []
    assert not any(numba_dir.rglob("*.nb*")), "mnnjit's kernels were cached under NUMBA_CACHE_DIR"
    tree = Path(res["root"])
    assert tree.parent == d
    _artifacts(tree)            # all present, each where the layout says
    return d


def _copy(warm: Path, dst: Path) -> Path:
    shutil.copytree(warm, dst)
    return next(dst.iterdir())


# (artifact, file, damage): every damage kind hits a generated and a hand-written kernel; two
# cases keep the processes few
CASES = {
    "truncated+emptied": [("gen", 0, 0, "truncated"), ("hw", 0, 1, "truncated"),
                          ("gen", 1, 1, "emptied"), ("hw", 1, 0, "emptied")],
    "garbage+llvm": [("gen", 0, 0, "garbage"), ("hw", 0, 0, "garbage"),
                     ("gen", 1, 1, "llvm"), ("hw", 1, 1, "llvm")],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_damaged_entries_are_dropped_and_rebuilt(warm_cache, tmp_path, case):
    """Index (.nbi) or machine code (.nbc) truncated, emptied, overwritten with garbage, or holding
    code LLVM refuses; a generated source overwritten with non-UTF-8 bytes."""
    tree = _copy(warm_cache, tmp_path / "c")
    art = _artifacts(tree)
    damaged = []
    for kind, which, file, how in CASES[case]:
        files = art[kind][sorted(art[kind])[which]]
        _damage(files[file], how)
        damaged.append(files[file])
    if case == "garbage+llvm":      # a generated source overwritten with non-UTF-8 bytes
        src = art["gen_src"][0]
        src.write_bytes(b"\xff\xfe\x00kernel = 1\n\x80\x81")
        damaged.append(src)
    res = _run({"MNNJIT_CACHE_DIR": str(tmp_path / "c")})
    _check_results(res)
    for p in damaged:
        named = [w for w in res["warnings"] if str(p) in w]
        assert len(named) == 1, (p, res["warnings"])
    assert len(res["warnings"]) == len(damaged)
    # the damaged kernels were compiled again (a rewritten source keeps its valid machine code)
    assert res["counters"].get("kernels_compiled") == 2
    assert all(m == 1 for m, _ in res["hw"].values())
    again = _run({"MNNJIT_CACHE_DIR": str(tmp_path / "c")})   # healed: all loads, no warning
    _check_results(again)
    assert again["warnings"] == [] and again["counters"].get("kernels_compiled", 0) == 0
    assert all(m == 0 and h == 1 for m, h in again["hw"].values())


def test_read_only_warm_cache_is_used_as_is(warm_cache, tmp_path):
    d = tmp_path / "ro"
    _copy(warm_cache, d)
    before = {p: p.stat().st_mtime_ns for p in d.rglob("*")}
    res = _run({"MNNJIT_CACHE_DIR": str(d), "TEST_READONLY_DIR": str(d)})
    _check_results(res)
    assert res["warnings"] == []
    assert res["counters"].get("kernels_compiled", 0) == 0 and res["counters"].get("kernel_disk_hits") == 2
    assert all(m == 0 and h == 1 for m, h in res["hw"].values())
    assert {p: p.stat().st_mtime_ns for p in d.rglob("*")} == before


def test_read_only_cache_missing_a_kernel_compiles_it_in_memory(warm_cache, tmp_path):
    d = tmp_path / "ro"
    tree = _copy(warm_cache, d)
    art = _artifacts(tree)
    for p in list(art["hw"].values())[0] + next(iter(art["gen"].values())):
        p.unlink()
    res = _run({"MNNJIT_CACHE_DIR": str(d), "TEST_READONLY_DIR": str(d)})
    _check_results(res)
    assert res["counters"].get("kernels_compiled") == 1
    assert 1 <= len(res["warnings"]) <= 2 and all("in memory" in w for w in res["warnings"])


def test_nowhere_writable_compiles_in_memory_with_one_warning(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    res = _run({"HOME": str(blocker / "home"), "XDG_CACHE_HOME": str(blocker / "xdg")})
    _check_results(res)
    assert len(res["warnings"]) == 1 and "in memory" in res["warnings"][0]
    assert str(blocker) in res["warnings"][0]
    assert res["counters"].get("kernels_compiled") == 2
