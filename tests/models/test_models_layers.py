"""nn.conv / linear / batch_norm / dropout against real MNN (same parameters via load_parameters)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import mnnjit as MNN

nn, F = MNN.nn, MNN.expr


def _real(code: str, tmp_path) -> None:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]


@pytest.mark.parametrize("kw", [dict(), dict(stride=[2, 1], padding=[2, 0], padding_mode="CAFFE"),
                                dict(padding_mode="SAME", stride=[2, 1]), dict(depthwise=True, bias=False),
                                dict(padding=[1, 1]), dict(dilation=[2, 1]), dict(kernel=[1, 3])])
def test_conv_matches_real_mnn(kw, tmp_path) -> None:
    pytest.importorskip("MNN")
    cin, cout = (4, 4) if kw.get("depthwise") else (3, 5)
    kw = dict(kw)
    kernel = kw.pop("kernel", [3, 3])
    mode = kw.pop("padding_mode", None)
    layer = nn.conv(cin, cout, kernel, **kw, **({} if mode is None else {"padding_mode": getattr(F.Padding_Mode, mode)}))
    mode_arg = "" if mode is None else f", padding_mode=F.Padding_Mode.{mode}"
    assert layer.is_training and layer(F.const(np.ones((1, cin, 9, 9), np.float32), [1, cin, 9, 9])).data_format == F.NC4HW4
    x = np.random.default_rng(0).standard_normal((1, cin, 9, 9)).astype(np.float32)
    got = layer(F.const(x, list(x.shape))).read()
    np.savez(tmp_path / "p.npz", x=x, *[p.read() for p in layer.parameters])
    _real(f"""
import MNN, numpy as np
F = MNN.expr
d = np.load('p.npz'); x = d['x']
layer = MNN.nn.conv({cin}, {cout}, {kernel!r}, **{kw!r}{mode_arg})
ps = [d[f'arr_{{i}}'] for i in range(len(layer.parameters))]
assert [list(p.shape) for p in ps] == [p.shape for p in layer.parameters]
vs = [F.const(p, list(p.shape)) for p in ps]
assert layer.load_parameters(vs)
xv = F.const(x, list(x.shape), F.NCHW)
y = layer(xv)
np.save('out.npy', np.array(y.read(), copy=True))  # read() views memory owned by y
""", tmp_path)
    np.testing.assert_allclose(got, np.load(tmp_path / "out.npy"), rtol=1e-4, atol=1e-5)


def test_linear_batch_norm_dropout_semantics() -> None:
    lin = nn.linear(32, 8)
    assert [p.shape for p in lin.parameters] == [[1, 8], [8, 32]]
    w = lin.parameters[1].read()
    assert np.abs(w).max() <= np.sqrt(3 / 32) + 1e-6 and not np.allclose(w, 0)
    x = np.random.default_rng(1).standard_normal((2, 32)).astype(np.float32)
    np.testing.assert_allclose(lin(F.const(x, [2, 32])).read(), x @ w.T, rtol=1e-5, atol=1e-6)
    assert lin(F.const(x[0], [32])).shape == [1, 8]

    bn = nn.batch_norm(4)
    xb = np.arange(32, dtype=np.float32).reshape(1, 4, 2, 4)
    y = bn(F.const(xb, [1, 4, 2, 4])).read()
    mean, var = xb.mean((0, 2, 3), keepdims=True), xb.var((0, 2, 3), keepdims=True)
    np.testing.assert_allclose(y, (xb - mean) / np.sqrt(var + 1e-5), rtol=1e-5)
    np.testing.assert_allclose(bn.parameters[2].read().ravel(), 0.01 * var.ravel(), rtol=1e-5)
    np.testing.assert_allclose(bn.parameters[3].read().ravel(), 0.01 * mean.ravel(), rtol=1e-5)
    bn.train(False)
    y2 = bn(F.const(xb, [1, 4, 2, 4])).read()
    np.testing.assert_allclose(y2, (xb - 0.01 * mean) / np.sqrt(0.01 * var + 1e-5), rtol=1e-5)

    d = nn.dropout(0.5)
    out = d(F.const(np.ones((64, 64), np.float32), [64, 64])).read()
    assert set(np.unique(out)) <= {0.0, 2.0} and 0.3 < (out == 0).mean() < 0.7
    d.train(False)
    np.testing.assert_array_equal(d(F.const(np.ones((2, 2), np.float32), [2, 2])).read(), np.ones((2, 2)))
    assert nn.dummy.forward() is None and isinstance(nn.dummy, nn.EmptyModule)
    with pytest.raises(ValueError, match="dropout ratio"):
        nn.dropout(1.5)
