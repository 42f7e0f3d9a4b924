"""Row-wise steps of the whole-plan kernel (:mod:`.whole_plan`): softmax and layer norm over the
last axis, compiled once per process (disk cache) and called from the generated kernels.

Written out as loops in a step of the kernel, a row's max and sums are serial chains (a float
reduction is not reordered without fast-math flags) and the exp cannot vectorise beside them:
attention's softmax over 128-wide rows took ~18 ns an element. Here each reduction runs on eight
independent accumulators (the max) or under ``reassoc`` alone (the sums: no finite-math
assumption, so NaN and infinities keep the reference's results), and the exp and the scaling are
loops of their own that vectorise. Results are the reference's up to the order of the sums.

This module imports numba: import it lazily.
"""
from __future__ import annotations

from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
import numpy as np
from numba import njit

from mnnjit.backends.cpu.runtime.intrinsics import fast_expf

__all__ = ["softmax_rows", "layer_norm_rows"]


@njit(fastmath={"reassoc"}, cache=True, nogil=True, boundscheck=False)
def _sum(a, n):
    s = np.float32(0)
    for t in range(n):
        s += a[t]
    return s


@njit(fastmath={"reassoc"}, cache=True, nogil=True, boundscheck=False)
def _sum_sq_dev(a, n, mean):
    s = np.float32(0)
    for t in range(n):
        d = a[t] - mean
        s += d * d
    return s


@njit(inline="always")
def _max2(a, b):
    # NaN propagates, as np.max: a NaN ``a`` is kept, a NaN ``b`` fails the comparison
    return a if (a >= b) | (a != a) else b


@njit(cache=True, nogil=True, boundscheck=False)
def _row_max(x, n):
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = x[0]
    n8 = n - n % 8
    for t in range(0, n8, 8):
        m0 = _max2(m0, x[t])
        m1 = _max2(m1, x[t + 1])
        m2 = _max2(m2, x[t + 2])
        m3 = _max2(m3, x[t + 3])
        m4 = _max2(m4, x[t + 4])
        m5 = _max2(m5, x[t + 5])
        m6 = _max2(m6, x[t + 6])
        m7 = _max2(m7, x[t + 7])
    for t in range(n8, n):
        m0 = _max2(m0, x[t])
    return _max2(_max2(_max2(m0, m1), _max2(m2, m3)), _max2(_max2(m4, m5), _max2(m6, m7)))


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def softmax_rows(x, o, rows, n):
    """``o[r] = exp(x[r] - max(x[r])) / sum(...)`` for each of ``rows`` rows of ``n`` values
    (flat C order; ``o`` may not alias ``x``)."""
    for r in range(rows):
        xr = x[r * n:(r + 1) * n]
        orow = o[r * n:(r + 1) * n]
        mx = _row_max(xr, n)
        for t in range(n):
            orow[t] = fast_expf(xr[t] - mx)
        # (a product by the reciprocal: within an ulp of the reference's quotient, and a
        # quarter of the division's time)
        inv = np.float32(1) / _sum(orow, n)
        for t in range(n):
            orow[t] = orow[t] * inv
    return 0


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def layer_norm_rows(x, o, rows, n, gamma, has_gamma, beta, has_beta, eps, rms):
    """Layer norm of each of ``rows`` rows of ``n`` values (flat C order): ``(x - mean) /
    sqrt(mean((x - mean)^2) + eps)`` (``rms``: mean 0), times ``gamma`` and plus ``beta``
    (``n`` values each) when given."""
    for r in range(rows):
        xr = x[r * n:(r + 1) * n]
        orow = o[r * n:(r + 1) * n]
        mean = np.float32(0) if rms else np.float32(_sum(xr, n) / np.float32(n))
        var = np.float32(_sum_sq_dev(xr, n, mean) / np.float32(n))
        inv = np.float32(1) / np.float32(np.sqrt(var + eps))
        if has_gamma and has_beta:
            for t in range(n):
                orow[t] = (xr[t] - mean) * inv * gamma[t] + beta[t]
        elif has_gamma:
            for t in range(n):
                orow[t] = (xr[t] - mean) * inv * gamma[t]
        elif has_beta:
            for t in range(n):
                orow[t] = (xr[t] - mean) * inv + beta[t]
        else:
            for t in range(n):
                orow[t] = (xr[t] - mean) * inv
    return 0
