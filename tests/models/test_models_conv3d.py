"""3-D convolutions as real MNN's converter writes them - a 5-D ONNX Conv becomes Im2Col (over the depth
axis) + 2-D Convolutions, a 5-D ConvTranspose 2-D Deconvolutions + Col2Im - and 5-D pooling (Pooling3D).
ONNX models come from the onnx helper API and are converted with real MNN's converter (fp32, fp16 and
8-bit weights); mnnjit is compared with real MNN on the same files, and with ONNX Runtime where real
MNN computes ONNX's answer. The ops ``im2col`` / ``col2im`` are also checked on their own."""
from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest

import mnnjit as MNN
from mnnjit.graph import const_node
from mnnjit.ops import build as B
from mnnjit.ops.nn_im2col import col2im_ref, im2col_ref
from mnnjit_models_fixtures import _Builder, convert, real_mnn_forward

pytest.importorskip("onnx")
pytest.importorskip("MNN")

CONV_IN = (1, 4, 7, 8, 9)
CONVT_IN = (1, 4, 3, 4, 5)
WRONG_IN = (2, 2, 9, 6, 7)
FLAGS = {"fp32": (), "fp16": ("--fp16",), "q8": ("--weightQuantBits", "8")}


def close(got: np.ndarray, expected: np.ndarray) -> bool:
    """The project's model tolerance: 1e-3 * max(1, max |expected|)."""
    return got.shape == expected.shape and \
        float(np.abs(got - expected).max()) <= 1e-3 * max(1.0, float(np.abs(expected).max()))


class _Net(_Builder):
    """An ONNX graph over one 5-D input ``x`` whose outputs are named."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.outs: list[str] = []

    def bias(self, n: int) -> str:
        """A random bias initializer of ``n`` values."""
        return self.init((self.rng.standard_normal(n) * 0.5).astype(np.float32), "b")

    def add(self, kind: str, inputs: list[str], out: str, **attrs) -> str:
        """An ONNX node of type ``kind`` whose output ``out`` is a graph output."""
        self.nodes.append(self.h.make_node(kind, inputs, [out], **attrs))
        self.outs.append(out)
        return out

    def conv(self, kind: str, out: str, w_shape: tuple, bias: bool = True, **attrs) -> str:
        """A Conv / ConvTranspose with its weights (and bias); ``kernel_shape`` is always given (without
        it real MNN's converter takes a 5-D Conv for a 2-D one)."""
        n_out = w_shape[0] if kind == "Conv" else w_shape[1] * attrs.get("group", 1)
        ins = ["x", self.weight(w_shape)] + ([self.bias(n_out)] if bias else [])
        return self.add(kind, ins, out, kernel_shape=list(w_shape[2:]), **attrs)

    def write(self, path: str, shape) -> str:
        """Save the graph (input ``x`` of ``shape``) to ``path``."""
        return self.save(path, [self.io("x", list(shape))], [self.io(o, list("ncdhw")) for o in self.outs])


def conv_onnx(path: str) -> tuple[str, list[str]]:
    """5-D Conv: plain (+ max and average 3-D pooling of it), strided with asymmetric pads, dilated in
    (h, w), grouped, a (1, k, k) kernel without bias."""
    g = _Net(0)
    plain = g.conv("Conv", "plain", (4, 4, 3, 3, 3), pads=[1] * 6)
    g.add("MaxPool", [plain], "maxpool", kernel_shape=[2, 2, 2], strides=[2, 2, 2], pads=[1] * 6)
    g.add("AveragePool", [plain], "avgpool", kernel_shape=[2, 3, 2], strides=[1, 2, 2], pads=[1, 0, 1, 1, 0, 1])
    g.conv("Conv", "strided", (3, 4, 3, 2, 2), strides=[2, 1, 2], pads=[1, 0, 1, 2, 1, 0])
    g.conv("Conv", "dilated", (3, 4, 2, 2, 3), dilations=[1, 2, 1], pads=[0, 2, 0, 0, 2, 0])
    g.conv("Conv", "grouped", (6, 2, 3, 3, 3), group=2, strides=[2, 2, 1], pads=[1] * 6)
    g.conv("Conv", "k133", (5, 4, 1, 3, 3), bias=False, pads=[0, 1, 1, 0, 1, 1])
    return g.write(path, CONV_IN), g.outs


def convt_onnx(path: str) -> tuple[str, list[str]]:
    """5-D ConvTranspose: stride 2 with padding and output padding (with and without bias), uneven
    strides and output padding, grouped, a plain stride-1 one."""
    g = _Net(1)
    s2 = {"strides": [2, 2, 2], "pads": [1] * 6, "output_padding": [1, 1, 1]}
    g.conv("ConvTranspose", "s2", (4, 3, 3, 3, 3), **s2)
    g.rng = np.random.default_rng(1)  # the same weights again, without bias
    g.conv("ConvTranspose", "s2_nobias", (4, 3, 3, 3, 3), bias=False, **s2)
    g.conv("ConvTranspose", "outpad", (4, 2, 3, 3, 3), strides=[2, 3, 2], pads=[1] * 6, output_padding=[1, 2, 0])
    g.conv("ConvTranspose", "grouped", (4, 2, 2, 3, 3), group=2, strides=[1, 2, 2])
    g.conv("ConvTranspose", "plain", (4, 2, 2, 2, 2), bias=False)
    return g.write(path, CONVT_IN), g.outs


def real_mnn_wrong_onnx(path: str) -> tuple[str, list[str]]:
    """Where real MNN's runtime goes wrong on a batch of 2: a Conv and a ConvTranspose dilated along the
    depth axis (it reads and writes outside its buffers), 3-D pooling of more than one sample (it mixes
    the samples up), 3-D pooling without a ``pads`` attribute (it crashes)."""
    g = _Net(2)
    g.conv("Conv", "conv", (3, 2, 3, 3, 3), dilations=[2, 1, 1], pads=[1] * 6)
    g.conv("ConvTranspose", "convt", (2, 3, 2, 2, 2), dilations=[2, 1, 1])
    g.add("MaxPool", ["x"], "maxpool", kernel_shape=[2, 2, 2], strides=[1, 2, 2])
    g.add("AveragePool", ["x"], "avgpool", kernel_shape=[2, 3, 2], strides=[2, 2, 2], pads=[0] * 6)
    return g.write(path, WRONG_IN), g.outs


MODELS = {"conv": (conv_onnx, CONV_IN), "convt": (convt_onnx, CONVT_IN), "wrong": (real_mnn_wrong_onnx, WRONG_IN)}


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict:
    """{(model, variant): (mnn path, onnx path, output names, input shape)}."""
    d = str(tmp_path_factory.mktemp("conv3d"))
    out = {}
    for name, (make, shape) in MODELS.items():
        onnx_path, outs = make(os.path.join(d, f"{name}.onnx"))
        for variant, flags in FLAGS.items():
            if name == "wrong" and variant != "fp32":
                continue
            mnn_path = convert(onnx_path, os.path.join(d, f"{name}_{variant}.mnn"), *flags)
            out[(name, variant)] = (mnn_path, onnx_path, outs, shape)
    return out


def _run_mnnjit(path: str, x: np.ndarray, outs: list[str]) -> list[np.ndarray]:
    """mnnjit's outputs ``outs`` of the model at ``path`` for input ``x``."""
    m = MNN.nn.load_module_from_file(path, ["x"], outs)
    return [np.asarray(v.read()) for v in m.forward([MNN.expr.const(x, list(x.shape))])]


def _ort(onnx_path: str, x: np.ndarray, outs: list[str]) -> list[np.ndarray]:
    """ONNX Runtime's outputs ``outs`` of the ONNX model for input ``x``."""
    import onnxruntime as ort
    return ort.InferenceSession(onnx_path).run(outs, {"x": x})


def _input(shape, seed: int = 3) -> np.ndarray:
    """A unit-normal float32 input."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("variant", list(FLAGS))
@pytest.mark.parametrize("name", ["conv", "convt"])
def test_like_real_mnn(models, name: str, variant: str) -> None:
    """Every output of the 3-D (transposed) convolution models equals real MNN's (fp32, fp16, int8 weights)."""
    path, _, outs, shape = models[(name, variant)]
    x = _input(shape)
    got = _run_mnnjit(path, x, outs)
    for out, g, e in zip(outs, got, real_mnn_forward(path, {"x": x}, outs)):
        assert g.shape == e.shape, (name, variant, out, g.shape, e.shape)
        assert close(g, e), (name, variant, out, float(np.abs(g - e).max()))


def test_conv3d_like_onnx(models) -> None:
    """Real MNN computes ONNX's 3-D convolutions and max pooling: so does mnnjit. Its 3-D average pooling
    counts the (H, W) padding (not the depth one), ONNX none: only windows touching the W padding differ."""
    path, onnx_path, outs, shape = models[("conv", "fp32")]
    x = _input(shape)
    for out, g, r in zip(outs, _run_mnnjit(path, x, outs), _ort(onnx_path, x, outs)):
        if out == "avgpool":  # kernel w 2, stride 2, pad 1: the first column's windows hold one pad cell
            assert close(g[..., 1:], r[..., 1:]) and np.allclose(g[..., 0], r[..., 0] / 2, atol=1e-5)
        else:
            assert close(g, r), (out, float(np.abs(g - r).max()))


def test_convtranspose3d_bias_like_real_mnn(models) -> None:
    """Real MNN's converter puts a ConvTranspose3d's bias on the deconvolution of the last depth tap
    only, so output depths that tap never reaches lack the bias: mnnjit runs the file as written.
    Without bias (or where that tap reaches) both agree with ONNX Runtime."""
    path, onnx_path, outs, shape = models[("convt", "fp32")]
    x = _input(shape)
    got = dict(zip(outs, _run_mnnjit(path, x, outs)))
    ref = dict(zip(outs, _ort(onnx_path, x, outs)))
    assert close(got["s2_nobias"], ref["s2_nobias"])
    assert close(got["plain"], ref["plain"])
    # s2: kernel 3, stride 2, pad 1 -> the last tap (index 2) writes output depths 2*i + 1 only
    diff = got["s2"] - ref["s2"]
    assert np.abs(diff[:, :, 1::2]).max() < 1e-4
    bias = (ref["s2"] - ref["s2_nobias"])[0, :, 0, 0, 0]
    assert np.allclose(diff[:, :, 0::2], -bias.reshape(1, -1, 1, 1, 1), atol=1e-4)


def test_like_onnx_where_real_mnn_errs(models) -> None:
    """mnnjit computes ONNX's answer where real MNN reads outside its buffers (values up to 1e36), mixes
    samples up or crashes (and leaves out the transposed convolution's bias as real MNN's file says)."""
    path, onnx_path, outs, shape = models[("wrong", "fp32")]
    x = _input(shape)
    got = dict(zip(outs, _run_mnnjit(path, x, outs)))
    ref = dict(zip(outs, _ort(onnx_path, x, outs)))
    for out in ("conv", "maxpool", "avgpool"):
        assert close(got[out], ref[out]), (out, float(np.abs(got[out] - ref[out]).max()))
    # convt: kernel 2, dilation 2, stride 1 -> the last tap writes depths 2.., the first two lack the bias
    diff = got["convt"] - ref["convt"]
    assert got["convt"].shape == ref["convt"].shape and np.abs(diff[:, :, 2:]).max() < 1e-4


# ---------------------------------------------------------------- the ops on their own

def _im2col_loops(x: np.ndarray, k, s, d, p) -> np.ndarray:
    """im2col by definition, one cell at a time (small arrays)."""
    n, c, h, w = x.shape
    t, b, l, r = p
    oh = (h + t + b - (k[0] - 1) * d[0] - 1) // s[0] + 1
    ow = (w + l + r - (k[1] - 1) * d[1] - 1) // s[1] + 1
    out = np.zeros((c * k[0] * k[1], n * oh * ow), x.dtype)
    for ci in range(c):
        for ky in range(k[0]):
            for kx in range(k[1]):
                for ni in range(n):
                    for y in range(oh):
                        for xx in range(ow):
                            iy, ix = y * s[0] - t + ky * d[0], xx * s[1] - l + kx * d[1]
                            if 0 <= iy < h and 0 <= ix < w:
                                out[(ci * k[0] + ky) * k[1] + kx, (ni * oh + y) * ow + xx] = x[ni, ci, iy, ix]
    return out


@pytest.mark.parametrize("k,s,d,p", [((3, 1), (1, 1), (1, 1), (1, 1, 0, 0)), ((3, 2), (2, 1), (1, 2), (1, 2, 0, 1)),
                                     ((2, 3), (3, 2), (2, 1), (0, 0, 2, 1))])
def test_im2col_col2im_ops(k, s, d, p) -> None:
    """im2col against its definition; col2im is its adjoint: <im2col(x), c> == <x, col2im(c)>."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    attrs = {"kernel": k, "stride": s, "dilation": d, "pads": p}
    node = B.make_node("im2col", [const_node(x)], attrs)
    cols = im2col_ref([x], attrs)
    assert node.shape == cols.shape
    assert np.array_equal(cols, _im2col_loops(x, k, s, d, p))
    c = rng.standard_normal(cols.shape).astype(np.float64)
    # columns [C*kh*kw, N*L] -> col2im's [N, C*kh*kw, L]
    c3 = c.reshape(cols.shape[0], 2, -1).transpose(1, 0, 2)
    img = col2im_ref([c3], dict(attrs, size=(7, 6)))
    assert img.shape == x.shape
    assert abs(float((cols * c).sum()) - float((x * img).sum())) < 1e-6 * max(1.0, float(np.abs(x * img).sum()))


def test_col2im_errors() -> None:
    """Clear errors: columns that do not fit the image, a wrong input rank, an unsupported pad mode."""
    attrs = {"kernel": (3, 1), "stride": (2, 1), "dilation": (1, 1), "pads": (1, 1, 0, 0), "size": (6, 20)}
    ok = B.make_node("col2im", [const_node(np.zeros((1, 12, 60), np.float32))], attrs)
    assert ok.shape == (1, 4, 6, 20)
    with pytest.raises(ValueError, match="columns do not fit"):
        B.make_node("col2im", [const_node(np.zeros((1, 12, 61), np.float32))], attrs)
    with pytest.raises(ValueError, match="not a multiple"):
        B.make_node("col2im", [const_node(np.zeros((1, 13, 60), np.float32))], attrs)
    with pytest.raises(ValueError, match="must be 4-D"):
        B.make_node("im2col", [const_node(np.zeros((4, 6, 20), np.float32))],
                    {k: v for k, v in attrs.items() if k != "size"})
    from mnnjit.models.convert_im2col import im2col
    from mnnjit.models.translate import Ctx, UnsupportedOpError
    op = SimpleNamespace(type="Im2Col", name="i2c", main={"common": {"kernelY": 3, "padMode": "SAME"}})
    with pytest.raises(UnsupportedOpError, match="padMode SAME"):
        im2col(Ctx(None, {}, False, {}), op, [const_node(np.zeros((1, 4, 6, 20), np.float32))])
