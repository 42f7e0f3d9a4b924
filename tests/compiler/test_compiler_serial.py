"""Serial fused kernels (chains below the parallel threshold) and the strided kernels' access modes for
reversed and per-channel leaves, against the numpy reference path."""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers_compiler import assert_ulp, reference_and_compiled
from mnnjit import compiler
from mnnjit.compiler import counters
from mnnjit.ops import build as B
from test_compiler_differential import _build, recipes


@contextmanager
def serial_only():
    """Parallel kernels never (threshold out of reach), serial kernels for every fused chain."""
    prev = compiler.set_threshold(1 << 40)
    compiler.set_serial_threshold(0)
    try:
        yield
    finally:
        compiler.set_serial_threshold(None)
        compiler.set_threshold(prev)


@settings(max_examples=25, deadline=None)
@given(recipes())
def test_random_graphs_serial_match_reference(recipe):
    """Random elementwise graphs (broadcasts, transposes, reversed slices) as serial kernels: bit for bit
    (reductions stay on their own path and are checked loosely)."""
    with serial_only():
        expected, got = reference_and_compiled(lambda: _build(recipe))
    if recipe[2] is not None and expected.dtype.kind == "f":
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=1e-3)
    else:
        assert_ulp(expected, got, 0)


@settings(max_examples=30, deadline=None)
@given(h=st.integers(1, 9), w=st.integers(1, 9), c=st.integers(1, 5), flip=st.booleans(),
       per_channel=st.booleans(), seed=st.integers(0, 99))
def test_image_normalisation_chain(h, w, c, flip, per_channel, seed):
    """The quick start's ``(img[..., ::-1].astype(float32) - mean) * scale`` is one serial kernel whose
    leaves are the reversed image view and the per-channel constants; values equal numpy's."""
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (h, w, c)).astype(np.uint8)
    mean = rng.uniform(0, 255, c if per_channel else 1).astype(np.float32)
    scale = rng.uniform(0.001, 0.1, c if per_channel else 1).astype(np.float32)

    def build():
        x = B.wrap(B.as_node(img))
        if flip:
            x = x[..., ::-1]
        y = B.binary("sub", B.cast(x, "float32"), B.wrap(B.as_node(mean)))
        return B.binary("mul", y, B.wrap(B.as_node(scale)))

    runs = counters["kernel_runs"]
    with serial_only():
        expected, got = reference_and_compiled(build)
    src = img[..., ::-1] if flip else img
    np.testing.assert_array_equal(expected, (src.astype(np.float32) - mean) * scale)
    assert_ulp(expected, got, 0)
    assert counters["kernel_runs"] == runs + 1


def test_serial_plan_is_described():
    with serial_only():
        x = B.wrap(B.as_node(np.arange(8192, dtype=np.float32).reshape(64, 128)))
        y = B.binary("mul", B.binary("add", x[:, ::-1], 1.0), 3.0)
        assert "kernel serial add+mul" in compiler.explain(y)
        np.testing.assert_array_equal(y.read(), (np.arange(8192, dtype=np.float32).reshape(64, 128)[:, ::-1] + 1) * 3)


def test_serial_threshold_dispatch():
    """Below the serial threshold a chain runs on numpy; from it, as a serial kernel; the parallel threshold
    still decides above; a single op never runs as a serial kernel."""
    a = np.ones(5000, np.float32)
    x = B.wrap(B.as_node(a))
    prev = compiler.set_threshold(1 << 20)
    try:
        compiler.set_serial_threshold(10000)
        runs = counters["kernel_runs"]
        B.binary("mul", B.binary("add", x, 1.0), 3.0).read()
        assert counters["kernel_runs"] == runs
        compiler.set_serial_threshold(4096)
        v = B.binary("mul", B.binary("add", x, 1.0), 3.0)
        assert "serial" in compiler.explain(v)
        np.testing.assert_array_equal(v.read(), (a + 1) * 3)
        assert counters["kernel_runs"] == runs + 1
        B.binary("add", x, 2.0).read()
        assert counters["kernel_runs"] == runs + 1
    finally:
        compiler.set_serial_threshold(None)
        compiler.set_threshold(prev)


@settings(max_examples=30, deadline=None)
@given(h=st.integers(2, 40), w=st.integers(2, 40), oh=st.integers(1, 30), ow=st.integers(1, 30),
       flip=st.booleans(), per_channel=st.booleans(), exact=st.booleans(), seed=st.integers(0, 99))
def test_resize_producer_fusion(h, w, oh, ow, flip, per_channel, exact, seed):
    """``(resize(img)[..., ::-1].astype(float32) - mean) * scale`` runs as one kernel that resizes row by row
    (compiler/producers.py); its values equal the reference path's (resize op reference, then numpy)."""
    import mnnjit.cv as cv
    from mnnjit.cv._common import image_var
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (h, w, 3)).astype(np.uint8)
    mean = rng.uniform(0, 255, 3 if per_channel else 1).astype(np.float32)
    scale = rng.uniform(0.001, 0.1, 3 if per_channel else 1).astype(np.float32)

    def build():
        x = cv.resize(image_var(img), (ow, oh), interpolation=cv.INTER_LINEAR_EXACT if exact else cv.INTER_LINEAR)
        if flip:
            x = x[..., ::-1]
        return (x.astype(np.float32) - mean) * scale

    with serial_only():
        if (oh, ow) != (h, w):  # the same size is a copy, not a resize node
            assert "kernel serial resize_image+cast+sub+mul" in compiler.explain(build())
        expected, got = reference_and_compiled(build)
    assert_ulp(expected, got, 0)


def test_resize_producer_not_fused_when_resize_is_needed():
    """A resize that is also a result (or feeds another consumer) stays its own step."""
    import mnnjit.cv as cv
    from mnnjit.cv._common import image_var
    img = np.random.default_rng(0).integers(0, 256, (50, 60, 3)).astype(np.uint8)
    with serial_only():
        r = cv.resize(image_var(img), (20, 10))
        y = (r[..., ::-1].astype(np.float32) - 1.0) * 2.0
        z = r.astype(np.float32) + 1.0
        text = compiler.explain(y, z)
        assert "resize_image ->" in text and "kernel serial resize_image" not in text
        np.testing.assert_array_equal(y.read(), (r.read()[..., ::-1].astype(np.float32) - 1) * 2)


def test_jit_off_disables_serial_kernels(monkeypatch):
    """``MNNJIT_JIT_THRESHOLD=off`` means no compiled kernels at all, serial ones included."""
    monkeypatch.setenv("MNNJIT_JIT_THRESHOLD", "off")
    compiler.set_threshold(None)
    try:
        assert compiler.serial_threshold() >= 1 << 62
        x = B.wrap(B.as_node(np.ones(100000, np.float32)))
        runs = counters["kernel_runs"]
        np.testing.assert_array_equal(B.binary("mul", B.binary("add", x, 1.0), 3.0).read(), 6.0)
        assert counters["kernel_runs"] == runs
    finally:
        monkeypatch.delenv("MNNJIT_JIT_THRESHOLD")
        compiler.set_threshold(0)  # the module setting of conftest.compiled_path
