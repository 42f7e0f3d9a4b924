"""Helpers shared by the .mnn format tests (paths, manifest, running real MNN)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from shared_paths import SHARED  # noqa: E402
MODELS = os.path.join(SHARED, "models")
CONVERT = os.path.join(SHARED, "tools", "mnn_oracle_convert.py")


def manifest() -> dict:
    with open(os.path.join(MODELS, "MANIFEST.json")) as fh:
        return json.load(fh)["entries"]


MODEL_NAMES = sorted(manifest())


def model_path(name: str) -> str:
    return os.path.join(MODELS, name + ".mnn")


def run_mnn_module(mnn, path: str, name: str, atol: float = 1e-5) -> float:
    """Run ``path`` with real MNN on the stored inputs of manifest entry ``name``; return the
    max abs difference to the stored outputs."""
    e = manifest()[name]
    z = np.load(os.path.join(MODELS, name + ".npz"))
    ins = [i["name"] for i in e["inputs"]]
    outs = [o["name"] for o in e["outputs"]]
    module = mnn.nn.load_module_from_file(path, ins, outs)
    worst, k = 0.0, 0
    while f"in{k}_{ins[0]}" in z:
        xs = []
        for n in ins:
            a = z[f"in{k}_{n}"]
            dt = mnn.expr.int if a.dtype.kind in "iu" else mnn.expr.float
            xs.append(mnn.expr.const(a, list(a.shape), mnn.expr.NCHW, dt))
        for n, y in zip(outs, module.forward(xs)):
            ref = z[f"out{k}_{n}"]
            got = np.array(mnn.expr.convert(y, mnn.expr.NCHW).read()).reshape(ref.shape)
            if ref.size:
                worst = max(worst, float(np.abs(got - ref).max()))
        k += 1
    assert k > 0
    return worst
