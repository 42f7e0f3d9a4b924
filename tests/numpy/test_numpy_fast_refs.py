"""The written-out reduction and rounding references against numpy: bit-identical results.

``mean`` (np.mean's own float32 steps), ``prod``/``any``/``all`` (the ufunc and methods numpy's
wrappers call), ``argmax``/``argmin`` (the cached writable alias of a read-only value) and
``around`` (rint, with the ties moved away from zero only when there are ties).
"""
from __future__ import annotations

import gc

import numpy as np
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import mnnjit.numpy as jnp
from mnnjit.ops import registry
from mnnjit.ops.reduce import _ALIASES

_SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6)
_F32 = st.floats(-1e6, 1e6, width=32) | st.sampled_from([0.5, -0.5, 2.5, -2.5, -0.0, np.inf, -np.inf, np.nan])


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


def _axes_for(draw, ndim: int):
    return draw(st.none() | st.sampled_from([tuple(range(ndim))] + [(i,) for i in range(ndim)]
                                            + ([(0, ndim - 1)] if ndim > 1 else [])))


@st.composite
def _case(draw):
    x = draw(hnp.arrays(np.float32, _SHAPES, elements=_F32))
    axes = _axes_for(draw, x.ndim)
    if axes is None:
        axes = tuple(range(x.ndim))
    return x, axes, draw(st.booleans())


@settings(max_examples=40, deadline=None, derandomize=True)
@given(_case())
def test_mean_ref_is_np_mean(case):
    x, axes, keepdims = case
    if not all(x.shape[a] for a in axes):
        return      # (np.mean's empty-slice warning and NaN: the unchanged np.mean path)
    ref = registry.get("reduce_mean").ref
    with np.errstate(all="ignore"):
        want = np.mean(x, axis=axes, keepdims=keepdims)
        got = ref([x], {"axes": axes, "keepdims": keepdims})
        # a non-contiguous input (a transposed view) takes the same steps
        got_t = ref([x.T], {"axes": tuple(sorted(x.ndim - 1 - a for a in axes)), "keepdims": keepdims})
        want_t = np.mean(x.T, axis=tuple(sorted(x.ndim - 1 - a for a in axes)), keepdims=keepdims)
    assert _same(got, want)
    assert _same(got_t, want_t)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(hnp.arrays(np.float32, _SHAPES, elements=st.integers(-3, 3).map(float)),
       st.sampled_from([np.float32, np.int32, np.uint8]), st.booleans())
def test_prod_any_all_refs(x, dtype, keepdims):
    x = np.abs(x).astype(dtype) if dtype == np.uint8 else x.astype(dtype)
    axes = tuple(range(x.ndim))
    for op, fn in (("reduce_prod", lambda v: np.prod(v, axis=axes, keepdims=keepdims,
                                                      dtype=None if v.dtype.kind == "f" else np.int32)),
                   ("reduce_any", lambda v: np.any(v, axis=axes, keepdims=keepdims)),
                   ("reduce_all", lambda v: np.all(v, axis=axes, keepdims=keepdims))):
        with np.errstate(all="ignore"):
            got = registry.get(op).ref([x], {"axes": axes, "keepdims": keepdims})
            assert _same(got, fn(x)), op


def test_full_reductions_through_the_front_end():
    rng = np.random.default_rng(3)
    for x in (rng.random(5000).astype(np.float32), rng.integers(-5, 5, (40, 130)).astype(np.int32),
              np.array(2.5, np.float32), rng.random((7, 0)).astype(np.float32)):
        v = jnp.array(x)
        if x.size:
            assert jnp.mean(v) == np.float32(np.mean(x, dtype=np.float64 if x.dtype.kind != "f" else None))
            assert jnp.prod(v) == np.prod(x, dtype=None if x.dtype.kind == "f" else np.int32)
            assert jnp.argmax(v) == np.argmax(x) and jnp.argmin(v) == np.argmin(x)
        assert jnp.any(v) is bool(np.any(x)) and jnp.all(v) is bool(np.all(x))


def test_argmax_alias_follows_each_value():
    """Values freed and new ones made at (possibly) the same addresses and ids: each argmax is of
    its own value, and the alias cache holds nothing for freed values."""
    rng = np.random.default_rng(4)
    for _ in range(30):
        x = rng.random(6000).astype(np.float32)
        x[rng.integers(0, 6000)] = 7.0
        x[rng.integers(0, 6000)] = -7.0
        v = jnp.array(x)
        assert jnp.argmax(v) == np.argmax(x) and jnp.argmin(v) == np.argmin(x)
        assert jnp.argmax(v) == np.argmax(x)    # (the cached alias)
        # ties: the first index, NaN first
        y = np.zeros((60, 100), np.float32)
        y[3, 5] = y[10, 1] = 1.0
        assert jnp.argmax(jnp.array(y)) == np.argmax(y) == 305
        y[50, 50] = np.nan
        assert jnp.argmax(jnp.array(y)) == np.argmax(y)
        assert _same(jnp.argmax(jnp.array(y), axis=0).read(), np.argmax(y, axis=0).astype(np.int32))
        del v
    gc.collect()
    for ref, alias in list(_ALIASES.values()):
        assert ref() is not None


@settings(max_examples=40, deadline=None, derandomize=True)
@given(hnp.arrays(np.float32, _SHAPES, elements=_F32))
def test_around_half_away_exact(x):
    want = np.copysign(np.floor(np.abs(x.astype(np.float64)) + 0.5), x.astype(np.float64)).astype(np.float32)
    got = jnp.around(jnp.array(x)).read()
    assert got.shape == x.shape and got.dtype == np.float32
    assert np.array_equal(got.view(np.int32), want.view(np.int32))     # (the signs of zeros too)
    if x.ndim == 2:     # a transposed (non-contiguous) input
        got_t = jnp.around(jnp.transpose(jnp.array(x))).read()
        assert np.array_equal(got_t.view(np.int32), np.ascontiguousarray(want.T).view(np.int32))


def test_multi_output_builds_from_the_signature_cache():
    """svd, divmod, modf, frexp built twice per signature (the second from the cache), other
    shapes and attributes beside: each output's shape, dtype and values as numpy's."""
    rng = np.random.default_rng(5)
    for _ in range(2):
        for shape in ((9, 9), (5, 3), (2, 4, 6)):
            x = rng.random(shape).astype(np.float32)
            for fm in (True, False):
                u, s, vh = jnp.linalg.svd(jnp.array(x), full_matrices=fm)
                nu, ns, nvh = np.linalg.svd(x, full_matrices=fm)
                assert [tuple(v.shape) for v in (u, s, vh)] == [nu.shape, ns.shape, nvh.shape]
                assert {v.read().dtype for v in (u, s, vh)} == {np.dtype(np.float32)}
                np.testing.assert_allclose(s.read(), ns, rtol=1e-5, atol=1e-6)
                if not fm:
                    rebuilt = (u.read() * s.read()[..., None, :]) @ vh.read()
                    np.testing.assert_allclose(rebuilt, x, rtol=1e-4, atol=1e-5)
            y = (rng.random(shape) * 10 - 5).astype(np.float32)
            d = np.where(rng.random(shape) < 0.5, np.float32(1.5), np.float32(-2.0)).astype(np.float32)
            q, r = jnp.divmod(jnp.array(y), jnp.array(d))
            nq, nr = np.divmod(y, d)
            assert _same(q.read(), nq) and _same(r.read(), nr)
            f, i = jnp.modf(jnp.array(y))
            assert _same(f.read(), np.modf(y)[0]) and _same(i.read(), np.modf(y)[1])
            m, e = jnp.frexp(jnp.array(y))
            assert _same(m.read(), np.frexp(y)[0]) and _same(e.read(), np.frexp(y)[1].astype(np.int32))


def test_full_reductions_follow_placeholder_writes_threads_and_the_executor():
    """The scalar of a whole-array reduction is computed from the input's current value: after a
    placeholder write, on another thread, and with the reference executor installed."""
    import threading

    from mnnjit import expr, runtime
    from mnnjit.backends.reference import evaluate as reference_evaluate

    x = expr.placeholder([3, 2000], expr.NCHW, expr.float)
    data = np.random.default_rng(6).random((3, 2000)).astype(np.float32)
    x.write(data)
    assert jnp.sum(x) == np.sum(data) and jnp.max(x) == np.max(data) and jnp.argmin(x) == np.argmin(data)
    x.write(data * -2)
    assert jnp.sum(x) == np.sum(data * -2) and jnp.max(x) == np.max(data * -2)
    assert jnp.argmin(x) == np.argmin(data * -2)
    got: list = []
    th = threading.Thread(target=lambda: got.append((jnp.mean(x), jnp.ptp(x))))
    th.start()
    th.join()
    assert got == [(np.mean(data * -2), np.ptp(data * -2))]
    prev = runtime.set_executor(reference_evaluate)
    try:
        assert jnp.sum(x) == np.sum(data * -2) and jnp.min(x) == np.min(data * -2)
    finally:
        runtime.set_executor(prev)
