"""Small plans (one generated numpy function per plan) and the Module's same-signature fast path:
written-out ops give the reference's values, outputs are never overwritten by a later forward, bad
input after a fast call still gets the full checks, and floating-point warnings stay silent."""
from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mnnjit as MNN
from mnnjit.ops import build as B

from shared_paths import MODELS  # noqa: E402
nn, F = MNN.nn, MNN.expr


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@st.composite
def _mlp_case(draw):
    m, k, n = draw(st.integers(1, 6)), draw(st.integers(1, 12)), draw(st.integers(1, 12))
    ta, tb = draw(st.booleans()), draw(st.booleans())
    b_const = draw(st.booleans())
    bias = draw(st.sampled_from(["none", "vec", "row", "full"]))
    act = draw(st.sampled_from(["", "relu", "relu6"]))
    tail = draw(st.sampled_from(["softmax0", "softmax1", "softmax-1", "relu", "relu6", "add", "mul", "sub",
                                 "div", "maximum", "minimum", "none"]))
    seed = draw(st.integers(0, 2 ** 31 - 1))
    return m, k, n, ta, tb, b_const, bias, act, tail, seed


def _build(case):
    """A graph matmul_ex(+bias, act) -> tail op, its inputs, and a numpy function computing it."""
    m, k, n, ta, tb, b_const, bias, act, tail, seed = case
    rng = np.random.default_rng(seed)
    a_shape = (k, m) if ta else (m, k)
    b_shape = (n, k) if tb else (k, n)
    wb = (rng.standard_normal(b_shape) * 3).astype(np.float32)
    bias_val = {"none": None, "vec": rng.standard_normal(n), "row": rng.standard_normal((1, n)),
                "full": rng.standard_normal((m, n))}[bias]
    other = (rng.standard_normal((m, n)) + 2.5).astype(np.float32)
    xa = F.placeholder(list(a_shape))
    ins = [xa]
    b_node = F.const(wb, list(b_shape))._node
    if not b_const:
        xb = F.placeholder(list(b_shape))
        ins.append(xb)
        b_node = xb._node
    nodes = [xa._node, b_node]
    if bias_val is not None:
        bias_val = bias_val.astype(np.float32)
        nodes.append(F.const(bias_val, list(bias_val.shape))._node)
    y = B.make_node("matmul_ex", nodes, {"transpose_a": ta, "transpose_b": tb, "act": act})
    if tail.startswith("softmax"):
        y = B.make_node("softmax", [y], {"axis": int(tail[7:])})
    elif tail in ("relu", "relu6"):
        y = B.make_node(tail, [y])
    elif tail != "none":
        y = B.make_node(tail, [y, F.const(other, [m, n])._node])

    def expect(av: np.ndarray, bv: np.ndarray) -> np.ndarray:
        r = (av.T if ta else av).astype(np.float64) @ (bv.T if tb else bv).astype(np.float64)
        if bias_val is not None:
            r = r + bias_val
        if act:
            r = np.maximum(r, 0) if act == "relu" else np.clip(r, 0, 6)
        if tail.startswith("softmax"):
            r = _softmax(r, int(tail[7:]))
        elif tail in ("relu", "relu6"):
            r = np.maximum(r, 0) if tail == "relu" else np.clip(r, 0, 6)
        elif tail != "none":
            fn = {"add": np.add, "mul": np.multiply, "sub": np.subtract, "div": np.divide,
                  "maximum": np.maximum, "minimum": np.minimum}[tail]
            r = fn(r, other.astype(np.float64))
        return r
    return ins, B.wrap(y), a_shape, b_shape, wb, expect, rng


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mlp_case())
def test_generated_small_plan_matches_numpy(case) -> None:
    ins, out, a_shape, b_shape, wb, expect, rng = _build(case)
    mod = nn.load_module(ins, [out])
    results = []
    for _ in range(3):  # the first call runs the step loop, later ones the generated function
        av = rng.standard_normal(a_shape).astype(np.float32)
        bv = rng.standard_normal(b_shape).astype(np.float32) if len(ins) > 1 else wb
        feeds = [F.const(av, list(a_shape))] + ([F.const(bv, list(b_shape))] if len(ins) > 1 else [])
        got = mod.forward(feeds)[0]
        results.append((got, got.read(), expect(av, bv)))
    for got, first_read, want in results:  # earlier outputs were not overwritten by later calls
        np.testing.assert_array_equal(got.read(), first_read)
        np.testing.assert_allclose(got.read(), want, rtol=2e-5, atol=2e-5 * max(1.0, float(np.abs(want).max())))
    plan = mod._last_plan
    assert plan._fast is not None
    assert "r0(" not in plan._fast.source and "r1(" not in plan._fast.source  # every op written out


def test_mlp_outputs_survive_later_forwards_and_match_reference() -> None:
    m = nn.load_module_from_file(os.path.join(MODELS, "mlp.mnn"), ["x"], ["prob"])
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((1, 64)).astype(np.float32) for _ in range(4)]
    outs = [m.forward([F.const(x, [1, 64])])[0] for x in xs]
    views = [o.read_view() for o in outs]
    firsts = [v.copy() for v in views]
    for x in xs:  # run again: nothing a caller holds may change
        m.forward(F.const(x, [1, 64]))
    for o, v, f in zip(outs, views, firsts):
        np.testing.assert_array_equal(o.read(), f)
        np.testing.assert_array_equal(v, f)
    assert not np.array_equal(firsts[0], firsts[1])
    data = np.load(os.path.join(MODELS, "mlp.npz"))  # real MNN's stored outputs
    for k in (0, 1, 0):
        x = data[f"in{k}_x"]
        got = m.forward(F.const(x, list(x.shape))).read()
        np.testing.assert_allclose(got, data[f"out{k}_prob"].reshape(got.shape), atol=1e-6)


def test_fast_path_still_checks_every_call() -> None:
    m = nn.load_module_from_file(os.path.join(MODELS, "mlp.mnn"), ["x"], ["prob"])
    x = F.const(np.ones((1, 64), np.float32), [1, 64])
    ref = m.forward([x])[0].read()
    m.forward([x])  # the fast path is armed now
    with pytest.raises(ValueError, match=r"1 input\(s\) \['x'\], got 2"):
        m.forward([x, x])
    with pytest.raises(ValueError, match=r"1 input\(s\) \['x'\], got 0"):
        m.forward([])
    np.testing.assert_allclose(m.forward([F.const(np.ones((1, 64), np.int32), [1, 64], F.NCHW, F.int)])[0].read(),
                               ref)  # int32 data for the float input is converted
    with pytest.raises(ValueError, match="'x'.*2 dimensions"):
        m.forward([F.const(np.ones((1, 8, 8), np.float32), [1, 8, 8])])
    with pytest.raises(ValueError, match=r"shapes \{'x': \[1, 65\]\}"):
        m.forward([F.const(np.ones((1, 65), np.float32), [1, 65])])
    # other accepted forms after a fast call: a float64 array input, a numpy array, a tuple
    np.testing.assert_allclose(m.forward([np.ones((1, 64))])[0].read(), ref, rtol=1e-6)
    np.testing.assert_allclose(m.forward(np.ones((1, 64), np.float32)).read(), ref, rtol=1e-6)
    np.testing.assert_allclose(m.forward((x,))[0].read(), ref, rtol=1e-6)
    # a placeholder written between calls feeds its new contents
    p = F.placeholder([1, 64])
    p.write(np.ones((1, 64), np.float32))
    np.testing.assert_allclose(m.forward([p])[0].read(), ref, rtol=1e-6)
    p.write(np.full((1, 64), -2.0, np.float32))
    other = m.forward([p])[0].read()
    want = m.forward([F.const(np.full((1, 64), -2.0, np.float32), [1, 64])])[0].read()
    np.testing.assert_array_equal(other, want)
    assert not np.array_equal(other, ref)


def test_non_finite_inputs_raise_no_warnings_and_leave_errstate() -> None:
    m = nn.load_module_from_file(os.path.join(MODELS, "mlp.mnn"), ["x"], ["prob"])
    x = np.zeros((1, 64), np.float32)
    x[0, 3] = np.inf
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            out = m.forward(F.const(x, [1, 64])).read()
    assert np.geterr() == before
    with pytest.raises(FloatingPointError):  # the user's own settings are untouched afterwards
        with np.errstate(all="raise"):
            np.float32(1) / np.float32(0)


def test_tiny_work_limit_is_the_compilers_kernel_minimum() -> None:
    from mnnjit.compiler.plan import KERNEL_MIN
    from mnnjit.models.program import TINY_WORK
    assert TINY_WORK == KERNEL_MIN


def test_mlp_first_forward_imports_neither_compiler_nor_numba() -> None:
    code = ("import sys, numpy as np, mnnjit as J\n"
            f"m = J.nn.load_module_from_file({os.path.join(MODELS, 'mlp.mnn')!r}, ['x'], ['prob'])\n"
            "m.forward(J.expr.const(np.ones((1, 64), np.float32), [1, 64])).read()\n"
            "print([k for k in ('numba', 'mnnjit.compiler.executor', 'mnnjit.compiler.plan', 'numpy.random') if k in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.getcwd()), timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.parametrize("shape,axis", [((1, 7), 1), ((1, 7), -1), ((7, 1), 0), ((1, 1, 5), 2), ((3, 5), 1), ((3, 5), 0)])
def test_softmax_rows_extreme_values_match_reference(shape, axis) -> None:
    x = F.placeholder(list(shape))
    y = B.wrap(B.make_node("softmax", [B.make_node("add", [x._node, F.const(np.zeros(shape, np.float32),
                                                                                  list(shape))._node])],
                           {"axis": axis}))
    mod = nn.load_module([x], [y])
    n = shape[axis]
    rng = np.random.default_rng(3)
    cases = [rng.standard_normal(shape), rng.standard_normal(shape) * 30, rng.standard_normal(shape) + 200.0,
             rng.standard_normal(shape) - 200.0, rng.standard_normal(shape) - 90.0, np.full(shape, -1e30),
             np.zeros(shape)]
    special = np.zeros(shape)
    special.flat[0] = np.inf
    nan = np.zeros(shape)
    nan.flat[-1] = np.nan
    cases += [special, nan]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):  # first call: step loop; second: generated function
            for c in cases:
                c = c.astype(np.float32)
                got = mod.forward(F.const(c, list(shape))).read()
                with np.errstate(all="ignore"):
                    want = _softmax(c.astype(np.float64), axis)
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7, err_msg=f"{c}")
    single_row = int(np.prod(shape)) == n  # written out as exp / sum with the reference as fall-back
    assert ("INF" in mod._last_plan._fast.source) == single_row


def test_generated_function_without_numpy_context_variable(monkeypatch) -> None:
    """The np.errstate form of the generated function (numpy without the errstate context variable)."""
    from mnnjit.models import small_plan
    monkeypatch.setattr(small_plan, "_FP_VAR", None)
    case = (1, 5, 4, False, True, True, "vec", "relu", "softmax1", 7)
    ins, out, a_shape, b_shape, wb, expect, rng = _build(case)
    mod = nn.load_module(ins, [out])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for scale in (1.0, 1e30, 1.0):  # 1e30: exp overflows inside (warnings must stay silent)
            av = (rng.standard_normal(a_shape) * scale).astype(np.float32)
            got = mod.forward(F.const(av, list(a_shape))).read()
            with np.errstate(all="ignore"):
                want = expect(av, wb)
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-7)
    assert "errstate(all='ignore')" in mod._last_plan._fast.source


def test_subclass_overriding_onforward_is_called_on_every_forward() -> None:
    calls = []

    class Counted(nn._Module):
        def onForward(self, inputs):  # noqa: N802 - MNN's name
            calls.append(1)
            return super().onForward(inputs)

    base = nn.load_module_from_file(os.path.join(MODELS, "mlp.mnn"), ["x"], ["prob"])
    m = Counted(base._program, base._rt)
    x = F.const(np.ones((1, 64), np.float32), [1, 64])
    want = base.forward(x).read()
    for _ in range(4):
        np.testing.assert_allclose(m.forward(x).read(), want, rtol=1e-6)
        np.testing.assert_allclose(m.forward([x])[0].read(), want, rtol=1e-6)
    assert len(calls) == 8
