"""mnnjit quick start: a pymnn script with only the import lines changed.

Run from the project root: python examples/quickstart.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import mnnjit as MNN  # noqa: F401  (pymnn: import MNN)
import mnnjit.cv as cv  # pymnn: import MNN.cv as cv
import mnnjit.expr as F  # pymnn: import MNN.expr as F
import mnnjit.numpy as np  # pymnn: import MNN.numpy as np

HERE = Path(__file__).resolve().parent


def arrays() -> None:
    """Arrays: printing, arithmetic, shape, read_as_tuple."""
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    print(x)
    print(x * 2)
    print("shape:", x.shape, "dtype:", x.dtype)
    print("read_as_tuple:", x.read_as_tuple())


def image(path: Path) -> None:
    """Image preprocessing: read, resize to 224, BGR -> RGB, per-channel mean."""
    img = cv.imread(str(path))
    print("image:", img.shape, img.dtype, img.data_format)
    img = cv.resize(img, (224, 224))
    img = img[..., ::-1]
    print("per-channel mean (RGB):", img.mean([0, 1]))
    x = (img.astype(np.float32) - [123.68, 116.78, 103.94]) * [0.017, 0.017, 0.017]
    x = np.expand_dims(x, 0)
    print("network input:", x.shape, F.convert(x, F.NC4HW4).data_format)


def main() -> None:
    """Run the quick start on the image shipped in examples/images/."""
    arrays()
    images = sorted((HERE / "images").glob("*.jpg"))
    if not images:
        sys.exit("examples/images/ has no .jpg image")
    image(images[0])


if __name__ == "__main__":
    main()
