"""Shared helpers: run the same expr code on mnnjit.expr and on real MNN.expr and compare."""
from __future__ import annotations

import numpy as np
import pytest

import mnnjit.expr as JF


@pytest.fixture(scope="session")
def MF():
    """Real MNN.expr (the oracle); tests using it are skipped when MNN is not installed."""
    mnn = pytest.importorskip("MNN")
    return mnn.expr


def values(F, out):
    """numpy values of a Var / list of Vars (NC4HW4 results converted to NCHW first)."""
    if isinstance(out, (list, tuple)):
        return [values(F, o) for o in out]
    if out.data_format == F.NC4HW4:
        out = F.convert(out, F.NCHW)
    return np.array(out.read())


def both(MF, fn, atol=1e-4, rtol=1e-4, check_dtype=True):
    """Run ``fn(F)`` on both implementations and assert equal results; returns mnnjit's values."""
    mine = values(JF, fn(JF))
    ref = values(MF, fn(MF))
    assert_same(mine, ref, atol, rtol, check_dtype)
    return mine


def assert_same(mine, ref, atol=1e-4, rtol=1e-4, check_dtype=True):
    if isinstance(ref, list):
        assert isinstance(mine, list) and len(mine) == len(ref)
        for a, b in zip(mine, ref):
            assert_same(a, b, atol, rtol, check_dtype)
        return
    assert mine.shape == ref.shape, (mine.shape, ref.shape)
    if check_dtype:
        assert mine.dtype == ref.dtype, (mine.dtype, ref.dtype)
    np.testing.assert_allclose(mine.astype(np.float64), ref.astype(np.float64), atol=atol, rtol=rtol)


def c4(F, a):
    """An NC4HW4 Var holding ``a`` (NCHW logical)."""
    return F.convert(F.const(a, list(a.shape)), F.NC4HW4)
