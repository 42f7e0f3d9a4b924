"""The bfloat16 measurements behind issue 29's decision (benchmarks/bf16_microkernel.py,
benchmarks/bf16_accuracy.py) compute what they claim: bf16 rounding as ml_dtypes rounds, and the
``vdpbf16ps`` GEMM equal to a float64 product of the bf16-rounded operands."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _bench(name: str):
    if str(_BENCH) not in sys.path:
        sys.path.insert(0, str(_BENCH))
    return importlib.import_module(name)


def test_round_to_bf16_matches_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(3)
    a = np.concatenate([rng.standard_normal(4000).astype(np.float32) * 10.0 ** rng.integers(-30, 30, 4000),
                        np.float32([0.0, -0.0, 1.00390625, 1.01171875, 3.0e38, -3.3e38, 1e-40, np.inf])])
    a = a.astype(np.float32)
    ours = _bench("bf16_accuracy").round_to(a, "bf16")
    np.testing.assert_array_equal(ours, a.astype(ml_dtypes.bfloat16).astype(np.float32))
    small = rng.standard_normal(100).astype(np.float32)
    np.testing.assert_array_equal(_bench("bf16_accuracy").round_to(small, "fp16"),
                                  small.astype(np.float16).astype(np.float32))
    with pytest.raises(ValueError, match="rounding"):
        _bench("bf16_accuracy").round_to(a, "int8")


def _has_avx512_bf16() -> bool:
    import llvmlite.binding as ll
    return bool(ll.get_host_cpu_features().get("avx512bf16", False))


@pytest.mark.skipif(not _has_avx512_bf16(), reason="CPU without avx512_bf16")
def test_bf16_gemm_equals_rounded_product():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    mk = _bench("bf16_microkernel")
    rng = np.random.default_rng(5)
    # a partial last panel (13 rows), odd K (a zero-padded last pair), a partial column block
    m, k, n = 13, 37, 45
    w = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.full(m * n, np.nan, np.float32)
    mk.gemm_bf16(mk.pack_a_bf16(w), m, k, b.view(np.uint32), n, c,
                 np.empty(((k + 1) // 2) * 32, np.uint32), np.empty(192, np.float32))
    rounded = (w.astype(ml_dtypes.bfloat16).astype(np.float64)
               @ b.astype(ml_dtypes.bfloat16).astype(np.float64))
    np.testing.assert_allclose(c.reshape(m, n), rounded, rtol=0, atol=1e-5 * np.abs(rounded).max())
    # and it is not the float32 product: bf16's rounding is visible at this size
    assert np.abs(c.reshape(m, n) - w.astype(np.float64) @ b).max() > 1e-4
