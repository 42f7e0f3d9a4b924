"""mnnjit.numpy's compositions under the compiler (threshold 0: compiled kernels) equal the reference path.

Opt-in (``MNNJIT_TEST_COMPILED=1``): a cold kernel cache costs ~15 s of Numba compilation per case, more
than this directory's time budget; the compiler's own tests cover compiled kernels in general.

A small representative set of fused compositions (each new fusion structure costs a Numba compile
the first time: ~1-2 s each on a cold cache); a wider one-off check of 149 functions run by hand
found Numba's ``np.spacing(-0.0)`` sign and its missing ``np.i0`` (both ops are now opaque);
tolerance rtol/atol 1e-5 (compiled kernels compute transcendental functions in float64 then round).
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import mnnjit.numpy as mnp
from mnnjit import runtime
from mnnjit.backends.reference import evaluate as reference_evaluate
from mnnjit.var import Var

pytest.importorskip("numba")
if os.environ.get("MNNJIT_TEST_COMPILED", "") in ("", "0"):
    pytest.skip("set MNNJIT_TEST_COMPILED=1 to compare compiled kernels with the reference path",
                allow_module_level=True)

_rng = np.random.default_rng(0)
A = (_rng.random((4, 40)) * 10 - 5).astype(np.float32)
N = np.where(A > 3, np.nan, A).astype(np.float32)

CASES = {
    "std_nan": lambda: mnp.nanstd(N, 1),
    "percentile_nan": lambda: mnp.nanpercentile(N, [25, 75], 1),
}


def _value(fn):
    res = fn()
    return res.read() if isinstance(res, Var) else np.asarray(res)


@pytest.fixture(scope="module")
def compiled():
    from mnnjit import compiler
    prev = compiler.set_threshold(0)
    yield compiler
    compiler.set_threshold(None if prev >= 1 << 40 else prev)


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_matches_reference(name, compiled):
    prev = runtime.set_executor(reference_evaluate)
    try:
        want = _value(CASES[name])
    finally:
        runtime.set_executor(prev)
    got = _value(CASES[name])
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-5, atol=1e-5, equal_nan=True)
