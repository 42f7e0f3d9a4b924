"""Build the benchmark zoo: small and sequence models exported from PyTorch, converted by real MNN.

    .venv/bin/python benchmarks/zoo/build.py [--out build/zoo] [--only NAME ...] [--list]

Every entry is a PyTorch module with seeded weights, exported to ONNX (opset 17,
``torch.onnx.export(dynamo=False)``) and converted to ``.mnn`` by real MNN's converter
(``../shared/tools/mnn_oracle_convert.py``, default flags: LSTM / GRU become While loops). Each entry
saves a seeded input and real MNN's output for it (``<name>.npz``: ``in0_<input>`` / ``out0_<output>``,
the layout of ``shared/models``) and ONNX Runtime's largest difference from real MNN. The zoo's
``MANIFEST.json`` lists the entries (files, input and output names and shapes, description).

The committed test fixtures (``tests/models/data/zoo``, checked by ``tests/models/test_models_zoo.py``
without torch) are made by ``build.py --out tests/models/data/zoo --no-onnx --only tf_l1_s8_d64
lstm_bi_l2_t10_h32 gru_l1_t5_h32 gru_bi_l1_t50_h64 vit_tiny``.

Needs torch, onnx, onnxruntime and MNN (the benchmark's oracles); mnnjit itself is not imported.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED = os.environ.get("MNNJIT_SHARED") or os.path.join(os.path.dirname(ROOT), "shared")
CONVERTER = os.path.join(SHARED, "tools", "mnn_oracle_convert.py")
DEFAULT_OUT = os.path.join(ROOT, "build", "zoo")


@dataclass
class Entry:
    """One zoo model: how to build its torch module and its input."""

    name: str
    kind: str                      # transformer / lstm / gru / mlp / vit
    description: str
    make: Callable[[], "object"]   # () -> torch.nn.Module (weights seeded by the caller)
    input_shape: tuple[int, ...]
    seed: int
    outputs: list[str] = field(default_factory=lambda: ["y"])


def _transformer(layers: int, d: int, heads: int, ff: int) -> Callable:
    def make():
        import torch.nn as nn
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)
        return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
    return make


def _rnn(cell: str, inp: int, hidden: int, layers: int, bidirectional: bool) -> Callable:
    def make():
        import torch.nn as nn

        class RNN(nn.Module):
            """The sequence output only (seq-major [T, B, dirs * hidden])."""

            def __init__(self) -> None:
                super().__init__()
                cls = nn.LSTM if cell == "lstm" else nn.GRU
                self.rnn = cls(inp, hidden, num_layers=layers, bidirectional=bidirectional)

            def forward(self, x):
                return self.rnn(x)[0]
        return RNN()
    return make


def _mlp(widths: list[int]) -> Callable:
    def make():
        import torch.nn as nn
        mods: list = []
        for a, b in zip(widths[:-2], widths[1:-1]):
            mods += [nn.Linear(a, b), nn.ReLU()]
        mods += [nn.Linear(widths[-2], widths[-1]), nn.Softmax(-1)]
        return nn.Sequential(*mods)
    return make


def _vit(image: int, patch: int, d: int, layers: int, heads: int, classes: int) -> Callable:
    def make():
        import torch
        import torch.nn as nn

        class ViT(nn.Module):
            """Patch-embedding conv, class token, learned positions, encoder, LayerNorm, head."""

            def __init__(self) -> None:
                super().__init__()
                n = (image // patch) ** 2
                self.embed = nn.Conv2d(3, d, patch, stride=patch)
                self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
                self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
                layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.0, batch_first=True,
                                                   activation="gelu", norm_first=True)
                self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
                self.norm = nn.LayerNorm(d)
                self.head = nn.Linear(d, classes)

            def forward(self, x):
                t = self.embed(x).flatten(2).transpose(1, 2)
                t = torch.cat([self.cls.expand(x.shape[0], -1, -1), t], 1) + self.pos
                t = self.encoder(t)
                return self.head(self.norm(t[:, 0]))
        return ViT()
    return make


ZOO: list[Entry] = [
    # transformer encoders [batch 1, seq, width]
    Entry("tf_l1_s8_d64", "transformer", "TransformerEncoder 1 layer, seq 8, width 64, 4 heads, ff 128",
          _transformer(1, 64, 4, 128), (1, 8, 64), 1),
    Entry("tf_l4_s16_d64", "transformer", "TransformerEncoder 4 layers, seq 16, width 64, 4 heads, ff 256",
          _transformer(4, 64, 4, 256), (1, 16, 64), 2),
    Entry("tf_l2_s32_d128", "transformer", "TransformerEncoder 2 layers, seq 32, width 128, 4 heads, ff 256",
          _transformer(2, 128, 4, 256), (1, 32, 128), 3),
    Entry("tf_l3_s128_d128", "transformer", "TransformerEncoder 3 layers, seq 128, width 128, 8 heads, ff 512",
          _transformer(3, 128, 8, 512), (1, 128, 128), 4),
    Entry("tf_l2_s64_d256", "transformer", "TransformerEncoder 2 layers, seq 64, width 256, 8 heads, ff 1024",
          _transformer(2, 256, 8, 1024), (1, 64, 256), 5),
    Entry("tf_l1_s256_d512", "transformer", "TransformerEncoder 1 layer, seq 256, width 512, 8 heads, ff 2048",
          _transformer(1, 512, 8, 2048), (1, 256, 512), 6),
    # recurrent [steps, batch, features]
    # odd and deep shapes (a matmul of rows by 2-D weights, a head width of 40, 6 layers of width 32)
    Entry("tf_l6_s8_d32", "transformer", "TransformerEncoder 6 layers, seq 8, width 32, 2 heads, ff 64",
          _transformer(6, 32, 2, 64), (1, 8, 32), 102),
    Entry("tf_l1_s50_d200", "transformer", "TransformerEncoder 1 layer, seq 50, width 200, 5 heads, ff 400",
          _transformer(1, 200, 5, 400), (1, 50, 200), 103),
    Entry("lstm_l1_t10_h32", "lstm", "LSTM 16->32, 1 layer, 10 steps", _rnn("lstm", 16, 32, 1, False), (10, 1, 16), 11),
    Entry("lstm_bi_l2_t10_h32", "lstm", "bidirectional LSTM 16->32, 2 layers, 10 steps",
          _rnn("lstm", 16, 32, 2, True), (10, 1, 16), 12),
    Entry("lstm_l2_t100_h128", "lstm", "LSTM 64->128, 2 layers, 100 steps", _rnn("lstm", 64, 128, 2, False),
          (100, 1, 64), 13),
    Entry("gru_l1_t5_h32", "gru", "GRU 16->32, 1 layer, 5 steps", _rnn("gru", 16, 32, 1, False), (5, 1, 16), 14),
    Entry("gru_bi_l1_t50_h64", "gru", "bidirectional GRU 32->64, 1 layer, 50 steps, batch 2",
          _rnn("gru", 32, 64, 1, True), (50, 2, 32), 15),
    Entry("gru_l2_t20_h64", "gru", "GRU 32->64, 2 layers, 20 steps", _rnn("gru", 32, 64, 2, False), (20, 1, 32), 16),
    # MLPs [batch, features]
    Entry("gru_l1_t30_h256", "gru", "GRU 64->256, 1 layer, 30 steps", _rnn("gru", 64, 256, 1, False), (30, 1, 64), 105),
    Entry("mlp_b1", "mlp", "Linear(64,128)-ReLU-Linear(128,10)-Softmax, batch 1", _mlp([64, 128, 10]), (1, 64), 21),
    Entry("mlp_b16", "mlp", "256-512-256-10 MLP with ReLU and Softmax, batch 16", _mlp([256, 512, 256, 10]),
          (16, 256), 22),
    Entry("mlp_b64", "mlp", "784-512-512-10 MLP with ReLU and Softmax, batch 64", _mlp([784, 512, 512, 10]),
          (64, 784), 23),
    # vision transformers [batch, 3, H, W]
    Entry("mlp_b4_odd", "mlp", "100-300-50-7 MLP with ReLU and Softmax, batch 4", _mlp([100, 300, 50, 7]), (4, 100), 107),
    Entry("vit_tiny", "vit", "ViT 32x32 image, patch 8, width 48, 2 pre-norm GELU layers, 4 heads, 10 classes",
          _vit(32, 8, 48, 2, 4, 10), (1, 3, 32, 32), 31),
    Entry("vit_small", "vit", "ViT 64x64 image, patch 8, width 192, 4 pre-norm GELU layers, 6 heads, 100 classes",
          _vit(64, 8, 192, 4, 6, 100), (1, 3, 64, 64), 32),
]


def convert(onnx_path: str, mnn_path: str) -> None:
    """Real MNN's converter (its own script, in a subprocess: never the console entry points)."""
    cmd = [sys.executable, CONVERTER, "-f", "ONNX", "--modelFile", onnx_path, "--MNNModel", mnn_path,
           "--bizCode", "mnnjit"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if "Converted Success" not in r.stdout or not os.path.exists(mnn_path):  # its exit code is unreliable
        raise RuntimeError(f"MNN converter failed on {onnx_path}: {r.stdout[-2000:]} {r.stderr[-2000:]}")


def real_mnn_outputs(mnn_path: str, x: np.ndarray, outputs: list[str]) -> list[np.ndarray]:
    """Real MNN's outputs for input ``x`` (one thread, normal precision)."""
    import MNN
    rt = MNN.nn.create_runtime_manager(({"backend": "CPU", "numThread": 1, "precision": "normal"},))
    m = MNN.nn.load_module_from_file(mnn_path, ["x"], outputs, runtime_manager=rt)
    got = m.forward([MNN.expr.const(x, list(x.shape), MNN.expr.NCHW)])
    return [np.array(v.read(), dtype=np.float32) for v in got]


def build(e: Entry, out: str, keep_onnx: bool = True) -> dict:
    """Export, convert and run one entry; returns its manifest record (``keep_onnx=False``: the
    ONNX file is deleted after use, as for the committed test fixtures)."""
    import onnxruntime as ort
    import torch
    torch.manual_seed(e.seed)
    model = e.make().eval()
    x = np.random.default_rng(e.seed).standard_normal(e.input_shape).astype(np.float32)
    onnx_path = os.path.join(out, f"{e.name}.onnx")
    mnn_path = os.path.join(out, f"{e.name}.mnn")
    # traced with autograd on: under no_grad an eval TransformerEncoderLayer takes its fused fast
    # path (aten::_transformer_encoder_layer_fwd), which has no ONNX export
    torch.onnx.export(model, (torch.from_numpy(x),), onnx_path, input_names=["x"], output_names=e.outputs,
                      opset_version=17, dynamo=False)
    convert(onnx_path, mnn_path)
    ys = real_mnn_outputs(mnn_path, x, e.outputs)
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"x": x})
    ort_diff = max(float(np.abs(a - b).max()) for a, b in zip(ref, ys))
    if not keep_onnx:
        os.remove(onnx_path)
    arrays = {"in0_x": x}
    arrays.update({f"out0_{n}": y for n, y in zip(e.outputs, ys)})
    np.savez(os.path.join(out, f"{e.name}.npz"), **arrays)
    return {
        "kind": e.kind, "description": e.description, "seed": e.seed,
        "files": {"mnn": f"{e.name}.mnn", "npz": f"{e.name}.npz", **({"onnx": f"{e.name}.onnx"} if keep_onnx else {})},
        "inputs": [{"name": "x", "shape": list(x.shape), "dtype": "float32", "key": "in0_x"}],
        "outputs": [{"name": n, "shape": list(y.shape), "key": f"out0_{n}"} for n, y in zip(e.outputs, ys)],
        "ort_max_abs_diff": ort_diff,
        "mnn_bytes": os.path.getsize(mnn_path),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="+", default=None, help="entry names (default: all)")
    ap.add_argument("--list", action="store_true", help="print the entries and exit")
    ap.add_argument("--no-onnx", action="store_true",
                    help="delete each ONNX file after use (fixtures: tests/models/data/zoo keeps .mnn and .npz)")
    args = ap.parse_args()
    if args.list:
        for e in ZOO:
            print(f"{e.name:20s} {e.description}")
        return
    os.makedirs(args.out, exist_ok=True)
    man_path = os.path.join(args.out, "MANIFEST.json")
    manifest = {"entries": {}}
    if os.path.exists(man_path):
        with open(man_path) as fh:
            manifest = json.load(fh)
    import MNN
    import onnx
    import onnxruntime
    import torch
    manifest["versions"] = {"MNN": MNN.version(), "torch": torch.__version__, "onnx": onnx.__version__,
                            "onnxruntime": onnxruntime.__version__, "numpy": np.__version__}
    manifest["how_made"] = ("torch (seeded) -> ONNX opset 17 (torch.onnx.export(dynamo=False)) -> real MNN's "
                            "converter (default flags); outputs from real MNN's load_module_from_file(...).forward")
    wanted = set(args.only) if args.only else None
    unknown = (wanted or set()) - {e.name for e in ZOO}
    if unknown:
        raise SystemExit(f"unknown zoo entries: {sorted(unknown)}")
    for e in ZOO:
        if wanted and e.name not in wanted:
            continue
        rec = build(e, args.out, keep_onnx=not args.no_onnx)
        manifest["entries"][e.name] = rec
        # entries in the zoo's order (kinds together, small to large)
        order = [z.name for z in ZOO]
        manifest["entries"] = dict(sorted(manifest["entries"].items(),
                                          key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))
        with open(man_path, "w") as fh:
            json.dump(manifest, fh, indent=1)
        print(f"{e.name:20s} {rec['mnn_bytes'] / 1024:9.1f} KiB  ORT vs MNN max|d| {rec['ort_max_abs_diff']:.2e}",
              flush=True)


if __name__ == "__main__":
    main()
