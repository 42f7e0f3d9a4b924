"""Small PyTorch networks exported to ONNX inside the test (``torch.onnx.export``, opset 17), converted
with ``mnnjit.converter`` and run in real MNN and mnnjit against ONNX Runtime. Skipped where torch is
not installed (it is not a test dependency; the onnx.helper tests cover the same ops in CI)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from convert_helpers import check_three_way

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("MNN")
nn = torch.nn
F = torch.nn.functional


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, 2, 1)
        self.bn = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, 1, 1, groups=8)
        self.pw = nn.Conv2d(8, 16, 1)
        self.ps = nn.PixelShuffle(2)
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        y = F.relu6(self.bn(self.c(x)))
        y = self.pw(y + F.hardswish(self.dw(y)))
        u = F.interpolate(y, scale_factor=2, mode="nearest") + F.interpolate(y, scale_factor=2, mode="bilinear")
        p = F.pad(self.ps(u), (1, 1, 2, 0), mode="reflect")
        q = F.avg_pool2d(p, 3, 2, 1, ceil_mode=True, count_include_pad=False)
        return self.fc(q[..., :4, :4]), F.interpolate(y, size=(5, 7), mode="bicubic")


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.gn = nn.GroupNorm(4, 16)
        self.conv = nn.Conv1d(16, 16, 3, padding=1)
        self.qkv = nn.Linear(16, 48)
        self.ln = nn.LayerNorm(16)

    def forward(self, ids):
        x = self.emb(ids)
        y = self.gn(self.conv(x.transpose(1, 2))).transpose(1, 2)
        b, s, d = y.shape
        q, k, v = self.qkv(y).view(b, s, 3, 2, d // 2).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-1, -2) / (d // 2) ** 0.5).softmax(-1)
        a = self.ln(y + F.gelu((att @ v).transpose(1, 2).reshape(b, s, d)))
        z = torch.einsum("bsd,btd->bst", a, y).softmax(-1)
        return torch.cumsum(z, -1)[:, :, -3:], z.argmax(-1), torch.topk(y, 3, dim=-1).values


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(6, 8, num_layers=2, bidirectional=True)
        self.gru = nn.GRU(16, 4)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        z, hg = self.gru(y)
        return z, h, c, hg


def _export(m, args, names, outs, path, dyn=None):
    torch.manual_seed(0)
    m.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, args, path, input_names=names, output_names=outs, opset_version=17,
                          dynamic_axes=dyn, dynamo=False)
    return onnx.load(path)


def test_torch_convnet(tmp_path) -> None:
    torch.manual_seed(1)
    m = _export(ConvNet(), (torch.randn(1, 3, 16, 16),), ["x"], ["a", "b"], str(tmp_path / "c.onnx"))
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    check_three_way(m, {"x": x}, tmp_path, "convnet")


def test_torch_attention_dynamic_axes(tmp_path) -> None:
    torch.manual_seed(2)
    m = _export(Attention(), (torch.randint(0, 50, (2, 7)),), ["ids"], ["c", "am", "tk"], str(tmp_path / "a.onnx"),
                {"ids": {0: "N", 1: "S"}})
    rng = np.random.default_rng(1)
    for shape in ((2, 7), (1, 4)):
        check_three_way(m, {"ids": rng.integers(0, 50, shape).astype(np.int64)}, tmp_path, f"attn{shape[1]}")


def test_torch_recurrent_dynamic_axes(tmp_path) -> None:
    torch.manual_seed(3)
    m = _export(Recurrent(), (torch.randn(5, 2, 6),), ["x"], ["z", "h", "c", "hg"], str(tmp_path / "r.onnx"),
                {"x": {0: "T", 1: "N"}})
    rng = np.random.default_rng(2)
    for shape in ((5, 2, 6), (3, 1, 6)):
        check_three_way(m, {"x": rng.standard_normal(shape).astype(np.float32)}, tmp_path, f"rnn{shape[0]}")
