"""The whole-plan kernel's GEMM (backends/cpu/codegen/plan_gemm.py) against numpy: the left operand
read in place at any strides (row-major, transposed, packed panels), constant weights packed in
16-column blocks or read as rows, the next block prefetched, partial last panels (1-5 rows),
tail columns (1, 2 as dot products; more through a tile), products deeper than one pass over K,
more rows than one row block, bias per column or per row, relu / relu6 fused on the last pass;
the batched product (attention) and the C symbols the generated kernels call, serial and split
over two threads."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

pg = pytest.importorskip("mnnjit.backends.cpu.codegen.plan_gemm")

# (m, k, n): whole panels and blocks; 1-5 rows left over; 1, 2, 3 and 15 tail columns; k over
# one pass (KC = 256) and m over one row block (ROW_BLOCK = 96); fewer rows than a panel
SHAPES = [(12, 16, 32), (65, 40, 65), (64, 33, 66), (32, 20, 35), (7, 300, 47), (100, 520, 48),
          (5, 9, 17), (1, 8, 16), (13, 1, 18), (8, 64, 192), (4, 270, 20)]


def _want(a, w, bias, bmode, act):
    want = a.astype(np.float64) @ w.astype(np.float64)
    if bmode == 1:
        want += bias[:w.shape[1]]
    elif bmode == 2:
        want += bias[:a.shape[0], None]
    if act == 1:
        want = np.maximum(want, 0)
    elif act == 2:
        want = np.clip(want, 0, 6)
    return want


@pytest.mark.parametrize("m,k,n", SHAPES)
def test_gemm_matches_numpy(m, k, n):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    bias = (rng.standard_normal(max(m, n)) * 4).astype(np.float32)
    for ta, bpk, bmode, act in itertools.product((0, 1, 2), (False, True), (0, 1, 2), (0, 1, 2)):
        left = {0: a.ravel(), 1: np.ascontiguousarray(a.T).ravel(), 2: pg.pack_a(a)}[ta]
        right = pg.pack_b(w) if bpk else w.ravel()
        c = np.full(m * n, np.nan, np.float32)
        scratch = np.full(pg.scratch_size(m, k), np.nan, np.float32)
        pg.gemm(left, ta, m, k, right, bpk, n, c, bias, bmode, act, scratch)
        want = _want(a, w, bias, bmode, act)
        np.testing.assert_allclose(c.reshape(m, n), want, rtol=1e-4, atol=1e-4 * np.sqrt(k),
                                   err_msg=f"ta={ta} bpk={bpk} bmode={bmode} act={act}")


def test_relu_keeps_nan():
    """relu / relu6 on the registers keep NaN (the reference's maximum / clip do)."""
    m, k, n = 12, 8, 32
    a = np.ones((m, k), np.float32)
    a[3, 2] = np.nan
    w = np.ones((k, n), np.float32)
    for act in (1, 2):
        c = np.zeros(m * n, np.float32)
        pg.gemm(a.ravel(), 0, m, k, pg.pack_b(w), True, n, c, np.zeros(n, np.float32), 1, act,
                np.zeros(pg.scratch_size(m, k), np.float32))
        c = c.reshape(m, n)
        assert np.isnan(c[3]).all() and not np.isnan(np.delete(c, 3, 0)).any()


@pytest.mark.parametrize("nb,m,k,n", [(6, 65, 32, 65), (8, 64, 64, 32), (3, 20, 16, 18)])
def test_batched_and_symbols(nb, m, k, n):
    """``gemm_batched`` and the C symbols of plan_gemm_par (serial, and split by batches or by
    column blocks over a team of two threads) match numpy."""
    import numba
    from numba import njit

    from mnnjit.backends.cpu.codegen import plan_gemm_par as pp

    @njit(cache=False)
    def run_par(a, m, k, b, n, c, nb, scratch, w, c2, bias):
        pp.gemm_batched(a, m, k, b, n, c, nb, scratch)
        pp.gemm(a[:m * k], 0, m, k, w, True, n, c2, bias, 1, 1, scratch)
        return 0

    rng = np.random.default_rng(nb * m + k + n)
    a = rng.standard_normal((nb, m, k)).astype(np.float32)
    b = rng.standard_normal((nb, k, n)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    want = np.matmul(a.astype(np.float64), b)
    want2 = _want(a[0], w, bias, 1, 1)
    scratch = np.zeros(pg.scratch_size(m, k), np.float32)
    c = np.full(nb * m * n, np.nan, np.float32)
    pg.gemm_batched(a.ravel(), m, k, b.ravel(), n, c, nb, scratch)
    np.testing.assert_allclose(c.reshape(nb, m, n), want, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    old = numba.get_num_threads()
    try:
        for threads in (1, 2):
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            c = np.full(nb * m * n, np.nan, np.float32)
            c2 = np.full(m * n, np.nan, np.float32)
            run_par(a.ravel(), m, k, b.ravel(), n, c, nb, scratch, pg.pack_b(w), c2, bias)
            np.testing.assert_allclose(c.reshape(nb, m, n), want, rtol=1e-4, atol=1e-4 * np.sqrt(k))
            np.testing.assert_allclose(c2.reshape(m, n), want2, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    finally:
        numba.set_num_threads(old)
