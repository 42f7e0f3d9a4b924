"""The lean eager path: one-node evaluation, the elementwise signature cache, and what ``read()``,
``__array__`` and movement results hand to the user (independence from cached values, read-only
views, numpy's values)."""
from __future__ import annotations

import numpy as np
import pytest

import mnnjit.numpy as jnp
from mnnjit import expr
from mnnjit.ops import build as B


def _f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_read_is_a_private_writable_copy():
    a0, b0 = _f32(1000), _f32(1000, seed=1)
    a, b = jnp.array(a0), jnp.array(b0)
    y = a + b
    z = y * 2                      # built before the write, computed after it
    r = y.read()
    assert r.flags.writeable
    r[:] = 99.0
    np.testing.assert_array_equal(y.read(), a0 + b0)
    np.testing.assert_array_equal(z.read(), (a0 + b0) * 2)
    np.testing.assert_array_equal((y - 1).read(), a0 + b0 - 1)
    r2 = y.read()
    assert not np.shares_memory(r, r2)


def test_array_protocol_is_zero_copy_and_read_only():
    a0 = _f32(64)
    y = jnp.array(a0) + 1
    v = np.asarray(y)
    np.testing.assert_array_equal(v, a0 + 1)
    assert np.shares_memory(v, y.read_view())
    with pytest.raises(ValueError):
        v[0] = 5.0
    w = np.array(y)                # numpy's copy=True: a writable copy
    w[0] = 5.0
    assert y.read()[0] == np.float32(a0[0] + 1)
    assert np.asarray(y, dtype=np.float64).dtype == np.float64


@pytest.mark.parametrize("make, ref", [
    (lambda x: jnp.transpose(x), lambda x: np.transpose(x)),
    (lambda x: jnp.swapaxes(x, 0, 3), lambda x: np.swapaxes(x, 0, 3)),
    (lambda x: jnp.moveaxis(x, 0, 3), lambda x: np.moveaxis(x, 0, 3)),
    (lambda x: jnp.reshape(x, (10, 8, 3)), lambda x: np.reshape(x, (10, 8, 3))),
    (lambda x: jnp.broadcast_to(x, (2, 4, 2, 10, 3)), lambda x: np.broadcast_to(x, (2, 4, 2, 10, 3))),
    (lambda x: jnp.flip(x), lambda x: np.flip(x)),
    (lambda x: jnp.flip(x, (1, 3)), lambda x: np.flip(x, (1, 3))),
    (lambda x: x[1:3, ::-1, :, 1], lambda x: x[1:3, ::-1, :, 1]),
    (lambda x: jnp.reshape(jnp.transpose(x), (-1,)), lambda x: np.transpose(x).reshape(-1)),
])
def test_movement_of_computed_values_reads_as_an_owned_copy(make, ref):
    x0 = _f32(4, 2, 10, 3)
    x = jnp.array(x0)
    y = make(x)
    r = y.read()
    np.testing.assert_array_equal(r, ref(x0))
    assert r.shape == tuple(y.shape)
    assert r.flags.writeable and r.flags.owndata
    r[...] = 0                      # MNN scripts write into read() results: no Var changes
    np.testing.assert_array_equal(y.read(), ref(x0))
    view = np.asarray(y)            # the zero-copy way: read-only
    assert not view.flags.writeable
    np.testing.assert_array_equal(view, ref(x0))
    # the graph value of the same node stays contiguous (what the compiler and backends read)
    assert y.read_view().flags.c_contiguous
    np.testing.assert_array_equal(y.read_view(), ref(x0))
    np.testing.assert_array_equal(x.read(), x0)
    np.testing.assert_array_equal((y + 1).read(), ref(x0) + 1)


def test_movement_views_alias_the_moved_value():
    x = jnp.array(_f32(4, 16, 10, 10))
    t = jnp.transpose(x)
    assert np.shares_memory(np.asarray(t), x.read_view())
    assert not np.shares_memory(t.read(), x.read_view())
    lazy = jnp.transpose(x + 1)     # the moved value is not computed: computed, then moved
    np.testing.assert_array_equal(lazy.read(), np.transpose(x.read() + 1))
    assert lazy.read().flags.writeable


def test_placeholder_writes_reach_eager_values_and_views():
    x = expr.placeholder([2, 3], expr.NCHW, expr.float)
    x.write(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = x * 2
    t = expr.transpose(x, [1, 0])
    np.testing.assert_array_equal(y.read(), np.arange(6).reshape(2, 3) * 2)
    np.testing.assert_array_equal(t.read(), np.arange(6).reshape(2, 3).T)
    x.write(np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(y.read(), np.full((2, 3), 2.0))
    np.testing.assert_array_equal(t.read(), np.ones((3, 2)))


def test_signature_cache_keeps_dtype_rules_and_errors():
    i = jnp.array(np.arange(6, dtype=np.int32))
    f = jnp.array(np.arange(6, dtype=np.float32))
    for _ in range(3):              # the second and third builds come from the cache
        assert (i + i).dtype == jnp.int32
        assert (i / i).dtype == jnp.float32
        assert (i + f).dtype == jnp.float32
        assert (i & i).dtype == jnp.int32
        with pytest.raises(TypeError):
            f & f
        with pytest.raises(ValueError, match="could not be broadcast"):
            i + jnp.array(np.arange(4, dtype=np.int32))
        assert jnp.sqrt(i).dtype == jnp.float32
        with pytest.raises(TypeError):
            jnp.invert(f)
        np.testing.assert_array_equal((i // 2).read(), np.arange(6) // 2)
    assert B._EW_SIG                 # the cache was used


def test_eager_results_match_numpy_for_many_ops():
    x0 = np.abs(_f32(7, 5)) + 0.5
    y0 = np.abs(_f32(5, seed=3)) + 0.5
    x, y = jnp.array(x0), jnp.array(y0)
    cases = [
        (jnp.add(x, y), x0 + y0), (jnp.subtract(x, y), x0 - y0), (jnp.multiply(x, 3), x0 * 3),
        (jnp.divide(x, y), x0 / y0), (jnp.maximum(x, y), np.maximum(x0, y0)),
        (jnp.sqrt(x), np.sqrt(x0)), (jnp.exp(x), np.exp(x0)), (jnp.negative(x), -x0),
        (jnp.greater(x, y), (x0 > y0).astype(np.int32)), (jnp.sum(x, axis=0), x0.sum(0)),
        (jnp.tile(y, 2), np.tile(y0, 2)), (jnp.concatenate([x, x]), np.concatenate([x0, x0])),
    ]
    for got, want in cases:
        r = got.read()
        assert r.dtype == want.dtype and r.shape == want.shape
        np.testing.assert_allclose(r, want, rtol=1e-6)
    assert jnp.argmax(x) == int(np.argmax(x0))
    assert float(jnp.max(x)) == pytest.approx(float(x0.max()))


@pytest.mark.parametrize("shape, sections, axis", [
    ((4, 16, 10, 10), 2, 0), ((4, 16, 10, 10), 4, 1), ((7, 3), 3, 0), ((5,), [1, 3], 0),
    ((5,), [3, 1], 0), ((6, 2), [-2, 10], 0), ((0, 3), 2, 0), ((4, 6), 3, -1),
])
def test_array_split_matches_numpy(shape, sections, axis):
    x0 = _f32(*shape)
    got = jnp.array_split(jnp.array(x0), sections, axis)
    want = np.array_split(x0, sections, axis)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.read(), w)
        assert tuple(g.shape) == w.shape


@pytest.mark.parametrize("shape, axis", [((3, 1, 4), None), ((3, 1, 4), 1), ((3, 0, 4), None), ((5,), 0),
                                         ((2, 3), -1), ((), None)])
def test_flip_matches_numpy(shape, axis):
    x0 = _f32(*shape) if shape else np.array(1.5, np.float32)
    np.testing.assert_array_equal(jnp.flip(jnp.array(x0), axis).read(), np.flip(x0, axis))


def test_vector_ravel_keeps_the_node():
    x = jnp.array(_f32(5))
    assert jnp.ravel(x)._node is x._node
    np.testing.assert_array_equal(jnp.reshape(jnp.array(_f32(2, 3)), [-1]).read(), _f32(2, 3).reshape(-1))
