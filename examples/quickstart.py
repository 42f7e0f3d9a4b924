"""mnnjit quick start: a pymnn script with only the import lines changed.

Arrays, an image preprocessing pipeline, and a .mnn model (examples/models/small_cnn.mnn: a small CNN
converted by MNN's converter from ONNX) run on the CPU.

Run from the project root: python examples/quickstart.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import mnnjit as MNN  # noqa: F401  (pymnn: import MNN)
import mnnjit.cv as cv  # pymnn: import MNN.cv as cv
import mnnjit.expr as F  # pymnn: import MNN.expr as F
import mnnjit.nn as nn  # pymnn: import MNN.nn as nn
import mnnjit.numpy as np  # pymnn: import MNN.numpy as np

HERE = Path(__file__).resolve().parent


def arrays() -> None:
    """Arrays: printing, arithmetic, shape, read_as_tuple."""
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    print(x)
    print(x * 2)
    print("shape:", x.shape, "dtype:", x.dtype)
    print("read_as_tuple:", x.read_as_tuple())


def image(path: Path):
    """Image preprocessing: read, resize to 224, BGR -> RGB, per-channel mean; returns the network input."""
    img = cv.imread(str(path))
    print("image:", img.shape, img.dtype, img.data_format)
    img = cv.resize(img, (224, 224))
    img = img[..., ::-1]
    print("per-channel mean (RGB):", img.mean([0, 1]))
    x = (img.astype(np.float32) - [123.68, 116.78, 103.94]) * [0.017, 0.017, 0.017]
    x = np.expand_dims(x, 0)
    x = F.convert(x, F.NC4HW4)
    print("network input:", x.shape, x.data_format)
    return x


def model(path: Path, x) -> None:
    """Run a .mnn model (a small CNN taking [N, 3, H, W] images) on the CPU and print its top classes."""
    net = nn.load_module_from_file(str(path), ["x"], ["logits"])
    logits = net.forward(x)
    probs = F.softmax(logits, -1)
    top = np.argsort(-probs, axis=-1)[0, :3]
    print("model output:", logits.shape, "top-3 classes:", top.read().tolist())


def main() -> None:
    """Run the quick start on the image shipped in examples/images/."""
    arrays()
    images = sorted((HERE / "images").glob("*.jpg"))
    if not images:
        sys.exit("examples/images/ has no .jpg image")
    x = image(images[0])
    model(HERE / "models" / "small_cnn.mnn", x)


if __name__ == "__main__":
    main()
