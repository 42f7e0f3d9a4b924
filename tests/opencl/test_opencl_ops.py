"""Every op the OpenCL backend claims matches the ops' numpy references, with Hypothesis drawing
shapes and attributes: elementwise templates (all of them, translated to OpenCL C), fused groups
with broadcasting through the compiler's step plans, reductions, convolutions (1x1, general,
depthwise, grouped, dilated, strided, with epilogues), transposed convolutions, pooling, matmul,
softmax, layer / instance norm, resize and the movement ops."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnnjit import settings as mnn_settings
from mnnjit.backends import registry as backends
from mnnjit.backends.ir import GroupSpec
from mnnjit.backends.opencl import codegen
from mnnjit.ops import registry
from ocl_helpers import assert_close, const, node, on_device, placeholder, reference

SETTINGS = settings(max_examples=15, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])
ATTRS = {"clip": {"lo": -0.5, "hi": 0.5}, "leaky_relu": {"alpha": 0.1}, "elu": {"alpha": 0.7},
         "selu": {"alpha": 1.67, "scale": 1.05}, "hard_sigmoid": {"alpha": 0.2, "beta": 0.5}}


def _elementwise_ops() -> list[tuple[str, int]]:
    """(op, arity) of every elementwise op with a template the OpenCL generator renders for float32."""
    ops = []
    for name, od in sorted(registry.all_ops().items()):
        if od.kind != "elementwise" or not od.scalar or name in codegen.DENY or name in ("cast", "select"):
            continue
        for arity in (1, 2):
            x = [placeholder((4,), np.float32, f"x{k}") for k in range(arity)]
            try:
                n = node(name, x, **ATTRS.get(name, {}))
            except Exception:
                continue
            spec = GroupSpec(((name, n.dtype.name, tuple(("l", k) for k in range(arity)),
                               tuple((a, k) for k, a in enumerate(registry.template_attrs(name)))),),
                             ("float32",) * arity, tuple("f" for _ in registry.template_attrs(name)), None)
            try:
                codegen.check_spec(spec)
                with np.errstate(all="ignore"):  # (ldexp's reference takes an integer exponent only)
                    od.ref([np.ones(2, np.float32)] * arity, ATTRS.get(name, {}))
            except (codegen.Untranslatable, TypeError):
                continue
            ops.append((name, arity))
            break
    return ops


def test_every_elementwise_template_matches_numpy(ocl) -> None:
    """All float32 elementwise templates in one kernel (a switch over the ops: one program to build),
    each compared with its numpy reference on values around every special point."""
    ops = _elementwise_ops()
    assert len(ops) > 60
    cases = []
    for k, (name, arity) in enumerate(ops):
        params = {a: f"p{j}" for j, a in enumerate(registry.template_attrs(name))}
        n = node(name, [placeholder((4,), np.float32, f"x{i}") for i in range(arity)], **ATTRS.get(name, {}))
        spec = GroupSpec(((name, n.dtype.name, tuple(("l", i) for i in range(arity)), tuple(
            (a, j) for j, a in enumerate(registry.template_attrs(name)))),), ("float32",) * arity, (), None)
        lines, last = codegen.body(spec, ["a0", "a1"][:arity], "        ")
        decl = "".join(f"        const float p{j} = {float(ATTRS[name][a])!r}f;\n"
                       for a, j in ((a, int(params[a][1:])) for a in params))
        cases.append(f"    case {k}: {{\n{decl}" + "\n".join(lines) + f"\n        r = (float)({last}); break; }}")
    src = (codegen.PRELUDE + "__kernel void ew(__global const float *x0, __global const float *x1, "
           "__global float *out, const int n, const int which) {\n"
           "    const int i = get_global_id(0); if (i >= n) return;\n"
           "    const float a0 = x0[i], a1 = x1[i]; float r = 0.0f;\n    switch (which) {\n"
           + "\n".join(cases) + "\n    }\n    out[i] = r;\n}\n")
    rt = ocl.rt
    cl = rt.cl
    kernel = cl.Kernel(rt.program("test-elementwise-templates", src), "ew")
    base = np.array([0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.1, -0.9, 7.5, -7.5, 40.0, -40.0,
                     1e-3, 100.0, -100.0, 0.999], np.float32)
    a = np.repeat(base, len(base))
    b = np.tile(base, len(base))
    n = a.size
    bufs = [rt.buffer(n * 4) for _ in range(3)]
    rt.upload(bufs[0], a, blocking=True)
    rt.upload(bufs[1], b, blocking=True)
    out = np.empty(n, np.float32)
    for k, (name, arity) in enumerate(ops):
        kernel.set_args(bufs[0], bufs[1], bufs[2], np.int32(n), np.int32(k))
        rt.launch(kernel, (n,), None)
        rt.download(out, bufs[2])
        with np.errstate(all="ignore"):
            want = registry.get(name).ref([a, b][:arity], ATTRS.get(name, {}))
        want = np.asarray(want).astype(np.float64)
        got = out.astype(np.float64)
        fin = np.isfinite(want)
        assert np.array_equal(np.isnan(got), np.isnan(want)), name
        assert np.array_equal(got[np.isinf(want)], want[np.isinf(want)]), name
        err = np.abs(got[fin] - want[fin]) / np.maximum(1.0, np.abs(want[fin]))
        assert err.max(initial=0.0) <= 1e-5, (name, float(err.max()))


def _shapes(draw, rank: int) -> tuple:
    return tuple(draw(st.integers(1, 9)) for _ in range(rank))


@st.composite
def _broadcast_case(draw):
    rank = draw(st.integers(1, 4))
    shape = _shapes(draw, rank)
    other = tuple(d if draw(st.booleans()) else 1 for d in shape[draw(st.integers(0, rank - 1)):])
    transposed = draw(st.booleans()) and rank >= 2
    return shape, other, transposed, draw(st.integers(0, 2 ** 16))


@settings(SETTINGS, max_examples=10)
@given(case=_broadcast_case())
def test_fused_groups_with_broadcasting_on_step_plans(ocl, case) -> None:
    """mnnjit.numpy chains (broadcast operands, transposed views, casts, a reduction) run as fused
    groups on the device through the compiler's step plans (backend.run_group)."""
    import mnnjit.numpy as mnp
    shape, other, transposed, seed = case
    rng = np.random.default_rng(seed)
    xv = rng.standard_normal(shape[::-1] if transposed else shape).astype(np.float32)
    yv = rng.standard_normal(other).astype(np.float32)
    xs = xv.T if transposed else xv

    def chain(np_, x, y):
        z = np_.maximum(x * 1.5 - y, np_.tanh(x)) + np_.exp(y * 0.25)
        return z, np_.sum(z * z, axis=-1), (z > 0.5).astype(np_.int32) * 3
    want = chain(np, xs, yv)
    mnn_settings.set_threshold(0)
    mnn_settings.set_serial_threshold(0)
    try:
        with backends.using("opencl"):
            runs = mnn_settings.counters["kernel_runs"]
            x = mnp.array(xv)
            got = chain(mnp, x.T if transposed else x, mnp.array(yv))
            got = [g.read() if hasattr(g, "read") else g for g in got]
            assert mnn_settings.counters["kernel_runs"] > runs
    finally:
        mnn_settings.set_threshold(None)
        mnn_settings.set_serial_threshold(None)
    for g, w in zip(got, want):
        assert_close(np.asarray(g), np.asarray(w).astype(np.asarray(g).dtype), rtol=1e-5)


@st.composite
def _reduce_case(draw):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(1, 40 if rank <= 2 else 9)) for _ in range(rank))
    axes = tuple(sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1, max_size=rank))))
    op = draw(st.sampled_from(["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"]))
    dtype = draw(st.sampled_from([np.float32, np.int32])) if op != "reduce_mean" else np.float32
    return shape, axes, op, dtype, draw(st.booleans()), draw(st.integers(0, 2 ** 16))


@SETTINGS
@given(case=_reduce_case())
def test_reductions_fused_with_their_producer(ocl, case) -> None:
    shape, axes, op, dtype, keep, seed = case
    rng = np.random.default_rng(seed)
    x = placeholder(shape, dtype)
    if dtype == np.float32:
        xv = (rng.standard_normal(shape) * (0.3 if op == "reduce_prod" else 1)).astype(np.float32)
        y = node("add", [node("abs", [x]), const(np.float32(0.75))]) if op == "reduce_prod" else \
            node("mul", [x, const(np.float32(2.0))])
    else:
        xv = rng.integers(-3, 4, shape).astype(np.int32)
        y = node("sub", [x, const(np.int32(1))])
    out = node(op, [y], axes=axes, keepdims=keep)
    got = on_device(ocl, [out], {x: xv})[0]
    assert_close(got, reference([out], {x: xv})[0], rtol=1e-5)


@st.composite
def _conv_case(draw):
    kind = draw(st.sampled_from(["1x1", "general", "depthwise", "grouped"]))
    g = 1
    if kind == "depthwise":
        c = draw(st.integers(1, 12))
        o, g = c, c
    elif kind == "grouped":
        g = draw(st.integers(2, 3))
        c, o = g * draw(st.integers(1, 4)), g * draw(st.integers(1, 4))
    else:
        c, o = draw(st.integers(1, 20)), draw(st.integers(1, 70))
    k = (1, 1) if kind == "1x1" else (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    stride = (1, 1) if kind == "1x1" else (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dil = (1, 1) if kind == "1x1" else (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = (0, 0, 0, 0) if kind == "1x1" else tuple(draw(st.integers(0, 2)) for _ in range(4))
    n = draw(st.integers(1, 2))
    h, w = draw(st.integers(max(k[0] * dil[0], 3), 19)), draw(st.integers(max(k[1] * dil[1], 3), 19))
    act = draw(st.sampled_from(["", "relu", "relu6"]))
    return n, c, o, g, k, stride, dil, pads, h, w, act, draw(st.booleans()), draw(st.integers(0, 2 ** 16))


@SETTINGS
@given(case=_conv_case())
def test_convolutions(ocl, case) -> None:
    n, c, o, g, k, stride, dil, pads, h, w, act, residual, seed = case
    rng = np.random.default_rng(seed)
    x = placeholder((n, c, h, w))
    wt = const(rng.standard_normal((o, c // g) + k).astype(np.float32) * 0.3)
    bias = const(rng.standard_normal(o).astype(np.float32))
    y = node("conv2d", [x, wt, bias], stride=stride, dilation=dil, pads=pads, group=g,
             act="" if residual else act)
    outs = [y]
    if residual:  # the add (and its relu) run as the convolution's epilogue
        r = node("add", [y, const(rng.standard_normal(y.shape).astype(np.float32))])
        outs = [node("relu", [r]) if act else r]
    xv = rng.standard_normal((n, c, h, w)).astype(np.float32)
    got = on_device(ocl, outs, {x: xv})[0]
    assert_close(got, reference(outs, {x: xv})[0], rtol=1e-4)


@st.composite
def _deconv_case(draw):
    g = draw(st.integers(1, 2))
    c, og = g * draw(st.integers(1, 4)), draw(st.integers(1, 4))
    k = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = tuple(draw(st.integers(0, 1)) for _ in range(4))
    return g, c, og, k, stride, dil, pads, draw(st.integers(2, 9)), draw(st.integers(2, 9)), draw(st.integers(0, 99))


@SETTINGS
@given(case=_deconv_case())
def test_transposed_convolutions(ocl, case) -> None:
    g, c, og, k, stride, dil, pads, h, w, seed = case
    rng = np.random.default_rng(seed)
    x = placeholder((1, c, h, w))
    wt = const(rng.standard_normal((c, og) + k).astype(np.float32))
    bias = const(rng.standard_normal(og * g).astype(np.float32))
    try:
        y = node("conv2d_transpose", [x, wt, bias], stride=stride, dilation=dil, pads=pads, group=g, act="relu")
    except ValueError:
        return  # padding leaves no output
    xv = rng.standard_normal((1, c, h, w)).astype(np.float32)
    assert_close(on_device(ocl, [y], {x: xv})[0], reference([y], {x: xv})[0], rtol=1e-4)


@st.composite
def _pool_case(draw):
    k = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pads = (draw(st.integers(0, k[0] - 1)), draw(st.integers(0, k[0] - 1)), draw(st.integers(0, k[1] - 1)),
            draw(st.integers(0, k[1] - 1)))
    h, w = draw(st.integers(k[0], 17)), draw(st.integers(k[1], 17))
    ceil = draw(st.booleans())
    from mnnjit.ops.nn_pool import pool_out_size
    out = (pool_out_size(h, pads[0], pads[1], k[0], s[0], "mnn" if ceil else False),
           pool_out_size(w, pads[2], pads[3], k[1], s[1], "mnn" if ceil else False))
    return k, s, pads, h, w, out, draw(st.sampled_from(["max", "avg"])), draw(st.booleans()), draw(st.integers(0, 99))


@SETTINGS
@given(case=_pool_case())
def test_pooling(ocl, case) -> None:
    k, s, pads, h, w, out, kind, include, seed = case
    rng = np.random.default_rng(seed)
    x = placeholder((2, 3, h, w))
    y = node("pool2d", [x], kind=kind, kernel=k, stride=s, pads=pads, out=out, count_include_pad=include)
    gp = node("pool2d", [x], kind=kind, kernel=(h, w), stride=(1, 1), pads=(0, 0, 0, 0), out=(1, 1),
              count_include_pad=False)
    xv = rng.standard_normal((2, 3, h, w)).astype(np.float32)
    for got, want in zip(on_device(ocl, [y, gp], {x: xv}), reference([y, gp], {x: xv})):
        assert_close(got, want, rtol=1e-5)


@st.composite
def _matmul_case(draw):
    m, k, n = draw(st.integers(1, 70)), draw(st.integers(1, 40)), draw(st.integers(1, 70))
    batch = draw(st.sampled_from([(), (2,), (3, 1)]))
    ta, tb = draw(st.booleans()), draw(st.booleans())
    const_side = draw(st.sampled_from([None, 0, 1]))
    return m, k, n, batch, ta, tb, const_side, draw(st.booleans()), draw(st.sampled_from(["", "relu"])), \
        draw(st.integers(0, 99))


@SETTINGS
@given(case=_matmul_case())
def test_matmul(ocl, case) -> None:
    m, k, n, batch, ta, tb, const_side, bias, act, seed = case
    rng = np.random.default_rng(seed)
    ash = batch + ((k, m) if ta else (m, k))
    bsh = ((k, n) if not tb else (n, k)) if const_side == 1 else batch + ((n, k) if tb else (k, n))
    av = rng.standard_normal(ash).astype(np.float32)
    bv = rng.standard_normal(bsh).astype(np.float32)
    feeds = {}
    if const_side == 0:
        a = const(av[(0,) * len(batch)] if batch else av)
        av = np.asarray(a.value)
    else:
        a = placeholder(ash, name="a")
        feeds[a] = av
    if const_side == 1:
        b = const(bv)
    else:
        b = placeholder(bsh, name="b")
        feeds[b] = bv
    ins = [a, b] + ([const(rng.standard_normal(n).astype(np.float32))] if bias else [])
    y = node("matmul_ex", ins, transpose_a=ta, transpose_b=tb, act=act)
    if not feeds:
        return
    assert_close(on_device(ocl, [y], feeds)[0], reference([y], feeds)[0], rtol=1e-4)


@st.composite
def _rows_case(draw):
    rank = draw(st.integers(2, 4))
    shape = tuple(draw(st.integers(1, 12)) for _ in range(rank))
    return shape, draw(st.integers(0, rank - 1)), draw(st.integers(1, rank - 1)), draw(st.booleans()), \
        draw(st.integers(0, 99))


@SETTINGS
@given(case=_rows_case())
def test_softmax_and_norms(ocl, case) -> None:
    shape, axis, n_norm, rms, seed = case
    rng = np.random.default_rng(seed)
    x = placeholder(shape)
    xv = (rng.standard_normal(shape) * 3).astype(np.float32)
    axes = tuple(range(len(shape) - n_norm, len(shape)))
    norm_shape = shape[len(shape) - n_norm:]
    outs = [node("softmax", [x], axis=axis), node("log_softmax", [x], axis=axis),
            node("layer_norm", [x, const(rng.standard_normal(norm_shape).astype(np.float32)),
                                const(rng.standard_normal(norm_shape).astype(np.float32))],
                 axes=axes, eps=1e-5, rms=rms)]
    if len(shape) >= 3:
        outs.append(node("instance_norm", [x, const(rng.standard_normal(shape[1]).astype(np.float32)),
                                           const(rng.standard_normal(shape[1]).astype(np.float32))], eps=1e-5))
    for got, want in zip(on_device(ocl, outs, {x: xv}), reference(outs, {x: xv})):
        assert_close(got, want, rtol=1e-4, atol=1e-4)


@st.composite
def _resize_case(draw):
    method = draw(st.sampled_from(["nearest", "nearest_round", "bilinear", "cubic"]))
    coord = draw(st.sampled_from(["asymmetric", "align_corners", "half_pixel", "pytorch_half_pixel"]))
    h, w = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    oh, ow = draw(st.integers(1, 25)), draw(st.integers(1, 25))
    return method, coord, h, w, oh, ow, draw(st.integers(0, 99))


@SETTINGS
@given(case=_resize_case())
def test_resize(ocl, case) -> None:
    method, coord, h, w, oh, ow, seed = case
    rng = np.random.default_rng(seed)
    x = placeholder((1, 3, h, w))
    y = node("resize", [x], size=(oh, ow), method=method, coord=coord, cubic_a=-0.75, exclude_outside=False,
             scale=None)
    xv = rng.standard_normal((1, 3, h, w)).astype(np.float32)
    assert_close(on_device(ocl, [y], {x: xv})[0], reference([y], {x: xv})[0], rtol=1e-5)


@st.composite
def _movement_case(draw):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(1, 7)) for _ in range(rank))
    dtype = draw(st.sampled_from([np.float32, np.int32, np.uint8]))
    return shape, dtype, draw(st.permutations(range(rank))), draw(st.integers(0, 99)), \
        draw(st.sampled_from(["constant", "reflect", "edge", "symmetric"]))


@SETTINGS
@given(case=_movement_case())
def test_movement_ops(ocl, case) -> None:
    """transpose, slice (negative steps too), concat, broadcast_to, pad (every mode), take, reshape, in
    float32, int32 and uint8."""
    shape, dtype, perm, seed, mode = case
    rng = np.random.default_rng(seed)
    x = placeholder(shape, dtype)
    xv = rng.integers(0, 200, shape).astype(dtype)
    rank = len(shape)
    begin = tuple(int(rng.integers(0, d)) for d in shape)
    step = tuple(int(rng.choice([1, 2, -1])) for _ in shape)
    end = tuple((d if s > 0 else -1) for d, s in zip(shape, step))
    begin = tuple(b if s > 0 else d - 1 - b for b, s, d in zip(begin, step, shape))
    outs = [node("transpose", [x], perm=tuple(perm)),
            node("slice", [x], begin=begin, end=end, step=step),
            node("concat", [x, const(rng.integers(0, 9, shape).astype(dtype)), x], axis=rank - 1),
            node("broadcast_to", [x], shape=(2,) + shape),
            node("pad", [x], pads=tuple((int(rng.integers(0, d)), int(rng.integers(0, d))) for d in shape),
                 mode=mode, value=5),
            node("take", [x, const(np.array([shape[0] - 1, 0, -1], np.int32))], axis=0),
            node("reshape", [node("transpose", [x], perm=tuple(perm))], shape=(int(np.prod(shape)),))]
    for got, want in zip(on_device(ocl, outs, {x: xv}), reference(outs, {x: xv})):
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_run_op_single_ops_go_through_the_backend(ocl) -> None:
    """Single ops of a step plan (a pooling, a softmax) run with the backend's kernels (run_op)."""
    rng = np.random.default_rng(0)
    x = placeholder((1, 8, 32, 32))
    y = node("pool2d", [x], kind="max", kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1), out=(16, 16),
             count_include_pad=True)
    xv = rng.standard_normal((1, 8, 32, 32)).astype(np.float32)
    assert ocl.supports_op(y)
    got = ocl.to_host(ocl.run_op(y, [xv]))
    assert_close(got, reference([y], {x: xv})[0], rtol=1e-6)
    s = node("softmax", [x], axis=1)
    assert_close(ocl.to_host(ocl.run_op(s, [ocl.from_host(xv)])), reference([s], {x: xv})[0], rtol=1e-5)
    assert not ocl.supports_op(node("transpose", [x], perm=(0, 2, 3, 1)))  # views stay with the compiler


def test_unsupported_step_runs_on_the_host_and_is_listed(ocl) -> None:
    """An op without a device kernel (cumsum) runs its reference between device steps; explain names it."""
    rng = np.random.default_rng(1)
    x = placeholder((4, 50))
    y = node("exp", [node("cumsum", [node("mul", [x, const(np.float32(0.1))])], axis=1)])
    xv = rng.standard_normal((4, 50)).astype(np.float32)
    got = on_device(ocl, [y], {x: xv}, no_host=False)[0]
    assert_close(got, reference([y], {x: xv})[0], rtol=1e-5)
    from ocl_helpers import lowered
    g = lowered(ocl, [y], {x: xv})
    assert [lbl for lbl, _ in g.fallbacks] == ["cumsum"]
    assert "HOST   cumsum" in g.explain()


def test_half_storage_groups_copies_and_softmax(ocl) -> None:
    """precision=low: fusion groups, a reduction, copies and softmax read and write half storage."""
    from mnnjit.precision import parse_modes
    from ocl_helpers import lowered
    rng = np.random.default_rng(4)
    x = placeholder((2, 6, 20, 20))
    y = node("tanh", [node("add", [node("mul", [x, const(np.float32(0.5))]),
                                   const(rng.standard_normal((6, 1, 1)).astype(np.float32))])])
    outs = [node("reduce_mean", [y], axes=(2, 3), keepdims=False),
            node("transpose", [y], perm=(0, 2, 3, 1)),
            node("softmax", [node("concat", [y, x], axis=1)], axis=1)]
    xv = rng.standard_normal((2, 6, 20, 20)).astype(np.float32)
    g = lowered(ocl, outs, {x: xv}, parse_modes({"precision": "low"}))
    assert g.half and not g.fallbacks, g.explain()
    for got, want in zip(g.run([xv]), reference(outs, {x: xv})):
        assert got.dtype == np.float32
        assert np.abs(got - want).max() <= 2e-2 * max(1.0, float(np.abs(want).max()))


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_max", "reduce_mean"])
def test_long_reductions_into_few_outputs_split_over_the_device(ocl, op) -> None:
    """A reduction of many elements into few outputs runs as partials over many work-groups, then
    their combination (two launches), with the reference's answer."""
    rng = np.random.default_rng(6)
    x = placeholder((3, 70001))
    y = node(op, [node("mul", [x, const(np.float32(0.5))])], axes=(1,), keepdims=False)
    full = node(op, [x], axes=(0, 1), keepdims=True)
    xv = rng.standard_normal((3, 70001)).astype(np.float32)
    from ocl_helpers import lowered
    g = lowered(ocl, [y, full], {x: xv})
    assert all(len(st.launches) == 2 for st in g.steps if st.kind == "group"), g.explain()
    for got, want in zip(g.run([xv]), reference([y, full], {x: xv})):
        assert_close(got, want, rtol=1e-5)


@pytest.mark.parametrize("variant", [0, 1, 2])
def test_every_gemm_variant(ocl, monkeypatch, variant) -> None:
    """The tiled (local memory: GPUs' default), register-blocked and float8 GEMM variants all give the
    reference's answer, whichever the device's default or tuning picks."""
    monkeypatch.setattr(ocl.rt, "variant", lambda key, builders, default: builders[min(variant, len(builders) - 1)]())
    rng = np.random.default_rng(variant)
    x = placeholder((2, 12, 13, 21))
    w1 = const(rng.standard_normal((70, 12, 1, 1)).astype(np.float32) * 0.3)
    w3 = const(rng.standard_normal((9, 4, 3, 3)).astype(np.float32) * 0.3)
    b = const(rng.standard_normal(70).astype(np.float32))
    c1 = node("conv2d", [x, w1, b], stride=(1, 1), dilation=(1, 1), pads=(0, 0, 0, 0), group=1, act="relu6")
    c3 = node("conv2d", [x, w3, const(np.zeros(9, np.float32))], stride=(2, 1), dilation=(1, 1),
              pads=(1, 1, 1, 1), group=3, act="")
    m = placeholder((3, 33, 40), name="m")
    mm = node("matmul", [m, node("transpose", [m], perm=(0, 2, 1))])
    feeds = {x: rng.standard_normal((2, 12, 13, 21)).astype(np.float32),
             m: rng.standard_normal((3, 33, 40)).astype(np.float32)}
    outs = [c1, c3, mm]
    for got, want in zip(on_device(ocl, outs, feeds), reference(outs, feeds)):
        assert_close(got, want, rtol=1e-4)


def test_tuning_picks_a_working_local_size_and_remembers_it(ocl, monkeypatch) -> None:
    monkeypatch.setattr(ocl.rt, "tuning", "fast")
    rng = np.random.default_rng(8)
    x = placeholder((1, 5, 37, 29))
    outs = [node("pool2d", [x], kind="avg", kernel=(3, 3), stride=(1, 1), pads=(1, 1, 1, 1), out=(37, 29),
                 count_include_pad=False),
            node("conv2d", [x, const(rng.standard_normal((40, 5, 1, 1)).astype(np.float32)),
                            const(np.zeros(40, np.float32))], stride=(1, 1), dilation=(1, 1), pads=(0, 0, 0, 0),
                 group=1, act="")]
    xv = rng.standard_normal((1, 5, 37, 29)).astype(np.float32)
    for got, want in zip(on_device(ocl, outs, {x: xv}), reference(outs, {x: xv})):
        assert_close(got, want, rtol=1e-5)
    table = ocl.rt.cache.tuning()
    assert any(k.startswith("pool|29,37,5") for k in table) and any(k.startswith("variant|gemm_w|40,") for k in table)
