"""Modules, clones, sessions and lazy Vars used from several threads at once: every forward equals
the single-threaded one bit for bit, for every model of the shared corpus; lazy graphs read on
threads give their single-threaded values (to rounding), also when placeholders are written
elsewhere meanwhile."""
from __future__ import annotations

import os

import numpy as np
import pytest

import mnnjit as MNN
from shared_paths import MODELS
from threads_helpers import (NAMES, as_vars, assert_close, assert_same, case_arrays, forward, load,
                             run_together, warm)

#: threads, and forwards per thread (each thread starts at another case, so threads run
#: different inputs - and for the dynamic model different shapes - at the same time)
N, M = 4, 3


@pytest.fixture(autouse=True)
def _last_tier_at_once(monkeypatch):
    """Tiny plans switch to their compiled kernel on the second forward (the warm-up reaches
    every plan's last tier quickly)."""
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "0")


def _references(mod, cases):
    warm(mod, cases)
    return [forward(mod, arrays) for arrays in cases]


@pytest.mark.parametrize("name", NAMES)
def test_shared_module_and_clones_match_single_threaded(name):
    """N threads x M forwards on one shared Module, then on N clones (made after the first
    forward, so they share its cached plans)."""
    cases = case_arrays(name)
    mod = load(name)
    refs = _references(mod, cases)
    clones = [mod.clone() for _ in range(N)]

    def work(targets):
        def run(t):
            out = []
            for i in range(M):
                k = (t + i) % len(cases)
                out.append((k, forward(targets[t], cases[k])))
            return out
        return run

    for label, targets in (("shared", [mod] * N), ("clones", clones)):
        for t, runs in enumerate(run_together(N, work(targets))):
            for i, (k, got) in enumerate(runs):
                assert_same(got, refs[k], f"{name} {label}: thread {t} forward {i} (case {k})")
    # clones share the compiled plan (weights, kernels) of the module they were made from
    assert all(c._last_plan is mod._last_plan or len(cases) > 1 for c in clones)
    for c in clones:
        assert c._program is mod._program


@pytest.mark.parametrize("name", ["convbn", "opmix", "mobilenetv2"])
def test_sessions_on_threads(name):
    """runSession on separate sessions of one Interpreter, one per thread."""
    cases = case_arrays(name)
    interp = MNN.Interpreter(os.path.join(MODELS, name + ".mnn"))

    def run_session(session, arrays):
        x = arrays[0]
        i = interp.getSessionInput(session)
        if i.getShape() != x.shape:
            interp.resizeTensor(i, x.shape)
            interp.resizeSession(session)
        i.copyFrom(MNN.Tensor(x.shape, MNN.Halide_Type_Float, x, MNN.Tensor_DimensionType_Caffe))
        assert interp.runSession(session) == 0
        return [np.array(t.getNumpyData()) for t in interp.getSessionOutputAll(session).values()]

    ref_session = interp.createSession({"numThread": 1})
    refs = [run_session(ref_session, arrays) for arrays in cases]
    sessions = [interp.createSession({"numThread": 1}) for _ in range(N)]

    def work(t):
        return [((t + i) % len(cases), run_session(sessions[t], cases[(t + i) % len(cases)]))
                for i in range(M)]

    for t, runs in enumerate(run_together(N, work)):
        for i, (k, got) in enumerate(runs):
            assert_same(got, refs[k], f"{name} session {t} run {i} (case {k})")


def _graph(x):
    """A lazy graph with a convolution (lowered to kernel steps), a fused elementwise chain and a
    reduction."""
    F = MNN.expr
    w = F.const(np.linspace(-1, 1, 16 * 8 * 9, dtype=np.float32).reshape(16, 8, 3, 3), [16, 8, 3, 3])
    b = F.const(np.linspace(0, 1, 16, dtype=np.float32), [16])
    y = F.relu(F.convert(F.conv2d(F.convert(x, F.NC4HW4), w, b, [1, 1], [1, 1],
                                  padding_mode=F.Padding_Mode.SAME), F.NCHW))
    z = F.sigmoid(y * 0.5 + 1.0) - F.tanh(y)
    return z, F.reduce_mean(z, [1])


def test_lazy_var_reads_on_threads():
    """Threads read one shared lazy graph while others build, write and read graphs of their
    own placeholders (each write invalidates every cached lazy value)."""
    F = MNN.expr
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((1, 8, 40, 40)).astype(np.float32) for _ in range(N)]
    shared_x = F.placeholder([1, 8, 40, 40], F.NCHW)
    shared_x.write(data[0])
    shared = _graph(shared_x)
    want = []
    for d in data:
        own = F.placeholder([1, 8, 40, 40], F.NCHW)
        own.write(d)
        want.append([np.array(v.read()) for v in _graph(own)])

    def work(t):
        out = []
        for _ in range(M):
            if t % 2:       # its own placeholder, written each time, and its own graph
                own = F.placeholder([1, 8, 40, 40], F.NCHW)
                own.write(data[t])
                out.append((t, [np.array(v.read()) for v in _graph(own)]))
            else:           # the shared graph: only read
                out.append((0, [np.array(v.read()) for v in shared]))
        return out

    # (to rounding: which values a read finds cached decides how the rest is fused)
    for t, runs in enumerate(run_together(N, work)):
        for i, (k, got) in enumerate(runs):
            assert_close(got, want[k], f"thread {t} read {i}")


def _bump_between(monkeypatch, target, name):
    """Wrap ``target.name`` so a placeholder write elsewhere (as by another thread) lands right
    before it runs."""
    from mnnjit.graph import bump_write_counter
    orig = getattr(target, name)

    def wrapped(*args, **kwargs):
        bump_write_counter()
        return orig(*args, **kwargs)
    monkeypatch.setattr(target, name, wrapped)


@pytest.mark.parametrize("where", ["after_evaluate", "before_lowered_run", "before_plan_run"])
def test_lazy_read_survives_a_write_elsewhere_meanwhile(monkeypatch, where):
    """A placeholder write elsewhere (another thread's, here injected deterministically) between
    tracing and running a lazy graph, or between computing and reading its value, neither loses
    nor changes the value: a lowered graph (convolution) and a compiled plan (elementwise
    chain)."""
    from mnnjit import runtime
    from mnnjit.compiler import executor, lower, plan
    from mnnjit.graph import bump_write_counter
    F = MNN.expr
    rng = np.random.default_rng(1)
    data = rng.standard_normal((1, 8, 40, 40)).astype(np.float32)
    big = rng.standard_normal((1, 8, 128, 128)).astype(np.float32)

    def graphs():
        # each graph starts from a value computed before (a leaf that a write elsewhere makes
        # read as stale), on placeholders of its own
        x = F.placeholder([1, 8, 40, 40], F.NCHW)
        x.write(data)
        x2 = x * 2.0
        x2.read()
        y = F.placeholder([1, 8, 128, 128], F.NCHW)     # (large enough for a compiled plan)
        y.write(big)
        a = F.tanh(y)
        a.read()
        return list(_graph(x2)) + [F.sigmoid(a * 0.5 + 1.0) * a - a]

    want = [np.array(v.read()) for v in graphs()]
    counts = dict(executor.counters)
    if where == "after_evaluate":
        def evaluate_then_write(nodes):
            executor.evaluate(nodes)
            bump_write_counter()
        prev = runtime.set_executor(evaluate_then_write)
        try:
            got = [np.array(v.read()) for v in graphs()]
        finally:
            runtime.set_executor(prev)
    else:
        if where == "before_lowered_run":   # after tracing, before the lowered graph runs
            _bump_between(monkeypatch, lower, "run_expression_graph")
        else:
            _bump_between(monkeypatch, plan.Plan, "run")
        got = [np.array(v.read()) for v in graphs()]
    assert_close(got, want, where)
    # both paths ran: a lowered graph (the convolution) and a compiled plan (the chain)
    assert executor.counters["plan_cache_hits"] + executor.counters["plans_built"] > \
        counts.get("plan_cache_hits", 0) + counts.get("plans_built", 0)
