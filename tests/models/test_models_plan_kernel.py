"""A hot tiny plan compiled into one kernel (backends/cpu/codegen/whole_plan.py): the same values as numpy,
outputs never overwritten, the Module's input checks unchanged, plans it does not take left on their
numpy function, and the switch controlled by MNNJIT_PLAN_KERNEL_CALLS."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_models_small_plan import _build, _mlp_case  # noqa: E402 - the numpy function's cases

import mnnjit as MNN
from mnnjit.backends.cpu.codegen import whole_plan as plan_kernel
from mnnjit import settings as config
from mnnjit.ops import build as B

from shared_paths import MODELS  # noqa: E402
nn, F = MNN.nn, MNN.expr


@pytest.fixture(autouse=True)
def _compile_at_once(monkeypatch):
    """Plans compile on their second forward (the first one runs the step loop)."""
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "0")


def _compiled(mod) -> bool:
    run = mod._last_plan.run
    return getattr(run, "__qualname__", "").startswith("_runner")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mlp_case())
def test_compiled_matmul_chains_match_numpy(case) -> None:
    ins, out, a_shape, b_shape, wb, expect, rng = _build(case)
    mod = nn.load_module(ins, [out])
    results = []
    for _ in range(4):  # step loop, then the compiled kernel
        av = rng.standard_normal(a_shape).astype(np.float32)
        bv = rng.standard_normal(b_shape).astype(np.float32) if len(ins) > 1 else wb
        feeds = [F.const(av, list(a_shape))] + ([F.const(bv, list(b_shape))] if len(ins) > 1 else [])
        got = mod.forward(feeds)[0]
        results.append((got, got.read(), expect(av, bv)))
    assert _compiled(mod)
    for got, first_read, want in results:
        np.testing.assert_array_equal(got.read(), first_read)  # never overwritten by later calls
        np.testing.assert_allclose(got.read(), want, rtol=2e-5, atol=2e-5 * max(1.0, float(np.abs(want).max())))


_UNARY = {"sigmoid": lambda x: 1 / (1 + np.exp(-x)), "tanh": np.tanh, "exp": np.exp, "neg": np.negative,
          "abs": np.abs, "square": np.square, "relu": lambda x: np.maximum(x, 0),
          "relu6": lambda x: np.clip(x, 0, 6)}
_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum,
           "minimum": np.minimum}


@st.composite
def _chain_case(draw):
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    ops = draw(st.lists(st.sampled_from(sorted(_UNARY) + sorted(_BINARY)), min_size=1, max_size=3))
    # per binary op: the broadcast shape of its constant operand
    others = [tuple(draw(st.sampled_from([d, 1])) for d in shape)[draw(st.integers(0, len(shape))):]
              for _ in ops]
    perm = draw(st.permutations(range(len(shape))))
    return shape, ops, others, tuple(perm), draw(st.integers(0, 2 ** 31 - 1))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_chain_case())
def test_compiled_elementwise_chains_match_numpy(case) -> None:
    shape, ops, others, perm, seed = case
    rng = np.random.default_rng(seed)
    x = F.placeholder(list(shape))
    node, fns = x._node, []
    for op, oshape in zip(ops, others):
        if op in _UNARY:
            node = B.make_node(op, [node])
            fns.append((_UNARY[op], None))
        else:
            c = rng.standard_normal(oshape).astype(np.float32)
            node = B.make_node(op, [node, F.const(c, list(oshape))._node])
            fns.append((_BINARY[op], c))
    node = B.make_node("transpose", [node], {"perm": list(perm)})
    flat = int(np.prod(shape))
    node = B.make_node("reshape", [node], {"shape": (flat,)})
    mod = nn.load_module([x], [B.wrap(node)])
    for _ in range(3):
        xv = rng.standard_normal(shape).astype(np.float32) * 2
        got = mod.forward([F.const(xv, list(shape))])[0].read()
        want = xv
        with np.errstate(all="ignore"):  # float32 as the reference computes it (overflow included)
            for fn, c in fns:
                want = (fn(want) if c is None else fn(want, c)).astype(np.float32)
        want = np.transpose(want, perm).reshape(-1)
        # exp of exp amplifies the ulp differences of two float32 exps
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    assert _compiled(mod)


def test_mlp_compiles_and_matches_real_mnn() -> None:
    config.counters["plan_kernels"] = 0
    m = nn.load_module_from_file(os.path.join(MODELS, "mlp.mnn"), ["x"], ["prob"])
    data = np.load(os.path.join(MODELS, "mlp.npz"))
    x0 = data["in0_x"]
    first = m.forward(F.const(x0, list(x0.shape)))
    outs = [m.forward(F.const(x0, list(x0.shape))) for _ in range(3)]
    assert _compiled(m) and config.counters["plan_kernels"] == 1
    for o in [first] + outs:
        np.testing.assert_allclose(o.read(), data["out0_prob"].reshape(o.shape), atol=1e-6)
    assert len({id(o.read_view()) for o in outs}) == 3  # a fresh array per forward
    # an input the compiled entry does not take (not contiguous) goes through the dispatcher
    wide = np.repeat(x0, 2, axis=1)
    got = m.forward([wide[:, ::2]])[0].read()
    np.testing.assert_allclose(got, data["out0_prob"].reshape(got.shape), atol=1e-6)
    # the Module's checks still run on every call
    with pytest.raises(ValueError, match=r"shapes \{'x': \[1, 65\]\}"):
        m.forward([F.const(np.ones((1, 65), np.float32), [1, 65])])
    ints = m.forward([F.const(np.ones((1, 64), np.int32), [1, 64], F.NCHW, F.int)])[0].read()
    np.testing.assert_allclose(ints, m.forward([F.const(np.ones((1, 64), np.float32), [1, 64])])[0].read())


def test_nan_and_inf_propagate_as_in_numpy() -> None:
    x = F.placeholder([2, 3])
    w = F.const(np.eye(3, dtype=np.float32), [3, 3])
    y = B.make_node("matmul_ex", [x._node, w._node], {"act": "relu"})
    y = B.make_node("softmax", [B.make_node("relu6", [y])], {"axis": 1})
    mod = nn.load_module([x], [B.wrap(y)])
    xv = np.array([[np.nan, 1, 2], [1e30, -1e30, 7]], np.float32)
    ref = mod.forward([F.const(xv, [2, 3])])[0].read()
    got = mod.forward([F.const(xv, [2, 3])])[0].read()
    assert _compiled(mod)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    assert np.isnan(got[0]).all() and np.isfinite(got[1]).all()


def test_plans_outside_the_tier_stay_on_numpy() -> None:
    x = F.placeholder([4, 5])
    y = B.make_node("reduce_sum", [x._node], {"axes": (1,), "keepdims": False})
    mod = nn.load_module([x], [B.wrap(y)])
    xv = np.arange(20, dtype=np.float32).reshape(4, 5)
    for _ in range(3):
        np.testing.assert_allclose(mod.forward([F.const(xv, [4, 5])])[0].read(), xv.sum(1))
    assert not _compiled(mod)
    assert plan_kernel.plan_source(*_plan_parts(mod)) is None


def _plan_parts(mod):
    p = mod._last_plan
    return p.steps, p.init, p.feed_slots, p.out_slots, p.order


def test_switch_off_keeps_the_numpy_function(monkeypatch) -> None:
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "off")
    m = nn.load_module_from_file(os.path.join(MODELS, "mlp.mnn"), ["x"], ["prob"])
    x = F.const(np.ones((1, 64), np.float32), [1, 64])
    for _ in range(5):
        m.forward(x)
    assert not _compiled(m)
    assert m._last_plan.run == m._last_plan._fast


def test_plan_compiles_after_the_configured_number_of_forwards(monkeypatch) -> None:
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "3")
    m = nn.load_module_from_file(os.path.join(MODELS, "mlp.mnn"), ["x"], ["prob"])
    x = F.const(np.ones((1, 64), np.float32), [1, 64])
    states = []
    for _ in range(6):
        m.forward(x)
        states.append(_compiled(m))
    assert states == [False, False, False, False, True, True]  # step loop, 3 warm calls, compiled


def test_two_inputs_two_outputs_fill_fresh_arrays() -> None:
    a = F.placeholder([2, 3])
    b = F.placeholder([3, 4])
    h = B.make_node("matmul_ex", [a._node, b._node], {"act": "relu"})
    s = B.make_node("softmax", [h], {"axis": 1})
    mod = nn.load_module([a, b], [B.wrap(h), B.wrap(s)])
    rng = np.random.default_rng(5)
    results = []
    for k in range(4):
        av = rng.standard_normal((2, 3)).astype(np.float32)
        bv = rng.standard_normal((3, 4)).astype(np.float32)
        outs = mod.forward([F.const(av, [2, 3]), F.const(bv, [3, 4])])
        results.append((outs, [o.read().copy() for o in outs], av, bv))
    assert _compiled(mod)
    for outs, firsts, av, bv in results:  # held outputs keep their values, and they are right
        hv = np.maximum(av @ bv, 0)
        ev = np.exp(hv - hv.max(1, keepdims=True))
        np.testing.assert_allclose(outs[0].read(), hv, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(outs[1].read(), ev / ev.sum(1, keepdims=True), rtol=1e-5,
                                   atol=1e-6)
        for o, f in zip(outs, firsts):
            np.testing.assert_array_equal(o.read(), f)


def test_an_output_that_is_a_reshape_is_filled_too() -> None:
    x = F.placeholder([2, 6])
    r = B.make_node("relu", [x._node], {})
    y = B.make_node("reshape", [r], {"shape": (3, 4)})
    mod = nn.load_module([x], [B.wrap(y)])
    rng = np.random.default_rng(9)
    for _ in range(3):
        xv = rng.standard_normal((2, 6)).astype(np.float32)
        got = mod.forward([F.const(xv, [2, 6])])[0].read()
        np.testing.assert_array_equal(got, np.maximum(xv, 0).reshape(3, 4))
    assert _compiled(mod)
    assert "o0f[i] = v" in plan_kernel.plan_source(*_plan_parts(mod))[0]  # the copy path
