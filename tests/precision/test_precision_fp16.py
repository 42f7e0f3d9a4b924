"""fp16 storage intrinsics: bit-exact against numpy's float16 conversions."""
from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

fp16 = pytest.importorskip("mnnjit.backends.cpu.fp16")


def test_import_mnnjit_does_not_import_numba():
    import subprocess
    code = ("import sys, mnnjit, mnnjit.precision, mnnjit.backends.cpu; "
            "print('numba' in sys.modules, 'llvmlite' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_every_half_widens_exactly():
    halves = np.arange(65536, dtype=np.uint16).view(np.float16)
    got = fp16.to_f32(halves)
    want = halves.astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))  # incl. -0.0


def test_narrowing_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, 65504, 65519.99, 65520, 1e6, -1e6,
                  2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0001, 2.0 ** -14, 1 + 2.0 ** -11,
                  1 + 3 * 2.0 ** -11, 6e-8, 3e-5], np.float32)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).view(np.uint16)
    assert np.array_equal(fp16.to_f16(x).view(np.uint16), want)
    assert np.isnan(fp16.to_f16(np.array([np.nan], np.float32))[0])


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float32, st.integers(1, 300),
                  elements=st.floats(-7e4, 7e4, width=32, allow_nan=False)))
def test_narrowing_matches_numpy_round_to_nearest_even(x):
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).view(np.uint16)
    assert np.array_equal(fp16.to_f16(x).view(np.uint16), want)


def test_out_argument_checked():
    with pytest.raises(ValueError, match="float16"):
        fp16.to_f16(np.ones(3, np.float32), out=np.empty(3, np.float32))
    with pytest.raises(TypeError, match="float16 storage"):
        fp16.to_f32(np.ones(3, np.float32))
