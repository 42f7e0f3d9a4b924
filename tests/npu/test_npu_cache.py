"""Compiled partitions are cached on disk: a second process with a warm cache recompiles nothing
(each bridge loads its artifacts: OpenVINO's IR and compiled blob, ONNX Runtime's optimized model)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from npu_helpers import BRIDGES, entries

pytestmark = pytest.mark.skipif(not entries() or not BRIDGES, reason="needs ../shared models and an NPU SDK")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = textwrap.dedent("""
    import json, sys
    sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests", sys.argv[1] + "/tests/npu"]
    import mnnjit as MNN
    from mnnjit import settings
    from npu_helpers import cases, forward, load, rel_err
    res = {}
    for bridge in json.loads(sys.argv[2]):
        for name in ("convbn", "controlflow"):
            settings.reset_counters()
            rt = MNN.nn.create_runtime_manager({"backend": 5, "npu": {"bridge": bridge}})
            rt.set_cache(sys.argv[3])
            m = MNN.nn.load_module_from_file(__import__("npu_helpers").model_path(name),
                                             *__import__("npu_helpers").io_names(name),
                                             runtime_manager=rt, shape_mutable=False)
            cpu = load(name)
            for xs in cases(name):
                for g, e in zip(forward(m, xs), forward(cpu, xs)):
                    assert rel_err(g, e) <= 1e-4
            res[bridge + "/" + name] = [settings.counters["npu_partitions_compiled"],
                                        settings.counters["npu_partitions_from_cache"]]
    print("RESULT" + json.dumps(res))
""")


def _run(tmp_path, cache_file) -> dict:
    # the shared kernel cache when the run has one (the partitions go to set_cache's path)
    env = dict(os.environ, MNNJIT_CACHE_DIR=os.environ.get("MNNJIT_CACHE_DIR") or str(tmp_path / "kernels"),
               PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", CHILD, ROOT, json.dumps(BRIDGES), str(cache_file)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    line = [x for x in out.stdout.splitlines() if x.startswith("RESULT")][0]
    return json.loads(line[6:])


def test_second_process_recompiles_nothing(tmp_path) -> None:
    cache_file = tmp_path / "user.cache"        # MNN's set_cache: partitions go to user.cache.npu/
    cold = _run(tmp_path, cache_file)
    assert (tmp_path / "user.cache.npu").is_dir()
    for key, (compiled, loaded) in cold.items():
        assert compiled >= 1 and loaded == 0, (key, cold)
    warm = _run(tmp_path, cache_file)
    for key, (compiled, loaded) in warm.items():
        assert compiled == 0 and loaded == cold[key][0], (key, warm)
