"""``intrinsics.borrow``: a view without the owner reference reads and writes the owner's data."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp
from numba import njit

from mnnjit.backends.cpu.cnn_steps import _keep_alive, _store_rows_act
from mnnjit.backends.cpu.runtime.intrinsics import borrow


@njit(cache=True)
def _row_sums_borrowed(a):
    v = borrow(a)
    out = np.zeros(v.shape[0], np.float64)
    for i in range(v.shape[0]):
        r = v[i]                       # slices of a borrowed view
        for j in range(r.shape[0]):
            out[i] += r[j]
    return out


@njit(cache=True)
def _scale_in_place_borrowed(a, k):
    scratch = np.empty(a.shape[1], a.dtype)
    s = borrow(scratch)
    v = borrow(a)
    for i in range(v.shape[0]):
        for j in range(v.shape[1]):
            s[j] = v[i, j] * k
        for j in range(v.shape[1]):
            v[i, j] = s[j]
    _keep_alive(scratch, scratch)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=2, max_dims=2, max_side=9),
                  elements=st.floats(-1e3, 1e3, width=32)),
       st.booleans())
def test_borrowed_view_reads_the_owner(a, transposed):
    src = a.T if transposed else a          # non-contiguous views too
    np.testing.assert_allclose(_row_sums_borrowed(src), src.astype(np.float64).sum(axis=1),
                               rtol=1e-6, atol=1e-3)


def test_borrowed_view_writes_the_owner():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    want = a * 3
    _scale_in_place_borrowed(a, np.float32(3))
    np.testing.assert_array_equal(a, want)


@njit(cache=True)
def _store_rows(dst, src, rows, n, ss, act):
    _store_rows_act(dst, src, rows, n, ss, act)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.integers(1, 20), st.integers(0, 5), st.sampled_from([0, 1, 2]))
def test_store_rows_act_matches_numpy(rows, n, gap, act):
    ss = n + gap
    rng = np.random.default_rng(rows * 100 + n)
    src = (rng.standard_normal((rows - 1) * ss + n) * 8).astype(np.float32)
    dst = np.full(rows * n, np.nan, np.float32)
    _store_rows(dst, src, rows, n, ss, act)
    want = np.stack([src[r * ss:r * ss + n] for r in range(rows)]).ravel()
    if act == 1:
        want = np.maximum(want, 0)
    elif act == 2:
        want = np.clip(want, 0, 6)
    np.testing.assert_array_equal(dst, want)
