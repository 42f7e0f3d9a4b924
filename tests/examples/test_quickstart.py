"""The README's quick start runs, and its model step gives real MNN's answer on the same input."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as onp
import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_quickstart_runs():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "examples/quickstart.py"], cwd=ROOT, capture_output=True, text=True,
                         timeout=600, env=env)
    assert out.returncode == 0, out.stderr
    assert "array([[2., 4.]," in out.stdout
    assert "network input: [1, 3, 224, 224] data_format.NC4HW4" in out.stdout
    assert "top-3 classes:" in out.stdout


def test_quickstart_model_matches_real_mnn():
    MNN = pytest.importorskip("MNN")
    import MNN.expr as RF
    import MNN.nn as rnn

    import mnnjit.expr as F
    import mnnjit.nn as nn

    rng = onp.random.default_rng(0)
    image = rng.integers(0, 256, (1, 224, 224, 3)).astype(onp.float32) * 0.017 - 2.0
    path = str(ROOT / "examples" / "models" / "small_cnn.mnn")
    ours = nn.load_module_from_file(path, ["x"], ["logits"]).forward(
        F.convert(F.const(image, image.shape, F.NHWC), F.NC4HW4))
    theirs = rnn.load_module_from_file(path, ["x"], ["logits"]).forward(
        RF.convert(RF.const(image, list(image.shape), RF.NHWC), RF.NC4HW4))
    want = theirs.read()
    onp.testing.assert_allclose(ours.read(), want, atol=1e-3 * max(1.0, float(onp.abs(want).max())))
