"""Linear-algebra ops used by mnnjit.numpy.linalg.

* ``svd``    inputs (a float32, shape (..., M, N)); attrs ``full_matrices``. Three outputs (u, s, vh) as
             numpy.linalg.svd: u (..., M, M or K), s (..., K), vh (..., N or K, N), K = min(M, N).
* ``solve``  inputs (a (..., M, M), b (..., M) or (..., M, K)) float32; numpy.linalg.solve's broadcasting
             (b is a vector only when it is 1-D); numpy.linalg.LinAlgError for singular matrices.
* ``det``    inputs (a (..., M, M) float32): the determinants (...,), float32 (computed in float64 by LU
             factorisation, as numpy.linalg.det; a singular matrix gives 0).
"""
from __future__ import annotations

import numpy as np

from .._dtypes import F32
from .elementwise import broadcast_shape
from .registry import OpDef, register


def _svd_infer(inputs, attrs):
    s = inputs[0].shape
    m, n = s[-2], s[-1]
    k = min(m, n)
    batch = s[:-2]
    if attrs.get("full_matrices", True):
        return [(batch + (m, m), F32), (batch + (k,), F32), (batch + (n, n), F32)]
    return [(batch + (m, k), F32), (batch + (k,), F32), (batch + (k, n), F32)]


def _svd_ref(xs, attrs):
    u, s, vh = np.linalg.svd(xs[0].astype(np.float64), full_matrices=attrs.get("full_matrices", True))
    return u.astype(np.float32), s.astype(np.float32), vh.astype(np.float32)


register(OpDef("svd", "opaque", _svd_infer, _svd_ref, mnn_type="Svd", n_out=3))


def solve_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """Result shape of numpy.linalg.solve (numpy >= 2 rules)."""
    if len(a) < 2 or a[-1] != a[-2]:
        raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")
    if len(b) == 1:
        if b[0] != a[-1]:
            raise ValueError(f"solve: Input operand 1 has a mismatch in its core dimension 0 (size {b[0]} is "
                             f"different from {a[-1]})")
        return broadcast_shape(a[:-2], ()) + (a[-1],)
    if b[-2] != a[-1]:
        raise ValueError(f"solve: Input operand 1 has a mismatch in its core dimension 0 (size {b[-2]} is "
                         f"different from {a[-1]})")
    return broadcast_shape(a[:-2], b[:-2]) + (a[-1], b[-1])


def _solve_ref(xs, attrs):
    return np.linalg.solve(xs[0].astype(np.float64), xs[1].astype(np.float64)).astype(np.float32)


register(OpDef("solve", "opaque", lambda i, a: (solve_shape(i[0].shape, i[1].shape), F32), _solve_ref))


def _det_infer(inputs, attrs):
    s = inputs[0].shape
    if len(s) < 2 or s[-1] != s[-2]:
        raise np.linalg.LinAlgError(f"det: the last 2 dimensions must be square, got shape {list(s)}")
    return s[:-2], F32


def _det_ref(xs, attrs):
    return np.asarray(np.linalg.det(xs[0].astype(np.float64)), np.float32)


register(OpDef("det", "opaque", _det_infer, _det_ref, mnn_type="Det"))
