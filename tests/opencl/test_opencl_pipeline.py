"""A whole pipeline on OpenCL: an image decoded and resized with mnnjit.cv, normalised with
mnnjit.numpy (a fused uint8 -> float kernel on the device), fed to MobileNetV2 loaded with
``backend=3``; the answer matches the same pipeline on the CPU backend."""
from __future__ import annotations

import os
from pathlib import Path

import numpy
import pytest

import mnnjit as MNN
import mnnjit.cv as cv
import mnnjit.numpy as np
from mnnjit import settings
from mnnjit.backends import registry
from ocl_helpers import assert_close

from shared_paths import MODELS  # noqa: E402

F = MNN.expr
IMAGE = Path(__file__).resolve().parents[2] / "examples" / "images" / "cat.jpg"
MEAN = [123.68, 116.78, 103.94]
SCALE = [0.017, 0.017, 0.017]


def _preprocess(data: bytes):
    img = cv.imdecode(data)
    img = cv.resize(img, (224, 224))
    img = cv.cvtColor(img, cv.COLOR_BGR2RGB)
    x = (img.astype(np.float32) - MEAN) * SCALE
    return F.convert(np.expand_dims(x, 0), F.NCHW)


@pytest.mark.skipif(not os.path.isdir(MODELS) or not IMAGE.exists(), reason="model or image missing")
def test_cv_pipeline_feeds_a_model_on_opencl(ocl) -> None:
    data = IMAGE.read_bytes()
    x_cpu = _preprocess(data).read()
    settings.set_threshold(0)
    try:
        with registry.using("opencl"):
            runs = settings.counters["kernel_runs"]
            x = _preprocess(data)
            x_ocl = x.read()
            assert settings.counters["kernel_runs"] > runs  # the normalisation ran as a device kernel
    finally:
        settings.set_threshold(None)
    assert_close(x_ocl, x_cpu, rtol=1e-6)
    path = os.path.join(MODELS, "mobilenetv2.mnn")
    rt = MNN.nn.create_runtime_manager(({"backend": "OPENCL"},))
    net = MNN.nn.load_module_from_file(path, ["x"], ["logits"], runtime_manager=rt)
    cpu_net = MNN.nn.load_module_from_file(path, ["x"], ["logits"])
    got = net.forward(x).read()
    want = cpu_net.forward(F.const(x_cpu, list(x_cpu.shape), F.NCHW)).read()
    assert not getattr(net._last_plan, "plan", net._last_plan).fallbacks
    assert_close(got, want, rtol=1e-4)
    assert int(numpy.argmax(got)) == int(numpy.argmax(want))
