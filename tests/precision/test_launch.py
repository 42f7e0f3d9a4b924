"""Kernel launches bound to fixed arrays (:mod:`mnnjit.backends.cpu.runtime.launch`): the same results as
the kernel classes' ``run`` on every call, the compiled entry point after the first call, the
dispatcher as the fallback, and plan steps bound this way inside the executor."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("numba")
from numba import njit  # noqa: E402

from mnnjit.backends.cpu.gemm import gemv as G  # noqa: E402
from mnnjit.backends.cpu.gemm.conv import ConvGemm, PackedWeights  # noqa: E402
from mnnjit.backends.cpu.depthwise.planes import Depthwise  # noqa: E402
from mnnjit.backends.cpu.depthwise.expand_dw import ExpandDepthwise  # noqa: E402
from mnnjit.backends.cpu.runtime.launch import bind_launch, entry_point  # noqa: E402

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@njit(cache=False)
def _scale_into(a, out, f):
    for i in range(a.shape[0]):
        out[i] = a[i] * f


def test_bind_launch_uses_the_entry_point_after_the_first_call():
    a = np.arange(5, dtype=np.float32)
    out = np.zeros(5, np.float32)
    call = bind_launch((_scale_into, (a, out, 2.0)))
    call()
    np.testing.assert_array_equal(out, a * 2)
    assert entry_point(_scale_into, (a, out, 2.0)) is not None
    a[:] = 7
    call()                                    # the bound arrays are read again on every call
    np.testing.assert_array_equal(out, np.full(5, 14, np.float32))


def test_entry_point_is_none_for_types_not_compiled_and_plain_functions():
    assert entry_point(_scale_into, (np.zeros(3, np.int16), np.zeros(3, np.int16), 1)) is None
    assert entry_point(lambda x: x, (1,)) is None
    seen = []
    call = bind_launch((lambda v, w: seen.append(v + w), (1, 2)))
    call()
    call()
    assert seen == [3, 3]


@SETTINGS
@given(st.integers(1, 2), st.integers(1, 20), st.integers(1, 30), st.integers(1, 12), st.integers(1, 12),
       st.sampled_from([(1, 1), (3, 1), (3, 2)]), st.booleans(), st.integers(0, 2**31))
def test_bound_conv_matches_run(n, c, o, h, w, ks, residual, seed):
    """A bound ConvGemm launch (plain or with a residual) gives ``run``'s numbers, call after call."""
    k, s = ks
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h + k, w + k)).astype(np.float32)
    conv = ConvGemm(PackedWeights.from_dense(rng.standard_normal((o, c * k * k)).astype(np.float32)),
                    rng.standard_normal(o).astype(np.float32), x.shape, (k, k), (s, s), act="relu")
    res = rng.standard_normal(conv.out_shape).astype(np.float32) if residual else None
    want = conv.run(x, np.empty(conv.out_shape, np.float32), res)
    out = np.full(conv.out_shape, np.nan, np.float32)
    call = bind_launch(conv.launch(x, out, res))
    for _ in range(2):
        call()
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("hw,s", [(7, 1), (14, 2), (40, 2), (9, 1)])
def test_bound_depthwise_and_expansion_match_run(hw, s):
    rng = np.random.default_rng(hw)
    x = rng.standard_normal((1, 8, hw + hw % 2, hw + hw % 2)).astype(np.float32)
    e = ConvGemm(PackedWeights.from_dense(rng.standard_normal((12, 8)).astype(np.float32)), None, x.shape,
                 (1, 1), act="relu6")
    d = Depthwise(rng.standard_normal((12, 9)).astype(np.float32), None, e.out_shape, (3, 3), (s, s),
                  (1, 1, 1, 1), (1, 1), "relu")
    mid = e.run(x, np.empty(e.out_shape, np.float32))
    for op, inp in ((d, mid), (ExpandDepthwise(e, d), x)):
        want = op.run(inp, np.empty(d.out_shape, np.float32))
        out = np.zeros(d.out_shape, np.float32)
        call = bind_launch(op.launch(inp, out))
        call()
        call()
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("m,k,n,threads", [(1, 1280, 1000, 2), (3, 64, 17, 1)])
def test_bound_gemv_matches_run_and_declines_half_storage(m, k, n, threads):
    rng = np.random.default_rng(k)
    w = rng.standard_normal((n, k)).astype(np.float32)
    g = G.Gemv(w, rng.standard_normal(n).astype(np.float32), "relu", (m, k), False, (m, n), False,
               threads=threads)
    x = rng.standard_normal((m, k)).astype(np.float32)
    want = g.run(x, np.empty((m, n), np.float32))
    out = np.zeros((m, n), np.float32)
    call = bind_launch(g.launch(x, out))
    call()
    np.testing.assert_array_equal(out, want)
    assert g.launch(x.view(np.uint16)[:, :k], np.zeros((m, n), np.uint16)) is None


def test_mobilenet_steps_run_bound_and_match_real_mnn(shared_dir):
    """MobileNetV2's kernel steps run as bound launches and still give real MNN's stored output."""
    import mnnjit as J
    data = np.load(shared_dir / "models" / "mobilenetv2.npz")
    names = sorted(data.files)
    x = next(data[k] for k in names if data[k].ndim == 4)
    want = next(data[k] for k in names if data[k].ndim == 2)
    m = J.nn.load_module_from_file(str(shared_dir / "models" / "mobilenetv2.mnn"), ["x"], [])
    got = m.forward(J.expr.const(x, list(x.shape))).read()
    kinds = [c.__name__ for c in m._last_plan._calls]
    assert kinds.count("call_bound") >= 30
    assert np.abs(got - want).max() <= 1e-3 * max(1.0, float(np.abs(want).max()))


@pytest.mark.parametrize("m,residual", [(2, False), (4, True)])
def test_bound_winograd_matches_the_call(m, residual):
    """``winograd_conv3x3(launch_only=True)`` checks its arguments and returns the launch that,
    bound, computes what the call computes."""
    from mnnjit.backends.cpu.gemm import winograd as W
    rng = np.random.default_rng(m)
    x = rng.standard_normal((1, 5, 13, 11)).astype(np.float32)
    wt = W.winograd_weights(rng.standard_normal((7, 5, 3, 3)).astype(np.float32), m)
    b = rng.standard_normal(7).astype(np.float32)
    res = rng.standard_normal((1, 7, 13, 11)).astype(np.float32) if residual else None
    want = W.winograd_conv3x3(x, wt, b, (1, 1, 1, 1), "relu", res=res)
    out = np.full_like(want, np.nan)
    call = bind_launch(W.winograd_conv3x3(x, wt, b, (1, 1, 1, 1), "relu", out, res=res, launch_only=True))
    call()
    call()
    np.testing.assert_array_equal(out, want)
    with pytest.raises(ValueError, match="channels"):
        W.winograd_conv3x3(x[:, :4], wt, b, (1, 1, 1, 1), "relu", out, launch_only=True)
