"""Fixtures of the expr tests (helpers live in expr_oracle.py: a conftest module name is not unique)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def MF():
    """Real MNN.expr (the oracle); tests using it are skipped when MNN is not installed."""
    mnn = pytest.importorskip("MNN")
    return mnn.expr
