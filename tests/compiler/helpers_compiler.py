"""Helpers shared by the compiler tests: build a graph twice and compare compiled vs reference."""
from __future__ import annotations

from typing import Callable

import numpy as np


def reference_and_compiled(build: Callable[[], object]) -> tuple[np.ndarray, np.ndarray]:
    """Build a fresh graph with ``build()`` twice: evaluate one with the reference evaluator, one compiled."""
    from mnnjit import runtime
    from mnnjit.backends import reference
    from mnnjit.compiler import counters

    prev = runtime.set_executor(reference.evaluate)
    try:
        expected = np.asarray(build().read())
    finally:
        runtime.set_executor(prev)
    errors = counters["compile_errors"]
    got = np.asarray(build().read())
    assert counters["compile_errors"] == errors, "a generated kernel failed to compile (see MNNJIT_DEBUG=1)"
    return expected, got


def assert_ulp(expected: np.ndarray, got: np.ndarray, ulps: int) -> None:
    """Same shape and dtype; integers equal; floats within ``ulps`` units in the last place (NaN==NaN)."""
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    if expected.dtype.kind != "f":
        np.testing.assert_array_equal(got, expected)
        return
    both_nan = np.isnan(expected) & np.isnan(got)
    same = (expected == got) | both_nan
    with np.errstate(invalid="ignore"):
        scale = np.spacing(np.maximum(np.abs(expected), np.abs(got)).astype(expected.dtype))
    with np.errstate(invalid="ignore"):
        close = np.abs(expected.astype(np.float64) - got.astype(np.float64)) <= ulps * scale.astype(np.float64)
    bad = ~(same | close)
    assert not bad.any(), f"{bad.sum()} elements differ by more than {ulps} ulp: " \
                          f"expected {expected[bad][:5]}, got {got[bad][:5]}"
