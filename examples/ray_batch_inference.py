"""Batch inference on Ray Data: a folder of images classified by a pool of mnnjit predictors.

The images travel in the dataset as encoded bytes, so any node can decode them. ``Predictor`` is a
stateful ``map_batches`` class: Ray pickles its constructor arguments to each worker, and mnnjit's
objects pickle compactly: the Module by its model path and load config (each worker loads the file
itself), the normalisation constants (Vars) by value. Every worker on a machine shares one kernel
cache directory (``MNNJIT_CACHE_DIR``), so each kernel compiles once per machine, not per worker.

Run from the project root (a local Ray with 2 CPUs):
    python examples/ray_batch_inference.py examples/images
On a cluster (``pip install mnnjit[distributed]`` on every node, the model at the same path on
each node, e.g. shared storage):
    python examples/ray_batch_inference.py /data/images --address ray://head:10001 --workers 8
"""
from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy

import mnnjit.cv as cv
import mnnjit.expr as F
import mnnjit.nn as nn
import mnnjit.numpy as np

HERE = Path(__file__).resolve().parent
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp"}


class Predictor:
    """Classifies a batch of encoded images: {"path", "image"} -> {"path", "top_class", "prob"}."""

    def __init__(self, module: nn._Module, mean, scale, size: int = 224) -> None:
        # module, mean and scale arrive unpickled: the module reloaded from its path on this worker
        self.module, self.mean, self.scale, self.size = module, mean, scale, size

    def preprocess(self, data: bytes):
        """Encoded image -> NC4HW4 [1, 3, size, size] network input."""
        img = cv.resize(cv.imdecode(data), (self.size, self.size))
        x = (cv.cvtColor(img, cv.COLOR_BGR2RGB).astype(np.float32) - self.mean) * self.scale
        return F.convert(np.expand_dims(x, 0), F.NC4HW4)

    def __call__(self, batch: dict) -> dict:
        classes, probs = [], []
        for data in batch["image"]:
            p = F.softmax(self.module.forward(self.preprocess(bytes(data))), -1).read()[0]
            classes.append(int(p.argmax()))
            probs.append(float(p.max()))
        return {"path": batch["path"], "top_class": numpy.array(classes, numpy.int64),
                "prob": numpy.array(probs, numpy.float32)}


def run(folder: Path, model: Path, address: str | None = None, workers: int = 2, batch_size: int = 4,
        size: int = 224, cache_dir: str | None = None) -> list[dict]:
    """Classify the images in ``folder`` on Ray (local with 2 CPUs, or the cluster at ``address``)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage reports leave the machine
    import ray

    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise SystemExit(f"no images in {folder}")
    cache_dir = cache_dir or os.environ.get("MNNJIT_CACHE_DIR") or os.path.join(tempfile.gettempdir(), "mnnjit-ray")
    # every worker process gets the same kernel cache directory (per machine) and one kernel thread
    runtime_env = {"env_vars": {"MNNJIT_CACHE_DIR": cache_dir, "MNNJIT_NUM_THREADS": "1"}}
    if address:
        ray.init(address=address, runtime_env=runtime_env)
    else:
        ray.init(num_cpus=2, include_dashboard=False, runtime_env=runtime_env)
    try:
        ds = ray.data.from_items([{"path": p.name, "image": p.read_bytes()} for p in files])
        module = nn.load_module_from_file(str(model), ["x"], ["logits"])  # pickles by path + config
        mean = np.array([123.68, 116.78, 103.94], dtype=np.float32)  # Vars pickle by value
        scale = np.array([0.017, 0.017, 0.017], dtype=np.float32)
        out = ds.map_batches(Predictor, fn_constructor_kwargs={"module": module, "mean": mean, "scale": scale,
                                                               "size": size},
                             batch_size=batch_size, batch_format="numpy", concurrency=workers, num_cpus=1)
        return sorted(out.take_all(), key=lambda r: r["path"])
    finally:
        ray.shutdown()


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, run the batch job and print one line per image."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", type=Path, default=HERE / "images")
    ap.add_argument("--model", type=Path, default=HERE / "models" / "small_cnn.mnn")
    ap.add_argument("--address", default=None, help="a Ray cluster's address (default: start a local Ray)")
    ap.add_argument("--workers", type=int, default=2, help="predictor actors")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--size", type=int, default=224)
    args = ap.parse_args(argv)
    rows = run(args.folder, args.model.resolve(), args.address, args.workers, args.batch_size, args.size)
    for r in rows:
        print(f"{r['path']}: class {r['top_class']} ({r['prob']:.3f})")
    print(f"{len(rows)} images classified")


if __name__ == "__main__":
    main()
