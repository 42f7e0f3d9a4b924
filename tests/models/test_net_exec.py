"""The kernel-step executor (backends/cpu/kernel_steps.NetPlan) against the reference plan of the same
model: random small CNNs converted by real MNN's converter, each mode; buffers reused between
forwards never leak into results a caller keeps."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mnnjit as MNN
from mnnjit.compiler import set_threshold

pytest.importorskip("onnx")
from mnnjit_models_fixtures import convert  # noqa: E402
from test_models_properties import _build, cnn_specs  # noqa: E402

_DIR = tempfile.mkdtemp(prefix="mnnjit_netexec_")


def _run(path, x, threshold, config=None):
    prev = set_threshold(threshold)
    try:
        rt = MNN.nn.create_runtime_manager(config or {})
        m = MNN.nn.load_module_from_file(path, ["x"], [], runtime_manager=rt)
        y = m.forward(MNN.expr.const(x, list(x.shape)))
        return np.array(y.read()), type(m._last_plan).__name__
    finally:
        set_threshold(prev)


def _save_with_reference(b, y, name, in_shape, out_shape, seed):
    """Finish the model of builder ``b`` as output ``y`` = ``y`` + 0.5, save and convert it; return
    (.mnn path, a random input, the reference plan's output)."""
    b.op("Add", [y, b.init(np.array(0.5, np.float32), "c")])
    b.nodes[-1].output[0] = "y"
    stem = os.path.join(_DIR, name)
    b.save(stem + ".onnx", [b.io("x", list(in_shape))], [b.io("y", list(out_shape))])
    convert(stem + ".onnx", stem + ".mnn")
    x = np.random.default_rng(seed).standard_normal(in_shape).astype(np.float32)
    ref, _ = _run(stem + ".mnn", x, 1 << 60)
    return stem + ".mnn", x, ref


def _kernel_plan_run(path, x, config):
    """(output, plan steps) of the model at ``path`` on ``x`` with the kernel-step plan."""
    prev = set_threshold(0)
    try:
        m = MNN.nn.load_module_from_file(path, ["x"], [],
                                         runtime_manager=MNN.nn.create_runtime_manager(config))
        return np.array(m.forward(MNN.expr.const(x, list(x.shape))).read()), m._last_plan.steps
    finally:
        set_threshold(prev)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cnn_specs())
def test_random_cnns_match_the_reference_plan(spec):
    c, h, w, layers, seed = spec
    stem = os.path.join(_DIR, f"net_{abs(hash(repr(spec)))}")
    _build(stem + ".onnx", c, h, w, layers, seed)
    path = stem + ".mnn"
    convert(stem + ".onnx", path)
    x = np.random.default_rng(seed).standard_normal((1, c, h, w)).astype(np.float32)
    ref, _ = _run(path, x, 1 << 60)
    for config, tol in (({}, 1e-4), ({"precision": "low"}, 2e-2)):
        got, kind = _run(path, x, 0, config)
        if any(L["kind"] in ("conv", "dwconv") for L in layers):
            assert kind == "NetPlan"
        assert got.shape == ref.shape
        assert np.abs(got - ref).max() <= tol * max(1.0, float(np.abs(ref).max()))


def test_outputs_survive_later_forwards(shared_dir):
    """Intermediate buffers are reused between forwards; returned outputs never are."""
    path = str(shared_dir / "models" / "mobilenetv2.mnn")
    data = np.load(shared_dir / "models" / "mobilenetv2.npz")
    m = MNN.nn.load_module_from_file(path, ["x"], ["logits"])
    a = m.forward(MNN.expr.const(data["in0_x"], [1, 3, 224, 224]))
    keep = np.array(a.read())
    b = m.forward(MNN.expr.const(data["in1_x"], [1, 3, 224, 224]))
    assert type(m._last_plan).__name__ == "NetPlan"
    assert np.array_equal(np.asarray(a.read()), keep)
    assert np.abs(np.asarray(b.read()).reshape(-1) - data["out1_logits"].reshape(-1)).max() <= 1e-4
    plan = m._last_plan
    # the small output lives in the pool (its step a bound launch) and is copied out; the
    # output's reshape is no step of its own
    assert plan.steps[-1].kind == "fc" and plan.buffers.get(plan.steps[-1].out) is not None
    assert np.asarray(a.read()).shape == (1, 1000)
    # one pool of raw buffers of any shape: the chain with residual connections needs 3 live ones
    assert plan.n_buffers <= 4 < len(plan.steps)
    assert plan.activation_nbytes <= 4 * max(b.nbytes for b in plan.buffers.values() if b is not None)
    from mnnjit.backends.cpu.kernel_steps import _step_inputs
    for st in plan.steps:
        out = plan.buffers.get(st.out) if st.kind != "ref" else None
        for s in _step_inputs(st) if out is not None else []:
            inp = plan.buffers.get(s)
            assert inp is None or not np.shares_memory(inp, out)   # no step writes over its input


def test_profile_lists_every_step(shared_dir):
    path = str(shared_dir / "models" / "mobilenetv2.mnn")
    m = MNN.nn.load_module_from_file(path, ["x"], ["logits"])
    x = np.zeros((1, 3, 224, 224), np.float32)
    m.forward(MNN.expr.const(x, [1, 3, 224, 224]))
    rows = m._last_plan.profile([x], repeat=1)
    assert len(rows) == len(m._last_plan.steps)
    assert {r[0] for r in rows} >= {"conv", "dwpw", "xdw", "convres"}


def test_plan_uses_the_module_thread_count(shared_dir):
    """A kernel-step plan splits its work for the module's numThread, whatever ran before."""
    path = str(shared_dir / "models" / "mobilenetv2.mnn")
    x = MNN.expr.const(np.zeros((1, 3, 224, 224), np.float32), [1, 3, 224, 224])
    one = MNN.nn.load_module_from_file(path, ["x"], ["logits"],
                                       runtime_manager=MNN.nn.create_runtime_manager({"numThread": 1}))
    one.forward(x)
    two = MNN.nn.load_module_from_file(path, ["x"], ["logits"],
                                       runtime_manager=MNN.nn.create_runtime_manager({"numThread": 2}))
    two.forward(x)
    import numba
    assert one._last_plan.threads == 1
    assert two._last_plan.threads == min(2, numba.config.NUMBA_NUM_THREADS)
    assert np.allclose(np.asarray(one.forward(x).read()), np.asarray(two.forward(x).read()), atol=1e-5)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 20), st.integers(2, 40), st.integers(3, 17), st.sampled_from([1, 2]),
       st.booleans(), st.integers(0, 2**16))
def test_inverted_residual_blocks_fuse_and_match(c, t, hw, stride, relu_after, seed):
    """1x1 expand -> relu6 -> 3x3 depthwise -> relu6 -> 1x1 project (+ input) [-> relu]: the
    expand+depthwise kernel and the residual epilogue give the reference plan's numbers."""
    from mnnjit_models_fixtures import _Builder
    b = _Builder(seed)
    six = (b.init(np.array(0.0, np.float32), "lo"), b.init(np.array(6.0, np.float32), "hi"))
    bias = lambda o: b.init(b.rng.standard_normal(o).astype(np.float32), "b")  # noqa: E731
    e = b.op("Clip", [b.op("Conv", ["x", b.weight((t, c, 1, 1)), bias(t)], kernel_shape=[1, 1]), *six])
    d = b.op("Clip", [b.op("Conv", [e, b.weight((t, 1, 3, 3)), bias(t)], kernel_shape=[3, 3],
                           strides=[stride, stride], pads=[1, 1, 1, 1], group=t), *six])
    p = b.op("Conv", [d, b.weight((c, t, 1, 1)), bias(c)], kernel_shape=[1, 1])
    oh = (hw - 1) // stride + 1
    skip = "x" if stride == 1 else b.op("MaxPool", ["x"], kernel_shape=[1, 1], strides=[2, 2])
    y = b.op("Add", [skip, p])
    if relu_after:
        y = b.op("Relu", [y])
    path, x, ref = _save_with_reference(b, y, f"irb_{c}_{t}_{hw}_{stride}_{relu_after}_{seed}",
                                        (1, c, hw, hw), (1, c, oh, oh), seed)
    for config, tol in (({}, 1e-4), ({"precision": "low"}, 3e-2)):
        got, steps = _kernel_plan_run(path, x, config)
        kinds = {st_.kind for st_ in steps}
        # the fused kernel takes the flat depthwise layers (stride 2 on even planes)
        assert "convres" in kinds
        assert ("xdw" in kinds) == (stride == 1 or hw % 2 == 0)
        assert np.abs(got - ref).max() <= tol * max(1.0, float(np.abs(ref).max()))


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([8, 24]), st.sampled_from([56, 61]), st.booleans(), st.sampled_from([1, 2]),
       st.integers(0, 2**16))
def test_large_inverted_residual_block_runs_as_one_step(c, hw, relu_after, threads, seed):
    """1x1 expand -> relu6 -> 3x3 depthwise -> relu6 -> 1x1 project + input, with an expanded
    tensor over EXPANDED_FUSE_MIN_BYTES (144 channels of 56x56 or more): one fused step (the
    residual's ``convres`` over a :class:`DepthwisePointwise` taking the expansion), the
    reference plan's numbers."""
    from mnnjit.backends.cpu.conv_kernels import EXPANDED_FUSE_MIN_BYTES
    from mnnjit_models_fixtures import _Builder
    t = 144
    assert t * hw * hw * 4 >= EXPANDED_FUSE_MIN_BYTES
    b = _Builder(seed)
    six = (b.init(np.array(0.0, np.float32), "lo"), b.init(np.array(6.0, np.float32), "hi"))
    bias = lambda o: b.init(b.rng.standard_normal(o).astype(np.float32), "b")  # noqa: E731
    e = b.op("Clip", [b.op("Conv", ["x", b.weight((t, c, 1, 1)), bias(t)], kernel_shape=[1, 1]), *six])
    d = b.op("Clip", [b.op("Conv", [e, b.weight((t, 1, 3, 3)), bias(t)], kernel_shape=[3, 3],
                           pads=[1, 1, 1, 1], group=t), *six])
    y = b.op("Add", ["x", b.op("Conv", [d, b.weight((c, t, 1, 1)), bias(c)], kernel_shape=[1, 1])])
    if relu_after:
        y = b.op("Relu", [y])
    path, x, ref = _save_with_reference(b, y, f"irb_big_{c}_{hw}_{relu_after}_{seed}",
                                        (1, c, hw, hw), (1, c, hw, hw), seed)
    got, steps = _kernel_plan_run(path, x, {"numThread": threads})
    kinds = [st_.kind for st_ in steps]
    assert "xdw" not in kinds and "conv" not in kinds and "dw" not in kinds
    op = steps[kinds.index("convres")].op
    assert type(op).__name__ == "DepthwisePointwise" and op.pre is not None and op.pre.direct
    assert np.abs(got - ref).max() <= 1e-4 * max(1.0, float(np.abs(ref).max()))


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([24, 32]), st.integers(1, 40), st.sampled_from([48, 64]), st.booleans(),
       st.sampled_from([1, 2]), st.integers(0, 2**16))
def test_depthwise_then_1x1_fuse_and_match(c, o, hw, residual, threads, seed):
    """3x3 depthwise -> relu6 -> 1x1 [+ input]: one fused band-by-band step (``dwpw``) in fp32
    plans and under precision=low (the same kernel on float16 storage); the reference plan's
    numbers."""
    from mnnjit_models_fixtures import _Builder
    b = _Builder(seed)
    six = (b.init(np.array(0.0, np.float32), "lo"), b.init(np.array(6.0, np.float32), "hi"))
    bias = lambda n: b.init(b.rng.standard_normal(n).astype(np.float32), "b")  # noqa: E731
    o = c if residual else o
    d = b.op("Clip", [b.op("Conv", ["x", b.weight((c, 1, 3, 3)), bias(c)], kernel_shape=[3, 3],
                           pads=[1, 1, 1, 1], group=c), *six])
    y = b.op("Conv", [d, b.weight((o, c, 1, 1)), bias(o)], kernel_shape=[1, 1])
    if residual:
        y = b.op("Add", ["x", y])
    path, x, ref = _save_with_reference(b, y, f"dwpw_{c}_{o}_{hw}_{residual}_{seed}",
                                        (1, c, hw, hw), (1, o, hw, hw), seed)
    for config, tol, fused in (({}, 1e-4, True), ({"precision": "low"}, 3e-2, True)):
        got, steps = _kernel_plan_run(path, x, {**config, "numThread": threads})
        kinds = [st_.kind for st_ in steps]
        ops = [type(st_.op).__name__ for st_ in steps]
        # (with the residual the fused step becomes the add's ``convres`` step)
        assert ("DepthwisePointwise" in ops) == fused and ("dw" in kinds) != fused
        assert ("dwpw" in kinds) == (fused and not residual)
        assert ("convres" in kinds) == residual
        assert np.abs(got - ref).max() <= tol * max(1.0, float(np.abs(ref).max()))


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([3, 4]), st.sampled_from([24, 32]), st.sampled_from([(2, 1), (2, 0)]),
       st.sampled_from([(112, 112), (150, 90)]), st.sampled_from([1, 2]), st.integers(0, 2**16))
def test_stem_conv_runs_inside_the_depthwise_1x1_step(cin, c, stride_pad, hw, threads, seed):
    """conv 3x3 stride 2 -> relu6 -> 3x3 depthwise -> relu6 -> 1x1, MobileNetV2's first layers
    (a stride-1 3x3 convolution runs as Winograd instead): the convolution runs inside the fused ``dwpw`` step (no ``conv`` step, its output
    never stored) and the reference plan's numbers come out."""
    from mnnjit_models_fixtures import _Builder
    stride, pad = stride_pad
    b = _Builder(seed)
    six = (b.init(np.array(0.0, np.float32), "lo"), b.init(np.array(6.0, np.float32), "hi"))
    bias = lambda n: b.init(b.rng.standard_normal(n).astype(np.float32), "b")  # noqa: E731
    s = b.op("Clip", [b.op("Conv", ["x", b.weight((c, cin, 3, 3)), bias(c)], kernel_shape=[3, 3],
                           strides=[stride, stride], pads=[pad] * 4), *six])
    d = b.op("Clip", [b.op("Conv", [s, b.weight((c, 1, 3, 3)), bias(c)], kernel_shape=[3, 3],
                           pads=[1, 1, 1, 1], group=c), *six])
    y = b.op("Conv", [d, b.weight((16, c, 1, 1)), bias(16)], kernel_shape=[1, 1])
    h, w = hw
    oh, ow = (h + 2 * pad - 3) // stride + 1, (w + 2 * pad - 3) // stride + 1
    path, x, ref = _save_with_reference(b, y, f"stem_{cin}_{c}_{stride}{pad}_{h}_{seed}",
                                        (1, cin, h, w), (1, 16, oh, ow), seed)
    got, steps = _kernel_plan_run(path, x, {"numThread": threads})
    kinds = [st_.kind for st_ in steps]
    assert "dwpw" in kinds and not {"conv", "wino", "dw"} & set(kinds)
    fused = steps[kinds.index("dwpw")].op
    assert fused.pre is not None and fused.in_shape == (1, cin, h, w)
    assert np.abs(got - ref).max() <= 1e-4 * max(1.0, float(np.abs(ref).max()))


def test_activation_buffers_share_one_huge_page_arena(shared_dir):
    """The pooled buffers are page-aligned, disjoint pieces of one allocation that starts on a
    2 MB boundary (transparent huge pages where the kernel gives them)."""
    from mnnjit.backends.cpu.kernel_steps import HUGE_PAGE
    path = os.path.join(shared_dir, "models", "mobilenetv2.mnn")
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    m = MNN.nn.load_module_from_file(path, ["x"], [])
    m.forward(MNN.expr.const(x, [1, 3, 224, 224]))
    raws = m._last_plan._raw
    assert len(raws) >= 2
    bases = {r.base.ctypes.data if r.base is not None else None for r in raws}
    assert len(bases) == 1 and None not in bases
    spans = sorted((r.ctypes.data, r.ctypes.data + r.nbytes) for r in raws)
    assert spans[0][0] % HUGE_PAGE == 0 and all(a % 4096 == 0 for a, _ in spans)
    assert all(e <= a for (_, e), (a, _) in zip(spans, spans[1:]))


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 4), st.integers(1, 24), st.integers(1, 40), st.booleans(), st.booleans(),
       st.integers(0, 2**16))
def test_classifier_heads_run_as_gemv_and_match(batch, feat, classes, trans_b, relu, seed):
    """conv -> global pooling -> flatten -> Gemm (batch 1-4, either weight layout) [-> relu]:
    the head runs as the ``fc`` GEMV step and matches the reference plan, fp32 and fp16."""
    from mnnjit_models_fixtures import _Builder
    b = _Builder(seed)
    c, hw = 3, 5
    y = b.op("Relu", [b.op("Conv", ["x", b.weight((feat, c, 1, 1))], kernel_shape=[1, 1])])
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])])
    w = b.weight((classes, feat) if trans_b else (feat, classes))
    bias = b.init(b.rng.standard_normal(classes).astype(np.float32), "b")
    y = b.op("Gemm", [y, w, bias], transB=int(trans_b))
    if relu:
        y = b.op("Relu", [y])
    b.nodes[-1].output[0] = "y"
    stem = os.path.join(_DIR, f"head_{batch}_{feat}_{classes}_{trans_b}_{relu}_{seed}")
    b.save(stem + ".onnx", [b.io("x", [batch, c, hw, hw])], [b.io("y", [batch, classes])])
    convert(stem + ".onnx", stem + ".mnn")
    x = np.random.default_rng(seed).standard_normal((batch, c, hw, hw)).astype(np.float32)
    ref, _ = _run(stem + ".mnn", x, 1 << 60)
    for config, tol in (({}, 1e-5), ({"precision": "low"}, 2e-2)):
        prev = set_threshold(0)
        try:
            m = MNN.nn.load_module_from_file(stem + ".mnn", ["x"], [],
                                             runtime_manager=MNN.nn.create_runtime_manager(config))
            got = np.array(m.forward(MNN.expr.const(x, list(x.shape))).read())
            kinds = [st_.kind for st_ in m._last_plan.steps]
        finally:
            set_threshold(prev)
        assert "fc" in kinds
        assert got.shape == ref.shape
        assert np.abs(got - ref).max() <= tol * max(1.0, float(np.abs(ref).max()))


@pytest.mark.parametrize("threads", [1, 2])
def test_winograd_workspaces_come_from_the_pool(threads):
    """Winograd steps take their workspace from the plan's buffer pool: a buffer free at that
    step (never the step's input, residual or output), the same results as the per-thread
    workspace, across forwards."""
    from mnnjit.backends.cpu.kernel_steps import _step_inputs
    from mnnjit.backends.cpu.conv_kernels import Winograd
    from mnnjit_models_fixtures import resnet18_onnx
    stem = os.path.join(_DIR, "r18w16")
    if not os.path.exists(stem + ".mnn"):
        resnet18_onnx(stem + ".onnx", width=16, size=64, classes=10, seed=3)
        convert(stem + ".onnx", stem + ".mnn")
    rng = np.random.default_rng(threads)
    xs = [rng.standard_normal((1, 3, 64, 64)).astype(np.float32) for _ in range(2)]
    m = MNN.nn.load_module_from_file(stem + ".mnn", ["x"], [], runtime_manager=MNN.nn.create_runtime_manager({"numThread": threads}))
    got = [np.array(m.forward(MNN.expr.const(x, [1, 3, 64, 64])).read()) for x in xs]
    plan = m._last_plan
    assert type(plan).__name__ == "NetPlan"
    winos = [st for st in plan.steps if st.kind != "ref" and isinstance(st.op, Winograd)]
    assert winos and all(st.op.scratch is not None for st in winos)
    from mnnjit.backends.cpu.weights import plan_choices
    kinds = {row[1]: row[-1] for row in plan_choices(plan)}
    assert kinds["wino"] == "fp32 Winograd-transformed", kinds
    for st in winos:
        for s in _step_inputs(st) + [st.out]:
            b = plan.buffers.get(s)
            assert b is None or not np.shares_memory(b, st.op.scratch)
        assert st.op.scratch.size >= st.op.workspace_floats(plan.order[st.ins[0]].shape, plan.threads)
    for x, y in zip(xs, got):
        want, _ = _run(stem + ".mnn", x, 1 << 60)        # the reference plan
        assert np.abs(y - want).max() <= 1e-4 * max(1.0, float(np.abs(want).max()))
    for st in winos:                                     # the per-thread workspace: same bits
        st.op.scratch = None
    again = np.array(m.forward(MNN.expr.const(xs[1], [1, 3, 64, 64])).read())
    assert np.array_equal(again, got[1])


@pytest.mark.parametrize("act", ["gelu_erf_pattern", "gelu_unfused", "hardswish", "silu"])
@pytest.mark.parametrize("hw", [9, 40])
def test_activation_layers_run_as_kernel_steps(act, hw):
    """GELU (the converter's GELU, tanh form), HardSwish and SiLU between convolutions run as
    compiled activation steps and give the reference plan's and real MNN's numbers."""
    from mnnjit_models_fixtures import _Builder, real_mnn_forward
    b = _Builder(7)
    c = b.op("Conv", ["x", b.weight((16, 3, 3, 3)), b.init(np.zeros(16, np.float32), "b")],
             kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    y = b.op("Add", [c, b.init(np.array(0.25, np.float32), "s")])
    if act in ("gelu_erf_pattern", "gelu_unfused"):
        # torch's nn.GELU export (the converter fuses it into GELU); in another order it stays Erf
        erf = b.op("Erf", [b.op("Div", [y, b.init(np.array(1.4142135, np.float32), "r")])])
        one = b.op("Add", [erf, b.init(np.array(1.0, np.float32), "one")])
        half = b.init(np.array(0.5, np.float32), "h")
        y = b.op("Mul", [b.op("Mul", [y, one]), half]) if act == "gelu_erf_pattern" else \
            b.op("Mul", [b.op("Mul", [y, half]), one])
    elif act == "hardswish":
        y = b.op("HardSwish", [y])
    else:
        y = b.op("Mul", [y, b.op("Sigmoid", [y])])
    y = b.op("Mul", [y, b.init(np.array(3.0, np.float32), "m")])   # scaled: values of the tails count
    path, x, ref = _save_with_reference(b, y, f"act_{act}_{hw}", (1, 3, hw, hw), (1, 16, hw, hw), hw)
    (real,) = real_mnn_forward(path, {"x": x}, ["y"])
    assert np.abs(ref - real).max() <= 1e-4 * max(1.0, float(np.abs(real).max()))
    for config, tol in (({}, 1e-5), ({"precision": "low"}, 3e-2)):
        got, steps = _kernel_plan_run(path, x, config)
        assert {"unary", "act"} & {st_.kind for st_ in steps}
        assert np.abs(got - ref).max() <= tol * max(1.0, float(np.abs(ref).max()))


@pytest.mark.parametrize("act", ["relu", "silu", "hardswish", "sigmoid", "tanh"])
@pytest.mark.parametrize("hw", [12, 40])
def test_activations_between_convolution_steps(act, hw):
    """conv -> act -> depthwise 3x3 -> act -> 1x1 -> act, + input, through the fused steps (relu
    in the convolutions, as the converter writes it; the others as their own steps): the residual
    added after the last activation, as the reference plan computes."""
    from mnnjit_models_fixtures import _Builder
    b = _Builder(11)
    bias = lambda o: b.init(b.rng.standard_normal(o).astype(np.float32) * 0.3, "b")  # noqa: E731

    def activate(y):
        if act == "silu":
            return b.op("Mul", [y, b.op("Sigmoid", [y])])
        return b.op({"relu": "Relu", "hardswish": "HardSwish", "sigmoid": "Sigmoid", "tanh": "Tanh"}[act], [y])
    e = activate(b.op("Conv", ["x", b.weight((24, 8, 1, 1)), bias(24)], kernel_shape=[1, 1]))
    d = activate(b.op("Conv", [e, b.weight((24, 1, 3, 3)), bias(24)], kernel_shape=[3, 3],
                      pads=[1, 1, 1, 1], group=24))
    p = activate(b.op("Conv", [d, b.weight((8, 24, 1, 1)), bias(8)], kernel_shape=[1, 1]))
    y = b.op("Add", ["x", p])
    path, x, ref = _save_with_reference(b, y, f"fold_{act}_{hw}", (1, 8, hw, hw), (1, 8, hw, hw), hw)
    for config, tol in (({}, 1e-5), ({"precision": "low"}, 3e-2), ({"numThread": 2}, 1e-5)):
        got, _ = _kernel_plan_run(path, x, config)
        assert np.abs(got - ref).max() <= tol * max(1.0, float(np.abs(ref).max()))
