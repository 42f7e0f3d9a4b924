"""``Var.read()`` hands out a computed value's own memory as real MNN's ``read()`` does, only when
nothing else shares it; later computations never write into a returned array.

Each scenario runs the same script on mnnjit.numpy and on real MNN.numpy and compares what the
script observes (values after writes into ``read()`` results, buffers shared between reads)."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import mnnjit.numpy as jnp

MNN = pytest.importorskip("MNN")
import MNN.numpy as rnp  # noqa: E402


def _base(lib, n=6):
    return lib.array(np.arange(n, dtype=np.float32))


def _writes_show_in_later_reads(lib):
    """The scenario of MNN scripts: read, write into the result, read again / compute from it."""
    a = _base(lib)
    b = a + 1
    r = b.read()
    r2 = b.read()
    seen = [bool(r.flags.writeable), bool(np.shares_memory(r, r2))]
    r[0] = 100.0
    seen.append(b.read().tolist())
    seen.append((b * 2).read().tolist())        # built and computed after the write
    y = lib.reshape(b, [2, 3])
    seen.append(y.read().tolist())               # computed now: sees the write ...
    r[1] = -5.0
    seen.append(y.read().tolist())               # ... and keeps its own value after the next one
    seen.append((a + 1).read().tolist())         # a new expression: its own memory
    seen.append(a.read().tolist())
    seen.append(r.tolist())
    return seen


def _movement_reads_are_independent(lib):
    """Writing into a movement op's ``read()`` result leaves the moved Var alone. (mnnjit keeps
    movement results as views of the moved value, so each such read is a new copy and a later
    ``t.read()`` does not show the write; real MNN's does: not compared.)"""
    a = _base(lib)
    b = a * 3
    t = lib.transpose(lib.reshape(b, [2, 3]))
    rt = t.read()
    rt[...] = 0.0
    return [b.read().tolist(), (b + 1).read().tolist(), rt.tolist()]


@pytest.mark.parametrize("scenario", [_writes_show_in_later_reads, _movement_reads_are_independent])
def test_read_ownership_matches_real_mnn(scenario):
    assert scenario(jnp) == scenario(rnp)


def test_later_calls_never_overwrite_returned_arrays():
    a0 = np.random.default_rng(0).standard_normal(64000).astype(np.float32)
    a = jnp.array(a0)
    kept = []
    for k in range(40):
        r = (a + float(k)).read()
        kept.append((k, r))
        if k % 3 == 0:
            del r
            gc.collect()
        _ = (a * 2.0).read(), jnp.sin(a).read(), jnp.concatenate([a, a]).read()
    for k, r in kept:
        np.testing.assert_array_equal(r, a0 + np.float32(k))
        assert r.flags.writeable
    np.testing.assert_array_equal(a.read(), a0)


def _shared_cases():
    """(build, what shares b's node or value) pairs: each makes b's value not b's alone."""
    def other_var(b):
        return b.copy()

    def dependent(b):
        return b * 2

    def zero_copy_view(b):
        return np.asarray(b)

    def movement_view(b):
        v = jnp.reshape(b, [2, 3])
        return v.read_view()

    return [other_var, dependent, zero_copy_view, movement_view]


@pytest.mark.parametrize("share", _shared_cases())
def test_shared_values_are_copied(share):
    b = _base(jnp) + 1
    b.read_view()                      # computed before anything shares it
    holder = share(b)
    before = np.array(holder.read() if hasattr(holder, "read") else holder)
    r = b.read()
    r[:] = -1.0
    np.testing.assert_array_equal(b.read(), np.arange(6, dtype=np.float32) + 1)
    after = holder.read() if hasattr(holder, "read") else holder
    np.testing.assert_array_equal(after, before)


def test_handed_out_memory_stays_writable_as_an_input():
    """Ops that pass an input through (a same-shape reshape, an identity step of a graph) copy a
    handed-out input instead of freezing the user's array; values computed from it before a write
    keep what they computed."""
    b = _base(jnp, 24) + 1
    r = b.read()
    want = np.arange(24, dtype=np.float32) + 1
    for out in (jnp.reshape(b, [24]), jnp.reshape(b, [4, 6]), b + 0, jnp.reshape(jnp.reshape(b, [2, 12]), [24]),
                jnp.copy(b), (b * 1).astype(np.float32), jnp.reshape(b + 0, [4, 6])):
        got = np.array(out.read_view())
        np.testing.assert_array_equal(got.ravel(), want)
        assert r.flags.writeable
        r[0] = 7.0
        if out._node is not b._node:
            np.testing.assert_array_equal(np.asarray(out).ravel(), want)
            np.testing.assert_array_equal(out.read().ravel(), want)
        r[0] = 1.0
    assert np.shares_memory(r, b.read())


def test_constants_inputs_and_model_outputs_are_copied():
    c = jnp.array(np.ones(4, np.float32))
    rc = c.read()
    rc[0] = 9.0
    assert c.read()[0] == 1.0
    assert not np.shares_memory(c.read(), c.read())


def test_whole_views_of_fresh_arrays_are_handed_out_unless_their_buffer_is_held():
    """A result that is a whole view of a fresh buffer (float32 signbit: the shifted bits viewed as
    int32) is this Var's memory when nothing else holds the buffer, and a copy when something does."""
    x0 = np.array([1.0, -2.0, -0.0, 3.0], np.float32)
    y = jnp.signbit(jnp.array(x0))
    r = y.read()
    assert r.base is not None and np.shares_memory(r, y.read())
    r[0] = 5
    assert y.read()[0] == 5
    z = jnp.signbit(jnp.array(x0))
    held = z.read_view().base          # the buffer, held outside the Var
    rz = z.read()
    assert not np.shares_memory(rz, held)
    rz[:] = 9
    np.testing.assert_array_equal(z.read(), [0, 1, 1, 0])
    np.testing.assert_array_equal(held.view(np.int32), [0, 1, 1, 0])


def test_read_copies_where_reference_counts_cannot_be_trusted(monkeypatch):
    """On an interpreter whose counts do not see every holder (``_counts_holders`` False), every
    ``read()`` is a copy: no write into a result reaches the Var."""
    import mnnjit.var as var_mod
    monkeypatch.setattr(var_mod, "_COUNTS_HOLDERS", False)
    b = _base(jnp) + 1
    r = b.read()
    r2 = b.read()
    assert r.flags.writeable and not np.shares_memory(r, r2)
    r[0] = 100.0
    assert b.read().tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert (b * 2).read().tolist()[0] == 2.0


def test_reference_count_probe_matches_this_interpreter():
    """The probe's verdict agrees with a direct look at a lone node: when it trusts the counts, a
    fresh result nothing else holds is handed out; a result another Var shares never is."""
    import mnnjit.var as var_mod
    b = _base(jnp) + 1
    first = b.read()
    if var_mod._COUNTS_HOLDERS:
        assert np.shares_memory(first, b.read())
    c = _base(jnp) * 2
    other = jnp.reshape(c, [6])      # another expression holds c's node
    rc = c.read()
    rc[0] = 50.0
    assert other.read().tolist()[0] == 0.0
