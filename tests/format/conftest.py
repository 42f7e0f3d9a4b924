"""Shared fixtures for the .mnn format tests."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fmt_helpers import CONVERT


@pytest.fixture(scope="session")
def mnn():
    """Real MNN (the oracle); tests using it skip when it is not installed."""
    return pytest.importorskip("MNN")


@pytest.fixture(scope="session")
def convert(tmp_path_factory, mnn):
    """Run real MNN's converter (fixture maker) on an ONNX file; cached per flag set."""
    out_dir = tmp_path_factory.mktemp("converted")
    cache: dict = {}

    def run(onnx_path: str, *flags: str, tag: str) -> str:
        key = (onnx_path, flags)
        if key not in cache:
            out = str(out_dir / f"{tag}.mnn")
            res = subprocess.run([sys.executable, CONVERT, "-f", "ONNX", "--modelFile", onnx_path,
                                  "--MNNModel", out, *flags], capture_output=True, text=True,
                                 timeout=120)
            if not os.path.exists(out):
                pytest.fail(f"converter failed: {res.stdout}\n{res.stderr}")
            cache[key] = out
        return cache[key]

    return run
