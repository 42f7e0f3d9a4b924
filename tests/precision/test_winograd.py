"""Winograd 3x3 convolution (backends/cpu/gemm/winograd.py) against the numpy reference
``mnnjit.ops.nn_conv.conv2d_ref`` (activation applied in float64 by ``precision_refs.act_ref``:
the reference conv fuses only relu/relu6).

Tolerances: ``|got - want| <= tol * sqrt(9 C) * max(1, max|want|)`` (the error of a sum of
9C products grows like its square root):

* F(2,3), float32 storage: ``tol = 5e-7`` - float32 GEMM accuracy (its transforms only add and
  subtract; weights scaled by 1/2). Worst measured over 600 random layers: 6.4e-8.
* F(4,3), float32 storage: ``tol = 1e-5``, 20x looser: its transforms multiply by up to 8
  (output) and 5 (input), the weights carry 1/6, 1/12, 1/24 and the products cancel more.
  Worst measured: 1.9e-6 (F(4,3) with the points +-2 instead of +-1/2: ~40% worse).
* float16 storage: input and output are rounded to half (2^-11 relative): ``2e-3`` flat.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

wg = pytest.importorskip("mnnjit.backends.cpu.gemm.winograd")
from mnnjit.ops.nn_conv import conv2d_ref  # noqa: E402
from precision_refs import act_ref  # noqa: E402

ACTS = ["", "relu", "relu6", "sigmoid", "tanh", "hard_swish", "silu"]


def _ref(x, w, b, pads, act):
    xs = [x.astype(np.float32), w] + ([b] if b is not None else [])
    y = conv2d_ref(xs, dict(group=1, stride=(1, 1), dilation=(1, 1), pads=tuple(pads), act=""))
    return act_ref(y.astype(np.float64), act)


def _tol(m: int, C: int, dtype) -> float:
    if dtype == np.float16:
        return 2e-3
    return (2e-6 if m == 2 else 1e-5) * math.sqrt(9 * C)   # float32 sums of 9*C products


def _check(x, w, b, pads, act, m):
    got = wg.winograd_conv3x3(x, wg.winograd_weights(w, m), b, pads, act)
    want = _ref(x, w, b, pads, act)
    assert got.dtype == x.dtype and got.shape == want.shape
    # the error is relative to the sums before the activation (a saturating tanh/sigmoid keeps
    # its input's absolute error but shrinks max|want|)
    pre = _ref(x, w, b, pads, "")
    scale = max(1.0, float(np.abs(pre).max(initial=0.0)))
    err = np.abs(got.astype(np.float64) - want).max() / scale
    assert err <= _tol(m, x.shape[1], x.dtype), (err, m, x.shape, w.shape, pads, act)


@settings(max_examples=60, deadline=None)
@given(N=st.integers(1, 2), C=st.integers(1, 20), O=st.integers(1, 20), H=st.integers(1, 19),
       W=st.integers(1, 60), pads=st.sampled_from([(1, 1, 1, 1), (0, 0, 0, 0), (1, 0, 0, 1),
                                                   (2, 1, 0, 2), (0, 2, 1, 0)]),
       bias=st.booleans(), act=st.sampled_from(ACTS), m=st.sampled_from([2, 4]),
       f16=st.booleans(), seed=st.integers(0, 2 ** 31 - 1))
def test_matches_reference(N, C, O, H, W, pads, bias, act, m, f16, seed):
    """W up to 60: tile rows of >= 12 tiles take the per-row gather, shorter ones the flat one."""
    if H + pads[0] + pads[1] < 3 or W + pads[2] + pads[3] < 3:
        return                                     # no output: covered by test_bad_arguments
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, C, H, W)).astype(np.float16 if f16 else np.float32)
    w = rng.standard_normal((O, C, 3, 3)).astype(np.float32)
    b = rng.standard_normal(O).astype(np.float32) if bias else None
    _check(x, w, b, pads, act, m)


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("C,O,S", [(64, 64, 56), (128, 96, 28), (256, 256, 14), (512, 512, 7),
                                   (3, 32, 45)])
def test_layer_shapes(C, O, S, m):
    """Real layer sizes (ResNet-18, a 3-channel stem, odd sizes), relu epilogue."""
    rng = np.random.default_rng(C + S)
    x = rng.standard_normal((1, C, S, S)).astype(np.float32)
    w = (rng.standard_normal((O, C, 3, 3)) / math.sqrt(9 * C)).astype(np.float32)
    _check(x, w, rng.standard_normal(O).astype(np.float32), (1, 1, 1, 1), "relu", m)


@pytest.mark.parametrize("blocks", [(1, 1), (3, 5), (7, 64), (1000, 3)])
def test_explicit_blocks(blocks):
    """Any blocking (tiles split across rows, output channels split, one tile per task) gives
    the same result; several images per launch."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 11, 13, 10)).astype(np.float32)
    w = rng.standard_normal((17, 11, 3, 3)).astype(np.float32)
    b = rng.standard_normal(17).astype(np.float32)
    for m in (2, 4):
        got = wg.winograd_conv3x3(x, wg.winograd_weights(w, m), b, (1, 1, 1, 1), "relu6",
                                  blocks=blocks)
        want = _ref(x, w, b, (1, 1, 1, 1), "relu6")
        assert np.abs(got - want).max() <= _tol(m, 11, np.float32) * np.abs(want).max()


def test_out_argument_and_readonly_input():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 4, 9, 9)).astype(np.float16)
    x.flags.writeable = False
    w = rng.standard_normal((5, 4, 3, 3)).astype(np.float32)
    out = np.full((1, 5, 9, 9), np.nan, np.float16)
    res = wg.winograd_conv3x3(x, wg.winograd_weights(w, 4), None, (1, 1, 1, 1), out=out)
    assert res is out
    assert np.abs(out.astype(np.float32) - _ref(x, w, None, (1, 1, 1, 1), "")).max() < 0.05


@pytest.mark.parametrize("m", [2, 4])
def test_transform_matrices_are_a_correlation(m):
    """A^T [(G g) (.) (B^T d)] equals the 1-D correlation of d with g (exact in float64)."""
    at, g, bt = wg.transform_matrices(m)
    assert at.shape == (m, m + 2) and g.shape == (m + 2, 3) and bt.shape == (m + 2, m + 2)
    assert np.array_equal(bt, np.round(bt)) and np.array_equal(at, np.round(at))
    rng = np.random.default_rng(m)
    for _ in range(20):
        d, k = rng.standard_normal(m + 2), rng.standard_normal(3)
        want = np.array([d[i:i + 3] @ k for i in range(m)])
        assert np.allclose(at @ ((g @ k) * (bt @ d)), want, rtol=1e-12, atol=1e-12)


def test_bad_arguments():
    x = np.zeros((1, 4, 8, 8), np.float32)
    wt = wg.winograd_weights(np.zeros((6, 4, 3, 3), np.float32), 2)
    with pytest.raises(ValueError, match="NCHW"):
        wg.winograd_conv3x3(x[0], wt, None, (1, 1, 1, 1))
    with pytest.raises(ValueError, match="stride"):
        wg.winograd_conv3x3(x, wt, None, (1, 1, 1, 1), stride=(2, 2))
    with pytest.raises(ValueError, match="dilation"):
        wg.winograd_conv3x3(x, wt, None, (1, 1, 1, 1), dilation=(2, 1))
    with pytest.raises(ValueError, match="group"):
        wg.winograd_conv3x3(x, wt, None, (1, 1, 1, 1), group=2)
    with pytest.raises(ValueError, match="channels"):
        wg.winograd_conv3x3(np.zeros((1, 5, 8, 8), np.float32), wt, None, (1, 1, 1, 1))
    with pytest.raises(ValueError, match="bias"):
        wg.winograd_conv3x3(x, wt, np.zeros(5, np.float32), (1, 1, 1, 1))
    with pytest.raises(ValueError, match="pads"):
        wg.winograd_conv3x3(x, wt, None, (1, 1, -1, 1))
    with pytest.raises(ValueError, match="larger than"):
        wg.winograd_conv3x3(np.zeros((1, 4, 1, 8), np.float32), wt, None, (0, 0, 0, 0))
    with pytest.raises(ValueError, match="float32 or float16"):
        wg.winograd_conv3x3(x.astype(np.float64), wt, None, (1, 1, 1, 1))
    with pytest.raises(ValueError, match="unknown activation"):
        wg.winograd_conv3x3(x, wt, None, (1, 1, 1, 1), act="gelu")
    with pytest.raises(ValueError, match="out must"):
        wg.winograd_conv3x3(x, wt, None, (1, 1, 1, 1), out=np.empty((1, 6, 8, 7), np.float32))
    with pytest.raises(ValueError, match="overlap"):
        sq = wg.winograd_weights(np.zeros((4, 4, 3, 3), np.float32), 2)
        wg.winograd_conv3x3(x, sq, None, (1, 1, 1, 1), out=x)
    with pytest.raises(ValueError, match="blocks"):
        wg.winograd_conv3x3(x, wt, None, (1, 1, 1, 1), blocks=(0, 4))
    with pytest.raises(ValueError, match=r"\[O, C, 3, 3\]"):
        wg.winograd_weights(np.zeros((6, 4, 5, 5), np.float32), 2)
    with pytest.raises(ValueError, match="tile"):
        wg.winograd_weights(np.zeros((6, 4, 3, 3), np.float32), 3)
    with pytest.raises(TypeError, match="winograd_weights"):
        wg.winograd_conv3x3(x, np.zeros((6, 4, 3, 3), np.float32), None, (1, 1, 1, 1))


def test_choose_returns_a_method():
    for args in [(64, 64, 56, 56, 1), (512, 512, 7, 7, 2), (3, 64, 224, 224, 1), (8, 8, 2, 2, 1)]:
        assert wg.choose(*args) in (0, 2, 4)
    with pytest.raises(ValueError):
        wg.choose(0, 64, 56, 56, 1)


@settings(max_examples=25, deadline=None)
@given(C=st.integers(1, 12), O=st.integers(1, 14), H=st.integers(3, 17), W=st.integers(3, 40),
       act=st.sampled_from(ACTS), m=st.sampled_from([2, 4]), f16=st.booleans(),
       seed=st.integers(0, 2 ** 31 - 1))
def test_residual_is_added_before_the_activation(C, O, H, W, act, m, f16, seed):
    """``res``: out = act(conv + bias + res) (a residual connection fused into the scatter)."""
    rng = np.random.default_rng(seed)
    dt = np.float16 if f16 else np.float32
    x = rng.standard_normal((1, C, H, W)).astype(dt)
    w = rng.standard_normal((O, C, 3, 3)).astype(np.float32)
    b = rng.standard_normal(O).astype(np.float32)
    res = rng.standard_normal((1, O, H, W)).astype(dt)
    got = wg.winograd_conv3x3(x, wg.winograd_weights(w, m), b, (1, 1, 1, 1), act, res=res)
    want = _ref(x, w, b, (1, 1, 1, 1), "") + res.astype(np.float64)
    want = act_ref(want, act)
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    assert np.abs(got.astype(np.float64) - want).max() / scale <= _tol(m, C, dt) + (1e-3 if f16 else 0)
    with pytest.raises(ValueError, match="residual"):
        wg.winograd_conv3x3(x, wg.winograd_weights(w, m), b, (1, 1, 1, 1), act, res=res[:, :, 1:])


@settings(max_examples=25, deadline=None)
@given(N=st.integers(1, 2), C=st.integers(1, 12), O=st.integers(1, 14), H=st.integers(3, 17),
       W=st.integers(3, 40), m=st.sampled_from([2, 4]), f16=st.booleans(),
       res=st.booleans(), seed=st.integers(0, 2 ** 31 - 1))
def test_caller_workspace(N, C, O, H, W, m, f16, res, seed):
    """A caller's ``ws`` of :func:`workspace_floats` values (e.g. a plan's pooled buffer, dirty
    from earlier use) gives the same result as the per-thread workspace, and is written; a too
    small, wrongly typed or overlapping one falls back to the per-thread workspace."""
    rng = np.random.default_rng(seed)
    dt = np.float16 if f16 else np.float32
    x = rng.standard_normal((N, C, H, W)).astype(dt)
    wt = wg.winograd_weights(rng.standard_normal((O, C, 3, 3)).astype(np.float32), m)
    b = rng.standard_normal(O).astype(np.float32)
    r = rng.standard_normal((N, O, H, W)).astype(dt) if res else None
    want = wg.winograd_conv3x3(x, wt, b, (1, 1, 1, 1), "relu", res=r)
    need = wg.workspace_floats(x.shape, wt, (1, 1, 1, 1))
    ws = np.full(need + 5, np.nan, np.float32)          # garbage must not leak into results
    got = wg.winograd_conv3x3(x, wt, b, (1, 1, 1, 1), "relu", res=r, ws=ws)
    assert np.array_equal(got, want)
    assert not np.isnan(ws[:need]).all()                 # the caller's workspace was used
    small = np.full(need - 1, np.nan, np.float32)
    assert np.array_equal(wg.winograd_conv3x3(x, wt, b, (1, 1, 1, 1), "relu", res=r, ws=small), want)
    assert np.isnan(small).all()                         # too small: not touched
    out = np.empty_like(want)
    for bad in (np.zeros(need, np.float64), out.reshape(-1).view(np.uint8)[:0]):
        assert np.array_equal(wg.winograd_conv3x3(x, wt, b, (1, 1, 1, 1), "relu", res=r, ws=bad),
                              want)
    # a workspace overlapping the output is refused (the output stays right)
    big = np.zeros(max(need, want.size) * 2 + 8, np.float32)
    o2 = big[:want.size].view(np.float32).reshape(want.shape) if dt == np.float32 else None
    if o2 is not None:
        wg.winograd_conv3x3(x, wt, b, (1, 1, 1, 1), "relu", out=o2, res=r, ws=big)
        assert np.array_equal(o2, want)


def test_workspace_floats_checks_its_input():
    wt = wg.winograd_weights(np.ones((2, 3, 3, 3), np.float32), 2)
    assert wg.workspace_floats((1, 3, 8, 8), wt, (1, 1, 1, 1), 1) > 0
    with pytest.raises(ValueError, match="no output"):
        wg.workspace_floats((1, 3, 1, 1), wt, (0, 0, 0, 0), 1)
