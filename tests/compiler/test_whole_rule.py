"""The whole-forward rule (``compiler/whole.py``): a tiny graph run often becomes one compiled function,
whether a model's plan or an expression graph built by ``mnnjit.expr`` calls."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

import mnnjit.expr as F
from mnnjit import settings
from mnnjit.compiler import whole
from mnnjit.compiler.executor import clear_plan_cache


@pytest.fixture
def hot_after_two(monkeypatch):
    """Graphs compile after two calls, synchronously (the answer does not depend on timing), with the
    default compile threshold (this folder's conftest forces every graph onto kernel groups)."""
    from mnnjit import compiler
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "2")
    monkeypatch.setenv("MNNJIT_COMPILE", "sync")
    old = compiler.threshold()
    compiler.set_threshold(None)
    clear_plan_cache()
    yield
    compiler.set_threshold(old)
    clear_plan_cache()


def _rnn(xs: np.ndarray, w: F.Var, u: F.Var, b: F.Var) -> F.Var:
    h = F.const(np.zeros((1, xs.shape[-1]), np.float32), [1, xs.shape[-1]])
    for x in xs:
        h = F.tanh(F.matmul(F.const(x, list(x.shape)), w) + F.matmul(h, u) + b)
    return h


def _rnn_numpy(xs, w, u, b):
    h = np.zeros((1, xs.shape[-1]), np.float32)
    for x in xs:
        h = np.tanh(x @ w + h @ u + b)
    return h


@hsettings(max_examples=4, deadline=None, derandomize=True,
           suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.integers(2, 6), hidden=st.sampled_from([4, 16, 24]), seed=st.integers(0, 2**16))
def test_an_expression_rnn_compiled_whole_matches_numpy(hot_after_two, steps, hidden, seed):
    rng = np.random.default_rng(seed)
    w, u = (rng.standard_normal((hidden, hidden)).astype(np.float32) * 0.3 for _ in range(2))
    b = rng.standard_normal(hidden).astype(np.float32)
    wv, uv, bv = F.const(w, list(w.shape)), F.const(u, list(u.shape)), F.const(b, [hidden])
    before = settings.counters["plan_kernels"]
    for call in range(4):  # new inputs every call: they are fed, the weights stay compiled in
        xs = rng.standard_normal((steps, 1, hidden)).astype(np.float32)
        got = _rnn(xs, wv, uv, bv).read()
        np.testing.assert_allclose(got, _rnn_numpy(xs, w, u, b), rtol=1e-5, atol=1e-5)
    assert settings.counters["plan_kernels"] == before + 1


def test_new_weights_are_a_new_graph_not_a_stale_kernel(hot_after_two):
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((3, 1, 8)).astype(np.float32)
    for _ in range(2):  # a fresh set of weights each round, each round hot
        w, u = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2))
        b = rng.standard_normal(8).astype(np.float32)
        wv, uv, bv = F.const(w, [8, 8]), F.const(u, [8, 8]), F.const(b, [8])
        for _ in range(4):
            np.testing.assert_allclose(_rnn(xs, wv, uv, bv).read(), _rnn_numpy(xs, w, u, b), rtol=1e-5, atol=1e-5)


def test_results_are_read_only_and_not_shared_between_calls(hot_after_two):
    rng = np.random.default_rng(2)
    w = F.const(rng.standard_normal((8, 8)).astype(np.float32), [8, 8])
    outs = []
    for k in range(6):
        xs = np.full((3, 1, 8), k, np.float32)
        v = _rnn(xs, w, w, F.const(np.zeros(8, np.float32), [8]))
        if k % 2:
            view = np.asarray(v)        # the zero-copy view of a cached value is read-only
            assert not view.flags.writeable
        got = v.read()                  # (even k: the Var's own memory, handed out)
        outs.append((k, got, got.copy()))
    for k, got, snapshot in outs:
        np.testing.assert_array_equal(got, snapshot)  # a later call did not overwrite an earlier result


def test_graphs_the_backend_declines_keep_their_step_path(hot_after_two):
    # an integer graph: the whole-forward kernel computes float32 only
    a = F.const(np.arange(12, dtype=np.int32).reshape(3, 4), [3, 4], F.NCHW, F.int)
    for _ in range(4):
        x = F.const(np.arange(12, dtype=np.int32).reshape(3, 4), [3, 4], F.NCHW, F.int)
        got = ((x + a) * x - a + x).read()
        r = np.arange(12).reshape(3, 4)
        want = (r + r) * r - r + r
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want.astype(np.int32))


def test_the_rule_is_off_when_plan_kernels_are(hot_after_two, monkeypatch):
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "off")
    rng = np.random.default_rng(3)
    w = F.const(rng.standard_normal((8, 8)).astype(np.float32), [8, 8])
    before = settings.counters["plan_kernels"]
    for _ in range(40):
        _rnn(np.ones((3, 1, 8), np.float32), w, w, w[0]).read()
    assert settings.counters["plan_kernels"] == before


def test_is_tiny_bounds_activations_not_weights():
    w = F.const(np.ones((64, 64), np.float32), [64, 64])  # 4096 weights: fine
    x = F.const(np.ones((1, 64), np.float32), [1, 64])
    small = F.relu(F.matmul(x, w))
    big = F.relu(F.const(np.ones((1, whole.TINY_WORK), np.float32), [1, whole.TINY_WORK]) * 2.0)
    from mnnjit.graph import topo_order
    assert whole.is_tiny(topo_order([small._node]))
    assert not whole.is_tiny(topo_order([big._node]))


def test_a_model_plan_is_the_rules_step_list():
    import mnnjit as J
    from mnnjit.models.program import TINY_WORK
    assert TINY_WORK == whole.TINY_WORK
    from shared_paths import MODELS
    model = os.path.join(MODELS, "mlp.mnn")
    m = J.nn.load_module_from_file(model, ["x"], ["prob"])
    x = np.random.default_rng(4).standard_normal((1, 64)).astype(np.float32)
    want = m.forward(F.const(x, [1, 64])).read()
    plan = next(iter(m._program._plans.values()))
    assert isinstance(plan.step_list, whole.StepList)
    np.testing.assert_allclose(whole.run_steps(plan.step_list, [x])[0], want, rtol=1e-6, atol=1e-7)
