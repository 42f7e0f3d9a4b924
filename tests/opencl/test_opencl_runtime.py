"""The OpenCL runtime around the kernels: the program cache (a second process with a warm cache
compiles nothing), MNN's cache file, build errors with their log, a kernel failing on the device,
device listing and selection, and a machine with no OpenCL platform (one warning, then the CPU)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from mnnjit import settings
from mnnjit.backends.opencl import device as cl_device
from mnnjit.backends.opencl.runtime import OpenCLBuildError
from ocl_helpers import const, lowered, node, placeholder, reference

ROOT = Path(__file__).resolve().parents[2]

_RUN_CONVBN = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    import mnnjit as MNN
    from mnnjit import settings
    models = sys.argv[1]
    rt = MNN.nn.create_runtime_manager(({"backend": 3},))
    m = MNN.nn.load_module_from_file(os.path.join(models, "convbn.mnn"), ["x"], ["logits"], runtime_manager=rt)
    settings.set_threshold(0)
    x = MNN.expr.const(np.ones((1, 3, 32, 32), np.float32), [1, 3, 32, 32])
    y = m.forward(x).read()
    print(json.dumps({k: v for k, v in settings.counters.items() if k.startswith("opencl")} | {"y": float(y.sum())}))
""")


def _subprocess(code: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.update(env or {})
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=e,
                          timeout=300, cwd=str(ROOT))


def test_second_process_with_a_warm_cache_compiles_no_program(ocl) -> None:
    from shared_paths import MODELS
    if not os.path.isdir(MODELS):
        pytest.skip("shared models not available")
    first = _subprocess(_RUN_CONVBN, MODELS)  # warms the cache (a no-op when this session already did)
    assert first.returncode == 0, first.stderr
    second = _subprocess(_RUN_CONVBN, MODELS)
    assert second.returncode == 0, second.stderr
    got = json.loads(second.stdout.strip().splitlines()[-1])
    assert got.get("opencl_programs_built", 0) == 0, got
    assert got.get("opencl_program_disk_hits", 0) >= 3, got
    assert got["y"] == json.loads(first.stdout.strip().splitlines()[-1])["y"]


def test_cache_file_round_trip(ocl, tmp_path) -> None:
    """MNN's one-file cache: written from the device's cache directory, read back into a fresh one."""
    from mnnjit.backends.opencl.cache import DiskCache
    x = placeholder((3, 70))
    lowered(ocl, [node("tanh", [x])], {x: np.zeros((3, 70), np.float32)})  # at least one program
    path = tmp_path / "mnn_opencl.cache"
    n = ocl.save_cache(str(path))
    assert n >= 1 and path.stat().st_size > 0
    fresh = DiskCache(ocl.rt.cache.dir.name, root=tmp_path / "fresh")
    assert fresh.import_bundle(path) == n
    assert len(list(fresh.dir.glob("*.bin"))) == n
    other = DiskCache("another-device", root=tmp_path / "other")
    assert other.import_bundle(path) == 0  # another device's binaries are not taken
    (tmp_path / "junk").write_text("not a cache")
    with pytest.raises(ValueError, match="not an mnnjit OpenCL cache file"):
        fresh.import_bundle(tmp_path / "junk")


def test_build_error_names_the_program_and_carries_the_log(ocl) -> None:
    with pytest.raises(OpenCLBuildError) as info:
        ocl.rt.program("broken-kernel", "__kernel void k(__global float *a) { a[0] = undefined_name; }")
    msg = str(info.value)
    assert "broken-kernel" in msg and "undefined_name" in msg and "build log" in msg
    assert info.value.name == "broken-kernel" and "undefined_name" in info.value.log


def test_kernel_failing_on_the_device_falls_back_to_the_cpu(ocl) -> None:
    """A launch the driver refuses (here: a local size larger than the device allows) leaves that step
    to the host, with a warning, and the graph still gives the right answer."""
    rng = np.random.default_rng(3)
    x = placeholder((2, 4, 9, 9))
    y = node("pool2d", [node("exp", [x])], kind="max", kernel=(2, 2), stride=(2, 2), pads=(0, 0, 0, 0),
             out=(4, 4), count_include_pad=True)
    out = node("add", [y, const(np.float32(1.0))])
    xv = rng.standard_normal((2, 4, 9, 9)).astype(np.float32)
    g = lowered(ocl, [out], {x: xv})
    step = next(st for st in g.steps if st.node.op == "pool2d")
    launch = step.launches[0]
    launch.lsize = (ocl.rt.max_wg * 2, 1, 1)
    launch.gsize = (ocl.rt.max_wg * 2, launch.gsize[1], launch.gsize[2])
    with pytest.warns(RuntimeWarning, match="runs on the CPU"):
        got = g.run([xv])[0]
    np.testing.assert_allclose(got, reference([out], {x: xv})[0], rtol=1e-6)
    assert [lbl for lbl, _ in g.fallbacks] == ["pool2d"]
    np.testing.assert_allclose(g.run([xv])[0], got)  # later runs: the host step, no new warning


def test_device_listing_and_selection(ocl, monkeypatch) -> None:
    devs = cl_device.list_devices()
    assert devs and all(d.compute_units > 0 and d.global_mem_bytes > 0 for d in devs)
    info = ocl.device
    assert info.name in cl_device.format_devices()
    monkeypatch.setenv(cl_device.ENV_DEVICE, info.index)
    assert cl_device.select_device()[0].name == info.name
    monkeypatch.setenv(cl_device.ENV_DEVICE, info.name[:5].upper())
    assert cl_device.select_device()[0].name == info.name
    monkeypatch.setenv(cl_device.ENV_DEVICE, "no-such-device-anywhere")
    with pytest.raises(cl_device.NoOpenCL, match="matches no device"):
        cl_device.select_device()
    assert "opencl (" in ocl.describe() and settings.cache_dir().name


_NO_PLATFORM = textwrap.dedent("""
    import os, sys, warnings
    import numpy as np
    import pyopencl
    pyopencl.get_platforms = lambda: []          # an ICD loader that finds no platform
    warnings.simplefilter("always")
    import mnnjit as MNN
    from mnnjit.backends import registry
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rts = [MNN.nn.create_runtime_manager(({"backend": b},)) for b in (3, "OPENCL", 4)]
    print("names", [rt.backend_name for rt in rts])
    print("warnings", sum("OpenCL backend unavailable" in str(w.message) for w in caught))
    m = MNN.nn.load_module_from_file(os.path.join(sys.argv[1], "convbn.mnn"), ["x"], ["logits"],
                                     runtime_manager=rts[0])
    x = MNN.expr.const(np.ones((1, 3, 32, 32), np.float32), [1, 3, 32, 32])
    print("sum", float(m.forward(x).read().sum()))
""")


def test_no_platform_warns_once_and_runs_on_the_cpu(ocl) -> None:
    from shared_paths import MODELS
    if not os.path.isdir(MODELS):
        pytest.skip("shared models not available")
    res = _subprocess(_NO_PLATFORM, MODELS)
    assert res.returncode == 0, res.stderr
    lines = dict(line.split(" ", 1) for line in res.stdout.strip().splitlines())
    assert lines["names"] == "['cpu', 'cpu', 'cpu']"
    assert lines["warnings"] == "1"
    assert "Can't Find type=3 backend" in res.stderr
    import mnnjit as MNN
    m = MNN.nn.load_module_from_file(os.path.join(MODELS, "convbn.mnn"), ["x"], ["logits"])
    want = float(m.forward(MNN.expr.const(np.ones((1, 3, 32, 32), np.float32), [1, 3, 32, 32])).read().sum())
    assert abs(float(lines["sum"]) - want) < 1e-4


def test_runtime_manager_set_cache_and_update_cache_write_the_opencl_cache_file(ocl, tmp_path) -> None:
    import mnnjit as MNN
    x = placeholder((3, 70))
    lowered(ocl, [node("sigmoid", [x])], {x: np.zeros((3, 70), np.float32)})
    path = tmp_path / "model.cache"
    rt = MNN.nn.create_runtime_manager(({"backend": 3},))
    rt.set_cache(str(path))  # no file yet: nothing read
    rt.update_cache()
    data = json.loads(path.read_text())
    assert data["magic"] == "mnnjit-opencl-cache" and len(data["binaries"]) >= 1
    rt2 = MNN.nn.create_runtime_manager(({"backend": "OPENCL"},))
    rt2.set_cache(str(path))  # read back (the binaries are already in the cache directory)
    cpu = MNN.nn.create_runtime_manager(({"backend": 0},))
    other = tmp_path / "cpu.cache"
    cpu.set_cache(str(other))
    cpu.update_cache()  # the CPU keeps no cache file of its own: an empty file, as before
    assert other.exists() and other.read_text() == ""
