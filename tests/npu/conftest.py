"""NPU delegate tests: every compiled partition goes to a cache directory of this test session."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def npu_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Partitions compile into a per-session cache (never the user's), and settings start clean."""
    from mnnjit.backends.npu import options
    root = tmp_path_factory.getbasetemp() / "npu-cache"
    options.reset()
    options.configure(cache_dir=str(root))
    for var in ("MNNJIT_NPU_BRIDGE", "MNNJIT_NPU_DEVICE", "MNNJIT_NPU_PROVIDERS", "MNNJIT_NPU_MIN_NODES",
                "MNNJIT_NPU_MAX_PARTITIONS", "MNNJIT_NPU_THREADS"):
        monkeypatch.delenv(var, raising=False)
    yield root
    options.reset()
