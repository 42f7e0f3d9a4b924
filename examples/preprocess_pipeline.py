"""An image preprocessing pipeline (mnnjit.cv -> mnnjit.numpy -> a .mnn model), timed against the same
pipeline written with OpenCV + numpy.

Both pipelines decode, resize, convert BGR -> RGB, normalise per channel and lay the image out as
the model's NCHW input; the model then runs on each result. The script prints the time of each
preprocessing step, how far apart the two inputs are, and whether the model's answers agree.

Run from the project root:
    python examples/preprocess_pipeline.py                 # examples/images/cat.jpg, 224x224
    python examples/preprocess_pipeline.py --size 320 --repeat 50 path/to/image.jpg
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Callable

import numpy
import mnnjit.cv as cv
import mnnjit.expr as F
import mnnjit.nn as nn
import mnnjit.numpy as np

HERE = Path(__file__).resolve().parent
MEAN = [123.68, 116.78, 103.94]  # RGB
SCALE = [0.017, 0.017, 0.017]


def mnnjit_pipeline(data: bytes, size: int):
    """mnnjit: decode -> resize -> RGB -> float, normalised -> [1, 3, size, size] NCHW Var."""
    img = cv.imdecode(data)
    img = cv.resize(img, (size, size))
    img = cv.cvtColor(img, cv.COLOR_BGR2RGB)
    x = (img.astype(np.float32) - MEAN) * SCALE
    # [1, h, w, 3] NHWC -> [1, 3, h, w] NCHW: convert moves the data (a transpose would only permute
    # the shape of a Var still labelled NHWC, and the model's forward would convert it again)
    x = F.convert(np.expand_dims(x, 0), F.NCHW)
    x.read_view()  # evaluate now (mnnjit is lazy), so the timing includes the work
    return x


def opencv_pipeline(data: bytes, size: int) -> numpy.ndarray:
    """OpenCV + numpy: the same steps on numpy arrays."""
    import cv2
    img = cv2.imdecode(numpy.frombuffer(data, numpy.uint8), cv2.IMREAD_COLOR)
    img = cv2.resize(img, (size, size))
    img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
    x = (img.astype(numpy.float32) - numpy.float32(MEAN)) * numpy.float32(SCALE)
    return numpy.ascontiguousarray(x.transpose(2, 0, 1))[None]


def best_ms(fn: Callable[[], object], repeat: int) -> float:
    """The fastest of ``repeat`` runs of ``fn``, in milliseconds (after one warm-up run)."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * min(times)


def run(image: Path, model: Path, size: int = 224, repeat: int = 20) -> dict:
    """Time both pipelines and the model on ``image``; a dict of the measurements."""
    data = image.read_bytes()
    net = nn.load_module_from_file(str(model), ["x"], ["logits"])
    ours = mnnjit_pipeline(data, size)
    out = {"mnnjit_ms": best_ms(lambda: mnnjit_pipeline(data, size), repeat)}
    try:
        theirs = opencv_pipeline(data, size)
    except ImportError:  # OpenCV is optional: mnnjit's pipeline still runs
        theirs = None
    else:
        out["opencv_ms"] = best_ms(lambda: opencv_pipeline(data, size), repeat)
        # (resize rounding may move a pixel by one level: 1 / 255 * 0.017 ~ 0.017 in the input)
        out["max_input_diff"] = float(numpy.abs(ours.read() - theirs).max())
    logits = net.forward(ours)
    out["model_ms"] = best_ms(lambda: net.forward(ours).read_view(), repeat)
    out["top_class"] = int(np.argmax(logits, -1).read().ravel()[0])
    if theirs is not None:
        other = net.forward(F.const(theirs, list(theirs.shape), F.NCHW))
        out["top_class_opencv_input"] = int(numpy.argmax(other.read(), -1).ravel()[0])
        out["max_logit_diff"] = float(numpy.abs(logits.read() - other.read()).max())
    return out


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, run the comparison and print it."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("image", nargs="?", type=Path, default=HERE / "images" / "cat.jpg")
    ap.add_argument("--model", type=Path, default=HERE / "models" / "small_cnn.mnn")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--repeat", type=int, default=20, help="timed runs (the best one counts)")
    args = ap.parse_args(argv)
    r = run(args.image, args.model, args.size, args.repeat)
    print(f"preprocessing, mnnjit.cv + mnnjit.numpy: {r['mnnjit_ms']:8.3f} ms")
    if "opencv_ms" in r:
        print(f"preprocessing, OpenCV + numpy:           {r['opencv_ms']:8.3f} ms "
              f"(mnnjit / OpenCV: {r['mnnjit_ms'] / r['opencv_ms']:.2f}x)")
        print(f"largest input difference:               {r['max_input_diff']:.4g}")
    print(f"model forward:                           {r['model_ms']:8.3f} ms")
    print(f"top class: {r['top_class']}", end="")
    if "top_class_opencv_input" in r:
        print(f" (on OpenCV's input: {r['top_class_opencv_input']}, largest logit difference "
              f"{r['max_logit_diff']:.3g})")
    else:
        print(" (OpenCV not installed: no comparison)")


if __name__ == "__main__":
    main()
