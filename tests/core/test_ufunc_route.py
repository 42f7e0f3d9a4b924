"""The eager ufunc route (``executor.eager_value``): an elementwise op whose reference is one numpy
ufunc is computed by calling the ufunc directly; results must be bit for bit the reference
evaluator's (dtype, shape, NaN and infinity handling, broadcasting, 0-d), and ``read()`` hands out
fresh results without freezing them."""
from __future__ import annotations

import numpy as np
import pytest

import mnnjit.numpy as jnp
from mnnjit import runtime
from mnnjit.backends import reference
from mnnjit.compiler import executor
from mnnjit.ops import build as B
from mnnjit.ops.elementwise import UFUNC_OPS

_SPECIAL = np.array([0.0, -0.0, 1.5, -2.5, np.nan, np.inf, -np.inf, 1e30, -1e-30, 3.0], np.float32)


def _operands(dtype, shape_a, shape_b, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        a = rng.standard_normal(shape_a).astype(dtype) * 4
        b = rng.standard_normal(shape_b).astype(dtype) * 4
        if a.size >= _SPECIAL.size:
            a.reshape(-1)[: _SPECIAL.size] = _SPECIAL
    else:
        a = rng.integers(-20, 20, shape_a).astype(dtype)
        b = rng.integers(0, 5, shape_b).astype(dtype)
    return a, b


def _bits(x):
    x = np.ascontiguousarray(x)
    return x.dtype, x.shape, x.view(np.uint8).tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("shapes", [((37,), (37,)), ((4, 1, 5), (3, 1)), ((), ()), ((6,), ())])
def test_ufunc_route_matches_the_reference_evaluator(dtype, shapes):
    a0, b0 = _operands(dtype, *shapes, seed=len(shapes[0]))
    a, b = B.wrap(B.as_node(a0)), B.wrap(B.as_node(b0))
    checked = 0
    for op, (fn, _ref) in sorted(UFUNC_OPS.items()):
        n_in = fn.nin
        try:
            node = B.make_node(op, (a._node,) if n_in == 1 else (a._node, b._node))
        except (TypeError, ValueError):
            continue
        try:
            with np.errstate(all="ignore"):
                fn(a0) if n_in == 1 else fn(a0, b0)
        except TypeError:                         # numpy has no loop for this dtype
            continue
        with np.errstate(all="ignore"):         # (an int32 sqrt's NaN cast back: not a front-end node)
            got = executor.eager_value(node, False)
            assert got is not None and not got.flags.writeable
            twin = B.make_node(op, node.inputs)
            reference.evaluate([twin])
        assert _bits(got) == _bits(twin.value), op
        checked += 1
    assert checked >= 20


def test_read_hands_out_fresh_ufunc_results():
    x0 = np.linspace(-3, 3, 1000, dtype=np.float32)
    x = jnp.array(x0)
    r = (x * 2).read()
    assert r.flags.writeable and r.flags.owndata
    r2 = jnp.exp(x).read()
    np.testing.assert_array_equal(r2, np.exp(x0))
    y = x + 1
    z = y * 3                                     # y is shared: its read is a copy
    ry = y.read()
    ry[:] = 0
    np.testing.assert_array_equal(z.read(), (x0 + 1) * 3)
    np.testing.assert_array_equal(y.read(), x0 + 1)


def test_route_is_off_under_another_executor_and_above_the_threshold(monkeypatch):
    x0 = np.arange(10, dtype=np.float32)
    x = jnp.array(x0)
    prev = runtime.set_executor(reference.evaluate)
    try:
        r = (x + 1).read()
    finally:
        runtime.set_executor(prev)
    np.testing.assert_array_equal(r, x0 + 1)
    from mnnjit import settings
    old = settings.set_threshold(4)
    try:
        node = (x + x)._node
        assert executor.eager_value(node, False) is None or node.size < 4
    finally:
        settings.set_threshold(old)


def test_replaced_references_leave_the_route(monkeypatch):
    """An op re-registered with another reference is no longer computed by its ufunc."""
    import dataclasses
    from mnnjit.ops import registry
    od = registry.get("add")
    monkeypatch.setitem(registry._REGISTRY, "add", dataclasses.replace(od, ref=lambda xs, at: np.subtract(xs[0], xs[1])))
    monkeypatch.setattr(executor, "_UFUNCS", {})
    executor._init_ufuncs()
    assert "add" not in executor._UFUNCS and "mul" in executor._UFUNCS


def test_multi_output_nodes_compute_once_for_all_their_outputs(monkeypatch):
    """Reading the outputs of a multi-output op (svd) one by one computes the op once."""
    from mnnjit.ops import registry
    import dataclasses
    od = registry.get("svd")
    calls = []

    def counted(xs, at):
        calls.append(1)
        return od.ref(xs, at)
    monkeypatch.setitem(registry._REGISTRY, "svd", dataclasses.replace(od, ref=counted))
    a0 = np.random.default_rng(4).standard_normal((5, 5)).astype(np.float32)
    u, s, vh = [p.read() for p in jnp.linalg.svd(jnp.array(a0))]
    assert len(calls) == 1
    np.testing.assert_allclose((u * s) @ vh, a0, atol=1e-4)


def test_threads_each_run_in_their_own_error_state_context(monkeypatch):
    """Threads computing small ufunc results at once each enter a context of their own (one
    context can be entered by one thread at a time): no thread falls back to setting numpy's
    error-state variable, every result is numpy's, and no floating-point warning escapes."""
    import threading
    import warnings
    from mnnjit.ops import fperr

    if fperr.ERRVAR is None:
        pytest.skip("numpy without the error-state context variable")
    fallbacks = []
    real_set = executor._ERRVAR.set

    class _Spy:
        def set(self, value):
            fallbacks.append(threading.get_ident())
            return real_set(value)

        def reset(self, token):
            return executor._ERRVAR_REAL.reset(token)

    monkeypatch.setattr(executor, "_ERRVAR_REAL", executor._ERRVAR, raising=False)
    monkeypatch.setattr(executor, "_ERRVAR", _Spy())
    runners, errors = {}, []
    start = threading.Barrier(3)

    def work(seed: int) -> None:
        try:
            rng = np.random.default_rng(seed)
            x = rng.standard_normal(257).astype(np.float32)
            y = rng.standard_normal(257).astype(np.float32)
            x[:3] = [1.0, 0.0, -1.0]
            y[:3] = 0.0
            a, b = jnp.array(x), jnp.array(y)
            start.wait()
            for _ in range(300):
                np.testing.assert_array_equal((a + b).read(), x + y)
                with np.errstate(all="ignore"):
                    want = x / y
                np.testing.assert_array_equal((a / b).read(), want)
            runners[threading.get_ident()] = fperr.LOCAL.run
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    # (the warnings filters are process-wide and catch_warnings is not thread-safe: set here, once)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors
    assert len(runners) == 3 and len({id(r) for r in runners.values()}) == 3
    assert not fallbacks
