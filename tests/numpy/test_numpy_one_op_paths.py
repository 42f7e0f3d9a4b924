"""The one-op and written-out paths of numpy-style calls (argsort from quicksort, divmod/modf/var/std/
ptp/sinc as one op, signature-cached builds of reductions, transposes, broadcasts, concat, flip,
stack, roll, split, tile; movement inputs read as views by the eager path) give numpy's values,
dtypes and errors, and the node chains they replace give the same bits."""
from __future__ import annotations

import math

import numpy as np
import pytest

import mnnjit.numpy as jnp
from mnnjit.ops import build as B

_SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, np.inf, -np.inf, np.nan, 1e-40, 3e38, -7.0],
                     np.float32)


def _f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values and signs (NaNs equal to NaNs)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    nan = np.isnan(a) if a.dtype.kind == "f" else np.zeros(a.shape, bool)
    return bool(np.array_equal(nan, np.isnan(b) if b.dtype.kind == "f" else nan)) and \
        bool(np.array_equal(a[~nan].view(np.uint8), b[~nan].view(np.uint8)))


@pytest.mark.parametrize("case", ["float_ties", "ints", "nans", "zeros", "distinct"])
def test_argsort_is_the_stable_order(case):
    rng = np.random.default_rng(3)
    if case == "float_ties":
        x = rng.choice(np.arange(50, dtype=np.float32) / 4, 3000)
    elif case == "ints":
        x = rng.integers(-5, 5, 3000).astype(np.int32)
    elif case == "nans":
        x = rng.random(3000).astype(np.float32)
        x[rng.integers(0, 3000, 300)] = np.nan
        x[::7] = 0.25
    elif case == "zeros":
        x = rng.choice(np.array([0.0, -0.0, 1.0, -1.0], np.float32), 2000)
    else:
        x = rng.permutation(4000).astype(np.float32)
    got = jnp.argsort(jnp.array(x)).read()
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.argsort(x, kind="stable"))
    x2 = x[:2000].reshape(40, 50)
    for axis in (0, 1):
        np.testing.assert_array_equal(jnp.argsort(jnp.array(x2), axis=axis).read(),
                                      np.argsort(x2, axis=axis, kind="stable"))


def test_divmod_and_modf_match_the_separate_ops():
    a0 = np.concatenate([_f32(500) * 10, np.repeat(_SPECIALS, len(_SPECIALS))])
    b0 = np.concatenate([_f32(500, seed=1) * 3, np.tile(_SPECIALS, len(_SPECIALS))])
    a, b = jnp.array(a0), jnp.array(b0)
    q, r = jnp.divmod(a, b)
    assert _bits_equal(q.read(), B.binary("floordiv", a, b).read())
    assert _bits_equal(r.read(), B.binary("mod", a, b).read())
    with np.errstate(all="ignore"):
        nq, nr = np.divmod(a0, b0)
    assert _bits_equal(q.read(), nq) and _bits_equal(r.read(), nr)
    frac, ip = jnp.modf(a)
    nf, ni = np.modf(a0)
    assert _bits_equal(frac.read(), nf) and _bits_equal(ip.read(), ni)
    fi, ii = jnp.modf(jnp.array(np.arange(-3, 3, dtype=np.int32)))
    assert fi.read().dtype == np.float32 and _bits_equal(ii.read(), np.arange(-3, 3).astype(np.float32))


@pytest.mark.parametrize("shape,axis,keepdims,ddof", [((6000,), None, False, 0), ((4, 5, 6), (0, 2), True, 1),
                                                      ((7, 3), 1, False, 0), ((0, 3), 0, False, 0)])
def test_var_std_ptp_one_op(shape, axis, keepdims, ddof):
    x0 = _f32(*shape) * 4
    x = jnp.array(x0)
    for name in ("var", "std"):
        got = getattr(jnp, name)(x, axis=axis, keepdims=keepdims, ddof=ddof)
        with np.errstate(all="ignore"):
            want = getattr(np, name)(x0, axis=axis, keepdims=keepdims, ddof=ddof)
        if axis is None and not keepdims:
            assert isinstance(got, float)
        else:
            got = got.read()
            assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)
    if 0 in shape:
        with pytest.raises(ValueError, match="zero-size array"):
            jnp.ptp(x, axis=axis).read()
        return
    for dt in (np.float32, np.int32, np.uint8):
        xd = (x0 * 30).astype(dt)
        got = jnp.ptp(jnp.array(xd), axis=axis, keepdims=keepdims)
        want = np.ptp(xd, axis=axis, keepdims=keepdims)
        if axis is None and not keepdims:
            assert got == want.item()
        else:
            assert got.read().dtype == want.dtype
            np.testing.assert_array_equal(got.read(), want)


def test_sinc_matches_the_node_chain():
    x0 = np.concatenate([_f32(3000) * 5, _SPECIALS])
    x = jnp.array(x0)
    px = B.binary("mul", x, math.pi)
    zero = B.binary("equal", x, 0.0)
    safe = B.select(zero, 1.0, px)
    chain = B.select(zero, 1.0, B.binary("div", B.unary("sin", safe), safe))
    assert _bits_equal(jnp.sinc(x).read(), chain.read())
    np.testing.assert_allclose(jnp.sinc(x).read()[:3000], np.sinc(x0[:3000]), rtol=2e-5, atol=1e-6)
    assert float(jnp.sinc(jnp.array(np.float32(0))).read()) == 1.0


def test_signature_cached_builds_repeat_and_raise():
    x0 = _f32(4, 6, 5)
    x = jnp.array(x0)
    for _ in range(2):      # the second call takes the caches
        assert jnp.max(x) == x0.max() and jnp.sum(x) == pytest.approx(float(x0.sum()), rel=1e-5)
        assert jnp.argmax(x) == int(np.argmax(x0)) and jnp.argmin(x) == int(np.argmin(x0))
        np.testing.assert_array_equal(jnp.transpose(x).read(), x0.transpose())
        np.testing.assert_array_equal(jnp.transpose(x, [1, 0, 2]).read(), x0.transpose(1, 0, 2))
        np.testing.assert_array_equal(jnp.swapaxes(x, 0, 2).read(), x0.swapaxes(0, 2))
        np.testing.assert_array_equal(jnp.broadcast_to(x, (3, 4, 6, 5)).read(), np.broadcast_to(x0, (3, 4, 6, 5)))
        np.testing.assert_array_equal(jnp.concatenate([x, x], 1).read(), np.concatenate([x0, x0], 1))
        np.testing.assert_array_equal(jnp.flip(x).read(), np.flip(x0))
        np.testing.assert_array_equal(jnp.flip(x, -1).read(), np.flip(x0, -1))
        for ax in (0, 2, 3, -1):
            np.testing.assert_array_equal(jnp.stack([x, x, x], ax).read(), np.stack([x0, x0, x0], ax))
        for sh, ax in ((7, None), (-3, 1), (0, 0), (13, -1)):
            np.testing.assert_array_equal(jnp.roll(x, sh, ax).read(), np.roll(x0, sh, ax))
        for got, want in zip(jnp.split(x, 2, 1), np.split(x0, 2, 1)):
            np.testing.assert_array_equal(got.read(), want)
        np.testing.assert_array_equal(jnp.tile(x[0, 0], 3).read(), np.tile(x0[0, 0], 3))
        with pytest.raises(ValueError):
            jnp.transpose(x, [0, 0, 1])
        with pytest.raises(ValueError):
            jnp.broadcast_to(x, (4, 6))
        with pytest.raises(ValueError):
            jnp.concatenate([x, x[0]], 0)
        with pytest.raises(np.exceptions.AxisError):
            jnp.roll(x, 1, 5)
        with pytest.raises(np.exceptions.AxisError):
            jnp.flip(x, 3)
    assert jnp.broadcast_to(x, (4, 6, 5))._node is x._node


def test_eager_views_of_pending_movement_inputs_are_not_frozen_or_shared():
    x0 = _f32(3000)
    x = jnp.array(x0)
    r = jnp.roll(x, 5)
    out = r.read()
    out[:] = 0.0      # the user's memory: the input and later results keep their values
    np.testing.assert_array_equal(x.read(), x0)
    np.testing.assert_array_equal(jnp.roll(x, 5).read(), np.roll(x0, 5))
    s = jnp.stack([x, x])
    np.testing.assert_array_equal(s.read(), np.stack([x0, x0]))
    assert not np.shares_memory(s.read(), x.read_view())
    y = x + 1         # an expression whose value read() hands out (writable, the Var's own memory)
    w = y.read()
    w[0] = 42.0       # as in real MNN, later expressions see the write; earlier results keep theirs
    before = jnp.stack([y, y]).read()
    np.testing.assert_array_equal(before[:, 0], [42.0, 42.0])
    w[0] = 7.0
    np.testing.assert_array_equal(before[:, 0], [42.0, 42.0])
    np.testing.assert_array_equal(jnp.roll(y, 1).read()[1], 7.0)


def test_around_is_roundf_as_real_mnn():
    # recorded from real MNN 3.6.1: ``MNN.numpy.around(MNN.numpy.array(x)).read().tolist()``
    x = np.array([0.49999997, 8388609., -8388609., 2.5, -2.5, 1.5, 0.5, -0.5, -0.49999997, 1e30, np.nan, np.inf,
                  -0.0, 3.4999998], np.float32)
    mnn = [0.0, 8388609.0, -8388609.0, 3.0, -3.0, 2.0, 1.0, -1.0, -0.0, 1.0000000150474662e+30, np.nan, np.inf,
           -0.0, 3.0]
    assert _bits_equal(jnp.around(jnp.array(x)).read(), np.array(mnn, np.float32))
    assert _bits_equal(jnp.around(jnp.array(x[3])).read(), np.array(3.0, np.float32))
    rng = np.random.default_rng(5)
    y = (rng.standard_normal(4000) * 1e3).astype(np.float32)
    y[::3] = np.round(y[::3]) + 0.5
    want = np.copysign(np.floor(np.abs(y.astype(np.float64)) + 0.5), y).astype(np.float32)
    assert _bits_equal(jnp.around(jnp.array(y)).read(), want)


def test_ufunc_route_ignores_errors_without_touching_the_callers_state():
    import threading
    import warnings

    a = jnp.array(np.array([1, 0, -1, np.inf, 3e38], np.float32))
    b = jnp.array(np.array([0, 0, 0, np.inf, 3e38], np.float32))
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # MNN gives no floating-point warnings
        q, s, p = (a / b).read(), (a - b).read(), (a * b).read()
    np.testing.assert_array_equal(q, [np.inf, np.nan, -np.inf, np.nan, 1.0])
    assert np.isnan(s[3]) and np.isinf(p[4])
    assert np.geterr() == before
    with np.errstate(all="raise"):      # the caller's own state stays theirs
        (a / b).read()
        with pytest.raises(FloatingPointError):
            np.divide(np.float32(1), np.float32(0))
    errors = []

    def work():     # threads share the route's context: the ones finding it in use take the variable
        try:
            for _ in range(2000):
                np.testing.assert_array_equal((a + b).read()[:3], [1.0, 0.0, -1.0])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and np.geterr() == before


def test_cached_reshape_repeats_and_raises():
    x0 = np.arange(24, dtype=np.float32)
    x = jnp.array(x0)
    for _ in range(2):
        for s in ((4, 6), [2, -1, 3], (24,), (-1,)):
            np.testing.assert_array_equal(jnp.reshape(x, s).read(), x0.reshape(s))
        assert jnp.reshape(x, (24,))._node is x._node
        for bad in ((5, 5), (-1, -1), (7, -1)):
            with pytest.raises(ValueError):
                jnp.reshape(x, bad)
