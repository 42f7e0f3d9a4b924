"""Weight-quantized models: decoding accuracy and bit-exactness against real MNN."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mnnjit.format as F
from mnnjit.format.quant import unpack_bits
from fmt_helpers import MODELS, model_path

CONVBN_ONNX = os.path.join(MODELS, "convbn.onnx")
VARIANTS = {
    "q2": ("--weightQuantBits=2",),
    "q3": ("--weightQuantBits=3",),
    "q4": ("--weightQuantBits=4",),
    "q4b32": ("--weightQuantBits=4", "--weightQuantBlock=32"),
    "q4fp16scale": ("--weightQuantBits=4", "--weightQuantScaleBit=16"),
    "q8asym": ("--weightQuantBits=8", "--weightQuantAsymmetric"),
    "q5b64": ("--weightQuantBits=5", "--weightQuantBlock=64"),
}


def convs(net):
    return [o for o in net.oplists if o.main_type == "Convolution2D"]


def check_close(ref_net, q_net, slack=0.51):
    n = 0
    for a, b in zip(convs(ref_net), convs(q_net)):
        quan = b.main["quanParameter"]
        assert quan is not None
        q = F.quantized_weight(quan)
        assert q.codes.dtype == np.int8 and q.codes.size == a.main["weight"].size
        assert q.block_size * q.num_groups == q.codes.size
        w = F.conv_weight(b.main)
        np.testing.assert_array_equal(w, q.dequantize())
        err = np.abs(w - a.main["weight"]).reshape(q.num_groups, -1).max(axis=1)
        assert np.all(err <= slack * np.abs(q.scale) + 1e-7)
        np.testing.assert_allclose(a.main["bias"], b.main["bias"], rtol=0, atol=1e-6)
        n += 1
    assert n > 0


def test_mobilenetv2_wq8_matches_fp32_within_quant_step():
    ref, q = F.read_net(model_path("mobilenetv2")), F.read_net(model_path("mobilenetv2_wq8"))
    check_close(ref, q)
    qw = F.quantized_weight(convs(q)[0].main["quanParameter"])
    assert qw.bits == 8 and qw.asymmetric and qw.num_groups == 32


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_converter_variants_decode(variant, convert):
    path = convert(CONVBN_ONNX, *VARIANTS[variant], tag=variant)
    ref, q = F.read_net(model_path("convbn")), F.read_net(path)
    check_close(ref, q, slack=0.52 if "fp16" in variant else 0.501)
    qws = [F.quantized_weight(c.main["quanParameter"]) for c in convs(q)]
    bits = int(VARIANTS[variant][0].split("=")[1])
    assert all(w.bits == bits for w in qws)
    if "b32" in variant:  # the 1024-input matmul is block-quantized: 10 x 32 blocks of 32
        assert qws[-1].block_size == 32 and qws[-1].num_groups == 320


def _dequantized_copy(src: str, dst: str) -> None:
    net = F.read_net(src)
    for op in convs(net):
        op.main["weight"] = F.conv_weight(op.main)
        op.main["quanParameter"] = None
    F.write_net(net, dst)


@pytest.mark.parametrize("variant", ["wq8", "q3", "q4b32", "q4fp16scale"])
def test_dequantized_weights_equal_real_mnn_bit_for_bit(variant, mnn, convert, tmp_path):
    """Real MNN on the quantized model == real MNN on our float-expanded copy, exactly."""
    if variant == "wq8":
        src, shape = model_path("mobilenetv2_wq8"), (1, 3, 224, 224)
    else:
        src, shape = convert(CONVBN_ONNX, *VARIANTS[variant], tag=variant), (1, 3, 32, 32)
    dst = str(tmp_path / "deq.mnn")
    _dequantized_copy(src, dst)
    x = np.random.RandomState(1).rand(*shape).astype(np.float32)

    def run(path):
        m = mnn.nn.load_module_from_file(path, ["x"], ["logits"])
        y = m.forward([mnn.expr.const(x, list(shape), mnn.expr.NCHW)])[0]
        return np.array(mnn.expr.convert(y, mnn.expr.NCHW).read())

    np.testing.assert_array_equal(run(src), run(dst))


def _ref_unpack(data: bytes, count: int, bits: int) -> list:
    out, pos = [], 0
    for _ in range(count):
        v = 0
        for _ in range(bits):
            v = (v << 1) | ((data[pos // 8] >> (7 - pos % 8)) & 1)
            pos += 1
        out.append(v)
    return out


@settings(max_examples=60, deadline=None)
@given(bits=st.integers(1, 8), values=st.lists(st.integers(0, 255), max_size=40))
def test_unpack_bits_msb_first(bits, values):
    values = [v & ((1 << bits) - 1) for v in values]
    stream = "".join(format(v, f"0{bits}b") for v in values)
    stream += "0" * (-len(stream) % 8)
    data = bytes(int(stream[i:i + 8], 2) for i in range(0, len(stream), 8))
    assert unpack_bits(data, len(values), bits).tolist() == values == _ref_unpack(
        data, len(values), bits)


def _pack(values, bits):
    stream = "".join(format(v, f"0{bits}b") for v in values)
    stream += "0" * (-len(stream) % 8)
    return bytes(int(stream[i:i + 8], 2) for i in range(0, len(stream), 8))


def test_sparse_type2_buffer():
    # shape [2, 4]; non-zeros at 1, 2, 6 with values -3, 5, -3; asymmetric alpha
    values = [-3, 5]
    buf = bytes([2]) + np.array([2, 4], "<u2").tobytes() + np.uint32(3).tobytes() + bytes([3])
    buf += _pack([1, 1, 4], 3) + bytes([2]) + np.array(values, np.int8).tobytes()
    buf += _pack([0, 1, 0], 1)
    alpha = np.array([0.0, 1.0, 0.0, 0.5], np.float32)  # (min, scale) per row
    quan = {"type": 2, "buffer": np.frombuffer(buf, np.int8), "alpha": alpha, "readType": 2,
            "aMin": -1, "quantScale": 1.0}
    q = F.quantized_weight(quan)
    zero = -1  # round(-min/scale) + min_value, min_value = -(1 << (1 - 1))
    assert q.codes.tolist() == [zero, -3, 5, zero, zero, zero, -3, zero]
    w = F.decode_quantized_weight(quan)
    np.testing.assert_allclose(w[:4], np.array([zero, -3, 5, zero]) * 1.0 + 1.0)


def test_type3_fp16_and_index_sparse():
    half = np.array([1.5, -2.25, 0.0], np.float16)
    w = F.decode_quantized_weight({"type": 3, "buffer": np.frombuffer(half.tobytes(), np.int8)})
    np.testing.assert_array_equal(w, half.astype(np.float32))
    quan = {"index": np.array([0, 3], np.uint32), "alpha": np.array([2.0, -1.0], np.float32),
            "weightSize": 5}
    np.testing.assert_array_equal(F.decode_quantized_weight(quan), [2, 0, 0, -1, 0])


@pytest.mark.parametrize("mutate, message", [
    (lambda b: b[:3], "too short"),
    (lambda b: bytes([9]) + b[1:], "rank"),
    (lambda b: b[:-5], "too short"),
])
def test_malformed_quant_buffers(mutate, message):
    net = F.read_net(model_path("convbn"))
    q = F.read_net(model_path("mobilenetv2_wq8"))
    quan = dict(convs(q)[0].main["quanParameter"])
    raw = mutate(np.asarray(quan["buffer"], np.int8).tobytes())
    quan["buffer"] = np.frombuffer(raw, np.int8)
    with pytest.raises(F.MNNFormatError, match=message):
        F.decode_quantized_weight(quan)
    assert net is not None


def test_index_out_of_samples_raises():
    buf = bytes([1]) + np.array([4], "<u2").tobytes() + bytes([3]) + bytes([0, 1, 2])
    buf += _pack([0, 1, 2, 3], 2)  # index 3 >= 3 samples
    quan = {"type": 1, "buffer": np.frombuffer(buf, np.int8), "alpha": np.ones(1, np.float32),
            "quantScale": 1.0}
    with pytest.raises(F.MNNFormatError, match="out of range"):
        F.decode_quantized_weight(quan)


def test_huge_declared_shapes_are_rejected_without_allocating():
    buf = bytes([4]) + np.array([2 ** 31, 2 ** 31, 2 ** 31, 7], "<u4").tobytes() + bytes([0])
    for qtype in (1, 2):
        quan = {"type": qtype, "buffer": np.frombuffer(buf, np.int8), "shapeInt32": True,
                "alpha": np.ones(2, np.float32), "quantScale": 1.0}
        with pytest.raises(F.MNNFormatError, match="implausibly large"):
            F.decode_quantized_weight(quan)
    quan = {"index": np.array([0], np.uint32), "alpha": np.ones(1, np.float32),
            "weightSize": 2 ** 32 - 1}
    with pytest.raises(F.MNNFormatError, match="implausibly large"):
        F.decode_quantized_weight(quan)


@settings(max_examples=150, deadline=None)
@given(flips=st.lists(st.tuples(st.integers(0, 300), st.integers(1, 255)), min_size=1,
                      max_size=6), cut=st.integers(0, 400))
def test_random_corruption_of_quant_buffer(flips, cut):
    quan = dict(convs(_WQ8)[1].main["quanParameter"])
    raw = bytearray(np.asarray(quan["buffer"], np.int8).tobytes())
    for pos, x in flips:
        raw[pos % len(raw)] ^= x
    quan["buffer"] = np.frombuffer(bytes(raw[: len(raw) - cut]), np.int8)
    try:
        w = F.decode_quantized_weight(quan)
        assert w.dtype == np.float32
    except F.MNNFormatError:
        pass


_WQ8 = F.read_net(model_path("mobilenetv2_wq8"))
