"""Every example in examples/ runs, as a script, on small data, and gives the right answers
(real MNN, OpenCV, numpy or a local run as the oracle). examples/quickstart.py has its own test
(tests/examples/test_quickstart.py)."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as onp
import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
MODEL = EXAMPLES / "models" / "small_cnn.mnn"


def run_example(name: str, *args: str, timeout: int = 300) -> str:
    """Run examples/<name> as a script from the project root; its stdout (stderr on failure)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               RAY_USAGE_STATS_ENABLED="0")
    proc = subprocess.run([sys.executable, str(EXAMPLES / name), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


def load_example(name: str):
    """Import examples/<name> as a module (to call its functions in this process)."""
    spec = importlib.util.spec_from_file_location(f"example_{Path(name).stem}", EXAMPLES / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def image_folder(tmp_path_factory) -> Path:
    """Three small images of different sizes made from examples/images/cat.jpg."""
    cv2 = pytest.importorskip("cv2")
    folder = tmp_path_factory.mktemp("images")
    cat = cv2.imread(str(EXAMPLES / "images" / "cat.jpg"))
    for i, (w, h) in enumerate([(64, 48), (40, 72), (96, 96)]):
        crop = cat[i * 40:, i * 60:]
        cv2.imwrite(str(folder / f"img{i}.png"), cv2.resize(crop, (w, h)))  # png: lossless
    (folder / "notes.txt").write_text("not an image")
    return folder


def _real_mnn_probs(path: Path, size: int) -> onp.ndarray:
    """Softmax of the model's logits for one image, preprocessed with OpenCV and run on real MNN."""
    cv2 = pytest.importorskip("cv2")
    pytest.importorskip("MNN")
    import MNN.expr as RF
    import MNN.nn as rnn
    img = cv2.resize(cv2.imread(str(path)), (size, size))[..., ::-1].astype(onp.float32)
    x = ((img - onp.float32([123.68, 116.78, 103.94])) * onp.float32(0.017)).transpose(2, 0, 1)[None].copy()
    net = rnn.load_module_from_file(str(MODEL), ["x"], ["logits"])
    logits = net.forward(RF.const(x, list(x.shape), RF.NCHW)).read()[0].astype(onp.float64)
    e = onp.exp(logits - logits.max())
    return e / e.sum()


def _check_classified(out: str, folder: Path, size: int) -> None:
    """Each image's printed top-2 classes and probabilities are real MNN's."""
    lines = [line for line in out.splitlines() if line.startswith("img")]
    assert [line.split(":")[0] for line in lines] == ["img0.png", "img1.png", "img2.png"]
    for line in lines:
        probs = _real_mnn_probs(folder / line.split(":")[0], size)
        found = re.findall(r"class (\d+) \(([\d.]+)\)", line)
        assert [int(c) for c, _ in found] == list(onp.argsort(-probs)[:2])
        onp.testing.assert_allclose([float(p) for _, p in found], onp.sort(probs)[::-1][:2], atol=1.5e-3)


def test_classify_folder(image_folder):
    _check_classified(run_example("classify_folder.py", str(image_folder), "--size", "64", "--top", "2"),
                      image_folder, 64)


@pytest.mark.parametrize("backend", ["opencl", "npu"])
def test_classify_folder_on_another_backend(image_folder, backend):
    """An available backend gives real MNN's answers; a missing one falls back to the CPU with MNN's message."""
    from mnnjit.backends import registry
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(EXAMPLES / "classify_folder.py"), str(image_folder), "--size", "32",
                           "--top", "2", "--backend", backend], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    if not registry.is_available(backend):
        assert "use 0 (CPU) instead" in proc.stderr  # MNN's message
    _check_classified(proc.stdout, image_folder, 32)


def test_preprocess_pipeline():
    pytest.importorskip("cv2")
    out = run_example("preprocess_pipeline.py", "--size", "64", "--repeat", "2")
    assert re.search(r"mnnjit / OpenCV: [\d.]+x", out)
    diff = float(re.search(r"largest input difference:\s+(\S+)", out).group(1))
    assert diff <= 0.0171  # at most one pixel level (1/255 of the range, times 0.017... of 255)
    top = re.search(r"top class: (\d+) \(on OpenCV's input: (\d+)", out)
    assert top.group(1) == top.group(2)
    probs = _real_mnn_probs(EXAMPLES / "images" / "cat.jpg", 64)
    assert int(top.group(1)) == int(onp.argmax(probs))


def test_property_test_example_runs_and_catches_a_broken_function():
    pytest.importorskip("cv2")
    out = run_example("property_test_preprocessing.py")
    assert out.count(": passed") == 3
    # the property tests are not vacuous: forgetting the BGR -> RGB swap fails them
    example = load_example("property_test_preprocessing.py")
    cv, F, np = example.cv, example.F, example.np

    def no_swap(img, size=example.SIZE):
        if img.shape[-1] == 1:
            img = cv.cvtColor(img, cv.COLOR_GRAY2BGR)
        x = (cv.resize(img, (size, size)).astype(np.float32) - example.MEAN) / example.STD
        return F.convert(np.expand_dims(x, 0), F.NCHW)
    example.preprocess = no_swap
    example.test_shape_dtype_and_format()  # the shape is still right
    with pytest.raises(AssertionError):
        example.test_matches_opencv_and_numpy()


def test_dask_pipeline():
    pytest.importorskip("dask.array")
    out = run_example("dask_pipeline.py", "--images", "24", "--size", "16", "--chunk", "8")
    assert "24 images of 16x16 in 3 blocks (threads)" in out
    assert float(re.search(r"largest difference:\s+(\S+)", out).group(1)) <= 1e-5


def test_ray_batch_inference(image_folder):
    pytest.importorskip("ray", reason="ray cannot be imported (pip install mnnjit[distributed])")
    pytest.importorskip("ray.data", reason="ray.data cannot be imported (pip install 'ray[data]')")
    # one predictor actor: on a 2-core machine a second one mostly adds start-up time
    out = run_example("ray_batch_inference.py", str(image_folder), "--size", "48", "--batch-size", "2",
                      "--workers", "1", timeout=600)
    assert "3 images classified" in out
    rows = re.findall(r"^(img\d\.png): class (\d+) \(([\d.]+)\)$", out, re.M)
    assert [r[0] for r in rows] == ["img0.png", "img1.png", "img2.png"]
    # the same predictor, run here without Ray, gives the same answers
    example = load_example("ray_batch_inference.py")
    import mnnjit.nn as nn
    import mnnjit.numpy as mnp
    predictor = example.Predictor(nn.load_module_from_file(str(MODEL), ["x"], ["logits"]),
                                  mnp.array([123.68, 116.78, 103.94], dtype=mnp.float32),
                                  mnp.array([0.017, 0.017, 0.017], dtype=mnp.float32), 48)
    files = sorted(image_folder.glob("*.png"))
    want = predictor({"path": onp.array([p.name for p in files]),
                      "image": onp.array([p.read_bytes() for p in files], dtype=object)})
    assert [int(r[1]) for r in rows] == want["top_class"].tolist()
    onp.testing.assert_allclose([float(r[2]) for r in rows], want["prob"], atol=1e-3)
