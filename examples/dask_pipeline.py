"""A Dask array pipeline whose blocks run through mnnjit.numpy (``map_blocks``).

A stack of uint8 images too large to handle at once is a Dask array chunked along the image axis.
Each block goes through the same mnnjit.numpy function: scale to [0, 1], per-channel
standardisation, a gamma curve, then a per-image mean brightness. Dask schedules the blocks on
threads (or any scheduler: a distributed cluster runs the same graph); the result is checked
against the pipeline written with numpy.

Run from the project root:
    python examples/dask_pipeline.py
    python examples/dask_pipeline.py --images 2000 --size 128 --chunk 100
"""
from __future__ import annotations

import argparse
import time

import dask.array as da
import numpy

import mnnjit.numpy as np

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def block_pipeline(block: numpy.ndarray) -> numpy.ndarray:
    """One block [n, h, w, 3] uint8 -> [n] float32 mean brightness after standardise + gamma (mnnjit)."""
    x = np.array(block).astype(np.float32) / 255.0  # the block's numpy data as a Var
    x = (x - MEAN) / STD
    x = np.sign(x) * np.power(np.abs(x), 0.8)  # a gamma curve that keeps the sign
    return x.mean(axis=(1, 2, 3)).read()  # read(): a numpy array for Dask


def block_pipeline_numpy(block: numpy.ndarray) -> numpy.ndarray:
    """The same block computation with numpy (the reference)."""
    x = block.astype(numpy.float32) / numpy.float32(255.0)
    x = (x - numpy.float32(MEAN)) / numpy.float32(STD)
    x = numpy.sign(x) * numpy.power(numpy.abs(x), numpy.float32(0.8))
    return x.mean(axis=(1, 2, 3), dtype=numpy.float32)


def run(images: int = 256, size: int = 64, chunk: int = 32, scheduler: str = "threads", seed: int = 0) -> dict:
    """Run both pipelines over a random image stack; timings and the largest difference."""
    rng = numpy.random.default_rng(seed)
    stack = da.from_array(rng.integers(0, 256, (images, size, size, 3), dtype=numpy.uint8),
                          chunks=(chunk, size, size, 3))
    # each block of `chunk` images becomes `chunk` numbers: drop the three image axes
    kwargs = dict(dtype=numpy.float32, drop_axis=[1, 2, 3], meta=numpy.empty((0,), numpy.float32))
    ours = stack.map_blocks(block_pipeline, **kwargs)
    theirs = stack.map_blocks(block_pipeline_numpy, **kwargs)
    t = time.perf_counter()
    a = ours.compute(scheduler=scheduler)
    t_first = time.perf_counter() - t  # includes compiling mnnjit's kernels (cached on disk after)
    t = time.perf_counter()
    a = ours.compute(scheduler=scheduler)
    t_ours = time.perf_counter() - t
    t = time.perf_counter()
    b = theirs.compute(scheduler=scheduler)
    t_numpy = time.perf_counter() - t
    return {"blocks": stack.numblocks[0], "mnnjit_first_s": t_first, "mnnjit_s": t_ours, "numpy_s": t_numpy,
            "max_diff": float(numpy.abs(a - b).max()), "result": a, "reference": b}


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, run the pipeline and print the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=256)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--chunk", type=int, default=32, help="images per Dask block")
    ap.add_argument("--scheduler", default="threads", choices=["threads", "synchronous", "processes"])
    args = ap.parse_args(argv)
    r = run(args.images, args.size, args.chunk, args.scheduler)
    print(f"{args.images} images of {args.size}x{args.size} in {r['blocks']} blocks ({args.scheduler})")
    print(f"mnnjit.numpy blocks: {r['mnnjit_s'] * 1e3:8.1f} ms (first run, compiling kernels: "
          f"{r['mnnjit_first_s'] * 1e3:.1f} ms)")
    print(f"numpy blocks:        {r['numpy_s'] * 1e3:8.1f} ms")
    print(f"largest difference:  {r['max_diff']:.3g}")


if __name__ == "__main__":
    main()
