"""Shared test configuration: hypothesis profiles and paths to ../shared.

pytest-xdist workers share one kernel cache (``MNNJIT_CACHE_DIR``, and Numba's cache of the
hand-written kernels): mnnjit's cross-process compile lock (backends/cpu/runtime/compile_lock.py) makes
each kernel compile once, in one worker, and the other workers load it."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
from shared_paths import SHARED  # noqa: E402

# Kernels compile where they are first called, as before tiered execution (results and counters do
# not depend on a background compile's timing); tests about tiering set their own mode.
os.environ.setdefault("MNNJIT_COMPILE", "sync")

settings.register_profile("default", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("ci", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile("ci" if os.environ.get("CI") else "default")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The ../shared directory beside the project (models, reference docs, tools)."""
    if not SHARED.is_dir():
        pytest.skip(f"../shared not found at {SHARED}")
    return SHARED
