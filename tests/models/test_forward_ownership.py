"""A forward's outputs own their memory, as in real MNN: ``read()`` hands it out without a copy
(writable, the same array on every read; writes show in later reads and in expressions computed
afterwards), and no later forward ever writes into an array already returned. Memory a plan still
holds (a graph's cached values, a kept list, a buffer) is never handed out. ``expr.const`` from an
ndarray makes the Var's own read-only copy."""
from __future__ import annotations

import numpy as np
import pytest
from mnnjit_models_fixtures import _Builder, convert

import mnnjit
from mnnjit.models import program
from mnnjit.nn import module as module_mod
from mnnjit.var import OwnConst

MNN = pytest.importorskip("MNN")


def _mlp_onnx(path: str) -> str:
    """x [1, 16] -> MatMul -> Add -> Relu -> MatMul -> Softmax: y [1, 8], with h (the relu) as a
    second output."""
    b = _Builder(7)
    h = b.op("Relu", [b.op("Add", [b.op("MatMul", ["x", b.weight((16, 32))]), b.weight((32,), scale=0.1)])])
    y = b.op("Softmax", [b.op("MatMul", [h, b.weight((32, 8))])], axis=-1)
    b.nodes[-1].output[:] = ["y"]
    b.nodes[-3].output[:] = ["h"]
    b.nodes[-2].input[0] = "h"
    return b.save(path, [b.io("x", [1, 16])], [b.io("y", [1, 8]), b.io("h", [1, 32])])


@pytest.fixture(scope="module")
def mlp(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("forward_ownership")
    return convert(_mlp_onnx(str(d / "mlp.onnx")), str(d / "mlp.mnn"))


X0 = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)


def _scenario(M, path: str, outputs: list[str], calls: int = 6, single: bool = False) -> tuple[list, list, list, object]:
    """A user's loop: forward, read, write into the result, read again, compute from the output,
    forward again (``single``: one Var in, one Var out). Returns the flags seen, the values seen,
    (snapshot, array) pairs of every returned array, and the module."""
    F = M.expr
    net = M.nn.load_module_from_file(path, ["x"], outputs)
    flags, values, kept = [], [], []
    for k in range(calls):
        x = X0 + np.float32(k)
        if single:
            ys = [net.forward(F.const(x, [1, 16], F.NCHW))]
        else:
            ys = net.forward([F.const(x, [1, 16], F.NCHW)])
        for y in ys:
            r = y.read()
            r2 = y.read()
            flags.append([bool(r.flags.writeable), bool(np.shares_memory(r, r2))])
            r[0, 0] = 100.0 + k
            values.append(float(y.read()[0, 0]))
            values.append(float((y * 2.0).read()[0, 0]))        # built and computed after the write
            values.append(np.array(y.read()[0, 1:]))
            kept.append((r.copy(), r))
    return flags, values, kept, net


def _check(path: str, outputs: list[str], single: bool = False) -> None:
    got = _scenario(mnnjit, path, outputs, single=single)
    want = _scenario(MNN, path, outputs, single=single)
    assert got[0] == want[0]
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    for snapshot, r in got[2]:          # later forwards never wrote into a returned array
        np.testing.assert_array_equal(r, snapshot)
    assert len({id(r) for _, r in got[2]}) == len(got[2])
    assert getattr(got[3]._last_plan.run, "__qualname__", "").startswith("_runner")   # the compiled tier


@pytest.mark.parametrize("outputs", [["y"], ["y", "h"]])
def test_outputs_are_handed_out_as_real_mnn_does(mlp, monkeypatch, outputs):
    """Through every tier of a small plan: the step loop, the generated numpy function and (from the
    third forward) the compiled whole-plan kernel."""
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "0")
    _check(mlp, outputs)


def test_one_var_forward_of_a_compiled_kernel_takes_the_shortest_path(mlp, monkeypatch):
    """One Var in and out of a one-output compiled kernel: ``forward``'s shortest path (the
    kernel's ``run.one``), with the same ownership as every other path; another input shape (or
    a placeholder) leaves it for the full path."""
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "0")
    _check(mlp, ["y"], single=True)
    net = mnnjit.nn.load_module_from_file(mlp, ["x"], ["y"])
    F = mnnjit.expr
    for _ in range(4):
        net.forward(F.const(X0, [1, 16], F.NCHW))
    assert net._one is not None
    want = MNN.nn.load_module_from_file(mlp, ["x"], ["y"]).forward(MNN.expr.const(X0, [1, 16], MNN.expr.NCHW)).read()
    np.testing.assert_allclose(net.forward(F.const(X0, [1, 16], F.NCHW)).read(), want, rtol=1e-5, atol=1e-6)
    ph = F.placeholder([1, 16], F.NCHW)
    ph.write(X0)
    np.testing.assert_allclose(net.forward(ph).read(), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError):
        net.forward(F.const(np.zeros((1, 15), np.float32), [1, 15], F.NCHW))


def test_graph_path_outputs_are_copied_on_read(mlp, monkeypatch):
    """A plan on the executor's graph path keeps its outputs' values on its nodes until the next
    forward: they are not handed out; each read() copies, and returned arrays survive later forwards."""
    monkeypatch.setattr(program, "_lean", lambda plan: False)
    net = mnnjit.nn.load_module_from_file(mlp, ["x"], ["y"])
    kept = []
    for k in range(4):
        y = net.forward(mnnjit.expr.const(X0 + np.float32(k), [1, 16], mnnjit.expr.NCHW))
        assert net._last_plan.lean is False
        assert type(y._node) is not OwnConst
        r = y.read()
        assert r.flags.writeable and not np.shares_memory(r, y.read())
        r[0, 0] = -1.0
        assert y.read()[0, 0] != -1.0
        kept.append((r.copy(), r))
    for snapshot, r in kept:
        np.testing.assert_array_equal(r, snapshot)


def test_result_hands_out_only_arrays_nothing_else_holds():
    """``nn.module._result``'s rules, one holder at a time."""
    def fresh():
        return np.arange(6, dtype=np.float32).reshape(2, 3)

    outs = [fresh()]
    v = module_mod._result(outs, 0, "NCHW")
    assert type(v._node) is OwnConst and v.read() is outs[0]            # a fresh array: handed out

    kept = [fresh()]                                                        # a list the plan keeps
    holder = kept

    def run_kept():
        return holder

    outs = run_kept()
    v = module_mod._result(outs, 0, "NCHW")
    del outs
    assert not np.shares_memory(v.read(), kept[0])                          # copied, then owned
    assert v.read() is v.read()

    buf = fresh()                                                           # a buffer held elsewhere
    outs = [buf]
    v = module_mod._result(outs, 0, "NCHW")
    assert not np.shares_memory(v.read(), buf)
    buf[...] = -1.0
    np.testing.assert_array_equal(v.read(), fresh())

    frozen = fresh()                                                        # a cached graph value
    frozen.flags.writeable = False
    outs = [frozen]
    v = module_mod._result(outs, 0, "NCHW")
    assert type(v._node) is not OwnConst and v._node.value is frozen
    r = v.read()
    assert r.flags.writeable and not np.shares_memory(r, frozen)

    outs = [fresh()[:, ::2]]                                                # not contiguous: a copy
    v = module_mod._result(outs, 0, "NCHW")
    assert v._node.value.flags.c_contiguous and type(v._node) is OwnConst


def test_result_copies_when_reference_counts_cannot_be_trusted(monkeypatch):
    from mnnjit import var as var_mod
    monkeypatch.setattr(var_mod, "_COUNTS_HOLDERS", False)
    a = np.ones((2, 2), np.float32)
    outs = [a]
    v = module_mod._result(outs, 0, "NCHW")
    assert not np.shares_memory(v.read(), a)


def test_const_from_ndarray_is_its_own_read_only_copy():
    F = mnnjit.expr
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for _ in range(2):                      # the second call takes the cached argument entry
        v = F.const(x, [3, 4], F.NCHW)
        val = v._node.value
        assert not val.flags.writeable and val.flags.c_contiguous and not np.shares_memory(val, x)
        x[0, 0] += 1.0
        assert v.read()[0, 0] == x[0, 0] - 1.0
    assert F.const(x.T, [4, 3]).read().tolist() == x.T.tolist()          # a transposed source
    assert F.const(x, [12]).shape == [12] and F.const(x, (2, 6)).shape == [2, 6]
    with pytest.raises(ValueError):
        F.const(x, [5, 3])
    with pytest.raises(ValueError):
        F.const(x, [-1, 4])
    # another dtype argument between calls, and data of another dtype than the Var's
    assert F.const(x.astype(np.int32), [3, 4], F.NCHW, F.int).dtype == F.int
    assert F.const(x.astype(np.float64), [3, 4]).read().dtype == np.float32
    assert F.const(x, [3, 4], F.NHWC).data_format == F.NHWC
    assert F.const(x, [3, 4]).data_format == F.NCHW


def test_const_matches_real_mnn_for_ndarrays():
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    for mod in (mnnjit, MNN):
        F = mod.expr
        v = F.const(x, [2, 3, 4], F.NCHW)
        x2 = x.copy()
        x2[0, 0, 0] = 9.0
        w = F.const(x2, [2, 12], F.NCHW)
        assert v.read().tolist() == x.tolist() and w.read().tolist() == x2.reshape(2, 12).tolist()


def test_write_of_an_ndarray_takes_its_own_read_only_copy():
    F = mnnjit.expr
    ph = F.placeholder([2, 3], F.NCHW)
    y = ph * 2.0
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    ph.write(x)
    val = ph._node.value
    assert not val.flags.writeable and val.flags.c_contiguous and not np.shares_memory(val, x)
    x[0, 0] = 7.0
    assert y.read()[0, 0] == 0.0
    ph.write(np.asfortranarray(x))                 # another layout: copied to C order
    assert ph._node.value.flags.c_contiguous and y.read()[0, 0] == 14.0
    ph.write(x.astype(np.float64).ravel())         # converted and reshaped
    assert ph._node.value.dtype == np.float32 and y.read().tolist() == (x * 2).tolist()
    with pytest.raises(ValueError):
        ph.write(np.zeros(5, np.float32))
    c = F.const(x, [2, 3])
    c.write(x + 1)                                  # a constant: re-pointed at a new value
    assert c.read().tolist() == (x + 1).tolist() and not c._node.value.flags.writeable


def test_a_kernel_still_compiling_is_asked_for_less_and_less_often(mlp, monkeypatch):
    """Each ask rebuilds the kernel's source (~1 ms): while the background compile runs, a tight
    loop asks after twice as many forwards each time, not every few dozen forwards."""
    from mnnjit.backends import registry
    backend = registry.current()
    asks = []

    def still_compiling(*args, **kwargs):
        asks.append(1)
        return False
    monkeypatch.setattr(backend, "compile_step_list", still_compiling)
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "4")
    net = mnnjit.nn.load_module_from_file(mlp, ["x"], ["y"])
    x = mnnjit.expr.const(X0, [1, 16], mnnjit.expr.NCHW)
    want = net.forward(x).read().copy()
    for _ in range(3000):
        y = net.forward(x)
    np.testing.assert_allclose(y.read(), want, rtol=1e-6)
    assert 5 <= len(asks) <= 14           # 4, 4, 8, 16, ... (every 4 forwards: 750 asks)


def test_background_mode_loads_the_plan_kernel_off_the_forward_thread(mlp, monkeypatch):
    """While compiling in the background, the forward that asks for the plan's kernel neither
    imports nor loads it (Numba's import, the generated module, a first call loading the compiled
    code: a stall of 0.3 s warm, seconds cold): a thread of its own does, the forwards go on on
    the generated function, and a later ask switches to the kernel."""
    import threading
    import time
    from mnnjit.backends.cpu.runtime import jit
    monkeypatch.setenv("MNNJIT_COMPILE", "background")
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "2")
    jit.reset()     # (kernels loaded by earlier tests: this plan's must be loaded anew)
    loaded_on = []
    real_get_kernel = jit.get_kernel

    def get_kernel(key, make_source):
        if key.startswith("plan "):
            loaded_on.append(threading.current_thread() is threading.main_thread())
        return real_get_kernel(key, make_source)
    monkeypatch.setattr(jit, "get_kernel", get_kernel)
    net = mnnjit.nn.load_module_from_file(mlp, ["x"], ["y"])
    F = mnnjit.expr
    want = MNN.nn.load_module_from_file(mlp, ["x"], ["y"]).forward(MNN.expr.const(X0, [1, 16], MNN.expr.NCHW)).read()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        y = net.forward(F.const(X0, [1, 16], F.NCHW)).read()
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
        if getattr(net._last_plan.run, "__qualname__", "").startswith("_runner"):
            break
        time.sleep(0.001)
    assert loaded_on and not any(loaded_on)     # loaded, never on the forward's thread
    assert getattr(net._last_plan.run, "__qualname__", "").startswith("_runner")


def test_session_outputs_take_fresh_results_and_copy_held_ones(mlp):
    from mnnjit import session as session_mod
    fresh = [np.ones((2, 2), np.float32)]
    assert session_mod._own_output(fresh, 0) is fresh[0]
    held = np.ones((2, 2), np.float32)
    outs = [held]
    got = session_mod._own_output(outs, 0)
    assert got is not held and not np.shares_memory(got, held)

    it = mnnjit.Interpreter(mlp)
    sess = it.createSession({"numThread": 1})
    net = mnnjit.nn.load_module_from_file(mlp, ["x"], ["y"])
    inp, out, kept = it.getSessionInput(sess), it.getSessionOutput(sess, "y"), []
    for k in range(4):
        x = X0 + np.float32(k)
        inp.copyFrom(mnnjit.Tensor([1, 16], mnnjit.Halide_Type_Float, x, mnnjit.Tensor_DimensionType_Caffe))
        it.runSession(sess)
        data = out._data
        kept.append((data, data.copy()))
        want = net.forward(mnnjit.expr.const(x, [1, 16])).read()
        np.testing.assert_allclose(out.getNumpyData(), want, rtol=1e-6)
    for data, snapshot in kept:                 # later runs never wrote into an earlier output
        np.testing.assert_array_equal(data, snapshot)
    assert len({id(d) for d, _ in kept}) == len(kept)


def test_result_of_a_numpy_scalar_is_a_0d_array_of_its_own():
    outs = [np.float32(2.5)]
    v = module_mod._result(outs, 0, "NCHW")
    r = v.read()
    assert r.shape == () and r.dtype == np.float32 and float(r) == 2.5 and r.flags.writeable
