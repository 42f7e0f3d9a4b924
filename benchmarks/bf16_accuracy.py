"""Would bfloat16 GEMMs meet precision=low's documented accuracy? A simulation against real MNN.

Runs a model on mnnjit's numpy reference executor with every GEMM convolution (all but
depthwise) fed its input and weights rounded to a narrower type (``bf16``: round to nearest even,
what ``vcvtneps2bf16`` does; ``fp16``: numpy's float16), products accumulated in float32 - the
arithmetic of a ``vdpbf16ps`` micro-kernel - and compares the output with real MNN's float32
result against the tolerance tests/precision/test_precision_modes.py applies to precision=low:
``2e-3 * max|ref| + 1e-4``.

Run: ``python benchmarks/bf16_accuracy.py --models mobilenetv2 resnet18 --rounding bf16 fp16``.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def round_to(a: np.ndarray, rounding: str) -> np.ndarray:
    """``a`` (float32) rounded to bfloat16 (nearest even) or float16, returned as float32."""
    a = np.ascontiguousarray(a, np.float32)
    if rounding == "fp16":
        return a.astype(np.float16).astype(np.float32)
    if rounding != "bf16":
        raise ValueError(f"rounding must be 'bf16' or 'fp16', got {rounding!r}")
    u = a.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32).reshape(a.shape)


def run(model: str, rounding: str, operands: str) -> list:
    """[(case, max abs error, tolerance)] of ``model`` with its GEMM convolutions' ``operands``
    (``both``, ``x`` or ``w``) rounded, against real MNN float32."""
    import MNN
    import precision as P
    import mnnjit.expr as F
    import mnnjit.ops.mnn_conv as mnn_conv
    import mnnjit.ops.registry as registry
    from mnnjit import runtime
    from mnnjit.backends import reference

    orig = registry._REGISTRY["conv2d"]
    orig_mnn = mnn_conv.conv2d_ref

    def conv(xs, attrs):
        x, w = np.asarray(xs[0], np.float32), np.asarray(xs[1], np.float32)
        if not (attrs["group"] == x.shape[1] and attrs["group"] > 1):   # depthwise stays float32
            x = round_to(x, rounding) if operands in ("both", "x") else x
            w = round_to(w, rounding) if operands in ("both", "w") else w
        return orig.ref([x, w] + list(xs[2:]), attrs)

    path, x0, _, iname, oname = P._model_files(model, Path("/tmp/mnnjit-bench"))
    inputs = [x0]
    if model.startswith("mobilenetv2"):
        inputs.append(np.load(P.MODELS / f"{model}.npz")["in1_x"])
    rt = MNN.nn.create_runtime_manager(({"backend": 0, "precision": 0, "numThread": 1},))
    net = MNN.nn.load_module_from_file(path, [iname], [oname], runtime_manager=rt)
    rows = []
    registry._REGISTRY["conv2d"] = dataclasses.replace(orig, ref=conv)
    mnn_conv.conv2d_ref = conv
    prev = runtime.set_executor(reference.evaluate)
    try:
        for case, x in enumerate(inputs):
            real = np.array(net.forward(MNN.expr.const(x, list(x.shape), MNN.expr.NCHW)).read()).reshape(-1)
            d = F.load_as_dict(path)
            d[iname].write(x)
            y = np.asarray(d[oname].read()).reshape(-1)
            rows.append((case, float(np.abs(y - real).max()), 2e-3 * float(np.abs(real).max()) + 1e-4))
    finally:
        runtime.set_executor(prev)
        registry._REGISTRY["conv2d"] = orig
        mnn_conv.conv2d_ref = orig_mnn
    return rows


def main() -> None:
    """Print error / tolerance per model, rounding, operands and input case."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["mobilenetv2", "resnet18"])
    ap.add_argument("--rounding", nargs="+", default=["bf16", "fp16"])
    ap.add_argument("--operands", nargs="+", default=["both", "x", "w"])
    args = ap.parse_args()
    for model in args.models:
        for rounding in args.rounding:
            for operands in args.operands:
                for case, err, tol in run(model, rounding, operands):
                    print(f"{model:12s} {rounding} {operands:4s} case {case}: max err {err:.3g}  "
                          f"tol {tol:.3g}  err/tol {err / tol:.2f}", flush=True)


if __name__ == "__main__":
    main()
