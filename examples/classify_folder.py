"""Classify every image in a folder with a .mnn model, showing a progress bar.

The model runs on the CPU by default; ``--backend`` picks another one where it is available here
(``opencl`` for a GPU, ``npu`` for the delegate bridge, ``auto``: a GPU when there is one). The
script is a pymnn script: only the import lines name mnnjit.

Run from the project root:
    python examples/classify_folder.py examples/images
    python examples/classify_folder.py path/to/folder --backend opencl --size 160
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import mnnjit.cv as cv  # pymnn: import MNN.cv as cv
import mnnjit.expr as F  # pymnn: import MNN.expr as F
import mnnjit.nn as nn  # pymnn: import MNN.nn as nn
import mnnjit.numpy as np  # pymnn: import MNN.numpy as np

HERE = Path(__file__).resolve().parent
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp"}
#: --backend choices -> MNN's forward type names (a runtime config's "backend")
BACKENDS = {"cpu": "CPU", "opencl": "OPENCL", "npu": "NN", "auto": "AUTO"}


def progress(items: list, label: str = ""):
    """Iterate over ``items`` drawing a progress bar on stderr (tqdm's when it is installed)."""
    try:
        from tqdm import tqdm
        yield from tqdm(items, desc=label, unit="img")
        return
    except ImportError:
        pass
    start, n = time.perf_counter(), len(items)
    for i, item in enumerate(items, 1):
        yield item
        done = int(30 * i / max(n, 1))
        rate = i / max(time.perf_counter() - start, 1e-9)
        sys.stderr.write(f"\r{label} [{'#' * done}{'.' * (30 - done)}] {i}/{n} {rate:.1f} img/s")
        sys.stderr.flush()
    sys.stderr.write("\n")


def preprocess(path: Path, size: int):
    """Read an image, resize it, BGR -> RGB, normalise; an NC4HW4 [1, 3, size, size] network input."""
    img = cv.imread(str(path))
    img = cv.resize(img, (size, size))[..., ::-1]
    x = (img.astype(np.float32) - [123.68, 116.78, 103.94]) * [0.017, 0.017, 0.017]
    return F.convert(np.expand_dims(x, 0), F.NC4HW4)


def classify(folder: Path, model: Path, backend: str = "cpu", size: int = 224, top: int = 3) -> list[tuple]:
    """(file name, top class indices, their probabilities) for each image in ``folder``."""
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise SystemExit(f"no images ({', '.join(sorted(IMAGE_SUFFIXES))}) in {folder}")
    # one runtime manager per backend; a backend that is not available falls back to the CPU with
    # MNN's message, as real MNN does
    rt = nn.create_runtime_manager({"backend": BACKENDS[backend], "numThread": 4})
    net = nn.load_module_from_file(str(model), ["x"], ["logits"], runtime_manager=rt)
    results = []
    for path in progress(files, f"classify ({backend})"):
        probs = F.softmax(net.forward(preprocess(path, size)), -1)
        order = np.argsort(-probs, axis=-1)[0, :top]
        results.append((path.name, order.read().tolist(), probs[0].read()[order.read()].tolist()))
    return results


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, classify the folder and print one line per image."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", type=Path, default=HERE / "images", help="folder of images")
    ap.add_argument("--model", type=Path, default=HERE / "models" / "small_cnn.mnn",
                    help="a .mnn classifier taking x [1, 3, H, W] and giving logits")
    ap.add_argument("--backend", choices=sorted(BACKENDS), default="cpu")
    ap.add_argument("--size", type=int, default=224, help="input height and width")
    ap.add_argument("--top", type=int, default=3, help="classes to print per image")
    args = ap.parse_args(argv)
    for name, classes, probs in classify(args.folder, args.model, args.backend, args.size, args.top):
        print(f"{name}: " + ", ".join(f"class {c} ({p:.3f})" for c, p in zip(classes, probs)))


if __name__ == "__main__":
    main()
